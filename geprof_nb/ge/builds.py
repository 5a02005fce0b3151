"""A loaded model's builds, and the steps each has run: the state the runtime and a simulated cluster share.

A static graph has one build; a dynamic-shape graph one per distinct set of input shapes (InferShape
runs once per set), made when those shapes first run.  A build holds its task table (with the trace
tasks placed for the collection's FP/BP points), the schedule that replays it, its memory plan, the
batch of step times drawn ahead (:class:`StepBatch`) and the steps run but not reported yet
(:class:`PendingSteps`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from ..prof.collectors import LoadedTaskInfo
from ..prof.task_utils import ProfilingTaskUtils
from . import what_if
from .compiler import CompiledModel, TaskTable
from .device import CostModel, DevicePreset
from .graph import Graph
from .host_launch import HostTimeline
from .memory import MemoryPlan, check_device_memory, plan_memory
from .schedule import StepTimes, StreamSchedule
from .serialize import concretize
from .tensor import GraphBuildError

#: Steps of a build's first batch; each new batch doubles it, up to :data:`MAX_BATCH_STEPS`.
FIRST_BATCH_STEPS = 8
MAX_BATCH_STEPS = 256


@dataclass
class StepBatch:
    """Step times drawn ahead for a build, and the next one to use."""

    times: StepTimes
    next: int = 0

    def take(self) -> tuple[StepTimes, int]:
        """The batch's times and the index of the step taken."""
        self.next += 1
        return self.times, self.next - 1


@dataclass
class PendingSteps:
    """Steps of the current batch run while profiling was on, not reported yet.

    The device's logs reach msprof batch by batch (as HWTS logs are DMA'd in
    blocks), so reporting costs a few array operations per batch of steps.
    """

    flags: int
    node_api: bool
    timeline: HostTimeline | None
    k: list[int] = field(default_factory=list)  # step index in the batch
    t0: list[int] = field(default_factory=list)  # device start of the step
    iteration: list[int] = field(default_factory=list)
    thread: list[int] = field(default_factory=list)  # the host thread that ran the step (its records name it)


class ModelBuild:
    """One concrete-shape build of a model (a static model has exactly one)."""

    def __init__(self, compiled: CompiledModel) -> None:
        self.compiled = compiled
        self.points_key: tuple | None = None
        self.table_epoch = -1
        self.table: TaskTable | None = None
        self.schedule: StreamSchedule | None = None
        self.batch: StepBatch | None = None
        self.batch_key: str = ""
        self.batch_size = FIRST_BATCH_STEPS
        self.timelines: dict[str, HostTimeline] = {}
        self.memory_plan: MemoryPlan | None = None  # the static pool of the current table, planned at load
        self.pending: PendingSteps | None = None
        self.notes: list[str] = []
        #: (the table it describes, the description): every rank's reporter describes this build the same way.
        self.task_info: tuple[TaskTable, LoadedTaskInfo] | None = None

    def place_trace_tasks(self, fp_point: str, bp_point: str, preset: DevicePreset) -> None:
        """For a new collection: the task table with the trace tasks where ``fp_point`` / ``bp_point``
        put them (made again only if they moved), its memory planned and checked against the device's,
        and a new batch of steps to be drawn."""
        points = self.compiled.profiling_points(fp_point, bp_point)
        if points.key != self.points_key or self.table is None:
            self.points_key = points.key
            self.table = self.compiled.task_table(points)
            self.timelines = {}
            # GE plans the static feature-map pool when it loads a model, profiled or not
            self.memory_plan = plan_memory(self.compiled, self.table)
            check_device_memory(self.memory_plan, self.compiled.graph.name, preset.name, preset.memory_bytes)
        # the what-if change in force when the collection starts (none: the durations as drawn)
        change = what_if.active()
        self.schedule = StreamSchedule(self.table, change.task_scale(self.table, self.compiled.graph),
                                       change.host_gap_ns)
        self.batch = None
        self.batch_size = FIRST_BATCH_STEPS
        points.notes += ProfilingTaskUtils.trace_order_notes(self.compiled.graph, points, self.table.logid)
        self.notes = points.notes

    @staticmethod
    def _launch_key(timeline: HostTimeline | None) -> str:
        """How the host launches a batch's steps: as a whole (""), or node by node taking this long."""
        return "" if timeline is None else str(timeline.total)

    def needs_batch(self, timeline: HostTimeline | None) -> bool:
        """The next step needs times drawn anew: none are left, or the host launches it another way."""
        b = self.batch
        return b is None or b.next >= len(b.times.end) or self.batch_key != self._launch_key(timeline)

    def draw_batch(self, rng: np.random.Generator, timeline: HostTimeline | None) -> None:
        """Draw the times of the next batch of steps (each batch twice as long as the one before, up to
        :data:`MAX_BATCH_STEPS`); the pending steps of the last one must be reported first."""
        earliest = None if timeline is None else timeline.earliest
        self.batch = StepBatch(self.schedule.steps(self.batch_size, rng, earliest))
        self.batch_key = self._launch_key(timeline)
        self.batch_size = min(MAX_BATCH_STEPS, self.batch_size * 2)

    def place_on_busy_device(self, times: StepTimes, k: int, rng: np.random.Generator, timeline: HostTimeline,
                             busy: int) -> None:
        """Lay out step ``k`` of the batch again for a device busy ``busy`` ns into the step: a task
        starts after its launch and after that (a device free at ``busy`` is, task for task, the
        same as every launch done no earlier than ``busy``).  The step gets its own jitter draw."""
        late = self.schedule.steps(1, rng, timeline.earliest, busy)
        times.start[k], times.dur[k] = late.start[0], late.dur[0]
        times.block_cycles[k], times.end[k] = late.block_cycles[0], late.end[0]


class ModelBuilds:
    """The builds of one graph, one per distinct set of input shapes, and the one in use."""

    def __init__(self, graph: Graph, cost_model: CostModel, streams: tuple[int, ...], single_op: bool) -> None:
        """``streams``: the compute stream, then one per HCCL stream of the graph (or one for all)."""
        self.graph = graph
        self.cost_model = cost_model
        self.streams = streams
        self.single_op = single_op
        self.dynamic = graph.is_dynamic
        self._builds: dict[tuple, ModelBuild] = {}
        #: The build the next step runs (``None``: a dynamic graph without default shapes, before its first inputs).
        self.current: ModelBuild | None = None

    def __len__(self) -> int:
        return len(self._builds)

    def __iter__(self) -> Iterator[ModelBuild]:
        return iter(self._builds.values())

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

    def missing_inputs_error(self) -> GraphBuildError:
        unknown = [n for n in self.input_nodes if n.outputs[0].is_dynamic and "default_shape" not in n.attrs]
        n = unknown[0]
        return GraphBuildError(f"graph {self.graph.name!r}: input {n.name!r} has unknown dims "
                               f"{list(n.outputs[0].shape)} and no default_shape; pass inputs to run_graph")

    def for_shapes(self, input_shapes: dict[str, tuple[int, ...]], describe: bool) -> ModelBuild:
        """The build for these input shapes, compiled now if it is new (``describe``: with the task
        descriptions the task layer reports)."""
        key = tuple(sorted(input_shapes.items())) if self.dynamic else ()
        build = self._builds.get(key)
        if build is None:
            graph = concretize(self.graph, input_shapes) if self.dynamic else self.graph
            compute, *hccl = self.streams
            build = ModelBuild(CompiledModel(graph, self.cost_model, compute, hccl, input_copies=not self.single_op,
                                             describe=describe))
            self._builds[key] = build
        return build

    def discard(self, build: ModelBuild) -> None:
        """Forget ``build`` (its memory did not fit the device)."""
        self._builds = {k: b for k, b in self._builds.items() if b is not build}

    @property
    def built(self) -> ModelBuild:
        """The build in use; the missing-inputs error if there is none yet."""
        if self.current is None:
            raise self.missing_inputs_error()
        return self.current
