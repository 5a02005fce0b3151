"""``geprof_nb.profile()``: a ``with`` block profiled as a ``%%geprof`` cell is, through the same
collection core: its steps and ops, its options over the magic's defaults, a step schedule, an
exception in the block (run finalised, exception unchanged), bad options (no run directory) and
one collection at a time."""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.collect import INFO_NOT_WRITTEN_NOTE, AlreadyCollecting, collect
from geprof_nb.ge.session import device_runtime
from geprof_nb.prof import msprof, rawdata
from geprof_nb.prof.options import ProfilingOptions, ProfilingOptionsError
from geprof_nb.prof.step_schedule import StepSchedule
from geprof_nb.prof.writer import writer

MATMUL = "dense_0/MatMulV2"


@pytest.fixture
def sess():
    """A session with a small MLP as graph 1, on the virtual clock (GE is not profiling)."""
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS, ge.GEGetErrorMsg()
    session = ge.Session()
    assert session.add_graph(1, ge.models.mlp(batch_size=8, in_features=32, hidden=(32,), training=True)) == ge.SUCCESS
    return session


def run_steps(session, n: int) -> None:
    for _ in range(n):
        assert session.run_graph(1) == ge.SUCCESS, ge.GEGetErrorMsg()


def test_a_block_records_every_step_it_runs_and_its_ops(sess, tmp_path):
    run_steps(sess, 2)  # before the block: not profiled
    with geprof_nb.profile(output=str(tmp_path / "out")) as run:
        run_steps(sess, 3)
    run_steps(sess, 1)  # after it: not profiled
    p = run.profile
    assert run.error is None and run.steps == 3 and not msprof.lib.running
    assert run.run_dir == p.path and p.path.parent == tmp_path / "out" and p.complete
    assert p.info["mode"] == "profile" and p.info["profile"] == {"options": {"output": str(tmp_path / "out")},
                                                                 "steps": 3}
    assert len(p.step_trace) == 3
    kernels = len(p.ops())
    assert kernels > 0 and len(p.op_summary) == 3 * kernels  # every op of the three steps, no more
    assert list(p.op_summary["Op Name"]).count(MATMUL) == 3


def test_options_apply_over_the_magics_defaults(sess, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with geprof_nb.profile(aic_metrics="MemoryUB", task_trace="l1") as run:
        run_steps(sess, 2)
    p = run.profile
    assert p.path.parent == tmp_path / "geprof_output"  # the magic's default output
    assert p.options["aic_metrics"] == "MemoryUB" and p.options["task_trace"] == "l1"
    assert p.options["training_trace"] == "on"  # the magic's default, not GE's "off"
    assert "aic_ub_read_bw_scalar(GB/s)" in p.op_summary and "aic_mac_ratio" not in p.op_summary
    assert list(p.step_trace["Iteration ID"]) == [1, 2]


def test_ge_initialised_and_finalised_inside_the_block_is_collected(tmp_path):
    with geprof_nb.profile(output=str(tmp_path / "out"), task_trace="off") as run:
        assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
        session = ge.Session()
        session.add_graph(1, ge.models.mlp(batch_size=8, in_features=32, hidden=(32,), training=True))
        run_steps(session, 2)
        ge.GEFinalize()
    assert run.steps == 2 and run.profile.complete
    assert list(run.profile.step_trace["Iteration ID"]) == [1, 2] and run.profile.op_summary.empty  # task_trace off


class Diverged(Exception):
    pass


def diverge(session) -> None:
    run_steps(session, 2)
    raise Diverged("loss went NaN")


def test_an_exception_finalises_the_run_and_leaves_the_block_unchanged(sess, tmp_path):
    with pytest.raises(Diverged) as info:
        with geprof_nb.profile(output=str(tmp_path / "out")) as run:
            diverge(sess)
    assert info.value is run.error and str(info.value) == "loss went NaN"
    frames = []
    tb = info.tb
    while tb is not None:
        frames.append((Path(tb.tb_frame.f_code.co_filename).name, tb.tb_frame.f_code.co_name))
        tb = tb.tb_next
    here = Path(__file__).name
    # from this test's frame to the raise: no geprof frame was added on the way out
    assert frames == [(here, "test_an_exception_finalises_the_run_and_leaves_the_block_unchanged"),
                      (here, "diverge")]
    p = run.profile
    assert p.complete and run.steps == 2 and len(p.step_trace) == 2
    assert "the profiled block raised Diverged: loss went NaN" in p.notes
    assert not msprof.lib.running


def test_an_interrupt_keeps_the_completed_steps(sess, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with geprof_nb.profile(output=str(tmp_path / "out")) as run:
            run_steps(sess, 1)
            raise KeyboardInterrupt
    assert run.profile.complete and len(run.profile.step_trace) == 1
    assert ("the profiled block was interrupted (KeyboardInterrupt) after 1 step; the data of the completed "
            "steps is kept") in run.profile.notes


def test_a_run_directory_that_turns_unwritable_is_counted_in_the_profile_handed_back(sess, tmp_path, monkeypatch,
                                                                                    capsys):
    """From step 3 on nothing can be renamed into the run directory (a chunk, info.json: a quota, a
    chmod by someone else): the block's Profile is the finalised run's, with what could not be written
    counted, and stderr gives the counts, as the run directory's older info.json cannot."""
    real_replace = os.replace
    unwritable: list[Path] = []

    def replace(src, dst, **kwargs):
        if unwritable and Path(dst).is_relative_to(unwritable[0]):
            raise PermissionError(errno.EACCES, "Permission denied", str(dst))
        return real_replace(src, dst, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    with geprof_nb.profile(output=str(tmp_path / "out")) as run:
        run_steps(sess, 2)
        unwritable.append(msprof.lib.run_dir)
        run_steps(sess, 3)
    monkeypatch.undo()
    table = sess.model(1).table
    tasks, traces = int((table.rt_type != rawdata.RtTaskType.PROFILER_TRACE).sum()), int((table.logid >= 0).sum())
    p = run.profile
    assert p.complete and p.info["status"] == "complete" and "(incomplete)" not in repr(p)
    assert p.dropped["hwts (not written)"] == 5 * tasks  # every step: no chunk was full before step 3
    assert p.dropped["step_trace (not written)"] == 5 * (traces + 2)  # the trace tasks, model start and end
    assert f"{5 * tasks} hwts records could not be written to the run directory (disk full or not writable)" in p.notes
    assert any(n.startswith("writing into the run directory failed (Permission denied, first at ") and
               n.endswith("); collection went on") for n in p.notes)
    assert INFO_NOT_WRITTEN_NOTE in p.notes
    assert not any("not finalised" in n for n in p.notes)
    said = capsys.readouterr().err.splitlines()
    counts = ", ".join(f"{n} {kind.removesuffix(' (not written)')} records" for kind, n in p.dropped.items())
    assert said[0] == run.write_problem == (
        f"geprof: not everything could be written into the run directory {p.path} (Permission denied, first at "
        f"info.json): not written: {counts}; its info.json is an older one (status 'running', without these counts): "
        "loading the run directory shows what was written, as an unfinished run")
    assert said[1] == ("geprof: the Profile handed back holds the run's own status, notes and counts (Profile.dropped); "
                       f"geprof_nb.load('{p.path}') later reads the older info.json (status 'running'), without them")
    assert said[2] == "geprof: notes the run directory lacks:"
    assert [n.strip() for n in said[3:]] == msprof.lib.notes  # none reached the run directory's info.json
    older = geprof_nb.load(p.path)  # what the message warns of
    assert not older.complete and older.dropped == {}


def test_a_run_loaded_while_it_collects_says_so_not_that_it_crashed(sess, tmp_path, monkeypatch):
    monkeypatch.setattr(msprof.lib, "chunk_records", 200)  # some steps are on disk mid-run
    with geprof_nb.profile(output=str(tmp_path / "out")) as run:
        run_steps(sess, 12)
        writer().wait()  # the checkpoints the full chunks made are on disk (the writer goes on beside the job)
        p = geprof_nb.load(msprof.lib.run_dir)
        assert not p.complete and p.info["status"] == "running" and p.info["pid"] == os.getpid()
        assert (f"the run was not finalised: its collecting process (pid {os.getpid()}) is still running, so it "
                "may still be collecting: tables hold what was flushed so far") in p.notes
        assert not any("crash" in n for n in p.notes) and len(p.step_trace) > 0
    assert run.profile.complete and not any("not finalised" in n for n in run.profile.notes)


def test_a_run_directory_removed_while_the_block_runs_is_said_not_raised(sess, tmp_path, monkeypatch, capsys):
    """The block's work is done: leaving it must not raise because the data went away (a cleanup job,
    a user deleting it); the block says what was lost, and has no Profile."""
    monkeypatch.setattr(msprof.lib, "chunk_records", 200)  # chunks (and their directories) are written mid-run
    run = geprof_nb.profile(output=str(tmp_path / "out"))
    with run:
        run_steps(sess, 12)
        writer().wait()  # (rmtree fails on a directory the writer is adding files to)
        shutil.rmtree(msprof.lib.run_dir)
        run_steps(sess, 8)
    assert run.profile is None and run.steps == 20 and run.error is None and not msprof.lib.running
    err = capsys.readouterr().err
    assert f"geprof: the run directory {run.run_dir} cannot be loaded (" in err
    assert "it was removed or replaced while the run collected; the 20 steps ran, but what they recorded is lost" \
        in err
    assert repr(run) == f"<geprof_nb.profile(): 20 steps; {run.run_dir} was lost>"
    run_steps(sess, 1)  # GE goes on


@pytest.mark.parametrize("kwargs, error, message", [
    ({"aic_metrics": "Nope"}, ProfilingOptionsError, "profiling option 'aic_metrics': 'Nope' is not valid; accepted: "),
    ({"task_trace": "l2"}, ProfilingOptionsError, "profiling option 'task_trace': 'l2' is not valid; accepted: "),
    ({"aic_metric": "MemoryUB"}, ProfilingOptionsError,
     "profiling option 'aic_metric': is not a profilingOptions field (did you mean 'aic_metrics'?); accepted: "),
    ({"schedule": {"activ": 2}}, ProfilingOptionsError,
     "profiling option 'schedule': 'activ' is not a StepSchedule field (did you mean 'active'?); accepted: a "
     "StepSchedule, a dict of its fields (skip_first, wait, warmup, active, repeat) or None"),
    ({"schedule": {"active": 0}}, ProfilingOptionsError,
     "profiling option 'schedule': field 'active' must be >= 1 (the steps to record in each cycle), got 0"),
    ({"schedule": {"active": -1}}, ProfilingOptionsError,
     "profiling option 'schedule': field 'active' must be >= 1 (the steps to record in each cycle), got -1"),
    ({"schedule": {"wait": -1}}, ProfilingOptionsError,
     "profiling option 'schedule': field 'wait' must be >= 0, got -1"),
    ({"schedule": {"repeat": "2"}}, ProfilingOptionsError,
     "profiling option 'schedule': field 'repeat' must be a whole number, got '2'"),
    ({"schedule": 3}, ProfilingOptionsError,
     "profiling option 'schedule': int is not a schedule; accepted: a StepSchedule"),
])
def test_a_bad_option_is_refused_before_any_run_directory(kwargs, error, message, tmp_path):
    with pytest.raises(error) as info:
        with geprof_nb.profile(output=str(tmp_path / "out"), **kwargs):
            pytest.fail("the block ran")
    assert str(info.value).startswith(message) and isinstance(info.value, ValueError)
    if error is ProfilingOptionsError:
        assert info.value.field == next(iter(kwargs))
    assert not (tmp_path / "out").exists() and not msprof.lib.running


@pytest.mark.parametrize("schedule", [StepSchedule(skip_first=1, warmup=1, active=2, repeat=1),
                                      {"skip_first": 1, "warmup": 1, "active": 2, "repeat": 1}])
def test_a_schedule_records_only_its_steps(sess, tmp_path, schedule):
    with geprof_nb.profile(output=str(tmp_path / "out"), schedule=schedule) as run:
        run_steps(sess, 6)  # step 0 skipped, 1 warmup, 2-3 recorded, 4-5 past the one cycle
    p = run.profile
    assert run.steps == 6
    assert p.info["step_schedule"]["recorded_steps"] == [2, 3] and p.info["step_schedule"]["warmup_steps"] == [1]
    assert list(p.step_trace["Iteration ID"]) == [3, 4]
    assert list(p.op_summary["Op Name"]).count(MATMUL) == 2


def test_a_nested_block_is_refused_naming_the_open_run(sess, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(AlreadyCollecting) as info:
        with geprof_nb.profile(output=str(out)) as outer:
            open_dir = msprof.lib.run_dir
            run_steps(sess, 1)
            with geprof_nb.profile(output=str(out)):
                pytest.fail("the nested block ran")
    assert str(info.value) == (f"profiling is already collecting into {open_dir} (opened by a geprof_nb.profile() "
                               "block); let it finish first")
    assert outer.profile.path == open_dir and outer.profile.complete and len(outer.profile.step_trace) == 1
    assert [d.name for d in out.iterdir()] == [open_dir.name]  # the nested block made no run directory


def test_a_block_inside_a_geprof_cell_is_refused_naming_the_cell(tmp_path):
    def cell() -> None:
        with geprof_nb.profile(output=str(tmp_path / "inner")):
            pytest.fail("the block ran")

    collected = collect(cell, ProfilingOptions(output=str(tmp_path / "cell")), info_key="magic")
    assert isinstance(collected.error, AlreadyCollecting)
    assert str(collected.error) == (f"profiling is already collecting into {collected.run_dir} (opened by a %%geprof "
                                    "cell); let it finish first")
    assert not (tmp_path / "inner").exists()


def test_a_block_while_ge_profiles_is_refused_naming_ges_options(tmp_path):
    options = {"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": json.dumps({"output": str(tmp_path / "ge")})}
    assert ge.GEInitialize(options) == ge.SUCCESS
    open_dir = msprof.lib.run_dir
    with pytest.raises(AlreadyCollecting) as info:
        with geprof_nb.profile(output=str(tmp_path / "out")):
            pytest.fail("the block ran")
    assert str(info.value) == (
        f"profiling is already collecting into {open_dir} (opened by GE's profiling options (ge.exec.profilingMode "
        "or the environment)); finish that run first (ge.GEFinalize())")
    assert not (tmp_path / "out").exists()


def test_a_block_while_the_c_api_profiles_is_refused_naming_aclgrphprofinit(tmp_path):
    assert ge.GEInitialize({}) == ge.SUCCESS
    assert ge.aclgrphProfInit(str(tmp_path / "api")) == ge.SUCCESS
    open_dir = msprof.lib.run_dir
    try:
        with pytest.raises(AlreadyCollecting) as info:
            with geprof_nb.profile(output=str(tmp_path / "out")):
                pytest.fail("the block ran")
    finally:
        assert ge.aclgrphProfFinalize() == ge.SUCCESS
    assert str(info.value) == (f"profiling is already collecting into {open_dir} (opened by aclgrphProfInit); "
                               "finish that run first (aclgrphProfFinalize())")
    assert not (tmp_path / "out").exists()


def test_a_profile_object_profiles_one_block(sess, tmp_path):
    block = geprof_nb.profile(output=str(tmp_path / "out"))
    with block:
        run_steps(sess, 1)
    with pytest.raises(RuntimeError, match=r"has profiled its block; call geprof_nb.profile\(\) again"):
        with block:
            pytest.fail("the block ran twice")
    assert len(list((tmp_path / "out").iterdir())) == 1


def test_the_windows_of_a_schedule_draw_new_jitter(sess, tmp_path):
    """Each window starts collecting again, but the steps go on: their durations are new draws, not
    the first window's replayed (only a new run starts the jitter stream over)."""
    schedule = {"wait": 1, "active": 2, "repeat": 2}
    with geprof_nb.profile(output=str(tmp_path / "out"), schedule=schedule) as run:
        run_steps(sess, 6)  # waits at steps 0 and 3; windows record steps 1-2 and 4-5
    ops = run.profile.op_summary
    iteration = run.profile.source.op_rows().iteration
    durations = {int(it): ops["Task Duration(us)"].to_numpy()[iteration == it] for it in set(iteration)}
    assert sorted(durations) == [2, 3, 5, 6]
    assert (durations[2] != durations[5]).any() and (durations[3] != durations[6]).any()
    with geprof_nb.profile(output=str(tmp_path / "again"), schedule=schedule) as again:
        run_steps(sess, 6)  # a new run replays the first one exactly
    assert (again.profile.op_summary["Task Duration(us)"].to_numpy() == ops["Task Duration(us)"].to_numpy()).all()


def test_a_group_the_device_lacks_is_refused_before_a_run_opens(tmp_path):
    """GE runs on an Ascend910A, which has no L2Cache counters: the block is refused, naming the field,
    the device and the groups it has, and no run directory is made."""
    with ge.simulation_settings(clock_mode="virtual", device="Ascend910A"):
        session = ge.Session()
        assert device_runtime().preset.name == "Ascend910A"
        with pytest.raises(ProfilingOptionsError) as info:
            with geprof_nb.profile(output=str(tmp_path / "out"), aic_metrics="L2Cache"):
                session.run_graph(1)
                pytest.fail("the block ran")
    assert info.value.field == "aic_metrics"
    assert "'L2Cache' is not available on Ascend910A" in str(info.value)
    assert "PipeUtilization" in info.value.accepted and "L2Cache" not in info.value.accepted
    assert not (tmp_path / "out").exists() and not msprof.lib.running
