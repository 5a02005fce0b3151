"""Progress of a long ``%%geprof`` cell, and Ctrl-C that keeps what was collected.

:class:`Progress` shows steps done, how far the simulated device timeline has
advanced since the cell started (not a step time) and the records reported to
msprof so far (the device's task logs reach msprof in batches of steps, so that
count grows in steps).  In a notebook kernel it is an ipywidgets line (an
``IntProgress`` when the number of steps is known from a step schedule, and an
``HTML`` text); in a terminal (no kernel) a text line on stderr rewritten with
``\\r``.  Updates are throttled by wall time (:data:`UPDATE_INTERVAL_S`, at most
about 5 per second, never per step), nothing is shown for a cell shorter than
one interval, and at the end the widget is closed and its output replaced by a
static text/plain final line (the text line is ended with a newline), which has
the run's step figure, the one the explorer's headline leads with.

:class:`InterruptGuard` makes a step atomic with respect to Ctrl-C: while a
step runs on the main thread, SIGINT is deferred to the end of the step, so an
interrupt never leaves a half-reported step behind; between steps it raises at
once.  A second Ctrl-C during the same step raises at once (the escape hatch
for a step that takes too long).
"""

from __future__ import annotations

import html
import signal
import sys
import threading
import time
from typing import Any, Callable

from IPython.display import display

from ..ge import session as ge_session
from ..prof import msprof
from ..prof.clock import clock

#: Minimum wall time between two updates of the progress line (seconds).
UPDATE_INTERVAL_S = 0.2


def frontend_mode(shell: Any) -> str:
    """``"widget"`` in a Jupyter kernel (widgets can render), else ``"text"`` (terminal, plain IPython)."""
    return "widget" if getattr(shell, "kernel", None) is not None else "text"


class Progress:
    """A throttled progress line for the steps of one cell.

    ``mode`` is ``"widget"``, ``"text"`` or ``"off"``; ``total`` is the number
    of steps when known (a schedule with ``repeat``); ``interval`` overrides
    :data:`UPDATE_INTERVAL_S`; ``now`` is the wall clock (seconds).
    """

    def __init__(self, mode: str = "text", total: int | None = None, interval: float | None = None,
                 now: Callable[[], float] = time.monotonic) -> None:
        if mode not in ("widget", "text", "off"):
            raise ValueError(f"mode must be 'widget', 'text' or 'off', got {mode!r}")
        self.mode = mode
        self.total = total
        self.interval = UPDATE_INTERVAL_S if interval is None else interval
        self._now = now
        self._last = now()
        self.steps = 0
        self.recorded: int | None = None  # with a schedule: steps recorded so far
        self.phase = ""  # with a schedule: what the current step is
        self.updates = 0
        self.shown = False
        self._t0_ns = clock.now_ns()
        self._device_ns = 0
        self._width = 0
        self._box = self._bar = self._label = self._handle = None

    # ------------------------------------------------------------------ values
    def _sample(self) -> None:
        runtime = ge_session.device_runtime()
        if runtime is not None:
            self._device_ns = max(self._device_ns, runtime.free_at - self._t0_ns)

    @property
    def device_time_ns(self) -> int:
        """How far the simulated device timeline has advanced since the cell started."""
        return self._device_ns

    def text(self, final: bool = False, status: str = "done", step_figure: str | None = None) -> str:
        """The progress line: steps, how far the simulated device timeline got, records reported (and the
        schedule's state); the final line has the run's step figure (``step_figure``) instead of the timeline."""
        if self.total and self.steps <= self.total:  # the schedule's length; past it, nothing is profiled
            steps = f"{self.steps}/{self.total} steps"
        else:
            steps = f"{self.steps} step{'s' * (self.steps != 1)}"
        parts = [steps]
        if self.recorded is not None:
            parts.append(f"{self.recorded} recorded")
        if final and step_figure:
            parts.append(step_figure)
        else:  # the whole timeline since the cell began: not a step time
            parts.append(f"device timeline {self._device_ns / 1e6:.3f} ms since the cell began")
        parts.append(f"{msprof.lib.records_reported:,} records reported")  # device logs arrive in batches
        if self.phase and not final:
            parts.append(f"now: {self.phase}")
        head = f"geprof ({status})" if final else "geprof"
        return f"{head}: " + ", ".join(parts)

    # ------------------------------------------------------------------ updates
    def step(self, steps: int, recorded: int | None = None, phase: str = "") -> bool:
        """A step finished; redraw if the last update is at least ``interval`` ago. Returns whether it redrew."""
        self.steps = steps
        self.recorded = recorded
        self.phase = phase
        if self.mode == "off":
            return False
        now = self._now()
        if now - self._last < self.interval:
            return False
        self._last = now
        self._sample()
        self._render(self.text())
        self.updates += 1
        return True

    def _render(self, text: str) -> None:
        if self.mode == "text":
            pad = " " * max(0, self._width - len(text))
            self._width = len(text)
            sys.stderr.write("\r" + text + pad)
            sys.stderr.flush()
        else:
            if self._box is None:
                import ipywidgets as widgets

                self._bar = widgets.IntProgress(value=0, min=0, max=max(1, self.total or 1),
                                                description="geprof", bar_style="info")
                if not self.total:
                    self._bar.layout.display = "none"
                self._label = widgets.HTML()
                self._box = widgets.HBox([self._bar, self._label])
                self._box.add_class("geprof-progress")
                self._handle = display(self._box, display_id=True)
            if self.total:
                self._bar.value = min(self.steps, self.total)
            self._label.value = f"<code>{html.escape(text)}</code>"
        self.shown = True

    def finish(self, status: str = "done", step_figure: Callable[[], str | None] | None = None) -> str:
        """The cell is over (``status``: "done", "interrupted", "stopped by ValueError", ...): finalise the
        line (text: end it; widget: close it, leave a static text line) with the run's step figure
        (``step_figure()``, asked only when the line is shown). Returns the final text."""
        self._sample()
        if not self.shown or self.mode == "off":
            return self.text(final=True, status=status)
        text = self.text(final=True, status=status, step_figure=step_figure() if step_figure is not None else None)
        if self.mode == "text":
            pad = " " * max(0, self._width - len(text))
            sys.stderr.write("\r" + text + pad + "\n")
            sys.stderr.flush()
        else:
            self._box.close()
            if self._handle is not None:
                self._handle.update({"text/plain": text}, raw=True)
        return text


class InterruptGuard:
    """Defer SIGINT while a step (or the end of a run) is in progress on the main thread.

    :meth:`install` replaces the SIGINT handler (main thread only; elsewhere the
    guard does nothing), :meth:`uninstall` restores it.  :meth:`enter` /
    :meth:`exit` bracket a critical section; :meth:`exit` of the outermost
    section raises the deferred ``KeyboardInterrupt``.
    """

    def __init__(self) -> None:
        self.depth = 0
        self.pending = False
        self.deferred = 0  # interrupts deferred over the guard's life
        self._previous: Any = None
        self._installed = False
        self._main = threading.main_thread().ident

    def install(self) -> bool:
        if threading.get_ident() != self._main:
            return False
        try:
            self._previous = signal.getsignal(signal.SIGINT)
            signal.signal(signal.SIGINT, self._handler)
        except (ValueError, OSError):  # not the main interpreter / no signals here
            return False
        self._installed = True
        return True

    def uninstall(self) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous if self._previous is not None else signal.default_int_handler)
            self._installed = False

    def _handler(self, signum: int, frame: Any) -> None:
        if self.depth > 0 and not self.pending:
            self.pending = True  # raised when the step is over
            self.deferred += 1
            return
        self.pending = False
        previous = self._previous
        if previous is signal.SIG_IGN:
            return
        if callable(previous):
            previous(signum, frame)  # signal.default_int_handler raises KeyboardInterrupt
            return
        raise KeyboardInterrupt

    def enter(self) -> None:
        if threading.get_ident() == self._main:
            self.depth += 1

    def exit(self, raise_pending: bool = True) -> bool:
        """Leave a section; returns whether an interrupt is pending (raised here if ``raise_pending``)."""
        if threading.get_ident() != self._main:
            return False
        self.depth = max(0, self.depth - 1)
        if self.depth == 0 and self.pending:
            if raise_pending:
                self.pending = False
                raise KeyboardInterrupt
            return True
        return False
