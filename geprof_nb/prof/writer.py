"""msprof's writer thread: what the reporters hand over reaches the run directory in the background.

The profiled job only appends jobs to a queue; creating files, writing record blocks and
renaming finished chunks run in one thread per process, in the order the jobs were handed
over, beside the job on another core (each system call releases the GIL), the way msprof's
uploader thread drains its buffers to disk.  :meth:`Writer.wait` returns once every job
handed over before it (or before a :meth:`Writer.mark`) has run: the finalise and an explicit
flush wait for everything, a checkpoint for the checkpoint before it.  :meth:`Writer.every`
calls a function in the thread at an interval (a run's timed checkpoint), also while no job comes.

:class:`ChunkFile` is one chunk being written: ``<kind>.<seq>.tmp`` grows block by block
as records are reported and becomes ``<kind>.<seq>.npy`` once complete, so a crash leaves
at most unfinished ``.tmp`` files beside the complete chunks (the reader salvages their whole
records: they are fixed-size, after a header of known length).  A write that fails (a full disk, a
file-size limit) ends the chunk: the records written before it are kept, the others counted.  A run's chunks name their
files relative to its :class:`RunLocation`, which this thread reads when it gets to them: a
run moved between two jobs keeps every file, the open ones included.
"""

from __future__ import annotations

import atexit
import collections
import os
import threading
import time
from typing import Callable

import numpy as np

from . import rawdata


class Writer:
    """A FIFO of jobs run by one daemon thread, started when the first job arrives."""

    def __init__(self) -> None:
        self._jobs: collections.deque[Callable[[], None]] = collections.deque()
        lock = threading.Lock()
        self._has_jobs = threading.Condition(lock)  # the thread waits here when idle
        self._progress = threading.Condition(lock)  # wait() waits here
        self._submitted = 0
        self._done = 0
        self._targets: list[int] = []  # what each wait() in progress waits for
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        #: Functions called every so often (:meth:`every`): [due (monotonic s), interval s, function].
        self._timers: list[list] = []

    def submit(self, job: Callable[[], None]) -> None:
        """Run ``job`` after every job submitted before it.  A job handles its own ``OSError``s."""
        with self._has_jobs:
            self._jobs.append(job)
            self._submitted += 1
            self._start()
            self._has_jobs.notify()

    def every(self, interval: float, tick: Callable[[], bool]) -> None:
        """Call ``tick()`` in the writer thread about every ``interval`` seconds, between two jobs or while
        none comes, until it returns False.  What it submits runs after the jobs submitted before."""
        with self._has_jobs:
            self._timers.append([time.monotonic() + interval, interval, tick])
            self._start()
            self._has_jobs.notify()

    def cancel(self, tick: Callable[[], bool]) -> None:
        """Call ``tick`` no more (a timer of :meth:`every`; nothing if it has ended)."""
        with self._has_jobs:
            self._timers = [t for t in self._timers if t[2] is not tick]

    def _start(self) -> None:
        """Start the thread if it is not running (caller holds the lock)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="msprof-writer", daemon=True)
            self._thread.start()

    def mark(self) -> int:
        """How many jobs were submitted so far: :meth:`wait` with it waits for those only."""
        with self._progress:
            return self._submitted

    def wait(self, upto: int | None = None) -> None:
        """Return once every job submitted before this call (or the first ``upto`` jobs, a :meth:`mark`)
        has run (raises what a job raised unexpectedly, a bug: the thread goes on with the next job)."""
        with self._progress:
            self._wait_for(self._submitted if upto is None else min(upto, self._submitted), None)
            error, self._error = self._error, None
        if error is not None:
            raise error

    def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every job submitted so far; True if they all ran."""
        with self._progress:
            return self._wait_for(self._submitted, timeout)

    def _wait_for(self, target: int, timeout: float | None) -> bool:
        """Wait until ``target`` jobs have run (caller holds the lock); False if ``timeout`` passed first."""
        if self._done >= target:
            return True
        self._targets.append(target)
        try:
            return self._progress.wait_for(lambda: self._done >= target, timeout)
        finally:  # a Ctrl-C while waiting leaves no target behind
            self._targets.remove(target)

    def _run(self) -> None:
        while True:
            with self._has_jobs:
                while not self._jobs:
                    timeout = min((t[0] for t in self._timers), default=None)
                    if timeout is not None:
                        timeout -= time.monotonic()
                        if timeout <= 0:
                            break
                    self._has_jobs.wait(timeout)
                job = self._jobs.popleft() if self._jobs else None
                due = [t for t in self._timers if t[0] <= time.monotonic()] if self._timers else []
            if job is not None:
                self._run_job(job)
            if due:
                self._tick(due)

    def _run_job(self, job: Callable[[], None]) -> None:
        try:
            job()
        except BaseException as exc:  # noqa: BLE001 - handed to the next wait()
            with self._progress:
                self._error = self._error or exc
        with self._progress:
            self._done += 1
            if self._targets and self._done >= min(self._targets):  # wake a waiter only when it is due
                self._progress.notify_all()

    def _tick(self, due: list[list]) -> None:
        """Call the timers that are due (outside the lock: they submit jobs); drop those that are done."""
        for timer in due:
            try:
                again = timer[2]()
            except BaseException as exc:  # noqa: BLE001 - a bug: handed to the next wait(), the timer ends
                with self._progress:
                    self._error = self._error or exc
                again = False
            with self._has_jobs:
                if timer not in self._timers:  # cancelled meanwhile
                    continue
                if again:
                    timer[0] = time.monotonic() + timer[1]
                else:
                    self._timers.remove(timer)


def _create(path: str) -> int:
    """Open ``path`` for writing, empty, made if need be (a file descriptor)."""
    # O_BINARY: Windows' no-text-mode flag (0 elsewhere)
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0), 0o644)


def _write_all(fd: int, data) -> None:
    view = memoryview(data).cast("B")
    while view:
        view = view[os.write(fd, view):]


class _ShortWrite(OSError):
    """A write that failed after ``written`` bytes of its data reached the file (``reason``: why)."""

    def __init__(self, reason: OSError, written: int) -> None:
        super().__init__(reason.errno, reason.strerror or str(reason), reason.filename)
        self.written = written


def _write_counted(fd: int, data) -> None:
    """:func:`_write_all`, raising :class:`_ShortWrite` (how much was written) if a write fails."""
    view = memoryview(data).cast("B")
    total = len(view)
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError as exc:
        raise _ShortWrite(exc, total - len(view)) from None


class RunLocation:
    """Where a run directory is now (a plain string: a chunk's paths cost tens of microseconds as
    Path objects).  Only the writer thread moves it, between two jobs."""

    __slots__ = ("path",)

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)


class ChunkFile:
    """One chunk of records of a kind, written block by block into ``<path>.tmp`` (writer thread
    only) and renamed to ``path`` by :meth:`close`.  The first block opens the file, making its
    directory if ``make_dir``.  A failed write ends the chunk: ``error`` says why, ``records`` counts
    the whole records written before it (what :meth:`close` keeps), later blocks are not written.

    With a ``location``, ``path`` is relative to it and resolved when the writer gets to it.  ``names_first``
    (the run's hash dictionary, written up to the strings learned so far) runs before each block is written:
    a record names only strings learned before it, so a kill at any moment leaves no record on disk whose
    name is not there, whatever order the jobs were handed over in."""

    __slots__ = ("_path", "location", "dtype", "make_dir", "records", "_fd", "_header_len", "error", "names_first")

    def __init__(self, path: str, dtype: np.dtype, make_dir: bool = False, location: RunLocation | None = None,
                 names_first: Callable[[], None] | None = None) -> None:
        self._path = path
        self.names_first = names_first
        self.location = location
        self.dtype = dtype
        self.make_dir = make_dir
        self.records = 0
        self._fd = -1
        self._header_len = 0
        self.error: OSError | None = None

    @property
    def path(self) -> str:
        """Where the complete chunk goes (where its run is now)."""
        return self._path if self.location is None else os.path.join(self.location.path, self._path)

    @property
    def tmp(self) -> str:
        """The file the chunk grows in until it is complete."""
        return self.path[: -len(".npy")] + ".tmp"

    def open(self) -> None:
        """Create the file with a header for any number of records (the first write does, if this did not)."""
        if self.error is not None or self._fd >= 0:
            return
        try:
            if self.make_dir:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
            self._fd = _create(self.tmp)
            header = rawdata.npy_header(self.dtype, 0)
            self._header_len = len(header)
            _write_all(self._fd, header)
        except OSError as exc:
            self.error = exc
            self._drop()

    def append(self, block: np.ndarray) -> None:
        """Write ``block`` (records of the chunk's dtype) after the ones before it."""
        self.open()
        if self.error is not None:
            return
        if self.names_first is not None:
            self.names_first()
        try:
            _write_counted(self._fd, np.ascontiguousarray(block))
            self.records += len(block)
        except _ShortWrite as exc:  # the whole records before the failure stay; close() cuts a torn one off
            self.records += exc.written // self.dtype.itemsize
            self.error = exc

    def close(self) -> int:
        """Give the header the chunk's length and rename it into place; returns its size in bytes.

        After a failed write the chunk keeps the whole records written before it (``error`` says
        why); raises the ``OSError`` if the file cannot be opened or closed at all (the ``.tmp`` is
        then gone)."""
        self.open()
        if self._fd < 0 or (self.error is not None and not self.records):
            self._drop()
            raise self.error
        try:
            header = rawdata.npy_header(self.dtype, self.records)
            if len(header) != self._header_len:  # beyond numpy's room for growth (never for 21 digits)
                raise OSError(f"{self.tmp}: .npy header grew from {self._header_len} to {len(header)} bytes")
            if self.error is not None:  # a torn record after the last whole one goes
                os.ftruncate(self._fd, self._header_len + self.records * self.dtype.itemsize)
            os.lseek(self._fd, 0, os.SEEK_SET)  # only this thread writes the file (os.pwrite is POSIX only)
            _write_all(self._fd, header)
            os.close(self._fd)
            self._fd = -1
            path = self.path
            os.replace(path[: -len(".npy")] + ".tmp", path)
        except OSError as exc:
            self.error = exc
            self.records = 0
            self._drop()
            raise
        return self._header_len + self.records * self.dtype.itemsize

    def _drop(self) -> None:
        if self._fd >= 0:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = -1
        try:
            os.unlink(self.tmp)
        except OSError:
            pass


_writer = Writer()


def writer() -> Writer:
    """The process's writer thread."""
    return _writer


def _after_fork_in_child() -> None:
    # the parent's thread does not exist here, and its locks may have been held when it forked:
    # the same object (msprof keeps it) starts over, empty, and starts a thread of its own when needed
    # (with the parent's timers: a run the child goes on collecting keeps its timed checkpoints)
    timers = [list(t) for t in _writer._timers]
    _writer.__init__()
    if timers:
        with _writer._has_jobs:
            _writer._timers = timers
            _writer._start()


#: How long the interpreter's exit waits for the writer (a hung disk must not hang the exit).
EXIT_DRAIN_S = 30.0


@atexit.register
def _drain_at_exit() -> None:
    # the thread is a daemon, stopped where it is when the interpreter ends: what a job handed over
    # (a checkpoint in flight, when a script ends without GEFinalize) is written first
    _writer.drain(EXIT_DRAIN_S)


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)
