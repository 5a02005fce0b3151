"""``step_breakdown``: where each step's time went, as torch_npu's
``step_trace_time.csv`` defines it.

Per step (the window from the previous iteration's end to this one's): Computing is the union of
compute task spans inside the window, Communication the union of collective spans,
Communication(Not Overlapped) the part of it no compute task covers, Overlapped the rest of it, and
Free the time neither covers.  Bubble (``hcom_receive`` time, pipeline stages) is 0 here, so Stage
is the step's length and "Not Overlapped and Exclude Receive" equals Not Overlapped.
Preparing is torch_npu's (``get_prepare_time``: first device task start minus
the framework step start): from the ModelExecute call that ran the step (the
bounds' ``framework_begin``, which the ascend_pt export writes as
``ProfilerStep#<n>``) to the first task of the step that call launched: the
main model's tasks of that iteration (the bounds' ``model``, where the source
names it), never another graph's that ran earlier in the window (that one began
before the call: Preparing went negative).  Where the source has no framework
start for a step (no ModelExecute record, imported msprof output) it counts
from the step window's start instead; where the step's own tasks are not known
(none of them in the op rows), from the first task to start in the window.

Which tasks a step holds is torch_npu's rule (``TraceStepTimeParser``): the device timeline cut by the
steps' time ranges, so every task inside a window counts, whatever its model or Iteration ID.  The
windows are the main model's iterations (:meth:`Source.step_bounds`); when several graphs run, another
graph's kernels inside a step's window are busy time of that step, not Free.  A step in whose window no
task ran has no row: its task records are gone (``storage_limit`` aged them out, the step trace
remained), and torch_npu too writes a row only for a step that has device events.  Without step bounds
each iteration is a window spanning its own tasks.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .intervals import union
from .summary import OpRows, follows_previous

STEP_TRACE_TIME = ["Device_id", "Step", "Computing", "Communication(Not Overlapped)", "Overlapped",
                   "Communication", "Free", "Stage", "Bubble", "Communication(Not Overlapped and Exclude Receive)",
                   "Preparing"]


def _length(starts: np.ndarray, ends: np.ndarray) -> int:
    return int((ends - starts).sum())


def bounds_from_step_trace(step_trace: pd.DataFrame) -> pd.DataFrame:
    """(step, begin ns, end ns, model) per iteration of the main model (:func:`main_model`) from
    step_trace's float columns (imported data)."""
    model = main_model(step_trace)
    st = step_trace if model is None else step_trace[step_trace["Model ID"] == model]
    st = st.dropna(subset=["Iteration End(us)"])
    end = np.rint(st["Iteration End(us)"].to_numpy() * 1000).astype(np.int64)
    begin = end - np.rint(st["Iteration Time(us)"].fillna(0).to_numpy() * 1000).astype(np.int64)
    return pd.DataFrame({"step": st["Iteration ID"].to_numpy(np.int64), "begin": begin, "end": end,
                         "model": np.full(len(st), -1 if model is None else model, np.int64)})


def _follows(bounds: pd.DataFrame) -> np.ndarray:
    """Per row of ``bounds``: whether the row before is its step's predecessor in the same collection
    window (``bounds["window"]`` where the source knows it, else one window)."""
    step = bounds["step"].to_numpy(np.int64)
    window = bounds["window"].to_numpy(np.int64) if "window" in bounds else np.zeros(len(step), np.int64)
    return follows_previous(np.zeros(len(step), np.int64), step, window)


def chained_steps(bounds: pd.DataFrame) -> np.ndarray:
    """The steps whose window runs from their predecessor's end (step_breakdown's Stage is a
    whole step period there: :func:`step_windows`)."""
    return bounds["step"].to_numpy(np.int64)[_follows(bounds)] if len(bounds) else np.zeros(0, np.int64)


def step_periods(breakdown: pd.DataFrame, bounds: pd.DataFrame) -> pd.DataFrame:
    """The step_breakdown rows whose window is a whole step period, from the previous iteration's end
    (:func:`chained_steps`; without step bounds every row but the first), or every row when none is.

    A step with no previous end (the first, or the first of a step schedule's window) spans only
    itself, without the gap before it; averaging only whole periods makes the means of two runs of
    different lengths agree (the advisor's step length and compare's step split both use this).
    """
    if breakdown.empty:
        return breakdown
    whole = whole_periods(breakdown, bounds)
    return breakdown[whole] if whole.any() else breakdown


def whole_periods(breakdown: pd.DataFrame, bounds: pd.DataFrame) -> np.ndarray:
    """Per step_breakdown row, whether its window is a whole step period (:func:`chained_steps`;
    without step bounds every row but the first)."""
    if len(bounds):
        return np.isin(pd.to_numeric(breakdown["Step"], errors="coerce"), chained_steps(bounds))
    return np.arange(len(breakdown)) > 0


def main_model(step_trace: pd.DataFrame) -> int | None:
    """The Model ID whose iterations are a step trace table's steps: the model with the most iterations,
    the lowest id among equals (``None`` without rows)."""
    if step_trace.empty or "Model ID" not in step_trace:
        return None
    counts = step_trace["Model ID"].value_counts()
    return int(counts[counts == counts.max()].index.min())


def step_windows(bounds: pd.DataFrame, rows: OpRows) -> pd.DataFrame:
    """(step, start ns, end ns) per iteration: from the previous iteration's end to this one's.

    A step whose previous iteration was not collected in the same collection window
    (the first, one after a gap, or the first of a step schedule's next window:
    ``bounds["window"]`` where the source knows it) starts at its own begin, so
    uncollected steps and the profiler's own stop/start are not counted as Free
    time.  Without step bounds, each iteration spans its own tasks.
    """
    if len(bounds):
        step = bounds["step"].to_numpy(np.int64)
        begin, end = bounds["begin"].to_numpy(np.int64), bounds["end"].to_numpy(np.int64)
        start = np.where(_follows(bounds), np.r_[0, end[:-1]], begin)
        return pd.DataFrame({"step": step, "start": start, "end": end})
    dur = np.rint(rows.frame["Task Duration(us)"].to_numpy() * 1000).astype(np.int64)
    out = [(int(i), int(rows.start_ns[rows.iteration == i].min()),
            int((rows.start_ns + dur)[rows.iteration == i].max())) for i in np.unique(rows.iteration)]
    return pd.DataFrame(out, columns=["step", "start", "end"])


def communication_rows(rows: OpRows) -> np.ndarray:
    """Which op rows are collectives, as op_summary says (``Task Type`` ``COMMUNICATION``)."""
    return (rows.frame["Task Type"] == "COMMUNICATION").to_numpy(bool)


def step_breakdown(rows: OpRows, bounds: pd.DataFrame, device_id: int = 0,
                   communication: np.ndarray | None = None) -> pd.DataFrame:
    """One row per step with torch_npu's ``step_trace_time.csv`` columns (us); a step in whose window
    no task ran has none (module docstring).

    ``bounds``: (step, begin, end) in ns per iteration (:meth:`Source.step_bounds`), with the step's
    framework start in ``framework_begin`` where the source knows it (-1 or no column: not known) and
    the main model in ``model`` (-1 or no column: not known; the step's own tasks are then its
    iteration's, whatever their model).
    ``communication``: which rows are collectives (:meth:`Source.communication_rows`, which
    also knows them at ``task_trace`` l0, where op_summary has no Task Type); by default
    :func:`communication_rows`.
    """
    f = rows.frame
    if f.empty:
        return pd.DataFrame(columns=STEP_TRACE_TIME)
    start = rows.start_ns.astype(np.int64)
    end = start + np.rint(f["Task Duration(us)"].to_numpy() * 1000).astype(np.int64)
    comm = communication_rows(rows) if communication is None else np.asarray(communication, bool)
    windows = step_windows(bounds, rows)
    prepared_from = windows["start"].to_numpy(np.int64)
    if len(bounds) and "framework_begin" in bounds:
        framework = bounds["framework_begin"].to_numpy(np.int64)
        prepared_from = np.where(framework >= 0, framework, prepared_from)
    tasks = _tasks_in_windows(windows, start, end) if len(bounds) else _tasks_of_iterations(windows, rows.iteration)
    of_main_model = _of_model(f, bounds)
    out = []
    for (step, w0, w1), inside, prepared in zip(windows.itertuples(index=False), tasks, prepared_from.tolist()):
        if len(inside) == 0:
            continue
        s, e = np.clip(start[inside], w0, w1), np.clip(end[inside], w0, w1)
        c = comm[inside]
        computing, communication = _length(*union(s[~c], e[~c])), _length(*union(s[c], e[c]))
        busy = _length(*union(s, e))
        overlapped = computing + communication - busy  # both unions are disjoint intervals
        not_overlapped = communication - overlapped
        e2e = w1 - w0
        own = inside[(rows.iteration[inside] == step) & of_main_model[inside]]  # what the step's call launched
        started = start[inside][start[inside] >= w0]  # else torch_npu's first task: the first to start in the step
        first = int(start[own].min()) if len(own) else int(started.min()) if len(started) else w1
        out.append((device_id, step, computing, not_overlapped, overlapped, communication, e2e - busy, e2e, 0,
                    not_overlapped, first - prepared))
    ns = np.array(out, dtype=np.int64).reshape(-1, len(STEP_TRACE_TIME))
    return pd.DataFrame({c: ns[:, k] if k < 2 else ns[:, k] / 1000.0 for k, c in enumerate(STEP_TRACE_TIME)})


def _of_model(frame: pd.DataFrame, bounds: pd.DataFrame) -> np.ndarray:
    """Which op rows are the main model's (the bounds' ``model``); all of them where either side does not
    say (no ``model`` in the bounds or -1, no ``Model ID`` column)."""
    model = int(bounds["model"].iloc[0]) if len(bounds) and "model" in bounds else -1
    if model < 0 or "Model ID" not in frame:
        return np.ones(len(frame), bool)
    return (pd.to_numeric(frame["Model ID"], errors="coerce") == model).to_numpy(bool)


def _tasks_in_windows(windows: pd.DataFrame, start: np.ndarray, end: np.ndarray) -> list[np.ndarray]:
    """Per window, the rows of every task that ran inside it (or started in it), any model or iteration."""
    by_start = np.argsort(start, kind="stable")
    first_start = start[by_start]
    longest = int((end - start).max())
    w0, w1 = windows["start"].to_numpy(np.int64), windows["end"].to_numpy(np.int64)
    lo = np.searchsorted(first_start, w0 - longest, "left")  # no task starting earlier reaches the window
    hi = np.searchsorted(first_start, w1, "left")
    out = []
    for a, b, w in zip(lo.tolist(), hi.tolist(), w0.tolist()):
        near = by_start[a:b]
        out.append(near[(end[near] > w) | (start[near] >= w)])
    return out


def _tasks_of_iterations(windows: pd.DataFrame, iteration: np.ndarray) -> list[np.ndarray]:
    """Per window (one per iteration, without step bounds), the rows of that iteration, in their order."""
    order = np.argsort(iteration, kind="stable")
    steps = iteration[order]
    first_row = np.searchsorted(steps, windows["step"].to_numpy(), "left")
    last_row = np.searchsorted(steps, windows["step"].to_numpy(), "right")
    return [order[a:b] for a, b in zip(first_row.tolist(), last_row.tolist())]
