"""The error types geprof_nb documents, in one leaf module.

Any module can raise or catch them without importing the module that reads a format (an advisor rule
that tolerates a damaged file does not need the CSV reader).  This module imports nothing of the
package.
"""


class RunDirError(ValueError):
    """The path is not a readable run directory."""


class ImportFormatError(RunDirError):
    """A file is not in the layout or format the importer expects (the message names the file)."""


class ServingError(ValueError):
    """``ge.serve`` or ``ge.requests`` was given what it cannot serve (the message names the field)."""


__all__ = ["ImportFormatError", "RunDirError", "ServingError"]
