"""ge/host_launch.py: the host's work per node of a node-by-node launch, laid out in time."""

from __future__ import annotations

import numpy as np

from geprof_nb import ge
from geprof_nb.ge.host_launch import KERNEL_TYPES, NODE_HOST_COSTS, host_timeline
from geprof_nb.prof.rawdata import RtTaskType


def _table():
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    s = ge.Session()
    assert s.add_graph(1, ge.models.mlp(batch_size=4, in_features=16, hidden=(16,), dynamic=True)) == ge.SUCCESS
    assert s.run_graph(1) == ge.SUCCESS
    return s.model(1).table


def test_each_launch_costs_its_phases_back_to_back():
    table = _table()
    costs = NODE_HOST_COSTS["v2"]
    t = host_timeline(table, costs)
    rt = table.rt_type[t.tasks]
    kernel = np.isin(rt, KERNEL_TYPES)
    copies = rt == RtTaskType.MEMCPY_ASYNC
    assert kernel.sum() > 0 and copies.sum() > 0 and (kernel | copies).all()
    tiled = np.isin(rt, (RtTaskType.KERNEL_AICORE, RtTaskType.KERNEL_AIVEC, RtTaskType.KERNEL_MIX_AIC,
                         RtTaskType.KERNEL_MIX_AIV))
    per_kernel = costs.infer_shape + costs.alloc_mem + costs.launch_prepare + costs.kernel_launch
    expected = int(kernel.sum()) * per_kernel + int(tiled.sum()) * costs.tiling + int(copies.sum()) * costs.memcpy
    assert t.total == expected
    ends = t.phase_start + t.phase_dur
    assert (t.phase_start.ravel()[1:] == ends.ravel()[:-1]).all()  # one host thread: no gaps, no overlap
    assert (t.phase_dur[copies, :4] == 0).all() and (t.phase_dur[copies, 4] == costs.memcpy).all()
    assert t.earliest[t.tasks].tolist() == ends[:, -1].tolist()  # a task can start once its node is launched
    assert (np.diff(t.earliest) >= 0).all()
    ge.GEFinalize()


def test_v1_is_heavier_per_node_than_rt2():
    table = _table()
    assert host_timeline(table, NODE_HOST_COSTS["v1"]).total > host_timeline(table, NODE_HOST_COSTS["v2"]).total
    ge.GEFinalize()
