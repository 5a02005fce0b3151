"""Trace events (exact int ns, :mod:`.timeline`) -> JSON files.

msprof and torch_npu write ``ts`` as a string of µs with 3 decimals (exact to
the ns) and ``dur`` as a number of µs.  A Chrome trace needs a numeric ``ts``;
a float of µs since 1970 only resolves 0.25 µs, so the Chrome file counts
from the run's first event (``otherData.time_base_ns`` says from when).
"""

from __future__ import annotations

import json
from pathlib import Path


def us_string(ns: int) -> str:
    """Exact int ns -> msprof's ``"<us>.<3 digits>"``."""
    return f"{ns // 1000}.{ns % 1000:03d}"


def msprof_events(events: list[dict]) -> list[dict]:
    """``ts`` as msprof's µs string, ``dur`` as µs."""
    out = []
    for e in events:
        if "ts" in e:
            e = dict(e, ts=us_string(e["ts"]))
            if "dur" in e:
                e["dur"] = e["dur"] / 1000
        out.append(e)
    return out


def chrome_events(events: list[dict], base_ns: int) -> list[dict]:
    """``ts`` as µs since ``base_ns`` (a number), ``dur`` as µs."""
    out = []
    for e in events:
        if "ts" in e:
            e = dict(e, ts=(e["ts"] - base_ns) / 1000)
            if "dur" in e:
                e["dur"] = e["dur"] / 1000
        out.append(e)
    return out


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
    return path
