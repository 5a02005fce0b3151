"""Write a Profile in a real tool's format.

* ``msprof``: a ``PROF_*`` directory with msprof's summary CSVs and timeline JSON (:mod:`.msprof`);
* ``ascend_pt``: a torch_npu ``*_ascend_pt`` directory, the input of msprof-analyze (:mod:`.ascend_pt`);
* ``chrome``: one trace file for Perfetto / chrome://tracing (:mod:`.chrome`);
* ``parquet``: the tables as Parquet files (``analysis.parquet``).
"""

from __future__ import annotations

from pathlib import Path

FORMATS = ("msprof", "ascend_pt", "chrome", "parquet")


def export_profile(profile, path: Path, format: str, **options) -> Path:  # noqa: A002 - Profile.export's name
    """Write ``profile`` under ``path``; returns the directory (or file) written."""
    path = Path(path)
    if format == "msprof":
        from .msprof import export_msprof

        return export_msprof(profile, path, **options)
    if format == "ascend_pt":
        from .ascend_pt import export_ascend_pt

        return export_ascend_pt(profile, path, **options)
    if format == "chrome":
        from .chrome import export_chrome

        return export_chrome(profile, path, **options)
    if format == "parquet":
        from ..parquet import export_parquet

        return export_parquet(profile, path, **options)
    raise ValueError(f"unknown export format {format!r}: accepted formats are {', '.join(FORMATS)}")


def write_failure(exc: OSError, fmt: str, to: Path | str) -> str:
    """One line for an export that could not be written under ``to``, naming the path it failed on
    and why: what the CLI and ``%geprof export`` report instead of a traceback."""
    if isinstance(exc, (FileExistsError, NotADirectoryError)) and exc.filename:
        where = Path(exc.filename)
        existing = next((p for p in (where, *where.parents) if p.exists()), None)
        if existing is not None and not existing.is_dir():  # mkdir over a file says "File exists"
            return f"--to {to}: cannot write the {fmt} export ({existing} is a file, not a directory)"
    cause = f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else str(exc)
    return f"--to {to}: cannot write the {fmt} export ({cause})"
