"""The Dask engine: the cross-rank tables computed on a local Dask cluster (two workers on
127.0.0.1, talking TCP) from per-rank Parquet files equal the pandas engine's, frame for frame.

Workers run in this process (``processes=False``): starting worker processes costs seconds
on a 2-core machine and tests nothing the TCP transport does not (tasks, results and the
graph travel serialised between client, scheduler and workers either way).
"""

from __future__ import annotations

import pandas as pd
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis import ClusterProfile
from geprof_nb.analysis.cluster.profile import ClusterTables
from helpers.cluster_testing import FAULTS, simulate_cluster

distributed = pytest.importorskip("distributed", reason="the Dask engine needs the cluster extra (dask[distributed])")


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, host="127.0.0.1", protocol="tcp",
                                       processes=False, dashboard_address=None)
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    return simulate_cluster(tmp_path_factory.mktemp("faulty"), FAULTS)


@pytest.fixture(scope="module")
def parquet_root(faulty, tmp_path_factory):
    return faulty.export(tmp_path_factory.mktemp("parquet"), format="parquet")


def assert_same_tables(dask_tables: ClusterTables, pandas_tables: ClusterTables) -> None:
    for name in (*ClusterTables.NAMES, "communication_groups", "pipeline", "pipeline_bubbles"):
        pd.testing.assert_frame_equal(getattr(dask_tables, name), getattr(pandas_tables, name), obj=name)


def test_the_local_cluster_has_two_workers_on_localhost(client):
    workers = client.scheduler_info()["workers"]
    assert len(workers) == 2 and all(w.startswith("tcp://127.0.0.1:") for w in workers)


def test_both_engines_give_equal_tables_from_parquet(client, faulty, parquet_root):
    cluster = geprof_nb.load(parquet_root, engine="dask", scheduler=client)
    assert isinstance(cluster, ClusterProfile) and cluster.engine == "dask"
    with distributed.get_task_stream(client) as stream:
        tables = cluster.tables()
        assert tables.engine == "dask"
        assert_same_tables(tables, faulty.tables("pandas"))
    # the workers read the ranks' Parquet files, one task per rank and table
    names = [t["key"][0] if isinstance(t["key"], tuple) else t["key"] for t in stream.data]
    assert sum(str(k).startswith("geprof-hccl_tasks") for k in names) == 8
    # the properties read the cluster's engine
    pd.testing.assert_frame_equal(cluster.slow_ranks, faulty.slow_ranks)
    cluster.close()


def test_dask_on_run_directories_reads_them_in_the_workers(client, faulty):
    with distributed.get_task_stream(client) as stream:
        tables = faulty.tables("dask", scheduler=client)
        assert_same_tables(tables, faulty.tables("pandas"))
    # nothing written first: the workers built each rank's tables from its run directory
    assert tables.inputs._temporary is None and tables.inputs.exports == {}
    assert sorted(tables.inputs.runs) == list(range(8))
    # one task per rank built all of its small tables (step split, collectives, passes, groups)
    names = [t["key"][0] if isinstance(t["key"], tuple) else t["key"] for t in stream.data]
    assert sum(str(k).startswith("geprof-rank_tables") for k in names) == 8
    assert not any(str(k).startswith(("geprof-step_breakdown", "geprof-communication_time")) for k in names)
    faulty.close()


def test_parquet_dir_keeps_the_parquet(client, faulty, tmp_path):
    cluster = ClusterProfile(faulty.path, faulty.ranks, engine="dask", scheduler=client, parquet_dir=tmp_path)
    pd.testing.assert_frame_equal(cluster.communication_matrix, faulty.communication_matrix)
    cluster.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"rank_{r}" for r in range(8)]


def test_a_scheduler_address_connects_a_client_that_close_disconnects(client, faulty, parquet_root):
    cluster = geprof_nb.load(parquet_root, engine="dask", scheduler=client.scheduler.address)
    pd.testing.assert_frame_equal(cluster.stragglers, faulty.stragglers)
    own = cluster.tables().inputs._own_client
    assert own is not None and own.status == "running"
    cluster.close()
    assert own.status == "closed"


def test_ranks_without_hccl_data_give_equal_empty_tables(client, tmp_path):
    cluster = simulate_cluster(tmp_path, None, ranks=4, steps=2, hccl="off")
    dask = cluster.tables("dask", scheduler=client)
    assert dask.communication_matrix.empty and dask.slow_links.empty
    assert_same_tables(dask, cluster.tables("pandas"))
    cluster.close()


def test_the_group_map_and_pipeline_bubbles_come_from_the_workers(client, tmp_path):
    """A hybrid-parallel job (tiny-llama TP2 PP2 DP2, 4 micro-batches): both engines find its 13 groups
    (world, 4 tp, 4 pp, 4 dp) and its two stages' passes and bubbles, from the run directories and from
    a Parquet export; the Dask engine's come back from one task per rank."""
    g = ge.models.llm("tiny-llama", seq_len=256, parallel=ge.Parallel(tp=2, pp=2, dp=2, micro_batches=4))
    hybrid = simulate_cluster(tmp_path / "run", ranks=8, steps=2, graph=g, task_trace="on")
    pandas_tables = hybrid.tables("pandas")
    assert len(pandas_tables.communication_groups) == 13 and len(pandas_tables.pipeline_bubbles) == 2
    # every rank runs 4 micro-batches forward and backward in each of 2 steps
    assert len(pandas_tables.pipeline) == 8 * 2 * 4 * 2
    with distributed.get_task_stream(client) as stream:
        assert_same_tables(hybrid.tables("dask", scheduler=client), pandas_tables)
    names = [t["key"][0] if isinstance(t["key"], tuple) else t["key"] for t in stream.data]
    assert sum(str(k).startswith("geprof-rank_tables") for k in names) == 8
    exported = geprof_nb.load(hybrid.export(tmp_path / "parquet", format="parquet"), engine="dask", scheduler=client)
    assert_same_tables(exported.tables(), pandas_tables)
    exported.close()
    hybrid.close()


def test_engine_options_are_for_clusters_only(faulty):
    with pytest.raises(ValueError, match="one run, not a cluster: engine"):
        geprof_nb.load(faulty.rank(0).path, engine="dask")
