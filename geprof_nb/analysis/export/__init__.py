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
