"""``host_events``: GE's host profiler records (InferShape, Tiling, AllocMem,
kernel launch, ...) paired into spans, one row per scope."""

from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from ...prof import rawdata
from ...prof.host_profiler import event_string
from ..rundir import RunDir

HOST_EVENTS = ["Thread ID", "Element", "Event", "Start(us)", "End(us)", "Duration(us)"]


def _labels(ids: np.ndarray, label_of: Callable[[int], str]) -> pd.Categorical:
    """``pd.Categorical([label_of(int(i)) for i in ids])`` with each distinct id looked up once: a node's
    name and its events repeat every step (dynamic ResNet-50 x300: 1.18M spans, a few thousand ids)."""
    row, distinct = pd.factorize(ids)
    labels = pd.Categorical([label_of(int(i)) for i in distinct])
    return pd.Categorical.from_codes(labels.codes[row], dtype=labels.dtype)


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
    elements = _labels(starts["element"], lambda h: names.get(h, f"<unknown 0x{h:016x}>"))
    events = _labels(starts["event"], event_string)
    frame = pd.DataFrame({
        "Thread ID": starts["thread_id"].astype(np.int64), "Element": elements, "Event": events,
        "Start(us)": starts["timestamp"] / 1000.0, "End(us)": ends["timestamp"] / 1000.0,
        "Duration(us)": (ends["timestamp"] - starts["timestamp"]) / 1000.0,
    })
    return frame.sort_values("Start(us)", kind="stable").reset_index(drop=True)
