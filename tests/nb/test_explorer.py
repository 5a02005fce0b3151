"""The results explorer (what %%geprof and display(profile) show): tabs, controls, lazy tabs,
the static fallback bundle, escaping, and how long showing it takes."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from IPython.utils.capture import capture_output
from ipywidgets.widgets.widget import _instances

import geprof_nb
from geprof_nb import ge
from geprof_nb.nb import explorer as X
from geprof_nb.nb import html_parts as H
from geprof_nb.nb import plots
from geprof_nb.nb import report as R
from geprof_nb.nb.display import profile_mimebundle, show_profile
from geprof_nb.prof.clock import clock
from helpers.geprof_testing import TS_TOL_US, small_resnet, step_headline_by_hand
from helpers.geprof_testing import run_profiled_session as _run_profiled_session
from helpers.notebook_testing import widget_html

HOSTILE = "<img src=x onerror=alert(1)>"
HOSTILE_ESCAPED = "&lt;img src=x onerror=alert(1)&gt;"
BUNDLE_KEYS = {X.WIDGET_VIEW_MIME, "text/html", "image/png", "text/plain"}


def run_profiled_session(*args, **kwargs):
    """A profiled session on the virtual clock that leaves the clock as it found it
    (GEFinalize keeps the geprof.clock of GEInitialize, and %%geprof without --clock uses it)."""
    mode = clock.mode
    try:
        return _run_profiled_session(*args, **kwargs)
    finally:
        clock.set_mode(mode)


def hostile_graph() -> ge.Graph:
    g = ge.Graph("evil")
    x = g.data("x", (8, 16))
    w = g.variable("w", (16, 4), dtype="float16")
    y = g.op("MatMulV2", [x, w], name=HOSTILE)
    y = g.op("Relu", y, name=HOSTILE + "&relu")
    g.output([y])
    return g


@pytest.fixture(scope="module")
def full(tmp_path_factory) -> geprof_nb.Profile:
    """ResNet-50 (small), 8 ranks, 3 steps, PipeUtilization, memory and runtime API on."""
    return run_profiled_session(tmp_path_factory.mktemp("full"), small_resnet(8), 3, task_memory="on",
                                runtime_api="on").profile


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> geprof_nb.Profile:
    """A graph whose op names are HTML; nothing but the default layers."""
    return run_profiled_session(tmp_path_factory.mktemp("hostile"), hostile_graph(), 3).profile


@pytest.fixture(scope="module")
def l0(tmp_path_factory) -> geprof_nb.Profile:
    """task_trace l0: op times without names, types or PMU counters."""
    return run_profiled_session(tmp_path_factory.mktemp("l0"), small_resnet(2), 2, task_trace="l0").profile


@pytest.fixture(scope="module")
def dynamic(tmp_path_factory) -> geprof_nb.Profile:
    """A dynamic-shape MLP with GE host events and runtime API calls."""
    g = ge.models.mlp(batch_size=4, in_features=16, hidden=(16,), dynamic=True)
    return run_profiled_session(tmp_path_factory.mktemp("dyn"), g, 3, ge_api="l1", runtime_api="on").profile


def images(widget) -> list:
    """The visible Image widgets under a widget."""
    if getattr(widget, "format", None) == "png" and hasattr(widget, "value"):
        return [widget] if widget.value and widget.layout.display != "none" else []
    return [i for c in getattr(widget, "children", ()) for i in images(c)]


def body_rows(table_html: str) -> int:
    return table_html.split("<tbody>", 1)[1].count("<tr")


# ----------------------------------------------------------------------------- structure
def test_tabs_are_titled_in_order_and_carry_their_css_classes(full):
    ex = X.Explorer(full)
    assert list(ex.tab.titles) == ["Summary", "Ops", "Steps", "Timeline", "AI Core", "Memory", "API/Host", "Modules",
                                   "Advice", "What-if"]
    assert "geprof-explorer" in ex.widget._dom_classes and ex.tab in ex.widget.children
    for frame in ex.tab.children:
        ex.tab.selected_index = ex.tab.children.index(frame)
    classes = [frame.children[0]._dom_classes for frame in ex.tab.children]
    assert classes == [("geprof-tab-summary",), ("geprof-tab-ops",), ("geprof-tab-steps",), ("geprof-tab-timeline",),
                       ("geprof-tab-ai-core",), ("geprof-tab-memory",), ("geprof-tab-api-host",), ("geprof-tab-modules",),
                       ("geprof-tab-advice",), ("geprof-tab-what-if",)]


def test_only_the_summary_is_built_until_a_tab_is_selected(full):
    ex = X.Explorer(full)
    assert [p.built for p in ex.panes.values()] == [True] + [False] * (len(X.TAB_TITLES) - 1)
    # an unbuilt tab shows a note (what a saved notebook without a kernel shows), not its content box
    assert all(widget_html(ex.tab.children[i]) == H.message_html(X.PENDING) for i in range(1, len(X.TAB_TITLES)))
    assert ex.tab.children[0].children == (ex.summary.box,)
    ex.tab.selected_index = 5  # what a click on "Memory" does
    assert ex.memory.built and ex.tab.children[5].children == (ex.memory.box,)
    assert "Peak" in widget_html(ex.memory.box)
    assert not ex.ops.built and not ex.timeline.built


def test_summary_shows_headline_split_top_ops_findings_and_notes(full):
    ex = X.Explorer(full)
    text = widget_html(ex.summary.box)
    # one step figure leads: the whole step periods (steps 2 and 3: step 1 spans only itself), and it says so
    headline = step_headline_by_hand(full, [2, 3])
    assert f"<b>geprof</b> {full.name} | {headline} | 3 steps |" in text
    assert "mean step time" not in text  # step_trace's Iteration Time is another definition: not in the headline
    assert "Step split: mean of 2 step periods, from one iteration&#x27;s end to the next" in text
    split = full.step_breakdown.set_index("Step").loc[[2, 3], ["Computing", "Communication(Not Overlapped)", "Free"]]
    for part, value in split.mean().items():
        assert html_escape(part) in text and f"{value:,.3f}" in text
    assert f"{split.mean().sum():,.3f}" in text and "100.000" in text  # the Step row: the parts add up
    top = full.ops().nlargest(1, "Task Duration(us)")["Op Name"].iloc[0]
    assert top in text
    findings = full.advise()
    for rule in findings["Rule"].head(3):
        assert html_escape(rule) in text
    for note in full.notes:
        assert html_escape(note) in text


def test_summary_shows_a_step_chart_of_every_step_with_the_step_figure(full):
    """The first thing a cell shows has a picture of the steps: a stacked bar per step (Computing / exposed
    Communication / Free of step_breakdown), the step figure as a line, step 1 (its own span only) hatched."""
    ex = X.Explorer(full)
    (chart,) = [b for b in ex.summary.content if isinstance(b, R.Chart)]
    assert chart.name == "step_split_bars" and len(images(ex.summary.box)) == 1
    ax = chart.picture.figure.axes[0]
    bars = {c.get_label(): [p.get_height() for p in c.patches] for c in ax.containers
            if not c.get_label().startswith("_")}
    sb = full.step_breakdown
    np.testing.assert_allclose(bars["Computing"], sb["Computing"])
    np.testing.assert_allclose(bars["exposed Communication"], sb["Communication(Not Overlapped)"])
    np.testing.assert_allclose(bars["Free"], sb["Free"])
    (figure_line,) = [ln for ln in ax.lines if ln.get_linestyle() == "--"]
    assert figure_line.get_ydata()[0] == pytest.approx(full.step_split.length_us)
    hatched = {round(p.get_x() + p.get_width() / 2) for p in ax.patches if p.get_hatch()}
    assert hatched == {0} and full.step_split.steps == (2, 3)  # step 1 is left out of the figure


def test_headline_top_op_type_is_the_largest_share_of_the_summary_tables_total(full):
    """The headline's top op type counts communication ops, over the same op time (the last
    iteration's op tasks) as the Summary table's "Share of op time(%)" column."""
    r = X.Explorer(full).report
    last = full.ops()
    by_type = last.groupby("OP Type", observed=True)["Task Duration(us)"].sum()
    share = by_type / last["Task Duration(us)"].sum() * 100
    assert share.idxmax() == "HcomAllReduce" and full.op_statistic["OP Type"].iloc[0] != "HcomAllReduce"
    assert f"top op type HcomAllReduce ({share.max():.1f}% of op time of iteration 3)" in r.headline
    top, total = r.summary_ops
    assert total == len(last)
    row = top.iloc[0]
    assert row["Share of op time(%)"] == pytest.approx(row["Task Duration(us)"] / last["Task Duration(us)"].sum() * 100)


def html_escape(s: str) -> str:
    import html

    return html.escape(s)


# ----------------------------------------------------------------------------- Ops
def test_ops_filter_by_op_type_keeps_only_that_type_and_counts_them(full):
    ops = X.Explorer(full).select("Ops")
    last = full.ops()
    ops.top_n.value = ops.top_n.max
    ops.type_filter.value = "Conv2D"
    assert set(ops.frame["OP Type"].astype(str)) == {"Conv2D"}
    n = int((last["OP Type"] == "Conv2D").sum())
    assert len(ops.frame) == n > 0
    assert ops.count_label.value.startswith(f"Showing {n} of {n} op tasks (OP Type Conv2D, iteration 3)")
    assert body_rows(ops.table.value) == n
    ops.type_filter.value = R.ALL
    assert len(ops.frame) == X.MAX_ROWS < len(last)
    assert ops.count_label.value.startswith(f"Showing {X.MAX_ROWS} of {len(last)} op tasks (all OP Types")
    assert ops.type_filter.options[0] == ("All", R.ALL)


def test_ops_sort_by_a_column_is_descending_and_top_n_limits_rows(full):
    ops = X.Explorer(full).select("Ops")
    assert ops.sort_by.value == "Task Duration(us)"
    assert "aic_mte2_ratio" in ops.sort_by.options and "Op Name" not in ops.sort_by.options
    ops.sort_by.value = "aic_mte2_ratio"
    values = ops.frame["aic_mte2_ratio"].to_numpy(dtype=float)
    expected = full.ops()["aic_mte2_ratio"].dropna().sort_values(ascending=False).head(len(values)).to_numpy()
    np.testing.assert_array_equal(values, expected)
    assert (np.diff(values) <= 0).all()
    ops.top_n.value = 5
    assert len(ops.frame) == 5 and body_rows(ops.table.value) == 5
    assert ops.count_label.value.startswith(f"Showing 5 of {len(full.ops())} op tasks")
    assert "sorted by aic_mte2_ratio descending" in ops.count_label.value


def test_ops_iteration_selector_and_column_groups(full):
    ops = X.Explorer(full).select("Ops")
    ops.top_n.value = ops.top_n.max
    ops.iteration.value = 1
    first = full.ops(1)
    assert ops.count_label.value.startswith(f"Showing {X.MAX_ROWS} of {len(first)} op tasks (all OP Types, iteration 1)")
    assert ops.frame.index.isin(first.index).all()
    ops.iteration.value = R.ALL
    assert f"of {len(full.op_summary)} op tasks (all OP Types, all iterations)" in ops.count_label.value
    # default: basic + PMU; shapes/formats hidden so the table stays readable
    assert "aic_mac_ratio" in ops.frame.columns and "Input Shapes" not in ops.frame.columns
    ops.groups["PMU"].value = False
    pmu = ex_groups(full)["PMU"]
    assert pmu and not set(pmu) & set(ops.frame.columns)
    assert "aic_mac_ratio" not in ops.table.value
    ops.groups["shapes/formats"].value = True
    assert "Input Shapes" in ops.frame.columns
    ops.groups["basic"].value = False
    assert list(ops.frame.columns) == [*LEAD, "Input Shapes", "Input Data Types", "Input Formats",
                                       "Output Shapes", "Output Data Types", "Output Formats"]


LEAD = ["Op Name", "OP Type", "Task Type", "Task Duration(us)", "Share of op time(%)"]


def ex_groups(profile):
    return R.Report.of(profile).column_groups


def test_ops_table_leads_with_what_a_person_reads_and_hides_ids_and_constant_columns(full):
    """Op Name, OP Type, Task Type, duration and share first; Device_id, Model ID, Task ID, Stream ID, Context ID
    and columns with one value (OP State static, Mix Block Num 0, HF32 Eligible NO) behind a button."""
    ops = X.Explorer(full).select("Ops")
    assert list(ops.frame.columns[:5]) == LEAD
    hidden = ["Device_id", "Model ID", "Task ID", "Stream ID", "OP State", "Mix Block Num", "HF32 Eligible",
              "Context ID"]
    assert ex_groups(full)["ids/constant"] == hidden
    last = full.ops()
    for c in hidden[4:]:  # constant: one value besides msprof's N/A (a collective's) in every row of the run
        assert full.op_summary[c].astype(str).replace("N/A", np.nan).dropna().nunique() <= 1, c
    assert not set(hidden) & set(ops.frame.columns) and "Block Num" in ops.frame.columns
    assert ">Device_id</th>" not in ops.table.value
    options = list(ops.sort_by.options)  # the sort list opens with the duration, the ids and constants last
    hidden_numbers = [c for c in options if c in hidden]
    assert options[0] == "Task Duration(us)" and options[-len(hidden_numbers):] == hidden_numbers
    assert {"Device_id", "Task ID", "Stream ID"} <= set(hidden_numbers) and "aic_mac_ratio" in options
    ops.groups["ids/constant"].value = True
    assert set(hidden) <= set(ops.frame.columns) and list(ops.frame.columns[:5]) == LEAD
    # the share is of the iteration's op time, every OP Type: what the Summary's column says
    share = ops.frame["Share of op time(%)"].to_numpy()
    np.testing.assert_allclose(share, ops.frame["Task Duration(us)"] / last["Task Duration(us)"].sum() * 100)
    ops.type_filter.value = "Conv2D"  # a filter does not change what the share is of
    conv = last[last["OP Type"] == "Conv2D"]["Task Duration(us)"].max()
    assert ops.frame["Share of op time(%)"].iloc[0] == pytest.approx(conv / last["Task Duration(us)"].sum() * 100)


def test_ops_start_times_are_since_the_first_step_with_the_absolute_ones_a_button_away(full):
    ops = X.Explorer(full).select("Ops")
    start = "Task Start Time(us)"
    first_step_us = full.time_origin_ns / 1000
    assert full.time_origin_ns == int(full.source.step_bounds()["begin"].min())
    row = ops.frame.index[0]
    assert ops.frame.at[row, start] == pytest.approx(full.op_summary.at[row, start] - first_step_us, abs=0.5)
    assert 0 < ops.frame[start].max() < 3 * full.step_trace["Iteration Time(us)"].max()  # step 3 of 3, in us
    assert "start times in us since the run's first step" in ops.count_label.value
    ops.absolute.value = True
    assert ops.frame.at[row, start] == full.op_summary.at[row, start]
    assert "since the run's first step" not in ops.count_label.value
    assert f"{full.op_summary.at[row, start]:,.3f}" in ops.table.value


def test_ops_controls_rerender_only_their_tab(full):
    ex = X.Explorer(full)
    ops = ex.select("Ops")
    table = ops.table
    ops.type_filter.value = "Relu"
    assert ops.table is table and "Relu" in table.value
    assert [p.built for p in ex.panes.values()] == [True, True] + [False] * (len(X.TAB_TITLES) - 2)


# ----------------------------------------------------------------------------- Steps, Timeline
def test_steps_tab_shows_step_trace_and_breakdown(full):
    text = widget_html(X.Explorer(full).select("Steps").box)
    assert "step_trace (times in us since the run&#x27;s first step" in text and "step_breakdown" in text
    assert f"{full.step_breakdown['Free'].iloc[0]:,.3f}" in text


def test_step_trace_times_are_since_the_first_step_and_its_reduce_pairs_one_table(full):
    """No 16-digit timestamps: FP Start, BP End, Iteration End and every Reduce Start are us since the first
    step's start (the absolute ones one button away); the repeated Reduce Start/Duration pairs are a count and
    a sum per step, and a table with one row per AllReduce."""
    pane = X.Explorer(full).select("Steps")
    st = full.step_trace
    origin = full.time_origin_ns / 1000
    main = re.findall(r"<tbody>(.*?)</tbody>", widget_html(pane.box))
    first = re.findall(r"<td[^>]*>([^<]*)</td>", main[0].split("</tr>")[0])
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", widget_html(pane.box).split("</thead>")[0])
    assert "Reduce Start(us)" not in heads and heads[-2:] == ["Reduces", "Reduce Duration sum(us)"]
    fp = heads.index("FP Start(us)")
    assert first[fp] == f"{st['FP Start(us)'].iloc[0] - origin:,.3f}" and len(first[fp]) < 10
    pairs = [i for i, c in enumerate(st.columns) if c == "Reduce Duration(us)"]
    assert first[-2:] == [str(len(pairs)), f"{st.iloc[0, pairs].sum():,.3f}"] and len(pairs) == 4
    reduce_rows = [re.findall(r"<td[^>]*>([^<]*)</td>", r) for r in main[1].split("</tr>") if r]
    assert len(reduce_rows) == len(pairs) * len(st)
    starts = [i for i, c in enumerate(st.columns) if c == "Reduce Start(us)"]
    assert reduce_rows[1][:4] == ["1", "2", f"{st.iloc[0, starts[1]] - origin:,.3f}", f"{st.iloc[0, pairs[1]]:,.3f}"]
    pane.absolute.value = True
    text = widget_html(pane.box)
    assert f"{st['FP Start(us)'].iloc[0]:,.3f}" in text and "absolute times in us" in text
    assert f"{st.iloc[0, starts[1]]:,.3f}" in text


def test_api_statistic_shows_the_spread_as_a_standard_deviation_in_us(full):
    """msprof's Variance is in us² without saying so: the tab shows its square root, in us, in its place."""
    text = widget_html(X.Explorer(full).select("API/Host").box)
    api = full.api_statistic
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", text.split("</thead>")[0])
    assert "Variance" not in heads and heads[-1] == "Std Dev(us)"
    k = int(np.argmax(api["Variance"].to_numpy()))
    row = re.findall(r"<td[^>]*>([^<]*)</td>", text.split("<tbody>")[1].split("</tr>")[k])
    assert row[-1] == f"{np.sqrt(api['Variance'].iloc[k]):,.3f}" and api["Variance"].iloc[k] > 0


def test_step_selector_zooms_step_timeline_and_gantt_to_the_iteration(full):
    tl = X.Explorer(full).select("Timeline")
    assert tl.step.value == R.ALL and len(images(tl.box)) == 2
    full_width = np.diff(tl.step_figure.axes[0].get_xlim())[0]
    assert "iteration 3" in tl.gantt_figure.axes[0].get_title(loc="left")  # all steps: the Gantt shows the last one
    ops, its = full.op_summary, full.iteration_of_ops.to_numpy()
    for it in (1, 2):
        tl.step.value = it
        rows = ops[its == it]
        span_ms = ((rows["Task Start Time(us)"] + rows["Task Duration(us)"]).max()
                   - rows["Task Start Time(us)"].min()) / 1000
        x0, x1 = tl.gantt_figure.axes[0].get_xlim()
        assert x1 - x0 == pytest.approx(1.01 * span_ms, abs=1e-3)  # task_gantt pads 0.5% each side; 1 ns
        assert f"iteration {it}" in tl.gantt_figure.axes[0].get_title(loc="left")
        assert np.diff(tl.step_figure.axes[0].get_xlim())[0] < full_width / 2
        assert len(images(tl.box)) == 2
    tl.step.value = 3  # the last step: the Gantt "All steps" drew, but with this choice's title
    assert tl.gantt_figure.axes[0].get_title(loc="left").startswith("Tasks per stream: iteration 3")
    tl.step.value = R.ALL
    assert "pick a step above to zoom" in tl.gantt_figure.axes[0].get_title(loc="left")


# ----------------------------------------------------------------------------- AI Core, Memory, API/Host
def test_ai_core_tab_draws_pipe_ratios_and_the_pmu_table(full):
    pane = X.Explorer(full).select("AI Core")
    text = widget_html(pane.box)
    assert 'class="dataframe geprof-table geprof-pmu-table"' in text
    assert "aiv_vec_ratio" in text
    assert len(images(pane.box)) == 2  # the pipe ratios and the roofline
    table, total = pane.pmu_table()
    # only the PMU columns the rows shown have a value in: a top of vector ops shows no column of aic_* N/As
    pmu = [c for c in table.columns if c.startswith(("aic_", "aiv_"))]
    assert pmu and all(table[c].notna().any() for c in pmu)
    assert set(table["Task Type"].astype(str)) == {"AI_VECTOR_CORE"} and not any(c.startswith("aic_") for c in pmu)
    top = full.ops()
    top = top[top["Task Type"].astype(str) != "COMMUNICATION"].nlargest(1, "Task Duration(us)")
    assert table["Op Name"].iloc[0] == top["Op Name"].iloc[0] and len(table) == 20


def test_memory_tab_shows_lifetimes_peak_and_largest_tensors_of_the_last_iteration(full):
    """The tab shows iteration 3 (the last) from its own records: the numbers are the whole run's tables'
    for that iteration's window, and showing the explorer builds none of the whole run's memory tables."""
    fresh = geprof_nb.load(full.path)
    ex = X.Explorer(fresh)
    pane = ex.select("Memory")
    ex.static_html()
    assert not {"operator_memory", "memory_record", "tensor_lifetimes"} & set(vars(fresh))  # cached once built
    text = widget_html(pane.box)
    last = full.step_trace.iloc[-1]
    assert int(last["Iteration ID"]) == 3
    # the window's float-us bounds (~1.77e15 us: a 0.25 us ulp) may round past the step's first allocation
    w0, w1 = last["Iteration End(us)"] - last["Iteration Time(us)"] - TS_TOL_US, last["Iteration End(us)"] + TS_TOL_US
    om, mr = full.operator_memory, full.memory_record
    mine = om[(om["Allocation Time(us)"] >= w0) & (om["Allocation Time(us)"] <= w1)]
    window = mr[(mr["Timestamp(us)"] >= w0) & (mr["Timestamp(us)"] <= w1)]
    assert 0 < len(mine) < len(om)
    largest = mine.sort_values("Size(KB)", ascending=False, kind="stable").drop_duplicates("Name")
    assert (f"operator_memory of iteration 3: the 20 largest of {len(largest)} tensors ({len(mine)} allocations; "
            "times in us since the run&#x27;s first step") in text
    table = text.split("operator_memory of iteration 3")[1]
    assert [html_escape(n) for n in largest["Name"].head(20)] == re.findall(r"<tr>\s*<td>([^<]*)</td>", table)
    origin = full.time_origin_ns / 1000  # times since the run's first step: the absolute ones a button away
    assert f"{largest['Allocation Time(us)'].iloc[0] - origin:,.3f}" in table
    assert f"{largest['Allocation Time(us)'].iloc[0]:,.3f}" not in table
    top = window.loc[window["Total Allocated(MB)"].idxmax()]  # the first time the iteration's highest was reached
    reached = mine[(mine["Allocation Time(us)"] == top["Timestamp(us)"])
                   & (mine["Allocation Total Allocated(MB)"] == top["Total Allocated(MB)"])]["Name"].iloc[-1]
    assert (f"<b>Peak of iteration 3</b> {plots.format_size(top['Total Allocated(MB)'] * 1024 * 1024)} allocated "
            f"({plots.format_size(top['Total Reserved(MB)'] * 1024 * 1024)} reserved) at "
            f"{top['Timestamp(us)'] - origin:,.3f} us after the run's first step began, "
            f"reached by allocating <code>{html_escape(reached)}</code>") in text
    assert len(images(pane.box)) == 1
    pane.absolute.value = True
    assert f"{largest['Allocation Time(us)'].iloc[0]:,.3f}" in widget_html(pane.box)
    assert f"at {top['Timestamp(us)']:,.3f} us, reached" in widget_html(pane.box)
    fig = ex.report.memory_lifetimes().picture.figure
    tl = full.tensor_lifetimes
    live = (tl["Allocation Time(us)"] <= w1) & (tl["Release Time(us)"].isna() | (tl["Release Time(us)"] >= w0))
    assert f"({live.sum():,} tensors)" in fig.axes[0].get_title(loc="left")
    (allocated,) = [ln for ln in fig.axes[1].lines if ln.get_label() == "allocated"]
    np.testing.assert_array_equal(allocated.get_ydata(), window["Total Allocated(MB)"].to_numpy())


def test_api_host_tab_shows_api_statistic_host_scopes_and_events(dynamic):
    pane = X.Explorer(dynamic).select("API/Host")
    text = widget_html(pane.box)
    assert "api_statistic" in text and "rtKernelLaunch" in text
    assert f"host_events per event ({len(dynamic.host_events)} spans)" in text and "InferShape" in text
    assert "--ge-api" not in text and "--runtime-api" not in text
    assert len(images(pane.box)) == 1


def test_empty_tabs_name_the_flag_that_fills_them(l0, hostile):
    ex = X.Explorer(l0)
    ai = widget_html(ex.select("AI Core").box)
    assert "--aic-metrics" in ai and not images(ex.ai_core.box)
    ex = X.Explorer(hostile)
    assert "--task-memory on" in widget_html(ex.select("Memory").box)
    api = widget_html(ex.select("API/Host").box)
    assert "--ge-api l1" in api and "--runtime-api on" in api
    static = ex.static_html()
    assert "--task-memory on" in static and "--ge-api l1" in static and "--runtime-api on" in static


def test_a_run_without_op_data_says_so_in_the_static_report(tmp_path):
    """The no-data notes are shown in every report, not named as a figure left out (with an empty tab
    and call)."""
    p = run_profiled_session(tmp_path, ge.models.mlp(batch_size=4, in_features=16, hidden=(16,)), 2,
                             task_trace="off", training_trace="on").profile
    assert len(p.step_trace) == 2 and p.op_summary.empty
    page = X.Explorer(p).static_html()
    assert "Figure not embedded" not in page and named_figures(page) == []
    assert page.count(html_escape(R.MSG_NO_OPS)) >= 2  # the Timeline's Gantt and the Summary's top ops


def test_a_run_in_which_no_step_ran_says_so_instead_of_naming_flags_that_were_on(tmp_path):
    out, mode = tmp_path / "zero", clock.mode
    try:  # profiling on, no graph run
        assert ge.GEInitialize({"geprof.clock": "virtual", "ge.exec.profilingMode": "1", "ge.exec.profilingOptions":
                                json.dumps({"output": str(out), "training_trace": "on", "task_memory": "on"})}) \
            == ge.SUCCESS
        ge.GEFinalize()
    finally:
        clock.set_mode(mode)
    p = geprof_nb.load(out)
    page = X.Explorer(p).static_html()
    assert html_escape(R.MSG_NO_STEP_RAN) in page
    for flag_advice in (R.MSG_NO_OPS, R.MSG_NO_STEPS, R.MSG_NO_MEMORY):
        assert html_escape(flag_advice) not in page
    off = run_profiled_session(tmp_path / "off", ge.models.mlp(batch_size=4, in_features=16, hidden=(16,)), 2,
                               task_trace="off").profile  # steps ran, task_trace off: name the flag
    assert html_escape(R.MSG_NO_OPS) in X.Explorer(off).static_html()


def test_advice_tab_is_the_whole_advise_frame_coloured_by_priority(full):
    findings = full.advise()
    text = widget_html(X.Explorer(full).select("Advice").box)
    assert text.count('<tr class="geprof-priority-') == len(findings) > 0
    for f in findings.itertuples():
        assert f'<tr class="geprof-priority-{f.Priority.lower()}" style="background:{H.PRIORITY_COLORS[f.Priority]}"' \
            in text
        assert html_escape(f.Suggestion) in text


def test_a_plot_that_fails_leaves_a_message_in_its_tab(full, monkeypatch):
    def broken(*args, **kwargs):
        raise ValueError("no ratios to draw")

    monkeypatch.setattr(plots, "pipe_ratios", broken)
    pane = X.Explorer(geprof_nb.load(full.path)).select("AI Core")  # a new Profile: nothing drawn yet
    assert "could not draw the AI Core pipe ratios: ValueError: no ratios to draw" in widget_html(pane.box)
    assert len(images(pane.box)) == 1  # the roofline's only
    assert "geprof-pmu-table" in widget_html(pane.box)  # the rest of the tab is still there


# ----------------------------------------------------------------------------- static bundle
def test_static_html_has_every_tab_and_escapes_op_names(hostile):
    ex = X.Explorer(hostile)
    bundle = ex.mimebundle()
    page = bundle["text/html"]
    for pane in X.PANES:  # every run's tabs (not Serving): in the static report unless interactive only
        assert (f"<h3>{html_escape(pane.title)}</h3>" in page) == (pane.static and pane.title in X.TAB_TITLES)
    assert HOSTILE_ESCAPED in page and HOSTILE_ESCAPED + "&amp;relu" in page
    assert "<img src=x" not in page and "onerror=alert(1)>" not in page
    assert page.count('<img src="data:image/png;base64,') == 3  # step chart, step timeline, Gantt
    # the widget's own HTML is escaped the same way
    for title in X.TAB_TITLES:
        ex.select(title)
    live = widget_html(ex.widget)
    assert HOSTILE_ESCAPED in live and "<img src=x" not in live
    assert HOSTILE in bundle["text/plain"]  # plain text is not HTML: the name as it is


def embedded_figures(page: str) -> list[str]:
    """The alt texts of the PNGs a static report embeds, in page order."""
    return re.findall(r'<img src="data:image/png;base64,[^"]*" alt="([^"]*)"', page)


def named_figures(page: str) -> list[tuple[str, str]]:
    """(tab, call) of each figure a static report names instead of embedding it, in page order."""
    return re.findall(r"Figure not embedded in this static report \(drawing it would slow every show down\): "
                      r"open the ([^.]*) tab of the explorer, or draw it with `from geprof_nb.nb import plots; "
                      r"([^`]*)`", page)


STEP_CHART = "stacked bar per step: Computing, exposed Communication, Free"


def test_static_html_names_the_figures_it_does_not_embed_and_embeds_all_on_request(full):
    page = X.Explorer(full).static_html()
    assert X.STATIC_FIGURES == ("step_split_bars", "step_timeline", "task_gantt")
    assert embedded_figures(page) == [STEP_CHART, "FP/BP step timeline", "task Gantt per stream of iteration 3"]
    assert named_figures(page) == [("Ops", "plots.op_type_bars(profile.op_statistic)"),
                                   ("AI Core", "plots.pipe_ratios(profile.ops())"),
                                   ("AI Core", "plots.roofline(profile)"),
                                   ("Memory", "plots.memory_lifetimes(profile, iteration=3)"),
                                   ("Modules", "plots.module_bars(profile.module_statistic(2))")]
    every = X.Explorer(full, static_figures="all").static_html()
    assert embedded_figures(every) == [STEP_CHART, "time per OP Type", "FP/BP step timeline",
                                       "task Gantt per stream of iteration 3", "AI Core pipe ratios", "roofline",
                                       "tensor lifetimes in the memory pool, iteration 3", "device time per module"]
    assert named_figures(every) == [] and "Figure not embedded" not in every


def test_what_a_cell_shows_embeds_every_figure_when_static_figures_is_all(full, monkeypatch):
    """What %%geprof and display(profile) publish follows explorer.STATIC_FIGURES (the benchmark of
    target 9 sets it to "all")."""
    monkeypatch.setattr(X, "STATIC_FIGURES", "all")
    page = profile_mimebundle(full)["text/html"]
    assert len(embedded_figures(page)) == 8 and named_figures(page) == []


def test_bundle_text_summary_numbers_are_the_profiles(full):
    bundle = X.Explorer(full).mimebundle()
    assert set(bundle) == BUNDLE_KEYS
    text = bundle["text/plain"]
    assert text.startswith(f"geprof {full.name} | {step_headline_by_hand(full, [2, 3])} | 3 steps")
    top = full.ops().sort_values("Task Duration(us)", ascending=False, kind="stable").iloc[0]
    first_row = text.split("top 10 of", 1)[1].splitlines()[2]
    assert first_row.split()[0] == top["Op Name"] and f"{top['Task Duration(us)']:.3f}" in first_row
    split = full.step_breakdown.set_index("Step").loc[[2, 3], "Computing"].mean()
    assert (f"step split (mean of 2 step periods, from one iteration's end to the next): Computing {split:.3f} us"
            in text)
    assert "[" + full.advise()["Priority"].iloc[0] + "] " + full.advise()["Rule"].iloc[0] in text
    assert bundle["image/png"][:4] == b"\x89PNG"


def test_showing_a_profile_again_reuses_its_figures(full):
    first, second = X.Explorer(full), X.Explorer(full)
    assert first.widget is not second.widget and first.report is second.report
    assert first.report.step_timeline().picture is second.report.step_timeline().picture


def test_widget_view_is_a_live_explorer(full):
    bundle = profile_mimebundle(full)
    view = bundle[X.WIDGET_VIEW_MIME]
    assert (view["version_major"], view["version_minor"]) == (2, 0)
    widget = _instances[view["model_id"]]
    assert "geprof-explorer" in widget._dom_classes
    assert [c.__class__.__name__ for c in widget.children] == ["Tab"]


def test_show_profile_is_one_display_call_with_the_whole_bundle(ip, hostile):
    with capture_output() as cap:
        show_profile(hostile)
    assert len(cap.outputs) == 1 and set(cap.outputs[0].data) == BUNDLE_KEYS
    assert HOSTILE_ESCAPED in cap.outputs[0].data["text/html"]


def test_display_profile_shows_the_same_bundle(ip, hostile):
    data, _ = ip.display_formatter.format(hostile)
    assert set(data) == BUNDLE_KEYS
    assert data[X.WIDGET_VIEW_MIME]["model_id"] in _instances
    ip.run_line_magic("unload_ext", "geprof_nb")
    data, _ = ip.display_formatter.format(hostile)
    assert set(data) == {"text/plain"} and data["text/plain"] == repr(hostile)
    ip.run_line_magic("load_ext", "geprof_nb")  # the fixture unloads again


def test_explorer_works_for_imported_output(full, tmp_path):
    back = geprof_nb.load(full.export(tmp_path / "pq", format="parquet"))
    bundle = X.Explorer(back).mimebundle()
    assert set(bundle) == BUNDLE_KEYS and "<h3>Memory</h3>" in bundle["text/html"]


# ----------------------------------------------------------------------------- size
def test_resnet50_ten_steps_shows_bounded_tables(tmp_path):
    run = run_profiled_session(tmp_path, ge.models.resnet50(batch_size=32, training=True, world_size=8), 10)
    p = run.profile
    _ = p.op_summary, p.step_trace, p.op_statistic, p.step_breakdown  # what the run itself loads
    assert 7000 < len(p.op_summary) < 9000
    bundle = X.Explorer(p).mimebundle()
    assert set(bundle) == BUNDLE_KEYS
    rows = len(re.findall(r"<tr", bundle["text/html"]))
    assert rows < 400  # bounded tables: top N with the count stated
    assert "Showing 20 of 790 op tasks" in bundle["text/html"]


# ----------------------------------------------------------------------------- inference
@pytest.fixture(scope="module")
def inference(tmp_path_factory) -> geprof_nb.Profile:
    """ResNet-50 (small) inference: forward only, no backward pass."""
    graph = ge.models.resnet50(batch_size=2, image_size=64, training=False)
    return run_profiled_session(tmp_path_factory.mktemp("infer"), graph, 3).profile


def test_an_inference_run_names_its_phases_forward_and_output_not_fp_bp(inference, full, tmp_path):
    """No FP->BP lane or BP point for a forward-only run: the step timeline, the timeline widget's phase lane,
    the Steps tab and the notes say Forward (FP Start to the last op's end) and Output (from there to the
    iteration's end)."""
    assert inference.forward_only_models == {1} and full.forward_only_models == frozenset()
    assert geprof_nb.load(inference.export(tmp_path, format="parquet")).forward_only_models == {1}  # kept
    ex = X.Explorer(inference)
    fig = ex.select("Timeline").step_figure
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == ["Data Aug Bound", "Forward", "Output"]
    train_labels = [t.get_text() for t in X.Explorer(full).select("Timeline").step_figure.axes[0].get_yticklabels()]
    assert "FP→BP" in train_labels and "Forward" not in train_labels
    rows = {r.label: r for r in plots.steps.step_rows(inference.step_trace, inference.forward_only_models)}
    st = inference.step_trace
    np.testing.assert_array_equal(rows["Forward"].width_us, st["FP to BP Time(us)"].to_numpy())
    np.testing.assert_array_equal(rows["Output"].start_us, st["BP End(us)"].to_numpy())
    steps = widget_html(ex.select("Steps").box)
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", steps.split("</thead>")[0])
    assert {"Forward Start(us)", "Forward End(us)", "Forward Time(us)", "Output Time(us)"} <= set(heads)
    assert not {"FP Start(us)", "BP End(us)", "FP to BP Time(us)"} & set(heads)
    assert not any("BP point" in n for n in inference.notes)
    assert any("forward only (no backward pass): the BP End trace goes after 'resnet_model/fc/BiasAdd'" in n
               for n in inference.notes)
    from geprof_nb.nb.timeline.model import TimelineData

    data = TimelineData(inference)
    phases = data.by_id["phases/0"].spans
    assert {data.tables.kinds.texts[k] for k in np.unique(phases.kind)} == {"Data Aug Bound", "Forward", "Output"}


def test_a_column_that_repeats_the_one_devices_id_is_left_out_and_a_tab_without_times_has_no_times_button(full, l0):
    ex = X.Explorer(full)
    for title, table in (("Ops", "op_statistic"), ("Steps", "step_trace"), ("Steps", "step_breakdown"),
                         ("API/Host", "api_statistic")):
        text = widget_html(ex.select(title).box)
        section = text.split(table, 1)[1].split("</thead>", 1)[0]
        assert ">Device_id</th>" not in section and (getattr(full, table)["Device_id"].nunique() == 1), table
    memory = ex.select("Memory")
    assert ex.steps.absolute in ex.steps.box.children and memory.absolute in memory.box.children
    memoryless = X.Explorer(l0).select("Memory")  # no memory data: nothing to show absolute
    assert memoryless.absolute not in memoryless.box.children


def test_ai_core_tab_has_the_roofline_section_with_escaped_names(tmp_path):
    g = ge.Graph("roofline_names")
    mm = g.op("MatMul", [g.data("a", (256, 512)), g.data("b", (512, 256))], name="mm<b>&x")
    g.output(g.op("Relu", [mm], name="relu"))
    p = _run_profiled_session(tmp_path, g, steps=2).profile
    blocks = X.Explorer(p).select("AI Core").blocks()
    assert "<h4>Roofline</h4>" in blocks
    charts = [b for b in blocks if isinstance(b, R.Chart)]
    assert [c.name for c in charts] == ["pipe_ratios", "roofline"]
    (table,) = [b for b in blocks if isinstance(b, str) and "geprof-roofline-table" in b]
    assert "mm&lt;b&gt;&amp;x" in table and "mm<b>" not in table
    assert "Arithmetic Intensity(FLOP/B)" in table and ">compute<" in table
