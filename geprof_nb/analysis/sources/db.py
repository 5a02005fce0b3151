"""torch_npu's and msprof's SQLite output (the layout: :mod:`.db_schema`) read into a Profile's tables.

The tables are those the text import of the same run gives (:mod:`.ascend_pt`, :mod:`.msprof`), built
from the database's own tables:

* op_summary: ``COMPUTE_TASK_INFO`` joined to ``TASK`` (its PMU columns from ``TASK_PMU_INFO``, times
  there in ns: shown in µs with 3 decimals, as the text output prints them; the metrics of the core a
  pure AI Core / AI Vector Core task did not run on, 0 in the file, are missing, as in the text import)
  and the collectives of ``COMMUNICATION_OP``; ``Task Wait Time`` is msprof's, from the tasks' times;
* the step of a task: torch_npu's ``STEP_TIME`` window holding the start of the CANN call that
  launched it (``CANN_API`` by connection id), as msprof-analyze counts steps; msprof's DB has no
  steps (iteration 1, unless a geprof export's step_trace gives them);
* step_breakdown: analysis.db's ``StepTraceTime`` (torch_npu), else computed;
* task_time: ``TASK`` but the HCCL sub-tasks; hccl_tasks: ``COMMUNICATION_TASK_INFO`` (torch_npu's
  text output has no sub-tasks); communication_time: the ``CommAnalyzerTime`` analysis;
* api_statistic: ``CANN_API``; msprof_tx: ``MSTX_EVENTS``; operator_memory / memory_record:
  ``OP_MEMORY`` / ``MEMORY_RECORD`` (torch_npu) or the allocate / release events of ``NPU_OP_MEM`` (msprof).

A geprof export's ``GEPROF_*`` tables add what neither schema holds (step_trace, host_events, aicpu,
a collective's GE node and type), so its DB loads back to the tables it was written from.

Every query is a fixed statement with its values as parameters; no SQL is built from what a file holds.
A file that is not SQLite, is locked, truncated or lacks a column the import reads is an
:class:`~geprof_nb.errors.ImportFormatError` naming the file, and the table and column where it is one.
"""

from __future__ import annotations

import functools
import os
import re
import sqlite3
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import ImportFormatError
from ...prof import json_text
from ...prof.json_text import excerpt
from ..files import open_binary, reading, what_is_there
from ..tables import api, breakdown, memory, summary, tx
from ..tables import columns as C
from ..tables.aicpu import AICPU
from ..tables.communication import COMMUNICATION_TIME, DEFAULT_GROUP, HCCL_TASKS
from ..tables.host import HOST_EVENTS
from . import db_schema as S
from .ascend_pt import AIC_METRICS, OUTPUT_DIR, other_core_missing, profiler_step_bounds, rank_of
from .csvfiles import is_integer_metric, read_json, unquoted
from .filesource import FileSource
from .msprof import device_infos, iterations_from_step_trace, window_step_bounds
from .parquet import empty_column, restore_dtype
from .source import DEVICE_TASKS, MEMCPY_INFO, TIMESTAMP_COLUMNS, empty

SQLITE_HEADER = b"SQLite format 3\x00"
#: How long a read waits for a writer's lock before it says the file is locked (s).
LOCK_TIMEOUT_S = 2.0
#: The columns the import reads, per table (a table it does not need may lack any); alternatives as tuples.
REQUIRED: dict[str, tuple] = {
    "STRING_IDS": ("id", "value"),
    "TASK": ("startNs", "endNs", "deviceId", "connectionId", "globalTaskId", "taskType", "contextId", "streamId",
             "taskId", "modelId"),
    "COMPUTE_TASK_INFO": ("name", "globalTaskId", ("blockNum", "blockDim"), "taskType", "opType", "inputFormats",
                          "inputDataTypes", "inputShapes", "outputFormats", "outputDataTypes", "outputShapes"),
    "TASK_PMU_INFO": ("globalTaskId", "name", "value"),
    "COMMUNICATION_OP": ("opName", "startNs", "endNs", "connectionId", "opId", "opType"),
    "COMMUNICATION_TASK_INFO": ("globalTaskId", "taskType", "planeId", "srcRank", "dstRank", "transportType", "size",
                                "linkType", "opId"),
    "CANN_API": ("startNs", "endNs", "type", "globalTid", "connectionId", "name"),
    "MSTX_EVENTS": ("startNs", "endNs", "eventType", "category", "message", "globalTid", "domainId", "connectionId"),
    "MEMCPY_INFO": ("globalTaskId", "size", "memcpyOperation"),
    "STEP_TIME": ("id", "startNs", "endNs"),
    "OP_MEMORY": ("name", "size", "allocationTime", "releaseTime", "activeReleaseTime", "duration", "activeDuration",
                  "allocationTotalAllocated", "allocationTotalReserved", "allocationTotalActive",
                  "releaseTotalAllocated", "releaseTotalReserved", "releaseTotalActive", "streamPtr", "deviceId"),
    "MEMORY_RECORD": ("component", "timestamp", "totalAllocated", "totalReserved", "totalActive", "streamPtr",
                      "deviceId"),
    "NPU_OP_MEM": ("operatorName", "addr", "type", "size", "timestampNs", "totalAllocate", "totalReserve",
                   "component", "deviceId"),
    "GEPROF_COLLECTIVE": ("opId", "node", "nodeType"),
    "GEPROF_TABLES": ("name", "spec"),
    "StepTraceTime": ("step", "computing", "communication_not_overlapped", "overlapped", "communication", "free"),
    "CommAnalyzerTime": ("hccl_op_name", "start_timestamp", "elapse_time", "transit_time", "wait_time",
                         "synchronization_time", "idle_time"),
}
_PROF = re.compile(r"PROF_\d+_\d+_\w+")


def _entry(path: Path) -> bool:
    """Something is where a DB file is named: a file, or what opening it names (a directory, a link loop, a FIFO)."""
    return path.is_file() or what_is_there(path) is not None


def torch_npu_db(directory: Path) -> Path | None:
    """The profiler DB of a torch_npu run directory (or of its ASCEND_PROFILER_OUTPUT): the one of the
    directory's rank (``profiler_info_<rank>.json``), else the first; None without one."""
    output = directory if directory.name == OUTPUT_DIR else directory / OUTPUT_DIR
    if not output.is_dir():
        return None
    found = sorted(p for p in output.iterdir() if S.TORCH_NPU_DB.fullmatch(p.name) and _entry(p))
    rank = rank_of(output.parent)
    mine = [p for p in found if S.TORCH_NPU_DB.fullmatch(p.name).group(1) == (None if rank is None else str(rank))]
    return (mine or found or [None])[0]


def msprof_db(directory: Path) -> Path | None:
    """The newest ``msprof_<14 digits>.db`` of a ``PROF_*`` directory (msprof-analyze's choice); None without one."""
    if not directory.is_dir():
        return None
    found = sorted((p for p in directory.iterdir() if S.MSPROF_DB.fullmatch(p.name) and _entry(p)),
                   key=lambda p: p.name)
    return found[-1] if found else None


def msprof_rank(directory: Path) -> int | None:
    """The rank id the ``device_<n>/info.json.<n>`` of a ``PROF_*`` directory gives (None if none or -1)."""
    for path in sorted(directory.glob("device_*/info.json.*")):
        try:
            rank = read_json(path).get("rank_id")
        except (ImportFormatError, AttributeError):
            continue
        if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0:
            return rank
    return None


def db_file(path: Path) -> Path | None:
    """The profiler DB a path names: the file itself, a torch_npu run's or a ``PROF_*`` directory's."""
    if path.is_file():
        return path if S.TORCH_NPU_DB.fullmatch(path.name) or S.MSPROF_DB.fullmatch(path.name) else None
    return torch_npu_db(path) or msprof_db(path)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class Database:
    """One SQLite file read through fixed, parameterised statements; every failure an ImportFormatError
    naming the file (and the table being read)."""

    def __init__(self, path: Path, what: str) -> None:
        self.path = Path(path)
        self.what = what
        self._check_header()
        self.tables = {name: self._columns(name) for name in self._names()}

    def _check_header(self) -> None:
        accepted = f"{self.what}, an SQLite file"
        with open_binary(self.path, accepted) as f, reading(self.path, accepted):  # not a FIFO: it would wait
            head = f.read(100)
            size = os.fstat(f.fileno()).st_size
        if not head.startswith(SQLITE_HEADER):
            shown = head[:16].decode("latin-1").encode("unicode_escape").decode()
            raise ImportFormatError(f"{self.path}: not an SQLite database (it starts with {shown!r}, not "
                                    f"'SQLite format 3'); expected {self.what}")
        page = int.from_bytes(head[16:18], "big")
        page = 65536 if page == 1 else page
        pages = int.from_bytes(head[28:32], "big")
        valid = head[24:28] == head[92:96]  # the header's page count holds when these two counters agree
        if len(head) < 100 or size % page or (valid and pages and size < pages * page):
            expected = f"{pages} pages of {page} bytes ({pages * page} bytes)" if valid and pages else \
                f"whole pages of {page} bytes"
            raise ImportFormatError(f"{self.path}: truncated: the file has {size} bytes, its header says {expected} "
                                    "(cut off while being copied or written?)")

    def query(self, sql: str, params: tuple = (), table: str | None = None) -> list[tuple]:
        """The rows of one statement (its values bound as parameters)."""
        return self._run(sql, params, table)[0]

    def _run(self, sql: str, params: tuple, table: str | None) -> tuple[list[tuple], int]:
        """(rows, number of columns) of one statement."""
        where = f"{self.path}" + (f" (table {table})" if table else "")
        try:
            conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=LOCK_TIMEOUT_S)
        except sqlite3.Error as exc:
            raise ImportFormatError(f"{where}: cannot be opened as SQLite ({exc})") from None
        try:
            cursor = conn.execute(sql, params)
            return cursor.fetchall(), len(cursor.description or ())
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise ImportFormatError(f"{where}: locked by another process for over {LOCK_TIMEOUT_S:g} s (is the "
                                        "profiler still writing it?)") from None
            raise ImportFormatError(f"{where}: cannot be read ({exc})") from None
        except sqlite3.DatabaseError as exc:
            raise ImportFormatError(f"{where}: damaged or truncated: SQLite says {exc!s:.200}") from None
        finally:
            conn.close()

    def _names(self) -> list[str]:
        return [r[0] for r in self.query("SELECT name FROM sqlite_master WHERE type = ?", ("table",))]

    def _columns(self, table: str) -> list[str]:
        return [r[0] for r in self.query("SELECT name FROM pragma_table_info(?)", (table,), table)]

    def has(self, table: str) -> bool:
        return table in self.tables

    def column(self, table: str, *names: str) -> str | None:
        """The first of ``names`` the table has (None if none)."""
        return next((n for n in names if n in self.tables.get(table, ())), None)

    def check(self, table: str) -> None:
        """The table has every column of :data:`REQUIRED`, else an error naming the table and column."""
        have = self.tables.get(table, [])
        for col in REQUIRED.get(table, ()):
            options = col if isinstance(col, tuple) else (col,)
            if not any(o in have for o in options):
                wanted = " or ".join(repr(o) for o in options)
                raise ImportFormatError(f"{self.path}: table {table} has no column {wanted} (its columns: "
                                        f"{', '.join(have) or 'none'}); reading {self.what} needs it")

    def read(self, table: str, sql: str, params: tuple = ()) -> list[np.ndarray]:
        """The columns of a statement over ``table`` (checked first), as arrays (None: NULL)."""
        self.check(table)
        rows, width = self._run(sql, params, table)
        if not rows:
            return [np.zeros(0, object) for _ in range(width)]
        return [np.array(col, dtype=object) for col in zip(*rows)]


class _BadCell(ValueError):
    """A DB cell holds what its column cannot (SQLite keeps any value in any column); :func:`_named_cells` says
    which file."""


#: The largest time or size (in µs, MB, ...) the tables hold: 2**63 ns in µs.
_LARGEST = 2**63 / 1000
_DIGITS = re.compile(r"\s*[+-]?[0-9]{1,19}\s*", re.ASCII)


def _whole(v: object, missing: int) -> int:
    """One integer cell: an int or integral float in int64, or its digits as text (PYTORCH_API's TEXT times)."""
    if v is None:
        return missing
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**63:
        v = int(v)
    elif isinstance(v, str) and _DIGITS.fullmatch(v):
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or not -(2**63) <= v < 2**63:
        raise _BadCell(f"a cell holds {excerpt(v, 40)}, where an integer (64 bits) belongs")
    return v


def _int(values: np.ndarray, missing: int = -1) -> np.ndarray:
    """Integers with ``missing`` for NULL (and text numbers, as PYTORCH_API's TEXT start times, parsed)."""
    if not len(values):
        return np.zeros(0, np.int64)
    return np.array([_whole(v, missing) for v in values.tolist()], np.int64)


def _number(v: object) -> float:
    if v is None:
        return np.nan
    if isinstance(v, (int, float)) and not isinstance(v, bool) and (not isinstance(v, int) or abs(v) < 2**1000):
        return float(v)
    raise _BadCell(f"a cell holds {excerpt(v, 40)}, where a number belongs")


def _float(values: np.ndarray) -> np.ndarray:
    return np.array([_number(v) for v in values.tolist()], float) if len(values) else np.zeros(0)


def _named_cells(method):
    """A table of a DbSource, whose cell of the wrong type or range (:class:`_BadCell`) is an ImportFormatError
    naming the DB file (SQLite keeps any value in any column)."""

    @functools.wraps(method)
    def read(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except _BadCell as exc:
            raise ImportFormatError(f"{self.file}: {exc} (read for {method.__name__}); accepted: the values "
                                    f"{'torch_npu' if self.torch_npu else 'msprof'} writes there") from None

    return read


def _nullable(values: np.ndarray, na: np.ndarray | None = None) -> pd.arrays.IntegerArray:
    """Int64 with <NA> for NULL, UINT32_MAX (msprof's "none") and where ``na``."""
    ints = _int(values, S.UINT32_MAX)
    missing = ints == S.UINT32_MAX
    if na is not None:
        missing |= na
    return pd.arrays.IntegerArray(np.where(missing, 0, ints), missing)


class DbSource(FileSource):
    """The tables of one rank's torch_npu DB output or one msprof DB."""

    @_named_cells
    def __init__(self, path: Path, device_id: int = 0, notes: list[str] | None = None) -> None:
        super().__init__()
        path = Path(path)
        file = db_file(path)
        if file is None:
            raise ImportFormatError(f"{path}: no ascend_pytorch_profiler_<rank>.db (torch_npu) or msprof_<ts>.db "
                                    "(msprof) to read")
        self.file = file
        self.torch_npu = bool(S.TORCH_NPU_DB.fullmatch(file.name))
        if path.is_file():
            path = file.parent.parent if self.torch_npu else file.parent
        elif path.name == OUTPUT_DIR:
            path = path.parent
        self._path = path
        what = "torch_npu's ascend_pytorch_profiler_<rank>.db" if self.torch_npu else "msprof's msprof_<ts>.db"
        self.db = Database(file, what)
        for table in ("STRING_IDS", "TASK"):
            if not self.db.has(table):
                raise ImportFormatError(f"{file}: no table {table} (its tables: {', '.join(self.db.tables) or 'none'});"
                                        f" {what} has it for every run with task data")
            self.db.check(table)
        for table in self.db.tables:  # a table that is there must be readable as documented
            self.db.check(table)
        analysis = (file.parent / S.TORCH_NPU_ANALYSIS_DB) if self.torch_npu else path.joinpath(*S.MSPROF_ANALYSIS_DB)
        self.analysis = Database(analysis, f"the communication analysis {analysis.name}") if analysis.is_file() \
            else None
        if self.analysis is not None:
            for table in self.analysis.tables:
                self.analysis.check(table)
        self._notes = list(notes or [])
        devices = sorted(set(_int(self.db.read("TASK", "SELECT DISTINCT deviceId FROM TASK")[0]).tolist()))
        if devices and device_id not in devices:
            if len(devices) > 1:
                raise ImportFormatError(f"{file}: no tasks of device {device_id}; the data has devices {devices}: "
                                        "load(path, device_id=...) one of them")
            device_id = devices[0]
        elif len(devices) > 1:
            self._notes.append(f"the data holds devices {devices}; this Profile shows device {device_id}")
        self.device_id = device_id

    @property
    def path(self) -> Path:
        return self._path

    # ------------------------------------------------------------------ run facts
    @cached_property
    def _strings(self) -> pd.Series:
        ids, values = self.db.read("STRING_IDS", "SELECT id, value FROM STRING_IDS")
        return pd.Series(values, index=pd.Index(_int(ids)), dtype=object)

    def texts(self, ids: np.ndarray) -> np.ndarray:
        """The strings of STRING_IDS ``ids`` (``N/A`` for NULL or an id the table lacks)."""
        ints = _int(ids)
        codes, uniques = pd.factorize(ints)
        found = self._strings.reindex(uniques).to_numpy(object)
        found = np.array([summary.NA if v is None or (isinstance(v, float) and np.isnan(v)) else str(v)
                          for v in found.tolist()], dtype=object)
        return found[codes] if len(ints) else np.zeros(0, object)

    def categorical(self, ids: np.ndarray) -> pd.Categorical:
        """The texts of ``ids`` as a categorical, categories in first-seen order."""
        names = self.texts(ids)
        return pd.Categorical(names, categories=pd.Index(pd.unique(names), dtype=object))

    def _meta(self, name: str) -> str | None:
        if not self.db.has("META_DATA"):
            return None
        rows = self.db.query("SELECT value FROM META_DATA WHERE name = ?", (name,), "META_DATA")
        return rows[0][0] if rows else None

    def _json_meta(self, name: str) -> dict:
        text = self._meta(name)
        try:
            value = json_text.loads(text) if isinstance(text, (str, bytes)) and text else {}
        except json_text.JsonTextError as exc:  # nested past the parser's limit, a key given twice, ... too
            self._notes.append(f"{self.file}: META_DATA {name} is not JSON geprof reads ({exc.reason}); ignored")
            return {}
        return value if isinstance(value, dict) else {}

    def _first(self, table: str, sql: str) -> tuple | None:
        if not self.db.has(table):
            return None
        rows = self.db.query(sql, (), table)
        return rows[0] if rows else None

    @cached_property
    @_named_cells
    def info(self) -> dict:
        npu = self._first("NPU_INFO", "SELECT id, name FROM NPU_INFO")
        chip = str(npu[1]) if npu else ""
        family = self._family
        profiler_info = self._profiler_info
        config = ((profiler_info.get("config") or {}).get("experimental_config") or {})
        level = config.get("_profiler_level")
        session = self._first("SESSION_TIME_INFO", "SELECT startTimeNs, endTimeNs FROM SESSION_TIME_INFO")
        host = self._first("HOST_INFO", "SELECT hostUid, hostName FROM HOST_INFO")
        pid = self._first("TASK", "SELECT globalPid FROM TASK LIMIT 1")
        distributed = self._json_meta("distributed_args")
        facts = device_infos(self._path, self._notes).get(str(self.device_id), {})
        device = {"chip_family": family, **({"name": chip} if chip else {}), **facts}
        out = {"format": "db" if self.torch_npu else "msprof_db", "path": str(self._path), "file": str(self.file),
               "devices": {str(self.device_id): device}, "rank": self.rank, "profiler_level": level,
               "profiler_info": profiler_info}
        if session:
            out.update(start_ns=int(session[0]), end_ns=int(session[1]))
        if host:
            out["hostname"] = str(host[1])
        if pid and pid[0] is not None:
            out["pid"] = int(pid[0])
        if isinstance(distributed.get("world_size"), int):
            out["cluster"] = {"world_size": distributed["world_size"]}
        meta = {"distributed_args": distributed, "parallel_group_info": self._json_meta("parallel_group_info"),
                "pp_info": self._json_meta("pp_info")}
        if any(meta.values()):  # what torch_npu records of the job, as a text run's profiler_metadata.json
            out["profiler_metadata"] = {k: v for k, v in meta.items() if v}
        metrics = self._aic_metrics
        out["options"] = {"aic_metrics": metrics} if metrics and level != "Level0" else {}
        return out

    @cached_property
    def _profiler_info(self) -> dict:
        if not self.torch_npu:
            return {}
        rank = rank_of(self._path)
        path = self._path / (f"profiler_info_{rank}.json" if rank is not None else "profiler_info.json")
        if not path.is_file():
            return {}
        try:
            content = read_json(path)
        except ImportFormatError as exc:
            self._notes.append(f"{exc} (ignored)")
            return {}
        return content if isinstance(content, dict) else {}

    @cached_property
    def rank(self) -> int | None:
        if self.torch_npu:
            found = rank_of(self._path)
            if found is None and (m := S.TORCH_NPU_DB.fullmatch(self.file.name)) and m.group(1):
                found = int(m.group(1))
            return found
        return msprof_rank(self._path)

    @_named_cells
    def notes(self) -> list[str]:
        self.op_rows()  # the step assignment adds its notes
        return list(self._notes)

    # ------------------------------------------------------------------ tasks
    @cached_property
    def _tasks(self) -> pd.DataFrame:
        """TASK of this device, by start (ties by global task id), with each task's kind: ``sub`` (an HCCL
        sub-task), ``compute`` (a COMPUTE_TASK_INFO row), ``comm`` (a collective's own task)."""
        cols = self.db.read("TASK", "SELECT startNs, endNs, connectionId, globalTaskId, taskType, contextId, streamId,"
                                    " taskId, modelId FROM TASK WHERE deviceId = ?", (self.device_id,))
        names = ["start", "end", "conn", "gid", "type", "context", "stream", "task", "model"]
        t = pd.DataFrame({n: _int(c, S.UINT32_MAX) for n, c in zip(names, cols)})
        t = t.sort_values(["start", "gid"], kind="stable").reset_index(drop=True)
        sub = set()
        if self.db.has("COMMUNICATION_TASK_INFO"):
            sub = set(_int(self.db.read("COMMUNICATION_TASK_INFO",
                                        "SELECT globalTaskId FROM COMMUNICATION_TASK_INFO")[0]).tolist())
        t["sub"] = t["gid"].isin(sub).to_numpy()
        return t

    @cached_property
    def _compute(self) -> pd.DataFrame:
        """COMPUTE_TASK_INFO joined to its TASK rows (this device's), in task order."""
        if not self.db.has("COMPUTE_TASK_INFO"):
            return pd.DataFrame(columns=["gid"])
        db = self.db
        block = db.column("COMPUTE_TASK_INFO", "blockNum", "blockDim")
        mix = db.column("COMPUTE_TASK_INFO", "mixBlockNum", "mixBlockDim")
        state = db.column("COMPUTE_TASK_INFO", "opState")
        hf32 = db.column("COMPUTE_TASK_INFO", "hf32Eligible")
        fixed = ["name", "globalTaskId", "taskType", "opType", "inputFormats", "inputDataTypes", "inputShapes",
                 "outputFormats", "outputDataTypes", "outputShapes"]
        optional = {"block": block, "mix": mix, "state": state, "hf32": hf32}
        # the column names come from this module's constants, never from the file
        select = ", ".join(fixed + [c for c in optional.values() if c])
        cols = db.read("COMPUTE_TASK_INFO", f"SELECT {select} FROM COMPUTE_TASK_INFO")  # noqa: S608
        frame = pd.DataFrame(dict(zip(fixed, cols[:len(fixed)])))
        k = len(fixed)
        for key, name in optional.items():
            if name:
                frame[key] = cols[k]
                k += 1
        frame["gid"] = _int(frame.pop("globalTaskId"))
        pos = pd.Index(self._tasks["gid"]).get_indexer(frame["gid"])
        frame = frame[pos >= 0].assign(task=pos[pos >= 0]).sort_values("task", kind="stable")
        return frame.reset_index(drop=True)

    @cached_property
    def _collective(self) -> pd.DataFrame:
        """COMMUNICATION_OP of this device with each op's own TASK row (same connection, start and end; -1:
        none, as torch_npu writes no task for the collective itself) and its GE node (geprof's exports)."""
        cols_ = ["name", "start", "end", "conn", "op", "type"]
        if not self.db.has("COMMUNICATION_OP"):
            return pd.DataFrame({c: np.zeros(0, np.int64) for c in cols_}).assign(group=np.zeros(0, object))
        device = self.db.column("COMMUNICATION_OP", "deviceId")
        group = self.db.column("COMMUNICATION_OP", "groupName")
        sql = ("SELECT opName, startNs, endNs, connectionId, opId, opType" + (", groupName" if group else "")
               + " FROM COMMUNICATION_OP")
        cols = self.db.read("COMMUNICATION_OP", sql + (" WHERE deviceId = ?" if device else ""),
                            (self.device_id,) if device else ())
        c = pd.DataFrame({"name": self.texts(cols[0]), "start": _int(cols[1]), "end": _int(cols[2]),
                          "conn": _int(cols[3], S.UINT32_MAX), "op": _int(cols[4]), "type": self.texts(cols[5]),
                          "group": self.texts(cols[6]) if group else DEFAULT_GROUP})
        t = self._tasks[~self._tasks["sub"]]
        # two collectives one host call launched on two streams (a pipeline's send and receive) can share
        # connection, start and end: the k-th such op is the k-th such task
        key = ["conn", "start", "end", "nth"]
        own = pd.MultiIndex.from_frame(t.assign(nth=t.groupby(key[:3]).cumcount())[key]).get_indexer(
            pd.MultiIndex.from_frame(c.assign(nth=c.groupby(key[:3]).cumcount())[key])) \
            if len(c) and len(t) else np.full(len(c), -1)
        c["task"] = np.where(own >= 0, t.index.to_numpy()[np.maximum(own, 0)], -1)
        c["node"], c["node_type"], c["task_type"] = c["name"], c["type"], "COMMUNICATION"
        if self.db.has("GEPROF_COLLECTIVE") and len(c):
            cols = self.db.read("GEPROF_COLLECTIVE", "SELECT opId, node, nodeType FROM GEPROF_COLLECTIVE")
            at = pd.Index(_int(cols[0])).get_indexer(c["op"])
            hit = at >= 0
            c.loc[hit, "node"] = self.texts(cols[1])[at[hit]]
            c.loc[hit, "node_type"] = self.texts(cols[2])[at[hit]]
        c["sort_gid"] = np.where(c["task"] >= 0, self._tasks["gid"].to_numpy()[np.maximum(c["task"], 0)],
                                 np.iinfo(np.int64).max)
        return c.sort_values(["start", "sort_gid"], kind="stable").reset_index(drop=True)

    @cached_property
    def _calls(self) -> pd.DataFrame:
        """CANN_API: begin, end, level (ENUM_API_TYPE's name), API name, thread, connection id."""
        if not self.db.has("CANN_API"):
            return pd.DataFrame({c: np.zeros(0, np.int64) for c in ("begin", "end", "conn", "thread")}
                                ).assign(level=np.zeros(0, object), api=np.zeros(0, object))
        cols = self.db.read("CANN_API", "SELECT startNs, endNs, type, globalTid, connectionId, name FROM CANN_API")
        levels = dict(S.ENUM_API_TYPE)
        if self.db.has("ENUM_API_TYPE"):
            levels.update({int(i): str(n) for i, n in self.db.query("SELECT id, name FROM ENUM_API_TYPE", (),
                                                                    "ENUM_API_TYPE")})
        kinds = _int(cols[2])
        return pd.DataFrame({"begin": _int(cols[0]), "end": _int(cols[1]),
                             "level": np.array([levels.get(k, str(k)) for k in kinds.tolist()], object),
                             "thread": _int(cols[3]) & 0xFFFFFFFF, "conn": _int(cols[4]),
                             "api": self.texts(cols[5])}).sort_values("begin", kind="stable").reset_index(drop=True)

    @cached_property
    def _step_time(self) -> pd.DataFrame:
        """STEP_TIME (torch_npu's ProfilerStep spans): step, begin, end, by begin."""
        if not self.db.has("STEP_TIME"):
            return pd.DataFrame({"step": np.zeros(0, np.int64), "begin": np.zeros(0, np.int64),
                                 "end": np.zeros(0, np.int64)})
        cols = self.db.read("STEP_TIME", "SELECT id, startNs, endNs FROM STEP_TIME")
        return pd.DataFrame({"step": _int(cols[0]), "begin": _int(cols[1]), "end": _int(cols[2])}
                            ).sort_values("begin", kind="stable").reset_index(drop=True)

    def _step_of(self, times: np.ndarray) -> np.ndarray:
        """The STEP_TIME step whose window holds each time (the latest that began at or before it; 0: none)."""
        s = self._step_time
        at = np.searchsorted(s["begin"].to_numpy(np.int64), times, side="right") - 1
        ok = (at >= 0) & (times <= s["end"].to_numpy(np.int64)[np.maximum(at, 0)] if len(s) else False)
        return np.where(ok, s["step"].to_numpy(np.int64)[np.maximum(at, 0)] if len(s) else 0, 0)

    def _launch_times(self, conns: np.ndarray, own: np.ndarray) -> np.ndarray:
        """When the CANN call of each connection id began (``own``, a task's start, where no call has the id)."""
        calls = self._calls
        at = pd.Index(calls["conn"]).get_indexer(conns) if len(calls) else np.full(len(conns), -1)
        return np.where(at >= 0, calls["begin"].to_numpy(np.int64)[np.maximum(at, 0)] if len(calls) else 0, own)

    # ------------------------------------------------------------------ side tables
    @cached_property
    def _side_specs(self) -> dict[str, dict]:
        if not self.db.has("GEPROF_TABLES"):
            return {}
        out = {}
        for name, spec in self.db.query("SELECT name, spec FROM GEPROF_TABLES", (), "GEPROF_TABLES"):
            try:
                value = json_text.loads(spec) if isinstance(spec, (str, bytes)) else None
            except json_text.JsonTextError as exc:
                raise ImportFormatError(f"{self.file} (table GEPROF_TABLES): the spec of {excerpt(name, 40)} is not "
                                        f"JSON ({exc.reason})") from None
            if not isinstance(value, dict) or not isinstance(value.get("columns"), list) \
                    or not isinstance(value.get("dtypes"), list) or len(value["columns"]) != len(value["dtypes"]):
                raise ImportFormatError(f"{self.file} (table GEPROF_TABLES): the spec of {name!r} lacks matching "
                                        "'columns' and 'dtypes' lists")
            out[str(name)] = value
        return out

    #: The side tables a reader may ask for, by Profile table (fixed names: no SQL from the file's content).
    SIDE = {"step_trace": "GEPROF_STEP_TRACE", "host_events": "GEPROF_HOST_EVENTS", "aicpu": "GEPROF_AICPU",
            "operator_memory": "GEPROF_OPERATOR_MEMORY", "memory_record": "GEPROF_MEMORY_RECORD"}

    def _side(self, name: str) -> pd.DataFrame | None:
        """A Profile table a geprof export kept in its ``GEPROF_<NAME>`` table (None if it did not)."""
        spec, table = self._side_specs.get(name), self.SIDE[name]
        if spec is None or not self.db.has(table):
            return None
        where = f"{self.file} (table {table})"
        columns, dtypes, times = spec["columns"], spec["dtypes"], list(spec.get("times") or [])
        width = len(columns) + len(times)
        if len(self.db.tables[table]) != width:
            raise ImportFormatError(f"{where}: {len(self.db.tables[table])} columns; GEPROF_TABLES says {width}")
        rows = self.db.query(f"SELECT * FROM {table}", (), table)  # noqa: S608 - a name of SIDE
        data = {}
        for i, d in enumerate(dtypes):
            col = pd.Series([r[i] for r in rows], dtype=object) if rows else empty_column(d, where)
            try:  # SQLite keeps any value in any column
                data[i] = restore_dtype(col, d, where) if rows else col
            except (ValueError, TypeError, OverflowError) as exc:
                raise ImportFormatError(f"{where}: column {columns[i]!r} holds a value that is no {d} "
                                        f"({str(exc)[:120]})") from None
            if rows and pd.api.types.is_float_dtype(data[i].dtype) and (data[i].abs() > _LARGEST).any():
                raise ImportFormatError(f"{where}: column {columns[i]!r} holds a number past 9.2e15 (2**63 ns in "
                                        "µs), or infinite; accepted: the times and sizes a run has")
        frame = pd.DataFrame(data, index=pd.RangeIndex(len(rows)))
        frame.columns = columns
        if times and rows:
            exact = pd.DataFrame({k: pd.array([_whole(r[len(columns) + k], None) if r[len(columns) + k] is not None
                                               else None for r in rows], dtype="Int64")
                                  for k in range(len(times))})
            exact.columns = [c for c in columns if c in TIMESTAMP_COLUMNS.get(name, ())]
            self._times[name] = exact
        return frame

    # ------------------------------------------------------------------ op_summary
    @cached_property
    def _pmu(self) -> tuple[pd.DataFrame, list[str]]:
        """(the PMU columns of the compute rows, in their order; the metrics' names in the file) from TASK_PMU_INFO."""
        comp = self._compute
        if not self.db.has("TASK_PMU_INFO") or comp.empty:
            return pd.DataFrame(index=pd.RangeIndex(len(comp))), []
        gid, name, value = self.db.read("TASK_PMU_INFO", "SELECT globalTaskId, name, value FROM TASK_PMU_INFO")
        row = pd.Index(comp["gid"]).get_indexer(_int(gid))
        keep = row >= 0
        names = self.texts(name[keep])
        metric_codes, metrics = pd.factorize(names)
        out = {}
        for k, metric in enumerate(metrics.tolist()):
            mine = metric_codes == k
            col = _column_of(metric)
            vals = value[keep][mine]
            if is_integer_metric(col):
                arr = pd.array(np.zeros(len(comp), np.int64), dtype="Int64")
                arr[:] = pd.NA
                arr[row[keep][mine]] = _int(vals)
            else:
                arr = np.full(len(comp), np.nan)
                v = _float(vals)
                arr[row[keep][mine]] = np.round(v / 1000.0 if S.is_time_metric(col) else v, 3)
            out[col] = arr
        return pd.DataFrame(out, index=pd.RangeIndex(len(comp))), list(metrics)

    @cached_property
    def _aic_metrics(self) -> str | None:
        """The aic_metrics group: torch_npu's profiler_info, else the group every metric in the file belongs to."""
        config = ((self._profiler_info.get("config") or {}).get("experimental_config") or {})
        named = AIC_METRICS.get(str(config.get("_aic_metrics", "")))
        if named:
            return named
        present = set(self._pmu[0].columns)
        family = self._family
        best, best_n = None, 0
        for group in C.PMU_GROUPS:
            cols = set(C.pmu_columns(group, family))
            n = len(cols & present)
            if cols and present <= cols and n > best_n:
                best, best_n = group, n
        return best

    @cached_property
    def _family(self) -> str:
        """The chip family NPU_INFO names (910A-class chips by name, else the Atlas A2 ones)."""
        npu = self._first("NPU_INFO", "SELECT id, name FROM NPU_INFO")
        chip = str(npu[1]) if npu else ""
        return "910A" if re.fullmatch(r"Ascend910A?|Ascend910ProA|Ascend310P?\w*", chip) else "A2"

    @cached_property
    def _rows(self) -> summary.OpRows:
        t, comp, coll = self._tasks, self._compute, self._collective
        n_comp, n_coll = len(comp), len(coll)
        tasks_of = comp["task"].to_numpy(np.int64) if n_comp else np.zeros(0, np.int64)
        start = np.concatenate([t["start"].to_numpy()[tasks_of], coll["start"].to_numpy(np.int64)])
        end = np.concatenate([t["end"].to_numpy()[tasks_of], coll["end"].to_numpy(np.int64)])
        sort_gid = np.concatenate([t["gid"].to_numpy()[tasks_of], coll["sort_gid"].to_numpy(np.int64)])
        order = np.lexsort((sort_gid, start))
        is_comm = np.concatenate([np.zeros(n_comp, bool), np.ones(n_coll, bool)])[order]
        start, end = start[order], end[order]
        self._is_comm = is_comm
        coll_task = coll["task"].to_numpy(np.int64) if n_coll else np.zeros(0, np.int64)
        task_row = np.concatenate([tasks_of, coll_task])[order]  # -1: a collective with no task of its own
        own = np.maximum(task_row, 0)

        def both(compute_values, comm_values, dtype=object) -> np.ndarray:
            joined = np.concatenate([np.asarray(compute_values, dtype=dtype), np.asarray(comm_values, dtype=dtype)])
            return joined[order]

        na = np.full(n_coll, summary.NA, object)

        def text(col: str | None, shape: bool = False) -> pd.Categorical:
            ids = comp[col].to_numpy(object) if col and col in comp.columns else np.full(n_comp, None, object)
            texts = self.texts(ids)
            if shape:  # torch_npu stores them with the literal quotes its CSV shows (reference §5)
                texts = np.array([unquoted(v) for v in texts.tolist()], dtype=object)
            values = both(texts, na)
            return pd.Categorical(values, categories=pd.unique(values))

        model = np.where(task_row >= 0, t["model"].to_numpy()[own], S.UINT32_MAX)
        if n_coll and (coll_task < 0).any():  # a collective's model from its sub-tasks (same connection)
            by_conn = t[t["sub"]].drop_duplicates("conn").set_index("conn")["model"]
            conn = both(np.zeros(n_comp, np.int64), coll["conn"].to_numpy(np.int64), np.int64)
            fill = is_comm & (task_row < 0)
            model[fill] = by_conn.reindex(conn[fill]).fillna(S.UINT32_MAX).to_numpy(np.int64)
        family = self._family
        level = "l0" if n_comp and set(self.texts(comp["taskType"].to_numpy(object))) <= {summary.NA} else "l1"
        metrics = self._aic_metrics
        header = C.op_summary_columns(family, level, metrics or "")
        pmu, _ = self._pmu
        extra = [c for c in pmu.columns if c not in header]
        if extra:
            header = header + extra
            self._notes.append(f"{self.file}: TASK_PMU_INFO has metrics the text output of the group leaves out "
                               f"({', '.join(extra)}); kept as columns")
        missing_pmu = [c for c in header if c in C.pmu_columns(metrics or "", family) and c not in pmu.columns]
        if missing_pmu and len(pmu.columns):
            self._notes.append(f"{self.file}: TASK_PMU_INFO has no {', '.join(missing_pmu)} (msprof computes "
                               "cube_utilization(%) for the text output only, from the device's core count): "
                               "left empty")
        absent = {col: db for col, key, db in (("OP State", "state", "opState"),
                                               ("HF32 Eligible", "hf32", "hf32Eligible")) if key not in comp.columns}
        if absent and n_comp:
            self._notes.append(f"{self.file}: COMPUTE_TASK_INFO has no {' or '.join(absent.values())} (a DB of an "
                               f"older CANN): {' and '.join(absent)} are N/A")
        comm_type = coll["task_type"].to_numpy(object)
        block = comp["block"].to_numpy(object) if "block" in comp.columns else np.full(n_comp, None, object)
        mix = comp["mix"].to_numpy(object) if "mix" in comp.columns else np.full(n_comp, None, object)
        data = {
            "Device_id": np.full(len(order), self.device_id, np.int64), "Model ID": model,
            "Task ID": _nullable(np.where(task_row >= 0, t["task"].to_numpy()[own], S.UINT32_MAX).astype(object),
                                 is_comm),
            "Stream ID": _nullable(np.where(task_row >= 0, t["stream"].to_numpy()[own], S.UINT32_MAX).astype(object),
                                   is_comm),
            "Op Name": pd.Categorical(both(self.texts(comp["name"].to_numpy(object)) if n_comp else [],
                                           coll["node"].to_numpy(object))),
            "OP Type": pd.Categorical(both(self.texts(comp["opType"].to_numpy(object)) if n_comp else [],
                                           coll["node_type"].to_numpy(object))),
            "OP State": text("state"),
            "Task Type": pd.Categorical(both(self.texts(comp["taskType"].to_numpy(object)) if n_comp else [],
                                             comm_type)),
            "Task Start Time(us)": start / 1000.0, "Task Duration(us)": (end - start) / 1000.0,
            "Task Wait Time(us)": summary.wait_times(start, end, is_comm),
            "Block Num": _nullable(both(block, np.full(n_coll, 0, object))),
            "Mix Block Num": _nullable(both(mix, np.full(n_coll, None, object)), is_comm),
            "HF32 Eligible": text("hf32"),
            "Context ID": _nullable(np.where(task_row >= 0, t["context"].to_numpy()[own], S.UINT32_MAX).astype(object)),
        }
        for col, key in (("Input Shapes", "inputShapes"), ("Input Data Types", "inputDataTypes"),
                         ("Input Formats", "inputFormats"), ("Output Shapes", "outputShapes"),
                         ("Output Data Types", "outputDataTypes"), ("Output Formats", "outputFormats")):
            data[col] = text(key, shape=True)
        for col in header:
            if col in data:
                continue
            if col in pmu.columns:
                values = pmu[col]
                if isinstance(values.dtype, pd.api.extensions.ExtensionDtype):
                    arr = pd.array(np.zeros(len(order), np.int64), dtype="Int64")
                    arr[:] = pd.NA
                    arr[np.flatnonzero(~is_comm)] = values.array[order[~is_comm]]  # compute rows come first
                    data[col] = arr
                else:
                    data[col] = both(values.to_numpy(float), np.full(n_coll, np.nan), float)
            else:
                data[col] = pd.array([pd.NA] * len(order), dtype="Int64") if is_integer_metric(col) \
                    else np.full(len(order), np.nan)
        frame = other_core_missing(pd.DataFrame({c: data[c] for c in header}))
        iteration = self._iterations(np.concatenate([t["conn"].to_numpy()[tasks_of], coll["conn"].to_numpy(np.int64)]
                                                    )[order], start, frame)
        self._op_task = task_row
        return summary.OpRows(frame, iteration, start, np.full(len(frame), -1, np.int64))

    def _iterations(self, conns: np.ndarray, start: np.ndarray, frame: pd.DataFrame) -> np.ndarray:
        """The step of each op row: torch_npu's STEP_TIME by its CANN call's start; msprof's by step_trace."""
        if self.torch_npu and len(self._step_time):
            step = self._step_of(self._launch_times(conns, start))
            if (outside := int((step == 0).sum())):
                self._notes.append(f"{outside} op rows were launched outside every STEP_TIME step: iteration 0")
            return step
        trace = self.step_trace()
        if len(trace):
            model = frame["Model ID"].to_numpy(np.int64)
            iteration, late = iterations_from_step_trace(model, start, self._windows)
            if late:
                self._notes.append(f"{late} op rows start after the last step_trace iteration end; they are counted "
                                   "in the last iteration")
            return iteration
        self._notes.append("no steps in the DB (no STEP_TIME, no step_trace): every op row is in iteration 1")
        return np.ones(len(start), np.int64)

    @_named_cells
    def op_rows(self) -> summary.OpRows:
        return self._rows

    @_named_cells
    def communication_rows(self) -> np.ndarray:
        self.op_rows()
        return self._is_comm.copy()

    # ------------------------------------------------------------------ steps
    @cached_property
    def _windows(self) -> pd.DataFrame:
        """(model, iteration, begin, end ns) of step_trace (a geprof export's), as msprof's text import reads it."""
        trace = self.step_trace()
        exact = self.times_ns("step_trace", trace)
        end = exact["Iteration End(us)"].to_numpy(np.int64, na_value=-1) if len(trace) else np.zeros(0, np.int64)
        length = np.rint(trace["Iteration Time(us)"].to_numpy(float) * 1000) if len(trace) else np.zeros(0)
        length = np.where(np.isnan(length), 0, length).astype(np.int64)  # integer ns: a float loses them at 1e18
        keep = end >= 0
        return pd.DataFrame({"model": trace["Model ID"].to_numpy(np.int64)[keep],
                             "iteration": trace["Iteration ID"].to_numpy(np.int64)[keep],
                             "begin": (end - length)[keep], "end": end[keep]})

    @_named_cells
    def step_bounds(self) -> pd.DataFrame:
        """torch_npu: its STEP_TIME spans to the step's last op (as from trace_view's ProfilerSteps);
        msprof: step_trace's windows, framework_begin from the ModelExecute calls."""
        if self.torch_npu and len(self._step_time):
            return profiler_step_bounds(self._step_time, self.op_rows())
        if not len(self.step_trace()):
            return pd.DataFrame(columns=["step", "begin", "end"])
        calls, t = self._calls, self._tasks
        execute = calls[calls["api"] == "ModelExecute"]
        model = t.drop_duplicates("conn").set_index("conn")["model"].reindex(execute["conn"]).to_numpy()
        executions = {int(m): execute["begin"].to_numpy(np.int64)[model == m] for m in np.unique(model[~np.isnan(
            model.astype(float))])} if len(execute) else {}
        return window_step_bounds(self._windows, executions)

    @_named_cells
    def step_breakdown_table(self) -> pd.DataFrame | None:
        """analysis.db's StepTraceTime (torch_npu), as step_trace_time.csv reads; None without it."""
        a = self.analysis
        if a is None or not a.has("StepTraceTime"):
            return None
        present = [c for c in S.STEP_TRACE_TIME_COLUMNS if c in a.tables["StepTraceTime"]]
        # the columns of STEP_TRACE_TIME_COLUMNS the file has: names from this module, not from the file
        cols = a.read("StepTraceTime", f"SELECT step, {', '.join(present)} FROM StepTraceTime")  # noqa: S608
        frame = pd.DataFrame({"Device_id": np.full(len(cols[0]), self.device_id, np.int64), "Step": _int(cols[0])})
        for c, values in zip(present, cols[1:]):
            frame[S.STEP_TRACE_TIME_COLUMNS[c]] = _float(values)
        return frame[[c for c in breakdown.STEP_TRACE_TIME if c in frame.columns]]

    @_named_cells
    def step_trace(self) -> pd.DataFrame:
        return self._cached_side("step_trace", C.STEP_TRACE)

    def _cached_side(self, name: str, columns: list[str]) -> pd.DataFrame:
        key = f"_side_{name}"
        if key not in self.__dict__:
            frame = self._side(name)
            self.__dict__[key] = frame if frame is not None else empty(columns)
        return self.__dict__[key]

    @_named_cells
    def host_events(self) -> pd.DataFrame:
        return self._cached_side("host_events", HOST_EVENTS)

    @_named_cells
    def aicpu(self) -> pd.DataFrame:
        return self._cached_side("aicpu", AICPU)

    # ------------------------------------------------------------------ device tasks
    @cached_property
    def _device_tasks(self) -> pd.DataFrame:
        """TASK but the sub-tasks, and the collectives without a task of their own, by start; op rows marked."""
        self.op_rows()
        t, comp, coll = self._tasks, self._compute, self._collective
        main = t[~t["sub"]]
        kinds = self.texts(main["type"].to_numpy(object))
        names = kinds.copy()  # a runtime task by its type, as a run's device tasks name it
        names, task_types = names.copy(), kinds.copy()
        pos = pd.Index(main.index).get_indexer(comp["task"]) if len(comp) else np.zeros(0, np.int64)
        names[pos] = self.texts(comp["name"].to_numpy(object))
        task_types[pos] = self.texts(comp["taskType"].to_numpy(object))
        op = np.zeros(len(main), bool)
        op[pos] = True
        own = coll["task"].to_numpy(np.int64) >= 0
        at = pd.Index(main.index).get_indexer(coll["task"].to_numpy(np.int64)[own])
        names[at] = coll["node"].to_numpy(object)[own]
        task_types[at] = coll["task_type"].to_numpy(object)[own]
        op[at] = True
        frame = pd.DataFrame({"start": main["start"].to_numpy(), "dur": (main["end"] - main["start"]).to_numpy(),
                              "stream_id": main["stream"].to_numpy(), "task_id": main["task"].to_numpy(),
                              "model_id": main["model"].to_numpy(), "name": names, "task_type": task_types,
                              "connection_id": main["conn"].to_numpy(), "op": op,
                              "gid": main["gid"].to_numpy(), "kernel_type": kinds})
        lone = coll[~own]
        if len(lone):
            frame = pd.concat([frame, pd.DataFrame({
                "start": lone["start"].to_numpy(), "dur": (lone["end"] - lone["start"]).to_numpy(),
                "stream_id": -1, "task_id": -1, "model_id": S.UINT32_MAX, "name": lone["node"].to_numpy(object),
                "task_type": lone["task_type"].to_numpy(object), "connection_id": lone["conn"].to_numpy(),
                "op": True, "gid": np.iinfo(np.int64).max, "kernel_type": "HCCL"})], ignore_index=True)
        frame = frame.sort_values(["start", "gid"], kind="stable").reset_index(drop=True)
        rows = self.op_rows()
        iteration = self._step_of(self._launch_times(frame["connection_id"].to_numpy(np.int64),
                                                     frame["start"].to_numpy(np.int64))) \
            if self.torch_npu and len(self._step_time) else np.zeros(len(frame), np.int64)
        iteration[frame["op"].to_numpy(bool)] = rows.iteration
        frame["iteration"] = iteration
        return frame

    @_named_cells
    def device_tasks(self) -> pd.DataFrame:
        return self._device_tasks[DEVICE_TASKS].copy()

    @_named_cells
    def task_time(self) -> pd.DataFrame:
        d = self._device_tasks
        d = d[d["gid"] != np.iinfo(np.int64).max]  # TASK's rows only
        names = np.where(d["op"].to_numpy(bool), d["name"].to_numpy(object), summary.NA)
        start, dur = d["start"].to_numpy(np.int64), d["dur"].to_numpy(np.int64)
        self._times["task_time"] = pd.DataFrame({"task_start(us)": pd.array(start, dtype="Int64"),
                                                 "task_stop(us)": pd.array(start + dur, dtype="Int64")})
        return pd.DataFrame({
            "Device_id": np.full(len(d), self.device_id, np.int64), "kernel_name": pd.Categorical(names),
            "kernel_type": pd.Categorical(d["kernel_type"].to_numpy(object)),
            "stream_id": d["stream_id"].to_numpy(np.int64), "task_id": d["task_id"].to_numpy(np.int64),
            "task_time(us)": dur / 1000.0, "task_start(us)": start / 1000.0, "task_stop(us)": (start + dur) / 1000.0,
        })[summary.TASK_TIME]

    @_named_cells
    def api_calls(self) -> pd.DataFrame:
        """CANN_API as the host calls: each launch by the connection id its tasks carry, a ModelExecute by the
        model and step of its tasks (what an export links tasks to their calls by)."""
        calls = self._calls
        if calls.empty:
            return empty(["level", "api", "item", "thread", "begin", "end", "model_id", "iteration", "connection_id"])
        d = self._device_tasks
        first = d.drop_duplicates("connection_id").set_index("connection_id")
        launched = calls["conn"].isin(first.index).to_numpy()
        model = np.where(launched, first["model_id"].reindex(calls["conn"]).fillna(-1).to_numpy(np.int64), -1)
        iteration = np.where(launched, first["iteration"].reindex(calls["conn"]).fillna(-1).to_numpy(np.int64), -1)
        node = (calls["level"] == "node").to_numpy() & launched
        execute = (calls["api"] == "ModelExecute").to_numpy()
        return pd.DataFrame({
            "level": calls["level"].to_numpy(object), "api": calls["api"].to_numpy(object),
            "item": np.where(node, first["name"].reindex(calls["conn"]).to_numpy(object),
                             calls["api"].to_numpy(object)),
            "thread": calls["thread"].to_numpy(np.int64), "begin": calls["begin"].to_numpy(np.int64),
            "end": calls["end"].to_numpy(np.int64), "model_id": np.where(execute, model, -1),
            "iteration": np.where(node | execute, iteration, -1),
            "connection_id": np.where(node, calls["conn"].to_numpy(np.int64), -1)})

    @_named_cells
    def api_statistic(self) -> pd.DataFrame:
        calls = self._calls
        return api.statistic(calls["level"].tolist(), calls["api"].tolist(), calls["begin"].to_numpy(np.int64),
                             calls["end"].to_numpy(np.int64))

    @_named_cells
    def memcpy_info(self) -> pd.DataFrame:
        if not self.db.has("MEMCPY_INFO"):
            return empty(MEMCPY_INFO)
        gid, size, op = self.db.read("MEMCPY_INFO", "SELECT globalTaskId, size, memcpyOperation FROM MEMCPY_INFO")
        d = self._device_tasks
        at = pd.Index(d["gid"]).get_indexer(_int(gid))
        keep = at >= 0
        names = {k: v for k, v in S.ENUM_MEMCPY_OPERATION.items()}
        return pd.DataFrame({"connection_id": d["connection_id"].to_numpy(np.int64)[at[keep]],
                             "size": _int(size)[keep],
                             "operation": np.array([names.get(k, "other") for k in _int(op)[keep].tolist()], object)
                             })[MEMCPY_INFO]

    # ------------------------------------------------------------------ host layers
    @_named_cells
    def msprof_tx(self) -> pd.DataFrame:
        if not self.db.has("MSTX_EVENTS"):
            return empty(tx.MSPROF_TX)
        cols = self.db.read("MSTX_EVENTS", "SELECT startNs, endNs, eventType, category, message, globalTid, domainId, "
                                           "connectionId FROM MSTX_EVENTS")
        start, end, tid = _int(cols[0]), _int(cols[1]), _int(cols[5])
        kinds = {k: v for k, v in S.ENUM_MSTX_EVENT_TYPE.items()}
        t = self._tasks[~self._tasks["sub"]].drop_duplicates("conn").set_index("conn")
        conn = _int(cols[7], S.UINT32_MAX)
        dev_start = t["start"].reindex(conn).to_numpy(float)
        dev_end = t["end"].reindex(conn).to_numpy(float)
        order = np.argsort(start / 1000.0, kind="stable")
        self._times["msprof_tx"] = pd.DataFrame({"Start_time(us)": pd.array(start[order], dtype="Int64"),
                                                 "End_time(us)": pd.array(end[order], dtype="Int64")})
        frame = pd.DataFrame({
            "Device_id": np.full(len(start), self.device_id, np.int64), "pid": tid >> 32, "tid": tid & 0xFFFFFFFF,
            "category": _int(cols[3]), "event_type": pd.array([kinds.get(k, str(k)) for k in _int(cols[2]).tolist()],
                                                               dtype="str"),
            "payload_type": pd.array([summary.NA] * len(start), dtype="str"),
            "payload_value": pd.array([summary.NA] * len(start), dtype="str"),
            "Start_time(us)": start / 1000.0, "End_time(us)": end / 1000.0,
            "message_type": pd.array(["string"] * len(start), dtype="str"),
            "message": pd.array(self.texts(cols[4]), dtype="str"), "domain": pd.array(self.texts(cols[6]), dtype="str"),
            "Device Start_time(us)": dev_start / 1000.0, "Device End_time(us)": dev_end / 1000.0,
        })
        return frame.iloc[order].reset_index(drop=True)[tx.MSPROF_TX]

    # ------------------------------------------------------------------ communication
    @_named_cells
    def hccl_tasks(self) -> pd.DataFrame:
        if not self.db.has("COMMUNICATION_TASK_INFO"):
            return empty(HCCL_TASKS)
        cols = self.db.read("COMMUNICATION_TASK_INFO", "SELECT globalTaskId, taskType, planeId, srcRank, dstRank, "
                                                       "transportType, size, linkType, opId FROM "
                                                       "COMMUNICATION_TASK_INFO")
        t = self._tasks
        at = pd.Index(t["gid"]).get_indexer(_int(cols[0]))
        keep = np.flatnonzero(at >= 0)
        rows = t.iloc[at[keep]]
        order = np.lexsort((rows["gid"].to_numpy(), rows["start"].to_numpy()))
        keep, rows = keep[order], rows.iloc[order]
        coll = self._collective
        op_at = pd.Index(coll["op"]).get_indexer(_int(cols[8])[keep]) if len(coll) else np.full(len(keep), -1)
        ok = op_at >= 0
        self.op_rows()
        it_of_op = self._collective_iterations
        start, dur = rows["start"].to_numpy(np.int64), (rows["end"] - rows["start"]).to_numpy(np.int64)
        size = _int(cols[6])[keep]
        transport, link = S.ENUM_HCCL_TRANSPORT_TYPE, S.ENUM_HCCL_LINK_TYPE

        def op_text(col: str) -> np.ndarray:
            return np.where(ok, coll[col].to_numpy(object)[np.maximum(op_at, 0)] if len(coll) else summary.NA,
                            summary.NA)

        with np.errstate(divide="ignore", invalid="ignore"):
            bandwidth = np.where(dur > 0, size / np.maximum(dur, 1), 0.0)
        node = op_text("node") if self.db.has("GEPROF_COLLECTIVE") else np.full(len(keep), summary.NA, object)
        self._times["hccl_tasks"] = pd.DataFrame({"Start Time(us)": pd.array(start, dtype="Int64")})
        return pd.DataFrame({
            "Op Name": pd.array(op_text("name"), dtype="str"), "Node": pd.array(node, dtype="str"),
            "OP Type": pd.array(op_text("type"), dtype="str"),
            "Iteration ID": np.where(ok, it_of_op[np.maximum(op_at, 0)] if len(coll) else 0, 0),
            "Task Name": pd.array(self.texts(cols[1][keep]), dtype="str"), "Plane ID": _int(cols[2])[keep],
            "Start Time(us)": start / 1000.0, "Duration(us)": dur / 1000.0, "Size(Byte)": size,
            "Src Rank": _int(cols[3])[keep], "Dst Rank": _int(cols[4])[keep],
            "Transport Type": pd.array([transport.get(k, str(k)) for k in _int(cols[5])[keep].tolist()], dtype="str"),
            "Link Type": pd.array([link.get(k, str(k)) for k in _int(cols[7])[keep].tolist()], dtype="str"),
            "Bandwidth(GB/s)": bandwidth, "Stream ID": rows["stream"].to_numpy(np.int64),
        })[HCCL_TASKS]

    @property
    def _collective_iterations(self) -> np.ndarray:
        """The iteration of each collective (rows of :attr:`_collective`): its op row's."""
        rows = self.op_rows()
        comm = np.flatnonzero(self._is_comm)
        return rows.iteration[comm] if len(comm) == len(self._collective) else np.zeros(len(self._collective), int)

    def collective_groups(self) -> np.ndarray | None:
        """Each communication_time row's communicator: COMMUNICATION_OP's ``groupName`` of the op of that name;
        None when every op is in the world group (or the file names no group)."""
        coll, ct = self._collective, self.communication_time()
        if not len(coll) or not len(ct) or (coll["group"] == DEFAULT_GROUP).all():
            return None
        at = pd.Index(coll["name"]).get_indexer(ct["Op Name"].astype(str).to_numpy(object))
        return np.where(at >= 0, coll["group"].to_numpy(object)[np.maximum(at, 0)], DEFAULT_GROUP).astype(object)

    @_named_cells
    def communication_time(self) -> pd.DataFrame:
        a = self.analysis
        if a is None or not a.has("CommAnalyzerTime"):
            return empty(COMMUNICATION_TIME)
        cols = a.read("CommAnalyzerTime", "SELECT hccl_op_name, start_timestamp, elapse_time, transit_time, "
                                          "wait_time, synchronization_time, idle_time FROM CommAnalyzerTime")
        names = np.array([str(v) for v in cols[0].tolist()], object)
        coll = self._collective
        at = pd.Index(coll["name"]).get_indexer(names) if len(coll) else np.full(len(names), -1)
        ok = at >= 0
        types = np.where(ok, coll["type"].to_numpy(object)[np.maximum(at, 0)] if len(coll) else "",
                         [n.rsplit("_", 3)[0] for n in names.tolist()])
        iterations = np.where(ok, self._collective_iterations[np.maximum(at, 0)] if len(coll) else 0, 0)
        transit, wait, sync = _float(cols[3]), _float(cols[4]), _float(cols[5])

        def ratio(x: np.ndarray, y: np.ndarray) -> np.ndarray:
            with np.errstate(divide="ignore", invalid="ignore"):
                return np.round(np.where(x + y > 0, x / (x + y), 0.0), 4)

        frame = pd.DataFrame({
            "Op Name": pd.array(names, dtype="str"), "OP Type": pd.array(types.astype(object), dtype="str"),
            "Iteration ID": iterations.astype(np.int64), "Start Timestamp(us)": _float(cols[1]),
            "Elapse Time(ms)": _float(cols[2]), "Transit Time(ms)": transit, "Wait Time(ms)": wait,
            "Synchronization Time(ms)": sync, "Idle Time(ms)": _float(cols[6]),
            "Wait Time Ratio": ratio(wait, transit), "Synchronization Time Ratio": ratio(sync, transit)})
        return frame.sort_values("Start Timestamp(us)", kind="stable").reset_index(drop=True)[COMMUNICATION_TIME]

    # ------------------------------------------------------------------ memory
    @_named_cells
    def operator_memory(self) -> pd.DataFrame:
        side = self._cached_side("operator_memory", memory.OPERATOR_MEMORY)
        if len(side) or "operator_memory" in self._side_specs:
            return side
        if self.db.has("OP_MEMORY"):
            return self._op_memory()
        if self.db.has("NPU_OP_MEM"):
            return self._npu_op_mem[0]
        return empty(memory.OPERATOR_MEMORY)

    @_named_cells
    def memory_record(self) -> pd.DataFrame:
        side = self._cached_side("memory_record", memory.MEMORY_RECORD)
        if len(side) or "memory_record" in self._side_specs:
            return side
        if self.db.has("MEMORY_RECORD"):
            cols = self.db.read("MEMORY_RECORD", "SELECT component, timestamp, totalAllocated, totalReserved, "
                                                 "totalActive, streamPtr, deviceId FROM MEMORY_RECORD")
            ts = _int(cols[1])
            self._times["memory_record"] = pd.DataFrame({"Timestamp(us)": pd.array(ts, dtype="Int64")})
            mb = float(memory.MB)
            return pd.DataFrame({
                "Component": self.categorical(cols[0]), "Timestamp(us)": ts / 1000.0,
                "Total Allocated(MB)": _float(cols[2]) / mb, "Total Reserved(MB)": _float(cols[3]) / mb,
                "Total Active(MB)": _float(cols[4]) / mb, "Stream Ptr": _int(cols[5], 0),
                "Device Type": _device_types(_int(cols[6], self.device_id))})[memory.MEMORY_RECORD]
        if self.db.has("NPU_OP_MEM"):
            return self._npu_op_mem[1]
        return empty(memory.MEMORY_RECORD)

    def _op_memory(self) -> pd.DataFrame:
        cols = self.db.read("OP_MEMORY", "SELECT name, size, allocationTime, releaseTime, activeReleaseTime, duration, "
                                         "activeDuration, allocationTotalAllocated, allocationTotalReserved, "
                                         "allocationTotalActive, releaseTotalAllocated, releaseTotalReserved, "
                                         "releaseTotalActive, streamPtr, deviceId FROM OP_MEMORY")
        times = [_nullable_ns(cols[k]) for k in (2, 3, 4)]
        self._times["operator_memory"] = pd.DataFrame(dict(zip(
            ["Allocation Time(us)", "Release Time(us)", "Active Release Time(us)"], times)))
        mb = float(memory.MB)
        frame = pd.DataFrame({
            "Name": self.categorical(cols[0]), "Size(KB)": _float(cols[1]) / 1024.0,
            **{c: t.to_numpy(float, na_value=np.nan) / 1000.0 for c, t in zip(
                ["Allocation Time(us)", "Release Time(us)", "Active Release Time(us)"], times)},
            "Duration(us)": _float(cols[5]) / 1000.0, "Active Duration(us)": _float(cols[6]) / 1000.0,
            **{c: _float(cols[k]) / mb for c, k in (
                ("Allocation Total Allocated(MB)", 7), ("Allocation Total Reserved(MB)", 8),
                ("Allocation Total Active(MB)", 9), ("Release Total Allocated(MB)", 10),
                ("Release Total Reserved(MB)", 11), ("Release Total Active(MB)", 12))},
            "Stream Ptr": _int(cols[13], 0), "Device Type": _device_types(_int(cols[14], self.device_id))})
        return frame[memory.OPERATOR_MEMORY]

    @cached_property
    def _npu_op_mem(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """operator_memory and memory_record from msprof's allocate / release events (an allocation's release:
        the next release of the same operator and address); NPU_OP_MEM has no stream pointer (0 here)."""
        cols = self.db.read("NPU_OP_MEM", "SELECT operatorName, addr, type, size, timestampNs, totalAllocate, "
                                          "totalReserve, component FROM NPU_OP_MEM WHERE deviceId = ?",
                            (self.device_id,))
        ts = _int(cols[4])
        order = np.argsort(ts, kind="stable")
        cols = [c[order] for c in cols]
        ts = ts[order]
        kind = self.texts(cols[2])
        name_ids, addr = _int(cols[0]), _int(cols[1])
        alloc = np.flatnonzero(kind == "allocate")
        release_of = np.full(len(alloc), -1, np.int64)
        open_: dict[tuple[int, int], list[int]] = {}
        for k, i in enumerate(alloc.tolist()):
            open_.setdefault((name_ids[i], addr[i]), []).append(k)
        pending = {key: list(ks) for key, ks in open_.items()}
        for i in np.flatnonzero(kind == "release").tolist():
            waiting = pending.get((name_ids[i], addr[i]))
            if waiting:
                k = waiting.pop(0)
                if alloc[k] <= i:
                    release_of[k] = i
        mb = float(memory.MB)
        total, reserve = _float(cols[5]), _float(cols[6])
        rel = release_of >= 0
        pick = np.maximum(release_of, 0)
        rel_ns = pd.array(np.where(rel, ts[pick], 0), dtype="Int64")
        rel_ns[~rel] = pd.NA
        self._times["operator_memory"] = pd.DataFrame({"Allocation Time(us)": pd.array(ts[alloc], dtype="Int64"),
                                                       "Release Time(us)": rel_ns, "Active Release Time(us)": rel_ns})
        duration = np.where(rel, (ts[pick] - ts[alloc]) / 1000.0, np.nan)
        devices = _device_types(np.full(len(alloc), self.device_id, np.int64))
        om = pd.DataFrame({
            "Name": self.categorical(cols[0][alloc]), "Size(KB)": _float(cols[3])[alloc] / 1024.0,
            "Allocation Time(us)": ts[alloc] / 1000.0, "Release Time(us)": np.where(rel, ts[pick] / 1000.0, np.nan),
            "Active Release Time(us)": np.where(rel, ts[pick] / 1000.0, np.nan), "Duration(us)": duration,
            "Active Duration(us)": duration, "Allocation Total Allocated(MB)": total[alloc] / mb,
            "Allocation Total Reserved(MB)": reserve[alloc] / mb, "Allocation Total Active(MB)": total[alloc] / mb,
            "Release Total Allocated(MB)": np.where(rel, total[pick] / mb, np.nan),
            "Release Total Reserved(MB)": np.where(rel, reserve[pick] / mb, np.nan),
            "Release Total Active(MB)": np.where(rel, total[pick] / mb, np.nan),
            "Stream Ptr": np.zeros(len(alloc), np.int64), "Device Type": devices})[memory.OPERATOR_MEMORY]
        self._times["memory_record"] = pd.DataFrame({"Timestamp(us)": pd.array(ts, dtype="Int64")})
        mr = pd.DataFrame({
            "Component": self.categorical(cols[7]), "Timestamp(us)": ts / 1000.0, "Total Allocated(MB)": total / mb,
            "Total Reserved(MB)": reserve / mb, "Total Active(MB)": total / mb,
            "Stream Ptr": np.zeros(len(ts), np.int64),
            "Device Type": _device_types(np.full(len(ts), self.device_id, np.int64))})[memory.MEMORY_RECORD]
        if len(alloc):
            self._notes.append(f"{self.file}: operator_memory and memory_record from NPU_OP_MEM's allocate/release "
                               "events, which hold no stream pointer (Stream Ptr 0)")
        return om, mr


def _nullable_ns(values: np.ndarray) -> pd.arrays.IntegerArray:
    ints = _int(values, -1)
    return pd.arrays.IntegerArray(np.where(ints < 0, 0, ints), ints < 0)


def _device_types(devices: np.ndarray) -> pd.Categorical:
    return pd.Categorical([f"NPU:{d}" for d in devices.tolist()])


def _column_of(metric: str) -> str:
    """The op_summary column of a TASK_PMU_INFO metric (:func:`.db_schema.pmu_name` the other way)."""
    for family in ("A2", "910A"):
        for group in C.PMU_GROUPS:
            for col in C.pmu_columns(group, family):
                if S.pmu_name(col) == metric:
                    return col
    return f"{metric}(us)" if metric.endswith("_time") else metric
