"""Critical path and what-if across the ranks of a simulated cluster."""

from __future__ import annotations

import pytest

import geprof_nb
from helpers.cluster_testing import simulate_cluster
from helpers.geprof_testing import small_resnet


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # rank 1 slowed: the others wait for it in every gradient AllReduce, so it ends each step last
    return simulate_cluster(tmp_path_factory.mktemp("c"), faults={"slow_ranks": {"1": 1.5}}, ranks=4, steps=2,
                            graph=small_resnet(4))


def test_the_cluster_path_is_the_slowest_ranks_and_tiles_its_step(cluster):
    path = cluster.critical_path()
    assert set(path["iteration"]) == {1, 2}
    for it, seg in path.groupby("iteration"):
        (rank,) = set(seg["rank"])
        b = cluster.rank(rank).source.step_bounds().set_index("step").loc[it]
        assert seg["duration"].sum() == b["end"] - b["begin"]
        ends = {r: int(p.source.step_bounds().set_index("step").loc[it, "end"]) for r, p in cluster.ranks.items()}
        assert ends[rank] == max(ends.values())
    assert "across ranks" in path.attrs["assumptions"]


def test_cluster_what_if_predicts_each_step_by_its_slowest_rank(cluster):
    same = cluster.what_if().predicted
    assert (same["delta_ns"] == 0).all()
    faster = cluster.what_if(op_speedup={"Conv2D*": 2.0}).predicted
    per_rank = {r: p.what_if(op_speedup={"Conv2D*": 2.0}).predicted.set_index("iteration")
                for r, p in cluster.ranks.items()}
    for _, row in faster.iterrows():
        assert row["predicted_ns"] == max(w.loc[row["iteration"], "predicted_ns"] for w in per_rank.values())
        assert row["delta_ns"] < 0
    loaded = geprof_nb.load(cluster.path)  # the cluster simulated here has a replay (tests/test_replay.py)
    assert loaded.replay is None
    with pytest.raises(RuntimeError, match="verify\\(\\) needs a run simulated in this process"):
        loaded.what_if().verify()
