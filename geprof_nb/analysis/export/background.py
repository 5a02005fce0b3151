"""Export files written by a thread.

Writing an export's gigabytes is the kernel copying them into the page cache,
which on a VM whose free memory goes back to the host costs as much as making
them (0.3-0.4 GB/s).  A :class:`BackgroundFile` hands each chunk to a thread
that writes them in order, so the copy runs beside making the next chunk
(the GIL is released during ``write``).
"""

from __future__ import annotations

import queue
import threading
from pathlib import Path

#: Chunks waiting to be written at most (each up to tens of MB): making them waits beyond that.
_QUEUED_CHUNKS = 16


class BackgroundFile:
    """A binary file (``with BackgroundFile(path) as f: f.write(chunk)``) whose chunks a thread writes
    in order; leaving the ``with`` waits until all are written and raises the thread's error, if any."""

    def __init__(self, path: Path) -> None:
        self._file = open(path, "wb")
        self._queue: queue.Queue = queue.Queue(maxsize=_QUEUED_CHUNKS)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._write_queued, name=f"write {Path(path).name}", daemon=True)
        self._thread.start()

    def _write_queued(self) -> None:
        while (chunk := self._queue.get()) is not None:
            if self._error is None:  # after an error, the chunks are only taken off the queue
                try:
                    self._file.write(chunk)
                except BaseException as e:  # noqa: BLE001 - raised in the exporting thread
                    self._error = e

    def write(self, chunk) -> None:
        if self._error is not None:
            raise self._error
        self._queue.put(chunk)

    def __enter__(self) -> BackgroundFile:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        self._queue.put(None)
        self._thread.join()
        self._file.close()
        if self._error is not None and kind is None:
            raise self._error
