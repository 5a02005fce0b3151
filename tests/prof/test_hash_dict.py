"""prof/hash_dict.py: string ids, the process's dictionary, and each run's hash_dict.jsonl."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np

from geprof_nb.prof import hash_dict, msprof, rawdata
from geprof_nb.prof.hash_dict import HashDictionary, HashFile, hash_id
from geprof_nb.prof.msprof import lib
from geprof_nb.prof.writer import RunLocation


def test_an_id_is_the_strings_blake2b_64_bits_little_endian():
    import hashlib

    assert hash_id("conv1/Conv2D") == int.from_bytes(hashlib.blake2b(b"conv1/Conv2D", digest_size=8).digest(),
                                                     "little")
    assert msprof.hash_id is hash_id  # msprof's public name for it


def test_get_hash_ids_learns_new_strings_in_order_once(tmp_path):
    run_dir = lib.init(tmp_path)
    known = lib.get_hash_id("fc1/MatMul")
    names = ["fc1/MatMul", "", "hash_ids_test/a", "hash_ids_test/b", "hash_ids_test/a", ""]
    ids = lib.get_hash_ids(names)
    assert ids == [known, 0, msprof.hash_id("hash_ids_test/a"), msprof.hash_id("hash_ids_test/b"),
                   msprof.hash_id("hash_ids_test/a"), 0]
    assert lib.get_hash_ids(names) == ids  # all known now: the lookup path
    lib.report_block("hwts", np.zeros(1, rawdata.HWTS_DTYPE))  # the dictionary is written with a chunk
    lib.finalize()
    lines = [json.loads(line)["s"] for line in (run_dir / rawdata.HASH_DICT_FILE).read_text().splitlines()]
    assert lines.count("hash_ids_test/a") == 1 and lines.count("hash_ids_test/b") == 1 and "" not in lines
    assert lines.index("hash_ids_test/a") < lines.index("hash_ids_test/b")


def _hash_file(dictionary: HashDictionary, lock: threading.RLock, failures: list) -> HashFile:
    return HashFile(dictionary, lock, lambda what, exc: failures.append((what, exc.errno)), lambda: True)


def test_a_run_file_appends_only_the_lines_it_does_not_have(tmp_path):
    lock = threading.RLock()
    d = HashDictionary(lock)
    d.get_hash_id("a")
    f = _hash_file(d, lock, [])
    assert f.behind and f.unsubmitted
    f.submitted_all()
    f.write(RunLocation(tmp_path))
    d.get_hash_id("b")
    d.get_hash_id("a")  # known: no second line
    f.write(RunLocation(tmp_path))
    f.write(RunLocation(tmp_path))  # nothing new
    lines = [json.loads(line) for line in (tmp_path / rawdata.HASH_DICT_FILE).read_text().splitlines()]
    assert lines == [{"id": str(hash_id("a")), "s": "a"}, {"id": str(hash_id("b")), "s": "b"}]
    assert not f.behind


def test_a_failed_append_is_noted_and_written_again_on_a_line_of_its_own(tmp_path, monkeypatch):
    import errno

    from geprof_nb.prof import hash_dict

    lock = threading.RLock()
    d = HashDictionary(lock)
    failures: list = []
    f = _hash_file(d, lock, failures)
    d.get_hash_id("x")
    f.write(RunLocation(tmp_path))
    d.get_hash_id("y")
    real_open = open

    def full_disk(path, mode="r", *args, **kwargs):
        handle = real_open(path, mode, *args, **kwargs)
        handle.write(b'{"id": "1')  # part of a line reaches the disk before it fills
        handle.close()
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(hash_dict, "open", full_disk, raising=False)
    f.write(RunLocation(tmp_path))
    assert failures == [(rawdata.HASH_DICT_FILE, errno.ENOSPC)] and f.behind and f.line_open
    monkeypatch.undo()
    f.write(RunLocation(tmp_path))
    text = (tmp_path / rawdata.HASH_DICT_FILE).read_text().splitlines()
    assert text[0] == json.dumps({"id": str(hash_id("x")), "s": "x"}) and text[1] == '{"id": "1'
    assert json.loads(text[2]) == {"id": str(hash_id("y")), "s": "y"}  # only the cut line is damaged
    assert not f.behind and not f.line_open


def test_a_run_killed_before_it_learned_a_name_has_an_empty_dictionary_not_a_missing_one(tmp_path, monkeypatch):
    """A fresh process's first records are ACL calls naming a model by id: a kill then (0.15 s into a run) left
    records of a hashed kind and no hash_dict.jsonl, which the reader called missing (the names lost).  The run's
    file is made as it opens."""
    from geprof_nb.analysis.rundir import RunDir

    monkeypatch.setattr(lib, "hashes", HashDictionary(lib._lock))  # a process that learned no string yet
    run_dir = lib.init(tmp_path)
    assert (run_dir / rawdata.HASH_DICT_FILE).read_bytes() == b""
    msprof.MsprofReportApi(False, rawdata.ReportLevel.ACL, 0x0A0003, 7, 100, 250, 1)  # item 1: the model id
    lib.flush()  # what a timed checkpoint puts on disk before the kill
    on_disk = RunDir(run_dir)
    assert on_disk.info["status"] == "running" and len(on_disk.load("api")) == 1
    assert on_disk.hashes == {} and on_disk.damaged == []
    lib.finalize()


def _dictionary(run: Path, *names: str, torn: bytes = b"") -> list[bytes]:
    lines = [(json.dumps({"id": str(hash_dict.hash_id(n)), "s": n}) + "\n").encode() for n in names]
    run.mkdir(parents=True)
    (run / rawdata.HASH_DICT_FILE).write_bytes(b"".join(lines) + torn)
    return lines


def test_runs_that_begin_alike_share_their_first_common_lines(tmp_path):
    """A cluster stage's ranks: the lines up to their first difference move to a file equal in each run."""
    a = _dictionary(tmp_path / "a", "embed", "layer0", "group 10.0.0.1", "tail")
    b = _dictionary(tmp_path / "b", "embed", "layer0", "group 10.0.0.2")
    c = _dictionary(tmp_path / "c", "layers.40", "group 10.0.0.9")  # another stage: alone, left whole
    d = _dictionary(tmp_path / "d", "embed", "layer0", torn=b'{"id": "12')  # cut off: left whole
    assert hash_dict.share_lines([tmp_path / n for n in "abcd"]) == 2
    for run, lines in (("a", a), ("b", b)):
        assert (tmp_path / run / rawdata.HASH_DICT_SHARED_FILE).read_bytes() == b"".join(a[:2])
        assert (tmp_path / run / rawdata.HASH_DICT_FILE).read_bytes() == b"".join(lines[2:])
    assert (tmp_path / "c" / rawdata.HASH_DICT_FILE).read_bytes() == b"".join(c)
    assert (tmp_path / "d" / rawdata.HASH_DICT_FILE).read_bytes() == b"".join(d) + b'{"id": "12'
    assert not (tmp_path / "c" / rawdata.HASH_DICT_SHARED_FILE).exists()
    assert not (tmp_path / "d" / rawdata.HASH_DICT_SHARED_FILE).exists()
    assert hash_dict.share_lines([tmp_path / n for n in "ab"]) == 0  # split already: left as it is
    assert not list(tmp_path.rglob("*.tmp"))
