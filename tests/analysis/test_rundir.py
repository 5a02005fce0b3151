"""Run directories: loading, damaged data, the Profile object, and the layering rule."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis import RunDirError
from geprof_nb.analysis.rundir import RunDir, is_run_dir, newest_run
from geprof_nb.prof import msprof, rawdata
from helpers.geprof_testing import build_tiny_graph, run_profiled_session

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def chunked_run(tmp_path, monkeypatch):
    """A finished run whose hwts data is in several chunks, copied so tests may damage it."""
    monkeypatch.setattr(msprof.lib, "chunk_records", 4)
    run = run_profiled_session(tmp_path / "out", build_tiny_graph(world_size=2)[0], 3)
    monkeypatch.undo()
    return run


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        geprof_nb.load(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunDirError, match="holds no geprof run directory"):
        geprof_nb.load(tmp_path / "empty")
    assert newest_run(tmp_path / "empty") is None
    with pytest.raises(RunDirError, match="info.json is missing"):
        RunDir(tmp_path / "empty")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / rawdata.INFO_FILE).write_text("{not json")
    with pytest.raises(RunDirError, match="cannot be read as JSON"):
        geprof_nb.load(bad)
    (bad / rawdata.INFO_FILE).write_text('{"status": "complete"}')
    with pytest.raises(RunDirError, match="no 'geprof_raw_version' field"):
        geprof_nb.load(bad)


def test_profile_identity(chunked_run):
    p = chunked_run.profile
    assert is_run_dir(p.path) and p.name == p.path.name and p.name.startswith("PROF_")
    assert p.complete and p.options["training_trace"] == "on"
    assert p.device["name"] == "Ascend910B" and p.run.device_ids == [0]
    assert repr(p) == f"<geprof Profile {p.name}: {len(p.op_summary)} op tasks, 3 iterations>"
    assert geprof_nb.load(p.path).path == p.path == geprof_nb.load(p.path.parent).path
    assert p.run.damaged == []


def test_repr_counts_the_step_trace_iterations_without_task_data(tmp_path):
    p = run_profiled_session(tmp_path / "out", build_tiny_graph(world_size=2)[0], 4, task_trace="off").profile
    assert p.op_summary.empty and len(p.step_trace) == 4
    assert repr(p) == f"<geprof Profile {p.name}: 0 op tasks, 4 iterations>"


def test_ops_and_step_memory_refuse_an_iteration_the_run_does_not_have(chunked_run):
    p = chunked_run.profile
    assert p.iterations.tolist() == [1, 2, 3]
    ops = p.ops(np.int64(2))
    assert len(ops) == len(p.ops(3)) > 0 and (p.iteration_of_ops[ops.index] == 2).all()
    assert p.ops().equals(p.ops(3)) and p.step_memory(np.int64(2)).iteration == 2
    for call in (p.ops, p.step_memory):
        for bad in (0, 4, 99, -1):
            with pytest.raises(ValueError) as err:
                call(bad)
            assert str(err.value) == f"iteration {bad} is not in this run; its iterations are 1..3"
        for bad in ("3", 2.0, True):
            with pytest.raises(TypeError) as err:
                call(bad)
            assert str(err.value) == f"iteration {bad!r} is not valid; accepted: an integer"


def test_without_task_data_ops_of_a_step_trace_step_is_empty_and_others_are_refused(tmp_path):
    p = run_profiled_session(tmp_path / "out", build_tiny_graph(world_size=2)[0], 3, task_trace="off").profile
    assert p.iterations.size == 0 and p.step_trace["Iteration ID"].tolist() == [1, 2, 3]
    assert p.ops().empty and p.ops(2).empty  # the default, and a step with no task records
    with pytest.raises(ValueError) as err:
        p.ops(4)
    assert str(err.value) == "iteration 4 is not in this run; its iterations are 1..3"


def test_load_refuses_a_device_the_run_does_not_have(chunked_run):
    path = chunked_run.profile.path.resolve()
    for where in (path, path.parent):  # the run, and the output directory holding it
        with pytest.raises(ValueError) as err:
            geprof_nb.load(where, device_id=5)
        assert str(err.value) == f"device_id 5 is not in {path}; its devices are 0"
    with pytest.raises(TypeError) as err:
        geprof_nb.load(path, device_id="a")
    assert str(err.value) == "device_id 'a' is not valid; accepted: an integer"
    assert geprof_nb.load(path, device_id=np.int64(0)).device_id == 0


def test_damaged_chunk_is_skipped(chunked_run):
    p = chunked_run.profile
    chunks = sorted((p.path / "device_0" / "data").glob("hwts.*.npy"))
    assert len(chunks) >= 3
    n_all = len(RunDir(p.path).load("hwts"))
    victim = chunks[1]
    n_victim = len(np.load(victim))
    victim.write_bytes(b"\x93NUMPY garbage")
    rd = RunDir(p.path)
    with pytest.warns(UserWarning, match="damaged chunk skipped"):
        hw = rd.load("hwts")
    assert len(hw) == n_all - n_victim
    assert rd.damaged == [str(victim.relative_to(p.path))]


def test_chunk_with_wrong_layout_is_skipped(chunked_run):
    p = chunked_run.profile
    path = p.path / "device_0" / "data" / rawdata.chunk_name("step_trace", 99)
    np.save(path, np.zeros(3, rawdata.HWTS_DTYPE))
    rd = RunDir(p.path)
    with pytest.warns(UserWarning, match="unexpected record layout"):
        tr = rd.load("step_trace")
    assert len(tr) == rd.info["records"]["step_trace"]
    assert rd.damaged and rd.damaged[0].endswith("step_trace.000099.npy")


def test_damaged_hash_dictionary(chunked_run):
    p = chunked_run.profile
    path = p.path / rawdata.HASH_DICT_FILE
    lines = path.read_text().splitlines()
    fc1 = next(i for i, line in enumerate(lines) if json.loads(line)["s"] == "fc1")
    lines[fc1] = "{broken"
    path.write_text("\n".join(lines) + "\n")
    q = geprof_nb.load(p.path)
    names = set(q.op_summary["Op Name"].astype(str))
    assert "fc1" not in names
    assert sum(n.startswith("<unknown 0x") for n in names) == 1
    assert q.run.damaged == [f"{rawdata.HASH_DICT_FILE}:{fc1 + 1}"]
    assert len(q.op_summary) == len(p.op_summary)


def test_missing_kinds_give_empty_tables(tmp_path):
    run_dir = msprof.lib.init(tmp_path)
    msprof.lib.finalize()
    p = geprof_nb.load(run_dir)
    assert p.complete
    assert len(p.op_summary) == 0 and len(p.step_trace) == 0 and p.op_statistic.empty
    assert list(p.step_trace.columns)[:3] == ["Device_id", "Iteration ID", "FP Start(us)"]
    assert p.iterations.tolist() == []


def test_copied_run_directory_still_loads(chunked_run, tmp_path):
    src = chunked_run.profile.path
    dst = tmp_path / "copy" / src.name
    shutil.copytree(src, dst)
    q = geprof_nb.load(dst)
    assert q.op_summary.equals(chunked_run.profile.op_summary)


def test_analysis_does_not_import_the_runtime():
    code = ("import sys, geprof_nb, geprof_nb.analysis; "
            "bad = sorted(m for m in sys.modules if m.startswith(('geprof_nb.ge', 'geprof_nb.nb', 'IPython', "
            "'ipywidgets'))); print(bad); sys.exit(1 if bad else 0)")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr


def test_profiling_off_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("PROFILING_MODE", raising=False)
    monkeypatch.delenv("GE_PROFILING_MODE", raising=False)
    monkeypatch.chdir(tmp_path)
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    s = ge.Session()
    s.add_graph(1, build_tiny_graph(world_size=2)[0])
    s.run_graph(1)
    assert not msprof.lib.running
    assert list(tmp_path.iterdir()) == []


def test_newest_run_is_by_creation_not_mtime(tmp_path):
    import os

    out = tmp_path / "out"
    first = run_profiled_session(out, build_tiny_graph(world_size=2)[0], 1, clock="real").profile
    second = run_profiled_session(out, build_tiny_graph(world_size=2)[0], 1, clock="real").profile
    assert second.info["start_ns"] > first.info["start_ns"]
    assert geprof_nb.load(out).path == second.path
    (first.path / "notes.txt").write_text("looked at this run again")  # e.g. an export written next to it
    later = second.path.stat().st_mtime + 10
    os.utime(first.path, (later, later))
    assert geprof_nb.load(out).path == second.path
