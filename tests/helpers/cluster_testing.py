"""Simulated clusters for the cross-rank analysis tests (tests/analysis, tests/interop, tests/nb).

In the tests/helpers package beside geprof_testing.py, imported as helpers.cluster_testing.

``simulate_cluster`` runs a data-parallel ResNet-50 on ``ranks`` simulated ranks
(``ge.exec.rankSize``) with injected faults (``geprof.faults``), on the virtual clock, and
loads the cluster root (``<output>/CLUSTER_*``).  The model is ResNet-50 at batch 32 and
224x224: its kernels are long enough that a slow card's factor shows almost whole in
Computing (every kernel also has a fixed launch cost the factor does not scale).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import geprof_nb
from geprof_nb import ge
from geprof_nb.collect import replayer
from geprof_nb.ge import session_log
from geprof_nb.ge.session import new_session_log
from geprof_nb.prof.clock import clock

#: The faults of the main test cluster: rank 3's kernels take 30% longer, the HCCS link from
#: rank 5 to rank 6 runs at half its bandwidth.
SLOW_RANK, SLOW_FACTOR = 3, 1.3
SLOW_LINK, LINK_FACTOR = (5, 6), 0.5
FAULTS = {"slow_ranks": {str(SLOW_RANK): SLOW_FACTOR}, "slow_links": {f"{SLOW_LINK[0]}-{SLOW_LINK[1]}": LINK_FACTOR}}


def resnet(world_size: int, batch_size: int = 32, image_size: int = 224):
    return ge.models.resnet50(batch_size=batch_size, image_size=image_size, training=True, world_size=world_size)


def simulate_cluster(output: Path, faults: dict[str, Any] | None = None, ranks: int = 8, steps: int = 3,
                     graph: Any = None, ge_options: dict[str, str] | None = None, **profiling: Any):
    """Run ``steps`` steps on ``ranks`` simulated ranks with ``faults``; returns the loaded ClusterProfile (its
    ``replay`` re-runs the job)."""
    prof = {"output": str(output), "training_trace": "on", "hccl": "on"}
    prof.update(profiling)
    options = {"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": json.dumps(prof), "geprof.clock": "virtual"}
    mode = clock.mode  # GEFinalize keeps the virtual clock; a later %%geprof must find the clock it had
    with session_log.recording(new_session_log()) as log:
        assert ge.GEInitialize(options) == ge.SUCCESS, ge.GEGetErrorMsg()
        try:
            session = {"ge.exec.rankSize": str(ranks), **(ge_options or {})}
            if faults:
                session["geprof.faults"] = json.dumps(faults)
            sess = ge.Session(options=session)
            assert sess.add_graph(1, graph if graph is not None else resnet(ranks)) == ge.SUCCESS, ge.GEGetErrorMsg()
            for _ in range(steps):
                assert sess.run_graph(1) == ge.SUCCESS, ge.GEGetErrorMsg()
        finally:
            ge.GEFinalize()
            clock.set_mode(mode)
    (root,) = sorted(Path(output).glob("CLUSTER_*"))
    cluster = geprof_nb.load(root)
    cluster.replay = replayer(log, None)  # the job again, as the GE calls above made it
    return cluster
