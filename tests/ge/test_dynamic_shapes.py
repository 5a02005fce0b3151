"""Dynamic-shape graphs: unknown (-1) dims re-inferred per run, node-by-node launch with host work
per node (InferShape, Tiling, AllocMem, KernelLaunch), so the device waits for the host; what V1
and V2 report for it.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis.tables.api import api_calls
from geprof_nb.ge.runtime import NODE_HOST_COSTS
from geprof_nb.prof.rawdata import ReportLevel
from geprof_nb.prof.threads import native_thread_id

BATCH = 4
F16 = np.float16


def dynamic_mlp() -> ge.Graph:
    return ge.models.mlp(batch_size=BATCH, in_features=16, hidden=(16,), dynamic=True)


def mlp_inputs(batch: int) -> list[np.ndarray]:
    return [np.zeros((batch, 16), np.float16), np.zeros((batch, 10), np.float16)]


def profiled(out: Path, executor: str = "v2", **fields: str) -> None:
    opts = {"output": str(out), "training_trace": "on", **fields}
    assert ge.GEInitialize({"geprof.clock": "virtual", "geprof.executor": executor, "ge.exec.profilingMode": "1",
                            "ge.exec.profilingOptions": json.dumps(opts)}) == ge.SUCCESS


def session_with(graph: ge.Graph) -> ge.Session:
    s = ge.Session()
    assert s.add_graph(1, graph) == ge.SUCCESS
    return s


def n_kernels(s: ge.Session) -> int:
    return sum(1 for k in s.model(1).table.kernels if k is not None)


def rows_of(p: geprof_nb.Profile, op_name: str, iteration: int):
    ops = p.ops(iteration)
    return ops[ops["Op Name"] == op_name]


# -------------------------------------------------------------------------------------- shapes


def test_dynamic_mlp_runs_with_default_and_given_batch_sizes(tmp_path):
    profiled(tmp_path)
    s = session_with(dynamic_mlp())
    assert s.model(1) is None
    assert s.run_graph(1) == ge.SUCCESS  # default shapes (batch 4)
    assert s.model(1).dynamic
    assert s.run_graph(1, mlp_inputs(8)) == ge.SUCCESS
    assert s.run_graph(1, mlp_inputs(1)) == ge.SUCCESS
    assert s.run_graph(1, mlp_inputs(8)) == ge.SUCCESS
    assert len(s.model(1)._variants) == 3  # one build per distinct shape set, cached
    ge.GEFinalize()
    p = geprof_nb.load(tmp_path)
    assert list(p.iterations) == [1, 2, 3, 4]
    for it, batch in zip((1, 2, 3, 4), (BATCH, 8, 1, 8)):
        mm = rows_of(p, "dense_0/MatMulV2", it)
        assert list(mm["Input Shapes"]) == [f"{batch},16;16,16"]
        assert list(mm["Output Shapes"]) == [f"{batch},16"]
        assert list(rows_of(p, "loss/xentropy", it)["Input Shapes"]) == [f"{batch},10;{batch},10"]
    assert set(p.op_summary["OP State"]) == {"dynamic"}
    assert list(p.step_trace["Iteration ID"]) == [1, 2, 3, 4]


def test_static_graph_ops_are_static(tmp_path):
    profiled(tmp_path)
    s = session_with(ge.models.mlp(batch_size=BATCH, in_features=16, hidden=(16,)))
    assert s.run_graph(1) == ge.SUCCESS and not s.model(1).dynamic
    ge.GEFinalize()
    assert set(geprof_nb.load(tmp_path).op_summary["OP State"]) == {"static"}


def test_dynamic_resnet_runs_with_default_and_given_batch(tmp_path):
    profiled(tmp_path)
    s = session_with(ge.models.resnet50(batch_size=2, image_size=64, dynamic=True))
    assert s.run_graph(1) == ge.SUCCESS
    assert [n.outputs[0].shape for n in s.model(1).input_nodes] == [(-1, 3, 64, 64), (-1, 1000)]
    assert s.run_graph(1, [np.zeros((3, 3, 64, 64), np.float16), np.zeros((3, 1000), np.float16)]) == ge.SUCCESS
    ge.GEFinalize()
    p = geprof_nb.load(tmp_path)
    conv = "resnet_model/conv1/Conv2D"
    assert list(rows_of(p, conv, 1)["Input Shapes"]) == ["2,3,64,64;64,3,7,7"]
    assert list(rows_of(p, conv, 2)["Input Shapes"]) == ["3,3,64,64;64,3,7,7"]
    assert list(rows_of(p, conv, 2)["Output Shapes"]) == ["3,64,32,32"]
    assert set(p.op_summary.loc[p.op_summary["Task Type"] != "COMMUNICATION", "OP State"]) == {"dynamic"}
    assert list(p.ops(1)["Op Name"]) == list(p.ops(2)["Op Name"])  # the same ops, re-inferred


def test_dynamic_bert_keeps_token_rows_a_multiple_of_the_sequence(tmp_path):
    """[batch, seq] token inputs with an unknown batch: the flattened [-1, hidden] rows are still
    batch x seq when the attention reshapes them to [-1, seq, heads, head_dim]."""
    seq, hidden = 16, 64
    g = ge.models.bert(layers=1, seq_len=seq, batch_size=2, hidden=hidden, heads=4, vocab_size=100, dynamic=True)
    reshape = g.node("bert/encoder/layer_0/attention/Reshape")
    assert reshape.inputs[0].shape == (-1, hidden) and reshape.outputs[0].shape == (-1, seq, 4, hidden // 4)
    assert reshape.inputs[0].desc.probe_shapes == ((61 * seq, hidden), (67 * seq, hidden))
    profiled(tmp_path)
    s = session_with(g)
    assert s.run_graph(1) == ge.SUCCESS
    tokens = np.zeros((3, seq), np.int32)
    inputs = [tokens, tokens, tokens, np.zeros((3, 1, 1, seq), F16), np.zeros((3, 2), F16)]
    assert s.run_graph(1, inputs) == ge.SUCCESS, ge.GEGetErrorMsg()
    ge.GEFinalize()
    p = geprof_nb.load(tmp_path)
    q = "bert/encoder/layer_0/attention/query/MatMulV2"
    assert list(rows_of(p, q, 1)["Input Shapes"]) == [f"{2 * seq},{hidden};{hidden},{hidden}"]
    assert list(rows_of(p, q, 2)["Input Shapes"]) == [f"{3 * seq},{hidden};{hidden},{hidden}"]


@pytest.mark.parametrize("inputs, fragment", [
    ([np.zeros((4, 16, 1), F16), np.zeros((4, 10), F16)], "input 0 ('x') has shape [4, 16, 1], expected [-1, 16]"),
    ([np.zeros((16,), F16), np.zeros((4, 10), F16)], "input 0 ('x') has shape [16], expected [-1, 16]"),
    ([np.zeros((4, 17), F16), np.zeros((4, 10), F16)], "input 0 ('x') has shape [4, 17]"),
    ([np.zeros((4, 16), F16), np.zeros((4, 10, 1), F16)], "input 1 ('labels') has shape [4, 10, 1], expected [-1, 10]"),
    ([np.zeros((0, 16), F16), np.zeros((0, 10), F16)], "input 0 ('x') has shape [0, 16]"),
    ([np.zeros((4, 16), F16)], "has 2 inputs (x, labels), got 1"),
    ([np.zeros((4, 16), F16), np.zeros((4, 10), F16), np.zeros((4, 10), F16)], "has 2 inputs (x, labels), got 3"),
    ([np.zeros((4, 16), np.int32), np.zeros((4, 10), np.float16)], "input 0 ('x') has dtype int32, expected float16"),
], ids=["extra-dim", "missing-dim", "wrong-fixed-dim", "second-input", "zero-batch", "too-few", "too-many",
        "dtype"])
def test_bad_inputs_are_param_invalid(inputs, fragment):
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    s = session_with(dynamic_mlp())
    status = s.run_graph(1, inputs)
    assert status == ge.PARAM_INVALID
    assert fragment in ge.GEGetErrorMsg(), ge.GEGetErrorMsg()
    assert s.run_graph(1, [x.astype(np.float16) for x in mlp_inputs(2)]) == ge.SUCCESS  # still usable


def user_graph_without_default() -> ge.Graph:
    g = ge.Graph("user_dyn")
    x = g.data("features", (-1, 16), "float16")
    w = g.variable("w", (16, 8), "float16")
    g.output([g.op("Relu", g.op("MatMulV2", [x, w], name="mm"), name="act")])
    return g


def test_unknown_dims_without_default_shape_need_inputs():
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    s = session_with(user_graph_without_default())
    status = s.run_graph(1)
    assert status != ge.SUCCESS
    msg = ge.GEGetErrorMsg()
    assert "'features'" in msg and "default_shape" in msg and "[-1, 16]" in msg


def test_unknown_dims_without_default_shape_run_with_inputs():
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    s = session_with(user_graph_without_default())
    assert s.run_graph(1, [np.zeros((3, 16), np.float16)]) == ge.SUCCESS, ge.GEGetErrorMsg()


# ----------------------------------------------------------------------------- host-bound launch


def per_node_host_cost(executor: str) -> int:
    c = NODE_HOST_COSTS[executor]
    return c.infer_shape + c.tiling + c.alloc_mem + c.launch_prepare + c.kernel_launch


@pytest.mark.parametrize("executor", ["v2", "v1"])
def test_device_waits_for_the_host_between_short_kernels(tmp_path, executor):
    profiled(tmp_path, executor)
    s = session_with(dynamic_mlp())
    assert s.run_graph(1) == ge.SUCCESS
    ge.GEFinalize()
    ops = geprof_nb.load(tmp_path).ops(1)
    # every op of this mlp runs on AI Core / AI Vector (tiled), one after the other on one stream
    assert set(ops["Task Type"]) <= {"AI_CORE", "AI_VECTOR_CORE"}
    dur = ops["Task Duration(us)"].to_numpy()
    wait = ops["Task Wait Time(us)"].to_numpy()
    cost_us = per_node_host_cost(executor) / 1000
    assert (dur < cost_us / 2).all()  # short kernels: host-bound
    # start-to-start of consecutive tasks = the host's per-node work (within the timestamp precision)
    start_to_start = wait[1:] + dur[:-1]
    assert np.allclose(start_to_start, cost_us, atol=0.01), start_to_start
    assert (wait[1:] > cost_us - dur.max() - 0.01).all()  # idle gaps


def test_static_graph_has_no_host_gaps(tmp_path):
    profiled(tmp_path)
    s = session_with(ge.models.mlp(batch_size=BATCH, in_features=16, hidden=(16,)))
    assert s.run_graph(1) == ge.SUCCESS
    ge.GEFinalize()
    ops = geprof_nb.load(tmp_path).ops(1)
    assert ops["Task Wait Time(us)"].max() < per_node_host_cost("v2") / 1000 / 2


def test_v1_iterations_take_longer_than_v2s(tmp_path):
    times = {}
    for executor in ("v1", "v2"):
        profiled(tmp_path / executor, executor)
        s = session_with(dynamic_mlp())
        for _ in range(2):
            assert s.run_graph(1) == ge.SUCCESS
        launched = n_kernels(s)
        ge.GEFinalize()
        times[executor] = geprof_nb.load(tmp_path / executor).step_trace["Iteration Time(us)"].to_numpy()
    assert (times["v1"] > times["v2"]).all()
    extra = (per_node_host_cost("v1") - per_node_host_cost("v2")) / 1000 * launched
    assert np.allclose(times["v1"] - times["v2"], extra, rtol=0.1)


@pytest.mark.parametrize("executor", ["v2", "v1"])
def test_ge_api_l1_records_host_phases_per_node(tmp_path, executor):
    profiled(tmp_path, executor, ge_api="l1")
    s = session_with(dynamic_mlp())
    for _ in range(2):
        assert s.run_graph(1) == ge.SUCCESS
    kernels = n_kernels(s)
    ge.GEFinalize()
    p = geprof_nb.load(tmp_path)
    he = p.host_events
    nodes = set(p.ops(1)["Op Name"])
    for event in ("InferShape", "Tiling", "AllocMemory", "KernelLaunchPrepare", "rtKernelLaunch"):
        spans = he[he["Event"] == event]
        assert set(spans["Element"]) >= nodes, event
        assert spans.groupby("Element", observed=True).size().loc[sorted(nodes)].eq(2).all()  # once per step
    c = NODE_HOST_COSTS[executor]
    infer = he[he["Event"] == "InferShape"]
    assert len(infer) == 2 * kernels and set(infer["Duration(us)"]) == {c.infer_shape / 1000}
    # per node, the phases come in order: InferShape, Tiling, AllocMemory, KernelLaunchPrepare, rtKernelLaunch
    node = "dense_0/MatMulV2"
    first = he[he["Element"] == node].sort_values("Start(us)").head(5)
    assert list(first["Event"]) == ["InferShape", "Tiling", "AllocMemory", "KernelLaunchPrepare", "rtKernelLaunch"]
    assert np.allclose(first["Start(us)"].to_numpy()[1:], first["End(us)"].to_numpy()[:-1], atol=0.5)
    # the kernel starts on the device after its launch
    launch_end = first["End(us)"].iloc[-1]
    assert rows_of(p, node, 1)["Task Start Time(us)"].iloc[0] >= launch_end - 0.5


@pytest.mark.parametrize("executor", ["v2", "v1"])
def test_host_records_carry_the_thread_that_ran_the_step(tmp_path, executor):
    """Steps are reported later (at GEFinalize here, in the main thread): each step's host events,
    node-level and runtime api records still name the thread that ran it."""
    profiled(tmp_path, executor, ge_api="l1", runtime_api="on")
    s = session_with(dynamic_mlp())
    threads: list[int] = []

    def step() -> None:
        threads.append(native_thread_id())
        assert s.run_graph(1) == ge.SUCCESS

    for _ in range(2):  # two steps of one batch, each from its own thread
        worker = threading.Thread(target=step)
        worker.start()
        worker.join()
    kernels = n_kernels(s)
    ge.GEFinalize()
    main = native_thread_id()
    assert len(set(threads)) == 2 and main not in threads
    p = geprof_nb.load(tmp_path)
    he = p.host_events
    first_end = p.ops(1)["Task Start Time(us)"].max()  # the first step is over before the second begins
    assert set(he[he["Start(us)"] < first_end]["Thread ID"]) == {threads[0]}
    assert set(he[he["Start(us)"] > first_end]["Thread ID"]) == {threads[1]}
    assert (he["Thread ID"] == threads[0]).sum() == (he["Thread ID"] == threads[1]).sum() == len(he) // 2
    calls = api_calls(p.run)
    node, runtime = calls[calls["level"] == ReportLevel.NODE], calls[calls["level"] == ReportLevel.RUNTIME]
    assert len(node) == (3 * 2 * kernels if executor == "v2" else 0)  # RT2: launch, InferShape, Tiling per node
    assert len(runtime) > 2 * kernels  # rtKernelLaunch / rtMemcpyAsync per launch, rtStreamSynchronize per step
    for rows in (node, runtime):
        assert (rows["thread"] == threads[0]).sum() == (rows["thread"] == threads[1]).sum() == len(rows) // 2


@pytest.mark.parametrize("executor", ["v2", "v1"])
def test_host_work_sits_in_its_step_when_the_device_is_busy(tmp_path, executor):
    """A long single op keeps the device busy when run_graph starts: the host still does the step's
    InferShape/Tiling/launches right away (inside ModelExecute, from its begin); each kernel starts
    when both its launch is done and the device is free."""
    profiled(tmp_path, executor, ge_api="l1", task_trace="on")
    s = session_with(ge.models.mlp(batch_size=BATCH, in_features=16, hidden=(16,), dynamic=True, training=False))
    assert s.build_graph(1) == ge.SUCCESS
    a = np.zeros((8192, 8192), F16)
    assert ge.acl.aclopExecute("MatMulV2", [a, a]) == 0
    assert s.run_graph(1) == ge.SUCCESS
    model_id = s.model(1).model_id
    ge.GEFinalize()
    p = geprof_nb.load(tmp_path)
    ops = p.op_summary
    busy_until = float((ops["Task Start Time(us)"] + ops["Task Duration(us)"])[ops["Op Name"] == "MatMulV2"].iloc[0])
    calls = api_calls(p.run)
    execute = calls[calls["level"] == ReportLevel.MODEL].iloc[0]
    begin, end = execute["begin"] / 1000, execute["end"] / 1000
    assert begin < busy_until - 1000  # the step began long before the device was free
    he = p.host_events
    step = he[he["Event"].isin(["InferShape", "Tiling", "AllocMemory", "KernelLaunchPrepare", "rtKernelLaunch",
                                "CopyH2D"])]
    assert len(step) > 0
    assert (step["Start(us)"] >= begin - 0.5).all() and (step["End(us)"] <= end + 0.5).all()
    assert step["Start(us)"].min() == pytest.approx(begin, abs=0.5)  # host work right after the begin
    assert step["End(us)"].max() < busy_until  # all launched while the device was still busy
    kernels = ops[ops["Model ID"] == model_id]
    launch_end = dict(zip(he[he["Event"] == "rtKernelLaunch"]["Element"].astype(str),
                          he[he["Event"] == "rtKernelLaunch"]["End(us)"]))
    assert len(kernels) == len(launch_end) > 0
    for name, start in zip(kernels["Op Name"].astype(str), kernels["Task Start Time(us)"]):
        assert start >= launch_end[name] - 0.5, name  # after its launch
    tasks = p.task_time[p.task_time["stream_id"] != p.task_time["stream_id"].iloc[0]]  # the step's (not MatMulV2's)
    assert tasks["task_start(us)"].min() == pytest.approx(busy_until, abs=0.5)  # as soon as the device is free
    gaps = tasks["task_start(us)"].to_numpy()[1:] - tasks["task_stop(us)"].to_numpy()[:-1]
    assert (gaps < 0.5).all()  # launched long before: the tasks run back to back


def _node_level(p: geprof_nb.Profile):
    return p.api_statistic[p.api_statistic["Level"] == "node"]


def test_v2_reports_node_launches_and_v1_does_not(tmp_path):
    rows = {}
    for executor in ("v2", "v1"):
        profiled(tmp_path / executor, executor, ge_api="l1")
        s = session_with(dynamic_mlp())
        for _ in range(2):
            assert s.run_graph(1) == ge.SUCCESS
        kernels = n_kernels(s)
        ge.GEFinalize()
        p = geprof_nb.load(tmp_path / executor)
        rows[executor] = _node_level(p).set_index("API Name")["Count"].to_dict()
        api = p.run.load("api")
        rows[executor + "_raw"] = int((api["level"] == ReportLevel.NODE).sum())
    assert rows["v2"]["LaunchKernelWithHandle"] == 2 * kernels
    assert rows["v2"]["InferShape"] == 2 * kernels and rows["v2"]["Tiling"] == 2 * kernels
    assert rows["v1"] == {} and rows["v1_raw"] == 0
    assert rows["v2_raw"] == 3 * 2 * kernels


def test_node_launch_records_need_task_time_but_scheduling_does_not(tmp_path):
    profiled(tmp_path, "v2", ge_api="l1", task_trace="off")
    s = session_with(dynamic_mlp())
    assert s.run_graph(1) == ge.SUCCESS
    ge.GEFinalize()
    p = geprof_nb.load(tmp_path)
    node_apis = set(_node_level(p)["API Name"])
    # the kernel launches belong to task_time; the host scheduling (ge_api l0) is reported without it
    assert node_apis == {"InferShape", "Tiling"} and not p.host_events.empty


@pytest.mark.parametrize("dynamic", [True, False], ids=["dynamic", "static"])
def test_runtime_api_rows(tmp_path, dynamic):
    profiled(tmp_path, runtime_api="on")
    graph = dynamic_mlp() if dynamic else ge.models.mlp(batch_size=BATCH, in_features=16, hidden=(16,))
    s = session_with(graph)
    for _ in range(2):
        assert s.run_graph(1) == ge.SUCCESS
    kernels = n_kernels(s)
    ge.GEFinalize()
    stat = geprof_nb.load(tmp_path).api_statistic
    runtime = stat[stat["Level"] == "runtime"].set_index("API Name")["Count"].to_dict()
    if dynamic:
        assert runtime["rtKernelLaunch"] == 2 * kernels and runtime["rtMemcpyAsync"] == 2 * 2  # 2 inputs
        assert "rtModelExecute" not in runtime
    else:
        assert runtime["rtModelExecute"] == 2 and "rtKernelLaunch" not in runtime
    assert runtime["rtStreamSynchronize"] == 2


def test_runtime_api_off_has_no_runtime_rows(tmp_path):
    profiled(tmp_path)
    s = session_with(dynamic_mlp())
    assert s.run_graph(1) == ge.SUCCESS
    ge.GEFinalize()
    assert "runtime" not in set(geprof_nb.load(tmp_path).api_statistic["Level"])
