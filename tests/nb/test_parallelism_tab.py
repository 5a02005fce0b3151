"""The cluster explorer's Parallelism tab: the group map, the pipeline chart (a lane per stage, a bar per pass,
the bubbles as gaps) with the bubbles table, the expert heatmap of a MoE run; names from the run escaped."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.nb import cluster_explorer as CX
from geprof_nb.nb import plots
from geprof_nb.nb.report import Picture
from helpers.cluster_testing import simulate_cluster

HOSTILE = "<img src=x onerror=alert(1)>"
P = ge.Parallel


def _rename_group(root: Path, old: str, new: str) -> None:
    """Every rank's record of group ``old`` renamed ``new`` (a communicator name is the job's to choose)."""
    for info_path in root.glob("rank_*/PROF_*/info.json"):
        info = json.loads(info_path.read_text())
        groups = info["parallel"]["parallel_group_info"]
        if old in groups:
            groups[new] = groups.pop(old)
            info_path.write_text(json.dumps(info))


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory):
    g = ge.models.llm("tiny-llama", seq_len=256, parallel=P(tp=2, pp=2, dp=2, micro_batches=4))
    c = simulate_cluster(tmp_path_factory.mktemp("hybrid"), ranks=8, steps=2, graph=g, task_trace="on")
    tp01 = next(k for k, v in c.rank(0).info["parallel"]["parallel_group_info"].items() if v["group_name"] == "tp")
    _rename_group(c.path, tp01, HOSTILE)
    return geprof_nb.load(c.path)


def test_the_tab_has_the_group_map_the_pipeline_chart_and_the_bubbles(hybrid):
    e = CX.ClusterExplorer(hybrid)
    pane = e.select("Parallelism")
    pictures = [b for b in pane.content if isinstance(b, Picture)]
    assert [p.alt for p in pictures] == ["pipeline chart"]  # no experts in tiny-llama
    assert pictures[0].png.startswith(b"\x89PNG")
    page = pane.static_html()
    assert "communication_groups (1 world, 4 tp, 4 pp, 4 dp;" in page
    assert html.escape(HOSTILE) in page and HOSTILE not in page
    assert "geprof-table geprof-bubbles" in page and '<section class="geprof-static-parallelism">' in page
    assert pane.static_html() in e.static_html()
    b = hybrid.pipeline_bubbles["Bubble Ratio"]
    assert (f"groups: 1 world, 4 tp, 4 pp, 4 dp (cluster.communication_groups)\n"
            f"pipeline bubble per stage: 0: {b[0]:.0%}, 1: {b[1]:.0%} (uniform stages: 20%;") in e.text_summary()


def test_the_pipeline_chart_has_a_lane_per_stage_and_a_bar_per_pass(hybrid):
    ax = plots.pipeline_chart(hybrid.pipeline).axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["stage 0 (rank 0)", "stage 1 (rank 4)"]
    bars = ax.collections  # one broken_barh per pass of the last step, on each stage's first rank
    assert len(bars) == 2 * 4 * 2
    spans = sorted((float(b.get_paths()[0].vertices[:, 0].min()), float(b.get_paths()[0].vertices[:, 0].max()))
                   for b in bars)
    last = hybrid.pipeline[(hybrid.pipeline["Step"] == 2) & hybrid.pipeline["Rank"].isin([0, 4])]
    origin = last["Start(us)"].min()
    expected = sorted(zip((last["Start(us)"] - origin) / 1000, (last["End(us)"] - origin) / 1000))
    assert np.allclose(spans, expected)
    # the bubbles are the gaps: stage 0's lane covers its busy time of the step, not the whole pipeline
    stage0 = last[last["Rank"] == 0]
    assert (stage0["Duration(us)"].sum() / (last["End(us)"].max() - origin)) == pytest.approx(
        1 - hybrid.pipeline_bubbles.loc[0, "Bubble Ratio"], abs=0.05)
    labels = sorted(t.get_text() for t in ax.texts)
    assert labels == sorted([str(m) for m in range(4)] * 4)


@pytest.mark.slow
def test_a_moe_run_has_the_expert_heatmap_of_its_tokens(tmp_path):
    g = ge.models.llm("tiny-moe", seq_len=1024, parallel=P(dp=4, ep=4, micro_batches=2))
    c = simulate_cluster(tmp_path, ranks=4, steps=1, graph=g, faults={"expert_skew": 2.0}, task_trace="on")
    pane = CX.ClusterExplorer(c).select("Parallelism")
    (heatmap,) = [b for b in pane.content if isinstance(b, Picture) and b.alt == "expert heatmap"]
    cells = heatmap.figure.axes[0].images[0].get_array()
    recorded = [[c.rank(r).info["parallel"]["moe"]["tokens_per_micro_batch"][str(layer)][0] * 2 for r in range(4)]
                for layer in range(4)]
    assert cells.tolist() == recorded  # layer x expert; expert r is on rank r
    assert heatmap.figure.axes[1].get_ylabel() == "tokens per step"
    assert re.search(r"expert_imbalance: tokens max / mean", pane.static_html())


def test_a_data_parallel_cluster_says_it_has_no_pipeline(tmp_path):
    c = simulate_cluster(tmp_path, None, ranks=2, steps=1, graph=ge.models.mlp(batch_size=8, hidden=(32,)))
    page = CX.ClusterExplorer(c).select("Parallelism").static_html()
    assert html.escape(CX.MSG_NO_PIPELINE) in page and "communication_groups (1 world;" in page
