"""The critical path of a step: the chain of tasks, waits and gaps, walked back from the step's end, that sets its
length.  Its segments tile the step: they add up to ``end - begin`` exactly."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from .dependency_graph import KINDS, StepGraph, Tasks

COLUMNS = ["iteration", "start", "end", "duration", "kind", "op_name", "op_type", "task_type", "stream", "task_id"]


def path_segments(graph: StepGraph, tasks: Tasks, start: np.ndarray, finish: np.ndarray, end: int,
                  kind: np.ndarray) -> list[tuple]:
    """(start, end, kind, task or -1) from ``graph.begin`` to ``end``, latest first, for the task times ``start`` /
    ``finish`` (the recorded ones, or re-timed ones).

    From the task that ends last: its run is on the path; before it, the stream's previous task and the gap
    between them (host or idle), or, for a wait that waited, the record it waited for (the wait's own tail is a
    wait segment).  Before a stream's first task, the step's launch (host)."""
    begin = graph.begin
    out: list[tuple] = []
    if not len(graph):
        return [(begin, end, "idle", -1)] if end > begin else []
    i, t = last_task(finish, end)
    if t < end:
        out.append((t, end, "idle", -1))
    _, t = Walk(graph, start, finish, kind, begin).back(i, t, out)
    if t > begin:
        out.append((begin, t, "host", -1))
    return out


def last_task(finish: np.ndarray, end: int) -> tuple[int, int]:
    """Where a step's walk back starts: the task that ends last (the first of them on a tie) and the time its
    run is on the path until (its end, or the step's end if that is earlier)."""
    i = int(np.lexsort((np.arange(len(finish)), finish))[-1])
    return i, min(end, int(finish[i]))


class Walk:
    """One step's task times as lists (the walk is a Python loop), walked back from a task by :meth:`back`."""

    def __init__(self, graph: StepGraph, start: np.ndarray, finish: np.ndarray, kind: np.ndarray,
                 begin: int) -> None:
        self.begin = begin
        self.start, self.finish, self.kind = start.tolist(), finish.tolist(), list(kind)
        self.records, self.preds, self.host = graph.record.tolist(), graph.pred.tolist(), graph.host.tolist()

    def back(self, i: int, t: int, out: list[tuple], stop: Callable[[int, int], bool] | None = None
             ) -> tuple[int, int]:
        """Append to ``out`` the segments from time ``t`` back, task ``i`` first (its run clipped at ``t``),
        until ``begin`` or a stream's first task; returns (-1, where it ended), or ``(task, t)`` where
        ``stop(task, t)`` held on reaching a task (whose run is not on ``out``)."""
        begin, start, finish, kind = self.begin, self.start, self.finish, self.kind
        records, preds, host = self.records, self.preds, self.host
        while t > begin and i >= 0:
            if stop is not None and stop(i, t):
                return i, t
            m = records[i]
            if m >= 0 and finish[m] > start[i]:
                at = max(min(finish[m], t), begin)
                out.append((at, t, "wait", i))
                t, i = at, m
                continue
            at = max(min(start[i], t), begin)
            if at < t:
                out.append((at, t, kind[i], i))
            t = at
            p = preds[i]
            before = finish[p] if p >= 0 else begin
            at = max(min(before, t), begin)
            if at < t:
                out.append((at, t, "host" if host[i] or p < 0 else "idle", i if host[i] else -1))
            t, i = at, p
        return -1, t


def frame(rows: list[tuple], tasks: Tasks) -> pd.DataFrame:
    """Segments (iteration, start, end, kind, task row) as the critical path DataFrame."""
    if not rows:
        out = pd.DataFrame({c: [] for c in COLUMNS})
    else:
        it, s, e, k, row = (np.asarray(c) for c in zip(*rows))
        row = row.astype(np.int64)
        has = row >= 0
        pick = np.maximum(row, 0)

        def col(values: np.ndarray, missing) -> np.ndarray:
            return np.where(has, values[pick], missing) if len(values) else np.full(len(row), missing, object)

        out = pd.DataFrame({
            "iteration": it.astype(np.int64), "start": s.astype(np.int64), "end": e.astype(np.int64),
            "duration": (e - s).astype(np.int64), "kind": pd.Categorical(k, categories=KINDS),
            "op_name": col(tasks.name, ""), "op_type": col(tasks.op_type, ""), "task_type": col(tasks.task_type, ""),
            "stream": np.where(has, tasks.stream[pick], -1) if len(tasks) else -1,
            "task_id": np.where(has, tasks.task_id[pick], -1) if len(tasks) else -1,
        })
    out.attrs["assumptions"] = tasks.assumptions
    return out


def step_path(graph: StepGraph, tasks: Tasks) -> list[tuple]:
    """The recorded critical path of ``graph``'s step, earliest segment first, with the iteration and run task rows."""
    kind = tasks.kind[graph.index]
    rows = path_segments(graph, tasks, graph.start, graph.finish, graph.end, kind)
    return [(graph.iteration, s, e, k, int(graph.index[i]) if i >= 0 else -1) for s, e, k, i in reversed(rows)]


def summary(path: pd.DataFrame, top: int = 5) -> pd.DataFrame:
    """Per step: its length, ns per kind on the path and the ``top`` ops with the most path time."""
    rows = []
    for it, seg in path.groupby("iteration", sort=True):
        by_kind = seg.groupby("kind", observed=False)["duration"].sum()
        ops = seg[seg["op_name"].astype(str).ne("") & seg["op_name"].astype(str).ne("N/A")]
        top_ops = ops.groupby("op_name", sort=False)["duration"].sum().sort_values(ascending=False).head(top)
        rows.append({"iteration": int(it), "step_ns": int(seg["duration"].sum()),
                     **{f"{k}_ns": int(by_kind.get(k, 0)) for k in KINDS},
                     "top_ops": "; ".join(f"{n} ({d / 1000:.1f} us)" for n, d in top_ops.items())})
    return pd.DataFrame(rows, columns=["iteration", "step_ns", *(f"{k}_ns" for k in KINDS), "top_ops"])
