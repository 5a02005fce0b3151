"""GE's TaskDescInfo of a compiled model's ops, gathered as the compiler builds each op.

Task profiling describes every op task once per collection: its name and type,
its kernel's facts (task type, block dim, PMU counters, its cost: FLOPs and bytes) and every input and
output tensor (format, data type, shape).  Read off the graph later, that walks
about ten Python objects per op which have long left the CPU caches by then
(~2.5 us an op, ~2 ms for ResNet-50 training); the compiler holds each op, its
tensors and its new kernel anyway, so appending them to flat lists right then
costs a fraction of that.  A model compiled while task profiling was off is
described by the same :meth:`OpDescs.add` the first time a collection needs it.
"""

from __future__ import annotations

from itertools import repeat
from operator import attrgetter, is_not

import numpy as np

from ..prof import rawdata
from ..prof.collectors import LoadedTaskInfo, TensorColumns
from .graph import Node
from .tensor import DTYPES, FORMATS

_FORMAT_CODES = {name: int(code) for name, code in FORMATS.items()}
_DTYPE_CODES = {name: int(code) for name, (code, _) in DTYPES.items()}
_FORMAT_OF, _DTYPE_OF, _SHAPE_OF = attrgetter("format"), attrgetter("dtype"), attrgetter("shape")
_KERNEL_FACTS = attrgetter("ge_task_type", "block_dim", "mix_block_dim", "context_ids", "pmu_core", "counters")
_MEMCPY_ASYNC = int(rawdata.RtTaskType.MEMCPY_ASYNC)
_HOST_TO_DEVICE = int(rawdata.MemcpyDirection.HOST_TO_DEVICE)


class OpDescs:
    """The ops of one compiled model that launch a kernel, in node order (their tasks' launch order)."""

    __slots__ = ("node_ids", "names", "types", "kernels", "hf32", "n_inputs", "n_tensors", "tensors")

    def __init__(self) -> None:
        self.node_ids: list[int] = []
        self.names: list[str] = []
        self.types: list[str] = []
        self.kernels: list = []  # device.KernelTiming of each op
        self.hf32: list[bool] = []  # an AI Core op on float32 inputs (HF32 eligible)
        self.n_inputs: list[int] = []
        self.n_tensors: list[int] = []
        self.tensors: list = []  # graph.TensorDesc: each op's inputs, then its outputs

    def add(self, node: Node, kernel, engine: str) -> None:
        """Describe ``node`` (``engine`` is its op's, which the caller has looked up already)."""
        self.node_ids.append(node.id)
        self.names.append(node.name)
        self.types.append(node.type)
        self.kernels.append(kernel)
        inputs = [x.node.outputs[x.index] for x in node.inputs]
        self.hf32.append(engine == "AI_CORE" and bool(inputs) and inputs[0].dtype == "float32")
        self.n_inputs.append(len(inputs))
        self.n_tensors.append(len(inputs) + len(node.outputs))
        self.tensors += inputs
        self.tensors += node.outputs

    def task_info(self, table, nodes: list[Node], model_id: int, graph_id: int, model_name: str,
                  dynamic: bool) -> LoadedTaskInfo:
        """The reporters' view of ``table`` (a :class:`~.compiler.TaskTable` of this model's ops)."""
        op_rows = np.flatnonzero(np.fromiter(map(is_not, table.kernels, repeat(None)), bool, len(table)))
        if not np.array_equal(table.node[op_rows], self.node_ids):
            raise RuntimeError(f"model {model_name!r}: its kernel tasks are not in the order of its ops")
        base_flag = int(rawdata.OpFlag.DYNAMIC if dynamic else rawdata.OpFlag.STATIC)
        hf32_flag = base_flag | int(rawdata.OpFlag.HF32_ELIGIBLE)
        flags = [hf32_flag if h else base_flag for h in self.hf32]
        ge_types, blocks, mix, ctx, cores, counters = (
            list(c) for c in zip(*map(_KERNEL_FACTS, self.kernels))) if self.kernels else ([],) * 6
        n_inputs = np.asarray(self.n_inputs, np.int64)
        n_tensors = np.asarray(self.n_tensors, np.int64)
        # per op: n_inputs INPUT codes, then OUTPUT codes for the rest of its tensors
        first = np.repeat(np.cumsum(n_tensors) - n_tensors, n_tensors)
        is_input = np.arange(len(self.tensors)) - first < np.repeat(n_inputs, n_tensors)
        kinds = np.where(is_input, int(rawdata.TensorType.INPUT), int(rawdata.TensorType.OUTPUT))
        tensors = TensorColumns(self.n_tensors, kinds,
                                list(map(_FORMAT_CODES.__getitem__, map(_FORMAT_OF, self.tensors))),
                                list(map(_DTYPE_CODES.__getitem__, map(_DTYPE_OF, self.tensors))),
                                list(map(_SHAPE_OF, self.tensors)))
        copy_rows = np.flatnonzero(table.rt_type == _MEMCPY_ASYNC)  # an input copy: its Data node's output
        copy_bytes = [nodes[i].outputs[0].nbytes for i in table.node[copy_rows].tolist()]
        return LoadedTaskInfo(model_id, graph_id, model_name, table.stream, table.task_id, table.rt_type,
                              op_rows, self.names, self.types, list(map(int, ge_types)), blocks, tensors,
                              cores, counters, flags, mix, ctx, copy_rows, copy_bytes,
                              [_HOST_TO_DEVICE] * len(copy_bytes), list(map(_op_cost, self.kernels)))


def _op_cost(kernel) -> tuple[int, int, int, int, int, float, int, int, int] | None:
    """A kernel's rawdata.OP_COST_DTYPE fields (but its connection id), None if the cost model did not cost it
    as an AI Core or AI Vector Core kernel."""
    cost = kernel.cost
    if cost is None:
        return None
    return (cost.flops, cost.vector_ops, cost.bytes_in, cost.bytes_out, cost.stored_bytes_in, kernel.l2_hit_rate,
            _DTYPE_CODES[kernel.dtype], rawdata.COST_ENGINES.index(kernel.engine), cost.tiles)
