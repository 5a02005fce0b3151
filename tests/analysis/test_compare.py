"""compare(a, b): step, per op type and per op differences equal the differences of the two
Profiles' own tables; regressions and improvements are ordered; ops on one side only are kept;
the HTML view escapes op names."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis import ClusterProfile
from geprof_nb.analysis import compare as compare_module
from geprof_nb.analysis.compare import DIFF_COLUMNS, PMU_COLUMNS, Comparison, compare
from geprof_nb.analysis.profile import Profile
from geprof_nb.analysis.sources.source import Source
from geprof_nb.analysis.tables.summary import OpRows
from helpers.geprof_testing import run_profiled_session, run_two_graphs

XSS = "<script>alert(1)</script>"


def mlp(batch: int, **kw) -> ge.Graph:
    return ge.models.mlp(batch_size=batch, hidden=(256, 128), training=True, **kw)


@pytest.fixture(scope="module")
def batches(tmp_path_factory) -> tuple[Profile, Profile]:
    """The same MLP training graph at batch 8 and batch 512."""
    root = tmp_path_factory.mktemp("batches")
    return (run_profiled_session(root / "b8", mlp(8), 3).profile,
            run_profiled_session(root / "b512", mlp(512), 3).profile)


@pytest.fixture(scope="module")
def devices(tmp_path_factory) -> tuple[Profile, Profile]:
    """The same graph on Ascend910B (A2 PMU columns) and Ascend910A."""
    root = tmp_path_factory.mktemp("devices")
    g = mlp(256)
    return (run_profiled_session(root / "910b", g, 3, device="Ascend910B").profile,
            run_profiled_session(root / "910a", g, 3, device="Ascend910A").profile)


def per_step(p: Profile, key: str) -> pd.DataFrame:
    """Count and time per step, average per call, from the Profile's own op_summary."""
    ops = p.op_summary
    steps = p.iterations.size
    g = ops.groupby(ops[key].astype(str))["Task Duration(us)"]
    return pd.DataFrame({"count": g.size() / steps, "time": g.sum() / steps, "avg": g.mean()})


def test_step_diffs_are_the_differences_of_the_step_tables(batches):
    a, b = batches
    c = compare(a, b)
    it = "Iteration Time(us)"
    assert c.step.loc[f"{it} mean", "A"] == pytest.approx(a.step_trace[it].mean())
    assert c.step.loc[f"{it} mean", "Diff"] == pytest.approx(b.step_trace[it].mean() - a.step_trace[it].mean())
    assert c.step.loc[f"{it} median", "Diff"] == pytest.approx(b.step_trace[it].median() - a.step_trace[it].median())
    # the step split's means are over whole step periods: the first step spans only itself
    diff = b.step_breakdown["Computing"].iloc[1:].mean() - a.step_breakdown["Computing"].iloc[1:].mean()
    assert c.step.loc["Computing(us) mean", "Diff"] == pytest.approx(diff)
    assert c.step.loc[f"{it} mean", "Diff(%)"] == pytest.approx(
        c.step.loc[f"{it} mean", "Diff"] / c.step.loc[f"{it} mean", "A"] * 100)
    assert c.step.loc["Steps", "Diff"] == 0 and c.step.loc[f"{it} mean", "Diff"] > 0  # batch 512 is slower


def test_step_count_is_shown_as_a_whole_number(batches):
    a, b = batches
    c = compare(a, b)
    assert "  Steps: 3 -> 3 (+0, +0.0%)" in c.summary().splitlines()
    mean = c.step.loc["Iteration Time(us) mean"]
    assert f"  Iteration Time(us) mean: {mean['A']:,.3f} -> {mean['B']:,.3f}" in c.summary()
    assert "<td>3</td>" in c._repr_html_() and "3.000" not in c._repr_html_().split("Regressions")[0]


def test_op_type_and_op_diffs_are_the_differences_of_op_summary(batches):
    a, b = batches
    c = compare(a, b)
    assert list(c.op_types.columns) == DIFF_COLUMNS and list(c.ops.columns) == ["OP Type"] + DIFF_COLUMNS
    for key, table in (("OP Type", c.op_types), ("Op Name", c.ops)):
        sa, sb = per_step(a, key), per_step(b, key)
        assert set(table.index) == set(sa.index) | set(sb.index)
        for name in sa.index:
            row = table.loc[name]
            assert row["Time/step A(us)"] == pytest.approx(sa.at[name, "time"])
            assert row["Time/step Diff(us)"] == pytest.approx(sb.at[name, "time"] - sa.at[name, "time"])
            assert row["Count/step Diff"] == pytest.approx(sb.at[name, "count"] - sa.at[name, "count"])
            assert row["Avg Diff(us)"] == pytest.approx(sb.at[name, "avg"] - sa.at[name, "avg"])
        assert table["Time/step Diff(us)"].abs().is_monotonic_decreasing
    # and they agree with msprof's op_statistic (summed over core types) for the compute types
    stat = a.op_statistic.groupby("OP Type")["Total Time(us)"].sum() / a.iterations.size
    assert np.allclose(c.op_types.loc[stat.index, "Time/step A(us)"], stat, atol=1e-3)


def resized(sizes: list[int]) -> ge.Graph:
    """Independent Gelu ops op0, op1, ... on [n, 1024] tensors of the given row counts."""
    g = ge.Graph("resized")
    outs = [g.op("Gelu", g.variable(f"v{i}", (n, 1024), "float16"), name=f"op{i}") for i, n in enumerate(sizes)]
    g.output([g.op("Relu", g.data("x", (1, 1024), "float16"), name="use_x")] + outs)
    return g


def test_regressions_and_improvements_are_ordered(tmp_path):
    sizes = [64, 256, 4096, 16384]
    a = run_profiled_session(tmp_path / "a", resized(sizes), 2).profile
    b = run_profiled_session(tmp_path / "b", resized(sizes[::-1]), 2).profile  # the big ops become small
    c = compare(a, b, top=2)
    reg, imp = c.regressions["Time/step Diff(us)"], c.improvements["Time/step Diff(us)"]
    assert list(reg.index) == ["op0", "op1"] and list(imp.index) == ["op3", "op2"]
    assert (reg > 0).all() and reg.is_monotonic_decreasing and (imp < 0).all() and imp.is_monotonic_increasing
    assert reg.iloc[0] == c.ops["Time/step Diff(us)"].max() and imp.iloc[0] == c.ops["Time/step Diff(us)"].min()
    assert len(compare(a, b, top=1).regressions) == 1


def pmu_mean(p: Profile, op_type: str, metric: str) -> float:
    """A metric's mean over an op type, from the column of the core each op ran on."""
    ops = p.op_summary[p.op_summary["OP Type"] == op_type]
    cols = [c for c in (f"aic_{metric}", f"aiv_{metric}", metric) if c in ops]
    values = ops[cols[0]]
    for c in cols[1:]:
        values = values.fillna(ops[c])
    return float(values.mean())


def test_pmu_changes_are_the_differences_of_the_pmu_columns(batches):
    a, b = batches
    c = compare(a, b)
    assert list(c.pmu.columns) == PMU_COLUMNS and len(c.pmu)
    assert "MatMulV2" in set(c.pmu["OP Type"])  # batch 512 feeds the cube better than batch 8
    for _, row in c.pmu.iterrows():
        assert row["A"] == pytest.approx(pmu_mean(a, row["OP Type"], row["Metric"]), abs=1e-9)
        assert row["B"] == pytest.approx(pmu_mean(b, row["OP Type"], row["Metric"]), abs=1e-9)
        assert abs(row["Diff"]) >= (2.0 if row["Metric"].endswith("(%)") else 0.02)


def test_pmu_ratios_compare_across_chip_families(devices, monkeypatch):
    a, b = devices
    assert "aic_mac_ratio" in a.op_summary and "mac_ratio" in b.op_summary  # A2 vs 910A column names
    monkeypatch.setattr(compare_module, "PMU_MIN_CHANGE", 0.0)  # keep unchanged metrics too
    pmu = compare(a, b).pmu
    row = pmu[(pmu["OP Type"] == "MatMulV2") & (pmu["Metric"] == "mac_ratio")].iloc[0]
    assert row["A"] == pytest.approx(a.op_summary.loc[a.op_summary["OP Type"] == "MatMulV2", "aic_mac_ratio"].mean())
    assert row["B"] == pytest.approx(b.op_summary.loc[b.op_summary["OP Type"] == "MatMulV2", "mac_ratio"].mean())
    relu = pmu[(pmu["OP Type"] == "Relu") & (pmu["Metric"] == "vec_ratio")].iloc[0]  # aiv_ on A2, AI Core on 910A
    assert relu["A"] == pytest.approx(pmu_mean(a, "Relu", "vec_ratio"))
    assert "cube_utilization(%)" not in set(pmu["Metric"])  # 910A has no such column


def test_ops_missing_on_one_side(resnet_run, resnet_run_ws1):
    c = compare(resnet_run.profile, resnet_run_ws1.profile)  # 8 ranks (AllReduce) vs 1 rank
    reduce = c.ops[c.ops["OP Type"] == "HcomAllReduce"]
    assert len(reduce) and (reduce["In"] == "A only").all()
    assert (reduce["Count/step B"] == 0).all() and reduce["Avg B(us)"].isna().all()
    assert np.allclose(reduce["Time/step Diff(us)"], -reduce["Time/step A(us)"])
    assert c.op_types.loc["HcomAllReduce", "In"] == "A only"
    assert set(c.improvements.index) >= set(reduce.nlargest(1, "Time/step A(us)").index)
    assert "only in A" in c.summary()


def test_two_different_graphs(tmp_path):
    def graph(extra: bool) -> ge.Graph:
        g = ge.Graph("g")
        y = g.op("Relu", g.data("x", (64, 64), "float16"), name="shared")
        if extra:
            y = g.op("Gelu", y, name="only_b")
        g.output([y])
        return g

    a = run_profiled_session(tmp_path / "a", graph(False), 2).profile
    b = run_profiled_session(tmp_path / "b", graph(True), 2).profile
    c = compare(a, b)
    assert c.ops.loc["only_b", "In"] == "B only" and c.ops.loc["shared", "In"] == "both"
    assert c.ops.loc["only_b", "Time/step A(us)"] == 0 and np.isnan(c.ops.loc["only_b", "Time/step Diff(%)"])
    assert c.ops.loc["only_b", "OP Type"] == "Gelu"
    assert "only_b" in c.regressions.index


def test_arguments_are_checked_naming_the_argument_and_what_it_takes(batches, tmp_path):
    a, b = batches
    cluster = ClusterProfile(tmp_path / "CLUSTER_20260101000000000_ABCDEFGH", {2: a, 3: b})
    positive = "is not valid; accepted: a positive integer (1, 2, 3, ...)"
    cases = [
        ((a, str(b.path)), {}, TypeError, f"b must be a Profile, not str: load it first, "
                                          f"b=geprof_nb.load({str(b.path)!r})"),
        ((Path(a.path), b), {}, TypeError, f"a must be a Profile, not {type(Path(a.path)).__name__}: load it first, "
                                           f"a=geprof_nb.load({str(a.path)!r})"),
        ((cluster, b), {}, TypeError, "a is a ClusterProfile (CLUSTER_20260101000000000_ABCDEFGH); compare takes one "
                                      "run's Profile: pass one rank, e.g. a=cluster.rank(2)"),
        ((a, None), {}, TypeError, "b must be a Profile, not NoneType"),
        ((a, b), {"top": "5"}, TypeError, f"top '5' {positive}"),
        ((a, b), {"top": 2.0}, TypeError, f"top 2.0 {positive}"),
        ((a, b), {"top": 0}, ValueError, f"top 0 {positive}"),
        ((a, b), {"top": -1}, ValueError, f"top -1 {positive}"),
        ((a, b), {"names": "ab"}, TypeError, "names must be two strings (a label for a and one for b), not 'ab'"),
    ]
    for args, kwargs, error, text in cases:
        for function in (compare, geprof_nb.compare):
            with pytest.raises(error) as err:
                function(*args, **kwargs)
            assert str(err.value) == text
    c = geprof_nb.compare(a, b, top=np.int64(1), names=["small", "large"])
    assert len(c.regressions) == 1 and (c.a_name, c.b_name) == ("small", "large")


def test_html_escapes_op_names(tmp_path):
    g = ge.Graph("xss")
    g.output([g.op("Relu", g.data("x", (64, 64), "float16"), name=XSS)])
    a = run_profiled_session(tmp_path / "a", g, 2).profile
    b = run_profiled_session(tmp_path / "b", g, 2, device="Ascend910A").profile
    c = geprof_nb.compare(a, b)
    assert isinstance(c, Comparison) and XSS in c.ops.index
    page = c._repr_html_()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert XSS in c.summary()  # plain text keeps the name as it is


class _Tables(Source):
    """op_summary rows only, as a minimal import would give."""

    def __init__(self, profile: Profile) -> None:
        ops = profile.op_summary
        start_ns = np.rint(ops["Task Start Time(us)"].to_numpy() * 1000).astype(np.int64)
        self.rows = OpRows(ops, profile.iteration_of_ops.to_numpy(), start_ns, np.arange(len(ops)))

    @property
    def path(self) -> Path:
        return Path("imported")

    def op_rows(self) -> OpRows:
        return self.rows


class _Ops(_Tables):
    """``profile``'s op rows with ``ops`` (a changed copy of its op_summary) as op_summary."""

    def __init__(self, profile: Profile, ops: pd.DataFrame) -> None:
        super().__init__(profile)
        self.rows = OpRows(ops, self.rows.iteration, self.rows.start_ns, self.rows.connection_id)


def _with_missing(profile: Profile, plain: bool) -> Profile:
    """op_summary with every seventh row's Op Name and every fifth row's OP Type missing, as categoricals
    (as geprof builds them) or plain strings (as an import may)."""
    ops = profile.op_summary.copy()
    rows = np.arange(len(ops))
    ops["Op Name"] = ops["Op Name"].where(rows % 7 != 3)
    ops["OP Type"] = ops["OP Type"].where(rows % 5 != 1)
    if plain:
        ops = ops.assign(**{c: ops[c].astype(str) for c in ops.select_dtypes("category").columns})
    return Profile(_Ops(profile, ops))


def test_categorical_and_plain_text_columns_give_the_same_comparison(batches):
    """Ops and op types are grouped by their categories' codes (a few hundred names over millions of rows)
    and named after: the tables must be those of grouping the texts, rows without a name left out, an op's
    type its first row's that has one."""
    a, b = batches
    categorical = compare(_with_missing(a, False), _with_missing(b, False))
    plain = compare(_with_missing(a, True), _with_missing(b, True))
    for table in ("step", "op_types", "ops", "regressions", "improvements", "pmu"):
        pd.testing.assert_frame_equal(getattr(categorical, table), getattr(plain, table), check_exact=True)
    assert categorical.summary() == plain.summary() and len(categorical.pmu)
    names = pd.concat([_with_missing(p, True).op_summary["Op Name"] for p in (a, b)]).dropna()
    assert sorted(categorical.ops.index) == sorted(set(names))
    ops_a = _with_missing(a, True).op_summary
    first_type = ops_a.dropna(subset=["OP Type"]).groupby("Op Name")["OP Type"].first()
    assert categorical.ops["OP Type"].reindex(first_type.index).tolist() == first_type.tolist()


def test_tables_only_and_self_comparison(batches):
    a, _ = batches
    c = compare(Profile(_Tables(a)), Profile(_Tables(a)))
    # no step_trace: step times come from step_breakdown, whose windows are the iterations' task spans
    assert "Stage(us) mean" in c.step.index and "Iteration Time(us) mean" not in c.step.index
    assert (c.step["Diff"] == 0).all()
    assert c.regressions.empty and c.improvements.empty and c.pmu.empty
    assert (c.ops["In"] == "both").all() and (c.ops["Time/step Diff(us)"] == 0).all()


def test_a_run_against_its_msprof_export(batches, tmp_path):
    a, _ = batches
    c = compare(a, geprof_nb.load(a.export(tmp_path / "msprof", format="msprof")))
    assert "Iteration Time(us) mean" in c.step.index
    assert np.allclose(c.step["Diff"], 0, atol=1e-6) and np.allclose(c.ops["Time/step Diff(us)"], 0, atol=1e-6)
    assert (c.ops["In"] == "both").all() and c.pmu.empty


def test_empty_profiles():
    empty = np.zeros(0, np.int64)

    class Empty(_Tables):
        def __init__(self) -> None:
            self.rows = OpRows(pd.DataFrame(columns=["Op Name", "OP Type", "Task Start Time(us)",
                                                     "Task Duration(us)", "Task Type"]), empty, empty, empty)

    c = compare(Profile(Empty()), Profile(Empty()))
    assert c.step.loc["Steps", "A"] == c.step.loc["Steps", "B"] == 0  # no iterations: none counted
    assert c.ops.empty and c.op_types.empty and c.pmu.empty and c.regressions.empty
    assert "geprof comparison" in c.summary() and c._repr_html_()


def test_same_run_of_different_lengths_has_the_same_step_split(tmp_path):
    """The first step's window spans only itself (no previous iteration end): like the advisor's step
    length, the step split's means count only steps that run from the previous iteration's end."""
    a = run_profiled_session(tmp_path / "a", mlp(8), 3).profile
    b = run_profiled_session(tmp_path / "b", mlp(8), 6).profile
    first_free = a.step_breakdown["Free"].iloc[0]
    assert first_free < a.step_breakdown["Free"].iloc[1:].mean() - 5  # the premise: the first step differs
    c = compare(a, b)
    for metric in ("Free(us) mean", "Computing(us) mean", "Communication(Not Overlapped)(us) mean"):
        assert abs(c.step.loc[metric, "Diff"]) < 0.1, metric
    assert c.step.loc["Free(us) mean", "A"] == pytest.approx(a.step_breakdown["Free"].iloc[1:].mean())
    assert c.step.loc["Steps", "A"] == 3 and c.step.loc["Steps", "B"] == 6


def test_two_graphs_compare_the_main_graphs_iterations(tmp_path):
    """Graph 1 (the step trace's main model: most iterations, then lowest id) is the run's step; graph 2's
    shorter iterations are not averaged into the iteration time."""
    p = run_two_graphs(tmp_path)
    st = p.step_trace
    assert set(st["Model ID"]) == {1, 2}
    main = st[st["Model ID"] == 1]["Iteration Time(us)"]
    c = compare(p, p)
    assert c.step.loc["Iteration Time(us) mean", "A"] == pytest.approx(main.mean())
    assert c.step.loc["Iteration Time(us) median", "A"] == pytest.approx(main.median())


def run_training_with_evals(output: Path, evals: int) -> Profile:
    """The MLP training graph 3 times, each step followed by ``evals`` runs of a small inference graph (a
    second model); both graphs of one run, in this process (GE's model ids differ from another run's)."""
    with ge.simulation_settings(clock_mode="virtual"):
        sess = ge.Session()
        try:
            assert sess.add_graph(1, ge.models.mlp(batch_size=32, training=True)) == ge.SUCCESS
            with geprof_nb.profile(output=str(output)) as block:
                if evals:
                    assert sess.add_graph(2, ge.models.mlp(batch_size=8, training=False, hidden=(512,))) == ge.SUCCESS
                for _ in range(3):
                    assert sess.run_graph(1) == ge.SUCCESS
                    for _ in range(evals):
                        assert sess.run_graph(2) == ge.SUCCESS
        finally:
            ge.GEFinalize()
    return block.profile


def test_a_second_graph_leaves_the_first_graphs_ops_unchanged(tmp_path):
    """The audit's case: B runs A's 3 training steps plus an eval graph twice a step.  Per-step values
    divided every op by all models' iterations (6), so each training op read 1 -> 0.5 calls and -50% time
    a step, and the two graphs' same-named ops were one row.  Now each op is per step of its own model and
    the models are matched by their op names (the training graph is model 1 in A, 2 in B)."""
    a, b = run_training_with_evals(tmp_path / "a", 0), run_training_with_evals(tmp_path / "b", 2)
    a_model = int(a.op_summary["Model ID"].iloc[0])
    b_models = b.op_summary.groupby("Model ID")["Op Name"].agg(set)
    (train,) = [m for m, names in b_models.items() if names == set(a.op_summary["Op Name"])]
    (evaluation,) = set(b_models.index) - {train}
    c = compare(a, b)
    ops = c.ops
    assert list(ops.columns) == ["Model A", "Model B", "OP Type"] + DIFF_COLUMNS
    both, new = ops[ops["In"] == "both"], ops[ops["In"] == "B only"]
    assert sorted(both.index) == sorted(set(a.op_summary["Op Name"]))
    assert (both["Model A"] == a_model).all() and (both["Model B"] == train).all()
    assert (both["Count/step A"] == 1).all() and (both["Count/step B"] == 1).all()
    assert (both["Time/step Diff(us)"] == 0).all() and c.improvements.empty
    momentum = both.loc["Momentum/update_dense_1/kernel/ApplyMomentum"]
    assert momentum["Time/step A(us)"] == pytest.approx(a.op_summary.loc[
        a.op_summary["Op Name"] == "Momentum/update_dense_1/kernel/ApplyMomentum", "Task Duration(us)"].sum() / 3)
    # the eval graph's ops are new, once per eval iteration, its dense_0/MatMulV2 a row of its own
    assert sorted(new.index) == sorted(b_models[evaluation]) and new["Model A"].isna().all()
    assert (new["Model B"] == evaluation).all() and (new["Count/step B"] == 1).all()
    assert sorted(ops.loc["dense_0/MatMulV2", "In"]) == ["B only", "both"]
    assert set(c.op_types[c.op_types["In"] == "both"]["Time/step Diff(us)"]) == {0.0}
    assert c.pmu.empty  # the training graph's kernels are the same; the eval graph's are not averaged in
    # Steps is the main model's, whose iterations Iteration Time and the step split count (B's: the eval
    # graph, the model with the most iterations)
    assert c.step.loc["Steps", "A"] == 3 and c.step.loc["Steps", "B"] == len(b.step_breakdown) == 6
    assert c.step.loc["Op time/step(us)", "B"] == pytest.approx(ops["Time/step B(us)"].sum())
    assert f"Models (per-step values are per step of the op's model): A {a_model} = B {train}, B {evaluation}" \
        in c.summary()
    assert f"dense_0/MatMulV2 [MatMulV2, B {evaluation}]" in c.summary()


# ----------------------------------------------------------------------------- two steps
def test_two_steps_of_one_run_compare_their_own_rows(batches):
    """compare(p, p, steps=(1, 3)): each step's op rows, its step_trace and step_breakdown rows, nothing else."""
    a, b512 = batches
    c = compare(a, a, steps=(1, 3))
    assert (c.a_name, c.b_name, c.steps) == (f"{a.name} step 1", f"{a.name} step 3", (1, 3))
    one, three = a.ops(1), a.ops(3)
    sb = a.step_breakdown.set_index("Step")
    assert c.step.loc["Op tasks", "A"] == len(one) and c.step.loc["Op tasks", "B"] == len(three)
    assert c.step.loc["Op time(us)", "Diff"] == pytest.approx(three["Task Duration(us)"].sum()
                                                              - one["Task Duration(us)"].sum())
    assert c.step.loc["Free(us)", "A"] == pytest.approx(sb.loc[1, "Free"])
    assert c.step.loc["Stage(us)", "B"] == pytest.approx(sb.loc[3, "Stage"])
    assert c.step.loc["Iteration Time(us)", "B"] == pytest.approx(a.step_trace["Iteration Time(us)"].iloc[2])
    name = one.sort_values("Task Duration(us)").iloc[-1]["Op Name"]
    ops = c.ops.loc[name]
    assert ops["Count/step A"] == (one["Op Name"] == name).sum()  # counts of the step, not per step of the run
    assert ops["Time/step A(us)"] == pytest.approx(one.loc[one["Op Name"] == name, "Task Duration(us)"].sum())
    # the split: the parts of the two steps and the step they add up to
    split = c.split()
    assert list(split.index) == ["Computing", "Communication(Not Overlapped)", "Free", "Step"]
    assert split.loc["Free", "B"] == pytest.approx(sb.loc[3, "Free"])
    assert split.loc["Step", "A"] == pytest.approx(sb.loc[1, ["Computing", "Communication(Not Overlapped)",
                                                                "Free"]].sum())
    # a step of one run against a step of another
    across = compare(a, b512, steps=(2, 2))
    assert across.step.loc["Op tasks", "A"] == len(a.ops(2)) and across.regressions["Time/step Diff(us)"].gt(0).all()
    assert "step 2 -> " not in across.summary() and f"B = {b512.name} step 2" in across.summary()


def test_the_split_of_two_runs_is_their_mean_whole_step_periods(batches):
    a, b = batches
    split = compare(a, b).split()
    periods = a.step_breakdown.iloc[1:]  # whole periods: the first step spans only itself
    assert split.loc["Computing", "A"] == pytest.approx(periods["Computing"].mean())
    assert split.loc["Step", "Diff"] == pytest.approx(split.loc[["Computing", "Communication(Not Overlapped)",
                                                                  "Free"], "Diff"].sum())


@pytest.mark.parametrize("steps, error, message", [
    ((1, 9), ValueError, "steps[1] 9 is not in b ("),
    ((0, 1), ValueError, "steps[0] 0 is not in a ("),
    ((1,), TypeError, "steps must be two iteration ids (a step of a, a step of b), not (1,)"),
    ((1.5, 2), TypeError, "steps[0] 1.5 is not valid; accepted: an integer"),
])
def test_steps_that_are_not_two_steps_of_the_runs_are_refused_naming_them(batches, steps, error, message):
    a, _ = batches
    with pytest.raises(error) as err:
        compare(a, a, steps=steps)
    assert str(err.value).startswith(message) and ("its iterations are 1..3" in str(err.value)) == (error is ValueError)
