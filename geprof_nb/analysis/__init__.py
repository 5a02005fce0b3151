"""The analysis side: run directories (ours, real msprof and torch_npu output, Parquet) -> pandas tables.

Never imports the runtime (``geprof_nb.ge``): it works from files alone.  :func:`load` (the one way to
open a run, :mod:`.registry`) gives a :class:`Profile` or a :class:`ClusterProfile`.
"""

from ..errors import ImportFormatError, RunDirError
from .cluster.profile import ClusterProfile
from .export.parquet import export_parquet
from .profile import Profile
from .registry import load

__all__ = ["ClusterProfile", "ImportFormatError", "Profile", "RunDirError", "export_parquet", "load"]
