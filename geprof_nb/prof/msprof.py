"""The simulated msprof library: the one path by which profile data reaches disk.

Mirrors ``libmsprofiler``'s reporting surface (``MsprofInit``,
``MsprofFinalize``, ``MsprofSysCycleTime``, ``MsprofGetHashId``,
``MsprofReportApi``, ``MsprofReportEvent``, ``MsprofReportCompactInfo``,
``MsprofReportAdditionalInfo``, ``MsprofRegisterCallback``) plus the device
channel through which the simulated device delivers its HWTS / PMU / ts_track
logs.  Records are buffered column-wise (numpy) and written in chunks to a new
run directory as they come, so a kill loses only what the writer thread had not
written yet; a write that fails (a full disk) is counted per record kind, noted in
the run and said on stderr when the run is finalised (:meth:`Msprof.write_problem`).

Collection is switched on and off by *commands* sent to registered modules
(GE registers one), exactly as msprof drives GE through ``ProfCtrlHandle``.

:class:`Msprof` is the run's lifecycle and control; what a run writes lives in
modules of their own: its ``info.json`` (:mod:`.run_info`), the hash dictionary
(:mod:`.hash_dict`), the columnar buffers (:mod:`.buffers`) and what is handed
to the writer thread when (:mod:`.handoff`).  Everything that starts over with a
new run is one :class:`Run`, made fresh by :meth:`Msprof.init`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import socket
import string
import sys
import threading
import time
import weakref
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Callable, Iterator, Protocol, Sequence

import numpy as np

from . import rawdata
from .buffers import RecordBuffer, RunBuffers
from .clock import clock, toolkit_entry
from .handoff import RunHandoff, StorageAging
from .hash_dict import HashDictionary, HashFile, hash_id  # noqa: F401 - hash_id: msprof's too
from .run_info import RunInfo, remove
from .writer import RunLocation, Writer, writer

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
#: Seconds between a run's timed checkpoints (profilingOptions ``checkpoint_interval``, a geprof extension).
DEFAULT_CHECKPOINT_INTERVAL_S = 1.0


class RunAlreadyOpen(RuntimeError):
    """:meth:`Msprof.init` while a run is open (one run at a time): ``run_dir`` is where it collects, ``mode``
    what opened it (:mod:`.run_opener` says both in words)."""

    def __init__(self, run_dir: Path, mode: str | None) -> None:
        self.run_dir = run_dir
        self.mode = mode
        super().__init__(f"msprof is already collecting into {run_dir}")


class OutputIsARun(OSError):
    """The ``output`` directory given is itself a run directory or a simulated cluster's root: a new run is
    not made inside it (where loading it would still open the old run); it goes where runs go, beside it."""


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


def _run_dir_name(seq: int) -> str:
    now = time.time()  # one reading: seconds and milliseconds read apart could name a run ~1 s early
    stamp = time.strftime("%Y%m%d%H%M%S", time.localtime(now)) + f"{int(now * 1000) % 1000:03d}"
    tag = "".join(random.choices(string.ascii_uppercase, k=16))
    return f"PROF_{seq:06d}_{stamp}_{tag}"


def _refuse_run_as_output(out: Path) -> None:
    """:class:`OutputIsARun` if ``out`` is a run directory or a cluster root."""
    if (out / rawdata.INFO_FILE).is_file():
        what = f"a run directory ({rawdata.INFO_FILE} is there)"
    elif rawdata.CLUSTER_DIR_NAME.fullmatch(out.name) and out.is_dir():
        what = "a simulated cluster's root"
    else:
        return
    raise OutputIsARun(f"{out} is {what}, not an output directory: a new run is not made inside it; give the "
                       f"output directory it is in ({out.parent}), where the new run goes beside it, or another one")


def _make_run_dir(out: Path) -> Path:
    """A new run directory in ``out``, numbered one past the greatest run there (deleted runs' numbers are not
    given again).  Two processes that took the same number at once (each made its directory) see each other:
    a run that finds another of its number gives the number up and takes the next, so no two runs of an
    output directory share one (a run that saw none when it looked keeps its number)."""
    while True:
        seq = 1 + max((order[0] for order in map(rawdata.creation_order, os.listdir(out)) if order), default=0)
        run_dir = out / _run_dir_name(seq)
        try:
            run_dir.mkdir()
        except FileExistsError:  # the same name (a process with the same clock and tag): the next number
            continue
        if not any(name != run_dir.name and (rawdata.creation_order(name) or (0,))[0] == seq
                   for name in os.listdir(out)):
            return run_dir
        run_dir.rmdir()
        time.sleep(random.uniform(0, 0.002))  # two that gave the number up at once do not meet again


def _checkpoint_interval(options: dict) -> float:
    """The ``checkpoint_interval`` option (seconds), or the default."""
    value = options.get("checkpoint_interval")
    return float(value) if value not in (None, "") else DEFAULT_CHECKPOINT_INTERVAL_S


def _storage_limit_bytes(options: dict) -> int | None:
    """The ``storage_limit`` option ("<n>MB") in bytes; ``None`` without one."""
    limit = str(options.get("storage_limit", ""))
    return int(limit[:-2]) * 1024 * 1024 if limit.endswith("MB") else None


class CompanionRun(Protocol):
    """A run that ends with another (:meth:`Msprof.part_of`): a simulated cluster's other ranks.  ``finalize``
    returns what they could not write ("" if everything: :attr:`Msprof.write_problem`)."""

    def finalize(self, status: str, note: str) -> str: ...


class Run:
    """One run directory and everything that starts over with it: its info.json, its hash dictionary
    file, its buffers, its hand-offs to the writer and what a warmup window discarded."""

    def __init__(self, path: Path, options: dict, info: RunInfo, dictionary: HashDictionary, writer_: Writer,
                 lock: threading.RLock) -> None:
        #: Where the run directory is (the writer thread moves it: :meth:`Msprof.move_into`).
        self.location = RunLocation(path)
        self.path = path
        self.info = info
        #: True once the run was finalised (or could not be opened): it takes no more writes.
        self.closed = False
        self.discarded = 0  # records dropped by the current discard window
        #: The directory this run is part of, with its companions (``None``: the run directory itself).
        self.root: Path | None = None
        #: What could not be written, said when the run was finalised ("" if everything was written), and
        #: what its companions could not write.
        self.problem = ""
        self.companion_problems: list[str] = []
        #: The writer thread's timer of this run's timed checkpoints (:meth:`Msprof.init`), cancelled at finalize.
        self.tick: Callable[[], bool] | None = None
        self.companions: list[CompanionRun] = []
        self.hashes = HashFile(dictionary, lock, info.write_failed, lambda: not self.closed)
        self.buffers = RunBuffers(self.location, writer_, lock, functools.partial(self.hashes.write, self.location))
        self.aging = StorageAging(_storage_limit_bytes(options), info)
        self.handoff = RunHandoff(self.location, self.buffers, self.hashes, info, self.aging, writer_, lock)


class Msprof:
    """One msprof instance per process: run directory, buffers, hash dictionary, control."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._callbacks: dict[int, ControlCallback] = {}
        #: Every string this library was asked the id of: each run's hash_dict.jsonl holds them all.
        self.hashes = HashDictionary(self._lock)
        #: ``MsprofGetHashId`` (:meth:`HashDictionary.get_hash_id`), and many strings' ids at once
        #: (:meth:`HashDictionary.get_hash_ids`); bound here, the reporters call them per name.
        self.get_hash_id = self.hashes.get_hash_id
        self.get_hash_ids = self.hashes.get_hash_ids
        #: The current run, or the last one once it is finalised (its counts and notes stay readable).
        self._run: Run | None = None
        self.last_run_dir: Path | None = None
        self.switch = 0
        self.options: dict = {}
        self.started = False
        self.chunk_records = DEFAULT_CHUNK_RECORDS
        self.run_serial = 0  # increments with every run directory opened
        #: While True, reported records are counted and dropped (a step schedule's warmup window).
        self.discarding = False
        self._writer = writer()
        #: Batches of steps being reported now, in any thread (:meth:`reporting_batch`): a buffer that
        #: fills meanwhile is checkpointed once no batch is open.
        self._open_batches = 0

    # ------------------------------------------------------------------ state
    @property
    def running(self) -> bool:
        """A run directory is open (between init and finalize)."""
        run = self._run
        return run is not None and not run.closed

    @property
    def run_dir(self) -> Path | None:
        """The open run's directory (``None`` when no run is open)."""
        run = self._run
        return None if run is None or run.closed else run.path

    @property
    def mode(self) -> str | None:
        """What opened the current run (``init``'s ``mode``: "ge_options", "api", "magic", ...); ``None``
        when no run is open."""
        with self._lock:
            return self._run.info.content.get("mode") if self.running else None

    @property
    def opened(self) -> tuple[Path, str | None] | None:
        """The open run's directory and :attr:`mode`, read together (``None`` when no run is open)."""
        with self._lock:
            return (self._run.path, self._run.info.content.get("mode")) if self.running else None

    @property
    def storage_limit_bytes(self) -> int | None:
        """The current (or last) run's ``storage_limit`` in bytes (``None``: no limit); set at init from the
        options, and may be changed while the run collects."""
        run = self._run
        return run.aging.limit_bytes if run is not None else None

    @storage_limit_bytes.setter
    def storage_limit_bytes(self, limit: int | None) -> None:
        with self._lock:
            if self._run is not None:
                self._run.aging.limit_bytes = limit

    def init(self, output: str | os.PathLike, options: dict | None = None, mode: str = "ge_options",
             restart_clock: bool = True) -> Path:
        """Open a new run directory under ``output``; collection starts with :meth:`start`.

        ``restart_clock=False`` keeps the process clock running: the other ranks of a
        simulated cluster open their runs mid-way and share rank 0's clock.
        """
        self._writer.wait()  # what an earlier run handed the writer belongs to that run
        with self._lock:
            if self.running:
                raise RunAlreadyOpen(self.run_dir, self.mode)
            out = Path(output).expanduser()
            _refuse_run_as_output(out)
            out.mkdir(parents=True, exist_ok=True)
            if not os.access(out, os.W_OK):
                raise PermissionError(f"profiling output directory {out} is not writable")
            run_dir = _make_run_dir(out)
            if restart_clock:
                clock.restart()
            self.run_serial += 1
            path = run_dir.resolve()
            self.options = dict(options or {})
            self.discarding = False
            info = RunInfo({
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
            }, self._lock)
            self._run = Run(path, self.options, info, self.hashes, self._writer, self._lock)
            try:
                info.write(path, strict=True)
            except OSError:  # the directory cannot take even info.json: no run is open
                self._run.closed = True
                remove(run_dir / (rawdata.INFO_FILE + ".tmp"))
                with contextlib.suppress(OSError):
                    run_dir.rmdir()
                raise
            self._run.hashes.create(self._run.location)
            self._run.tick = self._timed_checkpoint(self._run)
            self._writer.every(_checkpoint_interval(self.options), self._run.tick)
            return path

    def _timed_checkpoint(self, run: Run) -> Callable[[], bool]:
        """The writer thread's timer of ``run``: a timed checkpoint (:meth:`.handoff.RunHandoff.submit_sync`)
        each time, until the run is closed (it holds the library weakly: a cluster rank's library goes)."""
        library = weakref.ref(self)

        def tick() -> bool:
            lib = library()
            if lib is None:
                return False
            with lib._lock:
                if run.closed:
                    return False
                run.handoff.submit_sync()
                return True

        return tick

    def start(self, switch: int, dev_ids: tuple[int, ...] = (0,), options: dict | None = None) -> int:
        """Tell every registered module to start collecting the data types in ``switch``.

        ``options`` (profilingOptions fields) replace the run's options from now
        on; the API mode passes the equivalent of its config here.
        """
        with self._lock:
            if not self.running:
                return ACL_ERROR_PROF_NOT_RUN
            info = self._run.info
            if options is not None:
                self.options = dict(options)
                info.content.setdefault("options_history", []).append(self.options)
                info.content["options"] = self.options
            self.switch = int(switch)
            self.started = True
            window = {"start_ns": clock.now_ns(), "switch": self.switch}
            if self.discarding:
                window["discarded"] = True
            info.content["switch_history"].append(window)
            info.dirty = True
            handle = CommandHandle(CommandType.START, self.switch, tuple(dev_ids), self.options)
            callbacks = list(self._callbacks.values())
        for cb in callbacks:
            cb(handle)
        with self._lock:  # what the modules described when they started (devices, PMU events), in one write
            if self.running and self._run.info.dirty:
                self._run.info.write(self._run.path)
        return MSPROF_ERROR_NONE

    def stop(self) -> int:
        """Tell every registered module to stop collecting."""
        with self._lock:
            if not self.started:
                return ACL_ERROR_PROF_NOT_RUN
            handle = CommandHandle(CommandType.STOP, self.switch, options=self.options)
            self.started = False
            history = self._run.info.content["switch_history"]
            if history:
                history[-1]["stop_ns"] = clock.now_ns()
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
            self._run.handoff.submit_flush()
        self._writer.wait()  # outside the lock, which the writer takes to note what it could not write
        with self._lock:
            if not self.running:  # another thread finalised it meanwhile
                return None
            self.discarding = False
            run = self._run
            info = run.info
            info.content["status"] = status
            if note:
                info.content["note"] = note
            info.content["end_ns"] = clock.now_ns()
            info.content["records"].update(run.buffers.records_in_files())
            if run.hashes.unwritten:  # names the run's records use that could not be written
                info.content.setdefault("write_failed", {})[rawdata.HASH_DICT_KIND] = run.hashes.unwritten
            info.write(run.path)
            run.problem = info.problem(run.path)
            run.closed = True
            self._writer.cancel(run.tick)
            companions, run.companions = run.companions, []
            finished = run.root or run.path
        if run.problem:  # once, by the call that finalises the run, which also says it in its status
            print(run.problem, file=sys.stderr, flush=True)
        for companion in companions:  # a simulated cluster's other ranks end with rank 0
            run.companion_problems.append(companion.finalize(status, note))
        with self._lock:
            self.last_run_dir = finished
            self.switch = 0
            return finished

    @property
    def write_problem(self) -> str:
        """What the last finalised run (or a cluster's ranks that ended with it) could not write, in words ("" if
        everything was written): the call that finalised it returns a failure status saying it."""
        run = self._run
        if run is None or not run.closed:
            return ""
        return "\n".join(said for said in (run.problem, *run.companion_problems) if said)

    def move_into(self, directory: str | os.PathLike) -> Path:
        """Move the open run into ``directory`` (made if need be) now; returns where it is.

        A simulated cluster files rank 0's run under ``CLUSTER_*/rank_0/`` when the cluster opens, so
        that everything the ranks record is in place from then on.  The writer thread moves it
        between two of its jobs: what it wrote goes along, what it writes later follows (the chunks
        being written name their files relative to the run).  ``OSError`` if it cannot be moved.
        """
        with self._lock:
            if not self.running:
                raise RuntimeError("no run is open to be moved")
            run = self._run
            target = Path(directory) / run.path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            failed: list[OSError] = []

            def move() -> None:
                with self._lock:  # a calling thread writing info.json meanwhile sees one place or the other
                    try:
                        os.rename(run.location.path, target)
                    except OSError as exc:
                        failed.append(exc)
                        return
                    run.location.path, run.path = os.fspath(target), target

            self._writer.submit(move)
        self._writer.wait()
        if failed:
            raise failed[0]
        return target

    def part_of(self, root: str | os.PathLike, companions: Sequence[CompanionRun]) -> None:
        """This run is one of several under ``root`` (a simulated cluster's ranks): the ``companions``
        are finalised with it, with its status and note, and :meth:`finalize` returns ``root``."""
        with self._lock:
            if self.running:
                self._run.root = Path(root)
                self._run.companions.extend(companions)

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
            run = self._run
            n = 0
            if run is not None:
                n, run.discarded = run.discarded, 0
            self.discarding = False
            if self.running and n:
                run.info.content["discarded"] = run.info.content.get("discarded", 0) + n
            return n

    def _discard(self, n: int) -> None:
        with self._lock:
            if self._run is not None:
                self._run.discarded += n

    @property
    def records_reported(self) -> int:
        """Records reported to the current (or last) run and kept, written or pending; cheap to read."""
        run = self._run
        return run.buffers.records_kept if run is not None else 0

    @property
    def notes(self) -> list[str]:
        """The notes of the current (or last) run as held in memory: they reach info.json only if it
        can be written, so the caller of a run can still say them (e.g. why writes failed)."""
        with self._lock:
            return self._run.info.notes if self._run is not None else []

    def info_not_written(self) -> dict | None:
        """The current (or last) run's info.json as the library holds it, if the file in the run
        directory is an older one (its last write failed: a full disk, a directory made read-only),
        so the caller can still hand on its status, notes and ``write_failed`` counts; else None."""
        with self._lock:
            run = self._run
            if run is None or run.info.on_disk:
                return None
            return run.info.snapshot()

    # ---------------------------------------------------------------- metadata
    def set_run_info(self, key: str, value) -> None:
        """Record ``info.json[key] = value`` for this run (the notebook records its settings here)."""
        with self._lock:
            if self.running:
                self._run.info.set(key, value)

    def set_device_info(self, device_id: int, info: dict) -> None:
        """The runtime describes its device (msprof reads this from the driver)."""
        with self._lock:
            if self.running:
                self._run.info.set_device(device_id, info)

    def set_pmu_events(self, core: str, events: list[str]) -> None:
        """Record which 8 PMU events the AI Core counters were programmed with."""
        with self._lock:
            if self.running:
                self._run.info.set_pmu_events(core, events)

    def describe_model(self, model_id: int, name: str, training: bool, phase: str | None = None) -> None:
        """Record what a loaded model is: its graph's name, whether it trains or runs forward only, and the
        inference engine step it runs (prefill, decode) if it is one."""
        with self._lock:
            if self.running:
                self._run.info.describe_model(model_id, name, training, phase)

    def add_note(self, text: str) -> None:
        """Something a reader of this run should know (kept once, in order)."""
        with self._lock:
            if self.running:
                self._run.info.add_note(text)

    def count_unwritten(self, kind: str, count: int, what: str, exc: OSError) -> None:
        """``count`` of ``kind`` could not be written at ``what`` (a simulated cluster's ranks, whose run
        directories could not be made): counted in ``write_failed`` and noted, as a failed chunk is."""
        with self._lock:
            if self._run is not None:
                self._run.info.write_failed(what, exc, kind, count)

    def note_dropped(self, kind: str, count: int) -> None:
        """Records a producer could not keep (a full ring buffer): counted in info.json, never silent."""
        with self._lock:
            if self._run is not None:
                self._run.info.count_dropped(kind, count)

    def register_type_info(self, level: int, type_id: int, name: str) -> None:
        """``MsprofRegTypeInfo``: the name msprof shows for a (level, type) of api/event records."""
        with self._lock:
            if self._run is not None:
                self._run.info.register_type(level, type_id, name)

    # --------------------------------------------------------------- reporting
    def report_row(self, kind: str, row: tuple, device_id: int = 0) -> None:
        """Append one record (a tuple in the kind's field order)."""
        run = self._run
        if run is None or run.closed or self.discarding:
            if self.discarding:
                self._discard(1)
            return
        buf = run.buffers.get(kind, device_id)
        if run.buffers.add_row(buf, row, self.chunk_records):
            self._buffer_filled(run, buf)

    def report_block(self, kind: str, records: np.ndarray, device_id: int = 0) -> None:
        """Append many records at once (a structured array of the kind's dtype); the writer thread
        writes them into the kind's current chunk file meanwhile."""
        run = self._run
        if run is None or run.closed or len(records) == 0:
            return
        if self.discarding:
            if records.dtype != rawdata.RECORD_KINDS[kind].dtype:
                raise TypeError(f"{kind} records must have dtype {rawdata.RECORD_KINDS[kind].dtype}, "
                                f"got {records.dtype}")
            self._discard(len(records))
            return
        buf = run.buffers.get(kind, device_id)
        if records.dtype != buf.kind.dtype:
            raise TypeError(f"{kind} records must have dtype {buf.kind.dtype}, got {records.dtype}")
        if run.hashes.unsubmitted:  # the names these records use reach the disk ahead of them
            with self._lock:
                if not run.closed:
                    run.handoff.submit_hashes()
        if run.buffers.add_block(buf, records, self.chunk_records):
            self._buffer_filled(run, buf)

    def flush(self) -> None:
        """Write every pending record to disk as new chunks (returns once they are there)."""
        with self._lock:
            if self.running:
                self._run.handoff.submit_flush()
        self._writer.wait()

    @contextlib.contextmanager
    def reporting_batch(self) -> Iterator[None]:
        """Report one batch of steps as a unit, so that a step's task records never reach a closed chunk
        without its step trace, HCCL tasks or API calls (a kill in the middle of a batch leaves what the
        writer had written of it in growing chunks, which the reader salvages as they are).

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
                run = self._run
                due = run is not None and run.handoff.checkpoint_due and not self._open_batches
                if due:
                    run.handoff.checkpoint_due = False
                    previous = self._checkpoint(run)
                elif self.running and run.hashes.unsubmitted:
                    run.handoff.submit_hashes()  # the names the batch brought, in the background
            if due:
                self._writer.wait(previous)

    def _buffer_filled(self, run: Run, buf: RecordBuffer) -> None:
        """``buf`` reached ``chunk_records``: checkpoint now, or seal it and checkpoint once no batch
        of steps is open (:meth:`reporting_batch`)."""
        with self._lock:
            if run.closed:  # finalised meanwhile: nothing is written any more
                return
            if self._open_batches:
                with buf.lock:
                    run.buffers.seal(buf)
                run.handoff.checkpoint_due = True
                return
            previous = self._checkpoint(run)
        self._writer.wait(previous)

    def _checkpoint(self, run: Run) -> int:
        """Hand ``run``'s checkpoint to the writer (caller holds the lock); the mark of the one before."""
        if run.closed:
            return run.handoff.checkpoint_mark
        return run.handoff.submit_checkpoint()

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
        """Remove a module's control handler; a running collection stops it first (its layers go off and what it
        holds reaches the run), as registering starts it: a module that leaves while a run it did not open goes
        on collects nothing more, and nothing it ran later leaks into another run."""
        with self._lock:
            callback = self._callbacks.pop(module_id, None)
            started = self.started
            handle = CommandHandle(CommandType.STOP, self.switch, options=self.options)
        if callback is not None and started:
            callback(handle)


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
    try:
        lib.init(opts.output, opts.to_dict())
    except RunAlreadyOpen:  # opened by another thread since the test above
        return ACL_ERROR_PROF_ALREADY_RUN
    except OSError:
        return MSPROF_ERROR
    return lib.start(opts.data_type_config())


@toolkit_entry
def MsprofFinalize() -> int:  # noqa: N802
    """Finalise the run; ``MSPROF_ERROR`` if not everything could be written (stderr said what)."""
    if lib.finalize() is not None and lib.write_problem:
        return MSPROF_ERROR
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
