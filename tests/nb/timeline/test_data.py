"""The timeline's lanes and answers for one run (geprof_nb.nb.timeline.model / lanes), checked against
the Profile's own tables: every task on its stream, the clock's zero at the first step's start, the
exposed communication equal to step_breakdown's, op statistics equal to op_summary's, bounded views."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from geprof_nb.analysis.tables.breakdown import step_windows
from geprof_nb.analysis.tables.intervals import covered_time
from geprof_nb.nb.timeline import model as M
from geprof_nb.nb.timeline.lanes import COMMUNICATION_LABEL, exposed_parts
from geprof_nb.nb.timeline.model import TimelineData


@pytest.fixture(scope="module")
def resnet(resnet_run):
    return resnet_run.profile


@pytest.fixture(scope="module")
def data(resnet):
    return TimelineData(resnet)


def lane_ids(d: TimelineData, prefix: str) -> list[str]:
    return [lane.id for lane in d.lanes if lane.id.startswith(prefix)]


def test_the_clock_starts_at_the_first_step(resnet, data):
    bounds = resnet.source.step_bounds()
    assert data.origin_ns == int(bounds["begin"].min())
    assert data.steps[0][1] == 0.0
    assert [s for s, _, _ in data.steps] == bounds["step"].tolist()
    steps = data.by_id["steps"].spans
    assert steps.start.tolist() == ((bounds["begin"] - bounds["begin"].min()) / 1000).tolist()
    rows = resnet.source.op_rows()
    first = next(lane.spans for lane in data.lanes if lane.id.startswith("stream/"))
    k = int(first.ref[0])  # op_summary row of that stream's first task
    assert first.start[0] == (rows.start_ns[k] - data.origin_ns) / 1000


def test_every_task_is_on_its_streams_lane_and_collectives_on_the_hccl_lane(resnet, data):
    f = resnet.op_summary
    comm = (f["Task Type"] == "COMMUNICATION").to_numpy()
    by_stream = f[~comm]["Stream ID"].value_counts()
    for sid, n in by_stream.items():
        lane = data.by_id[f"stream/{int(sid)}"]
        assert lane.label == f"stream {int(sid)}" and len(lane.spans) == n
        assert set(f["Stream ID"].iloc[lane.spans.ref].tolist()) == {sid}
    hccl = data.by_id["hccl"]
    assert hccl.label == COMMUNICATION_LABEL and len(hccl.spans) == int(comm.sum()) > 0
    total = sum(len(lane.spans) for lane in data.lanes if lane.ops)
    assert total == len(f)


def test_the_exposed_part_of_communication_is_step_breakdowns_not_overlapped_time(resnet, data):
    overlay = data.by_id["hccl"].overlay
    windows = step_windows(resnet.source.step_bounds(), resnet.source.span_rows())
    lo = (windows["start"].to_numpy() - data.origin_ns) / 1000
    hi = (windows["end"].to_numpy() - data.origin_ns) / 1000
    exposed = covered_time(overlay.start, overlay.end, lo, hi)
    sb = resnet.step_breakdown.set_index("Step").loc[windows["step"]]
    assert exposed == pytest.approx(sb["Communication(Not Overlapped)"].to_numpy(), abs=1e-3)
    assert (sb["Communication(Not Overlapped)"] > 0).all()  # the test means something


def test_exposed_parts_by_hand():
    # a collective 0-10 with compute 2-4 and 6-12 exposes 0-2 and 4-6; one 20-25 with no compute: all of it
    lo, hi, owner = exposed_parts(np.array([0.0, 20.0]), np.array([10.0, 25.0]), np.array([2.0, 6.0, 3.0]),
                                  np.array([4.0, 12.0, 3.5]))
    assert list(zip(lo, hi, owner)) == [(0.0, 2.0, 0), (4.0, 6.0, 0), (20.0, 25.0, 1)]


def test_the_rich_run_has_every_lane(rich_run):
    d = TimelineData(rich_run)
    labels = [lane.label for lane in d.lanes]
    assert labels[:2] == ["steps", "step phases"]
    for want in ("stream 1", COMMUNICATION_LABEL, "host acl", "host model", "host node", "host runtime",
                 "GE host events", "mstx", "memory allocated"):
        assert want in labels, want
    mstx = [lane for lane in d.lanes if lane.label.startswith("mstx")]
    assert sum(len(lane.spans) for lane in mstx) == len(rich_run.msprof_tx) == 6
    names = {d.tables.names.texts[n] for lane in mstx for n in lane.spans.name.tolist()}
    assert names == {"step 0", "step 1", "step 2", "between steps"}
    events = [lane for lane in d.lanes if lane.label.startswith("GE host events")]
    assert sum(len(lane.spans) for lane in events) == len(rich_run.host_events)
    calls = rich_run.source.api_calls()
    host = [lane for lane in d.lanes if lane.label.startswith("host ")]
    assert sum(len(lane.spans) for lane in host) == len(calls)
    memory = d.by_id["memory"]
    assert len(memory.curve[0]) == len(rich_run.memory_record)
    assert memory.meta(False)["max"] == rich_run.memory_record["Total Allocated(MB)"].max()
    # rows of one lane never overlap (nested scopes went to sub-rows)
    for lane in d.lanes:
        if lane.spans is not None and lane.type == "spans" and not lane.ops:
            assert (lane.spans.start[1:] >= lane.spans.end[:-1] - 0.5).all(), lane.id


def test_a_whole_run_view_accounts_for_every_task(resnet, data):
    ids = [lane.id for lane in data.lanes]
    header, buffers = data.view(*data.extent, 1500, ids)
    for lane in data.lanes:
        h = header["lanes"][lane.id]
        if lane.type == "curve":
            assert 0 < h["n_points"] <= 3 * header["columns"] + 1
            continue
        count = np.frombuffer(buffers[h["columns"][1]], "<u4")
        assert int(count.sum()) + h["n_exact"] == len(lane.spans), lane.id
    assert header["bytes"] == sum(len(b) for b in buffers)


def test_a_view_never_sends_more_than_its_budget(data, monkeypatch):
    ids = [lane.id for lane in data.lanes]
    full, _ = data.view(*data.extent, 16_384, ids)
    assert full["bytes"] <= M.MAX_VIEW_BYTES
    monkeypatch.setattr(M, "MAX_VIEW_BYTES", full["bytes"] // 4)
    small, buffers = data.view(*data.extent, 16_384, ids)
    assert small["bytes"] + len(str(small)) <= full["bytes"] // 4
    assert small["columns"] < 16_384 and sum(len(b) for b in buffers) == small["bytes"]


def test_a_clicked_op_lists_every_instance_with_op_summarys_statistics(resnet, data):
    f = resnet.op_summary
    name = str(f.loc[f["OP Type"] == "Conv2D", "Op Name"].iloc[0])
    mine = f[f["Op Name"] == name]
    answer = data.op(name)
    assert answer["count"] == len(mine) == resnet.iteration_count
    d = mine["Task Duration(us)"]
    assert answer["stats"] == pytest.approx({"count": len(mine), "total": d.sum(), "mean": d.mean(), "min": d.min(),
                                             "max": d.max()})
    assert [i[1] for i in answer["instances"]] == resnet.iteration_of_ops[mine.index].tolist()
    ratios = dict(answer["ratios"])
    assert ratios["aic_mac_ratio"] == pytest.approx(mine["aic_mac_ratio"].mean())
    assert data.op("no such op")["count"] == 0


def test_search_counts_the_tasks_of_the_op_names_that_match(resnet, data):
    names = resnet.op_summary["Op Name"].astype(str)
    answer = data.search("CONV2D")
    assert answer["tasks"] == int(names.str.casefold().str.contains("conv2d", regex=False).sum()) > 0
    assert answer["ops"] == names[names.str.casefold().str.contains("conv2d", regex=False)].nunique()
    assert data.search("")["tasks"] == 0


def test_a_spans_reference_gives_its_op_summary_row(resnet, data):
    lane = next(lane for lane in data.lanes if lane.id.startswith("stream/"))
    ref = int(lane.spans.ref[5])
    fields = dict(data.detail(ref)["fields"])
    row = resnet.op_summary.iloc[ref - data.ops[0].ref0]
    assert fields["Op Name"] == row["Op Name"] and fields["Input Shapes"] == row["Input Shapes"]
    ratios = [c for c in row.index if c.endswith("_ratio") and pd.notna(row[c])]
    assert ratios and [fields[c] for c in ratios] == [f"{row[c]:,.3f}".rstrip("0").rstrip(".") for c in ratios]
    with pytest.raises(ValueError, match="no timeline row has reference"):
        data.detail(10**9)


def test_bad_requests_say_what_is_wrong(resnet, data):
    with pytest.raises(ValueError, match="unknown lane ids"):
        data.view(0.0, 1.0, 100, ["nope"])
    with pytest.raises(ValueError, match="finite t0 < t1"):
        data.view(5.0, 5.0, 100, ["steps"])
    with pytest.raises(TypeError, match="Profile or a ClusterProfile"):
        TimelineData(pd.DataFrame())
