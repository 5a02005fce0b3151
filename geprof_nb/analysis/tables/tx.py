"""``msprof_tx``: user markers and ranges (msproftx / mstx) with msprof's columns."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...prof import rawdata
from ..rundir import RunDir

MSPROF_TX = ["Device_id", "pid", "tid", "category", "event_type", "payload_type", "payload_value",
             "Start_time(us)", "End_time(us)", "message_type", "message", "domain", "Device Start_time(us)",
             "Device End_time(us)"]


def msprof_tx(run: RunDir, device_id: int = 0) -> pd.DataFrame:
    """One row per marker or range, by start time; device times are N/A (host-only markers)."""
    rec = run.load("mstx")
    if len(rec) == 0:
        return pd.DataFrame(columns=MSPROF_TX)
    names = run.hashes
    n = len(rec)
    frame = pd.DataFrame({
        "Device_id": np.full(n, device_id, np.int64), "pid": rec["pid"].astype(np.int64),
        "tid": rec["tid"].astype(np.int64), "category": rec["category"].astype(np.int64),
        "event_type": np.where(rec["event_type"] == rawdata.MSTX_MARKER, "marker", "start/end"),
        "payload_type": "N/A", "payload_value": "N/A",
        "Start_time(us)": rec["start"] / 1000.0, "End_time(us)": rec["end"] / 1000.0,
        "message_type": "string",
        "message": [names.get(int(h), "") for h in rec["message"]],
        "domain": [names.get(int(h), "") for h in rec["domain"]],
        "Device Start_time(us)": np.nan, "Device End_time(us)": np.nan,
    })
    return frame.sort_values("Start_time(us)", kind="stable").reset_index(drop=True)[MSPROF_TX]
