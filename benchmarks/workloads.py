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
                executor: str | None = None, inputs: Callable[[int], Sequence] | None = None, *,
                clock: str = "virtual", session: dict[str, str] | None = None,
                before_step: Callable[[int], None] | None = None) -> Path | None:
    """GEInitialize, one session running ``graph`` for ``steps`` steps, GEFinalize.

    ``options`` are profilingOptions (``None``: profiling off); ``session``: the Session's options
    (``ge.exec.rankSize``, ``geprof.faults``); ``before_step(k)`` runs in the loop before step ``k``
    (0-based: the user's host work between ``run_graph`` calls).  Returns the run directory (a
    cluster's root, ``CLUSTER_*``, when the session runs several ranks).
    """
    opts = {"geprof.clock": clock}
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
        sess = ge.Session(options=session or {})
        sess.add_graph(1, graph)
        for k in range(steps):
            if before_step is not None:
                before_step(k)
            if sess.run_graph(1, inputs(k) if inputs else None) != ge.SUCCESS:
                raise RuntimeError(f"run_graph failed: {ge.GEGetErrorMsg()}")
    finally:
        ge.GEFinalize()
    if output is None:
        return None
    runs = sorted(output.glob("CLUSTER_*")) or sorted(output.glob("PROF_*"))
    return runs[-1] if runs else None


def task_records(run_dir: Path) -> int:
    """Device task records (HWTS log entries) a run directory holds."""
    info = json.loads((run_dir / rawdata.INFO_FILE).read_text())
    return int(sum(v for k, v in info["records"].items() if k.split("@")[0] == "hwts"))


def disk_bytes(path: Path) -> int:
    """Bytes of every file under ``path``, a file of several hard links (a cluster's replicas sharing a
    stage's static descriptions) counted once, as ``du`` does."""
    stats = (p.stat() for p in path.rglob("*") if p.is_file())
    return sum({(st.st_dev, st.st_ino): st.st_size for st in stats}.values())


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


#: Issue 27's scale: llama2-70b at TP8 PP8 DP16 (1,024 ranks), 16 micro-batches, 4096 tokens.
LLM_CLUSTER = {"preset": "llama2-70b", "tp": 8, "pp": 8, "dp": 16, "micro_batches": 16, "layers": 80}
#: Its --quick size (seconds, for CI): 4 layers at TP2 PP2 DP2, 4 micro-batches: 8 ranks.
LLM_CLUSTER_QUICK = dict(LLM_CLUSTER, tp=2, pp=2, dp=2, micro_batches=4, layers=4)
#: The layers of the LLM cluster runs: the step trace, the task log and HCCL (the cross-rank tables' inputs).
LLM_LAYERS = {"training_trace": "on", "task_trace": "on", "hccl": "on"}
_llm_runs: dict[bool, Path] = {}


def llm_cluster_size(quick: bool) -> dict:
    """The model and split of the LLM cluster benchmarks."""
    return LLM_CLUSTER_QUICK if quick else LLM_CLUSTER


def llm_cluster_step(quick: bool, output: Path) -> Path:
    """One profiled training step of :func:`llm_cluster_size` on every rank, GEInitialize .. GEFinalize, under
    ``output``; returns the cluster root (``rank_<r>/PROF_*`` each)."""
    size = llm_cluster_size(quick)
    parallel = ge.Parallel(tp=size["tp"], pp=size["pp"], dp=size["dp"], micro_batches=size["micro_batches"])
    graph = ge.models.llm(size["preset"], seq_len=4096, parallel=parallel, layers=size["layers"])
    ge.GEInitialize({"ge.exec.profilingMode": "1", "geprof.clock": "virtual", "geprof.device": "Ascend910B",
                     "ge.exec.profilingOptions": json.dumps(dict(LLM_LAYERS, output=str(output)))})
    try:
        sess = ge.Session(options={"ge.exec.rankSize": str(parallel.world_size)})
        sess.add_graph(1, graph)
        if sess.run_graph(1) != ge.SUCCESS:
            raise RuntimeError(f"run_graph failed: {ge.GEGetErrorMsg()}")
    finally:
        ge.GEFinalize()
    return next(output.glob("CLUSTER_*"))


def llm_cluster_run(quick: bool) -> Path:
    """The cluster root of one :func:`llm_cluster_step`, made once per process (the cross-rank tables read it)."""
    if quick not in _llm_runs:
        _llm_runs[quick] = llm_cluster_step(quick, scratch_dir("geprof_llm_"))
    return _llm_runs[quick]


def keep_llm_cluster_run(quick: bool, root: Path) -> None:
    """Keep ``root`` (a :func:`llm_cluster_step` that a benchmark made anyway) as this process's run."""
    _llm_runs.setdefault(quick, root)
