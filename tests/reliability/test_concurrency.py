"""Concurrency: eight threads report while the main thread runs graphs; two notebooks share an
output directory.

Every record a thread reports is there exactly once (counts match to the record), and no
record is torn: each one's fields belong together (its thread id is the thread that made
it, its message names that thread, its start is not after its end).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.collect import AlreadyCollecting, collect
from geprof_nb.ge import acl
from geprof_nb.prof import msprof, rawdata
from geprof_nb.prof.api_types import AclProfType
from geprof_nb.prof.host_profiler import ProfilingEvent
from geprof_nb.prof.options import ProfilingOptions
from geprof_nb.prof.scope import profiling_scope
from helpers.reliability_helpers import n_kernels, profiled_ge, tiny_mlp

ROOT = Path(__file__).resolve().parents[2]
THREADS = 8
ITERATIONS = 40  # per thread
MAIN_STEPS = 12
THREAD_STEPS = 5  # real aclmdlExecute runs per thread, each on its own loaded model


def _small_model(t: int) -> ge.Graph:
    g = ge.Graph(f"thread_model_{t}")
    x = g.data("x", (4, 8))
    g.output([g.op("Relu", g.op("MatMulV2", [x, g.variable("w", (8, 8), dtype="float16")], name=f"mm_{t}"),
                   name=f"relu_{t}")])
    return g


def test_eight_threads_report_while_the_main_thread_runs_graphs(tmp_path, monkeypatch):
    monkeypatch.setattr(msprof.lib, "chunk_records", 64)  # many chunks, flushed by whichever thread fills one
    profiled_ge(tmp_path / "out", msproftx="on", ge_api="l1")
    sess = ge.Session()
    sess.add_graph(1, tiny_mlp())
    model_ids = []
    for t in range(THREADS):
        model_id, ret = acl.aclmdlLoadFromMem(ge.aclgrphBuildModel(_small_model(t))[0])
        assert ret == acl.ACL_SUCCESS
        model_ids.append(model_id)
    native: dict[int, int] = {}
    start = threading.Barrier(THREADS + 1)
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            native[t] = threading.get_native_id()
            start.wait()
            for i in range(ITERATIONS):
                # an ACL call that fails (no such model) is still reported, with its item id
                assert acl.aclmdlExecute(10_000 + t) == acl.ACL_ERROR_INVALID_MODEL_ID
                with profiling_scope(f"worker_{t}", ProfilingEvent.kOpExecute):
                    rid = ge.mstx.range_start(f"range t{t} i{i}")
                    ge.mstx.mark(f"mark t{t} i{i}")
                    ge.mstx.range_end(rid)
                if i % (ITERATIONS // THREAD_STEPS) == 0:
                    assert acl.aclmdlExecute(model_ids[t]) == acl.ACL_SUCCESS
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    start.wait()
    for _ in range(MAIN_STEPS):
        assert sess.run_graph(1) == ge.SUCCESS, ge.GEGetErrorMsg()
    for th in threads:
        th.join(timeout=120)
    assert not errors, errors
    kernels = n_kernels(sess)
    ge.GEFinalize()

    p = geprof_nb.load(tmp_path / "out")
    assert p.complete and p.dropped == {} and p.run.damaged == [] and p.run.missing == []

    # ACL API records: exactly ITERATIONS failed calls per thread, each from its own thread
    api = p.run.load("api")
    failed = api[(api["type"] == int(AclProfType.AclmdlExecute)) & (api["item_id"] >= 10_000)]
    assert Counter(failed["item_id"].tolist()) == {10_000 + t: ITERATIONS for t in range(THREADS)}
    for t in range(THREADS):
        mine = failed[failed["item_id"] == 10_000 + t]
        assert set(mine["thread_id"].tolist()) == {native[t]} and (mine["begin"] <= mine["end"]).all()
    executed = api[(api["type"] == int(AclProfType.AclmdlExecute)) & (api["item_id"] < 10_000)]
    assert Counter(executed["item_id"].tolist()) == {m: THREAD_STEPS for m in model_ids}

    # host scopes: ITERATIONS spans per worker, on its own thread
    he = p.host_events
    workers = he[he["Element"].astype(str).str.startswith("worker_")]
    assert Counter(workers["Element"].astype(str)) == {f"worker_{t}": ITERATIONS for t in range(THREADS)}
    for t in range(THREADS):
        mine = workers[workers["Element"].astype(str) == f"worker_{t}"]
        assert set(mine["Thread ID"].tolist()) == {native[t]}
    assert (workers["Start(us)"] <= workers["End(us)"]).all() and set(workers["Event"].astype(str)) == {"OpExecute"}

    # mstx: every range and mark exactly once, each on the thread its message names
    tx = p.msprof_tx
    assert len(tx) == 2 * THREADS * ITERATIONS
    messages = Counter(tx["message"].astype(str))
    assert messages == {f"{kind} t{t} i{i}": 1 for kind in ("range", "mark") for t in range(THREADS)
                        for i in range(ITERATIONS)}
    for row in tx.itertuples(index=False):
        t = int(row.message.split()[1][1:])
        assert row.tid == native[t] and row._7 <= row._8  # Start_time(us) <= End_time(us)

    # the main thread's graph: every step, every op, nothing extra
    main = p.step_trace[p.step_trace["Model ID"] == sess_model_id(p, "mlp")]
    assert list(main["Iteration ID"]) == list(range(1, MAIN_STEPS + 1))
    ops = p.op_summary
    assert (ops["Model ID"] == sess_model_id(p, "mlp")).sum() == MAIN_STEPS * kernels
    for t in range(THREADS):  # and each thread's model: its steps, its two ops each
        assert (ops["Op Name"].astype(str) == f"mm_{t}").sum() == THREAD_STEPS
        assert (ops["Op Name"].astype(str) == f"relu_{t}").sum() == THREAD_STEPS
    hw = p.run.load("hwts")
    assert len(np.unique(hw[["connection_id", "iteration"]])) == len(hw)  # no record twice


def sess_model_id(p, graph_name: str) -> int:
    """The model id of a graph from the run's GRAPH_ID_MAP records (model_info)."""
    info = p.run.load("model_info")
    names = {int(r["model_id"]): p.run.hashes.get(int(r["model_name"])) for r in info}
    return next(m for m, n in names.items() if n == graph_name)


# ------------------------------------------------------------- two notebooks, one output directory
NOTEBOOK = """
import json, sys, time
from pathlib import Path
from geprof_nb import ge
from geprof_nb.prof import msprof

out, go, steps = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
# both processes compute the same run directory name: only mkdir's atomicity keeps them apart
msprof._run_dir_name = lambda seq: f"PROF_{seq:06d}_20260101000000000_SAMESAMESAMESAME"
while not go.exists():
    time.sleep(0.001)
opts = {"output": out, "training_trace": "on"}
assert ge.GEInitialize({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": json.dumps(opts),
                        "geprof.clock": "virtual"}) == ge.SUCCESS
run_dir = str(msprof.lib.run_dir)
sess = ge.Session()
sess.add_graph(1, ge.models.mlp(batch_size=4, in_features=16, hidden=(16,)))
for _ in range(steps):
    assert sess.run_graph(1) == ge.SUCCESS
ge.GEFinalize()
print(run_dir)
"""


def test_two_notebooks_profiling_into_one_output_directory_get_a_run_directory_each(tmp_path):
    out, go = tmp_path / "shared", tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", NOTEBOOK, str(out), str(go), str(steps)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for steps in (3, 5)]
    go.touch()  # both start at once
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [r[1] for r in results]
    run_dirs = [Path(r[0].strip()) for r in results]
    assert run_dirs[0] != run_dirs[1] and {d.parent for d in run_dirs} == {out}
    assert sorted(d.name for d in out.iterdir()) == sorted(d.name for d in run_dirs)
    assert {d.name[:11] for d in run_dirs} == {"PROF_000001", "PROF_000002"}
    for run_dir, steps in zip(run_dirs, (3, 5)):
        p = geprof_nb.load(run_dir)
        assert p.complete and p.info["run"] == run_dir.name
        assert list(p.step_trace["Iteration ID"]) == list(range(1, steps + 1))
        info = json.loads((run_dir / rawdata.INFO_FILE).read_text())
        assert info["records"]["hwts"] == len(p.run.load("hwts"))


def hold_first_call(monkeypatch, cls: type, method: str, thread_name: str) -> tuple[threading.Event, threading.Event]:
    """Make the first call of ``cls.method`` in the thread named ``thread_name`` wait: returns (entered,
    release): ``entered`` is set when that call is held, which goes on once ``release`` is set."""
    entered, release = threading.Event(), threading.Event()
    original = getattr(cls, method)

    def held(self, *args, **kwargs):
        if threading.current_thread().name == thread_name and not entered.is_set():
            entered.set()
            release.wait(10)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, method, held)
    return entered, release


def test_a_batch_another_thread_is_reporting_when_collection_stops_is_in_the_run(tmp_path, monkeypatch):
    """A worker thread took its first 8 steps to report (its 9th step needs a new batch) just as the main
    thread leaves the profile() block: the STOP waits for that report instead of closing the run under it
    (the 8 steps were lost, with no note). Steps finishing after the STOP are not queued for a later run."""
    from geprof_nb.ge.step_report import StepReporter

    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    sess = ge.Session()
    assert sess.add_graph(1, tiny_mlp()) == ge.SUCCESS
    assert sess.run_graph(1) == ge.SUCCESS  # compiled before the block
    reporting, release = hold_first_call(monkeypatch, StepReporter, "report_steps", "worker")
    worker = threading.Thread(target=lambda: [sess.run_graph(1) for _ in range(9)], name="worker")
    with geprof_nb.profile(output=str(tmp_path / "out")) as run:
        worker.start()
        assert reporting.wait(10)
        threading.Timer(0.3, release.set).start()  # the block's exit below stops the collection first
    worker.join(10)
    steps = list(run.profile.step_trace["Iteration ID"])
    # the batch being reported (the model's steps 2..9) is in the run; step 10, run while the STOP waited,
    # is in it when the worker queued it before the STOP took the lock (both orders are right)
    assert steps in (list(range(2, 10)), list(range(2, 11)))
    assert len(run.profile.op_summary) == len(steps) * n_kernels(sess)
    ge.GEFinalize()


def test_a_schedule_whose_steps_overlap_on_threads_says_its_windows_are_approximate(tmp_path, monkeypatch):
    """The schedule counts all threads' steps as one sequence: with steps in flight on two threads a window
    edge can cut one, which the run says (and one thread's steps never get the note)."""
    from geprof_nb.collect import OVERLAPPING_STEPS_NOTE
    from geprof_nb.ge import runtime

    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    sess_a, sess_b = ge.Session(), ge.Session()
    for s in (sess_a, sess_b):
        assert s.add_graph(1, tiny_mlp()) == ge.SUCCESS
    in_step, other_done = hold_first_call(monkeypatch, runtime.LoadedModel, "run_on_device", "a")
    schedule = {"wait": 1, "warmup": 0, "active": 2}
    with geprof_nb.profile(output=str(tmp_path / "two"), schedule=schedule) as run:
        a = threading.Thread(target=lambda: [sess_a.run_graph(1) for _ in range(3)], name="a")
        a.start()
        assert in_step.wait(10)
        sess_b.run_graph(1)
        other_done.set()
        a.join(10)
    assert OVERLAPPING_STEPS_NOTE.format(n=1) in run.profile.notes
    with geprof_nb.profile(output=str(tmp_path / "one"), schedule=schedule) as run:
        for _ in range(4):
            sess_a.run_graph(1)
    assert not any("began while another thread's step" in n for n in run.profile.notes)
    ge.GEFinalize()


# ------------------------------------------------------------- two openers at once: the loser is told who won
class _Race:
    """Two threads open a run at once: both have passed every check that no run is open, then meet in
    ``Msprof.init`` (a barrier there), which opens one run at a time: one wins, the other is refused."""

    def __init__(self, monkeypatch) -> None:
        self.barrier = threading.Barrier(2, timeout=10)
        self.tried = threading.Barrier(2, timeout=10)  # the winner keeps its run open until the loser tried
        real_init = msprof.Msprof.init
        self.entered: list[str] = []

        def init(lib, *args, **kwargs):
            if lib is msprof.lib and len(self.entered) < 2:
                self.entered.append(threading.current_thread().name)
                self.barrier.wait()
            return real_init(lib, *args, **kwargs)

        monkeypatch.setattr(msprof.Msprof, "init", init)

    def run(self, *openers) -> list:
        results: list = [None, None]
        errors: list[BaseException] = []

        def go(i: int) -> None:
            try:
                results[i] = openers[i](self.tried)
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                errors.append(exc)

        threads = [threading.Thread(target=go, args=(i,), name=f"opener{i}") for i in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(30)
        assert not errors, errors
        assert sorted(self.entered) == ["opener0", "opener1"]  # both had passed their checks
        return results


def _block(out: Path):
    def opener(tried: threading.Barrier) -> tuple:
        try:
            with geprof_nb.profile(output=str(out)) as run:
                opened = msprof.lib.run_dir
                tried.wait()
        except AlreadyCollecting as exc:
            tried.wait()
            return ("refused", str(exc))
        assert run.run_dir == opened and run.profile.complete
        return ("opened", opened)
    return opener


def _c_api(out: Path):
    def opener(tried: threading.Barrier) -> tuple:
        status, message = ge.aclgrphProfInit(str(out)), ge.GEGetErrorMsg()
        opened = msprof.lib.run_dir
        tried.wait()
        if status != ge.SUCCESS:
            return ("refused", message)
        assert ge.aclgrphProfFinalize() == ge.SUCCESS
        return ("opened", opened)
    return opener


def _cell(out: Path):
    """The ``%%geprof`` core (``collect``): its AlreadyCollecting is the magic's UsageError."""
    def opener(tried: threading.Barrier) -> tuple:
        try:
            collected = collect(lambda: tried.wait(), ProfilingOptions(output=str(out)), info_key="magic")
        except AlreadyCollecting as exc:
            tried.wait()
            return ("refused", str(exc))
        return ("opened", collected.run_dir)
    return opener


def _ge_options(out: Path):
    def opener(tried: threading.Barrier) -> tuple:
        options = {"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": json.dumps({"output": str(out)})}
        assert ge.GEInitialize(options) == ge.SUCCESS
        opened, mine = msprof.lib.run_dir, msprof.lib.mode == "ge_options"
        tried.wait()
        assert ge.GEFinalize() == ge.SUCCESS
        return ("opened", opened) if mine else ("refused", "options ignored")
    return opener


OPENED_BY = {_block: "a geprof_nb.profile() block", _c_api: "aclgrphProfInit", _cell: "a %%geprof cell",
             _ge_options: "GE's profiling options (ge.exec.profilingMode or the environment)"}
REFUSAL = {
    _block: "profiling is already collecting into {run} (opened by {by}); ",
    _cell: "profiling is already collecting into {run} (opened by {by}); ",
    _c_api: "[FAILED] aclgrphProfInit: another profiling mode is collecting into {run} (opened by {by}); the api "
            "mode cannot start; ",
}


@pytest.mark.parametrize("first, second", [(_block, _block), (_block, _c_api), (_cell, _block), (_block, _ge_options)],
                         ids=["block-block", "block-c_api", "cell-block", "block-ge_options"])
def test_two_openers_at_once_the_loser_is_told_what_opened_the_run(tmp_path, monkeypatch, first, second):
    if second in (_c_api,):
        assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS  # the C API needs GE
    race = _Race(monkeypatch)
    outs = [tmp_path / "a", tmp_path / "b"]
    results = race.run(first(outs[0]), second(outs[1]))
    assert sorted(r[0] for r in results) == ["opened", "refused"], results
    won = 0 if results[0][0] == "opened" else 1
    lost = 1 - won
    winner, loser = (first, second)[won], (first, second)[lost]
    run_dir = results[won][1]
    assert run_dir.parent == outs[won].resolve()
    if loser is _ge_options:  # GE goes on without profiling, as when it finds a run open before it opens one
        assert results[lost][1] == "options ignored"
    else:
        assert results[lost][1].startswith(REFUSAL[loser].format(run=run_dir, by=OPENED_BY[winner])), results[lost]
    assert not outs[lost].exists() or not list(outs[lost].iterdir())  # the loser made no run directory
    assert geprof_nb.load(run_dir).complete and not msprof.lib.running


def test_twenty_natural_races_of_two_blocks_each_refuse_one_with_already_collecting(tmp_path):
    for trial in range(20):
        tried = threading.Barrier(2, timeout=10)
        start = threading.Barrier(2, timeout=10)
        results: list = [None, None]

        def go(i: int) -> None:
            start.wait()
            results[i] = _block(tmp_path / f"t{trial}")(tried)

        threads = [threading.Thread(target=go, args=(i,)) for i in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(30)
        assert sorted(r[0] for r in results) == ["opened", "refused"], (trial, results)
        refused = next(r[1] for r in results if r[0] == "refused")
        assert "(opened by a geprof_nb.profile() block); let it finish first" in refused
        assert len(list((tmp_path / f"t{trial}").iterdir())) == 1


def test_a_cell_whose_run_another_thread_opened_after_its_check_is_a_usage_error(ip, tmp_path, monkeypatch):
    """The cell passed its check that no run is open; a block in another thread opens one before the cell's:
    the cell is refused as a usage error naming the block, not a traceback, and runs nothing."""
    from IPython.core.error import UsageError

    opened, release = threading.Event(), threading.Event()

    def other() -> None:
        with geprof_nb.profile(output=str(tmp_path / "block")):
            opened.set()
            release.wait(10)

    block = threading.Thread(target=other)
    real_init = msprof.Msprof.init

    def init(lib, *args, **kwargs):
        if threading.current_thread() is threading.main_thread() and not opened.is_set():
            block.start()
            assert opened.wait(10)
        return real_init(lib, *args, **kwargs)

    monkeypatch.setattr(msprof.Msprof, "init", init)
    try:
        run_dir = None
        with pytest.raises(UsageError) as refused:
            ip.run_cell_magic("geprof", f"--output {tmp_path / 'cell'} --no-display", "ran = True")
        run_dir = msprof.lib.run_dir
    finally:
        release.set()
        block.join(10)
    assert str(refused.value) == (f"profiling is already collecting into {run_dir} (opened by a geprof_nb.profile() "
                                  "block); let it finish first")
    assert "ran" not in ip.user_ns and not (tmp_path / "cell").exists()
