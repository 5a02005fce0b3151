"""The exact column names of msprof's summaries (reference §3.3, §4.1, §4.2).

Headers depend on the chip (Atlas A2 "Stars" chips such as 910B have separate
``aic_``/``aiv_`` PMU columns, ``Mix Block Num`` and ``Context ID``; 910A does
not) and on the aic_metrics group.
"""

from __future__ import annotations

from dataclasses import dataclass

OP_SUMMARY_BASE = [
    "Device_id", "Model ID", "Task ID", "Stream ID", "Op Name", "OP Type", "OP State", "Task Type",
    "Task Start Time(us)", "Task Duration(us)", "Task Wait Time(us)",
]
OP_SUMMARY_TENSOR_A2 = [
    "Block Num", "Mix Block Num", "HF32 Eligible", "Input Shapes", "Input Data Types", "Input Formats",
    "Output Shapes", "Output Data Types", "Output Formats", "Context ID",
]
OP_SUMMARY_TENSOR_910A = [c for c in OP_SUMMARY_TENSOR_A2 if c not in ("Mix Block Num", "Context ID")]

#: PipeUtilization pipes (each gives ``<pipe>_time(us)`` and ``<pipe>_ratio``).
PIPE_UTILIZATION_A2_AIC = ["mac", "scalar", "mte1", "mte2", "fixpipe"]
PIPE_UTILIZATION_A2_AIV = ["vec", "scalar", "mte2", "mte3"]
PIPE_UTILIZATION_910A = ["vec", "mac", "scalar", "mte1", "mte2", "mte3"]


@dataclass(frozen=True)
class PmuMetric:
    """One AI Core metric of op_summary and the PMU events it is computed from.

    ``kind`` says how (formulas in ``analysis/pmu.py``): ``pipe`` (a ``_time(us)`` and a ``_ratio``
    column from busy cycles), ``ratio`` (event / total cycles), ``rate`` (event / event), ``bw``
    (bytes / time, ``(GB/s)``), ``kb`` (bytes summed over blocks, ``(KB)``), ``count`` (event summed
    over blocks), ``cube_fops`` / ``vector_fops`` (operations from instruction counts).
    """

    name: str
    kind: str
    events: tuple[str, ...]

    def columns(self, prefix: str) -> list[str]:
        if self.kind == "pipe":
            return [f"{prefix}{self.name}_time(us)", f"{prefix}{self.name}_ratio"]
        unit = {"bw": "(GB/s)", "kb": "(KB)"}.get(self.kind, "")
        return [f"{prefix}{self.name}{unit}"]


def _pipes(names: list[str]) -> list[PmuMetric]:
    return [PmuMetric(p, "pipe", (f"{p}_cycles",)) for p in names]


def _bw(*names: str, suffix: str = "") -> list[PmuMetric]:
    """Bandwidth metrics ``<name>`` from the byte counter ``<name without _bw><suffix>_bytes``."""
    out = []
    for n in names:
        base, _, path = n.partition("_bw")
        out.append(PmuMetric(n, "bw", (f"{base}{path}{suffix}_bytes",)))
    return out


_ICACHE = PmuMetric("icache_miss_rate", "rate", ("icache_miss", "icache_req"))
_MAC = [PmuMetric("mac_fp16_ratio", "ratio", ("cube_fp16_instr",)),
        PmuMetric("mac_int8_ratio", "ratio", ("cube_int8_instr",))]
_VEC = [PmuMetric(f"vec_{t}_ratio", "ratio", (f"vec_{t}_instr",)) for t in ("fp32", "fp16", "int32", "misc")]
_CUBE_FOPS = PmuMetric("cube_fops", "cube_fops", ("cube_fp16_instr", "cube_int8_instr"))
_VECTOR_FOPS = PmuMetric("vector_fops", "vector_fops",
                         ("vec_fp32_instr", "vec_fp16_instr", "vec_int32_instr", "vec_misc_instr"))
_CONFLICTS = [PmuMetric(f"vec_{c}_cflt_ratio", "ratio", (f"vec_{c}_cflt_cycles",))
              for c in ("bankgroup", "bank", "resc")]
_L2 = [PmuMetric(n, "count", (n,)) for n in (
    "write_cache_hit", "write_cache_miss_allocate", "r0_read_cache_hit", "r0_read_cache_miss_allocate",
    "r1_read_cache_hit", "r1_read_cache_miss_allocate")]
_ACCESS = [PmuMetric(n, "kb", (e,)) for n, e in (
    ("read_main_memory_datas", "main_mem_read_bytes"), ("write_main_memory_datas", "main_mem_write_bytes"),
    ("GM_to_L1_datas", "gm_to_l1_bytes"), ("L0C_to_L1_datas", "l0c_to_l1_bytes"),
    ("L0C_to_GM_datas", "l0c_to_gm_bytes"), ("GM_to_UB_datas", "gm_to_ub_bytes"),
    ("UB_to_GM_datas", "ub_to_gm_bytes"))]

#: The AI Core metrics of op_summary per aic_metrics group, chip family and core kind, in column
#: order (reference §4.1).  "A2" (910B, Stars chips): ``aic_``/``aiv_`` columns, without the
#: ones msprof drops on these chips (``UNSUPPORTED_HEADER`` of msprof's metric_processor.cpp:
#: no vector metrics on the cube core, no cube/L1/L0A/L0B metrics on the vector core); the
#: per-group lists match msprof's 910B expected headers (smoke-test config; MemoryAccess from
#: a 910B profiler test).  "910A": one unprefixed set, msprof's default python metric lists
#: (``ai_core_metrics_manager.py``) plus ``cube_fops``/``vector_fops`` for ArithmeticUtilization.
PMU_GROUPS: dict[str, dict[str, dict[str, list[PmuMetric]]]] = {
    "ArithmeticUtilization": {
        "A2": {"aic": _MAC + [_CUBE_FOPS], "aiv": _VEC + [_VECTOR_FOPS]},
        "910A": {"aic": _MAC + _VEC + [_CUBE_FOPS, _VECTOR_FOPS]},
    },
    "PipeUtilization": {
        "A2": {"aic": _pipes(PIPE_UTILIZATION_A2_AIC) + [_ICACHE], "aiv": _pipes(PIPE_UTILIZATION_A2_AIV) + [_ICACHE]},
        "910A": {"aic": _pipes(PIPE_UTILIZATION_910A) + [_ICACHE]},
    },
    "Memory": {
        "A2": {
            "aic": _bw("l1_read_bw", "l1_write_bw", "main_mem_read_bw", "main_mem_write_bw", "l2_read_bw",
                       "l2_write_bw"),
            "aiv": _bw("ub_read_bw", "ub_write_bw", "main_mem_read_bw", "main_mem_write_bw", "l2_read_bw",
                       "l2_write_bw"),
        },
        # unconfirmed: msprof's C++ MemoryIndex (and A2) order main_mem before l2; the python list has l2 first
        "910A": {"aic": _bw("ub_read_bw", "ub_write_bw", "l1_read_bw", "l1_write_bw", "l2_read_bw", "l2_write_bw",
                            "main_mem_read_bw", "main_mem_write_bw")},
    },
    "MemoryL0": {
        "A2": {
            "aic": _bw("l0a_read_bw", "l0a_write_bw", "l0b_read_bw", "l0b_write_bw", "l0c_read_bw_cube",
                       "l0c_write_bw_cube"),
            "aiv": _bw("l0c_read_bw", "l0c_write_bw"),
        },
        "910A": {"aic": _bw("l0a_read_bw", "l0a_write_bw", "l0b_read_bw", "l0b_write_bw", "l0c_read_bw",
                            "l0c_write_bw", "l0c_read_bw_cube", "l0c_write_bw_cube")},
    },
    "MemoryUB": {
        "A2": {
            "aic": _bw("ub_read_bw_scalar", "ub_write_bw_scalar"),
            "aiv": _bw("ub_read_bw_vector", "ub_write_bw_vector", "ub_read_bw_scalar", "ub_write_bw_scalar"),
        },
        # unconfirmed: the *_mte columns are in msprof's python list only
        "910A": {"aic": _bw("ub_read_bw_mte", "ub_write_bw_mte", "ub_read_bw_vector", "ub_write_bw_vector",
                            "ub_read_bw_scalar", "ub_write_bw_scalar")},
    },
    "ResourceConflictRatio": {
        "A2": {"aic": [], "aiv": _CONFLICTS},
        "910A": {"aic": _CONFLICTS},
    },
    # L2Cache and MemoryAccess exist on A2-class chips only (reference §1.3, §4.1)
    "L2Cache": {
        "A2": {"aic": _L2, "aiv": _L2},
    },
    "MemoryAccess": {
        "A2": {"aic": _ACCESS, "aiv": _ACCESS},
    },
}


def pmu_group(aic_metrics: str, chip_family: str) -> dict[str, list[PmuMetric]]:
    """The metrics per core kind of an aic_metrics group on a chip family ({} if not simulated)."""
    family = "A2" if chip_family == "A2" else "910A"
    return PMU_GROUPS.get(aic_metrics, {}).get(family, {})


def pipe_columns(prefix: str, pipes: list[str]) -> list[str]:
    """``<prefix><pipe>_time(us)``, ``<prefix><pipe>_ratio`` for each pipe."""
    return [c for m in _pipes(pipes) for c in m.columns(prefix)]


def core_columns(aic_metrics: str, chip_family: str, core: str) -> list[str]:
    """The metric columns of one core kind (without its time and total cycles columns)."""
    prefix = f"{core}_" if chip_family == "A2" else ""
    return [c for m in pmu_group(aic_metrics, chip_family).get(core, []) for c in m.columns(prefix)]


def time_columns(chip_family: str, core: str) -> tuple[str, str]:
    """The (time, total cycles) columns that open a core kind's PMU columns."""
    if chip_family != "A2":
        return "aicore_time(us)", "total_cycles"
    return ("aicore_time(us)", "aic_total_cycles") if core == "aic" else ("aiv_time(us)", "aiv_total_cycles")


def pmu_columns(aic_metrics: str, chip_family: str) -> list[str]:
    """PMU columns of op_summary for an aic_metrics group on a chip family ([] if none).

    Every group opens each core kind with its time and total cycles; PipeUtilization ends with
    ``cube_utilization(%)`` on A2 and ``memory_bound`` on 910A.
    """
    group = pmu_group(aic_metrics, chip_family)
    if not group:
        return []
    cols: list[str] = []
    for core in group:
        cols += [*time_columns(chip_family, core), *core_columns(aic_metrics, chip_family, core)]
    if aic_metrics == "PipeUtilization":
        cols.append("cube_utilization(%)" if chip_family == "A2" else "memory_bound")
    return cols


def op_summary_columns(chip_family: str, task_level: str, aic_metrics: str) -> list[str]:
    """The op_summary header for a chip family, task_time level and aic_metrics group."""
    tensor = OP_SUMMARY_TENSOR_A2 if chip_family == "A2" else OP_SUMMARY_TENSOR_910A
    pmu = pmu_columns(aic_metrics, chip_family) if task_level == "l1" else []
    return OP_SUMMARY_BASE + tensor + pmu


OP_STATISTIC = ["Device_id", "OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)",
                "Max Time(us)", "Ratio(%)"]

STEP_TRACE = ["Device_id", "Iteration ID", "FP Start(us)", "BP End(us)", "Iteration End(us)", "Iteration Time(us)",
              "FP to BP Time(us)", "Iteration Refresh(us)", "Data Aug Bound(us)", "Model ID"]
STEP_TRACE_REDUCE = ["Reduce Start(us)", "Reduce Duration(us)"]
#: Added after the Reduce pairs when the run has GetNext trace tags: msprof shows them only in its
#: step_trace timeline JSON (``GetNext Start`` / ``GetNext End`` / ``GetNext Time(us)``), not in the CSV.
STEP_TRACE_GETNEXT = ["GetNext Start(us)", "GetNext End(us)", "GetNext Time(us)"]

#: Columns whose values are timestamps: the CSV export appends a TAB to them.
TIMESTAMP_COLUMNS = {"Task Start Time(us)", "FP Start(us)", "BP End(us)", "Iteration End(us)", "Reduce Start(us)"}


def is_other_core_column(task_type: str, column: str) -> bool:
    """Whether ``column`` is a PMU column of the core a pure ``task_type`` task (``AI_CORE`` or
    ``AI_VECTOR_CORE``) did not run on: torch_npu's kernel_details holds ``0`` there, op_summary
    ``N/A`` (the export writes the zeros, the import reads them back as missing)."""
    if task_type == "AI_CORE":
        return column.startswith("aiv_")
    if task_type == "AI_VECTOR_CORE":
        return column.startswith("aic_") or column in ("aicore_time(us)", "cube_utilization(%)")
    return False


#: The task types whose other core's PMU cells :func:`is_other_core_column` names.
PURE_CORE_TASK_TYPES = ("AI_CORE", "AI_VECTOR_CORE")

