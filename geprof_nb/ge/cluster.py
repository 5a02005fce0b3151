"""Several ranks of a data-parallel job simulated together, one run directory per rank.

A session with ``ge.exec.rankSize`` > 1 (or ``%%geprof --ranks N``) runs every
static model on all ranks at once.  The ranks share the process's clock and
the model's task list; each has its own device timeline:

* compute tasks of a rank take their own (jittered) time, times the rank's
  slow-card factor (>= 1).  A slow card's AI Cores stall: each block does the
  same pipe work (the PMU pipe counters are the nominal ones) in ``factor`` x
  the cycles, so ``aicore_time`` stays the task duration less its head/tail
  and the pipe ratios fall by the factor, as on a card losing cycles to
  throttled or error-retrying memory;
* a collective starts on each rank when that rank gets to it, and ends on every
  rank at the same moment: the slowest rank's arrival plus the transfer time of
  the algorithm (:mod:`.hccl`: a ring inside a server, hierarchical across
  servers of ``ranks_per_node``) times one transfer jitter draw (>= 1, as on a
  single device: :func:`.schedule.jitter_factors`).  An early rank's extra
  time is the leading ``Notify_Wait`` of its HCCL sub-tasks, which is what
  msprof-analyze reports as wait time;
* a rank's host calls ``run_graph`` as long after rank 0's call as its previous
  (synchronous) call returned after rank 0's (a slow rank's host lags), never
  before that call returned; its device starts the step a launch latency after
  the call, plus its injected delays (host launch jitter, a data loader stall
  every k steps).  So a rank's ``ModelExecute`` records (its ProfilerStep spans)
  never overlap.

Steps are computed for all ranks with numpy (rows are ranks), one step at a
time because each step starts where the previous one left every rank.  Rank 0 is
the process's own device: its host layers (API, GE host, mstx) and device data
go through ``msprof.lib`` as for a single device.  Every other rank reports its
device data (task log, step trace, static task info, memory, HCCL, AI CPU) to a
library of its own, under ``<output>/CLUSTER_<seq>_<time>_<tag>/rank_<r>/PROF_*``.  The
cluster root is chosen when the cluster starts collecting (its first reported step):
rank 0's run moves into its ``rank_0/`` then, and the other ranks' runs open beside
it and end with it, so the cluster root is what ``geprof_nb.load`` reads as a
``ClusterProfile`` from then on.  When they end, a file a rank holds byte for byte as an earlier rank does (the
static descriptions of the ranks of a stage, and the first lines of their hash dictionaries, moved to a file of
their own) becomes a hard link to it (:mod:`..prof.shared_files`, :func:`..prof.hash_dict.share_lines`).

Faults for what-if studies (:class:`Faults`, GE option ``geprof.faults`` as JSON):
``{"slow_ranks": {"3": 1.3}, "slow_links": {"0-1": 0.5}, "host_jitter_us": {"5": 300},
"loader_stall": {"every": 10, "us": 5000, "ranks": [2]}, "expert_skew": 1.5}``.
"""

from __future__ import annotations

import dataclasses
import random
import re
import string
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..prof import hash_dict, json_text, msprof, rawdata, shared_files
from ..prof.api_types import type_names
from ..prof.collectors import report_api_block
from ..prof.msprof import Msprof
from ..prof.properties import BIT_TASK_TIME, GlobalProfilingWrapper, ProfilingProperties
from ..prof.rawdata import ModelInfoType, ReportLevel
from . import hccl
from .builds import ModelBuild, ModelBuilds, PendingSteps, StepBatch
from .compiler import hccl_stream_keys
from .device import DevicePreset, device_links
from .parallel import WORLD_GROUP, Parallel
from .rank_programs import CommGroups, stage_programs
from .rank_schedule import ClusterStep
from .runtime import LAUNCH_LATENCY_NS, SYNC_LATENCY_NS, DeviceRuntime, LoadedModel
from .schedule import StepTimes
from .step_report import StepReporter

OPTION_RANK_SIZE = "ge.exec.rankSize"
OPTION_RANKS_PER_NODE = "geprof.ranksPerNode"
OPTION_FAULTS = "geprof.faults"
DEFAULT_RANKS_PER_NODE = 8
MAX_RANKS = 65_536
MAX_EXPERT_SKEW = 8.0
#: Task times kept per batch of steps ([steps, ranks, tasks] int64 x 3): bounds memory at large rank counts.
BATCH_ELEMENTS = 1 << 21


class ClusterOptionError(ValueError):
    """A cluster option has a bad value: the message names the field and what is accepted."""


_INTEGER = re.compile(r"\s*[+-]?[0-9]+\s*", re.ASCII)
_DECIMAL = re.compile(r"\s*[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*", re.ASCII)


def _shown(value: Any) -> str:
    """A value as an error quotes it: short, whatever it is (a long string by its ends, a container by its type)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"<an integer of {value.bit_length()} bits>"
    text = repr(value) if value is None or isinstance(value, (str, int, float)) else f"<{type(value).__name__}>"
    return text if len(text) <= 40 else f"{text[:24]}...{text[-8:]} ({len(text)} characters)"


def _rank(value: Any, field: str, world_size: int) -> int:
    """A rank: an int or its ASCII digits (not a bool, a fraction or ``1_0``, which int() would take)."""
    ok = (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, str) and _INTEGER.fullmatch(value) and len(value.strip()) <= 12)
    if not ok:
        raise ClusterOptionError(f"{field}: rank {_shown(value)} is not an integer; accepted: 0 .. {world_size - 1}")
    r = int(value)
    if not 0 <= r < world_size:
        raise ClusterOptionError(f"{field}: rank {_shown(r)} is out of range; accepted: 0 .. {world_size - 1}")
    return r


def _number(value: Any, field: str, low: float, high: float, what: str) -> float:
    """A number in [low, high]: an int, a float or a decimal's text (not a bool, NaN or ``1_0``)."""
    ok = (isinstance(value, (int, float)) and not isinstance(value, bool)) or (
        isinstance(value, str) and _DECIMAL.fullmatch(value))
    if not ok:
        raise ClusterOptionError(f"{field}: {_shown(value)} is not a number; accepted: {what}")
    x = float(value) if not isinstance(value, int) or value.bit_length() < 1000 else float("inf")
    if not (low <= x <= high):  # NaN fails it too
        raise ClusterOptionError(f"{field}: {_shown(value)} is out of range; accepted: {what}")
    return x


def _count(value: Any, field: str, low: int, high: int, what: str) -> int:
    """A whole number in [low, high] (as :func:`_number` reads it; ``2.5`` is not one)."""
    x = _number(value, field, low, high, what)
    if not x.is_integer():
        raise ClusterOptionError(f"{field}: {_shown(value)} is not an integer; accepted: {what}")
    return int(x)


def _items(value: Any, field: str, what: str) -> list:
    """The items of a list option (a JSON array)."""
    if not isinstance(value, (list, tuple)):
        raise ClusterOptionError(f"{field}: {_shown(value)} is not a list; accepted: {what}")
    return list(value)


@dataclass(frozen=True)
class Faults:
    """Injected faults of a simulated cluster (all optional)."""

    #: rank -> compute time factor >= 1 (1.3: its kernels take 30% longer, their blocks stalling 30% more cycles).
    slow_ranks: tuple[tuple[int, float], ...] = ()
    #: (src rank, dst rank, bandwidth factor in (0, 1]): a degraded link.
    slow_links: tuple[tuple[int, int, float], ...] = ()
    #: rank -> standard deviation of an extra host launch delay per step (us, half-normal).
    host_jitter_us: tuple[tuple[int, float], ...] = ()
    #: every ``loader_every`` steps the data loader stalls ``loader_stall_us`` on ``loader_ranks`` (all if empty).
    loader_every: int = 0
    loader_stall_us: float = 0.0
    loader_ranks: tuple[int, ...] = ()
    #: MoE routing skew: a Zipf exponent of the experts' shares of a layer's tokens (0: balanced; see
    #: :func:`~.llm.expert_shares`); the ranks holding the popular experts compute longer.
    expert_skew: float = 0.0

    @classmethod
    def parse(cls, value: "str | Mapping[str, Any] | Faults | None", world_size: int) -> "Faults":
        """Faults from the ``geprof.faults`` option (JSON text or a dict); ClusterOptionError names the field."""
        if value is None or value == "":
            return cls()
        if isinstance(value, Faults):
            spec = value.to_dict()
        elif isinstance(value, str):
            try:
                spec = json_text.loads(value)
            except json_text.JsonTextError as exc:
                raise ClusterOptionError(f"{OPTION_FAULTS}: not valid JSON ({exc.reason}); "
                                         'accepted: e.g. {"slow_ranks": {"3": 1.3}}') from None
        else:
            spec = value
        if not isinstance(spec, Mapping):
            raise ClusterOptionError(f"{OPTION_FAULTS}: expected a JSON object, got {type(spec).__name__}")
        known = ("slow_ranks", "slow_links", "host_jitter_us", "loader_stall", "expert_skew")
        unknown = [k for k in spec if k not in known]
        if unknown:
            raise ClusterOptionError(f"{OPTION_FAULTS}: unknown field {_shown(unknown[0])}; accepted: "
                                     f"{', '.join(known)}")

        def mapping(field: str) -> Mapping:
            m = spec.get(field) or {}
            if not isinstance(m, Mapping):
                raise ClusterOptionError(f"{OPTION_FAULTS}.{field}: expected an object {{rank: value}}, "
                                         f"got {type(m).__name__}")
            return m

        slow = tuple(sorted((_rank(r, f"{OPTION_FAULTS}.slow_ranks", world_size),
                             _number(f, f"{OPTION_FAULTS}.slow_ranks[{r}]", 1.0, 100.0, "a factor in [1, 100]"))
                            for r, f in mapping("slow_ranks").items()))
        jitter = tuple(sorted((_rank(r, f"{OPTION_FAULTS}.host_jitter_us", world_size),
                               _number(us, f"{OPTION_FAULTS}.host_jitter_us[{r}]", 0.0, 1e7, "microseconds >= 0"))
                              for r, us in mapping("host_jitter_us").items()))
        links = []
        raw_links = spec.get("slow_links") or {}
        items = raw_links.items() if isinstance(raw_links, Mapping) else (
            (f"{e[0]}-{e[1]}", e[2]) if isinstance(e, (list, tuple)) and len(e) == 3 else (e, None)
            for e in _items(raw_links, f"{OPTION_FAULTS}.slow_links", "an object {\"src-dst\": factor} or a list of "
                            "[src, dst, factor]"))
        for key, factor in items:
            field = f"{OPTION_FAULTS}.slow_links[{_shown(key)}]"
            parts = str(key).split("-")
            if len(parts) != 2:
                raise ClusterOptionError(f"{field}: expected 'src-dst' ranks (or [src, dst, factor])")
            src, dst = (_rank(p, field, world_size) for p in parts)
            links.append((src, dst, _number(factor, field, 1e-3, 1.0, "a bandwidth factor in (0, 1]")))
        stall = spec.get("loader_stall") or {}
        if not isinstance(stall, Mapping):
            raise ClusterOptionError(f"{OPTION_FAULTS}.loader_stall: expected an object "
                                     '{"every": k, "us": t, "ranks": [..]}')
        every = _count(stall.get("every", 0), f"{OPTION_FAULTS}.loader_stall.every", 0, 10**9,
                       "a whole number of steps >= 0")
        stall_us = _number(stall.get("us", 0), f"{OPTION_FAULTS}.loader_stall.us", 0.0, 1e8, "microseconds >= 0")
        ranks = tuple(sorted(_rank(r, f"{OPTION_FAULTS}.loader_stall.ranks", world_size)
                             for r in _items(stall.get("ranks", []), f"{OPTION_FAULTS}.loader_stall.ranks",
                                             "a list of ranks")))
        skew = _number(spec.get("expert_skew", 0), f"{OPTION_FAULTS}.expert_skew", 0.0, MAX_EXPERT_SKEW,
                       f"a Zipf exponent in [0, {MAX_EXPERT_SKEW:g}] (0: balanced routing)")
        return cls(slow, tuple(sorted(links)), jitter, every, stall_us, ranks, skew)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (what ``parse`` reads and ``info.json`` records)."""
        out: dict[str, Any] = {}
        if self.slow_ranks:
            out["slow_ranks"] = {str(r): f for r, f in self.slow_ranks}
        if self.slow_links:
            out["slow_links"] = {f"{a}-{b}": f for a, b, f in self.slow_links}
        if self.host_jitter_us:
            out["host_jitter_us"] = {str(r): us for r, us in self.host_jitter_us}
        if self.loader_every:
            out["loader_stall"] = {"every": self.loader_every, "us": self.loader_stall_us,
                                   "ranks": list(self.loader_ranks)}
        if self.expert_skew:
            out["expert_skew"] = self.expert_skew
        return out


@dataclass(frozen=True)
class ClusterSpec:
    """How many ranks, how they are grouped into servers, the interconnect and the faults."""

    world_size: int
    ranks_per_node: int
    links: hccl.Links
    faults: Faults

    @classmethod
    def from_options(cls, options: Mapping[str, Any], preset: DevicePreset) -> "ClusterSpec | None":
        """The cluster of a session's (or GE's) options; ``None`` for one rank."""
        raw = options.get(OPTION_RANK_SIZE)
        if raw in (None, "", 1, "1"):
            return None
        world = _count(raw, OPTION_RANK_SIZE, 1, MAX_RANKS, f"an integer in [1, {MAX_RANKS}]")
        if world == 1:
            return None
        per_node = _count(options.get(OPTION_RANKS_PER_NODE, DEFAULT_RANKS_PER_NODE), OPTION_RANKS_PER_NODE, 1, 64,
                          "an integer in [1, 64]")
        faults = Faults.parse(options.get(OPTION_FAULTS), world)
        links = dataclasses.replace(device_links(preset), ranks_per_node=per_node, slow_links=faults.slow_links)
        return cls(world, per_node, links, faults)

    def info(self) -> dict[str, Any]:
        return {"world_size": self.world_size, "ranks_per_node": self.ranks_per_node,
                "faults": self.faults.to_dict()}


class _RankRun:
    """One rank's msprof library and device for the current run directory."""

    def __init__(self, lib: Msprof, runtime: DeviceRuntime) -> None:
        self.lib = lib
        self.runtime = runtime
        self.reporters: dict[int, StepReporter] = {}  # id(rank 0's model) -> its reporter on this rank's device


class RankGroup:
    """The other ranks of one loaded model: their step times and their reporting (the model's
    :class:`~.runtime.OtherRanks`).

    A graph every rank runs alike (data parallelism) is one stage of ``world_size`` ranks.  A parallel
    job's graph (``graph.job``, :mod:`.llm`) has a stage per pipeline stage: rank 0's model is stage 0,
    the other stages' graphs are built and compiled here, one build each for all the ranks of the stage.
    """

    def __init__(self, model: LoadedModel, spec: ClusterSpec) -> None:
        self.model = model
        self.spec = spec
        self.job = model.graph.job
        layout = self.job.layout(spec.ranks_per_node) if self.job is not None else None
        self.comm = CommGroups(spec.world_size, layout)
        self.stage_size = self.job.parallel.stage_size if self.job is not None else spec.world_size
        self.stages = spec.world_size // self.stage_size
        self.rng = np.random.default_rng(model.runtime.seed + 7919)
        self.slow = np.ones(spec.world_size)
        for r, f in spec.faults.slow_ranks:
            self.slow[r] = f
        self.stage_builds: dict[int, ModelBuild] = {}  # stage -> its build (stages 1 ..)
        self.steps: dict[tuple[int, ...], ClusterStep] = {}  # ids of the stages' tables -> their step
        self.builds: list[ModelBuild] = []  # every stage's build of the current batch
        self.times: list[StepTimes] | None = None  # per stage [K, ranks of the stage, T] of the current batch
        self.calls: np.ndarray | None = None  # [K, R] of the batch: each rank's run_graph call, after rank 0's
        self.returned_abs: np.ndarray | None = None  # [R] when each rank's last (synchronous) run returned

    def rank_info(self, rank: int) -> dict[str, Any]:
        """What ``rank``'s run records of the job (info.json ``parallel``): a parallel job's own account, or
        for data parallelism the sizes and the world group, as torch_npu's profiler records them."""
        spec = self.spec
        if self.job is not None:
            return self.job.rank_info(rank, spec.ranks_per_node, spec.faults.expert_skew)
        world = spec.world_size
        args = {**Parallel(dp=world).distributed_args(), "rank": rank}
        return {"distributed_args": args, "parallel_group_info": {WORLD_GROUP: {
            "group_name": WORLD_GROUP, "group_rank": rank, "global_ranks": list(range(world))}}}

    def where(self, rank: int) -> tuple[int, int]:
        """(stage, row) of a rank."""
        return divmod(rank, self.stage_size)

    # ------------------------------------------------------------------ times
    def _stage_build(self, stage: int) -> ModelBuild:
        """Stage ``stage``'s build, with the collection's trace points placed (as rank 0's model does on a
        new collection)."""
        rt = self.model.runtime
        build = self.stage_builds.get(stage)
        if build is None:
            graph = self.job.stage(stage).graph
            first = self.model.streams[0]
            streams = tuple(range(first, first + 1 + len(hccl_stream_keys(graph))))
            build = ModelBuilds(graph, rt.cost_model, streams, single_op=False).for_shapes(
                {}, describe=bool(GlobalProfilingWrapper.enable_flags & BIT_TASK_TIME))
            self.stage_builds[stage] = build
        if build.table is None or build.table_epoch != rt.epoch:
            build.table_epoch = rt.epoch
            props = ProfilingProperties.instance()
            build.place_trace_tasks(props.fp_point, props.bp_point, rt.preset)
        return build

    def _step(self, v: ModelBuild) -> ClusterStep:
        builds = [v] + [self._stage_build(s) for s in range(1, self.stages)]
        key = tuple(id(b.table) for b in builds)
        step = self.steps.get(key)
        if step is None:
            ranks = [np.arange(s * self.stage_size, (s + 1) * self.stage_size) for s in range(self.stages)]
            programs = stage_programs(builds, ranks, self.comm, self.spec.links, self.slow, self.job,
                                      self.spec.faults.expert_skew, self.model.runtime.cost_model)
            step = self.steps[key] = ClusterStep(programs)
        self.builds = builds
        return step

    def _delays(self, iteration: int) -> np.ndarray:
        """Each rank's injected delay (ns) before it starts step ``iteration`` (from 1)."""
        f = self.spec.faults
        delay = np.zeros(self.spec.world_size)
        for r, sd in f.host_jitter_us:
            delay[r] += abs(self.rng.standard_normal()) * sd * 1e3
        if f.loader_every and iteration % f.loader_every == 0:
            delay[list(f.loader_ranks) if f.loader_ranks else slice(None)] += f.loader_stall_us * 1e3
        return np.rint(delay).astype(np.int64)

    def next_times(self, v: ModelBuild, t0: int) -> tuple[StepTimes, int]:
        """Compute the next step on every rank; returns rank 0's batch and the step's index in it."""
        model = self.model
        ranks, n = self.spec.world_size, len(v.table)
        b = v.batch
        step = self._step(v)
        if b is None or b.next >= len(b.times.end) or self.times is None or self.times[0].start.shape[2] != n:
            model.flush_build(v)
            per_step = sum(self.stage_size * len(x.table) for x in self.builds)
            k = max(1, min(64, BATCH_ELEMENTS // max(1, per_step)))
            self.times = [StepTimes(np.zeros((k, self.stage_size, len(x.table)), np.int64),
                                    np.zeros((k, self.stage_size, len(x.table)), np.int64),
                                    np.zeros((k, self.stage_size, len(x.table)), np.int64),
                                    np.zeros((k, self.stage_size), np.int64)) for x in self.builds]
            self.calls = np.zeros((k, ranks), np.int64)
            tt = self.times[0]
            b = v.batch = StepBatch(StepTimes(tt.start[:, 0], tt.dur[:, 0], tt.block_cycles[:, 0], tt.end[:, 0]))
        k = b.next
        # Every rank's host runs rank 0's loop: between its previous run's return and this call it
        # does what rank 0's host did, so it calls as much after rank 0's call (t0 - launch latency)
        # as its previous run returned after rank 0's, and never before that run returned (run_graph
        # is synchronous).  Its device starts a launch latency after its call.  Rank 0's call is the
        # process's own (t0 already has its device free).
        lag = np.zeros(ranks, np.int64)
        if self.returned_abs is not None:
            lag = np.maximum(self.returned_abs - min(t0 - LAUNCH_LATENCY_NS, int(self.returned_abs[0])), 0)
            lag[0] = 0
        offsets = (lag + self._delays(model.iterations + 1)).reshape(self.stages, self.stage_size)
        stages = step.step(list(offsets), self.rng)
        for tt, st in zip(self.times, stages):
            tt.start[k], tt.dur[k], tt.block_cycles[k], tt.end[k] = st.start, st.dur, st.block_cycles, st.end
        self.calls[k] = lag
        self.returned_abs = t0 + np.concatenate([st.end for st in stages]) + SYNC_LATENCY_NS
        b.next += 1
        return b.times, k

    # -------------------------------------------------------------- reporting
    def report(self, v: ModelBuild, pending: PendingSteps, ks: np.ndarray, t0: np.ndarray,
               iterations: np.ndarray) -> None:
        """Report the pending steps of every rank but 0 (rank 0 reported them as the process's device)."""
        assert self.times is not None and self.calls is not None
        if msprof.lib.discarding:  # a step schedule's warmup window: no rank keeps it
            return
        self._report_ranks(pending, ks, t0, iterations)

    def _report_ranks(self, pending: PendingSteps, ks: np.ndarray, t0: np.ndarray, iterations: np.ndarray) -> None:
        switch = msprof.lib.switch
        runs = cluster_runs.ranks(self.spec, self.model.runtime)
        for r, run in runs.items():
            stage, row = self.where(r)
            build, tt = self.builds[stage], self.times[stage]
            reporter = run.reporters.get(id(self.model))
            if reporter is None:
                reporter = run.reporters[id(self.model)] = self.model.reporter.on_device(run.runtime)
                reporter.parallel_info = self.rank_info(r)
            with msprof.reporting_to(run.lib):
                if not run.lib.started:
                    run.lib.start(switch)
                reporter.report_steps(build, pending.flags, t0[:, None] + tt.start[ks, row], tt.dur[ks, row],
                                      tt.block_cycles[ks, row], iterations)
                if pending.flags & BIT_TASK_TIME:  # each rank's own host launched its model (ModelExecute)
                    report_api_block(ReportLevel.MODEL, np.full(len(ks), int(ModelInfoType.EXECUTE)),
                                     t0 + self.calls[ks, r] - LAUNCH_LATENCY_NS,
                                     t0 + tt.end[ks, row] + SYNC_LATENCY_NS, np.full(len(ks), self.model.model_id))
            run.lib.flush()  # a thousand ranks' buffers would not fit in memory until the end


def _cluster_dir_name(run_name: str) -> str:
    """The root of the cluster whose rank 0 run is ``run_name``: numbered as that run (which moves into it), so
    it takes that run's place in its output directory's creation order (:func:`~..prof.rawdata.creation_order`)."""
    now = time.time()
    stamp = time.strftime("%Y%m%d%H%M%S", time.localtime(now)) + f"{int(now * 1000) % 1000:03d}"
    order = rawdata.creation_order(run_name)
    seq = f"{order[0]:06d}_" if order else ""
    return f"CLUSTER_{seq}{stamp}_{''.join(random.choices(string.ascii_uppercase, k=8))}"


class _OpenCluster:
    """The other ranks' runs of one run of rank 0, under the cluster root; they end with rank 0's run."""

    def __init__(self, serial: int, spec: ClusterSpec, root: Path) -> None:
        self.serial = serial
        self.spec = spec
        self.root = root
        self.runs: dict[int, _RankRun] = {}

    def finalize(self, status: str, note: str) -> str:
        """Rank 0's run is over: close every rank's run (rank 0's pending steps reached every rank when it
        stopped) and let go of their libraries and devices; returns what they could not write ("" if all)."""
        problems = []
        for run in self.runs.values():
            run.lib.finalize(status, note)
            problems.append(run.lib.write_problem)
        self.runs = {}
        # the ranks of a stage wrote the same static descriptions and names: each kept on disk once
        runs = sorted(self.root.glob("rank_*/PROF_*"), key=lambda p: int(p.parent.name[5:]))
        hash_dict.share_lines(runs)
        shared_files.link_identical(runs)
        return "\n".join(p for p in problems if p)


class ClusterRuns:
    """The other ranks' run directories of the current msprof run (one set per run of rank 0)."""

    def __init__(self) -> None:
        self._open: _OpenCluster | None = None

    def ranks(self, spec: ClusterSpec, runtime: DeviceRuntime) -> dict[int, _RankRun]:
        """Open (once per run of rank 0) a library and a device per rank, under the cluster root.

        The cluster root is chosen now, beside rank 0's run directory, and rank 0's run moves into
        its ``rank_0/`` at once: from here on every rank's data is where ``geprof_nb.load(root)``
        reads it, also if the process dies before the run is finalised.
        """
        lib0 = msprof.lib
        cluster = self._open
        if cluster is not None and cluster.serial == lib0.run_serial:
            if cluster.spec == spec:
                return cluster.runs
            raise ClusterOptionError(f"one profiling run holds one cluster: this run already simulates "
                                     f"{cluster.spec.world_size} ranks; finish it before running {spec.world_size}")
        assert lib0.run_dir is not None
        root = lib0.run_dir.parent / _cluster_dir_name(lib0.run_dir.name)
        cluster = self._open = _OpenCluster(lib0.run_serial, spec, root)
        try:
            root.mkdir()
            try:
                lib0.move_into(root / "rank_0")
            except OSError:
                root.rmdir()
                raise
        except OSError as exc:  # a full disk: rank 0's run goes on alone where it is, the others are counted
            lib0.count_unwritten(rawdata.RANKS_KIND, spec.world_size - 1, root.name, exc)
            return cluster.runs
        lib0.part_of(root, [cluster])
        info = spec.info()
        lib0.set_run_info("cluster", {"rank": 0, **info, "root": str(root)})
        for r in range(1, spec.world_size):
            lib = Msprof()
            try:
                lib.init(root / f"rank_{r}", lib0.options, mode="cluster_rank", restart_clock=False)
            except OSError as exc:  # this rank's run directory cannot be made: counted, the others go on
                lib0.count_unwritten(rawdata.RANKS_KIND, 1, f"{root.name}/rank_{r}", exc)
                continue
            rt = DeviceRuntime(runtime.preset, device_id=r % spec.ranks_per_node, seed=runtime.seed + r)
            rt.rank, rt.device_count, rt.epoch = r, spec.world_size, 1
            lib.set_run_info("cluster", {"rank": r, **info, "root": str(root)})
            lib.set_device_info(rt.device_id, runtime.preset.info())
            with msprof.reporting_to(lib):  # counters programmed, and described in info.json, as rank 0's
                rt.program_pmu(ProfilingProperties.instance().aic_metrics)
            for level, types in type_names().items():  # the API names of this rank's host records
                for type_id, type_name in types.items():
                    lib.register_type_info(level, type_id, type_name)
            lib.start(lib0.switch)
            cluster.runs[r] = _RankRun(lib, rt)
        return cluster.runs


#: The process's cluster run directories (like ``msprof.lib``, one per process).
cluster_runs = ClusterRuns()
