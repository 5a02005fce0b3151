"""Collectives: the HCCL op types, the ring cost model, and the sub-task layout of one rank's plane."""

from __future__ import annotations

import math

import numpy as np
import pytest

from geprof_nb import ge
from geprof_nb.ge import hccl
from geprof_nb.ge.graph import GraphBuildError
from geprof_nb.ge.ops import get_op, known_op_types, op_cost
from geprof_nb.prof.rawdata import HCCL_TASK_DTYPE, LinkType, TransportType

L = hccl.Links()
MiB = 1 << 20


def ns(nbytes: int, bandwidth: float) -> int:
    return math.ceil(nbytes * 1e9 / bandwidth)


# ------------------------------------------------------------------------ op types
def test_all_gather_shapes_and_cost():
    g = ge.Graph()
    x = g.data("x", (4, 3), "float32")
    y = g.op("HcomAllGather", x, rank_size=8)
    assert (y.shape, y.dtype) == ((32, 3), "float32")
    assert y.node.engine == "HCCL"
    cost = op_cost(y.node)
    assert (cost.comm_bytes, cost.bytes_in, cost.bytes_out) == (32 * 3 * 4, 4 * 3 * 4, 32 * 3 * 4)


def test_reduce_scatter_shapes_and_cost():
    g = ge.Graph()
    y = g.op("HcomReduceScatter", g.data("x", (16, 3)), rank_size=8, reduction="max")
    assert y.shape == (2, 3)
    assert op_cost(y.node).comm_bytes == 16 * 3 * 2


def test_broadcast_shapes_and_cost():
    g = ge.Graph()
    a, b = g.data("a", (4, 3)), g.data("b", (5,), "int32")
    ya, yb = g.op("HcomBroadcast", [a, b], root_rank=2, rank_size=4)
    assert (ya.shape, yb.shape, yb.dtype) == ((4, 3), (5,), "int32")
    assert op_cost(ya.node).comm_bytes == 4 * 3 * 2 + 5 * 4


def test_all_reduce_cost_unchanged():
    g = ge.Graph()
    y = g.op("HcomAllReduce", [g.data("a", (8, 8), "float32"), g.data("b", (4,), "float32")], rank_size=2)
    c = op_cost(y[0].node)
    assert (c.comm_bytes, c.bytes_in, c.bytes_out, c.tiles) == (272, 272, 272, 1)


@pytest.mark.parametrize("op_type, inputs, attrs, message", [
    ("HcomAllGather", [(4, 3)], {}, "rank_size must be an int >= 1, got None"),
    ("HcomAllGather", [(4, 3)], {"rank_size": 0}, "rank_size must be an int >= 1, got 0"),
    ("HcomAllGather", [(4, 3)], {"rank_size": True}, "rank_size must be an int >= 1"),
    ("HcomAllGather", [(4, 3), (4, 3)], {"rank_size": 2}, "expects 1 inputs"),
    ("HcomReduceScatter", [(10, 3)], {"rank_size": 8}, r"dim 0 of x \[10, 3\] must be divisible by rank_size 8"),
    ("HcomReduceScatter", [(16, 3)], {"rank_size": 8, "reduction": "mean"}, "reduction must be one of"),
    ("HcomReduceScatter", [(16,)], {}, "rank_size must be an int"),
    ("HcomBroadcast", [(4,)], {"rank_size": 4}, "root_rank must be an int in \\[0, rank_size=4\\), got None"),
    ("HcomBroadcast", [(4,)], {"rank_size": 4, "root_rank": 4}, "got 4"),
    ("HcomBroadcast", [(4,)], {"root_rank": 1}, r"rank_size=1"),
])
def test_collective_errors_name_the_op(op_type, inputs, attrs, message):
    g = ge.Graph()
    xs = [g.data(f"x{i}", s) for i, s in enumerate(inputs)]
    with pytest.raises(GraphBuildError, match=message) as err:
        g.op(op_type, xs, name="comm", **attrs)
    assert str(err.value).startswith(f"{op_type} 'comm'")


def test_all_gather_of_a_scalar_fails():
    g = ge.Graph()
    with pytest.raises(GraphBuildError, match="HcomAllGather .*rank >= 1"):
        g.op("HcomAllGather", g.const("c", (), "float32"), rank_size=2)


def test_gather_and_scatter_are_each_others_gradient():
    g = ge.Graph()
    w = g.variable("w", (4, 3), "float16")
    gathered = g.op("HcomAllGather", w, rank_size=2, group="tp")
    scattered = g.op("HcomReduceScatter", gathered, rank_size=2, group="tp")
    info = ge.add_training(g, g.op("ReduceMean", scattered))
    backward = [n.type for n in g.nodes[info.backward_start:] if n.type.startswith("Hcom")]
    assert backward == ["HcomAllGather", "HcomReduceScatter"]
    assert all(n.attrs["group"] == "tp" for n in g.nodes[info.backward_start:] if n.type.startswith("Hcom"))
    assert info.gradients["w"].shape == (4, 3)


def test_no_gradient_through_a_max_reduce_scatter():
    g = ge.Graph()
    y = g.op("HcomReduceScatter", g.variable("w", (4, 3)), rank_size=2, reduction="max")
    with pytest.raises(GraphBuildError, match="reduction='sum'"):
        ge.add_training(g, g.op("ReduceMean", y))


# --------------------------------------------------------------------- durations
def test_all_reduce_duration():
    n, nbytes = 8, 64 * MiB
    chunk = nbytes // n
    step = L.hccs_latency_ns + ns(chunk, L.hccs_bandwidth)
    expect = 2 * (n - 1) * step + (n - 1) * ns(chunk, L.reduce_bandwidth)
    assert hccl.collective_duration_ns("HcomAllReduce", nbytes, n, L) == expect


def test_gather_and_scatter_durations():
    n, nbytes = 4, 12 * MiB
    step = L.hccs_latency_ns + ns(nbytes // n, L.hccs_bandwidth)
    assert hccl.collective_duration_ns("HcomAllGather", nbytes, n, L) == (n - 1) * step
    assert hccl.collective_duration_ns("HcomReduceScatter", nbytes, n, L) == \
        (n - 1) * (step + ns(nbytes // n, L.reduce_bandwidth))


def test_broadcast_duration_is_a_pipelined_ring():
    n, nbytes = 8, 64 * MiB
    got = hccl.collective_duration_ns("HcomBroadcast", nbytes, n, L)

    def pipeline(c: int) -> int:
        return (n - 2 + c) * (L.hccs_latency_ns + ns(-(-nbytes // c), L.hccs_bandwidth))

    assert got in {pipeline(c) for c in range(1, hccl.MAX_BROADCAST_PIECES + 1)}
    assert got <= 1.01 * min(pipeline(c) for c in range(1, hccl.MAX_BROADCAST_PIECES + 1))
    assert got < pipeline(1)  # chunking pays off for a large buffer
    assert hccl.collective_duration_ns("HcomBroadcast", 4096, 2, L) == L.hccs_latency_ns + ns(4096, L.hccs_bandwidth)


@pytest.mark.parametrize("op_type", sorted(hccl.HCCL_OP_NAMES))
def test_one_rank_is_a_local_copy(op_type):
    assert hccl.collective_duration_ns(op_type, 16 * MiB, 1, L) == \
        hccl.LOCAL_COPY_OVERHEAD_NS + ns(16 * MiB, L.local_bandwidth)


def test_across_servers_the_ring_runs_at_roce_speed():
    n, nbytes = 16, 16 * MiB
    expect = (n - 1) * (L.roce_latency_ns + ns(nbytes // n, L.roce_bandwidth))
    assert hccl.collective_duration_ns("HcomAllGather", nbytes, n, L) == expect


@pytest.mark.parametrize("op_type, n", [("HcomAllGather", 16), ("HcomAllReduce", 12), ("HcomBroadcast", 16),
                                        ("HcomReduceScatter", 16)])
def test_a_ring_runs_at_its_slowest_links_own_pace(op_type, n):
    # a multi-server flat ring was charged the slow HCCS link's factor on top of RoCE's pace: AllGather of
    # 16 ranks 2816.6 -> 5333.2 us, though HCCS at half speed (45 GB/s) is still faster than RoCE (25 GB/s)
    nbytes = 64 * MiB
    even = hccl.cluster_duration_ns(op_type, nbytes, n, L)
    slow_hccs = hccl.Links(slow_links=((1, 2, 0.5),))
    assert hccl.cluster_duration_ns(op_type, nbytes, n, slow_hccs) == even
    slow_roce = hccl.Links(slow_links=((7, 8, 0.5),))  # the link between the servers: the ring's pace halves
    assert hccl.cluster_duration_ns(op_type, nbytes, n, slow_roce) > 1.6 * even
    crawl = hccl.Links(slow_links=((1, 2, 0.2),))  # HCCS at 18 GB/s: now the slowest link of the ring
    steps = {"HcomAllGather": n - 1, "HcomReduceScatter": n - 1, "HcomAllReduce": 2 * (n - 1)}
    if op_type in steps:
        chunk = -(-nbytes // n)
        extra = steps[op_type] * (ns(chunk, 0.2 * L.hccs_bandwidth) - ns(chunk, L.roce_bandwidth))
        assert hccl.cluster_duration_ns(op_type, nbytes, n, crawl) == even + extra


def test_910a_links_are_slower():
    from geprof_nb.ge.device import device_links, get_device

    a, b = device_links(get_device("Ascend910A")), device_links(get_device("Ascend910B"))
    assert (a.hccs_bandwidth, b.hccs_bandwidth) == (45e9, 90e9) and b == hccl.Links()
    assert hccl.collective_duration_ns("HcomAllReduce", 64 * MiB, 8, a) > \
        1.8 * hccl.collective_duration_ns("HcomAllGather", 64 * MiB, 8, b)


@pytest.mark.parametrize("args, message", [
    (("HcomScatter", 1024, 2), "unknown collective 'HcomScatter'"),
    (("HcomAllReduce", 1024, 0), "rank_size >= 1"),
    (("HcomAllReduce", -1, 2), "nbytes >= 0"),
])
def test_duration_errors(args, message):
    with pytest.raises(ValueError, match=message):
        hccl.collective_duration_ns(*args, L)


# ----------------------------------------------------------------------- sub-tasks
def _tiles(sub: hccl.SubTasks, starts: np.ndarray, durs: np.ndarray) -> None:
    """Sub-tasks cover [start, start + dur) of every execution with no gap or overlap."""
    assert (sub.dur >= 0).all()
    assert (sub.dur.sum(axis=1) == durs).all()
    assert (sub.start[:, 0] == starts).all()
    assert (sub.start[:, 1:] == sub.start[:, :-1] + sub.dur[:, :-1]).all()
    assert (sub.start[:, -1] + sub.dur[:, -1] == starts + durs).all()


def test_all_reduce_layout():
    n, nbytes, rank = 8, 64 * MiB, 3
    ideal = hccl.collective_duration_ns("HcomAllReduce", nbytes, n, L)
    starts = np.array([0, 10**7])
    sub = hccl.ring_subtasks("HcomAllReduce", nbytes, n, rank, L, starts, np.array([ideal, ideal]))
    _tiles(sub, starts, np.array([ideal, ideal]))
    names = sub.name[0].tolist()
    assert sub.name.shape == sub.dur.shape == sub.size.shape == (2, len(names))
    assert names.count("Notify_Record") == names.count("Notify_Wait") == names.count("Memcpy") == 2 * (n - 1)
    assert names.count("Reduce_Inline") == n - 1
    assert names[:4] == ["Notify_Record", "Notify_Wait", "Memcpy", "Reduce_Inline"]
    assert "Reduce_Inline" not in names[-4 * (n - 1) // 2:]  # the all-gather half only copies
    mem = sub.name[0] == "Memcpy"
    # bytes per Memcpy x steps == 2(n-1)/n x nbytes
    assert sub.size[0, mem].sum() == 2 * (n - 1) * nbytes // n
    assert (sub.size[0, mem] == nbytes // n).all()
    assert (sub.src_rank[0, mem] == rank).all() and (sub.dst_rank[0, mem] == rank + 1).all()
    assert (sub.transport[0, mem] == TransportType.SDMA).all() and (sub.link[0, mem] == LinkType.HCCS).all()
    assert (sub.dur[0, mem] == ns(nbytes // n, L.hccs_bandwidth)).all()
    red = sub.name[0] == "Reduce_Inline"
    assert (sub.link[0, red] == LinkType.ON_CHIP).all() and (sub.src_rank[0, red] == rank).all()
    wait = sub.name[0] == "Notify_Wait"
    assert (sub.src_rank[0, wait] == rank - 1).all() and (sub.size[0, ~(mem | red)] == 0).all()
    assert (sub.plane == 0).all()


@pytest.mark.parametrize("op_type, n_steps, n_reduce", [
    ("HcomAllGather", 3, 0), ("HcomReduceScatter", 3, 3), ("HcomAllReduce", 6, 3)])
def test_steps_per_algorithm(op_type, n_steps, n_reduce):
    nbytes = 4 * MiB
    d = hccl.collective_duration_ns(op_type, nbytes, 4, L)
    sub = hccl.ring_subtasks(op_type, nbytes, 4, 0, L, np.array([5]), np.array([d]))
    names = sub.name[0].tolist()
    assert (names.count("Memcpy"), names.count("Reduce_Inline")) == (n_steps, n_reduce)
    assert sub.size[0, sub.name[0] == "Memcpy"].sum() == n_steps * nbytes // 4


def test_notify_wait_absorbs_the_slack():
    n, nbytes = 4, 8 * MiB
    ideal = hccl.collective_duration_ns("HcomAllReduce", nbytes, n, L)
    durs = np.array([ideal, ideal + 12_345, 2 * ideal, int(0.93 * ideal), ideal - 1])
    starts = np.arange(5) * 10 * ideal + 777
    sub = hccl.ring_subtasks("HcomAllReduce", nbytes, n, 1, L, starts, durs)
    _tiles(sub, starts, durs)
    base = sub.dur[0]
    first_wait = sub.name[0].tolist().index("Notify_Wait")
    for k in (1, 2):  # longer: only the synchronisation wait grows, by exactly the slack
        extra = sub.dur[k] - base
        assert extra[first_wait] == durs[k] - ideal
        assert (np.delete(extra, first_wait) == 0).all()
    for k in (3, 4):  # shorter: everything shrinks in proportion (to the ns)
        assert (sub.dur[k] <= base + (np.arange(len(base)) == first_wait)).all()
        assert sub.dur[k] == pytest.approx(base * durs[k] / ideal, abs=1.001)


def test_faster_links_wait_for_the_slowest():
    """A flat ring across two servers: rank 7 sends over RoCE; rank 3 over HCCS, and waits the difference."""
    n, nbytes = 16, 16 * MiB
    d = hccl.collective_duration_ns("HcomAllGather", nbytes, n, L)
    one = np.array([0]), np.array([d])
    far = hccl.ring_subtasks("HcomAllGather", nbytes, n, 7, L, *one)
    near = hccl.ring_subtasks("HcomAllGather", nbytes, n, 3, L, *one)
    assert "RDMASend" in far.name[0] and "Memcpy" not in far.name[0]
    send = far.name[0] == "RDMASend"
    assert (far.transport[0, send] == TransportType.RDMA).all() and (far.link[0, send] == LinkType.ROCE).all()
    assert (far.dst_rank[0, send] == 8).all()
    mem = near.name[0] == "Memcpy"
    assert (near.link[0, mem] == LinkType.HCCS).all()
    wait_far = far.dur[0, far.name[0] == "Notify_Wait"]
    wait_near = near.dur[0, near.name[0] == "Notify_Wait"]
    assert (wait_near - wait_far == far.dur[0, send] - near.dur[0, mem]).all()
    assert (wait_near > wait_far).all()


def test_broadcast_layout():
    n, nbytes, root = 4, 64 * MiB, 1
    d = hccl.collective_duration_ns("HcomBroadcast", nbytes, n, L)
    one = np.array([0]), np.array([d])
    subs = {r: hccl.ring_subtasks("HcomBroadcast", nbytes, n, r, L, *one, root_rank=root) for r in range(n)}
    sent = {r: int(s.size[0, s.name[0] == "Memcpy"].sum()) for r, s in subs.items()}
    last = (root - 1) % n
    assert sent[last] == 0
    assert all(nbytes <= sent[r] < nbytes + 64 for r in range(n) if r != last)
    for s in subs.values():
        _tiles(s, *one)
    with pytest.raises(ValueError, match="root_rank 4"):
        hccl.ring_subtasks("HcomBroadcast", nbytes, n, 0, L, *one, root_rank=4)


def test_one_rank_layout():
    d = hccl.collective_duration_ns("HcomAllReduce", 1024, 1, L)
    sub = hccl.ring_subtasks("HcomAllReduce", 1024, 1, 0, L, np.array([100, 200]), np.array([d, d + 50]))
    assert sub.name.tolist() == [["Memcpy"], ["Memcpy"]]
    assert sub.dur[:, 0].tolist() == [d, d + 50]
    assert (sub.transport == TransportType.LOCAL).all() and (sub.link == LinkType.ON_CHIP).all()


def test_records():
    n, nbytes = 2, 2 * MiB
    d = hccl.collective_duration_ns("HcomAllReduce", nbytes, n, L)
    sub = hccl.ring_subtasks("HcomAllReduce", nbytes, n, 1, L, np.array([0, 10**6]), np.array([d, d]))
    ids = {"Notify_Record": 11, "Notify_Wait": 12, "Memcpy": 13, "Reduce_Inline": 14}
    rec = sub.records(np.array([7, 7]), np.array([3, 4]), ids, stream_id=5)
    s = sub.dur.shape[1]
    assert rec.dtype == HCCL_TASK_DTYPE and len(rec) == 2 * s
    assert (rec["start"] == sub.start.ravel()).all() and (rec["dur"] == sub.dur.ravel()).all()
    assert rec["iteration"].tolist() == [3] * s + [4] * s
    assert (rec["connection_id"] == 7).all() and (rec["stream_id"] == 5).all()
    assert rec["name"].tolist() == [ids[x] for x in sub.name.ravel()]
    assert (rec["size"] == sub.size.ravel()).all() and (rec["dst_rank"] == sub.dst_rank.ravel()).all()
    assert (rec["link"] == sub.link.ravel()).all() and (rec["transport"] == sub.transport.ravel()).all()


def test_vectorised_over_executions():
    n, nbytes, k = 8, 64 * MiB, 20_000
    d = hccl.collective_duration_ns("HcomAllReduce", nbytes, n, L)
    rng = np.random.default_rng(0)
    durs = (d * rng.uniform(0.9, 1.5, k)).astype(np.int64)
    starts = np.cumsum(durs + 1000)
    sub = hccl.ring_subtasks("HcomAllReduce", nbytes, n, 2, L, starts, durs)
    rec = sub.records(0, np.arange(k), {s: i for i, s in enumerate(np.unique(sub.name[0]))}, 1)
    _tiles(sub, starts, durs)
    assert len(rec) == k * 7 * (n - 1)  # 2(n-1) steps of record, wait, copy; n-1 reduces


# --------------------------------------------------------------------------- names
def test_hccl_op_names():
    assert hccl.hccl_op_name("HcomAllReduce", 0, 1, "5196826027332097871") == "hcom_allReduce__871_0_1"
    assert hccl.hccl_op_name("HcomReduceScatter", 12, 3) == "hcom_reduceScatter__oup_12_3"
    assert hccl.hccl_op_name("HcomBroadcast", 0) == "hcom_broadcast__oup_0_1"
    assert hccl.hccl_op_name("HcomAllGather", 1, 2, "g") == "hcom_allGather__g_1_2"
    # every HCCL op of the catalogue has msprof's name (HCCL's PROF_OP_NAME_V2: hcom_alltoallv_, hcom_send_, ...)
    assert set(hccl.HCCL_OP_NAMES) == {t for t in known_op_types() if get_op(t).engine == "HCCL"}
    assert hccl.hccl_op_name("HcomAllToAllV", 3, 1, "x") == "hcom_alltoallv__x_3_1"
    assert hccl.hccl_op_name("HcomReceive", 0) == "hcom_receive__oup_0_1"
    with pytest.raises(ValueError, match="unknown collective 'AllReduce'"):
        hccl.hccl_op_name("AllReduce", 0)


# ------------------------------------------------------------------ groups of any ranks
def _sub(op, nbytes, members, position, root=0, links=L):
    n = len(members)
    return hccl.ring_subtasks(op, nbytes, n, position, links, np.zeros(1, np.int64),
                              np.asarray([hccl.collective_duration_ns(op, nbytes, n, links, position, members, root)]),
                              root_rank=root, members=members)


def test_all_to_all_is_n_minus_1_pairwise_exchanges_of_a_slice():
    nbytes, members = 1 << 20, (0, 1, 2, 3)
    chunk = nbytes // 4
    step = L.notify_record_ns + L.hccs_latency_ns + math.ceil(chunk * 1e9 / L.hccs_bandwidth)
    assert hccl.collective_duration_ns("HcomAllToAllV", nbytes, 4, L, 1, members) == 3 * step
    sub = _sub("HcomAllToAllV", nbytes, members, 1)
    moves = sub.name[0] == "Memcpy"
    assert list(sub.dst_rank[0][moves]) == [2, 3, 0] and set(sub.size[0][moves]) == {chunk}


def test_a_send_and_its_receive_take_the_transfer_between_their_ranks():
    nbytes = 4 << 20
    local = L.notify_record_ns * 2 + L.hccs_latency_ns + math.ceil(nbytes * 1e9 / L.hccs_bandwidth)
    assert hccl.collective_duration_ns("HcomSend", nbytes, 2, L, 0, (0, 1), 1) == local
    assert hccl.collective_duration_ns("HcomReceive", nbytes, 2, L, 1, (0, 1), 0) == local
    remote = L.notify_record_ns * 2 + L.roce_latency_ns + math.ceil(nbytes * 1e9 / L.roce_bandwidth)
    assert hccl.collective_duration_ns("HcomSend", nbytes, 2, L, 0, (3, 11), 1) == remote
    send = _sub("HcomSend", nbytes, (3, 11), 0, 1)
    assert list(send.name[0]) == ["Notify_Wait", "RDMASend", "Notify_Record"]
    assert (send.src_rank[0][1], send.dst_rank[0][1], send.size[0][1]) == (3, 11, nbytes)
    recv = _sub("HcomReceive", nbytes, (3, 11), 1, 0)
    assert list(recv.name[0]) == ["Notify_Record", "Notify_Wait"] and recv.src_rank[0][1] == 3


def test_a_group_across_servers_runs_on_its_members_links():
    nbytes = 8 << 20
    inside = hccl.collective_duration_ns("HcomAllReduce", nbytes, 4, L, 0, (0, 1, 2, 3))
    across = hccl.collective_duration_ns("HcomAllReduce", nbytes, 4, L, 0, (0, 8, 16, 24))  # a data-parallel group
    chunk = nbytes // 4
    step = max(L.hccs_latency_ns, L.roce_latency_ns) + math.ceil(chunk * 1e9 / L.roce_bandwidth)
    reduce = math.ceil(chunk * 1e9 / L.reduce_bandwidth)
    assert across == 3 * (step + reduce) + 3 * step and across > 2 * inside
    # two ranks on each of two servers: hierarchical, as the whole 16-rank world of two servers is
    hier = _sub("HcomAllReduce", nbytes, (0, 1, 8, 9), 1)
    assert set(hier.link[0][hier.name[0] == "RDMASend"]) == {LinkType.ROCE}
    assert set(hier.dst_rank[0][hier.name[0] == "RDMASend"]) == {9}  # the same place on the other server
    assert hccl.collective_duration_ns("HcomAllReduce", nbytes, 16, L) == \
        hccl.collective_duration_ns("HcomAllReduce", nbytes, 16, L, 0, tuple(range(16)))


def test_groups_spread_alike_over_servers_share_a_plan_with_their_own_ranks():
    assert hccl.group_signature((8, 9, 16, 17), 8) == hccl.group_signature((0, 1, 8, 9), 8) == (0, 1, 8, 9)
    a, b = _sub("HcomAllReduce", 1 << 20, (0, 1, 8, 9), 2), _sub("HcomAllReduce", 1 << 20, (8, 9, 16, 17), 2)
    assert np.array_equal(a.dur, b.dur)
    assert set(b.src_rank[0]) | set(b.dst_rank[0]) == {8, 16, 17}  # its server peer, its place on the other
    assert np.array_equal(b.src_rank[0], np.asarray([8, 9, 16, 17])[np.searchsorted([0, 1, 8, 9], a.src_rank[0])])
