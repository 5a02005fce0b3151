"""The analysis side: run directories (ours, and later real msprof output) -> pandas tables.

Never imports the runtime (``geprof_nb.ge``): it works from files alone.
"""

from .profile import Profile, load
from .rundir import RunDirError

__all__ = ["Profile", "RunDirError", "load"]
