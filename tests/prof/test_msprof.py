"""The simulated msprof library: run directories, chunked flushing, control commands, hashes."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.prof import msprof, rawdata
from geprof_nb.prof.msprof import CommandHandle, CommandType, lib
from geprof_nb.prof.writer import writer
from helpers.geprof_testing import run_profiled_session


def _mlp():
    return ge.models.mlp(batch_size=4, in_features=16, hidden=(32,), out_features=4, world_size=2)


def _chunks(run_dir, kind):
    spec = rawdata.RECORD_KINDS[kind]
    return sorted((run_dir / spec.directory(0)).glob(f"{kind}.*.npy"))


def test_small_chunks_write_several_files_and_load_completely(tmp_path, monkeypatch):
    steps = 6
    big = run_profiled_session(tmp_path / "one_chunk", _mlp(), steps)
    monkeypatch.setattr(lib, "chunk_records", 7)
    small = run_profiled_session(tmp_path / "many_chunks", _mlp(), steps)
    monkeypatch.undo()
    assert lib.chunk_records == msprof.DEFAULT_CHUNK_RECORDS
    for kind in ("hwts", "step_trace"):  # reported every step
        files = _chunks(small.profile.path, kind)
        assert len(files) >= steps, (kind, files)
        assert [f.name for f in files] == [rawdata.chunk_name(kind, i) for i in range(len(files))]
        assert len(_chunks(big.profile.path, kind)) == 1
    for kind, spec in rawdata.RECORD_KINDS.items():
        a, b = big.profile.run.load(kind), small.profile.run.load(kind)
        assert len(a) == len(b), kind
        recorded = small.profile.info["records"].get(kind, 0)
        assert recorded == len(b), kind
        if kind in ("hwts", "step_trace"):
            np.testing.assert_array_equal(a, b)
    assert len(small.profile.op_summary) == steps * small.n_kernels
    pd.testing.assert_frame_equal(big.profile.op_summary, small.profile.op_summary)
    pd.testing.assert_frame_equal(big.profile.step_trace, small.profile.step_trace)


def test_new_run_directory_per_run(tmp_path):
    out = tmp_path / "prof"
    runs = [run_profiled_session(out, _mlp(), 1) for _ in range(3)]
    paths = [r.profile.path for r in runs]
    assert len(set(paths)) == 3
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in paths)
    assert all(p.name.startswith("PROF_") for p in paths)
    assert [p.name[:11] for p in paths] == ["PROF_000001", "PROF_000002", "PROF_000003"]
    assert geprof_nb.load(out).path == paths[-1]  # the output dir opens the newest run
    for p in paths:  # earlier runs are untouched and still load
        assert geprof_nb.load(p).complete and len(geprof_nb.load(p).step_trace) == 1


def test_run_directory_name_reads_the_time_once(monkeypatch):
    # a second boundary between two clock readings once named a run 1 s early: newest_run then
    # opened the run before it
    readings = iter([1_767_225_600.9995, 1_767_225_601.0004])
    monkeypatch.setattr(msprof.time, "time", lambda: next(readings))
    name = msprof._run_dir_name(7)
    monkeypatch.undo()
    stamp = msprof.time.strftime("%Y%m%d%H%M%S", msprof.time.localtime(1_767_225_600))
    assert name.startswith(f"PROF_000007_{stamp}999_")


def test_info_json_lifecycle(tmp_path):
    opts = {"ge.exec.profilingMode": "1", "geprof.clock": "virtual",
            "ge.exec.profilingOptions": json.dumps({"output": str(tmp_path), "training_trace": "on"})}
    assert ge.GEInitialize(opts) == ge.SUCCESS
    run_dir = lib.run_dir
    info = json.loads((run_dir / rawdata.INFO_FILE).read_text())
    assert info["status"] == "running" and info["end_ns"] is None and info["clock"] == "virtual"
    assert info["options"]["training_trace"] == "on" and info["options"]["output"] == str(tmp_path)
    assert info["devices"]["0"]["name"] == "Ascend910B"
    assert info["pmu_events"]["metrics"] == ["PipeUtilization"]
    assert info["switch_history"][0]["switch"] == lib.switch
    s = ge.Session()
    s.add_graph(1, _mlp())
    s.run_graph(1)
    assert ge.GEFinalize() == ge.SUCCESS
    assert not lib.running and lib.last_run_dir == run_dir
    info = json.loads((run_dir / rawdata.INFO_FILE).read_text())
    assert info["status"] == "complete" and info["end_ns"] >= info["start_ns"]
    assert "stop_ns" in info["switch_history"][-1]
    assert info["records"]["step_trace"] == len(geprof_nb.load(run_dir).run.load("step_trace"))
    assert not (run_dir / (rawdata.INFO_FILE + ".tmp")).exists()


def test_unfinalized_run_loads_what_was_flushed(tmp_path, monkeypatch):
    monkeypatch.setattr(lib, "chunk_records", 5)
    opts = {"ge.exec.profilingMode": "1", "geprof.clock": "virtual",
            "ge.exec.profilingOptions": json.dumps({"output": str(tmp_path), "training_trace": "on"})}
    assert ge.GEInitialize(opts) == ge.SUCCESS
    s = ge.Session()
    s.add_graph(1, _mlp())
    steps = 30
    for _ in range(steps):
        s.run_graph(1)
    n_kernels = sum(1 for k in s.model(1).table.kernels if k is not None)
    p = geprof_nb.load(tmp_path)  # as after a crash: no finalize yet
    assert not p.complete and "incomplete" in repr(p)
    # device logs arrive batch by batch: the steps of finished batches are on disk, each one whole
    flushed = len(p.step_trace)
    assert 0 < flushed < steps
    assert list(p.step_trace["Iteration ID"]) == list(range(1, flushed + 1))
    assert len(p.op_summary) == flushed * n_kernels
    assert (p.op_summary["Op Name"] != "N/A").all()
    assert not p.op_summary["Op Name"].astype(str).str.startswith("<unknown").any()


def test_library_state_machine(tmp_path):
    assert not lib.running
    assert lib.start(0x2) == msprof.ACL_ERROR_PROF_NOT_RUN
    assert lib.stop() == msprof.ACL_ERROR_PROF_NOT_RUN
    assert lib.finalize() is None
    run_dir = lib.init(tmp_path / "out")
    assert run_dir.is_dir() and lib.running and run_dir.parent == (tmp_path / "out").resolve()
    with pytest.raises(msprof.RunAlreadyOpen, match="already collecting") as refused:
        lib.init(tmp_path / "out")
    assert (refused.value.run_dir, refused.value.mode) == (run_dir, "ge_options") == lib.opened
    assert isinstance(refused.value, RuntimeError)
    seen = []
    msprof.MsprofRegisterCallback(99, lambda h: seen.append(h) or 0)
    try:
        assert lib.start(0x42) == msprof.MSPROF_ERROR_NONE
        assert [(h.type, h.prof_switch) for h in seen] == [(CommandType.START, 0x42)]
        late = []
        lib.register_callback(98, lambda h: late.append(h) or 0)  # registering while started starts it
        assert [(h.type, h.prof_switch) for h in late] == [(CommandType.START, 0x42)]
        assert lib.finalize() == run_dir  # stops first
        assert seen[-1].type == CommandType.STOP and late[-1].type == CommandType.STOP
        assert not lib.running and not lib.started
    finally:
        lib.unregister_callback(99)
        lib.unregister_callback(98)


def test_a_module_that_leaves_while_a_run_is_started_is_stopped(tmp_path):
    """Registering while started starts a module; leaving while started stops it (its layers go off, what it
    holds reaches the run); leaving when nothing is started says nothing."""
    seen: list = []
    lib.register_callback(97, lambda h: seen.append(h.type) or 0)
    lib.unregister_callback(97)
    assert seen == []
    lib.init(tmp_path / "out")
    lib.start(0x42)
    lib.register_callback(97, lambda h: seen.append(h.type) or 0)
    lib.unregister_callback(97)
    lib.unregister_callback(97)  # twice: once stopped is enough
    assert seen == [CommandType.START, CommandType.STOP] and lib.started
    lib.finalize()
    assert seen == [CommandType.START, CommandType.STOP]  # gone: the finalise does not reach it


def test_msprof_init_entry_point(tmp_path):
    assert msprof.MsprofInit(msprof.MSPROF_CTRL_INIT_GE_OPTIONS, '{"aic_metrics": "Nope"}') == msprof.MSPROF_ERROR
    assert not lib.running
    ok = json.dumps({"output": str(tmp_path), "training_trace": "on"})
    assert msprof.MsprofInit(msprof.MSPROF_CTRL_INIT_GE_OPTIONS, ok) == msprof.MSPROF_ERROR_NONE
    assert lib.running and lib.started and lib.switch & 0x40
    assert msprof.MsprofInit(msprof.MSPROF_CTRL_INIT_GE_OPTIONS, ok) == msprof.ACL_ERROR_PROF_ALREADY_RUN
    assert msprof.MsprofInit(msprof.MSPROF_CTRL_FINALIZE, "") == msprof.MSPROF_ERROR_NONE
    assert not lib.running


def test_report_rows_blocks_and_hashes(tmp_path):
    run_dir = lib.init(tmp_path)
    h = msprof.MsprofGetHashId("conv1/Conv2D")
    assert h == msprof.hash_id("conv1/Conv2D") == lib.get_hash_id("conv1/Conv2D")
    assert h != msprof.hash_id("conv1/Conv2d") and 0 < h < 2 ** 64
    msprof.MsprofReportApi(False, 15000, 1, 7, 100, 250, 3)
    msprof.MsprofReportEvent(False, 15000, 1, 7, 11, 300, 3)
    block = np.zeros(3, rawdata.HWTS_DTYPE)
    block["start"] = [1, 2, 3]
    lib.report_block("hwts", block)
    with pytest.raises(TypeError, match="hwts records must have dtype"):
        lib.report_block("hwts", np.zeros(2, rawdata.API_DTYPE))
    with pytest.raises(ValueError, match="additional info kind"):
        msprof.MsprofReportAdditionalInfo(False, "bogus", block)
    lib.finalize()
    from geprof_nb.analysis.rundir import RunDir

    rd = RunDir(run_dir)
    api = rd.load("api")
    assert api.tolist() == [(15000, 1, 7, 100, 250, 3)]
    assert rd.load("event")["request_id"].tolist() == [11]
    assert rd.load("hwts")["start"].tolist() == [1, 2, 3]
    assert rd.hashes[h] == "conv1/Conv2D"
    assert rd.info["records"] == {"api": 1, "event": 1, "hwts": 3}


def test_reports_without_a_run_are_dropped(tmp_path):
    assert not lib.running
    lib.report_row("api", (1, 1, 1, 1, 1, 1))
    lib.report_block("hwts", np.zeros(2, rawdata.HWTS_DTYPE))  # no error, nothing kept
    run_dir = lib.init(tmp_path)
    lib.finalize()
    assert not list(run_dir.glob("*/data/*.npy"))


def test_command_handle_defaults():
    h = CommandHandle(CommandType.START, 0x2)
    assert h.dev_ids == (0,) and h.options == {}
    assert [c.value for c in CommandType] == [0, 1, 2, 3, 4, 5]


def test_a_new_run_starts_with_nothing_of_the_last(tmp_path, monkeypatch):
    """What a run counted (records, a discard window's drops, notes, aged bytes) belongs to that run."""
    first = lib.init(tmp_path / "a", {"storage_limit": "200MB"})
    lib.report_block("hwts", np.zeros(5, rawdata.HWTS_DTYPE))
    lib.add_note("first run's note")
    lib.begin_discard()
    lib.report_row("api", (1, 1, 1, 1, 1, 1))
    lib.finalize()
    assert lib.records_reported == 5 and lib.notes == ["first run's note"] and lib.storage_limit_bytes == 200 << 20
    second = lib.init(tmp_path / "b")
    assert lib.records_reported == 0 and lib.notes == [] and lib.storage_limit_bytes is None
    assert lib.end_discard() == 0  # the first run's window ended with it
    lib.report_block("hwts", np.zeros(2, rawdata.HWTS_DTYPE))
    lib.finalize()
    from geprof_nb.analysis.rundir import RunDir

    assert RunDir(first).info["records"] == {"hwts": 5} and RunDir(second).info["records"] == {"hwts": 2}
    assert "discarded" not in RunDir(second).info


def test_a_run_moved_while_it_writes_keeps_every_record(tmp_path, monkeypatch):
    """move_into moves the open run with the chunks being written: the rows and blocks reported before and
    after, the hash dictionary and info.json all end up in the new place, nothing in the old one."""
    monkeypatch.setattr(lib, "chunk_records", 4)
    old = lib.init(tmp_path / "out")
    lib.report_block("hwts", np.zeros(3, rawdata.HWTS_DTYPE))
    lib.report_block("hwts", np.zeros(2, rawdata.HWTS_DTYPE))  # hwts is full: a checkpoint before the move
    lib.report_row("api", (15000, 1, 7, 100, 250, lib.get_hash_id("moved/before")))  # open chunks after it
    lib.report_block("step_trace", np.zeros(2, rawdata.STEP_TRACE_DTYPE))
    writer().wait()
    assert list(old.rglob("hwts.000000.npy")) and list(old.rglob("api.*.tmp")) and list(old.rglob("step_trace.*.tmp"))
    new = lib.move_into(tmp_path / "out" / "CLUSTER_x" / "rank_0")
    assert new == tmp_path / "out" / "CLUSTER_x" / "rank_0" / old.name and lib.run_dir == new
    assert not old.exists() and (new / rawdata.INFO_FILE).exists()
    lib.report_row("api", (15000, 1, 7, 300, 350, lib.get_hash_id("moved/after")))
    lib.report_block("hwts", np.zeros(1, rawdata.HWTS_DTYPE))
    assert lib.finalize() == new and lib.last_run_dir == new
    from geprof_nb.analysis.rundir import RunDir

    rd = RunDir(new)
    assert len(rd.load("hwts")) == 6 and rd.load("api")["end"].tolist() == [250, 350]
    assert {"moved/before", "moved/after"} <= set(rd.hashes.values())
    assert len(rd.load("step_trace")) == 2
    assert rd.info["status"] == "complete" and rd.info["records"] == {"api": 2, "hwts": 6, "step_trace": 2}
    assert not list(new.rglob("*.tmp")) and sorted(p.name for p in (tmp_path / "out").iterdir()) == ["CLUSTER_x"]


def test_a_run_part_of_a_collection_ends_its_companions_and_returns_the_root(tmp_path):
    ended = []

    class Companion:
        def finalize(self, status, note):
            ended.append((status, note))

    lib.init(tmp_path)
    lib.part_of(tmp_path / "root", [Companion(), Companion()])
    assert lib.finalize("complete", "the cell raised") == tmp_path / "root" == lib.last_run_dir
    assert ended == [("complete", "the cell raised")] * 2
    lib.init(tmp_path)
    assert lib.finalize() != tmp_path / "root" and len(ended) == 2  # the next run is a run of its own
