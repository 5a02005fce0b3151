"""Scoped reporters, as GE's RAII macros are:

* ``profiling_scope(element, event)`` — ``PROFILING_SCOPE`` / ``ScopeProfiler``:
  host-layer records into the :class:`GlobalProfiler` ring buffer (kGeHost);
* :class:`AclProfilingReporter` — ``ACL_PROFILING_REG``: one ``MsprofApi`` at
  level acl per ACL call (msprof's acl api switch);
* :class:`GraphProfilingReporter` — ``GRAPH_PROFILING_REG``: one ``MsprofApi``
  at level acl per Graph API call (kTaskTime).

A layer that is off costs one bit test: the disabled scope is a shared
do-nothing context manager.
"""

from __future__ import annotations

from typing import Any

from . import events, msprof
from .clock import clock
from .host_profiler import global_profiler
from .properties import BIT_GE_HOST, BIT_TASK_TIME, GlobalProfilingWrapper, ProfilingProperties
from .rawdata import ReportLevel
from .threads import native_thread_id


class _Disabled:
    """What a scope is when its layer is off: enters and exits doing nothing."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


DISABLED = _Disabled()


# Bound once: an enabled scope is on GE's per-node host path, and a disabled ACL reporter is on every
# ACL call, so each lookup saved counts.
_now_ns = clock.now_ns
_record_scope = global_profiler.record_scope
_props = ProfilingProperties.instance()
_ACL_API_MASK = events.PROF_ACL_API_MASK


class _HostScope:
    __slots__ = ("element", "event", "start")

    def __init__(self, element: str, event: int) -> None:
        self.element = element
        self.event = event

    def __enter__(self) -> "_HostScope":
        self.start = _now_ns()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        _record_scope(self.element, self.event, self.start, _now_ns())


def profiling_scope(element: str, event: int) -> Any:
    """``with profiling_scope(node_name, ProfilingEvent.kInferShape): ...`` records the block's span."""
    if not GlobalProfilingWrapper.enable_flags & BIT_GE_HOST:
        return DISABLED
    return _HostScope(element, event)


class _ApiScope:
    __slots__ = ("type", "item_id", "begin")

    def __init__(self, api_type: int, item_id: int) -> None:
        self.type = api_type
        self.item_id = item_id

    def __enter__(self) -> "_ApiScope":
        self.begin = clock.now_ns()
        return self

    def __exit__(self, *exc: Any) -> None:
        msprof.MsprofReportApi(True, ReportLevel.ACL, self.type, native_thread_id(), self.begin,
                               clock.now_ns(), self.item_id)


def AclProfilingReporter(api_id: int, item_id: int = 0) -> Any:  # noqa: N802 - GE's class name
    """Time an ACL API call (its ``AclProfType``) when msprof collects acl api data."""
    if not _props.switch & _ACL_API_MASK:
        return DISABLED
    return _ApiScope(int(api_id), item_id)


def GraphProfilingReporter(api_id: int, item_id: int = 0) -> Any:  # noqa: N802 - GE's class name
    """Time a Graph API call (its ``GeProfInfoType``) when task time is collected."""
    if not GlobalProfilingWrapper.enable_flags & BIT_TASK_TIME:
        return DISABLED
    return _ApiScope(int(api_id), item_id)
