"""Helpers of the reliability suite (imported by its conftest and test modules).

* :class:`EarlierRun`: a finished run made before a bad input, with a fingerprint of
  its files, so a case can assert that the data collected before the error is still
  on disk, unchanged and loadable.
* :class:`FaultyDisk`: a fault-injecting file system for everything under one
  directory: after ``allow`` write operations every further one fails with ``errno``
  (``ENOSPC``: a full disk; ``EROFS``/``EACCES`` with ``allow=0``: not writable).
  Tests run as root here, so permissions cannot stand in for an unwritable
  directory; and a small tmpfs needs privileges CI does not have.
* small graph builders and :func:`profiled_ge` / :func:`run_steps`.
"""

from __future__ import annotations

import errno as errno_mod
import hashlib
import json
import os
import shutil
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
