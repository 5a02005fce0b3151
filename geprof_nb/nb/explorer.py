"""The results explorer: what ``%%geprof``, ``%geprof show`` and ``display(profile)`` show.

A tabbed ipywidgets explorer (Summary, Ops, Steps, Timeline, AI Core, Memory, API/Host, Advice)
and, in the same display call, its static twin: an HTML report with every tab's content, the
step timeline PNG and a text summary, for front ends without widgets (nbconvert, GitHub, a
terminal IPython).  See :meth:`Explorer.mimebundle`.

Layout of the widget (CSS classes for browser tests and styling)::

    VBox .geprof-explorer
      Tab (each child a slot VBox: a "drawn when selected" note until the tab is built, then:)
        VBox .geprof-tab-summary     headline, step split, top ops, top findings, notes
        VBox .geprof-tab-ops         OP Type / sort / top-N / iteration / column-group controls, op_summary
        VBox .geprof-tab-steps       step_trace, step_breakdown
        VBox .geprof-tab-timeline    step selector, step timeline, per-stream task Gantt
        VBox .geprof-tab-ai-core     pipe ratios, PMU table (<table class="geprof-pmu-table">)
        VBox .geprof-tab-memory      memory lifetimes, peak, largest allocations
        VBox .geprof-tab-api-host    api_statistic, host scopes, host_events per event
        VBox .geprof-tab-advice      Profile.advise(), rows coloured by priority

Only the Summary tab is built when the explorer is shown; every other tab is built the first
time it is selected (``Tab.selected_index`` observer), and the controls of a tab re-render only
that tab's output.  Figures come from :mod:`.plots` through :func:`draw`, which turns a missing
plot function or a plotting error into a message in the tab instead of a traceback.  The static
report and the widget share one cache per Profile (:class:`Report`), so no figure or table is
drawn twice.  The static report has every tab's tables (top N rows, the count stated) but embeds
only the figures of :data:`STATIC_FIGURES` (the step timeline and the task Gantt): the other three
(op types, pipe ratios, memory lifetimes) cost 0.35-0.6 s each, so embedding them would make every
show 1-1.5 s slower (a fresh ResNet-50 Profile's bundle, 10 steps: 0.67 -> 2.1 s; 1000 steps: 2.6 ->
4.1 s), and they are named with the call that draws them.  ``STATIC_FIGURES = "all"`` embeds every one.
"""

from __future__ import annotations

import html
import traceback
import weakref
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Collection

import ipywidgets as widgets
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..analysis import Profile
from ..analysis.tables.memory import StepMemory
from ..analysis.tables import columns as C
from . import plots
from .display import TOP_OPS, list_html, message_html, png_img_html, table_html, table_text

TAB_TITLES = ("Summary", "Ops", "Steps", "Timeline", "AI Core", "Memory", "API/Host", "Advice")
WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"

#: Largest top-N of the Ops tab: an HTML table of more rows makes the front end slow, not wiser.
MAX_ROWS = 500
#: Rows of the static report's long tables (step_trace, op_statistic, api_statistic, ...).
STATIC_ROWS = 50
#: Ops in the Summary tab.
SUMMARY_OPS = 10
#: Findings in the Summary tab and the text summary.
TOP_FINDINGS = 3
#: The figures the static report embeds: drawing one takes 0.2-0.6 s, so the others (AI Core,
#: Memory, API/Host, op types) are named with the call that draws them; ``"all"`` embeds every one
#: (set it before showing a Profile, e.g. for a notebook that nbconvert or GitHub will render).
STATIC_FIGURES: Collection[str] = ("step_timeline", "task_gantt")
#: Width of the task Gantt in pixels (the step timeline is 11 in at 100 dpi: the same).
GANTT_WIDTH_PX = 1100

ALL = "__all__"  # value of the "All" choice of the Ops and Timeline selectors
DURATION = "Task Duration(us)"
OPS_GROUPS = ("basic", "shapes/formats", "PMU")
ALWAYS_SHOWN = ("Op Name", "OP Type")
STEP_SPLIT = ("Computing", "Communication(Not Overlapped)", "Free")
PRIORITY_COLORS = {"High": "#f8d7da", "Medium": "#fff3cd", "Low": "#d1ecf1"}

PENDING = ("This tab is drawn by the running kernel when it is first selected. Without a kernel, the output's "
           "static HTML report (what nbconvert and GitHub show) has every tab.")
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
MSG_NO_FINDINGS = "No findings: nothing in this run crossed the advisor's thresholds."
MSG_NO_STEP_RAN = ("No graph step ran while profiling collected (task_trace or training_trace was on, and the "
                   "device reported nothing): run the graph inside the profiled cell or block, or between "
                   "Start and Stop.")


def tab_class(title: str) -> str:
    """The CSS class of a tab's content box: ``geprof-tab-`` + title, lowercase, ``/`` and space -> ``-``."""
    return "geprof-tab-" + title.lower().replace("/", "-").replace(" ", "-")


# --------------------------------------------------------------------------- figures
@dataclass
class Picture:
    """A drawn figure as PNG, or the message saying why there is none."""

    alt: str
    png: bytes | None = None
    figure: Figure | None = None
    message: str = ""

    def html(self) -> str:
        return png_img_html(self.png, self.alt) if self.png is not None else message_html(self.message)


def draw(name: str, *args: Any, alt: str | None = None, **kwargs: Any) -> Picture:
    """Call ``plots.<name>(*args, **kwargs)`` and render it to PNG; the adapter between the
    explorer and :mod:`.plots`.  A missing function or a failing plot gives a Picture with a
    message (shown in the tab), never an exception."""
    alt = alt or name.replace("_", " ")
    fn = getattr(plots, name, None)
    if not callable(fn):
        return Picture(alt, message=f"{alt}: this version of geprof_nb.nb.plots has no {name}().")
    try:
        fig = fn(*args, **kwargs)
        to_png = getattr(plots, "figure_png", None)
        png = to_png(fig) if callable(to_png) else _figure_png(fig)
    except Exception as exc:  # noqa: BLE001 - a figure must not take the whole report down
        return Picture(alt, message=f"could not draw the {alt}: {type(exc).__name__}: {exc}")
    return Picture(alt, png=png, figure=fig)


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


def _note(alt: str, message: str) -> Chart:
    """A Chart that is only a message (no data to draw): shown in the static report too."""
    return Chart("", "", lambda: Picture(alt, message=message))


def _figure_png(fig: Figure) -> bytes:
    from io import BytesIO

    buf = BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return buf.getvalue()


# --------------------------------------------------------------------------- content
def _ops_column_groups(columns: list[str]) -> dict[str, list[str]]:
    """op_summary columns by group: basic, shapes/formats (tensor info), PMU (after
    ``Context ID`` / from ``aicore_time(us)`` on: the aic_metrics columns)."""
    if "aicore_time(us)" in columns:
        start = columns.index("aicore_time(us)")
    elif "Context ID" in columns:
        start = columns.index("Context ID") + 1
    else:
        known = [i for i, c in enumerate(columns) if c in C.OP_SUMMARY_BASE or c in C.OP_SUMMARY_TENSOR_A2]
        start = max(known) + 1 if known else len(columns)
    head = columns[:start]
    tensor = set(C.OP_SUMMARY_TENSOR_A2)
    return {"basic": [c for c in head if c not in tensor], "shapes/formats": [c for c in head if c in tensor],
            "PMU": columns[start:]}


def _numeric_columns(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns
            if pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])]


class Report:
    """Everything the explorer and the static report show, computed once per Profile
    (:meth:`of` keeps one per Profile, so showing a Profile again draws nothing again)."""

    _of: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def __init__(self, profile: Profile) -> None:
        # a weak reference: the cache of Reports must not keep its Profiles alive (the Explorers
        # that show a Profile hold it)
        self._profile = weakref.ref(profile)
        self._pictures: dict[tuple, Picture] = {}

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
        return _ops_column_groups(list(self.ops.columns))

    @cached_property
    def pmu_columns(self) -> list[str]:
        """PMU columns that hold at least one value (none when the run has no aic_metrics data)."""
        cols = self.column_groups["PMU"]
        return [c for c in cols if self.ops[c].notna().any()] if len(self.ops) else []

    @cached_property
    def findings(self) -> pd.DataFrame:
        return self.profile.advise()

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
        return "the run" if iteration in (None, ALL) else f"iteration {iteration}"

    @cached_property
    def headline(self) -> str:
        p = self.profile
        parts = [p.name]
        if not p.complete:
            parts.append("INCOMPLETE run (not finalised): tables hold what was flushed")
        lost = sum(p.dropped.values())
        if lost:  # full ring buffers, storage_limit aging, failed writes: never silent (Notes say which)
            parts.append(f"{lost} records LOST (dropped or not written; see Notes)")
        if p.step_split is not None:  # the one step figure (analysis/step_split.py), before anything else
            parts.append(p.step_split.headline())
        steps = len(p.step_trace)
        if steps:
            parts.append(f"{steps} steps")
        parts.append(f"{len(self.ops)} op tasks")
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
            top = top.assign(**{"Share of op time(%)": top[DURATION] / max(op_time, 1e-12) * 100})
        return top, total

    # ---------------------------------------------------------------- figures
    def step_timeline(self, iteration: Any = ALL) -> Chart:
        it = None if iteration == ALL else int(iteration)
        alt = "FP/BP step timeline" + ("" if it is None else f" of iteration {it}")
        arg = "" if it is None else f", iteration={it}"
        return Chart("step_timeline", f"plots.step_timeline(profile.step_trace{arg})", lambda: self.picture(
            ("step_timeline", it), lambda: draw("step_timeline", self.profile.step_trace, iteration=it, alt=alt)),
            "Timeline")

    def gantt_iteration(self, iteration: Any = ALL) -> int | None:
        """The iteration the Gantt draws: the selected one, or the last when all steps are selected."""
        return self.last_iteration if iteration == ALL else int(iteration)

    def task_gantt(self, iteration: Any = ALL) -> Chart:
        if not len(self.ops):
            return _note("task Gantt", self.missing(MSG_NO_OPS))
        it = self.gantt_iteration(iteration)
        title = "Tasks per stream" + (" (the last step; pick a step above to zoom)" if iteration == ALL else "")
        return Chart("task_gantt", f"plots.task_gantt(profile.op_summary, iteration={it}, "
                                   "iterations=profile.iteration_of_ops.to_numpy())", lambda: self.picture(
            ("task_gantt", it, title), lambda: draw("task_gantt", self.ops, iteration=it, iterations=self.op_iterations,
                                             title=title, width_px=GANTT_WIDTH_PX,
                                             alt=f"task Gantt per stream of iteration {it}")), "Timeline")

    def op_type_bars(self) -> Chart:
        if not len(self.profile.op_statistic):
            return _note("time per OP Type", self.missing(MSG_NO_OPS))
        return Chart("op_type_bars", "plots.op_type_bars(profile.op_statistic)", lambda: self.picture(
            ("op_type_bars",), lambda: draw("op_type_bars", self.profile.op_statistic, top=15,
                                            alt="time per OP Type")), "Ops")

    def pipe_ratios(self) -> Chart:
        return Chart("pipe_ratios", "plots.pipe_ratios(profile.ops())", lambda: self.picture(
            ("pipe_ratios",), lambda: draw("pipe_ratios", self.profile.ops(), top=15,
                                           title=f"AI Core ratios of {self.where()}", alt="AI Core pipe ratios")),
            "AI Core")

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


# --------------------------------------------------------------------------- blocks
# A tab's content is a list of blocks: an HTML string, or a Chart.  The static report joins
# their HTML; the widget shows HTML blocks in HTML widgets and Charts in Image widgets.


def _blocks_html(blocks: list, figures: Collection[str]) -> str:
    return "".join(b.static_html(figures) if isinstance(b, Chart) else b for b in blocks)


class PictureView:
    """An Image widget that shows a Picture, or an HTML message in its place; updated in place."""

    def __init__(self, picture: Picture | None = None) -> None:
        self.image = widgets.Image(format="png", layout=widgets.Layout(max_width="100%", height="auto"))
        self.message = widgets.HTML()
        self.box = widgets.VBox([self.image, self.message])
        self.picture: Picture | None = None
        if picture is not None:
            self.show(picture)

    def show(self, picture: Picture) -> None:
        self.picture = picture
        if picture.png is not None:
            self.image.value = picture.png
            self.image.layout.display = None
            self.message.value = ""
            self.message.layout.display = "none"
        else:
            self.image.layout.display = "none"
            self.message.value = picture.html()
            self.message.layout.display = None


def _block_widget(block) -> widgets.Widget:
    return PictureView(block.picture).box if isinstance(block, Chart) else widgets.HTML(block)


def _h4(text: str) -> str:
    return f"<h4>{html.escape(text)}</h4>"


def _bounded(df: pd.DataFrame, what: str, n: int = STATIC_ROWS) -> tuple[pd.DataFrame, str]:
    """The first n rows and a title that states the count."""
    return (df, f"{what}: {len(df)} rows") if len(df) <= n else (df.head(n), f"{what}: first {n} of {len(df)} rows")


# --------------------------------------------------------------------------- tabs
class Pane(ABC):
    """One tab: a content box (built on first selection) and the same content as static HTML."""

    title = ""

    def __init__(self, report: Report) -> None:
        self.report = report
        self.profile = report.profile
        #: the tab's content box (CSS class ``geprof-tab-<title>``), in :attr:`slot` once built
        self.box = widgets.VBox(layout=widgets.Layout(width="100%"))
        self.box.add_class(tab_class(self.title))
        # The Tab's child.  Until the tab is first selected it holds a note instead of the content
        # box: where no kernel runs (a saved notebook's widget state), the note is what it shows.
        self.slot = widgets.VBox([widgets.HTML(message_html(PENDING))], layout=widgets.Layout(width="100%"))
        self.built = False

    @property
    def css_class(self) -> str:
        return tab_class(self.title)

    @abstractmethod
    def blocks(self) -> list:
        """The tab's default content (static report and non-interactive widget content)."""

    def build(self) -> Pane:
        """Fill the content box (once); an error shows in the tab rather than vanishing in a callback."""
        if not self.built:
            self.built = True
            try:
                self.box.children = self._widgets()
            except Exception:  # noqa: BLE001
                err = traceback.format_exc()
                self.box.children = [widgets.HTML(f"<pre>{html.escape(err)}</pre>")]
            self.slot.children = [self.box]
        return self

    @cached_property
    def content(self) -> list:
        """:meth:`blocks`, computed once for the widget and the static report."""
        return self.blocks()

    def _widgets(self) -> list[widgets.Widget]:
        return [_block_widget(b) for b in self.content]

    def static_html(self, figures: Collection[str] = ("step_timeline", "task_gantt")) -> str:
        try:
            body = _blocks_html(self.content, figures)
        except Exception:  # noqa: BLE001
            body = f"<pre>{html.escape(traceback.format_exc())}</pre>"
        return (f'<section class="geprof-static-{self.css_class[len("geprof-tab-"):]}">'
                f"<h3>{html.escape(self.title)}</h3>{body}</section>")


class SummaryPane(Pane):
    title = "Summary"

    def blocks(self) -> list:
        r, p = self.report, self.profile
        out = [f'<p class="geprof-headline"><b>geprof</b> {html.escape(r.headline)}<br>'
               f"<small>run directory: {html.escape(str(p.path))}</small></p>"]
        split = r.step_split
        if len(split):
            out.append(table_html(split, f"Step split: {p.step_split.basis()}; a step runs from the previous "
                                         "iteration's end, so the gap between steps is in its Free (step_trace's "
                                         "Iteration Time, in Steps, is an iteration's own span, without the gap)"))
        else:
            out.append(message_html(r.missing(MSG_NO_SPLIT if len(p.step_trace) else MSG_NO_STEPS)))
        top, total = r.summary_ops
        if len(top):
            out.append(table_html(top, f"Top {len(top)} of {total} op tasks of {r.where()} by {DURATION}"))
        else:
            out.append(message_html(r.missing(MSG_NO_OPS)))
        findings = r.findings
        if len(findings):
            out.append(_h4(f"Top findings ({min(TOP_FINDINGS, len(findings))} of {len(findings)}; see Advice)"))
            out.append(advice_html(findings.head(TOP_FINDINGS)[["Priority", "Rule", "Finding"]]))
        else:
            out.append(message_html(r.missing(MSG_NO_FINDINGS)))
        if p.notes:
            out.append(_h4("Notes") + list_html(p.notes, "geprof-notes"))
        return out


class OpsPane(Pane):
    """op_summary with an OP Type filter, a sort column, top N, an iteration and column groups."""

    title = "Ops"

    def _visible_columns(self, groups: set[str], sort_by: str) -> list[str]:
        cg = self.report.column_groups
        keep = {c for g in groups for c in cg.get(g, [])} | set(ALWAYS_SHOWN) | {sort_by}
        return [c for c in self.report.ops.columns if c in keep]

    def select(self, op_type: str = ALL, iteration: Any = None, sort_by: str = DURATION, ascending: bool = False,
               top: int = TOP_OPS, groups: tuple[str, ...] = ("basic", "PMU")) -> tuple[pd.DataFrame, int]:
        """The rows and columns the table shows, and how many rows matched the filters."""
        r = self.report
        ops = r.ops
        iteration = r.last_iteration if iteration is None else iteration
        mask = np.ones(len(ops), dtype=bool)
        if op_type != ALL:
            mask &= r.op_types == op_type
        if iteration != ALL and len(r.op_iterations):
            mask &= r.op_iterations == iteration
        sel = ops[mask]
        if sort_by in sel.columns:
            sel = sel.sort_values(sort_by, ascending=ascending, kind="stable", na_position="last")
        return sel.head(top)[self._visible_columns(set(groups), sort_by)], int(mask.sum())

    @staticmethod
    def describe(shown: int, matched: int, op_type: str, iteration: Any, sort_by: str, ascending: bool) -> str:
        where = "all iterations" if iteration == ALL else f"iteration {iteration}"
        kind = "all OP Types" if op_type == ALL else f"OP Type {op_type}"
        order = "ascending" if ascending else "descending"
        return f"Showing {shown} of {matched} op tasks ({kind}, {where}), sorted by {sort_by} {order}"

    def _table(self, frame: pd.DataFrame) -> str:
        return table_html(frame, classes="geprof-ops-table")

    def blocks(self) -> list:
        r = self.report
        if not len(r.ops):
            return [message_html(self.report.missing(MSG_NO_OPS))]
        frame, matched = self.select()
        it = r.last_iteration if r.last_iteration is not None else ALL
        label = self.describe(len(frame), matched, ALL, it, DURATION, False)
        out = [f'<p class="geprof-ops-count">{html.escape(label)}; the explorer filters, sorts and shows more '
               f"(up to {MAX_ROWS} rows)</p>", self._table(frame)]
        return out + self._statistic_blocks()

    def _statistic_blocks(self) -> list:
        stat = self.profile.op_statistic
        if not len(stat):
            return []
        table, title = _bounded(stat, "op_statistic: time per OP Type and Core Type")
        return [table_html(table, title), self.report.op_type_bars()]

    # ------------------------------------------------------------ widgets
    def _widgets(self) -> list[widgets.Widget]:
        r = self.report
        if not len(r.ops):
            return [widgets.HTML(message_html(self.report.missing(MSG_NO_OPS)))]
        numeric = _numeric_columns(r.ops)
        types = sorted(set(r.op_types.tolist()))
        its = [int(i) for i in np.unique(r.op_iterations)]
        style = {"description_width": "initial"}
        self.type_filter = widgets.Dropdown(options=[("All", ALL)] + [(t, t) for t in types], value=ALL,
                                            description="OP Type", style=style)
        self.sort_by = widgets.Dropdown(options=numeric, value=DURATION if DURATION in numeric else numeric[0],
                                        description="Sort by", style=style)
        self.ascending = widgets.Checkbox(value=False, description="ascending", indent=False,
                                          layout=widgets.Layout(width="auto"))
        n_max = max(1, min(MAX_ROWS, len(r.ops)))
        self.top_n = widgets.IntSlider(value=min(TOP_OPS, n_max), min=1, max=n_max, description="Top N",
                                       continuous_update=False, style=style)
        it_options = [("All", ALL)] + [(str(i), i) for i in its]
        self.iteration = widgets.Dropdown(options=it_options, value=its[-1] if its else ALL,
                                          description="Iteration", style=style)
        cg = r.column_groups
        self.groups = {
            g: widgets.ToggleButton(value=g != "shapes/formats" and bool(cg[g]), description=g,
                                    disabled=not cg[g], tooltip=f"show the {g} columns")
            for g in OPS_GROUPS
        }
        for g, button in self.groups.items():
            button.add_class("geprof-group-" + g.replace("/", "-").lower())
        self.count_label = widgets.Label()
        self.count_label.add_class("geprof-ops-count")
        self.table = widgets.HTML()
        self.table.add_class("geprof-ops-table-box")
        controls = [self.type_filter, self.sort_by, self.ascending, self.top_n, self.iteration,
                    *self.groups.values()]
        for w in controls:
            w.observe(self._render, "value")
        self._render()
        group_box = widgets.HBox([widgets.Label("Columns:"), *self.groups.values()])
        group_box.add_class("geprof-ops-groups")
        return [widgets.HBox([self.type_filter, self.iteration, self.sort_by, self.ascending],
                             layout=widgets.Layout(flex_flow="row wrap")),
                widgets.HBox([self.top_n, group_box], layout=widgets.Layout(flex_flow="row wrap")),
                self.count_label, self.table, *[_block_widget(b) for b in self._statistic_blocks()]]

    def _render(self, change: Any = None) -> None:
        groups = tuple(g for g, b in self.groups.items() if b.value)
        self.frame, matched = self.select(self.type_filter.value, self.iteration.value, self.sort_by.value,
                                          self.ascending.value, self.top_n.value, groups)
        self.count_label.value = self.describe(len(self.frame), matched, self.type_filter.value,
                                               self.iteration.value, self.sort_by.value, self.ascending.value)
        self.table.value = self._table(self.frame)


class StepsPane(Pane):
    title = "Steps"

    def blocks(self) -> list:
        st, sb = self.profile.step_trace, self.profile.step_breakdown
        out = []
        if len(st):
            t, title = _bounded(st, "step_trace (times in us)")
            out.append(table_html(t, title))
        else:
            out.append(message_html(self.report.missing(MSG_NO_STEPS)))
        if len(sb):
            t, title = _bounded(sb, "step_breakdown: Computing, Communication and Free per step (us)")
            out.append(table_html(t, title))
        return out


class TimelinePane(Pane):
    """The FP/BP step timeline and the per-stream task Gantt, both zoomed by one step selector."""

    title = "Timeline"

    def blocks(self, iteration: Any = ALL) -> list:
        return [self.report.step_timeline(iteration), self.report.task_gantt(iteration)]

    def _widgets(self) -> list[widgets.Widget]:
        r = self.report
        self.step = widgets.Dropdown(options=[("All steps", ALL)] + [(f"iteration {i}", i) for i in r.step_ids],
                                     value=ALL, description="Step", style={"description_width": "initial"})
        self.step_view, self.gantt_view = PictureView(), PictureView()
        self.step.observe(self._render, "value")
        self._render()
        return [self.step, self.step_view.box, self.gantt_view.box]

    def _render(self, change: Any = None) -> None:
        self.step_view.show(self.report.step_timeline(self.step.value).picture)
        self.gantt_view.show(self.report.task_gantt(self.step.value).picture)

    @property
    def step_figure(self) -> Figure | None:
        return self.step_view.picture.figure if self.step_view.picture else None

    @property
    def gantt_figure(self) -> Figure | None:
        return self.gantt_view.picture.figure if self.gantt_view.picture else None


class AICorePane(Pane):
    title = "AI Core"

    def pmu_table(self) -> tuple[pd.DataFrame, int]:
        r = self.report
        ops = self.profile.ops()
        pmu = r.pmu_columns
        has = ops[pmu].notna().any(axis=1).to_numpy() if pmu else np.zeros(len(ops), bool)
        ops = ops[has].sort_values(DURATION, ascending=False, kind="stable")
        lead = [c for c in ("Op Name", "OP Type", "Task Type", DURATION, "Block Num") if c in ops.columns]
        return ops.head(TOP_OPS)[lead + pmu], len(ops)

    def blocks(self) -> list:
        r = self.report
        if not r.pmu_columns:
            return [message_html(self.report.missing(MSG_NO_PMU))]
        group = ", ".join(self.profile.info.get("pmu_events", {}).get("metrics", [])) if hasattr(
            self.profile, "info") else ""
        table, total = self.pmu_table()
        head = f"aic_metrics group: {group}" if group else "AI Core PMU"
        return [f"<p>{html.escape(head)}</p>", r.pipe_ratios(),
                table_html(table, f"PMU columns of the top {len(table)} of {total} AI Core tasks of {r.where()} "
                                  f"by {DURATION}", classes="geprof-pmu-table")]


class MemoryPane(Pane):
    title = "Memory"

    def blocks(self) -> list:
        mem = self.report.memory
        om = mem.operator_memory
        if not len(om):
            return [message_html(self.report.missing(MSG_NO_MEMORY))]
        out: list = []
        of = "" if mem.iteration is None else f" of iteration {mem.iteration}"
        peak = mem.peak
        if peak is not None:
            allocated, reserved = plots.format_size(peak.allocated_bytes), plots.format_size(peak.reserved_bytes)
            out.append(f'<p class="geprof-memory-peak"><b>Peak{of}</b> {allocated} allocated '
                       f"({reserved} reserved) at {peak.time_us:.3f} us, reached by "
                       f"allocating <code>{html.escape(peak.tensor)}</code> (model {peak.model_id})</p>")
        out.append(self.report.memory_lifetimes())
        tensors = om.sort_values("Size(KB)", ascending=False, kind="stable").drop_duplicates("Name")
        top = tensors.head(TOP_OPS)
        out.append(table_html(top, f"operator_memory{of}: the {len(top)} largest of {len(tensors)} tensors "
                                   f"({len(om)} allocations)"))
        return out


class ApiHostPane(Pane):
    title = "API/Host"

    def host_summary(self) -> pd.DataFrame:
        he = self.profile.host_events
        g = he.groupby("Event", observed=True)["Duration(us)"]
        out = pd.DataFrame({"Count": g.size(), "Total(us)": g.sum(), "Avg(us)": g.mean(), "Max(us)": g.max()})
        return out.sort_values("Total(us)", ascending=False).reset_index()

    def blocks(self) -> list:
        p = self.profile
        api, he = p.api_statistic, p.host_events
        out: list = []
        if len(api):
            t, title = _bounded(api, "api_statistic: host API calls per level")
            out.append(table_html(t, title))
            if "Level" in api.columns and not (api["Level"].astype(str) == "runtime").any():
                out.append(message_html(MSG_NO_RUNTIME_API))
        else:
            out.append(message_html(self.report.missing(MSG_NO_API)))
        if len(he):
            out.append(self.report.host_scopes())
            out.append(table_html(self.host_summary(), f"host_events per event ({len(he)} spans)"))
        else:
            out.append(message_html(self.report.missing(MSG_NO_HOST)))
        return out


def advice_html(findings: pd.DataFrame) -> str:
    """Findings as an escaped HTML table, each row coloured by its priority."""
    cols = list(findings.columns)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
    rows = []
    for rec in findings.itertuples(index=False):
        prio = str(rec[0]) if cols and cols[0] == "Priority" else ""
        color = PRIORITY_COLORS.get(prio, "")
        cells = "".join(f"<td>{html.escape(_cell(v))}</td>" for v in rec)
        rows.append(f'<tr class="geprof-priority-{html.escape(prio.lower())}" style="background:{color}">{cells}</tr>')
    return (f'<div style="overflow-x:auto"><table class="dataframe geprof-table geprof-advice" border="0">'
            f'<thead><tr style="text-align:left">{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>')


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return "N/A" if np.isnan(v) else f"{v:.3f}"
    return str(v)


class AdvicePane(Pane):
    title = "Advice"

    def blocks(self) -> list:
        findings = self.report.findings
        if not len(findings):
            return [message_html(self.report.missing(MSG_NO_FINDINGS))]
        return [f"<p>{len(findings)} findings, highest priority first</p>", advice_html(findings)]


PANES = (SummaryPane, OpsPane, StepsPane, TimelinePane, AICorePane, MemoryPane, ApiHostPane, AdvicePane)


# --------------------------------------------------------------------------- explorer
class Explorer:
    """The tabbed explorer of one Profile; ``mimebundle()`` is what a notebook shows."""

    def __init__(self, profile: Profile, static_figures: Collection[str] | None = None) -> None:
        self.profile = profile
        #: the figures :meth:`static_html` embeds (default :data:`STATIC_FIGURES`; ``"all"``: every one)
        self.static_figures = STATIC_FIGURES if static_figures is None else static_figures
        self.report = Report.of(profile)
        self.panes: dict[str, Pane] = {cls.title: cls(self.report) for cls in PANES}
        self.tab = widgets.Tab(children=[p.slot for p in self.panes.values()], titles=list(TAB_TITLES))
        self.tab.observe(self._on_select, "selected_index")
        self.widget = widgets.VBox([self.tab], layout=widgets.Layout(width="100%"))
        self.widget.add_class("geprof-explorer")
        self.panes[TAB_TITLES[self.tab.selected_index or 0]].build()

    def _on_select(self, change: dict) -> None:
        if change["new"] is not None:
            self.panes[TAB_TITLES[change["new"]]].build()

    def select(self, title: str) -> Pane:
        """Select a tab by title (building it if it is new) and return it."""
        self.tab.selected_index = TAB_TITLES.index(title)
        return self.panes[title].build()

    # the panes by name, for code and tests
    summary = property(lambda self: self.panes["Summary"])
    ops = property(lambda self: self.panes["Ops"])
    steps = property(lambda self: self.panes["Steps"])
    timeline = property(lambda self: self.panes["Timeline"])
    ai_core = property(lambda self: self.panes["AI Core"])
    memory = property(lambda self: self.panes["Memory"])
    api_host = property(lambda self: self.panes["API/Host"])
    advice = property(lambda self: self.panes["Advice"])

    # ------------------------------------------------------------ static twin
    def static_html(self) -> str:
        """Every tab's default content as one HTML report (tables escaped, figures embedded)."""
        sections = "".join(p.static_html(self.static_figures) for p in self.panes.values())
        return f'<div class="geprof-report">{sections}</div>'

    def text_summary(self) -> str:
        """Headline, step split, top ops and top findings as plain text."""
        r, p = self.report, self.profile
        lines = [f"geprof {r.headline}", f"run directory: {p.path}"]
        if not p.complete:
            lines.append("(incomplete run)")
        split = p.step_split
        if split is not None:
            lines.append(f"step split ({split.basis()}): " + ", ".join(
                f"{part} {us:.3f} us" for part, us in zip(STEP_SPLIT, split.parts_us)))
        top, total = r.summary_ops
        if len(top):
            lines += ["", table_text(top, f"top {len(top)} of {total} op tasks of {r.where()} by {DURATION}")]
        findings = r.findings
        if len(findings):
            lines += ["", "top findings:"]
            lines += [f"  [{f.Priority}] {f.Rule}: {f.Finding}" for f in findings.head(TOP_FINDINGS).itertuples()]
        if p.notes:
            lines += ["", "notes:"] + [f"  - {n}" for n in p.notes]
        lines += ["", "(the explorer's Ops, Steps, Timeline, AI Core, Memory, API/Host and Advice tabs show the rest)"]
        return "\n".join(lines)

    def widget_view(self) -> dict[str, Any]:
        return {"version_major": 2, "version_minor": 0, "model_id": self.widget.model_id}

    def mimebundle(self) -> dict[str, object]:
        """Widget view (JupyterLab), static HTML (nbconvert, GitHub), the step timeline PNG
        (renderers that skip HTML) and a text summary (terminals), for one raw display call."""
        bundle: dict[str, object] = {WIDGET_VIEW_MIME: self.widget_view(), "text/html": self.static_html()}
        timeline = self.report.step_timeline(ALL).picture
        if timeline.png is not None:
            bundle["image/png"] = timeline.png
        bundle["text/plain"] = self.text_summary()
        return bundle

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, object]:
        return self.mimebundle()


def explore(profile: Profile) -> Explorer:
    """An Explorer of ``profile``; display it (or its ``.widget``) in a notebook."""
    return Explorer(profile)
