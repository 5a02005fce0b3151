"""Device what-ifs: a preset with changed fields (``geprof.device`` / ``--device``)."""

from __future__ import annotations

import json

import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.ge.device import PRESETS, get_device


def run_on(tmp_path, device: str):
    opts = {"output": str(tmp_path), "task_trace": "on", "training_trace": "on"}
    assert ge.GEInitialize({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": json.dumps(opts),
                            "geprof.clock": "virtual", "geprof.device": device}) == ge.SUCCESS, ge.GEGetErrorMsg()
    s = ge.Session()
    s.add_graph(1, ge.models.mlp(batch_size=256, in_features=1024, hidden=(4096, 4096)))
    for _ in range(2):
        s.run_graph(1)
    ge.GEFinalize()
    return geprof_nb.load(tmp_path)


def test_half_the_cores_and_half_the_hbm_make_matmuls_slower(tmp_path):
    base = run_on(tmp_path / "base", "Ascend910B")
    what_if = run_on(tmp_path / "what_if", "Ascend910B:ai_core_num=12,hbm_bandwidth=0.8e12")
    assert what_if.device["ai_core_num"] == 12 and what_if.device["hbm_bandwidth"] == 0.8e12
    assert what_if.device["name"] == "Ascend910B:ai_core_num=12,hbm_bandwidth=0.8e12"

    def matmul_us(p) -> float:
        ops = p.op_summary
        return float(ops.loc[ops["OP Type"].astype(str).str.startswith("MatMul"), "Task Duration(us)"].sum())

    assert matmul_us(what_if) > 1.5 * matmul_us(base)
    blocks = what_if.op_summary.loc[what_if.op_summary["Task Type"] == "AI_CORE", "Block Num"]
    assert blocks.max() <= 12  # tiling follows the core count


def test_spec_keeps_the_preset_for_unchanged_fields():
    d = get_device("Ascend910A:roce_bandwidth=50e9")
    assert d.roce_bandwidth == 50e9 and d.ai_core_num == PRESETS["Ascend910A"].ai_core_num
    assert d.stars is False and d.soc_version == "Ascend910A"


@pytest.mark.parametrize("spec, message", [
    ("Ascend310", "unknown device 'Ascend310'; accepted: Ascend910B, Ascend910A, or a preset with changes"),
    ("Ascend910B:name=x", "'name' is not a device field"),
    ("Ascend910B:ai_core_num", "'ai_core_num' is not a device field"),
    ("Ascend910B:ai_core_num=many", "ai_core_num='many' is not a number; accepted: a positive integer"),
    ("Ascend910B:hbm_bandwidth=0", "hbm_bandwidth='0' must be positive"),
])
def test_bad_specs_are_refused_naming_the_field(spec, message):
    with pytest.raises(ValueError) as err:
        get_device(spec)
    assert message in str(err.value)
    assert ge.GEInitialize({"geprof.device": spec}) == ge.PARAM_INVALID
    assert "geprof.device" in ge.GEGetErrorMsg() and message in ge.GEGetErrorMsg()
