"""The simulated msprof library: the one path by which profile data reaches disk.

Mirrors ``libmsprofiler``'s reporting surface (``MsprofInit``,
``MsprofFinalize``, ``MsprofSysCycleTime``, ``MsprofGetHashId``,
``MsprofReportApi``, ``MsprofReportEvent``, ``MsprofReportCompactInfo``,
``MsprofReportAdditionalInfo``, ``MsprofRegisterCallback``) plus the device
channel through which the simulated device delivers its HWTS / PMU / ts_track
logs.  Records are buffered column-wise (numpy) and flushed in chunks to a new
run directory, so a crash loses at most the unflushed tail.

Collection is switched on and off by *commands* sent to registered modules
(GE registers one), exactly as msprof drives GE through ``ProfCtrlHandle``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import random
import socket
import string
import threading
import time
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import orjson

from . import rawdata
from .clock import clock, toolkit_entry
from .writer import ChunkFile, writer

# MsprofCtrlCallback init types (msprof_callback.h).
MSPROF_CTRL_INIT_ACL_JSON = 0
MSPROF_CTRL_INIT_ACL_ENV = 1
MSPROF_CTRL_INIT_GE_OPTIONS = 2
MSPROF_CTRL_FINALIZE = 3
MSPROF_CTRL_INIT_DYNA = 0xFF

# Return codes.
MSPROF_ERROR_NONE = 0
MSPROF_ERROR = -1
ACL_ERROR_PROF_ALREADY_RUN = 100042
ACL_ERROR_PROF_NOT_RUN = 100043

#: Module ids for ``MsprofRegisterCallback`` (MsprofReporterModuleId).
MSPROF_MODULE_DATA_PREPROCESS = 0
MSPROF_MODULE_HCCL = 1
MSPROF_MODULE_ACL = 2
MSPROF_MODULE_FRAMEWORK = 3  # GE
MSPROF_MODULE_RUNTIME = 4

DEFAULT_CHUNK_RECORDS = 1 << 18
#: info.json is indented for people reading it; keys that are not strings are written as strings.
_INFO_JSON_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS


class CommandType(IntEnum):
    """``PROF_COMMANDHANDLE_TYPE_*``."""

    INIT = 0
    START = 1
    STOP = 2
    FINALIZE = 3
    MODEL_SUBSCRIBE = 4
    MODEL_UNSUBSCRIBE = 5


@dataclass(frozen=True)
class CommandHandle:
    """``MsprofCommandHandle``: what a module is told to start or stop."""

    type: CommandType
    prof_switch: int = 0
    dev_ids: tuple[int, ...] = (0,)
    options: dict = field(default_factory=dict)


ControlCallback = Callable[[CommandHandle], int]


class _Buffer:
    """Records of one kind reported since its last chunk was closed.

    Blocks go to the writer thread as they are reported, into the current chunk's file;
    single rows are gathered and written as one block at the end of the chunk.  A chunk that
    fills while a batch of steps is open is *sealed*: it takes no more records, and is closed
    (renamed into place) at the next checkpoint, with every other kind's.
    """

    __slots__ = ("kind", "device_id", "rows", "chunk", "pending", "sealed", "seq", "kept", "written", "lost", "lock")

    def __init__(self, kind: rawdata.RecordKind, device_id: int) -> None:
        self.kind = kind
        self.device_id = device_id
        self.rows: list[tuple] = []
        self.chunk: ChunkFile | None = None  # the chunk records go to now
        self.pending = 0  # records of ``chunk``, rows included
        self.sealed: list[tuple[ChunkFile, int]] = []  # full chunks waiting for the checkpoint, oldest first
        self.seq = 0
        self.kept = 0  # records reported and kept (not discarded)
        self.written = 0  # records in chunks renamed into place (by the writer thread)
        self.lost = 0  # records in chunks that could not be written (by the writer thread)
        self.lock = threading.Lock()


def _remove(path: str | os.PathLike) -> None:
    with contextlib.suppress(OSError):  # a file already gone included
        os.unlink(path)


def _run_dir_name(seq: int) -> str:
    now = time.time()  # one reading: seconds and milliseconds read apart could name a run ~1 s early
    stamp = time.strftime("%Y%m%d%H%M%S", time.localtime(now)) + f"{int(now * 1000) % 1000:03d}"
    tag = "".join(random.choices(string.ascii_uppercase, k=16))
    return f"PROF_{seq:06d}_{stamp}_{tag}"


def hash_id(text: str) -> int:
    """The stable 64-bit id of a string (what ``MsprofGetHashId`` returns)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


_cached_hash_id = functools.lru_cache(maxsize=1 << 16)(hash_id)


@functools.lru_cache(maxsize=1 << 16)
def _hash_line(text: str) -> bytes:
    """The hash dictionary's line of a string; the ranks of a simulated cluster write the same ones."""
    return (json.dumps({"id": str(hash_id(text)), "s": text}) + "\n").encode("utf-8")


class Msprof:
    """One msprof instance per process: run directory, buffers, hash dictionary, control."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._callbacks: dict[int, ControlCallback] = {}
        self._hashes: dict[str, int] = {}
        #: The dictionary line of every string in ``_hashes``, in the order they were learned: each
        #: run's hash_dict.jsonl holds them all, the first ``_hash_lines_saved`` already written.
        self._hash_lines: list[bytes] = []
        self._hash_lines_saved = 0  # by the writer thread
        self._hash_lines_submitted = 0  # lines the writer was asked to write
        self._buffers: dict[tuple[str, int], _Buffer] = {}
        self.run_dir: Path | None = None
        self.last_run_dir: Path | None = None
        self.switch = 0
        self.options: dict = {}
        self.started = False
        self.chunk_records = DEFAULT_CHUNK_RECORDS
        self.run_serial = 0  # increments with every run directory opened
        self.storage_limit_bytes: int | None = None
        self._chunks: list[tuple[str, int, str, int]] = []  # (path, bytes, kind, records), oldest first
        self._stored_bytes = 0
        self._info: dict = {}
        #: While True, reported records are counted and dropped (a step schedule's warmup window).
        self.discarding = False
        self._discarded = 0
        self._hash_line_open = False  # a failed hash-dictionary write left a partial line
        self._made_dirs: set[str] = set()  # chunk directories of this run made (or being made)
        self._writer = writer()
        self._finalize_hooks: list[Callable[[Path, str, str], Path | None]] = []
        #: Metadata set since info.json was last written: written before the next chunk and at finalize
        #: (a step's metadata arrives in a dozen calls; each write is an open, a dump and a rename).
        self._info_dirty = False
        #: False once a write of info.json failed, until one succeeds: the file is older than ``_info``.
        self._info_on_disk = True
        #: Batches of steps being reported now, in any thread (:meth:`reporting_batch`), and whether a
        #: buffer filled meanwhile: its checkpoint waits until no batch is open.
        self._open_batches = 0
        self._checkpoint_due = False
        #: The writer's :meth:`~.writer.Writer.mark` after the last checkpoint was handed over.
        self._checkpoint_mark = 0

    # ------------------------------------------------------------------ state
    @property
    def running(self) -> bool:
        """A run directory is open (between init and finalize)."""
        return self.run_dir is not None

    @property
    def mode(self) -> str | None:
        """What opened the current run (``init``'s ``mode``: "ge_options", "api", "magic", ...); ``None``
        when no run is open."""
        with self._lock:
            return self._info.get("mode") if self.running else None

    def init(self, output: str | os.PathLike, options: dict | None = None, mode: str = "ge_options",
             restart_clock: bool = True) -> Path:
        """Open a new run directory under ``output``; collection starts with :meth:`start`.

        ``restart_clock=False`` keeps the process clock running: the other ranks of a
        simulated cluster open their runs mid-way and share rank 0's clock.
        """
        self._writer.wait()  # what an earlier run handed the writer belongs to that run
        with self._lock:
            if self.running:
                raise RuntimeError(f"msprof is already collecting into {self.run_dir}")
            out = Path(output).expanduser()
            out.mkdir(parents=True, exist_ok=True)
            if not os.access(out, os.W_OK):
                raise PermissionError(f"profiling output directory {out} is not writable")
            seq = 1 + sum(1 for p in out.glob("PROF_*") if p.is_dir())
            while True:
                run_dir = out / _run_dir_name(seq)
                try:
                    run_dir.mkdir()
                    break
                except FileExistsError:
                    seq += 1
            if restart_clock:
                clock.restart()
            self.run_serial += 1
            self.run_dir = run_dir.resolve()
            self.options = dict(options or {})
            limit = str(self.options.get("storage_limit", ""))
            self.storage_limit_bytes = int(limit[:-2]) * 1024 * 1024 if limit.endswith("MB") else None
            self._chunks = []
            self._stored_bytes = 0
            self._buffers.clear()
            self.discarding = False
            self._discarded = 0
            self._checkpoint_due = False
            self._checkpoint_mark = 0  # (the writer ran every job before: init waited)
            self._hash_lines_saved = self._hash_lines_submitted = 0
            self._made_dirs = set()
            self._info = {
                "geprof_raw_version": rawdata.RAW_FORMAT_VERSION,
                "run": run_dir.name,
                "status": "running",
                "mode": mode,
                "clock": clock.mode,
                "hostname": socket.gethostname(),
                "pid": os.getpid(),
                "start_ns": clock.now_ns(),
                "end_ns": None,
                "options": self.options,
                "devices": {},
                "pmu_events": {},
                "switch_history": [],
                "records": {},
                "type_info": {},
                "aged_out": {"chunks": 0, "bytes": 0, "records": {}},
            }
            self._hash_line_open = False
            try:
                self._write_info(strict=True)
            except OSError:  # the directory cannot take even info.json: no run is open
                self.run_dir = None
                _remove(run_dir / (rawdata.INFO_FILE + ".tmp"))
                with contextlib.suppress(OSError):
                    run_dir.rmdir()
                raise
            return self.run_dir

    def start(self, switch: int, dev_ids: tuple[int, ...] = (0,), options: dict | None = None) -> int:
        """Tell every registered module to start collecting the data types in ``switch``.

        ``options`` (profilingOptions fields) replace the run's options from now
        on; the API mode passes the equivalent of its config here.
        """
        with self._lock:
            if not self.running:
                return ACL_ERROR_PROF_NOT_RUN
            if options is not None:
                self.options = dict(options)
                self._info.setdefault("options_history", []).append(self.options)
                self._info["options"] = self.options
            self.switch = int(switch)
            self.started = True
            window = {"start_ns": clock.now_ns(), "switch": self.switch}
            if self.discarding:
                window["discarded"] = True
            self._info["switch_history"].append(window)
            self._info_dirty = True
            handle = CommandHandle(CommandType.START, self.switch, tuple(dev_ids), self.options)
            callbacks = list(self._callbacks.values())
        for cb in callbacks:
            cb(handle)
        with self._lock:  # what the modules described when they started (devices, PMU events), in one write
            if self._info_dirty and self.running:
                self._write_info()
        return MSPROF_ERROR_NONE

    def stop(self) -> int:
        """Tell every registered module to stop collecting."""
        with self._lock:
            if not self.started:
                return ACL_ERROR_PROF_NOT_RUN
            handle = CommandHandle(CommandType.STOP, self.switch, options=self.options)
            self.started = False
            if self._info["switch_history"]:
                self._info["switch_history"][-1]["stop_ns"] = clock.now_ns()
            callbacks = list(self._callbacks.values())
        for cb in callbacks:
            cb(handle)
        return MSPROF_ERROR_NONE

    def finalize(self, status: str = "complete", note: str = "") -> Path | None:
        """Stop if needed, flush everything and close the run directory.

        ``status`` is "complete" for a finalised run; ``note`` says anything
        the reader should know (e.g. that the profiled code raised).
        """
        if self.started:
            self.stop()
        with self._lock:
            if not self.running:
                return None
            self._submit_flush()
        self._writer.wait()  # outside the lock, which the writer takes to note what it could not write
        with self._lock:
            if not self.running:  # another thread finalised it meanwhile
                return None
            self.discarding = False
            self._info["status"] = status
            if note:
                self._info["note"] = note
            self._info["end_ns"] = clock.now_ns()
            self._write_info()
            run_dir, self.run_dir = self.run_dir, None
            hooks, self._finalize_hooks = self._finalize_hooks, []
        for hook in hooks:  # e.g. a simulated cluster closes its other ranks and files this one under rank_0/
            run_dir = hook(run_dir, status, note) or run_dir
        with self._lock:
            self.last_run_dir = run_dir
            self.switch = 0
            return run_dir

    def on_finalize(self, hook: Callable[[Path, str, str], Path | None]) -> None:
        """Call ``hook(run_dir, status, note)`` once this run is finalised; it may move the run
        directory and return where it now is (what :meth:`finalize` then returns)."""
        with self._lock:
            self._finalize_hooks.append(hook)

    # --------------------------------------------------------------- discarding
    def begin_discard(self) -> None:
        """From now on, count reported records and drop them (a step schedule's warmup window).

        Everything a module reports until :meth:`end_discard` never reaches the
        run directory: the collection runs (its start-up costs are paid) but its
        data is thrown away.  Hash strings, notes and run metadata are kept.
        """
        with self._lock:
            if self.running:
                self.discarding = True

    def end_discard(self) -> int:
        """Stop discarding; returns how many records the window dropped (also counted in info.json)."""
        with self._lock:
            n, self._discarded = self._discarded, 0
            self.discarding = False
            if self.running and n:
                self._info["discarded"] = self._info.get("discarded", 0) + n
            return n

    def _discard(self, n: int) -> None:
        with self._lock:
            self._discarded += n

    @property
    def records_reported(self) -> int:
        """Records reported to the current (or last) run and kept, written or pending; cheap to read."""
        return sum(b.kept - b.lost for b in list(self._buffers.values()))

    @property
    def notes(self) -> list[str]:
        """The notes of the current (or last) run as held in memory: they reach info.json only if it
        can be written, so the caller of a run can still say them (e.g. why writes failed)."""
        with self._lock:
            return list(self._info.get("notes", []))

    def info_not_written(self) -> dict | None:
        """The current (or last) run's info.json as the library holds it, if the file in the run
        directory is an older one (its last write failed: a full disk, a directory made read-only),
        so the caller can still hand on its status, notes and ``write_failed`` counts; else None."""
        with self._lock:
            if self._info_on_disk:
                return None
            return orjson.loads(orjson.dumps(self._info, default=str, option=orjson.OPT_NON_STR_KEYS))

    # ---------------------------------------------------------------- metadata
    def set_run_info(self, key: str, value) -> None:
        """Record ``info.json[key] = value`` for this run (the notebook records its settings here)."""
        with self._lock:
            if self.running:
                if key in ("status", "run", "options", "records", "switch_history", "geprof_raw_version"):
                    raise ValueError(f"info.json key {key!r} is the library's own")
                self._info[key] = value
                self._info_dirty = True

    def set_device_info(self, device_id: int, info: dict) -> None:
        """The runtime describes its device (msprof reads this from the driver)."""
        with self._lock:
            if self.running:
                self._info["devices"][str(device_id)] = info
                self._info_dirty = True

    def set_pmu_events(self, core: str, events: list[str]) -> None:
        """Record which 8 PMU events the AI Core counters were programmed with."""
        with self._lock:
            if self.running:
                self._info["pmu_events"][core] = list(events)
                self._info_dirty = True

    def add_note(self, text: str) -> None:
        """Something a reader of this run should know (kept once, in order)."""
        with self._lock:
            if self.running and text not in self._info.setdefault("notes", []):
                self._info["notes"].append(text)

    def note_dropped(self, kind: str, count: int) -> None:
        """Records a producer could not keep (a full ring buffer): counted in info.json, never silent."""
        with self._lock:
            dropped = self._info.setdefault("dropped", {})
            dropped[kind] = dropped.get(kind, 0) + int(count)

    def register_type_info(self, level: int, type_id: int, name: str) -> None:
        """``MsprofRegTypeInfo``: the name msprof shows for a (level, type) of api/event records."""
        with self._lock:
            self._info.setdefault("type_info", {}).setdefault(str(int(level)), {})[str(int(type_id))] = name
            self._info_dirty = True

    def _write_info(self, strict: bool = False) -> None:
        """Replace info.json atomically, now, in this thread (caller holds the lock).

        A failed write (a full disk) keeps the last complete info.json and is
        noted; only ``init`` (``strict``) raises: profiling must never stop the
        job it profiles because its own files cannot be written.
        """
        assert self.run_dir is not None
        self._info_dirty = False
        self._replace_info(self.run_dir, self._info, orjson.dumps(self._info, default=str, option=_INFO_JSON_OPTIONS),
                           strict)

    def _replace_info(self, run_dir: Path, info: dict, data: bytes, strict: bool = False) -> None:
        """Write ``data`` (``info`` dumped) as ``run_dir``'s info.json, through a temporary file."""
        tmp = run_dir / (rawdata.INFO_FILE + ".tmp")
        try:
            tmp.write_bytes(data)
            os.replace(tmp, run_dir / rawdata.INFO_FILE)
            self._info_on_disk = True
        except OSError as exc:
            if strict:
                raise
            _remove(tmp)
            with self._lock:
                self._info_dirty = True  # tried again with the next chunk
                self._info_on_disk = False
            self._write_failed(rawdata.INFO_FILE, exc, info=info)

    def _write_failed(self, what: str, exc: OSError, kind: str | None = None, records: int = 0,
                      info: dict | None = None) -> None:
        """A write into the run directory failed: count the records it held in info.json
        ``write_failed`` (never silent) and note why; collection goes on (``info``: the run's
        metadata, by default the current run's)."""
        with self._lock:
            info = self._info if info is None else info
            if kind is not None:
                failed = info.setdefault("write_failed", {})
                failed[kind] = failed.get(kind, 0) + int(records)
            reason = exc.strerror or str(exc)
            said = f"writing into the run directory failed ({reason}, first at "
            notes = info.setdefault("notes", [])
            if not any(n.startswith(said) for n in notes):  # once per reason
                notes.append(f"{said}{what}); collection went on")

    # ------------------------------------------------------------------ hashes
    def get_hash_id(self, text: str) -> int:
        h = self._hashes.get(text)
        if h is None:
            h = _cached_hash_id(text)
            with self._lock:
                if text not in self._hashes:
                    self._hashes[text] = h
                    self._hash_lines.append(_hash_line(text))
        return h

    def get_hash_ids(self, texts: list[str]) -> list[int]:
        """The ids of many strings at once, 0 for an empty string (the name of a task of no op).

        Strings new to the process are learned in the order given; the known ones
        (every name of a graph profiled before) cost one dictionary lookup each.
        """
        ids = list(map(self._hashes.get, texts))
        if None in ids:
            ids = [(self.get_hash_id(text) if text else 0) if h is None else h for text, h in zip(texts, ids)]
        return ids

    # --------------------------------------------------------------- reporting
    def _buffer(self, kind: str, device_id: int = 0) -> _Buffer:
        key = (kind, device_id)
        buf = self._buffers.get(key)
        if buf is None:
            with self._lock:
                buf = self._buffers.setdefault(key, _Buffer(rawdata.RECORD_KINDS[kind], device_id))
        return buf

    def report_row(self, kind: str, row: tuple, device_id: int = 0) -> None:
        """Append one record (a tuple in the kind's field order)."""
        run_dir = self.run_dir
        if run_dir is None or self.discarding:
            if self.discarding:
                self._discard(1)
            return
        buf = self._buffer(kind, device_id)
        with buf.lock:
            if buf.chunk is None:  # its file is made now, in the background, not when the chunk is closed
                self._new_chunk(buf, run_dir)
            buf.rows.append(row)
            buf.pending += 1
            buf.kept += 1
            full = buf.pending >= self.chunk_records
        if full:
            self._buffer_filled(buf)

    def report_block(self, kind: str, records: np.ndarray, device_id: int = 0) -> None:
        """Append many records at once (a structured array of the kind's dtype); the writer thread
        writes them into the kind's current chunk file meanwhile."""
        run_dir = self.run_dir
        if run_dir is None or len(records) == 0:
            return
        if self.discarding:
            if records.dtype != rawdata.RECORD_KINDS[kind].dtype:
                raise TypeError(f"{kind} records must have dtype {rawdata.RECORD_KINDS[kind].dtype}, "
                                f"got {records.dtype}")
            self._discard(len(records))
            return
        buf = self._buffer(kind, device_id)
        if records.dtype != buf.kind.dtype:
            raise TypeError(f"{kind} records must have dtype {buf.kind.dtype}, got {records.dtype}")
        with buf.lock:
            chunk = buf.chunk or self._new_chunk(buf, run_dir)
            self._writer.submit(functools.partial(chunk.append, records))
            buf.pending += len(records)
            buf.kept += len(records)
            full = buf.pending >= self.chunk_records
        if full:
            self._buffer_filled(buf)

    def _new_chunk(self, buf: _Buffer, run_dir: Path) -> ChunkFile:
        """The next chunk file of ``buf``, which the writer creates at once (caller holds its lock); its
        directory is made with the first."""
        # plain strings: a chunk's paths cost tens of microseconds as Path objects
        directory = os.path.join(run_dir, buf.kind.directory(buf.device_id))
        first_in_directory = directory not in self._made_dirs
        self._made_dirs.add(directory)
        buf.chunk = ChunkFile(os.path.join(directory, rawdata.chunk_name(buf.kind.name, buf.seq)), buf.kind.dtype,
                              make_dir=first_in_directory)
        buf.seq += 1
        self._writer.submit(buf.chunk.open)
        return buf.chunk

    def _seal(self, buf: _Buffer) -> None:
        """End ``buf``'s current chunk: its rows go last, and it waits to be closed (caller holds its lock)."""
        if not buf.pending:
            return
        if buf.rows:
            run_dir = self.run_dir
            if run_dir is None:  # finalised meanwhile: nothing is written any more
                return
            chunk = buf.chunk or self._new_chunk(buf, run_dir)
            self._writer.submit(functools.partial(chunk.append, np.array(buf.rows, dtype=buf.kind.dtype)))
            buf.rows = []
        buf.sealed.append((buf.chunk, buf.pending))
        buf.chunk, buf.pending = None, 0

    def flush(self) -> None:
        """Write every pending record to disk as new chunks (returns once they are there)."""
        with self._lock:
            self._submit_flush()
        self._writer.wait()

    def _submit_flush(self) -> None:
        """Hand the writer everything reported so far: every buffer's chunks are closed, the
        sealed ones first, as if each had been written when it filled (storage aging deletes
        the oldest chunks, so a step's task records age out before its calls and trace), then
        info.json if the metadata changed (caller holds the lock; :meth:`Writer.wait` then
        returns once it is on disk)."""
        if self.run_dir is None:
            return
        buffers = list(self._buffers.values())
        for buf in buffers:
            with buf.lock:
                sealed, buf.sealed = buf.sealed, []
            for chunk, n in sealed:
                self._submit_close(buf, chunk, n)
        for buf in buffers:
            with buf.lock:
                self._seal(buf)
                sealed, buf.sealed = buf.sealed, []
            for chunk, n in sealed:
                self._submit_close(buf, chunk, n)
        if self._info_dirty:
            self._submit_info()

    def _submit_close(self, buf: _Buffer, chunk: ChunkFile, records: int) -> None:
        """Close ``chunk`` (``records`` of ``buf``) into place once the strings its records name and
        the metadata that reads them are on disk (caller holds the lock)."""
        if self._hash_lines_saved != len(self._hash_lines):  # (one a failed write left behind, too)
            self._submit_hashes()
        if self._info_dirty:
            self._submit_info()
        device_id = buf.device_id
        key = buf.kind.name if device_id == 0 or buf.kind.side == "host" else f"{buf.kind.name}@{device_id}"
        info = self._info
        what = f"{buf.kind.directory(device_id)}/{os.path.basename(chunk.path)}"

        def close() -> None:
            try:
                size = chunk.close()
            except OSError as exc:  # a full disk must not stop the profiled job: count what was lost
                with buf.lock:
                    buf.lost += records
                self._write_failed(what, exc, buf.kind.name, records, info)
                return
            with buf.lock:
                buf.written += records
                written = buf.written
            with self._lock:  # info.json is dumped under this lock
                info["records"][key] = max(info["records"].get(key, 0), written)
                self._account(chunk.path, size, buf.kind, records)

        self._writer.submit(close)

    @contextlib.contextmanager
    def reporting_batch(self) -> Iterator[None]:
        """Report one batch of steps as a unit, so that a step's task records never reach disk without
        its step trace, HCCL tasks or API calls.

        While any batch is open, in any thread, a buffer that fills is sealed as a full chunk but not
        closed, and the checkpoint it calls for waits until the last open batch is over, with every
        kind of its records reported.  (The runtime's batches hold about a chunk at most: a few sealed
        chunks are held meanwhile.)
        """
        with self._lock:
            self._open_batches += 1
        try:
            yield
        finally:
            with self._lock:  # checkpointing under the lock: no batch opens while it is handed over
                self._open_batches -= 1
                due = self._checkpoint_due and not self._open_batches
                if due:
                    self._checkpoint_due = False
                    previous = self._submit_checkpoint()
                elif self._hash_lines_submitted != len(self._hash_lines) and self.run_dir is not None:
                    self._submit_hashes()  # the names the batch brought, in the background
            if due:
                self._writer.wait(previous)

    def _buffer_filled(self, buf: _Buffer) -> None:
        """``buf`` reached ``chunk_records``: checkpoint now, or seal it and checkpoint once no batch
        of steps is open (:meth:`reporting_batch`)."""
        with self._lock:
            if self._open_batches:
                with buf.lock:
                    self._seal(buf)
                self._checkpoint_due = True
                return
            previous = self._submit_checkpoint()
        self._writer.wait(previous)

    def _submit_checkpoint(self) -> int:
        """A buffer reached ``chunk_records``: every buffer's chunks, the hash dictionary and info.json
        (record counts, notes) go to disk, so that the run directory holds everything reported so far
        and loads on its own (step trace, static description and names with the task records).

        The job goes on meanwhile: the caller waits only until the checkpoint before this one is on
        disk (returned: a :meth:`Writer.mark`), so a crash loses what was reported after that one, at
        most two chunks of each kind, and no more than that waits in memory.  (Waiting for this one
        held the job up for the writes it had handed over during the last chunk, which the GIL had
        kept the writer from doing: ~50 ms in a 2000-step ResNet-50 run.)  Caller holds the lock.

        Once per ``chunk_records`` records of one kind, never per step: a run that never fills a
        buffer closes its chunks at finalize only.
        """
        self._submit_flush()
        if self.run_dir is not None:
            self._submit_info()
        previous, self._checkpoint_mark = self._checkpoint_mark, self._writer.mark()
        return previous

    def _submit_info(self) -> None:
        """Have the writer replace info.json with the metadata as it is when it gets there (caller holds the lock)."""
        self._info_dirty = False
        run_dir, info = self.run_dir, self._info

        def write() -> None:
            with self._lock:
                data = orjson.dumps(info, default=str, option=_INFO_JSON_OPTIONS)
            self._replace_info(run_dir, info, data)

        self._writer.submit(write)

    def _submit_hashes(self) -> None:
        """Have the writer append the hash dictionary lines it has not written (caller holds the lock)."""
        self._hash_lines_submitted = len(self._hash_lines)
        self._writer.submit(functools.partial(self._write_hashes, self.run_dir))

    def _write_hashes(self, run_dir: Path) -> None:
        """Append the hash dictionary lines not yet in ``run_dir`` (writer thread)."""
        with self._lock:
            known = len(self._hash_lines)
            if self._hash_lines_saved == known or self.run_dir != run_dir:
                return
            lines = b"".join(self._hash_lines[self._hash_lines_saved:known])
            if self._hash_line_open:  # end the line a failed write cut off, so only that line is damaged
                lines = b"\n" + lines
        try:
            with open(run_dir / rawdata.HASH_DICT_FILE, "ab") as f:
                f.write(lines)
        except OSError as exc:  # written again before the next chunk
            with self._lock:
                self._hash_line_open = True
            self._write_failed(rawdata.HASH_DICT_FILE, exc)
            return
        with self._lock:
            self._hash_lines_saved = known
            self._hash_line_open = False

    def _account(self, path: str, size: int, kind: rawdata.RecordKind, records: int) -> None:
        """Track stored bytes (``size``: the chunk's); past ``storage_limit``, delete the oldest aging
        chunks (msprof's aging)."""
        with self._lock:
            self._stored_bytes += size
            if kind.aging:
                self._chunks.append((path, size, kind.name, records))
            limit = self.storage_limit_bytes
            while limit is not None and self._stored_bytes > limit and self._chunks:
                old, old_size, old_kind, old_records = self._chunks.pop(0)
                _remove(old)
                self._stored_bytes -= old_size
                aged = self._info["aged_out"]
                aged["chunks"] += 1
                aged["bytes"] += old_size
                aged["records"][old_kind] = aged["records"].get(old_kind, 0) + old_records

    # ----------------------------------------------------------------- control
    def register_callback(self, module_id: int, callback: ControlCallback) -> int:
        """Register a module's control handler; a running collection starts it at once."""
        with self._lock:
            self._callbacks[module_id] = callback
            started = self.started
            handle = CommandHandle(CommandType.START, self.switch, options=self.options)
        if started:
            callback(handle)
        return MSPROF_ERROR_NONE

    def unregister_callback(self, module_id: int) -> None:
        with self._lock:
            self._callbacks.pop(module_id, None)


#: The process-wide msprof library.
lib = Msprof()


@contextlib.contextmanager
def reporting_to(instance: Msprof) -> Iterator[Msprof]:
    """Make ``instance`` the process's msprof library (``msprof.lib``) for a block.

    The collectors report through ``msprof.lib``; a simulated cluster points it
    at one rank's library while that rank's device records are reported.  The
    main thread only: other threads reporting meanwhile would land in that rank.
    """
    global lib
    saved, lib = lib, instance
    try:
        yield instance
    finally:
        lib = saved


# ------------------------------------------------------- C-named entry points
@toolkit_entry
def MsprofInit(data_type: int, data: str | dict, length: int | None = None) -> int:  # noqa: N802
    """Initialise collection from GE options (a profilingOptions JSON) and start it."""
    from .options import ProfilingOptions, ProfilingOptionsError

    if data_type == MSPROF_CTRL_FINALIZE:
        return MsprofFinalize()
    if lib.running:
        return ACL_ERROR_PROF_ALREADY_RUN
    try:
        opts = data if isinstance(data, ProfilingOptions) else ProfilingOptions.parse(data)
    except ProfilingOptionsError:
        return MSPROF_ERROR
    lib.init(opts.output, opts.to_dict())
    return lib.start(opts.data_type_config())


@toolkit_entry
def MsprofFinalize() -> int:  # noqa: N802
    lib.finalize()
    return MSPROF_ERROR_NONE


def MsprofSysCycleTime() -> int:  # noqa: N802
    return clock.now_ns()


@toolkit_entry
def MsprofGetHashId(text: str, length: int | None = None) -> int:  # noqa: N802
    return lib.get_hash_id(text)


@toolkit_entry
def MsprofReportApi(aging_flag: bool, level: int, type: int, thread_id: int, begin: int, end: int,  # noqa: N802,A002
                    item_id: int = 0) -> int:
    lib.report_row("api", (level, type, thread_id, begin, end, item_id))
    return MSPROF_ERROR_NONE


@toolkit_entry
def MsprofReportEvent(aging_flag: bool, level: int, type: int, thread_id: int, request_id: int,  # noqa: N802,A002
                      timestamp: int, item_id: int = 0) -> int:
    lib.report_row("event", (level, type, thread_id, request_id, timestamp, item_id))
    return MSPROF_ERROR_NONE


@toolkit_entry
def MsprofReportCompactInfo(aging_flag: bool, records: np.ndarray) -> int:  # noqa: N802
    """Node basic info (``NODE_BASIC_INFO_DTYPE`` records)."""
    lib.report_block("node_basic_info", records)
    return MSPROF_ERROR_NONE


@toolkit_entry
def MsprofReportAdditionalInfo(aging_flag: bool, kind: str, records: np.ndarray) -> int:  # noqa: N802
    """Tensor info or model info records."""
    if kind not in ("tensor_info", "model_info"):
        raise ValueError(f"additional info kind must be 'tensor_info' or 'model_info', got {kind!r}")
    lib.report_block(kind, records)
    return MSPROF_ERROR_NONE


@toolkit_entry
def MsprofRegisterCallback(module_id: int, callback: ControlCallback) -> int:  # noqa: N802
    return lib.register_callback(module_id, callback)


@toolkit_entry
def MsprofRegTypeInfo(level: int, type_id: int, type_name: str) -> int:  # noqa: N802
    lib.register_type_info(level, type_id, type_name)
    return MSPROF_ERROR_NONE
