"""Read a geprof run directory: ``info.json``, the hash dictionary and the raw
record chunks (``.npy``, loaded with ``allow_pickle=False``: nothing read from
disk can execute code).  A damaged chunk is skipped and listed in ``damaged``;
records whose chunk files are gone are counted in ``missing``; everything intact
still loads.

A run that was not finalised (killed, or still collecting) also has the chunks
that were growing when it stopped, ``<kind>.<seq>.tmp``: a header for no
records, then records of a fixed size, so the file's length says how many are
whole.  Those are loaded too (a torn last record is dropped) and listed in
``salvaged``.
"""

from __future__ import annotations

import bisect
import io
import os
import warnings
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ..errors import ImportFormatError, RunDirError
from ..prof import json_text, rawdata
from .files import listing, open_binary, present, read_bytes, reading, what_is_there


def is_run_dir(path: Path) -> bool:
    """Whether ``path`` is meant as a geprof run directory: something is where its info.json goes (a file,
    or whatever else :class:`RunDir` then names as the problem)."""
    info = path / rawdata.INFO_FILE
    return info.is_file() or what_is_there(info) is not None


#: A simulated cluster's root: ``rank_<r>/`` output directories (see ``geprof_nb.ge.cluster``).
CLUSTER_NAME = rawdata.CLUSTER_DIR_NAME


def newest_run(path: Path) -> Path | None:
    """The newest run directory (or simulated cluster root) directly under ``path``: the one made last.

    Ordered by the sequence number in the ``PROF_<seq>_<time>_<tag>`` (``CLUSTER_<seq>_<time>_<tag>``) name,
    which is one past the greatest of the directory when a run is made (:func:`~..prof.rawdata.creation_order`),
    not by the wall-clock stamp beside it (a clock stepped back between two runs would pick the older one)
    nor by mtime, which any later write into an old run would change.
    """
    runs = [p for p in listing(path) if p.is_dir() and (is_run_dir(p) or CLUSTER_NAME.fullmatch(p.name))
            ] if path.is_dir() else []
    if not runs:
        return None
    return max(runs, key=lambda p: rawdata.creation_order(p.name) or (-1, "", p.name))


@lru_cache(maxsize=4096)
def _header_fields(major: int, header: bytes) -> tuple[tuple[int, ...], np.dtype]:
    """(shape, dtype) of a ``.npy`` header (its length field and text, after the magic), as numpy's parser reads
    it.  Kept per header: the ranks of a cluster write chunks of the same kinds and sizes, and numpy parses
    each header by compiling it (most of what reading a small chunk costs)."""
    read_header = {1: np.lib.format.read_array_header_1_0, 2: np.lib.format.read_array_header_2_0}[major]
    shape, _, dtype = read_header(io.BytesIO(header))
    return shape, dtype


def _read_header(f: BinaryIO) -> tuple[int, np.dtype]:
    """(records, dtype) from the ``.npy`` header at the start of the open file ``f``, checked against
    the file's size; leaves ``f`` at the first record.

    A damaged header that claims billions of records must not make numpy allocate them.
    Raises ValueError for anything but a whole 1-D array.
    """
    try:
        major, _ = np.lib.format.read_magic(f)
        length = f.read({1: 2, 2: 4}[major])
        shape, dtype = _header_fields(major, length + f.read(int.from_bytes(length, "little")))
    except OSError:  # the file could not be read: its reader says so
        raise
    except Exception as exc:  # noqa: BLE001 - damaged bytes: numpy's header parser raises all sorts
        raise ValueError(f"unreadable .npy header ({type(exc).__name__}: {exc})") from None
    if len(shape) != 1:
        raise ValueError(f"records are a 1-D array, the header says shape {shape}")
    size = os.fstat(f.fileno()).st_size
    if size < f.tell() + shape[0] * dtype.itemsize:
        raise ValueError(f"the header says {shape[0]} records but the file holds "
                         f"{max(0, size - f.tell()) // max(dtype.itemsize, 1)}")
    return shape[0], dtype


@dataclass(frozen=True)
class GrowingChunk:
    """A chunk the run had not closed when it stopped (``<kind>.<seq>.tmp``): its whole records, and the bytes of
    a torn record after them (a write the end of the run cut short)."""

    path: Path
    records: int
    torn_bytes: int
    #: The file is shorter than its header (``torn_bytes`` of it): killed as it was made.
    header_cut: bool = False


def _chunk_files(directory: Path, kind: str, growing: bool) -> list[Path]:
    """The chunk files of ``kind`` in ``directory`` in their order: the closed ``.npy`` ones and, with ``growing``,
    the ``.tmp`` ones still growing (not one whose closed chunk is there too: a copy made as it was renamed)."""
    files = {p.name[:-4]: p for p in directory.glob(f"{kind}.*.tmp")} if growing else {}
    files.update((p.name[:-4], p) for p in directory.glob(f"{kind}.*.npy"))
    return [files[name] for name in sorted(files)]


def _growing_records(f: BinaryIO, path: Path, dtype: np.dtype) -> GrowingChunk:
    """What the growing chunk open as ``f`` holds: ``dtype`` records after the header for none (leaves ``f`` at
    the first one).  A header cut short holds no record; ValueError for any other header."""
    size = os.fstat(f.fileno()).st_size
    header = len(rawdata.npy_header(dtype, 0))
    if size < header:  # killed while its header was written
        return GrowingChunk(path, 0, size, header_cut=True)
    try:
        _, found = _read_header(f)
    except ValueError:
        raise ValueError(f"not a chunk of {dtype} records: its header cannot be read") from None
    if found != dtype or f.tell() != header:
        raise ValueError(f"unexpected record layout {found}")
    whole, torn = divmod(size - header, dtype.itemsize)
    return GrowingChunk(path, whole, torn)


#: What a record chunk must be.
CHUNK_FILE = "a .npy file of records (numpy's format, written by the run's writer)"


def _chunk_header(path: Path) -> tuple[int, np.dtype]:
    """(records, dtype) of a chunk from its ``.npy`` header (:func:`_read_header`)."""
    with open_binary(path, CHUNK_FILE) as f, reading(path, CHUNK_FILE):
        return _read_header(f)


def _read_chunk(path: Path) -> np.ndarray:
    """The records of a chunk, as ``np.load(path, allow_pickle=False)`` reads them, after
    :func:`_read_header` checked the header (parsed once: numpy's header parser compiles it)."""
    with open_binary(path, CHUNK_FILE) as f, reading(path, CHUNK_FILE):
        rows, dtype = _read_header(f)
        if dtype.hasobject:  # numpy's own refusal: object records would be unpickled
            raise ValueError("Object arrays cannot be loaded when allow_pickle=False")
        return np.fromfile(f, dtype=dtype, count=rows)


def _read_growing(path: Path, dtype: np.dtype) -> np.ndarray:
    """The whole records of a growing chunk (:func:`_growing_records`)."""
    with open_binary(path, CHUNK_FILE) as f, reading(path, CHUNK_FILE):
        return np.fromfile(f, dtype=dtype, count=_growing_records(f, path, dtype).records)


def _intact_rows(path: Path, dtype: np.dtype) -> int | None:
    """Records in an intact chunk of ``dtype`` from its ``.npy`` header (a growing one: its whole records);
    None if it is damaged, short, of another layout or not a file (a FIFO, a directory:
    :func:`..files.open_binary` refuses them)."""
    try:
        if path.suffix == ".tmp":
            with open_binary(path, CHUNK_FILE) as f:
                return _growing_records(f, path, dtype).records
        rows, found = _chunk_header(path)
    except (ImportFormatError, OSError, ValueError):
        return None
    return rows if found == dtype else None


def _chunk_rows(path: Path, dtype: np.dtype) -> int:
    """:func:`_intact_rows`, 0 for a chunk that is not intact."""
    return _intact_rows(path, dtype) or 0


#: Counts and ns in info.json are read into int64 arrays and C longs: past these a table would overflow.
_INT64 = 2**63
#: Process ids are C ints (``os.kill`` refuses larger ones); device ids are too.
_INT32 = 2**31


def _whole(v: object, low: int = 0, high: int = _INT64) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and low <= v < high


def _counts(v: object) -> bool:
    return isinstance(v, dict) and all(_whole(n) for n in v.values())


def _scalar(v: object) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def _device_key(k: object) -> bool:
    return isinstance(k, str) and k.isascii() and k.isdigit() and int(k) < _INT32


COUNTS = "an object of counts (whole numbers >= 0, below 2**63)"
NS = "an integer (ns) >= 0, below 2**63"
#: The fields of info.json the tables read, and their shapes: (field, check, what is accepted).
_INFO_FIELDS: tuple[tuple[str, object, str], ...] = (
    ("status", lambda v: isinstance(v, str), "a string"),
    ("options", lambda v: isinstance(v, dict) and all(_scalar(o) for o in v.values()),
     "an object of profiling option names to their values (strings, numbers)"),
    ("devices", lambda v: isinstance(v, dict) and all(_device_key(k) and isinstance(d, dict) for k, d in v.items()),
     "an object of device id -> device description (ids below 2**31)"),
    ("records", _counts, "an object of record counts (whole numbers >= 0, below 2**63)"),
    ("aged_out", lambda v: isinstance(v, dict) and _counts(v.get("records", {}))
     and all(_whole(v.get(k, 0)) for k in ("chunks", "bytes")),
     "an object with chunks, bytes, records (counts: whole numbers >= 0, below 2**63)"),
    ("dropped", _counts, COUNTS),
    ("write_failed", _counts, COUNTS),
    ("notes", lambda v: isinstance(v, list) and all(isinstance(n, str) for n in v), "a list of strings"),
    ("note", lambda v: isinstance(v, str), "a string"),
    ("models", lambda v: isinstance(v, dict) and all(
        _device_key(k) and isinstance(m, dict) and isinstance(m.get("training"), bool) for k, m in v.items()),
     "an object of model id -> {name, training}"),
    ("pmu_events", lambda v: isinstance(v, dict) and all(isinstance(e, list) and all(isinstance(n, str) for n in e)
                                                         for e in v.values()), "an object of core -> event names"),
    ("type_info", lambda v: isinstance(v, dict) and all(isinstance(t, dict) and all(_scalar(n) for n in t.values())
                                                        for t in v.values()), "an object of level -> type names"),
    ("start_ns", _whole, NS),
    ("end_ns", _whole, NS),
    ("pid", lambda v: _whole(v, 1, _INT32), "a process id (1 .. 2**31 - 1)"),
    ("hostname", lambda v: isinstance(v, str), "a host name"),
    ("chunks", lambda v: isinstance(v, dict) and all(_counts(c) for c in v.values()),
     "an object of record kind -> chunk file -> records (whole numbers >= 0, below 2**63)"),
    ("switch_history", lambda v: isinstance(v, list) and all(isinstance(w, dict) and _whole(w.get("start_ns"))
                                                             for w in v),
     "a list of collection windows, each with an integer start_ns (ns >= 0, below 2**63)"),
)


#: The fields of a device description the tables compute with (PMU columns, the advisor), when
#: present: (field, check, what is accepted).
_DEVICE_FIELDS: tuple[tuple[str, object, str], ...] = (
    ("ai_core_num", lambda v: _whole(v, 1, _INT32), "a whole number >= 1 (below 2**31)"),
    ("aiv_num", lambda v: _whole(v, 0, _INT32), "a whole number >= 0 (below 2**31)"),
    ("aic_frequency", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < 1e300,
     "a number > 0 (MHz)"),
    ("chip_family", lambda v: isinstance(v, str), "a chip family name (A2, 910A)"),
)


def _check_info(info: dict, path: Path) -> None:
    """info.json is read from disk: a field the tables read with another shape is a RunDirError
    naming it and what it should hold, not an AttributeError (or an OverflowError, past 64 bits) deep in
    a table."""
    for field, check, accepted in _INFO_FIELDS:
        value = info.get(field)
        if value is not None and not check(value):
            raise RunDirError(f"{path}: field {field!r} is {json_text.excerpt(value)}; accepted: {accepted}")
    for device, description in (info.get("devices") or {}).items():
        for field, check, accepted in _DEVICE_FIELDS:
            if field in description and not check(description[field]):
                raise RunDirError(f"{path}: device {device!r} field {field!r} is "
                                  f"{json_text.excerpt(description[field])}; accepted: {accepted}")


def _device_of(path: Path) -> int:
    """The device id of a chunk file under ``device_<id>/data`` (0 for the host's)."""
    name = path.parent.parent.name
    return int(name.split("_")[1]) if name.startswith("device_") and name.split("_")[1].isdigit() else 0


#: What the hash dictionary must be.
HASH_FILE = "the run's hash dictionary, a JSON line per name (geprof writes it)"


@lru_cache(maxsize=1 << 17)
def _hash_entry(line: str) -> tuple[int, str] | None:
    """(id, name) of one hash dictionary line, ``{"id": "<64-bit id>", "s": "<name>"}``; None if it is damaged
    (not JSON, nested past the parser's limit, an id that is no 64-bit number, a name that is no string).
    Kept per line: the ranks of a cluster hold the same lines, parsed once for all of them."""
    try:
        entry = json_text.loads(line)
    except json_text.JsonTextError:
        return None
    if not isinstance(entry, dict) or not isinstance(entry.get("s"), str):
        return None
    raw = entry.get("id")
    if isinstance(raw, str) and raw.isascii() and raw.strip().isdigit() and len(raw.strip()) <= 20:
        raw = int(raw)
    if not _whole(raw, 0, 2**64):
        return None
    return raw, entry["s"]


_BLANK = ()
#: The hash dictionaries read last, by their first bytes: each one's bytes, each line's entry with the
#: byte offset past that line, and its names once built (None before).  A cluster's ranks of one pipeline stage
#: hold the same lines but for the few naming the rank's own communicators, so a rank's file reuses the common
#: start of the last one of its stage; ranks whose files are the same bytes share one dict of names.
_LAST_HASH: dict[bytes, tuple[bytes, list, list[int], dict[int, str] | None]] = {}
_HEAD_BYTES = 4096
_LAST_HASH_KEPT = 16


def _common_lines(before: bytes, data: bytes, ends: list[int]) -> int:
    """How many of the lines ending at ``ends`` (byte offsets past each line's newline) of ``before`` ``data``
    starts with too (the first differing byte found by numpy, in C)."""
    n = min(len(before), len(data))
    differ = np.flatnonzero(np.frombuffer(before, np.uint8, n) != np.frombuffer(data, np.uint8, n))
    same_bytes = int(differ[0]) if len(differ) else n
    return bisect.bisect_right(ends, same_bytes)


def _hash_entries(data: bytes) -> list:
    """:func:`_hash_entry` of each line of the dictionary's bytes (``_BLANK`` for an empty one), the lines the
    last dictionary read with the same first bytes starts with too taken from it."""
    same, head, ends = 0, [], []
    key = data[:_HEAD_BYTES]
    if key in _LAST_HASH:
        before, parsed, before_ends, _ = _LAST_HASH.pop(key)
        same = _common_lines(before, data, before_ends)
        head, ends = parsed[:same], before_ends[:same]
    offset = ends[-1] if ends else 0
    lines = data[offset:].decode("utf-8", errors="replace").split("\n")
    entries = head + [_hash_entry(line) if line and not line.isspace() else _BLANK for line in lines]
    for line in lines[:-1]:  # a line's end: past its newline (utf-8 keeps the newline's byte where it was)
        offset = data.index(b"\n", offset) + 1
        ends.append(offset)
    _LAST_HASH[key] = (data, entries, ends, None)
    if len(_LAST_HASH) > _LAST_HASH_KEPT:
        del _LAST_HASH[next(iter(_LAST_HASH))]  # the least recently read
    return entries


def _shared_names(data: bytes) -> dict[int, str] | None:
    """The names of the last intact dictionary read with the same first bytes, if its bytes are ``data``'s (the
    ranks of a stage may share one file): one dict for all of them, which nothing changes."""
    last = _LAST_HASH.get(data[:_HEAD_BYTES])
    return last[3] if last is not None and last[3] is not None and last[0] == data else None


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
        if info is None:
            if not info_path.exists() and not info_path.is_symlink():
                raise RunDirError(f"{self.path} is not a geprof run directory: {rawdata.INFO_FILE} is missing")
            data = read_bytes(info_path, "the run's description, a JSON file (geprof writes it)")
            try:
                info = json_text.loads(data)
            except json_text.JsonTextError as exc:
                raise RunDirError(f"{info_path}: cannot be read as JSON ({exc.reason})") from None
        self.info: dict = info
        if not isinstance(self.info, dict) or "geprof_raw_version" not in self.info:
            raise RunDirError(f"{info_path}: not a geprof run description (no 'geprof_raw_version' field)")
        _check_info(self.info, info_path)
        self.damaged: list[str] = []
        #: Bytes of a hash dictionary line the run stopped in the middle of (0: none); dropped, and said.
        self.torn_hash_line = 0
        self._own: dict[tuple[str, int], list[Path]] = {}

    @property
    def complete(self) -> bool:
        return self.info.get("status") == "complete"

    def _chunks(self, kind: str, device_id: int = 0) -> list[Path]:
        """The chunk files of a kind that are this run's, in order; those still growing too, if the run was not
        finalised (:meth:`_foreign` lists the others in ``damaged``)."""
        key = (kind, device_id)
        if key not in self._own:
            spec = rawdata.RECORD_KINDS[kind]
            files = _chunk_files(self.path / spec.directory(device_id), kind, growing=not self.complete)
            foreign = self._foreign(kind, device_id, [f for f in files if f.suffix == ".npy"])
            for path, why in foreign.items():
                self.damaged.append(f"{path.relative_to(self.path)} ({why}: not loaded)")
            self._own[key] = [f for f in files if f not in foreign]
        return self._own[key]

    def _foreign(self, kind: str, device_id: int, closed: list[Path]) -> dict[Path, str]:
        """The closed chunks of a kind that the run did not write (copied from another run of the same layout),
        and why: info.json lists the records of every chunk the run closed (``chunks``), so a chunk it does
        not list, in a finalised run, or one holding another number of records is not this run's.  Of a run
        written before the list was kept, a chunk is found if it alone holds the records past info.json's count.
        """
        spec = rawdata.RECORD_KINDS[kind]
        key = kind if device_id == 0 or spec.side == "host" else f"{kind}@{device_id}"
        listed = _dict(_dict(self.info.get("chunks")).get(key))
        rows = {path: n for path in closed if (n := _intact_rows(path, spec.dtype)) is not None}  # damaged: load()
        out = {}
        if listed:
            last = max(listed)
            for path, n in rows.items():
                wrote = listed.get(path.name)
                if wrote is None and (self.complete or path.name < last):
                    out[path] = (f"not a chunk this run wrote: its info.json lists {len(listed)} {kind} chunk"
                                 f"{'s' * (len(listed) != 1)}, {', '.join(sorted(listed)[:3])}"
                                 f"{', ...' if len(listed) > 3 else ''}")
                elif wrote is not None and n != wrote:
                    out[path] = f"holds {n} records where this run wrote {wrote}: another run's chunk"
            return out
        written = _dict(self.info.get("records")).get(key)
        excess = sum(rows.values()) - written if self.complete and isinstance(written, int) else 0
        if excess > 0:
            alone = [path for path, n in rows.items() if n == excess]
            if len(alone) == 1:
                out[alone[0]] = (f"its {excess} records are those the chunks hold past the {written} info.json says "
                                 "the run wrote: another run's chunk")
        return out

    @cached_property
    def salvaged(self) -> list[GrowingChunk]:
        """The chunks the run had not closed when it stopped (it was not finalised), whose whole records load
        with the closed ones; a finalised run closed all of its chunks, and a ``.tmp`` left in it is not loaded
        but listed in ``damaged``.  Read from the files' lengths (nothing is loaded)."""
        out = []
        for path in sorted(self.path.glob("*/data/*.*.tmp")):
            kind = path.name.split(".", 1)[0]
            spec = rawdata.RECORD_KINDS.get(kind)
            if spec is None or path.parent != self.path / spec.directory(_device_of(path)):
                continue
            if self.complete:
                self.damaged.append(f"{path.relative_to(self.path)} (a chunk a finalised run never closed: not loaded)")
                continue
            if path.with_suffix(".npy").exists():
                continue
            try:
                with open_binary(path, CHUNK_FILE) as f:
                    out.append(_growing_records(f, path, spec.dtype))
            except (ImportFormatError, OSError, ValueError):
                continue  # listed in damaged when its kind is loaded
        return out

    def salvage_notes(self) -> list[str]:
        """What :attr:`salvaged` holds, in words: the records per kind, and every torn record dropped."""
        chunks = [chunk for chunk in self.salvaged if chunk.records]
        notes = []
        if chunks:
            per_kind: dict[str, int] = {}
            for chunk in chunks:
                kind = chunk.path.name.split(".", 1)[0]
                per_kind[kind] = per_kind.get(kind, 0) + chunk.records
            counts = ", ".join(f"{n} {kind}" for kind, n in per_kind.items())
            notes.append(f"salvaged {counts} records from {len(chunks)} chunk file{'s' * (len(chunks) != 1)} the run "
                         "had not closed (<kind>.<n>.tmp): the records its writer had written when it stopped")
        for chunk in self.salvaged:
            where = chunk.path.relative_to(self.path)
            dtype = rawdata.RECORD_KINDS[chunk.path.name.split(".", 1)[0]].dtype
            if chunk.header_cut:
                notes.append(f"{where}: cut short in its header ({chunk.torn_bytes} of "
                             f"{len(rawdata.npy_header(dtype, 0))} bytes), no record")
            elif chunk.torn_bytes:
                notes.append(f"{where}: a torn last record ({chunk.torn_bytes} of {dtype.itemsize} bytes) dropped")
        self.hashes  # noqa: B018 - reading the dictionary finds its torn line
        if self.torn_hash_line:
            notes.append(f"{rawdata.HASH_DICT_FILE}: a torn last line ({self.torn_hash_line} bytes: the run stopped "
                         "as it was appended; a name is written before the records that use it) dropped")
        return notes

    @property
    def options(self) -> dict:
        return self.info.get("options") or {}

    @property
    def device_ids(self) -> list[int]:
        ids = {int(k) for k in (self.info.get("devices") or {})}
        ids |= {int(p.name[7:]) for p in self.path.glob("device_*") if _device_key(p.name[7:]) and p.is_dir()}
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
            if spec is None or not (_device_key(device) or not device):
                continue
            present = sum(_chunk_rows(c, spec.dtype) for c in self._chunks(kind, int(device or 0)))
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
        """Records of a kind that names strings by hash id are on disk (a run of step traces only needs no
        hash dictionary, and writes none; a killed run may have counted records that never reached a chunk)."""
        for key in self.info.get("records") or {}:
            kind, _, device = str(key).partition("@")
            spec = rawdata.RECORD_KINDS.get(kind)
            if spec is None or not spec.hashed or not (_device_key(device) or not device):
                continue
            if any(_chunk_rows(c, spec.dtype) for c in self._chunks(kind, int(device or 0))):
                return True
        return False

    @cached_property
    def hashes(self) -> dict[int, str]:
        """Hash id -> string (``MsprofGetHashId`` dictionary): a cluster rank's shared first lines
        (``hash_dict.shared.jsonl``, where there is one), then the run's own."""
        own = self._read_hashes(self.path / rawdata.HASH_DICT_FILE)
        shared = self.path / rawdata.HASH_DICT_SHARED_FILE
        if not os.path.lexists(shared):
            return own
        return {**self._read_hashes(shared), **own}

    def _read_hashes(self, path: Path) -> dict[int, str]:
        """The names of one dictionary file (a dict ranks with the same file's bytes share: not to be changed);
        what is damaged or missing goes to ``damaged``."""
        try:
            there = present(path, HASH_FILE)
        except ImportFormatError as exc:  # the file is what it holds: the names it would have given
            self.damaged.append(f"{path.name} ({str(exc).removeprefix(f'{path}: ')}: names show as "
                                "<unknown 0x...>)")
            return {}
        if not there:
            if self._holds_hashed_records():  # they name strings by hash: without the dictionary they are unknown
                self.damaged.append(f"{path.name} (missing: names show as <unknown 0x...>)")
            return {}
        try:
            data = read_bytes(path, HASH_FILE)
        except ImportFormatError as exc:
            self.damaged.append(f"{path.name} ({str(exc).removeprefix(f'{path}: ')}: names show as "
                                "<unknown 0x...>)")
            return {}
        shared = _shared_names(data)
        if shared is not None:
            return shared
        entries = _hash_entries(data)
        if None not in entries:
            names = dict(filter(None, entries))  # without the blank lines (``_BLANK`` is falsy), in C
            key = data[:_HEAD_BYTES]
            _LAST_HASH[key] = (*_LAST_HASH[key][:3], names)
            return names
        out: dict[int, str] = {}
        lines = data.decode("utf-8", errors="replace").split("\n")
        for lineno, line in enumerate(lines, 1):
            if not line.strip():  # the writer ends a line a failed write cut off with an empty one
                continue
            entry = _hash_entry(line)
            if entry is None and lineno == len(lines) and not self.complete:
                # a run stopped while its writer appended this line: the records that use it come after it
                self.torn_hash_line = len(line.encode("utf-8", errors="replace"))
            elif entry is None:
                self.damaged.append(f"{path.name}:{lineno}")  # that line's name only
            else:
                out[entry[0]] = entry[1]
        return out

    def load(self, kind: str, device_id: int = 0) -> np.ndarray:
        """All records of one kind (chunks concatenated in order; empty if none)."""
        spec = rawdata.RECORD_KINDS[kind]
        parts = []
        for chunk in self._chunks(kind, device_id):
            try:
                arr = _read_growing(chunk, spec.dtype) if chunk.suffix == ".tmp" else _read_chunk(chunk)
            except ImportFormatError as exc:  # no file to read: said what is there
                why = str(exc).removeprefix(f"{chunk}: ").split("; accepted:")[0]
                self.damaged.append(f"{chunk.relative_to(self.path)} ({why})")
                warnings.warn(f"{exc}: skipped", stacklevel=2)
                continue
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
        tracks = sum(_chunk_rows(c, rawdata.TASK_TRACK_DTYPE) for device in self.device_ids
                     for c in self._chunks("task_track", device))
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
