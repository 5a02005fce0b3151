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


def combined(changes: Sequence[WhatIfChange]) -> WhatIfChange:
    """Several findings' changes at once: speed-up factors of one pattern multiply (as ``what_if``'s factors of
    several matching patterns do), removed ops add up, the tightest host gap cap holds."""
    speed: dict[str, float] = {}
    removed: dict[str, None] = {}
    caps = []
    for c in changes:
        for pattern, factor in c.op_speedup or ():
            speed[pattern] = speed.get(pattern, 1.0) * factor
        removed.update(dict.fromkeys(c.remove_ops or ()))
        if c.host_gap_us is not None:
            caps.append(c.host_gap_us)
    return WhatIfChange(tuple(speed.items()) or None, tuple(removed) or None, host_gap_us=min(caps) if caps else None)


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
        self._type_code = {str(t): i for i, t in enumerate(types) if t != "N/A"}
        self._codes, self._type_codes = codes, type_codes
        self._kernel = np.isin(tasks.task_type, list(KERNEL_TYPES)) & (tasks.kind == "compute")
        self._removable = self._kernel | (tasks.kind == "communication")

    def __bool__(self) -> bool:
        return bool(self.graphs)

    def _hits(self, pattern: str) -> np.ndarray:
        """Which tasks ``pattern`` matches, by op name or type, as ``what_if`` matches them."""
        text = _literal_text(pattern)
        if text is None:
            return matches(pattern, self.tasks)
        hit = np.zeros(len(self.tasks), bool)
        if text in self._name_code:
            hit |= self._codes == self._name_code[text]
        if text in self._type_code:
            hit |= self._type_codes == self._type_code[text]
        return hit

    def durations(self, change: WhatIfChange) -> np.ndarray | None:
        """Every task's duration under ``change`` (ns), as ``what_if`` computes it; None if a pattern matches none."""
        tasks = self.tasks
        duration = tasks.end - tasks.start
        out = duration.astype(np.int64).copy()
        if change.op_speedup:
            factor = np.ones(len(tasks))
            for pattern, f in change.op_speedup:
                hit = self._hits(pattern)
                if not hit.any():
                    return None
                factor[hit] *= f
            sped = self._kernel & (factor != 1)
            out[sped] = (duration[sped] / factor[sped] + 0.5).astype(np.int64)
        for pattern in change.remove_ops or ():
            hit = self._hits(pattern)
            if not hit.any():
                return None
            out[hit & self._removable] = 0
        return out

    def saving_us(self, change: WhatIfChange) -> float | None:
        """The mean over the typical steps of (step now - step under ``change``), us; None if it does not apply."""
        duration = self.durations(change)
        if duration is None or not self.graphs:
            return None
        cap = None if change.host_gap_us is None else int(round(change.host_gap_us * 1000))
        saved = [g.end - retime(g, duration[g.index], cap)[2] for g in self.graphs]
        return float(np.mean(saved)) / 1000.0


def chained(savings: StepSavings, changes: Sequence[WhatIfChange], alone: Sequence[float]) -> list[float]:
    """Each change's exclusive saving: changes ordered by their own saving (largest first, stable), the k-th's is
    the saving of changes 1..k less that of 1..k-1, so together they save what all the changes save at once."""
    order = sorted(range(len(changes)), key=lambda i: -alone[i])
    out = [0.0] * len(changes)
    before = 0.0
    for k, i in enumerate(order):
        together = alone[i] if k == 0 else savings.saving_us(combined([changes[j] for j in order[:k + 1]]))
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
            saved = savings.saving_us(c)
            alone[i] = None if saved is None else max(0.0, saved)
    used = [i for i, a in enumerate(alone) if a is not None]
    for i, e in zip(used, chained(savings, [changes[i] for i in used], [alone[i] for i in used])):
        exclusive[i] = max(0.0, e)
    return alone, exclusive
