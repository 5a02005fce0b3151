"""The geprof Parquet export's layout, and ``ParquetSource``, which reads it back.

An export (:func:`..export.parquet.export_parquet`) is ``<run name>.geprof_parquet/``: one Parquet
file per non-empty table, op_summary's per-row iteration / exact start ns /
connection id in ``op_rows.parquet``, the exact step bounds in
``step_bounds.parquet``, every other table's exact timestamps (the source's
``times_ns``) in ``<table>.times.parquet``, and ``manifest.json`` (format version, run name,
info, device, notes, and every table's columns and dtypes).  The manifest
restores what Parquet cannot carry by itself: duplicate column names
(step_trace's ``Reduce`` pairs are stored as ``<name> #<k>``), categoricals
with object categories, object columns, and the dtypes of empty tables, so a
round trip gives equal frames.  Files are read with pyarrow, column by column without
consolidating them (a 1,000,000-row op_summary loads in a fraction of a second); nothing read is
evaluated or unpickled.
"""

from __future__ import annotations

import re
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from ...errors import ImportFormatError
from ...prof.json_text import excerpt
from ..files import open_binary, present, reading, what_is_there
from ..tables import roofline, summary
from ..tables.memory import MemoryPeak
from .csvfiles import read_json
from .filesource import FileSource

FORMAT = "geprof_parquet"
VERSION = 1
SUFFIX = ".geprof_parquet"
MANIFEST = "manifest.json"
OP_ROWS = ("iteration", "start_ns", "connection_id")
#: op_rows.parquet's bool column of which rows are collectives (the exporting source's
#: ``communication_rows``; exports written before it existed lack it).
COMMUNICATION = "communication"


def is_parquet_export(path: Path) -> bool:
    manifest = path / MANIFEST
    if not manifest.is_file():
        return False
    try:
        return read_json(manifest).get("format") == FORMAT
    except (ImportFormatError, AttributeError):
        return False


def has_unreadable_manifest(path: Path) -> bool:
    """``path`` holds a manifest.json that cannot be read as JSON (or something that is not a file where it
    should be): a damaged export, which :class:`ParquetSource` reads from its Parquet files, saying so."""
    manifest = path / MANIFEST
    if what_is_there(manifest) is not None:
        return True
    if not manifest.is_file():
        return False
    try:
        read_json(manifest)
    except ImportFormatError:
        return True
    return False


_REPEAT = re.compile(r"(.*) #(\d+)")


def read_names(names: list[str]) -> list[str]:
    """The column names :func:`disk_names` gave back as they were (``<name> #<k>`` after ``<name>``)."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        m = _REPEAT.fullmatch(name)
        if m and seen.get(m.group(1), 0) == int(m.group(2)) - 1:
            name = m.group(1)
        seen[name] = seen.get(name, 0) + 1
        out.append(name)
    return out


def disk_names(columns: list[str]) -> list[str]:
    """Unique column names for the file: the k-th repeat of a name becomes ``<name> #<k>``."""
    seen: dict[str, int] = {}
    out = []
    for c in columns:
        k = seen.get(c, 0)
        seen[c] = k + 1
        out.append(c if k == 0 else f"{c} #{k + 1}")
    return out


def _pandas_dtype(spec: str, where: str):
    try:
        return pd.api.types.pandas_dtype(spec)
    except (TypeError, ValueError):
        raise ImportFormatError(f"{where}: unknown dtype {spec!r}") from None


def dtype_spec(dtype) -> str | dict:
    """How a manifest records a column's dtype (a categorical: its categories' dtype and order)."""
    if isinstance(dtype, pd.CategoricalDtype):
        return {"categories": str(dtype.categories.dtype), "ordered": bool(dtype.ordered)}
    return str(dtype)


def restore_dtype(column: pd.Series, spec, where: str) -> pd.Series:
    """The column with the dtype a manifest recorded (``spec``: :func:`dtype_spec`; ``where`` names it in an
    error)."""
    if isinstance(spec, dict):
        cat = column if isinstance(column.dtype, pd.CategoricalDtype) else column.astype("category")
        categories = cat.cat.categories
        want = _pandas_dtype(spec.get("categories", "object"), where)
        if categories.dtype != want:
            categories = categories.astype(want)
        values = pd.Categorical.from_codes(cat.cat.codes.to_numpy(), categories=categories,
                                           ordered=bool(spec.get("ordered")))
        return pd.Series(values, index=column.index, name=column.name)
    want = _pandas_dtype(spec, where)
    return column if column.dtype == want else column.astype(want)


def empty_column(spec, where: str) -> pd.Series:
    """An empty column with the dtype a manifest records (``spec``; ``where`` names it in an error)."""
    if isinstance(spec, dict):
        categories = pd.Index([], dtype=_pandas_dtype(spec.get("categories", "object"), where))
        return pd.Series(pd.Categorical([], categories=categories, ordered=bool(spec.get("ordered"))))
    return pd.Series([], dtype=_pandas_dtype(spec, where))


def _counts(v: object) -> bool:
    return isinstance(v, dict) and all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 2**63
                                       for n in v.values())


def _peak(v: object) -> bool:
    if not isinstance(v, dict) or not isinstance(v.get("tensor"), str):
        return False
    fields = ("allocated_bytes", "reserved_bytes", "timestamp_ns", "model_id")
    return all(isinstance(v.get(k), int) and not isinstance(v.get(k), bool) and -(2**63) <= v[k] < 2**63
               for k in fields)


#: Optional manifest fields: (key, check, what is accepted).  A damaged one is dropped with a note: the
#: manifest loses what that field held, the export its tables nothing.
_MANIFEST_FIELDS = (
    ("run", lambda v: isinstance(v, str), "a run name"), ("info", lambda v: isinstance(v, dict), "an object"),
    ("options", lambda v: isinstance(v, dict), "an object"), ("device", lambda v: isinstance(v, dict), "an object"),
    ("notes", lambda v: isinstance(v, list) and all(isinstance(n, str) for n in v), "a list of strings"),
    ("dropped", _counts, "an object of counts (whole numbers >= 0, below 2**63)"),
    ("complete", lambda v: isinstance(v, bool), "true or false"),
    ("device_id", lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**31,
     "a device id (0 .. 2**31 - 1)"),
    ("memory_peak", _peak, "an object of allocated_bytes, reserved_bytes, timestamp_ns, model_id (integers) "
                           "and tensor (a name)"),
)


class ParquetSource(FileSource):
    """A ``.geprof_parquet`` export: every table as it was exported, timestamps exact."""

    def __init__(self, path: Path, notes: list[str] | None = None) -> None:
        super().__init__()
        self._path = Path(path)
        self._notes = list(notes or [])
        self.manifest = self._manifest(self._path / MANIFEST)
        self.device_id = int(self.manifest.get("device_id", 0) or 0)

    def _manifest(self, path: Path) -> dict:
        """The manifest, checked: a manifest that cannot be read (or has no tables) is made from the Parquet
        files, a damaged optional field dropped, each said in the notes; another format or version is an
        error (its files may mean other things)."""
        try:
            manifest = read_json(path)
        except ImportFormatError as exc:
            return self._from_files(str(exc))
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise ImportFormatError(f"{path}: not a geprof Parquet manifest (no \"format\": \"{FORMAT}\")")
        if manifest.get("version") != VERSION:
            raise ImportFormatError(f"{path}: format version {excerpt(manifest.get('version'), 20)}; this "
                                    f"geprof_nb reads version {VERSION}")
        if not isinstance(manifest.get("tables"), dict) or "op_summary" not in manifest["tables"]:
            return self._from_files(f"{path}: no 'tables' entry for op_summary")
        for key, check, what in _MANIFEST_FIELDS:  # read from disk: any field may be damaged
            if manifest.get(key) is not None and not check(manifest[key]):
                self._notes.append(f"{path}: field {key!r} is {excerpt(manifest[key])}; accepted: {what}; read as "
                                   "absent (what it held is unknown)")
                manifest = {k: v for k, v in manifest.items() if k != key}
        return manifest

    def _from_files(self, problem: str) -> dict:
        """A manifest of the Parquet files in the export, for one that cannot be read: the tables are in the
        files (their dtypes in pandas' metadata there); only what the manifest alone held is lost."""
        files = {p.name.removesuffix(".parquet"): p for p in sorted(self._path.glob("*.parquet")) if p.is_file()}
        if "op_summary" not in files or "op_rows" not in files:
            raise ImportFormatError(f"{problem}; and op_summary.parquet and op_rows.parquet, from which the tables "
                                    "could be read without it, are not both there")
        tables = {}
        for name, file in files.items():
            try:  # the dtypes pandas stored in the file's metadata, from its schema alone
                empty = pq.read_schema(file).empty_table().to_pandas()
                rows = pq.read_metadata(file).num_rows
            except (OSError, ValueError, TypeError) as exc:  # pyarrow's errors derive from the first two; a
                # damaged pandas schema in the file's metadata (a dtype name) raises TypeError in to_pandas
                raise ImportFormatError(f"{file}: cannot be read as Parquet ({exc})") from None
            tables[name] = {"file": file.name, "rows": rows, "columns": read_names([str(c) for c in empty.columns]),
                            "dtypes": [dtype_spec(empty.iloc[:, i].dtype) for i in range(empty.shape[1])]}
        self._notes.append(f"{problem}: the export's {len(tables)} tables are read from their Parquet files; lost "
                           "with the manifest: the run's name, description (info, options, device), notes, dropped "
                           "counts and memory peak, and some dtypes (of tables without rows, which have no file, and "
                           "of category labels); every row and column of the tables is read")
        return {"format": FORMAT, "version": VERSION, "tables": tables}

    @property
    def path(self) -> Path:
        return self._path

    @property
    def name(self) -> str:
        return str(self.manifest.get("run") or self._path.name.removesuffix(SUFFIX))

    @property
    def info(self) -> dict:
        return self.manifest.get("info") or {}

    @property
    def options(self) -> dict:
        return self.manifest.get("options") or {}

    @property
    def device(self) -> dict:
        return self.manifest.get("device") or {}

    @property
    def complete(self) -> bool:
        return bool(self.manifest.get("complete", True))

    def notes(self) -> list[str]:
        return [*self._notes, *(self.manifest.get("notes") or [])]

    def dropped(self) -> dict[str, int]:
        return dict(self.manifest.get("dropped") or {})

    def table(self, name: str) -> pd.DataFrame | None:
        """A stored table with its recorded columns and dtypes (None if the export has no entry)."""
        entry = self.manifest["tables"].get(name)
        if entry is None:
            return None
        where = f"{self._path / MANIFEST} (table {name})"
        if not isinstance(entry, dict):
            raise ImportFormatError(f"{where}: the entry is {type(entry).__name__}; expected an object")
        columns, dtypes = entry.get("columns") or [], entry.get("dtypes") or []
        if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns) \
                or not isinstance(dtypes, list) or not isinstance(entry.get("file"), str | None) \
                or not isinstance(entry.get("rows", 0), int) or isinstance(entry.get("rows", 0), bool):
            raise ImportFormatError(f"{where}: 'columns' must be a list of names, 'dtypes' a list, 'file' a file "
                                    "name, 'rows' a count")
        if len(columns) != len(dtypes):
            raise ImportFormatError(f"{where}: {len(columns)} columns but {len(dtypes)} dtypes")
        if entry.get("file") is None:
            frame = pd.DataFrame({i: empty_column(d, where) for i, d in enumerate(dtypes)}, index=pd.RangeIndex(0))
        else:
            file = self._path / Path(entry["file"]).name
            if not present(file, "a Parquet file"):
                raise ImportFormatError(f"{file}: missing; the manifest lists it for table {name}")
            with open_binary(file, "a Parquet file") as f, reading(file, "a Parquet file"):
                f.read(4)  # a file the OS cannot read is said as such (pyarrow would say it is empty)
            try:  # what pd.read_parquet does, without consolidating the columns into 2-D blocks (2x faster)
                frame = pq.read_table(file).to_pandas(split_blocks=True, self_destruct=True)
            except (OSError, ValueError, TypeError) as exc:  # pyarrow's errors derive from the first two; a
                # damaged pandas schema in the file's metadata (a dtype name) raises TypeError in to_pandas
                raise ImportFormatError(f"{file}: cannot be read as Parquet ({exc})") from None
            if frame.shape != (entry.get("rows"), len(columns)):
                raise ImportFormatError(f"{file}: {frame.shape[0]} rows x {frame.shape[1]} columns; the manifest "
                                        f"says {entry.get('rows')} x {len(columns)}")
            for i, d in enumerate(dtypes):  # in place: rebuilding the frame would copy every column
                column = frame.iloc[:, i]
                restored = restore_dtype(column, d, where)
                if restored is not column:
                    frame.isetitem(i, restored)
        frame.columns = columns
        return frame

    def times_ns(self, table: str, frame: pd.DataFrame) -> pd.DataFrame:
        """The exact ns the exporting source gave (``<table>.times.parquet``)."""
        if table not in self._times and (stored := self.table(f"{table}.times")) is not None:
            self._times[table] = stored
        return super().times_ns(table, frame)

    def _stored(self, name: str) -> pd.DataFrame:
        frame = self.table(name)
        return frame if frame is not None else getattr(super(), name)()

    @cached_property
    def _rows(self) -> summary.OpRows:
        frame = self.table("op_summary")
        extra = self.table("op_rows")
        if extra is None or len(extra) != len(frame):
            raise ImportFormatError(f"{self._path}: op_rows.parquet is missing or does not match op_summary")
        return summary.OpRows(frame, *(extra[c].to_numpy(np.int64) for c in OP_ROWS))

    def op_rows(self) -> summary.OpRows:
        return self._rows

    def communication_rows(self) -> np.ndarray:
        """The collectives the exporting source found (at task_trace l0 from the HCCL task track,
        which the export does not carry); from op_summary's Task Type for older exports."""
        extra = self.table("op_rows")
        if COMMUNICATION in extra.columns:
            return extra[COMMUNICATION].to_numpy(bool)
        return super().communication_rows()

    def step_bounds(self) -> pd.DataFrame:
        return self._stored("step_bounds")

    def op_work(self, roofs: roofline.Roofs) -> pd.DataFrame:
        """The roofline's inputs the exporting source gave (``op_work.parquet``: a simulated run's cost model
        counts); from the PMU columns for older exports."""
        work = self.table("op_work")
        if work is None or len(work) != len(self.op_rows().frame):
            return super().op_work(roofs)
        notes = self.manifest.get("op_work_notes")
        work.attrs["notes"] = [str(n) for n in notes] if isinstance(notes, list) else []
        return work

    def step_breakdown_table(self) -> pd.DataFrame | None:
        """The step_breakdown the exported Profile had."""
        return self.table("step_breakdown")

    def op_statistic(self) -> pd.DataFrame:
        return self._stored("op_statistic")

    def step_trace(self) -> pd.DataFrame:
        return self._stored("step_trace")

    def task_time(self) -> pd.DataFrame:
        return self._stored("task_time")

    def api_statistic(self) -> pd.DataFrame:
        return self._stored("api_statistic")

    def host_events(self) -> pd.DataFrame:
        return self._stored("host_events")

    def msprof_tx(self) -> pd.DataFrame:
        return self._stored("msprof_tx")

    def communication_statistic(self) -> pd.DataFrame:
        return self._stored("communication_statistic")

    def hccl_tasks(self) -> pd.DataFrame:
        return self._stored("hccl_tasks")

    def communication_time(self) -> pd.DataFrame:
        return self._stored("communication_time")

    def aicpu(self) -> pd.DataFrame:
        return self._stored("aicpu")

    def operator_memory(self) -> pd.DataFrame:
        return self._stored("operator_memory")

    def memory_record(self) -> pd.DataFrame:
        return self._stored("memory_record")

    def serving_requests(self) -> pd.DataFrame:
        return self._stored("serving_requests")

    def serving_steps(self) -> pd.DataFrame:
        return self._stored("serving_steps")

    def memory_peak(self) -> MemoryPeak | None:
        peak = self.manifest.get("memory_peak")  # checked with the manifest
        if not peak:
            return None
        return MemoryPeak(**{k: peak[k] for k in MemoryPeak.__dataclass_fields__})
