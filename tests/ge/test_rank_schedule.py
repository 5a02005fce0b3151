"""The cluster step on hand-made stage programs: a collective ends together per group, a send meets its
receive, and passes that wait for each other in a cycle are reported."""

from __future__ import annotations

import numpy as np
import pytest

from geprof_nb import ge
from geprof_nb.ge.compiler import CompiledModel, hccl_stream_keys
from geprof_nb.ge.device import PRESETS, CostModel
from geprof_nb.ge.rank_schedule import ClusterStep, Collective, PointToPoint, ScheduleDeadlock, StageProgram
from geprof_nb.prof.rawdata import RtTaskType

COST = CostModel(PRESETS["Ascend910B"])


def _table(graph: ge.Graph):
    keys = hccl_stream_keys(graph)
    return CompiledModel(graph, COST, 0, list(range(1, 1 + len(keys)))).task_table(None)


def _all_reduce_graph() -> ge.Graph:
    g = ge.Graph("ar")
    x = g.op("Relu", g.data("x", (64, 64)))
    y = g.op("Relu", g.op("HcomAllReduce", x, group="tp", rank_size=2))
    g.output([y])
    return g


def test_a_collective_ends_together_within_each_group_at_its_last_arrival_plus_the_transfer():
    t = _table(_all_reduce_graph())
    (ar,) = np.flatnonzero(t.rt_type == RtTaskType.HCCL)
    transfer = np.asarray([1000, 3000])
    prog = StageProgram(t, 4, np.ones(4), {int(ar): Collective(np.asarray([0, 0, 1, 1]), transfer)})
    offsets = np.asarray([0, 700, 20_000, 0])
    (times,) = ClusterStep([prog]).step([offsets], np.random.default_rng(0))
    end = times.start[:, ar] + times.dur[:, ar]
    assert end[0] == end[1] and end[2] == end[3]
    arrive = times.start[:, ar]  # each row's arrival: its stream was free
    # the last arrival of each group plus the group's transfer (times its one jitter draw, >= 1 and <= 1.5)
    assert 1000 <= end[0] - arrive[:2].max() <= 1500 and 3000 <= end[2] - arrive[2:].max() <= 4500
    assert abs(arrive[1] - arrive[0] - 700) < 100  # the late row arrives its offset later (and some jitter)


def _p2p_graph(first: str, tag_in: int, tag_out: int) -> ge.Graph:
    """A stage that receives (tag_in) and sends (tag_out); ``first`` says which it launches first."""
    g = ge.Graph(first)
    attrs = dict(group="pp", rank_size=2, direction="forward")
    if first == "receive":
        x = g.op("HcomReceive", [], shape=[16, 16], dtype="float16", src_rank=1, sr_tag=tag_in, **attrs)
        g.op("HcomSend", g.op("Relu", x), dest_rank=1, sr_tag=tag_out, **attrs)
    else:
        g.op("HcomSend", g.op("Relu", g.data("x", (16, 16))), dest_rank=1, sr_tag=tag_out, **attrs)
        x = g.op("HcomReceive", [], shape=[16, 16], dtype="float16", src_rank=1, sr_tag=tag_in, **attrs)
    g.output([x], control_inputs=[n for n in g.nodes if n.type == "HcomSend"])
    return g


def _p2p(a_first: str, b_first: str) -> tuple[list[StageProgram], list[dict[str, int]]]:
    """Two one-rank stages: stage 0 receives tag 1 and sends tag 2, stage 1 the other way round; each
    stage's send meets the other's receive.  Also the send and receive task of each stage."""
    tables, where = [], []
    for first, tags in ((a_first, (1, 2)), (b_first, (2, 1))):
        g = _p2p_graph(first, *tags)
        t = _table(g)
        tables.append(t)
        where.append({g.nodes[int(t.node[i])].type: int(i) for i in np.flatnonzero(t.rt_type == RtTaskType.HCCL)})
    programs = []
    for s, t in enumerate(tables):
        other = where[1 - s]
        sync = {where[s]["HcomSend"]: PointToPoint((1 - s, other["HcomReceive"]), np.asarray([500]), True),
                where[s]["HcomReceive"]: PointToPoint((1 - s, other["HcomSend"]), np.asarray([500]), False)}
        programs.append(StageProgram(t, 1, np.ones(1), sync))
    return programs, where


def test_a_send_and_its_receive_end_together():
    programs, where = _p2p("send", "receive")  # stage 0 sends first; stage 1 receives, then sends back
    a, b = ClusterStep(programs).step([np.zeros(1, np.int64)] * 2, np.random.default_rng(1))
    end0, end1 = (x.start[0] + x.dur[0] for x in (a, b))
    assert end0[where[0]["HcomSend"]] == end1[where[1]["HcomReceive"]]
    assert end1[where[1]["HcomSend"]] == end0[where[0]["HcomReceive"]]
    assert end0[where[0]["HcomReceive"]] > end0[where[0]["HcomSend"]]  # the reply comes after the message


def test_passes_waiting_for_each_other_in_a_cycle_are_reported():
    programs, _ = _p2p("receive", "receive")  # each stage waits to receive before it sends
    with pytest.raises(ScheduleDeadlock, match=r"wait for each other in a cycle: stage 0 task \d+ \(receive\) "
                                               r"waits for stage 1 task \d+; stage 1 task \d+ \(receive\)"):
        ClusterStep(programs).step([np.zeros(1, np.int64)] * 2, np.random.default_rng(0))
