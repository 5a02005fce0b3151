"""ge.Graph: building, naming, shape inference of every op type, and build errors."""

from __future__ import annotations

import re

import pytest

from geprof_nb import ge
from geprof_nb.ge.graph import NET_OUTPUT_NAME
from geprof_nb.ge.ops import get_op, known_op_types, op_cost

SOURCE_TYPES = {"Data", "Variable", "Const"}  # created with Graph.data / variable / const


# ----------------------------------------------------------------------------- helpers
def _inputs(g: ge.Graph, specs):
    """Graph inputs from (shape, dtype[, format]) specs."""
    out = []
    for i, spec in enumerate(specs):
        shape, dtype, *fmt = spec
        out.append(g.data(f"in{i}", shape, dtype, fmt[0] if fmt else "ND"))
    return out


def _build(op_type, specs, **attrs):
    g = ge.Graph("t")
    ins = _inputs(g, specs)
    out = g.op(op_type, ins, name="op", **attrs)
    outs = out if isinstance(out, tuple) else (out,)
    return g, outs


F16, F32, I32, I64, BF16 = "float16", "float32", "int32", "int64", "bfloat16"

# (case id, op type, input specs, attrs, expected output shapes, expected output dtypes or None)
SHAPE_CASES = [
    ("Add-broadcast", "Add", [((2, 3, 4), F16), ((3, 1), F16)], {}, [(2, 3, 4)], [F16]),
    ("Sub-broadcast-both", "Sub", [((4, 1), F16), ((1, 5), F16)], {}, [(4, 5)], None),
    ("Mul-scalar-like", "Mul", [((2, 3), F32), ((1,), F32)], {}, [(2, 3)], [F32]),
    ("RealDiv", "RealDiv", [((6,), F16), ((6,), F16)], {}, [(6,)], None),
    ("AddN-3", "AddN", [((2, 2), F16)] * 3, {}, [(2, 2)], None),
    ("ApplyMomentum", "ApplyMomentum", [((4, 3), F32), ((4, 3), F32), ((1,), F32), ((4, 3), F32), ((1,), F32)],
     {}, [(4, 3)], [F32]),
    ("ApplyAdamW", "ApplyAdamW", [((4, 3), F32)] * 3 + [((1,), F32)] * 7 + [((4, 3), F32)], {},
     [(4, 3), (4, 3), (4, 3)], None),
    ("BNTrainingReduce", "BNTrainingReduce", [((2, 8, 4, 4), F16, "NCHW")], {}, [(8,), (8,)], [F32, F32]),
    ("BNTrainingUpdate", "BNTrainingUpdate", [((2, 8, 4, 4), F16, "NCHW")] + [((8,), F32)] * 6, {},
     [(2, 8, 4, 4), (8,), (8,), (8,), (8,)], [F16, F32, F32, F32, F32]),
    ("BNTrainingUpdate-5in", "BNTrainingUpdate", [((2, 8, 4, 4), F16, "NCHW")] + [((8,), F32)] * 4, {},
     [(2, 8, 4, 4), (8,), (8,), (8,), (8,)], None),
    ("BNTrainingUpdateGrad", "BNTrainingUpdateGrad", [((2, 8, 4, 4), F16), ((2, 8, 4, 4), F16), ((8,), F32),
                                                      ((8,), F32)], {}, [(8,), (8,)], [F32, F32]),
    ("BNTrainingReduceGrad", "BNTrainingReduceGrad", [((2, 8, 4, 4), F16)] * 2 + [((8,), F32)] * 5, {},
     [(2, 8, 4, 4)], [F16]),
    ("BatchMatMul-broadcast", "BatchMatMul", [((3, 2, 4, 5), F16), ((5, 6), F16)], {}, [(3, 2, 4, 6)], None),
    ("BatchMatMul-adj_x2", "BatchMatMul", [((2, 4, 5), F16), ((2, 6, 5), F16)], {"adj_x2": True}, [(2, 4, 6)], None),
    ("BatchMatMul-adj_x1", "BatchMatMul", [((2, 5, 4), F16), ((2, 5, 6), F16)], {"adj_x1": True}, [(2, 4, 6)], None),
    ("BiasAdd-NCHW", "BiasAdd", [((2, 8, 4, 4), F16, "NCHW"), ((8,), F16)], {}, [(2, 8, 4, 4)], None),
    ("BiasAdd-ND", "BiasAdd", [((4, 10), F16), ((10,), F16)], {"data_format": "ND"}, [(4, 10)], None),
    ("BiasAddGrad-NCHW", "BiasAddGrad", [((2, 8, 4, 4), F16)], {}, [(8,)], None),
    ("BiasAddGrad-ND", "BiasAddGrad", [((4, 10), F16)], {"data_format": "ND"}, [(10,)], None),
    ("BroadcastTo", "BroadcastTo", [((3, 1), F16)], {"shape": [2, 3, 4]}, [(2, 3, 4)], None),
    ("Cast", "Cast", [((2, 3), F16)], {"dst_type": "float32"}, [(2, 3)], [F32]),
    ("Cast-alias", "Cast", [((2, 3), F32)], {"dst_type": "fp16"}, [(2, 3)], [F16]),
    ("Conv2D-pads1-stride2", "Conv2D", [((2, 3, 32, 32), F16, "NCHW"), ((16, 3, 3, 3), F16)],
     {"strides": 2, "pads": 1}, [(2, 16, 16, 16)], [F16]),
    ("Conv2D-SAME", "Conv2D", [((2, 3, 31, 31), F16, "NCHW"), ((16, 3, 3, 3), F16)],
     {"strides": 2, "pads": "SAME"}, [(2, 16, 16, 16)], None),
    ("Conv2D-VALID-7x7", "Conv2D", [((1, 3, 20, 20), F16, "NCHW"), ((8, 3, 7, 7), F16)], {},
     [(1, 8, 14, 14)], None),
    ("Conv2D-NHWC", "Conv2D", [((2, 32, 32, 3), F16, "NHWC"), ((8, 3, 3, 3), F16)],
     {"strides": 2, "pads": 1, "data_format": "NHWC"}, [(2, 16, 16, 8)], None),
    ("Conv2D-groups", "Conv2D", [((1, 8, 10, 10), F16, "NCHW"), ((8, 2, 3, 3), F16)], {"groups": 4},
     [(1, 8, 8, 8)], None),
    ("Conv2D-dilation", "Conv2D", [((1, 3, 10, 10), F16, "NCHW"), ((4, 3, 3, 3), F16)], {"dilations": 2},
     [(1, 4, 6, 6)], None),
    ("Conv2D-bias", "Conv2D", [((1, 3, 8, 8), F16, "NCHW"), ((4, 3, 1, 1), F16), ((4,), F16)], {},
     [(1, 4, 8, 8)], None),
    ("Conv2D-asym-pads", "Conv2D", [((1, 3, 8, 8), F16, "NCHW"), ((4, 3, 3, 3), F16)], {"pads": (0, 1, 2, 3)},
     [(1, 4, 7, 11)], None),
    ("Conv2DBackpropInput", "Conv2DBackpropInput", [((4, 3, 3, 3), F16), ((2, 4, 8, 8), F16, "NCHW")],
     {"input_size": [2, 3, 8, 8], "pads": 1}, [(2, 3, 8, 8)], None),
    ("Conv2DBackpropFilter", "Conv2DBackpropFilter", [((2, 3, 8, 8), F16, "NCHW"), ((2, 4, 8, 8), F16)],
     {"filter_size": [4, 3, 3, 3], "pads": 1}, [(4, 3, 3, 3)], None),
    ("GatherV2", "GatherV2", [((100, 16), F16), ((7,), I32)], {}, [(7, 16)], [F16]),
    ("GatherV2-axis1", "GatherV2", [((4, 10, 3), F16), ((2, 5), "int64")], {"axis": 1}, [(4, 2, 5, 3)], None),
    ("Gelu", "Gelu", [((4, 7), F16)], {}, [(4, 7)], None),
    ("GeluGrad", "GeluGrad", [((4, 7), F16)] * 3, {}, [(4, 7)], None),
    ("HcomAllReduce", "HcomAllReduce", [((3,), F32), ((4, 5), F32)], {}, [(3,), (4, 5)], None),
    ("HcomAllGather", "HcomAllGather", [((3, 5), F16)], {"rank_size": 4}, [(12, 5)], [F16]),
    ("HcomReduceScatter", "HcomReduceScatter", [((8, 5), F32)], {"rank_size": 4}, [(2, 5)], [F32]),
    ("HcomBroadcast", "HcomBroadcast", [((3,), F32), ((2, 2), I32)], {"root_rank": 0}, [(3,), (2, 2)], [F32, I32]),
    ("DropOutGenMask", "DropOutGenMask", [((2,), "int64"), ((1,), F32)], {"shape": [8, 32]}, [(32,)], ["uint8"]),
    ("NonZero", "NonZero", [((3, 4), F16)], {}, [(12, 2)], ["int64"]),
    ("Unique", "Unique", [((6,), I32)], {}, [(6,), (6,)], [I32, I32]),
    ("LayerNorm", "LayerNorm", [((4, 8, 16), F16), ((16,), F16), ((16,), F16)], {},
     [(4, 8, 16), (4, 8, 1), (4, 8, 1)], None),
    ("LayerNorm-axis1", "LayerNorm", [((4, 8, 16), F16), ((8, 16), F16), ((8, 16), F16)],
     {"begin_norm_axis": 1, "begin_params_axis": 1}, [(4, 8, 16), (4, 1, 1), (4, 1, 1)], None),
    ("LayerNormGrad", "LayerNormGrad", [((4, 16), F16), ((4, 16), F16), ((4, 1), F16), ((4, 1), F16),
                                        ((16,), F16)], {}, [(4, 16), (16,), (16,)], None),
    ("MatMul", "MatMul", [((4, 5), F16), ((5, 6), F16)], {}, [(4, 6)], None),
    ("MatMul-transpose_x1", "MatMul", [((5, 4), F16), ((5, 6), F16)], {"transpose_x1": True}, [(4, 6)], None),
    ("MatMul-transpose_x2", "MatMul", [((4, 5), F16), ((6, 5), F16)], {"transpose_x2": True}, [(4, 6)], None),
    ("MatMul-bias", "MatMul", [((4, 5), F16), ((5, 6), F16), ((6,), F16)], {}, [(4, 6)], None),
    ("MatMulV2", "MatMulV2", [((4, 5), F16), ((5, 6), F16)], {}, [(4, 6)], None),
    ("MatMulV2-both-transposed", "MatMulV2", [((5, 4), F16), ((6, 5), F16)],
     {"transpose_x1": True, "transpose_x2": True}, [(4, 6)], None),
    ("MaxPool-VALID", "MaxPool", [((2, 8, 9, 9), F16, "NCHW")], {"ksize": 3, "strides": 2}, [(2, 8, 4, 4)], None),
    ("MaxPool-SAME", "MaxPool", [((2, 8, 9, 9), F16, "NCHW")], {"ksize": 3, "strides": 2, "pads": "SAME"},
     [(2, 8, 5, 5)], None),
    ("MaxPoolGrad", "MaxPoolGrad", [((2, 8, 9, 9), F16), ((2, 8, 4, 4), F16), ((2, 8, 4, 4), F16)],
     {"ksize": 3, "strides": 2}, [(2, 8, 9, 9)], None),
    ("ReduceMean-axis", "ReduceMean", [((2, 3, 4), F16)], {"axes": [1]}, [(2, 4)], None),
    ("ReduceMean-keep", "ReduceMean", [((2, 3, 4), F16)], {"axes": [1], "keep_dims": True}, [(2, 1, 4)], None),
    ("ReduceMean-all", "ReduceMean", [((2, 3, 4), F16)], {}, [()], None),
    ("ReduceSum-negative-axis", "ReduceSum", [((2, 3, 4), F16)], {"axes": -1}, [(2, 3)], None),
    ("ReduceSum-two-axes-keep", "ReduceSum", [((2, 3, 4), F16)], {"axes": [0, 2], "keep_dims": True},
     [(1, 3, 1)], None),
    ("Relu", "Relu", [((3, 5), F16)], {}, [(3, 5)], None),
    ("ReluGrad", "ReluGrad", [((3, 5), F16)] * 2, {}, [(3, 5)], None),
    ("Reshape-minus1", "Reshape", [((2, 3, 4), F16)], {"shape": [-1, 4]}, [(6, 4)], None),
    ("Reshape-explicit", "Reshape", [((2, 3, 4), F16)], {"shape": [24]}, [(24,)], None),
    ("Softmax", "Softmax", [((2, 10), F16)], {"axes": [-1]}, [(2, 10)], None),
    ("SoftmaxGrad", "SoftmaxGrad", [((2, 10), F16)] * 2, {}, [(2, 10)], None),
    ("SoftmaxCrossEntropyWithLogits", "SoftmaxCrossEntropyWithLogits", [((8, 10), F16)] * 2, {},
     [(8,), (8, 10)], None),
    ("TransData-NC1HWC0", "TransData", [((2, 20, 5, 5), F16, "NCHW")], {"dst_format": "NC1HWC0"},
     [(2, 2, 5, 5, 16)], None),
    ("TransData-NC1HWC0-int8", "TransData", [((1, 40, 2, 2), "int8", "NCHW")], {"dst_format": "NC1HWC0"},
     [(1, 2, 2, 2, 32)], None),
    ("TransData-FRACTAL_Z", "TransData", [((64, 3, 7, 7), F16, "NCHW")], {"dst_format": "FRACTAL_Z"},
     [(49, 4, 16, 16)], None),
    ("TransData-FRACTAL_NZ", "TransData", [((3, 33, 17), F16, "ND")], {"dst_format": "FRACTAL_NZ"},
     [(3, 2, 3, 16, 16)], None),
    ("Transpose-perm", "Transpose", [((2, 3, 4), F16)], {"perm": [0, 2, 1]}, [(2, 4, 3)], None),
    ("Transpose-default", "Transpose", [((2, 3, 4), F16)], {}, [(4, 3, 2)], None),
    ("UnsortedSegmentSum", "UnsortedSegmentSum", [((6, 4), F16), ((6,), I32)], {"num_segments": 3},
     [(3, 4)], None),
    # transformer and MoE ops: 2 sequences of 16 tokens, 4 query heads of 8 dims, 2 key/value heads (GQA)
    ("BatchMatMulV2", "BatchMatMulV2", [((3, 4, 5), BF16), ((3, 5, 6), BF16)], {}, [(3, 4, 6)], [BF16]),
    ("FlashAttentionScore-BSND-GQA", "FlashAttentionScore", [((2, 16, 4, 8), BF16), ((2, 16, 2, 8), BF16),
                                                               ((2, 16, 2, 8), BF16)],
     {"head_num": 4, "input_layout": "BSND", "sparse_mode": 2}, [(2, 4, 16, 8), (2, 4, 16, 8), (1,), (2, 16, 4, 8)],
     [F32, F32, BF16, BF16]),
    ("FlashAttentionScore-SBH", "FlashAttentionScore", [((16, 2, 32), BF16), ((16, 2, 16), BF16),
                                                          ((16, 2, 16), BF16)],
     {"head_num": 4, "input_layout": "SBH"}, [(2, 4, 16, 8), (2, 4, 16, 8), (1,), (16, 2, 32)], None),
    ("FlashAttentionScoreGrad", "FlashAttentionScoreGrad",
     [((2, 16, 4, 8), BF16), ((2, 16, 2, 8), BF16), ((2, 16, 2, 8), BF16), ((2, 16, 4, 8), BF16),
      ((2, 4, 16, 8), F32), ((2, 4, 16, 8), F32), ((2, 16, 4, 8), BF16)],
     {"head_num": 4, "input_layout": "BSND", "sparse_mode": 2}, [(2, 16, 4, 8), (2, 16, 2, 8), (2, 16, 2, 8), (1,)],
     None),
    ("PromptFlashAttention-GQA", "PromptFlashAttention", [((2, 16, 4, 8), BF16), ((2, 16, 2, 8), BF16),
                                                            ((2, 16, 2, 8), BF16)],
     {"num_heads": 4, "num_key_value_heads": 2, "input_layout": "BSND", "sparse_mode": 3}, [(2, 16, 4, 8)], [BF16]),
    ("IncreFlashAttention-paged", "IncreFlashAttention", [((3, 1, 4, 8), BF16), ((10, 16, 16), BF16),
                                                          ((10, 16, 16), BF16), ((3, 4), "int32")],
     {"num_heads": 4, "num_key_value_heads": 2, "block_size": 16}, [(3, 1, 4, 8)], [BF16]),
    ("FusedInferAttentionScore-chunk", "FusedInferAttentionScore", [((1, 8, 4, 8), BF16), ((10, 16, 16), BF16),
                                                                    ((10, 16, 16), BF16), ((1, 4), "int32")],
     {"num_heads": 4, "num_key_value_heads": 2, "block_size": 16}, [(1, 8, 4, 8), (1, 4, 8, 1)], [BF16, F32]),
    ("ScatterPaKvCache", "ScatterPaKvCache", [((5, 2, 8), BF16), ((10, 16, 2, 8), BF16), ((5,), "int32"),
                                              ((5, 2, 8), BF16), ((10, 16, 2, 8), BF16)],
     {"cache_mode": "Norm"}, [(10, 16, 2, 8), (10, 16, 2, 8)], [BF16, BF16]),
    ("RmsNorm", "RmsNorm", [((32, 64), BF16), ((64,), BF16)], {"epsilon": 1e-5}, [(32, 64), (32, 1)], [BF16, F32]),
    ("RmsNormGrad", "RmsNormGrad", [((32, 64), BF16), ((32, 64), BF16), ((32, 1), F32), ((64,), BF16)], {},
     [(32, 64), (64,)], [BF16, F32]),
    ("ApplyRotaryPosEmb", "ApplyRotaryPosEmb", [((2, 16, 4, 8), BF16), ((2, 16, 2, 8), BF16), ((1, 16, 1, 8), BF16),
                                               ((1, 16, 1, 8), BF16)], {"layout": 1},
     [(2, 16, 4, 8), (2, 16, 2, 8)], None),
    ("ApplyRotaryPosEmbGrad", "ApplyRotaryPosEmbGrad", [((2, 16, 4, 8), BF16), ((2, 16, 2, 8), BF16),
                                                       ((2, 16, 1, 8), BF16), ((2, 16, 1, 8), BF16)], {},
     [(2, 16, 4, 8), (2, 16, 2, 8)], None),
    ("SwiGlu", "SwiGlu", [((32, 128), BF16)], {"dim": -1}, [(32, 64)], [BF16]),
    ("SwiGluGrad", "SwiGluGrad", [((32, 64), BF16), ((32, 128), BF16)], {"dim": -1}, [(32, 128)], None),
    ("GroupedMatmul", "GroupedMatmul", [((24, 64), BF16), ((4, 64, 96), BF16), ((4,), I64)], {}, [(24, 96)], None),
    ("GroupedMatmul-transpose_weight", "GroupedMatmul", [((24, 96), BF16), ((4, 64, 96), BF16), ((4,), I64)],
     {"transpose_weight": True}, [(24, 64)], None),
    ("GroupedMatmul-weight-grad", "GroupedMatmul", [((24, 64), BF16), ((24, 96), BF16), ((4,), I64)],
     {"group_type": 2, "transpose_x": True}, [(4, 64, 96)], None),
    ("MoeGatingTopKSoftmax", "MoeGatingTopKSoftmax", [((32, 8), BF16)], {"k": 2}, [(32, 2), (32, 2), (32, 2)],
     [BF16, I32, I32]),
    ("MoeInitRoutingV2", "MoeInitRoutingV2", [((32, 64), BF16), ((32, 2), I32)], {"expert_num": 8},
     [(64, 64), (64,), (8,), (8,)], [BF16, I32, I64, I64]),
    ("MoeInitRoutingV2Grad", "MoeInitRoutingV2Grad", [((64, 64), BF16), ((64,), I32)], {"top_k": 2},
     [(32, 64)], [BF16]),
    ("MoeFinalizeRoutingV2", "MoeFinalizeRoutingV2", [((64, 64), BF16), ((64,), I32), ((32, 2), BF16),
                                                     ((32, 2), I32)], {}, [(32, 64)], [BF16]),
    ("MoeFinalizeRoutingV2Grad", "MoeFinalizeRoutingV2Grad", [((32, 64), BF16), ((64,), I32), ((64, 64), BF16),
                                                             ((32, 2), BF16), ((32, 2), I32)], {},
     [(64, 64), (32, 2)], None),
    ("ScatterElements", "ScatterElements", [((32, 8), BF16), ((32, 2), I32), ((32, 2), BF16)], {"axis": -1},
     [(32, 8)], None),
    ("SplitVD", "SplitVD", [((32, 96), BF16)], {"size_splits": [64, 16, 16], "split_dim": -1},
     [(32, 64), (32, 16), (32, 16)], None),
    ("ConcatD", "ConcatD", [((3,), F32), ((5,), F32)], {"concat_dim": 0}, [(8,)], None),
    ("SparseSoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyWithLogits", [((8, 10), F32), ((8,), I32)],
     {}, [(8,), (8, 10)], None),
    ("Exp", "Exp", [((4, 5), F32)], {}, [(4, 5)], None),
    ("Log", "Log", [((4, 5), F32)], {}, [(4, 5)], None),
    ("ReduceMax-keep", "ReduceMax", [((4, 5), F32)], {"axes": [-1], "keep_dims": True}, [(4, 1)], None),
    ("Identity", "Identity", [((4, 5), BF16)], {}, [(4, 5)], None),
    ("StopGradient", "StopGradient", [((4, 5), BF16)], {}, [(4, 5)], None),
    ("HcomAllToAllV", "HcomAllToAllV", [((8, 5), BF16)] + [((4,), I64)] * 4, {"rank_size": 4}, [(8, 5)], None),
    ("HcomAllToAll", "HcomAllToAll", [((8, 5), BF16)], {"rank_size": 4}, [(8, 5)], None),
    ("HcomSend", "HcomSend", [((8, 5), BF16)], {"dest_rank": 1, "sr_tag": 7, "group": "pp"}, [], []),
]


def _source_cases():
    """Ops without inputs that take their outputs from attributes."""
    return {
        "GetNext": ({"output_shapes": [[4, 3], [4]], "output_types": ["float16", "int32"]},
                    [(4, 3), (4,)], [F16, I32]),
        "IteratorV2": ({"output_shapes": [[2, 2]]}, [(2, 2)], [F16]),
        "HcomReceive": ({"shape": [8, 5], "dtype": "bfloat16", "src_rank": 0, "sr_tag": 7, "group": "pp"},
                        [(8, 5)], [BF16]),
    }


# ----------------------------------------------------------------------- shape inference
@pytest.mark.parametrize("case", SHAPE_CASES, ids=[c[0] for c in SHAPE_CASES])
def test_shape_inference(case):
    _, op_type, specs, attrs, shapes, dtypes = case
    g, outs = _build(op_type, specs, **attrs)
    assert [o.shape for o in outs] == shapes
    if dtypes is not None:
        assert [o.dtype for o in outs] == dtypes
    node = g.node("op")
    assert node.type == op_type
    assert [tuple(d.shape) for d in node.outputs] == shapes
    assert [t.node.name for t in node.inputs] == [f"in{i}" for i in range(len(specs))]


@pytest.mark.parametrize("op_type", sorted(_source_cases()))
def test_shape_inference_of_input_ops(op_type):
    attrs, shapes, dtypes = _source_cases()[op_type]
    g = ge.Graph()
    out = g.op(op_type, [], name="src", **attrs)
    outs = out if isinstance(out, tuple) else (out,)
    assert [o.shape for o in outs] == shapes
    assert [o.dtype for o in outs] == dtypes
    assert g.node("src").engine == ("HCCL" if op_type.startswith("Hcom") else "AI_CPU")


def test_every_buildable_op_type_has_a_shape_inference_case():
    covered = {c[1] for c in SHAPE_CASES} | set(_source_cases()) | {"NetOutput"}
    buildable = set(known_op_types()) - SOURCE_TYPES
    assert buildable - covered == set(), "op types without a shape-inference test"
    assert covered - set(known_op_types()) == set()


def test_trans_data_round_trip_restores_origin_shape():
    g = ge.Graph()
    x = g.data("x", (2, 20, 5, 5), F16, "NCHW")
    y = g.op("TransData", x, dst_format="NC1HWC0")
    assert y.desc.origin_shape == (2, 20, 5, 5)
    assert y.format == "NC1HWC0"
    z = g.op("TransData", y, dst_format="NCHW")
    assert (z.shape, z.format) == ((2, 20, 5, 5), "NCHW")
    w = g.op("TransData", g.data("m", (3, 33, 17)), dst_format="FRACTAL_NZ")
    assert g.op("TransData", w, dst_format="ND").shape == (3, 33, 17)


@pytest.mark.parametrize("source", ["data", "variable", "const"])
def test_source_nodes(source):
    g = ge.Graph()
    if source == "data":
        t = g.data("x", [2, 3], "fp16", "nchw")
        assert (t.shape, t.dtype, t.format) == ((2, 3), "float16", "NCHW")
        assert g.node("x").attrs["index"] == 0
        assert g.data("y", 4).node.attrs["index"] == 1
    elif source == "variable":
        t = g.variable("w", (3, 4))
        assert (t.shape, t.dtype) == ((3, 4), "float32")
        assert g.node("w").attrs["trainable"] is True
    else:
        t = g.const("c", (), "float32", value=0.5)
        assert t.shape == () and t.desc.numel == 1 and g.node("c").attrs["value"] == 0.5
    assert t.node.engine == "GE_LOCAL"


def test_graph_output_adds_net_output_last():
    g = ge.Graph()
    x = g.data("x", (2, 2))
    y = g.op("Relu", x)
    node = g.output(y)
    assert node.type == "NetOutput" and node.name == NET_OUTPUT_NAME
    assert g.nodes[-1] is node and g.net_output is node
    assert [t.node for t in node.inputs] == [y.node]


# --------------------------------------------------------------------------- naming
def test_auto_names_are_unique_and_scoped():
    g = ge.Graph()
    x = g.data("x", (2, 2))
    a = g.op("Relu", x)
    b = g.op("Relu", x)
    with g.name_scope("block"):
        c = g.op("Relu", x)
        with g.name_scope("inner/"):
            d = g.op("Relu", x, name="act")
    assert [t.node.name for t in (a, b, c, d)] == ["Relu", "Relu_1", "block/Relu", "block/inner/act"]
    assert "block/inner/act" in g and "nope" not in g
    assert len(g) == 5 and [n.id for n in g] == list(range(5))


@pytest.mark.parametrize("scope", [5, "", "//", None])
def test_name_scope_must_be_a_non_empty_string(scope):
    g = ge.Graph()
    with pytest.raises(ge.GraphBuildError, match=r"^name_scope: scope must be a non-empty string \(a name, not only "
                                                 rf"'/'\), got {re.escape(repr(scope))}$"):
        with g.name_scope(scope):
            pytest.fail("the block ran")


def test_explicit_duplicate_name_is_rejected():
    g = ge.Graph()
    x = g.data("x", (2, 2))
    g.op("Relu", x, name="r")
    with pytest.raises(ge.GraphBuildError, match=r"Relu 'r': a node with this name already exists"):
        g.op("Relu", x, name="r")


def test_auto_name_skips_taken_names():
    g = ge.Graph()
    x = g.data("x", (2, 2))
    g.op("Relu", x, name="Relu_1")
    assert g.op("Relu", x).node.name == "Relu"
    assert g.op("Relu", x).node.name == "Relu_2"


def test_node_lookup_suggests_close_names():
    g = ge.Graph("net")
    g.op("Relu", g.data("x", (2,)), name="activation")
    with pytest.raises(KeyError, match="did you mean activation"):
        g.node("activaton")


def test_consumers_and_nodes_of_type():
    g = ge.Graph()
    x = g.data("x", (2, 2))
    r = g.op("Relu", x)
    a = g.op("Add", [x, r])
    assert [(n.name, i) for n, i in g.consumers(x.node)] == [("Relu", 0), ("Add", 0)]
    assert [(n.name, i) for n, i in g.consumers(r.node)] == [("Add", 1)]
    assert [n.name for n in g.nodes_of_type("Relu", "Add")] == ["Relu", "Add"]
    assert a.node.op_def.engine == "AI_VECTOR_CORE"


# ---------------------------------------------------------------------------- errors
ERROR_CASES = [
    # (id, op type, input specs, attrs, regex the message must match)
    ("Conv2D-channel-mismatch", "Conv2D", [((1, 3, 8, 8), F16), ((4, 5, 3, 3), F16)], {},
     r"^Conv2D 'op': input has 3 channels but the filter \[4, 5, 3, 3\] expects 5"),
    ("Conv2D-rank", "Conv2D", [((3, 8, 8), F16), ((4, 3, 3, 3), F16)], {}, r"^Conv2D 'op': x must have rank 4"),
    ("Conv2D-window-too-big", "Conv2D", [((1, 3, 2, 2), F16), ((4, 3, 3, 3), F16)], {},
     r"^Conv2D 'op': window 3 .* does not fit input size 2"),
    ("Conv2D-bias-shape", "Conv2D", [((1, 3, 8, 8), F16), ((4, 3, 1, 1), F16), ((3,), F16)], {},
     r"^Conv2D 'op': bias must have shape \[4\]"),
    ("Conv2D-bad-pads", "Conv2D", [((1, 3, 8, 8), F16), ((4, 3, 1, 1), F16)], {"pads": "FULL"},
     r"^Conv2D 'op': pads must be"),
    ("MatMul-inner-dim", "MatMul", [((4, 5), F16), ((6, 7), F16)], {},
     r"^MatMul 'op': inner dimensions differ: .*5 != 6"),
    ("MatMulV2-transposed-inner-dim", "MatMulV2", [((4, 5), F16), ((5, 6), F16)], {"transpose_x2": True},
     r"^MatMulV2 'op': inner dimensions differ"),
    ("MatMul-dtype", "MatMul", [((4, 5), F16), ((5, 6), F32)], {}, r"^MatMul 'op': inputs \[0, 1\] must have the same dtype"),
    ("BatchMatMul-inner-dim", "BatchMatMul", [((2, 4, 5), F16), ((2, 6, 7), F16)], {},
     r"^BatchMatMul 'op': inner dimensions differ"),
    ("Add-not-broadcastable", "Add", [((2, 3), F16), ((4,), F16)], {},
     r"^Add 'op': shapes \[2, 3\] and \[4\] cannot be broadcast \(dimension 3 vs 4\)"),
    ("Add-dtype", "Add", [((2, 3), F16), ((2, 3), F32)], {}, r"^Add 'op': inputs \[0, 1\] must have the same dtype"),
    ("AddN-shapes", "AddN", [((2, 3), F16), ((3, 2), F16)], {}, r"^AddN 'op': input 1 has shape \[3, 2\]"),
    ("BiasAdd-channels", "BiasAdd", [((2, 8, 4, 4), F16), ((4,), F16)], {}, r"^BiasAdd 'op': bias must have shape \[8\]"),
    ("Reshape-numel", "Reshape", [((2, 3), F16)], {"shape": [4, 2]}, r"^Reshape 'op': cannot reshape \[2, 3\]"),
    ("Reshape-two-minus-ones", "Reshape", [((2, 3), F16)], {"shape": [-1, -1]}, r"at most one -1"),
    ("Reshape-no-shape", "Reshape", [((2, 3), F16)], {}, r"^Reshape 'op': attribute shape is required"),
    ("Transpose-bad-perm", "Transpose", [((2, 3), F16)], {"perm": [0, 0]}, r"^Transpose 'op': perm \[0, 0\] is not a permutation"),
    ("ReduceSum-axis-range", "ReduceSum", [((2, 3), F16)], {"axes": [2]}, r"^ReduceSum 'op': axis 2 is out of range for rank 2"),
    ("SplitVD-dim-range", "SplitVD", [((4, 6), F16)], {"size_splits": [3, 3], "split_dim": -3},
     r"^SplitVD 'op': split_dim -3 is out of range for x of rank 2"),
    ("ConcatD-dim-range", "ConcatD", [((3,), F32), ((5,), F32)], {"concat_dim": 1},
     r"^ConcatD 'op': concat_dim 1 is out of range for inputs of rank 1"),
    ("BroadcastTo-incompatible", "BroadcastTo", [((3, 2), F16)], {"shape": [3, 4]}, r"^BroadcastTo 'op': "),
    ("MaxPoolGrad-shape", "MaxPoolGrad", [((2, 8, 9, 9), F16), ((2, 8, 5, 5), F16), ((2, 8, 5, 5), F16)],
     {"ksize": 3, "strides": 2}, r"^MaxPoolGrad 'op': pooling x1 .* gives \[2, 8, 4, 4\]"),
    ("SoftmaxXent-labels", "SoftmaxCrossEntropyWithLogits", [((8, 10), F16), ((8, 9), F16)], {},
     r"^SoftmaxCrossEntropyWithLogits 'op': labels \[8, 9\] must have the shape of features"),
    ("LayerNorm-gamma", "LayerNorm", [((4, 16), F16), ((8,), F16), ((16,), F16)], {}, r"^LayerNorm 'op': gamma must have shape \[16\]"),
    ("BNTrainingUpdate-vectors", "BNTrainingUpdate", [((2, 8, 4, 4), F16)] + [((4,), F32)] * 6, {},
     r"^BNTrainingUpdate 'op': sum must have shape \[8\]"),
    ("GatherV2-indices-dtype", "GatherV2", [((10, 4), F16), ((3,), F16)], {}, r"^GatherV2 'op': indices must be int32 or int64"),
    ("UnsortedSegmentSum-num", "UnsortedSegmentSum", [((6, 4), F16), ((6,), I32)], {"num_segments": 0},
     r"num_segments must be a positive int"),
    ("ApplyMomentum-grad-shape", "ApplyMomentum", [((4, 3), F32), ((4, 3), F32), ((1,), F32), ((3, 4), F32), ((1,), F32)],
     {}, r"^ApplyMomentum 'op': grad \[3, 4\] must have the shape of var \[4, 3\]"),
    ("ApplyMomentum-lr-not-scalar", "ApplyMomentum", [((4, 3), F32), ((4, 3), F32), ((2,), F32), ((4, 3), F32), ((1,), F32)],
     {}, r"^ApplyMomentum 'op': lr must be a scalar"),
    ("TransData-same-format", "TransData", [((2, 16, 4, 4), F16, "NCHW")], {"dst_format": "NCHW"}, r"both NCHW"),
    ("TransData-unsupported", "TransData", [((2, 16, 4), F16, "NCHW")], {"dst_format": "NC1HWC0"}, r"is not supported"),
    ("TransData-back-without-origin", "TransData", [((2, 1, 4, 4, 16), F16, "NC1HWC0")], {"dst_format": "NCHW"},
     r"no origin shape"),
    ("HcomAllReduce-reduction", "HcomAllReduce", [((3,), F32)], {"reduction": "mean"}, r"reduction must be one of"),
    ("Cast-dst-type", "Cast", [((3,), F32)], {"dst_type": "float8"}, r"unknown dtype 'float8'"),
]


@pytest.mark.parametrize("case", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_build_errors_name_the_op(case):
    _, op_type, specs, attrs, pattern = case
    g = ge.Graph()
    ins = _inputs(g, specs)
    n_before = len(g)
    with pytest.raises(ge.GraphBuildError, match=pattern):
        g.op(op_type, ins, name="op", **attrs)
    assert len(g) == n_before, "a failed op must not be added"
    assert "op" not in g


@pytest.mark.parametrize("op_type,n_inputs,expect", [
    ("Relu", 2, r"^Relu 'Relu': expects 1 inputs \(x\), got 2"),
    ("Add", 1, r"^Add 'Add': expects 2 inputs \(x1, x2\), got 1"),
    ("Conv2D", 4, r"^Conv2D 'Conv2D': expects 2 to 3 inputs \(x, filter, bias\), got 4"),
    ("AddN", 0, r"^AddN 'AddN': expects at least 1 inputs \(x\.\.\.\), got 0"),
    ("HcomAllReduce", 0, r"^HcomAllReduce 'HcomAllReduce': expects at least 1 inputs"),
    ("ApplyAdamW", 10, r"^ApplyAdamW 'ApplyAdamW': expects 11 to 12 inputs"),
    ("GetNext", 1, r"^GetNext 'GetNext': expects 0 inputs"),
])
def test_wrong_input_count(op_type, n_inputs, expect):
    g = ge.Graph()
    x = g.data("x", (4, 4))
    with pytest.raises(ge.GraphBuildError, match=expect):
        g.op(op_type, [x] * n_inputs)


def test_failed_op_does_not_consume_auto_name():
    g = ge.Graph()
    x = g.data("x", (4, 4))
    with pytest.raises(ge.GraphBuildError):
        g.op("Relu", [x, x])
    assert g.op("Relu", x).node.name == "Relu"


@pytest.mark.parametrize("typo,suggestion", [("Conv2d", "Conv2D"), ("Relux", "Relu"), ("matmul", "MatMul"),
                                             ("SoftMax", "Softmax")])
def test_unknown_op_type_suggests_close_matches(typo, suggestion):
    g = ge.Graph()
    x = g.data("x", (4, 4))
    with pytest.raises(ge.GraphBuildError, match=r"unknown op type") as exc:
        g.op(typo, x)
    msg = str(exc.value)
    assert repr(typo) in msg and "did you mean" in msg
    assert suggestion in msg.split("did you mean", 1)[1]


def test_unknown_op_type_without_close_match_lists_known_types():
    g = ge.Graph()
    with pytest.raises(ge.GraphBuildError) as exc:
        g.op("Qqqqqqqqqqqq", g.data("x", (1,)))
    msg = str(exc.value)
    assert "known types:" in msg
    for t in ("Conv2D", "MatMulV2", "HcomAllReduce"):
        assert t in msg


@pytest.mark.parametrize("op_type", sorted(SOURCE_TYPES))
def test_source_types_cannot_be_built_with_op(op_type):
    with pytest.raises(ge.GraphBuildError, match=rf"use Graph\.{op_type.lower()}\(\.\.\.\)"):
        ge.Graph().op(op_type, [])


def test_inputs_must_be_tensors_of_this_graph():
    g1, g2 = ge.Graph("a"), ge.Graph("b")
    x1 = g1.data("x", (2,))
    with pytest.raises(ge.GraphBuildError, match=r"input 0 \(x:0\) belongs to another graph"):
        g2.op("Relu", x1)
    with pytest.raises(ge.GraphBuildError, match=r"input 0 must be a Tensor, got list"):
        g1.op("Relu", [[1, 2]])
    with pytest.raises(ge.GraphBuildError, match=r"output 0 must be a Tensor of graph 'b'"):
        g2.output(x1)


@pytest.mark.parametrize("kwargs,pattern", [
    ({"shape": (2, 0)}, r"shape \[2, 0\] is not valid; accepted: dimensions >= 1, or -1 for an unknown"),
    ({"shape": "abc"}, r"shape must be a sequence of ints"),
    ({"shape": (2,), "dtype": "float128"}, r"unknown dtype 'float128'; accepted: float16"),
    ({"shape": (2,), "format": "NCWH"}, r"unknown format 'NCWH'; accepted:"),
])
def test_data_validation(kwargs, pattern):
    with pytest.raises(ge.GraphBuildError, match=pattern):
        ge.Graph().data("x", **kwargs)


def test_graph_name_and_second_output_are_rejected():
    with pytest.raises(ge.GraphBuildError, match="non-empty string"):
        ge.Graph("")
    g = ge.Graph("g")
    x = g.data("x", (2,))
    g.output(x)
    with pytest.raises(ge.GraphBuildError, match="already has outputs"):
        g.output(x)


# ------------------------------------------------------------------------------ costs
def test_conv_and_matmul_flops():
    g = ge.Graph()
    x = g.data("x", (2, 3, 32, 32), F16, "NCHW")
    w = g.data("w", (16, 3, 3, 3))
    y = g.op("Conv2D", [x, w], strides=2, pads=1)
    assert op_cost(y.node).flops == 2 * 2 * 16 * 16 * 16 * 3 * 3 * 3
    a, b = g.data("a", (4, 5)), g.data("b", (6, 5))
    m = g.op("MatMul", [a, b], transpose_x2=True)
    assert op_cost(m.node).flops == 2 * 4 * 6 * 5
    bm = g.op("BatchMatMul", [g.data("p", (3, 4, 5)), g.data("q", (3, 5, 2))])
    assert op_cost(bm.node).flops == 2 * 3 * 4 * 2 * 5
    r = g.op("Relu", y)
    c = op_cost(r.node)
    assert c.flops == 0 and c.vector_ops == y.desc.numel and c.bytes == 2 * y.desc.nbytes
    ar = g.op("HcomAllReduce", [g.data("gr", (10,), "float32")])
    assert op_cost(ar.node).comm_bytes == 40


def test_engines():
    assert get_op("Conv2D").engine == "AI_CORE"
    assert get_op("Relu").engine == "AI_VECTOR_CORE"
    assert get_op("GetNext").engine == "AI_CPU"
    assert get_op("HcomAllReduce").engine == "HCCL"
    assert get_op("Reshape").engine == "GE_LOCAL"


# -------------------------------------------------------------------- validation bugs
def test_reshape_rejects_negative_dims():
    g = ge.Graph()
    x = g.data("x", (4,))
    with pytest.raises(ge.GraphBuildError):
        g.op("Reshape", x, shape=[-2, -2])


def test_const_rejects_negative_dims():
    with pytest.raises(ge.GraphBuildError):
        ge.Graph().const("c", (-3,))


def test_second_net_output_via_op_is_rejected():
    g = ge.Graph()
    x = g.data("x", (2,))
    g.output(x)
    with pytest.raises(ge.GraphBuildError):
        g.op("NetOutput", [x])


def test_get_next_rejects_non_positive_dims():
    with pytest.raises(ge.GraphBuildError):
        ge.Graph().op("GetNext", [], output_shapes=[[0, -1]])


@pytest.mark.parametrize("dims", [[2.5, 3], [True, 3], ["4", 3], [None, 3]])
def test_shape_dims_must_be_ints(dims):
    with pytest.raises(ge.GraphBuildError, match=r"Data 'x': shape .* dimension 0 .* is not an int; accepted: "
                                                 r"ints >= 1, or -1 for an unknown"):
        ge.Graph().data("x", dims)


def test_shape_accepts_numpy_ints():
    np = pytest.importorskip("numpy")
    g = ge.Graph()
    assert g.data("x", [np.int64(2), np.int32(3)]).shape == (2, 3)
    assert g.data("y", np.int64(5)).shape == (5,)
    assert g.variable("w", np.array([4, 8])).shape == (4, 8)


def test_const_accepts_an_int_shape_like_data_and_variable():
    g = ge.Graph()
    assert g.const("c", shape=3).shape == (3,)
    assert g.const("s").shape == ()
    with pytest.raises(ge.GraphBuildError, match=r"Const 'n': shape must be a sequence of ints, got None"):
        g.const("n", shape=None)


def test_control_inputs_must_be_nodes_of_this_graph():
    g, other = ge.Graph("g"), ge.Graph("h")
    x = g.data("x", (4,))
    q = other.data("q", (1,))
    with pytest.raises(ge.GraphBuildError, match=r"Relu 'Relu': control input 0 must be a Node or Tensor of graph "
                                                 r"'g', got str"):
        g.op("Relu", x, control_inputs=["foo"])
    with pytest.raises(ge.GraphBuildError, match=r"Relu 'Relu': control input 0 \(Data 'q'\) belongs to another graph"):
        g.op("Relu", x, control_inputs=[q.node])
    with pytest.raises(ge.GraphBuildError, match=r"NetOutput: control input 0 must be a Node or Tensor of graph 'g'"):
        g.output(x, control_inputs=[3])
    assert "Relu" not in g  # a rejected op adds nothing
    y = g.op("Relu", x, control_inputs=[x])  # a Tensor stands for its node
    assert y.node.control_inputs == [x.node]


def test_tensor_byte_size_overflow_is_a_build_error():
    g = ge.Graph("big")
    with pytest.raises(ge.GraphBuildError, match=r"Data 'a': output 0 float16\[2147483648,2147483648\]:ND is "
                                                 r"9223372036854775808 bytes; accepted: at most 9223372036854775807"):
        g.data("a", [2**31, 2**31])
    x = g.data("x", [2**30, 2**30], "int16")  # 2**61 bytes: fits
    with pytest.raises(ge.GraphBuildError, match=r"Cast 'wide': output 0 int64\[1073741824,1073741824\]:ND is "
                                                 r"9223372036854775808 bytes; accepted: at most"):
        g.op("Cast", x, name="wide", dst_type="int64")
