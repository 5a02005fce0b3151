"""The one clock every reporter reads (what ``MsprofSysCycleTime`` returns).

Host time is real by default: wall-clock ns at start plus ``perf_counter_ns``
deltas, so Python work between ``run_graph`` calls shows up as device idle.
The device is simulated, so when the host waits for it (a synchronous
``run_graph``) the clock *skips ahead* to the device's end instead of sleeping.

``virtual`` mode makes host time advance only by modelled costs; it restarts
from a fixed epoch at the start of each profiling run, so two runs are
bit-for-bit identical.  Real mode restarts at wall time: within a run the
clock never goes back, across runs it does not drift ahead.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Iterator

_perf_counter_ns = time.perf_counter_ns
#: Start of virtual time: 2026-01-01T00:00:00Z in ns.
VIRTUAL_EPOCH_NS = 1_767_225_600_000_000_000
CLOCK_MODES = ("real", "virtual")


class SimClock:
    """Host clock in integer ns, real or virtual, that can skip ahead."""

    def __init__(self, mode: str = "real") -> None:
        self._lock = threading.Lock()
        self._mode = "real"
        self._is_virtual = False
        self._wall0 = time.time_ns()
        self._perf0 = time.perf_counter_ns()
        self._skew = 0
        #: ``now_ns() - perf_counter_ns()`` in real mode, kept up to date with ``_skew``: every
        #: host record reads the clock, so a reading is one addition.
        self._offset = self._wall0 - self._perf0
        self._virtual = VIRTUAL_EPOCH_NS
        self.set_mode(mode)

    def _set_skew(self, skew: int) -> None:
        """Change the real-mode lead (caller holds the lock)."""
        self._skew = skew
        self._offset = self._wall0 - self._perf0 + skew

    @property
    def mode(self) -> str:
        return self._mode

    def set_mode(self, mode: str) -> None:
        if mode not in CLOCK_MODES:
            raise ValueError(f"clock must be one of {', '.join(CLOCK_MODES)}; got {mode!r}")
        with self._lock:
            if mode == "virtual" and self._mode != "virtual":
                self._virtual = VIRTUAL_EPOCH_NS
            self._mode = mode
            self._is_virtual = mode == "virtual"

    def restart(self) -> None:
        """At the start of a profiling run: virtual mode goes back to the fixed epoch (a reproducible
        run); real mode drops the lead that simulated work built up over earlier runs (device waits
        and modelled host costs move it ahead of the wall clock), so a run starts at wall time."""
        with self._lock:
            if self._mode == "virtual":
                self._virtual = VIRTUAL_EPOCH_NS
            else:
                self._set_skew(0)

    def now_ns(self) -> int:
        if self._is_virtual:
            return self._virtual
        return _perf_counter_ns() + self._offset

    def spend(self, ns: int) -> int:
        """Account a modelled host cost of ``ns`` (GE's own host work); returns the new time.

        Both modes advance by ``ns``: the simulated GE work takes simulated
        time.  In real mode the user's own Python time comes on top.
        """
        with self._lock:
            if self._mode == "virtual":
                self._virtual += int(ns)
                return self._virtual
            self._set_skew(self._skew + int(ns))
        return self.now_ns()

    def wait_until(self, t_ns: int) -> int:
        """The host blocks until ``t_ns`` (e.g. a stream sync): skip ahead to it."""
        with self._lock:
            if self._mode == "virtual":
                self._virtual = max(self._virtual, int(t_ns))
                return self._virtual
            now = _perf_counter_ns() + self._offset
            if t_ns > now:
                self._set_skew(self._skew + int(t_ns) - now)
                now = int(t_ns)
            return now

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Work of the simulator that the simulated host does not do (computing and reporting the
        other ranks of a cluster): in real mode its wall time does not advance the clock, so it does
        not show as device idle time."""
        if self._is_virtual:
            yield
            return
        t = _perf_counter_ns()
        try:
            yield
        finally:
            with self._lock:
                self._set_skew(self._skew - (_perf_counter_ns() - t))


#: The process-wide clock.
clock = SimClock()
