"""ClusterProfile.advise(): the injected faults come back as findings, ranked, with their numbers."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from geprof_nb.analysis.cluster import cross_rank as T
from geprof_nb.analysis.findings.advisor import COLUMNS
from geprof_nb.analysis.findings.cluster_advisor import WAIT_EXCESS_MIN_SHARE, high_wait
from helpers.cluster_testing import FAULTS, SLOW_LINK, SLOW_RANK, resnet, simulate_cluster


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    return simulate_cluster(tmp_path_factory.mktemp("faulty"), FAULTS)


def test_findings_are_the_slow_link_and_the_slow_rank(faulty):
    advice = faulty.advise()
    assert list(advice.columns) == COLUMNS
    assert sorted(advice["Rule"]) == ["Slow link", "Slow rank"]
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
    # the ranks' extra wait is what the two findings count (the others wait for rank 3 and for the link's
    # ring step): no High wait finding claims it again
    wait = faulty.slow_ranks["Wait Time(us)"]
    unexplained = wait.median() - wait.min() - advice["Time at stake (us)"].sum()
    assert unexplained < WAIT_EXCESS_MIN_SHARE * faulty.slow_ranks["Step Time(us)"].median()


def test_a_slow_link_is_the_top_finding_and_the_findings_claim_what_the_cluster_loses(tmp_path):
    """The audit's case: link 5 -> 6 at half speed.  The wait it causes is its loss, which the Slow link
    finding counts; High wait claimed it again (and ranked first), so findings claimed twice the loss."""
    healthy, faulty = (simulate_cluster(tmp_path / name, faults, ranks=8, steps=4,
                                        graph=resnet(8, batch_size=8, image_size=112))
                       for name, faults in (("healthy", None), ("faulty", {"slow_links": {"5-6": 0.5}})))
    loss = faulty.slow_ranks["Step Time(us)"].median() - healthy.slow_ranks["Step Time(us)"].median()
    assert loss > 1500  # ~2,000 us: a third of the step
    advice = faulty.advise()
    assert advice["Rule"].tolist() == ["Slow link"]
    assert advice["Time at stake (us)"].sum() == pytest.approx(loss, rel=0.03)


def _wait_tables(waits: list[float], link_lost_us: float | None = None, steps: int = 3) -> SimpleNamespace:
    """The cross-rank tables high_wait reads: ranks with these waits per step in 10,000 us steps, nothing
    slow, no stragglers; ``link_lost_us``: a slow link 0 -> 1 that loses that much per step."""
    n = len(waits)
    slow_ranks = pd.DataFrame({"Rank": np.arange(n), "Steps": steps, "Step Time(us)": 10_000.0,
                               "Wait Time(us)": waits, "Slow": False})
    links = pd.DataFrame(columns=T.SLOW_LINKS)
    if link_lost_us is not None:
        lost = link_lost_us * steps
        links = pd.DataFrame([[0, 1, "HCCS", "SDMA", 10, 90e6 * steps, 2e3 * steps + lost, 45.0, 90.0, 0.5, lost]],
                             columns=T.SLOW_LINKS)
    cstt = pd.DataFrame({"Step": np.tile(np.arange(1, steps + 1), n), "Type": "rank",
                         "Index": np.repeat(np.arange(n), steps)})
    no_stragglers = pd.DataFrame(columns=T.STRAGGLERS)
    return SimpleNamespace(slow_ranks=slow_ranks, slow_links=links, stragglers=no_stragglers,
                           typical_stragglers=no_stragglers, outlier_steps=[], rank_step_splits={},
                           communication_time=pd.DataFrame(columns=T.CLUSTER_COMMUNICATION_TIME),
                           cluster_step_trace_time=cstt, slow_rank_threshold=T.SLOW_RANK_THRESHOLD)


def test_high_wait_that_no_finding_explains_is_at_stake():
    (finding,) = high_wait(_wait_tables([100.0, 1100.0, 1100.0, 1100.0]))
    assert finding.rule == "High wait" and finding.at_stake_us == pytest.approx(1000.0)
    assert "1,000.0 us more than rank 0, which waits least" in finding.finding and "unexplained" not in finding.finding


def test_high_wait_claims_only_what_a_slow_link_does_not_explain():
    # the link explains 900 of the 1,000 us: the 100 left (1% of the step) is no finding
    assert high_wait(_wait_tables([100.0, 1100.0, 1100.0, 1100.0], link_lost_us=900.0)) == []
    # it explains 400: the other 600 (6%) are
    (finding,) = high_wait(_wait_tables([100.0, 1100.0, 1100.0, 1100.0], link_lost_us=400.0))
    assert finding.at_stake_us == pytest.approx(600.0)
    assert "(400.0 us of it the other findings count: 600.0 us unexplained)" in finding.finding


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


def test_a_one_off_stall_on_one_rank_is_its_own_finding_not_a_slow_rank(tmp_path):
    """Rank 2's data loader stalls 200 ms once, before step 5 of 8 (every rank waits for it there): the old
    advisor called rank 2 slow, "1641% above the median rank" per step; the stall is one finding naming the
    rank, the step and its size, and the per-step rules count the other steps."""
    c = simulate_cluster(tmp_path, {"loader_stall": {"every": 5, "us": 200_000, "ranks": [2]}}, ranks=4, steps=8,
                         graph=resnet(4, batch_size=2, image_size=64))
    advice = c.advise()
    assert advice["Rule"].tolist() == ["One-off stall"]
    t = c.tables()
    assert t.outlier_steps == [5]
    assert not c.slow_ranks["Slow"].any() and (c.slow_ranks["Steps"] == 6).all()  # steps 2-4 and 6-8
    free = t.cluster_step_trace_time.set_index(["Index", "Step"])["Free"]
    rank2 = free.loc[2]
    extra = float(rank2.loc[5] - rank2.drop(index=1).median())
    assert 199_900 <= extra < 200_100
    stall = advice.iloc[0]
    assert stall["Finding"].startswith(f"A {extra / 1000:,.1f} ms stall on rank 2 in step 5 ")
    assert stall["Time at stake (us)"] == pytest.approx(extra / 8, abs=1e-3)
