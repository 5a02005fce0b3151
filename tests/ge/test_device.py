"""Device presets and the kernel cost model."""

from __future__ import annotations

import pytest

from geprof_nb import ge
from geprof_nb.ge.compiler import CompiledModel
from geprof_nb.ge.device import L2_SPEEDUP, PRESETS, CostModel, device_links, get_device
from geprof_nb.ge.ops import OpCost
from geprof_nb.ge.schedule import JITTER_CLIP
from geprof_nb.prof.rawdata import GeTaskType, RtTaskType


def test_presets_carry_reference_facts():
    b, a = PRESETS["Ascend910B"], PRESETS["Ascend910A"]
    assert (b.ai_core_num, b.vector_core_num, b.aic_frequency_mhz, b.l2_bytes) == (24, 48, 1800, 192 << 20)
    assert b.memory_bytes == 64 << 30 and b.stars and b.chip_family == "A2"
    assert (a.ai_core_num, a.vector_core_num, a.stars, a.chip_family) == (32, 0, False, "910A")
    info = b.info()
    assert (info["ai_core_num"], info["aic_frequency"], info["aiv_num"], info["chip_family"]) == (24, 1800, 48, "A2")
    assert ge.DEVICE_PRESETS is PRESETS


def test_unknown_device():
    with pytest.raises(ValueError, match="unknown device 'Ascend999'; accepted: Ascend910B, Ascend910A"):
        get_device("Ascend999")
    assert get_device(PRESETS["Ascend910A"]) is PRESETS["Ascend910A"]


CUBE = OpCost(flops=2 * 512 ** 3, bytes_in=2 * 2 * 512 * 512, bytes_out=2 * 512 * 512, tiles=64)
VECTOR = OpCost(vector_ops=1 << 20, bytes_in=2 << 20, bytes_out=2 << 20, tiles=64)


@pytest.mark.parametrize("device", sorted(PRESETS))
def test_cube_kernel(device):
    dev = PRESETS[device]
    k = CostModel(dev).kernel("MatMulV2", "AI_CORE", CUBE, "float16", {})
    assert (k.ge_task_type, k.rt_task_type, k.pmu_core) == (GeTaskType.AI_CORE, RtTaskType.KERNEL_AICORE, "aic")
    assert k.block_dim == min(CUBE.tiles, dev.ai_core_num)
    assert k.waves == -(-k.block_dim // dev.ai_core_num)
    assert k.duration_ns == dev.task_overhead_ns + int(k.block_cycles * k.waves * 1000 / dev.aic_frequency_mhz)
    # the cube pipe must at least do the MACs
    assert k.counters["mac_cycles"] == int(CUBE.flops / k.block_dim / dev.cube_flops_per_cycle)
    busy = [v for name, v in k.counters.items() if name.endswith("_cycles")]
    assert max(busy) < k.block_cycles
    assert 0 < k.counters["icache_miss"] < k.counters["icache_req"]
    # results leave L0C through the fixpipe on A2, through the UB (mte3) on 910A
    assert (k.counters["fixpipe_cycles"] > 0) == dev.stars
    assert (k.counters["mte3_cycles"] > 0) == (not dev.stars)


def test_vector_kernel_engine_depends_on_chip():
    kb = CostModel(PRESETS["Ascend910B"]).kernel("Relu", "AI_VECTOR_CORE", VECTOR, "float16", {})
    ka = CostModel(PRESETS["Ascend910A"]).kernel("Relu", "AI_VECTOR_CORE", VECTOR, "float16", {})
    assert (kb.ge_task_type, kb.rt_task_type, kb.pmu_core) == (GeTaskType.AIV, RtTaskType.KERNEL_AIVEC, "aiv")
    assert (ka.ge_task_type, ka.rt_task_type, ka.pmu_core) == (GeTaskType.AI_CORE, RtTaskType.KERNEL_AICORE, "aic")
    assert kb.block_dim == 48 and ka.block_dim == 32
    assert ka.counters["mac_cycles"] == 0


def test_costs_grow_with_work():
    cm = CostModel(PRESETS["Ascend910B"])
    small = cm.kernel("MatMulV2", "AI_CORE", OpCost(flops=10 ** 9, bytes_in=10 ** 6, tiles=24), "float16", {})
    big = cm.kernel("MatMulV2", "AI_CORE", OpCost(flops=10 ** 10, bytes_in=10 ** 6, tiles=24), "float16", {})
    assert big.duration_ns > 5 * (small.duration_ns - 1000)
    fp32 = cm.kernel("MatMulV2", "AI_CORE", OpCost(flops=10 ** 10, bytes_in=10 ** 6, tiles=24), "float32", {})
    assert fp32.duration_ns > big.duration_ns


def test_all_reduce_ring_time():
    dev = PRESETS["Ascend910B"]
    cm = CostModel(dev)
    cost = OpCost(comm_bytes=64 << 20, tiles=1)
    from geprof_nb.ge import hccl

    for n in (2, 8):
        k = cm.kernel("HcomAllReduce", "HCCL", cost, "float32", {"rank_size": n})
        assert k.duration_ns == hccl.collective_duration_ns("HcomAllReduce", cost.comm_bytes, n, device_links(dev))
        # the ring: 2(n-1)/n of the data over each link plus 2(n-1) handshakes; inline reduces and notify
        # records come on top
        ring = 2 * (n - 1) / n * cost.comm_bytes / dev.hccs_bandwidth * 1e9 + 2 * (n - 1) * dev.hccl_step_latency_ns
        assert ring <= k.duration_ns <= ring * 1.3
        assert (k.ge_task_type, k.block_dim, k.pmu_core) == (GeTaskType.HCCL, 0, "")


def test_aicpu_and_local_engines():
    cm = CostModel(PRESETS["Ascend910B"])
    k = cm.kernel("GetNext", "AI_CPU", OpCost(bytes_out=2_000_000), "float16", {})
    assert k.ge_task_type == GeTaskType.AI_CPU and k.duration_ns == 15_000 + 1_000_000
    with pytest.raises(ValueError, match="launches no kernel"):
        cm.kernel("Reshape", "GE_LOCAL", OpCost(), "float16", {})


def _memory_bound(cm: CostModel, op_type: str, cost: OpCost) -> float:
    """The bandwidth (bytes/s) an op's GM traffic can get: HBM, boosted by the share its L2 hits."""
    hit = cm.l2_hit_rate(op_type, cost.bytes, cost.stored_bytes_in)
    return cm.device.hbm_bandwidth / (1 - hit * (1 - 1 / L2_SPEEDUP))


def test_bytes_read_of_stored_tensors_are_compulsory_l2_misses():
    """Of a 10 MB working set (within half the 910B's 192 MB L2) the bytes read of stored tensors never hit; the
    rest hits at the rate the working set alone gets; a working set of stored bytes only is served by the HBM."""
    cm = CostModel(PRESETS["Ascend910B"])
    alone = cm.l2_hit_rate("MatMulV2", 10 << 20)
    assert 0.9 * 0.92 <= alone <= 0.9
    assert cm.l2_hit_rate("MatMulV2", 10 << 20, 4 << 20) == pytest.approx(alone * 0.6)
    assert cm.l2_hit_rate("MatMulV2", 10 << 20, 10 << 20) == 0
    assert cm.memory_bandwidth(cm.l2_hit_rate("MatMulV2", 10 << 20, 10 << 20)) == cm.device.hbm_bandwidth
    with pytest.raises(ValueError, match="stored_bytes=11 must be from 0 to the working set"):
        cm.l2_hit_rate("MatMulV2", 10, 11)


@pytest.mark.parametrize("device", sorted(PRESETS))
@pytest.mark.parametrize("model", ["resnet50", "bert", "mlp"])
def test_a_kernels_gm_reads_and_writes_share_the_memory_bandwidth(device, model):
    # MTE2 (reads) and MTE3/fixpipe (writes) each got the full GM bandwidth share: an Add of two 512 MB
    # inputs moved 1611 MB in 851 us (1.89 TB/s, 5% L2 hits, 1.6 TB/s HBM), BERT's ApplyAdamW 4.38 TB/s
    dev = PRESETS[device]
    cm = CostModel(dev)
    graph = getattr(ge.models, model)(batch_size=8, **({"layers": 2} if model == "bert" else {}))
    compiled = CompiledModel(graph, cm, 0, 1)
    checked = 0
    for node_id, k in compiled.kernels.items():
        if not k.block_cycles:
            continue
        cost = compiled.costs[node_id]
        gm = (k.counters["main_mem_read_bytes"] + k.counters["main_mem_write_bytes"]) * k.block_dim
        assert gm >= (cost.bytes_in + cost.bytes_out) * 0.99  # every input read and output written once
        fastest_ns = dev.task_overhead_ns + JITTER_CLIP[0] * (k.duration_ns - dev.task_overhead_ns)
        node = graph.nodes[node_id]
        assert gm / fastest_ns * 1e9 <= _memory_bound(cm, node.type, cost), node.name
        busy = max(v for name, v in k.counters.items() if name.endswith("_cycles") and "cflt" not in name)
        assert busy < k.block_cycles * JITTER_CLIP[0]  # every pipe ratio below 1 at the fastest jitter
        checked += 1
    assert checked > 20


def test_a_memory_bound_add_moves_its_bytes_no_faster_than_hbm():
    dev = PRESETS["Ascend910B"]
    cm = CostModel(dev)
    n = 256 << 20  # fp16 elements: 512 MB per tensor, far beyond the 192 MiB L2
    cost = OpCost(vector_ops=n, bytes_in=4 * n, bytes_out=2 * n, tiles=4096)
    k = cm.kernel("Add", "AI_VECTOR_CORE", cost, "float16", {})
    bound = _memory_bound(cm, "Add", cost)
    assert bound < 1.05 * dev.hbm_bandwidth  # ~5% L2 hits: close to HBM
    assert 6 * n / k.duration_ns * 1e9 <= bound
