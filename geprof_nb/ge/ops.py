"""The op catalogue: for each op type its engine, its inputs, how its output
shapes follow from its inputs, and what it costs (FLOPs, bytes, parallel tiles).

Engines are GE's: ``AI_CORE`` (cube: convolutions and matrix products),
``AI_VECTOR_CORE`` (element-wise and reductions), ``AI_CPU``, ``HCCL``
(collectives) and ``GE_LOCAL`` (Data, Const, Variable, NetOutput, Reshape: no
device task).  On a chip without separate vector cores (Ascend910A) vector ops
run on the AI Core, as on real hardware.  A cube op with vector work besides
(``OpCost.vector_ops``: FlashAttentionScore's softmax) runs both at once, a
MIX_AIC task on an A2 chip.

FLOPs count 2 per multiply-accumulate.  The "4.1 GFLOPs" usually quoted for
ResNet-50 counts multiply-accumulates, i.e. 8.2 GFLOPs here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..cost_model import OpCost
from .tensor import GraphBuildError, TensorDesc, canonical_dtype, canonical_format

if TYPE_CHECKING:
    from .graph import Node, Tensor

ENGINES = ("AI_CORE", "AI_VECTOR_CORE", "AI_CPU", "HCCL", "GE_LOCAL")


class InferContext:
    """What a shape rule sees: inputs, attributes, and a way to fail with the op's name."""

    def __init__(self, op_type: str, name: str, ins: list[TensorDesc], attrs: dict[str, Any]) -> None:
        self.type = op_type
        self.name = name
        self.ins = ins
        self.attrs = attrs

    def fail(self, message: str) -> GraphBuildError:
        return GraphBuildError(f"{self.type} {self.name!r}: {message}")

    def attr(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)

    def rank(self, i: int, *ranks: int, what: str = "") -> TensorDesc:
        d = self.ins[i]
        if d.rank not in ranks:
            label = what or f"input {i}"
            want = " or ".join(str(r) for r in ranks)
            raise self.fail(f"{label} must have rank {want}, got shape {list(d.shape)}")
        return d

    def same_dtype(self, *idx: int) -> str:
        dtypes = {self.ins[i].dtype for i in idx}
        if len(dtypes) > 1:
            raise self.fail(f"inputs {list(idx)} must have the same dtype, got {sorted(dtypes)}")
        return self.ins[idx[0]].dtype


InferFn = Callable[[InferContext], list[TensorDesc]]
CostFn = Callable[[list[TensorDesc], list[TensorDesc], dict[str, Any]], OpCost]
ReadsFn = Callable[[list[TensorDesc], list[TensorDesc], dict[str, Any]], list[int]]
#: Ops whose outputs are tensors stored in HBM across steps (weights, the KV cache).
STORED_TYPES = ("Variable", "Const")


@dataclass(frozen=True)
class OpDef:
    """One op type of the catalogue."""

    type: str
    engine: str
    inputs: tuple[str, ...]  # input names; a name starting with '*' is variadic
    infer: InferFn
    cost: CostFn
    min_inputs: int = -1
    max_inputs: int = -1
    #: Attributes holding a concrete shape, where -1 is an unknown (dynamic) dim.
    shape_attrs: tuple[str, ...] = ()
    #: The bytes the op reads of each input, where it does not read every byte of every input (a gather's rows,
    #: the cache blocks attention reads); None: all of them.  ``cost`` counts the same bytes in ``bytes_in``.
    reads: ReadsFn | None = None
    #: Output i is input ``aliases[i]`` (a view, or written in place), so it is stored if that input is.
    aliases: tuple[int, ...] = ()

    def input_reads(self, ins: list[TensorDesc], outs: list[TensorDesc], attrs: dict[str, Any]) -> list[int]:
        """The bytes one execution reads of each input."""
        return self.reads(ins, outs, attrs) if self.reads is not None else [d.nbytes for d in ins]

    def _bounds(self) -> tuple[int, int | None]:
        if self.min_inputs >= 0:
            return self.min_inputs, (None if self.max_inputs < 0 else self.max_inputs)
        if any(n.startswith("*") for n in self.inputs):
            return max(1, len(self.inputs)), None
        return len(self.inputs), len(self.inputs)

    def infer_shapes(self, name: str, ins: list[TensorDesc], attrs: dict[str, Any]) -> list[TensorDesc]:
        lo, hi = self._bounds()
        if len(ins) < lo or (hi is not None and len(ins) > hi):
            want = f"{lo}" if lo == hi else (f"at least {lo}" if hi is None else f"{lo} to {hi}")
            names = ", ".join(n.lstrip("*") + ("..." if n.startswith("*") else "") for n in self.inputs)
            raise GraphBuildError(f"{self.type} {name!r}: expects {want} inputs ({names}), got {len(ins)}")
        return self.infer(InferContext(self.type, name, ins, attrs))


_CATALOGUE: dict[str, OpDef] = {}


def _register(op_type: str, engine: str, inputs: Sequence[str], infer: InferFn, cost: CostFn,
              min_inputs: int = -1, max_inputs: int = -1, shape_attrs: tuple[str, ...] = (),
              reads: ReadsFn | None = None, aliases: tuple[int, ...] = ()) -> None:
    assert engine in ENGINES, engine
    _CATALOGUE[op_type] = OpDef(op_type, engine, tuple(inputs), infer, cost, min_inputs, max_inputs, shape_attrs,
                                reads, aliases)


def get_op(op_type: str) -> OpDef:
    return _CATALOGUE[op_type]


def known_op_types() -> list[str]:
    return sorted(_CATALOGUE)


def op_cost(node: Node, read_before: set[Node] | None = None) -> OpCost:
    """The cost of one execution of ``node``, with the bytes it reads of stored tensors (:func:`stored_source`)
    in ``stored_bytes_in``.  ``read_before``: the stored tensors earlier ops of the step read, which the L2 may
    hold again (their bytes are not counted); the ones ``node`` reads are added to it.  None: every read is
    counted, as the first of the step."""
    ins = [t.desc for t in node.inputs]
    op = node.op_def
    cost = op.cost(ins, node.outputs, node.attrs)
    if op.engine == "GE_LOCAL":  # no device task reads anything
        return cost
    stored = 0
    for tensor, read in zip(node.inputs, op.input_reads(ins, node.outputs, node.attrs)):
        source = stored_source(tensor)
        if source is None or not read or (read_before is not None and source in read_before):
            continue
        stored += read
        if read_before is not None:
            read_before.add(source)
    return replace(cost, stored_bytes_in=stored) if stored else cost


def stored_source(tensor: Tensor) -> Node | None:
    """The Variable or Const whose stored memory ``tensor`` is (through views and in-place writes), else None."""
    node, index = tensor.node, tensor.index
    while node.type not in STORED_TYPES:
        aliases = node.op_def.aliases
        if index >= len(aliases):
            return None
        source = node.inputs[aliases[index]]
        node, index = source.node, source.index
    return node


# ---------------------------------------------------------------- shape helpers
def _numel(shape: Sequence[int]) -> int:
    return math.prod(shape) if shape else 1


def _broadcast(ctx: InferContext, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for i in range(max(len(a), len(b))):
        x = a[-1 - i] if i < len(a) else 1
        y = b[-1 - i] if i < len(b) else 1
        if x != y and 1 not in (x, y):
            raise ctx.fail(f"shapes {list(a)} and {list(b)} cannot be broadcast (dimension {x} vs {y})")
        out.append(max(x, y))
    return tuple(reversed(out))


def _pair(ctx: InferContext, key: str, default: int) -> tuple[int, int]:
    """An (h, w) attribute given as int, 2-tuple, or 4-tuple in NCHW order."""
    v = ctx.attr(key, default)
    if isinstance(v, int):
        return v, v
    v = tuple(int(x) for x in v)
    if len(v) == 2:
        return v
    if len(v) == 4:
        return (v[2], v[3]) if ctx.attr("data_format", "NCHW") == "NCHW" else (v[1], v[2])
    raise ctx.fail(f"attribute {key} must be an int, 2 or 4 ints, got {v!r}")


def _nchw(ctx: InferContext, d: TensorDesc) -> tuple[int, int, int, int]:
    fmt = ctx.attr("data_format", "NCHW")
    if fmt not in ("NCHW", "NHWC"):
        raise ctx.fail(f"data_format must be 'NCHW' or 'NHWC', got {fmt!r}")
    n, a, b, c = d.shape
    return (n, a, b, c) if fmt == "NCHW" else (n, c, a, b)


def _from_nchw(ctx: InferContext, n: int, c: int, h: int, w: int) -> tuple[int, int, int, int]:
    return (n, c, h, w) if ctx.attr("data_format", "NCHW") == "NCHW" else (n, h, w, c)


def _window_out(ctx: InferContext, size: int, k: int, s: int, d: int, pad: Any, axis: int) -> tuple[int, int]:
    """Output size and total padding of a sliding window along one axis."""
    eff = (k - 1) * d + 1
    if pad == "SAME":
        out = -(-size // s)
        total = max(0, (out - 1) * s + eff - size)
    elif pad == "VALID":
        out = (size - eff) // s + 1
        total = 0
    else:
        total = pad[2 * axis] + pad[2 * axis + 1]
        out = (size + total - eff) // s + 1
    if out < 1:
        raise ctx.fail(f"window {k} (dilation {d}, stride {s}) does not fit input size {size}")
    return out, total


def _pads(ctx: InferContext) -> Any:
    p = ctx.attr("pads", ctx.attr("padding", "VALID"))
    if isinstance(p, str):
        if p.upper() not in ("SAME", "VALID"):
            raise ctx.fail(f"pads must be 'SAME', 'VALID', an int or 4 ints, got {p!r}")
        return p.upper()
    if isinstance(p, int):
        return (p, p, p, p)
    p = tuple(int(x) for x in p)
    if len(p) == 2:
        return (p[0], p[0], p[1], p[1])
    if len(p) != 4:
        raise ctx.fail(f"pads must be 'SAME', 'VALID', an int or 4 ints (top, bottom, left, right), got {p!r}")
    return p


def _conv_out(ctx: InferContext, x: TensorDesc, filter_shape: tuple[int, ...]) -> tuple[int, ...]:
    n, c, h, w = _nchw(ctx, x)
    cout, cin_g, kh, kw = filter_shape
    groups = int(ctx.attr("groups", 1))
    if c != cin_g * groups:
        raise ctx.fail(f"input has {c} channels but the filter {list(filter_shape)} expects "
                       f"{cin_g * groups} ({cin_g} x groups={groups})")
    sh, sw = _pair(ctx, "strides", 1)
    dh, dw = _pair(ctx, "dilations", 1)
    pads = _pads(ctx)
    ho, _ = _window_out(ctx, h, kh, sh, dh, pads, 0)
    wo, _ = _window_out(ctx, w, kw, sw, dw, pads, 1)
    return _from_nchw(ctx, n, cout, ho, wo)


def _as_shape(ctx: InferContext, key: str) -> tuple[int, ...]:
    v = ctx.attr(key)
    if v is None:
        raise ctx.fail(f"attribute {key} is required")
    try:
        return tuple(int(x) for x in v)
    except (TypeError, ValueError):
        raise ctx.fail(f"attribute {key} must be a list of ints, got {v!r}") from None


def _axes(ctx: InferContext, rank: int, key: str = "axes", default: Any = None) -> list[int]:
    v = ctx.attr(key, default)
    if v is None:
        return list(range(rank))
    if isinstance(v, int):
        v = [v]
    out = []
    for a in v:
        a = int(a)
        if not -rank <= a < rank:
            raise ctx.fail(f"axis {a} is out of range for rank {rank}")
        out.append(a % rank)
    return sorted(set(out))


def _c0(dtype: str) -> int:
    return 32 if dtype in ("int8", "uint8") else 16


# ------------------------------------------------------------------ cost helpers
def _bytes(descs: Sequence[TensorDesc]) -> int:
    return sum(d.nbytes for d in descs)


def elementwise(ops_per_element: float, tile_elems: int = 16384) -> CostFn:
    """Vector cost: ``ops_per_element`` per output element, all tensors read/written once."""

    def cost(ins: list[TensorDesc], outs: list[TensorDesc], attrs: dict[str, Any]) -> OpCost:
        n = max([d.numel for d in outs] + [d.numel for d in ins] + [1])
        return OpCost(vector_ops=int(n * ops_per_element), bytes_in=_bytes(ins), bytes_out=_bytes(outs),
                      tiles=max(1, -(-n // tile_elems)))

    return cost


CUBE_TILE_BYTES = 512 * 1024  # input bytes one core of a cube op loads, at most, before tiling splits further


def _cube_cost(flops: int, ins: list[TensorDesc], outs: list[TensorDesc], inner_dim: int = 0) -> OpCost:
    out_elems = max(d.numel for d in outs)
    # tiling splits the output over cores; a small output with big weights is split along N too,
    # so that the weight load is spread over several cores' bandwidth
    in_bytes = _bytes(ins)
    tiles = max(1, -(-out_elems // 16384), -(-flops // 50_000_000), -(-in_bytes // CUBE_TILE_BYTES))
    return OpCost(flops=flops, bytes_in=in_bytes, bytes_out=_bytes(outs), tiles=tiles, inner_dim=inner_dim)


def _no_cost(ins: list[TensorDesc], outs: list[TensorDesc], attrs: dict[str, Any]) -> OpCost:
    return OpCost(tiles=0)


# ------------------------------------------------------------------- GE_LOCAL ops
def _source(ctx: InferContext) -> list[TensorDesc]:
    raise ctx.fail("is created with Graph.data / variable / const")


for _t in ("Data", "Variable", "Const"):
    _register(_t, "GE_LOCAL", (), _source, _no_cost)
_register("NetOutput", "GE_LOCAL", ("*x",), lambda ctx: [], _no_cost, min_inputs=0)


def _reshape(ctx: InferContext) -> list[TensorDesc]:
    x = ctx.ins[0]
    shape = list(_as_shape(ctx, "shape"))
    if shape.count(-1) > 1 or any(d < 1 and d != -1 for d in shape):
        raise ctx.fail(f"shape {shape} is not valid: dims must be >= 1, with at most one -1 (inferred)")
    known = _numel([d for d in shape if d != -1])
    if -1 in shape:
        if known == 0 or x.numel % known:
            raise ctx.fail(f"cannot reshape {list(x.shape)} ({x.numel} elements) to {shape}")
        shape[shape.index(-1)] = x.numel // known
    if _numel(shape) != x.numel:
        raise ctx.fail(f"cannot reshape {list(x.shape)} ({x.numel} elements) to {shape} ({_numel(shape)} elements)")
    return [x.with_(shape=tuple(shape), format="ND", origin_shape=None)]


_register("Reshape", "GE_LOCAL", ("x",), _reshape, _no_cost, aliases=(0,))


def _alias(ctx: InferContext) -> list[TensorDesc]:
    return [ctx.ins[0]]


# Identity (GE folds it away: no task) marks where a framework's autograd function sits, e.g. Megatron's
# "copy to the tensor-parallel region" (forward identity, backward AllReduce: its ``tp_region`` attribute);
# StopGradient passes a tensor on and no gradient back.
_register("Identity", "GE_LOCAL", ("x",), _alias, _no_cost, aliases=(0,))
_register("StopGradient", "GE_LOCAL", ("x",), _alias, _no_cost, aliases=(0,))


# --------------------------------------------------------------------- AI_CPU ops
def _get_next(ctx: InferContext) -> list[TensorDesc]:
    shapes = ctx.attr("output_shapes")
    types = ctx.attr("output_types")
    if not shapes:
        raise ctx.fail("attribute output_shapes (a list of shapes) is required")
    types = types or ["float16"] * len(shapes)
    if len(types) != len(shapes):
        raise ctx.fail(f"output_types has {len(types)} entries but output_shapes has {len(shapes)}")
    out = []
    for i, (shape, t) in enumerate(zip(shapes, types)):
        dims = tuple(int(d) for d in shape)
        if any(d < 1 for d in dims):
            raise ctx.fail(f"output_shapes[{i}] = {list(dims)}: every dimension must be >= 1")
        out.append(TensorDesc(dims, canonical_dtype(t, f"{ctx.type} {ctx.name!r} output_types")))
    return out


def _get_next_cost(ins: list[TensorDesc], outs: list[TensorDesc], attrs: dict[str, Any]) -> OpCost:
    return OpCost(bytes_out=_bytes(outs), tiles=1)


for _t in ("GetNext", "IteratorV2"):
    _register(_t, "AI_CPU", (), _get_next, _get_next_cost)


def _aicpu_cost(ins: list[TensorDesc], outs: list[TensorDesc], attrs: dict[str, Any]) -> OpCost:
    """AI CPU kernels: one task that reads its inputs and writes its outputs once."""
    return OpCost(bytes_in=_bytes(ins), bytes_out=_bytes(outs), tiles=1)


def _dropout_gen_mask(ctx: InferContext) -> list[TensorDesc]:
    """The dropout bit mask for a tensor of attribute ``shape``.

    One bit per element, padded to whole 128-element blocks (16 bytes each) as
    Ascend's DropOutGenMask lays it out: ``ceil(numel / 128) * 16`` uint8.  The
    ``shape`` input is the same shape as a 1-D int32/int64 const; ``prob`` a scalar.
    """
    shape_in, prob = ctx.ins
    shape = _as_shape(ctx, "shape")
    if not shape or any(d < 1 for d in shape):
        raise ctx.fail(f"attribute shape must be a non-empty list of dims >= 1, got {list(shape)}")
    if shape_in.rank != 1 or shape_in.dtype not in ("int32", "int64"):
        raise ctx.fail(f"input shape must be a 1-D int32/int64 tensor, got {shape_in}")
    if shape_in.shape[0] != len(shape):
        raise ctx.fail(f"input shape has {shape_in.shape[0]} elements but attribute shape {list(shape)} "
                       f"has {len(shape)} dims")
    if prob.numel != 1 or prob.dtype not in ("float16", "float32"):
        raise ctx.fail(f"prob must be a float16/float32 scalar, got {prob}")
    return [TensorDesc((-(-_numel(shape) // 128) * 16,), "uint8", "ND")]


def _non_zero(ctx: InferContext) -> list[TensorDesc]:
    """Indices of the non-zero elements: int64 ``[n, rank]`` with n at most ``max_output``
    (default: every element, the bound GE allocates before the shape is known)."""
    x = ctx.ins[0]
    if x.rank == 0:
        raise ctx.fail("x must have rank >= 1, got a scalar")
    n = ctx.attr("max_output", x.numel)
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= x.numel:
        raise ctx.fail(f"attribute max_output must be an int in [1, {x.numel}] (elements of x), got {n!r}")
    return [TensorDesc((n, x.rank), "int64", "ND")]


def _unique(ctx: InferContext) -> list[TensorDesc]:
    """``y`` (the distinct values, at most all of them) and ``idx`` (position of each element in ``y``)."""
    x = ctx.rank(0, 1, what="x")
    out_idx = ctx.attr("out_idx", "int32")
    if out_idx not in ("int32", "int64"):
        raise ctx.fail(f"attribute out_idx must be 'int32' or 'int64', got {out_idx!r}")
    return [x.with_(format="ND"), TensorDesc(x.shape, out_idx, "ND")]


_register("DropOutGenMask", "AI_CPU", ("shape", "prob"), _dropout_gen_mask, _aicpu_cost)
_register("NonZero", "AI_CPU", ("x",), _non_zero, _aicpu_cost)
_register("Unique", "AI_CPU", ("x",), _unique, _aicpu_cost)


# ----------------------------------------------------------------------- cube ops
def _conv2d(ctx: InferContext) -> list[TensorDesc]:
    x = ctx.rank(0, 4, what="x")
    f = ctx.rank(1, 4, what="filter")
    dtype = ctx.same_dtype(0, 1)
    out = _conv_out(ctx, x, f.shape)
    if len(ctx.ins) == 3 and ctx.ins[2].shape != (f.shape[0],):
        raise ctx.fail(f"bias must have shape [{f.shape[0]}], got {list(ctx.ins[2].shape)}")
    return [TensorDesc(out, dtype, x.format)]


def _conv_flops(out: tuple[int, ...], filter_shape: tuple[int, ...], attrs: dict[str, Any]) -> int:
    fmt = attrs.get("data_format", "NCHW")
    n, cout, ho, wo = out if fmt == "NCHW" else (out[0], out[3], out[1], out[2])
    _, cin_g, kh, kw = filter_shape
    return 2 * n * ho * wo * cout * cin_g * kh * kw


def _conv2d_cost(ins: list[TensorDesc], outs: list[TensorDesc], attrs: dict[str, Any]) -> OpCost:
    return _cube_cost(_conv_flops(outs[0].shape, ins[1].shape, attrs), ins, outs)


_register("Conv2D", "AI_CORE", ("x", "filter", "bias"), _conv2d, _conv2d_cost, 2, 3)


def _conv2d_backprop_input(ctx: InferContext) -> list[TensorDesc]:
    f = ctx.rank(0, 4, what="filter")
    dy = ctx.rank(1, 4, what="out_backprop")
    dtype = ctx.same_dtype(0, 1)
    input_size = _as_shape(ctx, "input_size")
    if len(input_size) != 4:
        raise ctx.fail(f"input_size must have 4 dims, got {list(input_size)}")
    expect = _conv_out(ctx, TensorDesc(input_size, dtype, dy.format), f.shape)
    if expect != dy.shape:
        raise ctx.fail(f"out_backprop has shape {list(dy.shape)} but a convolution of input_size "
                       f"{list(input_size)} with filter {list(f.shape)} gives {list(expect)}")
    return [TensorDesc(input_size, dtype, dy.format)]


def _conv2d_backprop_input_cost(ins: list[TensorDesc], outs: list[TensorDesc], attrs: dict[str, Any]) -> OpCost:
    return _cube_cost(_conv_flops(ins[1].shape, ins[0].shape, attrs), ins, outs)


_register("Conv2DBackpropInput", "AI_CORE", ("filter", "out_backprop"), _conv2d_backprop_input,
          _conv2d_backprop_input_cost, shape_attrs=("input_size",))


def _conv2d_backprop_filter(ctx: InferContext) -> list[TensorDesc]:
    x = ctx.rank(0, 4, what="x")
    dy = ctx.rank(1, 4, what="out_backprop")
    dtype = ctx.same_dtype(0, 1)
    filter_size = _as_shape(ctx, "filter_size")
    if len(filter_size) != 4:
        raise ctx.fail(f"filter_size must have 4 dims, got {list(filter_size)}")
    expect = _conv_out(ctx, x, filter_size)
    if expect != dy.shape:
        raise ctx.fail(f"out_backprop has shape {list(dy.shape)} but a convolution of x {list(x.shape)} "
                       f"with filter_size {list(filter_size)} gives {list(expect)}")
    return [TensorDesc(filter_size, ctx.attr("dtype", dtype), "ND")]


def _conv2d_backprop_filter_cost(ins: list[TensorDesc], outs: list[TensorDesc], attrs: dict[str, Any]) -> OpCost:
    return _cube_cost(_conv_flops(ins[1].shape, outs[0].shape, attrs), ins, outs)


_register("Conv2DBackpropFilter", "AI_CORE", ("x", "out_backprop"), _conv2d_backprop_filter,
          _conv2d_backprop_filter_cost, shape_attrs=("filter_size",))


def _matmul(ctx: InferContext) -> list[TensorDesc]:
    a = ctx.rank(0, 2, what="x1")
    b = ctx.rank(1, 2, what="x2")
    dtype = ctx.same_dtype(0, 1)
    m, k1 = a.shape[::-1] if ctx.attr("transpose_x1", False) else a.shape
    k2, n = b.shape[::-1] if ctx.attr("transpose_x2", False) else b.shape
    if k1 != k2:
        raise ctx.fail(f"inner dimensions differ: x1 {list(a.shape)} (transpose_x1={ctx.attr('transpose_x1', False)})"
                       f" vs x2 {list(b.shape)} (transpose_x2={ctx.attr('transpose_x2', False)}): {k1} != {k2}")
    if len(ctx.ins) == 3 and ctx.ins[2].shape not in ((n,), (1, n)):
        raise ctx.fail(f"bias must have shape [{n}], got {list(ctx.ins[2].shape)}")
    return [TensorDesc((m, n), ctx.attr("dst_type", dtype), "ND")]


def _matmul_cost(ins: list[TensorDesc], outs: list[TensorDesc], attrs: dict[str, Any]) -> OpCost:
    a = ins[0].shape
    k = a[0] if attrs.get("transpose_x1", False) else a[1]
    m, n = outs[0].shape
    return _cube_cost(2 * m * n * k, ins, outs, k)


for _t in ("MatMul", "MatMulV2"):
    _register(_t, "AI_CORE", ("x1", "x2", "bias"), _matmul, _matmul_cost, 2, 3)


def _batch_matmul(ctx: InferContext) -> list[TensorDesc]:
    a, b = ctx.ins[0], ctx.ins[1]
    if a.rank < 2 or b.rank < 2:
        raise ctx.fail(f"x1 and x2 need rank >= 2, got {list(a.shape)} and {list(b.shape)}")
    dtype = ctx.same_dtype(0, 1)
    m, k1 = a.shape[-2:][::-1] if ctx.attr("adj_x1", False) else a.shape[-2:]
    k2, n = b.shape[-2:][::-1] if ctx.attr("adj_x2", False) else b.shape[-2:]
    if k1 != k2:
        raise ctx.fail(f"inner dimensions differ: x1 {list(a.shape)} vs x2 {list(b.shape)}: {k1} != {k2}")
    batch = _broadcast(ctx, a.shape[:-2], b.shape[:-2])
    return [TensorDesc(batch + (m, n), dtype, "ND")]


def _batch_matmul_cost(ins: list[TensorDesc], outs: list[TensorDesc], attrs: dict[str, Any]) -> OpCost:
    a = ins[0].shape
    k = a[-2] if attrs.get("adj_x1", False) else a[-1]
    return _cube_cost(2 * outs[0].numel * k, ins, outs, k)


for _t in ("BatchMatMul", "BatchMatMulV2"):
    _register(_t, "AI_CORE", ("x1", "x2"), _batch_matmul, _batch_matmul_cost)


# --------------------------------------------------------------------- vector ops
def _same_as_first(ctx: InferContext) -> list[TensorDesc]:
    return [ctx.ins[0]]


def _same_shapes(ctx: InferContext) -> list[TensorDesc]:
    first = ctx.ins[0]
    for i, d in enumerate(ctx.ins[1:], 1):
        if d.shape != first.shape:
            raise ctx.fail(f"input {i} has shape {list(d.shape)}, expected {list(first.shape)} like input 0")
    ctx.same_dtype(*range(len(ctx.ins)))
    return [first]


def _binary(ctx: InferContext) -> list[TensorDesc]:
    a, b = ctx.ins
    dtype = ctx.same_dtype(0, 1)
    shape = _broadcast(ctx, a.shape, b.shape)
    fmt = a.format if a.shape == shape else b.format
    return [TensorDesc(shape, dtype, fmt)]


_register("Relu", "AI_VECTOR_CORE", ("x",), _same_as_first, elementwise(1))
_register("Gelu", "AI_VECTOR_CORE", ("x",), _same_as_first, elementwise(10))
_register("ReluGrad", "AI_VECTOR_CORE", ("gradients", "features"), _same_shapes, elementwise(2))
_register("GeluGrad", "AI_VECTOR_CORE", ("dy", "x", "y"), _same_shapes, elementwise(16))
_register("Add", "AI_VECTOR_CORE", ("x1", "x2"), _binary, elementwise(1))
_register("Sub", "AI_VECTOR_CORE", ("x1", "x2"), _binary, elementwise(1))
_register("Mul", "AI_VECTOR_CORE", ("x1", "x2"), _binary, elementwise(1))
_register("RealDiv", "AI_VECTOR_CORE", ("x1", "x2"), _binary, elementwise(4))
_register("Exp", "AI_VECTOR_CORE", ("x",), _same_as_first, elementwise(4))
_register("Log", "AI_VECTOR_CORE", ("x",), _same_as_first, elementwise(4))


def _add_n_cost(ins: list[TensorDesc], outs: list[TensorDesc], attrs: dict[str, Any]) -> OpCost:
    return elementwise(max(1, len(ins) - 1))(ins, outs, attrs)


_register("AddN", "AI_VECTOR_CORE", ("*x",), _same_shapes, _add_n_cost)


def _cast(ctx: InferContext) -> list[TensorDesc]:
    dst = canonical_dtype(ctx.attr("dst_type", "float16"), f"{ctx.type} {ctx.name!r} dst_type")
    return [ctx.ins[0].with_(dtype=dst)]


_register("Cast", "AI_VECTOR_CORE", ("x",), _cast, elementwise(1))


def _channel_axis(ctx: InferContext, d: TensorDesc) -> int:
    return 1 if ctx.attr("data_format", "NCHW") == "NCHW" and d.rank == 4 else d.rank - 1


def _bias_add(ctx: InferContext) -> list[TensorDesc]:
    x, b = ctx.ins
    c = x.shape[_channel_axis(ctx, x)]
    if b.shape != (c,):
        raise ctx.fail(f"bias must have shape [{c}] (the channel dim of x {list(x.shape)}), got {list(b.shape)}")
    ctx.same_dtype(0, 1)
    return [x]


def _bias_add_grad(ctx: InferContext) -> list[TensorDesc]:
    x = ctx.ins[0]
    return [TensorDesc((x.shape[_channel_axis(ctx, x)],), x.dtype, "ND")]


_register("BiasAdd", "AI_VECTOR_CORE", ("x", "bias"), _bias_add, elementwise(1))
_register("BiasAddGrad", "AI_VECTOR_CORE", ("x",), _bias_add_grad, elementwise(1))


def _reduce(ctx: InferContext) -> list[TensorDesc]:
    x = ctx.ins[0]
    axes = _axes(ctx, x.rank)
    keep = bool(ctx.attr("keep_dims", False))
    shape = tuple((1 if i in axes else d) for i, d in enumerate(x.shape) if keep or i not in axes)
    return [TensorDesc(shape, x.dtype, "ND" if not keep else x.format)]


_register("ReduceMean", "AI_VECTOR_CORE", ("x",), _reduce, elementwise(1))
_register("ReduceSum", "AI_VECTOR_CORE", ("x",), _reduce, elementwise(1))
_register("ReduceMax", "AI_VECTOR_CORE", ("x",), _reduce, elementwise(1))


def _broadcast_to(ctx: InferContext) -> list[TensorDesc]:
    x = ctx.ins[0]
    shape = _as_shape(ctx, "shape")
    if any(d < 1 for d in shape) or _broadcast(ctx, x.shape, shape) != shape:
        raise ctx.fail(f"cannot broadcast {list(x.shape)} to {list(shape)}")
    return [TensorDesc(shape, x.dtype, x.format if x.rank == len(shape) else "ND")]


_register("BroadcastTo", "AI_VECTOR_CORE", ("x",), _broadcast_to, elementwise(1), shape_attrs=("shape",))


def _transpose(ctx: InferContext) -> list[TensorDesc]:
    x = ctx.ins[0]
    perm = [int(p) for p in ctx.attr("perm", list(range(x.rank))[::-1])]
    if sorted(perm) != list(range(x.rank)):
        raise ctx.fail(f"perm {perm} is not a permutation of 0..{x.rank - 1}")
    return [TensorDesc(tuple(x.shape[p] for p in perm), x.dtype, "ND")]


_register("Transpose", "AI_VECTOR_CORE", ("x",), _transpose, elementwise(1))


def _pool_window(ctx: InferContext) -> tuple[tuple[int, int], tuple[int, int]]:
    return _pair(ctx, "ksize", 1), _pair(ctx, "strides", 1)


def _max_pool(ctx: InferContext) -> list[TensorDesc]:
    x = ctx.rank(0, 4, what="x")
    n, c, h, w = _nchw(ctx, x)
    (kh, kw), (sh, sw) = _pool_window(ctx)
    pads = _pads(ctx)
    ho, _ = _window_out(ctx, h, kh, sh, 1, pads, 0)
    wo, _ = _window_out(ctx, w, kw, sw, 1, pads, 1)
    return [TensorDesc(_from_nchw(ctx, n, c, ho, wo), x.dtype, x.format)]


def _pool_cost(factor: int) -> CostFn:
    def cost(ins: list[TensorDesc], outs: list[TensorDesc], attrs: dict[str, Any]) -> OpCost:
        k = attrs.get("ksize", 1)
        window = k * k if isinstance(k, int) else math.prod(tuple(k)[-2:])
        return elementwise(factor * window)(ins, outs, attrs)

    return cost


_register("MaxPool", "AI_VECTOR_CORE", ("x",), _max_pool, _pool_cost(1))


def _max_pool_grad(ctx: InferContext) -> list[TensorDesc]:
    x1, x2, grad = ctx.ins
    if x2.shape != grad.shape:
        raise ctx.fail(f"x2 (the pooled output) {list(x2.shape)} and grad {list(grad.shape)} must have the same shape")
    expect = _max_pool(InferContext(ctx.type, ctx.name, [x1], ctx.attrs))[0].shape
    if expect != x2.shape:
        raise ctx.fail(f"pooling x1 {list(x1.shape)} gives {list(expect)}, but x2 is {list(x2.shape)}")
    return [x1]


_register("MaxPoolGrad", "AI_VECTOR_CORE", ("x1", "x2", "grad"), _max_pool_grad, _pool_cost(2))


def _softmax(ctx: InferContext) -> list[TensorDesc]:
    _axes(ctx, ctx.ins[0].rank, default=[-1])
    return [ctx.ins[0]]


_register("Softmax", "AI_VECTOR_CORE", ("x",), _softmax, elementwise(6))
_register("SoftmaxGrad", "AI_VECTOR_CORE", ("softmax", "grad_softmax"), _same_shapes, elementwise(4))


def _norm_stats_shape(ctx: InferContext, x: TensorDesc) -> tuple[int, ...]:
    axis = int(ctx.attr("begin_norm_axis", -1)) % x.rank
    return x.shape[:axis] + (1,) * (x.rank - axis)


def _layer_norm(ctx: InferContext) -> list[TensorDesc]:
    x, gamma, beta = ctx.ins
    p_axis = int(ctx.attr("begin_params_axis", -1)) % x.rank
    params = x.shape[p_axis:]
    for label, d in (("gamma", gamma), ("beta", beta)):
        if d.shape != params:
            raise ctx.fail(f"{label} must have shape {list(params)} (x dims from begin_params_axis), "
                           f"got {list(d.shape)}")
    stats = TensorDesc(_norm_stats_shape(ctx, x), x.dtype, "ND")
    return [x, stats, stats]


def _layer_norm_grad(ctx: InferContext) -> list[TensorDesc]:
    dy, x, variance, mean, gamma = ctx.ins
    if dy.shape != x.shape:
        raise ctx.fail(f"dy {list(dy.shape)} and x {list(x.shape)} must have the same shape")
    if variance.shape != mean.shape:
        raise ctx.fail(f"variance {list(variance.shape)} and mean {list(mean.shape)} must have the same shape")
    return [x, gamma, gamma]


_register("LayerNorm", "AI_VECTOR_CORE", ("x", "gamma", "beta"), _layer_norm, elementwise(8))
_register("LayerNormGrad", "AI_VECTOR_CORE", ("dy", "x", "variance", "mean", "gamma"), _layer_norm_grad,
          elementwise(14))


def _bn_channels(ctx: InferContext, x: TensorDesc) -> int:
    if x.rank == 5:  # NC1HWC0
        return x.origin_shape[1] if x.origin_shape else x.shape[1] * x.shape[4]
    if x.rank != 4:
        raise ctx.fail(f"x must be 4-D (NCHW) or 5-D (NC1HWC0), got shape {list(x.shape)}")
    return x.shape[1]


def _check_channel_vectors(ctx: InferContext, c: int, idx: Sequence[int], names: Sequence[str]) -> None:
    for i, label in zip(idx, names):
        if ctx.ins[i].shape != (c,):
            raise ctx.fail(f"{label} must have shape [{c}] (channels of x), got {list(ctx.ins[i].shape)}")


def _bn_training_reduce(ctx: InferContext) -> list[TensorDesc]:
    c = _bn_channels(ctx, ctx.ins[0])
    stat = TensorDesc((c,), "float32", "ND")
    return [stat, stat]


def _bn_training_update(ctx: InferContext) -> list[TensorDesc]:
    x = ctx.ins[0]
    c = _bn_channels(ctx, x)
    names = ("sum", "square_sum", "scale", "offset", "mean", "variance")
    _check_channel_vectors(ctx, c, range(1, len(ctx.ins)), names)
    stat = TensorDesc((c,), "float32", "ND")
    return [x, stat, stat, stat, stat]


def _bn_training_update_grad(ctx: InferContext) -> list[TensorDesc]:
    grads, x = ctx.ins[0], ctx.ins[1]
    if grads.shape != x.shape:
        raise ctx.fail(f"grads {list(grads.shape)} and x {list(x.shape)} must have the same shape")
    c = _bn_channels(ctx, x)
    _check_channel_vectors(ctx, c, (2, 3), ("batch_mean", "batch_variance"))
    stat = TensorDesc((c,), "float32", "ND")
    return [stat, stat]


def _bn_training_reduce_grad(ctx: InferContext) -> list[TensorDesc]:
    grads, x = ctx.ins[0], ctx.ins[1]
    if grads.shape != x.shape:
        raise ctx.fail(f"grads {list(grads.shape)} and x {list(x.shape)} must have the same shape")
    c = _bn_channels(ctx, x)
    _check_channel_vectors(ctx, c, range(2, 7),
                           ("diff_scale", "diff_offset", "scale", "batch_mean", "batch_variance"))
    return [x]


_register("BNTrainingReduce", "AI_VECTOR_CORE", ("x",), _bn_training_reduce, elementwise(2))
_register("BNTrainingUpdate", "AI_VECTOR_CORE",
          ("x", "sum", "square_sum", "scale", "offset", "mean", "variance"), _bn_training_update,
          elementwise(6), 5, 7)
_register("BNTrainingUpdateGrad", "AI_VECTOR_CORE", ("grads", "x", "batch_mean", "batch_variance"),
          _bn_training_update_grad, elementwise(4))
_register("BNTrainingReduceGrad", "AI_VECTOR_CORE",
          ("grads", "x", "diff_scale", "diff_offset", "scale", "batch_mean", "batch_variance"),
          _bn_training_reduce_grad, elementwise(6))


def _to_fractal(ctx: InferContext, shape: tuple[int, ...], dtype: str, dst: str) -> tuple[int, ...] | None:
    """Shape of an NCHW/ND tensor in a 5HD or fractal format (None if not convertible)."""
    c0 = _c0(dtype)
    if dst == "NC1HWC0" and len(shape) == 4:
        n, c, h, w = shape
        return (n, -(-c // c0), h, w, c0)
    if dst == "FRACTAL_Z" and len(shape) == 4:
        cout, cin, kh, kw = shape
        return (-(-cin // c0) * kh * kw, -(-cout // 16), 16, c0)
    if dst == "FRACTAL_NZ" and len(shape) >= 2:
        *batch, m, n = shape
        return (*batch, -(-n // 16), -(-m // 16), 16, 16)
    return None


def _trans_data(ctx: InferContext) -> list[TensorDesc]:
    """TransData between a plain layout (NCHW/ND) and a 5HD/fractal one.

    ``src_format`` (GE's attribute) overrides the input's format; going back to
    the plain layout needs the input's origin shape, or ``dst_shape``.
    """
    x = ctx.ins[0]
    src = canonical_format(ctx.attr("src_format", x.format), f"{ctx.type} {ctx.name!r} src_format")
    dst = canonical_format(ctx.attr("dst_format", ""), f"{ctx.type} {ctx.name!r} dst_format")
    if src == dst:
        raise ctx.fail(f"source and destination format are both {src}")
    if src in ("NCHW", "ND"):
        shape = _to_fractal(ctx, x.shape, x.dtype, dst)
        if shape is not None:
            return [TensorDesc(shape, x.dtype, dst, origin_shape=x.shape)]
    elif dst in ("NCHW", "ND"):
        target = x.origin_shape or (tuple(int(d) for d in ctx.attr("dst_shape")) if ctx.attr("dst_shape") else None)
        if target is None:
            raise ctx.fail(f"cannot go back from {src} to {dst}: the input has no origin shape; pass dst_shape")
        if _to_fractal(ctx, target, x.dtype, src) != x.shape:
            raise ctx.fail(f"dst_shape {list(target)} in {src} is {_to_fractal(ctx, target, x.dtype, src)}, "
                           f"not the input shape {list(x.shape)}")
        return [TensorDesc(target, x.dtype, dst)]
    raise ctx.fail(f"conversion {src} -> {dst} of a rank-{x.rank} tensor is not supported; supported: "
                   "NCHW<->NC1HWC0, NCHW<->FRACTAL_Z (4-D weights), ND<->FRACTAL_NZ")


_register("TransData", "AI_VECTOR_CORE", ("x",), _trans_data, elementwise(1))


def _softmax_xent(ctx: InferContext) -> list[TensorDesc]:
    f = ctx.rank(0, 2, what="features")
    lab = ctx.ins[1]
    if lab.shape != f.shape:
        raise ctx.fail(f"labels {list(lab.shape)} must have the shape of features {list(f.shape)}")
    ctx.same_dtype(0, 1)
    return [TensorDesc((f.shape[0],), f.dtype, "ND"), f]


_register("SoftmaxCrossEntropyWithLogits", "AI_VECTOR_CORE", ("features", "labels"), _softmax_xent,
          elementwise(10))


def _gather_v2(ctx: InferContext) -> list[TensorDesc]:
    x, idx = ctx.ins
    if idx.dtype not in ("int32", "int64"):
        raise ctx.fail(f"indices must be int32 or int64, got {idx.dtype}")
    axis = int(ctx.attr("axis", 0)) % x.rank
    return [TensorDesc(x.shape[:axis] + idx.shape + x.shape[axis + 1:], x.dtype, "ND")]


def _unsorted_segment_sum(ctx: InferContext) -> list[TensorDesc]:
    x, ids = ctx.ins
    if x.shape[:ids.rank] != ids.shape:
        raise ctx.fail(f"segment_ids {list(ids.shape)} must be a prefix of x {list(x.shape)}")
    num = ctx.attr("num_segments")
    if not isinstance(num, int) or num < 1:
        raise ctx.fail(f"attribute num_segments must be a positive int, got {num!r}")
    return [TensorDesc((num,) + x.shape[ids.rank:], x.dtype, "ND")]


def _gather_v2_reads(ins: list[TensorDesc], outs: list[TensorDesc], attrs: dict[str, Any]) -> list[int]:
    """A gather reads the rows its indices name (the output's bytes), not the whole table, and the indices."""
    return [outs[0].nbytes, ins[1].nbytes]


def _gather_v2_cost(ins: list[TensorDesc], outs: list[TensorDesc], attrs: dict[str, Any]) -> OpCost:
    """One vector operation per element gathered."""
    n = max(1, outs[0].numel)
    return OpCost(vector_ops=n, bytes_in=sum(_gather_v2_reads(ins, outs, attrs)), bytes_out=outs[0].nbytes,
                  tiles=-(-n // 16384))


_register("GatherV2", "AI_VECTOR_CORE", ("x", "indices"), _gather_v2, _gather_v2_cost, reads=_gather_v2_reads)
_register("UnsortedSegmentSum", "AI_VECTOR_CORE", ("x", "segment_ids"), _unsorted_segment_sum, elementwise(2))


def _check_scalar(ctx: InferContext, idx: Sequence[int], names: Sequence[str]) -> None:
    for i, label in zip(idx, names):
        if ctx.ins[i].numel != 1:
            raise ctx.fail(f"{label} must be a scalar, got shape {list(ctx.ins[i].shape)}")


def _apply_momentum(ctx: InferContext) -> list[TensorDesc]:
    var, accum, _, grad, _ = ctx.ins
    for label, d in (("accum", accum), ("grad", grad)):
        if d.shape != var.shape:
            raise ctx.fail(f"{label} {list(d.shape)} must have the shape of var {list(var.shape)}")
    _check_scalar(ctx, (2, 4), ("lr", "momentum"))
    return [var]


_register("ApplyMomentum", "AI_VECTOR_CORE", ("var", "accum", "lr", "grad", "momentum"), _apply_momentum,
          elementwise(5))

_ADAMW_INPUTS = ("var", "m", "v", "beta1_power", "beta2_power", "lr", "weight_decay", "beta1", "beta2",
                 "epsilon", "grad", "max_grad_norm")


def _apply_adam_w(ctx: InferContext) -> list[TensorDesc]:
    var, m, v = ctx.ins[:3]
    grad = ctx.ins[10]
    for label, d in (("m", m), ("v", v), ("grad", grad)):
        if d.shape != var.shape:
            raise ctx.fail(f"{label} {list(d.shape)} must have the shape of var {list(var.shape)}")
    _check_scalar(ctx, range(3, 10), _ADAMW_INPUTS[3:10])
    return [var, m, v]


_register("ApplyAdamW", "AI_VECTOR_CORE", _ADAMW_INPUTS, _apply_adam_w, elementwise(16), 11, 12)


# ------------------------------------------------------ transformer and MoE ops
# The fused ops of an Ascend LLM graph, named, shaped and laid out as CANN's ops-transformer and
# ops-nn catalogues define them (FlashAttentionScore, RmsNorm, ApplyRotaryPosEmb, SwiGlu,
# GroupedMatmul, the MoE routing ops).  Optional inputs a graph of this toolkit never feeds
# (pse_shift, drop_mask, padding masks, prefix, quantisation scales) are left out of the input lists.
FA_LAYOUTS = ("BSH", "SBH", "BSND", "BNSD")
#: sparse_mode values of FlashAttentionScore that mask causally (leftUpCausal, rightDownCausal).
FA_CAUSAL_MODES = (2, 3)
#: Elements of FlashAttentionScore's per-row softmax statistics (softmax_max / softmax_sum are [B, N, S, 8]).
FA_STAT_WIDTH = 8


@dataclass(frozen=True)
class _AttentionDims:
    batch: int
    q_len: int
    kv_len: int
    heads: int
    kv_heads: int
    head_dim: int


def _attention_dims(ctx: InferContext, q: TensorDesc, k: TensorDesc, heads_attr: str = "head_num") -> _AttentionDims:
    """B, S, N, D of FlashAttentionScore's query and key in its ``input_layout`` (N from ``head_num``;
    the inference attention ops call it ``num_heads``)."""
    layout = ctx.attr("input_layout", "BSH")
    if layout not in FA_LAYOUTS:
        raise ctx.fail(f"input_layout must be one of {', '.join(FA_LAYOUTS)}, got {layout!r}")
    heads = ctx.attr(heads_attr)
    if not isinstance(heads, int) or isinstance(heads, bool) or heads < 1:
        raise ctx.fail(f"attribute {heads_attr} must be an int >= 1, got {heads!r}")
    want = 3 if layout in ("BSH", "SBH") else 4
    for label, d in (("query", q), ("key", k)):
        if d.rank != want:
            raise ctx.fail(f"{label} must have rank {want} in layout {layout}, got shape {list(d.shape)}")
    if layout in ("BSH", "SBH"):
        (b, sq, hq), (bk, skv, hk) = ((q.shape, k.shape) if layout == "BSH" else
                                      ((q.shape[1], q.shape[0], q.shape[2]), (k.shape[1], k.shape[0], k.shape[2])))
        if hq % heads:
            raise ctx.fail(f"query hidden size {hq} is not a multiple of head_num {heads}")
        d = hq // heads
        if hk % d:
            raise ctx.fail(f"key hidden size {hk} is not a multiple of the head dim {d}")
        nk = hk // d
    else:
        (b, sq, nq, d), (bk, skv, nk, dk) = ((q.shape, k.shape) if layout == "BSND" else
                                             ((q.shape[0], q.shape[2], q.shape[1], q.shape[3]),
                                              (k.shape[0], k.shape[2], k.shape[1], k.shape[3])))
        if nq != heads:
            raise ctx.fail(f"query has {nq} heads but {heads_attr} is {heads}")
        if dk != d:
            raise ctx.fail(f"query head dim {d} and key head dim {dk} differ")
    if bk != b:
        raise ctx.fail(f"query batch {b} and key batch {bk} differ")
    if heads % nk:
        raise ctx.fail(f"{heads_attr} {heads} is not a multiple of the key's {nk} heads (grouped-query attention "
                       "shares each key head among head_num / kv heads query heads)")
    return _AttentionDims(b, sq, skv, heads, nk, d)


def _flash_attention_score(ctx: InferContext) -> list[TensorDesc]:
    q, k, v = ctx.ins[:3]
    if v.shape != k.shape:
        raise ctx.fail(f"value {list(v.shape)} must have the shape of key {list(k.shape)}")
    dims = _attention_dims(ctx, q, k)
    ctx.same_dtype(0, 1, 2)
    stat = TensorDesc((dims.batch, dims.heads, dims.q_len, FA_STAT_WIDTH), "float32", "ND")
    return [stat, stat, TensorDesc((1,), q.dtype, "ND"), q.with_(format="ND")]


def _attention_work(ins: list[TensorDesc], attrs: dict[str, Any], heads_attr: str = "head_num") -> tuple[int, int]:
    """(score elements, multiply-accumulates of one Q K^T product) of FlashAttentionScore, causal masking
    computing only the lower triangle of each head's score matrix."""
    layout = attrs.get("input_layout", "BSH")
    q, k = ins[0].shape, ins[1].shape
    heads = int(attrs[heads_attr])
    if layout in ("BSH", "SBH"):
        b, sq, kv_len = (q[0], q[1], k[1]) if layout == "BSH" else (q[1], q[0], k[0])
        d = q[2] // heads
    else:
        b, sq, kv_len, d = (q[0], q[1], k[1], q[3]) if layout == "BSND" else (q[0], q[2], k[2], q[3])
    scores = b * heads * sq * kv_len
    if int(attrs.get("sparse_mode", 0)) in FA_CAUSAL_MODES:
        scores = b * heads * sq * (kv_len + 1) // 2 if sq == kv_len else scores // 2
    return scores, scores * d


def _flash_attention_cost(products: int, vector_per_score: int, heads_attr: str = "head_num") -> CostFn:
    """``products`` S x D matrix products per score matrix (2 forward: Q K^T and P V; 5 backward), and the
    softmax's vector work per score element, on the AI Vector cores beside the cube (a MIX task)."""

    def cost(ins: list[TensorDesc], outs: list[TensorDesc], attrs: dict[str, Any]) -> OpCost:
        scores, macs = _attention_work(ins, attrs, heads_attr)
        base = _cube_cost(2 * products * macs, ins, outs)
        return OpCost(flops=base.flops, vector_ops=vector_per_score * scores, bytes_in=base.bytes_in,
                      bytes_out=base.bytes_out, tiles=base.tiles)

    return cost


def _flash_attention_score_grad(ctx: InferContext) -> list[TensorDesc]:
    q, k, v, dy, smax, ssum, out = ctx.ins
    if v.shape != k.shape:
        raise ctx.fail(f"value {list(v.shape)} must have the shape of key {list(k.shape)}")
    for label, d in (("dy", dy), ("attention_in", out)):
        if d.shape != q.shape:
            raise ctx.fail(f"{label} {list(d.shape)} must have the shape of query {list(q.shape)}")
    dims = _attention_dims(ctx, q, k)
    stat = (dims.batch, dims.heads, dims.q_len, FA_STAT_WIDTH)
    for label, d in (("softmax_max", smax), ("softmax_sum", ssum)):
        if d.shape != stat:
            raise ctx.fail(f"{label} must have shape {list(stat)}, got {list(d.shape)}")
    return [q.with_(format="ND"), k.with_(format="ND"), v.with_(format="ND"), TensorDesc((1,), q.dtype, "ND")]


_register("FlashAttentionScore", "AI_CORE", ("query", "key", "value", "atten_mask"), _flash_attention_score,
          _flash_attention_cost(2, 6), 3, 4)
_register("FlashAttentionScoreGrad", "AI_CORE",
          ("query", "key", "value", "dy", "softmax_max", "softmax_sum", "attention_in"),
          _flash_attention_score_grad, _flash_attention_cost(5, 10))


# ----------------------------------------------------------- inference attention and the KV cache
# The ops an Ascend inference graph (MindIE, vLLM-Ascend in graph mode, torchair) runs in place of
# FlashAttentionScore, as CANN's ops-transformer defines them: PromptFlashAttention (a prompt's
# attention on its own keys and values), IncreFlashAttention (one new token per sequence against its
# paged KV cache) and FusedInferAttentionScore (either; here a prompt chunk against its paged cache),
# and ScatterPaKvCache (cacheMode "Norm"), which writes new keys and values into their cache slots.
# A paged cache is [num_blocks, block_size, kv_heads * head_dim] per layer for the attention ops
# ([num_blocks, block_size, kv_heads, head_dim] for ScatterPaKvCache: the same memory); ``block_table``
# [batch, blocks per sequence] says which blocks hold each sequence's tokens.
def _prompt_flash_attention(ctx: InferContext) -> list[TensorDesc]:
    q, k, v = ctx.ins[:3]
    if v.shape != k.shape:
        raise ctx.fail(f"value {list(v.shape)} must have the shape of key {list(k.shape)}")
    dims = _attention_dims(ctx, q, k, "num_heads")
    kv_heads = ctx.attr("num_key_value_heads", dims.heads) or dims.heads
    if kv_heads != dims.kv_heads:
        raise ctx.fail(f"key has {dims.kv_heads} heads but num_key_value_heads is {kv_heads}")
    ctx.same_dtype(0, 1, 2)
    return [q.with_(format="ND")]


def _paged_dims(ctx: InferContext) -> tuple[int, int, int, int, int]:
    """(batch, query length, heads, head dim, key tokens read per sequence) of a paged attention op,
    whose query is [B, S, N, D] (BSND) and whose cache is read through ``block_table``."""
    q, k, v = ctx.ins[:3]
    table = ctx.ins[-1]
    if ctx.attr("input_layout", "BSND") != "BSND":
        raise ctx.fail(f"input_layout must be 'BSND' with a paged KV cache, got {ctx.attr('input_layout')!r}")
    heads, kv_heads = ctx.attr("num_heads"), ctx.attr("num_key_value_heads")
    for key, n in (("num_heads", heads), ("num_key_value_heads", kv_heads)):
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ctx.fail(f"attribute {key} must be an int >= 1, got {n!r}")
    if q.rank != 4 or q.shape[2] != heads:
        raise ctx.fail(f"query must be [B, S, num_heads={heads}, D] (BSND), got {list(q.shape)}")
    if heads % kv_heads:
        raise ctx.fail(f"num_heads {heads} is not a multiple of num_key_value_heads {kv_heads}")
    b, s, _, d = q.shape
    block_size = ctx.attr("block_size")
    if k.rank != 3 or k.shape[1] != block_size or k.shape[2] != kv_heads * d:
        raise ctx.fail(f"key cache must be [num_blocks, block_size={block_size}, num_key_value_heads x D = "
                       f"{kv_heads * d}], got {list(k.shape)}")
    if v.shape != k.shape:
        raise ctx.fail(f"value cache {list(v.shape)} must have the shape of key cache {list(k.shape)}")
    if table.rank != 2 or table.shape[0] != b or table.dtype != "int32":
        raise ctx.fail(f"block_table must be int32 [B={b}, blocks per sequence], got {table.dtype} {list(table.shape)}")
    if table.shape[1] > k.shape[0]:
        raise ctx.fail(f"block_table has {table.shape[1]} blocks per sequence but the cache holds {k.shape[0]}")
    ctx.same_dtype(0, 1, 2)
    return b, s, heads, d, table.shape[1] * block_size


def _incre_flash_attention(ctx: InferContext) -> list[TensorDesc]:
    _paged_dims(ctx)
    return [ctx.ins[0].with_(format="ND")]


def _fused_infer_attention_score(ctx: InferContext) -> list[TensorDesc]:
    b, s, heads, _, _ = _paged_dims(ctx)
    return [ctx.ins[0].with_(format="ND"), TensorDesc((b, heads, s, 1), "float32", "ND")]


def _paged_blocks(ins: list[TensorDesc], attrs: dict[str, Any]) -> TensorDesc:
    """The key (or value) cache blocks the block table names: what attention reads of the cache."""
    q, k, table = ins[0], ins[1], ins[-1]
    return TensorDesc((q.shape[0] * table.shape[1] * int(attrs["block_size"]), k.shape[2]), k.dtype, "ND")


def _paged_attention_reads(ins: list[TensorDesc], outs: list[TensorDesc], attrs: dict[str, Any]) -> list[int]:
    """The query, the key and value blocks read (not the whole cache), the table."""
    blocks = _paged_blocks(ins, attrs).nbytes
    return [ins[0].nbytes, blocks, blocks, ins[-1].nbytes]


def _paged_attention_cost(ins: list[TensorDesc], outs: list[TensorDesc], attrs: dict[str, Any]) -> OpCost:
    """Q K^T and P V over the key tokens the block table names, the query's last ``S`` positions causal
    (a prompt chunk after its cached prefix); the bytes are the blocks read (:func:`_paged_attention_reads`)."""
    q, table = ins[0], ins[-1]
    b, s, heads, d = q.shape
    kv_tokens = table.shape[1] * int(attrs["block_size"])
    scores = b * heads * (s * kv_tokens - s * (s - 1) // 2)
    read = _paged_blocks(ins, attrs)
    base = _cube_cost(2 * 2 * scores * d, [q, read, read, table], outs)
    return OpCost(flops=base.flops, vector_ops=6 * scores, bytes_in=base.bytes_in, bytes_out=base.bytes_out,
                  tiles=base.tiles)


def _scatter_pa_kv_cache(ctx: InferContext) -> list[TensorDesc]:
    key, key_cache, slots, value, value_cache = ctx.ins
    if ctx.attr("cache_mode", "Norm") != "Norm":
        raise ctx.fail(f"cache_mode must be 'Norm', got {ctx.attr('cache_mode')!r}")
    if key.rank != 3 or key_cache.rank != 4 or key_cache.shape[2:] != key.shape[1:]:
        raise ctx.fail(f"key [tokens, heads, D] {list(key.shape)} and key_cache [num_blocks, block_size, heads, D] "
                       f"{list(key_cache.shape)} must agree in heads and D")
    if value.shape != key.shape or value_cache.shape != key_cache.shape:
        raise ctx.fail(f"value {list(value.shape)} and value_cache {list(value_cache.shape)} must have the shapes "
                       "of key and key_cache")
    if slots.rank != 1 or slots.shape[0] != key.shape[0] or slots.dtype not in ("int32", "int64"):
        raise ctx.fail(f"slot_mapping must be int32 or int64 [{key.shape[0]}] (one slot per token), got "
                       f"{slots.dtype} {list(slots.shape)}")
    ctx.same_dtype(0, 1, 3, 4)
    return [key_cache, value_cache]


def _scatter_pa_kv_cache_reads(ins: list[TensorDesc], outs: list[TensorDesc], attrs: dict[str, Any]) -> list[int]:
    """The new keys, values and slots; the caches are written, not read."""
    key, _, slots, value, _ = ins
    return [key.nbytes, 0, slots.nbytes, value.nbytes, 0]


def _scatter_pa_kv_cache_cost(ins: list[TensorDesc], outs: list[TensorDesc], attrs: dict[str, Any]) -> OpCost:
    """Reads the new keys, values and slots, writes the keys and values into their slots (in place)."""
    key, _, _, value, _ = ins
    n = key.numel + value.numel
    return OpCost(vector_ops=n, bytes_in=sum(_scatter_pa_kv_cache_reads(ins, outs, attrs)),
                  bytes_out=key.nbytes + value.nbytes, tiles=max(1, -(-n // 16384)))


_register("PromptFlashAttention", "AI_CORE", ("query", "key", "value", "atten_mask"), _prompt_flash_attention,
          _flash_attention_cost(2, 6, "num_heads"), 3, 4)
_register("IncreFlashAttention", "AI_CORE", ("query", "key", "value", "block_table"), _incre_flash_attention,
          _paged_attention_cost, reads=_paged_attention_reads)
_register("FusedInferAttentionScore", "AI_CORE", ("query", "key", "value", "block_table"),
          _fused_infer_attention_score, _paged_attention_cost, reads=_paged_attention_reads)
_register("ScatterPaKvCache", "AI_VECTOR_CORE", ("key", "key_cache", "slot_mapping", "value", "value_cache"),
          _scatter_pa_kv_cache, _scatter_pa_kv_cache_cost, reads=_scatter_pa_kv_cache_reads, aliases=(1, 4))


def _norm_params(ctx: InferContext, x: TensorDesc, gamma: TensorDesc) -> int:
    """How many trailing dims of ``x`` the norm runs over (gamma's rank); gamma must be those dims."""
    k = gamma.rank
    if k == 0 or k > x.rank or x.shape[-k:] != gamma.shape:
        raise ctx.fail(f"gamma {list(gamma.shape)} must be the trailing dims of x {list(x.shape)}")
    return k


def _rms_norm(ctx: InferContext) -> list[TensorDesc]:
    x, gamma = ctx.ins
    k = _norm_params(ctx, x, gamma)
    return [x, TensorDesc(x.shape[:-k] + (1,) * k, "float32", "ND")]


def _rms_norm_grad(ctx: InferContext) -> list[TensorDesc]:
    dy, x, rstd, gamma = ctx.ins
    if dy.shape != x.shape:
        raise ctx.fail(f"dy {list(dy.shape)} and x {list(x.shape)} must have the same shape")
    k = _norm_params(ctx, x, gamma)
    if rstd.shape != x.shape[:-k] + (1,) * k:
        raise ctx.fail(f"rstd {list(rstd.shape)} must have shape {list(x.shape[:-k] + (1,) * k)}")
    return [x, TensorDesc(gamma.shape, "float32", "ND")]


_register("RmsNorm", "AI_VECTOR_CORE", ("x", "gamma"), _rms_norm, elementwise(4))
_register("RmsNormGrad", "AI_VECTOR_CORE", ("dy", "x", "rstd", "gamma"), _rms_norm_grad, elementwise(8))


def _rotary(ctx: InferContext) -> list[TensorDesc]:
    """ApplyRotaryPosEmb (and its gradient): query and key [B, S, N, D] (layout 1, BSND) rotated by cos and
    sin, which broadcast over the heads ([B or 1, S, 1, D])."""
    q, k, cos, sin = ctx.ins
    if int(ctx.attr("layout", 1)) != 1:
        raise ctx.fail(f"layout must be 1 (BSND), got {ctx.attr('layout')!r}")
    for label, d in (("query", q), ("key", k)):
        if d.rank != 4:
            raise ctx.fail(f"{label} must be [B, S, N, D] (layout BSND), got shape {list(d.shape)}")
    if q.shape[:2] != k.shape[:2] or q.shape[3] != k.shape[3]:
        raise ctx.fail(f"query {list(q.shape)} and key {list(k.shape)} must agree in B, S and D")
    b, s, _, d = q.shape
    for label, t in (("cos", cos), ("sin", sin)):
        if t.rank != 4 or t.shape[0] not in (1, b) or t.shape[1:] != (s, 1, d):
            raise ctx.fail(f"{label} must be [{b} or 1, {s}, 1, {d}], got {list(t.shape)}")
    return [q.with_(format="ND"), k.with_(format="ND")]


_register("ApplyRotaryPosEmb", "AI_VECTOR_CORE", ("query", "key", "cos", "sin"), _rotary, elementwise(3))
_register("ApplyRotaryPosEmbGrad", "AI_VECTOR_CORE", ("dy_query", "dy_key", "cos", "sin"), _rotary, elementwise(3))


def _swiglu_dim(ctx: InferContext, x: TensorDesc) -> int:
    dim = int(ctx.attr("dim", -1))
    if not -x.rank <= dim < x.rank:
        raise ctx.fail(f"dim {dim} is out of range for x of rank {x.rank}")
    dim %= x.rank
    if x.shape[dim] % 2:
        raise ctx.fail(f"x {list(x.shape)} dim {dim} ({x.shape[dim]}) must be even: SwiGlu splits it into gate "
                       "and value halves")
    return dim


def _swiglu(ctx: InferContext) -> list[TensorDesc]:
    x = ctx.ins[0]
    dim = _swiglu_dim(ctx, x)
    return [x.with_(shape=x.shape[:dim] + (x.shape[dim] // 2,) + x.shape[dim + 1:], format="ND")]


def _swiglu_grad(ctx: InferContext) -> list[TensorDesc]:
    dy, x = ctx.ins
    expect = _swiglu(InferContext(ctx.type, ctx.name, [x], ctx.attrs))[0].shape
    if dy.shape != expect:
        raise ctx.fail(f"y_grad {list(dy.shape)} must be SwiGlu's output shape {list(expect)} for x {list(x.shape)}")
    return [x]


_register("SwiGlu", "AI_VECTOR_CORE", ("x",), _swiglu, elementwise(6))
_register("SwiGluGrad", "AI_VECTOR_CORE", ("y_grad", "x"), _swiglu_grad, elementwise(12))


def _group_list(ctx: InferContext, d: TensorDesc, groups: int | None = None) -> int:
    if d.rank != 1 or d.dtype != "int64" or (groups is not None and d.shape[0] != groups):
        want = f"[{groups}]" if groups is not None else "[groups]"
        raise ctx.fail(f"group_list must be an int64 {want} tensor, got {d}")
    return d.shape[0]


def _grouped_matmul(ctx: InferContext) -> list[TensorDesc]:
    """GroupedMatmul (split_item 3, one tensor in and out): ``group_type`` 0 splits the rows M of x
    [M, K] among the groups' weights [E, K, N] (``transpose_weight``: [E, N, K]) into y [M, N];
    ``group_type`` 2 splits the inner dim: x [M, K] read transposed (``transpose_x``) times weight
    [M, N], each group's rows summed into its own [K, N]: y [E, K, N] (the weight gradient)."""
    x, w, gl = ctx.ins
    dtype = ctx.same_dtype(0, 1)
    group_type = int(ctx.attr("group_type", 0))
    if x.rank != 2:
        raise ctx.fail(f"x must be [M, K], got shape {list(x.shape)}")
    if group_type == 0:
        if w.rank != 3:
            raise ctx.fail(f"weight must be [E, K, N] for group_type 0, got shape {list(w.shape)}")
        _group_list(ctx, gl, w.shape[0])
        k, n = w.shape[2:0:-1] if ctx.attr("transpose_weight", False) else w.shape[1:]
        if x.shape[1] != k:
            raise ctx.fail(f"x {list(x.shape)} has K={x.shape[1]} but the weight gives K={k}")
        return [TensorDesc((x.shape[0], n), dtype, "ND")]
    if group_type == 2:
        if not ctx.attr("transpose_x", False):
            raise ctx.fail("group_type 2 reads x transposed: set transpose_x=True")
        if w.rank != 2 or w.shape[0] != x.shape[0]:
            raise ctx.fail(f"weight must be [M={x.shape[0]}, N] for group_type 2, got shape {list(w.shape)}")
        e = _group_list(ctx, gl)
        return [TensorDesc((e, x.shape[1], w.shape[1]), dtype, "ND")]
    raise ctx.fail(f"group_type must be 0 (split M) or 2 (split K), got {group_type}")


def _grouped_matmul_cost(ins: list[TensorDesc], outs: list[TensorDesc], attrs: dict[str, Any]) -> OpCost:
    x, w = ins[0].shape, ins[1].shape
    if int(attrs.get("group_type", 0)) == 0:
        n = w[1] if attrs.get("transpose_weight", False) else w[2]
        return _cube_cost(2 * x[0] * x[1] * n, ins, outs, x[1])
    return _cube_cost(2 * x[0] * x[1] * w[1], ins, outs, x[0])


_register("GroupedMatmul", "AI_CORE", ("x", "weight", "group_list"), _grouped_matmul, _grouped_matmul_cost)


def _top_k(ctx: InferContext, experts: int) -> int:
    k = ctx.attr("k")
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= experts:
        raise ctx.fail(f"attribute k must be an int in [1, {experts}] (the experts), got {k!r}")
    return k


def _moe_gating_top_k_softmax(ctx: InferContext) -> list[TensorDesc]:
    """Router: softmax over the experts of each token's logits [T, E], then its top k: weights y [T, k],
    expert_idx [T, k] and row_idx [T, k] (int32)."""
    x = ctx.rank(0, 2, what="x")
    k = _top_k(ctx, x.shape[1])
    idx = TensorDesc((x.shape[0], k), "int32", "ND")
    return [TensorDesc((x.shape[0], k), x.dtype, "ND"), idx, idx]


def _token_routes(ctx: InferContext, tokens: int, idx: TensorDesc, label: str = "expert_idx") -> int:
    """k of an int32 [tokens, k] expert index tensor."""
    if idx.rank != 2 or idx.shape[0] != tokens or idx.dtype != "int32":
        raise ctx.fail(f"{label} must be an int32 [{tokens}, k] tensor (one row per token), got {idx}")
    return idx.shape[1]


def _moe_init_routing_v2(ctx: InferContext) -> list[TensorDesc]:
    """Permute each token's hidden state to its k experts: expanded_x [T * k (at most active_num), h],
    expanded_row_idx [T * k], expert_tokens_count_or_cumsum [expert_num] and expert_tokens_before_capacity
    [expert_num] (int64)."""
    x = ctx.rank(0, 2, what="x")
    k = _token_routes(ctx, x.shape[0], ctx.ins[1])
    experts = ctx.attr("expert_num")
    if not isinstance(experts, int) or isinstance(experts, bool) or experts < 1:
        raise ctx.fail(f"attribute expert_num must be an int >= 1, got {experts!r}")
    active = int(ctx.attr("active_num", 0))
    rows = x.shape[0] * k if active <= 0 else min(active, x.shape[0] * k)
    counts = TensorDesc((experts,), "int64", "ND")
    return [TensorDesc((rows, x.shape[1]), x.dtype, "ND"), TensorDesc((x.shape[0] * k,), "int32", "ND"),
            counts, counts]


def _moe_init_routing_v2_grad(ctx: InferContext) -> list[TensorDesc]:
    """Sum each token's k expanded gradients back: grad_x [T, h] for T = rows / top_k."""
    g, row_idx = ctx.ins
    k = ctx.attr("top_k")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ctx.fail(f"attribute top_k must be an int >= 1, got {k!r}")
    if g.rank != 2 or row_idx.rank != 1 or row_idx.shape[0] % k or g.shape[0] > row_idx.shape[0]:
        raise ctx.fail(f"grad_expanded_x {list(g.shape)} and expanded_row_idx {list(row_idx.shape)} must be "
                       f"[rows, h] and [T * top_k={k}]")
    return [TensorDesc((row_idx.shape[0] // k, g.shape[1]), g.dtype, "ND")]


def _finalize_routes(ctx: InferContext, expanded: TensorDesc, row_idx: TensorDesc, scales: TensorDesc,
                     idx: TensorDesc) -> tuple[int, int]:
    if expanded.rank != 2 or scales.rank != 2:
        raise ctx.fail(f"expanded_x must be [T * k, h] and scales [T, k], got {list(expanded.shape)} and "
                       f"{list(scales.shape)}")
    tokens, k = scales.shape
    _token_routes(ctx, tokens, idx)
    if idx.shape != scales.shape or expanded.shape[0] != tokens * k or row_idx.shape != (tokens * k,):
        raise ctx.fail(f"expanded_x {list(expanded.shape)}, expanded_row_idx {list(row_idx.shape)} and "
                       f"expert_idx {list(idx.shape)} must be [T * k, h], [T * k] and [T, k] for scales "
                       f"{list(scales.shape)}")
    return tokens, k


def _moe_finalize_routing_v2(ctx: InferContext) -> list[TensorDesc]:
    """Un-permute the experts' outputs and sum each token's k of them weighted by its router scales: y [T, h]."""
    expanded, row_idx, scales, idx = ctx.ins
    tokens, _ = _finalize_routes(ctx, expanded, row_idx, scales, idx)
    return [TensorDesc((tokens, expanded.shape[1]), expanded.dtype, "ND")]


def _moe_finalize_routing_v2_grad(ctx: InferContext) -> list[TensorDesc]:
    dy, row_idx, expanded, scales, idx = ctx.ins
    tokens, _ = _finalize_routes(ctx, expanded, row_idx, scales, idx)
    if dy.shape != (tokens, expanded.shape[1]):
        raise ctx.fail(f"grad_y {list(dy.shape)} must be [{tokens}, {expanded.shape[1]}]")
    return [expanded, scales]


_register("MoeGatingTopKSoftmax", "AI_VECTOR_CORE", ("x",), _moe_gating_top_k_softmax, elementwise(8))
_register("MoeInitRoutingV2", "AI_VECTOR_CORE", ("x", "expert_idx"), _moe_init_routing_v2, elementwise(3))
_register("MoeInitRoutingV2Grad", "AI_VECTOR_CORE", ("grad_expanded_x", "expanded_row_idx"),
          _moe_init_routing_v2_grad, elementwise(2))
_register("MoeFinalizeRoutingV2", "AI_VECTOR_CORE", ("expanded_x", "expanded_row_idx", "scales", "expert_idx"),
          _moe_finalize_routing_v2, elementwise(3))
_register("MoeFinalizeRoutingV2Grad", "AI_VECTOR_CORE",
          ("grad_y", "expanded_row_idx", "expanded_x", "scales", "expert_idx"), _moe_finalize_routing_v2_grad,
          elementwise(4))


def _scatter_elements(ctx: InferContext) -> list[TensorDesc]:
    """``data`` with ``updates`` written at ``indices`` along ``axis`` (indices and updates alike)."""
    data, idx, upd = ctx.ins
    axis = int(ctx.attr("axis", 0))
    if not -data.rank <= axis < data.rank:
        raise ctx.fail(f"axis {axis} is out of range for data of rank {data.rank}")
    if idx.dtype not in ("int32", "int64") or idx.shape != upd.shape or idx.rank != data.rank:
        raise ctx.fail(f"indices {idx} and updates {upd} must be int indices and updates of one shape, of "
                       f"data's rank {data.rank}")
    ctx.same_dtype(0, 2)
    return [data]


def _axis_attr(ctx: InferContext, name: str, rank: int, of: str) -> int:
    """The axis attribute ``name`` (default 0) of a tensor of ``rank``, negative ones counted from the end."""
    dim = int(ctx.attr(name, 0))
    if not -rank <= dim < rank:
        raise ctx.fail(f"{name} {dim} is out of range for {of} of rank {rank}")
    return dim % rank


def _split_v(ctx: InferContext) -> list[TensorDesc]:
    """SplitVD: x cut along ``split_dim`` into pieces of ``size_splits``."""
    x = ctx.ins[0]
    dim = _axis_attr(ctx, "split_dim", x.rank, "x")
    sizes = [int(v) for v in _as_shape(ctx, "size_splits")]
    if sum(sizes) != x.shape[dim] or any(v < 1 for v in sizes):
        raise ctx.fail(f"size_splits {sizes} must be positive and sum to dim {dim} of x {list(x.shape)} "
                       f"({x.shape[dim]})")
    return [x.with_(shape=x.shape[:dim] + (v,) + x.shape[dim + 1:], format="ND", origin_shape=None) for v in sizes]


def _concat(ctx: InferContext) -> list[TensorDesc]:
    """ConcatD: the inputs joined along ``concat_dim``."""
    first = ctx.ins[0]
    dim = _axis_attr(ctx, "concat_dim", first.rank, "inputs")
    for i, d in enumerate(ctx.ins[1:], 1):
        if d.rank != first.rank or d.shape[:dim] + d.shape[dim + 1:] != first.shape[:dim] + first.shape[dim + 1:]:
            raise ctx.fail(f"input {i} {list(d.shape)} does not match input 0 {list(first.shape)} off dim {dim}")
    ctx.same_dtype(*range(len(ctx.ins)))
    total = sum(d.shape[dim] for d in ctx.ins)
    return [first.with_(shape=first.shape[:dim] + (total,) + first.shape[dim + 1:], format="ND", origin_shape=None)]


def _sparse_softmax_xent(ctx: InferContext) -> list[TensorDesc]:
    """Softmax cross entropy against class indices: features [T, C], labels [T] -> loss [T], backprop [T, C]."""
    f = ctx.rank(0, 2, what="features")
    lab = ctx.ins[1]
    if lab.shape != (f.shape[0],) or lab.dtype not in ("int32", "int64"):
        raise ctx.fail(f"labels must be int32/int64 [{f.shape[0]}] (a class per row of features), got {lab}")
    return [TensorDesc((f.shape[0],), f.dtype, "ND"), f]


_register("ScatterElements", "AI_VECTOR_CORE", ("data", "indices", "updates"), _scatter_elements, elementwise(1))
_register("SplitVD", "AI_VECTOR_CORE", ("x",), _split_v, elementwise(1))
_register("ConcatD", "AI_VECTOR_CORE", ("*x",), _concat, elementwise(1))
_register("SparseSoftmaxCrossEntropyWithLogits", "AI_VECTOR_CORE", ("features", "labels"), _sparse_softmax_xent,
          elementwise(10))


# ----------------------------------------------------------------------- HCCL ops
# comm_bytes is the buffer the ring moves in rank_size chunks: the reduced buffer
# (AllReduce), the gathered output (AllGather), the scattered input (ReduceScatter),
# the broadcast buffer (Broadcast); the send buffer of an AllToAll(V), whose 1/rank_size
# slices go one to each rank; the tensor a Send sends and a Receive receives.
def _reduction(ctx: InferContext) -> None:
    reduction = ctx.attr("reduction", "sum")
    if reduction not in ("sum", "prod", "max", "min"):
        raise ctx.fail(f"reduction must be one of 'sum', 'prod', 'max', 'min', got {reduction!r}")


def _rank_size(ctx: InferContext, required: bool) -> int:
    n = ctx.attr("rank_size", None if required else 1)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ctx.fail(f"attribute rank_size must be an int >= 1, got {n!r}")
    return n


def _all_reduce(ctx: InferContext) -> list[TensorDesc]:
    _reduction(ctx)
    if ctx.attr("rank_size") is not None:
        _rank_size(ctx, required=False)
    return list(ctx.ins)


def _comm_cost(which: str) -> CostFn:
    """Cost of a collective whose ring buffer is its inputs (``"in"``) or its outputs (``"out"``)."""

    def cost(ins: list[TensorDesc], outs: list[TensorDesc], attrs: dict[str, Any]) -> OpCost:
        b_in, b_out = _bytes(ins), _bytes(outs)
        return OpCost(bytes_in=b_in, bytes_out=b_out, tiles=1, comm_bytes=b_in if which == "in" else b_out)

    return cost


def _all_gather(ctx: InferContext) -> list[TensorDesc]:
    """Concatenates the rank_size ranks' ``x`` along dim 0."""
    n = _rank_size(ctx, required=True)
    x = ctx.ins[0]
    if x.rank == 0:
        raise ctx.fail("x must have rank >= 1 (it is gathered along dim 0), got a scalar")
    return [x.with_(shape=(x.shape[0] * n,) + x.shape[1:], origin_shape=None)]


def _reduce_scatter(ctx: InferContext) -> list[TensorDesc]:
    """Reduces ``x`` over the ranks and gives each rank its 1/rank_size slice of dim 0."""
    _reduction(ctx)
    n = _rank_size(ctx, required=True)
    x = ctx.ins[0]
    if x.rank == 0 or x.shape[0] % n:
        raise ctx.fail(f"dim 0 of x {list(x.shape)} must be divisible by rank_size {n}")
    return [x.with_(shape=(x.shape[0] // n,) + x.shape[1:], origin_shape=None)]


def _broadcast_op(ctx: InferContext) -> list[TensorDesc]:
    """Every rank gets root_rank's tensors."""
    n = _rank_size(ctx, required=False)
    root = ctx.attr("root_rank")
    if not isinstance(root, int) or isinstance(root, bool) or not 0 <= root < n:
        raise ctx.fail(f"attribute root_rank must be an int in [0, rank_size={n}), got {root!r}")
    return list(ctx.ins)


_register("HcomAllReduce", "HCCL", ("*x",), _all_reduce, _comm_cost("in"))
_register("HcomAllGather", "HCCL", ("x",), _all_gather, _comm_cost("out"))
_register("HcomReduceScatter", "HCCL", ("x",), _reduce_scatter, _comm_cost("in"))
_register("HcomBroadcast", "HCCL", ("*x",), _broadcast_op, _comm_cost("in"))



def _all_to_all_v(ctx: InferContext) -> list[TensorDesc]:
    """Every rank sends each peer its rows of send_data (``send_counts`` elements to rank i) and receives
    theirs.  The graph is static, so recv_data has the shape of send_data: the balanced exchange; a
    skewed routing's uneven volumes are the simulated cluster's (ge/cluster.py)."""
    n = _rank_size(ctx, required=True)
    x = ctx.ins[0]
    for i, label in enumerate(("send_counts", "send_displacements", "recv_counts", "recv_displacements"), 1):
        d = ctx.ins[i]
        if d.shape != (n,) or d.dtype != "int64":
            raise ctx.fail(f"{label} must be an int64 [{n}] tensor (one entry per rank), got {d}")
    if x.rank == 0 or x.shape[0] % n:
        raise ctx.fail(f"dim 0 of send_data {list(x.shape)} must be divisible by rank_size {n}")
    return [x.with_(origin_shape=None)]


def _all_to_all(ctx: InferContext) -> list[TensorDesc]:
    n = _rank_size(ctx, required=True)
    x = ctx.ins[0]
    if x.rank == 0 or x.shape[0] % n:
        raise ctx.fail(f"dim 0 of x {list(x.shape)} must be divisible by rank_size {n}")
    return [x.with_(origin_shape=None)]


def _peer(ctx: InferContext, key: str) -> None:
    for attr in (key, "sr_tag"):
        v = ctx.attr(attr)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ctx.fail(f"attribute {attr} must be an int >= 0, got {v!r}")


def _send(ctx: InferContext) -> list[TensorDesc]:
    """HcomSend: ``x`` to rank ``dest_rank`` of the group, matched by ``sr_tag``; no output."""
    _peer(ctx, "dest_rank")
    return []


def _receive(ctx: InferContext) -> list[TensorDesc]:
    """HcomReceive: the tensor of ``shape`` and ``dtype`` that rank ``src_rank`` sends with ``sr_tag``."""
    _peer(ctx, "src_rank")
    shape = _as_shape(ctx, "shape")
    if not shape or any(d < 1 for d in shape):
        raise ctx.fail(f"attribute shape must be a non-empty list of dims >= 1, got {list(shape)}")
    return [TensorDesc(shape, canonical_dtype(ctx.attr("dtype", "float16"), f"{ctx.type} {ctx.name!r} dtype"), "ND")]


_register("HcomAllToAllV", "HCCL", ("send_data", "send_counts", "send_displacements", "recv_counts",
                                    "recv_displacements"), _all_to_all_v, _comm_cost("in"))
_register("HcomAllToAll", "HCCL", ("x",), _all_to_all, _comm_cost("in"))
_register("HcomSend", "HCCL", ("x",), _send, _comm_cost("in"))
_register("HcomReceive", "HCCL", (), _receive, _comm_cost("out"))
