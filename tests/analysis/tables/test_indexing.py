"""analysis.tables.indexing: joining raw records by connection id, gathering packed records."""

from __future__ import annotations

import numpy as np

from geprof_nb.analysis.tables.indexing import take_records
from geprof_nb.prof import rawdata


def test_take_records_equals_fancy_indexing_of_packed_records():
    dtype = rawdata.RECORD_KINDS["hccl_task"].dtype  # 50 bytes, unaligned fields
    rec = np.zeros(5, dtype)
    rec["start"] = [50, 10, 40, 20, 30]
    rec["name"] = [5, 1, 4, 2, 3]
    rec["dst_rank"] = [9, 8, 7, 6, 5]
    order = np.argsort(rec["start"], kind="stable")
    out = take_records(rec, order)
    assert out.dtype == dtype and out.shape == (5,)
    assert out["start"].tolist() == [10, 20, 30, 40, 50]
    assert out["name"].tolist() == [1, 2, 3, 4, 5] and out["dst_rank"].tolist() == [8, 6, 5, 7, 9]
    assert take_records(rec[::2], np.array([2, 0])).tolist() == rec[::2][[2, 0]].tolist()  # not contiguous
    assert len(take_records(rec[:0], np.zeros(0, np.int64))) == 0
