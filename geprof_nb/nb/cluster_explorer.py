"""The explorer of a cluster: what ``display(cluster)`` shows for a :class:`ClusterProfile`.

Three tabs, in the single-run explorer's style (:mod:`.explorer`, whose pieces it reuses, with
:mod:`.report`'s figures and :mod:`.html_parts`):

* **Cluster**: the headline (ranks, steps, step time, slow ranks and links), the cluster
  findings (``ClusterProfile.advise``), rank x step heatmaps of step time and of collective
  wait time, the communication matrix heatmap (:mod:`.cluster_plots`: binned beyond 64 ranks),
  and the slow_ranks, slow_links, stragglers and cluster_step_trace_time tables (top rows,
  the count stated);
* **Parallelism**: the communication groups (``ClusterProfile.communication_groups``), the pipeline chart
  (a lane per stage, the passes as bars, the bubbles as gaps: :func:`.plots.pipeline_chart`) with
  ``pipeline_bubbles``, and for a MoE model the expert heatmap (layer x expert, tokens) with
  ``expert_imbalance``;
* **Ranks**: a rank dropdown; choosing a rank shows that rank's full single-run explorer
  (built when first chosen, then kept);
* **What-if**: the single-run explorer's what-if knobs on every rank at once (``ClusterProfile.what_if``: a step's
  prediction is its slowest rank's; :class:`.whatif_view.WhatIfControls`), interactive only.

Layout (CSS classes for browser tests and styling)::

    VBox .geprof-explorer .geprof-cluster-explorer
      Tab
        VBox .geprof-tab-cluster     headline, findings, heatmaps, tables
        VBox .geprof-tab-parallelism groups, pipeline chart and bubbles, expert heatmap
        VBox .geprof-tab-ranks       Dropdown .geprof-rank-select, the chosen rank's explorer
        VBox .geprof-tab-what-if     what-if knobs, Apply, the predicted steps beside today's

Like the single-run explorer, the same display call carries a static twin: escaped HTML of the
Cluster tab with its figures, the step time heatmap PNG, and a text summary.  Every string
from the data (rank run names, op names, findings) is escaped.
"""

from __future__ import annotations

import html
import traceback
from functools import cached_property
from typing import Any

import ipywidgets as widgets
import pandas as pd

from ..analysis import ClusterProfile
from . import cluster_plots, plots
from .blocks import WIDGET_VIEW_MIME, PictureView
from .explorer import PENDING, Explorer, tab_class
from .html_parts import advice_html, bounded, list_html, message_html, table_html, table_text
from .report import Picture, render

TAB_TITLES = ("Cluster", "Parallelism", "Ranks", "What-if")
#: Rows of each table the Cluster tab shows (the count is stated).
TABLE_ROWS = 20
#: Findings in the text summary.
TOP_FINDINGS = 5
MSG_NO_STEPS = "No per-rank step data: profile with --training-trace on and --task-trace on."
MSG_NO_COLLECTIVES = "No collectives in these runs, so no wait time (a job of one rank, or no AllReduce in the graph)."
MSG_NO_MATRIX = ("No communication between ranks: profile with --hccl on for the HCCL sub-tasks "
                 "(the communication matrix and slow links come from their transfers).")
MSG_NO_FINDINGS = "No cluster findings: no rank, link or collective crossed the advisor's thresholds."
MSG_NO_SLOW_LINKS = "No slow links: every link is within {:.0%} of its link type's median bandwidth."
MSG_NO_GROUPS = ("No parallel groups: the ranks recorded no parallel_group_info (a torch_npu run records it in "
                 "profiler_metadata.json; a simulated one for ge.models.llm with a ge.Parallel, or any cluster).")
MSG_NO_PIPELINE = ("No pipeline passes: the ranks recorded no forward_step / backward_step mstx ranges "
                   "(a pipeline-parallel ge.models.llm records them; MindSpeed with mstx on).")


class ClusterReport:
    """What the Cluster tab, the static report and the text summary show, computed once."""

    def __init__(self, cluster: ClusterProfile) -> None:
        self.cluster = cluster

    @cached_property
    def findings(self) -> pd.DataFrame:
        return self.cluster.advise()

    @cached_property
    def steps(self) -> int:
        cstt = self.cluster.cluster_step_trace_time
        return int(cstt["Step"].nunique()) if len(cstt) else 0

    @cached_property
    def headline(self) -> str:
        c = self.cluster
        parts = [c.name, f"{len(c.ranks)} ranks"]
        if c.world_size != len(c.ranks):
            parts[-1] += f" of {c.world_size}"
        sr = c.slow_ranks
        if len(sr):
            parts.append(f"{self.steps} steps, median step {sr['Step Time(us)'].median():,.1f} us")
            slow = sr[sr["Slow"]]["Rank"].tolist()
            parts.append(f"slow ranks: {', '.join(map(str, slow[:8]))}{' ...' if len(slow) > 8 else ''}"
                         if slow else "no slow rank")
        links = c.slow_links
        if len(links):
            parts.append(f"{len(links)} slow link{'s' if len(links) > 1 else ''}")
        return " | ".join(parts)

    @cached_property
    def step_heatmap(self) -> Picture:
        return render("step time heatmap", lambda: cluster_plots.rank_step_heatmap(
            self.cluster.rank_step("Stage"), title="Step time per rank and step", value="step time"))

    @cached_property
    def wait_heatmap(self) -> Picture:
        return render("wait time heatmap", lambda: cluster_plots.rank_step_heatmap(
            self.cluster.rank_step("Wait Time(us)"), title="Collective wait time (Notify_Wait) per rank and step",
            value="wait time", cmap="magma"))

    @cached_property
    def pipeline_chart(self) -> Picture:
        return render("pipeline chart", lambda: plots.pipeline_chart(self.cluster.pipeline))

    @cached_property
    def expert_heatmap(self) -> Picture:
        return render("expert heatmap", lambda: plots.expert_heatmap(self.cluster.expert_load))

    @cached_property
    def matrix_heatmap(self) -> Picture:
        return render("communication matrix", lambda: cluster_plots.communication_heatmap(
            self.cluster.communication_matrix))


class ClusterPane:
    """The Cluster tab: built when first shown; the same blocks make the static report."""

    title = "Cluster"

    def __init__(self, report: ClusterReport) -> None:
        self.report = report
        self.box = widgets.VBox(layout=widgets.Layout(width="100%"))
        self.box.add_class(tab_class(self.title))
        self.slot = widgets.VBox([widgets.HTML(message_html(PENDING))], layout=widgets.Layout(width="100%"))
        self.built = False

    @cached_property
    def content(self) -> list:
        """HTML strings and Pictures, in order."""
        r, c = self.report, self.report.cluster
        out: list = [f'<p class="geprof-headline"><b>geprof</b> {html.escape(r.headline)}<br>'
                     f"<small>cluster directory: {html.escape(str(c.path))}</small></p>"]
        findings = r.findings
        if len(findings):
            out += [f"<h4>Findings ({len(findings)}, highest priority first)</h4>", advice_html(findings)]
        else:
            out.append(message_html(MSG_NO_FINDINGS))
        if not len(c.cluster_step_trace_time):
            out.append(message_html(MSG_NO_STEPS))
        else:
            out.append(r.step_heatmap)
            out.append(r.wait_heatmap if len(c.rank_step_wait) else message_html(MSG_NO_COLLECTIVES))
        out.append(r.matrix_heatmap if len(c.communication_matrix) else message_html(MSG_NO_MATRIX))
        sr = c.slow_ranks
        if len(sr):
            t, title = bounded(sr, "slow_ranks: ranks by own time (Computing + Free) per step, slowest first (us)",
                               TABLE_ROWS)
            out.append(table_html(t, title, "geprof-slow-ranks"))
        links = c.slow_links
        if len(links):
            t, title = bounded(links, "slow_links: links below their link type's median bandwidth", TABLE_ROWS)
            out.append(table_html(t, title, "geprof-slow-links"))
        elif len(c.communication_matrix):
            out.append(message_html(MSG_NO_SLOW_LINKS.format(c.tables().slow_link_threshold)))
        st = c.stragglers
        if len(st):
            late = st.sort_values("Late By(us)", ascending=False, kind="stable")
            t, title = bounded(late, "stragglers: the last rank at each collective, latest first", TABLE_ROWS)
            out.append(table_html(t, title, "geprof-stragglers"))
        cstt = c.cluster_step_trace_time
        if len(cstt):
            t, title = bounded(cstt, "cluster_step_trace_time (msprof-analyze columns, us)", TABLE_ROWS)
            out.append(table_html(t, title))
        if c.notes:
            out.append("<h4>Notes</h4>" + list_html(c.notes, "geprof-notes"))
        return out

    def build(self) -> ClusterPane:
        if not self.built:
            self.built = True
            try:
                self.box.children = [PictureView(b).box if isinstance(b, Picture) else widgets.HTML(b)
                                     for b in self.content]
            except Exception:  # noqa: BLE001 - an error shows in the tab rather than vanishing in a callback
                self.box.children = [widgets.HTML(f"<pre>{html.escape(traceback.format_exc())}</pre>")]
            self.slot.children = [self.box]
        return self

    def static_html(self) -> str:
        try:
            body = "".join(b.html() if isinstance(b, Picture) else b for b in self.content)
        except Exception:  # noqa: BLE001
            body = f"<pre>{html.escape(traceback.format_exc())}</pre>"
        title = html.escape(self.title)
        return f'<section class="geprof-static-{title.lower()}"><h3>{title}</h3>{body}</section>'


class ParallelismPane(ClusterPane):
    """The Parallelism tab: the communication groups, the pipeline chart and bubbles, the expert load."""

    title = "Parallelism"

    @cached_property
    def content(self) -> list:
        r, c = self.report, self.report.cluster
        out: list = []
        groups = c.communication_groups
        if len(groups):
            kinds = groups["Type"].value_counts()
            counts = ", ".join(f"{kinds[k]} {k}" for k in groups["Type"].unique())
            t, title = bounded(groups, f"communication_groups ({counts}; msprof-analyze's communication_group_map)",
                               TABLE_ROWS * 2)
            out.append(table_html(t, title, "geprof-groups"))
        else:
            out.append(message_html(MSG_NO_GROUPS))
        sections = [
            (c.pipeline_bubbles, lambda: r.pipeline_chart, "pipeline_bubbles: each stage's idle time per step (us) "
             "and share of the pipeline and of the step", "geprof-bubbles", MSG_NO_PIPELINE),
            (c.expert_imbalance, lambda: r.expert_heatmap, "expert_imbalance: tokens max / mean per MoE layer and "
             "the expert time it costs per step (us)", "geprof-expert-imbalance", None),
        ]
        for frame, chart, caption, css, missing in sections:
            if len(frame):
                t, title = bounded(frame, caption, TABLE_ROWS)
                out += [chart(), table_html(t, title, css)]
            elif missing:
                out.append(message_html(missing))
        return out


class RanksPane:
    """The Ranks tab: a dropdown of ranks and the chosen rank's single-run explorer."""

    title = "Ranks"

    def __init__(self, cluster: ClusterProfile) -> None:
        self.cluster = cluster
        self.explorers: dict[int, Explorer] = {}
        self.select = widgets.Dropdown(options=[(f"rank {r}", r) for r in cluster.ranks], description="Rank",
                                       value=None)
        self.select.add_class("geprof-rank-select")
        self.view = widgets.VBox(layout=widgets.Layout(width="100%"))
        self.box = widgets.VBox([self.select, self.view], layout=widgets.Layout(width="100%"))
        self.box.add_class(tab_class(self.title))
        self.slot = widgets.VBox([widgets.HTML(message_html(PENDING))], layout=widgets.Layout(width="100%"))
        self.built = False
        self.select.observe(self._on_select, "value")

    def build(self) -> RanksPane:
        if not self.built:
            self.built = True
            self.slot.children = [self.box]
            if self.cluster.ranks:
                self.select.value = next(iter(self.cluster.ranks))
        return self

    def show(self, rank: int) -> Explorer:
        """Show (building once) the explorer of ``rank``; returns it."""
        self.build()
        self.select.value = rank
        return self.explorers[rank]

    def _on_select(self, change: dict) -> None:
        rank = change["new"]
        if rank is None:
            return
        try:
            if rank not in self.explorers:
                self.explorers[rank] = Explorer(self.cluster.rank(rank))
            self.view.children = [self.explorers[rank].widget]
        except Exception:  # noqa: BLE001
            self.view.children = [widgets.HTML(f"<pre>{html.escape(traceback.format_exc())}</pre>")]

    def static_html(self) -> str:
        """The ranks and their run directories (a static report does not embed every rank's report)."""
        rows = pd.DataFrame({"Rank": list(self.cluster.ranks),
                             "Run": [p.name for p in self.cluster.ranks.values()],
                             "Path": [str(p.path) for p in self.cluster.ranks.values()]})
        t, title = bounded(rows, "ranks (each rank's explorer: display(cluster.rank(r)))", 64)
        return f'<section class="geprof-static-ranks"><h3>Ranks</h3>{table_html(t, title)}</section>'


class ClusterWhatIfPane:
    """The What-if tab: a change on every rank (built when first shown; not in the static report, a what-if needs
    a change chosen)."""

    title = "What-if"

    def __init__(self, cluster: ClusterProfile) -> None:
        self.cluster = cluster
        self.box = widgets.VBox(layout=widgets.Layout(width="100%"))
        self.box.add_class(tab_class(self.title))
        self.slot = widgets.VBox([widgets.HTML(message_html(PENDING))], layout=widgets.Layout(width="100%"))
        self.built = False

    def build(self) -> ClusterWhatIfPane:
        if not self.built:
            self.built = True
            from .whatif_view import WhatIfControls

            try:
                self.controls = WhatIfControls(self.cluster)
                self.box.children = [self.controls.widget]
            except Exception:  # noqa: BLE001 - an error shows in the tab rather than vanishing in a callback
                self.box.children = [widgets.HTML(f"<pre>{html.escape(traceback.format_exc())}</pre>")]
            self.slot.children = [self.box]
        return self


class ClusterExplorer:
    """The tabbed explorer of a ClusterProfile; ``mimebundle()`` is what a notebook shows."""

    def __init__(self, cluster: ClusterProfile) -> None:
        self.cluster = cluster
        self.report = ClusterReport(cluster)
        self.cluster_pane = ClusterPane(self.report)
        self.ranks = RanksPane(cluster)
        self.parallelism = ParallelismPane(self.report)
        self.what_if = ClusterWhatIfPane(cluster)
        self.panes = {"Cluster": self.cluster_pane, "Parallelism": self.parallelism, "Ranks": self.ranks,
                      "What-if": self.what_if}
        self.tab = widgets.Tab(children=[p.slot for p in self.panes.values()], titles=list(TAB_TITLES))
        self.tab.observe(self._on_select, "selected_index")
        self.widget = widgets.VBox([self.tab], layout=widgets.Layout(width="100%"))
        self.widget.add_class("geprof-explorer")
        self.widget.add_class("geprof-cluster-explorer")
        self.panes[TAB_TITLES[self.tab.selected_index or 0]].build()

    def _on_select(self, change: dict) -> None:
        if change["new"] is not None:
            self.panes[TAB_TITLES[change["new"]]].build()

    def select(self, title: str):
        """Select a tab by title (building it if it is new) and return its pane."""
        self.tab.selected_index = TAB_TITLES.index(title)
        return self.panes[title].build()

    def static_html(self) -> str:
        return (f'<div class="geprof-report geprof-cluster-report">{self.cluster_pane.static_html()}'
                f"{self.parallelism.static_html()}{self.ranks.static_html()}</div>")

    def text_summary(self) -> str:
        r, c = self.report, self.cluster
        lines = [f"geprof {r.headline}", f"cluster directory: {c.path}"]
        sr = c.slow_ranks
        if len(sr):
            cols = ["Rank", "Step Time(us)", "Computing(us)", "Free(us)", "Wait Time(us)", "Own Time Ratio", "Slow"]
            shown = sr.head(5)
            lines += ["", table_text(shown[cols], f"slowest ranks ({len(shown)} of {len(sr)}; cluster.slow_ranks)")]
        if len(c.slow_links):
            cols = ["Src Rank", "Dst Rank", "Link Type", "Bandwidth(GB/s)", "Median Bandwidth(GB/s)"]
            lines += ["", table_text(c.slow_links.head(5)[cols], "slow links (cluster.slow_links)")]
        lines += self.parallelism_summary()
        findings = r.findings
        if len(findings):
            lines += ["", "findings:"]
            lines += [f"  [{f.Priority}] {f.Rule}: {f.Finding}" for f in findings.head(TOP_FINDINGS).itertuples()]
        lines += ["", "(the explorer's Cluster tab has the heatmaps, its Parallelism tab the groups and the pipeline, "
                  "its Ranks tab each rank's explorer)"]
        return "\n".join(lines)

    def parallelism_summary(self) -> list[str]:
        """The groups by type and each stage's bubble, for the text summary (nothing for a data-parallel job)."""
        c = self.cluster
        groups = c.communication_groups
        if not len(groups) or set(groups["Type"]) <= {"world"}:
            return []
        kinds = groups["Type"].value_counts()
        lines = ["", "groups: " + ", ".join(f"{kinds[k]} {k}" for k in groups["Type"].unique())
                 + " (cluster.communication_groups)"]
        b = c.pipeline_bubbles
        if len(b) > 1:
            lines.append("pipeline bubble per stage: " + ", ".join(
                f"{int(s)}: {r:.0%}" for s, r in zip(b["Stage"], b["Bubble Ratio"]))
                + f" (uniform stages: {b['Ideal Bubble Ratio'].iloc[0]:.0%}; cluster.pipeline_bubbles)")
        return lines

    def widget_view(self) -> dict[str, Any]:
        return {"version_major": 2, "version_minor": 0, "model_id": self.widget.model_id}

    def mimebundle(self) -> dict[str, object]:
        """Widget view, static HTML, the step time heatmap PNG and a text summary, for one display call."""
        bundle: dict[str, object] = {WIDGET_VIEW_MIME: self.widget_view(), "text/html": self.static_html()}
        heatmap = self.report.step_heatmap
        if heatmap.png is not None:
            bundle["image/png"] = heatmap.png
        bundle["text/plain"] = self.text_summary()
        return bundle

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, object]:
        return self.mimebundle()


def cluster_mimebundle(cluster: ClusterProfile) -> dict[str, object]:
    """The raw bundle of a ClusterProfile (what ``display(cluster)`` shows once the extension is loaded)."""
    return ClusterExplorer(cluster).mimebundle()


def explore_cluster(cluster: ClusterProfile) -> ClusterExplorer:
    """A ClusterExplorer of ``cluster``; display it (or its ``.widget``) in a notebook."""
    return ClusterExplorer(cluster)
