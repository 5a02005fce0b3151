"""ge.Parallel's rank layout and groups (Megatron-core's numbering), and the pipeline schedules."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from geprof_nb import ge
from geprof_nb.ge.parallel import RankLayout
from geprof_nb.ge.pipeline import BACKWARD, FORWARD, schedule, transfers


def _groups(layout: RankLayout, kind: str) -> set[tuple[int, ...]]:
    return {layout.members(kind, r) for r in range(layout.parallel.world_size)}


def test_ranks_are_numbered_tensor_first_then_data_then_pipeline():
    layout = RankLayout(ge.Parallel(tp=2, pp=2, dp=2))
    assert layout.parallel.world_size == 8
    assert _groups(layout, "tp") == {(0, 1), (2, 3), (4, 5), (6, 7)}
    assert _groups(layout, "dp") == {(0, 2), (1, 3), (4, 6), (5, 7)}
    assert _groups(layout, "pp") == {(0, 4), (1, 5), (2, 6), (3, 7)}
    c = layout.coords(6)
    assert (c.stage, c.dp, c.tp, c.local) == (1, 1, 0, 2)
    assert layout.rank(1, 2) == 6


def test_expert_groups_come_from_the_ranks_of_a_stage():
    layout = RankLayout(ge.Parallel(dp=4, ep=2, pp=2))
    assert _groups(layout, "exp") == {(0, 1), (2, 3), (4, 5), (6, 7)}
    # the ranks that hold the same experts: dp x tp / ep of a stage
    assert _groups(layout, "dp_modulo_exp") == {(0, 2), (1, 3), (4, 6), (5, 7)}
    wide = RankLayout(ge.Parallel(tp=2, dp=2, ep=4, sp=True))
    assert _groups(wide, "exp") == {(0, 1, 2, 3)} and _groups(wide, "dp_modulo_exp") == {(0,), (1,), (2,), (3,)}


def test_every_group_has_one_communicator_name_shared_by_its_members():
    layout = RankLayout(ge.Parallel(tp=2, pp=2, dp=2))
    ids = {}
    for kind in ("tp", "dp", "pp"):
        for r in range(8):
            g = layout.group(kind, r)
            assert g.rank_of(r) == g.ranks.index(r) and r in g.ranks
            ids.setdefault(g.id, set()).add((kind, g.ranks))
    assert all(len(v) == 1 for v in ids.values())  # one name, one group
    assert len(ids) == 4 + 4 + 4
    assert all(re.fullmatch(r"10\.0\.0\.1%enp189s0f0_60000_\d_\d{16}", i) for i in ids)


def test_parallel_group_info_is_what_torch_npu_records():
    info = RankLayout(ge.Parallel(tp=2, pp=2, dp=2)).parallel_group_info(5)
    by_name = {v["group_name"]: (v["group_rank"], v["global_ranks"]) for v in info.values()}
    assert by_name == {"hccl_world_group": (5, list(range(8))), "tp": (1, [4, 5]), "pp": (1, [1, 5]),
                       "dp": (0, [5, 7])}


@pytest.mark.parametrize("pp, m", [(2, 4), (4, 8), (4, 2), (3, 5)])
def test_1f1b_warms_up_with_the_stages_below_then_alternates(pp, m):
    for s, actions in enumerate(schedule(pp, m)):
        warmup = min(pp - s - 1, m)
        assert [a.kind for a in actions[:warmup]] == [FORWARD] * warmup
        steady = actions[warmup:warmup + 2 * (m - warmup)]
        assert [a.kind for a in steady] == [FORWARD, BACKWARD] * (m - warmup)
        assert Counter((a.kind, a.micro_batch) for a in actions) == {(k, j): 1 for k in (FORWARD, BACKWARD)
                                                                     for j in range(m)}
        assert [a.micro_batch for a in actions if a.kind == BACKWARD] == list(range(m))


def test_interleaved_schedule_is_megatrons():
    pp, m, v = 4, 8, 2
    stages = schedule(pp, m, v)
    for s, actions in enumerate(stages):
        warmup = (pp - s - 1) * 2 + (v - 1) * pp
        assert [a.kind for a in actions[:warmup]] == [FORWARD] * warmup
        assert actions[warmup].kind == FORWARD and actions[warmup + 1].kind == BACKWARD
        assert Counter((a.kind, a.micro_batch, a.chunk) for a in actions) == {
            (k, j, c): 1 for k in (FORWARD, BACKWARD) for j in range(m) for c in range(v)}
    # micro-batches go through the chunks in groups of pp: stage 0 runs mb 0..3 on chunk 0, then on chunk 1
    assert [(a.micro_batch, a.chunk) for a in stages[0][:8]] == [(j, 0) for j in range(4)] + [(j, 1) for j in range(4)]
    # as many micro-batches as stages: every forward is a warm-up forward
    assert [a.kind for a in schedule(4, 4, 2)[3][:8]] == [FORWARD] * 8


@pytest.mark.parametrize("pp, m, v", [(2, 4, 1), (4, 8, 2), (3, 3, 1)])
def test_every_send_has_its_receive(pp, m, v):
    sends, receives = Counter(), Counter()
    for s, actions in enumerate(schedule(pp, m, v)):
        for a in actions:
            recv, send = transfers(pp, v, m, s, a)
            if recv:
                receives[(recv.peer_stage, s, recv.tag)] += 1
            if send:
                sends[(s, send.peer_stage, send.tag)] += 1
    assert sends == receives and set(sends.values()) == {1}
    # activations and gradients between each pair of neighbouring virtual stages, every micro-batch
    assert sum(sends.values()) == 2 * (pp * v - 1) * m
