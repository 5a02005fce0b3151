"""Level of detail of the timeline (geprof_nb.nb.timeline.lod): merged columns and exact spans add up
to the spans in the window, exact spans when zoomed in, bounded sizes, curves keep their peaks."""

from __future__ import annotations

import numpy as np
import pytest

from geprof_nb.nb.timeline.lod import EXACT_PER_COLUMN, Packer, Spans, curve_view, encode_spans, span_view


def stream(n: int, seed: int = 0) -> Spans:
    """``n`` back-to-back tasks of 0.5-20 µs with gaps, 3 kinds, 10 names (a stream's tasks)."""
    rng = np.random.default_rng(seed)
    dur = rng.uniform(0.5, 20.0, n)
    gap = rng.uniform(0.0, 5.0, n)
    start = np.cumsum(np.r_[0.0, (dur + gap)[:-1]])
    return Spans.of(start, start + dur, rng.integers(0, 3, n), rng.integers(0, 10, n), np.arange(n))


def in_window(s: Spans, t0: float, t1: float) -> np.ndarray:
    return (s.end >= t0) & (s.start <= t1)


@pytest.mark.parametrize("window", [(0.0, 1e9), (1234.5, 98765.4), (50_000.0, 50_400.0)])
def test_columns_and_exact_spans_add_up_to_the_spans_in_the_window(window):
    s = stream(20_000)
    t0, t1 = window
    v = span_view(s, t0, t1, 800)
    inside = in_window(s, t0, t1)
    assert int(v.count.sum()) + len(v.exact) == int(inside.sum())
    clipped = np.minimum(s.end, t1) - np.maximum(s.start, t0)
    exact_time = (np.minimum(s.end[v.exact], t1) - np.maximum(s.start[v.exact], t0)).sum()
    assert float(v.busy.sum()) + exact_time == pytest.approx(clipped[inside].sum(), rel=1e-6)
    # every span once: exact or in a column
    assert len(np.unique(v.exact)) == len(v.exact) and inside[v.exact].all()


def test_a_window_wider_than_the_run_merges_narrow_tasks_and_keeps_wide_ones_exact():
    s = stream(20_000)
    t0, t1 = 0.0, float(s.end.max())
    v = span_view(s, t0, t1, 500)
    px = (t1 - t0) / 500
    width = s.end - s.start
    assert len(v.column) <= 500 and (width[v.exact] >= px).all()
    assert int(v.count.sum()) == int((width < px).sum())


def test_zoomed_in_far_enough_every_task_is_exact():
    s = stream(20_000)
    t0, t1 = 50_000.0, 50_400.0  # a few dozen tasks, fewer than the columns
    v = span_view(s, t0, t1, 1200)
    assert len(v.column) == 0
    assert v.exact.tolist() == np.flatnonzero(in_window(s, t0, t1)).tolist()


def test_a_column_takes_the_kind_with_the_most_time():
    # column 0 (0-10 µs): kind 1 has 3 µs in two tasks, kind 2 one 4 µs task: kind 2 dominates
    s = Spans.of(np.array([0.0, 1.5, 5.0, 20.0]), np.array([1.5, 3.0, 9.0, 21.0]), np.array([1, 1, 2, 0]))
    v = span_view(s, 0.0, 1000.0, 100, merge_all=True)
    assert v.column.tolist() == [0, 2] and v.count.tolist() == [3, 1]
    assert v.kind.tolist() == [2, 0]
    assert v.busy.tolist() == pytest.approx([7.0, 1.0])


def test_overlapping_wide_spans_send_at_most_a_bounded_number_exactly():
    n = 5_000  # nested scopes: every one wider than a column, all overlapping
    start = np.linspace(0.0, 100.0, n)
    s = Spans.of(start, start + 500.0, np.zeros(n))
    v = span_view(s, 0.0, 1000.0, 100)
    assert len(v.exact) == EXACT_PER_COLUMN * 100
    assert int(v.count.sum()) + len(v.exact) == n
    kept = s.end[v.exact] - s.start[v.exact]
    assert kept.min() >= np.delete(s.end - s.start, v.exact).max()  # the longest are the exact ones


def test_search_hits_mark_the_columns_that_hold_a_hit():
    s = Spans.of(np.array([0.0, 15.0, 25.0]), np.array([1.0, 16.0, 26.0]), np.zeros(3), np.array([0, 1, 0]))
    hits = np.array([False, True])
    v = span_view(s, 0.0, 100.0, 10, merge_all=True, hits=hits)
    assert v.column.tolist() == [0, 1, 2] and v.hit.tolist() == [False, True, False]


def test_a_summary_lane_merges_every_span():
    s = stream(100)
    v = span_view(s, 0.0, float(s.end.max()), 10_000, merge_all=True)
    assert len(v.exact) == 0 and int(v.count.sum()) == 100


def test_bad_windows_are_refused():
    with pytest.raises(ValueError, match="t1 > t0"):
        span_view(stream(10), 5.0, 5.0, 100)


def test_the_curve_keeps_the_value_at_the_window_start_and_every_peak():
    rng = np.random.default_rng(1)
    t = np.sort(rng.uniform(0, 1e6, 200_000))
    v = rng.uniform(0, 100, len(t))
    v[123_456] = 1000.0
    t0, t1 = float(t[100_000]) + 0.5, float(t[150_000])
    cv = curve_view(t, v, t0, t1, 300)
    assert len(cv.t) <= 3 * 300 + 1
    assert cv.t[0] == t[100_000] and cv.v[0] == v[100_000]  # the value in force at t0
    inside = (t >= t0) & (t <= t1)
    assert cv.v.max() == v[inside].max() == 1000.0 and cv.v[1:].min() == v[inside].min()


def test_encoded_spans_read_back_as_sent():
    s = stream(5_000)
    v = span_view(s, 1000.0, 20_000.0, 300)
    packer = Packer()
    header = encode_spans(v, s, packer)
    buf = packer.buffers
    start, dur, kind, name, ref = (np.frombuffer(buf[i], dt) for i, dt in
                                   zip(header["exact"], ("<f8", "<f8", "<u2", "<i4", "<f8")))
    assert start.tolist() == s.start[v.exact].tolist()
    assert dur.tolist() == (s.end - s.start)[v.exact].tolist()
    assert kind.tolist() == s.kind[v.exact].tolist() and name.tolist() == s.name[v.exact].tolist()
    assert ref.tolist() == s.ref[v.exact].tolist()
    col, count, busy = (np.frombuffer(buf[i], dt) for i, dt in zip(header["columns"][:3], ("<u4", "<u4", "<f4")))
    assert col.tolist() == v.column.tolist() and count.tolist() == v.count.tolist()
    assert busy == pytest.approx(v.busy, rel=1e-6)
    assert packer.nbytes == sum(len(b) for b in buf)
