"""The roofline: FLOPs, bytes, intensity, bound and efficiency derived by hand from the device preset's numbers
and the cost model's rules; efficiency <= 1 on the zoo; real ArithmeticUtilization rows read by hand."""

from __future__ import annotations

import csv
import zlib

import numpy as np
import pandas as pd
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis.tables.roofline import COLUMNS, TYPE_COLUMNS, device_roofs
from helpers.geprof_testing import run_profiled_session
from helpers.real_data import COMPUTE_ADVICE, PYTORCH_TEXT

#: The Ascend910B preset: 24 AI Cores and 48 AI Vector cores at 1800 MHz, HBM 1.6 TB/s.
CUBE_910B = 16 * 16 * 16 * 2 * 24 * 1800e6  # 353.89 TFLOP/s
VECTOR_910B = 128 * 48 * 1800e6  # 11.06 TFLOP/s
HBM_910B = 1.6e12
M, K, N = 1024, 2048, 4096


def _l2_hit_rate(op_type: str) -> float:
    """The cost model's L2 hit rate of a working set within half the L2 (ge/device.py ``l2_hit_rate``):
    0.9 x (0.92 + 0.08 x the op type's stable unit number)."""
    return 0.9 * (0.92 + 0.08 * (zlib.crc32(("l2" + op_type).encode()) % 1000) / 1000)


@pytest.fixture(scope="module")
def matmul_add(tmp_path_factory):
    g = ge.Graph("roofline")
    mm = g.op("MatMul", [g.data("a", (M, K)), g.data("b", (K, N))], name="mm")
    g.output(g.op("Add", [mm, g.data("c", (M, N))], name="add"))
    return run_profiled_session(tmp_path_factory.mktemp("roofline"), g, steps=3).profile


def test_matmul_and_add_by_hand(matmul_add):
    p = matmul_add
    table = p.roofline.set_index("Op Name")
    assert list(p.roofline.columns) == COLUMNS
    durations = p.op_summary.groupby("Op Name")["Task Duration(us)"].sum()

    mm = table.loc["mm"]
    flops = 2 * M * N * K  # 17,179,869,184 a step
    gm = (M * K + K * N + M * N) * 2  # fp16 inputs read once, the output written once
    hbm = gm * (1 - _l2_hit_rate("MatMul"))
    assert (mm["OP Type"], mm["Task Type"], mm["Count"]) == ("MatMul", "AI_CORE", 3)
    assert mm["FLOPs"] == mm["Cube FLOPs"] == 3 * flops and mm["Vector FLOPs"] == 0
    assert mm["GM Bytes"] == 3 * gm
    assert mm["Bytes"] == pytest.approx(3 * hbm)
    assert mm["Arithmetic Intensity(FLOP/B)"] == pytest.approx(flops / hbm)  # ~5,170 FLOP/B
    assert mm["Bound"] == "compute"  # flops / CUBE_910B = 48.5 us against hbm / HBM_910B = 2.1 us
    assert mm["Compute Roof TFLOP/s"] == mm["Attainable TFLOP/s"] == pytest.approx(CUBE_910B / 1e12)
    assert mm["Duration(us)"] == pytest.approx(durations["mm"])
    assert mm["Achieved TFLOP/s"] == pytest.approx(3 * flops / (durations["mm"] * 1e-6) / 1e12)
    assert mm["Achieved GB/s"] == pytest.approx(3 * hbm / (durations["mm"] * 1e-6) / 1e9)
    assert mm["Roofline Time(us)"] == pytest.approx(3 * flops / CUBE_910B * 1e6)
    assert mm["Efficiency"] == pytest.approx(3 * flops / CUBE_910B / (durations["mm"] * 1e-6))
    assert 0.5 < mm["Efficiency"] < 1

    add = table.loc["add"]
    ops = M * N  # one vector operation per output element
    gm = 3 * M * N * 2  # two fp16 inputs read, one output written
    hbm = gm * (1 - _l2_hit_rate("Add"))
    assert (add["Task Type"], add["Cube FLOPs"], add["Vector FLOPs"]) == ("AI_VECTOR_CORE", 0, 3 * ops)
    assert add["GM Bytes"] == 3 * gm and add["Bytes"] == pytest.approx(3 * hbm)
    assert add["Arithmetic Intensity(FLOP/B)"] == pytest.approx(ops / hbm)  # ~1 FLOP/B
    assert add["Bound"] == "memory"  # ops / VECTOR_910B = 0.38 us against hbm / HBM_910B = 2.6 us
    assert add["Compute Roof TFLOP/s"] == pytest.approx(VECTOR_910B / 1e12)
    assert add["Attainable TFLOP/s"] == pytest.approx(ops / hbm * HBM_910B / 1e12)  # intensity x bandwidth
    assert add["Efficiency"] == pytest.approx(3 * hbm / HBM_910B / (durations["add"] * 1e-6))
    assert add["Efficiency"] == pytest.approx(add["Achieved GB/s"] * 1e9 / HBM_910B)
    assert p.roofline.iloc[0]["Op Name"] == "mm"  # longest first

    by_type = p.roofline_by_type.set_index("OP Type")
    assert list(p.roofline_by_type.columns) == TYPE_COLUMNS
    assert by_type.loc["MatMul", "Ops"] == 1 and by_type.loc["MatMul", "FLOPs"] == 3 * flops
    assert by_type.loc["Add", "Efficiency"] == pytest.approx(add["Efficiency"])
    roofs = p.roofline.attrs["roofs"]
    assert (roofs.chip, roofs.cube_flops, roofs.vector_flops, roofs.hbm_bandwidth, roofs.assumed) == (
        "Ascend910B2", CUBE_910B, VECTOR_910B, HBM_910B, ())


def test_910a_runs_vector_work_on_its_32_ai_cores(tmp_path):
    roofs = device_roofs({"soc_version": "Ascend910A", "ai_core_num": 32, "aiv_num": 0, "aic_frequency": 1000,
                          "hbm_bandwidth": 1.2e12})
    assert (roofs.cube_flops, roofs.vector_flops, roofs.assumed) == (8192 * 32 * 1e9, 128 * 32 * 1e9, ())
    # an imported A2 run with no device facts: every fact from the 910B2 row of the chip table, and said
    roofs = device_roofs({"chip_family": "A2"})
    assert (roofs.chip, roofs.cube_flops, roofs.hbm_bandwidth) == ("Ascend910B2", CUBE_910B, HBM_910B)
    assert roofs.assumed == ("the chip", "ai_core_num", "aic_frequency", "aiv_num", "hbm_bandwidth")
    assert "not in the run's files" in roofs.note()


@pytest.mark.parametrize("device", ["Ascend910B", "Ascend910A"])
@pytest.mark.parametrize("build", [
    lambda: ge.models.mlp(),
    lambda: ge.models.mlp(dtype="float32"),
    lambda: ge.models.resnet50(batch_size=8),
    lambda: ge.models.bert(layers=2, batch_size=8),
    lambda: ge.models.llm("tiny-llama"),
], ids=["mlp", "mlp-fp32", "resnet50", "bert", "tiny-llama"])
def test_efficiency_is_at_most_one_on_the_zoo(tmp_path, device, build):
    p = run_profiled_session(tmp_path, build(), steps=2, device=device).profile
    for table in (p.roofline, p.roofline_by_type):
        assert len(table) > 3
        assert (table["Efficiency"] > 0).all() and (table["Efficiency"] <= 1).all(), \
            table.nlargest(3, "Efficiency")[["OP Type", "Efficiency"]]
        assert (table["Achieved TFLOP/s"] <= table["Attainable TFLOP/s"] * (1 + 1e-12)).all()
        assert (table["Achieved GB/s"] * 1e9 <= p.roofline.attrs["roofs"].hbm_bandwidth * (1 + 1e-12)).all()
    kinds = set(p.op_summary.loc[p.op_summary["Task Type"].isin(["AI_CORE", "AI_VECTOR_CORE", "MIX_AIC"]),
                                 "Op Name"])
    assert set(p.roofline["Op Name"]) == kinds  # every AI Core / AI Vector Core op, nothing else


def _csv_rows(name: str) -> list[dict[str, str]]:
    with open(COMPUTE_ADVICE / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", newline="") as f:
        return [r for r in csv.DictReader(f) if r["Name"] == name]


def test_real_arithmetic_utilization_rows_by_hand():
    p = geprof_nb.load(COMPUTE_ADVICE)
    table = p.roofline.set_index("Op Name")
    rows = _csv_rows("MatMul91")  # 4096x12288 @ 12288x4608 fp16: aic_cube_fops 473,250,242,560, 1478.18 us
    fops = sum(float(r["aic_cube_fops"]) for r in rows)
    dur = sum(float(r["Duration(us)"]) for r in rows)
    mm = table.loc["MatMul91"]
    assert (mm["Count"], mm["FLOPs"], mm["Duration(us)"]) == (len(rows), fops, pytest.approx(dur))
    assert mm["Achieved TFLOP/s"] == pytest.approx(fops / (dur * 1e-6) / 1e12)  # ~320 TFLOP/s
    # no device facts beside the file: the 910B2's cube peak, assumed; no Memory group: no bytes
    assert mm["Compute Roof TFLOP/s"] == pytest.approx(CUBE_910B / 1e12)
    assert mm["Efficiency"] == pytest.approx(fops / CUBE_910B / (dur * 1e-6))  # ~0.905
    assert np.isnan(mm["Bytes"]) and np.isnan(mm["Arithmetic Intensity(FLOP/B)"]) and mm["Bound"] == ""
    assert mm["Estimated"] == "no bytes (compute roof only)"
    cast = _csv_rows("Cast66")  # an AI Vector Core op: aiv_vector_fops
    assert table.loc["Cast66", "Vector FLOPs"] == sum(float(r["aiv_vector_fops"]) for r in cast)
    assert table.loc["Cast66", "Compute Roof TFLOP/s"] == pytest.approx(VECTOR_910B / 1e12)
    notes = " ".join(p.roofline.attrs["notes"])
    assert "the chip, ai_core_num, aic_frequency, aiv_num, hbm_bandwidth not in the run's files" in notes
    assert "*_cube_fops" in notes
    assert not set(table["Task Type"]) - {"AI_CORE", "AI_VECTOR_CORE", "MIX_AIV"}  # no HCCL, AI_CPU, DSA rows


def test_a_run_without_fops_or_bytes_gives_empty_tables_with_their_columns():
    p = geprof_nb.load(PYTORCH_TEXT / "level2" / "rank0_ascend_pt")  # PipeUtilization: no FLOPs, no bytes
    assert p.roofline.empty and list(p.roofline.columns) == COLUMNS
    assert p.roofline_by_type.empty and list(p.roofline_by_type.columns) == TYPE_COLUMNS


def test_the_parquet_export_keeps_the_roofline(matmul_add, tmp_path):
    back = geprof_nb.load(matmul_add.export(tmp_path, format="parquet"))
    for mine, theirs in ((matmul_add.roofline, back.roofline), (matmul_add.roofline_by_type, back.roofline_by_type)):
        assert len(mine) == 2
        pd.testing.assert_frame_equal(theirs, mine)
    assert back.roofline.attrs["notes"] == matmul_add.roofline.attrs["notes"]
