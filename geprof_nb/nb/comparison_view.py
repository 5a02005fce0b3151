"""The compare view: :func:`geprof_nb.compare` side by side, two runs or two steps of one run.

``compare_view(a, b)`` (``%geprof compare A B``, the Steps tab's *compare steps*) shows, top down: the
step split of A and B (a stacked bar each, Computing / exposed Communication / Free, and the table),
the step table, the ops that moved most (regressions, improvements), the op types and the PMU ratios
that changed, and the two interactive timelines (:class:`.timeline.Timeline`) aligned on their step
starts: each opens on its aligned step, and zooming or panning one moves the other by as much, from its
own step's start.  Layout (CSS classes for browser tests and styling)::

    VBox .geprof-compare
      HTML .geprof-compare-head            A and B, and what is compared
      VBox  (blocks)                       split chart and table, step table, moved ops, op types, PMU
      VBox .geprof-compare-timelines       the step each side is aligned on, A's timeline, B's timeline

The same display bundle has a static twin (escaped HTML of every table, the split chart and the task
Gantt of each aligned step as PNGs) and the comparison's text summary.
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as widgets
import pandas as pd

from ..analysis import Profile
from ..analysis.compare import MODEL_COLUMNS, SPLIT_PARTS, Comparison, compare, step_cells
from .blocks import WIDGET_VIEW_MIME, block_widget
from .html_parts import heading, message_html, table_html
from .report import Chart, Picture, draw
from .timeline import Timeline

#: Rows of the moved-ops, op type and PMU tables.
TOP_ROWS = 10
#: Height of each of the two timelines (CSS px): both fit on a screen, one above the other.
TIMELINE_HEIGHT = 300
#: What the chart calls the parts (step_breakdown's column names in the tables).
PART_LABELS = {"Computing": "Computing", "Communication(Not Overlapped)": "exposed Communication",
               "Free": "Free"}
#: The columns of the moved-ops tables, Op Name first (the index of Comparison.ops).
MOVED_COLUMNS = ["OP Type", "Time/step A(us)", "Time/step B(us)", "Time/step Diff(us)", "Time/step Diff(%)",
                 "Count/step A", "Count/step B", "In"]


def aligned_step(profile: Profile) -> int | None:
    """The step a run's timeline is aligned on when two runs are compared: the first of the steps its step
    figure averages (a typical whole step), else its first step; None for a run without steps."""
    split = profile.step_split
    if split is not None and split.steps:
        return int(split.steps[0])
    bounds = profile.source.step_bounds()
    return int(bounds["step"].iloc[0]) if len(bounds) else None


def _whole_counts(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with its count columns as whole numbers where every count is one (the steps' counts, a
    graph's ops per step), so they read 12, not 12.000."""
    counts = [c for c in ("Count/step A", "Count/step B", "Count/step Diff") if c in table.columns]
    whole = [c for c in counts if (table[c].dropna() % 1 == 0).all()]
    return table.astype({c: "Int64" for c in whole}) if whole else table


#: The Comparison's fields a view gives as its own (``%geprof compare`` returns the view: ``c.step``, ``c.ops``,
#: ... read as on the Comparison it shows).
COMPARISON_FIELDS = ("a_name", "b_name", "step", "op_types", "ops", "regressions", "improvements", "pmu", "steps",
                     "split", "summary")


class CompareView:
    """Two runs, or two steps of one run, side by side (see the module docstring); display it, or its
    ``widget``.  ``comparison`` is the :class:`~geprof_nb.analysis.compare.Comparison` it shows, whose tables
    (:data:`COMPARISON_FIELDS`) the view also gives: ``view.regressions`` is ``view.comparison.regressions``."""

    def __getattr__(self, name: str) -> Any:
        if name in COMPARISON_FIELDS and "comparison" in vars(self):
            return getattr(self.comparison, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __init__(self, a: Profile, b: Profile | None = None, steps: tuple[int, int] | None = None,
                 names: tuple[str, str] | None = None, top: int = TOP_ROWS) -> None:
        b = a if b is None else b
        if b is a and steps is None:
            raise ValueError("compare_view of one run compares two of its steps: pass steps=(i, j), e.g. "
                             f"steps=(2, {max(3, len(a.step_trace))})")
        self.a, self.b = a, b
        self.comparison: Comparison = compare(a, b, top=top, names=names, steps=steps)
        #: the step of each side the timelines start at (the steps compared, or each run's typical step)
        self.align: tuple[int | None, int | None] = steps if steps is not None else (aligned_step(a),
                                                                                     aligned_step(b))
        self._split_chart: Chart | None = None
        self._syncing = False

    # ------------------------------------------------------------------ content
    @property
    def what(self) -> str:
        c = self.comparison
        kind = "two steps" if c.steps is not None else "two runs"
        return f"{kind}: A = {c.a_name}, B = {c.b_name} (Diff = B - A)"

    def split_chart(self) -> Chart:
        """A's and B's step split as two stacked bars on one scale."""
        if self._split_chart is None:
            split = self.comparison.split()
            c = self.comparison
            if not len(split):
                picture = Picture("step split of A and B", message="No step split to compare: a side has no "
                                  "step_breakdown (it needs op data: profile with --task-trace on).")
                self._split_chart = Chart("", "", lambda: picture)
            else:
                frame = pd.DataFrame({"Step": [1, 2], **{part: [split.at[part, "A"], split.at[part, "B"]]
                                                         for part in SPLIT_PARTS}})
                labels = ["A", "B"] if c.steps is None else [f"A: step {c.steps[0]}", f"B: step {c.steps[1]}"]
                title = "The step of A and of B" + (" (the steps compared)" if c.steps is not None
                                                     else " (each run's mean whole step period)")
                self._split_chart = Chart("step_split_bars", "", lambda: draw(
                    "step_split_bars", frame, title=title, labels=labels, alt="step split of A and B"))
        return self._split_chart

    def blocks(self) -> list:
        """The view's tables and the split chart, as the widget and the static twin show them."""
        c = self.comparison
        out: list = [self.split_chart()]
        split = c.split()
        if len(split):
            shown = step_cells(split).rename(index={p: PART_LABELS[p] for p in SPLIT_PARTS}).reset_index()
            out.append(table_html(shown, "Step split (us)", "geprof-compare-split", right=("A", "B", "Diff",
                                                                                         "Diff(%)")))
        out.append(table_html(step_cells(c.step).reset_index(), "Step", "geprof-compare-step",
                              right=("A", "B", "Diff", "Diff(%)")))
        per = "in the step" if c.steps is not None else "per step"
        for title, frame, css in ((f"Ops that got slower (time {per} grew most)", c.regressions, "regressions"),
                                  (f"Ops that got faster (time {per} shrank most)", c.improvements,
                                   "improvements")):
            if len(frame):
                columns = [col for col in (*MODEL_COLUMNS, *MOVED_COLUMNS) if col in frame.columns]
                out.append(table_html(_whole_counts(frame[columns]).reset_index(), title, f"geprof-compare-{css}"))
            else:
                out.append(heading(title) + message_html("none"))
        if len(c.op_types):
            out.append(table_html(_whole_counts(c.op_types.head(TOP_ROWS)).reset_index(),
                                  f"OP Types, largest change first (top {min(TOP_ROWS, len(c.op_types))} of "
                                  f"{len(c.op_types)})", "geprof-compare-op-types"))
        if len(c.pmu):
            out.append(table_html(c.pmu.head(TOP_ROWS), "PMU ratios that changed (mean per OP Type)",
                                  "geprof-compare-pmu"))
        return out

    # ------------------------------------------------------------------ timelines
    def _step_window(self, timeline: Timeline, step: int | None) -> tuple[float, float]:
        """Where ``step`` lies on ``timeline``'s clock (µs since its run's first step); its whole run
        for None or a step it does not have."""
        for s, lo, hi in timeline.data.steps:
            if s == step:
                return lo, hi
        return timeline.data.extent

    def _align(self) -> None:
        """Both timelines on their aligned step, over the longer of the two steps."""
        (a0, a1), (b0, b1) = self._step_window(self.timelines[0], self.align[0]), self._step_window(
            self.timelines[1], self.align[1])
        span = max(a1 - a0, b1 - b0)
        pad = 0.02 * span
        self._syncing = True
        try:
            self.timelines[0].window = [a0 - pad, a0 + span + pad]
            self.timelines[1].window = [b0 - pad, b0 + span + pad]
        finally:
            self._syncing = False

    def _follow(self, source: int) -> Any:
        """An observer moving the other timeline as ``timelines[source]`` moved, from its own step's start."""
        def moved(change: dict) -> None:
            if self._syncing:
                return
            other = 1 - source
            shift = (self._step_window(self.timelines[other], self.align[other])[0]
                     - self._step_window(self.timelines[source], self.align[source])[0])
            self._syncing = True
            try:
                self.timelines[other].window = [change["new"][0] + shift, change["new"][1] + shift]
            finally:
                self._syncing = False
        return moved

    def _pick_step(self, side: int) -> Any:
        def picked(change: dict) -> None:
            align = list(self.align)
            align[side] = change["new"]
            self.align = (align[0], align[1])
            self._align()
        return picked

    def _timeline_box(self) -> widgets.Widget:
        c = self.comparison
        self.timelines = (Timeline(self.a, height=TIMELINE_HEIGHT), Timeline(self.b, height=TIMELINE_HEIGHT))
        style = {"description_width": "initial"}
        self.step_pickers = []
        for side, (timeline, name) in enumerate(zip(self.timelines, ("A", "B"))):
            steps = [s for s, _, _ in timeline.data.steps]
            picker = widgets.Dropdown(options=[(f"step {s}", s) for s in steps] or [("no steps", None)],
                                      value=self.align[side] if self.align[side] in steps else
                                      (steps[0] if steps else None), description=f"{name} aligned on",
                                      style=style, disabled=not steps)
            picker.add_class(f"geprof-compare-align-{name.lower()}")
            picker.observe(self._pick_step(side), "value")
            self.step_pickers.append(picker)
        self.align = (self.step_pickers[0].value, self.step_pickers[1].value)
        self._align()
        for side, timeline in enumerate(self.timelines):
            timeline.observe(self._follow(side), "window")
        note = widgets.HTML(message_html("The two timelines start at their aligned steps' starts; zoom or pan one "
                                         "and the other follows, from its own step's start."))
        box = widgets.VBox([widgets.HTML(heading("Timelines, aligned on their step starts")), note,
                            widgets.HBox(self.step_pickers, layout=widgets.Layout(flex_flow="row wrap")),
                            widgets.HTML(f"<b>A</b>: {html.escape(c.a_name)}"), self.timelines[0],
                            widgets.HTML(f"<b>B</b>: {html.escape(c.b_name)}"), self.timelines[1]],
                           layout=widgets.Layout(width="100%"))
        box.add_class("geprof-compare-timelines")
        return box

    # ------------------------------------------------------------------ widget and bundle
    @property
    def widget(self) -> widgets.Widget:
        """The live view (built on first use)."""
        if getattr(self, "_widget", None) is None:
            head = widgets.HTML(f'<p class="geprof-compare-head"><b>geprof compare</b> {html.escape(self.what)}</p>')
            body = [block_widget(b) for b in self.blocks()]
            self._widget = widgets.VBox([head, widgets.VBox(body, layout=widgets.Layout(width="100%")),
                                         self._timeline_box()], layout=widgets.Layout(width="100%"))
            self._widget.add_class("geprof-compare")
        return self._widget

    def static_html(self) -> str:
        """Every table and the split chart, and the task Gantt of each aligned step (no kernel needed)."""
        parts = [f'<p class="geprof-compare-head"><b>geprof compare</b> {html.escape(self.what)}</p>']
        parts += [b.picture.html() if isinstance(b, Chart) else b for b in self.blocks()]
        parts.append(heading("The aligned steps' tasks, each on its own time scale (the interactive timelines, "
                             "aligned on their step starts, need a running kernel)"))
        for name, profile, step in (("A", self.a, self.align[0]), ("B", self.b, self.align[1])):
            if step is None or not len(profile.op_summary) or not (profile.iteration_of_ops == step).any():
                parts.append(message_html(f"{name}: no op tasks to draw"))
                continue
            parts.append(draw("task_gantt", profile.op_summary, iteration=step,
                              iterations=profile.iteration_of_ops.to_numpy(), title=f"{name}: tasks per stream",
                              alt=f"task Gantt of {name}, step {step}").html())
        return f'<div class="geprof-compare-static">{"".join(parts)}</div>'

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, object]:
        return {WIDGET_VIEW_MIME: {"version_major": 2, "version_minor": 0, "model_id": self.widget.model_id},
                "text/html": self.static_html(), "text/plain": self.comparison.summary()}


def compare_view(a: Profile, b: Profile | None = None, steps: tuple[int, int] | None = None,
                 names: tuple[str, str] | None = None, top: int = TOP_ROWS) -> CompareView:
    """Show :func:`geprof_nb.compare` side by side: ``compare_view(a, b)`` two runs, ``compare_view(p,
    steps=(2, 7))`` two steps of one run (``compare_view(a, b, steps=(i, j))`` step ``i`` of ``a`` against
    step ``j`` of ``b``).  Display the result (a cell's value); a wrong argument is a TypeError or
    ValueError naming it."""
    return CompareView(a, b, steps=steps, names=names, top=top)
