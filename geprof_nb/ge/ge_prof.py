"""The dynamic profiling C API of ``ge/ge_prof.h``, mirrored in Python.

``aclgrphProfInit(path)`` -> ``aclgrphProfCreateConfig(...)`` ->
``aclgrphProfStart(config)`` -> run -> ``aclgrphProfStop(config)`` ->
``aclgrphProfFinalize()`` -> ``aclgrphProfDestroyConfig(config)``.

Validation and return codes are msprof's (reference §1.4): a call out of order
returns ``FAILED`` (``GEGetErrorMsg()`` says why) and changes nothing; a Stop
with another data type config than its Start returns
``ACL_ERROR_INVALID_PROFILING_CONFIG`` (100010); a bad device list gives no
config (``None``).  Start and Stop reach the runtime through msprof's control
callback, exactly like option-driven profiling, so data is collected only
between them, also when they are called in the middle of a training loop.
"""

from __future__ import annotations

import numbers
import os
import threading
from dataclasses import dataclass, field
from typing import Sequence

from ..prof import events, msprof
from ..prof.clock import toolkit_entry
from ..prof.events import ProfDataTypeConfig, ProfilingAicoreMetrics
from ..prof.run_opener import OpenRun, described, open_run
from . import status as st
from .session import device_runtime, is_initialized

ACL_ERROR_INVALID_PROFILING_CONFIG = st.Status(100010, "ACL_ERROR_INVALID_PROFILING_CONFIG")
ACL_ERROR_FEATURE_UNSUPPORTED = st.Status(200006, "ACL_ERROR_FEATURE_UNSUPPORTED")
MSVP_MAX_DEV_NUM = 64
MAX_PATH_LENGTH = 4096

#: aclgrphProfStart accepts these switch bits; anything else is "not a supported switch".
SUPPORTED_SWITCH = (sum(int(b) for b in ProfDataTypeConfig) | events.PROF_ACL_API_MASK | events.PROF_MSPROFTX_MASK
                    | events.PROF_RUNTIME_API_MASK | events.PROF_TASK_MEMORY_MASK)
#: ProfilingAicoreMetrics -> profilingOptions aic_metrics name (None: not available on these chips).
AIC_METRICS_NAMES = {
    ProfilingAicoreMetrics.kAicoreArithmeticUtilization: "ArithmeticUtilization",
    ProfilingAicoreMetrics.kAicorePipeUtilization: "PipeUtilization",
    ProfilingAicoreMetrics.kAicoreMemory: "Memory",
    ProfilingAicoreMetrics.kAicoreMemoryL0: "MemoryL0",
    ProfilingAicoreMetrics.kAicoreResourceConflictRatio: "ResourceConflictRatio",
    ProfilingAicoreMetrics.kAicoreMemoryUB: "MemoryUB",
    ProfilingAicoreMetrics.kAicoreL2Cache: "L2Cache",
    ProfilingAicoreMetrics.kAicorePipelineExecuteUtilization: None,
}


@dataclass(eq=False)
class aclgrphProfConfig:  # noqa: N801 - the C type name
    """``aclgrphProfConfig``: devices, AI Core metrics group and data type bits."""

    dev_ids: tuple[int, ...]
    aicore_metrics: ProfilingAicoreMetrics
    data_type_config: int
    destroyed: bool = field(default=False, repr=False)


class _ProfApiState:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.inited = False
        self.path = ""
        self.started: aclgrphProfConfig | None = None
        self.started_switch = 0
        #: aic_metrics of this run's first window: one run programs the PMU one way.
        self.run_metrics: ProfilingAicoreMetrics | None = None


_state = _ProfApiState()


def _fail(message: str, status: int = st.FAILED, log: bool = True) -> st.Status:
    return st.set_error(st.Status(status), message, log)


def _another_run(run: OpenRun) -> st.Status:
    return _fail(f"aclgrphProfInit: another profiling mode is collecting into {run.run_dir} (opened by "
                 f"{run.opened_by}); the api mode cannot start; {run.finish} "
                 f"(ACL_ERROR_PROF_ALREADY_RUN {msprof.ACL_ERROR_PROF_ALREADY_RUN})")


@toolkit_entry
def aclgrphProfInit(profiler_path: str | None, length: int | None = None) -> st.Status:  # noqa: N802
    """Open a profiling run under ``profiler_path`` (collection starts with aclgrphProfStart)."""
    with _state.lock:
        if isinstance(profiler_path, os.PathLike):  # a pathlib.Path stands for its text, as char* would
            profiler_path = os.fspath(profiler_path)
        if profiler_path is None or profiler_path == "":
            return _fail("aclgrphProfInit: profiler_path is empty; accepted: a directory path")
        if not isinstance(profiler_path, str):
            return _fail(f"aclgrphProfInit: profiler_path must be a str or os.PathLike, got "
                         f"{type(profiler_path).__name__}; accepted: a directory path")
        if "\0" in profiler_path:
            return _fail(f"aclgrphProfInit: profiler_path {profiler_path!r} contains a NUL byte; accepted: a "
                         "directory path without NUL bytes")
        path_bytes = len(profiler_path.encode("utf-8"))  # what strlen() counts in the C API
        if length is not None and length != path_bytes:
            return _fail(f"aclgrphProfInit: length {length} differs from the path length {path_bytes} "
                         "(strlen: UTF-8 bytes, not characters)")
        if path_bytes > MAX_PATH_LENGTH:
            return _fail(f"aclgrphProfInit: the path is longer than {MAX_PATH_LENGTH} bytes")
        if not is_initialized():
            return _fail("aclgrphProfInit: GE is not initialised; call ge.GEInitialize(options) first")
        if _state.inited:
            return _fail("aclgrphProfInit: Acl profiling is already inited; call aclgrphProfFinalize first")
        run = open_run(msprof.lib)
        if run is not None:
            return _another_run(run)
        try:
            msprof.lib.init(profiler_path, {"output": profiler_path}, mode="api")
        except msprof.RunAlreadyOpen as exc:  # opened by another thread since the test above
            return _another_run(described(exc.run_dir, exc.mode))
        except (OSError, UnicodeError) as exc:
            return _fail(f"aclgrphProfInit: cannot use {profiler_path!r}: {exc}; accepted: a directory that can "
                         "be created and written")
        _state.inited = True
        _state.path = profiler_path
        st.clear_error()
        return st.SUCCESS


@toolkit_entry
def aclgrphProfCreateConfig(deviceid_list: Sequence[int] | None, *args, device_nums: int | None = None,  # noqa: N802
                            aicore_metrics: int | None = None, aicore_events: object = None,
                            data_type_config: int | None = None) -> aclgrphProfConfig | None:
    """A config for devices, a ``ProfilingAicoreMetrics`` value and ``ProfDataTypeConfig`` bits, or ``None``.

    Call it as in C, ``(deviceid_list, device_nums, aicore_metrics, aicore_events, data_type_config)``,
    or shortly as ``(device_ids, aicore_metrics, data_type_config)``.  As msprof does, task time L1
    (``kProfTaskTime``) also switches on task time L0 (``kProfTaskTimeL0``): L1 adds to L0's data.
    """
    if len(args) == 4:
        device_nums, aicore_metrics, aicore_events, data_type_config = args
    elif len(args) == 2:
        aicore_metrics, data_type_config = args
    elif args:
        _fail(f"aclgrphProfCreateConfig: expected 3 or 5 arguments, got {1 + len(args)}")
        return None
    try:
        ids = list(deviceid_list) if deviceid_list is not None else None
    except TypeError:
        _fail(f"aclgrphProfCreateConfig: deviceid_list must be a list of device ids, got "
              f"{type(deviceid_list).__name__}")
        return None
    runtime = device_runtime()
    device_count = 1 if runtime is None else runtime.device_count
    problem = ""
    if not ids:
        problem = "deviceid_list is empty"
    elif device_nums is not None and device_nums != len(ids):
        problem = f"device_nums {device_nums} differs from the list length {len(ids)}"
    elif len(ids) > MSVP_MAX_DEV_NUM:
        problem = f"{len(ids)} devices exceed the maximum of {MSVP_MAX_DEV_NUM}"
    elif any(isinstance(d, bool) or not isinstance(d, numbers.Integral) for d in ids):
        problem = f"device ids {ids} must be integers (not bool, str or float) in 0..{device_count - 1}"
    elif len(set(ids)) != len(ids):  # before the count: [0, 0] asks for one device twice, not for two
        problem = f"device ids {ids} contain duplicates"
    elif len(ids) > device_count:
        problem = f"{len(ids)} devices requested but only {device_count} present"
    elif any(d < 0 or d >= device_count for d in ids):
        problem = f"device ids {ids} must be in 0..{device_count - 1}"
    elif aicore_events is not None:
        problem = "aicore_events is reserved; only None is supported"
    elif (isinstance(aicore_metrics, bool) or not isinstance(aicore_metrics, int)
          or aicore_metrics not in AIC_METRICS_NAMES):
        problem = f"aicore_metrics {aicore_metrics!r} is not a ProfilingAicoreMetrics value (0..7)"
    elif AIC_METRICS_NAMES[ProfilingAicoreMetrics(aicore_metrics)] is None:
        problem = "kAicorePipelineExecuteUtilization is only available on Atlas 200I/500 A2"
    elif runtime is not None and (chip_problem := _chip_problem(runtime.preset, aicore_metrics)):
        problem = chip_problem
    elif isinstance(data_type_config, bool) or not isinstance(data_type_config, int) or data_type_config < 0:
        problem = f"data_type_config must be a non-negative int of ProfDataTypeConfig bits, got {data_type_config!r}"
    if problem:
        _fail(f"aclgrphProfCreateConfig: {problem}")
        return None
    st.clear_error()
    bits = int(data_type_config)
    if bits & events.PROF_TASK_TIME_L1_MASK:
        bits |= events.PROF_TASK_TIME_MASK
    return aclgrphProfConfig(tuple(int(d) for d in ids), ProfilingAicoreMetrics(aicore_metrics), bits)


def _chip_problem(preset, aicore_metrics: int) -> str:
    """Why the device's AI Core counters cannot take ``aicore_metrics`` ("" if they can)."""
    metric = ProfilingAicoreMetrics(aicore_metrics)
    if not events.lacks_counter_group(AIC_METRICS_NAMES[metric], preset.chip_family):
        return ""
    groups = events.aic_metrics_on(preset.chip_family)
    return (f"{metric.name} is not available on {preset.name}; accepted: "
            + ", ".join(m.name for m, name in AIC_METRICS_NAMES.items() if name in groups))


def _usable(config: object) -> bool:
    """A live config: not None (C's nullptr), not destroyed, and a config at all (a Python caller
    may pass anything; it gets the null-config error, not an AttributeError)."""
    return isinstance(config, aclgrphProfConfig) and not config.destroyed


@toolkit_entry
def aclgrphProfDestroyConfig(profiler_config: aclgrphProfConfig | None) -> st.Status:  # noqa: N802
    if not _usable(profiler_config):
        return _fail("aclgrphProfDestroyConfig: the config is null or already destroyed")
    profiler_config.destroyed = True
    st.clear_error()  # as every other aclgrphProf* call does on success
    return st.SUCCESS


def _options_for(config: aclgrphProfConfig) -> dict[str, str]:
    """The profilingOptions equivalent of a config (what the runtime sees at START)."""
    bits = config.data_type_config
    task = "l1" if bits & events.PROF_TASK_TIME_L1_MASK else ("l0" if bits & events.PROF_TASK_TIME_MASK else "off")
    ge_api = "l1" if bits & events.PROF_GE_API_L1_MASK else ("l0" if bits & events.PROF_GE_API_L0_MASK else "off")
    on = {True: "on", False: "off"}
    return {
        "output": _state.path, "task_trace": task, "ge_api": ge_api,
        "training_trace": on[bool(bits & events.PROF_TRAINING_TRACE_MASK)],
        "hccl": on[bool(bits & events.PROF_HCCL_TRACE_MASK)], "aicpu": on[bool(bits & events.PROF_AICPU_TRACE_MASK)],
        "l2": on[bool(bits & events.PROF_L2CACHE_MASK)], "msproftx": on[bool(bits & events.PROF_MSPROFTX_MASK)],
        "runtime_api": on[bool(bits & events.PROF_RUNTIME_API_MASK)],
        "task_memory": on[bool(bits & events.PROF_TASK_MEMORY_MASK)],
        "aic_metrics": AIC_METRICS_NAMES[config.aicore_metrics] or "",
    }


@toolkit_entry
def aclgrphProfStart(profiler_config: aclgrphProfConfig | None) -> st.Status:  # noqa: N802
    """Start collecting what the config asks for, from now on."""
    with _state.lock:
        if not _usable(profiler_config):
            return _fail("aclgrphProfStart: the config is null or destroyed; create one with aclgrphProfCreateConfig")
        if not _state.inited:
            return _fail("aclgrphProfStart: Acl profiling api mode is not inited; call aclgrphProfInit first "
                         f"(ACL_ERROR_PROF_NOT_RUN {msprof.ACL_ERROR_PROF_NOT_RUN})")
        if _state.started is not None:
            return _fail("aclgrphProfStart: profiling is already started; call aclgrphProfStop first")
        unsupported = profiler_config.data_type_config & ~SUPPORTED_SWITCH
        if unsupported:
            return _fail(f"aclgrphProfStart: dataTypeConfig:0x{profiler_config.data_type_config:x}, "
                         f"supported switch is:0x{SUPPORTED_SWITCH:x}")
        if _state.run_metrics is not None and profiler_config.aicore_metrics != _state.run_metrics:
            return _fail(f"aclgrphProfStart: aicore_metrics {profiler_config.aicore_metrics.name} differs from "
                         f"{_state.run_metrics.name} used earlier in this run; one aclgrphProfInit..Finalize "
                         "flow programs the AI Core PMU once: finalize and init again to change metrics")
        switch = profiler_config.data_type_config | events.PROF_OP_DETAIL_MASK
        if profiler_config.data_type_config & events.PROF_TASK_TIME_L1_MASK:  # L1 collects the config's metrics
            switch |= events.PROF_AICORE_METRICS_MASK
        msprof.lib.start(switch, profiler_config.dev_ids, options=_options_for(profiler_config))
        _state.started = profiler_config
        _state.started_switch = profiler_config.data_type_config
        _state.run_metrics = profiler_config.aicore_metrics
        st.clear_error()
        return st.SUCCESS


@toolkit_entry
def aclgrphProfStop(profiler_config: aclgrphProfConfig | None) -> st.Status:  # noqa: N802
    """Stop collecting; the config's data types must be the ones Start used."""
    with _state.lock:
        if not _usable(profiler_config):
            return _fail("aclgrphProfStop: the config is null or destroyed")
        if not _state.inited or _state.started is None:
            return _fail("aclgrphProfStop: profiling is not started; call aclgrphProfStart first")
        if profiler_config.data_type_config != _state.started_switch:
            return _fail(f"aclgrphProfStop: DataTypeConfig stop: {profiler_config.data_type_config:x} different from "
                         f"start: {_state.started_switch:x}", ACL_ERROR_INVALID_PROFILING_CONFIG)
        msprof.lib.stop()
        _state.started = None
        st.clear_error()
        return st.SUCCESS


@toolkit_entry
def aclgrphProfFinalize() -> st.Status:  # noqa: N802
    """Close the run (stopping collection first if needed)."""
    with _state.lock:
        if not _state.inited:
            return _fail("aclgrphProfFinalize: Acl profiling api mode is not inited")
        finalized = msprof.lib.finalize()
        _state.inited = False
        _state.started = None
        _state.run_metrics = None
        problem = msprof.lib.write_problem if finalized is not None else ""
        if problem:  # finalised, but not everything reached the disk: never a silent SUCCESS
            return _fail(f"aclgrphProfFinalize: {problem.removeprefix('geprof: ')}", log=False)  # msprof said it
        st.clear_error()
        return st.SUCCESS


def api_mode_active() -> bool:
    """True between aclgrphProfInit and aclgrphProfFinalize."""
    return _state.inited
