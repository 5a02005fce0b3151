"""``ge.mstx``: user markers and ranges (msproftx / mstx), reported through msprof.

With msproftx off each call costs one bit test.  Ranges may span threads:
``range_end`` takes the id ``range_start`` returned.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import warnings
from typing import Iterator

import numpy as np

from ..prof import events, msprof, rawdata
from ..prof.clock import clock, toolkit_entry
from ..prof.properties import ProfilingProperties
from ..prof.threads import native_thread_id

DEFAULT_DOMAIN = "default"
_ids = itertools.count(1)
_open: dict[int, tuple[int, str, str, int]] = {}  # id -> (start, message, domain, msprof run serial)
_props = ProfilingProperties.instance()


def _report(start: int, end: int, event_type: int, message: str, domain: str, mark_id: int) -> None:
    rec = np.zeros(1, rawdata.MSTX_DTYPE)
    rec[0] = (start, end, os.getpid(), native_thread_id(), 0, event_type, msprof.lib.get_hash_id(message),
              msprof.lib.get_hash_id(domain), mark_id)
    msprof.lib.report_block("mstx", rec)


@toolkit_entry
def mark(message: str, domain: str = DEFAULT_DOMAIN) -> None:
    """An instant marker."""
    if not _props.switch & events.PROF_MSPROFTX_MASK:
        return
    now = clock.now_ns()
    _report(now, now, rawdata.MSTX_MARKER, str(message), domain, next(_ids))


@toolkit_entry
def range_start(message: str, domain: str = DEFAULT_DOMAIN) -> int:
    """Open a range; returns its id (0 when msproftx is off)."""
    if not _props.switch & events.PROF_MSPROFTX_MASK:
        return 0
    range_id = next(_ids)
    _open[range_id] = (clock.now_ns(), str(message), domain, msprof.lib.run_serial)
    return range_id


@toolkit_entry
def range_end(range_id: int) -> None:
    """Close a range opened by :func:`range_start`."""
    if not range_id:
        return
    opened = _open.pop(range_id, None)
    if opened is None:
        warnings.warn(f"mstx.range_end({range_id}): no open range has this id", stacklevel=2)
        return
    if not _props.switch & events.PROF_MSPROFTX_MASK:  # a range that ends after Stop is not collected
        return
    start, message, domain, run_serial = opened
    if run_serial != msprof.lib.run_serial:  # its start is on another run's clock: no duration here
        text = (f"mstx range {message!r} (id {range_id}) was opened in an earlier profiling run and ended "
                "in this one: not recorded")
        warnings.warn(text, stacklevel=2)
        msprof.lib.add_note(text)
        return
    _report(start, clock.now_ns(), rawdata.MSTX_RANGE, message, domain, range_id)


@contextlib.contextmanager
def range(message: str, domain: str = DEFAULT_DOMAIN) -> Iterator[int]:  # noqa: A001 - the mstx name
    """``with ge.mstx.range("data loading"): ...``"""
    range_id = range_start(message, domain)
    try:
        yield range_id
    finally:
        range_end(range_id)
