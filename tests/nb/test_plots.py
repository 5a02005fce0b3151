"""step_timeline draws the step_trace phases where msprof says they are; figure_png renders them."""

import json
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis import columns as C
from geprof_nb.nb.plots import EMPTY_STEP_TRACE_MESSAGE, figure_png, step_timeline

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


def test_figure_png_renders_at_the_requested_dpi():
    fig = step_timeline(step_trace(TRAINING, n_reduce=2))
    small, large = figure_png(fig, dpi=50), figure_png(fig, dpi=100)
    assert small.startswith(b"\x89PNG\r\n\x1a\n") and large.startswith(b"\x89PNG\r\n\x1a\n")
    width = int.from_bytes(large[16:20], "big")
    assert 900 < width < 1300  # ~11 in at 100 dpi, trimmed by bbox_inches="tight"
    assert int.from_bytes(small[16:20], "big") == pytest.approx(width / 2, abs=3)


def test_plots_never_load_pyplot():
    code = ("import sys, pandas as pd; from geprof_nb.nb.plots import step_timeline, figure_png; "
            "from geprof_nb.analysis import columns as C; "
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
