"""Findings: where a profiled run loses time, with evidence and what a GE / Ascend user can do about it.

Every rule is a small function of a :class:`~..profile.Profile`'s tables (never raw records, never
the runtime), so the advisor works on imported msprof / torch_npu output as well as on geprof
runs.  A rule whose tables or columns are missing finds nothing.  Times are per step; "time at
stake" is what removing the finding's cause saves per step (its what-if saving on the critical path,
:mod:`.savings`, where a what-if models the cause; else the rule's own estimate), and sets the
priority as a share of the step.  A single-op (aclopExecute) run is one step, the whole run (:class:`_Run`).

Per step means over the *typical* steps: the outlier steps of :mod:`..tables.step_split` (a step half as
long again as the median one) are left out of every per-step figure, and the step is the
Profile's step figure (``Profile.step_split``), so one stall cannot become a per-step claim; each
finding's evidence says how many steps its figures average.  A one-off stall is its own finding,
with its step and size (:func:`one_off_stalls`).  Rules that compare steps with each other stay
silent on one-step data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np
import pandas as pd

from ...errors import ImportFormatError
from ...prof.rawdata import SINGLE_OP_MODEL_ID
from ..tables.breakdown import main_model, step_windows
from ..tables.collective_groups import exposed_group_time
from ..tables.communication import collective_op_types
from ..tables.intervals import covered_time
from ..tables.roofline import device_roofs, row_bounds
from ..tables.step_split import StepSplit
from ..tables.text_columns import distinct_texts, text_test, text_values
from ..timing.what_if import WhatIfChange
from .finding import WHAT_IF, Finding
from .savings import change_of, what_if_stakes
from .serving_advisor import serving_findings

if TYPE_CHECKING:
    from ..profile import Profile

COLUMNS = ["Priority", "Rule", "Finding", "Evidence", "Suggestion", "Time at stake (us)", "Share of step (%)",
           "Exclusive time at stake (us)", "Time at stake basis"]
PRIORITIES = ("High", "Medium", "Low")

#: A finding whose time at stake is at least this share of the step is High: a fifth of every step.
HIGH_SHARE = 0.20
#: ... at least this share is Medium (below it Low): 5% is about the run-to-run noise of a real step.
MEDIUM_SHARE = 0.05

#: Gaps between device tasks shorter than this are not idle time: real op_summary timestamps are
#: float us near 1.7e15 (0.25 us resolution) and back-to-back tasks on a stream are ~0.1-1 us apart.
MIN_GAP_US = 1.0

#: AI CPU time that no other task hides, as a share of the step, that is worth moving: an op on
#: AI CPU typically runs 10-100x slower than on AI Core and serialises the stream while it runs.
AICPU_MIN_SHARE = 0.03
#: Dataset-iterator ops run on AI CPU by design; their time is the input pipeline (Data Aug rule).
DATA_SOURCE_TYPES = ("GetNext", "GetNextV2", "IteratorV2", "DynamicGetNext")

#: Op types that run on the cube (matrix) unit.
CUBE_TYPES = re.compile(r"MatMul|Conv|Gemm", re.IGNORECASE)
#: Cube kernels shorter than this are dominated by their fixed launch and start-up cost (the
#: tiny-kernel rule's business), not by how well they use the cube.
CUBE_MIN_OP_US = 5.0
#: Effective cube utilisation (mac_ratio x share of the AI Cores used) below which a cube op wastes
#: most of the cube: well-shaped fp16 GEMMs and convolutions reach 0.6-0.9 on Ascend.
CUBE_LOW_UTILIZATION = 0.30
#: Blocks covering under this share of the AI Cores: the tiling, not the shapes' arithmetic, limits the op.
CUBE_FEW_CORES = 0.5
#: The utilisation a well-shaped cube op reaches; time at stake is the time beyond it.
CUBE_TARGET_UTILIZATION = 0.80
#: Recoverable cube time (as a share of the step) that makes the low-utilisation finding.
CUBE_MIN_SHARE = 0.03

#: An op is memory-bound when its GM->local pipe (MTE2) is busy at least half the kernel ...
MTE2_DOMINANT_RATIO = 0.50
#: ... and at least this many times busier than its compute pipe (vec / mac): it waits on HBM.
MEMORY_BOUND_FACTOR = 2.0
#: Memory time beyond the compute time, as a share of the step, that makes the finding.
MEMORY_BOUND_MIN_SHARE = 0.05

#: Device idle between tasks inside the step, as a share of the step, that says the host cannot
#: launch fast enough (node-by-node dynamic-shape execution, per-op host work).
HOST_GAP_MIN_SHARE = 0.20

#: Data Aug Bound (previous iteration end to FP start) as a share of the step period above which
#: the device waits for input data or for the host loop a tenth of the time.
DATA_AUG_MIN_SHARE = 0.10
#: ... and is at least this long: a graph launch's own host cost between steps (RunGraph, the input copy, the
#: sync; ~55 us in the simulator, tens of us on real GE) is no input pipeline to fix, however short the step.
DATA_AUG_MIN_US = 100.0

#: One-off stalls listed one by one; beyond this many, one finding names the rest.
MAX_STALLS = 3

#: Communication no compute hides (step_breakdown), as a share of the step, that makes the finding.
COMM_EXPOSED_MIN_SHARE = 0.10
#: Several collectives per step shorter than this are latency-bound (a ring AllReduce pays 2 x (ranks - 1)
#: link latencies whatever its size; 8 us each in the simulator's presets): fewer, larger buckets help more
#: than splitting.
COMM_LATENCY_BOUND_US = 100.0

#: Tensor-parallel collectives no compute hides, as a share of the step, that make the finding: Megatron's
#: TP AllReduces sit on the critical path by design (each layer waits for its sum), so a few percent is the
#: price of tp > 1 on one server's HCCS; from this share on, the layout or an overlap is worth changing.
TP_EXPOSED_MIN_SHARE = 0.05
#: The communication group kind of the tensor-parallel collectives (MindSpeed's group name).
TP_GROUP = "tp"
#: Devices per server: ranks of one server talk over HCCS, others over RoCE.
SERVER_DEVICES = 8

#: "Tiny" kernels: Ascend kernels pay ~1-3 us of launch, head and tail whatever they do, so a kernel
#: under a few us is mostly overhead.
TINY_KERNEL_US = 5.0
#: At least this many tiny kernels per step (a handful is normal in any graph, not a fusion opportunity) ...
TINY_MIN_PER_STEP = 50
#: ... whose fixed cost (count x the shortest kernel's duration) is at least this share of the step.
TINY_MIN_SHARE = 0.05
#: Optimizer op types whose many per-variable kernels a fused (flattened) optimizer replaces.
OPTIMIZER_TYPE = re.compile(r"^Apply|Optimizer", re.IGNORECASE)

#: TransData time (format conversion, no math) as a share of the step that is worth removing.
TRANSDATA_MIN_SHARE = 0.02
TRANSDATA_TYPES = ("TransData", "TransDataRNN")

#: Host profiler / node-level API work that a static (or bucketed) shape removes.
SHAPE_HOST_EVENTS = ("InferShape", "Tiling")

_START, _DUR = "Task Start Time(us)", "Task Duration(us)"


@dataclass
class _Run:
    """What every rule needs: op_summary with iteration, start, end and the gap before each task.

    A single-op run (every task an aclopExecute: :data:`SINGLE_OP_MODEL_ID`) has no steps, each op is
    its own "iteration": the whole run is its one step (``unit`` "run"), from the first task's start to
    the last one's end, so the device idle between ops counts.
    """

    profile: Profile
    ops: pd.DataFrame  # op_summary of the typical steps + _it, _start, _end, _gap (us), by iteration and start
    steps: int  # the typical steps: what per-step figures are means over
    step_us: float
    unit: str = "step"
    #: The Profile's step figure (None without a step_breakdown, and for a single-op run).
    split: StepSplit | None = None
    #: Every step of the run, outliers included (what a one-off cost is spread over).
    all_steps: int = 1

    def share(self, us: float) -> float:
        return us / self.step_us if self.step_us > 0 else 0.0

    @property
    def left_out(self) -> list[int]:
        """The outlier steps no per-step figure counts."""
        return sorted(self.split.outlier_steps) if self.split is not None else []

    def per_step_basis(self) -> str:
        """What the per-step figures of a finding average, for its evidence."""
        text = f"per step: mean of {self.steps} step{'s' * (self.steps != 1)}"
        if self.left_out:
            steps = ", ".join(str(s) for s in self.left_out)
            text += f", outlier step{'s' * (len(self.left_out) != 1)} {steps} left out (see the step figure)"
        return text


def _n(count: float) -> str:
    """A count (per step) as a whole number: ops are counted, not measured.  A mean over steps can be
    fractional (a PMU-based rule's op may pass in one step and not in the next), and is rounded; one
    that rounds to none is "fewer than 1"."""
    whole = int(round(count))
    return "fewer than 1" if whole == 0 and count > 0 else f"{whole:,}"


def _count(count: float, noun: str) -> str:
    """A count and its noun, plural unless the count is 1: ``1 op``, ``185 ops``."""
    text = _n(count)
    return f"{text} {noun}" if text in ("1", "fewer than 1") else f"{text} {noun}s"


def us_text(v: float) -> str:
    """A time in us as every finding prints it: ``1,234.5 us``."""
    return f"{v:,.1f} us"


def _pct(v: float) -> str:
    return f"{v:.0%}"


def _single_op_run(ops: pd.DataFrame) -> bool:
    """Whether every task is a single op (aclopExecute), none of a model."""
    if ops.empty or "Model ID" not in ops:
        return False
    return bool((pd.to_numeric(ops["Model ID"], errors="coerce") == SINGLE_OP_MODEL_ID).all())


def _ops_with_times(profile: Profile, whole_run: bool = False) -> pd.DataFrame:
    """op_summary with each row's iteration (all 0 for ``whole_run``), start, end, the device idle time
    before it (us) and whether it is a collective (``_comm``: known at task_trace l0 too, where Task Type
    is N/A).  The idle time is the device's, whatever model ran before (another graph's kernels are not
    idle); before the first task of each model's iteration it is 0 (that gap is between steps).  Start
    and end are us since the first task, from the exact ns (op_summary's float us near 1.8e15 resolve
    only 0.25 us, which would shave gaps)."""
    ops = profile.op_summary
    start_ns = profile.source.op_rows().start_ns.astype(np.int64)
    start = pd.Series((start_ns - start_ns.min()) / 1000.0 if len(start_ns) else np.zeros(0), index=ops.index)
    its = np.zeros(len(ops), np.int64) if whole_run else profile.iteration_of_ops.to_numpy()
    model = pd.to_numeric(ops["Model ID"], errors="coerce").to_numpy() if "Model ID" in ops else 0
    f = ops.assign(_it=its, _model=model, _start=start, _end=start + ops[_DUR].astype(float),
                   _comm=profile.source.communication_rows())
    f = f.sort_values("_start", kind="stable")
    prev_end = f["_end"].cummax().shift()
    first = ~f.duplicated(["_model", "_it"])
    f["_gap"] = (f["_start"] - prev_end).clip(lower=0).where(~first, 0.0).fillna(0.0)
    return f.drop(columns="_model").sort_values(["_it", "_start"], kind="stable")


def _typical_ops(profile: Profile, ops: pd.DataFrame, split: StepSplit | None) -> pd.DataFrame:
    """``ops`` without the outlier steps' rows: the main model's iterations of those steps (every
    model's where the run does not say which model the steps are)."""
    if split is None or not split.outliers or ops.empty:
        return ops
    outlier = ops["_it"].isin(split.outlier_steps).to_numpy()
    main = main_model(profile.step_trace)
    if main is not None and "Model ID" in ops:
        outlier = outlier & (pd.to_numeric(ops["Model ID"], errors="coerce") == main).to_numpy()
    return ops[~outlier]


def _outside_outliers(run: _Run, frame: pd.DataFrame, start_us: str) -> pd.DataFrame:
    """The rows of a whole-run table (host_events, task_time) that start outside every outlier step's
    window (from the previous iteration's end to its own), so their per-step sums count the typical steps."""
    if not run.left_out or frame.empty or start_us not in frame:
        return frame
    windows = step_windows(run.profile.source.step_bounds(), run.profile.source.op_rows())
    windows = windows[windows["step"].isin(run.left_out)]
    start = pd.to_numeric(frame[start_us], errors="coerce").to_numpy(np.float64)
    inside = np.zeros(len(frame), bool)
    for lo, hi in zip(windows["start"].to_numpy() / 1000.0, windows["end"].to_numpy() / 1000.0):
        inside |= (start >= lo) & (start < hi)
    return frame[~inside]


def pmu_metric(ops: pd.DataFrame, name: str) -> pd.Series | None:
    """One PMU metric per row from the core the op ran on: ``aic_<name>``, else ``aiv_<name>``
    (Atlas A2 chips), else ``<name>`` (910A); ``None`` if the run has no such column."""
    cols = [c for c in (f"aic_{name}", f"aiv_{name}", name) if c in ops.columns]
    if not cols:
        return None
    s = pd.to_numeric(ops[cols[0]], errors="coerce")
    for c in cols[1:]:
        s = s.fillna(pd.to_numeric(ops[c], errors="coerce"))
    return s


def _metric_or_nan(ops: pd.DataFrame, name: str) -> pd.Series:
    s = pmu_metric(ops, name)
    return s if s is not None else pd.Series(np.nan, ops.index)


def _top(frame: pd.DataFrame, by: str, n: int = 3) -> pd.DataFrame:
    return frame.sort_values(by, ascending=False, kind="stable").head(n)


def _is_kernel(ops: pd.DataFrame) -> np.ndarray:
    """Which rows are kernels: not communication, not AI CPU."""
    keep = ~ops["_comm"].to_numpy(bool)
    if "Task Type" in ops:
        keep &= text_test(ops["Task Type"], lambda t: t != "AI_CPU")
    return keep


# ------------------------------------------------------------------------------------ rules
def aicpu_on_critical_path(run: _Run) -> Finding | None:
    """AI CPU kernels (other than the dataset iterator) running while nothing else runs."""
    ops = run.ops
    if ops.empty or "Task Type" not in ops:
        return None
    is_cpu = text_test(ops["Task Type"], lambda t: t == "AI_CPU")
    if "OP Type" in ops:
        is_cpu &= ~text_test(ops["OP Type"], lambda t: t.isin(DATA_SOURCE_TYPES))
    if not is_cpu.any():
        return None
    exposed = np.zeros(len(ops))
    its = ops["_it"].to_numpy()  # sorted: each iteration's rows are one slice
    start, end = ops["_start"].to_numpy(), ops["_end"].to_numpy()
    for it in np.unique(its[is_cpu]):
        lo, hi = np.searchsorted(its, it, "left"), np.searchsorted(its, it, "right")
        s, e, mine = start[lo:hi], end[lo:hi], is_cpu[lo:hi]
        exposed[lo + np.flatnonzero(mine)] = (e[mine] - s[mine]) - covered_time(s[~mine], e[~mine], s[mine], e[mine])
    cpu = ops.loc[is_cpu, ["Op Name", "OP Type", _DUR]].assign(_exposed=exposed[is_cpu])
    per_op = cpu.groupby("Op Name", observed=True).agg(
        type=("OP Type", "first"), exposed=("_exposed", "sum"), dur=(_DUR, "sum"))
    per_op[["exposed", "dur"]] /= run.steps
    at_stake = float(per_op["exposed"].sum())
    if run.share(at_stake) < AICPU_MIN_SHARE:
        return None
    top = _top(per_op, "exposed")
    split = _aicpu_split(run)
    evidence = "; ".join(f"{name!r} ({r.type}) {us_text(r.exposed)}/step with nothing else running "
                         f"(of {us_text(r.dur)}){split.get(name, '')}" for name, r in top.iterrows())
    types = ", ".join(sorted(set(top["type"].astype(str))))
    return Finding(
        "AI CPU op on the critical path",
        f"{_count(len(per_op), 'AI CPU op')} hold the device for {us_text(at_stake)} per step "
        f"({_pct(run.share(at_stake))} of the step) while no other task runs.",
        evidence,
        f"Move {types} off AI CPU: GE falls back to AI CPU when no AI Core kernel supports the op, its "
        "dtype or format, so cast int64/float64/bool inputs to int32/float16 or use a supported format; "
        "replace data-dependent ops (NonZero, Unique, ...) with static-shape masking (Select/Mul by a mask) "
        "on AI Core, or compute them on the host before the graph.",
        at_stake, change_of(remove_ops=per_op.index.astype(str)))


def _aicpu_split(run: _Run) -> dict[str, str]:
    """Per AI CPU node, the aicpu table's compute/memcpy split (empty when not collected)."""
    t = run.profile.aicpu
    need = {"Node", "Compute_time(us)", "Memcpy_time(us)"}
    if t.empty or not need <= set(t.columns):
        return {}
    mean = t.groupby("Node")[["Compute_time(us)", "Memcpy_time(us)"]].mean()
    return {str(n): f" (per call: compute {us_text(r['Compute_time(us)'])}, memcpy {us_text(r['Memcpy_time(us)'])})"
            for n, r in mean.iterrows()}


def _memory_bound_rows(run: _Run) -> np.ndarray:
    """Which of ``run.ops``' rows the roofline finds memory-bound (:func:`..tables.roofline.row_bounds`)."""
    profile = run.profile
    roofs = device_roofs(profile.device)
    bound = pd.Series(row_bounds(profile.op_summary, profile.source.op_work(roofs), roofs),
                      index=profile.op_summary.index)
    return (bound.reindex(run.ops.index) == "memory").to_numpy()


def low_cube_utilization(run: _Run) -> Finding | None:
    """Long MatMul / Conv kernels that use little of the cube.  A memory-bound one (its bytes at the HBM bandwidth
    take longer than its FLOPs at the cube's peak: a decode step's MatMuls, a small-M product) is left out: its
    ceiling is the bandwidth, so no cube utilisation would make it faster (the memory-bound rules' business)."""
    ops = run.ops
    mac = pmu_metric(ops, "mac_ratio")
    if ops.empty or mac is None or "OP Type" not in ops:
        return None
    cube = text_test(ops["OP Type"], lambda t: t.str.contains(CUBE_TYPES)) & mac.notna().to_numpy()
    memory_bound = cube & _memory_bound_rows(run)
    cube &= ~memory_bound
    if not cube.any():
        return None
    if "cube_utilization(%)" in ops:
        cores = pd.to_numeric(ops["cube_utilization(%)"], errors="coerce").fillna(100.0) / 100.0
    else:
        n_cores = run.profile.device.get("ai_core_num")
        blocks = pd.to_numeric(ops.get("Block Num", pd.Series(np.nan, ops.index)), errors="coerce")
        cores = (blocks / n_cores).fillna(1.0) if n_cores else pd.Series(1.0, ops.index)
    f = ops.loc[cube, ["Op Name", "OP Type", _DUR]].assign(
        _mac=mac[cube], _cores=cores[cube].clip(upper=1.0), _mte2=_metric_or_nan(ops, "mte2_ratio")[cube],
        _shapes=text_values(ops["Input Shapes"], cube) if "Input Shapes" in ops else "")
    f["_eff"] = f["_mac"] * f["_cores"]
    per_op = f.groupby("Op Name", observed=True).agg(
        type=("OP Type", "first"), shapes=("_shapes", "first"),
        dur=(_DUR, "mean"), total=(_DUR, "sum"), eff=("_eff", "mean"), mac=("_mac", "mean"),
        cores=("_cores", "mean"), mte2=("_mte2", "mean"))
    low = per_op[(per_op["dur"] >= CUBE_MIN_OP_US) & (per_op["eff"] < CUBE_LOW_UTILIZATION)].copy()
    if low.empty:
        return None
    low["stake"] = low["total"] / run.steps * (1 - low["eff"] / CUBE_TARGET_UTILIZATION)
    at_stake = float(low["stake"].sum())
    if run.share(at_stake) < CUBE_MIN_SHARE:
        return None
    top = _top(low, "stake")
    evidence = "; ".join(
        f"{name!r} ({r.type} {r.shapes}) {us_text(r.dur)} per call: mac_ratio {r.mac:.2f} on {_pct(r.cores)} of the "
        f"AI Cores (effective {_pct(r.eff)})" + (f", mte2_ratio {r.mte2:.2f}" if pd.notna(r.mte2) else "")
        for name, r in top.iterrows())
    if memory_bound.any():
        evidence += (f"; {_count(memory_bound.sum() / run.steps, 'MatMul/Conv task')} per step left out, memory-bound "
                     "on the roofline (the bandwidth, not the cube, is their ceiling)")
    starved = bool((top["mte2"] > top["mac"] * MEMORY_BOUND_FACTOR).any())
    few_cores = bool((top["cores"] < CUBE_FEW_CORES).any())
    hints = []
    if starved:
        hints.append("the cube waits for data (MTE2 busier than MAC): raise M (batch, or tokens per call) so "
                     "each weight byte loaded feeds more MACs, or merge small MatMuls into one BatchMatMul")
    if few_cores:
        hints.append("the tiling leaves AI Cores idle: larger M/N (or batching several products) gives more blocks")
    hints.append("pad M, N and K to multiples of 16 and compute in float16/bfloat16 (float32 runs the cube at a "
                 "quarter of the rate; allow HF32 where HF32 Eligible says YES)")
    return Finding(
        "Low cube utilisation",
        f"{_count(len(low), 'MatMul/Conv op')} of at least {CUBE_MIN_OP_US:g} us use under "
        f"{_pct(CUBE_LOW_UTILIZATION)} of the cube; at {_pct(CUBE_TARGET_UTILIZATION)} their kernels would take "
        f"{us_text(at_stake)} less per step.",
        evidence, "; ".join(hints) + ".", at_stake, _cube_change(low))


def _cube_change(low: pd.DataFrame) -> WhatIfChange:
    """The low-utilisation ops at the target utilisation: each op name sped up by target / its utilisation (one
    that shows no cube work at all, by any factor: removed)."""
    working = low["eff"] > 0
    return change_of({str(n): CUBE_TARGET_UTILIZATION / e for n, e in low["eff"][working].items()},
                     low.index[~working].astype(str) if not working.all() else None)


def memory_bound_ops(run: _Run) -> Finding | None:
    """Kernels whose time is GM traffic (MTE2) rather than compute.  Cube ops (the cube rule says why
    they starve) and TransData (only moves data; its own rule) are left out."""
    ops = run.ops
    mte2 = pmu_metric(ops, "mte2_ratio")
    if ops.empty or mte2 is None or "OP Type" not in ops:
        return None
    compute = pd.concat([_metric_or_nan(ops, "vec_ratio"), _metric_or_nan(ops, "mac_ratio")], axis=1).max(axis=1)
    bound = (text_test(ops["OP Type"], lambda t: ~t.str.contains(CUBE_TYPES) & ~t.isin(TRANSDATA_TYPES))
             & (mte2 >= MTE2_DOMINANT_RATIO).to_numpy() & (mte2 >= MEMORY_BOUND_FACTOR * compute.fillna(0)).to_numpy())
    if not bound.any():
        return None
    cols = ["Op Name", "OP Type", _DUR] + (["Input Shapes"] if "Input Shapes" in ops else [])
    f = ops.loc[bound, cols].assign(_mte2=mte2[bound], _compute=compute[bound].fillna(0))
    f["_stake"] = f[_DUR] * (1 - f["_compute"] / f["_mte2"])
    per_type = f.groupby("OP Type", observed=True).agg(
        n=(_DUR, "size"), total=(_DUR, "sum"), stake=("_stake", "sum"), mte2=("_mte2", "mean"),
        compute=("_compute", "mean"))
    per_type[["n", "total", "stake"]] /= run.steps
    at_stake = float(per_type["stake"].sum())
    if run.share(at_stake) < MEMORY_BOUND_MIN_SHARE:
        return None
    biggest = f.sort_values(_DUR, ascending=False).iloc[0]
    shape = f" [{biggest['Input Shapes']}]" if "Input Shapes" in f else ""
    evidence = "; ".join(f"{t}: {_count(r.n, 'op')}/step, {us_text(r.total)}/step, mte2_ratio {r.mte2:.2f} vs compute "
                         f"{r.compute:.2f}" for t, r in _top(per_type, "stake").iterrows())
    evidence += f"; longest: {biggest['Op Name']!r}{shape} {us_text(biggest[_DUR])}"
    return Finding(
        "Memory-bound ops",
        f"{_count(bound.sum() / run.steps, 'op')} per step spend most of their time moving data from HBM "
        f"(MTE2 at least {MEMORY_BOUND_FACTOR:g}x the compute pipe): {us_text(at_stake)} per step beyond their "
        "compute.",
        evidence,
        "Cut the bytes: fuse chains of element-wise ops so intermediates stay in UB (keep GE's fusion passes on; "
        "do not switch them off in ge.fusionSwitchFile; use fused ops such as LayerNorm/Gelu instead of their "
        "pieces), keep activations in float16/bfloat16 rather than float32, and drop Cast/copy ops between them.",
        at_stake, _memory_change(f))


def _memory_change(bound: pd.DataFrame) -> WhatIfChange:
    """The memory-bound ops at their compute pipe's time: each op name sped up by its tasks' time over their time at
    the compute ratio (dur x compute / MTE2); one with no compute at all: removed."""
    at_compute = (bound[_DUR] * bound["_compute"] / bound["_mte2"]).groupby(bound["Op Name"], observed=True).sum()
    total = bound[_DUR].groupby(bound["Op Name"], observed=True).sum()
    working = at_compute > 0
    return change_of({str(n): t / c for n, t, c in zip(total.index[working], total[working], at_compute[working])},
                     total.index[~working].astype(str) if not working.all() else None)


def host_bound_gaps(run: _Run) -> Finding | None:
    """The device idles between consecutive tasks inside a step: the host cannot launch fast enough."""
    ops = run.ops
    if ops.empty:
        return None
    gaps = ops["_gap"][ops["_gap"] >= MIN_GAP_US]
    idle = float(gaps.sum()) / run.steps
    before_fp = 0.0
    if run.unit == "step" and _node_by_node(run):  # the first nodes' host work, before the FP start, is this too
        dab = _data_aug_gaps(run)
        before_fp = max(0.0, dab[2]) if dab is not None else 0.0
    idle += before_fp
    if run.share(idle) < HOST_GAP_MIN_SHARE:
        return None
    dynamic = int(text_test(ops["OP State"], lambda t: t == "dynamic").sum()) if "OP State" in ops else 0
    per = run.unit
    evidence = (f"{_n(len(gaps) / run.steps)} gaps of at least {MIN_GAP_US:g} us per {per} between device tasks, "
                f"median {us_text(float(gaps.median()))}; {_n(dynamic / run.steps)} of "
                f"{_n(len(ops) / run.steps)} op tasks per {per} are dynamic-shape")
    if before_fp:
        evidence += (f"; every op runs node by node: the {us_text(before_fp)} per step before the FP start "
                     "(Data Aug Bound) is its first nodes' host work, counted here")
    if per == "run":
        evidence = (f"single-op run: {len(ops)} op tasks (aclopExecute) from the first task's start to the last "
                    f"one's end: {us_text(run.step_us)}, busy {us_text(float(ops[_DUR].sum()))}; " + evidence)
    host = _host_work_per_step(run)
    if host:
        evidence += f"; host work per {per}: " + ", ".join(f"{k} {us_text(v)}" for k, v in host.items())
    if per == "run":
        suggestion = ("Each aclopExecute pays its host work (op model match or build, launch) while the device "
                      "waits: build the ops into one graph (a GE Session graph, or aclgrphBuildModel + aclmdlExecute) "
                      "so one launch runs them all, and give each op more work (larger tensors, fewer calls).")
    elif dynamic:
        suggestion = ("Run static shapes: give the graph fixed input shapes, or a few shape gears (ge.inputShape "
                      "with ge.dynamicDims / dynamic batch sizes) so each runs as a sunk static model instead of "
                      "node by node with InferShape, Tiling and a launch per op; keep the RT2 executor (v2), "
                      "which does less host work per node than v1, and fuse small ops to launch fewer.")
    else:
        suggestion = ("Launch less per step: fuse small ops, sink the graph (static shapes, iterations per loop > 1) "
                      "and keep Python work out of the step loop.")
    return Finding(
        "Host-bound: device idle between tasks",
        f"The device idles {us_text(idle)} per {run.unit} ({_pct(run.share(idle))} of the {run.unit}) between "
        "consecutive tasks, waiting for the host to launch them.",
        evidence, suggestion, idle, change_of(host_gap_us=0.0) if run.unit == "step" else None)


def _host_work_per_step(run: _Run) -> dict[str, float]:
    """Host time per step by event: GE host profiler spans, else node-level API records."""
    he = _outside_outliers(run, run.profile.host_events, "Start(us)")
    if not he.empty and {"Event", "Duration(us)"} <= set(he.columns):
        per = he.groupby("Event", observed=True)["Duration(us)"].sum() / run.steps
    else:
        api = run.profile.api_statistic  # totals of the whole run: over every step
        if api.empty or not {"Level", "API Name", "Time(us)"} <= set(api.columns):
            return {}
        per = api[api["Level"] == "node"].groupby("API Name")["Time(us)"].sum() / run.all_steps
    return {str(k): float(v) for k, v in per.sort_values(ascending=False).items() if v > 0}


def _other_models_in_gaps(ops: pd.DataFrame, st: pd.DataFrame, main: int | None) -> pd.Series:
    """Per step_trace row, the us that other models' tasks ran inside its Data Aug Bound gap (from the
    previous iteration's end to the FP start): the device was busy then, not waiting."""
    busy = pd.Series(0.0, index=st.index)
    if main is None or not {"Model ID", "Task Start Time(us)", "Task Duration(us)"} <= set(ops.columns):
        return busy
    other = ops[ops["Model ID"] != main]
    if other.empty:
        return busy
    start = other["Task Start Time(us)"].to_numpy(float)
    gap_end = st["FP Start(us)"].to_numpy(float)
    return pd.Series(covered_time(start, start + other["Task Duration(us)"].to_numpy(float),
                                  gap_end - st["Data Aug Bound(us)"].to_numpy(float), gap_end), index=st.index)


def _node_by_node(run: _Run) -> bool:
    """Whether every op task of the typical steps is dynamic-shape: the graph runs node by node, each node's
    InferShape, Tiling and launch on the host while the device waits (its first nodes' before the FP start)."""
    ops = run.ops
    return bool(len(ops)) and "OP State" in ops and bool(text_test(ops["OP State"], lambda t: t == "dynamic").all())


def _data_aug_gaps(run: _Run) -> tuple[pd.Series, pd.Series, float] | None:
    """The main model's typical steps' Data Aug Bound (us), the other models' task time inside each, and the
    mean wait per step (the one less the other); None without the column."""
    try:
        st = run.profile.step_trace
    except ImportFormatError:  # a damaged step_trace file: the Profile's notes name it, the other rules still run
        return None
    if "Data Aug Bound(us)" not in st or not st["Data Aug Bound(us)"].notna().any():
        return None
    main = main_model(st)
    if main is not None:  # the steps are the main model's; another graph's iterations have their own gaps
        st = st[st["Model ID"] == main]
    st = st[st["Data Aug Bound(us)"].notna() & ~st["Iteration ID"].isin(run.left_out)]
    dab = st["Data Aug Bound(us)"]
    if dab.empty:
        return None
    others = _other_models_in_gaps(run.profile.op_summary, st, main)
    return dab, others, float((dab - others).mean())


def data_aug_bound(run: _Run) -> Finding | None:
    """A large Data Aug Bound: the device waits between iterations for input data or the host loop.  A graph
    run node by node (:func:`_node_by_node`) waits before its FP start for its first nodes' host work: that
    is the host-bound finding's (it counts that gap), not an input pipeline's."""
    gaps = _data_aug_gaps(run)
    if gaps is None or _node_by_node(run):
        return None
    dab, others, mean_dab = gaps
    if run.share(mean_dab) < DATA_AUG_MIN_SHARE or mean_dab < DATA_AUG_MIN_US:
        return None
    evidence = (f"Data Aug Bound mean {us_text(float(dab.mean()))} (median {us_text(float(dab.median()))}, max "
                f"{us_text(float(dab.max()))}) over {len(dab)} iterations; step {us_text(run.step_us)}")
    if others.any():
        evidence += (f"; other models' tasks ran {us_text(float(others.mean()))} of it, so the device waits "
                     f"{us_text(mean_dab)}")
    ops = run.ops
    is_getnext = (text_test(ops["OP Type"], lambda t: t.isin(DATA_SOURCE_TYPES)) if "OP Type" in ops
                  else np.zeros(len(ops), bool))
    getnext = ops.loc[is_getnext, ["Op Name", _DUR]]
    if len(getnext):
        gn = float(getnext[_DUR].sum()) / run.steps
        names = ", ".join(repr(n) for n in getnext["Op Name"].astype(str).unique()[:3])
        evidence += f"; dataset iterator {names} runs {us_text(gn)} per step before the FP point"
        suggestion = ("The dataset iterator cannot keep up: prefetch more batches (dataset.prefetch, a deeper "
                      "GetNext device queue), parallelise decode and augmentation (more map workers, or move them "
                      "to DVPP), and feed data already in the model's dtype and layout so no conversion runs "
                      "per batch.")
    else:
        tt = _outside_outliers(run, run.profile.task_time, "task_start(us)")
        if {"kernel_type", "task_time(us)"} <= set(tt.columns):
            copies = tt[tt["kernel_type"].astype(str) == "MEMCPY_ASYNC"]["task_time(us)"]
            if len(copies):
                evidence += f"; input copies (MEMCPY_ASYNC) {us_text(float(copies.sum()) / run.steps)} per step"
        suggestion = ("The host gap between iterations (input copy, the next RunGraph) is exposed: enable data sink "
                      "and run several iterations per launch (TF adapter enable_data_pre_proc=True with "
                      "iterations_per_loop > 1, MindSpore dataset_sink_mode=True with sink_size), prefetch input "
                      "batches, and keep Python work between steps out of the loop.")
    return Finding(
        "Large Data Aug Bound",
        f"The device waits {us_text(mean_dab)} per step ({_pct(run.share(mean_dab))} of the step) between the end "
        "of one iteration and the FP start of the next.",
        evidence, suggestion, mean_dab)


def one_off_stalls(run: _Run) -> list[Finding]:
    """Outlier steps (:mod:`..tables.step_split`) whose excess is device idle time: the host, or the input pipeline,
    stalled once.  Each is its own finding with its step and size; the per-step figures leave it out.
    Time at stake is the stall spread over the run's steps (what it cost per step, once), which ranks
    it among the per-step findings; the finding says what it cost once."""
    split = run.split
    stalls = [o for o in split.outliers if o.whole and o.is_stall] if split is not None else []
    if not stalls:
        return []
    bd = run.profile.step_breakdown
    gaps = _gaps_before_steps(run)
    typical_gap = float(gaps[gaps.index.isin(split.steps)].mean()) if len(gaps) else float("nan")
    out = []
    for o in stalls[:MAX_STALLS]:
        gap = float(gaps.get(o.step, float("nan")))
        before = gap - typical_gap >= 0.5 * o.extra_free_us  # the gap before the step holds it
        where = f"before step {o.step}" if before else f"in step {o.step} (between step {o.step - 1}'s end and its own)"
        free = float(bd.loc[pd.to_numeric(bd["Step"], errors="coerce") == o.step, "Free"].iloc[0])
        evidence = (f"step {o.step}: {o.length_us / 1000:,.1f} ms from the previous iteration's end to its own, a "
                    f"typical step {split.length_us / 1000:,.3f} ms (the step figure); its Free "
                    f"{us_text(free)}, a typical step's {us_text(split.free_us)}")
        if before:
            evidence += (f"; Data Aug Bound (previous iteration end to FP start) {us_text(gap)}, a typical step's "
                         f"{us_text(typical_gap)}")
        spread = o.extra_free_us / run.all_steps
        out.append(Finding(
            "One-off stall",
            f"A {o.extra_free_us / 1000:,.1f} ms stall {where}: the device idled that much longer than in a typical "
            f"step, once ({us_text(spread)} per step over the run's {run.all_steps} steps).",
            evidence,
            f"Look at what ran once before step {o.step}: your loop's own work at that step (a checkpoint save, an "
            "evaluation, logging, a first-time import or allocation), the input pipeline (a data loader refilling, "
            "a file read), or another process on the host. The per-step figures leave this step out; a stall that "
            "repeats every N steps shows here at each occurrence.",
            spread))
    rest = stalls[MAX_STALLS:]
    if rest:
        total = sum(o.extra_free_us for o in rest)
        out.append(Finding(
            "One-off stall", f"{len(rest)} more stalls: {total / 1000:,.1f} ms in all",
            "; ".join(o.describe() for o in rest), "See the stalls above: look at what those steps did once.",
            total / run.all_steps))
    return out


def _gaps_before_steps(run: _Run) -> pd.Series:
    """The main model's Data Aug Bound (previous iteration end to FP start, us) by Iteration ID."""
    try:
        st = run.profile.step_trace
    except ImportFormatError:
        return pd.Series(dtype=float)
    if "Data Aug Bound(us)" not in st:
        return pd.Series(dtype=float)
    main = main_model(st)
    if main is not None:
        st = st[st["Model ID"] == main]
    st = st.dropna(subset=["Data Aug Bound(us)"])
    return pd.Series(st["Data Aug Bound(us)"].to_numpy(np.float64), index=st["Iteration ID"].to_numpy(np.int64))


def _typical_breakdown(run: _Run) -> pd.DataFrame:
    """The step_breakdown rows the step figure averages (its typical whole periods)."""
    bd = run.profile.step_breakdown
    if run.split is None or bd.empty:
        return bd
    return bd[pd.to_numeric(bd["Step"], errors="coerce").isin(run.split.steps)]


def communication_not_overlapped(run: _Run) -> Finding | None:
    """Collectives that compute does not hide (step_breakdown's Communication(Not Overlapped))."""
    bd = _typical_breakdown(run)
    col = "Communication(Not Overlapped)"
    if not {col, "Communication", "Overlapped", "Computing"} <= set(bd.columns) or not bd[col].notna().any():
        return None
    exposed = float(bd[col].mean())
    if run.share(exposed) < COMM_EXPOSED_MIN_SHARE:
        return None
    evidence = (f"not overlapped {us_text(exposed)} of {us_text(float(bd['Communication'].mean()))} communication "
                f"per step (overlapped {us_text(float(bd['Overlapped'].mean()))}), computing "
                f"{us_text(float(bd['Computing'].mean()))}")
    ops = run.ops
    comm = ops[ops["_comm"]]
    mean_us = float(comm[_DUR].mean()) if len(comm) else float("nan")
    if len(comm):
        counts = collective_op_types(comm).value_counts() / run.steps
        evidence += (f"; {_count(len(comm) / run.steps, 'collective')} per step ("
                     + ", ".join(f"{t} x{_n(n)}" for t, n in counts.items()) + f"), mean {us_text(mean_us)}")
    ct = run.profile.communication_time
    if "Wait Time Ratio" in ct and ct["Wait Time Ratio"].notna().any():
        evidence += f"; wait time ratio {float(ct['Wait Time Ratio'].mean()):.2f} (HCCL notify waits)"
    if len(comm) > run.steps and mean_us < COMM_LATENCY_BOUND_US:
        first = (f"Fuse gradients into fewer, larger AllReduce buckets: {_n(len(comm) / run.steps)} collectives of "
                 f"{us_text(mean_us)} per step are latency-bound")
    else:
        first = ("Overlap the gradient AllReduce with the backward pass: split gradients into more, smaller buckets "
                 "so they start while backward still runs and only the last one is exposed")
    return Finding(
        "Communication not overlapped with compute",
        f"{us_text(exposed)} per step ({_pct(run.share(exposed))} of the step) is communication that no compute hides.",
        evidence,
        f"{first} (ge.add_training(bucket_bytes=...), TF adapter hccl split strategy set_split_strategy_by_size / "
        "by_idx, MindSpore all_reduce_fusion_config); give each device more work per step (batch size, gradient "
        "accumulation) so compute can hide it; if wait time dominates, look for a slow rank.",
        exposed, change_of(remove_ops=comm["Op Name"].astype(str).unique()) if len(comm) else None)


@dataclass(frozen=True)
class GroupExposure:
    """A rank's collectives of one group kind, per step (means over the steps that have them, us)."""

    exposed_us: float
    time_us: float
    count: float
    steps: int
    #: the group's global ranks (info.json's parallel_group_info), empty if the run does not say
    ranks: tuple[int, ...]


def tensor_parallel_exposure(profile: Profile, ops: pd.DataFrame | None = None) -> GroupExposure | None:
    """The tensor-parallel (``tp`` group) collectives of ``profile``'s typical steps (``ops``: the advisor's
    op rows, built from the profile if not given): per step, how long they run while no computation does
    (:func:`..tables.collective_groups.exposed_group_time`), their time and count.  None without tp
    collectives (no ``hccl_op`` records, or imported data, which names no group per op)."""
    if ops is None:
        ops = _typical_ops(profile, _ops_with_times(profile), profile.step_split)
    groups = pd.Series(profile.source.collective_group_kinds(), index=profile.op_summary.index).reindex(ops.index)
    in_tp = (groups == TP_GROUP).to_numpy(bool)
    if not in_tp.any():
        return None
    per_step = exposed_group_time(ops["_it"].to_numpy(), ops["_start"].to_numpy(), ops["_end"].to_numpy(),
                                  ops["_comm"].to_numpy(bool), in_tp)
    info = (profile.info.get("parallel") or {}).get("parallel_group_info") or {}
    ranks = next((tuple(int(r) for r in g.get("global_ranks", ())) for g in info.values()
                  if isinstance(g, dict) and g.get("group_name") == TP_GROUP), ())
    return GroupExposure(float(per_step["Exposed(us)"].mean()), float(per_step["Time(us)"].mean()),
                         float(per_step["Count"].mean()), len(per_step), ranks)


def exposed_tp_finding(exposure: GroupExposure, step_us: float, where: str) -> Finding:
    """The finding of exposed tensor-parallel communication (one rank's, or the cluster's worst rank's):
    time at stake is the exposed time per step, never more than the step (``step_us``)."""
    at_stake = min(exposure.exposed_us, step_us) if step_us > 0 else exposure.exposed_us
    ranks = ", ".join(map(str, exposure.ranks))
    servers = {r // SERVER_DEVICES for r in exposure.ranks}
    link = ("" if not exposure.ranks else " (one server: HCCS)" if len(servers) == 1
            else f" (across {len(servers)} servers: RoCE)")
    share = at_stake / step_us if step_us > 0 else 0.0
    return Finding(
        "Exposed tensor-parallel communication",
        f"{us_text(at_stake)} per step ({_pct(share)} of the step) on {where} is tensor-parallel communication "
        "that no computation hides.",
        f"{_count(exposure.count, 'tp collective')} per step taking {us_text(exposure.time_us)}, of which "
        f"{us_text(exposure.exposed_us)} with no computation running (the union of computation and the tp "
        "collectives less that of computation; waiting for the group's slower members counts), tp group "
        f"ranks {ranks or 'not recorded'}{link}",
        "Keep the tensor-parallel group inside one server (HCCS; tp <= 8) and lower tp where the model fits "
        "(raise pp or dp instead: ge.Parallel(tp=..., pp=..., dp=...)); turn on sequence parallelism "
        "(ge.Parallel(sp=True): AllGather / ReduceScatter, activations split over tp); overlap the TP "
        "collectives with the matmuls they feed (MindSpeed's --use-ascend-coc, Megatron's "
        "--tp-comm-overlap); larger micro-batches make each collective a smaller share of its layer's time.",
        at_stake)


def exposed_tensor_parallel_communication(run: _Run) -> Finding | None:
    """Tensor-parallel collectives (``tp`` group, from the hccl_op records) that computation does not hide."""
    exposure = tensor_parallel_exposure(run.profile, run.ops)
    if exposure is None or run.share(exposure.exposed_us) < TP_EXPOSED_MIN_SHARE:
        return None
    rank = (run.profile.info.get("parallel") or {}).get("distributed_args", {}).get("rank")
    return exposed_tp_finding(exposure, run.step_us, f"rank {rank}" if rank is not None else "this device")


def many_tiny_kernels(run: _Run) -> Finding | None:
    """Many kernels so short that their fixed launch cost is most of their time: fusion candidates."""
    kernel = _is_kernel(run.ops)
    dur = run.ops[_DUR][kernel]
    if dur.empty:
        return None
    is_tiny = (dur < TINY_KERNEL_US).to_numpy()
    tiny = dur[is_tiny]
    per_step = len(tiny) / run.steps
    floor = float(dur.min())
    at_stake = per_step * floor
    if per_step < TINY_MIN_PER_STEP or run.share(at_stake) < TINY_MIN_SHARE:
        return None
    tiny_rows = np.flatnonzero(kernel)[is_tiny]
    types = (text_values(run.ops["OP Type"], tiny_rows).value_counts() / run.steps if "OP Type" in run.ops
             else pd.Series(dtype=float))
    per = run.unit
    evidence = (f"{_n(per_step)} of {_n(len(dur) / run.steps)} kernels per {per} run under {TINY_KERNEL_US:g} us "
                f"({us_text(float(tiny.sum()) / run.steps)} per {per}); no kernel takes less than {us_text(floor)}, "
                "its fixed cost; most frequent: " + ", ".join(f"{t} x{_n(n)}" for t, n in types.head(5).items()))
    optimizer = [t for t in types.index if OPTIMIZER_TYPE.search(t)]
    hint = (f" Replace the per-variable {', '.join(optimizer)} kernels with a fused optimizer over flattened "
            "parameters." if optimizer else "")
    return Finding(
        "Many tiny kernels",
        f"{_n(per_step)} kernels per {per} are shorter than {TINY_KERNEL_US:g} us; their fixed launch cost alone "
        f"is about {us_text(at_stake)} per {per}.",
        evidence,
        "Fuse them: keep GE's fusion passes on (check ge.fusionSwitchFile), use fused ops (LayerNorm, Gelu, "
        "BNTraining*, fused attention) instead of chains of small ones, and give each kernel more work (a larger "
        "batch or sequence per step)." + hint,
        at_stake, _tiny_change(run.ops.iloc[tiny_rows], floor))


def _tiny_change(tiny: pd.DataFrame, floor_us: float) -> WhatIfChange:
    """The tiny kernels without their fixed cost (what fusing them saves): each op name sped up to its mean
    duration less the shortest kernel's; one no longer than that: removed."""
    mean = tiny[_DUR].astype(float).groupby(tiny["Op Name"], observed=True).mean()
    longer = mean > floor_us
    return change_of({str(n): d / (d - floor_us) for n, d in mean[longer].items()},
                     mean.index[~longer].astype(str) if not longer.all() else None)


def transdata_conversions(run: _Run) -> Finding | None:
    """Time spent converting tensor formats (TransData) instead of computing."""
    ops = run.ops
    if ops.empty or "OP Type" not in ops:
        return None
    cols = ["Input Formats", "Output Formats", "Input Shapes"]
    is_td = text_test(ops["OP Type"], lambda t: t.isin(TRANSDATA_TYPES))
    td = ops.loc[is_td, ["Op Name", _DUR] + [c for c in cols if c in ops]]
    at_stake = float(td[_DUR].sum()) / run.steps
    if td.empty or run.share(at_stake) < TRANSDATA_MIN_SHARE:
        return None
    per_op = td.groupby("Op Name", observed=True).agg(
        total=(_DUR, "sum"), **{c: (c, "first") for c in cols if c in td})
    per_op["total"] /= run.steps
    evidence = f"{_n(len(td) / run.steps)} TransData per step; " + "; ".join(
        f"{name!r} {us_text(r.total)}/step"
        + (f" {r['Input Formats']} -> {r['Output Formats']}" if "Input Formats" in r and "Output Formats" in r else "")
        + (f" [{r['Input Shapes']}]" if "Input Shapes" in r else "")
        for name, r in _top(per_op, "total").iterrows())
    return Finding(
        "TransData format conversions",
        f"{_count(len(td) / run.steps, 'TransData op')} per step convert tensor layouts for {us_text(at_stake)} "
        f"per step ({_pct(run.share(at_stake))} of the step) without computing anything.",
        evidence,
        "Keep tensors in the layout the cube uses: feed the convolution chain NC1HWC0 (5HD) data and keep its "
        "neighbouring ops (BN, activations, Add) in 5HD so GE's format refinement drops the TransData pairs; store "
        "weights pre-converted (FRACTAL_Z), keep MatMul chains in FRACTAL_NZ, and avoid ops without a 5HD kernel "
        "(e.g. a Reshape/Transpose) between convolutions.",
        at_stake, change_of(remove_ops=per_op.index.astype(str)))


def dynamic_shape_recompiles(run: _Run) -> Finding | None:
    """Dynamic-shape ops whose input shapes change from step to step (a new InferShape/Tiling/compile per shape).

    It compares steps: an op's shapes in one step against the other steps' (an op name that runs with
    several shapes inside every step, the same in each, changes nothing), so one step finds nothing."""
    ops = run.ops
    if run.steps < 2 or ops.empty or not {"OP State", "Input Shapes", "Op Name"} <= set(ops.columns):
        return None
    texts, position = distinct_texts(ops["Input Shapes"])
    is_dyn = text_test(ops["OP State"], lambda t: t == "dynamic") & (texts != "N/A").to_numpy(bool)[position]
    if not is_dyn.any():
        return None
    shape_text = texts.array.take(position[is_dyn])
    shape_id = pd.factorize(texts)[0][position[is_dyn]]  # one id per distinct text
    dyn = ops.loc[is_dyn, ["Op Name", "_it", "_gap"]].assign(_shape=shape_id)
    per_step = dyn.groupby(["Op Name", "_it"], observed=True, sort=False)["_shape"].agg(tuple)  # in launch order
    step_sets = per_step.groupby(level=0, observed=True).nunique()
    first_seen = ~dyn.duplicated(["Op Name", "_shape"]).to_numpy()  # each op's shapes in the order they first ran
    shapes = (pd.Series(shape_text[first_seen], index=dyn.index[first_seen])
              .groupby(dyn["Op Name"][first_seen], observed=True).agg(list))
    changing = shapes[shapes.index.isin(step_sets.index[step_sets > 1])]
    if changing.empty:
        return None
    at_stake, source = _shape_host_time(run, set(changing.index.astype(str)), dyn)
    example = changing.index[0]
    seq = " -> ".join(changing.iloc[0][:4]) + (" -> ..." if len(changing.iloc[0]) > 4 else "")
    its = dyn["_it"].to_numpy()  # sorted: each iteration's rows are one slice
    n_sets = len({tuple(ids.tolist()) for ids in np.split(shape_id, np.flatnonzero(its[1:] != its[:-1]) + 1)})
    return Finding(
        "Dynamic shapes change between steps",
        f"{_count(len(changing), 'dynamic-shape op')} see {n_sets} different input shape sets over {run.steps} "
        f"steps; each new shape costs InferShape, Tiling (and on real GE an op compile): {us_text(at_stake)} per step.",
        f"{example!r}: {seq}; {source}",
        "Bucket the shapes: pad batches to a few fixed sizes (gears) and build them with ge.inputShape + "
        "ge.dynamicDims (ATC --dynamic_batch_size / --dynamic_dims), or make the input static (drop_remainder=True, "
        "pad sequences to a fixed length), so every step reuses a compiled static model.",
        at_stake)


def _shape_host_time(run: _Run, names: set[str], dyn: pd.DataFrame) -> tuple[float, str]:
    """Host time per step the changing ops spend on shape work, and where the number comes from."""
    he = _outside_outliers(run, run.profile.host_events, "Start(us)")
    if not he.empty and {"Element", "Event", "Duration(us)"} <= set(he.columns):
        sel = (text_test(he["Element"], lambda t: t.isin(names))
               & text_test(he["Event"], lambda t: t.isin(SHAPE_HOST_EVENTS)))
        return float(he["Duration(us)"][sel].sum()) / run.steps, "host profiler InferShape + Tiling of those ops"
    api = run.profile.api_statistic
    if not api.empty and {"Level", "API Name", "Time(us)"} <= set(api.columns):
        sel = api[(api["Level"] == "node") & api["API Name"].isin(SHAPE_HOST_EVENTS)]
        if len(sel):
            share = len(names) / max(1, dyn["Op Name"].nunique())
            return (float(sel["Time(us)"].sum()) * share / run.all_steps,
                    "node-level InferShape + Tiling (api_statistic), prorated to those ops")
    gap = float(dyn["_gap"][text_test(dyn["Op Name"], lambda t: t.isin(names))].sum()) / run.steps
    return gap, "device idle before those ops (no host data collected)"


Rule = Callable[[_Run], "Finding | list[Finding] | None"]
#: The rules, each a function of the tables (see its docstring and the thresholds above): a per-step
#: finding or none, or (one-off stalls) a list of one-off findings.
RULES: tuple[Rule, ...] = (aicpu_on_critical_path, low_cube_utilization, memory_bound_ops, host_bound_gaps,
                           data_aug_bound, one_off_stalls, communication_not_overlapped,
                           exposed_tensor_parallel_communication, many_tiny_kernels,
                           transdata_conversions, dynamic_shape_recompiles)


def _priority(share: float) -> str:
    return "High" if share >= HIGH_SHARE else "Medium" if share >= MEDIUM_SHARE else "Low"


def advise(profile: Profile) -> pd.DataFrame:
    """Findings ranked High, Medium, Low, then by time at stake per step (columns :data:`COLUMNS`)."""
    whole_run = _single_op_run(profile.op_summary)
    ops = _ops_with_times(profile, whole_run)
    all_steps = max(1, int(ops["_it"].nunique())) if len(ops) else 1
    if whole_run:
        run = _Run(profile, ops, all_steps, float(ops["_end"].max() - ops["_start"].min()), "run")
    else:
        split = profile.step_split
        typical = _typical_ops(profile, ops, split)
        steps = max(1, int(typical["_it"].nunique())) if len(typical) else 1
        run = _Run(profile, typical, steps, split.length_us if split is not None else 0.0, split=split,
                   all_steps=all_steps)
    findings = []
    for rule in RULES:
        found = rule(run)
        if isinstance(found, Finding):
            if run.unit == "step":  # a single-op run is one unit: nothing is averaged
                found.evidence += f"; {run.per_step_basis()}"
            findings.append(found)
        elif found:
            findings.extend(found)  # one-off findings: not per-step figures
    findings = serving_findings(profile, findings)
    if run.unit == "step":
        _what_if_stakes(run, findings)
    return findings_table(findings, run.step_us)


def _what_if_stakes(run: _Run, findings: list[Finding]) -> None:
    """Each finding with a change: its time at stake becomes the change's saving per step on the critical path,
    its exclusive time the chained saving (:func:`.savings.what_if_stakes`); the others keep their estimate."""
    iterations = np.unique(run.ops["_it"].to_numpy()) if len(run.ops) else []
    alone, exclusive = what_if_stakes(run.profile, iterations, [f.change for f in findings])
    for f, saved, excl in zip(findings, alone, exclusive):
        if saved is None:
            continue
        f.evidence += (f"; what-if ({_change_text(f.change)}): the critical path {us_text(saved)} per step shorter, "
                       f"the rule's own measure {us_text(f.at_stake_us)}")
        f.at_stake_us, f.exclusive_us, f.basis = saved, excl, WHAT_IF


def _change_text(change: WhatIfChange) -> str:
    """A change in a few words: how many ops it speeds up or removes, its host gap cap."""
    parts = []
    if change.op_speedup:
        parts.append(f"{_count(len(change.op_speedup), 'op')} sped up")
    if change.remove_ops:
        parts.append(f"{_count(len(change.remove_ops), 'op')} removed")
    if change.host_gap_us is not None:
        parts.append(f"host gaps capped at {change.host_gap_us:g} us")
    return ", ".join(parts)


def findings_table(findings: list[Finding], step_us: float) -> pd.DataFrame:
    """Findings as rows of :data:`COLUMNS`, ranked High, Medium, Low, then by time at stake; ``step_us`` is
    the step (the run, for a single-op run) the shares are of (the cluster advisor shares this).

    ``Time at stake (us)`` is each finding's own figure: what removing its cause saves, alone (``Time at stake
    basis`` "what-if": the re-timed critical path's saving; "estimate": the rule's own measure).  ``Exclusive
    time at stake (us)`` is a what-if finding's chained saving and an estimate's own figure, each at most what
    the findings ranked above left of the step (:func:`exclusive_stakes`), so the column adds up to at most the
    step: the figure to sum across findings.  ``attrs["step_us"]`` holds the step, ``attrs["what_if"]`` per row
    the what-if keywords (``Profile.what_if(**kw)``) its figure is the saving of, or None."""
    def share(us: float) -> float:
        return us / step_us if step_us > 0 else 0.0

    rows = [{"Priority": _priority(share(f.at_stake_us)), "Rule": f.rule, "Finding": f.finding,
             "Evidence": f.evidence, "Suggestion": f.suggestion, "Time at stake (us)": round(f.at_stake_us, 3),
             "Share of step (%)": round(100 * share(f.at_stake_us), 2), "Time at stake basis": f.basis,
             "_own": round(f.at_stake_us if f.exclusive_us is None else f.exclusive_us, 3), "_n": i}
            for i, f in enumerate(findings)]
    frame = pd.DataFrame(rows, columns=[*COLUMNS, "_own", "_n"])
    if not frame.empty:
        frame["_rank"] = frame["Priority"].map(PRIORITIES.index)
        frame = frame.sort_values(["_rank", "Time at stake (us)"], ascending=[True, False], kind="stable")
        frame["Exclusive time at stake (us)"] = np.round(exclusive_stakes(frame["_own"].to_numpy(float), step_us), 3)
    what_if = [findings[i].change.keywords() if findings[i].basis == WHAT_IF else None for i in frame["_n"]]
    frame = frame[COLUMNS].reset_index(drop=True)
    frame.attrs.update(step_us=float(step_us), what_if=what_if)
    return frame


def exclusive_stakes(stakes: np.ndarray, step_us: float) -> np.ndarray:
    """Each finding's own figure (in rank order: a what-if finding's chained saving, an estimate's time at stake)
    less what the findings ranked above it already claim of the step: the first keeps its own figure (never
    more than the step), each next one at most what the step has left.  Chained savings never count one
    microsecond twice; where an estimate can hold the same microseconds as another finding (a host gap inside a
    Data Aug Bound, a stall spread over steps it is longer than) the one ranked higher keeps them."""
    stakes = np.clip(np.asarray(stakes, float), 0.0, None)
    if not step_us > 0:
        return stakes
    claimed_before = np.concatenate(([0.0], np.cumsum(stakes)[:-1]))
    return np.clip(np.minimum(stakes, step_us - claimed_before), 0.0, None)
