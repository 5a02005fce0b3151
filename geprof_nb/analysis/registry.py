"""The one way to open a run: which layout a path holds, and the Source that reads it.

:func:`load` (``geprof_nb.load``) opens, in this order:

1. a geprof run directory (``PROF_*`` with ``info.json``), or the newest run (or simulated cluster
   root, ``CLUSTER_*``) directly under an output directory;
2. one run in a layout of :data:`LAYOUTS`: a geprof Parquet export (``manifest.json``), a torch_npu
   run directory (one holding ``ASCEND_PROFILER_OUTPUT``, whatever its name; torch_npu names it
   ``*_ascend_pt``) or its ``ASCEND_PROFILER_OUTPUT``, with text output or (without text) its
   ``ascend_pytorch_profiler_<rank>.db``, real msprof output (``PROF_*`` with
   ``mindstudio_profiler_output``, or that directory itself, or without text its ``msprof_<ts>.db``), or a
   Parquet export whose manifest cannot be read (opening it names the manifest and the error); a
   ``.db`` file of torch_npu or msprof is read as the run it belongs to (the way to read the DB of a run
   that has text output too);
3. several ranks: torch_npu run directories with distinct ``profiler_info_<rank>.json`` (the newest
   run of each rank), msprof DB runs whose ``info.json`` names distinct ranks, or ``rank<N>`` directories
   (each opened as here) make a :class:`~.cluster.profile.ClusterProfile`;
4. a directory of runs in those layouts: the newest, with a note saying so.

A new kind of run is a :class:`Layout` added to :data:`LAYOUTS`: how to tell it from its directory
and the Source that reads it; nothing else opens runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..errors import ImportFormatError
from .arguments import integer, member
from .cluster.profile import ClusterProfile
from .profile import Profile
from .rundir import RunDir, is_run_dir, newest_run
from .sources.ascend_pt import OUTPUT_DIR as ASCEND_OUTPUT
from .sources.ascend_pt import AscendPtSource, is_ascend_pt, rank_of, run_timestamp
from .sources.db import DbSource, db_file, msprof_db, msprof_rank, torch_npu_db
from .sources.msprof import OUTPUT_DIR as MSPROF_OUTPUT
from .sources.msprof import MsprofSource, find_sets
from .sources.parquet import ParquetSource, has_unreadable_manifest, is_parquet_export
from .sources.source import Source

_RANK_DIR = re.compile(r"rank[_-]?(\d+)", re.IGNORECASE)
_PROF_NAME = re.compile(r"PROF_(\d+)_(\d+)_\w+")


@dataclass(frozen=True)
class Layout:
    """A kind of single run a directory can hold, other than a geprof run directory."""

    name: str
    #: Whether a directory is such a run, from its names and small files (never its tables).
    detect: Callable[[Path], bool]
    #: The Source of the run at a path, for a device id (0 unless one was asked for), with notes for the reader.
    source: Callable[[Path, int, list[str] | None], Source]


def _parquet_source(path: Path, device_id: int, notes: list[str] | None) -> Source:
    """A Parquet export holds the one device it was exported from."""
    return ParquetSource(path, notes)


def _torch_npu_text(path: Path) -> bool:
    output = path if path.name == ASCEND_OUTPUT else path / ASCEND_OUTPUT
    return (output / "kernel_details.csv").is_file()


def _msprof_text(path: Path) -> bool:
    return (path / MSPROF_OUTPUT).is_dir() or bool(find_sets(path)[0])


PARQUET = Layout("parquet", is_parquet_export, _parquet_source)
TORCH_NPU_DB = Layout("db", lambda path: torch_npu_db(path) is not None and not _torch_npu_text(path), DbSource)
ASCEND_PT = Layout("ascend_pt", lambda path: path.name == ASCEND_OUTPUT or is_ascend_pt(path), AscendPtSource)
MSPROF_DB = Layout("msprof_db", lambda path: msprof_db(path) is not None and not _msprof_text(path), DbSource)
MSPROF = Layout("msprof", _msprof_text, MsprofSource)
DAMAGED_PARQUET = Layout("parquet", has_unreadable_manifest, _parquet_source)
#: The single-run layouts, in the order they are tried.
LAYOUTS: tuple[Layout, ...] = (PARQUET, TORCH_NPU_DB, ASCEND_PT, MSPROF_DB, MSPROF, DAMAGED_PARQUET)


def layout_of(path: Path) -> Layout | None:
    """The layout of the single run ``path`` holds (the first of :data:`LAYOUTS` that detects it), or None."""
    if not path.is_dir():
        return None
    return next((layout for layout in LAYOUTS if layout.detect(path)), None)


def _open(path: Path, layout: Layout, device_id: int | None, notes: list[str] | None = None) -> Profile:
    """The Profile of one run; ``device_id`` None: the run's device (msprof data of several: device 0),
    else that device, which the run must have (each of these layouts holds one device's data)."""
    if layout in (ASCEND_PT, MSPROF) and (file := db_file(path)) is not None:
        notes = [*(notes or []), f"{path} holds DB output ({file.name}) beside the text output read here; "
                                 f"load('{file}') reads the DB"]
    profile = Profile(layout.source(path, device_id or 0, notes))
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
    not their names) or msprof DB runs with distinct ranks, or ``rank<N>`` dirs."""
    children = sorted(c for c in path.iterdir() if c.is_dir())
    by_rank: dict[int, list[Path]] = {}
    for c in children:
        if is_ascend_pt(c) and (r := rank_of(c)) is not None:
            by_rank.setdefault(r, []).append(c)
        elif msprof_db(c) is not None and (r := msprof_rank(c)) is not None:
            by_rank.setdefault(r, []).append(c)
    notes = []
    if len(by_rank) >= 2:
        chosen = {}
        for r, dirs in sorted(by_rank.items()):
            chosen[r] = _newest(dirs)
            if len(dirs) > 1:
                notes.append(f"rank {r}: {len(dirs)} runs; read the newest, {chosen[r].name}")
        return ClusterProfile(path, {r: _open(d, layout_of(d) or ASCEND_PT, device_id) for r, d in chosen.items()},
                              notes)
    ranks = {int(m.group(1)): c for c in children if (m := _RANK_DIR.fullmatch(c.name))}
    if len(ranks) >= 2:
        return ClusterProfile(path, {r: open_run(d, device_id) for r, d in sorted(ranks.items())}, notes)
    return None


def _open_foreign(path: Path, device_id: int | None) -> Profile | ClusterProfile:
    """The Profile (or ClusterProfile) of a directory in a layout of :data:`LAYOUTS`, of several ranks,
    or holding such runs (steps 2-4 of the module docstring)."""
    if path.is_file() and db_file(path) is not None:
        return _open(path, TORCH_NPU_DB, device_id)
    if not path.is_dir():
        raise ImportFormatError(f"{path}: not a directory; pass a run directory (PROF_*, *_ascend_pt, "
                                "mindstudio_profiler_output, a .geprof_parquet export or a directory of them) or a "
                                "torch_npu / msprof .db file")
    layout = layout_of(path)
    if layout is not None:
        return _open(path, layout, device_id)
    cluster = _cluster(path, device_id)
    if cluster is not None:
        return cluster
    runs = [(c, lay) for c in sorted(path.iterdir()) if (lay := layout_of(c)) is not None]
    if not runs:
        raise ImportFormatError(
            f"{path} holds no geprof run directory (a PROF_* directory with info.json) and no known profiling "
            f"layout: expected a PROF_* directory with {MSPROF_OUTPUT}/ (msprof), a *_ascend_pt directory with "
            f"{ASCEND_OUTPUT}/ (torch_npu), a .geprof_parquet export, or a directory of those")
    newest = _newest([c for c, _ in runs])
    notes = [f"{path} holds {len(runs)} runs; this is the newest, {newest.name}"] if len(runs) > 1 else []
    return _open(newest, dict(runs)[newest], device_id, notes)


def open_run(path: str | Path, device_id: int | None = None) -> Profile | ClusterProfile:
    """Open a geprof run directory (or the newest run in an output directory), a Parquet
    export, real msprof output, a torch_npu ``*_ascend_pt`` directory or a cluster of them
    (the module docstring has the order).

    ``device_id`` picks a device of a run; by default its first (a rank of a
    cluster runs on its server's device ``rank % 8``).  A device the run does not have
    is a ValueError listing those it has."""
    if device_id is not None:
        device_id = integer("device_id", device_id)
    p = Path(path).expanduser().resolve()
    if not p.exists():
        raise FileNotFoundError(f"{p} does not exist")
    newest = p if is_run_dir(p) else newest_run(p)
    if newest is not None and is_run_dir(newest):
        run = RunDir(newest)
        devices = run.device_ids
        return Profile(run, devices[0] if device_id is None else member("device_id", device_id, devices, str(newest),
                                                                         "devices"))
    return _open_foreign(newest or p, device_id)


def load(path: str | Path, *args: Any, engine: str | None = None, scheduler: Any = None,
         parquet_dir: str | Path | None = None, **kwargs: Any) -> Profile | ClusterProfile:
    """Open a run (a :class:`Profile`) or a cluster of runs (a :class:`ClusterProfile`); see
    :func:`open_run` for the layouts.  ``engine`` (``"pandas"``, ``"dask"``), ``scheduler``
    and ``parquet_dir`` choose how a cluster's cross-rank tables are computed
    (:class:`ClusterProfile`); they are an error for a single run."""
    loaded = open_run(path, *args, **kwargs)
    options = {k: v for k, v in (("engine", engine), ("scheduler", scheduler), ("parquet_dir", parquet_dir))
               if v is not None}
    if not options:
        return loaded
    if not isinstance(loaded, ClusterProfile):
        raise ValueError(f"{loaded.path} is one run, not a cluster: {', '.join(options)} apply to clusters only")
    return loaded.with_engine(**options)
