"""What one run hands the writer thread, and when: chunks closed into place after the names and the
metadata that read them, checkpoints that put everything reported so far on disk, and msprof's
storage aging (past ``storage_limit`` the oldest aging chunks are deleted).

A checkpoint is due once per ``chunk_records`` records of one kind, never per step: a run that never
fills a buffer closes its chunks at finalize only.  The job goes on meanwhile: the caller of a
checkpoint waits only until the checkpoint before it is on disk, so no more than two chunks of each
kind wait in memory.

A *timed* checkpoint (:meth:`RunHandoff.submit_sync`, every ``checkpoint_interval`` seconds of the run,
from the writer thread) closes no chunk: it hands over the rows gathered since the last one, then the
names and info.json follow them.  Blocks go to the writer as they are reported, so a kill loses only
what the writer had not written yet: the reader salvages the whole records of the chunks still growing
(``.tmp``), and info.json is never more than an interval behind (its ``records`` count what the chunk
files hold, closed or growing, when it is written).
"""

from __future__ import annotations

import functools
import os
import threading
from pathlib import Path

from . import rawdata
from .buffers import RecordBuffer, RunBuffers
from .hash_dict import HashFile
from .run_info import RunInfo, remove
from .writer import ChunkFile, RunLocation, Writer


class StorageAging:
    """msprof's aging: the bytes a run stored, and past ``limit_bytes`` the oldest aging chunks deleted."""

    def __init__(self, limit_bytes: int | None, info: RunInfo) -> None:
        self.limit_bytes = limit_bytes
        self._info = info
        self._chunks: list[tuple[ChunkFile, int, str, int]] = []  # (chunk, bytes, kind, records), oldest first
        self.stored_bytes = 0

    def account(self, chunk: ChunkFile, size: int, kind: rawdata.RecordKind, records: int) -> None:
        """Count a chunk closed into place (``size``: its bytes); delete the oldest past the limit (writer
        thread; caller holds the library's lock)."""
        self.stored_bytes += size
        if kind.aging:
            self._chunks.append((chunk, size, kind.name, records))
        limit = self.limit_bytes
        while limit is not None and self.stored_bytes > limit and self._chunks:
            old, old_size, old_kind, old_records = self._chunks.pop(0)
            remove(old.path)
            self.stored_bytes -= old_size
            aged = self._info.content["aged_out"]
            aged["chunks"] += 1
            aged["bytes"] += old_size
            aged["records"][old_kind] = aged["records"].get(old_kind, 0) + old_records


class RunHandoff:
    """The hand-offs of one run to the writer thread (every ``submit_*`` expects the caller to hold the
    library's ``lock``; :meth:`Writer.wait` afterwards returns once they are on disk)."""

    def __init__(self, location: RunLocation, buffers: RunBuffers, hashes: HashFile, info: RunInfo,
                 aging: StorageAging, writer: Writer, lock: threading.RLock) -> None:
        self.location = location
        self.buffers = buffers
        self.hashes = hashes
        self.info = info
        self.aging = aging
        self._writer = writer
        self._lock = lock
        #: A buffer filled while a batch of steps was open: its checkpoint waits until none is.
        self.checkpoint_due = False
        #: The writer's :meth:`~.writer.Writer.mark` after the last checkpoint was handed over.
        self.checkpoint_mark = 0

    def submit_flush(self) -> None:
        """Hand the writer everything reported so far: every buffer's chunks are closed, the
        sealed ones first, as if each had been written when it filled (storage aging deletes
        the oldest chunks, so a step's task records age out before its calls and trace), then
        info.json if the metadata changed."""
        buffers = list(self.buffers)
        for buf in buffers:
            with buf.lock:
                sealed, buf.sealed = buf.sealed, []
            for chunk, n in sealed:
                self.submit_close(buf, chunk, n)
        for buf in buffers:
            with buf.lock:
                self.buffers.seal(buf)
                sealed, buf.sealed = buf.sealed, []
            for chunk, n in sealed:
                self.submit_close(buf, chunk, n)
        if self.hashes.line_open:  # the last write of the names failed: tried again (the run may end now)
            self.submit_hashes()
        if self.info.dirty:
            self.submit_info()

    def submit_close(self, buf: RecordBuffer, chunk: ChunkFile, records: int) -> None:
        """Close ``chunk`` (``records`` of ``buf``) into place once the strings its records name and
        the metadata that reads them are on disk."""
        if self.hashes.behind:
            self.submit_hashes()
        if self.info.dirty:
            self.submit_info()
        key = buf.key
        info = self.info
        what = f"{buf.kind.directory(buf.device_id)}/{os.path.basename(chunk.path)}"

        def close() -> None:
            try:
                size = chunk.close()
            except OSError as exc:  # a full disk must not stop the profiled job: count what was lost
                with buf.lock:
                    buf.lost += records
                info.write_failed(what, exc, buf.kind.name, records)
                return
            kept = chunk.records  # all of them, but the records after a failed write (counted, never silent)
            with buf.lock:
                buf.written += kept
                buf.lost += records - kept
                written = buf.written
            if kept < records:
                info.write_failed(what, chunk.error, buf.kind.name, records - kept)
            with self._lock:  # info.json is dumped under this lock
                records_of = info.content["records"]
                records_of[key] = max(records_of.get(key, 0), written)
                self.aging.account(chunk, size, buf.kind, kept)

        self._writer.submit(close)

    def submit_checkpoint(self) -> int:
        """A buffer reached ``chunk_records``: every buffer's chunks, the hash dictionary and info.json
        (record counts, notes) go to disk, so that the run directory holds everything reported so far
        and loads on its own (step trace, static description and names with the task records).

        Returns the :meth:`Writer.mark` of the checkpoint before this one, which is all the caller
        waits for.  (Waiting for this one held the job up for the writes it had handed over during the
        last chunk, which the GIL had kept the writer from doing: ~50 ms in a 2000-step ResNet-50 run.)
        """
        self.submit_flush()
        self.submit_info()
        previous, self.checkpoint_mark = self.checkpoint_mark, self._writer.mark()
        return previous

    def submit_sync(self) -> None:
        """The timed checkpoint: the rows gathered are handed to their chunks (which stay open), with the
        names they use ahead of them and info.json after them, if it changed."""
        if self.hashes.behind:
            self.submit_hashes()
        for buf in self.buffers:
            with buf.lock:
                self.buffers.hand_rows(buf)
        self.submit_info(if_changed=True)

    def submit_info(self, if_changed: bool = False) -> None:
        """Have the writer replace info.json with the metadata as it is when it gets there, and the
        records the chunk files hold then (``if_changed``: unless that is what the file says)."""
        info = self.info
        info.dirty = False
        location = self.location
        buffers = self.buffers

        def write() -> None:
            with self._lock:
                info.content["records"].update(buffers.records_in_files())
                data = info.dumps()
            if not (if_changed and info.is_on_disk(data)):
                info.replace(Path(location.path), data)

        self._writer.submit(write)

    def submit_hashes(self) -> None:
        """Have the writer append the hash dictionary lines it has not written."""
        self.hashes.submitted_all()
        self._writer.submit(functools.partial(self.hashes.write, self.location))
