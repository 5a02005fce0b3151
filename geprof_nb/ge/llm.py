"""``ge.models.llm``: the training step of a decoder-only LM (Llama, Mixtral) as an Ascend graph, split
over ranks as Megatron / MindSpeed split it.

One graph per pipeline stage holds every micro-batch of a step, its passes in the stage's schedule
order (:mod:`.pipeline`), so the step is one static task list per rank:

* the ops are Ascend's fused ones (RmsNorm, a fused QKV MatMulV2, ApplyRotaryPosEmb,
  FlashAttentionScore, SwiGlu, GroupedMatmul and the MoE routing ops), in bfloat16, with float32
  master weights cast once per step (with ``zero=1``: bfloat16 weights and float32 optimizer shards);
* op names carry their module path: ``model/layers.12/self_attn/qkv_proj/MatMulV2``; the gradient ops
  of an op are under ``gradients/<op name>_grad/``;
* tensor parallelism (``tp``): a column-parallel linear's input is "copied to the tensor-parallel
  region" (an AllReduce of its gradient in backward), a row-parallel linear's output is all-reduced;
  with sequence parallelism (``sp``) these are an AllGather and a ReduceScatter of the sequence
  (ReduceScatter and AllGather in backward), and the norms' gradients are summed over ``tp``.  The
  embedding is vocabulary-parallel and the loss Megatron's vocabulary-parallel cross entropy (three
  AllReduces of ``[tokens]``: the logits' max, the target logits, the sums of exponentials);
* pipeline parallelism (``pp``): each stage receives its input activation and sends its output
  (HcomReceive / HcomSend on the ``pp`` group, one stream per direction), gradients the other way;
* data parallelism (``dp``): the gradients, accumulated over the micro-batches in float32, are
  reduced in buckets of :data:`GRAD_BUCKET_ELEMENTS` (Megatron DDP's) as soon as a bucket's last
  gradient exists, on their own stream, so the reduction overlaps the rest of the backward pass;
  ``zero=1`` reduce-scatters the buckets, updates the rank's shard and all-gathers the parameters;
* expert parallelism (``ep``): each MoE layer routes its tokens (MoeGatingTopKSoftmax,
  MoeInitRoutingV2), exchanges them with the other ranks of its ``exp`` group (HcomAllToAllV, after an
  AllToAll of the per-expert counts), runs its local experts (GroupedMatmul, SwiGlu, GroupedMatmul)
  and sends the results back to be combined (MoeFinalizeRoutingV2); expert gradients are reduced
  over the ``dp_modulo_exp`` group.

``llm(...)`` returns rank 0's graph; the graph's ``job`` (:class:`LlmJob`) builds the other stages'
graphs when a simulated cluster runs it (``%%geprof --ranks N`` / ``ge.exec.rankSize``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..prof.clock import toolkit_entry
from .autodiff import add_optimizer, backward_pass
from .graph import Graph, Node, Tensor
from .llm_config import LlmConfig, llm_config
from .llm_infer import BLOCK_SIZE, InferenceShape, blocks_for, inference_graph
from .parallel import Parallel, RankLayout
from .pipeline import BACKWARD, FORWARD, Action, schedule, transfers, virtual_stage
from .tensor import GraphBuildError

DTYPE = "bfloat16"
MASTER_DTYPE = "float32"
#: Megatron pads the vocabulary to a multiple of 128 x tp (``make_vocab_size_divisible_by``).
VOCAB_DIVISOR = 128
#: Megatron DDP's gradient bucket (``bucket_size = max(40M, 1M x dp)`` elements).
GRAD_BUCKET_ELEMENTS = 40_000_000
#: FlashAttentionScore's compressed causal mask (sparse_mode 2 reads a 2048 x 2048 mask).
FA_MASK = 2048
LEARNING_RATE = 3e-4
#: The gradient ops of routed expert ops that work on the routed tokens too.
ROUTED_GRADIENT_TYPES = ("GroupedMatmul", "SwiGluGrad", "HcomAllToAllV")
NORM_EPS = 1e-5


@dataclass
class _Weight:
    """A weight as the ops read it, the variable behind it and how its gradient is reduced."""

    tensor: Tensor
    variable: Node
    reduce_over: str  # "dp" (dense) or "dp_modulo_exp" (an expert's)
    tp_replicated: bool  # a norm's or the router's weight: with sp its gradient also sums over tp
    grad: Tensor | None = None
    count: int = 0


@dataclass(frozen=True)
class ActionNodes:
    """The nodes one pass of one micro-batch made: ids ``[first, end)``."""

    action: Action
    first: int
    end: int


@dataclass
class StageGraph:
    """A stage's graph, what each pass made and which nodes move routed tokens (MoE)."""

    graph: Graph
    actions: list[ActionNodes] = field(default_factory=list)
    #: node id -> (layer, rows): forward expert ops whose work follows the tokens routed to the rank's
    #: experts (``rows`` of them when routing is balanced).
    routed: dict[int, tuple[int, int]] = field(default_factory=dict)

    def routed_with_gradients(self) -> dict[int, tuple[int, int]]:
        """:attr:`routed` and the gradient ops of those ops that work on the same routed tokens."""
        prefixes = {f"gradients/{self.graph.nodes[i].name}_grad/": v for i, v in self.routed.items()}
        out = dict(self.routed)
        for n in self.graph.nodes:
            if n.type in ROUTED_GRADIENT_TYPES and n.name.startswith("gradients/"):
                head = n.name[:n.name.index("_grad/") + len("_grad/")] if "_grad/" in n.name else ""
                if head in prefixes:
                    out[n.id] = prefixes[head]
        return out


def expert_shares(experts: int, top_k: int, skew: float, layer: int) -> np.ndarray:
    """The share of a MoE layer's token routes each expert gets, for routing ``skew`` (0: balanced).

    Skew is a Zipf exponent: the ``i``-th most popular expert of a layer gets a share proportional to
    ``1 / (i + 1) ** skew``, which expert that is drawn per layer (seeded by the layer); no expert takes
    more than ``1 / top_k`` (a token's ``top_k`` routes go to distinct experts), the excess spread over
    the others in proportion.
    """
    weights = 1.0 / np.arange(1, experts + 1, dtype=np.float64) ** float(skew)
    cap = 1.0 / top_k
    shares = weights / weights.sum()
    for _ in range(experts):  # water-filling: at most one more expert reaches the cap each round
        over = shares > cap + 1e-12
        if not over.any():
            break
        excess = (shares[over] - cap).sum()
        shares[over] = cap
        free = shares < cap - 1e-12
        shares[free] += excess * shares[free] / shares[free].sum()
    out = np.empty(experts)
    out[np.random.default_rng(layer).permutation(experts)] = shares
    return out


class LlmJob:
    """What the ranks of a parallel LLM step run: the shapes, the split, and each stage's graph."""

    def __init__(self, config: LlmConfig, parallel: Parallel, seq_len: int, micro_batch_size: int,
                 training: bool) -> None:
        self.config = config
        self.parallel = parallel
        self.seq_len = seq_len
        self.micro_batch_size = micro_batch_size
        self.training = training
        self._stages: dict[int, StageGraph] = {}
        self._layouts: dict[int, RankLayout] = {}

    @property
    def world_size(self) -> int:
        return self.parallel.world_size

    def stage(self, stage: int) -> StageGraph:
        """Stage ``stage``'s graph (built on first use)."""
        built = self._stages.get(stage)
        if built is None:
            built = self._stages[stage] = _StageBuilder(self, stage).build()
        return built

    def layout(self, ranks_per_node: int) -> RankLayout:
        """The job's ranks on servers of ``ranks_per_node`` (one layout per size: its groups are named once)."""
        found = self._layouts.get(ranks_per_node)
        if found is None:
            found = self._layouts[ranks_per_node] = RankLayout(self.parallel, ranks_per_node)
        return found

    def expert_loads(self, skew: float, layer: int) -> np.ndarray:
        """The tokens each expert-parallel position's experts get in MoE layer ``layer``, as a multiple of
        the balanced count ([ep], mean 1)."""
        cfg, ep = self.config, self.parallel.ep
        shares = expert_shares(cfg.experts, cfg.top_k, skew, layer)
        return shares.reshape(ep, cfg.experts // ep).sum(axis=1) * ep

    def describe(self) -> str:
        return f"{self.config.name} ({self.parallel.describe()})"

    def passes(self, graph: Graph) -> list[ActionNodes]:
        """The passes (micro-batch, model chunk, forward or backward) of a stage graph of this job."""
        for built in self._stages.values():
            if built.graph is graph:
                return built.actions
        return []

    def rank_info(self, rank: int, ranks_per_node: int, expert_skew: float = 0.0) -> dict[str, Any]:
        """What a rank's run directory records of the job (``info.json`` ``parallel``): Megatron's sizes and
        the rank's groups as torch_npu's profiler records them (``distributed_args``,
        ``parallel_group_info``), the pipeline (``pp_info``), the model's shapes, and for a MoE model the
        tokens each of the rank's experts gets per layer and micro-batch."""
        cfg, p = self.config, self.parallel
        layout = self.layout(ranks_per_node)
        c = layout.coords(rank)
        total, active = cfg.parameters()
        info: dict[str, Any] = {
            "distributed_args": {**p.distributed_args(), "rank": rank},
            "parallel_group_info": layout.parallel_group_info(rank),
            "pp_info": {"microbatch_num": p.micro_batches, "pp_type": p.schedule.lower(),
                        "virtual_stages": p.virtual_stages},
            "coords": {"pp": c.stage, "dp": c.dp, "tp": c.tp},
            "model": {"name": cfg.name, "layers": cfg.layers, "hidden": cfg.hidden, "heads": cfg.heads,
                      "kv_heads": cfg.kv_heads, "ffn": cfg.ffn, "vocab": cfg.vocab, "experts": cfg.experts,
                      "top_k": cfg.top_k, "seq_len": self.seq_len, "micro_batch_size": self.micro_batch_size,
                      "parameters": total, "active_parameters": active, "training": self.training},
        }
        if cfg.moe:
            local = cfg.experts // p.ep
            first = c.local % p.ep * local
            tokens = self.micro_batch_size * self.seq_len // (p.tp if p.sp else 1)
            routes = p.ep * tokens * cfg.top_k  # the routes the ep group's ranks send to all experts
            layers = [i for ch in range(p.virtual_stages) for i in _chunk_layers(self, c.stage, ch)]
            shares = {i: expert_shares(cfg.experts, cfg.top_k, expert_skew, i)[first:first + local] for i in layers}
            info["moe"] = {"expert_skew": expert_skew, "experts": list(range(first, first + local)),
                           "tokens_per_micro_batch": {str(i): [int(round(routes * x)) for x in shares[i]]
                                                      for i in layers}}
        return info


def _chunk_layers(job: LlmJob, stage: int, chunk: int) -> range:
    """The layers of model chunk ``chunk`` of pipeline stage ``stage``."""
    p = job.parallel
    per = job.config.layers // (p.pp * p.virtual_stages)
    vs = virtual_stage(p.pp, stage, chunk)
    return range(vs * per, (vs + 1) * per)


def check_split(cfg: LlmConfig, p: Parallel, seq_len: int, micro_batch_size: int) -> None:
    """Refuse a split the model does not allow, naming the Parallel field."""
    for name, v in (("seq_len", seq_len), ("micro_batch_size", micro_batch_size)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise GraphBuildError(f"llm: {name} must be an int >= 1, got {v!r}")
    for what, n in (("heads", cfg.heads), ("kv_heads", cfg.kv_heads), ("ffn", cfg.ffn)):
        if n % p.tp:
            raise GraphBuildError(f"Parallel: tp={p.tp} must divide {what}={n} of {cfg.name} (each tensor-parallel "
                                  f"rank holds {what} / tp)")
    chunks = p.pp * p.virtual_stages
    if p.pp > cfg.layers:
        raise GraphBuildError(f"Parallel: pp={p.pp} is larger than layers={cfg.layers} of {cfg.name}")
    if cfg.layers % chunks:
        raise GraphBuildError(f"Parallel: pp={p.pp} x virtual_stages={p.virtual_stages} must divide "
                              f"layers={cfg.layers} of {cfg.name} (each model chunk holds as many layers)")
    if p.ep > 1 and not cfg.moe:
        raise GraphBuildError(f"Parallel: ep={p.ep} needs a model with experts; {cfg.name} is dense")
    if cfg.moe and cfg.experts % p.ep:
        raise GraphBuildError(f"Parallel: ep={p.ep} must divide experts={cfg.experts} of {cfg.name}")
    if cfg.moe and p.tp > 1 and not p.sp:
        raise GraphBuildError("Parallel: sp must be True with experts and tp > 1 (as Megatron requires: "
                              "the experts route the sequence-parallel tokens)")
    if p.sp and (seq_len * micro_batch_size) % p.tp:
        raise GraphBuildError(f"Parallel: tp={p.tp} must divide the tokens of a micro-batch "
                              f"(seq_len x micro_batch_size = {seq_len * micro_batch_size}) with sp")


@toolkit_entry
def llm(preset: str, *, seq_len: int | None = None, micro_batch_size: int = 1, training: bool = True,
        parallel: Parallel | None = None, phase: str | None = None, batch_size: int = 1, kv_len: int | None = None,
        block_size: int = BLOCK_SIZE, kv_blocks: int | None = None, **overrides: Any) -> Graph:
    """A decoder-only LM step (``preset``: see :data:`~.llm_config.PRESETS`; ``overrides``: layers,
    hidden, heads, kv_heads, ffn, vocab, experts, top_k, context) split as ``parallel`` says; rank 0's
    graph, whose ``job`` builds every other rank's.

    With ``phase`` (and ``training=False``) an inference engine's step instead (:mod:`.llm_infer`):
    ``"prefill"`` of ``batch_size`` prompts of ``seq_len`` tokens (``kv_len`` > ``seq_len``: a chunk after
    a cached prefix), or ``"decode"`` of one token for each of ``batch_size`` sequences of ``kv_len`` tokens,
    over a paged KV cache of ``kv_blocks`` blocks of ``block_size`` tokens (default: just enough)."""
    cfg = llm_config(preset, **overrides)
    p = parallel if parallel is not None else Parallel()
    if not isinstance(p, Parallel):
        raise GraphBuildError(f"llm: parallel must be a ge.Parallel, got {type(p).__name__}")
    if not isinstance(training, bool):
        raise GraphBuildError(f"llm: training must be True or False, got {training!r}")
    if phase is not None:
        if training:
            raise GraphBuildError(f"llm: phase={phase!r} is an inference step; pass training=False")
        if phase == "decode" and seq_len not in (None, 1):
            raise GraphBuildError(f"llm: seq_len={seq_len!r} with phase='decode': a decode step has one new token "
                                  "per sequence; give the context as kv_len")
        if phase == "decode" and kv_len is None:
            raise GraphBuildError("llm: phase='decode' needs kv_len (the tokens each sequence attends to, the new "
                                  "one included)")
        q_len = 1 if phase == "decode" else (seq_len if seq_len is not None else 4096)
        kv = kv_len if kv_len is not None else q_len
        blocks = kv_blocks
        if blocks is None and isinstance(kv, int) and isinstance(batch_size, int) and isinstance(block_size, int):
            blocks = batch_size * blocks_for(kv, max(1, block_size))
        shape = InferenceShape(phase, batch_size, q_len, kv, block_size, blocks)
        if isinstance(blocks, int) and isinstance(batch_size, int) and blocks < batch_size * shape.table_blocks:
            raise GraphBuildError(f"llm: kv_blocks={blocks} cannot hold {batch_size} sequences of {kv} tokens "
                                  f"({batch_size * shape.table_blocks} blocks of {block_size})")
        return inference_graph(cfg, p, shape)
    seq_len = 4096 if seq_len is None else seq_len
    check_split(cfg, p, seq_len, micro_batch_size)
    job = LlmJob(cfg, p, seq_len, micro_batch_size, training)
    return job.stage(0).graph


class _StageBuilder:
    """Builds one pipeline stage's graph (the shapes of tensor-parallel rank 0 and expert-parallel rank 0:
    every rank of a stage has the same shapes)."""

    def __init__(self, job: LlmJob, stage: int) -> None:
        self.job = job
        self.cfg = cfg = job.config
        self.p = p = job.parallel
        self.stage = stage
        self.g = Graph(cfg.name)
        self.out = StageGraph(self.g)
        self.tokens = job.micro_batch_size * job.seq_len
        self.local_tokens = self.tokens // p.tp if p.sp else self.tokens
        self.vocab = -(-cfg.vocab // (VOCAB_DIVISOR * p.tp)) * VOCAB_DIVISOR * p.tp
        self.layers_per_chunk = cfg.layers // (p.pp * p.virtual_stages)
        self.last_vs = p.pp * p.virtual_stages - 1
        self.weights: dict[int, dict[str, _Weight]] = {}  # chunk -> module path -> weight
        self.pending: dict[str, list[_Weight]] = {}  # reduce group -> gradients waiting for a bucket
        self.reduced: list[tuple[_Weight, Tensor]] = []  # zero=0: each weight's reduced gradient
        self.shards: list[tuple[str, Tensor, list[_Weight]]] = []  # zero=1: (group, gradient shard, weights)
        self.controls: list[Node] = []
        self.buckets = 0
        self.splits: dict[int, tuple[Tensor, Tensor]] = {}  # AllToAllV counts and displacements by size

    # ------------------------------------------------------------------ sizes
    def _group_size(self, kind: str) -> int:
        p = self.p
        return {"tp": p.tp, "dp": p.dp, "pp": p.pp, "exp": p.ep, "dp_modulo_exp": p.stage_size // p.ep}[kind]

    def _chunks(self) -> list[int]:
        return list(range(self.p.virtual_stages))

    def _layers(self, chunk: int) -> range:
        return _chunk_layers(self.job, self.stage, chunk)

    # ---------------------------------------------------------------- weights
    def _weight(self, chunk: int, path: str, shape: tuple[int, ...], reduce_over: str = "dp",
                tp_replicated: bool = False) -> Tensor:
        g = self.g
        with g.name_scope(path):
            if self.p.zero:
                var = g.variable("weight", shape, DTYPE)
                tensor = var
            else:
                var = g.variable("weight", shape, MASTER_DTYPE)
                tensor = g.op("Cast", var, dst_type=DTYPE)
        self.weights[chunk][path] = _Weight(tensor, var.node, reduce_over, tp_replicated)
        return tensor

    def _parameters(self, chunk: int) -> None:
        """Every weight of model chunk ``chunk`` of this stage, in module order."""
        cfg, p = self.cfg, self.p
        self.weights[chunk] = {}
        h, d = cfg.hidden, cfg.head_dim
        vs = virtual_stage(p.pp, self.stage, chunk)
        if vs == 0:
            self._weight(chunk, "model/embed_tokens", (self.vocab // p.tp, h))
        qkv = (cfg.heads + 2 * cfg.kv_heads) // p.tp * d
        for i in self._layers(chunk):
            layer = f"model/layers.{i}"
            self._weight(chunk, f"{layer}/input_layernorm", (h,), tp_replicated=p.sp)
            self._weight(chunk, f"{layer}/self_attn/qkv_proj", (h, qkv))
            self._weight(chunk, f"{layer}/self_attn/o_proj", (cfg.heads // p.tp * d, h))
            self._weight(chunk, f"{layer}/post_attention_layernorm", (h,), tp_replicated=p.sp)
            if cfg.moe:
                moe = f"{layer}/block_sparse_moe"
                local = cfg.experts // p.ep
                self._weight(chunk, f"{moe}/gate", (h, cfg.experts), tp_replicated=p.sp)
                self._weight(chunk, f"{moe}/experts/gate_up_proj", (local, h, 2 * cfg.ffn), "dp_modulo_exp")
                self._weight(chunk, f"{moe}/experts/down_proj", (local, cfg.ffn, h), "dp_modulo_exp")
            else:
                self._weight(chunk, f"{layer}/mlp/gate_up_proj", (h, 2 * cfg.ffn // p.tp))
                self._weight(chunk, f"{layer}/mlp/down_proj", (cfg.ffn // p.tp, h))
        if vs == self.last_vs:
            self._weight(chunk, "model/norm", (h,), tp_replicated=p.sp)
            self._weight(chunk, "lm_head", (h, self.vocab // p.tp))

    # ----------------------------------------------------------- tp regions
    def _to_tp_region(self, x: Tensor) -> Tensor:
        """A column-parallel linear's input: the full sequence on every tensor-parallel rank."""
        if self.p.tp == 1:
            return x
        if self.p.sp:
            return self.g.op("HcomAllGather", x, group="tp", rank_size=self.p.tp)
        return self.g.op("Identity", x, tp_region="copy", group="tp", rank_size=self.p.tp)

    def _from_tp_region(self, y: Tensor) -> Tensor:
        """A row-parallel linear's output: summed over the tensor-parallel ranks (scattered over the
        sequence with sp)."""
        if self.p.tp == 1:
            return y
        if self.p.sp:
            return self.g.op("HcomReduceScatter", y, reduction="sum", group="tp", rank_size=self.p.tp)
        return self.g.op("HcomAllReduce", y, reduction="sum", group="tp", rank_size=self.p.tp)

    # -------------------------------------------------------------- forward
    def _w(self, chunk: int, path: str) -> Tensor:
        return self.weights[chunk][path].tensor

    def _embedding(self, chunk: int, ids: Tensor) -> Tensor:
        g = self.g
        with g.name_scope("model/embed_tokens"):
            x = g.op("GatherV2", [self._w(chunk, "model/embed_tokens"), ids])
            x = g.op("Reshape", x, shape=[self.tokens, self.cfg.hidden])
            return self._from_tp_region(x)

    def _attention(self, chunk: int, layer: str, x: Tensor) -> Tensor:
        g, cfg, p = self.g, self.cfg, self.p
        b, s, d = self.job.micro_batch_size, self.job.seq_len, cfg.head_dim
        heads, kv = cfg.heads // p.tp, cfg.kv_heads // p.tp
        with g.name_scope(f"{layer}/input_layernorm"):
            n = g.op("RmsNorm", [x, self._w(chunk, f"{layer}/input_layernorm")], epsilon=NORM_EPS)[0]
        with g.name_scope(f"{layer}/self_attn"):
            with g.name_scope("qkv_proj"):
                qkv = g.op("MatMulV2", [self._to_tp_region(n), self._w(chunk, f"{layer}/self_attn/qkv_proj")])
                q, k, v = g.op("SplitVD", qkv, size_splits=[heads * d, kv * d, kv * d], split_dim=-1)
                q = g.op("Reshape", q, shape=[b, s, heads, d])
                k = g.op("Reshape", k, shape=[b, s, kv, d])
                v = g.op("Reshape", v, shape=[b, s, kv, d])
            with g.name_scope("rotary_emb"):
                q, k = g.op("ApplyRotaryPosEmb", [q, k, self.cos, self.sin], layout=1)
            with g.name_scope("core_attention"):
                o = g.op("FlashAttentionScore", [q, k, v, self.mask], head_num=heads, input_layout="BSND",
                         scale_value=d ** -0.5, sparse_mode=2, keep_prob=1.0)[3]
                o = g.op("Reshape", o, shape=[self.tokens, heads * d])
            with g.name_scope("o_proj"):
                y = self._from_tp_region(g.op("MatMulV2", [o, self._w(chunk, f"{layer}/self_attn/o_proj")]))
        with g.name_scope(f"{layer}/attention_residual"):
            return g.op("Add", [x, y])

    def _mlp(self, chunk: int, layer: str, x: Tensor) -> Tensor:
        g = self.g
        with g.name_scope(f"{layer}/post_attention_layernorm"):
            n = g.op("RmsNorm", [x, self._w(chunk, f"{layer}/post_attention_layernorm")], epsilon=NORM_EPS)[0]
        if self.cfg.moe:
            y = self._moe(chunk, layer, n)
        else:
            with g.name_scope(f"{layer}/mlp"):
                with g.name_scope("gate_up_proj"):
                    gu = g.op("MatMulV2", [self._to_tp_region(n), self._w(chunk, f"{layer}/mlp/gate_up_proj")])
                with g.name_scope("act_fn"):
                    a = g.op("SwiGlu", gu, dim=-1)
                with g.name_scope("down_proj"):
                    y = self._from_tp_region(g.op("MatMulV2", [a, self._w(chunk, f"{layer}/mlp/down_proj")]))
        with g.name_scope(f"{layer}/mlp_residual"):
            return g.op("Add", [x, y])

    def _routed(self, t: Tensor, layer: int) -> Tensor:
        self.out.routed[t.node.id] = (layer, t.node.inputs[0].shape[0])
        return t

    def _moe(self, chunk: int, layer: str, n: Tensor) -> Tensor:
        """A Mixtral sparse MLP on this rank's tokens: route, exchange over ``exp``, local experts, back."""
        g, cfg, p = self.g, self.cfg, self.p
        index = int(layer.rsplit(".", 1)[1])
        k, local = cfg.top_k, cfg.experts // p.ep
        rows = self.local_tokens * k
        path = f"{layer}/block_sparse_moe"
        with g.name_scope(path):
            with g.name_scope("gate"):
                logits = g.op("MatMulV2", [n, self._w(chunk, f"{path}/gate")])
                scales, idx, _ = g.op("MoeGatingTopKSoftmax", logits, k=k)
            with g.name_scope("dispatch"):
                ex, row_idx, counts, _ = g.op("MoeInitRoutingV2", [n, idx], expert_num=cfg.experts,
                                              active_num=rows, expert_tokens_count_or_cumsum_flag=2)
                if p.ep > 1:
                    counts = g.op("HcomAllToAll", counts, group="exp", rank_size=p.ep)
                    counts = g.op("ReduceSum", g.op("Reshape", counts, shape=[p.ep, local]), axes=[0])
                    ex = self._routed(self._all_to_all(ex), index)
            with g.name_scope("experts"):
                with g.name_scope("gate_up_proj"):
                    gu = self._routed(g.op("GroupedMatmul", [ex, self._w(chunk, f"{path}/experts/gate_up_proj"),
                                                             counts]), index)
                with g.name_scope("act_fn"):
                    a = self._routed(g.op("SwiGlu", gu, dim=-1), index)
                with g.name_scope("down_proj"):
                    y = self._routed(g.op("GroupedMatmul", [a, self._w(chunk, f"{path}/experts/down_proj"), counts]),
                                     index)
            with g.name_scope("combine"):
                if p.ep > 1:
                    y = self._routed(self._all_to_all(y), index)
                return g.op("MoeFinalizeRoutingV2", [y, row_idx, scales, idx])

    def _all_to_all(self, x: Tensor) -> Tensor:
        """Tokens to and from the other expert-parallel ranks (counts: balanced, see HcomAllToAllV)."""
        g, ep = self.g, self.p.ep
        per = x.shape[0] // ep * x.shape[1]
        if per not in self.splits:  # one pair of count and displacement constants per size
            with g.name_scope("model/expert_parallel"):
                self.splits[per] = (g.const(None, (ep,), "int64", value=[per] * ep),
                                    g.const(None, (ep,), "int64", value=[i * per for i in range(ep)]))
        counts, displs = self.splits[per]
        return g.op("HcomAllToAllV", [x, counts, displs, counts, displs], group="exp", rank_size=ep)

    def _loss(self, logits: Tensor, labels: Tensor) -> Tensor:
        """Cross entropy of a micro-batch, averaged over its tokens (float32, as Megatron computes it)."""
        g, p = self.g, self.p
        with g.name_scope("loss"):
            lf = g.op("Cast", logits, dst_type=MASTER_DTYPE)
            if p.tp == 1:
                per_token = g.op("SparseSoftmaxCrossEntropyWithLogits", [lf, labels])[0]
            else:  # Megatron's vocab-parallel cross entropy over this rank's slice of the vocabulary
                tp = {"group": "tp", "rank_size": p.tp}
                peak = g.op("HcomAllReduce", g.op("ReduceMax", lf, axes=[-1], keep_dims=True), reduction="max", **tp)
                shifted = g.op("Sub", [lf, g.op("StopGradient", peak)])
                flat = g.op("Reshape", shifted, shape=[shifted.shape[0] * shifted.shape[1]])
                target = g.op("HcomAllReduce", g.op("GatherV2", [flat, labels]), reduction="sum", **tp)
                total = g.op("HcomAllReduce", g.op("ReduceSum", g.op("Exp", shifted), axes=[-1]), reduction="sum",
                             **tp)
                per_token = g.op("Sub", [g.op("Log", total), target])
            return g.op("ReduceMean", per_token, axes=[0])

    def _head(self, chunk: int, x: Tensor) -> Tensor:
        g = self.g
        with g.name_scope("model/norm"):
            x = g.op("RmsNorm", [x, self._w(chunk, "model/norm")], epsilon=NORM_EPS)[0]
        with g.name_scope("lm_head"):
            return g.op("MatMulV2", [self._to_tp_region(x), self._w(chunk, "lm_head")])

    def _forward(self, a: Action, x: Tensor | None) -> tuple[Tensor, Tensor | None]:
        """One micro-batch through one model chunk: (its output activation or loss, the loss or None)."""
        vs = virtual_stage(self.p.pp, self.stage, a.chunk)
        if vs == 0:
            x = self._embedding(a.chunk, self.inputs[a.micro_batch])
        for i in self._layers(a.chunk):
            x = self._mlp(a.chunk, f"model/layers.{i}", self._attention(a.chunk, f"model/layers.{i}", x))
        if vs != self.last_vs:
            return x, None
        logits = self._head(a.chunk, x)
        if not self.job.training:
            return logits, None
        loss = self._loss(logits, self.labels[a.micro_batch])
        return loss, loss

    # ------------------------------------------------------------- pipeline
    def _activation_shape(self) -> list[int]:
        return [self.local_tokens, self.cfg.hidden]

    def _receive(self, direction: str, peer: int, tag: int) -> Tensor:
        """A receive, posted (as Megatron posts it, with the previous pass's send) once the stage's previous
        pass has run: not before, so its wait is what the stage waits for its neighbour."""
        after = [self.g.nodes[self.out.actions[-1].end - 1]] if self.out.actions else []
        with self.g.name_scope(f"pipeline/recv_{direction}"):
            return self.g.op("HcomReceive", [], control_inputs=after, group="pp", rank_size=self.p.pp, sr_tag=tag,
                             src_rank=peer, shape=self._activation_shape(), dtype=DTYPE, direction=direction)

    def _send(self, x: Tensor, direction: str, peer: int, tag: int) -> None:
        with self.g.name_scope(f"pipeline/send_{direction}"):
            self.g.op("HcomSend", x, group="pp", rank_size=self.p.pp, sr_tag=tag, dest_rank=peer,
                      direction=direction)
        self.controls.append(self.g.nodes[-1])

    # ------------------------------------------------------------ gradients
    def _gradient(self, w: _Weight, grad: Tensor) -> None:
        """Add a micro-batch's gradient of ``w`` to its float32 main gradient (Megatron's ``main_grad``
        buffer, zeroed when the step starts; every micro-batch adds alike); the last one goes to its bucket."""
        g = self.g
        with g.name_scope(f"{w.variable.name}_grad_accumulation"):
            if w.grad is None:
                w.grad = g.variable("main_grad", grad.shape, MASTER_DTYPE, trainable=False)
            g32 = g.op("Cast", grad, dst_type=MASTER_DTYPE) if grad.dtype != MASTER_DTYPE else grad
            w.grad = g.op("Add", [w.grad, g32])
        w.count += 1
        if w.count < self.p.micro_batches:
            return
        if w.tp_replicated and self.p.tp > 1:  # sequence parallel: each tp rank saw part of the sequence
            with g.name_scope(f"{w.variable.name}_grad_accumulation"):
                w.grad = g.op("HcomAllReduce", w.grad, reduction="sum", group="tp", rank_size=self.p.tp)
        pending = self.pending.setdefault(w.reduce_over, [])
        pending.append(w)
        if sum(x.grad.desc.numel for x in pending) >= GRAD_BUCKET_ELEMENTS:
            self._flush(w.reduce_over)

    def _flush(self, kind: str) -> None:
        """Reduce the pending gradients of group ``kind`` as one bucket."""
        bucket = self.pending.pop(kind, [])
        if not bucket:
            return
        g, n = self.g, self._group_size(kind)
        self.buckets += 1
        with g.name_scope(f"gradients/{kind}_bucket_{self.buckets}"):
            if not self.p.zero:
                if n == 1:
                    self.reduced += [(w, w.grad) for w in bucket]
                    return
                outs = g.op("HcomAllReduce", [w.grad for w in bucket], reduction="sum", group=kind, rank_size=n,
                            fusion=self.buckets)
                outs = outs if isinstance(outs, tuple) else (outs,)
                self.reduced += list(zip(bucket, outs))
                return
            flat = [g.op("Reshape", w.grad, shape=[w.grad.desc.numel]) for w in bucket]
            size = sum(t.shape[0] for t in flat)
            if size % n:
                flat.append(g.const("padding", (n - size % n,), MASTER_DTYPE, value=0.0))
            flat = g.op("ConcatD", flat, concat_dim=0) if len(flat) > 1 else flat[0]
            shard = flat if n == 1 else g.op("HcomReduceScatter", flat, reduction="sum", group=kind, rank_size=n)
        self.shards.append((kind, shard, bucket))

    def _optimizer(self) -> None:
        g = self.g
        for kind in list(self.pending):
            self._flush(kind)
        if not self.p.zero:
            grads = {w.variable.name: grad for w, grad in self.reduced}
            self.controls += add_optimizer(g, grads, [w.variable for w, _ in self.reduced], "AdamW", LEARNING_RATE)
            return
        for k, (kind, shard, bucket) in enumerate(self.shards):
            with g.name_scope("distributed_optimizer"):
                master = g.variable(f"main_params_{k}", shard.shape, MASTER_DTYPE, trainable=False).node
            update = add_optimizer(g, {master.name: shard}, [master], "AdamW", LEARNING_RATE)[0]
            n = self._group_size(kind)
            with g.name_scope(f"distributed_optimizer/param_gather_{k}"):
                params = g.op("Cast", update.output(0), dst_type=DTYPE)
                if n > 1:
                    params = g.op("HcomAllGather", params, group=kind, rank_size=n)
            self.controls.append(params.node)

    # ---------------------------------------------------------------- build
    def _inputs(self) -> None:
        g, p, job = self.g, self.p, self.job
        m = p.micro_batches
        holds = {virtual_stage(p.pp, self.stage, c) for c in self._chunks()}
        self.inputs = [g.data(f"input_ids_{j}", (job.micro_batch_size, job.seq_len), "int32")
                       for j in range(m)] if 0 in holds else []
        self.labels = [g.data(f"labels_{j}", (self.tokens,), "int32")
                       for j in range(m)] if self.last_vs in holds and job.training else []
        d = self.cfg.head_dim
        with g.name_scope("model/rotary_emb"):
            self.cos = g.const("cos", (1, job.seq_len, 1, d), DTYPE)
            self.sin = g.const("sin", (1, job.seq_len, 1, d), DTYPE)
        self.mask = g.const("model/atten_mask", (FA_MASK, FA_MASK), "uint8")
        # Megatron scales each micro-batch's loss by 1 / micro-batches before its backward pass
        self.loss_scale = g.const("loss_scale", (), MASTER_DTYPE, value=1.0 / p.micro_batches)

    def build(self) -> StageGraph:
        g, p = self.g, self.p
        self._inputs()
        for c in self._chunks():
            self._parameters(c)
        actions = schedule(p.pp, p.micro_batches, p.virtual_stages)[self.stage]
        if not self.job.training:
            actions = [a for a in actions if a.kind == FORWARD]
        saved: dict[tuple[int, int], tuple[int, int, Tensor | None, Tensor, Tensor | None]] = {}
        outputs: list[Tensor] = []
        for a in actions:
            recv, send = transfers(p.pp, p.virtual_stages, p.micro_batches, self.stage, a)
            if a.kind == FORWARD:
                x_in = self._receive(FORWARD, recv.peer_stage, recv.tag) if recv else None
                first = len(g.nodes)
                out, loss = self._forward(a, x_in)
                saved[(a.micro_batch, a.chunk)] = (first, len(g.nodes), x_in, out, loss)
                self.out.actions.append(ActionNodes(a, first, len(g.nodes)))
                if send:
                    self._send(out, FORWARD, send.peer_stage, send.tag)
                elif not self.job.training:
                    outputs.append(out)
                continue
            first, end, x_in, out, loss = saved.pop((a.micro_batch, a.chunk))
            grad_out = self._receive(BACKWARD, recv.peer_stage, recv.tag) if recv else None
            begin = len(g.nodes)
            with g.name_scope("gradients"):
                if loss is not None:
                    seed = (loss, self.loss_scale)
                    outputs.append(loss)
                else:
                    seed = (out, grad_out)
                by_tensor = {w.tensor: w for w in self.weights[a.chunk].values()}

                def ready(t: Tensor, grad: Tensor) -> None:
                    if t in by_tensor:
                        self._gradient(by_tensor[t], grad)

                wrt = list(by_tensor) + ([x_in] if x_in is not None else [])
                grads = backward_pass(g, [seed], g.nodes[first:end], wrt, on_ready=ready)
            self.out.actions.append(ActionNodes(a, begin, len(g.nodes)))
            if send:
                self._send(grads[x_in], BACKWARD, send.peer_stage, send.tag)
        if self.job.training:
            self._optimizer()
        g.output(outputs, control_inputs=self.controls)
        g.is_training = self.job.training
        g.job = self.job
        return self.out
