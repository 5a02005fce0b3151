"""ClusterProfile.advise(): the injected faults come back as findings, ranked, with their numbers."""

from __future__ import annotations

import pytest
from cluster_testing import FAULTS, SLOW_LINK, SLOW_RANK, simulate_cluster

from geprof_nb.analysis.advisor import COLUMNS


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    return simulate_cluster(tmp_path_factory.mktemp("faulty"), FAULTS)


def test_findings_are_the_slow_link_the_slow_rank_and_the_wait_they_cause(faulty):
    advice = faulty.advise()
    assert list(advice.columns) == COLUMNS
    assert sorted(advice["Rule"]) == ["High wait", "Slow link", "Slow rank"]
    # ranked like Profile.advise: priority, then time at stake
    order = advice["Priority"].map(["High", "Medium", "Low"].index).tolist()
    assert order == sorted(order)
    link = advice[advice["Rule"] == "Slow link"].iloc[0]
    assert link["Finding"].startswith(f"Link {SLOW_LINK[0]} -> {SLOW_LINK[1]} (HCCS) runs at 45.0 GB/s, 50% of")
    # half bandwidth doubles the link's transit time: what is lost per step is one ideal transit time
    lost = faulty.slow_links["Time Lost(us)"].iloc[0] / 3
    assert link["Time at stake (us)"] == pytest.approx(lost, rel=1e-3)
    # its share of the median step sets the priority: ~18% of ResNet-50's ~11.1 ms step is Medium (it was
    # over 20%, High, while memory-bound kernels' reads and writes each had the whole HBM bandwidth)
    assert link["Priority"] == ("High" if link["Share of step (%)"] >= 20 else "Medium")
    assert 5 <= link["Share of step (%)"] < 100
    rank = advice[advice["Rule"] == "Slow rank"].iloc[0]
    assert rank["Finding"].startswith(f"Rank {SLOW_RANK} is slow") and "Computing explains it" in rank["Finding"]
    assert "x1.2" in rank["Evidence"] and f"cluster.rank({SLOW_RANK})" in rank["Suggestion"]
    # it costs the others what they wait for it, never more than its extra time (some of it can hide)
    st = faulty.stragglers
    late = st[(st["Last Rank"] == SLOW_RANK) & (st["Spread(us)"] > 0)]["Late By(us)"].sum() / 3
    deviation = faulty.slow_ranks.iloc[0]["Deviation(us)"]
    assert rank["Time at stake (us)"] == pytest.approx(min(late, deviation))
    wait = advice[advice["Rule"] == "High wait"].iloc[0]
    assert f"slow rank(s) {SLOW_RANK}" in wait["Finding"] and f"{SLOW_LINK[0]}->{SLOW_LINK[1]}" in wait["Finding"]


def test_shares_are_of_the_median_rank_step(faulty):
    advice = faulty.advise()
    step = faulty.slow_ranks["Step Time(us)"].median()
    assert (advice["Share of step (%)"] - 100 * advice["Time at stake (us)"] / step).abs().max() < 0.01


def test_a_jittery_host_makes_a_straggler(tmp_path):
    """Host launch jitter on rank 5: not slower on average, but last at most collectives."""
    c = simulate_cluster(tmp_path, {"host_jitter_us": {"5": 500}}, steps=4)
    assert not c.slow_ranks["Slow"].any()
    advice = c.advise()
    straggler = advice[advice["Rule"] == "Straggler"]
    assert len(straggler) == 1 and straggler["Finding"].iloc[0].startswith("Rank 5 arrives last at")
    st = c.stragglers
    mine = st[(st["Last Rank"] == 5) & (st["Spread(us)"] > 0)]
    assert straggler["Time at stake (us)"].iloc[0] == pytest.approx(mine["Late By(us)"].sum() / 4)
