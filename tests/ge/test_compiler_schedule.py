"""Compiler (streams, events, trace tasks) and the numpy stream schedule."""

from __future__ import annotations

import numpy as np
import pytest

from geprof_nb import ge
from geprof_nb.ge.compiler import EVENT_WAIT_MIN_NS, PROFILER_TRACE_NS, CompiledModel
from geprof_nb.ge.device import PRESETS, CostModel
from geprof_nb.ge.schedule import JITTER_CLIP, StreamSchedule
from geprof_nb.prof import events
from geprof_nb.prof.rawdata import GeTaskType, RtTaskType

COMPUTE, HCCL = 0, 1


def _compile(graph, device="Ascend910B"):
    return CompiledModel(graph, CostModel(PRESETS[device]), COMPUTE, HCCL)


GRAPHS = {
    "resnet50-ws8": lambda: ge.models.resnet50(batch_size=2, image_size=64, world_size=8),
    "resnet50-ws1": lambda: ge.models.resnet50(batch_size=2, image_size=64, world_size=1),
    "mlp-ws2-buckets": lambda: _mlp_small_buckets(),
    "bert-ws4": lambda: ge.models.bert(layers=2, seq_len=16, batch_size=2, hidden=64, heads=4, vocab_size=100,
                                       world_size=4),
}


def _input_to_allreduce():
    """A collective on the HCCL stream reading a graph input: it must wait for the input's copy."""
    g = ge.Graph("input-to-allreduce")
    x = g.data("x", (256, 256), "float16")
    g.output([g.op("Relu", g.op("HcomAllReduce", x, name="ar", rank_size=2), name="act")])
    return g


def _mlp_small_buckets():
    g = ge.Graph("mlp-buckets")
    x = g.data("x", (8, 32))
    labels = g.data("labels", (8, 4))
    h = x
    for i, width in enumerate((64, 64, 4)):
        with g.name_scope(f"dense_{i}"):
            h = g.op("MatMulV2", [h, g.variable("kernel", (h.shape[1], width), "float16")])
            if width != 4:
                h = g.op("Relu", h)
    loss = g.op("ReduceMean", g.op("SoftmaxCrossEntropyWithLogits", [h, labels])[0], name="loss/mean")
    ge.add_training(g, loss, world_size=2, bucket_bytes=1)  # one AllReduce per gradient
    return g


@pytest.fixture(params=sorted(GRAPHS), scope="module")
def compiled(request):
    cm = _compile(GRAPHS[request.param]())
    table = cm.task_table(cm.profiling_points())
    return request.param, cm, table


def _kernel_rows(table):
    return [i for i, k in enumerate(table.kernels) if k is not None]


def _node_task(table):
    """node id -> index of its kernel task (of a Data node: its input copy)."""
    copies = np.flatnonzero(table.rt_type == RtTaskType.MEMCPY_ASYNC).tolist()
    return {int(table.node[i]): i for i in _kernel_rows(table) + copies}


# ------------------------------------------------------------------------- compiler
def test_compute_and_hccl_streams(compiled):
    name, cm, t = compiled
    rows = _kernel_rows(t)
    assert len(rows) == sum(1 for n in cm.graph.nodes if n.engine != "GE_LOCAL")
    for i in rows:
        node = cm.graph.nodes[int(t.node[i])]
        want = HCCL if node.type == "HcomAllReduce" else COMPUTE
        assert t.stream[i] == want, node
        assert (t.kernels[i].ge_task_type == GeTaskType.HCCL) == (node.type == "HcomAllReduce")
    used = set(t.stream[rows].tolist())
    assert used == ({COMPUTE, HCCL} if "ws1" not in name else {COMPUTE})


def test_every_wait_is_recorded_earlier_on_another_stream(compiled):
    _, _, t = compiled
    waits = np.flatnonzero(t.rt_type == RtTaskType.EVENT_WAIT)
    records = np.flatnonzero(t.rt_type == RtTaskType.EVENT_RECORD)
    rec_of = {}
    for j in records:
        assert int(t.event[j]) not in rec_of, "an event is recorded twice"
        rec_of[int(t.event[j])] = int(j)
    for i in waits:
        j = rec_of.get(int(t.event[i]))
        assert j is not None and j < i, f"wait {i} for event {t.event[i]} has no earlier record"
        assert t.stream[j] != t.stream[i]
    assert set(rec_of) == {int(t.event[i]) for i in waits}, "every recorded event is waited for"
    assert (t.event[(t.rt_type != RtTaskType.EVENT_WAIT) & (t.rt_type != RtTaskType.EVENT_RECORD)] == -1).all()


def test_cross_stream_consumers_wait(compiled):
    """Launch order alone: a consumer on another stream than its producer has a wait for a later record."""
    _, cm, t = compiled
    task = _node_task(t)
    rec_pos = {int(t.event[j]): j for j in np.flatnonzero(t.rt_type == RtTaskType.EVENT_RECORD)}
    for node_id, c in task.items():
        for p in cm._producers[node_id]:
            if t.stream[task[p]] == t.stream[c]:
                assert task[p] < c
                continue
            waits = [i for i in range(c) if t.rt_type[i] == RtTaskType.EVENT_WAIT and t.stream[i] == t.stream[c]
                     and rec_pos[int(t.event[i])] > task[p] and t.stream[rec_pos[int(t.event[i])]] == t.stream[task[p]]]
            assert waits, f"{cm.graph.nodes[node_id].name} does not wait for {cm.graph.nodes[p].name}"


def test_task_ids_count_up_per_stream(compiled):
    _, _, t = compiled
    for s in np.unique(t.stream):
        ids = t.task_id[t.stream == s]
        assert ids.tolist() == list(range(1, len(ids) + 1))


def test_input_copies_open_the_step(compiled):
    _, cm, t = compiled
    n_data = len(cm.graph.nodes_of_type("Data"))
    assert (t.rt_type[:n_data] == RtTaskType.MEMCPY_ASYNC).all()
    assert (t.rt_type == RtTaskType.MEMCPY_ASYNC).sum() == n_data
    assert [cm.graph.nodes[int(i)].type for i in t.node[:n_data]] == ["Data"] * n_data


def test_a_collective_reading_an_input_waits_for_its_copy():
    t = _compile(_input_to_allreduce()).task_table()
    names = ["MEMCPY_ASYNC", "EVENT_RECORD", "EVENT_WAIT", "HCCL", "EVENT_RECORD", "EVENT_WAIT", "KERNEL_AIVEC"]
    assert [RtTaskType(int(r)).name for r in t.rt_type] == names
    assert t.stream.tolist() == [COMPUTE, COMPUTE, HCCL, HCCL, HCCL, COMPUTE, COMPUTE]
    assert t.event[1] == t.event[2] and t.event[4] == t.event[5] and t.event[1] != t.event[4]
    st = StreamSchedule(t).steps(3, np.random.default_rng(0))
    assert (st.start[:, 3] >= st.start[:, 0] + st.dur[:, 0]).all()  # the AllReduce starts after the copy ends


def test_trace_tasks_surround_their_points(compiled):
    _, cm, t = compiled
    pts = cm.profiling_points()
    task = _node_task(t)
    logid_pos = {int(t.logid[i]): i for i in np.flatnonzero(t.logid >= 0)}
    n_ar = len(pts.all_reduce)
    expected = {events.FP_START_LOGID, events.BP_END_LOGID, events.ITER_END_LOGID}
    for k in range(n_ar):
        expected |= set(events.all_reduce_logids(k))
    assert set(logid_pos) == expected
    assert ((t.rt_type == RtTaskType.PROFILER_TRACE) == (t.logid >= 0)).all()
    assert (t.base_ns[t.logid >= 0] == PROFILER_TRACE_NS).all()
    fp = logid_pos[events.FP_START_LOGID]
    assert t.node[fp] == pts.fp and task[pts.fp] == fp + 1  # FP trace right before the FP op
    bp = logid_pos[events.BP_END_LOGID]
    assert t.node[bp] == pts.bp
    if pts.bp in task:
        assert task[pts.bp] == bp - 1  # BP trace right after the BP op
    assert t.node[logid_pos[events.ITER_END_LOGID]] == cm.graph.net_output.id
    for k, node_id in enumerate(pts.all_reduce):
        start, end = (logid_pos[x] for x in events.all_reduce_logids(k))
        assert start + 1 == task[node_id] == end - 1
        assert t.stream[start] == t.stream[end] == HCCL


def test_table_without_points_has_no_traces_and_tables_are_cached():
    cm = _compile(ge.models.mlp(batch_size=4, hidden=(16,), world_size=2))
    plain = cm.task_table(None)
    assert not (plain.rt_type == RtTaskType.PROFILER_TRACE).any()
    pts = cm.profiling_points()
    assert cm.task_table(pts) is cm.task_table(cm.profiling_points())
    traced = cm.task_table(pts)
    assert len(traced) == len(plain) + 3 + 2 * len(pts.all_reduce)
    # the same kernels in the same order either way
    assert [i for i, k in enumerate(plain.kernels) if k] != []
    assert [int(n) for n, k in zip(plain.node, plain.kernels) if k] == \
        [int(n) for n, k in zip(traced.node, traced.kernels) if k]


def test_graph_without_output_cannot_compile():
    g = ge.Graph("no_out")
    g.op("Relu", g.data("x", (2,)))
    with pytest.raises(ge.GraphBuildError, match="has no outputs"):
        _compile(g)


# ------------------------------------------------------------------------- schedule
@pytest.fixture(scope="module")
def times(compiled):
    name, cm, t = compiled
    return name, cm, t, StreamSchedule(t).steps(5, np.random.default_rng(1))


def test_same_stream_tasks_never_overlap(times):
    _, _, t, st = times
    for s in np.unique(t.stream):
        idx = np.flatnonzero(t.stream == s)
        start, end = st.start[:, idx], st.start[:, idx] + st.dur[:, idx]
        assert (start[:, 1:] >= end[:, :-1]).all()
    assert (st.dur > 0).all() and (st.start >= 0).all()
    assert (st.start.min(axis=1) == 0).all()
    assert (st.end == (st.start + st.dur).max(axis=1)).all()


def test_waits_end_after_their_record(times):
    _, _, t, st = times
    rec = {int(t.event[j]): j for j in np.flatnonzero(t.rt_type == RtTaskType.EVENT_RECORD)}
    for i in np.flatnonzero(t.rt_type == RtTaskType.EVENT_WAIT):
        j = rec[int(t.event[i])]
        assert (st.start[:, i] + st.dur[:, i] >= st.start[:, j] + st.dur[:, j]).all()
        assert (st.dur[:, i] >= EVENT_WAIT_MIN_NS).all()


def test_consumers_start_after_producers_end(times):
    _, cm, t, st = times
    task = _node_task(t)
    checked = 0
    for node_id, c in task.items():
        for p in cm._producers[node_id]:
            assert (st.start[:, c] >= st.start[:, task[p]] + st.dur[:, task[p]]).all(), \
                (cm.graph.nodes[p].name, cm.graph.nodes[node_id].name)
            checked += 1
    assert checked > len(task) // 2


def test_all_reduce_overlaps_backward_compute(times):
    name, cm, t, st = times
    if len(cm.graph.nodes_of_type("HcomAllReduce")) < 2:
        pytest.skip("a single (or no) AllReduce bucket waits for the last gradient: nothing to overlap")
    k = 0
    hccl = [i for i in _kernel_rows(t) if t.stream[i] == HCCL]
    compute = [i for i in _kernel_rows(t) if t.stream[i] == COMPUTE]
    overlapped = 0
    for i in hccl:
        s, e = st.start[k, i], st.start[k, i] + st.dur[k, i]
        overlapped += sum(1 for c in compute if st.start[k, c] < e and st.start[k, c] + st.dur[k, c] > s)
    assert overlapped > 0


def test_jitter_is_seeded_and_clipped(compiled):
    _, _, t = compiled
    sched = StreamSchedule(t)
    a = sched.steps(4, np.random.default_rng(7))
    b = sched.steps(4, np.random.default_rng(7))
    c = sched.steps(4, np.random.default_rng(8))
    np.testing.assert_array_equal(a.start, b.start)
    np.testing.assert_array_equal(a.dur, b.dur)
    assert not np.array_equal(a.dur, c.dur)
    assert not np.array_equal(a.dur[0], a.dur[1])  # steps differ from each other
    kernels = np.array(_kernel_rows(t))
    jittered = kernels[t.var_ns[kernels] > 0]
    ratio = (a.dur[:, jittered] - t.base_ns[jittered]) / t.var_ns[jittered]
    lo, hi = JITTER_CLIP
    assert (ratio >= lo - 1e-6).all() and (ratio <= hi + 1e-6).all()
    fixed = np.flatnonzero((t.sigma == 0) & (t.rt_type != RtTaskType.EVENT_WAIT))
    assert (a.dur[:, fixed] == t.nominal_ns[fixed]).all()
    cyc = t.block_cycles > 0
    assert (a.block_cycles[:, ~cyc] == 0).all()
    assert np.allclose(a.block_cycles[:, cyc] / t.block_cycles[cyc], (a.dur[:, cyc] - t.base_ns[cyc]) /
                       t.var_ns[cyc], rtol=0.01)
