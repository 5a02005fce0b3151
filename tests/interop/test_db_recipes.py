"""The real msprof-analyze's DB analyses (``cluster -m <recipe>``, ``advisor all``, ``compare``) on a simulated
cluster exported as torch_npu's (``format="db"``) and msprof's (``format="msprof_db"``) databases: no error line,
an output per recipe, and its figures those of geprof's own tables within 1 %.

The cluster: 4 ranks of a small ResNet-50 training, 2 steps, rank 2's kernels 1.3x as long, the HCCS link 1 -> 2 at
half bandwidth.  msprof-analyze exits 0 even when it fails (msprof_analyze_inputs.md pitfall 1), so every run is
checked for ``[ERROR]`` lines (:func:`helpers.msprof_analyze.analyze`) and its output tables are read.

Recipes run, on the torch_npu DB: cluster_time_summary, communication_group_map, communication_time_sum,
communication_matrix_sum, compute_op_sum, hccl_sum, cann_api_sum, free_analysis, slow_rank, freq_analysis (and
``-m all``, which the cluster advisor runs first); on msprof's DB: communication_group_map, communication_time_sum, communication_matrix_sum,
compute_op_sum, hccl_sum, cann_api_sum.

Recipes that do not apply, and why:

* mstx_sum: it counts mstx ranges that ran on the device (``connectionId`` of a device task) and ``marker_ex``
  start/stop pairs; ``ge.mstx``'s markers and ranges are host-only (msprof_tx's device times are N/A), so it finds
  no data, as it would on a real run with host-only markers;
* pp_chart: it needs pipeline-parallel ``forward`` / ``backward`` mstx markers on the device and ``pp_info`` in
  META_DATA, written by Megatron / MindSpeed under torch_npu (framework-only data), and a pipeline-parallel job;
* module_statistic: nn.Module ranges (mstx domain ``Module``) torch_npu records for a PyTorch model;
* ep_load_balance: MoE GroupedMatmul kernels and an expert-parallel group in ``parallel_group_info``; the simulated
  models have neither;
* operator_mfu: the per-op FLOPs torch_npu records as mstx ranges of domain ``mfu_flops`` (framework-only);
* on msprof's DB, cluster_time_summary reads its step split from torch_npu's analysis.db only (msprof's
  communication_analyzer.db has no StepTraceTime), free_analysis joins torch_npu's PYTORCH_API, and slow_rank and
  freq_analysis say "do not support msprof db now".
"""

from __future__ import annotations

import re
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from geprof_nb.analysis.sources.db_schema import group_hash
from helpers.cluster_testing import simulate_cluster
from helpers.geprof_testing import small_resnet
from helpers.msprof_analyze import MSPROF_ANALYZE, analyze

pytestmark = [pytest.mark.interop, pytest.mark.slow,
              pytest.mark.skipif(MSPROF_ANALYZE is None, reason="msprof-analyze is not installed (the interop extra)")]

RANKS, SLOW, SLOW_LINK = 4, 2, (1, 2)
#: The advisor's stack query uses GROUP_CONCAT(... ORDER BY ...), which SQLite parses from 3.44 on; with an older
#: SQLite (Debian 12's is 3.40) it logs this one error and skips that check.  A known gap of the tool, not of the
#: input: every other error line still fails the test.
OLD_SQLITE_ORDER_BY = r'near "ORDER": syntax error'


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("db_recipes")
    c = simulate_cluster(root / "sim", {"slow_ranks": {str(SLOW): 1.3}, "slow_links": {"1-2": 0.5}}, ranks=RANKS,
                         steps=2, graph=small_resnet(RANKS))
    return {"cluster": c, "root": root, "db": c.export(root / "db", format="db"),
            "msprof_db": c.export(root / "msprof_db", format="msprof_db")}


def recipe(cluster, fmt: str, name: str) -> tuple[dict[str, pd.DataFrame], str]:
    """Run ``cluster -m name`` on a copy of the ``fmt`` export (some recipes write into their input); its output
    tables and log."""
    root = cluster["root"] / f"{fmt}-{name}"
    shutil.copytree(cluster[fmt], root / "in")
    out = root / "out"
    out.mkdir()
    log = analyze(out, "cluster", "-d", str(root / "in"), "-m", name, "-o", str(out))
    db = out / "cluster_analysis_output" / "cluster_analysis.db"
    if not db.is_file():
        return {}, log
    conn = sqlite3.connect(db)
    try:
        names = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {n: pd.read_sql(f'SELECT * FROM "{n}"', conn) for n in names}, log
    finally:
        conn.close()


def close(theirs, ours, rel: float = 0.01) -> None:
    np.testing.assert_allclose(np.asarray(theirs, float), np.asarray(ours, float), rtol=rel, atol=1e-6)


FORMATS = ["db", "msprof_db"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_communication_group_map(cluster, fmt):
    tables, _ = recipe(cluster, fmt, "communication_group_map")
    (row,) = tables["CommunicationGroupMapping"].to_dict("records")
    assert row == {"type": "collective", "rank_set": "(0,1,2,3)", "group_name": group_hash("hccl_world_group"),
                   "group_id": "hccl_world_group", "pg_name": "dp"}


def test_cluster_time_summary_is_each_ranks_step_split(cluster):
    tables, _ = recipe(cluster, "db", "cluster_time_summary")
    t = tables["ClusterTimeSummary"].set_index(["rank", "step"])
    c = cluster["cluster"]
    assert sorted(t.index) == [(r, s) for r in range(RANKS) for s in (1, 2)]
    for r, p in c.ranks.items():
        b = p.step_breakdown.set_index("Step")
        mine = t.loc[r]
        close(mine["computation"], b["Computing"])
        close(mine["communicationNotOverlapComputation"], b["Communication(Not Overlapped)"])
        close(mine["communicationOverlapComputation"], b["Overlapped"])
        close(mine["communication"], b["Communication"])
        close(mine["free"] + mine["memoryNotOverlapComputationCommunication"], b["Free"])
        calls = p.source.api_calls()
        execute = calls[calls["api"] == "ModelExecute"].set_index("iteration")
        close(mine["stepTime"], (execute["end"] - execute["begin"]) / 1000)  # a step is its ModelExecute call
    # the wait stage: a rank's collectives less the fastest rank's, summed per step (the slow rank waits least)
    ct = pd.concat([p.communication_time.assign(rank=r) for r, p in c.ranks.items()])
    ct["wait"] = ct["Elapse Time(ms)"] - ct.groupby("Op Name")["Elapse Time(ms)"].transform("min")
    wait = ct.groupby(["rank", "Iteration ID"])["wait"].sum() * 1000
    close(t["communicationWaitStageTime"].sort_index(), wait.sort_index().to_numpy(), rel=0.01)
    assert t["communicationWaitStageTime"].groupby("rank").sum().idxmin() == SLOW


@pytest.mark.parametrize("fmt", FORMATS)
def test_communication_time_sum_is_communication_time(cluster, fmt):
    tables, _ = recipe(cluster, fmt, "communication_time_sum")
    t = tables["ClusterCommunicationTime"]
    t = t[t["hccl_op_name"] != "Total Op Info"]
    for r, p in cluster["cluster"].ranks.items():
        mine = t[t["rank_id"] == r].set_index("hccl_op_name").loc[p.communication_time["Op Name"]]
        ct = p.communication_time
        for theirs, ours in (("elapsed_time", "Elapse Time(ms)"), ("transit_time", "Transit Time(ms)"),
                             ("wait_time", "Wait Time(ms)"), ("synchronization_time", "Synchronization Time(ms)"),
                             ("idle_time", "Idle Time(ms)")):
            close(mine[theirs], ct[ours])
    band = tables["ClusterCommunicationBandwidth"]
    hccs = band[(band["band_type"] == "HCCS") & (band["hccl_op_name"] != "Total Op Info")]
    for r, p in cluster["cluster"].ranks.items():
        tasks = p.hccl_tasks
        sent = tasks[tasks["Task Name"].isin(["Memcpy", "Reduce_Inline"]) & (tasks["Link Type"] == "HCCS")]
        mine = hccs[hccs["rank_id"] == r].drop_duplicates(["step", "hccl_op_name"])
        close(mine["transit_size"].sum(), sent["Size(Byte)"].sum() / 1e6)


@pytest.mark.parametrize("fmt", FORMATS)
def test_communication_matrix_sum_names_the_slow_link(cluster, fmt):
    tables, _ = recipe(cluster, fmt, "communication_matrix_sum")
    m = tables["ClusterCommunicationMatrix"]
    m = m[(m["transport_type"] == "HCCS") & (m["hccl_op_name"] != "Total Op Info")]
    if fmt == "msprof_db":  # msprof's matrix is per op type: its -total rows sum every op
        m = m[m["hccl_op_name"].str.endswith("-total")]
    m = m.assign(src=m["src_rank"].astype(int), dst=m["dst_rank"].astype(int))
    links = m.groupby(["src", "dst"])[["transit_size", "transit_time"]].sum()
    bandwidth = links["transit_size"] / links["transit_time"]  # MB / ms = GB/s
    ours = cluster["cluster"].communication_matrix.set_index(["Src Rank", "Dst Rank"])
    ours = ours[ours["Link Type"] == "HCCS"]
    assert sorted(bandwidth.index) == sorted(ours.index)
    close(bandwidth.loc[ours.index], ours["Bandwidth(GB/s)"])
    assert bandwidth.idxmin() == SLOW_LINK == tuple(cluster["cluster"].slow_links[["Src Rank", "Dst Rank"]].iloc[0])


@pytest.mark.parametrize("fmt", FORMATS)
def test_compute_op_sum_is_op_statistic(cluster, fmt):
    tables, _ = recipe(cluster, fmt, "compute_op_sum")
    t = tables["ComputeOpPerRankStatsByOpType"].set_index(["Rank", "OpType", "TaskType"])
    for r, p in cluster["cluster"].ranks.items():
        stat = p.op_statistic.set_index(["OP Type", "Core Type"])
        mine = t.loc[r].loc[stat.index]
        assert mine["Count"].tolist() == stat["Count"].tolist()
        close(mine["SumNs"], stat["Total Time(us)"] * 1000)
    all_ranks = tables["ComputeOpAllRankStats"].set_index(["OpType", "TaskType"])
    total = pd.concat([p.op_statistic for p in cluster["cluster"].ranks.values()]).groupby(
        ["OP Type", "Core Type"])["Total Time(us)"].sum()
    close(all_ranks.loc[total.index, "SumNs"], total * 1000)


@pytest.mark.parametrize("fmt", FORMATS)
def test_hccl_sum_is_communication_statistic(cluster, fmt):
    tables, _ = recipe(cluster, fmt, "hccl_sum")
    t = tables["HcclPerRankStats"].set_index(["Rank", "OpType"])
    for r, p in cluster["cluster"].ranks.items():
        (row,) = p.communication_statistic.to_dict("records")
        mine = t.loc[(r, row["OP Type"])]
        assert mine["Count"] == row["Count"]
        close(mine["SumNs"], row["Total Time(us)"] * 1000)
    (groups,) = tables["HcclGroupNameMap"].to_dict("records")
    assert groups["GroupName"] == "hccl_world_group" and sorted(groups["Ranks"].split(";")) == ["0", "1", "2", "3"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_cann_api_sum_is_api_statistic(cluster, fmt):
    tables, _ = recipe(cluster, fmt, "cann_api_sum")
    t = tables["CannApiSumRank"].set_index(["rank", "name"])
    for r, p in cluster["cluster"].ranks.items():
        stat = p.api_statistic.set_index("API Name")
        mine = t.loc[r].loc[stat.index]
        assert mine["totalCount"].tolist() == stat["Count"].tolist()
        close(mine["totalTimeNs"], stat["Time(us)"] * 1000)


def free_gaps(profile) -> np.ndarray:
    """The gaps between the device's busy spans (the union of every op row), longest first: by hand."""
    rows = profile.source.op_rows()
    start = rows.start_ns
    end = start + np.rint(rows.frame["Task Duration(us)"].to_numpy() * 1000).astype(np.int64)
    order = np.argsort(start, kind="stable")
    start, end = start[order], np.maximum.accumulate(end[order])
    gaps = start[1:] - end[:-1]
    return np.sort(gaps[gaps > 0])[::-1] / 1000


def test_free_analysis_finds_the_longest_idle_gaps(cluster):
    tables, _ = recipe(cluster, "db", "free_analysis")
    t = tables["FreeAnalysis"]
    for r, p in cluster["cluster"].ranks.items():
        mine = t[t["rankId"] == r]["duration(us)"].to_numpy(float)
        ours = free_gaps(p)[:len(mine)]
        assert len(mine) == min(10, len(free_gaps(p))) > 0
        close(np.sort(mine)[::-1], ours)
        assert mine.max() == pytest.approx(ours[0], rel=0.01)


def test_slow_rank_names_ours(cluster):
    tables, _ = recipe(cluster, "db", "slow_rank")
    votes = tables["SlowRank"].set_index("rankId")["slowAffectCount"]
    assert votes.idxmax() == SLOW == cluster["cluster"].slow_ranks["Rank"].iloc[0]


def test_freq_analysis_finds_every_rank_at_its_devices_frequency(cluster):
    tables, log = recipe(cluster, "db", "freq_analysis")
    freqs = {p.device["aic_frequency"] for p in cluster["cluster"].ranks.values()}
    assert freqs == {1800}  # msprof-analyze's COMMON_FREQ: no rank idles at 800 MHz or runs at another frequency
    assert "No rank found with free time." in log and "No rank found with abnormal aicore frequency." in log
    assert "FreeFrequencyRanks" not in tables and "AbnormalFrequencyRanks" not in tables


def test_advisor_on_a_rank_and_on_the_cluster(cluster, tmp_path):
    import openpyxl

    rank0 = next(Path(cluster["db"]).glob("*-rank0_*_ascend_pt"))
    p = cluster["cluster"].rank(0)
    out = tmp_path / "one"
    out.mkdir()
    text = analyze(out, "advisor", "all", "-d", str(rank0), "-o", str(out), "-l", "en", allow=(OLD_SQLITE_ORDER_BY,))
    assert len(list(out.glob("mstt_advisor_*.html"))) == 1 and len(list((out / "log").glob("*.xlsx"))) == 1
    b = p.step_breakdown
    for name, col in (("Computing Time", "Computing"), ("Uncovered Communication Time", "Communication(Not Overlapped)"),
                      ("Free Time", "Free")):
        shown = float(re.search(rf"-- {name} is ([\d.]+)ms", text).group(1))
        assert shown == pytest.approx(b[col].sum() / 1000, abs=1e-3), name
    root = tmp_path / "cluster_in"
    shutil.copytree(cluster["db"], root)
    out = tmp_path / "cluster"
    out.mkdir()
    text = analyze(out, "advisor", "all", "-d", str(root), "-o", str(out), "-l", "en", allow=(OLD_SQLITE_ORDER_BY,))
    assert "slow rank" in text
    (xlsx,) = (out / "log").glob("mstt_advisor_*.xlsx")
    book = openpyxl.load_workbook(xlsx, read_only=True)
    head, *rows = list(book["slow rank"].iter_rows(values_only=True))
    ranks = pd.DataFrame(rows, columns=head)
    assert ranks.groupby("rank_id")["compute(us)"].mean().idxmax() == SLOW
    # the advisor ran the cluster backend (cluster -m all) on the DBs first: its step split is ours
    conn = sqlite3.connect(out / "cluster_analysis_output" / "cluster_analysis.db")
    theirs = pd.read_sql("SELECT * FROM ClusterStepTraceTime WHERE type = 'rank'", conn)
    conn.close()
    ours = cluster["cluster"].cluster_step_trace_time
    theirs = theirs.astype({"step": int, "index": int}).sort_values(["index", "step"])
    ours = ours[ours["Type"] == "rank"].sort_values(["Index", "Step"])
    for col, name in (("computing", "Computing"), ("communication_not_overlapped", "Communication(Not Overlapped)"),
                      ("free", "Free"), ("stage", "Stage")):
        close(theirs[col], ours[name])


def test_compare_of_the_slow_rank_with_rank_0(cluster, tmp_path):
    import openpyxl

    dirs = {r: next(Path(cluster["db"]).glob(f"*-rank{r}_*_ascend_pt")) for r in (0, SLOW)}
    analyze(tmp_path, "compare", "-d", str(dirs[SLOW]), "-bp", str(dirs[0]), "-o", str(tmp_path))
    (xlsx,) = tmp_path.glob("performance_comparison_result_*.xlsx")
    book = openpyxl.load_workbook(xlsx, read_only=True)
    rows = {r[0]: r for r in book["OverallMetrics"].iter_rows(values_only=True) if r and r[0]}
    c = cluster["cluster"]
    for index, col in (("Computing Time", "Computing"), ("Uncovered Communication Time",
                                                          "Communication(Not Overlapped)"), ("Free Time", "Free")):
        assert rows[index][1] == pytest.approx(c.rank(0).step_breakdown[col].sum() / 1000, rel=0.01), index
        assert rows[index][4] == pytest.approx(c.rank(SLOW).step_breakdown[col].sum() / 1000, rel=0.01), index
    compute = ~c.rank(0).source.communication_rows()
    assert rows["Computing Time"][3] == int(compute.sum())  # every compute kernel, from COMPUTE_TASK_INFO
