"""``Profile.replay`` and ``WhatIf.verify()`` (issue 29): a run simulated in this process is re-issued in a GE of
its own under the change, with the run's seeds, and the prediction compared with it step by step."""

from __future__ import annotations

import tempfile

import numpy as np
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis import ClusterProfile
from geprof_nb.ge import session_log
from geprof_nb.ge.replay import NotReplayable
from geprof_nb.ge.session import new_session_log
from helpers.geprof_testing import run_profiled_session, small_resnet


@pytest.fixture(autouse=True)
def _replays_in_tmp_path(tmp_path, monkeypatch):
    """Replays write into a new temporary directory (tempfile.mkdtemp): the test's own, removed with it."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def _resnet_steps(sess: ge.Session, steps: int) -> None:
    for _ in range(steps):
        assert sess.run_graph(1) == ge.SUCCESS, ge.GEGetErrorMsg()


@pytest.fixture
def block_run(tmp_path):
    """A ``geprof_nb.profile()`` block on a GE initialised (and a model run once) before it, as a notebook does."""
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    sess = ge.Session()
    assert sess.add_graph(1, small_resnet(world_size=1)) == ge.SUCCESS
    _resnet_steps(sess, 1)
    with geprof_nb.profile(output=str(tmp_path)) as block:
        _resnet_steps(sess, 3)
    yield block.profile, sess
    ge.GEFinalize()


@pytest.mark.parametrize("change", [{"op_speedup": {"MatMul*": 2.0, "Conv2D*": 1.5}}, {"remove_ops": ["Relu*"]}])
def test_verify_of_a_profiled_block_is_within_one_percent(block_run, change):
    profile, sess = block_run
    checked = profile.what_if(**change).verify()
    assert list(checked.columns) == ["iteration", "predicted_ns", "simulated_ns", "error"]
    assert checked["iteration"].tolist() == [2, 3, 4]  # the run's own numbers (its model ran step 1 before)
    assert (checked["simulated_ns"] < profile.what_if().predicted["now_ns"]).all()  # the change took effect
    assert np.abs(checked["error"]).max() < 0.01
    # the notebook's own GE goes on: its session runs the next step
    assert ge.session.is_initialized() and sess.run_graph(1) == ge.SUCCESS


def test_replay_without_a_change_repeats_the_run_exactly(block_run):
    profile, _ = block_run
    again = profile.replay()
    steps = lambda p: (p.source.step_bounds()["end"] - p.source.step_bounds()["begin"]).tolist()  # noqa: E731
    assert steps(again) == steps(profile) and again.path != profile.path and again.replay is None


def test_a_script_run_replays_under_its_own_profiling_options(tmp_path):
    run = run_profiled_session(tmp_path / "base", small_resnet(world_size=1), steps=2)
    checked = run.profile.what_if(op_speedup={"Conv2D*": 3.0}).verify()
    assert len(checked) == 2 and np.abs(checked["error"]).max() < 0.01
    assert not ge.session.is_initialized()


def test_a_loaded_run_cannot_be_verified(block_run):
    profile, _ = block_run
    loaded = geprof_nb.load(profile.path)
    with pytest.raises(RuntimeError, match="needs a run simulated in this process; this Profile was loaded from"):
        loaded.what_if(op_speedup={"MatMul*": 2.0}).verify()


def test_an_acl_driven_run_is_refused_naming_aclmdlexecute(tmp_path):
    acl = ge.acl
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    try:
        model_id, ret = acl.aclmdlLoadFromMem(ge.aclgrphBuildModel(ge.models.mlp(batch_size=8, world_size=1))[0])
        assert ret == acl.ACL_SUCCESS
        with geprof_nb.profile(output=str(tmp_path / "out")) as block:
            for _ in range(2):
                assert acl.aclmdlExecute(model_id) == acl.ACL_SUCCESS
        with pytest.raises(NotReplayable, match="cannot be replayed: it ran aclmdlExecute"):
            block.profile.what_if(op_speedup={"MatMul*": 2.0}).verify()
    finally:
        ge.GEFinalize()


@pytest.mark.parametrize("gap_us", [0, 2, 5])
def test_a_host_gap_cap_is_verified_within_one_percent(tmp_path, gap_us):
    graph = ge.models.mlp(batch_size=4, in_features=16, hidden=(16,), dynamic=True)
    run = run_profiled_session(tmp_path / "dyn", graph, steps=3)
    checked = run.profile.what_if(host_gap_us=gap_us).verify()
    assert (checked["simulated_ns"] < 0.7 * run.profile.what_if().predicted["now_ns"]).all()  # host-bound: it shrinks
    assert np.abs(checked["error"]).max() < 0.01


@pytest.fixture(scope="module")
def dp8(tmp_path_factory):
    """A data-parallel small ResNet-50 on 8 simulated ranks, as ``%%geprof --ranks 8`` runs it."""
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    try:
        with ge.simulation_settings(ranks=8), geprof_nb.profile(output=str(tmp_path_factory.mktemp("dp8")),
                                                                hccl="on") as block:
            sess = ge.Session()
            assert sess.add_graph(1, small_resnet(world_size=8)) == ge.SUCCESS, ge.GEGetErrorMsg()
            _resnet_steps(sess, 3)
    finally:
        ge.GEFinalize()
    return block.profile


def test_a_cluster_replays_on_as_many_ranks(dp8):
    assert isinstance(dp8, ClusterProfile) and len(dp8.ranks) == 8
    again = dp8.replay(op_speedup={"Conv2D*": 2.0})
    assert isinstance(again, ClusterProfile) and sorted(again.ranks) == sorted(dp8.ranks)
    checked = dp8.what_if(op_speedup={"Conv2D*": 2.0}).verify()
    assert np.abs(checked["error"]).max() < 0.01


def test_link_changes_on_a_cluster_are_verified_within_two_percent(dp8):
    rng = np.random.default_rng(29)
    now = dp8.what_if().predicted["now_ns"].to_numpy()
    for _ in range(4):
        change = {"HCCS": float(np.round(rng.uniform(0.25, 4.0), 2)), "RoCE": float(np.round(rng.uniform(0.25, 4.0), 2))}
        checked = dp8.what_if(link_bandwidth=change).verify()
        moved = checked["simulated_ns"].to_numpy() / now
        assert (np.abs(moved - 1) > 0.05).all(), change  # HCCS carries the gradient AllReduce: the step moves
        assert np.abs(checked["error"]).max() < 0.02, (change, checked.to_dict("list"))


@pytest.fixture(scope="module")
def llama_3d(tmp_path_factory):
    """tiny-llama on 8 ranks, tensor-, pipeline- and data-parallel (TP2 PP2 DP2): sends meet receives across stages."""
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    try:
        with geprof_nb.profile(output=str(tmp_path_factory.mktemp("llama")), hccl="on") as block:
            sess = ge.Session(options={"ge.exec.rankSize": "8"})
            graph = ge.models.llm("tiny-llama", parallel=ge.Parallel(tp=2, pp=2, dp=2))
            assert sess.add_graph(1, graph) == ge.SUCCESS, ge.GEGetErrorMsg()
            _resnet_steps(sess, 3)
    finally:
        ge.GEFinalize()
    return block.profile


@pytest.mark.parametrize("seed", [29, 30])
def test_link_changes_on_a_pipeline_parallel_job_are_verified_within_two_percent(llama_3d, seed):
    rng = np.random.default_rng(seed)
    for _ in range(3):
        change = {"HCCS": float(np.round(rng.uniform(0.25, 4.0), 2)), "RoCE": float(np.round(rng.uniform(0.25, 4.0), 2))}
        what = llama_3d.what_if(link_bandwidth=change)
        assert what.rounds > 1  # the stages' sends and receives were re-timed against each other
        checked = what.verify()
        assert np.abs(checked["error"]).max() < 0.02, (change, checked.to_dict("list"))


def test_a_run_fed_inputs_replays_their_shapes(tmp_path):
    """A dynamic-shape graph run with inputs of two batch sizes: the replay runs each step at its own shape (the
    log keeps the inputs' shapes and dtypes, not the arrays)."""
    graph = ge.models.mlp(batch_size=4, in_features=16, hidden=(16,), dynamic=True)
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    try:
        with geprof_nb.profile(output=str(tmp_path)) as block:
            sess = ge.Session()
            assert sess.add_graph(1, graph) == ge.SUCCESS
            for batch in (4, 8, 8):
                inputs = [np.zeros((batch, 16), np.float16), np.zeros((batch, 10), np.float16)]
                assert sess.run_graph(1, inputs) == ge.SUCCESS, ge.GEGetErrorMsg()
    finally:
        ge.GEFinalize()
    profile = block.profile
    again = profile.replay()
    shapes = lambda p: p.op_summary["Input Shapes"].astype(str).tolist()  # noqa: E731
    assert shapes(again) == shapes(profile)
    assert {"4,16" in s for s in shapes(profile)} == {"8,16" in s for s in shapes(profile)} == {True, False}
    checked = profile.what_if(op_speedup={"MatMul*": 3.0}, host_gap_us=1).verify()
    assert np.abs(checked["error"]).max() < 0.01


def test_the_log_notes_calls_in_order_with_input_shapes_not_arrays():
    graph = ge.models.mlp(batch_size=4, in_features=16, hidden=(16,), dynamic=True)
    with session_log.recording(new_session_log()) as log:
        assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
        try:
            sess = ge.Session()
            assert sess.add_graph(1, graph) == ge.SUCCESS
            assert sess.run_graph(1, [np.zeros((8, 16), np.float16), np.zeros((8, 10), np.float16)]) == ge.SUCCESS
            assert sess.run_graph(7) != ge.SUCCESS  # noted with its status: replayed, not required to succeed
        finally:
            ge.GEFinalize()
    assert [(c.api, c.session) for c in log.calls] == [("GEInitialize", -1), ("Session", 0), ("add_graph", 0),
                                                       ("run_graph", 0), ("run_graph", 0), ("GEFinalize", -1)]
    assert log.calls[3].args == (1, [session_log.InputSpec((8, 16), "float16"), session_log.InputSpec((8, 10),
                                                                                                      "float16")])
    assert log.calls[4].status != ge.SUCCESS and log.ge_options is None and not log.refused


def test_a_replay_directory_is_removed_with_its_profile(block_run, tmp_path):
    import gc

    profile, _ = block_run
    again = profile.replay(op_speedup={"MatMul*": 2.0})
    made = [d for d in tmp_path.iterdir() if d.name.startswith("geprof_replay_")]
    assert len(made) == 1 and again.path.is_relative_to(made[0])
    profile.what_if(op_speedup={"MatMul*": 2.0}).verify()  # a second replay, dropped once compared
    gc.collect()
    assert [d for d in tmp_path.iterdir() if d.name.startswith("geprof_replay_")] == made
    del again
    gc.collect()
    assert not [d for d in tmp_path.iterdir() if d.name.startswith("geprof_replay_")]
