"""Analysis of a long run: op_summary, op_statistic and step_trace of 1,000,000 task records, time and
the whole process's peak memory (target 5)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness import RUNS, Result
from workloads import resnet_run, task_records

FULL_TASKS = 1_000_000
QUICK_TASKS = 250_000

#: Runs in a fresh interpreter so that the peak RSS is this work's (imports included), not the suite's.
_CHILD = r"""
import gc, json, statistics, sys, time
import geprof_nb
from geprof_nb.analysis import Profile
from geprof_nb.analysis.rundir import RunDir

run, runs = sys.argv[1], int(sys.argv[2])
rows = {}

def tables():
    p = Profile(RunDir(run))  # a new Profile: nothing cached from the previous run
    rows["op_summary"] = len(p.op_summary)
    rows["op_statistic"] = len(p.op_statistic)
    rows["step_trace"] = len(p.step_trace)

tables()  # warm-up
times = []
for _ in range(runs):
    gc.collect()
    t = time.perf_counter()
    tables()
    times.append(time.perf_counter() - t)
# VmHWM is this process's own peak; ru_maxrss would carry the parent's peak over the fork
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"runs_s": times, "median_s": statistics.median(times), "rows": rows, "peak_rss_mb": hwm / 1024}))
"""


def _child(run: Path, runs: int) -> dict:
    done = subprocess.run([sys.executable, "-c", _CHILD, str(run), str(runs)], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _measure(quick: bool) -> tuple[dict, int]:
    tasks = QUICK_TASKS if quick else FULL_TASKS
    run = resnet_run(tasks)
    return _child(run, RUNS), task_records(run)


_cache: dict[bool, tuple[dict, int]] = {}


def _measured(quick: bool) -> tuple[dict, int]:
    if quick not in _cache:
        _cache[quick] = _measure(quick)
    return _cache[quick]


def tables_time(quick: bool) -> Result:
    """op_summary + op_statistic + step_trace DataFrames from the raw run (target: <= 1.5 s at 1,000,000
    tasks; ``--quick`` reads 250,000 and scales the target to 0.375 s)."""
    m, tasks = _measured(quick)
    target = 1.5 * tasks / FULL_TASKS
    return Result(f"op_summary + op_statistic + step_trace, {tasks:,} tasks", m["median_s"], "s", f"<= {target:.3g}",
                  m["median_s"] <= target, {"tasks": tasks, **m})


def tables_peak_rss(quick: bool) -> Result:
    """Peak RSS of the whole process (interpreter, imports, tables) building those tables (target: <= 600 MB
    at 1,000,000 tasks; the quick run's smaller run is held to the same bound)."""
    m, tasks = _measured(quick)
    return Result(f"peak RSS of that process, {tasks:,} tasks", m["peak_rss_mb"], "MB", "<= 600",
                  m["peak_rss_mb"] <= 600, {"tasks": tasks, "rows": m["rows"]})


BENCHMARKS = [tables_time, tables_peak_rss]
