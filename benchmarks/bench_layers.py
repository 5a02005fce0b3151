"""What a profiling layer costs when it is off, and what all layers cost when on."""

from __future__ import annotations

import contextlib
import json
import tempfile

from harness import Result, compare

from geprof_nb import ge
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

    a, b, ratio = compare(ours, bare, runs=5)
    return Result("disabled profiling_scope / nullcontext", ratio, "x", "<= 1.5", ratio <= 1.5,
                  {"ours_ns_per_scope": a / n * 1e9, "nullcontext_ns": b / n * 1e9, "ratio": ratio})


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

    a, b, ratio = compare(ours, bare, runs=5)
    return Result("disabled AclProfilingReporter / nullcontext", ratio, "x", "<= 1.5", ratio <= 1.5,
                  {"ours_ns_per_call": a / n * 1e9, "nullcontext_ns": b / n * 1e9, "ratio": ratio})


def profiling_overhead(quick: bool) -> Result:
    """ResNet-50 training (static, world size 8), every layer on vs profiling off (target: <= 1.10x)."""
    steps = 50 if quick else 200
    graph = ge.models.resnet50(batch_size=32, training=True, world_size=8)
    options = {"output": "", "training_trace": "on", "task_trace": "l1", "aic_metrics": "PipeUtilization",
               "hccl": "on", "aicpu": "on", "task_memory": "on"}

    def run(profiled: bool) -> None:
        with tempfile.TemporaryDirectory() as out:
            opts = {"geprof.clock": "virtual"}
            if profiled:
                opts.update({"ge.exec.profilingMode": "1",
                             "ge.exec.profilingOptions": json.dumps(dict(options, output=out))})
            ge.GEInitialize(opts)
            sess = ge.Session()
            sess.add_graph(1, graph)
            for _ in range(steps):
                sess.run_graph(1)
            ge.GEFinalize()

    on, off, ratio = compare(lambda: run(True), lambda: run(False), runs=5)
    return Result(f"ResNet-50 x{steps} steps, all layers on / off", ratio, "x", "<= 1.10", ratio <= 1.10,
                  {"on_s": on, "off_s": off, "ratio": ratio, "steps": steps})


BENCHMARKS = [disabled_scope, disabled_acl_reporter, profiling_overhead]
