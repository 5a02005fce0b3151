"""``host_events``: GE's host profiler records (InferShape, Tiling, AllocMem,
kernel launch, ...) paired into spans, one row per scope."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..prof import rawdata
from ..prof.host_profiler import event_string
from .rundir import RunDir

HOST_EVENTS = ["Thread ID", "Element", "Event", "Start(us)", "End(us)", "Duration(us)"]


def host_events(run: RunDir) -> pd.DataFrame:
    """One row per recorded scope, by start time.  Records come as (Start, End) pairs."""
    rec = run.load("host_event")
    if len(rec) < 2:
        return pd.DataFrame(columns=HOST_EVENTS)
    starts, ends = rec[0:len(rec) - 1:2], rec[1::2]
    paired = ((starts["phase"] == rawdata.HOST_EVENT_START) & (ends["phase"] == rawdata.HOST_EVENT_END)
              & (starts["element"] == ends["element"]) & (starts["event"] == ends["event"]))
    starts, ends = starts[paired], ends[paired]
    names = run.hashes
    elements = pd.Categorical([names.get(int(h), f"<unknown 0x{int(h):016x}>") for h in starts["element"]])
    events = pd.Categorical([event_string(int(e)) for e in starts["event"]])
    frame = pd.DataFrame({
        "Thread ID": starts["thread_id"].astype(np.int64), "Element": elements, "Event": events,
        "Start(us)": starts["timestamp"] / 1000.0, "End(us)": ends["timestamp"] / 1000.0,
        "Duration(us)": (ends["timestamp"] - starts["timestamp"]) / 1000.0,
    })
    return frame.sort_values("Start(us)", kind="stable").reset_index(drop=True)
