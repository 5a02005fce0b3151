"""Reading the CSV summaries of msprof and torch_npu into typed pandas columns.

The files are read as text first (pyarrow's multithreaded CSV reader), so each
column can be converted the way msprof wrote it (reference §4): ``N/A`` and
empty cells are missing values, timestamps carry a trailing TAB, shape cells
may carry literal quotes, and timestamps are parsed from their decimal text
into integer ns (a float64 µs value near 1.7e15 cannot hold the ns digits).
Headers are kept as written, duplicates included (step_trace repeats its
``Reduce`` column pair), so the cells are addressed by position.  Every
conversion error names the file, the line, the column and what was expected.
"""

from __future__ import annotations

import codecs
import csv
import gc
import io
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from ...errors import ImportFormatError
from ...prof import json_text
from ..files import oddity, open_binary, read_bytes, reading, what_is_there

#: Cells msprof prints for a value it does not have.
NA_TOKENS = ("N/A", "")
_NA = pa.array(NA_TOKENS)
_DECIMAL = r"^(?P<whole>\d+)(?:\.(?P<frac>\d*))?$"
_EXPONENT = re.compile(r"^\d+(?:\.\d*)?[eE][+-]?\d+$")
_HALF = Fraction(1, 2)
_HALF_NS_US = Decimal("0.0005")
_INT64_NS_US = Decimal(2**63) / 1000
#: The largest ns an int64 holds: a µs cell past it is no time the tables can hold.
_MAX_NS = 2**63 - 1


class NumberText(str):
    """A JSON number with a fraction or an exponent, as written (``read_json(exact_floats=True)``):
    text, so no digit is lost, and not a ``str``, so a reader can tell it from a JSON string."""


@contextmanager
def gc_paused() -> Iterator[None]:
    """Parsing builds millions of acyclic containers: the collector's passes over them (and over
    the rest of the heap) cost about as much as the parse itself."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def read_json(path: Path, exact_floats: bool = False, data: bytes | None = None, unique_keys: bool = True) -> Any:
    """A JSON file's content, or an ImportFormatError naming the file.

    Parsed by :func:`geprof_nb.prof.json_text.loads`: orjson (traces and communication.json run to hundreds
    of MB), the stdlib parser for what orjson refuses (NaN/Infinity, lone surrogates) and to word the
    errors; at most 1024 levels of nesting, integers past 64 bits as (correctly rounded) floats
    (trace_view checks every number it uses, communication.json and the info.json facts are read as
    floats anyway), a key given twice with different values refused unless ``unique_keys`` is False
    (for timelines of millions of events, where the last is read).  ``exact_floats``: numbers with a
    fraction or an exponent (and integers past 64 bits) as :class:`NumberText` (exact ns timestamps).
    ``data``: the file's bytes when the caller has read them already.
    """
    if data is None:
        data = read_bytes(path, "a JSON file")
    bom = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0  # which orjson refuses
    body = memoryview(data)[bom:] if bom else data
    if not bytes(body[:64]).strip() and not bytes(body).strip():
        raise ImportFormatError(f"{path}: empty file (expected a JSON document)")
    try:
        with gc_paused():
            return json_text.loads(body, unique_keys=unique_keys, parse_float=NumberText if exact_floats else None)
    except json_text.JsonTextError as exc:
        if exc.kind == "encoding":
            raise ImportFormatError(f"{path}: {exc.reason}") from None
        cut = "; truncated file?" if exc.kind == "syntax" else ""
        error = ImportFormatError(f"{path}: not valid JSON ({exc.reason}{cut})")
        raise error from (exc if exc.kind == "number" else None)  # a reader of numbers as written may take it


def _trimmed(column: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.utf8_trim_whitespace(column)


def _mask(values: pa.ChunkedArray) -> np.ndarray:
    return values.to_numpy(zero_copy_only=False).astype(bool) if len(values) else np.zeros(0, bool)


def _without_na(trimmed: pa.ChunkedArray) -> tuple[pa.ChunkedArray, np.ndarray]:
    """The cells with N/A and empty ones as nulls, and where they were."""
    missing = pc.is_in(trimmed, value_set=_NA)
    return pc.if_else(missing, pa.scalar(None, pa.string()), trimmed), _mask(missing)


def exponent_ns(text: str) -> int | None:
    """Exact ns of a µs number in exponent notation (``1.69512E+15``, as a spreadsheet writes it), by its
    value, rounded half up; None if it is not one, is negative or is past int64 ns (bounds first:
    ``1e-999999`` or ``1e999999`` would make a huge Fraction)."""
    if not _EXPONENT.fullmatch(text.strip()):
        return None
    value = Decimal(text.strip())
    if value >= _INT64_NS_US:
        return None
    return math.floor(Fraction(value) * 1000 + _HALF) if value >= _HALF_NS_US else 0


def decimal_ns(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact ns of µs decimal strings (``"1717575960208020.758\\t"`` -> 1717575960208020758).

    Returns (ns, valid, bad): ``valid`` marks parsed cells, ``bad`` cells that are neither a
    decimal nor N/A.  Digits past the ns are rounded half up; no float is involved.  A cell in
    exponent notation (a file saved by a spreadsheet) is read by its value (:func:`exponent_ns`).
    """
    v = _trimmed(column)
    missing = _mask(pc.is_in(v, value_set=_NA))
    parts = pc.extract_regex(v, _DECIMAL)
    ok = _mask(pc.is_valid(parts))
    whole = pc.fill_null(pc.struct_field(parts, "whole"), "0")
    fits = _mask(pc.less_equal(pc.utf8_length(pc.utf8_ltrim(whole, "0")), len(str(_MAX_NS // 1000))))
    ok &= fits  # more digits of µs than int64 ns hold: not converted (the cast would fail, or int() refuse)
    whole = pc.if_else(pa.array(fits), whole, pa.scalar("0"))
    frac = pc.utf8_slice_codeunits(pc.utf8_rpad(pc.fill_null(pc.struct_field(parts, "frac"), ""), 4, "0"), 0, 4)
    whole_n = pc.cast(whole, pa.int64()).to_numpy()
    frac_n = pc.cast(frac, pa.int64()).to_numpy()
    below = (whole_n < _MAX_NS // 1000) | ((whole_n == _MAX_NS // 1000) & (frac_n // 10 + (frac_n % 10 >= 5)
                                                                          <= _MAX_NS % 1000))
    ok &= below  # past int64 ns, the sum below would wrap around
    ns = np.where(ok, np.where(below, whole_n, 0) * 1000 + frac_n // 10 + (frac_n % 10 >= 5), 0).astype(np.int64)
    bad = ~(missing | ok)
    if bad.any():
        cells = v.to_numpy(zero_copy_only=False)
        for i in np.flatnonzero(bad).tolist():
            exact = exponent_ns(cells[i])
            if exact is not None:
                ns[i], ok[i], bad[i] = exact, True, False
    return ns, ok, bad


def exponent_cells(column: pa.ChunkedArray) -> np.ndarray:
    """Where a column's cells are numbers in exponent notation."""
    return _mask(pc.fill_null(pc.match_substring_regex(_trimmed(column), _EXPONENT.pattern), False))


@dataclass
class CsvTable:
    """One CSV summary (or the ordered slices of one), cells as text, header as written."""

    files: list[Path]
    header: list[str]
    cells: pa.Table  # string columns named "0".."n-1"
    file_rows: list[int] = field(default_factory=list)  # data rows per file, in order
    row_ids: np.ndarray | None = None  # each row's index among all rows read (after select)
    #: per file, the 1-based line of each row read (None: the rows are lines 2, 3, ... in order)
    file_lines: list[np.ndarray | None] = field(default_factory=list)
    #: what the reading passed over or could not check (rows skipped, with file and lines; a last line
    #: without a line break), for the Profile's notes
    skipped: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return self.cells.num_rows

    def has(self, column: str) -> bool:
        return column in self.header

    def position(self, column: str) -> int:
        return self.header.index(column)

    def require(self, columns: list[str], what: str) -> None:
        """Fail on the first missing column, saying what the file should have held."""
        for c in columns:
            if c not in self.header:
                raise ImportFormatError(
                    f"{self.files[0]}: missing column {c!r}; a {what} needs {', '.join(map(repr, columns))} "
                    f"(header read: {', '.join(self.header)})")

    def where(self, row: int) -> tuple[Path, int]:
        """The file and 1-based line of a data row (counted as the file has them: blank lines and line breaks
        inside quoted cells included, found when first asked for)."""
        if self.row_ids is not None:
            row = int(self.row_ids[row])
        if not self.file_lines:
            self.file_lines.extend([None] * len(self.files))
        for k, (path, n) in enumerate(zip(self.files, self.file_rows)):
            if row < n:
                if self.file_lines[k] is None:  # shared by the tables select() makes: found once
                    self.file_lines[k] = _data_lines(path, n)
                return path, int(self.file_lines[k][row])
            row -= n
        return self.files[-1], row + 2

    def bad_value(self, column: int, row: int, expected: str) -> ImportFormatError:
        path, line = self.where(row)
        value = self.cells.column(column)[row].as_py()
        shown = repr(value) if len(value) <= 60 else f"{value[:40]!r}...{value[-8:]!r} ({len(value)} characters)"
        return ImportFormatError(f"{path}, line {line}, column {self.header[column]!r}: cannot parse {shown}; "
                                 f"expected {expected}")

    def select(self, keep: np.ndarray) -> CsvTable:
        """The rows where ``keep`` is true (errors still name their lines in the files)."""
        if keep.all():
            return self
        ids = np.flatnonzero(keep) if self.row_ids is None else self.row_ids[keep]
        return replace(self, cells=self.cells.filter(pa.array(keep)), row_ids=ids)

    def columns(self, keep: list[int], header: list[str]) -> CsvTable:
        """The columns at positions ``keep``, named ``header`` (the rows and their lines unchanged)."""
        cells = self.cells.select(keep).rename_columns([str(i) for i in range(len(keep))])
        return replace(self, header=list(header), cells=cells)

    def notes(self, exact: tuple[str, ...] = ()) -> list[str]:
        """What a reader of the table should know: rows skipped, and ``exact`` columns (timestamps, ids)
        holding numbers in exponent notation, which a spreadsheet cut to a few digits."""
        out = list(self.skipped)
        for pos, column in enumerate(self.header):
            if column not in exact:
                continue
            where = exponent_cells(self.cells.column(pos))
            if where.any():
                path, line = self.where(int(np.argmax(where)))
                value = self.cells.column(pos)[int(np.argmax(where))].as_py().strip()
                out.append(f"{path}: column {column!r} has {int(where.sum())} numbers in exponent notation (line "
                           f"{line}: {value}), as a spreadsheet saves them: read by their value, they are only "
                           "as exact as the digits written (times or ids closer than that cannot be told apart)")
        return out

    # ----------------------------------------------------------- conversions
    def _pos(self, column: str | int) -> int:
        return column if isinstance(column, int) else self.position(column)

    def ns(self, column: str | int) -> tuple[np.ndarray, np.ndarray]:
        """Exact integer ns of a µs timestamp/duration column and where it is present."""
        pos = self._pos(column)
        ns, valid, bad = decimal_ns(self.cells.column(pos))
        if bad.any():
            raise self.bad_value(pos, int(np.argmax(bad)), "a decimal number of microseconds such as "
                                 "1717575960208020.758 (or N/A), below 9223372036854775.808 (2**63 ns)")
        return ns, valid

    def _floats(self, pos: int) -> tuple[np.ndarray | None, pa.ChunkedArray, np.ndarray]:
        """(float64 values or None if some cell is not a number, the cells with N/A as null, where N/A was)."""
        values, missing = _without_na(_trimmed(self.cells.column(pos)))
        try:
            return pc.cast(values, pa.float64()).to_numpy(), values, missing
        except pa.ArrowInvalid:
            return None, values, missing

    def floats(self, column: str | int) -> np.ndarray | None:
        """float64 values (NaN for N/A and empty cells), None if some cell is no number."""
        return self._floats(self._pos(column))[0]

    def numbers(self, column: str | int) -> np.ndarray:
        """float64 values; N/A and empty cells are NaN."""
        pos = self._pos(column)
        out, values, missing = self._floats(pos)
        if out is None:
            bad = pd.to_numeric(pd.Series(values.to_pylist(), dtype=object), errors="coerce").isna().to_numpy()
            raise self.bad_value(pos, int(np.argmax(bad & ~missing)), "a number (or N/A)")
        return out

    def integers(self, column: str | int, nullable: bool,
                 required: str | None = None) -> pd.api.extensions.ExtensionArray | np.ndarray:
        """int64 values (``Int64`` with <NA> where N/A if ``nullable`` or if any cell is N/A).

        ``required`` (what the column must hold, e.g. "a device id on every row"): an N/A or
        empty cell is an error naming its line, instead of a missing value.
        """
        pos = self._pos(column)
        values, missing = _without_na(_trimmed(self.cells.column(pos)))
        if required and missing.any():
            raise self.bad_value(pos, int(np.argmax(missing)), required)
        try:
            ints = pc.cast(values, pa.int64())
        except pa.ArrowInvalid:
            ints, bad = _exponent_integers(values)
            if bad is not None:
                raise self.bad_value(pos, bad, "an integer (or N/A) in the 64-bit range") from None
        if not nullable and not missing.any():
            return ints.to_numpy()
        arr = pd.array(pc.fill_null(ints, 0).to_numpy(), dtype="Int64")
        arr[missing] = pd.NA
        return arr

    def category(self, column: str | int, unquote: bool = False,
                 labels: dict[str, str] | None = None) -> pd.Categorical:
        """Text as a categorical with object categories, ``N/A`` kept as text (as in op_summary);
        ``labels``: values read as others (torch_npu's ``HCCL`` as msprof's ``COMMUNICATION``)."""
        encoded = pc.dictionary_encode(self.cells.column(self._pos(column))).combine_chunks()
        codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        names = [unneutralised(s) for s in encoded.dictionary.to_pylist()]
        if unquote:
            names = [unquoted(s) for s in names]
        if labels:
            names = [labels.get(s, s) for s in names]
        if len(set(names)) < len(names):  # "a" and '"a"' (or "=a" and "'=a", or two labels) in one column
            first: dict[str, int] = {}
            codes = np.asarray([first.setdefault(n, len(first)) for n in names], np.int64)[codes]
            names = list(first)
        return pd.Categorical.from_codes(codes, categories=pd.Index(names, dtype=object))

    def strings(self, column: str | int) -> pd.Series:
        values = self.cells.column(self._pos(column)).to_numpy(zero_copy_only=False)
        return pd.Series([unneutralised(v) for v in values], dtype="str")


def _exponent_integers(values: pa.ChunkedArray) -> tuple[pa.Array, int | None]:
    """Integer cells some of which are in exponent notation (``9.4509E+13``, a spreadsheet's), read by
    their value: (the int64 values, None), or (None, the first cell that is no integer)."""
    out = []
    for i, cell in enumerate(values.to_pylist()):
        if cell is None:
            out.append(None)
            continue
        if re.fullmatch(r"[+-]?\d{1,19}", cell, re.ASCII):
            value = int(cell)
        elif _EXPONENT.fullmatch(cell) and len(cell) <= 40:  # a longer exponent is no spreadsheet's
            value = Decimal(cell)  # bounds before int(): 1e999999 would be a number of a million digits
            value = int(value) if value.adjusted() < 19 and value == value.to_integral_value() else None
        else:
            value = None
        if value is None or not -(2**63) <= value < 2**63:  # an int64 column
            return None, i
        out.append(value)
    return pa.array(out, pa.int64()), None


def unneutralised(cell: str) -> str:
    """A text cell without the ``'`` an export put before a would-be spreadsheet formula
    (``export.cells.neutralised``): ``'=SUM(A1)`` -> ``=SUM(A1)``, ``''=x`` -> ``'=x``."""
    if cell[:1] == "'" and cell.lstrip("'")[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return cell[1:]
    return cell


def unquoted(cell: str) -> str:
    """A shape cell without the literal quotes torch_npu wraps it in (``"8,16;16"`` -> ``8,16;16``)."""
    if len(cell) >= 2 and cell[0] == cell[-1] == '"':
        return cell[1:-1]
    return cell


#: What the CSV reader takes, as its errors say.
CSV_FILE = "a CSV file (comma-separated cells, a header line, one row per line)"


def _read_header(path: Path) -> tuple[list[str], int]:
    """The header of a CSV file, its first line that is not blank, and that line's number (msprof-analyze's
    reader, the csv module's, skips blank lines before it too)."""
    with open_binary(path, CSV_FILE) as f, reading(path, CSV_FILE):
        for number, line in enumerate(f, 1):
            try:
                text = line.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                raise ImportFormatError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start} of the header, "
                                        f"line {number})") from None
            if text.strip():
                return _fields(path, text.rstrip("\r\n"), "header"), number
    raise ImportFormatError(f"{path}: empty file (expected a CSV header line)")


def _fields(path: Path, line: str, which: str) -> list[str]:
    """The cells of one CSV line (a stray CR or NUL inside it is an ImportFormatError, not csv.Error)."""
    try:
        return next(csv.reader([line]), [])
    except csv.Error as exc:
        raise ImportFormatError(f"{path}: the {which} line is not CSV ({exc}); accepted: comma-separated cells, "
                                "one row per line") from None


def _records(path: Path) -> Iterator[tuple[int, int]]:
    """(first line, number of fields) of every data record of a CSV file (blank lines skipped, the header
    too), as the csv module splits it: line numbers that count a quoted cell's line breaks."""
    with open_binary(path, CSV_FILE) as raw, reading(path, CSV_FILE), \
            io.TextIOWrapper(raw, encoding="utf-8-sig", errors="replace", newline="") as f:
        reader = csv.reader(f)
        line, header = 1, False
        for cells in reader:
            first, line = line, reader.line_num + 1
            if cells and header:
                yield first, len(cells)
            header = header or len(cells) > 1 or bool("".join(cells).strip())  # as _read_header tells it


def _data_lines(path: Path, n_read: int) -> np.ndarray:
    """The lines of a file's rows when every row was read (none skipped): as the csv module counts them, or,
    if it splits the file otherwise (a quote left open), the rows after the header one line each."""
    lines = np.asarray([line for line, _ in _records(path)], np.int64)
    if len(lines) == n_read:
        return lines
    return np.arange(n_read, dtype=np.int64) + _read_header(path)[1] + 1


def _row_lines(path: Path, n_columns: int, n_read: int) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """The lines of the rows a reading that skipped rows of the wrong width kept, and (line, fields) of
    those it skipped; an ImportFormatError if the csv module does not split the file into as many rows, or
    finds none of the wrong width (a quote that opens in the header)."""
    kept, skipped = [], []
    for line, n in _records(path):
        if n == n_columns:
            kept.append(line)
        else:
            skipped.append((line, n))
    if len(kept) != n_read or not skipped:
        raise ImportFormatError(f"{path}: its rows cannot be told apart ({n_read} rows of the header's {n_columns} "
                                f"fields read, {len(kept)} when split line by line): a quote left open?")
    return np.asarray(kept, np.int64), skipped


def _skipped_note(path: Path, n_columns: int, skipped: list[tuple[int, int]], last_line: int) -> str:
    """The note naming the rows of the wrong width a reading skipped."""
    shown = skipped[:10]
    lines = ", ".join(f"{line} ({n} fields)" for line, n in shown)
    more = f" and {len(skipped) - len(shown)} more" if len(skipped) > len(shown) else ""
    cut = (" The last of them ends the file with too few cells: the file is truncated there (cut off while being "
           "written?)." if skipped[-1][0] == last_line and skipped[-1][1] < n_columns else "")
    return (f"{path}: {len(skipped)} rows skipped, whose cells do not match the header's {n_columns} columns: "
            f"line{'s' if len(skipped) > 1 else ''} {lines}{more}. A row cut short or hand-edited cannot say "
            f"which cell is missing, so none of it is read; every other row is.{cut}")


def _ends_with_line_break(path: Path) -> bool:
    with open_binary(path, CSV_FILE) as f, reading(path, CSV_FILE):
        f.seek(-1, 2)
        return f.read(1) == b"\n"


def _last_line(path: Path) -> int:
    """The number of the file's last non-blank line, counting line breaks as the csv module does (CR LF, LF
    and a bare CR each end a line)."""
    data = read_bytes(path, CSV_FILE).rstrip(b"\r\n")
    return data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n") + 1


def _utf8_error(path: Path, msg: str, header: list[str]) -> ImportFormatError:
    """pyarrow's error for a cell that is not UTF-8, naming the file and the column."""
    col = re.search(r"column #(\d+)", msg)
    where = f" in column {header[int(col.group(1))]!r}" if col and int(col.group(1)) < len(header) else ""
    return ImportFormatError(f"{path}: not UTF-8 text{where} ({msg})")


def _read_cells(path: Path, header: list[str], header_line: int) -> tuple[pa.Table, list[int]]:
    """The rows of one file as text (``"0".."n-1"`` columns), and the number of fields of each row of the wrong
    width, which is skipped.

    The quick reading takes every row as one line (pyarrow's multithreaded chunking).  If it fails (a row of
    the wrong width, a line break inside a quoted cell that a chunk boundary cut), the file is read again with
    line breaks allowed in quoted cells and rows of the wrong width skipped, once it is known to be UTF-8
    (pyarrow decodes the text of a skipped row for its handler, and a row that is not UTF-8 would fail there,
    inside pyarrow, with nowhere to report it: the bytes checked are the bytes parsed)."""
    names = [str(i) for i in range(len(header))]
    read = pcsv.ReadOptions(column_names=names, skip_rows=header_line)
    convert = pcsv.ConvertOptions(column_types={n: pa.string() for n in names}, strings_can_be_null=False,
                                  quoted_strings_can_be_null=False)
    with reading(path, CSV_FILE):
        try:
            return pcsv.read_csv(path, read_options=read, convert_options=convert), []
        except pa.ArrowInvalid as exc:
            if "UTF8" in str(exc):
                raise _utf8_error(path, str(exc), header) from None
        data = read_bytes(path, CSV_FILE)  # parsed as checked: a file rewritten meanwhile cannot bring other bytes
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as bad:
            raise ImportFormatError(f"{path}: not UTF-8 text ({bad.reason} at byte {bad.start})") from None
        wrong_width: list[int] = []

        def skip(row: pcsv.InvalidRow) -> str:  # which lines they were is found after (pyarrow may not know)
            wrong_width.append(row.actual_columns)
            return "skip"

        parse = pcsv.ParseOptions(invalid_row_handler=skip, newlines_in_values=True)
        try:
            return pcsv.read_csv(pa.py_buffer(data), read_options=read, parse_options=parse,
                                 convert_options=convert), wrong_width
        except pa.ArrowInvalid as exc:
            if "UTF8" in str(exc):
                raise _utf8_error(path, str(exc), header) from None
            raise ImportFormatError(f"{path}: not a CSV with the header's {len(header)} columns ({exc})") from None


def read_csv(files: list[Path]) -> CsvTable:
    """Read one CSV (or its slices, in order) as text; the slices must share one header.

    A row with more or fewer cells than the header (a file cut off while being written, or edited
    by hand) is skipped, not read shifted, and said in :attr:`CsvTable.skipped`; a last line without a
    line break is read like any other (msprof-analyze reads it), and said: it may be cut inside its last cell.
    Blank lines are passed over, before the header too; a quoted cell may hold line breaks.
    """
    for path in files:
        if (problem := what_is_there(path)) is not None or not path.exists():
            raise oddity(path, problem or "does not exist", CSV_FILE)
    header, header_line = _read_header(files[0])
    parts, rows, lines, skipped = [], [], [], []
    for path in files:
        if path is not files[0]:
            h, header_line = _read_header(path)
            if h != header:
                raise ImportFormatError(f"{path}: header differs from the first slice {files[0].name} "
                                        f"({len(h)} vs {len(header)} columns); slices of one summary must match")
        part, wrong_width = _read_cells(path, header, header_line)
        at = None
        if wrong_width:
            at, passed = _row_lines(path, len(header), part.num_rows)
            skipped.append(_skipped_note(path, len(header), passed, _last_line(path)))
        elif part.num_rows and not _ends_with_line_break(path):
            skipped.append(f"{path}: its last line ({_last_line(path)}) has no line break after it, as a file cut "
                           "off while being written ends: read as it is (if the file was cut there, that row's "
                           "last cell is incomplete)")
        parts.append(part)
        rows.append(part.num_rows)
        lines.append(at)
    cells = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
    return CsvTable(list(files), header, cells, rows, file_lines=lines, skipped=skipped)


# ----------------------------------------------------------------- typing
#: How a column is converted: ``int`` (int64, Int64 if any N/A), ``Int64`` (always nullable),
#: ``float``, ``ts`` (float µs from exact ns), ``category``, ``shape`` (category, unquoted), ``str``.
Kinds = dict[str, str]


def is_integer_metric(column: str) -> bool:
    """PMU columns that are counts (cycles, L2 cache requests): Int64 like a geprof op_summary."""
    base = re.sub(r"^ai[cv]_", "", column)
    return base.endswith("total_cycles") or base.startswith(("write_cache_", "r0_read_cache_", "r1_read_cache_"))


def typed_frame(table: CsvTable, kinds: Kinds, other: str = "auto",
                given: dict[str, np.ndarray] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The table with each column converted by its kind, and the exact ns of its ``ts`` columns
    (nullable Int64, one column per ``ts`` column in header order, duplicates kept).

    Columns not in ``kinds`` get ``other`` (``auto``: numbers if every present cell is one, Int64
    for count metrics, else a categorical).  ``given`` holds columns the caller already converted.
    """
    data, times, time_names = {}, {}, []
    for pos, col in enumerate(table.header):
        kind = kinds.get(col, other)
        if given and col in given:
            data[pos] = given[col]
        elif kind == "auto":
            floats = table._floats(pos)[0]
            if floats is None:
                data[pos] = table.category(pos)
            else:
                data[pos] = table.integers(pos, nullable=True) if is_integer_metric(col) else floats
        elif kind == "int":
            data[pos] = table.integers(pos, nullable=False)
        elif kind == "Int64":
            data[pos] = table.integers(pos, nullable=True)
        elif kind == "float":
            data[pos] = table.numbers(pos)
        elif kind == "ts":
            ns, valid = table.ns(pos)
            data[pos] = np.where(valid, ns / 1000.0, np.nan)
            exact = pd.array(ns, dtype="Int64")
            exact[~valid] = pd.NA
            times[len(time_names)] = exact
            time_names.append(col)
        elif kind in ("category", "shape"):
            data[pos] = table.category(pos, unquote=kind == "shape")
        elif kind == "str":
            data[pos] = table.strings(pos)
        else:
            raise ValueError(f"unknown column kind {kind!r}")
    index = pd.RangeIndex(len(table))
    frame = pd.DataFrame(data, index=index)
    frame.columns = list(table.header)
    exact_times = pd.DataFrame(times, index=index)
    exact_times.columns = time_names
    return frame, exact_times
