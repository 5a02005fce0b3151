"""``Profile``: one profiling run as pandas tables, built lazily and cached."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .arguments import integer, member
from .rundir import RunDir
from .sources.source import OP_STATISTIC_L0_NOTE, TIMESTAMP_COLUMNS, RunDirSource, Source
from .tables import breakdown, memory, serving, summary
from .tables import mfu as mfu_tables
from .tables import roofline as roofline_tables
from .tables.modules import module_statistic
from .tables.step_split import StepSplit, step_split
from .timing.dependency_graph import StepGraph, Tasks, run_tasks, step_graphs

if TYPE_CHECKING:
    from .timing.what_if import WhatIf


class Profile:
    """The tables of one run (msprof column names; see :mod:`.tables.summary` for dtypes).

    Built on a :class:`~.sources.source.Source`: a geprof run directory, or imported
    msprof / torch_npu output.
    """

    def __init__(self, source: Source | RunDir, device_id: int = 0) -> None:
        self.source = RunDirSource(source, device_id) if isinstance(source, RunDir) else source

    # ----------------------------------------------------------------- identity
    @property
    def run(self) -> RunDir:
        """The raw run directory (geprof runs only)."""
        if not isinstance(self.source, RunDirSource):
            raise AttributeError(f"{self.name} was imported from {type(self.source).__name__}: it has no raw records")
        return self.source.run

    @property
    def device_id(self) -> int:
        return self.source.device_id

    @property
    def path(self) -> Path:
        return self.source.path

    @property
    def name(self) -> str:
        return self.source.name

    @property
    def info(self) -> dict:
        return self.source.info

    @property
    def options(self) -> dict:
        """The profilingOptions in force (non-default fields and ``output``)."""
        return self.source.options

    @property
    def device(self) -> dict:
        return self.source.device

    @property
    def complete(self) -> bool:
        """False if the run was not finalised (crash, kill): tables hold what was flushed."""
        return self.source.complete

    @property
    def notes(self) -> list[str]:
        """What a reader should know about this run: incomplete, aged-out or dropped data, FP/BP points,
        tables a task_trace l0 run leaves empty."""
        notes = self.source.notes()
        if self.source.task_level == "l0":
            notes.append(OP_STATISTIC_L0_NOTE)
        return notes

    @cached_property
    def forward_only_models(self) -> frozenset[int]:
        """The Model IDs whose steps run forward only (inference): their step_trace's FP to BP is the forward
        pass and Iteration Refresh what follows it, not a backward pass and an update.  Empty for imported
        data, which does not say."""
        return self.source.forward_only_models()

    @cached_property
    def model_phases(self) -> dict[int, str]:
        """The inference engine step (``prefill``, ``decode``) of each Model ID of a serving run (``ge.serve``,
        ``ge.models.llm(phase=...)``): the name its steps and ops' phase are shown with.  Empty otherwise."""
        return self.source.model_phases()

    @property
    def dropped(self) -> dict[str, int]:
        """Records lost to full buffers or storage_limit aging, by kind (empty if none)."""
        return self.source.dropped()

    # ------------------------------------------------------------------- tables
    @cached_property
    def _op_rows(self) -> summary.OpRows:
        return self.source.op_rows()

    @property
    def op_summary(self) -> pd.DataFrame:
        """One row per executed op task, sorted by start time (msprof ``op_summary``)."""
        return self._op_rows.frame

    def times_ns(self, table: str) -> pd.DataFrame:
        """The exact integer ns of ``table``'s timestamp columns (same rows, same column names).

        The tables give times as msprof does, in float us; at today's epoch (~1.8e15 us) a float
        cannot tell apart times closer than 0.25 us, so two tasks that touch can look 0.25 us apart
        or overlapping.  These are the recorded ns (``<NA>`` where the table has NaN); imported data
        has what its files printed.
        """
        if table not in TIMESTAMP_COLUMNS:
            raise ValueError(f"table {table!r} has no timestamp columns; tables with them: "
                             f"{', '.join(TIMESTAMP_COLUMNS)}")
        return self.source.times_ns(table, getattr(self, table))

    @cached_property
    def op_statistic(self) -> pd.DataFrame:
        """Per OP Type and Core Type totals, largest first (msprof ``op_statistic``).

        Empty (with its columns) for ``task_trace`` l0 data, as msprof writes no op_statistic
        there: l0 has no OP Type or Task Type (see :attr:`notes`)."""
        return self.source.op_statistic()

    @cached_property
    def step_trace(self) -> pd.DataFrame:
        """One row per iteration from the ProfilerTrace timestamps (msprof ``step_trace``)."""
        return self.source.step_trace()

    @cached_property
    def task_time(self) -> pd.DataFrame:
        """Every executed device task, kernels and runtime tasks (msprof ``task_time``)."""
        return self.source.task_time()

    @cached_property
    def api_statistic(self) -> pd.DataFrame:
        """Host API calls per level and name (msprof ``api_statistic``)."""
        return self.source.api_statistic()

    @cached_property
    def host_events(self) -> pd.DataFrame:
        """GE host profiler spans: InferShape, Tiling, AllocMemory, rtKernelLaunch, ... per node."""
        return self.source.host_events()

    @cached_property
    def msprof_tx(self) -> pd.DataFrame:
        """User markers and ranges (``ge.mstx``; msprof ``msprof_tx``)."""
        return self.source.msprof_tx()

    @cached_property
    def serving_requests(self) -> pd.DataFrame:
        """A serving run's requests (``ge.serve``): arrival, first token and finish (us), TTFT, TPOT and
        end-to-end latency (ms), prompt and output tokens, preemptions; empty for other runs."""
        return self.source.serving_requests()

    @cached_property
    def serving_steps(self) -> pd.DataFrame:
        """A serving run's engine steps: phase mix (prefill tokens and sequences, decode sequences), batch
        size, step time, KV-cache blocks used and free, and the step split into compute, exposed
        communication and host time (ms); empty for other runs."""
        return self.source.serving_steps()

    def serving_summary(self, ttft_slo_ms: float | None = None, tpot_slo_ms: float | None = None) -> pd.Series:
        """TTFT / TPOT / end-to-end p50, p90, p99 (ms), output tokens/s and requests/s, and goodput: the
        requests/s that met ``ttft_slo_ms`` and ``tpot_slo_ms`` (an objective not given is met)."""
        return serving.serving_summary(self.serving_requests, ttft_slo_ms, tpot_slo_ms)

    @cached_property
    def communication_statistic(self) -> pd.DataFrame:
        """Per collective type: count and times (msprof ``communication_statistic``)."""
        return self.source.communication_statistic()

    @cached_property
    def hccl_tasks(self) -> pd.DataFrame:
        """Every HCCL sub-task (Notify_Wait, Memcpy, Reduce_Inline, ...) with size and bandwidth."""
        return self.source.hccl_tasks()

    @cached_property
    def communication_time(self) -> pd.DataFrame:
        """Per collective execution: elapse, transit, wait, synchronization, idle (msprof-analyze)."""
        return self.source.communication_time()

    @cached_property
    def aicpu(self) -> pd.DataFrame:
        """AI CPU kernel details (msprof ``aicpu``)."""
        return self.source.aicpu()

    @cached_property
    def operator_memory(self) -> pd.DataFrame:
        """One row per tensor allocation of the static memory plan (torch_npu ``operator_memory.csv``)."""
        return self.source.operator_memory()

    @cached_property
    def memory_record(self) -> pd.DataFrame:
        """Pool totals after every allocation and release (torch_npu ``memory_record.csv``)."""
        return self.source.memory_record()

    @cached_property
    def tensor_lifetimes(self) -> pd.DataFrame:
        """``operator_memory``'s allocations with ``Model ID`` and ``Address`` (byte offset in the
        model's pool), for offset-against-time plots; empty for imported data (no addresses)."""
        return self.source.tensor_lifetimes()

    @property
    def memory_peak(self) -> memory.MemoryPeak | None:
        """The highest allocated total, when, and the tensor whose allocation reached it."""
        return self.source.memory_peak()

    def step_memory(self, iteration: int | None) -> memory.StepMemory:
        """One step's rows of operator_memory, memory_record and tensor_lifetimes and its own peak,
        built from that step's records only (a long run's whole tables have millions of rows).
        The whole tables (``StepMemory.iteration`` None) for ``iteration=None``, for imported data
        (its tables do not tell steps apart) and for a device that runs several models.
        An iteration the run does not have is a ValueError listing those it has."""
        step = self.source.step_memory(self._iteration(iteration)) if iteration is not None else None
        if step is not None:
            return step
        return memory.StepMemory(None, self.operator_memory, self.memory_record, self.tensor_lifetimes,
                                 self.memory_peak)

    @cached_property
    def step_breakdown(self) -> pd.DataFrame:
        """Per step: Computing, Communication(Not Overlapped), Overlapped, Communication, Free, ...
        (torch_npu ``step_trace_time.csv``, us)."""
        recorded = self.source.step_breakdown_table()
        if recorded is not None:  # torch_npu's own split uses data the op rows do not carry
            return recorded
        return breakdown.step_breakdown(self.source.span_rows(), self.source.step_bounds(), self.device_id,
                                        self.source.communication_rows())

    @cached_property
    def step_split(self) -> StepSplit | None:
        """The step figure every summary leads with: the mean typical step period and its split
        (``split.headline()``: "step X ms = Computing a% / exposed Communication b% / Free c%"), the
        outlier steps it leaves out (:mod:`.step_split`); ``None`` without a step_breakdown."""
        return step_split(self.step_breakdown, self.source.step_bounds())

    def module_statistic(self, depth: int = 2) -> pd.DataFrame:
        """Device time per module path cut at ``depth`` (2: ``model/layers.12``; 3: its ``self_attn`` and
        ``mlp``) and phase (forward, backward: gradients rolled up to their op's module, optimizer; a serving
        run's forward ops prefill or decode, :attr:`model_phases`), over the
        whole run: op task count, total, mean and communication time (us), share of all op tasks' time (the
        shares add up to 100).  Modules come from the op names (:mod:`.tables.modules`)."""
        return module_statistic(self.op_summary, self.source.communication_rows(), depth, self.model_phases)

    def mfu(self, model: Mapping | None = None, peak_flops: float | None = None) -> pd.DataFrame:
        """Per step: the job's model FLOPs (``6 N + 12 L h s`` per token, :mod:`.tables.mfu`), the FLOP/s each
        device achieved in this rank's step time and the MFU against the device's cube peak.  The model's
        facts are the ones info.json records (``parallel.model``); ``model`` gives or replaces them (a real
        run records none), ``peak_flops`` replaces the peak (FLOP/s of one device).  A ValueError names a missing
        fact."""
        facts = mfu_tables.model_facts(self.info, model)
        return mfu_tables.mfu_table(self.step_breakdown, self.source.step_bounds(), facts,
                                    mfu_tables.peak_flops(self.device, peak_flops))

    @cached_property
    def _roofline(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        roofs = roofline_tables.device_roofs(self.device)
        return roofline_tables.roofline_tables(self.op_summary, self.source.op_work(roofs), roofs)

    @property
    def roofline(self) -> pd.DataFrame:
        """Per AI Core / AI Vector Core op (all its recorded executions): FLOPs, bytes, arithmetic intensity,
        achieved FLOP/s and bytes/s, the attainable bound from the device's cube and vector peaks and HBM
        bandwidth, which bound applies and the efficiency against it (:mod:`.tables.roofline`; docs/roofline.md).
        ``attrs["roofs"]``: the device's roofs; ``attrs["notes"]``: where the numbers come from, what is
        estimated.  Longest first; empty (with its columns) if the run holds no FLOPs or bytes."""
        return self._roofline[0]

    @property
    def roofline_by_type(self) -> pd.DataFrame:
        """:attr:`roofline` rolled up per OP Type (``Ops``: how many ops of the type)."""
        return self._roofline[1]

    @property
    def iteration_of_ops(self) -> pd.Series:
        """The Iteration ID of every op_summary row (aligned with its index)."""
        return pd.Series(self._op_rows.iteration, index=self.op_summary.index, name="Iteration ID")

    def ops(self, iteration: int | None = None, model_id: int | None = None) -> pd.DataFrame:
        """op_summary rows of one iteration (the last one if ``None``; all of them, none, in a run
        without op data).  An iteration the run does not have is a ValueError listing those it has.

        Each model counts its own iterations (a run that trains one graph and evaluates another has an
        iteration 3 of each), and the rows are every model's unless ``model_id`` names one: then its
        rows only, ``None`` meaning its last iteration.  A model id the run does not have is a
        ValueError listing those it has."""
        rows, its = self.op_summary, self._op_rows.iteration
        if model_id is not None:
            if "Model ID" not in rows.columns:
                raise ValueError(f"model_id {model_id!r}: this run's op_summary has no Model ID column "
                                 "(torch_npu's kernel_details has none); accepted: None")
            models = rows["Model ID"].to_numpy(np.int64)
            mine = models == member("model_id", model_id, np.unique(models), "this run", "model ids")
            rows, its = rows[mine], its[mine]
            if iteration is not None:
                number = member("iteration", iteration, np.unique(its), f"model {model_id}", "iterations")
                return rows[its == number]
        if iteration is None:
            return rows[its == its.max()] if len(its) else rows
        return rows[its == self._iteration(iteration)]

    def _iteration(self, iteration: object) -> int:
        """``iteration`` as an int if the run has it: op data in it, or a step trace row (a step
        whose tasks were not recorded has one); else a TypeError or ValueError naming ``iteration``."""
        number = integer("iteration", iteration)
        if number in self.iterations:
            return number
        steps = np.union1d(self.iterations, self.step_trace["Iteration ID"].to_numpy(np.int64))
        return member("iteration", number, steps, "this run", "iterations")

    @property
    def iterations(self) -> np.ndarray:
        """Iteration IDs that have op data."""
        return np.unique(self._op_rows.iteration)

    @cached_property
    def no_step_ran(self) -> bool:
        """Profiling collected with a device layer on (task_trace or training_trace), yet the device recorded
        nothing and nothing was lost: no step ran while it collected.  False for imported data, which has
        no record counts to tell by."""
        records = self.info.get("records")
        if not isinstance(records, dict) or len(self.op_summary) or len(self.step_trace) or sum(self.dropped.values()):
            return False
        device_on = self.options.get("task_trace", "on") != "off" or self.options.get("training_trace") == "on"
        device_records = sum(int(n) for kind, n in records.items() if kind.split("@")[0] in ("hwts", "step_trace"))
        return device_on and device_records == 0

    @cached_property
    def first_step_ns(self) -> int | None:
        """When the run's first step began (ns, from its step bounds); None without steps."""
        bounds = self.source.step_bounds()
        return int(bounds["begin"].min()) if len(bounds) else None

    @cached_property
    def first_task_ns(self) -> int | None:
        """The first op task's start (ns); None without op tasks."""
        starts = self._op_rows.start_ns
        return int(np.min(starts)) if len(starts) else None

    @property
    def time_origin_ns(self) -> int | None:
        """The time every relative time of the run is measured from (the explorer's tables, the timeline):
        its first step's start, else its first op task's; None for a run without either."""
        return self.first_step_ns if self.first_step_ns is not None else self.first_task_ns

    @property
    def iteration_count(self) -> int:
        """How many iterations the run has: those with op data, or without task data (task_trace off,
        every task record lost) the step trace's rows."""
        return len(self.iterations) or len(self.step_trace)

    # ------------------------------------------------------------ step timing
    #: Re-runs this run's model under a what-if change (set by whoever simulated it; None for a loaded run).
    replay: Callable[..., Profile] | None = None

    @cached_property
    def step_graphs(self) -> tuple[Tasks, list[StepGraph]]:
        """The run's tasks and each step's dependency graph (:mod:`.timing.dependency_graph`), built once."""
        tasks = run_tasks(self)
        return tasks, step_graphs(tasks, self.source.step_bounds())

    def critical_path(self, iteration: int | None = None) -> pd.DataFrame:
        """The chain of tasks, waits and gaps that sets each step's length (``iteration``: one step; None: all):
        one row per segment (iteration, start, end, duration in ns, kind: compute / communication / host / wait /
        idle, op name and type, task type, stream, task id).  Each step's segments add up to its step time
        exactly; ``attrs["assumptions"]`` says how the dependencies were read (:mod:`.timing.dependency_graph`)."""
        from .timing.critical_path import frame, step_path

        tasks, graphs = self.step_graphs
        if iteration is not None:
            number = self._iteration(iteration)
            graphs = [g for g in graphs if g.iteration == number]
        return frame([row for g in graphs for row in step_path(g, tasks)], tasks)

    @property
    def critical_path_summary(self) -> pd.DataFrame:
        """Per step: its length, the critical path's time by kind (ns) and the ops with the most time on it."""
        from .timing.critical_path import summary

        return summary(self.critical_path())

    def what_if(self, *, op_speedup: Mapping[str, float] | None = None, remove_ops: list[str] | None = None,
                link_bandwidth: Mapping[str, float] | None = None, device: str | None = None,
                host_gap_us: float | None = None) -> WhatIf:
        """What every step would take under a change, by re-timing its dependency graph (the model is not re-run):
        ``op_speedup`` {pattern: factor} (fnmatch on op type or name), ``remove_ops`` [pattern], ``link_bandwidth``
        {link type: factor}, ``device`` (every kernel re-costed on another device: a preset or a preset with changed
        fields, ``"Ascend910B:ai_core_num=20"``), ``host_gap_us`` (cap on the device's waits for the host).  See
        :mod:`.timing.what_if` and :mod:`.timing.device_change`."""
        from .timing.device_change import device_durations
        from .timing.what_if import WhatIf, link_shares, validate

        change = validate(op_speedup, remove_ops, link_bandwidth, device, host_gap_us)
        tasks, graphs = self.step_graphs
        shares = link_shares(self.hccl_tasks) if change.link_bandwidth else {}
        device_ns = None if change.device is None else device_durations(change.device, self.device, tasks,
                                                                        self.source.cost_terms())
        return WhatIf(self, change, tasks, graphs, shares, device_ns)

    def slow_steps(self, threshold: float = 0.1) -> pd.DataFrame:
        """Steps longer than the median step by more than ``threshold`` (0.1: 10 %), slowest first: iteration,
        step_ns, median_ns, excess_ns, excess (fraction)."""
        from .timing.step_anomalies import slow_steps

        return slow_steps(self.critical_path(), threshold)

    def explain_step(self, n: int) -> pd.DataFrame:
        """What made step ``n`` longer (or shorter) than the median step: per kind and op (waits, host gaps, idle
        gaps) on the critical path, its time in both and the delta; the deltas add up to the difference exactly
        (``attrs["reference_step"]``: the median step compared with)."""
        from .timing.step_anomalies import explain_step, median_step

        number = self._iteration(n)
        path = self.critical_path()
        return explain_step(path, number, median_step(path))

    # ---------------------------------------------------------------- actions
    def export(self, path: str | Path, format: str = "msprof", **options) -> Path:  # noqa: A002
        """Write the run in a real tool's format: ``msprof``, ``ascend_pt``, ``chrome`` or ``parquet``."""
        from .export import export_profile

        return export_profile(self, Path(path), format, **options)

    def advise(self) -> pd.DataFrame:
        """Findings ranked High/Medium/Low, each with evidence and a suggestion."""
        from .findings.advisor import advise

        return advise(self)

    def __repr__(self) -> str:
        state = "" if self.complete else " (incomplete)"
        steps = self.iteration_count
        return f"<geprof Profile {self.name}{state}: {len(self.op_summary)} op tasks, {steps} iterations>"

