"""ge.models.llm: published parameter counts, module paths, Megatron's collectives counted by hand, the
pipeline's sends and receives, and every bad split refused naming the field."""

from __future__ import annotations

from collections import Counter

import pytest

from geprof_nb import ge
from geprof_nb.ge.llm_config import PRESETS
from geprof_nb.ge.pipeline import BACKWARD, FORWARD

P = ge.Parallel
#: Published sizes (Llama 2 paper table 1 / model cards; Meta Llama 3 8B; Mistral AI's Mixtral 8x7B).
PUBLISHED = {"llama2-7b": (6.74e9, None), "llama2-70b": (68.98e9, None), "llama3-8b": (8.03e9, None),
             "mixtral-8x7b": (46.7e9, 12.9e9)}


def _params(g: ge.Graph) -> tuple[int, int]:
    """(total, active per token) trainable parameters of a graph's Variables; an expert's weights count
    top_k / experts of the time."""
    cfg = g.job.config
    total = expert = 0
    for n in g.nodes:
        if n.type == "Variable" and n.attrs["trainable"]:
            total += n.outputs[0].numel
            expert += n.outputs[0].numel if "/experts/" in n.name else 0
    return total, total - expert + (expert * cfg.top_k // cfg.experts if cfg.experts else 0)


@pytest.mark.parametrize("preset", sorted(PUBLISHED))
def test_parameter_counts_match_the_published_ones(preset):
    g = ge.models.llm(preset, seq_len=16, training=False)
    total, active = _params(g)
    published_total, published_active = PUBLISHED[preset]
    assert total == pytest.approx(published_total, rel=0.02)
    assert active == pytest.approx(published_active or published_total, rel=0.02)
    assert (total, active) == PRESETS[preset].parameters()  # the graph holds what the formula says
    assert g.stats().parameters == total


def test_op_names_carry_their_module_path_forward_and_backward():
    g = ge.models.llm("tiny-llama", seq_len=64)
    names = {n.name for n in g.nodes}
    for path in ("model/embed_tokens/GatherV2", "model/layers.5/input_layernorm/RmsNorm",
                 "model/layers.5/self_attn/qkv_proj/MatMulV2", "model/layers.5/self_attn/rotary_emb/ApplyRotaryPosEmb",
                 "model/layers.5/self_attn/core_attention/FlashAttentionScore", "model/layers.5/self_attn/o_proj/MatMulV2",
                 "model/layers.5/mlp/act_fn/SwiGlu", "model/layers.5/mlp/down_proj/MatMulV2", "model/norm/RmsNorm",
                 "lm_head/MatMulV2", "gradients/model/layers.5/self_attn/core_attention/FlashAttentionScore_grad/"
                 "FlashAttentionScoreGrad", "gradients/model/layers.5/mlp/act_fn/SwiGlu_grad/SwiGluGrad"):
        assert path in names, path
    types = Counter(n.type for n in g.nodes)
    layers = 8
    for t in ("RmsNorm", "RmsNormGrad"):
        assert types[t] == 2 * layers + 1  # two per layer and the final norm
    for t in ("FlashAttentionScore", "FlashAttentionScoreGrad", "ApplyRotaryPosEmb", "ApplyRotaryPosEmbGrad",
              "SwiGlu", "SwiGluGrad"):
        assert types[t] == layers
    # one update per weight: the embedding, 6 per layer (2 norms, qkv, o, gate_up, down), the final norm, the head
    assert types["ApplyAdamW"] == 1 + 6 * layers + 2
    assert types["ApplyAdamW"] == sum(1 for n in g.nodes if n.type == "Variable" and n.attrs["trainable"])


def _collectives(g: ge.Graph, group: str, scope: str = "") -> Counter:
    """(op type, forward or backward, input shape) of the collectives of ``group``."""
    out = Counter()
    for n in g.nodes:
        if n.engine == "HCCL" and n.attrs.get("group") == group and n.name.startswith(scope):
            side = "backward" if n.name.startswith("gradients/") else "forward"
            out[(n.type, side, n.inputs[0].shape if n.inputs else n.outputs[0].shape)] += 1
    return out


def test_tensor_parallel_collectives_are_megatrons():
    b, s, h, layers = 2, 64, 256, 8
    tokens = b * s
    g = ge.models.llm("tiny-llama", seq_len=s, micro_batch_size=b, parallel=P(tp=2))
    layer = _collectives(g, "tp", "model/layers.") + _collectives(g, "tp", "gradients/model/layers.")
    # per layer: the attention's and the MLP's row-parallel outputs all-reduced forward, their column-parallel
    # inputs' gradients all-reduced backward: 2 + 2 AllReduces of b x s x h
    assert layer == {("HcomAllReduce", "forward", (tokens, h)): 2 * layers,
                     ("HcomAllReduce", "backward", (tokens, h)): 2 * layers}
    every = _collectives(g, "tp")
    assert every - layer == {
        ("HcomAllReduce", "forward", (tokens, h)): 1,  # the vocab-parallel embedding
        ("HcomAllReduce", "backward", (tokens, h)): 1,  # the LM head's input
        ("HcomAllReduce", "forward", (tokens, 1)): 1,  # vocab-parallel cross entropy: the logits' max,
        ("HcomAllReduce", "forward", (tokens,)): 2,  # the target logit and the sum of exponentials
    }
    shard = g.node("model/layers.0/self_attn/qkv_proj/weight").outputs[0].shape
    assert shard == (h, (4 + 2 * 2) // 2 * 64)  # (heads + 2 kv heads) / tp x head dim columns


def test_sequence_parallel_gathers_and_scatters_the_sequence():
    b, s, h, layers = 1, 64, 256, 8
    g = ge.models.llm("tiny-llama", seq_len=s, micro_batch_size=b, parallel=P(tp=2, sp=True))
    layer = _collectives(g, "tp", "model/layers.") + _collectives(g, "tp", "gradients/model/layers.")
    full, half = (s, h), (s // 2, h)
    assert layer == {("HcomAllGather", "forward", half): 2 * layers, ("HcomReduceScatter", "forward", full): 2 * layers,
                     ("HcomReduceScatter", "backward", full): 2 * layers, ("HcomAllGather", "backward", half): 2 * layers,
                     # the norms' weights are replicated over the sequence shards: their gradients sum over tp
                     ("HcomAllReduce", "backward", (h,)): 2 * layers}
    norms = [n for n in g.nodes if n.type == "HcomAllReduce" and "layernorm/weight_grad_accumulation" in n.name]
    assert len(norms) == 2 * layers


def test_data_parallel_gradients_reduce_in_one_bucket_or_scatter_and_gather_with_zero():
    g = ge.models.llm("tiny-llama", seq_len=64, parallel=P(dp=2, micro_batches=2))
    weights = sum(1 for n in g.nodes if n.type == "Variable" and n.attrs["trainable"])
    (bucket,) = g.nodes_of_type("HcomAllReduce")  # 6 M parameters: one 40 M-element bucket
    assert (bucket.attrs["group"], bucket.attrs["rank_size"], len(bucket.inputs)) == ("dp", 2, weights)
    assert all(t.dtype == "float32" for t in bucket.inputs)  # float32 main gradients
    # two micro-batches: every weight's gradient is added to its main_grad twice, before the bucket
    assert sum(1 for n in g.nodes if n.type == "Add" and "_grad_accumulation" in n.name) == 2 * weights
    z = ge.models.llm("tiny-llama", seq_len=64, parallel=P(dp=2, zero=1))
    (rs,), (ag,) = z.nodes_of_type("HcomReduceScatter"), z.nodes_of_type("HcomAllGather")
    total = z.job.config.parameters()[0]
    assert rs.inputs[0].shape == (total,) and ag.outputs[0].shape == (total,)  # 6,066,432 is even: no padding
    assert len(z.nodes_of_type("ApplyAdamW")) == 1  # one update of the rank's shard of the bucket
    shard = z.node("distributed_optimizer/main_params_0")
    assert shard.outputs[0].shape == (total // 2,)


def test_pipeline_stages_send_and_receive_in_1f1b_order():
    m = 4
    g = ge.models.llm("tiny-llama", seq_len=64, parallel=P(pp=2, micro_batches=m))
    job = g.job
    s0, s1 = job.stage(0), job.stage(1)
    assert s0.graph is g
    order = [(a.action.kind[0], a.action.micro_batch) for a in s0.actions]
    assert order == [("f", 0), ("f", 1), ("b", 0), ("f", 2), ("b", 1), ("f", 3), ("b", 2), ("b", 3)]
    assert [(a.action.kind[0], a.action.micro_batch) for a in s1.actions] == [
        (k[0], j) for j in range(m) for k in (FORWARD, BACKWARD)]
    for stage, sends, receives in ((s0, FORWARD, BACKWARD), (s1, BACKWARD, FORWARD)):
        kinds = Counter((n.type, n.attrs.get("direction")) for n in stage.graph.nodes if n.engine == "HCCL")
        assert kinds == {("HcomSend", sends): m, ("HcomReceive", receives): m}
    tags = {(n.type, n.attrs["sr_tag"]) for st in (s0, s1) for n in st.graph.nodes if n.engine == "HCCL"}
    assert {t for kind, t in tags if kind == "HcomSend"} == {t for kind, t in tags if kind == "HcomReceive"}
    names0 = {n.name for n in s0.graph.nodes}
    names1 = {n.name for n in s1.graph.nodes}
    assert "model/layers.3/mlp/act_fn/SwiGlu" in names0 and "model/layers.4/mlp/act_fn/SwiGlu" not in names0
    assert "model/layers.4/mlp/act_fn/SwiGlu" in names1 and "lm_head/MatMulV2" in names1
    assert "model/embed_tokens/GatherV2" in names0 and "model/embed_tokens/GatherV2" not in names1


def test_interleaved_stages_hold_two_model_chunks():
    g = ge.models.llm("tiny-llama", seq_len=64, parallel=P(pp=2, micro_batches=4, schedule="interleaved",
                                                            virtual_stages=2))
    names = {n.name for n in g.nodes}
    layers = {int(n.split("/")[1].split(".")[1]) for n in names if n.startswith("model/layers.")}
    assert layers == {0, 1, 4, 5}  # virtual stages 0 and 2 of 4, two layers each
    assert Counter(a.action.chunk for a in g.job.stage(0).actions) == {0: 8, 1: 8}


def test_expert_parallel_exchanges_tokens_over_the_exp_group():
    s, layers = 64, 4
    g = ge.models.llm("tiny-moe", seq_len=s, parallel=P(dp=4, ep=2))
    k, hidden = 2, 256
    exp = _collectives(g, "exp")
    assert exp == {("HcomAllToAll", "forward", (4,)): layers,  # the per-expert counts
                   ("HcomAllToAllV", "forward", (s * k, hidden)): 2 * layers,  # dispatch and combine
                   ("HcomAllToAllV", "backward", (s * k, hidden)): 2 * layers}
    gmm = g.node("model/layers.0/block_sparse_moe/experts/gate_up_proj/GroupedMatmul")
    assert gmm.inputs[1].shape == (2, hidden, 2 * 512)  # 4 experts over ep=2: 2 local ones
    (dense,) = [n for n in g.nodes_of_type("HcomAllReduce") if n.attrs["group"] == "dp"]
    (experts,) = [n for n in g.nodes_of_type("HcomAllReduce") if n.attrs["group"] == "dp_modulo_exp"]
    assert experts.attrs["rank_size"] == 2 and len(experts.inputs) == 2 * layers  # dp x tp / ep ranks hold them
    assert dense.attrs["rank_size"] == 4
    routed = g.job.stage(0).routed_with_gradients()
    assert Counter(g.nodes[i].type for i in routed) == {"GroupedMatmul": 2 * layers + 4 * layers,
                                                        "SwiGlu": layers, "SwiGluGrad": layers,
                                                        "HcomAllToAllV": 4 * layers}


@pytest.mark.parametrize("kwargs, pattern", [
    ({"tp": 0}, "Parallel: tp must be an int >= 1, got 0"),
    ({"dp": 2, "ep": 3}, r"Parallel: ep=3 must divide dp\*tp=2"),
    ({"schedule": "gpipe"}, "schedule 'gpipe' is not known; accepted: 1F1B, interleaved"),
    ({"virtual_stages": 2, "pp": 2}, "virtual_stages=2 needs schedule='interleaved'"),
    ({"schedule": "interleaved", "pp": 2, "micro_batches": 4}, "needs virtual_stages >= 2"),
    ({"schedule": "interleaved", "pp": 4, "virtual_stages": 2, "micro_batches": 6},
     "micro_batches=6 must be a multiple of pp=4"),
    ({"sp": True}, "sp=True needs tp > 1"),
    ({"zero": 2}, "zero must be 0 or 1"),
])
def test_bad_parallel_is_refused_naming_the_field(kwargs, pattern):
    with pytest.raises(ge.GraphBuildError, match=pattern):
        P(**kwargs)


@pytest.mark.parametrize("preset, kwargs, parallel, pattern", [
    ("llama2-7b", {}, P(tp=3), "tp=3 must divide heads=32 of llama2-7b"),
    ("llama3-8b", {}, P(tp=16), "tp=16 must divide kv_heads=8"),
    ("tiny-llama", {}, P(pp=16), "pp=16 is larger than layers=8 of tiny-llama"),
    ("tiny-llama", {}, P(pp=3), r"pp=3 x virtual_stages=1 must divide layers=8"),
    ("tiny-moe", {}, P(dp=3, ep=3), "ep=3 must divide experts=4 of tiny-moe"),
    ("tiny-llama", {}, P(dp=2, ep=2), "ep=2 needs a model with experts; tiny-llama is dense"),
    ("tiny-moe", {}, P(tp=2), "sp must be True with experts and tp > 1"),
    ("nano-llama", {}, None, "unknown preset 'nano-llama'; accepted: llama2-7b, llama2-70b"),
    ("tiny-llama", {"hiden": 512}, None, "unknown override 'hiden'; accepted: layers, hidden, heads, kv_heads"),
    ("tiny-llama", {"layers": 0}, None, "layers must be an int >= 1, got 0"),
    ("tiny-llama", {"kv_heads": 3}, None, "kv_heads=3 must divide heads=4"),
    ("tiny-llama", {"experts": 8}, None, "experts=8 needs top_k"),
    ("tiny-moe", {"top_k": 5}, None, "top_k=5 must be in 1 .. experts=4"),
    ("tiny-llama", {"seq_len": 0}, None, "seq_len must be an int >= 1"),
])
def test_impossible_models_are_refused_at_build_time(preset, kwargs, parallel, pattern):
    with pytest.raises(ge.GraphBuildError, match=pattern):
        ge.models.llm(preset, parallel=parallel, **kwargs)


def test_overrides_change_the_shapes():
    g = ge.models.llm("tiny-llama", seq_len=32, training=False, layers=2, hidden=128, heads=2, kv_heads=1, ffn=256,
                      vocab=1000)
    cfg = g.job.config
    assert (cfg.layers, cfg.hidden, cfg.vocab) == (2, 128, 1000)
    # Megatron pads the vocabulary to a multiple of 128 x tp: 1000 -> 1024 rows
    assert g.node("model/embed_tokens/weight").outputs[0].shape == (1024, 128)
    assert len(g.nodes_of_type("FlashAttentionScore")) == 2 and not g.nodes_of_type("FlashAttentionScoreGrad")
