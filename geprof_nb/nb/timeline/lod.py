"""Level of detail: what one lane of the timeline sends for a time window at a width in pixels.

A lane's spans are kept sorted by start, in µs since the timeline's origin.  For a window
``[t0, t1]`` drawn at ``columns`` pixel columns (:func:`span_view`):

* a span at least one column wide is sent exactly (start, duration, kind, name, reference), at most
  :data:`EXACT_PER_COLUMN` a column (the longest; the others are merged);
* the narrower ones are merged into the column their start falls in: per column the number of
  spans, their busy time (each span's time clipped to the window) and the kind with the most of
  that time.  The counts and busy times of the columns and the exact spans add up to the spans in
  the window: every span is either exact or in one column;
* when the window holds no more spans than columns, every span is sent exactly (zoomed in far
  enough, each task is its own rectangle with its name).

A summary lane (a collapsed group of lanes) merges every span (``merge_all``): its spans overlap,
and what it shows is how busy the group is per column.  A curve lane (memory) keeps in each column
its lowest, highest and last point (:func:`curve_view`).  :func:`encode_spans` and
:func:`encode_curve` pack a view as compact little-endian arrays (one buffer per field) and a small
JSON header, so a view's bytes are bounded by its lanes and columns, not by the run's tasks
(:data:`BYTES_PER_COLUMN`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..plots.memory import step_curve_points

#: Dense (column x kind) time tables up to this many cells; beyond it the kinds are summed by sorting.
_DENSE_CELLS = 4_000_000
#: Exact spans a view sends at most per column: spans of one row never overlap, so this leaves room for
#: the spans that straddle the window's edges; nested or overlapping ones beyond it are merged.
EXACT_PER_COLUMN = 2


@dataclass(frozen=True)
class Spans:
    """Intervals of one lane, sorted by start: µs since the timeline's origin, the code of their kind
    (colour) and name in the timeline's tables (-1: no name), and a reference the widget can ask the
    details of (-1: none)."""

    start: np.ndarray
    end: np.ndarray
    kind: np.ndarray
    name: np.ndarray
    ref: np.ndarray

    @classmethod
    def of(cls, start: np.ndarray, end: np.ndarray, kind: np.ndarray, name: np.ndarray | None = None,
           ref: np.ndarray | None = None) -> Spans:
        """Spans with finite start and end (NaN times are left out), sorted by start (stable)."""
        start, end = np.asarray(start, np.float64), np.asarray(end, np.float64)
        n = len(start)
        kind = np.broadcast_to(np.asarray(kind, np.int16), (n,))
        name = np.full(n, -1, np.int32) if name is None else np.broadcast_to(np.asarray(name, np.int32), (n,))
        ref = np.full(n, -1, np.int64) if ref is None else np.asarray(ref, np.int64)
        ok = np.isfinite(start) & np.isfinite(end)
        end = np.maximum(end, start)
        if not ok.all():
            start, end, kind, name, ref = start[ok], end[ok], kind[ok], name[ok], ref[ok]
        order = np.argsort(start, kind="stable")
        if not (order == np.arange(len(order))).all():
            start, end, kind, name, ref = start[order], end[order], kind[order], name[order], ref[order]
        return cls(np.ascontiguousarray(start), np.ascontiguousarray(end), np.ascontiguousarray(kind),
                   np.ascontiguousarray(name), np.ascontiguousarray(ref))

    @classmethod
    def concat(cls, parts: list[Spans]) -> Spans:
        """The spans of several lanes as one (a summary lane's), sorted by start."""
        if not parts:
            return cls.of(np.zeros(0), np.zeros(0), np.zeros(0))
        return cls.of(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("start", "end", "kind", "name",
                                                                                  "ref")))

    def __len__(self) -> int:
        return len(self.start)

    @property
    def longest(self) -> float:
        """The longest span (µs): no span starting earlier than ``t0 - longest`` reaches ``t0``."""
        return float((self.end - self.start).max()) if len(self.start) else 0.0

    def in_window(self, t0: float, t1: float) -> np.ndarray:
        """Positions of the spans that overlap ``[t0, t1]`` (a zero-length span at an edge counts), in start order."""
        lo = int(np.searchsorted(self.start, t0 - self.longest, "left"))
        hi = int(np.searchsorted(self.start, t1, "right"))
        near = np.arange(lo, hi)
        return near[self.end[lo:hi] >= t0]

    def extent(self) -> tuple[float, float] | None:
        """(first start, last end), None without spans."""
        return (float(self.start[0]), float(self.end.max())) if len(self.start) else None


@dataclass
class SpanView:
    """One lane's spans in a window at a number of columns: the exact ones (positions into the
    lane's :class:`Spans`) and the merged columns (index, span count, busy µs, dominant kind, and
    whether a span of the column is a search hit)."""

    t0: float
    t1: float
    columns: int
    exact: np.ndarray
    column: np.ndarray
    count: np.ndarray
    busy: np.ndarray
    kind: np.ndarray
    hit: np.ndarray

    @property
    def column_us(self) -> float:
        return (self.t1 - self.t0) / self.columns


def span_view(spans: Spans, t0: float, t1: float, columns: int, merge_all: bool = False,
              hits: np.ndarray | None = None) -> SpanView:
    """The level of detail of ``spans`` for the window ``[t0, t1]`` at ``columns`` pixel columns (module
    docstring).  ``hits``: a bool per name code (search hits), marked on the columns that hold one."""
    if not t1 > t0 or columns < 1:
        raise ValueError(f"a view needs t1 > t0 and at least one column (got t0={t0}, t1={t1}, columns={columns})")
    inside = spans.in_window(t0, t1)
    px = (t1 - t0) / columns
    if merge_all:
        narrow = np.ones(len(inside), bool)
    elif len(inside) <= columns:
        narrow = np.zeros(len(inside), bool)
    else:
        width = spans.end[inside] - spans.start[inside]
        narrow = width < px
        wide = np.flatnonzero(~narrow)
        if len(wide) > EXACT_PER_COLUMN * columns:  # overlapping spans: the longest are exact
            shorter = np.argpartition(-width[wide], EXACT_PER_COLUMN * columns)[EXACT_PER_COLUMN * columns:]
            narrow[wide[shorter]] = True
    exact, merged = inside[~narrow], inside[narrow]
    start = np.maximum(spans.start[merged], t0)
    busy_each = np.minimum(spans.end[merged], t1) - start
    col = np.minimum(((start - t0) / px).astype(np.int64), columns - 1)
    count = np.bincount(col, minlength=columns)
    used = np.flatnonzero(count)
    busy = np.bincount(col, weights=busy_each, minlength=columns)[used]
    kind = _dominant(col, spans.kind[merged].astype(np.int64), busy_each, columns)[used]
    if hits is not None and len(merged):
        hit = np.bincount(col, weights=hits[np.maximum(spans.name[merged], 0)] & (spans.name[merged] >= 0),
                          minlength=columns)[used] > 0
    else:
        hit = np.zeros(len(used), bool)
    return SpanView(t0, t1, columns, exact, used, count[used], busy, kind, hit)


def _dominant(col: np.ndarray, kind: np.ndarray, weight: np.ndarray, columns: int) -> np.ndarray:
    """Per column, the kind with the most weight (the lowest code among equals; 0 in an empty column).
    A zero-length span weighs nothing, so a column of markers only takes its first kind."""
    if not len(col):
        return np.zeros(columns, np.int64)
    n_kinds = int(kind.max()) + 1
    weight = weight + 1e-12  # a column of zero-length spans still has a kind
    if columns * n_kinds <= _DENSE_CELLS:
        table = np.bincount(col * n_kinds + kind, weights=weight, minlength=columns * n_kinds)
        return table.reshape(columns, n_kinds).argmax(axis=1)
    keys, inverse = np.unique(col * n_kinds + kind, return_inverse=True)
    total = np.bincount(inverse.ravel(), weights=weight)
    key_col = keys // n_kinds
    order = np.lexsort((-total, key_col))  # per column the heaviest first
    first = order[np.r_[True, key_col[order][1:] != key_col[order][:-1]]]
    out = np.zeros(columns, np.int64)
    out[key_col[first]] = keys[first] % n_kinds
    return out


@dataclass
class CurveView:
    """The points of a step curve drawn in a window: times (µs since the origin) and values."""

    t: np.ndarray
    v: np.ndarray


def curve_view(t: np.ndarray, v: np.ndarray, t0: float, t1: float, columns: int) -> CurveView:
    """The points of the step curve (``t`` ascending) that draw it over ``[t0, t1]`` at ``columns``
    columns: the point in force at ``t0`` and those inside, at most 3 a column (each column's lowest,
    highest and last point), so peaks are exact at any zoom."""
    before = int(np.searchsorted(t, t0, "right")) - 1  # the point in force at t0 (-1: none)
    lo, hi = max(before, 0), int(np.searchsorted(t, t1, "right"))
    tw, vw = t[lo:hi], v[lo:hi]
    first = 1 if before >= 0 else 0  # the point before the window is kept whatever its column
    keep = np.r_[np.arange(first), first + step_curve_points(tw[first:], vw[first:], t0, t1, columns)]
    return CurveView(tw[keep], vw[keep])


# ------------------------------------------------------------------------------ encoding
#: Bytes a view sends per span sent exactly, per merged column and per curve point (see :func:`encode_spans`).
EXACT_BYTES = 8 + 8 + 2 + 4 + 8  # start f64, duration f64, kind u16, name i32, ref f64
COLUMN_BYTES = 4 + 4 + 4 + 2 + 1  # column u32, count u32, busy f32, kind u16, hit u8
#: At most this many bytes one lane sends per column of a view: at most :data:`EXACT_PER_COLUMN` exact spans
#: and one merged column a column, twice for a lane with an overlay (the exposed part of communication);
#: a curve sends less: at most 3 points of 12 bytes (t f64, value f32) a column, and one before the window.
BYTES_PER_COLUMN = 2 * (EXACT_PER_COLUMN * EXACT_BYTES + COLUMN_BYTES)


class Packer:
    """Collects the arrays of a view as little-endian buffers; the JSON header names each by its index."""

    def __init__(self) -> None:
        self.buffers: list[bytes] = []

    def add(self, array: np.ndarray, dtype: str) -> int:
        """Append ``array`` as ``dtype`` (``<f8``, ``<u4``, ...); returns its buffer index."""
        self.buffers.append(np.ascontiguousarray(array, dtype=np.dtype(dtype)).tobytes())
        return len(self.buffers) - 1

    @property
    def nbytes(self) -> int:
        return sum(len(b) for b in self.buffers)


def encode_spans(view: SpanView, spans: Spans, packer: Packer) -> dict:
    """The header of one lane's :class:`SpanView`, its arrays added to ``packer``: exact spans as
    start (f64 µs since the origin), duration (f64 µs), kind (u16), name (i32) and ref (f64: exact up to
    2**53); merged columns as column index (u32), count (u32), busy µs (f32), kind (u16), hit (u8)."""
    e = view.exact
    return {
        "n_exact": int(len(e)), "n_columns": int(len(view.column)),
        "exact": [packer.add(spans.start[e], "<f8"), packer.add(spans.end[e] - spans.start[e], "<f8"),
                  packer.add(spans.kind[e], "<u2"), packer.add(spans.name[e], "<i4"),
                  packer.add(spans.ref[e], "<f8")],
        "columns": [packer.add(view.column, "<u4"), packer.add(view.count, "<u4"), packer.add(view.busy, "<f4"),
                    packer.add(view.kind, "<u2"), packer.add(view.hit, "<u1")],
    }


def encode_curve(view: CurveView, packer: Packer) -> dict:
    """The header of a :class:`CurveView`: times (f64 µs since the origin) and values (f4)."""
    return {"n_points": int(len(view.t)), "curve": [packer.add(view.t, "<f8"), packer.add(view.v, "<f4")]}
