"""The critical path of a cluster's step across its ranks: a collective cannot end before the last of its ranks
has arrived, so where the walk back along one rank reaches a collective another rank arrived at later, the time
before that arrival is the late rank's, and the walk goes on there.

Per step: from the end of the rank whose step ends last, walk back as on one rank (:mod:`.critical_path`); at a
collective whose matching collective on another rank started later (the latest start of all its ranks'), the
collective from that arrival to where the path is is this rank's communication, and the walk continues on the
late rank from the start of its collective.  Collectives match across ranks by op name and occurrence within the
step (the k-th ``gradients/HcomAllReduce_0`` of the step on every rank that runs it).  The segments tile the
last rank's step, ``begin`` to ``end``: a rank's walk stops at that step's begin, and the time before a rank's own
first task is its step's launch (host)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

import numpy as np
import pandas as pd

from .critical_path import COLUMNS, Walk, frame, last_task
from .dependency_graph import COMMUNICATION_TYPES, StepGraph, Tasks

#: Task types that are collectives (a copy, MEMCPY_ASYNC, waits for no other rank).
COLLECTIVE_TYPES = COMMUNICATION_TYPES - {"MEMCPY_ASYNC"}
ASSUMPTIONS = ("across ranks: each step's path starts on the rank whose step ends last; at a collective another "
               "rank arrived at later (its matching collective, by op name and occurrence in the step, started "
               "later), the path goes to the rank that arrived last, from its collective's start")

Rank = tuple[Tasks, StepGraph]


def collective_keys(tasks: Tasks, graph: StepGraph) -> dict[int, tuple[str, int]]:
    """Per collective task of the step (its row in the graph): (op name, occurrence of that name in the step)."""
    rows = graph.index
    types = tasks.task_type[rows].astype(str)
    is_coll = np.isin(types, list(COLLECTIVE_TYPES)) | np.char.startswith(tasks.op_type[rows].astype(str), "Hcom")
    seen: dict[str, int] = defaultdict(int)
    out = {}
    for i in np.flatnonzero(is_coll)[np.argsort(graph.start[is_coll], kind="stable")].tolist():
        name = str(tasks.name[rows[i]])
        out[i] = (name, seen[name])
        seen[name] += 1
    return out


def step_path(ranks: Mapping[int, Rank]) -> list[tuple]:
    """One step's cross-rank path, earliest segment first: (rank, start, end, kind, task row of the rank's run or
    -1).  ``ranks``: each rank's tasks and graph of the step."""
    last = min(ranks, key=lambda r: (-ranks[r][1].end, r))  # the rank whose step ends last
    begin, end = ranks[last][1].begin, ranks[last][1].end
    keys = {r: collective_keys(*ranks[r]) for r in ranks}
    arrivals: dict[tuple[str, int], list[tuple[int, int, int]]] = defaultdict(list)  # (start, rank, graph row)
    for r, per in keys.items():
        start = ranks[r][1].start
        for i, key in per.items():
            arrivals[key].append((int(start[i]), r, i))
    walks: dict[int, Walk] = {}
    jumped: set[tuple[int, int]] = set()
    out: list[tuple] = []
    rank = last

    def late(i: int, t: int) -> bool:
        """Whether the collective at ``i`` (on ``rank``) waited for a rank that arrived after it started."""
        key = keys[rank].get(i)
        if key is None:
            return False
        s, r, j = max(arrivals[key], key=lambda a: (a[0], -a[1]))
        return r != rank and s > ranks[rank][1].start[i] and (r, j) not in jumped

    graph = ranks[last][1]
    if not len(graph):
        return [(last, begin, end, "idle", -1)] if end > begin else []
    i, t = last_task(graph.finish, end)
    if t < end:
        out.append((last, t, end, "idle", -1))
    while True:
        tasks, graph = ranks[rank]
        if rank not in walks:
            walks[rank] = Walk(graph, graph.start, graph.finish, tasks.kind[graph.index], begin)
        segments: list[tuple] = []
        i, t = walks[rank].back(i, t, segments, late)
        out += [(rank, s, e, k, int(graph.index[x]) if x >= 0 else -1) for s, e, k, x in segments]
        if i < 0:
            break
        s, r, j = max(arrivals[keys[rank][i]], key=lambda a: (a[0], -a[1]))
        at = max(min(s, t), begin)
        if at < t:  # from the last arrival on, the collective is this rank's transfer
            out.append((rank, at, t, "communication", int(graph.index[i])))
        jumped.add((r, j))
        rank, i, t = r, j, at
    if t > begin:
        out.append((rank, begin, t, "host", -1))
    return out[::-1]


def cluster_path(ranks: Mapping[int, tuple[Tasks, list[StepGraph]]], iteration: int | None = None) -> pd.DataFrame:
    """The cross-rank critical path of every step (``iteration``: one step) of ``ranks`` (rank -> its tasks and
    step graphs), among the ranks that ran it: :data:`~.critical_path.COLUMNS` and ``rank``, earliest segment
    first; a step's segments add up to the step of the rank whose step ends last."""
    per_step: dict[int, dict[int, Rank]] = defaultdict(dict)
    for r, (tasks, graphs) in ranks.items():
        for g in graphs:
            if iteration is None or g.iteration == iteration:
                per_step[g.iteration][r] = (tasks, g)
    rows: dict[int, list[tuple]] = defaultdict(list)  # per rank: (iteration, start, end, kind, row)
    order: dict[int, list[int]] = defaultdict(list)
    n = 0
    for it in sorted(per_step):
        for r, s, e, k, row in step_path(per_step[it]):
            rows[r].append((it, s, e, k, row))
            order[r].append(n)
            n += 1
    parts = [frame(rows[r], ranks[r][0]).assign(rank=np.int64(r), _order=order[r]) for r in rows]
    if not parts:
        out = pd.DataFrame({c: [] for c in [*COLUMNS, "rank"]})
    else:
        out = pd.concat(parts, ignore_index=True).sort_values("_order").drop(columns="_order")
        out = out.reset_index(drop=True)
    first = next(iter(ranks.values()), None)
    out.attrs["assumptions"] = "; ".join(x for x in (first[0].assumptions if first else "", ASSUMPTIONS) if x)
    return out
