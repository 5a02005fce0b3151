"""geprof_nb.sweep: every point of the grid, in order, its parameters and results as one DataFrame; and a
serving sweep drawn by plots.latency_throughput."""

from __future__ import annotations

import pandas as pd
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.nb import plots
from helpers.geprof_testing import serve_profiled


def test_every_point_in_order_with_its_results():
    calls = []

    def fn(a, b, c):
        calls.append((a, b, c))
        return {"sum": a + b + c} if a else pd.Series({"sum": b + c})

    got = geprof_nb.sweep(fn, a=[0, 1], b=(10, 20), c=100)
    assert calls == [(0, 10, 100), (0, 20, 100), (1, 10, 100), (1, 20, 100)]
    assert got.columns.tolist() == ["a", "b", "c", "sum"]
    assert got["sum"].tolist() == [110, 120, 111, 121]
    assert geprof_nb.sweep(lambda x: x * 2, x=[1, 2])["result"].tolist() == [2, 4]


@pytest.mark.parametrize("args, kwargs, message", [
    ((lambda: 0,), {}, "sweep: give the grid as keyword lists"),
    ((lambda x: 0,), {"x": []}, "sweep: x has no values"),
    ((lambda x: {"x": 1},), {"x": [1]}, "sweep: fn returned 'x', a name of the grid"),
])
def test_bad_sweeps_are_refused(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        geprof_nb.sweep(*args, **kwargs)


def test_a_serving_sweep_and_its_curve(tmp_path):
    reqs = ge.requests(12, prompt_len=(16, 128), output_len=(4, 32), rate=None, seed=4)

    def point(max_batch_size, tp):
        _, prof = serve_profiled(tmp_path / f"b{max_batch_size}_tp{tp}", requests=reqs, max_batch_size=max_batch_size,
                                 parallel=ge.Parallel(tp=tp))
        return prof.serving_summary()

    curve = geprof_nb.sweep(point, max_batch_size=[1, 4], tp=[1, 2])
    assert curve[["max_batch_size", "tp"]].values.tolist() == [[1, 1], [1, 2], [4, 1], [4, 2]]
    by = curve.set_index(["max_batch_size", "tp"])["output_tokens_per_s"]
    assert by[(4, 1)] > by[(1, 1)] and by[(4, 2)] > by[(1, 2)]  # batching raises throughput
    fig = plots.latency_throughput(curve, by="tp", along="max_batch_size")
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["tp=1", "tp=2"]
    assert ax.get_lines()[0].get_xdata().tolist() == curve[curve["tp"] == 1]["tpot_p50_ms"].tolist()
    with pytest.raises(ValueError, match="latency_throughput: no column 'ttft'"):
        plots.latency_throughput(curve, latency="ttft")
