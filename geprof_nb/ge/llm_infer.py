"""The graphs an LLM inference engine runs (MindIE, vLLM-Ascend in graph mode): a prefill of prompts and a
decode of one new token per sequence, with a paged KV cache, split over tensor-parallel ranks.

Per layer, as :mod:`.llm`'s training graph but in bfloat16 weights only: RmsNorm, the fused QKV
MatMulV2, ApplyRotaryPosEmb, then

* the new keys and values are written into their cache slots (``ScatterPaKvCache``, ``slot_mapping``
  one slot per new token);
* a prompt attends to its own keys and values (``PromptFlashAttention``, causal); a prompt chunk after a
  cached prefix (chunked prefill) attends to the cache (``FusedInferAttentionScore``); a decode token
  attends to its sequence's cache (``IncreFlashAttention``), both reading the blocks ``block_table``
  names;
* o_proj, the SwiGLU MLP, and with ``tp`` Megatron's row-parallel AllReduce after o_proj and down_proj.

The logits are computed for each sequence's last token only (a GatherV2 of the prefill's last
positions), the LM head's vocabulary split over ``tp`` and gathered.  Sampling runs on the host.

The cache holds ``kv_blocks`` blocks of ``block_size`` tokens per layer, a key and a value block of
``kv_heads / tp x head_dim`` each: :func:`kv_bytes_per_token` per token and layer on a rank.
"""

from __future__ import annotations

from dataclasses import dataclass

from .graph import Graph, Node, Tensor
from .llm_config import LlmConfig
from .parallel import Parallel
from .tensor import DTYPES, GraphBuildError

PHASES = ("prefill", "decode")
DTYPE = "bfloat16"
#: The paged-attention block of CANN's attention ops and vLLM-Ascend (tokens per block).
BLOCK_SIZE = 128
#: PromptFlashAttention's compressed causal mask (sparse_mode 3 reads a 2048 x 2048 mask).
PFA_MASK = 2048
NORM_EPS = 1e-5


def kv_bytes_per_token(cfg: LlmConfig, tp: int = 1, dtype: str = DTYPE) -> int:
    """Bytes of KV cache one token takes in one layer on one tensor-parallel rank: a key and a value
    vector of each of the rank's ``kv_heads / tp`` heads."""
    return 2 * (cfg.kv_heads // tp) * cfg.head_dim * DTYPES[dtype][1]


def blocks_for(tokens: int, block_size: int = BLOCK_SIZE) -> int:
    """The cache blocks ``tokens`` tokens of one sequence fill."""
    return -(-tokens // block_size)


@dataclass(frozen=True)
class InferenceShape:
    """One engine step's graph shape: ``batch`` sequences of ``q_len`` new tokens, each attending to
    ``kv_len`` tokens (its cached prefix and its new tokens), over a cache of ``kv_blocks`` blocks."""

    phase: str
    batch: int
    q_len: int
    kv_len: int
    block_size: int
    kv_blocks: int

    @property
    def paged(self) -> bool:
        """Whether attention reads the paged cache (decode, or a prompt chunk after a cached prefix)."""
        return self.phase == "decode" or self.kv_len > self.q_len

    @property
    def table_blocks(self) -> int:
        return blocks_for(self.kv_len, self.block_size)


def check_inference(cfg: LlmConfig, p: Parallel, shape: InferenceShape) -> None:
    """Refuse an inference shape or split the graphs cannot have, naming the field."""
    for name in ("batch", "q_len", "kv_len", "block_size", "kv_blocks"):
        v = getattr(shape, name)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            label = {"batch": "batch_size", "q_len": "seq_len"}.get(name, name)
            raise GraphBuildError(f"llm: {label} must be an int >= 1, got {v!r}")
    if shape.phase not in PHASES:
        raise GraphBuildError(f"llm: phase must be one of {', '.join(PHASES)}, got {shape.phase!r}")
    if cfg.moe:
        raise GraphBuildError(f"llm: phase={shape.phase!r}: the inference graphs are of dense models; {cfg.name} "
                              "has experts")
    for field in ("pp", "dp", "ep", "virtual_stages"):
        if getattr(p, field) != 1:
            raise GraphBuildError(f"Parallel: {field}={getattr(p, field)}: inference graphs split over tp only")
    if p.sp:
        raise GraphBuildError("Parallel: sp=True: inference graphs do not split the sequence (sp is for training)")
    for what, n in (("heads", cfg.heads), ("kv_heads", cfg.kv_heads), ("ffn", cfg.ffn)):
        if n % p.tp:
            raise GraphBuildError(f"Parallel: tp={p.tp} must divide {what}={n} of {cfg.name}")
    if shape.kv_len < shape.q_len:
        raise GraphBuildError(f"llm: kv_len={shape.kv_len} must be >= the new tokens per sequence ({shape.q_len}): "
                              "the tokens attended to include the new ones")
    if shape.kv_len > cfg.context:
        raise GraphBuildError(f"llm: kv_len={shape.kv_len} is longer than the context of {cfg.name} "
                              f"({cfg.context} tokens)")
    if shape.kv_blocks < shape.table_blocks:
        raise GraphBuildError(f"llm: kv_blocks={shape.kv_blocks} cannot hold a sequence of {shape.kv_len} tokens "
                              f"({shape.table_blocks} blocks of {shape.block_size})")


class _InferenceBuilder:
    """Builds the graph of one inference shape on tensor-parallel rank 0 (every rank has its shapes)."""

    def __init__(self, cfg: LlmConfig, p: Parallel, shape: InferenceShape) -> None:
        self.cfg, self.p, self.s = cfg, p, shape
        self.g = Graph(f"{cfg.name}_{shape.phase}_b{shape.batch}_q{shape.q_len}_kv{shape.kv_len}")
        self.tokens = shape.batch * shape.q_len
        self.heads, self.kv_heads = cfg.heads // p.tp, cfg.kv_heads // p.tp
        self.vocab = -(-cfg.vocab // (128 * p.tp)) * 128 * p.tp
        self.writes: list[Node] = []

    def _weight(self, path: str, shape: tuple[int, ...]) -> Tensor:
        with self.g.name_scope(path):
            return self.g.variable("weight", shape, DTYPE, trainable=False)

    def _all_reduce(self, y: Tensor) -> Tensor:
        if self.p.tp == 1:
            return y
        return self.g.op("HcomAllReduce", y, reduction="sum", group="tp", rank_size=self.p.tp)

    def _inputs(self) -> None:
        g, s, d = self.g, self.s, self.cfg.head_dim
        self.ids = g.data("input_ids", (s.batch, s.q_len), "int32")
        self.cos = g.data("cos", (s.batch, s.q_len, 1, d), DTYPE)  # the rotary table at each new token's position
        self.sin = g.data("sin", (s.batch, s.q_len, 1, d), DTYPE)
        self.slots = g.data("slot_mapping", (self.tokens,), "int32")
        self.table = g.data("block_table", (s.batch, s.table_blocks), "int32") if s.paged else None
        self.last = g.data("logits_indices", (s.batch,), "int32") if s.q_len > 1 else None
        self.mask = None if s.paged else g.const("model/atten_mask", (PFA_MASK, PFA_MASK), "uint8")

    def _attention(self, i: int, x: Tensor) -> Tensor:
        g, cfg, s = self.g, self.cfg, self.s
        d, n, nkv = cfg.head_dim, self.heads, self.kv_heads
        layer = f"model/layers.{i}"
        with g.name_scope(f"{layer}/input_layernorm"):
            h = g.op("RmsNorm", [x, self._weight(f"{layer}/input_layernorm", (cfg.hidden,))], epsilon=NORM_EPS)[0]
        with g.name_scope(f"{layer}/self_attn"):
            with g.name_scope("qkv_proj"):
                w = self._weight(f"{layer}/self_attn/qkv_proj", (cfg.hidden, (n + 2 * nkv) * d))
                qkv = g.op("MatMulV2", [h, w])
                q, k, v = g.op("SplitVD", qkv, size_splits=[n * d, nkv * d, nkv * d], split_dim=-1)
                q = g.op("Reshape", q, shape=[s.batch, s.q_len, n, d])
                k = g.op("Reshape", k, shape=[s.batch, s.q_len, nkv, d])
            with g.name_scope("rotary_emb"):
                q, k = g.op("ApplyRotaryPosEmb", [q, k, self.cos, self.sin], layout=1)
            with g.name_scope("kv_cache"):
                cache = (s.kv_blocks, s.block_size, nkv, d)
                k_cache = g.variable("key_cache", cache, DTYPE, trainable=False)
                v_cache = g.variable("value_cache", cache, DTYPE, trainable=False)
                k_new = g.op("Reshape", k, shape=[self.tokens, nkv, d])
                v_new = g.op("Reshape", v, shape=[self.tokens, nkv, d])
                k_cache, v_cache = g.op("ScatterPaKvCache", [k_new, k_cache, self.slots, v_new, v_cache],
                                        cache_mode="Norm")
                self.writes.append(k_cache.node)
            with g.name_scope("core_attention"):
                common = {"num_heads": n, "num_key_value_heads": nkv, "input_layout": "BSND", "scale_value": d ** -0.5}
                if not s.paged:
                    v4 = g.op("Reshape", v_new, shape=[s.batch, s.q_len, nkv, d])
                    o = g.op("PromptFlashAttention", [q, k, v4, self.mask], sparse_mode=3, **common)
                else:
                    kc = g.op("Reshape", k_cache, shape=[s.kv_blocks, s.block_size, nkv * d])
                    vc = g.op("Reshape", v_cache, shape=[s.kv_blocks, s.block_size, nkv * d])
                    paged = {**common, "block_size": s.block_size}
                    if s.phase == "decode":
                        o = g.op("IncreFlashAttention", [q, kc, vc, self.table], **paged)
                    else:
                        o = g.op("FusedInferAttentionScore", [q, kc, vc, self.table], sparse_mode=3, **paged)[0]
                o = g.op("Reshape", o, shape=[self.tokens, n * d])
            with g.name_scope("o_proj"):
                w = self._weight(f"{layer}/self_attn/o_proj", (n * d, cfg.hidden))
                y = self._all_reduce(g.op("MatMulV2", [o, w]))
        with g.name_scope(f"{layer}/attention_residual"):
            return g.op("Add", [x, y])

    def _mlp(self, i: int, x: Tensor) -> Tensor:
        g, cfg, tp = self.g, self.cfg, self.p.tp
        layer = f"model/layers.{i}"
        with g.name_scope(f"{layer}/post_attention_layernorm"):
            h = g.op("RmsNorm", [x, self._weight(f"{layer}/post_attention_layernorm", (cfg.hidden,))],
                     epsilon=NORM_EPS)[0]
        with g.name_scope(f"{layer}/mlp"):
            with g.name_scope("gate_up_proj"):
                gu = g.op("MatMulV2", [h, self._weight(f"{layer}/mlp/gate_up_proj", (cfg.hidden, 2 * cfg.ffn // tp))])
            with g.name_scope("act_fn"):
                a = g.op("SwiGlu", gu, dim=-1)
            with g.name_scope("down_proj"):
                y = self._all_reduce(g.op("MatMulV2", [a, self._weight(f"{layer}/mlp/down_proj", (cfg.ffn // tp,
                                                                                                 cfg.hidden))]))
        with g.name_scope(f"{layer}/mlp_residual"):
            return g.op("Add", [x, y])

    def build(self) -> Graph:
        g, cfg, p = self.g, self.cfg, self.p
        self._inputs()
        with g.name_scope("model/embed_tokens"):
            x = g.op("GatherV2", [self._weight("model/embed_tokens", (self.vocab // p.tp, cfg.hidden)), self.ids])
            x = self._all_reduce(g.op("Reshape", x, shape=[self.tokens, cfg.hidden]))
        for i in range(cfg.layers):
            x = self._mlp(i, self._attention(i, x))
        if self.last is not None:
            with g.name_scope("logits_indices"):
                x = g.op("GatherV2", [x, self.last])
        with g.name_scope("model/norm"):
            x = g.op("RmsNorm", [x, self._weight("model/norm", (cfg.hidden,))], epsilon=NORM_EPS)[0]
        with g.name_scope("lm_head"):
            logits = g.op("MatMulV2", [x, self._weight("lm_head", (cfg.hidden, self.vocab // p.tp))])
            if p.tp > 1:
                logits = g.op("HcomAllGather", logits, group="tp", rank_size=p.tp)
        g.output([logits], control_inputs=self.writes)
        g.is_training = False
        g.inference_phase = self.s.phase  # a prompt chunk after a cached prefix is a prefill too
        return g


def inference_graph(cfg: LlmConfig, parallel: Parallel, shape: InferenceShape) -> Graph:
    """The graph of one engine step of ``shape`` (checked first), rank 0's of ``parallel.tp``."""
    check_inference(cfg, parallel, shape)
    return _InferenceBuilder(cfg, parallel, shape).build()
