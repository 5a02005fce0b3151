"""SubTaskLayout (all collectives of a model laid out together) gives, collective by collective,
exactly what ring_subtasks and SubTasks.records give for each one alone."""

import numpy as np
import pytest

from geprof_nb.ge import hccl

COLLECTIVES = [("HcomAllReduce", 25_000_000, 8, 3, 0), ("HcomAllGather", 1_000_000, 8, 3, 0),
               ("HcomBroadcast", 4_000_000, 8, 3, 5), ("HcomReduceScatter", 777_777, 8, 3, 0),
               ("HcomAllReduce", 123, 1, 0, 0), ("HcomAllReduce", 50_000_000, 16, 9, 0)]
NAME_IDS = {n: 1000 + i for i, n in enumerate(("Notify_Record", "Notify_Wait", "Memcpy", "Reduce_Inline", "RDMASend"))}


@pytest.mark.parametrize("k", [1, 7, 64])
def test_layout_matches_ring_subtasks_collective_by_collective(k):
    links = hccl.Links()
    layout = hccl.SubTaskLayout(COLLECTIVES, links)
    rng = np.random.default_rng(k)
    ideal = np.asarray([hccl.collective_duration_ns(op, nb, n, links) for op, nb, n, _, _ in COLLECTIVES])
    # executions shorter and longer than ideal (scaled sub-tasks vs a longer first Notify_Wait)
    dur = np.rint(ideal * rng.uniform(0.5, 1.5, (k, len(COLLECTIVES)))).astype(np.int64)
    start = rng.integers(0, 10**12, (k, len(COLLECTIVES)))
    iteration = np.arange(1, k + 1)
    conn = np.arange(40, 40 + len(COLLECTIVES))
    streams = np.arange(2, 2 + len(COLLECTIVES))
    template = layout.template(conn, NAME_IDS, streams)
    assert template.shape == (layout.sizes.sum(),) and (template["start"] == 0).all()
    rec = layout.records(start, dur, iteration, template).reshape(k, -1)  # execution by execution
    assert rec.shape == (k, layout.sizes.sum())
    blocks = [rec[:, lo:lo + n].ravel() for lo, n in zip(layout.first, layout.sizes)]
    for i, (op, nb, n, r, root) in enumerate(COLLECTIVES):
        sub = hccl.ring_subtasks(op, nb, n, r, links, start[:, i], dur[:, i], root_rank=root)
        want = sub.records(int(conn[i]), iteration, NAME_IDS, int(streams[i]))
        assert blocks[i].dtype == want.dtype and blocks[i].tobytes() == want.tobytes()
