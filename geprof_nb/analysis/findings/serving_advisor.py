"""The advisor's serving causes: what a ``ge.serve`` run (a run with ``Profile.serving_steps``) loses latency or
throughput to, from its serving tables, its op rows and its roofline.

A serving run's step is the engine step: every figure here is a mean over the run's engine steps (the total
over the run divided by their number), and the evidence says so.  Four causes:

* **decode memory-bound**: the decode steps' kernels are bound by HBM bytes (the roofline of the ops inside
  decode steps, :mod:`..tables.roofline`: the cost model's bytes, or the PMU's for imported data, against the
  device's HBM bandwidth) and run near it; at stake the decode compute time above the bytes' floor
  (bytes / bandwidth);
* **KV cache too small**: preemptions; at stake the prefill time spent recomputing preempted sequences (the
  prefill tokens beyond every prompt once, their share of the prefill steps' time);
* **prefill stalls decode**: without chunked prefill (no step mixes prefill and decode), a prefill step stops
  every sequence already decoding; at stake the stalling prefill steps' time, evidence the TPOT inflation;
* **tensor-parallel communication exposed in decode**: collectives (a serving run's are all tensor-parallel:
  ``ge.serve`` splits over tp only) with no computation beside them in the decode steps.

Training rules whose cause is not a serving run's are dropped (:data:`NOT_SERVING_RULES`): the gap between
engine steps is the serving engine's scheduling (vLLM's Python scheduler), not an input pipeline; a decode
step's short kernels are the batch's one token per sequence, not unfused training ops; and a long gap before one
graph's iteration holds the other graphs' engine steps, not a stall.  Where the decode TP rule fires, the run-wide
communication rules (:data:`TP_REPLACED_RULES`) say the same time less precisely and go.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..tables.roofline import device_roofs, roofline_tables
from .finding import Finding

if TYPE_CHECKING:
    from ..profile import Profile

#: The training rules that do not apply to a serving run (see the module docstring).
NOT_SERVING_RULES = ("Large Data Aug Bound", "Many tiny kernels", "One-off stall")
#: The run-wide communication rules the decode TP finding replaces.
TP_REPLACED_RULES = ("Communication not overlapped with compute", "Exposed tensor-parallel communication")

#: Decode is memory-bound when its ops' HBM floor (bytes / bandwidth) is at least this share of their roofline
#: time (the larger of the compute and memory floors, per op).
MEMORY_BOUND_SHARE = 0.5
#: ... and the bytes' floor is at least this share of the decode compute time (the HBM at a third of its
#: bandwidth or more): below it the kernels' fixed costs, not the bytes, set the decode's pace (a tiny model).
MIN_BANDWIDTH_USE = 0.3
#: Decode sequences' waiting in prefill steps, as a share of their decode time (first token to finish), that
#: makes the prefill-stall finding: a tenth of every TPOT.
PREFILL_STALL_MIN_SHARE = 0.10
#: Collectives with nothing beside them, as a share of the decode steps' time, that make the decode TP finding
#: (as the training advisor's tensor-parallel threshold: a few percent is the price of tp > 1).
DECODE_TP_MIN_SHARE = 0.05

_START, _DUR = "Task Start Time(us)", "Task Duration(us)"


def _ms(v: float) -> str:
    return f"{v:,.3f} ms"


def _basis(steps: pd.DataFrame) -> str:
    return f"per engine step: the run's total over its {len(steps)} engine steps"


def _in_steps(start_us: np.ndarray, steps: pd.DataFrame) -> np.ndarray:
    """Which task starts fall inside one of ``steps``' host spans."""
    lo, hi = steps["start_us"].to_numpy(float), steps["end_us"].to_numpy(float)
    if not len(lo):
        return np.zeros(len(start_us), bool)
    order = np.argsort(lo)
    lo, hi = lo[order], hi[order]
    k = np.searchsorted(lo, start_us, "right") - 1
    return (k >= 0) & (start_us < hi[np.clip(k, 0, None)])


def decode_roofline(profile: Profile, decode: pd.DataFrame) -> pd.DataFrame:
    """The roofline per OP Type of the op tasks inside the ``decode`` steps (rows of ``serving_steps``):
    :func:`..tables.roofline.roofline_tables` on those rows only, since a prefill runs the same op names."""
    ops = profile.op_summary
    roofs = device_roofs(profile.device)
    work = profile.source.op_work(roofs)
    keep = _in_steps(pd.to_numeric(ops[_START], errors="coerce").to_numpy(float), decode)
    return roofline_tables(ops[keep].reset_index(drop=True), work[keep].reset_index(drop=True), roofs)[1]


def decode_memory_bound(profile: Profile, steps: pd.DataFrame) -> Finding | None:
    """Decode steps whose kernels wait on HBM: the weights and the KV blocks read for one token per sequence."""
    decode = steps[steps["phase"] == "decode"]
    if decode.empty:
        return None
    roof = decode_roofline(profile, decode)
    if roof.empty or roof["Bytes"].isna().any():
        return None
    bandwidth = roof.attrs["roofs"].hbm_bandwidth
    floor_us = float(roof["Bytes"].sum()) / bandwidth * 1e6
    roofline_us = float(roof["Roofline Time(us)"].sum())
    compute_us = float(decode["compute_ms"].sum()) * 1e3
    if (not roofline_us > 0 or not compute_us > 0 or floor_us < MEMORY_BOUND_SHARE * roofline_us
            or floor_us < MIN_BANDWIDTH_USE * compute_us):
        return None
    at_stake = max(0.0, compute_us - floor_us) / len(steps)
    n = len(decode)
    achieved = float(roof["Bytes"].sum()) / (compute_us * 1e-6)
    top = roof.sort_values("Bytes", ascending=False).head(3)
    return Finding(
        "Decode memory-bound",
        f"Decode is memory-bound: HBM bytes set {floor_us / roofline_us:.0%} of its kernels' roofline time, and "
        f"{_ms(at_stake / 1e3)} per engine step is decode compute above the bytes' floor.",
        f"{n} decode steps (mean batch {decode['decode_seqs'].mean():.1f} sequences) move "
        f"{roof['Bytes'].sum() / n / 1e6:,.2f} MB of HBM per step: a floor of {_ms(floor_us / n / 1e3)} at "
        f"{bandwidth / 1e9:,.0f} GB/s against {_ms(compute_us / n / 1e3)} of decode compute per step (achieved "
        f"{achieved / 1e9:,.0f} GB/s); most bytes: "
        + ", ".join(f"{t} {b / n / 1e6:,.2f} MB" for t, b in zip(top["OP Type"], top["Bytes"]))
        + f"; {roof.attrs['roofs'].note()}; {_basis(steps)}",
        "Give each weight read more tokens: a larger decode batch (max_batch_size, and a KV cache that holds it), "
        "weight-only quantisation (W8A16 / W4A16) and an int8 KV cache halve the bytes per token; speculative "
        "decoding verifies several tokens per weight read.",
        at_stake)


def kv_cache_too_small(profile: Profile, steps: pd.DataFrame) -> Finding | None:
    """Preempted sequences: the KV cache ran out of blocks, and their prompts and tokens are computed again."""
    requests = profile.serving_requests
    preemptions = int(requests["preemptions"].sum())
    if preemptions == 0:
        return None
    prefill_tokens = int(steps["prefill_tokens"].sum())
    recomputed = max(0, prefill_tokens - int(requests["prompt_tokens"].sum()))
    prefill_ms = float(steps.loc[steps["prefill_tokens"] > 0, "step_ms"].sum())
    at_stake = prefill_ms * 1e3 * recomputed / prefill_tokens / len(steps) if prefill_tokens else 0.0
    blocks = int(steps["kv_blocks_used"].iloc[0] + steps["kv_blocks_free"].iloc[0])
    return Finding(
        "KV cache too small",
        f"The KV cache ran out: {preemptions} preemptions of {int((requests['preemptions'] > 0).sum())} requests, "
        f"{recomputed:,} tokens prefilled again ({_ms(at_stake / 1e3)} per engine step).",
        f"{preemptions} preemptions in {int((steps['preempted'] > 0).sum())} engine steps; the cache holds {blocks:,} "
        f"blocks, at most {int(steps['kv_blocks_used'].max()):,} in use after a step; {prefill_tokens:,} prefill "
        f"tokens for {int(requests['prompt_tokens'].sum()):,} prompt tokens: the {recomputed:,} beyond are recomputed "
        f"sequences, their share of the {_ms(prefill_ms)} of prefill steps; {_basis(steps)}",
        "Give the cache more blocks (ge.serve(kv_cache_blocks=...), vLLM's gpu_memory_utilization / "
        "num_gpu_blocks_override, a higher tp to split the weights and the cache), lower max_batch_size (or "
        "max_num_tokens) so the running sequences fit, or quantise the KV cache to int8.",
        at_stake)


def decode_stalls(steps: pd.DataFrame, requests: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """For each prefill step, how many sequences were already decoding (first token before the step's start,
    finish after it); for each request, the time (ms) it waited in prefill steps after its first token."""
    prefill = steps[steps["phase"] == "prefill"]
    start, ms = prefill["start_us"].to_numpy(float), prefill["step_ms"].to_numpy(float)
    first, finish = requests["first_token_us"].to_numpy(float), requests["finish_us"].to_numpy(float)
    waiting = (first[:, None] <= start[None, :]) & (finish[:, None] > start[None, :])  # [request, prefill step]
    return waiting.sum(axis=0), (waiting * ms[None, :]).sum(axis=1)


def prefill_stalls_decode(profile: Profile, steps: pd.DataFrame) -> Finding | None:
    """Prefill steps that stop the running decodes (continuous batching without chunked prefill)."""
    if (steps["phase"] == "mixed").any():  # chunked prefill: prompts join the decodes' steps
        return None
    requests = profile.serving_requests
    stalled, waited_ms = decode_stalls(steps, requests)
    multi = (requests["output_tokens"] > 1).to_numpy()
    decoding_ms = (requests["finish_us"] - requests["first_token_us"]).to_numpy(float)[multi] / 1e3
    if not multi.any() or not decoding_ms.sum() > 0:
        return None
    share = float(waited_ms[multi].sum() / decoding_ms.sum())
    if share < PREFILL_STALL_MIN_SHARE:
        return None
    prefill = steps[steps["phase"] == "prefill"]
    stalling = prefill[stalled > 0]
    at_stake = float(stalling["step_ms"].sum()) * 1e3 / len(steps)
    tokens = requests["output_tokens"].to_numpy(float)[multi] - 1
    tpot = np.median(decoding_ms / tokens)
    tpot_free = np.median((decoding_ms - waited_ms[multi]) / tokens)
    return Finding(
        "Prefill stalls decode",
        f"{len(stalling)} prefill steps stop the running decodes: {share:.0%} of the decoding requests' time is "
        f"spent waiting for other prompts' prefills (TPOT p50 {_ms(tpot)}, {_ms(tpot_free)} without).",
        f"{len(stalling)} of {len(prefill)} prefill steps ran while sequences decoded (mean "
        f"{stalled[stalled > 0].mean():.1f} sequences waiting, {_ms(float(stalling['step_ms'].mean()))} a step, "
        f"{float(stalling['prefill_tokens'].mean()):,.0f} prompt tokens); no step mixes prefill and decode "
        f"(no chunked prefill); {_basis(steps)}",
        "Turn on chunked prefill (ge.serve(chunked_prefill=True), vLLM's --enable-chunked-prefill, MindIE's "
        "SplitFuse) with a max_num_tokens budget that keeps each step short, so prompts join the decode steps "
        "in chunks; or separate prefill and decode instances (disaggregated serving).",
        at_stake)


def decode_tp_exposed(profile: Profile, steps: pd.DataFrame) -> Finding | None:
    """Tensor-parallel collectives no computation hides in the decode steps (tp > 1)."""
    decode = steps[steps["phase"] == "decode"]
    decode_ms = float(decode["step_ms"].sum())
    exposed_ms = float(decode["communication_ms"].sum())
    if not decode_ms > 0 or exposed_ms / decode_ms < DECODE_TP_MIN_SHARE:
        return None
    ops = profile.op_summary
    comm = profile.source.communication_rows()
    inside = _in_steps(pd.to_numeric(ops[_START], errors="coerce").to_numpy(float), decode) & comm
    types = ops.loc[inside, "OP Type"].astype(str).value_counts() if "OP Type" in ops else pd.Series(dtype=int)
    n = len(decode)
    total_ms = float(pd.to_numeric(ops.loc[inside, _DUR], errors="coerce").sum()) / 1e3
    at_stake = exposed_ms * 1e3 / len(steps)
    return Finding(
        "TP communication exposed in decode",
        f"{exposed_ms / decode_ms:.0%} of the decode steps' time is tensor-parallel communication with no "
        f"computation beside it ({_ms(exposed_ms / n)} a decode step).",
        f"{int(inside.sum() / n)} collectives per decode step taking {_ms(total_ms / n)}, of which "
        f"{_ms(exposed_ms / n)} with no kernel running, in {n} decode steps of {_ms(decode_ms / n)}; "
        + ", ".join(f"{t} x{c // n}" for t, c in types.items()) + f"; {_basis(steps)}",
        "Lower tp where the weights and the KV cache fit one device (a 7-8 B model does at tp=1 on 64 GB), keep "
        "the tp group inside one server (HCCS), raise the decode batch so each AllReduce carries more tokens, or "
        "overlap the AllReduce with the next matmul (vLLM-Ascend / MindIE communication overlap).",
        at_stake)


def serving_findings(profile: Profile, findings: list[Finding]) -> list[Finding]:
    """``findings`` (the training rules') of a serving run without the rules that do not apply to it, plus the
    serving causes; any other run's findings unchanged."""
    steps = profile.serving_steps
    if steps.empty:
        return findings
    causes = [f for f in (decode_memory_bound(profile, steps), kv_cache_too_small(profile, steps),
                          prefill_stalls_decode(profile, steps), decode_tp_exposed(profile, steps)) if f is not None]
    dropped = set(NOT_SERVING_RULES)
    if any(f.rule == "TP communication exposed in decode" for f in causes):
        dropped |= set(TP_REPLACED_RULES)
    return [f for f in findings if f.rule not in dropped] + causes
