"""Every plot draws its table's values where they belong: step_timeline (step_trace), task_gantt
(op_summary per stream), op_type_bars (op_statistic), pipe_ratios (op_summary *_ratio columns),
memory_lifetimes (tensor_lifetimes + memory_record + memory_peak), host_scopes (host_events + API
calls); figure_png renders them."""

import json
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgba
from matplotlib.patches import PathPatch

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis.tables import columns as C
from geprof_nb.nb import plots
from geprof_nb.nb.plots import EMPTY_STEP_TRACE_MESSAGE, figure_png, spans, step_timeline, steps
from helpers.geprof_testing import run_profiled_session, small_resnet
from helpers.real_data import COMPUTE_ADVICE, PYTORCH_TEXT

T = 1.7e15  # an absolute µs timestamp of the size msprof writes
NAN = np.nan


def step_trace(rows, n_reduce):
    """A step_trace frame: base columns, then n_reduce pairs of identically named Reduce columns.

    Each row: (iteration, fp, bp, end, iteration_time, data_aug, [(reduce_start, reduce_dur), ...]),
    times in µs relative to T.
    """
    records = []
    for it, fp, bp, end, iter_time, data_aug, reduces in rows:
        reduces = list(reduces) + [(NAN, NAN)] * (n_reduce - len(reduces))
        records.append([0, it, T + fp, T + bp, T + end, iter_time, bp - fp, end - bp, data_aug, 1]
                       + [v for s, d in reduces for v in (T + s, d)])
    return pd.DataFrame(records, columns=C.STEP_TRACE + C.STEP_TRACE_REDUCE * n_reduce)


TRAINING = [
    # it, fp,     bp,     end,    iter_time, data_aug, reduces
    (1, 0.0, 6000.0, 7000.0, 7500.0, NAN, [(2000.0, 1000.0), (6000.0, 500.0)]),
    (2, 7400.0, 13400.0, 14400.0, 7500.0, 400.0, [(9400.0, 1000.0)]),  # second AllReduce N/A
    (3, 14800.0, 21000.0, 22000.0, 7500.0, 400.0, [(16800.0, 1200.0), (21000.0, 600.0)]),
]
INFERENCE = [
    (1, NAN, NAN, 3000.0, 3000.0, NAN, []),
    (2, NAN, NAN, 6100.0, 3000.0, NAN, []),
    (3, NAN, NAN, 9300.0, 3100.0, NAN, []),
]


def bars(fig):
    """{row label: sorted [(start_ms, width_ms)]} from the broken_barh collections."""
    out = {}
    for coll in fig.axes[0].collections:
        if coll.get_label().startswith("_"):
            continue
        spans = []
        for path in coll.get_paths():
            xs = path.vertices[:, 0]
            spans.append((xs.min(), xs.max() - xs.min()))
        out[coll.get_label()] = sorted(spans)
    return out


def row_centres(fig):
    """{row label: y centre of its bars}."""
    return {c.get_label(): np.mean([(p.vertices[:, 1].min() + p.vertices[:, 1].max()) / 2 for p in c.get_paths()])
            for c in fig.axes[0].collections if not c.get_label().startswith("_")}


def assert_spans(actual, expected):
    assert len(actual) == len(expected)
    for (s, w), (es, ew) in zip(actual, sorted(expected)):
        assert s == pytest.approx(es, abs=1e-6) and w == pytest.approx(ew, abs=1e-6)


def iteration_labels(fig):
    return {t.get_text(): t.get_position()[0] for t in fig.axes[0].texts}


def test_training_phases_are_drawn_at_their_times():
    fig = step_timeline(step_trace(TRAINING, n_reduce=2))
    b = bars(fig)
    assert set(b) == {"Data Aug Bound", "FP→BP", "Iteration Refresh", "AllReduce"}
    # Origin is the earliest drawn start: iteration 1's FP (its data aug bound is N/A).
    assert_spans(b["FP→BP"], [(0.0, 6.0), (7.4, 6.0), (14.8, 6.2)])
    assert_spans(b["Iteration Refresh"], [(6.0, 1.0), (13.4, 1.0), (21.0, 1.0)])
    assert_spans(b["Data Aug Bound"], [(7.0, 0.4), (14.4, 0.4)])
    assert_spans(b["AllReduce"], [(2.0, 1.0), (6.0, 0.5), (9.4, 1.0), (16.8, 1.2), (21.0, 0.6)])


def test_rows_are_labelled_top_down_and_bars_sit_on_their_row():
    fig = step_timeline(step_trace(TRAINING, n_reduce=2))
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["Data Aug Bound", "FP→BP", "Iteration Refresh", "AllReduce"]
    assert ax.get_ylim()[0] > ax.get_ylim()[1]  # first label on top
    centres = row_centres(fig)
    for tick, label in zip(ax.get_yticks(), labels):
        assert centres[label] == pytest.approx(tick)
    assert ax.get_xlabel() == "time since first step (ms)"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == labels


def test_iterations_are_numbered_and_their_ends_marked():
    fig = step_timeline(step_trace(TRAINING, n_reduce=2))
    # Label centred on everything drawn for the iteration (iteration 2 runs from its data aug bound).
    assert iteration_labels(fig) == pytest.approx({"1": 3.5, "2": 10.7, "3": 18.2})
    (lines,) = [c for c in fig.axes[0].collections if c.get_label() == "_iteration ends"]
    assert sorted(seg[0, 0] for seg in lines.get_segments()) == pytest.approx([7.0, 14.4, 22.0])


def test_zoom_limits_x_to_the_iteration_with_a_margin():
    fig = step_timeline(step_trace(TRAINING, n_reduce=2), iteration=2)
    ax = fig.axes[0]
    # Iteration 2 spans 7.0 (its data aug bound) .. 14.4 (its end); margin 5% of 7.4 ms.
    assert ax.get_xlim() == pytest.approx((7.0 - 0.37, 14.4 + 0.37))
    assert "iteration 2" in ax.get_title(loc="left")
    titled = step_timeline(step_trace(TRAINING, n_reduce=2), iteration=3, title="ResNet-50")
    assert titled.axes[0].get_title(loc="left") == "ResNet-50: iteration 3"


def test_full_view_shows_every_bar():
    ax = step_timeline(step_trace(TRAINING, n_reduce=2)).axes[0]
    lo, hi = ax.get_xlim()
    assert lo < 0.0 and hi > 22.0
    assert hi - lo == pytest.approx(22.0 * 1.02)


def test_unknown_iteration_names_the_available_ids():
    with pytest.raises(ValueError, match=r"iteration 9 .*available Iteration IDs: 1-3$"):
        step_timeline(step_trace(TRAINING, n_reduce=2), iteration=9)
    sparse = step_trace([(i, *rest) for i, (_, *rest) in zip((4, 7, 8), TRAINING)], n_reduce=2)
    with pytest.raises(ValueError, match=r"available Iteration IDs: 4, 7, 8$"):
        step_timeline(sparse, iteration=5)


def test_zoom_on_an_iteration_without_timestamps_is_a_clear_error():
    rows = INFERENCE[:2] + [(3, NAN, NAN, NAN, NAN, NAN, [])]
    with pytest.raises(ValueError, match="iteration 3 has no step trace timestamps"):
        step_timeline(step_trace(rows, n_reduce=0), iteration=3)


def test_without_fp_bp_each_iteration_is_one_bar():
    fig = step_timeline(step_trace(INFERENCE, n_reduce=0))
    # Iteration start = Iteration End - Iteration Time.
    b = bars(fig)
    assert set(b) == {"Iteration"}
    assert_spans(b["Iteration"], [(0.0, 3.0), (3.1, 3.0), (6.2, 3.1)])
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["Iteration"]


@pytest.mark.parametrize("frame", [pd.DataFrame(columns=C.STEP_TRACE),
                                   pd.DataFrame(columns=C.STEP_TRACE + C.STEP_TRACE_REDUCE * 2)])
def test_empty_step_trace_shows_a_message(frame):
    fig = step_timeline(frame, iteration=1)
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert texts == [EMPTY_STEP_TRACE_MESSAGE]
    assert not fig.axes[0].collections


def test_long_runs_label_a_subset_of_iterations():
    period = 8000.0
    rows = [(i, (i - 1) * period, (i - 1) * period + 6000.0, (i - 1) * period + 7000.0, 7500.0,
             NAN if i == 1 else 1000.0, [((i - 1) * period + 2000.0, 1000.0)]) for i in range(1, 101)]
    fig = step_timeline(step_trace(rows, n_reduce=1))
    assert list(iteration_labels(fig)) == [str(i) for i in range(1, 101, 5)]
    assert len(bars(fig)["FP→BP"]) == 100
    # Zoomed in, every iteration in view is labelled again.
    zoomed = step_timeline(step_trace(rows, n_reduce=1), iteration=50)
    assert "50" in iteration_labels(zoomed)


def long_run(n=2000, period=8000.0, data_aug=450.0, refresh=500.0):
    """n steps of ``period`` µs: Data Aug Bound, FP→BP, Iteration Refresh and one AllReduce in each."""
    rows = []
    for i in range(1, n + 1):
        fp = (i - 1) * period + data_aug
        rows.append((i, fp, fp + 6000.0, fp + 6000.0 + refresh, period, NAN if i == 1 else data_aug,
                     [(fp + 2000.0, 1000.0)]))
    return step_trace(rows, n_reduce=1)


def test_every_step_of_a_long_run_shows_in_every_row():
    """2000 steps over ~800 pixel columns: each step's Data Aug Bound (450 µs of 8 ms) is a fraction of a
    pixel, yet every column the run spans is painted in each row (they were merged away in stretches)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = step_timeline(long_run())
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    image = np.asarray(canvas.buffer_rgba())[:, :, :3].astype(int)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["Data Aug Bound", "FP→BP", "Iteration Refresh", "AllReduce"]
    height = image.shape[0]
    # the pixel columns from the first step's start (Data Aug Bound of step 2: step 1 has none) to the last's end
    (left, _), (right, _) = ax.transData.transform([(8.0, 0), (16_000.0, 0)])
    for y, label in enumerate(labels):
        row = height - 1 - int(ax.transData.transform((0, y))[1])
        columns = image[row, int(np.ceil(left)) + 1:int(right) - 1]
        painted = np.abs(columns - 255).sum(axis=1) > 30
        assert painted.all(), (label, np.flatnonzero(~painted)[:10])
    # bounded: one bar collection per row and the iteration-end lines, at most a bar per column in a row
    assert len(ax.collections) == len(labels) + 1 and not ax.patches
    assert all(len(c.get_paths()) <= steps.STEP_COLUMNS for c in ax.collections)


def test_sub_pixel_bars_are_shaded_by_the_time_they_fill():
    """Merged columns keep the time: the shade of each column says how much of it the row's bars fill,
    and those fills add up to the row's total time; phases that fill little are paler."""
    st = long_run()
    fig = step_timeline(st)
    x0, x1 = fig.axes[0].get_xlim()
    px = (x1 - x0) / steps.STEP_COLUMNS
    coll = {c.get_label(): c for c in fig.axes[0].collections}
    shades = {}
    for label, total_us in (("Data Aug Bound", st["Data Aug Bound(us)"].sum()),
                            ("Iteration Refresh", st["Iteration Refresh(us)"].sum())):
        c = coll[label]
        widths = np.array([p.vertices[:, 0].max() - p.vertices[:, 0].min() for p in c.get_paths()])
        assert widths == pytest.approx(px)  # every bar is one column: no step's bar is a column wide
        full = np.array(to_rgba(steps.ROW_COLORS[label])[:3])
        rgb = c.get_facecolor()[:, :3]
        shade = ((1 - rgb) / (1 - full)).mean(axis=1)  # colour = full * shade + white * (1 - shade)
        fill = (shade - spans.MIN_SHADE) / (1 - spans.MIN_SHADE)
        assert (fill * px).sum() == pytest.approx(total_us / 1000, rel=1e-6)
        assert 0 < fill.min() and fill.max() < 0.2
        shades[label] = shade.mean()
    assert spans.MIN_SHADE < shades["Data Aug Bound"] < shades["Iteration Refresh"] < 1


def test_figure_png_renders_at_the_requested_dpi():
    fig = step_timeline(step_trace(TRAINING, n_reduce=2))
    small, large = figure_png(fig, dpi=50), figure_png(fig, dpi=100)
    assert small.startswith(b"\x89PNG\r\n\x1a\n") and large.startswith(b"\x89PNG\r\n\x1a\n")
    width = int.from_bytes(large[16:20], "big")
    assert 900 < width < 1300  # ~11 in at 100 dpi, trimmed by bbox_inches="tight"
    assert int.from_bytes(small[16:20], "big") == pytest.approx(width / 2, abs=3)


def test_figure_png_crops_only_what_a_layout_cannot_fill():
    """A constrained figure is rendered whole (its layout already fits it: 400 x 200 px at 100 dpi); one
    whose axes keep a fixed aspect (square heatmap cells, in a wide figure) is cropped to its content,
    as a figure without a layout engine is."""
    from matplotlib.figure import Figure

    def size(png: bytes) -> tuple[int, int]:
        return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")

    lines = Figure(figsize=(4, 2), layout="constrained")
    lines.add_subplot().plot([0, 1], [0, 1])
    assert size(figure_png(lines)) == (400, 200)
    square = Figure(figsize=(8, 2), layout="constrained")
    square.add_subplot().imshow(np.arange(4.0).reshape(2, 2))  # aspect "equal": ~2 in wide, not 8
    width, height = size(figure_png(square))
    assert width < 400 and height < 250  # (tight adds its padding)
    plain = Figure(figsize=(8, 2))
    plain.add_subplot().imshow(np.arange(4.0).reshape(2, 2))
    assert size(figure_png(plain))[0] < 400


def test_plots_never_load_pyplot():
    code = ("import sys, pandas as pd; from geprof_nb.nb.plots import step_timeline, figure_png; "
            "from geprof_nb.analysis.tables import columns as C; "
            "figure_png(step_timeline(pd.DataFrame(columns=C.STEP_TRACE))); "
            "assert 'matplotlib.pyplot' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_simulated_training_run(tmp_path):
    opts = {"output": str(tmp_path), "training_trace": "on"}
    assert ge.GEInitialize({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": json.dumps(opts),
                            "geprof.clock": "virtual"}) == ge.SUCCESS
    try:
        sess = ge.Session()
        sess.add_graph(1, ge.models.resnet50(batch_size=32, training=True, world_size=8))
        for _ in range(4):
            sess.run_graph(1)
    finally:
        ge.GEFinalize()
    st = geprof_nb.load(tmp_path).step_trace
    assert len(st) == 4
    b = bars(step_timeline(st))
    assert len(b["FP→BP"]) == 4
    assert sorted(w for _, w in b["FP→BP"]) == pytest.approx(sorted(st["FP to BP Time(us)"] / 1000), abs=1e-6)
    assert len(b["AllReduce"]) == st.iloc[:, 10::2].notna().to_numpy().sum()
    assert len(b["Data Aug Bound"]) == 3  # N/A for the first iteration


# ====================================================================== shared helpers
MIB = 1024 * 1024


def path_rects(ax):
    """{patch label: array of (x, width, y, height)} of the compound-path rectangles of an axes."""
    out = {}
    for p in ax.patches:
        if isinstance(p, PathPatch):
            v = p.get_path().vertices.reshape(-1, 5, 2)
            r = np.column_stack([v[:, 0, 0], v[:, 1, 0] - v[:, 0, 0], v[:, 0, 1], v[:, 2, 1] - v[:, 0, 1]])
            out.setdefault(p.get_label(), []).append(r)
    return {k: np.concatenate(v) for k, v in out.items()}


def patch_colors(ax):
    return {p.get_label(): to_rgba(p.get_facecolor()) for p in ax.patches if isinstance(p, PathPatch)}


def all_rects(ax):
    r = path_rects(ax)
    return np.concatenate(list(r.values())) if r else np.zeros((0, 4))


def union_length(lo, hi):
    """Length of the union of intervals (a plain sweep, independent of the plotting code)."""
    total, reach = 0.0, -np.inf
    for a, b in sorted(zip(lo, hi)):
        if b > reach:
            total += b - max(a, reach)
            reach = b
    return total


def legend_texts(legend):
    return [t.get_text() for t in legend.get_texts()]


def figure_texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts] + [t.get_text() for t in fig.texts]


def ops_frame(stream, task_type, start_us, dur_us, **extra):
    """A minimal op_summary: Stream ID (nullable), Task Type, absolute start (µs), duration (µs)."""
    frame = pd.DataFrame({
        "Stream ID": pd.array(stream, dtype="Int64"),
        "Task Type": pd.Categorical(task_type),
        "Task Start Time(us)": T + np.asarray(start_us, float),
        "Task Duration(us)": np.asarray(dur_us, float),
    })
    for k, v in extra.items():
        frame[k] = v
    return frame


# ============================================================================ step_timeline
def test_getnext_columns_are_drawn_when_present():
    frame = step_trace(TRAINING, n_reduce=2)
    # Two GetNext spans per iteration: one given with an end, one with a duration (both forms accepted).
    frame = pd.concat([frame, pd.DataFrame({"GetNext Start(us)": T + np.array([-300.0, 7100.0, 14500.0]),
                                            "GetNext End(us)": T + np.array([-100.0, 7300.0, 14700.0])})], axis=1)
    frame = pd.concat([frame, pd.DataFrame([[T + 7350.0, 40.0], [NAN, NAN], [T + 14750.0, 30.0]],
                                           columns=["GetNext Start(us)", "GetNext Duration(us)"])], axis=1)
    fig = step_timeline(frame)
    b = bars(fig)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == ["Data Aug Bound", "GetNext", "FP→BP", "Iteration Refresh", "AllReduce"]
    # origin: the earliest drawn start is now iteration 1's GetNext, 300 µs before its FP
    assert_spans(b["GetNext"], [(0.0, 0.2), (7.4, 0.2), (7.65, 0.04), (14.8, 0.2), (15.05, 0.03)])
    assert_spans(b["FP→BP"], [(0.3, 6.0), (7.7, 6.0), (15.1, 6.2)])


def test_getnext_spans_of_a_real_run(tmp_path):
    """A graph fed by GetNext: geprof's step_trace has GetNext Start/End/Time, drawn one span per step."""
    graph = ge.models.mlp(batch_size=8, data="GetNext", world_size=2)
    st = run_profiled_session(tmp_path / "run", graph, 3).profile.step_trace
    fig = step_timeline(st)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["Data Aug Bound", "GetNext", "FP→BP",
                                                                     "Iteration Refresh", "AllReduce"]
    got = bars(fig)["GetNext"]
    start, time = st["GetNext Start(us)"].to_numpy(float), st["GetNext Time(us)"].to_numpy(float)
    origin = start.min()  # the first step's GetNext starts at its model start, before anything else drawn
    assert len(got) == 3
    for (s, w), (es, ew) in zip(got, zip((start - origin) / 1000, time / 1000)):
        # tolerance: µs timestamps of ~1.8e15 hold 0.25 µs, and the width is End - Start
        assert s == pytest.approx(es, abs=1e-3) and w == pytest.approx(ew, abs=1e-3)
    (coll,) = [c for c in fig.axes[0].collections if c.get_label() == "GetNext"]
    assert to_rgba(coll.get_facecolor()[0]) == to_rgba(plots.color_of("AI_CPU"))


def test_allreduce_bars_are_the_reduce_columns_of_a_real_run(hccl_memory_run):
    st = hccl_memory_run.profile.step_trace
    pos = [i for i, c in enumerate(st.columns) if c == "Reduce Start(us)"]
    assert len(pos) >= 2  # ResNet-50 on 8 ranks: several gradient buckets
    start = st.iloc[:, pos].to_numpy(float).ravel()
    dur = st.iloc[:, [i + 1 for i in pos]].to_numpy(float).ravel()
    ok = np.isfinite(start) & np.isfinite(dur)
    origin = np.nanmin(np.r_[st["FP Start(us)"].to_numpy(float) - st["Data Aug Bound(us)"].fillna(0).to_numpy(float),
                             start])
    got = bars(step_timeline(st))["AllReduce"]
    # tolerance: µs timestamps of ~1.8e15 hold 0.25 µs
    assert len(got) == ok.sum()
    for (s, w), (es, ew) in zip(got, sorted(zip((start[ok] - origin) / 1000, dur[ok] / 1000))):
        assert s == pytest.approx(es, abs=1e-3) and w == pytest.approx(ew, abs=1e-6)
    colors = {c.get_label(): to_rgba(c.get_facecolor()[0]) for c in step_timeline(st).axes[0].collections
              if not c.get_label().startswith("_")}
    assert colors["AllReduce"] == to_rgba(plots.color_of("COMMUNICATION"))


# =============================================================================== task_gantt
GANTT = ops_frame(
    stream=[1, 1, 3, 3, None, 1],
    task_type=["AI_CORE", "AI_VECTOR_CORE", "AI_CPU", "AI_CORE", "COMMUNICATION", "AI_CORE"],
    start_us=[0.0, 400.0, 100.0, 800.0, 200.0, 1000.0],
    dur_us=[300.0, 200.0, 500.0, 100.0, 700.0, 100.0],
)


def test_gantt_rows_are_streams_and_the_legend_the_task_types():
    fig = plots.task_gantt(GANTT)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["stream 1", "stream 3", "HCCL (communication)"]
    assert ax.get_ylim()[0] > ax.get_ylim()[1]  # stream 1 on top
    assert legend_texts(fig.legends[0]) == ["AI_CORE", "AI_CPU", "AI_VECTOR_CORE", "COMMUNICATION"]
    assert ax.get_xlabel() == "time since the first task shown (ms)"
    assert "6 tasks" in ax.get_title(loc="left")


def test_gantt_tasks_wider_than_a_pixel_are_drawn_exactly_in_their_colour():
    fig = plots.task_gantt(GANTT)
    ax = fig.axes[0]
    r = path_rects(ax)
    # every task here is wider than 1.1 ms / 1100 columns: one rectangle each, at its time and row
    assert sorted(map(tuple, np.round(r["AI_CORE"][:, :3], 9))) == [(0.0, 0.3, -0.4), (0.8, 0.1, 0.6),
                                                                     (1.0, 0.1, -0.4)]
    assert r["AI_CPU"][:, :3].tolist() == [[0.1, 0.5, 0.6]]
    assert np.allclose(r["COMMUNICATION"][:, :3], [[0.2, 0.7, 1.6]])
    assert np.allclose(r["AI_VECTOR_CORE"][:, :3], [[0.4, 0.2, -0.4]])
    assert np.allclose(all_rects(ax)[:, 3], 0.8)
    for label, color in patch_colors(ax).items():  # the same colour as everywhere else
        assert color == to_rgba(plots.color_of(label))
    legend_colors = [to_rgba(h.get_facecolor()) for h in fig.legends[0].legend_handles]
    assert legend_colors == [to_rgba(plots.color_of(t)) for t in ["AI_CORE", "AI_CPU", "AI_VECTOR_CORE",
                                                                   "COMMUNICATION"]]
    lo, hi = ax.get_xlim()
    assert lo <= 0.0 and hi >= 1.1


def synthetic_tasks(n, streams=3, seed=1, kinds=("AI_CORE", "AI_VECTOR_CORE", "AI_CPU")):
    """n tasks on ``streams`` streams: mostly sub-µs-to-µs tasks, some long ones, some overlapping."""
    rng = np.random.default_rng(seed)
    stream = rng.integers(0, streams, n)
    dur = np.where(rng.random(n) < 0.01, rng.exponential(500.0, n), rng.exponential(1.0, n))
    start = np.empty(n)
    for s in range(streams):
        m = stream == s
        # gaps drawn around zero: about a third of the tasks overlap the previous one
        start[m] = np.cumsum(rng.normal(0.8, 1.5, m.sum()).clip(-2, None) + dur[m]) - dur[m]
    start -= start.min()
    kind = np.asarray(kinds, object)[rng.integers(0, len(kinds), n)]
    return ops_frame(stream + 1, kind, start, dur)


def row_unions(frame):
    """{stream: union of its task intervals, ms}."""
    t0 = frame["Task Start Time(us)"].min()
    lo = (frame["Task Start Time(us)"].to_numpy() - t0) / 1000
    hi = lo + frame["Task Duration(us)"].to_numpy() / 1000
    sid = frame["Stream ID"].to_numpy()
    return {s: union_length(lo[sid == s], hi[sid == s]) for s in np.unique(sid)}


def rect_rows(r):
    """The row of each rectangle: bars are centred on their row, stacked bands inside its bar."""
    return np.round(r[:, 2] + r[:, 3] / 2).astype(int)


def drawn_per_row(ax, bar_height=0.8):
    """The rectangles and {row: their area / the bar height}: the time (ms) the row's drawing shows."""
    r = all_rects(ax)
    row = rect_rows(r)
    return r, {int(k): (r[row == k, 1] * r[row == k, 3]).sum() / bar_height for k in np.unique(row)}


def assert_no_overlap_within_rows(r, bar_height=0.8):
    """Per row: the rectangles of one column group share its x extent and stack, bottom to top, to the
    bar's height; column groups never overlap."""
    row = rect_rows(r)
    for k in np.unique(row):
        mine = pd.DataFrame(r[row == k], columns=["x", "w", "y", "h"]).sort_values(["x", "y"])
        for _, group in mine.groupby(["x", "w"]):
            y, h = group["y"].to_numpy(), group["h"].to_numpy()
            assert y[0] == pytest.approx(k - bar_height / 2) and h.sum() == pytest.approx(bar_height)
            assert np.allclose(y[1:], y[:-1] + h[:-1])
        extents = mine.drop_duplicates(["x", "w"])
        assert (extents["x"].to_numpy()[1:] >= (extents["x"] + extents["w"]).to_numpy()[:-1] - 1e-9).all()


def column_groups(r):
    """How many column groups (rectangles with their own x extent on a row) were drawn."""
    return len(pd.DataFrame({"row": rect_rows(r), "x": r[:, 0], "w": r[:, 1]}).drop_duplicates())


def test_gantt_drawn_width_per_row_is_the_union_of_its_tasks():
    frame = synthetic_tasks(20_000)
    fig = plots.task_gantt(frame, width_px=500)
    r, drawn = drawn_per_row(fig.axes[0])
    unions = row_unions(frame)
    assert len(drawn) == 3
    for row, s in enumerate(sorted(unions)):
        assert drawn[row] == pytest.approx(unions[s], rel=1e-9)
    assert_no_overlap_within_rows(r)
    assert column_groups(r) <= 2 * 3 * 500 and len(r) <= 3 * column_groups(r)
    assert len(r) < len(frame) / 5  # sub-pixel tasks were merged


def test_gantt_merged_columns_split_their_height_by_task_type_time():
    # one pixel column (1 ms / 100 columns = 10 µs): 3 µs of AI_CORE and 6 µs of AI_CPU -> one 9 µs group,
    # a third of its height AI_CORE (first by name: the top band), two thirds AI_CPU; the 10 µs task
    # at 990 µs is a column wide: drawn alone, full height
    frame = ops_frame([1] * 4, ["AI_CORE", "AI_CPU", "AI_CORE", "AI_CORE"], [0.0, 2.0, 8.0, 990.0],
                      [1.0, 6.0, 2.0, 10.0])
    fig = plots.task_gantt(frame, width_px=100)
    r = path_rects(fig.axes[0])
    assert np.allclose(r["AI_CORE"], [[0.0, 0.009, -0.4, 0.8 / 3], [0.99, 0.01, -0.4, 0.8]])
    assert np.allclose(r["AI_CPU"], [[0.0, 0.009, -0.4 + 0.8 / 3, 0.8 * 2 / 3]])
    assert [" ".join(t.split()) for t in figure_texts(fig)] == [plots.STACKED_TASKS_NOTE]
    # nothing merged, nothing split: no note
    assert figure_texts(plots.task_gantt(GANTT)) == []


def test_gantt_of_a_million_tasks_draws_at_most_two_groups_a_column():
    frame = synthetic_tasks(1_000_000, streams=4, seed=2)
    fig = plots.task_gantt(frame, width_px=1100)
    r, drawn = drawn_per_row(fig.axes[0])
    assert column_groups(r) <= 2 * 4 * 1100 and len(r) <= 3 * column_groups(r)  # 3 Task Types
    unions = row_unions(frame)
    for row, s in enumerate(sorted(unions)):
        assert drawn[row] == pytest.approx(unions[s], rel=1e-9)
    assert_no_overlap_within_rows(r)
    assert figure_png(fig).startswith(b"\x89PNG")


def test_gantt_puts_the_collectives_on_the_hccl_row_and_other_streamless_tasks_on_stream_n_a():
    """msprof prints no Stream ID for a COMMUNICATION task: it ran on HCCL's stream, and says so; a task
    of another type without a stream id (imported data) is still "stream N/A"."""
    frame = ops_frame(stream=[1, None, None], task_type=["AI_CORE", "COMMUNICATION", "AI_CPU"],
                      start_us=[0.0, 10.0, 20.0], dur_us=[5.0, 5.0, 5.0])
    ax = plots.task_gantt(frame).axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["stream 1", "HCCL (communication)", "stream N/A"]
    rows = {k: v[:, 2:] for k, v in path_rects(ax).items()}  # the y of each Task Type's bar
    assert rows["COMMUNICATION"][0, 0] < 1.5 < rows["AI_CPU"][0, 0]


def test_gantt_zooms_to_an_iteration():
    iterations = np.array([1, 1, 2, 2, 2, 3])
    fig = plots.task_gantt(GANTT, iteration=2, iterations=iterations)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["stream 3", "HCCL (communication)"]  # no stream 1 task
    r = path_rects(ax)
    # iteration 2: AI_CPU at 100 µs is the first task shown, so x starts there
    assert np.allclose(r["AI_CPU"][:, :2], [[0.0, 0.5]])
    assert np.allclose(r["AI_CORE"][:, :2], [[0.7, 0.1]])
    assert np.allclose(r["COMMUNICATION"][:, :2], [[0.1, 0.7]])
    assert legend_texts(fig.legends[0]) == ["AI_CORE", "AI_CPU", "COMMUNICATION"]
    assert "iteration 2" in ax.get_title(loc="left")
    with pytest.raises(ValueError, match="needs iterations="):
        plots.task_gantt(GANTT, iteration=2)
    with pytest.raises(ValueError, match=r"iteration 7 has no op tasks; available Iteration IDs: 1-3"):
        plots.task_gantt(GANTT, iteration=7, iterations=iterations)


def test_gantt_without_tasks_says_why():
    fig = plots.task_gantt(GANTT.iloc[:0])
    assert figure_texts(fig) == [plots.EMPTY_OPS_MESSAGE]


def test_gantt_of_a_real_run(hccl_memory_run):
    p = hccl_memory_run.profile
    ops = p.op_summary
    fig = plots.task_gantt(ops)
    ax = fig.axes[0]
    streams = ops["Stream ID"].astype("Float64").unique()
    assert len(ax.get_yticks()) == len(streams)
    assert set(legend_texts(fig.legends[0])) == set(ops["Task Type"].astype(str))
    _, drawn = drawn_per_row(ax)
    frame = ops.assign(**{"Stream ID": ops["Stream ID"].fillna(10**6)})  # N/A sorts last, like its row
    for row, s in enumerate(sorted(row_unions(frame))):
        assert drawn[row] == pytest.approx(row_unions(frame)[s], rel=1e-6)
    last = int(p.iterations.max())
    zoomed = plots.task_gantt(ops, iteration=last, iterations=p.iteration_of_ops.to_numpy())
    _, drawn = drawn_per_row(zoomed.axes[0])
    mine = p.ops(last)
    mine = mine.assign(**{"Stream ID": mine["Stream ID"].fillna(10**6)})
    for row, s in enumerate(sorted(row_unions(mine))):
        assert drawn[row] == pytest.approx(row_unions(mine)[s], rel=1e-6)


def kind_times(frame):
    """{Task Type: the time (ms) its tasks cover on their streams}: each stream swept in start order (ties
    in table order), a task counting only what no earlier task of its stream covers (a plain loop)."""
    t0 = frame["Task Start Time(us)"].min()
    lo = (frame["Task Start Time(us)"].to_numpy() - t0) / 1000
    hi = lo + frame["Task Duration(us)"].to_numpy() / 1000
    stream = frame["Stream ID"].astype("Float64").fillna(-1).to_numpy()
    kind = frame["Task Type"].astype(str).to_numpy()
    out, reach = {}, {}
    for i in sorted(range(len(frame)), key=lambda i: (stream[i], lo[i], i)):
        begin = max(lo[i], reach.get(stream[i], -np.inf))
        out[kind[i]] = out.get(kind[i], 0.0) + max(hi[i] - begin, 0.0)
        reach[stream[i]] = max(hi[i], reach.get(stream[i], -np.inf))
    return out


def painted_shares(fig, kinds):
    """{kind: its share of the coloured pixels of the axes} on the Agg canvas, each pixel counted for the
    nearest of the kinds' colours and white (so anti-aliased edges go to one side or the other)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import to_rgb

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    image = np.asarray(canvas.buffer_rgba())[..., :3] / 255.0
    box = fig.axes[0].get_window_extent()
    top = image.shape[0] - int(box.y1)
    image = image[top + 1:image.shape[0] - int(box.y0) - 1, int(box.x0) + 1:int(box.x1) - 1]
    palette = np.array([to_rgb(plots.color_of(k)) for k in kinds] + [(1.0, 1.0, 1.0)])
    nearest = ((image[:, :, None, :] - palette) ** 2).sum(axis=-1).argmin(axis=-1)
    counts = np.bincount(nearest.ravel(), minlength=len(palette))[:-1]
    return dict(zip(kinds, counts / counts.sum()))


def test_gantt_of_a_real_run_paints_every_task_type_in_proportion_to_its_time(hccl_memory_run):
    """At 500 px a pixel column of ResNet-50's stream 1 holds several tasks and AI_CORE (a tenth of the
    time) is the majority of hardly any: each Task Type's area is still its time (one column's Task
    Types painted by the majority drew AI_CORE in no pixel at this width)."""
    ops = hccl_memory_run.profile.op_summary
    fig = plots.task_gantt(ops, width_px=500)
    r = path_rects(fig.axes[0])
    times = kind_times(ops)
    assert set(times) == {"AI_CORE", "AI_VECTOR_CORE", "COMMUNICATION"} and min(times.values()) > 0
    assert column_groups(all_rects(fig.axes[0])) < len(ops) / 3  # many tasks share a column
    for kind, t in times.items():
        assert (r[kind][:, 1] * r[kind][:, 3]).sum() / 0.8 == pytest.approx(t, rel=1e-9)
    assert_no_overlap_within_rows(all_rects(fig.axes[0]))
    total = sum(times.values())
    painted = painted_shares(fig, sorted(times))
    for kind, t in times.items():  # within 15%: white edges of wide tasks and anti-aliasing take their bit
        assert painted[kind] == pytest.approx(t / total, rel=0.15)
    assert " ".join(figure_texts(fig)[0].split()) == plots.STACKED_TASKS_NOTE


# ============================================================================= op_type_bars
OP_STATISTIC = pd.DataFrame({
    "Device_id": 0,
    "OP Type": ["MatMul", "Cast", "Add", "MatMul", "Relu"],
    "Core Type": ["AI_CORE", "AI_VECTOR_CORE", "AI_VECTOR_CORE", "MIX_AIC", "AI_VECTOR_CORE"],
    "Count": [10, 5, 5, 2, 5],
    "Total Time(us)": [500.0, 300.0, 100.0, 80.0, 20.0],
})


def bar_widths(ax):
    (container,) = ax.containers
    return [r.get_width() for r in container], [to_rgba(r.get_facecolor()) for r in container]


def test_op_type_bars_are_the_totals_with_their_share():
    fig = plots.op_type_bars(OP_STATISTIC)
    ax = fig.axes[0]
    widths, colors = bar_widths(ax)
    assert widths == [500.0, 300.0, 100.0, 80.0, 20.0]
    # MatMul runs on two core types: its labels say which
    assert [t.get_text() for t in ax.get_yticklabels()] == ["MatMul (AI_CORE)", "Cast", "Add", "MatMul (MIX_AIC)",
                                                             "Relu"]
    assert [t.get_text() for t in ax.texts] == [" 50.0%", " 30.0%", " 10.0%", " 8.0%", " 2.0%"]
    assert [t.get_position()[0] for t in ax.texts] == widths  # written at each bar end
    assert colors == [to_rgba(plots.color_of(c)) for c in ["AI_CORE", "AI_VECTOR_CORE", "AI_VECTOR_CORE",
                                                           "MIX_AIC", "AI_VECTOR_CORE"]]
    assert ax.get_xlabel() == "total time (µs)"
    assert legend_texts(ax.get_legend()) == ["AI_CORE", "AI_VECTOR_CORE", "MIX_AIC"]


def test_op_type_bars_top_and_ms():
    big = OP_STATISTIC.assign(**{"Total Time(us)": OP_STATISTIC["Total Time(us)"] * 100})
    fig = plots.op_type_bars(big, top=2)
    ax = fig.axes[0]
    assert bar_widths(ax)[0] == [50.0, 30.0]
    assert ax.get_xlabel() == "total time (ms)"
    assert [t.get_text() for t in ax.texts] == [" 50.0%", " 30.0%"]  # share of all ops, not of the shown
    assert "top 2 of 5 (80.0% of the time)" in ax.get_title(loc="left")


def test_op_type_bars_of_a_real_run(hccl_memory_run):
    stats = hccl_memory_run.profile.op_statistic
    widths, _ = bar_widths(plots.op_type_bars(stats, top=10).axes[0])
    expected = np.sort(stats["Total Time(us)"].to_numpy())[::-1][:10]
    assert widths == pytest.approx(expected)
    assert figure_texts(plots.op_type_bars(stats.iloc[:0])) == [plots.EMPTY_OP_STATISTIC_MESSAGE]


# ============================================================================== pipe_ratios
def stacked(ax):
    """{ratio label: [segment width per op, top op first]} and the ops' labels."""
    segments = {c.get_label(): [r.get_width() for r in c] for c in ax.containers}
    lefts = {c.get_label(): [r.get_x() for r in c] for c in ax.containers}
    return segments, lefts, [t.get_text() for t in ax.get_yticklabels()]


def a2_ops():
    """910B-style rows: cube ops have aic_* ratios, vector ops aiv_* (pd.NA in the other core's columns)."""
    na = pd.NA
    rows = [  # name, duration, aic_mac, aic_mte2, aiv_vec, aiv_mte2
        ("conv", 10.0, 0.8, 0.3, na, na),
        ("conv", 14.0, 0.6, 0.5, na, na),
        ("relu", 5.0, na, na, 0.4, 0.5),
        ("cast", 30.0, na, na, 0.2, 0.7),
        ("allreduce", 900.0, na, na, na, na),  # communication: no ratios, never ranked
        ("mix", 8.0, 0.5, 0.1, 0.3, 0.2),
    ]
    frame = pd.DataFrame(rows, columns=["Op Name", "Task Duration(us)", "aic_mac_ratio", "aic_mte2_ratio",
                                        "aiv_vec_ratio", "aiv_mte2_ratio"])
    for c in frame.columns[2:]:
        frame[c] = frame[c].astype("Float64")
    frame["Op Name"] = frame["Op Name"].astype("category")
    frame["aic_mac_time(us)"] = 1.0  # not a ratio: never plotted
    return frame


def test_pipe_ratios_stack_the_mean_ratio_of_each_column():
    fig = plots.pipe_ratios(a2_ops())
    ax = fig.axes[0]
    seg, left, names = stacked(ax)
    assert names == ["cast", "conv", "mix", "relu"]  # by total duration: 30, 24, 8, 5 µs
    assert list(seg) == ["aic_mac", "aic_mte2", "aiv_vec", "aiv_mte2"]
    assert seg["aic_mac"] == pytest.approx([0.0, 0.7, 0.5, 0.0])
    assert seg["aic_mte2"] == pytest.approx([0.0, 0.4, 0.1, 0.0])
    assert seg["aiv_vec"] == pytest.approx([0.2, 0.0, 0.3, 0.4])
    assert seg["aiv_mte2"] == pytest.approx([0.7, 0.0, 0.2, 0.5])
    # stacked: each segment starts where the previous ends
    assert left["aiv_mte2"] == pytest.approx([0.2, 1.1, 0.9, 0.4])
    assert legend_texts(ax.get_legend()) == ["aic_mac", "aic_mte2", "aiv_vec", "aiv_mte2"]
    assert "cycles" in ax.get_xlabel()


def test_pipe_ratios_top_and_910a_columns():
    ops = pd.DataFrame({"Op Name": ["a", "b", "a", "c"], "Task Duration(us)": [5.0, 20.0, 5.0, 1.0],
                        "mac_ratio": [0.2, 0.9, 0.4, 0.1], "vec_ratio": [0.1, 0.0, 0.3, 0.5],
                        "mte2_ratio": [0.5, 0.1, 0.3, np.nan]})
    seg, _, names = stacked(plots.pipe_ratios(ops, top=2).axes[0])
    assert names == ["b", "a"]
    assert seg == {"mac": pytest.approx([0.9, 0.3]), "vec": pytest.approx([0.0, 0.2]),
                   "mte2": pytest.approx([0.1, 0.4])}


def test_pipe_ratios_of_categorical_names_and_na_text():
    """Names as a categorical with unused categories (as op_summary holds them), ratios as text with
    N/A (as read from msprof's CSV): only rows with a number count, ties keep the order the ops ran."""
    names = pd.Categorical(["b", "a", "cpu", "b", "a", "c"], categories=["a", "b", "c", "cpu", "unused"])
    ops = pd.DataFrame({"Op Name": names, "Task Duration(us)": [4.0, 3.0, 50.0, 2.0, 3.0, 6.0],
                        "mac_ratio": ["0.5", "0.25", "N/A", "0.1", "N/A", "0.75"],
                        "vec_ratio": [0.1, np.nan, np.nan, 0.3, 0.5, np.nan]})
    fig = plots.pipe_ratios(ops)
    ax = fig.axes[0]
    seg, _, shown = stacked(ax)
    assert shown == ["b", "a", "c"]  # 6, 6 (b ran first), 6 µs; "cpu" has no ratio: no bar, its 50 µs not counted
    assert seg == {"mac": pytest.approx([0.3, 0.25, 0.75]), "vec": pytest.approx([0.2, 0.5, 0.0])}
    assert [t.get_text() for t in ax.texts] == [" 6.0 µs"] * 3
    assert ax.get_title(loc="left").endswith("the 3 longest ops of 3 (text: total task time)")
    only_na = ops.assign(mac_ratio="N/A", vec_ratio=np.nan)
    assert figure_texts(plots.pipe_ratios(only_na)) == [
        "no op has AI Core ratio values (AI CPU and communication tasks have none)"]


def test_pipe_ratios_without_ratio_columns_name_the_metrics_group():
    memory_group = pd.DataFrame({"Op Name": ["a"], "Task Duration(us)": [1.0], "aic_main_mem_read_bw(GB/s)": [3.0]})
    fig = plots.pipe_ratios(memory_group)
    assert figure_texts(fig) == [plots.NO_RATIOS_MESSAGE]
    assert "--aic-metrics PipeUtilization" in plots.NO_RATIOS_MESSAGE


def test_pipe_ratios_of_a_real_run(hccl_memory_run):
    ops = hccl_memory_run.profile.op_summary
    seg, _, names = stacked(plots.pipe_ratios(ops, top=5).axes[0])
    ratio_cols = [c for c in ops.columns if c.endswith("_ratio")]
    has_ratio = ops[ratio_cols].notna().any(axis=1)
    totals = ops[has_ratio].groupby("Op Name", observed=True)["Task Duration(us)"].sum().sort_values(ascending=False)
    assert len(names) == 5
    for k, name in enumerate(totals.index[:5]):
        assert name.endswith(names[k].lstrip("…"))
        means = ops[ops["Op Name"] == name][ratio_cols].mean()
        for col in ratio_cols:
            expected = means[col] if np.isfinite(means[col]) else 0.0
            if col[: -len("_ratio")] in seg:
                assert seg[col[: -len("_ratio")]][k] == pytest.approx(expected)


# ========================================================================= memory_lifetimes
def test_memory_lifetimes_draw_every_place_in_the_pool_while_it_is_used(hccl_memory_run):
    """The whole run (tables without step_trace): a box per tensor where no other tensor of its place in
    the pool starts in its pixel column, and per place the boxes cover exactly its tensors' lifetimes."""
    p = hccl_memory_run.profile
    tl, mr, peak = p.tensor_lifetimes, p.memory_record, p.memory_peak
    fig = plots.memory_lifetimes(tl, mr, peak)
    ax_t, ax_m = fig.axes
    r = all_rects(ax_t)
    origin = min(tl["Allocation Time(us)"].min(), mr["Timestamp(us)"].min())
    end = max(tl["Release Time(us)"].max(), mr["Timestamp(us)"].max())
    # widths from the float timestamps the table holds (Duration(us) is exact ns; the floats resolve 0.25 µs)
    lo = ((tl["Allocation Time(us)"] - origin) / 1000).to_numpy()
    hi = ((tl["Release Time(us)"] - origin) / 1000).to_numpy()
    y, h = (tl["Address"] / MIB).to_numpy(), (tl["Size(KB)"] / 1024).to_numpy()
    places = pd.DataFrame({"y": y, "h": h, "lo": lo, "hi": hi,
                           "column": np.floor(lo / ((end - origin) / 1000 / 1100)).astype(int)})
    place_of_box = pd.MultiIndex.from_arrays([r[:, 2], r[:, 3]])
    assert set(place_of_box) == set(zip(y, h))  # every place drawn, nowhere else
    for (py, ph), used in places.groupby(["y", "h"]):
        drawn = r[(r[:, 2] == py) & (r[:, 3] == ph)]
        assert drawn[:, 1].sum() == pytest.approx(union_length(used["lo"], used["hi"]), abs=1e-9)
    alone = places[~places.duplicated(["y", "h", "column"], keep=False) & (places["hi"] > places["lo"])]
    assert len(alone) > 0.9 * len(tl)
    boxes = {tuple(np.round(b, 6)) for b in r}
    expected = np.round(np.column_stack([alone["lo"], alone["hi"] - alone["lo"], alone["y"], alone["h"]]), 6)
    assert all(tuple(e) in boxes for e in expected)
    assert len(r) < len(tl)  # tensors of one place sharing a pixel column are one box
    # the peak: marker at memory_peak's time and value, on the allocated curve's axes
    (marker,) = [ln for ln in ax_m.lines if ln.get_marker() == "o"]
    assert marker.get_xdata()[0] == pytest.approx((peak.time_us - origin) / 1000, abs=1e-6)
    assert marker.get_ydata()[0] == pytest.approx(peak.allocated_bytes / MIB)
    assert marker.get_ydata()[0] == pytest.approx(mr["Total Allocated(MB)"].max())
    assert f"peak: {plots.format_size(peak.allocated_bytes)}" in legend_texts(ax_m.get_legend())
    allocated = [ln for ln in ax_m.lines if ln.get_label() == "allocated"][0]
    assert_curve_spans_each_column(allocated, (mr["Timestamp(us)"] - origin).to_numpy() / 1000,
                                   mr["Total Allocated(MB)"].to_numpy(), (end - origin) / 1000)
    assert ax_t.get_shared_x_axes().joined(ax_t, ax_m)
    assert ax_t.get_ylabel() == "address in the pool (MiB)" and ax_m.get_ylabel() == "memory (MiB)"
    assert "(ms)" in ax_m.get_xlabel()
    # a Profile works as the first argument: "all" is the same figure
    np.testing.assert_array_equal(all_rects(plots.memory_lifetimes(p, iteration="all").axes[0]), r)


def test_memory_lifetimes_default_to_the_last_iteration_from_its_own_records(hccl_memory_run):
    p = geprof_nb.load(hccl_memory_run.profile.path)
    st, whole = p.step_trace, hccl_memory_run.profile
    assert list(st["Iteration ID"]) == [1, 2, 3]
    fig = plots.memory_lifetimes(p)
    assert not {"tensor_lifetimes", "memory_record", "operator_memory"} & set(vars(p))  # no whole-run table built
    same = plots.memory_lifetimes(whole.tensor_lifetimes, whole.memory_record, step_trace=st, iteration=3)
    np.testing.assert_array_equal(all_rects(fig.axes[0]), all_rects(same.axes[0]))
    for a, b in zip(fig.axes[1].lines, same.axes[1].lines):
        np.testing.assert_array_equal(a.get_xydata(), b.get_xydata())
    assert fig.axes[0].get_title(loc="left") == same.axes[0].get_title(loc="left")
    assert fig.axes[0].get_title(loc="left").startswith("Tensor lifetimes: iteration 3  (")
    assert legend_texts(fig.axes[1].get_legend())[-1].startswith("peak of iteration 3: ")
    # a range: from the start of its first iteration to the end of its last, from the whole tables
    both = plots.memory_lifetimes(p, iteration=(2, 3))
    # each end widened by one float64 step of its iteration's end (0.25 us), which float-us subtraction can lose
    end2, end3 = st["Iteration End(us)"].iloc[1], st["Iteration End(us)"].iloc[2]
    w0, w1 = end2 - st["Iteration Time(us)"].iloc[1] - np.spacing(end2), end3 + np.spacing(end3)
    assert both.axes[1].get_xlim()[1] == pytest.approx(1.01 * (w1 - w0) / 1000)
    assert both.axes[1].get_xlabel() == "time since the start of iteration 2 (ms)"
    assert both.axes[0].get_title(loc="left").startswith("Tensor lifetimes: iterations 2-3  (")
    with pytest.raises(ValueError, match=r"a range is \(first, last\) with first <= last"):
        plots.memory_lifetimes(p, iteration=(3, 2))
    with pytest.raises(ValueError, match=r"iteration='last': use an Iteration ID, a \(first, last\) pair, 'all'"):
        plots.memory_lifetimes(p, iteration="last")


def assert_curve_spans_each_column(line, t, v, x1, columns=1100):
    """The drawn step curve holds, in every pixel column, the lowest, highest and last value of the
    full curve ``(t, v)`` over ``[0, x1]`` (so its range and the value it holds after the column)."""
    column = lambda x: np.minimum((np.asarray(x) * columns / x1).astype(int), columns - 1)  # noqa: E731
    full = pd.Series(v).groupby(column(t)).agg(["min", "max", "last"])
    drawn = pd.Series(line.get_ydata()).groupby(column(line.get_xdata())).agg(["min", "max", "last"])
    pd.testing.assert_frame_equal(drawn, full)


def long_memory_run(steps=20_000, period=100.0):
    """Two places in a pool reused every step (a 1 MiB and a 3 MiB tensor, one after the other), one
    4 MiB tensor on top of them in step 12345: its records, with the allocated total after each."""
    k = np.arange(steps, dtype=float)
    a0, a1 = k * period, k * period + 40.0
    spike = 12345
    alloc = np.r_[a0, a1, [spike * period + 50.0]]
    release = np.r_[a0 + 30.0, a1 + 50.0, [spike * period + 60.0]]
    size_kb = np.r_[np.full(steps, 1024.0), np.full(steps, 3072.0), [4096.0]]
    tl = pd.DataFrame({"Name": [f"t{i}" for i in range(len(alloc))], "Model ID": 1,
                       "Address": np.r_[np.zeros(steps), np.full(steps, MIB), [4 * MIB]],
                       "Size(KB)": size_kb, "Allocation Time(us)": T + alloc, "Release Time(us)": T + release,
                       "Duration(us)": release - alloc, "Stream ID": 1})
    times = np.r_[alloc, release]
    change = np.r_[size_kb, -size_kb] / 1024
    order = np.argsort(times, kind="stable")
    mr = pd.DataFrame({"Timestamp(us)": T + times[order], "Total Allocated(MB)": np.cumsum(change[order]),
                       "Total Reserved(MB)": 8.0})
    return tl, mr


def test_memory_lifetimes_of_a_long_run_merge_boxes_per_pixel_and_keep_every_column_s_range():
    tl, mr = long_memory_run()
    fig = plots.memory_lifetimes(tl, mr, width_px=1100)
    ax_t, ax_m = fig.axes
    r = all_rects(ax_t)
    assert len(r) <= 3 * 1100  # 40,001 tensors in 3 places
    origin = tl["Allocation Time(us)"].min()
    for y in (0.0, 1.0, 4.0):  # each place's boxes cover its tensors' lifetimes
        used = tl[tl["Address"] / MIB == y]
        assert r[r[:, 2] == y, 1].sum() == pytest.approx(used["Duration(us)"].sum() / 1000, rel=1e-9)
    # the curve: at most 3 points a pixel column, each column spanning the values of all its records
    (allocated,) = [ln for ln in ax_m.lines if ln.get_label() == "allocated"]
    t = (mr["Timestamp(us)"].to_numpy() - origin) / 1000
    assert len(allocated.get_xdata()) <= 3 * 1100 < len(t)
    assert_curve_spans_each_column(allocated, t, mr["Total Allocated(MB)"].to_numpy(), t.max())
    # the peak, exact: 3 + 4 MiB when the 4 MiB tensor is allocated
    (marker,) = [ln for ln in ax_m.lines if ln.get_marker() == "o"]
    assert (marker.get_xdata()[0], marker.get_ydata()[0]) == (pytest.approx((12345 * 100.0 + 50) / 1000), 7.0)
    assert "peak: 7.00 MiB" in legend_texts(ax_m.get_legend())
    assert "t40000" in [t.get_text() for t in ax_m.texts]
    assert len(ax_t.patches) <= 2 and figure_png(fig).startswith(b"\x89PNG")


def test_memory_lifetimes_zoom_and_top(hccl_memory_run):
    p = hccl_memory_run.profile
    st, tl = p.step_trace, p.tensor_lifetimes
    last = st.iloc[-1]
    w0, w1 = last["Iteration End(us)"] - last["Iteration Time(us)"], last["Iteration End(us)"]
    live = (tl["Allocation Time(us)"] <= w1) & (tl["Release Time(us)"].isna() | (tl["Release Time(us)"] >= w0))
    it = int(last["Iteration ID"])
    fig = plots.memory_lifetimes(p, iteration=it)
    assert len(all_rects(fig.axes[0])) == live.sum()
    assert f"iteration {it}" in fig.axes[1].get_xlabel()
    (marker,) = [ln for ln in fig.axes[1].lines if ln.get_marker() == "o"]
    mr = p.memory_record
    window = mr[(mr["Timestamp(us)"] >= w0) & (mr["Timestamp(us)"] <= w1)]
    assert marker.get_ydata()[0] == pytest.approx(window["Total Allocated(MB)"].max())
    top = plots.memory_lifetimes(p, iteration=it, top=40)
    r = all_rects(top.axes[0])
    assert len(r) == 40
    assert sorted(r[:, 3]) == pytest.approx(sorted(tl[live]["Size(KB)"].nlargest(40) / 1024))
    with pytest.raises(ValueError, match="available Iteration IDs"):
        plots.memory_lifetimes(p, iteration=99)


def test_memory_lifetimes_stack_model_pools_and_extend_unreleased_tensors():
    tl = pd.DataFrame({"Name": ["a", "b", "c"], "Model ID": [1, 1, 2], "Address": [0, MIB, 0],
                       "Size(KB)": [1024.0, 2048.0, 512.0], "Allocation Time(us)": T + np.array([0.0, 100.0, 50.0]),
                       "Release Time(us)": T + np.array([300.0, np.nan, 150.0]),
                       "Duration(us)": [300.0, np.nan, 100.0], "Stream ID": [1, 2, 1]})
    mr = pd.DataFrame({"Timestamp(us)": T + np.array([0.0, 100.0, 400.0]), "Total Allocated(MB)": [1.0, 3.0, 0.0],
                       "Total Reserved(MB)": [4.0, 4.0, 4.0]})
    fig = plots.memory_lifetimes(tl, mr)
    r = path_rects(fig.axes[0])
    assert sorted(r) == ["stream 1", "stream 2"]
    # model 2's pool sits above model 1's highest tensor end (3 MiB)
    np.testing.assert_allclose(r["stream 1"][np.argsort(r["stream 1"][:, 0])], [[0.0, 0.3, 0.0, 1.0],
                                                                                [0.05, 0.1, 3.0, 0.5]])
    np.testing.assert_allclose(r["stream 2"], [[0.1, 0.3, 1.0, 2.0]])  # never released: to the end of the view
    (marker,) = [ln for ln in fig.axes[1].lines if ln.get_marker() == "o"]
    assert (marker.get_xdata()[0], marker.get_ydata()[0]) == (0.1, 3.0)  # no peak given: the record's highest


def test_memory_lifetimes_split_a_place_s_column_among_its_streams_by_time():
    # one place (2 MiB at 0) used by stream 1 for 2 µs, then stream 2 for 6 µs, in one pixel column of a
    # 1 ms view (10 µs at width 100): one 8 µs box, the bottom quarter stream 1, the rest stream 2
    tl = pd.DataFrame({"Name": ["a", "b", "c"], "Model ID": 1, "Address": [0, 0, 4 * MIB],
                       "Size(KB)": [2048.0, 2048.0, 1024.0], "Allocation Time(us)": T + np.array([0.0, 3.0, 0.0]),
                       "Release Time(us)": T + np.array([2.0, 9.0, 1000.0]), "Duration(us)": [2.0, 6.0, 1000.0],
                       "Stream ID": [1, 2, 1]})
    mr = pd.DataFrame({"Timestamp(us)": T + np.array([0.0, 1000.0]), "Total Allocated(MB)": [1.0, 0.0],
                       "Total Reserved(MB)": 8.0})
    r = path_rects(plots.memory_lifetimes(tl, mr, width_px=100).axes[0])
    np.testing.assert_allclose(r["stream 1"][np.argsort(r["stream 1"][:, 2])], [[0.0, 0.008, 0.0, 0.5],
                                                                                [0.0, 1.0, 4.0, 1.0]])
    np.testing.assert_allclose(r["stream 2"], [[0.0, 0.008, 0.5, 1.5]])


def test_memory_lifetimes_without_data_say_how_to_get_it():
    from geprof_nb.analysis.tables.memory import MEMORY_RECORD, TENSOR_LIFETIMES

    fig = plots.memory_lifetimes(pd.DataFrame(columns=TENSOR_LIFETIMES), pd.DataFrame(columns=MEMORY_RECORD))
    assert figure_texts(fig) == [plots.NO_MEMORY_MESSAGE]
    # imported data: usage curve only, the title says addresses are missing
    mr = pd.DataFrame({"Timestamp(us)": T + np.array([0.0, 100.0]), "Total Allocated(MB)": [1.0, 0.0],
                       "Total Reserved(MB)": [2.0, 2.0]})
    fig = plots.memory_lifetimes(pd.DataFrame(columns=TENSOR_LIFETIMES), mr)
    assert len(fig.axes) == 1 and "no tensor addresses" in fig.axes[0].get_title(loc="left")


# ============================================================================== host_scopes
def test_host_scopes_rows_are_event_types_and_apis(dynamic_run):
    p = dynamic_run.profile
    he, calls = p.host_events, p.source.api_calls()
    fig = plots.host_scopes(he, calls)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    positive = he[he["Duration(us)"] > 0]
    events = list(dict.fromkeys(positive["Event"].astype(str)))
    assert labels[-len(events):] == events  # host event rows last, in order of first occurrence
    assert labels[0] == "RunGraph (acl)" and "ModelExecute (model)" in labels and "InferShape (node)" in labels
    origin = min(he["Start(us)"].min(), calls["begin"].min() / 1000)
    _, drawn = drawn_per_row(ax)
    for k, name in enumerate(events):
        rows = positive[positive["Event"] == name]
        expected = union_length((rows["Start(us)"] - origin) / 1000, (rows["End(us)"] - origin) / 1000)
        assert drawn[len(labels) - len(events) + k] == pytest.approx(expected, rel=1e-6)
    for label, color in patch_colors(ax).items():
        assert color == to_rgba(plots.color_of(label))
    assert ax.get_xlabel() == "time since the first host scope (ms)"


def test_host_scopes_by_thread(dynamic_run):
    p = dynamic_run.profile
    fig = plots.host_scopes(p.host_events, p.source.api_calls(), by="thread")
    ax = fig.axes[0]
    (tid,) = p.host_events["Thread ID"].unique()
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"thread {tid} · {lv}" for lv in
                                                            ("acl", "model", "node", "host events")]
    assert set(legend_texts(fig.legends[0])) >= set(p.host_events["Event"].astype(str))
    # host events of one thread do not overlap: the row's width is their total duration (from the float
    # timestamps, which resolve 0.25 µs)
    _, drawn = drawn_per_row(ax)
    he = p.host_events
    assert drawn[3] == pytest.approx((he["End(us)"] - he["Start(us)"]).sum() / 1000, rel=1e-9)
    assert drawn[3] == pytest.approx(he["Duration(us)"].sum() / 1000, abs=len(he) * 0.25e-3)


def test_host_scopes_without_events_say_how_to_get_them(hccl_memory_run):
    p = hccl_memory_run.profile
    assert p.host_events.empty
    assert figure_texts(plots.host_scopes(p.host_events)) == [plots.NO_HOST_EVENTS_MESSAGE]
    assert "--ge-api l1" in plots.NO_HOST_EVENTS_MESSAGE
    with pytest.raises(ValueError, match="api_statistic only has totals"):
        plots.host_scopes(p.host_events, p.api_statistic)


def test_host_scopes_of_api_calls_only_say_why_under_the_title(tmp_path):
    """A static graph with --ge-api l1 and --runtime-api on: API rows, no GE host events. The note is the
    title's second line (at the figure's foot it covered the x label)."""
    p = run_profiled_session(tmp_path, ge.models.mlp(batch_size=8, hidden=(64,)), 2, ge_api="l1",
                             runtime_api="on").profile
    assert p.host_events.empty
    fig = plots.host_scopes(p.host_events, p.source.api_calls())
    ax = fig.axes[0]
    assert figure_texts(fig) == [] and len(ax.get_yticklabels()) >= 2
    title = ax.get_title(loc="left")
    assert title.startswith("Host scopes  (0 host events, ") and title.split("\n", 1)[1].replace("\n", " ") \
        == plots.NO_HOST_EVENTS_MESSAGE


# ============================================================================ runs and PNGs
@pytest.fixture(scope="module")
def hccl_memory_run(tmp_path_factory):
    """ResNet-50 (batch 2, 64x64) on 8 ranks with HCCL and task memory on, 3 steps."""
    return run_profiled_session(tmp_path_factory.mktemp("plots_resnet"), small_resnet(8), 3, hccl="on",
                                task_memory="on")


@pytest.fixture(scope="module")
def dynamic_run(tmp_path_factory):
    """A dynamic-shape MLP with GE host events (--ge-api l1), 3 steps."""
    graph = ge.models.mlp(batch_size=8, hidden=(64, 32), world_size=2, dynamic=True)
    return run_profiled_session(tmp_path_factory.mktemp("plots_dynamic"), graph, 3, ge_api="l1")


def test_every_plot_renders_to_png(hccl_memory_run, dynamic_run):
    p, d = hccl_memory_run.profile, dynamic_run.profile
    figures = [plots.step_timeline(p.step_trace), plots.task_gantt(p.op_summary), plots.op_type_bars(p.op_statistic),
               plots.pipe_ratios(p.op_summary), plots.memory_lifetimes(p),
               plots.host_scopes(d.host_events, d.source.api_calls())]
    for fig in figures:
        png = figure_png(fig)
        assert png.startswith(b"\x89PNG\r\n\x1a\n")
        assert 900 < int.from_bytes(png[16:20], "big") < 1300
        assert fig.axes[0].get_title(loc="left")


def test_no_plot_loads_pyplot():
    code = ("import sys, numpy as np, pandas as pd; from geprof_nb.nb import plots; "
            "ops = pd.DataFrame({'Stream ID': [1, 2], 'Task Type': ['AI_CORE', 'AI_CPU'], 'Op Name': ['a', 'b'], "
            "'Task Start Time(us)': [1.7e15, 1.7e15 + 5], 'Task Duration(us)': [3.0, 4.0], 'mac_ratio': [0.5, 0.2]}); "
            "st = pd.DataFrame({'OP Type': ['A'], 'Core Type': ['AI_CORE'], 'Total Time(us)': [3.0]}); "
            "he = pd.DataFrame({'Thread ID': [1], 'Element': ['n'], 'Event': ['Tiling'], 'Start(us)': [1.7e15], "
            "'End(us)': [1.7e15 + 2], 'Duration(us)': [2.0]}); "
            "mr = pd.DataFrame({'Timestamp(us)': [1.7e15, 1.7e15 + 2], 'Total Allocated(MB)': [1.0, 0.0], "
            "'Total Reserved(MB)': [1.0, 1.0]}); "
            "[plots.figure_png(f) for f in (plots.task_gantt(ops), plots.op_type_bars(st), plots.pipe_ratios(ops), "
            "plots.host_scopes(he), plots.memory_lifetimes(None, mr))]; "
            "assert 'matplotlib.pyplot' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


# ====================================================================== names shown literally
DOLLAR_OP = "cost$a_b$"


@pytest.fixture(scope="module")
def dollar_run(tmp_path_factory):
    """A training graph with an op named like mathtext (``cost$a_b$``), task memory on, 2 steps."""
    g = ge.Graph("g$x$")
    x = g.data("x", (8, 64), "float16")
    w = g.variable("w", (64, 64), "float16")
    z = g.op("Relu", g.op("MatMulV2", [x, w], name="mm"), name=DOLLAR_OP)
    ge.add_training(g, g.op("ReduceMean", z, name="loss", axes=[0]))
    return run_profiled_session(tmp_path_factory.mktemp("plots_dollar"), g, 2, task_memory="on")


def test_names_with_dollars_are_shown_as_typed_not_as_mathtext(dollar_run):
    from matplotlib.text import Text

    p = dollar_run.profile
    title = "run of g$x$"
    figures = {"pipe_ratios": plots.pipe_ratios(p.op_summary, title=title),
               "task_gantt": plots.task_gantt(p.op_summary, title=title),
               "op_type_bars": plots.op_type_bars(p.op_statistic, title=title),
               "memory_lifetimes": plots.memory_lifetimes(p, title=title),
               "step_timeline": plots.step_timeline(p.step_trace, title=title)}
    labels = [t.get_text() for t in figures["pipe_ratios"].axes[0].get_yticklabels()]
    assert DOLLAR_OP in labels  # the op's own name, not an escaped or shortened one
    for name, fig in figures.items():
        figure_png(fig)  # drawn as a notebook shows it
        texts = [t for t in fig.findobj(Text) if "$" in t.get_text()]
        assert any(t.get_text().startswith(title) for t in texts), name
        for t in texts:
            assert t.get_parse_math() is False, (name, t.get_text())
            assert t._preprocess_math(t.get_text()) == (t.get_text(), False), (name, t.get_text())


# ============================================================================== size labels
@pytest.mark.parametrize("nbytes, shown", [
    (0, "0 B"), (512, "512 B"), (1023, "1023 B"), (1024, "1.00 KiB"), (12390, "12.1 KiB"),
    (1.5 * MIB, "1.50 MiB"), (100 * MIB, "100 MiB"), (3 * 1024 * MIB, "3.00 GiB"),
])
def test_sizes_are_shown_in_the_unit_that_keeps_three_significant_digits(nbytes, shown):
    assert plots.format_size(nbytes) == shown


def test_a_small_memory_peak_is_labelled_in_kib_not_as_zero_mib(dollar_run):
    p = dollar_run.profile
    peak = p.memory_peak
    assert peak.allocated_bytes == 12288  # 0.0117 MiB: read "0.0 MiB" with one decimal of MiB
    assert "peak: 12.0 KiB" in legend_texts(plots.memory_lifetimes(p, iteration="all").axes[1].get_legend())
    assert "peak of iteration 2: 12.0 KiB" in legend_texts(plots.memory_lifetimes(p).axes[1].get_legend())


# =============================================================================== step_split_bars
def breakdown(computing, exposed, free):
    return pd.DataFrame({"Step": np.arange(1, len(computing) + 1), "Computing": computing,
                         "Communication(Not Overlapped)": exposed, "Free": free})


def bar_stacks(ax):
    """{label: [(x center, bottom, height)]} of the filled bars of a bar chart."""
    return {c.get_label(): [(p.get_x() + p.get_width() / 2, p.get_y(), p.get_height()) for p in c.patches]
            for c in ax.containers if not c.get_label().startswith("_")}


def test_step_chart_stacks_computing_exposed_communication_and_free_per_step():
    frame = breakdown([1000.0, 1200.0, 900.0], [300.0, 0.0, 150.0], [50.0, 4000.0, 25.0])
    fig = plots.step_split_bars(frame, step_us=1400.0, left_out=[2])
    ax = fig.axes[0]
    stacks = bar_stacks(ax)
    assert list(stacks) == ["Computing", "exposed Communication", "Free"]
    assert [h for _, _, h in stacks["Computing"]] == [1000.0, 1200.0, 900.0]
    assert [(b, h) for _, b, h in stacks["exposed Communication"]] == [(1000.0, 300.0), (1200.0, 0.0), (900.0, 150.0)]
    assert [b + h for _, b, h in stacks["Free"]] == [1350.0, 5200.0, 1075.0]  # a bar is its step's length
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3"] and ax.get_ylabel() == "µs"
    (dashed,) = [ln for ln in ax.lines if ln.get_linestyle() == "--"]
    assert dashed.get_ydata()[0] == 1400.0
    hatched = [p for p in ax.patches if p.get_hatch() == "///"]
    assert len(hatched) == 3 and {p.get_x() + p.get_width() / 2 for p in hatched} == {1.0}  # step 2's three parts
    labels = legend_texts(ax.get_legend())
    assert labels == ["Computing", "exposed Communication", "Free", "step figure 1,400.000 µs", "not in the step figure"]
    assert ax.get_title(loc="left") == "Where each step's time goes (3 steps)"


def test_step_chart_of_many_steps_merges_them_per_column_and_keeps_the_longest():
    n = 10 * plots.step_split.MAX_COLUMNS
    free = np.full(n, 100.0)
    free[5_000] = 50_000.0  # one stall
    fig = plots.step_split_bars(breakdown(np.full(n, 1000.0), np.full(n, 200.0), free), step_us=1300.0)
    ax = fig.axes[0]
    assert ax.get_ylabel() == "ms" and not [p for p in ax.patches if type(p).__name__ == "Rectangle"]
    filled = [p for p in ax.patches if p.get_fill()]
    assert len(filled) == 3 and all(len(p.get_data().values) == plots.step_split.MAX_COLUMNS for p in filled)
    top = filled[-1].get_data().values  # each column's mean step length (Free's top)
    assert top.max() == pytest.approx((1300.0 * 9 + 51_200.0) / 10 / 1000)
    (longest,) = [p for p in ax.patches if not p.get_fill()]
    assert longest.get_data().values.max() == pytest.approx(51.2) and np.median(longest.get_data().values) == 1.3
    assert legend_texts(ax.get_legend())[3] == "longest step of a column (10.0 steps each)"
    assert figure_png(fig).startswith(b"\x89PNG")


def test_step_chart_without_a_breakdown_says_why():
    fig = plots.step_split_bars(breakdown([], [], []))
    assert fig.axes[0].texts[0].get_text() == plots.EMPTY_BREAKDOWN_MESSAGE


# ----------------------------------------------------------------------------- roofline
def test_roofline_is_log_log_under_both_roofs_and_the_hbm_slope(tmp_path):
    p = run_profiled_session(tmp_path, ge.models.mlp(), steps=2).profile
    fig = plots.roofline(p)
    ax = fig.axes[0]
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    roofs = p.roofline.attrs["roofs"]
    bw = roofs.hbm_bandwidth / 1e12  # TFLOP/s per FLOP/B
    for gid, peak in (("roof-cube", roofs.cube_flops / 1e12), ("roof-vector", roofs.vector_flops / 1e12)):
        (line,) = [ln for ln in ax.get_lines() if ln.get_gid() == gid]
        x, y = line.get_xdata(), line.get_ydata()
        low, high = x < 0.5 * peak / bw, x > 2 * peak / bw  # under the ridge: the HBM slope; past it: the peak
        assert low.any() and high.any()
        assert np.allclose(y[low], x[low] * bw) and np.allclose(y[high], peak)
    shown = p.roofline[np.isfinite(p.roofline["Arithmetic Intensity(FLOP/B)"])]
    points = np.concatenate([c.get_offsets() for c in ax.collections])
    assert len(points) == len(shown)
    assert np.allclose(np.sort(points[:, 0]), np.sort(shown["Arithmetic Intensity(FLOP/B)"].to_numpy()))
    assert ax.get_title(loc="left").startswith("Roofline of Ascend910B2: ")


def test_roofline_without_data_says_why():
    real = geprof_nb.load(PYTORCH_TEXT / "level2" / "rank0_ascend_pt")  # PipeUtilization: no FLOPs, no bytes
    assert plots.NO_ROOFLINE_MESSAGE in [t.get_text() for t in plots.roofline(real).axes[0].texts]
    fops_only = geprof_nb.load(COMPUTE_ADVICE)  # FLOPs, no Memory group: no intensity
    assert plots.NO_BYTES_MESSAGE in [t.get_text() for t in plots.roofline(fops_only).axes[0].texts]
    with pytest.raises(ValueError, match="color_by 'Stream ID' is not a column to colour by; accepted: 'Task Type'"):
        plots.roofline(fops_only.roofline, color_by="Stream ID")
