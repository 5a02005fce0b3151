"""Helpers of the reliability suite (imported by its conftest and test modules).

* :class:`EarlierRun`: a finished run made before a bad input, with a fingerprint of
  its files, so a case can assert that the data collected before the error is still
  on disk, unchanged and loadable.
* :class:`FaultyDisk`: a fault-injecting file system for everything under one
  directory: after ``allow`` write operations every further one fails with ``errno``
  (``ENOSPC``: a full disk; ``EROFS``/``EACCES`` with ``allow=0``: not writable).
  Tests run as root here, so permissions cannot stand in for an unwritable
  directory; and a small tmpfs needs privileges CI does not have.
* small graph builders and :func:`profiled_ge` / :func:`run_steps`;
* :func:`put_oddity` (a directory, a link loop, a FIFO, an unreadable file where a data file should be),
  :func:`read_everything` (every table of a loaded run) and :func:`in_time` (a call that must not hang).
"""

from __future__ import annotations

import errno as errno_mod
import hashlib
import json
import os
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.prof import hash_dict, writer
from helpers.geprof_testing import run_profiled_session


def tiny_mlp() -> ge.Graph:
    """A 2-layer training MLP: a Data node, FP/BP points, one AllReduce bucket (world_size 2)."""
    return ge.models.mlp(batch_size=4, in_features=16, hidden=(16,), world_size=2)


def fingerprint(root: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under ``root``."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@dataclass
class EarlierRun:
    """A complete run directory under ``output`` and what loading it gave."""

    output: Path
    run_dir: Path
    n_ops: int
    steps: int
    notes: list[str]
    files: dict[str, str] = field(default_factory=dict)

    def copy_to(self, output: Path) -> "EarlierRun":
        output.mkdir(parents=True, exist_ok=True)
        dst = output / self.run_dir.name
        shutil.copytree(self.run_dir, dst)
        return EarlierRun(output, dst, self.n_ops, self.steps, self.notes, fingerprint(dst))

    def assert_intact(self) -> None:
        """Still there, byte for byte, and it loads with the same tables."""
        assert self.run_dir.is_dir(), f"{self.run_dir} is gone"
        assert fingerprint(self.run_dir) == self.files, f"{self.run_dir} was changed"
        p = geprof_nb.load(self.run_dir)
        assert p.complete and p.notes == self.notes
        assert len(p.op_summary) == self.n_ops and len(p.step_trace) == self.steps

    def runs_in_output(self) -> list[str]:
        return sorted(p.name for p in self.output.iterdir() if p.name.startswith("PROF_"))


def make_earlier_run(tmp: Path) -> EarlierRun:
    run = run_profiled_session(tmp / "out", tiny_mlp(), 2)
    p = run.profile
    return EarlierRun(tmp / "out", p.path, len(p.op_summary), len(p.step_trace), list(p.notes),
                      fingerprint(p.path))


def profiled_ge(output: Path, **profiling: Any) -> None:
    """GEInitialize on the virtual clock with profiling into ``output`` (training trace on)."""
    opts = {"output": str(output), "training_trace": "on", **profiling}
    status = ge.GEInitialize({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": json.dumps(opts),
                              "geprof.clock": "virtual"})
    assert status == ge.SUCCESS, ge.GEGetErrorMsg()


def run_steps(sess: ge.Session, graph_id: int, steps: int) -> None:
    for _ in range(steps):
        assert sess.run_graph(graph_id) == ge.SUCCESS, ge.GEGetErrorMsg()


def n_kernels(sess: ge.Session, graph_id: int = 1) -> int:
    return sum(1 for k in sess.model(graph_id).table.kernels if k is not None)


class FaultyDisk:
    """Writes under ``root`` fail with ``errno`` once ``allow`` of them have succeeded.

    Counted write operations: ``Path.mkdir``, ``Path.write_text``/``write_bytes``, the hash dictionary's
    ``open`` for writing or appending and the writer thread's chunk files.  ``failures`` counts
    the refused ones.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch, root: Path, allow: int = 0,
                 errno: int = errno_mod.ENOSPC) -> None:
        self.root = Path(root).resolve()
        self.allow = allow
        self.errno = errno
        self.writes = 0
        self.failures = 0
        self.enabled = True
        real_mkdir, real_write_text, real_write_bytes = Path.mkdir, Path.write_text, Path.write_bytes

        def mkdir(path, *args, **kwargs):
            self._check(path)
            return real_mkdir(path, *args, **kwargs)

        def write_text(path, *args, **kwargs):
            self._check(path)
            return real_write_text(path, *args, **kwargs)

        def write_bytes(path, *args, **kwargs):
            self._check(path)
            return real_write_bytes(path, *args, **kwargs)

        def opener(file, mode="r", *args, **kwargs):
            if any(c in mode for c in "wax+"):
                self._check(Path(file))
            return open(file, mode, *args, **kwargs)

        monkeypatch.setattr(Path, "mkdir", mkdir)
        monkeypatch.setattr(Path, "write_text", write_text)
        monkeypatch.setattr(Path, "write_bytes", write_bytes)
        real_create = writer._create

        def create(path):
            self._check(Path(path))
            return real_create(path)

        monkeypatch.setattr(hash_dict, "open", opener, raising=False)  # the hash dictionary's appends
        monkeypatch.setattr(writer, "_create", create)

    def _check(self, path: Path) -> None:
        if not self.enabled:
            return
        try:
            inside = Path(os.path.abspath(path)).is_relative_to(self.root)
        except (TypeError, ValueError):
            inside = False
        if not inside:
            return
        if self.writes >= self.allow:
            self.failures += 1
            raise OSError(self.errno, os.strerror(self.errno), str(path))
        self.writes += 1


#: What can be where a data file should be, and the words the readers name it with (geprof_nb.analysis.files).
ODDITIES = {
    "directory": "a directory, not a file",
    "link loop": "a symbolic link loop",
    "link to nothing": "a symbolic link to ",
    "FIFO": "a FIFO (named pipe), not a file",
    "unreadable": "not readable (input/output error",
}


def put_oddity(path: Path, kind: str) -> None:
    """Replace the file at ``path`` with one of :data:`ODDITIES`; "unreadable" is a link to ``/proc/self/mem``,
    a regular file every read of which fails with EIO, for root too (chmod 000 does not stop root)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    if kind == "directory":
        path.mkdir()
    elif kind == "link loop":
        path.symlink_to(path.name)
    elif kind == "link to nothing":
        path.symlink_to(path.with_name(path.name + ".gone"))
    elif kind == "FIFO":
        os.mkfifo(path)
    elif kind == "unreadable":
        if not Path("/proc/self/mem").exists():
            pytest.skip("no /proc/self/mem to read with EIO")
        path.symlink_to("/proc/self/mem")
    else:
        raise ValueError(kind)


#: Every table a Profile gives (what a reader of a run may ask for).
TABLES = ("op_summary", "op_statistic", "step_trace", "task_time", "api_statistic", "host_events", "msprof_tx",
          "communication_statistic", "hccl_tasks", "communication_time", "aicpu", "operator_memory", "memory_record",
          "step_breakdown")


def read_everything(run) -> list[str]:
    """Every table and the notes of a Profile (a ClusterProfile: of each rank), as a reader would ask for them;
    returns the notes."""
    profiles = [run.rank(r) for r in run.ranks] if hasattr(run, "ranks") else [run]
    notes = []
    for p in profiles:
        for table in TABLES:
            getattr(p, table)
        p.step_split  # noqa: B018 - the explorer's headline figure
        p.info  # noqa: B018
        notes += list(p.notes)
    return notes


def in_time(fn, seconds: float = 60.0):
    """``fn()`` in a thread that must end within ``seconds`` (a read that waits on a FIFO would not): its
    result, or what it raised, raised here."""
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s (waiting on a FIFO?)"
    if "error" in box:
        raise box["error"]
    return box.get("value")
