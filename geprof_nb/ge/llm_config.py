"""Decoder-only LM shapes: the presets with their published sizes, and the overrides a user may give.

Parameter counts (embedding and an untied LM head included), from these shapes:

=============  ======  ======  =====  ========  ======  =======  =======  =====  ===================
preset         layers  hidden  heads  kv heads  ffn     vocab    experts  top k  parameters
=============  ======  ======  =====  ========  ======  =======  =======  =====  ===================
llama2-7b      32      4096    32     32        11008   32000    -        -      6.74 B
llama2-70b     80      8192    64     8         28672   32000    -        -      68.98 B
llama3-8b      32      4096    32     8         14336   128256   -        -      8.03 B
mixtral-8x7b   32      4096    32     8         14336   32000    8        2      46.70 B (12.88 B active)
=============  ======  ======  =====  ========  ======  =======  =======  =====  ===================

Sources: the model cards and configs published with the weights (Llama 2 paper, Touvron et al. 2023,
table 1 and the HF ``config.json`` files of meta-llama/Llama-2-7b-hf and -70b-hf; Meta's Llama 3 8B
``config.json``; Mistral AI's Mixtral 8x7B announcement, 46.7 B total / 12.9 B active).  ``tiny-llama``
and ``tiny-moe`` are small shapes of the same architecture, for tests and quick runs.  ``context`` is
each config's ``max_position_embeddings`` (4096 for Llama 2, 8192 for Llama 3 8B, 32768 for Mixtral).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from .tensor import GraphBuildError


@dataclass(frozen=True)
class LlmConfig:
    """The shape of a decoder-only LM (Llama architecture; a Mixtral-style sparse MLP when ``experts``)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    experts: int = 0  # 0: a dense SwiGLU MLP in every layer
    top_k: int = 0
    context: int = 4096  # the longest sequence (prompt and output) the model serves: max_position_embeddings

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def moe(self) -> bool:
        return self.experts > 0

    def parameters(self) -> tuple[int, int]:
        """(total, active per token) parameter counts of these shapes, by formula (the graph's Variables
        must add up to the same)."""
        kv = self.kv_heads * self.head_dim
        attention = self.hidden * (self.hidden + 2 * kv) + self.hidden * self.hidden
        mlp = 3 * self.hidden * self.ffn
        norms = 2 * self.hidden
        if self.moe:
            layer_total = attention + norms + self.experts * mlp + self.hidden * self.experts
            layer_active = attention + norms + self.top_k * mlp + self.hidden * self.experts
        else:
            layer_total = layer_active = attention + norms + mlp
        ends = 2 * self.vocab * self.hidden + self.hidden
        return ends + self.layers * layer_total, ends + self.layers * layer_active


PRESETS: dict[str, LlmConfig] = {c.name: c for c in (
    LlmConfig("llama2-7b", 32, 4096, 32, 32, 11008, 32000, context=4096),
    LlmConfig("llama2-70b", 80, 8192, 64, 8, 28672, 32000, context=4096),
    LlmConfig("llama3-8b", 32, 4096, 32, 8, 14336, 128256, context=8192),
    LlmConfig("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, experts=8, top_k=2, context=32768),
    LlmConfig("tiny-llama", 8, 256, 4, 2, 688, 512, context=2048),
    LlmConfig("tiny-moe", 4, 256, 4, 2, 512, 512, experts=4, top_k=2, context=2048),
)}
#: The shapes a preset's overrides may change.
OVERRIDES = tuple(f.name for f in fields(LlmConfig) if f.name != "name")


def llm_config(preset: str, **overrides: Any) -> LlmConfig:
    """The preset's shapes with ``overrides``; a bad preset, field or value is refused naming it."""
    if preset not in PRESETS:
        raise GraphBuildError(f"llm: unknown preset {preset!r}; accepted: {', '.join(PRESETS)}")
    unknown = [k for k in overrides if k not in OVERRIDES]
    if unknown:
        raise GraphBuildError(f"llm: unknown override {unknown[0]!r}; accepted: {', '.join(OVERRIDES)} "
                              "(and seq_len, micro_batch_size, training, parallel)")
    for key, v in overrides.items():
        low = 0 if key in ("experts", "top_k") else 1
        if not isinstance(v, int) or isinstance(v, bool) or v < low:
            raise GraphBuildError(f"llm: {key} must be an int >= {low}, got {v!r}")
    base = PRESETS[preset]
    if "experts" in overrides and "top_k" not in overrides and not base.moe and overrides["experts"]:
        raise GraphBuildError(f"llm: experts={overrides['experts']} needs top_k (the experts each token goes to); "
                              f"accepted: top_k in 1 .. {overrides['experts']}")
    cfg = replace(base, **overrides)
    if cfg.hidden % cfg.heads:
        raise GraphBuildError(f"llm: hidden={cfg.hidden} must be a multiple of heads={cfg.heads}")
    if cfg.kv_heads > cfg.heads or cfg.heads % cfg.kv_heads:
        raise GraphBuildError(f"llm: kv_heads={cfg.kv_heads} must divide heads={cfg.heads} (grouped-query "
                              "attention shares each key/value head among heads / kv_heads query heads)")
    if cfg.experts == 0 and cfg.top_k:
        raise GraphBuildError(f"llm: top_k={cfg.top_k} needs experts >= 1 (a dense model routes no tokens)")
    if cfg.experts and not 1 <= cfg.top_k <= cfg.experts:
        raise GraphBuildError(f"llm: top_k={cfg.top_k} must be in 1 .. experts={cfg.experts}")
    return cfg
