"""The critical path of a cluster's step across its ranks: a collective cannot end before the last of its ranks
has arrived, so where the walk back along one rank reaches a collective another rank arrived at later, the time
before that arrival is the late rank's, and the walk goes on there.

Per step: from the end of the rank whose step ends last, walk back as on one rank (:mod:`.critical_path`); at a
collective whose matching collective on another rank started later (the latest start of all its ranks'), the
collective from that arrival to where the path is is this rank's communication, and the walk continues on the
late rank from the start of its collective.  Collectives match across ranks by communicator (where the run records
it), op name and occurrence within the step (the k-th ``gradients/HcomAllReduce_0`` of the step in that
communicator on every rank that runs it).  The segments tile the last rank's step, ``begin`` to ``end``: a rank's
walk stops at that step's begin, and the time before a rank's own
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
               "rank arrived at later (its matching collective, by communicator where recorded, op name and "
               "occurrence in the step, started later), the path goes to the rank that arrived last, from its "
               "collective's start")

Rank = tuple[Tasks, StepGraph]


def is_collective(tasks: Tasks, rows: np.ndarray) -> np.ndarray:
    """Whether each of the task ``rows`` is a collective (an HCCL task, or an op of a ``Hcom*`` type)."""
    return np.isin(tasks.task_type[rows].astype(str), list(COLLECTIVE_TYPES)) | np.char.startswith(
        tasks.op_type[rows].astype(str), "Hcom")


def task_groups(profile, tasks: Tasks) -> np.ndarray:
    """Per task of ``profile`` (``tasks``: its :func:`.dependency_graph.run_tasks`), the communicator its collective
    ran in, as the run records it (:meth:`..sources.source.Source.collective_groups`, joined to the task by its
    start), or ``""`` where the run does not say: the same op name runs in every TP group of a hybrid-parallel
    job, and only the communicator tells which ranks one execution waited for."""
    out = np.full(len(tasks), "", object)
    groups = profile.source.collective_groups()
    comm = np.flatnonzero(profile.source.communication_rows())
    if groups is None or len(groups) != len(comm) or not len(comm):
        return out
    starts = np.asarray(profile.source.op_rows().start_ns[comm], np.int64)
    by_start = np.argsort(starts, kind="stable")
    coll = np.flatnonzero(is_collective(tasks, np.arange(len(tasks))))
    coll = coll[np.argsort(tasks.start[coll], kind="stable")]
    groups = np.asarray(groups, object)
    if np.array_equal(tasks.start[coll], starts[by_start]):  # the same collectives: in start order
        out[coll] = groups[by_start]
        return out
    once = pd.Series(groups, index=starts)  # else those whose start is one op row's alone
    once = once[~once.index.duplicated(keep=False)]
    found = pd.Series(tasks.start[coll]).map(once)
    out[coll[found.notna().to_numpy()]] = found.dropna().to_numpy(object)
    return out


def collective_keys(tasks: Tasks, graph: StepGraph, groups: np.ndarray | None = None) -> dict[int, tuple]:
    """Per collective task of the step (its row in the graph): (communicator, op name, occurrence of that name in
    that communicator in the step); the communicator is ``""`` without ``groups`` (per task of the run)."""
    rows = graph.index
    coll = is_collective(tasks, rows)
    seen: dict[tuple, int] = defaultdict(int)
    out = {}
    for i in np.flatnonzero(coll)[np.argsort(graph.start[coll], kind="stable")].tolist():
        name = (str(groups[rows[i]]) if groups is not None else "", str(tasks.name[rows[i]]))
        out[i] = (*name, seen[name])
        seen[name] += 1
    return out


def step_path(ranks: Mapping[int, Rank], groups: Mapping[int, np.ndarray] | None = None) -> list[tuple]:
    """One step's cross-rank path, earliest segment first: (rank, start, end, kind, task row of the rank's run or
    -1).  ``ranks``: each rank's tasks and graph of the step; ``groups``: each rank's :func:`task_groups`."""
    last = min(ranks, key=lambda r: (-ranks[r][1].end, r))  # the rank whose step ends last
    begin, end = ranks[last][1].begin, ranks[last][1].end
    keys = {r: collective_keys(*ranks[r], (groups or {}).get(r)) for r in ranks}
    arrivals: dict[tuple, list[tuple[int, int, int]]] = defaultdict(list)  # (start, rank, graph row)
    for r, per in keys.items():
        start = ranks[r][1].start
        for i, key in per.items():
            arrivals[key].append((int(start[i]), r, i))
    # per collective, the last arrival (the lowest rank of those arriving at that ns)
    latest = {key: max(a, key=lambda x: (x[0], -x[1])) for key, a in arrivals.items()}
    walks: dict[int, Walk] = {}
    jumped: set[tuple[int, int]] = set()
    out: list[tuple] = []
    rank = last

    def late(i: int, t: int) -> bool:
        """Whether the collective at ``i`` (on ``rank``) waited for a rank that arrived after it started."""
        key = keys[rank].get(i)
        if key is None:
            return False
        s, r, j = latest[key]
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
        s, r, j = latest[keys[rank][i]]
        at = max(min(s, t), begin)
        if at < t:  # from the last arrival on, the collective is this rank's transfer
            out.append((rank, at, t, "communication", int(graph.index[i])))
        jumped.add((r, j))
        rank, i, t = r, j, at
    if t > begin:
        out.append((rank, begin, t, "host", -1))
    return out[::-1]


def cluster_path(ranks: Mapping[int, tuple[Tasks, list[StepGraph]]], iteration: int | None = None,
                 groups: Mapping[int, np.ndarray] | None = None) -> pd.DataFrame:
    """The cross-rank critical path of every step (``iteration``: one step) of ``ranks`` (rank -> its tasks and
    step graphs), among the ranks that ran it: :data:`~.critical_path.COLUMNS` and ``rank``, earliest segment
    first; a step's segments add up to the step of the rank whose step ends last.  ``groups``: per rank, the
    communicator of each task (:func:`task_groups`); without them collectives match by name alone."""
    per_step: dict[int, dict[int, Rank]] = defaultdict(dict)
    for r, (tasks, graphs) in ranks.items():
        for g in graphs:
            if iteration is None or g.iteration == iteration:
                per_step[g.iteration][r] = (tasks, g)
    rows: dict[int, list[tuple]] = defaultdict(list)  # per rank: (iteration, start, end, kind, row)
    order: dict[int, list[int]] = defaultdict(list)
    n = 0
    for it in sorted(per_step):
        for r, s, e, k, row in step_path(per_step[it], groups):
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
