"""Which EVENT_RECORD an EVENT_WAIT waited for, read from the times (the records carry no event id): a wait that
waited was released by the last record before its end, which several waits may share; one that did not wait is
paired with the oldest record no wait has claimed (pairing it with the latest instead tied it to an unrelated
record and made a faster link look slower)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from geprof_nb.analysis.timing.dependency_graph import Tasks, step_graphs

#: (name, task type, stream, start, end): stream 1 records R0, R1, R2; streams 2 and 3 both wait on R0 (they
#: waited: R0 ends after they began); stream 2 then waits twice after R1 and R2 have ended (no waiting).
TASKS = [
    ("R0", "EVENT_RECORD", 1, 0, 10),
    ("W_shared_2", "EVENT_WAIT", 2, 5, 12),
    ("W_shared_3", "EVENT_WAIT", 3, 5, 12),
    ("R1", "EVENT_RECORD", 1, 20, 30),
    ("R2", "EVENT_RECORD", 1, 32, 35),
    ("W_late_a", "EVENT_WAIT", 2, 40, 42),
    ("W_late_b", "EVENT_WAIT", 2, 50, 52),
]


def test_waits_pair_with_the_record_that_released_them_or_the_oldest_unclaimed():
    names, types, streams, starts, ends = (np.asarray(c) for c in zip(*TASKS))
    n = len(TASKS)
    tasks = Tasks(names.astype(object), np.full(n, "N/A", object), types.astype(object), streams.astype(np.int64),
                  np.arange(n, dtype=np.int64), starts.astype(np.int64), ends.astype(np.int64), np.zeros(n, bool),
                  False, "")
    (g,) = step_graphs(tasks, pd.DataFrame({"step": [1], "begin": [0], "end": [60]}))
    name = tasks.name[g.index]
    paired = {str(name[i]): str(name[r]) for i, r in enumerate(g.record) if r >= 0}
    assert paired == {"W_shared_2": "R0", "W_shared_3": "R0", "W_late_a": "R1", "W_late_b": "R2"}
