"""Replay a static model's streams with numpy, many steps at once.

A task starts when its stream is free; an EVENT_WAIT lasts until the awaited
EVENT_RECORD has run on the other stream.  Cutting every stream at its waits
gives *segments*: inside a segment start times are a cumulative sum of
durations, so a step costs a handful of array operations per segment instead
of a Python loop per task, and ``K`` steps are computed together as ``K x T``
arrays.  Durations vary per step by a seeded log-normal jitter, clipped to
[0.9, 1.5] for kernels (so PMU ratios stay within [0, 1]) and to [1, 1.5] for
data transfers (collectives, host-to-device copies): their nominal time is
what their link allows, so contention can only slow them.  A cluster
(:mod:`.cluster`) applies the same factors.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..prof.rawdata import RtTaskType
from .compiler import EVENT_WAIT_MIN_NS, TaskTable
from .host_launch import KERNEL_TYPES
from .what_if import scaled

JITTER_CLIP = (0.9, 1.5)
#: The clip of a data transfer's jitter: never faster than its link.
TRANSFER_JITTER_CLIP = (1.0, JITTER_CLIP[1])
#: Tasks that move data over a link (HCCS/RoCE rings, PCIe) at the link's bandwidth.
TRANSFER_TYPES = (RtTaskType.HCCL, RtTaskType.MEMCPY_ASYNC)


def jitter_factors(table: TaskTable, rows: int, rng: np.random.Generator) -> np.ndarray:
    """Duration factors [rows, T] of the varying part of every task: a log-normal draw of each
    jittered task's spread, clipped to :data:`JITTER_CLIP` (transfers: :data:`TRANSFER_JITTER_CLIP`);
    1 for tasks that do not vary."""
    jittered = table.sigma > 0
    factor = np.ones((rows, len(table)))
    m = int(jittered.sum())
    if m:
        noise = np.exp(rng.standard_normal((rows, m)) * table.sigma[jittered])
        transfer = np.isin(table.rt_type[jittered], TRANSFER_TYPES)
        low = np.where(transfer, TRANSFER_JITTER_CLIP[0], JITTER_CLIP[0])
        factor[:, jittered] = np.clip(noise, low, JITTER_CLIP[1])
    return factor


@dataclass(frozen=True)
class _Segment:
    stream: int
    tasks: np.ndarray  # task indices, launch order
    wait_event: int  # event waited for by the first task, -1 if none
    records: tuple[tuple[int, int], ...]  # (position in segment, event id)


@dataclass
class StepTimes:
    """Times of every task of K steps, relative to the moment the model was launched."""

    start: np.ndarray  # int64 [K, T]
    dur: np.ndarray  # int64 [K, T]
    block_cycles: np.ndarray  # int64 [K, T]
    end: np.ndarray  # int64 [K]: when the last task of the step finished


class StreamSchedule:
    """Computes task times of a task table for batches of steps."""

    def __init__(self, table: TaskTable, speedup: np.ndarray | None = None, host_gap_ns: int | None = None) -> None:
        """``speedup``: per task, what a what-if change divides its final duration by; ``host_gap_ns``: the
        change's cap on how long a host-launched task waits after its stream's previous one (:mod:`.what_if`)."""
        self.table = table
        self.speedup = speedup
        self.host_gap_ns = host_gap_ns
        #: The tasks the cap applies to: the kernels the host launches (its copies' waits the analysis reads as
        #: fixed pauses, their ops not being dynamic); an event or trace task goes with its node, never waiting.
        self.capped = np.isin(table.rt_type, KERNEL_TYPES)
        self.launched = self.capped | (table.rt_type == RtTaskType.MEMCPY_ASYNC)
        self.segments = self._segments(table)

    @staticmethod
    def _segments(table: TaskTable) -> list[_Segment]:
        segments: list[tuple[int, list[int], int]] = []  # (stream, tasks, wait event)
        current: dict[int, int] = {}  # stream -> index of its open segment
        streams, types, events = table.stream.tolist(), table.rt_type.tolist(), table.event.tolist()
        wait_type, record_type = int(RtTaskType.EVENT_WAIT), int(RtTaskType.EVENT_RECORD)
        for i, (s, rt) in enumerate(zip(streams, types)):
            is_wait = rt == wait_type
            if is_wait or s not in current:
                current[s] = len(segments)
                segments.append((s, [], events[i] if is_wait else -1))
            segments[current[s]][1].append(i)
        out = []
        for stream, tasks, wait in segments:  # already ordered by first task index
            idx = np.asarray(tasks, np.int64)
            recs = tuple((pos, events[t]) for pos, t in enumerate(tasks) if types[t] == record_type)
            out.append(_Segment(stream, idx, wait, recs))
        return out

    def steps(self, k: int, rng: np.random.Generator, earliest: np.ndarray | None = None, busy: int = 0) -> StepTimes:
        """Times of ``k`` steps, each starting with every stream free at time ``busy`` (0: an idle device).

        ``earliest`` (per task, ns) is when the host has launched each task: for a
        graph run node by node a task cannot start before its launch, so a slow
        host shows up as device idle time.  Inside a segment this is a max-plus
        scan: ``end_j = S_j + max(base, max_{i<=j}(earliest_i - S_{i-1}))``.  Under a
        ``host_gap_ns`` cap a task starts by then after its stream's previous task at the latest
        (:func:`_capped_ends`).
        """
        t = self.table
        n = len(t)
        factor = jitter_factors(t, k, rng)
        dur = scaled(t.base_ns + np.rint(t.var_ns * factor).astype(np.int64), self.speedup)
        cycles = np.rint(t.block_cycles * factor).astype(np.int64)
        start = np.empty((k, n), np.int64)
        free: dict[int, np.ndarray] = {}
        event_time: dict[int, np.ndarray] = {}
        zero = np.full(k, busy, np.int64)
        cap = self.host_gap_ns
        for seg in self.segments:
            base = free.get(seg.stream, zero)
            d = dur[:, seg.tasks]
            if seg.wait_event >= 0:
                if earliest is not None:
                    base = np.maximum(base, earliest[seg.tasks[0]])
                d[:, 0] = np.maximum(event_time[seg.wait_event] - base, 0) + EVENT_WAIT_MIN_NS
                dur[:, seg.tasks[0]] = d[:, 0]
            cum = np.cumsum(d, axis=1)
            if earliest is None:
                ends = base[:, None] + cum
            else:
                launch = earliest[seg.tasks]
                if seg.wait_event >= 0:
                    launch = launch.copy()
                    launch[0] = -np.iinfo(np.int64).max // 4  # the wait already started at base
                if cap is None:
                    slack = np.maximum.accumulate(launch[None, :] - (cum - d), axis=1)
                    ends = cum + np.maximum(base[:, None], slack)
                else:
                    capped = self.capped[seg.tasks]
                    if seg.stream not in free:  # a stream's first task: its wait is before the step's begin
                        capped = np.concatenate(([False], capped[1:]))
                    never = -np.iinfo(np.int64).max // 4
                    launch = np.where(self.launched[seg.tasks], launch, never)
                    ends = _capped_ends(base, d, launch, np.where(capped, cap, -never))
            start[:, seg.tasks] = ends - d
            for pos, ev in seg.records:
                event_time[ev] = ends[:, pos]
            free[seg.stream] = ends[:, -1]
        end = np.max(np.stack(list(free.values())), axis=0) if free else zero
        return StepTimes(start, dur, cycles, end)


def _capped_ends(base: np.ndarray, dur: np.ndarray, launch: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Ends ([K, n]) of a segment's tasks (``dur`` [K, n]) on a stream free at ``base`` ([K]) when each task
    starts once launched (``launch`` [n]) but no later than ``cap`` ([n], ns) after the previous task ends: the
    what-if host gap cap, which is no max-plus scan (a task by task walk, vectorised over the steps)."""
    ends = np.empty_like(dur)
    free = base
    for j in range(dur.shape[1]):
        free = np.maximum(free, np.minimum(launch[j], free + cap[j])) + dur[:, j]
        ends[:, j] = free
    return ends
