"""The real msprof-analyze (PyPI ``msprof-analyze``, the ``interop`` extra) on our ascend_pt exports.

The tool exits 0 even when it fails (msprof_analyze_inputs.md pitfall 1), so
these tests check what it wrote, that its numbers are ours, and that it
logged no error.  Skipped only when the ``msprof-analyze`` executable is missing.
"""

from __future__ import annotations

import csv
import json
import re

import pytest

import geprof_nb
from geprof_nb import ge
from helpers.geprof_testing import run_profiled_session, small_resnet
from helpers.msprof_analyze import MSPROF_ANALYZE, analyze

pytestmark = [pytest.mark.interop, pytest.mark.slow, pytest.mark.skipif(MSPROF_ANALYZE is None,
                                                      reason="msprof-analyze is not installed (the interop extra)")]


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """ResNet-50 on 8 ranks, 3 steps, virtual clock (HCCL sub-tasks and memory on), exported as rank 0
    and rank 1 of a cluster; and a slower run (batch 32 at 224x224) exported alone."""
    root = tmp_path_factory.mktemp("interop")
    run = run_profiled_session(root / "run", small_resnet(8), 3, hccl="on", task_memory="on").profile
    slower = run_profiled_session(root / "slower", ge.models.resnet50(batch_size=32, image_size=224, training=True,
                                                                      world_size=8), 3, hccl="on").profile
    assert slower.step_breakdown["Stage"].sum() > run.step_breakdown["Stage"].sum()
    return {"profile": run, "run": run.export(root / "single", "ascend_pt"),
            "slower": slower.export(root / "slower_export", "ascend_pt"),
            "cluster": [run.export(root / "cluster", "ascend_pt", rank=r) for r in (0, 1)][0].parent, "root": root}


def ms(us: float) -> float:
    return round(us / 1000, 3)


def test_advisor(exports):
    out = exports["root"] / "advisor"
    out.mkdir()
    text = analyze(out, "advisor", "all", "-d", str(exports["run"]), "-o", str(out), "-l", "en")
    assert len(list(out.glob("mstt_advisor_*.html"))) == 1
    assert len(list((out / "log").glob("mstt_advisor_*.xlsx"))) == 1
    b = exports["profile"].step_breakdown
    # the Overall Summary sums our Overlap Analysis slices: they must give our step_breakdown
    parts = {name: ms(b[col].sum()) for name, col in (("Computing Time", "Computing"), ("Free Time", "Free"), (
        "Uncovered Communication Time", "Communication(Not Overlapped)"))}
    for name, value in parts.items():
        assert f"-- {name} is {value}ms" in text
    assert f"The Model E2E Time is {round(sum(parts.values()), 3)}ms" in text  # the advisor adds the rounded parts
    assert round(sum(parts.values()), 3) == pytest.approx(b["Stage"].sum() / 1000, abs=2e-3)
    # the computation checks ran on kernel_details.csv and the device info
    assert "Block Dim Issues" in text and "Vector Operator Perf Analysis" in text
    assert "Can not convert" not in text  # every PMU cell of an AI Core / AI Vector Core kernel is a number


def time_distribution(text: str) -> list[dict[str, str]]:
    """compare's "Model Profiling Time Distribution" table on stdout: one dict per row (base, comparison)."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    at = next(i for i, line in enumerate(lines) if "Model Profiling Time Distribution" in line)
    header = [c.strip() for c in lines[at + 1].strip("|").split("|")]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[at + 2:at + 4]]
    return [dict(zip(header, r)) for r in rows]


def count(cell: str) -> int:
    """The ``(<n>)`` of a ``0.012s(<n>)`` cell."""
    return int(re.fullmatch(r"[\d.]+s\((\d+)\)", cell).group(1))


def test_compare_counts_every_cube_kernel(exports):
    out = exports["root"] / "compare_counts"
    out.mkdir()
    text = analyze(out, "compare", "-d", str(exports["slower"]), "-bp", str(exports["run"]), "-o", str(out))
    base, comparison = time_distribution(text)
    for row, profile in ((base, exports["profile"]), (comparison, geprof_nb.load(exports["slower"]))):
        ops = profile.op_summary
        core = ops["Task Type"].astype(str)
        conv = ops["OP Type"].astype(str).str.lower().str.startswith("conv")
        assert (core == "AI_CORE").sum() > 0
        # kernels on the cube: MatMul ones (and any other) in Cube, Conv ones in the two Conv columns
        assert count(row["Cube Time(Num)"]) == ((core == "AI_CORE") & ~conv).sum() > 0
        assert count(row["Cube Time(Num)"]) + count(row["Conv Time(Forward)(Num)"]) + \
            count(row["Conv Time(Backward)(Num)"]) == (core == "AI_CORE").sum()
        assert count(row["Vector Time(Num)"]) == (core == "AI_VECTOR_CORE").sum()


@pytest.fixture(scope="module")
def level0_export(tmp_path_factory):
    """The ResNet-50 of :func:`exports` at task_trace l0 (torch_npu Level0), exported."""
    root = tmp_path_factory.mktemp("interop_l0")
    run = run_profiled_session(root / "run", small_resnet(8), 3, hccl="on", task_trace="l0").profile
    return run, run.export(root / "x", "ascend_pt"), root


def test_level0_export_is_read_by_advisor_and_compare(level0_export, exports):
    profile, d, root = level0_export
    info = json.loads((d / "profiler_info_0.json").read_text())["config"]["experimental_config"]
    assert info["_profiler_level"] == "Level0"
    advisor = root / "advisor"
    advisor.mkdir()
    text = analyze(advisor, "advisor", "all", "-d", str(d), "-o", str(advisor), "-l", "en")
    assert len(list(advisor.glob("mstt_advisor_*.html"))) == 1 and "Can not convert" not in text
    b = profile.step_breakdown
    assert f"-- Uncovered Communication Time is {ms(b['Communication(Not Overlapped)'].sum())}ms" in text
    compare = root / "compare"
    compare.mkdir()
    text = analyze(compare, "compare", "-d", str(d), "-bp", str(exports["run"]), "-o", str(compare))
    assert len(list(compare.glob("performance_comparison_result_*.xlsx"))) == 1
    assert "Can't find any communication op" not in text  # the collectives are in trace_view at Level0 too


def test_compare(exports):
    import openpyxl

    out = exports["root"] / "compare"
    out.mkdir()
    analyze(out, "compare", "-d", str(exports["slower"]), "-bp", str(exports["run"]), "-o", str(out))
    (xlsx,) = out.glob("performance_comparison_result_*.xlsx")
    book = openpyxl.load_workbook(xlsx, read_only=True)
    assert {"OverallMetrics", "CommunicationCompare", "OperatorCompare", "KernelCompare"} <= set(book.sheetnames)
    rows = {r[0]: r for r in book["OverallMetrics"].iter_rows(values_only=True) if r and r[0]}
    base = exports["profile"].step_breakdown["Computing"].sum() / 1000
    assert rows["Computing Time"][1] == pytest.approx(base, abs=1e-3)
    comm = [r for r in book["CommunicationCompare"].iter_rows(values_only=True) if r and r[1] == "allreduce"]
    assert comm and comm[0][3] == len(exports["profile"].communication_time)


def test_cluster(exports):
    profile = exports["profile"]
    out = exports["root"] / "cluster_out"
    out.mkdir()
    analyze(out, "cluster", "-d", str(exports["cluster"]), "-m", "all", "-o", str(out))
    result = out / "cluster_analysis_output"
    names = {p.name for p in result.iterdir()}
    assert {"cluster_step_trace_time.csv", "cluster_communication.json", "cluster_communication_matrix.json",
            "communication_group.json"} <= names
    with open(result / "cluster_step_trace_time.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    b = profile.step_breakdown.set_index("Step")
    assert sorted((r["Type"], r["Index"]) for r in rows if r["Type"] == "rank") == \
        sorted(("rank", str(rank)) for rank in (0, 1) for _ in b.index)
    for r in (r for r in rows if r["Type"] == "rank"):
        for col in ("Computing", "Communication(Not Overlapped)", "Free"):
            assert float(r[col]) == pytest.approx(b.loc[int(r["Step"]), col], abs=1.0)
    group = json.loads((result / "communication_group.json").read_text())
    assert group["collective"] == [[0, 1]]
    comm = json.loads((result / "cluster_communication.json").read_text())["(0, 1)"]
    ct = profile.communication_time
    first = ct.iloc[0]
    op = comm[f"step{first['Iteration ID']}"][f"{first['Op Name']}@hccl_world_group"]
    for rank in ("0", "1"):
        assert op[rank]["Communication Time Info"]["Elapse Time(ms)"] == pytest.approx(first["Elapse Time(ms)"])
    matrix = json.loads((result / "cluster_communication_matrix.json").read_text())["(0, 1)"]
    link = matrix[f"step{first['Iteration ID']}"][f"{first['Op Name']}@hccl_world_group"]["0-1"]
    tasks = profile.hccl_tasks
    sent = tasks[(tasks["Op Name"] == first["Op Name"]) & (tasks["Link Type"] == "HCCS") & (tasks["Size(Byte)"] > 0)]
    assert link["Transport Type"] == "HCCS"
    assert link["Transit Size(MB)"] == pytest.approx(sent["Size(Byte)"].sum() / 1e6)
    assert re.fullmatch(r"\d+\.\d+", str(link["Bandwidth(GB/s)"]))
