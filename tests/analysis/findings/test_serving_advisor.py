"""The advisor's serving causes on small served runs: each rule found where its cause is and not where it is
not, its figures derived here from the serving tables (and the op rows inside the steps), and the training rules
that do not apply to a serving run left out."""

from __future__ import annotations

import numpy as np
import pytest

from geprof_nb import ge
from geprof_nb.analysis.findings.finding import Finding
from geprof_nb.analysis.findings.serving_advisor import serving_findings
from geprof_nb.analysis.tables.roofline import device_roofs, row_bounds
from helpers.geprof_testing import run_profiled_session, serve_profiled

START = "Task Start Time(us)"


def _rows(advice, rule):
    return advice[advice["Rule"] == rule]


def _inside(prof, steps):
    """op_summary rows whose start lies in one of ``steps``' spans (a loop: the module's searchsorted aside)."""
    start = prof.op_summary[START].to_numpy(float)
    keep = np.zeros(len(start), bool)
    for lo, hi in zip(steps["start_us"], steps["end_us"]):
        keep |= (start >= lo) & (start < hi)
    return keep


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("serving_advice")
    stream = ge.requests(12, prompt_len=(32, 256), output_len=(4, 40), rate=None, seed=7)
    stalls = ge.requests(16, prompt_len=1500, output_len=30, rate=400.0, seed=3)
    kv = ge.requests(8, prompt_len=100, output_len=200, rate=None)
    return {
        "tiny": serve_profiled(root / "tiny", requests=stream, max_batch_size=8)[1],
        "tp2": serve_profiled(root / "tp2", requests=stream, max_batch_size=8, parallel=ge.Parallel(tp=2))[1],
        "llama": serve_profiled(root / "llama", model="llama3-8b", max_batch_size=4,
                                requests=ge.requests(4, prompt_len=128, output_len=8, rate=None, seed=1))[1],
        "kv_small": serve_profiled(root / "kv_small", requests=kv, max_batch_size=8, kv_cache_blocks=12)[1],
        "kv_big": serve_profiled(root / "kv_big", requests=kv, max_batch_size=8)[1],
        "stalls": serve_profiled(root / "stalls", requests=stalls, max_batch_size=16)[1],
        "chunked": serve_profiled(root / "chunked", requests=stalls, max_batch_size=16, chunked_prefill=True)[1],
    }


def _decode_floor_us(prof):
    """The decode steps' HBM bytes over the device's bandwidth, and their compute time (us)."""
    s = prof.serving_steps
    decode = s[s["phase"] == "decode"]
    roofs = device_roofs(prof.device)
    work = prof.source.op_work(roofs)
    rows = _inside(prof, decode) & prof.op_summary["Task Type"].astype(str).isin(["AI_CORE", "AI_VECTOR_CORE",
                                                                                    "MIX_AIC", "MIX_AIV"]).to_numpy()
    floor = float(work["Bytes"][rows].sum()) / prof.device["hbm_bandwidth"] * 1e6
    return floor, float(decode["compute_ms"].sum()) * 1e3


def test_decode_memory_bound_on_llama3_8b(runs):
    prof = runs["llama"]
    floor, compute = _decode_floor_us(prof)
    assert floor > 0.3 * compute  # the weights' bytes set the pace: the HBM at over a third of its bandwidth
    row = _rows(prof.advise(), "Decode memory-bound")
    assert len(row) == 1
    steps = prof.serving_steps
    assert row["Time at stake (us)"].iloc[0] == pytest.approx((compute - floor) / len(steps), rel=1e-3)
    n = int((steps["phase"] == "decode").sum())
    assert f"{n} decode steps" in row["Evidence"].iloc[0]
    assert f"a floor of {floor / n / 1e3:,.3f} ms at 1,600 GB/s" in row["Evidence"].iloc[0]


def test_decode_matmuls_are_not_low_cube_utilisation(runs):
    # the decode MatMuls leave the cube idle (mac_ratio ~0.02) because they wait on the weights' bytes: the
    # roofline's bound is memory, so the cube rule (80% utilisation) promises nothing for them
    prof = runs["llama"]
    ops = prof.op_summary
    decode = _inside(prof, prof.serving_steps[prof.serving_steps["phase"] == "decode"])
    matmul = decode & (ops["OP Type"].astype(str) == "MatMulV2").to_numpy()
    assert matmul.sum() > 0 and (ops["aic_mac_ratio"][matmul] < 0.1).all()
    roofs = device_roofs(prof.device)
    assert set(row_bounds(ops, prof.source.op_work(roofs), roofs)[matmul]) == {"memory"}
    advice = prof.advise()
    assert _rows(advice, "Low cube utilisation").empty and len(_rows(advice, "Decode memory-bound")) == 1


def test_no_decode_memory_bound_where_fixed_costs_set_the_pace(runs):
    # tiny-llama's decode moves a few MB a step: its kernels' launch and start-up costs, not the bytes, set its time
    prof = runs["tiny"]
    floor, compute = _decode_floor_us(prof)
    assert 0 < floor < 0.3 * compute
    assert _rows(prof.advise(), "Decode memory-bound").empty


def test_kv_cache_too_small(runs):
    prof = runs["kv_small"]
    s, r = prof.serving_steps, prof.serving_requests
    preemptions = int(r["preemptions"].sum())
    assert preemptions > 0
    recomputed = int(s["prefill_tokens"].sum() - r["prompt_tokens"].sum())
    assert recomputed > 0
    prefill_ms = s.loc[s["prefill_tokens"] > 0, "step_ms"].sum()
    row = _rows(prof.advise(), "KV cache too small")
    assert len(row) == 1
    expected = prefill_ms * 1e3 * recomputed / s["prefill_tokens"].sum() / len(s)
    assert row["Time at stake (us)"].iloc[0] == pytest.approx(expected, abs=1e-3)
    assert f"{preemptions} preemptions" in row["Finding"].iloc[0]
    assert f"{recomputed:,} tokens prefilled again" in row["Finding"].iloc[0]
    assert "the cache holds 12 blocks" in row["Evidence"].iloc[0]
    assert _rows(runs["kv_big"].advise(), "KV cache too small").empty


def test_prefill_stalls_decode_without_chunked_prefill(runs):
    prof = runs["stalls"]
    s, r = prof.serving_steps, prof.serving_requests
    assert not (s["phase"] == "mixed").any()
    waited = np.zeros(len(r))
    stalling = []
    for step in s[s["phase"] == "prefill"].itertuples():
        decoding = ((r["first_token_us"] <= step.start_us) & (r["finish_us"] > step.start_us)).to_numpy()
        waited += decoding * step.step_ms
        if decoding.any():
            stalling.append(step.step_ms)
    decoding_ms = (r["finish_us"] - r["first_token_us"]).to_numpy() / 1e3
    share = waited.sum() / decoding_ms.sum()  # every request has 30 output tokens
    assert share > 0.10
    row = _rows(prof.advise(), "Prefill stalls decode")
    assert len(row) == 1
    assert row["Time at stake (us)"].iloc[0] == pytest.approx(sum(stalling) * 1e3 / len(s), abs=1e-3)
    tpot_free = np.median((decoding_ms - waited) / 29)
    assert f"{len(stalling)} prefill steps stop the running decodes: {share:.0%}" in row["Finding"].iloc[0]
    assert f"{tpot_free:,.3f} ms without" in row["Finding"].iloc[0]
    assert np.median(decoding_ms / 29) == pytest.approx(r["tpot_ms"].median(), abs=1e-4)  # float us near 1.7e15


def test_another_graphs_steps_are_no_stall(runs):
    # the engine steps run back to back, yet the step figure finds outliers: the long gaps before a graph's
    # iterations hold the other graphs' steps (prefills between decodes), which the one-off stall rule would
    # call stalls
    prof = runs["stalls"]
    s = prof.serving_steps
    assert np.allclose(s["start_us"].to_numpy()[1:], s["end_us"].to_numpy()[:-1], atol=1e-3)
    assert prof.step_split.outlier_steps
    assert _rows(prof.advise(), "One-off stall").empty


def test_chunked_prefill_has_no_prefill_stall(runs):
    prof = runs["chunked"]
    assert (prof.serving_steps["phase"] == "mixed").any()
    assert _rows(prof.advise(), "Prefill stalls decode").empty


def test_tp_communication_exposed_in_decode(runs):
    prof = runs["tp2"]
    s = prof.serving_steps
    decode = s[s["phase"] == "decode"]
    share = decode["communication_ms"].sum() / decode["step_ms"].sum()
    assert share > 0.05
    advice = prof.advise()
    row = _rows(advice, "TP communication exposed in decode")
    assert len(row) == 1
    assert row["Time at stake (us)"].iloc[0] == pytest.approx(decode["communication_ms"].sum() * 1e3 / len(s),
                                                              abs=1e-3)
    assert row["Finding"].iloc[0].startswith(f"{share:.0%} of the decode steps' time")
    comm = prof.source.communication_rows() & _inside(prof, decode)
    assert f"{int(comm.sum() / len(decode))} collectives per decode step" in row["Evidence"].iloc[0]
    # the run-wide communication finding says the same time less precisely: it goes
    assert _rows(advice, "Communication not overlapped with compute").empty
    tp1 = runs["tiny"]
    assert (tp1.serving_steps["communication_ms"] == 0).all()
    assert _rows(tp1.advise(), "TP communication exposed in decode").empty


def test_training_rules_that_do_not_apply_to_serving_are_left_out(runs, tmp_path):
    advice = runs["tiny"].advise()
    assert _rows(advice, "Large Data Aug Bound").empty and _rows(advice, "Many tiny kernels").empty
    found = [Finding("Large Data Aug Bound", "", "", "", 1.0), Finding("Many tiny kernels", "", "", "", 1.0),
             Finding("One-off stall", "", "", "", 1.0), Finding("Memory-bound ops", "", "", "", 1.0)]
    assert [f.rule for f in serving_findings(runs["tiny"], found)] == ["Memory-bound ops"]
    # a run without serving steps keeps every finding, these included
    training = run_profiled_session(tmp_path, ge.models.mlp(batch_size=8), steps=1).profile
    assert serving_findings(training, found) == found
