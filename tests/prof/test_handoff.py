"""prof/handoff.py: what a run hands the writer thread, and when: checkpoints, batches of steps, storage aging."""

from __future__ import annotations

import threading

import numpy as np

from geprof_nb.prof import msprof, rawdata
from geprof_nb.prof.handoff import StorageAging
from geprof_nb.prof.msprof import lib
from geprof_nb.prof.run_info import RunInfo
from geprof_nb.prof.writer import ChunkFile, writer


def _on_disk(run_dir) -> dict[str, int]:
    """Records per kind in the run directory's chunks, and info.json's record counts."""
    from geprof_nb.analysis.rundir import RunDir

    rd = RunDir(run_dir)
    return {kind: len(rd.load(kind)) for kind in ("api", "node_basic_info", "hwts", "step_trace")
            if len(rd.load(kind))} | {"info.json": rd.info["records"]}


def test_a_full_buffer_writes_every_pending_buffer_and_info_json(tmp_path, monkeypatch):
    """A crash after a chunk was written keeps everything reported before it, every kind alike."""
    monkeypatch.setattr(lib, "chunk_records", 10)
    run_dir = lib.init(tmp_path)
    lib.report_block("node_basic_info", np.zeros(2, rawdata.NODE_BASIC_INFO_DTYPE))
    msprof.MsprofReportApi(False, 15000, 1, 7, 100, 250, lib.get_hash_id("checkpoint_test/op"))
    lib.report_block("step_trace", np.zeros(3, rawdata.STEP_TRACE_DTYPE))
    lib.report_block("hwts", np.zeros(9, rawdata.HWTS_DTYPE))
    assert not list(run_dir.glob("*/data/*.npy"))  # no buffer full: nothing written mid-run (as before)
    lib.report_block("hwts", np.zeros(1, rawdata.HWTS_DTYPE))  # the 10th: hwts is full
    writer().wait()  # the checkpoint is handed to the writer, which goes on beside the job
    written = {"api": 1, "node_basic_info": 2, "hwts": 10, "step_trace": 3}
    assert _on_disk(run_dir) == written | {"info.json": written}
    assert "checkpoint_test/op" in (run_dir / rawdata.HASH_DICT_FILE).read_text()
    lib.report_block("step_trace", np.zeros(3, rawdata.STEP_TRACE_DTYPE))  # a chunk growing until the next one
    writer().wait()
    assert sorted(p.name for p in run_dir.glob("device_0/data/step_trace.*")) == ["step_trace.000000.npy",
                                                                                 "step_trace.000001.tmp"]
    assert _on_disk(run_dir)["step_trace"] == 6  # its records load too: the run is not finalised (salvaged)
    lib.finalize()
    assert _on_disk(run_dir)["step_trace"] == 6


def test_a_checkpoint_waits_for_the_one_before_it_not_for_itself(tmp_path, monkeypatch):
    """The job goes on while the writer writes a checkpoint; the next checkpoint waits until that one is on
    disk, so at most one is in flight (and in memory)."""
    monkeypatch.setattr(lib, "chunk_records", 4)
    run_dir = lib.init(tmp_path)
    release = threading.Event()
    writer().submit(lambda: release.wait(10))  # a writer that is busy (a slow disk)
    done = []

    def fill() -> None:
        lib.report_block("hwts", np.zeros(4, rawdata.HWTS_DTYPE))
        done.append(len(done) + 1)

    try:
        first = threading.Thread(target=fill)
        first.start()
        first.join(5)
        assert done == [1]  # returned with its checkpoint still queued behind the busy writer
        assert not list(run_dir.glob("*/data/*.npy"))
        second = threading.Thread(target=fill)
        second.start()
        second.join(0.3)
        assert second.is_alive() and done == [1]  # waits for the first checkpoint
    finally:
        release.set()
    second.join(5)
    assert done == [1, 2] and len(np.load(run_dir / rawdata.device_dir(0) / "hwts.000000.npy")) == 4
    lib.finalize()
    assert _on_disk(run_dir) == {"hwts": 8, "info.json": {"hwts": 8}}


def test_a_buffer_full_inside_a_batch_waits_for_the_batch_and_keeps_its_chunks(tmp_path, monkeypatch):
    """A crash inside a batch of steps must not leave its task records on disk without its step trace:
    a buffer that fills is sealed as a chunk and written, with every other kind, once the batch is over."""
    monkeypatch.setattr(lib, "chunk_records", 4)
    run_dir = lib.init(tmp_path)
    with lib.reporting_batch():
        lib.report_block("hwts", np.zeros(4, rawdata.HWTS_DTYPE))
        lib.report_block("hwts", np.zeros(4, rawdata.HWTS_DTYPE))
        with lib.reporting_batch():  # nested: the outer batch checkpoints
            lib.report_block("step_trace", np.zeros(2, rawdata.STEP_TRACE_DTYPE))
        lib.report_block("hwts", np.zeros(1, rawdata.HWTS_DTYPE))
        writer().wait()
        assert not list(run_dir.glob("*/data/*.npy"))
        assert lib.records_reported == 11
    writer().wait()
    assert _on_disk(run_dir) == {"hwts": 9, "step_trace": 2, "info.json": {"hwts": 9, "step_trace": 2}}
    assert [p.name for p in sorted(run_dir.glob("*/data/hwts.*.npy"))] == [
        "hwts.000000.npy", "hwts.000001.npy", "hwts.000002.npy"]  # the sealed chunks keep their size
    assert [len(np.load(p)) for p in sorted(run_dir.glob("*/data/hwts.*.npy"))] == [4, 4, 1]
    lib.finalize()


def test_a_buffer_filled_by_another_thread_waits_for_an_open_batch(tmp_path, monkeypatch):
    """Another thread's full buffer does not write a batch that is half reported."""
    monkeypatch.setattr(lib, "chunk_records", 4)
    run_dir = lib.init(tmp_path)
    opened, reported = threading.Event(), threading.Event()

    def batch() -> None:
        with lib.reporting_batch():
            lib.report_block("hwts", np.zeros(3, rawdata.HWTS_DTYPE))
            opened.set()
            reported.wait(5)
            lib.report_block("step_trace", np.zeros(2, rawdata.STEP_TRACE_DTYPE))

    worker = threading.Thread(target=batch)
    worker.start()
    assert opened.wait(5)
    for _ in range(4):  # the api buffer fills in this thread while the batch is open
        msprof.MsprofReportApi(False, 15000, 1, 7, 100, 250, 0)
    writer().wait()
    assert not list(run_dir.glob("*/data/*.npy"))
    reported.set()
    worker.join(5)
    writer().wait()
    assert _on_disk(run_dir) == {"api": 4, "hwts": 3, "step_trace": 2,
                                 "info.json": {"api": 4, "hwts": 3, "step_trace": 2}}
    lib.finalize()


def test_aging_deletes_the_oldest_aging_chunks_past_the_limit_and_counts_them(tmp_path):
    info = RunInfo({"aged_out": {"chunks": 0, "bytes": 0, "records": {}}}, threading.RLock())
    aging = StorageAging(250, info)
    paths = []
    for i, kind in enumerate(("hwts", "node_basic_info", "hwts", "hwts")):
        path = tmp_path / f"{kind}.{i}.npy"
        path.write_bytes(b"x" * 100)
        paths.append(path)
        aging.account(ChunkFile(str(path), rawdata.RECORD_KINDS[kind].dtype), 100, rawdata.RECORD_KINDS[kind], 10 + i)
    assert not rawdata.RECORD_KINDS["node_basic_info"].aging  # a static description never ages out
    assert [p.exists() for p in paths] == [False, True, False, True]
    assert aging.stored_bytes == 200
    assert info.content["aged_out"] == {"chunks": 2, "bytes": 200, "records": {"hwts": 10 + 12}}
