"""What a profiling layer costs when it is off (target: <= 1.5x a bare ``nullcontext()``), and what all layers
cost when on (information, no target)."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable

from harness import Result, compare, information
from workloads import ALL_LAYERS, resnet50_training, run_session, scratch_dir

from geprof_nb.prof.host_profiler import ProfilingEvent
from geprof_nb.prof.scope import AclProfilingReporter, profiling_scope

N_SCOPES = 200_000


def disabled_scope(quick: bool) -> Result:
    """A disabled ``profiling_scope`` vs a bare ``contextlib.nullcontext()`` (target: <= 1.5x)."""
    n = N_SCOPES // (4 if quick else 1)
    event = ProfilingEvent.kInferShape

    def ours() -> None:
        for _ in range(n):
            with profiling_scope("node", event):
                pass

    def bare() -> None:
        for _ in range(n):
            with contextlib.nullcontext():
                pass

    c = compare(ours, bare)
    return Result("disabled profiling_scope / nullcontext()", c.ratio, "x", "<= 1.5", c.ratio <= 1.5,
                  {**c.detail("ours", "nullcontext", 1e9 / n, "ns_per_scope"), "scopes": n})


def disabled_acl_reporter(quick: bool) -> Result:
    """A disabled ``AclProfilingReporter`` (acl api switch off) vs nullcontext (target: <= 1.5x)."""
    n = N_SCOPES // (4 if quick else 1)

    def ours() -> None:
        for _ in range(n):
            with AclProfilingReporter(0x020001):
                pass

    def bare() -> None:
        for _ in range(n):
            with contextlib.nullcontext():
                pass

    c = compare(ours, bare)
    return Result("disabled AclProfilingReporter / nullcontext()", c.ratio, "x", "<= 1.5", c.ratio <= 1.5,
                  {**c.detail("ours", "nullcontext", 1e9 / n, "ns_per_call"), "calls": n})


def profiling_overhead(quick: bool) -> Result:
    """ResNet-50 training (static, world size 8), 200 steps, every layer on vs profiling off (no target).

    Both sides build and load the model (compile, stream schedule, static memory
    plan) and run 200 steps; the profiled side also reports every layer and
    flushes the run directory.  Removing the run directory is not timed.

    The same pair over 1 and over 2000 steps splits the extra time into what
    profiling costs once per run (collection start, the static description of
    every task, the run directory's files) and what it costs per step (the
    step's records and writing them), and shows what a long run pays.

    Reported as information, with no target: both sides are the simulator's own Python, and what
    profiling adds to it (some ms over 200 steps) is time no one waits on.
    """
    steps, long_steps = 200, 2000
    graph = resnet50_training()

    def run(profiled: bool, n: int = steps) -> Callable[[], None]:
        out = scratch_dir()
        run_session(graph, n, ALL_LAYERS if profiled else None, out)
        return lambda: shutil.rmtree(out, ignore_errors=True)

    runs = 7 if quick else 11
    c = compare(lambda: run(True), lambda: run(False), runs=runs)
    once = compare(lambda: run(True, 1), lambda: run(False, 1), runs=runs)
    long = compare(lambda: run(True, long_steps), lambda: run(False, long_steps), runs=5 if quick else 7)
    # each split term is the median of the rounds' on - off differences (a slow spell spanning a
    # round cancels in it); the per-step term comes from 1999 steps, so a few ms of noise is ~2 us
    per_step_s = (long.difference - once.difference) / (long_steps - 1)
    return information(f"ResNet-50 training x{steps} steps, all layers on / off", c.ratio, "x",
                       {**c.detail("on", "off"), "steps": steps, "layers": ALL_LAYERS,
                        "profiling_once_per_run_ms": once.difference * 1e3, "profiling_per_step_us": per_step_s * 1e6,
                        "unprofiled_per_step_us": (long.b_median - once.b_median) / (long_steps - 1) * 1e6,
                        f"x{long_steps}_steps_ratio": long.ratio, f"x{long_steps}_steps_on_median_s": long.a_median,
                        f"x{long_steps}_steps_off_median_s": long.b_median})


BENCHMARKS = [disabled_scope, disabled_acl_reporter, profiling_overhead]
