"""Exports of a long run: the torch_npu ``ascend_pt`` directory, msprof's summary CSVs (target 8) and torch_npu's
SQLite databases (issue 26)."""

from __future__ import annotations

import shutil
import statistics
from collections.abc import Callable

from harness import Result, times
from workloads import disk_bytes, resnet_run, scratch_dir, task_records

import geprof_nb

FULL_TASKS = 1_000_000
#: --quick sizes (both exports read the same run).  A time target scales linearly with the size, but
#: an export also has fixed work (a dozen tables, ~20 files: ~0.1-0.2 s): at 20,000 tasks that fixed
#: work alone took half of ascend_pt's scaled 0.3 s, and the row failed in any slow spell.
QUICK_TASKS = {"ascend_pt": 100_000, "msprof": 100_000, "db": 100_000}


def _export(quick: bool, fmt: str, target_s: float, label: str, **options) -> Result:
    tasks_wanted = QUICK_TASKS[fmt] if quick else FULL_TASKS
    run = resnet_run(tasks_wanted)
    tasks = task_records(run)
    target = target_s * tasks_wanted / FULL_TASKS
    found: dict[str, int] = {}

    def export() -> Callable[[], None]:
        profile = geprof_nb.load(run)  # a fresh Profile: the tables are read and built as part of the export
        out = scratch_dir()
        profile.export(out / "x", format=fmt, **options)
        found["bytes"] = disk_bytes(out)
        return lambda: shutil.rmtree(out, ignore_errors=True)

    t = times(export)
    median = statistics.median(t)
    scaled = "" if not quick else f" ({target_s:g} s at {FULL_TASKS:,})"
    return Result(f"{label}, {tasks:,} tasks", median, "s", f"<= {target:g} s{scaled}", median <= target,
                  {"tasks": tasks, "runs_s": t, "output_mb": found["bytes"] / 2**20})


def ascend_pt_export(quick: bool) -> Result:
    """``Profile.export(format="ascend_pt")`` from a fresh Profile of the run: kernel_details, memory and
    step CSVs, communication JSONs and trace_view.json (target: <= 15 s at 1,000,000 tasks; ``--quick``:
    100,000 tasks against the target scaled to 1.5 s)."""
    return _export(quick, "ascend_pt", 15.0, "export ascend_pt")


def msprof_csv_export(quick: bool) -> Result:
    """msprof's summary CSVs (op_summary, op_statistic, api_statistic, task_time, step_trace, ...) from a
    fresh Profile of the run, ``export(format="msprof", timeline=False)`` (target: <= 10 s at 1,000,000
    tasks; ``--quick``: 100,000 tasks against 1 s)."""
    return _export(quick, "msprof", 10.0, "export msprof CSV set", timeline=False)


def db_export(quick: bool) -> Result:
    """``Profile.export(format="db")`` from a fresh Profile of the run: ``ascend_pytorch_profiler_0.db`` (TASK,
    COMPUTE_TASK_INFO, TASK_PMU_INFO, the framework and memory tables, ...) and ``analysis.db``, each in one
    transaction (target: <= 15 s at 1,000,000 tasks; ``--quick``: 100,000 tasks against 1.5 s)."""
    return _export(quick, "db", 15.0, "export db (torch_npu SQLite)")


BENCHMARKS = [ascend_pt_export, msprof_csv_export, db_export]
