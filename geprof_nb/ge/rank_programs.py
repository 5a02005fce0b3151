"""What each pipeline stage of a simulated cluster runs, ready for :mod:`.rank_schedule`: its ranks,
the group of every collective on each of them with the group's transfer time on the links its members
are on, the other end of every send and receive, and the per-rank durations of a skewed MoE routing's
expert tasks.

Groups come from :class:`CommGroups`: a parallel job's layout (:mod:`.parallel`), or for a graph every
rank runs alike (data parallelism) the world group.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..prof.rawdata import RtTaskType
from . import hccl
from .builds import ModelBuild
from .compiler import P2P_TYPES, kernel_time_split
from .device import CostModel
from .graph import Node
from .parallel import WORLD_GROUP, RankLayout
from .rank_schedule import Collective, PointToPoint, StageProgram

if TYPE_CHECKING:
    from .llm import LlmJob


@dataclass(frozen=True)
class CommGroups:
    """Which group each collective of a rank runs in."""

    world_size: int
    layout: RankLayout | None = None

    def of(self, node: Node, rank: int) -> tuple[str, tuple[int, ...], int, int]:
        """(group id, members' global ranks, ``rank``'s position, the root's or peer's position) of
        ``node``'s collective on ``rank``."""
        kind = str(node.attrs.get("group", WORLD_GROUP))
        if self.layout is None or kind == WORLD_GROUP:
            members = tuple(range(self.world_size))
            group_id = WORLD_GROUP
        else:
            g = self.layout.group(kind, rank)
            members, group_id = g.ranks, g.id
        peer = node.attrs.get("dest_rank", node.attrs.get("src_rank", node.attrs.get("root_rank", 0)))
        return group_id, members, members.index(rank), int(peer)


class _Transfers:
    """Transfer times of collectives by group, computed once per distinct group layout."""

    def __init__(self, links: hccl.Links) -> None:
        self.links = links
        self.ends = {r for a, b, _ in links.slow_links for r in (a, b)}
        self.cache: dict[tuple, int] = {}

    def collective(self, op_type: str, nbytes: int, members: tuple[int, ...]) -> int:
        per = self.links.ranks_per_node
        key_members = members if self.ends.intersection(members) else hccl.group_signature(members, per)
        key = (op_type, nbytes, key_members)
        if key not in self.cache:
            self.cache[key] = hccl.cluster_duration_ns(op_type, nbytes, len(members), self.links, key_members)
        return self.cache[key]

    def p2p(self, nbytes: int, members: tuple[int, ...], src: int, dst: int) -> int:
        """A send from position ``src`` to ``dst`` of ``members``."""
        return hccl.collective_duration_ns("HcomSend", nbytes, len(members), self.links, src, members, dst)


def _routed_loads(job: LlmJob | None, skew: float, stage_size: int) -> dict[int, np.ndarray]:
    """Layer -> the routed-token factor of each row of a stage (its expert-parallel position's load)."""
    if job is None or not skew or job.parallel.ep == 1:
        return {}
    ep = job.parallel.ep
    positions = np.arange(stage_size) % ep
    return {layer: job.expert_loads(skew, layer)[positions] for layer in range(job.config.layers)}


def _scaled_kernel(node: Node, rows: int, actual: int, cost_model: CostModel) -> Any:
    """The kernel of ``node`` when the tensors whose first dim is the balanced ``rows`` have ``actual``."""
    def scale(d):
        return d.with_(shape=(actual,) + d.shape[1:]) if d.shape and d.shape[0] == rows else d

    ins = [scale(t.desc) for t in node.inputs]
    outs = [scale(d) for d in node.outputs]
    cost = node.op_def.cost(ins, outs, node.attrs)
    return cost_model.kernel(node.type, node.engine, cost, ins[0].dtype, node.attrs)


def stage_programs(builds: list[ModelBuild], stage_ranks: list[np.ndarray], comm: CommGroups, links: hccl.Links,
                   slow: np.ndarray, job: LlmJob | None, skew: float, cost_model: CostModel) -> list[StageProgram]:
    """The :class:`StageProgram` of every stage (``builds[s]`` runs on global ranks ``stage_ranks[s]``)."""
    transfers = _Transfers(links)
    receives: dict[tuple[int, int], int] = {}  # (stage, sr_tag) -> its receive task
    sends: dict[tuple[int, int], int] = {}
    for s, b in enumerate(builds):
        t = b.table
        nodes = b.compiled.graph.nodes
        for i in np.flatnonzero(t.rt_type == RtTaskType.HCCL):
            node = nodes[int(t.node[i])]
            if node.type in P2P_TYPES:
                (sends if node.type == "HcomSend" else receives)[(s, int(node.attrs["sr_tag"]))] = int(i)
    routed_by_stage = [job.stage(s).routed_with_gradients() if job is not None else {} for s in range(len(builds))]
    programs = []
    for s, (b, ranks) in enumerate(zip(builds, stage_ranks)):
        t = b.table
        nodes = b.compiled.graph.nodes
        loads = _routed_loads(job, skew, len(ranks))
        routed = routed_by_stage[s] if loads else {}
        sync: dict[int, Collective | PointToPoint] = {}
        for i in np.flatnonzero(t.rt_type == RtTaskType.HCCL):
            node = nodes[int(t.node[i])]
            nbytes = b.compiled.costs[node.id].comm_bytes
            info = [comm.of(node, int(r)) for r in ranks]
            if node.type in P2P_TYPES:
                peer_stage = info[0][3]  # the pp group's positions are the stages
                tag = int(node.attrs["sr_tag"])
                other = (receives if node.type == "HcomSend" else sends).get((peer_stage, tag))
                if other is None:
                    raise RuntimeError(f"{node.type} {node.name!r} (sr_tag {tag}) of stage {s} has no matching "
                                       f"{'HcomReceive' if node.type == 'HcomSend' else 'HcomSend'} on stage "
                                       f"{peer_stage}")
                src_dst = [(pos, peer) if node.type == "HcomSend" else (peer, pos) for _, _, pos, peer in info]
                cost = np.asarray([transfers.p2p(nbytes, m, *sd) for (_, m, _, _), sd in zip(info, src_dst)],
                                  np.int64)
                sync[int(i)] = PointToPoint((peer_stage, other), cost, node.type == "HcomSend")
                continue
            ids: dict[tuple[int, ...], int] = {}
            groups = np.asarray([ids.setdefault(m, len(ids)) for _, m, _, _ in info], np.int64)
            transfer = np.asarray([transfers.collective(node.type, nbytes, m) for m in ids], np.float64)
            if node.id in routed:  # the busiest member of an expert exchange sets its pace
                load = loads[routed[node.id][0]]
                transfer *= np.asarray([max(1.0, load[groups == g].max()) for g in range(len(ids))])
            sync[int(i)] = Collective(groups, np.rint(transfer).astype(np.int64))
        speedup = b.schedule.speedup  # the what-if change the build was made under
        if speedup is not None:  # a removed collective moves nothing (its ranks still meet)
            for i, task in sync.items():
                if np.isinf(speedup[i]):
                    sync[i] = replace(task, transfer=task.transfer * 0)
        programs.append(StageProgram(t, len(ranks), slow[ranks], sync, *_routed_tasks(b, routed, loads, cost_model),
                                     speedup=speedup))
    return programs


def _routed_tasks(b: ModelBuild, routed: dict[int, tuple[int, int]], loads: dict[int, np.ndarray],
                  cost_model: CostModel) -> tuple:
    """(tasks, base, var, cycles) of the expert compute tasks of ``b`` as each row's routed tokens make them."""
    t = b.table
    nodes = b.compiled.graph.nodes
    picked = [(int(i), nodes[int(t.node[i])]) for i in np.flatnonzero(t.node >= 0)
              if int(t.node[i]) in routed and t.kernels[i] is not None and t.rt_type[i] != RtTaskType.HCCL]
    if not picked:
        return ()
    rows = len(next(iter(loads.values())))
    base = np.zeros((rows, len(picked)), np.int64)
    var, cycles = base.copy(), base.copy()
    overhead = cost_model.device.task_overhead_ns
    for j, (_, node) in enumerate(picked):
        layer, balanced = routed[node.id]
        load = loads[layer]
        for value in np.unique(load):
            kernel = _scaled_kernel(node, balanced, max(1, int(round(balanced * value))), cost_model)
            sel = load == value
            base[sel, j], var[sel, j], cycles[sel, j] = kernel_time_split(kernel, overhead)
    return np.asarray([i for i, _ in picked], np.int64), base, var, cycles

