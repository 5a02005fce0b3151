"""step_trace: one row per iteration from the ProfilerTrace timestamps, msprof arithmetic."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis.tables import columns as C
from geprof_nb.analysis.tables.breakdown import chained_steps, step_windows
from geprof_nb.errors import RunDirError
from geprof_nb.prof import rawdata
from helpers.geprof_testing import TS_TOL_US, build_tiny_graph
from helpers.rawrun_helpers import INFO, records, write_run

STEP_TRACE_HEADER = ("Device_id,Iteration ID,FP Start(us),BP End(us),Iteration End(us),Iteration Time(us),"
                     "FP to BP Time(us),Iteration Refresh(us),Data Aug Bound(us),Model ID").split(",")


def _reduce_pairs(st: pd.DataFrame) -> list[tuple[int, int]]:
    """Column positions of the (Reduce Start, Reduce Duration) pairs."""
    cols = list(st.columns)
    starts = [i for i, c in enumerate(cols) if c == "Reduce Start(us)"]
    assert all(cols[i + 1] == "Reduce Duration(us)" for i in starts)
    assert cols.count("Reduce Duration(us)") == len(starts)
    return [(i, i + 1) for i in starts]


def _raw_tags(profile) -> dict[tuple[int, int], dict[int, int]]:
    """(model id, iteration) -> {tag: timestamp ns}, from the raw ts_track records."""
    tr = profile.run.load("step_trace")
    out: dict[tuple[int, int], dict[int, int]] = {}
    for rec in tr:
        out.setdefault((int(rec["model_id"]), int(rec["index_id"])), {})[int(rec["tag_id"])] = int(rec["timestamp"])
    return out


# ------------------------------------------------------------------------ arithmetic
def test_header(resnet_run, resnet_run_ws1):
    assert list(resnet_run_ws1.profile.step_trace.columns) == STEP_TRACE_HEADER == C.STEP_TRACE
    n = len(resnet_run.graph.nodes_of_type("HcomAllReduce"))
    assert list(resnet_run.profile.step_trace.columns) == STEP_TRACE_HEADER + C.STEP_TRACE_REDUCE * n


@pytest.mark.parametrize("which", ["resnet_run", "resnet_run_ws1"])
def test_step_trace_arithmetic(which, request):
    run = request.getfixturevalue(which)
    st = run.profile.step_trace
    fp, bp, end = st["FP Start(us)"], st["BP End(us)"], st["Iteration End(us)"]
    assert np.isfinite(fp).all() and np.isfinite(bp).all() and np.isfinite(end).all()
    assert (fp > 1.7e15).all()  # absolute timestamps in us
    assert ((fp < bp) & (bp < end)).all()
    np.testing.assert_allclose(st["FP to BP Time(us)"], bp - fp, rtol=0, atol=TS_TOL_US)
    np.testing.assert_allclose(st["Iteration Refresh(us)"], end - bp, rtol=0, atol=TS_TOL_US)
    assert (st["FP to BP Time(us)"] > 0).all() and (st["Iteration Refresh(us)"] > 0).all()
    assert (st["Iteration Time(us)"] >= st["FP to BP Time(us)"] + st["Iteration Refresh(us)"] - 0.002).all()
    dab = st["Data Aug Bound(us)"]
    assert np.isnan(dab.iloc[0])
    np.testing.assert_allclose(dab.iloc[1:].to_numpy(), (fp.iloc[1:].to_numpy() - end.iloc[:-1].to_numpy()),
                               rtol=0, atol=TS_TOL_US)
    assert (dab.iloc[1:] > 0).all()  # the host launches the next step after the previous one ended
    assert (st["Device_id"] == 0).all() and (st["Model ID"] == run.model_id).all()


def test_durations_are_exact_to_the_ns(resnet_run):
    """FP to BP, Iteration Refresh, Iteration Time and Reduce Duration come from integer ns."""
    st = resnet_run.profile.step_trace
    raw = _raw_tags(resnet_run.profile)
    pairs = _reduce_pairs(st)
    for _, row in st.iterrows():
        tags = raw[(int(row["Model ID"]), int(row["Iteration ID"]))]
        assert row["FP to BP Time(us)"] == round((tags[3] - tags[2]) / 1000, 3)
        assert row["Iteration Refresh(us)"] == round((tags[4] - tags[3]) / 1000, 3)
        assert row["Iteration Time(us)"] == round((tags[4] - tags[0]) / 1000, 3)
        for k, (_, d) in enumerate(pairs):
            assert row.iloc[d] == round((tags[10001 + 2 * k] - tags[10000 + 2 * k]) / 1000, 3)


def test_data_aug_bound_is_exact_to_the_ns(resnet_run):
    st = resnet_run.profile.step_trace
    raw = _raw_tags(resnet_run.profile)
    for i in range(1, len(st)):
        m, it = int(st["Model ID"].iloc[i]), int(st["Iteration ID"].iloc[i])
        want = (raw[(m, it)][2] - raw[(m, it - 1)][4]) / 1000
        assert st["Data Aug Bound(us)"].iloc[i] == pytest.approx(want, abs=0.0015)


def test_rows_equal_run_graph_calls(run_profiled):
    for steps in (1, 4):
        run = run_profiled(build_tiny_graph(world_size=2)[0], steps=steps, subdir=f"s{steps}")
        st = run.profile.step_trace
        assert len(st) == steps
        assert st["Iteration ID"].tolist() == list(range(1, steps + 1))


def test_reduce_pairs_equal_all_reduce_buckets(resnet_run, resnet_run_ws1):
    n_ar = len(resnet_run.graph.nodes_of_type("HcomAllReduce"))
    assert n_ar >= 2
    assert len(_reduce_pairs(resnet_run.profile.step_trace)) == n_ar
    assert resnet_run_ws1.graph.nodes_of_type("HcomAllReduce") == []
    assert _reduce_pairs(resnet_run_ws1.profile.step_trace) == []


def test_all_reduce_spans_lie_inside_their_iteration(resnet_run):
    st = resnet_run.profile.step_trace
    pairs = _reduce_pairs(st)
    end = st["Iteration End(us)"].to_numpy()
    begin = end - st["Iteration Time(us)"].to_numpy()
    prev_start = None
    for s, d in pairs:
        start, dur = st.iloc[:, s].to_numpy(), st.iloc[:, d].to_numpy()
        assert np.isfinite(start).all() and (dur > 0).all()
        assert (start >= begin - TS_TOL_US).all()
        assert (start + dur <= end + TS_TOL_US).all()
        assert (start >= st["FP Start(us)"].to_numpy()).all()  # gradients exist only after the forward pass
        if prev_start is not None:  # buckets run in order on the HCCL stream
            assert (start > prev_start).all()
        prev_start = start + dur


def test_reduce_durations_match_the_communication_tasks(resnet_run):
    """Each Reduce span is [AR start trace, AR end trace] around exactly one COMMUNICATION task."""
    p = resnet_run.profile
    ops = p.op_summary
    comm = ops[ops["Task Type"] == "COMMUNICATION"]
    its = p.iteration_of_ops[comm.index]
    st = p.step_trace
    pairs = _reduce_pairs(st)
    assert len(comm) == len(pairs) * len(st)
    for r, (_, row) in enumerate(st.iterrows()):
        mine = comm[(its == row["Iteration ID"]).to_numpy()].sort_values("Task Start Time(us)")
        assert len(mine) == len(pairs)
        for (s, d), (_, task) in zip(pairs, mine.iterrows()):
            assert task["Task Start Time(us)"] == pytest.approx(row.iloc[s] + 0.020, abs=TS_TOL_US)
            assert row.iloc[d] == pytest.approx(task["Task Duration(us)"] + 0.020, abs=0.0015)


def test_training_trace_off_gives_model_level_rows(run_profiled):
    run = run_profiled(build_tiny_graph(world_size=2)[0], steps=2, training_trace="off")
    st = run.profile.step_trace
    assert len(st) == 2 and list(st.columns) == STEP_TRACE_HEADER
    for c in ("FP Start(us)", "BP End(us)", "FP to BP Time(us)", "Iteration Refresh(us)", "Data Aug Bound(us)"):
        assert st[c].isna().all(), c
    raw = _raw_tags(run.profile)
    for _, row in st.iterrows():
        tags = raw[(run.model_id, int(row["Iteration ID"]))]
        assert set(tags) == {rawdata.MODEL_START_TAG, rawdata.MODEL_END_TAG}
        assert row["Iteration Time(us)"] == pytest.approx((tags[1] - tags[0]) / 1000, abs=TS_TOL_US)
        assert row["Iteration End(us)"] == pytest.approx(tags[1] / 1000, abs=TS_TOL_US)


def test_training_trace_off_iteration_time_is_exact(run_profiled):
    run = run_profiled(build_tiny_graph(world_size=2)[0], steps=2, training_trace="off")
    raw = _raw_tags(run.profile)
    for _, row in run.profile.step_trace.iterrows():
        tags = raw[(run.model_id, int(row["Iteration ID"]))]
        assert row["Iteration Time(us)"] == round((tags[1] - tags[0]) / 1000, 3)


def _two_graph_run(tmp_path):
    opts = {"ge.exec.profilingMode": "1", "geprof.clock": "virtual",
            "ge.exec.profilingOptions": json.dumps({"output": str(tmp_path), "training_trace": "on"})}
    assert ge.GEInitialize(opts) == ge.SUCCESS
    s = ge.Session()
    g1 = build_tiny_graph(world_size=2)[0]
    s.add_graph(1, g1)
    g = ge.Graph("no_data")  # no Data node: no FP point, FP Start is N/A
    w = g.variable("w", (64, 64), "float16")
    ge.add_training(g, g.op("ReduceMean", g.op("Relu", w)))
    s.add_graph(2, g)
    for _ in range(3):
        s.run_graph(1)
        s.run_graph(2)
    ids = (s.model(1).model_id, s.model(2).model_id)
    kernels = [sum(1 for n in graph.nodes if n.engine != "GE_LOCAL") for graph in (g1, g)]
    ge.GEFinalize()
    return geprof_nb.load(tmp_path), ids, kernels


def test_two_graphs_in_one_session(tmp_path):
    p, (m1, m2), (k1, k2) = _two_graph_run(tmp_path)
    ops = p.op_summary
    assert len(ops) == 3 * (k1 + k2)
    assert (ops["Model ID"] == m1).sum() == 3 * k1 and (ops["Model ID"] == m2).sum() == 3 * k2
    st = p.step_trace
    assert len(st) == 6  # one row per run_graph call
    assert sorted(st["Model ID"].unique().tolist()) == sorted([m1, m2])
    a, b = st[st["Model ID"] == m1], st[st["Model ID"] == m2]
    assert a["Iteration ID"].tolist() == b["Iteration ID"].tolist() == [1, 2, 3]
    assert a["FP Start(us)"].notna().all() and b["FP Start(us)"].isna().all()
    assert b["BP End(us)"].notna().all()
    assert np.isnan(a["Data Aug Bound(us)"].iloc[0]) and a["Data Aug Bound(us)"].iloc[1:].notna().all()


def test_two_graphs_durations_stay_exact(tmp_path):
    p, (m1, _), _ = _two_graph_run(tmp_path)
    raw = _raw_tags(p)
    for _, row in p.step_trace[p.step_trace["Model ID"] == m1].iterrows():
        tags = raw[(m1, int(row["Iteration ID"]))]
        assert row["FP to BP Time(us)"] == round((tags[3] - tags[2]) / 1000, 3)
        assert row["Iteration Time(us)"] == round((tags[4] - tags[0]) / 1000, 3)


def test_get_next_graph(run_profiled):
    g = ge.models.mlp(batch_size=4, in_features=8, hidden=(16,), out_features=2, data="GetNext", world_size=2)
    run = run_profiled(g, steps=2)
    raw = _raw_tags(run.profile)
    for tags in raw.values():
        assert {rawdata.GET_NEXT_START_TAG, rawdata.GET_NEXT_START_TAG + 1} <= set(tags)
        assert tags[rawdata.GET_NEXT_START_TAG] < tags[rawdata.GET_NEXT_START_TAG + 1] <= tags[rawdata.FP_TAG]
    st = run.profile.step_trace
    assert len(st) == 2 and len(_reduce_pairs(st)) == 1
    assert list(st.columns[-3:]) == C.STEP_TRACE_GETNEXT  # after the Reduce pairs
    for _, row in st.iterrows():  # exact to the ns from the GetNext tags, inside the step before FP
        tags = raw[(int(row["Model ID"]), int(row["Iteration ID"]))]
        start, end = tags[rawdata.GET_NEXT_START_TAG], tags[rawdata.GET_NEXT_START_TAG + 1]
        assert row["GetNext Time(us)"] == (end - start) / 1000
        assert abs(row["GetNext Start(us)"] - start / 1000) <= TS_TOL_US
        assert abs(row["GetNext End(us)"] - end / 1000) <= TS_TOL_US
        assert tags[rawdata.MODEL_START_TAG] <= start < end <= tags[rawdata.FP_TAG] < tags[rawdata.ITER_END_TAG]
    times = run.profile.source.times_ns("step_trace", st)
    assert times["GetNext End(us)"].tolist() == [raw[(int(m), int(i))][rawdata.GET_NEXT_START_TAG + 1]
                                                 for m, i in zip(st["Model ID"], st["Iteration ID"])]
    ops = run.profile.op_summary
    cpu = ops[ops["Task Type"] == "AI_CPU"]
    assert len(cpu) == 2 and (cpu["OP Type"] == "GetNext").all() and (cpu["Block Num"] == 1).all()
    assert cpu[["aicore_time(us)", "aiv_time(us)", "cube_utilization(%)"]].isna().all().all()


def test_no_get_next_columns_without_get_next_tags(resnet_run):
    assert not set(C.STEP_TRACE_GETNEXT) & set(resnet_run.profile.step_trace.columns)


def test_get_next_span_covers_every_get_next_of_the_step(tmp_path):
    """Two GetNext nodes (tags 20000/20001 and 20002/20003): one span from the first start to the last end;
    a step whose GetNext never ended has none."""
    base = 1_767_225_600_000_000_000
    rows = []
    for it, tags in ((1, {0: 0, 20000: 1_000, 20001: 5_000, 20002: 2_000, 20003: 9_500, 2: 10_000, 4: 50_000}),
                     (2, {0: 100_000, 20000: 101_000, 2: 110_000, 4: 150_000})):
        rows += [{"timestamp": base + t, "model_id": 1, "index_id": it, "tag_id": tag} for tag, t in tags.items()]
    p = geprof_nb.load(write_run(tmp_path / "run", {"step_trace": records("step_trace", rows)}, {}))
    st = p.step_trace
    assert st["GetNext Time(us)"].iloc[0] == 8.5 and np.isnan(st["GetNext Time(us)"].iloc[1])
    times = p.source.times_ns("step_trace", st)
    assert times["GetNext Start(us)"].iloc[0] == base + 1_000 and times["GetNext End(us)"].iloc[0] == base + 9_500
    assert times["GetNext Start(us)"].isna().iloc[1] and times["GetNext End(us)"].isna().iloc[1]


# ------------------------------------------------------------------------ collection windows
def _windowed_run(path, windows: list[dict], begins: list[int]):
    """A hand-built run of model 1, one iteration per begin (ns): model start at the begin, FP +10 us,
    BP +50 us, iteration end +90 us, model end +91 us; ``windows``: info.json's switch_history."""
    rows = []
    for it, b in enumerate(begins, start=1):
        for tag, dt in ((rawdata.MODEL_START_TAG, 0), (rawdata.FP_TAG, 10_000), (rawdata.BP_TAG, 50_000),
                        (rawdata.ITER_END_TAG, 90_000), (rawdata.MODEL_END_TAG, 91_000)):
            rows.append({"timestamp": b + dt, "model_id": 1, "index_id": it, "tag_id": tag})
    run = write_run(path, {"step_trace": records("step_trace", rows)}, {})
    (run / rawdata.INFO_FILE).write_text(json.dumps({**INFO, "switch_history": windows}), encoding="utf-8")
    return geprof_nb.load(run)


T0 = 1_767_225_600_000_000_000
#: Iterations 1-3 collected in one window, 4-5 in the next; the collection was off for 6 ms between them.
WINDOWS = [{"start_ns": T0, "switch": 1, "stop_ns": T0 + 700_000},
           {"start_ns": T0 + 6_700_000, "switch": 1, "stop_ns": T0 + 7_200_000}]
BEGINS = [T0 + 100_000, T0 + 300_000, T0 + 520_000, T0 + 6_800_000, T0 + 7_000_000]


def test_first_step_of_each_collection_window_has_no_data_aug_bound(tmp_path):
    """Consecutive Iteration IDs across a stop and restart of the collection: the restart's first step has no
    previous iteration in its window (msprof: first iteration -> N/A), not the 6 ms the collection was off."""
    p = _windowed_run(tmp_path / "run", WINDOWS, BEGINS)
    st = p.step_trace
    assert st["Iteration ID"].tolist() == [1, 2, 3, 4, 5]
    dab = st["Data Aug Bound(us)"]
    assert dab.isna().tolist() == [True, False, False, True, False]
    # FP (begin + 10 us) minus the previous iteration end (previous begin + 90 us)
    assert dab[[1, 2, 4]].tolist() == [120.0, 140.0, 120.0]
    bounds = p.source.step_bounds()
    assert bounds["window"].tolist() == [1, 1, 1, 2, 2]
    # step_breakdown's step windows: from the previous end within a collection window, else the step's own begin
    w = step_windows(bounds, p.source.op_rows())
    assert (w["start"] - T0).tolist() == [100_000, 190_000, 390_000, 6_800_000, 6_890_000]
    assert chained_steps(bounds).tolist() == [2, 3, 5]


def test_without_switch_history_consecutive_iterations_follow(tmp_path):
    """A run that never recorded windows (one collection): only a gap in the Iteration IDs breaks the chain."""
    p = _windowed_run(tmp_path / "run", [], BEGINS)
    assert p.step_trace["Data Aug Bound(us)"].isna().tolist() == [True, False, False, False, False]
    assert p.step_trace["Data Aug Bound(us)"].iloc[3] == 6_800_000 / 1000 + 10 - 520 - 90


def test_a_damaged_switch_history_names_the_field(tmp_path):
    with pytest.raises(RunDirError, match="switch_history.*integer start_ns"):
        _windowed_run(tmp_path / "run", [{"start_ns": "soon"}], BEGINS).step_trace
