"""Cells that are well-formed but cannot be: a negative time, duration, size or count, an end before its
start, a task without a start or a duration.

Such a cell is a bad cell, whatever its format: the row that holds it is dropped, and a note names the
file, the lines and the column, so no table counts or sums it (a negative kernel duration would shrink
the step split's computing time; an N/A one has no place on the time line).  The other rows are read,
as rows of the wrong width are skipped (:func:`.csvfiles.read_csv`).  Cells that are no number at all
are left to the column's conversion, which names them as an error.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ...errors import ImportFormatError
from .csvfiles import CsvTable

#: The largest value a time, size or count can have: 2**63 ns in µs (the tables hold ns as int64).
_LARGEST = 2**63 / 1000
#: Lines a note lists before "and N more".
_SHOWN = 10


@dataclass(frozen=True)
class Rules:
    """What the cells of one kind of file cannot be (columns the file does not have are passed over)."""

    #: Columns with a value on every row: a task's start and duration.
    required: tuple[str, ...] = ()
    #: Times, durations, sizes, counts and ids: never negative (nor past 2**63 ns in µs); N/A is fine unless
    #: required.
    non_negative: tuple[str, ...] = ()
    #: (start, end) columns: the end is not before the start where both are given.
    spans: tuple[tuple[str, str], ...] = ()

    def __or__(self, other: Rules) -> Rules:
        return Rules(self.required + other.required, self.non_negative + other.non_negative,
                     self.spans + other.spans)


NO_RULES = Rules()


def _columns(table: CsvTable, names: Iterable[str]) -> list[tuple[int, str]]:
    """(position, name) of every column of ``table`` named in ``names`` (repeated names each time)."""
    wanted = set(names)
    return [(pos, name) for pos, name in enumerate(table.header) if name in wanted]


def _times(table: CsvTable, pos: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(exact ns, where given) of a column of µs times, None if some cell is no time (its conversion names it):
    exact, since an end 1 ns before its start has the same float µs at today's epoch."""
    try:
        return table.ns(pos)
    except ImportFormatError:
        return None


def possible_rows(table: CsvTable, rules: Rules) -> tuple[CsvTable, list[str]]:
    """``table`` without the rows holding a cell ``rules`` says cannot be, and a note per column and
    broken rule naming the files and lines of the rows dropped.  A column with a cell that is no number
    is not checked here: its conversion raises the error naming that cell."""
    if table.cells.num_rows == 0 or rules == NO_RULES:
        return table, []
    broken: list[tuple[np.ndarray, str, str]] = []  # (rows, column, what the cell was)
    for pos, name in _columns(table, rules.required):
        values = table.floats(pos)
        if values is not None:
            broken.append((np.isnan(values), name, "N/A or empty, where every row has a value"))
    for pos, name in _columns(table, rules.non_negative):
        values = table.floats(pos)
        if values is not None:
            broken.append(((values < 0) | (values > _LARGEST), name, "negative or out of range (infinite, or past "
                           "9.2e15: 2**63 ns in µs)"))
    for start, end in rules.spans:
        starts, ends = _columns(table, [start]), _columns(table, [end])
        if not starts or not ends:
            continue
        first, last = _times(table, starts[0][0]), _times(table, ends[0][0])
        if first is not None and last is not None:
            broken.append((first[1] & last[1] & (last[0] < first[0]), end, f"before its {start!r}"))
    drop = np.zeros(len(table), bool)
    notes = []
    for rows, column, what in broken:
        rows = rows & ~drop  # a row is named once, by the first rule it breaks
        if rows.any():
            notes.append(_note(table, np.flatnonzero(rows), column, what))
            drop |= rows
    return (table.select(~drop) if drop.any() else table), notes


def _note(table: CsvTable, rows: np.ndarray, column: str, what: str) -> str:
    """The note on rows dropped for one rule: the file(s), the first lines and the value of the first."""
    pos = table.position(column)
    first = table.cells.column(pos)[int(rows[0])].as_py().strip()
    by_file: dict[str, list[int]] = {}
    for row in rows.tolist():
        path, line = table.where(row)
        by_file.setdefault(str(path), []).append(line)
    parts = []
    for path, lines in by_file.items():
        shown = ", ".join(map(str, lines[:_SHOWN]))
        more = f" and {len(lines) - _SHOWN} more" if len(lines) > _SHOWN else ""
        parts.append(f"{path}, line{'s' if len(lines) > 1 else ''} {shown}{more}")
    return (f"{'; '.join(parts)}: {len(rows)} row{'s' if len(rows) > 1 else ''} dropped, whose column {column!r} is "
            f"{what} (the first: {first!r}); such a row is not read, so no table counts or sums it")
