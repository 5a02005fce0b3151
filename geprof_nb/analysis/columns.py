"""The exact column names of msprof's summaries (reference §3.3, §4.1, §4.2).

Headers depend on the chip (Atlas A2 "Stars" chips such as 910B have separate
``aic_``/``aiv_`` PMU columns, ``Mix Block Num`` and ``Context ID``; 910A does
not) and on the aic_metrics group.
"""

from __future__ import annotations

OP_SUMMARY_BASE = [
    "Device_id", "Model ID", "Task ID", "Stream ID", "Op Name", "OP Type", "OP State", "Task Type",
    "Task Start Time(us)", "Task Duration(us)", "Task Wait Time(us)",
]
OP_SUMMARY_TENSOR_A2 = [
    "Block Num", "Mix Block Num", "HF32 Eligible", "Input Shapes", "Input Data Types", "Input Formats",
    "Output Shapes", "Output Data Types", "Output Formats", "Context ID",
]
OP_SUMMARY_TENSOR_910A = [c for c in OP_SUMMARY_TENSOR_A2 if c not in ("Mix Block Num", "Context ID")]

#: PMU metrics per group: (metric base name, kind) where kind is "time", "ratio" or "rate".
PIPE_UTILIZATION_A2_AIC = ["mac", "scalar", "mte1", "mte2", "fixpipe"]
PIPE_UTILIZATION_A2_AIV = ["vec", "scalar", "mte2", "mte3"]
PIPE_UTILIZATION_910A = ["vec", "mac", "scalar", "mte1", "mte2", "mte3"]


def pipe_columns(prefix: str, pipes: list[str]) -> list[str]:
    """``<prefix><pipe>_time(us)``, ``<prefix><pipe>_ratio`` for each pipe."""
    out = []
    for p in pipes:
        out += [f"{prefix}{p}_time(us)", f"{prefix}{p}_ratio"]
    return out


def pmu_columns(aic_metrics: str, chip_family: str) -> list[str]:
    """PMU columns of op_summary for an aic_metrics group on a chip family ([] if none)."""
    if aic_metrics != "PipeUtilization":
        return []
    if chip_family == "A2":
        return (["aicore_time(us)", "aic_total_cycles"] + pipe_columns("aic_", PIPE_UTILIZATION_A2_AIC)
                + ["aic_icache_miss_rate", "aiv_time(us)", "aiv_total_cycles"]
                + pipe_columns("aiv_", PIPE_UTILIZATION_A2_AIV) + ["aiv_icache_miss_rate", "cube_utilization(%)"])
    return (["aicore_time(us)", "total_cycles"] + pipe_columns("", PIPE_UTILIZATION_910A)
            + ["icache_miss_rate", "memory_bound"])


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

#: Columns whose values are timestamps: the CSV export appends a TAB to them.
TIMESTAMP_COLUMNS = {"Task Start Time(us)", "FP Start(us)", "BP End(us)", "Iteration End(us)", "Reduce Start(us)"}
