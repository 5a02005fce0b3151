"""The analysis side: run directories (ours, real msprof and torch_npu output, Parquet) -> pandas tables.

Never imports the runtime (``geprof_nb.ge``): it works from files alone.
"""

from pathlib import Path
from typing import Any

from ..errors import ImportFormatError, RunDirError
from .cluster import ClusterProfile
from .parquet import export_parquet
from .profile import Profile
from .profile import load as _load


def load(path: str | Path, *args: Any, engine: str | None = None, scheduler: Any = None,
         parquet_dir: str | Path | None = None, **kwargs: Any) -> Profile | ClusterProfile:
    """Open a run (a :class:`Profile`) or a cluster of runs (a :class:`ClusterProfile`); see
    :func:`.profile.load` for the layouts.  ``engine`` (``"pandas"``, ``"dask"``), ``scheduler``
    and ``parquet_dir`` choose how a cluster's cross-rank tables are computed
    (:class:`ClusterProfile`); they are an error for a single run."""
    loaded = _load(path, *args, **kwargs)
    options = {k: v for k, v in (("engine", engine), ("scheduler", scheduler), ("parquet_dir", parquet_dir))
               if v is not None}
    if not options:
        return loaded
    if not isinstance(loaded, ClusterProfile):
        raise ValueError(f"{loaded.path} is one run, not a cluster: {', '.join(options)} apply to clusters only")
    return loaded.with_engine(**options)


__all__ = ["ClusterProfile", "ImportFormatError", "Profile", "RunDirError", "export_parquet", "load"]
