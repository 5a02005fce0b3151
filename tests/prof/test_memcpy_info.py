"""The runtime's MemcpyInfo: one ``memcpy_info`` record per MEMCPY_ASYNC task of a loaded model and
collection (the input copies opening each step), with the bytes copied and the direction."""

from __future__ import annotations

import numpy as np
import pytest

from geprof_nb.prof import rawdata
from geprof_nb.prof.rawdata import MEMCPY_DIRECTION_NAMES, MemcpyDirection, RtTaskType
from helpers.geprof_testing import build_tiny_graph, run_profiled_session, small_resnet

# Reference §4.6, verbatim: the direction texts in the order of their values.
DIRECTIONS = ("host to host, host to device, device to host, device to device, managed memory, "
              "addr device to device, host to device ex, device to host ex").split(", ")


def test_directions_follow_msprofs_order():
    assert [int(d) for d in MemcpyDirection] == list(range(len(DIRECTIONS)))
    assert [MEMCPY_DIRECTION_NAMES[d] for d in MemcpyDirection] == DIRECTIONS
    assert not rawdata.RECORD_KINDS["memcpy_info"].aging  # a static description: never aged out
    assert rawdata.RECORD_KINDS["memcpy_info"].side == "device"


@pytest.mark.parametrize("task_trace", ["on", "l0"])
def test_one_record_per_input_copy_with_the_data_nodes_bytes(tmp_path, task_trace):
    graph, _ = build_tiny_graph()
    run = run_profiled_session(tmp_path, graph, steps=3, task_trace=task_trace)
    memcpy = run.profile.run.load("memcpy_info")
    copies = np.flatnonzero(run.table.rt_type == RtTaskType.MEMCPY_ASYNC)
    assert len(copies) == 2  # x and labels
    assert len(memcpy) == len(copies)  # once per load and collection, not per step
    assert run.profile.info["records"]["memcpy_info"] == len(copies)
    track = run.profile.run.load("task_track")
    assert memcpy["connection_id"].tolist() == track["connection_id"][
        track["task_type"] == RtTaskType.MEMCPY_ASYNC].tolist()
    data = {n.name: n.outputs[0].nbytes for n in run.graph.nodes if n.type == "Data"}
    assert data == {"x": 256, "labels": 64}  # float16 [8, 16] and [8, 4]
    assert memcpy["size"].tolist() == [256, 64]
    assert memcpy["direction"].tolist() == [MemcpyDirection.HOST_TO_DEVICE] * 2


def test_sizes_are_each_input_copys_data_node(tmp_path):
    run = run_profiled_session(tmp_path, small_resnet(world_size=1), steps=1)
    memcpy = run.profile.run.load("memcpy_info")
    copies = np.flatnonzero(run.table.rt_type == RtTaskType.MEMCPY_ASYNC)
    nodes = run.compiled.graph.nodes
    assert len(memcpy) == len(copies) == len(run.compiled.input_nodes) >= 2
    assert memcpy["size"].tolist() == [nodes[run.table.node[i]].outputs[0].nbytes for i in copies]
    assert len(set(memcpy["size"].tolist())) > 1  # images and labels differ


def test_no_records_without_task_trace(tmp_path):
    graph, _ = build_tiny_graph()
    run = run_profiled_session(tmp_path, graph, steps=2, task_trace="off")
    assert len(run.profile.run.load("step_trace"))  # the run recorded something
    assert len(run.profile.run.load("memcpy_info")) == 0
    assert "memcpy_info" not in run.profile.info["records"]
