"""Where the overhead row's extra time goes: ``python benchmarks/overhead_parts.py [--steps N] [--rounds N]``.

A diagnostic, not a benchmark of the suite: it runs the overhead row's workload
(ResNet-50 training, world size 8, every layer) with pieces of the profiling
work moved or taken away, to say what a change of design could save at best:

* ``files written inline``: every job msprof hands its writer thread runs at
  once in the job's thread (what the writer thread saves, or costs);
* ``no file written``: every job msprof hands its writer thread counts as done
  without running (no file is made or written: the job's own work only);
* ``no file, no step records``: also no batch of steps is turned into device
  records (HWTS, step trace, HCCL sub-tasks, AI CPU); the static description,
  the API and host layers, init and finalise remain.  That is what a separate
  collector process, at no cost of its own, would leave in the job;
* ``nothing of the model reported``: also no static description (the compiler gathers no op
  descriptions; no task, tensor, PMU or memory-plan records): what remains is the API and host
  layers, init and finalise.  No design that still describes the model can cost less, in
  whatever language it is written;
* ``off, a forked child alive``: profiling off, with a child forked at the
  start of the run and alive until its end (what forking a collector would
  cost the job before the collector does anything).

The modes run in turn, round after round, in this process; each row reports
the median of the rounds' ratios to ``off`` and of their differences (ms).
These runs write no usable run directory; removing it is not timed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Comparison, alternate_self_timed  # noqa: E402
from workloads import ALL_LAYERS, resnet50_training, run_session, scratch_dir  # noqa: E402

from geprof_nb.ge import runtime, task_desc  # noqa: E402
from geprof_nb.prof import writer  # noqa: E402
from geprof_nb.prof.properties import BIT_TASK_TIME  # noqa: E402


@contextlib.contextmanager
def _writer_jobs(run: bool) -> Iterator[None]:
    """Jobs handed to the writer thread count as run by it: ``run``, they run at once in the thread
    that hands them over; otherwise not at all."""
    def instead(self: writer.Writer, job: Callable[[], None]) -> None:
        if run:
            job()
        with self._progress:
            self._submitted += 1
            self._done += 1

    real = writer.Writer.submit
    writer.Writer.submit = instead
    try:
        yield
    finally:
        writer.Writer.submit = real


@contextlib.contextmanager
def _no_step_records(static: bool = True) -> Iterator[None]:
    """A batch of steps reports only the model's static description (once per collection), or with
    ``static`` false nothing at all."""
    def static_only(self: runtime.LoadedModel, v, flags: int, *steps) -> None:
        if static and flags & BIT_TASK_TIME:
            self._report_static(v, flags)

    real = runtime.LoadedModel._report_steps
    runtime.LoadedModel._report_steps = static_only
    try:
        with _writer_jobs(run=False):
            yield
    finally:
        runtime.LoadedModel._report_steps = real


@contextlib.contextmanager
def _no_description() -> Iterator[None]:
    """Nothing of the model is described or reported: no step records and no static description (the
    compiler gathers no op descriptions; no task, tensor, PMU or memory-plan records)."""
    real = task_desc.OpDescs.add
    task_desc.OpDescs.add = lambda self, node, kernel, engine: None
    try:
        with _no_step_records(static=False):
            yield
    finally:
        task_desc.OpDescs.add = real


@contextlib.contextmanager
def _forked_child() -> Iterator[None]:
    """A child process forked now, waiting on a pipe, ended and reaped on exit."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: wait for the parent's word, then leave at once
        os.read(read_end, 1)
        os._exit(0)
    try:
        yield
    finally:
        os.write(write_end, b"x")
        os.waitpid(pid, 0)
        os.close(read_end)
        os.close(write_end)


#: mode -> (profiled, what is changed while it runs)
MODES: dict[str, tuple[bool, Callable[[], contextlib.AbstractContextManager]]] = {
    "off": (False, contextlib.nullcontext),
    "on (as is)": (True, contextlib.nullcontext),
    "on, files written inline": (True, lambda: _writer_jobs(run=True)),
    "on, no file written": (True, lambda: _writer_jobs(run=False)),
    "on, no file, no step records": (True, _no_step_records),
    "on, nothing of the model reported": (True, _no_description),
}
if hasattr(os, "fork"):  # POSIX
    MODES["off, a forked child alive"] = (False, _forked_child)


def measure(steps: int, rounds: int) -> dict[str, list[float]]:
    """Seconds of every mode's runs, the modes taking turns (one warm-up round)."""
    graph = resnet50_training()

    def side(profiled: bool, changed: Callable[[], contextlib.AbstractContextManager]) -> Callable[[], float]:
        def run() -> float:
            out = scratch_dir()
            t = time.perf_counter()
            with changed():
                run_session(graph, steps, ALL_LAYERS if profiled else None, out)
            elapsed = time.perf_counter() - t
            shutil.rmtree(out, ignore_errors=True)
            return elapsed
        return run

    return alternate_self_timed({name: side(*mode) for name, mode in MODES.items()}, runs=rounds)


def report(runs: dict[str, list[float]]) -> str:
    """One line per mode: median ms, median ratio to off, median extra ms (both per round)."""
    width = max(map(len, runs))
    lines = [f"{'mode':{width}s} {'median':>9s} {'/ off':>7s} {'extra':>9s}"]
    for name, ts in runs.items():
        c = Comparison(ts, runs["off"])
        lines.append(f"{name:{width}s} {c.a_median * 1e3:6.1f} ms {c.ratio:6.3f}x {c.difference * 1e3:+6.1f} ms")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="steps per run (the overhead row's: 200)")
    parser.add_argument("--rounds", type=int, default=41, help="rounds of every mode (default 41)")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.rounds < 1:
        parser.error("--steps and --rounds take a positive number")
    print(f"ResNet-50 training, world size 8, {args.steps} steps, {args.rounds} rounds\n")
    print(report(measure(args.steps, args.rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
