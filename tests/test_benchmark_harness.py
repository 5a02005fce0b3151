"""The benchmark suite's report: a figure without a target is information, never a target met or missed."""

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def harness():
    spec = importlib.util.spec_from_file_location("bench_harness", BENCHMARKS / "harness.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up by name
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def test_a_row_without_a_target_is_information(harness):
    info = harness.information("ResNet-50 training x200 steps, all layers on / off", 1.222, "x", {"steps": 200})
    met = harness.Result("static collection", 7_250_412.0, "tasks/s", ">= 2,000,000", True)
    missed = harness.Result("export ascend_pt", 16.2, "s", "<= 15 s", False)
    assert (info.target, info.passed) == ("none (information)", None)
    assert [harness.has_target(r) for r in (info, met, missed)] == [False, True, True]
    assert harness.markdown([info, met, missed]).splitlines()[2:] == [
        "| ResNet-50 training x200 steps, all layers on / off | 1.222 x | none (information) | - |",
        "| static collection | 7,250,000 tasks/s | >= 2,000,000 | yes |",
        "| export ascend_pt | 16.2 s | <= 15 s | **no** |",
    ]
    rows = harness.table([info]).splitlines()
    assert rows[2].split()[-1] == "-"


def test_a_skipped_peer_is_still_skipped(harness):
    r = harness.skipped("op_statistic / torch key_averages()", "x", "<= 0.2", "torch")
    assert harness.has_target(r) and r.as_dict()["figure"] is None
    assert harness.markdown([r]).splitlines()[2] == "| op_statistic / torch key_averages() | nan x | <= 0.2 | skipped |"

