"""nb/report.py: the explorer's report model without widgets: a Profile's figures and tables, computed once."""

from __future__ import annotations

import subprocess
import sys

import pytest
from matplotlib.figure import Figure

import geprof_nb
from geprof_nb import ge
from geprof_nb.nb import plots
from geprof_nb.nb import report as R
from geprof_nb.prof.clock import clock
from helpers.geprof_testing import run_profiled_session


@pytest.fixture(scope="module")
def profile(tmp_path_factory) -> geprof_nb.Profile:
    mode = clock.mode
    try:
        return run_profiled_session(tmp_path_factory.mktemp("report"), ge.models.mlp(batch_size=4, in_features=16,
                                                                                        hidden=(16,)), 3).profile
    finally:
        clock.set_mode(mode)


def test_the_report_model_needs_no_widgets():
    code = "import sys, geprof_nb.nb.report; assert 'ipywidgets' not in sys.modules, 'ipywidgets imported'"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_render_gives_the_png_of_the_one_renderer_or_a_message(monkeypatch):
    fig = Figure(figsize=(2, 1), layout="constrained")
    fig.add_subplot().plot([0, 1], [1, 0])
    rendered = []
    figure_png = plots.figure_png
    monkeypatch.setattr(plots, "figure_png", lambda f: rendered.append(f) or figure_png(f))
    picture = R.render("a line", lambda: fig)
    assert rendered == [fig] and picture.figure is fig and picture.message == ""
    assert picture.png.startswith(b"\x89PNG")
    assert picture.html().startswith('<img src="data:image/png;base64,') and 'alt="a line"' in picture.html()

    def broken() -> Figure:
        raise KeyError("Iteration ID")

    failed = R.render("step timeline", broken)
    assert failed.png is None and failed.message == "could not draw the step timeline: KeyError: 'Iteration ID'"
    assert failed.html() == '<p class="geprof-message"><i>could not draw the step timeline: KeyError: ' \
                            '&#x27;Iteration ID&#x27;</i></p>'


def test_one_report_per_profile_and_each_figure_drawn_once(profile, monkeypatch):
    report = R.Report.of(profile)
    assert R.Report.of(profile) is report and R.Report.of(geprof_nb.load(profile.path)) is not report
    calls = []
    step_timeline = plots.step_timeline
    monkeypatch.setattr(plots, "step_timeline", lambda *a, **k: calls.append(1) or step_timeline(*a, **k))
    first = report.step_timeline(1).picture
    assert report.step_timeline(1).picture is first and calls == [1]
    assert report.step_timeline(2).picture is not first and calls == [1, 1]


def test_a_chart_not_embedded_names_the_call_that_draws_it(profile):
    chart = R.Report.of(profile).op_type_bars()
    text = chart.static_html(("step_timeline",))
    assert "Figure not embedded" in text and "plots.op_type_bars(profile.op_statistic)" in text
    assert chart.static_html("all").startswith("<img ")
    note = R.note("task Gantt", R.MSG_NO_OPS)
    assert note.static_html(()) == f'<p class="geprof-message"><i>{R.MSG_NO_OPS}</i></p>'  # a note is always shown


def test_the_summary_numbers_are_the_profiles(profile):
    report = R.Report.of(profile)
    assert report.step_ids == [1, 2, 3] and report.last_iteration == 3
    top, total = report.summary_ops
    last = profile.ops(3)
    assert total == len(last) and len(top) == min(R.SUMMARY_OPS, len(last))
    assert top["Share of op time(%)"].iloc[0] == pytest.approx(
        top[R.DURATION].iloc[0] / last[R.DURATION].sum() * 100)
    split = report.step_split
    assert list(split["Part"]) == [*R.STEP_SPLIT, "Step"]
    assert split["Time per step(us)"].iloc[:3].sum() == pytest.approx(split["Time per step(us)"].iloc[3])
