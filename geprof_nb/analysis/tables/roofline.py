"""The roofline of a run's AI Core and AI Vector Core ops: what each op does (FLOPs, bytes), how fast it ran,
the most its chip allows at its arithmetic intensity, and how close it came.

Per op task the inputs are its cube FLOPs, its vector FLOPs (element operations), its HBM bytes and its
duration (:func:`cost_work` for a simulated run, from the cost model's own counts the run records;
:func:`pmu_work` for imported data, from the PMU columns the files hold), and the chip's :class:`Roofs`.
With ``P_cube``, ``P_vec`` the peaks at the op's data type and ``B`` the HBM bandwidth, the op needs at least

    ``t_min = max(cube / P_cube, vector / P_vec, bytes / B)``

(the cube, the vector units and the memory work side by side, so the slowest sets the pace).  For an op of
one unit that is the classic roofline: attainable FLOP/s = FLOPs / t_min = ``min(P, intensity x B)``.  A MIX
op (a cube kernel with vector work on the AI Vector cores beside it) has the compute roof
``(cube + vector) / max(cube / P_cube, vector / P_vec)``: the time its slower unit needs at its peak.  The
efficiency is ``t_min / duration`` (= achieved / attainable FLOP/s), at most 1 on a simulated run (its cost
model never runs a pipe faster than its peak nor the memory past its bandwidth).  Rows of an op (or an op
type) add up: their FLOPs, bytes, durations and ``t_min``; the bound is the one whose summed time (compute
or memory) is larger.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...prof import rawdata
from .mfu import DA_VINCI_CUBE_FLOPS_PER_CYCLE

COLUMNS = ["Op Name", "OP Type", "Task Type", "Count", "Duration(us)", "FLOPs", "Cube FLOPs", "Vector FLOPs",
           "Bytes", "GM Bytes", "Arithmetic Intensity(FLOP/B)", "Achieved TFLOP/s", "Achieved GB/s",
           "Compute Roof TFLOP/s", "Attainable TFLOP/s", "Roofline Time(us)", "Bound", "Efficiency", "Estimated"]
TYPE_COLUMNS = ["OP Type", "Ops", *COLUMNS[3:]]
#: The task types the roofline covers: kernels on the AI Cores and AI Vector cores.
TASK_TYPES = ("AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV")
#: The per-row inputs (:func:`cost_work`, :func:`pmu_work`), aligned with op_summary's rows.
WORK_COLUMNS = ["Cube FLOPs", "Vector FLOPs", "Bytes", "GM Bytes", "Cube Scale", "Vector Scale", "Estimated"]
#: A Da Vinci vector unit: 128 fp16 lanes a cycle (platform ini ``vec_calc_size=128``).
VECTOR_FP16_LANES = 128


@dataclass(frozen=True)
class Chip:
    """The facts a chip's roofs follow from (when a run's files do not give them)."""

    ai_core_num: int
    aiv_num: int  # AI Vector cores; 0: the AI Cores run vector work themselves
    aic_frequency: int  # MHz
    hbm_bandwidth: float  # bytes/s
    source: str


#: The chips whose roofs are known, by SoC name (the cube peak is 16 x 16 x 16 fp16 MACs x 2 FLOPs per AI Core
#: and cycle, the vector peak 128 fp16 lanes per vector core and cycle).  Sources:
#: /work/shared/reference/ge_msprof_formats.md section 7 (the 910B2 platform ini: 24 AI Cores, 48 vector
#: cores, cube_freq 1800 MHz; 910A: 32 AI Cores) and section 8 (HBM bandwidths: the commonly cited 1.6 TB/s
#: and 1.2 TB/s, not verified from an authoritative source); they are the simulator's presets (ge/device.py).
CHIPS: dict[str, Chip] = {
    "Ascend910B2": Chip(24, 48, 1800, 1.6e12, "Ascend910B2 platform ini (cores, 1800 MHz); HBM 1.6 TB/s as "
                        "commonly cited, unverified"),
    "Ascend910A": Chip(32, 0, 1000, 1.2e12, "Ascend910A: 32 AI Cores at 1000 MHz as msprof's test data; HBM "
                       "1.2 TB/s as commonly cited, unverified"),
}
#: The chip a family's run is taken for when its files do not name the chip.
FAMILY_CHIPS = {"A2": "Ascend910B2", "910A": "Ascend910A"}


@dataclass(frozen=True)
class Roofs:
    """A device's roofs: fp16 / bf16 peaks (FLOP/s) and HBM bandwidth (bytes/s), and what was assumed."""

    chip: str
    cube_flops: float
    vector_flops: float
    hbm_bandwidth: float
    #: the facts the run did not give, taken from :data:`CHIPS` (empty: all from the run)
    assumed: tuple[str, ...] = ()

    def note(self) -> str:
        """Where the roofs come from, in words."""
        text = (f"roofs of {self.chip}: cube {self.cube_flops / 1e12:.1f} TFLOP/s, vector "
                f"{self.vector_flops / 1e12:.2f} TFLOP/s (fp16), HBM {self.hbm_bandwidth / 1e9:,.0f} GB/s")
        if self.assumed:
            text += f"; {', '.join(self.assumed)} not in the run's files: {CHIPS[self.chip].source}"
        return text


def _positive(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not value > 0:
        return None
    return float(value)


def device_roofs(device: Mapping) -> Roofs:
    """The roofs of a run's device facts (info.json DeviceInfo; a simulated run records all of them), the
    missing ones from the :data:`CHIPS` row of its SoC, else of its chip family's chip."""
    named = next((str(device[k]) for k in ("soc_version", "name") if str(device.get(k, "")) in CHIPS), None)
    chip_name = named or FAMILY_CHIPS.get(str(device.get("chip_family", "A2")), "Ascend910B2")
    chip = CHIPS[chip_name]
    assumed = [] if named else ["the chip"]

    def fact(keys: tuple[str, ...], default: float, label: str) -> float:
        for key in keys:
            v = _positive(device.get(key))
            if v is not None:
                return v
        assumed.append(label)
        return float(default)

    cores = fact(("ai_core_num",), chip.ai_core_num, "ai_core_num")
    mhz = fact(("aic_frequency", "aic_frequency_mhz"), chip.aic_frequency, "aic_frequency")
    recorded_aiv = device.get("aiv_num", device.get("vector_core_num"))
    if recorded_aiv == 0 or (recorded_aiv is None and chip.aiv_num == 0):
        vector_cores = cores  # vector work on the AI Cores
    else:
        vector_cores = fact(("aiv_num", "vector_core_num"), chip.aiv_num * cores / chip.ai_core_num, "aiv_num")
    cube = float(_positive(device.get("cube_flops_per_cycle")) or DA_VINCI_CUBE_FLOPS_PER_CYCLE)
    lanes = float(_positive(device.get("vector_fp16_per_cycle")) or VECTOR_FP16_LANES)
    hbm = fact(("hbm_bandwidth",), chip.hbm_bandwidth, "hbm_bandwidth")
    return Roofs(chip_name, cube * cores * mhz * 1e6, lanes * vector_cores * mhz * 1e6, hbm, tuple(assumed))


def dtype_scales(data_type: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(cube, vector) peak factors against fp16 of ``rawdata.DataType`` codes, as the simulator's cost model
    runs them: int8 2 x the cube's fp16 rate, float32 a quarter; vector lanes 64 for float32 and int32, 32
    for 8-byte types (else 128)."""
    codes = np.asarray(data_type, np.int64)
    dt = rawdata.DataType
    cube = np.select([codes == dt.DT_INT8, codes == dt.DT_FLOAT], [2.0, 0.25], 1.0)
    eight_bytes = np.isin(codes, [dt.DT_INT64, dt.DT_UINT64, dt.DT_DOUBLE])
    vector = np.select([np.isin(codes, [dt.DT_FLOAT, dt.DT_INT32, dt.DT_UINT32]), eight_bytes], [0.5, 0.25], 1.0)
    return cube, vector


def empty_work(n: int = 0) -> pd.DataFrame:
    """Work of ``n`` rows none of which is known."""
    nan = np.full(n, np.nan)
    return pd.DataFrame({"Cube FLOPs": nan, "Vector FLOPs": nan, "Bytes": nan, "GM Bytes": nan,
                         "Cube Scale": np.ones(n), "Vector Scale": np.ones(n), "Estimated": np.full(n, "", object)})


def cost_records(connection_id: np.ndarray, costs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(found, records): which op_summary rows (by ``connection_id``) have an ``op_cost`` record, and those
    rows' records in row order."""
    conn = np.asarray(connection_id, np.int64)
    if not len(costs) or not len(conn):
        return np.zeros(len(conn), bool), costs[:0]
    order = np.argsort(costs["connection_id"], kind="stable")
    keys = costs["connection_id"][order].astype(np.int64)
    pos = np.minimum(np.searchsorted(keys, conn), len(keys) - 1)
    found = keys[pos] == conn
    return found, costs[order][pos[found]]


def cost_work(connection_id: np.ndarray, costs: np.ndarray) -> pd.DataFrame:
    """Per op_summary row (by ``connection_id``): the cost model's counts of its task (``op_cost`` records):
    cube FLOPs, vector ops, GM bytes, HBM bytes (the GM bytes the L2 did not serve) and the data type's
    peak factors.  Rows of no record (communication, AI CPU, copies) are NaN."""
    out = empty_work(len(connection_id))
    found, rec = cost_records(connection_id, costs)
    if not found.any():
        return out
    gm = rec["gm_read_bytes"].astype(np.float64) + rec["gm_write_bytes"].astype(np.float64)
    cube, vector = dtype_scales(rec["data_type"])
    out.attrs["notes"] = ["FLOPs and bytes: the simulator's cost model (op_cost records); Bytes: HBM traffic, the "
                          "GM bytes the L2 did not serve (GM Bytes: all the op reads and writes)"]
    for col, values in (("Cube FLOPs", rec["cube_flops"].astype(np.float64)),
                        ("Vector FLOPs", rec["vector_ops"].astype(np.float64)),
                        ("GM Bytes", gm), ("Bytes", gm * (1.0 - rec["l2_hit_rate"])),
                        ("Cube Scale", cube), ("Vector Scale", vector)):
        out.loc[found, col] = values
    return out


def _sum_known(frame: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """Row sums of the ``columns`` ``frame`` has, NaN where none of them has a value."""
    present = [c for c in columns if c in frame.columns]
    if not present:
        return np.full(len(frame), np.nan)
    return frame[present].apply(pd.to_numeric, errors="coerce").sum(axis=1, min_count=1).to_numpy(np.float64)


def pmu_work(ops: pd.DataFrame, device: Mapping, roofs: Roofs) -> pd.DataFrame:
    """Per op_summary row of imported data: FLOPs from the ArithmeticUtilization group's ``*_cube_fops`` and
    ``*_vector_fops`` columns, bytes from the Memory group's main-memory bandwidths x the cores' time
    (``total_cycles / frequency``: estimated, and GM traffic, of which the L2 may have served part); the
    cube's int8 rate for INT8 inputs, fp16 peaks otherwise (an upper bound: fp32 work runs slower)."""
    out = empty_work(len(ops))
    if ops.empty:
        return out
    prefixes = ("aic_", "aiv_") if "aic_total_cycles" in ops.columns or "aiv_total_cycles" in ops.columns else ("",)
    out["Cube FLOPs"] = _sum_known(ops, [f"{p}cube_fops" for p in prefixes])
    out["Vector FLOPs"] = _sum_known(ops, [f"{p}vector_fops" for p in prefixes])
    mhz = _positive(device.get("aic_frequency")) or float(CHIPS[roofs.chip].aic_frequency)
    parts = []
    for p in prefixes:
        cycles_col = f"{p}total_cycles"
        bw = _sum_known(ops, [f"{p}main_mem_read_bw(GB/s)", f"{p}main_mem_write_bw(GB/s)"])
        if cycles_col in ops.columns:
            seconds = pd.to_numeric(ops[cycles_col], errors="coerce").to_numpy(np.float64, na_value=np.nan) / (
                mhz * 1e6)
            parts.append(bw * float(1 << 30) * seconds)
    if parts:
        stacked = np.vstack(parts)
        known = ~np.isnan(stacked)
        out["GM Bytes"] = np.where(known.any(axis=0), np.nansum(stacked, axis=0), np.nan)
        out["Bytes"] = out["GM Bytes"]
    dtypes = ops["Input Data Types"].astype(str).str.split(";").str[0] if "Input Data Types" in ops else None
    if dtypes is not None:
        out["Cube Scale"] = np.where(dtypes.to_numpy() == "INT8", 2.0, 1.0)
    out.attrs["notes"] = ["FLOPs: the PMU's *_cube_fops and *_vector_fops columns (aic_metrics ArithmeticUtilization); "
                          "Bytes: the Memory group's main_mem read + write bandwidth x the cores' time, estimated "
                          "(GM traffic: an upper bound of the HBM's), unknown without that group"]
    has_bytes = ~np.isnan(out["Bytes"].to_numpy())
    out["Estimated"] = np.where(has_bytes, "bytes (bandwidth x time; GM traffic)", "no bytes (compute roof only)")
    return out


@dataclass
class _Parts:
    """Per row (or group): what the roofline adds up."""

    duration_us: np.ndarray
    cube: np.ndarray
    vector: np.ndarray
    hbm: np.ndarray
    gm: np.ndarray
    t_compute: np.ndarray  # s at the peaks
    t_memory: np.ndarray  # s at the bandwidth (NaN: bytes unknown)
    t_min: np.ndarray  # s at the roofline: per row the larger of the two (the compute time if bytes are unknown)


def _row_parts(ops: pd.DataFrame, work: pd.DataFrame, roofs: Roofs) -> _Parts:
    cube = np.nan_to_num(work["Cube FLOPs"].to_numpy(np.float64))
    vector = np.nan_to_num(work["Vector FLOPs"].to_numpy(np.float64))
    t_cube = cube / (roofs.cube_flops * work["Cube Scale"].to_numpy(np.float64))
    t_vec = vector / (roofs.vector_flops * work["Vector Scale"].to_numpy(np.float64))
    hbm = work["Bytes"].to_numpy(np.float64)
    t_compute, t_memory = np.maximum(t_cube, t_vec), hbm / roofs.hbm_bandwidth
    return _Parts(pd.to_numeric(ops["Task Duration(us)"], errors="coerce").to_numpy(np.float64), cube, vector, hbm,
                  work["GM Bytes"].to_numpy(np.float64), t_compute, t_memory, np.fmax(t_compute, t_memory))


def _bound(t_compute: np.ndarray, t_memory: np.ndarray) -> np.ndarray:
    """"compute" or "memory", whichever floor is longer; "" where the bytes (so the memory floor) are unknown."""
    return np.where(np.isnan(t_memory), "", np.where(t_compute >= t_memory, "compute", "memory"))


def row_bounds(ops: pd.DataFrame, work: pd.DataFrame, roofs: Roofs) -> np.ndarray:
    """The roofline bound of each row of op_summary ``ops`` (``work`` aligned): "compute" or "memory", "" for a
    row that is no AI Core / AI Vector Core task or whose bytes are unknown.  Per task, not per op name: a
    serving run's prefill and decode graphs run the same op names, the prefill's MatMuls compute-bound and the
    decode's memory-bound, so what a rule may promise an op (a faster cube, fewer bytes) depends on the task."""
    if not len(ops) or "Task Type" not in ops:
        return np.full(len(ops), "", dtype=object)
    p = _row_parts(ops, work, roofs)
    covered = ops["Task Type"].astype(str).isin(TASK_TYPES).to_numpy()
    return np.where(covered, _bound(p.t_compute, p.t_memory), "").astype(object)


def _derived(p: _Parts, count: np.ndarray, estimated: np.ndarray, roofs: Roofs, kind: np.ndarray) -> dict:
    """The roofline columns of rows or groups ``p`` (``kind``: a unit's peak for rows of no FLOPs)."""
    flops = p.cube + p.vector
    t, t_min = p.duration_us * 1e-6, p.t_min
    with np.errstate(divide="ignore", invalid="ignore"):
        intensity = np.where(p.hbm > 0, flops / p.hbm, np.where((p.hbm == 0) & (flops > 0), np.inf, np.nan))
        compute_roof = np.where(p.t_compute > 0, flops / p.t_compute, kind)
        attainable = np.where(t_min > 0, flops / t_min, 0.0)
        efficiency = np.where(t > 0, t_min / t, np.nan)
        achieved = np.where(t > 0, flops / t, np.nan)
        achieved_bw = np.where(t > 0, p.hbm / t, np.nan)
    bound = _bound(p.t_compute, p.t_memory)
    return {"Count": count, "Duration(us)": p.duration_us, "FLOPs": flops, "Cube FLOPs": p.cube,
            "Vector FLOPs": p.vector, "Bytes": p.hbm, "GM Bytes": p.gm, "Arithmetic Intensity(FLOP/B)": intensity,
            "Achieved TFLOP/s": achieved / 1e12, "Achieved GB/s": achieved_bw / 1e9,
            "Compute Roof TFLOP/s": compute_roof / 1e12, "Attainable TFLOP/s": attainable / 1e12,
            "Roofline Time(us)": t_min * 1e6, "Bound": bound, "Efficiency": efficiency, "Estimated": estimated}


def roofline_tables(ops: pd.DataFrame, work: pd.DataFrame, roofs: Roofs) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per op, per op type) roofline of op_summary ``ops`` and their ``work`` (aligned rows), sorted by time
    (longest first); ``attrs`` hold ``roofs`` (:class:`Roofs`) and ``notes`` (what is estimated or assumed)."""
    keep = np.zeros(len(ops), bool)
    if len(ops):
        known = ~(work["Cube FLOPs"].isna() & work["Vector FLOPs"].isna() & work["Bytes"].isna()).to_numpy()
        keep = ops["Task Type"].astype(str).isin(TASK_TYPES).to_numpy() & known
    rows, w = ops[keep].reset_index(drop=True), work[keep].reset_index(drop=True)
    all_notes = [roofs.note(), *work.attrs.get("notes", [])]
    if rows.empty:
        per_op, per_type = pd.DataFrame(columns=COLUMNS), pd.DataFrame(columns=TYPE_COLUMNS)
    else:
        p = _row_parts(rows, w, roofs)
        unit = np.where(rows["Task Type"].astype(str).isin(["AI_VECTOR_CORE", "MIX_AIV"]).to_numpy(),
                        roofs.vector_flops, roofs.cube_flops)
        base = pd.DataFrame({"Op Name": rows["Op Name"].astype(str), "OP Type": rows["OP Type"].astype(str),
                             "Task Type": rows["Task Type"].astype(str), "duration": p.duration_us, "cube": p.cube,
                             "vector": p.vector, "hbm": p.hbm, "gm": p.gm, "t_compute": p.t_compute,
                             "t_memory": p.t_memory, "t_min": p.t_min, "unit": unit,
                             "Estimated": w["Estimated"].astype(str)})
        per_op = _grouped(base, ["Op Name", "OP Type", "Task Type"], COLUMNS, roofs)
        per_type = _grouped(base, ["OP Type"], TYPE_COLUMNS, roofs)
    for table in (per_op, per_type):
        table.attrs["roofs"] = roofs
        table.attrs["notes"] = all_notes
    return per_op, per_type


def _grouped(base: pd.DataFrame, keys: list[str], columns: list[str], roofs: Roofs) -> pd.DataFrame:
    sums = {"duration": "sum", "cube": "sum", "vector": "sum", "t_compute": "sum", "t_min": "sum", "unit": "max",
            "Op Name": "nunique", "count": "size"}
    g = base.assign(count=1).groupby(keys, sort=False, observed=True)
    agg = g.agg(**{k: (k if k != "count" else "count", how) for k, how in sums.items() if k not in keys})
    # bytes and the memory time: NaN unless every row of the group knows them
    for col in ("hbm", "gm", "t_memory"):
        agg[col] = g[col].sum(min_count=1).where(g[col].count() == g.size())
    agg["Estimated"] = g["Estimated"].agg(lambda s: "; ".join(dict.fromkeys(v for v in s if v)))
    agg = agg.reset_index()
    p = _Parts(agg["duration"].to_numpy(np.float64), agg["cube"].to_numpy(np.float64),
               agg["vector"].to_numpy(np.float64), agg["hbm"].to_numpy(np.float64), agg["gm"].to_numpy(np.float64),
               agg["t_compute"].to_numpy(np.float64), agg["t_memory"].to_numpy(np.float64),
               agg["t_min"].to_numpy(np.float64))
    out = pd.DataFrame({k: agg[k] for k in keys})
    if "Ops" in columns:
        out["Ops"] = agg["Op Name"].to_numpy(np.int64)
    for col, values in _derived(p, agg["count"].to_numpy(np.int64), agg["Estimated"].to_numpy(object), roofs,
                                agg["unit"].to_numpy(np.float64)).items():
        out[col] = values
    return out[columns].sort_values("Duration(us)", ascending=False, kind="stable").reset_index(drop=True)
