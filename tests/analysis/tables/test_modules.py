"""module_statistic: device time per module path and phase, checked against the op rows it rolls up."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from geprof_nb import ge
from geprof_nb.analysis.tables.modules import NO_MODULE, module_of, module_statistic
from helpers.llm_runs import run_llm


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """tiny-llama (8 layers) on one device, 2 steps."""
    return run_llm(tmp_path_factory.mktemp("tiny"), seq_len=256)


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory):
    """tiny-llama at tp2 pp2 dp2, 4 micro-batches, 2 steps."""
    return run_llm(tmp_path_factory.mktemp("hybrid"), parallel=ge.Parallel(tp=2, pp=2, dp=2, micro_batches=4),
                   seq_len=256)


@pytest.mark.parametrize("name, expected", [
    ("model/layers.12/self_attn/qkv_proj/MatMulV2", ("model/layers.12/self_attn/qkv_proj", "forward")),
    ("gradients/model/layers.12/self_attn/qkv_proj/MatMulV2_grad/MatMulV2_1",
     ("model/layers.12/self_attn/qkv_proj", "backward")),
    ("gradients/model/layers.0/mlp/gate_up_proj/Identity_3_grad/HcomAllReduce", ("model/layers.0/mlp/gate_up_proj",
                                                                                 "backward")),
    ("gradients/model/layers.0/input_layernorm/weight_grad_accumulation/Cast_1",
     ("model/layers.0/input_layernorm", "backward")),
    ("gradients/lm_head/MatMulV2_grad/MatMulV2", ("lm_head", "backward")),
    ("gradients/dp_bucket_1/HcomAllReduce", ("gradients/dp_bucket_1", "backward")),
    ("AdamW/update_model/layers.3/mlp/down_proj/weight/ApplyAdamW", ("model/layers.3/mlp/down_proj", "optimizer")),
    ("AdamW/update_lm_head/weight/ApplyAdamW", ("lm_head", "optimizer")),
    ("pipeline/recv_backward/HcomReceive_2", ("pipeline/recv_backward", "backward")),
    ("pipeline/send_forward/HcomSend", ("pipeline/send_forward", "forward")),
    ("loss/HcomAllReduce_11", ("loss", "forward")),
    ("aclnnMm_MatMulCommon_MatMulV2", (NO_MODULE, "N/A")),
])
def test_an_op_name_gives_its_module_and_phase(name, expected):
    assert module_of(name) == expected


def _under(ops: pd.DataFrame, prefix: str) -> pd.DataFrame:
    return ops[ops["Op Name"].str.startswith(prefix)]


def test_each_layers_rows_are_the_sums_of_the_op_rows_under_it(tiny):
    ops = tiny.op_summary
    table = tiny.module_statistic(depth=2).set_index(["Module", "Phase"])
    for layer in range(8):
        for phase, prefix in (("forward", f"model/layers.{layer}/"), ("backward", f"gradients/model/layers.{layer}/"),
                              ("optimizer", f"AdamW/update_model/layers.{layer}/")):
            rows = _under(ops, prefix)
            row = table.loc[(f"model/layers.{layer}", phase)]
            assert row["Count"] == len(rows) > 0
            assert row["Total Time(us)"] == pytest.approx(rows["Task Duration(us)"].sum(), abs=1e-3)
            assert row["Share(%)"] == pytest.approx(100 * rows["Task Duration(us)"].sum()
                                                    / ops["Task Duration(us)"].sum())
            assert row["Communication Time(us)"] == 0  # one device: no collective
    # 2 steps of 18 forward op tasks a layer: 6 weight casts, 2 RmsNorms, 4 MatMulV2s, SplitVD, ApplyRotaryPosEmb,
    # FlashAttentionScore, SwiGlu, 2 residual Adds
    assert table.loc[("model/layers.0", "forward"), "Count"] == 2 * 18
    assert table["Count"].sum() == len(ops) and table["Share(%)"].sum() == pytest.approx(100.0)


def test_a_deeper_cut_splits_a_layer_into_attention_and_mlp(tiny):
    ops = tiny.op_summary
    deep = tiny.module_statistic(depth=3)
    mine = deep[deep["Module"].str.startswith("model/layers.5/") & (deep["Phase"] == "backward")]
    attn = mine.set_index("Module").loc["model/layers.5/self_attn"]
    rows = _under(ops, "gradients/model/layers.5/self_attn/")
    assert attn["Count"] == len(rows) and attn["Total Time(us)"] == pytest.approx(rows["Task Duration(us)"].sum(),
                                                                                  abs=1e-3)
    assert {"model/layers.5/self_attn", "model/layers.5/mlp", "model/layers.5/input_layernorm"} <= set(mine["Module"])
    layer = tiny.module_statistic(depth=2).set_index(["Module", "Phase"]).loc[("model/layers.5", "backward")]
    assert mine["Count"].sum() == layer["Count"]
    assert mine["Total Time(us)"].sum() == pytest.approx(layer["Total Time(us)"], abs=1e-2)
    top = tiny.module_statistic(depth=1)
    assert set(top["Module"]) == {"model", "lm_head", "loss"} and top["Share(%)"].sum() == pytest.approx(100.0)


def test_a_tensor_parallel_layer_counts_its_collectives(hybrid):
    rank0 = hybrid.rank(0)
    ops = rank0.op_summary
    table = rank0.module_statistic(2).set_index(["Module", "Phase"])
    fwd = _under(ops, "model/layers.0/")
    hcom = fwd[fwd["OP Type"].str.startswith("Hcom")]
    # the row-parallel o_proj's and down_proj's AllReduce, 4 micro-batches, 2 steps
    assert len(hcom) == 2 * 4 * 2
    assert table.loc[("model/layers.0", "forward"), "Communication Time(us)"] == pytest.approx(
        hcom["Task Duration(us)"].sum(), abs=1e-3)
    sends = _under(ops, "pipeline/send_forward/")
    assert table.loc[("pipeline/send_forward", "forward"), "Count"] == len(sends) == 2 * 4
    both = hybrid.module_statistic(2)
    assert list(both.columns[:2]) == ["Rank", "Module"] and set(both["Rank"]) == set(range(8))
    per_rank = both.groupby("Rank")["Share(%)"].sum()
    assert np.allclose(per_rank.to_numpy(), 100.0)
    assert (both[both["Rank"] == 0].drop(columns="Rank").reset_index(drop=True)
            .equals(rank0.module_statistic(2)))


@pytest.mark.parametrize("depth, error, text", [
    (0, ValueError, "depth 0 is not valid; accepted: a positive integer"),
    (2.0, TypeError, "depth 2.0 is not valid; accepted: a positive integer"),
    (True, TypeError, "depth True is not valid"),
])
def test_a_bad_depth_is_refused_naming_it(tiny, depth, error, text):
    with pytest.raises(error, match=text.replace("(", r"\(").replace(")", r"\)")):
        tiny.module_statistic(depth)


def test_op_names_without_a_module_path_are_one_row():
    ops = pd.DataFrame({"Op Name": ["aclnnMm_MatMulCommon_MatMulV2", "hcom_allReduce__360_0_1", "Conv2D1"],
                        "Task Duration(us)": [3.0, 5.0, 2.0]})
    table = module_statistic(ops, np.array([False, True, False]), depth=2)
    assert table.to_dict("records") == [{"Module": NO_MODULE, "Phase": "N/A", "Count": 3, "Total Time(us)": 10.0,
                                         "Avg Time(us)": 3.333, "Communication Time(us)": 5.0, "Share(%)": 100.0}]
    assert module_statistic(ops.iloc[:0], np.zeros(0, bool)).empty
