"""The simulated device at run time, and models loaded on it.

:class:`DeviceRuntime` owns the device's clock-domain state (when it is next
free), its jitter generator, and how profiling is programmed on it (which PMU
events).  GE's msprof control callback lands here: a START reseeds the device
(so virtual-clock runs repeat exactly) and programs the PMU; a STOP turns
reporting off.

:class:`LoadedModel` is a compiled model with ids, executing step after step:
its builds (:mod:`.builds`) hold the task table and the step times drawn a
batch ahead; the steps run while profiling is on are queued and handed to its
:class:`~.step_report.StepReporter` a batch at a time.  A simulated cluster
(:mod:`.cluster`) is the model's :class:`OtherRanks`.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
import weakref
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ..prof import events, msprof
from ..prof.api_types import RuntimeApiType, type_names
from ..prof.clock import clock
from ..prof.collectors import CannProfilerV2, DeviceCollector, report_api_block
from ..prof.host_profiler import MODEL_EXECUTE, global_profiler, rt2_profiler
from ..prof.msprof import CommandHandle, CommandType
from ..prof.options import ProfilingOptions
from ..prof.properties import BIT_TASK_TIME, BIT_TRAINING_TRACE, GlobalProfilingWrapper, ProfilingProperties
from ..prof.rawdata import SINGLE_OP_MODEL_ID, ReportLevel
from ..prof.threads import native_thread_id
from .builds import ModelBuild, ModelBuilds, PendingSteps
from .compiler import CompiledModel, TaskTable, hccl_stream_keys
from .device import CostModel, DevicePreset, device_links
from .graph import Graph
from .host_launch import HostTimeline, NodeHostCosts, host_timeline
from .memory import DeviceMemoryError, MemoryPlan
from .schedule import StepTimes
from .step_report import StepReporter
from .tensor import GraphBuildError

if TYPE_CHECKING:
    from .hccl import Links
    from .rank_programs import CommGroups

#: Host launch to device start of a model's first task.
LAUNCH_LATENCY_NS = 12_000
#: Device end to the host seeing the synchronous RunGraph return.
SYNC_LATENCY_NS = 5_000
#: Set (to anything) to have GE's host profiler on and dumped to stdout, as in GE.
GE_PROFILING_TO_STD_OUT = "GE_PROFILING_TO_STD_OUT"
#: The run note of ``"l2": "on"`` (kProfL2cache): the switch is accepted, as GE accepts it, but samples nothing.
L2_NOTE = ("l2 (L2 cache sampling, kProfL2cache) is not simulated: nothing is recorded for it (an ascend_pt export has "
           "no l2_cache.csv); for L2 hit/miss counts per op use aic_metrics L2Cache on an A2-class chip (Ascend910B)")
DEFAULT_SEED = 0


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
        family = self.preset.chip_family
        why = ""
        if aic_metrics.startswith("Custom:"):
            why = "Custom event groups are not simulated"
        elif events.lacks_counter_group(aic_metrics, family):  # a run started before this device existed
            why = (f"{self.preset.name} has no such counter group (it has: "  # (a %%geprof cell, the C API)
                   f"{', '.join(events.aic_metrics_on(family))})")
        if why:
            text = f"aic_metrics {aic_metrics!r}: {why}; no AI Core PMU data is collected"
            warnings.warn(text, stacklevel=2)
            msprof.lib.add_note(text)
            return
        self.pmu_events = {core: list(names) for core, names in events.PMU_EVENTS[aic_metrics][family].items()}
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


class OtherRanks(Protocol):
    """The other ranks of a model on a simulated cluster (:class:`~.cluster.RankGroup`): they draw every
    rank's step times, and report the steps rank 0 reports, each to its own run."""

    def next_times(self, build: ModelBuild, t0: int) -> tuple[StepTimes, int]:
        """Times of the next step (launched at ``t0``) on every rank: rank 0's batch and the step's index in it."""

    def report(self, build: ModelBuild, pending: PendingSteps, ks: np.ndarray, t0: np.ndarray,
               iterations: np.ndarray) -> None:
        """Report the ``pending`` steps (``ks`` in the batch) of every rank but 0."""


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
            self.streams = tuple(runtime.allocate_streams(1 + len(hccl_stream_keys(graph))))
            self._unload = weakref.finalize(self, runtime.release_streams, list(self.streams))
        self.iterations = 0
        self.builds = ModelBuilds(graph, runtime.cost_model, self.streams, single_op)
        #: What reports its steps as this device records them.
        self.reporter = StepReporter(runtime, self.model_id, graph_id, graph.name, single_op, self.dynamic,
                                     device_links(runtime.preset))
        #: The other ranks when this model runs on a simulated cluster (see :meth:`run_on_ranks`).
        self.cluster: OtherRanks | None = None
        if graph.job is not None:  # one rank of a parallel job's step (a cluster says which one)
            self.reporter.parallel_info = graph.job.rank_info(0, device_links(runtime.preset).ranks_per_node)
        try:
            defaults = self.default_input_shapes() if self.dynamic else {}
            if defaults is not None:  # a dynamic graph without default shapes is built at its first inputs
                self.builds.current = self._build_for(defaults)
                self._sync_epoch()  # plans its memory: a model that does not fit fails to load
        except Exception:
            self._unload()
            raise

    def run_on_ranks(self, ranks: OtherRanks, links: Links, comm: CommGroups) -> None:
        """Run every step on the other ranks of a simulated cluster too, its collectives over ``links``
        (the cluster's interconnect: its size per server and slow links) in the groups of ``comm``."""
        self.cluster = ranks
        self.reporter.links = links
        self.reporter.comm = comm

    # ---------------------------------------------------------------- shapes
    @property
    def input_nodes(self) -> list:
        return self.builds.input_nodes

    def default_input_shapes(self) -> dict[str, tuple[int, ...]] | None:
        """Shapes ``run_graph()`` uses without inputs: the Data shapes, or their ``default_shape``
        (``None`` if an input has unknown dims and no default)."""
        return self.builds.default_input_shapes()

    def _build_for(self, input_shapes: dict[str, tuple[int, ...]]) -> ModelBuild:
        return self.builds.for_shapes(input_shapes, describe=bool(GlobalProfilingWrapper.enable_flags & BIT_TASK_TIME))

    def select(self, input_shapes: dict[str, tuple[int, ...]] | None) -> None:
        """Use the build for these input shapes (dynamic graphs; InferShape runs once per shape set)."""
        if self.dynamic:
            shapes = input_shapes or self.default_input_shapes()
            if shapes is None:
                raise self.builds.missing_inputs_error()
            build = self._build_for(shapes)
            if build.table is None:  # a new build: its memory is planned before it runs
                previous, self.builds.current = self.builds.current, build
                try:
                    self._sync_epoch()
                except DeviceMemoryError:
                    self.builds.discard(build)
                    self.builds.current = previous
                    raise
            self.builds.current = build

    @property
    def compiled(self) -> CompiledModel:
        return self.builds.built.compiled

    @property
    def notes(self) -> list[str]:
        return self.builds.built.notes

    # ----------------------------------------------------------- task table
    def _sync_epoch(self) -> ModelBuild:
        """On a new collection: re-place trace tasks for its FP/BP points and draw a new batch of steps."""
        v = self.builds.built
        if v.table_epoch == self.runtime.epoch and v.table is not None:
            return v
        self.flush_build(v)
        v.table_epoch = self.runtime.epoch
        props = ProfilingProperties.instance()
        v.place_trace_tasks(props.fp_point, props.bp_point, self.runtime.preset)
        if GlobalProfilingWrapper.enable_flags & BIT_TRAINING_TRACE and not self.single_op:
            msprof.lib.describe_model(self.model_id, self.graph.name, getattr(self.graph, "is_training", False),
                                      getattr(self.graph, "inference_phase", None))
            for note in v.notes:
                msprof.lib.add_note(f"model {self.model_id} ({self.graph.name}): {note}")
        return v

    @property
    def table(self) -> TaskTable:
        return self._sync_epoch().table

    @property
    def memory_plan(self) -> MemoryPlan:
        """The static feature-map pool of the current build: offsets and lifetimes of its tensors."""
        return self._sync_epoch().memory_plan

    # -------------------------------------------------------------- reporting
    def flush_build(self, build: ModelBuild) -> None:
        """Report the steps of ``build`` that ran since the last report (before its batch of times is
        replaced: the pending steps' times are in it)."""
        with self.runtime.report_lock:
            self._report_pending(build)

    def _report_pending(self, v: ModelBuild) -> None:
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
            self.reporter.report_steps(v, p.flags, start, times.dur[rows], times.block_cycles[rows], iterations)
            if self.cluster is not None:
                self.cluster.report(v, p, ks, np.asarray(p.t0, np.int64), iterations)
            if p.timeline is not None:
                self.reporter.report_host(v, p.timeline, np.asarray(p.t0, np.int64) - LAUNCH_LATENCY_NS,
                                          np.asarray(p.thread, np.int64), p.flags, p.node_api)

    def flush(self) -> None:
        """Report every step run while profiling was on (msprof gets device logs batch by batch)."""
        for v in self.builds:
            self.flush_build(v)
        self.runtime.pending_models.discard(self)

    def unload(self) -> None:
        """Report what is pending, then free the model's ids (also happens at garbage collection)."""
        self.flush()
        self._unload()

    # -------------------------------------------------------------- execution
    def _next_times(self, v: ModelBuild, timeline: HostTimeline | None) -> tuple[StepTimes, int]:
        if v.needs_batch(timeline):
            self.flush_build(v)
            v.draw_batch(self.runtime.rng, timeline)
        return v.batch.take()

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
            v.place_on_busy_device(times, k, rt.rng, timeline, rt.free_at - t0)
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

    def _queue_step(self, v: ModelBuild, flags: int, node_api: bool, timeline: HostTimeline | None, k: int,
                    t0: int) -> None:
        """Queue step ``k`` of the batch (launched at ``t0``) for the next report (caller holds the report lock)."""
        p = v.pending
        if p is None or p.flags != flags or p.node_api != node_api or p.timeline is not timeline:
            self._report_pending(v)
            p = v.pending = PendingSteps(flags, node_api, timeline)
        p.k.append(k)
        p.t0.append(t0)
        p.iteration.append(self.iterations)
        p.thread.append(native_thread_id())
        self.runtime.pending_models.add(self)


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
