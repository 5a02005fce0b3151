"""A serving run's tables (``ge.serve``): each request's latencies, each engine step's phase mix, KV-cache
use and time split, and the summary figures (percentiles, throughput, goodput under latency objectives).

TTFT is a request's first token less its arrival; TPOT the time between its first and last token over the
tokens after the first (``(finish - first_token) / (output_tokens - 1)``, vLLM's and MindIE's definition;
no value for a one-token output); end-to-end latency its finish less its arrival.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .intervals import covered_time

SERVING_REQUESTS = ["request_id", "arrival_us", "first_token_us", "finish_us", "ttft_ms", "tpot_ms", "e2e_ms",
                    "prompt_tokens", "output_tokens", "preemptions"]
SERVING_STEPS = ["step", "start_us", "end_us", "step_ms", "phase", "prefill_tokens", "prefill_seqs", "decode_seqs",
                 "batch_size", "computed_tokens", "preempted", "kv_blocks_used", "kv_blocks_free", "compute_ms",
                 "communication_ms", "host_ms"]
PERCENTILES = (50, 90, 99)


def serving_requests(rec: np.ndarray) -> pd.DataFrame:
    """One row per served request (``serving_request`` records), by request id."""
    if len(rec) == 0:
        return pd.DataFrame(columns=SERVING_REQUESTS)
    rec = rec[np.argsort(rec["request_id"], kind="stable")]
    arrival, first, finish = (rec[k].astype(np.int64) for k in ("arrival", "first_token", "finish"))
    out = rec["output_tokens"].astype(np.int64)
    tpot = np.where(out > 1, (finish - first) / np.maximum(out - 1, 1) / 1e6, np.nan)
    return pd.DataFrame({
        "request_id": rec["request_id"].astype(np.int64), "arrival_us": arrival / 1000.0,
        "first_token_us": first / 1000.0, "finish_us": finish / 1000.0, "ttft_ms": (first - arrival) / 1e6,
        "tpot_ms": tpot, "e2e_ms": (finish - arrival) / 1e6, "prompt_tokens": rec["prompt_tokens"].astype(np.int64),
        "output_tokens": out, "preemptions": rec["preemptions"].astype(np.int64)}, columns=SERVING_REQUESTS)


def serving_steps(rec: np.ndarray, task_start_ns: np.ndarray, task_end_ns: np.ndarray,
                  communication: np.ndarray) -> pd.DataFrame:
    """One row per engine step (``serving_step`` records): its phase mix, the new tokens its graphs compute
    (``computed_tokens``: its prompt tokens and decodes, plus the padding to the graphs' shape buckets), its
    KV-cache blocks, and its host span split into device compute (any non-collective task running), exposed
    communication (collectives with no compute beside them) and host (no device task: scheduling, launches,
    the host's wait)."""
    if len(rec) == 0:
        return pd.DataFrame(columns=SERVING_STEPS)
    rec = rec[np.argsort(rec["step"], kind="stable")]
    lo, hi = rec["start"].astype(np.int64), rec["end"].astype(np.int64)
    comm = np.asarray(communication, bool)
    s, e = task_start_ns.astype(np.int64), task_end_ns.astype(np.int64)
    compute = covered_time(s[~comm], e[~comm], lo, hi)
    busy = covered_time(s, e, lo, hi)
    prefill, decode = rec["prefill_seqs"].astype(np.int64), rec["decode_seqs"].astype(np.int64)
    phase = np.where(prefill > 0, np.where(decode > 0, "mixed", "prefill"), "decode")
    return pd.DataFrame({
        "step": rec["step"].astype(np.int64), "start_us": lo / 1000.0, "end_us": hi / 1000.0,
        "step_ms": (hi - lo) / 1e6, "phase": phase, "prefill_tokens": rec["prefill_tokens"].astype(np.int64),
        "prefill_seqs": prefill, "decode_seqs": decode, "batch_size": prefill + decode,
        "computed_tokens": rec["computed_tokens"].astype(np.int64),
        "preempted": rec["preempted"].astype(np.int64), "kv_blocks_used": rec["kv_blocks_used"].astype(np.int64),
        "kv_blocks_free": rec["kv_blocks_free"].astype(np.int64), "compute_ms": compute / 1e6,
        "communication_ms": (busy - compute) / 1e6, "host_ms": (hi - lo - busy) / 1e6}, columns=SERVING_STEPS)


def serving_summary(requests: pd.DataFrame, ttft_slo_ms: float | None = None,
                    tpot_slo_ms: float | None = None) -> pd.Series:
    """TTFT, TPOT and end-to-end percentiles, throughput over the span from the first arrival to the last
    finish, and goodput: the requests per second that met both objectives (one not given: always met; a
    one-token output has no TPOT and meets it)."""
    for name, v in (("ttft_slo_ms", ttft_slo_ms), ("tpot_slo_ms", tpot_slo_ms)):
        if v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0):
            raise ValueError(f"serving_summary: {name} must be a number of ms > 0 or None, got {v!r}")
    out: dict[str, float] = {"requests": float(len(requests))}
    if len(requests) == 0:
        return pd.Series(out, dtype=float)
    span_s = (requests["finish_us"].max() - requests["arrival_us"].min()) / 1e6
    for col in ("ttft_ms", "tpot_ms", "e2e_ms"):
        values = requests[col].dropna().to_numpy(float)
        for q in PERCENTILES:
            out[f"{col.removesuffix('_ms')}_p{q}_ms"] = float(np.percentile(values, q)) if len(values) else np.nan
    out["output_tokens_per_s"] = float(requests["output_tokens"].sum() / span_s) if span_s > 0 else np.nan
    out["requests_per_s"] = float(len(requests) / span_s) if span_s > 0 else np.nan
    good = np.ones(len(requests), bool)
    if ttft_slo_ms is not None:
        good &= requests["ttft_ms"].to_numpy(float) <= ttft_slo_ms
    if tpot_slo_ms is not None:
        tpot = requests["tpot_ms"].to_numpy(float)
        good &= np.isnan(tpot) | (tpot <= tpot_slo_ms)
    out["goodput_requests_per_s"] = float(good.sum() / span_s) if span_s > 0 else np.nan
    out["slo_attainment"] = float(good.mean())
    out["preemptions"] = float(requests["preemptions"].sum())
    return pd.Series(out)
