"""The SQLite layout of torch_npu's and msprof's DB output, shared by the DB export
(:mod:`..export.db`) and the DB import (:mod:`.db`).

* torch_npu (``export_type="db"``): ``<worker>_<pid>_<ts>_ascend_pt/ASCEND_PROFILER_OUTPUT/``
  holds ``ascend_pytorch_profiler_<rank>.db`` (msprof's device and CANN tables plus the
  framework's ``PYTORCH_API``, ``CONNECTION_IDS``, ``STEP_TIME``, ``OP_MEMORY`` and
  ``MEMORY_RECORD``) and ``analysis.db`` (the step split and the per-collective
  communication analysis torch_npu also prints as ``step_trace_time.csv`` and
  ``communication*.json``);
* msprof (``msprof --type=db``): ``PROF_*/msprof_<14 digits>.db`` with the same device and
  CANN tables (``NPU_OP_MEM`` for memory), ``PROF_*/device_<n>/info.json.<n>`` (the rank id
  msprof-analyze reads) and ``PROF_*/analyze/communication_analyzer.db`` (the communication
  analysis without the step and type columns).

Sources of the columns and enum values: msprof's ``analysis/csrc/application/database/msprof_db.cpp`` and
``docs/en/user_guide/profile_data_file_references_db.md`` (Ascend/msprof, commit
``9ba1ac7be``) for the msprof tables, types and enum tables, without the three columns newer
than msprof-analyze 26.2's readers (``COMPUTE_TASK_INFO.gridDim`` / ``blockDim``,
``COMMUNICATION_OP.rankSize``, ``AICORE_FREQ.dieId``); a real torch_npu DB (MindStudio
Insight's test data, ``tests/data/SOURCES.md``) for the framework tables and ``analysis.db``
(its ``PYTORCH_API.startNs`` / ``endNs`` are declared TEXT, as there).  Strings are ids into
``STRING_IDS``; ``4294967295`` (UINT32 max) is a missing id, context id, stream or model id.

``GEPROF_*`` tables are geprof's own: what a Profile has and neither schema can hold
(op_summary's GE node name and type of a collective, step_trace, host_events, aicpu), so that a
geprof DB export loads back to equal tables.  The real tools read none of them; a real DB has
none, and the import builds every table from the real ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The profiler DB torch_npu writes (``_<rank>`` when the rank is known), msprof-analyze's pattern.
TORCH_NPU_DB = re.compile(r"ascend_pytorch_profiler(?:_(\d+))?\.db")
#: torch_npu's communication analysis, beside the profiler DB.
TORCH_NPU_ANALYSIS_DB = "analysis.db"
#: msprof's DB in a ``PROF_*`` directory (msprof-analyze reads ``msprof_<14 digits>.db``, the newest).
MSPROF_DB = re.compile(r"msprof_(\d{14})\.db")
#: msprof's communication analysis, in ``PROF_*``.
MSPROF_ANALYSIS_DB = ("analyze", "communication_analyzer.db")
#: A missing id (STRING_IDS, context, stream, model) or connection.
UINT32_MAX = 4294967295
#: msprof's ``SCHEMA_VERSION`` of the tables below (``db_constant.h``).
SCHEMA_VERSION = ("1", "2", "0")


@dataclass(frozen=True)
class Table:
    """One table: its columns with their declared SQLite types, and its primary key (if any)."""

    name: str
    columns: tuple[tuple[str, str], ...]
    primary: str | None = None

    @property
    def names(self) -> list[str]:
        return [c for c, _ in self.columns]

    def create_sql(self) -> str:
        """``CREATE TABLE`` as msprof writes it (no quotes; the primary key on its column)."""
        cols = ",".join(f"{c} {t}{' PRIMARY KEY' if c == self.primary else ''}" for c, t in self.columns)
        return f"CREATE TABLE {self.name} ({cols})"


def _table(name: str, spec: str, primary: str | None = None) -> Table:
    """A table from ``"col TYPE, col TYPE, ..."``."""
    cols = tuple(tuple(part.split()) for part in spec.split(","))
    return Table(name, cols, primary)  # type: ignore[arg-type]


_I = "INTEGER"
PROFILER_TABLES: dict[str, Table] = {t.name: t for t in (
    _table("STRING_IDS", "id INTEGER, value TEXT", "id"),
    _table("META_DATA", "name TEXT, value TEXT"),
    _table("HOST_INFO", "hostUid TEXT, hostName TEXT"),
    _table("RANK_DEVICE_MAP", "rankId INTEGER, deviceId INTEGER"),
    _table("SESSION_TIME_INFO", "startTimeNs INTEGER, endTimeNs INTEGER"),
    _table("NPU_INFO", "id INTEGER, name TEXT"),
    _table("AICORE_FREQ", "deviceId INTEGER, timestampNs NUMERIC, freq INTEGER"),
    _table("TASK", "startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER, globalTaskId INTEGER, "
                   "globalPid INTEGER, taskType INTEGER, contextId INTEGER, streamId INTEGER, taskId INTEGER, "
                   "modelId INTEGER"),
    _table("COMPUTE_TASK_INFO", "name INTEGER, globalTaskId INTEGER, blockNum INTEGER, mixBlockNum INTEGER, "
                                "taskType INTEGER, opType INTEGER, inputFormats INTEGER, inputDataTypes INTEGER, "
                                "inputShapes INTEGER, outputFormats INTEGER, outputDataTypes INTEGER, "
                                "outputShapes INTEGER, attrInfo INTEGER, opState INTEGER, hf32Eligible INTEGER",
           "globalTaskId"),
    _table("TASK_PMU_INFO", "globalTaskId INTEGER, name INTEGER, value NUMERIC"),
    _table("COMMUNICATION_OP", "opName INTEGER, startNs INTEGER, endNs INTEGER, connectionId INTEGER, "
                               "groupName INTEGER, opId INTEGER, relay INTEGER, retry INTEGER, dataType INTEGER, "
                               "algType INTEGER, count NUMERIC, opType INTEGER, deviceId INTEGER", "opId"),
    _table("COMMUNICATION_TASK_INFO", "name INTEGER, globalTaskId INTEGER, taskType INTEGER, planeId INTEGER, "
                                      "groupName INTEGER, notifyId INTEGER, rdmaType INTEGER, srcRank INTEGER, "
                                      "dstRank INTEGER, transportType INTEGER, size INTEGER, dataType INTEGER, "
                                      "linkType INTEGER, opId INTEGER, isMaster INTEGER, bandwidth NUMERIC"),
    _table("CANN_API", "startNs INTEGER, endNs INTEGER, type INTEGER, globalTid INTEGER, connectionId INTEGER, "
                       "name INTEGER", "connectionId"),
    _table("MSTX_EVENTS", "startNs INTEGER, endNs INTEGER, eventType INTEGER, rangeId INTEGER, category INTEGER, "
                          "message INTEGER, globalTid INTEGER, endGlobalTid INTEGER, domainId INTEGER, "
                          "connectionId INTEGER"),
    _table("MEMCPY_INFO", "globalTaskId NUMERIC, size NUMERIC, memcpyOperation NUMERIC"),
    _table("NPU_OP_MEM", "operatorName INTEGER, addr INTEGER, type INTEGER, size INTEGER, timestampNs INTEGER, "
                         "globalTid INTEGER, totalAllocate NUMERIC, totalReserve NUMERIC, component INTEGER, "
                         "deviceId INTEGER"),
    # torch_npu's framework tables
    _table("STEP_TIME", "id INTEGER, startNs INTEGER, endNs INTEGER"),
    _table("PYTORCH_API", "startNs TEXT, endNs TEXT, globalTid INTEGER, connectionId INTEGER, name INTEGER, "
                          "sequenceNumber INTEGER, fwdThreadId INTEGER, inputDtypes INTEGER, inputShapes INTEGER, "
                          "callchainId INTEGER, type INTEGER"),
    _table("CONNECTION_IDS", "id INTEGER, connectionId INTEGER"),
    _table("OP_MEMORY", "name INTEGER, size INTEGER, allocationTime INTEGER, releaseTime INTEGER, "
                        "activeReleaseTime INTEGER, duration INTEGER, activeDuration INTEGER, "
                        "allocationTotalAllocated INTEGER, allocationTotalReserved INTEGER, "
                        "allocationTotalActive INTEGER, releaseTotalAllocated INTEGER, releaseTotalReserved INTEGER, "
                        "releaseTotalActive INTEGER, streamPtr INTEGER, deviceId INTEGER"),
    _table("MEMORY_RECORD", "component INTEGER, timestamp INTEGER, totalAllocated INTEGER, totalReserved INTEGER, "
                            "totalActive INTEGER, streamPtr INTEGER, deviceId INTEGER"),
    # geprof's own (module docstring)
    _table("GEPROF_COLLECTIVE", "opId INTEGER, node INTEGER, nodeType INTEGER", "opId"),
    _table("GEPROF_TABLES", "name TEXT, spec TEXT", "name"),
)}
#: The framework tables only torch_npu's DB has.
TORCH_NPU_ONLY = ("STEP_TIME", "PYTORCH_API", "CONNECTION_IDS", "OP_MEMORY", "MEMORY_RECORD")
#: The memory table only msprof's DB has (torch_npu's DB has it too, with CANN's own allocations).
MSPROF_ONLY = ("NPU_OP_MEM",)

#: analysis.db (torch_npu); msprof's communication_analyzer.db has the same tables without ``step``,
#: ``type`` (and the matrix's ``op_name``): :func:`msprof_analysis_table`.
ANALYSIS_TABLES: dict[str, Table] = {t.name: t for t in (
    _table("StepTraceTime", "step TEXT, computing NUMERIC, communication_not_overlapped NUMERIC, overlapped NUMERIC, "
                            "communication NUMERIC, free NUMERIC, stage NUMERIC, bubble NUMERIC, "
                            "communication_not_overlapped_and_exclude_receive NUMERIC, preparing NUMERIC"),
    _table("CommAnalyzerTime", "hccl_op_name TEXT, group_name TEXT, start_timestamp NUMERIC, elapse_time NUMERIC, "
                               "transit_time NUMERIC, wait_time NUMERIC, synchronization_time NUMERIC, "
                               "idle_time NUMERIC, step TEXT, type TEXT"),
    _table("CommAnalyzerBandwidth", "hccl_op_name TEXT, group_name TEXT, transport_type TEXT, transit_size NUMERIC, "
                                    "transit_time NUMERIC, bandwidth NUMERIC, large_packet_ratio NUMERIC, "
                                    "package_size NUMERIC, count NUMERIC, total_duration NUMERIC, step TEXT, "
                                    "type TEXT"),
    _table("CommAnalyzerMatrix", "hccl_op_name TEXT, group_name TEXT, src_rank TEXT, dst_rank TEXT, "
                                 "transport_type TEXT, transit_size NUMERIC, transit_time NUMERIC, bandwidth NUMERIC, "
                                 "step TEXT, type TEXT, op_name TEXT"),
)}
#: The columns torch_npu's analysis tables add to msprof's.
TORCH_NPU_ANALYSIS_COLUMNS = ("step", "type", "op_name")


def msprof_analysis_table(name: str) -> Table:
    """An analysis table as msprof's communication_analyzer.db has it."""
    table = ANALYSIS_TABLES[name]
    return Table(name, tuple(c for c in table.columns if c[0] not in TORCH_NPU_ANALYSIS_COLUMNS), table.primary)


#: StepTraceTime column -> step_breakdown (``step_trace_time.csv``) column.
STEP_TRACE_TIME_COLUMNS = {
    "computing": "Computing", "communication_not_overlapped": "Communication(Not Overlapped)",
    "overlapped": "Overlapped", "communication": "Communication", "free": "Free", "stage": "Stage",
    "bubble": "Bubble", "communication_not_overlapped_and_exclude_receive":
        "Communication(Not Overlapped and Exclude Receive)", "preparing": "Preparing",
}

# ------------------------------------------------------------------ enum tables (msprof's, as documented)
ENUM_API_TYPE = {20000: "acl", 15000: "model", 10000: "node", 5500: "communication", 5000: "runtime", 50001: "op",
                 50002: "queue", 50003: "trace", 50004: "mstx"}
ENUM_MODULE = dict(enumerate(
    "SLOG IDEDD SCC HCCL FMK CCU DVPP RUNTIME CCE HDC DRV NET".split()))
ENUM_MODULE.update(dict(zip(range(22, 26), "DEVMM KERNEL LIBMEDIA CCECPU".split())))
ENUM_MODULE.update(dict(zip(range(27, 46), (
    "ROS HCCP ROCE TEFUSION PROFILING DP APP TS TSDUMP AICPU LP TDT FE MD MB ME IMU IMP GE").split())))
ENUM_MODULE.update(dict(zip(range(47, 78), (
    "CAMERA ASCENDCL TEEOS ISP SIS HSM DSS PROCMGR BBOX AIVECTOR TBE FV MDCMAP TUNE HSS FFTS OP UDF HICAID TSYNC "
    "AUDIO TPRT ASCENDCKERNEL ASYS ATRACE RTC SYSMONITOR AMP ADETECT MBUFF CUSTOM").split())))
_RESERVED = {255: "RESERVED", 65534: "N/A", 65535: "INVALID_TYPE"}
ENUM_HCCL_DATA_TYPE = {**dict(enumerate("INT8 INT16 INT32 FP16 FP32 INT64 UINT64 UINT8 UINT16 UINT32 FP64 BFP16 "
                                        "INT128".split())), **_RESERVED}
# (the real file also has 7: RESERVED for the link type and RDMA types 2-5; both are kept)
ENUM_HCCL_LINK_TYPE = {**dict(enumerate("ON_CHIP HCCS PCIE ROCE SIO HCCS_SW STANDARD_ROCE RESERVED".split())),
                       **_RESERVED}
ENUM_HCCL_TRANSPORT_TYPE = {**dict(enumerate("SDMA RDMA LOCAL".split())), **_RESERVED}
ENUM_HCCL_RDMA_TYPE = {**dict(enumerate("RDMA_SEND_NOTIFY RDMA_SEND_PAYLOAD RDMA_PAYLOAD_PREPARE RDMA_PAYLOAD_CHECK "
                                        "RDMA_PAYLOAD_ACK RDMA_SEND_OP".split())), **_RESERVED}
ENUM_MSTX_EVENT_TYPE = {0: "marker", 1: "push/pop", 2: "start/end", 3: "marker_ex"}
ENUM_MEMCPY_OPERATION = {**dict(enumerate(["host to host", "host to device", "device to host", "device to device",
                                           "managed memory", "addr device to device", "host to device ex",
                                           "device to host ex"])), 65535: "other"}
ENUMS: dict[str, dict[int, str]] = {
    "ENUM_API_TYPE": ENUM_API_TYPE, "ENUM_MODULE": ENUM_MODULE, "ENUM_HCCL_DATA_TYPE": ENUM_HCCL_DATA_TYPE,
    "ENUM_HCCL_LINK_TYPE": ENUM_HCCL_LINK_TYPE, "ENUM_HCCL_TRANSPORT_TYPE": ENUM_HCCL_TRANSPORT_TYPE,
    "ENUM_HCCL_RDMA_TYPE": ENUM_HCCL_RDMA_TYPE, "ENUM_MSTX_EVENT_TYPE": ENUM_MSTX_EVENT_TYPE,
    "ENUM_MEMCPY_OPERATION": ENUM_MEMCPY_OPERATION,
}
ENUM_TABLES: dict[str, Table] = {name: Table(name, (("id", "INTEGER"), ("name", "TEXT")), "id") for name in ENUMS}

# ------------------------------------------------------------------ PMU metric names
#: op_summary PMU column -> TASK_PMU_INFO name where the rule of :func:`pmu_name` does not give it.
_PMU_NAMES = {"aicore_time(us)": "aic_total_time", "aiv_time(us)": "aiv_total_time",
              "total_cycles": "total_cycles", "cube_utilization(%)": "cube_utilization"}


def pmu_name(column: str) -> str:
    """The TASK_PMU_INFO metric of an op_summary PMU column: ``aic_mac_time(us)`` -> ``aic_mac_time`` (its
    value in ns there), ``aic_mac_ratio`` as it is, ``aicore_time(us)`` -> ``aic_total_time``; a unit in
    brackets (``(GB/s)``, ``(KB)``, ``(%)``) is dropped."""
    return _PMU_NAMES.get(column) or re.sub(r"\([^)]*\)$", "", column)


def is_time_metric(column: str) -> bool:
    """op_summary's ``(us)`` PMU columns: TASK_PMU_INFO holds them in ns, unrounded."""
    return column.endswith("(us)")


def group_hash(text: str) -> str:
    """msprof-analyze's ``double_hash`` of a communication group name: two 32-bit polynomial hashes
    (primes 29 and 131) in one 64-bit number, as text; analysis.db names groups by it."""
    first = second = 0
    mask = 0xFFFFFFFF
    for ch in text:
        first = (first * 29 + ord(ch)) & mask
        second = (second * 131 + ord(ch)) & mask
    return str((first << 32) | second)
