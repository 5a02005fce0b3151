"""The critical path across ranks: a collective's wait leads to the rank that arrived last (issue 29)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from geprof_nb import ge
from geprof_nb.analysis.timing.cluster_path import cluster_path, collective_keys, task_groups
from geprof_nb.analysis.timing.dependency_graph import ASSUMPTIONS_SIMULATED, Tasks, step_graphs
from helpers.cluster_testing import simulate_cluster


def _rank(names: list[str], types: list[str], start: list[int], end: list[int], step: tuple[int, int]):
    """One rank's tasks on one stream and its step ``[begin, end)`` as (Tasks, graphs)."""
    n = len(names)
    tasks = Tasks(np.array(names, object), np.array(["N/A"] * n, object), np.array(types, object),
                  np.zeros(n, np.int64), np.arange(1, n + 1), np.array(start, np.int64), np.array(end, np.int64),
                  np.zeros(n, bool), False, ASSUMPTIONS_SIMULATED)
    bounds = pd.DataFrame({"step": [1], "begin": [step[0]], "end": [step[1]]})
    return tasks, step_graphs(tasks, bounds)


def _rows(path: pd.DataFrame) -> list[tuple]:
    return list(path[["rank", "start", "end", "kind", "op_name"]].astype({"kind": str}).itertuples(index=False,
                                                                                                     name=None))


def test_a_late_rank_at_an_allreduce_takes_the_path_before_it():
    # rank 0: A 0-10, AllReduce 10-60 (it waited 30 of its 50 ns for rank 1), B 60-100; its step ends last (100).
    # rank 1: launched at 5 (host 0-5), C 5-40 (its compute makes it late), AllReduce 40-60, D 60-90, step ends 95
    r0 = _rank(["A", "ar", "B"], ["KERNEL_AICORE", "HCCL", "KERNEL_AICORE"], [0, 10, 60], [10, 60, 100], (0, 100))
    r1 = _rank(["C", "ar", "D"], ["KERNEL_AICORE", "HCCL", "KERNEL_AICORE"], [5, 40, 60], [40, 60, 90], (0, 95))
    path = cluster_path({0: r0, 1: r1})
    # from rank 0's end: B; the AllReduce from rank 1's arrival (40) on; then rank 1: C and its launch
    assert _rows(path) == [(1, 0, 5, "host", "C"), (1, 5, 40, "compute", "C"), (0, 40, 60, "communication", "ar"),
                           (0, 60, 100, "compute", "B")]
    assert path["duration"].sum() == 100  # rank 0's step, begin to end
    assert "arrived last" in path.attrs["assumptions"]
    # rank 1 is the one ending last and arriving last: nothing to jump to, its own path
    r1_last = _rank(["C", "ar", "D"], ["KERNEL_AICORE", "HCCL", "KERNEL_AICORE"], [5, 40, 60], [40, 60, 120],
                    (0, 120))
    assert _rows(cluster_path({0: r0, 1: r1_last})) == [(1, 0, 5, "host", "C"), (1, 5, 40, "compute", "C"),
                                                        (1, 40, 60, "communication", "ar"),
                                                        (1, 60, 120, "compute", "D")]


def test_collectives_match_by_name_and_occurrence_in_the_step():
    tasks, (g,) = _rank(["ar", "x", "ar", "bc"], ["HCCL", "KERNEL_AIVEC", "HCCL", "HCCL"], [0, 10, 20, 30],
                        [10, 20, 30, 40], (0, 40))
    assert collective_keys(tasks, g) == {0: ("", "ar", 0), 2: ("", "ar", 1), 3: ("", "bc", 0)}
    groups = np.array(["g0", "", "g1", "g0"], object)  # per task of the run; the second "ar" in another group
    assert collective_keys(tasks, g, groups) == {0: ("g0", "ar", 0), 2: ("g1", "ar", 0), 3: ("g0", "bc", 0)}


def test_a_ranks_first_arrival_at_the_second_allreduce_jumps_to_its_own_occurrence():
    # two AllReduces of the same name: rank 1 is late only at the second one (arrives at 70, rank 0 at 50)
    r0 = _rank(["A", "ar", "B", "ar", "E"], ["KERNEL_AICORE", "HCCL", "KERNEL_AICORE", "HCCL", "KERNEL_AICORE"],
               [0, 10, 30, 50, 90], [10, 30, 50, 90, 100], (0, 100))
    r1 = _rank(["A", "ar", "F", "ar", "E"], ["KERNEL_AICORE", "HCCL", "KERNEL_AICORE", "HCCL", "KERNEL_AICORE"],
               [0, 10, 30, 70, 90], [10, 30, 70, 90, 98], (0, 98))
    assert _rows(cluster_path({0: r0, 1: r1})) == [
        (1, 0, 10, "compute", "A"), (1, 10, 30, "communication", "ar"), (1, 30, 70, "compute", "F"),
        (0, 70, 90, "communication", "ar"), (0, 90, 100, "compute", "E")]


def test_collectives_of_another_communicator_are_not_waited_for():
    # TP groups {0, 1} and {2}: the same op name in both; rank 2 starts its own "ar" last of all (at 50), but
    # rank 0 waited only for rank 1 (its communicator's other rank, arriving at 30)
    kinds = ["KERNEL_AICORE", "HCCL", "KERNEL_AICORE"]
    r0 = _rank(["A", "ar", "B"], kinds, [0, 10, 60], [10, 60, 100], (0, 100))
    r1 = _rank(["C", "ar", "D"], kinds, [0, 30, 60], [30, 60, 90], (0, 90))
    r2 = _rank(["E", "ar", "F"], kinds, [0, 50, 70], [50, 70, 80], (0, 80))
    groups = {0: np.array(["", "g0", ""], object), 1: np.array(["", "g0", ""], object),
              2: np.array(["", "g1", ""], object)}
    assert _rows(cluster_path({0: r0, 1: r1, 2: r2}, groups=groups)) == [
        (1, 0, 30, "compute", "C"), (0, 30, 60, "communication", "ar"), (0, 60, 100, "compute", "B")]
    # without the communicators the name alone matches rank 2's too, which arrived last
    assert _rows(cluster_path({0: r0, 1: r1, 2: r2}))[:2] == [(2, 0, 50, "compute", "E"),
                                                              (0, 50, 60, "communication", "ar")]


@pytest.fixture(scope="module")
def stalled(tmp_path_factory):
    # 8-rank data parallel; rank 5's data loader stalls 3 ms every step: the others wait for it in the AllReduce
    graph = ge.models.mlp(batch_size=16, in_features=256, hidden=(512, 512), world_size=8)
    return simulate_cluster(tmp_path_factory.mktemp("stall"), faults={"loader_stall": {"every": 1, "us": 3000,
                                                                                       "ranks": [5]}},
                            ranks=8, steps=2, graph=graph, task_trace="on")


def test_in_a_dp_run_the_path_goes_to_the_stalled_ranks_work(stalled):
    path = stalled.critical_path()
    assert set(path["iteration"]) == {1, 2}
    for it, seg in path.groupby("iteration"):
        bounds = {r: p.source.step_bounds().set_index("step").loc[it] for r, p in stalled.ranks.items()}
        last = max(bounds, key=lambda r: (bounds[r]["end"], -r))
        assert seg["duration"].sum() == bounds[last]["end"] - bounds[last]["begin"]  # tiles the last rank's step
        assert seg["start"].iloc[0] == bounds[last]["begin"] and seg["end"].iloc[-1] == bounds[last]["end"]
        assert (seg["start"].to_numpy()[1:] == seg["end"].to_numpy()[:-1]).all()
        # before the AllReduce's transfer, the path is rank 5's: its stalled launch and its forward / backward
        ar = seg[seg["op_name"].astype(str).str.contains("HcomAllReduce")]
        before = seg[seg["end"] <= ar["start"].min()]
        assert set(before["rank"]) == {5}
        own = stalled.rank(5).critical_path(it)
        own_before = own[own["end"] <= own.loc[own["op_name"].astype(str).str.contains("HcomAllReduce"),
                                                 "start"].min()]
        compute = before[before["kind"] == "compute"]
        assert len(compute) == len(own_before[own_before["kind"] == "compute"]) > 10
        assert compute["duration"].sum() == own_before.loc[own_before["kind"] == "compute", "duration"].sum()
        assert before.loc[before["kind"] == "host", "duration"].sum() >= 3_000_000  # the 3 ms stall


def test_a_simulated_runs_collectives_name_their_communicator(stalled):
    tasks, _ = stalled.rank(0).step_graphs
    groups = task_groups(stalled.rank(0), tasks)
    coll = tasks.task_type.astype(str) == "HCCL"
    assert coll.sum() == 2 and (groups[coll] != "").all() and (groups[~coll] == "").all()  # an AllReduce a step
    assert set(groups[coll]) == set(stalled.rank(5).source.collective_groups())  # the DP group is the world
