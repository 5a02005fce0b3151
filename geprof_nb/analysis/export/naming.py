"""Directory and file names of the exports, from the run they describe.

Timestamps come from the run's start (local time, as msprof and torch_npu
print theirs), so exporting the same run twice gives the same names; a
profile that does not know its start uses the time of the export.
"""

from __future__ import annotations

import hashlib
import re
import socket
import time

PROF_NAME = re.compile(r"PROF_\d{6}_\d{17}_[A-Za-z]+")


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
    worker = worker or f"{host}-rank{rank}"
    return f"{worker}_{int(profile.info.get('pid') or 0)}_{stamp17(profile)}_ascend_pt"
