"""%%geprof step schedule (exact steps collected), progress line, Ctrl-C keeping what was collected."""

import signal
import threading

import numpy as np
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from geprof_nb.ge.runtime import LoadedModel
from geprof_nb.ge.session import step_hooks
from geprof_nb.nb import progress as nb_progress
from geprof_nb.prof import msprof
from helpers.geprof_testing import step_headline_by_hand

SETUP = """
sess = ge.Session()
sess.add_graph(1, ge.models.mlp(batch_size=8, world_size=2))
"""


def steps_cell(n: int) -> str:
    return SETUP + f"for step in range({n}):\n    sess.run_graph(1)\n"


def run(ip, line, cell):
    with capture_output() as cap:
        ip.run_cell_magic("geprof", line, cell)
    return cap


def n_kernels(ip) -> int:
    return sum(1 for k in ip.user_ns["sess"].model(1).table.kernels if k is not None)


def ops_per_iteration(prof) -> dict[int, int]:
    return prof.op_summary.groupby(prof.iteration_of_ops.to_numpy()).size().to_dict()


def api_counts(prof) -> dict[str, int]:
    return prof.api_statistic.set_index("API Name")["Count"].to_dict()


# ------------------------------------------------------------------------------------------- schedule
def test_schedule_collects_exactly_the_active_steps(ip):
    run(ip, "--skip-first 1 --wait 1 --warmup 1 --active 2 --repeat 2 --clock virtual --no-display", steps_cell(12))
    prof = ip.user_ns["_geprof"]
    # steps (from 0) 3, 4 and 7, 8 are recorded: the fresh model's iterations 4, 5, 8, 9
    assert list(prof.step_trace["Iteration ID"]) == [4, 5, 8, 9]
    assert list(prof.iterations) == [4, 5, 8, 9]
    k = n_kernels(ip)
    assert ops_per_iteration(prof) == {4: k, 5: k, 8: k, 9: k}
    api = api_counts(prof)
    assert api["RunGraph"] == 4 and api["ModelExecute"] == 4
    info = prof.info["step_schedule"]
    assert info["recorded_steps"] == [3, 4, 7, 8] and info["warmup_steps"] == [2, 6] and info["steps"] == 12
    assert info["discarded_records"] > 0 and prof.info["discarded"] == info["discarded_records"]
    windows = prof.info["switch_history"]
    assert [bool(w.get("discarded")) for w in windows] == [True, False, True, False]
    note = next(n for n in prof.notes if n.startswith("step schedule"))
    assert "4 of 12 steps recorded (steps 3-4, 7-8" in note
    assert "warmup steps 2, 6 were collected and discarded" in note and "not profiled: steps 0-1, 5, 9-11" in note
    assert ip.user_ns["sess"].model(1).iterations == 12


def test_steps_after_a_gap_do_not_count_the_uncollected_steps(ip):
    """Iterations 4, 5, 8, 9: iteration 8's previous collected end is iteration 5's, three steps earlier.
    Data Aug Bound and the step window start over after the gap instead of swallowing steps 5-7."""
    run(ip, "--skip-first 1 --wait 1 --warmup 1 --active 2 --repeat 2 --clock virtual --no-display", steps_cell(12))
    prof = ip.user_ns["_geprof"]
    st = prof.step_trace.set_index("Iteration ID")
    dab = st["Data Aug Bound(us)"]
    assert dab[[4, 8]].isna().all() and dab[[5, 9]].notna().all()
    # each cycle has the same virtual host costs; the input copy before the FP point jitters from window to window
    assert dab[9] == pytest.approx(dab[5], rel=0.01)
    bd = prof.step_breakdown.set_index("Step")
    parts = ["Computing", "Communication(Not Overlapped)", "Free"]
    # every step's window is about one iteration: its parts add up to at most the period of consecutive steps
    period = st.loc[5, "Iteration End(us)"] - st.loc[4, "Iteration End(us)"]
    assert (bd[parts].sum(axis=1) <= period * 1.01).all()
    # a window after the gap is like the first (its own jitter draw: within a few %), not steps 5-7 swallowed
    assert bd.loc[8, "Free"] == pytest.approx(bd.loc[4, "Free"], rel=0.05)


def test_each_window_starts_over_without_counting_the_stop_and_restart(ip):
    """--active 2 stops and restarts the collection between consecutive iterations (1-2 | 3-4 | ...): the
    first step of every window has no Data Aug Bound and a step window of its own, so the profiler's
    stop/start is neither Free time nor a finding; the advisor says what the run without a schedule says."""
    run(ip, "--active 2 --clock virtual --no-display -o scheduled", steps_cell(8))
    run(ip, "--clock virtual --no-display -o plain", steps_cell(8))
    scheduled, plain = ip.user_ns["scheduled"], ip.user_ns["plain"]
    assert len(scheduled.info["switch_history"]) == 4
    st = scheduled.step_trace.set_index("Iteration ID")
    assert st.index.tolist() == list(range(1, 9))
    dab = st["Data Aug Bound(us)"]
    assert dab.isna().tolist() == [True, False] * 4
    tr = scheduled.run.load("step_trace")
    tag = {(int(r["index_id"]), int(r["tag_id"])): int(r["timestamp"]) for r in tr}
    for it in (2, 4, 6, 8):  # FP minus the previous iteration's end, in the same window
        assert dab[it] == (tag[(it, 2)] - tag[(it - 1, 4)]) / 1000
    # each window has the same virtual host costs (the tasks before the FP point jitter from window to window);
    # without a schedule the gap is the same but for device jitter
    assert dab[[2, 4, 6, 8]].to_numpy() == pytest.approx([dab[2]] * 4, rel=0.01)
    assert dab[2] == pytest.approx(plain.step_trace["Data Aug Bound(us)"].iloc[1:].mean(), rel=0.01)
    bd = scheduled.step_breakdown.set_index("Step")
    for it in (1, 3, 5, 7):  # a window's first step spans only its own iteration
        assert bd.loc[it, "Stage"] == st.loc[it, "Iteration Time(us)"]
    assert bd.loc[[3, 5, 7], "Free"].to_numpy() == pytest.approx([bd.loc[1, "Free"]] * 3, rel=0.05)
    # the advisor sees the same run in both: the same findings (this gap, under 100 us, is a launch's own cost
    # between steps, no Large Data Aug Bound: advisor.DATA_AUG_MIN_US)
    assert dab[2] < 100
    advice = {name: prof.advise() for name, prof in (("scheduled", scheduled), ("plain", plain))}
    assert advice["scheduled"]["Rule"].tolist() == advice["plain"]["Rule"].tolist()
    assert "Large Data Aug Bound" not in advice["plain"]["Rule"].tolist()


def test_warmup_data_is_discarded_without_a_trace(ip):
    run(ip, "--warmup 2 --active 2 --repeat 1 --clock virtual --no-display -o warm", steps_cell(5))
    run(ip, "--skip-first 2 --active 2 --repeat 1 --clock virtual --no-display -o cold", steps_cell(5))
    warm, cold = ip.user_ns["warm"], ip.user_ns["cold"]
    assert list(warm.step_trace["Iteration ID"]) == list(cold.step_trace["Iteration ID"]) == [3, 4]
    assert warm.info["discarded"] > 0 and "discarded" not in cold.info
    # the same op tasks: nothing of the warmup steps is left in the run (their durations are other draws of
    # the device jitter: the warm run's collection, and so its jitter stream, started two steps earlier)
    cols = ["Op Name", "OP Type", "Block Num"]
    assert warm.op_summary[cols].equals(cold.op_summary[cols])
    assert api_counts(warm) == api_counts(cold)
    assert len(warm.host_events) == len(cold.host_events)


def test_repeat_zero_cycles_until_the_cell_ends_and_keeps_a_partial_cycle(ip):
    run(ip, "--wait 1 --active 2 --clock virtual --no-display", steps_cell(8))
    prof = ip.user_ns["_geprof"]
    # steps 1-2, 4-5, 7 (the last cycle is cut by the end of the cell)
    assert list(prof.step_trace["Iteration ID"]) == [2, 3, 5, 6, 8]
    assert prof.info["step_schedule"]["recorded_steps"] == [1, 2, 4, 5, 7]


def test_a_schedule_that_records_nothing_gives_an_empty_profile(ip):
    run(ip, "--skip-first 10 --active 1 --clock virtual --no-display", steps_cell(3))
    prof = ip.user_ns["_geprof"]
    assert len(prof.step_trace) == 0 and len(prof.op_summary) == 0
    assert any("0 of 3 steps recorded" in n for n in prof.notes)


def test_acl_execute_and_run_graph_async_are_steps_too(ip):
    cell = """
g = ge.models.mlp(batch_size=8, world_size=1)
model, status = ge.aclgrphBuildModel(g)
model_id, ret = ge.acl.aclmdlLoadFromMem(model)
sess = ge.Session()
sess.add_graph(1, ge.models.mlp(batch_size=8, world_size=1))
ge.acl.aclmdlExecute(model_id)          # step 0
sess.run_graph_async(1)                 # step 1
ge.acl.aclmdlExecute(model_id)          # step 2
sess.run_graph(99)                      # not added: fails, not a step
sess.run_graph_async(1)                 # step 3
ge.acl.aclmdlExecute(model_id)          # step 4
"""
    run(ip, "--skip-first 1 --active 3 --repeat 1 --clock virtual --no-display", cell)
    prof = ip.user_ns["_geprof"]
    assert prof.info["step_schedule"]["recorded_steps"] == [1, 2, 3]
    assert prof.info["magic"]["steps"] == 5
    api = api_counts(prof)
    assert api["RunGraphAsync"] == 2 and api["aclmdlExecute"] == 1
    assert api["RunGraph"] == 1  # the failed call is an API call inside the recording window, not a step
    acl_id = ip.user_ns["model_id"]
    session_id = ip.user_ns["sess"].model(1).model_id
    st = prof.step_trace
    assert sorted(zip(st["Model ID"], st["Iteration ID"])) == sorted([(session_id, 1), (acl_id, 2), (session_id, 2)])


@pytest.mark.parametrize("line, flag", [
    ("--wait -1 --active 1", "--wait"),
    ("--skip-first -3 --active 1", "--skip-first"),
    ("--active -1", "--active"),
    ("--repeat x --active 1", "--repeat"),
    ("--warmup 2", "--warmup"),
    ("--repeat 2", "--repeat"),
    ("--skip-first 4 --wait 1", "--skip-first"),
])
def test_bad_schedules_are_usage_errors_naming_the_flag(ip, line, flag):
    with pytest.raises(UsageError) as exc:
        ip.run_cell_magic("geprof", line, "pass")
    assert flag in str(exc.value)
    assert not msprof.lib.running


# ------------------------------------------------------------------------------------------- progress
def test_progress_line_on_stderr_in_a_terminal(ip, monkeypatch):
    monkeypatch.setattr(nb_progress, "UPDATE_INTERVAL_S", 0.0)
    cap = run(ip, "--clock virtual", steps_cell(5))
    prof = ip.user_ns["_geprof"]
    err = cap.stderr
    lines = err.split("\r")
    assert lines[1].startswith("geprof: 1 step, device timeline ")
    assert "geprof: 5 steps, device timeline" in err
    live = lines[-2]
    device_ms = float(live.split("device timeline ")[1].split(" ms since the cell began")[0])
    assert device_ms * 1000 >= prof.step_trace["Iteration Time(us)"].sum() > 0  # the whole timeline, not a step
    final = lines[-1]
    # the final line has the step figure the explorer leads with (steps 2-5: step 1 spans only itself)
    assert final == (f"geprof (done): 5 steps, {step_headline_by_hand(prof, [2, 3, 4, 5])}, "
                     f"{sum(prof.info['records'].values()):,} records reported\n")  # every record, once finalised


def test_progress_line_with_a_schedule_counts_recorded_steps(ip, monkeypatch):
    monkeypatch.setattr(nb_progress, "UPDATE_INTERVAL_S", 0.0)
    cap = run(ip, "--skip-first 1 --warmup 1 --active 2 --repeat 1 --clock virtual --no-display", steps_cell(6))
    assert cap.stderr == ""  # --no-display shows no progress either
    cap = run(ip, "--skip-first 1 --warmup 1 --active 2 --repeat 1 --clock virtual", steps_cell(6))
    err = cap.stderr
    assert "geprof: 2/4 steps, 0 recorded, device timeline" in err and "now: recording" in err
    assert "geprof: 4/4 steps, 2 recorded" in err and "now: not profiled" in err
    assert "geprof: 5 steps, 2 recorded" in err  # past the schedule's 4 steps
    assert "geprof (done): 6 steps, 2 recorded" in err


def test_short_cells_show_no_progress(ip):
    cap = run(ip, "--clock virtual", steps_cell(2))  # far below UPDATE_INTERVAL_S
    assert cap.stderr == ""


def test_updates_are_throttled_by_wall_time_not_per_step():
    fake = [0.0]
    p = nb_progress.Progress("off", interval=0.2, now=lambda: fake[0])
    p.mode = "text"
    shown = []
    p._render = lambda text: shown.append(text)
    for i in range(1, 1001):  # 1000 steps over 1 s of wall time
        fake[0] += 0.001
        p.step(i)
    assert len(shown) == 5 and shown[0].startswith("geprof: 200 steps")


def test_progress_widget_in_a_kernel(ip, monkeypatch):
    monkeypatch.setattr(nb_progress, "UPDATE_INTERVAL_S", 0.0)
    monkeypatch.setattr(nb_progress, "frontend_mode", lambda shell: "widget")
    cap = run(ip, "--active 3 --repeat 1 --clock virtual", steps_cell(4))
    assert cap.stderr == ""
    first = cap.outputs[0]
    assert "application/vnd.jupyter.widget-view+json" in first.data and first.transient["display_id"]
    updates = [o for o in cap.outputs if o.update]
    assert len(updates) == 1 and updates[0].transient == first.transient
    assert updates[0].data == {"text/plain": updates[0].data["text/plain"]}
    assert updates[0].data["text/plain"].startswith("geprof (done): 4 steps, 3 recorded")
    assert len([o for o in cap.outputs if not o.update]) >= 2  # the progress widget, then the report


def test_progress_widget_values():
    p = nb_progress.Progress("widget", total=10, interval=0.0)
    p.step(4, recorded=2, phase="recording")
    assert p._bar.value == 4 and p._bar.max == 10 and "geprof-progress" in p._box._dom_classes
    assert "geprof: 4/10 steps, 2 recorded" in p._label.value
    p.finish()
    q = nb_progress.Progress("widget", total=None, interval=0.0)
    q.step(1)
    assert q._bar.layout.display == "none"  # unknown number of steps: text only
    q.finish()


# --------------------------------------------------------------------------------------- interrupts
class RaiseAt:
    """A step hook raising ``exc`` before step ``k`` (from 0) runs."""

    def __init__(self, k, exc):
        self.k, self.exc, self.seen = k, exc, 0

    def before_step(self, info):
        if self.seen == self.k:
            raise self.exc
        self.seen += 1

    def after_step(self, info):
        pass


@pytest.fixture
def hook_at():
    added = []

    def add(k, exc):
        hook = RaiseAt(k, exc)
        step_hooks.add(hook)
        added.append(hook)
        return hook

    yield add
    for hook in added:
        step_hooks.remove(hook)


@pytest.mark.parametrize("exc_type", [RuntimeError, KeyboardInterrupt])
def test_exception_from_a_hook_at_step_k_keeps_exactly_k_steps(ip, hook_at, exc_type):
    hook_at(3, exc_type("stop here"))
    with capture_output() as cap, pytest.raises(exc_type, match="stop here"):
        ip.run_cell_magic("geprof", "--clock virtual -o cut", steps_cell(10))
    prof = ip.user_ns["cut"]
    assert ip.user_ns["_geprof"] is prof and prof.complete
    assert list(prof.step_trace["Iteration ID"]) == [1, 2, 3]
    k = n_kernels(ip)
    assert ops_per_iteration(prof) == {1: k, 2: k, 3: k}
    assert api_counts(prof)["ModelExecute"] == 3
    assert ip.user_ns["sess"].model(1).iterations == 3
    if exc_type is KeyboardInterrupt:
        assert any("interrupted (KeyboardInterrupt) after 3 steps" in n for n in prof.notes)
    else:
        assert any("raised RuntimeError: stop here" in n for n in prof.notes)
    assert len(cap.outputs) >= 1  # the report is shown
    assert not msprof.lib.running and len(step_hooks) == 1  # only the test's own hook is left


@pytest.fixture
def default_sigint():
    """Python's own Ctrl-C handler, as a kernel or a terminal has it: a process started in the background
    by a non-interactive shell inherits SIGINT ignored, and Python then leaves it ignored."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_sigint_in_the_middle_of_a_step_completes_the_step_first(ip, monkeypatch, default_sigint):
    """The signal arrives after the device ran step 5 but before the executor reported it."""
    original = LoadedModel.run_on_device
    calls = []

    def run_on_device(self, *args, **kwargs):
        end = original(self, *args, **kwargs)
        calls.append(1)
        if len(calls) == 5:
            signal.raise_signal(signal.SIGINT)
        return end

    monkeypatch.setattr(LoadedModel, "run_on_device", run_on_device)
    before = signal.getsignal(signal.SIGINT)
    with capture_output(), pytest.raises(KeyboardInterrupt) as raised:
        ip.run_cell_magic("geprof", "--clock virtual --executor v1", steps_cell(100))
    assert signal.getsignal(signal.SIGINT) is before
    innermost = raised.value.__traceback__
    while innermost.tb_next is not None:
        innermost = innermost.tb_next
    # the traceback ends at the cell's run_graph line, not in geprof's step machinery (hooks, guard)
    assert "geprof_nb" not in innermost.tb_frame.f_code.co_filename, innermost.tb_frame.f_code.co_filename
    prof = ip.user_ns["_geprof"]
    assert list(prof.step_trace["Iteration ID"]) == [1, 2, 3, 4, 5]
    from geprof_nb.analysis.rundir import RunDir
    events = RunDir(prof.path).load("event")
    model_events = events[events["level"] == 15000]
    assert len(model_events) == 10  # RecordStart and RecordEnd of every step, the 5th included
    assert sorted(np.unique(model_events["request_id"], return_counts=True)[1]) == [2] * 5
    assert any("interrupted (KeyboardInterrupt) after 5 steps" in n for n in prof.notes)


def test_real_sigint_during_a_long_cell_keeps_every_completed_step(ip, default_sigint):
    cell = SETUP + """
import time
deadline = time.monotonic() + 60
while time.monotonic() < deadline:   # stopped by Ctrl-C long before
    sess.run_graph(1)
    time.sleep(0.002)                # the user's own Python between steps
"""
    timer = threading.Timer(0.3, signal.raise_signal, args=(signal.SIGINT,))
    timer.start()
    try:
        with capture_output(), pytest.raises(KeyboardInterrupt):
            ip.run_cell_magic("geprof", "--clock virtual", cell)
    finally:
        timer.cancel()
    prof = ip.user_ns["_geprof"]
    steps = ip.user_ns["sess"].model(1).iterations
    assert steps > 0 and prof.complete
    assert list(prof.step_trace["Iteration ID"]) == list(range(1, steps + 1))
    k = n_kernels(ip)
    assert set(ops_per_iteration(prof).values()) == {k} and len(prof.op_summary) == steps * k
    assert api_counts(prof)["ModelExecute"] == steps
    assert prof.info["magic"]["steps"] == steps
    assert not msprof.lib.running


def test_guard_defers_sigint_inside_a_section_and_raises_at_its_end(default_sigint):
    guard = nb_progress.InterruptGuard()
    assert guard.install()
    try:
        guard.enter()
        signal.raise_signal(signal.SIGINT)  # handled at once, in this thread: deferred
        assert guard.pending
        with pytest.raises(KeyboardInterrupt):
            guard.exit()
        assert not guard.pending
        with pytest.raises(KeyboardInterrupt):  # outside a section: at once
            signal.raise_signal(signal.SIGINT)
        guard.enter()
        signal.raise_signal(signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):  # a second Ctrl-C in the same step does not wait
            signal.raise_signal(signal.SIGINT)
        guard.exit(raise_pending=False)
    finally:
        guard.uninstall()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_final_line_says_how_the_cell_ended(capsys):
    p = nb_progress.Progress("text", interval=0.0)
    p.step(3)
    assert p.finish("stopped by RuntimeError").startswith("geprof (stopped by RuntimeError): 3 steps")
    err = capsys.readouterr().err
    assert err.startswith("\rgeprof: 3 steps") and err.endswith("\rgeprof (stopped by RuntimeError): 3 steps, "
                                                                  f"{err.split(', ')[1]}, "
                                                                  f"{err.split(', ')[-1]}")
    q = nb_progress.Progress("text", interval=10.0)
    q.step(1)
    assert q.finish("interrupted").startswith("geprof (interrupted): 1 step,")
    assert capsys.readouterr().err == ""  # never shown: nothing to finalise
