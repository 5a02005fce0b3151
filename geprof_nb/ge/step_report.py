"""What a device records of a model's steps, reported to msprof many steps at a time: the HWTS task log,
the step trace, the static task description (once per collection), the memory plan, HCCL and AI CPU
details, and the host's records of a node-by-node launch.

One :class:`StepReporter` per model and device: a simulated cluster's other ranks report rank 0's steps
through reporters of their own (:meth:`StepReporter.on_device`), with their own connection ids and
their own device's collectors, into their own run directories.
"""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..prof import events, msprof, rawdata
from ..prof.api_types import ExecutorEvent, GeProfInfoType, LaunchType, RuntimeApiType
from ..prof.clock import clock
from ..prof.collectors import LoadedTaskInfo, report_api_block
from ..prof.host_profiler import ProfilingEvent
from ..prof.properties import (
    BIT_CANN_HOST,
    BIT_DEVICE,
    BIT_GE_HOST,
    BIT_MEMORY,
    BIT_TASK_TIME,
    BIT_TRAINING_TRACE,
    ProfilingProperties,
)
from ..prof.rawdata import ReportLevel, RtTaskType
from . import hccl
from .aicpu import aicpu_records
from .builds import ModelBuild
from .compiler import TaskTable
from .host_launch import HOST_PHASES, HOST_PROFILERS, KERNEL_TYPES, LAUNCH_TYPES, HostTimeline
from .memory import plan_memory, static_op_mem
from .tensor import DTYPES

if TYPE_CHECKING:
    from .graph import Node
    from .rank_programs import CommGroups
    from .runtime import DeviceRuntime

DEFAULT_GROUP = "hccl_world_group"
#: The mstx domain of a pipeline stage's pass ranges, and their range ids (above any user range's).
PIPELINE_DOMAIN = "pipeline"
_PASS_MARKS = itertools.count(1 << 40)
#: Names of HCCL sub-tasks (hashed once per run).
HCCL_SUBTASK_NAMES = ("Notify_Record", "Notify_Wait", "Memcpy", "Reduce_Inline", "RDMASend")
_UINT32_MAX = np.iinfo(np.uint32).max


class RunConnectionIds:
    """Connection ids join a task's HWTS records to its task track and descriptions, so they are unique
    within a run directory, whichever device object reports into it: GE finalised and initialised again
    during one collection is a new device runtime, whose first ids would repeat the earlier ones (and
    relabel the earlier models' tasks).  Counted per msprof library (a simulated cluster's ranks have
    one each) and started over with each run it opens."""

    def __init__(self) -> None:
        self._next: weakref.WeakKeyDictionary[msprof.Msprof, tuple[int, int]] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def allocate(self, n: int) -> int:
        """The first of ``n`` new ids in the run ``msprof.lib`` is writing."""
        lib = msprof.lib
        with self._lock:
            serial, base = self._next.get(lib, (lib.run_serial, 0))
            if serial != lib.run_serial:
                base = 0
            self._next[lib] = (lib.run_serial, base + n)
            return base


CONNECTION_IDS = RunConnectionIds()


@dataclass
class _Reported:
    """What a reporter has told msprof about one build's current task table."""

    table: TaskTable
    epoch: int = -1  # the device's collection epoch whose static description went out
    connection_base: int = 0
    #: (rank, links) -> (its HCCL tasks, their sub-tasks side by side)
    hccl_layouts: dict[tuple, tuple[np.ndarray, hccl.SubTaskLayout]] = field(default_factory=dict)
    #: (what it was made for, the records of one execution of every collective's sub-tasks but their times)
    hccl_template: tuple[tuple, np.ndarray] | None = None
    passes: list[np.ndarray] | None = None  # the tasks of each pipeline pass
    pass_names: list[int] = field(default_factory=list)


class StepReporter:
    """Reports the steps of one model as one device (``runtime``) records them."""

    def __init__(self, runtime: DeviceRuntime, model_id: int, graph_id: int, graph_name: str, single_op: bool,
                 dynamic: bool, links: hccl.Links) -> None:
        self.runtime = runtime
        self.model_id = model_id
        self.graph_id = graph_id
        self.graph_name = graph_name
        self.single_op = single_op
        self.dynamic = dynamic
        #: The interconnect its collectives use (a cluster's has its size per server and slow links).
        self.links = links
        #: Which group each collective runs in on this device's rank (a cluster's :class:`~.rank_programs.CommGroups`;
        #: ``None``: every collective over ranks ``0 .. rank_size - 1``).
        self.comm: CommGroups | None = None
        #: What this rank's run records of the parallel job its model is part of (info.json ``parallel``).
        self.parallel_info: dict | None = None
        self._reported: weakref.WeakKeyDictionary[ModelBuild, _Reported] = weakref.WeakKeyDictionary()

    def on_device(self, runtime: DeviceRuntime) -> StepReporter:
        """This model as another rank's device ``runtime`` records it: the same ids and links, its own
        connection ids and collectors."""
        other = StepReporter(runtime, self.model_id, self.graph_id, self.graph_name, self.single_op, self.dynamic,
                             self.links)
        other.comm = self.comm
        other.parallel_info = self.parallel_info
        return other

    def _state(self, build: ModelBuild) -> _Reported:
        state = self._reported.get(build)
        if state is None or state.table is not build.table:  # a new table is described anew
            state = self._reported[build] = _Reported(build.table)
        return state

    # ----------------------------------------------------------------- static
    def task_info(self, build: ModelBuild) -> LoadedTaskInfo:
        """Static description of every task of ``build``'s table, for the reporters."""
        if build.task_info is not None and build.task_info[0] is build.table:
            return build.task_info[1]
        info = build.compiled.op_descs.task_info(build.table, build.compiled.graph.nodes, self.model_id,
                                                 self.graph_id, build.compiled.graph.name, self.dynamic)
        build.task_info = (build.table, info)
        return info

    def _report_static(self, build: ModelBuild, state: _Reported, flags: int) -> None:
        rt = self.runtime
        if state.epoch == rt.epoch:
            return
        state.epoch = rt.epoch
        state.connection_base = CONNECTION_IDS.allocate(len(build.table))
        rt.cann_profiler.on_execute_event(ExecutorEvent.kModelStart, info=self.task_info(build),
                                          connection_base=state.connection_base, pmu_events=rt.pmu_events,
                                          timestamp=clock.now_ns(), with_basic_info=bool(flags & BIT_DEVICE))
        if flags & BIT_MEMORY:
            self._report_memory_plan(build, state)
        self._report_hccl_ops(build, state)
        if self.parallel_info is not None:
            msprof.lib.set_run_info("parallel", self.parallel_info)

    def _report_memory_plan(self, build: ModelBuild, state: _Reported) -> None:
        """The static memory plan, once per collection (the steps' times come from the task log)."""
        if build.memory_plan is None:
            build.memory_plan = plan_memory(build.compiled, build.table)
        plan = build.memory_plan
        msprof.lib.add_note(f"model {self.model_id} ({self.graph_name}): static memory pool "
                            f"{plan.pool_size / 2**20:.1f} MiB for {len(plan)} tensors "
                            f"(reuse {plan.reuse_ratio:.2f}x), weights {plan.weight_bytes / 2**20:.1f} MiB")
        msprof.lib.report_block("static_op_mem", static_op_mem(plan, self.model_id, state.connection_base,
                                                               msprof.lib.get_hash_ids), self.runtime.device_id)

    # ------------------------------------------------------------------ steps
    def report_steps(self, build: ModelBuild, flags: int, start: np.ndarray, dur: np.ndarray, cycles: np.ndarray,
                     iterations: np.ndarray) -> None:
        """Device records of ``n`` steps at once (arrays [n, tasks])."""
        t = build.table
        rt = self.runtime
        state = self._state(build)
        n = len(iterations)
        if flags & BIT_TASK_TIME:
            self._report_static(build, state, flags)
            keep = np.flatnonzero(t.rt_type != RtTaskType.PROFILER_TRACE)
            rec = np.empty((n, len(keep)), rawdata.HWTS_DTYPE)  # every field is set: no zero fill
            rec_start, rec_dur, rec_cycles = rec["start"], rec["dur"], rec["block_cycles"]
            for lo, hi, at in _index_runs(keep):  # the trace tasks cut the columns into a few runs
                cols = slice(at, at + hi - lo)
                rec_start[:, cols] = start[:, lo:hi]
                rec_dur[:, cols] = dur[:, lo:hi]
                if rt.pmu_events:
                    np.minimum(cycles[:, lo:hi], _UINT32_MAX, out=rec_cycles[:, cols], casting="unsafe")
            if not rt.pmu_events:
                rec_cycles[:] = 0
            rec["connection_id"] = keep + state.connection_base
            rec["iteration"] = iterations[:, None]
            for block in _step_blocks(rec.ravel(), n):
                rt.device_collector.report_tasks(block)
            self._report_passes(build, state, start, dur)
        if flags & (BIT_TASK_TIME | BIT_TRAINING_TRACE) and not self.single_op:
            traces = np.flatnonzero(t.logid >= 0) if flags & BIT_TRAINING_TRACE else np.empty(0, np.int64)
            width = len(traces) + 2
            rec = np.zeros((n, width), rawdata.STEP_TRACE_DTYPE)
            rec["model_id"] = self.model_id
            rec["index_id"] = iterations[:, None]
            first, last = t.stream_bounds  # (the step's first start and last end: not a pass over every task)
            rec["timestamp"][:, 0] = start[:, first].min(axis=1)
            rec["tag_id"][:, 0] = rawdata.MODEL_START_TAG
            rec["timestamp"][:, 1:-1] = start[:, traces]
            rec["tag_id"][:, 1:-1] = t.logid[traces]
            rec["stream_id"][:, 1:-1] = t.stream[traces]
            rec["task_id"][:, 1:-1] = t.task_id[traces]
            rec["timestamp"][:, -1] = (start[:, last] + dur[:, last]).max(axis=1)
            rec["tag_id"][:, -1] = rawdata.MODEL_END_TAG
            for block in _step_blocks(rec.ravel(), n):
                rt.device_collector.report_step_trace(block)
        if flags & BIT_MEMORY and not flags & BIT_TASK_TIME and state.epoch != rt.epoch:
            state.epoch = rt.epoch
            msprof.lib.add_note("task_memory needs task_trace on: memory events are timed by the task log, "
                                "so none were recorded")
        switch = ProfilingProperties.instance().switch
        if switch & events.PROF_HCCL_TRACE_MASK:
            self._report_hccl(build, state, start, dur, iterations)
        if switch & events.PROF_AICPU_TRACE_MASK and flags & BIT_TASK_TIME:
            self._report_aicpu(build, state, start, dur, iterations)

    def _report_hccl(self, build: ModelBuild, state: _Reported, start: np.ndarray, dur: np.ndarray,
                     iterations: np.ndarray) -> None:
        """The sub-tasks (Notify_Wait, Memcpy, Reduce_Inline, ...) of every collective of the steps."""
        t = build.table
        lib = msprof.lib
        name_ids = {n: lib.get_hash_id(n) for n in HCCL_SUBTASK_NAMES}
        links = self.links
        key = (self.runtime.rank, links)
        laid_out = state.hccl_layouts.get(key)
        if laid_out is None:
            tasks = np.flatnonzero(t.rt_type == RtTaskType.HCCL)
            nodes = [build.compiled.graph.nodes[int(t.node[i])] for i in tasks]
            layout = hccl.SubTaskLayout([(node.type, build.compiled.costs[node.id].comm_bytes, len(members),
                                          position, peer, members)
                                         for node in nodes for _, members, position, peer in [self._group(node)]],
                                        links)
            laid_out = state.hccl_layouts[key] = (tasks, layout)
        tasks, layout = laid_out
        if not len(tasks):
            return
        made_for = (layout, state.connection_base, tuple(name_ids.values()))
        if state.hccl_template is None or state.hccl_template[0] != made_for:  # once per collection
            state.hccl_template = (made_for, layout.template(state.connection_base + tasks, name_ids,
                                                             t.stream[tasks]))
        lib.report_block("hccl_task", layout.records(start[:, tasks], dur[:, tasks], iterations,
                                                     state.hccl_template[1]), self.runtime.device_id)

    def _report_passes(self, build: ModelBuild, state: _Reported, start: np.ndarray, dur: np.ndarray) -> None:
        """A pipeline stage's passes as the framework marks them: an mstx range per micro-batch, model chunk
        and direction (``forward_step`` / ``backward_step``, domain ``pipeline``), timed by the pass's device
        tasks (its first start to its last end), as MindSpeed's ranges are that msprof-analyze's pp_chart reads."""
        job = build.compiled.graph.job
        passes = job.passes(build.compiled.graph) if job is not None else []
        if not passes:
            return
        t = build.table
        if state.passes is None:  # each pass's tasks, once per table
            state.passes = [np.flatnonzero((t.node >= p.first) & (t.node < p.end)) for p in passes]
            lib = msprof.lib
            state.pass_names = [lib.get_hash_id(f"{p.action.kind}_step micro_batch={p.action.micro_batch} "
                                                f"model_chunk={p.action.chunk}") for p in passes]
        n, a = len(start), len(passes)
        rec = np.zeros((n, a), rawdata.MSTX_DTYPE)
        for j, tasks in enumerate(state.passes):
            rec["start"][:, j] = start[:, tasks].min(axis=1)
            rec["end"][:, j] = (start[:, tasks] + dur[:, tasks]).max(axis=1)
        rec["pid"] = os.getpid()
        rec["event_type"] = rawdata.MSTX_RANGE
        rec["message"] = np.asarray(state.pass_names, np.uint64)
        rec["domain"] = msprof.lib.get_hash_id(PIPELINE_DOMAIN)
        rec["mark_id"] = np.fromiter(itertools.islice(_PASS_MARKS, n * a), np.uint64, n * a).reshape(n, a)
        msprof.lib.report_block("mstx", rec.ravel())

    def _group(self, node: Node) -> tuple[str, tuple[int, ...], int, int]:
        """(group id, members, this rank's position, the root's or peer's position) of a collective."""
        if self.comm is not None:
            return self.comm.of(node, self.runtime.rank)
        n = int(node.attrs.get("rank_size", 1))
        peer = node.attrs.get("dest_rank", node.attrs.get("src_rank", node.attrs.get("root_rank", 0)))
        return DEFAULT_GROUP, tuple(range(n)), min(self.runtime.rank, n - 1), int(peer)

    def _report_hccl_ops(self, build: ModelBuild, state: _Reported) -> None:
        """Every collective's group, its size, this rank's place in it and a send's or receive's peer
        (HCCL's op info, once per collection): which communicator each collective of the task log ran in."""
        t = build.table
        tasks = np.flatnonzero(t.rt_type == RtTaskType.HCCL)
        if not len(tasks):
            return
        cols: dict[str, list[int]] = {k: [] for k in ("group", "rank_size", "group_rank", "peer_rank", "count",
                                                        "data_type")}
        ids: dict[str, int] = {}
        for i in tasks.tolist():
            node = build.compiled.graph.nodes[int(t.node[i])]
            group, members, position, peer = self._group(node)
            desc = node.inputs[0].desc if node.inputs else node.outputs[0]
            if group not in ids:
                ids[group] = msprof.lib.get_hash_id(group)
            for k, v in zip(cols, (ids[group], len(members), position,
                                   members[peer] if node.type in hccl.P2P_OPS else rawdata.NO_PEER,
                                   build.compiled.costs[node.id].comm_bytes // max(1, desc.itemsize),
                                   int(DTYPES[desc.dtype][0]))):
                cols[k].append(v)
        rec = np.zeros(len(tasks), rawdata.HCCL_OP_DTYPE)  # filled column by column
        rec["connection_id"] = tasks + state.connection_base
        rec["model_id"] = self.model_id
        for k, v in cols.items():
            rec[k] = v
        msprof.lib.report_block("hccl_op", rec, self.runtime.device_id)

    def _report_aicpu(self, build: ModelBuild, state: _Reported, start: np.ndarray, dur: np.ndarray,
                      iterations: np.ndarray) -> None:
        """AI CPU kernel details (compute / memcpy / dispatch split) of the steps."""
        t = build.table
        tasks = np.flatnonzero(t.rt_type == RtTaskType.KERNEL_AICPU)
        if not len(tasks):
            return
        parts = [aicpu_records(start[:, i], state.connection_base + int(i), iterations, dur[:, i],
                               build.compiled.costs[int(t.node[i])].bytes) for i in tasks]
        msprof.lib.report_block("aicpu", np.concatenate(parts), self.runtime.device_id)

    # ------------------------------------------------------------------- host
    def report_host(self, build: ModelBuild, timeline: HostTimeline, launch_ns: np.ndarray, threads: np.ndarray,
                    flags: int, node_api: bool) -> None:
        """Host records of node-by-node launches of ``n`` steps (``launch_ns``, ``threads`` [n]: when and by
        which thread each was launched): GE host events, node-level and runtime API records."""
        t = build.table
        n = len(launch_ns)
        names = [build.compiled.graph.nodes[int(t.node[i])].name for i in timeline.tasks]
        starts = launch_ns[:, None, None] + timeline.phase_start[None]  # [n, launches, phases]
        durs = np.broadcast_to(timeline.phase_dur, starts.shape)
        kernel = np.isin(t.rt_type[timeline.tasks], KERNEL_TYPES)
        if flags & BIT_GE_HOST:
            steps, rows, cols = np.nonzero(durs > 0)
            events_ = np.where(kernel[rows], np.asarray(HOST_PHASES, np.int64)[cols], int(ProfilingEvent.kCopyH2D))
            HOST_PROFILERS[timeline.executor].record_many(names, rows, events_, starts[steps, rows, cols],
                                                          starts[steps, rows, cols] + durs[steps, rows, cols],
                                                          threads[steps])
        launch_begin = starts[:, :, 4]
        launch_end = launch_begin + durs[:, :, 4]
        if node_api and flags & (BIT_TASK_TIME | BIT_CANN_HOST):
            hashes = np.asarray([msprof.lib.get_hash_id(nm) for nm in names], np.uint64)
        if node_api and flags & BIT_TASK_TIME:
            types = np.asarray([int(LAUNCH_TYPES.get(RtTaskType(int(t.rt_type[i])), LaunchType.LaunchKernelWithHandle))
                                for i in timeline.tasks], np.int64)
            launches = {"level": ReportLevel.NODE, "types": np.tile(types[kernel], n),
                        "begins": launch_begin[:, kernel].ravel(), "ends": launch_end[:, kernel].ravel(),
                        "item_ids": np.tile(hashes[kernel], n), "thread_ids": np.repeat(threads, int(kernel.sum()))}
            self.runtime.cann_profiler.on_execute_event(ExecutorEvent.kExecuteEnd, **launches)
        if node_api and flags & BIT_CANN_HOST:  # ge_api l0: the host scheduling (InferShape, Tiling) of each node
            for col, api in ((0, GeProfInfoType.kInferShape), (1, GeProfInfoType.kTiling)):
                sel = kernel & (timeline.phase_dur[:, col] > 0)
                report_api_block(ReportLevel.NODE, np.full(n * int(sel.sum()), int(api)),
                                 starts[:, sel, col].ravel(), (starts[:, sel, col] + durs[:, sel, col]).ravel(),
                                 np.tile(hashes[sel], n), np.repeat(threads, int(sel.sum())))
        if ProfilingProperties.instance().switch & events.PROF_RUNTIME_API_MASK:
            types = np.where(kernel, int(RuntimeApiType.rtKernelLaunch), int(RuntimeApiType.rtMemcpyAsync))
            report_api_block(ReportLevel.RUNTIME, np.tile(types, n), launch_begin.ravel(), launch_end.ravel(),
                             np.zeros(n * len(types), np.uint64), np.repeat(threads, len(types)))


def _index_runs(index: np.ndarray) -> list[tuple[int, int, int]]:
    """``(first, stop, position)`` of each run of consecutive values in the ascending ``index``.

    Copying a [steps, tasks] grid's columns run by run, as slices, is about five
    times faster than gathering them with ``index`` (a fancy index per field).
    """
    if not len(index):
        return []
    bounds = np.concatenate(([0], np.flatnonzero(np.diff(index) != 1) + 1, [len(index)])).tolist()
    first = index[bounds[:-1]].tolist()
    return [(lo, lo + b - a, a) for lo, a, b in zip(first, bounds[:-1], bounds[1:])]


def _step_blocks(records: np.ndarray, n_steps: int) -> list[np.ndarray]:
    """``records`` of ``n_steps`` equal steps, cut into blocks of whole steps of about a chunk each,
    so that chunks stay bounded and an aged-out chunk takes whole iterations with it."""
    per_step = len(records) // max(n_steps, 1)
    steps = max(1, msprof.lib.chunk_records // max(per_step, 1))
    return [records[lo:lo + steps * per_step] for lo in range(0, len(records), steps * per_step)] if per_step else []
