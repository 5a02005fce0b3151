"""What-if in the notebook (issue 29): ``%geprof whatif``, the explorer's What-if tab and ``plots.what_if_bars``.

The predicted steps are checked against the critical path read by hand: speeding up ``MatMul*`` 2x on this MLP
leaves the path where it is, so each step shrinks by exactly what its MatMul segments lose
(``d - int(d / 2 + 0.5)`` ns each)."""

from fnmatch import fnmatchcase

import numpy as np
import pandas as pd
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import geprof_nb
from geprof_nb.analysis.timing.what_if import validate
from geprof_nb.nb import explorer as X
from geprof_nb.nb import plots
from helpers.notebook_testing import MLP_CELL, widget_html


def matmul_saving_ns(profile) -> dict[int, int]:
    """Per step, what its critical path's MatMul segments lose at 2x: the predicted delta, by hand."""
    path = profile.critical_path()
    mm = path[(path["kind"] == "compute") & path["op_type"].astype(str).map(lambda t: fnmatchcase(t, "MatMul*"))]
    return {int(it): int((d - (d / 2 + 0.5).astype(np.int64)).sum())
            for it, d in mm.groupby("iteration")["duration"].agg(lambda s: s.to_numpy()).items()}


def test_whatif_shows_the_predicted_steps_beside_todays(profiled):
    first = profiled.user_ns["first"]
    view = profiled.run_line_magic("geprof", "whatif first --speedup 'MatMul*=2'")
    table = view.comparison()
    saving = matmul_saving_ns(first)
    assert len(saving) == 2 and min(saving.values()) > 1000  # a few us of MatMul on each step's path
    steps = first.source.step_bounds()
    now_ns = (steps["end"] - steps["begin"]).to_numpy()
    assert table["Step"].tolist() == [1, 2]
    assert np.allclose(table["Now(us)"], now_ns / 1000)
    assert np.allclose(table["Predicted(us)"], (now_ns - [saving[1], saving[2]]) / 1000)
    assert np.allclose(table["Delta(us)"], [-saving[1] / 1000, -saving[2] / 1000])
    assert np.allclose(table["compute now(us)"] - table["compute predicted(us)"], table["Now(us)"]
                       - table["Predicted(us)"])  # only compute moved
    bundle = view._repr_mimebundle_()
    page = bundle["text/html"]
    assert "MatMul* 2x faster" in page and "geprof-whatif-table" in page and "geprof-whatif-explain" in page
    assert page.count('<img src="data:image/png;base64,') == 1
    mean_now, mean_new = now_ns.mean() / 1000, (now_ns - list(saving.values())).mean() / 1000
    assert f"mean step {mean_now:,.3f} us now, {mean_new:,.3f} us predicted" in bundle["text/plain"]
    explained, total = view.explained()
    path = first.critical_path(2)
    matmuls = set(path.loc[path["op_type"].astype(str).str.startswith("MatMul"), "op_name"].astype(str))
    assert total == len(explained) == len(matmuls) == 8  # every MatMul of step 2's path changed, nothing else
    assert set(explained["Op"]) == matmuls and explained["Moved"].eq("changed").all()
    assert (explained["Delta(us)"] < 0).all() and explained["Delta(us)"].sum() * 1000 == pytest.approx(-saving[2])


def test_repeated_flags_make_one_change(profiled):
    first = profiled.user_ns["first"]
    view = profiled.run_line_magic(
        "geprof", "whatif --speedup 'MatMul*=2' --speedup 'Relu=1.5' --remove 'Cast' --host-gap-us 0")
    change = dict(op_speedup={"MatMul*": 2.0, "Relu": 1.5}, remove_ops=["Cast"], host_gap_us=0.0)
    assert view.what_if.change == validate(**change)
    assert view.profile is first  # _geprof, the default name, is the last run
    pd.testing.assert_frame_equal(view.what_if.predicted, first.what_if(**change).predicted)
    assert view.change == "MatMul* 2x faster; Relu 1.5x faster; Cast removed; host gaps capped at 0 us"


def test_device_re_costs_the_kernels(profiled):
    first = profiled.user_ns["first"]
    view = profiled.run_line_magic("geprof", "whatif first --device Ascend910B:hbm_bandwidth=0.4e12")
    expected = first.what_if(device="Ascend910B:hbm_bandwidth=0.4e12").predicted
    pd.testing.assert_frame_equal(view.what_if.predicted, expected)
    assert (expected["predicted_ns"] > expected["now_ns"]).all()  # a quarter of the HBM bandwidth: slower
    assert view.change == "on Ascend910B:hbm_bandwidth=0.4e12"


@pytest.mark.parametrize("flags, message", [
    ("--speedup MatMul", "argument --speedup: 'MatMul': expected PATTERN=FACTOR"),
    ("--speedup 'MatMul*=fast'", "argument --speedup: 'MatMul*=fast': expected PATTERN=FACTOR"),
    ("--speedup 'MatMul*=0'", "--speedup: op_speedup pattern 'MatMul*': factor 0.0 must be a finite number > 0"),
    ("--speedup 'A*=2' --speedup 'A*=3'", "--speedup: 'A*' given twice"),
    ("--speedup 'Conv2D*=2'", "--speedup: op_speedup pattern 'Conv2D*' matches no op in this run"),
    ("--remove 'Dropout*'", "--remove: remove_ops pattern 'Dropout*' matches no op in this run"),
    ("--link NVLink=2", "--link: link_bandwidth: unknown link type 'NVLink'; accepted: HCCS, RoCE, PCIe, SIO"),
    ("--host-gap-us -5", "--host-gap-us: host_gap_us -5.0 must be a finite number >= 0"),
    ("--host-gap-us soon", "argument --host-gap-us: invalid float value: 'soon'"),
    ("--device Nope", "--device: unknown device 'Nope'; accepted: Ascend910B, Ascend910A"),
    ("--device Ascend910A", "--device: what_if(device='Ascend910A'): hccs_bandwidth, roce_bandwidth would re-time"),
    ("", "%geprof whatif: give a change"),
])
def test_bad_values_name_the_flag(profiled, flags, message):
    with pytest.raises(UsageError) as err:
        profiled.run_line_magic("geprof", f"whatif first {flags}")
    assert str(err.value).startswith(message)


def test_verify_compares_with_the_cell_replayed(profiled):
    first = profiled.user_ns["first"]
    view = profiled.run_line_magic("geprof", "whatif first --speedup 'MatMul*=2' --verify")
    checked = view.verification
    steps = first.source.step_bounds()
    by_hand = (steps["end"] - steps["begin"]).to_numpy() - list(matmul_saving_ns(first).values())
    assert checked["iteration"].tolist() == [1, 2]
    assert checked["simulated_ns"].tolist() == checked["predicted_ns"].tolist() == by_hand.tolist()
    assert (checked["error"] == 0).all() and view.verify_error is None
    page = view._repr_mimebundle_()["text/html"]
    assert "geprof-whatif-verify" in page and "worst error 0.00%" in page


def test_verify_on_a_loaded_run_says_why_not(profiled):
    path = profiled.user_ns["first"].path
    with capture_output():
        profiled.run_line_magic("geprof", f"load {path} -o loaded")
    view = profiled.run_line_magic("geprof", "whatif loaded --speedup 'MatMul*=2' --verify")
    assert view.verification is None
    assert view.verify_error == f"cannot verify: verify() needs a run simulated in this process; this Profile was " \
                                f"loaded from {path}"
    assert "cannot verify: verify() needs a run simulated in this process" in view._repr_mimebundle_()["text/html"]


def test_what_if_bars_stack_each_step_now_and_predicted():
    now = pd.DataFrame({"iteration": [1, 2], "compute_ns": [6000, 7000], "communication_ns": [3000, 3000],
                        "host_ns": [1000, 0], "wait_ns": [0, 0], "idle_ns": [0, 500]})
    new = now.assign(compute_ns=[3000, 3500], host_ns=[0, 0])
    fig = plots.what_if_bars(now, new)
    ax = fig.axes[0]
    bars = [p for p in ax.patches if p.get_width() == pytest.approx(0.9)]
    assert len(bars) == 2 * 2 * 5  # (now, predicted) x steps x kinds
    tops = {round(b.get_x() + b.get_width() / 2, 3): 0.0 for b in bars}
    for b in bars:
        key = round(b.get_x() + b.get_width() / 2, 3)
        tops[key] = max(tops[key], b.get_y() + b.get_height())
    assert sorted(tops.items()) == [(0.0, 10.0), (1.0, 6.0), (2.6, 10.5), (3.6, 7.0)]  # us: 10 -> 6, 10.5 -> 7
    assert [t.get_text() for t in ax.texts] == ["-40.0%", "-33.3%"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1\nnow", "predicted", "2\nnow", "predicted"]
    empty = plots.what_if_bars(now.iloc[:0], new.iloc[:0])
    assert empty.axes[0].texts[0].get_text() == plots.EMPTY_WHAT_IF_MESSAGE


def test_the_what_if_tab_applies_the_knobs(profiled):
    first = profiled.user_ns["first"]
    ex = X.Explorer(first)
    assert not ex.what_if.built  # built when first selected, like the others
    pane = ex.select("What-if")
    controls = pane.controls
    path = first.critical_path()
    compute = path[path["kind"] == "compute"]
    assert controls.pattern.value == compute.groupby(compute["op_type"].astype(str))["duration"].sum().idxmax()
    assert controls.link is None  # no HCCL sub-tasks in this run (--hccl off)
    assert not controls.verify.disabled  # a run simulated in this kernel: it can be replayed
    assert X.Explorer(geprof_nb.load(first.path)).select("What-if").controls.verify.disabled  # a loaded one cannot
    controls.pattern.value, controls.speedup.value = "MatMul*", 2.0
    controls.button.click()
    view = controls.view
    pd.testing.assert_frame_equal(view.what_if.predicted, first.what_if(op_speedup={"MatMul*": 2.0}).predicted)
    saving = matmul_saving_ns(first)
    shown = widget_html(controls.result)
    assert f"{(view.now['step_ns'][1] - saving[2]) / 1000:,.3f}" in shown  # step 2's predicted time, in the table
    assert view.verification is None  # verify unchecked: no replay
    controls.remove.value, controls.verify.value = "Cast, Relu", True
    controls.button.click()
    assert controls.view.what_if.change == validate({"MatMul*": 2.0}, ["Cast", "Relu"])
    checked = controls.view.verification
    assert len(checked) == 2 and checked["error"].abs().max() < 0.01
    assert "geprof-whatif-verify" in widget_html(controls.result)
    controls.cap_host.value = True  # the host gap cap is replayed too
    controls.button.click()
    assert controls.view.what_if.change == validate({"MatMul*": 2.0}, ["Cast", "Relu"], host_gap_us=0.0)
    checked = controls.view.verification
    assert len(checked) == 2 and checked["error"].abs().max() < 0.01 and controls.view.verify_error is None
    assert "geprof-whatif-table" in widget_html(controls.result)
    controls.pattern.value = "Conv2D*"
    controls.button.click()
    assert controls.view is None
    assert "op_speedup pattern &#x27;Conv2D*&#x27; matches no op in this run" in widget_html(controls.result)
    assert "geprof-whatif-error" in controls.result.children[0]._dom_classes
    controls.pattern.value, controls.remove.value, controls.cap_host.value = "", "", False
    controls.button.click()
    assert "No change chosen" in widget_html(controls.result)


def test_whatif_takes_a_cluster(ip):
    with capture_output():
        ip.run_cell_magic("geprof", "--ranks 2 --hccl on --clock virtual --no-display -o clus", MLP_CELL)
    clus = ip.user_ns["clus"]
    view = ip.run_line_magic("geprof", "whatif clus --speedup 'MatMul*=2' --link HCCS=0.5")
    expected = clus.what_if(op_speedup={"MatMul*": 2.0}, link_bandwidth={"HCCS": 0.5}).predicted
    pd.testing.assert_frame_equal(view.what_if.predicted, expected)
    assert view.comparison()["Rank"].tolist() == expected["rank"].tolist()
    assert (expected["predicted_ns"] > expected["now_ns"]).all()  # the AllReduce at half bandwidth outweighs


def test_whatif_verify_on_a_cluster(ip):
    with capture_output():
        ip.run_cell_magic("geprof", "--ranks 2 --hccl on --clock virtual --no-display -o clus", MLP_CELL)
    checked = ip.run_line_magic("geprof", "whatif clus --speedup 'MatMul*=2' --verify").verification
    assert len(checked) == 2 and checked["error"].abs().max() < 0.01
