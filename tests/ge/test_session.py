"""GEInitialize / GEFinalize / Session API: status codes and error messages."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.ge import status as st
from geprof_nb.ge.session import device_runtime, is_initialized, simulation_settings
from geprof_nb.prof.clock import VIRTUAL_EPOCH_NS, clock


def test_status_values():
    assert ge.SUCCESS == 0
    assert ge.FAILED == 0xFFFFFFFF == 4294967295
    assert ge.PARAM_INVALID == 1343225857
    assert isinstance(ge.PARAM_INVALID, int) and ge.PARAM_INVALID.name == "PARAM_INVALID"
    assert repr(ge.SUCCESS) == "<Status SUCCESS (0)>"
    assert st.GE_GRAPH_GRAPH_NOT_EXIST.name == "GE_GRAPH_GRAPH_NOT_EXIST"
    # GE_ERRORNO layout: same system/module bits, values 2 and 3 of the graph module
    assert st.GE_GRAPH_GRAPH_ALREADY_EXIST - st.GE_GRAPH_GRAPH_NOT_EXIST == 1
    assert st.GE_GRAPH_GRAPH_NOT_EXIST >> 12 == (0b01 << 18) | (0b01 << 16) | (8 << 5) | 4
    assert ge.Status(12345).name == "0x00003039"


@pytest.fixture
def session():
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    return ge.Session()


def _mlp():
    return ge.models.mlp(batch_size=4, in_features=8, hidden=(16,), out_features=3)


def test_run_unknown_graph(session):
    session.add_graph(1, _mlp())
    ret = session.run_graph(42)
    assert ret == st.GE_GRAPH_GRAPH_NOT_EXIST
    msg = ge.GEGetErrorMsg()
    assert "42" in msg and "GE_GRAPH_GRAPH_NOT_EXIST" in msg and "added: 1" in msg
    assert session.build_graph(43) == st.GE_GRAPH_GRAPH_NOT_EXIST and "43" in ge.GEGetErrorMsg()
    assert session.remove_graph(44) == st.GE_GRAPH_GRAPH_NOT_EXIST and "44" in ge.GEGetErrorMsg()


@pytest.mark.parametrize("call", ["run_graph", "build_graph", "remove_graph", "add_graph"])
def test_a_successful_call_clears_the_last_error(session, call):
    """GEGetErrorMsg describes the last call: after a success it is empty whichever call it was."""
    assert session.add_graph(1, _mlp()) == ge.SUCCESS
    assert session.run_graph(99) == st.GE_GRAPH_GRAPH_NOT_EXIST and "99" in ge.GEGetErrorMsg()
    if call == "add_graph":
        assert session.add_graph(2, _mlp()) == ge.SUCCESS
    else:
        assert getattr(session, call)(1) == ge.SUCCESS
    assert ge.GEGetErrorMsg() == ""


def test_add_graph_twice(session):
    assert session.add_graph(3, _mlp()) == ge.SUCCESS
    assert ge.GEGetErrorMsg() == ""
    ret = session.add_graph(3, _mlp())
    assert ret == st.GE_GRAPH_GRAPH_ALREADY_EXIST
    assert "graph id 3 is already added" in ge.GEGetErrorMsg()
    assert session.remove_graph(3) == ge.SUCCESS
    assert session.add_graph(3, _mlp()) == ge.SUCCESS


@pytest.mark.parametrize("graph_id,graph,pattern", [
    (-1, "mlp", r"graph_id must be an int >= 0, got -1"),
    (True, "mlp", r"graph_id must be an int >= 0, got True"),
    ("1", "mlp", r"graph_id must be an int >= 0"),
    (1, "not a graph", r"graph must be a ge.Graph, got str"),
])
def test_add_graph_bad_arguments(session, graph_id, graph, pattern):
    g = _mlp() if graph == "mlp" else graph
    assert session.add_graph(graph_id, g) == ge.PARAM_INVALID
    assert re.search(pattern, ge.GEGetErrorMsg())


def test_run_graph_checks_inputs(session):
    session.add_graph(1, _mlp())
    good = [np.zeros((4, 8), np.float16), np.zeros((4, 3), np.float16)]
    assert session.run_graph(1, good) == ge.SUCCESS
    bad_shape = [np.zeros((4, 9), np.float16), good[1]]
    assert session.run_graph(1, bad_shape) == ge.PARAM_INVALID
    msg = ge.GEGetErrorMsg()
    assert "input 0 ('x')" in msg and "[4, 9]" in msg and "expected [4, 8]" in msg
    assert session.run_graph(1, [good[0], np.zeros((3,), np.float16)]) == ge.PARAM_INVALID
    assert "input 1 ('labels')" in ge.GEGetErrorMsg()
    assert session.run_graph(1, good[:1]) == ge.PARAM_INVALID
    assert "has 2 inputs (x, labels), got 1" in ge.GEGetErrorMsg()
    assert session.run_graph(1, [good[0].astype(np.float32), good[1]]) == ge.PARAM_INVALID
    assert "dtype float32, expected float16" in ge.GEGetErrorMsg()


def test_graph_without_outputs_fails_to_build(session):
    g = ge.Graph("no_out")
    g.op("Relu", g.data("x", (2,)))
    assert session.add_graph(1, g) == ge.SUCCESS
    assert session.run_graph(1) == st.GE_GRAPH_INFERSHAPE_FAILED
    assert "has no outputs" in ge.GEGetErrorMsg()
    assert session.model(1) is None


def test_build_graph_loads_the_model(session):
    session.add_graph(5, _mlp())
    assert session.model(5) is None
    assert session.build_graph(5) == ge.SUCCESS
    model = session.model(5)
    assert model is not None and model.graph_id == 5 and model.iterations == 0
    assert session.run_graph(5) == ge.SUCCESS and session.run_graph(5) == ge.SUCCESS
    assert session.model(5) is model and model.iterations == 2
    assert model.compiled.compute_stream not in model.compiled.hccl_streams.values()


def test_virtual_clock_advances_with_runs(session):
    session.add_graph(1, _mlp())
    t0 = clock.now_ns()
    session.run_graph(1)
    t1 = clock.now_ns()
    session.run_graph(1)
    t2 = clock.now_ns()
    assert t0 >= VIRTUAL_EPOCH_NS
    assert t1 > t0 and t2 > t1
    assert device_runtime().free_at <= t2  # the synchronous run returned after the device finished


def test_finalize_closes_sessions(session):
    session.add_graph(1, _mlp())
    assert ge.GEFinalize() == ge.SUCCESS
    assert not is_initialized()
    assert session.run_graph(1) == st.GE_CLI_GE_NOT_INITIALIZED
    assert "not initialised" in ge.GEGetErrorMsg()
    assert ge.GEInitialize({}) == ge.SUCCESS
    assert session.run_graph(1) == ge.FAILED  # a closed session stays closed
    assert "closed" in ge.GEGetErrorMsg()
    assert "closed" in repr(session)


def test_initialize_twice_keeps_first_options():
    assert ge.GEInitialize({"geprof.device": "Ascend910A"}) == ge.SUCCESS
    assert ge.GEInitialize({"geprof.device": "Ascend910B"}) == ge.SUCCESS
    assert device_runtime().preset.name == "Ascend910A"


@pytest.mark.parametrize("options,pattern", [
    ({"geprof.clock": "fast"}, r"geprof.clock='fast' is not valid; accepted: real, virtual"),
    ({"geprof.device": "Ascend310"}, r"geprof.device: unknown device 'Ascend310'; accepted: Ascend910B, Ascend910A, or a preset"),
    ({"geprof.executor": "v3"}, r"geprof.executor='v3' is not valid; accepted: v1, v2"),
    ({"geprof.seed": "abc"}, r"geprof.seed='abc' is not valid; accepted: a whole number from 0 to 2\*\*64 - 1"),
    ({"geprof.colour": "red"}, r"unknown option 'geprof.colour'"),
])
def test_bad_simulation_options(options, pattern):
    assert ge.GEInitialize(options) == ge.PARAM_INVALID
    assert re.search(pattern, ge.GEGetErrorMsg())
    assert not is_initialized()


def test_session_before_initialize_initializes():
    assert not is_initialized()
    s = ge.Session()
    assert is_initialized()
    assert s.add_graph(1, _mlp()) == ge.SUCCESS and s.run_graph(1) == ge.SUCCESS


def test_session_options_are_validated():
    with pytest.raises(ValueError, match="geprof.executor='v9'"):
        ge.Session({"geprof.executor": "v9"})


@pytest.mark.parametrize("executor", ["v1", "v2"])
def test_both_executors_run(executor):
    assert ge.GEInitialize({"geprof.executor": executor, "geprof.clock": "virtual"}) == ge.SUCCESS
    s = ge.Session()
    s.add_graph(1, _mlp())
    for _ in range(3):
        assert s.run_graph(1) == ge.SUCCESS
    assert s.model(1).iterations == 3


def test_simulation_settings_restore():
    ge.GEInitialize({})
    assert clock.mode == "real"
    with simulation_settings(executor="v1", clock_mode="virtual"):
        assert clock.mode == "virtual"
    assert clock.mode == "real"
    with pytest.raises(ValueError, match="geprof.executor='bad'"):
        with simulation_settings(executor="bad"):
            pass


def test_unusable_output_dir_returns_a_status(tmp_path):
    import json

    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    opts = {"ge.exec.profilingMode": "1",
            "ge.exec.profilingOptions": json.dumps({"output": str(blocker / "sub")})}
    try:
        ret = ge.GEInitialize(opts)
    except OSError:
        ret = None
    assert ret is not None and ret != ge.SUCCESS
    assert not is_initialized()


def test_real_clock_counts_the_host_loop_not_the_simulator(tmp_path):
    """Between steps the device idles for the host's own work only: replaying a batch of steps or
    handing it to msprof (after steps 1 and 8 here) must not show up as Free time."""
    opts = {"output": str(tmp_path), "training_trace": "on", "task_trace": "on"}
    assert ge.GEInitialize({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": json.dumps(opts)}) == ge.SUCCESS
    s = ge.Session()
    s.add_graph(1, ge.models.resnet50(batch_size=8, image_size=112, training=True, world_size=8))
    for _ in range(12):
        assert s.run_graph(1) == ge.SUCCESS
    ge.GEFinalize()
    free = geprof_nb.load(tmp_path).step_breakdown.set_index("Step")["Free"]
    assert free.iloc[1:].max() < 50 * free.iloc[1:].median()


class _ShapeWithNone:
    shape = (None, 8)
    dtype = np.float16


@pytest.mark.parametrize("inputs,pattern", [
    (5, r"RunGraph: inputs must be a list of arrays, one per Data input \(a\), got int"),
    ("abc", r"RunGraph: inputs must be a list of arrays, one per Data input \(a\), got str"),
    ({"a": np.zeros((4, 8), np.float16)}, r"inputs must be a list of arrays, one per Data input \(a\), got dict"),
    ([_ShapeWithNone()], r"RunGraph: input 0 \('a'\) has shape \(None, 8\); accepted: an array whose shape is a "
                         r"sequence of ints"),
])
def test_run_graph_rejects_inputs_that_are_not_arrays(session, inputs, pattern):
    g = ge.Graph("g")
    g.output(g.op("Relu", g.data("a", [4, 8])))
    session.add_graph(1, g)
    assert session.run_graph(1, inputs) == ge.PARAM_INVALID
    assert re.search(pattern, ge.GEGetErrorMsg())
    assert session.run_graph(1, [np.zeros((4, 8), np.float16)]) == ge.SUCCESS  # the session still works


@pytest.mark.parametrize("graph_id", ["1", 1.0, [1], None])
def test_graph_id_of_another_type_is_param_invalid(session, graph_id):
    session.add_graph(1, _mlp())
    for api, call in [("RunGraph", session.run_graph), ("BuildGraph", session.build_graph),
                      ("RemoveGraph", session.remove_graph)]:
        assert call(graph_id) == ge.PARAM_INVALID
        assert re.search(rf"{api}: graph_id must be an int >= 0, got {re.escape(repr(graph_id))}", ge.GEGetErrorMsg())
    assert session.run_graph(1) == ge.SUCCESS


@pytest.mark.parametrize("options,pattern", [
    ({1: "x"}, r"^\[PARAM_INVALID\] option names must be strings, got 1 \(int\)"),
    (5, r"GEInitialize: options must be a mapping of option name to value, got int"),
])
def test_initialize_rejects_options_of_the_wrong_type(options, pattern):
    assert ge.GEInitialize(options) == ge.PARAM_INVALID
    assert re.search(pattern, ge.GEGetErrorMsg())
    assert not is_initialized()


# ------------------------------------------- a run that outlives GEFinalize: nothing leaks into the next run
def _bits() -> tuple[int, int]:
    from geprof_nb.prof.properties import GlobalProfilingWrapper, ProfilingProperties

    return GlobalProfilingWrapper.enable_flags, ProfilingProperties.instance().switch


def _new_ge_session() -> ge.Session:
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    sess = ge.Session()
    assert sess.add_graph(1, _mlp()) == ge.SUCCESS
    return sess


def _steps(sess: ge.Session, n: int) -> None:
    for _ in range(n):
        assert sess.run_graph(1) == ge.SUCCESS, ge.GEGetErrorMsg()


def test_ge_finalized_inside_a_block_stops_its_layers_and_leaks_no_step_into_the_next_run(tmp_path):
    """GEFinalize while a profile() block collects: GE's layers go off then (its pending steps reach the block's
    run), so the 5 steps a new GE runs without profiling are not queued into the next block's run."""
    sess = _new_ge_session()
    with geprof_nb.profile(output=str(tmp_path / "a")) as first:
        _steps(sess, 3)
        assert ge.GEFinalize() == ge.SUCCESS  # the block's run goes on without GE
        assert _bits() == (0, 0)
    assert list(first.profile.step_trace["Iteration ID"]) == [1, 2, 3]
    sess = _new_ge_session()
    _steps(sess, 5)  # not profiled: nothing is recorded for them
    assert _bits() == (0, 0)
    with geprof_nb.profile(output=str(tmp_path / "b")) as second:
        _steps(sess, 2)
    assert list(second.profile.step_trace["Iteration ID"]) == [6, 7]  # this model's 6th and 7th steps, only
    assert len(second.profile.op_summary) == 2 * len(second.profile.ops())
    assert _bits() == (0, 0)


def test_the_c_api_finalised_after_ge_leaks_no_step_into_the_next_run(tmp_path):
    """The order reversed: GEFinalize, then aclgrphProfFinalize."""
    from geprof_nb.prof.events import ProfDataTypeConfig as D
    from geprof_nb.prof.events import ProfilingAicoreMetrics as M

    sess = _new_ge_session()
    config = ge.aclgrphProfCreateConfig([0], M.kAicorePipeUtilization, D.kProfTaskTime | D.kProfTrainingTrace)
    assert ge.aclgrphProfInit(str(tmp_path / "api")) == ge.SUCCESS and ge.aclgrphProfStart(config) == ge.SUCCESS
    _steps(sess, 3)
    assert ge.GEFinalize() == ge.SUCCESS
    assert _bits() == (0, 0)
    assert ge.aclgrphProfStop(config) == ge.SUCCESS and ge.aclgrphProfFinalize() == ge.SUCCESS
    assert len(geprof_nb.load(tmp_path / "api").step_trace) == 3
    sess = _new_ge_session()
    _steps(sess, 4)
    with geprof_nb.profile(output=str(tmp_path / "next")) as run:
        _steps(sess, 1)
    assert list(run.profile.step_trace["Iteration ID"]) == [5]
    assert _bits() == (0, 0)


def test_ge_initialised_again_inside_a_block_collects_into_it(tmp_path):
    """A GE finalised and initialised again inside a block registers again and collects again."""
    sess = _new_ge_session()
    with geprof_nb.profile(output=str(tmp_path / "a")) as run:
        _steps(sess, 2)
        assert ge.GEFinalize() == ge.SUCCESS
        sess = _new_ge_session()
        assert _bits()[0] != 0  # started at once: the block's run is collecting
        _steps(sess, 3)
    assert len(run.profile.step_trace) == 5
    assert _bits() == (0, 0)
