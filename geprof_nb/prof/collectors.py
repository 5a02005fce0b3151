"""The reporters the runtime calls: what each profiling layer hands to msprof.

* :class:`CannProfilerV2` — the V2 (gert) executor's subscriber: node basic
  info, tensor info and task track once per loaded model, a ``ModelExecute``
  api record per execution.
* :class:`ProfilerCollector` — the V1 executor's model-level RecordStart /
  RecordEnd events with the step id.
* :class:`DeviceCollector` — the device side: HWTS task logs, AI Core PMU event
  counts, ts_track step-trace timestamps.

They receive plain arrays and lists (no runtime objects), encode them in the
raw layouts of :mod:`prof.rawdata` and report through :mod:`prof.msprof`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import msprof, rawdata
from .api_types import ExecutorEvent
from .rawdata import ModelInfoType, NodeInfoType, ReportLevel
from .threads import native_thread_id


@dataclass
class LoadedTaskInfo:
    """What the runtime knows about each task of a loaded model, in launch order."""

    model_id: int
    graph_id: int
    model_name: str
    stream: np.ndarray
    task_id: np.ndarray
    rt_type: np.ndarray
    op_names: list[str]  # "" for tasks that belong to no op (events, copies, traces)
    op_types: list[str]
    ge_task_types: list[int]
    block_dims: list[int]
    tensors: list[list[tuple[int, int, int, tuple[int, ...]]]]  # (tensor type, format, data type, shape)
    pmu: list[tuple[str, dict[str, int]]]  # ("aic"/"aiv"/"", per-block event counts)
    op_flags: list[int]  # rawdata.OpFlag bits
    mix_block_dims: list[int]  # vector blocks of MIX tasks (0 otherwise)
    context_ids: list[tuple[int, ...]]  # FFTS+ context ids (empty for ordinary tasks)


def encode_tensor_info(connection_ids: list[int], op_name_ids: list[int],
                       tensors: list[list[tuple[int, int, int, tuple[int, ...]]]]) -> np.ndarray:
    """MsprofTensorInfo records: 5 tensors per record, more tensors continue in the next record.

    One pass over the tensors collects flat columns; the records are then filled with array
    assignments (element-wise writes into structured records cost microseconds each).
    """
    per = rawdata.TENSORS_PER_RECORD
    records = np.asarray([max(1, -(-len(ts) // per)) for ts in tensors], np.int64)
    out = np.zeros(int(records.sum()), rawdata.TENSOR_INFO_DTYPE)
    first = np.cumsum(records) - records
    out["connection_id"] = np.repeat(connection_ids, records)
    out["op_name"] = np.repeat(op_name_ids, records)
    counts = [len(ts) for ts in tensors]
    flat = [t for ts in tensors for t in ts]
    if flat:
        slot = np.concatenate([np.arange(c) for c in counts])  # tensor index within its op
        rec = np.repeat(first, counts) + slot // per
        slot %= per
        kinds, fmts, dtypes, shapes = zip(*flat)
        out["tensor_type"][rec, slot] = kinds
        out["format"][rec, slot] = fmts
        out["data_type"][rec, slot] = dtypes
        dims = np.zeros((len(flat), rawdata.SHAPE_LEN), out["shape"].dtype)
        for k, shape in enumerate(shapes):
            dims[k, : len(shape)] = shape[: rawdata.SHAPE_LEN]
        out["shape"][rec, slot] = dims
    full, rest = np.divmod(np.asarray(counts, np.int64), per)
    num = np.full(len(out), per)
    last = first + records - 1
    num[last] = np.where(rest > 0, rest, np.where(full > 0, per, 0))
    out["tensor_num"] = num
    return out


class CannProfilerV2:
    """Host reporter of the V2 executor."""

    def __init__(self, device_id: int = 0) -> None:
        self.device_id = device_id

    def report_model_load(self, info: LoadedTaskInfo, connection_base: int, pmu_events: dict[str, list[str]],
                          timestamp: int, with_basic_info: bool) -> None:
        """Report the static description of every task of a loaded model."""
        lib = msprof.lib
        n = len(info.stream)
        conn = np.arange(connection_base, connection_base + n, dtype=np.uint32)
        hashes = [lib.get_hash_id(s) if s else 0 for s in info.op_names]
        track = np.zeros(n, rawdata.TASK_TRACK_DTYPE)
        track["connection_id"] = conn
        track["model_id"] = info.model_id
        track["stream_id"] = info.stream
        track["task_id"] = info.task_id
        track["task_type"] = info.rt_type
        track["kernel_name"] = hashes
        lib.report_block("task_track", track, self.device_id)
        model = np.zeros(1, rawdata.MODEL_INFO_DTYPE)
        model[0] = (info.model_id, info.graph_id, lib.get_hash_id(info.model_name), timestamp)
        msprof.MsprofReportAdditionalInfo(False, "model_info", model)
        if not with_basic_info:  # task_time l0: launch and execution time only
            return
        ops = [i for i, name in enumerate(info.op_names) if name]
        thread = native_thread_id()
        basic = np.zeros(len(ops), rawdata.NODE_BASIC_INFO_DTYPE)
        basic["level"] = ReportLevel.NODE
        basic["type"] = NodeInfoType.BASIC_INFO
        basic["thread_id"] = thread
        basic["timestamp"] = timestamp
        basic["connection_id"] = conn[ops]
        basic["op_name"] = [hashes[i] for i in ops]
        basic["task_type"] = [info.ge_task_types[i] for i in ops]
        basic["op_type"] = [lib.get_hash_id(info.op_types[i]) for i in ops]
        basic["block_dim"] = [info.block_dims[i] for i in ops]
        basic["op_flag"] = [info.op_flags[i] for i in ops]
        basic["mix_block_dim"] = [info.mix_block_dims[i] for i in ops]
        msprof.MsprofReportCompactInfo(False, basic)
        ffts = [i for i in ops if info.context_ids[i]]
        if ffts:
            ctx = np.zeros(len(ffts), rawdata.CONTEXT_ID_INFO_DTYPE)
            for r, i in enumerate(ffts):
                ids = info.context_ids[i][: rawdata.CONTEXT_IDS_PER_RECORD]
                ctx[r]["connection_id"] = conn[i]
                ctx[r]["op_name"] = hashes[i]
                ctx[r]["context_num"] = len(ids)
                ctx[r]["context_ids"][: len(ids)] = ids
            lib.report_block("context_id_info", ctx)
        tensors = encode_tensor_info([int(conn[i]) for i in ops], [hashes[i] for i in ops],
                                     [info.tensors[i] for i in ops])
        msprof.MsprofReportAdditionalInfo(False, "tensor_info", tensors)
        pmu_tasks = [i for i in ops if info.pmu[i][0] in pmu_events]
        if pmu_tasks:
            ev = np.zeros(len(pmu_tasks), rawdata.AICORE_EVENTS_DTYPE)
            ev["connection_id"] = conn[pmu_tasks]
            for r, i in enumerate(pmu_tasks):
                core, counts = info.pmu[i]
                ev["core"][r] = rawdata.PMU_CORE_AIC if core == "aic" else rawdata.PMU_CORE_AIV
                ev["events"][r, : len(pmu_events[core])] = [counts.get(e, 0) for e in pmu_events[core]]
            lib.report_block("aicore_events", ev, self.device_id)

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


def report_api_block(level: int, types, begins: np.ndarray, ends: np.ndarray, item_ids) -> None:
    """Many MsprofApi records of one level at once."""
    n = len(begins)
    if not n:
        return
    rec = np.zeros(n, rawdata.API_DTYPE)
    rec["level"] = level
    rec["type"] = types
    rec["thread_id"] = native_thread_id()
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
