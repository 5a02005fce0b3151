"""msprof's ``aicpu`` summary: the time split of every AI CPU kernel execution.

Rows are ``aicpu`` records in timestamp order (msprof sorts by the kernel start);
``Node`` and ``Stream ID``/``Task ID`` come from the task track (joined by
connection id), names through the hash dictionary; ``N/A`` / ``<NA>`` where
the task is unknown, as msprof prints a node it cannot match.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..rundir import RunDir
from .indexing import scatter
from .summary import NA

AICPU = ["Timestamp(us)", "Node", "Compute_time(us)", "Memcpy_time(us)", "Task_time(us)", "Dispatch_time(us)",
         "Total_time(us)", "Stream ID", "Task ID"]
_TIMES = (("Compute_time(us)", "compute_ns"), ("Memcpy_time(us)", "memcpy_ns"), ("Task_time(us)", "task_ns"),
          ("Dispatch_time(us)", "dispatch_ns"), ("Total_time(us)", "total_ns"))


def aicpu(run: RunDir, device_id: int = 0) -> pd.DataFrame:
    """One row per AI CPU kernel execution (times in us)."""
    rec = run.load("aicpu", device_id)
    rec = rec[np.argsort(rec["timestamp"], kind="stable")]
    track = run.load("task_track", device_id)
    n_conn = 1 + max(int(track["connection_id"].max(initial=0)), int(rec["connection_id"].max(initial=0)))
    conn = rec["connection_id"].astype(np.int64)
    known = scatter(n_conn, track["connection_id"], True, False, bool)[conn]
    kernel = scatter(n_conn, track["connection_id"], track["kernel_name"], 0, np.uint64)
    names = run.hashes
    ids, inverse = np.unique(kernel[conn], return_inverse=True)
    text = np.array([names.get(int(h), NA) if h else NA for h in ids], dtype=object)

    def ids_of(field: str) -> pd.arrays.IntegerArray:
        out = pd.array(scatter(n_conn, track["connection_id"], track[field], 0, np.int64)[conn], dtype="Int64")
        out[~known] = pd.NA
        return out

    data: dict[str, object] = {"Timestamp(us)": rec["timestamp"] / 1000.0, "Node": text[inverse.ravel()]}
    for col, field in _TIMES:
        data[col] = rec[field] / 1000.0
    data["Stream ID"] = ids_of("stream_id")
    data["Task ID"] = ids_of("task_id")
    return pd.DataFrame(data)[AICPU]
