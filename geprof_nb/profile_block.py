"""``geprof_nb.profile()``: profile a ``with`` block of plain Python (a script, a test, a notebook
without the magic) exactly as a ``%%geprof`` cell profiles its cell.

The block runs under one run of the collection core the magic and ``geprof run`` use
(:class:`geprof_nb.collect.Collection`): the same defaults (:data:`~geprof_nb.collect.COLLECTION_DEFAULTS`),
the same option checks, the same step schedule.  Every option is checked before a run directory
is made.  If the block raises, the run is finalised with a note saying what was raised, and the
exception leaves the block unchanged (its own traceback: no geprof frame is added).
"""

from __future__ import annotations

import difflib
import sys
from dataclasses import fields
from pathlib import Path
from types import TracebackType
from typing import Any, Mapping

from .analysis import ClusterProfile, Profile
from .collect import COLLECTION_DEFAULTS, Collection, check_not_collecting, load_collected
from .prof.options import ProfilingOptions, ProfilingOptionsError
from .prof.step_schedule import FIELDS as SCHEDULE_FIELDS
from .prof.step_schedule import StepSchedule, StepScheduleError

#: Keywords ProfilingOptions.parse takes: its fields and GE's legacy spellings.
_OPTION_NAMES = tuple(sorted({f.name for f in fields(ProfilingOptions)} | {"task_time", "result_path"}))
_SCHEDULE_NAMES = tuple(name for name, _ in SCHEDULE_FIELDS)


def _options_of(given: Mapping[str, Any]) -> ProfilingOptions:
    """The profilingOptions of a block: ``given`` over the collection defaults, checked as GE checks them.

    Unlike GE, which warns about an unknown field and ignores it, a keyword that is not a field
    is an error here: it is a typo in the caller's own code.
    """
    for name in given:
        if name not in _OPTION_NAMES:
            close = difflib.get_close_matches(name, _OPTION_NAMES + ("schedule",), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ProfilingOptionsError(name, f"is not a profilingOptions field{hint}",
                                        ", ".join(_OPTION_NAMES) + ", or schedule")
    values = dict(COLLECTION_DEFAULTS)
    values.update(given)
    return ProfilingOptions.parse(values)


def _schedule_of(value: StepSchedule | Mapping[str, int] | None) -> StepSchedule | None:
    """``value`` as a StepSchedule (a dict gives its fields, the others keep their defaults); ``None``
    records every step.  A bad type, field or value is a ProfilingOptionsError for ``schedule`` naming
    the schedule field, as a bad profilingOptions field is."""
    if value is None or isinstance(value, StepSchedule):
        return value
    accepted = f"a StepSchedule, a dict of its fields ({', '.join(_SCHEDULE_NAMES)}) or None"
    if not isinstance(value, Mapping):
        raise ProfilingOptionsError("schedule", f"{type(value).__name__} is not a schedule", accepted)
    unknown = [k for k in value if k not in _SCHEDULE_NAMES]
    if unknown:
        close = difflib.get_close_matches(str(unknown[0]), _SCHEDULE_NAMES, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ProfilingOptionsError("schedule", f"{unknown[0]!r} is not a StepSchedule field{hint}", accepted)
    try:
        return StepSchedule(**value)
    except StepScheduleError as exc:
        raise ProfilingOptionsError("schedule", f"field {exc.field!r} {str(exc).split(': ', 1)[-1]}") from None


class ProfiledBlock:
    """One ``with`` block profiled as one run (made by :func:`geprof_nb.profile`).

    After the block: :attr:`profile` (the loaded Profile, or ClusterProfile for several ranks; None if
    the run directory was removed while the block ran, which stderr says), :attr:`run_dir`, :attr:`steps`
    (steps the block ran), :attr:`error` (what it raised, or None) and :attr:`write_problem` (what could
    not be written into the run directory, a full disk, in the words stderr gave; "" if everything was).
    """

    def __init__(self, options: Mapping[str, Any], schedule: StepSchedule | Mapping[str, int] | None = None) -> None:
        self.options = _options_of(options)
        self.schedule = _schedule_of(schedule)
        self._given = dict(options)
        self._collection: Collection | None = None
        self.profile: Profile | ClusterProfile | None = None
        self.run_dir: Path | None = None
        self.steps = 0
        self.error: BaseException | None = None
        self.write_problem = ""
        self._finished = False

    def __enter__(self) -> ProfiledBlock:
        if self._collection is not None:
            raise RuntimeError("this geprof_nb.profile() has profiled its block; call geprof_nb.profile() again "
                               "for another block")
        check_not_collecting()
        self._collection = Collection.open(self.options, self.schedule, subject="block", info_key="profile",
                                           info={"options": self._given})
        try:
            self._collection.start()
        except BaseException as exc:
            self._finish(self._collection, exc)
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        self._finish(self._collection, exc)
        return False  # the block's exception, if any, propagates as it was raised

    def _finish(self, collection: Collection | None, error: BaseException | None) -> None:
        if collection is None:
            raise RuntimeError("geprof_nb.profile(): the block was left without being entered")
        collected = collection.finish(error)
        self.run_dir, self.steps, self.error = collected.run_dir, collected.steps, collected.error
        self.write_problem = collected.write_problem
        self.profile, said = load_collected(collected)
        self._finished = True
        if said:
            print(said, file=sys.stderr)

    def __repr__(self) -> str:
        if self._collection is None:
            return "<geprof_nb.profile(): not entered>"
        if not self._finished:
            return "<geprof_nb.profile(): collecting>"
        if self.profile is None:
            return f"<geprof_nb.profile(): {self.steps} step{'s' * (self.steps != 1)}; {self.run_dir} was lost>"
        lost = "; not everything could be written (write_problem)" if self.write_problem else ""
        return f"<geprof_nb.profile(): {self.steps} step{'s' * (self.steps != 1)} into {self.run_dir}{lost}>"
