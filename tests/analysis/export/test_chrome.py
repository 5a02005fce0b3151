"""format="chrome": one trace file for Perfetto / chrome://tracing, and ``geprof export``."""

from __future__ import annotations

import json
import re

import pytest

from geprof_nb.cli import main
from helpers.geprof_testing import run_profiled_session, small_resnet


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("resnet_chrome")
    return run_profiled_session(out / "run", small_resnet(8), 3, hccl="on", task_memory="on").profile


def test_chrome_trace_is_numeric_and_exact(run, tmp_path):
    path = run.export(tmp_path, "chrome")
    assert path == tmp_path / f"{run.name}.json"
    trace = json.loads(path.read_text())
    assert trace["displayTimeUnit"] == "ns"
    events = trace["traceEvents"]
    timed = [e for e in events if "ts" in e]
    assert all(isinstance(e["ts"], (int, float)) for e in timed)
    assert min(e["ts"] for e in timed) == 0
    base = trace["otherData"]["time_base_ns"]
    # µs since the first event keep every ns: the first op task's start comes back exactly
    first = run.op_summary.iloc[0]
    kernel = next(e for e in events if e["ph"] == "X" and e["name"] == first["Op Name"])
    assert base + round(kernel["ts"] * 1000) == run._op_rows.start_ns[0]


def test_chrome_trace_has_the_msprof_layers_with_readable_names(run, tmp_path):
    events = json.loads(run.export(tmp_path / "t.json", "chrome").read_text())["traceEvents"]
    assert (tmp_path / "t.json").exists()
    procs = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert set(procs.values()) == {"CANN", "Ascend Hardware", "Communication", "NPU MEM", "Overlap Analysis"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    hw = next(p for p, n in procs.items() if n == "Ascend Hardware")
    used = {(e["pid"], e["tid"]) for e in events if e["ph"] in ("X", "C")}
    assert used <= set(threads) | {(p, 0) for p, n in procs.items() if n == "NPU MEM"}
    assert all(re.fullmatch(r"Stream \d+|Step Trace\(Model ID:\d+\)", n) for (p, _), n in threads.items() if p == hw)
    flows = [e for e in events if e["ph"] in ("s", "f")]
    assert all(e["ph"] != "f" or e.get("bp") == "e" for e in flows)
    by_id = {}
    for e in flows:
        by_id.setdefault((e["cat"], e["id"]), []).append(e["ph"])
    assert all(sorted(v) == ["f", "s"] for v in by_id.values())


def test_cli_export(run, tmp_path, capsys):
    assert main(["export", str(run.path), "--format", "ascend_pt", "--to", str(tmp_path), "--rank", "3"]) == 0
    out = capsys.readouterr().out
    written = next(tmp_path.glob("*_ascend_pt"))
    assert f"Wrote {written}" in out and "profiler_info_3.json" in out
    assert "ASCEND_PROFILER_OUTPUT/trace_view.json" in out
    assert main(["export", str(run.path), "--format", "chrome", "--to", str(tmp_path / "c")]) == 0
    assert f"{run.name}.json" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["export", str(run.path), "--format", "excel", "--to", str(tmp_path)])
    assert "invalid choice: 'excel'" in capsys.readouterr().err
