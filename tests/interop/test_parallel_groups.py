"""msprof-analyze's communication_group_map on the DB export of a TP2 PP2 DP2 cluster reports the job's groups:
each tensor-, pipeline- and data-parallel group of Megatron's numbering with its global ranks, as torch_npu's
parallel_group_info (META_DATA) and each collective's group (CommAnalyzerTime) name them; and the text export's
profiler_metadata.json and the DB's META_DATA carry the same groups back into geprof_nb.load."""

from __future__ import annotations

import json
import sqlite3

import pandas as pd
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis.sources.db_schema import group_hash
from helpers.cluster_testing import simulate_cluster
from helpers.msprof_analyze import MSPROF_ANALYZE, analyze

#: Megatron's numbering rank = tp_rank + 2 * (dp_rank + 2 * pp_rank) for tp = pp = dp = 2.
GROUPS = {"tp": {(0, 1), (2, 3), (4, 5), (6, 7)}, "dp": {(0, 2), (1, 3), (4, 6), (5, 7)},
          "pp": {(0, 4), (1, 5), (2, 6), (3, 7)}}


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory):
    g = ge.models.llm("tiny-llama", seq_len=256, parallel=ge.Parallel(tp=2, pp=2, dp=2, micro_batches=2))
    return simulate_cluster(tmp_path_factory.mktemp("hybrid"), ranks=8, steps=1, graph=g, task_trace="on")


def _sets(rank_sets) -> set[tuple[int, ...]]:
    return {tuple(int(x) for x in s.strip("()").split(",")) for s in rank_sets}


@pytest.mark.slow
def test_the_text_export_carries_the_groups_back(hybrid, tmp_path):
    root = hybrid.export(tmp_path / "pt")
    (meta,) = root.glob("*-rank5_*_ascend_pt/profiler_metadata.json")
    written = json.loads(meta.read_text())
    assert written["parallel_group_info"] == hybrid.rank(5).info["parallel"]["parallel_group_info"]
    assert written["pp_info"] == {"microbatch_num": 2, "pp_type": "1f1b", "virtual_stages": 1}
    back = geprof_nb.load(root)
    pd.testing.assert_frame_equal(back.communication_groups, hybrid.communication_groups)
    # every collective's entry names its own group: rank 5's tp group is the communicator of (4, 5)
    comm = json.loads(next(meta.parent.glob("ASCEND_PROFILER_OUTPUT/communication.json")).read_text())
    groups = {k.rpartition("@")[2] for step in comm.values() for kind in step.values() for k in kind
              if not k.startswith("Total")}
    mine = written["parallel_group_info"]
    assert {mine[g]["group_name"] for g in groups} == {"tp", "pp", "dp"}


@pytest.mark.interop
@pytest.mark.slow
@pytest.mark.skipif(MSPROF_ANALYZE is None, reason="msprof-analyze is not installed (the interop extra)")
def test_communication_group_map_reports_megatrons_groups(hybrid, tmp_path):
    exported = hybrid.export(tmp_path / "db", format="db")
    pd.testing.assert_frame_equal(geprof_nb.load(exported).communication_groups, hybrid.communication_groups)
    out = tmp_path / "out"
    out.mkdir()
    analyze(out, "cluster", "-d", str(exported), "-m", "communication_group_map", "-o", str(out))
    conn = sqlite3.connect(out / "cluster_analysis_output" / "cluster_analysis.db")
    try:
        rows = pd.read_sql('SELECT * FROM "CommunicationGroupMapping"', conn)
    finally:
        conn.close()
    found = {pg: _sets(g["rank_set"]) for pg, g in rows.groupby("pg_name")}
    assert found == GROUPS  # the world group runs no collective in this job, so the recipe leaves it out
    assert set(rows.loc[rows["pg_name"] == "pp", "type"]) == {"p2p"}
    assert set(rows.loc[rows["pg_name"] != "pp", "type"]) == {"collective"}
    assert list(rows["group_name"]) == [group_hash(g) for g in rows["group_id"]]
    ours = hybrid.communication_groups
    assert set(rows["group_id"]) == set(ours.loc[ours["Type"] != "world", "Group ID"])
