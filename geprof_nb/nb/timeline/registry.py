"""The tables a timeline's lanes point into: the names and kinds their spans are coded by, and the
rows (op_summary, host calls, ...) a span's reference gives the details of."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..plots import color_of


class Codes:
    """Distinct texts coded 0, 1, ... in the order first added (op names, Task Types, scope names)."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self._index: dict[str, int] = {}

    def code(self, text: str) -> int:
        text = str(text)
        found = self._index.get(text)
        if found is None:
            found = self._index[text] = len(self.texts)
            self.texts.append(text)
        return found

    def find(self, text: str) -> int | None:
        """The code of ``text``, None if it was never added."""
        return self._index.get(str(text))

    def codes(self, values: pd.Series | np.ndarray) -> np.ndarray:
        """The code of every value (categoricals coded once per category; missing values as ``N/A``)."""
        cat = values.astype("category") if isinstance(values, pd.Series) else pd.Series(values).astype("category")
        table = np.array([self.code(c) for c in cat.cat.categories.astype(str)] + [self.code("N/A")], np.int32)
        return table[cat.cat.codes.to_numpy()]  # code -1 (missing) takes the last entry

    def __len__(self) -> int:
        return len(self.texts)


class Kinds(Codes):
    """The kinds spans are coloured by, each with its colour (the PNG plots' colour of that name)."""

    def __init__(self) -> None:
        super().__init__()
        self.colors: list[str] = []
        self._fixed: dict[str, str] = {}

    def fix(self, colors: dict[str, str]) -> None:
        """Colours for names that :func:`..plots.color_of` does not know (step phases)."""
        self._fixed.update(colors)

    def code(self, text: str) -> int:
        n = len(self.texts)
        found = super().code(text)
        if found == n:
            self.colors.append(self._fixed.get(str(text), color_of(str(text))))
        return found

    def table(self) -> list[dict[str, str]]:
        return [{"name": t, "color": c} for t, c in zip(self.texts, self.colors)]


@dataclass
class DetailTable:
    """Rows a span can point at: the ``frame`` of one rank (its op_summary, host calls, ...) and the
    columns its details show (those present)."""

    rank: int | None
    source: str
    frame: pd.DataFrame
    columns: list[str]


@dataclass
class Details:
    """Every table spans point into, one reference range each: a span's ``ref`` is the table's first
    reference plus the row's position."""

    tables: list[DetailTable] = field(default_factory=list)
    first: list[int] = field(default_factory=list)

    def add(self, table: DetailTable) -> int:
        """Register ``table``; returns its first reference."""
        start = self.first[-1] + len(self.tables[-1].frame) if self.tables else 0
        self.tables.append(table)
        self.first.append(start)
        return start

    def row(self, ref: int) -> tuple[DetailTable, int]:
        """The table and row position of reference ``ref``; a ValueError for one that no table has."""
        k = int(np.searchsorted(self.first, ref, "right")) - 1
        if ref < 0 or k < 0 or ref - self.first[k] >= len(self.tables[k].frame):
            raise ValueError(f"no timeline row has reference {ref}")
        return self.tables[k], ref - self.first[k]

    def fields(self, ref: int) -> list[list[str]]:
        """(column, value as text) of the row at ``ref``: its table's columns that have a value there."""
        table, pos = self.row(ref)
        row = table.frame.iloc[pos]
        out = [] if table.rank is None else [["Rank", str(table.rank)]]
        for column in table.columns:
            value = row[column]
            if value is None or (not isinstance(value, str) and pd.isna(value)) or str(value) == "N/A":
                continue
            out.append([column, _text(value)])
        return out


def _text(value: object) -> str:
    """A table value as the tooltip shows it: floats with up to 3 decimals, thousands separated."""
    if isinstance(value, (float, np.floating)):
        return f"{float(value):,.3f}".rstrip("0").rstrip(".") if abs(value) < 1e15 else f"{float(value):.6g}"
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    return str(value)
