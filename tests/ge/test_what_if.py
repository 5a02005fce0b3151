"""The simulator's what-if knobs (issue 29): op speedups and removed ops act on the final (jittered)
durations, so the tasks they do not touch keep their exact durations."""

from __future__ import annotations

import numpy as np
import pytest

from geprof_nb import ge
from geprof_nb.ge import what_if
from helpers.geprof_testing import run_profiled_session


def _durations(tmp_path, name: str, change: what_if.OpChange):
    graph = ge.models.mlp()
    with what_if.applying(change):
        run = run_profiled_session(tmp_path / name, graph, steps=4)
    tasks = run.profile.task_time.reset_index(drop=True)
    tasks["duration_ns"] = np.rint(tasks["task_time(us)"].to_numpy() * 1000).astype(np.int64)
    matmuls = {n.name for n in graph.nodes if n.type.startswith("MatMul")}
    tasks["matmul"] = tasks["kernel_name"].isin(matmuls)
    return run, tasks


def test_speedup_halves_only_the_matching_ops(tmp_path):
    base_run, base = _durations(tmp_path, "base", what_if.OpChange())
    _, fast = _durations(tmp_path, "fast", what_if.OpChange.from_keywords(op_speedup={"MatMul*": 2}))
    assert len(base) == len(fast)
    mm = base["matmul"].to_numpy()
    assert mm.sum() > 0
    want = (base["duration_ns"].to_numpy()[mm] / 2 + 0.5).astype(np.int64)
    assert np.array_equal(fast["duration_ns"].to_numpy()[mm], want)
    other = ~mm & ~base["kernel_type"].astype(str).str.startswith("EVENT")
    assert np.array_equal(fast["duration_ns"].to_numpy()[other], base["duration_ns"].to_numpy()[other])


def test_remove_ops_gives_zero(tmp_path):
    _, gone = _durations(tmp_path, "gone", what_if.OpChange.from_keywords(remove_ops=["MatMul*"]))
    mm = gone["matmul"].to_numpy()
    assert mm.sum() > 0 and (gone["duration_ns"].to_numpy()[mm] == 0).all()


def test_bad_input_names_the_field():
    with pytest.raises(ValueError, match=r"^op_speedup\['MatMul\*'\]=0 is not valid; accepted: a finite number > 0"):
        what_if.OpChange.from_keywords(op_speedup={"MatMul*": 0})
    with pytest.raises(ValueError, match=r"^remove_ops='Cast' is not valid; accepted: a list"):
        what_if.OpChange.from_keywords(remove_ops="Cast")
