"""What-if re-timing of a 10,000-task step: the dependency graph re-timed under a change and its new critical path
walked (target <= 100 ms, issue 29); building the graph, once per run, is reported beside it."""

from __future__ import annotations

import time

from harness import Result, information, median_time
from workloads import run_session, scratch_dir

from geprof_nb import ge
from geprof_nb.analysis import load

FULL_TASKS = 10_000
QUICK_TASKS = 2_500
#: Device tasks per hidden layer of the MLP below (forward, backward, optimizer), about.
_cache: dict[bool, tuple] = {}


def _profile(quick: bool):
    if quick not in _cache:
        layers = (QUICK_TASKS if quick else FULL_TASKS) // 13 + 1
        graph = ge.models.mlp(batch_size=8, in_features=64, hidden=(64,) * layers, out_features=10)
        run = run_session(graph, 1, {"training_trace": "on", "task_trace": "on"}, scratch_dir("geprof_timing_"))
        profile = load(run)
        t = time.perf_counter()
        path = profile.critical_path()  # builds the step's graph, once per Profile
        built = time.perf_counter() - t
        _cache[quick] = (profile, len(profile.task_time), built, len(path))
    return _cache[quick]


def what_if_time(quick: bool) -> Result:
    """``Profile.what_if(op_speedup={"MatMul*": 2.0}, host_gap_us=0)`` on a one-step run of about 10,000 device
    tasks (target: <= 100 ms; ``--quick``: about 2,500 tasks, target scaled to 25 ms)."""
    profile, n, _, _ = _profile(quick)
    median = median_time(lambda: profile.what_if(op_speedup={"MatMul*": 2.0}, host_gap_us=0).predicted)
    target = 0.1 * n / FULL_TASKS if quick else 0.1
    return Result(f"what-if re-timing, {n:,}-task step", median, "s", f"<= {target:.3g}", median <= target,
                  {"tasks": n})


def graph_build_time(quick: bool) -> Result:
    """Building that step's dependency graph from the run's tables and walking its critical path, the first
    ``critical_path()`` of a Profile (information)."""
    _, n, built, segments = _profile(quick)
    return information(f"dependency graph build + critical path, {n:,}-task step", built, "s",
                       {"tasks": n, "segments": segments})


BENCHMARKS = [what_if_time, graph_build_time]
