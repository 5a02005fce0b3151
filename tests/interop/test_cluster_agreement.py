"""A simulated cluster exported as one ascend_pt directory per rank: the real msprof-analyze
(``cluster -m all`` and ``advisor all``) reads it as one cluster, and its slow rank and slow
link are ours.

The cluster has 8 ranks; rank 3's kernels take 1.3x as long and the HCCS link 5 -> 6 runs at
half bandwidth.  msprof-analyze exits 0 even when it fails, so the tests check the files it
wrote and that it logged no error.
"""

from __future__ import annotations

import csv
import json

import pandas as pd
import pytest

from helpers.cluster_testing import FAULTS, SLOW_LINK, SLOW_RANK, simulate_cluster
from helpers.msprof_analyze import MSPROF_ANALYZE, analyze

pytestmark = [pytest.mark.interop, pytest.mark.slow, pytest.mark.skipif(MSPROF_ANALYZE is None,
                                                      reason="msprof-analyze is not installed (the interop extra)")]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("cluster_interop")
    cluster = simulate_cluster(root / "sim", FAULTS, steps=2)  # msprof-analyze takes ~1 s per rank and step
    return {"cluster": cluster, "export": cluster.export(root / "ascend_pt"), "root": root}


@pytest.fixture(scope="module")
def cluster_output(cluster):
    out = cluster["root"] / "cluster_out"
    out.mkdir()
    analyze(out, "cluster", "-d", str(cluster["export"]), "-m", "all", "-o", str(out))
    return out / "cluster_analysis_output"


def test_msprof_analyze_reads_every_rank_as_one_group(cluster_output):
    names = {p.name for p in cluster_output.iterdir()}
    assert {"cluster_step_trace_time.csv", "cluster_communication.json", "cluster_communication_matrix.json",
            "communication_group.json"} <= names
    group = json.loads((cluster_output / "communication_group.json").read_text())
    assert group["collective"] == [list(range(8))]


def test_its_cluster_step_trace_time_is_ours_and_names_the_same_slow_rank(cluster, cluster_output):
    with open(cluster_output / "cluster_step_trace_time.csv", newline="") as f:
        theirs = pd.DataFrame(list(csv.DictReader(f)))
    ours = cluster["cluster"].cluster_step_trace_time
    assert list(theirs.columns) == list(ours.columns)
    theirs = theirs.astype({"Step": int, "Index": int}).sort_values(["Index", "Step"]).reset_index(drop=True)
    for col in ours.columns[3:]:
        assert theirs[col].astype(float).to_numpy() == pytest.approx(ours[col].to_numpy(), abs=1e-3), col
    computing = theirs.assign(c=theirs["Computing"].astype(float)).groupby("Index")["c"].mean()
    assert computing.idxmax() == SLOW_RANK == cluster["cluster"].slow_ranks["Rank"].iloc[0]


def test_its_communication_matrix_names_the_same_slow_link(cluster, cluster_output):
    matrix = json.loads((cluster_output / "cluster_communication_matrix.json").read_text())
    (group,) = matrix.values()
    totals: dict[str, list[float]] = {}
    for step in group.values():
        for link, info in step["Total Op Info@hccl_world_group"].items():
            if info["Transport Type"] == "HCCS":
                mb, ms = totals.setdefault(link, [0.0, 0.0]), info
                mb[0] += ms["Transit Size(MB)"]
                mb[1] += ms["Transit Time(ms)"]
    bandwidth = {link: size / time for link, (size, time) in totals.items()}  # MB / ms = GB/s
    assert sorted(bandwidth) == sorted(f"{r}-{(r + 1) % 8}" for r in range(8))
    slowest = min(bandwidth, key=bandwidth.get)
    ours = cluster["cluster"].slow_links
    assert slowest == f"{SLOW_LINK[0]}-{SLOW_LINK[1]}" == f"{ours['Src Rank'].iloc[0]}-{ours['Dst Rank'].iloc[0]}"
    assert bandwidth[slowest] == pytest.approx(ours["Bandwidth(GB/s)"].iloc[0], rel=1e-3)
    matrix_ours = cluster["cluster"].communication_matrix.set_index(["Src Rank", "Dst Rank"])
    for link, value in bandwidth.items():
        src, dst = map(int, link.split("-"))
        assert value == pytest.approx(matrix_ours.loc[(src, dst), "Bandwidth(GB/s)"], rel=1e-3)


def test_its_advisor_names_the_same_slow_rank_and_slow_link(cluster, cluster_output):
    import openpyxl

    out = cluster_output.parent  # the advisor reuses the cluster backend's output found there
    # The advisor compares the slowest rank's step with the fastest's operator by operator: the ops
    # inside the step, which the export makes from each rank's host launches (ModelExecute records,
    # which every simulated rank reports), so it runs without an error line.
    assert all(len(p.api_statistic) for p in cluster["cluster"].ranks.values())
    text = analyze(out, "advisor", "all", "-d", str(cluster["export"]), "-o", str(out), "-l", "en")
    assert "slow rank" in text and "slow link" in text
    (xlsx,) = (out / "log").glob("mstt_advisor_*.xlsx")
    book = openpyxl.load_workbook(xlsx, read_only=True)
    head, *rows = list(book["slow rank"].iter_rows(values_only=True))
    ranks = pd.DataFrame(rows, columns=head)
    assert ranks.groupby("rank_id")["compute(us)"].mean().idxmax() == SLOW_RANK
    head, *rows = list(book["slow link"].iter_rows(values_only=True))
    links = pd.DataFrame(rows, columns=head)
    # the advisor's slow link is per rank: the SDMA bandwidth of what the rank sent
    sdma = links.groupby("rank_id")["SDMA bandwidth(GB/s)"].mean()
    assert sdma.idxmin() == SLOW_LINK[0] == cluster["cluster"].slow_links["Src Rank"].iloc[0]
    assert sdma.min() == pytest.approx(cluster["cluster"].slow_links["Bandwidth(GB/s)"].iloc[0], rel=1e-3)
