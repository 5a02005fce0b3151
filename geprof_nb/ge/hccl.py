"""Collective communication: how long a ring collective takes, and the HCCL
sub-tasks one rank's plane shows while it runs.

Algorithms (one flat ring over ``rank_size`` ranks; ``chunk = ceil(nbytes / n)``):

* AllReduce: reduce-scatter then all-gather, ``2(n-1)`` steps of one chunk;
* ReduceScatter / AllGather: ``n-1`` steps of one chunk;
* Broadcast: a pipelined ring from the root, the buffer cut into ``c`` pieces
  (``c`` minimises ``(n-2+c) * (latency + nbytes/c/bandwidth)``), ``n-2+c`` steps;
* one rank: a local copy.

AllReduce over several servers (``rank_size`` a multiple of ``ranks_per_node``
and larger) is *hierarchical*, as HCCL does it: a reduce-scatter on the ring
inside the server (HCCS), an AllReduce of each rank's 1/8 share on the ring of
the ranks with the same local index on every server (RoCE), then an all-gather
inside the server.  Other collectives keep the flat ring, whose steps then take
the slower (RoCE) link.  A *slow link* (``Links.slow_links``) slows every step
of each ring it is on: a ring moves at the pace of its slowest link, the
minimum over its links of each link's own bandwidth (HCCS or RoCE) times its
factor.

Every step of a rank's plane is ``Notify_Record`` (signal the next rank),
``Notify_Wait`` (wait for the previous rank's signal), the transfer to the next
rank (``Memcpy`` over SDMA/HCCS inside a server, ``RDMASend`` over RoCE to
another server) and, in reduce phases, ``Reduce_Inline`` (the on-chip reduction
of the received chunk).  A step lasts as long as the ring's slowest link needs,
so a rank with a fast link waits longer.  When an execution runs longer than the
ideal duration (jitter, waiting for a peer), the extra time is the first step's
``Notify_Wait`` — the synchronisation wait msprof-analyze reports.  The simulator
never runs a collective shorter than that (jitter only slows a transfer,
:mod:`.schedule`), so no copy beats its link; a shorter span handed to the
layout shrinks every sub-task in proportion.  Either way the sub-tasks tile the
op's span exactly.

Collective names follow msprof (``HcclCalculator.update_op_name_by_group_name``):
``<hccl op name>_<last 3 chars of the group>_<index>_<execution>``, where the
HCCL op name is e.g. ``hcom_allReduce_``, ``index`` counts the group's
collectives in time order over the collection, and ``execution`` (from 1) counts
the executions of that op; e.g. ``hcom_allReduce__871_0_1``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Mapping, Sequence

import numpy as np

from ..prof.rawdata import HCCL_TASK_DTYPE, LinkType, TransportType

#: GE op type -> the HCCL op name msprof reports (its ``op_type`` in communication_statistic).
HCCL_OP_NAMES = {
    "HcomAllReduce": "hcom_allReduce_",
    "HcomAllGather": "hcom_allGather_",
    "HcomReduceScatter": "hcom_reduceScatter_",
    "HcomBroadcast": "hcom_broadcast_",
    "HcomAllToAll": "hcom_alltoall_",
    "HcomAllToAllV": "hcom_alltoallv_",
    "HcomSend": "hcom_send_",
    "HcomReceive": "hcom_receive_",
}
P2P_OPS = ("HcomSend", "HcomReceive")
ALL_TO_ALL_OPS = ("HcomAllToAll", "HcomAllToAllV")
DEFAULT_GROUP = "hccl_world_group"
#: Fixed cost of the one-rank local copy (a task head/tail, like any kernel's).
LOCAL_COPY_OVERHEAD_NS = 1_000
MAX_BROADCAST_PIECES = 64


@dataclass(frozen=True)
class Links:
    """What the cost model needs to know about the interconnect (bandwidths in bytes/s, per rank).

    Defaults are an Ascend910B server: a ring over HCCS among 8 ranks and 200 Gb/s RoCE
    between servers; ``local_bandwidth`` is HBM for the one-rank copy, ``reduce_bandwidth``
    the on-chip inline reduction.
    """

    hccs_bandwidth: float = 90e9
    hccs_latency_ns: int = 8_000  # per ring step: notify handshake with the neighbours
    roce_bandwidth: float = 25e9
    roce_latency_ns: int = 20_000
    ranks_per_node: int = 8
    local_bandwidth: float = 1.6e12
    reduce_bandwidth: float = 200e9
    notify_record_ns: int = 500
    #: Degraded links for what-if studies: ``((src rank, dst rank, bandwidth factor), ...)``, factor in (0, 1].
    slow_links: tuple[tuple[int, int, float], ...] = ()

    def factor(self, src: int, dst: int) -> float:
        """The bandwidth factor of the link ``src -> dst`` (1.0 unless it is a slow link)."""
        for a, b, f in self.slow_links:
            if a == src and b == dst:
                return f
        return 1.0

    def link_bandwidth(self, src: int, dst: int) -> float:
        """Bandwidth of the link ``src -> dst``: RoCE between servers, HCCS inside one, times its factor."""
        remote = src // self.ranks_per_node != dst // self.ranks_per_node
        return (self.roce_bandwidth if remote else self.hccs_bandwidth) * self.factor(src, dst)

    def ring_bandwidth(self, ring: list[int]) -> float:
        """The pace of a ring (each rank sends to the next): every step waits for its slowest link, the
        minimum over its links of that link's own bandwidth times its factor (a slow HCCS link on a ring
        that also crosses servers slows it only if it falls below RoCE)."""
        r = np.asarray(ring)
        remote = r // self.ranks_per_node != np.roll(r, -1) // self.ranks_per_node
        plain = [bw for bw, present in ((self.roce_bandwidth, remote.any()), (self.hccs_bandwidth, not remote.all()))
                 if present]
        pairs = set(zip(ring, ring[1:] + ring[:1]))
        return min(plain + [self.link_bandwidth(a, b) for a, b, _ in self.slow_links if (a, b) in pairs])


@dataclass(frozen=True)
class _Plan:
    """The ideal sub-tasks of one rank's plane for one execution, column-wise ([S])."""

    dur: np.ndarray
    name: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    transport: np.ndarray
    link: np.ndarray
    size: np.ndarray
    wait: int  # the sub-task that absorbs slack


@dataclass(frozen=True)
class SubTasks:
    """Sub-tasks of K executions of one collective on one rank: every column is [K, S]."""

    start: np.ndarray  # int64 ns
    dur: np.ndarray  # int64 ns
    name: np.ndarray  # str
    plane: np.ndarray
    src_rank: np.ndarray
    dst_rank: np.ndarray
    transport: np.ndarray  # TransportType
    link: np.ndarray  # LinkType
    size: np.ndarray  # bytes

    def records(self, connection_id: int | np.ndarray, iteration: np.ndarray, name_ids: Mapping[str, int],
                stream_id: int) -> np.ndarray:
        """``HCCL_TASK_DTYPE`` records, execution by execution (``connection_id`` scalar or [K],
        ``iteration`` [K], ``name_ids`` the hash id of every sub-task name)."""
        k, s = self.start.shape
        rec = np.zeros(k * s, HCCL_TASK_DTYPE)
        rec["start"] = self.start.ravel()
        rec["dur"] = self.dur.ravel()
        rec["connection_id"] = np.broadcast_to(np.asarray(connection_id)[..., None], (k, s)).ravel()
        rec["iteration"] = np.repeat(np.asarray(iteration), s)
        if k and self.name.strides[0] == 0:  # one plan's names broadcast over the executions
            names, codes = np.unique(self.name[0], return_inverse=True)
            ids = np.asarray([name_ids[str(n)] for n in names], np.uint64)[codes.ravel()]
            rec["name"] = np.broadcast_to(ids, (k, s)).ravel()
        else:
            names, codes = np.unique(self.name.ravel(), return_inverse=True)
            rec["name"] = np.asarray([name_ids[str(n)] for n in names], np.uint64)[codes.ravel()]
        for field, col in (("plane", self.plane), ("src_rank", self.src_rank), ("dst_rank", self.dst_rank),
                           ("transport", self.transport), ("link", self.link), ("size", self.size)):
            rec[field] = col.ravel()
        rec["stream_id"] = stream_id
        return rec


def _check(op_type: str, nbytes: int, members: tuple[int, ...], position: int = 0, root: int = 0) -> None:
    if op_type not in HCCL_OP_NAMES:
        raise ValueError(f"unknown collective {op_type!r}; accepted: {', '.join(HCCL_OP_NAMES)}")
    n = len(members)
    if nbytes < 0 or n < 1:
        raise ValueError(f"{op_type}: need nbytes >= 0 and rank_size >= 1, got {nbytes} and {n}")
    if not (0 <= position < n and 0 <= root < n):
        raise ValueError(f"{op_type}: rank {position} and root_rank {root} must be in [0, {n})")


def _ns(nbytes: int, bandwidth: float) -> int:
    return math.ceil(nbytes * 1e9 / bandwidth)


def _broadcast_pieces(nbytes: int, n: int, bandwidth: float, latency_ns: int) -> int:
    """Pieces c minimising (n - 2 + c) * (latency + nbytes / c / bandwidth): c* = sqrt((n-2) T / latency)."""
    best = math.sqrt(max(n - 2, 0) * nbytes * 1e9 / bandwidth / max(latency_ns, 1))
    return max(1, min(MAX_BROADCAST_PIECES, round(best)))


def group_members(rank_size: int, members: Sequence[int] | None = None) -> tuple[int, ...]:
    """The global ranks of a group of ``rank_size`` (``members``, or ranks ``0 .. rank_size - 1``)."""
    out = tuple(range(rank_size)) if members is None else tuple(int(m) for m in members)
    if len(out) != rank_size:
        raise ValueError(f"a group of rank_size {rank_size} has {len(out)} members {list(out)}")
    return out


def group_signature(members: tuple[int, ...], per_node: int) -> tuple[int, ...]:
    """``members`` relabelled so that groups spread alike over servers get the same key (servers in order
    of first appearance, places in a server in order): their collectives are alike but for the ranks'
    numbers, unless a slow link touches them."""
    servers: dict[int, int] = {}
    seen: dict[int, int] = {}
    out = []
    for m in members:
        node = servers.setdefault(m // per_node, len(servers))
        seen[node] = seen.get(node, -1) + 1
        out.append(node * per_node + seen[node])
    return tuple(out)


@lru_cache(maxsize=1 << 16)
def _group_plan(op_type: str, nbytes: int, members: tuple[int, ...], position: int, root: int,
                links: Links) -> _Plan:
    """:func:`_plan` of a group, made once per layout over servers: for a group no slow link touches,
    the plan of its :func:`group_signature` with the ranks renamed (once per group: a rank's layers run the
    same collectives in the same groups)."""
    ends = {r for a, b, _ in links.slow_links for r in (a, b)}
    norm = group_signature(members, links.ranks_per_node)
    if norm == members or ends.intersection(members):
        return _plan(op_type, nbytes, members, position, root, links)
    plan = _plan(op_type, nbytes, norm, position, root, links)
    order = np.argsort(norm)
    keys, values = np.asarray(norm)[order], np.asarray(members)[order]
    src, dst = (values[np.searchsorted(keys, c)] for c in (plan.src, plan.dst))
    for a in (src, dst):
        a.flags.writeable = False
    return _Plan(plan.dur, plan.name, src, dst, plan.transport, plan.link, plan.size, plan.wait)


def _servers(members: tuple[int, ...], per_node: int) -> dict[int, list[int]]:
    """The members on each server, servers and members in group order."""
    out: dict[int, list[int]] = {}
    for m in members:
        out.setdefault(m // per_node, []).append(m)
    return out


@lru_cache(maxsize=16384)
def _plan(op_type: str, nbytes: int, members: tuple[int, ...], position: int, root: int, links: Links) -> _Plan:
    """The sub-tasks of ``members[position]``'s plane; ``root``: a broadcast's root, or a send's or
    receive's peer (positions in ``members``)."""
    _check(op_type, nbytes, members, position, root)
    cols: dict[str, list] = {k: [] for k in ("dur", "name", "src", "dst", "transport", "link", "size")}
    n = len(members)
    rank = members[position]

    def add(name: str, dur: int, src: int, dst: int, transport: TransportType, link: LinkType, size: int) -> None:
        for k, v in zip(cols, (dur, name, src, dst, int(transport), int(link), size)):
            cols[k].append(v)

    if n == 1:
        add("Memcpy", LOCAL_COPY_OVERHEAD_NS + _ns(nbytes, links.local_bandwidth), rank, rank,
            TransportType.LOCAL, LinkType.ON_CHIP, nbytes)
        return _finish(cols, 0)

    servers = _servers(members, links.ranks_per_node)
    multi_node = len(servers) > 1

    def remote(peer: int) -> bool:
        return rank // links.ranks_per_node != peer // links.ranks_per_node

    def wire(peer: int) -> tuple[TransportType, LinkType]:
        return (TransportType.RDMA, LinkType.ROCE) if remote(peer) else (TransportType.SDMA, LinkType.HCCS)

    counts = {len(v) for v in servers.values()}
    if op_type == "HcomAllReduce" and multi_node and len(counts) == 1 and min(counts) > 1:
        _hierarchical_allreduce(nbytes, members, rank, servers, links, add, remote, wire)
        return _finish(cols, 1)
    latency = max(links.hccs_latency_ns, links.roce_latency_ns) if multi_node else links.hccs_latency_ns
    record_ns = min(links.notify_record_ns, latency)
    if op_type in P2P_OPS:
        peer = members[root]
        move_ns = _ns(nbytes, links.link_bandwidth(*((rank, peer) if op_type == "HcomSend" else (peer, rank))))
        # the link's latency is in the waits, as in the rings: the copy task is the bytes moving, so its
        # bandwidth is the link's (a copy that included it read as a slow link beside the rings' copies)
        if op_type == "HcomSend":  # wait for the receiver's ready signal, write its buffer, tell it
            add("Notify_Wait", record_ns + latency, peer, rank, *wire(peer), 0)
            add("RDMASend" if remote(peer) else "Memcpy", move_ns, rank, peer, *wire(peer), nbytes)
            add("Notify_Record", record_ns, rank, peer, *wire(peer), 0)
            return _finish(cols, 0)
        add("Notify_Record", record_ns, rank, peer, *wire(peer), 0)  # ready; then wait for the data
        add("Notify_Wait", latency + move_ns + record_ns, peer, rank, *wire(peer), 0)
        return _finish(cols, 1)
    if op_type in ALL_TO_ALL_OPS:  # n - 1 pairwise exchanges of a 1/n slice
        chunk = -(-nbytes // n)
        for step in range(1, n):
            dst, src = members[(position + step) % n], members[(position - step) % n]
            move_ns = _ns(chunk, links.link_bandwidth(rank, dst))
            add("Notify_Record", record_ns, rank, dst, *wire(dst), 0)
            add("Notify_Wait", latency, src, rank, *wire(src), 0)
            add("RDMASend" if remote(dst) else "Memcpy", move_ns, rank, dst, *wire(dst), chunk)
        return _finish(cols, 1)
    bandwidth = links.ring_bandwidth(list(members))
    nxt, prev = members[(position + 1) % n], members[(position - 1) % n]

    if op_type == "HcomBroadcast":
        pieces = _broadcast_pieces(nbytes, n, bandwidth, latency)
        chunk = -(-nbytes // pieces)
        dist = (position - root) % n
        steps = [(dist <= s < dist + pieces and dist < n - 1, False) for s in range(n - 2 + pieces)]
    else:
        chunk = -(-nbytes // n)
        reduce_steps = {"HcomAllReduce": n - 1, "HcomReduceScatter": n - 1, "HcomAllGather": 0}[op_type]
        total = 2 * (n - 1) if op_type == "HcomAllReduce" else n - 1
        steps = [(True, s < reduce_steps) for s in range(total)]
    move_ns = _ns(chunk, bandwidth)
    own_move_ns = _ns(chunk, links.link_bandwidth(rank, nxt))
    reduce_ns = _ns(chunk, links.reduce_bandwidth)
    for sends, reduces in steps:
        step_ns = latency + move_ns + (reduce_ns if reduces else 0)
        busy = record_ns + (own_move_ns if sends else 0) + (reduce_ns if reduces else 0)
        add("Notify_Record", record_ns, rank, nxt, *wire(nxt), 0)
        add("Notify_Wait", step_ns - busy, prev, rank, *wire(prev), 0)
        if sends:
            add("RDMASend" if remote(nxt) else "Memcpy", own_move_ns, rank, nxt, *wire(nxt), chunk)
        if reduces:
            add("Reduce_Inline", reduce_ns, rank, rank, TransportType.LOCAL, LinkType.ON_CHIP, chunk)
    return _finish(cols, 1)  # the first step's Notify_Wait


def _hierarchical_allreduce(nbytes: int, members: tuple[int, ...], rank: int, servers: dict[int, list[int]],
                            links: Links, add, remote, wire) -> None:
    """The sub-tasks of a hierarchical AllReduce on ``rank``'s plane (see the module docstring)."""
    node = rank // links.ranks_per_node
    intra = servers[node]  # the ring inside this server
    local = intra.index(rank)
    inter = [v[local] for v in servers.values()]  # the ring across servers, same place on each
    at = list(servers).index(node)
    per_node, nodes = len(intra), len(servers)
    intra_chunk = -(-nbytes // per_node)
    inter_chunk = -(-intra_chunk // nodes)
    record_ns = links.notify_record_ns
    phases = [  # (ring, position of this rank, steps, chunk, reduces, latency)
        (intra, local, per_node - 1, intra_chunk, True, links.hccs_latency_ns),
        (inter, at, nodes - 1, inter_chunk, True, links.roce_latency_ns),
        (inter, at, nodes - 1, inter_chunk, False, links.roce_latency_ns),
        (intra, local, per_node - 1, intra_chunk, False, links.hccs_latency_ns),
    ]
    for ring, pos, steps, chunk, reduces, latency in phases:
        nxt, prev = ring[(pos + 1) % len(ring)], ring[pos - 1]
        move_ns = _ns(chunk, links.ring_bandwidth(ring))
        own_move_ns = _ns(chunk, links.link_bandwidth(rank, nxt))
        reduce_ns = _ns(chunk, links.reduce_bandwidth) if reduces else 0
        step_ns = latency + move_ns + reduce_ns
        for _ in range(steps):
            add("Notify_Record", record_ns, rank, nxt, *wire(nxt), 0)
            add("Notify_Wait", step_ns - record_ns - own_move_ns - reduce_ns, prev, rank, *wire(prev), 0)
            add("RDMASend" if remote(nxt) else "Memcpy", own_move_ns, rank, nxt, *wire(nxt), chunk)
            if reduces:
                add("Reduce_Inline", reduce_ns, rank, rank, TransportType.LOCAL, LinkType.ON_CHIP, chunk)


def _finish(cols: dict[str, list], wait: int) -> _Plan:
    arrays = {k: np.asarray(v, np.int64) for k, v in cols.items() if k != "name"}
    plan = _Plan(name=np.asarray(cols["name"]), wait=wait, **arrays)
    for a in (plan.name, *arrays.values()):
        a.flags.writeable = False
    return plan


def collective_duration_ns(op_type: str, nbytes: int, rank_size: int, links: Links = Links(), rank: int = 0,
                           members: Sequence[int] | None = None, root_rank: int = 0) -> int:
    """Ideal duration of one execution of a collective moving ``nbytes`` (the op's ``comm_bytes``), as
    the ``rank``-th member's rings see it (they differ only when a slow link is on some rings and not on
    others); ``members``: the group's global ranks (default ``0 .. rank_size - 1``); ``root_rank``: a
    broadcast's root, a send's or receive's peer."""
    group = group_members(int(rank_size), members)
    return int(_group_plan(op_type, int(nbytes), group, int(rank), int(root_rank), links).dur.sum())


def cluster_duration_ns(op_type: str, nbytes: int, rank_size: int, links: Links = Links(),
                        members: Sequence[int] | None = None) -> int:
    """How long a collective takes for the whole group: its slowest ring's time.  Only the ranks at a
    slow link's ends can be on a slower ring than the first member's, so those are the ones to ask."""
    group = group_members(int(rank_size), members)
    ends = {r for a, b, _ in links.slow_links for r in (a, b)}
    positions = {0} | {i for i, m in enumerate(group) if m in ends}
    return max(collective_duration_ns(op_type, nbytes, rank_size, links, i, group) for i in positions)


def ring_subtasks(op_type: str, nbytes: int, rank_size: int, rank: int, links: Links, op_start_ns: np.ndarray,
                  op_dur_ns: np.ndarray, root_rank: int = 0, members: Sequence[int] | None = None) -> SubTasks:
    """The sub-tasks of K executions (``op_start_ns``/``op_dur_ns`` [K]) of a collective on the
    ``rank``-th member's plane, tiling each execution's span exactly (see the module docstring)."""
    plan = _group_plan(op_type, int(nbytes), group_members(int(rank_size), members), int(rank), int(root_rank),
                       links)
    start0 = np.asarray(op_start_ns, np.int64)
    total = np.asarray(op_dur_ns, np.int64)
    k, s = len(total), len(plan.dur)
    ideal = int(plan.dur.sum())
    dur = np.broadcast_to(plan.dur, (k, s)).copy()
    short = total < ideal
    if short.any():  # scale the sub-task boundaries, so each duration is within 1 ns of its share
        ends = np.floor(np.cumsum(plan.dur) * (total[short, None] / ideal)).astype(np.int64)
        dur[short] = np.diff(ends, axis=1, prepend=0)
    dur[:, plan.wait] += total - dur.sum(axis=1)
    start = start0[:, None] + np.cumsum(dur, axis=1) - dur

    def grid(col: np.ndarray) -> np.ndarray:
        return np.broadcast_to(col, (k, s))

    return SubTasks(start, dur, grid(plan.name), grid(np.zeros(s, np.int64)), grid(plan.src), grid(plan.dst),
                    grid(plan.transport), grid(plan.link), grid(plan.size))


class SubTaskLayout:
    """The sub-tasks of several collectives side by side, one plan after the other ([S] in all).

    A model's collectives are reported together every batch of steps: laid out
    once, the sub-tasks of K executions of all of them take a few array
    operations (the same arithmetic :func:`ring_subtasks` does for each one),
    instead of a few dozen per collective.
    """

    def __init__(self, collectives: Sequence[tuple], links: Links) -> None:
        """``collectives``: (op type, nbytes, rank size, rank, root rank[, members]) of each collective
        (``rank`` and ``root rank`` are positions in the group; ``members`` its global ranks)."""
        plans = [_group_plan(c[0], int(c[1]), group_members(int(c[2]), c[5] if len(c) > 5 else None), int(c[3]),
                             int(c[4]), links) for c in collectives]
        self.sizes = np.asarray([len(p.dur) for p in plans], np.int64)
        self.first = np.cumsum(self.sizes) - self.sizes
        self.seg = np.repeat(np.arange(len(plans)), self.sizes)  # collective of each sub-task
        self.dur = np.concatenate([p.dur for p in plans]) if plans else np.zeros(0, np.int64)
        self.cum = np.concatenate([np.cumsum(p.dur) for p in plans]) if plans else np.zeros(0, np.int64)
        self.ideal = np.asarray([int(p.dur.sum()) for p in plans], np.int64)
        self.wait = self.first + np.asarray([p.wait for p in plans], np.int64)
        self.columns = {k: (np.concatenate([getattr(p, k) for p in plans]) if plans else np.zeros(0, np.int64))
                        for k in ("name", "src", "dst", "transport", "link", "size")}
        self.names, self.name_codes = np.unique(self.columns["name"], return_inverse=True)

    def times(self, op_start_ns: np.ndarray, op_dur_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Start and duration [K, S] of every sub-task of K executions (``op_*_ns`` [K, collectives])."""
        total = np.asarray(op_dur_ns, np.int64)
        k = len(total)
        dur = np.broadcast_to(self.dur, (k, len(self.dur))).copy()
        short = (total < self.ideal)[:, self.seg]
        if short.any():  # scale the sub-task boundaries, so each duration is within 1 ns of its share
            ratio = (total / np.maximum(self.ideal, 1))[:, self.seg]
            ends = np.floor(self.cum * ratio).astype(np.int64)
            scaled = np.diff(ends, axis=1, prepend=0)
            scaled[:, self.first] = ends[:, self.first]  # a plan's first sub-task starts from 0
            np.copyto(dur, scaled, where=short)
        sums = np.add.reduceat(dur, self.first, axis=1) if len(self.first) else np.zeros((k, 0), np.int64)
        dur[:, self.wait] += total - sums
        ends = np.cumsum(dur, axis=1)
        before = ends[:, self.first] - dur[:, self.first]  # what earlier plans add to the running sum
        start = np.asarray(op_start_ns, np.int64)[:, self.seg] + ends - before[:, self.seg] - dur
        return start, dur

    def template(self, connection_ids: np.ndarray, name_ids: Mapping[str, int], stream_ids: np.ndarray) -> np.ndarray:
        """One execution's ``HCCL_TASK_DTYPE`` records [S] with every field but the times and the
        iteration filled (``connection_ids``/``stream_ids`` per collective): what :meth:`records`
        repeats for every execution."""
        rec = np.zeros(len(self.seg), HCCL_TASK_DTYPE)  # plane 0
        rec["connection_id"] = np.asarray(connection_ids)[self.seg]
        rec["name"] = np.asarray([name_ids[str(n)] for n in self.names], np.uint64)[self.name_codes.ravel()]
        for field, column in (("src_rank", "src"), ("dst_rank", "dst"), ("transport", "transport"),
                              ("link", "link"), ("size", "size")):
            rec[field] = self.columns[column]
        rec["stream_id"] = np.asarray(stream_ids)[self.seg]
        return rec

    def records(self, op_start_ns: np.ndarray, op_dur_ns: np.ndarray, iteration: np.ndarray,
                template: np.ndarray) -> np.ndarray:
        """``HCCL_TASK_DTYPE`` records of K executions of every collective, execution after execution
        (within one, collective after collective, each as :meth:`SubTasks.records` gives it): the
        order they run in.  ``template`` is :meth:`template`'s, copied per execution, then the
        times as :meth:`times` computes them and the iteration are set."""
        start, dur = self.times(op_start_ns, op_dur_ns)
        rec = np.tile(template, (len(start), 1))
        rec["start"] = start
        rec["dur"] = dur
        rec["iteration"] = np.asarray(iteration)[:, None]
        return rec.ravel()


def hccl_op_name(op_type: str, index: int, execution: int = 1, group: str = DEFAULT_GROUP) -> str:
    """msprof's collective name, e.g. ``hccl_op_name("HcomAllReduce", 0, 1, "...871")`` ->
    ``hcom_allReduce__871_0_1`` (see the module docstring)."""
    if op_type not in HCCL_OP_NAMES:
        raise ValueError(f"unknown collective {op_type!r}; accepted: {', '.join(HCCL_OP_NAMES)}")
    return f"{HCCL_OP_NAMES[op_type]}_{group[-3:]}_{index}_{execution}"
