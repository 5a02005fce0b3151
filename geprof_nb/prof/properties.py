"""Which profiling layers are on: ``ProfilingType`` bits, ``GlobalProfilingWrapper``
and the ``ProfilingProperties`` singleton that GE consults while it compiles and runs.

A disabled layer costs one bit test: hot paths read
``GlobalProfilingWrapper.enable_flags & BIT_*`` directly.
"""

from __future__ import annotations

import threading
from enum import IntEnum

from . import events
from .options import ProfilingOptions


class ProfilingType(IntEnum):
    """``gert::ProfilingType``; the enable bit of type ``t`` is ``1 << t``."""

    kCannHost = 0
    kDevice = 1
    kGeHost = 2
    kTrainingTrace = 3
    kTaskTime = 4
    kMemory = 5
    kCannHostL1 = 6
    kNum = 7


BIT_CANN_HOST = 1 << ProfilingType.kCannHost
BIT_DEVICE = 1 << ProfilingType.kDevice
BIT_GE_HOST = 1 << ProfilingType.kGeHost
BIT_TRAINING_TRACE = 1 << ProfilingType.kTrainingTrace
BIT_TASK_TIME = 1 << ProfilingType.kTaskTime
BIT_MEMORY = 1 << ProfilingType.kMemory
BIT_CANN_HOST_L1 = 1 << ProfilingType.kCannHostL1
BIT_ALL = (1 << ProfilingType.kNum) - 1


def enable_flags_for_switch(switch: int) -> int:
    """Map an msprof switch to ProfilingType bits, as ``ProfilingManager::ProfStartProfiling`` does."""
    flags = 0
    if switch & events.PROF_TASK_TIME_MASK:
        flags |= BIT_TASK_TIME
    if switch & events.PROF_TASK_TIME_L1_MASK:
        flags |= BIT_DEVICE
    if switch & events.PROF_TASK_MEMORY_MASK:
        flags |= BIT_MEMORY
    if switch & events.PROF_TRAINING_TRACE_MASK:
        flags |= BIT_TRAINING_TRACE
    if switch & events.PROF_GE_API_L0_MASK:
        flags |= BIT_CANN_HOST
    if switch & events.PROF_GE_API_L1_MASK:  # host scheduling of dynamic-shape ops: also the GE host profiler
        flags |= BIT_CANN_HOST | BIT_CANN_HOST_L1 | BIT_GE_HOST
    return flags


class GlobalProfilingWrapper:
    """Process-wide enable flags (``gert::GlobalProfilingWrapper``)."""

    enable_flags: int = 0

    @classmethod
    def is_enabled(cls, profiling_type: int) -> bool:
        return bool(cls.enable_flags & (1 << profiling_type))

    @classmethod
    def set_enable_flags(cls, flags: int) -> None:
        cls.enable_flags = int(flags)


class ProfilingProperties:
    """What the current collection asked for (options, switch, FP/BP points)."""

    _instance: "ProfilingProperties | None" = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.options: ProfilingOptions | None = None
        self.switch = 0
        #: Flags on regardless of msprof (BIT_GE_HOST when GE_PROFILING_TO_STD_OUT is set).
        self.env_flags = 0

    @classmethod
    def instance(cls) -> "ProfilingProperties":
        if cls._instance is None:
            with cls._lock:
                if cls._instance is None:
                    cls._instance = cls()
        return cls._instance

    @property
    def is_profiling(self) -> bool:
        return GlobalProfilingWrapper.enable_flags != 0

    @property
    def aic_metrics(self) -> str:
        if self.options is None or not (self.switch & events.PROF_AICORE_METRICS_MASK):
            return ""
        return self.options.aic_metrics

    @property
    def fp_point(self) -> str:
        return self.options.fp_point if self.options else ""

    @property
    def bp_point(self) -> str:
        return self.options.bp_point if self.options else ""

    def start(self, options: ProfilingOptions, switch: int) -> int:
        """Apply a START command; returns the new enable flags."""
        self.options = options
        self.switch = switch
        flags = enable_flags_for_switch(switch) | self.env_flags
        GlobalProfilingWrapper.set_enable_flags(flags)
        return flags

    def stop(self) -> None:
        self.switch = 0
        GlobalProfilingWrapper.set_enable_flags(self.env_flags)

    def set_env_flags(self, flags: int) -> None:
        """Flags GE turns on by itself (environment), kept across START/STOP."""
        self.env_flags = flags
        GlobalProfilingWrapper.set_enable_flags(enable_flags_for_switch(self.switch) | flags)
