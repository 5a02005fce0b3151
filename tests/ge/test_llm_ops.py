"""The LLM ops of the catalogue: FLOPs and bytes by hand, their engines and task types, their errors."""

from __future__ import annotations

import pytest

from geprof_nb import ge
from geprof_nb.ge.device import PRESETS, CostModel
from geprof_nb.ge.ops import op_cost
from geprof_nb.prof.rawdata import GeTaskType, RtTaskType

BF16 = "bfloat16"


def _node(op_type, specs, **attrs):
    g = ge.Graph()
    ins = [g.data(f"in{i}", shape, dtype) for i, (shape, dtype) in enumerate(specs)]
    out = g.op(op_type, ins, **attrs)
    return (out[0] if isinstance(out, tuple) else out).node if out != () else g.nodes[-1]


def _fa(sparse_mode, b=2, s=256, n=8, kv=2, d=64, grad=False):
    q, k = ((b, s, n, d), BF16), ((b, s, kv, d), BF16)
    if grad:
        stat = ((b, n, s, 8), "float32")
        return _node("FlashAttentionScoreGrad", [q, k, k, q, stat, stat, q], head_num=n, input_layout="BSND",
                     sparse_mode=sparse_mode)
    return _node("FlashAttentionScore", [q, k, k], head_num=n, input_layout="BSND", sparse_mode=sparse_mode)


def test_flash_attention_flops_full_and_causal():
    b, s, n, d = 2, 256, 8, 64
    full = op_cost(_fa(0))
    # Q K^T and P V: 2 products of [s, d] x [d, s] per head, 2 FLOPs per multiply-accumulate
    assert full.flops == 2 * 2 * b * n * s * s * d
    assert full.vector_ops == 6 * b * n * s * s  # the softmax on every score
    causal = op_cost(_fa(2))
    # causal masking computes the lower triangle with the diagonal: s (s + 1) / 2 scores per head
    assert causal.flops == 2 * 2 * b * n * (s * (s + 1) // 2) * d
    grad = op_cost(_fa(2, grad=True))
    assert grad.flops == 5 * causal.flops // 2  # recompute Q K^T, then dV, dP, dQ, dK: 5 products
    q_bytes, kv_bytes = b * s * n * d * 2, b * s * 2 * d * 2
    assert full.bytes_in == q_bytes + 2 * kv_bytes
    assert full.bytes_out == q_bytes + 2 * (b * n * s * 8 * 4) + 2  # output, softmax max and sum, a reserved [1]


def test_flash_attention_is_a_mix_task_on_a2_whose_vector_work_can_bound_it():
    node = _fa(2, b=1, s=4096, n=32, kv=32, d=128)
    cost = op_cost(node)
    k = CostModel(PRESETS["Ascend910B"]).kernel(node.type, node.engine, cost, BF16, node.attrs)
    assert (k.ge_task_type, k.rt_task_type, k.mix_block_dim) == (GeTaskType.MIX_AIC, RtTaskType.KERNEL_MIX_AIC,
                                                                  2 * k.block_dim)
    # the softmax runs on the block's two AI Vector cores at 128 bf16 lanes a cycle
    assert k.counters["vec_cycles"] == int(cost.vector_ops / k.block_dim / 128 / 2)
    assert k.counters["mac_cycles"] > k.counters["vec_cycles"]  # a long sequence is cube-bound
    old = CostModel(PRESETS["Ascend910A"]).kernel(node.type, node.engine, cost, BF16, node.attrs)
    assert old.rt_task_type == RtTaskType.KERNEL_AICORE  # no MIX tasks on the 910A


def test_grouped_matmul_flops_forward_and_weight_gradient():
    m, k, n, e = 96, 64, 128, 4
    fwd = op_cost(_node("GroupedMatmul", [((m, k), BF16), ((e, k, n), BF16), ((e,), "int64")]))
    assert fwd.flops == 2 * m * k * n and fwd.inner_dim == k
    assert fwd.bytes_in == (m * k + e * k * n) * 2 + e * 8  # every expert's weight is read once
    wgrad = op_cost(_node("GroupedMatmul", [((m, k), BF16), ((m, n), BF16), ((e,), "int64")], group_type=2,
                          transpose_x=True))
    assert wgrad.flops == 2 * m * k * n and wgrad.bytes_out == e * k * n * 2


@pytest.mark.parametrize("op_type, specs, attrs, ops_per_element", [
    ("RmsNorm", [((32, 64), BF16), ((64,), BF16)], {}, 4),
    ("SwiGlu", [((32, 128), BF16)], {}, 6),
    ("ApplyRotaryPosEmb", [((1, 16, 4, 8), BF16), ((1, 16, 2, 8), BF16), ((1, 16, 1, 8), BF16),
                           ((1, 16, 1, 8), BF16)], {}, 3),
    ("MoeGatingTopKSoftmax", [((32, 8), BF16)], {"k": 2}, 8),
])
def test_vector_ops_count_per_element_of_the_largest_tensor(op_type, specs, attrs, ops_per_element):
    node = _node(op_type, specs, **attrs)
    largest = max([t.desc.numel for t in node.inputs] + [d.numel for d in node.outputs])
    cost = op_cost(node)
    assert cost.vector_ops == ops_per_element * largest and cost.flops == 0
    assert node.engine == "AI_VECTOR_CORE"


def test_collective_buffers():
    a2a = op_cost(_node("HcomAllToAllV", [((64, 32), BF16)] + [((4,), "int64")] * 4, rank_size=4, group="exp"))
    assert a2a.comm_bytes == 64 * 32 * 2 + 4 * 4 * 8  # the send buffer (and its count vectors)
    send = op_cost(_node("HcomSend", [((16, 32), BF16)], dest_rank=1, sr_tag=3, group="pp"))
    assert send.comm_bytes == 16 * 32 * 2
    g = ge.Graph()
    recv = g.op("HcomReceive", [], shape=[16, 32], dtype=BF16, src_rank=0, sr_tag=3, group="pp")
    assert op_cost(recv.node).comm_bytes == 16 * 32 * 2 and recv.node.engine == "HCCL"


@pytest.mark.parametrize("op_type, specs, attrs, pattern", [
    ("FlashAttentionScore", [((2, 16, 4, 8), BF16), ((2, 16, 3, 8), BF16), ((2, 16, 3, 8), BF16)],
     {"head_num": 4, "input_layout": "BSND"}, "head_num 4 is not a multiple of the key's 3 heads"),
    ("FlashAttentionScore", [((2, 16, 32), BF16)] * 3, {"head_num": 4, "input_layout": "BHSD"},
     "input_layout must be one of BSH, SBH, BSND, BNSD, got 'BHSD'"),
    ("FlashAttentionScore", [((2, 16, 32), BF16)] * 3, {"input_layout": "BSH"}, "head_num must be an int >= 1"),
    ("SwiGlu", [((4, 7), BF16)], {}, r"dim 1 \(7\) must be even"),
    ("GroupedMatmul", [((6, 4), BF16), ((2, 5, 3), BF16), ((2,), "int64")], {}, "has K=4 but the weight gives K=5"),
    ("GroupedMatmul", [((6, 4), BF16), ((2, 4, 3), BF16), ((3,), "int64")], {}, r"group_list must be an int64 \[2\]"),
    ("MoeGatingTopKSoftmax", [((6, 4), BF16)], {"k": 5}, r"k must be an int in \[1, 4\]"),
    ("MoeInitRoutingV2", [((6, 8), BF16), ((6, 2), "int32")], {}, "expert_num must be an int >= 1"),
    ("RmsNorm", [((6, 8), BF16), ((4,), BF16)], {}, r"gamma \[4\] must be the trailing dims of x \[6, 8\]"),
    ("HcomAllToAllV", [((6, 8), BF16)] + [((4,), "int64")] * 4, {"rank_size": 4},
     r"dim 0 of send_data \[6, 8\] must be divisible by rank_size 4"),
    ("HcomSend", [((6, 8), BF16)], {"sr_tag": 1}, "dest_rank must be an int >= 0"),
])
def test_bad_inputs_are_refused_naming_the_op_and_field(op_type, specs, attrs, pattern):
    with pytest.raises(ge.GraphBuildError, match=pattern):
        _node(op_type, specs, **attrs)
