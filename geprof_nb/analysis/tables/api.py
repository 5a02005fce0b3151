"""``api_statistic``: the host API layers (acl, model, node, communication,
runtime) from MsprofApi records and paired MsprofEvent start/end records, with
the names the runtime registered (``MsprofRegTypeInfo``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...prof.rawdata import LEVEL_NAMES
from ..rundir import RunDir

API_STATISTIC = ["Device_id", "Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)", "Variance"]


def api_calls(run: RunDir) -> pd.DataFrame:
    """Every host API call: level, type, thread, begin/end (ns) and item id."""
    api = run.load("api")
    frame = pd.DataFrame({"level": api["level"].astype(np.int64), "type": api["type"].astype(np.int64),
                          "thread": api["thread_id"].astype(np.int64), "begin": api["begin"],
                          "end": api["end"], "item_id": api["item_id"]})
    ev = run.load("event")
    if len(ev):
        # start and end events share level, type, thread and request id; they come in order
        e = pd.DataFrame({"level": ev["level"].astype(np.int64), "type": ev["type"].astype(np.int64),
                          "thread": ev["thread_id"].astype(np.int64), "request": ev["request_id"],
                          "ts": ev["timestamp"], "item_id": ev["item_id"]})
        e["n"] = e.groupby(["level", "type", "thread", "request"]).cumcount()
        starts, ends = e[e["n"] % 2 == 0].copy(), e[e["n"] % 2 == 1].copy()
        starts["n"] += 1
        pairs = starts.merge(ends, on=["level", "type", "thread", "request", "n"], suffixes=("", "_end"))
        frame = pd.concat([frame, pd.DataFrame({
            "level": pairs["level"], "type": pairs["type"], "thread": pairs["thread"], "begin": pairs["ts"],
            "end": pairs["ts_end"], "item_id": pairs["item_id"]})], ignore_index=True)
    return frame


def api_name(run: RunDir, level: int, type_id: int) -> str:
    names = (run.info.get("type_info") or {}).get(str(level), {})
    return names.get(str(type_id), f"type_0x{type_id:x}")


def api_statistic(run: RunDir, calls: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per level and API: total, count, avg/min/max (us) and population variance, largest total first.
    ``calls``: :func:`api_calls` of the run, when the caller has it already (it is not changed)."""
    if calls is None:
        calls = api_calls(run)
    if calls.empty:
        return pd.DataFrame(columns=API_STATISTIC)
    keys = calls[["level", "type"]].drop_duplicates()
    names = {(lv, t): (LEVEL_NAMES.get(int(lv), str(lv)), api_name(run, int(lv), int(t)))
             for lv, t in zip(keys["level"].tolist(), keys["type"].tolist())}
    named = [names[k] for k in zip(calls["level"].tolist(), calls["type"].tolist())]
    return statistic([n[0] for n in named], [n[1] for n in named], calls["begin"].to_numpy(np.int64),
                     calls["end"].to_numpy(np.int64))


def statistic(levels: list[str], names: list[str], begin: np.ndarray, end: np.ndarray) -> pd.DataFrame:
    """api_statistic of calls given by level, API name and begin / end (ns): per (Level, API Name), largest
    total first (ties by Level, then API Name)."""
    if not len(names):
        return pd.DataFrame(columns=API_STATISTIC)
    calls = pd.DataFrame({"Level": levels, "API Name": names, "dur": (np.asarray(end) - np.asarray(begin)) / 1000.0})
    g = calls.groupby(["Level", "API Name"], sort=True)["dur"]
    stats = g.agg(["sum", "count", "mean", "min", "max"]).reset_index()
    stats["var"] = g.var(ddof=0).to_numpy()
    out = pd.DataFrame({
        "Device_id": "host", "Level": stats["Level"].astype(str).to_numpy(object),
        "API Name": stats["API Name"].astype(str).to_numpy(object),
        "Time(us)": stats["sum"].round(3), "Count": stats["count"].astype(np.int64),
        "Avg(us)": stats["mean"].round(3), "Min(us)": stats["min"].round(3), "Max(us)": stats["max"].round(3),
        "Variance": stats["var"].round(3),
    })
    return out.sort_values("Time(us)", ascending=False, kind="stable").reset_index(drop=True)
