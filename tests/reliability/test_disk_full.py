"""Disk full is never silent.

A process whose file-size limit is reached (``RLIMIT_FSIZE``, SIGXFSZ ignored: every write past it fails with
EFBIG, a write across it is cut short) profiles 30 steps of a ResNet-50 training run.  Whatever call finishes
the run (``GEFinalize``, ``aclgrphProfFinalize``, the ``profile()`` block, the ``%%geprof`` magic):

* what could not be written is counted per record kind, exactly: the records that load and the records
  counted as not written add up to what the same run writes without a limit, kind by kind (a chunk the
  limit cut keeps its whole records);
* it is said in the run's notes and, once, on stderr;
* the finishing call's status says it (GE's ``FAILED`` with ``GEGetErrorMsg``, ``write_problem``, the
  Profile bound by the magic).

Then each write path on its own (in this process, one failing at a time): a device chunk kind, a host one,
the hash dictionary's names, info.json, the chunk directories.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.prof import msprof, rawdata, writer
from helpers.reliability_helpers import run_steps, tiny_mlp

ROOT = Path(__file__).resolve().parents[2]
STEPS = 30

LIMITED = """
import json, os, resource, signal, sys
from contextlib import redirect_stdout
out, call, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
import geprof_nb
from geprof_nb import ge
from geprof_nb.prof import msprof

options = {"output": out, "training_trace": "on", "task_trace": "on"}
ge_options = {"geprof.clock": "virtual"}
if call == "ge":
    ge_options.update({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": json.dumps(options)})
assert ge.GEInitialize(ge_options) == ge.SUCCESS
sess = ge.Session()
assert sess.add_graph(1, ge.models.resnet50(batch_size=8)) == ge.SUCCESS
result = {}
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
if limit:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

def steps():
    for _ in range(STEPS):
        assert sess.run_graph(1) == ge.SUCCESS

if call == "ge":
    steps()
    status = ge.GEFinalize()
    result = {"status": int(status), "message": ge.GEGetErrorMsg()}
elif call == "api":
    from geprof_nb.prof.events import ProfDataTypeConfig as D, ProfilingAicoreMetrics as M
    config = ge.aclgrphProfCreateConfig([0], M.kAicorePipeUtilization,
                                        D.kProfTaskTime | D.kProfAiCoreMetrics | D.kProfTrainingTrace)
    assert ge.aclgrphProfInit(out) == ge.SUCCESS and ge.aclgrphProfStart(config) == ge.SUCCESS
    steps()
    assert ge.aclgrphProfStop(config) == ge.SUCCESS
    status = ge.aclgrphProfFinalize()
    result = {"status": int(status), "message": ge.GEGetErrorMsg()}
elif call == "block":
    with geprof_nb.profile(output=out, aic_metrics="PipeUtilization") as run:
        steps()
    result = {"write_problem": run.write_problem, "repr": repr(run), "dropped": run.profile.dropped}
else:
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "geprof_nb")
    shell.user_ns["steps"] = steps
    with redirect_stdout(sys.stderr):
        shell.run_cell_magic("geprof", f"--output {out} --no-display", "steps()")
    from geprof_nb.nb.report import Report
    p = shell.user_ns["_geprof"]
    result = {"dropped": p.dropped, "notes": p.notes, "headline": Report(p).headline}
    ge.GEFinalize()
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
print(json.dumps(result))
""".replace("STEPS", str(STEPS))

NOT_EVERYTHING = "not everything could be written into the run directory "


def _run(tmp_path: Path, call: str, limit: int) -> tuple[dict, str, Path]:
    out = tmp_path / f"{call}-{limit}"
    done = subprocess.run([sys.executable, "-c", LIMITED, str(out), call, str(limit)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (run_dir,) = out.iterdir()
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr, run_dir


@pytest.fixture(scope="module")
def unlimited(tmp_path_factory):
    """``unlimited(call)``: records per kind the run finished by ``call`` writes without a limit."""
    counts: dict[str, dict[str, int]] = {}

    def of(call: str) -> dict[str, int]:
        if call not in counts:
            _, stderr, run_dir = _run(tmp_path_factory.mktemp("unlimited"), call, 0)
            assert NOT_EVERYTHING not in stderr, stderr
            p = geprof_nb.load(run_dir)
            assert p.complete and p.dropped == {}
            counts[call] = {kind: len(p.run.load(kind)) for kind in rawdata.RECORD_KINDS if len(p.run.load(kind))}
        return counts[call]

    return of


def _said_once(stderr: str, run_dir: Path) -> str:
    lines = [line for line in stderr.splitlines() if NOT_EVERYTHING in line]
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"geprof: {NOT_EVERYTHING}{run_dir} (File too large, first at ")
    return lines[0]


def _counts_add_up(p, unlimited: dict[str, int], said: str) -> dict[str, int]:
    """What loads plus what is counted as not written is what the run wrote without a limit, per kind;
    each count is in the stderr line.  Returns the counts."""
    lost = {k.removesuffix(" (not written)"): n for k, n in p.dropped.items() if k.endswith(" (not written)")}
    assert lost, p.dropped
    for kind, n in unlimited.items():
        assert len(p.run.load(kind)) + lost.get(kind, 0) == n, kind
        if lost.get(kind):
            assert f"{lost[kind]} {kind} records" in said
    return lost


# ------------------------------------------------------------------------ each call that finishes the run
LIMIT = 300_000  # the hwts chunk (~660 kB) is cut; every other file fits


@pytest.mark.slow
@pytest.mark.parametrize("call", ["ge", "api", "block", "magic"])
def test_a_file_size_limit_is_counted_said_once_and_in_the_finishing_calls_status(tmp_path, unlimited, call):
    result, stderr, run_dir = _run(tmp_path, call, LIMIT)
    said = _said_once(stderr, run_dir)
    p = geprof_nb.load(run_dir)
    assert p.complete  # info.json fits: the run is finalised, with its counts
    lost = _counts_add_up(p, unlimited(call), said)
    kept = len(p.run.load("hwts"))
    assert kept == (LIMIT - len(rawdata.npy_header(rawdata.HWTS_DTYPE, 0))) // rawdata.HWTS_DTYPE.itemsize
    assert lost["hwts"] == unlimited(call)["hwts"] - kept  # the cut chunk keeps its whole records
    assert f"{lost['hwts']} hwts records could not be written to the run directory (disk full or not writable)" \
        in p.notes
    assert any(n.startswith("writing into the run directory failed (File too large, first at ") for n in p.notes)
    assert said.endswith("; what was written loads, and the run's notes say what is missing")
    if call in ("ge", "api"):
        finishing = "GEFinalize" if call == "ge" else "aclgrphProfFinalize"
        assert result["status"] == int(ge.FAILED)
        assert result["message"] == f"[FAILED] {finishing}: {said.removeprefix('geprof: ')}"
    elif call == "block":
        assert result["write_problem"] == said and result["repr"].endswith("; not everything could be written "
                                                                             "(write_problem)>")
        assert result["dropped"] == p.dropped
    else:
        assert result["dropped"] == p.dropped and result["notes"] == p.notes
        assert f"{sum(lost.values())} records LOST (dropped or not written; see Notes)" in result["headline"]


@pytest.mark.slow
def test_a_limit_below_the_final_info_json_says_the_run_directory_keeps_an_older_one(tmp_path, unlimited):
    """Under 6 kB: info.json's first writes fit, its last does not, nor most chunks, nor the hash dictionary.
    GEFinalize fails saying so; the run directory loads as an unfinished run with what was written."""
    result, stderr, run_dir = _run(tmp_path, "ge", 5_000)
    said = _said_once(stderr, run_dir)
    assert said.endswith("; its info.json is an older one (status 'running', without these counts): loading the "
                         "run directory shows what was written, as an unfinished run")
    assert " hash_dict names" in said  # the names past 5 kB
    assert result == {"status": int(ge.FAILED), "message": f"[FAILED] GEFinalize: {said.removeprefix('geprof: ')}"}
    p = geprof_nb.load(run_dir)
    assert not p.complete and p.info["status"] == "running"
    lost = dict(part.rsplit(" ", 2)[:2][::-1] for part in said.split(": not written: ")[1].split(";")[0].split(", "))
    for kind, n in unlimited("ge").items():  # the counts said add up with what loads
        assert len(p.run.load(kind)) + int(lost.get(kind, 0)) == n, kind


# --------------------------------------------------------------------- each write path on its own, in-process
def _profiled(output: Path) -> ge.Session:
    status = ge.GEInitialize({"ge.exec.profilingMode": "1", "geprof.clock": "virtual", "ge.exec.profilingOptions":
                              json.dumps({"output": str(output), "training_trace": "on", "task_trace": "on"})})
    assert status == ge.SUCCESS
    sess = ge.Session()
    assert sess.add_graph(1, tiny_mlp()) == ge.SUCCESS
    return sess


@pytest.fixture
def reference_counts(tmp_path) -> dict[str, int]:
    sess = _profiled(tmp_path / "reference")
    run_steps(sess, 1, 3)
    assert ge.GEFinalize() == ge.SUCCESS
    p = geprof_nb.load(tmp_path / "reference")
    return {kind: len(p.run.load(kind)) for kind in rawdata.RECORD_KINDS if len(p.run.load(kind))}


def _full_when(monkeypatch, failing) -> None:
    """Every chunk file whose path ``failing(path)`` accepts cannot be created (ENOSPC)."""
    real_create = writer._create

    def create(path: str) -> int:
        if failing(path):
            raise OSError(errno.ENOSPC, "No space left on device", path)
        return real_create(path)

    monkeypatch.setattr(writer, "_create", create)


@pytest.mark.parametrize("where, kinds", [
    ("device_0/data/hwts.", {"hwts"}),
    ("host/data/api.", {"api"}),
    ("device_0/data/", {"hwts", "step_trace", "task_track", "aicore_events", "op_cost", "hccl_task", "hccl_op",
                         "memcpy_info"}),
])
def test_a_chunk_kind_that_cannot_be_written_is_counted_exactly(tmp_path, monkeypatch, capsys, reference_counts,
                                                                 where, kinds):
    sess = _profiled(tmp_path / "out")
    _full_when(monkeypatch, lambda path: where in path)
    run_steps(sess, 1, 3)
    assert ge.GEFinalize() == ge.FAILED
    monkeypatch.undo()
    p = geprof_nb.load(tmp_path / "out")
    lost = {k.removesuffix(" (not written)"): n for k, n in p.dropped.items()}
    assert lost == {kind: reference_counts[kind] for kind in kinds if kind in reference_counts}
    for kind in lost:
        assert len(p.run.load(kind)) == 0
    for kind in set(reference_counts) - kinds:  # everything else is there
        assert len(p.run.load(kind)) == reference_counts[kind], kind
    said = [line for line in capsys.readouterr().err.splitlines() if NOT_EVERYTHING in line]
    assert len(said) == 1 and "(No space left on device, first at " in said[0]
    assert ge.GEGetErrorMsg() == f"[FAILED] GEFinalize: {said[0].removeprefix('geprof: ')}"


def test_names_the_hash_dictionary_could_not_take_are_counted(tmp_path, monkeypatch, capsys):
    sess = _profiled(tmp_path / "out")
    real_open = open

    def full(file, mode="r", *args, **kwargs):
        if "a" in mode:
            raise OSError(errno.ENOSPC, "No space left on device", str(file))
        return real_open(file, mode, *args, **kwargs)

    from geprof_nb.prof import hash_dict

    monkeypatch.setattr(hash_dict, "open", full, raising=False)
    run_steps(sess, 1, 2)
    names = len(msprof.lib.hashes.lines)  # every name the process knows goes into each run's dictionary
    assert ge.GEFinalize() == ge.FAILED
    monkeypatch.undo()
    p = geprof_nb.load(tmp_path / "out")
    assert p.dropped == {"hash_dict (not written)": names}
    assert (f"{names} names of the hash dictionary could not be written to the run directory (disk full or not "
            "writable): the records that use them show <unknown 0x...>") in p.notes
    assert p.op_summary["Op Name"].astype(str).str.startswith("<unknown 0x").all()
    said = [line for line in capsys.readouterr().err.splitlines() if NOT_EVERYTHING in line]
    assert len(said) == 1 and f": not written: {names} hash_dict names; " in said[0]


def test_an_info_json_that_cannot_be_replaced_at_the_end_is_said(tmp_path, monkeypatch, capsys):
    """Only the final info.json fails: no record is lost, but the run directory's status is an older one: the
    finishing call says so (the only place it can be said)."""
    sess = _profiled(tmp_path / "out")
    run_steps(sess, 1, 2)
    run_dir = msprof.lib.run_dir
    real_replace = os.replace

    def replace(src, dst, **kwargs):
        if Path(dst).name == rawdata.INFO_FILE:
            raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        return real_replace(src, dst, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    assert ge.GEFinalize() == ge.FAILED
    monkeypatch.undo()
    said = [line for line in capsys.readouterr().err.splitlines() if NOT_EVERYTHING in line]
    assert said == [f"geprof: {NOT_EVERYTHING}{run_dir} (No space left on device, first at info.json); its info.json "
                    "is an older one (status 'running', without these counts): loading the run directory shows what "
                    "was written, as an unfinished run"]
    p = geprof_nb.load(run_dir)
    assert not p.complete and len(p.step_trace) == 2


def test_a_run_that_wrote_everything_finishes_with_success_and_says_nothing(tmp_path, capsys):
    sess = _profiled(tmp_path / "out")
    run_steps(sess, 1, 2)
    assert ge.GEFinalize() == ge.SUCCESS and ge.GEGetErrorMsg() == ""
    assert NOT_EVERYTHING not in capsys.readouterr().err
    with geprof_nb.profile(output=str(tmp_path / "block")) as run:
        pass
    assert run.write_problem == "" and "not everything" not in repr(run)


def test_a_chunk_directory_that_cannot_be_made_loses_only_its_kinds(tmp_path, capsys, reference_counts):
    """``device_0`` is taken by a file (someone else's, a failed copy): no device chunk can be made, every
    device record is counted, the host's are all there."""
    sess = _profiled(tmp_path / "out")
    run_dir = msprof.lib.run_dir
    (run_dir / "device_0").write_text("not a directory")
    run_steps(sess, 1, 3)
    assert ge.GEFinalize() == ge.FAILED
    p = geprof_nb.load(run_dir)
    device = {k for k, spec in rawdata.RECORD_KINDS.items() if spec.side == "device" and k in reference_counts}
    assert {k.removesuffix(" (not written)"): n for k, n in p.dropped.items()} == {
        kind: reference_counts[kind] for kind in device}
    for kind in set(reference_counts) - device:
        assert len(p.run.load(kind)) == reference_counts[kind], kind
    said = [line for line in capsys.readouterr().err.splitlines() if NOT_EVERYTHING in line]
    assert len(said) == 1 and "first at device_0/data/" in said[0]
