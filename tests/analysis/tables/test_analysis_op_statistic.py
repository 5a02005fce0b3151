"""op_statistic: per OP Type totals derived from op_summary."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis.sources.source import OP_STATISTIC_L0_NOTE
from geprof_nb.analysis.tables import columns as C
from geprof_nb.analysis.tables import summary
from helpers.geprof_testing import run_profiled_session

OP_STATISTIC_HEADER = ("Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),"
                       "Ratio(%)").split(",")


@pytest.fixture(params=["resnet_run", "mlp_910a_run"])
def profile(request):
    return request.getfixturevalue(request.param).profile


def test_header(profile):
    assert list(profile.op_statistic.columns) == OP_STATISTIC_HEADER == C.OP_STATISTIC


def test_counts_and_totals_match_op_summary(profile):
    ops = profile.op_summary
    compute = ops[ops["Task Type"] != "COMMUNICATION"]
    assert len(compute) < len(ops)  # both runs have AllReduce rows, which op_statistic leaves out
    want = (compute.assign(**{"OP Type": compute["OP Type"].astype(str), "Task Type": compute["Task Type"].astype(str)})
            .groupby(["OP Type", "Task Type"])["Task Duration(us)"].agg(["count", "sum", "min", "mean", "max"]))
    stat = profile.op_statistic.set_index(["OP Type", "Core Type"])
    assert sorted(stat.index) == sorted(want.index)
    for key, row in want.iterrows():
        got = stat.loc[key]
        assert got["Count"] == row["count"]
        assert got["Total Time(us)"] == pytest.approx(row["sum"], abs=0.0006)
        assert got["Min Time(us)"] == pytest.approx(row["min"], abs=0.0006)
        assert got["Avg Time(us)"] == pytest.approx(row["mean"], abs=0.0006)
        assert got["Max Time(us)"] == pytest.approx(row["max"], abs=0.0006)
    assert stat["Count"].sum() == len(compute)
    assert "HcomAllReduce" not in stat.index.get_level_values("OP Type")
    # per OP Type (whatever the core type) the totals agree as well
    per_type = compute.groupby(compute["OP Type"].astype(str))["Task Duration(us)"].sum()
    got_type = profile.op_statistic.groupby("OP Type")["Total Time(us)"].sum()
    pd.testing.assert_series_equal(got_type.sort_index(), per_type.sort_index(), check_names=False, atol=0.01)


def test_ratio_sums_to_100_and_is_share_of_total(profile):
    stat = profile.op_statistic
    assert stat["Ratio(%)"].sum() == pytest.approx(100, abs=0.01)
    total = stat["Total Time(us)"].sum()
    np.testing.assert_allclose(stat["Ratio(%)"], stat["Total Time(us)"] / total * 100, rtol=0, atol=0.002)
    assert ((stat["Ratio(%)"] > 0) & (stat["Ratio(%)"] <= 100)).all()


def test_sorted_by_total_time_descending(profile):
    stat = profile.op_statistic
    assert stat["Total Time(us)"].is_monotonic_decreasing
    assert (stat["Min Time(us)"] <= stat["Avg Time(us)"]).all() and (stat["Avg Time(us)"] <= stat["Max Time(us)"]).all()
    assert (stat["Device_id"] == 0).all()


def test_core_types(resnet_run, mlp_910a_run):
    assert set(resnet_run.profile.op_statistic["Core Type"]) == {"AI_CORE", "AI_VECTOR_CORE"}
    assert set(mlp_910a_run.profile.op_statistic["Core Type"]) == {"AI_CORE"}
    stat = resnet_run.profile.op_statistic.set_index("OP Type")
    assert stat.loc["Conv2D", "Core Type"] == "AI_CORE" and stat.loc["Relu", "Core Type"] == "AI_VECTOR_CORE"
    n_conv = len(resnet_run.graph.nodes_of_type("Conv2D"))
    assert stat.loc["Conv2D", "Count"] == n_conv * resnet_run.steps


def test_empty_summary_gives_empty_statistic(resnet_run):
    ops = resnet_run.profile.op_summary
    empty = summary.op_statistic(ops[ops["Task Type"] == "COMMUNICATION"])
    assert empty.empty and list(empty.columns) == OP_STATISTIC_HEADER


@pytest.fixture(scope="module")
def l0_run(tmp_path_factory):
    """An MLP on 8 ranks at task_trace l0: no op basic info, so every OP Type and Task Type is N/A."""
    g = ge.models.mlp(training=True, world_size=8)
    return run_profiled_session(tmp_path_factory.mktemp("mlp_l0"), g, 3, task_trace="l0").profile


def test_task_trace_l0_gives_no_op_statistic(l0_run):
    assert set(l0_run.op_summary["Task Type"].astype(str)) == {"N/A"}  # what a statistic would group by
    stat = l0_run.op_statistic
    assert stat.empty and list(stat.columns) == OP_STATISTIC_HEADER
    assert OP_STATISTIC_L0_NOTE in l0_run.notes


def test_task_trace_l0_exports_write_no_op_statistic(l0_run, tmp_path):
    out = l0_run.export(tmp_path / "msprof", "msprof") / "mindstudio_profiler_output"
    assert list(out.glob("op_summary_*.csv")) and not list(out.glob("op_statistic_*.csv"))
    pt = l0_run.export(tmp_path / "pt", "ascend_pt") / "ASCEND_PROFILER_OUTPUT"
    assert (pt / "kernel_details.csv").is_file() and not (pt / "op_statistic.csv").exists()


def test_imported_l0_output_has_no_op_statistic_either(l0_run, tmp_path):
    """msprof output of an l0 run (no op_statistic file): the statistic is not derived from N/A rows."""
    back = geprof_nb.load(l0_run.export(tmp_path, "msprof"))
    assert len(back.op_summary) == len(l0_run.op_summary)
    assert back.op_statistic.empty and OP_STATISTIC_L0_NOTE in back.notes


def test_l1_run_notes_no_l0_reason(resnet_run):
    assert len(resnet_run.profile.op_statistic) and OP_STATISTIC_L0_NOTE not in resnet_run.profile.notes
