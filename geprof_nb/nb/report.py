"""The explorer's report model, without widgets: what each tab shows of a Profile, computed once.

:class:`Report` holds one Profile's tables as the tabs show them (the headline, the step split, the
top ops, the findings, the memory of one step) and its figures as :class:`Chart`s, drawn by
:mod:`.plots` the first time something shows them (a tab, or the static report) and rendered once
(:class:`Picture`).  The widget panes (:mod:`.explorer`) and the cluster explorer build on it.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Collection

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..analysis import Profile
from ..analysis.tables import columns as C
from ..analysis.tables.memory import StepMemory
from ..analysis.tables.summary import NA
from . import plots
from .html_parts import TOP_OPS, message_html, png_img_html

#: Ops in the Summary tab.
SUMMARY_OPS = 10
#: Findings in the Summary tab and the text summary.
TOP_FINDINGS = 3
#: Width of the task Gantt in pixels (the step timeline is 11 in at 100 dpi: the same).
GANTT_WIDTH_PX = 1100

ALL = "__all__"  # value of the "All" choice of the Ops and Timeline selectors
DURATION = "Task Duration(us)"
#: A task's share of the op time of the rows it is shown among (its iteration's, all op types).
SHARE = "Share of op time(%)"
STEP_SPLIT = ("Computing", "Communication(Not Overlapped)", "Free")

MSG_NO_OPS = "No op data: profile with --task-trace on (l1 for op names, types and shapes)."
MSG_NO_STEPS = "No step trace: profile with --training-trace on."
MSG_NO_SPLIT = "No step split (Computing / Communication / Free): it needs op data, profile with --task-trace on."
MSG_NO_PMU = ("No AI Core PMU data in this run: profile with --aic-metrics PipeUtilization (or another "
              "group) and --task-trace on (l1).")
MSG_NO_MEMORY = "No memory data: profile with --task-memory on."
MSG_NO_API = ("No API data: profile with --runtime-api on (runtime API calls) or --ge-api l1 "
              "(GE API and host scheduling).")
MSG_NO_RUNTIME_API = "Runtime API calls (rtKernelLaunch, rtMemcpyAsync, ...) are not in this run: add --runtime-api on."
MSG_NO_HOST = ("No host events: profile with --ge-api l1 (InferShape, Tiling, AllocMemory and launch of each node "
               "of a dynamic-shape graph).")
MSG_NO_MODULES = ("No module paths: the op names carry none (GE graphs built with name scopes, such as "
                  "ge.models.llm's, name their ops model/layers.12/self_attn/...; torch_npu kernel names do not).")
MSG_NO_FINDINGS = "No findings: nothing in this run crossed the advisor's thresholds."
MSG_NO_STEP_RAN = ("No graph step ran while profiling collected (task_trace or training_trace was on, and the "
                   "device reported nothing): run the graph inside the profiled cell or block, or between "
                   "Start and Stop.")


# --------------------------------------------------------------------------- figures
#: A serving engine step's split (``Profile.serving_steps`` columns) and how the headline names each part.
ENGINE_STEP_PARTS = (("compute_ms", "compute"), ("communication_ms", "exposed communication"),
                     ("host_ms", "host (scheduler)"))
#: The phases of engine steps, in the order the headline counts them.
ENGINE_PHASES = ("prefill", "decode", "mixed")


def engine_step_headline(steps: pd.DataFrame) -> list[str]:
    """A serving run's headline figures from ``Profile.serving_steps``: the mean engine step and its split (compute,
    exposed communication, host: shares of the engine steps' total time), and how many engine steps of each
    phase.  Not :attr:`Profile.step_split`: that is one graph's steps (the one that ran most of them), and a
    serving run runs a graph per shape bucket, so its "step" and "N steps" would be neither an engine step nor
    their count."""
    total = float(steps["step_ms"].sum())
    split = " / ".join(f"{label} {100 * float(steps[col].sum()) / total:.1f}%" for col, label in ENGINE_STEP_PARTS)
    counts = steps["phase"].value_counts()
    phases = ", ".join(f"{int(counts[ph])} {ph}" for ph in ENGINE_PHASES if ph in counts)
    mean = f"engine step {total / len(steps):.3f} ms" + (f" = {split}" if total > 0 else "")
    return [mean, f"{len(steps):,} engine steps ({phases})"]


@dataclass
class Picture:
    """A drawn figure as PNG, or the message saying why there is none."""

    alt: str
    png: bytes | None = None
    figure: Figure | None = None
    message: str = ""

    def html(self) -> str:
        return png_img_html(self.png, self.alt) if self.png is not None else message_html(self.message)


def render(alt: str, make: Callable[[], Figure]) -> Picture:
    """``make()`` a figure and render it to PNG (:func:`.plots.figure_png`); a failing plot gives a
    Picture with a message (shown in the tab), never an exception."""
    try:
        fig = make()
        png = plots.figure_png(fig)
    except Exception as exc:  # noqa: BLE001 - a figure must not take the whole report down
        return Picture(alt, message=f"could not draw the {alt}: {type(exc).__name__}: {exc}")
    return Picture(alt, png=png, figure=fig)


def draw(name: str, *args: Any, alt: str | None = None, **kwargs: Any) -> Picture:
    """``plots.<name>(*args, **kwargs)`` as a :class:`Picture`: the adapter between the explorer and :mod:`.plots`."""
    return render(alt or name.replace("_", " "), lambda: getattr(plots, name)(*args, **kwargs))


@dataclass
class Chart:
    """A tab's figure, drawn the first time something shows it (its tab, or the static report).

    ``name`` is the :mod:`.plots` function; ``call`` the code that draws it, which the static
    report names in place of a figure it does not embed (see :data:`STATIC_FIGURES`).
    """

    name: str
    call: str
    make: Callable[[], Picture]
    where: str = ""  # the tab that shows it

    @cached_property
    def picture(self) -> Picture:
        return self.make()

    def static_html(self, figures: Collection[str]) -> str:
        if figures == "all" or not self.name or self.name in figures:  # a note (no name) is always shown
            return self.picture.html()
        return message_html(f"Figure not embedded in this static report (drawing it would slow every show down): "
                            f"open the {self.where} tab of the explorer, or draw it with "
                            f"`from geprof_nb.nb import plots; {self.call}`.")


def note(alt: str, message: str) -> Chart:
    """A Chart that is only a message (no data to draw): shown in the static report too."""
    return Chart("", "", lambda: Picture(alt, message=message))


# --------------------------------------------------------------------------- content
#: The op_summary columns a person reads first, in this order (the Ops and Summary tables lead with them).
OPS_LEAD = ("Op Name", "OP Type", "Task Type", DURATION, SHARE)
#: op_summary columns that are ids: hidden by default in the Ops table (the "ids/constant" group).
ID_COLUMNS = ("Device_id", "Model ID", "Task ID", "Stream ID", "Context ID")
#: The shapes/formats group: the tensors op_summary describes.
TENSOR_COLUMNS = ("Input Shapes", "Input Data Types", "Input Formats", "Output Shapes", "Output Data Types",
                  "Output Formats")
#: Rows compared before a whole column is: a column that is not constant nearly always shows it early.
_CONSTANT_PROBE = 1000


def _constant(values: pd.Series) -> bool:
    """Whether a column says one thing only: at most one value other than missing ones (NaN, and the
    ``N/A`` msprof prints where a field does not apply, as for a collective's Mix Block Num)."""
    if len(values) < 2:
        return False
    if isinstance(values.dtype, pd.CategoricalDtype):
        data = values.cat.codes.to_numpy()
        na = list(values.cat.categories).index(NA) if NA in values.cat.categories else -1
        missing = (data == -1) | (data == na)
    else:
        data = values.to_numpy()
        missing = pd.isna(data)
    present = data[~missing]
    if not len(present):
        return True
    first = present[0]
    return bool((present[:_CONSTANT_PROBE] == first).all() and (present == first).all())


def _ops_column_groups(ops: pd.DataFrame) -> dict[str, list[str]]:
    """op_summary columns by group: basic, shapes/formats (the tensors' shapes, data types and formats),
    PMU (after ``Context ID`` / from ``aicore_time(us)`` on: the aic_metrics columns), and ids/constant
    (:data:`ID_COLUMNS` and columns that say one thing only (:func:`_constant`), such as OP State
    ``static`` in a static graph: hidden by default)."""
    columns = list(ops.columns)
    if "aicore_time(us)" in columns:
        start = columns.index("aicore_time(us)")
    elif "Context ID" in columns:
        start = columns.index("Context ID") + 1
    else:
        known = [i for i, c in enumerate(columns) if c in C.OP_SUMMARY_BASE or c in C.OP_SUMMARY_TENSOR_A2]
        start = max(known) + 1 if known else len(columns)
    head = columns[:start]
    hidden = [c for c in head if c not in OPS_LEAD and (c in ID_COLUMNS or _constant(ops[c]))]
    return {"basic": [c for c in head if c not in TENSOR_COLUMNS and c not in hidden],
            "shapes/formats": [c for c in head if c in TENSOR_COLUMNS and c not in hidden], "PMU": columns[start:],
            "ids/constant": hidden}


class Report:
    """Everything the explorer and the static report show, computed once per Profile
    (:meth:`of` keeps one per Profile, so showing a Profile again draws nothing again)."""

    _of: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def __init__(self, profile: Profile) -> None:
        # a weak reference: the cache of Reports must not keep its Profiles alive (the Explorers
        # that show a Profile hold it)
        self._profile = weakref.ref(profile)
        self._pictures: dict[tuple, Picture] = {}
        self._modules: dict[int, pd.DataFrame] = {}

    @property
    def profile(self) -> Profile:
        profile = self._profile()
        if profile is None:
            raise ReferenceError("the Profile of this report no longer exists")
        return profile

    @classmethod
    def of(cls, profile: Profile) -> Report:
        try:
            return cls._of[profile]
        except (KeyError, TypeError):
            report = cls(profile)
            try:
                cls._of[profile] = report
            except TypeError:  # not weak-referenceable: no sharing
                pass
            return report

    # ---------------------------------------------------------------- basics
    @cached_property
    def ops(self) -> pd.DataFrame:
        return self.profile.op_summary

    @cached_property
    def op_iterations(self) -> np.ndarray:
        """The Iteration ID of every op_summary row."""
        return self.profile.iteration_of_ops.to_numpy()

    @cached_property
    def op_types(self) -> np.ndarray:
        return self.ops["OP Type"].astype(str).to_numpy() if "OP Type" in self.ops else np.array([], dtype=object)

    @cached_property
    def last_iteration(self) -> int | None:
        its = self.op_iterations
        return int(its.max()) if len(its) else None

    @cached_property
    def step_ids(self) -> list[int]:
        """The iterations a step selector offers: step_trace's, else those of the op rows."""
        st = self.profile.step_trace
        ids = st["Iteration ID"].to_numpy() if len(st) else np.unique(self.op_iterations)
        return [int(i) for i in ids]

    @cached_property
    def column_groups(self) -> dict[str, list[str]]:
        return _ops_column_groups(self.ops)

    @cached_property
    def origin_us(self) -> float | None:
        """The time (us) the explorer's relative times are measured from: the run's first step's start."""
        ns = self.profile.time_origin_ns
        return None if ns is None else ns / 1000.0

    @cached_property
    def pmu_columns(self) -> list[str]:
        """PMU columns that hold at least one value (none when the run has no aic_metrics data)."""
        cols = self.column_groups["PMU"]
        return [c for c in cols if self.ops[c].notna().any()] if len(self.ops) else []

    @cached_property
    def findings(self) -> pd.DataFrame:
        return self.profile.advise()

    def modules(self, depth: int) -> pd.DataFrame:
        """``Profile.module_statistic(depth)``, computed once per depth."""
        if depth not in self._modules:
            self._modules[depth] = self.profile.module_statistic(depth)
        return self._modules[depth]

    def module_bars(self, depth: int) -> Chart:
        return Chart("module_bars", f"plots.module_bars(profile.module_statistic({depth}))", lambda: self.picture(
            ("module_bars", depth), lambda: draw("module_bars", self.modules(depth), top=15,
                                                 title=f"Device time per module (depth {depth})",
                                                 alt="device time per module")), "Modules")

    def picture(self, key: tuple, make: Callable[[], Picture]) -> Picture:
        if key not in self._pictures:
            self._pictures[key] = make()
        return self._pictures[key]

    # ---------------------------------------------------------------- headline
    def missing(self, message: str) -> str:
        """What to say where a tab has no data: ``message`` (how to collect it), unless no step ran
        (:attr:`Profile.no_step_ran`: "switch X on" would be wrong advice then)."""
        return MSG_NO_STEP_RAN if self.profile.no_step_ran else message

    def where(self, iteration: Any = None) -> str:
        iteration = self.last_iteration if iteration is None else iteration
        if iteration in (None, ALL):
            return "the run"
        return f"iteration {iteration}" + self._engine_steps_of(iteration)

    def _engine_steps_of(self, iteration: int) -> str:
        """On a serving run, which engine steps an Iteration ID's ops are: each graph (shape bucket) counts its
        own iterations, so "iteration 37" is the 37th step of every graph that ran that many."""
        phases = self.profile.model_phases
        if not phases or "Model ID" not in self.ops.columns:
            return ""
        models = pd.to_numeric(self.ops["Model ID"][self.op_iterations == iteration], errors="coerce")
        ids = sorted(int(m) for m in models.dropna().unique() if int(m) in phases)
        if len(ids) == 1:
            return f" of Model ID {ids[0]}, a {phases[ids[0]]} engine step"
        return f" of Model IDs {', '.join(map(str, ids))}: {len(ids)} engine steps" if ids else ""

    @cached_property
    def headline(self) -> str:
        p = self.profile
        parts = [p.name]
        if not p.complete:
            parts.append("INCOMPLETE run (not finalised): tables hold what was flushed")
        lost = sum(p.dropped.values())
        if lost:  # full ring buffers, storage_limit aging, failed writes: never silent (Notes say which)
            parts.append(f"{lost} records LOST (dropped or not written; see Notes)")
        engine = p.serving_steps
        if len(engine):  # a serving run: its engine steps, whichever graph ran each
            parts.extend(engine_step_headline(engine))
        else:
            if p.step_split is not None:  # the one step figure (analysis/step_split.py), before anything else
                parts.append(p.step_split.headline())
            steps = len(p.step_trace)
            if steps:
                parts.append(f"{steps} steps")
        parts.append(f"{len(self.ops):,} op tasks")
        top_type = self.top_op_type
        if top_type is not None:
            parts.append(f"top op type {top_type[0]} ({top_type[1]:.1f}% of op time of {self.where()})")
        return " | ".join(parts)

    @cached_property
    def summary_op_time(self) -> pd.Series:
        """Task durations of the op rows the Summary's shares are of: the last iteration's (every
        row when no iteration is known), communication ops included."""
        if DURATION not in self.ops.columns:
            return pd.Series(dtype=float)
        durations = self.ops[DURATION]
        return durations[self.op_iterations == self.last_iteration] if self.last_iteration is not None else durations

    @cached_property
    def top_op_type(self) -> tuple[str, float] | None:
        """The OP Type with the largest share of :attr:`summary_op_time` and that share (%): the
        total the Summary's "Share of op time(%)" column divides by, so headline and table agree."""
        durations = self.summary_op_time
        if not len(durations) or "OP Type" not in self.ops.columns:
            return None
        by_type = durations.groupby(self.ops["OP Type"].loc[durations.index].astype(object)).sum()
        total = float(durations.sum())
        if not len(by_type) or total <= 0:
            return None
        return str(by_type.idxmax()), float(by_type.max()) / total * 100

    @cached_property
    def step_split(self) -> pd.DataFrame:
        """The step figure's parts (Computing, Communication(Not Overlapped), Free) and the step they add up
        to, in us and % of the step (:attr:`Profile.step_split`: the typical step periods' mean)."""
        split = self.profile.step_split
        if split is None:
            return pd.DataFrame(columns=["Part", "Time per step(us)", "Share of step(%)"])
        return pd.DataFrame({"Part": [*STEP_SPLIT, "Step"], "Time per step(us)": [*split.parts_us, split.length_us],
                             "Share of step(%)": [*split.shares, sum(split.shares)]})

    def top_ops(self, n: int = TOP_OPS, iteration: Any = None, columns: list[str] | None = None
                ) -> tuple[pd.DataFrame, int]:
        """The n longest op tasks of an iteration (default: the last) and how many it has."""
        ops = self.ops
        iteration = self.last_iteration if iteration is None else iteration
        if iteration not in (None, ALL) and len(ops):
            ops = ops[self.op_iterations == iteration]
        if DURATION in ops.columns:
            ops = ops.sort_values(DURATION, ascending=False, kind="stable", na_position="last")
        top = ops.head(n)
        return (top[columns] if columns is not None else top), len(ops)

    @cached_property
    def summary_ops(self) -> tuple[pd.DataFrame, int]:
        cols = [c for c in ("Op Name", "OP Type", "Task Type", DURATION, "Block Num") if c in self.ops.columns]
        top, total = self.top_ops(SUMMARY_OPS, columns=cols)
        if len(top) and DURATION in top.columns:
            op_time = float(self.summary_op_time.sum())
            top = top.assign(**{SHARE: top[DURATION] / max(op_time, 1e-12) * 100})
            top = top[[c for c in OPS_LEAD if c in top.columns] + [c for c in top.columns if c not in OPS_LEAD]]
        return top, total

    # ---------------------------------------------------------------- figures
    def step_chart(self) -> Chart:
        """The Summary's step chart: a stacked bar per step (Computing / exposed Communication / Free) with
        the step figure, the steps it leaves out hatched."""
        p = self.profile
        split = p.step_split
        if split is None:
            return note("step chart", self.missing(MSG_NO_SPLIT if len(p.step_trace) else MSG_NO_STEPS))
        left_out = sorted(set(p.step_breakdown["Step"].astype(int).tolist()) - set(split.steps))
        return Chart("step_split_bars", "plots.step_split_bars(profile.step_breakdown, "
                                        "profile.step_split.length_us)", lambda: self.picture(
            ("step_split_bars",), lambda: draw("step_split_bars", p.step_breakdown, split.length_us, left_out,
                                               alt="stacked bar per step: Computing, exposed Communication, Free")),
            "Summary")

    def step_timeline(self, iteration: Any = ALL) -> Chart:
        it = None if iteration == ALL else int(iteration)
        forward, phases = self.profile.forward_only_models, self.profile.model_phases
        alt = ("step timeline" if forward else "FP/BP step timeline") + ("" if it is None else f" of iteration {it}")
        arg = ("" if it is None else f", iteration={it}") + (", forward_models=profile.forward_only_models"
                                                            if forward else "")
        arg += ", phases=profile.model_phases" if phases else ""
        return Chart("step_timeline", f"plots.step_timeline(profile.step_trace{arg})", lambda: self.picture(
            ("step_timeline", it), lambda: draw("step_timeline", self.profile.step_trace, iteration=it,
                                                forward_models=forward, phases=phases, alt=alt)), "Timeline")

    def gantt_iteration(self, iteration: Any = ALL) -> int | None:
        """The iteration the Gantt draws: the selected one, or the last when all steps are selected."""
        return self.last_iteration if iteration == ALL else int(iteration)

    def task_gantt(self, iteration: Any = ALL) -> Chart:
        if not len(self.ops):
            return note("task Gantt", self.missing(MSG_NO_OPS))
        it = self.gantt_iteration(iteration)
        title = "Tasks per stream" + (" (the last step; pick a step above to zoom)" if iteration == ALL else "")
        return Chart("task_gantt", f"plots.task_gantt(profile.op_summary, iteration={it}, "
                                   "iterations=profile.iteration_of_ops.to_numpy())", lambda: self.picture(
            ("task_gantt", it, title), lambda: draw("task_gantt", self.ops, iteration=it, iterations=self.op_iterations,
                                             title=title, width_px=GANTT_WIDTH_PX,
                                             alt=f"task Gantt per stream of iteration {it}")), "Timeline")

    def op_type_bars(self) -> Chart:
        if not len(self.profile.op_statistic):
            return note("time per OP Type", self.missing(MSG_NO_OPS))
        return Chart("op_type_bars", "plots.op_type_bars(profile.op_statistic)", lambda: self.picture(
            ("op_type_bars",), lambda: draw("op_type_bars", self.profile.op_statistic, top=15,
                                            alt="time per OP Type")), "Ops")

    def pipe_ratios(self) -> Chart:
        return Chart("pipe_ratios", "plots.pipe_ratios(profile.ops())", lambda: self.picture(
            ("pipe_ratios",), lambda: draw("pipe_ratios", self.profile.ops(), top=15,
                                           title=f"AI Core ratios of {self.where()}", alt="AI Core pipe ratios")),
            "AI Core")

    def roofline(self) -> Chart:
        return Chart("roofline", "plots.roofline(profile)", lambda: self.picture(
            ("roofline",), lambda: draw("roofline", self.profile.roofline, title=f"Roofline of {self.where()}",
                                        alt="roofline")), "AI Core")

    @cached_property
    def memory_iteration(self) -> int | None:
        """The iteration the memory figure zooms to: the last one of step_trace (None: the whole run)."""
        st = self.profile.step_trace
        return int(st["Iteration ID"].iloc[-1]) if len(st) else None

    @cached_property
    def memory(self) -> StepMemory:
        """The memory tables the Memory tab shows: those of :attr:`memory_iteration` alone (a long run's
        whole tables have millions of rows), or the whole run's where a step's cannot be told apart
        or it has none (its tasks lost)."""
        step = self.profile.step_memory(self.memory_iteration)
        return step if step.iteration is None or len(step.memory_record) else self.profile.step_memory(None)

    def memory_lifetimes(self) -> Chart:
        p, it, mem = self.profile, self.memory_iteration, self.memory
        alt = "tensor lifetimes in the memory pool" + ("" if it is None else f", iteration {it}")
        return Chart("memory_lifetimes", f"plots.memory_lifetimes(profile, iteration={it})", lambda: self.picture(
            ("memory_lifetimes", it), lambda: draw(
                "memory_lifetimes", mem.tensor_lifetimes, memory_record=mem.memory_record, peak=mem.peak,
                step_trace=p.step_trace, iteration=plots.ALL_ITERATIONS if it is None else it, alt=alt)), "Memory")

    def host_scopes(self) -> Chart:
        p = self.profile

        def make() -> Picture:
            try:
                calls = p.source.api_calls()  # per-call host API records (raw runs only)
            except Exception:  # noqa: BLE001 - the host events alone still make the figure
                calls = None
            calls = calls if calls is not None and len(calls) else None
            return draw("host_scopes", p.host_events, api_calls=calls, alt="host scopes: API calls and GE host events")

        return Chart("host_scopes", "plots.host_scopes(profile.host_events)",
                     lambda: self.picture(("host_scopes",), make), "API/Host")
