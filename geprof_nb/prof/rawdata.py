"""The raw data of a run directory: record layouts and the enums stored in them.

This is the contract between the writer (``prof.msprof``) and the reader
(``analysis.rundir``).  Every record kind is a packed little-endian numpy
structured dtype; chunks are plain ``.npy`` files (read with
``allow_pickle=False``).  Layouts follow the msprof structures they mirror
(``MsprofApi``, ``MsprofEvent``, ``MsprofNodeBasicInfo``, ``MsprofTensorInfo``,
HWTS task logs, ts_track step trace); where msprof joins host and device data
by timestamps, we carry the runtime's ``connection_id`` on both sides instead.

Strings never appear in records: they travel as ``MsprofGetHashId`` ids and are
resolved through ``hash_dict.jsonl``.  Per-op facts (names, shapes, block dim,
PMU event counts) are written once per loaded task, not per execution, so one
executed task costs ``HWTS_DTYPE.itemsize`` (28) bytes on disk.
"""

from __future__ import annotations

import functools
import io
import re
from dataclasses import dataclass
from enum import IntEnum, IntFlag

import numpy as np

RAW_FORMAT_VERSION = 1
INFO_FILE = "info.json"
HASH_DICT_FILE = "hash_dict.jsonl"
#: The first lines of the hash dictionary, where a simulated cluster's ranks share them (a hard link to one
#: file; :func:`.hash_dict.share_lines`): the run's names are this file's lines, then ``HASH_DICT_FILE``'s.
HASH_DICT_SHARED_FILE = "hash_dict.shared.jsonl"
HOST_DIR = "host/data"
#: The ``write_failed`` key of the hash dictionary's lines that could not be written (names, not records).
HASH_DICT_KIND = "hash_dict"
#: The ``write_failed`` key of a simulated cluster's ranks whose run directories could not be made (ranks).
RANKS_KIND = "cluster_ranks"

#: A run directory: ``PROF_<seq>_<local time, ms>_<tag>``.  ``<seq>`` is one past the greatest of its output
#: directory when it is made: it orders the runs there by creation, whatever the clock said.
RUN_DIR_NAME = re.compile(r"PROF_(\d{6,})_(\d{17})_\w+")
#: A simulated cluster's root, made beside its rank 0 run, which moves into it: ``CLUSTER_<seq>_<time>_<tag>``
#: with that run's ``<seq>`` (roots made before sequence numbers have none: ``CLUSTER_<time>_<tag>``).
CLUSTER_DIR_NAME = re.compile(r"CLUSTER_(?:(\d{6,})_)?(\d{17})_\w+")


def creation_order(name: str) -> tuple[int, str, str] | None:
    """(sequence number, time stamp, name) of a run directory's or cluster root's name, ``None`` for any other
    name: the run made last in an output directory has the greatest (the time stamp only breaks the tie of
    two processes that took the same number at once; a root without a number comes first)."""
    m = RUN_DIR_NAME.fullmatch(name) or CLUSTER_DIR_NAME.fullmatch(name)
    if m is None:
        return None
    return (int(m.group(1) or 0), m.group(2), name)


def device_dir(device_id: int) -> str:
    return f"device_{device_id}/data"


# --------------------------------------------------------------------------- enums


class ReportLevel(IntEnum):
    """``MSPROF_REPORT_*_LEVEL`` (reference §4.7)."""

    PYTORCH = 30000
    PTA = 25000
    TX = 20500
    ACL = 20000
    MODEL = 15000
    NODE = 10000
    AICPU = 6000
    HCCL_NODE = 5500
    RUNTIME = 5000
    PROF = 4500


#: api_statistic ``Level`` strings by report level.
LEVEL_NAMES = {
    ReportLevel.ACL: "acl",
    ReportLevel.MODEL: "model",
    ReportLevel.NODE: "node",
    ReportLevel.HCCL_NODE: "communication",
    ReportLevel.RUNTIME: "runtime",
}


class ModelInfoType(IntEnum):
    """Model-level report types (``MSPROF_REPORT_MODEL_*_TYPE``)."""

    GRAPH_ID_MAP = 0
    EXECUTE = 1
    LOAD = 2
    INPUT_COPY = 3
    OUTPUT_COPY = 4
    LOGIC_STREAM = 7
    EXEOM = 8


class NodeInfoType(IntEnum):
    """Node-level report types (``MSPROF_REPORT_NODE_*_TYPE``)."""

    BASIC_INFO = 0
    TENSOR_INFO = 1
    FUSION_OP_INFO = 2
    CONTEXT_ID_INFO = 4
    LAUNCH = 5
    TASK_MEMORY = 6
    HOST_OP_EXEC = 8
    ATTR_INFO = 9
    HCCL_OP_INFO = 10
    STATIC_OP_MEM = 11


class GeTaskType(IntEnum):
    """``MsprofGeTaskType`` carried in node basic info."""

    AI_CORE = 0
    AI_CPU = 1
    AIV = 2
    WRITE_BACK = 3
    MIX_AIC = 4
    MIX_AIV = 5
    FFTS_PLUS = 6
    DSA = 7
    DVPP = 8
    HCCL = 9
    FUSION = 10
    INVALID = 11


#: op_summary ``Task Type`` text per GE task type.
GE_TASK_TYPE_NAMES = {
    GeTaskType.AI_CORE: "AI_CORE",
    GeTaskType.AI_CPU: "AI_CPU",
    GeTaskType.AIV: "AI_VECTOR_CORE",
    GeTaskType.WRITE_BACK: "WRITE_BACK",
    GeTaskType.MIX_AIC: "MIX_AIC",
    GeTaskType.MIX_AIV: "MIX_AIV",
    GeTaskType.FFTS_PLUS: "FFTS_PLUS",
    GeTaskType.DSA: "DSA",
    GeTaskType.DVPP: "DVPP",
    GeTaskType.HCCL: "COMMUNICATION",
    GeTaskType.FUSION: "FUSION",
    GeTaskType.INVALID: "INVALID",
}


class RtTaskType(IntEnum):
    """Runtime task types as the device logs them (task_time ``kernel_type``)."""

    KERNEL_AICORE = 0
    KERNEL_AIVEC = 1
    KERNEL_MIX_AIC = 2
    KERNEL_MIX_AIV = 3
    KERNEL_AICPU = 4
    EVENT_RECORD = 5
    EVENT_WAIT = 6
    MEMCPY_ASYNC = 7
    PROFILER_TRACE = 8
    HCCL = 9


def rt_task_type_names(codes: list[int]) -> list[str]:
    """The names of runtime task types as task_time shows them: "UNKNOWN" for none (-1) and for a code the
    runtime does not have (a damaged record's)."""
    known = {t.value: t.name for t in RtTaskType}
    return [known.get(int(c), "UNKNOWN") for c in codes]


class MemcpyDirection(IntEnum):
    """A copy task's direction (the runtime's ``MemcpyInfo``), in msprof's order (reference §4.6)."""

    HOST_TO_HOST = 0
    HOST_TO_DEVICE = 1
    DEVICE_TO_HOST = 2
    DEVICE_TO_DEVICE = 3
    MANAGED_MEMORY = 4
    ADDR_DEVICE_TO_DEVICE = 5
    HOST_TO_DEVICE_EX = 6
    DEVICE_TO_HOST_EX = 7


#: The timeline's ``operation`` text per copy direction.
MEMCPY_DIRECTION_NAMES = {
    MemcpyDirection.HOST_TO_HOST: "host to host",
    MemcpyDirection.HOST_TO_DEVICE: "host to device",
    MemcpyDirection.DEVICE_TO_HOST: "device to host",
    MemcpyDirection.DEVICE_TO_DEVICE: "device to device",
    MemcpyDirection.MANAGED_MEMORY: "managed memory",
    MemcpyDirection.ADDR_DEVICE_TO_DEVICE: "addr device to device",
    MemcpyDirection.HOST_TO_DEVICE_EX: "host to device ex",
    MemcpyDirection.DEVICE_TO_HOST_EX: "device to host ex",
}


class OpFlag(IntFlag):
    """``opFlag`` bits of node basic info: dynamic-shape compile (op_summary ``OP State``) and
    whether a cube op with float32 inputs may use HF32 (``HF32 Eligible``)."""

    STATIC = 0
    DYNAMIC = 1
    HF32_ELIGIBLE = 2


class TensorType(IntEnum):
    INPUT = 0
    OUTPUT = 1


class DataType(IntEnum):
    """``ge::DataType`` values; op_summary prints the name without ``DT_``."""

    DT_FLOAT = 0
    DT_FLOAT16 = 1
    DT_INT8 = 2
    DT_INT32 = 3
    DT_UINT8 = 4
    DT_INT16 = 6
    DT_UINT16 = 7
    DT_UINT32 = 8
    DT_INT64 = 9
    DT_UINT64 = 10
    DT_DOUBLE = 11
    DT_BOOL = 12
    DT_BF16 = 27


#: Canonical dtype name -> (GE DataType, bytes per element).
DTYPES: dict[str, tuple[DataType, int]] = {
    "float16": (DataType.DT_FLOAT16, 2),
    "float32": (DataType.DT_FLOAT, 4),
    "bfloat16": (DataType.DT_BF16, 2),
    "float64": (DataType.DT_DOUBLE, 8),
    "int8": (DataType.DT_INT8, 1),
    "uint8": (DataType.DT_UINT8, 1),
    "int16": (DataType.DT_INT16, 2),
    "uint16": (DataType.DT_UINT16, 2),
    "int32": (DataType.DT_INT32, 4),
    "uint32": (DataType.DT_UINT32, 4),
    "int64": (DataType.DT_INT64, 8),
    "uint64": (DataType.DT_UINT64, 8),
    "bool": (DataType.DT_BOOL, 1),
}


class Format(IntEnum):
    """``ge::Format`` values; op_summary prints the name without ``FORMAT_``."""

    FORMAT_NCHW = 0
    FORMAT_NHWC = 1
    FORMAT_ND = 2
    FORMAT_NC1HWC0 = 3
    FORMAT_FRACTAL_Z = 4
    FORMAT_HWCN = 16
    FORMAT_NDHWC = 27
    FORMAT_FRACTAL_NZ = 29
    FORMAT_NCDHW = 30


#: ProfilerTrace / model tags in the step trace data (reference §3.1).
MODEL_START_TAG = 0
MODEL_END_TAG = 1
FP_TAG = 2
BP_TAG = 3
ITER_END_TAG = 4
ALL_REDUCE_START_TAG = 10000
GET_NEXT_START_TAG = 20000

# ------------------------------------------------------------------ record layouts

API_DTYPE = np.dtype(
    [("level", "<u2"), ("type", "<u4"), ("thread_id", "<u4"), ("begin", "<i8"), ("end", "<i8"),
     ("item_id", "<u8")]
)
EVENT_DTYPE = np.dtype(
    [("level", "<u2"), ("type", "<u4"), ("thread_id", "<u4"), ("request_id", "<u8"),
     ("timestamp", "<i8"), ("item_id", "<u8")]
)
#: MsprofNodeBasicInfo, one per loaded task, keyed by connection_id.
NODE_BASIC_INFO_DTYPE = np.dtype(
    [("level", "<u2"), ("type", "<u4"), ("thread_id", "<u4"), ("timestamp", "<i8"),
     ("connection_id", "<u4"), ("op_name", "<u8"), ("task_type", "<u4"), ("op_type", "<u8"),
     ("block_dim", "<u4"), ("mix_block_dim", "<u4"), ("op_flag", "<u4")]
)
TENSORS_PER_RECORD = 5
SHAPE_LEN = 8
#: MsprofTensorInfo: up to 5 tensors x 8 dims per record; dims end at the first 0.
TENSOR_INFO_DTYPE = np.dtype(
    [("connection_id", "<u4"), ("op_name", "<u8"), ("tensor_num", "<u4"),
     ("tensor_type", "<u4", (TENSORS_PER_RECORD,)), ("format", "<u4", (TENSORS_PER_RECORD,)),
     ("data_type", "<u4", (TENSORS_PER_RECORD,)), ("shape", "<u4", (TENSORS_PER_RECORD, SHAPE_LEN))]
)
CONTEXT_IDS_PER_RECORD = 8
#: CONTEXT_ID_INFO: the FFTS+ context ids of a task (op_summary ``Context ID``).
CONTEXT_ID_INFO_DTYPE = np.dtype(
    [("connection_id", "<u4"), ("op_name", "<u8"), ("context_num", "<u4"),
     ("context_ids", "<u4", (CONTEXT_IDS_PER_RECORD,))]
)
#: Model id <-> graph id and model name (GRAPH_ID_MAP).
MODEL_INFO_DTYPE = np.dtype(
    [("model_id", "<u4"), ("graph_id", "<u4"), ("model_name", "<u8"), ("timestamp", "<i8")]
)
#: Runtime task track: one per loaded task (device side of the join).
TASK_TRACK_DTYPE = np.dtype(
    [("connection_id", "<u4"), ("model_id", "<u4"), ("stream_id", "<u2"), ("task_id", "<u2"),
     ("task_type", "<u2"), ("kernel_name", "<u8")]
)
#: The runtime's MemcpyInfo of a loaded MEMCPY_ASYNC task (one per copy task, reported with the
#: task track): how many bytes it copies and in which direction (:class:`MemcpyDirection`).
MEMCPY_INFO_DTYPE = np.dtype([("connection_id", "<u4"), ("size", "<u8"), ("direction", "<u4")])
#: One executed task (HWTS log).  ``block_cycles`` is the AI Core PMU total
#: cycle count per block (0 when the PMU is off or the task is not on AI Core;
#: saturates at 2**32-1, i.e. 2.4 s per block at 1.8 GHz).
HWTS_DTYPE = np.dtype(
    [("start", "<i8"), ("dur", "<u8"), ("connection_id", "<u4"), ("iteration", "<u4"),
     ("block_cycles", "<u4")]
)
#: PMU event counts per block for one loaded AI Core task, for the 8 events the
#: aic_metrics group programs (names in info.json ``pmu_events``).
PMU_EVENTS_PER_TASK = 8
AICORE_EVENTS_DTYPE = np.dtype(
    [("connection_id", "<u4"), ("core", "<u1"), ("events", "<u8", (PMU_EVENTS_PER_TASK,))]
)
PMU_CORE_AIC = 0
PMU_CORE_AIV = 1
#: What one execution of an AI Core / AI Vector Core op task does, as the simulator's cost model counts it
#: (reported once per loaded task with its static description; real msprof has no such record, its PMU
#: counters say part of it): cube FLOPs (2 per MAC), vector element operations, the bytes it reads from and
#: writes to global memory, how many of the bytes read come from tensors stored in HBM (weights, the KV cache)
#: for the first time in the step (compulsory L2 misses), the share of its traffic the L2 cache served, the
#: data type it computes in (:class:`DataType`), the engine that costed it (an index into :data:`COST_ENGINES`)
#: and its independent work units (tiles: the most cores it can use).  The roofline
#: (analysis/tables/roofline.py) is built on it; the engine, tiles and stored bytes let
#: ``Profile.what_if(device=...)`` re-cost the op on another device (geprof_nb/cost_model.py).
OP_COST_DTYPE = np.dtype(
    [("connection_id", "<u4"), ("cube_flops", "<u8"), ("vector_ops", "<u8"), ("gm_read_bytes", "<u8"),
     ("gm_write_bytes", "<u8"), ("stored_read_bytes", "<u8"), ("l2_hit_rate", "<f8"), ("data_type", "<u4"),
     ("engine", "u1"), ("tiles", "<u4")]
)
#: The engines of an op_cost record's ``engine`` field: the cube (AI Core) and the vector unit.
COST_ENGINES = ("AI_CORE", "AI_VECTOR_CORE")
#: ts_track step trace: a ProfilerTrace task (or model start/end) reached on device.
STEP_TRACE_DTYPE = np.dtype(
    [("timestamp", "<i8"), ("model_id", "<u4"), ("index_id", "<u4"), ("tag_id", "<u4"),
     ("stream_id", "<u2"), ("task_id", "<u2")]
)
#: A model's static memory plan, reported once per load and collection (GE's node-level
#: STATIC_OP_MEM info): each planned tensor's place in the pool and the tasks, by connection
#: id, whose start allocates it and whose end releases it.  The tensors' allocation and
#: release times in each step are those tasks' times in the HWTS log, so nothing about
#: memory is reported per step.
STATIC_OP_MEM_DTYPE = np.dtype(
    [("model_id", "<u4"), ("tensor", "<u8"), ("addr", "<u8"), ("size", "<u8"), ("alloc_conn", "<u4"),
     ("free_conn", "<u4"), ("stream_id", "<u2"), ("pool_size", "<u8")]
)
#: The model id of single-op (aclopExecute) tasks, which belong to no model: uint32 max (msprof's op_summary
#: shows 4294967295).
SINGLE_OP_MODEL_ID = 0xFFFFFFFF
#: ``free_conn`` of a tensor held to the end of the step (a graph output, or read on another stream).
HELD_TO_STEP_END = 0xFFFFFFFF


class TransportType(IntEnum):
    """How an HCCL sub-task moves data."""

    SDMA = 0
    RDMA = 1
    LOCAL = 2


class LinkType(IntEnum):
    """The physical link an HCCL sub-task uses."""

    ON_CHIP = 0
    HCCS = 1
    PCIE = 2
    ROCE = 3
    SIO = 4


#: One HCCL sub-task (Notify_Wait, Memcpy, Reduce_Inline, ...) of a collective
#: op task (``connection_id``) in one iteration.
HCCL_TASK_DTYPE = np.dtype(
    [("start", "<i8"), ("dur", "<u8"), ("connection_id", "<u4"), ("iteration", "<u4"), ("name", "<u8"),
     ("plane", "<u2"), ("src_rank", "<u2"), ("dst_rank", "<u2"), ("transport", "<u1"), ("link", "<u1"),
     ("size", "<u8"), ("stream_id", "<u2")]
)
#: One collective op task of a loaded model, as HCCL reports its op info (once per collection): its
#: communication group (a hash id of the communicator's name, a key of info.json's
#: ``parallel.parallel_group_info``), the group's size, this rank's rank in it, a send's or receive's
#: peer (global rank; :data:`NO_PEER` for others), the element count and GE data type of its buffer.
HCCL_OP_DTYPE = np.dtype(
    [("connection_id", "<u4"), ("model_id", "<u4"), ("group", "<u8"), ("rank_size", "<u4"), ("group_rank", "<u4"),
     ("peer_rank", "<u4"), ("count", "<u8"), ("data_type", "<u2")]
)
NO_PEER = 0xFFFFFFFF
#: AI CPU kernel details (msprof ``aicpu`` summary) of one execution.
AICPU_DTYPE = np.dtype(
    [("timestamp", "<i8"), ("connection_id", "<u4"), ("iteration", "<u4"), ("compute_ns", "<u8"),
     ("memcpy_ns", "<u8"), ("task_ns", "<u8"), ("dispatch_ns", "<u8"), ("total_ns", "<u8")]
)
#: GE host profiler ring-buffer record: an element (hashed string) entering or
#: leaving a ``ge::profiling`` event.
HOST_EVENT_DTYPE = np.dtype(
    [("timestamp", "<i8"), ("thread_id", "<u4"), ("element", "<u8"), ("event", "<u2"), ("phase", "<u1")]
)
HOST_EVENT_START = 0
HOST_EVENT_END = 1
#: One msproftx / mstx marker or range.
MSTX_DTYPE = np.dtype(
    [("start", "<i8"), ("end", "<i8"), ("pid", "<u4"), ("tid", "<u4"), ("category", "<u4"),
     ("event_type", "<u1"), ("message", "<u8"), ("domain", "<u8"), ("mark_id", "<u8")]
)
MSTX_MARKER = 0
MSTX_RANGE = 1
#: One served request of a serving loop (``ge.serve``): host times in ns, its tokens, its preemptions.
SERVING_REQUEST_DTYPE = np.dtype(
    [("request_id", "<u4"), ("arrival", "<i8"), ("first_token", "<i8"), ("finish", "<i8"),
     ("prompt_tokens", "<u4"), ("output_tokens", "<u4"), ("preemptions", "<u4")]
)
#: One engine step of a serving loop: its host span (ns), its phase mix (prefill tokens and sequences,
#: decode sequences), the sequences preempted before it, the KV-cache blocks used and free after it, the new
#: tokens its graphs computed (the padding to their shape buckets included).
SERVING_STEP_DTYPE = np.dtype(
    [("step", "<u4"), ("start", "<i8"), ("end", "<i8"), ("prefill_tokens", "<u4"), ("prefill_seqs", "<u4"),
     ("decode_seqs", "<u4"), ("preempted", "<u4"), ("kv_blocks_used", "<u4"), ("kv_blocks_free", "<u4"),
     ("computed_tokens", "<u4")]
)


@dataclass(frozen=True)
class RecordKind:
    """One kind of raw record and where its chunks live."""

    name: str
    dtype: np.dtype
    side: str  # "host" or "device"
    aging: bool = True  # may be deleted past storage_limit (static descriptions may not)
    hashed: bool = False  # names strings by hash id (the hash dictionary resolves them)

    def directory(self, device_id: int) -> str:
        return HOST_DIR if self.side == "host" else device_dir(device_id)


RECORD_KINDS: dict[str, RecordKind] = {
    k.name: k
    for k in (
        RecordKind("api", API_DTYPE, "host", hashed=True),
        RecordKind("event", EVENT_DTYPE, "host", hashed=True),
        RecordKind("node_basic_info", NODE_BASIC_INFO_DTYPE, "host", aging=False, hashed=True),
        RecordKind("tensor_info", TENSOR_INFO_DTYPE, "host", aging=False, hashed=True),
        RecordKind("model_info", MODEL_INFO_DTYPE, "host", aging=False, hashed=True),
        RecordKind("context_id_info", CONTEXT_ID_INFO_DTYPE, "host", aging=False, hashed=True),
        RecordKind("task_track", TASK_TRACK_DTYPE, "device", aging=False, hashed=True),
        RecordKind("memcpy_info", MEMCPY_INFO_DTYPE, "device", aging=False),
        RecordKind("hwts", HWTS_DTYPE, "device"),
        RecordKind("aicore_events", AICORE_EVENTS_DTYPE, "device", aging=False),
        RecordKind("op_cost", OP_COST_DTYPE, "device", aging=False),
        RecordKind("step_trace", STEP_TRACE_DTYPE, "device"),
        RecordKind("static_op_mem", STATIC_OP_MEM_DTYPE, "device", aging=False, hashed=True),
        RecordKind("hccl_task", HCCL_TASK_DTYPE, "device", hashed=True),
        RecordKind("hccl_op", HCCL_OP_DTYPE, "device", aging=False, hashed=True),
        RecordKind("aicpu", AICPU_DTYPE, "device"),
        RecordKind("host_event", HOST_EVENT_DTYPE, "host", hashed=True),
        RecordKind("mstx", MSTX_DTYPE, "host", hashed=True),
        RecordKind("serving_request", SERVING_REQUEST_DTYPE, "host", aging=False),
        RecordKind("serving_step", SERVING_STEP_DTYPE, "host", aging=False),
    )
}


def chunk_name(kind: str, seq: int) -> str:
    return f"{kind}.{seq:06d}.npy"


@functools.lru_cache(maxsize=64)
def _dtype_descr(dtype: np.dtype) -> list | str:
    """The ``.npy`` header's description of a record dtype (a chunk's header is made twice)."""
    return np.lib.format.dtype_to_descr(dtype)


def npy_header(dtype: np.dtype, records: int) -> bytes:
    """The ``.npy`` header ``np.save`` writes for ``records`` records of ``dtype``.  Its length does not depend
    on ``records`` (numpy pads it so an array can grow in place up to 21 digits): a chunk still growing is this
    header for 0 records, then its records, so its length says how many are whole."""
    out = io.BytesIO()
    header = {"descr": _dtype_descr(dtype), "fortran_order": False, "shape": (records,)}
    try:
        np.lib.format.write_array_header_1_0(out, header)
    except ValueError:  # a header too long for format 1.0: np.save moves to 2.0 too
        np.lib.format.write_array_header_2_0(out, header)
    return out.getvalue()
