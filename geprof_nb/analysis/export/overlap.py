"""Overlap Analysis slices: each step's Computing, Communication,
Communication(Not Overlapped) and Free intervals.

The same definitions as :func:`..tables.breakdown.step_breakdown` (the tasks of an
iteration clipped to its step window; compute = every op_summary task that is
not a collective), but as intervals instead of totals, so that the slices
of a step add up to its step_trace_time row and msprof-analyze, which sums the
slices, reports what ``Profile.step_breakdown`` does.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..tables import intervals
from ..tables.breakdown import communication_rows, step_windows
from ..tables.summary import OpRows

Intervals = list[tuple[int, int]]
#: Slice names, in the order of their thread ids in the Overlap Analysis process.
KINDS = ("Computing", "Communication", "Communication(Not Overlapped)", "Free")


def union(starts: np.ndarray, ends: np.ndarray) -> Intervals:
    """Disjoint, sorted, non-empty intervals covering the given ones (touching ones merge), as int ns pairs."""
    s, e = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    keep = e > s
    s, e = intervals.union(s[keep], e[keep])
    return list(zip(s.tolist(), e.tolist()))


def subtract(a: Intervals, b: Intervals) -> Intervals:
    """The parts of the disjoint sorted intervals ``a`` that ``b`` (also disjoint, sorted) does not cover."""
    out: Intervals = []
    j = 0
    for s, e in a:
        while j < len(b) and b[j][1] <= s:
            j += 1
        k, cur = j, s
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            out.append((cur, e))
    return out


def overlap_slices(rows: OpRows, bounds, communication: np.ndarray | None = None
                   ) -> Iterator[tuple[int, str, int, int]]:
    """(step, kind, start ns, end ns) of every Overlap Analysis slice, step by step.

    ``bounds``: the source's step bounds (:meth:`Source.step_bounds`); ``communication``: which
    rows are collectives (:meth:`Source.communication_rows`; by default op_summary's Task Type).
    """
    f = rows.frame
    if f.empty:
        return
    start = rows.start_ns.astype(np.int64)
    end = start + np.rint(f["Task Duration(us)"].to_numpy(float) * 1000).astype(np.int64)
    comm = communication_rows(rows) if communication is None else np.asarray(communication, bool)
    # each iteration's rows as a slice of one stable sort (not a comparison of every row per step)
    order = np.argsort(rows.iteration, kind="stable")
    iters = rows.iteration[order]
    for step, w0, w1 in step_windows(bounds, rows).itertuples(index=False):
        inside = order[np.searchsorted(iters, step, "left"):np.searchsorted(iters, step, "right")]
        s, e, c = np.clip(start[inside], w0, w1), np.clip(end[inside], w0, w1), comm[inside]
        computing = union(s[~c], e[~c])
        communication = union(s[c], e[c])
        free = subtract([(int(w0), int(w1))], union(s, e))
        for kind, spans in zip(KINDS, (computing, communication, subtract(communication, computing), free)):
            for a, b in spans:
                yield int(step), kind, a, b
