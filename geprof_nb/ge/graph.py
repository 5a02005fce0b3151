"""``ge.Graph``: build a graph op by op, with shapes inferred and checked as you go.

A graph is a list of :class:`Node` in creation order, which is a topological
order (an op can only consume tensors that already exist).  Errors are raised
when the op is added, naming it, so a wrong shape never reaches the compiler.
"""

from __future__ import annotations

import contextlib
import difflib
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from ..prof.clock import toolkit_entry
from .ops import get_op, known_op_types, op_cost
from .tensor import (  # noqa: F401 - the tables of a graph's dtypes and formats, read from here too
    DTYPES,
    FORMATS,
    MAX_TENSOR_BYTES,
    PROBE_DIMS,
    UNKNOWN_DIM,
    GraphBuildError,
    TensorDesc,
    canonical_dtype,
    canonical_format,
    checked_shape,
)

#: GE's name for the NetOutput node (``NODE_NAME_NET_OUTPUT``).
NET_OUTPUT_NAME = "Node_Output"


class Tensor:
    """An output of a node, used as the input of later ops."""

    __slots__ = ("node", "index")

    def __init__(self, node: "Node", index: int) -> None:
        self.node = node
        self.index = index

    @property
    def desc(self) -> TensorDesc:
        return self.node.outputs[self.index]

    @property
    def shape(self) -> tuple[int, ...]:
        return self.desc.shape

    @property
    def dtype(self) -> str:
        return self.desc.dtype

    @property
    def format(self) -> str:
        return self.desc.format

    @property
    def name(self) -> str:
        return f"{self.node.name}:{self.index}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tensor) and other.node is self.node and other.index == self.index

    def __hash__(self) -> int:
        return hash((id(self.node), self.index))

    def __repr__(self) -> str:
        return f"<Tensor {self.name} {self.desc}>"


@dataclass(eq=False)
class Node:
    """One op in a graph."""

    id: int
    name: str
    type: str
    inputs: list[Tensor]
    outputs: list[TensorDesc]
    attrs: dict[str, Any] = field(default_factory=dict)
    control_inputs: list["Node"] = field(default_factory=list)

    @property
    def op_def(self):
        return get_op(self.type)

    @property
    def engine(self) -> str:
        return self.op_def.engine

    def output(self, index: int = 0) -> Tensor:
        return Tensor(self, index)

    def __repr__(self) -> str:
        return f"<Node {self.id} {self.name} ({self.type})>"


@dataclass(frozen=True)
class GraphStats:
    """Size of a graph: what a person checks against the real network."""

    nodes: int
    parameters: int
    parameter_bytes: int
    forward_flops: int
    total_flops: int

    @property
    def forward_macs(self) -> int:
        return self.forward_flops // 2


class Graph:
    """A GE graph (``ge::Graph``) built with :meth:`data`, :meth:`variable`, :meth:`op`, :meth:`output`."""

    def __init__(self, name: str = "graph") -> None:
        if not isinstance(name, str) or not name:
            raise GraphBuildError("Graph name must be a non-empty string")
        self.name = name
        self.nodes: list[Node] = []
        self._by_name: dict[str, Node] = {}
        self._consumers: dict[int, list[tuple[Node, int]]] = {}
        self._scopes: list[str] = []
        self._name_counts: dict[str, int] = {}
        #: Node ids below this are forward ops; set by ``add_training``.
        self.forward_end: int | None = None
        #: True once ``add_training`` made this a training graph (GetNeedIteration).
        self.is_training = False
        #: The engine step an inference graph runs (``"prefill"`` or ``"decode"``: ``ge.models.llm(phase=...)``
        #: sets it), recorded with the model so a serving run's steps are named for it; ``None`` otherwise.
        self.inference_phase: str | None = None
        #: The parallel job this graph is one rank's part of (``ge.models.llm`` sets it: its ``world_size``
        #: and the graphs of the other pipeline stages); ``None`` for a graph every rank runs alike.
        self.job: Any = None

    # ----------------------------------------------------------------- naming
    @contextlib.contextmanager
    def name_scope(self, scope: str) -> Iterator[None]:
        """Prefix the names of ops created inside with ``scope/`` (TensorFlow style)."""
        if not isinstance(scope, str) or not scope.strip("/"):
            raise GraphBuildError(f"name_scope: scope must be a non-empty string (a name, not only '/'), got {scope!r}")
        self._scopes.append(scope.strip("/"))
        try:
            yield
        finally:
            self._scopes.pop()

    def _unique_name(self, name: str | None, op_type: str) -> tuple[str, tuple[str, int] | None]:
        """The full name for a new node, and the name counter to bump once it is added."""
        if name is not None:
            if not isinstance(name, str) or not name:
                raise GraphBuildError(f"{op_type}: name must be a non-empty string, got {name!r}")
            full = "/".join(self._scopes + [name])
            if full in self._by_name:
                raise GraphBuildError(f"{op_type} {full!r}: a node with this name already exists")
            return full, None
        base = "/".join(self._scopes + [op_type])
        n = self._name_counts.get(base, 0)
        full = base if n == 0 else f"{base}_{n}"
        while full in self._by_name:
            n += 1
            full = f"{base}_{n}"
        return full, (base, n + 1)

    # --------------------------------------------------------------- building
    def _add(self, name: tuple[str, tuple[str, int] | None], op_type: str, inputs: list[Tensor],
             outputs: list[TensorDesc], attrs: dict[str, Any], control_inputs: Sequence[Node] = ()) -> Node:
        name, counter = name
        for i, d in enumerate(outputs):
            if d.numel > 0 and d.nbytes > MAX_TENSOR_BYTES:
                raise GraphBuildError(f"{op_type} {name!r}: output {i} {d} is {d.nbytes} bytes; accepted: at most "
                                      f"{MAX_TENSOR_BYTES} (int64) bytes per tensor")
        if counter is not None:
            self._name_counts[counter[0]] = counter[1]
        node = Node(len(self.nodes), name, op_type, inputs, outputs, dict(attrs), list(control_inputs))
        self.nodes.append(node)
        self._by_name[name] = node
        for i, t in enumerate(inputs):
            self._consumers.setdefault(t.node.id, []).append((node, i))
        return node

    @toolkit_entry
    def data(self, name: str, shape: Sequence[int], dtype: str = "float16", format: str = "ND",  # noqa: A002
             index: int | None = None, default_shape: Sequence[int] | None = None) -> Tensor:
        """A graph input, fed by ``run_graph(inputs=...)``.

        Dimensions of -1 are unknown: the graph is then dynamic-shape and runs
        node by node.  ``default_shape`` is what ``run_graph()`` without inputs uses.
        """
        where = f"Data {name!r}"
        desc = TensorDesc(checked_shape(shape, where, allow_unknown=True), canonical_dtype(dtype, where),
                          canonical_format(format, where))
        attrs: dict[str, Any] = {"index": sum(1 for n in self.nodes if n.type == "Data") if index is None else index}
        if default_shape is not None:
            concrete = checked_shape(default_shape, f"{where} default_shape")
            if len(concrete) != desc.rank or any(d != c and d != UNKNOWN_DIM for d, c in zip(desc.shape, concrete)):
                raise GraphBuildError(f"{where}: default_shape {list(concrete)} does not match "
                                      f"shape {list(desc.shape)}")
            attrs["default_shape"] = list(concrete)
        node = self._add(self._unique_name(name, "Data"), "Data", [], [desc], attrs)
        return node.output(0)

    @toolkit_entry
    def variable(self, name: str, shape: Sequence[int], dtype: str = "float32", format: str = "ND",  # noqa: A002
                 trainable: bool = True) -> Tensor:
        """A tensor that lives on the device across steps: a weight, or optimizer state."""
        where = f"Variable {name!r}"
        desc = TensorDesc(checked_shape(shape, where), canonical_dtype(dtype, where), canonical_format(format, where))
        node = self._add(self._unique_name(name, "Variable"), "Variable", [], [desc], {"trainable": trainable})
        return node.output(0)

    @toolkit_entry
    def const(self, name: str | None = None, shape: Sequence[int] = (), dtype: str = "float32",
              value: Any = None) -> Tensor:
        """A constant (weights folded into the model, scalars such as a learning rate)."""
        where = f"Const {name!r}"
        desc = TensorDesc(checked_shape(shape, where), canonical_dtype(dtype, where), "ND")
        return self._add(self._unique_name(name, "Const"), "Const", [], [desc], {"value": value}).output(0)

    @toolkit_entry
    def op(self, op_type: str, inputs: Sequence[Tensor] | Tensor = (), name: str | None = None,
           control_inputs: Sequence[Node | Tensor] = (), **attrs: Any) -> Tensor | tuple[Tensor, ...]:
        """Add an op; returns its output tensor, or a tuple when it has several."""
        if not isinstance(op_type, str):
            raise GraphBuildError(f"op type must be a string such as 'MatMulV2', got {type(op_type).__name__} "
                                  f"{op_type!r}")
        try:
            op_def = get_op(op_type)
        except KeyError:
            close = difflib.get_close_matches(op_type, known_op_types(), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else f"; known types: {', '.join(known_op_types())}"
            raise GraphBuildError(f"unknown op type {op_type!r}{hint}") from None
        if op_type in ("Data", "Variable", "Const"):
            raise GraphBuildError(f"use Graph.{op_type.lower()}(...) to create a {op_type}")
        if op_type == "NetOutput":
            raise GraphBuildError("use Graph.output(tensors) to set the graph outputs (it adds the NetOutput)")
        if isinstance(inputs, Tensor):
            inputs = [inputs]
        inputs = list(inputs)
        unique = self._unique_name(name, op_type)
        full_name = unique[0]
        for i, t in enumerate(inputs):
            if not isinstance(t, Tensor):
                raise GraphBuildError(f"{op_type} {full_name!r}: input {i} must be a Tensor, got {type(t).__name__}")
            if self._by_name.get(t.node.name) is not t.node:
                raise GraphBuildError(f"{op_type} {full_name!r}: input {i} ({t.name}) belongs to another graph")
        control = self._control_nodes(control_inputs, f"{op_type} {full_name!r}")
        descs = [t.desc for t in inputs]
        unknown_attr = any(UNKNOWN_DIM in tuple(attrs.get(k) or ()) for k in op_def.shape_attrs)
        if unknown_attr or any(d.is_dynamic for d in descs):
            outputs = _infer_with_unknown_dims(op_def, full_name, descs, attrs, self._attr_probes(op_def, attrs))
        else:
            outputs = op_def.infer_shapes(full_name, descs, attrs)
        node = self._add(unique, op_type, inputs, outputs, attrs, control)
        if len(outputs) == 1:
            return node.output(0)
        return tuple(node.output(i) for i in range(len(outputs)))

    def _control_nodes(self, control_inputs: Sequence[Node | Tensor], owner: str) -> list[Node]:
        """``control_inputs`` as Nodes, checked like data inputs: each a Node (or a Tensor) of this graph."""
        if isinstance(control_inputs, (Node, Tensor)):
            control_inputs = [control_inputs]
        try:
            given = list(control_inputs)
        except TypeError:
            raise GraphBuildError(f"{owner}: control_inputs must be a list of Nodes or Tensors of graph "
                                  f"{self.name!r}, got {type(control_inputs).__name__}") from None
        nodes = []
        for i, c in enumerate(given):
            node = c.node if isinstance(c, Tensor) else c
            if not isinstance(node, Node):
                raise GraphBuildError(f"{owner}: control input {i} must be a Node or Tensor of graph {self.name!r}, "
                                      f"got {type(c).__name__}")
            if self._by_name.get(node.name) is not node:
                raise GraphBuildError(f"{owner}: control input {i} ({node.type} {node.name!r}) "
                                      "belongs to another graph")
            nodes.append(node)
        return nodes

    def _attr_probes(self, op_def: Any, attrs: dict[str, Any]) -> dict[str, tuple[tuple[int, ...], ...]]:
        """Probe shapes of the tensors that shape attributes were copied from (``<attr>_source``)."""
        out = {}
        for key in op_def.shape_attrs:
            source = attrs.get(f"{key}_source")
            node = self._by_name.get(source.rpartition(":")[0]) if source else None
            if node is not None:
                desc = node.outputs[int(source.rpartition(":")[2])]
                if desc.probe_shapes is not None:
                    out[key] = desc.probe_shapes
        return out

    @toolkit_entry
    def output(self, tensors: Sequence[Tensor] | Tensor, control_inputs: Sequence[Node | Tensor] = ()) -> Node:
        """Mark the graph outputs (adds the ``NetOutput`` node, named ``Node_Output`` as in GE)."""
        if any(n.type == "NetOutput" for n in self.nodes):
            raise GraphBuildError(f"graph {self.name!r} already has outputs (NetOutput {NET_OUTPUT_NAME!r})")
        if isinstance(tensors, Tensor):
            tensors = [tensors]
        tensors = list(tensors)
        for i, t in enumerate(tensors):
            if not isinstance(t, Tensor) or self._by_name.get(t.node.name) is not t.node:
                raise GraphBuildError(f"NetOutput: output {i} must be a Tensor of graph {self.name!r}")
        control = self._control_nodes(control_inputs, "NetOutput")
        return self._add((NET_OUTPUT_NAME, None), "NetOutput", tensors, [], {}, control)

    # ---------------------------------------------------------------- queries
    def node(self, name: str) -> Node:
        try:
            return self._by_name[name]
        except KeyError:
            close = difflib.get_close_matches(name, list(self._by_name), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise KeyError(f"graph {self.name!r} has no node {name!r}{hint}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def consumers(self, node: Node) -> list[tuple[Node, int]]:
        """(consumer, input index) pairs reading any output of ``node``."""
        return list(self._consumers.get(node.id, ()))

    def nodes_of_type(self, *types: str) -> list[Node]:
        return [n for n in self.nodes if n.type in types]

    @property
    def is_dynamic(self) -> bool:
        """True if an input has an unknown dimension (GE's unknown-shape graph)."""
        return any(n.type == "Data" and n.outputs[0].is_dynamic for n in self.nodes)

    @property
    def net_output(self) -> Node | None:
        found = self.nodes_of_type("NetOutput")
        return found[0] if found else None

    def stats(self) -> GraphStats:
        """Parameter count and FLOPs (2 per multiply-accumulate) of the graph.

        For a dynamic-shape graph, FLOPs count only ops whose shapes are known.
        """
        params = [n.outputs[0] for n in self.nodes if n.type == "Variable" and n.attrs.get("trainable", True)]
        fwd_end = self.forward_end if self.forward_end is not None else len(self.nodes)
        fwd = total = 0
        for n in self.nodes:
            if any(t.desc.is_dynamic for t in n.inputs) or any(d.is_dynamic for d in n.outputs):
                continue
            flops = op_cost(n).flops
            total += flops
            if n.id < fwd_end:
                fwd += flops
        return GraphStats(
            nodes=len(self.nodes),
            parameters=sum(d.numel for d in params),
            parameter_bytes=sum(d.nbytes for d in params),
            forward_flops=fwd,
            total_flops=total,
        )

    def __repr__(self) -> str:
        return f"<ge.Graph {self.name!r}: {len(self.nodes)} nodes>"


def _at_probe(shape: tuple[int, ...], probe_shapes: tuple[tuple[int, ...], ...] | None, k: int) -> tuple[int, ...]:
    """``shape`` when the unknown input dims are the ``k``-th probe value."""
    if probe_shapes is not None:
        return probe_shapes[k]
    return tuple(PROBE_DIMS[k] if x == UNKNOWN_DIM else x for x in shape)


def _infer_with_unknown_dims(op_def: Any, name: str, descs: list[TensorDesc], attrs: dict[str, Any],
                             attr_probes: dict[str, tuple[tuple[int, ...], ...]] | None = None) -> list[TensorDesc]:
    """Infer output shapes when some input dims are unknown (see :data:`PROBE_DIMS`).

    Unknown dims in the op's concrete-shape attributes (``OpDef.shape_attrs``)
    take the probe value too (or, for an attribute copied from a tensor, that
    tensor's probe shapes: ``attr_probes``), so shapes passed on by autodiff
    stay consistent.
    """
    probes = []
    for k, probe in enumerate(PROBE_DIMS):
        concrete = [d.with_(shape=_at_probe(d.shape, d.probe_shapes, k), probe_shapes=None) for d in descs]
        probe_attrs = dict(attrs)
        for key in op_def.shape_attrs:
            if key in attrs:
                known = (attr_probes or {}).get(key)
                probe_attrs[key] = list(_at_probe(tuple(int(x) for x in attrs[key]), known, k))
        try:
            probes.append(op_def.infer_shapes(name, concrete, probe_attrs))
        except GraphBuildError as exc:
            raise GraphBuildError(f"{exc} (while inferring shapes with the unknown dims taken as {probe})") from None
    out = []
    for a, b in zip(*probes):
        if a.rank != b.rank:
            raise GraphBuildError(f"{op_def.type} {name!r}: output rank depends on the unknown input dims")
        shape = tuple(x if x == y else UNKNOWN_DIM for x, y in zip(a.shape, b.shape))
        origin = None
        if a.origin_shape is not None and b.origin_shape is not None:
            origin = tuple(x if x == y else UNKNOWN_DIM for x, y in zip(a.origin_shape, b.origin_shape))
        dynamic = UNKNOWN_DIM in shape
        out.append(a.with_(shape=shape, origin_shape=origin, probe_shapes=(a.shape, b.shape) if dynamic else None))
    return out
