"""``format="chrome"``: the msprof timeline as one Chrome trace file that
Perfetto (ui.perfetto.dev) and chrome://tracing open.

The same processes, threads, slices, counters and flows as ``msprof_*.json``,
in the JSON object form ``{"traceEvents": [...], "displayTimeUnit": "ns"}``
with numeric ``ts``: µs since the run's first event, so the floats keep every
ns (``otherData.time_base_ns`` is that event's absolute time).
"""

from __future__ import annotations

from pathlib import Path

from .naming import safe_component
from .timeline import Timeline
from .tracejson import CHROME, EventBlock, write_events


def export_chrome(profile, path: Path) -> Path:
    """Write ``path`` if it names a ``.json`` file, else ``<path>/<run name>.json``; returns the file."""
    path = Path(path)
    target = path if path.suffix == ".json" else path / f"{safe_component(profile.name)}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    items = Timeline(profile).items()
    starts = [e.min_ts() if isinstance(e, EventBlock) else e.get("ts") for e in items]
    base = min((t for t in starts if t is not None), default=0)
    return write_events(target, items, CHROME, base, wrapper={
        "traceEvents": None, "displayTimeUnit": "ns", "otherData": {"run": profile.name, "time_base_ns": base}})
