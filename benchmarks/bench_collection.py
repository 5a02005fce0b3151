"""Collection end to end: static-graph throughput, the dynamic-shape node-by-node path, and the
raw data's size on disk (targets 2, 3 and 6)."""

from __future__ import annotations

import shutil
import statistics
from collections.abc import Callable

import numpy as np
from harness import Result, times
from workloads import ALL_LAYERS, disk_bytes, resnet50_training, run_session, scratch_dir, task_records

from geprof_nb import ge
from geprof_nb.prof import rawdata

#: The dynamic path: ge_api l1 turns on GE's host layer (InferShape, Tiling, AllocMem, launch per node).
DYNAMIC_LAYERS = {"task_trace": "l1", "training_trace": "on", "ge_api": "l1"}


def static_throughput(quick: bool) -> Result:
    """Device tasks per second, end to end, for ResNet-50 training with every layer on (target: >= 2,000,000/s).

    Timed from GEInitialize to GEFinalize: compile and load, simulate the steps,
    report every layer, flush the run directory to disk.
    """
    steps = 1000
    graph = resnet50_training()
    found: dict[str, int] = {}

    def run() -> Callable[[], None]:
        out = scratch_dir()
        run_dir = run_session(graph, steps, ALL_LAYERS, out)
        found["tasks"] = task_records(run_dir)
        return lambda: shutil.rmtree(out, ignore_errors=True)

    t = times(run)
    rate = found["tasks"] / statistics.median(t)
    return Result(f"static collection, ResNet-50 x{steps} steps, all layers", rate, "tasks/s", ">= 2,000,000",
                  rate >= 2_000_000, {"tasks": found["tasks"], "steps": steps, "median_s": statistics.median(t),
                                      "runs_s": t})


def dynamic_path(quick: bool) -> Result:
    """Nodes launched per second by the node-by-node executor of a dynamic-shape ResNet-50 with GE's
    host layer on (target: >= 200,000/s).  Timed from GEInitialize to GEFinalize (builds included)."""
    steps = 100
    graph = ge.models.resnet50(batch_size=32, training=True, world_size=8, dynamic=True)
    found: dict[str, int] = {}

    def run() -> Callable[[], None]:
        out = scratch_dir()
        run_dir = run_session(graph, steps, DYNAMIC_LAYERS, out)
        found["tasks"] = task_records(run_dir)
        found["nodes"] = _launched_nodes(run_dir)
        return lambda: shutil.rmtree(out, ignore_errors=True)

    t = times(run)
    rate = found["nodes"] / statistics.median(t)
    return Result(f"dynamic-shape path, ResNet-50 x{steps} steps, host layer on", rate, "nodes/s", ">= 200,000",
                  rate >= 200_000, {"nodes": found["nodes"], "tasks": found["tasks"], "steps": steps,
                                    "median_s": statistics.median(t), "runs_s": t})


def _launched_nodes(run_dir) -> int:
    """Nodes the host launched: one rtKernelLaunch (or copy) host event per node and step."""
    from geprof_nb.analysis.rundir import RunDir
    from geprof_nb.prof.host_profiler import ProfilingEvent

    events = RunDir(run_dir).load("host_event")
    launch = np.isin(events["event"], [int(ProfilingEvent.kRtKernelLaunch), int(ProfilingEvent.kCopyH2D)])
    return int((launch & (events["phase"] == rawdata.HOST_EVENT_START)).sum())


def raw_bytes_per_task(quick: bool) -> Result:
    """Bytes on disk per device task record of a run with every layer on (target: <= 48).

    Everything in the run directory counts: task logs, HCCL sub-tasks, step trace,
    the static description (names, shapes, PMU counters, memory plan) and the hash
    dictionary; a long run shows what a task really costs.
    """
    steps = 1000
    out = scratch_dir()
    run_dir = run_session(resnet50_training(), steps, ALL_LAYERS, out)
    tasks = task_records(run_dir)
    size = disk_bytes(run_dir)
    per = size / tasks
    shutil.rmtree(out, ignore_errors=True)
    return Result(f"raw data on disk, ResNet-50 x{steps} steps, all layers", per, "bytes/task", "<= 48", per <= 48,
                  {"bytes": size, "tasks": tasks, "steps": steps})


BENCHMARKS = [static_throughput, dynamic_path, raw_bytes_per_task]
