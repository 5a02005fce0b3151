"""Read a geprof run directory: ``info.json``, the hash dictionary and the raw
record chunks (``.npy``, loaded with ``allow_pickle=False``: nothing read from
disk can execute code).  A damaged chunk is skipped and listed in ``damaged``;
records whose chunk files are gone are counted in ``missing``; everything intact
still loads.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from functools import cached_property
from pathlib import Path
from typing import BinaryIO

import numpy as np
import orjson

from ..errors import RunDirError
from ..prof import rawdata


def is_run_dir(path: Path) -> bool:
    return (path / rawdata.INFO_FILE).is_file()


_RUN_NAME = re.compile(r"PROF_(\d{6})_(\d{17})_\w+")
#: A simulated cluster's root: ``rank_<r>/`` output directories (see ``geprof_nb.ge.cluster``).
CLUSTER_NAME = re.compile(r"CLUSTER_(\d{17})_\w+")


def newest_run(path: Path) -> Path | None:
    """The newest run directory (or simulated cluster root) directly under ``path``.

    Ordered by the creation time and sequence number in the ``PROF_<seq>_<time>_<tag>``
    (``CLUSTER_<time>_<tag>``) name (wall-clock, even for virtual-clock runs), not
    by mtime, which any later write into an old run would change.
    """
    runs = [p for p in path.iterdir() if p.is_dir() and (is_run_dir(p) or CLUSTER_NAME.fullmatch(p.name))
            ] if path.is_dir() else []
    if not runs:
        return None

    def created(p: Path) -> tuple:
        if m := _RUN_NAME.fullmatch(p.name):
            return (m.group(2), int(m.group(1)))
        m = CLUSTER_NAME.fullmatch(p.name)
        return (m.group(1), 0) if m else ("", 0)

    return max(runs, key=created)


def _read_header(f: BinaryIO) -> tuple[int, np.dtype]:
    """(records, dtype) from the ``.npy`` header at the start of the open file ``f``, checked against
    the file's size; leaves ``f`` at the first record.

    A damaged header that claims billions of records must not make numpy allocate them.
    Raises ValueError for anything but a whole 1-D array.
    """
    try:
        major, _ = np.lib.format.read_magic(f)
        read_header = {1: np.lib.format.read_array_header_1_0, 2: np.lib.format.read_array_header_2_0}[major]
        shape, _, dtype = read_header(f)
    except Exception as exc:  # noqa: BLE001 - damaged bytes: numpy's header parser raises all sorts
        raise ValueError(f"unreadable .npy header ({type(exc).__name__}: {exc})") from None
    if len(shape) != 1:
        raise ValueError(f"records are a 1-D array, the header says shape {shape}")
    size = os.fstat(f.fileno()).st_size
    if size < f.tell() + shape[0] * dtype.itemsize:
        raise ValueError(f"the header says {shape[0]} records but the file holds "
                         f"{max(0, size - f.tell()) // max(dtype.itemsize, 1)}")
    return shape[0], dtype


def _chunk_header(path: Path) -> tuple[int, np.dtype]:
    """(records, dtype) of a chunk from its ``.npy`` header (:func:`_read_header`)."""
    with open(path, "rb") as f:
        return _read_header(f)


def _read_chunk(path: Path) -> np.ndarray:
    """The records of a chunk, as ``np.load(path, allow_pickle=False)`` reads them, after
    :func:`_read_header` checked the header (parsed once: numpy's header parser compiles it)."""
    with open(path, "rb") as f:
        rows, dtype = _read_header(f)
        if dtype.hasobject:  # numpy's own refusal: object records would be unpickled
            raise ValueError("Object arrays cannot be loaded when allow_pickle=False")
        return np.fromfile(f, dtype=dtype, count=rows)


def _chunk_rows(path: Path, dtype: np.dtype) -> int:
    """Records in an intact chunk of ``dtype`` from its ``.npy`` header; 0 if it is damaged or short."""
    try:
        rows, found = _chunk_header(path)
    except (OSError, ValueError):
        return 0
    return rows if found == dtype else 0


#: The fields of info.json the tables read, and their shapes: (field, check, what is accepted).
_INFO_FIELDS: tuple[tuple[str, object, str], ...] = (
    ("status", lambda v: isinstance(v, str), "a string"),
    ("options", lambda v: isinstance(v, dict), "an object of profiling options"),
    ("devices", lambda v: isinstance(v, dict) and all(str(k).isdigit() and isinstance(d, dict) for k, d in v.items()),
     "an object of device id -> device description"),
    ("records", lambda v: isinstance(v, dict), "an object of record counts"),
    ("aged_out", lambda v: isinstance(v, dict) and isinstance(v.get("records", {}), dict)
     and all(isinstance(v.get(k, 0), int) for k in ("chunks", "bytes")), "an object with chunks, bytes, records"),
    ("dropped", lambda v: isinstance(v, dict) and all(isinstance(n, int) for n in v.values()), "an object of counts"),
    ("write_failed", lambda v: isinstance(v, dict) and all(isinstance(n, int) for n in v.values()),
     "an object of counts"),
    ("notes", lambda v: isinstance(v, list) and all(isinstance(n, str) for n in v), "a list of strings"),
    ("note", lambda v: isinstance(v, str), "a string"),
    ("models", lambda v: isinstance(v, dict) and all(
        str(k).isdigit() and isinstance(m, dict) and isinstance(m.get("training"), bool) for k, m in v.items()),
     "an object of model id -> {name, training}"),
    ("pmu_events", lambda v: isinstance(v, dict) and all(isinstance(e, list) for e in v.values()),
     "an object of core -> event names"),
    ("type_info", lambda v: isinstance(v, dict) and all(isinstance(t, dict) for t in v.values()),
     "an object of level -> type names"),
    ("start_ns", lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer (ns)"),
    ("end_ns", lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer (ns)"),
    ("pid", lambda v: isinstance(v, int) and not isinstance(v, bool), "a process id"),
    ("hostname", lambda v: isinstance(v, str), "a host name"),
    ("switch_history", lambda v: isinstance(v, list) and all(
        isinstance(w, dict) and isinstance(w.get("start_ns"), int) and not isinstance(w["start_ns"], bool) for w in v),
     "a list of collection windows, each with an integer start_ns"),
)


def _whole_number(least: int):
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= least


#: The fields of a device description the tables compute with (PMU columns, the advisor), when
#: present: (field, check, what is accepted).
_DEVICE_FIELDS: tuple[tuple[str, object, str], ...] = (
    ("ai_core_num", _whole_number(1), "a whole number >= 1"),
    ("aiv_num", _whole_number(0), "a whole number >= 0"),
    ("aic_frequency", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0,
     "a number > 0 (MHz)"),
    ("chip_family", lambda v: isinstance(v, str), "a chip family name (A2, 910A)"),
)


def _check_info(info: dict, path: Path) -> None:
    """info.json is read from disk: a field the tables read with another shape is a RunDirError
    naming it and what it should hold, not an AttributeError deep in a table."""
    for field, check, accepted in _INFO_FIELDS:
        value = info.get(field)
        if value is not None and not check(value):
            raise RunDirError(f"{path}: field {field!r} is {json.dumps(value, default=str)[:60]}; accepted: {accepted}")
    for device, description in (info.get("devices") or {}).items():
        for field, check, accepted in _DEVICE_FIELDS:
            if field in description and not check(description[field]):
                raise RunDirError(f"{path}: device {device!r} field {field!r} is "
                                  f"{json.dumps(description[field], default=str)[:60]}; accepted: {accepted}")


def _json_line(line: str) -> object:
    """One JSON line: orjson (a run's hash dictionary has a line per name, which the stdlib parser
    takes ~5x as long over), the stdlib parser for what orjson refuses (NaN, lone surrogates)."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line)


def _dict(value: object) -> dict:
    """``value`` if it is a dict, else ``{}`` (info.json is read from disk: any field may be damaged)."""
    return value if isinstance(value, dict) else {}


class RunDir:
    """The raw content of one run directory.

    ``info`` replaces what its info.json says: the process that collected the run passes the
    description it holds when the run's last info.json could not be written (a full disk, a
    directory made read-only), since the file then is an older one (status "running", without
    the write failures); it is checked as the file would be.
    """

    def __init__(self, path: str | Path, info: dict | None = None) -> None:
        self.path = Path(path)
        info_path = self.path / rawdata.INFO_FILE
        try:
            self.info: dict = json.loads(info_path.read_text(encoding="utf-8")) if info is None else info
        except FileNotFoundError:
            raise RunDirError(f"{self.path} is not a geprof run directory: {rawdata.INFO_FILE} is missing") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RunDirError(f"{info_path}: cannot be read as JSON ({exc})") from None
        if not isinstance(self.info, dict) or "geprof_raw_version" not in self.info:
            raise RunDirError(f"{info_path}: not a geprof run description (no 'geprof_raw_version' field)")
        _check_info(self.info, info_path)
        self.damaged: list[str] = []

    @property
    def complete(self) -> bool:
        return self.info.get("status") == "complete"

    @property
    def options(self) -> dict:
        return self.info.get("options") or {}

    @property
    def device_ids(self) -> list[int]:
        ids = {int(k) for k in (self.info.get("devices") or {})}
        ids |= {int(p.name.split("_")[1]) for p in self.path.glob("device_*") if p.name.split("_")[1].isdigit()}
        return sorted(ids) or [0]

    @cached_property
    def missing(self) -> list[str]:
        """What info.json says was written but no intact chunk holds, one line per record kind.

        Counted from the chunks' ``.npy`` headers (nothing is loaded), so a deleted,
        truncated or never-copied chunk is reported even before its table is built.
        Chunks that ``storage_limit`` aged out are not missing, and a killed run (whose
        info.json counts lag behind its chunks) reports nothing here.
        """
        recorded = _dict(self.info.get("records"))
        aged = _dict(_dict(self.info.get("aged_out")).get("records"))
        out = []
        for key, written in recorded.items():
            kind, _, device = str(key).partition("@")
            spec = rawdata.RECORD_KINDS.get(kind)
            if spec is None or not isinstance(written, int) or not (device.isdigit() or not device):
                continue
            directory = self.path / spec.directory(int(device or 0))
            present = sum(_chunk_rows(c, spec.dtype) for c in directory.glob(f"{kind}.*.npy"))
            aged_out = aged.get(kind, 0)
            lost = written - (aged_out if isinstance(aged_out, int) else 0) - present
            if lost > 0:
                where = f" on device {device}" if device else ""
                out.append(f"{kind}{where}: {lost} of {written} written records are missing (chunk files deleted, "
                           "truncated or not copied)")
        return out

    def device_info(self, device_id: int = 0) -> dict:
        return (self.info.get("devices") or {}).get(str(device_id), {})

    def _holds_hashed_records(self) -> bool:
        """Records of a kind that names strings by hash id were written (a run of step traces only needs
        no hash dictionary, and writes none)."""
        records = self.info.get("records") or {}
        kinds = rawdata.RECORD_KINDS
        return any(n and kinds[k.split("@")[0]].hashed for k, n in records.items() if k.split("@")[0] in kinds)

    @cached_property
    def hashes(self) -> dict[int, str]:
        """Hash id -> string (``MsprofGetHashId`` dictionary)."""
        out: dict[int, str] = {}
        path = self.path / rawdata.HASH_DICT_FILE
        if not path.exists():
            if self._holds_hashed_records():  # they name strings by hash: without the dictionary they are unknown
                self.damaged.append(f"{rawdata.HASH_DICT_FILE} (missing: names show as <unknown 0x...>)")
            return out
        with open(path, encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():  # the writer ends a line a failed write cut off with an empty one
                    continue
                try:
                    entry = _json_line(line)
                    out[int(entry["id"])] = str(entry["s"])
                except (ValueError, KeyError, TypeError):
                    self.damaged.append(f"{path.name}:{lineno}")
        return out

    def load(self, kind: str, device_id: int = 0) -> np.ndarray:
        """All records of one kind (chunks concatenated in order; empty if none)."""
        spec = rawdata.RECORD_KINDS[kind]
        directory = self.path / spec.directory(device_id)
        parts = []
        for chunk in sorted(directory.glob(f"{kind}.*.npy")):
            try:
                arr = _read_chunk(chunk)
            except Exception as exc:  # noqa: BLE001 - damaged bytes make numpy raise all sorts
                self.damaged.append(str(chunk.relative_to(self.path)))
                warnings.warn(f"{chunk}: damaged chunk skipped ({exc})", stacklevel=2)
                continue
            if arr.dtype != spec.dtype:
                self.damaged.append(str(chunk.relative_to(self.path)))
                warnings.warn(f"{chunk}: unexpected record layout {arr.dtype}, skipped", stacklevel=2)
                continue
            parts.append(arr)
        if not parts:
            return np.zeros(0, spec.dtype)
        out = parts[0] if len(parts) == 1 else np.concatenate(parts)
        if "connection_id" in spec.dtype.names:
            out = self._plausible_connections(out, kind)
        return out

    @cached_property
    def _connection_limit(self) -> int:
        """No connection id of this run can reach this: they are handed out densely, one per loaded task
        (task_track record), so four times their count leaves room for the gaps of discarded windows."""
        tracks = sum(_chunk_rows(c, rawdata.TASK_TRACK_DTYPE) for c in self.path.glob("device_*/data/task_track.*.npy"))
        return 4 * tracks + 65536

    def _plausible_connections(self, records: np.ndarray, kind: str) -> np.ndarray:
        """``records`` without those whose connection id a damaged chunk made impossible.

        The tables index dense arrays by connection id: one flipped byte could make them
        allocate gigabytes.  Such records are dropped, listed in ``damaged`` and warned about.
        """
        bad = records["connection_id"] >= self._connection_limit
        if not bad.any():
            return records
        self.damaged.append(f"{kind}: {int(bad.sum())} records with impossible connection ids")
        warnings.warn(f"{self.path}: {int(bad.sum())} {kind} records have connection ids past "
                      f"{self._connection_limit} (damaged chunk?); dropped", stacklevel=3)
        return records[~bad]

    def __repr__(self) -> str:
        return f"<RunDir {self.path.name} {self.info.get('status')}>"
