"""MFU: PaLM's model FLOPs of a step against the devices' cube peak, derived by hand from the recorded facts."""

from __future__ import annotations

import numpy as np
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis.tables.mfu import ModelFacts, model_facts
from helpers.llm_runs import run_llm
from helpers.real_data import PYTORCH_TEXT

#: The 910B preset's cube: 16 x 16 x 16 MACs x 2 FLOPs a cycle, 24 AI Cores at 1.8 GHz.
PEAK_910B = 8192 * 24 * 1800e6


def _period_us(breakdown, step: int) -> float:
    row = breakdown[breakdown["Step"] == step].iloc[0]
    return float(row["Computing"] + row["Communication(Not Overlapped)"] + row["Free"])


def test_tiny_llamas_mfu_by_hand(tmp_path):
    p = run_llm(tmp_path, seq_len=256)
    model = p.info["parallel"]["model"]
    assert (model["active_parameters"], model["layers"], model["hidden"]) == (6_066_432, 8, 256)
    table = p.mfu()
    assert list(table["Step"]) == [1, 2] and list(table["Whole Period"]) == [False, True]
    flops = 256 * (6 * 6_066_432 + 12 * 8 * 256 * 256)  # 256 tokens a step (1 x 256, one micro-batch, dp 1)
    for _, row in table.iterrows():
        t = _period_us(p.step_breakdown, int(row["Step"])) * 1e-6
        assert row["Tokens"] == 256 and row["Model FLOPs"] == flops and row["Devices"] == 1
        assert row["Step Time(us)"] == pytest.approx(t * 1e6, abs=1e-3)
        assert row["Peak TFLOPS per Device"] == pytest.approx(PEAK_910B / 1e12)
        assert row["Achieved TFLOPS per Device"] == pytest.approx(flops / t / 1e12)
        assert row["MFU(%)"] == pytest.approx(100 * flops / t / PEAK_910B)


@pytest.mark.slow
def test_llama2_7b_at_tp2_pp2_dp2_over_the_worlds_devices(tmp_path):
    c = run_llm(tmp_path, "llama2-7b", parallel=ge.Parallel(tp=2, pp=2, dp=2, micro_batches=4))
    model = c.rank(0).info["parallel"]["model"]
    assert model["active_parameters"] == model["parameters"] == 6_738_415_616
    tokens = 1 * 4096 * 4 * 2  # micro-batch size x sequence x micro-batches x dp
    flops = tokens * (6 * 6_738_415_616 + 12 * 32 * 4096 * 4096)
    table = c.mfu()
    for _, row in table.iterrows():
        step = int(row["Step"])
        t = max(_period_us(p.step_breakdown, step) for p in c.ranks.values()) * 1e-6  # the slowest rank's step
        assert (row["Tokens"], row["Model FLOPs"], row["Devices"]) == (tokens, flops, 8)
        assert row["MFU(%)"] == pytest.approx(100 * flops / (8 * t) / PEAK_910B)
    # a rank's own MFU: the same FLOPs over the same 8 devices, in its own step time
    rank3 = c.rank(3).mfu()
    t3 = _period_us(c.rank(3).step_breakdown, 2) * 1e-6
    assert rank3["MFU(%)"].iloc[1] == pytest.approx(100 * flops / (8 * t3) / PEAK_910B)
    assert 20 < float(table["MFU(%)"].iloc[1]) < 80  # a plausible training step, not a unit slip


def test_facts_can_be_given_and_bad_ones_are_refused():
    real = geprof_nb.load(PYTORCH_TEXT / "level0" / "rank0_ascend_pt")
    with pytest.raises(ValueError, match="MFU needs the model's layers, hidden, seq_len, micro_batch_size, "
                                         "active_parameters: the run's info.json has no parallel.model"):
        real.mfu()
    model = dict(active_parameters=25_557_032, layers=50, hidden=2048, seq_len=1, micro_batch_size=32)
    with pytest.raises(ValueError, match="needs its ai_core_num, which the run's device facts .* give as None; "
                                         "pass peak_flops="):
        real.mfu(model)
    table = real.mfu(model, peak_flops=256e12)
    t = _period_us(real.step_breakdown, int(table["Step"].iloc[0])) * 1e-6
    flops = 32 * (6 * 25_557_032 + 12 * 50 * 2048)
    assert table["MFU(%)"].iloc[0] == pytest.approx(100 * flops / t / 256e12)
    with pytest.raises(ValueError, match="peak_flops -1 is not valid; accepted: a positive number of FLOP/s"):
        real.mfu(model, peak_flops=-1)
    with pytest.raises(ValueError, match="model fact layers 0 is not valid; accepted: a positive integer"):
        model_facts({}, {**model, "layers": 0})
    with pytest.raises(ValueError, match="model fact training 'yes' is not valid; accepted: true or false"):
        model_facts({}, {**model, "training": "yes"})


def test_a_forward_only_step_counts_a_third_of_the_training_flops():
    train = ModelFacts(1000, 2, 64, 128, 1)
    infer = ModelFacts(1000, 2, 64, 128, 1, training=False)
    assert train.flops_per_token == 6 * 1000 + 12 * 2 * 64 * 128
    assert np.isclose(3 * infer.flops_per_token, train.flops_per_token)
