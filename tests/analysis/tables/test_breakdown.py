"""step_breakdown: the torch_npu step_trace_time split, on hand-made spans and on a real run."""

import numpy as np
import pandas as pd
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis.tables.breakdown import STEP_TRACE_TIME, main_model, step_breakdown
from geprof_nb.analysis.tables.summary import OpRows
from helpers.geprof_testing import build_tiny_graph, run_aged, run_profiled_session, run_two_graphs

T0 = 1_767_225_600_000_000_000


def rows(spans):
    """OpRows from (iteration, start ns offset, duration ns, communication?)."""
    it, start, dur, comm = map(np.asarray, zip(*spans))
    frame = pd.DataFrame({"Task Type": np.where(comm, "COMMUNICATION", "AI_CORE"), "Task Duration(us)": dur / 1000})
    return OpRows(frame, it.astype(np.int64), (T0 + start).astype(np.int64), np.arange(len(it)))


def trace(ends_us, first_start_us):
    """Step bounds: step 1 begins at first_start, every step ends at its entry of ends."""
    ends = T0 + np.asarray(ends_us, np.int64) * 1000
    begin = np.r_[T0 + first_start_us * 1000, ends[:-1]]
    return pd.DataFrame({"step": np.arange(1, len(ends) + 1), "begin": begin, "end": ends})


def test_hand_made_overlap():
    # step 1 window [0, 100] us: compute 10-40 and 50-70, comm 30-60 (overlaps both compute spans by 10 each)
    r = rows([(1, 10_000, 30_000, False), (1, 50_000, 20_000, False), (1, 30_000, 30_000, True)])
    b = step_breakdown(r, trace([100], 0)).iloc[0]
    assert list(b.index) == STEP_TRACE_TIME
    assert b["Computing"] == 50 and b["Communication"] == 30 and b["Overlapped"] == 20
    assert b["Communication(Not Overlapped)"] == 10 and b["Free"] == 100 - 60
    assert b["Stage"] == 100 and b["Bubble"] == 0 and b["Preparing"] == 10
    assert b["Communication(Not Overlapped and Exclude Receive)"] == 10


def test_windows_follow_iteration_ends():
    r = rows([(1, 5_000, 10_000, False), (2, 105_000, 10_000, False), (2, 110_000, 20_000, True)])
    b = step_breakdown(r, trace([100, 200], 0))
    assert list(b["Step"]) == [1, 2]
    assert list(b["Stage"]) == [100, 100]
    assert b.loc[1, "Preparing"] == 5 and b.loc[1, "Overlapped"] == 5 and b.loc[1, "Communication"] == 20


def test_preparing_counts_from_the_framework_step_start_where_known():
    """torch_npu's Preparing: first task - framework step start (bounds' framework_begin); a step without one
    (-1) counts from its window's start.  The windows themselves do not move."""
    r = rows([(1, 5_000, 10_000, False), (2, 105_000, 10_000, False)])
    b = step_breakdown(r, trace([100, 200], 0).assign(framework_begin=[T0 + 2_000, -1]))
    assert b["Preparing"].tolist() == [3.0, 5.0]
    assert b["Stage"].tolist() == [100, 100] and b["Free"].tolist() == [90, 90]


def test_real_run_adds_up(tmp_path):
    run = run_profiled_session(tmp_path, build_tiny_graph(world_size=2)[0], steps=3)
    b = run.profile.step_breakdown
    assert len(b) == 3 and (b["Computing"] > 0).all() and (b["Communication"] > 0).all()
    total = b["Computing"] + b["Communication(Not Overlapped)"] + b["Free"]
    assert np.allclose(total, b["Stage"], atol=1e-6)
    assert np.allclose(b["Overlapped"] + b["Communication(Not Overlapped)"], b["Communication"])
    assert (b["Free"] >= 0).all() and (b["Preparing"] >= 0).all()
    # Stage (step length) is the time between iteration ends
    ends = run.profile.step_trace["Iteration End(us)"].to_numpy()
    assert b["Stage"].iloc[1:].to_numpy() == pytest.approx(np.diff(ends), abs=0.5)


def test_task_trace_l0_splits_communication_as_l1_does(tmp_path):
    """At l0 op_summary has no Task Type; the collectives are known from the device's task type (HCCL)."""
    graph = ge.models.mlp(training=True, world_size=8)
    l0 = run_profiled_session(tmp_path / "l0", graph, 3, task_trace="l0").profile
    l1 = run_profiled_session(tmp_path / "l1", ge.models.mlp(training=True, world_size=8), 3).profile
    assert set(l0.op_summary["Task Type"].astype(str)) == {"N/A"}
    hccl = l0.task_time[l0.task_time["kernel_type"].astype(str) == "HCCL"]
    assert len(hccl) == 3 and l0.source.communication_rows().sum() == 3
    a, b = l0.step_breakdown, l1.step_breakdown
    assert (a["Communication"] > 0).all()
    assert a["Communication"].sum() == pytest.approx(hccl["task_time(us)"].sum(), abs=1e-6)  # one per step
    pd.testing.assert_frame_equal(a, b)


def test_a_step_without_task_records_has_no_row():
    """storage_limit can delete a step's task chunks but keep its step-trace chunk: such a step is not idle,
    its data is gone, so it has no row (torch_npu writes a row only for a step that has device events)."""
    r = rows([(3, 205_000, 10_000, False)])
    b = step_breakdown(r, trace([100, 200, 300], 0))
    assert b["Step"].tolist() == [3]
    assert b.loc[0, "Stage"] == 100 and b.loc[0, "Computing"] == 10 and b.loc[0, "Free"] == 90


def test_another_models_tasks_inside_a_step_window_are_busy():
    """The windows are the main model's steps; every device task inside one counts, whatever its model
    and Iteration ID (torch_npu splits the device timeline by step time): model 2's iteration 1 ran inside
    model 1's step 2."""
    r = rows([(1, 10_000, 50_000, False), (2, 110_000, 50_000, False),
              (1, 170_000, 20_000, False), (1, 175_000, 10_000, True)])  # model 2, iteration 1, in step 2
    b = step_breakdown(r, trace([100, 200], 0))
    assert b["Computing"].tolist() == [50, 70] and b["Free"].tolist() == [50, 30]
    assert b["Communication"].tolist() == [0, 10] and b.loc[1, "Communication(Not Overlapped)"] == 0
    assert b["Preparing"].tolist() == [10, 10]


def test_two_graphs_other_graphs_device_time_is_not_free(tmp_path):
    p = run_two_graphs(tmp_path)
    rows = p.source.op_rows()  # exact ns (op_summary's float us near 1.8e15 resolve 0.25 us)
    start = rows.start_ns
    end = start + np.rint(rows.frame["Task Duration(us)"].to_numpy() * 1000).astype(np.int64)
    model = rows.frame["Model ID"].to_numpy()
    bounds = p.source.step_bounds().set_index("step")
    b = p.step_breakdown.set_index("Step")
    assert b.index.tolist() == [1, 2, 3]  # graph 1's steps (the step bounds' model)
    for step in (2, 3):  # chained windows: previous iteration end -> this one's
        w0, w1 = bounds.loc[step - 1, "end"], bounds.loc[step, "end"]
        inside = (start < w1) & (end > w0)
        assert set(model[inside]) == {1, 2}  # graph 2's kernels ran inside graph 1's step
        busy = _union_length(np.clip(start[inside], w0, w1), np.clip(end[inside], w0, w1)) / 1000
        assert b.loc[step, "Computing"] == pytest.approx(busy, abs=1e-6)
        assert b.loc[step, "Free"] == pytest.approx((w1 - w0) / 1000 - busy, abs=1e-6)
        assert b.loc[step, "Free"] < b.loc[step, "Stage"] - b.loc[1, "Computing"] - 10  # graph 2's time is busy


def _union_length(starts, ends) -> float:
    """Length of the union of the spans, by a plain sweep."""
    total, reach = 0, np.iinfo(np.int64).min
    for s, e in sorted(zip(starts.tolist(), ends.tolist())):
        total += max(0, e - max(s, reach))
        reach = max(reach, e)
    return total


def test_aged_out_steps_have_no_row_and_the_kept_ones_match_the_full_run(tmp_path):
    """storage_limit aged out the first steps' task chunks; their step-trace rows remain.  Only the kept
    steps have a row, each as the same run without a limit has it (the virtual clock makes both the same)."""
    full = run_aged(tmp_path / "full", None)
    aged = run_aged(tmp_path / "aged", 22_000)
    kept = aged.iterations
    assert 0 < len(kept) < len(aged.step_trace) == 12  # the premise: step trace kept, early tasks gone
    b = aged.step_breakdown
    assert b["Step"].tolist() == kept.tolist()
    cols = ["Computing", "Communication(Not Overlapped)", "Communication", "Free", "Stage"]
    ref = full.step_breakdown.set_index("Step").loc[kept, cols]
    pd.testing.assert_frame_equal(b.set_index("Step")[cols], ref)


def test_no_task_records_left_has_no_steps_and_the_note_says_so(tmp_path):
    aged = run_aged(tmp_path, 18_000)
    assert aged.op_summary.empty and len(aged.step_trace) == 12  # the premise: every hwts chunk aged out
    assert aged.step_breakdown.empty
    note = next(n for n in aged.notes if n.startswith("storage_limit"))
    assert note.endswith("no task records remain (every hwts chunk aged out)"), note
    assert "early iterations are missing" not in note


def test_aged_out_steps_leave_the_kept_steps_preparing_as_in_the_full_run(tmp_path):
    """Preparing pairs each step with its own ModelExecute call by time: the calls of steps whose task
    records aged out do not shift the kept steps onto earlier calls (it read ~1,200 us instead of ~16)."""
    full = run_aged(tmp_path / "full", None)
    aged = run_aged(tmp_path / "aged", 22_000)
    kept = aged.step_breakdown.set_index("Step")["Preparing"]
    assert len(kept) >= 1
    pd.testing.assert_series_equal(kept, full.step_breakdown.set_index("Step").loc[kept.index, "Preparing"])


def test_preparing_counts_to_the_main_models_own_first_task():
    """Another model's task of the same Iteration ID that ran earlier in the window (graph 2 run before
    graph 1 in each step) is not the step's first task: the step's is model 1's (the bounds' model)."""
    r = rows([(1, 10_000, 20_000, False), (1, 110_000, 30_000, False), (2, 150_000, 20_000, False)])
    r.frame["Model ID"] = [1, 2, 1]
    bounds = trace([100, 200], 0).assign(framework_begin=[T0 + 4_000, T0 + 140_000], model=1)
    b = step_breakdown(r, bounds)
    assert b["Preparing"].tolist() == [6.0, 10.0]  # step 2: 150 - 140, not 110 - 140
    assert b["Computing"].tolist() == [20, 50]  # model 2's task is still busy time of step 2
    unnamed = step_breakdown(r, bounds.drop(columns="model"))  # no model known: the iteration's tasks
    assert unnamed["Preparing"].tolist() == [6.0, 10.0]


def _alternating(output, order: tuple[int, int], steps: int = 4):
    """Graph 1 (MLP training, batch 8; built first: model 1, the main model) and graph 2 (batch 4) run
    alternately in ``order``, ``steps`` each."""
    with ge.simulation_settings(clock_mode="virtual"):
        sess = ge.Session()
        try:
            assert sess.add_graph(1, ge.models.mlp(batch_size=8, training=True)) == ge.SUCCESS
            assert sess.add_graph(2, ge.models.mlp(batch_size=4, training=True)) == ge.SUCCESS
            assert sess.build_graph(1) == ge.SUCCESS and sess.build_graph(2) == ge.SUCCESS
            with geprof_nb.profile(output=str(output)) as block:
                for _ in range(steps):
                    for graph_id in order:
                        assert sess.run_graph(graph_id) == ge.SUCCESS
            main = sess.model(1).model_id
        finally:
            ge.GEFinalize()
    return block.profile, main


@pytest.mark.parametrize("order", [(1, 2), (2, 1)])
def test_two_graphs_preparing_is_the_main_models_first_task_minus_its_model_execute(tmp_path, order):
    """Preparing of each step, exactly in ns: the main model's first task of that iteration minus the begin of
    the ModelExecute call that ran it; graph 2's kernels started earlier in the window (it was -125 us)."""
    p, main = _alternating(tmp_path, order)
    calls = p.source.api_calls()
    execute = calls[(calls["api"] == "ModelExecute") & (calls["model_id"] == main)].set_index("iteration")["begin"]
    rows = p.source.op_rows()
    model = rows.frame["Model ID"].to_numpy()
    first = pd.Series(rows.start_ns[model == main]).groupby(rows.iteration[model == main]).min()
    b = p.step_breakdown
    assert b["Step"].tolist() == [1, 2, 3, 4] and set(p.source.step_bounds()["model"]) == {main}
    expected = [(int(first[s]) - int(execute[s])) / 1000 for s in (1, 2, 3, 4)]
    assert b["Preparing"].tolist() == expected and min(expected) > 0
    bounds = p.source.step_bounds().set_index("step")
    for step in (2, 3, 4):  # the premise: graph 2 started a kernel in the window before the ModelExecute call
        w0 = bounds.loc[step - 1, "end"]
        other = rows.start_ns[(model != main) & (rows.start_ns >= w0) & (rows.start_ns < first[step])]
        assert len(other) and other.min() < execute[step]


def test_the_main_model_is_the_one_with_most_iterations_not_most_records(tmp_path):
    """A training graph with AllReduce writes more step-trace records per step than an inference graph; the
    steps are still the model with the most iterations, as step_trace's main model (advisor, export) is."""
    with ge.simulation_settings(clock_mode="virtual"):
        sess = ge.Session()
        try:
            assert sess.add_graph(1, build_tiny_graph(world_size=8)[0]) == ge.SUCCESS
            assert sess.add_graph(2, ge.models.mlp(batch_size=4, training=False)) == ge.SUCCESS
            with geprof_nb.profile(output=str(tmp_path)) as block:
                for k in range(4):
                    if k:
                        assert sess.run_graph(1) == ge.SUCCESS
                    assert sess.run_graph(2) == ge.SUCCESS
            inference = sess.model(2).model_id
        finally:
            ge.GEFinalize()
    p = block.profile
    records = pd.Series(p.run.load("step_trace")["model_id"]).value_counts()
    assert records.idxmax() != inference  # the premise: the training model has more records
    assert main_model(p.step_trace) == inference
    assert set(p.source.step_bounds()["model"]) == {inference} and p.step_breakdown["Step"].tolist() == [1, 2, 3, 4]
