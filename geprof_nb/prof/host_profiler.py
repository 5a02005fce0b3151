"""GE's host profilers: the ``ge::profiling`` events and the ring buffers they are recorded into.

GE has two: ``ge::profiling``'s (ACL single ops, the V1 executor; dump version
1.0) and RT2's ``gert::GlobalProfiler`` (the V2 executor's node records and its
model's end-to-end records; dump version 2.0-SingleThread).  Each has a fixed
capacity (GE: 10 Mi records); records past it are dropped and counted, never
silently lost.  They are emptied into the run directory when collection stops,
and, when ``GE_PROFILING_TO_STD_OUT`` is set, dumped as text in GE's formats
(``graph_metadef/graph/utils/profiler.cc``, ``base/common/profiling/global_profiler.cc``)::

    Profiler version: 1.0, dump start, records num: <N>
    <ns since epoch> <thread id> [<element>] [<event>] Start|End
    Profiling dump end

    ExecutorProfiler version: 2.0-SingleThread, dump start, records num: <N>
    <ns since epoch> <thread id> [Model] [Execute] Start
    <ns since epoch> <thread id> [<node>] [<event>] Start|End
    <ns since epoch> <thread id> [Model] [Execute] End
    Profiling dump end

An event index without a registered string prints as ``UNKNOWN(<index>)``, unbracketed, as in GE.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import TextIO

import numpy as np

from . import rawdata
from .threads import native_thread_id

#: GE's capacity of the ring buffer (records).
DEFAULT_CAPACITY = 10 * 1024 * 1024
#: Dump versions of ``ge::profiling``'s buffer and of RT2's GlobalProfiler.
VERSION = "1.0"
RT2_VERSION = "2.0-SingleThread"
_DUMP_HEADERS = {VERSION: f"Profiler version: {VERSION}", RT2_VERSION: f"ExecutorProfiler version: {RT2_VERSION}"}

_EVENT_NAMES = """kAclCompileAndExecute kAclMatchOpModel kAclMatchStaticOpModel kAclMatchDynamicOpModel
kAclExecuteAsync kAclLoadSingleOp kAclBuildOpModel kInferShape kTiling kUpdateShape kConstPrepare
kInitHybridExecuteArgs kInitInferShapeContext kDestroyInferShapeContext kResetSubgraphExecutor
kCommitInferShapeTask kDeviceToHost kPrepareTask kLaunchTask kCommitTilingTask kAtomic kKernelLaunchPrepare
kRtKernelLaunch kRtEventCreateRecord kRtEventSync kRtEventDestroy kAclrtEventDestroy kRtStreamSync kOpExecute
kModelExecute kAllocMem kCopyH2D kPrepareNode kWaitForPrepareDone kPropgateOutputs kOnNodeDoneCallback
kValidateInputTensor kAfterExecuted kRtEventSychronize kInferShapeWaitDependShape kInferShapeWaitInputTensor
kInferShapeCallInferFunc kInferShapePropgate kSelectBranch kExecuteSubGraph kInitSubGraphExecutor kSelectBin
kFindCompileCache kAddCompileCache kFuzzCompileOp kCalcRuningParam kGenTask kRegisterBin kFftsPlusPreThread
kFftsPlusNodeThread kFftsPlusInferShape kOpFftsCalculateV2 kInitThreadRunInfo kFftsPlusGraphSchedule
kKnownGetAddrAndPrefCnt kKernelGetAddrAndPrefCnt kUpdateAddrAndPrefCnt kInitOpRunInfo kGetAutoThreadParam
kAllocateOutputs kAllocateWorkspaces kInitTaskAddrs kInitThreadRunParam kUpdateTaskAndCache kFftsPlusTaskLaunch
kProfilingIndexEnd""".split()

ProfilingEvent = IntEnum("ProfilingEvent", {name: i for i, name in enumerate(_EVENT_NAMES)})
ProfilingEvent.__doc__ = "``ge::profiling`` events; the value is the index GE records (reference §6.3)."

_DISPLAY_OVERRIDES = {
    "kRtKernelLaunch": "rtKernelLaunch", "kRtEventCreateRecord": "rtEventCreate&Record",
    "kAllocMem": "AllocMemory", "kInferShapeCallInferFunc": "CallInferFunc",
    "kInferShapePropgate": "PropgateOutputShape", "kKnownGetAddrAndPrefCnt": "rtGetAddrAndPrefCntWithHandle",
    "kKernelGetAddrAndPrefCnt": "rtKernelGetAddrAndPrefCnt", "kFftsPlusTaskLaunch": "rtFftsPlusTaskLaunch",
    "kAclrtEventDestroy": "AclrtEventDestroy", "kRtStreamSync": "rtStreamSync",
}
#: The string GE registers for each event index (none for the kProfilingIndexEnd sentinel).
EVENT_STRINGS = [_DISPLAY_OVERRIDES.get(n, n[1:]) for n in _EVENT_NAMES if n != "kProfilingIndexEnd"]


def event_string(index: int) -> str:
    return EVENT_STRINGS[index] if 0 <= index < len(EVENT_STRINGS) else f"UNKNOWN({index})"


#: RT2's end-to-end record of a model execution (its dump prints ``[Model] [Execute]``).
MODEL_ELEMENT = "Model"
MODEL_EXECUTE = int(ProfilingEvent.kModelExecute)


@dataclass
class HostRecords:
    """Records taken from the buffer, column-wise; each scope is a Start then an End record.

    Elements are indexes into ``names`` (a node's name repeats every step: it is stored once).
    """

    names: list[str]
    element: np.ndarray  # index into names
    timestamp: np.ndarray
    thread_id: np.ndarray
    event: np.ndarray
    phase: np.ndarray  # rawdata.HOST_EVENT_START / HOST_EVENT_END

    @classmethod
    def from_rows(cls, rows: Sequence[tuple[int, int, str, int, int]]) -> "HostRecords":
        """Records from (timestamp ns, thread id, element, event, phase) tuples."""
        index: dict[str, int] = {}
        element = np.asarray([index.setdefault(r[2], len(index)) for r in rows], np.int64)

        def col(k: int) -> np.ndarray:
            return np.asarray([r[k] for r in rows], np.int64)

        return cls(list(index), element, col(0), col(1), col(3), col(4))

    def __len__(self) -> int:
        return len(self.timestamp)

    def without_event(self, event: int) -> "HostRecords":
        """These records but ``event``'s (a scope's Start and End go together)."""
        keep = self.event != event
        return HostRecords(self.names, self.element[keep], self.timestamp[keep], self.thread_id[keep],
                           self.event[keep], self.phase[keep])

    def in_recording_order(self) -> "HostRecords":
        """These records in the order GE's buffer holds them.  GE's ScopeProfiler records a scope's
        Start and End together when the scope exits, so the buffer is in order of scope ends (across
        threads too); a node-by-node step's scopes are offered when the step is reported, after
        scopes that ran later, and a stable sort by end puts each back where GE recorded it."""
        end = self.timestamp[1::2]
        if not (np.diff(end) < 0).any():
            return self
        order = np.repeat(2 * np.argsort(end, kind="stable"), 2)
        order[1::2] += 1
        return HostRecords(self.names, self.element[order], self.timestamp[order], self.thread_id[order],
                           self.event[order], self.phase[order])

    def rows(self) -> list[tuple[int, int, str, int, int]]:
        """(timestamp ns, thread id, element, event, phase) per record, in this object's order."""
        return [(int(t), int(tid), self.names[e], int(ev), int(ph)) for t, tid, e, ev, ph in
                zip(self.timestamp, self.thread_id, self.element, self.event, self.phase)]

    def to_raw(self, hash_id) -> np.ndarray:
        """The records in the raw ``host_event`` layout (elements as hash ids)."""
        out = np.zeros(len(self), rawdata.HOST_EVENT_DTYPE)
        hashes = np.asarray([hash_id(n) for n in self.names], np.uint64)
        out["timestamp"] = self.timestamp
        out["thread_id"] = self.thread_id
        out["element"] = hashes[self.element] if len(self.names) else 0
        out["event"] = self.event
        out["phase"] = self.phase
        return out


@dataclass
class _Scopes:
    """``n`` scopes recorded together: element index into ``names``, event, start and end per scope."""

    names: list[str]
    element: np.ndarray
    event: np.ndarray
    start: np.ndarray
    end: np.ndarray
    thread_id: int | np.ndarray  # one for all scopes, or one per scope


class GlobalProfiler:
    """Fixed-capacity record buffer: (timestamp ns, thread id, element, event, Start|End).

    Single scopes (``record_scope``) are kept as tuples; a node-by-node launch's scopes
    (``record_many``) as arrays, so recording a step costs a few array operations.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY, version: str = VERSION) -> None:
        self.capacity = capacity
        self.version = version  # the format of its dump
        self._parts: list[tuple | _Scopes] = []  # in recording order
        self._kept = 0
        self._count = 0
        self._lock = threading.Lock()

    @property
    def count(self) -> int:
        """Records offered since the last take, kept or not."""
        return self._count

    @property
    def dropped(self) -> int:
        return self._count - self._kept

    def record_scope(self, element: str, event: int, start_ns: int, end_ns: int) -> None:
        """Record a Start and an End together (GE's ScopeProfiler records both on scope exit)."""
        scope = (element, event, start_ns, end_ns, native_thread_id())
        lock = self._lock
        lock.acquire()  # not ``with``: on the per-scope path its protocol calls cost twice as much
        try:
            n = self._count + 2
            self._count = n
            if n <= self.capacity:
                self._kept += 2
                self._parts.append(scope)
        finally:
            lock.release()

    def record_many(self, names: Sequence[str], element: np.ndarray, event_ids, starts, ends,
                    thread_ids: int | np.ndarray | None = None) -> None:
        """Record many scopes at once: scope ``i`` is ``names[element[i]]`` from ``starts[i]`` to ``ends[i]``
        (a node-by-node launch reports all its host phases together).

        ``thread_ids``: the thread that ran the scopes (one, or one per scope); by default the caller.
        Steps are reported after they ran, by whichever thread flushes, so they pass their own.
        """
        element = np.asarray(element, np.int64)
        n = len(element)
        tid = native_thread_id() if thread_ids is None else thread_ids
        with self._lock:
            first = self._count
            self._count = first + 2 * n
            room = max(0, min(n, (self.capacity - first) // 2))
            if room:
                self._kept += 2 * room
                self._parts.append(_Scopes(list(names), element[:room], np.asarray(event_ids, np.int64)[:room],
                                           np.asarray(starts, np.int64)[:room], np.asarray(ends, np.int64)[:room],
                                           tid[:room] if isinstance(tid, np.ndarray) else tid))

    def take(self) -> tuple[HostRecords, int]:
        """Remove every kept record; return them, in the order offered (:meth:`HostRecords.in_recording_order`
        gives GE's: only the stdout dump needs it), and how many were dropped.

        Which records are kept is decided as they are offered (the buffer's memory stays bounded), so
        in a full buffer a step reported late may lose records that GE, recording them earlier, kept.
        """
        with self._lock:
            parts, dropped = self._parts, self._count - self._kept
            self._parts, self._count, self._kept = [], 0, 0
        return _records(parts), dropped

    @staticmethod
    def dump(records: HostRecords, dropped: int, out: TextIO, capacity: int, version: str = VERSION) -> None:
        """Write records in GE's text dump format of ``version``.

        1.0 prints the buffer's order (each scope's Start and End together).  RT2 records a Start
        and an End each when it happens, so 2.0-SingleThread prints every record at its time: the
        model's Start before the records at the same time, its End after them.
        """
        total = len(records) + dropped
        out.write(f"{_DUMP_HEADERS[version]}, dump start, records num: {total}\n")
        if dropped:
            out.write(f"Too many records({total}), the records after {capacity} will be dropped\n")
        rt2 = version == RT2_VERSION
        rows = (records if rt2 else records.in_recording_order()).rows()
        if rt2:
            model = records.event == MODEL_EXECUTE
            tie = np.where(model, np.where(records.phase == rawdata.HOST_EVENT_START, -1, 1), 0)
            rows = [rows[i] for i in np.lexsort((tie, records.timestamp)).tolist()]
        for ts, tid, element, event, phase in rows:
            if rt2 and event == MODEL_EXECUTE:
                element, shown = MODEL_ELEMENT, "[Execute]"
            else:
                shown = f"[{EVENT_STRINGS[event]}]" if 0 <= event < len(EVENT_STRINGS) else event_string(event)
            out.write(f"{ts} {tid} [{element}] {shown} "
                      f"{'Start' if phase == rawdata.HOST_EVENT_START else 'End'}\n")
        out.write("Profiling dump end\n")


def _records(parts: list[tuple | _Scopes]) -> HostRecords:
    """The parts' scopes as Start/End record pairs, in the order offered."""
    names: list[str] = []
    index: dict[str, int] = {}
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("element", "event", "start", "end", "tid")}
    singles: list[tuple] = []

    def flush_singles() -> None:
        if singles:
            element, event, start, end, tid = zip(*singles)
            cols["element"].append(np.asarray([index.setdefault(e, len(index)) for e in element], np.int64))
            cols["event"].append(np.asarray(event, np.int64))
            cols["start"].append(np.asarray(start, np.int64))
            cols["end"].append(np.asarray(end, np.int64))
            cols["tid"].append(np.asarray(tid, np.int64))
            singles.clear()

    for part in parts:
        if isinstance(part, tuple):
            singles.append(part)
            continue
        flush_singles()
        remap = np.asarray([index.setdefault(nm, len(index)) for nm in part.names], np.int64)
        cols["element"].append(remap[part.element])
        cols["event"].append(part.event)
        cols["start"].append(part.start)
        cols["end"].append(part.end)
        cols["tid"].append(np.broadcast_to(np.asarray(part.thread_id, np.int64), part.start.shape))
    flush_singles()
    names = list(index)
    flat = {k: np.concatenate(c) if c else np.empty(0, np.int64) for k, c in cols.items()}

    def pairs(key: str, second: str | None = None) -> np.ndarray:
        first = flat[key]
        out = np.empty(2 * len(first), np.int64)
        out[0::2] = first
        out[1::2] = flat[second] if second else first
        return out

    timestamp = pairs("start", "end")
    phase = np.empty(len(timestamp), np.int64)
    phase[0::2], phase[1::2] = rawdata.HOST_EVENT_START, rawdata.HOST_EVENT_END
    return HostRecords(names, pairs("element"), timestamp, pairs("tid"), pairs("event"), phase)


#: The process-wide ``ge::profiling`` buffer (ACL single ops, the V1 executor).
global_profiler = GlobalProfiler()
#: RT2's GlobalProfiler (the V2 executor: node records and the model's end-to-end records).
rt2_profiler = GlobalProfiler(version=RT2_VERSION)
