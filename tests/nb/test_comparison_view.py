"""The compare view: geprof_nb.compare side by side (two runs, two steps of one run), its two timelines
aligned on their step starts and moving together, its static twin, and the explorer's compare steps."""

from __future__ import annotations

import re

import numpy as np
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.nb import comparison_view as CV
from geprof_nb.nb import explorer as X
from geprof_nb.nb.comparison_view import CompareView, compare_view
from helpers.geprof_testing import run_profiled_session

HOSTILE = "<img src=x onerror=alert(1)>"


def mlp(batch: int) -> ge.Graph:
    return ge.models.mlp(batch_size=batch, hidden=(256, 128), training=True, world_size=2)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[geprof_nb.Profile, geprof_nb.Profile]:
    """The same MLP at batch 8 and 256, 3 steps each."""
    root = tmp_path_factory.mktemp("cmp")
    return run_profiled_session(root / "a", mlp(8), 3).profile, run_profiled_session(root / "b", mlp(256), 3).profile


def rows_of(page: str, css: str) -> list[list[str]]:
    """The body cells of the table with class ``css``."""
    body = page.split(css, 1)[1].split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [re.findall(r"<td[^>]*>([^<]*)</td>", r) for r in body.split("</tr>") if r]


def step_start(view: CompareView, side: int) -> float:
    step = view.align[side]
    return next(lo for s, lo, _ in view.timelines[side].data.steps if s == step)


def test_two_runs_side_by_side_show_the_split_the_moved_ops_and_the_step_table(runs):
    a, b = runs
    view = compare_view(a, b)
    c = view.comparison
    assert (c.a_name, c.b_name, c.steps) == (a.name, b.name, None)
    page = view.static_html()
    split = rows_of(page, "geprof-compare-split")
    assert [r[0] for r in split] == ["Computing", "exposed Communication", "Free", "Step"]
    assert split[0][1:3] == [f"{c.split().at['Computing', 'A']:,.3f}", f"{c.split().at['Computing', 'B']:,.3f}"]
    assert rows_of(page, "geprof-compare-step")[0] == ["Steps", "3", "3", "+0", "+0.0"]  # counts whole
    moved = rows_of(page, "geprof-compare-regressions")
    assert [r[0] for r in moved] == list(c.regressions.index) and len(moved) == len(c.regressions) > 0
    top = c.regressions.iloc[0]
    assert moved[0][1:5] == [str(top["OP Type"]), f"{top['Time/step A(us)']:,.3f}", f"{top['Time/step B(us)']:,.3f}",
                             f"{top['Time/step Diff(us)']:,.3f}"]
    assert moved[0][6:8] == [str(int(top["Count/step A"])), str(int(top["Count/step B"]))]  # whole counts
    chart = view.split_chart().picture.figure.axes[0]
    assert [t.get_text() for t in chart.get_xticklabels()] == ["A", "B"]
    heights = {k.get_label(): [p.get_height() for p in k.patches] for k in chart.containers}
    np.testing.assert_allclose(heights["Computing"], c.split().loc["Computing", ["A", "B"]].to_numpy(float))


def test_the_timelines_are_aligned_on_their_step_starts_and_move_together(runs):
    a, b = runs
    view = compare_view(a, b)
    assert view.align == (a.step_split.steps[0], b.step_split.steps[0]) == (2, 2)  # each run's typical step
    view.widget
    ta, tb = view.timelines
    sa, sb = step_start(view, 0), step_start(view, 1)
    length = max(hi - lo for s, lo, hi in ta.data.steps + tb.data.steps if s == 2)
    assert ta.window[0] - sa == pytest.approx(tb.window[0] - sb) and ta.window[0] < sa
    assert ta.window[1] - ta.window[0] == pytest.approx(length * 1.04)  # the longer step, 2% either side
    ta.window = [sa + 100.0, sa + 400.0]  # what the browser sets once a zoom rests
    assert tb.window == pytest.approx([sb + 100.0, sb + 400.0])
    tb.window = [sb + 10.0, sb + 20.0]
    assert ta.window == pytest.approx([sa + 10.0, sa + 20.0])
    view.step_pickers[1].value = 3  # align B on its step 3 instead
    s3 = step_start(view, 1)
    assert view.align == (2, 3) and tb.window[0] - s3 == pytest.approx(ta.window[0] - sa) and s3 > sb


def test_two_steps_of_one_run(runs):
    a, _ = runs
    view = compare_view(a, steps=(1, 3))
    c = view.comparison
    assert c.steps == (1, 3) and view.align == (1, 3)
    assert rows_of(view.static_html(), "geprof-compare-step")[5][:3] == [
        "Op tasks", str(len(a.ops(1))), str(len(a.ops(3)))]
    view.widget
    assert view.timelines[0].window[0] - step_start(view, 0) == pytest.approx(
        view.timelines[1].window[0] - step_start(view, 1))
    assert [t.get_text() for t in view.split_chart().picture.figure.axes[0].get_xticklabels()] == [
        "A: step 1", "B: step 3"]
    with pytest.raises(ValueError, match=r"compare_view of one run compares two of its steps: pass steps=\(i, j\)"):
        compare_view(a)
    with pytest.raises(ValueError, match=r"steps\[1\] 7 is not in b \("):
        compare_view(a, steps=(1, 7))


def test_the_bundle_has_the_live_view_a_static_twin_and_the_summary(runs):
    a, b = runs
    view = CompareView(a, b, names=(HOSTILE, "b"))
    bundle = view._repr_mimebundle_()
    assert set(bundle) == {CV.WIDGET_VIEW_MIME, "text/html", "text/plain"}
    assert bundle[CV.WIDGET_VIEW_MIME]["model_id"] == view.widget.model_id
    assert "geprof-compare" in view.widget._dom_classes
    page = bundle["text/html"]
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and "<img src=x" not in page
    assert len(re.findall(r'<img src="data:image/png;base64,[^"]*" alt="task Gantt of [AB], step 2"', page)) == 2
    assert bundle["text/plain"] == view.comparison.summary()
    assert view.regressions is view.comparison.regressions and view.split().equals(view.comparison.split())
    with pytest.raises(AttributeError, match="'CompareView' object has no attribute 'nope'"):
        view.nope  # noqa: B018
    assert "<img src=x" not in "".join(w.value for w in view.widget.children if hasattr(w, "value"))


def test_the_explorers_steps_tab_compares_two_of_its_steps(runs):
    a, _ = runs
    steps = X.Explorer(a).select("Steps")
    assert (steps.compare_a.value, steps.compare_b.value) == (1, 3)
    steps.compare_a.value = 2
    view = steps.compare_steps()
    assert view.comparison.steps == (2, 3) and steps.compare_box.children == (view.widget,)


def test_compare_view_is_a_lazy_name_of_the_nb_package():
    import geprof_nb.nb as nb

    assert nb.compare_view is compare_view and nb.CompareView is CompareView
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        nb.nope  # noqa: B018
