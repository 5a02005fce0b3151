"""AI Core PMU columns of op_summary, for every aic_metrics group, from the
per-task event counts and each execution's cycle count.

Inputs per row: the events the PMU was programmed with (names in info.json
``pmu_events``, counts per block, one record per loaded task), the task's
block dim and this execution's per-block cycle count (HWTS log).  msprof sums
counters over the blocks of a task; every block of a simulated task counts
alike, so a sum over blocks is ``count x block_dim``.  With ``cyc`` the
per-block cycles, ``bd`` the block dim, ``waves = ceil(bd / cores)`` and
``freq`` in MHz, msprof's formulas (``ai_core_config.py`` /
``common_func/constant.py``, reference §4.1) read:

* ``aicore_time(us)`` / ``aiv_time(us)`` = ``total_cycles / freq / bd x waves``
  (= ``cyc x waves / freq``); ``total_cycles`` = ``cyc x bd``;
* ``<pipe>_ratio`` = ``cycles_pipe / total_cycles``, ``<pipe>_time(us)`` =
  ``ratio x aicore_time``; any other ``*_ratio`` = ``event / total_cycles``;
* ``icache_miss_rate`` = ``icache_miss / icache_req``;
* ``cube_fops`` = ``fp16 instr x 16x16x16x2 + int8 instr x 16x16x32x2``;
  ``vector_fops`` = ``fp32 x 64 + fp16 x 128 + int32 x 64 + misc x 32``
  (instruction counts summed over blocks; lanes of msprof's non-v3 chips);
* bandwidth ``(GB/s)`` = ``bytes / (total_cycles / freq) / 2**30`` — msprof's
  ``pmu x size / (task_cyc / freq) / 2**33`` with sizes in bits, so "GB" is
  2**30 bytes, and the time is the cores' summed time: the average bandwidth
  one core sees (``bw x total_cycles / freq = bytes`` of the whole task);
* MemoryAccess ``(KB)`` = ``bytes summed over blocks / 1024``;
* L2Cache counts = requests summed over blocks (nullable Int64);
* ``cube_utilization(%)`` (A2 PipeUtilization) =
  ``total_cycles / (freq x ai_core_num x Task Duration) x 100``;
* ``memory_bound`` (910A PipeUtilization) = ``mte2_ratio / max(mac_ratio, vec_ratio)``.

Byte counters read "out of" (read) and "into" (write) the named memory:
``l0a_read`` is what the cube reads from L0A, ``l0a_write`` what MTE1 writes
into it from L1; ``main_mem`` is global memory (GM) as the core sees it, ``l2``
the part of it the L2 cache served (hits).

Rows without data (other core kind, AI CPU, communication, no PMU record, an
event the run did not program) are NaN; cycle and request counts are Int64
with ``<NA>``.  Floats are rounded to 3 decimals as msprof does.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...prof import rawdata
from ..rundir import RunDir
from . import columns as C
from .indexing import scatter

#: 2**30: msprof's "GB" (``/ 8589934592`` on bit counts).
GB = float(1 << 30)
#: FLOPs per cube instruction (msprof: ``r49*16*16*16*2 + r4a*16*16*32*2``).
CUBE_FOPS_PER_INSTR = {"cube_fp16_instr": 16 * 16 * 16 * 2, "cube_int8_instr": 16 * 16 * 32 * 2}
#: Element operations per vector instruction (one cycle of lanes).
VECTOR_FOPS_PER_INSTR = {"vec_fp32_instr": 64, "vec_fp16_instr": 128, "vec_int32_instr": 64, "vec_misc_instr": 32}


def _metric_values(m: C.PmuMetric, event, cyc: np.ndarray, bd: np.ndarray, waves: np.ndarray,
                   freq: float) -> list[np.ndarray]:
    """The column values of metric ``m`` (one array per column of ``m.columns``)."""
    ev = [event(e) for e in m.events]
    with np.errstate(invalid="ignore", divide="ignore"):
        if m.kind == "pipe":
            return [ev[0] * waves / freq, ev[0] / cyc]
        if m.kind == "ratio":
            return [ev[0] / cyc]
        if m.kind == "rate":
            return [np.where(ev[1] > 0, ev[0] / ev[1], np.nan)]
        if m.kind == "bw":
            return [ev[0] / (cyc / (freq * 1e6)) / GB]
        if m.kind == "kb":
            return [ev[0] * bd / 1024]
        if m.kind == "count":
            return [ev[0] * bd]
        if m.kind == "cube_fops":
            return [sum(v * CUBE_FOPS_PER_INSTR[e] for e, v in zip(m.events, ev)) * bd]
        if m.kind == "vector_fops":
            return [sum(v * VECTOR_FOPS_PER_INSTR[e] for e, v in zip(m.events, ev)) * bd]
    raise ValueError(f"unknown PMU metric kind {m.kind!r}")


def _integer_column(c: str, aic_metrics: str) -> bool:
    return c.endswith("total_cycles") or (aic_metrics == "L2Cache" and c not in ("aicore_time(us)", "aiv_time(us)"))


def float_columns(aic_metrics: str, family: str) -> list[str]:
    """The PMU columns that are floats (the others are nullable Int64 counts)."""
    return [c for c in C.pmu_columns(aic_metrics, family) if not _integer_column(c, aic_metrics)]


def pmu_columns(run: RunDir, device_id: int, conn: np.ndarray, n_conn: int, block_dim: np.ndarray,
                cycles: np.ndarray, dur_us: np.ndarray, family: str, aic_metrics: str,
                out: dict[str, np.ndarray] | None = None) -> dict[str, object]:
    """The PMU columns of op_summary for the rows (msprof ai_core_config formulas).

    Float columns are written into ``out[column]`` when given (float64 arrays of the rows'
    length, e.g. rows of the table's float block), so a million-row table is not built twice.
    """
    names = C.pmu_columns(aic_metrics, family)
    if not names:
        return {}
    group = C.pmu_group(aic_metrics, family)
    info = run.device_info(device_id)
    freq = float(info.get("aic_frequency", 1800))
    cores = {"aic": int(info.get("ai_core_num", 24)), "aiv": int(info.get("aiv_num", 0) or info.get("ai_core_num", 24))}
    events = run.load("aicore_events", device_id)
    events = events[events["connection_id"] < n_conn]  # a damaged record's id names no task of the run
    event_names = run.info.get("pmu_events") or {}
    n = len(conn)
    out = dict(out or {})
    for c in names:
        if c in out:
            out[c].fill(np.nan)
        else:
            out[c] = np.full(n, np.nan)
    core_of_conn = scatter(n_conn, events["connection_id"], events["core"], 255, np.uint8)
    counts = np.zeros((rawdata.PMU_EVENTS_PER_TASK, n_conn), np.float64)  # per event, per connection
    counts[:, events["connection_id"]] = events["events"].T
    for core_name, core_code in (("aic", rawdata.PMU_CORE_AIC), ("aiv", rawdata.PMU_CORE_AIV)):
        if core_name not in group:
            continue
        ev_names = list(event_names.get(core_name, []))
        rows = (core_of_conn[conn] == core_code) & (cycles > 0)
        if not rows.any():
            continue
        cyc = cycles[rows].astype(np.float64)
        bd = block_dim[rows].astype(np.float64)
        waves = np.ceil(bd / cores[core_name])
        row_conn = conn[rows]

        def event(name: str) -> np.ndarray:
            return counts[ev_names.index(name)][row_conn] if name in ev_names else np.full(len(cyc), np.nan)

        prefix = f"{core_name}_" if family == "A2" else ""
        time_col, total_col = C.time_columns(family, core_name)
        out[time_col][rows] = cyc * waves / freq
        out[total_col][rows] = cyc * bd
        for m in group[core_name]:
            for col, values in zip(m.columns(prefix), _metric_values(m, event, cyc, bd, waves, freq)):
                out[col][rows] = values
        with np.errstate(invalid="ignore", divide="ignore"):
            if aic_metrics == "PipeUtilization" and family == "A2" and core_name == "aic":
                out["cube_utilization(%)"][rows] = cyc * bd / (freq * cores["aic"] * dur_us[rows]) * 100
            if aic_metrics == "PipeUtilization" and family != "A2":
                mte2, mac, vec = (out[f"{p}_ratio"][rows] for p in ("mte2", "mac", "vec"))
                denom = np.maximum(mac, vec)
                out["memory_bound"][rows] = np.where(denom > 0, mte2 / denom, np.nan)
    result = {}
    for c in names:
        if _integer_column(c, aic_metrics):
            result[c] = pd.array(np.where(np.isnan(out[c]), 0, out[c]).astype(np.int64), dtype="Int64")
            result[c][np.isnan(out[c])] = pd.NA
        else:
            result[c] = _round3(out[c])
    return result


def _round3(values: np.ndarray) -> np.ndarray:
    """``np.round(values, 3)``, in place (numpy rounds the same way: scale, rint, unscale)."""
    np.multiply(values, 1000.0, out=values)
    np.rint(values, out=values)
    np.divide(values, 1000.0, out=values)
    return values
