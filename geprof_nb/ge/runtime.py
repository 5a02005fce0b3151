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

import threading
import warnings
import weakref
from dataclasses import dataclass

import numpy as np

from ..prof import events, msprof, rawdata
from ..prof.clock import clock
from ..prof.collectors import CannProfilerV2, DeviceCollector, LoadedTaskInfo
from ..prof.msprof import CommandHandle, CommandType
from ..prof.options import ProfilingOptions
from ..prof.properties import (BIT_DEVICE, BIT_TASK_TIME, BIT_TRAINING_TRACE, GlobalProfilingWrapper,
                               ProfilingProperties)
from ..prof.rawdata import RtTaskType
from .compiler import CompiledModel, TaskTable
from .device import CostModel, DevicePreset
from .graph import Graph
from .schedule import StepTimes, StreamSchedule

#: Host launch to device start of a model's first task.
LAUNCH_LATENCY_NS = 12_000
#: Device end to the host seeing the synchronous RunGraph return.
SYNC_LATENCY_NS = 5_000
DEFAULT_SEED = 0


class DeviceRuntime:
    """One simulated device: availability, jitter, profiling programming."""

    def __init__(self, preset: DevicePreset, device_id: int = 0, seed: int = DEFAULT_SEED) -> None:
        self.preset = preset
        self.device_id = device_id
        self.cost_model = CostModel(preset)
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.free_at = 0
        self.epoch = 0  # bumped by every START; models re-report static info per epoch
        self.next_connection_id = 0  # unique within a run directory
        self._run_serial = -1
        self.pmu_events: dict[str, list[str]] = {}
        self._live_streams: set[int] = set()
        self._live_models: set[int] = set()
        self._lock = threading.Lock()
        self.device_collector = DeviceCollector(device_id)
        self.cann_profiler = CannProfilerV2(device_id)

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

    def allocate_model_id(self) -> int:
        """Model ids are unique among loaded models, lowest free first (so repeated runs match)."""
        with self._lock:
            return self._lowest_free(self._live_models, 1)

    def release(self, model_id: int, streams: list[int]) -> None:
        """A model was unloaded: its ids become free."""
        with self._lock:
            self._live_models.discard(model_id)
            self._live_streams.difference_update(streams)

    def allocate_connection_ids(self, n: int) -> int:
        with self._lock:
            base = self.next_connection_id
            self.next_connection_id += n
            return base

    # -------------------------------------------------------------- control
    def handle_command(self, handle: CommandHandle) -> int:
        """GE's ``ProfCtrlHandle``: start or stop the layers msprof asks for."""
        props = ProfilingProperties.instance()
        if handle.type == CommandType.START:
            options = ProfilingOptions.parse(handle.options) if handle.options else ProfilingOptions()
            props.start(options, handle.prof_switch)
            with self._lock:
                self.epoch += 1
                if msprof.lib.run_serial != self._run_serial:
                    self._run_serial = msprof.lib.run_serial
                    self.next_connection_id = 0
                self.rng = np.random.default_rng(self.seed)
                self.free_at = 0
            self._program_pmu(props.aic_metrics)
            msprof.lib.set_device_info(self.device_id, self.preset.info())
        elif handle.type in (CommandType.STOP, CommandType.FINALIZE):
            props.stop()
            self.pmu_events = {}
        return msprof.MSPROF_ERROR_NONE

    def _program_pmu(self, aic_metrics: str) -> None:
        self.pmu_events = {}
        if not aic_metrics:
            return
        group = events.PMU_EVENTS.get(aic_metrics, {}).get(self.preset.chip_family)
        if group is None:
            warnings.warn(f"aic_metrics {aic_metrics!r} is not simulated on {self.preset.name}; "
                          "no AI Core PMU data is collected", stacklevel=2)
            return
        self.pmu_events = {core: list(names) for core, names in group.items()}
        for core, names in self.pmu_events.items():
            msprof.lib.set_pmu_events(core, names)
        msprof.lib.set_pmu_events("metrics", [aic_metrics])


@dataclass
class _Batch:
    times: StepTimes
    next: int = 0


class LoadedModel:
    """A compiled model on a device, with its model id and streams."""

    def __init__(self, runtime: DeviceRuntime, graph: Graph, graph_id: int) -> None:
        self.runtime = runtime
        self.graph = graph
        self.graph_id = graph_id
        self.model_id = runtime.allocate_model_id()
        compute, hccl = streams = runtime.allocate_streams(2)
        self._unload = weakref.finalize(self, runtime.release, self.model_id, streams)
        try:
            self.compiled = CompiledModel(graph, runtime.cost_model, compute, hccl)
        except Exception:
            self._unload()
            raise
        self.iterations = 0
        self._points_key: tuple | None = None
        self._table_epoch = -1
        self._table: TaskTable | None = None
        self._schedule: StreamSchedule | None = None
        self._batch: _Batch | None = None
        self._batch_size = 8
        self._epoch = -1  # epoch whose static info was reported
        self._connection_base = 0
        self.notes: list[str] = []

    # ----------------------------------------------------------- task table
    def _sync_epoch(self) -> None:
        """On a new collection: re-place trace tasks for its FP/BP points, restart the jitter stream."""
        if self._table_epoch == self.runtime.epoch and self._table is not None:
            return
        self._table_epoch = self.runtime.epoch
        props = ProfilingProperties.instance()
        points = self.compiled.profiling_points(props.fp_point, props.bp_point)
        if points.key != self._points_key or self._table is None:
            self._points_key = points.key
            self._table = self.compiled.task_table(points)
            self._schedule = StreamSchedule(self._table)
        self._batch = None
        self._batch_size = 8
        self.notes = points.notes

    @property
    def table(self) -> TaskTable:
        self._sync_epoch()
        return self._table

    def _next_times(self) -> tuple[StepTimes, int]:
        if self._batch is None or self._batch.next >= len(self._batch.times.end):
            self._batch = _Batch(self._schedule.steps(self._batch_size, self.runtime.rng))
            self._batch_size = min(256, self._batch_size * 2)
        b = self._batch
        b.next += 1
        return b.times, b.next - 1

    # -------------------------------------------------------------- reporting
    def task_info(self) -> LoadedTaskInfo:
        """Static description of every task, for the profiling reporters."""
        t = self.table
        g = self.graph
        names, types, ge_types, blocks, tensors, pmu, flags = [], [], [], [], [], [], []
        for i, kernel in enumerate(t.kernels):
            if kernel is None:
                names.append("")
                types.append("")
                ge_types.append(rawdata.GeTaskType.INVALID)
                blocks.append(0)
                tensors.append([])
                pmu.append(("", {}))
                flags.append(rawdata.OpFlag.STATIC)
                continue
            node = g.nodes[int(t.node[i])]
            names.append(node.name)
            types.append(node.type)
            ge_types.append(kernel.ge_task_type)
            blocks.append(kernel.block_dim)
            tensors.append([(ti.kind, ti.format, ti.data_type, ti.shape) for ti in self.compiled.task_tensors(node)])
            pmu.append((kernel.pmu_core, kernel.counters))
            hf32 = node.engine == "AI_CORE" and node.inputs and node.inputs[0].dtype == "float32"
            flags.append(rawdata.OpFlag.HF32_ELIGIBLE if hf32 else rawdata.OpFlag.STATIC)
        return LoadedTaskInfo(self.model_id, self.graph_id, g.name, t.stream, t.task_id, t.rt_type,
                              names, types, [int(x) for x in ge_types], blocks, tensors, pmu,
                              [int(f) for f in flags])

    def _report_static(self, flags: int) -> None:
        rt = self.runtime
        if self._epoch == rt.epoch:
            return
        self._epoch = rt.epoch
        self._connection_base = rt.allocate_connection_ids(len(self.table))
        rt.cann_profiler.report_model_load(self.task_info(), self._connection_base, rt.pmu_events,
                                           clock.now_ns(), with_basic_info=bool(flags & BIT_DEVICE))

    def _report_step(self, flags: int, start: np.ndarray, dur: np.ndarray, cycles: np.ndarray) -> None:
        t = self.table
        rt = self.runtime
        if flags & BIT_TASK_TIME:
            self._report_static(flags)
            keep = t.rt_type != RtTaskType.PROFILER_TRACE
            rec = np.zeros(int(keep.sum()), rawdata.HWTS_DTYPE)
            rec["start"] = start[keep]
            rec["dur"] = dur[keep]
            rec["connection_id"] = np.flatnonzero(keep) + self._connection_base
            rec["iteration"] = self.iterations
            if rt.pmu_events:
                rec["block_cycles"] = np.minimum(cycles[keep], np.iinfo(np.uint32).max)
            rt.device_collector.report_tasks(rec)
        if flags & (BIT_TASK_TIME | BIT_TRAINING_TRACE):
            traces = np.flatnonzero(t.logid >= 0) if flags & BIT_TRAINING_TRACE else np.empty(0, np.int64)
            rec = np.zeros(len(traces) + 2, rawdata.STEP_TRACE_DTYPE)
            rec["model_id"] = self.model_id
            rec["index_id"] = self.iterations
            rec["timestamp"][0] = start.min()
            rec["tag_id"][0] = rawdata.MODEL_START_TAG
            rec["timestamp"][1:-1] = start[traces]
            rec["tag_id"][1:-1] = t.logid[traces]
            rec["stream_id"][1:-1] = t.stream[traces]
            rec["task_id"][1:-1] = t.task_id[traces]
            rec["timestamp"][-1] = (start + dur).max()
            rec["tag_id"][-1] = rawdata.MODEL_END_TAG
            rt.device_collector.report_step_trace(rec)

    def unload(self) -> None:
        """Free the model's ids (also happens when the model is garbage collected)."""
        self._unload()

    # -------------------------------------------------------------- execution
    def run_on_device(self, launch_ns: int) -> int:
        """Execute one step launched at host time ``launch_ns``; returns when the device finished."""
        rt = self.runtime
        flags = GlobalProfilingWrapper.enable_flags
        self._sync_epoch()
        times, k = self._next_times()
        t0 = max(launch_ns + LAUNCH_LATENCY_NS, rt.free_at)
        end = t0 + int(times.end[k])
        rt.free_at = end
        self.iterations += 1
        if flags:
            self._report_step(flags, t0 + times.start[k], times.dur[k], times.block_cycles[k])
        return end
