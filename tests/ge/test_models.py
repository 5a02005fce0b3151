"""Model zoo sizes and the structure of training graphs (add_training)."""

from __future__ import annotations

import pytest

from geprof_nb import ge
from geprof_nb.ge.autodiff import DEFAULT_BUCKET_BYTES

# ----------------------------------------------------------------------------- sizes
RESNET50_PARAMS = 25_557_032  # torchvision resnet50 (conv + BN gamma/beta + fc)
RESNET50_MACS = 4.1e9  # per 224x224 image


def test_resnet50_parameter_count():
    params = ge.models.resnet50(batch_size=1, training=False).stats().parameters
    assert params == pytest.approx(25.56e6, rel=0.005)
    assert params == RESNET50_PARAMS


@pytest.mark.parametrize("batch", [1, 4])
def test_resnet50_macs_per_image(batch):
    stats = ge.models.resnet50(batch_size=batch, training=False).stats()
    assert stats.forward_macs == stats.forward_flops // 2
    assert stats.forward_macs / batch == pytest.approx(RESNET50_MACS, rel=0.03)


def test_resnet50_training_forward_flops_match_inference():
    inf = ge.models.resnet50(batch_size=2, training=False).stats()
    train = ge.models.resnet50(batch_size=2, training=True).stats()
    assert train.forward_flops == inf.forward_flops
    assert train.parameters == inf.parameters
    # backward: every conv has a BackpropFilter and (but the first) a BackpropInput -> ~3x forward
    assert 2.5 < train.total_flops / train.forward_flops < 3.1


def test_bert_base_defaults_parameter_count():
    params = ge.models.bert().stats().parameters
    assert params == pytest.approx(110e6, rel=0.02)


def test_bert_parameter_count_formula():
    h, layers, vocab, pos, labels = 64, 2, 100, 32, 3
    params = ge.models.bert(layers=layers, hidden=h, heads=4, vocab_size=vocab, max_position=pos, seq_len=16,
                            batch_size=2, num_labels=labels, training=False).stats().parameters
    embeddings = (vocab + pos + 2) * h + 2 * h
    layer = 4 * (h * h + h) + 2 * h + (h * 4 * h + 4 * h) + (4 * h * h + h) + 2 * h
    head = (h * h + h) + (h * labels + labels)
    assert params == embeddings + layers * layer + head


def test_mlp_parameter_count():
    stats = ge.models.mlp(in_features=784, hidden=(1024, 1024), out_features=10).stats()
    assert stats.parameters == 784 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10
    assert stats.parameter_bytes == 4 * stats.parameters  # float32 master weights


@pytest.mark.parametrize("factory,kwargs,pattern", [
    (ge.models.resnet50, {"batch_size": 0}, r"batch_size must be a positive int"),
    (ge.models.mlp, {"world_size": 0}, r"world_size must be a positive int"),
    (ge.models.mlp, {"hidden": (16, -1)}, r"hidden\[1\] must be a positive int"),
    (ge.models.bert, {"hidden": 100, "heads": 12}, r"hidden \(100\) must be a multiple of heads \(12\)"),
    (ge.models.bert, {"seq_len": 1024}, r"seq_len \(1024\) must not exceed max_position \(512\)"),
    (ge.models.mlp, {"data": "Queue"}, r"data must be one of Data, GetNext"),
    (ge.models.mlp, {"optimizer": "SGD"}, r"optimizer 'SGD' is not supported; accepted: Momentum, AdamW"),
])
def test_model_argument_errors(factory, kwargs, pattern):
    with pytest.raises(ge.GraphBuildError, match=pattern):
        factory(**kwargs)


def test_get_next_input():
    g = ge.models.resnet50(batch_size=1, image_size=32, data="GetNext")
    assert not g.nodes_of_type("Data")
    (gn,) = g.nodes_of_type("GetNext")
    assert [tuple(d.shape) for d in gn.outputs] == [(1, 3, 32, 32), (1, 1000)]


def test_inference_graph_has_no_training_ops():
    g = ge.models.resnet50(batch_size=1, image_size=32, training=False)
    assert not g.is_training and g.forward_end is None
    assert not g.nodes_of_type("ApplyMomentum", "HcomAllReduce", "Conv2DBackpropFilter")
    assert g.nodes[-1].type == "NetOutput"
    assert g.stats().total_flops == g.stats().forward_flops


# ------------------------------------------------------------------ training structure
def _trainable(g):
    return [n for n in g.nodes if n.type == "Variable" and n.attrs.get("trainable", True)]


MODELS = {
    "mlp-ws1": lambda: ge.models.mlp(batch_size=4, hidden=(32,), world_size=1),
    "mlp-ws4": lambda: ge.models.mlp(batch_size=4, hidden=(32,), world_size=4),
    "resnet50-ws1": lambda: ge.models.resnet50(batch_size=1, image_size=32, world_size=1),
    "resnet50-ws8": lambda: ge.models.resnet50(batch_size=1, image_size=32, world_size=8),
    "bert-ws2": lambda: ge.models.bert(layers=2, seq_len=16, batch_size=2, hidden=64, heads=4, vocab_size=100,
                                       world_size=2),
}


@pytest.fixture(params=sorted(MODELS))
def training_graph(request):
    name = request.param
    world_size = int(name.rsplit("ws", 1)[1])
    return name, MODELS[name](), world_size


def test_backward_ops_come_after_forward_ops(training_graph):
    _, g, _ = training_graph
    assert g.is_training and g.forward_end is not None
    fwd, rest = g.nodes[: g.forward_end], g.nodes[g.forward_end:]
    assert not any(n.name.startswith("gradients/") for n in fwd)
    grads = [n for n in rest if n.name.startswith("gradients/")]
    assert grads, "no backward ops"
    assert rest[0].name.startswith("gradients/")  # the backward pass starts right at forward_end
    assert min(n.id for n in grads) == g.forward_end
    for n in grads:  # backward ops only read tensors that exist already (topological order)
        assert all(t.node.id < n.id for t in n.inputs)
    # backward ops: no forward-only types, only their gradients
    bwd_types = {n.type for n in grads}
    assert "SoftmaxCrossEntropyWithLogits" not in bwd_types


def test_one_optimizer_update_per_trainable_variable(training_graph):
    name, g, _ = training_graph
    update_type = "ApplyAdamW" if name.startswith("bert") else "ApplyMomentum"
    updates = g.nodes_of_type(update_type)
    trainable = _trainable(g)
    assert len(updates) == len(trainable)
    assert sorted(u.inputs[0].node.id for u in updates) == sorted(v.id for v in trainable)
    last_grad = max(n.id for n in g.nodes if n.name.startswith("gradients/") or n.type == "HcomAllReduce")
    assert min(u.id for u in updates) > last_grad  # optimizer after backward and AllReduce
    for u in updates:
        var = u.inputs[0]
        grad = u.inputs[10 if update_type == "ApplyAdamW" else 3]
        assert grad.shape == var.shape and grad.dtype == var.dtype


def test_all_reduce_only_with_several_ranks(training_graph):
    name, g, world_size = training_graph
    ars = g.nodes_of_type("HcomAllReduce")
    if world_size == 1:
        assert ars == []
        return
    assert ars
    assert all(a.attrs["rank_size"] == world_size for a in ars)
    assert [a.attrs["fusion"] for a in ars] == list(range(1, len(ars) + 1))
    assert all(a.id >= g.forward_end for a in ars)
    # every gradient goes through exactly one AllReduce, and each update reads the reduced value
    reduced = [(t.node.id, t.index) for a in ars for t in a.inputs]
    assert len(reduced) == len(set(reduced)) == len(_trainable(g))
    update_type = "ApplyAdamW" if name.startswith("bert") else "ApplyMomentum"
    for u in g.nodes_of_type(update_type):
        assert u.inputs[10 if update_type == "ApplyAdamW" else 3].node.type == "HcomAllReduce"


def test_net_output_is_last(training_graph):
    name, g, _ = training_graph
    out = g.nodes[-1]
    assert out.type == "NetOutput" and g.net_output is out
    assert len(g.nodes_of_type("NetOutput")) == 1
    update_type = "ApplyAdamW" if name.startswith("bert") else "ApplyMomentum"
    assert {n.id for n in out.control_inputs} == {n.id for n in g.nodes_of_type(update_type)}
    assert [t.node.name for t in out.inputs] == ["loss/mean"]


def test_resnet50_gradient_buckets():
    g = ge.models.resnet50(batch_size=1, image_size=32, world_size=8)
    ars = g.nodes_of_type("HcomAllReduce")
    total = sum(t.desc.nbytes for a in ars for t in a.inputs)
    assert total == 4 * RESNET50_PARAMS  # float32 gradients of every trainable weight
    assert len(ars) == -(-total // DEFAULT_BUCKET_BYTES)
    for a in ars:
        size = sum(t.desc.nbytes for t in a.inputs)
        assert size <= DEFAULT_BUCKET_BYTES or len(a.inputs) == 1
        assert [tuple(d.shape) for d in a.outputs] == [t.shape for t in a.inputs]
