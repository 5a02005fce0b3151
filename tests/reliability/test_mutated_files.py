"""A property-based battery over mutated real files, for every importer (issue 25): each layout of
``analysis/registry.py`` (torch_npu text, msprof text, the Parquet export and one whose manifest cannot be
read, torch_npu's and msprof's SQLite DBs) and geprof run directories, every kind of file each reads.

A case takes one file and mutates it: its bytes (a byte changed, bytes put in or cut out, the file cut
short), a CSV cell (numbers past int64 or int()'s 4300 digits, negative and infinite values, N/A, quotes,
CR and LF, text that is not UTF-8), a CSV line (gone, repeated, blank, moved), a JSON value anywhere in the
document (nested 1100 levels, numbers past a float, a key given twice, NaN, a lone surrogate), a DB cell
(any SQLite value in any column) or a record chunk's bytes.  Then it opens the run and reads the tables
that file feeds, and its notes.  Whatever happens is one of the documented errors
(:class:`~geprof_nb.errors.ImportFormatError`, :class:`~geprof_nb.errors.RunDirError`) naming the file or
its run, or tables; never another exception, and never one raised where nobody can catch it (pyarrow's
handler of rows of the wrong width raised UnicodeDecodeError inside itself: an "unraisable" exception, an
error here).

The sources are the real files in ``tests/data`` (SOURCES.md there) and, where the workspace has them,
``../shared/real-data`` (the whole 2 MB trace_view.json of level0); the msprof summaries other than the real
older op_summary and the DBs are written from a run (torch_npu's DB layout, exported from a run, stands in for
one: the real runs here are text).  Cases are derandomized (the same on every machine); each reads a whole run
(25-150 ms on a loaded machine), so the cheap mutations get most of them; the last test checks they add up to
5,000, a hundred or more for each importer.
"""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
import sqlite3
import sys
import warnings
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import geprof_nb
from geprof_nb.errors import ImportFormatError, RunDirError
from geprof_nb.prof import rawdata
from helpers.real_data import OLDER_OP_SUMMARY, PYTORCH_TEXT, SERVER_RANKS, SHARED_REAL_DATA
from helpers.real_fixtures import STAMP, write_msprof
from helpers.reliability_helpers import make_earlier_run

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")]

DOCUMENTED = (ImportFormatError, RunDirError)
#: Cases run, by (importer, what was mutated): the last test adds them up.
CASES: Counter = Counter()
OUT = "ASCEND_PROFILER_OUTPUT"
MS = "mindstudio_profiler_output"


def cases(n: int):
    return settings(max_examples=n, deadline=None, database=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))


# ================================================================================ the mutations
#: Cells that broke or nearly broke a reader: past int64 and int()'s digits, negative, infinite, N/A, spreadsheet
#: exponents, quotes and line breaks, text that is not UTF-8 (written as such), formula-like text.
CELLS = ["", "N/A", "n/a", "-1", "-0.0", "-5.5", "0", "1e308", "1e400", "inf", "-inf", "nan", "NaN", "1" * 20,
         "9" * 30 + ".5", "1" * 5000, "9223372036854775.807", "9223372036854775.808", "9.4509E+13", "1.69512E+15",
         "1e-400", "1_000", "\u0663", '"', '""', 'a"b', "a,b", "x\ny", "x\ry", "\r\n", "\t", " ", "=SUM(A1)", "'=x",
         "\x00", "\udcff", "\ud800", "0x10", "+3", "1736412474730135.222\t", "8,16;16", "NPU:99999999999999999999"]
#: JSON texts put in place of a value: nested past both parsers, numbers past a float and past int(), a key
#: given twice, what only the stdlib parser reads.
JSON_TEXTS = ["[" * 1100 + "]" * 1100, "[NaN, " + "[" * 1100 + "]" * 1100 + "]", "1" * 5000, "-" + "1" * 400,
              "1e400", "18446744073709551616", "-9223372036854775809", "NaN", "-Infinity", '"\\ud800"',
              '{"a": 1, "a": 2}', '{"ts": "1", "ts": "2"}', "null", "true", "[]", "{}", '""', '"N/A"', "-1", "0",
              "1.5", '"1736412474730135.222"', '"' + "x" * 2000 + '"', '[{"a": [1, {"b": null}]}]']
#: Values an SQLite cell can hold (its columns take any of them).
SQL_VALUES = [None, 0, -1, 2**63 - 1, -(2**63), 1.5, -1e308, float("inf"), float("nan"), "", "N/A", "x" * 300,
              "1" * 50, b"\x00\xff", "\ud800".encode("utf-8", "surrogatepass"), "[[[[", '{"a": 1, "a": 2}']

BYTES = st.sampled_from([b"", b"\x00", b"\xff\xfe", b"\r", b"\n", b"\r\n", b'"', b",", b"\x93NUMPY", b"{", b"[",
                         b"]", b"}", b"\\u", b"1e400", b"-", b"\xef\xbb\xbf"]) | st.binary(max_size=8)


@st.composite
def byte_mutation(draw) -> tuple:
    """A change to a file's bytes: ("flip", at, byte), ("insert", at, bytes), ("cut", at, length), ("truncate", at),
    positions as fractions of the file."""
    kind = draw(st.sampled_from(["flip", "insert", "cut", "truncate"]))
    at = draw(st.floats(0, 1))
    if kind == "flip":
        return kind, at, draw(st.integers(0, 255))
    if kind == "insert":
        return kind, at, draw(BYTES)
    if kind == "cut":
        return kind, at, draw(st.integers(1, 64))
    return kind, at, None


def mutate_bytes(data: bytes, mutation: tuple) -> bytes:
    kind, at, arg = mutation
    k = int(at * len(data))
    if kind == "flip" and data:
        k = min(k, len(data) - 1)
        return data[:k] + bytes([arg]) + data[k + 1:]
    if kind == "insert":
        return data[:k] + arg + data[k:]
    if kind == "cut":
        return data[:k] + data[k + arg:]
    return data[:k]


CELL = st.sampled_from(CELLS) | st.text(max_size=10)


@st.composite
def line_mutation(draw) -> tuple:
    """A change to a CSV's lines: a cell replaced, or a line deleted, repeated, blanked, moved or put first."""
    kind = draw(st.sampled_from(["cell", "cell", "cell", "delete", "repeat", "blank", "swap", "blank first"]))
    return kind, draw(st.floats(0, 1)), draw(st.integers(0, 80)), draw(CELL), draw(st.floats(0, 1))


def _quote(cell: str) -> str:
    return '"' + cell.replace('"', '""') + '"' if any(c in cell for c in ',"\r\n') else cell


def _raw(text: str) -> bytes:
    """``text`` as UTF-8, a lone surrogate as the byte it escapes (\\udcff: 0xff) or as its own 3 bytes."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def mutate_csv(data: bytes, mutation: tuple) -> bytes:
    """Apply a :func:`line_mutation` (the file is cut into lines at LF; a cell is replaced as a CSV writer would
    write it, a value that is no UTF-8 as its bytes)."""
    import csv

    kind, at, col, cell, other = mutation
    lines = data.split(b"\n")
    k = 1 + int(at * max(1, len(lines) - 2)) if len(lines) > 2 else 0
    j = 1 + int(other * max(1, len(lines) - 2)) if len(lines) > 2 else 0
    if kind == "cell":
        try:
            cells = next(csv.reader([lines[k].decode("utf-8").rstrip("\r")]), [])
        except (UnicodeDecodeError, csv.Error):
            return data
        if not cells:
            return data
        cells[col % len(cells)] = cell
        lines[k] = _raw(",".join(_quote(c) for c in cells))
    elif kind == "delete":
        del lines[k]
    elif kind == "repeat":
        lines.insert(k, lines[k])
    elif kind == "blank":
        lines.insert(k, b"")
    elif kind == "swap":
        lines[k], lines[j] = lines[j], lines[k]
    else:
        lines.insert(0, b"")
    return b"\n".join(lines)


@st.composite
def json_mutation(draw) -> tuple:
    """A value of a JSON document replaced: where (choices down the tree) and by what (a text of :data:`JSON_TEXTS`
    or a generated scalar)."""
    path = draw(st.lists(st.integers(0, 10**6), max_size=6))
    text = draw(st.sampled_from(JSON_TEXTS) | st.builds(json.dumps, st.integers(-(2**70), 2**70) | st.floats()
                                                         | st.text(max_size=12)))
    return path, text


HOLE = "\x00geprof-hole\x00"


def mutate_json(data: bytes, mutation: tuple) -> bytes:
    """Replace the value ``mutation`` points to with its text (put in as text: a document nested 1100 levels
    cannot be built and dumped in Python); a file that is not JSON is left as it is."""
    choices, text = mutation
    try:
        doc = json.loads(data.decode("utf-8-sig"))
    except (ValueError, RecursionError):
        return data
    parent, key, node = None, None, doc
    for c in choices:
        if isinstance(node, dict) and node:
            key = list(node)[c % len(node)]
        elif isinstance(node, list) and node:
            key = c % len(node)
        else:
            break
        parent, node = node, node[key]
    if parent is None:
        return text.encode("utf-8", "surrogatepass")
    parent[key] = HOLE
    return json.dumps(doc).replace(json.dumps(HOLE), text).encode("utf-8", "surrogatepass")


# ============================================================================ reading and checking
def check(path: Path, run: Path, data: bytes, read) -> None:
    """Write ``data`` over ``path``, ``read()``, put the original back: anything raised is a documented error
    naming the file or its run; no exception is raised where nobody can catch it."""
    original = path.read_bytes()
    path.write_bytes(data)
    unraisable: list = []
    hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            read()
    except DOCUMENTED as exc:
        message = str(exc)
        assert str(path) in message or str(run) in message or path.name in message, message
    finally:
        sys.unraisablehook = hook
        path.write_bytes(original)
    assert not unraisable, [u.exc_value for u in unraisable]


def reader(run: Path, *tables: str, source: tuple[str, ...] = ()):
    """Open ``run`` and read ``tables`` (Profile attributes), ``source`` methods and the notes."""
    def read() -> None:
        p = geprof_nb.load(run)
        for table in tables:
            getattr(p, table)
        for method in source:
            getattr(p.source, method)()
        p.notes  # noqa: B018 - every file's reading notes (files not read yet are read for them)
    return read


def copy(src: Path, to: Path) -> Path:
    dst = to / src.name
    shutil.copytree(src, dst)
    return dst


# ====================================================================================== torch_npu
@pytest.fixture(scope="module")
def pt_runs(tmp_path_factory):
    """Copies of the real torch_npu runs: the three profiler levels of rank 0, and a server test rank (a short
    row, spreadsheet numbers, no trace)."""
    root = tmp_path_factory.mktemp("pt")
    return [copy(PYTORCH_TEXT / level / "rank0_ascend_pt", root / level) for level in ("level0", "level1", "level2")] \
        + [copy(SERVER_RANKS / "test_rank_1", root / "server")]


#: torch_npu files and the tables they feed.
PT_CSV = {"kernel_details.csv": ("op_summary", "step_breakdown", "communication_statistic"),
          "step_trace_time.csv": ("step_breakdown",), "op_statistic.csv": ("op_statistic",),
          "api_statistic.csv": ("api_statistic",), "operator_memory.csv": ("operator_memory",),
          "memory_record.csv": ("memory_record",)}
PT_JSON = {f"{OUT}/communication.json": ("communication_time", "communication_statistic"),
           f"{OUT}/communication_matrix.json": (), f"{OUT}/trace_view.json": ("op_summary", "step_breakdown"),
           "profiler_info_0.json": ("op_summary",), "profiler_metadata.json": ("op_summary",)}


def _where(run: Path, name: str) -> Path:
    path = run / name if "/" in name or name.startswith("profiler_") else run / OUT / name
    return run / name.replace("_0", "_1") if run.name == "test_rank_1" and name.startswith("profiler_") else path


def _pt_file(pt_runs, k: int, names) -> tuple[Path, Path, str]:
    """The ``k``-th (run, file, name) of the files of ``names`` the runs have."""
    found = [(run, _where(run, name), name) for name in sorted(names) for run in pt_runs
             if _where(run, name).is_file()]
    return found[k % len(found)]


@cases(1000)
@given(k=st.integers(0, 10**6), mutation=line_mutation())
def test_torch_npu_csv_cells_and_lines(pt_runs, k, mutation):
    run, path, name = _pt_file(pt_runs, k, PT_CSV)
    CASES["torch_npu text", "csv lines"] += 1
    check(path, run, mutate_csv(path.read_bytes(), mutation), reader(run, *PT_CSV[name]))


@cases(600)
@given(k=st.integers(0, 10**6), mutation=byte_mutation())
def test_torch_npu_csv_bytes(pt_runs, k, mutation):
    run, path, name = _pt_file(pt_runs, k, PT_CSV)
    CASES["torch_npu text", "csv bytes"] += 1
    check(path, run, mutate_bytes(path.read_bytes(), mutation), reader(run, *PT_CSV[name]))


@cases(600)
@given(k=st.integers(0, 10**6), mutation=json_mutation())
def test_torch_npu_json_values(pt_runs, k, mutation):
    run, path, name = _pt_file(pt_runs, k, PT_JSON)
    CASES["torch_npu text", "json values"] += 1
    check(path, run, mutate_json(path.read_bytes(), mutation),
          reader(run, *PT_JSON[name], source=("communication_matrix",) if "matrix" in name else ()))


@cases(350)
@given(k=st.integers(0, 10**6), mutation=byte_mutation())
def test_torch_npu_json_bytes(pt_runs, k, mutation):
    run, path, name = _pt_file(pt_runs, k, PT_JSON)
    CASES["torch_npu text", "json bytes"] += 1
    check(path, run, mutate_bytes(path.read_bytes(), mutation),
          reader(run, *PT_JSON[name], source=("communication_matrix",) if "matrix" in name else ()))


@pytest.fixture(scope="module")
def full_trace(tmp_path_factory):
    """The whole trace_view.json of level0 (2 MB, read part by part) where the workspace has it, else the cut one."""
    shared = next((p for p in SHARED_REAL_DATA if p.is_dir()), None)
    src = (shared or PYTORCH_TEXT) / "level0" / "rank0_ascend_pt"
    run = copy(PYTORCH_TEXT / "level0" / "rank0_ascend_pt", tmp_path_factory.mktemp("full"))
    shutil.copy(src / OUT / "trace_view.json", run / OUT / "trace_view.json")
    return run


@cases(40)
@given(mutation=json_mutation() | byte_mutation())
def test_a_whole_trace_view(full_trace, mutation):
    CASES["torch_npu text", "whole trace_view"] += 1
    path = full_trace / OUT / "trace_view.json"
    data = path.read_bytes()
    data = mutate_json(data, mutation) if isinstance(mutation[0], list) else mutate_bytes(data, mutation)
    check(path, full_trace, data, reader(full_trace, "op_summary", source=("step_bounds",)))


# ========================================================================================== msprof
@pytest.fixture(scope="module")
def msprof_runs(tmp_path_factory):
    """msprof text output: the real older op_summary (msKPP's) in a PROF_* directory, and a run of every summary
    kind written from the documented formats (reference §4) with its device info and timeline JSON."""
    root = tmp_path_factory.mktemp("msprof")
    older = root / "older" / "PROF_000001_20240605081559123_ABCDEFGHIJKLMNOP"
    (older / MS).mkdir(parents=True)
    shutil.copy(OLDER_OP_SUMMARY, older / MS / f"op_summary_{STAMP}.csv")
    full = write_msprof(root / "full").path
    (full / MS / f"msprof_{STAMP}.json").write_text(json.dumps([
        {"name": "Model@ModelExecute", "ph": "X", "ts": "1717575960208020.758", "dur": 1.0, "args": {"item_id": 1}}]))
    return older, full


MSPROF_FILES = {f"{MS}/{kind}_{STAMP}.csv": tables for kind, tables in {
    "op_summary": ("op_summary", "step_breakdown"), "op_statistic": ("op_statistic",),
    "api_statistic": ("api_statistic",), "task_time": ("task_time", "communication_statistic"),
    "step_trace": ("step_trace", "step_breakdown"), "communication_statistic": ("communication_statistic",),
    "msprof_tx": ("msprof_tx",)}.items()}
MSPROF_JSON = {f"{MS}/msprof_{STAMP}.json": ("step_breakdown",), "device_0/info.json.0": ("op_summary",)}


@cases(700)
@given(k=st.integers(0, 10**6), mutation=line_mutation() | byte_mutation())
def test_msprof_summaries(msprof_runs, k, mutation):
    older, full = msprof_runs
    files = [(older, f"{MS}/op_summary_{STAMP}.csv")] + [(full, name) for name in sorted(MSPROF_FILES)]
    run, name = files[k % len(files)]
    path = run / name
    CASES["msprof text", "csv"] += 1
    data = path.read_bytes()
    data = mutate_csv(data, mutation) if len(mutation) == 5 else mutate_bytes(data, mutation)
    check(path, run, data, reader(run, *MSPROF_FILES[name]))


@cases(200)
@given(k=st.integers(0, 10**6), mutation=json_mutation() | byte_mutation())
def test_msprof_json(msprof_runs, k, mutation):
    _, run = msprof_runs
    name = sorted(MSPROF_JSON)[k % len(MSPROF_JSON)]
    path = run / name
    CASES["msprof text", "json"] += 1
    data = path.read_bytes()
    data = mutate_json(data, mutation) if isinstance(mutation[0], list) else mutate_bytes(data, mutation)
    check(path, run, data, reader(run, *MSPROF_JSON[name]))


# ========================================================================================= Parquet
@pytest.fixture(scope="module")
def parquet_export(tmp_path_factory):
    """The Parquet export of the real level2 run."""
    return geprof_nb.load(PYTORCH_TEXT / "level2" / "rank0_ascend_pt").export(tmp_path_factory.mktemp("pq"),
                                                                             format="parquet")


@cases(150)
@given(mutation=json_mutation() | byte_mutation())
def test_parquet_manifest(parquet_export, mutation):
    """A manifest that cannot be read is the damaged-Parquet layout: its tables are read from the files."""
    CASES["parquet (damaged manifest)", "manifest"] += 1
    path = parquet_export / "manifest.json"
    data = path.read_bytes()
    data = mutate_json(data, mutation) if isinstance(mutation[0], list) else mutate_bytes(data, mutation)
    check(path, parquet_export, data, reader(parquet_export, "op_summary", "step_breakdown", "memory_record",
                                             "communication_time"))


@cases(400)
@given(k=st.integers(0, 10**6), mutation=byte_mutation())
def test_parquet_tables(parquet_export, k, mutation):
    files = sorted(parquet_export.glob("*.parquet"))
    path = files[k % len(files)]
    CASES["parquet", "tables"] += 1
    table = path.name.removesuffix(".parquet").removesuffix(".times")
    tables = ("op_summary",) + ((table,) if hasattr(geprof_nb.analysis.Profile, table) else ())
    check(path, parquet_export, mutate_bytes(path.read_bytes(), mutation), reader(parquet_export, *tables))


# ============================================================================================== DBs
@pytest.fixture(scope="module")
def db_runs(tmp_path_factory):
    """torch_npu's and msprof's SQLite layouts, written from a run (the real torch_npu runs do not export to one)."""
    root = tmp_path_factory.mktemp("db")
    run = geprof_nb.load(make_earlier_run(root / "run").run_dir)
    pt = run.export(root / "pt", format="db")
    ms = run.export(root / "ms", format="msprof_db")
    return [(pt, sorted(pt.rglob("*.db"))), (ms, sorted(ms.rglob("*.db")))]


@functools.cache
def _tables_of(path: Path) -> dict[str, list[str]]:
    """The tables of a DB and their columns (the file is put back after each case: read once)."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {n: [c[1] for c in conn.execute(f'PRAGMA table_info("{n}")')] for n in names}


def _with_cell(data: bytes, table: str, column: str, row: int, value) -> bytes | None:
    """The DB ``data`` with one cell set to ``value``, changed in memory (no journal, no fsync); None if the
    column refuses it (an INTEGER PRIMARY KEY, the rowid, takes integers only)."""
    with contextlib.closing(sqlite3.connect(":memory:")) as conn:
        conn.deserialize(data)
        try:
            conn.execute(f'UPDATE "{table}" SET "{column}" = ? WHERE rowid IN (SELECT rowid FROM "{table}" LIMIT 1 '
                         'OFFSET ?)', (value, row))
        except sqlite3.IntegrityError:
            return None
        conn.commit()
        return conn.serialize()


def _db_importer(run: Path) -> str:
    return "msprof db" if run.name.startswith("PROF_") else "torch_npu db"


@cases(300)
@given(k=st.integers(0, 10**6), table=st.integers(0, 10**6), column=st.integers(0, 10**6), row=st.integers(0, 50),
       value=st.sampled_from(SQL_VALUES) | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8))
def test_db_cells(db_runs, k, table, column, row, value):
    run, files = db_runs[k % len(db_runs)]
    path = files[(k // 2) % len(files)]
    layout = _tables_of(path)
    if not layout:
        return
    name = sorted(layout)[table % len(layout)]
    col = layout[name][column % len(layout[name])]
    data = _with_cell(path.read_bytes(), name, col, row % 8, value)
    if data is None:
        return
    CASES[_db_importer(run), "cells"] += 1
    check(path, run, data, reader(run, "op_summary", "step_breakdown", "communication_time", "memory_record",
                                  "api_statistic"))


@cases(200)
@given(k=st.integers(0, 10**6), mutation=byte_mutation())
def test_db_bytes(db_runs, k, mutation):
    run, files = db_runs[k % len(db_runs)]
    path = files[(k // 2) % len(files)]
    CASES[_db_importer(run), "bytes"] += 1
    check(path, run, mutate_bytes(path.read_bytes(), mutation), reader(run, "op_summary", "step_breakdown"))


# ==================================================================================== run directories
@pytest.fixture(scope="module")
def geprof_run(tmp_path_factory):
    return make_earlier_run(tmp_path_factory.mktemp("geprof")).run_dir


RUN_TABLES = ("op_summary", "step_trace", "step_breakdown", "api_statistic", "communication_time", "task_time")


@cases(250)
@given(mutation=json_mutation() | line_mutation())
def test_run_info_json_and_hash_dictionary(geprof_run, mutation):
    if isinstance(mutation[0], list):
        path = geprof_run / rawdata.INFO_FILE
        data = mutate_json(path.read_bytes(), mutation)
    else:
        path = geprof_run / rawdata.HASH_DICT_FILE
        kind, at, _, cell, _ = mutation
        lines = path.read_bytes().split(b"\n")
        k = int(at * (len(lines) - 1))
        lines[k] = cell.encode("utf-8", "surrogatepass") if kind == "cell" else lines[k][: len(lines[k]) // 2]
        data = b"\n".join(lines)
    CASES["geprof run", "info.json, hash dictionary"] += 1
    check(path, geprof_run, data, reader(geprof_run, *RUN_TABLES))


@cases(260)
@given(k=st.integers(0, 10**6), mutation=byte_mutation())
def test_run_record_chunks(geprof_run, k, mutation):
    chunks = sorted(geprof_run.glob("*/data/*.npy"))
    path = chunks[k % len(chunks)]
    CASES["geprof run", "record chunks"] += 1
    check(path, geprof_run, mutate_bytes(path.read_bytes(), mutation), reader(geprof_run, *RUN_TABLES))


# ============================================================================================ total
#: What the battery mutates for each importer (registry.py's layouts and geprof run directories).
BATTERY = {"torch_npu text": {"csv lines", "csv bytes", "json values", "json bytes", "whole trace_view"},
           "msprof text": {"csv", "json"}, "parquet": {"tables"}, "parquet (damaged manifest)": {"manifest"},
           "torch_npu db": {"cells", "bytes"}, "msprof db": {"cells", "bytes"},
           "geprof run": {"info.json, hash dictionary", "record chunks"}}


def test_the_battery_adds_up_to_five_thousand_cases():
    """Runs last (file order): the mutated files above came to at least 5,000 cases, a hundred or more for each
    importer."""
    if set(CASES) != {(importer, what) for importer, kinds in BATTERY.items() for what in kinds}:
        pytest.skip(f"only some of the battery ran: {sorted(CASES)}")
    per_importer = Counter()
    for (importer, _), n in CASES.items():
        per_importer[importer] += n
    print("mutated-file cases:", dict(per_importer), "total", sum(CASES.values()))
    assert min(per_importer.values()) >= 100, per_importer
    assert sum(CASES.values()) >= 5000, CASES
