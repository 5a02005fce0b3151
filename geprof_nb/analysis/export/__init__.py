"""Write a Profile in a real tool's format.

* ``msprof``: a ``PROF_*`` directory with msprof's summary CSVs and timeline JSON (:mod:`.msprof`);
* ``ascend_pt``: a torch_npu ``*_ascend_pt`` directory, the input of msprof-analyze (:mod:`.ascend_pt`);
* ``chrome``: one trace file for Perfetto / chrome://tracing (:mod:`.chrome`);
* ``parquet``: the tables as Parquet files, which ``geprof_nb.load`` reads back (:mod:`.parquet`);
* ``db`` / ``msprof_db``: torch_npu's / msprof's SQLite databases, the input of msprof-analyze's
  ``cluster -m <recipe>`` analyses (:mod:`.db`).

A ClusterProfile writes every rank in one go (:mod:`.cluster`: ``ascend_pt``, ``db``, ``msprof_db`` or
``parquet``).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Callable

FORMATS = ("msprof", "ascend_pt", "chrome", "parquet", "db", "msprof_db")
#: The formats that take ``rank`` (the rank one run is exported as), with the rank they write without one
#: (None: no rank; msprof-analyze then numbers msprof's runs itself).
RANK_DEFAULTS = {"ascend_pt": 0, "db": 0, "msprof_db": None}


def writer(format: str) -> Callable[..., Path]:  # noqa: A002 - Profile.export's name
    """The function that writes one Profile in ``format`` (``writer(profile, path, **options)``)."""
    if format == "msprof":
        from .msprof import export_msprof

        return export_msprof
    if format == "ascend_pt":
        from .ascend_pt import export_ascend_pt

        return export_ascend_pt
    if format == "chrome":
        from .chrome import export_chrome

        return export_chrome
    if format == "parquet":
        from .parquet import export_parquet

        return export_parquet
    if format == "db":
        from .db import export_db

        return export_db
    if format == "msprof_db":
        from .db import export_msprof_db

        return export_msprof_db
    raise ValueError(f"unknown export format {format!r}: accepted formats are {', '.join(FORMATS)}")


def writer_options(write: Callable[..., Path]) -> tuple[str, ...]:
    """The options a writer takes: its parameters after the profile and the path."""
    return tuple(inspect.signature(write).parameters)[2:]


def check_options(format: str, options: Mapping[str, Any], accepted: Mapping[str, Sequence[str]]) -> None:  # noqa: A002
    """A ValueError for the first of ``options`` that ``format`` does not take (``accepted``: each
    format's options), naming it, the formats that take it and the options ``format`` takes."""
    for name in options:
        if name in accepted[format]:
            continue
        takers = [f for f, names in accepted.items() if name in names]
        problem = (f"export option {name} is accepted only with format={' or '.join(map(repr, takers))}" if takers
                   else f"unknown export option {name}")
        takes = ", ".join(accepted[format]) or "no options"
        raise ValueError(f"{problem}; format={format!r} takes {takes}")


def export_profile(profile, path: Path, format: str, **options) -> Path:  # noqa: A002 - Profile.export's name
    """Write ``profile`` under ``path``; returns the directory (or file) written.  An option the format
    does not take is a ValueError naming it (:func:`check_options`)."""
    write = writer(format)
    check_options(format, options, {f: writer_options(writer(f)) for f in FORMATS})
    return write(profile, Path(path), **options)


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
