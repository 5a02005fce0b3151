"""What the real clock counts as host time, end to end: the user's code between the toolkit's calls
(a ``time.sleep`` before a step is a gap of that size before it), never the toolkit's own work
(step hooks, the progress display, the writer's checkpoints, building the model at its first run),
which step_breakdown would otherwise show as Free time before the next step."""

from __future__ import annotations

import time

import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.collect import collect, load_collected
from geprof_nb.ge import runtime
from geprof_nb.ge.session import step_hooks
from geprof_nb.prof import msprof
from geprof_nb.prof.clock import clock, is_toolkit_entry
from geprof_nb.prof.handoff import RunHandoff
from geprof_nb.prof.options import ProfilingOptions

STEPS = 6
#: How long each injected delay sleeps: far above a step of this model (~0.1 ms of device time).
DELAY_S = 0.1
#: Free a step period of this model has without any delay (host costs GE models, device waits): < 1 ms.
QUIET_FREE_US = 2_000.0


def mlp() -> ge.Graph:
    return ge.models.mlp(batch_size=8, in_features=32, hidden=(32,), training=True)


def sleep_at(calls: set[int]):
    """A function that sleeps :data:`DELAY_S` on the given calls (counted from 0) and not on the others."""
    seen = [0]

    def maybe_sleep() -> None:
        if seen[0] in calls:
            time.sleep(DELAY_S)
        seen[0] += 1

    return maybe_sleep


def free_per_step(profile) -> dict[int, float]:
    sb = profile.step_breakdown
    return dict(zip(sb["Step"].astype(int), sb["Free"].astype(float)))


def run_real_clock(tmp_path, before_step=lambda step: None, make_progress=None):
    """STEPS steps of the MLP on the real clock, ``before_step(step)`` in the user's loop before each."""
    with ge.simulation_settings(clock_mode="real"):
        sess = ge.Session()
        assert sess.add_graph(1, mlp()) == ge.SUCCESS

        def loop() -> None:
            for step in range(STEPS):
                before_step(step)
                assert sess.run_graph(1) == ge.SUCCESS, ge.GEGetErrorMsg()

        options = ProfilingOptions.parse({"output": str(tmp_path), "training_trace": "on", "task_trace": "on"})
        collected = collect(loop, options, make_progress=make_progress)
        assert collected.error is None
        profile, _ = load_collected(collected)
    assert clock.mode == "real"
    return profile


class SlowHook:
    """A step hook that sleeps after some steps (what the schedule and progress hooks are to GE)."""

    def __init__(self, steps: set[int]) -> None:
        self.after = sleep_at(steps)

    def before_step(self, info) -> None:
        pass

    def after_step(self, info) -> None:
        self.after()


class SlowProgress:
    """A progress display that takes DELAY_S to draw some steps (a live front end on a busy machine)."""

    def __init__(self, steps: set[int]) -> None:
        self.draw = sleep_at(steps)

    def step(self, steps, recorded=None, phase=""):
        self.draw()

    def finish(self, status="done"):
        return status


def test_toolkit_work_between_steps_is_not_host_time(tmp_path, monkeypatch):
    """A slow step hook (after step 2), a slow progress draw (after step 3), a slow checkpoint and a slow
    first build: none of it shows as Free; on the old clock each was a DELAY_S gap before the next step."""
    hook = SlowHook({1})
    step_hooks.add(hook)
    try:
        checkpoint = runtime_checkpoint_sleeps(monkeypatch)
        build = sleep_at({0})
        original_sync = runtime.LoadedModel._sync_epoch

        def slow_build(self):
            build()
            return original_sync(self)

        monkeypatch.setattr(runtime.LoadedModel, "_sync_epoch", slow_build)
        profile = run_real_clock(tmp_path, make_progress=lambda: SlowProgress({2}))
    finally:
        step_hooks.remove(hook)
    assert checkpoint["calls"] >= 1  # a checkpoint did run (and sleep) during the steps
    free = free_per_step(profile)
    assert sorted(free) == list(range(1, STEPS + 1))
    assert max(free.values()) < QUIET_FREE_US, free


def runtime_checkpoint_sleeps(monkeypatch) -> dict[str, int]:
    """Make the msprof library checkpoint every 40 records of a kind, sleeping DELAY_S in the first one."""
    monkeypatch.setattr(msprof.lib, "chunk_records", 40)
    original = RunHandoff.submit_checkpoint
    state = {"calls": 0}

    def slow_checkpoint(self):
        if state["calls"] == 0:
            time.sleep(DELAY_S)
        state["calls"] += 1
        return original(self)

    monkeypatch.setattr(RunHandoff, "submit_checkpoint", slow_checkpoint)
    return state


def test_a_sleep_in_the_users_loop_is_a_gap_of_its_size_before_that_step(tmp_path):
    """The user's own code between steps is what the real clock is for: a DELAY_S sleep before step 5
    (the loop's fifth iteration) is that much Free in step 5 and nowhere else."""
    profile = run_real_clock(tmp_path, before_step=lambda step: time.sleep(DELAY_S) if step == 4 else None)
    free = free_per_step(profile)
    stalled = free.pop(5)
    assert DELAY_S * 1e6 <= stalled < DELAY_S * 1e6 + 50_000  # the sleep, plus at most the loop's own time
    assert max(free.values()) < QUIET_FREE_US, free


def test_a_callback_of_run_graph_async_is_the_users_code(tmp_path):
    """run_graph_async runs the user's callback: its time counts as host time before the next step."""
    with ge.simulation_settings(clock_mode="real"):
        sess = ge.Session()
        assert sess.add_graph(1, mlp()) == ge.SUCCESS
        with geprof_nb.profile(output=str(tmp_path)) as run:
            for step in range(3):
                callback = (lambda status, outputs: time.sleep(DELAY_S)) if step == 1 else None
                assert sess.run_graph_async(1, callback=callback) == ge.SUCCESS
    free = free_per_step(run.profile)
    assert free[3] >= DELAY_S * 1e6 and free[2] < QUIET_FREE_US


@pytest.mark.parametrize("api", [
    ge.GEInitialize, ge.GEFinalize, ge.Session.__init__, ge.Session.add_graph, ge.Session.remove_graph,
    ge.Session.build_graph, ge.Session.run_graph, ge.Session.run_graph_async, ge.Session.model, ge.Session.close,
    ge.Graph.data, ge.Graph.variable, ge.Graph.const, ge.Graph.op, ge.Graph.output, ge.add_training,
    ge.models.mlp, ge.models.resnet50, ge.models.bert, ge.aclgrphBuildModel, ge.aclgrphSaveModel,
    ge.aclgrphProfInit, ge.aclgrphProfCreateConfig, ge.aclgrphProfDestroyConfig, ge.aclgrphProfStart,
    ge.aclgrphProfStop, ge.aclgrphProfFinalize, ge.mstx.mark, ge.mstx.range_start, ge.mstx.range_end,
    msprof.MsprofInit, msprof.MsprofFinalize, msprof.MsprofGetHashId, msprof.MsprofReportApi,
    msprof.MsprofReportEvent, msprof.MsprofReportCompactInfo, msprof.MsprofReportAdditionalInfo,
    msprof.MsprofRegisterCallback, msprof.MsprofRegTypeInfo], ids=lambda f: f.__qualname__)
def test_every_api_that_does_toolkit_work_is_a_toolkit_entry(api):
    assert is_toolkit_entry(api)


def test_every_public_acl_function_is_a_toolkit_entry():
    """ACL's calls (load, execute, single ops, sync) by construction: a new public acl function must be one too."""
    public = [f for name, f in vars(ge.acl).items() if name.startswith("acl") and callable(f)
              and getattr(f, "__module__", "") == ge.acl.__name__]
    assert len(public) >= 8
    assert [f.__name__ for f in public if not is_toolkit_entry(f)] == []
