"""Readers for profiling output that geprof did not write itself, and the layout detection.

``load_path`` recognises (in this order): a geprof Parquet export (``manifest.json``),
a torch_npu run directory (one holding ``ASCEND_PROFILER_OUTPUT``, whatever its name;
torch_npu names it ``*_ascend_pt``) or its ``ASCEND_PROFILER_OUTPUT``, real msprof
output (``PROF_*`` with ``mindstudio_profiler_output``, or that directory itself), and
directories holding such runs: several ranks (torch_npu run directories with distinct
``profiler_info_<rank>.json``, or ``rank<N>`` dirs) make a
:class:`~..cluster.ClusterProfile`, otherwise the newest run is opened.
"""

from __future__ import annotations

import re
from pathlib import Path

from ...errors import ImportFormatError
from ..arguments import member
from ..cluster import ClusterProfile
from ..profile import Profile, load
from .ascend_pt import OUTPUT_DIR as ASCEND_OUTPUT, AscendPtSource, is_ascend_pt, rank_of, run_timestamp
from .msprof import OUTPUT_DIR as MSPROF_OUTPUT, MsprofSource, find_sets

__all__ = ["AscendPtSource", "ImportFormatError", "MsprofSource", "load_path"]

_RANK_DIR = re.compile(r"rank[_-]?(\d+)", re.IGNORECASE)
_PROF_NAME = re.compile(r"PROF_(\d+)_(\d+)_\w+")


def _layout(path: Path) -> str | None:
    """Which single-run layout ``path`` is (parquet, ascend_pt, msprof or None), from names and the manifest."""
    from ..parquet import has_unreadable_manifest, is_parquet_export

    if not path.is_dir():
        return None
    if is_parquet_export(path):
        return "parquet"
    if path.name == ASCEND_OUTPUT or is_ascend_pt(path):
        return "ascend_pt"
    if (path / MSPROF_OUTPUT).is_dir() or find_sets(path)[0]:
        return "msprof"
    if has_unreadable_manifest(path):
        return "parquet"
    return None


def _open(path: Path, layout: str, device_id: int | None, notes: list[str] | None = None) -> Profile:
    """The Profile of one run; ``device_id`` None: the run's device (msprof data of several: device 0),
    else that device, which the run must have (each of these layouts holds one device's data)."""
    if layout == "parquet":
        from ..parquet import ParquetSource

        profile = Profile(ParquetSource(path, notes))
    elif layout == "ascend_pt":
        profile = Profile(AscendPtSource(path, device_id or 0, notes))
    else:
        profile = Profile(MsprofSource(path, device_id or 0, notes))
    if device_id is not None:
        member("device_id", device_id, [profile.device_id], str(path), "devices")
    return profile


def _newest(runs: list[Path]) -> Path:
    """The newest of several runs by the timestamp in their names
    (``PROF_<seq>_<time>_<tag>``, ``<worker>_<pid>_<time>_ascend_pt``)."""

    def key(p: Path) -> tuple:
        if m := _PROF_NAME.fullmatch(p.name):
            return (m.group(2), int(m.group(1)), p.name)
        return (run_timestamp(p), 0, p.name)

    return max(runs, key=key)


def _cluster(path: Path, device_id: int | None) -> ClusterProfile | None:
    """Several ranks under ``path``: torch_npu run directories (known by their ``ASCEND_PROFILER_OUTPUT``,
    not their names) with distinct ranks, or ``rank<N>`` dirs."""
    children = sorted(c for c in path.iterdir() if c.is_dir())
    by_rank: dict[int, list[Path]] = {}
    for c in children:
        if is_ascend_pt(c) and (r := rank_of(c)) is not None:
            by_rank.setdefault(r, []).append(c)
    notes = []
    if len(by_rank) >= 2:
        chosen = {}
        for r, dirs in sorted(by_rank.items()):
            chosen[r] = _newest(dirs)
            if len(dirs) > 1:
                notes.append(f"rank {r}: {len(dirs)} runs; read the newest, {chosen[r].name}")
        return ClusterProfile(path, {r: _open(d, "ascend_pt", device_id) for r, d in chosen.items()}, notes)
    ranks = {int(m.group(1)): c for c in children if (m := _RANK_DIR.fullmatch(c.name))}
    if len(ranks) >= 2:
        return ClusterProfile(path, {r: load(d, device_id) for r, d in sorted(ranks.items())}, notes)
    return None


def load_path(path: Path, device_id: int | None = None) -> Profile | ClusterProfile:
    """The Profile (or ClusterProfile) of a directory in a known foreign layout (``device_id``:
    default 0; a cluster's ranks each default to their own device)."""
    path = Path(path)
    if not path.is_dir():
        raise ImportFormatError(f"{path}: not a directory; pass a run directory (PROF_*, *_ascend_pt, "
                                "mindstudio_profiler_output, a .geprof_parquet export or a directory of them)")
    layout = _layout(path)
    if layout is not None:
        return _open(path, layout, device_id)
    cluster = _cluster(path, device_id)
    if cluster is not None:
        return cluster
    runs = [(c, lay) for c in sorted(path.iterdir()) if (lay := _layout(c)) is not None]
    if not runs:
        raise ImportFormatError(
            f"{path} holds no geprof run directory (a PROF_* directory with info.json) and no known profiling "
            f"layout: expected a PROF_* directory with {MSPROF_OUTPUT}/ (msprof), a *_ascend_pt directory with "
            f"{ASCEND_OUTPUT}/ (torch_npu), a .geprof_parquet export, or a directory of those")
    newest = _newest([c for c, _ in runs])
    notes = [f"{path} holds {len(runs)} runs; this is the newest, {newest.name}"] if len(runs) > 1 else []
    return _open(newest, dict(runs)[newest], device_id, notes)
