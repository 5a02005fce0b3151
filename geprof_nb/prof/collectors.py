"""The reporters the runtime calls: what each profiling layer hands to msprof.

* :class:`CannProfilerV2` — the V2 (gert) executor's subscriber: node basic
  info, tensor info, task track and the copy tasks' MemcpyInfo once per loaded
  model, a ``ModelExecute`` api record per execution.
* :class:`ProfilerCollector` — the V1 executor's model-level RecordStart /
  RecordEnd events with the step id.
* :class:`DeviceCollector` — the device side: HWTS task logs, AI Core PMU event
  counts, ts_track step-trace timestamps.

They receive plain arrays and lists (no runtime objects), encode them in the
raw layouts of :mod:`prof.rawdata` and report through :mod:`prof.msprof`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter

import numpy as np

from . import msprof, rawdata
from .api_types import ExecutorEvent
from .rawdata import ModelInfoType, NodeInfoType, ReportLevel
from .threads import native_thread_id


@dataclass
class TensorColumns:
    """The tensors of a run of ops, flat: op ``i`` has ``counts[i]`` tensors, whose kinds, formats,
    data types and shapes follow one another in these lists (an op's inputs, then its outputs).

    Flat lists are what the encoder fills records from in a few array operations;
    a list of tuples per op would need a Python step per tensor.
    """

    counts: Sequence[int]
    kinds: Sequence[int]  # rawdata.TensorType (a list or an int array)
    formats: Sequence[int]  # rawdata.Format
    data_types: Sequence[int]  # rawdata.DataType
    shapes: list[tuple[int, ...]]

    @classmethod
    def from_nested(cls, tensors: list[list[tuple[int, int, int, tuple[int, ...]]]]) -> "TensorColumns":
        flat = [t for ts in tensors for t in ts]
        kinds, formats, data_types, shapes = (list(c) for c in zip(*flat)) if flat else ([], [], [], [])
        return cls([len(ts) for ts in tensors], kinds, formats, data_types, shapes)


@dataclass
class LoadedTaskInfo:
    """What the runtime knows about the tasks of a loaded model: per task (launch order) its stream,
    task id and type; per op task (``op_rows``, ascending) the op and its kernel; per input copy
    (``copy_rows``) what it moves."""

    model_id: int
    graph_id: int
    model_name: str
    stream: np.ndarray
    task_id: np.ndarray
    rt_type: np.ndarray
    op_rows: np.ndarray  # task index of each op's kernel task (tasks of no op: events, copies, traces)
    op_names: list[str]
    op_types: list[str]
    ge_task_types: list[int]
    block_dims: list[int]
    tensors: TensorColumns  # per op
    pmu_cores: list[str]  # "aic" / "aiv" / "" (no PMU)
    pmu_counters: list[dict[str, int]]  # per-block event counts
    op_flags: list[int]  # rawdata.OpFlag bits
    mix_block_dims: list[int]  # vector blocks of MIX tasks (0 otherwise)
    context_ids: list[tuple[int, ...]]  # FFTS+ context ids (empty for ordinary tasks)
    copy_rows: np.ndarray  # task index of each MEMCPY_ASYNC task
    copy_bytes: list[int]
    copy_directions: list[int]  # rawdata.MemcpyDirection
    #: per op: (cube FLOPs, vector ops, GM bytes read, written, L2 hit rate, rawdata.DataType, engine code, tiles)
    #: of an AI Core or AI Vector Core kernel (rawdata.OP_COST_DTYPE), None for other kernels
    op_costs: list[tuple[int, int, int, int, int, float, int, int, int] | None]


def encode_tensor_info(connection_ids: list[int], op_name_ids: list[int],
                       tensors: list[list[tuple[int, int, int, tuple[int, ...]]]] | TensorColumns) -> np.ndarray:
    """MsprofTensorInfo records: 5 tensors per record, more tensors continue in the next record.

    ``tensors``: per op, its (tensor type, format, data type, shape) tuples, or the same as
    :class:`TensorColumns`.  The records are filled with array assignments from flat columns
    (element-wise writes into structured records cost microseconds each).
    """
    cols = tensors if isinstance(tensors, TensorColumns) else TensorColumns.from_nested(tensors)
    per = rawdata.TENSORS_PER_RECORD
    counts = np.asarray(cols.counts, np.int64)
    records = np.maximum(1, -(-counts // per))
    out = np.zeros(int(records.sum()), rawdata.TENSOR_INFO_DTYPE)
    first = np.cumsum(records) - records
    out["connection_id"] = np.repeat(np.asarray(connection_ids, np.int64), records)
    out["op_name"] = np.repeat(np.asarray(op_name_ids, np.uint64), records)
    n_flat = len(cols.shapes)
    if n_flat:
        slot = np.arange(n_flat) - np.repeat(np.cumsum(counts) - counts, counts)  # tensor index within its op
        rec = np.repeat(first, counts) + slot // per
        slot %= per
        out["tensor_type"][rec, slot] = cols.kinds
        out["format"][rec, slot] = cols.formats
        out["data_type"][rec, slot] = cols.data_types
        ndims = np.fromiter(map(len, cols.shapes), np.int64, n_flat)
        if ndims.max(initial=0) > rawdata.SHAPE_LEN:
            shapes = [s[: rawdata.SHAPE_LEN] for s in cols.shapes]
            ndims = np.minimum(ndims, rawdata.SHAPE_LEN)
        else:
            shapes = cols.shapes
        dims = np.zeros((n_flat, rawdata.SHAPE_LEN), out["shape"].dtype)
        row = np.repeat(np.arange(n_flat), ndims)
        dims[row, np.arange(len(row)) - np.repeat(np.cumsum(ndims) - ndims, ndims)] = \
            np.fromiter(chain.from_iterable(shapes), np.int64, len(row))
        out["shape"][rec, slot] = dims
    full, rest = np.divmod(counts, per)
    num = np.full(len(out), per)
    last = first + records - 1
    num[last] = np.where(rest > 0, rest, np.where(full > 0, per, 0))
    out["tensor_num"] = num
    return out


def _encode_model_load(info: LoadedTaskInfo, connection_base: int, pmu_events: dict[str, list[str]],
                       with_basic_info: bool, ids: "_ModelHashIds") -> dict[str, np.ndarray]:
    """The static task records of a loaded model (timestamps and thread ids are filled at report time)."""
    n = len(info.stream)
    conn = np.arange(connection_base, connection_base + n, dtype=np.uint32)
    ops = info.op_rows
    op_hashes = np.asarray(ids.op_names, np.uint64)
    track = np.zeros(n, rawdata.TASK_TRACK_DTYPE)
    track["connection_id"] = conn
    track["model_id"] = info.model_id
    track["stream_id"] = info.stream
    track["task_id"] = info.task_id
    track["task_type"] = info.rt_type
    track["kernel_name"][ops] = op_hashes  # 0: a task of no op
    model = np.zeros(1, rawdata.MODEL_INFO_DTYPE)
    model[0] = (info.model_id, info.graph_id, ids.model_name, 0)
    blocks = {"task_track": track, "model_info": model}
    if len(info.copy_rows):
        memcpy = np.zeros(len(info.copy_rows), rawdata.MEMCPY_INFO_DTYPE)
        memcpy["connection_id"] = conn[info.copy_rows]
        memcpy["size"] = info.copy_bytes
        memcpy["direction"] = info.copy_directions
        blocks["memcpy_info"] = memcpy
    if not with_basic_info:
        return blocks
    op_conn = conn[ops]
    basic = np.zeros(len(ops), rawdata.NODE_BASIC_INFO_DTYPE)
    basic["level"] = ReportLevel.NODE
    basic["type"] = NodeInfoType.BASIC_INFO
    basic["connection_id"] = op_conn
    basic["op_name"] = op_hashes
    basic["task_type"] = info.ge_task_types
    basic["op_type"] = np.asarray(ids.op_types, np.uint64)
    basic["block_dim"] = info.block_dims
    basic["op_flag"] = info.op_flags
    basic["mix_block_dim"] = info.mix_block_dims
    blocks["node_basic_info"] = basic
    ffts = [j for j, context in enumerate(info.context_ids) if context]
    if ffts:
        ctx = np.zeros(len(ffts), rawdata.CONTEXT_ID_INFO_DTYPE)
        for r, j in enumerate(ffts):
            context = info.context_ids[j][: rawdata.CONTEXT_IDS_PER_RECORD]
            ctx[r]["connection_id"] = op_conn[j]
            ctx[r]["op_name"] = op_hashes[j]
            ctx[r]["context_num"] = len(context)
            ctx[r]["context_ids"][: len(context)] = context
        blocks["context_id_info"] = ctx
    blocks["tensor_info"] = encode_tensor_info(op_conn, op_hashes, info.tensors)
    pmu_ops = [j for j, core in enumerate(info.pmu_cores) if core in pmu_events]
    if pmu_ops:
        ev = np.zeros(len(pmu_ops), rawdata.AICORE_EVENTS_DTYPE)
        ev["connection_id"] = op_conn[pmu_ops]
        cores = [info.pmu_cores[j] for j in pmu_ops]
        ev["core"] = [rawdata.PMU_CORE_AIC if core == "aic" else rawdata.PMU_CORE_AIV for core in cores]
        for core, names_ in pmu_events.items():  # one block assignment per core type
            rows = [r for r, c in enumerate(cores) if c == core]
            if rows and names_:
                ev["events"][rows, : len(names_)] = _counter_matrix(
                    [info.pmu_counters[pmu_ops[r]] for r in rows], names_)
        blocks["aicore_events"] = ev
    costed = [j for j, cost in enumerate(info.op_costs) if cost is not None]
    if costed:
        cost = np.zeros(len(costed), rawdata.OP_COST_DTYPE)
        cost["connection_id"] = op_conn[costed]
        fields = rawdata.OP_COST_DTYPE.names[1:]
        for name, column in zip(fields, zip(*(info.op_costs[j] for j in costed))):
            cost[name] = column
        blocks["op_cost"] = cost
    return blocks


def _counter_matrix(counters: list[dict[str, int]], names: list[str]) -> np.ndarray:
    """``[len(counters), len(names)]`` counter values, read with one ``itemgetter`` per task
    (a Python list per task and numpy converting the nested lists cost several times more)."""
    get = itemgetter(*names) if len(names) > 1 else (lambda c, name=names[0]: (c[name],))
    flat = np.fromiter(chain.from_iterable(map(get, counters)), np.uint64, len(counters) * len(names))
    return flat.reshape(len(counters), len(names))


@dataclass
class _ModelHashIds:
    """The hash ids of a model's strings, as one msprof library learns them."""

    op_names: list[int]
    model_name: int
    op_types: list[int] | None  # learned only with node basic info

    @classmethod
    def learn(cls, info: LoadedTaskInfo, with_basic_info: bool) -> "_ModelHashIds":
        lib = msprof.lib  # in the order the hash dictionary always had
        names = lib.get_hash_ids(info.op_names)
        model_name = lib.get_hash_id(info.model_name)
        return cls(names, model_name, lib.get_hash_ids(info.op_types) if with_basic_info else None)


#: (info, key, blocks) of the last model load encoded (see ``CannProfilerV2.report_model_load``).
_LAST_MODEL_LOAD: list[tuple[LoadedTaskInfo, tuple, dict[str, np.ndarray]] | None] = [None]


class CannProfilerV2:
    """Host reporter of the V2 executor."""

    def __init__(self, device_id: int = 0) -> None:
        self.device_id = device_id

    def report_model_load(self, info: LoadedTaskInfo, connection_base: int, pmu_events: dict[str, list[str]],
                          timestamp: int, with_basic_info: bool) -> None:
        """Report the static description of every task of a loaded model.

        The records are encoded once per (model, connection ids, PMU events) and
        reused: every rank of a simulated cluster loads the same model.  Each
        library still learns the strings (its hash dictionary must name them).
        """
        lib = msprof.lib
        ids = _ModelHashIds.learn(info, with_basic_info)  # every library, the cached blocks' too
        key = (connection_base, tuple((k, tuple(v)) for k, v in pmu_events.items()), with_basic_info)
        cached = _LAST_MODEL_LOAD[0]
        if cached is not None and cached[0] is info and cached[1] == key:
            blocks = cached[2]
        else:
            blocks = _encode_model_load(info, connection_base, pmu_events, with_basic_info, ids)
            _LAST_MODEL_LOAD[0] = (info, key, blocks)
        lib.report_block("task_track", blocks["task_track"], self.device_id)
        if "memcpy_info" in blocks:
            lib.report_block("memcpy_info", blocks["memcpy_info"], self.device_id)
        model = blocks["model_info"].copy()
        model["timestamp"] = timestamp
        msprof.MsprofReportAdditionalInfo(False, "model_info", model)
        if not with_basic_info:  # task_time l0: launch and execution time only
            return
        basic = blocks["node_basic_info"].copy()
        basic["thread_id"] = native_thread_id()
        basic["timestamp"] = timestamp
        msprof.MsprofReportCompactInfo(False, basic)
        if "context_id_info" in blocks:
            lib.report_block("context_id_info", blocks["context_id_info"])
        msprof.MsprofReportAdditionalInfo(False, "tensor_info", blocks["tensor_info"])
        if "aicore_events" in blocks:
            lib.report_block("aicore_events", blocks["aicore_events"], self.device_id)
        if "op_cost" in blocks:
            lib.report_block("op_cost", blocks["op_cost"], self.device_id)

    def report_model_execute(self, model_id: int, begin: int, end: int) -> None:
        msprof.MsprofReportApi(False, ReportLevel.MODEL, ModelInfoType.EXECUTE, native_thread_id(),
                               begin, end, model_id)

    def on_execute_event(self, event: ExecutorEvent, **info) -> None:
        """RT2's subscriber hook, as the seed describes it.

        ``kModelStart`` (a DavinciModel begins a step): its static task info is
        reported if this collection has not seen it (``info``: the arguments of
        :meth:`report_model_load`).  ``kExecuteEnd`` (nodes of a node-by-node
        step were launched): one node-level api record per launch (``info``:
        ``level, types, begins, ends, item_ids`` arrays), reported as one block.
        """
        if event == ExecutorEvent.kModelStart:
            self.report_model_load(**info)
        elif event == ExecutorEvent.kExecuteEnd:
            report_api_block(**info)


def report_api_block(level: int, types, begins: np.ndarray, ends: np.ndarray, item_ids,
                     thread_ids: int | np.ndarray | None = None) -> None:
    """Many MsprofApi records of one level at once.

    ``thread_ids`` (one, or one per record) names the threads that made the calls; by default the
    caller's.  Records reported after the fact (steps reported at a flush) pass the threads that ran them.
    """
    n = len(begins)
    if not n:
        return
    rec = np.zeros(n, rawdata.API_DTYPE)
    rec["level"] = level
    rec["type"] = types
    rec["thread_id"] = native_thread_id() if thread_ids is None else thread_ids
    rec["begin"] = begins
    rec["end"] = ends
    rec["item_id"] = item_ids
    msprof.lib.report_block("api", rec)


class ProfilerCollector:
    """Host reporter of the V1 executor: model-level start/end events carrying the step id."""

    def record_start(self, model_id: int, step_id: int, timestamp: int) -> None:
        msprof.MsprofReportEvent(False, ReportLevel.MODEL, ModelInfoType.EXECUTE, native_thread_id(),
                                 step_id, timestamp, model_id)

    def record_end(self, model_id: int, step_id: int, timestamp: int) -> None:
        """The matching end event: same level, type and request (step) id as the start."""
        msprof.MsprofReportEvent(False, ReportLevel.MODEL, ModelInfoType.EXECUTE, native_thread_id(),
                                 step_id, timestamp, model_id)


class DeviceCollector:
    """The device's channel to msprof: task logs and step-trace timestamps."""

    def __init__(self, device_id: int = 0) -> None:
        self.device_id = device_id

    def report_tasks(self, records: np.ndarray) -> None:
        msprof.lib.report_block("hwts", records, self.device_id)

    def report_step_trace(self, records: np.ndarray) -> None:
        msprof.lib.report_block("step_trace", records, self.device_id)
