"""Profile.serving_requests / serving_steps / serving_summary: latencies from the step timestamps by hand,
the step split, continuous against static batching on one stream, preemptions, the summary figures."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import geprof_nb
from geprof_nb import ge
from helpers.geprof_testing import serve_profiled


def test_ttft_and_tpot_by_hand_from_the_step_timestamps(tmp_path):
    # two prompts at once, a third arriving 0.5 ms in, while their prefill runs: prefills go first, so it is
    # prefilled at the next step, then the three decode together until each has its tokens
    reqs = [ge.Request(0, 0.0, 32, 4), ge.Request(1, 0.0, 40, 3), ge.Request(2, 0.0005, 16, 2)]
    _, prof = serve_profiled(tmp_path, requests=reqs, max_batch_size=4)
    s, r = prof.serving_steps, prof.serving_requests.set_index("request_id")
    assert s["phase"].tolist() == ["prefill", "prefill", "decode", "decode", "decode"]
    assert s[["prefill_seqs", "prefill_tokens", "decode_seqs"]].values.tolist() == [
        [2, 72, 0], [1, 16, 0], [0, 0, 3], [0, 0, 2], [0, 0, 1]]
    # padded to the graphs' buckets: the two prompts to the longest (40) rounded up to 64, a batch of 2;
    # 16 to 64; 3 decodes to a batch of 4
    assert s["computed_tokens"].tolist() == [2 * 64, 64, 4, 2, 1]
    start, end = s["start_us"].iloc[0], s["end_us"].to_numpy()
    assert s["start_us"].iloc[0] < start + 500 < end[0]  # request 2 arrived during step 0
    first = {0: end[0], 1: end[0], 2: end[1]}
    finish = {0: end[4], 1: end[3], 2: end[2]}
    arrival = {0: start, 1: start, 2: start + 500}
    for k, req in enumerate(reqs):
        assert r.loc[k, "arrival_us"] == pytest.approx(arrival[k], abs=1e-3)
        assert r.loc[k, "first_token_us"] == first[k] and r.loc[k, "finish_us"] == finish[k]
        # float us at today's epoch are 0.25 us apart: the ms agree to 1e-3
        assert r.loc[k, "ttft_ms"] == pytest.approx((first[k] - arrival[k]) / 1000, abs=1e-3)
        assert r.loc[k, "tpot_ms"] == pytest.approx((finish[k] - first[k]) / 1000 / (req.output_len - 1), abs=1e-3)
        assert r.loc[k, "e2e_ms"] == pytest.approx((finish[k] - arrival[k]) / 1000, abs=1e-3)
        assert r.loc[k, "prompt_tokens"] == req.prompt_len and r.loc[k, "output_tokens"] == req.output_len


def test_the_step_split_adds_up_to_the_step(tmp_path):
    reqs = ge.requests(6, prompt_len=(16, 200), output_len=(2, 12), rate=None, seed=2)
    _, prof = serve_profiled(tmp_path, requests=reqs, max_batch_size=8, parallel=ge.Parallel(tp=2))
    s = prof.serving_steps
    total = s["compute_ms"] + s["communication_ms"] + s["host_ms"]
    assert np.allclose(total, s["step_ms"], atol=1e-6)
    assert (s["compute_ms"] > 0).all() and (s["communication_ms"] > 0).all() and (s["host_ms"] > 0).all()
    # the compute of a step is its device tasks' (the op_summary rows inside it) minus collectives
    op = prof.op_summary
    first = op[(op["Task Start Time(us)"] >= s["start_us"].iloc[0]) & (op["Task Start Time(us)"] < s["end_us"].iloc[0])]
    assert first["OP Type"].eq("PromptFlashAttention").sum() == 8  # one per layer of tiny-llama
    assert first["OP Type"].eq("IncreFlashAttention").sum() == 0


def test_continuous_batching_has_the_higher_throughput_on_one_stream(tmp_path):
    reqs = ge.requests(24, prompt_len=(32, 256), output_len=(4, 96), rate=None, seed=7)
    common = {"requests": reqs, "max_batch_size": 8}
    _, cont = serve_profiled(tmp_path / "continuous", **common)
    _, stat = serve_profiled(tmp_path / "static", scheduler="static", **common)
    c, s = cont.serving_summary(), stat.serving_summary()
    assert c["output_tokens_per_s"] > 1.2 * s["output_tokens_per_s"]
    assert c["requests_per_s"] > s["requests_per_s"]
    # at no worse latency: the static batch waits for its longest member before the next batch starts
    assert c["e2e_p50_ms"] < s["e2e_p50_ms"] and c["ttft_p50_ms"] < s["ttft_p50_ms"]
    # static batching admits only into an empty engine: every prefill step starts with no decodes running
    st = stat.serving_steps
    before = st["decode_seqs"].shift(1, fill_value=0)
    assert (before[st["phase"] == "prefill"].iloc[1:] > 0).all()  # the batch before it decoded to the end


def test_preemptions_appear_when_the_kv_cache_is_small(tmp_path):
    reqs = ge.requests(8, prompt_len=100, output_len=200, rate=None)
    _, big = serve_profiled(tmp_path / "big", requests=reqs, max_batch_size=8)
    _, small = serve_profiled(tmp_path / "small", requests=reqs, max_batch_size=8, kv_cache_blocks=12)
    assert big.serving_requests["preemptions"].sum() == 0
    assert small.serving_requests["preemptions"].sum() > 0
    assert small.serving_summary()["preemptions"] == small.serving_requests["preemptions"].sum()
    assert small.serving_summary()["e2e_p99_ms"] > big.serving_summary()["e2e_p99_ms"]


def test_summary_figures_by_hand(tmp_path):
    reqs = ge.requests(10, prompt_len=(16, 128), output_len=(1, 20), rate=500.0, seed=11)
    _, prof = serve_profiled(tmp_path, requests=reqs, max_batch_size=4)
    r = prof.serving_requests
    ttft_slo = float(r["ttft_ms"].median())
    tpot_slo = float(r["tpot_ms"].dropna().median())
    got = prof.serving_summary(ttft_slo_ms=ttft_slo, tpot_slo_ms=tpot_slo)
    span_s = (r["finish_us"].max() - r["arrival_us"].min()) / 1e6
    assert got["ttft_p90_ms"] == pytest.approx(np.percentile(r["ttft_ms"], 90))
    assert got["tpot_p99_ms"] == pytest.approx(np.percentile(r["tpot_ms"].dropna(), 99))
    assert got["output_tokens_per_s"] == pytest.approx(r["output_tokens"].sum() / span_s)
    assert got["requests_per_s"] == pytest.approx(10 / span_s)
    met = (r["ttft_ms"] <= ttft_slo) & (r["tpot_ms"].isna() | (r["tpot_ms"] <= tpot_slo))
    assert got["goodput_requests_per_s"] == pytest.approx(met.sum() / span_s)
    assert got["slo_attainment"] == pytest.approx(met.mean())
    with pytest.raises(ValueError, match="serving_summary: ttft_slo_ms must be a number of ms > 0 or None, got -5"):
        prof.serving_summary(ttft_slo_ms=-5)


def test_a_run_without_serving_has_the_tables_empty_with_their_columns(tmp_path):
    from helpers.geprof_testing import run_profiled_session
    prof = run_profiled_session(tmp_path, ge.models.mlp(batch_size=8), steps=1).profile
    assert prof.serving_requests.empty and "ttft_ms" in prof.serving_requests.columns
    assert prof.serving_steps.empty and "kv_blocks_free" in prof.serving_steps.columns
    assert prof.serving_summary()["requests"] == 0


def test_the_parquet_export_keeps_the_serving_tables(tmp_path):
    reqs = ge.requests(5, prompt_len=(16, 120), output_len=(2, 8), rate=None, seed=4)
    _, prof = serve_profiled(tmp_path, requests=reqs, max_batch_size=4)
    back = geprof_nb.load(prof.export(tmp_path / "pq", format="parquet"))
    assert len(prof.serving_requests) == 5 and len(prof.serving_steps) > 2
    pd.testing.assert_frame_equal(back.serving_requests, prof.serving_requests)
    pd.testing.assert_frame_equal(back.serving_steps, prof.serving_steps)
    pd.testing.assert_series_equal(back.serving_summary(ttft_slo_ms=50), prof.serving_summary(ttft_slo_ms=50))
    assert back.model_phases == prof.model_phases and set(prof.model_phases.values()) == {"prefill", "decode"}
