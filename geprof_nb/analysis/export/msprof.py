"""``format="msprof"``: a ``PROF_*`` directory as msprof's export leaves it.

``<path>/PROF_<6>_<17>_<letters>/mindstudio_profiler_output/`` holds
``op_summary``, ``op_statistic``, ``api_statistic``, ``task_time``,
``step_trace``, ``communication_statistic`` and ``msprof_tx`` CSVs (formatting:
:mod:`.cells`), the timeline ``msprof_<ts>.json`` and ``step_trace_<ts>.json``.
Like msprof ("No need to export"), a table without rows writes no file, so a
layer that was off and a layer that was on but recorded nothing look alike.
"""

from __future__ import annotations

from pathlib import Path

from ..tables import columns as C
from .cells import CSV_LIMIT, table_cells, write_table
from .naming import prof_dir_name, stamp14
from .timeline import Timeline
from .tracejson import msprof_events, write_events, write_json

OUTPUT_DIR = "mindstudio_profiler_output"
#: The summaries, named as the Profile tables they print.
SUMMARIES = ("op_summary", "op_statistic", "api_statistic", "task_time", "step_trace", "communication_statistic",
             "msprof_tx")
#: Profile columns msprof's summary CSVs do not have: left out, so each header is msprof's (GetNext
#: spans are in the step_trace timeline JSON only, reference §3.3).
NOT_IN_CSV = {"step_trace": C.STEP_TRACE_GETNEXT}
#: Cells msprof wraps in literal quotes (their commas would split the row otherwise).
SHAPE_COLUMNS = ("Input Shapes", "Output Shapes")


def export_msprof(profile, path: Path, slice_rows: int = CSV_LIMIT, timeline: bool = True) -> Path:
    """Write the summaries and timelines; returns the ``PROF_*`` directory.  ``timeline=False``
    writes the summary CSVs only (the timeline JSON of a long run is hundreds of MB)."""
    prof_dir = Path(path) / prof_dir_name(profile)
    out = prof_dir / OUTPUT_DIR
    out.mkdir(parents=True, exist_ok=True)
    stamp = stamp14(profile)
    for name in SUMMARIES:
        frame = getattr(profile, name)
        if frame.empty:
            continue
        frame = frame.drop(columns=[c for c in NOT_IN_CSV.get(name, ()) if c in frame.columns])
        cols = table_cells(frame, profile.source.times_ns(name, frame), quote=SHAPE_COLUMNS)
        write_table(out, name, stamp, list(frame.columns), cols, slice_rows)
    if not timeline:
        return prof_dir
    layers = Timeline(profile)
    write_events(out / f"msprof_{stamp}.json", layers.items())
    steps = layers.step_trace(with_process=True)
    if steps:
        write_json(out / f"step_trace_{stamp}.json", msprof_events(steps))
    return prof_dir
