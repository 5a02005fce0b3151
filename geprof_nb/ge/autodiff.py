"""``add_training``: turn a forward graph into a training graph, the way GE sees one.

Appends, after the forward ops: the backward ops in reverse topological order
(scoped ``gradients/<op>_grad/``), gradient ``HcomAllReduce`` buckets when
``world_size > 1`` (GE puts them on the HCCL stream, so they overlap the rest
of the backward pass), the optimizer update of every trainable variable, and
the ``NetOutput``.  Because the result has the shape of a real training graph,
GE's FP/BP point auto-detection works on user graphs, not only on the zoo.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..prof.clock import toolkit_entry
from .graph import Graph, Node, Tensor
from .tensor import GraphBuildError

#: Default gradient bucket size for AllReduce fusion.
DEFAULT_BUCKET_BYTES = 32 * 1024 * 1024
OPTIMIZERS = ("Momentum", "AdamW")


@dataclass
class TrainingInfo:
    """What ``add_training`` added."""

    loss: Tensor
    gradients: dict[str, Tensor] = field(default_factory=dict)  # variable name -> gradient fed to the update
    all_reduce: list[Node] = field(default_factory=list)
    updates: list[Node] = field(default_factory=list)
    backward_start: int = 0  # id of the first backward node


GradRule = Callable[[Graph, Node, list["Tensor | None"], list[bool]], list["Tensor | None"]]
_RULES: dict[str, GradRule] = {}


def _rule(*op_types: str) -> Callable[[GradRule], GradRule]:
    def deco(fn: GradRule) -> GradRule:
        for t in op_types:
            _RULES[t] = fn
        return fn

    return deco


def _const(g: Graph, name: str, value: float, dtype: str) -> Tensor:
    return g.const(name, (), dtype, value=value)


def unbroadcast(g: Graph, grad: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Sum ``grad`` down to ``shape`` (the inverse of broadcasting)."""
    if grad.shape == shape:
        return grad
    lead = len(grad.shape) - len(shape)
    axes = list(range(lead)) + [lead + i for i, d in enumerate(shape) if d == 1 and grad.shape[lead + i] != 1]
    reduced = g.op("ReduceSum", grad, axes=axes, keep_dims=True)
    return g.op("Reshape", reduced, shape=list(shape)) if reduced.shape != shape else reduced


def _conv_attrs(node: Node) -> dict:
    keys = ("strides", "pads", "padding", "dilations", "groups", "data_format")
    return {k: node.attrs[k] for k in keys if k in node.attrs}


@_rule("Conv2D")
def _conv2d_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    dy = dys[0]
    x, w = node.inputs[0], node.inputs[1]
    attrs = _conv_attrs(node)
    dx = (g.op("Conv2DBackpropInput", [w, dy], input_size=list(x.shape), input_size_source=x.name, **attrs)
          if need[0] else None)
    dw = g.op("Conv2DBackpropFilter", [x, dy], filter_size=list(w.shape), **attrs) if need[1] else None
    grads: list[Tensor | None] = [dx, dw]
    if len(node.inputs) == 3 and need[2]:
        grads.append(g.op("BiasAddGrad", dy, data_format=attrs.get("data_format", "NCHW")))
    return grads


def _product_grads(g: Graph, op_type: str, a: Tensor, b: Tensor, dy: Tensor, ta: bool, tb: bool,
                   flags: tuple[str, str], need: list[bool]) -> tuple[Tensor | None, Tensor | None]:
    """Gradients of ``y = op(a, b)`` for a matrix product with transpose flags ``ta``/``tb``."""
    f1, f2 = flags

    def mm(x: Tensor, y: Tensor, t1: bool = False, t2: bool = False) -> Tensor:
        return g.op(op_type, [x, y], **{f1: t1, f2: t2})

    rules = {
        (False, False): (lambda: mm(dy, b, t2=True), lambda: mm(a, dy, t1=True)),
        (False, True): (lambda: mm(dy, b), lambda: mm(dy, a, t1=True)),
        (True, False): (lambda: mm(b, dy, t2=True), lambda: mm(a, dy)),
        (True, True): (lambda: mm(b, dy, True, True), lambda: mm(dy, a, True, True)),
    }
    make_da, make_db = rules[(ta, tb)]
    return (make_da() if need[0] else None), (make_db() if need[1] else None)


@_rule("MatMul", "MatMulV2")
def _matmul_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    dy = dys[0]
    ta, tb = bool(node.attrs.get("transpose_x1")), bool(node.attrs.get("transpose_x2"))
    da, db = _product_grads(g, node.type, node.inputs[0], node.inputs[1], dy, ta, tb,
                            ("transpose_x1", "transpose_x2"), need)
    grads: list[Tensor | None] = [da, db]
    if len(node.inputs) == 3 and need[2]:
        grads.append(unbroadcast(g, g.op("ReduceSum", dy, axes=[0]), node.inputs[2].shape))
    return grads


@_rule("BatchMatMul", "BatchMatMulV2")
def _batch_matmul_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    a, b = node.inputs
    ta, tb = bool(node.attrs.get("adj_x1")), bool(node.attrs.get("adj_x2"))
    da, db = _product_grads(g, node.type, a, b, dys[0], ta, tb, ("adj_x1", "adj_x2"), need)
    return [da and unbroadcast(g, da, a.shape), db and unbroadcast(g, db, b.shape)]


@_rule("BNTrainingUpdate")
def _bn_update_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    dy = dys[0]
    if dy is None:
        return [None] * len(node.inputs)
    x, scale = node.inputs[0], node.inputs[3]
    batch_mean, batch_var = node.output(3), node.output(4)
    diff_scale, diff_offset = g.op("BNTrainingUpdateGrad", [dy, x, batch_mean, batch_var])
    dx = g.op("BNTrainingReduceGrad", [dy, x, diff_scale, diff_offset, scale, batch_mean, batch_var])
    grads: list[Tensor | None] = [dx, None, None, diff_scale, diff_offset]
    return grads + [None] * (len(node.inputs) - len(grads))


@_rule("Relu")
def _relu_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    return [g.op("ReluGrad", [dys[0], node.output(0)])]


@_rule("Gelu")
def _gelu_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    return [g.op("GeluGrad", [dys[0], node.inputs[0], node.output(0)])]


@_rule("Add")
def _add_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    return [unbroadcast(g, dys[0], t.shape) if n else None for t, n in zip(node.inputs, need)]


@_rule("Sub")
def _sub_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    a, b = node.inputs
    da = unbroadcast(g, dys[0], a.shape) if need[0] else None
    if not need[1]:
        return [da, None]
    neg = g.op("Mul", [dys[0], _const(g, "neg_one", -1.0, dys[0].dtype)])
    return [da, unbroadcast(g, neg, b.shape)]


@_rule("Mul")
def _mul_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    a, b = node.inputs
    return [unbroadcast(g, g.op("Mul", [dys[0], b]), a.shape) if need[0] else None,
            unbroadcast(g, g.op("Mul", [dys[0], a]), b.shape) if need[1] else None]


@_rule("RealDiv")
def _div_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    a, b = node.inputs
    da = g.op("RealDiv", [dys[0], b])
    da_out = unbroadcast(g, da, a.shape) if need[0] else None
    if not need[1]:
        return [da_out, None]
    db = g.op("Mul", [g.op("RealDiv", [da, b]), a])
    return [da_out, unbroadcast(g, db, b.shape)]


@_rule("AddN")
def _add_n_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    return [dys[0]] * len(node.inputs)


@_rule("BiasAdd")
def _bias_add_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    fmt = node.attrs.get("data_format", "NCHW")
    return [dys[0], g.op("BiasAddGrad", dys[0], data_format=fmt) if need[1] else None]


@_rule("MaxPool")
def _max_pool_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    return [g.op("MaxPoolGrad", [node.inputs[0], node.output(0), dys[0]], **node.attrs)]


@_rule("ReduceMean", "ReduceSum")
def _reduce_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    x = node.inputs[0]
    axes = node.attrs.get("axes")
    axes = list(range(len(x.shape))) if axes is None else [a % len(x.shape) for a in (
        [axes] if isinstance(axes, int) else axes)]
    kept = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    dy = dys[0]
    if dy.shape != kept:
        dy = g.op("Reshape", dy, shape=list(kept))
    dx = g.op("BroadcastTo", dy, shape=list(x.shape), shape_source=x.name)
    if node.type == "ReduceMean":
        count = 1
        for i in axes:
            count *= x.shape[i]
        dx = g.op("Mul", [dx, _const(g, "reciprocal_count", 1.0 / count, dx.dtype)])
    return [dx]


@_rule("Softmax")
def _softmax_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    return [g.op("SoftmaxGrad", [node.output(0), dys[0]])]


@_rule("LayerNorm")
def _layer_norm_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    x, gamma, _ = node.inputs
    dx, dgamma, dbeta = g.op("LayerNormGrad", [dys[0], x, node.output(2), node.output(1), gamma])
    return [dx, dgamma, dbeta]


@_rule("Cast")
def _cast_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    return [g.op("Cast", dys[0], dst_type=node.inputs[0].dtype)]


@_rule("TransData")
def _trans_data_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    x, y = node.inputs[0], node.outputs[0]
    return [g.op("TransData", dys[0], src_format=y.format, dst_format=x.format, dst_shape=list(x.shape))]


@_rule("Reshape")
def _reshape_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    return [g.op("Reshape", dys[0], shape=list(node.inputs[0].shape))]


@_rule("Transpose")
def _transpose_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    rank = len(node.inputs[0].shape)
    perm = [int(p) for p in node.attrs.get("perm", list(range(rank))[::-1])]
    inverse = [perm.index(i) for i in range(rank)]
    return [g.op("Transpose", dys[0], perm=inverse)]


@_rule("BroadcastTo")
def _broadcast_to_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    return [unbroadcast(g, dys[0], node.inputs[0].shape)]


@_rule("SoftmaxCrossEntropyWithLogits")
def _softmax_xent_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    dloss = dys[0]
    backprop = node.output(1)
    scale = g.op("Reshape", dloss, shape=[dloss.shape[0], 1])
    return [g.op("Mul", [backprop, scale]), None]


@_rule("GatherV2")
def _gather_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    x, idx = node.inputs
    if int(node.attrs.get("axis", 0)) % len(x.shape) != 0:
        raise GraphBuildError(f"GatherV2 {node.name!r}: gradients are only supported for axis 0")
    return [g.op("UnsortedSegmentSum", [dys[0], idx], num_segments=x.shape[0]), None]


@_rule("HcomAllGather", "HcomReduceScatter")
def _gather_scatter_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    """AllGather and (sum) ReduceScatter are each other's gradient."""
    if node.attrs.get("reduction", "sum") != "sum":
        raise GraphBuildError(f"{node.type} {node.name!r}: gradients need reduction='sum'")
    dual = "HcomReduceScatter" if node.type == "HcomAllGather" else "HcomAllGather"
    attrs = {k: node.attrs[k] for k in ("rank_size", "group") if k in node.attrs}
    return [g.op(dual, dys[0], **attrs)]


def _tp_attrs(node: Node) -> dict:
    return {k: node.attrs[k] for k in ("group", "rank_size") if k in node.attrs}


@_rule("HcomAllReduce")
def _all_reduce_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    """A summing AllReduce in a model (Megatron's "reduce from the tensor-parallel region": every rank holds
    the same loss) passes each output's gradient to its input unchanged."""
    if node.attrs.get("reduction", "sum") != "sum":
        raise GraphBuildError(f"{node.type} {node.name!r}: gradients need reduction='sum'")
    return list(dys)


@_rule("Identity")
def _identity_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    """Identity, or Megatron's "copy to the tensor-parallel region" (``tp_region="copy"``): forward the input
    as it is, backward the sum of every rank's gradient (an AllReduce in the region's group)."""
    if node.attrs.get("tp_region") == "copy":
        return [g.op("HcomAllReduce", dys[0], reduction="sum", **_tp_attrs(node))]
    return [dys[0]]


@_rule("StopGradient")
def _stop_gradient(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    return [None]


@_rule("HcomAllToAllV")
def _all_to_all_v_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    """The gradient goes back the way the data came: send and receive counts swap."""
    _, send_counts, send_disp, recv_counts, recv_disp = node.inputs
    return [g.op("HcomAllToAllV", [dys[0], recv_counts, recv_disp, send_counts, send_disp], **_tp_attrs(node)),
            None, None, None, None]


@_rule("HcomAllToAll")
def _all_to_all_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    return [g.op("HcomAllToAll", dys[0], **_tp_attrs(node))]


@_rule("Exp")
def _exp_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    return [g.op("Mul", [dys[0], node.output(0)])]


@_rule("Log")
def _log_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    return [g.op("RealDiv", [dys[0], node.inputs[0]])]


@_rule("SparseSoftmaxCrossEntropyWithLogits")
def _sparse_xent_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    dloss = dys[0]
    return [g.op("Mul", [node.output(1), g.op("Reshape", dloss, shape=[dloss.shape[0], 1])]), None]


@_rule("FlashAttentionScore")
def _flash_attention_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    """FlashAttentionScoreGrad recomputes the scores from q, k, v and the forward's softmax statistics."""
    q, k, v = node.inputs[:3]
    smax, ssum, _, out = (node.output(i) for i in range(4))
    dq, dk, dv, _ = g.op("FlashAttentionScoreGrad", [q, k, v, dys[3], smax, ssum, out], **node.attrs)
    return [dq, dk, dv] + [None] * (len(node.inputs) - 3)


@_rule("RmsNorm")
def _rms_norm_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    x, gamma = node.inputs
    dx, dgamma = g.op("RmsNormGrad", [dys[0], x, node.output(1), gamma])
    return [dx, dgamma if dgamma.dtype == gamma.dtype else g.op("Cast", dgamma, dst_type=gamma.dtype)]


@_rule("ApplyRotaryPosEmb")
def _rotary_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    if dys[0] is None or dys[1] is None:
        raise GraphBuildError(f"{node.type} {node.name!r}: ApplyRotaryPosEmbGrad needs the gradients of both "
                              "the rotated query and the rotated key")
    dq, dk = g.op("ApplyRotaryPosEmbGrad", [dys[0], dys[1], node.inputs[2], node.inputs[3]], **node.attrs)
    return [dq, dk, None, None]


@_rule("SwiGlu")
def _swiglu_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    return [g.op("SwiGluGrad", [dys[0], node.inputs[0]], **node.attrs)]


@_rule("GroupedMatmul")
def _grouped_matmul_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    """y = x W_e row by row: dx = dy W_e^T (GroupedMatmul again), dW_e = x_e^T dy_e (group_type 2)."""
    if int(node.attrs.get("group_type", 0)) != 0:
        raise GraphBuildError(f"{node.type} {node.name!r}: gradients are supported for group_type 0")
    x, w, gl = node.inputs
    dy = dys[0]
    tw = bool(node.attrs.get("transpose_weight", False))
    dx = g.op("GroupedMatmul", [dy, w, gl], transpose_weight=not tw) if need[0] else None
    dw = None
    if need[1]:
        a, b = (dy, x) if tw else (x, dy)
        dw = g.op("GroupedMatmul", [a, b, gl], group_type=2, transpose_x=True)
    return [dx, dw, None]


@_rule("MoeGatingTopKSoftmax")
def _gating_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    """The router's gradient: the top-k weights' gradients scattered back over the experts, through the
    softmax (recomputed)."""
    x = node.inputs[0]
    probs = g.op("Softmax", x, axes=[-1])
    zeros = g.const("zeros", x.shape, x.dtype, value=0.0)
    full = g.op("ScatterElements", [zeros, node.output(1), dys[0]], axis=-1)
    return [g.op("SoftmaxGrad", [probs, full])]


@_rule("MoeInitRoutingV2")
def _init_routing_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    k = node.inputs[1].shape[1]
    return [g.op("MoeInitRoutingV2Grad", [dys[0], node.output(1)], top_k=k,
                 active_num=int(node.attrs.get("active_num", 0))), None]


@_rule("MoeFinalizeRoutingV2")
def _finalize_routing_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    expanded, row_idx, scales, idx = node.inputs
    d_expanded, d_scales = g.op("MoeFinalizeRoutingV2Grad", [dys[0], row_idx, expanded, scales, idx])
    return [d_expanded, None, d_scales, None]


@_rule("SplitVD")
def _split_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    parts = [dy if dy is not None else g.const(None, d.shape, d.dtype, value=0.0)
             for dy, d in zip(dys, node.outputs)]
    return [g.op("ConcatD", parts, concat_dim=int(node.attrs.get("split_dim", 0)))]


@_rule("ConcatD")
def _concat_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    dim = int(node.attrs.get("concat_dim", 0)) % len(node.outputs[0].shape)
    out = g.op("SplitVD", dys[0], size_splits=[t.shape[dim] for t in node.inputs], split_dim=dim)
    return list(out) if isinstance(out, tuple) else [out]


@_rule("DropOutGenMask", "NonZero", "Unique")
def _no_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    """Masks, indices and distinct values carry no gradient to their inputs."""
    return [None] * len(node.inputs)


def _needs_grad(g: Graph, loss: Tensor) -> set[int]:
    """Ids of nodes on some path from a trainable variable to the loss."""
    from_vars: set[int] = set()
    for n in g.nodes:
        if (n.type == "Variable" and n.attrs.get("trainable", True)) or any(
                t.node.id in from_vars for t in n.inputs):
            from_vars.add(n.id)
    to_loss = {loss.node.id}
    for n in reversed(g.nodes[: loss.node.id + 1]):
        if n.id in to_loss:
            to_loss.update(t.node.id for t in n.inputs)
    return from_vars & to_loss


def backward_pass(graph: Graph, seeds: Sequence[tuple[Tensor, Tensor]], nodes: Sequence[Node],
                  wrt: Sequence[Tensor], on_ready: Callable[[Tensor, Tensor], None] | None = None
                  ) -> dict[Tensor, Tensor]:
    """Append the gradient ops of ``seeds`` ((forward tensor, its gradient) pairs) through the forward
    ``nodes``, in reverse creation order, down to the ``wrt`` tensors; returns each ``wrt`` tensor's
    gradient, in the order they became final (those no seed depends on are left out).

    A ``wrt`` tensor is a leaf: its producer is not differentiated.  Its gradient is final when the walk
    reaches its producer, or, for a tensor made outside ``nodes`` (a weight cast once and used by every
    micro-batch, an activation received from another pipeline stage), right after its last consumer's
    gradient ops (the consumer created first): ``on_ready(tensor, gradient)`` runs then, so what reduces a
    gradient (a data-parallel bucket) can be placed as early as the gradient exists.
    Gradient ops take their names from the current name scope (``add_training`` uses ``gradients``).
    """
    order = sorted(nodes, key=lambda n: n.id)
    in_range = {n.id for n in order}
    leaves = {(t.node.id, t.index): t for t in wrt}
    from_leaves: set[int] = set()
    for n in order:
        if n.type != "StopGradient" and any((t.node.id, t.index) in leaves or t.node.id in from_leaves
                                            for t in n.inputs):
            from_leaves.add(n.id)
    to_seed = {t.node.id for t, _ in seeds}
    for n in reversed(order):
        if n.id in to_seed:
            to_seed.update(t.node.id for t in n.inputs)
    needs = from_leaves & to_seed
    # a leaf made outside the range is final after its earliest consumer that is differentiated
    last_use: dict[int, list[tuple[int, int]]] = {}
    for key in leaves:
        if key[0] not in in_range:
            users = [n.id for n in order if n.id in needs and any((t.node.id, t.index) == key for t in n.inputs)]
            if users:
                last_use.setdefault(min(users), []).append(key)
    pending: dict[tuple[int, int], list[Tensor]] = {}
    for t, g in seeds:
        pending.setdefault((t.node.id, t.index), []).append(g)
    done: dict[Tensor, Tensor] = {}

    def total(key: tuple[int, int], scope: str) -> Tensor | None:
        parts = pending.pop(key, [])
        if len(parts) > 1:
            with graph.name_scope(scope):
                parts = [graph.op("AddN", parts)]
        return parts[0] if parts else None

    def finish(key: tuple[int, int], scope: str) -> None:
        grad = total(key, scope)
        if grad is not None:
            done[leaves[key]] = grad
            if on_ready is not None:
                on_ready(leaves[key], grad)

    for node in reversed(order):
        produced = [(node.id, i) for i in range(len(node.outputs)) if (node.id, i) in leaves]
        for key in produced:
            finish(key, f"{node.name}_grad")
        if node.id not in needs or produced:
            continue
        dys = [total((node.id, i), f"{node.name}_grad") for i in range(len(node.outputs))]
        if all(d is None for d in dys):
            continue
        rule = _RULES.get(node.type)
        if rule is None:
            raise GraphBuildError(f"add_training: no gradient rule for {node.type} {node.name!r}")
        need = [t.node.id in needs or (t.node.id, t.index) in leaves for t in node.inputs]
        with graph.name_scope(f"{node.name}_grad"):
            grads = rule(graph, node, dys, need)
        for t, gr in zip(node.inputs, grads):
            key = (t.node.id, t.index)
            if gr is not None and (t.node.id in needs or key in leaves):
                pending.setdefault(key, []).append(gr)
        for key in last_use.get(node.id, ()):
            finish(key, f"{node.name}_grad")
    return done


def gradient_buckets(grads: Sequence[tuple[Node, Tensor]], bucket_bytes: int) -> list[list[tuple[Node, Tensor]]]:
    """``grads`` in order, cut into buckets of at most ``bucket_bytes`` (a larger gradient alone): what one
    fused gradient collective reduces."""
    buckets: list[list[tuple[Node, Tensor]]] = [[]]
    size = 0
    for var, grad in grads:
        if buckets[-1] and size + grad.desc.nbytes > bucket_bytes:
            buckets.append([])
            size = 0
        buckets[-1].append((var, grad))
        size += grad.desc.nbytes
    return [b for b in buckets if b]


@toolkit_entry
def add_training(graph: Graph, loss: Tensor, optimizer: str = "Momentum", world_size: int = 1,
                 bucket_bytes: int = DEFAULT_BUCKET_BYTES, learning_rate: float = 0.1) -> TrainingInfo:
    """Append backward, gradient AllReduce (``world_size > 1``), optimizer updates and NetOutput."""
    if optimizer not in OPTIMIZERS:
        raise GraphBuildError(f"add_training: optimizer {optimizer!r} is not supported; "
                              f"accepted: {', '.join(OPTIMIZERS)}")
    if not isinstance(world_size, int) or world_size < 1:
        raise GraphBuildError(f"add_training: world_size must be an int >= 1, got {world_size!r}")
    if not isinstance(loss, Tensor) or loss.node.name not in graph or graph.node(loss.node.name) is not loss.node:
        raise GraphBuildError(f"add_training: loss must be a Tensor of graph {graph.name!r}")
    if graph.net_output is not None:
        raise GraphBuildError(f"add_training: graph {graph.name!r} already has outputs; call add_training "
                              "before graph.output (it adds the NetOutput itself)")
    if graph.is_training:
        raise GraphBuildError(f"add_training: graph {graph.name!r} is already a training graph")

    needs = _needs_grad(graph, loss)
    trainable = [n for n in graph.nodes if n.type == "Variable" and n.attrs.get("trainable", True) and n.id in needs]
    if not trainable:
        raise GraphBuildError("add_training: the loss does not depend on any trainable variable")

    graph.forward_end = len(graph.nodes)
    info = TrainingInfo(loss=loss, backward_start=len(graph.nodes))
    with graph.name_scope("gradients"):
        fill = graph.const("Fill", loss.shape, loss.dtype, value=1.0)
        grads = backward_pass(graph, [(loss, fill)], graph.nodes[: graph.forward_end],
                              [v.output(0) for v in trainable])
        var_grads = [(t.node, g) for t, g in grads.items()]
        reduced: dict[int, Tensor] = {}
        if world_size > 1:
            for k, bucket in enumerate(gradient_buckets(var_grads, bucket_bytes)):
                outs = graph.op("HcomAllReduce", [gr for _, gr in bucket], name=f"HcomAllReduce_{k}",
                                reduction="sum", group="hccl_world_group", rank_size=world_size, fusion=k + 1)
                outs = outs if isinstance(outs, tuple) else (outs,)
                info.all_reduce.append(outs[0].node)
                for (var, _), out in zip(bucket, outs):
                    reduced[var.id] = out
    info.gradients = {var.name: reduced.get(var.id, gr) for var, gr in var_grads}
    info.updates = add_optimizer(graph, info.gradients, [v for v, _ in var_grads], optimizer, learning_rate)
    graph.output([loss], control_inputs=info.updates)
    graph.is_training = True
    return info


def add_optimizer(graph: Graph, gradients: dict[str, Tensor], variables: Sequence[Node], optimizer: str,
                  lr: float) -> list[Node]:
    """The optimizer update of each variable (``gradients``: by variable name), scoped ``<optimizer>/``,
    with its state (momentum accumulator, or AdamW's m and v) as untrainable variables; returns the updates."""
    updates: list[Node] = []
    with graph.name_scope(optimizer):
        lr_t = graph.const("learning_rate", (), "float32", value=lr)
        if optimizer == "Momentum":
            momentum = graph.const("momentum", (), "float32", value=0.9)
        else:
            scalars = [graph.const(n, (), "float32", value=v) for n, v in (
                ("beta1_power", 0.9), ("beta2_power", 0.999))]
            wd, b1, b2, eps = (graph.const(n, (), "float32", value=v) for n, v in (
                ("weight_decay", 0.01), ("beta1", 0.9), ("beta2", 0.999), ("epsilon", 1e-8)))
        for var in variables:
            grad = gradients[var.name]
            desc = var.outputs[0]
            with graph.name_scope(f"update_{var.name}"):
                if optimizer == "Momentum":
                    accum = graph.variable("accum", desc.shape, desc.dtype, trainable=False)
                    update = graph.op("ApplyMomentum", [var.output(0), accum, lr_t, grad, momentum])
                else:
                    m = graph.variable("m", desc.shape, desc.dtype, trainable=False)
                    v = graph.variable("v", desc.shape, desc.dtype, trainable=False)
                    update = graph.op("ApplyAdamW", [var.output(0), m, v, *scalars, lr_t, wd, b1, b2, eps, grad])[0]
            updates.append(update.node)
    return updates
