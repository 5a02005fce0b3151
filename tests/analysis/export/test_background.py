"""export.background: files whose chunks a thread writes."""

import threading

import pytest

from geprof_nb.analysis.export.background import BackgroundFile


def test_chunks_are_written_in_order_and_the_file_is_complete_on_leaving(tmp_path):
    with BackgroundFile(tmp_path / "f") as f:
        for i in range(1000):
            f.write(f"{i},".encode() * (i % 7))
    assert (tmp_path / "f").read_bytes() == b"".join(f"{i},".encode() * (i % 7) for i in range(1000))
    assert not [t for t in threading.enumerate() if t.name == "write f"]


def test_a_failed_write_is_raised_in_the_exporting_thread(tmp_path):
    with pytest.raises(TypeError):
        with BackgroundFile(tmp_path / "f") as f:
            f.write(b"a")
            f.write(5)  # not bytes: the thread's write fails
            f.write(b"b")


def test_an_error_while_exporting_still_closes_the_file(tmp_path):
    with pytest.raises(ValueError):
        with BackgroundFile(tmp_path / "f") as f:
            f.write(b"written")
            raise ValueError
    assert (tmp_path / "f").read_bytes() == b"written"
