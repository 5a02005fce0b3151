"""The simulated device at run time, and models loaded on it.

:class:`DeviceRuntime` owns the device's clock-domain state (when it is next
free), its jitter generator, and how profiling is programmed on it (which PMU
events, which connection ids).  GE's msprof control callback lands here: a
START reseeds the device (so virtual-clock runs repeat exactly) and programs
the PMU; a STOP turns reporting off.

:class:`LoadedModel` is a compiled model with ids, executing step after step:
it replays the stream schedule and, when the layers are on, reports the HWTS
task log, the step trace and (once per collection) the static task info.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..prof import events, msprof, rawdata
from ..prof.clock import clock
from ..prof.collectors import CannProfilerV2, DeviceCollector, LoadedTaskInfo, report_api_block
from ..prof.msprof import CommandHandle, CommandType
from ..prof.options import ProfilingOptions
from ..prof.api_types import ExecutorEvent, GeProfInfoType, LaunchType, RuntimeApiType, type_names
from ..prof.host_profiler import MODEL_EXECUTE, ProfilingEvent, global_profiler, rt2_profiler
from ..prof.properties import (BIT_CANN_HOST, BIT_DEVICE, BIT_GE_HOST, BIT_MEMORY, BIT_TASK_TIME,
                               BIT_TRAINING_TRACE, GlobalProfilingWrapper, ProfilingProperties)
from ..prof.rawdata import ReportLevel, RtTaskType
from ..prof.task_utils import ProfilingTaskUtils
from ..prof.threads import native_thread_id
from .compiler import CompiledModel, TaskTable
from .device import CostModel, DevicePreset
from . import hccl
from .aicpu import aicpu_records
from .graph import Graph
from .tensor import GraphBuildError
from .memory import DeviceMemoryError, MemoryPlan, check_device_memory, plan_memory, static_op_mem
from .schedule import StepTimes, StreamSchedule

if TYPE_CHECKING:
    from .cluster import RankGroup
from .serialize import concretize

#: Host launch to device start of a model's first task.
LAUNCH_LATENCY_NS = 12_000
#: Device end to the host seeing the synchronous RunGraph return.
SYNC_LATENCY_NS = 5_000
#: Set (to anything) to have GE's host profiler on and dumped to stdout, as in GE.
GE_PROFILING_TO_STD_OUT = "GE_PROFILING_TO_STD_OUT"
#: Names of HCCL sub-tasks (hashed once per run).
HCCL_SUBTASK_NAMES = ("Notify_Record", "Notify_Wait", "Memcpy", "Reduce_Inline", "RDMASend")
#: The model id msprof shows for single-op execution (no model).
SINGLE_OP_MODEL_ID = 0xFFFFFFFF
#: The run note of ``"l2": "on"`` (kProfL2cache): the switch is accepted, as GE accepts it, but samples nothing.
L2_NOTE = ("l2 (L2 cache sampling, kProfL2cache) is not simulated: nothing is recorded for it (an ascend_pt export has "
           "no l2_cache.csv); for L2 hit/miss counts per op use aic_metrics L2Cache on an A2-class chip (Ascend910B)")
DEFAULT_SEED = 0
_UINT32_MAX = np.iinfo(np.uint32).max


class ModelIdCounter:
    """GE's ``ModelManager::GenModelId`` (``*id = ++max_model_id_`` on a process-wide singleton).

    A model id is never reused in a process: not after an unload, not across GEFinalize/GEInitialize.
    A reloaded graph's iterations start at 1 again, so a reused id would fold its steps into the
    earlier load's (model, iteration) rows of the same run.
    """

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def next_id(self) -> int:
        with self._lock:
            self._last += 1
            return self._last

    def restart(self) -> None:
        """Ids start at 1 again, as in a new process (tests that each stand for one process call it)."""
        with self._lock:
            self._last = 0


#: The process's model ids (every device's, every GE initialisation's).
MODEL_IDS = ModelIdCounter()


class RunConnectionIds:
    """Connection ids join a task's HWTS records to its task track and descriptions, so they are unique
    within a run directory, whichever device object reports into it: GE finalised and initialised again
    during one collection is a new :class:`DeviceRuntime`, whose first ids would repeat the earlier ones
    (and relabel the earlier models' tasks).  Counted per msprof library (a simulated cluster's ranks have
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


class DeviceRuntime:
    """One simulated device: availability, jitter, profiling programming."""

    def __init__(self, preset: DevicePreset, device_id: int = 0, seed: int = DEFAULT_SEED) -> None:
        self.preset = preset
        self.device_id = device_id
        self.device_count = 1
        self.rank = 0  # this device's rank in its collectives
        self.cost_model = CostModel(preset)
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.free_at = 0
        self.epoch = 0  # bumped by every START; models re-report static info per epoch
        self._run_serial = -1
        self.pmu_events: dict[str, list[str]] = {}
        self._live_streams: set[int] = set()
        self._lock = threading.Lock()
        #: The ACL default stream (single ops run on it); created with the device.
        self.default_stream = self._lowest_free(self._live_streams, 0)
        self.device_collector = DeviceCollector(device_id)
        self.cann_profiler = CannProfilerV2(device_id)
        #: Models holding unreported steps (kept alive until they are reported).
        self.pending_models: set[LoadedModel] = set()
        #: Held while steps are handed to msprof or queued for it, and while a STOP flushes them: a
        #: thread running steps never reports a batch it took after the STOP, nor queues a step after
        #: the STOP's flush (either was lost with the run).
        self.report_lock = threading.RLock()

    # ------------------------------------------------------------------ ids
    @staticmethod
    def _lowest_free(live: set[int], start: int) -> int:
        i = start
        while i in live:
            i += 1
        live.add(i)
        return i

    def allocate_streams(self, n: int) -> list[int]:
        """Stream ids are unique among live streams; ids of unloaded models are reused, as rtStreamCreate does."""
        with self._lock:
            return [self._lowest_free(self._live_streams, 0) for _ in range(n)]

    def release_streams(self, streams: list[int]) -> None:
        """A model was unloaded: its stream ids become free (its model id never does: :class:`ModelIdCounter`)."""
        with self._lock:
            self._live_streams.difference_update(streams)

    # -------------------------------------------------------------- control
    def handle_command(self, handle: CommandHandle) -> int:
        """GE's ``ProfCtrlHandle``: start or stop the layers msprof asks for."""
        props = ProfilingProperties.instance()
        if handle.type == CommandType.START:
            options = ProfilingOptions.parse(handle.options) if handle.options else ProfilingOptions()
            props.start(options, handle.prof_switch)
            with self._lock:
                self.epoch += 1
                if msprof.lib.run_serial != self._run_serial:  # a new run: jitter starts over (as the run's
                    self._run_serial = msprof.lib.run_serial  # connection ids do), so two runs are alike;
                    self.rng = np.random.default_rng(self.seed)  # a run's later windows go on
                self.free_at = 0
            self.program_pmu(props.aic_metrics)
            if handle.prof_switch & events.PROF_L2CACHE_MASK:
                msprof.lib.add_note(L2_NOTE)
            msprof.lib.set_device_info(self.device_id, self.preset.info())
            for level, names in type_names().items():
                for type_id, name in names.items():
                    msprof.MsprofRegTypeInfo(level, type_id, name)
        elif handle.type in (CommandType.STOP, CommandType.FINALIZE):
            with self.report_lock:
                self.flush()
                flush_host_profiler()
                props.stop()
                self.pmu_events = {}
        return msprof.MSPROF_ERROR_NONE

    def flush(self) -> None:
        """Report every step the models ran but have not reported yet."""
        for model in list(self.pending_models):
            model.flush()

    def program_pmu(self, aic_metrics: str) -> None:
        """Program the AI Core counters with ``aic_metrics``' events and describe them to msprof
        (info.json ``pmu_events``); a simulated cluster programs every rank's device the same way."""
        self.pmu_events = {}
        if not aic_metrics:
            return
        group = events.PMU_EVENTS.get(aic_metrics, {}).get(self.preset.chip_family)
        if group is None:  # a run started before this device existed (a %%geprof cell, the C API) gets here
            why = ("Custom event groups are not simulated" if aic_metrics.startswith("Custom:") else
                   f"{self.preset.name} has no such counter group (it has: "
                   f"{', '.join(events.aic_metrics_on(self.preset.chip_family))})")
            text = f"aic_metrics {aic_metrics!r}: {why}; no AI Core PMU data is collected"
            warnings.warn(text, stacklevel=2)
            msprof.lib.add_note(text)
            return
        self.pmu_events = {core: list(names) for core, names in group.items()}
        for core, names in self.pmu_events.items():
            msprof.lib.set_pmu_events(core, names)
        msprof.lib.set_pmu_events("metrics", [aic_metrics])


def flush_host_profiler() -> None:
    """Empty GE's host ring buffers (``ge::profiling``'s, then RT2's) into the run directory, and to
    stdout in their formats with GE_PROFILING_TO_STD_OUT.

    RT2's model end-to-end records go to stdout only: the run has each execution as its ModelExecute
    api record, and ``host_events`` stays the host's work inside it.
    """
    to_std_out = os.environ.get(GE_PROFILING_TO_STD_OUT) is not None
    for profiler in (global_profiler, rt2_profiler):
        records, dropped = profiler.take()
        if to_std_out and (len(records) or dropped):
            profiler.dump(records, dropped, sys.stdout, profiler.capacity, profiler.version)
        if msprof.lib.running:
            records = records.without_event(MODEL_EXECUTE) if profiler is rt2_profiler else records
            if len(records):
                msprof.lib.report_block("host_event", records.to_raw(msprof.lib.get_hash_id))
            if dropped:
                msprof.lib.note_dropped("host_event", dropped)


@dataclass(frozen=True)
class NodeHostCosts:
    """Modelled host work (ns) to launch one node of a dynamic-shape graph.

    RT2 (v2) is leaner than the V1 hybrid executor; both pay InferShape, Tiling
    (AI Core ops), AllocMem, launch preparation and the kernel launch per node,
    every step: that is why dynamic shapes are host-bound.
    """

    executor: str
    infer_shape: int
    tiling: int
    alloc_mem: int
    launch_prepare: int
    kernel_launch: int
    memcpy: int


NODE_HOST_COSTS = {
    "v2": NodeHostCosts("v2", infer_shape=2_500, tiling=4_000, alloc_mem=800, launch_prepare=700,
                        kernel_launch=3_000, memcpy=5_000),
    "v1": NodeHostCosts("v1", infer_shape=6_000, tiling=8_000, alloc_mem=2_000, launch_prepare=2_000,
                        kernel_launch=4_000, memcpy=6_000),
}
#: The host profiler each executor records its node-by-node work into (V1: ge::profiling's, RT2: its own).
HOST_PROFILERS = {"v1": global_profiler, "v2": rt2_profiler}
_KERNEL_TYPES = (RtTaskType.KERNEL_AICORE, RtTaskType.KERNEL_AIVEC, RtTaskType.KERNEL_MIX_AIC,
                 RtTaskType.KERNEL_MIX_AIV, RtTaskType.KERNEL_AICPU, RtTaskType.HCCL)
_LAUNCH_TYPE = {RtTaskType.KERNEL_AICPU: LaunchType.AicpuLaunchCCKernel, RtTaskType.HCCL: LaunchType.LaunchHcomKernel,
                RtTaskType.KERNEL_MIX_AIC: LaunchType.LaunchMixKernelWithHandle,
                RtTaskType.KERNEL_MIX_AIV: LaunchType.LaunchMixKernelWithHandle}


@dataclass
class _HostTimeline:
    """When the host did each phase of each node launch, relative to the step's launch (ns)."""

    executor: str  # whose host work: its records go to that executor's host profiler
    tasks: np.ndarray  # kernel / copy task indices launched by the host, in order
    phase_start: np.ndarray  # [n, 5]: InferShape, Tiling, AllocMem, KernelLaunchPrepare, rtKernelLaunch
    phase_dur: np.ndarray  # [n, 5]
    earliest: np.ndarray  # per task of the table: launch finished
    total: int


_HOST_PHASES = (ProfilingEvent.kInferShape, ProfilingEvent.kTiling, ProfilingEvent.kAllocMem,
                ProfilingEvent.kKernelLaunchPrepare, ProfilingEvent.kRtKernelLaunch)


def host_timeline(table: TaskTable, costs: NodeHostCosts) -> _HostTimeline:
    """Lay out the host work of a node-by-node launch of ``table``."""
    rt = table.rt_type
    kernel = np.isin(rt, _KERNEL_TYPES)
    copy = rt == RtTaskType.MEMCPY_ASYNC
    tiled = np.isin(rt, (RtTaskType.KERNEL_AICORE, RtTaskType.KERNEL_AIVEC, RtTaskType.KERNEL_MIX_AIC,
                         RtTaskType.KERNEL_MIX_AIV))
    launched = np.flatnonzero(kernel | copy)
    dur = np.zeros((len(launched), 5), np.int64)
    k = kernel[launched]
    dur[k, 0] = costs.infer_shape
    dur[tiled[launched], 1] = costs.tiling
    dur[k, 2] = costs.alloc_mem
    dur[k, 3] = costs.launch_prepare
    dur[k, 4] = costs.kernel_launch
    dur[~k, 4] = costs.memcpy
    flat_end = np.cumsum(dur.ravel()).reshape(dur.shape)
    phase_start = flat_end - dur
    done = np.zeros(len(rt), np.int64)
    done[launched] = flat_end[:, -1]
    earliest = np.maximum.accumulate(done)  # events and traces go when their node's launch is done
    return _HostTimeline(costs.executor, launched, phase_start, dur, earliest,
                         int(flat_end[-1, -1]) if len(launched) else 0)


@dataclass
class _Batch:
    times: StepTimes
    next: int = 0


@dataclass
class _Pending:
    """Steps of the current batch run while profiling was on, not reported yet.

    The device's logs reach msprof batch by batch (as HWTS logs are DMA'd in
    blocks), so reporting costs a few array operations per batch of steps.
    """

    flags: int
    node_api: bool
    timeline: "_HostTimeline | None"
    k: list[int] = field(default_factory=list)  # step index in the batch
    t0: list[int] = field(default_factory=list)  # device start of the step
    iteration: list[int] = field(default_factory=list)
    thread: list[int] = field(default_factory=list)  # the host thread that ran the step (its records name it)


class _Variant:
    """One concrete-shape build of a model (a static model has exactly one)."""

    def __init__(self, compiled: CompiledModel) -> None:
        self.compiled = compiled
        self.points_key: tuple | None = None
        self.table_epoch = -1
        self.table: TaskTable | None = None
        #: (rank, links) -> (the table it lays out, its HCCL tasks, their sub-tasks side by side)
        self.hccl_layouts: dict[tuple, tuple[TaskTable, np.ndarray, hccl.SubTaskLayout]] = {}
        #: (what it was made for, the records of one execution of every collective's sub-tasks but their times)
        self.hccl_template: tuple[tuple, np.ndarray] | None = None
        self.schedule: StreamSchedule | None = None
        self.batch: _Batch | None = None
        self.batch_key: str = ""
        self.batch_size = 8
        self.reported_epoch = -1
        self.connection_base = 0
        self.timelines: dict[str, _HostTimeline] = {}
        self.memory_plan: MemoryPlan | None = None  # the static pool of the current table, planned at load
        self.pending: _Pending | None = None
        self.notes: list[str] = []
        self.task_info: tuple[TaskTable, LoadedTaskInfo] | None = None  # (the table it describes, description)


class LoadedModel:
    """A graph built and loaded on a device, with its model id and streams.

    A static graph is one task list launched as a whole (DavinciModel sink).
    A dynamic-shape graph (unknown input dims) is re-inferred for the input
    shapes of each run (one build per distinct shape set, cached) and launched
    node by node by the host, so host time shows on the device timeline.
    A *single-op* model (what ``aclopExecute`` builds) has no model id (msprof
    shows 4294967295), runs on the ACL default stream, takes its inputs where
    they are (no input copies) and has no step trace.
    """

    def __init__(self, runtime: DeviceRuntime, graph: Graph, graph_id: int, single_op: bool = False) -> None:
        self.runtime = runtime
        self.graph = graph
        self.graph_id = graph_id
        self.single_op = single_op
        self.dynamic = graph.is_dynamic
        if graph.net_output is None:
            raise GraphBuildError(f"graph {graph.name!r} has no outputs: call graph.output(...) (or "
                                  "ge.add_training) before adding it to a session")
        if single_op:
            self.model_id = SINGLE_OP_MODEL_ID
            self.streams = (runtime.default_stream, runtime.default_stream)
            self._unload = weakref.finalize(self, lambda: None)
        else:
            self.model_id = MODEL_IDS.next_id()
            self.streams = tuple(runtime.allocate_streams(2))
            self._unload = weakref.finalize(self, runtime.release_streams, list(self.streams))
        self.iterations = 0
        self._variants: dict[tuple, _Variant] = {}
        self._current: _Variant | None = None
        #: The other ranks when this model runs on a simulated cluster (see :mod:`.cluster`).
        self.cluster: RankGroup | None = None
        #: The interconnect its collectives use (a cluster's has its size per server and slow links).
        self.links = runtime.preset.links
        try:
            defaults = self.default_input_shapes() if self.dynamic else {}
            if defaults is not None:  # a dynamic graph without default shapes is built at its first inputs
                self._current = self._variant(defaults)
                self._sync_epoch()  # plans its memory: a model that does not fit fails to load
        except Exception:
            self._unload()
            raise

    # ---------------------------------------------------------------- shapes
    @property
    def input_nodes(self) -> list:
        return [n for n in self.graph.nodes if n.type == "Data"]

    def default_input_shapes(self) -> dict[str, tuple[int, ...]] | None:
        """Shapes ``run_graph()`` uses without inputs: the Data shapes, or their ``default_shape``
        (``None`` if an input has unknown dims and no default)."""
        shapes = {}
        for n in self.input_nodes:
            shape = n.outputs[0].shape
            if n.outputs[0].is_dynamic:
                default = n.attrs.get("default_shape")
                if default is None:
                    return None
                shape = tuple(default)
            shapes[n.name] = shape
        return shapes

    def _missing_inputs_error(self) -> GraphBuildError:
        unknown = [n for n in self.input_nodes if n.outputs[0].is_dynamic and "default_shape" not in n.attrs]
        n = unknown[0]
        return GraphBuildError(f"graph {self.graph.name!r}: input {n.name!r} has unknown dims "
                               f"{list(n.outputs[0].shape)} and no default_shape; pass inputs to run_graph")

    def _variant(self, input_shapes: dict[str, tuple[int, ...]]) -> _Variant:
        key = tuple(sorted(input_shapes.items())) if self.dynamic else ()
        variant = self._variants.get(key)
        if variant is None:
            graph = concretize(self.graph, input_shapes) if self.dynamic else self.graph
            compute, hccl = self.streams
            variant = _Variant(CompiledModel(graph, self.runtime.cost_model, compute, hccl,
                                             input_copies=not self.single_op,
                                             describe=bool(GlobalProfilingWrapper.enable_flags & BIT_TASK_TIME)))
            self._variants[key] = variant
        return variant

    def select(self, input_shapes: dict[str, tuple[int, ...]] | None) -> None:
        """Use the build for these input shapes (dynamic graphs; InferShape runs once per shape set)."""
        if self.dynamic:
            shapes = input_shapes or self.default_input_shapes()
            if shapes is None:
                raise self._missing_inputs_error()
            variant = self._variant(shapes)
            if variant.table is None:  # a new build: its memory is planned before it runs
                previous, self._current = self._current, variant
                try:
                    self._sync_epoch()
                except DeviceMemoryError:
                    self._variants = {k: v for k, v in self._variants.items() if v is not variant}
                    self._current = previous
                    raise
            self._current = variant

    @property
    def _built(self) -> _Variant:
        if self._current is None:
            raise self._missing_inputs_error()
        return self._current

    @property
    def compiled(self) -> CompiledModel:
        return self._built.compiled

    @property
    def notes(self) -> list[str]:
        return self._built.notes

    # ----------------------------------------------------------- task table
    def _sync_epoch(self) -> _Variant:
        """On a new collection: re-place trace tasks for its FP/BP points and draw a new batch of steps."""
        v = self._built
        if v.table_epoch == self.runtime.epoch and v.table is not None:
            return v
        self._flush(v)
        v.table_epoch = self.runtime.epoch
        props = ProfilingProperties.instance()
        points = v.compiled.profiling_points(props.fp_point, props.bp_point)
        if points.key != v.points_key or v.table is None:
            v.points_key = points.key
            v.table = v.compiled.task_table(points)
            v.schedule = StreamSchedule(v.table)
            v.timelines = {}
            # GE plans the static feature-map pool when it loads a model, profiled or not
            v.memory_plan = plan_memory(v.compiled, v.table)
            preset = self.runtime.preset
            check_device_memory(v.memory_plan, v.compiled.graph.name, preset.name, preset.memory_bytes)
        v.batch = None
        v.batch_size = 8
        points.notes += ProfilingTaskUtils.trace_order_notes(v.compiled.graph, points, v.table.logid)
        v.notes = points.notes
        if GlobalProfilingWrapper.enable_flags & BIT_TRAINING_TRACE and not self.single_op:
            for note in points.notes:
                msprof.lib.add_note(f"model {self.model_id} ({self.graph.name}): {note}")
        return v

    @property
    def table(self) -> TaskTable:
        return self._sync_epoch().table

    @property
    def memory_plan(self) -> MemoryPlan:
        """The static feature-map pool of the current build: offsets and lifetimes of its tensors."""
        return self._sync_epoch().memory_plan

    def _next_times(self, v: _Variant, timeline: _HostTimeline | None) -> tuple[StepTimes, int]:
        key = "" if timeline is None else str(timeline.total)
        if v.batch is None or v.batch.next >= len(v.batch.times.end) or v.batch_key != key:
            self._flush(v)
            earliest = None if timeline is None else timeline.earliest
            v.batch = _Batch(v.schedule.steps(v.batch_size, self.runtime.rng, earliest))
            v.batch_key = key
            v.batch_size = min(256, v.batch_size * 2)
        b = v.batch
        b.next += 1
        return b.times, b.next - 1

    # -------------------------------------------------------------- reporting
    def task_info(self, variant: _Variant | None = None) -> LoadedTaskInfo:
        """Static description of every task (of ``variant``, default the current build), for the reporters."""
        v = variant or self._sync_epoch()
        if v.task_info is not None and v.task_info[0] is v.table:
            return v.task_info[1]
        info = v.compiled.op_descs.task_info(v.table, v.compiled.graph.nodes, self.model_id, self.graph_id,
                                             v.compiled.graph.name, self.dynamic)
        v.task_info = (v.table, info)  # a replica (another rank) of this build describes it the same way
        return info

    def _report_static(self, v: _Variant, flags: int) -> None:
        rt = self.runtime
        if v.reported_epoch == rt.epoch:
            return
        v.reported_epoch = rt.epoch
        v.connection_base = CONNECTION_IDS.allocate(len(v.table))
        rt.cann_profiler.on_execute_event(ExecutorEvent.kModelStart, info=self.task_info(v),
                                          connection_base=v.connection_base, pmu_events=rt.pmu_events,
                                          timestamp=clock.now_ns(), with_basic_info=bool(flags & BIT_DEVICE))
        if flags & BIT_MEMORY:
            self._report_memory_plan(v)

    def _report_memory_plan(self, v: _Variant) -> None:
        """The static memory plan, once per collection (the steps' times come from the task log)."""
        if v.memory_plan is None:
            v.memory_plan = plan_memory(v.compiled, v.table)
        plan = v.memory_plan
        msprof.lib.add_note(f"model {self.model_id} ({self.graph.name}): static memory pool "
                            f"{plan.pool_size / 2**20:.1f} MiB for {len(plan)} tensors "
                            f"(reuse {plan.reuse_ratio:.2f}x), weights {plan.weight_bytes / 2**20:.1f} MiB")
        msprof.lib.report_block("static_op_mem", static_op_mem(plan, self.model_id, v.connection_base,
                                                               msprof.lib.get_hash_ids), self.runtime.device_id)

    def _report_steps(self, v: _Variant, flags: int, start: np.ndarray, dur: np.ndarray, cycles: np.ndarray,
                      iterations: np.ndarray) -> None:
        """Device records of ``n`` steps at once (arrays [n, tasks])."""
        t = v.table
        rt = self.runtime
        n = len(iterations)
        if flags & BIT_TASK_TIME:
            self._report_static(v, flags)
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
            rec["connection_id"] = keep + v.connection_base
            rec["iteration"] = iterations[:, None]
            for block in _step_blocks(rec.ravel(), n):
                rt.device_collector.report_tasks(block)
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
        if flags & BIT_MEMORY and not flags & BIT_TASK_TIME and v.reported_epoch != rt.epoch:
            v.reported_epoch = rt.epoch
            msprof.lib.add_note("task_memory needs task_trace on: memory events are timed by the task log, "
                                "so none were recorded")
        switch = ProfilingProperties.instance().switch
        if switch & events.PROF_HCCL_TRACE_MASK:
            self._report_hccl(v, start, dur, iterations)
        if switch & events.PROF_AICPU_TRACE_MASK and flags & BIT_TASK_TIME:
            self._report_aicpu(v, start, dur, iterations)

    def _report_hccl(self, v: _Variant, start: np.ndarray, dur: np.ndarray, iterations: np.ndarray) -> None:
        """The sub-tasks (Notify_Wait, Memcpy, Reduce_Inline, ...) of every collective of the steps."""
        t = v.table
        lib = msprof.lib
        name_ids = {n: lib.get_hash_id(n) for n in HCCL_SUBTASK_NAMES}
        links = self.links
        key = (self.runtime.rank, links)
        laid_out = v.hccl_layouts.get(key)
        if laid_out is None or laid_out[0] is not t:
            tasks = np.flatnonzero(t.rt_type == RtTaskType.HCCL)
            nodes = [v.compiled.graph.nodes[int(t.node[i])] for i in tasks]
            layout = hccl.SubTaskLayout([(node.type, v.compiled.costs[node.id].comm_bytes,
                                          int(node.attrs.get("rank_size", 1)), self.runtime.rank,
                                          int(node.attrs.get("root_rank", 0))) for node in nodes], links)
            laid_out = v.hccl_layouts[key] = (t, tasks, layout)
        _, tasks, layout = laid_out
        if not len(tasks):
            return
        made_for = (layout, v.connection_base, tuple(name_ids.values()))
        if v.hccl_template is None or v.hccl_template[0] != made_for:  # once per collection
            v.hccl_template = (made_for, layout.template(v.connection_base + tasks, name_ids, t.stream[tasks]))
        lib.report_block("hccl_task", layout.records(start[:, tasks], dur[:, tasks], iterations, v.hccl_template[1]),
                         self.runtime.device_id)

    def _report_aicpu(self, v: _Variant, start: np.ndarray, dur: np.ndarray, iterations: np.ndarray) -> None:
        """AI CPU kernel details (compute / memcpy / dispatch split) of the steps."""
        t = v.table
        tasks = np.flatnonzero(t.rt_type == RtTaskType.KERNEL_AICPU)
        if not len(tasks):
            return
        parts = [aicpu_records(start[:, i], v.connection_base + int(i), iterations, dur[:, i],
                               v.compiled.costs[int(t.node[i])].bytes) for i in tasks]
        msprof.lib.report_block("aicpu", np.concatenate(parts), self.runtime.device_id)

    def _report_host(self, v: _Variant, timeline: _HostTimeline, launch_ns: np.ndarray, threads: np.ndarray,
                     flags: int, node_api: bool) -> None:
        """Host records of node-by-node launches of ``n`` steps (``launch_ns``, ``threads`` [n]: when and by
        which thread each was launched): GE host events, node-level and runtime API records."""
        t = v.table
        n = len(launch_ns)
        names = [v.compiled.graph.nodes[int(t.node[i])].name for i in timeline.tasks]
        starts = launch_ns[:, None, None] + timeline.phase_start[None]  # [n, launches, phases]
        durs = np.broadcast_to(timeline.phase_dur, starts.shape)
        kernel = np.isin(t.rt_type[timeline.tasks], _KERNEL_TYPES)
        if flags & BIT_GE_HOST:
            steps, rows, cols = np.nonzero(durs > 0)
            events_ = np.where(kernel[rows], np.asarray(_HOST_PHASES, np.int64)[cols], int(ProfilingEvent.kCopyH2D))
            HOST_PROFILERS[timeline.executor].record_many(names, rows, events_, starts[steps, rows, cols],
                                                          starts[steps, rows, cols] + durs[steps, rows, cols],
                                                          threads[steps])
        launch_begin = starts[:, :, 4]
        launch_end = launch_begin + durs[:, :, 4]
        if node_api and flags & (BIT_TASK_TIME | BIT_CANN_HOST):
            hashes = np.asarray([msprof.lib.get_hash_id(nm) for nm in names], np.uint64)
        if node_api and flags & BIT_TASK_TIME:
            types = np.asarray([int(_LAUNCH_TYPE.get(RtTaskType(int(t.rt_type[i])), LaunchType.LaunchKernelWithHandle))
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

    def _flush(self, v: _Variant) -> None:
        """Report the steps of ``v`` that ran since the last report."""
        with self.runtime.report_lock:
            self._report_pending(v)

    def _report_pending(self, v: _Variant) -> None:
        p = v.pending
        if p is None:
            return
        v.pending = None
        times = v.batch.times
        ks = np.asarray(p.k)
        # the steps of a batch run in order: their rows are a slice (views, not copies of the grids)
        rows = slice(p.k[0], p.k[-1] + 1) if p.k[-1] - p.k[0] == len(p.k) - 1 else ks
        start = np.asarray(p.t0, np.int64)[:, None] + times.start[rows]
        iterations = np.asarray(p.iteration, np.int64)
        with msprof.lib.reporting_batch():  # a chunk written meanwhile waits for the batch's every kind
            self._report_steps(v, p.flags, start, times.dur[rows], times.block_cycles[rows], iterations)
            if self.cluster is not None:
                self.cluster.report(v, p, ks, np.asarray(p.t0, np.int64), iterations)
            if p.timeline is not None:
                self._report_host(v, p.timeline, np.asarray(p.t0, np.int64) - LAUNCH_LATENCY_NS,
                                  np.asarray(p.thread, np.int64), p.flags, p.node_api)

    def flush(self) -> None:
        """Report every step run while profiling was on (msprof gets device logs batch by batch)."""
        for v in self._variants.values():
            self._flush(v)
        self.runtime.pending_models.discard(self)

    def replica(self, runtime: DeviceRuntime) -> "LoadedModel":
        """This model as another rank loads it on ``runtime``: the same builds (shared, read-only),
        its own reporting state.  Only reports: the steps' times come from the :class:`RankGroup`."""
        twin = object.__new__(LoadedModel)
        twin.runtime, twin.graph, twin.graph_id = runtime, self.graph, self.graph_id
        twin.single_op, twin.dynamic, twin.model_id, twin.streams = False, False, self.model_id, self.streams
        twin._unload = weakref.finalize(twin, lambda: None)
        twin.iterations, twin.cluster, twin.links = 0, None, self.links
        twin._variants, twin._current = {}, None
        return twin

    def replica_variant(self, v: _Variant) -> _Variant:
        """The replica's view of rank 0's build ``v`` (same task table and memory plan)."""
        twin = self._variants.get(id(v))
        if twin is None or twin.table is not v.table:
            twin = self._variants[id(v)] = _Variant(v.compiled)
            twin.table, twin.points_key, twin.memory_plan = v.table, v.points_key, v.memory_plan
            twin.task_info = v.task_info
            twin.table_epoch = self.runtime.epoch
        return twin

    def unload(self) -> None:
        """Report what is pending, then free the model's ids (also happens at garbage collection)."""
        self.flush()
        self._unload()

    # -------------------------------------------------------------- execution
    def _place_on_busy_device(self, v: _Variant, times: StepTimes, k: int, timeline: _HostTimeline,
                              busy: int) -> None:
        """Lay out step ``k`` of the batch again for a device busy ``busy`` ns into the step: a task
        starts after its launch and after that (a device free at ``busy`` is, task for task, the
        same as every launch done no earlier than ``busy``).  The step gets its own jitter draw."""
        late = v.schedule.steps(1, self.runtime.rng, np.maximum(timeline.earliest, busy))
        times.start[k], times.dur[k] = late.start[0], late.dur[0]
        times.block_cycles[k], times.end[k] = late.block_cycles[0], late.end[0]

    def run_on_device(self, launch_ns: int, host_costs: NodeHostCosts | None = None, node_api: bool = False) -> int:
        """Execute one step launched at host time ``launch_ns``; returns when the device finished.

        ``host_costs`` (dynamic graphs) makes the host launch node by node from
        ``launch_ns`` on; the host then spends that work before the step ends.  A
        task list launched as a whole starts when the device is free; a node-by-node
        launch's tasks each start once their launch is done and the device is free.
        """
        rt = self.runtime
        flags = GlobalProfilingWrapper.enable_flags
        v = self._sync_epoch()
        timeline = None
        if host_costs is not None:
            timeline = v.timelines.get(host_costs.executor)
            if timeline is None:
                timeline = v.timelines[host_costs.executor] = host_timeline(v.table, host_costs)
        t0 = launch_ns + LAUNCH_LATENCY_NS  # the step's times count from here
        if timeline is None:
            t0 = max(t0, rt.free_at)
        if self.cluster is not None:
            times, k = self.cluster.next_times(v, t0)
        else:
            times, k = self._next_times(v, timeline)
        if timeline is not None and rt.free_at > t0:
            self._place_on_busy_device(v, times, k, timeline, rt.free_at - t0)
        end = t0 + int(times.end[k])
        rt.free_at = end
        self.iterations += 1
        if flags or ProfilingProperties.instance().switch:
            with rt.report_lock:
                if GlobalProfilingWrapper.enable_flags or ProfilingProperties.instance().switch:  # no STOP came
                    self._queue_step(v, flags, node_api, timeline, k, t0)
        if timeline is not None:
            clock.spend(timeline.total)
        return end

    def _queue_step(self, v: _Variant, flags: int, node_api: bool, timeline: _HostTimeline | None, k: int,
                    t0: int) -> None:
        """Queue step ``k`` of the batch (launched at ``t0``) for the next report (caller holds the report lock)."""
        p = v.pending
        if p is None or p.flags != flags or p.node_api != node_api or p.timeline is not timeline:
            self._report_pending(v)
            p = v.pending = _Pending(flags, node_api, timeline)
        p.k.append(k)
        p.t0.append(t0)
        p.iteration.append(self.iterations)
        p.thread.append(native_thread_id())
        self.runtime.pending_models.add(self)


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


def report_runtime_api(model: LoadedModel, begin: int, launched: int, end: int) -> None:
    """Runtime API records of one run (``runtime_api`` on): the model launch and the stream sync."""
    if not ProfilingProperties.instance().switch & events.PROF_RUNTIME_API_MASK:
        return
    types = [int(RuntimeApiType.rtStreamSynchronize)]
    begins, ends = [launched], [end]
    if not model.dynamic:
        types.insert(0, int(RuntimeApiType.rtModelExecute))
        begins.insert(0, begin)
        ends.insert(0, launched)
    report_api_block(ReportLevel.RUNTIME, types, np.asarray(begins), np.asarray(ends), [model.model_id] * len(types))
