"""The device cost model, free of the simulator: device presets and specs, how long a kernel takes on a
chip from what it does (:class:`OpCost`), on how many cores, and what its AI Core PMU counters read.

A leaf module (stdlib and prof/rawdata.py only), so that the simulator (ge/device.py adds the interconnect
and the collectives) and the analysis (analysis/timing/device_change.py re-costs a run's kernels on another
device for ``Profile.what_if(device=...)``) use one model.

Time follows from one breakdown per block: cycles the cube (``mac``), vector,
scalar and memory pipes (``mte1``: L1->L0A/L0B, ``mte2``: GM->L1/UB, ``mte3``:
UB->GM, ``fixpipe``: L0C->GM) are busy.  The block is busy for its busiest
pipe, or longer if its GM reads and writes together need longer at its share
of the chip's memory bandwidth: MTE2 and MTE3/fixpipe are separate pipes, but
they share the HBM (and the L2), so a task's read + write traffic never moves
faster than that bandwidth.  The block takes its busy cycles plus an
op-specific stall share plus a start-up cost; the task adds a fixed head/tail,
so ``aicore_time`` (block cycles x waves / frequency) is the task duration less
that head/tail.

The PMU counters are that same breakdown, so every aic_metrics group the
analysis derives agrees with the task duration and with the other groups by
construction.  :data:`COUNTERS` lists the raw counters (one value per block,
every block of a task alike), grouped as:

* pipe busy cycles and the instruction cache (PipeUtilization);
* cube and vector instruction counts by data type (ArithmeticUtilization):
  one cube instruction is a 16x16x16 fp16 (16x16x32 int8) fractal MAC,
  ``cube FLOPs = fp16 x 8192 + int8 x 16384``; one vector instruction is one
  cycle of 128 fp16 / 64 fp32 / 64 int32 / 32 "misc" lanes;
* bytes moved per path (Memory, MemoryL0, MemoryUB, MemoryAccess);
* L2 requests split into hits and misses (L2Cache) by a hit rate that falls
  with the op's working set against the L2 size, and from which the bytes it
  reads of a stored tensor (a weight, the KV cache) for the first time in a step
  are left out (compulsory misses) — the same rate that sets the memory
  bandwidth the mte2/mte3 pipes get;
* vector bank / bank-group / resource conflict cycles (ResourceConflictRatio),
  a share of the vector pipe's stall cycles.

Every counter a ratio is made of is at most the block's busy cycles, and a
block takes at least 1.12 x those (plus start-up), so ratios stay below 1 and
GM traffic below the memory bandwidth even at the fastest run-time jitter
(0.9 x the nominal cycles, ge/schedule.py).

Facts from reference §7: Ascend910B has 24 AI Cores (cube) at 1800 MHz, 48
vector cores, 64 GiB HBM, 192 MiB L2; Ascend910A 32 AI Cores.  HBM bandwidths
are the commonly cited (unverified) 1.6 TB/s (910B) and 1.2 TB/s (910A).  The
L2 line size, L0/L1 path widths and the L2 speed-up are modelling choices
(unverified), named below.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import asdict, dataclass, field, fields, replace

from .prof.rawdata import DTYPES, GeTaskType, RtTaskType

GiB = 1 << 30
MIX_MIN_K = 1000
MIX_MIN_MAC_US = 50
MIX_ALIGN_BYTES = 512
MiB = 1 << 20

#: FLOPs of one cube instruction: a 16x16x16 fp16 (also bf16 and, at a quarter of the rate, fp32)
#: or a 16x16x32 int8 fractal multiply-accumulate (msprof: ``cube_fops = r49*16*16*16*2 + r4a*16*16*32*2``).
CUBE_FP16_FLOPS = 16 * 16 * 16 * 2
CUBE_INT8_FLOPS = 16 * 16 * 32 * 2
#: An operand fractal the cube reads from L0A or L0B per instruction (16x16 fp16 or 16x32 int8).
L0AB_FRACTAL_BYTES = 512
#: An accumulator fractal the cube writes to L0C per instruction (16x16 fp32 / int32).
L0C_FRACTAL_BYTES = 1024
L0C_ELEMENT_BYTES = 4
#: MTE1 (L1 -> L0A/L0B) bytes per cycle.
MTE1_BYTES_PER_CYCLE = 256
#: Vector-unit data movement (910A: L0C -> UB for cube results) bytes per cycle.
VECTOR_MOVE_BYTES_PER_CYCLE = 256
#: Elements per vector instruction (one cycle) by instruction class.
VECTOR_LANES = {"fp16": 128, "fp32": 64, "int32": 64, "misc": 32}
#: Bytes per L2 request (cache line).
L2_LINE_BYTES = 128
#: Hit rate of a working set that fits in half the L2, and how much faster hits are served than HBM.
L2_MAX_HIT_RATE = 0.9
L2_MIN_HIT_RATE = 0.05
L2_SPEEDUP = 3.0
#: Pipe busy shares calibrated on a real 910B run (tests/data/msinsight_pytorch_text, an AlexNet at batch 32;
#: docs/simulation.md, "How realistic"; tests/ge/test_realism.py pins them).  The cube's tile loads are double
#: buffered: MTE2 (GM -> L1) and MTE1 (L1 -> L0A/L0B) have the next tile's load in flight while the cube
#: works, and a load in flight counts as busy whether or not it moves bytes at full rate, so those pipes read
#: busy for a share of the cube's time (real Conv2D: mac 0.84, mte2 0.81, mte1 0.43); the fixpipe drains
#: each finished L0C tile (0.11).  The scalar unit issues every pipe's instructions and computes the tiling:
#: busy about half the busiest pipe's time (real cube ops 0.31-0.62).  A vector kernel's scalar set-up and
#: its first GM access cost a fixed number of cycles, most of a short kernel (real Mul, Cast: scalar 0.33, mte2
#: 0.25 at 1.5 us).  The 910A preset takes the same shares (no real 910A PipeUtilization profile is at hand).
CUBE_MTE2_SHARE = 0.55
CUBE_MTE1_SHARE = 0.6
CUBE_FIXPIPE_SHARE = 0.15
SCALAR_ISSUE_SHARE = 0.55
CUBE_SCALAR_SETUP_CYCLES = 250
VECTOR_SCALAR_SETUP_CYCLES = 400
VECTOR_DMA_LATENCY_CYCLES = 200
#: Scalar unit: one 4-byte local-memory load every 8 cycles, one store every 32.
SCALAR_ACCESS_BYTES = 4
SCALAR_LOAD_EVERY = 8
SCALAR_STORE_EVERY = 32

#: The raw PMU counters of an AI Core kernel, per block (see the module docstring).
COUNTERS: tuple[str, ...] = (
    # pipe busy cycles, instruction cache (PipeUtilization)
    "mac_cycles", "vec_cycles", "scalar_cycles", "mte1_cycles", "mte2_cycles", "mte3_cycles", "fixpipe_cycles",
    "icache_req", "icache_miss",
    # instructions = cycles (ArithmeticUtilization)
    "cube_fp16_instr", "cube_int8_instr", "vec_fp32_instr", "vec_fp16_instr", "vec_int32_instr", "vec_misc_instr",
    # bytes by memory level (Memory); "read"/"write" = out of / into that memory, main memory = GM
    "main_mem_read_bytes", "main_mem_write_bytes", "l2_read_bytes", "l2_write_bytes",
    "l1_read_bytes", "l1_write_bytes", "ub_read_bytes", "ub_write_bytes",
    # L0 buffers (MemoryL0); l0c_read/write: the vector unit's accesses, *_cube: the cube's
    "l0a_read_bytes", "l0a_write_bytes", "l0b_read_bytes", "l0b_write_bytes",
    "l0c_read_bytes", "l0c_write_bytes", "l0c_read_cube_bytes", "l0c_write_cube_bytes",
    # UB by accessor (MemoryUB)
    "ub_read_mte_bytes", "ub_write_mte_bytes", "ub_read_vector_bytes", "ub_write_vector_bytes",
    "ub_read_scalar_bytes", "ub_write_scalar_bytes",
    # transfers by path (MemoryAccess)
    "gm_to_l1_bytes", "l0c_to_l1_bytes", "l0c_to_gm_bytes", "gm_to_ub_bytes", "ub_to_gm_bytes",
    # L2 requests (L2Cache); r0/r1: the two read channels
    "write_cache_hit", "write_cache_miss_allocate", "r0_read_cache_hit", "r0_read_cache_miss_allocate",
    "r1_read_cache_hit", "r1_read_cache_miss_allocate",
    # vector stall cycles (ResourceConflictRatio)
    "vec_bankgroup_cflt_cycles", "vec_bank_cflt_cycles", "vec_resc_cflt_cycles",
)


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
    roce_bandwidth: float = 25e9  # bytes/s per rank between servers
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

    @classmethod
    def from_info(cls, info: dict) -> DevicePreset:
        """The device a run recorded (:meth:`info`, ``Profile.device``); ValueError naming the fields it lacks."""
        missing = [f.name for f in fields(cls) if f.name not in info]
        if missing:
            raise ValueError(f"the run's device record lacks {', '.join(missing)}: it does not say which device "
                             "its times were costed on; accepted: a run recorded by geprof (info.json devices)")
        return cls(**{f.name: info[f.name] for f in fields(cls)})

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
        pcie_bandwidth=25e9, hccs_bandwidth=45e9, roce_bandwidth=12.5e9, stars=False,
    ),
}
DEFAULT_DEVICE = "Ascend910B"


#: Fields of a preset a custom spec may change (``Ascend910B:ai_core_num=20,hbm_bandwidth=1.2e12``).
CUSTOM_FIELDS = tuple(f.name for f in fields(DevicePreset) if f.type in ("int", "float"))
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]{1,4})?", re.ASCII)
#: The range of each what-if field: 1/1000 of the smallest preset's value to 1000 times the largest's (the
#: cost model's times and cycles stay within int64; whole numbers at least 1).
WHAT_IF_RANGE = {
    key: (max(1.0, low / 1000) if DevicePreset.__dataclass_fields__[key].type == "int" else low / 1000, high * 1000)
    for key in CUSTOM_FIELDS
    for low, high in [(min(v for v in values if v) or 1, max(values) or 1)
                      for values in [[getattr(p, key) for p in PRESETS.values()]]]
}
DEVICE_ACCEPTED = (f"{', '.join(PRESETS)}, or a preset with changes for a what-if, e.g. "
                   "'Ascend910B:ai_core_num=20,hbm_bandwidth=1.2e12'")


def get_device(name: str | DevicePreset) -> DevicePreset:
    """A preset by name, or ``PRESET:field=value,...``: that preset with some numbers changed
    (what-if studies of the hardware: fewer cores, slower HBM, a faster interconnect)."""
    if isinstance(name, DevicePreset):
        return name
    base, _, spec = str(name).partition(":")
    preset = PRESETS.get(base.strip())
    if preset is None:
        raise ValueError(f"unknown device {name!r}; accepted: {DEVICE_ACCEPTED}")
    if not spec.strip():
        return preset
    changes: dict[str, int | float] = {}
    for item in spec.split(","):
        key, eq, text = (part.strip() for part in item.partition("="))
        if key not in CUSTOM_FIELDS or not eq:
            raise ValueError(f"device {name!r}: {key or item!r} is not a device field; accepted: "
                             f"{', '.join(CUSTOM_FIELDS)} (as field=value)")
        kind = int if DevicePreset.__dataclass_fields__[key].type == "int" else float
        low, high = WHAT_IF_RANGE[key]
        accepted = (f"accepted: a {'whole ' if kind is int else ''}number from {low:g} to {high:g} (1/1000 of the "
                    "presets' smallest value to 1000 times their largest)")
        try:
            number = float(text) if _NUMBER.fullmatch(text) else None  # float() would take "1_0", "nan", "inf"
        except ValueError:
            number = None
        if number is None or (kind is int and not number.is_integer()):
            raise ValueError(f"device {name!r}: {key}={text[:40]!r} is not a number; accepted: a positive "
                             f"{'integer' if kind is int else 'number'}") from None
        if number == 0 and key != "vector_core_num" or number < 0:  # 0 vector cores: a 910A-like chip
            raise ValueError(f"device {name!r}: {key}={text!r} must be positive")
        if number != 0 and not low <= number <= high:  # past the cost model's int64 ns and cycles
            raise ValueError(f"device {name!r}: {key}={text[:40]!r} is out of range; {accepted}")
        changes[key] = kind(number)
    return replace(preset, name=str(name), **changes)


@dataclass(frozen=True)
class OpCost:
    """What one execution of an op does, independent of the device."""

    flops: int = 0  # cube FLOPs (2 per MAC)
    vector_ops: int = 0  # element operations on the vector unit
    bytes_in: int = 0
    bytes_out: int = 0
    tiles: int = 1  # independent work units: the most cores the op can use
    comm_bytes: int = 0  # bytes of the buffer a collective moves, per rank (see the HCCL ops)
    inner_dim: int = 0  # K of a matrix product (decides MIX_AIC on A2)
    #: of ``bytes_in``, those read from tensors stored in HBM (Variables, Consts, the KV cache) for the first time
    #: in a step: the L2 cannot hold them yet, so they are compulsory misses
    stored_bytes_in: int = 0

    @property
    def bytes(self) -> int:
        return self.bytes_in + self.bytes_out


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
    counters: dict[str, int] = field(default_factory=dict)  # per-block raw PMU counter values (COUNTERS)
    mix_block_dim: int = 0  # vector blocks of a MIX_AIC (FFTS+) task
    context_ids: tuple[int, ...] = ()  # FFTS+ context ids of the task
    cost: OpCost | None = None  # what one execution does (AI Core and AI Vector Core kernels)
    dtype: str = ""  # the data type it computes in
    engine: str = ""  # the engine that costed it (AI_CORE: the cube, AI_VECTOR_CORE), with cost and dtype
    l2_hit_rate: float = 0.0  # the share of its global-memory traffic the L2 serves


def _unit(op_type: str, salt: str = "") -> float:
    """A stable, op-specific number in [0, 1)."""
    return (zlib.crc32((salt + op_type).encode()) % 1000) / 1000


def _stall_share(op_type: str) -> float:
    """A stable, op-specific share of cycles lost to dependencies and sync (0.12..0.35)."""
    return 0.12 + (zlib.crc32(op_type.encode()) % 1000) / 1000 * 0.23


def _icache_miss_rate(op_type: str) -> float:
    return 0.005 + (zlib.crc32(op_type.encode()[::-1]) % 1000) / 1000 * 0.06


def _dtype_bytes(dtype: str) -> int:
    return DTYPES.get(dtype, (None, 2))[1]


def _vector_class(dtype: str) -> str:
    """The instruction class (and so the lane count) a vector op on ``dtype`` issues."""
    if dtype == "float32":
        return "fp32"
    if dtype in ("int32", "uint32"):
        return "int32"
    if _dtype_bytes(dtype) >= 8:
        return "misc"
    return "fp16"


def _split(total: int, share: float) -> tuple[int, int]:
    """``total`` requests into (hits, misses) at ``share``."""
    hits = int(round(total * share))
    return hits, total - hits


class KernelCostModel:
    """Times kernels (AI Core, AI Vector Core, AI CPU) on one device."""

    def __init__(self, device: DevicePreset) -> None:
        self.device = device

    def l2_hit_rate(self, op_type: str, working_set: int, stored_bytes: int = 0) -> float:
        """Share of an op's GM requests the L2 serves: high while its working set fits in half the L2,
        falling as 1/size beyond; a small op-specific spread (access pattern).  The ``stored_bytes`` of the
        working set read from stored tensors for the first time in a step are never hits (compulsory
        misses: a decode step's weights move at the HBM's rate, not faster); the rest of the traffic, the
        op's reuse of its own working set, hits at that rate."""
        if not 0 <= stored_bytes <= max(working_set, 0):
            raise ValueError(f"{op_type}: stored_bytes={stored_bytes} must be from 0 to the working set "
                             f"({working_set} bytes); accepted: the bytes read from stored tensors, a part of it")
        half = self.device.l2_bytes / 2
        base = L2_MAX_HIT_RATE if working_set <= half else max(L2_MIN_HIT_RATE, L2_MAX_HIT_RATE * half / working_set)
        reused = 1 - stored_bytes / working_set if working_set else 1.0
        return base * (0.92 + 0.08 * _unit(op_type, "l2")) * reused

    def memory_bandwidth(self, hit_rate: float) -> float:
        """GM bandwidth (bytes/s) of the whole chip for an op whose L2 hit rate is ``hit_rate``: hits
        come from the L2 at ``L2_SPEEDUP`` x the HBM rate (2.5 x HBM overall at the top hit rate)."""
        return self.device.hbm_bandwidth / (1 - hit_rate * (1 - 1 / L2_SPEEDUP))

    def _gm_share(self, hit_rate: float, cores: int) -> float:
        """The share of :meth:`memory_bandwidth` one of ``cores`` active cores gets, in bytes per cycle:
        what its reads and writes together can move."""
        return self.memory_bandwidth(hit_rate) / (self.device.aic_frequency_mhz * 1e6) / max(1, cores)

    def _bytes_per_cycle(self, hit_rate: float, cores: int) -> float:
        """What one memory pipe (MTE2, MTE3, fixpipe) of one of ``cores`` active cores can move per
        cycle: the core's GM share, at most the core's MTE width."""
        return min(self._gm_share(hit_rate, cores), self.device.core_bytes_per_cycle)

    def _finish(self, op_type: str, ge_type: GeTaskType, rt_type: RtTaskType, block_dim: int, cores: int,
                pmu_core: str, pipes: dict[str, float], counts: dict[str, float], hit_rate: float,
                gm_bytes: float) -> KernelTiming:
        """Duration from the busiest pipe, or from the block's GM traffic (``gm_bytes`` read and written)
        at its share of the memory bandwidth if that takes longer; the per-block counters from the same
        breakdown."""
        dev = self.device
        busy = max(max(pipes.values()), gm_bytes / self._gm_share(hit_rate, block_dim))
        stall = _stall_share(op_type)
        block_cycles = int(busy * (1 + stall) + dev.startup_cycles)
        waves = -(-block_dim // cores)
        duration = dev.task_overhead_ns + int(block_cycles * waves * 1000 / dev.aic_frequency_mhz)
        c = dict.fromkeys(COUNTERS, 0)
        c.update({k: int(v) for k, v in pipes.items()})
        c.update({k: int(v) for k, v in counts.items()})
        c["icache_req"] = block_cycles // 8
        c["icache_miss"] = int(c["icache_req"] * _icache_miss_rate(op_type))
        # the scalar unit's local-memory accesses
        c["ub_read_scalar_bytes"] = c["scalar_cycles"] // SCALAR_LOAD_EVERY * SCALAR_ACCESS_BYTES
        c["ub_write_scalar_bytes"] = c["scalar_cycles"] // SCALAR_STORE_EVERY * SCALAR_ACCESS_BYTES
        # totals per memory level
        c["ub_read_bytes"] = c["ub_read_mte_bytes"] + c["ub_read_vector_bytes"] + c["ub_read_scalar_bytes"]
        c["ub_write_bytes"] = c["ub_write_mte_bytes"] + c["ub_write_vector_bytes"] + c["ub_write_scalar_bytes"]
        c["l1_read_bytes"] = c["l0a_write_bytes"] + c["l0b_write_bytes"]  # MTE1 feeds L0A/L0B from L1
        c["l1_write_bytes"] = c["gm_to_l1_bytes"] + c["l0c_to_l1_bytes"]
        c["main_mem_read_bytes"] = c["gm_to_l1_bytes"] + c["gm_to_ub_bytes"]
        c["main_mem_write_bytes"] = c["l0c_to_gm_bytes"] + c["ub_to_gm_bytes"]
        # L2 requests: every GM access goes through the L2; reads alternate between two channels
        reads = -(-c["main_mem_read_bytes"] // L2_LINE_BYTES)
        writes = -(-c["main_mem_write_bytes"] // L2_LINE_BYTES)
        r1 = reads // 2
        c["r0_read_cache_hit"], c["r0_read_cache_miss_allocate"] = _split(reads - r1, hit_rate)
        c["r1_read_cache_hit"], c["r1_read_cache_miss_allocate"] = _split(r1, hit_rate)
        c["write_cache_hit"], c["write_cache_miss_allocate"] = _split(writes, hit_rate)
        # bytes the L2 served: the hit lines (a partial last line counts its bytes only)
        c["l2_read_bytes"] = min((c["r0_read_cache_hit"] + c["r1_read_cache_hit"]) * L2_LINE_BYTES,
                                 c["main_mem_read_bytes"])
        c["l2_write_bytes"] = min(c["write_cache_hit"] * L2_LINE_BYTES, c["main_mem_write_bytes"])
        # vector stalls: a share of the vector pipe's part of the stall cycles
        vec_stall = c["vec_cycles"] * stall
        c["vec_bankgroup_cflt_cycles"] = int(vec_stall * (0.05 + 0.25 * _unit(op_type, "bankgroup")))
        c["vec_bank_cflt_cycles"] = int(vec_stall * (0.05 + 0.30 * _unit(op_type, "bank")))
        c["vec_resc_cflt_cycles"] = int(vec_stall * (0.05 + 0.30 * _unit(op_type, "resc")))
        return KernelTiming(ge_type, rt_type, block_dim, duration, block_cycles, waves, pmu_core, c,
                            l2_hit_rate=hit_rate)

    def cube(self, op_type: str, cost: OpCost, dtype: str) -> KernelTiming:
        dev = self.device
        block_dim = max(1, min(cost.tiles, dev.ai_core_num))
        int8 = dtype == "int8"
        per_cycle = dev.cube_flops_per_cycle * {"int8": 2.0, "float32": 0.25}.get(dtype, 1.0)
        hit = self.l2_hit_rate(op_type, cost.bytes, cost.stored_bytes_in)
        bpc = self._bytes_per_cycle(hit, block_dim)
        # whole instructions per block (rounded, so the blocks' sum is the op's FLOPs within rounding);
        # fp16/bf16/int8 issue one per cycle, fp32 a quarter
        per_instr = CUBE_INT8_FLOPS if int8 else CUBE_FP16_FLOPS
        instr = int(cost.flops / block_dim / per_instr + 0.5)
        mac = instr * per_instr / per_cycle
        gm_in = cost.bytes_in / block_dim
        out = cost.bytes_out / block_dim
        # the cube reads one A and one B fractal and accumulates one C fractal per instruction; MTE1
        # refills L0A/L0B from L1 once per `reuse` uses, and at least moves every input byte once
        reuse = 6 + 4 * _unit(op_type, "reuse")
        l0ab_read = instr * L0AB_FRACTAL_BYTES
        l0ab_fill = max(gm_in / 2, l0ab_read / reuse)
        l0c_write = instr * L0C_FRACTAL_BYTES
        l0c_out = out / _dtype_bytes(dtype) * L0C_ELEMENT_BYTES  # finished results leave L0C once
        counts = {
            "cube_int8_instr" if int8 else "cube_fp16_instr": instr,
            "gm_to_l1_bytes": gm_in,
            "l0a_read_bytes": l0ab_read, "l0b_read_bytes": l0ab_read,
            "l0a_write_bytes": l0ab_fill, "l0b_write_bytes": l0ab_fill,
            "l0c_write_cube_bytes": l0c_write, "l0c_read_cube_bytes": max(0.0, l0c_write - l0c_out),
        }
        out_cycles = out / min(bpc, 128)
        pipes = {  # the loads' pipes busy at least their share of the cube's time (double buffering)
            "mac_cycles": mac,
            "mte2_cycles": max(gm_in / bpc, CUBE_MTE2_SHARE * mac),
            "mte1_cycles": max(2 * l0ab_fill / MTE1_BYTES_PER_CYCLE, CUBE_MTE1_SHARE * mac),
        }
        if dev.stars:  # A2: results leave L0C through the fixpipe straight to GM
            pipes["fixpipe_cycles"] = max(out_cycles, CUBE_FIXPIPE_SHARE * mac)
            counts["l0c_to_gm_bytes"] = out
        else:  # 910A: the vector unit moves them L0C -> UB, MTE3 UB -> GM
            pipes.update(mte3_cycles=out_cycles, vec_cycles=l0c_out / VECTOR_MOVE_BYTES_PER_CYCLE)
            counts.update(l0c_read_bytes=l0c_out, ub_write_vector_bytes=out, ub_read_mte_bytes=out,
                          ub_to_gm_bytes=out)
        if cost.vector_ops:  # fused vector work (a softmax) runs beside the cube: on A2 on the two AI Vector
            # cores of each cube block (their pipe in this block's cycles), on 910A on the AI Core's vector unit
            lanes = VECTOR_LANES[_vector_class(dtype)]
            pipes["vec_cycles"] = pipes.get("vec_cycles", 0.0) + cost.vector_ops / block_dim / lanes / (
                2 if dev.has_vector_cores else 1)
        pipes["scalar_cycles"] = CUBE_SCALAR_SETUP_CYCLES + SCALAR_ISSUE_SHARE * max(pipes.values())
        timing = self._finish(op_type, GeTaskType.AI_CORE, RtTaskType.KERNEL_AICORE, block_dim, dev.ai_core_num,
                              "aic", pipes, counts, hit, gm_in + out)
        if dev.stars and (cost.vector_ops or self._becomes_mix(cost, dtype, mac)):
            timing = replace(timing, ge_task_type=GeTaskType.MIX_AIC, rt_task_type=RtTaskType.KERNEL_MIX_AIC,
                             mix_block_dim=2 * block_dim, context_ids=(0,))
        return timing

    def _becomes_mix(self, cost: OpCost, dtype: str, mac_cycles: float) -> bool:
        """A2 turns a large-K matrix product into a MIX_AIC (FFTS+) task: K > 1000, theoretical MAC
        time > 50 us and K not 512-byte aligned (reference §7, whose "516B" we read as a typo for 512 B;
        docs/simulation.md)."""
        k = cost.inner_dim
        return (self.device.stars and k > MIX_MIN_K and mac_cycles / self.device.aic_frequency_mhz > MIX_MIN_MAC_US
                and (k * _dtype_bytes(dtype)) % MIX_ALIGN_BYTES != 0)

    def vector(self, op_type: str, cost: OpCost, dtype: str) -> KernelTiming:
        dev = self.device
        cores = dev.vector_core_num or dev.ai_core_num
        block_dim = max(1, min(cost.tiles, cores))
        hit = self.l2_hit_rate(op_type, cost.bytes, cost.stored_bytes_in)
        bpc = self._bytes_per_cycle(hit, block_dim)
        ops = cost.vector_ops / block_dim
        cls = _vector_class(dtype)
        # a share of the element operations are "misc" instructions (compare, select, exp, cast ...)
        misc_share = 0.02 + 0.13 * _unit(op_type, "misc")
        main = int(ops * (1 - misc_share) / VECTOR_LANES[cls] + 0.5)  # whole instructions, one per cycle
        misc = int(ops * misc_share / VECTOR_LANES["misc"] + 0.5)
        vec = float(main + misc)
        elem = _dtype_bytes(dtype)
        gm_in = cost.bytes_in / block_dim
        out = cost.bytes_out / block_dim
        counts = {
            f"vec_{cls}_instr": main,
            "gm_to_ub_bytes": gm_in, "ub_write_mte_bytes": gm_in,
            "ub_to_gm_bytes": out, "ub_read_mte_bytes": out,
            "ub_read_vector_bytes": 2 * ops * elem, "ub_write_vector_bytes": ops * elem,
        }
        counts["vec_misc_instr"] = counts.get("vec_misc_instr", 0) + misc
        pipes = {  # each DMA pipe waits out one GM latency; the scalar unit sets the kernel up
            "vec_cycles": vec,
            "mte2_cycles": VECTOR_DMA_LATENCY_CYCLES + gm_in / bpc,
            "mte3_cycles": VECTOR_DMA_LATENCY_CYCLES + out / bpc,
            "scalar_cycles": VECTOR_SCALAR_SETUP_CYCLES + 0.05 * vec,
        }
        if dev.has_vector_cores:
            return self._finish(op_type, GeTaskType.AIV, RtTaskType.KERNEL_AIVEC, block_dim, cores, "aiv", pipes,
                                counts, hit, gm_in + out)
        pipes.update(mac_cycles=0.0, mte1_cycles=0.0)
        return self._finish(op_type, GeTaskType.AI_CORE, RtTaskType.KERNEL_AICORE, block_dim, cores, "aic", pipes,
                            counts, hit, gm_in + out)

    def aicpu(self, op_type: str, cost: OpCost) -> KernelTiming:
        dur = self.device.aicpu_base_ns + int(cost.bytes / 2e9 * 1e9)
        return KernelTiming(GeTaskType.AI_CPU, RtTaskType.KERNEL_AICPU, 1, dur)

    def kernel(self, op_type: str, engine: str, cost: OpCost, dtype: str, attrs: dict) -> KernelTiming:
        """Time one execution of an op on this device."""
        if engine == "AI_CORE":
            return replace(self.cube(op_type, cost, dtype), cost=cost, dtype=dtype, engine=engine)
        if engine == "AI_VECTOR_CORE":
            return replace(self.vector(op_type, cost, dtype), cost=cost, dtype=dtype, engine=engine)
        if engine == "AI_CPU":
            return self.aicpu(op_type, cost)
        raise ValueError(f"engine {engine!r} launches no kernel")
