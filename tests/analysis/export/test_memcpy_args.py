"""MEMCPY_ASYNC task events carry the runtime's MemcpyInfo in the timelines: ``size(B)``,
``bandwidth(GB/s)`` (size / duration, GB = 1e9 bytes, 3 decimals) and ``operation`` (the direction),
after msprof's common task args, in the msprof timeline JSON and the ascend_pt trace_view.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import geprof_nb
from geprof_nb.prof.rawdata import GeTaskType, MemcpyDirection, RtTaskType
from helpers.geprof_testing import build_tiny_graph, run_profiled_session
from helpers.rawrun_helpers import Hashes, records, write_run

COMMON_ARGS = ["Model Id", "Task Type", "Physic Stream Id", "Task Id", "Batch Id", "Subtask Id", "connection_id"]
MEMCPY_ARGS = ["size(B)", "bandwidth(GB/s)", "operation"]
# connection id -> (runtime task type, kernel name, task id); copies have no op (kernel name 0)
TASKS = {0: (RtTaskType.MEMCPY_ASYNC, "", 1), 1: (RtTaskType.MEMCPY_ASYNC, "", 2),
         2: (RtTaskType.KERNEL_AICORE, "MatMul_1", 3)}
# (connection id, iteration, start ns, duration ns)
EXECUTIONS = [(0, 1, 1_000_000, 40_000), (1, 1, 1_040_000, 3_000), (2, 1, 1_043_000, 50_000),
              (0, 2, 2_000_000, 50_000), (1, 2, 2_050_000, 0), (2, 2, 2_050_000, 50_000)]
# connection id -> (bytes, direction) of the copies
MEMCPY = {0: (1_000_000, MemcpyDirection.HOST_TO_DEVICE), 1: (1_234_567, MemcpyDirection.DEVICE_TO_HOST_EX)}
# (connection id, iteration) -> exact args: bandwidth = bytes / ns (GB/s), 3 decimals; 0 for a zero duration
EXPECTED = {(0, 1): [1_000_000, 25.0, "host to device"], (1, 1): [1_234_567, 411.522, "device to host ex"],
            (0, 2): [1_000_000, 20.0, "host to device"], (1, 2): [1_234_567, 0.0, "device to host ex"]}


def _write(path: Path, with_memcpy: bool) -> Path:
    h = Hashes()
    track = [dict(connection_id=c, model_id=1, stream_id=5, task_id=tid, task_type=rt, kernel_name=h(n) if n else 0)
             for c, (rt, n, tid) in TASKS.items()]
    basic = [dict(connection_id=2, op_name=h("MatMul_1"), task_type=GeTaskType.AI_CORE, op_type=h("MatMulV2"),
                  block_dim=8)]
    hwts = [dict(start=s, dur=d, connection_id=c, iteration=it) for c, it, s, d in EXECUTIONS]
    recs = {"task_track": records("task_track", track), "node_basic_info": records("node_basic_info", basic),
            "hwts": records("hwts", hwts)}
    if with_memcpy:
        recs["memcpy_info"] = records("memcpy_info", [dict(connection_id=c, size=s, direction=d)
                                                      for c, (s, d) in MEMCPY.items()])
    return write_run(path, recs, h.table)


def _timeline(out: Path, pattern: str) -> list[dict]:
    return json.loads(next(out.rglob(pattern)).read_text(encoding="utf-8"))


def _task_events(events: list[dict]) -> dict[tuple[int, int], dict]:
    """Ascend Hardware task slices by (connection id, iteration: the n-th slice of that connection)."""
    out: dict[tuple[int, int], dict] = {}
    for e in events:
        if e.get("ph") == "X" and "connection_id" in e.get("args", {}) and "Task Type" in e["args"]:
            conn = e["args"]["connection_id"]
            out[conn, 1 + sum(k[0] == conn for k in out)] = e
    return out


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, dict]:
    """Each timeline (msprof JSON, trace_view) of the run with MemcpyInfo and of an older run without it."""
    root = tmp_path_factory.mktemp("memcpy")
    out = {}
    for label, with_memcpy in (("new", True), ("old", False)):
        profile = geprof_nb.load(_write(root / label, with_memcpy))
        msprof_dir = profile.export(root / f"{label}_msprof", format="msprof")
        ascend_dir = profile.export(root / f"{label}_ascend_pt", format="ascend_pt")
        out[label, "msprof"] = _task_events(_timeline(msprof_dir, "msprof_*.json"))
        out[label, "trace_view"] = _task_events(_timeline(ascend_dir, "trace_view.json"))
    return out


@pytest.mark.parametrize("timeline", ["msprof", "trace_view"])
def test_copies_get_size_bandwidth_and_operation_after_the_common_args(exported, timeline):
    events = exported["new", timeline]
    assert sorted(events) == sorted((c, it) for c, it, _, _ in EXECUTIONS)
    for (conn, it), expected in EXPECTED.items():
        args = events[conn, it]["args"]
        assert events[conn, it]["name"] == "MEMCPY_ASYNC" and args["Task Type"] == "MEMCPY_ASYNC"
        tail = ["Stream Id"] if timeline == "trace_view" else []  # torch_npu's extra stream id, last
        assert list(args) == COMMON_ARGS + MEMCPY_ARGS + tail, (conn, it)
        assert [args[k] for k in MEMCPY_ARGS] == expected, (conn, it)
        assert type(args["size(B)"]) is int and type(args["bandwidth(GB/s)"]) is float
        assert args["connection_id"] == conn and args["Task Id"] == TASKS[conn][2]
    for it in (1, 2):  # the kernel has no copy args
        assert list(events[2, it]["args"]) == COMMON_ARGS + (["Stream Id"] if timeline == "trace_view" else [])


@pytest.mark.parametrize("timeline", ["msprof", "trace_view"])
def test_a_run_without_memcpy_info_writes_no_copy_args(exported, timeline):
    old, new = exported["old", timeline], exported["new", timeline]
    assert sorted(old) == sorted(new)
    for key, event in old.items():
        assert not set(MEMCPY_ARGS) & set(event["args"]), key
        assert {k: v for k, v in new[key]["args"].items() if k not in MEMCPY_ARGS} == event["args"]
        assert {k: v for k, v in new[key].items() if k != "args"} == {k: v for k, v in event.items() if k != "args"}


def test_simulated_input_copies_in_the_msprof_timeline(tmp_path):
    graph, _ = build_tiny_graph()
    run = run_profiled_session(tmp_path / "prof", graph, steps=2)
    events = _timeline(run.profile.export(tmp_path / "out", format="msprof"), "msprof_*.json")
    copies = [e for e in events if e.get("ph") == "X" and e.get("args", {}).get("Task Type") == "MEMCPY_ASYNC"]
    assert len(copies) == 2 * 2  # x and labels, each step
    for e in copies:
        args = e["args"]
        dur_ns = round(e["dur"] * 1000)
        assert args["size(B)"] == {1: 256, 2: 64}[args["Task Id"]]  # the Data nodes x and labels
        assert args["bandwidth(GB/s)"] == round(args["size(B)"] / dur_ns, 3) > 0
        assert args["operation"] == "host to device"
