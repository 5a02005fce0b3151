"""Profiling constants shared by the runtime and the analysis: switch masks,
training-trace LogIDs and the AI Core metric groups with the PMU events each
one programs (reference §1.2, §1.3, §3.1, §4.1).
"""

from __future__ import annotations

from enum import IntEnum

# msprof data-type switch bits (aprof_pub.h, reference §1.2).
PROF_ACL_API_MASK = 0x1
PROF_TASK_TIME_L1_MASK = 0x2
PROF_AICORE_METRICS_MASK = 0x4
PROF_AICPU_TRACE_MASK = 0x8
PROF_L2CACHE_MASK = 0x10
PROF_HCCL_TRACE_MASK = 0x20
PROF_TRAINING_TRACE_MASK = 0x40
PROF_MSPROFTX_MASK = 0x80
PROF_RUNTIME_API_MASK = 0x100
PROF_GE_API_L0_MASK = 0x200
PROF_TASK_TSFW_MASK = 0x400
PROF_TASK_TIME_MASK = 0x800  # the L0 bit
PROF_TASK_MEMORY_MASK = 0x1000
PROF_GE_API_L1_MASK = 0x1000000
PROF_OP_DETAIL_MASK = 0x80000000


class ProfDataTypeConfig(IntEnum):
    """``ge::ProfDataTypeConfig`` (current header, reference §1.2)."""

    kProfTaskTime = 0x0002
    kProfAiCoreMetrics = 0x0004
    kProfAicpu = 0x0008
    kProfL2cache = 0x0010
    kProfHccl = 0x0020
    kProfTrainingTrace = 0x0040
    kProfFwkScheduleL0 = 0x0200
    kProfTaskTimeL0 = 0x0800
    kProfFwkScheduleL1 = 0x01000000


class ProfilingAicoreMetrics(IntEnum):
    """``ge::ProfilingAicoreMetrics`` (reference §1.3)."""

    kAicoreArithmeticUtilization = 0
    kAicorePipeUtilization = 1
    kAicoreMemory = 2
    kAicoreMemoryL0 = 3
    kAicoreResourceConflictRatio = 4
    kAicoreMemoryUB = 5
    kAicoreL2Cache = 6
    kAicorePipelineExecuteUtilization = 7


#: The aic_metrics option values (profilingOptions).
AIC_METRICS = (
    "ArithmeticUtilization",
    "PipeUtilization",
    "Memory",
    "MemoryL0",
    "MemoryUB",
    "ResourceConflictRatio",
    "L2Cache",
    "MemoryAccess",
)

# Training-trace LogIDs GE inserts as PROFILER_TRACE tasks (profiling_task_utils.cc).
FP_START_LOGID = 2
BP_END_LOGID = 3
ITER_END_LOGID = 4
AR_START_LOGID = 10000
AR_END_LOGID = 10001
AR_STEP = 2
GETNEXT_START_LOGID = 20000
GETNEXT_END_LOGID = 20001


def all_reduce_logids(k: int) -> tuple[int, int]:
    """Start and end LogID of the k-th AllReduce (0-based)."""
    return AR_START_LOGID + AR_STEP * k, AR_END_LOGID + AR_STEP * k


#: PMU events programmed per metric group, chip family and core kind (at most 8 per core kind,
#: the hardware's counter limit).  The names are the simulated device's raw counters
#: (``ge.device.COUNTERS``); counts are per block: ``*_cycles`` count cycles a pipe was busy (or
#: stalled), ``*_instr`` instructions (one per cycle), ``*_bytes`` bytes moved, the L2 names
#: requests.  The analysis turns them into the msprof columns with msprof's formulas
#: (``analysis/pmu.py``).  Where msprof shows no column for a core kind (A2 AI Cube cores in
#: ResourceConflictRatio) that core is still programmed, so its rows keep their time and cycles.
_L2_EVENTS = ("write_cache_hit", "write_cache_miss_allocate", "r0_read_cache_hit", "r0_read_cache_miss_allocate",
              "r1_read_cache_hit", "r1_read_cache_miss_allocate")
_ACCESS_EVENTS = ("main_mem_read_bytes", "main_mem_write_bytes", "gm_to_l1_bytes", "l0c_to_l1_bytes",
                  "l0c_to_gm_bytes", "gm_to_ub_bytes", "ub_to_gm_bytes")
_CONFLICT_EVENTS = ("vec_bankgroup_cflt_cycles", "vec_bank_cflt_cycles", "vec_resc_cflt_cycles")
PMU_EVENTS: dict[str, dict[str, dict[str, tuple[str, ...]]]] = {
    "ArithmeticUtilization": {
        "A2": {
            "aic": ("cube_fp16_instr", "cube_int8_instr"),
            "aiv": ("vec_fp32_instr", "vec_fp16_instr", "vec_int32_instr", "vec_misc_instr"),
        },
        "910A": {
            "aic": ("cube_fp16_instr", "cube_int8_instr", "vec_fp32_instr", "vec_fp16_instr", "vec_int32_instr",
                    "vec_misc_instr"),
        },
    },
    "PipeUtilization": {
        "A2": {
            "aic": ("mac_cycles", "scalar_cycles", "mte1_cycles", "mte2_cycles", "fixpipe_cycles",
                    "icache_req", "icache_miss"),
            "aiv": ("vec_cycles", "scalar_cycles", "mte2_cycles", "mte3_cycles", "icache_req", "icache_miss"),
        },
        "910A": {
            "aic": ("vec_cycles", "mac_cycles", "scalar_cycles", "mte1_cycles", "mte2_cycles", "mte3_cycles",
                    "icache_req", "icache_miss"),
        },
    },
    "Memory": {
        "A2": {
            "aic": ("l1_read_bytes", "l1_write_bytes", "main_mem_read_bytes", "main_mem_write_bytes",
                    "l2_read_bytes", "l2_write_bytes"),
            "aiv": ("ub_read_bytes", "ub_write_bytes", "main_mem_read_bytes", "main_mem_write_bytes",
                    "l2_read_bytes", "l2_write_bytes"),
        },
        "910A": {
            "aic": ("ub_read_bytes", "ub_write_bytes", "l1_read_bytes", "l1_write_bytes", "l2_read_bytes",
                    "l2_write_bytes", "main_mem_read_bytes", "main_mem_write_bytes"),
        },
    },
    "MemoryL0": {
        "A2": {
            "aic": ("l0a_read_bytes", "l0a_write_bytes", "l0b_read_bytes", "l0b_write_bytes", "l0c_read_cube_bytes",
                    "l0c_write_cube_bytes"),
            "aiv": ("l0c_read_bytes", "l0c_write_bytes"),
        },
        "910A": {
            "aic": ("l0a_read_bytes", "l0a_write_bytes", "l0b_read_bytes", "l0b_write_bytes", "l0c_read_bytes",
                    "l0c_write_bytes", "l0c_read_cube_bytes", "l0c_write_cube_bytes"),
        },
    },
    "MemoryUB": {
        "A2": {
            "aic": ("ub_read_scalar_bytes", "ub_write_scalar_bytes"),
            "aiv": ("ub_read_vector_bytes", "ub_write_vector_bytes", "ub_read_scalar_bytes", "ub_write_scalar_bytes"),
        },
        "910A": {
            "aic": ("ub_read_mte_bytes", "ub_write_mte_bytes", "ub_read_vector_bytes", "ub_write_vector_bytes",
                    "ub_read_scalar_bytes", "ub_write_scalar_bytes"),
        },
    },
    "ResourceConflictRatio": {
        "A2": {"aic": _CONFLICT_EVENTS, "aiv": _CONFLICT_EVENTS},
        "910A": {"aic": _CONFLICT_EVENTS},
    },
    # L2Cache and MemoryAccess exist on A2-class chips only (Atlas training 910A has neither)
    "L2Cache": {
        "A2": {"aic": _L2_EVENTS, "aiv": _L2_EVENTS},
    },
    "MemoryAccess": {
        "A2": {"aic": _ACCESS_EVENTS, "aiv": _ACCESS_EVENTS},
    },
}


def aic_metrics_on(chip_family: str) -> tuple[str, ...]:
    """The aic_metrics groups the AI Core counters of a chip family can be programmed with."""
    return tuple(name for name, chips in PMU_EVENTS.items() if chip_family in chips)


def lacks_counter_group(aic_metrics: str, chip_family: str) -> bool:
    """True if ``aic_metrics`` names a counter group the AI Core counters of ``chip_family`` do not have
    (L2Cache and MemoryAccess need an A2-class chip).

    The one decision: ``%%geprof``, ``%geprof config``, ``geprof run``, a collection, GE's options and
    the C API refuse such a group before a run opens, and a device that comes up inside a run already
    open with it notes that the run has no PMU data; each only words it.  No group, or a ``Custom:``
    event list (checked by the options), lacks nothing here.
    """
    if not aic_metrics or aic_metrics.startswith("Custom:"):
        return False
    return chip_family not in PMU_EVENTS.get(aic_metrics, {})
