"""What-if re-timing: predictions derived by hand on small runs, and bad changes refused naming what is wrong."""

from __future__ import annotations

import math

import numpy as np
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis.timing.what_if import WhatIfChange
from helpers.geprof_testing import build_tiny_graph, run_profiled_session


@pytest.fixture(scope="module")
def two_stream(tmp_path_factory):
    """The tiny training graph on 2 ranks: stream 1's compute, a record, stream 2's AllReduce, back to stream 1."""
    return run_profiled_session(tmp_path_factory.mktemp("tiny"), build_tiny_graph(2)[0], steps=2, hccl="on").profile


@pytest.fixture(scope="module")
def dynamic(tmp_path_factory):
    graph = ge.models.mlp(batch_size=4, in_features=16, hidden=(16,), dynamic=True)
    return run_profiled_session(tmp_path_factory.mktemp("dyn"), graph, steps=2).profile


def _step_tasks(profile, iteration: int):
    times = profile.task_time
    ns = profile.times_ns("task_time")
    b = profile.source.step_bounds().set_index("step").loc[iteration]
    start, stop = ns["task_start(us)"].to_numpy(np.int64), ns["task_stop(us)"].to_numpy(np.int64)
    mine = (start >= b["begin"]) & (start < b["end"])
    return times[mine].assign(start=start[mine], stop=stop[mine]), int(b["begin"]), int(b["end"])


def test_a_matmul_speedup_saves_its_time_on_the_serial_chain(two_stream):
    # every MatMul runs on stream 1 before the record the AllReduce waits for: the whole step after them moves
    # earlier by what they save, int(d / 2 + 0.5) each
    what = two_stream.what_if(op_speedup={"MatMul*": 2.0})
    for it in (1, 2):
        tasks, begin, end = _step_tasks(two_stream, it)
        d = (tasks["stop"] - tasks["start"])[tasks["kernel_name"].astype(str).str.contains("MatMulV2|fc1|fc2")]
        d = d[tasks.loc[d.index, "kernel_type"] == "KERNEL_AICORE"]
        saved = int(sum(x - int(x / 2 + 0.5) for x in d))
        row = what.predicted.set_index("iteration").loc[it]
        assert row["now_ns"] == end - begin
        assert row["delta_ns"] == -saved
        assert row[["compute_ns", "communication_ns", "host_ns", "wait_ns", "idle_ns"]].sum() == row["predicted_ns"]
    moved = what.explain()
    assert set(moved.loc[moved["iteration"] == 1, "op_name"]) == {"fc1", "fc2", "gradients/fc1_grad/MatMulV2",
                                                                  "gradients/fc2_grad/MatMulV2",
                                                                  "gradients/fc2_grad/MatMulV2_1"}


def test_removing_the_allreduce_by_hand(two_stream):
    # by hand from the recorded times of step 1: stream 2 keeps its wait's end, the 20 ns gap, a 0 ns AllReduce,
    # the 20 ns gap and its 300 ns record; stream 1's wait ends its 150 ns tail after that record (it started
    # before); then the two ApplyMomentum run as recorded
    tasks, begin, end = _step_tasks(two_stream, 1)
    s2 = tasks[tasks["stream_id"] == 2].sort_values("start")
    wait2, hccl, rec2 = s2.iloc[0], s2.iloc[1], s2.iloc[2]
    record_end = wait2["stop"] + (hccl["start"] - wait2["stop"]) + 0 + (rec2["start"] - hccl["stop"]) + \
        (rec2["stop"] - rec2["start"])
    s1 = tasks[tasks["stream_id"] == 1].sort_values("start")
    wait1 = s1[s1["kernel_type"] == "EVENT_WAIT"].iloc[0]
    after = s1[s1["start"] >= wait1["stop"]]
    tail = wait1["stop"] - max(wait1["start"], rec2["stop"])
    finish = max(wait1["start"], record_end) + tail + int((after["stop"] - after["start"]).sum()) + \
        int((after["start"].to_numpy()[1:] - after["stop"].to_numpy()[:-1]).sum())
    predicted = two_stream.what_if(remove_ops=["*HcomAllReduce*"]).predicted.set_index("iteration")
    assert predicted.loc[1, "predicted_ns"] == finish - begin + (end - after["stop"].max())
    assert predicted.loc[1, "communication_ns"] == 4 * 0 + sum(  # the copies stay on the path, the AllReduce not
        int(r["stop"] - r["start"]) for _, r in s1[s1["kernel_type"] == "MEMCPY_ASYNC"].iterrows())


def test_a_link_change_scales_the_collective_by_its_time_on_that_link(two_stream):
    sub = two_stream.hccl_tasks
    sub = sub[sub["Iteration ID"] == 1]
    assert len(sub)  # the run records the AllReduce's sub-tasks
    moving = sub[sub["Size(Byte)"] > 0]  # the data moves, over HCCS between the two ranks of one server
    assert set(moving["Link Type"].astype(str)) >= {"HCCS"}
    share = float(moving.loc[moving["Link Type"] == "HCCS", "Duration(us)"].sum() / sub["Duration(us)"].sum())
    link = "HCCS"
    tasks, begin, end = _step_tasks(two_stream, 1)
    d = int((tasks["stop"] - tasks["start"])[tasks["kernel_type"] == "HCCL"].iloc[0])
    slower = int(d * (1 + share * (1 / 0.5 - 1)) + 0.5)
    delta = two_stream.what_if(link_bandwidth={link: 0.5}).predicted.set_index("iteration").loc[1, "delta_ns"]
    assert delta == slower - d  # the AllReduce is on the path: the step grows by what it grows


def test_capping_host_gaps_removes_the_host_time_above_the_cap(dynamic):
    path = dynamic.critical_path()
    for cap_us in (0, 1.5):
        predicted = dynamic.what_if(host_gap_us=cap_us).predicted.set_index("iteration")
        for it, seg in path.groupby("iteration"):
            host = seg.loc[(seg["kind"] == "host") & (seg["op_name"] != ""), "duration"]  # gaps before launched ops
            cut = int(np.maximum(host - int(cap_us * 1000), 0).sum())  # one stream: the whole step is its chain
            assert cut > 0
            assert predicted.loc[it, "delta_ns"] == -cut


def test_the_change_keeps_its_keywords(two_stream):
    what = two_stream.what_if(op_speedup={"MatMul*": 2, "fc1": 1.5}, remove_ops=["xent"], host_gap_us=3)
    assert what.change == WhatIfChange((("MatMul*", 2.0), ("fc1", 1.5)), ("xent",), None, None, 3.0)
    assert what.change.keywords() == {"op_speedup": {"MatMul*": 2.0, "fc1": 1.5}, "remove_ops": ["xent"],
                                      "host_gap_us": 3.0}
    # fc1 matches both patterns: its factors multiply
    tasks, _, _ = _step_tasks(two_stream, 1)
    d = int((tasks["stop"] - tasks["start"])[tasks["kernel_name"] == "fc1"].iloc[0])
    moved = what.explain().set_index(["iteration", "op_name"])
    assert moved.loc[(1, "fc1"), "predicted_ns"] == int(d / 3.0 + 0.5)
    assert moved.loc[(1, "xent"), "predicted_ns"] == 0


@pytest.mark.parametrize(("keywords", "message"), [
    ({"op_speedup": {"Foo*": 2.0}}, "op_speedup pattern 'Foo*' matches no op in this run"),
    ({"remove_ops": ["nothing/*"]}, "remove_ops pattern 'nothing/*' matches no op in this run"),
    ({"op_speedup": {"MatMul*": 0}}, "op_speedup pattern 'MatMul*': factor 0 must be a finite number > 0"),
    ({"op_speedup": {"MatMul*": -1.0}}, "factor -1.0 must be a finite number > 0"),
    ({"op_speedup": {"MatMul*": math.inf}}, "factor inf must be a finite number > 0"),
    ({"op_speedup": {"MatMul*": math.nan}}, "factor nan must be a finite number > 0"),
    ({"link_bandwidth": {"NVLink": 2.0}}, "link_bandwidth: unknown link type 'NVLink'; accepted: HCCS, RoCE, PCIe, SIO"),
    ({"link_bandwidth": {"RoCE": 0}}, "link_bandwidth 'RoCE': factor 0 must be a finite number > 0"),
    ({"device": ""}, "device '': expected a device spec such as 'Ascend910B'"),
    ({"host_gap_us": -1}, "host_gap_us -1 must be a finite number >= 0"),
])
def test_bad_changes_are_refused_naming_them(two_stream, keywords, message):
    with pytest.raises(ValueError) as err:
        two_stream.what_if(**keywords)
    assert message in str(err.value)


def test_verify_needs_a_replay(two_stream):
    loaded = geprof_nb.load(two_stream.path)  # the run simulated here has one (tests/test_replay.py)
    assert loaded.replay is None
    with pytest.raises(RuntimeError, match="verify\\(\\) needs a run simulated in this process; this Profile was "
                                           f"loaded from {loaded.path}"):
        loaded.what_if(op_speedup={"MatMul*": 2.0}).verify()


def test_verify_compares_with_the_replayed_run(two_stream, monkeypatch):
    # a replay that returns the run itself: the identity change is predicted exactly
    calls = []

    def replay(**keywords):
        calls.append(keywords)
        return two_stream

    monkeypatch.setattr(two_stream, "replay", replay)
    checked = two_stream.what_if().verify()
    assert calls == [{}]
    assert checked["error"].tolist() == [0.0, 0.0] and list(checked.columns) == ["iteration", "predicted_ns",
                                                                                  "simulated_ns", "error"]
