"""Tensor lifetimes in the memory pool (address x time rectangles) over the allocated-memory curve."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .figure import MiB, empty_figure, floats, format_size, literal, short, tidy
from .memory_view import MemoryView, Tensors, iterations_named, select_memory_view
from .spans import Bands, add_rects, merge_spans

NO_MEMORY_MESSAGE = "no memory records: profile with --task-memory on"
#: Tensor colours of memory_lifetimes, by the stream that allocated them (in stream id order).
_STREAM_COLORS = ["#4c72b0", "#c44e52", "#55a868", "#8172b3", "#dd8452", "#937860", "#64b5cd", "#da8bc3"]


def step_curve_points(t: np.ndarray, v: np.ndarray, x0: float, x1: float, columns: int) -> np.ndarray:
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


def _draw_stream_boxes(ax: Axes, boxes: Bands, y: np.ndarray, h: np.ndarray, streams: np.ndarray,
                       height: float, span_ms: float) -> None:
    """Draw the boxes in their stream's colour, one compound path per stream and style.  A white edge
    separates neighbours, but only on rectangles big enough to keep their colour (about 1% of the
    axes, ``height`` × ``span_ms``, both ways); smaller ones are drawn plain."""
    edged = (h >= 0.01 * height) & (boxes.width >= 0.01 * span_ms)
    for k, sid in enumerate(streams):
        for part, style in ((~edged, {}), (edged, {"edgecolor": "white", "linewidth": 0.4})):
            mine = (boxes.kind == k) & part
            if mine.any():
                add_rects(ax, boxes.start[mine], boxes.width[mine], y[mine], h[mine],
                           _STREAM_COLORS[k % len(_STREAM_COLORS)], _stream_name(sid), **style)


def _draw_pool_tops(ax: Axes, pools: list[tuple[float, int]]) -> None:
    """A dashed line at the top of each model's pool, labelled with the model at the right."""
    for top, m in pools:
        ax.axhline(top, color="0.5", linewidth=0.6, linestyle="--")
        ax.text(0.995, top, f"model {m} ", transform=ax.get_yaxis_transform(), ha="right", va="top",
                fontsize=8, color="0.4")


def _draw_tensor_boxes(ax: Axes, tensors: Tensors, view: MemoryView, width_px: int) -> str:
    """Draw ``tensors`` as address × time boxes on ``ax``, merged per pixel column of ``width_px`` and
    coloured by stream, the models' pools stacked; returns what the title says of them."""
    tl = tensors.frame
    size_mib = floats(tl["Size(KB)"]) / 1024.0
    addr_mib = floats(tl["Address"]) / MiB
    model = pd.to_numeric(tl["Model ID"], errors="coerce").fillna(-1).to_numpy(np.int64) if "Model ID" in tl \
        else np.zeros(len(tl), np.int64)
    base, height, pools = _stacked_pools(model, addr_mib + size_mib)
    x = view.ms(tensors.alloc_us)
    x_end = view.ms(np.minimum(np.where(np.isnan(tensors.release_us), view.w1, tensors.release_us), view.w1))
    stream = pd.to_numeric(tl["Stream ID"], errors="coerce").fillna(-1).to_numpy(np.int64)
    kind, streams = pd.factorize(stream, sort=True)
    row, row_y, row_h = _place_rows(model, addr_mib, size_mib, base)
    boxes = merge_spans(row, x, x_end, kind, len(streams), 0.0, view.span_ms, width_px)
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
    tidy(ax)
    n_live = len(view.tensors.frame)
    return f"the {len(tl):,} largest of {n_live:,} tensors" if len(tl) < n_live else f"{len(tl):,} tensors"


def _peak_mark(view: MemoryView, t_ms: np.ndarray, allocated: np.ndarray) -> tuple[float, float, str | None] | None:
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
        ax_m.annotate(short(tensor, 50), (px, py), xytext=(8 if left else -8, -16), textcoords="offset points",
                      fontsize=8, color="#c44e52", ha="left" if left else "right", va="top", zorder=6,
                      bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 1})


def _draw_usage_curve(ax_m: Axes, ax_t: Axes | None, view: MemoryView, width_px: int) -> None:
    """Draw the allocated (step curve) and reserved (dashed) MiB of the window's records on ``ax_m``, at
    most 3 points a pixel column, and mark the peak there and on ``ax_t`` (the tensors' axes, None
    without them); a note instead when the window holds no record."""
    t_ms = view.ms(view.record_us[view.in_window])
    if not len(t_ms):
        ax_m.text(0.5, 0.5, "no memory_record rows in this window", transform=ax_m.transAxes, ha="center",
                  va="center", color="0.4")
        return
    mr = view.memory_record
    allocated = floats(mr["Total Allocated(MB)"])[view.in_window]
    reserved = floats(mr["Total Reserved(MB)"])[view.in_window] if "Total Reserved(MB)" in mr else None
    drawn = step_curve_points(t_ms, allocated, 0.0, view.span_ms, width_px)
    ax_m.plot(t_ms[drawn], allocated[drawn], drawstyle="steps-post", color="#4c72b0", linewidth=1.1,
              label="allocated")
    if reserved is not None:
        drawn = step_curve_points(t_ms, reserved, 0.0, view.span_ms, width_px)
        ax_m.plot(t_ms[drawn], reserved[drawn], drawstyle="steps-post", color="0.5", linestyle="--",
                  linewidth=0.9, label="reserved")
    mark = _peak_mark(view, t_ms, allocated)
    if mark is not None:
        label = "peak" if view.whole else f"peak of {iterations_named(view.iteration)}"
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
    (:func:`merge_spans`): a box is exact when no other box of its place shares its column, a column
    of a place that tensors of several streams share is split in height among them by their time, and
    a long run draws at most 2 × places × ``width_px`` groups of boxes.  Bottom axes (shared x): the
    allocated total (step curve) and the reserved pool (dashed), MiB, at most 3 points a pixel column
    (each column's lowest, highest and last: :func:`step_curve_points`); marked in both: ``peak``
    when it lies in the view, else the view's own highest point, with the allocation that reached it.
    ``top`` keeps the largest tensors only.  x in ms since the start of the first iteration shown, or
    of the first record.
    """
    view = select_memory_view(tensor_lifetimes, memory_record, peak, step_trace, iteration)
    if view is None:
        return empty_figure(NO_MEMORY_MESSAGE)
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
    tidy(ax_m)
    heading = title or "Tensor lifetimes"
    if not view.whole:
        heading += f": {iterations_named(view.iteration)}"
    (ax_t if ax_t is not None else ax_m).set_title(f"{heading}  ({shown})", loc="left")
    return literal(fig)
