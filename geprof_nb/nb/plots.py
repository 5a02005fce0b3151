"""Matplotlib figures for notebook output, built with the object-oriented API only.

Figures are created with :class:`matplotlib.figure.Figure` directly, so drawing never touches
pyplot's global state or backend: the same code works in a kernel, under nbconvert and in tests.

The figures, each from a Profile table (x in ms, sizes in MiB, every axis labelled):

* :func:`step_timeline` (``step_trace``): FP→BP, Iteration Refresh, AllReduce, GetNext and Data Aug
  Bound per iteration.
* :func:`task_gantt` (``op_summary``): one row per stream, tasks coloured by Task Type.
* :func:`op_type_bars` (``op_statistic``): total time per OP Type, with its share.
* :func:`pipe_ratios` (``op_summary``): mean AI Core ``*_ratio`` columns of the longest ops, stacked.
* :func:`memory_lifetimes` (``tensor_lifetimes``, ``memory_record``, ``memory_peak``): tensors as
  address × time rectangles over the allocated-memory curve, of the last iteration by default.
* :func:`host_scopes` (``host_events``, ``Source.api_calls()``): host scopes on their own timeline.

Timelines with many spans (Gantt, host scopes) draw one compound path per colour and merge
spans narrower than a pixel column, the kinds of a column stacked by their time (:func:`_draw_spans`),
so a million tasks render in under a second; the step timeline merges its sub-pixel bars per column
too, shaded by the time they fill (:func:`_column_bars`). Colours are per name (:func:`color_of`): a
Task Type has the same colour in every plot.
"""

from __future__ import annotations

import textwrap
import zlib
from dataclasses import dataclass
from io import BytesIO
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch, PathPatch
from matplotlib.path import Path
from matplotlib.text import Text

EMPTY_STEP_TRACE_MESSAGE = "no step trace data (profile with training_trace on, and run a step while it collects)"
EMPTY_OPS_MESSAGE = "no op tasks (enable task_trace)"
EMPTY_OP_STATISTIC_MESSAGE = "no op_statistic rows (enable task_trace)"
NO_RATIOS_MESSAGE = ("op_summary has no AI Core *_ratio columns: profile with --aic-metrics PipeUtilization "
                     "(and --task-trace l1) for the pipe ratios")
NO_MEMORY_MESSAGE = "no memory records: profile with --task-memory on"
#: Written under a task Gantt / host scope chart whose pixel columns are split among kinds (_merge_spans).
STACKED_TASKS_NOTE = ("Tasks narrower than a pixel column are merged per column; where Task Types share a column, "
                      "its height is split among them by their time.")
STACKED_SCOPES_NOTE = ("Scopes narrower than a pixel column are merged per column; where scopes share a column, "
                       "its height is split among them by their time.")
NO_HOST_EVENTS_MESSAGE = ("no GE host events: profile a dynamic-shape graph (e.g. ge.models.mlp(dynamic=True)) "
                          "with --ge-api l1")

_FIGSIZE = (11.0, 3.5)
_MAX_ITERATION_LABELS = 20  # more labels than this overlap on an 11-inch axis
_ZOOM_MARGIN = 0.05  # share of the iteration's span added on each side when zoomed
#: Pixel columns of the step timeline: its width at 100 dpi (the axes get fewer, so a column is never
#: wider than a pixel).
_STEP_COLUMNS = int(_FIGSIZE[0] * 100)
#: The palest shade of a column a row's bars only partly fill: full colour times this, at least.
_MIN_SHADE = 0.4
MiB = 1024 * 1024

#: The colour of every Task Type / Core Type (op_summary, op_statistic, task_time names), the
#: same in every plot.  Names not listed get a colour of :data:`_EXTRA_COLORS` from a hash of
#: the name, so they are stable too.
TASK_TYPE_COLORS = {
    "AI_CORE": "#4c72b0",
    "AI_VECTOR_CORE": "#55a868",
    "MIX_AIC": "#8172b3",
    "MIX_AIV": "#64b5cd",
    "AI_CPU": "#937860",
    "COMMUNICATION": "#c44e52",
    "MEMCPY_ASYNC": "#dd8452",
    "EVENT_RECORD": "#8c8c8c",
    "EVENT_WAIT": "#bcbcbc",
    "WRITE_BACK": "#da8bc3",
    "FFTS_PLUS": "#ccb974",
    "DSA": "#76b7b2",
    "DVPP": "#b07aa1",
    "FUSION": "#9c755f",
}
_ALIASES = {  # other spellings of the same kinds (task_time kernel types, real msprof output)
    "KERNEL_AICORE": "AI_CORE", "AIC": "AI_CORE", "AICORE": "AI_CORE",
    "KERNEL_AIVEC": "AI_VECTOR_CORE", "AIV": "AI_VECTOR_CORE", "AI_VEC": "AI_VECTOR_CORE",
    "KERNEL_MIX_AIC": "MIX_AIC", "KERNEL_MIX_AIV": "MIX_AIV", "KERNEL_AICPU": "AI_CPU", "AICPU": "AI_CPU",
    "HCCL": "COMMUNICATION", "HCCL_AI_CPU": "COMMUNICATION", "COMMUNICATION_TASK": "COMMUNICATION",
    "MEMCPY": "MEMCPY_ASYNC", "MEMCPY_ASYNC_V2": "MEMCPY_ASYNC",
}
#: Host scopes and API names with a fixed colour (the rest hash into :data:`_EXTRA_COLORS`).
HOST_COLORS = {
    "InferShape": "#4c72b0",
    "Tiling": "#55a868",
    "AllocMemory": "#8172b3",
    "KernelLaunchPrepare": "#ccb974",
    "rtKernelLaunch": "#dd8452",
    "LaunchKernelWithHandle": "#dd8452",
    "LaunchHcomKernel": "#c44e52",
    "CopyH2D": "#937860",
    "RunGraph": "#8c8c8c",
    "ModelExecute": "#bcbcbc",
}
_EXTRA_COLORS = ["#e377c2", "#17becf", "#bcbd22", "#9467bd", "#ff9896", "#98df8a", "#aec7e8", "#ffbb78",
                 "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5", "#7f7f7f", "#2ca02c", "#1f77b4"]
_ROW_COLORS = {
    "Data Aug Bound": "#f2a541",
    "GetNext": TASK_TYPE_COLORS["AI_CPU"],  # GetNext is an AI CPU op
    "Iteration": "#4c72b0",
    "FP→BP": "#4c72b0",
    "Iteration Refresh": "#55a868",
    "AllReduce": TASK_TYPE_COLORS["COMMUNICATION"],
}
#: Tensor colours of memory_lifetimes, by the stream that allocated them (in stream id order).
_STREAM_COLORS = ["#4c72b0", "#c44e52", "#55a868", "#8172b3", "#dd8452", "#937860", "#64b5cd", "#da8bc3"]
#: Pipe colours of pipe_ratios; ``aiv_`` pipes of an A2 chip get a lighter shade of the same colour.
PIPE_COLORS = {
    "mac": "#4c72b0", "vec": "#55a868", "scalar": "#8172b3", "mte1": "#ccb974", "mte2": "#dd8452",
    "mte3": "#937860", "fixpipe": "#da8bc3",
}


def color_of(name: str) -> str:
    """The colour of a Task Type, Core Type, host scope or API name, the same in every plot."""
    name = str(name)
    key = _ALIASES.get(name.upper(), name.upper())
    if key in TASK_TYPE_COLORS:
        return TASK_TYPE_COLORS[key]
    if name in HOST_COLORS:
        return HOST_COLORS[name]
    return _EXTRA_COLORS[zlib.crc32(name.encode()) % len(_EXTRA_COLORS)]


def _lighter(color: str, amount: float = 0.45) -> tuple[float, float, float]:
    from matplotlib.colors import to_rgb

    r, g, b = to_rgb(color)
    return (r + (1 - r) * amount, g + (1 - g) * amount, b + (1 - b) * amount)


def _tidy(ax) -> None:
    """No top/right spines: the plots are read against their own axes."""
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def format_size(nbytes: float) -> str:
    """A byte count in the binary unit (B, KiB, MiB, GiB, TiB) that shows it with 3 significant
    digits, so a 12 KiB peak does not read "0.0 MiB": ``512 B``, ``12.1 KiB``, ``1.50 MiB``."""
    value, unit = float(nbytes), "B"
    for larger in ("KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024:
            break
        value, unit = value / 1024, larger
    if unit == "B":
        return f"{value:.0f} B"
    value = float(f"{value:.3g}")
    decimals = 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2
    return f"{value:.{decimals}f} {unit}"


def _literal(fig: Figure) -> Figure:
    """Show every text of ``fig`` as typed, never as mathtext: labels, legends and titles carry op,
    op type, graph and stream names, and an op named ``cost$a_b$`` would lose its dollars and grow a
    subscript.  These plots format their numbers without mathtext, so no text of theirs needs it."""
    for text in fig.findobj(Text):
        text.set_parse_math(False)
    return fig


def _short(text: str, limit: int = 52) -> str:
    """A long op name cut at the front: its end (layer, op) is what tells ops of one scope apart."""
    text = str(text)
    return text if len(text) <= limit else "…" + text[len(text) - limit + 1:]


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
    reduce_start, reduce_dur = _span_columns(step_trace, "Reduce Start(us)", {"Reduce Duration(us)": False})
    getnext_start, getnext_dur = _span_columns(step_trace, "GetNext Start(us)", _GETNEXT_SECOND)
    rows = [
        _row("Data Aug Bound", fp - data_aug, data_aug, it),
        _row("GetNext", getnext_start.ravel(), getnext_dur.ravel(), np.repeat(it, getnext_start.shape[1])),
        _row("Iteration", np.where(whole, end - iter_time, np.nan), iter_time, it),
        _row("FP→BP", np.where(whole, np.nan, fp), fp_bp, it),
        _row("Iteration Refresh", np.where(whole, np.nan, bp), refresh, it),
        _row("AllReduce", reduce_start.ravel(), reduce_dur.ravel(), np.repeat(it, reduce_start.shape[1])),
    ]
    return [r for r in rows if len(r.start_us)]


#: The column after a ``GetNext Start(us)`` and whether it holds an end time (else a duration).
#: geprof's step_trace has ``GetNext Start(us)``, ``GetNext End(us)``, ``GetNext Time(us)`` when the
#: graph reads its input with GetNext; msprof's step_trace CSV has no GetNext columns (its timeline
#: JSON has them), so a table that adds them in any of these forms is drawn.
_GETNEXT_SECOND = {"GetNext Duration(us)": False, "GetNext Time(us)": False, "GetNext End(us)": True}


def _span_columns(step_trace: pd.DataFrame, start_name: str, second: dict[str, bool]) -> tuple[np.ndarray, np.ndarray]:
    """(starts, durations), one column per span of each row, from repeated (start, duration-or-end)
    column pairs.  The pairs repeat under one name (one per AllReduce), so they are read by position."""
    names = list(step_trace.columns)
    pos = [i for i, c in enumerate(names) if c == start_name and i + 1 < len(names) and names[i + 1] in second]
    start = step_trace.iloc[:, pos].to_numpy(dtype=np.float64, na_value=np.nan)
    other = step_trace.iloc[:, [i + 1 for i in pos]].to_numpy(dtype=np.float64, na_value=np.nan)
    is_end = np.array([second[names[i + 1]] for i in pos], dtype=bool)
    return start, np.where(is_end, other - start, other)


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
    return _literal(fig)


def _column_bars(start: np.ndarray, width: np.ndarray, color: str, x0: float, x1: float, columns: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The bars that show one row's disjoint pieces (:func:`_pieces`, in start order) at ``columns``
    pixel columns over ``[x0, x1]``: x, width, face colour and edge width of each.

    A piece at least a column wide is drawn as it is, in full colour (white-edged when a few columns
    wide, so back-to-back spans stay apart).  The narrower ones are merged per column: every column
    they put time in is filled, shaded by how much of it they fill (from :data:`_MIN_SHADE` of the
    colour when nearly empty to full colour when full), so a phase that a thousand steps repeat shows
    in every column it occurs in and its density shows in the shade; at most ``columns`` such bars."""
    from matplotlib.colors import to_rgba_array

    px = (x1 - x0) / columns
    wide = width >= px
    s, w = start[~wide], width[~wide]
    # the narrow pieces' time before x is piecewise linear: flat between pieces, rising over each one
    knots = np.column_stack((s, s + w)).ravel()
    before = np.r_[0.0, np.cumsum(w)]
    edges = x0 + px * np.arange(columns + 1)
    cover = np.diff(np.interp(edges, knots, np.column_stack((before[:-1], before[1:])).ravel())) / px \
        if len(s) else np.zeros(columns)
    col = np.flatnonzero(cover > 0)
    shade = np.r_[_MIN_SHADE + (1 - _MIN_SHADE) * np.minimum(cover[col], 1.0), np.ones(wide.sum())]
    rgba = np.repeat(to_rgba_array(color), len(shade), axis=0)
    rgba[:, :3] = rgba[:, :3] * shade[:, None] + (1.0 - shade[:, None])  # blended with the white background
    edge = np.r_[np.zeros(len(col)), np.where(width[wide] >= _EDGE_MIN_COLUMNS * px, 0.5, 0.0)]
    return np.r_[x0 + col * px, start[wide]], np.r_[np.full(len(col), px), width[wide]], rgba, edge


def step_timeline(step_trace: pd.DataFrame, iteration: int | None = None, title: str | None = None) -> Figure:
    """Draw the FP/BP step timeline (msprof ``step_trace``) to show where each training step spends its time.

    One row per phase, top down: Data Aug Bound (the gap from the previous iteration's end to this
    FP start), GetNext (``GetNext Start(us)`` columns: graphs fed by GetNext), FP→BP, Iteration Refresh
    (BP end → iteration end) and every AllReduce (the repeated ``Reduce Start(us)`` /
    ``Reduce Duration(us)`` pairs); "Iteration" replaces FP→BP and Iteration Refresh when the run has
    no FP/BP points (inference). x in ms since the earliest drawn start. ``iteration`` zooms to that
    step; an Iteration ID not in the table raises ValueError listing the IDs that are.

    Bars at least a pixel column wide (of the figure's 1100) are drawn as they are; narrower ones
    (every bar, on a run of thousands of steps) are merged per column, and a column they put time in
    is filled, shaded by how much of it they fill (:func:`_column_bars`): every step's phase shows in
    its row at any zoom, in at most 1100 bars a row.
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

    fig = Figure(figsize=_FIGSIZE, layout="constrained")
    ax = fig.add_subplot()
    view = (x0 - pad, x1 + pad)
    lo_all = np.concatenate(lo_ms)
    pieces = _pieces(np.repeat(np.arange(len(rows)), [len(x) for x in lo_ms]), lo_all,
                     lo_all + np.concatenate(width_ms), np.zeros(len(lo_all), np.int64), *view)
    for y, r in enumerate(rows):
        mine = pieces.row == y
        x, w, colors, edges = _column_bars(pieces.start[mine], pieces.width[mine], _ROW_COLORS[r.label], *view,
                                           _STEP_COLUMNS)
        ax.broken_barh(np.column_stack((x, w)), (y - 0.35, 0.7), facecolors=colors, edgecolors="white",
                       linewidths=edges, label=r.label)
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
    ax.legend([Patch(facecolor=_ROW_COLORS[r.label]) for r in rows], [r.label for r in rows], loc="upper left",
              bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=9)
    heading = title or "Step timeline"
    ax.set_title(heading if iteration is None else f"{heading}: iteration {iteration}", loc="left")
    return _literal(fig)


# ------------------------------------------------------------------ compound-path span drawing
@dataclass
class _Spans:
    """Spans on rows (disjoint pieces, or rectangles as drawn): row, start and width (x units), and
    the code of their colour."""

    row: np.ndarray
    start: np.ndarray
    width: np.ndarray
    kind: np.ndarray


def _pieces(row: np.ndarray, start: np.ndarray, end: np.ndarray, kind: np.ndarray, x0: float, x1: float) -> _Spans:
    """Intervals ``[start, end)`` clipped to ``[x0, x1]`` and split into disjoint pieces whose union per
    row is the union of the row's intervals (an interval keeps only what no earlier-starting one
    covers), in (row, start) order."""
    keep = np.isfinite(start) & np.isfinite(end)
    row, start, end, kind = row[keep], np.maximum(start[keep], x0), np.minimum(end[keep], x1), kind[keep]
    keep = end > start
    row, start, end, kind = row[keep], start[keep], end[keep], kind[keep]
    if len(row) == 0:
        return _Spans(*(np.zeros(0, t) for t in (np.int64, float, float, np.int64)))
    # One float key orders by (row, start): rows are spaced further apart than the view is wide.
    stride = 2.0 * (x1 - x0) + 1.0
    base = row * stride - x0
    order = np.argsort(base + start, kind="stable")
    row, start, end, kind, base = row[order], start[order], end[order], kind[order], base[order]
    reach = np.maximum.accumulate(base + end)  # furthest end so far, offset by row: a new row starts below it
    covered = np.empty_like(start)
    covered[0] = -np.inf
    covered[1:] = reach[:-1] - base[1:]
    piece_start = np.maximum(start, covered)
    keep = end > piece_start
    return _Spans(row[keep], piece_start[keep], (end - piece_start)[keep], kind[keep])


@dataclass
class _Bands(_Spans):
    """Rectangles of merged spans (:func:`_merge_spans`): besides :class:`_Spans`, the lower edge and
    the height of each as shares of its row's bar height (0 and 1 for a span drawn alone)."""

    lower: np.ndarray
    height: np.ndarray


def _merge_spans(row: np.ndarray, start: np.ndarray, end: np.ndarray, kind: np.ndarray, n_kinds: int,
                 x0: float, x1: float, width_px: int) -> _Bands:
    """The rectangles that show intervals ``[start, end)`` on rows at ``width_px`` columns over ``[x0, x1]``.

    1. The intervals become disjoint pieces with the same union per row (:func:`_pieces`).
    2. A piece at least one column wide is a group of its own; the narrower pieces of a row are
       grouped by the pixel column their start falls in (up to a wide piece).  A group spans from its
       first piece's start, as wide as its pieces together, so groups never overlap.
    3. A group's height is split among the kinds in it by the time each covers, stacked in kind
       order: one rectangle per (group, kind).

    So each kind's drawn area is its time on the row (times the bar height) whatever the zoom: a kind
    that is never the majority of a column still shows, in a band as tall as its share.  Each row's
    drawn width equals the union of its intervals, a rectangle is exactly its task when nothing else
    shares its pixel column, and there are at most 2 × rows × ``width_px`` groups.
    """
    pieces = _pieces(row, start, end, kind, x0, x1)
    row, start, width, kind = pieces.row, pieces.start, pieces.width, pieces.kind
    if len(row) == 0:
        return _Bands(row, start, width, kind, width.copy(), width.copy())
    px = (x1 - x0) / width_px
    column = np.minimum(((start - x0) / px).astype(np.int64), width_px - 1)
    wide = width >= px
    new_group = np.r_[True, (row[1:] != row[:-1]) | (column[1:] != column[:-1]) | wide[1:] | wide[:-1]]
    first = np.flatnonzero(new_group)
    # the time of each (group, kind) present: a hash of the pairs, then sums (a dense group x kind
    # table would grow with kinds that never meet, as host scope names do)
    codes, keys = pd.factorize((np.cumsum(new_group) - 1) * n_kinds + kind)
    time = np.bincount(codes, weights=width)
    order = np.argsort(keys)
    keys, time = keys[order], time[order]
    group, band_kind = np.divmod(keys, n_kinds)
    group_first = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    total = np.add.reduceat(time, group_first)[group]  # a group of one kind: exactly its time, height 1
    before = np.cumsum(time) - time
    before -= before[group_first][group]  # the time of the group's kinds stacked below this one
    return _Bands(row[first][group], start[first][group], total, band_kind, before / total, time / total)


def _rect_path(x: np.ndarray, w: np.ndarray, y: np.ndarray, h: np.ndarray | float) -> Path:
    """One compound path of axis-aligned rectangles (x, y lower left; w, h size)."""
    n = len(x)
    h = np.broadcast_to(np.asarray(h, float), (n,))
    verts = np.empty((n, 5, 2))
    verts[:, 0, 0] = verts[:, 3, 0] = verts[:, 4, 0] = x
    verts[:, 1, 0] = verts[:, 2, 0] = x + w
    verts[:, 0, 1] = verts[:, 1, 1] = verts[:, 4, 1] = y
    verts[:, 2, 1] = verts[:, 3, 1] = y + h
    codes = np.tile(np.array([Path.MOVETO, Path.LINETO, Path.LINETO, Path.LINETO, Path.CLOSEPOLY], Path.code_type), n)
    return Path(verts.reshape(-1, 2), codes)


def _add_rects(ax, x, w, y, h, color, label: str, **style) -> PathPatch:
    """Rectangles as one PathPatch (``add_artist``: no data-limit update, set the limits yourself)."""
    patch = PathPatch(_rect_path(np.asarray(x, float), np.asarray(w, float), np.asarray(y, float), h),
                      facecolor=color, label=label, **({"edgecolor": "none", "linewidth": 0} | style))
    ax.add_artist(patch)
    return patch


def _draw_spans(ax, row: np.ndarray, start: np.ndarray, end: np.ndarray, kind: np.ndarray, names: list[str],
                colors: list, x0: float, x1: float, width_px: int, height: float = 0.8) -> _Bands:
    """Draw intervals on rows ``0..n`` (row ``r``'s bars ``height`` tall, centred at y = r) as one
    PathPatch per kind, merged per pixel column with the kinds of a column stacked (:func:`_merge_spans`);
    returns the rectangles drawn.  Each patch is labelled with its kind name (for tests and hover
    tools); legends use proxy handles."""
    spans = _merge_spans(np.asarray(row, np.int64), np.asarray(start, float), np.asarray(end, float),
                         np.asarray(kind, np.int64), len(names), x0, x1, width_px)
    # Spans a few pixels wide get a white edge, so back-to-back tasks of one kind stay apart; on
    # narrower ones an edge would paint over the colour.
    wide = spans.width >= _EDGE_MIN_COLUMNS * (x1 - x0) / width_px
    y = spans.row - height / 2 + spans.lower * height
    for k, (name, color) in enumerate(zip(names, colors)):
        mine = spans.kind == k
        for part, style in ((mine & ~wide, {}), (mine & wide, {"edgecolor": "white", "linewidth": 0.6})):
            if part.any():
                _add_rects(ax, spans.start[part], spans.width[part], y[part], spans.height[part] * height, color,
                           name, **style)
    return spans


_EDGE_MIN_COLUMNS = 4


def _span_chart(row: np.ndarray, lo: np.ndarray, hi: np.ndarray, kind: np.ndarray, kinds: list[str],
                labels: list[str], width_px: int, row_inches: float, fontsize: int, xlabel: str, stacked_note: str):
    """A figure of labelled rows of coloured spans (ms from 0), as the task Gantt and the host scopes
    draw them; returns the figure, its axes and the right end of the time axis.  ``stacked_note`` is
    written under the axes when a pixel column's height is split among kinds (:func:`_merge_spans`),
    so the reader knows a thin band is a share of the column's time, not a short span."""
    x1 = max(float(hi.max()), 1e-3)
    n_rows = len(labels)
    fig = Figure(figsize=(width_px / 100, min(1.6 + row_inches * n_rows, 9.0)), layout="constrained")
    ax = fig.add_subplot()
    drawn = _draw_spans(ax, row, lo, hi, kind, kinds, [color_of(k) for k in kinds], 0.0, x1, width_px)
    if (drawn.lower > 0).any():  # wrapped to the figure's width (about 6 px a character at 8 pt)
        fig.supxlabel(textwrap.fill(stacked_note, max(40, width_px // 6)), x=0.0, ha="left", fontsize=8,
                      color="0.4")
    ax.set_xlim(-0.005 * x1, 1.005 * x1)
    ax.set_ylim(n_rows - 0.5, -0.5)
    ax.set_yticks(range(n_rows), labels, fontsize=fontsize)
    ax.tick_params(axis="y", length=0)
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", color="0.9", linewidth=0.6)
    ax.set_axisbelow(True)
    _tidy(ax)
    return fig, ax, x1


def _factorize(values: pd.Series, missing: str = "N/A") -> tuple[np.ndarray, list[str]]:
    """Codes and names of a text column (categorical, object or string; N/A for missing)."""
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    names = [str(u) for u in uniques]
    if (codes < 0).any():
        codes = np.where(codes < 0, len(names), codes)
        names.append(missing)
    return codes.astype(np.int64), names


# ------------------------------------------------------------------------------ task Gantt
def _stream_rows(stream: pd.Series) -> tuple[np.ndarray, list[str]]:
    """Row of every task (streams by id, N/A last, as msprof prints communication tasks) and row labels."""
    sid = pd.to_numeric(stream, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    ids = np.unique(sid[np.isfinite(sid)])
    row = np.searchsorted(ids, sid)
    labels = [f"stream {int(i)}" for i in ids]
    if np.isnan(sid).any():
        row = np.where(np.isnan(sid), len(ids), row)
        labels.append("stream N/A")
    return row.astype(np.int64), labels


def task_gantt(op_summary: pd.DataFrame, iteration: int | None = None, iterations: np.ndarray | None = None,
               title: str | None = None, width_px: int = 1100) -> Figure:
    """Draw every task on its stream over time (msprof ``op_summary``), coloured by Task Type.

    One row per ``Stream ID`` (lowest on top; communication tasks, which msprof gives no stream,
    on a "stream N/A" row), x in ms since the first task shown, a legend of the Task Types
    present.  ``iteration`` keeps the rows whose entry in ``iterations`` (the Iteration ID of
    each row: ``Profile.iteration_of_ops.to_numpy()``) is that id.  The figure is ``width_px``
    pixels wide at 100 dpi, and tasks narrower than one of ``width_px`` columns of the time range
    are merged per column (see :func:`_merge_spans`): a row's drawn width is still the union of
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
            listed = _id_list(iterations[iterations >= 0]) if len(iterations) else "none"
            raise ValueError(f"iteration {iteration} has no op tasks; available Iteration IDs: {listed}")
        frame = frame[chosen]
    start_us = _floats(frame["Task Start Time(us)"]) if len(frame) else np.zeros(0)
    dur_us = _floats(frame["Task Duration(us)"]) if len(frame) else np.zeros(0)
    ok = np.isfinite(start_us) & np.isfinite(dur_us)
    if not ok.any():
        return _empty_figure(EMPTY_OPS_MESSAGE)
    frame, start_us, dur_us = frame[ok], start_us[ok], dur_us[ok]
    # imported tables may lack a column: one "N/A" stream or task type then
    row, row_labels = _stream_rows(frame["Stream ID"] if "Stream ID" in frame else pd.Series(np.nan, frame.index))
    kind, kinds = _factorize(frame["Task Type"] if "Task Type" in frame else pd.Series(None, frame.index, object))
    order = sorted(range(len(kinds)), key=lambda k: kinds[k])  # legend and codes in name order
    remap = np.empty(len(kinds), np.int64)
    remap[order] = np.arange(len(kinds))
    kind, kinds = remap[kind], [kinds[k] for k in order]

    t0 = start_us.min()  # subtract in µs first: absolute µs leave little precision after scaling
    lo = (start_us - t0) / 1000.0
    hi = lo + np.maximum(dur_us, 0.0) / 1000.0
    n_rows = len(row_labels)
    fig, ax, x1 = _span_chart(row, lo, hi, kind, kinds, row_labels, width_px, 0.42,
                              10 if n_rows <= 12 else 8, "time since the first task shown (ms)", STACKED_TASKS_NOTE)
    ax.ticklabel_format(axis="x", useOffset=False)
    fig.legend([Patch(facecolor=color_of(k), label=k) for k in kinds], kinds, loc="outside right upper",
               frameon=False, fontsize=9, title="Task Type", title_fontsize=9)
    heading = title or "Tasks per stream"
    if iteration is not None:
        heading += f": iteration {iteration}"
    ax.set_title(f"{heading}  ({len(frame):,} tasks over {x1:,.3f} ms)", loc="left")
    return _literal(fig)


# --------------------------------------------------------------------------- op type bars
def op_type_bars(op_statistic: pd.DataFrame, top: int = 15, title: str | None = None) -> Figure:
    """Draw the total time per OP Type (msprof ``op_statistic``), largest on top, with its share.

    Rows are summed per (OP Type, Core Type) over devices; the label names the Core Type when an
    OP Type runs on several.  Bars are coloured by Core Type (as Task Types in the Gantt), and each
    ends with its share of all ops' time.  x in µs, or ms when the largest total reaches 10 ms
    (the axis label says which).  Only the ``top`` longest are drawn; the title says how many of
    how many, and their share.
    """
    if op_statistic.empty:
        return _empty_figure(EMPTY_OP_STATISTIC_MESSAGE)
    stats = pd.DataFrame({
        "op": op_statistic["OP Type"].astype(str).to_numpy(),
        "core": (op_statistic["Core Type"].astype(str).to_numpy() if "Core Type" in op_statistic
                 else np.full(len(op_statistic), "")),
        "total": pd.to_numeric(op_statistic["Total Time(us)"], errors="coerce").to_numpy(np.float64, na_value=np.nan),
    })
    stats = stats.groupby(["op", "core"], sort=False, as_index=False)["total"].sum()
    grand = float(stats["total"].sum())
    stats = stats.sort_values("total", ascending=False, kind="stable")
    several = stats.groupby("op")["core"].transform("nunique") > 1
    stats["label"] = np.where(several, stats["op"] + " (" + stats["core"] + ")", stats["op"])
    shown = stats.head(top)
    in_ms = shown["total"].max() >= 10_000
    scale, unit = (1000.0, "ms") if in_ms else (1.0, "µs")
    values = shown["total"].to_numpy() / scale
    share = 100.0 * shown["total"].to_numpy() / grand if grand > 0 else np.zeros(len(shown))

    fig = Figure(figsize=(11.0, 1.2 + 0.3 * len(shown)), layout="constrained")
    ax = fig.add_subplot()
    y = np.arange(len(shown))
    colors = [color_of(c) for c in shown["core"]]
    ax.barh(y, values, height=0.7, color=colors)
    for yi, v, sh in zip(y, values, share):
        ax.text(v, yi, f" {sh:.1f}%", va="center", ha="left", fontsize=8, color="0.25")
    ax.set_yticks(y, [_short(lbl, 48) for lbl in shown["label"]], fontsize=9)
    ax.set_ylim(len(shown) - 0.5, -0.5)
    ax.set_xlim(0, values.max() * 1.12 if len(values) and values.max() > 0 else 1)
    ax.set_xlabel(f"total time ({unit})")
    ax.tick_params(axis="y", length=0)
    _tidy(ax)
    cores = list(dict.fromkeys(c for c in shown["core"] if c))
    if cores:
        ax.legend([Patch(facecolor=color_of(c)) for c in cores], cores, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  frameon=False, fontsize=9, title="Core Type", title_fontsize=9)
    heading = title or "Time per OP Type"
    if len(stats) > len(shown):
        heading += f": top {len(shown)} of {len(stats)} ({share.sum():.1f}% of the time)"
    ax.set_title(heading, loc="left")
    return _literal(fig)


# ---------------------------------------------------------------------------- pipe ratios
def _ratio_columns(op_summary: pd.DataFrame) -> list[str]:
    """The AI Core ``*_ratio`` columns of op_summary (pipes, instruction mix, conflicts), in table order."""
    return [c for c in op_summary.columns if isinstance(c, str) and c.endswith("_ratio")]


def _ratio_color(column: str, k: int) -> Any:
    name = column[: -len("_ratio")]
    prefix, _, pipe = name.partition("_")
    if prefix in ("aic", "aiv") and pipe in PIPE_COLORS:
        return PIPE_COLORS[pipe] if prefix == "aic" or pipe in ("vec", "mte3") else _lighter(PIPE_COLORS[pipe])
    if name in PIPE_COLORS:
        return PIPE_COLORS[name]
    return _EXTRA_COLORS[k % len(_EXTRA_COLORS)]


def _numbers(column: pd.Series, rows: np.ndarray) -> np.ndarray:
    """``column``'s values at positions ``rows`` as float64, NaN where there is no number (N/A)."""
    values = column.to_numpy()[rows]
    if values.dtype.kind in "fiu":
        return values.astype(np.float64)
    return pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(np.float64, na_value=np.nan)


def pipe_ratios(op_summary: pd.DataFrame, top: int = 15, title: str | None = None) -> Figure:
    """Draw the AI Core ratios of the ``top`` longest ops as stacked horizontal bars.

    Ops are grouped by ``Op Name`` and ranked by total ``Task Duration(us)`` among those with a
    ratio value; each segment is the mean of one ``*_ratio`` column over the op's executions (N/A,
    as on rows of the other core type, is skipped; a column with no value for an op adds nothing).
    The columns are whichever the chip and aic_metrics group give: ``aic_mac_ratio`` ...
    ``aiv_mte3_ratio`` on 910B, ``mac_ratio`` ... ``mte3_ratio`` on 910A (PipeUtilization), the
    instruction mix for ArithmeticUtilization, bank conflicts for ResourceConflictRatio.  Pipes
    work in parallel, so a bar can be longer than 1.  Without ratio columns (Memory, L2Cache, ...
    groups, or task_trace l0) the figure says to profile with ``--aic-metrics PipeUtilization``.
    """
    if op_summary.empty:
        return _empty_figure(EMPTY_OPS_MESSAGE)
    columns = _ratio_columns(op_summary)
    if not columns:
        return _empty_figure(NO_RATIOS_MESSAGE)
    # Only the rows with a ratio are read, and names stay codes until the top ops are known: a
    # long run's op_summary has millions of rows of a few hundred names.
    rows = np.flatnonzero(np.logical_or.reduce([op_summary[c].notna().to_numpy() for c in columns]))
    values = [_numbers(op_summary[c], rows) for c in columns]
    some = np.logical_or.reduce([~np.isnan(v) for v in values])  # N/A text is no value either
    if not some.all():
        rows, values = rows[some], [v[some] for v in values]
    if not len(rows):
        return _empty_figure("no op has AI Core ratio values (AI CPU and communication tasks have none)")
    code, op_names = _factorize(op_summary["Op Name"].iloc[rows])  # codes in the order the ops first ran
    n_ops = len(op_names)
    total = np.bincount(code, weights=np.nan_to_num(_numbers(op_summary["Task Duration(us)"], rows)), minlength=n_ops)
    ranked = np.argsort(-total, kind="stable")[:top]  # ties keep the order the ops first ran in
    with np.errstate(invalid="ignore"):  # per op the mean of each column over the values it has (0 / 0: none)
        means = pd.DataFrame({c: np.bincount(code, weights=np.nan_to_num(v), minlength=n_ops)[ranked]
                              / np.bincount(code, weights=~np.isnan(v), minlength=n_ops)[ranked]
                              for c, v in zip(columns, values)})
    names = [op_names[k] for k in ranked]
    total = total[ranked]
    columns = [c for c in columns if means[c].notna().any()]
    in_ms = total[0] >= 10_000

    fig = Figure(figsize=(11.0, 1.4 + 0.3 * len(names)), layout="constrained")
    ax = fig.add_subplot()
    y = np.arange(len(names))
    left = np.zeros(len(names))
    for k, c in enumerate(columns):
        width = means[c].fillna(0.0).to_numpy()
        ax.barh(y, width, left=left, height=0.7, color=_ratio_color(c, k), label=c[: -len("_ratio")],
                edgecolor="white", linewidth=0.4)
        left += width
    for yi, end, t in zip(y, left, total):
        ax.text(end, yi, f" {t / 1000:,.2f} ms" if in_ms else f" {t:,.1f} µs", va="center", ha="left", fontsize=8,
                color="0.35")
    ax.set_yticks(y, [_short(n) for n in names], fontsize=8)
    ax.set_ylim(len(names) - 0.5, -0.5)
    ax.set_xlim(0, max(float(left.max()) * 1.15, 0.1))
    ax.set_xlabel("mean ratio of the op's cycles, stacked (pipes overlap: the sum can exceed 1)")
    ax.tick_params(axis="y", length=0)
    _tidy(ax)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
              fontsize=8, title="ratio", title_fontsize=8)
    heading = title or "AI Core ratios per op"
    ax.set_title(f"{heading}: the {len(names)} longest ops of {n_ops} (text: total task time)", loc="left")
    return _literal(fig)


# ------------------------------------------------------------------------ memory lifetimes
def _step_window(step_trace: pd.DataFrame | None, iteration: int) -> tuple[float, float]:
    """(begin, end) µs of an iteration: its end minus its Iteration Time, and its end."""
    if step_trace is None or step_trace.empty:
        raise ValueError(f"iteration {iteration}: pass step_trace= to find the iteration's time window")
    ids = step_trace["Iteration ID"].to_numpy()
    hit = ids == iteration
    if not hit.any():
        raise ValueError(f"iteration {iteration} is not in step_trace; available Iteration IDs: {_id_list(ids)}")
    end = _floats(step_trace["Iteration End(us)"])[hit]
    begin = end - _floats(step_trace["Iteration Time(us)"])[hit]
    if not (np.isfinite(begin).any() and np.isfinite(end).any()):
        raise ValueError(f"iteration {iteration} has no step trace timestamps")
    return float(np.nanmin(begin)), float(np.nanmax(end))


#: ``memory_lifetimes(..., iteration=ALL_ITERATIONS)`` draws the whole run.
ALL_ITERATIONS = "all"


def _iterations_named(iteration: int | tuple[int, int]) -> str:
    """``iteration 3`` or ``iterations 3-7``."""
    if isinstance(iteration, tuple):
        return f"iterations {iteration[0]}-{iteration[1]}"
    return f"iteration {iteration}"


def _iterations_window(step_trace: pd.DataFrame | None, iteration: int | tuple[int, int]) -> tuple[float, float]:
    """(begin, end) µs of an iteration, or of the iterations ``first..last`` of a pair."""
    if not isinstance(iteration, tuple):
        return _step_window(step_trace, iteration)
    first, last = iteration
    if first > last:
        raise ValueError(f"iteration=({first}, {last}): a range is (first, last) with first <= last")
    return _step_window(step_trace, first)[0], _step_window(step_trace, last)[1]


def _step_curve_points(t: np.ndarray, v: np.ndarray, x0: float, x1: float, columns: int) -> np.ndarray:
    """The positions of the points that draw a step curve (``t`` ascending) at ``columns`` pixel columns
    over ``[x0, x1]``: every point when there are at most 3 a column, else in each column its (first)
    lowest, its (first) highest and its last point.  Each column then spans the same values as the
    whole curve (its peaks exact) and the value held after it is its last."""
    n = len(t)
    if n <= 3 * columns:
        return np.arange(n)
    col = np.clip(((t - x0) * (columns / (x1 - x0))).astype(np.int64), 0, columns - 1)
    first = np.flatnonzero(np.r_[True, col[1:] != col[:-1]])  # each column's first point
    counts = np.diff(np.r_[first, n])
    position = np.arange(n)

    def first_at(value: np.ndarray) -> np.ndarray:
        """Per column, the first point whose value is the column's ``value`` (none if all are NaN)."""
        pos = np.minimum.reduceat(np.where(v == np.repeat(value, counts), position, n), first)
        return pos[pos < n]

    lowest, highest = first_at(np.fmin.reduceat(v, first)), first_at(np.fmax.reduceat(v, first))
    return np.unique(np.r_[lowest, highest, first[1:] - 1, n - 1])


@dataclass
class _Tensors:
    """Rows of ``tensor_lifetimes`` with their Allocation and Release Time(us) as floats (NaN: never
    released), converted once and selected together."""

    frame: pd.DataFrame
    alloc_us: np.ndarray
    release_us: np.ndarray

    def largest(self, top: int | None) -> _Tensors:
        """The ``top`` largest by Size(KB), in table order; all of them when ``top`` is None or not fewer."""
        if top is None or len(self.frame) <= top:
            return self
        keep = np.sort(np.argsort(-_floats(self.frame["Size(KB)"]), kind="stable")[:top])
        return _Tensors(self.frame.iloc[keep], self.alloc_us[keep], self.release_us[keep])


@dataclass
class _MemoryView:
    """What :func:`memory_lifetimes` draws: the tensors that live in its time window ``[w0, w1]`` (µs),
    the memory records in it and the peak to mark, for an iteration, a ``(first, last)`` pair of them or
    :data:`ALL_ITERATIONS` (the whole run, from its first record to its last)."""

    iteration: int | tuple[int, int] | str
    w0: float
    w1: float
    tensors: _Tensors  # every tensor live in the window, before ``top`` (they name the peak's allocation)
    memory_record: pd.DataFrame
    record_us: np.ndarray  # memory_record's Timestamp(us), every row
    in_window: np.ndarray  # the positions of the rows in the window, in time order
    peak: Any

    @property
    def whole(self) -> bool:
        """True for the whole run, False for an iteration or a range of them."""
        return isinstance(self.iteration, str)

    @property
    def span_ms(self) -> float:
        """The window's length (ms), at least 1 µs so that a single instant still has an x axis."""
        return max((self.w1 - self.w0) / 1000.0, 1e-3)

    def ms(self, t_us: Any) -> Any:
        """x of times in µs: ms since the start of the window."""
        return (t_us - self.w0) / 1000.0


def _checked_iteration(iteration: Any) -> int | tuple[int, int] | str | None:
    """``iteration`` as :func:`memory_lifetimes` takes it (a list is a ``(first, last)`` pair), checked
    before any table is read."""
    if isinstance(iteration, list):
        iteration = tuple(iteration)
    if isinstance(iteration, str) and iteration != ALL_ITERATIONS:
        raise ValueError(f"iteration={iteration!r}: use an Iteration ID, a (first, last) pair, "
                         f"{ALL_ITERATIONS!r} (the whole run) or None (the last iteration)")
    return iteration


def _last_iteration(step_trace: pd.DataFrame | None) -> int | str:
    """The default view: the last iteration of ``step_trace``, as the explorer and ``Profile.ops()``
    show, or the whole run without one."""
    has_steps = step_trace is not None and len(step_trace)
    return int(step_trace["Iteration ID"].iloc[-1]) if has_steps else ALL_ITERATIONS


def _profile_memory(profile: Any, iteration: int | tuple[int, int] | str) -> tuple[Any, Any, Any]:
    """A Profile's tensor_lifetimes, memory_record and peak for ``iteration``: the whole run's tables for
    the whole run or a range, one iteration's own records (``Profile.step_memory``) for one iteration,
    so that drawing a long run's last step does not build its whole-run tables."""
    if isinstance(iteration, (str, tuple)):
        return profile.tensor_lifetimes, profile.memory_record, profile.memory_peak
    mem = profile.step_memory(int(iteration))
    return mem.tensor_lifetimes, mem.memory_record, mem.peak


def _memory_view(tensor_lifetimes: Any, memory_record: pd.DataFrame | None, peak: Any,
                 step_trace: pd.DataFrame | None, iteration: Any) -> _MemoryView | None:
    """The tables and time window :func:`memory_lifetimes` is asked for (its arguments, a Profile's
    tables where not given), or None when neither table has a row."""
    iteration = _checked_iteration(iteration)
    profile = None
    if not isinstance(tensor_lifetimes, pd.DataFrame) and hasattr(tensor_lifetimes, "step_memory"):
        profile = tensor_lifetimes
        step_trace = profile.step_trace if step_trace is None else step_trace
    if iteration is None:
        iteration = _last_iteration(step_trace)
    window = None if isinstance(iteration, str) else _iterations_window(step_trace, iteration)
    if profile is not None:
        tensor_lifetimes, profile_record, profile_peak = _profile_memory(profile, iteration)
        memory_record = profile_record if memory_record is None else memory_record
        peak = profile_peak if peak is None else peak
    tl = tensor_lifetimes if tensor_lifetimes is not None else pd.DataFrame()
    mr = memory_record if memory_record is not None else pd.DataFrame()
    if tl.empty and mr.empty:
        return None
    record_us = _floats(mr["Timestamp(us)"]) if len(mr) else np.zeros(0)
    alloc = _floats(tl["Allocation Time(us)"]) if len(tl) else np.zeros(0)
    release = _floats(tl["Release Time(us)"]) if len(tl) else np.zeros(0)
    if window is None:  # the whole run: from its first event to its last
        window = float(np.nanmin(np.r_[alloc, record_us])), float(np.nanmax(np.r_[alloc, release, record_us]))
    w0, w1 = window
    live = (alloc <= w1) & (np.isnan(release) | (release >= w0))
    in_window = np.flatnonzero((record_us >= w0) & (record_us <= w1))
    if not (np.diff(record_us[in_window]) >= 0).all():
        in_window = in_window[np.argsort(record_us[in_window], kind="stable")]
    return _MemoryView(iteration, w0, w1, _Tensors(tl[live], alloc[live], release[live]), mr, record_us,
                       in_window, peak)


def _stream_name(stream_id: int) -> str:
    """A stream's name in the legend (-1: the stream is not known)."""
    return f"stream {stream_id}" if stream_id >= 0 else "stream N/A"


def _stacked_pools(model: np.ndarray, end_mib: np.ndarray) -> tuple[np.ndarray, float, list[tuple[float, int]]]:
    """Stack the models' pools, in model order, each as high as its highest tensor end (``end_mib``):
    each tensor's pool base (MiB), the stack's height and (top, model) of each pool."""
    base = np.zeros(len(model))
    bottom, pools = 0.0, []
    for m in np.unique(model):
        mine = model == m
        base[mine] = bottom
        bottom += float(np.nanmax(end_mib[mine]))
        pools.append((bottom, int(m)))
    return base, bottom, pools


def _place_rows(model: np.ndarray, addr_mib: np.ndarray, size_mib: np.ndarray,
                base: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One row per place in the pool (model, address, size): the boxes of a place never overlap in time,
    so they merge per pixel column as a Gantt row's tasks do.  Each tensor's row, and each row's y and
    height (MiB)."""
    place = pd.DataFrame({"model": model, "address": addr_mib, "size": size_mib})
    row = place.groupby(["model", "address", "size"], sort=False, dropna=False).ngroup().to_numpy()
    row_y, row_h = np.zeros(row.max() + 1), np.zeros(row.max() + 1)
    row_y[row], row_h[row] = base + addr_mib, size_mib
    return row, row_y, row_h


def _draw_stream_boxes(ax: Axes, boxes: _Bands, y: np.ndarray, h: np.ndarray, streams: np.ndarray,
                       height: float, span_ms: float) -> None:
    """Draw the boxes in their stream's colour, one compound path per stream and style.  A white edge
    separates neighbours, but only on rectangles big enough to keep their colour (about 1% of the
    axes, ``height`` × ``span_ms``, both ways); smaller ones are drawn plain."""
    edged = (h >= 0.01 * height) & (boxes.width >= 0.01 * span_ms)
    for k, sid in enumerate(streams):
        for part, style in ((~edged, {}), (edged, {"edgecolor": "white", "linewidth": 0.4})):
            mine = (boxes.kind == k) & part
            if mine.any():
                _add_rects(ax, boxes.start[mine], boxes.width[mine], y[mine], h[mine],
                           _STREAM_COLORS[k % len(_STREAM_COLORS)], _stream_name(sid), **style)


def _draw_pool_tops(ax: Axes, pools: list[tuple[float, int]]) -> None:
    """A dashed line at the top of each model's pool, labelled with the model at the right."""
    for top, m in pools:
        ax.axhline(top, color="0.5", linewidth=0.6, linestyle="--")
        ax.text(0.995, top, f"model {m} ", transform=ax.get_yaxis_transform(), ha="right", va="top",
                fontsize=8, color="0.4")


def _draw_tensor_boxes(ax: Axes, tensors: _Tensors, view: _MemoryView, width_px: int) -> str:
    """Draw ``tensors`` as address × time boxes on ``ax``, merged per pixel column of ``width_px`` and
    coloured by stream, the models' pools stacked; returns what the title says of them."""
    tl = tensors.frame
    size_mib = _floats(tl["Size(KB)"]) / 1024.0
    addr_mib = _floats(tl["Address"]) / MiB
    model = pd.to_numeric(tl["Model ID"], errors="coerce").fillna(-1).to_numpy(np.int64) if "Model ID" in tl \
        else np.zeros(len(tl), np.int64)
    base, height, pools = _stacked_pools(model, addr_mib + size_mib)
    x = view.ms(tensors.alloc_us)
    x_end = view.ms(np.minimum(np.where(np.isnan(tensors.release_us), view.w1, tensors.release_us), view.w1))
    stream = pd.to_numeric(tl["Stream ID"], errors="coerce").fillna(-1).to_numpy(np.int64)
    kind, streams = pd.factorize(stream, sort=True)
    row, row_y, row_h = _place_rows(model, addr_mib, size_mib, base)
    boxes = _merge_spans(row, x, x_end, kind, len(streams), 0.0, view.span_ms, width_px)
    # a place's streams in one pixel column share its height by their time
    y, h = row_y[boxes.row] + boxes.lower * row_h[boxes.row], boxes.height * row_h[boxes.row]
    _draw_stream_boxes(ax, boxes, y, h, streams, height, view.span_ms)
    if len(pools) > 1:
        _draw_pool_tops(ax, pools)
    ax.set_ylim(0, height * 1.02 if height > 0 else 1)
    ax.set_ylabel("address in the pool (MiB)")
    ax.legend([Patch(facecolor=_STREAM_COLORS[k % len(_STREAM_COLORS)]) for k in range(len(streams))],
              [_stream_name(s) for s in streams], loc="upper left",
              bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=9, title="allocated on", title_fontsize=9)
    _tidy(ax)
    n_live = len(view.tensors.frame)
    return f"the {len(tl):,} largest of {n_live:,} tensors" if len(tl) < n_live else f"{len(tl):,} tensors"


def _peak_mark(view: _MemoryView, t_ms: np.ndarray, allocated: np.ndarray) -> tuple[float, float, str | None] | None:
    """Where to mark the peak: (x ms, MiB, the tensor whose allocation reached it).  ``view.peak`` when it
    lies in the window, else the window's highest record (``allocated`` at ``t_ms``), named by a tensor
    allocated at that very record; None when no record has a value."""
    peak = view.peak
    if peak is not None and view.w0 <= peak.time_us <= view.w1:
        return view.ms(peak.time_us), peak.allocated_bytes / MiB, peak.tensor
    if not np.isfinite(allocated).any():
        return None
    i = int(np.nanargmax(allocated))
    live = view.tensors
    at = np.flatnonzero(live.alloc_us == view.record_us[view.in_window][i]) if "Name" in live.frame else []
    return t_ms[i], allocated[i], str(live.frame["Name"].iloc[at[-1]]) if len(at) else None


def _draw_peak(ax_m: Axes, ax_t: Axes | None, mark: tuple[float, float, str | None], label: str,
               span_ms: float) -> None:
    """Mark the peak: a dot on the usage curve (its legend entry says the size), a dotted line through
    both axes at its time and the name of the tensor that reached it, on the side with room."""
    px, py, tensor = mark
    ax_m.plot([px], [py], "o", color="#c44e52", markersize=6, label=f"{label}: {format_size(py * MiB)}", zorder=5)
    for ax in (ax_t, ax_m):
        if ax is not None:
            ax.axvline(px, color="#c44e52", linewidth=0.8, linestyle=":", zorder=4)
    if tensor:
        left = px < span_ms * 0.7
        ax_m.annotate(_short(tensor, 50), (px, py), xytext=(8 if left else -8, -16), textcoords="offset points",
                      fontsize=8, color="#c44e52", ha="left" if left else "right", va="top", zorder=6,
                      bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 1})


def _draw_usage_curve(ax_m: Axes, ax_t: Axes | None, view: _MemoryView, width_px: int) -> None:
    """Draw the allocated (step curve) and reserved (dashed) MiB of the window's records on ``ax_m``, at
    most 3 points a pixel column, and mark the peak there and on ``ax_t`` (the tensors' axes, None
    without them); a note instead when the window holds no record."""
    t_ms = view.ms(view.record_us[view.in_window])
    if not len(t_ms):
        ax_m.text(0.5, 0.5, "no memory_record rows in this window", transform=ax_m.transAxes, ha="center",
                  va="center", color="0.4")
        return
    mr = view.memory_record
    allocated = _floats(mr["Total Allocated(MB)"])[view.in_window]
    reserved = _floats(mr["Total Reserved(MB)"])[view.in_window] if "Total Reserved(MB)" in mr else None
    drawn = _step_curve_points(t_ms, allocated, 0.0, view.span_ms, width_px)
    ax_m.plot(t_ms[drawn], allocated[drawn], drawstyle="steps-post", color="#4c72b0", linewidth=1.1,
              label="allocated")
    if reserved is not None:
        drawn = _step_curve_points(t_ms, reserved, 0.0, view.span_ms, width_px)
        ax_m.plot(t_ms[drawn], reserved[drawn], drawstyle="steps-post", color="0.5", linestyle="--",
                  linewidth=0.9, label="reserved")
    mark = _peak_mark(view, t_ms, allocated)
    if mark is not None:
        label = "peak" if view.whole else f"peak of {_iterations_named(view.iteration)}"
        _draw_peak(ax_m, ax_t, mark, label, view.span_ms)
    top_y = np.nanmax(np.r_[allocated, reserved if reserved is not None else allocated])
    ax_m.set_ylim(0, top_y * 1.1 if np.isfinite(top_y) and top_y > 0 else 1)
    ax_m.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=9)


def memory_lifetimes(tensor_lifetimes: Any, memory_record: pd.DataFrame | None = None, peak: Any = None,
                     step_trace: pd.DataFrame | None = None, iteration: int | tuple[int, int] | str | None = None,
                     top: int | None = None, title: str | None = None, width_px: int = 1100) -> Figure:
    """Draw where tensors live: address in the pool × time, over the allocated-memory curve.

    Arguments are Profile tables: ``tensor_lifetimes`` (``Profile.tensor_lifetimes``: Name, Model ID,
    Address, Size(KB), Allocation Time(us), Release Time(us), Stream ID), ``memory_record``
    (``Timestamp(us)``, ``Total Allocated(MB)``, ``Total Reserved(MB)``), ``peak``
    (``Profile.memory_peak``) and ``step_trace`` (to find iterations).  A Profile may be passed as the
    first argument instead: the four are then taken from it (explicit arguments win), for one
    iteration from that iteration's records alone (``Profile.step_memory``).

    ``iteration``: by default the last iteration of ``step_trace`` (the whole run without one), like
    the explorer and ``Profile.ops()``; an Iteration ID draws that iteration, a pair ``(first, last)``
    those iterations, ``"all"`` (:data:`ALL_ITERATIONS`) the whole run.  An iteration shows the tensors
    that live in its time window.

    Top axes: the allocations, from allocation to release (to the end of the view if never released)
    and from address to address + size (MiB), coloured by stream; with several models their pools
    are stacked, each as high as its highest tensor end.  The boxes of one place in the pool (model,
    address, size) are merged per pixel column of ``width_px`` as the task Gantt's tasks are
    (:func:`_merge_spans`): a box is exact when no other box of its place shares its column, a column
    of a place that tensors of several streams share is split in height among them by their time, and
    a long run draws at most 2 × places × ``width_px`` groups of boxes.  Bottom axes (shared x): the
    allocated total (step curve) and the reserved pool (dashed), MiB, at most 3 points a pixel column
    (each column's lowest, highest and last: :func:`_step_curve_points`); marked in both: ``peak``
    when it lies in the view, else the view's own highest point, with the allocation that reached it.
    ``top`` keeps the largest tensors only.  x in ms since the start of the first iteration shown, or
    of the first record.
    """
    view = _memory_view(tensor_lifetimes, memory_record, peak, step_trace, iteration)
    if view is None:
        return _empty_figure(NO_MEMORY_MESSAGE)
    tensors = view.tensors.largest(top)
    has_tensors = len(tensors.frame) > 0
    fig = Figure(figsize=(width_px / 100, 6.5 if has_tensors else 3.5), layout="constrained")
    if has_tensors:
        ax_t, ax_m = fig.subplots(2, 1, sharex=True, height_ratios=[3, 1.3])
        shown = _draw_tensor_boxes(ax_t, tensors, view, width_px)
    else:
        ax_t, ax_m = None, fig.add_subplot()
        shown = "no tensor addresses in this data (geprof runs with --task-memory on have them)"
    _draw_usage_curve(ax_m, ax_t, view, width_px)
    ax_m.set_ylabel("memory (MiB)")
    ax_m.set_xlim(-0.01 * view.span_ms, 1.01 * view.span_ms)
    first = view.iteration[0] if isinstance(view.iteration, tuple) else view.iteration
    ax_m.set_xlabel("time since the first memory record (ms)" if view.whole
                    else f"time since the start of iteration {first} (ms)")
    _tidy(ax_m)
    heading = title or "Tensor lifetimes"
    if not view.whole:
        heading += f": {_iterations_named(view.iteration)}"
    (ax_t if ax_t is not None else ax_m).set_title(f"{heading}  ({shown})", loc="left")
    return _literal(fig)


# ---------------------------------------------------------------------------- host scopes
def _lanes(group: np.ndarray, lo: np.ndarray, hi: np.ndarray, tolerance: float = 0.0) -> np.ndarray:
    """A lane per interval so intervals of one group in one lane never overlap (greedy, by start,
    longest first, so an enclosing scope takes a lane above what it encloses).  ``tolerance``
    (x units) lets an interval start that much before the previous one in its lane ends."""
    order = np.lexsort((-hi, lo, group))
    lane = np.zeros(len(lo), np.int64)
    ends: list[float] = []
    current = None
    for i in order.tolist():
        if group[i] != current:
            current, ends = group[i], []
        start = lo[i] + tolerance
        for k, e in enumerate(ends):
            if e <= start:
                break
        else:
            k = len(ends)
            ends.append(0.0)
        ends[k] = hi[i]
        lane[i] = k
    return lane


def host_scopes(host_events: pd.DataFrame, api_calls: pd.DataFrame | None = None, by: str = "event",
                title: str | None = None, width_px: int = 1100) -> Figure:
    """Draw host work on its own timeline: GE host events and, optionally, host API calls.

    ``host_events`` is ``Profile.host_events`` (Thread ID, Element, Event, Start(us), End(us)),
    ``api_calls`` the host API records of ``Profile.source.api_calls()`` (level, api, thread,
    begin, end in ns; ``api_statistic`` has no times and is refused).

    * ``by="event"``: one row per API (``RunGraph (acl)``, ``InferShape (node)``, ...; outer levels
      first, a line below them), then one row per host event type (CopyH2D, InferShape, Tiling,
      AllocMemory, rtKernelLaunch, ...), each in order of first occurrence.  A row has one colour.
    * ``by="thread"``: per thread one row per API level (acl, model, node, ...) and one for the GE
      host events, a row more where scopes of one row overlap (:func:`_lanes`); coloured by scope
      name, with a legend.

    x in ms since the first scope; scopes of zero duration are not drawn.  Drawn like
    :func:`task_gantt` (one path per colour, merged per pixel column).  Without host events the
    figure says how to get them (``--ge-api l1`` on a dynamic-shape graph).
    """
    if by not in ("event", "thread"):
        raise ValueError(f"by={by!r}: use 'event' or 'thread'")
    if api_calls is not None and not {"begin", "end", "api"} <= set(api_calls.columns):
        raise ValueError("api_calls needs the per-call records with begin/end times (Profile.source.api_calls()); "
                         "api_statistic only has totals")
    he = host_events if host_events is not None else pd.DataFrame()
    ac = api_calls if api_calls is not None else pd.DataFrame()
    if he.empty and ac.empty:
        return _empty_figure(NO_HOST_EVENTS_MESSAGE)

    # Times relative to the first scope, in ms: API records are int ns, host events float µs.
    he_start = _floats(he["Start(us)"]) if len(he) else np.zeros(0)
    he_end = _floats(he["End(us)"]) if len(he) else np.zeros(0)
    ac_begin = ac["begin"].to_numpy(np.int64) if len(ac) else np.zeros(0, np.int64)
    ac_end = ac["end"].to_numpy(np.int64) if len(ac) else np.zeros(0, np.int64)
    origin_ns = int(min(np.nanmin(he_start) * 1000 if len(he) else np.inf, ac_begin.min() if len(ac) else np.inf))
    lo = np.r_[(ac_begin - origin_ns) / 1e6, (he_start - origin_ns / 1000.0) / 1000.0]
    hi = np.r_[(ac_end - origin_ns) / 1e6, (he_end - origin_ns / 1000.0) / 1000.0]
    levels = ac["level"].astype(str).to_numpy(object) if len(ac) else np.zeros(0, object)
    names = np.r_[ac["api"].astype(str).to_numpy(object) if len(ac) else np.zeros(0, object),
                  he["Event"].astype(str).to_numpy(object) if len(he) else np.zeros(0, object)]
    threads = np.r_[ac["thread"].to_numpy(np.int64) if len(ac) else np.zeros(0, np.int64),
                    he["Thread ID"].to_numpy(np.int64) if len(he) else np.zeros(0, np.int64)]
    is_api = np.r_[np.ones(len(ac), bool), np.zeros(len(he), bool)]
    n_api, n_events = len(ac), len(he)
    drawn = np.isfinite(lo) & (hi > lo)
    lo, hi, names, threads, is_api = lo[drawn], hi[drawn], names[drawn], threads[drawn], is_api[drawn]
    levels = levels[drawn[: len(levels)]]
    if len(lo) == 0:
        return _empty_figure("every host scope has zero duration: nothing to draw")
    kind, kinds = _factorize(pd.Series(names, dtype=object))

    if by == "event":
        level_rank = {"acl": 0, "model": 1, "node": 2, "runtime": 3}
        keys = np.r_[[f"{a} ({lv})" for a, lv in zip(names[is_api], levels)], names[~is_api]].astype(object)
        rank = np.r_[[level_rank.get(lv, 4) for lv in levels], np.full((~is_api).sum(), 5)]
        order = np.lexsort((np.r_[lo[is_api], lo[~is_api]], rank))
        labels = list(dict.fromkeys(keys[order].tolist()))
        index = {k: i for i, k in enumerate(labels)}
        row = np.empty(len(lo), np.int64)
        row[np.flatnonzero(is_api)] = [index[k] for k in keys[: is_api.sum()]]
        row[np.flatnonzero(~is_api)] = [index[k] for k in keys[is_api.sum():]]
        n_api_rows = len({k for k in keys[: is_api.sum()]})
    else:
        # per thread: the API levels (outer first), then the GE host events; a lane more where scopes overlap
        level_rank = {"acl": 0, "model": 1, "node": 2, "runtime": 3}
        level_names = ["acl", "model", "node", "runtime", "api", "host events"]
        source = np.r_[[level_rank.get(lv, 4) for lv in levels], np.full((~is_api).sum(), 5)].astype(np.int64)
        group = pd.factorize(pd.Series(list(zip(threads.tolist(), source.tolist()))))[0]
        lane = _lanes(group, lo, hi, tolerance=0.0)
        keys = np.stack([threads, source, lane], axis=1)
        rows_used, row = np.unique(keys, axis=0, return_inverse=True)
        row = row.ravel()
        labels = [f"thread {t} · {level_names[src]}" + (f" ({ln + 1})" if ln else "") for t, src, ln in rows_used]
        n_api_rows = 0

    n_rows = len(labels)
    fig, ax, x1 = _span_chart(row, lo, hi, kind, kinds, labels, width_px, 0.34, 9,
                              "time since the first host scope (ms)", STACKED_SCOPES_NOTE)
    if 0 < n_api_rows < n_rows:
        ax.axhline(n_api_rows - 0.5, color="0.6", linewidth=0.8)
    if by == "thread":
        fig.legend([Patch(facecolor=color_of(k)) for k in kinds], kinds, loc="outside right upper", frameon=False,
                   fontsize=9, title="scope", title_fontsize=9)
    heading = title or "Host scopes"
    counts = [f"{n_events:,} host events"] + ([f"{n_api:,} API calls"] if n_api else [])
    # without host events the title says so on a second line, where the layout leaves it room (at the
    # figure's foot the note covered the x label)
    note = "\n" + textwrap.fill(NO_HOST_EVENTS_MESSAGE, max(40, width_px // 8)) if he.empty else ""
    ax.set_title(f"{heading}  ({', '.join(counts)} over {x1:,.3f} ms){note}", loc="left")
    return _literal(fig)

def figure_png(fig: Figure, dpi: int = 100) -> bytes:
    """Render a figure to PNG bytes, for static HTML fallbacks where no live matplotlib backend exists:
    the one renderer of every figure the explorers, the notebook and ``geprof run`` show.

    A figure with a layout engine (all of this module's) already fits its decorations inside itself;
    "tight" would draw it twice to find what it already knows.  Unless an axes keeps a fixed aspect
    (a heatmap's square cells, :mod:`.cluster_plots`): the layout then leaves the figure's sides
    empty, and "tight" crops them.
    """
    buf = BytesIO()
    fixed_aspect = any(ax.get_aspect() != "auto" for ax in fig.axes)
    tight = fixed_aspect or fig.get_layout_engine() is None
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight" if tight else None)
    return buf.getvalue()
