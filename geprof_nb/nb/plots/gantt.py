"""The task Gantt (``op_summary``): every task on its stream over time, coloured by Task Type."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .colors import color_of
from .figure import EMPTY_OPS_MESSAGE, empty_figure, factorize, floats, id_list, literal
from .spans import span_chart

#: Written under a task Gantt / host scope chart whose pixel columns are split among kinds (merge_spans).
STACKED_TASKS_NOTE = ("Tasks narrower than a pixel column are merged per column; where Task Types share a column, "
                      "its height is split among them by their time.")


#: The row of the collectives: msprof gives a COMMUNICATION task no Stream ID; they run on HCCL's stream.
COMMUNICATION_ROW = "HCCL (communication)"


def _stream_rows(stream: pd.Series, task_type: pd.Series) -> tuple[np.ndarray, list[str]]:
    """Row of every task and row labels: streams by id, then the collectives (COMMUNICATION tasks without a
    stream id, as msprof prints them) on the HCCL row, then any other task without a stream on "stream N/A"."""
    sid = pd.to_numeric(stream, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    ids = np.unique(sid[np.isfinite(sid)])
    row = np.searchsorted(ids, sid)
    labels = [f"stream {int(i)}" for i in ids]
    loose = np.isnan(sid)
    comm = loose & (task_type.astype(str) == "COMMUNICATION").to_numpy()
    for pick, label in ((comm, COMMUNICATION_ROW), (loose & ~comm, "stream N/A")):
        if pick.any():
            row = np.where(pick, len(labels), row)
            labels.append(label)
    return row.astype(np.int64), labels


def task_gantt(op_summary: pd.DataFrame, iteration: int | None = None, iterations: np.ndarray | None = None,
               title: str | None = None, width_px: int = 1100) -> Figure:
    """Draw every task on its stream over time (msprof ``op_summary``), coloured by Task Type.

    One row per ``Stream ID`` (lowest on top; communication tasks, which msprof gives no stream,
    on the HCCL row, :data:`COMMUNICATION_ROW`), x in ms since the first task shown, a legend of the Task Types
    present.  ``iteration`` keeps the rows whose entry in ``iterations`` (the Iteration ID of
    each row: ``Profile.iteration_of_ops.to_numpy()``) is that id.  The figure is ``width_px``
    pixels wide at 100 dpi, and tasks narrower than one of ``width_px`` columns of the time range
    are merged per column (see :func:`merge_spans`): a row's drawn width is still the union of
    its tasks, the Task Types of a column split its height by their time (so each type's painted
    area is its time, and a type that is never a column's majority still shows; a note under the
    axes says so), and a million tasks draw as at most 2 × rows × ``width_px`` column groups.
    """
    frame = op_summary
    if iteration is not None:
        if iterations is None:
            raise ValueError("task_gantt(iteration=...) needs iterations=, the Iteration ID of each op_summary row "
                             "(Profile.iteration_of_ops.to_numpy())")
        iterations = np.asarray(iterations)
        if len(iterations) != len(frame):
            raise ValueError(f"iterations has {len(iterations)} entries for {len(frame)} op_summary rows")
        chosen = iterations == iteration
        if not chosen.any():
            listed = id_list(iterations[iterations >= 0]) if len(iterations) else "none"
            raise ValueError(f"iteration {iteration} has no op tasks; available Iteration IDs: {listed}")
        frame = frame[chosen]
    start_us = floats(frame["Task Start Time(us)"]) if len(frame) else np.zeros(0)
    dur_us = floats(frame["Task Duration(us)"]) if len(frame) else np.zeros(0)
    ok = np.isfinite(start_us) & np.isfinite(dur_us)
    if not ok.any():
        return empty_figure(EMPTY_OPS_MESSAGE)
    frame, start_us, dur_us = frame[ok], start_us[ok], dur_us[ok]
    # imported tables may lack a column: one "N/A" stream or task type then
    task_type = frame["Task Type"] if "Task Type" in frame else pd.Series(None, frame.index, object)
    row, row_labels = _stream_rows(frame["Stream ID"] if "Stream ID" in frame else pd.Series(np.nan, frame.index),
                                   task_type)
    kind, kinds = factorize(task_type)
    order = sorted(range(len(kinds)), key=lambda k: kinds[k])  # legend and codes in name order
    remap = np.empty(len(kinds), np.int64)
    remap[order] = np.arange(len(kinds))
    kind, kinds = remap[kind], [kinds[k] for k in order]

    t0 = start_us.min()  # subtract in µs first: absolute µs leave little precision after scaling
    lo = (start_us - t0) / 1000.0
    hi = lo + np.maximum(dur_us, 0.0) / 1000.0
    n_rows = len(row_labels)
    fig, ax, x1 = span_chart(row, lo, hi, kind, kinds, row_labels, width_px, 0.42,
                              10 if n_rows <= 12 else 8, "time since the first task shown (ms)", STACKED_TASKS_NOTE)
    ax.ticklabel_format(axis="x", useOffset=False)
    fig.legend([Patch(facecolor=color_of(k), label=k) for k in kinds], kinds, loc="outside right upper",
               frameon=False, fontsize=9, title="Task Type", title_fontsize=9)
    heading = title or "Tasks per stream"
    if iteration is not None:
        heading += f": iteration {iteration}"
    # the counts on a line of their own: a long heading on one line would run into the legend
    ax.set_title(f"{heading}\n{len(frame):,} tasks over {x1:,.3f} ms", loc="left")
    return literal(fig)
