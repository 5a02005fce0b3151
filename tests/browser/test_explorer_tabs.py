"""The explorer's tabs and the compare view in a real JupyterLab, in Chromium.

One notebook, opened once for the module: a ResNet-50 training run (batch 32, 8 ranks' AllReduce, 6 steps,
memory and runtime API on) and the same at batch 16, loaded from their run directories (the runs are made here, so the test knows their
tables): cell 1 shows the first run's explorer, cell 2 ``compare_view(a, b)``.

* The Summary's step chart is an image of one stacked bar per step in the Computing and exposed
  Communication colours; numbers are right-aligned; the Ops table leads with Op Name and hides the ids;
  the Steps tab's times are since the first step and the absolute ones a button away.
* Every tab is built and drawn without a traceback; a screenshot of each is saved.
* The compare view draws two timelines, each opened on its aligned step; zooming one with the wheel moves
  the other to the same place in its own step; the Steps tab's *compare* button shows two of its steps.

Screenshots: every tab (``tab_<name>.png``) and the compare view in the test's ``tmp_path``;
``docs/screenshots/explorer_ops.png`` and ``compare.png`` (the aligned timelines; the docs show both) are
rewritten when
``GEPROF_UPDATE_SCREENSHOTS=1`` is set.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from geprof_nb import ge
from geprof_nb.nb.explorer import TAB_TITLES, tab_class
from helpers.lab_browser import (
    REPO,
    SKIP_REASON,
    cell,
    error_outputs,
    explorer_tab,
    open_notebook,
    run_all,
    screenshot,
    wait_all_executed,
    write_notebook,
)

if SKIP_REASON:
    pytest.skip(SKIP_REASON, allow_module_level=True)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TIMEOUT = 60_000
AI_CORE_RGB = (0x4C, 0x72, 0xB0)  # plots.TASK_TYPE_COLORS["AI_CORE"]: the chart's Computing
COMMUNICATION_RGB = (0xC4, 0x4E, 0x52)  # ... ["COMMUNICATION"]: its exposed Communication


def screenshot_path(tmp_path: Path, name: str) -> Path:
    update = os.environ.get("GEPROF_UPDATE_SCREENSHOTS") == "1"
    return (REPO / "docs" / "screenshots" if update else tmp_path) / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from helpers.geprof_testing import run_profiled_session

    base = tmp_path_factory.mktemp("explorer_runs")
    return [run_profiled_session(base / f"b{batch}", ge.models.resnet50(batch_size=batch, training=True,
                                                                        world_size=8), 6, task_memory="on",
                                 runtime_api="on").profile
            for batch in (32, 16)]


@pytest.fixture(scope="module")
def notebook(browser_context, lab, runs):
    a, b = runs
    sources = ["%load_ext geprof_nb\nimport geprof_nb\nfrom geprof_nb.nb import compare_view",
               f"a = geprof_nb.load({str(a.path)!r})\nb = geprof_nb.load({str(b.path)!r})\na",
               "compare_view(a, b)"]
    write_notebook(lab.root / "tabs.ipynb", sources)
    page = browser_context.new_page()
    page.dialogs = []
    page.on("dialog", lambda d: (page.dialogs.append((d.type, d.message)), d.dismiss()))
    open_notebook(page, lab, "tabs.ipynb", "tabs")
    run_all(page)
    wait_all_executed(page, timeout_ms=180_000)
    assert error_outputs(page) == []
    cell(page, 1).locator(".geprof-explorer").first.wait_for(timeout=TIMEOUT)
    try:
        yield page
    finally:
        page.close()


def image_colours(img) -> dict[str, int]:
    """How many pixels of a shown image are (near) the chart's Computing and exposed Communication colours."""
    return img.evaluate("""(im, [core, comm]) => {
        const c = document.createElement('canvas');
        c.width = im.naturalWidth; c.height = im.naturalHeight;
        const g = c.getContext('2d'); g.drawImage(im, 0, 0);
        const d = g.getImageData(0, 0, c.width, c.height).data;
        const near = (i, rgb) => rgb.every((v, k) => Math.abs(d[i + k] - v) <= 6);
        let a = 0, b = 0;
        for (let i = 0; i < d.length; i += 4) { if (near(i, core)) a++; if (near(i, comm)) b++; }
        return {computing: a, communication: b};
    }""", [list(AI_CORE_RGB), list(COMMUNICATION_RGB)])


def test_the_summary_shows_a_step_chart_and_right_aligned_numbers(notebook, runs, tmp_path):
    summary = explorer_tab(cell(notebook, 1), "Summary")
    chart = summary.locator("img").first  # the step chart leads the Summary
    chart.wait_for(timeout=TIMEOUT)
    assert chart.evaluate("im => im.complete && im.naturalWidth") >= 1000
    colours = image_colours(chart)
    assert colours["computing"] > 5_000 and colours["communication"] > 500  # 6 stacked bars of both
    number = summary.locator("td[align=right]").first
    assert number.evaluate("e => getComputedStyle(e).textAlign").endswith("right")  # -webkit-right: align="right"
    assert "," in summary.locator("table").first.inner_text()  # thousands separators: steps of ~8,700 us
    heads = summary.locator("table").nth(1).locator("th")  # the top ops: Op Name's header over its column
    assert heads.first.inner_text() == "Op Name"
    assert heads.first.evaluate("e => getComputedStyle(e).textAlign") == "left"
    assert heads.nth(3).evaluate("e => getComputedStyle(e).textAlign").endswith("right")  # Task Duration(us)
    screenshot(notebook, tmp_path / "tab_summary.png", ".jp-Notebook .jp-Cell >> nth=1", fit=True)


def test_every_tab_draws_without_a_traceback(notebook, runs, tmp_path):
    explorer = cell(notebook, 1)
    for title in TAB_TITLES:
        pane = explorer_tab(explorer, title)
        assert pane.locator("pre").count() == 0, title  # a failing tab shows its traceback in a <pre>
        for img in pane.locator("img").all():
            assert img.evaluate("im => im.complete && im.naturalWidth > 0"), title
        name = tab_class(title).removeprefix("geprof-tab-")
        screenshot(notebook, tmp_path / f"tab_{name}.png", ".jp-Notebook .jp-Cell >> nth=1", fit=True)
        if title == "Ops":
            screenshot(notebook, screenshot_path(tmp_path, "explorer_ops.png"), ".jp-Notebook .jp-Cell >> nth=1")
    assert notebook.dialogs == []


def test_the_ops_table_leads_with_op_name_and_the_steps_tab_with_relative_times(notebook, runs):
    a = runs[0]
    ops = explorer_tab(cell(notebook, 1), "Ops")
    heads = ops.locator(".geprof-ops-table th").all_inner_texts()
    assert [h.replace("\n", " ") for h in heads[:4]] == ["Op Name", "OP Type", "Task Type", "Task Duration(us)"]
    assert not {"Device_id", "Model ID", "Task ID", "Stream ID"} & set(heads)
    steps = explorer_tab(cell(notebook, 1), "Steps")
    table = steps.locator("table").first
    heads = [h.replace("\n", " ") for h in table.locator("th").all_inner_texts()]
    fp = heads.index("FP Start(us)")
    first = table.locator("tbody tr").first.locator("td").nth(fp)
    relative = a.step_trace["FP Start(us)"].iloc[0] - a.time_origin_ns / 1000
    assert first.inner_text() == f"{relative:,.3f}"
    steps.locator(".geprof-absolute-times").click()  # the kernel redraws the tables: a new <td>
    notebook.wait_for_function("([e, i, t]) => e.querySelector('table tbody tr').children[i].innerText === t",
                               arg=[steps.element_handle(), fp, f"{a.step_trace['FP Start(us)'].iloc[0]:,.3f}"],
                               timeout=TIMEOUT)


def step_starts(profile) -> dict[int, float]:
    """Each step's start on the profile's timeline clock (us since its first step's start)."""
    bounds = profile.source.step_bounds()
    origin = int(bounds["begin"].min())
    return {int(s): (int(b) - origin) / 1000 for s, b in zip(bounds["step"], bounds["begin"])}


def window(root) -> tuple[float, float]:
    return float(root.get_attribute("data-t0")), float(root.get_attribute("data-t1"))


def test_the_compare_view_aligns_the_two_timelines_and_moves_them_together(notebook, runs, tmp_path):
    a, b = runs
    view = cell(notebook, 2).locator(".geprof-compare").first
    view.wait_for(timeout=TIMEOUT)
    assert "Ops that got faster" in view.inner_text()  # batch 16 computes less than batch 32
    timelines = view.locator(".geprof-timeline")
    assert timelines.count() == 2
    ta, tb = timelines.nth(0), timelines.nth(1)
    for t in (ta, tb):
        notebook.wait_for_function("e => Number(e.dataset.views) >= 1", arg=t.element_handle(), timeout=TIMEOUT)
    sa, sb = step_starts(a)[a.step_split.steps[0]], step_starts(b)[b.step_split.steps[0]]
    (a0, a1), (b0, b1) = window(ta), window(tb)
    assert a0 - sa == pytest.approx(b0 - sb, abs=0.01) and a0 < sa < a1  # each opens on its aligned step
    screenshot(notebook, tmp_path / "compare_page.png", ".jp-Notebook .jp-Cell >> nth=2", fit=True)
    boxes = view.locator(".geprof-compare-timelines")
    size = notebook.viewport_size
    notebook.set_viewport_size({"width": size["width"], "height": 1500})  # the whole box below the menus
    try:
        boxes.evaluate("e => e.scrollIntoView({block: 'center'})")
        notebook.wait_for_timeout(300)
        boxes.screenshot(path=str(screenshot_path(tmp_path, "compare.png")))  # the aligned timelines, for the docs
    finally:
        notebook.set_viewport_size(size)
    canvas = ta.locator("canvas")
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    notebook.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + 60)
    for _ in range(2):
        notebook.mouse.wheel(0, -300)
    # A's window reaches the kernel once the zoom rests (0.4 s), which moves B, which the browser draws
    notebook.wait_for_function("([e, w]) => Number(e.dataset.t1) - Number(e.dataset.t0) < w / 2",
                               arg=[tb.element_handle(), b1 - b0], timeout=TIMEOUT)
    notebook.wait_for_timeout(600)
    (n0, n1), (m0, m1) = window(ta), window(tb)
    assert n1 - n0 < (a1 - a0) / 2 and m1 - m0 == pytest.approx(n1 - n0, rel=1e-6)
    assert m0 - sb == pytest.approx(n0 - sa, abs=0.01)  # the same place in its own step
    assert notebook.dialogs == []


def test_the_steps_tab_compares_two_of_its_steps(notebook, runs, tmp_path):
    steps = explorer_tab(cell(notebook, 1), "Steps")
    steps.locator(".geprof-compare-steps").click()
    view = steps.locator(".geprof-compare").first
    view.wait_for(timeout=TIMEOUT)
    assert f"step 1, B = {runs[0].name} step 6" in view.locator(".geprof-compare-head").inner_text()
    assert view.locator(".geprof-timeline").count() == 2
    screenshot(notebook, tmp_path / "compare_steps.png", f".{tab_class('Steps')} .geprof-compare", fit=True)


def test_the_what_if_tab_predicts_a_speedup(notebook, runs, tmp_path):
    a = runs[0]
    pane = explorer_tab(cell(notebook, 1), "What-if")
    pattern = pane.locator(".geprof-whatif-pattern input")
    pattern.fill("Conv2D*")
    readout = pane.locator(".geprof-whatif-speedup .widget-readout")  # the slider's editable number
    readout.click()
    notebook.keyboard.press("Control+A")
    notebook.keyboard.type("2.5")
    notebook.keyboard.press("Enter")
    pane.locator(".geprof-whatif-apply").click()
    predicted = a.what_if(op_speedup={"Conv2D*": 2.5}).predicted
    now, new = predicted["now_ns"].mean() / 1000, predicted["predicted_ns"].mean() / 1000
    headline = pane.locator(".geprof-whatif-headline")
    headline.wait_for(timeout=TIMEOUT)
    assert f"What-if (Conv2D* 2.5x faster): mean step {now:,.3f} us now, {new:,.3f} us predicted" in \
        headline.inner_text()
    assert new < now
    table = pane.locator(".geprof-whatif-table").inner_text()
    assert f"{predicted['predicted_ns'].iloc[-1] / 1000:,.3f}" in table  # the last step's predicted time
    chart = pane.locator("img").first
    assert chart.evaluate("im => im.complete && im.naturalWidth > 0")
    screenshot(notebook, tmp_path / "tab_what-if_applied.png", ".jp-Notebook .jp-Cell >> nth=1", fit=True)
    pattern.fill("NoSuchOp*")
    pane.locator(".geprof-whatif-apply").click()
    error = pane.locator(".geprof-whatif-error")
    error.wait_for(timeout=TIMEOUT)
    assert "op_speedup pattern 'NoSuchOp*' matches no op in this run" in error.inner_text()
    assert pane.locator("pre").count() == 0 and notebook.dialogs == []
