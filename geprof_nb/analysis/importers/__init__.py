"""Readers for profiling output that geprof did not write itself."""

from __future__ import annotations

from pathlib import Path

from ..rundir import RunDirError


def load_path(path: Path, device_id: int = 0):
    """The Profile of a directory in a known foreign layout."""
    raise RunDirError(f"{path} holds no geprof run directory (a PROF_* directory with info.json)")
