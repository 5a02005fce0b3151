"""Model ids are the process's, as GE's ``ModelManager::GenModelId`` (``++max_model_id_``) makes them:
a graph loaded again in one collection (remove_graph + add_graph, GEFinalize + GEInitialize, either
under the C API) gets a new id, so its iterations, which restart at 1, never fold into the earlier
load's (model, iteration) rows.  Connection ids stay unique in the run across a re-initialised GE.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

import geprof_nb
from geprof_nb import ge
from geprof_nb.ge.runtime import MODEL_IDS

D = ge.ProfDataTypeConfig
STEPS = 3
BATCHES = (8, 16)


def mlp(batch: int) -> ge.Graph:
    return ge.models.mlp(batch_size=batch, training=True)


def kernels_of(sess: ge.Session, graph_id: int) -> int:
    """Op tasks (op_summary rows) one step of the loaded graph has."""
    return sum(1 for k in sess.model(graph_id).table.kernels if k is not None)


def run_twice(sess: ge.Session) -> tuple[int, int]:
    """Run graph 1 for STEPS steps: (its model id, its op tasks per step)."""
    for _ in range(STEPS):
        assert sess.run_graph(1) == ge.SUCCESS
    return sess.model(1).model_id, kernels_of(sess, 1)


def check_two_loads(p: geprof_nb.Profile, loads: list[tuple[int, int]]) -> None:
    """Each load's STEPS steps are their own step_trace rows and their own op rows (its batch's shapes)."""
    (m1, k1), (m2, k2) = loads
    assert m2 == m1 + 1
    st = p.step_trace
    assert list(zip(st["Model ID"], st["Iteration ID"])) == [(m, i) for m in (m1, m2) for i in range(1, STEPS + 1)]
    assert st["Iteration Time(us)"].notna().all()
    per_step = pd.crosstab(p.op_summary["Model ID"], p.iteration_of_ops)
    assert per_step.loc[m1].tolist() == [k1] * STEPS and per_step.loc[m2].tolist() == [k2] * STEPS
    assert k1 == k2 == 41  # the MLP's op tasks per step, whatever the batch
    first_matmul = p.op_summary[p.op_summary["Op Name"] == "dense_0/MatMulV2"]
    shapes = first_matmul.groupby("Model ID", observed=True)["Input Shapes"].agg(lambda s: set(s.astype(str)))
    assert shapes.to_dict() == {m1: {"8,784;784,1024"}, m2: {"16,784;784,1024"}}
    assert not [n for n in p.notes if n.startswith("step_trace:")]


def test_a_graph_removed_and_added_again_in_one_run_is_a_new_model(tmp_path: Path):
    loads = []
    with ge.simulation_settings(clock_mode="virtual"):
        with geprof_nb.profile(output=str(tmp_path)) as run:
            sess = ge.Session()
            for batch in BATCHES:
                assert sess.add_graph(1, mlp(batch)) == ge.SUCCESS
                loads.append(run_twice(sess))
                assert sess.remove_graph(1) == ge.SUCCESS
    assert run.steps == 2 * STEPS
    check_two_loads(run.profile, loads)


def test_ge_initialised_again_in_one_run_keeps_counting_model_ids(tmp_path: Path):
    loads = []
    with geprof_nb.profile(output=str(tmp_path)) as run:
        for batch in BATCHES:
            assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
            sess = ge.Session()
            assert sess.add_graph(1, mlp(batch)) == ge.SUCCESS
            loads.append(run_twice(sess))
            assert ge.GEFinalize() == ge.SUCCESS
    check_two_loads(run.profile, loads)


def test_the_c_api_across_a_re_initialised_ge_keeps_the_loads_apart(tmp_path: Path):
    loads = []
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    assert ge.aclgrphProfInit(str(tmp_path)) == ge.SUCCESS
    config = ge.aclgrphProfCreateConfig([0], ge.ProfilingAicoreMetrics.kAicorePipeUtilization,
                                        D.kProfTaskTime | D.kProfTrainingTrace)
    assert ge.aclgrphProfStart(config) == ge.SUCCESS
    for batch in BATCHES:
        if loads:
            assert ge.GEFinalize() == ge.SUCCESS and ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
        sess = ge.Session()
        assert sess.add_graph(1, mlp(batch)) == ge.SUCCESS
        loads.append(run_twice(sess))
    assert ge.aclgrphProfStop(config) == ge.SUCCESS and ge.aclgrphProfFinalize() == ge.SUCCESS
    assert ge.aclgrphProfDestroyConfig(config) == ge.SUCCESS
    check_two_loads(geprof_nb.load(tmp_path), loads)


def test_model_ids_never_come_back_after_unloads():
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    sess = ge.Session()
    ids = []
    for graph_id in (1, 2, 1, 2):
        assert sess.add_graph(graph_id, mlp(8)) == ge.SUCCESS and sess.run_graph(graph_id) == ge.SUCCESS
        ids.append(sess.model(graph_id).model_id)
        assert sess.remove_graph(graph_id) == ge.SUCCESS
    assert ids == [1, 2, 3, 4]  # the fixture restarts the counter per test, as a new process would


def test_a_repeated_model_and_iteration_is_noted_not_folded_silently(tmp_path: Path):
    """Data where one model id came back with its iterations restarting (not what GE writes: the counter
    is restarted here by hand, as two processes' records in one directory would be) says so in the notes."""
    with ge.simulation_settings(clock_mode="virtual"):
        with geprof_nb.profile(output=str(tmp_path)) as run:
            sess = ge.Session()
            for batch in BATCHES:
                MODEL_IDS.restart()
                assert sess.add_graph(1, mlp(batch)) == ge.SUCCESS
                run_twice(sess)
                assert sess.remove_graph(1) == ge.SUCCESS
    p = run.profile
    assert len(p.step_trace) == STEPS  # the pairs fold: the premise of the note
    assert [n for n in p.notes if n.startswith("step_trace:")] == [
        f"step_trace: {STEPS} (Model ID, Iteration ID) pairs were recorded by more than one step (model 1 "
        "iteration 1: 2 model starts), a model id that came back with its iterations restarting: each pair's "
        "row and op rows fold those steps together"]
