"""The static memory plan of a loaded model: where every tensor lives, and when.

GE plans the feature-map memory of a static (sink) model once, at build time:
each tensor gets an offset in one pool, and tensors whose lifetimes do not
overlap share addresses.  This module does the same on a :class:`TaskTable`,
so the memory profile of a step follows from the task times the schedule
already computes:

* :func:`plan_memory` places tensors (largest first, lowest offset that fits,
  as GE's block assigner does) and reports pool size, peak live bytes and the
  separate weight region;
* :func:`find_conflicts` checks a plan: two tensors sharing bytes while both live;
* :func:`static_op_mem` describes the plan for the profiler, once per load: each
  tensor's place and the tasks that allocate and release it (the analysis reads
  every step's times of those tasks from the task log).

Lifetimes are counted in task positions of the launch order: a tensor is live
from its producer's task to its last reader's task, both included.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import numpy as np

from ..prof.rawdata import HELD_TO_STEP_END, STATIC_OP_MEM_DTYPE, RtTaskType
from .compiler import CompiledModel, TaskTable
from .graph import Graph
from .tensor import GraphBuildError

#: GE aligns every block to 512 bytes after adding 32 bytes of padding.
MEMORY_ALIGN = 512
MEMORY_PAD = 32
WEIGHT_TYPES = ("Variable", "Const")
#: Optimizer updates write their variable (and its state) in place, as ScatterPaKvCache writes the KV
#: cache: their outputs are the weights' (the cache's) memory, not new feature maps.
IN_PLACE_TYPES = ("ApplyMomentum", "ApplyAdamW", "ScatterPaKvCache")


def align_size(nbytes: int | np.ndarray) -> int | np.ndarray:
    """Bytes GE reserves for a tensor of ``nbytes``: ``nbytes + 32`` rounded up to 512."""
    return (nbytes + MEMORY_PAD + MEMORY_ALIGN - 1) // MEMORY_ALIGN * MEMORY_ALIGN


_PLAN_DTYPES = {"node": np.int32, "output_index": np.int32, "size": np.int64, "offset": np.int64,
                "alloc_task": np.int64, "free_task": np.int64, "stream": np.int32, "until_end": bool,
                "is_input": bool}


@dataclass(eq=False)
class MemoryPlan:
    """Offsets and lifetimes of the feature-map tensors of one task table (one entry per tensor).

    Arrays are read-only, so the per-plan arrays derived from them can be cached;
    to change a plan (e.g. to test the conflict detector) build a new one with
    ``dataclasses.replace``.
    """

    names: tuple[str, ...]  # "<node name>:<output index>"
    node: np.ndarray  # int32 producer node id (the Data node for graph inputs)
    output_index: np.ndarray  # int32
    size: np.ndarray  # int64 aligned bytes
    offset: np.ndarray  # int64 bytes from the start of the pool
    alloc_task: np.ndarray  # int64 position of the producer's task in the launch order
    free_task: np.ndarray  # int64 position of the last reader's task (last task if until_end)
    stream: np.ndarray  # int32 stream of the producer's task
    until_end: np.ndarray  # bool: held to the end of the step (graph output or read on another stream)
    is_input: np.ndarray  # bool: a graph input copied in by the step's MEMCPY_ASYNC
    n_tasks: int
    weight_bytes: int  # Variables and Consts: a separate region, never reused

    def __post_init__(self) -> None:
        for name, dtype in _PLAN_DTYPES.items():
            arr = np.array(getattr(self, name), dtype)
            arr.setflags(write=False)
            setattr(self, name, arr)

    def __len__(self) -> int:
        return len(self.names)

    def index(self, name: str) -> int:
        """Position of the tensor called ``name``."""
        return self._positions[name]

    @cached_property
    def _positions(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.names)}

    @property
    def total_bytes(self) -> int:
        """What the tensors would take without reuse."""
        return int(self.size.sum())

    @property
    def input_bytes(self) -> int:
        return int(self.size[self.is_input].sum())

    @cached_property
    def pool_size(self) -> int:
        """Bytes the pool must reserve: the highest end address of any tensor."""
        return int((self.offset + self.size).max(initial=0))

    @cached_property
    def live_bytes(self) -> np.ndarray:
        """Sum of the sizes of the live tensors at each task position."""
        delta = np.zeros(self.n_tasks + 1, np.int64)
        np.add.at(delta, self.alloc_task, self.size)
        np.add.at(delta, self.free_task + 1, -self.size)
        return np.cumsum(delta[:-1])

    @property
    def peak_live_bytes(self) -> int:
        return int(self.live_bytes.max(initial=0))

    @property
    def reuse_ratio(self) -> float:
        """Sum of tensor sizes over pool size: how many times each pool byte is used in a step."""
        return self.total_bytes / self.pool_size if self.pool_size else 0.0


@dataclass(frozen=True)
class MemoryConflict:
    """Two tensors sharing bytes while both live."""

    first: str  # the tensor with the smaller position in the plan
    second: str
    first_index: int
    second_index: int
    byte_range: tuple[int, int]  # [start, end) of the shared bytes
    task_range: tuple[int, int]  # first and last task position where both are live

    def __str__(self) -> str:
        return (f"{self.first} and {self.second} share bytes [{self.byte_range[0]}, {self.byte_range[1]}) "
                f"while both live in tasks {self.task_range[0]}..{self.task_range[1]}")


# ------------------------------------------------------------------ planning
def _readers(graph: Graph, compiled: CompiledModel, kernel_task: dict[int, int]
             ) -> dict[tuple[int, int], tuple[list[int], bool]]:
    """(node id, output index) -> (task positions of the kernels reading it, read by NetOutput).

    Ops without a kernel that produce an output (Reshape) alias their input, so
    their readers are readers of the input; NetOutput holds its inputs to the end.
    """
    direct: dict[tuple[int, int], list] = defaultdict(list)
    for node in graph.nodes:
        for t in node.inputs:
            direct[(t.node.id, t.index)].append(node)
    memo: dict[tuple[int, int], tuple[list[int], bool]] = {}

    def resolve(key: tuple[int, int]) -> tuple[list[int], bool]:
        if key not in memo:
            tasks: list[int] = []
            to_end = False
            for reader in direct.get(key, ()):
                if reader.id in compiled.kernels:
                    tasks.append(kernel_task[reader.id])
                elif not reader.outputs:
                    to_end = True
                else:
                    for i in range(len(reader.outputs)):
                        more, end = resolve((reader.id, i))
                        tasks += more
                        to_end |= end
            memo[key] = (tasks, to_end)
        return memo[key]

    return {key: resolve(key) for key in direct}


def _sync_points(table: TaskTable) -> Callable[[int, int, int, int], int | None]:
    """``synced(a, b, task, after)``: the first EVENT_WAIT on stream ``a`` after task position ``after``
    whose event stream ``b`` records at or after ``task`` (so ``a`` knows ``task`` is done), or None.

    A stream's waits on another stream's events cover ever later tasks of it (the compiler waits only
    for a later producer than it has waited for), so the recorded positions rise with the waits'.
    """
    recorded = {int(table.event[i]): int(i) for i in np.flatnonzero(table.rt_type == RtTaskType.EVENT_RECORD)}
    pairs: dict[tuple[int, int], tuple[list[int], list[int]]] = {}
    for i in np.flatnonzero(table.rt_type == RtTaskType.EVENT_WAIT).tolist():
        q = recorded.get(int(table.event[i]))
        if q is not None:
            waits, records = pairs.setdefault((int(table.stream[i]), int(table.stream[q])), ([], []))
            waits.append(i)
            records.append(max(q, records[-1]) if records else q)
    arrays = {k: (np.asarray(w), np.asarray(r)) for k, (w, r) in pairs.items()}

    def synced(a: int, b: int, task: int, after: int) -> int | None:
        found = arrays.get((a, b))
        if found is None:
            return None
        waits, records = found
        j = max(int(np.searchsorted(records, task, side="left")), int(np.searchsorted(waits, after, side="right")))
        return int(waits[j]) if j < len(waits) else None

    return synced


def _first_fit(starts: np.ndarray, ends: np.ndarray, need: int) -> int:
    """The lowest offset where ``need`` bytes overlap none of the blocked ranges ``[starts, ends)``:
    0, or the end of a range where the running maximum of the ends (ranges sorted by start) first
    leaves a gap of ``need`` before the next start."""
    if not len(starts):
        return 0
    by_start = starts.argsort(kind="stable")
    starts = starts[by_start]
    if starts[0] >= need:
        return 0  # fits below every blocked range
    reach = np.maximum.accumulate(ends[by_start])  # end of everything starting at or before each range
    gaps = (starts[1:] - reach[:-1] >= need).nonzero()[0]
    return int(reach[gaps[0]] if len(gaps) else reach[-1])


def _place(size: np.ndarray, alloc: np.ndarray, free: np.ndarray, stream: np.ndarray) -> np.ndarray:
    """Offsets by greedy first fit, largest tensor first (earlier allocation first among equals).

    Each tensor goes to the lowest offset where it overlaps none of the tensors
    placed before it that block it (live at the same time, or on another
    stream).  That lowest offset is 0 or the end of a blocked range: sorting the
    blocked ranges by start, it is where the running maximum of their ends first
    leaves a gap of ``size`` bytes before the next start.

    Which tensor blocks which is one ``n x n`` matrix computed up front (1.2 M
    booleans for a ResNet-50 training step), so the loop over tensors does a
    handful of array operations each instead of recomputing the conflicts.
    Past :data:`MATRIX_MAX_TENSORS` tensors that matrix does not fit in memory
    (a 100,000-node graph would need 10 GB per temporary): :func:`_place_windowed`
    finds the same blocking tensors by lifetime windows and gives the same offsets.
    """
    n = len(size)
    if n > MATRIX_MAX_TENSORS:
        return _place_windowed(size, alloc, free, stream)
    order = np.lexsort((alloc, -size))
    a, f, s, z = alloc[order], free[order], stream[order], size[order]
    # blocked[k, j]: the k-th tensor placed may not share bytes with the j-th
    blocked = ((a[None, :] <= f[:, None]) & (f[None, :] >= a[:, None])) | (s[None, :] != s[:, None])
    lo = np.zeros(n, np.int64)
    hi = z.astype(np.int64)  # placed at 0 until moved
    for k in range(1, n):
        b = blocked[k, :k]
        lo[k] = _first_fit(lo[:k][b], hi[:k][b], z[k])
        hi[k] = lo[k] + z[k]
    offset = np.empty(n, np.int64)
    offset[order] = lo
    return offset


#: Largest tensor count :func:`_place` plans with its n x n conflict matrix (64 MB of booleans).
MATRIX_MAX_TENSORS = 8192


def _place_windowed(size: np.ndarray, alloc: np.ndarray, free: np.ndarray, stream: np.ndarray) -> np.ndarray:
    """:func:`_place` for many tensors: the same first fit, without the n x n matrix.

    The tensors that block the k-th one are found among candidates only: tensors on
    another stream, long-lived tensors, and short-lived ones whose allocation falls in
    the window where a short tensor can overlap it (found by binary search on the
    allocation times).  Candidates are taken in placement order, so ties resolve as
    in the matrix version and the offsets are identical (``tests/reliability``
    compares the two).  Memory is O(n); time is O(n x candidates).
    """
    n = len(size)
    order = np.lexsort((alloc, -size))
    a, f, s, z = (np.asarray(x, np.int64)[order] for x in (alloc, free, stream, size))
    life = f - a
    window = int(max(64, np.quantile(life, 0.99))) if n else 0
    long_lived = np.flatnonzero(life > window)  # in placement order
    by_alloc = np.argsort(a, kind="stable")
    a_sorted = a[by_alloc]
    short = life[by_alloc] <= window  # the window's candidates; long-lived ones are taken from long_lived
    of_stream = {int(x): np.flatnonzero(s == x) for x in np.unique(s)}  # placement order
    lo = np.zeros(n, np.int64)
    hi = z.copy()
    for k in range(1, n):
        # The blocking tensors fall in disjoint parts (first fit depends on their set, not their order):
        # short-lived ones of k's stream allocated in the window, long-lived ones of k's stream, and every
        # tensor of another stream placed before k.
        i0 = np.searchsorted(a_sorted, a[k] - window, side="left")
        i1 = np.searchsorted(a_sorted, f[k], side="right")
        near = by_alloc[i0:i1][short[i0:i1]]
        near = near[near < k]
        far = long_lived[:np.searchsorted(long_lived, k)]
        parts = [near, far]
        if len(of_stream) > 1:
            parts = [p[s[p] == s[k]] for p in parts]
            parts += [members[:np.searchsorted(members, k)] for x, members in of_stream.items() if x != s[k]]
        same = np.concatenate(parts[:2])
        b = np.concatenate([same[(a[same] <= f[k]) & (f[same] >= a[k])], *parts[2:]])
        lo[k] = _first_fit(lo[b], hi[b], z[k])
        hi[k] = lo[k] + z[k]
    offset = np.empty(n, np.int64)
    offset[order] = lo
    return offset


def plan_memory(compiled: CompiledModel, table: TaskTable) -> MemoryPlan:
    """Plan the feature-map pool of ``table``, a launch-ordered task table of ``compiled``.

    Tensors are the outputs of every node with a kernel, plus the graph inputs a
    MEMCPY_ASYNC task copies in at the start of the step (inputs without a copy
    stay in the caller's memory and are not planned).  Variables and Consts are
    weights: a separate region that lives as long as the model, never reused;
    optimizer updates write them in place, so their outputs are not planned.

    A tensor is allocated when its producer's task starts and freed after its
    last reader's task.  Streams run concurrently, so launch order says nothing
    about when a task on another stream really runs; GE is conservative there,
    and so is this plan: a tensor read on another stream than the one that
    produced it is freed only where its own stream knows that reader is done,
    the first EVENT_WAIT of the producer's stream for an event recorded after
    the reader (a tensor-parallel AllReduce's input, once the compute stream
    has waited for its result); without one (reduced gradients read back by the
    optimizer, a pipeline send's activation) it is held until the end of the
    step.  A freed range is reused only by tensors of the same stream.  Graph
    outputs (NetOutput inputs) also live to the end.
    """
    graph = compiled.graph
    last = len(table) - 1
    task_node = table.node.tolist()
    task_stream = table.stream.tolist()  # Python ints: looked up once per tensor and reader
    kernel_task = {task_node[i]: i for i, k in enumerate(table.kernels) if k is not None}
    copy_task = {task_node[i]: int(i) for i in np.flatnonzero(table.rt_type == RtTaskType.MEMCPY_ASYNC)}
    readers = _readers(graph, compiled, kernel_task)
    synced = _sync_points(table)

    rows: list[tuple] = []  # (name, node, index, nbytes, alloc, free, stream, until_end, is_input)
    weight_bytes = 0
    for node in graph.nodes:
        if node.type in WEIGHT_TYPES:
            weight_bytes += sum(int(align_size(d.nbytes)) for d in node.outputs)
            continue
        if node.type in IN_PLACE_TYPES:
            continue
        if node.id in compiled.kernels:
            alloc = kernel_task[node.id]
        elif node.type == "Data" and node.id in copy_task:
            alloc = copy_task[node.id]
        else:
            continue
        stream = task_stream[alloc]
        for i, desc in enumerate(node.outputs):
            tasks, to_end = readers.get((node.id, i), ([], False))
            ends = [t if task_stream[t] == stream else synced(stream, task_stream[t], t, alloc) for t in tasks]
            until_end = to_end or None in ends
            free = last if until_end else max(ends, default=alloc)
            rows.append((f"{node.name}:{i}", node.id, i, desc.nbytes, alloc, free, stream, until_end,
                         node.type == "Data"))

    cols = list(zip(*rows)) if rows else [()] * 9
    size = align_size(np.asarray(cols[3], np.int64))
    alloc = np.asarray(cols[4], np.int64)
    free = np.asarray(cols[5], np.int64)
    stream = np.asarray(cols[6], np.int32)
    return MemoryPlan(
        names=tuple(cols[0]), node=np.asarray(cols[1], np.int32), output_index=np.asarray(cols[2], np.int32),
        size=size, offset=_place(size, alloc, free, stream), alloc_task=alloc, free_task=free, stream=stream,
        until_end=np.asarray(cols[7], bool), is_input=np.asarray(cols[8], bool), n_tasks=len(table),
        weight_bytes=weight_bytes,
    )


# ------------------------------------------------------------------ checking
class DeviceMemoryError(GraphBuildError):
    """A model's static memory (feature-map pool and weights) does not fit in the device's memory."""


def check_device_memory(plan: MemoryPlan, graph_name: str, device_name: str, memory_bytes: int) -> None:
    """Raise :class:`DeviceMemoryError` if ``plan`` needs more than the device's ``memory_bytes``
    (GE allocates the whole static plan when it loads a model, so such a model never loads)."""
    needed = plan.pool_size + plan.weight_bytes
    if needed > memory_bytes:
        raise DeviceMemoryError(
            f"graph {graph_name!r} needs {needed} bytes ({needed / 2**30:.1f} GiB) of device memory for its static "
            f"memory plan (feature maps {plan.pool_size}, weights {plan.weight_bytes}); device {device_name} has "
            f"{memory_bytes} bytes ({memory_bytes / 2**30:.1f} GiB)")


def find_conflicts(plan: MemoryPlan) -> list[MemoryConflict]:
    """Every pair of tensors whose byte ranges overlap while their lifetimes overlap.

    A sweep over task positions keeps the live tensors in a segment tree over
    the (compressed) byte addresses, so each allocation finds exactly the live
    tensors it overlaps: O((n + conflicts) log^2 n), not a test of every pair.
    """
    n = len(plan)
    if n == 0:
        return []
    lo = plan.offset
    hi = plan.offset + plan.size
    coords = np.unique(np.concatenate([lo, hi]))
    leaf_lo = np.searchsorted(coords, lo)
    leaf_hi = np.searchsorted(coords, hi)
    base = 1 << (len(coords) - 1).bit_length()
    stored: dict[int, set[int]] = defaultdict(set)  # tree node -> tensors whose range it covers
    below: dict[int, set[int]] = defaultdict(set)  # tree node -> tensors stored at it or under it
    nodes: dict[int, tuple[list[int], set[int]]] = {}

    def decompose(i: int) -> tuple[list[int], set[int]]:
        """Canonical tree nodes of tensor ``i``'s byte range, and their strict ancestors."""
        left, right = int(leaf_lo[i]) + base, int(leaf_hi[i]) + base
        canon: list[int] = []
        while left < right:
            if left & 1:
                canon.append(left)
                left += 1
            if right & 1:
                right -= 1
                canon.append(right)
            left >>= 1
            right >>= 1
        up: set[int] = set()
        for c in canon:
            c >>= 1
            while c and c not in up:
                up.add(c)
                c >>= 1
        return canon, up

    # inserts at their alloc position; removals after the free position, before that position's inserts
    keys = np.concatenate([2 * plan.alloc_task + 1, 2 * (plan.free_task + 1)])
    order = np.argsort(keys, kind="stable")
    found: list[MemoryConflict] = []
    for e in order:
        i = int(e % n)
        if e < n:
            canon, up = nodes[i] = decompose(i)
            hits: set[int] = set()
            for c in canon:
                hits |= below[c]
            for u in up:
                hits |= stored[u]
            for j in sorted(hits):
                a, b = min(i, j), max(i, j)
                found.append(MemoryConflict(
                    plan.names[a], plan.names[b], a, b,
                    (int(max(lo[a], lo[b])), int(min(hi[a], hi[b]))),
                    (int(max(plan.alloc_task[a], plan.alloc_task[b])), int(min(plan.free_task[a], plan.free_task[b]))),
                ))
            for c in canon:
                stored[c].add(i)
            for c in (*canon, *up):
                below[c].add(i)
        else:
            canon, up = nodes.pop(i)
            for c in canon:
                stored[c].discard(i)
            for c in (*canon, *up):
                below[c].discard(i)
    return sorted(found, key=lambda c: (c.first_index, c.second_index))


# ------------------------------------------------------------------- profiling
def static_op_mem(plan: MemoryPlan, model_id: int, connection_base: int,
                  name_ids: Callable[[list[str]], list[int]]) -> np.ndarray:
    """The plan as ``STATIC_OP_MEM_DTYPE`` records: one per tensor, tasks named by connection id
    (``connection_base`` + the task's position in the launch order).

    ``name_ids`` is the reporting library's ``get_hash_ids``: called for every report, so each
    library (each rank of a simulated cluster) learns the tensor names its records use.
    """
    rec = np.empty(len(plan), STATIC_OP_MEM_DTYPE)
    rec["model_id"] = model_id
    rec["tensor"] = name_ids(list(plan.names))
    rec["addr"] = plan.offset
    rec["size"] = plan.size
    rec["alloc_conn"] = connection_base + plan.alloc_task
    rec["free_conn"] = np.where(plan.until_end, HELD_TO_STEP_END, connection_base + plan.free_task)
    rec["stream_id"] = plan.stream
    rec["pool_size"] = plan.pool_size
    return rec
