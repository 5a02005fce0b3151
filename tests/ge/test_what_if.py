"""The simulator's what-if knobs (issue 29): op speedups and removed ops act on the final (jittered)
durations, so the tasks they do not touch keep their exact durations; a link type's bandwidth is scaled in the
HCCL model; a dynamic-shape launch's host waits are capped."""

from __future__ import annotations

import tempfile

import numpy as np
import pytest

from geprof_nb import ge
from geprof_nb.ge import hccl as ge_hccl
from geprof_nb.ge import what_if
from geprof_nb.ge.device import DEFAULT_DEVICE, PRESETS, device_links
from helpers.geprof_testing import build_tiny_graph, run_profiled_session


@pytest.fixture(autouse=True)
def _replays_in_tmp_path(tmp_path, monkeypatch):
    """Replays write into a new temporary directory (tempfile.mkdtemp): the test's own, removed with it."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


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


def test_link_bandwidth_scales_the_link_types_bandwidth_in_the_hccl_model():
    links = ge_hccl.Links()
    change = what_if.OpChange.from_keywords(link_bandwidth={"HCCS": 0.5, "RoCE": 4})
    scaled = change.scaled_links(links)
    assert (scaled.hccs_bandwidth, scaled.roce_bandwidth) == (45e9, 100e9)
    assert (scaled.hccs_latency_ns, scaled.local_bandwidth) == (links.hccs_latency_ns, links.local_bandwidth)
    # PCIe and SIO are taken, as the analysis takes them, but the HCCL model moves nothing over them
    assert what_if.OpChange.from_keywords(link_bandwidth={"PCIe": 0.5, "SIO": 2}).scaled_links(links) is links
    with what_if.applying(change):
        assert device_links(PRESETS[DEFAULT_DEVICE]).hccs_bandwidth == PRESETS[DEFAULT_DEVICE].hccs_bandwidth * 0.5
    assert device_links(PRESETS[DEFAULT_DEVICE]).hccs_bandwidth == PRESETS[DEFAULT_DEVICE].hccs_bandwidth


def test_a_slower_hccs_link_makes_each_copy_take_its_bytes_over_the_new_bandwidth(tmp_path):
    graph = build_tiny_graph(2)[0]
    with what_if.applying(what_if.OpChange.from_keywords(link_bandwidth={"HCCS": 0.5})):
        run = run_profiled_session(tmp_path / "slow", graph, steps=2, hccl="on")
    h = run.profile.hccl_tasks
    copies = h[(h["Task Name"] == "Memcpy") & (h["Link Type"] == "HCCS")]
    assert len(copies)
    bandwidth = PRESETS[DEFAULT_DEVICE].hccs_bandwidth * 0.5
    want = np.ceil(copies["Size(Byte)"].to_numpy() * 1e9 / bandwidth).astype(np.int64)
    assert np.array_equal(np.rint(copies["Duration(us)"].to_numpy() * 1000).astype(np.int64), want)


def test_host_gap_us_caps_every_dynamic_launch_wait(tmp_path):
    graph = ge.models.mlp(batch_size=4, in_features=16, hidden=(16,), dynamic=True)
    base = run_profiled_session(tmp_path / "base", graph, steps=2).profile
    host = base.critical_path()
    assert host.loc[host["kind"] == "host", "duration"].min() > 5_000  # the host launches ~9 us per node
    capped = base.replay(host_gap_us=2).critical_path()
    gaps = capped.loc[capped["kind"] == "host", "duration"]
    # every wait is the cap, but for the two holding the FP / BP trace task the task log does not show (its 20 ns)
    assert len(gaps) == len(host[host["kind"] == "host"]) and (gaps != 2_000).sum() <= 2 * 2 and gaps.max() <= 2_020


def test_bad_link_and_host_gap_input_names_the_field():
    with pytest.raises(ValueError, match=r"^link_bandwidth: unknown link type 'NVLink'; accepted: HCCS, RoCE, PCIe, SIO"):
        what_if.OpChange.from_keywords(link_bandwidth={"NVLink": 2})
    with pytest.raises(ValueError, match=r"^link_bandwidth\['HCCS'\]=-1 is not valid; accepted: a finite number > 0"):
        what_if.OpChange.from_keywords(link_bandwidth={"HCCS": -1})
    with pytest.raises(ValueError, match=r"^host_gap_us=-0.5 is not valid; accepted: a finite number >= 0"):
        what_if.OpChange.from_keywords(host_gap_us=-0.5)
    with pytest.raises(NotImplementedError, match="device='Ascend310P'"):
        what_if.OpChange.from_keywords(device="Ascend310P")
