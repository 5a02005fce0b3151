"""ClusterProfile.advise() on hybrid-parallel jobs: the pipeline bubble, unbalanced stages and expert imbalance
findings, each with a time at stake derived from the tables by hand and never claiming the same time twice."""

from __future__ import annotations

import numpy as np
import pytest

from geprof_nb import ge
from geprof_nb.analysis.findings.advisor import COLUMNS
from helpers.cluster_testing import simulate_cluster

P = ge.Parallel
PARALLEL_RULES = {"Pipeline bubble", "Unbalanced pipeline stages", "Expert imbalance"}


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory):
    """tiny-llama at TP2 PP2 DP2, 4 micro-batches: stage 1 carries the head and the loss."""
    g = ge.models.llm("tiny-llama", seq_len=256, parallel=P(tp=2, pp=2, dp=2, micro_batches=4))
    return simulate_cluster(tmp_path_factory.mktemp("hybrid"), ranks=8, steps=2, graph=g, task_trace="on")


def _finding(advice, rule: str):
    rows = advice[advice["Rule"] == rule]
    assert len(rows) == 1, advice["Rule"].tolist()
    return rows.iloc[0]


def test_the_bubble_and_the_heavier_stage_are_two_findings_that_share_no_time(hybrid):
    advice = hybrid.advise()
    assert list(advice.columns) == COLUMNS
    b = hybrid.pipeline_bubbles
    busy = b["Busy(us)"]
    assert busy.idxmax() == 1  # the head, the loss and their gradients
    bubble = _finding(advice, "Pipeline bubble")
    # the bubble every stage has is the busiest stage's own idle time
    assert bubble["Time at stake (us)"] == pytest.approx(b["Bubble(us)"][1], abs=1e-3)
    assert "stage 1" in bubble["Finding"] and "1f1b with 4 micro-batches" in bubble["Finding"]
    # doubling the micro-batches: (2 - 1) / (8 + 2 - 1) = 11%
    assert "(p-1)/(v*m+p-1) = 11%" in bubble["Suggestion"]
    stages = _finding(advice, "Unbalanced pipeline stages")
    assert stages["Time at stake (us)"] == pytest.approx(busy.max() - busy.mean(), abs=1e-3)
    assert stages["Finding"].startswith("Stage 1 is busy")
    # the two are disjoint parts of the busiest stage's pipeline time: its idle and its excess work
    assert bubble["Time at stake (us)"] + stages["Time at stake (us)"] <= b["Pipeline Time(us)"][1]
    assert "Expert imbalance" not in set(advice["Rule"])
    # the last stage's ranks are not slow ranks, and the first stage's wait at its receives is not High wait:
    # a rank is compared with its own stage, and the wait is the pipeline findings' loss
    assert not {"Slow rank", "High wait"} & set(advice["Rule"])
    sr = hybrid.slow_ranks.set_index("Rank")
    for stage in (0, 1):
        mine = sr.loc[range(4 * stage, 4 * stage + 4)]
        assert (mine["Median Own Time(us)"] == np.median(mine["Own Time(us)"])).all()


def test_a_slow_rank_is_found_among_the_ranks_of_its_stage(tmp_path):
    g = ge.models.llm("tiny-llama", seq_len=256, parallel=P(tp=2, pp=2, dp=2, micro_batches=4))
    c = simulate_cluster(tmp_path, {"slow_ranks": {"5": 1.5}}, ranks=8, steps=2, graph=g, task_trace="on")
    sr = c.slow_ranks
    assert sr[sr["Slow"]]["Rank"].tolist() == [5]
    row = sr.set_index("Rank").loc[5]
    assert row["Median Own Time(us)"] == np.median(sr.set_index("Rank").loc[[4, 5, 6, 7], "Own Time(us)"])
    assert row["Bound"] == "Computing"


@pytest.fixture(scope="module")
def moe(tmp_path_factory):
    g = ge.models.llm("tiny-moe", seq_len=1024, parallel=P(dp=4, ep=4, micro_batches=2))
    return {skew: simulate_cluster(tmp_path_factory.mktemp(f"moe{skew}"), ranks=4, steps=2, graph=g,
                                   faults={"expert_skew": skew} if skew else None, task_trace="on")
            for skew in (0.0, 2.0)}


def _expert_us(profile, layer: int) -> float:
    ops = profile.op_summary
    sel = ops["OP Type"].isin(["GroupedMatmul", "SwiGlu", "SwiGluGrad"]) & ops["Op Name"].astype(str).str.contains(
        f"layers.{layer}/block_sparse_moe/experts/", regex=False)
    return float(ops.loc[sel, "Task Duration(us)"].sum()) / 2  # 2 steps


@pytest.mark.slow
def test_skewed_routing_is_an_expert_imbalance_costing_the_busiest_ranks_excess(moe):
    assert not PARALLEL_RULES & set(moe[0.0].advise()["Rule"])  # balanced, one stage: nothing to say
    skewed = moe[2.0]
    finding = _finding(skewed.advise(), "Expert imbalance")
    stake = 0.0
    for layer in range(4):  # the layers run one after the other on the one stage: their excesses add up
        times = [_expert_us(skewed.rank(r), layer) for r in range(4)]
        stake += max(times) - np.mean(times)
    assert finding["Time at stake (us)"] == pytest.approx(stake, abs=1e-3)
    assert finding["Finding"].startswith("4 of 4 MoE layers route their tokens unevenly")
    assert "2.00x the mean tokens" in finding["Finding"]
    step = float(skewed.pipeline_bubbles["Step Time(us)"].max())
    assert 0 < finding["Time at stake (us)"] < step


@pytest.mark.slow
def test_uniform_stages_are_not_unbalanced_and_interleaving_shrinks_the_bubble(tmp_path):
    shapes = dict(seq_len=2048, hidden=8192, heads=64, kv_heads=64, ffn=22016, vocab=256, layers=8)
    stake = {}
    for schedule, v in (("1F1B", 1), ("interleaved", 2)):
        par = P(pp=4, micro_batches=8, schedule=schedule, virtual_stages=v)
        c = simulate_cluster(tmp_path / schedule, ranks=4, steps=2, task_trace="on",
                             graph=ge.models.llm("tiny-llama", parallel=par, **shapes))
        advice = c.advise()
        assert "Unbalanced pipeline stages" not in set(advice["Rule"])
        stake[schedule] = _finding(advice, "Pipeline bubble")["Time at stake (us)"]
    # 3/11 of the pipeline idle against 3/19, on a pipeline that is shorter as well
    assert stake["interleaved"] < stake["1F1B"] * (3 / 19) / (3 / 11) * 1.1


def test_a_later_stage_arriving_last_at_its_receives_is_no_straggler(tmp_path):
    """The accuracy benchmark's bubble-bound pipelines: tiny-llama at PP2 (4 micro-batches), no fault.  Stage 1
    arrives last at every send/receive pair (it waits for stage 0's activations by the schedule); the advisor
    called rank 1 a straggler, 1.7 ms at stake of a 11.6 ms step, a cause never injected."""
    g = ge.models.llm("tiny-llama", seq_len=256, layers=16, parallel=P(pp=2, micro_batches=4))
    c = simulate_cluster(tmp_path, ranks=2, steps=6, graph=g)
    st = c.tables().typical_stragglers
    p2p = st[st["Spread(us)"] > 0]
    assert len(p2p) and set(p2p["OP Type"]) <= {"hcom_send_", "hcom_receive_"} and set(p2p["Last Rank"]) == {1}
    assert set(c.advise()["Rule"]) == {"Pipeline bubble"}
