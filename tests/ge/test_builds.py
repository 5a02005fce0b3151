"""ge/builds.py: a model's builds (one per input shape set) and the step times drawn a batch ahead."""

from __future__ import annotations

import numpy as np

from geprof_nb import ge
from geprof_nb.ge.builds import FIRST_BATCH_STEPS, MAX_BATCH_STEPS
from geprof_nb.ge.host_launch import NODE_HOST_COSTS, host_timeline


def _model(dynamic: bool = False):
    """A model loaded, no step run yet."""
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    s = ge.Session()
    assert s.add_graph(1, ge.models.mlp(batch_size=4, in_features=16, hidden=(16,), dynamic=dynamic)) == ge.SUCCESS
    assert s.build_graph(1) == ge.SUCCESS
    return s, s.model(1)


def test_batches_double_up_to_the_most_steps():
    _, model = _model()
    build = model.builds.current
    rng = np.random.default_rng(0)
    sizes = []
    for _ in range(7):
        build.draw_batch(rng, None)
        sizes.append(len(build.batch.times.end))
    assert (FIRST_BATCH_STEPS, MAX_BATCH_STEPS) == (8, 256)
    assert sizes == [8, 16, 32, 64, 128, 256, 256]
    ge.GEFinalize()


def test_a_batch_is_used_up_step_by_step():
    _, model = _model()
    build = model.builds.current
    build.draw_batch(np.random.default_rng(0), None)
    n = len(build.batch.times.end)
    taken = [build.batch.take()[1] for _ in range(n)]
    assert taken == list(range(n)) and build.needs_batch(None)
    ge.GEFinalize()


def test_a_new_launch_kind_needs_new_times():
    _, model = _model(dynamic=True)
    build = model.builds.current
    v2 = host_timeline(build.table, NODE_HOST_COSTS["v2"])
    build.draw_batch(np.random.default_rng(0), v2)
    assert not build.needs_batch(v2)
    assert build.needs_batch(host_timeline(build.table, NODE_HOST_COSTS["v1"]))  # V1's launches take longer
    assert build.needs_batch(None)
    ge.GEFinalize()


def test_one_build_per_input_shape_set():
    s, model = _model(dynamic=True)
    first = model.builds.current
    for batch in (4, 8, 8, 4):
        assert s.run_graph(1, [np.zeros((batch, 16), np.float16), np.zeros((batch, 10), np.float16)]) == ge.SUCCESS
    assert len(model.builds) == 2 and model.builds.current is first  # batch 4 is the default shape's build
    assert sorted(b.compiled.graph.nodes[0].outputs[0].shape[0] for b in model.builds) == [4, 8]
    ge.GEFinalize()
