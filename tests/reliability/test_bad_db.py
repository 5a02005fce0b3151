"""A torch_npu / msprof database that is not SQLite, is locked, truncated, damaged or lacks what the import reads:
an ImportFormatError naming the file (and the table and column), and the file is never written to."""

from __future__ import annotations

import hashlib
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

import geprof_nb
from geprof_nb.errors import ImportFormatError
from helpers.real_data import DB_RUNS


@pytest.fixture
def run(tmp_path) -> tuple[Path, Path]:
    """A copy of a real torch_npu DB run and its profiler DB."""
    copy = tmp_path / DB_RUNS[0].name
    shutil.copytree(DB_RUNS[0], copy)
    return copy, copy / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"


def load_all(path: Path) -> None:
    p = geprof_nb.load(path)
    for name in ("op_summary", "task_time", "hccl_tasks", "communication_time", "api_statistic", "msprof_tx",
                 "operator_memory", "memory_record", "step_breakdown"):
        getattr(p, name)


def alter(db: Path, *statements: str) -> None:
    conn = sqlite3.connect(db)
    for sql in statements:
        conn.execute(sql)
    conn.commit()
    conn.close()


def test_not_sqlite(run):
    root, db = run
    db.write_bytes(b"{\"traceEvents\": []}\n" * 20)
    with pytest.raises(ImportFormatError, match=rf"^{re.escape(str(db))}: not an SQLite database \(it starts with "
                                                r"'\{\"traceEvents\": '.*expected torch_npu's "):
        load_all(root)


@pytest.mark.parametrize("keep", [0.5, 0.01])
def test_truncated(run, keep):
    root, db = run
    data = db.read_bytes()
    db.write_bytes(data[:int(len(data) * keep)])
    with pytest.raises(ImportFormatError, match=rf"^{re.escape(str(db))}: truncated: the file has "
                                                rf"{int(len(data) * keep)} bytes, its header says 194 pages of 4096 bytes"):
        load_all(root)


def test_damaged_pages(run):
    root, db = run
    data = bytearray(db.read_bytes())
    data[4096 * 20:4096 * 60] = b"\xff" * (4096 * 40)  # whole pages overwritten: the size still fits the header
    db.write_bytes(bytes(data))
    with pytest.raises(ImportFormatError, match=rf"^{re.escape(str(db))}( \(table \w+\))?: (damaged or truncated: "
                                                r"SQLite says|cannot be read)"):
        load_all(root)


def test_locked(run):
    root, db = run
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")  # a profiler still writing the file
    try:
        with pytest.raises(ImportFormatError, match=rf"^{re.escape(str(db))}.*: locked by another process for over "
                                                    r"2 s \(is the profiler still writing it\?\)"):
            load_all(root)
    finally:
        writer.execute("ROLLBACK")
        writer.close()


@pytest.mark.parametrize("table, column", [("TASK", "startNs"), ("COMPUTE_TASK_INFO", "opType"),
                                           ("COMMUNICATION_OP", "opName"), ("TASK_PMU_INFO", "value"),
                                           ("STRING_IDS", "value"), ("CANN_API", "connectionId")])
def test_a_table_without_a_column_it_needs(run, table, column):
    root, db = run
    conn = sqlite3.connect(db)
    columns = [r[1] for r in conn.execute("SELECT * FROM pragma_table_info(?)", (table,))]
    conn.close()
    kept = [c for c in columns if c != column]
    alter(db, f"CREATE TABLE cut AS SELECT {', '.join(kept)} FROM {table}", f"DROP TABLE {table}",
          f"ALTER TABLE cut RENAME TO {table}")
    with pytest.raises(ImportFormatError, match=rf"^{re.escape(str(db))}: table {table} has no column '{column}' "
                                                rf"\(its columns: {', '.join(kept)}\); reading torch_npu's "):
        load_all(root)


def test_a_db_without_task_data(run):
    root, db = run
    alter(db, "DROP TABLE TASK")
    with pytest.raises(ImportFormatError, match=rf"^{re.escape(str(db))}: no table TASK \(its tables: .*STRING_IDS"):
        load_all(root)


def test_an_older_column_name_is_read(run):
    """CANN 8.0's COMPUTE_TASK_INFO says blockDim where today's says blockNum: either is the block dim."""
    root, db = run
    alter(db, "ALTER TABLE COMPUTE_TASK_INFO RENAME COLUMN blockDim TO blockNum")
    assert geprof_nb.load(root).op_summary["Block Num"].max() > 0


def test_text_from_the_file_is_data_never_sql(run):
    """Names, groups and geprof's side-table specs come from the file; none of them becomes part of a statement,
    and the file is opened read-only (its bytes do not change)."""
    root, db = run
    evil = "x'); DROP TABLE TASK; --"
    alter(db, "UPDATE STRING_IDS SET value = ? WHERE id = (SELECT name FROM COMPUTE_TASK_INFO LIMIT 1)".replace(
        "?", "'" + evil.replace("'", "''") + "'"),
          "CREATE TABLE GEPROF_TABLES (name TEXT PRIMARY KEY, spec TEXT)",
          "INSERT INTO GEPROF_TABLES VALUES ('step_trace', '{\"columns\": [\"a\"], \"dtypes\": [\"float64\"]}')",
          "CREATE TABLE \"GEPROF_STEP_TRACE\" (\"a\" REAL, \"b\" REAL)")
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    p = geprof_nb.load(root)
    assert evil in set(p.op_summary["Op Name"].astype(str))
    with pytest.raises(ImportFormatError, match=r"\(table GEPROF_STEP_TRACE\): 2 columns; GEPROF_TABLES says 1"):
        p.step_trace  # noqa: B018 - reading it is the test
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_a_damaged_side_table_spec(run):
    root, db = run
    alter(db, "CREATE TABLE GEPROF_TABLES (name TEXT PRIMARY KEY, spec TEXT)",
          "INSERT INTO GEPROF_TABLES VALUES ('aicpu', 'not json')")
    with pytest.raises(ImportFormatError, match=rf"^{re.escape(str(db))} \(table GEPROF_TABLES\): the spec of "
                                                r'"aicpu" is not JSON'):
        geprof_nb.load(root).aicpu  # noqa: B018
