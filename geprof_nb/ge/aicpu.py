"""What one AI CPU kernel execution spends its time on (msprof's ``aicpu`` summary).

msprof's columns: ``Dispatch_time`` (handing the task to an AI CPU), ``Task_time``
(the kernel itself: ``Compute_time`` + ``Memcpy_time``) and ``Total_time`` (from
task start to end in kernel mode).  The simulator has no framework scheduling or
pre-processing share, so ``total = dispatch + task`` and ``task = compute + memcpy``,
exactly, in integer ns.  Memcpy moves the kernel's bytes at ~2 GB/s (the rate
``CostModel.aicpu`` charges); dispatch is a fixed cost; compute is the rest, so
run-to-run jitter shows in compute.  An execution shorter than memcpy + dispatch
shrinks both in proportion.
"""

from __future__ import annotations

import numpy as np

from ..prof.rawdata import AICPU_DTYPE

AICPU_MEMCPY_BANDWIDTH = 2e9  # bytes/s
AICPU_DISPATCH_NS = 5_000


def aicpu_breakdown(total_ns: np.ndarray, nbytes: int) -> dict[str, np.ndarray]:
    """Split executions of ``total_ns`` (int ns, any shape) of a kernel moving ``nbytes``
    into the ``AICPU_DTYPE`` time fields: compute_ns, memcpy_ns, task_ns, dispatch_ns, total_ns."""
    total = np.asarray(total_ns, np.int64)
    memcpy_nominal = int(nbytes / AICPU_MEMCPY_BANDWIDTH * 1e9)
    fixed = memcpy_nominal + AICPU_DISPATCH_NS
    scale = np.minimum(1.0, total / fixed)
    memcpy = np.floor(memcpy_nominal * scale).astype(np.int64)
    dispatch = np.floor(AICPU_DISPATCH_NS * scale).astype(np.int64)
    compute = total - memcpy - dispatch
    return {"compute_ns": compute, "memcpy_ns": memcpy, "task_ns": compute + memcpy, "dispatch_ns": dispatch,
            "total_ns": total}


def aicpu_records(timestamp_ns: np.ndarray, connection_id: int | np.ndarray, iteration: np.ndarray,
                  total_ns: np.ndarray, nbytes: int) -> np.ndarray:
    """``AICPU_DTYPE`` records of K executions of one AI CPU task (arrays [K]; ``connection_id`` may be scalar)."""
    parts = aicpu_breakdown(total_ns, nbytes)
    rec = np.zeros(len(parts["total_ns"]), AICPU_DTYPE)
    rec["timestamp"] = timestamp_ns
    rec["connection_id"] = connection_id
    rec["iteration"] = iteration
    for field, values in parts.items():
        rec[field] = values
    return rec
