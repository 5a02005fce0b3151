"""prof/handoff.py: what a run hands the writer thread, and when: checkpoints, batches of steps, storage aging."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

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
    """A crash inside a batch of steps must not leave its task records in a closed chunk without its step trace:
    a buffer that fills is sealed as a chunk and closed, with every other kind's, once the batch is over."""
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


def _timed_run(tmp_path, interval: str):
    """A run with ``checkpoint_interval`` ``interval``: 3 hwts records (a block: in its growing chunk at once),
    an api row (gathered in memory), a name and a note, then nothing more is reported."""
    run_dir = lib.init(tmp_path / interval, {"checkpoint_interval": interval})
    lib.report_block("hwts", np.zeros(3, rawdata.HWTS_DTYPE))
    msprof.MsprofReportApi(False, 15000, 1, 7, 100, 250, lib.get_hash_id("timed/op"))
    lib.add_note("a note made after the last record")
    return run_dir


def test_a_timed_checkpoint_puts_rows_names_and_metadata_on_disk_without_closing_a_chunk(tmp_path):
    """No buffer is full and no call comes after the note: within an interval (0.1 s) the rows are in their
    growing chunk, the name in the hash dictionary and the note and the counts in info.json; a kill now loses
    nothing.  An hour between checkpoints: only the block is there."""
    from geprof_nb.analysis.rundir import RunDir

    run_dir = _timed_run(tmp_path, "0.1")
    time.sleep(0.5)
    info = json.loads((run_dir / rawdata.INFO_FILE).read_text())
    assert info["notes"] == ["a note made after the last record"] and info["records"] == {"hwts": 3, "api": 1}
    assert "timed/op" in (run_dir / rawdata.HASH_DICT_FILE).read_text()
    assert not list(run_dir.rglob("*.npy"))  # no chunk was closed
    on_disk = RunDir(run_dir)  # what a kill now leaves: status running, the growing chunks salvaged
    assert len(on_disk.load("hwts")) == 3 and on_disk.load("api")["item_id"].tolist() == [lib.get_hash_id("timed/op")]
    assert on_disk.missing == []
    written = (run_dir / rawdata.INFO_FILE).stat().st_mtime_ns
    time.sleep(0.3)  # nothing changed: info.json is not written again
    assert (run_dir / rawdata.INFO_FILE).stat().st_mtime_ns == written
    lib.finalize()
    (run_dir / rawdata.INFO_FILE).write_text("{}")  # a finalised run has no timer: nothing rewrites it
    time.sleep(0.3)
    assert (run_dir / rawdata.INFO_FILE).read_text() == "{}"

    rarely = _timed_run(tmp_path, "3600")
    time.sleep(0.5)
    info = json.loads((rarely / rawdata.INFO_FILE).read_text())
    assert "notes" not in info and info["records"] == {}
    assert len(RunDir(rarely).load("hwts")) == 3 and len(RunDir(rarely).load("api")) == 0  # the row is in memory
    lib.finalize()
    assert len(RunDir(rarely).load("api")) == 1


def test_a_timed_checkpoint_keeps_every_record_of_rows_and_blocks_reported_meanwhile(tmp_path, monkeypatch):
    """Timed checkpoints every 0.1 s while 4 threads report rows and blocks for 1 s: nothing is lost or written
    twice (the rows handed over at a checkpoint leave the buffer; a chunk that fills still closes)."""
    monkeypatch.setattr(lib, "chunk_records", 500)
    run_dir = lib.init(tmp_path, {"checkpoint_interval": "0.1"})
    stop = time.monotonic() + 1.0
    sent = {t: 0 for t in range(4)}

    def report(t: int) -> None:
        while time.monotonic() < stop:
            msprof.MsprofReportApi(False, 15000, 1, t, sent[t], sent[t], 0)
            block = np.zeros(2, rawdata.HWTS_DTYPE)
            block["connection_id"] = t
            block["start"] = [2 * sent[t], 2 * sent[t] + 1]
            lib.report_block("hwts", block)
            sent[t] += 1

    threads = [threading.Thread(target=report, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(10)
    lib.finalize()
    from geprof_nb.analysis.rundir import RunDir

    run = RunDir(run_dir)
    api, hwts = run.load("api"), run.load("hwts")
    for t in range(4):
        assert sorted(api[api["thread_id"] == t]["begin"].tolist()) == list(range(sent[t]))
        assert sorted(hwts[hwts["connection_id"] == t]["start"].tolist()) == list(range(2 * sent[t]))
    assert len(list(run_dir.glob("*/data/hwts.*.npy"))) > 2 and run.info["records"] == {"api": len(api),
                                                                                         "hwts": len(hwts)}


def test_the_names_reach_the_disk_before_any_block_whose_records_use_them(tmp_path, monkeypatch):
    """A kill right after any block write finds every string its records name in hash_dict.jsonl.  Rows of a chunk
    that fills inside a batch are handed over when it is sealed, before the checkpoint that wrote the names: a run
    SIGKILLed 0.15 s in held api records and no dictionary (its op names lost)."""
    monkeypatch.setattr(lib, "chunk_records", 4)
    named = []  # per api block written: the names of its item ids that the dictionary on disk holds
    real_append = ChunkFile.append

    def append(chunk: ChunkFile, block: np.ndarray) -> None:
        real_append(chunk, block)
        if "item_id" in block.dtype.names:
            path = Path(chunk.location.path) / rawdata.HASH_DICT_FILE
            lines = path.read_text().splitlines() if path.exists() else []
            on_disk = {int(entry["id"]): entry["s"] for entry in map(json.loads, lines)}
            named.append([on_disk.get(int(i)) for i in block["item_id"]])

    monkeypatch.setattr(ChunkFile, "append", append)
    lib.init(tmp_path)
    with lib.reporting_batch():
        for k in range(6):
            msprof.MsprofReportApi(False, 15000, 1, 7, 100 + k, 250 + k, lib.get_hash_id(f"names_first/op{k}"))
    lib.finalize()
    assert named == [[f"names_first/op{k}" for k in range(4)], ["names_first/op4", "names_first/op5"]]
