"""ProfilingType bits, GlobalProfilingWrapper, ProfilingProperties, the clock and the event enums."""

from __future__ import annotations

import json
import threading
import time

import pytest

from geprof_nb import ge
from geprof_nb.prof import events
from geprof_nb.prof.clock import CLOCK_MODES, VIRTUAL_EPOCH_NS, SimClock
from geprof_nb.prof.options import ProfilingOptions
from geprof_nb.prof.properties import (
    BIT_ALL,
    BIT_CANN_HOST,
    BIT_CANN_HOST_L1,
    BIT_DEVICE,
    BIT_GE_HOST,
    BIT_MEMORY,
    BIT_TASK_TIME,
    BIT_TRAINING_TRACE,
    GlobalProfilingWrapper,
    ProfilingProperties,
    ProfilingType,
    enable_flags_for_switch,
)


def test_profiling_type_values():
    assert [(t.name, t.value) for t in ProfilingType] == [
        ("kCannHost", 0), ("kDevice", 1), ("kGeHost", 2), ("kTrainingTrace", 3), ("kTaskTime", 4),
        ("kMemory", 5), ("kCannHostL1", 6), ("kNum", 7)]
    assert BIT_ALL == 0x7F and BIT_TASK_TIME == 1 << 4 and BIT_DEVICE == 2


@pytest.mark.parametrize("switch,flags", [
    (0, 0),
    (events.PROF_TASK_TIME_MASK, BIT_TASK_TIME),
    (events.PROF_TASK_TIME_L1_MASK, BIT_DEVICE),
    (events.PROF_TASK_MEMORY_MASK, BIT_MEMORY),
    (events.PROF_TRAINING_TRACE_MASK, BIT_TRAINING_TRACE),
    (events.PROF_GE_API_L0_MASK, BIT_CANN_HOST),
    (events.PROF_GE_API_L1_MASK, BIT_CANN_HOST | BIT_CANN_HOST_L1 | BIT_GE_HOST),  # geprof: l1 also feeds the GE host profiler
    (events.PROF_TASK_TIME_MASK | events.PROF_TASK_TIME_L1_MASK | events.PROF_TRAINING_TRACE_MASK
     | events.PROF_AICORE_METRICS_MASK, BIT_TASK_TIME | BIT_DEVICE | BIT_TRAINING_TRACE),
])
def test_switch_to_enable_flags(switch, flags):
    assert enable_flags_for_switch(switch) == flags


def test_properties_start_stop():
    props = ProfilingProperties.instance()
    assert props is ProfilingProperties.instance()
    saved = (props.options, props.switch, GlobalProfilingWrapper.enable_flags)
    try:
        opts = ProfilingOptions.parse('{"fp_point": "a", "bp_point": "b", "aic_metrics": "Memory"}')
        flags = props.start(opts, events.PROF_TASK_TIME_MASK | events.PROF_AICORE_METRICS_MASK)
        assert flags == BIT_TASK_TIME == GlobalProfilingWrapper.enable_flags
        assert GlobalProfilingWrapper.is_enabled(ProfilingType.kTaskTime)
        assert not GlobalProfilingWrapper.is_enabled(ProfilingType.kDevice)
        assert props.is_profiling and (props.fp_point, props.bp_point, props.aic_metrics) == ("a", "b", "Memory")
        props.start(opts, events.PROF_TASK_TIME_MASK)  # no AI Core metrics bit -> no metrics
        assert props.aic_metrics == ""
        props.stop()
        assert GlobalProfilingWrapper.enable_flags == 0 and not props.is_profiling and props.switch == 0
    finally:
        props.options, props.switch = saved[0], saved[1]
        GlobalProfilingWrapper.set_enable_flags(saved[2])


def test_flags_follow_ge_profiling(tmp_path):
    opts = {"ge.exec.profilingMode": "1", "geprof.clock": "virtual",
            "ge.exec.profilingOptions": json.dumps({"output": str(tmp_path), "training_trace": "on"})}
    assert ge.GEInitialize(opts) == ge.SUCCESS
    assert GlobalProfilingWrapper.enable_flags == BIT_TASK_TIME | BIT_DEVICE | BIT_TRAINING_TRACE
    ge.GEFinalize()
    assert GlobalProfilingWrapper.enable_flags == 0
    assert ge.GEInitialize({}) == ge.SUCCESS  # profiling off: no layer enabled
    assert GlobalProfilingWrapper.enable_flags == 0


# ------------------------------------------------------------------------------ clock
def test_virtual_clock():
    c = SimClock("virtual")
    assert c.mode == "virtual" and c.now_ns() == VIRTUAL_EPOCH_NS
    assert c.spend(1500) == VIRTUAL_EPOCH_NS + 1500 == c.now_ns()
    assert c.wait_until(VIRTUAL_EPOCH_NS + 1000) == VIRTUAL_EPOCH_NS + 1500  # never goes back
    assert c.wait_until(VIRTUAL_EPOCH_NS + 9000) == VIRTUAL_EPOCH_NS + 9000
    c.restart()
    assert c.now_ns() == VIRTUAL_EPOCH_NS
    assert VIRTUAL_EPOCH_NS == 1_767_225_600 * 10 ** 9  # 2026-01-01T00:00:00Z


def test_real_clock_skips_ahead_on_wait():
    c = SimClock("real")
    t0 = c.now_ns()
    assert c.spend(10 ** 12) >= t0 + 10 ** 12  # modelled GE host work takes simulated time in real mode too
    target = c.now_ns() + 5 * 10 ** 9
    assert c.wait_until(target) >= target
    assert c.now_ns() >= target  # the skip is kept
    assert c.now_ns() > time.time_ns() + 10 ** 12  # simulated work moved it ahead of the wall clock
    before = time.time_ns()
    c.restart()  # a new run starts at wall time again: no drift across runs
    # within 0.1 s of the wall clock (not the 1,000 s lead): a VM's wall clock is slewed against
    # perf_counter, which the real clock follows between restarts
    assert before - 10 ** 8 <= c.now_ns() <= time.time_ns() + 10 ** 8


def test_clock_modes():
    assert CLOCK_MODES == ("real", "virtual")
    c = SimClock()
    with pytest.raises(ValueError, match="clock must be one of real, virtual; got 'sim'"):
        c.set_mode("sim")
    c.set_mode("virtual")
    c.spend(10)
    c.set_mode("virtual")  # staying virtual keeps the time
    assert c.now_ns() == VIRTUAL_EPOCH_NS + 10
    c.set_mode("real")
    c.set_mode("virtual")  # entering virtual mode starts at the epoch
    assert c.now_ns() == VIRTUAL_EPOCH_NS


def test_real_clock_paused_counts_only_modelled_costs_and_waits():
    """Inside the toolkit the wall clock does not count; spend and wait_until still advance the
    reading, and the wall clock runs on from there once control is back in the user's code."""
    c = SimClock("real")
    with c.paused():
        t0 = c.now_ns()
        time.sleep(0.05)  # the toolkit's own work: not host time
        assert c.now_ns() == t0
        assert c.spend(1_000) == t0 + 1_000 == c.now_ns()
        assert c.wait_until(t0 + 5_000) == t0 + 5_000 == c.now_ns()
        assert c.wait_until(t0) == t0 + 5_000  # never back
    after = c.now_ns()
    assert t0 + 5_000 <= after < t0 + 5_000 + 20_000_000  # not the 50 ms sleep
    time.sleep(0.05)  # the user's code: host time
    assert c.now_ns() - after >= 50_000_000


def test_pausing_is_re_entrant_and_per_thread():
    """Nested entries pause once; the clock stays paused while any thread is inside."""
    c = SimClock("real")
    inside, release = threading.Event(), threading.Event()

    def toolkit_call_on_a_thread():
        with c.paused():
            inside.set()
            release.wait(5)

    c.enter()
    c.enter()
    c.leave()
    held = c.now_ns()
    time.sleep(0.02)
    assert c.now_ns() == held  # still inside the outer entry
    c.leave()
    worker = threading.Thread(target=toolkit_call_on_a_thread)
    worker.start()
    assert inside.wait(5)
    held = c.now_ns()
    time.sleep(0.02)
    assert c.now_ns() == held  # another thread is inside the toolkit: paused for this one too
    release.set()
    worker.join(5)
    running = c.now_ns()
    time.sleep(0.02)
    assert c.now_ns() - running >= 20_000_000


def test_users_code_inside_the_toolkit_counts():
    """A callback the toolkit runs (run_graph_async's) is the user's code: wall time counts there."""
    c = SimClock("real")
    with c.paused():
        with c.paused():
            t0 = c.now_ns()
            with c.users_code():
                time.sleep(0.03)
            t1 = c.now_ns()
            time.sleep(0.03)
            assert c.now_ns() == t1  # paused again, at the same depth
    assert t1 - t0 >= 30_000_000


def test_mode_changes_while_paused():
    """GEInitialize / GEFinalize switch the mode inside the toolkit: virtual stays virtual on leaving,
    real resumes from wall time."""
    c = SimClock("real")
    with c.paused():
        c.set_mode("virtual")
        assert c.now_ns() == VIRTUAL_EPOCH_NS
    c.spend(7)
    assert c.now_ns() == VIRTUAL_EPOCH_NS + 7  # virtual: paused or not, only modelled costs
    with c.paused():
        c.set_mode("real")
        wall = c.now_ns()
        assert abs(wall - time.time_ns()) < 10 ** 8
        time.sleep(0.02)
        assert c.now_ns() == wall
    c.restart()
    with c.paused():
        c.restart()  # a run opened inside the toolkit starts at wall time
        assert abs(c.now_ns() - time.time_ns()) < 10 ** 8


# ------------------------------------------------------------------------------ enums
def test_reference_enums():
    assert {e.name: e.value for e in events.ProfDataTypeConfig} == {
        "kProfTaskTime": 0x2, "kProfAiCoreMetrics": 0x4, "kProfAicpu": 0x8, "kProfL2cache": 0x10,
        "kProfHccl": 0x20, "kProfTrainingTrace": 0x40, "kProfFwkScheduleL0": 0x200, "kProfTaskTimeL0": 0x800,
        "kProfFwkScheduleL1": 0x01000000}
    assert [e.value for e in events.ProfilingAicoreMetrics] == list(range(8))
    assert events.ProfilingAicoreMetrics.kAicorePipeUtilization == 1
    assert events.PROF_TASK_TIME_MASK == 0x800 and events.PROF_TASK_TIME_L1_MASK == 0x2
    assert events.PROF_TRAINING_TRACE_MASK == 0x40 and events.PROF_OP_DETAIL_MASK == 0x80000000
    assert len(events.AIC_METRICS) == 8 and events.AIC_METRICS[1] == "PipeUtilization"


def test_pmu_event_groups_fit_the_counters():
    from geprof_nb.prof.rawdata import PMU_EVENTS_PER_TASK

    for group in events.PMU_EVENTS.values():
        for family in group.values():
            for names in family.values():
                assert len(names) <= PMU_EVENTS_PER_TASK and len(set(names)) == len(names)
