"""The one clock every reporter reads (what ``MsprofSysCycleTime`` returns).

``real`` mode (the default) measures the user's program: host time is wall
time (wall-clock ns at start plus ``perf_counter_ns`` deltas) while control is
in the user's code, so Python work between ``run_graph`` calls shows up as device
idle, as it would on a real host.  While control is inside the toolkit (every
public entry point of the simulated GE, ACL, mstx, msprof and of a collection:
:func:`toolkit_entry`, :meth:`SimClock.paused`) the wall clock does not count:
building and compiling graphs, simulating the device, reporting records, the
writer's checkpoints, progress updates and step hooks are the simulator's work,
not the simulated host's.  There host time advances only by GE's modelled costs
(:meth:`SimClock.spend`) and by waits for the device (:meth:`SimClock.wait_until`:
the clock *skips ahead* to the device's end instead of sleeping).

Threads: the clock is one host timeline.  While any thread is inside the toolkit
the wall clock is paused for all of them, so no toolkit work is ever counted,
whichever thread does it; user code on another thread at the same moment is not
counted either for that overlap (counting it would count the toolkit's work with
it).  The toolkit's own background thread (msprof's writer) does not pause the
clock: it runs beside the user's code, as msprof's writer does on a real host.

``virtual`` mode makes host time advance only by modelled costs; it restarts
from a fixed epoch at the start of each profiling run, so two runs are
bit-for-bit identical.  Real mode restarts at wall time: within a run the
clock never goes back, across runs it does not drift ahead.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from typing import Callable, Iterator, TypeVar

_perf_counter_ns = time.perf_counter_ns
#: Start of virtual time: 2026-01-01T00:00:00Z in ns.
VIRTUAL_EPOCH_NS = 1_767_225_600_000_000_000
CLOCK_MODES = ("real", "virtual")

_F = TypeVar("_F", bound=Callable)


class SimClock:
    """Host clock in integer ns, real or virtual, that can skip ahead and pause (see the module docstring)."""

    def __init__(self, mode: str = "real") -> None:
        self._lock = threading.Lock()
        self._mode = "real"
        self._wall0 = time.time_ns()
        self._perf0 = time.perf_counter_ns()
        self._skew = 0
        #: ``now_ns() - perf_counter_ns()`` in real mode, kept up to date with ``_skew``: every
        #: host record reads the clock, so a reading is one addition.
        self._offset = self._wall0 - self._perf0
        #: The reading while ``_counting``: virtual time, or real time held while the toolkit runs.
        self._virtual = VIRTUAL_EPOCH_NS
        #: Whether a reading is ``_virtual`` (virtual mode, or real mode paused), not the wall clock.
        self._counting = False
        #: Threads inside the toolkit now (the wall clock is paused while there is one).
        self._inside = 0
        self._depth = threading.local()  # .n: how deep this thread is inside the toolkit
        self.set_mode(mode)

    def _set_skew(self, skew: int) -> None:
        """Change the real-mode lead (caller holds the lock)."""
        self._skew = skew
        self._offset = self._wall0 - self._perf0 + skew

    def _wall_now(self) -> int:
        """The real-mode reading of the wall clock (caller holds the lock)."""
        return _perf_counter_ns() + self._offset

    @property
    def mode(self) -> str:
        return self._mode

    def set_mode(self, mode: str) -> None:
        if mode not in CLOCK_MODES:
            raise ValueError(f"clock must be one of {', '.join(CLOCK_MODES)}; got {mode!r}")
        with self._lock:
            if mode == self._mode and (self._counting or mode == "real"):
                return
            if mode == "virtual":
                self._virtual = VIRTUAL_EPOCH_NS
                self._counting = True
            elif self._inside:  # real mode inside the toolkit: held at the wall time until it leaves
                self._virtual = self._wall_now()
                self._counting = True
            else:
                self._counting = False
            self._mode = mode

    def restart(self) -> None:
        """At the start of a profiling run: virtual mode goes back to the fixed epoch (a reproducible
        run); real mode drops the lead that simulated work built up over earlier runs (device waits
        and modelled host costs move it ahead of the wall clock), so a run starts at wall time."""
        with self._lock:
            if self._mode == "virtual":
                self._virtual = VIRTUAL_EPOCH_NS
                return
            self._set_skew(0)
            if self._counting:
                self._virtual = self._wall_now()

    def now_ns(self) -> int:
        if self._counting:
            return self._virtual
        return _perf_counter_ns() + self._offset

    def spend(self, ns: int) -> int:
        """Account a modelled host cost of ``ns`` (GE's own host work); returns the new time.

        Both modes advance by ``ns``: the simulated GE work takes simulated
        time.  In real mode the user's own Python time comes on top.
        """
        with self._lock:
            if self._counting:
                self._virtual += int(ns)
                return self._virtual
            self._set_skew(self._skew + int(ns))
            return self._wall_now()

    def wait_until(self, t_ns: int) -> int:
        """The host blocks until ``t_ns`` (e.g. a stream sync): skip ahead to it."""
        with self._lock:
            if self._counting:
                self._virtual = max(self._virtual, int(t_ns))
                return self._virtual
            now = self._wall_now()
            if t_ns > now:
                self._set_skew(self._skew + int(t_ns) - now)
                now = int(t_ns)
            return now

    # ------------------------------------------------------------------ pausing
    def enter(self) -> None:
        """Control enters the toolkit on this thread (re-entrant; pair with :meth:`leave`)."""
        local = self._depth
        depth = getattr(local, "n", 0)
        local.n = depth + 1
        if depth == 0:
            with self._lock:
                self._inside += 1
                if self._inside == 1 and not self._counting:  # real mode: hold the reading here
                    self._virtual = self._wall_now()
                    self._counting = True

    def leave(self) -> None:
        """Control goes back to the user's code on this thread: the wall clock runs again from the
        held reading (plus what was spent or waited meanwhile) once no thread is inside."""
        local = self._depth
        local.n -= 1
        if local.n == 0:
            with self._lock:
                self._inside -= 1
                if self._inside == 0 and self._mode == "real":
                    self._set_skew(self._virtual - (_perf_counter_ns() + self._wall0 - self._perf0))
                    self._counting = False

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The toolkit's own work: in real mode its wall time does not advance the clock (see the
        module docstring); modelled costs and device waits inside still do.  Re-entrant."""
        self.enter()
        try:
            yield
        finally:
            self.leave()

    @contextlib.contextmanager
    def users_code(self) -> Iterator[None]:
        """Inside the toolkit, run the user's code (a callback it was handed): the wall clock counts
        while it runs, as between the toolkit's calls."""
        local = self._depth
        depth = getattr(local, "n", 0)
        if depth:
            local.n = 1
            self.leave()
        try:
            yield
        finally:
            if depth:
                self.enter()
                local.n = depth


#: The process-wide clock.
clock = SimClock()


def toolkit_entry(fn: _F) -> _F:
    """Mark ``fn`` as a public entry point of the toolkit: the process clock is paused while it runs
    (:meth:`SimClock.paused`), so none of the toolkit's own wall time is the user's host time."""

    @functools.wraps(fn)
    def entry(*args, **kwargs):
        clock.enter()
        try:
            return fn(*args, **kwargs)
        finally:
            clock.leave()

    entry.__toolkit_entry__ = True
    return entry  # type: ignore[return-value]


def is_toolkit_entry(fn: Callable) -> bool:
    """Whether ``fn`` (a function, or a method looked up on its class) is a :func:`toolkit_entry`."""
    return bool(getattr(fn, "__toolkit_entry__", False))
