"""torch_npu-style memory tables (analysis.memory) from task_memory records in a run directory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from geprof_nb.analysis.memory import (MEMORY_RECORD, OPERATOR_MEMORY, memory_peak, memory_record,
                                       operator_memory)
from geprof_nb.analysis.rundir import RunDir
from geprof_nb.prof import rawdata

ROOT = Path(__file__).resolve().parents[2]
MB = 1024 * 1024
NAMES = {11: "conv1:0", 22: "relu:0", 33: "out:0", 44: "left:0", 55: "other_model:0"}
ALLOC, FREE = rawdata.MEMORY_ALLOC, rawdata.MEMORY_FREE


def _write_run(path: Path, chunks: list[list[tuple]], names: dict[int, str] = NAMES) -> RunDir:
    """A minimal run directory: info.json, the hash dictionary and task_memory chunks of device 0.

    Rows: (timestamp, model_id, tensor, addr, size, event, total_allocated, total_reserved, stream_id).
    """
    path.mkdir(parents=True)
    (path / rawdata.INFO_FILE).write_text(json.dumps({"geprof_raw_version": 1, "status": "complete",
                                                      "devices": {"0": {}}}))
    (path / rawdata.HASH_DICT_FILE).write_text("".join(json.dumps({"id": str(h), "s": s}) + "\n"
                                                       for h, s in names.items()))
    data = path / rawdata.device_dir(0)
    data.mkdir(parents=True)
    for seq, rows in enumerate(chunks):
        np.save(data / rawdata.chunk_name("task_memory", seq), np.array(rows, rawdata.TASK_MEMORY_DTYPE),
                allow_pickle=False)
    return RunDir(path)


#: One model (pool 4096 bytes), two steps and an allocation never released; written in two chunks.
STEP1 = [
    (1000, 1, 11, 0, 1024, ALLOC, 1024, 4096, 3),
    (1500, 1, 22, 1024, 2048, ALLOC, 3072, 4096, 3),
    (2000, 1, 11, 0, 1024, FREE, 2048, 4096, 3),
    (2500, 1, 33, 0, 1024, ALLOC, 3072, 4096, 4),
    (3000, 1, 22, 1024, 2048, FREE, 1024, 4096, 3),
    (3500, 1, 33, 0, 1024, FREE, 0, 4096, 4),
]
STEP2 = [
    (11000, 1, 11, 0, 1024, ALLOC, 1024, 4096, 3),
    (12001, 1, 11, 0, 1024, FREE, 0, 4096, 3),
    (13000, 1, 44, 2048, 512, ALLOC, 512, 4096, 3),
]


@pytest.fixture
def run(tmp_path) -> RunDir:
    return _write_run(tmp_path / "run", [STEP1, STEP2])


def test_operator_memory_header_and_values(run):
    df = operator_memory(run)
    assert list(df.columns) == OPERATOR_MEMORY == [
        "Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)", "Active Release Time(us)", "Duration(us)",
        "Active Duration(us)", "Allocation Total Allocated(MB)", "Allocation Total Reserved(MB)",
        "Allocation Total Active(MB)", "Release Total Allocated(MB)", "Release Total Reserved(MB)",
        "Release Total Active(MB)", "Stream Ptr", "Device Type"]
    assert list(df["Name"]) == ["conv1:0", "relu:0", "out:0", "conv1:0", "left:0"]
    assert list(df["Size(KB)"]) == [1.0, 2.0, 1.0, 1.0, 0.5]
    assert list(df["Allocation Time(us)"]) == [1.0, 1.5, 2.5, 11.0, 13.0]
    assert list(df["Release Time(us)"][:4]) == [2.0, 3.0, 3.5, 12.001]
    assert list(df["Duration(us)"][:4]) == [1.0, 1.5, 1.0, 1.001]
    assert list(df["Allocation Total Allocated(MB)"] * MB) == [1024, 3072, 3072, 1024, 512]
    assert list(df["Release Total Allocated(MB)"][:4] * MB) == [2048, 1024, 0, 0]
    assert (df["Allocation Total Reserved(MB)"] * MB == 4096).all()
    assert (df["Release Total Reserved(MB)"][:4] * MB == 4096).all()
    assert list(df["Stream Ptr"]) == [3, 3, 4, 3, 3]
    assert (df["Device Type"] == "NPU:0").all()
    # never released: the release side is empty
    last = df.iloc[4]
    assert np.isnan(last["Release Time(us)"]) and np.isnan(last["Duration(us)"])
    assert np.isnan(last["Release Total Allocated(MB)"])
    # a static pool has no caching allocator: Active equals the plain values
    pd.testing.assert_series_equal(df["Active Release Time(us)"], df["Release Time(us)"], check_names=False)
    pd.testing.assert_series_equal(df["Active Duration(us)"], df["Duration(us)"], check_names=False)
    pd.testing.assert_series_equal(df["Allocation Total Active(MB)"], df["Allocation Total Allocated(MB)"],
                                   check_names=False)
    pd.testing.assert_series_equal(df["Release Total Active(MB)"], df["Release Total Allocated(MB)"],
                                   check_names=False)


def test_memory_record_header_and_values(run):
    df = memory_record(run)
    assert list(df.columns) == MEMORY_RECORD == [
        "Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)", "Total Active(MB)",
        "Stream Ptr", "Device Type"]
    rows = STEP1 + STEP2
    assert len(df) == len(rows)
    assert (df["Component"] == "GE").all() and (df["Device Type"] == "NPU:0").all()
    assert list(df["Timestamp(us)"]) == [r[0] / 1000 for r in rows]
    assert list(df["Total Allocated(MB)"] * MB) == [r[6] for r in rows]
    assert list(df["Total Active(MB)"]) == list(df["Total Allocated(MB)"])
    assert (df["Total Reserved(MB)"] * MB == 4096).all()
    assert list(df["Stream Ptr"]) == [r[8] for r in rows]


def test_memory_peak(run):
    peak = memory_peak(run)
    assert peak.allocated_bytes == 3072
    assert peak.timestamp_ns == 1500 and peak.time_us == 1.5  # the first time it was reached
    assert peak.tensor == "relu:0" and peak.model_id == 1
    assert peak.reserved_bytes == 4096


def test_two_models_add_up(tmp_path):
    """Totals are the device's: each model's latest totals summed; a model counts from its first record."""
    other = [
        (1200, 2, 55, 0, 512, ALLOC, 512, 8192, 5),
        (3200, 2, 55, 0, 512, FREE, 0, 8192, 5),
    ]
    run = _write_run(tmp_path / "run", [STEP1 + other])
    df = memory_record(run)
    assert list(df["Timestamp(us)"] * 1000) == [1000, 1200, 1500, 2000, 2500, 3000, 3200, 3500]
    assert list(df["Total Allocated(MB)"] * MB) == [1024, 1536, 3584, 2560, 3584, 1536, 1024, 0]
    assert list(df["Total Reserved(MB)"] * MB) == [4096] + [4096 + 8192] * 7
    peak = memory_peak(run)
    assert (peak.allocated_bytes, peak.timestamp_ns, peak.tensor) == (3584, 1500, "relu:0")
    om = operator_memory(run)
    assert list(om["Name"]) == ["conv1:0", "other_model:0", "relu:0", "out:0"]
    assert list(om["Duration(us)"]) == [1.0, 2.0, 1.5, 1.0]
    assert list(om["Release Total Allocated(MB)"] * MB) == [2560, 1024, 1536, 0]


def test_unknown_names_and_empty_runs(tmp_path):
    run = _write_run(tmp_path / "unknown", [STEP1], names={})
    assert operator_memory(run)["Name"][0] == f"<unknown 0x{11:016x}>"
    empty = _write_run(tmp_path / "empty", [])
    assert list(operator_memory(empty).columns) == OPERATOR_MEMORY and operator_memory(empty).empty
    assert list(memory_record(empty).columns) == MEMORY_RECORD and memory_record(empty).empty
    assert memory_peak(empty) is None


def test_tables_from_a_real_plan(tmp_path):
    """ResNet-50's plan -> two steps of memory_events -> run dir -> tables agree with the plan."""
    from geprof_nb import ge
    from geprof_nb.ge.compiler import CompiledModel
    from geprof_nb.ge.device import CostModel, get_device
    from geprof_nb.ge.memory import memory_events, plan_memory
    from geprof_nb.ge.schedule import StreamSchedule
    from geprof_nb.prof.msprof import hash_id

    g = ge.models.resnet50(batch_size=2, image_size=64, world_size=8)
    cm = CompiledModel(g, CostModel(get_device("Ascend910B")), 0, 1)
    table = cm.task_table(cm.profiling_points())
    plan = plan_memory(cm, table)
    times = StreamSchedule(table).steps(2, np.random.default_rng(0))
    launch = [0, int(times.end[0]) + 1000]  # the second step starts after the first
    ev = np.concatenate([memory_events(plan, 1, launch[k] + times.start[k], times.dur[k], table.stream, hash_id)
                         for k in range(2)])
    run = _write_run(tmp_path / "real", [ev[: len(ev) // 3], ev[len(ev) // 3:]],
                     names={hash_id(n): n for n in plan.names})

    om = operator_memory(run)
    assert len(om) == 2 * len(plan)
    assert not om["Release Time(us)"].isna().any()
    assert (om["Duration(us)"] >= 0).all()
    sizes = dict(zip(plan.names, plan.size / 1024))
    assert (om["Size(KB)"] == om["Name"].map(sizes).astype(float)).all()
    first = om.iloc[: len(plan)]
    assert first["Allocation Time(us)"].max() < om.iloc[len(plan):]["Allocation Time(us)"].min()
    k = plan.index("gradients/HcomAllReduce_0:0")
    row = first[first["Name"] == plan.names[k]].iloc[0]
    step_end = (times.start[0] + times.dur[0]).max()
    assert row["Duration(us)"] == (step_end - times.start[0][plan.alloc_task[k]]) / 1000

    rec = memory_record(run)
    assert len(rec) == len(ev)
    assert rec["Total Allocated(MB)"].min() >= 0 and rec["Total Allocated(MB)"].iloc[-1] == 0
    assert (rec["Total Reserved(MB)"] * MB == plan.pool_size).all()
    peak = memory_peak(run)
    assert peak.allocated_bytes == int(ev["total_allocated"].max()) <= plan.pool_size
    assert peak.allocated_bytes == pytest.approx(plan.peak_live_bytes, rel=0.05)


def test_analysis_memory_does_not_import_the_runtime():
    code = ("import sys, geprof_nb.analysis.memory; "
            "bad = sorted(m for m in sys.modules if m.startswith('geprof_nb.ge')); print(bad); "
            "sys.exit(1 if bad else 0)")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
