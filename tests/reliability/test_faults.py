"""Faults: the cell raises or is interrupted, the process is killed, a buffer overflows.

* A ``%%geprof`` cell that raises (or gets Ctrl-C): what was collected is finalised and
  shown, then the error propagates with the traceback the cell itself would have shown,
  without the magic's frames.
* A process killed with SIGKILL mid-run (a subprocess): everything up to the last flushed
  chunk loads, and the run says it is incomplete (Profile, notes, explorer).
* A full ring buffer: the drops are counted and shown in the Profile, its notes and the
  explorer's headline and text; never silent.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import traceback
from pathlib import Path

from IPython.utils.capture import capture_output

import geprof_nb
from geprof_nb import ge
from geprof_nb.ge.runtime import LoadedModel
from geprof_nb.nb.explorer import Explorer
from geprof_nb.prof import msprof
from geprof_nb.prof.host_profiler import global_profiler
from helpers.reliability_helpers import n_kernels, tiny_mlp

ROOT = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;]*m")

SETUP = """\
sess = ge.Session()
sess.add_graph(1, ge.models.mlp(batch_size=4, in_features=16, hidden=(16,)))
"""


def run_cell(ip, line: str, body: str):
    """Run ``%%geprof line`` over ``body`` as a notebook does; returns (result, shown traceback text, outputs)."""
    with capture_output() as cap:
        result = ip.run_cell(f"%%geprof {line}\n{body}")
    return result, ANSI.sub("", cap.stdout), cap.outputs


def assert_no_magic_frames(shown: str) -> None:
    for ours in ("magics.py", "_profile_cell", "_run_cell", "progress.py", "InterruptGuard", "geprof_nb/nb/"):
        assert ours not in shown, (ours, shown)


def test_cell_error_shows_the_users_traceback_after_the_report(ip):
    body = SETUP + textwrap.dedent("""\
        for _ in range(3):
            sess.run_graph(1)
        def check_loss(loss):
            raise ValueError(f"loss went NaN at {loss}")
        check_loss(float("nan"))
        """)
    result, shown, outputs = run_cell(ip, "--clock virtual", body)
    assert isinstance(result.error_in_exec, ValueError) and str(result.error_in_exec) == "loss went NaN at nan"
    assert "----> 7 check_loss(float(\"nan\"))" in shown and "----> 6     raise ValueError" in shown
    assert "in check_loss(loss)" in shown and shown.rstrip().endswith("ValueError: loss went NaN at nan")
    assert_no_magic_frames(shown)
    names = [f.name for f in traceback.extract_tb(result.error_in_exec.__traceback__)]
    assert "_profile_cell" not in names and "_run_cell" not in names and names[-2:] == ["<module>", "check_loss"]
    p = ip.user_ns["_geprof"]
    assert p.complete and len(p.step_trace) == 3  # finalised before the error propagated ...
    assert "the profiled cell raised ValueError: loss went NaN at nan" in p.notes
    assert any("text/html" in o.data and "geprof-report" in o.data["text/html"] for o in outputs)  # ... and shown


def test_error_from_a_ge_call_keeps_the_frames_below_the_users_line(ip):
    body = SETUP + "sess.run_graph(1)\ng = ge.Graph('g')\ng.op('NoSuchOp', g.data('x', (2, 2)))\n"
    result, shown, _ = run_cell(ip, "--clock virtual --no-display", body)
    assert type(result.error_in_exec).__name__ == "GraphBuildError"
    assert "----> 5 g.op('NoSuchOp', g.data('x', (2, 2)))" in shown
    assert "geprof_nb/ge/graph.py" in shown  # where the API refused it: part of the user's call
    assert_no_magic_frames(shown)
    assert len(ip.user_ns["_geprof"].step_trace) == 1


def test_ctrl_c_during_a_step_finishes_the_step_then_shows_the_users_line(ip, monkeypatch):
    original = LoadedModel.run_on_device
    calls = []

    def run_on_device(self, *args, **kwargs):
        end = original(self, *args, **kwargs)
        calls.append(1)
        if len(calls) == 4:
            signal.raise_signal(signal.SIGINT)  # arrives while step 4 is still being reported
        return end

    monkeypatch.setattr(LoadedModel, "run_on_device", run_on_device)
    body = SETUP + "for step in range(100):\n    sess.run_graph(1)\n"
    result, shown, outputs = run_cell(ip, "--clock virtual", body)
    assert isinstance(result.error_in_exec, KeyboardInterrupt)
    assert "----> 4     sess.run_graph(1)" in shown and "KeyboardInterrupt" in shown
    assert_no_magic_frames(shown)
    p = ip.user_ns["_geprof"]
    assert p.complete and list(p.step_trace["Iteration ID"]) == [1, 2, 3, 4]
    assert any("interrupted (KeyboardInterrupt) after 4 steps" in n for n in p.notes)
    assert any("text/html" in o.data for o in outputs)


def test_keyboard_interrupt_raised_by_the_cell_itself(ip):
    body = SETUP + "sess.run_graph(1)\nsess.run_graph(1)\nraise KeyboardInterrupt('stop')\n"
    result, shown, _ = run_cell(ip, "--clock virtual --no-display", body)
    assert isinstance(result.error_in_exec, KeyboardInterrupt)
    assert "----> 5 raise KeyboardInterrupt('stop')" in shown
    assert_no_magic_frames(shown)
    assert len(ip.user_ns["_geprof"].step_trace) == 2 and not msprof.lib.running


# ------------------------------------------------------------------------------------ SIGKILL
CHILD = """
import json, sys
from geprof_nb import ge
from geprof_nb.prof import msprof

msprof.lib.chunk_records = 64  # small chunks: many flushes before the kill
opts = {"output": sys.argv[1], "training_trace": "on", "task_trace": "on"}
assert ge.GEInitialize({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": json.dumps(opts),
                        "geprof.clock": "virtual"}) == ge.SUCCESS
sess = ge.Session()
sess.add_graph(1, ge.models.mlp(batch_size=4, in_features=16, hidden=(16,), world_size=2))
step = 0
while True:  # until killed
    assert sess.run_graph(1) == ge.SUCCESS
    step += 1
    if step % 3 == 0:  # a batch boundary: the steps so far go to msprof, which writes them
        sess.model(1).flush()
        msprof.lib.flush()
        written = {k: b.written for (k, _), b in msprof.lib._run.buffers.by_key.items()}
        print(json.dumps({"step": step, "written": written, "run_dir": str(msprof.lib.run_dir)}), flush=True)
"""


def test_sigkill_mid_run_loads_every_flushed_chunk_and_says_incomplete(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path / "out")], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        last = None
        for line in child.stdout:
            last = json.loads(line)
            if last["step"] >= 12:
                break
        assert last is not None, child.stderr.read()
        os.kill(child.pid, signal.SIGKILL)  # while it runs steps 13, 14, ...
    finally:
        child.kill()
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    run_dir = Path(last["run_dir"])
    p = geprof_nb.load(tmp_path / "out")
    assert p.path == run_dir and not p.complete and p.info["status"] == "running"
    assert "the run was not finalised (crash or kill?): tables hold what was flushed" in p.notes
    assert "(incomplete)" in repr(p)
    hwts = p.run.load("hwts")
    assert len(hwts) >= last["written"]["hwts"]  # everything written before the last report, maybe more
    steps = sorted(set(p.step_trace["Iteration ID"]))
    assert steps == list(range(1, len(steps) + 1)) and len(steps) >= 12
    assert not p.op_summary["Op Name"].astype(str).str.startswith("<unknown").any()  # names were flushed first
    assert "INCOMPLETE run (not finalised)" in Explorer(p).report.headline


KILLED_BETWEEN_CHUNKS = """
import sys
import geprof_nb
from geprof_nb import ge
from geprof_nb.prof import msprof
from geprof_nb.prof.writer import writer

msprof.lib.chunk_records = 64  # a chunk fills every two steps: nothing is flushed but by full buffers
with ge.simulation_settings(clock_mode="virtual"):
    sess = ge.Session()
    sess.add_graph(1, ge.models.mlp(batch_size=4, in_features=16, hidden=(16,), world_size=2))
    with geprof_nb.profile(output=sys.argv[1], hccl="on"):
        for _ in range(int(sys.argv[2])):
            assert sess.run_graph(1) == ge.SUCCESS
        writer().wait()  # the last checkpoint, which the writer was given, is on disk (no flush)
        print(msprof.lib.run_dir, flush=True)
        sys.stdin.readline()  # waits between two steps until killed
"""


def test_sigkill_keeps_every_kind_of_the_steps_up_to_the_last_chunk(tmp_path):
    """No explicit flush: a buffer that fills writes every other pending one with it, so the killed
    run's op_summary, step_trace and HCCL tasks hold the same whole steps, all but the last few."""
    ran = 130
    child = subprocess.Popen([sys.executable, "-c", KILLED_BETWEEN_CHUNKS, str(tmp_path / "out"), str(ran)], cwd=ROOT,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline()
        assert line, child.stderr.read()
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    p = geprof_nb.load(Path(line.strip()))
    assert not p.complete and p.info["status"] == "running"
    assert len(list(p.path.glob("device_0/data/hwts.*.npy"))) > 10  # many chunks were written mid-run
    steps = list(p.step_trace["Iteration ID"])
    kept = len(steps)
    assert kept > 0 and steps == list(range(1, kept + 1))
    assert list(p.iterations) == steps  # the task records of exactly those steps
    sess = ge.Session()
    sess.add_graph(1, tiny_mlp())
    assert sess.run_graph(1) == ge.SUCCESS  # loads the model: its kernels are the op tasks of a step
    assert len(p.op_summary) == kept * n_kernels(sess)  # every step whole
    assert sorted(set(p.run.load("hccl_task", 0)["iteration"].tolist())) == steps
    assert not p.op_summary["Op Name"].astype(str).str.startswith("<unknown").any()  # names with them
    assert p.info["records"]["hwts"] == len(p.run.load("hwts")) and p.run.missing == []  # info.json too
    # lost: the steps since the last chunk (fewer than 64 / 35 task records a step = 2) and the batch the
    # runtime had not reported yet (at most 256 steps)
    assert 0 < ran - kept < 2 + 256


# --------------------------------------------------------------------------- ring-buffer drops
def test_ring_buffer_overflow_is_counted_in_the_profile_and_the_explorer(tmp_path, monkeypatch):
    monkeypatch.setattr(global_profiler, "capacity", 64)  # ge::profiling's buffer: the V1 executor records into it
    opts = {"output": str(tmp_path / "out"), "training_trace": "on", "ge_api": "l1"}
    assert ge.GEInitialize({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": json.dumps(opts),
                            "geprof.clock": "virtual", "geprof.executor": "v1"}) == ge.SUCCESS
    sess = ge.Session()
    sess.add_graph(1, ge.models.mlp(batch_size=4, in_features=16, hidden=(16,), dynamic=True))
    for _ in range(3):
        assert sess.run_graph(1) == ge.SUCCESS
    ge.GEFinalize()
    p = geprof_nb.load(tmp_path / "out")
    kept = len(p.host_events)
    dropped = p.dropped["host_event"]
    assert kept == 32 and dropped > 0  # 64 records = 32 Start/End spans kept, the rest counted
    assert p.info["dropped"] == {"host_event": dropped}
    assert f"{dropped} host_event records were dropped (buffer full)" in p.notes
    explorer = Explorer(p)
    assert f"{dropped} records LOST (dropped or not written; see Notes)" in explorer.report.headline
    assert f"{dropped} host_event records were dropped (buffer full)" in explorer.text_summary()
    assert f"{dropped} host_event records were dropped (buffer full)" in explorer.static_html()
