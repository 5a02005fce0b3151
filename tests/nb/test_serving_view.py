"""The explorer's Serving tab: shown for a serving run only, its percentiles and throughput those of
Profile.serving_summary (checked against the requests by hand), its chart the engine steps' batch, KV blocks
and step times, its slowest requests those of serving_requests."""

from __future__ import annotations

import numpy as np
import pytest

from geprof_nb import ge
from geprof_nb.analysis.tables.breakdown import main_model
from geprof_nb.nb import explorer as X
from geprof_nb.nb import plots
from geprof_nb.nb import serving_view as V
from geprof_nb.nb.html_parts import message_html
from geprof_nb.prof.clock import clock
from helpers.geprof_testing import run_profiled_session, serve_profiled


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    reqs = ge.requests(14, prompt_len=(32, 256), output_len=(2, 30), rate=200.0, seed=5)
    return serve_profiled(tmp_path_factory.mktemp("served"), requests=reqs, max_batch_size=4, kv_cache_blocks=4)[1]


def test_the_serving_tab_is_only_a_serving_runs(served, tmp_path):
    assert X.Explorer(served).titles == [*X.TAB_TITLES, "Serving"]
    mode = clock.mode
    try:
        training = run_profiled_session(tmp_path, ge.models.mlp(batch_size=8), steps=1).profile
    finally:
        clock.set_mode(mode)
    assert X.Explorer(training).titles == list(X.TAB_TITLES)
    assert V.serving_blocks(X.Explorer(training).report) == [message_html(V.MSG_NO_SERVING)]


def test_the_percentiles_and_throughput_are_the_summarys(served):
    r = served.serving_requests
    table = V.percentiles(served.serving_summary()).set_index("latency")
    for name, col in (("TTFT", "ttft_ms"), ("TPOT", "tpot_ms"), ("end-to-end", "e2e_ms")):
        for q in (50, 90, 99):
            assert table.loc[name, f"p{q} (ms)"] == pytest.approx(np.percentile(r[col].dropna(), q))
    span_s = (r["finish_us"].max() - r["arrival_us"].min()) / 1e6
    figures = V.throughput(served.serving_summary()).set_index("figure")["value"]
    assert figures["output tokens/s"] == pytest.approx(r["output_tokens"].sum() / span_s)
    assert figures["requests/s"] == pytest.approx(len(r) / span_s)
    assert figures["goodput (requests/s)"] == figures["requests/s"]  # no objective given: every request meets it
    assert figures["preemptions"] == r["preemptions"].sum() > 0  # 4 blocks for up to 4 sequences


def test_the_slowest_requests_are_the_longest_end_to_end(served):
    r = served.serving_requests
    slow = V.slowest_requests(r)
    assert len(slow) == V.SLOWEST
    expected = r.sort_values("e2e_ms", ascending=False, kind="stable").head(V.SLOWEST)
    assert slow["request_id"].tolist() == expected["request_id"].tolist()
    assert slow["e2e_ms"].tolist() == expected["e2e_ms"].tolist()
    assert slow["arrival_ms"].tolist() == pytest.approx(((expected["arrival_us"] - r["arrival_us"].min()) / 1e3).tolist())


def test_the_tab_shows_the_tables_and_the_steps_chart(served):
    pane = X.Explorer(served).select("Serving")
    percentiles, throughput, chart, slowest = pane.content
    assert "geprof-serving-percentiles" in percentiles and "of 14 requests" in percentiles
    assert "geprof-serving-throughput" in throughput
    assert f"({len(served.serving_steps):,} engine steps)" in slowest
    assert chart.name == "serving_steps_chart" and chart.picture.png is not None
    assert "geprof-static-serving" in pane.static_html()


def test_the_steps_chart_draws_each_steps_batch_kv_blocks_and_time(served):
    s = served.serving_steps
    fig = plots.serving_steps_chart(s)
    batch, kv, time = fig.axes[:3]
    heights = [p.get_height() for p in batch.patches]
    assert heights[:len(s)] == s["decode_seqs"].tolist()  # decodes first, the prefills stacked on them
    assert heights[len(s):] == s["prefill_seqs"].tolist()
    assert kv.lines[0].get_ydata().tolist() == s["kv_blocks_used"].tolist()
    assert kv.get_title(loc="right") == f"of {int(s['kv_blocks_used'].iloc[0] + s['kv_blocks_free'].iloc[0])} blocks"
    assert sorted(p.get_height() for p in time.patches) == pytest.approx(sorted(s["step_ms"]))
    starts = sorted(p.get_x() for p in time.patches)
    assert starts == pytest.approx(((s["start_us"] - s["start_us"].min()) / 1e3).tolist())
    assert plots.serving_steps_chart(s.iloc[:0]).axes[0].texts[0].get_text() == plots.NO_SERVING_STEPS_MESSAGE


def test_a_serving_runs_steps_are_named_prefill_and_decode(served):
    st, phases = served.step_trace, served.model_phases
    names = {int(k): m["name"] for k, m in served.info["models"].items()}
    assert phases and all(f"_{phases[m]}_" in names[m] for m in phases)  # the graphs ge.serve built for each
    assert set(phases.values()) == {"prefill", "decode"}
    per_phase = st["Model ID"].astype(int).map(phases).value_counts()
    rows = {r.label: len(r.start_us) for r in plots.steps.step_rows(st, served.forward_only_models, phases)}
    assert rows["Prefill"] == per_phase["prefill"] and rows["Decode"] == per_phase["decode"]
    assert not {"FP→BP", "Forward", "Iteration Refresh", "Output"} & set(rows)
    table = X.Explorer(served).select("Steps").content[0]
    assert '<th align="left" style="text-align:left">Phase</th>' in table and "Forward" not in table
    assert "Step Start(us)" in table and "FP Start(us)" not in table
    main, _ = X.step_trace_view(st, served.forward_only_models, phases)
    assert main["Phase"].tolist() == st["Model ID"].astype(int).map(phases).tolist()
    # the Modules tab's phases: each forward op named for the engine step that ran it
    modules = served.module_statistic(2)
    assert set(modules["Phase"]) <= {"prefill", "decode", "N/A"} and {"prefill", "decode"} <= set(modules["Phase"])
    ops = served.op_summary
    decode_ops = ops["Model ID"].astype(int).map(phases).eq("decode") & ops["Op Name"].str.contains("/")  # a module
    got = modules.loc[modules["Phase"] == "decode", "Count"].sum()
    assert got == decode_ops.sum()


def test_other_inference_keeps_forward_and_output(tmp_path):
    mode = clock.mode
    try:
        prof = run_profiled_session(tmp_path, ge.models.mlp(batch_size=8, training=False), steps=2).profile
    finally:
        clock.set_mode(mode)
    assert prof.model_phases == {}
    labels = [r.label for r in plots.steps.step_rows(prof.step_trace, prof.forward_only_models, prof.model_phases)]
    assert "Forward" in labels and "Prefill" not in labels and "Decode" not in labels


def test_the_gaps_between_engine_steps_are_host_scheduling_not_data_aug(served, tmp_path):
    """The gap before an engine step, from the previous engine step's end (whichever graph ran it) to its FP start,
    is the serving engine's host work between steps: the step timeline and the timeline widget's phase lane name
    it so.  step_trace's Data Aug Bound (from the same graph's previous iteration) would span the other graphs'
    steps in between."""
    st, phases = served.step_trace, served.model_phases
    rows = {r.label: r for r in plots.steps.step_rows(st, served.forward_only_models, phases)}
    assert "Data Aug Bound" not in rows
    order = st.sort_values("FP Start(us)")
    fp, end = order["FP Start(us)"].tolist(), order["Iteration End(us)"].tolist()
    expected = [(end[k - 1], fp[k] - end[k - 1]) for k in range(1, len(order))]
    host = rows["Host (scheduler)"]
    assert len(host.start_us) == len(st) - 1  # the first engine step has none before it
    assert sorted(zip(host.start_us, host.width_us)) == sorted(expected)
    # the scheduler's 1 ms + 5 us a sequence and the next graph's launch; longer: waiting for requests to arrive
    assert np.median(host.width_us) == pytest.approx(1067, abs=15)
    assert st["Data Aug Bound(us)"].max() > host.width_us.max()  # the same graph's previous step: steps between
    labels = [t.get_text() for t in X.Explorer(served).select("Timeline").step_figure.axes[0].get_yticklabels()]
    assert labels[0] == "Host (scheduler)" and "Data Aug Bound" not in labels
    from geprof_nb.nb.timeline.model import TimelineData

    data = TimelineData(served)
    kinds = {data.tables.kinds.texts[k] for k in np.unique(data.by_id["phases/0"].spans.kind)}
    assert "Host (scheduler)" in kinds and "Data Aug Bound" not in kinds
    # a training run keeps its Data Aug Bound
    mode = clock.mode
    try:
        training = run_profiled_session(tmp_path, ge.models.mlp(batch_size=8), steps=3).profile
    finally:
        clock.set_mode(mode)
    labels = [r.label for r in plots.steps.step_rows(training.step_trace, training.forward_only_models,
                                                     training.model_phases)]
    assert "Data Aug Bound" in labels and "Host (scheduler)" not in labels


def test_the_summary_and_steps_speak_of_engine_steps(served, tmp_path):
    """The headline's step is the mean engine step (every graph's), split into compute / exposed communication /
    host as serving_steps says, and counts engine steps by phase; the Steps table's gap column is the host time
    since the previous engine step, not the same graph's Data Aug Bound.  A training run keeps its step figure."""
    s = served.serving_steps
    total = s["step_ms"].sum()
    head = X.Explorer(served).report.headline
    assert f"engine step {total / len(s):.3f} ms = compute {100 * s['compute_ms'].sum() / total:.1f}% / exposed " \
           f"communication {100 * s['communication_ms'].sum() / total:.1f}% / host (scheduler) " \
           f"{100 * s['host_ms'].sum() / total:.1f}%" in head
    counts = s["phase"].value_counts()
    assert f"{len(s)} engine steps ({counts['prefill']} prefill, {counts['decode']} decode)" in head
    assert "Free" not in head and f"| {len(s)} steps" not in head
    summary = X.Explorer(served).select("Summary").content
    assert any(f"Step split of one graph&#x27;s steps (Model ID {main_model(served.step_trace)}," in str(b) for b in summary)
    main, _ = X.step_trace_view(served.step_trace, served.forward_only_models, served.model_phases)
    assert "Data Aug Bound(us)" not in main.columns
    host = plots.steps.step_rows(served.step_trace, served.forward_only_models, served.model_phases)
    host = next(r for r in host if r.label == "Host (scheduler)")
    gaps = main["Host (scheduler)(us)"].dropna()
    assert sorted(gaps) == sorted(host.width_us) and len(gaps) == len(s) - 1
    mode = clock.mode
    try:
        training = run_profiled_session(tmp_path, ge.models.mlp(batch_size=8), steps=3).profile
    finally:
        clock.set_mode(mode)
    head = X.Explorer(training).report.headline
    assert training.step_split.headline() in head and "| 3 steps" in head and "engine" not in head


def test_an_iteration_of_a_serving_run_is_named_by_its_engine_steps(served):
    """Each graph counts its own iterations: the Summary's "iteration N" names the graphs (engine steps) it is."""
    r = X.Explorer(served).report
    ops, phases = served.op_summary, served.model_phases
    its = served.iteration_of_ops
    last = int(its.max())
    (model,) = ops.loc[its == last, "Model ID"].astype(int).unique()  # the graph that ran the most steps alone
    assert r.where() == f"iteration {last} of Model ID {model}, a {phases[model]} engine step"
    assert f"op time of iteration {last} of Model ID {model}" in r.headline
    several = sorted(ops.loc[its == 1, "Model ID"].astype(int).unique())
    assert len(several) > 1
    assert r.where(1) == f"iteration 1 of Model IDs {', '.join(map(str, several))}: {len(several)} engine steps"
