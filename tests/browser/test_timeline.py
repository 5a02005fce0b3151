"""The interactive timeline (``geprof_nb.nb.timeline.Timeline``) in a real JupyterLab, in Chromium.

One notebook, opened once for the module: a ResNet-50 training run (8 ranks' AllReduce, 3 steps), a
run whose op names are HTML (``<script>``, ``<img onerror>``) and a 16-rank cluster, each shown as a
``Timeline``.  The tests drive the first widget through the browser and check what it drew and asked
for against the Profile's tables computed here: it renders (canvas pixels of the Task Types'
colours), zooms around the cursor (the window shrinks, the time under the cursor stays, a finer
view is requested), pans (drag, A/D) and zooms with W/S without touching the notebook, zooms to a
step with the step selector, hovers (tooltip text of a known op: name, type, times, shapes, PMU
ratios), selects an op (the side panel's instance count is op_summary's), searches (hits
highlighted); the hostile names show as text and fire no dialog; a cluster's server lane expands
into its ranks.

Screenshots of the widgets (the op panel open, a tooltip shown; the cluster expanded):
``docs/screenshots/timeline.png`` and ``timeline_cluster.png`` are rewritten when
``GEPROF_UPDATE_SCREENSHOTS=1`` is set (else they go to the tests' tmp_path, with a page shot each).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from geprof_nb import ge
from helpers.lab_browser import (
    REPO,
    SKIP_REASON,
    cell,
    error_outputs,
    open_notebook,
    run_all,
    screenshot,
    wait_all_executed,
    write_notebook,
)

if SKIP_REASON:
    pytest.skip(SKIP_REASON, allow_module_level=True)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

HOSTILE = ("<script>alert(1)</script>", "<img src=x onerror=alert(2)>")
AI_CORE_RGB = (0x4C, 0x72, 0xB0)  # plots.TASK_TYPE_COLORS["AI_CORE"]
AI_VECTOR_RGB = (0x55, 0xA8, 0x68)
HIT_RGB = (0xFF, 0xB0, 0x00)
TIMEOUT = 30_000


def screenshot_path(tmp_path: Path, name: str) -> Path:
    update = os.environ.get("GEPROF_UPDATE_SCREENSHOTS") == "1"
    return (REPO / "docs" / "screenshots" if update else tmp_path) / name


def hostile_graph() -> ge.Graph:
    g = ge.Graph("hostile")
    x = g.data("x", (64, 256))
    w = g.variable("w", (256, 256), dtype="float16")
    y = g.op("MatMulV2", [x, w], name=HOSTILE[0])
    z = g.op("MatMulV2", [y, w], name=HOSTILE[1])
    g.output([z])
    return g


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from helpers.cluster_testing import FAULTS, simulate_cluster
    from helpers.geprof_testing import run_profiled_session

    base = tmp_path_factory.mktemp("timeline_runs")
    resnet = run_profiled_session(base / "resnet", ge.models.resnet50(batch_size=32, training=True, world_size=8),
                                  3, hccl="on", task_memory="on")
    hostile = run_profiled_session(base / "hostile", hostile_graph(), 2)
    cluster = simulate_cluster(base / "cluster", FAULTS, ranks=16, steps=2)
    return {"resnet": resnet.profile, "hostile": hostile.profile, "cluster": cluster}


@pytest.fixture(scope="module")
def notebook(browser_context, lab, runs):
    """The notebook, run: cell 1 the ResNet timeline, 2 the hostile one, 3 the cluster's."""
    sources = ["import geprof_nb\nfrom geprof_nb.nb.timeline import Timeline"]
    for key in ("resnet", "hostile", "cluster"):
        sources.append(f"Timeline(geprof_nb.load({str(runs[key].path)!r}))")
    write_notebook(lab.root / "timeline.ipynb", sources)
    page = browser_context.new_page()
    page.dialogs = []

    def on_dialog(dialog) -> None:
        page.dialogs.append((dialog.type, dialog.message))
        dialog.dismiss()

    page.on("dialog", on_dialog)
    open_notebook(page, lab, "timeline.ipynb", "timeline")
    run_all(page)
    wait_all_executed(page, timeout_ms=120_000)
    assert error_outputs(page) == []
    for i in (1, 2, 3):
        root = cell(page, i).locator(".geprof-timeline")
        root.wait_for(timeout=TIMEOUT)
        page.wait_for_function("e => Number(e.dataset.views) >= 1", arg=root.element_handle(), timeout=TIMEOUT)
    try:
        yield page
    finally:
        page.close()


class Widget:
    """The timeline of one cell, and what its test hooks (data-* attributes) say."""

    def __init__(self, page, index: int) -> None:
        self.page = page
        self.root = cell(page, index).locator(".geprof-timeline")
        self.canvas = self.root.locator("canvas")

    def attr(self, name: str) -> str:
        return self.root.get_attribute(f"data-{name}")

    def window(self) -> tuple[float, float]:
        return float(self.attr("t0")), float(self.attr("t1"))

    def lane(self, lane_id: str) -> dict:
        return next(r for r in json.loads(self.attr("layout")) if r["id"] == lane_id)

    def x_of(self, t: float) -> float:
        t0, t1 = self.window()
        return float(self.attr("track-left")) + (t - t0) / (t1 - t0) * float(self.attr("track-width"))

    def t_of(self, x: float) -> float:
        t0, t1 = self.window()
        return t0 + (x - float(self.attr("track-left"))) / float(self.attr("track-width")) * (t1 - t0)

    def page_point(self, x: float, y: float) -> tuple[float, float]:
        """Page coordinates of a canvas point (the canvas scrolled into view first)."""
        self.canvas.scroll_into_view_if_needed()
        box = self.canvas.bounding_box()
        return box["x"] + x, box["y"] + y

    def settle(self) -> None:
        """Wait until no view request is open and the last frame is drawn."""
        self.page.wait_for_timeout(120)
        self.page.wait_for_function("e => !e.querySelector('.gt-status').textContent.includes('loading')",
                                    arg=self.root.element_handle(), timeout=TIMEOUT)
        self.page.wait_for_timeout(80)

    def pixels(self, lane_id: str) -> list[tuple[int, int, int]]:
        """The RGB of every canvas pixel of a lane's track (device pixels)."""
        r = self.lane(lane_id)
        return [tuple(p) for p in self.canvas.evaluate(
            """(c, [x, y, w, h]) => {
                const k = window.devicePixelRatio || 1;
                const d = c.getContext('2d').getImageData(x * k, y * k, w * k, h * k).data;
                const out = [];
                for (let i = 0; i < d.length; i += 4) out.push([d[i], d[i + 1], d[i + 2]]);
                return out;
            }""", [float(self.attr("track-left")), r["y"], float(self.attr("track-width")), r["h"]])]

    def select_step(self, step: int) -> None:
        self.root.locator("select.gt-step").select_option(str(step))
        self.settle()


def near(rgb: tuple[int, int, int], want: tuple[int, int, int], tolerance: int = 6) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(rgb, want))


def test_it_renders_every_lane_with_the_task_types_colours(notebook, runs):
    w = Widget(notebook, 1)
    drawn = [r["label"] for r in json.loads(w.attr("layout"))]
    assert drawn[:3] == ["steps", "step phases", "stream 1"] and "HCCL (communication)" in drawn
    assert "memory allocated" in drawn
    stream = w.pixels("stream/1")
    assert sum(near(p, AI_CORE_RGB, 40) for p in stream) > 50  # merged columns are shaded: a loose match
    assert sum(near(p, AI_VECTOR_RGB, 40) for p in stream) > 50
    assert sum(p != (255, 255, 255) for p in w.pixels("memory")) > 1000
    t0, t1 = w.window()
    assert float(w.attr("t0")) <= 0.0 < runs["resnet"].step_trace["Iteration Time(us)"].iloc[0] < t1
    assert notebook.dialogs == []


def test_wheel_zooms_around_the_cursor_and_asks_for_finer_data(notebook):
    w = Widget(notebook, 1)
    w.root.locator("button.gt-reset").click()
    w.settle()
    before_requests, before_columns = int(w.attr("requests")), float(w.attr("column-us"))
    (t0, t1), x = w.window(), 700.0
    t_at = w.t_of(x)
    notebook.mouse.move(*w.page_point(x, w.lane("stream/1")["y"] + 5))
    for _ in range(3):
        notebook.mouse.wheel(0, -300)
    w.settle()
    n0, n1 = w.window()
    assert n1 - n0 < (t1 - t0) / 5
    assert w.t_of(x) == pytest.approx(t_at, abs=(n1 - n0) * 0.01)  # the time under the cursor stays
    assert int(w.attr("requests")) > before_requests
    assert float(w.attr("column-us")) < before_columns / 5  # the new view is finer
    assert int(w.attr("bytes")) < 5_000_000


def test_drag_and_the_keyboard_move_the_view_without_touching_the_notebook(notebook):
    w = Widget(notebook, 1)
    cells = notebook.locator(".jp-Notebook .jp-Cell").count()
    t0, t1 = w.window()
    y = w.lane("stream/1")["y"] + 5
    notebook.mouse.move(*w.page_point(600, y))
    notebook.mouse.down()
    notebook.mouse.move(*w.page_point(500, y), steps=5)
    notebook.mouse.up()
    w.settle()
    d0, d1 = w.window()
    shift = 100 / float(w.attr("track-width")) * (t1 - t0)
    assert (d0, d1) == pytest.approx((t0 + shift, t1 + shift), abs=(t1 - t0) * 1e-3)
    for key, check in (("w", lambda a, b: b[1] - b[0] < (a[1] - a[0]) * 0.85),
                       ("s", lambda a, b: b[1] - b[0] > (a[1] - a[0]) * 1.15),
                       ("d", lambda a, b: b[0] > a[0] and b[1] - b[0] == pytest.approx(a[1] - a[0])),
                       ("a", lambda a, b: b[0] < a[0] and b[1] - b[0] == pytest.approx(a[1] - a[0]))):
        before = w.window()
        notebook.keyboard.press(key)
        notebook.keyboard.press(key)
        w.settle()
        assert check(before, w.window()), key
    # A inserts a cell and D, D deletes one in command mode: not while the timeline has the keys
    assert notebook.locator(".jp-Notebook .jp-Cell").count() == cells


def test_the_step_selector_zooms_to_the_steps_bounds(notebook, runs):
    w = Widget(notebook, 1)
    p = runs["resnet"]
    bounds = p.source.step_bounds()
    origin = int(bounds["begin"].min())
    w.select_step(2)
    lo, hi = bounds.loc[bounds["step"] == 2, ["begin", "end"]].iloc[0]
    assert w.window() == pytest.approx(((lo - origin) / 1000, (hi - origin) / 1000), abs=1e-6)


def longest_op_of_step(p, step: int):
    f = p.op_summary
    mine = f[(p.iteration_of_ops == step).to_numpy() & (f["Stream ID"] == 1).fillna(False).to_numpy()]
    row = mine.loc[mine["Task Duration(us)"].idxmax()]
    k = f.index.get_loc(row.name)
    start = (p.source.op_rows().start_ns[k] - int(p.source.step_bounds()["begin"].min())) / 1000
    return row, start


def test_hover_shows_a_known_ops_name_type_times_and_shapes(notebook, runs):
    w = Widget(notebook, 1)
    p = runs["resnet"]
    w.select_step(1)
    row, start = longest_op_of_step(p, 1)
    lane = w.lane("stream/1")
    x = w.x_of(start + row["Task Duration(us)"] / 2)
    notebook.mouse.move(*w.page_point(x, lane["y"] + lane["h"] / 2))
    tip = w.root.locator(".gt-tooltip")
    tip.wait_for(state="visible", timeout=TIMEOUT)
    notebook.wait_for_function("e => !e.textContent.includes('…')", arg=tip.element_handle(), timeout=TIMEOUT)
    text = tip.inner_text()
    assert row["Op Name"] in text and row["Task Type"] in text
    assert f"{row['Task Duration(us)']:.3f} µs" in text
    assert f"{start / 1000:.3f} ms" in text  # the start, since the first step's start
    assert row["Input Shapes"] in text and row["Output Shapes"] in text
    ratios = [c for c in row.index if c.endswith("_ratio") and pd.notna(row[c])]
    assert ratios and all(c in text for c in ratios)  # the PMU ratios of this task
    assert all(f"{row[c]:.3f}".rstrip("0").rstrip(".") in text for c in ratios)


def test_clicking_an_op_lists_its_instances_and_statistics(notebook, runs, tmp_path):
    w = Widget(notebook, 1)
    p = runs["resnet"]
    w.select_step(1)
    row, start = longest_op_of_step(p, 1)
    lane = w.lane("stream/1")
    notebook.mouse.click(*w.page_point(w.x_of(start + row["Task Duration(us)"] / 2), lane["y"] + lane["h"] / 2))
    panel = w.root.locator(".gt-panel")
    panel.locator(".gt-instances").wait_for(timeout=TIMEOUT)
    mine = p.op_summary[p.op_summary["Op Name"] == row["Op Name"]]
    assert panel.locator(".gt-panel-title").inner_text() == row["Op Name"]
    stats = panel.locator(".gt-stats").inner_text()
    assert f"instances\t{len(mine)}" in stats
    assert f"max\t{mine['Task Duration(us)'].max():.3f} µs" in stats
    assert panel.locator(".gt-instance").count() == len(mine)
    ratios = panel.locator(".gt-ratios").inner_text()
    shown = [c for c in mine.columns if c.endswith("_ratio") and mine[c].notna().any()]
    assert shown and all(f"{c}\t{mine[c].mean():.3f}" in ratios for c in shown)
    screenshot(notebook, tmp_path / "page.png", ".jp-Notebook .jp-Cell >> nth=1", fit=True)
    w.root.screenshot(path=str(screenshot_path(tmp_path, "timeline.png")))


def test_search_highlights_the_ops_it_matches(notebook, runs):
    w = Widget(notebook, 1)
    w.root.locator("button.gt-reset").click()
    w.settle()
    box = w.root.locator("input.gt-search")
    box.fill("Conv2DBackpropFilter")
    names = runs["resnet"].op_summary["Op Name"].astype(str)
    tasks = int(names.str.casefold().str.contains("conv2dbackpropfilter", regex=False).sum())
    notebook.wait_for_function("([e, n]) => e.dataset.searchTasks === String(n)",
                               arg=[w.root.element_handle(), tasks], timeout=TIMEOUT)
    w.settle()
    assert w.root.locator(".gt-search-result").inner_text().endswith(f"{tasks:,} tasks") and tasks > 0
    assert sum(near(p, HIT_RGB, 10) for p in w.pixels("stream/1")) > 20
    box.fill("")
    w.settle()


def test_hostile_op_names_show_as_text_and_fire_no_dialog(notebook, runs):
    w = Widget(notebook, 2)
    p = runs["hostile"]
    f = p.op_summary
    k = int(f.index[f["Op Name"] == HOSTILE[1]][0])
    start = (p.source.op_rows().start_ns[k] - int(p.source.step_bounds()["begin"].min())) / 1000
    dur = float(f.loc[k, "Task Duration(us)"])
    w.select_step(1)
    lane = next(r for r in json.loads(w.attr("layout")) if r["id"].startswith("stream/"))
    point = w.page_point(w.x_of(start + dur / 2), lane["y"] + lane["h"] / 2)
    notebook.mouse.move(*point)
    tip = w.root.locator(".gt-tooltip")
    tip.wait_for(state="visible", timeout=TIMEOUT)
    assert HOSTILE[1] in tip.inner_text()
    notebook.mouse.click(*point)
    w.root.locator(".gt-panel .gt-instances").wait_for(timeout=TIMEOUT)
    assert w.root.locator(".gt-panel-title").inner_text() == HOSTILE[1]
    w.root.locator("input.gt-search").fill("<script>")
    notebook.wait_for_function("e => e.dataset.searchTasks === '2'", arg=w.root.element_handle(), timeout=TIMEOUT)
    notebook.wait_for_timeout(500)  # an injected <img src=x> would have failed to load and fired by now
    assert notebook.dialogs == []
    assert notebook.locator("img[src='x'], img[onerror]").count() == 0
    assert w.root.locator("script").count() == 0


def test_a_cluster_server_lane_expands_into_its_ranks_slowest_first(notebook, runs, tmp_path):
    from helpers.cluster_testing import SLOW_RANK

    w = Widget(notebook, 3)
    layout = json.loads(w.attr("layout"))
    assert [r["label"] for r in layout] == ["steps (all ranks)", "server 0 · ranks 0-7", "server 1 · ranks 8-15"]
    server = w.lane("g0")
    notebook.mouse.click(*w.page_point(20, server["y"] + server["h"] / 2))
    w.settle()
    labels = [r["label"] for r in json.loads(w.attr("layout"))]
    assert labels[2] == f"rank {SLOW_RANK}" and len([x for x in labels if x.startswith("rank ")]) == 8
    rank = w.lane(f"r{SLOW_RANK}")
    notebook.mouse.click(*w.page_point(30, rank["y"] + rank["h"] / 2))
    w.settle()
    ids = [r["id"] for r in json.loads(w.attr("layout"))]
    assert f"r{SLOW_RANK}/stream/1" in ids and f"r{SLOW_RANK}/hccl" in ids
    assert sum(p != (255, 255, 255) for p in w.pixels("g1")) > 500  # the collapsed server's summary is drawn
    screenshot(notebook, tmp_path / "page.png", ".jp-Notebook .jp-Cell >> nth=3", fit=True)
    w.root.screenshot(path=str(screenshot_path(tmp_path, "timeline_cluster.png")))
    server = w.lane("g1")
    notebook.mouse.click(*w.page_point(20, server["y"] + server["h"] / 2))  # more lanes than the widget's height
    w.settle()
    assert w.canvas.bounding_box()["height"] == pytest.approx(520, abs=1)  # Timeline's default height
    last = [r["id"] for r in json.loads(w.attr("layout"))][-1]
    w.root.locator(".gt-scroller").evaluate("e => { e.scrollTop = e.scrollHeight; }")
    w.settle()
    ids = [r["id"] for r in json.loads(w.attr("layout"))]
    assert last in ids and ids[-1] != last and ids[-1].startswith("r") and ids[0] != "steps"  # scrolled down
