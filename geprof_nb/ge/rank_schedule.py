"""One step of every rank of a simulated cluster, computed together: each pipeline stage's task table on
its ranks (rows), collectives synchronised within their groups, sends meeting their receives.

The ranks of a stage run the same task list, so a stage is ``[ranks, tasks]`` arrays and its streams are
replayed segment by segment as on one device (:mod:`.schedule`), rows in lockstep:

* a task starts when its stream is free; an EVENT_WAIT lasts until the awaited record has run;
* a collective ends, on every member of a group at once, at the group's last arrival plus the time the
  algorithm needs on the group's links (:mod:`.hccl`) times one transfer-jitter draw of the group (its
  first member's): an early member's extra time is the leading Notify_Wait msprof-analyze calls waiting;
* a send and its receive (the same ``sr_tag``, rows of the two stages aligned: the same place in the
  stage) both end at the later arrival plus the transfer.  A stream that reaches a send or receive whose
  other end has not arrived yet stops there; the other streams and stages go on, and it resumes once its
  partner arrives.  As on the device, nothing waits that the data does not make wait, so an order of the
  passes that could deadlock HCCL is reported as such.

Compute tasks run ``slow`` x longer on a slow card, and the experts' tasks of a skewed MoE routing take
the time of the tokens each rank really gets (``routed``: per-row durations of those tasks).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..prof.rawdata import RtTaskType
from .compiler import EVENT_WAIT_MIN_NS, TaskTable
from .schedule import StepTimes, StreamSchedule, jitter_factors
from .what_if import scaled

_COMPUTE_TYPES = (RtTaskType.KERNEL_AICORE, RtTaskType.KERNEL_AIVEC, RtTaskType.KERNEL_MIX_AIC,
                  RtTaskType.KERNEL_MIX_AIV, RtTaskType.KERNEL_AICPU)


@dataclass(frozen=True)
class Collective:
    """A collective task of a stage: the group of each row, and each group's transfer time (ns)."""

    groups: np.ndarray  # [rows] group index
    transfer: np.ndarray  # [groups]
    order: np.ndarray = field(init=False)  # rows sorted by group
    starts: np.ndarray = field(init=False)  # where each group begins in ``order``
    leaders: np.ndarray = field(init=False)  # each group's first row

    def __post_init__(self) -> None:
        order = np.argsort(self.groups, kind="stable")
        starts = np.flatnonzero(np.r_[True, np.diff(self.groups[order]) != 0])
        object.__setattr__(self, "order", order)
        object.__setattr__(self, "starts", starts)
        object.__setattr__(self, "leaders", order[starts])


@dataclass(frozen=True)
class PointToPoint:
    """A send or receive of a stage: the other end's (stage, task) and the transfer of each row (ns)."""

    partner: tuple[int, int]
    transfer: np.ndarray  # [rows]
    sends: bool


@dataclass
class StageProgram:
    """What the ranks of one stage run: the table, their slow-card factors, their sync tasks and the
    per-row durations of the routed (expert) tasks."""

    table: TaskTable
    rows: int
    slow: np.ndarray  # [rows] compute time factor >= 1
    sync: dict[int, Collective | PointToPoint]
    routed_tasks: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    routed_base: np.ndarray | None = None  # [rows, routed tasks]
    routed_var: np.ndarray | None = None
    routed_cycles: np.ndarray | None = None
    #: Per task, what the what-if change divides its final duration by (:mod:`.what_if`; None: no change).
    speedup: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.segments = StreamSchedule._segments(self.table)
        hccl = np.zeros(len(self.table), bool)
        hccl[list(self.sync)] = True
        self.cuts = [np.flatnonzero(hccl[seg.tasks]) for seg in self.segments]
        self.compute = np.isin(self.table.rt_type, _COMPUTE_TYPES)
        self.streams: dict[int, list[int]] = {}
        for i, seg in enumerate(self.segments):
            self.streams.setdefault(seg.stream, []).append(i)


class ScheduleDeadlock(RuntimeError):
    """The passes wait for each other in a cycle: a send or receive whose partner never comes."""


class _Stream:
    """Where one stream of a stage is in its segments."""

    def __init__(self, segments: list[int], free: np.ndarray) -> None:
        self.queue = segments
        self.at = 0  # index in queue
        self.pos = -1  # position in the current segment (-1: not started)
        self.prev = free
        self.records = 0  # records of the current segment already set

    @property
    def done(self) -> bool:
        return self.at >= len(self.queue)


class _StageRun:
    """One stage's step being computed."""

    def __init__(self, prog: StageProgram, offsets: np.ndarray, rng: np.random.Generator) -> None:
        t = prog.table
        self.prog = prog
        rows = prog.rows
        factor = jitter_factors(t, rows, rng)
        factor[:, prog.compute] *= prog.slow[:, None]  # a slow card's blocks stall: more cycles, same pipe work
        base = np.broadcast_to(t.base_ns, (rows, len(t)))
        var = np.broadcast_to(t.var_ns, (rows, len(t)))
        cycles = np.broadcast_to(t.block_cycles, (rows, len(t)))
        if len(prog.routed_tasks):
            base, var, cycles = base.copy(), var.copy(), cycles.copy()
            base[:, prog.routed_tasks] = prog.routed_base
            var[:, prog.routed_tasks] = prog.routed_var
            cycles[:, prog.routed_tasks] = prog.routed_cycles
        self.factor = factor
        self.dur = scaled(base + np.rint(var * factor).astype(np.int64), prog.speedup)
        self.cycles = np.rint(cycles * factor).astype(np.int64)
        self.ends = np.zeros((rows, len(t)), np.int64)
        self.events: dict[int, np.ndarray] = {}
        self.streams = {s: _Stream(segs, offsets) for s, segs in prog.streams.items()}


class ClusterStep:
    """Computes one step of every stage program (each a :class:`StageProgram`)."""

    def __init__(self, programs: list[StageProgram]) -> None:
        self.programs = programs

    def step(self, offsets: list[np.ndarray], rng: np.random.Generator) -> list[StepTimes]:
        """Task times of one step on every rank of every stage, relative to the step's launch; ``offsets``
        (per stage, [rows]) is when each rank can start."""
        runs = [_StageRun(p, o, rng) for p, o in zip(self.programs, offsets)]
        arrived: dict[tuple[int, int], np.ndarray] = {}  # a send's / receive's arrival, partner not there yet
        finished: dict[tuple[int, int], np.ndarray] = {}  # a send's / receive's end, once both arrived
        pending = True
        while pending:
            pending = progressed = False
            for s, run in enumerate(runs):
                for stream in run.streams.values():
                    progressed |= self._advance(runs, s, stream, arrived, finished)
                    pending |= not stream.done
            if pending and not progressed:
                raise ScheduleDeadlock(self._blocked(runs, arrived))
        out = []
        for run in runs:
            start = run.ends - run.dur
            end = np.max(np.stack([st.prev for st in run.streams.values()]), axis=0)
            out.append(StepTimes(start, run.dur, run.cycles, end))
        return out

    def _advance(self, runs: list[_StageRun], s: int, st: _Stream, arrived: dict, finished: dict) -> bool:
        """Run ``st`` as far as it can; True if it moved."""
        run = runs[s]
        prog = run.prog
        moved = False
        while not st.done:
            k = st.queue[st.at]
            seg = prog.segments[k]
            tasks = seg.tasks
            if st.pos < 0:  # start the segment: its leading wait lasts until the awaited record ran
                if seg.wait_event >= 0:
                    if seg.wait_event not in run.events:
                        return moved
                    run.dur[:, tasks[0]] = np.maximum(run.events[seg.wait_event] - st.prev, 0) + EVENT_WAIT_MIN_NS
                st.pos, st.records = 0, 0
            cuts = prog.cuts[k]
            nxt = cuts[np.searchsorted(cuts, st.pos)] if len(cuts) and cuts[-1] >= st.pos else len(tasks)
            if nxt > st.pos:  # plain tasks: a cumulative sum from where the rows are
                cols = tasks[st.pos:nxt]
                run.ends[:, cols] = st.prev[:, None] + np.cumsum(run.dur[:, cols], axis=1)
                st.prev = run.ends[:, cols[-1]]
                st.pos = nxt
                moved = True
            if nxt < len(tasks):
                task = int(tasks[nxt])
                finish = self._sync(runs, s, task, st.prev, arrived, finished)
                if finish is None:
                    self._records(run, seg, st)
                    return moved
                run.dur[:, task] = finish - st.prev
                run.ends[:, task] = finish
                st.prev = finish
                st.pos = nxt + 1
                moved = True
            self._records(run, seg, st)
            if st.pos >= len(tasks):
                st.at += 1
                st.pos = -1
        return moved

    @staticmethod
    def _records(run: _StageRun, seg, st: _Stream) -> None:
        """The events the segment has recorded up to its current position."""
        while st.records < len(seg.records) and seg.records[st.records][0] < st.pos:
            pos, ev = seg.records[st.records]
            run.events[ev] = run.ends[:, seg.tasks[pos]]
            st.records += 1

    @staticmethod
    def _sync(runs: list[_StageRun], s: int, task: int, prev: np.ndarray, arrived: dict,
              finished: dict) -> np.ndarray | None:
        """When an HCCL task that the rows reach at ``prev`` ends (None: its partner has not arrived)."""
        run = runs[s]
        sync = run.prog.sync[task]
        if isinstance(sync, Collective):
            last = np.maximum.reduceat(prev[sync.order], sync.starts)
            draw = run.factor[sync.leaders, task]  # each group's one draw of the transfer's jitter
            finish_g = last + np.rint(sync.transfer * draw).astype(np.int64)
            return finish_g[sync.groups]
        key = (s, task)
        if key in finished:
            return finished.pop(key)
        other = arrived.pop(sync.partner, None)
        if other is None:
            arrived[key] = prev
            return None
        sender = (s, task) if sync.sends else sync.partner
        factor = runs[sender[0]].factor[:, sender[1]]
        finish = np.maximum(prev, other) + np.rint(sync.transfer * factor).astype(np.int64)
        finished[sync.partner] = finish
        return finish

    def _blocked(self, runs: list[_StageRun], arrived: dict) -> str:
        waits = []
        for (s, task) in sorted(arrived):
            sync = runs[s].prog.sync[task]
            waits.append(f"stage {s} task {task} ({'send' if sync.sends else 'receive'}) waits for stage "
                         f"{sync.partner[0]} task {sync.partner[1]}")
        return ("the pipeline's sends and receives wait for each other in a cycle: " + "; ".join(waits[:6])
                + ("" if len(waits) <= 6 else f"; and {len(waits) - 6} more"))
