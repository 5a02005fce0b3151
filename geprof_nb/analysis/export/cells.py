"""msprof's value formatting and CSV files.

How the real tools print a table (msprof's C++ summary writers, torch_npu's
view parsers; reference §3.3, §4):

* absolute timestamps from exact integer ns as ``<us>.<3 digits>`` followed by
  a TAB (it stops spreadsheets from turning them into scientific notation);
* other floats with 3 decimals; integer and cycle columns as integers;
* ``N/A`` for missing values;
* ``Task Wait Time(us)``: ``0`` on the first row, ``std::to_string`` (6
  decimals) on every other row;
* a table of more than 1,000,000 rows goes into slices
  ``<name>_slice_<i>_<timestamp>.csv``, each with the header (msprof
  ``CsvWriter::GetSliceFileName``); a smaller one into ``<name>_<timestamp>.csv``;
* a *text* cell that a spreadsheet would run as a formula (it starts with ``=``,
  ``+``, ``-``, ``@``, TAB or CR and is not a number) gets a leading ``'``
  (:func:`neutralised`), the usual defence against CSV formula injection; numbers,
  negative ones included, stay numbers.  The importers remove that one ``'`` again
  (``importers.csvfiles.unneutralised``), so export -> import gives the names back.

Cells are formatted column by column with numpy, so a million-row op_summary
takes seconds, not minutes.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

NA = "N/A"
#: msprof's ``CSV_LIMIT``: rows per CSV file.
CSV_LIMIT = 1_000_000


class SafeCells(np.ndarray):
    """Formatted cells that hold no character a CSV writer quotes (numbers, ``N/A``, vetted text).

    A plain object array of cells otherwise; the writer joins these as they are and looks
    into the other columns for commas and quotes.
    """


def _safe(cells: np.ndarray) -> np.ndarray:
    return cells.view(SafeCells)


#: ".000" .. ".999" and the same with msprof's trailing TAB.
_FRAC3 = np.array([f".{i:03d}" for i in range(1000)], dtype=object)
_FRAC3_TAB = np.array([f".{i:03d}\t" for i in range(1000)], dtype=object)


def _us_strings(ns: np.ndarray, frac: np.ndarray) -> list[str]:
    q, f = np.divmod(np.asarray(ns, dtype=np.int64), 1000)  # floor division, as Python's // and %
    return [a + b for a, b in zip(map(str, q.tolist()), frac[f].tolist())]


def us_text(ns: np.ndarray) -> np.ndarray:
    """Exact int ns -> ``"<us>.<ns % 1000 as 3 digits>"`` (msprof ``DivideByPowersOfTenWithPrecision``)."""
    return np.array(_us_strings(ns, _FRAC3), dtype=object)


def timestamp_cells(ns: pd.Series | np.ndarray) -> np.ndarray:
    """Exact nullable int ns -> ``"<us>.<3 digits>\\t"``, ``N/A`` where missing."""
    values = pd.array(ns, dtype="Int64")
    missing = np.asarray(values.isna())
    out = np.full(len(values), NA, dtype=object)
    if (~missing).any():
        out[~missing] = _us_strings(values[~missing].to_numpy(np.int64), _FRAC3_TAB)
    return _safe(out)


def _by_value(keys: np.ndarray, texts_of: Callable[[np.ndarray], list[str]]) -> np.ndarray:
    """Cells of a column formatted once per distinct value: ``texts_of(unique keys)`` gathered by row.

    Table columns repeat their values (an op's block dim, its PMU times, a stream id), so a
    million-row column usually holds a few thousand distinct values.
    """
    codes, uniques = pd.factorize(keys)
    table = np.empty(len(uniques) + 1, dtype=object)
    table[:-1] = texts_of(uniques)
    table[-1] = NA  # code -1: missing
    return table[codes]


def float_cells(values: np.ndarray, decimals: int | None = 3) -> np.ndarray:
    """Floats with ``decimals`` decimals (``None``: Python's shortest repr); NaN -> ``N/A``.

    Formatted once per distinct bit pattern (so -0.0 keeps its sign), as Python prints them.
    """
    fmt = repr if decimals is None else f"{{:.{decimals}f}}".format
    v = np.ascontiguousarray(values, dtype=float)

    def texts(bits: np.ndarray) -> list[str]:
        return [NA if x != x else fmt(x) for x in bits.view(np.float64).tolist()]

    return _safe(_by_value(v.view(np.int64), texts))


def wait_cells(wait_us: np.ndarray) -> np.ndarray:
    """``Task Wait Time(us)``: ``0`` on the first row, ``std::to_string`` (6 decimals) on the others."""
    ns = np.rint(np.nan_to_num(np.asarray(wait_us, dtype=float)) * 1000).astype(np.int64)
    out = _by_value(ns, lambda u: [t + "000" for t in _us_strings(u, _FRAC3)])
    if len(out):
        out[0] = "0"
    return _safe(out)


#: First characters that make a spreadsheet read a cell as a formula (OWASP "CSV injection").
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def neutralised(text: str) -> str:
    """``text`` as a CSV cell no spreadsheet runs: ``'`` before a would-be formula.

    A cell already starting with quotes before such a character gets one more, so
    removing exactly one ``'`` on import always gives the original text back.
    """
    if text.lstrip("'")[:1] in FORMULA_START and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def _neutralised_cells(cells: np.ndarray) -> np.ndarray:
    risky = [i for i, c in enumerate(cells.tolist()) if c[:1] in FORMULA_START or c[:1] == "'"]
    if risky:
        cells = cells.copy()
        for i in risky:
            cells[i] = neutralised(cells[i])
    return cells


def column_cells(series: pd.Series, decimals: int | None = 3, neutralise: bool = True) -> np.ndarray:
    """Any other column: integers as integers, floats by :func:`float_cells`, text as is (:func:`neutralised`
    unless ``neutralise`` is False); missing -> N/A."""
    if pd.api.types.is_integer_dtype(series.dtype):  # each distinct value once; missing (code -1) -> N/A
        return _safe(_by_value(pd.array(series, dtype="Int64"), lambda u: [str(int(x)) for x in u]))
    if pd.api.types.is_float_dtype(series.dtype):
        return float_cells(series.to_numpy(float), decimals)
    if isinstance(series.dtype, pd.CategoricalDtype):  # format each category once
        safe = neutralised if neutralise else str
        texts = np.array([NA if pd.isna(c) else safe(str(c)) for c in series.cat.categories] + [NA], dtype=object)
        cells = texts[series.cat.codes.to_numpy()]
        return _safe(cells) if not any(_needs_quotes(t) for t in texts.tolist()) else cells
    values = series.astype(object).to_numpy()
    missing = pd.isna(values)
    out = np.where(missing, NA, values).astype(object)
    if not len(out):
        return out
    cells = np.array([str(v) for v in out], dtype=object)
    return _neutralised_cells(cells) if neutralise else cells


def quoted(cells: np.ndarray) -> np.ndarray:
    """Cells wrapped in literal double quotes (shape columns; ``N/A`` stays bare), as msprof and
    torch_npu print them: the CSV quoting then shows ``\"\"\"2,3;3\"\"\"`` in the file."""
    codes, uniques = pd.factorize(np.asarray(cells, dtype=object))
    table = np.array([c if c == NA else f'"{c}"' for c in uniques.tolist()] + [NA], dtype=object)
    return table[codes]


def table_cells(frame: pd.DataFrame, exact_ns: pd.DataFrame | None = None, decimals: int | None = 3,
                quote: Sequence[str] = ()) -> list[np.ndarray]:
    """Every column of ``frame`` as formatted cells, by position (duplicate names allowed).

    ``exact_ns`` (from :meth:`Source.times_ns`) holds the timestamp columns, in order of
    their positions in ``frame``; ``Task Wait Time(us)`` follows msprof's rule.
    """
    ts_names = list(exact_ns.columns) if exact_ns is not None else []
    next_ts = 0
    cols = []
    recent: list[tuple[str, pd.Series, np.ndarray]] = []  # the last columns formatted: (how, values, cells)
    for i, name in enumerate(frame.columns):
        series = frame.iloc[:, i]
        if next_ts < len(ts_names) and name == ts_names[next_ts]:
            how, values = "timestamp", exact_ns.iloc[:, next_ts]
            next_ts += 1
        elif name == "Task Wait Time(us)":
            how, values = "wait", series
        else:  # a quoted cell starts with '"': no spreadsheet runs it, and it must read back as written
            how, values = f"plain {name not in quote}", series
        cells = _same_as_recent(recent, how, values)
        if cells is None:
            if how == "timestamp":
                cells = timestamp_cells(values)
            elif how == "wait":
                cells = wait_cells(values.to_numpy(float))
            else:
                cells = column_cells(values, decimals, neutralise=name not in quote)
            recent = [(how, values, cells)] + recent[:2]
        cols.append(quoted(cells) if name in quote else cells)
    return cols


def _same_as_recent(recent: list[tuple[str, pd.Series, np.ndarray]], how: str, values: pd.Series) -> np.ndarray | None:
    """The cells of one of the last columns formatted the same way with the same values (tables repeat
    columns: torch_npu's ``Active`` totals are the allocated ones), else ``None``."""
    for prev_how, prev, cells in recent:
        if prev_how == how and prev.dtype == values.dtype and len(prev) == len(values) \
                and prev.iloc[:8].equals(values.iloc[:8]) and prev.reset_index(drop=True).equals(values.reset_index(drop=True)):
            return cells
    return None


def _needs_quotes(cell: str) -> bool:
    """Whether the csv module (minimal quoting, ``\\n`` line ends) would quote this cell."""
    return "," in cell or '"' in cell or "\n" in cell or "\r" in cell


def _csv_field(cell: str) -> str:
    """One cell as ``csv.writer`` writes it in a row of several (quoted when it needs it)."""
    if not _needs_quotes(cell):
        return cell
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow([cell, ""])
    return buf.getvalue()[:-2]  # without the empty second cell's comma and the line end


def _csv_column(cells: np.ndarray) -> list[str]:
    """A column's cells as written in a row: as they are when known safe, else each distinct cell
    checked (and quoted, as csv.writer quotes) once."""
    if isinstance(cells, SafeCells):
        return cells.tolist()
    codes, uniques = pd.factorize(np.asarray(cells, dtype=object))
    table = np.array([_csv_field(str(c)) for c in uniques.tolist()], dtype=object)
    return table[codes].tolist()


#: Rows formatted into text at a time (bounds the memory the row strings take).
_ROWS_PER_BLOCK = 200_000


def _csv_blocks(header: Sequence[str], cols: list[np.ndarray], start: int, stop: int) -> Iterator[str]:
    """The CSV text in blocks: what ``csv.writer(lineterminator="\\n")`` writes, row by row, built
    by joining each row's cells (a table of several columns: the csv module's only special case, a
    row of one empty cell, needs one column)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(header)
    yield buf.getvalue()
    if len(cols) < 2:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(zip(*(c[start:stop] for c in cols)))
        yield buf.getvalue()
        return
    for lo in range(start, stop, _ROWS_PER_BLOCK):
        hi = min(lo + _ROWS_PER_BLOCK, stop)
        rows = map(",".join, zip(*(_csv_column(c[lo:hi]) for c in cols)))
        yield "\n".join(rows) + "\n"


def _csv_text(header: Sequence[str], cols: list[np.ndarray], start: int, stop: int) -> str:
    return "".join(_csv_blocks(header, cols, start, stop))


def _write_csv_file(path: Path, header: Sequence[str], cols: list[np.ndarray], start: int, stop: int) -> None:
    with open(path, "w", encoding="utf-8") as f:  # as Path.write_text: newlines translated like it
        for block in _csv_blocks(header, cols, start, stop):
            f.write(block)


def write_table(directory: Path, name: str, stamp: str, header: Sequence[str], cols: list[np.ndarray],
                slice_rows: int = CSV_LIMIT) -> list[Path]:
    """``<name>_<stamp>.csv``, or ``<name>_slice_<i>_<stamp>.csv`` slices of ``slice_rows`` rows."""
    n = len(cols[0]) if cols else 0
    if n <= slice_rows:
        targets = [(directory / f"{name}_{stamp}.csv", 0, n)]
    else:
        targets = [(directory / f"{name}_slice_{i}_{stamp}.csv", start, min(start + slice_rows, n))
                   for i, start in enumerate(range(0, n, slice_rows))]
    for path, start, stop in targets:
        _write_csv_file(path, header, cols, start, stop)
    return [p for p, _, _ in targets]


def write_csv(path: Path, header: Sequence[str], cols: list[np.ndarray]) -> Path:
    """One CSV file (torch_npu's views are never sliced)."""
    n = len(cols[0]) if cols else 0
    _write_csv_file(path, header, cols, 0, n)
    return path
