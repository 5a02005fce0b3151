"""The workloads the benchmarks share: profiled runs of the model zoo, written to disk.

Everything runs on the virtual clock, so a run of a given size is the same
every time; runs that several benchmarks read (the 1,000,000-task run for the
analysis and the exports) are made once per process and removed at exit.
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from geprof_nb import ge
from geprof_nb.prof import rawdata

#: Every layer of the issue's overhead target: task_trace l1, training_trace, a PMU group, hccl, aicpu, memory.
ALL_LAYERS = {"training_trace": "on", "task_trace": "l1", "aic_metrics": "PipeUtilization", "hccl": "on",
              "aicpu": "on", "task_memory": "on"}

_scratch: list[Path] = []


def scratch_dir(prefix: str = "geprof_bench_") -> Path:
    """A temporary directory removed when the process exits."""
    d = Path(tempfile.mkdtemp(prefix=prefix))
    _scratch.append(d)
    return d


@atexit.register
def _remove_scratch() -> None:
    for d in _scratch:
        shutil.rmtree(d, ignore_errors=True)


def resnet50_training(world_size: int = 8) -> ge.Graph:
    """ResNet-50 training graph (batch 32, static shapes, gradient AllReduce over ``world_size``)."""
    return ge.models.resnet50(batch_size=32, training=True, world_size=world_size)


def run_session(graph: ge.Graph, steps: int, options: dict | None, output: Path | None,
                executor: str | None = None, inputs: Callable[[int], Sequence] | None = None) -> Path | None:
    """GEInitialize, one session running ``graph`` for ``steps`` steps, GEFinalize.

    ``options`` are profilingOptions (``None``: profiling off); returns the run directory.
    """
    opts = {"geprof.clock": "virtual"}
    if executor:
        opts["geprof.executor"] = executor
    if options is not None:
        assert output is not None
        opts["ge.exec.profilingMode"] = "1"
        opts["ge.exec.profilingOptions"] = json.dumps(dict(options, output=str(output)))
    status = ge.GEInitialize(opts)
    if status != ge.SUCCESS:
        raise RuntimeError(f"GEInitialize failed: {ge.GEGetErrorMsg()}")
    try:
        sess = ge.Session()
        sess.add_graph(1, graph)
        for k in range(steps):
            if sess.run_graph(1, inputs(k) if inputs else None) != ge.SUCCESS:
                raise RuntimeError(f"run_graph failed: {ge.GEGetErrorMsg()}")
    finally:
        ge.GEFinalize()
    if output is None:
        return None
    runs = sorted(output.glob("PROF_*"))
    return runs[-1] if runs else None


def task_records(run_dir: Path) -> int:
    """Device task records (HWTS log entries) a run directory holds."""
    info = json.loads((run_dir / rawdata.INFO_FILE).read_text())
    return int(sum(v for k, v in info["records"].items() if k.split("@")[0] == "hwts"))


def disk_bytes(path: Path) -> int:
    """Bytes of every file under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


_runs: dict[tuple, Path] = {}


def resnet_run(tasks: int, options: dict | None = None) -> Path:
    """A run directory of ResNet-50 training steps holding at least ``tasks`` device task records
    (all layers on unless ``options``), made once per process."""
    key = (tasks, json.dumps(options, sort_keys=True))
    if key not in _runs:
        graph = resnet50_training()
        per_step = _tasks_per_step(graph)
        steps = -(-tasks // per_step)
        _runs[key] = run_session(graph, steps, options or ALL_LAYERS, scratch_dir("geprof_run_"))
    return _runs[key]


def _tasks_per_step(graph: ge.Graph) -> int:
    out = scratch_dir()
    run = run_session(graph, 2, ALL_LAYERS, out)
    n = task_records(run) // 2
    shutil.rmtree(out, ignore_errors=True)
    return n


def dynamic_inputs(batches: Sequence[int]) -> Callable[[int], list[np.ndarray]]:
    """Inputs of a dynamic-batch MLP (``x``, ``labels``) cycling through ``batches``."""
    def make(k: int) -> list[np.ndarray]:
        b = batches[k % len(batches)]
        return [np.zeros((b, 784), np.float16), np.zeros((b, 10), np.float16)]

    return make
