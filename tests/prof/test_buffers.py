"""prof/buffers.py: a run's records per kind on their way to the writer, chunk by chunk."""

from __future__ import annotations

import os
import threading

import numpy as np

from geprof_nb.prof import rawdata
from geprof_nb.prof.buffers import RunBuffers
from geprof_nb.prof.writer import RunLocation, Writer


def test_rows_and_blocks_fill_chunks_and_sealing_puts_the_rows_last(tmp_path):
    w = Writer()
    buffers = RunBuffers(RunLocation(tmp_path), w, threading.RLock())
    api = buffers.get("api")
    assert buffers.get("api") is api and buffers.get("api", 1) is not api
    row = (15000, 1, 7, 100, 250, 3)
    assert [buffers.add_row(api, row, chunk_records=3) for _ in range(3)] == [False, False, True]
    hwts = buffers.get("hwts")
    block = np.zeros(4, rawdata.HWTS_DTYPE)
    block["start"] = [1, 2, 3, 4]
    assert buffers.add_block(hwts, block, chunk_records=4)
    assert buffers.records_kept == 7
    for buf in (api, hwts):
        buffers.seal(buf)
    (api_chunk, api_n), = api.sealed
    (hwts_chunk, hwts_n), = hwts.sealed
    assert (api_n, hwts_n) == (3, 4) and api.chunk is None and api.rows == [] and api.pending == 0
    w.submit(api_chunk.close)
    w.submit(hwts_chunk.close)
    w.wait()
    assert api_chunk.path == os.path.join(tmp_path, "host", "data", "api.000000.npy")
    assert np.load(api_chunk.path).tolist() == [row] * 3
    assert np.load(hwts_chunk.path)["start"].tolist() == [1, 2, 3, 4]
    assert buffers.add_row(api, row, chunk_records=3) is False and api.chunk.path.endswith("api.000001.npy")


def test_sealing_an_empty_buffer_makes_no_chunk(tmp_path):
    buffers = RunBuffers(RunLocation(tmp_path), Writer(), threading.RLock())
    buf = buffers.get("step_trace")
    buffers.seal(buf)
    assert buf.sealed == [] and buf.seq == 0
