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
from typing import Callable

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


@_rule("BatchMatMul")
def _batch_matmul_grad(g: Graph, node: Node, dys: list[Tensor | None], need: list[bool]) -> list[Tensor | None]:
    a, b = node.inputs
    ta, tb = bool(node.attrs.get("adj_x1")), bool(node.attrs.get("adj_x2"))
    da, db = _product_grads(g, "BatchMatMul", a, b, dys[0], ta, tb, ("adj_x1", "adj_x2"), need)
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


def _buckets(grads: list[tuple[Node, Tensor]], bucket_bytes: int) -> list[list[tuple[Node, Tensor]]]:
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
    pending: dict[tuple[int, int], list[Tensor]] = {}
    with graph.name_scope("gradients"):
        pending[(loss.node.id, loss.index)] = [graph.const("Fill", loss.shape, loss.dtype, value=1.0)]
        var_grads: list[tuple[Node, Tensor]] = []
        for node in reversed(graph.nodes[: graph.forward_end]):
            if node.id not in needs:
                continue
            dys: list[Tensor | None] = []
            for i in range(len(node.outputs)):
                parts = pending.pop((node.id, i), [])
                if len(parts) > 1:
                    with graph.name_scope(f"{node.name}_grad"):
                        parts = [graph.op("AddN", parts)]
                dys.append(parts[0] if parts else None)
            if node.type == "Variable":
                if dys[0] is not None:
                    var_grads.append((node, dys[0]))
                continue
            if all(d is None for d in dys):
                continue
            rule = _RULES.get(node.type)
            if rule is None:
                raise GraphBuildError(f"add_training: no gradient rule for {node.type} {node.name!r}")
            need = [t.node.id in needs for t in node.inputs]
            with graph.name_scope(f"{node.name}_grad"):
                grads = rule(graph, node, dys, need)
            for t, gr in zip(node.inputs, grads):
                if gr is not None and t.node.id in needs:
                    pending.setdefault((t.node.id, t.index), []).append(gr)

        reduced: dict[int, Tensor] = {}
        if world_size > 1:
            for k, bucket in enumerate(_buckets(var_grads, bucket_bytes)):
                outs = graph.op("HcomAllReduce", [gr for _, gr in bucket], name=f"HcomAllReduce_{k}",
                                reduction="sum", group="hccl_world_group", rank_size=world_size, fusion=k + 1)
                outs = outs if isinstance(outs, tuple) else (outs,)
                info.all_reduce.append(outs[0].node)
                for (var, _), out in zip(bucket, outs):
                    reduced[var.id] = out
    info.gradients = {var.name: reduced.get(var.id, gr) for var, gr in var_grads}
    _add_optimizer(graph, info, [v for v, _ in var_grads], optimizer, learning_rate)
    graph.output([loss], control_inputs=info.updates)
    graph.is_training = True
    return info


def _add_optimizer(graph: Graph, info: TrainingInfo, variables: list[Node], optimizer: str, lr: float) -> None:
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
            grad = info.gradients[var.name]
            desc = var.outputs[0]
            with graph.name_scope(f"update_{var.name}"):
                if optimizer == "Momentum":
                    accum = graph.variable("accum", desc.shape, desc.dtype, trainable=False)
                    update = graph.op("ApplyMomentum", [var.output(0), accum, lr_t, grad, momentum])
                else:
                    m = graph.variable("m", desc.shape, desc.dtype, trainable=False)
                    v = graph.variable("v", desc.shape, desc.dtype, trainable=False)
                    update = graph.op("ApplyAdamW", [var.output(0), m, v, *scalars, lr_t, wd, b1, b2, eps, grad])[0]
            info.updates.append(update.node)
