"""``ge.requests`` and ``ge.serve``: an LLM serving loop in the simulator, as vLLM's scheduler runs one.

Requests arrive (a Poisson stream at ``rate`` requests/s, or all at once); every engine step the scheduler
picks what runs, and the step runs as profiled ``run_graph`` calls of :mod:`.llm_infer`'s graphs:

* ``"continuous"`` batching: finished sequences leave and waiting ones join at every step.  Without
  chunked prefill a step is either a prefill of newly admitted prompts (prefills first, as vLLM's V0
  scheduler: a long prompt stalls the running decodes) or a decode of every running sequence; with
  ``chunked_prefill`` a step decodes every running sequence and fills the rest of its ``max_num_tokens``
  budget with prompt chunks (vLLM's V1), a prompt split over steps;
* ``"static"`` batching: a batch is formed only when the previous one has finished entirely.

The KV cache is ``kv_cache_blocks`` blocks of ``block_size`` tokens (by default what the device's memory
holds after the weights, at vLLM's ``gpu_memory_utilization`` 0.9).  A sequence holds the blocks its
tokens fill; when a decode needs a block and none is free, the most recently admitted sequence is preempted
(its blocks freed, recomputed later from its prompt and the tokens it had: vLLM's recompute preemption),
said once on stderr and counted.

Graphs are built and compiled once per shape bucket (batch rounded up to a power of two, tokens to
``QUERY_BUCKET`` and ``KV_BUCKET``): a graph-mode engine pads to its captured shapes the same way.  Each step and each
request is reported through msprof (the ``serving_step`` and ``serving_request`` records) when a
collection is open (``%%geprof``, ``geprof_nb.profile()``), for ``Profile.serving_requests`` and
``Profile.serving_steps``.
"""

from __future__ import annotations

import sys
from collections import deque
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ..errors import ServingError
from ..prof import msprof, rawdata
from ..prof.clock import clock, toolkit_entry
from . import status as st
from .llm_config import LlmConfig, llm_config
from .llm_infer import BLOCK_SIZE, InferenceShape, blocks_for, inference_graph, kv_bytes_per_token
from .parallel import Parallel
from .session import Session, device_runtime

SCHEDULERS = ("continuous", "static")
#: A graph shape's new tokens per sequence, and tokens attended to, are rounded up to a multiple of these
#: (the padding of a captured shape); its batch to a power of two.
QUERY_BUCKET = 64
KV_BUCKET = 256
#: vLLM's default share of device memory the weights, activations and KV cache may take.
MEMORY_UTILIZATION = 0.9
#: The host's scheduling and input preparation per engine step, and per sequence in it (vLLM's Python
#: scheduler and its input tensors: about a millisecond a step on a server CPU).
STEP_HOST_NS = 1_000_000
SEQ_HOST_NS = 5_000
#: The graph ids ge.serve's session gives its shape buckets start here.
FIRST_GRAPH_ID = 1


@dataclass(frozen=True)
class Request:
    """One request of a stream: when it arrives (seconds after the stream starts), its prompt and output
    lengths in tokens."""

    id: int
    arrival_s: float
    prompt_len: int
    output_len: int


def _lengths(name: str, value: int | tuple[int, int] | Sequence[int], n: int, rng: np.random.Generator) -> list[int]:
    """``n`` token counts: an int for all, ``(low, high)`` uniform integers (both included), or a list of n."""
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, int) for v in value):
        low, high = value
        if not 1 <= low <= high:
            raise ServingError(f"requests: {name}=({low}, {high}) must be a range 1 <= low <= high")
        return [int(x) for x in rng.integers(low, high + 1, n)]
    if isinstance(value, int) and not isinstance(value, bool):
        values = [value] * n
    elif isinstance(value, (list, np.ndarray)):
        values = [int(v) for v in value]
        if len(values) != n:
            raise ServingError(f"requests: {name} has {len(values)} lengths for n={n} requests")
    else:
        raise ServingError(f"requests: {name} must be an int, a (low, high) tuple or a list of n ints, "
                           f"got {value!r}")
    bad = [v for v in values if v < 1]
    if bad:
        raise ServingError(f"requests: {name} must be >= 1 token, got {bad[0]}")
    return values


@toolkit_entry
def requests(n: int, prompt_len: int | tuple[int, int] | Sequence[int], output_len: int | tuple[int, int] |
             Sequence[int], rate: float | None = None, seed: int = 0) -> list[Request]:
    """``n`` requests arriving as a Poisson process of ``rate`` requests/s (``None`` or ``inf``: all at
    once), their lengths an int, ``(low, high)`` (uniform) or a list of ``n``; the same ``seed``, the same
    stream."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ServingError(f"requests: n must be an int >= 1, got {n!r}")
    if rate is not None and (not isinstance(rate, (int, float)) or isinstance(rate, bool) or not rate > 0):
        raise ServingError(f"requests: rate must be > 0 requests/s (or None: all at once), got {rate!r}")
    rng = np.random.default_rng(seed)
    prompts = _lengths("prompt_len", prompt_len, n, rng)
    outputs = _lengths("output_len", output_len, n, rng)
    if rate is None or rate == float("inf"):
        arrivals = np.zeros(n)
    else:
        arrivals = np.cumsum(rng.exponential(1.0 / rate, n))
    return [Request(i, float(a), p, o) for i, (a, p, o) in enumerate(zip(arrivals, prompts, outputs))]


@dataclass(eq=False)
class _Sequence:
    req: Request
    arrival_ns: int
    computed: int = 0  # tokens whose keys and values are in the cache
    generated: int = 0  # output tokens produced
    blocks: int = 0
    first_token_ns: int = 0
    preemptions: int = 0

    prefill_target: int = 0  # tokens its prefill puts in the cache (set when admitted)

    def admit(self) -> None:
        """Start a prefill of the prompt and of any tokens generated before a preemption (recomputed, the
        next token sampled from the last of them)."""
        self.prefill_target = self.req.prompt_len + self.generated

    @property
    def prefilled(self) -> bool:
        return self.prefill_target > 0 and self.computed >= self.prefill_target


@dataclass
class ServeResult:
    """What a serving loop did (the profile has the detail): counts and the simulated span."""

    requests: int
    steps: int
    output_tokens: int
    preemptions: int
    duration_s: float
    kv_cache_blocks: int
    graphs: int
    notes: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        return (f"ServeResult({self.requests} requests, {self.output_tokens} output tokens in {self.steps} steps, "
                f"{self.duration_s:.3f} s simulated, {self.preemptions} preemptions, {self.graphs} graphs, "
                f"KV cache {self.kv_cache_blocks} blocks)")


def _bucket(n: int, unit: int) -> int:
    return -(-n // unit) * unit


def _pow2(n: int) -> int:
    return 1 << (max(1, n) - 1).bit_length()


class _Engine:
    """The session, its graphs by shape bucket, and the step records."""

    def __init__(self, cfg: LlmConfig, p: Parallel, block_size: int, kv_blocks: int) -> None:
        self.cfg, self.p, self.block_size, self.kv_blocks = cfg, p, block_size, kv_blocks
        self.session = Session()
        self.graphs: dict[InferenceShape, int] = {}

    def run(self, phase: str, batch: int, q_len: int, kv_len: int) -> int:
        """One ``run_graph`` of the bucket holding ``batch`` sequences of ``q_len`` new tokens and at most
        ``kv_len`` tokens attended to; the new tokens its graph computes, the padding to the bucket included."""
        context = self.cfg.context
        q = 1 if phase == "decode" else min(_bucket(q_len, QUERY_BUCKET), context)
        # a prompt from its start attends to its own tokens only; a chunk or a decode to its cached prefix too
        kv = q if phase == "prefill" and kv_len == q_len else min(max(_bucket(kv_len, KV_BUCKET), q), context)
        shape = InferenceShape(phase, _pow2(batch), q, kv, self.block_size, self.kv_blocks)
        graph_id = self.graphs.get(shape)
        if graph_id is None:
            graph_id = self.graphs[shape] = FIRST_GRAPH_ID + len(self.graphs)
            if self.session.add_graph(graph_id, inference_graph(self.cfg, self.p, shape)) != st.SUCCESS:
                raise ServingError(f"serve: {st.GEGetErrorMsg()}")
        if self.session.run_graph(graph_id) != st.SUCCESS:
            raise ServingError(f"serve: {st.GEGetErrorMsg()}")
        return shape.batch * shape.q_len


def _default_blocks(cfg: LlmConfig, p: Parallel, block_size: int) -> int:
    """The blocks the device's memory holds at :data:`MEMORY_UTILIZATION` after the rank's weights."""
    runtime = device_runtime()
    memory = runtime.preset.memory_bytes
    weights = cfg.parameters()[0] * 2 // p.tp
    free = int(memory * MEMORY_UTILIZATION) - weights
    return max(0, free // (block_size * kv_bytes_per_token(cfg, p.tp) * cfg.layers))


def _check(cfg: LlmConfig, reqs: Sequence[Request], max_batch_size: int, max_num_tokens: int | None,
           scheduler: str, block_size: int) -> None:
    if not isinstance(max_batch_size, int) or isinstance(max_batch_size, bool) or max_batch_size < 1:
        raise ServingError(f"serve: max_batch_size must be an int >= 1, got {max_batch_size!r}")
    if max_num_tokens is not None and (not isinstance(max_num_tokens, int) or max_num_tokens < 1):
        raise ServingError(f"serve: max_num_tokens must be an int >= 1 or None, got {max_num_tokens!r}")
    if scheduler not in SCHEDULERS:
        raise ServingError(f"serve: scheduler must be one of {', '.join(SCHEDULERS)}, got {scheduler!r}")
    if not isinstance(block_size, int) or block_size < 1:
        raise ServingError(f"serve: block_size must be an int >= 1, got {block_size!r}")
    if not reqs or not all(isinstance(r, Request) for r in reqs):
        raise ServingError("serve: requests must be a non-empty list of ge.requests(...)")
    for r in reqs:
        if r.prompt_len + r.output_len > cfg.context:
            raise ServingError(f"serve: request {r.id}: prompt_len + output_len = {r.prompt_len + r.output_len} "
                               f"tokens is longer than the context of {cfg.name} ({cfg.context} tokens)")


@toolkit_entry
def serve(model: str, *, parallel: Parallel | None = None, requests: Sequence[Request], max_batch_size: int,
          max_num_tokens: int | None = None, scheduler: str = "continuous", chunked_prefill: bool = False,
          kv_cache_blocks: int | None = None, block_size: int = BLOCK_SIZE) -> ServeResult:
    """Serve ``requests`` with the LLM preset ``model`` (see the module docstring): every engine step a
    profiled ``run_graph``; returns the counts, the profile holds each step and request."""
    cfg = llm_config(model)
    p = parallel if parallel is not None else Parallel()
    if not isinstance(p, Parallel):
        raise ServingError(f"serve: parallel must be a ge.Parallel, got {type(p).__name__}")
    reqs = list(requests)
    _check(cfg, reqs, max_batch_size, max_num_tokens, scheduler, block_size)
    Session()  # GE initialised: the device's memory decides the default cache
    blocks = _default_blocks(cfg, p, block_size) if kv_cache_blocks is None else kv_cache_blocks
    if not isinstance(blocks, int) or isinstance(blocks, bool) or blocks < 1:
        raise ServingError(f"serve: kv_cache_blocks must be an int >= 1, got {blocks!r}")
    longest = max(reqs, key=lambda r: r.prompt_len + r.output_len)
    need = blocks_for(longest.prompt_len + longest.output_len, block_size)
    if blocks < need:
        raise ServingError(f"serve: kv_cache_blocks={blocks} is smaller than one request: request {longest.id} "
                           f"needs {need} blocks of {block_size} tokens ({longest.prompt_len} prompt + "
                           f"{longest.output_len} output)")
    budget = max_num_tokens if max_num_tokens is not None else (2048 if chunked_prefill else cfg.context)
    loop = _Loop(_Engine(cfg, p, block_size, blocks), reqs, max_batch_size, budget, scheduler,
                 bool(chunked_prefill))
    return loop.run()


class _Loop:
    """The scheduler's state and its steps."""

    def __init__(self, engine: _Engine, reqs: list[Request], max_batch: int, budget: int, scheduler: str,
                 chunked: bool) -> None:
        self.engine, self.max_batch, self.budget, self.static, self.chunked = (
            engine, max_batch, budget, scheduler == "static", chunked)
        self.start_ns = clock.now_ns()
        self.pending = deque(sorted(reqs, key=lambda r: (r.arrival_s, r.id)))
        self.waiting: deque[_Sequence] = deque()
        self.running: list[_Sequence] = []
        self.free = engine.kv_blocks
        self.steps = self.preemptions = self.tokens = self.done = 0
        self.notes: list[str] = []

    def _arrive(self) -> None:
        now = clock.now_ns()
        while self.pending and self.start_ns + int(self.pending[0].arrival_s * 1e9) <= now:
            r = self.pending.popleft()
            self.waiting.append(_Sequence(r, self.start_ns + int(r.arrival_s * 1e9)))

    def _grow(self, seq: _Sequence, tokens: int) -> bool:
        """Give ``seq`` the blocks ``tokens`` cached tokens fill; False if the cache has too few free."""
        need = blocks_for(tokens, self.engine.block_size) - seq.blocks
        if need > self.free:
            return False
        self.free -= max(0, need)
        seq.blocks += max(0, need)
        return True

    def _preempt(self) -> _Sequence:
        victim = self.running.pop()  # the most recently admitted
        self.free += victim.blocks
        victim.blocks = victim.computed = victim.prefill_target = 0
        victim.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(victim)
        if self.preemptions == 1:
            text = (f"serve: the KV cache ({self.engine.kv_blocks} blocks of {self.engine.block_size} tokens) ran "
                    f"out: request {victim.req.id} preempted (recomputed later); every preemption is counted in "
                    "Profile.serving_requests")
            print(text, file=sys.stderr)
            self.notes.append(text)
        return victim

    def _admit(self, tokens_left: int) -> list[tuple[_Sequence, int]]:
        """Waiting sequences (and prompt chunks) this step prefills: (sequence, new tokens)."""
        chosen: list[tuple[_Sequence, int]] = []
        if self.static and self.running:
            return chosen
        continuing = [s for s in self.running if not s.prefilled]
        for s in continuing:  # chunked prefill: prompts already started go on first
            n = min(s.prefill_target - s.computed, tokens_left)
            if n < 1 or not self._grow(s, s.computed + n):
                break
            chosen.append((s, n))
            tokens_left -= n
        while self.waiting and len(self.running) < self.max_batch and tokens_left > 0:
            s = self.waiting[0]
            n = s.req.prompt_len + s.generated
            if n > tokens_left:
                if not self.chunked:
                    break
                n = tokens_left
            if not self._grow(s, s.computed + n):
                break
            self.waiting.popleft()
            s.admit()
            self.running.append(s)
            chosen.append((s, n))
            tokens_left -= n
        return chosen

    def _decodes(self) -> list[_Sequence]:
        """The running sequences that decode a token this step, with a block for it (preempting if none)."""
        while True:
            ready = [s for s in self.running if s.prefilled]
            short = next((s for s in ready if not self._grow(s, s.computed + 1)), None)
            if short is None:
                return ready
            self._preempt()
            if not self.running:
                return []

    def _step(self) -> bool:
        self._arrive()
        if not self.running and not self.waiting:
            if not self.pending:
                return False
            clock.wait_until(self.start_ns + int(self.pending[0].arrival_s * 1e9))  # idle until it arrives
            self._arrive()
        start = clock.now_ns()
        preempted = self.preemptions
        decodes: list[_Sequence] = []
        if self.chunked:
            decodes = self._decodes()
            prefills = self._admit(self.budget - len(decodes))
        else:
            prefills = self._admit(self.budget)
            if not prefills:
                decodes = self._decodes()
        if not prefills and not decodes:
            raise ServingError("serve: no sequence can run (the KV cache cannot hold the next request)")
        clock.spend(STEP_HOST_NS + SEQ_HOST_NS * (len(prefills) + len(decodes)))
        computed = self._run(prefills, decodes)
        end = clock.now_ns()
        self._finish_step(prefills, decodes, end)
        rec = np.zeros(1, rawdata.SERVING_STEP_DTYPE)
        rec[0] = (self.steps, start, end, sum(n for _, n in prefills), len(prefills), len(decodes),
                  self.preemptions - preempted, self.engine.kv_blocks - self.free, self.free, computed)
        msprof.lib.report_block("serving_step", rec)
        self.steps += 1
        return True

    def _run(self, prefills: list[tuple[_Sequence, int]], decodes: list[_Sequence]) -> int:
        """Run the step's graphs; the new tokens they compute.  New prompts are padded to the longest (the
        prefill graph has one length for all its sequences, attention causal over each row), not packed as
        vLLM and MindIE pack them: the padding costs what real tokens cost, and is counted."""
        computed = 0
        if prefills:
            fresh = [(s, n) for s, n in prefills if s.computed == 0]
            chunks = [(s, n) for s, n in prefills if s.computed > 0]
            if fresh:
                longest = max(n for _, n in fresh)
                computed += self.engine.run("prefill", len(fresh), longest, longest)
            for s, n in chunks:  # a chunk after its cached prefix: one sequence's graph each
                computed += self.engine.run("prefill", 1, n, s.computed + n)
        if decodes:
            computed += self.engine.run("decode", len(decodes), 1, max(s.computed + 1 for s in decodes))
        return computed

    def _finish_step(self, prefills: list[tuple[_Sequence, int]], decodes: list[_Sequence], end: int) -> None:
        for s, n in prefills:
            s.computed += n
            if s.prefilled:  # the prompt's last token sampled the next output token
                self._token(s, end)
        for s in decodes:
            s.computed += 1
            self._token(s, end)
        finished = [s for s in self.running if s.generated >= s.req.output_len]
        for s in finished:
            self.running.remove(s)
            self.free += s.blocks
            rec = np.zeros(1, rawdata.SERVING_REQUEST_DTYPE)
            rec[0] = (s.req.id, s.arrival_ns, s.first_token_ns, end, s.req.prompt_len, s.generated, s.preemptions)
            msprof.lib.report_block("serving_request", rec)
            self.done += 1

    def _token(self, s: _Sequence, now: int) -> None:
        if s.generated == 0:
            s.first_token_ns = now
        s.generated += 1
        self.tokens += 1

    def run(self) -> ServeResult:
        while self._step():
            pass
        return ServeResult(self.done, self.steps, self.tokens, self.preemptions,
                           (clock.now_ns() - self.start_ns) / 1e9, self.engine.kv_blocks, len(self.engine.graphs),
                           self.notes)
