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


def test_newest_run_is_the_one_made_last_whatever_the_clock_said(tmp_path, monkeypatch):
    """The clock is stepped back 1 h between two runs (NTP, a DST fall-back): the second run's name has the
    earlier stamp, and its sequence number, one past the first's, still makes it the newest."""
    out = tmp_path / "out"
    first = run_profiled_session(out, build_tiny_graph()[0], 1).profile
    hour_ago = msprof.time.time() - 3600
    monkeypatch.setattr(msprof.time, "time", lambda: hour_ago)
    second = run_profiled_session(out, build_tiny_graph()[0], 1).profile
    monkeypatch.undo()
    assert second.name[12:29] < first.name[12:29]  # the stamps: the second run reads an hour earlier
    assert (first.name[:12], second.name[:12]) == ("PROF_000001_", "PROF_000002_")
    assert geprof_nb.load(out).path == second.path
    shutil.rmtree(first.path)  # a deleted run's number is not given again: the next is still the newest
    third = run_profiled_session(out, build_tiny_graph()[0], 1).profile
    assert third.name.startswith("PROF_000003_") and geprof_nb.load(out).path == third.path


@pytest.mark.parametrize("names, newest", [
    (["PROF_000002_20260101000000000_AAAA", "PROF_000010_20250101000000000_BBBB"], "PROF_000010_20250101000000000_BBBB"),
    (["PROF_000003_20260101000000000_AAAA", "CLUSTER_000004_20250101000000000_CCCC"],
     "CLUSTER_000004_20250101000000000_CCCC"),  # a cluster root takes its rank 0 run's number
    (["CLUSTER_000002_20250101000000000_CCCC", "PROF_000003_20240101000000000_AAAA"],
     "PROF_000003_20240101000000000_AAAA"),
    (["PROF_000001_20260101000000000_AAAA", "CLUSTER_20270101000000000_OLDROOT"],  # a root made before numbers
     "PROF_000001_20260101000000000_AAAA"),
    (["PROF_000005_20260101000000001_AAAA", "PROF_000005_20260101000000000_BBBB"],  # one number taken twice:
     "PROF_000005_20260101000000001_AAAA"),  # the stamp breaks the tie
    (["PROF_1000000_20260101000000000_AAAA", "PROF_999999_20270101000000000_BBBB"],  # past six digits
     "PROF_1000000_20260101000000000_AAAA"),
])
def test_newest_run_orders_by_sequence_number(tmp_path, names, newest):
    for name in names:
        (tmp_path / name).mkdir()
        if name.startswith("PROF_"):
            (tmp_path / name / rawdata.INFO_FILE).write_text('{"geprof_raw_version": 1}')
    assert newest_run(tmp_path).name == newest


# ------------------------------------------------------------------------- salvaged growing chunks
def _as_growing(chunk: Path, tail: bytes = b"") -> Path:
    """Turn a closed chunk back into the ``.tmp`` it was while it grew (a header for no record, its records),
    followed by ``tail`` (a torn record)."""
    records = np.load(chunk, allow_pickle=False)
    tmp = chunk.with_suffix(".tmp")
    tmp.write_bytes(rawdata.npy_header(records.dtype, 0) + records.tobytes() + tail)
    chunk.unlink()
    return tmp


def _unfinalised(run_dir: Path) -> None:
    info = json.loads((run_dir / rawdata.INFO_FILE).read_text())
    info["status"], info["pid"] = "running", 2 ** 22 + 1  # killed: its process is gone
    (run_dir / rawdata.INFO_FILE).write_text(json.dumps(info))


def test_a_killed_run_loads_the_whole_records_of_its_growing_chunks(chunked_run):
    p0 = chunked_run.profile
    run_dir = p0.path
    hwts, ops = p0.run.load("hwts"), len(p0.op_summary)
    data = run_dir / rawdata.device_dir(0)
    chunks = sorted(data.glob("hwts.*.npy"))
    last = np.load(chunks[-1])
    torn = last[:1].tobytes()[:11]  # 11 of the 28 bytes of one more record
    tmp = _as_growing(chunks[-1], torn)
    n_trace = len(np.load(data / "step_trace.000000.npy"))
    trace = _as_growing(data / "step_trace.000000.npy")  # the first of its chunks, the others closed
    _unfinalised(run_dir)
    p = geprof_nb.load(run_dir)
    assert not p.complete
    assert np.array_equal(p.run.load("hwts"), hwts)  # every whole record, in order, the torn one dropped
    assert list(p.step_trace["Iteration ID"]) == [1, 2, 3] and len(p.op_summary) == ops
    assert [(c.path.name, c.records, c.torn_bytes) for c in p.run.salvaged] == [
        (tmp.name, len(last), 11), (trace.name, n_trace, 0)]
    assert (f"salvaged {len(last)} hwts, {n_trace} step_trace records from 2 chunk files the run had not closed "
            "(<kind>.<n>.tmp): the records its writer had written when it stopped") in p.notes
    assert f"{rawdata.device_dir(0)}/{tmp.name}: a torn last record (11 of 28 bytes) dropped" in p.notes
    assert p.run.damaged == [] and p.run.missing == []  # info.json's counts are all there


def test_a_killed_run_drops_the_hash_dictionary_line_it_was_appending(chunked_run):
    p0 = chunked_run.profile
    path = p0.path / rawdata.HASH_DICT_FILE
    torn = b'{"id": "1234567", "s": "a name the kill cu'  # no newline: the writer was appending it
    path.write_bytes(path.read_bytes() + torn)
    finalised = geprof_nb.load(p0.path)  # a finalised run wrote every line whole: that one is damaged
    n_lines = len(path.read_bytes().split(b"\n"))
    assert finalised.op_summary["Op Name"].tolist() == p0.op_summary["Op Name"].tolist()
    assert finalised.run.damaged == [f"{rawdata.HASH_DICT_FILE}:{n_lines}"]
    _unfinalised(p0.path)
    p = geprof_nb.load(p0.path)
    assert p.op_summary["Op Name"].tolist() == p0.op_summary["Op Name"].tolist()
    assert p.run.damaged == [] and p.run.torn_hash_line == len(torn)
    assert (f"{rawdata.HASH_DICT_FILE}: a torn last line ({len(torn)} bytes: the run stopped as it was appended; "
            "a name is written before the records that use it) dropped") in p.notes


def test_a_growing_chunk_cut_in_its_header_holds_no_record(chunked_run):
    run_dir = chunked_run.profile.path
    data = run_dir / rawdata.device_dir(0)
    chunk = sorted(data.glob("hwts.*.npy"))[-1]
    kept = len(chunked_run.profile.run.load("hwts")) - len(np.load(chunk))
    chunk.unlink()
    (data / chunk.with_suffix(".tmp").name).write_bytes(rawdata.npy_header(rawdata.HWTS_DTYPE, 0)[:40])
    _unfinalised(run_dir)
    p = geprof_nb.load(run_dir)
    assert len(p.run.load("hwts")) == kept and p.run.damaged == []
    header = len(rawdata.npy_header(rawdata.HWTS_DTYPE, 0))
    assert f"{rawdata.device_dir(0)}/{chunk.stem}.tmp: cut short in its header (40 of {header} bytes), no record" \
        in p.notes and header == 192
    assert not any(n.startswith("salvaged 0") for n in p.notes)


def test_a_growing_chunk_beside_its_closed_one_is_not_loaded_twice(chunked_run):
    """A copy made while the chunk was renamed into place holds both: the closed one is the chunk."""
    run_dir = chunked_run.profile.path
    chunk = sorted((run_dir / rawdata.device_dir(0)).glob("hwts.*.npy"))[0]
    records = np.load(chunk)
    chunk.with_suffix(".tmp").write_bytes(rawdata.npy_header(rawdata.HWTS_DTYPE, 0) + records[:2].tobytes())
    _unfinalised(run_dir)
    p = geprof_nb.load(run_dir)
    assert np.array_equal(p.run.load("hwts"), chunked_run.profile.run.load("hwts")) and p.run.salvaged == []


def test_a_growing_chunk_left_in_a_finalised_run_is_listed_not_loaded(chunked_run):
    run_dir = chunked_run.profile.path
    data = run_dir / rawdata.device_dir(0)
    before = chunked_run.profile.run.load("hwts")
    (data / "hwts.000099.tmp").write_bytes(rawdata.npy_header(rawdata.HWTS_DTYPE, 0) + before[:3].tobytes())
    p = geprof_nb.load(run_dir)
    assert p.complete and np.array_equal(p.run.load("hwts"), before)
    assert (f"damaged files skipped: {rawdata.device_dir(0)}/hwts.000099.tmp (a chunk a finalised run never closed: "
            "not loaded)") in p.notes


def test_a_growing_chunk_of_another_layout_is_damaged_not_loaded(chunked_run):
    run_dir = chunked_run.profile.path
    data = run_dir / rawdata.device_dir(0)
    chunk = sorted(data.glob("hwts.*.npy"))[-1]
    kept = len(chunked_run.profile.run.load("hwts")) - len(np.load(chunk))
    chunk.unlink()
    (data / chunk.with_suffix(".tmp").name).write_bytes(rawdata.npy_header(rawdata.STEP_TRACE_DTYPE, 0) + b"\0" * 64)
    _unfinalised(run_dir)
    p = geprof_nb.load(run_dir)
    with pytest.warns(UserWarning, match="damaged chunk skipped"):
        assert len(p.run.load("hwts")) == kept
    assert p.run.damaged == [f"{rawdata.device_dir(0)}/{chunk.stem}.tmp"]


def test_a_growing_chunk_shorter_than_info_json_says_is_missing_records(chunked_run):
    """info.json counts the records in the chunk files, growing ones too, when it is written: fewer there later
    (a truncated copy) is said, as for closed chunks."""
    run_dir = chunked_run.profile.path
    data = run_dir / rawdata.device_dir(0)
    total = len(chunked_run.profile.run.load("hwts"))
    chunk = sorted(data.glob("hwts.*.npy"))[-1]
    n = len(np.load(chunk))
    tmp = _as_growing(chunk)
    tmp.write_bytes(tmp.read_bytes()[:-rawdata.HWTS_DTYPE.itemsize])  # one record short
    _unfinalised(run_dir)
    p = geprof_nb.load(run_dir)
    assert p.info["records"]["hwts"] == total and len(p.run.load("hwts")) == total - 1 and n > 1
    assert p.run.missing == [f"hwts: 1 of {total} written records are missing (chunk files deleted, truncated or not "
                             "copied)"]


def test_a_runtime_task_type_the_runtime_does_not_have_shows_as_unknown(chunked_run):
    """task_track records whose task type a damaged chunk made 256 (no rtTaskType): their tasks' kernel_type is
    UNKNOWN, the other tasks keep theirs (RtTaskType(256) raised ValueError)."""
    p = chunked_run.profile
    before = p.task_time
    chunk = sorted((p.path / rawdata.device_dir(0)).glob("task_track.*.npy"))[0]
    records = np.load(chunk)
    records["task_type"][: len(records) // 2] = 256
    np.save(chunk, records)
    damaged = geprof_nb.load(p.path).task_time
    changed = damaged["kernel_type"].astype(str) != before["kernel_type"].astype(str)
    assert changed.sum() >= 1 and set(damaged["kernel_type"].astype(str)[changed]) == {"UNKNOWN"}
    assert (~changed).sum() >= 1 and len(damaged) == len(before)


def _write_hashes(run_dir: Path, names: list[str]) -> None:
    lines = [json.dumps({"id": str(1000 + k), "s": s}) for k, s in enumerate(names)]
    (run_dir / rawdata.HASH_DICT_FILE).write_text("\n".join(lines) + "\n")


def test_a_hash_dictionary_sharing_the_start_of_the_one_read_before_gives_its_own_names(chunked_run, tmp_path):
    """The ranks of a cluster hold the same lines but the last few: a rank's names reuse the parsed start of the
    last dictionary with the same first bytes; its changed, added, removed and damaged lines are its own."""
    common = [f"model/layers.{k}/mlp/MatMul_{'x' * 40}" for k in range(200)]  # past the 4 KB key
    runs = [tmp_path / name for name in ("a", "b", "c", "d")]
    for run in runs:
        shutil.copytree(chunked_run.profile.path, run)
    _write_hashes(runs[0], common + ["comm_rank0", "comm_rank0_b"])
    _write_hashes(runs[1], common + ["comm_rank1"])  # one line changed, one removed
    _write_hashes(runs[2], common + ["comm_rank2", "comm_rank2_b", "added"])
    (runs[3] / rawdata.HASH_DICT_FILE).write_text(
        (runs[2] / rawdata.HASH_DICT_FILE).read_text().replace('"s": "comm_rank2_b"', '"s": '))
    read = [RunDir(run) for run in runs]
    first, second, third, damaged = (r.hashes for r in read)
    assert first == {1000 + k: s for k, s in enumerate(common + ["comm_rank0", "comm_rank0_b"])}
    assert second == {1000 + k: s for k, s in enumerate(common + ["comm_rank1"])}
    assert third == {1000 + k: s for k, s in enumerate(common + ["comm_rank2", "comm_rank2_b", "added"])}
    assert damaged == {k: s for k, s in third.items() if s != "comm_rank2_b"}
    assert read[3].damaged == [f"{rawdata.HASH_DICT_FILE}:202"]


def test_ranks_whose_hash_dictionaries_are_the_same_bytes_share_one_dict(chunked_run, tmp_path):
    """A stage's ranks may hold one dictionary file (copied, or hard-linked): read once, one dict for all; a rank
    whose file differs in a line gets its own names."""
    common = [f"model/layers.{k}/mlp/MatMul_{'y' * 40}" for k in range(200)]
    runs = [tmp_path / name for name in ("a", "b", "c")]
    for run in runs:
        shutil.copytree(chunked_run.profile.path, run)
    for run in runs[:2]:
        _write_hashes(run, common + ["comm_stage0"])
    _write_hashes(runs[2], common + ["comm_other"])
    a, b, c = (RunDir(run).hashes for run in runs)
    assert a is b and a == {1000 + k: s for k, s in enumerate(common + ["comm_stage0"])}
    assert c is not a and c[1200] == "comm_other" and a[1200] == "comm_stage0"
