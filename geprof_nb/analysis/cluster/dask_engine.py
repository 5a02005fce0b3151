"""The Dask engine of the cross-rank analysis: per-rank tables, read lazily, reduced on a Dask cluster.

A profile of a large cluster does not fit one machine: one rank's HCCL sub-tasks are ~50 rows
per collective execution, times steps, buckets and ranks.  Here every rank is one partition of
each table, read when a task runs, on whichever worker runs it, with only the columns the
analysis needs: a geprof run directory is read by the worker itself (its tables built from the
raw records there, as :class:`~..profile.Profile` builds them: nothing is written first); a rank
opened from a Parquet export (:func:`~..export.parquet.export_parquet`,
``rank_<r>/<run>.geprof_parquet``) is read with pyarrow; the ranks of other formats (torch_npu,
msprof) are exported to Parquet first.  One task per rank builds all of the rank's small tables
(:mod:`.rank_tables`: its step split, its collectives, its pipeline passes, groups and step bounds,
from its op rows built once); the reduction of the large table (:func:`.cross_rank.link_totals` of the
sub-tasks) runs on the workers too.  Only the small results come back to this process, where the
same finishing code as the pandas engine's makes the tables.  So both engines give equal frames.

``scheduler``: a ``distributed.Client``; a scheduler address (``"tcp://host:8786"``: a Client is
connected, and closed by :meth:`DaskInputs.close`); a local scheduler name (``"threads"``,
``"sync"``, ``"processes"``); or None (Dask's default: the active Client if any, else threads).
Workers must see the ranks' files: on several machines, put the run directories (or a Parquet
export: ``cluster.export(shared, format="parquet")``) on a shared path.  ``parquet_dir`` exports
every rank there first and reads the Parquet (the tables then stay on disk).

Dask is an optional dependency (``pip install "geprof_nb[cluster]"``); nothing imports it
unless ``engine="dask"`` is asked for.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ...errors import ImportFormatError
from ..export.cluster import rank_dir
from ..export.parquet import export_parquet
from ..sources.parquet import MANIFEST, ParquetSource, disk_names, empty_column
from ..sources.source import RunDirSource
from .rank_tables import rank_tables

if TYPE_CHECKING:
    from ..profile import Profile
    from .profile import ClusterProfile

LOCAL_SCHEDULERS = ("threads", "sync", "synchronous", "single-threaded", "processes")


def _dask():
    try:
        import dask.dataframe as dd
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError('engine="dask" needs Dask: pip install "geprof_nb[cluster]" '
                          '(or pip install "dask[distributed]")') from exc
    return dd


def _read_part(part: tuple, names: list[str], disk: list[str], dtypes: dict[str, Any]) -> pd.DataFrame:
    """One rank's table (the columns ``names``) with its ``Rank`` in front: what a task runs.  ``part``:
    ``(rank, "parquet", file)`` (None: the rank's table had no rows, so its export wrote no file) or
    ``(rank, "run", table, run directory, device id, info.json's content)``."""
    rank, kind, *where = part
    if kind == "run":
        frame = _run_table(*where)[names]
    elif where[0] is None:
        return pd.DataFrame({c: pd.Series([], dtype=d) for c, d in dtypes.items()})
    else:
        import pyarrow.parquet as pq

        frame = pq.read_table(where[0], columns=disk).to_pandas()
        frame.columns = names
    frame.insert(0, "Rank", np.int64(rank))
    return frame.astype(dtypes)


def _run_profile(path: str, device_id: int, info: dict) -> Profile:
    """A rank's Profile of its run directory, on the worker (``info``: the description the rank was
    opened with, so the worker reads the run as this process did)."""
    from ..profile import Profile
    from ..rundir import RunDir

    return Profile(RunDir(path, info), device_id)


def _run_table(table: str, path: str, device_id: int, info: dict) -> pd.DataFrame:
    """A rank's ``table`` built from its run directory, on the worker."""
    return getattr(_run_profile(path, device_id, info), table)


def _rank_tables(part: tuple) -> dict[str, Any]:
    """The task of one rank: its :func:`.rank_tables.rank_tables`.  ``part``: ``(rank, "parquet", export)``
    or ``(rank, "run", run directory, device id, info.json's content as JSON bytes)``: Dask walks every item of
    a dict argument looking for collections to compute, seconds for 1,024 ranks' descriptions; bytes it
    passes as they are."""
    from ..profile import Profile

    rank, kind, *where = part
    if kind == "run":
        path, device_id, info = where
        profile = _run_profile(path, device_id, json.loads(info))
    else:
        profile = Profile(ParquetSource(Path(where[0])))
    return rank_tables(rank, profile)


class DaskInputs:
    """The ranks' tables as Dask frames (one partition per rank) and how to compute them: ``exports``, rank ->
    Parquet export; ``runs``, rank -> the Profile of a geprof run directory the workers read."""

    engine = "dask"

    def __init__(self, exports: dict[int, Path], scheduler: Any = None, temporary: Path | None = None,
                 runs: dict[int, Profile] | None = None) -> None:
        _dask()
        self.exports = dict(sorted((int(r), Path(p)) for r, p in exports.items()))
        self.runs = dict(sorted((runs or {}).items()))
        self._temporary = temporary
        self._own_client = None
        self.scheduler = self._scheduler(scheduler)
        self._sources = {r: ParquetSource(p) for r, p in self.exports.items()}
        self._small: dict[int, dict[str, Any]] | None = None

    @classmethod
    def of(cls, cluster: ClusterProfile, scheduler: Any = None, parquet_dir: str | Path | None = None) -> DaskInputs:
        """The inputs of ``cluster``: ranks opened from Parquet exports, and without ``parquet_dir`` those of
        geprof run directories, are read where they are; the others are exported first, to ``parquet_dir`` or
        a temporary directory."""
        exports: dict[int, Path] = {}
        runs: dict[int, Profile] = {}
        temporary = None
        for r, p in cluster.ranks.items():
            if isinstance(p.source, ParquetSource):
                exports[r] = p.source.path
                continue
            if isinstance(p.source, RunDirSource) and parquet_dir is None:
                runs[r] = p
                continue
            if parquet_dir is None and temporary is None:
                temporary = Path(tempfile.mkdtemp(prefix="geprof_dask_"))
            base = Path(parquet_dir) if parquet_dir is not None else temporary
            exports[r] = export_parquet(p, rank_dir(base, r), overwrite=True)
        return cls(exports, scheduler, temporary, runs)

    def _scheduler(self, scheduler: Any) -> Any:
        """What ``compute(scheduler=...)`` gets: a Client, a local scheduler name, or None."""
        if scheduler is None or scheduler in LOCAL_SCHEDULERS:
            return scheduler
        if isinstance(scheduler, str):  # an address: connect to the running cluster
            from distributed import Client

            self._own_client = Client(scheduler)
            return self._own_client
        return scheduler  # a distributed.Client (anything dask accepts as a scheduler)

    def _meta(self, table: str, columns: list[str] | None) -> tuple[pd.DataFrame, list[str], list[str]]:
        """The empty frame (``Rank`` + columns, their dtypes), the columns and their names on disk: from a
        Parquet export's manifest, else from the lowest run directory's table (built here, one rank)."""
        if not self._sources:
            frame = getattr(next(iter(self.runs.values())), table)
            wanted = list(frame.columns) if columns is None else list(columns)
            missing = [c for c in wanted if c not in frame.columns]
            if missing:
                raise ValueError(f"table {table!r} has no column {missing[0]!r}; it has: {', '.join(frame.columns)}")
            meta = frame[wanted].iloc[:0].copy()
            meta.insert(0, "Rank", pd.Series([], dtype=np.int64))
            return meta, wanted, wanted
        source = next(iter(self._sources.values()))
        entry = source.manifest["tables"].get(table)
        if entry is None:
            raise ImportFormatError(f"{source.path / MANIFEST}: no table {table!r}")
        names = list(entry.get("columns") or [])
        specs = dict(zip(names, entry.get("dtypes") or []))
        wanted = names if columns is None else list(columns)
        missing = [c for c in wanted if c not in specs]
        if missing:
            raise ImportFormatError(f"{source.path / MANIFEST}: table {table!r} has no column {missing[0]!r}")
        disk = dict(zip(names, disk_names(names)))
        where = f"{source.path / MANIFEST} (table {table})"
        meta = pd.DataFrame({"Rank": pd.Series([], dtype=np.int64),
                             **{c: empty_column(specs[c], where) for c in wanted}})
        return meta, wanted, [disk[c] for c in wanted]

    def stacked(self, table: str, columns: list[str] | None = None):
        """Every rank's ``table`` as one lazy Dask frame, ``Rank`` first, one partition per rank."""
        dd = _dask()
        meta, wanted, disk = self._meta(table, columns)
        parts: dict[int, tuple] = {}
        for r, source in self._sources.items():
            file = (source.manifest["tables"].get(table) or {}).get("file")
            parts[r] = (r, "parquet", str(source.path / Path(file).name) if file else None)
        for r, p in self.runs.items():
            parts[r] = (r, "run", table, str(p.source.path), p.source.device_id, p.source.info)
        return dd.from_map(_read_part, [parts[r] for r in sorted(parts)], names=wanted, disk=disk,
                           dtypes=meta.dtypes.to_dict(), meta=meta, enforce_metadata=False, label=f"geprof-{table}")

    def small(self, name: str) -> dict[int, Any]:
        """rank -> its small table ``name`` (:data:`.rank_tables.RANK_TABLES`).  The first call runs one task
        per rank that builds all of them (on a worker, which sends back only these); later calls read
        what came back."""
        if self._small is None:
            import dask
            from dask.base import tokenize

            parts = [(r, "parquet", str(p)) for r, p in self.exports.items()]
            parts += [(r, "run", str(p.source.path), p.source.device_id, json.dumps(p.source.info).encode())
                      for r, p in self.runs.items()]
            parts.sort(key=lambda part: part[0])
            tasks = [dask.delayed(_rank_tables, pure=True)(part, dask_key_name=f"geprof-rank_tables-{tokenize(part)}")
                     for part in parts]
            options = {} if self.scheduler is None else {"scheduler": self.scheduler}
            self._small = dict(zip((part[0] for part in parts), dask.compute(*tasks, **options)))
        return {r: tables[name] for r, tables in self._small.items()}

    def compute(self, frame) -> pd.DataFrame:
        """The pandas result of a Dask frame, on this engine's scheduler."""
        if self.scheduler is None:
            return frame.compute()
        return frame.compute(scheduler=self.scheduler)

    def close(self) -> None:
        """Close a Client this engine connected, remove the Parquet it wrote to a temporary directory."""
        if self._own_client is not None:
            self._own_client.close()
            self._own_client = None
        if self._temporary is not None:
            shutil.rmtree(self._temporary, ignore_errors=True)
            self._temporary = None
