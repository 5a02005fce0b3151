"""Multi-rank simulation: one BERT training step on 1,024 ranks, every rank profiled to its own run
directory (issue 8's target: under a minute on a 2-core machine); the cross-rank tables of a 1,024-rank
llama2-70b step (issue 27's: within 30 s, with pandas and with Dask on a local cluster)."""

from __future__ import annotations

import json
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from harness import Result, skipped, times
from workloads import llm_cluster_run, llm_cluster_size, scratch_dir

import geprof_nb
from geprof_nb import ge

#: The magic's defaults: what a notebook user gets without flags.
LAYERS = {"training_trace": "on", "task_trace": "on", "aic_metrics": "PipeUtilization"}
TARGET_S = 60.0
TARGET_RANKS = 1024


def bert_step_on_many_ranks(quick: bool) -> Result:
    """Wall time of GEInitialize .. GEFinalize for one BERT-base training step on every rank (1,024; 64
    with --quick, against the target scaled by rank count), then a check that every rank's run loads."""
    ranks = 64 if quick else TARGET_RANKS
    graph = ge.models.bert(batch_size=8, seq_len=128, training=True, world_size=ranks)
    target = TARGET_S * ranks / TARGET_RANKS
    found: dict[str, int | Path] = {}

    def run() -> Callable[[], None]:
        out = scratch_dir()
        opts = dict(LAYERS, output=str(out))
        ge.GEInitialize({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": json.dumps(opts),
                         "geprof.clock": "virtual"})
        s = ge.Session(options={"ge.exec.rankSize": str(ranks)})
        s.add_graph(1, graph)
        s.run_graph(1)
        ge.GEFinalize()
        found["ranks"] = len(list(next(out.iterdir()).glob("rank_*/PROF_*")))
        found["out"] = out
        return lambda: shutil.rmtree(out, ignore_errors=True)

    t = times(run)
    median = statistics.median(t)
    run()  # once more, kept, to load every rank's step back
    cluster = geprof_nb.load(found["out"])
    loaded = sum(len(p.step_trace) == 1 for p in cluster.ranks.values())
    return Result(f"cluster simulation, BERT step x{ranks} ranks (run directory each)", median, "s",
                  f"<= {target:.1f} s ({TARGET_S:.0f} s at {TARGET_RANKS} ranks)",
                  median <= target and found["ranks"] == ranks and loaded == ranks,
                  {"ranks": ranks, "runs_s": t, "rank_dirs": found["ranks"], "ranks_loaded": loaded})


TABLES_TARGET_S = 30.0
#: The tables that exist on main, computed by the cluster's engine.
ENGINE_TABLES = ("cluster_step_trace_time", "communication_time", "rank_step_wait")

def _cross_rank(quick: bool, engine: str, scheduler: object = None, runs: int = 5) -> tuple[list[float], dict]:
    root = llm_cluster_run(quick)
    found: dict = {}

    def run() -> Callable[[], None]:
        split = {}
        t0 = time.perf_counter()
        cluster = geprof_nb.load(root)
        split["load_s"] = time.perf_counter() - t0
        if engine != "pandas":
            cluster = cluster.with_engine(engine, scheduler=scheduler)
        for name in ENGINE_TABLES:
            t = time.perf_counter()
            found[name] = len(getattr(cluster, name))
            split[f"{name}_s"] = time.perf_counter() - t
        t = time.perf_counter()
        groups, bubbles = cluster.communication_groups, cluster.pipeline_bubbles
        split["group_map_and_bubbles_s"] = time.perf_counter() - t
        found.update(ranks=len(cluster.ranks), groups=len(groups), stages=len(bubbles),
                     bubble_share=[round(x, 4) for x in bubbles["Bubble Ratio"]])
        found.setdefault("splits", []).append({k: round(v, 3) for k, v in split.items()})
        return getattr(cluster, "close", lambda: None)

    return times(run, runs=runs if quick else 1, warmup=1 if quick and runs >= 5 else 0), found


def _tables_result(quick: bool, engine: str, t: list[float], found: dict) -> Result:
    size = llm_cluster_size(quick)
    ranks = size["tp"] * size["pp"] * size["dp"]
    target = TABLES_TARGET_S * ranks / 1024
    median = statistics.median(t)
    # every group once: tp groups (pp*dp), pp (tp*dp), dp (tp*pp) and the world
    groups = size["pp"] * size["dp"] + size["tp"] * size["dp"] + size["tp"] * size["pp"] + 1
    ok = found["ranks"] == ranks and found["stages"] == size["pp"] and found["groups"] == groups
    layers = "" if size["layers"] == 80 else f" ({size['layers']} layers)"
    return Result(f"cross-rank tables ({engine}), {size['preset']}{layers} TP{size['tp']} PP{size['pp']} "
                  f"DP{size['dp']} step x{ranks:,} ranks: load, step trace time, communication time, wait, "
                  f"group map, bubbles", median, "s", f"<= {target:.3g} s ({TABLES_TARGET_S:g} s at 1,024 ranks)",
                  median <= target and ok, {"runs_s": t, "expected_groups": groups, **found})


def llama2_70b_cross_rank_tables(quick: bool) -> Result:
    """The cross-rank tables of the llama2-70b TP8 PP8 DP16 step (1,024 ranks, one run: minutes; --quick: 4 layers
    at TP8 PP2 on 16 ranks, 5 runs) with pandas, from
    ``geprof_nb.load`` of the cluster root: cluster_step_trace_time (each rank's step split), communication_time
    and rank_step_wait, the group map and the pipeline bubbles (``ClusterProfile.communication_groups``,
    ``pipeline_bubbles``)."""
    t, found = _cross_rank(quick, "pandas")
    return _tables_result(quick, "pandas", t, found)


def llama2_70b_cross_rank_tables_dask(quick: bool) -> Result:
    """The same tables on the Dask engine against a local cluster: 2 worker processes of one thread on
    127.0.0.1 (what a local cluster is on 2 cores: one worker per core, each with its own GIL), started before
    the timing.  One task per rank reads its run directory and builds all of its small tables there (step split,
    collectives, pipeline passes, groups, step bounds); only those come back (one run, no warm-up, at either
    size)."""
    try:
        import distributed
    except ImportError:
        return skipped("cross-rank tables (dask)", "s", f"<= {TABLES_TARGET_S:g} s", "distributed")
    local = distributed.LocalCluster(n_workers=2, threads_per_worker=1, host="127.0.0.1", protocol="tcp",
                                     processes=True, dashboard_address=None)
    client = distributed.Client(local)
    try:
        t, found = _cross_rank(quick, "dask", client, runs=1)
    finally:
        client.close()
        local.close()
    return _tables_result(quick, "dask", t, found)


BENCHMARKS = [bert_step_on_many_ranks, llama2_70b_cross_rank_tables, llama2_70b_cross_rank_tables_dask]
