"""ProfilingTaskUtils: FP/BP/iteration-end/AllReduce/GetNext points, directly and through profiled runs."""

from __future__ import annotations

import numpy as np
import pytest

from geprof_nb import ge
from geprof_nb.analysis.tables import summary
from geprof_nb.ge.compiler import PROFILER_TRACE_NS
from geprof_nb.prof import events, rawdata
from geprof_nb.prof.task_utils import ProfilingPoint
from geprof_nb.prof.task_utils import ProfilingTaskUtils as U
from helpers.geprof_testing import TS_TOL_US, small_resnet


def _expected_fp(g):
    first_data = next(n for n in g.nodes if n.type in ("Data", "GetNext", "IteratorV2"))
    return min((c for c, _ in g.consumers(first_data)), key=lambda n: n.id)


def _expected_bp(g):
    ars = [n for n in g.nodes if n.type == "HcomAllReduce"]
    anchor = ars[-1] if ars else g.net_output
    return max((t.node for t in anchor.inputs), key=lambda n: n.id)


# ---------------------------------------------------------------------- direct use
def test_auto_fp_is_lowest_id_consumer_of_first_data(tiny_graph):
    g, _ = tiny_graph(world_size=2)
    fp, note = U.find_fp_point(g)
    assert fp.name == "fc1" and fp is _expected_fp(g)
    assert fp.id > g.node("labels_relu").id  # not simply the first compute op
    assert "first consumer of Data 'x'" in note


def test_auto_bp_is_highest_id_producer_of_last_all_reduce(tiny_graph):
    g, info = tiny_graph(world_size=2)
    bp, note = U.find_bp_point(g)
    assert bp is _expected_bp(g)
    assert bp.name == "gradients/fc1_grad/MatMulV2"  # the last gradient computed
    assert bp.id == max(t.node.id for t in info.all_reduce[-1].inputs)
    assert "last AllReduce 'gradients/HcomAllReduce_0'" in note


def test_auto_bp_uses_the_last_of_several_all_reduces(tiny_graph):
    g, info = tiny_graph(world_size=2, bucket_bytes=1)
    assert len(info.all_reduce) == 2
    bp, _ = U.find_bp_point(g)
    assert bp is _expected_bp(g) and bp.name == "gradients/fc1_grad/MatMulV2"
    first_ar_producer = info.all_reduce[0].inputs[0].node
    assert first_ar_producer.name == "gradients/fc2_grad/MatMulV2_1" and bp is not first_ar_producer


def test_auto_bp_without_all_reduce_is_highest_id_producer_of_net_output(tiny_graph):
    g, info = tiny_graph(world_size=1)
    assert info.all_reduce == []
    bp, note = U.find_bp_point(g)
    assert bp is _expected_bp(g) and bp.name == "loss"
    assert "NetOutput (no AllReduce in the graph)" in note and "set bp_point" in note


def test_an_inference_graph_says_its_bp_end_is_the_end_of_the_forward_pass(tiny_graph):
    """No backward pass, so no BP point: the trace after the NetOutput's last producer marks the end of the
    forward pass, and the note says so (not "BP point 'loss'")."""
    g, _ = tiny_graph(training=False)
    bp, note = U.find_bp_point(g)
    assert bp is _expected_bp(g) and bp.name == "loss" and not g.is_training
    assert note == ("forward only (no backward pass): the BP End trace goes after 'loss', the last input producer "
                    "of the NetOutput 'Node_Output', so FP to BP Time is the forward pass and Iteration Refresh "
                    "what follows it")
    assert "BP point" not in note


def test_bp_is_highest_node_id_not_last_input():
    """FindLastBpFromBpNode takes the producer with the highest id, whatever the input order."""
    g = ge.Graph()
    x = g.data("x", (4,), "float32")
    early = g.op("Relu", x, name="early")
    late = g.op("Relu", x, name="late")
    ar = g.op("HcomAllReduce", [late, early], name="ar")
    g.output(ar if not isinstance(ar, tuple) else list(ar))
    assert U.find_bp_point(g)[0].name == "late"
    g2 = ge.Graph()
    x = g2.data("x", (4,))
    a = g2.op("Relu", x, name="a")
    b = g2.op("Gelu", x, name="b")
    g2.output([b, a])
    assert U.find_bp_point(g2)[0].name == "b"
    g3 = ge.Graph()
    x = g3.data("x", (4,))
    b = g3.op("Gelu", x, name="b")
    a = g3.op("Relu", x, name="a")
    g3.output([b, a])
    assert U.find_bp_point(g3)[0].name == "a"


def test_user_points_and_fallback(tiny_graph):
    g, _ = tiny_graph()
    assert U.find_fp_point(g, "act1")[0].name == "act1"
    assert "fp_point option" in U.find_fp_point(g, "act1")[1]
    assert U.find_bp_point(g, "gradients/act1_grad/ReluGrad")[0].name == "gradients/act1_grad/ReluGrad"
    fp, note = U.find_fp_point(g, "no/such/op")
    assert fp.name == "fc1" and "fp_point 'no/such/op' names no op of graph 'tiny'" in note
    with pytest.warns(UserWarning, match="bp_point 'nope' names no op"):
        pts = U.profiling_points(g, "", "nope")
    assert pts.bp == _expected_bp(g).id


def test_no_data_node_means_no_fp():
    g = ge.Graph("vars_only")
    w = g.variable("w", (3,))
    loss = g.op("ReduceMean", w)
    ge.add_training(g, loss)
    fp, note = U.find_fp_point(g)
    assert fp is None and "no Data/GetNext/IteratorV2 node" in note
    g2 = ge.Graph("unused_data")
    g2.data("x", (2,))
    g2.output(g2.op("Relu", g2.data("y", (2,))))
    fp, note = U.find_fp_point(g2)
    assert fp is None and "has no consumer" in note


def test_profiling_points_of_a_training_graph(tiny_graph):
    g, info = tiny_graph(world_size=2, bucket_bytes=1)
    pts = U.profiling_points(g)
    assert pts.fp == g.node("fc1").id
    assert pts.bp == g.node("gradients/fc1_grad/MatMulV2").id
    assert pts.end == [g.net_output.id]
    assert pts.all_reduce == [n.id for n in info.all_reduce]
    assert pts.get_next == []
    assert pts.logids_before(pts.fp) == [events.FP_START_LOGID]
    assert pts.logids_after(pts.bp) == [events.BP_END_LOGID]
    assert pts.logids_after(g.net_output.id) == [events.ITER_END_LOGID]
    assert pts.logids_before(pts.all_reduce[1]) == [10002]
    assert pts.logids_after(pts.all_reduce[1]) == [10003]
    assert pts.logids_before(g.node("act1").id) == pts.logids_after(g.node("act1").id) == []
    assert pts.key == U.profiling_points(g).key
    assert pts.key != U.profiling_points(g, "act1").key


def test_get_next_points():
    g = ge.models.mlp(batch_size=4, in_features=8, hidden=(8,), out_features=2, data="GetNext")
    pts = U.profiling_points(g)
    gn = g.node("GetNext")
    assert pts.get_next == [gn.id]
    assert pts.fp == _expected_fp(g).id == g.consumers(gn)[0][0].id
    assert pts.logids_before(gn.id) == [events.GETNEXT_START_LOGID]
    assert pts.logids_after(gn.id) == [events.GETNEXT_END_LOGID]


def test_point_with_both_logids():
    p = ProfilingPoint(fp=5, bp=5, end=[5], all_reduce=[5], get_next=[])
    assert p.logids_before(5) == [2, 10000]
    assert p.logids_after(5) == [3, 10001, 4]


def test_logid_constants():
    assert (events.FP_START_LOGID, events.BP_END_LOGID, events.ITER_END_LOGID) == (2, 3, 4)
    assert [events.all_reduce_logids(k) for k in range(3)] == [(10000, 10001), (10002, 10003), (10004, 10005)]
    assert (events.GETNEXT_START_LOGID, events.GETNEXT_END_LOGID) == (20000, 20001)
    assert (rawdata.FP_TAG, rawdata.BP_TAG, rawdata.ITER_END_TAG) == (2, 3, 4)


# ------------------------------------------------------------------ through a run
def _raw_trace(run, tag):
    """iteration -> timestamp (ns) of a step-trace tag."""
    tr = run.profile.run.load("step_trace")
    sel = tr[tr["tag_id"] == tag]
    return {int(i): int(t) for i, t in zip(sel["index_id"], sel["timestamp"])}


def _op_times(run, name):
    """iteration -> (start ns, end ns) of the named op's task."""
    rows = summary.op_rows(run.profile.run)
    frame = rows.frame
    sel = np.flatnonzero((frame["Op Name"] == name).to_numpy())
    assert len(sel) == run.steps, f"{name}: {len(sel)} rows"
    dur_ns = np.rint(frame["Task Duration(us)"].to_numpy()[sel] * 1000).astype(np.int64)
    return {int(rows.iteration[i]): (int(rows.start_ns[i]), int(rows.start_ns[i]) + int(d))
            for i, d in zip(sel, dur_ns)}


def _assert_points(run, fp_name, bp_name):
    fp_ts, bp_ts = _raw_trace(run, rawdata.FP_TAG), _raw_trace(run, rawdata.BP_TAG)
    fp_op, bp_op = _op_times(run, fp_name), _op_times(run, bp_name)
    st = run.profile.step_trace.set_index("Iteration ID")
    ops = run.profile.op_summary
    assert sorted(fp_ts) == sorted(bp_ts) == list(range(1, run.steps + 1))
    for it in fp_ts:
        # FP trace right before the FP op, BP trace right after the BP op (exact ns)
        assert 0 < fp_op[it][0] - fp_ts[it] <= 300
        assert fp_op[it][0] - fp_ts[it] == PROFILER_TRACE_NS
        assert abs(bp_ts[it] - bp_op[it][1]) <= 300
        # and the same through the public tables (float us)
        mine = ops[(ops["Op Name"] == fp_name).to_numpy() & (run.profile.iteration_of_ops == it).to_numpy()]
        assert st.loc[it, "FP Start(us)"] == pytest.approx(mine["Task Start Time(us)"].iloc[0], abs=TS_TOL_US)
        mine = ops[(ops["Op Name"] == bp_name).to_numpy() & (run.profile.iteration_of_ops == it).to_numpy()]
        end = mine["Task Start Time(us)"].iloc[0] + mine["Task Duration(us)"].iloc[0]
        assert st.loc[it, "BP End(us)"] == pytest.approx(end, abs=TS_TOL_US)


def test_auto_points_through_a_run(run_profiled, tiny_graph):
    g, _ = tiny_graph(world_size=2)
    run = run_profiled(g, steps=3)
    _assert_points(run, "fc1", "gradients/fc1_grad/MatMulV2")
    assert any("FP point 'fc1'" in n for n in run.notes)


def test_auto_points_without_all_reduce_through_a_run(run_profiled, tiny_graph):
    g, _ = tiny_graph(world_size=1)
    run = run_profiled(g, steps=2)
    _assert_points(run, "fc1", "loss")
    assert list(run.profile.step_trace.columns).count("Reduce Start(us)") == 0


@pytest.fixture(scope="module")
def user_points():
    g = small_resnet(4)
    convs = g.nodes_of_type("Conv2D")
    filters = g.nodes_of_type("Conv2DBackpropFilter")
    return g, convs[10].name, filters[5].name


def test_user_fp_bp_points_are_honoured(run_profiled, user_points):
    g, fp_name, bp_name = user_points
    run = run_profiled(g, steps=3, fp_point=fp_name, bp_point=bp_name)
    _assert_points(run, fp_name, bp_name)
    assert run.profile.options["fp_point"] == fp_name
    auto_fp, auto_bp = _expected_fp(g).name, _expected_bp(g).name
    assert auto_fp != fp_name and auto_bp != bp_name
    # FP to BP now spans exactly the chosen ops
    st = run.profile.step_trace
    fp_op, bp_op = _op_times(run, fp_name), _op_times(run, bp_name)
    for _, row in st.iterrows():
        it = int(row["Iteration ID"])
        want = (bp_op[it][1] - fp_op[it][0] + PROFILER_TRACE_NS) / 1000
        assert row["FP to BP Time(us)"] == pytest.approx(want, abs=0.002)


def test_bp_point_before_fp_point_in_the_task_order_is_noted(run_profiled, tiny_graph):
    """A bp_point launched before the fp_point gives a negative FP to BP Time; the run says so
    (from the trace tasks' launch order at placement), and a valid pair gets no such note."""
    g, _ = tiny_graph(world_size=2)
    backwards = run_profiled(g, steps=2, subdir="backwards", fp_point="act1", bp_point="fc1")
    assert (backwards.profile.step_trace["FP to BP Time(us)"] < 0).all()
    note = ("BP point 'fc1' runs before FP point 'act1' in the task order: FP to BP Time is negative; "
            "set bp_point to an op after the FP point (the last gradient op) or fp_point to an earlier op")
    assert note in backwards.notes
    assert f"model {backwards.model_id} (tiny): {note}" in backwards.profile.notes
    valid = run_profiled(g, steps=2, subdir="valid", fp_point="fc1", bp_point="act1")
    assert (valid.profile.step_trace["FP to BP Time(us)"] > 0).all()
    assert not any("runs before FP point" in n for n in valid.notes + valid.profile.notes)


def test_trace_order_notes_read_the_launch_order_of_the_trace_tasks(tiny_graph):
    g, _ = tiny_graph(world_size=2)
    points = U.profiling_points(g, "act1", "fc1")
    fp_first = [-1, events.FP_START_LOGID, -1, events.BP_END_LOGID]
    assert U.trace_order_notes(g, points, fp_first) == []
    assert len(U.trace_order_notes(g, points, fp_first[::-1])) == 1
    assert U.trace_order_notes(g, points, [-1, events.BP_END_LOGID]) == []  # no FP trace task: nothing to compare


def test_unknown_user_point_falls_back_to_auto(run_profiled, tiny_graph):
    g, _ = tiny_graph(world_size=2)
    with pytest.warns(UserWarning, match="fp_point 'missing' names no op"):
        run = run_profiled(g, steps=2, fp_point="missing")
    _assert_points(run, "fc1", "gradients/fc1_grad/MatMulV2")
