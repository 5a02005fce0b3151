"""The columnar buffers of one run: records of each kind (and device) reported since its chunk was
closed, on their way to the writer thread.

Blocks (numpy structured arrays) go to the writer as they are reported, into the kind's current chunk
file; single rows are gathered and handed over as one block at a timed checkpoint or at the end of the
chunk.  A chunk that fills while a batch of steps is open is *sealed*: it takes no more records and
waits for the checkpoint that closes it, with every other kind's (:mod:`.handoff`).
"""

from __future__ import annotations

import functools
import os
import threading
from typing import Callable, Iterator

import numpy as np

from . import rawdata
from .writer import ChunkFile, RunLocation, Writer


class RecordBuffer:
    """Records of one kind reported since its last chunk was closed."""

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

    @property
    def key(self) -> str:
        """The buffer's name in info.json's ``records``: the kind, with ``@<device>`` past device 0."""
        device = self.device_id
        return self.kind.name if device == 0 or self.kind.side == "host" else f"{self.kind.name}@{device}"


class RunBuffers:
    """Every buffer of one run, by (kind, device id), and the chunk files they write where the run is."""

    def __init__(self, location: RunLocation, writer: Writer, lock: threading.RLock,
                 names_first: Callable[[], None] | None = None) -> None:
        self.location = location
        self.names_first = names_first  # writes the names records use before their blocks (ChunkFile)
        self._writer = writer
        self._lock = lock
        self.by_key: dict[tuple[str, int], RecordBuffer] = {}
        self._made_dirs: set[str] = set()  # chunk directories of this run made (or being made), relative

    def __iter__(self) -> Iterator[RecordBuffer]:
        return iter(list(self.by_key.values()))

    def get(self, kind: str, device_id: int = 0) -> RecordBuffer:
        key = (kind, device_id)
        buf = self.by_key.get(key)
        if buf is None:
            with self._lock:
                buf = self.by_key.setdefault(key, RecordBuffer(rawdata.RECORD_KINDS[kind], device_id))
        return buf

    @property
    def records_kept(self) -> int:
        """Records reported and kept, written or pending, less those whose chunks could not be written."""
        return sum(b.kept - b.lost for b in self)

    def records_in_files(self) -> dict[str, int]:
        """Records in the run's chunk files now, closed or still growing, by info.json key (the writer thread,
        which alone writes the chunks, so what it counts is there; a chunk between its seal and its close is
        not counted: a lower bound)."""
        out = {}
        for buf in self:
            with buf.lock:
                growing = [chunk for chunk, _ in buf.sealed] + ([buf.chunk] if buf.chunk is not None else [])
                n = buf.written + sum(chunk.records for chunk in growing)
            if n:
                out[buf.key] = n
        return out

    def add_row(self, buf: RecordBuffer, row: tuple, chunk_records: int) -> bool:
        """Append one record (a tuple in the kind's field order); True if the chunk is full."""
        with buf.lock:
            if buf.chunk is None:  # its file is made now, in the background, not when the chunk is closed
                self.new_chunk(buf)
            buf.rows.append(row)
            buf.pending += 1
            buf.kept += 1
            return buf.pending >= chunk_records

    def add_block(self, buf: RecordBuffer, records: np.ndarray, chunk_records: int) -> bool:
        """Hand ``records`` (the kind's dtype) to the writer for the current chunk; True if it is full."""
        with buf.lock:
            chunk = buf.chunk or self.new_chunk(buf)
            self._writer.submit(functools.partial(chunk.append, records))
            buf.pending += len(records)
            buf.kept += len(records)
            return buf.pending >= chunk_records

    def new_chunk(self, buf: RecordBuffer) -> ChunkFile:
        """The next chunk file of ``buf``, which the writer creates at once (caller holds its lock); its
        directory is made with the first."""
        directory = buf.kind.directory(buf.device_id)
        first_in_directory = directory not in self._made_dirs
        self._made_dirs.add(directory)
        buf.chunk = ChunkFile(os.path.join(directory, rawdata.chunk_name(buf.kind.name, buf.seq)), buf.kind.dtype,
                              make_dir=first_in_directory, location=self.location,
                              names_first=self.names_first)
        buf.seq += 1
        self._writer.submit(buf.chunk.open)
        return buf.chunk

    def hand_rows(self, buf: RecordBuffer) -> None:
        """Hand the rows ``buf`` gathered to the writer, as one block of its current chunk (caller holds its
        lock): from then on a kill loses them only if the writer had not got to them."""
        if buf.rows:
            chunk = buf.chunk or self.new_chunk(buf)
            self._writer.submit(functools.partial(chunk.append, np.array(buf.rows, dtype=buf.kind.dtype)))
            buf.rows = []

    def seal(self, buf: RecordBuffer) -> None:
        """End ``buf``'s current chunk: its rows go last, and it waits to be closed (caller holds its lock)."""
        if not buf.pending:
            return
        self.hand_rows(buf)
        buf.sealed.append((buf.chunk, buf.pending))
        buf.chunk, buf.pending = None, 0
