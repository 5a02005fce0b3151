"""A cluster on the timeline: every rank on one clock, grouped by server, each group a summary lane
that expands into its ranks, slowest group and rank first."""

from __future__ import annotations

import numpy as np
import pytest

from geprof_nb import ge
from geprof_nb.nb.timeline.grouping import by_parallel_group, by_pipeline_stage, by_server, rank_span, slowest_first
from geprof_nb.nb.timeline.model import TimelineData
from helpers.cluster_testing import SLOW_RANK, simulate_cluster


@pytest.fixture(scope="module")
def data(small_cluster):
    return TimelineData(small_cluster)


def test_ranks_are_grouped_by_server():
    class Fake:
        ranks = {r: None for r in (0, 1, 7, 8, 9, 17)}

    assert by_server(Fake()) == [("server 0 · ranks 0, 1, 7", [0, 1, 7]),
                                 ("server 1 · ranks 8-9", [8, 9]), ("server 2 · ranks 17", [17])]
    assert rank_span([3, 1, 2]) == "1-3"


def test_slowest_first_orders_groups_by_their_slowest_rank():
    own = {0: 10.0, 1: 12.0, 8: 30.0, 9: 5.0}
    groups = [("a", [0, 1, 2]), ("b", [8, 9])]
    assert slowest_first(groups, own) == [("b", [8, 9]), ("a", [1, 0, 2])]  # rank 2 has no figure: last


def test_the_slow_ranks_server_and_the_slow_rank_come_first(small_cluster, data):
    slow = small_cluster.slow_ranks
    assert int(slow["Rank"].iloc[0]) == SLOW_RANK
    groups = [lane for lane in data.lanes if lane.parent is None and lane.type == "summary"]
    assert [g.label for g in groups] == ["server 0 · ranks 0-7", "server 1 · ranks 8-15"]
    ranks = [lane.rank for lane in data.lanes if lane.parent == groups[0].id]
    own = dict(zip(slow["Rank"], slow["Own Time(us)"]))
    assert ranks[0] == SLOW_RANK and sorted(ranks) == list(range(8))
    assert [own[r] for r in ranks] == sorted((own[r] for r in ranks), reverse=True)
    assert groups[0].note == f"slowest: own time {own[SLOW_RANK] / 1000:,.3f} ms/step"


def test_every_rank_is_on_one_clock(small_cluster, data):
    begins = {r: int(p.source.step_bounds()["begin"].min()) for r, p in small_cluster.ranks.items()}
    assert data.origin_ns == min(begins.values())
    for r, p in small_cluster.ranks.items():
        lane = data.by_id[f"r{r}/stream/{int(p.op_summary['Stream ID'].dropna().iloc[0])}"]
        k = int(lane.spans.ref[0]) - next(o.ref0 for o in data.ops if o.rank == r)
        assert lane.spans.start[0] == (p.source.op_rows().start_ns[k] - data.origin_ns) / 1000
        assert lane.parent == f"r{r}" and data.by_id[f"r{r}"].parent is not None


def test_a_group_summary_lane_counts_every_device_task_of_its_ranks(small_cluster, data):
    group = next(lane for lane in data.lanes if lane.parent is None and lane.type == "summary")
    ranks = [lane.rank for lane in data.lanes if lane.parent == group.id]
    header, buffers = data.view(*data.extent, 2000, [group.id])
    h = header["lanes"][group.id]
    count = np.frombuffer(buffers[h["columns"][1]], "<u4")
    assert h["n_exact"] == 0 and h["members"] == len(group.members)
    assert int(count.sum()) == sum(len(small_cluster.ranks[r].op_summary) for r in ranks)


def test_a_clicked_op_lists_its_instances_on_every_rank(small_cluster, data):
    name = str(small_cluster.ranks[0].op_summary["Op Name"].iloc[3])
    answer = data.op(name)
    expected = sum(int((p.op_summary["Op Name"] == name).sum()) for p in small_cluster.ranks.values())
    assert answer["count"] == expected == 16 * 2
    assert sorted({i[0] for i in answer["instances"]}) == list(range(16))


def test_the_static_fallback_of_a_cluster_draws_the_slowest_rank(small_cluster):
    from geprof_nb.nb.timeline import Timeline

    timeline = Timeline(small_cluster)
    assert timeline.static_profile() is small_cluster.ranks[SLOW_RANK]
    data, _ = timeline._repr_mimebundle_()
    assert data["image/png"].startswith(b"\x89PNG") and "server 0 · ranks 0-7" in data["text/html"]


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory):
    """tiny-llama at TP2 PP2 DP2 on 8 ranks: rank = tp_rank + 2 * (dp_rank + 2 * pp_rank), Megatron's numbering."""
    g = ge.models.llm("tiny-llama", seq_len=256, parallel=ge.Parallel(tp=2, pp=2, dp=2, micro_batches=2))
    return simulate_cluster(tmp_path_factory.mktemp("hybrid"), ranks=8, steps=1, graph=g, task_trace="on")


def test_a_hybrid_job_is_grouped_by_stage_or_by_its_parallel_groups(hybrid):
    assert by_pipeline_stage(hybrid) == [("stage 0 · ranks 0-3", [0, 1, 2, 3]), ("stage 1 · ranks 4-7", [4, 5, 6, 7])]
    assert [r for _, r in by_parallel_group("tp")(hybrid)] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert [r for _, r in by_parallel_group("dp")(hybrid)] == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert [r for _, r in by_parallel_group("pp")(hybrid)] == [[0, 4], [1, 5], [2, 6], [3, 7]]
    with pytest.raises(ValueError, match=r"has no 'ep' groups; it has: dp, pp, tp, world$"):
        by_parallel_group("ep")(hybrid)
    lanes = TimelineData(hybrid, group_by=by_pipeline_stage).lanes
    labels = sorted(lane.label for lane in lanes if lane.parent is None and lane.type == "summary")
    assert labels == ["stage 0 · ranks 0-3", "stage 1 · ranks 4-7"]
