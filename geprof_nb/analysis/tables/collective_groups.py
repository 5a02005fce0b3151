"""Which communication group each collective of op_summary ran in: ``tp``, ``pp``, ``dp``, ``exp``, ...

A run records, once per collection, HCCL's op info of every collective task (``hccl_op`` records, keyed by
connection id): its communicator's name, which is a key of info.json's ``parallel.parallel_group_info``,
whose ``group_name`` is the group's kind (MindSpeed's names: ``tp``, ``pp``, ``dp``, ``exp``,
``dp_modulo_exp``, ``hccl_world_group``), as torch_npu's ``profiler_metadata.json`` has it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from .intervals import union

#: What a row that is no collective, or one whose group the run does not say, gets.
UNKNOWN = ""


def collective_group_names(records: np.ndarray, hashes: Mapping[int, str], group_info: Mapping,
                           connection_id: np.ndarray) -> np.ndarray:
    """Per op row (its ``connection_id``): the ``group_name`` of the group its ``hccl_op`` record names, or
    :data:`UNKNOWN` (no record, or a communicator the run's ``parallel_group_info`` does not list)."""
    out = np.full(len(connection_id), UNKNOWN, object)
    if not len(records) or not len(connection_id):
        return out
    kinds = {}
    for group in np.unique(records["group"]).tolist():
        entry = group_info.get(hashes.get(int(group), ""))
        kinds[group] = str(entry.get("group_name", UNKNOWN)) if isinstance(entry, Mapping) else UNKNOWN
    per_record = pd.Series(records["group"]).map(kinds).to_numpy(object)
    known = pd.Series(per_record, index=records["connection_id"].astype(np.int64))
    known = known[~known.index.duplicated()]
    found = pd.Series(np.asarray(connection_id, np.int64)).map(known)
    return found.fillna(UNKNOWN).to_numpy(object)


def exposed_group_time(iterations: np.ndarray, start: np.ndarray, end: np.ndarray, communication: np.ndarray,
                       in_group: np.ndarray) -> pd.DataFrame:
    """Per iteration: how long the collectives ``in_group`` run while no computation does (``Exposed(us)``:
    the union of computation and those collectives less the union of computation, the way step_breakdown's
    Communication(Not Overlapped) is the busy time less Computing), their summed time (``Time(us)``) and
    ``Count``.  Computation is every row that is not ``communication``; other groups' collectives hide
    nothing.  ``Exposed(us)`` never exceeds the iteration's span."""
    order = np.argsort(np.asarray(iterations), kind="stable")  # each iteration's rows one slice
    iterations = np.asarray(iterations)[order]
    start, end = np.asarray(start, np.float64)[order], np.asarray(end, np.float64)[order]
    comm = np.asarray(communication, bool)[order]
    compute, group = ~comm, np.asarray(in_group, bool)[order] & comm
    rows = []
    for it in np.unique(iterations[group]).tolist():
        lo, hi = np.searchsorted(iterations, it, "left"), np.searchsorted(iterations, it, "right")
        s, e, c, g = start[lo:hi], end[lo:hi], compute[lo:hi], group[lo:hi]
        exposed = _covered(s[c | g], e[c | g]) - _covered(s[c], e[c])
        rows.append((it, max(exposed, 0.0), float((e[g] - s[g]).sum()), int(g.sum())))
    return pd.DataFrame(rows, columns=["Iteration", "Exposed(us)", "Time(us)", "Count"])


def _covered(starts: np.ndarray, ends: np.ndarray) -> float:
    s, e = union(starts, ends)
    return float((e - s).sum())
