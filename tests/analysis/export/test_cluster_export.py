"""ClusterProfile.export: every rank as Parquet (read back as the same cluster) and as torch_npu
ascend_pt directories (msprof-analyze's cluster input; tests/interop runs the tool on them)."""

from __future__ import annotations

import json
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis import ClusterProfile
from geprof_nb.analysis.cluster.profile import ClusterTables
from geprof_nb.analysis.sources.parquet import ParquetSource
from helpers.cluster_testing import FAULTS, SLOW_LINK, SLOW_RANK, simulate_cluster


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    return simulate_cluster(tmp_path_factory.mktemp("faulty"), FAULTS)


@pytest.fixture(scope="module")
def exported(faulty, tmp_path_factory):
    """The faulty cluster as ascend_pt directories (written once: ~0.2 s a rank)."""
    return faulty.export(tmp_path_factory.mktemp("apt"))


@pytest.fixture(scope="module")
def slow_bert(tmp_path_factory):
    """The audit's cluster (4 ranks of a 2-layer BERT, rank 2 at 1.3x) as ascend_pt directories: its
    slow rank's steps once overlapped by ~40 µs (its tail after the last collective is long)."""
    root = tmp_path_factory.mktemp("slow_bert")
    graph = ge.models.bert(layers=2, seq_len=128, batch_size=8, training=True, world_size=4)
    cluster = simulate_cluster(root / "sim", {"slow_ranks": {"2": 1.3}, "slow_links": {"1-2": 0.5}}, ranks=4,
                               graph=graph)
    return cluster.export(root / "apt")


def test_parquet_export_reads_back_as_the_same_cluster(faulty, tmp_path):
    root = faulty.export(tmp_path / "pq", format="parquet")
    assert sorted(p.name for p in root.iterdir()) == [f"rank_{r}" for r in range(8)]
    back = geprof_nb.load(root)
    assert isinstance(back, ClusterProfile) and list(back.ranks) == list(range(8))
    assert all(isinstance(p.source, ParquetSource) for p in back.ranks.values())
    assert back.world_size == 8  # from the ranks' recorded info
    for name in ClusterTables.NAMES:
        pd.testing.assert_frame_equal(getattr(back, name), getattr(faulty, name), obj=name)


def test_ascend_pt_export_is_one_directory_per_rank_with_global_links(exported):
    root = exported
    dirs = sorted(root.iterdir())
    assert len(dirs) == 8 and all(d.name.endswith("_ascend_pt") for d in dirs)
    ranks = {}
    for d in dirs:
        (info,) = d.glob("profiler_info_*.json")
        ranks[int(info.stem.rsplit("_", 1)[1])] = d
    assert sorted(ranks) == list(range(8))
    src, dst = SLOW_LINK
    matrix = json.loads((ranks[src] / "ASCEND_PROFILER_OUTPUT" / "communication_matrix.json").read_text())
    op = next(iter(matrix["step1"]["collective"].values()))
    # the sub-tasks' ranks are global: rank 5's ring send goes to rank 6, its own link is 5-5
    assert set(op) == {f"{src}-{dst}", f"{src}-{src}"}
    assert op[f"{src}-{dst}"]["Transport Type"] == "HCCS" and op[f"{src}-{src}"]["Transport Type"] == "LOCAL"
    assert op[f"{src}-{dst}"]["Bandwidth(GB/s)"] == pytest.approx(45.0, rel=0.01)


def test_the_ascend_pt_export_reads_back_with_the_same_slow_rank(faulty, exported):
    back = geprof_nb.load(exported)
    assert isinstance(back, ClusterProfile) and list(back.ranks) == list(range(8))
    pd.testing.assert_frame_equal(back.cluster_step_trace_time, faulty.cluster_step_trace_time, atol=1e-3)
    assert back.slow_ranks["Rank"].iloc[0] == SLOW_RANK and back.slow_ranks["Slow"].sum() == 1
    ours = faulty.rank_step_wait
    pd.testing.assert_frame_equal(back.rank_step_wait, ours, atol=1e-2)


def test_the_ascend_pt_export_reads_back_with_the_same_links_and_slow_link(faulty, exported):
    """torch_npu directories hold no HCCL sub-tasks: the links come back from communication_matrix.json,
    equal to the simulated cluster's within the file's rounding (MB and ms to 6 decimals an entry);
    Tasks counts collective executions there (the file has no sub-task count)."""
    back = geprof_nb.load(exported)
    ours, theirs = faulty.communication_matrix, back.communication_matrix
    keys = ["Src Rank", "Dst Rank", "Link Type", "Transport Type"]
    pd.testing.assert_frame_equal(theirs[keys], ours[keys])
    entries = len(faulty.rank(0).communication_time)  # one entry per collective execution
    assert theirs["Tasks"].tolist() == [entries] * len(ours)
    assert (theirs["Size(Byte)"] - ours["Size(Byte)"]).abs().max() <= entries
    assert theirs["Transit Time(us)"].to_numpy() == pytest.approx(ours["Transit Time(us)"].to_numpy(),
                                                                  abs=1e-3 * entries)
    assert theirs["Bandwidth(GB/s)"].to_numpy() == pytest.approx(ours["Bandwidth(GB/s)"].to_numpy(), rel=1e-6)
    (link,) = back.slow_links.itertuples(index=False)
    assert (link[0], link[1]) == SLOW_LINK and link[7] == pytest.approx(faulty.slow_links["Bandwidth(GB/s)"].iloc[0])
    assert "Slow link" in back.advise()["Rule"].tolist()


def _ns(ts: str | float) -> int:
    """A trace_view ``ts`` (µs, a string with ns digits) as exact integer ns."""
    return int(Decimal(str(ts)) * 1000)


@pytest.mark.parametrize("export, slow_rank", [("slow_bert", 2), ("exported", SLOW_RANK)])
def test_no_ranks_profiler_steps_overlap_and_every_kernel_follows_its_launch(request, export, slow_rank):
    # a slow rank's ModelExecute (its ProfilerStep) began at rank 0's call and ran past rank 0's next
    # call, so its steps overlapped and msprof-analyze found no operators for step 2 on it
    gaps = {}
    for d in sorted(request.getfixturevalue(export).iterdir()):
        (info,) = d.glob("profiler_info_*.json")
        rank = int(info.stem.rsplit("_", 1)[1])
        events = json.loads((d / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
        for name in ("ProfilerStep", "ModelExecute"):
            spans = sorted((_ns(e["ts"]), _ns(e["ts"]) + round(e["dur"] * 1000), e["name"]) for e in events
                           if e.get("ph") == "X" and e["name"].startswith(name))
            assert len(spans) == 3, (rank, name)
            gap = np.array([b[0] - a[1] for a, b in zip(spans, spans[1:])])
            assert (gap > 0).all(), (rank, name, gap)
            if name == "ProfilerStep":
                assert [n for *_, n in spans] == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]
                gaps[rank] = gap
        flows: dict[str, dict[str, int]] = {}
        for e in events:
            if e.get("cat") == "async_npu":
                flows.setdefault(e["id"], {})[e["ph"]] = _ns(e["ts"])
        assert flows and all(f["s"] < f["f"] for f in flows.values()), rank  # a kernel starts after its call
    # every rank's host does what rank 0's does between two steps; the slow rank, returning last, lags
    # rank 0 by as much as its previous step ended later, so its gaps are rank 0's exactly
    assert (gaps[slow_rank] == gaps[0]).all()
    assert all((g >= gaps[0]).all() for g in gaps.values())


def test_unknown_export_format_names_the_accepted_ones(faulty, tmp_path):
    with pytest.raises(ValueError, match="accepted formats are ascend_pt, db, msprof_db, parquet$"):
        faulty.export(tmp_path, format="chrome")


@pytest.mark.parametrize("fmt, options, text", [
    ("ascend_pt", {"rank": 1}, "export option rank: a ClusterProfile writes every rank as its own rank; for one "
                               "rank, cluster.rank(r).export(path, format='ascend_pt')"),
    ("parquet", {"worker": "w"},
     "export option worker is accepted only with format='ascend_pt' or 'db'; format='parquet' takes compression, overwrite"),
    ("ascend_pt", {"timeline": False}, "unknown export option timeline; format='ascend_pt' takes worker, world_size"),
])
def test_an_option_the_cluster_export_does_not_take_is_refused_naming_it(faulty, tmp_path, fmt, options, text):
    with pytest.raises(ValueError) as err:
        faulty.export(tmp_path / "out", format=fmt, **options)
    assert str(err.value) == text
    assert not (tmp_path / "out").exists()
