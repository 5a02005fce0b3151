"""The ACL API mirror: aclgrphBuildModel / aclgrphSaveModel, aclmdlLoadFromMem / LoadFromFile /
Execute / Unload, aclopExecute and aclrtSynchronizeStream, with their ACL error codes and what
each reports to the profile.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.ge import acl, ge_prof
from geprof_nb.ge.runtime import SYNC_LATENCY_NS
from geprof_nb.ge.serialize import MAGIC, graph_to_dict
from geprof_nb.prof.api_types import AclProfType, acl_api_name
from geprof_nb.prof.clock import clock
from geprof_nb.prof.rawdata import SINGLE_OP_MODEL_ID, ReportLevel
from helpers.geprof_testing import TS_TOL_US

D = ge.ProfDataTypeConfig


@pytest.fixture(autouse=True)
def _close_api_mode():
    """A failed test must not leave aclgrphProfInit's state behind for the next one."""
    yield
    if ge_prof.api_mode_active():
        ge.aclgrphProfFinalize()


def inference_mlp() -> ge.Graph:
    return ge.models.mlp(batch_size=4, in_features=16, hidden=(16,), training=False)


def profiled(out: Path, **fields: str) -> None:
    """GEInitialize with profiling on (task time, so also the acl api switch)."""
    opts = {"output": str(out), "training_trace": "on", **fields}
    assert ge.GEInitialize({"geprof.clock": "virtual", "ge.exec.profilingMode": "1",
                            "ge.exec.profilingOptions": json.dumps(opts)}) == ge.SUCCESS


def finish(out: Path) -> geprof_nb.Profile:
    ge.GEFinalize()
    return geprof_nb.load(out)


def load_model(graph: ge.Graph | None = None) -> int:
    model, status = ge.aclgrphBuildModel(graph or inference_mlp())
    assert status == ge.SUCCESS
    model_id, ret = acl.aclmdlLoadFromMem(model)
    assert ret == acl.ACL_SUCCESS, ge.GEGetErrorMsg()
    return model_id


def inputs_of(model_id: int) -> list[np.ndarray]:
    return [np.zeros(n.outputs[0].shape, np.float16) for n in acl.loaded_models()[model_id].input_nodes]


def api_records(p: geprof_nb.Profile) -> np.ndarray:
    return p.run.load("api")


# ----------------------------------------------------------------------------------------- build


def test_build_model_returns_a_model_buffer():
    g = inference_mlp()
    model, status = ge.aclgrphBuildModel(g)
    assert status == ge.SUCCESS and isinstance(model, acl.ModelBufferData)
    assert model.length == len(model.data) > len(MAGIC) and model.data.startswith(MAGIC)


def test_build_model_rejects_a_graph_without_outputs_and_non_graphs():
    g = ge.Graph("no_out")
    g.data("x", (2, 2))
    model, status = ge.aclgrphBuildModel(g)
    assert model is None and status == ge.PARAM_INVALID and "has no outputs" in ge.GEGetErrorMsg()
    model, status = ge.aclgrphBuildModel("not a graph")
    assert model is None and status == ge.PARAM_INVALID and "must be a ge.Graph" in ge.GEGetErrorMsg()


# ------------------------------------------------------------------------------------ load/unload


def test_load_from_mem_returns_a_model_id_and_success():
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    model, _ = ge.aclgrphBuildModel(inference_mlp())
    first = acl.aclmdlLoadFromMem(model)
    second = acl.aclmdlLoadFromMem(model.data, model.length)
    assert first[1] == second[1] == 0
    assert first[0] >= 1 and second[0] not in (0, first[0])
    assert set(acl.loaded_models()) == {first[0], second[0]}


def test_load_from_mem_with_a_wrong_size_is_invalid_param():
    model, _ = ge.aclgrphBuildModel(inference_mlp())
    model_id, ret = acl.aclmdlLoadFromMem(model, model.length + 1)
    assert (model_id, ret) == (0, acl.ACL_ERROR_INVALID_PARAM) and ret == 100000
    assert "model_size" in ge.GEGetErrorMsg() and acl.loaded_models() == {}


@pytest.mark.parametrize("size", ["5", 5.0, True])
def test_load_from_mem_with_a_size_of_another_type_is_invalid_param(size):
    model, _ = ge.aclgrphBuildModel(inference_mlp())
    assert acl.aclmdlLoadFromMem(model, size) == (0, acl.ACL_ERROR_INVALID_PARAM)
    assert ge.GEGetErrorMsg() == (f"[ACL_ERROR_INVALID_PARAM] aclmdlLoadFromMem: model_size must be an int (the "
                                  f"buffer's length in bytes), got {size!r}")
    assert acl.loaded_models() == {}


def test_unload_retires_the_id():
    model_id = load_model()
    assert acl.aclmdlUnload(model_id) == acl.ACL_SUCCESS
    assert model_id not in acl.loaded_models()
    assert acl.aclmdlExecute(model_id) == acl.ACL_ERROR_INVALID_MODEL_ID == 100011
    assert acl.aclmdlUnload(model_id) == 100011
    assert f"model id {model_id} is not loaded" in ge.GEGetErrorMsg()
    assert load_model() == model_id + 1  # GE's GenModelId: ++max_model_id_, never a freed id


def test_ge_finalize_unloads_every_acl_model():
    model_id = load_model()
    ge.GEFinalize()
    assert acl.loaded_models() == {}
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    assert acl.aclmdlExecute(model_id) == 100011
    assert load_model() == model_id + 1  # the model ids are the process's: re-initialising GE keeps counting
    assert acl.aclmdlExecute(model_id) == 100011


def test_save_and_load_from_file_round_trip(tmp_path):
    profiled(tmp_path / "prof")
    g = inference_mlp()
    model, _ = ge.aclgrphBuildModel(g)
    assert ge.aclgrphSaveModel(str(tmp_path / "mlp"), model) == ge.SUCCESS
    assert (tmp_path / "mlp.om").read_bytes() == model.data
    from_file, ret = acl.aclmdlLoadFromFile(str(tmp_path / "mlp.om"))
    assert ret == 0
    from_mem, ret = acl.aclmdlLoadFromMem(model)
    assert ret == 0
    assert graph_to_dict(acl.loaded_models()[from_file].graph) == graph_to_dict(g)
    assert acl.aclmdlExecute(from_file) == 0 and acl.aclmdlExecute(from_mem) == 0
    p = finish(tmp_path / "prof")
    cols = ["Op Name", "OP Type", "Input Shapes", "Output Shapes", "Block Num"]
    a = p.op_summary[p.op_summary["Model ID"] == from_file][cols].astype(str).reset_index(drop=True)
    b = p.op_summary[p.op_summary["Model ID"] == from_mem][cols].astype(str).reset_index(drop=True)
    assert len(a) > 0 and a.equals(b)
    names = set(p.api_statistic["API Name"])
    assert {"aclmdlLoadFromFile", "aclmdlLoadFromMem", "aclmdlExecute"} <= names


def test_load_from_a_missing_file_is_invalid_file(tmp_path):
    model_id, ret = acl.aclmdlLoadFromFile(str(tmp_path / "nope.om"))
    assert (model_id, ret) == (0, acl.ACL_ERROR_INVALID_FILE) and ret == 100003
    assert "cannot read" in ge.GEGetErrorMsg()


class _Evil:
    """Unpickling this would create a file: a loader that unpickles runs foreign code."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


def _bad_buffers(tmp_path: Path) -> dict[str, bytes]:
    good, _ = ge.aclgrphBuildModel(inference_mlp())
    body = json.loads(good.data[len(MAGIC):])
    body["nodes"][-2]["type"] = "NoSuchOp"
    return {
        "pickle": pickle.dumps(_Evil(str(tmp_path / "pwned"))),
        "garbage": b"\x00\x01garbage",
        "empty": b"",
        "truncated": good.data[: len(good.data) // 2],
        "not-json": MAGIC + b"{not json",
        "unknown-op": MAGIC + json.dumps(body).encode(),
        "wrong-magic": b"GEPROF-OM 2\n" + good.data[len(MAGIC):],
    }


@pytest.mark.parametrize("kind", ["pickle", "garbage", "empty", "truncated", "not-json", "unknown-op",
                                  "wrong-magic"])
def test_damaged_or_foreign_buffer_is_deserialize_error_and_runs_nothing(tmp_path, kind):
    profiled(tmp_path / "prof")
    data = _bad_buffers(tmp_path)[kind]
    model_id, ret = acl.aclmdlLoadFromMem(data)
    assert (model_id, ret) == (0, acl.ACL_ERROR_DESERIALIZE_MODEL) and ret == 100012
    assert ge.GEGetErrorMsg().startswith("[ACL_ERROR_DESERIALIZE_MODEL] aclmdlLoadFromMem: ")
    (tmp_path / "bad.om").write_bytes(data)
    assert acl.aclmdlLoadFromFile(str(tmp_path / "bad.om")) == (0, 100012)
    assert acl.loaded_models() == {}
    assert not (tmp_path / "pwned").exists()
    p = finish(tmp_path / "prof")
    assert p.op_summary.empty and len(p.run.load("hwts")) == 0
    assert not {"aclmdlLoadFromMem", "aclmdlLoadFromFile"} & set(p.api_statistic["API Name"])


# ---------------------------------------------------------------------------------------- execute


def test_execute_reports_an_acl_api_record_and_op_rows(tmp_path):
    profiled(tmp_path)
    model_id = load_model()
    kernels = sum(1 for k in acl.loaded_models()[model_id].table.kernels if k is not None)
    for _ in range(2):
        assert acl.aclmdlExecute(model_id, inputs_of(model_id)) == acl.ACL_SUCCESS
    p = finish(tmp_path)
    api = api_records(p)
    mine = api[(api["level"] == 20000) & (api["type"] == 0x020001)]
    assert int(AclProfType.AclmdlExecute) == 0x020001 and int(ReportLevel.ACL) == 20000
    assert len(mine) == 2 and set(mine["item_id"]) == {model_id} and (mine["end"] >= mine["begin"]).all()
    row = p.api_statistic.set_index("API Name").loc["aclmdlExecute"]  # ACL's registered name (PROF_TYPE_TO_NAMES)
    assert row["Level"] == "acl" and row["Count"] == 2
    assert [acl_api_name(t) for t in (AclProfType.AclopCompile, AclProfType.OpCompile, AclProfType.AclblasGemmEx)] \
        == ["aclopCompile", "opCompile", "aclblasGemmEx"]
    ops = p.op_summary
    assert len(ops) == 2 * kernels and set(ops["Model ID"]) == {model_id} and list(p.iterations) == [1, 2]
    assert set(ops["OP Type"]) >= {"MatMulV2", "Relu"}
    # each execution lies inside its AclmdlExecute record (aclmdlExecute is synchronous)
    start = ops["Task Start Time(us)"].to_numpy()
    end = start + ops["Task Duration(us)"].to_numpy()
    for it, (b, e) in zip((1, 2), sorted(zip(mine["begin"], mine["end"]))):
        sel = p.iteration_of_ops.to_numpy() == it
        assert (start[sel] >= b / 1000 - TS_TOL_US).all() and (end[sel] <= e / 1000 + TS_TOL_US).all()


def test_acl_api_records_need_the_acl_api_switch(tmp_path):
    """With the C API: task time without PROF_ACL_API_MASK (0x1) has no acl records; with it, it has."""
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    model_id = load_model()
    counts = []
    for name, bits in (("off", D.kProfTaskTime), ("on", 0x1 | D.kProfTaskTime)):
        out = tmp_path / name
        assert ge.aclgrphProfInit(str(out)) == ge.SUCCESS
        cfg = ge.aclgrphProfCreateConfig([0], 1, bits)
        assert ge.aclgrphProfStart(cfg) == ge.SUCCESS
        assert acl.aclmdlExecute(model_id) == 0
        assert ge.aclgrphProfStop(cfg) == ge.SUCCESS and ge.aclgrphProfFinalize() == ge.SUCCESS
        p = geprof_nb.load(out)
        api = api_records(p)
        counts.append(int(((api["level"] == 20000) & (api["type"] == 0x020001)).sum()))
        assert len(p.op_summary) > 0
    assert counts == [0, 1]


def test_execute_with_a_bad_model_id_runs_nothing(tmp_path):
    profiled(tmp_path)
    load_model()
    ret = acl.aclmdlExecute(12345)
    assert ret == acl.ACL_ERROR_INVALID_MODEL_ID == 100011
    msg = ge.GEGetErrorMsg()
    assert msg.startswith("[ACL_ERROR_INVALID_MODEL_ID] ") and "model id 12345 is not loaded" in msg
    p = finish(tmp_path)
    assert p.op_summary.empty


@pytest.mark.parametrize("case", ["shape", "count", "rank"])
def test_execute_with_mismatched_inputs_is_input_not_match(tmp_path, case):
    profiled(tmp_path)
    model_id = load_model()
    xs = inputs_of(model_id)
    if case == "shape":
        xs[0] = np.zeros((xs[0].shape[0] + 1,) + xs[0].shape[1:], np.float16)
    elif case == "count":
        xs = xs[:1]
    else:
        xs[0] = xs[0][..., None]
    ret = acl.aclmdlExecute(model_id, xs)
    assert ret == acl.ACL_ERROR_MODEL_INPUT_NOT_MATCH == 100017
    assert ge.GEGetErrorMsg().startswith("[ACL_ERROR_MODEL_INPUT_NOT_MATCH] aclmdlExecute: ")
    assert acl.aclmdlExecute(model_id, inputs_of(model_id)) == 0  # the model is still fine
    p = finish(tmp_path)
    assert list(p.iterations) == [1]  # only the good execution ran


def test_execute_with_mismatched_outputs_is_output_not_match():
    model_id = load_model()
    assert acl.aclmdlExecute(model_id, None, [np.zeros((3, 3))]) == acl.ACL_ERROR_MODEL_OUTPUT_NOT_MATCH == 100018


def test_execute_a_dynamic_model_with_other_batch_sizes(tmp_path):
    profiled(tmp_path)
    model_id = load_model(ge.models.mlp(batch_size=4, in_features=16, hidden=(16,), dynamic=True, training=False))
    assert acl.loaded_models()[model_id].dynamic
    f16 = np.float16
    assert acl.aclmdlExecute(model_id) == 0  # the default shapes
    assert acl.aclmdlExecute(model_id, [np.zeros((8, 16), f16), np.zeros((8, 10), f16)]) == 0
    assert acl.aclmdlExecute(model_id, [np.zeros((1, 16), f16), np.zeros((1, 10), f16)],
                             [np.zeros((1, 10), f16)]) == 0
    assert acl.aclmdlExecute(model_id, [np.zeros((2, 16), f16), np.zeros((2, 10), f16)],
                             [np.zeros((4, 10), f16)]) == acl.ACL_ERROR_MODEL_OUTPUT_NOT_MATCH
    assert "output 0 has shape [4, 10], expected [2, 10]" in ge.GEGetErrorMsg()
    assert acl.aclmdlExecute(model_id, [np.zeros((8, 17), f16), np.zeros((8, 10), f16)]) == 100017
    assert "input 0 has shape [8, 17], expected [-1, 16] (-1: any size)" in ge.GEGetErrorMsg()
    assert acl.aclmdlExecute(model_id, [np.zeros((0, 16), f16), np.zeros((0, 10), f16)]) == 100017
    assert acl.aclmdlExecute(model_id, [np.zeros((8, 16), f16), np.zeros((5, 10), f16)]) == 100017
    assert "labels [5, 10]" in ge.GEGetErrorMsg()
    p = finish(tmp_path)
    mm = p.op_summary[p.op_summary["Op Name"] == "dense_0/MatMulV2"]
    assert list(mm["Input Shapes"]) == ["4,16;16,16", "8,16;16,16", "1,16;16,16"]
    assert set(p.op_summary["OP State"]) == {"dynamic"}


# ------------------------------------------------------------------------------------- single ops


def _host_event_count(p: geprof_nb.Profile, event: str) -> int:
    he = p.host_events
    return int((he["Event"] == event).sum())


def test_single_op_runs_without_a_model_and_its_op_model_is_cached(tmp_path):
    profiled(tmp_path, ge_api="l1")  # ge_api l1: GE's host profiler (kGeHost) is on
    a = [((16, 16), "float16"), ((16, 16), "float16")]
    assert acl.aclopExecute("Add", a) == 0
    assert acl.aclopExecute("Add", a) == 0  # same op, shapes, attrs: matched, not rebuilt
    assert acl.aclopExecute("Add", [((8, 16), "float16"), ((8, 16), "float16")]) == 0  # new shapes: built
    assert acl.aclrtSynchronizeStream() == 0
    p = finish(tmp_path)
    assert _host_event_count(p, "AclBuildOpModel") == 2
    assert _host_event_count(p, "AclMatchStaticOpModel") == 3
    assert _host_event_count(p, "AclExecuteAsync") == 3
    ops = p.op_summary
    assert len(ops) == 3 and set(ops["Model ID"]) == {SINGLE_OP_MODEL_ID} and SINGLE_OP_MODEL_ID == 4294967295
    assert list(ops["OP Type"]) == ["Add"] * 3
    assert list(ops["Input Shapes"]) == ["16,16;16,16", "16,16;16,16", "8,16;8,16"]
    assert p.step_trace.empty  # single ops have no step trace
    assert p.api_statistic.set_index("API Name").loc["aclopExecute", "Count"] == 3
    # the cached call is cheaper: no build cost
    api = api_records(p)
    execs = api[api["type"] == int(AclProfType.AclopExecute)]
    durs = execs["end"] - execs["begin"]
    assert durs[1] == durs[0] - acl.BUILD_OP_NS


def test_single_op_with_an_unknown_type_is_op_type_not_match():
    assert acl.aclopExecute("NoSuchOp", [((4, 4), "float16")]) == acl.ACL_ERROR_OP_TYPE_NOT_MATCH == 100020
    assert "unknown op type 'NoSuchOp'" in ge.GEGetErrorMsg()
    assert acl.aclopExecute("Add", ["not a tensor"]) == acl.ACL_ERROR_OP_INPUT_NOT_MATCH == 100021


def test_single_op_has_no_step_trace_rows_next_to_a_model(tmp_path):
    profiled(tmp_path)
    model_id = load_model()
    assert acl.aclopExecute("Relu", [((4, 4), "float16")]) == 0
    assert acl.aclmdlExecute(model_id) == 0
    p = finish(tmp_path)
    assert set(p.step_trace["Model ID"]) == {model_id}
    assert SINGLE_OP_MODEL_ID in set(p.op_summary["Model ID"])


def test_synchronize_stream_waits_for_the_device(tmp_path):
    profiled(tmp_path)
    assert acl.aclopExecute("MatMulV2", [((256, 256), "float16"), ((256, 256), "float16")]) == 0
    runtime = ge.session.device_runtime()
    assert clock.now_ns() < runtime.free_at  # asynchronous: the op is still running
    assert acl.aclrtSynchronizeStream() == 0
    assert clock.now_ns() >= runtime.free_at + SYNC_LATENCY_NS
    now = clock.now_ns()
    p = finish(tmp_path)
    task = p.task_time.iloc[-1]
    assert round(task["task_stop(us)"] * 1000) <= now


def test_synchronize_stream_before_initialize_is_uninitialize():
    assert acl.aclrtSynchronizeStream() == acl.ACL_ERROR_UNINITIALIZE == 100001


# --------------------------------------------------------------------------- bad arguments
def test_execute_checks_dtypes_as_run_graph_does():
    model_id = load_model()
    xs = inputs_of(model_id)
    xs[0] = xs[0].astype(np.float64)
    assert acl.aclmdlExecute(model_id, xs) == acl.ACL_ERROR_MODEL_INPUT_NOT_MATCH
    assert ge.GEGetErrorMsg() == ("[ACL_ERROR_MODEL_INPUT_NOT_MATCH] aclmdlExecute: input 0 has dtype float64, "
                                  "expected float16")
    session = ge.Session()
    session.add_graph(1, inference_mlp())
    assert session.run_graph(1, xs) == ge.PARAM_INVALID
    assert "input 0 ('x') has dtype float64, expected float16" in ge.GEGetErrorMsg()


@pytest.mark.parametrize("model_id", ["1", [1], 1.0, True])
def test_execute_and_unload_with_a_model_id_of_another_type_is_invalid_param(model_id):
    assert load_model() == 1
    for api, call in [("aclmdlExecute", acl.aclmdlExecute), ("aclmdlUnload", acl.aclmdlUnload)]:
        assert call(model_id) == acl.ACL_ERROR_INVALID_PARAM == 100000
        assert ge.GEGetErrorMsg() == (f"[ACL_ERROR_INVALID_PARAM] {api}: model_id must be an int (what "
                                      f"aclmdlLoadFromMem returned), got {type(model_id).__name__} {model_id!r}")
    assert acl.aclmdlExecute(1) == acl.ACL_SUCCESS


@pytest.mark.parametrize("kind", ["inputs", "outputs"])
@pytest.mark.parametrize("value", [5, "abc", {"x": 1}])
def test_execute_with_tensors_that_are_not_a_list_is_invalid_param(kind, value):
    model_id = load_model()
    args = (value, None) if kind == "inputs" else (None, value)
    assert acl.aclmdlExecute(model_id, *args) == acl.ACL_ERROR_INVALID_PARAM
    assert ge.GEGetErrorMsg() == (f"[ACL_ERROR_INVALID_PARAM] aclmdlExecute: {kind} must be a list of arrays, "
                                  f"one per model {kind[:-1]}, got {type(value).__name__}")


@pytest.mark.parametrize("op_type,inputs,attrs,code,message", [
    ("Relu", None, None, 100000, "aclopExecute Relu: inputs must be a list of tensors (arrays, ge.TensorDesc or "
                                 "(shape, dtype)), got NoneType"),
    ("Relu", 5, None, 100000, "aclopExecute Relu: inputs must be a list of tensors (arrays, ge.TensorDesc or "
                              "(shape, dtype)), got int"),
    (None, [((2, 2), "float16")], None, 100000, "aclopExecute: op_type must be a non-empty string such as 'Relu', "
                                                "got None"),
    ("", [((2, 2), "float16")], None, 100000, "aclopExecute: op_type must be a non-empty string such as 'Relu', "
                                              "got ''"),
    ("Relu", [((2.5, 2), "float16")], None, 100021, "aclopExecute Relu: input 0: shape [2.5, 2]: dimension 0 (2.5) "
                                                    "is not an int; accepted: ints >= 1"),
    ("Relu", [((2, 2), "float16")], 7, 100000, "aclopExecute Relu: attrs must be a mapping of attribute name to "
                                               "value, got int"),
])
def test_single_op_bad_arguments_return_an_acl_code(op_type, inputs, attrs, code, message):
    assert acl.aclopExecute(op_type, inputs, attrs=attrs) == code
    assert ge.GEGetErrorMsg() == f"[{ge.Status(code).name}] {message}"


def test_single_op_takes_an_int_shape_like_graph_data():
    assert acl.aclopExecute("Relu", [(4, "float16")]) == acl.ACL_SUCCESS
    assert acl.aclopExecute("Relu", [(4, "float16")], [np.zeros((4,), np.float16)]) == acl.ACL_SUCCESS


def test_save_model_of_something_else_is_param_invalid(tmp_path):
    assert acl.aclgrphSaveModel(str(tmp_path / "m"), b"abc") == ge.PARAM_INVALID
    assert ge.GEGetErrorMsg() == ("[PARAM_INVALID] aclgrphSaveModel: model must be the ModelBufferData "
                                  "aclgrphBuildModel returned, got bytes")
    assert not (tmp_path / "m.om").exists()
