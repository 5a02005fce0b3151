"""A kill at any moment loses only what was never handed to the writer.

A 300-step ResNet-50 training run (batch 8, GE options, the virtual clock: every run is the same run) is
killed with SIGKILL at random moments, from the first step to the finalise (``helpers/killed_runs.py``
forks each run from a server that imported geprof_nb once), many seeds.  Each child logs, from the
writer thread, how many records of each chunk file had reached the disk.  Each time:

* the run loads and says it is incomplete (status "running", the note, the repr);
* every record that reached the disk loads, unchanged: each kind's records are the first ones of the
  same run finalised (the reference), at least as many as the log says reached the disk; a block cut
  by the kill loses only its torn last record, which the notes name with its bytes;
* every step whose records reached the disk loads: its step_trace row and op rows are the reference's,
  with the names of its ops (the hash dictionary reached the disk before the records that use it).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import geprof_nb
from geprof_nb.prof import rawdata

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "tests" / "helpers" / "killed_runs.py"
SEEDS = 100
MODES = ("step", "job", "torn", "timer")
STEPS = 300
#: Fields that differ between two processes running the same run (the native thread id, the pid).
PER_PROCESS = {"thread_id", "tid", "pid"}
#: Kinds reported both as blocks and as rows gathered until a checkpoint: their order in a chunk depends
#: on when the timed checkpoints came, so they are compared as multisets.
ROWS_AND_BLOCKS = {"api"}


class Server:
    """The fork server: ``run(request)`` forks a run and answers how it ended."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, str(SERVER)], cwd=ROOT, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ready = self.proc.stdout.readline()
        assert ready, self.proc.stderr.read()

    def run(self, request: dict) -> dict:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        assert answer, self.proc.stderr.read()
        return json.loads(answer)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _log(path: Path) -> tuple[dict[str, int], dict[str, tuple[int, int]], list[str]]:
    """(chunk -> records that reached the disk, torn chunk -> (whole records, torn bytes), DONE line) of a
    child's log; a chunk is named by its path without suffix (its .tmp and its .npy are one chunk)."""
    reached: dict[str, int] = {}
    torn: dict[str, tuple[int, int]] = {}
    done: list[str] = []
    for line in path.read_text().splitlines():
        what, *rest = line.split()
        if what == "DONE":
            done = rest
            continue
        chunk, records = rest[0].rsplit(".", 1)[0], int(rest[1])
        reached[chunk] = max(reached.get(chunk, 0), records)
        if what == "T":
            torn[chunk] = (records, int(rest[2]))
    return reached, torn, done


def _kind_of(chunk: str) -> str:
    return Path(chunk).name.split(".", 1)[0]


def _comparable(records: np.ndarray) -> np.ndarray:
    """``records`` without the fields that name the process that wrote them."""
    names = [n for n in records.dtype.names if n not in PER_PROCESS]
    return np.ascontiguousarray(records[names]) if len(names) < len(records.dtype.names) else records


@pytest.fixture(scope="module")
def server():
    s = Server()
    yield s
    s.close()


@pytest.fixture(scope="module")
def reference(server, tmp_path_factory):
    """The same run, finalised: its records per kind, its tables, and how many writer jobs, block writes and
    seconds it took (where the kill moments are drawn from)."""
    out = tmp_path_factory.mktemp("reference")
    answer = server.run({"mode": "none", "out": str(out / "out"), "log": str(out / "log")})
    assert answer == {"killed": False, "exit": 0}
    _, _, done = _log(out / "log")
    p = geprof_nb.load(out / "out")
    assert p.complete and len(p.step_trace) == STEPS
    kinds = {kind: p.run.load(kind) for kind in rawdata.RECORD_KINDS}
    return {"profile": p, "records": {k: v for k, v in kinds.items() if len(v)}, "jobs": int(done[0]),
            "writes": int(done[1]), "seconds": float(done[2])}


def _request(seed: int, reference: dict, out: Path) -> dict:
    rng = random.Random(seed)
    mode = MODES[seed % len(MODES)]
    request = {"mode": mode, "out": str(out / "out"), "log": str(out / "log")}
    if mode == "step":
        request["at"] = rng.randint(1, STEPS)
    elif mode == "job":  # a few jobs short of the last: timed checkpoints make the count vary by one or two
        request["at"] = rng.randint(1, reference["jobs"] - 3)
    elif mode == "torn":
        request["at"], request["cut"] = rng.randint(1, reference["writes"] - 2), rng.random()
    else:
        request["delay"] = rng.uniform(0, 0.9 * reference["seconds"])
    return request


@pytest.mark.slow
def test_a_kill_at_any_moment_loses_only_what_never_reached_the_disk(server, reference, tmp_path):
    ref = reference["profile"]
    ops_per_step = len(ref.op_summary) // STEPS
    killed_at = Counter()
    for seed in range(SEEDS):
        for attempt in range(3):  # a timer late on a loaded machine: the run ended first; again, half as late
            out = tmp_path / f"seed{seed}" / str(attempt)
            out.mkdir(parents=True)
            request = _request(seed, reference, out)
            if attempt:
                request["delay"] /= 2**attempt
            answer = server.run(request)
            where = f"seed {seed}: {request}"
            assert answer["killed"] or answer["exit"] == 0, where
            reached, torn, done = _log(out / "log")
            p = geprof_nb.load(out / "out")
            if answer["killed"] or request["mode"] != "timer":
                break
            assert done and p.complete and len(p.op_summary) == len(ref.op_summary), where
        if not answer["killed"]:
            assert done and p.complete and len(p.op_summary) == len(ref.op_summary), where
            continue
        killed_at[request["mode"]] += 1

        # marked incomplete
        assert not p.complete and p.info["status"] == "running", where
        assert "the run was not finalised (crash or kill?): tables hold what was flushed" in p.notes, where
        assert "(incomplete)" in repr(p)

        # every record that reached the disk loads, unchanged, and nothing else
        on_disk: Counter = Counter()
        for chunk, n in reached.items():
            on_disk[_kind_of(chunk)] += n
        loaded = {kind: p.run.load(kind) for kind in rawdata.RECORD_KINDS}
        for kind, records in loaded.items():
            assert len(records) >= on_disk[kind], (where, kind, len(records), on_disk[kind])
            full = reference["records"].get(kind, records[:0])
            assert len(records) <= len(full), (where, kind)
            mine, theirs = _comparable(records), _comparable(full[:len(records)])
            if kind in ROWS_AND_BLOCKS:
                assert Counter(mine.tolist()) <= Counter(_comparable(full).tolist()), (where, kind)
            else:
                assert np.array_equal(mine, theirs), (where, kind)
        # nothing damaged, nothing missing: the names a record uses reach the disk before it (a kill from
        # outside at any moment, on a loaded machine too, leaves no record whose name is not there)
        assert p.run.damaged == [] and p.run.missing == [], (where, p.run.damaged)

        # a block the kill cut: its whole records load, the torn one is dropped and named
        for chunk, (whole, torn_bytes) in torn.items():
            salvaged = {str(c.path.with_suffix("")): c for c in p.run.salvaged}
            assert (salvaged[chunk].records, salvaged[chunk].torn_bytes) == (whole, torn_bytes), where
            relative = Path(chunk + ".tmp").relative_to(p.path)
            itemsize = rawdata.RECORD_KINDS[_kind_of(chunk)].dtype.itemsize
            said = f"{relative}: a torn last record ({torn_bytes} of {itemsize} bytes) dropped"
            assert (said in p.notes) == (torn_bytes > 0), (where, p.notes)
        growing = {kind: sum(c.records for c in p.run.salvaged if _kind_of(str(c.path)) == kind)
                   for kind in rawdata.RECORD_KINDS}
        if any(growing.values()):
            counts = ", ".join(f"{n} {kind}" for kind, n in growing.items() if n)
            assert any(n.startswith("salvaged ") and all(f"{n_} {k}" in n for k, n_ in growing.items() if n_)
                       for n in p.notes), (where, counts, p.notes)

        # every step whose records reached the disk loads, as in the finalised run: its step trace and its ops
        def whole_steps(kind: str, field: str) -> list[int]:
            mine, theirs = loaded[kind][field], reference["records"][kind][field]
            steps = [i for i in range(1, STEPS + 1) if (mine == i).sum() == (theirs == i).sum()]
            assert steps == list(range(1, len(steps) + 1)), (where, kind)  # the steps on disk are the first ones
            return steps

        traced, timed = whole_steps("step_trace", "index_id"), whole_steps("hwts", "iteration")
        if traced:
            st = p.step_trace
            mine = st[st["Iteration ID"].isin(traced)].reset_index(drop=True)
            theirs = ref.step_trace[ref.step_trace["Iteration ID"].isin(traced)].reset_index(drop=True)
            pd.testing.assert_frame_equal(mine, theirs, obj=where)
        assert set(timed) <= set(p.iterations) <= set(np.unique(loaded["hwts"]["iteration"]).tolist()), where
        assert ops_per_step * len(timed) <= len(p.op_summary) <= ops_per_step * (len(timed) + 1), where
        if timed:
            pd.testing.assert_frame_equal(p.ops(timed[-1]).reset_index(drop=True),
                                          ref.ops(timed[-1]).reset_index(drop=True), obj=where)
        assert not p.op_summary["Op Name"].astype(str).str.startswith("<unknown").any(), where
    assert sum(killed_at.values()) >= SEEDS - 4 and all(killed_at[m] >= SEEDS // len(MODES) - 4 for m in MODES), \
        killed_at
