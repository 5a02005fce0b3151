"""Build a graph into a loadable model: engines, streams, the launch-ordered task
list (kernels, input copies, event record/wait between streams, PROFILER_TRACE
tasks), with every kernel timed by the device's cost model.

Streams: every AI Core / vector / AI CPU kernel on the compute stream, every
collective on an HCCL stream: one per communication group (a data-parallel
gradient AllReduce does not queue behind a tensor-parallel one), and for
pipeline sends and receives one per group and direction (:func:`hccl_stream_key`).
Where an op consumes a tensor made on another stream, the producer's stream
records an event after it and the consumer's stream waits for it before the
consumer, so AllReduce overlaps backward compute exactly as far as the data
dependencies allow.

Trace tasks come from :class:`ProfilingTaskUtils` and are placed per profiling
point set, so changing ``fp_point``/``bp_point`` re-places them without a rebuild.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Sequence

import numpy as np

from ..prof.rawdata import GeTaskType, RtTaskType
from ..prof.task_utils import ProfilingPoint, ProfilingTaskUtils
from .device import CostModel, KernelTiming
from .graph import Graph, Node
from .ops import OpCost, op_cost
from .task_desc import OpDescs
from .tensor import GraphBuildError

EVENT_RECORD_NS = 300
EVENT_WAIT_MIN_NS = 150
PROFILER_TRACE_NS = 20
#: Relative spread (sigma of a log-normal) of each kind of task's duration.
JITTER_SIGMA = {"kernel": 0.02, "aicpu": 0.05, "hccl": 0.03, "memcpy": 0.03, "fixed": 0.0}


@dataclass
class TaskTable:
    """The tasks of a loaded model in launch order, column-wise."""

    rt_type: np.ndarray  # RtTaskType
    stream: np.ndarray
    task_id: np.ndarray
    node: np.ndarray  # node id, -1 for tasks that belong to no op
    base_ns: np.ndarray  # fixed part of the duration (kernel head/tail)
    var_ns: np.ndarray  # part that varies run to run
    sigma: np.ndarray  # spread of the varying part
    block_cycles: np.ndarray  # nominal AI Core cycles per block (0 off AI Core)
    event: np.ndarray  # event id recorded or waited for, -1 otherwise
    logid: np.ndarray  # PROFILER_TRACE LogID, -1 otherwise
    kernels: list[KernelTiming | None]  # per task

    def __len__(self) -> int:
        return len(self.rt_type)

    @property
    def nominal_ns(self) -> np.ndarray:
        return self.base_ns + self.var_ns

    @cached_property
    def stream_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """The first and the last task of each stream.  A stream runs its tasks in launch order, one
        after the other, so a step starts with one of the first and ends with one of the last."""
        first = np.unique(self.stream, return_index=True)[1]
        last = len(self.stream) - 1 - np.unique(self.stream[::-1], return_index=True)[1]
        return first, last


@dataclass
class _Entry:
    """Tasks that belong to one node, before flattening into launch order."""

    stream: int
    waits: list[int] = field(default_factory=list)
    before: list[int] = field(default_factory=list)
    kernel: KernelTiming | None = None
    after: list[int] = field(default_factory=list)
    records: list[int] = field(default_factory=list)


DEFAULT_GROUP = "hccl_world_group"
P2P_TYPES = ("HcomSend", "HcomReceive")


def hccl_stream_key(node: Node) -> str:
    """Which HCCL stream a collective runs on: its group's, or for a send or receive its group's and
    direction's (activations and gradients of a pipeline each have a send and a receive stream)."""
    group = str(node.attrs.get("group", DEFAULT_GROUP))
    if node.type in P2P_TYPES:
        return f"{group}/{node.type}/{node.attrs.get('direction', '')}"
    return group


def hccl_stream_keys(graph: Graph) -> list[str]:
    """The HCCL stream keys of ``graph``'s collectives, in order of first use (at least one stream)."""
    keys = dict.fromkeys(hccl_stream_key(n) for n in graph.nodes if n.engine == "HCCL")
    return list(keys) or [DEFAULT_GROUP]


def kernel_time_split(kernel: KernelTiming, overhead_ns: int) -> tuple[int, int, int]:
    """(fixed ns, ns that vary run to run, AI Core cycles per block) of a kernel task: an AI Core kernel's
    launch head and tail are fixed, its blocks' time varies; another kernel varies as a whole."""
    if kernel.block_cycles:
        return overhead_ns, kernel.duration_ns - overhead_ns, kernel.block_cycles
    return 0, kernel.duration_ns, 0


def _check_edges(graph: Graph) -> None:
    """Every edge must come from an earlier node of the same graph.

    ``Graph`` adds nodes in topological order, so this holds for every graph built
    through its API; a graph whose ``Node.inputs`` were edited by hand may have a
    cycle, which would otherwise be scheduled silently in a wrong order.
    """
    nodes = graph.nodes
    for node in nodes:
        for src in [t.node for t in node.inputs] + node.control_inputs:
            if not (0 <= src.id < node.id and nodes[src.id] is src):
                kind = "a cycle" if src.id >= node.id else "an edge from another graph"
                raise GraphBuildError(f"graph {graph.name!r} has {kind}: {node.type} {node.name!r} takes an input "
                                      f"from {src.type} {src.name!r}, which is not an earlier node of the graph; "
                                      "accepted: edges from earlier nodes (build graphs with Graph.op)")


class CompiledModel:
    """A graph built for one device: kernel timings per node and task tables per trace-point set."""

    def __init__(self, graph: Graph, cost_model: CostModel, compute_stream: int, hccl_streams: int | Sequence[int],
                 input_copies: bool = True, describe: bool = False) -> None:
        """``hccl_streams``: the stream of each of :func:`hccl_stream_keys` (one stream: every collective
        on it); ``describe``: task profiling is on, so gather each op's :class:`~.task_desc.OpDescs` entry
        while building it (see :attr:`op_descs`)."""
        if graph.net_output is None:
            raise GraphBuildError(f"graph {graph.name!r} has no outputs: call graph.output(...) (or "
                                  "ge.add_training) before adding it to a session")
        _check_edges(graph)
        self.graph = graph
        self.cost_model = cost_model
        self.compute_stream = compute_stream
        ids = [hccl_streams] if isinstance(hccl_streams, int) else list(hccl_streams)
        keys = hccl_stream_keys(graph)
        if len(ids) == 1:
            ids *= len(keys)
        if len(ids) != len(keys):
            raise GraphBuildError(f"graph {graph.name!r} has {len(keys)} HCCL streams ({', '.join(keys)}) but "
                                  f"{len(ids)} stream ids were given")
        self.hccl_streams = dict(zip(keys, ids))
        self.kernels: dict[int, KernelTiming] = {}
        self.costs: dict[int, OpCost] = {}  # what each kernel does, by node id
        descs = OpDescs() if describe else None
        read_before: set = set()  # the stored tensors the step's ops have read so far, in launch order
        for node in graph.nodes:
            engine = node.engine
            if engine != "GE_LOCAL":
                dtype = node.inputs[0].dtype if node.inputs else node.outputs[0].dtype
                self.costs[node.id] = cost = op_cost(node, read_before)
                self.kernels[node.id] = kernel = cost_model.kernel(node.type, engine, cost, dtype, node.attrs)
                if descs is not None:
                    descs.add(node, kernel, engine)
        self._op_descs = descs
        self.input_nodes = [n for n in graph.nodes if n.type == "Data"]
        self.input_copies = input_copies
        self._producers = self._task_producers()
        self._tables: dict[tuple, TaskTable] = {}

    @property
    def op_descs(self) -> OpDescs:
        """What task profiling reports of each op that launches a kernel (described now if the model
        was built with task profiling off)."""
        if self._op_descs is None:
            descs = OpDescs()
            for node in self.graph.nodes:
                kernel = self.kernels.get(node.id)
                if kernel is not None:
                    descs.add(node, kernel, node.engine)
            self._op_descs = descs
        return self._op_descs

    # -------------------------------------------------------------- structure
    def stream_of(self, node: Node) -> int:
        return self.hccl_streams[hccl_stream_key(node)] if node.engine == "HCCL" else self.compute_stream

    def _task_producers(self) -> dict[int, set[int]]:
        """For every node, the nodes with a task whose output it depends on (through GE_LOCAL ops): the
        kernels, and the Data nodes whose input copy brings their tensor to the device."""
        copied = {d.id for d in self.input_nodes} if self.input_copies else set()
        producers: dict[int, set[int]] = {}
        for node in self.graph.nodes:
            deps: set[int] = set()
            for src in [t.node for t in node.inputs] + node.control_inputs:
                if src.id in self.kernels or src.id in copied:
                    deps.add(src.id)
                else:
                    deps |= producers.get(src.id, set())
            producers[node.id] = deps
        return producers

    def profiling_points(self, fp_point: str = "", bp_point: str = "") -> ProfilingPoint:
        return ProfilingTaskUtils.profiling_points(self.graph, fp_point, bp_point)

    def task_table(self, points: ProfilingPoint | None = None) -> TaskTable:
        """The launch-ordered tasks, with trace tasks for ``points`` (none if ``None``)."""
        key = points.key if points is not None else None
        table = self._tables.get(key)
        if table is None:
            table = self._tables[key] = self._build_table(points)
        return table

    def _build_table(self, points: ProfilingPoint | None) -> TaskTable:
        entries: dict[int, _Entry] = {}
        recorded: dict[int, int] = {}  # producer node id -> event id
        # (consumer stream, producer stream) -> latest producer already waited for; streams run
        # in order, so waiting for a later task covers every earlier one (GE's sync-event pruning)
        covered: dict[tuple[int, int], int] = {}
        copies = self.input_nodes if self.input_copies else []
        for data in copies:  # the input copies open the step on the compute stream
            entries[data.id] = _Entry(self.compute_stream)
        for node in self.graph.nodes:
            if node.id in entries:
                continue
            kernel = self.kernels.get(node.id)
            before = points.logids_before(node.id) if points else []
            after = points.logids_after(node.id) if points else []
            if kernel is None and not before and not after:
                continue
            entry = _Entry(self.stream_of(node), before=before, kernel=kernel, after=after)
            latest: dict[int, int] = {}  # producer stream -> latest producer this node needs
            for p in self._producers[node.id]:
                s = entries[p].stream
                if s != entry.stream and p > latest.get(s, -1):
                    latest[s] = p
            for s, p in sorted(latest.items()):
                if covered.get((entry.stream, s), -1) >= p:
                    continue
                if p not in recorded:
                    recorded[p] = len(recorded)
                    entries[p].records.append(recorded[p])
                covered[(entry.stream, s)] = p
                entry.waits.append(recorded[p])
            entries[node.id] = entry

        rows: list[tuple] = []  # (rt_type, stream, node, kernel, event, logid)
        copied = [entries.pop(data.id) for data in copies]
        rows += [(RtTaskType.MEMCPY_ASYNC, e.stream, data.id, None, -1, -1) for data, e in zip(copies, copied)]
        for data, e in zip(copies, copied):  # a tensor read on another stream: its copy records an event
            rows += [(RtTaskType.EVENT_RECORD, e.stream, data.id, None, ev, -1) for ev in e.records]
        for node_id, e in entries.items():
            rows += [(RtTaskType.EVENT_WAIT, e.stream, -1, None, ev, -1) for ev in e.waits]
            rows += [(RtTaskType.PROFILER_TRACE, e.stream, node_id, None, -1, lg) for lg in e.before]
            if e.kernel is not None:
                rows.append((e.kernel.rt_task_type, e.stream, node_id, e.kernel, -1, -1))
            rows += [(RtTaskType.PROFILER_TRACE, e.stream, node_id, None, -1, lg) for lg in e.after]
            rows += [(RtTaskType.EVENT_RECORD, e.stream, node_id, None, ev, -1) for ev in e.records]
        return self._table_from_rows(rows)

    def _table_from_rows(self, rows: list[tuple]) -> TaskTable:
        n = len(rows)
        base = np.zeros(n, np.int64)
        var = np.zeros(n, np.int64)
        sigma = np.zeros(n, np.float64)
        cycles = np.zeros(n, np.int64)
        task_ids = np.zeros(n, np.int32)
        next_id: dict[int, int] = {}
        overhead = self.cost_model.device.task_overhead_ns
        for i, (rt, stream, node_id, kernel, _, _) in enumerate(rows):
            next_id[stream] = next_id.get(stream, 0) + 1
            task_ids[i] = next_id[stream]
            if rt == RtTaskType.MEMCPY_ASYNC:
                var[i] = self.cost_model.memcpy_h2d_ns(self.graph.nodes[node_id].outputs[0].nbytes)
                sigma[i] = JITTER_SIGMA["memcpy"]
            elif rt == RtTaskType.EVENT_RECORD:
                base[i] = EVENT_RECORD_NS
            elif rt == RtTaskType.EVENT_WAIT:
                base[i] = EVENT_WAIT_MIN_NS
            elif rt == RtTaskType.PROFILER_TRACE:
                base[i] = PROFILER_TRACE_NS
            else:
                base[i], var[i], cycles[i] = kernel_time_split(kernel, overhead)
                sigma[i] = JITTER_SIGMA["kernel" if kernel.block_cycles else
                                        "hccl" if kernel.ge_task_type == GeTaskType.HCCL else "aicpu"]
        col = list(zip(*rows)) if rows else [[]] * 6
        return TaskTable(
            rt_type=np.asarray(col[0], np.uint8), stream=np.asarray(col[1], np.int32), task_id=task_ids,
            node=np.asarray(col[2], np.int32), base_ns=base, var_ns=var, sigma=sigma, block_cycles=cycles,
            event=np.asarray(col[4], np.int32), logid=np.asarray(col[5], np.int32), kernels=list(col[3]),
        )
