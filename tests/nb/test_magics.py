"""%%geprof: flags reach the options, results are bound and shown, errors are clear."""

import errno
import os
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from geprof_nb import ge
from geprof_nb.analysis import Profile
from geprof_nb.analysis.rundir import RunDir
from geprof_nb.nb.explorer import PANES, TAB_TITLES, WIDGET_VIEW_MIME
from geprof_nb.nb.magics import CellSyntaxError
from geprof_nb.prof import msprof, rawdata
from helpers.geprof_testing import step_headline_by_hand

#: What %%geprof shows: one display call with the explorer and its static fallback.
EXPLORER_BUNDLE = {WIDGET_VIEW_MIME, "text/html", "image/png", "text/plain"}

MLP_CELL = """
sess = ge.Session()
sess.add_graph(1, ge.models.mlp(batch_size=8, world_size=2))
for step in range(3):
    sess.run_graph(1)
"""


def run(ip, line, cell=MLP_CELL):
    with capture_output() as cap:
        ip.run_cell_magic("geprof", line, cell)
    return cap


def mimetypes(cap):
    return [set(o.data) for o in cap.outputs]


def test_load_ext_registers_magic_and_ge(ip):
    assert "geprof" in ip.magics_manager.magics["cell"]
    assert ip.user_ns["ge"] is ge


def test_load_ext_prints_one_line_saying_it_loaded_and_what_to_type_next(ip, capsys):
    ip.run_line_magic("unload_ext", "geprof_nb")
    capsys.readouterr()
    ip.run_line_magic("load_ext", "geprof_nb")  # the fixture unloads again
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("geprof_nb loaded: ")
    for next_step in ("%%geprof", "%%geprof?", "%geprof config", "%geprof help"):
        assert next_step in out, next_step


def test_unload_removes_magic_and_ge(ip):
    ip.run_line_magic("unload_ext", "geprof_nb")
    assert "geprof" not in ip.magics_manager.magics["cell"]
    assert "ge" not in ip.user_ns
    ip.run_line_magic("load_ext", "geprof_nb")  # the fixture unloads again


def test_issue_example_binds_and_shows_tables_and_timeline(ip):
    cell = """
sess = ge.Session()
sess.add_graph(1, ge.models.resnet50(batch_size=4, image_size=64, training=True, world_size=8))
for step in range(3):
    sess.run_graph(1)
"""
    cap = run(ip, "--aic-metrics PipeUtilization --training-trace on --clock virtual -o r50", cell)
    prof = ip.user_ns["_geprof"]
    assert isinstance(prof, Profile) and ip.user_ns["r50"] is prof
    assert len(prof.step_trace) == 3
    assert "aic_mac_ratio" in prof.op_summary.columns
    assert mimetypes(cap) == [EXPLORER_BUNDLE]  # one display call
    shown = cap.outputs[0].data
    n_ops = len(prof.ops())
    assert f"Showing 20 of {n_ops} op tasks (all OP Types, iteration 3)" in shown["text/html"]
    assert "aic_mac_ratio" in shown["text/html"]  # the PMU columns of the top ops
    assert all(f"<h3>{t}</h3>" in shown["text/html"] for t in ("Summary", "Ops", "Steps", "Timeline", "AI Core"))
    assert f"top 10 of {n_ops} op tasks of iteration 3" in shown["text/plain"]
    assert f"| {step_headline_by_hand(prof, [2, 3])} | 3 steps |" in shown["text/plain"]
    assert shown["image/png"][:4] == b"\x89PNG"
    assert shown[WIDGET_VIEW_MIME]["version_major"] == 2


def test_no_display_shows_nothing(ip):
    cap = run(ip, "--no-display --clock virtual")
    assert cap.outputs == []
    assert len(ip.user_ns["_geprof"].step_trace) == 3


@pytest.mark.parametrize("line, flag, accepted", [
    ("--aic-metrics Pipe", "--aic-metrics", "PipeUtilization"),
    ("--training-trace yes", "--training-trace", "'on'"),
    ("--task-trace l2", "--task-trace", "'l0'"),
    ("--hccl 1", "--hccl", "'off'"),
    ("--executor v3", "--executor", "v2"),
    ("--clock wall", "--clock", "virtual"),
])
def test_bad_flag_values_name_the_flag_and_accepted_values(ip, line, flag, accepted):
    with pytest.raises(UsageError) as exc:
        ip.run_cell_magic("geprof", line, "pass")
    assert flag in str(exc.value) and accepted in str(exc.value)


@pytest.mark.parametrize("line, message", [
    ("--storage-limit -5MB", "argument --storage-limit: '-5MB' is not valid; accepted: '<n>MB' with "
                             "200 <= n <= 4294967295, e.g. '200MB'"),
    ("--aic-metrics -Memory", "argument --aic-metrics: '-Memory' is not valid; accepted: 'ArithmeticUtilization', "),
    ("--fp-point -odd/name", "argument --fp-point: '-odd/name' starts with '-', so it reads as a flag; accepted: "
                             "--fp-point=-odd/name"),
    ("--storage-limit --hccl on", "argument --storage-limit: expected one argument"),  # the value is missing
    ("--ranks 70000", "argument --ranks: 70000 is too many; accepted: 0 (as the session says) to 65536"),
    ("--ranks -1", "argument --ranks: -1 is negative; accepted: 0 (as the session says) to 65536"),
    ("--wait -1", "argument --wait: -1 is negative; accepted: 0, 1, 2, ..."),
])
def test_bad_values_say_what_is_accepted(ip, tmp_path, line, message):
    with pytest.raises(UsageError) as exc:
        ip.run_cell_magic("geprof", line, "pass")
    assert str(exc.value).startswith(message)
    assert not (tmp_path / "geprof_output").exists()


def test_unknown_flag_is_a_usage_error(ip):
    with pytest.raises(UsageError, match="--frobnicate"):
        ip.run_cell_magic("geprof", "--frobnicate on", "pass")


def test_bad_name_is_rejected(ip):
    with pytest.raises(UsageError, match="identifier"):
        ip.run_cell_magic("geprof", "-o 1abc", "pass")


def test_output_flag_chooses_directory(ip, tmp_path):
    run(ip, f"--output {tmp_path / 'elsewhere'} --no-display")
    assert ip.user_ns["_geprof"].path.parent == (tmp_path / "elsewhere").resolve()


def test_a_run_directory_removed_while_the_cell_runs_is_said_not_raised(ip, monkeypatch):
    """The cell's work is done: no traceback from geprof for data that went away, nothing displayed, and
    stderr says what was lost."""
    monkeypatch.setattr(msprof.lib, "chunk_records", 200)  # chunks (and their directories) are written mid-run
    cell = MLP_CELL.replace("range(3)", "range(12)") + ("import shutil\nfrom geprof_nb.prof.writer import writer\n"
                                                       "writer().wait()  # (rmtree fails while the writer adds files)\n"
                                                       "shutil.rmtree(msprof.lib.run_dir)\n")
    ip.user_ns["msprof"] = msprof
    cap = run(ip, "--clock virtual", cell)
    assert ip.user_ns["_geprof"] is None and cap.outputs == []
    assert "cannot be loaded" in cap.stderr and "the 12 steps ran, but what they recorded is lost" in cap.stderr
    run(ip, "--no-display --clock virtual")  # the next cell works
    assert len(ip.user_ns["_geprof"].step_trace) == 3


def test_task_trace_l0_drops_op_info(ip):
    run(ip, "--task-trace l0 --no-display --clock virtual")
    ops = ip.user_ns["_geprof"].op_summary
    assert len(ops) > 0
    assert set(ops["OP Type"].astype(str)) == {"N/A"}
    assert (ops["Block Num"] == 0).all()
    assert not any(c.endswith("_ratio") for c in ops.columns)


def test_training_trace_off_leaves_fp_bp_empty(ip):
    run(ip, "--training-trace off --no-display --clock virtual")
    st = ip.user_ns["_geprof"].step_trace
    assert len(st) == 3
    assert st["FP Start(us)"].isna().all() and st["BP End(us)"].isna().all()
    assert (st["Iteration Time(us)"] > 0).all()


def test_fp_and_bp_point_flags_are_honoured(ip):
    run(ip, "--fp-point dense_1/MatMulV2 --bp-point dense_0/Relu --no-display --clock virtual")
    prof = ip.user_ns["_geprof"]
    ops = prof.ops(2)
    fp = ops[ops["Op Name"] == "dense_1/MatMulV2"].iloc[0]
    bp = ops[ops["Op Name"] == "dense_0/Relu"].iloc[0]
    row = prof.step_trace[prof.step_trace["Iteration ID"] == 2].iloc[0]
    assert row["FP Start(us)"] == pytest.approx(fp["Task Start Time(us)"], abs=0.5)
    assert row["BP End(us)"] == pytest.approx(bp["Task Start Time(us)"] + bp["Task Duration(us)"], abs=0.5)
    # dense_0/Relu is launched before dense_1/MatMulV2: the run says FP to BP is negative
    assert (prof.step_trace["FP to BP Time(us)"] < 0).all()
    assert any("BP point 'dense_0/Relu' runs before FP point 'dense_1/MatMulV2' in the task order: "
               "FP to BP Time is negative" in n for n in prof.notes)


def test_aic_metrics_pipe_utilization_columns_within_unit_range(ip):
    run(ip, "--aic-metrics PipeUtilization --no-display --clock virtual")
    ops = ip.user_ns["_geprof"].op_summary
    ratios = ops[[c for c in ops.columns if c.endswith("_ratio")]].to_numpy(dtype=float)
    ratios = ratios[~np.isnan(ratios)]
    assert len(ratios) > 0 and ratios.min() >= 0 and ratios.max() <= 1


def test_executor_flag_switches_host_reporting(ip):
    run(ip, "--executor v1 --no-display --clock virtual")
    v1 = RunDir(ip.user_ns["_geprof"].path)
    run(ip, "--executor v2 --no-display --clock virtual")
    v2 = RunDir(ip.user_ns["_geprof"].path)
    def model_level(records):
        return records[records["level"] == 15000]

    assert len(model_level(v1.load("event"))) == 6 and len(model_level(v1.load("api"))) == 0  # RecordStart/End
    assert len(model_level(v2.load("api"))) == 3 and len(v2.load("event")) == 0  # one ModelExecute per step


def test_virtual_clock_runs_are_identical(ip):
    run(ip, "--no-display --clock virtual -o a")
    run(ip, "--no-display --clock virtual -o b")
    a, b = ip.user_ns["a"], ip.user_ns["b"]
    assert a.path != b.path
    assert (b.step_trace["Model ID"] == a.step_trace["Model ID"] + 1).all()  # one kernel: GE's next model id
    for table in ("step_trace", "op_summary"):
        x, y = getattr(a, table), getattr(b, table)
        pd.testing.assert_frame_equal(x.drop(columns="Model ID"), y.drop(columns="Model ID"))


def test_cell_error_is_reraised_after_showing_what_was_collected(ip):
    cell = MLP_CELL + "\nraise RuntimeError('boom after 3 steps')\n"
    with capture_output() as cap, pytest.raises(RuntimeError, match="boom after 3 steps"):
        ip.run_cell_magic("geprof", "--clock virtual", cell)
    prof = ip.user_ns["_geprof"]
    assert len(prof.step_trace) == 3
    assert prof.complete
    assert "RuntimeError" in prof.info["note"]
    assert any("text/html" in o.data for o in cap.outputs)


def test_keyboard_interrupt_keeps_collected_data(ip):
    cell = MLP_CELL + "\nraise KeyboardInterrupt\n"
    with capture_output(), pytest.raises(KeyboardInterrupt):
        ip.run_cell_magic("geprof", "--clock virtual --no-display", cell)
    assert len(ip.user_ns["_geprof"].step_trace) == 3


def test_last_expression_value_is_displayed(ip):
    cap = run(ip, "--no-display --clock virtual", MLP_CELL + "\n6 * 7\n")
    assert [o.data["text/plain"] for o in cap.outputs] == ["42"]


def test_op_names_are_html_escaped(ip):
    cell = """
g = ge.Graph("evil")
x = g.data("x", (8, 16))
w = g.variable("w", (16, 4), dtype="float16")
y = g.op("MatMulV2", [x, w], name="<script>alert(1)</script>&")
g.output([y])
s = ge.Session(); s.add_graph(1, g)
status = s.run_graph(1)
"""
    cap = run(ip, "--clock virtual", cell)
    html_out = cap.outputs[0].data["text/html"]
    assert "<script>" not in html_out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&amp;" in html_out
    assert "<script>alert(1)</script>&" in cap.outputs[0].data["text/plain"]  # plain text: as it is


def test_running_collection_blocks_a_second_magic(ip, tmp_path):
    import json
    ge.GEInitialize({"ge.exec.profilingMode": "1",
                     "ge.exec.profilingOptions": json.dumps({"output": str(tmp_path / "ge")})})
    with pytest.raises(UsageError, match=r"already collecting into .* \(opened by GE's profiling options "
                                         r"\(ge.exec.profilingMode or the environment\)\); "
                                         r"finish that run first \(ge.GEFinalize\(\)\)"):
        ip.run_cell_magic("geprof", "", "pass")


def test_session_built_before_the_magic_is_profiled(ip):
    ip.run_cell("sess = ge.Session(); sess.add_graph(1, ge.models.mlp(batch_size=8, world_size=2))")
    run(ip, "--no-display --clock virtual", "for _ in range(4): sess.run_graph(1)")
    prof = ip.user_ns["_geprof"]
    assert len(prof.step_trace) == 4
    assert prof.step_trace["FP Start(us)"].notna().all()


def test_display_profile_shows_what_the_magic_shows(ip):
    magic = run(ip, "--clock virtual").outputs[0].data
    data, _ = ip.display_formatter.format(ip.user_ns["_geprof"])
    assert set(data) == set(magic) == EXPLORER_BUNDLE
    assert data[WIDGET_VIEW_MIME]["model_id"] != magic[WIDGET_VIEW_MIME]["model_id"]  # an explorer per display
    for pane in PANES:  # every run's tabs (not Serving): in the static report unless interactive only
        assert (f"<h3>{pane.title}</h3>" in data["text/html"]) == (pane.static and pane.title in TAB_TITLES)
    assert data["text/plain"].splitlines()[0] == magic["text/plain"].splitlines()[0]


def test_unload_removes_the_profile_formatter(ip):
    run(ip, "--no-display --clock virtual")
    prof = ip.user_ns["_geprof"]
    ip.run_line_magic("unload_ext", "geprof_nb")
    assert Profile not in ip.display_formatter.mimebundle_formatter.type_printers
    assert set(ip.display_formatter.format(prof)[0]) == {"text/plain"}
    ip.run_line_magic("load_ext", "geprof_nb")  # the fixture unloads again


def shown_text(cap) -> str:
    """What IPython printed (tracebacks), without terminal colours."""
    return re.sub(r"\x1b\[[0-9;]*m", "", cap.stdout)


def test_traceback_names_the_cell_by_its_execution_number(ip):
    ip.run_cell("x = 1", store_history=True)
    with capture_output() as cap:
        result = ip.run_cell("%%geprof --clock virtual --no-display\n" + MLP_CELL.lstrip() + "1 / 0\n",
                             store_history=True)
    assert isinstance(result.error_in_exec, ZeroDivisionError)
    shown = shown_text(cap)
    n = result.execution_count
    assert n > 0 and f"Cell In[{n}], line 5\n      3 for step in range(3):\n      4     sess.run_graph(1)\n" \
        f"----> 5 1 / 0\n" in shown
    assert "Cell In[0]" not in shown


def test_syntax_error_is_shown_as_ipython_shows_it_and_opens_no_run(ip, tmp_path):
    before = ip.user_ns.get("_geprof")
    with capture_output() as cap:
        result = ip.run_cell("%%geprof --clock virtual\nfor i in range(3)\n    x = 1\n", store_history=True)
    error = result.error_in_exec
    assert isinstance(error, CellSyntaxError) and isinstance(error.error, SyntaxError) and not result.success
    n = result.execution_count
    assert shown_text(cap) == f"  Cell In[{n}], line 1\n    for i in range(3)\n                     ^\n" \
                              "SyntaxError: expected ':'\n\n"
    assert not (tmp_path / "geprof_output").exists() and ip.user_ns.get("_geprof") is before
    assert cap.outputs == [] and not msprof.lib.running
    with pytest.raises(CellSyntaxError, match="'return' outside function"):  # found by compile(), not the parser
        ip.run_cell_magic("geprof", "--no-display", "x = 1\nreturn x\n")
    assert not (tmp_path / "geprof_output").exists()


def break_replace_mid_cell(ip, monkeypatch, breaks: Callable[[Path], bool]) -> None:
    """``os.replace`` onto a path ``breaks`` picks fails with EPERM once the cell calls ``break_the_disk()``
    (a run directory made read-only or immutable mid-cell)."""
    real_replace = os.replace
    broken = []

    def replace(src, dst, **kwargs):
        if broken and breaks(Path(dst)):
            raise PermissionError(errno.EPERM, "Operation not permitted", str(src))
        return real_replace(src, dst, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    ip.user_ns["break_the_disk"] = lambda: broken.append(True)


def test_notes_the_run_directory_could_not_keep_are_said_and_the_data_is_kept(ip, monkeypatch):
    break_replace_mid_cell(ip, monkeypatch, lambda dst: dst.name == "info.json")
    with capture_output() as cap:
        ip.run_cell_magic("geprof", "--clock virtual --no-display", "break_the_disk()\n" + MLP_CELL)
    said = cap.stderr.splitlines()
    prof = ip.user_ns["_geprof"]
    assert said[:3] == [f"geprof: not everything could be written into the run directory {prof.path} (Operation not "
                        "permitted, first at info.json); its info.json is an older one (status 'running', without "
                        "these counts): loading the run directory shows what was written, as an unfinished run",
                        "geprof: the Profile handed back holds the run's own status, notes and counts "
                        f"(Profile.dropped); geprof_nb.load('{prof.path}') later reads the older info.json (status "
                        "'running'), without them",
                        "geprof: notes the run directory lacks:"]
    assert "    writing into the run directory failed (Operation not permitted, first at info.json); collection " \
           "went on" in said[3:]
    assert said[3:] == [f"    {n}" for n in msprof.lib.notes]  # every note of the run, each once
    assert len(prof.step_trace) == 3 and len(prof.op_summary) == 3 * len(prof.ops())  # the data is on disk
    assert prof.complete and prof.dropped == {}  # only info.json failed: nothing is lost
    assert any("writing into the run directory failed" in n for n in prof.notes)


def test_every_write_failing_is_said_once_per_reason(ip, monkeypatch):
    break_replace_mid_cell(ip, monkeypatch, lambda dst: "PROF_" in str(dst))  # chunks and info.json alike
    with capture_output() as cap:
        ip.run_cell_magic("geprof", "--clock virtual --no-display", "break_the_disk()\n" + MLP_CELL)
    failures = [s for s in cap.stderr.splitlines() if "writing into the run directory failed" in s]
    assert failures == ["    writing into the run directory failed (Operation not permitted, first at info.json); "
                        "collection went on"]
    prof = ip.user_ns["_geprof"]
    tasks = int((ip.user_ns["sess"].model(1).table.rt_type != rawdata.RtTaskType.PROFILER_TRACE).sum())
    assert prof.dropped["hwts (not written)"] == 3 * tasks and len(prof.op_summary) == 0
    assert f"{3 * tasks} hwts records, " in cap.stderr.splitlines()[0]  # the counts are said too
    assert isinstance(ip.user_ns["_geprof"], Profile)  # the cell itself succeeded: the run is bound, as far as it got


def test_a_serving_loop_in_a_cell_records_its_requests_and_steps(ip):
    cell = ("reqs = ge.requests(5, prompt_len=(16, 64), output_len=(2, 6), rate=None, seed=1)\n"
            "served = ge.serve('tiny-llama', requests=reqs, max_batch_size=4)")
    with capture_output():
        ip.run_cell_magic("geprof", "--clock virtual --no-display", cell)
    prof, served = ip.user_ns["_geprof"], ip.user_ns["served"]
    assert prof.serving_requests["output_tokens"].tolist() == [r.output_len for r in ip.user_ns["reqs"]]
    assert len(prof.serving_steps) == served.steps
    # every step's graph run is one of the run's iterations
    assert len(prof.step_trace) == served.steps
