"""GE ``Status`` codes and the per-thread error message behind ``GEGetErrorMsg``.

Values are the real ones: ``SUCCESS = 0``, ``FAILED = 0xFFFFFFFF`` and the
``GE_ERRORNO`` family (``inc/framework/common/ge_inner_error_codes.h``:
host, error code, SYSID_GE = 8, module, value), e.g. ``PARAM_INVALID`` is
1343225857.  The C API returns a bare ``uint32``; here a ``Status`` is an
``int`` that also prints its name, so a failed call shown in a notebook says
what went wrong.
"""

from __future__ import annotations

import logging
import threading

_log = logging.getLogger("geprof_nb.ge")


def _ge_errorno(module: int, value: int) -> int:
    """``GE_ERRORNO(RT_HOST, ERROR_CODE, COMMON_LEVEL, SYSID_GE, module, value)``."""
    return (0b01 << 30) | (0b01 << 28) | (0 << 25) | (8 << 17) | (module << 12) | (value & 0xFFF)


class Status(int):
    """A GE status code (an ``int``) that knows its name."""

    _names: dict[int, str] = {}

    def __new__(cls, value: int, name: str | None = None) -> "Status":
        obj = super().__new__(cls, value)
        if name is not None:
            cls._names[int(value)] = name
        return obj

    @property
    def name(self) -> str:
        return self._names.get(int(self), f"0x{int(self):08X}")

    def __repr__(self) -> str:
        return f"<Status {self.name} ({int(self)})>"

    __str__ = __repr__


SUCCESS = Status(0, "SUCCESS")
FAILED = Status(0xFFFFFFFF, "FAILED")
# common module (0)
MEMALLOC_FAILED = Status(_ge_errorno(0, 0), "MEMALLOC_FAILED")
PARAM_INVALID = Status(_ge_errorno(0, 1), "PARAM_INVALID")  # 1343225857
INTERNAL_ERROR = Status(_ge_errorno(0, 4), "INTERNAL_ERROR")
UNSUPPORTED = Status(_ge_errorno(0, 100), "UNSUPPORTED")
# client module (1)
GE_CLI_GE_ALREADY_INITIALIZED = Status(_ge_errorno(1, 10), "GE_CLI_GE_ALREADY_INITIALIZED")
GE_CLI_GE_NOT_INITIALIZED = Status(_ge_errorno(1, 11), "GE_CLI_GE_NOT_INITIALIZED")
# graph module (4)
GE_GRAPH_GRAPH_NOT_EXIST = Status(_ge_errorno(4, 2), "GE_GRAPH_GRAPH_NOT_EXIST")
GE_GRAPH_GRAPH_ALREADY_EXIST = Status(_ge_errorno(4, 3), "GE_GRAPH_GRAPH_ALREADY_EXIST")
GE_GRAPH_INFERSHAPE_FAILED = Status(_ge_errorno(4, 30), "GE_GRAPH_INFERSHAPE_FAILED")
GE_GRAPH_OPTIONS_INVALID = Status(_ge_errorno(4, 51), "GE_GRAPH_OPTIONS_INVALID")

_error = threading.local()


def set_error(status: Status, message: str, log: bool = True) -> Status:
    """Record ``message`` for ``GEGetErrorMsg`` and log it (GELOGE; not if ``log`` is False: it was said on
    stderr already, where Python's logging would say it again); return ``status``."""
    _error.message = f"[{status.name}] {message}"
    if log:
        _log.error("%s", message)
    return status


def GEGetErrorMsg() -> str:  # noqa: N802 - C API name
    """Why the last GE call on this thread failed ("" when it succeeded: every call that succeeds
    clears the message, so a stale one never describes a later success)."""
    return getattr(_error, "message", "")


def clear_error() -> None:
    _error.message = ""
