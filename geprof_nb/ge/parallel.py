"""``ge.Parallel``: how a model is split over ranks (Megatron / MindSpeed semantics), and which ranks
form each communication group.

World size is ``tp * pp * dp``; ranks are numbered as Megatron-core's rank generator numbers them
(order ``tp-cp-ep-dp-pp``): tensor-parallel peers are neighbours, a pipeline stage is a block of
``tp * dp`` consecutive ranks, ``rank = tp_rank + tp * (dp_rank + dp * pp_rank)``.  Expert parallelism
takes its ``ep`` ranks from the ``tp * dp`` ranks of a stage (expert tensor parallelism 1, as
MindSpeed's MoE models run): ``ep`` divides ``dp * tp``, the expert-parallel group is ``ep``
consecutive ranks of a stage, and the ranks holding the same experts reduce the experts' gradients
(the expert-data-parallel group, ``dp * tp / ep`` ranks).

Group names are MindSpeed's process-group names, as torch_npu's profiler records them in
``parallel_group_info``: ``tp``, ``pp``, ``dp``, ``exp`` (expert parallel), ``dp_modulo_exp`` (expert
data parallel); a group's id is an HCCL communicator name (``<ip>%<nic>_<port>_<rank>_<time>``), one
per group, the same on every member.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .tensor import GraphBuildError

SCHEDULES = ("1F1B", "interleaved")
ZERO_STAGES = (0, 1)
#: Group kinds: MindSpeed's process-group names (``get_group_name``), and the world group.
GROUP_KINDS = ("tp", "pp", "dp", "exp", "dp_modulo_exp")
WORLD_GROUP = "hccl_world_group"
#: The HCCL communicator names of a simulated job: ``<server ip>%<nic>_<port>_<first rank>_<time + group>``.
COMM_NIC = "enp189s0f0"
COMM_PORT = 60000
COMM_EPOCH_US = 1735689600123456


def _count(value: Any, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise GraphBuildError(f"Parallel: {name} must be an int >= 1, got {value!r}")
    return value


@dataclass(frozen=True)
class Parallel:
    """Tensor (``tp``), pipeline (``pp``), data (``dp``) and expert (``ep``) parallel sizes, sequence
    parallelism (``sp``), ``micro_batches`` per step, the pipeline ``schedule`` (``"1F1B"``, or
    ``"interleaved"`` with ``virtual_stages`` model chunks per stage) and the ZeRO stage (``zero=1``:
    Megatron's distributed optimizer, gradients reduce-scattered and parameters all-gathered).

    Bad combinations are refused naming the field (``GraphBuildError``); what also depends on the
    model (tp dividing the heads, pp not larger than the layers, ep dividing the experts) is checked
    when the model is built.
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    sp: bool = False
    micro_batches: int = 1
    schedule: str = "1F1B"
    virtual_stages: int = 1
    zero: int = 0

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp", "ep", "micro_batches", "virtual_stages"):
            _count(getattr(self, name), name)
        if not isinstance(self.sp, bool):
            raise GraphBuildError(f"Parallel: sp must be True or False, got {self.sp!r}")
        if self.schedule not in SCHEDULES:
            raise GraphBuildError(f"Parallel: schedule {self.schedule!r} is not known; "
                                  f"accepted: {', '.join(SCHEDULES)}")
        if self.zero not in ZERO_STAGES or isinstance(self.zero, bool):
            raise GraphBuildError(f"Parallel: zero must be 0 or 1 (ZeRO-1: the distributed optimizer), "
                                  f"got {self.zero!r}")
        if (self.dp * self.tp) % self.ep:
            raise GraphBuildError(f"Parallel: ep={self.ep} must divide dp*tp={self.dp * self.tp} (the expert-parallel "
                                  "ranks are taken from the data- and tensor-parallel ranks of a stage)")
        if self.sp and self.tp == 1:
            raise GraphBuildError("Parallel: sp=True needs tp > 1 (sequence parallelism splits the sequence over "
                                  "the tensor-parallel ranks)")
        if self.schedule == "interleaved":
            if self.virtual_stages < 2:
                raise GraphBuildError("Parallel: schedule='interleaved' needs virtual_stages >= 2 (model chunks "
                                      "per stage); accepted: virtual_stages >= 2, or schedule='1F1B'")
            if self.pp < 2:
                raise GraphBuildError("Parallel: schedule='interleaved' needs pp >= 2")
            if self.micro_batches % self.pp:
                raise GraphBuildError(f"Parallel: micro_batches={self.micro_batches} must be a multiple of "
                                      f"pp={self.pp} for the interleaved schedule (as Megatron requires)")
        elif self.virtual_stages != 1:
            raise GraphBuildError(f"Parallel: virtual_stages={self.virtual_stages} needs schedule='interleaved'; "
                                  "accepted with schedule='1F1B': virtual_stages=1")

    @property
    def world_size(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def stage_size(self) -> int:
        """Ranks per pipeline stage."""
        return self.tp * self.dp

    def describe(self) -> str:
        parts = [f"tp={self.tp}", f"pp={self.pp}", f"dp={self.dp}"]
        parts += [f"ep={self.ep}"] if self.ep > 1 else []
        parts += ["sp"] if self.sp else []
        parts += [f"{self.micro_batches} micro-batches", self.schedule if self.virtual_stages == 1 else
                  f"interleaved x{self.virtual_stages}"]
        parts += [f"zero={self.zero}"] if self.zero else []
        return ", ".join(parts)

    def distributed_args(self) -> dict[str, int]:
        """The sizes as torch_npu's profiler records Megatron's arguments (``distributed_args``)."""
        return {"world_size": self.world_size, "tensor_model_parallel_size": self.tp,
                "pipeline_model_parallel_size": self.pp, "data_parallel_size": self.dp,
                "context_parallel_size": 1, "expert_model_parallel_size": self.ep,
                "virtual_pipeline_model_parallel_size": self.virtual_stages,
                "sequence_parallel": int(self.sp), "num_micro_batches": self.micro_batches}


@dataclass(frozen=True)
class Group:
    """One communication group: its kind, its members (global ranks, in group-rank order) and its id."""

    kind: str
    ranks: tuple[int, ...]
    id: str

    def rank_of(self, rank: int) -> int:
        """``rank``'s index in the group."""
        return self.ranks.index(rank)


@dataclass(frozen=True)
class Coords:
    """Where a rank sits: its pipeline stage, data-parallel and tensor-parallel indices, and its index
    in the stage (``tp_rank + tp * dp_rank``), which is also its expert-parallel position."""

    stage: int
    dp: int
    tp: int
    local: int


@dataclass(frozen=True)
class RankLayout:
    """Every rank's coordinates and groups for a :class:`Parallel` on servers of ``ranks_per_node``."""

    parallel: Parallel
    ranks_per_node: int = 8
    _groups: dict[tuple[str, int], Group] = field(default_factory=dict, compare=False, repr=False)

    def coords(self, rank: int) -> Coords:
        p = self.parallel
        if not 0 <= rank < p.world_size:
            raise ValueError(f"rank {rank} is out of range; accepted: 0 .. {p.world_size - 1}")
        stage, local = divmod(rank, p.stage_size)
        dp_rank, tp_rank = divmod(local, p.tp)
        return Coords(stage, dp_rank, tp_rank, local)

    def rank(self, stage: int, local: int) -> int:
        return stage * self.parallel.stage_size + local

    def members(self, kind: str, rank: int) -> tuple[int, ...]:
        """The ranks of ``rank``'s group of ``kind``, in group-rank order."""
        p = self.parallel
        c = self.coords(rank)
        base = c.stage * p.stage_size
        if kind == "tp":
            return tuple(base + c.dp * p.tp + t for t in range(p.tp))
        if kind == "dp":
            return tuple(base + d * p.tp + c.tp for d in range(p.dp))
        if kind == "pp":
            return tuple(s * p.stage_size + c.local for s in range(p.pp))
        if kind == "exp":
            first = c.local - c.local % p.ep
            return tuple(base + first + e for e in range(p.ep))
        if kind == "dp_modulo_exp":
            return tuple(base + c.local % p.ep + k * p.ep for k in range(p.stage_size // p.ep))
        if kind == WORLD_GROUP:
            return tuple(range(p.world_size))
        raise ValueError(f"unknown group kind {kind!r}; accepted: {', '.join((*GROUP_KINDS, WORLD_GROUP))}")

    @cached_property
    def group_ids(self) -> dict[tuple[str, tuple[int, ...]], str]:
        """The communicator name of every group, numbered in the order the groups are made (by kind, then
        first member), as HCCL names the communicators a framework creates one after the other."""
        ids: dict[tuple[str, tuple[int, ...]], str] = {}
        for kind in (WORLD_GROUP, *GROUP_KINDS):
            for r in range(1 if kind == WORLD_GROUP else self.parallel.world_size):
                key = (kind, self.members(kind, r))
                if key not in ids:
                    first = key[1][0]
                    ip = f"10.0.{first // self.ranks_per_node // 256}.{first // self.ranks_per_node % 256 + 1}"
                    ids[key] = (f"{ip}%{COMM_NIC}_{COMM_PORT}_{first % self.ranks_per_node}_"
                                f"{COMM_EPOCH_US + len(ids)}")
        return ids

    def group(self, kind: str, rank: int) -> Group:
        """``rank``'s group of ``kind``."""
        key = (kind, rank)
        found = self._groups.get(key)
        if found is None:
            members = self.members(kind, rank)
            found = self._groups[key] = Group(kind, members, self.group_ids[(kind, members)])
        return found

    def groups_of(self, rank: int) -> list[Group]:
        """Every group ``rank`` is in (the kinds this parallelism uses), world group first."""
        p = self.parallel
        kinds = [WORLD_GROUP] + [k for k, size in (("tp", p.tp), ("pp", p.pp), ("dp", p.dp), ("exp", p.ep),
                                                   ("dp_modulo_exp", p.stage_size // p.ep if p.ep > 1 else 1))
                                 if size > 1]
        return [self.group(k, rank) for k in kinds]

    def parallel_group_info(self, rank: int) -> dict[str, dict[str, Any]]:
        """``rank``'s groups as torch_npu's profiler records them (``profiler_metadata.json``):
        ``{group id: {"group_name", "group_rank", "global_ranks"}}``."""
        return {g.id: {"group_name": g.kind, "group_rank": g.rank_of(rank), "global_ranks": list(g.ranks)}
                for g in self.groups_of(rank)}
