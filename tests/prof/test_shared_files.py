"""Files finished runs hold byte for byte under one name are kept once: hard links to the first copy, each run
whole."""

from __future__ import annotations

import os
from pathlib import Path

from geprof_nb.prof import shared_files


def _runs(tmp_path: Path, contents: list[dict[str, bytes]]) -> list[Path]:
    runs = []
    for i, files in enumerate(contents):
        run = tmp_path / f"rank_{i}" / "PROF_1"
        for place, data in files.items():
            (run / place).parent.mkdir(parents=True, exist_ok=True)
            (run / place).write_bytes(data)
        runs.append(run)
    return runs


def _inode(path: Path) -> int:
    return path.stat().st_ino


def test_equal_files_at_the_same_place_become_links_to_the_first_run(tmp_path):
    static, other = b"static description " * 50, b"STATIC DESCRIPTION " * 50  # same size, other bytes
    runs = _runs(
        tmp_path,
        [
            {"host/data/tensor_info.npy": static, "device_1/data/hwts.npy": b"times of rank 0", "info.json": b"{0}"},
            {"host/data/tensor_info.npy": static, "device_1/data/hwts.npy": b"times of rank 1", "info.json": b"{1}"},
            {"host/data/tensor_info.npy": other, "device_1/data/hwts.npy": b"times of rank 0"},
            {"host/data/tensor_info.npy": other, "device_3/data/tensor_info.npy": static, "op_cost.npy": static},
        ],
    )
    done = shared_files.link_identical(runs)
    info = [r / "host/data/tensor_info.npy" for r in runs]
    assert _inode(info[1]) == _inode(info[0]) and info[0].stat().st_nlink == 3
    assert _inode(info[3]) == _inode(info[2]) != _inode(info[0])
    # the same name and bytes in another folder (another device's) are linked; the same bytes under another
    # name, and the same size with other bytes, stay copies
    assert _inode(runs[3] / "device_3/data/tensor_info.npy") == _inode(info[0])
    assert _inode(runs[3] / "op_cost.npy") != _inode(info[0])
    assert _inode(runs[1] / "device_1/data/hwts.npy") != _inode(runs[0] / "device_1/data/hwts.npy")
    # rank 2's hwts equals rank 0's: linked too (equal bytes are equal, whatever their kind)
    assert _inode(runs[2] / "device_1/data/hwts.npy") == _inode(runs[0] / "device_1/data/hwts.npy")
    assert (done.files, done.bytes, done.failed) == (4, 3 * len(static) + len(b"times of rank 0"), 0)
    assert [p.read_bytes() for p in info] == [static, static, other, other]
    assert not list(tmp_path.rglob("*.link"))


def test_a_link_that_fails_keeps_the_copy(tmp_path, monkeypatch):
    runs = _runs(tmp_path, [{"a.npy": b"same"}, {"a.npy": b"same"}])

    def refuse(src, dst):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", refuse)
    done = shared_files.link_identical(runs)
    assert (done.files, done.failed) == (0, 1)
    assert (runs[1] / "a.npy").read_bytes() == b"same" and (runs[1] / "a.npy").stat().st_nlink == 1
    assert not list(tmp_path.rglob("*.link"))


def test_a_second_pass_links_nothing_more(tmp_path):
    runs = _runs(tmp_path, [{"a.npy": b"same"}, {"a.npy": b"same"}, {"a.npy": b"same"}])
    assert shared_files.link_identical(runs).files == 2
    again = shared_files.link_identical(runs)
    assert (again.files, again.failed) == (0, 0)
    assert (runs[2] / "a.npy").stat().st_nlink == 3


def test_files_that_begin_alike_are_compared_to_their_end(tmp_path):
    head = b"h" * 8192
    runs = _runs(tmp_path, [{"a.npy": head + b"x"}, {"a.npy": head + b"y"}, {"a.npy": head + b"x"}])
    done = shared_files.link_identical(runs)
    assert done.files == 1
    assert _inode(runs[2] / "a.npy") == _inode(runs[0] / "a.npy") != _inode(runs[1] / "a.npy")
    assert (runs[1] / "a.npy").read_bytes() == head + b"y"
