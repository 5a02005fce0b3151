"""``ClusterProfile``: the ranks of one distributed run, one :class:`~..profile.Profile` each,
and the tables that compare them.

Made by :func:`geprof_nb.load` from a directory of ``*_ascend_pt`` runs (rank from
``profiler_info_<rank>.json``), of ``rank<N>`` / ``rank_<N>`` run directories (a simulated
cluster's ``CLUSTER_*`` root) or of such directories holding Parquet exports.

The cross-rank questions (which card is slow, which link is slow, how long ranks wait for
each other) are answered by the tables of :mod:`.cross_rank`, computed by an engine:

* ``pandas`` (the default) stacks the ranks' Profile tables in this process;
* ``dask`` (:mod:`.dask_engine`) reads every rank's tables lazily on the workers of a Dask
  cluster (from its run directory or Parquet export) and reduces the large ones (the HCCL
  sub-tasks) there, for clusters whose profiles do not fit one machine's memory.

Both give equal frames.  Findings for the whole cluster come from :meth:`ClusterProfile.advise`
(:mod:`..findings.cluster_advisor`).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import pandas as pd

from ..arguments import integer, member
from ..sources.ascend_pt import AscendPtSource
from ..tables import mfu as mfu_tables
from ..tables.breakdown import whole_periods
from ..tables.communication import COMMUNICATION_MATRIX_LINKS
from ..tables.modules import COLUMNS as MODULE_COLUMNS
from ..tables.step_split import StepSplit, step_split
from . import cross_rank as T
from . import parallelism as H
from .rank_tables import RANK_TABLES, stack

if TYPE_CHECKING:
    from ..profile import Profile

ENGINES = ("pandas", "dask")
#: The stacked per-rank tables the cross-rank analysis reads.
INPUT_TABLES = ("step_breakdown", "communication_time", "hccl_tasks")


class PandasInputs:
    """The ranks' tables stacked in memory, ``Rank`` first (the pandas engine's inputs)."""

    engine = "pandas"

    def __init__(self, ranks: dict[int, Profile]) -> None:
        self.ranks = ranks

    def stacked(self, table: str, columns: list[str] | None = None) -> pd.DataFrame:
        """Every rank's ``table`` (only ``columns`` if given) with a ``Rank`` column in front."""
        return stack({r: getattr(p, table) for r, p in self.ranks.items()}, columns)

    def small(self, name: str) -> dict[int, Any]:
        """rank -> its :data:`.rank_tables.RANK_TABLES` ``name``, from the Profiles here."""
        return {r: RANK_TABLES[name](r, p) for r, p in self.ranks.items()}

    def compute(self, frame: pd.DataFrame) -> pd.DataFrame:
        return frame


class ClusterTables:
    """The cross-rank tables of one engine's inputs, each computed once when first read.

    ``inputs`` provides ``small(name)`` (rank -> its small table ``name`` of :data:`.rank_tables.RANK_TABLES`:
    step_breakdown, communication_time, pipeline passes, groups, step bounds, facts), ``stacked(table,
    columns)`` (pandas or Dask frames of a large table) and ``compute(frame)`` (a pandas frame); the
    reductions of :mod:`.cross_rank` run on the stacked frames, the finishing steps on the computed results.
    ``recorded_links`` gives the links torch_npu ranks recorded instead of sub-tasks
    (:meth:`ClusterProfile.recorded_links`), ``stages`` each rank's pipeline stage
    (:meth:`ClusterProfile.pipeline_stages`: slow_ranks compares a rank with its own stage); both are small
    and read the same for either engine.
    """

    def __init__(self, inputs: Any, slow_rank_threshold: float = T.SLOW_RANK_THRESHOLD,
                 slow_link_threshold: float = T.SLOW_LINK_THRESHOLD,
                 recorded_links: Callable[[], pd.DataFrame] | None = None,
                 stages: Callable[[], dict[int, int]] | None = None) -> None:
        self.inputs = inputs
        self.stages = stages
        self.recorded_links = recorded_links
        self.slow_rank_threshold = slow_rank_threshold
        self.slow_link_threshold = slow_link_threshold

    @property
    def engine(self) -> str:
        return self.inputs.engine

    @cached_property
    def cluster_step_trace_time(self) -> pd.DataFrame:
        """msprof-analyze's ``cluster_step_trace_time.csv``: Step, Type, Index, Computing, ... per rank and step."""
        return T.cluster_step_trace_time(stack(self.inputs.small("step_breakdown")))

    @cached_property
    def communication_time(self) -> pd.DataFrame:
        """Every rank's collectives: elapse, transit, wait, synchronization (ms), ``Rank`` first."""
        return T.cluster_communication_time(stack(self.inputs.small("communication_time")))

    @cached_property
    def rank_step_wait(self) -> pd.DataFrame:
        """Per rank and step: collectives and their elapse / transit / wait / synchronization time (us).  Summed
        from :attr:`communication_time` (one row per collective execution and rank, in each rank's time order,
        as each rank's table has them): that table comes back to this process anyway, and summing it here
        costs less than building every rank's collectives a second time."""
        return T.rank_step_wait(T.rank_step_wait_totals(self.communication_time))

    @cached_property
    def stragglers(self) -> pd.DataFrame:
        """Per collective execution: the rank that arrived last, and by how much."""
        return T.stragglers(self.communication_time)

    @cached_property
    def step_bounds(self) -> dict[int, pd.DataFrame]:
        """Each rank's step bounds (which of its steps are whole step periods)."""
        return self.inputs.small("step_bounds")

    @cached_property
    def step_periods(self) -> pd.DataFrame:
        """cluster_step_trace_time's rows that are whole step periods (:func:`.cross_rank.whole_step_periods`):
        what per-step means count."""
        return T.whole_step_periods(self.cluster_step_trace_time, self.step_bounds)

    @cached_property
    def rank_step_splits(self) -> dict[int, StepSplit]:
        """Each rank's step figure (:mod:`.step_split`) of its cluster_step_trace_time rows: its typical
        step and the outlier steps it leaves out."""
        rows = self.cluster_step_trace_time
        rows = rows[rows["Type"] == "rank"]
        bounds = self.step_bounds
        none = pd.DataFrame(columns=["step", "begin", "end"])
        splits = {int(r): step_split(g, bounds.get(int(r), none)) for r, g in rows.groupby("Index", sort=True)}
        return {r: s for r, s in splits.items() if s is not None}

    @cached_property
    def outlier_steps(self) -> list[int]:
        """Steps that are an outlier on any rank (with synchronised collectives a stall on one rank makes
        the step long on all): no per-step mean of the cluster counts them."""
        return sorted({o.step for s in self.rank_step_splits.values() for o in s.outliers})

    @cached_property
    def typical_periods(self) -> pd.DataFrame:
        """:attr:`step_periods` without the :attr:`outlier_steps`: what the cluster's per-step means count."""
        periods = self.step_periods
        return periods[~periods["Step"].isin(self.outlier_steps)]

    @cached_property
    def slow_ranks(self) -> pd.DataFrame:
        """Ranks by own time (Computing + Free per step: step time minus the communication no compute
        hides), slowest first, with ratios to the median; over the typical steps (:attr:`typical_periods`),
        so a one-off stall does not make its rank slow."""
        return T.slow_ranks(self.typical_periods, self.rank_step_wait, self.typical_stragglers,
                            self.slow_rank_threshold, self.stages() if self.stages else None)

    @cached_property
    def typical_stragglers(self) -> pd.DataFrame:
        """:attr:`stragglers` without the collectives of the :attr:`outlier_steps`."""
        st = self.stragglers
        return st[~st["Iteration ID"].isin(self.outlier_steps)] if len(st) else st

    @cached_property
    def communication_matrix(self) -> pd.DataFrame:
        """Per (src rank, dst rank, link type, transport): transit tasks, bytes, time, bandwidth."""
        stacked = self.inputs.stacked("hccl_tasks", T.HCCL_COLUMNS)
        totals = self.inputs.compute(T.link_totals(stacked))
        if self.recorded_links is not None:
            totals = T.with_recorded_links(totals, T.recorded_link_totals(self.recorded_links()))
        return T.communication_matrix(totals)

    @cached_property
    def slow_links(self) -> pd.DataFrame:
        """Links whose bandwidth is well below the median of their link type, slowest first."""
        return T.slow_links(self.communication_matrix, self.slow_link_threshold)

    @cached_property
    def communication_groups(self) -> pd.DataFrame:
        """Every communication group of the job (:func:`.parallelism.communication_groups`)."""
        return H.communication_groups(row for rows in self.inputs.small("groups").values() for row in rows)

    @cached_property
    def pipeline(self) -> pd.DataFrame:
        """Per rank (and its stage), step, micro-batch and direction: the pipeline pass's start and end (us)."""
        return H.pipeline(self.inputs.small("passes").values())

    @cached_property
    def pipeline_bubbles(self) -> pd.DataFrame:
        """Per pipeline stage: the bubble per step and its shares (:func:`.parallelism.pipeline_bubbles`), the
        step's time its longest rank's."""
        times: dict[int, float] = {}
        for b in self.step_bounds.values():
            for step, us in zip(b["step"].astype(int), (b["end"] - b["begin"]).to_numpy(float) / 1000):
                times[int(step)] = max(times.get(int(step), 0.0), float(us))
        facts = next((f for f in self.inputs.small("facts").values() if f), {})
        return H.pipeline_bubbles(self.pipeline, times, H.ideal_bubble_ratio(facts))

    def rank_step(self, metric: str = "Stage") -> pd.DataFrame:
        """A rank x step matrix of ``metric``: a cluster_step_trace_time column (``Stage`` = step time,
        ``Computing``, ``Free``, ...) or a rank_step_wait one (``Wait Time(us)``, ...)."""
        if metric in T.RANK_STEP_WAIT:
            return T.rank_step(self.cluster_step_trace_time, self.rank_step_wait, metric)
        return T.rank_step(self.cluster_step_trace_time, T.rank_step_wait(pd.DataFrame()), metric)

    #: the tables, in the order a report shows them
    NAMES = ("cluster_step_trace_time", "slow_ranks", "stragglers", "rank_step_wait", "communication_time",
             "communication_matrix", "slow_links")

    def all(self) -> dict[str, pd.DataFrame]:
        """Every table by name (computes what has not been)."""
        return {name: getattr(self, name) for name in self.NAMES}


class ClusterProfile:
    """Several ranks of one run: ``ranks`` (rank -> Profile) and the tables across them.

    ``engine``: ``"pandas"`` (default) or ``"dask"``; ``scheduler`` (Dask only): a
    ``distributed.Client``, a scheduler address such as ``"tcp://host:8786"``, or a local
    scheduler name (``"threads"``, ``"sync"``); None uses Dask's default (the active Client if
    there is one).  ``parquet_dir`` (Dask only): where the ranks that are not Parquet exports already
    are exported first, for the workers to read; without it the workers read geprof run directories
    themselves, and other formats go to a temporary directory (workers on other machines need a
    shared path either way).
    """

    def __init__(self, path: Path, ranks: dict[int, Profile], notes: list[str] | None = None, *,
                 engine: str = "pandas", scheduler: Any = None, parquet_dir: str | Path | None = None) -> None:
        self.path = Path(path)
        self.ranks = dict(sorted(ranks.items()))
        self.notes = list(notes or [])
        self.engine = _check_engine(engine)
        self.scheduler = scheduler
        self.parquet_dir = parquet_dir
        self._tables: dict[tuple, ClusterTables] = {}

    @property
    def name(self) -> str:
        return self.path.name

    def with_engine(self, engine: str = "pandas", scheduler: Any = None,
                    parquet_dir: str | Path | None = None) -> ClusterProfile:
        """The same ranks with another engine (the Profiles are shared, the tables are not)."""
        return ClusterProfile(self.path, self.ranks, self.notes, engine=engine, scheduler=scheduler,
                              parquet_dir=parquet_dir)

    @property
    def world_size(self) -> int:
        """The ranks of the job: the size the runs recorded (simulated clusters), else the ranks found."""
        sizes = [(p.info.get("cluster") or {}).get("world_size") for p in self.ranks.values()]
        known = [int(s) for s in sizes if isinstance(s, (int, np.integer))]
        return max(known) if known else len(self.ranks)

    def rank(self, i: int) -> Profile:
        """The Profile of rank ``i``: a TypeError naming ``rank`` for a non-integer (a bool or
        a float too), a KeyError listing the ranks for one the cluster does not have."""
        i = integer("rank", i)
        try:
            return self.ranks[i]
        except KeyError:
            raise KeyError(f"no rank {i!r} in {self.name}; ranks: {list(self.ranks)}") from None

    @cached_property
    def step_breakdown(self) -> pd.DataFrame:
        """Every rank's step_breakdown, with a ``Rank`` column in front."""
        return stack({r: p.step_breakdown for r, p in self.ranks.items()})

    def step_bounds(self) -> dict[int, pd.DataFrame]:
        """Each rank's step bounds (which of its steps are whole step periods)."""
        return {r: p.source.step_bounds() for r, p in self.ranks.items()}

    def recorded_links(self) -> pd.DataFrame:
        """The torch_npu ranks' ``communication_matrix.json`` links, ``Rank`` first
        (:data:`..tables.communication.COMMUNICATION_MATRIX_LINKS`): such runs record no HCCL sub-tasks."""
        parts = [p.source.communication_matrix().assign(Rank=np.int64(r)) for r, p in self.ranks.items()
                 if isinstance(p.source, AscendPtSource)]
        if not parts:
            return pd.DataFrame(columns=["Rank", *COMMUNICATION_MATRIX_LINKS])
        return pd.concat(parts, ignore_index=True)[["Rank", *COMMUNICATION_MATRIX_LINKS]]

    # ------------------------------------------------------------ step timing
    #: Re-runs this cluster's job under a what-if change (set by whoever simulated it; None for a loaded one).
    replay: Callable[..., ClusterProfile] | None = None

    def critical_path(self, iteration: int | None = None) -> pd.DataFrame:
        """Per step, the critical path across ranks (:mod:`..timing.cluster_path`): from the end of the rank whose
        step ends last, through each collective's wait to the rank that arrived last, with a ``rank`` column;
        its segments add up to that last rank's step.  ``attrs["assumptions"]`` says how it was read."""
        from ..timing.cluster_path import cluster_path, task_groups

        ranks = {rank: p.step_graphs for rank, p in self.ranks.items()}
        if iteration is not None:
            steps = {g.iteration for _, graphs in ranks.values() for g in graphs}
            iteration = member("iteration", iteration, steps, "any rank's steps", "steps")
        groups = {rank: task_groups(p, ranks[rank][0]) for rank, p in self.ranks.items()}
        return cluster_path(ranks, iteration, groups)

    def what_if(self, **change: Any) -> Any:
        """:meth:`Profile.what_if` on every rank (same keywords); a step's prediction is its slowest rank's.
        Returns a :class:`~..timing.what_if.WhatIf` whose ``predicted`` has a ``rank`` column (the rank that
        sets each predicted step) and whose ``verify`` replays the cluster."""
        from ..timing.what_if import ClusterWhatIf

        return ClusterWhatIf(self, {rank: p.what_if(**change) for rank, p in self.ranks.items()})

    # ------------------------------------------------------------ cross-rank tables
    def tables(self, engine: str | None = None, scheduler: Any = None) -> ClusterTables:
        """The cross-rank tables computed by ``engine`` (default: this cluster's), cached per engine
        and scheduler.  ``cluster.tables("dask").all()`` computes every table on Dask."""
        engine = _check_engine(engine or self.engine)
        scheduler = scheduler if scheduler is not None else (self.scheduler if engine == self.engine else None)
        key = (engine, id(scheduler) if scheduler is not None and not isinstance(scheduler, str) else scheduler)
        if key not in self._tables:
            if engine == "pandas":
                inputs: Any = PandasInputs(self.ranks)
            else:
                from .dask_engine import DaskInputs

                inputs = DaskInputs.of(self, scheduler=scheduler, parquet_dir=self.parquet_dir)
            self._tables[key] = ClusterTables(inputs, recorded_links=self.recorded_links, stages=self.pipeline_stages)
        return self._tables[key]

    @property
    def cluster_step_trace_time(self) -> pd.DataFrame:
        """msprof-analyze's ``cluster_step_trace_time.csv`` (Step, Type, Index, Computing, ...)."""
        return self.tables().cluster_step_trace_time

    @property
    def slow_ranks(self) -> pd.DataFrame:
        """Ranks by own time (Computing + Free per step: step time minus the communication no compute
        hides), slowest first."""
        return self.tables().slow_ranks

    @property
    def communication_matrix(self) -> pd.DataFrame:
        """Transit bytes, time and bandwidth per (src rank, dst rank, link type, transport)."""
        return self.tables().communication_matrix

    @property
    def slow_links(self) -> pd.DataFrame:
        """Links well below their link type's median bandwidth."""
        return self.tables().slow_links

    @property
    def communication_time(self) -> pd.DataFrame:
        """Wait / transit / synchronization time per collective execution and rank."""
        return self.tables().communication_time

    @property
    def rank_step_wait(self) -> pd.DataFrame:
        """Collective time per rank and step (us): elapse, transit, wait, synchronization."""
        return self.tables().rank_step_wait

    @property
    def stragglers(self) -> pd.DataFrame:
        """Per collective execution: which rank arrived last and by how much."""
        return self.tables().stragglers

    def rank_step(self, metric: str = "Stage") -> pd.DataFrame:
        """A rank x step matrix of a step column (``Stage`` = step time) or ``Wait Time(us)``."""
        return self.tables().rank_step(metric)

    def module_statistic(self, depth: int = 2) -> pd.DataFrame:
        """Every rank's :meth:`Profile.module_statistic` at ``depth``, ``Rank`` first (each rank's shares
        add up to 100), as msprof-analyze's module_statistic gives one table per rank."""
        parts = [p.module_statistic(depth).assign(Rank=r) for r, p in self.ranks.items()]
        if not parts:
            return pd.DataFrame(columns=["Rank", *MODULE_COLUMNS])
        out = pd.concat(parts, ignore_index=True)
        return out[["Rank", *MODULE_COLUMNS]]

    def mfu(self, model: Mapping | None = None, peak_flops: float | None = None) -> pd.DataFrame:
        """Per step: the job's model FLOPs (:mod:`..tables.mfu`), the step's time (its slowest rank's step
        period: the job's step ends when its last rank's does), the FLOP/s per device over the world's
        devices (``parallel.distributed_args.world_size``) and the MFU against the device's cube peak.  The
        model's facts are the lowest rank's info.json's; ``model`` gives or replaces them, ``peak_flops`` the
        peak (as :meth:`Profile.mfu`)."""
        if not self.ranks:
            raise ValueError(f"{self.name} has no ranks: no step to measure")
        first = next(iter(self.ranks.values()))
        facts = mfu_tables.model_facts(first.info, model)
        peak = mfu_tables.peak_flops(first.device, peak_flops)
        parts = []
        for p in self.ranks.values():
            rows = p.step_breakdown
            if len(rows):
                parts.append(pd.DataFrame({"Step": pd.to_numeric(rows["Step"], errors="coerce").to_numpy(),
                                           "length": mfu_tables.step_lengths(rows),
                                           "whole": whole_periods(rows, p.source.step_bounds())}))
        if not parts:
            return mfu_tables.mfu_rows(np.zeros(0), np.zeros(0), np.zeros(0, bool), facts, peak)
        per_step = pd.concat(parts).groupby("Step", sort=True).agg(length=("length", "max"), whole=("whole", "all"))
        return mfu_tables.mfu_rows(per_step.index.to_numpy(), per_step["length"].to_numpy(),
                                   per_step["whole"].to_numpy(), facts, peak)

    # ------------------------------------------------------------------ hybrid parallelism
    @cached_property
    def parallel_facts(self) -> dict[int, dict]:
        """rank -> what it recorded of the job (``profiler_metadata.json``'s content; {} if nothing)."""
        return {r: H.parallel_facts(p) for r, p in self.ranks.items()}

    def pipeline_stages(self) -> dict[int, int]:
        """rank -> pipeline stage (every rank 0 without a pipeline)."""
        return {r: H.rank_stage(r, f) for r, f in self.parallel_facts.items()}

    @property
    def communication_groups(self) -> pd.DataFrame:
        """Every communication group of the job, as msprof-analyze's communication_group_map reports it,
        with the parallelism it serves (Type: world, tp, pp, dp, ep) and its ranks."""
        return self.tables().communication_groups

    @property
    def pipeline(self) -> pd.DataFrame:
        """Per rank (and its stage), step, micro-batch and direction: the pipeline pass's start and end (us)."""
        return self.tables().pipeline

    @property
    def pipeline_bubbles(self) -> pd.DataFrame:
        """Per pipeline stage: the bubble (the pipeline's time the stage is idle) per step, its share of the
        pipeline and of the step, and the share Megatron's formula gives uniform stages."""
        return self.tables().pipeline_bubbles

    @cached_property
    def expert_load(self) -> pd.DataFrame:
        """Per MoE layer and expert: the tokens it computed and its kernels' time per step."""
        return H.expert_load(self.ranks)

    @cached_property
    def expert_imbalance(self) -> pd.DataFrame:
        """Per MoE layer: tokens max / mean over experts, and the expert time per step its imbalance costs."""
        return H.expert_imbalance(self.ranks)

    # ------------------------------------------------------------------ actions
    def advise(self) -> pd.DataFrame:
        """Cluster findings (slow rank, slow link, high wait, stragglers) ranked High/Medium/Low,
        with evidence and a suggestion (the columns of :meth:`Profile.advise`)."""
        from ..findings.cluster_advisor import advise

        return advise(self)

    def export(self, path: str | Path, format: str = "ascend_pt", **options: Any) -> Path:  # noqa: A002
        """Write every rank under ``path`` and return ``path``: ``ascend_pt`` (one
        ``*_ascend_pt`` directory per rank, what ``msprof-analyze cluster`` and ``advisor`` read as
        one cluster) or ``parquet`` (``rank_<r>/<run>.geprof_parquet``, what ``geprof_nb.load``
        and the Dask engine read)."""
        from ..export.cluster import export_cluster

        return export_cluster(self, Path(path), format, **options)

    def close(self) -> None:
        """Release what the Dask engine opened (a Client it connected to, its temporary Parquet)."""
        for tables in self._tables.values():
            closer = getattr(tables.inputs, "close", None)
            if closer is not None:
                closer()
        self._tables.clear()

    def __repr__(self) -> str:
        return f"<geprof ClusterProfile {self.name}: ranks {_span(list(self.ranks))}>"


def _check_engine(engine: str) -> str:
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; accepted: {', '.join(ENGINES)}")
    return engine


def _span(ranks: list[int]) -> str:
    """``[0, 1, 2]`` or ``0..1023`` for a contiguous range of many ranks."""
    if len(ranks) > 8 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]}..{ranks[-1]}"
    return str(ranks)
