"""The ACL API mirror: build a graph into a model buffer, load it, execute it,
unload it; and execute single ops.  Calls return ``(value, ret)`` / ``ret``
like pyACL does; ``ret`` is an ACL error code (0 = success).

Every call is timed by an ``AclProfilingReporter`` with its ``AclProfType``
and reported at level acl when msprof collects acl api data.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..prof.api_types import AclProfType
from ..prof.clock import clock, toolkit_entry
from ..prof.host_profiler import ProfilingEvent
from ..prof.scope import AclProfilingReporter, profiling_scope
from . import session_log
from . import status as st
from .graph import Graph
from .memory import DeviceMemoryError
from .runtime import SYNC_LATENCY_NS, LoadedModel
from .runtime_v2 import ExecutorV2
from .serialize import ModelFormatError, graph_from_bytes, graph_to_bytes
from .session import device_runtime, ensure_initialized, register_finalize_hook, remember_graph, step_hooks
from .tensor import GraphBuildError, TensorDesc, canonical_dtype, checked_shape, tensor_mismatch

ACL_SUCCESS = 0
# ACL error codes; named, so GEGetErrorMsg() and a printed return value say which error it is.
ACL_ERROR_INVALID_PARAM = st.Status(100000, "ACL_ERROR_INVALID_PARAM")
ACL_ERROR_UNINITIALIZE = st.Status(100001, "ACL_ERROR_UNINITIALIZE")
ACL_ERROR_INVALID_FILE = st.Status(100003, "ACL_ERROR_INVALID_FILE")
ACL_ERROR_INVALID_MODEL_ID = st.Status(100011, "ACL_ERROR_INVALID_MODEL_ID")
ACL_ERROR_DESERIALIZE_MODEL = st.Status(100012, "ACL_ERROR_DESERIALIZE_MODEL")
ACL_ERROR_MODEL_INPUT_NOT_MATCH = st.Status(100017, "ACL_ERROR_MODEL_INPUT_NOT_MATCH")
ACL_ERROR_MODEL_OUTPUT_NOT_MATCH = st.Status(100018, "ACL_ERROR_MODEL_OUTPUT_NOT_MATCH")
ACL_ERROR_OP_TYPE_NOT_MATCH = st.Status(100020, "ACL_ERROR_OP_TYPE_NOT_MATCH")
ACL_ERROR_OP_INPUT_NOT_MATCH = st.Status(100021, "ACL_ERROR_OP_INPUT_NOT_MATCH")
ACL_ERROR_OP_OUTPUT_NOT_MATCH = st.Status(100022, "ACL_ERROR_OP_OUTPUT_NOT_MATCH")
ACL_ERROR_BAD_ALLOC = st.Status(200000, "ACL_ERROR_BAD_ALLOC")  # memory allocation failed

#: Host costs of ACL calls (modelled).
LOAD_NS = 2_000_000
MATCH_OP_NS = 4_000
BUILD_OP_NS = 600_000
LAUNCH_OP_NS = 12_000


@dataclass(frozen=True)
class ModelBufferData:
    """``ge::ModelBufferData``: the built model (``data``) and its ``length``."""

    data: bytes

    @property
    def length(self) -> int:
        return len(self.data)


class _AclState:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.models: dict[int, LoadedModel] = {}
        self.op_models: dict[tuple, LoadedModel] = {}


_state = _AclState()


def _error(code: int, message: str) -> int:
    st.set_error(st.Status(code), message)
    return code


def _is_list(value: Any) -> bool:
    """True for a sequence of tensors (a list, tuple, generator), not a string or a mapping."""
    return isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping))


def _is_model_id(model_id: Any) -> bool:
    return isinstance(model_id, int) and not isinstance(model_id, bool)


def _bad_model_id(api: str, model_id: Any) -> int:
    return _error(ACL_ERROR_INVALID_PARAM, f"{api}: model_id must be an int (what aclmdlLoadFromMem returned), "
                  f"got {type(model_id).__name__} {model_id!r}")


@toolkit_entry
def aclgrphBuildModel(graph: Graph, build_options: Mapping[str, str] | None = None) -> tuple[ModelBufferData | None, st.Status]:  # noqa: N802,E501
    """Build a graph into a model buffer (the "om"): ``(model, status)``."""
    if not isinstance(graph, Graph):
        return None, st.set_error(st.PARAM_INVALID,
                                  f"aclgrphBuildModel: graph must be a ge.Graph, got {type(graph).__name__}")
    if graph.net_output is None:
        return None, st.set_error(st.PARAM_INVALID, f"aclgrphBuildModel: graph {graph.name!r} has no outputs; "
                                  "call graph.output(...) first")
    try:
        data = graph_to_bytes(graph)
    except TypeError as exc:
        return None, st.set_error(st.PARAM_INVALID, f"aclgrphBuildModel: {exc}")
    return ModelBufferData(data), st.SUCCESS


@toolkit_entry
def aclgrphSaveModel(output_file: str, model: ModelBufferData) -> st.Status:  # noqa: N802
    """Write a model buffer to ``<output_file>.om``."""
    if not isinstance(model, ModelBufferData):
        return st.set_error(st.PARAM_INVALID, "aclgrphSaveModel: model must be the ModelBufferData aclgrphBuildModel "
                            f"returned, got {type(model).__name__}")
    path = Path(f"{output_file}.om")
    try:
        path.write_bytes(model.data)
    except OSError as exc:
        return st.set_error(st.FAILED, f"aclgrphSaveModel: cannot write {path}: {exc}")
    return st.SUCCESS


def _load(graph: Graph, api: AclProfType, api_name: str) -> tuple[int, int]:
    runtime = device_runtime()
    with AclProfilingReporter(api):
        clock.spend(LOAD_NS)
        try:
            model = LoadedModel(runtime, graph, graph_id=0)
        except DeviceMemoryError as exc:
            return 0, _error(ACL_ERROR_BAD_ALLOC, f"{api_name}: {exc}")
        except GraphBuildError as exc:
            return 0, _error(ACL_ERROR_DESERIALIZE_MODEL, f"{api_name}: {exc}")
    with _state.lock:
        _state.models[model.model_id] = model
    remember_graph(graph)
    return model.model_id, ACL_SUCCESS


@toolkit_entry
def aclmdlLoadFromMem(model: ModelBufferData | bytes, model_size: int | None = None) -> tuple[int, int]:  # noqa: N802
    """Load a model buffer: ``(model_id, ret)``."""
    ensure_initialized()
    data = model.data if isinstance(model, ModelBufferData) else model
    if model_size is not None and (isinstance(model_size, bool) or not isinstance(model_size, int)):
        return 0, _error(ACL_ERROR_INVALID_PARAM, f"aclmdlLoadFromMem: model_size must be an int (the buffer's "
                                                  f"length in bytes), got {model_size!r}")
    if model_size is not None and model_size != len(data):
        return 0, _error(ACL_ERROR_INVALID_PARAM,
                         f"aclmdlLoadFromMem: model_size {model_size} != buffer length {len(data)}")
    try:
        graph = graph_from_bytes(data)
    except ModelFormatError as exc:
        return 0, _error(ACL_ERROR_DESERIALIZE_MODEL, f"aclmdlLoadFromMem: {exc}")
    return _load(graph, AclProfType.AclmdlLoadFromMem, "aclmdlLoadFromMem")


@toolkit_entry
def aclmdlLoadFromFile(model_path: str) -> tuple[int, int]:  # noqa: N802
    """Load a saved ``.om`` file: ``(model_id, ret)``."""
    ensure_initialized()
    try:
        path = Path(model_path)
    except TypeError:
        return 0, _error(ACL_ERROR_INVALID_PARAM, f"aclmdlLoadFromFile: model_path must be a path, got "
                                                  f"{type(model_path).__name__}")
    try:
        if path.exists() and not path.is_file():  # a FIFO would block the read; a directory cannot be read
            raise OSError(f"not a regular file ({'a directory' if path.is_dir() else 'a FIFO, socket or device'})")
        data = path.read_bytes()
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        return 0, _error(ACL_ERROR_INVALID_FILE, f"aclmdlLoadFromFile: cannot read {model_path!r}: {exc}; accepted: "
                                                 "a readable .om file (aclgrphSaveModel writes them)")
    try:
        graph = graph_from_bytes(data)
    except ModelFormatError as exc:
        return 0, _error(ACL_ERROR_DESERIALIZE_MODEL, f"aclmdlLoadFromFile: {model_path}: {exc}")
    return _load(graph, AclProfType.AclmdlLoadFromFile, "aclmdlLoadFromFile")


def _check_tensors(kind: str, given: Sequence[Any] | None, expected: list[TensorDesc], code: int, api: str) -> int:
    """``given`` arrays against the model's tensors: the same check as ``Session.run_graph``'s inputs."""
    if given is None:
        return ACL_SUCCESS
    if not _is_list(given):
        return _error(ACL_ERROR_INVALID_PARAM, f"{api}: {kind}s must be a list of arrays, one per model {kind}, "
                      f"got {type(given).__name__}")
    given = list(given)
    if len(given) != len(expected):
        return _error(code, f"{api}: the model has {len(expected)} {kind}s, got {len(given)}")
    for i, (x, want) in enumerate(zip(given, expected)):
        problem = tensor_mismatch(x, want)
        if problem:
            return _error(code, f"{api}: {kind} {i} {problem}")
    return ACL_SUCCESS


def _select_shapes(model: LoadedModel, inputs: Sequence[Any] | None) -> int:
    """A dynamic-shape model runs its build for the inputs' shapes (its default shapes without inputs)."""
    shapes = None if inputs is None else {
        n.name: tuple(int(d) for d in x.shape) for n, x in zip(model.input_nodes, inputs)}
    try:
        model.select(shapes)
    except DeviceMemoryError as exc:
        return _error(ACL_ERROR_BAD_ALLOC, f"aclmdlExecute: {exc}")
    except GraphBuildError as exc:
        return _error(ACL_ERROR_MODEL_INPUT_NOT_MATCH, f"aclmdlExecute: {exc}")
    return ACL_SUCCESS


@toolkit_entry
def aclmdlExecute(model_id: int, inputs: Sequence[Any] | None = None, outputs: Sequence[Any] | None = None) -> int:  # noqa: N802
    """Run a loaded model once, synchronously.

    A dynamic-shape model (unknown input dims) takes inputs of any size in those dims.
    """
    log = session_log.active()
    if log is not None:
        log.refuse("it ran aclmdlExecute: an ACL-driven model (loaded through aclmdlLoadFrom*) is not re-issued")
    if step_hooks.hooks:  # a step: %%geprof's schedule and progress see it
        return step_hooks.run("aclmdlExecute", _execute, model_id, inputs, outputs)
    return _execute(model_id, inputs, outputs)


def _execute(model_id: int, inputs: Sequence[Any] | None, outputs: Sequence[Any] | None) -> int:
    # reported even when the call fails
    with AclProfilingReporter(AclProfType.AclmdlExecute, model_id if _is_model_id(model_id) else 0):
        if not _is_model_id(model_id):
            return _bad_model_id("aclmdlExecute", model_id)
        inputs = list(inputs) if _is_list(inputs) else inputs  # a generator is read once, by every check
        model = _state.models.get(model_id)
        if model is None:
            return _error(ACL_ERROR_INVALID_MODEL_ID, f"aclmdlExecute: model id {model_id} is not loaded "
                          f"(loaded: {sorted(_state.models) or 'none'})")
        ret = _check_tensors("input", inputs, [n.outputs[0] for n in model.input_nodes],
                             ACL_ERROR_MODEL_INPUT_NOT_MATCH, "aclmdlExecute")
        if ret == ACL_SUCCESS and model.dynamic:
            ret = _select_shapes(model, inputs)
        if ret == ACL_SUCCESS:
            ret = _check_tensors("output", outputs, [t.desc for t in model.compiled.graph.net_output.inputs],
                                 ACL_ERROR_MODEL_OUTPUT_NOT_MATCH, "aclmdlExecute")
        if ret != ACL_SUCCESS:
            return ret
        ExecutorV2().execute(model)
    return ACL_SUCCESS


@toolkit_entry
def aclmdlUnload(model_id: int) -> int:  # noqa: N802
    """Unload a model; its id becomes free."""
    if not _is_model_id(model_id):
        return _bad_model_id("aclmdlUnload", model_id)
    with _state.lock:
        model = _state.models.pop(model_id, None)
    if model is None:
        return _error(ACL_ERROR_INVALID_MODEL_ID, f"aclmdlUnload: model id {model_id} is not loaded")
    with AclProfilingReporter(AclProfType.AclmdlUnload, model_id):
        model.unload()
    return ACL_SUCCESS


def _as_desc(x: Any, i: int) -> TensorDesc:
    if isinstance(x, TensorDesc):
        return x
    if isinstance(x, tuple) and len(x) == 2 and not hasattr(x, "shape"):
        shape, dtype = x
        return TensorDesc(checked_shape(shape, f"input {i}"), canonical_dtype(dtype, f"input {i}"))
    shape = getattr(x, "shape", None)
    if shape is None:
        raise GraphBuildError(f"input {i} must be a ge.TensorDesc, an array or (shape, dtype), got {type(x).__name__}")
    return TensorDesc(checked_shape(shape, f"input {i}"),
                      canonical_dtype(str(getattr(x, "dtype", "float16")), f"input {i}"))


def _op_key(op_type: str, descs: list[TensorDesc], attrs: Mapping[str, Any]) -> tuple:
    return (op_type, tuple((d.shape, d.dtype, d.format) for d in descs), repr(sorted(attrs.items())))


@toolkit_entry
def aclopExecute(op_type: str, inputs: Sequence[Any], outputs: Sequence[Any] | None = None,  # noqa: N802
                 attrs: Mapping[str, Any] | None = None, stream: int | None = None) -> int:
    """Run one op asynchronously on the default stream (``aclrtSynchronizeStream`` waits for it).

    The first call with a given op, shapes and attributes builds and loads a
    single-op model (as ACL's op model cache does); later calls only match it.
    """
    ensure_initialized()
    with AclProfilingReporter(AclProfType.AclopExecute):
        if not isinstance(op_type, str) or not op_type:
            return _error(ACL_ERROR_INVALID_PARAM, f"aclopExecute: op_type must be a non-empty string such as 'Relu', "
                          f"got {op_type!r}")
        if not _is_list(inputs):
            return _error(ACL_ERROR_INVALID_PARAM, f"aclopExecute {op_type}: inputs must be a list of tensors (arrays, "
                          f"ge.TensorDesc or (shape, dtype)), got {type(inputs).__name__}")
        try:
            attrs = dict(attrs or {})
        except (TypeError, ValueError):
            return _error(ACL_ERROR_INVALID_PARAM, f"aclopExecute {op_type}: attrs must be a mapping of attribute name "
                          f"to value, got {type(attrs).__name__}")
        try:
            descs = [_as_desc(x, i) for i, x in enumerate(inputs)]
        except GraphBuildError as exc:
            return _error(ACL_ERROR_OP_INPUT_NOT_MATCH, f"aclopExecute {op_type}: {exc}")
        key = _op_key(op_type, descs, attrs)
        with profiling_scope(op_type, ProfilingEvent.kAclMatchStaticOpModel):
            clock.spend(MATCH_OP_NS)
            model = _state.op_models.get(key)
        if model is None:
            try:
                with profiling_scope(op_type, ProfilingEvent.kAclBuildOpModel):
                    clock.spend(BUILD_OP_NS)
                    model = _build_op_model(op_type, descs, attrs)
            except DeviceMemoryError as exc:
                return _error(ACL_ERROR_BAD_ALLOC, f"aclopExecute: {exc}")
            except GraphBuildError as exc:
                unknown = "unknown op type" in str(exc)
                return _error(ACL_ERROR_OP_TYPE_NOT_MATCH if unknown else ACL_ERROR_OP_INPUT_NOT_MATCH,
                              f"aclopExecute: {exc}")
            _state.op_models[key] = model
        if outputs is not None:
            expected = [t.desc for t in model.graph.net_output.inputs]
            ret = _check_tensors("output", outputs, expected, ACL_ERROR_OP_OUTPUT_NOT_MATCH, f"aclopExecute {op_type}")
            if ret != ACL_SUCCESS:
                return ret
        with profiling_scope(op_type, ProfilingEvent.kAclExecuteAsync):
            clock.spend(LAUNCH_OP_NS)
            model.run_on_device(clock.now_ns())
    return ACL_SUCCESS


def _build_op_model(op_type: str, descs: list[TensorDesc], attrs: dict[str, Any]) -> LoadedModel:
    g = Graph(op_type)
    xs = [g.data(f"x{i}", d.shape, d.dtype, d.format) for i, d in enumerate(descs)]
    out = g.op(op_type, xs, name=op_type, **attrs)
    g.output(list(out) if isinstance(out, tuple) else [out])
    return LoadedModel(device_runtime(), g, graph_id=0, single_op=True)


@toolkit_entry
def aclrtSynchronizeStream(stream: int | None = None) -> int:  # noqa: N802
    """Wait until the device has finished everything launched so far."""
    runtime = device_runtime()
    if runtime is None:
        return _error(ACL_ERROR_UNINITIALIZE, "aclrtSynchronizeStream: GE/ACL is not initialised")
    clock.wait_until(runtime.free_at + SYNC_LATENCY_NS)
    return ACL_SUCCESS


def loaded_models() -> dict[int, LoadedModel]:
    """Models loaded through ACL, by model id."""
    return dict(_state.models)


def _reset() -> None:
    """GEFinalize: every ACL model and cached op model is gone."""
    with _state.lock:
        _state.models.clear()
        _state.op_models.clear()


register_finalize_hook(_reset)
