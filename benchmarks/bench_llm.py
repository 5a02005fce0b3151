"""LLM steps: llama2-7b built, compiled and stepped on one rank, and parallel steps on simulated clusters
(tiny-llama and llama2-7b at TP2 PP2 DP2, every rank profiled to its own run directory)."""

from __future__ import annotations

import json
import shutil
import statistics
import time
from collections.abc import Callable

from harness import Result, times
from workloads import scratch_dir

from geprof_nb import ge

LAYERS = {"training_trace": "on", "task_trace": "on", "hccl": "on"}
#: llama2-7b with AdamW needs 106.5 GiB on one device (12 bytes of weights and optimizer state per
#: parameter, the activations of a 4096-token step): more than a 910B's 64 GiB, as on the real card.
#: The one-rank row runs on a what-if 910B with 160 GiB.
BIG_DEVICE = "Ascend910B:memory_bytes=171798691840"


def _profiled(device: str = "Ascend910B", ranks: int = 1) -> tuple[dict[str, str], dict[str, str], object]:
    out = scratch_dir()
    ge_options = {"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": json.dumps(dict(LAYERS, output=str(out))),
                  "geprof.clock": "virtual", "geprof.device": device}
    return ge_options, ({"ge.exec.rankSize": str(ranks)} if ranks > 1 else {}), out


def llama2_7b_one_rank(quick: bool) -> Result:
    """Wall time of building llama2-7b (4096 tokens), loading it (compile, memory plan) and running one
    profiled training step on one rank, GEInitialize to GEFinalize."""
    split: dict[str, float] = {}

    def run() -> Callable[[], None]:
        t0 = time.perf_counter()
        graph = ge.models.llm("llama2-7b", seq_len=4096)
        split["build_s"] = time.perf_counter() - t0
        options, session, out = _profiled(BIG_DEVICE)
        ge.GEInitialize(options)
        s = ge.Session(options=session)
        s.add_graph(1, graph)
        assert s.run_graph(1) == ge.SUCCESS, ge.GEGetErrorMsg()
        split["tasks"] = len(s.model(1).table)
        ge.GEFinalize()
        return lambda: shutil.rmtree(out, ignore_errors=True)

    t = times(run)
    median = statistics.median(t)
    return Result("llama2-7b, 4096 tokens: build + load + one training step, one rank", median, "s", "<= 5 s",
                  median <= 5.0, {"runs_s": t, **split})


def _parallel(name: str, preset: str, parallel: ge.Parallel, steps: int, seq_len: int, target: float) -> Result:
    def run() -> Callable[[], None]:
        graph = ge.models.llm(preset, seq_len=seq_len, parallel=parallel)
        options, session, out = _profiled(ranks=parallel.world_size)
        ge.GEInitialize(options)
        s = ge.Session(options=session)
        s.add_graph(1, graph)
        for _ in range(steps):
            assert s.run_graph(1) == ge.SUCCESS, ge.GEGetErrorMsg()
        ge.GEFinalize()
        return lambda: shutil.rmtree(out, ignore_errors=True)

    t = times(run)
    median = statistics.median(t)
    return Result(name, median, "s", f"<= {target:g} s", median <= target, {"runs_s": t})


def tiny_llama_hybrid(quick: bool) -> Result:
    """tiny-llama (512 tokens) at TP2 PP2 DP2, 4 micro-batches, 10 profiled steps on 8 ranks, build included."""
    return _parallel("tiny-llama TP2 PP2 DP2, 4 micro-batches x10 steps, 8 ranks", "tiny-llama",
                     ge.Parallel(tp=2, pp=2, dp=2, micro_batches=4), 10, 512, 3.0)


def llama2_7b_hybrid(quick: bool) -> Result:
    """llama2-7b (4096 tokens) at TP2 PP2 DP2, 4 micro-batches, 10 profiled steps on 8 ranks (2 with
    --quick), build included."""
    steps = 2 if quick else 10
    return _parallel(f"llama2-7b TP2 PP2 DP2, 4 micro-batches x{steps} steps, 8 ranks", "llama2-7b",
                     ge.Parallel(tp=2, pp=2, dp=2, micro_batches=4), steps, 4096, 10.0)


BENCHMARKS = [llama2_7b_one_rank, tiny_llama_hybrid, llama2_7b_hybrid]
