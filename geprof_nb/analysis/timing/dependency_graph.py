"""The dependency graph of each step, from what a run holds: stream order, event record/wait pairs, host launches.

A task starts when its stream's previous task has ended plus the gap the run shows between them; a gap is
*host* (the device waited for the host to launch the task: an absolute release time, unchanged by device
changes) or *idle* (a device-side pause, e.g. an unrecorded trace task: a fixed length kept when times move).
An EVENT_WAIT ends its own tail after the later of its stream being free and the EVENT_RECORD it waited for,
which is the earliest record on another stream, not yet claimed by an earlier wait, ending no later than the wait
(the records carry no event id; each record is waited for once, in order: pairing with the latest record instead
tied a wait that had not waited to a later, unrelated record, and made a faster link look slower than it is).

Which gaps are host gaps: in a geprof run, those before a node launched one by one (``OP State`` dynamic) and
before each stream's first task of a step (the step's launch); in imported data (torch_npu, msprof, launched op
by op in eager mode) every gap, and without a Stream ID column every task is taken to be on one stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from ..sources.source import RunDirSource

#: Critical path segment kinds.
KINDS = ("compute", "communication", "host", "wait", "idle")
#: Task types (task_time ``kernel_type`` or op_summary ``Task Type``) that move data, and that synchronise streams.
COMMUNICATION_TYPES = frozenset({"HCCL", "COMMUNICATION", "MEMCPY_ASYNC"})
WAIT_TYPES = frozenset({"EVENT_RECORD", "EVENT_WAIT"})
#: Task types an op speedup applies to (AI Core, AI Vector, MIX, AI CPU kernels).
KERNEL_TYPES = frozenset({"KERNEL_AICORE", "KERNEL_AIVEC", "KERNEL_MIX_AIC", "KERNEL_MIX_AIV", "KERNEL_AICPU",
                          "AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV", "AI_CPU", "N/A"})

ASSUMPTIONS_SIMULATED = (
    "tasks from the run's device task log (task_time) joined to op_summary; stream order from start times; "
    "each EVENT_WAIT paired with the earliest unclaimed EVENT_RECORD on another stream ending no later than it; "
    "gaps before dynamic (node-by-node launched) ops and before a stream's first task of a step are host launch "
    "gaps, other gaps fixed device-side pauses")
ASSUMPTIONS_IMPORTED = (
    "imported data: tasks from op_summary (kernel_details); the files hold no event records, so streams depend "
    "on each other only through their order; every gap before a task is taken as the host launching it (eager "
    "mode); without a Stream ID column all tasks are taken to be on one stream; collectives as recorded (their "
    "wait for other ranks is inside their duration)")

ASSUMPTIONS_IMPORTED_TASKS = (
    "imported data: tasks from its task table (kernels, copies, event record/wait where recorded) joined to "
    "op_summary; each EVENT_WAIT paired with the earliest unclaimed EVENT_RECORD on another stream ending no later "
    "than it; every gap before a task is taken as the host launching it (eager mode); collectives as recorded "
    "(their wait for other ranks is inside their duration)")


@dataclass(frozen=True)
class Tasks:
    """Every task of a run that the graph is built on, one row each (numpy columns, ns)."""

    name: np.ndarray  # object: op name (N/A for runtime tasks)
    op_type: np.ndarray  # object
    task_type: np.ndarray  # object: kernel_type / Task Type
    stream: np.ndarray  # int64
    task_id: np.ndarray  # int64
    start: np.ndarray  # int64
    end: np.ndarray  # int64
    dynamic: np.ndarray  # bool: launched node by node by the host
    imported: bool
    assumptions: str
    op_row: np.ndarray | None = None  # int64: the task's op_summary row (-1: none), None where not joined

    def __len__(self) -> int:
        return len(self.start)

    @cached_property
    def kind(self) -> np.ndarray:
        """compute / communication / wait per task."""
        kind = np.full(len(self), "compute", dtype=object)
        kind[np.isin(self.task_type, list(COMMUNICATION_TYPES)) | _is_collective(self.op_type)] = "communication"
        kind[np.isin(self.task_type, list(WAIT_TYPES))] = "wait"
        return kind


    @cached_property
    def names(self) -> tuple[np.ndarray, np.ndarray]:
        """(codes per task, distinct op names), to match patterns once per name."""
        codes, uniques = pd.factorize(self.name.astype(str))
        return codes, np.asarray(uniques, object)

    @cached_property
    def types(self) -> tuple[np.ndarray, np.ndarray]:
        """(codes per task, distinct op types)."""
        codes, uniques = pd.factorize(self.op_type.astype(str))
        return codes, np.asarray(uniques, object)


def _is_collective(op_type: np.ndarray) -> np.ndarray:
    return np.array([str(t).startswith("Hcom") for t in op_type], dtype=bool)


def _ints(frame: pd.DataFrame, column: str, default: np.ndarray) -> np.ndarray:
    """``column`` as int64 (-1 where missing), or ``default`` without the column."""
    if column not in frame:
        return default
    return pd.to_numeric(frame[column], errors="coerce").fillna(-1).to_numpy(np.int64)


def run_tasks(profile) -> Tasks:
    """The tasks of ``profile``: its task_time (kernels, copies, events) with op_summary's OP Type and OP State,
    or for imported data (no task_time) op_summary's rows."""
    ops = profile.op_summary
    ops_ns = profile.times_ns("op_summary")["Task Start Time(us)"].to_numpy(np.int64) if len(ops) else np.zeros(0, int)
    duration = np.rint(ops["Task Duration(us)"].to_numpy(float) * 1000).astype(np.int64) if len(ops) else ops_ns
    stream = _ints(ops, "Stream ID", np.zeros(len(ops), np.int64))
    task_id = _ints(ops, "Task ID", np.arange(len(ops), dtype=np.int64))
    op_type = ops["OP Type"].astype(object).to_numpy() if len(ops) else np.zeros(0, object)
    state = ops["OP State"].astype(str).to_numpy() if "OP State" in ops else np.full(len(ops), "N/A", object)
    times = profile.task_time
    imported = not isinstance(profile.source, RunDirSource)
    if not len(times):
        return Tasks(ops["Op Name"].astype(object).to_numpy() if len(ops) else np.zeros(0, object), op_type,
                     ops["Task Type"].astype(object).to_numpy() if len(ops) else np.zeros(0, object), stream, task_id,
                     ops_ns, ops_ns + duration, np.ones(len(ops), bool), True, ASSUMPTIONS_IMPORTED,
                     np.arange(len(ops), dtype=np.int64))
    ns = profile.times_ns("task_time")
    start = ns["task_start(us)"].to_numpy(np.int64)
    end = ns["task_stop(us)"].to_numpy(np.int64)
    t_stream = times["stream_id"].to_numpy(np.int64)
    t_task = times["task_id"].to_numpy(np.int64)
    keys = pd.MultiIndex.from_arrays([stream, task_id, ops_ns])
    at = keys.get_indexer(pd.MultiIndex.from_arrays([t_stream, t_task, start])) if keys.is_unique else \
        pd.Index(keys).get_indexer_for(pd.MultiIndex.from_arrays([t_stream, t_task, start]))
    found = at >= 0
    types = np.full(len(start), "N/A", dtype=object)
    types[found] = op_type[at[found]]
    dynamic = np.zeros(len(start), bool)
    dynamic[found] = np.char.lower(state[at[found]].astype(str)) == "dynamic"
    return Tasks(times["kernel_name"].astype(object).to_numpy(), types, times["kernel_type"].astype(object).to_numpy(),
                 t_stream, t_task, start, end, dynamic, imported,
                 ASSUMPTIONS_IMPORTED_TASKS if imported else ASSUMPTIONS_SIMULATED, at.astype(np.int64))


@dataclass
class StepGraph:
    """One step's tasks and the edges between them (indices into the step's own arrays).

    ``pred``: the previous task on the same stream (-1: the first of the step); ``gap``: the time between them
    (from the step's begin for a first task; negative where they overlap, as tasks of imported data without a
    Stream ID column can); ``host``: the gap is the host's (``release`` = the recorded start is
    when the host let the task start); ``record``: for an EVENT_WAIT, the record it waited for (-1: none);
    ``tail``: the wait's own time after it could end.  ``order``: a topological order (every edge forward).
    """

    iteration: int
    begin: int
    end: int
    index: np.ndarray  # rows of the run's Tasks
    start: np.ndarray
    finish: np.ndarray
    duration: np.ndarray
    pred: np.ndarray
    gap: np.ndarray
    host: np.ndarray
    record: np.ndarray
    tail: np.ndarray
    order: np.ndarray

    def __len__(self) -> int:
        return len(self.index)


def step_graphs(tasks: Tasks, bounds: pd.DataFrame) -> list[StepGraph]:
    """The graph of every step in ``bounds`` (columns step, begin, end; ns): the tasks starting in [begin, end)."""
    graphs = []
    order_all = np.lexsort((tasks.end, tasks.start))
    starts = tasks.start[order_all]
    for step, begin, end in bounds[["step", "begin", "end"]].itertuples(index=False):
        lo, hi = np.searchsorted(starts, [int(begin), int(end)], side="left")
        graphs.append(_graph(tasks, order_all[lo:hi], int(step), int(begin), int(end)))
    return graphs


def _graph(tasks: Tasks, index: np.ndarray, iteration: int, begin: int, end: int) -> StepGraph:
    n = len(index)
    start, finish = tasks.start[index], tasks.end[index]
    stream, ttype = tasks.stream[index], tasks.task_type[index]
    # stream order: by (stream, start, end)
    by_stream = np.lexsort((finish, start, stream))
    pred = np.full(n, -1, np.int64)
    same = stream[by_stream[1:]] == stream[by_stream[:-1]]
    pred[by_stream[1:][same]] = by_stream[:-1][same]
    prev_end = np.where(pred >= 0, finish[np.maximum(pred, 0)], begin)
    gap = start - prev_end  # < 0: the task overlaps the one before it (imported data without streams)
    host = (tasks.dynamic[index] | (pred < 0)) & (gap > 0)
    if tasks.imported:
        host = gap > 0
    record = np.full(n, -1, np.int64)
    tail = np.zeros(n, np.int64)
    waits = np.flatnonzero(ttype == "EVENT_WAIT")
    recs = np.flatnonzero(ttype == "EVENT_RECORD")
    if len(waits) and len(recs):
        rec_sorted = recs[np.argsort(finish[recs], kind="stable")]
        rec_end = finish[rec_sorted]
        claimed = np.zeros(len(rec_sorted), bool)
        for w in waits[np.argsort(finish[waits], kind="stable")]:
            last = int(np.searchsorted(rec_end, finish[w], side="right"))
            other = np.flatnonzero(stream[rec_sorted[:last]] != stream[w])
            if not len(other):
                continue
            k = other[-1]  # a wait that waited was released by the last record before its end (several may share it)
            if rec_end[k] <= start[w]:  # it did not wait: the oldest record nobody waited for yet
                free = other[~claimed[other]]
                k = free[0] if len(free) else k
            claimed[k] = True
            record[w] = rec_sorted[k]
    has = record >= 0
    tail[has] = finish[has] - np.maximum(start[has], finish[record[has]])
    order = _topological(n, pred, record, finish, start)
    return StepGraph(iteration, begin, end, index, start, finish, finish - start, pred, gap, host, record, tail, order)


def _topological(n: int, pred: np.ndarray, record: np.ndarray, finish: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Tasks so that every task comes after its stream predecessor and its awaited record (Kahn's algorithm,
    ready tasks taken by recorded end time)."""
    import heapq

    children: list[list[int]] = [[] for _ in range(n)]
    indegree = np.zeros(n, np.int64)
    for i in range(n):
        for p in (int(pred[i]), int(record[i])):
            if p >= 0:
                children[p].append(i)
                indegree[i] += 1
    ready = [(int(finish[i]), int(start[i]), i) for i in range(n) if indegree[i] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, _, i = heapq.heappop(ready)
        out.append(i)
        for c in children[i]:
            indegree[c] -= 1
            if indegree[c] == 0:
                heapq.heappush(ready, (int(finish[c]), int(start[c]), c))
    if len(out) < n:  # a record paired with a wait that ends before it could run: drop those event edges
        raise ValueError("the step's event pairs form a cycle")
    return np.asarray(out, np.int64)
