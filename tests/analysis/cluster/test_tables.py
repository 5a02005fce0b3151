"""Cross-rank tables of a simulated cluster: the slow rank, slow link, waits and stragglers
found are the faults that were injected, with the sizes they were injected with."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from geprof_nb.analysis import ClusterProfile
from geprof_nb.analysis.cluster import cross_rank as T
from geprof_nb.analysis.cluster.profile import ClusterTables
from geprof_nb.analysis.tables.breakdown import STEP_TRACE_TIME, step_periods
from geprof_nb.analysis.tables.communication import COMMUNICATION_TIME
from helpers.cluster_testing import FAULTS, LINK_FACTOR, SLOW_FACTOR, SLOW_LINK, SLOW_RANK, resnet, simulate_cluster

HCCS_GBPS = 90.0  # the Ascend910B preset's HCCS bandwidth per rank (decimal GB/s)


@pytest.fixture(scope="module")
def faulty(tmp_path_factory) -> ClusterProfile:
    """8 ranks, 3 steps: rank 3 is 1.3x slower, the link 5 -> 6 runs at half bandwidth."""
    return simulate_cluster(tmp_path_factory.mktemp("faulty"), FAULTS)


@pytest.fixture(scope="module")
def healthy(tmp_path_factory) -> ClusterProfile:
    return simulate_cluster(tmp_path_factory.mktemp("healthy"), None)


# ---------------------------------------------------------------------- loading
def test_the_cluster_root_loads_every_rank(faulty):
    assert isinstance(faulty, ClusterProfile)
    assert list(faulty.ranks) == list(range(8)) and faulty.world_size == 8
    for r, p in faulty.ranks.items():
        assert p.info["cluster"]["rank"] == r and p.info["cluster"]["world_size"] == 8


def test_rank_takes_an_integer_rank_the_cluster_has(tmp_path):
    one, two = object(), object()  # rank() hands back what the cluster holds
    cluster = ClusterProfile(tmp_path / "CLUSTER_20260101000000000_ABCDEFGH", {0: one, 1: two})
    assert cluster.rank(1) is two and cluster.rank(np.int64(0)) is one
    for bad in ("1", 1.0, True, None):
        with pytest.raises(TypeError) as err:
            cluster.rank(bad)
        assert str(err.value) == f"rank {bad!r} is not valid; accepted: an integer"
    with pytest.raises(KeyError) as err:
        cluster.rank(5)
    assert err.value.args[0] == "no rank 5 in CLUSTER_20260101000000000_ABCDEFGH; ranks: [0, 1]"


def test_engine_must_be_known(faulty):
    with pytest.raises(ValueError, match="unknown engine 'spark'; accepted: pandas, dask"):
        faulty.tables("spark")


# ------------------------------------------------------------ step tables
def test_cluster_step_trace_time_has_msprof_analyze_columns_rank_by_rank(faulty):
    cstt = faulty.cluster_step_trace_time
    assert list(cstt.columns) == ["Step", "Type", "Index", "Computing", "Communication(Not Overlapped)", "Overlapped",
                                  "Communication", "Free", "Stage", "Bubble",
                                  "Communication(Not Overlapped and Exclude Receive)", "Preparing"]
    assert (cstt["Type"] == "rank").all()
    assert cstt["Index"].tolist() == [r for r in range(8) for _ in range(3)]
    for r, p in faulty.ranks.items():
        mine = cstt[cstt["Index"] == r].drop(columns=["Type", "Index"]).reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, p.step_breakdown[STEP_TRACE_TIME[1:]], check_dtype=False)


def test_cluster_preparing_counts_from_each_steps_model_execute(faulty):
    """Preparing of every rank and step: its first device task minus the begin of the ModelExecute call
    that ran the step (torch_npu's first task - ProfilerStep start), as the cluster table carries it."""
    cstt = faulty.cluster_step_trace_time
    for r, p in faulty.ranks.items():
        calls = p.source.api_calls()
        execute = calls[(calls["api"] == "ModelExecute") & (calls["iteration"] > 0)].set_index("iteration")["begin"]
        rows = p.source.op_rows()
        first = pd.Series(rows.start_ns).groupby(rows.iteration).min()
        expected = [(int(first[s]) - int(execute[s])) / 1000 for s in (1, 2, 3)]
        assert cstt[cstt["Index"] == r]["Preparing"].tolist() == expected and min(expected) > 0


def test_the_slowed_rank_is_the_slow_rank_by_its_factor(faulty):
    sr = faulty.slow_ranks
    assert list(sr.columns) == T.SLOW_RANKS
    assert sr["Rank"].iloc[0] == SLOW_RANK and sr["Slow"].tolist() == [True] + [False] * 7
    slow = sr.iloc[0]
    # its kernels take 1.3x as long, less their fixed launch cost: Computing is ~1.27x the median rank's
    assert slow["Computing Ratio"] == pytest.approx(SLOW_FACTOR, abs=0.05)
    assert slow["Bound"] == "Computing" and slow["Z-Score"] > 2
    assert slow["Own Time(us)"] == pytest.approx(slow["Computing(us)"] + slow["Free(us)"])
    assert slow["Deviation(us)"] == pytest.approx(slow["Own Time(us)"] - sr["Own Time(us)"].median())
    # ... while every other rank, the sender of the slow link too, is within 1% of the median
    assert (sr["Own Time Ratio"].iloc[1:] - 1).abs().max() < 0.01
    # all ranks' steps take as long (collectives synchronise them): step time alone would not tell
    assert sr["Step Time(us)"].max() / sr["Step Time(us)"].min() < 1.01


def test_slow_ranks_says_it_ranks_by_own_time():
    for doc in (ClusterProfile.slow_ranks.__doc__, ClusterTables.slow_ranks.__doc__):
        assert doc.startswith("Ranks by own time (Computing + Free per step: step time minus the communication no "
                              "compute\n        hides), slowest first")
        assert "collective wait" not in doc


def test_the_fast_ranks_wait_what_the_slow_rank_is_late(faulty):
    wait = faulty.rank_step_wait
    assert list(wait.columns) == T.RANK_STEP_WAIT and len(wait) == 8 * 3
    st = faulty.stragglers
    late = st[(st["Last Rank"] == SLOW_RANK) & (st["Spread(us)"] > 0)]
    assert len(late) and late["Late By(us)"].min() > 100  # it is last by hundreds of us at every step
    extra = faulty.slow_ranks.set_index("Rank")["Computing(us)"]
    for step in (1, 2, 3):
        w = wait[wait["Step"] == step].set_index("Rank")["Wait Time(us)"]
        fast = w.drop([SLOW_RANK, SLOW_LINK[0]])  # the slow link's sender waits less: its send takes longer
        waited = fast - w[SLOW_RANK]
        lateness = late[late["Iteration ID"] == step]["Late By(us)"].sum()
        assert waited.to_numpy() == pytest.approx(np.full(len(fast), lateness), rel=0.05)
        # the slow rank's extra compute is what makes it late: at each collective by its extra compute so
        # far, at most all of it (the waits at two collectives each count it from the step's start, so
        # their sum can exceed it)
        per_collective = late[late["Iteration ID"] == step]["Late By(us)"]
        assert per_collective.max() <= extra[SLOW_RANK] - extra.drop(SLOW_RANK).median()


def test_rank_step_matrices(faulty):
    stage = faulty.rank_step("Stage")
    assert stage.shape == (8, 3) and list(stage.index) == list(range(8)) and list(stage.columns) == [1, 2, 3]
    cstt = faulty.cluster_step_trace_time
    assert stage.loc[2, 3] == cstt[(cstt["Index"] == 2) & (cstt["Step"] == 3)]["Stage"].iloc[0]
    wait = faulty.rank_step("Wait Time(us)")
    assert wait.loc[SLOW_RANK].max() < wait.drop([SLOW_RANK, SLOW_LINK[0]]).min().min()
    with pytest.raises(KeyError, match="no rank x step metric 'Latency'"):
        faulty.rank_step("Latency")


# ------------------------------------------------------------ communication tables
def test_communication_matrix_is_the_ring_with_its_bandwidths(faulty):
    m = faulty.communication_matrix
    assert list(m.columns) == T.COMMUNICATION_MATRIX
    assert list(zip(m["Src Rank"], m["Dst Rank"])) == [(r, (r + 1) % 8) for r in range(8)]
    assert set(m["Link Type"]) == {"HCCS"} and set(m["Transport Type"]) == {"SDMA"}
    assert m["Size(Byte)"].nunique() == 1  # a ring moves the same bytes over every link
    bw = m.set_index(["Src Rank", "Dst Rank"])["Bandwidth(GB/s)"]
    assert bw[SLOW_LINK] == pytest.approx(HCCS_GBPS * LINK_FACTOR, rel=0.01)
    assert bw.drop(SLOW_LINK).to_numpy() == pytest.approx(np.full(7, HCCS_GBPS), rel=0.01)
    # the totals are the senders' Memcpy sub-tasks
    tasks = faulty.rank(2).hccl_tasks
    sent = tasks[(tasks["Task Name"] == "Memcpy") & (tasks["Dst Rank"] == 3)]
    row = m[m["Src Rank"] == 2].iloc[0]
    assert row["Tasks"] == len(sent) and row["Size(Byte)"] == sent["Size(Byte)"].sum()
    assert row["Transit Time(us)"] == pytest.approx(sent["Duration(us)"].sum())


def test_slow_links_is_the_degraded_link(faulty):
    links = faulty.slow_links
    assert list(links.columns) == T.SLOW_LINKS
    assert len(links) == 1 and (links["Src Rank"].iloc[0], links["Dst Rank"].iloc[0]) == SLOW_LINK
    row = links.iloc[0]
    assert row["Bandwidth Ratio"] == pytest.approx(LINK_FACTOR, abs=0.01)
    assert row["Median Bandwidth(GB/s)"] == pytest.approx(HCCS_GBPS, rel=0.01)
    assert row["Time Lost(us)"] == pytest.approx(row["Transit Time(us)"] * (1 - LINK_FACTOR), rel=0.01)


def test_communication_time_stacks_every_rank(faulty):
    ct = faulty.communication_time
    assert list(ct.columns) == ["Rank", *COMMUNICATION_TIME]
    for r, p in faulty.ranks.items():
        mine = ct[ct["Rank"] == r].drop(columns="Rank").reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, p.communication_time, check_dtype=False)


def test_stragglers_are_computed_from_arrivals(faulty):
    st = faulty.stragglers
    ct = faulty.communication_time
    assert list(st.columns) == T.STRAGGLERS
    assert len(st) == ct.groupby(["Op Name", "Iteration ID"]).ngroups and (st["Ranks"] == 8).all()
    row = st[st["Spread(us)"] > 0].iloc[0]
    arrivals = ct[(ct["Op Name"] == row["Op Name"]) & (ct["Iteration ID"] == row["Iteration ID"])]
    start = arrivals.set_index("Rank")["Start Timestamp(us)"]
    assert row["Last Rank"] == start.idxmax() == SLOW_RANK and row["First Rank"] == start.idxmin()
    assert row["Late By(us)"] == pytest.approx(start.max() - start.median())
    assert row["Wait Caused(us)"] == pytest.approx((start.max() - start).sum())
    # every collective whose arrivals differ waits for the slow rank
    assert set(st[st["Spread(us)"] > 0]["Last Rank"]) == {SLOW_RANK}


def test_multi_node_links_are_judged_against_their_own_type(tmp_path):
    """16 ranks on two servers of 8: HCCS inside, RoCE between them; RoCE is slower by design."""
    c = simulate_cluster(tmp_path, None, ranks=16, steps=2)
    m = c.communication_matrix
    kinds = set(zip(m["Link Type"], m["Transport Type"]))
    assert ("HCCS", "SDMA") in kinds and ("ROCE", "RDMA") in kinds
    inter = m[m["Link Type"] == "ROCE"]
    assert ((inter["Src Rank"] // 8) != (inter["Dst Rank"] // 8)).all()
    assert inter["Bandwidth(GB/s)"].max() < m[m["Link Type"] == "HCCS"]["Bandwidth(GB/s)"].min()
    assert c.slow_links.empty and not c.slow_ranks["Slow"].any()


# ------------------------------------------------------------ healthy and other faults
def test_a_healthy_cluster_has_no_slow_rank_link_or_finding(healthy):
    assert not healthy.slow_ranks["Slow"].any()
    assert (healthy.slow_ranks["Own Time Ratio"] - 1).abs().max() < 0.01
    assert healthy.slow_links.empty
    assert healthy.advise().empty


def test_a_stalling_data_loader_makes_a_rank_slow_by_free_time(tmp_path):
    c = simulate_cluster(tmp_path, {"loader_stall": {"every": 1, "us": 3000, "ranks": [2]}}, steps=4,
                         graph=resnet(8, batch_size=8, image_size=112))
    sr = c.slow_ranks
    top = sr.iloc[0]
    assert top["Rank"] == 2 and top["Slow"] and top["Bound"] == "Free"
    # the stall before every step is Free time of every whole step period; the first step's window starts
    # at its own begin (there is no previous end), after the stall, so the means leave it out, as compare
    # and Profile.advise do: 3 steps of 4, each 3,000 us longer (it was averaged in: 2,250 us a step)
    assert sr["Steps"].tolist() == [3] * 8
    assert top["Free(us)"] - sr["Free(us)"].iloc[1:].median() == pytest.approx(3000, rel=0.02)
    assert top["Computing Ratio"] == pytest.approx(1.0, abs=0.01)
    periods = step_periods(c.rank(2).step_breakdown, c.rank(2).source.step_bounds())
    assert top["Free(us)"] == pytest.approx(periods["Free"].mean())
    # the others wait that long for it at every step: the finding puts the whole stall at stake
    finding = c.advise().set_index("Rule").loc["Slow rank"]
    assert finding["Time at stake (us)"] == pytest.approx(3000, rel=0.02)


# ---------------------------------------------------------------- pure functions
def _ct(rows: list[tuple]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["Rank", "Op Name", "OP Type", "Iteration ID", "Start Timestamp(us)"])
    for c in COMMUNICATION_TIME[4:]:
        frame[c] = 0.0
    return frame


def test_stragglers_keep_microseconds_of_1e15_timestamps_and_break_ties_by_rank():
    t0 = 1.767225600e15
    rows = [(r, "hcom_allReduce__oup_0_1", "hcom_allReduce_", 1, t0 + (250.5 if r == 6 else 0.0)) for r in range(1024)]
    rows += [(r, "hcom_allReduce__oup_1_1", "hcom_allReduce_", 1, t0 + 900.0) for r in (4, 2)]
    st = T.stragglers(_ct(rows))
    first, second = st.iloc[0], st.iloc[1]
    assert first["Last Rank"] == 6 and first["Late By(us)"] == 250.5 and first["Wait Caused(us)"] == 250.5 * 1023
    assert second["Last Rank"] == 2 and second["First Rank"] == 2 and second["Spread(us)"] == 0.0


def test_collectives_seen_on_one_rank_are_no_stragglers():
    st = T.stragglers(_ct([(0, "hcom_allReduce__oup_0_1", "hcom_allReduce_", 1, 1e15)]))
    assert st.empty and list(st.columns) == T.STRAGGLERS


def test_empty_inputs_give_empty_tables_with_their_columns():
    empty = pd.DataFrame(columns=["Rank", *STEP_TRACE_TIME])
    assert list(T.cluster_step_trace_time(empty).columns) == T.CLUSTER_STEP_TRACE_TIME
    tasks = pd.DataFrame({c: pd.Series([], dtype=d) for c, d in (
        ("Rank", np.int64), ("Task Name", str), ("Src Rank", np.int64), ("Dst Rank", np.int64),
        ("Transport Type", str), ("Link Type", str), ("Size(Byte)", np.int64), ("Duration(us)", np.float64))})
    matrix = T.communication_matrix(T.link_totals(tasks))
    assert matrix.empty and list(matrix.columns) == T.COMMUNICATION_MATRIX
    assert list(T.slow_links(matrix).columns) == T.SLOW_LINKS
