"""The critical path tiles every step exactly: on every zoo model (training, inference, V1 and V2, dynamic shapes),
on the real torch_npu runs, and on a hand-built two-stream step whose path is derived by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis.timing.critical_path import COLUMNS, frame, step_path
from geprof_nb.analysis.timing.dependency_graph import ASSUMPTIONS_SIMULATED, Tasks, step_graphs
from helpers.geprof_testing import build_tiny_graph, run_profiled_session

ROOT = Path(__file__).resolve().parents[2]
REAL_RUNS = sorted([*(ROOT / "data").glob("*/*/rank*_ascend_pt"),
                    *Path("/work/shared/real-data").glob("*/*/rank*_ascend_pt")])
#: Real runs whose files hold no step (msinsight's server test data has no step_trace_time rows).
STEPLESS_RUNS = sorted((ROOT / "data").glob("msinsight_server_test_data/test_rank_*"))


def _step_lengths(profile) -> dict[int, int]:
    b = profile.source.step_bounds()
    return dict(zip(b["step"].astype(int), (b["end"] - b["begin"]).astype(int)))


def _assert_tiles(profile) -> pd.DataFrame:
    path = profile.critical_path()
    lengths = _step_lengths(profile)
    assert lengths, "the run has steps"
    assert path.groupby("iteration")["duration"].sum().to_dict() == lengths
    for _, seg in path.groupby("iteration"):  # contiguous: each segment starts where the previous ended
        assert (seg["start"].to_numpy()[1:] == seg["end"].to_numpy()[:-1]).all()
        assert (seg["duration"] >= 0).all()
    assert set(path["kind"].astype(str)) <= {"compute", "communication", "host", "wait", "idle"}
    predicted = profile.what_if().predicted  # no change: the re-timed graph is the recorded timeline
    assert (predicted["predicted_ns"] == predicted["now_ns"]).all()
    return path


ZOO = {
    "mlp-train": lambda: ge.models.mlp(training=True),
    "mlp-infer": lambda: ge.models.mlp(training=False),
    "mlp-dynamic": lambda: ge.models.mlp(batch_size=4, in_features=16, hidden=(16,), dynamic=True),
    "resnet50-train": lambda: ge.models.resnet50(batch_size=2, image_size=64, training=True, world_size=2),
    "resnet50-infer": lambda: ge.models.resnet50(batch_size=2, image_size=64, training=False),
    "bert-train": lambda: ge.models.bert(layers=2, seq_len=32, batch_size=2, hidden=64, heads=4, vocab_size=100,
                                         world_size=2),
    "bert-dynamic": lambda: ge.models.bert(layers=1, seq_len=16, batch_size=2, hidden=64, heads=4, vocab_size=100,
                                           dynamic=True),
    "llm-tiny-train": lambda: ge.models.llm("tiny-llama", seq_len=128),
    "llm-tiny-infer": lambda: ge.models.llm("tiny-llama", seq_len=128, training=False),
}


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["v1", "v2"])
@pytest.mark.parametrize("model", list(ZOO))
def test_the_path_tiles_every_step_of_every_zoo_model(tmp_path, model, executor):
    run = run_profiled_session(tmp_path, ZOO[model](), steps=3, executor=executor, hccl="on")
    path = _assert_tiles(run.profile)
    assert path.attrs["assumptions"] == ASSUMPTIONS_SIMULATED
    if model.endswith("dynamic"):  # node by node: the device waits for the host's launches
        assert path.loc[path["kind"] == "host", "duration"].sum() > 0


def test_the_path_tiles_a_two_rank_step_through_its_event_waits(tmp_path):
    run = run_profiled_session(tmp_path, build_tiny_graph(2)[0], steps=2, hccl="on")
    path = _assert_tiles(run.profile)
    one = path[path["iteration"] == 1]
    # the AllReduce on stream 2 is on the path, reached through the EVENT_WAIT released by stream 1's record
    assert "gradients/HcomAllReduce_0" in set(one["op_name"])
    times = run.profile.task_time
    hccl = times[times["kernel_type"] == "HCCL"]
    assert one.loc[one["op_name"] == "gradients/HcomAllReduce_0", "duration"].iloc[0] == \
        round(hccl["task_time(us)"].iloc[0] * 1000)
    assert (one["kind"] == "wait").sum() == 4  # record, wait on stream 2; record, wait on stream 1


@pytest.mark.parametrize("run", REAL_RUNS, ids=lambda p: "/".join(p.parts[-3:]))
def test_the_path_tiles_the_real_runs(run):
    profile = geprof_nb.load(run)
    path = _assert_tiles(profile)
    assert "imported data" in path.attrs["assumptions"]
    on_path = path[path["kind"].isin(["compute", "communication"])]
    times = profile.task_time  # the DB holds a task table (copies, events); the text files only kernel_details
    names, us = (times["kernel_name"], times["task_time(us)"]) if len(times) else \
        (profile.op_summary["Op Name"], profile.op_summary["Task Duration(us)"])
    durations = pd.Series(np.rint(us.to_numpy() * 1000).astype(np.int64), index=names.astype(str)).groupby(level=0).max()
    # every task segment is one of the file's tasks, no longer than its longest run
    assert all(d <= durations[n] for n, d in zip(on_path["op_name"], on_path["duration"]))


@pytest.mark.parametrize("run", STEPLESS_RUNS, ids=lambda p: p.name)
def test_a_run_without_steps_has_an_empty_path(run):
    profile = geprof_nb.load(run)
    assert profile.source.step_bounds().empty and len(profile.op_summary)
    path = profile.critical_path()
    assert path.empty and list(path.columns) == COLUMNS
    assert profile.what_if().predicted.empty


def _hand_tasks() -> Tasks:
    """Two streams.  Stream 0: A (0-100), B (100-300), RECORD (300-310), D (320-400).  Stream 1: WAIT (0-460, for
    the record on stream... 2's), here stream 1 waits for stream 0's record: WAIT (0-330), C (330-700).  The step is
    [0, 750]: stream 1 ends last."""
    names = np.array(["A", "B", "N/A", "D", "N/A", "C"], object)
    types = np.array(["KERNEL_AICORE", "KERNEL_AIVEC", "EVENT_RECORD", "KERNEL_AIVEC", "EVENT_WAIT", "HCCL"], object)
    return Tasks(names, np.array(["MatMulV2", "Add", "N/A", "Mul", "N/A", "N/A"], object), types,
                 np.array([0, 0, 0, 0, 1, 1]), np.array([1, 2, 3, 4, 1, 2]),
                 np.array([0, 100, 300, 320, 0, 330]), np.array([100, 300, 310, 400, 330, 700]),
                 np.zeros(6, bool), False, ASSUMPTIONS_SIMULATED)


def test_a_hand_built_two_stream_step():
    tasks = _hand_tasks()
    (graph,) = step_graphs(tasks, pd.DataFrame({"step": [1], "begin": [0], "end": [750]}))
    path = frame(step_path(graph, tasks), tasks)
    # by hand, back from 750: idle 700-750 after C; C 330-700; the wait's tail 310-330 (its record ended at 310);
    # the record 300-310 on stream 0; B 100-300; A 0-100
    assert path[["start", "end", "kind", "op_name"]].values.tolist() == [
        [0, 100, "compute", "A"], [100, 300, "compute", "B"], [300, 310, "wait", "N/A"],
        [310, 330, "wait", "N/A"], [330, 700, "communication", "C"], [700, 750, "idle", ""]]
    assert path["duration"].sum() == 750
    assert path["stream"].tolist() == [0, 0, 0, 1, 1, -1]
