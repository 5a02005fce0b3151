"""Time at stake as a what-if saving: what removing a finding's cause saves on the critical path.

A rule that names its cause as a :class:`~..timing.what_if.WhatIfChange` (AI CPU ops removed, cube ops sped
up to the target utilisation, ...) gets as its time at stake the change's saving per step: the mean over the
typical steps of the step now less the step re-timed under the change (``Profile.what_if``), never a sum of
durations, so it never claims more than the step.  Its exclusive time at stake is what its change adds to the
changes of the findings that save more: applied cumulatively, largest saving first, the increments add up to
the saving of all the changes together.  A finding without a change (or whose change matches no task of the
run, or a run without a dependency graph for its steps) keeps its rule's estimate.

The re-timing is the what-if's own (:func:`~..timing.what_if.retime`); the task durations under a change are
computed here once per distinct op name, so a change naming hundreds of ops (each an exact-name pattern) costs
one lookup per name rather than one fnmatch pass per pattern.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..timing.dependency_graph import KERNEL_TYPES, StepGraph, Tasks, run_tasks, step_graphs
from ..timing.what_if import WhatIfChange, matches, retime

if TYPE_CHECKING:
    from ..profile import Profile

_SPECIAL = re.compile(r"([*?\[])")
_ESCAPED = re.compile(r"\[([*?\[])\]")


def literal(name: str) -> str:
    """``name`` as an fnmatch pattern matching exactly it (``*``, ``?`` and ``[`` bracketed)."""
    return _SPECIAL.sub(r"[\1]", name)


def _literal_text(pattern: str) -> str | None:
    """The name a :func:`literal` pattern matches, or None for a pattern with wildcards."""
    text = _ESCAPED.sub("", pattern)
    return None if _SPECIAL.search(text) else _ESCAPED.sub(r"\1", pattern)


def change_of(op_speedup: dict[str, float] | None = None, remove_ops: Iterable[str] | None = None,
              host_gap_us: float | None = None) -> WhatIfChange:
    """A finding's change: op names (exact: made :func:`literal`) sped up or removed, a host gap cap."""
    return WhatIfChange(tuple((literal(k), float(v)) for k, v in op_speedup.items()) if op_speedup else None,
                        tuple(literal(k) for k in remove_ops) if remove_ops is not None else None,
                        host_gap_us=host_gap_us)


class StepSavings:
    """The dependency graphs of a run's typical steps, re-timed under changes (what each saves per step, us).

    Empty (false) for an imported run: its graph takes every gap before a task as the host launching it (eager mode,
    :mod:`..timing.dependency_graph`), so a faster kernel could save only what the recorded launches allow: for
    an msprof export of a graph-mode run, next to nothing.  Its findings keep their estimates."""

    def __init__(self, profile: Profile, iterations: Iterable[int]) -> None:
        keep = {int(i) for i in iterations}
        tasks = run_tasks(profile)
        self.tasks: Tasks = tasks
        self.graphs: list[StepGraph] = ([g for g in step_graphs(tasks, profile.source.step_bounds())
                                         if g.iteration in keep] if len(tasks) and not tasks.imported else [])
        codes, names = tasks.names
        self._name_code = {str(n): i for i, n in enumerate(names)}
        type_codes, types = tasks.types
        self._sizes = (len(names), len(types))
        self._type_code = {str(t): i for i, t in enumerate(types) if t != "N/A"}
        self._codes, self._type_codes = codes, type_codes
        self._effects: dict[WhatIfChange, tuple[np.ndarray, np.ndarray] | None] = {}
        self._kernel = np.isin(tasks.task_type, list(KERNEL_TYPES)) & (tasks.kind == "compute")
        self._removable = self._kernel | (tasks.kind == "communication")

    def __bool__(self) -> bool:
        return bool(self.graphs)

    def _effect(self, change: WhatIfChange) -> tuple[np.ndarray, np.ndarray] | None:
        """Every task's speed-up factor and whether it is removed under ``change``, or None if a pattern matches no
        task (``what_if`` refuses it).  An exact-name pattern is one entry per distinct name or type; a wildcard
        (or a text that is both a name and a type) is matched as ``what_if`` matches it."""
        if change in self._effects:
            return self._effects[change]
        names, types = self._sizes
        per_name, per_type = (np.ones(names), np.zeros(names, bool)), (np.ones(types), np.zeros(types, bool))
        factor, removed = np.ones(len(self.tasks)), np.zeros(len(self.tasks), bool)
        entries = [(p, f, 0) for p, f in change.op_speedup or ()] + [(p, 0.0, 1) for p in change.remove_ops or ()]
        for pattern, f, remove in entries:
            text = _literal_text(pattern)
            n, t = (None, None) if text is None else (self._name_code.get(text), self._type_code.get(text))
            if text is None or (n is not None and t is not None):
                hit = matches(pattern, self.tasks)
                if not hit.any():
                    self._effects[change] = None
                    return None
                if remove:
                    removed |= hit
                else:
                    factor[hit] *= f
            elif n is None and t is None:
                self._effects[change] = None
                return None
            else:
                table, code = (per_name, n) if n is not None else (per_type, t)
                if remove:
                    table[1][code] = True
                else:
                    table[0][code] *= f
        factor *= per_name[0][self._codes] * per_type[0][self._type_codes]
        removed |= per_name[1][self._codes] | per_type[1][self._type_codes]
        self._effects[change] = (factor, removed)
        return factor, removed

    def durations(self, changes: Sequence[WhatIfChange]) -> np.ndarray | None:
        """Every task's duration (ns) under ``changes`` all at once, as ``what_if`` computes it (their factors
        multiply, their removals add up); None if a pattern matches no task."""
        effects = [self._effect(c) for c in changes]
        if any(e is None for e in effects):
            return None
        factor = np.prod([e[0] for e in effects], axis=0)
        removed = np.any([e[1] for e in effects], axis=0)
        duration = self.tasks.end - self.tasks.start
        out = duration.astype(np.int64).copy()
        sped = self._kernel & (factor != 1)
        out[sped] = (duration[sped] / factor[sped] + 0.5).astype(np.int64)
        out[removed & self._removable] = 0
        return out

    def saving_us(self, changes: Sequence[WhatIfChange]) -> float | None:
        """The mean over the typical steps of (step now - step under ``changes`` all at once, the tightest host gap
        cap holding), us; None if one of them does not apply."""
        out = self.durations(changes) if self.graphs else None
        if out is None:
            return None
        caps = [c.host_gap_us for c in changes if c.host_gap_us is not None]
        cap = int(round(min(caps) * 1000)) if caps else None
        saved = [g.end - retime(g, out[g.index], cap)[2] for g in self.graphs]
        return float(np.mean(saved)) / 1000.0


def chained(savings: StepSavings, changes: Sequence[WhatIfChange], alone: Sequence[float]) -> list[float]:
    """Each change's exclusive saving: changes ordered by their own saving (largest first, stable), the k-th's is
    the saving of changes 1..k less that of 1..k-1, so together they save what all the changes save at once."""
    order = sorted(range(len(changes)), key=lambda i: -alone[i])
    out = [0.0] * len(changes)
    before = 0.0
    for k, i in enumerate(order):
        together = alone[i] if k == 0 else savings.saving_us([changes[j] for j in order[:k + 1]])
        together = before if together is None else together
        out[i] = together - before
        before = together
    return out


def what_if_stakes(profile: Profile, iterations: Iterable[int], changes: Sequence[WhatIfChange | None]
                   ) -> tuple[list[float | None], list[float | None]]:
    """Per finding (its change, or None), its saving per step alone and its exclusive saving (:func:`chained`), us;
    None for a finding that keeps its estimate (no change, a change that matches no task, no graph of the steps, an
    imported run: :class:`StepSavings`)."""
    alone: list[float | None] = [None] * len(changes)
    exclusive: list[float | None] = [None] * len(changes)
    if not any(c is not None for c in changes):
        return alone, exclusive
    savings = StepSavings(profile, iterations)
    if not savings:
        return alone, exclusive
    for i, c in enumerate(changes):
        if c is not None:
            saved = savings.saving_us([c])
            alone[i] = None if saved is None else max(0.0, saved)
    used = [i for i, a in enumerate(alone) if a is not None]
    for i, e in zip(used, chained(savings, [changes[i] for i in used], [alone[i] for i in used])):
        exclusive[i] = max(0.0, e)
    return alone, exclusive
