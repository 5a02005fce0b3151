"""The text of many rows (CSV lines, JSON events) from dictionary-encoded pieces.

A column of pieces is :class:`Coded`: its distinct texts and each row's code into
them.  Names, shapes and most numbers repeat every step, so each distinct text is
made once in Python; a row is the concatenation of its pieces.  :func:`row_bytes`
gathers the pieces of many rows with one pyarrow ``take`` over every column's texts
(in C++), and the taken array's data buffer is those rows' UTF-8 bytes: no Python
string per row or cell, which is what made a million-row table take tens of seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

TEXT = pa.large_string()  # 64-bit offsets: a chunk of rows may pass 2 GB of text
#: Pieces taken at a time: small enough that the allocator reuses the memory of the last chunk
#: (fresh memory costs page faults: 2**21 pieces a chunk made the takes 5x slower).
_PIECES_PER_CHUNK = 1 << 18
#: A constant next to a column with at most one text per this many rows is joined into its texts,
#: and two neighbouring columns with at most one pair of texts per this many rows become one
#: (cheaper than taking a piece of every row).
_ROWS_PER_TEXT_TO_JOIN = 8


def texts(values: Sequence[str] | np.ndarray) -> pa.Array:
    return pa.array(values, TEXT)


def concat(*parts: pa.Array | str) -> pa.Array:
    """Element-wise concatenation (str parts: the same text for all)."""
    return pc.binary_join_element_wise(*(pa.scalar(p, TEXT) if isinstance(p, str) else p for p in parts),
                                       pa.scalar("", TEXT))


@dataclass(frozen=True)
class Coded:
    """Row ``i``'s text is ``texts[codes[i]]``; ``plain``: texts no CSV or JSON writer quotes or
    escapes (numbers, ``N/A``), so nobody needs to look into them."""

    codes: np.ndarray  # int64
    texts: pa.Array  # large_string, no nulls
    plain: bool = False

    def __len__(self) -> int:
        return len(self.codes)

    def tolist(self) -> list[str]:
        return self.texts.take(pa.array(self.codes)).to_pylist()

    def map(self, f: Callable[[str], str]) -> Coded:
        """``f`` applied to each distinct text."""
        return Coded(self.codes, texts([f(t) for t in self.texts.to_pylist()]))

    def joined(self, before: str = "", after: str = "") -> Coded:
        """Every text between ``before`` and ``after``."""
        return Coded(self.codes, concat(before, self.texts, after))

    def set(self, rows: int | np.ndarray, text: str) -> Coded:
        """The text of row(s) ``rows`` replaced by ``text`` (as plain as the others)."""
        codes = self.codes.copy()
        codes[rows] = len(self.texts)
        return Coded(codes, pa.concat_arrays([self.texts, texts([text])]), self.plain)


class Groups:
    """Rows grouped by a key (a task's connection id): each row's group and the first row of each
    group.  Columns with one value per group are formatted once per group, and all of them share
    :attr:`codes`, so neighbouring ones become one piece."""

    def __init__(self, codes: np.ndarray, first: np.ndarray) -> None:
        self.codes = codes
        self.first = first

    @classmethod
    def of(cls, key) -> Groups:
        codes, uniques = pd.factorize(np.asarray(key))
        first = np.full(len(uniques), -1, np.int64)
        first[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)  # the lowest row of each group
        return cls(codes.astype(np.int64), first)

    def holds_one(self, keys: np.ndarray) -> bool:
        """Whether ``keys`` (one per row, comparable with ==) hold one value per group."""
        keys = np.asarray(keys)
        return bool((keys == keys[self.first][self.codes]).all())

    def spread(self, cells: Coded) -> Coded:
        """A column from the cells of each group's first row."""
        return Coded(self.codes, cells.texts.take(pa.array(cells.codes)), cells.plain)


def per_row(values: pa.Array) -> Coded:
    """A column whose texts are its rows."""
    return Coded(np.arange(len(values), dtype=np.int64), values.cast(TEXT))


def by_value(keys, texts_of: Callable[[object], Sequence[str] | pa.Array], missing: str = "",
             plain: bool = False) -> Coded:
    """A column of ``keys`` formatted once per distinct key: ``texts_of(pd.factorize's uniques)``;
    a missing key's text is ``missing``."""
    codes, uniques = pd.factorize(keys)
    codes = codes.astype(np.int64)
    found = texts_of(uniques)
    found = found.cast(TEXT) if isinstance(found, pa.Array) else texts(list(found))
    if (codes < 0).any():
        codes[codes < 0] = len(found)
        found = pa.concat_arrays([found, texts([missing])])
    return Coded(codes, found, plain)


_FRACTIONS = concat(".", texts([f"{i:03d}" for i in range(1000)]))
#: ``"0000"`` .. ``"9999"`` and ``".000"`` .. ``".999"``, each as one 4-byte word.
_DIGITS4 = np.frombuffer("".join(f"{i:04d}" for i in range(10**4)).encode(), "<u4")
_FRACTION_WORDS = np.frombuffer("".join(f".{i:03d}" for i in range(1000)).encode(), "<u4")


#: Rows of µs texts written at a time (a block of them stays in the cache while each column is written).
_ROWS_PER_BLOCK = 1 << 16


def _at(rows: np.ndarray, offset: int, dtype) -> np.ndarray:
    """The bytes at ``offset`` of each row of a byte matrix, as one ``dtype`` value per row (a view)."""
    return np.ndarray((rows.shape[0],), dtype, rows, offset, (rows.shape[1],))


def us_texts(ns: np.ndarray, before: str = "", after: str = "") -> pa.Array:
    """Exact int ns -> ``before + "<us>.<ns % 1000 as 3 digits>" + after`` per value (msprof's µs text).

    When every value has as many µs digits (timestamps of one run), the texts are written into
    one byte matrix of fixed width, four digits at a time, a block of rows at a time (each column
    written into a block that stays in the cache): ~4x faster than pyarrow's int cast.
    """
    ns = np.asarray(ns, dtype=np.int64)
    q = ns // 1000  # floor division, as Python's // and %
    width = len(str(int(q.max()))) if len(q) else 0
    if not len(q) or q.min() < (10 ** (width - 1) if width > 1 else 0):
        return concat(before, pc.cast(pa.array(q), TEXT), _FRACTIONS.take(pa.array(ns - q * 1000)), after)
    lead, end = np.frombuffer(before.encode(), np.uint8), np.frombuffer(after.encode(), np.uint8)
    at = len(lead) + width  # where the µs digits end
    out = np.empty((len(q), at + 4 + len(end)), np.uint8)
    for lo in range(0, len(q), _ROWS_PER_BLOCK):
        block, rest = out[lo:lo + _ROWS_PER_BLOCK], q[lo:lo + _ROWS_PER_BLOCK]
        block[:, :len(lead)] = lead
        _at(block, at, "<u4")[:] = _FRACTION_WORDS[ns[lo:lo + _ROWS_PER_BLOCK] - rest * 1000]
        block[:, at + 4:] = end
        stop = at
        while stop - len(lead) >= 4:  # the µs digits from the right, four at a time, then one by one
            higher = rest // 10**4
            _at(block, stop - 4, "<u4")[:] = _DIGITS4[rest - higher * 10**4]
            rest, stop = higher, stop - 4
        for j in range(stop - 1, len(lead) - 1, -1):
            higher = rest // 10
            _at(block, j, np.uint8)[:] = rest - higher * 10 + ord("0")
            rest = higher
    offsets = np.arange(0, out.size + 1, out.shape[1], dtype=np.int64)
    return pa.LargeStringArray.from_buffers(len(q), pa.py_buffer(offsets), pa.py_buffer(out))


def _is_small(col: Coded | str, rows: int) -> bool:
    return isinstance(col, Coded) and len(col.texts) * _ROWS_PER_TEXT_TO_JOIN <= rows


def _joined_columns(a: Coded, b: Coded, rows: int) -> Coded | None:
    """One column for two adjacent ones when that is cheap: the same codes (a column repeated), or
    few pairs of texts (each pair's text made once); else ``None``."""
    if a.codes is b.codes and len(a.texts) == len(b.texts):
        return Coded(a.codes, concat(a.texts, b.texts))
    na, nb = len(a.texts), len(b.texts)
    if na * nb * _ROWS_PER_TEXT_TO_JOIN > rows:
        return None
    pairs = np.arange(na * nb)
    both = concat(a.texts.take(pa.array(pairs // nb)), b.texts.take(pa.array(pairs % nb)))
    return Coded(a.codes * nb + b.codes, both)


def _merged(columns: Sequence[Coded | str], rows: int) -> list[Coded | str]:
    """The pieces with adjacent constants as one, a column of one text as a constant, constants
    joined into the texts of a neighbouring column with few of them, and neighbouring columns joined
    where :func:`_joined_columns` finds it cheap: every piece costs a take per row."""
    out: list[Coded | str] = []
    for col in columns:
        if isinstance(col, Coded) and len(col.texts) == 1:
            col = col.texts[0].as_py()
        if isinstance(col, str):
            if not col:
                continue
            if out and isinstance(out[-1], str):
                out[-1] += col
            elif out and _is_small(out[-1], rows):
                out[-1] = out[-1].joined(after=col)
            else:
                out.append(col)
            continue
        if out and isinstance(out[-1], str) and _is_small(col, rows):
            col = col.joined(before=out.pop())
        both = _joined_columns(out[-1], col, rows) if out and isinstance(out[-1], Coded) else None
        if both is not None:
            out[-1] = both
        else:
            out.append(col)
    return out


def row_bytes(columns: Sequence[Coded | str], start: int, stop: int) -> Iterator[pa.Buffer]:
    """Rows ``start`` .. ``stop - 1`` of ``columns`` (a str: the same piece in every row), each the
    concatenation of its pieces, as UTF-8 bytes in chunks."""
    merged = _merged(columns, stop - start)
    bases, tables, size = [], [], 0
    for col in merged:
        table = texts([col]) if isinstance(col, str) else col.texts
        bases.append(size)
        tables.append(table)
        size += len(table)
    if not merged:
        return
    dictionary = pa.concat_arrays(tables)
    rows = max(1, _PIECES_PER_CHUNK // len(merged))
    for lo in range(start, stop, rows):
        hi = min(lo + rows, stop)
        index = np.empty((hi - lo, len(merged)), np.int32 if size < 2**31 else np.int64)
        for j, (col, base) in enumerate(zip(merged, bases)):
            index[:, j] = base if isinstance(col, str) else col.codes[lo:hi] + base
        taken = dictionary.take(pa.array(index.ravel()))
        end = int(np.frombuffer(taken.buffers()[1], np.int64)[len(taken)])
        yield taken.buffers()[2].slice(0, end)
