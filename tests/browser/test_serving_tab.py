"""The explorer's Serving tab in a real JupyterLab, in Chromium.

A served tiny-llama run (14 requests arriving at 200/s, 4 KV blocks: preemptions) made here, so the test knows
its tables, loaded from its run directory in a notebook: its explorer has the Serving tab after the tabs every
run has; the tab shows the percentiles as ``Profile.serving_summary`` gives them, the per-step chart (an image
drawn in the phases' colours) and the slowest request first.  A screenshot is saved as ``tab_serving.png``
(``docs/screenshots/serving_tab.png`` with ``GEPROF_UPDATE_SCREENSHOTS=1``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from geprof_nb import ge
from geprof_nb.nb.explorer import TAB_TITLES
from helpers.lab_browser import REPO, SKIP_REASON, cell, executed_notebook, explorer_tab, screenshot

if SKIP_REASON:
    pytest.skip(SKIP_REASON, allow_module_level=True)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TIMEOUT = 60_000


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from helpers.geprof_testing import serve_profiled

    reqs = ge.requests(14, prompt_len=(32, 256), output_len=(2, 30), rate=200.0, seed=5)
    return serve_profiled(tmp_path_factory.mktemp("served"), requests=reqs, max_batch_size=4, kv_cache_blocks=4)[1]


@pytest.fixture(scope="module")
def notebook(browser_context, lab, served):
    sources = ["%load_ext geprof_nb\nimport geprof_nb", f"geprof_nb.load({str(served.path)!r})"]
    with executed_notebook(browser_context, lab, "serving", sources) as page:
        cell(page, 1).locator(".geprof-explorer").first.wait_for(timeout=TIMEOUT)
        yield page


def test_the_serving_tab_shows_the_summary_the_steps_and_the_slowest_requests(notebook, served, tmp_path):
    explorer = cell(notebook, 1).locator(".geprof-explorer").first
    titles = [t.strip() for t in explorer.locator(".lm-TabBar-tab").all_inner_texts()]
    assert titles == [*TAB_TITLES, "Serving"]
    pane = explorer_tab(cell(notebook, 1), "Serving")
    assert pane.locator("pre").count() == 0  # a failing tab shows its traceback in a <pre>
    summary = served.serving_summary()
    rows = pane.locator(".geprof-serving-percentiles tbody tr")
    assert rows.count() == 3
    ttft = rows.nth(0).locator("td").all_inner_texts()
    assert ttft == ["TTFT"] + [f"{summary[f'ttft_p{q}_ms']:,.3f}" for q in (50, 90, 99)]
    tpot = rows.nth(1).locator("td").all_inner_texts()
    assert tpot == ["TPOT"] + [f"{summary[f'tpot_p{q}_ms']:,.3f}" for q in (50, 90, 99)]
    throughput = pane.locator(".geprof-serving-throughput").inner_text()
    assert f"{summary['output_tokens_per_s']:,.3f}" in throughput
    chart = pane.locator("img").first
    chart.wait_for(timeout=TIMEOUT)
    assert chart.evaluate("im => im.complete && im.naturalWidth") >= 800
    slowest = served.serving_requests.sort_values("e2e_ms", ascending=False, kind="stable").iloc[0]
    first = pane.locator(".geprof-serving-slowest tbody tr").first.locator("td").all_inner_texts()
    assert first[0] == str(int(slowest["request_id"])) and first[4] == f"{slowest['e2e_ms']:,.3f}"
    update = os.environ.get("GEPROF_UPDATE_SCREENSHOTS") == "1"
    path = (REPO / "docs" / "screenshots" / "serving_tab.png") if update else Path(tmp_path) / "tab_serving.png"
    screenshot(notebook, path, ".jp-Notebook .jp-Cell >> nth=1", fit=True)
    assert notebook.dialogs == []
