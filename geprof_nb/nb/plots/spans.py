"""Span merging: timelines of many spans drawn as one compound path per colour.

Spans narrower than a pixel column are merged per column, the kinds of a column stacked by their
time (:func:`merge_spans`), so a million tasks render in under a second; the step timeline merges its
sub-pixel bars per column too, shaded by the time they fill (:func:`column_bars`).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import PathPatch
from matplotlib.path import Path

from .colors import color_of
from .figure import tidy

#: The palest shade of a column a row's bars only partly fill: full colour times this, at least.
MIN_SHADE = 0.4


def column_bars(start: np.ndarray, width: np.ndarray, color: str, x0: float, x1: float, columns: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The bars that show one row's disjoint pieces (:func:`disjoint_pieces`, in start order) at ``columns``
    pixel columns over ``[x0, x1]``: x, width, face colour and edge width of each.

    A piece at least a column wide is drawn as it is, in full colour (white-edged when a few columns
    wide, so back-to-back spans stay apart).  The narrower ones are merged per column: every column
    they put time in is filled, shaded by how much of it they fill (from :data:`MIN_SHADE` of the
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
    shade = np.r_[MIN_SHADE + (1 - MIN_SHADE) * np.minimum(cover[col], 1.0), np.ones(wide.sum())]
    rgba = np.repeat(to_rgba_array(color), len(shade), axis=0)
    rgba[:, :3] = rgba[:, :3] * shade[:, None] + (1.0 - shade[:, None])  # blended with the white background
    edge = np.r_[np.zeros(len(col)), np.where(width[wide] >= _EDGE_MIN_COLUMNS * px, 0.5, 0.0)]
    return np.r_[x0 + col * px, start[wide]], np.r_[np.full(len(col), px), width[wide]], rgba, edge


@dataclass
class Spans:
    """Spans on rows (disjoint pieces, or rectangles as drawn): row, start and width (x units), and
    the code of their colour."""

    row: np.ndarray
    start: np.ndarray
    width: np.ndarray
    kind: np.ndarray


def disjoint_pieces(row: np.ndarray, start: np.ndarray, end: np.ndarray, kind: np.ndarray, x0: float,
                    x1: float) -> Spans:
    """Intervals ``[start, end)`` clipped to ``[x0, x1]`` and split into disjoint pieces whose union per
    row is the union of the row's intervals (an interval keeps only what no earlier-starting one
    covers), in (row, start) order."""
    keep = np.isfinite(start) & np.isfinite(end)
    row, start, end, kind = row[keep], np.maximum(start[keep], x0), np.minimum(end[keep], x1), kind[keep]
    keep = end > start
    row, start, end, kind = row[keep], start[keep], end[keep], kind[keep]
    if len(row) == 0:
        return Spans(*(np.zeros(0, t) for t in (np.int64, float, float, np.int64)))
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
    return Spans(row[keep], piece_start[keep], (end - piece_start)[keep], kind[keep])


@dataclass
class Bands(Spans):
    """Rectangles of merged spans (:func:`merge_spans`): besides :class:`Spans`, the lower edge and
    the height of each as shares of its row's bar height (0 and 1 for a span drawn alone)."""

    lower: np.ndarray
    height: np.ndarray


def merge_spans(row: np.ndarray, start: np.ndarray, end: np.ndarray, kind: np.ndarray, n_kinds: int,
                 x0: float, x1: float, width_px: int) -> Bands:
    """The rectangles that show intervals ``[start, end)`` on rows at ``width_px`` columns over ``[x0, x1]``.

    1. The intervals become disjoint pieces with the same union per row (:func:`disjoint_pieces`).
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
    pieces = disjoint_pieces(row, start, end, kind, x0, x1)
    row, start, width, kind = pieces.row, pieces.start, pieces.width, pieces.kind
    if len(row) == 0:
        return Bands(row, start, width, kind, width.copy(), width.copy())
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
    return Bands(row[first][group], start[first][group], total, band_kind, before / total, time / total)


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


def add_rects(ax, x, w, y, h, color, label: str, **style) -> PathPatch:
    """Rectangles as one PathPatch (``add_artist``: no data-limit update, set the limits yourself)."""
    patch = PathPatch(_rect_path(np.asarray(x, float), np.asarray(w, float), np.asarray(y, float), h),
                      facecolor=color, label=label, **({"edgecolor": "none", "linewidth": 0} | style))
    ax.add_artist(patch)
    return patch


def _draw_spans(ax, row: np.ndarray, start: np.ndarray, end: np.ndarray, kind: np.ndarray, names: list[str],
                colors: list, x0: float, x1: float, width_px: int, height: float = 0.8) -> Bands:
    """Draw intervals on rows ``0..n`` (row ``r``'s bars ``height`` tall, centred at y = r) as one
    PathPatch per kind, merged per pixel column with the kinds of a column stacked (:func:`merge_spans`);
    returns the rectangles drawn.  Each patch is labelled with its kind name (for tests and hover
    tools); legends use proxy handles."""
    spans = merge_spans(np.asarray(row, np.int64), np.asarray(start, float), np.asarray(end, float),
                         np.asarray(kind, np.int64), len(names), x0, x1, width_px)
    # Spans a few pixels wide get a white edge, so back-to-back tasks of one kind stay apart; on
    # narrower ones an edge would paint over the colour.
    wide = spans.width >= _EDGE_MIN_COLUMNS * (x1 - x0) / width_px
    y = spans.row - height / 2 + spans.lower * height
    for k, (name, color) in enumerate(zip(names, colors)):
        mine = spans.kind == k
        for part, style in ((mine & ~wide, {}), (mine & wide, {"edgecolor": "white", "linewidth": 0.6})):
            if part.any():
                add_rects(ax, spans.start[part], spans.width[part], y[part], spans.height[part] * height, color,
                           name, **style)
    return spans


_EDGE_MIN_COLUMNS = 4


def span_chart(row: np.ndarray, lo: np.ndarray, hi: np.ndarray, kind: np.ndarray, kinds: list[str],
                labels: list[str], width_px: int, row_inches: float, fontsize: int, xlabel: str, stacked_note: str):
    """A figure of labelled rows of coloured spans (ms from 0), as the task Gantt and the host scopes
    draw them; returns the figure, its axes and the right end of the time axis.  ``stacked_note`` is
    written under the axes when a pixel column's height is split among kinds (:func:`merge_spans`),
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
    tidy(ax)
    return fig, ax, x1
