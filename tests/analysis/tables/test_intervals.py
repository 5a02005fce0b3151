"""analysis.tables.intervals: the one interval union and covered-time every step split is built from."""

from __future__ import annotations

import numpy as np

from geprof_nb.analysis.export import overlap
from geprof_nb.analysis.tables.intervals import covered_time, union


def test_union_merges_overlapping_and_touching_intervals_in_start_order():
    starts, ends = np.array([5, 0, 2, 10, 12, 11]), np.array([6, 2, 4, 12, 15, 13])
    # by start: [0,2] [2,4] touch -> [0,4]; [5,6] alone; [10,12] [11,13] [12,15] overlap -> [10,15]
    s, e = union(starts, ends)
    assert s.tolist() == [0, 5, 10] and e.tolist() == [4, 6, 15]
    assert s.dtype == starts.dtype and e.dtype == ends.dtype


def test_a_merged_interval_ends_at_the_largest_end_of_its_members():
    s, e = union(np.array([0, 1, 2]), np.array([10, 3, 4]))  # [1,3] and [2,4] lie inside [0,10]
    assert s.tolist() == [0] and e.tolist() == [10]


def test_union_keeps_empty_intervals_and_no_intervals_give_none():
    s, e = union(np.array([0, 3]), np.array([1, 3]))
    assert s.tolist() == [0, 3] and e.tolist() == [1, 3]
    s, e = union(np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert len(s) == len(e) == 0


def test_the_overlap_slices_drop_empty_intervals_before_the_union():
    """export.overlap's slices are the same union of the non-empty intervals, as int ns pairs."""
    starts, ends = [0, 7, 2, 9], [2, 7, 5, 8]  # [7,7] empty, [9,8] negative
    assert overlap.union(starts, ends) == [(0, 5)]
    assert overlap.union([], []) == []


def test_covered_time_counts_the_union_of_intervals_inside_each_window():
    starts, ends = np.array([0, 5, 6, 20.0]), np.array([3, 8, 10, 25.0])  # union: [0,3] [5,10] [20,25]
    lo, hi = np.array([-5, 2, 7, 11, 0, 26.0]), np.array([1, 6, 9, 30, 100, 40.0])
    assert covered_time(starts, ends, lo, hi).tolist() == [1, 2, 2, 5, 13, 0]
    assert covered_time(starts[:0], ends[:0], lo, hi).tolist() == [0] * 6


def test_covered_time_of_each_interval_by_the_others_is_what_the_advisor_leaves_exposed():
    """The advisor's AI CPU rule: each AI CPU task's time minus what the other tasks cover of it."""
    others_s, others_e = np.array([0.0, 4.0]), np.array([3.0, 9.0])  # union [0,3] [4,9]
    cpu_s, cpu_e = np.array([2.0, 3.0, 10.0]), np.array([5.0, 4.0, 12.0])
    exposed = (cpu_e - cpu_s) - covered_time(others_s, others_e, cpu_s, cpu_e)
    assert exposed.tolist() == [1.0, 1.0, 2.0]  # [3,4] of [2,5]; all of [3,4]; all of [10,12]
