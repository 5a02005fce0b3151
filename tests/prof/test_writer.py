"""msprof's writer thread and the chunk files it writes block by block."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from geprof_nb import ge
from geprof_nb.prof import rawdata, writer
from geprof_nb.prof.msprof import lib
from geprof_nb.prof.writer import ChunkFile, Writer


def _records(n: int, first: int = 0) -> np.ndarray:
    rec = np.zeros(n, rawdata.HWTS_DTYPE)
    rec["start"] = np.arange(first, first + n) * 1000
    rec["connection_id"] = np.arange(first, first + n)
    return rec


def test_a_chunk_written_block_by_block_is_the_file_np_save_writes(tmp_path):
    blocks = [_records(3), _records(0, 3), _records(1000, 3), _records(7, 1003)]
    chunk = ChunkFile(str(tmp_path / "hwts.000000.npy"), rawdata.HWTS_DTYPE)
    for block in blocks:
        chunk.append(block)
    assert not (tmp_path / "hwts.000000.npy").exists() and (tmp_path / "hwts.000000.tmp").exists()
    size = chunk.close()
    np.save(tmp_path / "expected.npy", np.concatenate(blocks))
    written = (tmp_path / "hwts.000000.npy").read_bytes()
    assert written == (tmp_path / "expected.npy").read_bytes()
    assert size == len(written) and chunk.records == 1010
    assert sorted(p.name for p in tmp_path.iterdir()) == ["expected.npy", "hwts.000000.npy"]


def test_a_chunk_makes_its_directory_and_opens_before_its_first_block(tmp_path):
    path = tmp_path / "device_0" / "data" / "step_trace.000000.npy"
    chunk = ChunkFile(str(path), rawdata.STEP_TRACE_DTYPE, make_dir=True)
    chunk.open()
    header = path.with_suffix(".tmp").read_bytes()  # the header, with room for any length
    np.save(tmp_path / "expected.npy", np.zeros(0, rawdata.STEP_TRACE_DTYPE))
    assert len(header) == len((tmp_path / "expected.npy").read_bytes()) == 256
    chunk.append(np.zeros(2, rawdata.STEP_TRACE_DTYPE))
    chunk.close()
    assert len(np.load(path)) == 2


def test_a_failed_write_ends_the_chunk_keeping_the_whole_records_before_it(tmp_path, monkeypatch):
    """A full disk (or a file-size limit) takes part of a block: the chunk keeps the records written whole
    before the failure, a torn one is cut off, the rest is not written, and ``error`` says why."""
    chunk = ChunkFile(str(tmp_path / "hwts.000000.npy"), rawdata.HWTS_DTYPE)
    chunk.append(_records(2))
    real_write = os.write
    room = [rawdata.HWTS_DTYPE.itemsize + 10]  # one record and 10 bytes of the next fit, then the disk is full

    def filling(fd, data):
        if not room[0]:
            raise OSError(errno.ENOSPC, "No space left on device")
        n = real_write(fd, bytes(memoryview(data).cast("B")[:room[0]]))
        room[0] -= n
        return n

    monkeypatch.setattr(os, "write", filling)
    chunk.append(_records(4, 2))
    monkeypatch.setattr(os, "write", real_write)
    chunk.append(_records(2, 6))  # after a failure the chunk takes nothing more
    assert chunk.records == 3 and chunk.error.errno == errno.ENOSPC
    size = chunk.close()
    kept = np.load(tmp_path / "hwts.000000.npy")
    np.save(tmp_path / "expected.npy", _records(3))
    assert (tmp_path / "hwts.000000.npy").read_bytes() == (tmp_path / "expected.npy").read_bytes()
    assert size == (tmp_path / "hwts.000000.npy").stat().st_size and list(kept["connection_id"]) == [0, 1, 2]


def test_a_chunk_whose_first_write_fails_leaves_nothing_and_says_why_at_close(tmp_path, monkeypatch):
    chunk = ChunkFile(str(tmp_path / "hwts.000000.npy"), rawdata.HWTS_DTYPE)
    chunk.open()
    real_write = os.write

    def full(fd, data):
        raise OSError(errno.EFBIG, "File too large")

    monkeypatch.setattr(os, "write", full)
    chunk.append(_records(2))
    monkeypatch.setattr(os, "write", real_write)
    with pytest.raises(OSError, match="File too large"):
        chunk.close()
    assert list(tmp_path.iterdir()) == [] and chunk.records == 0  # neither the chunk nor its .tmp


def test_a_timer_runs_in_the_writer_thread_while_no_job_comes_until_it_says_stop():
    w = Writer()
    ticks: list[tuple[str, float]] = []
    done = threading.Event()
    start = time.monotonic()

    def tick() -> bool:
        ticks.append((threading.current_thread().name, time.monotonic() - start))
        w.submit(lambda: ticks.append(("job", 0.0)))  # what a tick submits runs in the thread too
        if len([t for t in ticks if t[0] != "job"]) == 3:
            done.set()
            return False
        return True

    w.every(0.05, tick)
    assert done.wait(5)
    w.wait()
    time.sleep(0.2)  # no fourth tick: the timer ended
    names = [name for name, _ in ticks]
    assert names == ["msprof-writer", "job"] * 3
    times = [t for name, t in ticks if name != "job"]
    assert times[0] >= 0.05 and all(b - a >= 0.05 for a, b in zip(times, times[1:]))


def test_a_timer_between_busy_jobs_still_runs_on_time():
    w = Writer()
    ticks = []
    w.every(0.05, lambda: ticks.append(time.monotonic()) or len(ticks) < 2)
    start = time.monotonic()
    for _ in range(30):  # the thread never waits for a job for 0.3 s
        w.submit(lambda: time.sleep(0.01))
    w.wait()
    assert len(ticks) == 2 and ticks[0] - start < 0.2


def test_a_timer_that_raises_is_raised_by_the_next_wait_and_ends():
    w = Writer()
    calls = []

    def broken() -> bool:
        calls.append(1)
        raise ValueError("a bug in a timer")

    w.every(0.01, broken)
    time.sleep(0.2)
    with pytest.raises(ValueError, match="a bug in a timer"):
        w.wait()
    assert calls == [1]


def test_jobs_run_in_the_order_given_and_wait_returns_once_they_ran():
    w = Writer()
    ran: list[int] = []
    release = threading.Event()
    w.submit(lambda: release.wait(5))
    for i in range(50):
        w.submit(lambda i=i: ran.append(i))
    assert ran == []  # the first job holds the thread
    release.set()
    w.wait()
    assert ran == list(range(50))


def test_jobs_from_many_threads_all_run_before_each_threads_wait():
    w = Writer()
    seen: dict[int, list[int]] = {t: [] for t in range(4)}

    def producer(t: int) -> None:
        for i in range(200):
            w.submit(lambda i=i: seen[t].append(i))
        w.wait()
        assert seen[t] == list(range(200))  # every job this thread handed over has run

    threads = [threading.Thread(target=producer, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert all(v == list(range(200)) for v in seen.values())


def test_a_job_that_raises_is_raised_by_the_next_wait_and_the_thread_goes_on():
    w = Writer()
    ran = []

    def broken() -> None:
        raise ValueError("a bug in a job")

    w.submit(broken)
    w.submit(lambda: ran.append(1))
    with pytest.raises(ValueError, match="a bug in a job"):
        w.wait()
    w.submit(lambda: ran.append(2))
    w.wait()
    assert ran == [1, 2]


def test_blocks_reach_the_run_directory_while_the_run_goes_on(tmp_path):
    """The chunk files grow as steps are reported, before any checkpoint: at finalize only the last
    blocks, the headers and the renames are left."""
    opts = {"ge.exec.profilingMode": "1", "geprof.clock": "virtual",
            "ge.exec.profilingOptions": '{"output": "%s", "training_trace": "on"}' % tmp_path}
    assert ge.GEInitialize(opts) == ge.SUCCESS
    try:
        sess = ge.Session()
        sess.add_graph(1, ge.models.mlp(batch_size=4, in_features=16, hidden=(16,)))
        for _ in range(30):  # batches of 8 and 16 steps have been reported
            assert sess.run_graph(1) == ge.SUCCESS
        writer.writer().wait()
        data = lib.run_dir / rawdata.device_dir(0)
        tmp = data / "hwts.000000.tmp"
        assert tmp.exists() and not (data / "hwts.000000.npy").exists()
        n_tasks = int((sess.model(1).table.rt_type != rawdata.RtTaskType.PROFILER_TRACE).sum())
        assert tmp.stat().st_size == 192 + 24 * n_tasks * rawdata.HWTS_DTYPE.itemsize  # 24 steps' records
    finally:
        ge.GEFinalize()
    run_dir = lib.last_run_dir
    assert not list(run_dir.rglob("*.tmp"))
    assert len(np.load(run_dir / rawdata.device_dir(0) / "hwts.000000.npy")) == 30 * n_tasks


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_profiles_with_a_writer_thread_of_its_own(tmp_path):
    """The parent's writer thread does not exist in a child: msprof's writer starts over there (a
    kept reference to the parent's queue would wait for ever)."""
    w = writer.writer()
    release = threading.Event()
    w.submit(lambda: release.wait(5))  # the parent's thread is busy (holding nothing) as it forks
    pid = os.fork()
    if pid == 0:
        code = 1
        signal.alarm(20)  # a child waiting for the parent's thread is killed, and the test fails
        try:
            run_dir = lib.init(tmp_path / "child")
            lib.report_block("hwts", _records(5))
            lib.finalize()
            code = 0 if lib._writer is w and len(np.load(run_dir / rawdata.device_dir(0) / "hwts.000000.npy")) == 5 else 1
        finally:
            os._exit(code)
    release.set()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    w.wait()


def test_the_writer_is_a_daemon_thread_named_for_what_it_is():
    w = writer.writer()
    w.submit(lambda: None)
    w.wait()
    threads = [t for t in threading.enumerate() if t.name == "msprof-writer"]
    assert threads and all(t.daemon for t in threads)
    assert sys.modules["geprof_nb.prof.writer"] is writer


def test_a_wait_interrupted_leaves_no_target_behind():
    w = Writer()
    release = threading.Event()
    w.submit(lambda: release.wait(5))
    real_wait = w._progress.wait

    def interrupted(*args):
        raise KeyboardInterrupt

    w._progress.wait = interrupted
    with pytest.raises(KeyboardInterrupt):
        w.wait()
    w._progress.wait = real_wait
    assert w._targets == []
    release.set()
    w.wait()


EXITS_WITHOUT_FINALIZE = """
import sys, time
import numpy as np
from geprof_nb.prof import rawdata, writer
from geprof_nb.prof.msprof import lib

lib.chunk_records = 4
lib.init(sys.argv[1])
writer.writer().submit(lambda: time.sleep(float(sys.argv[2])))  # a slow disk: the checkpoint is still queued
lib.report_block("hwts", np.zeros(4, rawdata.HWTS_DTYPE))  # full: a checkpoint, which the job does not wait for
print(lib.run_dir, flush=True)
"""  # ... and the script ends: no finalize


def test_a_script_that_ends_without_finalize_keeps_what_it_handed_the_writer(tmp_path):
    done = subprocess.run([sys.executable, "-c", EXITS_WITHOUT_FINALIZE, str(tmp_path), "0.5"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    run_dir = done.stdout.strip()
    chunk = os.path.join(run_dir, rawdata.device_dir(0), "hwts.000000.npy")
    assert len(np.load(chunk)) == 4  # written and renamed into place at the interpreter's exit


def test_drain_gives_up_after_its_timeout_and_says_so():
    w = Writer()
    release = threading.Event()
    w.submit(lambda: release.wait(5))
    assert w.drain(0.05) is False and w._targets == []
    release.set()
    assert w.drain(5) is True


def test_a_cancelled_timer_is_called_no_more():
    w = Writer()
    ticks = []

    def tick() -> bool:
        ticks.append(1)
        return True

    w.every(0.02, tick)
    time.sleep(0.15)
    w.cancel(tick)
    seen = len(ticks)
    time.sleep(0.15)
    assert seen >= 2 and len(ticks) == seen
    w.cancel(tick)  # twice: nothing
