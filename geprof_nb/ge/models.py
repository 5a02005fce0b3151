"""Model zoo: graphs with the size and op mix of the real networks.

``llm`` builds decoder-only LMs (Llama 2 / 3, Mixtral) split over ranks (:mod:`.llm`).
``resnet50`` has 25.56 M parameters and 4.1 G multiply-accumulates (8.2 GFLOPs
at 2 FLOPs per MAC) per 224x224 image; ``bert`` with the defaults is BERT-base
(110 M parameters).  Training graphs use mixed precision as on Ascend: float32
master weights, ``Cast`` to float16 for the cube ops, float32 optimizer state.
"""

from __future__ import annotations

from ..prof.clock import toolkit_entry
from .autodiff import add_training
from .graph import Graph, Tensor
from .llm import llm
from .tensor import GraphBuildError

__all__ = ["bert", "llm", "mlp", "resnet50"]

DATA_SOURCES = ("Data", "GetNext")


def _inputs(g: Graph, data: str, specs: list[tuple[str, tuple[int, ...], str, str]],
            dynamic: bool = False) -> list[Tensor]:
    """Graph inputs, as ``Data`` nodes or one ``GetNext`` (the dataset-iterator input of GE).

    ``dynamic`` makes the leading (batch) dim unknown (-1): the graph is then a
    dynamic-shape graph that runs node by node; its default input shapes are ``specs``.
    """
    if data not in DATA_SOURCES:
        raise GraphBuildError(f"data must be one of {', '.join(DATA_SOURCES)}, got {data!r}")
    if dynamic and data != "Data":
        raise GraphBuildError("dynamic=True needs data='Data' (GetNext outputs have fixed shapes)")
    if data == "Data":
        return [g.data(name, ((-1,) + shape[1:]) if dynamic else shape, dtype, fmt,
                       default_shape=shape if dynamic else None) for name, shape, dtype, fmt in specs]
    outs = g.op("GetNext", [], name="GetNext", output_shapes=[s for _, s, _, _ in specs],
                output_types=[d for _, _, d, _ in specs])
    return list(outs) if isinstance(outs, tuple) else [outs]


def _check_positive(**values: int) -> None:
    for key, v in values.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise GraphBuildError(f"{key} must be a positive int, got {v!r}")


def _weight(g: Graph, name: str, shape: tuple[int, ...], compute_dtype: str) -> Tensor:
    w = g.variable(name, shape, "float32")
    return w if compute_dtype == "float32" else g.op("Cast", w, dst_type=compute_dtype)


def _finish(g: Graph, loss: Tensor, outputs: list[Tensor], training: bool, world_size: int,
            optimizer: str) -> Graph:
    if training:
        add_training(g, loss, optimizer=optimizer, world_size=world_size)
    else:
        g.output(outputs)
    return g


# -------------------------------------------------------------------------- MLP
@toolkit_entry
def mlp(batch_size: int = 32, in_features: int = 784, hidden: tuple[int, ...] = (1024, 1024),
        out_features: int = 10, training: bool = True, world_size: int = 1, optimizer: str = "Momentum",
        data: str = "Data", dtype: str = "float16", dynamic: bool = False) -> Graph:
    """A multi-layer perceptron: MatMul + BiasAdd + Relu per hidden layer, softmax cross-entropy loss."""
    _check_positive(batch_size=batch_size, in_features=in_features, out_features=out_features,
                    world_size=world_size)
    g = Graph("mlp")
    x, labels = _inputs(g, data, [("x", (batch_size, in_features), dtype, "ND"),
                                  ("labels", (batch_size, out_features), dtype, "ND")], dynamic)
    width = in_features
    for i, h in enumerate(tuple(hidden) + (out_features,)):
        _check_positive(**{f"hidden[{i}]": h})
        with g.name_scope(f"dense_{i}"):
            w = _weight(g, "kernel", (width, h), dtype)
            b = _weight(g, "bias", (h,), dtype)
            x = g.op("BiasAdd", [g.op("MatMulV2", [x, w]), b], data_format="ND")
            if i < len(hidden):
                x = g.op("Relu", x)
        width = h
    loss, _ = g.op("SoftmaxCrossEntropyWithLogits", [x, labels], name="loss/xentropy")
    loss = g.op("ReduceMean", loss, name="loss/mean", axes=[0])
    return _finish(g, loss, [x], training, world_size, optimizer)


# ---------------------------------------------------------------------- ResNet
def _conv_bn(g: Graph, x: Tensor, cout: int, k: int, stride: int, name: str, relu: bool,
             training: bool) -> Tensor:
    cin = x.shape[1]
    with g.name_scope(name):
        w = _weight(g, "kernel", (cout, cin, k, k), x.dtype)
        y = g.op("Conv2D", [x, w], strides=stride, pads=(k // 2,) * 4, data_format="NCHW")
        scale = g.variable("gamma", (cout,), "float32")
        offset = g.variable("beta", (cout,), "float32")
        mean = g.variable("moving_mean", (cout,), "float32", trainable=False)
        var = g.variable("moving_variance", (cout,), "float32", trainable=False)
        if training:
            s, sq = g.op("BNTrainingReduce", y)
            y = g.op("BNTrainingUpdate", [y, s, sq, scale, offset, mean, var], factor=0.1, epsilon=1e-5)[0]
        else:  # inference: BN folds into a per-channel scale and shift
            y = g.op("BiasAdd", [g.op("Mul", [y, g.op("Reshape", g.op("Cast", scale, dst_type=y.dtype),
                                                                   shape=[1, cout, 1, 1])]),
                                 g.op("Cast", offset, dst_type=y.dtype)])
        return g.op("Relu", y) if relu else y


def _bottleneck(g: Graph, x: Tensor, width: int, stride: int, name: str, training: bool) -> Tensor:
    cout = width * 4
    with g.name_scope(name):
        shortcut = x
        if x.shape[1] != cout or stride != 1:
            shortcut = _conv_bn(g, x, cout, 1, stride, "downsample", relu=False, training=training)
        y = _conv_bn(g, x, width, 1, 1, "conv1", relu=True, training=training)
        y = _conv_bn(g, y, width, 3, stride, "conv2", relu=True, training=training)
        y = _conv_bn(g, y, cout, 1, 1, "conv3", relu=False, training=training)
        return g.op("Relu", g.op("Add", [y, shortcut]))


@toolkit_entry
def resnet50(batch_size: int = 32, training: bool = True, world_size: int = 1, image_size: int = 224,
             num_classes: int = 1000, optimizer: str = "Momentum", data: str = "Data", dynamic: bool = False) -> Graph:
    """ResNet-50 v1.5 (stride on the 3x3 conv) in NCHW, float16 compute; ``dynamic``: unknown batch."""
    _check_positive(batch_size=batch_size, world_size=world_size, image_size=image_size,
                    num_classes=num_classes)
    g = Graph("resnet50")
    images, labels = _inputs(g, data, [("images", (batch_size, 3, image_size, image_size), "float16", "NCHW"),
                                       ("labels", (batch_size, num_classes), "float16", "ND")], dynamic)
    with g.name_scope("resnet_model"):
        x = _conv_bn(g, images, 64, 7, 2, "conv1", relu=True, training=training)
        x = g.op("MaxPool", x, name="pool1", ksize=3, strides=2, pads="SAME", data_format="NCHW")
        for stage, (blocks, width) in enumerate(((3, 64), (4, 128), (6, 256), (3, 512)), start=1):
            for b in range(blocks):
                stride = 2 if b == 0 and stage > 1 else 1
                x = _bottleneck(g, x, width, stride, f"layer{stage}/block{b}", training)
        x = g.op("ReduceMean", x, name="avgpool", axes=[2, 3])
        with g.name_scope("fc"):
            w = _weight(g, "kernel", (x.shape[1], num_classes), x.dtype)
            b = _weight(g, "bias", (num_classes,), x.dtype)
            logits = g.op("BiasAdd", [g.op("MatMulV2", [x, w]), b], data_format="ND")
    loss, _ = g.op("SoftmaxCrossEntropyWithLogits", [logits, labels], name="loss/xentropy")
    loss = g.op("ReduceMean", loss, name="loss/mean", axes=[0])
    return _finish(g, loss, [logits], training, world_size, optimizer)


# ------------------------------------------------------------------------ BERT
def _dense(g: Graph, x: Tensor, units: int, name: str) -> Tensor:
    with g.name_scope(name):
        w = _weight(g, "kernel", (x.shape[-1], units), x.dtype)
        b = _weight(g, "bias", (units,), x.dtype)
        return g.op("BiasAdd", [g.op("MatMulV2", [x, w]), b], data_format="ND")


def _layer_norm(g: Graph, x: Tensor, name: str) -> Tensor:
    with g.name_scope(name):
        gamma = _weight(g, "gamma", (x.shape[-1],), x.dtype)
        beta = _weight(g, "beta", (x.shape[-1],), x.dtype)
        return g.op("LayerNorm", [x, gamma, beta], begin_norm_axis=-1, begin_params_axis=-1)[0]


def _encoder_layer(g: Graph, x: Tensor, mask: Tensor, seq: int, heads: int, ffn: int, name: str) -> Tensor:
    """One transformer encoder layer; reshapes leave the batch dim to inference (-1), so it may be dynamic."""
    hidden = x.shape[-1]
    head_dim = hidden // heads
    with g.name_scope(name):
        def split_heads(t: Tensor) -> Tensor:
            t = g.op("Reshape", t, shape=[-1, seq, heads, head_dim])
            return g.op("Transpose", t, perm=[0, 2, 1, 3])

        with g.name_scope("attention"):
            q = split_heads(_dense(g, x, hidden, "query"))
            k = split_heads(_dense(g, x, hidden, "key"))
            v = split_heads(_dense(g, x, hidden, "value"))
            scores = g.op("BatchMatMul", [q, k], adj_x2=True)
            scores = g.op("Mul", [scores, g.const("scale", (), scores.dtype, value=head_dim ** -0.5)])
            scores = g.op("Add", [scores, mask])
            probs = g.op("Softmax", scores, axes=[-1])
            ctx = g.op("BatchMatMul", [probs, v])
            ctx = g.op("Reshape", g.op("Transpose", ctx, perm=[0, 2, 1, 3]), shape=[-1, hidden])
            attn = _dense(g, ctx, hidden, "output")
        x = _layer_norm(g, g.op("Add", [attn, x]), "attention_norm")
        inter = g.op("Gelu", _dense(g, x, ffn, "intermediate"))
        out = _dense(g, inter, hidden, "output")
        return _layer_norm(g, g.op("Add", [out, x]), "output_norm")


@toolkit_entry
def bert(layers: int = 12, seq_len: int = 128, batch_size: int = 32, training: bool = True,
         world_size: int = 1, hidden: int = 768, heads: int = 12, vocab_size: int = 30522,
         max_position: int = 512, num_labels: int = 2, optimizer: str = "AdamW", data: str = "Data",
         dynamic: bool = False) -> Graph:
    """BERT encoder with a sequence-classification head (BERT-base by default); ``dynamic``: unknown batch.

    The pooler averages the token states (instead of taking the first token)
    and uses Gelu; parameter count and op mix are those of BERT.
    """
    _check_positive(layers=layers, seq_len=seq_len, batch_size=batch_size, world_size=world_size,
                    hidden=hidden, heads=heads, vocab_size=vocab_size, num_labels=num_labels)
    if hidden % heads:
        raise GraphBuildError(f"hidden ({hidden}) must be a multiple of heads ({heads})")
    if seq_len > max_position:
        raise GraphBuildError(f"seq_len ({seq_len}) must not exceed max_position ({max_position})")
    g = Graph("bert")
    # token inputs are [batch, seq] (so an unknown batch keeps the token count a multiple of seq);
    # the encoder works on [batch * seq, hidden]
    ids, positions, types, mask, labels = _inputs(g, data, [
        ("input_ids", (batch_size, seq_len), "int32", "ND"),
        ("position_ids", (batch_size, seq_len), "int32", "ND"),
        ("token_type_ids", (batch_size, seq_len), "int32", "ND"),
        ("attention_mask", (batch_size, 1, 1, seq_len), "float16", "ND"),
        ("labels", (batch_size, num_labels), "float16", "ND"),
    ], dynamic)
    with g.name_scope("bert/embeddings"):
        word = g.op("GatherV2", [_weight(g, "word_embeddings", (vocab_size, hidden), "float16"), ids])
        pos = g.op("GatherV2", [_weight(g, "position_embeddings", (max_position, hidden), "float16"), positions])
        tok = g.op("GatherV2", [_weight(g, "token_type_embeddings", (2, hidden), "float16"), types])
        x = _layer_norm(g, g.op("Add", [g.op("Add", [word, pos]), tok]), "LayerNorm")
        x = g.op("Reshape", x, shape=[-1, hidden])
    for i in range(layers):
        x = _encoder_layer(g, x, mask, seq_len, heads, 4 * hidden, f"bert/encoder/layer_{i}")
    with g.name_scope("bert/pooler"):
        tokens = g.op("Reshape", x, shape=[-1, seq_len, hidden])
        pooled = g.op("Gelu", _dense(g, g.op("ReduceMean", tokens, axes=[1]), hidden, "dense"))
    logits = _dense(g, pooled, num_labels, "classifier")
    loss, _ = g.op("SoftmaxCrossEntropyWithLogits", [logits, labels], name="loss/xentropy")
    loss = g.op("ReduceMean", loss, name="loss/mean", axes=[0])
    return _finish(g, loss, [logits], training, world_size, optimizer)
