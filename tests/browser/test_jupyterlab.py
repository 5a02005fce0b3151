"""geprof_nb in a real JupyterLab, driven in Debian's Chromium by Playwright.

1. The quickstart notebook, Run All: the ``%%geprof`` cell renders the tabbed results explorer
   (``.geprof-explorer``) with its tables and the step timeline image.
2. The options panel (``%geprof config``, root ``.geprof-config``): choosing ``Memory`` in its
   aic_metrics dropdown (``.geprof-aic-metrics``) and re-running the ``%%geprof`` cell brings the
   Memory group's op_summary columns.
3. An op named ``<img src=x onerror=alert(1)>`` shows as text and no dialog opens.

Screenshots: a full page per test in its ``tmp_path`` (``page.png`` and named ones).  The README's
``docs/screenshots/explorer.png`` and ``config_panel.png`` are rewritten when
``GEPROF_UPDATE_SCREENSHOTS=1`` is set (so a CI run leaves the tree as it was).
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest

from geprof_nb.analysis.tables import columns as C
from helpers.lab_browser import (
    REPO,
    SKIP_REASON,
    cell,
    error_outputs,
    explorer_tab,
    open_notebook,
    rerun_cell,
    run_all,
    screenshot,
    wait_all_executed,
    write_notebook,
)

if SKIP_REASON:
    pytest.skip(SKIP_REASON, allow_module_level=True)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

README_SCREENSHOTS = REPO / "docs" / "screenshots"
XSS_NAME = "<img src=x onerror=alert(1)>"

PROFILE_CELL = """%%geprof --clock virtual
sess = ge.Session()
sess.add_graph(1, ge.models.mlp(batch_size=8, in_features=32, hidden=(32,), world_size=2))
for step in range(2):
    sess.run_graph(1)"""

#: Columns of the Memory group that PipeUtilization (the default) does not have.
MEMORY_ONLY = [c for c in C.pmu_columns("Memory", "A2") if c not in C.pmu_columns("PipeUtilization", "A2")]
#: ... and the other way round (which of them a table shows depends on which ops lead it: cube or vector).
PIPE_ONLY = [c for c in C.pmu_columns("PipeUtilization", "A2") if c not in C.pmu_columns("Memory", "A2")]


def readme_screenshot(tmp_path: Path, name: str) -> Path:
    """Where a screenshot the README shows goes: docs/screenshots when asked to update them."""
    return (README_SCREENSHOTS if os.environ.get("GEPROF_UPDATE_SCREENSHOTS") == "1" else tmp_path) / name


def test_quickstart_run_all_renders_tables_timeline_and_explorer(page, lab, tmp_path):
    # the notebook is stored executed: opened without its outputs, all that shows is this run's
    nb = nbformat.read(REPO / "notebooks" / "01_quickstart.ipynb", as_version=4)
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None
    nb.metadata.pop("widgets", None)
    nbformat.write(nb, lab.root / "quickstart.ipynb")
    open_notebook(page, lab, "quickstart.ipynb", "quickstart")
    run_all(page)
    wait_all_executed(page)
    assert error_outputs(page) == []
    # the %%geprof cell (the %load_ext cell's output names %%geprof too, but holds no explorer)
    profile_cell = page.locator(".jp-Notebook .jp-CodeCell").filter(has_text="%%geprof --aic-metrics").first
    explorer = profile_cell.locator(".geprof-explorer")
    explorer.first.wait_for(timeout=30_000)
    assert explorer.count() == 1
    assert explorer.locator("table").count() > 0  # Summary: step split, top ops
    assert "Op Name" in explorer.text_content()
    screenshot(page, readme_screenshot(tmp_path, "explorer.png"), ".geprof-explorer", fit=True)
    timeline = explorer_tab(profile_cell, "Timeline")
    timeline.locator("img").first.wait_for(timeout=30_000)  # the FP/BP step timeline
    screenshot(page, tmp_path / "explorer_timeline.png", ".geprof-explorer")
    assert "aiv_vec_ratio" in explorer_tab(profile_cell, "AI Core").text_content()  # its top 20: vector ops
    assert "FP Start(us)" in explorer_tab(profile_cell, "Steps").text_content()
    assert page.dialogs == []


def test_config_panel_aic_metrics_memory_reaches_the_rerun(page, lab, tmp_path):
    sources = ["%load_ext geprof_nb", "%geprof config", PROFILE_CELL]
    write_notebook(lab.root / "panel.ipynb", sources)
    profile_index = len(sources) - 1
    open_notebook(page, lab, "panel.ipynb", "panel")
    run_all(page)
    wait_all_executed(page)
    assert error_outputs(page) == []
    before = explorer_tab(cell(page, profile_index), "AI Core").text_content()
    assert "aic_metrics group: PipeUtilization" in before
    assert [c for c in PIPE_ONLY if c in before] and not [c for c in MEMORY_ONLY if c in before]
    page.locator(".geprof-config").first.wait_for(timeout=30_000)
    page.locator(".geprof-aic-metrics select").select_option("Memory")
    page.wait_for_timeout(300)  # the kernel answers the change (the panel shows the equivalent line)
    screenshot(page, readme_screenshot(tmp_path, "config_panel.png"), ".geprof-config", fit=True)
    rerun_cell(page, profile_index)
    assert error_outputs(page) == []
    cell(page, profile_index).locator(".geprof-explorer").first.wait_for(timeout=30_000)
    after = explorer_tab(cell(page, profile_index), "AI Core").text_content()
    assert "aic_metrics group: Memory" in after and [c for c in MEMORY_ONLY if c in after]
    assert [c for c in PIPE_ONLY if c in after] == []
    screenshot(page, tmp_path / "memory_rerun.png", f".jp-Notebook .jp-Cell >> nth={profile_index}")
    assert page.dialogs == []


XSS_CELL = f"""%%geprof --clock virtual
g = ge.Graph("xss")
x = g.data("x", (8, 16))
w = g.variable("w", (16, 4), dtype="float16")
y = g.op("MatMulV2", [x, w], name={XSS_NAME!r})
g.output([y])
s = ge.Session()
s.add_graph(1, g)
for _ in range(2):
    s.run_graph(1)"""


def test_op_name_with_html_shows_as_text_and_fires_no_dialog(page, lab, tmp_path):
    write_notebook(lab.root / "xss.ipynb", ["%load_ext geprof_nb", XSS_CELL])
    open_notebook(page, lab, "xss.ipynb", "xss")
    run_all(page)
    wait_all_executed(page)
    assert error_outputs(page) == []
    profile_cell = cell(page, 1)
    profile_cell.locator(".jp-OutputArea table").first.wait_for()
    titles = profile_cell.locator(".geprof-explorer .lm-TabBar-tab").all_inner_texts()
    assert len(titles) > 1
    for title in titles:  # build every tab: each may show the op name
        explorer_tab(profile_cell, title.strip())
    explorer_tab(profile_cell, "Ops")
    page.wait_for_timeout(500)  # an injected <img src=x> would have failed to load and fired by now
    assert XSS_NAME in profile_cell.locator(".jp-OutputArea").inner_text()  # shown as text ...
    assert page.locator("img[src='x'], img[onerror]").count() == 0  # ... never as an element
    screenshot(page, tmp_path / "xss.png", ".jp-Notebook .jp-Cell >> nth=1")
    assert page.dialogs == []
