"""The per-block PMU counter model of the cost model: one breakdown serves every aic_metrics group.

Table-driven over both chip families and a spread of kernels (cube and vector, every dtype
class, tiny to larger-than-L2).  The invariants are the ones the op_summary columns rely on:
FLOPs and bytes add up to the op's cost, counters that msprof divides by the task's cycles stay
below them even at the fastest run-time jitter, and the memory levels agree with each other.
"""

from __future__ import annotations

import json
import math

import pytest

import geprof_nb
from geprof_nb import cost_model as D
from geprof_nb import ge
from geprof_nb.ge.device import COUNTERS, PRESETS, CostModel, check_aic_metrics
from geprof_nb.ge.ops import OpCost
from geprof_nb.ge.schedule import JITTER_CLIP
from geprof_nb.prof import msprof
from geprof_nb.prof.events import PMU_EVENTS, aic_metrics_on
from geprof_nb.prof.options import ProfilingOptions, ProfilingOptionsError
from geprof_nb.prof.rawdata import PMU_EVENTS_PER_TASK

MiB = 1 << 20

#: (name, engine, OpCost, dtype)
KERNELS = [
    ("MatMulV2", "AI_CORE", OpCost(flops=2 * 512 ** 3, bytes_in=2 * 2 * 512 * 512, bytes_out=2 * 512 * 512, tiles=64),
     "float16"),
    ("Conv2D", "AI_CORE", OpCost(flops=7_000_000_000, bytes_in=30 * MiB, bytes_out=12 * MiB, tiles=200), "bfloat16"),
    ("MatMul", "AI_CORE", OpCost(flops=3 * 10 ** 9, bytes_in=40 * MiB, bytes_out=8 * MiB, tiles=24), "float32"),
    ("BatchMatMul", "AI_CORE", OpCost(flops=10 ** 10, bytes_in=64 * MiB, bytes_out=16 * MiB, tiles=96), "int8"),
    ("MatMulV2", "AI_CORE", OpCost(flops=2 * 8 * 16 * 4, bytes_in=600, bytes_out=64, tiles=1), "float16"),  # tiny
    ("Conv2DBackpropFilter", "AI_CORE", OpCost(flops=4 * 10 ** 9, bytes_in=400 * MiB, bytes_out=100 * MiB, tiles=24),
     "float16"),  # working set > L2
    ("Relu", "AI_VECTOR_CORE", OpCost(vector_ops=1 << 20, bytes_in=2 << 20, bytes_out=2 << 20, tiles=64), "float16"),
    ("Add", "AI_VECTOR_CORE", OpCost(vector_ops=3 << 20, bytes_in=24 << 20, bytes_out=12 << 20, tiles=200), "float32"),
    ("Cast", "AI_VECTOR_CORE", OpCost(vector_ops=1 << 18, bytes_in=1 << 20, bytes_out=1 << 20, tiles=16), "int32"),
    ("ArgMax", "AI_VECTOR_CORE", OpCost(vector_ops=1 << 16, bytes_in=1 << 19, bytes_out=1 << 10, tiles=4), "int64"),
    ("Exp", "AI_VECTOR_CORE", OpCost(vector_ops=1 << 26, bytes_in=1 << 10, bytes_out=1 << 10, tiles=48), "float16"),
    ("ReduceMean", "AI_VECTOR_CORE", OpCost(vector_ops=8, bytes_in=16, bytes_out=2, tiles=1), "float16"),  # tiny
    ("Mul", "AI_VECTOR_CORE", OpCost(vector_ops=1 << 27, bytes_in=600 * MiB, bytes_out=300 * MiB, tiles=256),
     "float16"),  # working set > L2
]
CASES = [pytest.param(dev, *k, id=f"{dev}-{k[0]}-{k[3]}-{i}") for dev in sorted(PRESETS) for i, k in enumerate(KERNELS)]
CUBE_CASES = [c for c in CASES if c.values[2] == "AI_CORE"]
VECTOR_CASES = [c for c in CASES if c.values[2] == "AI_VECTOR_CORE"]
#: Counters msprof divides by the task's total cycles (``*_ratio``).
RATIO_COUNTERS = [c for c in COUNTERS if c.endswith(("_cycles", "_instr"))]


def kernel(device: str, name: str, engine: str, cost: OpCost, dtype: str):
    return CostModel(PRESETS[device]).kernel(name, engine, cost, dtype, {})


# ----------------------------------------------------------------------------- the counter set
@pytest.mark.parametrize("device,name,engine,cost,dtype", CASES)
def test_every_ai_core_kernel_has_every_counter(device, name, engine, cost, dtype):
    k = kernel(device, name, engine, cost, dtype)
    assert list(k.counters) == list(COUNTERS)
    assert all(isinstance(v, int) and v >= 0 for v in k.counters.values())
    assert k.counters["icache_req"] > 0 and k.counters["scalar_cycles"] > 0


def test_kernels_off_the_ai_core_count_nothing():
    cm = CostModel(PRESETS["Ascend910B"])
    assert cm.kernel("GetNext", "AI_CPU", OpCost(bytes_out=100), "float16", {}).counters == {}
    assert cm.kernel("HcomAllReduce", "HCCL", OpCost(comm_bytes=1 << 20), "float32", {"rank_size": 8}).counters == {}


@pytest.mark.parametrize("group", sorted(PMU_EVENTS))
def test_pmu_event_sets_are_counters_within_the_hardware_limit(group):
    a2_only = group in ("L2Cache", "MemoryAccess")  # reference §1.3: A2-class chips only
    assert set(PMU_EVENTS[group]) == ({"A2"} if a2_only else {"A2", "910A"})
    assert set(PMU_EVENTS[group]["A2"]) == {"aic", "aiv"}
    assert a2_only or set(PMU_EVENTS[group]["910A"]) == {"aic"}
    for cores in PMU_EVENTS[group].values():
        for names in cores.values():
            assert 1 <= len(names) <= PMU_EVENTS_PER_TASK == 8
            assert len(set(names)) == len(names)
            assert set(names) <= set(COUNTERS), set(names) - set(COUNTERS)


def test_every_group_is_programmed_and_pipe_utilization_keeps_its_events():
    from geprof_nb.prof.events import AIC_METRICS

    assert set(PMU_EVENTS) == set(AIC_METRICS)
    assert PMU_EVENTS["PipeUtilization"] == {
        "A2": {"aic": ("mac_cycles", "scalar_cycles", "mte1_cycles", "mte2_cycles", "fixpipe_cycles", "icache_req",
                       "icache_miss"),
               "aiv": ("vec_cycles", "scalar_cycles", "mte2_cycles", "mte3_cycles", "icache_req", "icache_miss")},
        "910A": {"aic": ("vec_cycles", "mac_cycles", "scalar_cycles", "mte1_cycles", "mte2_cycles", "mte3_cycles",
                         "icache_req", "icache_miss")},
    }


# ---------------------------------------------------------------------- ratios and durations
@pytest.mark.parametrize("device,name,engine,cost,dtype", CASES)
def test_no_ratio_reaches_one_even_at_the_fastest_jitter(device, name, engine, cost, dtype):
    k = kernel(device, name, engine, cost, dtype)
    fastest = round(k.block_cycles * JITTER_CLIP[0])
    busiest = max(k.counters[c] for c in RATIO_COUNTERS)
    assert 0 < busiest < fastest, (busiest, fastest)
    c = k.counters
    assert c["cube_fp16_instr"] + c["cube_int8_instr"] <= c["mac_cycles"]
    assert c["vec_fp32_instr"] + c["vec_fp16_instr"] + c["vec_int32_instr"] + c["vec_misc_instr"] <= c["vec_cycles"]
    assert c["icache_miss"] < c["icache_req"]


@pytest.mark.parametrize("device,name,engine,cost,dtype", CASES)
def test_duration_follows_the_busiest_pipe_or_the_shared_gm_traffic(device, name, engine, cost, dtype):
    dev = PRESETS[device]
    cm = CostModel(dev)
    k = kernel(device, name, engine, cost, dtype)
    pipes = [k.counters[f"{p}_cycles"] for p in ("mac", "vec", "scalar", "mte1", "mte2", "mte3", "fixpipe")]
    # reads (MTE2) and writes (MTE3/fixpipe) share the block's part of the chip's memory bandwidth
    share = cm.memory_bandwidth(cm.l2_hit_rate(name, cost.bytes)) / (dev.aic_frequency_mhz * 1e6) / k.block_dim
    gm_cycles = (k.counters["main_mem_read_bytes"] + k.counters["main_mem_write_bytes"]) / share
    busy = max(*pipes, gm_cycles)
    assert 1.12 * busy + dev.startup_cycles <= k.block_cycles + 2
    assert k.block_cycles <= 1.35 * (busy + 1) + dev.startup_cycles
    assert k.duration_ns == dev.task_overhead_ns + int(k.block_cycles * k.waves * 1000 / dev.aic_frequency_mhz)


# ------------------------------------------------------------------------ arithmetic
@pytest.mark.parametrize("device,name,engine,cost,dtype", CUBE_CASES)
def test_cube_instructions_add_up_to_the_flops(device, name, engine, cost, dtype):
    k = kernel(device, name, engine, cost, dtype)
    c = k.counters
    fops = (c["cube_fp16_instr"] * D.CUBE_FP16_FLOPS + c["cube_int8_instr"] * D.CUBE_INT8_FLOPS) * k.block_dim
    per_instr = D.CUBE_INT8_FLOPS if dtype == "int8" else D.CUBE_FP16_FLOPS
    assert abs(cost.flops - fops) <= per_instr * k.block_dim / 2  # whole instructions per block
    assert (c["cube_int8_instr"] > 0) == (dtype == "int8" and cost.flops >= per_instr * k.block_dim / 2)
    assert c["cube_fp16_instr"] == 0 or dtype != "int8"
    # fp16/bf16/int8 issue one instruction per cycle; fp32 runs at a quarter of the rate
    instr = c["cube_fp16_instr"] + c["cube_int8_instr"]
    assert c["mac_cycles"] == instr * (4 if dtype == "float32" else 1)
    assert c["vec_fp32_instr"] == c["vec_fp16_instr"] == c["vec_int32_instr"] == c["vec_misc_instr"] == 0


@pytest.mark.parametrize("device,name,engine,cost,dtype", VECTOR_CASES)
def test_vector_instructions_add_up_to_the_element_ops(device, name, engine, cost, dtype):
    k = kernel(device, name, engine, cost, dtype)
    c = k.counters
    lanes = D.VECTOR_LANES
    fops = (c["vec_fp32_instr"] * lanes["fp32"] + c["vec_fp16_instr"] * lanes["fp16"]
            + c["vec_int32_instr"] * lanes["int32"] + c["vec_misc_instr"] * lanes["misc"]) * k.block_dim
    assert abs(cost.vector_ops - fops) <= (lanes["fp16"] + lanes["misc"]) * k.block_dim / 2
    classes = {"float32": "vec_fp32_instr", "int32": "vec_int32_instr", "int64": "vec_misc_instr"}
    cls = classes.get(dtype, "vec_fp16_instr")
    others = {"vec_fp32_instr", "vec_fp16_instr", "vec_int32_instr"} - {cls}
    assert all(c[o] == 0 for o in others)
    if cost.vector_ops > 1 << 20:
        assert c[cls] > 0 and c["vec_misc_instr"] > 0
    assert c["mac_cycles"] == c["cube_fp16_instr"] == c["cube_int8_instr"] == 0


# ---------------------------------------------------------------------------- bytes
@pytest.mark.parametrize("device,name,engine,cost,dtype", CASES)
def test_bytes_add_up_by_path_and_by_level(device, name, engine, cost, dtype):
    dev = PRESETS[device]
    k = kernel(device, name, engine, cost, dtype)
    c, bd = k.counters, k.block_dim
    # what the op reads and writes, per block (floor per block)
    assert 0 <= cost.bytes_in - c["main_mem_read_bytes"] * bd < bd
    assert 0 <= cost.bytes_out - c["main_mem_write_bytes"] * bd < bd
    assert c["main_mem_read_bytes"] == c["gm_to_l1_bytes"] + c["gm_to_ub_bytes"]
    assert c["main_mem_write_bytes"] == c["l0c_to_gm_bytes"] + c["ub_to_gm_bytes"]
    assert c["l1_write_bytes"] == c["gm_to_l1_bytes"] + c["l0c_to_l1_bytes"]
    assert c["l1_read_bytes"] == c["l0a_write_bytes"] + c["l0b_write_bytes"]
    assert c["ub_read_bytes"] == c["ub_read_mte_bytes"] + c["ub_read_vector_bytes"] + c["ub_read_scalar_bytes"]
    assert c["ub_write_bytes"] == c["ub_write_mte_bytes"] + c["ub_write_vector_bytes"] + c["ub_write_scalar_bytes"]
    assert c["ub_read_scalar_bytes"] > 0 and c["ub_write_scalar_bytes"] > 0
    # a core moves at most its MTE width per busy cycle
    assert c["main_mem_read_bytes"] <= (c["mte2_cycles"] + 1) * dev.core_bytes_per_cycle
    if engine == "AI_CORE":
        instr = c["cube_fp16_instr"] + c["cube_int8_instr"]
        assert c["gm_to_l1_bytes"] == c["main_mem_read_bytes"] and c["gm_to_ub_bytes"] == 0
        assert c["l0a_read_bytes"] == c["l0b_read_bytes"] == pytest.approx(instr * D.L0AB_FRACTAL_BYTES, abs=512)
        assert c["l0c_write_cube_bytes"] == pytest.approx(instr * D.L0C_FRACTAL_BYTES, abs=1024)
        assert c["l0c_read_cube_bytes"] <= c["l0c_write_cube_bytes"]
        # MTE1 moves every input byte from L1 to L0A/L0B at least once
        assert c["l1_read_bytes"] >= c["gm_to_l1_bytes"] - 2
        # MTE1 busy for its bytes, or for its share of the cube's time if longer (the next tile's load in flight)
        assert c["mte1_cycles"] == pytest.approx(max(c["l1_read_bytes"] / D.MTE1_BYTES_PER_CYCLE,
                                                     D.CUBE_MTE1_SHARE * c["mac_cycles"]), abs=2)
        if dev.stars:  # fixpipe L0C -> GM, no UB on the cube core
            assert c["l0c_to_gm_bytes"] == c["main_mem_write_bytes"] and c["ub_to_gm_bytes"] == 0
            assert c["ub_read_mte_bytes"] == c["ub_write_vector_bytes"] == c["l0c_read_bytes"] == 0
            assert c["fixpipe_cycles"] > 0 or cost.bytes_out < 128 * bd
        else:  # vector L0C -> UB, MTE3 UB -> GM
            assert c["ub_to_gm_bytes"] == c["main_mem_write_bytes"] == c["ub_read_mte_bytes"]
            assert c["ub_write_vector_bytes"] == c["main_mem_write_bytes"] and c["l0c_to_gm_bytes"] == 0
            assert c["l0c_read_bytes"] > 0 and c["fixpipe_cycles"] == 0
            assert c["vec_cycles"] == int(c["l0c_read_bytes"] / D.VECTOR_MOVE_BYTES_PER_CYCLE)
    else:
        assert c["gm_to_ub_bytes"] == c["ub_write_mte_bytes"] == c["main_mem_read_bytes"]
        assert c["ub_to_gm_bytes"] == c["ub_read_mte_bytes"] == c["main_mem_write_bytes"]
        assert c["gm_to_l1_bytes"] == c["l1_read_bytes"] == c["l1_write_bytes"] == 0
        assert c["l0a_read_bytes"] == c["l0c_write_cube_bytes"] == c["l0c_read_bytes"] == 0
        elem = {"float32": 4, "int32": 4, "int64": 8}.get(dtype, 2)
        ops = cost.vector_ops / bd
        assert c["ub_write_vector_bytes"] == int(ops * elem) and c["ub_read_vector_bytes"] == int(2 * ops * elem)


# ------------------------------------------------------------------------------- L2
@pytest.mark.parametrize("device,name,engine,cost,dtype", CASES)
def test_l2_requests_split_into_hits_and_misses(device, name, engine, cost, dtype):
    cm = CostModel(PRESETS[device])
    k = cm.kernel(name, engine, cost, dtype, {})
    c = k.counters
    line = D.L2_LINE_BYTES
    reads = [c["r0_read_cache_hit"], c["r0_read_cache_miss_allocate"], c["r1_read_cache_hit"],
             c["r1_read_cache_miss_allocate"]]
    assert sum(reads) == math.ceil(c["main_mem_read_bytes"] / line)
    assert c["write_cache_hit"] + c["write_cache_miss_allocate"] == math.ceil(c["main_mem_write_bytes"] / line)
    assert abs((reads[0] + reads[1]) - (reads[2] + reads[3])) <= 1  # two read channels share the requests
    hit = cm.l2_hit_rate(name, cost.bytes)
    for h, m in ((reads[0], reads[1]), (reads[2], reads[3]), (c["write_cache_hit"], c["write_cache_miss_allocate"])):
        assert abs(h - (h + m) * hit) <= 0.5 + 1e-9
    assert c["l2_read_bytes"] == min((reads[0] + reads[2]) * line, c["main_mem_read_bytes"])
    assert c["l2_write_bytes"] == min(c["write_cache_hit"] * line, c["main_mem_write_bytes"])


@pytest.mark.parametrize("device", sorted(PRESETS))
def test_l2_hit_rate_falls_with_the_working_set_and_sets_the_bandwidth(device):
    dev = PRESETS[device]
    cm = CostModel(dev)
    sizes = [1 << 10, dev.l2_bytes // 4, dev.l2_bytes // 2, dev.l2_bytes, 2 * dev.l2_bytes, 8 * dev.l2_bytes]
    rates = [cm.l2_hit_rate("Conv2D", s) for s in sizes]
    assert rates == sorted(rates, reverse=True) and rates[0] == rates[2] > rates[3]
    assert 0.82 <= rates[0] <= D.L2_MAX_HIT_RATE and rates[-1] < 0.1
    # the same op moving the same bytes: a working set beyond the L2 hits less and takes longer
    small = OpCost(vector_ops=1 << 20, bytes_in=dev.l2_bytes // 8, bytes_out=1 << 10, tiles=24)
    big = OpCost(vector_ops=1 << 20, bytes_in=dev.l2_bytes // 8, bytes_out=4 * dev.l2_bytes, tiles=24)
    ks, kb = (cm.kernel("Add", "AI_VECTOR_CORE", c, "float16", {}) for c in (small, big))
    hit_share = lambda k: k.counters["r0_read_cache_hit"] / (k.counters["r0_read_cache_hit"]  # noqa: E731
                                                             + k.counters["r0_read_cache_miss_allocate"])
    assert hit_share(ks) > 0.8 > 0.2 > hit_share(kb)
    latency = D.VECTOR_DMA_LATENCY_CYCLES  # each DMA pipe's one GM latency, whatever the hit rate
    assert kb.counters["mte2_cycles"] - latency > 2 * (ks.counters["mte2_cycles"] - latency)


# ------------------------------------------------------------------------ conflicts
@pytest.mark.parametrize("device,name,engine,cost,dtype", CASES)
def test_vector_conflicts_are_a_share_of_the_vector_stalls(device, name, engine, cost, dtype):
    k = kernel(device, name, engine, cost, dtype)
    c = k.counters
    conflicts = c["vec_bankgroup_cflt_cycles"] + c["vec_bank_cflt_cycles"] + c["vec_resc_cflt_cycles"]
    assert conflicts <= 0.35 * c["vec_cycles"]
    if c["vec_cycles"] >= 200:  # every vector-busy kernel stalls a little ...
        assert c["vec_bankgroup_cflt_cycles"] > 0 and c["vec_bank_cflt_cycles"] > 0 and c["vec_resc_cflt_cycles"] > 0
    if c["vec_cycles"] == 0:  # ... and an idle vector unit never
        assert conflicts == 0
    assert k.block_cycles - max(c[p] for p in RATIO_COUNTERS) >= conflicts  # the stalls fit in the duration


# ------------------------------------------------------------------ groups a chip lacks
A910_GROUPS = ("ArithmeticUtilization, PipeUtilization, Memory, MemoryL0, MemoryUB, ResourceConflictRatio")


@pytest.mark.parametrize("group", ["L2Cache", "MemoryAccess"])
def test_910a_rejects_the_a2_only_groups(group, tmp_path):
    assert aic_metrics_on("910A") == tuple(A910_GROUPS.split(", "))
    assert set(aic_metrics_on("A2")) == set(PMU_EVENTS)
    with pytest.raises(ProfilingOptionsError, match=f"'{group}' is not available on Ascend910A; accepted: "
                                                    f"{A910_GROUPS}$"):
        check_aic_metrics(PRESETS["Ascend910A"], group)
    check_aic_metrics(PRESETS["Ascend910B"], group)
    check_aic_metrics(PRESETS["Ascend910A"], "Custom:0x49")  # Custom groups are the options' business
    # GE options: PARAM_INVALID before any run directory exists
    opts = {"geprof.device": "Ascend910A", "ge.exec.profilingMode": "1",
            "ge.exec.profilingOptions": json.dumps({"output": str(tmp_path), "aic_metrics": group})}
    assert ge.GEInitialize(opts) == ge.PARAM_INVALID
    assert f"E10001: profiling option 'aic_metrics': '{group}' is not available on Ascend910A" in ge.GEGetErrorMsg()
    assert not list(tmp_path.iterdir()) and not msprof.lib.running
    # the C API: aclgrphProfCreateConfig returns nullptr
    assert ge.GEInitialize({"geprof.device": "Ascend910A"}) == ge.SUCCESS
    metric = {"L2Cache": ge.ProfilingAicoreMetrics.kAicoreL2Cache,
              "MemoryAccess": None}[group]
    if metric is not None:  # MemoryAccess has no ProfilingAicoreMetrics value
        assert ge.aclgrphProfCreateConfig([0], metric, 2) is None
        assert ge.GEGetErrorMsg().endswith(
            "kAicoreL2Cache is not available on Ascend910A; accepted: kAicoreArithmeticUtilization, "
            "kAicorePipeUtilization, kAicoreMemory, kAicoreMemoryL0, kAicoreResourceConflictRatio, kAicoreMemoryUB")
    assert ge.aclgrphProfCreateConfig([0], ge.ProfilingAicoreMetrics.kAicoreMemory, 2) is not None
    ge.GEFinalize()


def test_a_run_started_before_a_910a_device_notes_why_it_has_no_pmu_data(tmp_path):
    """msprof started first (as a %%geprof cell does), then GE brings up a 910A: warned and noted, data kept."""
    msprof.lib.init(tmp_path, {"output": str(tmp_path), "aic_metrics": "L2Cache"})
    msprof.lib.start(ProfilingOptions.parse({"aic_metrics": "L2Cache"}).data_type_config())
    with pytest.warns(UserWarning, match=r"aic_metrics 'L2Cache': Ascend910A has no such counter group \(it has: "
                                         r"ArithmeticUtilization, .*ResourceConflictRatio\); no AI Core PMU data"):
        assert ge.GEInitialize({"geprof.device": "Ascend910A", "geprof.clock": "virtual"}) == ge.SUCCESS
    sess = ge.Session()
    sess.add_graph(1, ge.models.mlp(batch_size=4, in_features=16, hidden=(16,)))
    for _ in range(2):
        assert sess.run_graph(1) == ge.SUCCESS
    kernels = sum(k is not None for k in sess.model(1).table.kernels)
    ge.GEFinalize()
    profile = geprof_nb.load(msprof.lib.finalize())
    assert any("Ascend910A has no such counter group" in n for n in profile.info["notes"])
    assert list(profile.step_trace["Iteration ID"]) == [1, 2]
    assert len(profile.op_summary) == 2 * kernels
    assert "aicore_time(us)" not in profile.op_summary.columns
