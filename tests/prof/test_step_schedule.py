"""StepSchedule against torch.profiler.schedule's documented semantics; ScheduledCollection's control calls."""

import itertools

import pytest

from geprof_nb.prof.step_schedule import (
    NONE,
    RECORD,
    RECORD_AND_SAVE,
    WARMUP,
    ScheduledCollection,
    StepSchedule,
    StepScheduleError,
    _ranges,
)


def torch_schedule_fn(wait, warmup, active, repeat=0, skip_first=0):
    """torch.profiler.schedule's schedule_fn (torch/profiler/profiler.py), transcribed without torch."""

    def schedule_fn(step):
        assert step >= 0
        if step < skip_first:
            return NONE
        step -= skip_first
        num_steps = wait + warmup + active
        if repeat > 0 and step / num_steps >= repeat:
            return NONE
        mod_step = step % num_steps
        if mod_step < wait:
            return NONE
        if mod_step < wait + warmup:
            return WARMUP
        return RECORD if mod_step < num_steps - 1 else RECORD_AND_SAVE

    return schedule_fn


@pytest.mark.parametrize("skip_first, wait, warmup, active, repeat",
                         list(itertools.product((0, 1, 3), (0, 1, 2), (0, 1, 2), (1, 2, 3), (0, 1, 2))))
def test_actions_equal_torch_schedule_for_every_step(skip_first, wait, warmup, active, repeat):
    ours = StepSchedule(skip_first=skip_first, wait=wait, warmup=warmup, active=active, repeat=repeat)
    theirs = torch_schedule_fn(wait, warmup, active, repeat, skip_first)
    assert [ours.action(s) for s in range(40)] == [theirs(s) for s in range(40)]


def test_torch_docs_example_wait1_warmup1_active2_repeat1():
    # "skip the first step, start warming up on the second, record the third and the fourth"
    s = StepSchedule(wait=1, warmup=1, active=2, repeat=1)
    assert [s.action(i) for i in range(6)] == [NONE, WARMUP, RECORD, RECORD_AND_SAVE, NONE, NONE]
    assert s.recorded_steps(8) == [2, 3]
    assert s.total_steps == 4


def test_repeat_zero_cycles_until_the_end():
    s = StepSchedule(skip_first=2, wait=1, warmup=1, active=2, repeat=0)
    assert s.recorded_steps(14) == [4, 5, 8, 9, 12, 13]
    assert s.total_steps is None
    assert [s.action(i) for i in (0, 1, 2, 3, 4, 5)] == [NONE, NONE, NONE, WARMUP, RECORD, RECORD_AND_SAVE]


def test_active_one_is_record_and_save_every_cycle():
    s = StepSchedule(active=1, repeat=3)
    assert [s.action(i) for i in range(4)] == [RECORD_AND_SAVE] * 3 + [NONE]


@pytest.mark.parametrize("fields, flag", [
    ({"wait": -1, "active": 1}, "--wait"),
    ({"skip_first": -2, "active": 1}, "--skip-first"),
    ({"repeat": -1, "active": 1}, "--repeat"),
    ({"active": -1}, "--active"),
    ({"wait": 2}, "--wait"),
    ({"repeat": 3}, "--repeat"),
    ({"skip_first": 1, "warmup": 1}, "--skip-first"),
])
def test_from_fields_errors_name_the_flag(fields, flag):
    with pytest.raises(StepScheduleError) as exc:
        StepSchedule.from_fields(**fields)
    assert exc.value.flag == flag and str(exc.value).startswith(flag)


def test_from_fields_all_zero_means_no_schedule():
    assert StepSchedule.from_fields() is None
    assert StepSchedule.from_fields(active=2, wait=1) == StepSchedule(wait=1, active=2)


def test_constructor_needs_active():
    with pytest.raises(StepScheduleError, match="--active"):
        StepSchedule(active=0)


@pytest.mark.parametrize("active", [0, -1])
def test_constructor_names_the_range_of_active(active):
    """A StepSchedule records at least one step per cycle, so a negative ``active`` is told the same minimum as 0."""
    with pytest.raises(StepScheduleError) as exc:
        StepSchedule(active=active)
    assert exc.value.field == "active"
    assert str(exc.value) == f"--active: must be >= 1 (the steps to record in each cycle), got {active}"


def test_flags_and_ranges():
    assert StepSchedule(skip_first=3, warmup=1, active=2).flags() == "--skip-first 3 --warmup 1 --active 2"
    assert _ranges([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"
    assert _ranges([]) == "none"


class FakeLib:
    """Records the control calls a ScheduledCollection makes."""

    def __init__(self):
        self.calls = []
        self.info = {}
        self.notes = []

    def start(self, switch, dev_ids=(0,), options=None):
        self.calls.append(("start", switch))
        return 0

    def stop(self):
        self.calls.append(("stop",))
        return 0

    def begin_discard(self):
        self.calls.append(("discard",))

    def end_discard(self):
        self.calls.append(("keep",))
        return 5

    def add_note(self, text):
        self.notes.append(text)

    def set_run_info(self, key, value):
        self.info[key] = value


def test_collection_opens_and_closes_windows_through_start_and_stop():
    lib = FakeLib()
    c = ScheduledCollection(StepSchedule(skip_first=1, wait=1, warmup=1, active=2, repeat=2), 7, lib)
    per_step = []
    for _ in range(11):
        before = len(lib.calls)
        c.before_step()
        c.after_step(True)
        per_step.append(lib.calls[before:])
        assert c.step == len(per_step)
    c.finish()
    assert per_step == [
        [],                                                       # 0 skip_first
        [],                                                       # 1 wait
        [("discard",), ("start", 7)],                             # 2 warmup
        [("stop",), ("keep",), ("start", 7)],                     # 3 record
        [("stop",)],                                              # 4 record_and_save, window closed after it
        [],                                                       # 5 wait
        [("discard",), ("start", 7)],                             # 6 warmup
        [("stop",), ("keep",), ("start", 7)],                     # 7 record
        [("stop",)],                                              # 8 record_and_save
        [], [],                                                   # 9, 10: after repeat
    ]
    assert c.recorded == [3, 4, 7, 8] and c.warmed == [2, 6] and c.discarded == 10
    assert lib.info["step_schedule"]["recorded_steps"] == [3, 4, 7, 8]
    assert "steps 3-4, 7-8" in lib.notes[0] and "warmup steps 2, 6" in lib.notes[0]
    assert "not profiled: steps 0-1, 5, 9-10" in lib.notes[0]


def run_schedule(schedule: StepSchedule, steps: int) -> str:
    """The note a ScheduledCollection leaves after ``steps`` steps."""
    lib = FakeLib()
    c = ScheduledCollection(schedule, 1, lib)
    for _ in range(steps):
        c.before_step()
        c.after_step(True)
    c.finish()
    return lib.notes[0]


def test_the_note_says_step_for_one_and_steps_for_several():
    note = run_schedule(StepSchedule(skip_first=1, warmup=1, active=1, repeat=1), 3)
    assert note.endswith("(1 cycle): 1 of 3 steps recorded (step 2, counted from 0 in the cell); "
                         "warmup step 1 was collected and discarded; not profiled: step 0")
    note = run_schedule(StepSchedule(active=1, repeat=1), 1)
    assert note.endswith(": 1 of 1 step recorded (step 0, counted from 0 in the cell)")
    note = run_schedule(StepSchedule(skip_first=2, warmup=2, active=2, repeat=1), 7)
    assert note.endswith(": 2 of 7 steps recorded (steps 4-5, counted from 0 in the cell); "
                         "warmup steps 2-3 were collected and discarded; not profiled: steps 0-1, 6")
    assert run_schedule(StepSchedule(skip_first=5, active=1), 3).endswith(
        ": 0 of 3 steps recorded; not profiled: steps 0-2")


def test_a_step_that_did_not_run_is_not_counted():
    lib = FakeLib()
    c = ScheduledCollection(StepSchedule(active=1, repeat=1), 1, lib)
    c.before_step()
    c.after_step(False)  # e.g. run_graph of an unknown graph id
    assert c.step == 0 and c.state == "record"
    c.before_step()
    c.after_step(True)
    assert c.step == 1 and c.state == "off" and c.recorded == [0]
    assert lib.calls == [("start", 1), ("stop",)]


def test_finish_closes_an_open_warmup_window():
    lib = FakeLib()
    c = ScheduledCollection(StepSchedule(warmup=2, active=1), 1, lib)
    c.before_step()
    c.after_step(True)
    c.finish()
    assert lib.calls == [("discard",), ("start", 1), ("stop",), ("keep",)]
    assert c.recorded == [] and c.warmed == [0]


# ------------------------------------------------------------------ the msprof side: discard, counter
def test_msprof_discards_what_is_reported_between_begin_and_end_discard(tmp_path):
    import numpy as np

    from geprof_nb.prof import msprof, rawdata

    lib = msprof.Msprof()
    lib.init(tmp_path, {"output": str(tmp_path)})
    lib.start(0)
    lib.report_row("api", (1, 2, 3, 4, 5, 6))
    assert lib.records_reported == 1
    lib.begin_discard()
    lib.stop()
    lib.start(0)  # a warmup window: marked in switch_history
    lib.report_row("api", (1, 2, 3, 4, 5, 6))
    lib.report_block("hwts", np.zeros(4, rawdata.HWTS_DTYPE))
    with pytest.raises(TypeError):  # a wrong dtype is still an error while discarding
        lib.report_block("hwts", np.zeros(4, rawdata.API_DTYPE))
    assert lib.records_reported == 1
    lib.stop()
    assert lib.end_discard() == 5
    lib.start(0)
    lib.report_block("hwts", np.zeros(2, rawdata.HWTS_DTYPE))
    assert lib.records_reported == 3
    lib.set_run_info("step_schedule", {"recorded_steps": [1]})
    with pytest.raises(ValueError):
        lib.set_run_info("status", "x")
    run_dir = lib.finalize()
    assert lib.records_reported == 3  # still readable after the run closed

    import json

    info = json.loads((run_dir / rawdata.INFO_FILE).read_text())
    assert info["discarded"] == 5 and info["records"] == {"api": 1, "hwts": 2}
    assert [bool(w.get("discarded")) for w in info["switch_history"]] == [False, True, False]
    assert info["step_schedule"] == {"recorded_steps": [1]}


def test_discard_ends_with_the_run(tmp_path):
    from geprof_nb.prof import msprof

    lib = msprof.Msprof()
    lib.init(tmp_path / "a", {})
    lib.begin_discard()
    lib.finalize()
    assert not lib.discarding
    lib.init(tmp_path / "b", {})
    lib.report_row("api", (1, 2, 3, 4, 5, 6))
    assert lib.records_reported == 1
    lib.finalize()
