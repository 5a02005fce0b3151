"""What ``%geprof whatif`` and the explorer's What-if tab show of a what-if change (docs/guide/what_if.md): each
step's predicted critical path split beside today's (a table and :func:`.plots.what_if_bars`), what moved on the
path (``WhatIf.explain()``) and, when asked, the re-simulation it is checked against (``WhatIf.verify()``).

One view for both, built from blocks (:mod:`.blocks`), so the magic's output and the tab read the same;
:class:`WhatIfControls` are the tab's knobs (the common ones: an op pattern sped up, one removed, the host gap cap,
a link's bandwidth for a run with HCCL sub-tasks) and its Apply button.

Layout of the controls (CSS classes for browser tests)::

    VBox .geprof-whatif-controls
      HBox   Text .geprof-whatif-pattern, FloatSlider .geprof-whatif-speedup, Text .geprof-whatif-remove
      HBox   Checkbox .geprof-whatif-cap-host, FloatText .geprof-whatif-host-gap, [link Dropdown, FloatSlider]
      HBox   Checkbox .geprof-whatif-verify, Button .geprof-whatif-apply
      VBox .geprof-whatif-result    the view's blocks, or the refusal's message (.geprof-whatif-error)
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as widgets
import numpy as np
import pandas as pd

from ..analysis import ClusterProfile, Profile
from ..analysis.timing.critical_path import summary
from ..analysis.timing.dependency_graph import KINDS
from ..analysis.timing.what_if import LINK_TYPES, WhatIf, WhatIfChange
from .blocks import block_widget, blocks_html
from .html_parts import heading, message_html, table_html, table_text
from .report import Chart, draw

#: Rows of ``explain()`` shown (the largest changes of one step).
EXPLAIN_ROWS = 10
#: The error types a change or its re-simulation is refused with: shown as a message, not a traceback.
REFUSALS = (ValueError, TypeError, RuntimeError)


def describe(change: WhatIfChange) -> str:
    """The change in words: ``MatMul* 2x faster; Dropout* removed; host gaps capped at 0 us``."""
    parts = [f"{p} {f:g}x faster" for p, f in change.op_speedup or ()]
    parts += [f"{p} removed" for p in change.remove_ops or ()]
    parts += [f"{link} bandwidth x{f:g}" for link, f in change.link_bandwidth or ()]
    if change.host_gap_us is not None:
        parts.append(f"host gaps capped at {change.host_gap_us:g} us")
    if change.device is not None:
        parts.append(f"on {change.device}")
    return "; ".join(parts) or "no change"


def _us(ns: pd.Series) -> pd.Series:
    return ns.astype(np.float64) / 1000.0


class WhatIfView:
    """A what-if's predicted steps beside today's; ``verify=True`` adds the re-simulation's comparison (or the
    reason there is none).  ``display(view)`` shows it; :meth:`blocks` is the explorer tab's content."""

    def __init__(self, profile: Profile | ClusterProfile, what_if: WhatIf, verify: bool = False) -> None:
        self.profile = profile
        self.what_if = what_if
        #: today's critical path per step (the rank that sets it, for a cluster): ``critical_path_summary``
        self.now = summary(profile.critical_path())
        self.verification: pd.DataFrame | None = None
        self.verify_error: str | None = None
        if verify:
            try:
                self.verification = what_if.verify()
            except REFUSALS as exc:
                self.verify_error = f"cannot verify: {exc}"

    @property
    def change(self) -> str:
        return describe(self.what_if.change)

    def comparison(self) -> pd.DataFrame:
        """Per step: its time now and predicted (us), the change, and each kind's time on the path now and
        predicted (the kinds on either path)."""
        p = self.what_if.predicted
        now = self.now.set_index("iteration").reindex(p["iteration"])
        out = pd.DataFrame({"Step": p["iteration"].to_numpy(), "Now(us)": _us(p["now_ns"]).to_numpy(),
                            "Predicted(us)": _us(p["predicted_ns"]).to_numpy(),
                            "Delta(us)": _us(p["delta_ns"]).to_numpy()})
        out["Change(%)"] = np.where(p["now_ns"] > 0, p["delta_ns"] / p["now_ns"].where(p["now_ns"] > 0) * 100, 0.0)
        for k in KINDS:
            before, after = now[f"{k}_ns"].fillna(0).to_numpy(np.float64), p[f"{k}_ns"].to_numpy(np.float64)
            if before.any() or after.any():
                out[f"{k} now(us)"] = before / 1000.0
                out[f"{k} predicted(us)"] = after / 1000.0
        if "rank" in p:
            out["Rank"] = p["rank"].to_numpy()
        return out

    @property
    def explained_step(self) -> int | None:
        """The step whose path changes :meth:`explained` lists: the last one."""
        p = self.what_if.predicted
        return int(p["iteration"].iloc[-1]) if len(p) else None

    def explained(self, rows: int = EXPLAIN_ROWS) -> tuple[pd.DataFrame, int]:
        """``explain()``'s largest changes of :attr:`explained_step` (us), and how many it has."""
        e = self.what_if.explain()
        e = e[e["iteration"] == self.explained_step]
        shown = e.head(rows)
        out = pd.DataFrame({"Op": shown["op_name"], "Kind": shown["kind"], "Now(us)": _us(shown["now_ns"]),
                            "Predicted(us)": _us(shown["predicted_ns"]), "Delta(us)": _us(shown["delta_ns"]),
                            "Moved": shown["moved"]})
        return out.reset_index(drop=True), len(e)

    def chart(self) -> Chart:
        predicted = self.what_if.predicted
        return Chart("what_if_bars", "plots.what_if_bars(p.critical_path_summary, p.what_if(...).predicted)",
                     lambda: draw("what_if_bars", self.now, predicted, alt="what-if chart"), "What-if")

    def headline(self) -> str:
        p = self.what_if.predicted
        if not len(p):
            return f"What-if ({self.change}): no steps with device tasks to re-time"
        now, new = p["now_ns"].mean() / 1000.0, p["predicted_ns"].mean() / 1000.0
        change = (new / now - 1) * 100 if now else 0.0
        return (f"What-if ({self.change}): mean step {now:,.3f} us now, {new:,.3f} us predicted ({change:+.1f}%), "
                f"{len(p)} steps; the dependency graph re-timed, the model not re-run")

    def blocks(self) -> list:
        out: list = [f'<p class="geprof-whatif-headline"><b>{html.escape(self.headline())}</b></p>']
        if not len(self.what_if.predicted):
            return out
        out += [self.chart(), table_html(self.comparison(), "Each step now and predicted: the critical path's time "
                                                            "by kind (us)", classes="geprof-whatif-table")]
        table, total = self.explained()
        if len(table):
            out.append(table_html(table, f"What moved on step {self.explained_step}'s critical path: the "
                                         f"{len(table)} largest of {total} changes (WhatIf.explain())",
                                  classes="geprof-whatif-explain"))
        else:
            out.append(message_html(f"Nothing on step {self.explained_step}'s critical path changes."))
        out += self.verify_blocks()
        return out

    def verify_blocks(self) -> list:
        if self.verify_error is not None:
            return [heading("Verify"), message_html(self.verify_error)]
        if self.verification is None:
            return []
        v = self.verification
        shown = pd.DataFrame({"Step": v["iteration"], "Predicted(us)": _us(v["predicted_ns"]),
                              "Simulated(us)": _us(v["simulated_ns"]), "Error(%)": v["error"] * 100})
        worst = float(v["error"].abs().max() * 100) if len(v) else 0.0
        return [table_html(shown, f"Verify: the prediction against the run re-simulated under the change (worst "
                                  f"error {worst:.2f}%)", classes="geprof-whatif-verify")]

    def text(self) -> str:
        lines = [self.headline()]
        if len(self.what_if.predicted):
            lines += ["", table_text(self.comparison(), "each step now and predicted (us)")]
        if self.verify_error is not None:
            lines += ["", self.verify_error]
        elif self.verification is not None:
            lines += ["", table_text(self.verification, "verify")]
        return "\n".join(lines)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/html": f'<div class="geprof-whatif">{blocks_html(self.blocks(), "all")}</div>',
                "text/plain": self.text()}


def top_path_op_type(profile: Profile | ClusterProfile) -> str:
    """The OP Type with the most compute time on the critical paths: the what-if worth trying first ("" if none)."""
    path = profile.critical_path()
    compute = path[(path["kind"] == "compute") & path["op_type"].notna() & path["op_type"].ne("N/A")]
    if not len(compute):
        return ""
    return str(compute.groupby(compute["op_type"].astype(str))["duration"].sum().idxmax())


def _patterns(text: str) -> list[str]:
    """A comma-separated list of patterns, blanks dropped."""
    return [p.strip() for p in text.split(",") if p.strip()]


def _classed(widget: widgets.Widget, css: str) -> widgets.Widget:
    widget.add_class(css)
    return widget


class WhatIfControls:
    """The What-if tab's knobs, an Apply button and the result: :meth:`apply` shows :class:`WhatIfView` of the
    change, or why the run refuses it."""

    def __init__(self, profile: Profile | ClusterProfile) -> None:
        self.profile = profile
        style = {"description_width": "initial"}
        self.pattern = _classed(widgets.Text(value=top_path_op_type(profile), placeholder="MatMul*, Conv2D*",
                                             description="Speed up ops", style=style), "geprof-whatif-pattern")
        self.speedup = _classed(widgets.FloatSlider(value=2.0, min=1.0, max=10.0, step=0.1, description="by x",
                                                    continuous_update=False, style=style), "geprof-whatif-speedup")
        self.remove = _classed(widgets.Text(placeholder="Dropout*", description="Remove ops", style=style),
                               "geprof-whatif-remove")
        self.cap_host = _classed(widgets.Checkbox(value=False, description="cap host gaps at", indent=False,
                                                  layout=widgets.Layout(width="auto")), "geprof-whatif-cap-host")
        self.host_gap = _classed(widgets.BoundedFloatText(value=0.0, min=0.0, max=1e9, description="us",
                                                          layout=widgets.Layout(width="14em")),
                                 "geprof-whatif-host-gap")
        knobs = [self.cap_host, self.host_gap]
        self.link = self.link_factor = None
        if has_links(profile):
            self.link = widgets.Dropdown(options=list(LINK_TYPES), value="HCCS", description="link", style=style)
            self.link_factor = _classed(widgets.FloatSlider(value=1.0, min=0.1, max=4.0, step=0.1,
                                                            description="bandwidth x", continuous_update=False,
                                                            style=style), "geprof-whatif-link")
            knobs += [self.link, self.link_factor]
        self.verify = _classed(widgets.Checkbox(value=False, description="verify (re-simulate the run)",
                                                indent=False, disabled=getattr(profile, "replay", None) is None,
                                                layout=widgets.Layout(width="auto")), "geprof-whatif-verify")
        self.button = _classed(widgets.Button(description="Apply", button_style="primary",
                                              tooltip="re-time every step under the change"), "geprof-whatif-apply")
        self.button.on_click(self.apply)
        self.result = _classed(widgets.VBox(layout=widgets.Layout(width="100%")), "geprof-whatif-result")
        self.result.children = [widgets.HTML(message_html(
            "Choose a change and press Apply: each step's critical path is re-timed under it (the model is not "
            "re-run); %geprof whatif takes every knob."))]
        wrap = widgets.Layout(flex_flow="row wrap")
        self.widget = _classed(widgets.VBox([widgets.HBox([self.pattern, self.speedup, self.remove], layout=wrap),
                                             widgets.HBox(knobs, layout=wrap),
                                             widgets.HBox([self.verify, self.button], layout=wrap), self.result],
                                            layout=widgets.Layout(width="100%")), "geprof-whatif-controls")
        #: the last view shown (None before Apply, or after a refusal)
        self.view: WhatIfView | None = None

    def change(self) -> dict:
        """The ``Profile.what_if`` keywords the knobs set."""
        out: dict[str, Any] = {}
        if _patterns(self.pattern.value) and self.speedup.value != 1.0:
            out["op_speedup"] = {p: float(self.speedup.value) for p in _patterns(self.pattern.value)}
        if _patterns(self.remove.value):
            out["remove_ops"] = _patterns(self.remove.value)
        if self.cap_host.value:
            out["host_gap_us"] = float(self.host_gap.value)
        if self.link_factor is not None and self.link_factor.value != 1.0:
            out["link_bandwidth"] = {self.link.value: float(self.link_factor.value)}
        return out

    def apply(self, _button: Any = None) -> WhatIfView | None:
        """Show the view of the knobs' change (or the message saying why it cannot be predicted); returns it."""
        self.view = None
        change = self.change()
        if not change:
            self._say("No change chosen: give ops to speed up (a factor above 1) or remove, a host gap cap or a "
                      "link factor.")
            return None
        try:
            self.view = WhatIfView(self.profile, self.profile.what_if(**change), verify=self.verify.value)
        except REFUSALS as exc:
            self._say(str(exc))
            return None
        self.result.children = [block_widget(b) for b in self.view.blocks()]
        return self.view

    def _say(self, text: str) -> None:
        self.result.children = [_classed(widgets.HTML(message_html(text)), "geprof-whatif-error")]


def has_links(profile: Profile | ClusterProfile) -> bool:
    """Whether the run has HCCL sub-tasks (a link factor changes something)."""
    ranks = getattr(profile, "ranks", None)
    runs = list(ranks.values()) if isinstance(ranks, dict) else [profile]
    return any(len(p.hccl_tasks) for p in runs)
