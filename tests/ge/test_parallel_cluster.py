"""Parallel LLM steps on a simulated cluster: every rank's run directory, its groups and collectives,
groups that end together, sends that meet receives, the pipeline bubble, expert skew, and refused runs."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis.cluster.profile import ClusterProfile
from geprof_nb.analysis.rundir import RunDir
from geprof_nb.ge.cluster import ClusterOptionError, Faults
from geprof_nb.ge.runtime import MODEL_IDS
from geprof_nb.prof import hash_dict, rawdata, shared_files
from geprof_nb.prof.rawdata import NO_PEER

P = ge.Parallel
#: Stages whose compute dwarfs their activations' transfers (8192 wide, 2 layers a stage, a tiny
#: vocabulary): the pipeline's idle share is Megatron's formula's, the sends and receives a point of it.
BALANCED = dict(seq_len=2048, hidden=8192, heads=64, kv_heads=64, ffn=22016, vocab=256)


def run(tmp_path: Path, graph: ge.Graph, ranks: int, steps: int = 2, faults: dict | None = None,
        per_node: int | None = None, **profiling: str) -> ClusterProfile:
    opts = {"output": str(tmp_path), "task_trace": "on", "hccl": "on", **profiling}
    assert ge.GEInitialize({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": json.dumps(opts),
                            "geprof.clock": "virtual"}) == ge.SUCCESS
    options = {"ge.exec.rankSize": str(ranks)}
    if faults:
        options["geprof.faults"] = json.dumps(faults)
    if per_node:
        options["geprof.ranksPerNode"] = str(per_node)
    try:
        s = ge.Session(options=options)
        assert s.add_graph(1, graph) == ge.SUCCESS
        for _ in range(steps):
            assert s.run_graph(1) == ge.SUCCESS, ge.GEGetErrorMsg()
    finally:
        ge.GEFinalize()
    (root,) = tmp_path.glob("CLUSTER_*")
    return geprof_nb.load(root)


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory) -> ClusterProfile:
    """tiny-llama at tp2 pp2 dp2, 4 micro-batches, 2 steps."""
    g = ge.models.llm("tiny-llama", seq_len=256, parallel=P(tp=2, pp=2, dp=2, micro_batches=4))
    return run(tmp_path_factory.mktemp("hybrid"), g, 8)


def _ops(p) -> tuple[np.ndarray, dict]:
    run_dir = RunDir(p.path)
    return run_dir.load("hccl_op", p.device_id), run_dir.hashes


def test_every_rank_records_its_groups_and_the_group_of_every_collective(hybrid):
    assert list(hybrid.ranks) == list(range(8))
    for r, p in hybrid.ranks.items():
        info = p.info["parallel"]
        assert info["distributed_args"]["rank"] == r and info["distributed_args"]["world_size"] == 8
        groups = info["parallel_group_info"]
        names = {v["group_name"]: v["global_ranks"] for v in groups.values()}
        stage, local = divmod(r, 4)
        assert names["tp"] == [stage * 4 + local // 2 * 2, stage * 4 + local // 2 * 2 + 1]
        assert names["pp"] == [local, 4 + local] and names["dp"] == [stage * 4 + local % 2, stage * 4 + local % 2 + 2]
        assert info["pp_info"] == {"microbatch_num": 4, "pp_type": "1f1b", "virtual_stages": 1}
        rec, hashes = _ops(p)
        kinds = Counter(groups[hashes[int(g)]]["group_name"] for g in rec["group"])
        # per micro-batch on stage 0: the embedding's and 2 per layer of 4 forward, 2 per layer backward;
        # on stage 1: 2 per layer and the loss's 3 forward, 2 per layer and the head's input backward
        tp = 4 * ((1 + 2 * 4) + 2 * 4) if stage == 0 else 4 * ((2 * 4 + 3) + (2 * 4 + 1))
        assert kinds == {"tp": tp, "dp": 1, "pp": 8}
        # Megatron's volumes: every tensor-parallel collective of a layer moves b x s x h elements (256 x 256);
        # the loss's three move one value per token
        tp_counts = Counter(int(n) for g, n in zip(rec["group"], rec["count"])
                            if groups[hashes[int(g)]]["group_name"] == "tp")
        assert tp_counts == ({256 * 256: tp} if stage == 0 else {256 * 256: tp - 12, 256: 12})
        for g, rank_size, group_rank in zip(rec["group"], rec["rank_size"], rec["group_rank"]):
            members = groups[hashes[int(g)]]["global_ranks"]
            assert (rank_size, members[group_rank]) == (len(members), r)
        peers = rec["peer_rank"][rec["peer_rank"] != NO_PEER]
        assert len(peers) == 8 and set(peers.tolist()) == {local + 4 * (1 - stage)}  # the other stage's rank


#: The tables a rank's run gives on its own (loaded as one run, not through its cluster).
RANK_TABLES = ("op_summary", "task_time", "step_trace", "hccl_tasks", "communication_statistic", "operator_memory",
               "msprof_tx")


def test_a_stages_replicas_share_their_static_files_and_each_rank_gives_the_same_tables(tmp_path, monkeypatch):
    """Two servers of two cards (tp2 pp2 dp2): ranks r and r + 2 are a stage's data-parallel replicas on the same
    device id, whose static descriptions are one file on disk (the host's are one file for the whole stage, whose
graph every rank runs); every rank's tables are those of a run whose
    files were not shared."""
    g = ge.models.llm("tiny-llama", seq_len=256, parallel=P(tp=2, pp=2, dp=2, micro_batches=4))
    shared = run(tmp_path / "shared", g, 8, per_node=2, task_memory="on")
    with monkeypatch.context() as m:
        m.setattr(shared_files, "link_identical", lambda runs: shared_files.Linked())
        m.setattr(hash_dict, "share_lines", lambda runs: 0)
        MODEL_IDS.restart()  # the same model id, as in a new process
        alone = run(tmp_path / "alone", g, 8, per_node=2, task_memory="on")
    for r, p in shared.ranks.items():
        replica, peer = shared.ranks[r ^ 2], shared.ranks[r ^ 1]  # its data-parallel and tensor-parallel peers
        for place in ("host/data/tensor_info.000000.npy", "host/data/node_basic_info.000000.npy",
                      f"device_{p.device_id}/data/op_cost.000000.npy"):
            assert os.path.samefile(p.path / place, replica.path / place), (r, place)
        assert os.path.samefile(p.path / f"device_{p.device_id}/data/task_track.000000.npy",
                                peer.path / f"device_{peer.device_id}/data/task_track.000000.npy")
        for place in ("host/data/tensor_info.000000.npy", "host/data/node_basic_info.000000.npy"):
            assert not os.path.samefile(p.path / place, shared.ranks[r ^ 4].path / place)  # the other stage's
        assert not os.path.samefile(p.path / f"device_{p.device_id}/data/hwts.000000.npy",
                                    replica.path / f"device_{p.device_id}/data/hwts.000000.npy")
        if 0 not in (r, r ^ 2):  # (rank 0's dictionary begins with what this process learned before)
            # the names its stage learned first are one file; its own communication groups' are its own
            shared_names, own_names = (p.path / name for name in (rawdata.HASH_DICT_SHARED_FILE, rawdata.HASH_DICT_FILE))
            assert os.path.samefile(shared_names, replica.path / rawdata.HASH_DICT_SHARED_FILE)
            assert own_names.stat().st_size < shared_names.stat().st_size
        assert RunDir(p.path).hashes == RunDir(alone.ranks[r].path).hashes
        own, plain = geprof_nb.load(p.path), geprof_nb.load(alone.ranks[r].path)
        for table in RANK_TABLES:
            got, want = getattr(own, table), getattr(plain, table)
            assert len(want), (r, table)
            pd.testing.assert_frame_equal(got, want, obj=f"rank {r} {table}")
    for p in alone.ranks.values():
        assert all(f.stat().st_nlink == 1 for f in p.path.rglob("*") if f.is_file())
        assert not (p.path / rawdata.HASH_DICT_SHARED_FILE).exists()


def _ends(p, op_type: str, bucket: bool = False) -> np.ndarray:
    """End (ns) of every execution of ``op_type``: the data-parallel buckets' or the others'."""
    rows = p._op_rows  # exact ns starts
    f = rows.frame
    sel = ((f["OP Type"] == op_type) & (f["Op Name"].str.contains("dp_bucket") == bucket)).to_numpy()
    return rows.start_ns[sel] + np.rint(f["Task Duration(us)"][sel].to_numpy() * 1000).astype(np.int64)


def test_a_group_ends_its_collectives_together_and_a_send_with_its_receive(hybrid):
    tp0, tp1, tp2 = (_ends(hybrid.rank(r), "HcomAllReduce") for r in (0, 1, 2))
    # 0 and 1 are one tensor-parallel group, 2 is in the other one of stage 0; 0 and 2 are a data-parallel group
    assert len(tp0) == 2 * 68 and np.array_equal(tp0, tp1) and not np.array_equal(tp0, tp2)
    dp0, dp1, dp2 = (_ends(hybrid.rank(r), "HcomAllReduce", bucket=True) for r in (0, 1, 2))
    assert len(dp0) == 2 and np.array_equal(dp0, dp2) and not np.array_equal(dp0, dp1)
    sends = _ends(hybrid.rank(0), "HcomSend")  # activations of rank 0 to rank 4, and their gradients back
    assert len(sends) == 8 and np.array_equal(sends, _ends(hybrid.rank(4), "HcomReceive"))
    assert np.array_equal(_ends(hybrid.rank(4), "HcomSend"), _ends(hybrid.rank(0), "HcomReceive"))


def test_pipeline_passes_are_mstx_ranges_timed_by_their_tasks(hybrid):
    tx = hybrid.rank(4).msprof_tx
    passes = tx[tx["domain"] == "pipeline"]
    assert len(passes) == 2 * 4 * 2  # two steps of 4 micro-batches, forward and backward
    assert list(passes["message"][:4]) == ["forward_step micro_batch=0 model_chunk=0",
                                           "backward_step micro_batch=0 model_chunk=0",
                                           "forward_step micro_batch=1 model_chunk=0",
                                           "backward_step micro_batch=1 model_chunk=0"]
    assert (passes["End_time(us)"] > passes["Start_time(us)"]).all()
    assert (np.diff(passes["Start_time(us)"].to_numpy()) > 0).all()  # one after the other on the stage


def _bubbles(c: ClusterProfile, steps: int = 2) -> list[float]:
    """Each stage's idle share of the last step's pipeline (first pass start to last pass end, over all
    stages), from the pass ranges."""
    spans = {}
    for r, p in c.ranks.items():
        tx = p.msprof_tx
        tx = tx[tx["domain"] == "pipeline"]
        spans[r] = tx.iloc[len(tx) // steps * (steps - 1):]
    lo = min(t["Start_time(us)"].min() for t in spans.values())
    hi = max(t["End_time(us)"].max() for t in spans.values())
    return [1 - (t["End_time(us)"] - t["Start_time(us)"]).sum() / (hi - lo) for t in spans.values()]


@pytest.mark.parametrize("parallel", [P(pp=4, micro_batches=8),
                                      P(pp=4, micro_batches=8, schedule="interleaved", virtual_stages=2),
                                      P(pp=2, micro_batches=4)], ids=["1F1B-p4-m8", "interleaved-p4-m8-v2", "1F1B-p2-m4"])
def test_balanced_stages_idle_as_the_schedules_formula_says(tmp_path, parallel):
    shapes = {**BALANCED, "layers": 2 * parallel.pp}  # 2 layers per stage (one per chunk interleaved)
    c = run(tmp_path, ge.models.llm("tiny-llama", parallel=parallel, **shapes), parallel.world_size)
    p, m, v = parallel.pp, parallel.micro_batches, parallel.virtual_stages
    expected = (p - 1) / (v * m + p - 1)  # 3/11 = 0.273, 3/19 = 0.158, 1/5 = 0.2
    for bubble in _bubbles(c):
        assert expected <= bubble <= expected + 0.02  # the sends and receives add what they take


def _step_us(c: ClusterProfile) -> float:
    return max(float(p.step_trace["Iteration Time(us)"].iloc[-1]) for p in c.ranks.values())


def test_expert_skew_slows_the_step_and_loads_the_popular_experts_ranks(tmp_path):
    g = ge.models.llm("tiny-moe", seq_len=1024, parallel=P(dp=4, ep=4, micro_batches=2))
    even = run(tmp_path / "even", g, 4)
    skewed = run(tmp_path / "skew", g, 4, faults={"expert_skew": 2.0})
    assert _step_us(skewed) > 1.1 * _step_us(even)
    tokens = {r: p.info["parallel"]["moe"] for r, p in skewed.ranks.items()}
    assert [t["experts"] for t in tokens.values()] == [[0], [1], [2], [3]]
    routes = 4 * 1024 * 2  # 4 ranks' tokens, 2 experts each
    for layer in map(str, range(4)):
        counts = [t["tokens_per_micro_batch"][layer][0] for t in tokens.values()]
        assert abs(sum(counts) - routes) <= 4 and max(counts) <= routes // 2  # top 2: at most 1/2 each
    assert [p.info["parallel"]["moe"]["tokens_per_micro_batch"]["0"] for p in even.ranks.values()] == [[2048]] * 4
    # rank by rank, the expert matmuls take as long as the tokens they get
    busy = {r: p.op_summary.loc[p.op_summary["OP Type"] == "GroupedMatmul", "Task Duration(us)"].sum()
            for r, p in skewed.ranks.items()}
    load = {r: sum(t["tokens_per_micro_batch"][str(i)][0] for i in range(4)) for r, t in tokens.items()}
    assert max(busy, key=busy.get) == max(load, key=load.get)
    assert min(busy, key=busy.get) == min(load, key=load.get)


@pytest.mark.parametrize("value, pattern", [
    ("x", r"geprof.faults.expert_skew: 'x' is not a number; accepted: a Zipf exponent in \[0, 8\]"),
    (9, r"geprof.faults.expert_skew: 9 is out of range; accepted: a Zipf exponent in \[0, 8\]"),
])
def test_a_bad_expert_skew_is_refused_naming_the_field(value, pattern):
    with pytest.raises(ClusterOptionError, match=pattern):
        Faults.parse({"expert_skew": value}, 4)
    assert Faults.parse('{"expert_skew": 1.5}', 4).to_dict() == {"expert_skew": 1.5}


@pytest.mark.parametrize("ranks", [1, 4])
def test_a_rank_count_other_than_the_world_size_is_refused(ranks):
    g = ge.models.llm("tiny-llama", seq_len=64, parallel=P(tp=2, pp=2, dp=2))
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    try:
        s = ge.Session(options={"ge.exec.rankSize": str(ranks)})
        assert s.add_graph(1, g) == ge.SUCCESS
        assert s.run_graph(1) == ge.PARAM_INVALID
        assert (f"ge.exec.rankSize={ranks}, but graph 'tiny-llama' is tiny-llama (tp=2, pp=2, dp=2, 1 micro-batches, "
                "1F1B): world size 8 (tp x pp x dp); run it on 8 ranks (ge.exec.rankSize=8, %%geprof --ranks 8)"
                ) in ge.GEGetErrorMsg()
    finally:
        ge.GEFinalize()


def test_the_magics_rank_count_runs_a_parallel_graph(tmp_path):
    g = ge.models.llm("tiny-llama", seq_len=64, parallel=P(tp=2, dp=2))
    opts = {"output": str(tmp_path), "task_trace": "on"}
    with ge.simulation_settings(ranks=4, clock_mode="virtual"):
        assert ge.GEInitialize({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": json.dumps(opts)}) \
            == ge.SUCCESS
        try:
            s = ge.Session()
            assert s.add_graph(1, g) == ge.SUCCESS
            assert s.run_graph(1) == ge.SUCCESS, ge.GEGetErrorMsg()
        finally:
            ge.GEFinalize()
    (root,) = tmp_path.glob("CLUSTER_*")
    assert sorted(p.name for p in root.iterdir()) == [f"rank_{r}" for r in range(4)]
