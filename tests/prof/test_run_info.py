"""prof/run_info.py: a run's info.json as the library holds it and writes it."""

from __future__ import annotations

import errno
import json
import threading
from pathlib import Path

import pytest

from geprof_nb.prof import rawdata
from geprof_nb.prof.run_info import LIBRARY_KEYS, RunInfo


def _info() -> RunInfo:
    return RunInfo({"status": "running", "devices": {}, "pmu_events": {}, "records": {}}, threading.RLock())


def test_the_librarys_own_keys_are_refused_by_name():
    info = _info()
    for key in LIBRARY_KEYS:
        with pytest.raises(ValueError, match=rf"^info.json key '{key}' is the library's own$"):
            info.set(key, 1)
    info.set("magic", {"steps": 3})
    assert info.content["magic"] == {"steps": 3} and info.dirty


def test_notes_are_kept_once_in_order_and_counts_add_up():
    info = _info()
    for text in ("b", "a", "b"):
        info.add_note(text)
    info.count_dropped("host_event", 3)
    info.count_dropped("host_event", 4)
    info.register_type(5000, 7, "Conv")
    assert info.notes == ["b", "a"] and info.content["dropped"] == {"host_event": 7}
    assert info.content["type_info"] == {"5000": {"7": "Conv"}}


def test_a_written_file_is_the_metadata(tmp_path):
    info = _info()
    info.set_device(0, {"chip": "910B"})
    info.set_pmu_events("aic", ["a", "b"])
    info.write(tmp_path)
    assert json.loads((tmp_path / rawdata.INFO_FILE).read_text()) == info.content
    assert not info.dirty and info.on_disk and not (tmp_path / (rawdata.INFO_FILE + ".tmp")).exists()


def test_a_failed_write_keeps_the_last_file_and_is_noted_once_per_reason(tmp_path, monkeypatch):
    info = _info()
    info.write(tmp_path)
    before = (tmp_path / rawdata.INFO_FILE).read_bytes()
    info.content["status"] = "complete"

    def full(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", full)
    info.write(tmp_path)
    info.write(tmp_path)
    assert (tmp_path / rawdata.INFO_FILE).read_bytes() == before
    assert not info.on_disk and info.dirty  # tried again with the next chunk
    assert info.notes == ["writing into the run directory failed (No space left on device, first at info.json); "
                          "collection went on"]
    assert info.snapshot()["status"] == "complete"
    with pytest.raises(OSError):
        info.write(tmp_path, strict=True)  # the first write of a run raises: no run is open then


def test_records_a_failed_chunk_held_are_counted():
    info = _info()
    info.write_failed("device_0/data/hwts.000003.npy", OSError(errno.EIO, "Input/output error"), "hwts", 40)
    info.write_failed("device_0/data/hwts.000004.npy", OSError(errno.EIO, "Input/output error"), "hwts", 2)
    assert info.content["write_failed"] == {"hwts": 42}
    assert len(info.notes) == 1 and "first at device_0/data/hwts.000003.npy" in info.notes[0]


def test_writes_from_two_threads_at_once_never_fail(tmp_path):
    """The writer thread and a direct write share info.json's temporary file: one at a time (two at once made
    one rename fail, and the run was said to hold an older info.json)."""
    info = _info()
    failures: list[str] = []
    info.write_failed = lambda name, exc: failures.append(f"{name}: {exc}")
    barrier = threading.Barrier(4)

    def write(tag: int) -> None:
        barrier.wait()
        for i in range(200):
            info.replace(tmp_path, json.dumps({"writer": tag, "i": i}).encode())

    threads = [threading.Thread(target=write, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == [] and info.on_disk
    assert json.loads((tmp_path / rawdata.INFO_FILE).read_bytes())["i"] == 199
    assert not (tmp_path / (rawdata.INFO_FILE + ".tmp")).exists()
