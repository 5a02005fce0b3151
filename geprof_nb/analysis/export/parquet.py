"""``export_parquet``: a Profile as a geprof Parquet export (the layout: :mod:`..sources.parquet`, whose
``ParquetSource`` reads it back).

Files are written with pandas' ``to_parquet``; the export is built beside its final name and renamed
into place, so a failed export leaves nothing half-written.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from ..sources.parquet import (
    COMMUNICATION,
    FORMAT,
    MANIFEST,
    SUFFIX,
    VERSION,
    disk_names,
    dtype_spec,
    is_parquet_export,
)
from ..sources.source import TIMESTAMP_COLUMNS
from ..tables.memory import MemoryPeak
from ..tables.roofline import device_roofs
from .naming import safe_component

#: Profile tables written (Profile attribute = file stem).
TABLES = ("op_summary", "op_statistic", "api_statistic", "task_time", "step_trace", "step_breakdown", "host_events",
          "msprof_tx", "communication_statistic", "hccl_tasks", "communication_time", "aicpu", "operator_memory",
          "memory_record", "serving_requests", "serving_steps")


def _write(frame: pd.DataFrame, directory: Path, stem: str, compression: str | None) -> dict:
    """Write one table (if it has rows) and describe it for the manifest."""
    columns = [str(c) for c in frame.columns]
    entry = {"file": None, "rows": len(frame), "columns": columns,
             "dtypes": [dtype_spec(frame.iloc[:, i].dtype) for i in range(frame.shape[1])]}
    if len(frame):
        entry["file"] = f"{stem}.parquet"
        frame.set_axis(disk_names(columns), axis=1).to_parquet(directory / entry["file"], engine="pyarrow",
                                                               compression=compression, index=False)
    return entry


def export_parquet(profile, path: Path, *, compression: str | None = "snappy", overwrite: bool = False) -> Path:
    """Write ``profile`` (a :class:`~..profile.Profile`) to ``<path>/<run name>.geprof_parquet/`` and return that
    directory.  ``compression``: any codec pyarrow knows (``snappy``, ``zstd``, ``gzip``, None).
    The directory is built beside its final name and renamed into place, so a failed export
    leaves nothing half-written; an existing export is replaced only with ``overwrite=True``."""
    out = Path(path) / f"{safe_component(profile.name)}{SUFFIX}"  # a name read from a manifest is data
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} exists (export_parquet(..., overwrite=True) replaces it)")
    if out.exists() and not is_parquet_export(out):
        raise FileExistsError(f"{out} exists and is not a geprof Parquet export; not replacing it")
    out.parent.mkdir(parents=True, exist_ok=True)
    work = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    try:
        entries = {}
        for name in TABLES:
            frame = getattr(profile, name)
            entries[name] = _write(frame, work, name, compression)
            if name != "op_summary" and len(frame) and set(frame.columns) & set(TIMESTAMP_COLUMNS.get(name, ())):
                times = profile.source.times_ns(name, frame)
                entries[f"{name}.times"] = _write(times, work, f"{name}.times", compression)
        rows = profile.source.op_rows()
        op_rows = pd.DataFrame({"iteration": rows.iteration, "start_ns": rows.start_ns,
                                "connection_id": rows.connection_id}).astype(np.int64)
        op_rows[COMMUNICATION] = profile.source.communication_rows()  # at task_trace l0 no column tells
        entries["op_rows"] = _write(op_rows, work, "op_rows", compression)
        op_work = profile.source.op_work(device_roofs(profile.device))  # the roofline's inputs, per op row
        entries["op_work"] = _write(op_work, work, "op_work", compression)
        entries["step_bounds"] = _write(profile.source.step_bounds().astype(np.int64), work, "step_bounds",
                                        compression)
        peak = profile.memory_peak
        manifest = {
            "format": FORMAT, "version": VERSION, "run": profile.name, "source": type(profile.source).__name__,
            "device_id": int(profile.device_id), "device": profile.device, "info": profile.info,
            "options": profile.options, "complete": bool(profile.complete), "notes": list(profile.notes),
            "dropped": dict(profile.dropped), "op_work_notes": list(op_work.attrs.get("notes", [])),
            "memory_peak": None if peak is None else {k: getattr(peak, k) for k in MemoryPeak.__dataclass_fields__},
            "tables": entries,
        }
        (work / MANIFEST).write_text(json.dumps(manifest, indent=1, default=str), encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        work.rename(out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return out
