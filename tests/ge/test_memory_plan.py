"""The static memory plan (ge.memory): tensors, lifetimes, reuse, conflicts, per-step events."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

import numpy as np
import pytest

from geprof_nb import ge
from geprof_nb.ge.compiler import CompiledModel
from geprof_nb.ge.device import CostModel, get_device
from geprof_nb.ge.memory import MemoryPlan, align_size, find_conflicts, plan_memory, static_op_mem
from geprof_nb.ge.schedule import StreamSchedule
from geprof_nb.prof.msprof import hash_id
from geprof_nb.prof.rawdata import HELD_TO_STEP_END, STATIC_OP_MEM_DTYPE, RtTaskType

GRAPHS = {
    "resnet50-ws8": lambda: ge.models.resnet50(batch_size=2, image_size=64, world_size=8),
    "resnet50-ws1-inference": lambda: ge.models.resnet50(batch_size=2, image_size=64, training=False),
    "mlp-ws2": lambda: ge.models.mlp(batch_size=8, hidden=(64, 32), world_size=2),
    "bert-ws4": lambda: ge.models.bert(layers=2, seq_len=16, batch_size=2, hidden=64, heads=4, vocab_size=100,
                                       world_size=4),
}


@dataclasses.dataclass
class Built:
    graph: ge.Graph
    compiled: CompiledModel
    table: object
    plan: MemoryPlan


def _build(graph) -> Built:
    cm = CompiledModel(graph, CostModel(get_device("Ascend910B")), 0, 1)
    table = cm.task_table(cm.profiling_points())
    return Built(graph, cm, table, plan_memory(cm, table))


@pytest.fixture(scope="module", params=list(GRAPHS))
def built(request) -> Built:
    return _build(GRAPHS[request.param]())


@pytest.fixture(scope="module")
def resnet() -> Built:
    return _build(GRAPHS["resnet50-ws8"]())


@pytest.fixture(scope="module")
def times(resnet):
    return StreamSchedule(resnet.table).steps(2, np.random.default_rng(0))


def _reader_tasks(b: Built) -> tuple[dict[tuple[int, int], list[int]], set[tuple[int, int]]]:
    """Independent oracle, walking backwards from every kernel task: tensor -> reader task positions,
    and the tensors NetOutput reads (Reshape forwards its input)."""

    def source(t):
        while t.node.type == "Reshape":
            t = t.node.inputs[0]
        return (t.node.id, t.index)

    readers: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, kernel in enumerate(b.table.kernels):
        if kernel is not None:
            for t in b.graph.nodes[int(b.table.node[i])].inputs:
                readers[source(t)].append(i)
    outputs = {source(t) for t in b.graph.net_output.inputs}
    return readers, outputs


# ------------------------------------------------------------------ alignment
def test_alignment_formula():
    assert align_size(0) == 512
    assert align_size(1) == 512
    assert align_size(480) == 512
    assert align_size(481) == 1024
    assert align_size(1024) == 1536
    assert list(align_size(np.array([0, 480, 481, 992, 993]))) == [512, 512, 1024, 1024, 1536]


# ------------------------------------------------------------------- the plan
def test_tensors_are_kernel_outputs_and_copied_inputs(built):
    plan, g = built.plan, built.graph
    in_place = ("ApplyMomentum", "ApplyAdamW")  # optimizer outputs are the variables' memory
    expected = [f"{n.name}:{i}" for n in g.nodes
                if (n.id in built.compiled.kernels and n.type not in in_place) or n.type == "Data"
                for i in range(len(n.outputs))]
    assert not any(name.split(":")[0].endswith(in_place) for name in plan.names)
    assert list(plan.names) == expected
    for k, name in enumerate(plan.names):
        node = g.nodes[int(plan.node[k])]
        assert name == f"{node.name}:{int(plan.output_index[k])}"
        assert plan.size[k] == align_size(node.outputs[int(plan.output_index[k])].nbytes)
        assert plan.is_input[k] == (node.type == "Data")
    weights = sum(align_size(n.outputs[0].nbytes) for n in g.nodes if n.type in ("Variable", "Const"))
    assert plan.weight_bytes == weights > 0
    assert plan.input_bytes == sum(int(plan.size[k]) for k in np.flatnonzero(plan.is_input)) > 0


def test_alloc_at_producer_task(built):
    plan, t = built.plan, built.table
    for k in range(len(plan)):
        a = int(plan.alloc_task[k])
        assert t.node[a] == plan.node[k]
        if plan.is_input[k]:
            assert t.rt_type[a] == RtTaskType.MEMCPY_ASYNC
        else:
            assert t.kernels[a] is not None
        assert plan.stream[k] == t.stream[a]
    assert (plan.alloc_task <= plan.free_task).all()
    assert (plan.free_task < len(t)).all()


def test_no_conflicts_in_real_plan(built):
    assert find_conflicts(built.plan) == []


def test_reuse_happens_and_pool_holds_the_peak(built):
    plan = built.plan
    assert plan.pool_size < plan.total_bytes
    assert plan.pool_size >= plan.peak_live_bytes > 0
    assert plan.reuse_ratio == pytest.approx(plan.total_bytes / plan.pool_size)
    assert plan.reuse_ratio > 1
    assert plan.pool_size == int((plan.offset + plan.size).max())
    assert (plan.offset >= 0).all()


def test_peak_live_bytes_brute_force(resnet):
    plan = resnet.plan
    live = [int(plan.size[(plan.alloc_task <= i) & (plan.free_task >= i)].sum()) for i in range(plan.n_tasks)]
    assert list(plan.live_bytes) == live
    assert plan.peak_live_bytes == max(live)


def test_never_freed_before_last_reader(built):
    plan = built.plan
    readers, outputs = _reader_tasks(built)
    last = len(built.table) - 1
    for k in range(len(plan)):
        key = (int(plan.node[k]), int(plan.output_index[k]))
        tasks = readers.get(key, [])
        assert plan.free_task[k] >= max(tasks, default=int(plan.alloc_task[k])), plan.names[k]
        t = built.table
        cross = [i for i in tasks if t.stream[i] != plan.stream[k]]
        if key in outputs:
            assert plan.until_end[k] and plan.free_task[k] == last, plan.names[k]
        elif cross and not plan.until_end[k]:  # released at a wait of its own stream for what its readers did
            f = int(plan.free_task[k])
            assert t.rt_type[f] == RtTaskType.EVENT_WAIT and t.stream[f] == plan.stream[k], plan.names[k]
            record = int(np.flatnonzero((t.rt_type == RtTaskType.EVENT_RECORD) & (t.event == t.event[f]))[0])
            assert all(t.stream[record] == t.stream[i] and record >= i for i in cross), plan.names[k]
        elif cross:
            assert plan.free_task[k] == last, plan.names[k]
        else:  # same stream: released right after the last reader, so the memory can be reused
            assert not plan.until_end[k]
            assert plan.free_task[k] == max(tasks, default=int(plan.alloc_task[k])), plan.names[k]


def test_cross_stream_tensors_are_freed_where_their_stream_knows_the_reader_is_done(resnet):
    plan, t, g = resnet.plan, resnet.table, resnet.graph
    last = len(t) - 1
    reduce_nodes = [n for n in g.nodes if n.type == "HcomAllReduce"]
    assert reduce_nodes
    gradients = {plan.index(inp.name) for n in reduce_nodes for inp in n.inputs}
    reduced = {plan.index(f"{n.name}:{i}") for n in reduce_nodes for i in range(len(n.outputs))}
    # the reduced gradients: the HCCL stream never waits for the optimizer that reads them
    for k in reduced:
        assert plan.until_end[k] and plan.free_task[k] == last, plan.names[k]
    # the gradients: free once the compute stream has waited for their bucket's AllReduce
    for k in gradients:
        f = int(plan.free_task[k])
        assert not plan.until_end[k] and t.rt_type[f] == RtTaskType.EVENT_WAIT and t.stream[f] == 0, plan.names[k]
    assert all(plan.stream[k] == 1 for k in reduced) and all(plan.stream[k] == 0 for k in gradients)


def test_streams_never_share_addresses(resnet):
    plan = resnet.plan
    lo, hi = plan.offset, plan.offset + plan.size
    hccl = plan.stream == 1
    assert hccl.any()
    a_lo, a_hi, b_lo, b_hi = lo[hccl], hi[hccl], lo[~hccl], hi[~hccl]
    overlap = (a_lo[:, None] < b_hi[None, :]) & (b_lo[None, :] < a_hi[:, None])
    assert not overlap.any()


def test_offsets_are_greedy_first_fit_largest_first(built):
    """A plain re-implementation of the block assigner gives the same offsets."""
    plan = built.plan
    a, f, s, size = plan.alloc_task, plan.free_task, plan.stream, plan.size
    placed: list[int] = []
    offsets = {}
    for i in sorted(range(len(plan)), key=lambda i: (-size[i], a[i])):
        blocked = sorted((offsets[j], offsets[j] + size[j]) for j in placed
                         if s[j] != s[i] or (a[j] <= f[i] and a[i] <= f[j]))
        off = 0
        for lo, hi in blocked:
            if lo - off >= size[i]:
                break
            off = max(off, hi)
        offsets[i] = off
        placed.append(i)
    assert list(plan.offset) == [offsets[i] for i in range(len(plan))]
    assert plan.offset[int(np.argmax(size))] == 0


def test_real_addresses_are_reused(resnet):
    """Not only is the pool smaller than the sum: some address really serves two tensors in one step."""
    plan = resnet.plan
    _, counts = np.unique(plan.offset, return_counts=True)
    assert counts.max() > 2


# ------------------------------------------------------------------ conflicts
def _live_pair(plan: MemoryPlan) -> tuple[int, int]:
    """Two same-stream tensors at different offsets whose lifetimes overlap."""
    for a in range(len(plan)):
        for b in range(a + 1, len(plan)):
            if (plan.alloc_task[a] <= plan.free_task[b] and plan.alloc_task[b] <= plan.free_task[a]
                    and plan.offset[a] != plan.offset[b] and not plan.until_end[a] and not plan.until_end[b]):
                return a, b
    raise AssertionError("no live pair")


def test_injected_conflict_is_found_and_named(resnet):
    plan = resnet.plan
    a, b = _live_pair(plan)
    offset = plan.offset.copy()
    offset[b] = offset[a]
    bad = dataclasses.replace(plan, offset=offset)
    assert find_conflicts(plan) == []
    conflicts = find_conflicts(bad)
    hit = [c for c in conflicts if (c.first_index, c.second_index) == (a, b)]
    assert len(hit) == 1
    c = hit[0]
    assert (c.first, c.second) == (plan.names[a], plan.names[b])
    assert c.byte_range == (int(offset[a]), int(offset[a] + min(plan.size[a], plan.size[b])))
    assert c.task_range == (int(max(plan.alloc_task[a], plan.alloc_task[b])),
                            int(min(plan.free_task[a], plan.free_task[b])))
    assert plan.names[a] in str(c) and plan.names[b] in str(c)
    assert all(c.second_index == b or c.first_index == b for c in conflicts)


def _random_plan(rng: np.random.Generator, n: int, n_tasks: int, pool: int) -> MemoryPlan:
    alloc = rng.integers(0, n_tasks, n)
    free = np.minimum(alloc + rng.integers(0, 30, n), n_tasks - 1)
    size = align_size(rng.integers(1, 20000, n))
    offset = rng.integers(0, pool // 512, n) * 512
    return MemoryPlan(
        names=tuple(f"t{i}:0" for i in range(n)), node=np.arange(n), output_index=np.zeros(n),
        size=size, offset=offset, alloc_task=alloc, free_task=free, stream=np.zeros(n),
        until_end=np.zeros(n, bool), is_input=np.zeros(n, bool), n_tasks=n_tasks, weight_bytes=0,
    )


def _brute_force(plan: MemoryPlan) -> set[tuple[int, int]]:
    lo, hi = plan.offset, plan.offset + plan.size
    out = set()
    for a in range(len(plan)):
        for b in range(a + 1, len(plan)):
            if (lo[a] < hi[b] and lo[b] < hi[a] and plan.alloc_task[a] <= plan.free_task[b]
                    and plan.alloc_task[b] <= plan.free_task[a]):
                out.add((a, b))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_find_conflicts_matches_brute_force(seed):
    plan = _random_plan(np.random.default_rng(seed), 300, 200, 1 << 20)
    found = find_conflicts(plan)
    expected = _brute_force(plan)
    assert expected  # the random plans are dense enough to conflict
    assert {(c.first_index, c.second_index) for c in found} == expected
    assert len(found) == len(expected)
    for c in found:
        a, b = c.first_index, c.second_index
        assert c.byte_range == (max(plan.offset[a], plan.offset[b]),
                                min(plan.offset[a] + plan.size[a], plan.offset[b] + plan.size[b]))


def test_find_conflicts_scales_to_10000_tensors():
    """A valid 10,000-tensor plan (100 address lanes, back-to-back lifetimes) plus 3 injected overlaps."""
    n, lanes = 10_000, 100
    per = n // lanes
    lane = np.repeat(np.arange(lanes), per)
    step = np.tile(np.arange(per), lanes)
    plan = MemoryPlan(
        names=tuple(f"t{i}:0" for i in range(n)), node=np.arange(n), output_index=np.zeros(n),
        size=np.full(n, 4096), offset=lane * 4096, alloc_task=step * 10, free_task=step * 10 + 9,
        stream=np.zeros(n), until_end=np.zeros(n, bool), is_input=np.zeros(n, bool), n_tasks=per * 10,
        weight_bytes=0,
    )
    assert find_conflicts(plan) == []
    offset = plan.offset.copy()
    for victim, target in ((5, 205), (1234, 1834), (9999, 99)):  # same step, other lane
        offset[victim] = plan.offset[target]
    bad = dataclasses.replace(plan, offset=offset)
    found = find_conflicts(bad)
    assert {(c.first_index, c.second_index) for c in found} == {(5, 205), (1234, 1834), (99, 9999)}


# ---------------------------------------------------------------- what the profiler gets
def test_static_op_mem_describes_the_plan(resnet):
    plan = resnet.plan
    rec = static_op_mem(plan, 7, 1000, lambda names: [hash_id(n) for n in names])
    assert rec.dtype == STATIC_OP_MEM_DTYPE and len(rec) == len(plan)
    assert (rec["model_id"] == 7).all() and (rec["pool_size"] == plan.pool_size).all()
    assert list(rec["tensor"]) == [hash_id(n) for n in plan.names]
    assert (rec["addr"] == plan.offset).all() and (rec["size"] == plan.size).all()
    assert (rec["alloc_conn"] == 1000 + plan.alloc_task).all()
    held = plan.until_end
    assert held.any() and (~held).any()
    assert (rec["free_conn"][held] == HELD_TO_STEP_END).all()
    assert (rec["free_conn"][~held] == 1000 + plan.free_task[~held]).all()
    assert (rec["stream_id"] == plan.stream).all()


def test_no_address_is_shared_in_real_time(resnet):
    """Streams overlap in time, not in launch order: over several jittered steps, two tensors that share
    bytes are never live at the same simulated moment (one is released no later than the other is made)."""
    plan, t = resnet.plan, resnet.table
    lo, hi = plan.offset, plan.offset + plan.size
    shares = (lo[:, None] < hi[None, :]) & (lo[None, :] < hi[:, None])
    np.fill_diagonal(shares, False)
    assert shares.any()
    steps = StreamSchedule(t).steps(4, np.random.default_rng(1))
    for k in range(4):
        start, end = steps.start[k], steps.start[k] + steps.dur[k]
        made = start[plan.alloc_task]
        gone = np.where(plan.until_end, end.max(), end[plan.free_task])
        both_live = (made[:, None] < gone[None, :]) & (made[None, :] < gone[:, None])
        assert not (shares & both_live).any()


def test_every_report_asks_its_library_for_the_names(resnet):
    # one call with every name per report: each library (each rank's) must learn the names it uses
    calls = []

    def name_ids(names: list[str]) -> list[int]:
        calls.append(names)
        return [hash_id(n) for n in names]

    for base in (0, 5000):  # two collections of the same model
        static_op_mem(resnet.plan, 0, base, name_ids)
    assert calls == [list(resnet.plan.names)] * 2


# ------------------------------------------------------------------ device memory
GiB = 2**30


def _relu_graph(name: str, shape) -> ge.Graph:
    g = ge.Graph(name)
    g.output(g.op("Relu", g.data("a", shape)))
    return g


def _too_big_message(name: str) -> str:
    # 2**40 fp16 elements in and out (each + 512 bytes of alignment), no weights, on the 64 GiB Ascend910B
    return (f"graph {name!r} needs 4398046512128 bytes (4096.0 GiB) of device memory for its static memory plan "
            "(feature maps 4398046512128, weights 0); device Ascend910B has 68719476736 bytes (64.0 GiB)")


def test_run_graph_of_a_model_larger_than_the_device_fails_and_loads_nothing():
    assert ge.GEInitialize({"geprof.clock": "virtual", "geprof.device": "Ascend910B"}) == ge.SUCCESS
    session = ge.Session()
    session.add_graph(1, _relu_graph("huge", [2**20, 2**20]))
    assert session.run_graph(1) == ge.FAILED
    assert ge.GEGetErrorMsg() == f"[FAILED] BuildGraph 1: {_too_big_message('huge')}"
    assert session.model(1) is None  # no half-loaded model
    assert session.build_graph(1) == ge.FAILED
    session.add_graph(2, _relu_graph("small", [4, 8]))
    assert session.run_graph(2) == ge.SUCCESS
    assert session.model(2).model_id == 3  # each failed load took an id: GE's GenModelId comes before the load


def test_acl_load_of_a_model_larger_than_the_device_is_bad_alloc():
    from geprof_nb.ge import acl

    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    model, status = ge.aclgrphBuildModel(_relu_graph("huge", [2**20, 2**20]))
    assert status == ge.SUCCESS
    assert acl.aclmdlLoadFromMem(model) == (0, acl.ACL_ERROR_BAD_ALLOC) and acl.ACL_ERROR_BAD_ALLOC == 200000
    assert ge.GEGetErrorMsg() == f"[ACL_ERROR_BAD_ALLOC] aclmdlLoadFromMem: {_too_big_message('huge')}"
    assert acl.loaded_models() == {}
    assert acl.aclopExecute("Relu", [((2**20, 2**20), "float16")]) == acl.ACL_ERROR_BAD_ALLOC
    assert "graph 'Relu' needs 2199023256064 bytes" in ge.GEGetErrorMsg()  # single op: no input copy


def test_a_dynamic_model_fails_only_for_inputs_too_big_for_the_device():
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    session = ge.Session()
    g = ge.Graph("dyn")
    g.output(g.op("Relu", g.data("a", [-1, 2**20], default_shape=[4, 2**20])))
    session.add_graph(1, g)
    assert session.run_graph(1) == ge.SUCCESS
    big = np.lib.stride_tricks.as_strided(np.zeros(1, np.float16), (2**20, 2**20), (0, 0))
    assert session.run_graph(1, [big]) == ge.FAILED
    assert "RunGraph: graph 'dyn' needs 4398046512128 bytes (4096.0 GiB) of device memory" in ge.GEGetErrorMsg()
    assert session.run_graph(1, [np.zeros((8, 2**20), np.float16)]) == ge.SUCCESS
    assert len(session.model(1).builds) == 2  # the build that did not fit is not kept


def test_zoo_models_at_default_sizes_fit_the_smallest_device():
    assert ge.GEInitialize({"geprof.clock": "virtual", "geprof.device": "Ascend910A"}) == ge.SUCCESS
    session = ge.Session()
    for i, build in enumerate([ge.models.mlp, ge.models.resnet50, ge.models.bert]):
        assert session.add_graph(i, build()) == ge.SUCCESS
        assert session.build_graph(i) == ge.SUCCESS, ge.GEGetErrorMsg()
