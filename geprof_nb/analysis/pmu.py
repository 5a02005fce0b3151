"""AI Core PMU columns of op_summary, from the per-task event counts and each
execution's cycle count, with msprof's formulas (``ai_core_config.py``):
``ratio = cycles_X / total_cycles``, ``time = cycles_X / freq * waves``,
``cube_utilization(%) = total_cycles / (freq * ai_core_num * duration) * 100``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..prof import rawdata
from . import columns as C
from .indexing import scatter
from .rundir import RunDir


def pmu_columns(run: RunDir, device_id: int, conn: np.ndarray, n_conn: int, block_dim: np.ndarray,
               cycles: np.ndarray, dur_us: np.ndarray, family: str, aic_metrics: str) -> dict[str, np.ndarray]:
    """The PMU columns of op_summary for the rows (msprof ai_core_config formulas)."""
    names = C.pmu_columns(aic_metrics, family)
    if not names:
        return {}
    info = run.device_info(device_id)
    freq = float(info.get("aic_frequency", 1800))
    cores = {"aic": int(info.get("ai_core_num", 24)), "aiv": int(info.get("aiv_num", 0) or info.get("ai_core_num", 24))}
    events = run.load("aicore_events", device_id)
    event_names = run.info.get("pmu_events") or {}
    n = len(conn)
    out = {c: np.full(n, np.nan) for c in names}
    core_of_conn = scatter(n_conn, events["connection_id"], events["core"], 255, np.uint8)
    counts = np.zeros((n_conn, rawdata.PMU_EVENTS_PER_TASK), np.float64)
    counts[events["connection_id"]] = events["events"]
    for core_name, core_code in (("aic", rawdata.PMU_CORE_AIC), ("aiv", rawdata.PMU_CORE_AIV)):
        ev_names = list(event_names.get(core_name, []))
        rows = (core_of_conn[conn] == core_code) & (cycles > 0)
        if not rows.any() or not ev_names:
            continue
        cyc = cycles[rows].astype(np.float64)
        bd = block_dim[rows].astype(np.float64)
        waves = np.ceil(bd / cores[core_name])
        ev = counts[conn[rows]]

        def event(name: str) -> np.ndarray:
            return ev[:, ev_names.index(name)] if name in ev_names else np.zeros(len(cyc))

        prefix = "" if family != "A2" else f"{core_name}_"
        time_col = "aicore_time(us)" if (family != "A2" or core_name == "aic") else "aiv_time(us)"
        total_col = "total_cycles" if family != "A2" else f"{core_name}_total_cycles"
        out[time_col][rows] = cyc * waves / freq
        out[total_col][rows] = cyc * bd
        pipes = (C.PIPE_UTILIZATION_910A if family != "A2" else
                 C.PIPE_UTILIZATION_A2_AIC if core_name == "aic" else C.PIPE_UTILIZATION_A2_AIV)
        ratios = {}
        for p in pipes:
            busy = event(f"{p}_cycles")
            out[f"{prefix}{p}_time(us)"][rows] = busy * waves / freq
            ratios[p] = out[f"{prefix}{p}_ratio"][rows] = busy / cyc
        req = event("icache_req")
        with np.errstate(invalid="ignore", divide="ignore"):
            out[f"{prefix}icache_miss_rate"][rows] = np.where(req > 0, event("icache_miss") / req, np.nan)
            if family == "A2" and core_name == "aic":
                out["cube_utilization(%)"][rows] = cyc * bd / (freq * cores["aic"] * dur_us[rows]) * 100
            if family != "A2":
                denom = np.maximum(ratios["mac"], ratios["vec"])
                out["memory_bound"][rows] = np.where(denom > 0, ratios["mte2"] / denom, np.nan)
    result = {}
    for c in names:
        if c.endswith("total_cycles"):
            result[c] = pd.array(np.where(np.isnan(out[c]), 0, out[c]).astype(np.int64), dtype="Int64")
            result[c][np.isnan(out[c])] = pd.NA
        else:
            result[c] = np.round(out[c], 3)
    return result
