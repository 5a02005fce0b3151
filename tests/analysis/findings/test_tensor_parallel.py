"""The advisor's exposed tensor-parallel communication: the tp group's collectives that no computation hides,
derived by hand from the op rows and the hccl_op records, for a rank and for the cluster."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from geprof_nb import ge
from geprof_nb.analysis.findings.advisor import tensor_parallel_exposure
from geprof_nb.analysis.rundir import RunDir
from geprof_nb.analysis.tables.collective_groups import exposed_group_time
from helpers.llm_runs import run_llm

RULE = "Exposed tensor-parallel communication"


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory):
    """tiny-llama at tp2 pp2 dp2, 4 micro-batches, 2 steps."""
    return run_llm(tmp_path_factory.mktemp("hybrid"), parallel=ge.Parallel(tp=2, pp=2, dp=2, micro_batches=4),
                   seq_len=256)


def test_exposed_time_is_the_groups_time_outside_computation():
    # iteration 1: compute [0, 10] and [20, 30]; tp [5, 15] (5 us exposed) and [25, 28] (hidden); a dp
    # collective [40, 50] is no tp one and hides nothing. Iteration 2: two overlapping tp ones [0, 4], [2, 6]
    # beside compute [5, 9]: exposed [0, 5]
    it = np.array([1, 1, 1, 1, 1, 2, 2, 2])
    start = np.array([0, 20, 5, 25, 40, 0, 2, 5], float)
    end = np.array([10, 30, 15, 28, 50, 4, 6, 9], float)
    comm = np.array([0, 0, 1, 1, 1, 1, 1, 0], bool)
    tp = np.array([0, 0, 1, 1, 0, 1, 1, 0], bool)
    out = exposed_group_time(it, start, end, comm, tp)
    assert out.to_dict("list") == {"Iteration": [1, 2], "Exposed(us)": [5.0, 5.0], "Time(us)": [13.0, 8.0],
                                   "Count": [2, 2]}


def _by_hand(profile) -> tuple[float, float, int]:
    """Mean per step of the tp collectives' time with no computation running, their time and count: every
    elementary segment between task boundaries tested against every task."""
    run = RunDir(profile.path)
    rec, names = run.load("hccl_op", profile.device_id), run.hashes
    groups = profile.info["parallel"]["parallel_group_info"]
    tp_ids = {int(c) for c, g in zip(rec["connection_id"], rec["group"]) if groups[names[int(g)]]["group_name"] == "tp"}
    rows = profile.source.op_rows()
    ops = rows.frame
    start = (rows.start_ns - rows.start_ns.min()) / 1000.0
    end = start + ops["Task Duration(us)"].to_numpy(float)
    is_tp = np.isin(rows.connection_id, list(tp_ids))
    is_comm = ops["OP Type"].str.startswith("Hcom").to_numpy()
    exposed, time, count = [], [], []
    for it in np.unique(rows.iteration):
        mine = rows.iteration == it
        cuts = np.unique(np.r_[start[mine], end[mine]])
        mid, width = (cuts[1:] + cuts[:-1]) / 2, np.diff(cuts)

        def covered(sel):
            return ((start[sel][None, :] <= mid[:, None]) & (end[sel][None, :] > mid[:, None])).any(axis=1)

        exposed.append(float(width[covered(mine & is_tp) & ~covered(mine & ~is_comm)].sum()))
        time.append(float((end - start)[mine & is_tp].sum()))
        count.append(int((mine & is_tp).sum()))
    return float(np.mean(exposed)), float(np.mean(time)), int(np.mean(count))


def test_a_ranks_finding_is_its_tp_collectives_outside_computation(hybrid):
    rank0 = hybrid.rank(0)
    exposed, time, count = _by_hand(rank0)
    assert count == 68  # stage 0: 4 micro-batches x (embedding 1 + 4 layers x 2 forward, 4 x 2 backward)
    groups = pd.Series(rank0.source.collective_group_kinds()).value_counts().to_dict()
    assert groups == {"": len(rank0.op_summary) - 2 * 77, "tp": 2 * 68, "pp": 2 * 8, "dp": 2}
    found = rank0.advise().set_index("Rule").loc[RULE]
    step = rank0.step_split.length_us
    assert found["Time at stake (us)"] == pytest.approx(exposed, abs=2e-3) and 0 < exposed <= step
    assert found["Share of step (%)"] == pytest.approx(100 * exposed / step, abs=0.01)
    assert f"68 tp collectives per step taking {time:,.1f} us" in found["Evidence"]
    assert "tp group ranks 0, 1 (one server: HCCS)" in found["Evidence"]
    assert found["Finding"].startswith(f"{exposed:,.1f} us per step") and "on rank 0" in found["Finding"]


def test_the_cluster_names_the_stage_that_hides_least(hybrid):
    stages = {r: tensor_parallel_exposure(hybrid.rank(r)).exposed_us for r in (0, 4)}  # tp = dp = 0 of each stage
    worst = max(stages, key=stages.get)
    assert stages[worst] == pytest.approx(_by_hand(hybrid.rank(worst))[0], abs=2e-3)
    findings = hybrid.advise()
    (row,) = findings[findings["Rule"] == RULE].to_dict("records")
    assert row["Time at stake (us)"] == pytest.approx(stages[worst], abs=2e-3)
    assert f"on rank {worst} (pipeline stage {worst // 4}, the stage that hides least)" in row["Finding"]


def test_a_run_without_tensor_parallelism_has_no_such_finding(tmp_path):
    single = run_llm(tmp_path, seq_len=256)
    assert tensor_parallel_exposure(single) is None
    assert RULE not in set(single.advise()["Rule"])
