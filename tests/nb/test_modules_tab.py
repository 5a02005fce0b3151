"""The explorer's Modules tab: module_statistic at a selectable depth and the top modules' chart, escaped."""

from __future__ import annotations

import html
import re

import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.nb import explorer as X
from geprof_nb.nb import report as R
from helpers.geprof_testing import run_profiled_session
from helpers.llm_runs import run_llm
from helpers.real_data import PYTORCH_TEXT

HOSTILE = "<img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return run_llm(tmp_path_factory.mktemp("tiny"), seq_len=256)


def _rows(table_html: str) -> list[list[str]]:
    """The body cells of an HTML table, unescaped."""
    body = table_html.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [[html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", r)] for r in body.split("</tr>")[:-1]]


def test_the_tab_shows_layers_then_any_depth_with_a_chart(tiny):
    ex = X.Explorer(tiny)
    pane = ex.select("Modules")
    assert pane.box._dom_classes == ("geprof-tab-modules",)
    assert list(pane.depth.options) == [1, 2, 3, 4] and pane.depth.value == 2  # model/layers.0/self_attn/qkv_proj
    expected = tiny.module_statistic(2)
    rows = _rows(pane.table.value)
    assert len(rows) == len(expected) == 35  # 8 layers and embed/norm/lm_head/loss, by phase
    assert rows[0][:4] == [expected["Module"][0], expected["Phase"][0], str(expected["Count"][0]),
                           f"{expected['Total Time(us)'][0]:,.3f}"]
    assert "module_statistic at depth 2" in pane.table.value and pane.chart.picture.png is not None
    pane.depth.value = 3
    deeper = tiny.module_statistic(3)
    assert "module_statistic at depth 3" in pane.table.value and f"first 50 of {len(deeper)} rows" in pane.table.value
    assert [r[0] for r in _rows(pane.table.value)] == deeper["Module"].head(50).tolist()
    assert pane.chart.picture.alt == "device time per module"
    assert R.Report.of(tiny).modules(3) is R.Report.of(tiny).modules(3)  # computed once per depth
    static = ex.static_html()
    assert "<h3>Modules</h3>" in static and "module_statistic at depth 2" in static
    assert "plots.module_bars(profile.module_statistic(2))" in static  # named, not embedded


def test_module_names_are_escaped(tmp_path):
    g = ge.Graph("evil")
    x = g.data("x", (8, 16))
    w = g.variable("w", (16, 4), dtype="float16")
    g.output([g.op("MatMulV2", [x, w], name=f"{HOSTILE}/proj/MatMulV2")])
    p = run_profiled_session(tmp_path, g, 2).profile
    ex = X.Explorer(p)
    live = ex.select("Modules").table.value
    assert html.escape(f"{HOSTILE}/proj") in live and "<img src=x" not in live
    assert "<img src=x" not in ex.static_html()


def test_a_run_without_module_paths_says_why(tmp_path):
    real = geprof_nb.load(PYTORCH_TEXT / "level0" / "rank0_ascend_pt")
    text = X.Explorer(real).select("Modules").box.children[0].value
    assert html.escape(R.MSG_NO_MODULES) in text and "torch_npu kernel names do not" in R.MSG_NO_MODULES
