"""The analysis side: run directories (ours, real msprof and torch_npu output, Parquet) -> pandas tables.

Never imports the runtime (``geprof_nb.ge``): it works from files alone.
"""

from .cluster import ClusterProfile
from .importers import ImportFormatError
from .parquet import export_parquet
from .profile import Profile, load
from .rundir import RunDirError

__all__ = ["ClusterProfile", "ImportFormatError", "Profile", "RunDirError", "export_parquet", "load"]
