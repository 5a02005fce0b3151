"""The results explorer: what ``%%geprof``, ``%geprof show`` and ``display(profile)`` show.

A tabbed ipywidgets explorer (Summary, Ops, Steps, Timeline, AI Core, Memory, API/Host, Modules, Advice,
What-if; and Serving for a serving run) and, in the same display call, its static twin: an HTML report with every
tab's content (What-if's aside: it needs a kernel), the step timeline PNG and a text summary, for front ends without
widgets (nbconvert, GitHub, a terminal IPython).  See :meth:`Explorer.mimebundle`.

Layout of the widget (CSS classes for browser tests and styling)::

    VBox .geprof-explorer
      Tab (each child a slot VBox: a "drawn when selected" note until the tab is built, then:)
        VBox .geprof-tab-summary     headline, step chart and step split, top ops, top findings, notes
        VBox .geprof-tab-ops         OP Type / sort / top-N / iteration / column-group controls, op_summary
        VBox .geprof-tab-steps       step_trace, step_breakdown, compare steps (.geprof-compare-steps)
        VBox .geprof-tab-timeline    step selector, step timeline, per-stream task Gantt
        VBox .geprof-tab-ai-core     pipe ratios, PMU table (<table class="geprof-pmu-table">)
        VBox .geprof-tab-memory      memory lifetimes, peak, largest allocations
        VBox .geprof-tab-api-host    api_statistic, host scopes, host_events per event
        VBox .geprof-tab-modules     depth selector (.geprof-modules-depth), module_statistic, top modules chart
        VBox .geprof-tab-advice      Profile.advise(), rows coloured by priority
        VBox .geprof-tab-what-if     what-if knobs, Apply, the predicted steps beside today's (:mod:`.whatif_view`)
        VBox .geprof-tab-serving     a serving run only: latency percentiles, throughput, engine steps chart,
                                     slowest requests (:mod:`.serving_view`)

Only the Summary tab is built when the explorer is shown; every other tab is built the first
time it is selected (``Tab.selected_index`` observer), and the controls of a tab re-render only
that tab's output.  What the tabs show comes from the widget-free report model (:mod:`.report`:
figures drawn by :mod:`.plots` through ``report.draw``, which turns a plotting error into a message
in the tab instead of a traceback); the static report and the widget share one
:class:`~.report.Report` per Profile, so no figure or table is drawn twice.  The static report
has every tab's tables (top N rows, the count stated) but embeds only the figures of
:data:`STATIC_FIGURES` (the step chart, the step timeline and the task Gantt): the op types, pipe ratios
and memory lifetimes cost 0.35-0.6 s each (the modules chart too), so embedding them would make every show 1-1.5 s
slower (a fresh ResNet-50 Profile's bundle, 10 steps: 0.67 -> 2.1 s; 1000 steps: 2.6 -> 4.1 s), and
they are named with the call that draws them.  ``STATIC_FIGURES = "all"`` embeds every one.
"""

from __future__ import annotations

import html
import traceback
from abc import ABC, abstractmethod
from functools import cached_property
from typing import Any, Collection

import ipywidgets as widgets
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..analysis import Profile
from ..analysis.tables.breakdown import main_model
from ..analysis.tables.modules import NO_MODULE
from . import plots
from .blocks import WIDGET_VIEW_MIME, PictureView, block_widget, blocks_html
from .html_parts import TOP_OPS, advice_html, bounded, heading, list_html, message_html, table_html, table_text
from .report import (
    ALL,
    DURATION,
    MSG_NO_API,
    MSG_NO_FINDINGS,
    MSG_NO_HOST,
    MSG_NO_MEMORY,
    MSG_NO_MODULES,
    MSG_NO_OPS,
    MSG_NO_PMU,
    MSG_NO_RUNTIME_API,
    MSG_NO_SPLIT,
    MSG_NO_STEPS,
    OPS_LEAD,
    SHARE,
    STEP_SPLIT,
    TOP_FINDINGS,
    Report,
)
from .serving_view import has_serving, serving_blocks
from .table_views import (
    api_statistic_view,
    engine_steps,
    forward_only,
    origin_text,
    relative_times,
    step_trace_view,
    without_one_device,
)

TAB_TITLES = ("Summary", "Ops", "Steps", "Timeline", "AI Core", "Memory", "API/Host", "Modules", "Advice", "What-if")

#: Largest top-N of the Ops tab: an HTML table of more rows makes the front end slow, not wiser.
MAX_ROWS = 500
#: Rows of the static report's long tables (step_trace, op_statistic, api_statistic, ...).
STATIC_ROWS = 50
#: The figures the static report embeds: drawing one takes 0.2-0.6 s, so the others (AI Core,
#: Memory, API/Host, op types) are named with the call that draws them; ``"all"`` embeds every one
#: (set it before showing a Profile, e.g. for a notebook that nbconvert or GitHub will render).
STATIC_FIGURES: Collection[str] = ("step_split_bars", "step_timeline", "task_gantt")

OPS_GROUPS = ("basic", "shapes/formats", "PMU", "ids/constant")
#: The column groups the Ops table opens with (:data:`.report.OPS_LEAD` are always shown).
DEFAULT_GROUPS = ("basic", "PMU")

PENDING = ("This tab is drawn by the running kernel when it is first selected. Without a kernel, the output's "
           "static HTML report (what nbconvert and GitHub show) has every tab.")


def times_toggle() -> widgets.ToggleButton:
    """The button that shows a tab's timestamps as recorded (us since the epoch) instead of since the run's
    first step (CSS class ``geprof-absolute-times``)."""
    button = widgets.ToggleButton(value=False, description="absolute times",
                                  tooltip="show the recorded timestamps (us since the epoch) instead of the times "
                                          "since the run's first step")
    button.add_class("geprof-absolute-times")
    return button


def tab_class(title: str) -> str:
    """The CSS class of a tab's content box: ``geprof-tab-`` + title, lowercase, ``/`` and space -> ``-``."""
    return "geprof-tab-" + title.lower().replace("/", "-").replace(" ", "-")


def _numeric_columns(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns
            if pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])]


# --------------------------------------------------------------------------- tabs
class Pane(ABC):
    """One tab: a content box (built on first selection) and the same content as static HTML."""

    title = ""
    #: Whether the static report has the tab's section (False: the tab is interactive only).
    static = True

    @classmethod
    def shown(cls, profile: Profile) -> bool:
        """Whether the explorer of ``profile`` has this tab: every run has those of :data:`TAB_TITLES`."""
        return True

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
        return [block_widget(b) for b in self.content]

    def static_html(self, figures: Collection[str] = STATIC_FIGURES) -> str:
        if not self.static:
            return ""
        try:
            body = blocks_html(self.content, figures)
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
            out.append(r.step_chart())
            of = (f" of one graph's steps (Model ID {main_model(p.step_trace)}, the graph that ran the most engine "
                  "steps; the headline and the Serving tab have every engine step)" if has_serving(p) else "")
            out.append(table_html(split, f"Step split{of}: {p.step_split.basis()}; a step runs from the previous "
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
            out.append(heading(f"Top findings ({min(TOP_FINDINGS, len(findings))} of {len(findings)}; see Advice)"))
            out.append(advice_html(findings.head(TOP_FINDINGS)[["Priority", "Rule", "Finding"]]))
        else:
            out.append(message_html(r.missing(MSG_NO_FINDINGS)))
        if p.notes:
            out.append(heading("Notes") + list_html(p.notes, "geprof-notes"))
        return out


class OpsPane(Pane):
    """op_summary with an OP Type filter, a sort column, top N, an iteration, column groups and the
    times since the run's first step (or the absolute ones)."""

    title = "Ops"

    def _visible_columns(self, groups: set[str], sort_by: str) -> list[str]:
        cg = self.report.column_groups
        keep = {c for g in groups for c in cg.get(g, [])} | {sort_by}
        lead = [c for c in OPS_LEAD if c in self.report.ops.columns or c == SHARE]
        return lead + [c for c in self.report.ops.columns if c in keep and c not in lead]

    @cached_property
    def sort_columns(self) -> list[str]:
        """The numeric columns to sort by, in the order a person looks for them: the task duration first,
        the ids and constant columns last."""
        numeric = _numeric_columns(self.report.ops)
        hidden = set(self.report.column_groups["ids/constant"])
        return sorted(numeric, key=lambda c: (c != DURATION, c in hidden))

    def select(self, op_type: str = ALL, iteration: Any = None, sort_by: str = DURATION, ascending: bool = False,
               top: int = TOP_OPS, groups: tuple[str, ...] = DEFAULT_GROUPS, absolute: bool = False
               ) -> tuple[pd.DataFrame, int]:
        """The rows and columns the table shows, and how many rows matched the filters.  Each row's
        :data:`SHARE` is of the op time of its iteration (of the run with every iteration), all OP Types;
        timestamps are us since the run's first step unless ``absolute``."""
        r = self.report
        ops = r.ops
        iteration = r.last_iteration if iteration is None else iteration
        in_iteration = np.ones(len(ops), dtype=bool)
        if iteration != ALL and len(r.op_iterations):
            in_iteration = r.op_iterations == iteration
        mask = in_iteration & (r.op_types == op_type) if op_type != ALL else in_iteration
        sel = ops[mask]
        if sort_by in sel.columns:
            sel = sel.sort_values(sort_by, ascending=ascending, kind="stable", na_position="last")
        shown = sel.head(top)
        if DURATION in shown.columns:
            op_time = float(ops[DURATION].to_numpy(np.float64)[in_iteration].sum())
            shown = shown.assign(**{SHARE: shown[DURATION] / max(op_time, 1e-12) * 100})
        shown = relative_times(shown, "op_summary", None if absolute else r.origin_us)
        return shown[[c for c in self._visible_columns(set(groups), sort_by) if c in shown.columns]], int(mask.sum())

    def describe(self, shown: int, matched: int, op_type: str, iteration: Any, sort_by: str, ascending: bool,
                 absolute: bool = False) -> str:
        where = "all iterations" if iteration == ALL else f"iteration {iteration}"
        kind = "all OP Types" if op_type == ALL else f"OP Type {op_type}"
        order = "ascending" if ascending else "descending"
        times = "" if absolute else "; start " + origin_text(self.report.origin_us)
        return f"Showing {shown} of {matched} op tasks ({kind}, {where}), sorted by {sort_by} {order}{times}"

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
        table, title = bounded(without_one_device(stat), "op_statistic: time per OP Type and Core Type", STATIC_ROWS)
        return [table_html(table, title), self.report.op_type_bars()]

    # ------------------------------------------------------------ widgets
    def _widgets(self) -> list[widgets.Widget]:
        r = self.report
        if not len(r.ops):
            return [widgets.HTML(message_html(self.report.missing(MSG_NO_OPS)))]
        numeric = self.sort_columns
        types = sorted(set(r.op_types.tolist()))
        its = [int(i) for i in np.unique(r.op_iterations)]
        style = {"description_width": "initial"}
        self.type_filter = widgets.Dropdown(options=[("All", ALL)] + [(t, t) for t in types], value=ALL,
                                            description="OP Type", style=style)
        self.sort_by = widgets.Dropdown(options=numeric, value=numeric[0], description="Sort by", style=style)
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
            g: widgets.ToggleButton(value=g in DEFAULT_GROUPS and bool(cg[g]), description=g,
                                    disabled=not cg[g], tooltip=f"show the {g} columns")
            for g in OPS_GROUPS
        }
        for g, button in self.groups.items():
            button.add_class("geprof-group-" + g.replace("/", "-").lower())
        self.absolute = times_toggle()
        self.count_label = widgets.Label()
        self.count_label.add_class("geprof-ops-count")
        self.table = widgets.HTML()
        self.table.add_class("geprof-ops-table-box")
        controls = [self.type_filter, self.sort_by, self.ascending, self.top_n, self.iteration,
                    *self.groups.values(), self.absolute]
        for w in controls:
            w.observe(self._render, "value")
        self._render()
        group_box = widgets.HBox([widgets.Label("Columns:"), *self.groups.values(), self.absolute])
        group_box.add_class("geprof-ops-groups")
        return [widgets.HBox([self.type_filter, self.iteration, self.sort_by, self.ascending],
                             layout=widgets.Layout(flex_flow="row wrap")),
                widgets.HBox([self.top_n, group_box], layout=widgets.Layout(flex_flow="row wrap")),
                self.count_label, self.table, *[block_widget(b) for b in self._statistic_blocks()]]

    def _render(self, change: Any = None) -> None:
        groups = tuple(g for g, b in self.groups.items() if b.value)
        self.frame, matched = self.select(self.type_filter.value, self.iteration.value, self.sort_by.value,
                                          self.ascending.value, self.top_n.value, groups, self.absolute.value)
        self.count_label.value = self.describe(len(self.frame), matched, self.type_filter.value,
                                               self.iteration.value, self.sort_by.value, self.ascending.value,
                                               self.absolute.value)
        self.table.value = self._table(self.frame)


class TimedPane(Pane):
    """A tab whose tables have timestamps: since the run's first step, or as recorded with the
    ``absolute times`` button (:func:`times_toggle`) pressed."""

    @abstractmethod
    def blocks(self, absolute: bool = False) -> list:
        """The tab's content, its timestamps since the first step (as recorded if ``absolute``)."""

    def times(self, absolute: bool) -> str:
        """How the tab's times read, for its table titles."""
        return "absolute times in us" if absolute else origin_text(self.report.origin_us)

    def origin(self, absolute: bool) -> float | None:
        return None if absolute else self.report.origin_us

    def has_times(self) -> bool:
        """Whether the tab shows any timestamp (else it gets no ``absolute times`` button)."""
        return True

    def _widgets(self) -> list[widgets.Widget]:
        self.absolute = times_toggle()
        self.body = widgets.VBox(layout=widgets.Layout(width="100%"))
        self.absolute.observe(self._render, "value")
        self._render()
        return [self.absolute, self.body] if self.has_times() else [self.body]

    def _render(self, change: Any = None) -> None:
        content = self.blocks(absolute=True) if self.absolute.value else self.content
        self.body.children = [block_widget(b) for b in content]


class StepsPane(TimedPane):
    """step_trace (its AllReduce pairs as a table of their own) and step_breakdown; *compare steps* shows two
    steps of the run side by side (:mod:`.comparison_view`)."""

    title = "Steps"

    def has_times(self) -> bool:
        return bool(len(self.profile.step_trace))

    def _widgets(self) -> list[widgets.Widget]:
        out = super()._widgets()
        steps = self.report.step_ids
        if len(steps) < 2:
            return out
        style = {"description_width": "initial"}
        self.compare_a = widgets.Dropdown(options=steps, value=steps[0], description="Compare step", style=style)
        self.compare_b = widgets.Dropdown(options=steps, value=steps[-1], description="with step", style=style)
        self.compare_button = widgets.Button(description="compare", tooltip="the two steps side by side: their "
                                             "split, the ops that moved most, their timelines aligned")
        self.compare_button.add_class("geprof-compare-steps")
        self.compare_box = widgets.VBox(layout=widgets.Layout(width="100%"))
        self.compare_button.on_click(self.compare_steps)
        return [*out, widgets.HBox([self.compare_a, self.compare_b, self.compare_button],
                                   layout=widgets.Layout(flex_flow="row wrap")), self.compare_box]

    def compare_steps(self, _button: Any = None) -> Any:
        """Show the compare view of the two chosen steps under the tables; returns it."""
        from .comparison_view import CompareView

        try:
            view = CompareView(self.profile, self.profile, steps=(self.compare_a.value, self.compare_b.value))
            self.compare_box.children = [view.widget]
        except Exception:  # noqa: BLE001 - shown in the tab, not lost in a callback
            view = None
            self.compare_box.children = [widgets.HTML(f"<pre>{html.escape(traceback.format_exc())}</pre>")]
        return view

    def blocks(self, absolute: bool = False) -> list:
        st, sb = self.profile.step_trace, self.profile.step_breakdown
        times = self.times(absolute)
        out = []
        if len(st):
            forward, phases = self.profile.forward_only_models, self.profile.model_phases
            main, reduces = step_trace_view(relative_times(without_one_device(st), "step_trace",
                                                           self.origin(absolute)), forward, phases)
            named = ("; a serving run: each step a prefill or a decode (Phase), msprof's FP Start, BP End, FP to "
                     "BP Time and Iteration Refresh named for what they are" if engine_steps(st, phases)
                     else "; a forward-only run: msprof's FP Start, BP End, FP to BP Time and Iteration Refresh "
                     "are named for what they are" if forward_only(st, forward) else "")
            t, title = bounded(main, f"step_trace ({times}; Iteration Time is an iteration's own span, without "
                                     f"the gap before it{named})", STATIC_ROWS)
            out.append(table_html(t, title))
            if len(reduces):
                t, title = bounded(reduces, f"AllReduces of each step (step_trace's Reduce Start and Duration "
                                            f"pairs; {times})", STATIC_ROWS)
                out.append(table_html(t, title, "geprof-reduces"))
        else:
            out.append(message_html(self.report.missing(MSG_NO_STEPS)))
        if len(sb):
            t, title = bounded(without_one_device(sb), "step_breakdown: Computing, Communication and Free per step "
                                                       "(us)", STATIC_ROWS)
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


#: The roofline columns the AI Core tab shows.
ROOFLINE_SHOWN = ["Op Name", "OP Type", "Task Type", "Count", "Duration(us)", "Arithmetic Intensity(FLOP/B)",
                  "Achieved TFLOP/s", "Achieved GB/s", "Attainable TFLOP/s", "Bound", "Efficiency", "Estimated"]


class AICorePane(Pane):
    title = "AI Core"

    def pmu_table(self) -> tuple[pd.DataFrame, int]:
        r = self.report
        ops = self.profile.ops()
        pmu = r.pmu_columns
        has = ops[pmu].notna().any(axis=1).to_numpy() if pmu else np.zeros(len(ops), bool)
        ops = ops[has].sort_values(DURATION, ascending=False, kind="stable")
        lead = [c for c in ("Op Name", "OP Type", "Task Type", DURATION, "Block Num") if c in ops.columns]
        top = ops.head(TOP_OPS)
        shown = [c for c in pmu if top[c].notna().any()]  # a vector-only top has no aic_* value: not N/A columns
        return top[lead + shown], len(ops)

    def blocks(self) -> list:
        return [*self.pmu_blocks(), *self.roofline_blocks()]

    def pmu_blocks(self) -> list:
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

    def roofline_blocks(self) -> list:
        """The roofline section: the figure and the longest ops' rows (docs/roofline.md); nothing if the run
        holds no FLOPs or bytes (a real run without the ArithmeticUtilization or Memory group)."""
        table = self.profile.roofline
        if table.empty:
            return []
        notes = "; ".join(table.attrs.get("notes", []))
        shown = table.head(TOP_OPS)[ROOFLINE_SHOWN]
        return ["<h4>Roofline</h4>", f"<p>{html.escape(notes)}</p>", self.report.roofline(),
                table_html(shown, f"roofline of the top {len(shown)} of {len(table)} AI Core ops by time "
                                  "(Efficiency: the roofline's time over the op's)", classes="geprof-roofline-table")]


class MemoryPane(TimedPane):
    title = "Memory"

    def has_times(self) -> bool:
        return bool(len(self.report.memory.operator_memory))

    def blocks(self, absolute: bool = False) -> list:
        mem = self.report.memory
        om = mem.operator_memory
        if not len(om):
            return [message_html(self.report.missing(MSG_NO_MEMORY))]
        out: list = []
        of = "" if mem.iteration is None else f" of iteration {mem.iteration}"
        peak = mem.peak
        if peak is not None:
            allocated, reserved = plots.format_size(peak.allocated_bytes), plots.format_size(peak.reserved_bytes)
            origin = self.origin(absolute)
            at = (f"{peak.time_us:,.3f} us" if origin is None
                  else f"{peak.time_us - origin:,.3f} us after the run's first step began")
            out.append(f'<p class="geprof-memory-peak"><b>Peak{of}</b> {allocated} allocated '
                       f"({reserved} reserved) at {at}, reached by "
                       f"allocating <code>{html.escape(peak.tensor)}</code> (model {peak.model_id})</p>")
        out.append(self.report.memory_lifetimes())
        tensors = om.sort_values("Size(KB)", ascending=False, kind="stable").drop_duplicates("Name")
        top = relative_times(tensors.head(TOP_OPS), "operator_memory", self.origin(absolute))
        out.append(table_html(top, f"operator_memory{of}: the {len(top)} largest of {len(tensors)} tensors "
                                   f"({len(om)} allocations; {self.times(absolute)})"))
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
            t, title = bounded(without_one_device(api_statistic_view(api)), "api_statistic: host API calls per "
                               "level (msprof's Variance shown as the standard deviation)", STATIC_ROWS)
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


class ModulesPane(Pane):
    """``Profile.module_statistic`` at a selectable depth (layers by default) and a bar chart of the top modules."""

    title = "Modules"
    #: The depth the tab opens at: ``model/layers.12``.
    DEPTH = 2

    @cached_property
    def depths(self) -> list[int]:
        """The depths the run's module paths have (1 to the deepest)."""
        deepest = self.report.modules(64)["Module"]
        return list(range(1, max((len(str(m).split("/")) for m in deepest), default=1) + 1))

    def has_modules(self) -> bool:
        return bool((self.report.modules(1)["Module"] != NO_MODULE).any())

    def blocks(self, depth: int = DEPTH) -> list:
        r = self.report
        if not len(r.ops):
            return [message_html(r.missing(MSG_NO_OPS))]
        if not self.has_modules():
            return [message_html(MSG_NO_MODULES)]
        table, title = bounded(r.modules(depth), f"module_statistic at depth {depth} (the whole run; gradients "
                                                 "rolled up to their op's module; shares of all op time)", STATIC_ROWS)
        return [table_html(table, title, classes="geprof-modules-table"), r.module_bars(depth)]

    def _widgets(self) -> list[widgets.Widget]:
        if not len(self.report.ops) or not self.has_modules():
            return [block_widget(b) for b in self.content]
        depths = self.depths
        self.depth = widgets.Dropdown(options=depths, value=min(self.DEPTH, depths[-1]), description="Depth",
                                      style={"description_width": "initial"})
        self.depth.add_class("geprof-modules-depth")
        self.table, self.chart = widgets.HTML(), PictureView()
        self.depth.observe(self._render, "value")
        self._render()
        return [self.depth, self.table, self.chart.box]

    def _render(self, change: Any = None) -> None:
        table, chart = self.blocks(self.depth.value)
        self.table.value = table
        self.chart.show(chart.picture)


class AdvicePane(Pane):
    title = "Advice"

    def blocks(self) -> list:
        findings = self.report.findings
        if not len(findings):
            return [message_html(self.report.missing(MSG_NO_FINDINGS))]
        return [f"<p>{len(findings)} findings, highest priority first</p>", advice_html(findings)]


class WhatIfPane(Pane):
    """What the steps would take under a change chosen with the tab's knobs (:class:`.whatif_view.WhatIfControls`).
    Interactive only: a what-if needs a change, so the static report has no section for it (``%geprof whatif``'s
    output is the static form)."""

    title = "What-if"
    static = False

    def blocks(self) -> list:
        return [message_html("Choose a change in the explorer's What-if tab, or run %geprof whatif.")]

    def _widgets(self) -> list[widgets.Widget]:
        from .whatif_view import WhatIfControls

        self.controls = WhatIfControls(self.profile)
        return [self.controls.widget]


class ServingPane(Pane):
    """A serving run's latencies, throughput, engine steps and slowest requests (:mod:`.serving_view`); only
    the explorer of a run with serving steps has it, after the tabs of :data:`TAB_TITLES`."""

    title = "Serving"

    @classmethod
    def shown(cls, profile: Profile) -> bool:
        return has_serving(profile)

    def blocks(self) -> list:
        return serving_blocks(self.report)


PANES = (SummaryPane, OpsPane, StepsPane, TimelinePane, AICorePane, MemoryPane, ApiHostPane, ModulesPane,
         AdvicePane, WhatIfPane, ServingPane)


# --------------------------------------------------------------------------- explorer
class Explorer:
    """The tabbed explorer of one Profile; ``mimebundle()`` is what a notebook shows."""

    def __init__(self, profile: Profile, static_figures: Collection[str] | None = None) -> None:
        self.profile = profile
        #: the figures :meth:`static_html` embeds (default :data:`STATIC_FIGURES`; ``"all"``: every one)
        self.static_figures = STATIC_FIGURES if static_figures is None else static_figures
        self.report = Report.of(profile)
        self.panes: dict[str, Pane] = {cls.title: cls(self.report) for cls in PANES if cls.shown(profile)}
        #: the tabs' titles in order: :data:`TAB_TITLES`, then those only this kind of run has (Serving)
        self.titles = list(self.panes)
        self.tab = widgets.Tab(children=[p.slot for p in self.panes.values()], titles=self.titles)
        self.tab.observe(self._on_select, "selected_index")
        self.widget = widgets.VBox([self.tab], layout=widgets.Layout(width="100%"))
        self.widget.add_class("geprof-explorer")
        self.panes[self.titles[self.tab.selected_index or 0]].build()

    def _on_select(self, change: dict) -> None:
        if change["new"] is not None:
            self.panes[self.titles[change["new"]]].build()

    def select(self, title: str) -> Pane:
        """Select a tab by title (building it if it is new) and return it."""
        self.tab.selected_index = self.titles.index(title)
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
    what_if = property(lambda self: self.panes["What-if"])

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
