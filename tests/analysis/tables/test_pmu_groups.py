"""op_summary PMU columns for every aic_metrics group on both chip families, end to end.

The same small ResNet-50 training graph runs once per (group, device) on the virtual clock, so
every run sees the same tasks with the same per-execution cycle counts; only the programmed PMU
events differ.  The tests check the exact headers, the value ranges and NaN pattern, and that
the groups agree with each other and with the op catalogue (FLOPs, bytes).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from geprof_nb.analysis.tables import columns as C
from geprof_nb.ge.device import PRESETS, CostModel
from geprof_nb.ge.ops import op_cost
from geprof_nb.prof.events import AIC_METRICS, PMU_EVENTS
from geprof_nb.prof.rawdata import PMU_EVENTS_PER_TASK
from helpers.geprof_testing import run_profiled_session, small_resnet

GROUPS = list(AIC_METRICS)
DEVICES = ["Ascend910B", "Ascend910A"]
FAMILY = {"Ascend910B": "A2", "Ascend910A": "910A"}
GB = float(1 << 30)
L2_LINE = 128

_A2_BASE = (
    "Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,Task Start Time(us),Task Duration(us),"
    "Task Wait Time(us),Block Num,Mix Block Num,HF32 Eligible,Input Shapes,Input Data Types,Input Formats,"
    "Output Shapes,Output Data Types,Output Formats,Context ID").split(",")
_910A_BASE = [c for c in _A2_BASE if c not in ("Mix Block Num", "Context ID")]

# Expected PMU headers, written out.  A2: msprof's 910B expected headers per group (msprof smoke-test
# config; MemoryAccess from MindSpore's 910B aic_metrics test) == reference §4.1 lists with the
# aic_/aiv_ prefixes minus msprof's UNSUPPORTED_HEADER set.  910A: reference §4.1 lists unprefixed
# (the Memory order with l2 before main_mem and the MemoryUB *_mte columns are unconfirmed).
# L2Cache and MemoryAccess exist on A2-class chips only.
EXPECTED = {
    ("ArithmeticUtilization", "A2"):
        "aicore_time(us),aic_total_cycles,aic_mac_fp16_ratio,aic_mac_int8_ratio,aic_cube_fops,aiv_time(us),"
        "aiv_total_cycles,aiv_vec_fp32_ratio,aiv_vec_fp16_ratio,aiv_vec_int32_ratio,aiv_vec_misc_ratio,aiv_vector_fops",
    ("ArithmeticUtilization", "910A"):
        "aicore_time(us),total_cycles,mac_fp16_ratio,mac_int8_ratio,vec_fp32_ratio,vec_fp16_ratio,vec_int32_ratio,"
        "vec_misc_ratio,cube_fops,vector_fops",
    ("PipeUtilization", "A2"):
        "aicore_time(us),aic_total_cycles,aic_mac_time(us),aic_mac_ratio,aic_scalar_time(us),aic_scalar_ratio,"
        "aic_mte1_time(us),aic_mte1_ratio,aic_mte2_time(us),aic_mte2_ratio,aic_fixpipe_time(us),aic_fixpipe_ratio,"
        "aic_icache_miss_rate,aiv_time(us),aiv_total_cycles,aiv_vec_time(us),aiv_vec_ratio,aiv_scalar_time(us),"
        "aiv_scalar_ratio,aiv_mte2_time(us),aiv_mte2_ratio,aiv_mte3_time(us),aiv_mte3_ratio,aiv_icache_miss_rate,"
        "cube_utilization(%)",
    ("PipeUtilization", "910A"):
        "aicore_time(us),total_cycles,vec_time(us),vec_ratio,mac_time(us),mac_ratio,scalar_time(us),scalar_ratio,"
        "mte1_time(us),mte1_ratio,mte2_time(us),mte2_ratio,mte3_time(us),mte3_ratio,icache_miss_rate,memory_bound",
    ("Memory", "A2"):
        "aicore_time(us),aic_total_cycles,aic_l1_read_bw(GB/s),aic_l1_write_bw(GB/s),aic_main_mem_read_bw(GB/s),"
        "aic_main_mem_write_bw(GB/s),aic_l2_read_bw(GB/s),aic_l2_write_bw(GB/s),aiv_time(us),aiv_total_cycles,"
        "aiv_ub_read_bw(GB/s),aiv_ub_write_bw(GB/s),aiv_main_mem_read_bw(GB/s),aiv_main_mem_write_bw(GB/s),"
        "aiv_l2_read_bw(GB/s),aiv_l2_write_bw(GB/s)",
    ("Memory", "910A"):
        "aicore_time(us),total_cycles,ub_read_bw(GB/s),ub_write_bw(GB/s),l1_read_bw(GB/s),l1_write_bw(GB/s),"
        "l2_read_bw(GB/s),l2_write_bw(GB/s),main_mem_read_bw(GB/s),main_mem_write_bw(GB/s)",
    ("MemoryL0", "A2"):
        "aicore_time(us),aic_total_cycles,aic_l0a_read_bw(GB/s),aic_l0a_write_bw(GB/s),aic_l0b_read_bw(GB/s),"
        "aic_l0b_write_bw(GB/s),aic_l0c_read_bw_cube(GB/s),aic_l0c_write_bw_cube(GB/s),aiv_time(us),"
        "aiv_total_cycles,aiv_l0c_read_bw(GB/s),aiv_l0c_write_bw(GB/s)",
    ("MemoryL0", "910A"):
        "aicore_time(us),total_cycles,l0a_read_bw(GB/s),l0a_write_bw(GB/s),l0b_read_bw(GB/s),l0b_write_bw(GB/s),"
        "l0c_read_bw(GB/s),l0c_write_bw(GB/s),l0c_read_bw_cube(GB/s),l0c_write_bw_cube(GB/s)",
    ("MemoryUB", "A2"):
        "aicore_time(us),aic_total_cycles,aic_ub_read_bw_scalar(GB/s),aic_ub_write_bw_scalar(GB/s),aiv_time(us),"
        "aiv_total_cycles,aiv_ub_read_bw_vector(GB/s),aiv_ub_write_bw_vector(GB/s),aiv_ub_read_bw_scalar(GB/s),"
        "aiv_ub_write_bw_scalar(GB/s)",
    ("MemoryUB", "910A"):
        "aicore_time(us),total_cycles,ub_read_bw_mte(GB/s),ub_write_bw_mte(GB/s),ub_read_bw_vector(GB/s),"
        "ub_write_bw_vector(GB/s),ub_read_bw_scalar(GB/s),ub_write_bw_scalar(GB/s)",
    ("ResourceConflictRatio", "A2"):
        "aicore_time(us),aic_total_cycles,aiv_time(us),aiv_total_cycles,aiv_vec_bankgroup_cflt_ratio,"
        "aiv_vec_bank_cflt_ratio,aiv_vec_resc_cflt_ratio",
    ("ResourceConflictRatio", "910A"):
        "aicore_time(us),total_cycles,vec_bankgroup_cflt_ratio,vec_bank_cflt_ratio,vec_resc_cflt_ratio",
    ("L2Cache", "A2"):
        "aicore_time(us),aic_total_cycles,aic_write_cache_hit,aic_write_cache_miss_allocate,aic_r0_read_cache_hit,"
        "aic_r0_read_cache_miss_allocate,aic_r1_read_cache_hit,aic_r1_read_cache_miss_allocate,aiv_time(us),"
        "aiv_total_cycles,aiv_write_cache_hit,aiv_write_cache_miss_allocate,aiv_r0_read_cache_hit,"
        "aiv_r0_read_cache_miss_allocate,aiv_r1_read_cache_hit,aiv_r1_read_cache_miss_allocate",
    ("MemoryAccess", "A2"):
        "aicore_time(us),aic_total_cycles,aic_read_main_memory_datas(KB),aic_write_main_memory_datas(KB),"
        "aic_GM_to_L1_datas(KB),aic_L0C_to_L1_datas(KB),aic_L0C_to_GM_datas(KB),aic_GM_to_UB_datas(KB),"
        "aic_UB_to_GM_datas(KB),aiv_time(us),aiv_total_cycles,aiv_read_main_memory_datas(KB),"
        "aiv_write_main_memory_datas(KB),aiv_GM_to_L1_datas(KB),aiv_L0C_to_L1_datas(KB),aiv_L0C_to_GM_datas(KB),"
        "aiv_GM_to_UB_datas(KB),aiv_UB_to_GM_datas(KB)",
}
GROUP_DEVICE = [pytest.param(g, d, id=f"{g}-{d}") for g in GROUPS for d in DEVICES if FAMILY[d] in PMU_EVENTS[g]]
A2_ONLY = ("L2Cache", "MemoryAccess")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(group, device) -> ProfiledRun, made on first use (one small ResNet-50 run, 2 steps, each)."""
    cache: dict = {}
    graphs: dict = {}

    def get(group: str, device: str):
        if (group, device) not in cache:
            graph = graphs.setdefault(device, small_resnet(8))
            out = tmp_path_factory.mktemp(f"{group}_{device}")
            cache[group, device] = run_profiled_session(out, graph, 2, device=device, aic_metrics=group)
        return cache[group, device]

    return get


class Rows:
    """The PMU part of one run's op_summary with the facts the checks need, row-aligned."""

    def __init__(self, run, device: str) -> None:
        self.run = run
        self.ops = run.profile.op_summary
        self.family = FAMILY[device]
        dev = run.profile.device
        self.freq = float(dev["aic_frequency"])
        self.cores = {"aic": int(dev["ai_core_num"]), "aiv": int(dev["aiv_num"] or dev["ai_core_num"])}
        read_before: set = set()  # the stored tensors read so far: the ops costed in launch order, as compiled
        launched = {n.name: op_cost(n, read_before) for n in run.graph.nodes if n.engine != "GE_LOCAL"}
        costs = {name: launched[name] for name in self.ops["Op Name"].astype(str).unique() if name in launched}
        names = self.ops["Op Name"].astype(str)
        self.flops = names.map(lambda n: costs[n].flops if n in costs else np.nan).to_numpy(float)
        self.vector_ops = names.map(lambda n: costs[n].vector_ops if n in costs else np.nan).to_numpy(float)
        self.bytes_in = names.map(lambda n: costs[n].bytes_in if n in costs else np.nan).to_numpy(float)
        self.bytes_out = names.map(lambda n: costs[n].bytes_out if n in costs else np.nan).to_numpy(float)
        self.stored = names.map(lambda n: costs[n].stored_bytes_in if n in costs else np.nan).to_numpy(float)
        self.bd = self.ops["Block Num"].to_numpy(float, na_value=np.nan)
        task = self.ops["Task Type"].astype(str)
        self.cube = (task == "AI_CORE").to_numpy() & (self.flops > 0)
        on_aiv = (task == "AI_VECTOR_CORE").to_numpy()
        self.vector = on_aiv | ((task == "AI_CORE").to_numpy() & (self.vector_ops > 0))
        self.core_rows = {"aic": (task == "AI_CORE").to_numpy(), "aiv": on_aiv}

    def col(self, name: str) -> np.ndarray:
        return self.ops[name].to_numpy(float, na_value=np.nan)

    def prefix(self, core: str) -> str:
        return f"{core}_" if self.family == "A2" else ""

    def core_of(self, rows: np.ndarray) -> str:
        """The core kind that runs ``rows`` (all of one kind)."""
        return "aiv" if self.family == "A2" and self.core_rows["aiv"][rows].all() else "aic"

    def seconds(self, core: str) -> np.ndarray:
        """Summed core time of each task: total_cycles / freq."""
        return self.col(C.time_columns(self.family, core)[1]) / (self.freq * 1e6)

    def waves(self, core: str) -> np.ndarray:
        return np.ceil(self.bd / self.cores[core])

    def bytes_of(self, column: str, core: str) -> np.ndarray:
        """Bytes behind a bandwidth column: bw x summed core time."""
        return self.col(f"{self.prefix(core)}{column}(GB/s)") * GB * self.seconds(core)

    def kernels(self, kind: str) -> list[tuple[np.ndarray, str]]:
        """(rows, core) for the cube or vector kernels, split by the core kind that runs them."""
        sel = self.cube if kind == "cube" else self.vector
        out = []
        for core in ("aic", "aiv"):
            rows = sel & self.core_rows[core]
            if rows.any():
                out.append((rows, core))
        assert out, f"no {kind} kernels"
        return out


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


def rows(runs, group: str, device: str) -> Rows:
    return Rows(runs(group, device), device)


def bw_tol(seconds: np.ndarray, bd: np.ndarray) -> np.ndarray:
    """Bytes lost to 3-decimal rounding of a GB/s value, plus per-block floor rounding."""
    return 0.0006 * GB * seconds + 2 * bd + 1


# ------------------------------------------------------------------------------ headers
@pytest.mark.parametrize("group,device", GROUP_DEVICE)
def test_exact_columns(runs, group, device):
    family = FAMILY[device]
    pmu = EXPECTED[group, family].split(",")
    assert C.pmu_columns(group, family) == pmu
    base = _A2_BASE if family == "A2" else _910A_BASE
    assert C.op_summary_columns(family, "l1", group) == base + pmu
    run = runs(group, device)
    assert list(run.profile.op_summary.columns) == base + pmu
    assert run.profile.info["pmu_events"]["metrics"] == [group]


@pytest.mark.parametrize("group", GROUPS)
def test_every_column_reads_programmed_events(group):
    assert set(C.PMU_GROUPS[group]) == set(PMU_EVENTS[group]) == ({"A2"} if group in A2_ONLY else {"A2", "910A"})
    for family in PMU_EVENTS[group]:
        spec = C.pmu_group(group, family)
        assert spec and set(spec) == set(PMU_EVENTS[group][family])
        for core, metrics in spec.items():
            programmed = PMU_EVENTS[group][family][core]
            assert len(programmed) <= PMU_EVENTS_PER_TASK
            needed = {e for m in metrics for e in m.events}
            assert needed <= set(programmed), (family, core, needed - set(programmed))


def test_custom_and_unknown_groups_have_no_pmu_columns():
    assert C.pmu_columns("Custom:0x49,0x8", "A2") == [] == C.pmu_columns("PipelineExecuteUtilization", "910A")


# ------------------------------------------------------------------------ values and NaN
@pytest.mark.parametrize("group,device", GROUP_DEVICE)
def test_values_in_range_and_nan_where_no_data(runs, group, device):
    r = rows(runs, group, device)
    ops, family = r.ops, r.family
    task = ops["Task Type"].astype(str)
    no_pmu = task.isin(["AI_CPU", "COMMUNICATION"]).to_numpy()
    assert no_pmu.any() and r.core_rows["aic"].any()
    assert r.core_rows["aiv"].any() == (family == "A2")
    for core in ("aic", "aiv") if family == "A2" else ("aic",):
        time_col, total_col = C.time_columns(family, core)
        cols = [time_col, total_col] + C.core_columns(group, family, core)
        own = r.core_rows[core]
        for c in cols:
            v = r.col(c)
            assert np.isnan(v[no_pmu]).all(), c
            assert not np.isnan(v[own]).any(), c
            assert (v[own] >= 0).all(), c
            if family == "A2":  # the other core kind's rows
                assert np.isnan(v[r.core_rows["aiv" if core == "aic" else "aic"]]).all(), c
            if c.endswith(("_ratio", "_rate")):
                assert (v[own] <= 1).all(), c
        assert str(ops[total_col].dtype) == "Int64" and (r.col(total_col)[own] > 0).all()
        assert (r.col(time_col)[own] > 0).all()
    for c in C.pmu_columns(group, family):
        expect_int = c.endswith("total_cycles") or (group == "L2Cache" and not c.endswith("(us)"))
        assert (str(ops[c].dtype) == "Int64") == expect_int, c
        if not expect_int:
            assert ops[c].dtype == np.float64, c
    # something is measured: no group is all zeros on either core kind (A2 vector cores have no L0C)
    for core in ("aic", "aiv") if family == "A2" else ("aic",):
        metric_cols = C.core_columns(group, family, core)
        if metric_cols and (group, family, core) != ("MemoryL0", "A2", "aiv"):
            assert np.nansum([np.nansum(r.col(c)[r.core_rows[core]]) for c in metric_cols]) > 0


@pytest.mark.parametrize("group,device", [p for p in GROUP_DEVICE if p.values[0] != "PipeUtilization"])
def test_time_and_cycles_are_the_same_in_every_group(runs, group, device):
    """One counter model per task: every group sees the same executions (virtual clock)."""
    pipe, other = rows(runs, "PipeUtilization", device), rows(runs, group, device)
    assert (pipe.ops["Op Name"].astype(str).to_numpy() == other.ops["Op Name"].astype(str).to_numpy()).all()
    cores = ("aic", "aiv") if pipe.family == "A2" else ("aic",)
    for c in [c for core in cores for c in C.time_columns(pipe.family, core)]:
        np.testing.assert_array_equal(pipe.col(c), other.col(c), err_msg=c)


# ------------------------------------------------------------------------- arithmetic
def test_cube_fops_are_the_op_flops(runs, device):
    r = rows(runs, "ArithmeticUtilization", device)
    for rows_, core in r.kernels("cube"):
        fops = r.col(f"{r.prefix(core)}cube_fops")[rows_]
        flops, bd = r.flops[rows_], r.bd[rows_]
        # whole fp16 instructions (8192 FLOPs) per block: equal within half an instruction per block
        assert (np.abs(flops - fops) <= 8192 / 2 * bd).all()
        assert (fops == flops).mean() > 0.5  # most convolutions tile exactly
        assert abs(fops.sum() / flops.sum() - 1) < 1e-3
        # dtype split: this graph is fp16, so int8 never counts
        assert (r.col(f"{r.prefix(core)}mac_int8_ratio")[rows_] == 0).all()
        assert (r.col(f"{r.prefix(core)}mac_fp16_ratio")[rows_] > 0).all()


def test_vector_fops_are_the_op_element_ops(runs, device):
    r = rows(runs, "ArithmeticUtilization", device)
    for rows_, core in r.kernels("vector"):
        fops = r.col(f"{r.prefix(core)}vector_fops")[rows_]
        ops, bd = r.vector_ops[rows_], r.bd[rows_]
        assert (np.abs(ops - fops) <= (128 + 32) / 2 * bd).all()  # whole instructions per block
        big = ops > 10 ** 6
        assert big.any()
        np.testing.assert_allclose(fops[big], ops[big], rtol=5e-3)
        assert abs(fops.sum() / ops.sum() - 1) < 1e-3


def test_arithmetic_ratios_fit_in_the_pipe_ratios(runs, device):
    arith, pipe = rows(runs, "ArithmeticUtilization", device), rows(runs, "PipeUtilization", device)
    for rows_, core in arith.kernels("cube"):
        p = arith.prefix(core)
        mac = arith.col(f"{p}mac_fp16_ratio") + arith.col(f"{p}mac_int8_ratio")
        assert (mac[rows_] <= pipe.col(f"{p}mac_ratio")[rows_] + 0.001).all()
    for rows_, core in arith.kernels("vector"):
        p = arith.prefix(core)
        vec = sum(arith.col(f"{p}vec_{t}_ratio") for t in ("fp32", "fp16", "int32", "misc"))
        assert (vec[rows_] <= pipe.col(f"{p}vec_ratio")[rows_] + 0.003).all()
        assert (vec[rows_] > 0).any()


# ----------------------------------------------------------------------------- memory
def test_main_memory_bandwidth_times_time_is_the_op_bytes(runs, device):
    r = rows(runs, "Memory", device)
    for kind in ("cube", "vector"):
        for rows_, core in r.kernels(kind):
            sec, bd = r.seconds(core)[rows_], r.bd[rows_]
            tol = bw_tol(sec, bd)
            read, write = r.bytes_of("main_mem_read_bw", core)[rows_], r.bytes_of("main_mem_write_bw", core)[rows_]
            assert (np.abs(read - r.bytes_in[rows_]) <= tol).all()
            assert (np.abs(write - r.bytes_out[rows_]) <= tol).all()
            # the same in the per-core view: bandwidth x aicore_time x blocks per wave
            time_col = C.time_columns(r.family, core)[0]
            per_core = r.col(f"{r.prefix(core)}main_mem_read_bw(GB/s)") * GB * r.col(time_col) * 1e-6
            np.testing.assert_allclose((per_core * r.bd / r.waves(core))[rows_], r.bytes_in[rows_], rtol=5e-3,
                                       atol=1e3)
            # L2 serves part of what the core reads from GM, never more
            l2 = r.bytes_of("l2_read_bw", core)[rows_]
            assert (l2 <= read + tol).all() and (l2 > tol).mean() > 0.9


def test_memory_bandwidth_fits_the_mte_pipes(runs, device):
    """Bytes per busy MTE2 cycle (Memory / PipeUtilization) stay within a core's MTE width."""
    mem, pipe = rows(runs, "Memory", device), rows(runs, "PipeUtilization", device)
    for kind in ("cube", "vector"):
        for rows_, core in mem.kernels(kind):
            mte2_cycles = pipe.col(f"{pipe.prefix(core)}mte2_ratio") * pipe.col(C.time_columns(pipe.family, core)[1])
            ok = rows_ & (mte2_cycles > 1000)
            per_cycle = mem.bytes_of("main_mem_read_bw", core)[ok] / mte2_cycles[ok]
            assert ok.any() and (per_cycle <= 256 * 1.05).all() and (per_cycle > 1).all()


def test_l1_traffic_follows_the_cube(runs, device):
    mem, arith = rows(runs, "Memory", device), rows(runs, "ArithmeticUtilization", device)
    (rows_, core), = mem.kernels("cube")
    tol = bw_tol(mem.seconds(core)[rows_], mem.bd[rows_])
    assert (np.abs(mem.bytes_of("l1_write_bw", core)[rows_] - mem.bytes_in[rows_]) <= tol).all()  # GM -> L1
    l1_read = mem.bytes_of("l1_read_bw", core)[rows_]  # L1 -> L0A/L0B, every input byte at least once
    assert (l1_read >= mem.bytes_in[rows_] - tol).all()
    instr = arith.col(f"{arith.prefix(core)}cube_fops")[rows_] / (16 * 16 * 16 * 2)
    assert (l1_read <= 2 * 512 * instr / 6 + mem.bytes_in[rows_] + tol).all()  # refills at a reuse >= 6


# ---------------------------------------------------------------------------- L2 cache
@pytest.mark.parametrize("device", ["Ascend910B"])  # an A2-class group
def test_l2_hits_plus_misses_are_the_requests(runs, device):
    l2, mem = rows(runs, "L2Cache", device), rows(runs, "Memory", device)
    for kind in ("cube", "vector"):
        for rows_, core in l2.kernels(kind):
            p, bd = l2.prefix(core), l2.bd[rows_]
            hit_r = (l2.col(f"{p}r0_read_cache_hit") + l2.col(f"{p}r1_read_cache_hit"))[rows_]
            miss_r = (l2.col(f"{p}r0_read_cache_miss_allocate") + l2.col(f"{p}r1_read_cache_miss_allocate"))[rows_]
            hit_w, miss_w = l2.col(f"{p}write_cache_hit")[rows_], l2.col(f"{p}write_cache_miss_allocate")[rows_]
            per_block_in = np.floor(l2.bytes_in[rows_] / bd)
            per_block_out = np.floor(l2.bytes_out[rows_] / bd)
            np.testing.assert_array_equal(hit_r + miss_r, np.ceil(per_block_in / L2_LINE) * bd)
            np.testing.assert_array_equal(hit_w + miss_w, np.ceil(per_block_out / L2_LINE) * bd)
            # the hit share is the cost model's rate for the op's working set (+-1 request per channel)
            model = CostModel(PRESETS[device])
            types = l2.ops["OP Type"].astype(str).to_numpy()[rows_]
            want = np.array([model.l2_hit_rate(t, b, int(s)) for t, b, s in
                             zip(types, l2.bytes_in[rows_] + l2.bytes_out[rows_], l2.stored[rows_])])
            share = hit_r / (hit_r + miss_r)
            big = hit_r + miss_r >= 100 * bd
            assert big.any()
            assert (np.abs(share - want)[big] <= 2 * bd[big] / (hit_r + miss_r)[big] + 1e-9).all()
            assert (want <= 0.9).all() and (want >= 0).all()
            # the Memory group's L2 bandwidth is the hit lines' bytes
            l2_bytes = np.minimum(hit_r * L2_LINE, per_block_in * bd)
            sec = mem.seconds(core)[rows_]
            assert (np.abs(mem.bytes_of("l2_read_bw", core)[rows_] - l2_bytes) <= bw_tol(sec, bd)).all()


# ------------------------------------------------------------------------ memory access
@pytest.mark.parametrize("device", ["Ascend910B"])  # an A2-class group
def test_memory_access_paths_add_up(runs, device):
    acc, mem = rows(runs, "MemoryAccess", device), rows(runs, "Memory", device)
    for kind in ("cube", "vector"):
        for rows_, core in acc.kernels(kind):
            p, bd = acc.prefix(core), acc.bd[rows_]
            kb = {c: acc.col(f"{p}{c}(KB)")[rows_] * 1024 for c in (
                "read_main_memory_datas", "write_main_memory_datas", "GM_to_L1_datas", "L0C_to_L1_datas",
                "L0C_to_GM_datas", "GM_to_UB_datas", "UB_to_GM_datas")}
            tol = bd + 1
            assert (np.abs(kb["read_main_memory_datas"] - acc.bytes_in[rows_]) <= tol).all()
            assert (np.abs(kb["write_main_memory_datas"] - acc.bytes_out[rows_]) <= tol).all()
            assert (np.abs(kb["GM_to_L1_datas"] + kb["GM_to_UB_datas"] - kb["read_main_memory_datas"]) <= 2).all()
            assert (np.abs(kb["L0C_to_GM_datas"] + kb["UB_to_GM_datas"] - kb["write_main_memory_datas"]) <= 2).all()
            assert (kb["L0C_to_L1_datas"] == 0).all()
            if kind == "vector":
                assert (kb["GM_to_L1_datas"] == 0).all() and (kb["L0C_to_GM_datas"] == 0).all()
            else:  # fixpipe writes cube results straight to GM
                assert (kb["GM_to_UB_datas"] == 0).all() and (kb["UB_to_GM_datas"] == 0).all()
            # MemoryAccess KB and Memory GB/s describe the same bytes
            sec = mem.seconds(core)[rows_]
            read = mem.bytes_of("main_mem_read_bw", core)[rows_]
            assert (np.abs(read - kb["read_main_memory_datas"]) <= bw_tol(sec, bd)).all()


# ---------------------------------------------------------------------------- L0 and UB
def test_l0_traffic_is_the_cube_instructions(runs, device):
    l0, arith = rows(runs, "MemoryL0", device), rows(runs, "ArithmeticUtilization", device)
    (rows_, core), = l0.kernels("cube")
    instr = arith.col(f"{arith.prefix(core)}cube_fops")[rows_] / (16 * 16 * 16 * 2)
    sec, bd = l0.seconds(core)[rows_], l0.bd[rows_]
    tol = bw_tol(sec, bd)
    for col, per_instr in (("l0a_read_bw", 512), ("l0b_read_bw", 512), ("l0c_write_bw_cube", 1024)):
        assert (np.abs(l0.bytes_of(col, core)[rows_] - instr * per_instr) <= tol + per_instr * bd).all(), col
    for fill, use in (("l0a_write_bw", "l0a_read_bw"), ("l0b_write_bw", "l0b_read_bw")):
        # MTE1 refills L0A/L0B from L1 once per 6..10 uses, and moves every input byte at least once
        got, used = l0.bytes_of(fill, core)[rows_], l0.bytes_of(use, core)[rows_]
        assert (got > 0).all()
        assert (got >= used / 10 - tol).all() and (got <= used / 6 + l0.bytes_in[rows_] / 2 + tol).all(), fill
    accumulate = l0.bytes_of("l0c_read_bw_cube", core)[rows_]  # partial sums read back for the next k-step
    assert (accumulate >= -tol).all() and (accumulate > tol).mean() > 0.5
    assert (accumulate <= l0.bytes_of("l0c_write_bw_cube", core)[rows_] + tol).all()
    if l0.family == "A2":  # the vector cores never touch L0C
        aiv = l0.core_rows["aiv"]
        assert (l0.col("aiv_l0c_read_bw(GB/s)")[aiv] == 0).all() and (l0.col("aiv_l0c_write_bw(GB/s)")[aiv] == 0).all()
    else:  # 910A: the vector unit drains cube results from L0C
        assert (l0.col("l0c_read_bw(GB/s)")[rows_] > 0).all()


def test_ub_traffic_adds_up_across_groups(runs, device):
    ub, mem = rows(runs, "MemoryUB", device), rows(runs, "Memory", device)
    (rows_, core), = ub.kernels("vector")
    sec, bd = ub.seconds(core)[rows_], ub.bd[rows_]
    tol = 3 * bw_tol(sec, bd)
    parts_read = ub.bytes_of("ub_read_bw_vector", core) + ub.bytes_of("ub_read_bw_scalar", core)
    parts_write = ub.bytes_of("ub_write_bw_vector", core) + ub.bytes_of("ub_write_bw_scalar", core)
    if ub.family == "910A":
        parts_read = parts_read + ub.bytes_of("ub_read_bw_mte", core)
        parts_write = parts_write + ub.bytes_of("ub_write_bw_mte", core)
    else:  # A2 shows no *_mte columns: the MTE part is what MemoryAccess moved UB <-> GM
        acc = rows(runs, "MemoryAccess", device)
        p = acc.prefix(core)
        parts_read = parts_read + acc.col(f"{p}UB_to_GM_datas(KB)") * 1024
        parts_write = parts_write + acc.col(f"{p}GM_to_UB_datas(KB)") * 1024
    assert (np.abs(mem.bytes_of("ub_read_bw", core)[rows_] - parts_read[rows_]) <= tol).all()
    assert (np.abs(mem.bytes_of("ub_write_bw", core)[rows_] - parts_write[rows_]) <= tol).all()
    # the vector unit reads two operands and writes one per element op
    arith = rows(runs, "ArithmeticUtilization", device)
    fops = arith.col(f"{arith.prefix(core)}vector_fops")[rows_]
    vec_read = ub.bytes_of("ub_read_bw_vector", core)[rows_]
    big = fops > 10 ** 6
    assert big.any() and (vec_read[big] >= 2 * 2 * fops[big] * 0.99).all()
    assert (vec_read[big] <= 2 * 8 * fops[big] * 1.01).all()


# ------------------------------------------------------------------------- conflicts
def test_resource_conflicts_fit_in_the_vector_pipe(runs, device):
    rc, pipe = rows(runs, "ResourceConflictRatio", device), rows(runs, "PipeUtilization", device)
    (rows_, core), = rc.kernels("vector")
    p = rc.prefix(core)
    total = sum(rc.col(f"{p}vec_{c}_cflt_ratio") for c in ("bankgroup", "bank", "resc"))[rows_]
    vec = pipe.col(f"{p}vec_ratio")[rows_]
    assert (total <= 0.35 * vec + 0.003).all()
    assert (total > 0).sum() > 0.5 * rows_.sum()


# ------------------------------------------------------------------------- custom
def test_custom_metrics_warn_and_collect_no_pmu_columns(run_profiled):
    with pytest.warns(UserWarning, match="Custom event groups are not simulated; no AI Core PMU data"):
        run = run_profiled(small_resnet(1), steps=1, device="Ascend910A", aic_metrics="Custom:0x49,0x4a")
    cols = list(run.profile.op_summary.columns)
    assert cols == _910A_BASE
    assert len(run.profile.run.load("aicore_events")) == 0
    assert isinstance(run.profile.op_summary, pd.DataFrame) and math.isfinite(len(run.profile.op_summary))


# ------------------------------------------------------------------------- formulas
def test_msprof_formulas_on_known_counts():
    """Each metric kind against msprof's formula, with two waves (more blocks than cores)."""
    from geprof_nb.analysis.tables import pmu

    counts = {"mac_cycles": 600.0, "icache_miss": 5.0, "icache_req": 50.0, "cube_fp16_instr": 400.0,
              "cube_int8_instr": 100.0, "main_mem_read_bytes": 1 << 20, "write_cache_hit": 7.0,
              "vec_fp32_instr": 1.0, "vec_fp16_instr": 2.0, "vec_int32_instr": 3.0, "vec_misc_instr": 4.0}
    cyc, bd, waves, freq = np.array([1000.0]), np.array([30.0]), np.array([2.0]), 1800.0

    def values(name: str, kind: str, *events: str) -> list[float]:
        m = C.PmuMetric(name, kind, events)
        return [float(v[0]) for v in pmu._metric_values(m, lambda e: np.array([counts[e]]), cyc, bd, waves, freq)]

    task_cyc = cyc[0] * bd[0]  # msprof sums cycles and events over the blocks
    assert values("mac", "pipe", "mac_cycles") == pytest.approx(
        [600 * bd[0] / task_cyc * (task_cyc / freq / bd[0] * 2), 0.6])  # ratio x aicore_time, cycles / task_cyc
    assert values("icache_miss_rate", "rate", "icache_miss", "icache_req") == [0.1]
    assert values("mac_fp16_ratio", "ratio", "cube_fp16_instr") == [0.4]
    assert values("cube_fops", "cube_fops", "cube_fp16_instr", "cube_int8_instr") == [
        (0.4 * task_cyc * 16 * 16 * 16 * 2 + 0.1 * task_cyc * 16 * 16 * 32 * 2)]
    assert values("vector_fops", "vector_fops", "vec_fp32_instr", "vec_fp16_instr", "vec_int32_instr",
                  "vec_misc_instr") == [(1 * 64 + 2 * 128 + 3 * 64 + 4 * 32) * bd[0]]
    # bandwidth: pmu x size_bits / (task_cyc / freq_hz) / 2**33, i.e. bytes / time / 2**30
    assert values("main_mem_read_bw", "bw", "main_mem_read_bytes") == pytest.approx(
        [(1 << 20) * bd[0] * 8 / (task_cyc / (freq * 1e6)) / 8589934592.0])
    assert values("read_main_memory_datas", "kb", "main_mem_read_bytes") == [(1 << 20) * bd[0] / 1024]
    assert values("write_cache_hit", "count", "write_cache_hit") == [7 * bd[0]]
