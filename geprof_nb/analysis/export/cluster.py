"""Every rank of a :class:`~..cluster.profile.ClusterProfile` written in one go.

* ``ascend_pt``: one torch_npu ``<worker>-rank<r>_<pid>_<ts>_ascend_pt`` directory per rank,
  side by side under ``path``: what ``msprof-analyze cluster -d path`` and ``advisor all -d path``
  read as one cluster (rank ids from ``profiler_info_<r>.json``; every rank names its
  collectives ``<op>@hccl_world_group`` identically, so msprof-analyze groups them).  The HCCL
  sub-tasks of a cluster name global ranks, so the communication matrix keeps them
  (``world_size``) instead of relabelling the profiled device.
* ``db``: the same directories holding torch_npu's DB output (:mod:`.db`), with ``distributed_args`` and
  ``parallel_group_info`` naming the world group's ranks; ``msprof_db``: one ``PROF_*`` directory per
  rank, its ``info.json`` naming the rank: what ``msprof-analyze cluster -m <recipe> -d path`` reads.
* ``parquet``: ``path/rank_<r>/<run>.geprof_parquet`` per rank, which ``geprof_nb.load(path)``
  reads back as a cluster and the Dask engine reads table by table.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import check_options, writer, writer_options

if TYPE_CHECKING:
    from ..cluster.profile import ClusterProfile

FORMATS = ("ascend_pt", "db", "msprof_db", "parquet")


def rank_dir(path: Path, rank: int) -> Path:
    """Where the Parquet export of ``rank`` goes (a ``rank_<r>`` directory, as a simulated cluster's)."""
    return Path(path) / f"rank_{int(rank)}"


def check_cluster_options(format: str, options: dict[str, Any]) -> None:  # noqa: A002
    """A ValueError for an option a cluster export in ``format`` does not take, naming it: the one-run
    writers' options less ``rank``, which each rank's own number sets."""
    if "rank" in options:
        raise ValueError(f"export option rank: a ClusterProfile writes every rank as its own rank; for one rank, "
                         f"cluster.rank(r).export(path, format={format!r})")
    check_options(format, options, {f: tuple(o for o in writer_options(writer(f)) if o != "rank") for f in FORMATS})


def export_cluster(cluster: ClusterProfile, path: Path, format: str = "ascend_pt",  # noqa: A002
                   **options: Any) -> Path:
    """Write every rank of ``cluster`` under ``path``; returns ``path``.  An option the format does not
    take is a ValueError naming it; ``rank`` is none's (every rank is written as itself)."""
    path = Path(path)
    if format in FORMATS:
        check_cluster_options(format, options)
    if format in ("ascend_pt", "db", "msprof_db"):
        write = writer(format)
        world_size = options.pop("world_size", cluster.world_size)
        for r, profile in cluster.ranks.items():
            write(profile, path, rank=r, world_size=world_size, **options)
        return path
    if format == "parquet":
        from .parquet import export_parquet

        for r, profile in cluster.ranks.items():
            export_parquet(profile, rank_dir(path, r), **options)
        return path
    raise ValueError(f"unknown cluster export format {format!r}: accepted formats are {', '.join(FORMATS)}")
