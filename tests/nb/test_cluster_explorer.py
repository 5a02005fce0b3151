"""The cluster explorer (what display(cluster) shows): the Cluster tab's heatmaps, findings and
tables, the Ranks tab's per-rank explorers, the static fallback and its escaping, and the
heatmaps at a thousand ranks."""

from __future__ import annotations

import html
import shutil

import numpy as np
import pandas as pd
import pytest
from IPython.utils.capture import capture_output

import geprof_nb
from geprof_nb import ge
from geprof_nb.nb import cluster_explorer as CX
from geprof_nb.nb import cluster_plots
from geprof_nb.nb.display import profile_mimebundle, show_profile
from geprof_nb.nb.explorer import WIDGET_VIEW_MIME, Explorer
from geprof_nb.nb.report import Picture
from helpers.cluster_testing import FAULTS, SLOW_LINK, SLOW_RANK, simulate_cluster

HOSTILE = "<img src=x onerror=alert(1)>"
BUNDLE_KEYS = {WIDGET_VIEW_MIME, "text/html", "image/png", "text/plain"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """8 ranks: rank 3 1.3x slower, link 5 -> 6 at half bandwidth; its root named with HTML."""
    c = simulate_cluster(tmp_path_factory.mktemp("sim"), FAULTS, steps=2)
    hostile = c.path.with_name(HOSTILE)
    shutil.move(c.path, hostile)
    return geprof_nb.load(hostile)


@pytest.fixture(scope="module")
def explorer(cluster):
    return CX.ClusterExplorer(cluster)


def test_tabs_are_cluster_parallelism_and_ranks_and_only_cluster_is_built(cluster):
    e = CX.ClusterExplorer(cluster)
    assert e.tab.titles == ("Cluster", "Parallelism", "Ranks", "What-if")
    assert "geprof-cluster-explorer" in e.widget._dom_classes
    assert e.cluster_pane.built and not e.parallelism.built and not e.ranks.built
    assert "geprof-tab-cluster" in e.cluster_pane.box._dom_classes
    e.tab.selected_index = 1
    assert e.parallelism.built and "geprof-tab-parallelism" in e.parallelism.box._dom_classes
    e.tab.selected_index = 2
    assert e.ranks.built and "geprof-tab-ranks" in e.ranks.box._dom_classes
    assert not e.what_if.built


def test_cluster_tab_has_the_heatmaps_with_their_units(explorer, cluster):
    pictures = [b for b in explorer.cluster_pane.content if isinstance(b, Picture)]
    assert [p.alt for p in pictures] == ["step time heatmap", "wait time heatmap", "communication matrix"]
    assert all(p.png is not None and p.png.startswith(b"\x89PNG") for p in pictures)
    step, wait, matrix = (p.figure.axes for p in pictures)
    assert (step[0].get_ylabel(), step[0].get_xlabel(), step[1].get_ylabel()) == ("rank", "step", "step time (us)")
    assert wait[1].get_ylabel() == "wait time (us)"
    # one cell per rank and step: the step time heatmap is the rank x step matrix
    assert step[0].images[0].get_array().shape == (8, 2)
    np.testing.assert_allclose(step[0].images[0].get_array(), cluster.rank_step("Stage").to_numpy())
    assert (matrix[0].get_xlabel(), matrix[0].get_ylabel(), matrix[1].get_ylabel()) == (
        "destination rank", "source rank", "bandwidth (GB/s)")
    cells = matrix[0].images[0].get_array()
    assert cells[SLOW_LINK] == pytest.approx(45.0, rel=0.01) and np.ma.count(cells) == 8  # the ring's 8 links


def test_cluster_tab_shows_findings_and_tables(explorer, cluster):
    page = explorer.cluster_pane.static_html()
    for rule in cluster.advise()["Rule"]:
        assert html.escape(rule) in page
    assert "slow_ranks: ranks by own time" in page and "slow_links: links below" in page
    assert "stragglers: the last rank at each collective" in page
    assert "cluster_step_trace_time (msprof-analyze columns, us)" in page
    assert "slow ranks: 3" in explorer.report.headline and "1 slow link" in explorer.report.headline


def test_ranks_tab_shows_the_chosen_rank_explorer(explorer, cluster):
    ranks = explorer.select("Ranks")
    assert [v for _, v in ranks.select.options] == list(range(8)) and ranks.select.value == 0
    shown = ranks.show(SLOW_RANK)
    assert isinstance(shown, Explorer) and shown.profile is cluster.rank(SLOW_RANK)
    assert ranks.view.children == (shown.widget,)
    assert ranks.show(SLOW_RANK) is shown  # built once


def test_static_fallback_escapes_names_and_carries_the_heatmap(explorer, cluster):
    bundle = explorer.mimebundle()
    assert set(bundle) == BUNDLE_KEYS
    page = bundle["text/html"]
    assert HOSTILE not in page and html.escape(HOSTILE) in page
    assert page.count('<img src="data:image/png;base64,') == 3
    assert "<h3>Cluster</h3>" in page and "<h3>Ranks</h3>" in page
    assert bundle["image/png"] == explorer.report.step_heatmap.png
    text = bundle["text/plain"]
    link = cluster.advise().set_index("Rule").loc["Slow link"]
    assert f"{SLOW_LINK[0]}         {SLOW_LINK[1]}      HCCS" in text and f"[{link['Priority']}] Slow link" in text
    assert text.splitlines()[0] == f"geprof {HOSTILE} | 8 ranks | 2 steps, median step " \
        f"{cluster.slow_ranks['Step Time(us)'].median():,.1f} us | slow ranks: 3 | 1 slow link"


def test_display_and_show_profile_give_the_cluster_bundle(ip, cluster):
    data, _ = ip.display_formatter.format(cluster)
    assert set(data) == BUNDLE_KEYS and html.escape(HOSTILE) in data["text/html"]
    with capture_output() as out:
        show_profile(cluster)
    (shown,) = out.outputs
    assert set(shown.data) == BUNDLE_KEYS
    assert set(profile_mimebundle(cluster)) == BUNDLE_KEYS


def test_a_cluster_without_hccl_data_says_how_to_get_the_matrix(tmp_path):
    c = simulate_cluster(tmp_path, None, ranks=2, steps=2, hccl="off")
    page = CX.ClusterExplorer(c).static_html()
    assert "profile with --hccl on" in page


# ------------------------------------------------------------------- at scale
def test_a_thousand_ranks_are_binned_and_the_worst_rank_of_a_bin_shows():
    ranks, steps = 1024, 100
    values = np.full((ranks, steps), 5000.0)
    values[333, :] = 6500.0  # one slow rank
    matrix = pd.DataFrame(values, index=pd.Index(range(ranks), name="Rank"), columns=range(1, steps + 1))
    fig = cluster_plots.rank_step_heatmap(matrix)
    ax = fig.axes[0]
    cells = ax.images[0].get_array()
    assert cells.shape == (64, 50)  # 16 ranks and 2 steps a cell
    assert ax.get_ylabel() == "ranks (bins of 16: max of the bin)"
    assert ax.get_xlabel() == "steps (bins of 2: mean of the bin)"
    assert (cells[333 // 16] == 6500.0).all() and (np.delete(cells, 333 // 16, axis=0) == 5000.0).all()
    assert len(ax.get_yticklabels()) <= 32 and ax.get_yticklabels()[0].get_text() == "0-15"


@pytest.mark.parametrize("steps", [200, 500])
def test_binned_step_labels_are_turned_when_any_is_long(steps):
    """The first bin's label ("1-4") is short, later ones ("193-196") are not: read by the longest."""
    matrix = pd.DataFrame(np.ones((4, steps)), index=pd.Index(range(4), name="Rank"), columns=range(1, steps + 1))
    ax = cluster_plots.rank_step_heatmap(matrix).axes[0]
    labels = ax.get_xticklabels()
    assert labels[0].get_text() in ("1-4", "1-8") and max(len(t.get_text()) for t in labels) > 3
    assert {t.get_rotation() for t in labels} == {90.0}


def test_text_summary_counts_the_slowest_ranks_it_shows(tmp_path):
    c = simulate_cluster(tmp_path, ranks=4, steps=2)
    text = CX.ClusterExplorer(c).text_summary()
    assert "slowest ranks (4 of 4; cluster.slow_ranks)" in text and "5 of 4" not in text


def test_a_thousand_rank_matrix_shows_its_slow_link_among_link_types():
    n = 1024
    src = np.arange(n)
    ring = pd.DataFrame({"Src Rank": src, "Dst Rank": (src + 1) % n, "Link Type": "HCCS", "Size(Byte)": 10**9,
                         "Transit Time(us)": np.where(src == 500, 2e4, 1e4)})  # link 500 -> 501 at half speed
    across = pd.DataFrame({"Src Rank": src, "Dst Rank": (src + 8) % n, "Link Type": "ROCE", "Size(Byte)": 10**9,
                           "Transit Time(us)": 4e4})  # RoCE is 4x slower than HCCS by design
    fig = cluster_plots.communication_heatmap(pd.concat([ring, across], ignore_index=True))
    ax = fig.axes[0]
    cells = ax.images[0].get_array()
    assert cells.shape == (64, 64) and fig.axes[1].get_ylabel() == "slowest link / median of its link type"
    assert cells[500 // 16, 501 // 16] == pytest.approx(0.5)
    others = np.ma.compressed(cells).tolist()
    others.remove(pytest.approx(0.5))
    assert others == pytest.approx([1.0] * len(others))


def test_a_cluster_without_collectives_says_there_is_no_wait(tmp_path):
    c = simulate_cluster(tmp_path, None, ranks=2, steps=2, graph=ge.models.mlp(batch_size=8, hidden=(32,)))
    assert c.communication_time.empty and c.communication_matrix.empty
    page = CX.ClusterExplorer(c).static_html()
    assert html.escape(CX.MSG_NO_COLLECTIVES) in page and html.escape(CX.MSG_NO_MATRIX) in page
    assert page.count('<img src="data:image/png;base64,') == 1  # the step time heatmap only


def test_the_what_if_tab_changes_every_rank(cluster):
    controls = CX.ClusterExplorer(cluster).select("What-if").controls
    assert controls.link is not None and controls.verify.disabled  # HCCL sub-tasks; a loaded cluster
    controls.pattern.value = ""
    controls.link.value, controls.link_factor.value = "HCCS", 0.5
    view = controls.apply()
    expected = cluster.what_if(link_bandwidth={"HCCS": 0.5}).predicted
    pd.testing.assert_frame_equal(view.what_if.predicted, expected)
    table = view.comparison()
    assert (table["Predicted(us)"] > table["Now(us)"]).all()  # half the HCCS bandwidth: every step longer
    assert table["Rank"].tolist() == expected["rank"].tolist()
    steps = cluster.critical_path().groupby("iteration")["duration"].sum()
    assert np.allclose(table["Now(us)"], steps.to_numpy() / 1000)  # the slowest rank's step, today
    assert "HCCS bandwidth x0.5" in view.headline()
