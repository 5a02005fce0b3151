"""Matplotlib figures for notebook output, built with the object-oriented API only.

Figures are created with :class:`matplotlib.figure.Figure` directly, so drawing never touches
pyplot's global state or backend: the same code works in a kernel, under nbconvert and in tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from io import BytesIO

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

EMPTY_STEP_TRACE_MESSAGE = "no step trace data (enable training_trace)"

_FIGSIZE = (11.0, 3.5)
_MAX_ITERATION_LABELS = 20  # more labels than this overlap on an 11-inch axis
_ZOOM_MARGIN = 0.05  # share of the iteration's span added on each side when zoomed
_ROW_COLORS = {
    "Data Aug Bound": "#f2a541",
    "Iteration": "#4c72b0",
    "FP→BP": "#4c72b0",
    "Iteration Refresh": "#55a868",
    "AllReduce": "#c44e52",
}


@dataclass
class _Row:
    """One labelled row of bars: absolute starts and widths in µs, and the iteration of each bar."""

    label: str
    start_us: np.ndarray
    width_us: np.ndarray
    iteration: np.ndarray


def _floats(series: pd.Series) -> np.ndarray:
    """A column as float64 with NaN for N/A, whether it arrives as float, nullable Int64 or Float64."""
    return series.to_numpy(dtype=np.float64, na_value=np.nan)


def _row(label: str, start_us: np.ndarray, width_us: np.ndarray, iteration: np.ndarray) -> _Row:
    """A row keeping only the bars whose start and width are known (msprof prints N/A otherwise)."""
    ok = np.isfinite(start_us) & np.isfinite(width_us)
    return _Row(label, start_us[ok], width_us[ok], iteration[ok])


def _step_rows(step_trace: pd.DataFrame) -> list[_Row]:
    """The bars of the step timeline, top row first; rows with no bar are left out."""
    it = step_trace["Iteration ID"].to_numpy()
    fp = _floats(step_trace["FP Start(us)"])
    bp = _floats(step_trace["BP End(us)"])
    end = _floats(step_trace["Iteration End(us)"])
    # Inference (no training trace) has no FP/BP: the whole iteration is one bar instead.
    whole = np.isnan(fp) | np.isnan(bp)
    iter_time = _floats(step_trace["Iteration Time(us)"])
    data_aug = _floats(step_trace["Data Aug Bound(us)"])
    fp_bp = _floats(step_trace["FP to BP Time(us)"])
    refresh = _floats(step_trace["Iteration Refresh(us)"])
    # "Reduce Start(us)" / "Reduce Duration(us)" repeat once per AllReduce: find the pairs by position.
    reduce_pos = np.flatnonzero(step_trace.columns == "Reduce Start(us)")
    reduce_pos = reduce_pos[reduce_pos + 1 < step_trace.shape[1]]
    reduce_start = step_trace.iloc[:, reduce_pos].to_numpy(dtype=np.float64, na_value=np.nan)
    reduce_dur = step_trace.iloc[:, reduce_pos + 1].to_numpy(dtype=np.float64, na_value=np.nan)
    rows = [
        _row("Data Aug Bound", fp - data_aug, data_aug, it),
        _row("Iteration", np.where(whole, end - iter_time, np.nan), iter_time, it),
        _row("FP→BP", np.where(whole, np.nan, fp), fp_bp, it),
        _row("Iteration Refresh", np.where(whole, np.nan, bp), refresh, it),
        _row("AllReduce", reduce_start.ravel(), reduce_dur.ravel(), np.repeat(it, len(reduce_pos))),
    ]
    return [r for r in rows if len(r.start_us)]


def _id_list(ids: np.ndarray) -> str:
    """Sorted unique ids, runs of three or more written as ``a-b`` so thousands of steps stay short."""
    values = sorted({int(i) for i in ids})
    parts: list[str] = []
    k = 0
    while k < len(values):
        j = k
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        if j - k >= 2:
            parts.append(f"{values[k]}-{values[j]}")
            k = j + 1
        else:
            parts.append(str(values[k]))
            k += 1
    return ", ".join(parts)


def _empty_figure(message: str) -> Figure:
    """A figure that says why there is no plot, so notebook output never ends in a traceback for no data."""
    fig = Figure(figsize=_FIGSIZE, layout="constrained")
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, fontsize=12, color="0.4")
    return fig


def step_timeline(step_trace: pd.DataFrame, iteration: int | None = None, title: str | None = None) -> Figure:
    """Draw the FP/BP step timeline (msprof ``step_trace``) to show where each training step spends its time.

    One row per phase (Data Aug Bound, FP→BP, Iteration Refresh, AllReduce; "Iteration" when the
    run has no FP/BP points), x in ms since the earliest drawn start. ``iteration`` zooms to that
    step; an Iteration ID not in the table raises ValueError listing the IDs that are.
    """
    if step_trace.empty:
        return _empty_figure(EMPTY_STEP_TRACE_MESSAGE)
    all_ids = step_trace["Iteration ID"].to_numpy()
    if iteration is not None and not (all_ids == iteration).any():
        raise ValueError(f"iteration {iteration} is not in step_trace; available Iteration IDs: {_id_list(all_ids)}")
    rows = _step_rows(step_trace)
    if not rows:
        return _empty_figure(EMPTY_STEP_TRACE_MESSAGE)

    # Subtract the origin in µs before scaling: absolute µs timestamps (~1.7e15) leave little float precision.
    origin = min(r.start_us.min() for r in rows)
    lo_ms = [(r.start_us - origin) / 1000 for r in rows]
    width_ms = [r.width_us / 1000 for r in rows]

    # Per-iteration extent of everything drawn: where to zoom, label and mark iterations.
    ids, inverse = np.unique(np.concatenate([r.iteration for r in rows]), return_inverse=True)
    lo = np.full(len(ids), np.inf)
    hi = np.full(len(ids), -np.inf)
    np.minimum.at(lo, inverse, np.concatenate(lo_ms))
    np.maximum.at(hi, inverse, np.concatenate(lo_ms) + np.concatenate(width_ms))
    if iteration is None:
        x0, x1, margin = lo.min(), hi.max(), 0.01
    elif iteration not in ids:
        raise ValueError(f"iteration {iteration} has no step trace timestamps to draw")
    else:
        x0, x1, margin = lo[ids == iteration].min(), hi[ids == iteration].max(), _ZOOM_MARGIN
    pad = max((x1 - x0) * margin, 1e-3)
    visible = np.flatnonzero((hi >= x0 - pad) & (lo <= x1 + pad))
    # Label and mark every k-th visible iteration so labels and lines never crowd on long runs.
    marked = visible[:: max(1, int(np.ceil(len(visible) / _MAX_ITERATION_LABELS)))]
    dense = len(visible) > _MAX_ITERATION_LABELS

    fig = Figure(figsize=_FIGSIZE, layout="constrained")
    ax = fig.add_subplot()
    for y, (r, x, w) in enumerate(zip(rows, lo_ms, width_ms)):
        # White edges keep back-to-back spans (consecutive AllReduces, inference steps) apart; on long runs
        # they would paint over sub-pixel bars, so there bars have no edge and shade by how much time they fill.
        ax.broken_barh(np.column_stack((x, w)), (y - 0.35, 0.7), facecolors=_ROW_COLORS[r.label],
                       edgecolors="white", linewidths=0 if dense else 0.5, label=r.label)
    ends = (_floats(step_trace["Iteration End(us)"]) - origin) / 1000
    ends = ends[np.isin(step_trace["Iteration ID"].to_numpy(), ids[marked]) & np.isfinite(ends)]
    ax.vlines(ends, 0, 1, transform=ax.get_xaxis_transform(), colors="0.6", linewidths=0.6, linestyles=":",
              zorder=0, label="_iteration ends")
    for k in marked:
        ax.text((lo[k] + hi[k]) / 2, -0.55, str(ids[k]), ha="center", va="bottom", fontsize=8, color="0.3",
                clip_on=True)

    ax.set_xlim(x0 - pad, x1 + pad)
    ax.ticklabel_format(axis="x", useOffset=False)
    ax.set_yticks(range(len(rows)), [r.label for r in rows])
    ax.set_ylim(len(rows) - 0.5, -0.95)  # first row on top, room above it for the iteration labels
    ax.set_xlabel("time since first step (ms)")
    ax.tick_params(axis="y", length=0)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=9)
    heading = title or "Step timeline"
    ax.set_title(heading if iteration is None else f"{heading}: iteration {iteration}", loc="left")
    return fig


def figure_png(fig: Figure, dpi: int = 100) -> bytes:
    """Render a figure to PNG bytes, for static HTML fallbacks where no live matplotlib backend exists."""
    buf = BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()
