"""What the collectors hand to msprof: MsprofTensorInfo records (5 tensors each, 8 dims each)."""

import numpy as np

from geprof_nb.prof import rawdata
from geprof_nb.prof.collectors import encode_tensor_info


def test_tensor_info_continues_in_the_next_record_after_five_tensors():
    ops = [
        [(0, 2, 1, (8, 16))],  # one tensor
        [(0, 0, 1, (i + 1,)) for i in range(7)] + [(1, 0, 1, tuple(range(1, 12)))] * 5,  # 12 tensors
        [],  # no tensors: still one record
    ]
    rec = encode_tensor_info([10, 11, 12], [100, 101, 102], ops)
    assert rec.dtype == rawdata.TENSOR_INFO_DTYPE
    assert list(rec["connection_id"]) == [10, 11, 11, 11, 12]
    assert list(rec["op_name"]) == [100, 101, 101, 101, 102]
    assert list(rec["tensor_num"]) == [1, 5, 5, 2, 0]
    assert list(rec["shape"][0, 0]) == [8, 16, 0, 0, 0, 0, 0, 0] and rec["format"][0, 0] == 2
    assert [int(r["shape"][j, 0]) for r in rec[1:3] for j in range(5)] == [1, 2, 3, 4, 5, 6, 7, 1, 1, 1]
    assert list(rec["tensor_type"][2]) == [0, 0, 1, 1, 1] and list(rec["tensor_type"][3, :2]) == [1, 1]
    assert list(rec["shape"][3, 1]) == list(range(1, 9))  # cut to 8 dims
    assert not rec["shape"][3, 2:].any() and not rec["shape"][4].any()
    assert (rec["data_type"][1:4][rec["tensor_num"][1:4, None] > np.arange(5)] == 1).all()
