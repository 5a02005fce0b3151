"""The hybrid-parallel tables of a simulated cluster: its communication groups (by Megatron's numbering), its
pipeline passes and bubbles (Megatron's formula for uniform stages, a heavier last stage idling the others) and
its experts' load (tokens the run recorded, the imbalance and the time it costs)."""

from __future__ import annotations

import re
import sqlite3

import numpy as np
import pandas as pd
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis.cluster import cross_rank as T
from geprof_nb.analysis.cluster.parallelism import COMMUNICATION_GROUPS, EXPERT_LOAD, PIPELINE, PIPELINE_BUBBLES
from geprof_nb.analysis.cluster.profile import ClusterTables, PandasInputs
from geprof_nb.analysis.sources.db_schema import group_hash
from helpers.cluster_testing import simulate_cluster

P = ge.Parallel
#: Stages whose compute dwarfs their activations' transfers and whose ends carry no weight: 8192 wide, 2
#: layers a stage, a vocabulary of 256 (the embedding on stage 0 and the head on the last cost ~1% of a layer).
UNIFORM = dict(seq_len=2048, hidden=8192, heads=64, kv_heads=64, ffn=22016, vocab=256)


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory):
    """tiny-llama at TP2 PP2 DP2, 4 micro-batches, 2 steps: a head and loss heavier than the rest on stage 1."""
    g = ge.models.llm("tiny-llama", seq_len=256, parallel=P(tp=2, pp=2, dp=2, micro_batches=4))
    return simulate_cluster(tmp_path_factory.mktemp("hybrid"), ranks=8, steps=2, graph=g, task_trace="on")


def _megatron(tp: int, dp: int, pp: int) -> dict[str, set[tuple[int, ...]]]:
    """Each kind's groups by Megatron's numbering rank = tp_rank + tp * (dp_rank + dp * pp_rank)."""
    rank = lambda t, d, p: t + tp * (d + dp * p)  # noqa: E731
    return {"tp": {tuple(rank(t, d, p) for t in range(tp)) for d in range(dp) for p in range(pp)},
            "dp": {tuple(rank(t, d, p) for d in range(dp)) for t in range(tp) for p in range(pp)},
            "pp": {tuple(rank(t, d, p) for p in range(pp)) for t in range(tp) for d in range(dp)}}


def test_the_groups_are_megatrons_as_communication_group_map_reports_them(hybrid):
    groups = hybrid.communication_groups
    assert list(groups.columns) == COMMUNICATION_GROUPS
    ranks = {kind: {tuple(int(x) for x in s.strip("()").split(",")) for s in g["Rank Set"]}
             for kind, g in groups.groupby("Type")}
    assert ranks == {**_megatron(2, 2, 2), "world": {tuple(range(8))}}
    assert ranks["tp"] == {(0, 1), (2, 3), (4, 5), (6, 7)} and ranks["pp"] == {(0, 4), (1, 5), (2, 6), (3, 7)}
    assert list(groups["Type"]) == ["world"] + ["tp"] * 4 + ["pp"] * 4 + ["dp"] * 4
    assert set(groups.loc[groups["Type"] == "pp", "Communication Type"]) == {"p2p"}
    assert set(groups.loc[groups["Type"] != "pp", "Communication Type"]) == {"collective"}
    assert (groups["Size"] == [8] + [2] * 12).all()
    # msprof-analyze names a group by the double hash of its communicator name, every rank's record of it alike
    assert list(groups["Group Name"]) == [group_hash(g) for g in groups["Group ID"]]
    recorded = hybrid.rank(5).info["parallel"]["parallel_group_info"]
    assert {g for g in recorded} <= set(groups["Group ID"]) and len(recorded) == 4


def test_every_pass_of_every_micro_batch_is_in_the_pipeline(hybrid):
    passes = hybrid.pipeline
    assert list(passes.columns) == PIPELINE
    assert len(passes) == 8 * 2 * 4 * 2  # ranks x steps x micro-batches x directions
    assert dict(passes.groupby("Stage")["Rank"].unique().map(sorted)) == {0: [0, 1, 2, 3], 1: [4, 5, 6, 7]}
    one = passes[(passes["Rank"] == 4) & (passes["Step"] == 2)]
    assert sorted(zip(one["Micro Batch"], one["Direction"])) == sorted(
        (m, d) for m in range(4) for d in ("forward", "backward"))
    tx = hybrid.rank(4).msprof_tx
    tx = tx[tx["domain"] == "pipeline"]
    assert np.allclose(passes.loc[passes["Rank"] == 4, "Start(us)"], tx["Start_time(us)"])
    assert np.allclose(passes["Duration(us)"], passes["End(us)"] - passes["Start(us)"])
    # stage 1 runs micro-batch 0's forward after stage 0's
    first = passes[(passes["Step"] == 2) & (passes["Micro Batch"] == 0) & (passes["Direction"] == "forward")]
    assert first.groupby("Stage")["Start(us)"].min()[1] >= first.groupby("Stage")["End(us)"].min()[0]


def _by_hand(passes, stage: int) -> float:
    """A stage's mean bubble share per step: (window over all stages - the rank's busy time) / window."""
    shares = []
    for step, g in passes.groupby("Step"):
        window = g["End(us)"].max() - g["Start(us)"].min()
        for _, r in g[g["Stage"] == stage].groupby("Rank"):
            shares.append((window - r["Duration(us)"].sum()) / window)
    return float(np.mean(shares))


def test_a_heavier_last_stage_leaves_a_larger_bubble_on_the_others(hybrid):
    bubbles = hybrid.pipeline_bubbles
    assert list(bubbles.columns) == PIPELINE_BUBBLES and list(bubbles["Stage"]) == [0, 1]
    assert list(bubbles["Ideal Bubble Ratio"]) == [1 / 5, 1 / 5]  # (p - 1) / (m + p - 1), p = 2, m = 4
    for stage in (0, 1):
        assert bubbles["Bubble Ratio"][stage] == pytest.approx(_by_hand(hybrid.pipeline, stage), rel=1e-6)
    assert np.allclose(bubbles["Bubble(us)"], bubbles["Pipeline Time(us)"] - bubbles["Busy(us)"])
    # the last stage's head, loss and their gradients make it the longest: stage 0 waits for it
    assert bubbles["Bubble Ratio"][0] > 1 / 5 + 0.05 > bubbles["Bubble Ratio"][1]
    assert (bubbles["Step Share"] < bubbles["Bubble Ratio"]).all()  # the step also holds the optimizer


@pytest.mark.slow
@pytest.mark.parametrize("parallel", [P(pp=4, micro_batches=8),
                                      P(pp=4, micro_batches=8, schedule="interleaved", virtual_stages=2)],
                         ids=["1F1B-p4-m8", "interleaved-p4-m8-v2"])
def test_uniform_stages_idle_as_megatrons_formula_says(tmp_path, parallel):
    g = ge.models.llm("tiny-llama", parallel=parallel, **UNIFORM, layers=2 * parallel.pp)
    c = simulate_cluster(tmp_path, ranks=parallel.world_size, steps=2, graph=g, task_trace="on")
    p, m, v = parallel.pp, parallel.micro_batches, parallel.virtual_stages
    expected = (p - 1) / (v * m + p - 1)  # 3/11 = 0.273 for 1F1B, 3/19 = 0.158 interleaved
    bubbles = c.pipeline_bubbles
    assert list(bubbles["Stage"]) == list(range(p))
    assert bubbles["Ideal Bubble Ratio"].tolist() == [expected] * p
    assert (abs(bubbles["Bubble Ratio"] - expected) <= 0.02).all(), bubbles["Bubble Ratio"].tolist()
    assert len(c.pipeline) == p * 2 * v * m * 2


@pytest.fixture(scope="module")
def moe_runs(tmp_path_factory):
    g = ge.models.llm("tiny-moe", seq_len=1024, parallel=P(dp=4, ep=4, micro_batches=2))
    out = {}
    for skew in (0.0, 2.0):
        out[skew] = simulate_cluster(tmp_path_factory.mktemp(f"skew{skew}"), ranks=4, steps=2, graph=g,
                                     faults={"expert_skew": skew} if skew else None, task_trace="on")
    return out


def _expert_time_by_hand(profile, layer: int) -> float:
    """A rank's expert kernels of ``layer`` per step: its GroupedMatmul / SwiGlu tasks and their gradients."""
    ops = profile.op_summary
    names = ops["Op Name"].astype(str)
    sel = ops["OP Type"].isin(["GroupedMatmul", "SwiGlu", "SwiGluGrad"]) & names.str.contains(
        f"layers.{layer}/block_sparse_moe/experts/", regex=False)
    return float(ops.loc[sel, "Task Duration(us)"].sum()) / 2


@pytest.mark.slow
@pytest.mark.parametrize("skew", [0.0, 2.0])
def test_expert_load_is_the_tokens_the_run_recorded(moe_runs, skew):
    c = moe_runs[skew]
    load, imbalance = c.expert_load, c.expert_imbalance
    assert list(load.columns) == EXPERT_LOAD and len(load) == 4 * 4  # layers x experts
    recorded = {r: p.info["parallel"]["moe"] for r, p in c.ranks.items()}
    for layer in range(4):
        # rank r holds expert r; its tokens per micro-batch times the 2 micro-batches
        tokens = [recorded[r]["tokens_per_micro_batch"][str(layer)][0] * 2 for r in range(4)]
        rows = load[load["Layer"] == layer].sort_values("Expert")
        assert rows["Tokens"].tolist() == tokens and rows["Ranks"].tolist() == ["0", "1", "2", "3"]
        times = [_expert_time_by_hand(c.rank(r), layer) for r in range(4)]
        assert np.allclose(rows["Time(us)"], times)
        row = imbalance[imbalance["Layer"] == layer].iloc[0]
        assert row["Imbalance"] == pytest.approx(max(tokens) / np.mean(tokens))
        assert row["Time at Stake(us)"] == pytest.approx(max(times) - np.mean(times))
        assert row["Busiest Rank"] == int(np.argmax(times))
        if skew == 0:  # 1024 tokens x 4 ranks x top 2 over 4 experts, 2 micro-batches
            assert tokens == [4096] * 4 and row["Imbalance"] == 1.0
        else:
            # Zipf shares 1, 1/4, 1/9, 1/16 put 70% on the first expert: capped at 1 / top_k = half the routes
            assert max(tokens) == pytest.approx(8192, abs=4) and row["Imbalance"] == pytest.approx(2.0, abs=0.01)
            assert row["Time at Stake(us)"] > 0.3 * row["Max Time(us)"]


def test_a_run_without_parallel_facts_has_empty_tables(tmp_path):
    c = simulate_cluster(tmp_path, ranks=2, steps=1, graph=ge.models.mlp(batch_size=8, training=True, world_size=2))
    assert list(c.communication_groups["Type"]) == ["world"]  # a data-parallel job's one group
    assert c.pipeline.empty and list(c.pipeline.columns) == PIPELINE
    assert c.pipeline_bubbles.empty and c.expert_load.empty and c.expert_imbalance.empty
    assert re.fullmatch(r"\(0,1\)", c.communication_groups["Rank Set"][0])


@pytest.mark.parametrize("fmt", ["parquet", "db"])
def test_the_parquet_and_db_exports_keep_the_parallel_tables(hybrid, tmp_path, fmt):
    """The DB export holds the groups in META_DATA and the passes in MSTX_EVENTS; its TASK rows of a send and a
    receive one host call launched share connection, start and end, and still pair with their collectives."""
    back = geprof_nb.load(hybrid.export(tmp_path / fmt, format=fmt))
    assert len(back.rank(0).op_summary) == len(hybrid.rank(0).op_summary)
    for table in ("communication_groups", "pipeline"):
        pd.testing.assert_frame_equal(getattr(back, table), getattr(hybrid, table))
    # a DB's steps are its ProfilerStep ranges (from the host's call), so only the step's time differs there
    step = ["Step Time(us)", "Step Share"] if fmt == "db" else []
    pd.testing.assert_frame_equal(back.pipeline_bubbles.drop(columns=step), hybrid.pipeline_bubbles.drop(columns=step))


def test_pipeline_sends_move_at_the_links_bandwidth_and_are_no_slow_links(hybrid):
    """A send's copy task is its bytes moving (the link's latency is in the waits, as in the rings): its
    bandwidth is the HCCS link's. With the latency in the copy a micro-batch's send read 15 % of the rings'
    bandwidth, and every pipeline pair was a "slow link"."""
    matrix = hybrid.communication_matrix
    across = (matrix["Src Rank"] // 4) != (matrix["Dst Rank"] // 4)  # stage 0 is ranks 0-3, stage 1 ranks 4-7
    assert across.sum() == 8  # each rank sends to its peer in the other stage
    rings = matrix.loc[~across, "Bandwidth(GB/s)"].median()
    assert matrix.loc[across, "Bandwidth(GB/s)"].to_numpy() == pytest.approx(rings, rel=0.01)
    assert hybrid.slow_links.empty
    assert "Slow link" not in set(hybrid.advise()["Rule"])


def test_the_db_export_puts_each_collective_in_its_own_group(hybrid, tmp_path):
    """COMMUNICATION_OP's and COMMUNICATION_TASK_INFO's groupName: the communicator each op ran in (what
    communication.json keys it by), not the world group; loaded back, every op keeps its group."""
    root = hybrid.export(tmp_path / "db", format="db")
    back = geprof_nb.load(root)
    for r in (0, 5):
        ours = hybrid.rank(r)
        groups = ours.source.collective_groups()
        kinds = {g["group_name"] for g in ours.info["parallel"]["parallel_group_info"].values()}
        assert groups is not None and len(set(groups)) >= 3 and kinds >= {"tp", "pp", "dp"}
        (path,) = root.rglob(f"ascend_pytorch_profiler_{r}.db")
        conn = sqlite3.connect(path)
        try:
            op = conn.execute("SELECT s.value FROM COMMUNICATION_OP o JOIN STRING_IDS s ON s.id = o.groupName "
                              "ORDER BY o.startNs, o.opId").fetchall()
            task = conn.execute("SELECT DISTINCT s.value FROM COMMUNICATION_TASK_INFO t "
                                "JOIN STRING_IDS s ON s.id = t.groupName").fetchall()
        finally:
            conn.close()
        ct = ours.communication_time
        by_name = dict(zip(ct["Op Name"].astype(str), groups))
        assert sorted(v for (v,) in op) == sorted(by_name.values())
        assert {v for (v,) in task} == set(groups)
        np.testing.assert_array_equal(back.rank(r).source.collective_groups(), groups)


def test_the_fast_paths_give_the_frames_of_the_per_rank_tables(hybrid):
    """What the cluster's tables take short cuts for, computed the long way on the same ranks: rank_step_wait
    summed from every rank's own collectives table, the Dask engine's workers reading the run directories
    (not a Parquet export) and each chunk read through the cached header as numpy reads the file."""
    fresh = geprof_nb.load(hybrid.path)
    ms = ["Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)", "Synchronization Time(ms)"]
    stacked = PandasInputs(fresh.ranks).stacked("communication_time", ["Iteration ID", *ms])
    wait = T.rank_step_wait(T.rank_step_wait_totals(stacked))
    assert len(wait) == 8 * 2 and (wait["Collectives"] > 0).all()
    pd.testing.assert_frame_equal(fresh.rank_step_wait, wait)
    pytest.importorskip("dask.dataframe", reason="the Dask engine needs the cluster extra")
    dask = fresh.tables("dask", scheduler="sync")
    assert dask.inputs.exports == {} and sorted(dask.inputs.runs) == list(range(8))
    for name in ClusterTables.NAMES:
        pd.testing.assert_frame_equal(getattr(dask, name), getattr(fresh.tables("pandas"), name), obj=name)
    run = fresh.rank(5).run
    chunks = sorted(run.path.glob("*/data/*.npy"))
    assert len(chunks) >= 10
    for chunk in chunks:
        kind = chunk.name.split(".", 1)[0]
        device = int(chunk.parent.parent.name[7:]) if chunk.parent.parent.name.startswith("device_") else 0
        np.testing.assert_array_equal(run.load(kind, device), np.load(chunk, allow_pickle=False), err_msg=kind)
