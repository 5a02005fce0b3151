"""``ge.mstx``: user markers and ranges, collected with msproftx on (one bit test when off) and shown
as msprof's ``msprof_tx`` summary (reference §4.5).
"""

from __future__ import annotations

import json
import os
import threading
import warnings
from pathlib import Path

import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.ge import ge_prof
from geprof_nb.prof.clock import clock
from helpers.geprof_testing import TS_TOL_US

MSPROF_TX_HEADER = ("Device_id,pid,tid,category,event_type,payload_type,payload_value,Start_time(us),End_time(us),"
                    "message_type,message,domain,Device Start_time(us),Device End_time(us)").split(",")


@pytest.fixture(autouse=True)
def _close_api_mode():
    """A failed test must not leave aclgrphProfInit's state behind for the next one."""
    yield
    if ge_prof.api_mode_active():
        ge.aclgrphProfFinalize()


def profiled(out: Path, **fields: str) -> None:
    opts = {"output": str(out), **fields}
    assert ge.GEInitialize({"geprof.clock": "virtual", "ge.exec.profilingMode": "1",
                            "ge.exec.profilingOptions": json.dumps(opts)}) == ge.SUCCESS


def session() -> ge.Session:
    s = ge.Session()
    assert s.add_graph(1, ge.models.mlp(batch_size=4, in_features=16, hidden=(16,))) == ge.SUCCESS
    return s


def test_off_costs_nothing_and_records_nothing(tmp_path):
    profiled(tmp_path, msproftx="off")
    s = session()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ge.mstx.range_start("load") == 0
        assert ge.mstx.mark("hello") is None
        with ge.mstx.range("step") as rid:
            assert rid == 0
            assert s.run_graph(1) == ge.SUCCESS
        ge.mstx.range_end(0)  # the id an "off" range_start returned: no warning
    assert ge.mstx._open == {}
    ge.GEFinalize()
    p = geprof_nb.load(tmp_path)
    assert p.msprof_tx.empty and list(p.msprof_tx.columns) == MSPROF_TX_HEADER
    assert not list(p.path.rglob("mstx.*.npy"))
    assert len(p.op_summary) > 0  # the rest of the run was collected


def test_without_any_profiling_range_start_returns_zero():
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    assert ge.mstx.range_start("x") == 0 and ge.mstx.mark("y") is None


def test_marks_and_ranges_become_msprof_tx_rows(tmp_path):
    profiled(tmp_path, msproftx="on")
    s = session()
    t_mark = clock.now_ns()
    ge.mstx.mark("hello")
    with ge.mstx.range("step 1", domain="train") as rid:
        assert rid > 0
        assert s.run_graph(1) == ge.SUCCESS
    rid2 = ge.mstx.range_start("wait")
    assert rid2 > 0 and rid2 != rid
    t0 = clock.now_ns()
    clock.spend(2_000)
    ge.mstx.range_end(rid2)
    ge.GEFinalize()

    p = geprof_nb.load(tmp_path)
    tx = p.msprof_tx
    assert list(tx.columns) == MSPROF_TX_HEADER
    assert list(tx["message"]) == ["hello", "step 1", "wait"]
    assert list(tx["event_type"]) == ["marker", "start/end", "start/end"]
    assert list(tx["domain"]) == ["default", "train", "default"]
    assert set(tx["pid"]) == {os.getpid()} and set(tx["tid"]) == {threading.get_native_id()}
    assert set(tx["Device_id"]) == {0} and set(tx["message_type"]) == {"string"}
    assert set(tx["payload_type"]) == {"N/A"} and set(tx["payload_value"]) == {"N/A"}
    assert tx["Device Start_time(us)"].isna().all() and tx["Device End_time(us)"].isna().all()
    assert (tx["Start_time(us)"] <= tx["End_time(us)"]).all()
    marker, step, wait = (tx.iloc[i] for i in range(3))
    assert marker["Start_time(us)"] == marker["End_time(us)"] == pytest.approx(t_mark / 1000, abs=TS_TOL_US)
    assert wait["Start_time(us)"] == pytest.approx(t0 / 1000, abs=TS_TOL_US)
    assert wait["End_time(us)"] - wait["Start_time(us)"] == pytest.approx(2.0, abs=TS_TOL_US)
    # the range spans the work it wrapped: every device task of the step
    ops = p.op_summary
    first = ops["Task Start Time(us)"].min()
    last = (ops["Task Start Time(us)"] + ops["Task Duration(us)"]).max()
    assert step["Start_time(us)"] <= first and step["End_time(us)"] >= last


def test_range_end_of_an_unknown_id_warns_and_records_nothing(tmp_path):
    profiled(tmp_path, msproftx="on")
    with pytest.warns(UserWarning, match=r"mstx.range_end\(987654\): no open range has this id"):
        ge.mstx.range_end(987654)
    rid = ge.mstx.range_start("once")
    ge.mstx.range_end(rid)
    with pytest.warns(UserWarning, match="no open range"):
        ge.mstx.range_end(rid)  # closing twice
    ge.GEFinalize()
    assert list(geprof_nb.load(tmp_path).msprof_tx["message"]) == ["once"]


def test_a_range_opened_in_an_earlier_run_is_not_recorded_in_the_next(tmp_path):
    """Its start is on the earlier run's clock: reported here it would end before it began."""
    profiled(tmp_path / "one", msproftx="on")
    session().run_graph(1)
    rid = ge.mstx.range_start("opened in run 1")
    ge.GEFinalize()
    profiled(tmp_path / "two", msproftx="on")
    assert session().run_graph(1) == ge.SUCCESS
    with pytest.warns(UserWarning, match=r"mstx range 'opened in run 1' \(id \d+\) was opened in an earlier "
                                         r"profiling run and ended in this one: not recorded"):
        ge.mstx.range_end(rid)
    with ge.mstx.range("run 2's own"):
        pass
    ge.GEFinalize()
    p = geprof_nb.load(tmp_path / "two")
    assert list(p.msprof_tx["message"]) == ["run 2's own"]
    assert any("'opened in run 1'" in note and "not recorded" in note for note in p.notes)
    assert geprof_nb.load(tmp_path / "one").msprof_tx.empty


def test_a_range_may_end_on_another_thread(tmp_path):
    profiled(tmp_path, msproftx="on")
    rid = ge.mstx.range_start("cross")
    t = threading.Thread(target=ge.mstx.range_end, args=(rid,))
    t.start()
    t.join()
    ge.GEFinalize()
    tx = geprof_nb.load(tmp_path).msprof_tx
    assert list(tx["message"]) == ["cross"] and list(tx["event_type"]) == ["start/end"]


def test_msproftx_through_the_c_api(tmp_path):
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    assert ge.aclgrphProfInit(str(tmp_path)) == ge.SUCCESS
    cfg = ge.aclgrphProfCreateConfig([0], 1, ge.ProfDataTypeConfig.kProfTaskTime | 0x80)  # PROF_MSPROFTX_MASK
    assert ge.mstx.range_start("before start") == 0
    assert ge.aclgrphProfStart(cfg) == ge.SUCCESS
    ge.mstx.mark("inside")
    assert ge.aclgrphProfStop(cfg) == ge.SUCCESS
    ge.mstx.mark("after stop")
    assert ge.aclgrphProfFinalize() == ge.SUCCESS
    assert list(geprof_nb.load(tmp_path).msprof_tx["message"]) == ["inside"]


def test_non_string_messages_are_shown_as_text(tmp_path):
    profiled(tmp_path, msproftx="on")
    ge.mstx.mark(42)
    with ge.mstx.range(("epoch", 3)):
        pass
    ge.GEFinalize()
    assert list(geprof_nb.load(tmp_path).msprof_tx["message"]) == ["42", "('epoch', 3)"]
