"""Device presets and the cost model: how long a kernel takes on a given chip,
on how many cores, and what its AI Core PMU counters read.

Time follows from one breakdown per block: cycles the cube (``mac``), vector,
scalar and memory pipes (``mte1``: L1->L0, ``mte2``: GM->L1/UB, ``mte3``: UB->GM,
``fixpipe``: L0C->GM) are busy.  The block takes the busiest pipe plus an
op-specific stall share plus a start-up cost; the task adds a fixed head/tail.
The PMU counters are that same breakdown, so the PipeUtilization ratios the
analysis derives are consistent with the task duration by construction.

Facts from reference §7: Ascend910B has 24 AI Cores (cube) at 1800 MHz, 48
vector cores, 64 GiB HBM, 192 MiB L2; Ascend910A 32 AI Cores.  HBM bandwidths
are the commonly cited (unverified) 1.6 TB/s (910B) and 1.2 TB/s (910A).
"""

from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass, field

from ..prof.rawdata import GeTaskType, RtTaskType
from .ops import OpCost

GiB = 1 << 30
MiB = 1 << 20


@dataclass(frozen=True)
class DevicePreset:
    """What the cost model needs to know about a chip."""

    name: str
    soc_version: str
    ai_core_num: int
    vector_core_num: int  # 0: vector ops run on the AI Cores (no separate AIV)
    ai_cpu_num: int
    aic_frequency_mhz: int
    memory_bytes: int
    l2_bytes: int
    hbm_bandwidth: float  # bytes/s
    pcie_bandwidth: float  # bytes/s, host <-> device copies
    hccs_bandwidth: float  # bytes/s per rank in a ring inside a server
    hccl_step_latency_ns: int = 8_000
    cube_flops_per_cycle: int = 16 * 16 * 16 * 2  # fp16 MACs x 2 per AI Core
    vector_fp16_per_cycle: int = 128
    core_bytes_per_cycle: int = 256  # one core's MTE bandwidth cap
    task_overhead_ns: int = 1_000  # launch head + tail of a kernel task
    startup_cycles: int = 900
    aicpu_base_ns: int = 15_000
    stars: bool = True  # A2-class "Stars" chip: separate aic_/aiv_ PMU columns

    @property
    def has_vector_cores(self) -> bool:
        return self.vector_core_num > 0

    @property
    def chip_family(self) -> str:
        return "A2" if self.stars else "910A"

    def info(self) -> dict:
        """What msprof records about the device (``info.json`` DeviceInfo)."""
        d = asdict(self)
        d.update(ai_core_num=self.ai_core_num, aic_frequency=self.aic_frequency_mhz,
                 aiv_num=self.vector_core_num, chip_family=self.chip_family)
        return d


PRESETS: dict[str, DevicePreset] = {
    "Ascend910B": DevicePreset(
        name="Ascend910B", soc_version="Ascend910B2", ai_core_num=24, vector_core_num=48, ai_cpu_num=6,
        aic_frequency_mhz=1800, memory_bytes=64 * GiB, l2_bytes=192 * MiB, hbm_bandwidth=1.6e12,
        pcie_bandwidth=25e9, hccs_bandwidth=90e9, stars=True,
    ),
    "Ascend910A": DevicePreset(
        name="Ascend910A", soc_version="Ascend910A", ai_core_num=32, vector_core_num=0, ai_cpu_num=14,
        aic_frequency_mhz=1000, memory_bytes=32 * GiB, l2_bytes=32 * MiB, hbm_bandwidth=1.2e12,
        pcie_bandwidth=25e9, hccs_bandwidth=45e9, stars=False,
    ),
}
DEFAULT_DEVICE = "Ascend910B"


def get_device(name: str | DevicePreset) -> DevicePreset:
    if isinstance(name, DevicePreset):
        return name
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown device {name!r}; accepted: {', '.join(PRESETS)}") from None


@dataclass(frozen=True)
class KernelTiming:
    """How one kernel runs: what the runtime launches and what the PMU would count."""

    ge_task_type: GeTaskType
    rt_task_type: RtTaskType
    block_dim: int
    duration_ns: int
    block_cycles: int = 0  # AI Core cycles per block (0 when not on an AI Core)
    waves: int = 1
    pmu_core: str = ""  # "aic", "aiv" or "" (no PMU)
    counters: dict[str, int] = field(default_factory=dict)  # per-block raw PMU counter values


def _stall_share(op_type: str) -> float:
    """A stable, op-specific share of cycles lost to dependencies and sync (0.12..0.35)."""
    return 0.12 + (zlib.crc32(op_type.encode()) % 1000) / 1000 * 0.23


def _icache_miss_rate(op_type: str) -> float:
    return 0.005 + (zlib.crc32(op_type.encode()[::-1]) % 1000) / 1000 * 0.06


class CostModel:
    """Times kernels on one device."""

    def __init__(self, device: DevicePreset) -> None:
        self.device = device

    def _bytes_per_cycle(self, total_bytes: int, cores: int) -> float:
        """Bandwidth one of ``cores`` active cores gets, in bytes per cycle (L2 hits help)."""
        dev = self.device
        bw = dev.hbm_bandwidth * (2.5 if total_bytes <= dev.l2_bytes // 2 else 1.0)
        share = bw / (dev.aic_frequency_mhz * 1e6) / max(1, cores)
        return min(share, dev.core_bytes_per_cycle)

    def _finish(self, op_type: str, ge_type: GeTaskType, rt_type: RtTaskType, block_dim: int, cores: int,
                pmu_core: str, pipes: dict[str, float]) -> KernelTiming:
        dev = self.device
        busy = max(pipes.values())
        block_cycles = int(busy * (1 + _stall_share(op_type)) + dev.startup_cycles)
        waves = -(-block_dim // cores)
        duration = dev.task_overhead_ns + int(block_cycles * waves * 1000 / dev.aic_frequency_mhz)
        icache_req = block_cycles // 8
        counts = {k: int(v) for k, v in pipes.items()}
        counts["icache_req"] = icache_req
        counts["icache_miss"] = int(icache_req * _icache_miss_rate(op_type))
        return KernelTiming(ge_type, rt_type, block_dim, duration, block_cycles, waves, pmu_core, counts)

    def cube(self, op_type: str, cost: OpCost, dtype: str) -> KernelTiming:
        dev = self.device
        block_dim = max(1, min(cost.tiles, dev.ai_core_num))
        per_cycle = dev.cube_flops_per_cycle * {"int8": 2.0, "float32": 0.25}.get(dtype, 1.0)
        bpc = self._bytes_per_cycle(cost.bytes, block_dim)
        mac = cost.flops / block_dim / per_cycle
        out_cycles = cost.bytes_out / block_dim / min(bpc, 128)
        pipes = {
            "mac_cycles": mac,
            "mte2_cycles": cost.bytes_in / block_dim / bpc,
            "mte1_cycles": 0.55 * mac,
            "scalar_cycles": 250 + 0.04 * mac,
        }
        if dev.stars:  # A2: results leave L0C through the fixpipe
            pipes["fixcounters"] = out_cycles
        else:  # 910A: through the UB (mte3), vector pipe idle
            pipes.update(mte3_cycles=out_cycles, vec_cycles=0.0)
        return self._finish(op_type, GeTaskType.AI_CORE, RtTaskType.KERNEL_AICORE, block_dim, dev.ai_core_num,
                            "aic", pipes)

    def vector(self, op_type: str, cost: OpCost, dtype: str) -> KernelTiming:
        dev = self.device
        cores = dev.vector_core_num or dev.ai_core_num
        block_dim = max(1, min(cost.tiles, cores))
        lanes = dev.vector_fp16_per_cycle * (0.5 if dtype in ("float32", "int32") else 1.0)
        bpc = self._bytes_per_cycle(cost.bytes, block_dim)
        vec = cost.vector_ops / block_dim / lanes
        pipes = {
            "vec_cycles": vec,
            "mte2_cycles": cost.bytes_in / block_dim / bpc,
            "mte3_cycles": cost.bytes_out / block_dim / bpc,
            "scalar_cycles": 180 + 0.05 * vec,
        }
        if dev.has_vector_cores:
            return self._finish(op_type, GeTaskType.AIV, RtTaskType.KERNEL_AIVEC, block_dim, cores, "aiv", pipes)
        pipes.update(mac_cycles=0.0, mte1_cycles=0.0)
        return self._finish(op_type, GeTaskType.AI_CORE, RtTaskType.KERNEL_AICORE, block_dim, cores, "aic", pipes)

    def aicpu(self, op_type: str, cost: OpCost) -> KernelTiming:
        dur = self.device.aicpu_base_ns + int(cost.bytes / 2e9 * 1e9)
        return KernelTiming(GeTaskType.AI_CPU, RtTaskType.KERNEL_AICPU, 1, dur)

    def all_reduce(self, cost: OpCost, rank_size: int) -> KernelTiming:
        """Ring AllReduce: 2(n-1)/n of the data over each link, 2(n-1) latency steps."""
        dev = self.device
        n = max(1, rank_size)
        if n == 1:
            dur = dev.task_overhead_ns + int(cost.comm_bytes / dev.hbm_bandwidth * 1e9)
        else:
            dur = int(2 * (n - 1) / n * cost.comm_bytes / dev.hccs_bandwidth * 1e9) + 2 * (n - 1) * dev.hccl_step_latency_ns
        return KernelTiming(GeTaskType.HCCL, RtTaskType.HCCL, 0, dur)

    def memcpy_h2d_ns(self, nbytes: int) -> int:
        return 2_000 + int(nbytes / self.device.pcie_bandwidth * 1e9)

    def kernel(self, op_type: str, engine: str, cost: OpCost, dtype: str, attrs: dict) -> KernelTiming:
        """Time one execution of an op on this device."""
        if engine == "AI_CORE":
            return self.cube(op_type, cost, dtype)
        if engine == "AI_VECTOR_CORE":
            return self.vector(op_type, cost, dtype)
        if engine == "AI_CPU":
            return self.aicpu(op_type, cost)
        if engine == "HCCL":
            return self.all_reduce(cost, int(attrs.get("rank_size", 1)))
        raise ValueError(f"engine {engine!r} launches no kernel")
