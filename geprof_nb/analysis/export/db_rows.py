"""Rows into SQLite fast, on both cores: multi-row INSERTs, and one big table written by a second process.

Inserting is most of a DB export's time, and Python's sqlite3 holds the GIL while it binds and steps, so
a second thread gains nothing.  A second process does: :class:`SideWriter` saves a big table's columns
(plain numpy arrays and scalars) to a file and hands it to ``python db_rows.py`` (this file run as a
script imports only numpy and the standard library), which writes it into a database of its own while
the exporting process writes the other tables.  :meth:`SideWriter.copy_into` then copies the rows into
the export's database inside the export's transaction (SQLite's transfer of whole records, several
times faster than inserting them).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np

#: SQLite's page cache while a file is written (KiB): big enough that the pages are written once, at the end.
CACHE_KIB = 512 * 1024
#: Rows of one INSERT statement at most (a statement of more costs more to prepare than it saves).
MAX_ROWS_PER_INSERT = 10_000


def connect_for_writing(path: Path) -> sqlite3.Connection:
    """A connection to a new file written in one go: no journal, no syncs (the file is not in place until it
    is complete), the pages of a big table in memory until the end."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=OFF")
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
    return conn


def _variables(conn: sqlite3.Connection) -> int:
    """How many ``?`` one statement may hold (SQLite's default before 3.32 was 999)."""
    getlimit = getattr(conn, "getlimit", None)
    return getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) if getlimit else 999


def insert_flat(conn: sqlite3.Connection, table: str, k: int, flat: list, rows: int) -> None:
    """Insert ``rows`` rows of ``k`` columns given row after row in ``flat``, many rows per statement."""
    per = max(1, min(MAX_ROWS_PER_INSERT, _variables(conn) // k))
    row = "(" + ",".join("?" * k) + ")"
    full = rows - rows % per
    sql = f"INSERT INTO {table} VALUES " + ",".join([row] * per)
    for start in range(0, full, per):
        conn.execute(sql, flat[start * k:(start + per) * k])
    if full < rows:
        conn.execute(f"INSERT INTO {table} VALUES " + ",".join([row] * (rows - full)), flat[full * k:])


class Masked:
    """Integers with missing values (NULL where ``missing``): a nullable column as the side process takes it."""

    def __init__(self, values: np.ndarray, missing: np.ndarray) -> None:
        self.values, self.missing = values, missing

    def __len__(self) -> int:
        return len(self.values)


def is_plain(values: object) -> bool:
    """Whether a column can go to the side process: a numeric numpy array, :class:`Masked` integers, a
    number, a text or None."""
    if isinstance(values, np.ndarray):
        return values.dtype.kind in "iuf" and values.ndim == 1
    return values is None or isinstance(values, (Masked, bool, int, float, str, np.integer, np.floating))


def _array_cells(arr: np.ndarray, missing: np.ndarray | None) -> list:
    cells = arr.tolist()
    if missing is None and arr.dtype.kind == "f":
        missing = np.isnan(arr)
    if missing is not None:
        for i in np.flatnonzero(missing).tolist():
            cells[i] = None
    return cells


class SideWriter:
    """Tables written by one second process into ``<work>.side``, then copied into the export's database.

    :meth:`add` saves a table's columns to a file and hands the file to the process (started on the first
    table); the process writes the tables in turn while this one goes on.  :meth:`copy_into` waits for it
    and copies every table's rows; :meth:`discard` stops it and removes its files, whatever happened."""

    def __init__(self, work: Path) -> None:
        self.path = work.with_name(f"{work.name}.side")
        self.work = work
        self.tables: list[str] = []
        self.files: list[Path] = []
        self.process: subprocess.Popen | None = None

    def add(self, name: str, create_sql: str, names: tuple[str, ...], blocks: list[tuple[dict, int]]) -> None:
        """Hand table ``name`` (created by ``create_sql``, columns ``names``, rows in ``blocks`` of plain
        columns: :func:`is_plain`) to the side process."""
        data = self.work.with_name(f"{self.work.name}.{name}.npy")
        header = {"table": name, "create": create_sql, "names": list(names), "blocks": []}
        arrays: list[np.ndarray] = []
        for block, rows in blocks:
            spec = {}
            for col in names:
                v = block.get(col)
                if isinstance(v, (np.ndarray, Masked)):
                    if len(v) != rows:
                        raise ValueError(f"{name}.{col}: {len(v)} values for {rows} rows")
                    spec[col] = {"array": len(arrays)}
                    if isinstance(v, Masked):
                        spec[col]["missing"] = len(arrays) + 1
                        arrays += [v.values, v.missing]
                    else:
                        arrays.append(v)
                else:
                    spec[col] = {"value": v.item() if isinstance(v, np.generic) else v}
            header["blocks"].append({"rows": rows, "columns": spec})
        self.files.append(data)
        with open(data, "wb") as f:
            f.write(json.dumps(header).encode() + b"\n")
            for arr in arrays:
                np.lib.format.write_array(f, np.ascontiguousarray(arr), allow_pickle=False)
        if self.process is None:
            self.path.unlink(missing_ok=True)
            self.process = subprocess.Popen([sys.executable, __file__, str(self.path)], stdin=subprocess.PIPE,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.tables.append(name)
        try:
            self.process.stdin.write(str(data).encode() + b"\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            pass  # the process failed: copy_into says why

    def copy_into(self, conn: sqlite3.Connection) -> None:
        """Wait for the side process, then copy each of its tables' rows into ``conn``'s table of the same
        name (the side database stays attached until ``conn`` closes)."""
        if self.process is None:
            return
        try:
            _, err = self.process.communicate()
        except BrokenPipeError:  # closing stdin of a process that already failed
            err = self.process.stderr.read()
            self.process.wait()
        if self.process.returncode:
            raise RuntimeError(f"writing {', '.join(self.tables)} in a second process failed "
                               f"(exit {self.process.returncode}): {err.decode(errors='replace').strip()}")
        conn.execute("ATTACH ? AS side", (str(self.path),))
        for name in self.tables:
            conn.execute(f"INSERT INTO main.{name} SELECT * FROM side.{name}")

    def discard(self) -> None:
        """Stop the side process if it still runs and remove its files."""
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            for stream in (self.process.stdin, self.process.stderr):
                if stream is not None and not stream.closed:
                    stream.close()
        for p in (self.path, *self.files):
            p.unlink(missing_ok=True)


def write_table(conn: sqlite3.Connection, data: Path) -> None:
    """The side process's part: the table saved in ``data`` (by :meth:`SideWriter.add`) into ``conn``."""
    with open(data, "rb") as f:
        header = json.loads(f.readline())
        names = header["names"]
        count = sum(("array" in c) + ("missing" in c) for b in header["blocks"] for c in b["columns"].values())
        arrays = [np.lib.format.read_array(f, allow_pickle=False) for _ in range(count)]
    conn.execute(header["create"])
    k = len(names)
    for block in header["blocks"]:
        rows = block["rows"]
        flat: list = [None] * (rows * k)
        for j, col in enumerate(names):
            spec = block["columns"][col]
            if "array" in spec:
                missing = arrays[spec["missing"]] if "missing" in spec else None
                flat[j::k] = _array_cells(arrays[spec["array"]], missing)
            else:
                flat[j::k] = [spec["value"]] * rows
        if rows:
            insert_flat(conn, header["table"], k, flat, rows)


def main(out: Path) -> None:
    """The side process: every table file named on stdin, in turn, into the new database ``out``, in one
    transaction committed when stdin closes."""
    conn = connect_for_writing(out)
    try:
        conn.execute("BEGIN")
        for line in sys.stdin:
            write_table(conn, Path(line.rstrip("\n")))
        conn.execute("COMMIT")
    finally:
        conn.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
    os._exit(0)  # the rows are on disk; skip freeing millions of Python objects
