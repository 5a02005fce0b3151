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

A column's cells are :class:`~.pieces.Coded`: each distinct value formatted (and
quoted) once, the rows' bytes gathered by :func:`~.pieces.row_bytes`.  Files are
written as bytes with ``\\n`` line ends, as msprof writes them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .background import BackgroundFile
from .pieces import TEXT, Coded, Groups, by_value, concat, row_bytes, texts, us_texts

NA = "N/A"
#: msprof's ``CSV_LIMIT``: rows per CSV file.
CSV_LIMIT = 1_000_000


def timestamp_cells(ns: pd.Series | np.ndarray) -> Coded:
    """Exact nullable int ns -> ``"<us>.<3 digits>\\t"``, ``N/A`` where missing."""
    values = pd.array(ns, dtype="Int64")
    missing = np.asarray(values.isna())
    present = values[~missing].to_numpy(np.int64)
    codes = np.full(len(values), len(present), np.int64)
    codes[~missing] = np.arange(len(present))
    return Coded(codes, pa.concat_arrays([us_texts(present, after="\t"), texts([NA])]), plain=True)


def _by_value(keys, texts_of: Callable[[np.ndarray], Sequence[str] | pa.Array], plain: bool = False) -> Coded:
    """Cells of a column formatted once per distinct value (``N/A`` where missing).

    Table columns repeat their values (an op's block dim, its PMU times, a stream id), so a
    million-row column usually holds a few thousand distinct values.
    """
    return by_value(keys, texts_of, missing=NA, plain=plain)


def float_cells(values: np.ndarray, decimals: int | None = 3) -> Coded:
    """Floats with ``decimals`` decimals (``None``: Python's shortest repr); NaN -> ``N/A``.

    Formatted once per distinct bit pattern (so -0.0 keeps its sign), as Python prints them.
    """
    fmt = repr if decimals is None else f"{{:.{decimals}f}}".format
    v = np.ascontiguousarray(values, dtype=float)

    def texts_of(bits: np.ndarray) -> list[str] | pa.Array:
        if decimals is not None and len(bits) >= _FIXED_IN_ARRAYS:
            return _fixed_texts(bits.view(np.float64), decimals)
        return [NA if x != x else fmt(x) for x in bits.view(np.float64).tolist()]

    return _by_value(v.view(np.int64), texts_of, plain=True)


#: Distinct floats from which :func:`_fixed_texts` is quicker than Python's format one by one.
_FIXED_IN_ARRAYS = 1000


@cache
def _fractions(decimals: int) -> pa.Array:
    """``"." + i`` with ``decimals`` digits, for every i below ``10**decimals``."""
    return texts([f".{i:0{decimals}d}" for i in range(10**decimals)] if decimals else [""])


def _fixed_texts(values: np.ndarray, decimals: int) -> pa.Array:
    """``f"{v:.{decimals}f}"`` of each float (NaN -> ``N/A``), from the integer nearest to
    ``|v| * 10**decimals`` where the float product cannot be on the other side of a half than the
    exact one (it is within half an ulp of it), by Python for the others (NaN, inf, near halves)."""
    scale = 10**decimals
    with np.errstate(invalid="ignore", over="ignore"):
        product = np.abs(values) * scale
        certain = np.abs(product - np.floor(product) - 0.5) > np.spacing(product)
        whole = np.where(certain, np.rint(product), 0).astype(np.int64)
    negative = np.signbit(values)
    signs = [pa.array(np.where(negative, "-", ""), TEXT)] if negative.any() else []
    made = concat(*signs, pc.cast(pa.array(whole // scale), TEXT), _fractions(decimals).take(pa.array(whole % scale)))
    rest = np.flatnonzero(~certain)
    if not len(rest):
        return made
    fmt = f"{{:.{decimals}f}}".format
    others = texts([NA if x != x else fmt(x) for x in values[rest].tolist()])
    at = np.arange(len(values))
    at[rest] = len(values) + np.arange(len(rest))
    return pa.concat_arrays([made, others]).take(pa.array(at))


def wait_cells(wait_us: np.ndarray, zero_rows: np.ndarray | None = None) -> Coded:
    """``Task Wait Time(us)``: ``0`` on the first row and on ``zero_rows`` (communication tasks, which
    msprof gives a literal ``0``), ``std::to_string`` (6 decimals) on the others."""
    ns = np.rint(np.nan_to_num(np.asarray(wait_us, dtype=float)) * 1000).astype(np.int64)
    out = _by_value(ns, lambda u: us_texts(u, after="000"), plain=True)
    if not len(out):
        return out
    rows = np.zeros(1, np.int64) if zero_rows is None else np.union1d(0, zero_rows)
    return out.set(rows, "0")


def communication_rows(frame: pd.DataFrame) -> np.ndarray:
    """The rows of an op_summary table whose ``Task Type`` is ``COMMUNICATION``."""
    names = list(frame.columns)
    if "Task Type" not in names:
        return np.empty(0, np.int64)
    return np.flatnonzero((frame.iloc[:, names.index("Task Type")] == "COMMUNICATION").to_numpy())


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


def column_cells(series: pd.Series, decimals: int | None = 3, neutralise: bool = True) -> Coded:
    """Any other column: integers as integers, floats by :func:`float_cells`, text as is (:func:`neutralised`
    unless ``neutralise`` is False); missing -> N/A."""
    if pd.api.types.is_integer_dtype(series.dtype):  # each distinct value once
        ints = pd.array(series, dtype="Int64")
        return _by_value(ints, lambda u: pc.cast(pa.array(u.to_numpy(np.int64)), pa.string()), plain=True)
    if pd.api.types.is_float_dtype(series.dtype):
        return float_cells(series.to_numpy(float), decimals)
    safe = neutralised if neutralise else str
    if isinstance(series.dtype, pd.CategoricalDtype):  # format each category once
        codes = series.cat.codes.to_numpy().astype(np.int64)
        categories = [safe(str(c)) for c in series.cat.categories] + [NA]
        codes[codes < 0] = len(categories) - 1
        return Coded(codes, texts(categories))
    values = series.astype(object).to_numpy()
    missing = pd.isna(values).tolist()
    cells = np.array([NA if m else str(v) for v, m in zip(values.tolist(), missing)], dtype=object)
    return _by_value(cells, lambda u: [safe(c) for c in u])


def quoted(cells: Coded) -> Coded:
    """Cells wrapped in literal double quotes (shape columns; ``N/A`` stays bare), as msprof and
    torch_npu print them: the CSV quoting then shows ``\"\"\"2,3;3\"\"\"`` in the file."""
    return cells.map(lambda c: c if c == NA else f'"{c}"')


def table_cells(frame: pd.DataFrame, exact_ns: pd.DataFrame | None = None, decimals: int | None = 3,
                quote: Sequence[str] = (), key=None) -> list[Coded]:
    """Every column of ``frame`` as formatted cells, by position (duplicate names allowed).

    ``exact_ns`` (from :meth:`Source.times_ns`) holds the timestamp columns, in order of
    their positions in ``frame``; ``Task Wait Time(us)`` follows msprof's rule.  ``key``: per
    row, what most columns hold one value for (a task's connection id); a number or categorical
    column that does is formatted from each key's first row.
    """
    group = Groups.of(key) if key is not None and len(frame) else None
    ts_names = list(exact_ns.columns) if exact_ns is not None else []
    next_ts = 0
    cols = []
    recent: list[tuple[str, object, Coded]] = []  # the last columns formatted: (how, values' array, cells)
    for name, series in frame.items():  # by position: duplicate names are separate columns
        if next_ts < len(ts_names) and name == ts_names[next_ts]:
            how, values = "timestamp", exact_ns.iloc[:, next_ts]
            next_ts += 1
        elif name == "Task Wait Time(us)":
            how, values = "wait", series
        else:  # a quoted cell starts with '"': no spreadsheet runs it, and it must read back as written
            how, values = f"plain {name not in quote}", series
        cells = _same_as_recent(recent, how, values.array)
        if cells is None:
            if how == "timestamp":
                cells = timestamp_cells(values)
            elif how == "wait":
                cells = wait_cells(values.to_numpy(float), communication_rows(frame))
            elif group is not None and _one_per_group(group, values):
                cells = group.spread(column_cells(values.iloc[group.first], decimals, neutralise=name not in quote))
            else:
                cells = column_cells(values, decimals, neutralise=name not in quote)
            recent = [(how, values.array, cells)] + recent[:2]
        cols.append(quoted(cells) if name in quote else cells)
    return cols


def _one_per_group(group: Groups, values: pd.Series) -> bool:
    """Whether a number or categorical column holds one value per group (floats by their bits)."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        return group.holds_one(values.cat.codes.to_numpy())
    if pd.api.types.is_float_dtype(values.dtype):
        return group.holds_one(values.to_numpy(float).view(np.int64))
    if pd.api.types.is_integer_dtype(values.dtype):
        missing = values.isna().to_numpy()
        return group.holds_one(missing) and group.holds_one(values.to_numpy(np.int64, na_value=0))
    return False


def _same_as_recent(recent: list[tuple[str, object, Coded]], how: str, values) -> Coded | None:
    """The cells of one of the last columns formatted the same way with the same values (tables repeat
    columns: torch_npu's ``Active`` totals are the allocated ones), else ``None``; ``values``: a
    column's pandas array."""
    for prev_how, prev, cells in recent:
        if prev_how == how and prev.dtype == values.dtype and len(prev) == len(values) and prev.equals(values):
            return cells
    return None


#: Characters that make a cell quoted: the csv module's minimal quoting (the delimiter, the quote, its ``\n``
#: line end) and a CR too, which it leaves bare with a ``\n`` line end although every reader (pyarrow, the
#: csv module, a spreadsheet) takes a bare CR for the end of a line.
_QUOTED_IF = '[,"\r\n]'


def csv_field(cell: str) -> str:
    """A cell as written in a row of several: quoted (its quotes doubled) when it holds one of :data:`_QUOTED_IF`."""
    return '"' + cell.replace('"', '""') + '"' if re.search(_QUOTED_IF, cell) else cell


def _csv_column(cells: Coded, alone: bool) -> Coded:
    """A column's cells as written in a row: the distinct cells the csv module quotes (minimal
    quoting, ``\\n`` line ends) quoted as it quotes them; ``alone``: the only column, where it
    writes an empty cell as ``""``."""
    if cells.plain:
        return cells
    risky = pc.match_substring_regex(cells.texts, _QUOTED_IF)
    if alone:
        risky = pc.or_(risky, pc.equal(cells.texts, ""))
    if not pc.any(risky).as_py():
        return cells
    fields = cells.texts.to_pylist()
    quote = np.flatnonzero(risky.to_numpy(zero_copy_only=False)).tolist()
    for i in quote:
        fields[i] = '""' if alone and not fields[i] else csv_field(fields[i])
    return Coded(cells.codes, texts(fields))


def _write_csv_file(path: Path, header: Sequence[str], cols: list[Coded], start: int, stop: int) -> None:
    """What ``csv.writer(lineterminator="\\n")`` writes for the header and rows ``start`` .. ``stop - 1`` (a cell
    holding a CR quoted too: :data:`_QUOTED_IF`)."""
    head = ",".join(csv_field(name) for name in header) if len(header) != 1 or header[0] else '""'
    pieces: list[Coded | str] = []
    for k, c in enumerate(cols):
        pieces += [_csv_column(c, len(cols) == 1), "\n" if k == len(cols) - 1 else ","]
    with BackgroundFile(path) as f:
        f.write((head + "\n").encode("utf-8"))
        for chunk in row_bytes(pieces, start, stop) if cols else ():
            f.write(chunk)


def write_table(directory: Path, name: str, stamp: str, header: Sequence[str], cols: list[Coded],
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


def write_csv(path: Path, header: Sequence[str], cols: list[Coded]) -> Path:
    """One CSV file (torch_npu's views are never sliced)."""
    n = len(cols[0]) if cols else 0
    _write_csv_file(path, header, cols, 0, n)
    return path
