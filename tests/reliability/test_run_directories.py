"""Where runs go: an output directory that is itself a run (or a cluster root) is refused by every way of
opening a run, naming it and where the new run should go; two runs never share a sequence number, even made
at the same moment; and a load test: 4 processes x 25 runs into one output directory at once, each run with
8 threads issuing ACL calls, host scopes and mstx ranges, every run loading with exact counts."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from IPython.core.error import UsageError

import geprof_nb
from geprof_nb import ge
from geprof_nb.collect import OutputUnusable
from geprof_nb.prof import msprof, rawdata

ROOT = Path(__file__).resolve().parents[2]


def _refusal(run: Path) -> str:
    return (f"{run} is a run directory ({rawdata.INFO_FILE} is there), not an output directory: a new run is not "
            f"made inside it; give the output directory it is in ({run.parent}), where the new run goes beside "
            "it, or another one")


def test_ge_options_naming_a_run_directory_as_output_are_refused(earlier_run):
    run = earlier_run.run_dir
    options = {"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": json.dumps({"output": str(run)})}
    assert ge.GEInitialize(options) == ge.PARAM_INVALID
    assert ge.GEGetErrorMsg() == (f"[PARAM_INVALID] E10001: profiling option 'output' ({str(run)!r}) cannot be used: "
                                  f"{_refusal(run)}; accepted: a directory that can be created and written")
    earlier_run.assert_intact()
    assert earlier_run.runs_in_output() == [run.name] and geprof_nb.load(earlier_run.output).path == run


def test_a_block_a_cell_and_the_c_api_refuse_a_run_directory_as_output(earlier_run, ip):
    run = earlier_run.run_dir
    with pytest.raises(OutputUnusable) as refused:
        with geprof_nb.profile(output=str(run)):
            pytest.fail("the block ran")
    assert str(refused.value) == f"{run}: cannot be used ({_refusal(run)})"
    with pytest.raises(UsageError) as usage:
        ip.run_cell_magic("geprof", f"--output {run} --no-display", "ran = True")
    assert str(usage.value) == (f"--output {run}: cannot be used ({_refusal(run)}); accepted: a directory that can be "
                                "created and written")
    assert "ran" not in ip.user_ns
    assert ge.GEInitialize({}) == ge.SUCCESS
    assert ge.aclgrphProfInit(str(run)) == ge.FAILED
    assert ge.GEGetErrorMsg().startswith(f"[FAILED] aclgrphProfInit: cannot use {str(run)!r}: {_refusal(run)}")
    assert not msprof.lib.running
    earlier_run.assert_intact()  # nothing nested in it, nothing changed
    assert geprof_nb.load(run.parent).path == run


def test_a_cluster_root_is_refused_as_output(tmp_path):
    root = tmp_path / "CLUSTER_000003_20260101000000000_ABCDEFGH"
    (root / "rank_0").mkdir(parents=True)
    with pytest.raises(OutputUnusable, match=r"is a simulated cluster's root, not an output directory: a new run is "
                                             r"not made inside it; give the output directory it is in"):
        with geprof_nb.profile(output=str(root)):
            pytest.fail("the block ran")
    assert [p.name for p in root.iterdir()] == ["rank_0"]


def test_the_directory_beside_a_run_takes_the_next_run(earlier_run):
    with geprof_nb.profile(output=str(earlier_run.run_dir.parent)) as block:
        pass
    assert block.run_dir.parent == earlier_run.run_dir.parent and block.run_dir.name.startswith("PROF_000002_")
    assert geprof_nb.load(earlier_run.output).path == block.run_dir


def test_two_runs_that_take_the_same_number_at_once_end_with_two_numbers(tmp_path, monkeypatch):
    """Another process makes ``PROF_000001_...`` between this one's look at the directory and its mkdir: this run
    sees it, gives the number up and takes 2, and the newest run is this one."""
    out = tmp_path / "out"
    out.mkdir()
    real_name = msprof._run_dir_name
    rival = out / "PROF_000001_20260101000000000_OTHERPROCESSAAAA"

    def name(seq: int) -> str:
        if not rival.exists():
            rival.mkdir()  # the other process's run, made as this one names its own
            (rival / rawdata.INFO_FILE).write_text('{"geprof_raw_version": 1, "status": "complete"}')
        return real_name(seq)

    monkeypatch.setattr(msprof, "_run_dir_name", name)
    with geprof_nb.profile(output=str(out)) as block:
        pass
    assert block.run_dir.name.startswith("PROF_000002_")
    assert sorted(p.name[:12] for p in out.iterdir()) == ["PROF_000001_", "PROF_000002_"]
    assert geprof_nb.load(out).path == block.run_dir


# ---------------------------------------------------------------------------------------------- load test
PROCESSES, RUNS, THREADS, ITERATIONS = 4, 25, 8, 6

WORKER = """
import json, sys, threading
import geprof_nb
from geprof_nb import ge
from geprof_nb.ge import acl
from geprof_nb.prof.host_profiler import ProfilingEvent
from geprof_nb.prof.scope import profiling_scope

out, me, runs, threads, iterations = sys.argv[1], int(sys.argv[2]), *map(int, sys.argv[3:6])
assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
sess = ge.Session()
assert sess.add_graph(1, ge.models.mlp(batch_size=4, in_features=16, hidden=(16,))) == ge.SUCCESS
for run in range(runs):
    def work(t):
        for i in range(iterations):
            assert acl.aclmdlExecute(10_000 + t) == acl.ACL_ERROR_INVALID_MODEL_ID  # reported, with its item id
            with profiling_scope(f"p{me}r{run}t{t}", ProfilingEvent.kOpExecute):
                rid = ge.mstx.range_start(f"p{me} r{run} t{t} i{i}")
                ge.mstx.range_end(rid)
    with geprof_nb.profile(output=out, msproftx="on", ge_api="l1") as block:
        workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for step in range(run % 3 + 1):
            assert sess.run_graph(1) == ge.SUCCESS
        for w in workers:
            w.join()
    print(json.dumps({"run": run, "dir": str(block.run_dir), "steps": run % 3 + 1}), flush=True)
ge.GEFinalize()
"""


@pytest.mark.slow
def test_four_processes_making_25_runs_each_in_one_output_directory_lose_nothing(tmp_path):
    out = tmp_path / "shared"
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(out), str(me), str(RUNS), str(THREADS),
                               str(ITERATIONS)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for me in range(PROCESSES)]
    made: dict[Path, tuple[int, int, int]] = {}
    for me, proc in enumerate(procs):
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, stderr
        for line in stdout.splitlines():
            run = json.loads(line)
            made[Path(run["dir"])] = (me, run["run"], run["steps"])
    assert len(made) == PROCESSES * RUNS
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in made)  # one directory each, no other
    numbers = [rawdata.creation_order(p.name)[0] for p in made]
    # no number taken twice; two processes meeting on one number may both move on, leaving it unused
    assert len(set(numbers)) == len(numbers) and min(numbers) >= 1
    for me in range(PROCESSES):  # each process's runs are numbered in the order it made them
        mine = sorted((r, rawdata.creation_order(p.name)[0]) for p, (m, r, _) in made.items() if m == me)
        assert [n for _, n in mine] == sorted(n for _, n in mine)
    assert geprof_nb.load(out).path == max(made, key=lambda p: rawdata.creation_order(p.name))
    for path, (me, run, steps) in made.items():
        p = geprof_nb.load(path)
        where = f"process {me} run {run}"
        assert p.complete and p.dropped == {} and p.run.damaged == [] and p.run.missing == [], where
        assert len(p.step_trace) == steps, where
        calls = p.run.load("api")
        failed = calls[calls["item_id"] >= 10_000]
        assert Counter(failed["item_id"].tolist()) == {10_000 + t: ITERATIONS for t in range(THREADS)}, where
        scopes = p.host_events[p.host_events["Element"].astype(str).str.startswith(f"p{me}r")]
        assert Counter(scopes["Element"].astype(str)) == {f"p{me}r{run}t{t}": ITERATIONS for t in range(THREADS)}, \
            where
        assert Counter(p.msprof_tx["message"].astype(str)) == {
            f"p{me} r{run} t{t} i{i}": 1 for t in range(THREADS) for i in range(ITERATIONS)}, where
