"""How a cluster's ranks are grouped on the timeline, and in which order: slowest first.

A grouping is a function of the ClusterProfile that returns ``(label, ranks)`` pairs; each group is
one summary lane until expanded.  :func:`by_server` groups the ranks of one server (8 per server, as a
rank runs on device ``rank % 8`` of its server); for a hybrid-parallel job (its ranks record their
groups), :func:`by_pipeline_stage` groups the ranks of one pipeline stage and :func:`by_parallel_group`
those of each tensor, pipeline, data or expert parallel group.

The order: ranks by their own time per step (:attr:`ClusterProfile.slow_ranks`: step time minus the
communication no compute hides, over the typical steps), slowest first; ranks without a step figure
after them, by rank; groups by their slowest rank.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ...analysis import ClusterProfile

#: Ranks of one server.
RANKS_PER_SERVER = 8

Grouping = Callable[[ClusterProfile], list[tuple[str, list[int]]]]


def rank_span(ranks: list[int]) -> str:
    """``3``, ``0-7`` for a run of consecutive ranks, else the ranks listed."""
    ordered = sorted(ranks)
    if len(ordered) == 1:
        return str(ordered[0])
    if ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"{ordered[0]}-{ordered[-1]}"
    return ", ".join(map(str, ordered))


def by_server(cluster: ClusterProfile, ranks_per_server: int = RANKS_PER_SERVER) -> list[tuple[str, list[int]]]:
    """One group per server: ranks ``k * ranks_per_server`` .. ``(k + 1) * ranks_per_server - 1``."""
    servers: dict[int, list[int]] = {}
    for r in cluster.ranks:
        servers.setdefault(r // ranks_per_server, []).append(r)
    return [(f"server {k} · ranks {rank_span(rs)}", rs) for k, rs in sorted(servers.items())]


def by_pipeline_stage(cluster: ClusterProfile) -> list[tuple[str, list[int]]]:
    """One group per pipeline stage (:meth:`ClusterProfile.pipeline_stages`; one group without a pipeline)."""
    stages: dict[int, list[int]] = {}
    for r, stage in sorted(cluster.pipeline_stages().items()):
        stages.setdefault(stage, []).append(r)
    return [(f"stage {k} · ranks {rank_span(rs)}", rs) for k, rs in sorted(stages.items())]


def by_parallel_group(kind: str) -> Grouping:
    """A grouping with one group per ``kind`` group of :attr:`ClusterProfile.communication_groups` (``tp``,
    ``pp``, ``dp``, ``ep``); ranks in none of them (or a job that recorded none) form one group of their own."""
    def grouping(cluster: ClusterProfile) -> list[tuple[str, list[int]]]:
        groups = cluster.communication_groups
        kinds = sorted(set(groups["Type"])) if len(groups) else []
        if kind not in kinds:
            raise ValueError(f"{cluster.name} has no {kind!r} groups; it has: {', '.join(kinds) or 'none'}")
        out, seen = [], set()
        for rank_set in groups.loc[groups["Type"] == kind, "Rank Set"]:
            ranks = sorted({int(r) for r in str(rank_set).strip("()").split(",") if r.strip()} & set(cluster.ranks))
            if ranks and not seen.intersection(ranks):
                out.append((f"{kind} group · ranks {rank_span(ranks)}", ranks))
                seen.update(ranks)
        rest = sorted(set(cluster.ranks) - seen)
        return out + ([(f"no {kind} group · ranks {rank_span(rest)}", rest)] if rest else [])

    return grouping


def own_time(cluster: ClusterProfile) -> dict[int, float]:
    """Each rank's own time per step (µs), for the ranks that have one."""
    slow = cluster.slow_ranks
    return dict(zip(slow["Rank"].astype(int).tolist(), slow["Own Time(us)"].astype(float).tolist()))


def slowest_first(groups: list[tuple[str, list[int]]], own: dict[int, float]
                  ) -> list[tuple[str, list[int]]]:
    """The groups by their slowest rank's own time, and each group's ranks, slowest first (ranks
    without an own time last, by rank; ties by rank and by first rank)."""
    def rank_key(r: int) -> tuple[float, int]:
        return (-own[r] if r in own else np.inf, r)

    ordered = [(label, sorted(ranks, key=rank_key)) for label, ranks in groups]
    return sorted(ordered, key=lambda g: (rank_key(g[1][0]) if g[1] else (np.inf, 0)))
