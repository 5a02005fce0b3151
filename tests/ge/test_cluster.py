"""Several ranks simulated together: layout, synchronised collectives, hierarchical AllReduce, faults, errors."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis.cluster.profile import ClusterProfile
from geprof_nb.ge import hccl
from geprof_nb.ge.cluster import ClusterOptionError, Faults
from geprof_nb.ge.device import PRESETS
from geprof_nb.prof.rawdata import MemcpyDirection, RtTaskType

STEPS = 3


def run_cluster(tmp_path, ranks: int, steps: int = STEPS, faults: dict | None = None, per_node: int | None = None,
                hccl_on: str = "on", graph=None, **profiling: str) -> ClusterProfile:
    opts = {"output": str(tmp_path), "training_trace": "on", "task_trace": "on", "hccl": hccl_on, **profiling}
    assert ge.GEInitialize({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": json.dumps(opts),
                            "geprof.clock": "virtual"}) == ge.SUCCESS
    options = {"ge.exec.rankSize": str(ranks)}
    if faults:
        options["geprof.faults"] = json.dumps(faults)
    if per_node:
        options["geprof.ranksPerNode"] = str(per_node)
    s = ge.Session(options=options)
    graph = graph or ge.models.mlp(batch_size=16, in_features=256, hidden=(512, 512), world_size=ranks)
    assert s.add_graph(1, graph) == ge.SUCCESS
    for _ in range(steps):
        assert s.run_graph(1) == ge.SUCCESS, ge.GEGetErrorMsg()
    ge.GEFinalize()
    c = geprof_nb.load(tmp_path)
    assert isinstance(c, ClusterProfile)
    return c


def collectives(c: ClusterProfile) -> pd.DataFrame:
    """Every collective execution on every rank: start and end (ns)."""
    rows = []
    for r, p in c.ranks.items():
        op_rows = p._op_rows  # exact ns starts (op_summary's float us cannot hold ns at epoch scale)
        sel = (op_rows.frame["OP Type"] == "HcomAllReduce").to_numpy()
        start = op_rows.start_ns[sel]
        end = start + (op_rows.frame["Task Duration(us)"][sel] * 1000).round().astype(np.int64).to_numpy()
        rows.append(pd.DataFrame({"rank": r, "k": np.arange(len(start)), "start": start, "end": end}))
    return pd.concat(rows, ignore_index=True)


# ------------------------------------------------------------------------------------- layout
def test_one_run_directory_per_rank_under_a_cluster_root(tmp_path):
    c = run_cluster(tmp_path, 4)
    assert [p.name for p in tmp_path.iterdir()] == [c.path.name] and c.path.name.startswith("CLUSTER_")
    assert sorted(p.name for p in c.path.iterdir()) == ["rank_0", "rank_1", "rank_2", "rank_3"]
    assert list(c.ranks) == [0, 1, 2, 3]
    for r, p in c.ranks.items():
        assert p.path.parent.name == f"rank_{r}" and p.path.name.startswith("PROF_")
        info = p.info["cluster"]
        assert info["rank"] == r and info["world_size"] == 4 and info["ranks_per_node"] == 8
        assert p.device_id == r  # device r % 8 of its server
        assert list(p.step_trace["Iteration ID"]) == [1, 2, 3]
        assert p.complete
    kernels = {r: len(p.op_summary) for r, p in c.ranks.items()}
    assert len(set(kernels.values())) == 1 and kernels[0] > 0
    assert not c.rank(0).api_statistic.empty  # the process's host layers are rank 0's


def test_a_cluster_root_is_numbered_as_its_rank_0_run_and_opens_as_the_newest(tmp_path, monkeypatch):
    """The root takes its rank 0 run's number: a single run made after it with the clock an hour back is still
    the newest, and a cluster made after that one is newer again."""
    from geprof_nb.prof import msprof

    first = run_cluster(tmp_path, 2, steps=1)
    assert first.path.name.startswith("CLUSTER_000001_") and first.rank(0).path.name.startswith("PROF_000001_")
    hour_ago = msprof.time.time() - 3600
    monkeypatch.setattr(msprof.time, "time", lambda: hour_ago)
    opts = {"ge.exec.profilingMode": "1", "geprof.clock": "virtual",
            "ge.exec.profilingOptions": json.dumps({"output": str(tmp_path), "training_trace": "on"})}
    assert ge.GEInitialize(opts) == ge.SUCCESS
    s = ge.Session()
    assert s.add_graph(1, ge.models.mlp(batch_size=4, in_features=16, hidden=(16,))) == ge.SUCCESS
    assert s.run_graph(1) == ge.SUCCESS
    assert ge.GEFinalize() == ge.SUCCESS
    monkeypatch.undo()
    single = geprof_nb.load(tmp_path)
    assert single.path.name.startswith("PROF_000002_") and single.path.name[12:29] < first.path.name[15:32]
    again = run_cluster(tmp_path, 2, steps=1)
    assert again.path.name.startswith("CLUSTER_000003_") and geprof_nb.load(tmp_path).path == again.path


@pytest.mark.parametrize("failing, lost, ranks_kept", [
    ("CLUSTER_", 3, [0]),  # no root: rank 0's run goes on alone, where it is
    ("rank_2", 1, [0, 1, 3]),  # one rank's run directory: the others are there
])
def test_a_cluster_whose_directories_cannot_be_made_counts_the_ranks_lost(tmp_path, monkeypatch, capsys, failing,
                                                                          lost, ranks_kept):
    import errno

    real_mkdir = Path.mkdir

    def mkdir(path, *args, **kwargs):
        if failing in path.name:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real_mkdir(path, *args, **kwargs)

    opts = {"output": str(tmp_path), "training_trace": "on", "task_trace": "on"}
    assert ge.GEInitialize({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": json.dumps(opts),
                            "geprof.clock": "virtual"}) == ge.SUCCESS
    monkeypatch.setattr(Path, "mkdir", mkdir)
    s = ge.Session(options={"ge.exec.rankSize": "4"})
    assert s.add_graph(1, ge.models.mlp(batch_size=4, in_features=16, hidden=(16,), world_size=4)) == ge.SUCCESS
    for _ in range(2):
        assert s.run_graph(1) == ge.SUCCESS
    assert ge.GEFinalize() == ge.FAILED
    monkeypatch.undo()
    assert f": not written: {lost} cluster_ranks (their run directories); " in ge.GEGetErrorMsg()
    loaded = geprof_nb.load(tmp_path)
    rank0 = loaded if not isinstance(loaded, ClusterProfile) else loaded.rank(0)
    assert sorted(loaded.ranks) == ranks_kept if isinstance(loaded, ClusterProfile) else ranks_kept == [0]
    assert rank0.dropped == {"cluster_ranks (not written)": lost} and len(rank0.step_trace) == 2
    assert (f"{lost} ranks of the simulated cluster could not be written (their run directories could not be made: "
            "disk full or not writable): they are not in the cluster") in rank0.notes
    assert sum("not everything could be written" in line for line in capsys.readouterr().err.splitlines()) == 1


#: A cluster job that dies mid-run: no GEFinalize, what it reported flushed (a checkpoint's worth).
DIES_MID_RUN = """
import json, os, sys
from geprof_nb import ge
from geprof_nb.prof import msprof
opts = {"output": sys.argv[1], "training_trace": "on", "task_trace": "on"}
assert ge.GEInitialize({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": json.dumps(opts),
                        "geprof.clock": "virtual"}) == ge.SUCCESS
s = ge.Session(options={"ge.exec.rankSize": "2"})
assert s.add_graph(1, ge.models.mlp(batch_size=4, in_features=16, hidden=(16,), world_size=2)) == ge.SUCCESS
for _ in range(int(sys.argv[2])):
    assert s.run_graph(1) == ge.SUCCESS
s.model(1).flush()  # the steps reach msprof batch by batch, every rank's together
msprof.lib.flush()
print(msprof.lib.run_dir, flush=True)
os._exit(0)  # dies: the run is never finalised
"""


def test_a_cluster_job_that_dies_mid_run_has_every_rank_under_the_cluster_root(tmp_path):
    """Rank 0's run is filed under the cluster root when the cluster opens, not when the run is finalised:
    a job that never gets there leaves a cluster root that loads with rank 0 in it."""
    steps = 12
    done = subprocess.run([sys.executable, "-c", DIES_MID_RUN, str(tmp_path), str(steps)], capture_output=True,
                          text=True, timeout=300, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    (root,) = tmp_path.glob("CLUSTER_*")
    assert not list(tmp_path.glob("PROF_*"))  # nothing left beside the cluster root
    assert Path(done.stdout.strip()).parent == root / "rank_0"  # where the open run was while the job ran
    c = geprof_nb.load(root)
    assert isinstance(c, ClusterProfile) and list(c.ranks) == [0, 1]
    for p in c.ranks.values():
        assert not p.complete and p.info["status"] == "running"
        assert list(p.step_trace["Iteration ID"]) == list(range(1, steps + 1))
    assert not c.rank(0).api_statistic.empty  # rank 0's host layers (reported before the cluster opened) too


def test_collectives_end_together_at_the_last_arrival_plus_the_transfer(tmp_path):
    c = run_cluster(tmp_path, 4, faults={"slow_ranks": {"2": 1.5}})
    ops = collectives(c)
    per = ops.groupby("k")
    assert (per["end"].nunique() == 1).all()  # every rank's copy of an execution ends at the same ns
    last = ops.loc[per["start"].idxmax()]
    assert set(last["rank"]) == {2}  # the slowed rank arrives last at every collective
    graph = ge.models.mlp(batch_size=16, in_features=256, hidden=(512, 512), world_size=4)
    sizes = sorted({int(n.attrs["rank_size"]) for n in graph.nodes if n.type == "HcomAllReduce"})
    assert sizes == [4]
    transfer = (per["end"].first() - per["start"].max()).to_numpy()
    assert (transfer > 0).all() and np.ptp(transfer) < transfer.max() * 0.5


def test_early_ranks_wait_as_notify_wait_and_the_slow_rank_computes_longer(tmp_path):
    fast = run_cluster(tmp_path / "even", 4)
    slow = run_cluster(tmp_path / "slow", 4, faults={"slow_ranks": {"3": 1.3}})
    comp = {r: p.step_breakdown["Computing"].mean() for r, p in slow.ranks.items()}
    assert comp[3] > 1.1 * max(comp[r] for r in (0, 1, 2))
    assert comp[0] == pytest.approx(fast.rank(0).step_breakdown["Computing"].mean(), rel=0.05)

    def wait(p) -> float:
        h = p.hccl_tasks
        return float(h.loc[h["Task Name"] == "Notify_Wait", "Duration(us)"].sum())

    waits = {r: wait(p) for r, p in slow.ranks.items()}
    extra = waits[0] - wait(fast.rank(0))
    assert extra > 0 and waits[3] < min(waits[r] for r in (0, 1, 2))
    # the fast ranks' extra wait is about the slow rank's extra compute before the collectives
    before = slow.rank(3).step_trace["FP to BP Time(us)"].sum() - slow.rank(0).step_trace["FP to BP Time(us)"].sum()
    assert extra == pytest.approx(before, rel=0.5)


def test_every_rank_records_rank_0s_pmu_description_and_values(tmp_path):
    # only rank 0's info.json named the aic_metrics group, so ranks 1.. had no PMU columns
    c = run_cluster(tmp_path, 4, steps=2, faults={"slow_ranks": {"2": 1.3}}, aic_metrics="PipeUtilization")
    described = {r: p.info["pmu_events"] for r, p in c.ranks.items()}
    assert described[0]["metrics"] == ["PipeUtilization"] and set(described[0]) == {"aic", "aiv", "metrics"}
    assert all(d == described[0] for d in described.values())
    columns = list(c.rank(0).op_summary.columns)
    assert {"aicore_time(us)", "aic_mac_ratio", "aic_mte2_time(us)", "aiv_vec_ratio", "aiv_mte3_ratio"} <= set(columns)
    cube_time = {}
    for r, p in c.ranks.items():
        s = p.op_summary
        assert list(s.columns) == columns, r
        cube, vector = s[s["Task Type"] == "AI_CORE"], s[s["Task Type"] == "AI_VECTOR_CORE"]
        assert len(cube) and len(vector), r
        assert cube[["aicore_time(us)", "aic_mac_ratio", "aic_mte2_time(us)"]].notna().all().all(), r
        assert vector[["aiv_time(us)", "aiv_vec_ratio", "aiv_mte3_ratio"]].notna().all().all(), r
        cube_time[r] = cube["aicore_time(us)"].astype(float).mean()
    # the counters are each rank's own: the slow rank's cube kernels run 1.3x as long
    assert cube_time[2] == pytest.approx(1.3 * cube_time[0], rel=0.05)
    assert cube_time[1] == pytest.approx(cube_time[0], rel=0.05)


def test_a_slow_ranks_pmu_agrees_with_its_task_times(tmp_path):
    # the factor stretched the durations but cycles were capped at the jitter clip (1.5x): a 3x rank's
    # MatMul ran 14-15 us with aicore_time 6.8 us; a factor < 1 shrank the cycles below the pipes' (ratio 1.69)
    c = run_cluster(tmp_path, 4, faults={"slow_ranks": {"1": 3.0}}, aic_metrics="PipeUtilization")
    overhead_us = PRESETS["Ascend910B"].task_overhead_ns / 1000
    for r in (0, 1):
        s = c.rank(r).op_summary
        ratios = s[[col for col in s.columns if col.endswith("_ratio")]].astype(float)
        assert ratios.notna().any().all() and (ratios.fillna(0) <= 1).all().all(), r
        for task_type, time_col in (("AI_CORE", "aicore_time(us)"), ("AI_VECTOR_CORE", "aiv_time(us)")):
            k = s[s["Task Type"] == task_type]
            assert len(k), (r, task_type)
            busy = k["Task Duration(us)"].astype(float) - overhead_us  # a kernel's head/tail is not core time
            assert np.allclose(k[time_col].astype(float), busy, atol=0.01), (r, task_type)
    cube = {r: c.rank(r).op_summary.query("`Task Type` == 'AI_CORE'")["aic_mac_ratio"].astype(float).mean()
            for r in (0, 1)}
    assert cube[1] == pytest.approx(cube[0] / 3, rel=0.05)  # the same pipe work in 3x the cycles: stalls


def test_one_rank_option_is_a_plain_single_device_run(tmp_path):
    opts = {"output": str(tmp_path), "task_trace": "on"}
    ge.GEInitialize({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": json.dumps(opts)})
    s = ge.Session(options={"ge.exec.rankSize": "1"})
    s.add_graph(1, ge.models.mlp(batch_size=4))
    s.run_graph(1)
    ge.GEFinalize()
    assert [p.name[:5] for p in tmp_path.iterdir()] == ["PROF_"]


# ------------------------------------------------------------------------------- algorithm
def test_hierarchical_allreduce_across_servers(tmp_path):
    c = run_cluster(tmp_path, 8, steps=1, per_node=4)
    h = c.rank(1).hccl_tasks
    moves = h[h["Task Name"].isin(["Memcpy", "RDMASend"])]
    first = moves[moves["Op Name"] == moves["Op Name"].iloc[0]]
    # rank 1 (server 0, local 1): 3 reduce-scatter + 3 all-gather copies to rank 2 over HCCS inside its server,
    # 2 x (2 - 1) sends to rank 5 over RoCE (the ring of local index 1 across the two servers)
    links = first.groupby(["Dst Rank", "Link Type", "Task Name"]).size().to_dict()
    assert links == {(2, "HCCS", "Memcpy"): 6, (5, "ROCE", "RDMASend"): 2}
    links0 = hccl.Links(ranks_per_node=4)
    nbytes = 1 << 20
    n = 8
    ideal = hccl.collective_duration_ns("HcomAllReduce", nbytes, n, links0)
    intra, inter = math.ceil(nbytes / 4), math.ceil(math.ceil(nbytes / 4) / 2)
    by_hand = (3 * (links0.hccs_latency_ns + math.ceil(intra * 1e9 / links0.hccs_bandwidth)
                    + math.ceil(intra * 1e9 / links0.reduce_bandwidth))
               + 1 * (links0.roce_latency_ns + math.ceil(inter * 1e9 / links0.roce_bandwidth)
                      + math.ceil(inter * 1e9 / links0.reduce_bandwidth))
               + 1 * (links0.roce_latency_ns + math.ceil(inter * 1e9 / links0.roce_bandwidth))
               + 3 * (links0.hccs_latency_ns + math.ceil(intra * 1e9 / links0.hccs_bandwidth)))
    assert ideal == by_hand
    flat = hccl.collective_duration_ns("HcomAllReduce", nbytes, n, hccl.Links(ranks_per_node=8))
    assert flat != ideal


def test_a_slow_link_slows_its_rings_and_its_own_copies(tmp_path):
    even = hccl.Links()
    slow = hccl.Links(slow_links=((0, 1, 0.25),))
    nbytes = 8 << 20
    assert hccl.collective_duration_ns("HcomAllReduce", nbytes, 8, slow) > \
        1.5 * hccl.collective_duration_ns("HcomAllReduce", nbytes, 8, even)
    c = run_cluster(tmp_path, 4, steps=1, faults={"slow_links": {"0-1": 0.25}})
    h0, h1 = c.rank(0).hccl_tasks, c.rank(1).hccl_tasks
    bw0 = h0.loc[(h0["Task Name"] == "Memcpy") & (h0["Dst Rank"] == 1), "Bandwidth(GB/s)"].median()
    bw1 = h1.loc[(h1["Task Name"] == "Memcpy") & (h1["Dst Rank"] == 2), "Bandwidth(GB/s)"].median()
    assert bw0 == pytest.approx(bw1 * 0.25, rel=0.05)


def test_host_jitter_and_loader_stalls_delay_their_ranks(tmp_path):
    base = run_cluster(tmp_path / "base", 4, steps=4)
    c = run_cluster(tmp_path / "stall", 4, steps=4,
                    faults={"loader_stall": {"every": 2, "us": 2000, "ranks": [1]}, "host_jitter_us": {"2": 500}})
    fp = {r: p.step_trace.set_index("Iteration ID")["FP Start(us)"] for r, p in c.ranks.items()}
    lag = fp[1] - fp[0]
    assert (lag[[2, 4]] > 1900).all() and (lag[[1, 3]].abs() < 1900).all()  # rank 1 stalls on steps 2 and 4
    it = {r: p.step_trace["Iteration Time(us)"].sum() for r, p in c.ranks.items()}
    assert it[0] > base.rank(0).step_trace["Iteration Time(us)"].sum() + 3000  # everyone waits for rank 1
    assert (fp[2] - fp[0]).iloc[1:].abs().max() > 0  # rank 2's launches jitter


# ------------------------------------------------------------------------------------ errors
@pytest.mark.parametrize("faults, message", [
    ("{not json", "geprof.faults: not valid JSON"),
    ('["slow_ranks"]', "expected a JSON object"),
    ('{"slow_cards": {}}', "unknown field 'slow_cards'; accepted: slow_ranks, slow_links"),
    ('{"slow_ranks": {"9": 1.3}}', "rank 9 is out of range; accepted: 0 .. 3"),
    ('{"slow_ranks": {"1": "fast"}}', "'fast' is not a number"),
    ('{"slow_ranks": {"1": 0.5}}', "slow_ranks[1]: 0.5 is out of range; accepted: a factor in [1, 100]"),
    ('{"slow_links": {"0-1": 2}}', "accepted: a bandwidth factor in (0, 1]"),
    ('{"slow_links": {"0_1": 0.5}}', "expected 'src-dst' ranks"),
    ('{"loader_stall": 5}', "loader_stall: expected an object"),
])
def test_bad_faults_name_the_field(faults, message):
    with pytest.raises(ClusterOptionError) as err:
        Faults.parse(faults, 4)
    assert message in str(err.value)
    ge.GEInitialize({})
    with pytest.raises(ValueError, match="geprof.faults"):
        ge.Session(options={"ge.exec.rankSize": "4", "geprof.faults": faults})


def test_faults_round_trip_through_json():
    f = Faults.parse({"slow_ranks": {"3": 1.3}, "slow_links": [[0, 1, 0.5]], "host_jitter_us": {"2": 100},
                      "loader_stall": {"every": 5, "us": 300}}, 8)
    assert Faults.parse(json.dumps(f.to_dict()), 8) == f
    assert f.slow_links == ((0, 1, 0.5),) and f.loader_ranks == ()


@pytest.mark.parametrize("rank_size, message", [("0", "accepted: an integer in [1, 65536]"),
                                                ("two", "is not a number"), ("2.5", "is not an integer")])
def test_bad_rank_size_is_refused(rank_size, message):
    ge.GEInitialize({})
    with pytest.raises(ValueError, match=r"ge\.exec\.rankSize") as err:
        ge.Session(options={"ge.exec.rankSize": rank_size})
    assert message in str(err.value)


def test_graph_built_for_another_world_size_is_refused_at_build(tmp_path):
    ge.GEInitialize({})
    s = ge.Session(options={"ge.exec.rankSize": "4"})
    s.add_graph(1, ge.models.mlp(batch_size=4, world_size=8))
    assert s.run_graph(1) == ge.PARAM_INVALID
    assert "built for world_size 8; build it with world_size=4" in ge.GEGetErrorMsg()
    s.add_graph(2, ge.models.mlp(batch_size=4, world_size=4, dynamic=True))
    assert s.run_graph(2) == ge.PARAM_INVALID
    assert "runs static graphs" in ge.GEGetErrorMsg()


def test_a_slow_link_on_another_servers_ring_sets_the_pace_of_the_whole_collective(tmp_path):
    c = run_cluster(tmp_path, 8, steps=1, per_node=4, faults={"slow_links": {"5-6": 0.5}})
    for r, dst, bw in ((5, 6, 45.0), (1, 2, 90.0)):  # server 1's slow link; server 0's ring is unaffected
        h = c.rank(r).hccl_tasks
        assert h.loc[(h["Task Name"] == "Memcpy") & (h["Dst Rank"] == dst), "Bandwidth(GB/s)"].median() == \
            pytest.approx(bw, rel=0.01)
    ops = collectives(c)
    span = (ops["end"] - ops.groupby("k")["start"].transform("max")).iloc[0]
    links = hccl.Links(ranks_per_node=4, slow_links=((5, 6, 0.5),))
    graph = ge.models.mlp(batch_size=16, in_features=256, hidden=(512, 512), world_size=8)
    node = next(n for n in graph.nodes if n.type == "HcomAllReduce")
    assert hccl.collective_duration_ns("HcomAllReduce", 1 << 20, 8, links, rank=5) > \
        hccl.collective_duration_ns("HcomAllReduce", 1 << 20, 8, links, rank=0)
    assert node is not None and span > 0
    # every rank's copy of the collective lasts at least the slow ring's time after the last arrival
    assert span >= hccl.cluster_duration_ns("HcomAllReduce", 0, 8, links)


def test_real_clock_does_not_count_the_other_ranks_simulation_as_host_time(tmp_path):
    opts = {"output": str(tmp_path), "training_trace": "on", "task_trace": "on", "hccl": "on"}
    ge.GEInitialize({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": json.dumps(opts)})
    s = ge.Session(options={"ge.exec.rankSize": "64"})
    s.add_graph(1, ge.models.mlp(batch_size=16, in_features=256, hidden=(512, 512), world_size=64))
    for _ in range(70):  # more steps than a batch holds (64): the other ranks are reported mid-run
        s.run_graph(1)
    ge.GEFinalize()
    c = geprof_nb.load(tmp_path)
    free = c.rank(0).step_breakdown.set_index("Step")["Free"]
    # reporting 63 ranks' 64 steps takes tens of ms of wall time; none of it may show up around step 65
    assert free[65:67].max() < 5 * free.iloc[2:].median()
    assert len(c.rank(63).step_trace) == 70


def test_every_rank_names_its_memory_tensors(tmp_path):
    # the plan's tensor ids were once cached across ranks, so only rank 0's hash dictionary named them
    opts = {"output": str(tmp_path), "task_trace": "on", "task_memory": "on"}
    assert ge.GEInitialize({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": json.dumps(opts),
                            "geprof.clock": "virtual"}) == ge.SUCCESS
    s = ge.Session(options={"ge.exec.rankSize": "4"})
    assert s.add_graph(1, ge.models.mlp(batch_size=16, in_features=256, hidden=(512, 512), world_size=4)) == ge.SUCCESS
    for _ in range(2):
        assert s.run_graph(1) == ge.SUCCESS
    ge.GEFinalize()
    c = geprof_nb.load(tmp_path)
    names = {r: set(p.operator_memory["Name"]) for r, p in c.ranks.items()}
    assert len(names) == 4 and len(names[0]) > 10
    for r, found in names.items():
        assert not [n for n in found if n.startswith("<unknown")], r
        assert found == names[0], r


def test_every_rank_records_the_input_copies_memcpy_info(tmp_path):
    c = run_cluster(tmp_path, 4, steps=2)
    graph = ge.models.mlp(batch_size=16, in_features=256, hidden=(512, 512), world_size=4)
    sizes = [n.outputs[0].nbytes for n in graph.nodes if n.type == "Data"]
    for r, p in c.ranks.items():
        memcpy = p.run.load("memcpy_info", p.device_id)
        track = p.run.load("task_track", p.device_id)
        copies = track["connection_id"][track["task_type"] == RtTaskType.MEMCPY_ASYNC]
        assert memcpy["connection_id"].tolist() == copies.tolist() and len(copies) == len(sizes), r
        assert memcpy["size"].tolist() == sizes, r
        assert set(memcpy["direction"].tolist()) == {MemcpyDirection.HOST_TO_DEVICE}, r
