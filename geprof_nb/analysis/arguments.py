"""Checks of the analysis API's arguments (an iteration, a device id, a row count), so a wrong one
fails naming itself and what is accepted instead of giving an empty table or an error from deep inside."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

#: How many ids an error lists at each end of a long, gapped list.
_ENDS = 3


def integer(name: str, value: object, accepted: str = "an integer") -> int:
    """``value`` as an int (Python or numpy integers; a bool is not one); else a TypeError naming
    ``name`` and what is ``accepted``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} {value!r} is not valid; accepted: {accepted}")
    return int(value)


def positive_integer(name: str, value: object) -> int:
    """:func:`integer` of ``value``, which must also be at least 1 (else a ValueError naming ``name``)."""
    accepted = "a positive integer (1, 2, 3, ...)"
    number = integer(name, value, accepted)
    if number < 1:
        raise ValueError(f"{name} {number} is not valid; accepted: {accepted}")
    return number


def id_span(ids: Iterable[int]) -> str:
    """Sorted unique ids written short: ``3..5`` when contiguous, all of them when few, else the first
    and last few and how many (``0, 2, 4, ..., 94, 96, 98 (50 in all)``)."""
    values = sorted({int(i) for i in ids})
    if len(values) >= 3 and values[-1] - values[0] == len(values) - 1:
        return f"{values[0]}..{values[-1]}"
    if len(values) <= 2 * _ENDS + 1:
        return ", ".join(map(str, values))
    return (f"{', '.join(map(str, values[:_ENDS]))}, ..., {', '.join(map(str, values[-_ENDS:]))} "
            f"({len(values)} in all)")


def member(name: str, value: object, ids: Iterable[int], where: str, kind: str) -> int:
    """:func:`integer` of ``value``, which must be one of ``ids`` (the ``kind`` of ``where``, e.g. the
    iterations of this run); else a ValueError naming ``name`` and listing them (:func:`id_span`)."""
    number = integer(name, value)
    known = {int(i) for i in ids}
    if number not in known:
        has = f"its {kind} are {id_span(known)}" if known else f"it has no {kind}"
        raise ValueError(f"{name} {number} is not in {where}; {has}")
    return number
