"""Graphs to bytes and back: the "om" model buffer of ``aclgrphBuildModel``.

The format is JSON behind a magic line, so loading a model file never executes
anything; a damaged or foreign buffer is a clear error, not a crash.
"""

from __future__ import annotations

import json
from typing import Any

from ..prof import json_text
from .graph import Graph, Node
from .tensor import GraphBuildError

MAGIC = b"GEPROF-OM 1\n"


class ModelFormatError(ValueError):
    """The bytes are not a geprof model buffer (or are damaged)."""


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"attribute value {value!r} of type {type(value).__name__} cannot be saved in a model")


def _node_dict(n: Node) -> dict:
    desc = n.outputs[0] if n.outputs else None
    out = {"name": n.name, "type": n.type, "inputs": [[t.node.id, t.index] for t in n.inputs],
           "control_inputs": [c.id for c in n.control_inputs], "attrs": _jsonable(n.attrs)}
    if n.type in ("Data", "Variable", "Const"):
        out["desc"] = {"shape": list(desc.shape), "dtype": desc.dtype, "format": desc.format}
    return out


def graph_to_dict(graph: Graph) -> dict:
    """A JSON-able description of a graph (names, types, edges, attributes, input shapes)."""
    return {"name": graph.name, "forward_end": graph.forward_end, "is_training": graph.is_training,
            "nodes": [_node_dict(n) for n in graph.nodes]}


def graph_from_dict(body: dict, input_shapes: dict[str, tuple[int, ...]] | None = None) -> Graph:
    """Rebuild a graph, optionally with concrete shapes for some ``Data`` inputs (by name)."""
    g = Graph(body["name"])
    for spec in body["nodes"]:
        _add_node(g, spec, input_shapes or {})
    g.forward_end = body.get("forward_end")
    g.is_training = bool(body.get("is_training"))
    return g


def concretize(graph: Graph, input_shapes: dict[str, tuple[int, ...]]) -> Graph:
    """The graph with its unknown input dims made concrete: GE's per-execution InferShape."""
    return graph_from_dict(graph_to_dict(graph), input_shapes)


def graph_to_bytes(graph: Graph) -> bytes:
    """The model buffer of a graph."""
    return MAGIC + json.dumps(graph_to_dict(graph), separators=(",", ":")).encode("utf-8")


def graph_from_bytes(data: bytes) -> Graph:
    """Rebuild a graph from a model buffer; every op is re-checked as it is added."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ModelFormatError(f"a model buffer is bytes, got {type(data).__name__}")
    data = bytes(data)
    if not data.startswith(MAGIC):
        raise ModelFormatError("not a geprof model buffer (missing the 'GEPROF-OM 1' header)")
    try:
        body = json_text.loads(memoryview(data)[len(MAGIC):])
    except json_text.JsonTextError as exc:
        raise ModelFormatError(f"damaged model buffer: not valid JSON ({exc.reason})") from None
    try:
        g = graph_from_dict(body)
    except (ModelFormatError, GraphBuildError) as exc:
        raise ModelFormatError(f"model buffer holds an invalid graph: {exc}") from None
    except (KeyError, TypeError, IndexError, AttributeError, ValueError, OverflowError) as exc:
        # a field of the wrong shape met by the graph builder (a list where an object belongs, a huge dim)
        raise ModelFormatError(f"damaged model buffer: {type(exc).__name__}: {str(exc)[:200]}") from None
    return g


def _earlier_node(g: Graph, spec: dict, ref: Any) -> Node:
    """The node an edge of ``spec`` comes from: one added before it (a model lists its nodes in
    topological order, so an edge from itself or a later node is a cycle or a damaged buffer)."""
    n = len(g.nodes)
    if isinstance(ref, bool) or not isinstance(ref, int) or not 0 <= ref < n:
        what = "itself" if ref == n else f"node id {ref!r}"
        raise ModelFormatError(
            f"node {n} ({spec.get('name')!r}, {spec.get('type')}) takes an input from {what}, which is not an "
            f"earlier node: the graph has a cycle or the buffer is damaged; accepted: edges from nodes 0..{n - 1}")
    return g.nodes[ref]


def _add_node(g: Graph, spec: dict, input_shapes: dict[str, tuple[int, ...]]) -> None:
    inputs = []
    for i, k in spec["inputs"]:
        src = _earlier_node(g, spec, i)
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < len(src.outputs):
            raise ModelFormatError(f"node {len(g.nodes)} ({spec.get('name')!r}) reads output {k!r} of {src.name!r}, "
                                   f"which has {len(src.outputs)} outputs")
        inputs.append(src.output(k))
    control = [_earlier_node(g, spec, i) for i in spec["control_inputs"]]
    attrs = dict(spec["attrs"])
    kind = spec["type"]
    if kind == "Data":
        d = spec["desc"]
        concrete = spec["name"] in input_shapes
        g.data(spec["name"], input_shapes[spec["name"]] if concrete else d["shape"], d["dtype"], d["format"],
               index=attrs.get("index"), default_shape=None if concrete else attrs.get("default_shape"))
    elif kind == "Variable":
        d = spec["desc"]
        g.variable(spec["name"], d["shape"], d["dtype"], d["format"], trainable=attrs.get("trainable", True))
    elif kind == "Const":
        d = spec["desc"]
        g.const(spec["name"], d["shape"], d["dtype"], value=attrs.get("value"))
    elif kind == "NetOutput":
        g.output(inputs, control_inputs=control)
    else:
        _resolve_shape_sources(g, kind, attrs)
        g.op(kind, inputs, name=spec["name"], control_inputs=control, **attrs)


def _resolve_shape_sources(g: Graph, op_type: str, attrs: dict) -> None:
    """A shape attribute copied from another tensor (``<attr>_source``) takes that tensor's shape now.

    Autodiff records where e.g. BroadcastTo's target shape came from, so that a
    dynamic-shape graph rebuilt for concrete inputs gets concrete attributes
    (GE resolves such value-dependent shapes at run time).
    """
    from .ops import get_op

    for key in get_op(op_type).shape_attrs:
        source = attrs.get(f"{key}_source")
        if source is not None:
            node_name, _, index = source.rpartition(":")
            attrs[key] = list(g.node(node_name).output(int(index)).shape)
