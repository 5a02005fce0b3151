"""``host_events`` from known raw host profiler records: names and event strings are looked up once per
distinct id, so ids that repeat, are missing from the hash dictionary, share a string or are no known
event must still give each row its own name, and categories of the names that occur."""

from __future__ import annotations

import numpy as np
import pandas as pd

import geprof_nb
from geprof_nb.prof import rawdata
from geprof_nb.prof.host_profiler import ProfilingEvent
from helpers.rawrun_helpers import records, write_run

INFER, TILING = int(ProfilingEvent.kInferShape), int(ProfilingEvent.kTiling)
UNKNOWN_EVENT = 200  # past the last event index
MISSING_ID = 0xDEADBEEF00000001  # not in the hash dictionary


def span(element: int, event: int, start_ns: int, end_ns: int, thread: int = 7) -> list[dict]:
    return [{"timestamp": start_ns, "thread_id": thread, "element": element, "event": event,
             "phase": rawdata.HOST_EVENT_START},
            {"timestamp": end_ns, "thread_id": thread, "element": element, "event": event,
             "phase": rawdata.HOST_EVENT_END}]


def test_repeated_missing_and_shared_ids_name_every_row(tmp_path):
    hashes = {11: "conv1/Conv2D", 12: "relu/Relu", 13: "relu/Relu", 14: "never/Recorded"}  # 12 and 13 share a name
    rows = (span(12, INFER, 5_000, 6_000) + span(11, TILING, 1_000, 1_500) + span(MISSING_ID, INFER, 3_000, 3_250)
            + span(11, INFER, 2_000, 2_100, thread=8) + span(13, UNKNOWN_EVENT, 4_000, 4_400)
            + span(12, TILING, 7_000, 7_010))
    p = geprof_nb.load(write_run(tmp_path / "run", {"host_event": records("host_event", rows)}, hashes))
    he = p.host_events
    unknown = "<unknown 0xdeadbeef00000001>"
    assert he["Element"].tolist() == ["conv1/Conv2D", "conv1/Conv2D", unknown, "relu/Relu", "relu/Relu", "relu/Relu"]
    assert he["Event"].tolist() == ["Tiling", "InferShape", "InferShape", f"UNKNOWN({UNKNOWN_EVENT})",
                                    "InferShape", "Tiling"]
    # categories: the names that occur, once each, sorted (as pd.Categorical of the row strings gives them)
    assert he["Element"].cat.categories.tolist() == sorted(["conv1/Conv2D", "relu/Relu", unknown])
    assert he["Event"].cat.categories.tolist() == sorted(["InferShape", "Tiling", f"UNKNOWN({UNKNOWN_EVENT})"])
    expected = pd.DataFrame({
        "Thread ID": np.array([7, 8, 7, 7, 7, 7], np.int64),
        "Element": pd.Categorical(["conv1/Conv2D", "conv1/Conv2D", unknown, "relu/Relu", "relu/Relu", "relu/Relu"]),
        "Event": pd.Categorical(["Tiling", "InferShape", "InferShape", f"UNKNOWN({UNKNOWN_EVENT})", "InferShape",
                                 "Tiling"]),
        "Start(us)": [1.0, 2.0, 3.0, 4.0, 5.0, 7.0], "End(us)": [1.5, 2.1, 3.25, 4.4, 6.0, 7.01],
        "Duration(us)": [0.5, 0.1, 0.25, 0.4, 1.0, 0.01]})
    pd.testing.assert_frame_equal(he, expected, check_exact=True)


def test_unpaired_records_give_no_rows_and_no_categories(tmp_path):
    start = span(11, INFER, 1_000, 2_000)[0]
    other_start = span(12, TILING, 1_500, 2_500)[0]
    p = geprof_nb.load(write_run(tmp_path / "run", {"host_event": records("host_event", [start, other_start])},
                                 {11: "a", 12: "b"}))
    he = p.host_events
    assert he.empty and list(he.columns) == ["Thread ID", "Element", "Event", "Start(us)", "End(us)", "Duration(us)"]
    assert he["Element"].cat.categories.tolist() == [] and he["Event"].cat.categories.tolist() == []
