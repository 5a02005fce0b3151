"""Directory and file names of the exports, from the run they describe.

Timestamps come from the run's start (local time, as msprof and torch_npu
print theirs), so exporting the same run twice gives the same names; a
profile that does not know its start uses the time of the export.

Every part of a name that comes from data (a run name read from a Parquet
manifest, the host name in info.json, a worker name) goes through
:func:`safe_component`, so no export can write outside the directory it was
given (``../``, absolute paths, NUL bytes).
"""

from __future__ import annotations

import hashlib
import re
import socket
import time

PROF_NAME = re.compile(r"PROF_\d{6}_\d{17}_[A-Za-z]+")
#: Characters that may not appear in one file name component here (separators, NUL, control
#: characters, and what Windows file systems refuse).
_UNSAFE = re.compile(r'[\x00-\x1f\x7f/\\:*?"<>|]')
_MAX_COMPONENT = 120


def safe_component(text: object, fallback: str = "run") -> str:
    """``text`` as one file name component: separators, NUL and control characters become
    ``_``, ``.``/``..`` and empty names become ``fallback``, long names are cut."""
    name = _UNSAFE.sub("_", str(text)).strip()[:_MAX_COMPONENT]
    if name.strip(".") == "":
        return fallback
    return name


def _start_seconds(profile) -> float:
    start_ns = profile.info.get("start_ns")
    return start_ns / 1e9 if start_ns else time.time()


def stamp14(profile) -> str:
    """``YYYYmmddHHMMSS``: the timestamp in msprof's summary file names."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime(_start_seconds(profile)))


def stamp17(profile) -> str:
    """``YYYYmmddHHMMSSfff``: the timestamp in PROF_ and ``*_ascend_pt`` directory names."""
    seconds = _start_seconds(profile)
    return time.strftime("%Y%m%d%H%M%S", time.localtime(seconds)) + f"{int(seconds * 1000) % 1000:03d}"


def prof_dir_name(profile) -> str:
    """The run's own ``PROF_<6 digits>_<17 digits>_<letters>`` name when it has one, else one
    built from its start time and (for the letters) its name."""
    if PROF_NAME.fullmatch(profile.name):
        return profile.name
    digest = hashlib.sha256(profile.name.encode()).digest()
    letters = "".join(chr(ord("A") + b % 26) for b in digest[:16])
    return f"PROF_000001_{stamp17(profile)}_{letters}"


def ascend_pt_dir_name(profile, worker: str | None, rank: int) -> str:
    """``<worker>_<pid>_<17 digits>_ascend_pt``.  The default worker is ``<host>-rank<rank>``,
    so the ranks of one run exported side by side get a directory each."""
    host = profile.info.get("hostname") or socket.gethostname()
    worker = safe_component(worker or f"{host}-rank{int(rank)}", "worker")
    try:
        pid = int(profile.info.get("pid") or 0)
    except (TypeError, ValueError):
        pid = 0
    return f"{worker}_{pid}_{stamp17(profile)}_ascend_pt"
