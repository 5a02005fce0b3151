"""Step schedules: which steps of a long run are profiled (``torch.profiler.schedule`` semantics).

A *step* is one model execution: ``Session.run_graph``, ``Session.run_graph_async``
or ``acl.aclmdlExecute`` (a call that fails before running, e.g. an unknown graph
id, is not a step).  Steps are numbered from 0 in the order they run.

:class:`StepSchedule` is the pure rule, as ``torch.profiler.schedule(wait, warmup,
active, repeat, skip_first)`` defines it:

* the first ``skip_first`` steps are not profiled;
* then cycles of ``wait + warmup + active`` steps follow: ``wait`` steps with the
  profiler off, ``warmup`` steps with it running but its results thrown away,
  ``active`` steps recorded; the last active step of a cycle is
  ``record_and_save`` (the cycle's data is complete);
* ``repeat`` is the number of cycles; ``0`` repeats them until the run ends.

:class:`ScheduledCollection` applies a schedule to the msprof library through
the one control path every other way of profiling uses: ``Msprof.start`` /
``Msprof.stop`` send START / STOP to the registered control callbacks (GE's
``DeviceRuntime.handle_command``), just as ``aclgrphProfStart`` /
``aclgrphProfStop`` do.  Between windows nothing is collected.

**How warmup data is discarded.**  A warmup window is a real collection: START
programs the PMU, registers type names, reports the models' static task info
and the steps run with every requested layer on, so one-time start-up costs are
paid there.  But the msprof library is told to *discard* what is reported while
the window is open (``Msprof.begin_discard``): those records are counted
(``info.json`` ``"discarded"``) and never reach the run directory.  At the first
active step the warmup window is closed with STOP (which makes the runtime hand
over the warmup steps' pending device records, so they fall into the discard as
well), discarding ends, and a new START opens the active window (a new epoch:
the runtime reports the static task info again, so the active steps are
self-contained).  The run directory therefore holds exactly the active steps;
``info.json`` ``"step_schedule"`` and the run's notes say which steps were
recorded, warmed up and skipped, and ``switch_history`` marks warmup windows
with ``"discarded": true``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

NONE = "none"
WARMUP = "warmup"
RECORD = "record"
RECORD_AND_SAVE = "record_and_save"
ACTIONS = (NONE, WARMUP, RECORD, RECORD_AND_SAVE)

#: The schedule's fields in flag order: (field, flag).
FIELDS = (("skip_first", "--skip-first"), ("wait", "--wait"), ("warmup", "--warmup"),
          ("active", "--active"), ("repeat", "--repeat"))


class StepScheduleError(ValueError):
    """A schedule field has a bad value; ``field`` and ``flag`` name it."""

    def __init__(self, field_name: str, message: str) -> None:
        self.field = field_name
        self.flag = dict(FIELDS)[field_name]
        super().__init__(f"{self.flag}: {message}")


@dataclass(frozen=True)
class StepSchedule:
    """``torch.profiler.schedule`` without torch: ``action(step)`` says what step ``step`` is."""

    skip_first: int = 0
    wait: int = 0
    warmup: int = 0
    active: int = 1
    repeat: int = 0

    def __post_init__(self) -> None:
        for name, _ in FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise StepScheduleError(name, f"must be a whole number, got {value!r}")
            if name == "active" and value < 1:
                raise StepScheduleError(name, f"must be >= 1 (the steps to record in each cycle), got {value}")
            if value < 0:
                raise StepScheduleError(name, f"must be >= 0, got {value}")

    @classmethod
    def from_fields(cls, skip_first: int = 0, wait: int = 0, warmup: int = 0, active: int = 0,
                    repeat: int = 0) -> "StepSchedule | None":
        """The schedule the flags ask for, or ``None`` when every field is 0 (no schedule: profile every step).

        ``active=0`` with another field set is an error naming that field, as is
        a negative value.
        """
        values = {"skip_first": skip_first, "wait": wait, "warmup": warmup, "active": active, "repeat": repeat}
        for name, _ in FIELDS:
            value = values[name]
            if isinstance(value, bool) or not isinstance(value, int):
                raise StepScheduleError(name, f"must be a whole number, got {value!r}")
            if value < 0:
                raise StepScheduleError(name, f"must be >= 0, got {value}")
        if active == 0:
            others = [name for name, _ in FIELDS if name != "active" and values[name]]
            if not others:
                return None
            flag = dict(FIELDS)[others[0]]
            raise StepScheduleError(others[0], f"{flag} {values[others[0]]} needs --active N (N >= 1 steps to "
                                    "record per cycle); a schedule without active steps records nothing")
        return cls(skip_first, wait, warmup, active, repeat)

    @property
    def cycle(self) -> int:
        """Steps per cycle (wait + warmup + active)."""
        return self.wait + self.warmup + self.active

    @property
    def total_steps(self) -> int | None:
        """Steps after which nothing more is profiled (``None`` when ``repeat`` is 0: never)."""
        return None if self.repeat == 0 else self.skip_first + self.repeat * self.cycle

    def action(self, step: int) -> str:
        """``"none"``, ``"warmup"``, ``"record"`` or ``"record_and_save"`` for step ``step`` (from 0)."""
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        if step < self.skip_first:
            return NONE
        step -= self.skip_first
        if self.repeat > 0 and step >= self.repeat * self.cycle:
            return NONE
        mod = step % self.cycle
        if mod < self.wait:
            return NONE
        if mod < self.wait + self.warmup:
            return WARMUP
        return RECORD if mod < self.cycle - 1 else RECORD_AND_SAVE

    def recorded_steps(self, n_steps: int) -> list[int]:
        """The steps among the first ``n_steps`` that are recorded."""
        return [s for s in range(n_steps) if self.action(s) in (RECORD, RECORD_AND_SAVE)]

    def flags(self) -> str:
        """The ``%%geprof`` flags of this schedule (only fields that differ from 0)."""
        return " ".join(f"{flag} {getattr(self, name)}" for name, flag in FIELDS if getattr(self, name))

    def describe(self) -> str:
        reps = "until the cell ends" if self.repeat == 0 else f"{self.repeat} cycle{'s' * (self.repeat != 1)}"
        return (f"skip_first={self.skip_first} wait={self.wait} warmup={self.warmup} active={self.active} "
                f"repeat={self.repeat} ({reps})")


class _Control(Protocol):  # the part of msprof.Msprof a ScheduledCollection drives
    def start(self, switch: int, dev_ids: tuple[int, ...] = ..., options: dict | None = ...) -> int: ...
    def stop(self) -> int: ...
    def begin_discard(self) -> None: ...
    def end_discard(self) -> int: ...
    def add_note(self, text: str) -> None: ...
    def set_run_info(self, key: str, value: Any) -> None: ...


def _ranges(steps: list[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``"0-2, 5, 7-8"``."""
    if not steps:
        return "none"
    parts, lo, prev = [], steps[0], steps[0]
    for s in steps[1:] + [None]:
        if s is not None and s == prev + 1:
            prev = s
            continue
        parts.append(str(lo) if lo == prev else f"{lo}-{prev}")
        if s is not None:
            lo = prev = s
    return ", ".join(parts)


def _plural(n: int, noun: str) -> str:
    """``"1 step"``, ``"3 steps"``."""
    return f"{n} {noun}{'s' * (n != 1)}"


def _steps(steps: list[int]) -> str:
    """``"step 2"``, ``"steps 0-2, 5"``: step numbers (at least one) for a sentence."""
    return f"step{'s' * (len(steps) != 1)} {_ranges(steps)}"


@dataclass
class ScheduledCollection:
    """Drive msprof START/STOP around steps by a :class:`StepSchedule` (a step hook).

    ``before_step()`` / ``after_step(ran)`` are called around every step;
    :meth:`finish` closes whatever window is open and records which steps were
    collected.  ``switch`` is the msprof data-type switch each window starts with.
    """

    schedule: StepSchedule
    switch: int
    lib: _Control
    step: int = 0
    state: str = "off"  # "off" | "warmup" | "record"
    recorded: list[int] = field(default_factory=list)
    warmed: list[int] = field(default_factory=list)
    windows: int = 0
    discarded: int = 0
    _action: str = NONE

    @property
    def current_action(self) -> str:
        """The action of the step being run (or of the next one between steps)."""
        return self._action

    def before_step(self) -> str:
        """Open / switch / close the collection window for step :attr:`step`; return its action."""
        self._action = action = self.schedule.action(self.step)
        self._go(NONE if action == NONE else (WARMUP if action == WARMUP else RECORD))
        return action

    def after_step(self, ran: bool = True) -> None:
        """Step :attr:`step` is over (``ran``: it executed); a cycle's last active step closes the window."""
        if not ran:
            return
        if self._action == WARMUP:
            self.warmed.append(self.step)
        elif self._action in (RECORD, RECORD_AND_SAVE):
            self.recorded.append(self.step)
        self.step += 1
        if self._action == RECORD_AND_SAVE:
            self._go(NONE)
        self._action = self.schedule.action(self.step)

    def _go(self, state: str) -> None:
        target = {NONE: "off", WARMUP: "warmup", RECORD: "record"}[state]
        if target == self.state:
            return
        if self.state == "warmup":
            self.lib.stop()  # the runtime hands over the warmup steps' device records: discarded too
            self.discarded += self.lib.end_discard()
        elif self.state == "record":
            self.lib.stop()
        self.state = "off"
        if target == "warmup":
            self.lib.begin_discard()
            self.lib.start(self.switch)
        elif target == "record":
            self.lib.start(self.switch)
            self.windows += 1
        self.state = target

    def finish(self) -> None:
        """Close the open window; note in the run which steps were recorded."""
        self._go(NONE)
        s = self.schedule
        skipped = [i for i in range(self.step) if i not in self.recorded and i not in self.warmed]
        self.lib.set_run_info("step_schedule", {
            "skip_first": s.skip_first, "wait": s.wait, "warmup": s.warmup, "active": s.active,
            "repeat": s.repeat, "steps": self.step, "recorded_steps": list(self.recorded),
            "warmup_steps": list(self.warmed), "discarded_records": self.discarded,
        })
        text = f"step schedule {s.describe()}: {len(self.recorded)} of {_plural(self.step, 'step')} recorded"
        if self.recorded:
            text += f" ({_steps(self.recorded)}, counted from 0 in the cell)"
        if self.warmed:
            text += (f"; warmup {_steps(self.warmed)} {'was' if len(self.warmed) == 1 else 'were'} "
                     "collected and discarded")
        if skipped:
            text += f"; not profiled: {_steps(skipped)}"
        self.lib.add_note(text)
