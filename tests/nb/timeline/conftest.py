"""Runs the timeline tests read (session-scoped: they only read them).

* ``rich_run``: a dynamic-shape MLP on 2 ranks (a gradient AllReduce), 3 steps, every layer the
  timeline draws on: step trace, tasks (l1, PipeUtilization), HCCL, host API levels and GE host
  events (``ge_api`` l1, ``runtime_api``), mstx ranges and markers, task memory.
* ``small_cluster``: ResNet-50 data parallel on 16 simulated ranks (two servers), 2 steps, rank 3's
  kernels 30% slower (``cluster_testing.FAULTS``).
"""

from __future__ import annotations

import json

import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.ge.runtime import MODEL_IDS
from helpers.cluster_testing import FAULTS, simulate_cluster

RICH_OPTIONS = {"training_trace": "on", "task_trace": "l1", "aic_metrics": "PipeUtilization", "hccl": "on",
                "ge_api": "l1", "runtime_api": "on", "msproftx": "on", "task_memory": "on"}
STEPS = 3


@pytest.fixture(scope="session")
def rich_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("timeline_rich")
    MODEL_IDS.restart()
    profiling = json.dumps(dict(RICH_OPTIONS, output=str(out)))
    options = {"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": profiling, "geprof.clock": "virtual"}
    assert ge.GEInitialize(options) == ge.SUCCESS, ge.GEGetErrorMsg()
    try:
        sess = ge.Session()
        graph = ge.models.mlp(batch_size=8, in_features=16, hidden=(16,), dynamic=True, world_size=2)
        assert sess.add_graph(1, graph) == ge.SUCCESS
        for step in range(STEPS):
            with ge.mstx.range(f"step {step}"):
                assert sess.run_graph(1) == ge.SUCCESS
            ge.mstx.mark("between steps")
    finally:
        ge.GEFinalize()
    return geprof_nb.load(out)


@pytest.fixture(scope="session")
def small_cluster(tmp_path_factory):
    return simulate_cluster(tmp_path_factory.mktemp("timeline_cluster"), FAULTS, ranks=16, steps=2)
