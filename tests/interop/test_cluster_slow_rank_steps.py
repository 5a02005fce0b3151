"""A slow rank's steps, read by the real msprof-analyze: ``compare`` of one step between the slow
rank and rank 0, and the cluster advisor's step-by-step comparison of its slowest and fastest ranks.

The cluster is the audit's: 4 ranks of a 2-layer BERT, rank 2's kernels 1.3x as long, link 1-2 at
half bandwidth.  Its slow rank's ProfilerStep spans once overlapped, and the tool then found no
operators for step 2 and later ("There is no operator event data for step 2").
"""

from __future__ import annotations

import json
import re

import pytest

from geprof_nb import ge
from helpers.cluster_testing import simulate_cluster
from helpers.msprof_analyze import MSPROF_ANALYZE, analyze

pytestmark = [pytest.mark.interop, pytest.mark.slow, pytest.mark.skipif(MSPROF_ANALYZE is None,
                                                      reason="msprof-analyze is not installed (the interop extra)")]

SLOW = 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("slow_rank_steps")
    graph = ge.models.bert(layers=2, seq_len=128, batch_size=8, training=True, world_size=4)
    cluster = simulate_cluster(root / "sim", {"slow_ranks": {str(SLOW): 1.3}, "slow_links": {"1-2": 0.5}}, ranks=4,
                               graph=graph, aic_metrics="PipeUtilization")
    export = cluster.export(root / "ascend_pt")
    dirs = {int(next(d.glob("profiler_info_*.json")).stem.rsplit("_", 1)[1]): d for d in export.iterdir()}
    return {"cluster": cluster, "export": export, "dirs": dirs, "root": root}


def step_kernels(cluster, rank: int, step: int):
    """Rank ``rank``'s op_summary rows of step ``step`` (what kernel_details.csv lists with that Step Id)."""
    p = cluster.rank(rank)
    return p.op_summary[p.iteration_of_ops == step]


def test_compare_of_step_2_between_the_slow_rank_and_rank_0(cluster):
    import openpyxl

    out = cluster["root"] / "compare"
    out.mkdir()
    analyze(out, "compare", "-d", str(cluster["dirs"][SLOW]), "-bp", str(cluster["dirs"][0]),
            "--base_step", "2", "--comparison_step", "2", "-o", str(out))
    (xlsx,) = out.glob("performance_comparison_result_*.xlsx")
    book = openpyxl.load_workbook(xlsx, read_only=True)
    head, *rows = [r for r in book["KernelCompare"].iter_rows(values_only=True) if r and r[0] is not None]
    # base and comparison sides: (Total Duration(us), Calls) at columns 3, 7 and 8, 12
    for rank, (total, calls) in ((0, (3, 7)), (SLOW, (8, 12))):
        ours = step_kernels(cluster["cluster"], rank, 2)
        assert sum(r[calls] or 0 for r in rows) == len(ours) > 0
        assert sum(r[total] or 0 for r in rows) == pytest.approx(ours["Task Duration(us)"].sum(), abs=0.01 * len(rows))


def test_cluster_advisor_compares_the_slow_ranks_step_operator_by_operator(cluster):
    import openpyxl

    out = cluster["root"] / "advisor"
    out.mkdir()
    text = analyze(out, "advisor", "all", "-d", str(cluster["export"]), "-o", str(out), "-l", "en")
    # every rank has the PMU columns, so the AI Core checks run on all of them
    assert "aiv_vec_ratio" not in text and "not contain aic_mte2_time" not in text
    picked = json.loads(re.search(r"steps and ranks to be analyzed are (\{.*\})", text).group(1))
    slowest, fastest = picked["maximum"], picked["minimum"]
    assert slowest["rank_id"] == SLOW and slowest["step"] >= 2
    (xlsx,) = (out / "log").glob("mstt_advisor_*.xlsx")
    book = openpyxl.load_workbook(xlsx, read_only=True)
    name = f"Kernel compare of Rank{SLOW} Step{slowest['step']} and Rank{fastest['rank_id']} Step{fastest['step']}"
    (sheet,) = [s for s in book.sheetnames if name.startswith(s)]  # Excel cuts sheet names at 31 characters
    head, *rows = list(book[sheet].iter_rows(values_only=True))
    # the advisor compares kernel types from op_statistic.csv (the whole run: the file has no steps)
    for rank, column in ((SLOW, "Calls"), (fastest["rank_id"], "Benchmark  Calls")):
        counts = cluster["cluster"].rank(rank).op_statistic.groupby("OP Type")["Count"].sum()
        theirs = {r[head.index("Kernel Type")]: r[head.index(column)] for r in rows}
        assert theirs == counts.to_dict() and sum(theirs.values()) > 0
