"""add_training on hand-built graphs: every gradient rule gives gradients shaped like the variables."""

from __future__ import annotations

import pytest

from geprof_nb import ge

F16, F32 = "float16", "float32"


def _v(g, shape, dtype=F16, fmt="ND", name="w"):
    return g.variable(name, shape, dtype, fmt)


# id -> builder(g) returning (output tensor, variable whose gradient we check)
RULES = {
    "Conv2D": lambda g: (g.op("Conv2D", [g.data("x", (1, 3, 8, 8), F16, "NCHW"), (w := _v(g, (4, 3, 3, 3)))],
                              pads=1, strides=2), w),
    "Conv2D-bias": lambda g: (g.op("Conv2D", [g.data("x", (1, 3, 8, 8), F16, "NCHW"), _v(g, (4, 3, 3, 3), name="k"),
                                              (w := _v(g, (4,)))], pads=1), w),
    "Conv2D-input-grad": lambda g: (g.op("Conv2D", [g.op("Relu", (w := _v(g, (1, 3, 8, 8), fmt="NCHW"))),
                                                    g.data("k", (4, 3, 3, 3))], pads=1), w),
    "MatMul": lambda g: (g.op("MatMul", [g.data("x", (2, 3)), (w := _v(g, (3, 4)))]), w),
    "MatMul-transposed": lambda g: (g.op("MatMul", [g.data("x", (3, 2)), (w := _v(g, (4, 3)))],
                                         transpose_x1=True, transpose_x2=True), w),
    "MatMul-x1-transposed": lambda g: (g.op("MatMul", [(w := _v(g, (3, 2))), g.data("x", (3, 4))],
                                            transpose_x1=True), w),
    "MatMulV2-bias": lambda g: (g.op("MatMulV2", [g.data("x", (2, 3)), _v(g, (3, 4), name="k"), (w := _v(g, (4,)))]), w),
    "BatchMatMul-broadcast": lambda g: (g.op("BatchMatMul", [g.data("x", (3, 4, 5)), (w := _v(g, (5, 2)))]), w),
    "BatchMatMul-adj": lambda g: (g.op("BatchMatMul", [(w := _v(g, (2, 5, 4))), g.data("x", (2, 6, 5))],
                                       adj_x1=True, adj_x2=True), w),
    "BNTrainingUpdate": lambda g: (g.op("BNTrainingUpdate", [
        (x := g.data("x", (2, 4, 3, 3), F16, "NCHW")), *g.op("BNTrainingReduce", x), (w := _v(g, (4,), F32)),
        _v(g, (4,), F32, name="b")])[0], w),
    "Relu": lambda g: (g.op("Relu", (w := _v(g, (3, 4)))), w),
    "Gelu": lambda g: (g.op("Gelu", (w := _v(g, (3, 4)))), w),
    "Add-broadcast": lambda g: (g.op("Add", [g.data("x", (2, 3, 4)), (w := _v(g, (3, 1)))]), w),
    "Sub-broadcast": lambda g: (g.op("Sub", [g.data("x", (3, 4)), (w := _v(g, (1, 4)))]), w),
    "Mul-broadcast": lambda g: (g.op("Mul", [(w := _v(g, (3, 1))), g.data("x", (2, 3, 4))]), w),
    "RealDiv": lambda g: (g.op("RealDiv", [g.data("x", (3, 4)), (w := _v(g, (4,)))]), w),
    "AddN-repeated": lambda g: (g.op("AddN", [(w := _v(g, (3,))), w, g.data("x", (3,))]), w),
    "BiasAdd": lambda g: (g.op("BiasAdd", [g.data("x", (1, 3, 8, 8), F16, "NCHW"), (w := _v(g, (3,)))]), w),
    "MaxPool": lambda g: (g.op("MaxPool", (w := _v(g, (1, 2, 6, 6), fmt="NCHW")), ksize=3, strides=2), w),
    "ReduceMean": lambda g: (g.op("ReduceMean", (w := _v(g, (3, 4))), axes=[1]), w),
    "ReduceSum-keep": lambda g: (g.op("ReduceSum", (w := _v(g, (3, 4))), axes=[1], keep_dims=True), w),
    "Softmax": lambda g: (g.op("Softmax", (w := _v(g, (3, 8)))), w),
    "LayerNorm": lambda g: (g.op("LayerNorm", [g.data("x", (3, 8)), (w := _v(g, (8,))), _v(g, (8,), name="b")])[0], w),
    "Cast": lambda g: (g.op("Cast", (w := _v(g, (3, 4), F32)), dst_type="float16"), w),
    "Reshape": lambda g: (g.op("Reshape", (w := _v(g, (3, 4))), shape=[12]), w),
    "Transpose": lambda g: (g.op("Transpose", (w := _v(g, (2, 3, 4))), perm=[1, 2, 0]), w),
    "BroadcastTo": lambda g: (g.op("BroadcastTo", (w := _v(g, (3, 1))), shape=[2, 3, 4]), w),
    "SoftmaxCrossEntropyWithLogits": lambda g: (g.op("SoftmaxCrossEntropyWithLogits",
                                                     [(w := _v(g, (4, 5))), g.data("y", (4, 5))])[0], w),
    "GatherV2": lambda g: (g.op("GatherV2", [(w := _v(g, (10, 4))), g.data("i", (5,), "int32")]), w),
    "BatchMatMulV2": lambda g: (g.op("BatchMatMulV2", [g.data("x", (3, 4, 5)), (w := _v(g, (3, 5, 2)))]), w),
    "FlashAttentionScore": lambda g: (g.op("FlashAttentionScore", [
        (w := _v(g, (1, 8, 4, 2))), g.data("k", (1, 8, 2, 2)), g.data("v", (1, 8, 2, 2))],
        head_num=4, input_layout="BSND", sparse_mode=2)[3], w),
    "RmsNorm": lambda g: (g.op("RmsNorm", [g.data("x", (3, 8)), (w := _v(g, (8,)))])[0], w),
    "ApplyRotaryPosEmb": lambda g: (g.op("Add", [g.op("ReduceMean", (qk := g.op("ApplyRotaryPosEmb", [
        (w := _v(g, (1, 8, 4, 2))), g.data("k", (1, 8, 2, 2)), g.data("c", (1, 8, 1, 2)),
        g.data("s", (1, 8, 1, 2))]))[0]), g.op("ReduceMean", qk[1])]), w),
    "SwiGlu": lambda g: (g.op("SwiGlu", (w := _v(g, (3, 8)))), w),
    "GroupedMatmul-weight": lambda g: (g.op("GroupedMatmul", [g.data("x", (6, 4)), (w := _v(g, (2, 4, 5))),
                                                              g.data("gl", (2,), "int64")]), w),
    "GroupedMatmul-x-transposed-weight": lambda g: (g.op("GroupedMatmul", [
        (w := _v(g, (6, 5))), g.data("k", (2, 4, 5)), g.data("gl", (2,), "int64")], transpose_weight=True), w),
    "MoeGatingTopKSoftmax": lambda g: (g.op("MoeGatingTopKSoftmax", (w := _v(g, (6, 4))), k=2)[0], w),
    "MoeInitRoutingV2": lambda g: (g.op("MoeInitRoutingV2", [(w := _v(g, (6, 8))), g.data("i", (6, 2), "int32")],
                                        expert_num=4)[0], w),
    "MoeFinalizeRoutingV2": lambda g: (g.op("MoeFinalizeRoutingV2", [
        (w := _v(g, (12, 8))), g.data("r", (12,), "int32"), g.data("s", (6, 2)), g.data("i", (6, 2), "int32")]), w),
    "SplitVD": lambda g: (g.op("SplitVD", (w := _v(g, (3, 8))), size_splits=[2, 6], split_dim=1)[1], w),
    "ConcatD": lambda g: (g.op("ConcatD", [(w := _v(g, (3, 2))), g.data("x", (3, 4))], concat_dim=1), w),
    "Exp": lambda g: (g.op("Exp", (w := _v(g, (3, 4)))), w),
    "Log": lambda g: (g.op("Log", (w := _v(g, (3, 4)))), w),
    "SparseSoftmaxCrossEntropyWithLogits": lambda g: (g.op("SparseSoftmaxCrossEntropyWithLogits", [
        (w := _v(g, (4, 5))), g.data("y", (4,), "int32")])[0], w),
    "Identity": lambda g: (g.op("Identity", (w := _v(g, (3, 4)))), w),
    "HcomAllReduce": lambda g: (g.op("HcomAllReduce", (w := _v(g, (3, 4))), group="tp", rank_size=2), w),
    "HcomAllToAllV": lambda g: (g.op("HcomAllToAllV", [(w := _v(g, (4, 3)))] + [g.data(f"c{i}", (2,), "int64")
                                                                               for i in range(4)],
                                     group="ep", rank_size=2), w),
    "HcomAllToAll": lambda g: (g.op("HcomAllToAll", (w := _v(g, (4, 3))), group="ep", rank_size=2), w),
}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_gradient_rule_shapes(rule):
    g = ge.Graph(rule)
    out, var = RULES[rule](g)
    loss = g.op("ReduceMean", out, name="loss")
    n_forward = len(g)
    info = ge.add_training(g, loss)
    grad = info.gradients[var.node.name]
    assert (grad.shape, grad.dtype) == (var.shape, var.dtype)
    assert grad.node.id >= n_forward == g.forward_end == info.backward_start
    assert len(info.updates) == len(info.gradients) == sum(
        1 for n in g.nodes[:n_forward] if n.type == "Variable" and n.attrs["trainable"])
    assert info.all_reduce == []


def test_gradient_through_trans_data():
    g = ge.Graph()
    w = g.variable("w", (2, 16, 4, 4), F16, "NCHW")
    y = g.op("TransData", w, dst_format="NC1HWC0")
    loss = g.op("ReduceMean", y)
    info = ge.add_training(g, loss)
    assert info.gradients["w"].shape == (2, 16, 4, 4)


def test_gradients_accumulate_with_add_n():
    g = ge.Graph()
    w = g.variable("w", (3,), F16)
    a = g.op("Relu", w)
    b = g.op("Gelu", w)
    loss = g.op("ReduceMean", g.op("Add", [a, b]))
    info = ge.add_training(g, loss)
    grad = info.gradients["w"]
    assert grad.node.type == "AddN" and grad.node.name == "gradients/w_grad/AddN"
    assert len(grad.node.inputs) == 2


def test_untrainable_and_unused_variables_get_no_update():
    g = ge.Graph()
    w = g.variable("w", (3,), F16)
    frozen = g.variable("frozen", (3,), F16, trainable=False)
    g.variable("unused", (3,), F16)
    loss = g.op("ReduceMean", g.op("Mul", [w, frozen]))
    info = ge.add_training(g, loss)
    assert list(info.gradients) == ["w"]
    assert [u.inputs[0].node.name for u in info.updates] == ["w"]


def test_bucketing_and_all_reduce_naming(tiny_graph):
    g, info = tiny_graph(world_size=4, bucket_bytes=1)  # one gradient per bucket
    ars = g.nodes_of_type("HcomAllReduce")
    assert [a.name for a in ars] == ["gradients/HcomAllReduce_0", "gradients/HcomAllReduce_1"]
    assert [len(a.inputs) for a in ars] == [1, 1]
    assert info.all_reduce == ars
    # gradients are collected walking the forward graph backwards: w2 before w1
    assert [a.inputs[0].shape for a in ars] == [(32, 4), (16, 32)]
    assert all(a.attrs["rank_size"] == 4 and a.attrs["group"] == "hccl_world_group" for a in ars)
    g1, _ = tiny_graph(world_size=4)  # default 32 MiB buckets: a single AllReduce for both
    (ar,) = g1.nodes_of_type("HcomAllReduce")
    assert len(ar.inputs) == 2


def test_adamw_optimizer_state():
    g = ge.models.mlp(batch_size=2, in_features=8, hidden=(4,), out_features=2, optimizer="AdamW")
    updates = g.nodes_of_type("ApplyAdamW")
    assert len(updates) == 4
    for u in updates:
        m, v = u.inputs[1].node, u.inputs[2].node
        assert m.type == v.type == "Variable" and not m.attrs["trainable"] and not v.attrs["trainable"]
        assert m.outputs[0].shape == u.inputs[0].shape


@pytest.mark.parametrize("mutate,pattern", [
    (lambda g, loss: ge.add_training(g, loss, optimizer="Adam"), r"optimizer 'Adam' is not supported"),
    (lambda g, loss: ge.add_training(g, loss, world_size=0), r"world_size must be an int >= 1, got 0"),
    (lambda g, loss: ge.add_training(g, ge.Graph("other").data("z", (1,))), r"loss must be a Tensor of graph"),
    (lambda g, loss: (g.output(loss), ge.add_training(g, loss)), r"already has outputs"),
])
def test_add_training_errors(mutate, pattern):
    g = ge.Graph("g")
    w = g.variable("w", (3,))
    loss = g.op("ReduceMean", w)
    with pytest.raises(ge.GraphBuildError, match=pattern):
        mutate(g, loss)


def test_add_training_twice_and_without_variables():
    g = ge.Graph("g")
    x = g.data("x", (3,))
    with pytest.raises(ge.GraphBuildError, match="does not depend on any trainable variable"):
        ge.add_training(g, g.op("ReduceMean", x))
    g2 = ge.Graph("g2")
    loss = g2.op("ReduceMean", g2.variable("w", (3,)))
    ge.add_training(g2, loss)
    with pytest.raises(ge.GraphBuildError, match="already has outputs"):
        ge.add_training(g2, loss)
