"""Simulated LLM training runs (ge.models.llm, ge.Parallel) for the module, MFU and tensor-parallel tests.

In the tests/helpers package, imported as helpers.llm_runs.  ``run_llm`` trains ``steps`` steps of a preset
on the virtual clock with task_trace, training_trace and hccl on, and loads what it wrote: a Profile for one
rank, a ClusterProfile (the ``CLUSTER_*`` root) for a parallel job.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import geprof_nb
from geprof_nb import ge
from geprof_nb.prof.clock import clock


def run_llm(output: Path, preset: str = "tiny-llama", parallel: Any = None, steps: int = 2, **model: Any):
    """Train ``steps`` steps of ``ge.models.llm(preset, parallel=parallel, **model)`` and load the run."""
    opts = {"output": str(output), "task_trace": "on", "training_trace": "on", "hccl": "on"}
    mode = clock.mode
    assert ge.GEInitialize({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": json.dumps(opts),
                            "geprof.clock": "virtual"}) == ge.SUCCESS, ge.GEGetErrorMsg()
    graph = ge.models.llm(preset, parallel=parallel, **model)
    ranks = parallel.tp * parallel.pp * parallel.dp if parallel is not None else 1
    try:
        session = ge.Session(options={"ge.exec.rankSize": str(ranks)} if ranks > 1 else {})
        assert session.add_graph(1, graph) == ge.SUCCESS, ge.GEGetErrorMsg()
        for _ in range(steps):
            assert session.run_graph(1) == ge.SUCCESS, ge.GEGetErrorMsg()
    finally:
        ge.GEFinalize()
        clock.set_mode(mode)
    (root,) = sorted(Path(output).glob("CLUSTER_*" if ranks > 1 else "PROF_*"))
    return geprof_nb.load(root)
