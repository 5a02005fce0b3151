"""GE's host profiler: the ``ge::profiling`` events and the ``GlobalProfiler``
ring buffer they are recorded into.

The buffer has a fixed capacity (GE: 10 Mi records); records past it are
dropped and counted, never silently lost.  It is emptied into the run
directory when collection stops, and, when ``GE_PROFILING_TO_STD_OUT`` is
set, dumped as text in GE's format (``graph_metadef/graph/utils/profiler.cc``)::

    Profiler version: 1.0, dump start, records num: <N>
    <ns since epoch> <thread id> [<element>] [<event>] Start|End
    Profiling dump end

An event index without a registered string prints as ``UNKNOWN(<index>)``, unbracketed, as in GE.
"""

from __future__ import annotations

import threading
from enum import IntEnum
from typing import TextIO

import numpy as np

from . import rawdata

#: GE's capacity of the ring buffer (records).
DEFAULT_CAPACITY = 10 * 1024 * 1024
VERSION = "1.0"

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
#: The string GE registers for each event index.
EVENT_STRINGS = [_DISPLAY_OVERRIDES.get(n, n[1:]) for n in _EVENT_NAMES]


def event_string(index: int) -> str:
    return EVENT_STRINGS[index] if 0 <= index < len(EVENT_STRINGS) else f"UNKNOWN({index})"


class GlobalProfiler:
    """Fixed-capacity record buffer: (timestamp ns, thread id, element, event, Start|End)."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._records: list[tuple[int, int, str, int, int]] = []
        self._count = 0
        self._lock = threading.Lock()

    @property
    def count(self) -> int:
        """Records offered since the last take, kept or not."""
        return self._count

    @property
    def dropped(self) -> int:
        return max(0, self._count - len(self._records))

    def record_scope(self, element: str, event: int, start_ns: int, end_ns: int) -> None:
        """Record a Start and an End together (GE's ScopeProfiler records both on scope exit)."""
        with self._lock:
            n = self._count
            self._count = n + 2
        if n + 2 <= self.capacity:
            tid = threading.get_native_id()
            self._records.extend(((start_ns, tid, element, event, rawdata.HOST_EVENT_START),
                                  (end_ns, tid, element, event, rawdata.HOST_EVENT_END)))

    def record_many(self, elements: list[str], event_ids: list[int], starts, ends) -> None:
        """Record many scopes at once (a node-by-node launch reports all its host phases together)."""
        n = len(elements)
        with self._lock:
            first = self._count
            self._count = first + 2 * n
        room = max(0, min(n, (self.capacity - first) // 2))
        if room:
            tid = threading.get_native_id()
            rows = []
            for element, event, s, e in zip(elements[:room], event_ids[:room], starts[:room], ends[:room]):
                rows.append((int(s), tid, element, event, rawdata.HOST_EVENT_START))
                rows.append((int(e), tid, element, event, rawdata.HOST_EVENT_END))
            self._records.extend(rows)

    def take(self) -> tuple[list[tuple[int, int, str, int, int]], int]:
        """Remove every kept record; return them and how many were dropped."""
        with self._lock:
            records, dropped = self._records, max(0, self._count - len(self._records))
            self._records, self._count = [], 0
        return records, dropped

    @staticmethod
    def dump(records: list[tuple[int, int, str, int, int]], dropped: int, out: TextIO, capacity: int) -> None:
        """Write records in GE's text dump format."""
        total = len(records) + dropped
        out.write(f"Profiler version: {VERSION}, dump start, records num: {total}\n")
        if dropped:
            out.write(f"Too many records({total}), the records after {capacity} will be dropped\n")
        for ts, tid, element, event, phase in records:
            shown = f"[{EVENT_STRINGS[event]}]" if 0 <= event < len(EVENT_STRINGS) else event_string(event)
            out.write(f"{ts} {tid} [{element}] {shown} "
                      f"{'Start' if phase == rawdata.HOST_EVENT_START else 'End'}\n")
        out.write("Profiling dump end\n")

    @staticmethod
    def to_records(records: list[tuple[int, int, str, int, int]], hash_id) -> np.ndarray:
        """Records in the raw ``host_event`` layout (elements as hash ids)."""
        out = np.zeros(len(records), rawdata.HOST_EVENT_DTYPE)
        if records:
            ts, tid, element, event, phase = zip(*records)
            out["timestamp"] = ts
            out["thread_id"] = tid
            out["element"] = [hash_id(e) for e in element]
            out["event"] = event
            out["phase"] = phase
        return out


#: The process-wide host profiler.
global_profiler = GlobalProfiler()
