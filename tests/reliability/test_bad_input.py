"""Bad input gives a clear error, and nothing already collected is lost.

Table-driven, one table per kind of input: profilingOptions (parsed and through
GEInitialize), output directories that cannot be used, fp/bp points naming no op,
%%geprof flags and their conflicts with %geprof config defaults, misuse of the
aclgrphProf* C API, broken graphs, and damaged files for every importer and for
the run directory.  Every case asserts the exception type (or return code), that
the message names the field or file and says what is accepted, and that the run
made before the bad input is still on disk, unchanged and loadable.

The cases here are distinct from the ones in tests/prof/test_options.py,
tests/ge/test_prof_api.py, tests/analysis/sources/test_import_errors.py and
tests/nb/test_panel.py (which cover the first layer of each).
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import warnings
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import geprof_nb
from geprof_nb import ge
from geprof_nb.cli import main
from geprof_nb.errors import ImportFormatError
from geprof_nb.ge import acl, ge_prof
from geprof_nb.ge import status as ge_status
from geprof_nb.ge.graph import GraphBuildError
from geprof_nb.ge.serialize import MAGIC
from geprof_nb.nb.config import ConfigStore
from geprof_nb.nb.panel import ConfigPanel
from geprof_nb.prof import msprof, rawdata
from geprof_nb.prof.options import ProfilingOptions, ProfilingOptionsError
from geprof_nb.prof.properties import ProfilingProperties
from helpers.real_fixtures import STAMP, write_ascend_pt, write_msprof
from helpers.reliability_helpers import FaultyDisk, n_kernels, profiled_ge, run_steps, tiny_mlp

D = ge.ProfDataTypeConfig
M = ge.ProfilingAicoreMetrics
BITS = D.kProfTaskTime | D.kProfTrainingTrace
METRICS = ("'ArithmeticUtilization', 'PipeUtilization', 'Memory', 'MemoryL0', 'MemoryUB', 'ResourceConflictRatio', "
           "'L2Cache', 'MemoryAccess'")


def prof_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("PROF_*") if p.is_dir())


# ================================================================================ options
#: (id, profilingOptions text, field named, fragments of the message)
OPTION_CASES = [
    ("not-utf8-bytes", b'{"output": "\xe9t\xe9"}', "ge.exec.profilingOptions", ["is not UTF-8 text", "a JSON object"]),
    ("json-null", "null", "ge.exec.profilingOptions", ["must be a JSON object, got a JSON null"]),
    ("json-number", "42", "ge.exec.profilingOptions", ["must be a JSON object, got a JSON number"]),
    ("trailing-garbage", '{"output": "x"} tail', "ge.exec.profilingOptions", ["not valid JSON (Extra data at line 1"]),
    ("single-quotes", "{'output': 'x'}", "ge.exec.profilingOptions",
     ["not valid JSON (Expecting property name enclosed in double quotes", 'such as {"output"']),
    ("utf8-bom", '\ufeff{"output": "x"}', "ge.exec.profilingOptions", ["not valid JSON (Unexpected UTF-8 BOM"]),
    ("output-null", '{"output": null}', "output", ["must be a string, got JSON null;", "a directory path"]),
    ("output-number", '{"output": 5}', "output", ["must be a string, got JSON number 5", "a directory path"]),
    ("output-nul-byte", '{"output": "prof\\u0000dir"}', "output", ["contains a NUL byte", "without NUL bytes"]),
    ("output-lone-surrogate", '{"output": "\\ud800prof"}', "output", ["cannot be encoded as a file name",
                                                                     "valid Unicode characters"]),
    ("aic-metrics-lowercase", '{"aic_metrics": "pipeutilization"}', "aic_metrics",
     ["'pipeutilization' is not valid", METRICS]),
    ("aic-metrics-empty", '{"aic_metrics": ""}', "aic_metrics", ["'' is not valid", METRICS, "'Custom:0x..'"]),
    ("aic-metrics-list", '{"aic_metrics": ["Memory"]}', "aic_metrics", ['got JSON array ["Memory"]', METRICS]),
    ("aic-metrics-custom-empty", '{"aic_metrics": "Custom:"}', "aic_metrics", ["names 0 events", "1 to 8 hex"]),
    ("aic-metrics-custom-underscore", '{"aic_metrics": "Custom:1_0"}', "aic_metrics",
     ["'1_0' is not a hex number", "[0x1, 0x6E]"]),
    ("storage-limit-lowercase-unit", '{"storage_limit": "500mb"}', "storage_limit",
     ["the unit MB is required", "'<n>MB' with 200 <= n <= 4294967295"]),
    ("storage-limit-gigabytes", '{"storage_limit": "1.5GB"}', "storage_limit",
     ["'1.5GB' is not valid", "e.g. '200MB'"]),
    ("storage-limit-negative", '{"storage_limit": "-300MB"}', "storage_limit", ["'-300MB' is not valid"]),
    ("storage-limit-fullwidth-digits", '{"storage_limit": "\uff15\uff10\uff10MB"}', "storage_limit",
     ["the unit MB is required", "'<n>MB'"]),
    ("storage-limit-number", '{"storage_limit": 500}', "storage_limit", ["must be a string, got JSON number 500",
                                                                        "'<n>MB', e.g. '200MB'"]),
    ("freq-underscore", '{"sys_hardware_mem_freq": "1_0"}', "sys_hardware_mem_freq", ["'1_0' is not a number",
                                                                                     "1..100"]),
    ("freq-float", '{"sys_io_sampling_freq": 1.5}', "sys_io_sampling_freq", ["must be an integer, got JSON number 1.5",
                                                                            "1..100"]),
    ("freq-zero", '{"sys_interconnection_freq": "0"}', "sys_interconnection_freq", ["0 is out of range", "1..50"]),
    ("training-trace-uppercase", '{"training_trace": "ON"}', "training_trace", ["'ON' is not valid",
                                                                               "'on', 'off', ''"]),
    ("training-trace-null", '{"training_trace": null}', "training_trace", ["got JSON null", "'on', 'off', ''"]),
    ("training-trace-one", '{"training_trace": 1}', "training_trace", ["got JSON number 1", "'on', 'off', ''"]),
    ("ge-api-l2", '{"ge_api": "l2"}', "ge_api", ["'l2' is not valid", "'off', 'l0', 'l1'"]),
    ("ge-api-true", '{"ge_api": true}', "ge_api", ["got JSON boolean true", "'off', 'l0', 'l1'"]),
    ("msproftx-yes", '{"msproftx": "yes"}', "msproftx", ["'yes' is not valid", "'on', 'off'"]),
    ("llc-profiling-both", '{"llc_profiling": "both"}', "llc_profiling", ["'both' is not valid", "'read', 'write'"]),
    ("host-sys-usage-disk", '{"host_sys_usage": "cpu,disk"}', "host_sys_usage",
     ["'cpu,disk' is not valid", "a comma-separated subset of cpu,mem"]),
    ("instr-freq-below-range", '{"instr_profiling_freq": "299"}', "instr_profiling_freq", ["299 is out of range",
                                                                                          "300..30000"]),
]


@pytest.mark.parametrize("case", OPTION_CASES, ids=[c[0] for c in OPTION_CASES])
def test_bad_profiling_options(case, earlier_run, monkeypatch, tmp_path):
    _, text, field, fragments = case
    with pytest.raises(ProfilingOptionsError) as err:
        ProfilingOptions.parse(text)
    msg = str(err.value)
    assert type(err.value) is ProfilingOptionsError and isinstance(err.value, ValueError)
    assert err.value.field == field and msg.startswith(f"profiling option {field!r}: ")
    assert "; accepted: " in msg and err.value.accepted
    for fragment in fragments:
        assert fragment in msg, (fragment, msg)

    # through GEInitialize (GE options are str): PARAM_INVALID naming the field, nothing opened
    monkeypatch.chdir(tmp_path)
    ge_text = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    status = ge.GEInitialize({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": ge_text})
    if isinstance(text, bytes):  # the replacement character makes it valid: bytes reach only the parser
        ge.GEFinalize()
    else:
        assert status == ge.PARAM_INVALID and status.name == "PARAM_INVALID"
        assert field in ge.GEGetErrorMsg() and fragments[0] in ge.GEGetErrorMsg()
        assert not ge.session.is_initialized() and not msprof.lib.running
    assert prof_dirs(tmp_path) == [earlier_run.run_dir] or isinstance(text, bytes)
    earlier_run.assert_intact()


#: (id, options, the warning's fragments): unknown fields warn, the run goes on
UNKNOWN_FIELD_CASES = [
    ("typo-suggests-the-field", {"training_trac": "on"},
     ["profiling option 'training_trac' is not known to GE and is ignored (did you mean 'training_trace'?)"]),
    ("nested-value", {"vendor_extension": {"level": [1, 2]}},
     ["profiling option 'vendor_extension' is not known to GE and is ignored"]),
    ("alias-typo", {"task_tim": "l0"}, ["'task_tim' is not known", "(did you mean 'task_time'?)"]),
]


@pytest.mark.parametrize("case", UNKNOWN_FIELD_CASES, ids=[c[0] for c in UNKNOWN_FIELD_CASES])
def test_unknown_fields_warn_and_the_run_goes_on(case, earlier_run):
    _, extra, fragments = case
    opts = json.dumps({"output": str(earlier_run.output), "training_trace": "on", **extra})
    with pytest.warns(UserWarning) as record:
        status = ge.GEInitialize({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": opts,
                                  "geprof.clock": "virtual"})
    assert status == ge.SUCCESS
    text = " | ".join(str(w.message) for w in record)
    for fragment in fragments:
        assert fragment in text, (fragment, text)
    sess = ge.Session()
    sess.add_graph(1, tiny_mlp())
    run_steps(sess, 1, 2)
    ge.GEFinalize()
    new = [p for p in prof_dirs(earlier_run.output) if p != earlier_run.run_dir]
    assert len(new) == 1 and len(geprof_nb.load(new[0]).step_trace) == 2
    earlier_run.assert_intact()


# ========================================================================= output directory
def _file_as_output(earlier, tmp):
    f = tmp / "a_file"
    f.write_text("I am a file")
    return str(f), "[Errno 17] File exists"


def _below_a_file(earlier, tmp):
    f = tmp / "plain"
    f.write_text("x")
    return str(f / "sub"), "Not a directory"


OUTPUT_CASES = [
    # (id, how to make the output (path, fragment), FaultyDisk(allow, errno) or None)
    ("output-is-a-file", _file_as_output, None),
    ("output-below-a-file", _below_a_file, None),
    ("output-not-writable", lambda e, t: (str(t / "ro"), "Read-only file system"), (0, errno.EROFS)),
    ("output-permission-denied", lambda e, t: (str(t / "denied"), "Permission denied"), (0, errno.EACCES)),
    ("disk-full-at-info-json", lambda e, t: (str(t / "full"), "No space left on device"), (2, errno.ENOSPC)),
]


@pytest.mark.parametrize("case", OUTPUT_CASES, ids=[c[0] for c in OUTPUT_CASES])
@pytest.mark.parametrize("via", ["ge-options", "c-api", "magic"])
def test_unusable_output_directory(case, via, earlier_run, tmp_path, monkeypatch, request):
    _, make, fault = case
    output, fragment = make(earlier_run, tmp_path)
    disk = FaultyDisk(monkeypatch, Path(output), *fault) if fault else None
    if via == "ge-options":
        status = ge.GEInitialize({"ge.exec.profilingMode": "1",
                                  "ge.exec.profilingOptions": json.dumps({"output": output})})
        assert status == ge.PARAM_INVALID
        msg = ge.GEGetErrorMsg()
        assert msg.startswith("[PARAM_INVALID] E10001: profiling option 'output'")
        assert "accepted: a directory that can be created and written" in msg
    elif via == "c-api":
        assert ge.GEInitialize({}) == ge.SUCCESS
        status = ge.aclgrphProfInit(output)
        assert status == ge.FAILED
        msg = ge.GEGetErrorMsg()
        assert msg.startswith("[FAILED] aclgrphProfInit: cannot use") and "accepted: a directory" in msg
        assert not ge_prof.api_mode_active()
    else:
        ip = request.getfixturevalue("ip")
        with pytest.raises(UsageError) as err:
            ip.run_cell_magic("geprof", f"--output {output} --no-display", "pass")
        msg = str(err.value)
        assert msg.startswith(f"--output {output}: cannot be used (")
        assert msg.endswith("accepted: a directory that can be created and written")
        assert "_geprof" not in ip.user_ns
    assert fragment in msg, msg
    assert output in msg
    assert not msprof.lib.running
    if disk is not None:
        assert disk.failures >= 1
        disk.enabled = False
        assert not Path(output).exists() or not any(Path(output).iterdir())  # no half-made run left behind
    earlier_run.assert_intact()


def _hwts_per_step(sess: ge.Session) -> int:
    """HWTS records one step of graph 1 writes (every task but the PROFILER_TRACE ones)."""
    return int((sess.model(1).table.rt_type != rawdata.RtTaskType.PROFILER_TRACE).sum())


def _flush_now(sess: ge.Session) -> None:
    """Report the model's pending steps to msprof and write them (as a batch boundary or Stop would)."""
    sess.model(1).flush()
    msprof.lib.flush()


def test_disk_full_mid_run_keeps_the_job_running_and_loads_what_was_written(earlier_run, monkeypatch):
    """The disk fills for good after 2 steps: run_graph still succeeds, what was written loads."""
    profiled_ge(earlier_run.output)
    sess = ge.Session()
    sess.add_graph(1, tiny_mlp())
    run_steps(sess, 1, 2)
    _flush_now(sess)
    run_dir, per_step = msprof.lib.run_dir, _hwts_per_step(sess)
    disk = FaultyDisk(monkeypatch, run_dir, allow=0)
    run_steps(sess, 1, 3)  # every write from here fails: the profiled job does not notice
    _flush_now(sess)
    assert ge.GEFinalize() == ge.FAILED  # GE is finalised, but its run lost data: said in its status
    assert ge.GEGetErrorMsg().startswith(f"[FAILED] GEFinalize: not everything could be written into the run "
                                         f"directory {run_dir} (No space left on device, first at ")
    assert f"{3 * per_step} hwts records" in ge.GEGetErrorMsg()
    disk.enabled = False
    assert disk.failures >= 3 and not msprof.lib.running
    p = geprof_nb.load(run_dir)
    assert not p.complete  # the final info.json could not be written: the last complete one says "running"
    assert (f"the run was not finalised: its collecting process (pid {os.getpid()}) is still running, so it may "
            "still be collecting: tables hold what was flushed so far") in p.notes  # this process: not a crash
    assert len(p.run.load("hwts")) == 2 * per_step
    assert list(p.step_trace["Iteration ID"]) == [1, 2]
    assert not list(run_dir.rglob("*.tmp"))  # no half-written chunk left behind
    earlier_run.assert_intact()


def test_write_failures_are_counted_in_dropped_and_notes(tmp_path, monkeypatch):
    """The disk is full for a while: the chunks that failed are counted, later ones land."""
    profiled_ge(tmp_path / "out")
    sess = ge.Session()
    sess.add_graph(1, tiny_mlp())
    run_steps(sess, 1, 1)
    _flush_now(sess)
    run_dir, per_step = msprof.lib.run_dir, _hwts_per_step(sess)
    disk = FaultyDisk(monkeypatch, run_dir / rawdata.device_dir(0), allow=0)
    run_steps(sess, 1, 2)
    _flush_now(sess)
    disk.enabled = False  # space again
    run_steps(sess, 1, 1)
    ge.GEFinalize()
    p = geprof_nb.load(run_dir)
    assert p.complete
    assert p.dropped["hwts (not written)"] == 2 * per_step
    assert p.dropped["step_trace (not written)"] > 0
    assert f"{2 * per_step} hwts records could not be written to the run directory (disk full or not writable)" \
        in p.notes
    assert any(n.startswith("writing into the run directory failed (No space left on device, first at "
                            "device_0/data/") for n in p.notes)
    assert p.run.missing == []  # counted as not written, not as missing chunks
    assert len(p.run.load("hwts")) == 2 * per_step
    assert list(p.step_trace["Iteration ID"]) == [1, 4]  # the steps written before and after


def test_hash_dictionary_write_failure_is_retried_and_names_resolve(tmp_path, monkeypatch):
    profiled_ge(tmp_path / "out")
    sess = ge.Session()
    sess.add_graph(1, tiny_mlp())
    run_dir = msprof.lib.run_dir
    disk = FaultyDisk(monkeypatch, run_dir / rawdata.HASH_DICT_FILE, allow=0)
    run_steps(sess, 1, 1)
    _flush_now(sess)  # the names of the first flush cannot be written ...
    assert disk.failures >= 1
    disk.enabled = False
    run_steps(sess, 1, 1)
    ge.GEFinalize()  # ... and are written with the next one
    p = geprof_nb.load(run_dir)
    names = set(p.op_summary["Op Name"].astype(str))
    assert not any(n.startswith("<unknown") for n in names) and len(p.op_summary) == 2 * n_kernels_of_graph()
    assert p.run.damaged == []


def n_kernels_of_graph() -> int:
    g = tiny_mlp()
    return sum(1 for n in g.nodes if n.engine != "GE_LOCAL")


# =============================================================== fp_point / bp_point naming no op
def _auto_step_trace(output: Path) -> "geprof_nb.Profile":
    profiled_ge(output)
    sess = ge.Session()
    sess.add_graph(1, tiny_mlp())
    run_steps(sess, 1, 2)
    ge.GEFinalize()
    return geprof_nb.load(output)


POINT_CASES = [
    # (id, GE options over the profiled ones, warning fragment)
    ("bp-point-ge-option", {"ge.exec.profilingBpPointOptions": "gradients/no_such_op"},
     "bp_point 'gradients/no_such_op' names no op of graph 'mlp'; using auto-detection"),
    ("fp-point-with-spaces", {"fp_point": " dense_0/MatMulV2 "},
     "fp_point ' dense_0/MatMulV2 ' names no op of graph 'mlp'; using auto-detection"),
    ("fp-point-case-differs", {"fp_point": "DENSE_0/MATMULV2"},
     "fp_point 'DENSE_0/MATMULV2' names no op of graph 'mlp'; using auto-detection"),
]


@pytest.mark.parametrize("case", POINT_CASES, ids=[c[0] for c in POINT_CASES])
def test_point_naming_no_op_warns_and_falls_back_to_auto_detection(case, tmp_path):
    _, extra, fragment = case
    auto = _auto_step_trace(tmp_path / "auto")
    prof = {k: v for k, v in extra.items() if not k.startswith("ge.")}
    ge_opts = {k: v for k, v in extra.items() if k.startswith("ge.")}
    opts = json.dumps({"output": str(tmp_path / "named"), "training_trace": "on", **prof})
    with pytest.warns(UserWarning) as record:
        assert ge.GEInitialize({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": opts,
                                "geprof.clock": "virtual", **ge_opts}) == ge.SUCCESS
        sess = ge.Session()
        sess.add_graph(1, tiny_mlp())
        run_steps(sess, 1, 2)
    ge.GEFinalize()
    assert [str(w.message) for w in record] == [fragment]
    p = geprof_nb.load(tmp_path / "named")
    assert any(fragment in n for n in p.notes)
    cols = ["Iteration ID", "FP Start(us)", "BP End(us)", "FP to BP Time(us)", "Iteration Time(us)"]
    assert p.step_trace[cols].equals(auto.step_trace[cols])  # exactly the auto-detected points


def test_point_naming_an_op_of_another_graph_applies_to_that_graph_only(tmp_path):
    """One session, two graphs: fp_point names an op of the second; the first falls back."""
    other = ge.Graph("other")
    x = other.data("img", (4, 16))
    y = other.op("Relu", other.op("Relu", x, name="first_relu"), name="second_relu")
    other.output([y])
    profiled_ge(tmp_path / "out", fp_point="second_relu")
    sess = ge.Session()
    sess.add_graph(1, tiny_mlp())
    sess.add_graph(2, other)
    with pytest.warns(UserWarning, match="fp_point 'second_relu' names no op of graph 'mlp'"):
        run_steps(sess, 1, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # graph 2 has the op: no warning
        run_steps(sess, 2, 1)
    ge.GEFinalize()
    p = geprof_nb.load(tmp_path / "out")
    assert "model 2 (other): FP point 'second_relu' (fp_point option)" in p.notes
    assert any(n.startswith("model 1 (mlp): fp_point 'second_relu' names no op") for n in p.notes)
    assert p.step_trace["FP Start(us)"].notna().all()


# ======================================================================== %%geprof flags
METRICS_ACCEPTED = "accepted: " + METRICS + ", or 'Custom:0x..'"
#: (id, flag line, fragments of the UsageError; the first names the flag)
FLAG_CASES = [
    ("aic-metrics-unknown", "--aic-metrics pipeutil", ["argument --aic-metrics: 'pipeutil' is not valid",
                                                        METRICS_ACCEPTED]),
    ("storage-limit-too-small", "--storage-limit 100MB", ["argument --storage-limit: '100MB' is not valid",
                                                          "accepted: '<n>MB' with 200 <= n <= 4294967295"]),
    ("storage-limit-split-unit", "--storage-limit 500 MB", ["argument --storage-limit: '500' is not valid",
                                                            "the unit MB is required" if False else "'<n>MB'"]),
    ("task-trace-yes", "--task-trace yes", ["argument --task-trace: 'yes' is not valid",
                                            "accepted: 'on', 'off', 'l0', 'l1'"]),
    ("training-trace-equals", "--training-trace=maybe", ["argument --training-trace: 'maybe' is not valid",
                                                         "accepted: 'on', 'off'"]),
    ("active-fraction", "--active 1.5", ["argument --active: '1.5' is not a whole number", "accepted: 0, 1, 2, ..."]),
    ("skip-first-word", "--skip-first x", ["argument --skip-first: 'x' is not a whole number",
                                           "accepted: 0, 1, 2, ..."]),
    ("executor-v3", "--executor v3", ["argument --executor: invalid choice: 'v3'", "(choose from 'v1', 'v2')"]),
    ("clock-fast", "--clock fast", ["argument --clock: invalid choice: 'fast'", "(choose from 'real', 'virtual')"]),
    ("device-unknown", "--device Ascend310", ["argument --device: ", "'Ascend310'", "Ascend910B", "Ascend910A"]),
    ("name-not-identifier", "-o a-b", ["-o NAME must be a Python identifier, got 'a-b'"]),
    ("unknown-flag", "--colour red", ["unrecognized arguments: --colour red; did you mean --clock?",
                                      "accepted flags: ", "--aic-metrics", "(%%geprof? explains them)"]),
    ("missing-value", "--hccl", ["argument --hccl: expected one argument"]),
    ("quoted-empty-output", "--output ''", ["argument --output: \"''\" has a quote",
                                            "accepted: the value as one word without quotes"]),
    ("conflicting-duplicate", "--aic-metrics Memory --aic-metrics L2Cache",
     ["argument --aic-metrics: given twice with different values ('Memory', 'L2Cache')",
      "accepted: one value per flag"]),
    # no prefix matching (argparse's default would run a prefix as the flag): a prefix is refused as a typo is
    ("prefix-of-a-flag", "--aic-metric PipeUtilization",
     ["unrecognized arguments: --aic-metric PipeUtilization; did you mean --aic-metrics?"]),
    ("typo-of-a-flag", "--aic-metircs PipeUtilization",
     ["unrecognized arguments: --aic-metircs PipeUtilization; did you mean --aic-metrics?"]),
    ("prefix-after-the-flag", "--clock real --cl virtual", ["unrecognized arguments: --cl virtual; did you mean "]),
]


@pytest.mark.parametrize("case", FLAG_CASES, ids=[c[0] for c in FLAG_CASES])
def test_bad_flags_are_usage_errors_naming_the_flag(case, ip, tmp_path, earlier_run):
    _, line, fragments = case
    store = ip.magics_manager.registry["GeprofMagics"].cell_defaults
    before = dict(store.values)
    with pytest.raises(UsageError) as err:
        ip.run_cell_magic("geprof", line, "raise AssertionError('the cell must not run')")
    msg = str(err.value)
    for fragment in fragments:
        assert fragment in msg, (fragment, msg)
    assert not msprof.lib.running and "_geprof" not in ip.user_ns
    assert not (tmp_path / "geprof_output").exists()  # no run directory was opened
    assert store.values == before
    # the same line as %geprof config defaults: the same error, the defaults unchanged
    if not line.startswith("-o"):
        with pytest.raises(UsageError) as err2:
            ip.run_line_magic("geprof", "config " + line)
        assert fragments[0] in str(err2.value)
        assert store.values == before
    earlier_run.assert_intact()


def test_a_correct_cell_works_right_after_a_bad_one(ip):
    with pytest.raises(UsageError):
        ip.run_cell_magic("geprof", "--aic-metrics Memory --aic-metrics L2Cache", "pass")
    with capture_output():
        ip.run_cell_magic("geprof", "--aic-metrics Memory --no-display --clock virtual",
                          "s = ge.Session(); s.add_graph(1, ge.models.mlp(batch_size=4)); s.run_graph(1)")
    p = ip.user_ns["_geprof"]
    assert p.complete and p.options["aic_metrics"] == "Memory" and len(p.step_trace) == 1


#: (id, %geprof config line, the cell's flags, fragments)
CONFLICT_CASES = [
    ("cell-active-0-vs-config-repeat", "--active 3 --repeat 2", "--active 0",
     ["--repeat: --repeat 2 needs --active N", "(--repeat 2 is a %geprof config default: change it there, or set "
                                                 "it on this cell)"]),
    ("cell-active-0-vs-config-warmup", "--warmup 1 --active 2", "--active 0",
     ["--warmup: --warmup 1 needs --active N", "(--warmup 1 is a %geprof config default"]),
    ("cell-repeat-vs-config-active-0", "--skip-first 2 --active 1", "--active 0 --repeat 3",
     ["needs --active N", "(--skip-first 2 is a %geprof config default"]),
]


@pytest.mark.parametrize("case", CONFLICT_CASES, ids=[c[0] for c in CONFLICT_CASES])
def test_cell_flags_conflicting_with_config_defaults(case, ip, tmp_path):
    _, config, cell, fragments = case
    ip.run_line_magic("geprof", "config " + config)
    store = ip.magics_manager.registry["GeprofMagics"].cell_defaults
    before = dict(store.values)
    with pytest.raises(UsageError) as err:
        ip.run_cell_magic("geprof", cell, "raise AssertionError('the cell must not run')")
    for fragment in fragments:
        assert fragment in str(err.value), (fragment, str(err.value))
    assert store.values == before and not msprof.lib.running
    assert not (tmp_path / "geprof_output").exists()


def test_pasting_a_conflicting_line_into_the_panel_changes_nothing():
    panel = ConfigPanel(ConfigStore())
    panel.apply_line("--aic-metrics Memory")
    before = dict(panel.store.values)
    message = panel.apply_line("--clock real --aic-metrics L2Cache --clock virtual")
    assert "argument --clock: given twice with different values ('real', 'virtual')" in message
    assert "accepted: one value per flag" in message
    assert panel.store.values == before and panel.line == "--aic-metrics Memory"


# ==================================================================== aclgrphProf* misuse
def api_snapshot() -> tuple:
    s = ge_prof._state
    lib = msprof.lib
    return (s.inited, s.path, s.started, s.started_switch, s.run_metrics, lib.running, lib.started, lib.run_dir,
            lib.switch, ProfilingProperties.instance().switch)


@pytest.fixture
def api_session(tmp_path):
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    sess = ge.Session()
    assert sess.add_graph(1, tiny_mlp()) == ge.SUCCESS
    yield sess
    if ge_prof.api_mode_active():
        ge.aclgrphProfFinalize()


def _destroy_running_config_then_stop(out: Path, cfg) -> int:
    assert ge.aclgrphProfDestroyConfig(cfg) == ge.SUCCESS
    return ge.aclgrphProfStop(cfg)


#: (id, state to reach, the bad call (out dir, the flow's config) -> status, code, message fragments)
API_CASES: list[tuple[str, str, Callable, int, list[str]]] = [
    ("init-bytes-path", "fresh", lambda out, cfg: ge.aclgrphProfInit(str(out).encode()), ge.FAILED,
     ["profiler_path must be a str or os.PathLike, got bytes", "accepted: a directory path"]),
    ("init-int-path", "fresh", lambda out, cfg: ge.aclgrphProfInit(42), ge.FAILED,
     ["profiler_path must be a str or os.PathLike, got int"]),
    ("init-nul-in-path", "fresh", lambda out, cfg: ge.aclgrphProfInit(str(out) + "\0x"), ge.FAILED,
     ["contains a NUL byte", "accepted: a directory path without NUL bytes"]),
    ("init-again-with-a-pathlib-path", "started", lambda out, cfg: ge.aclgrphProfInit(out), ge.FAILED,
     ["Acl profiling is already inited; call aclgrphProfFinalize first"]),
    ("stop-with-the-destroyed-running-config", "started", _destroy_running_config_then_stop, ge.FAILED,
     ["aclgrphProfStop: the config is null or destroyed"]),
    ("start-with-a-device-id-list", "inited", lambda out, cfg: ge.aclgrphProfStart([0]), ge.FAILED,
     ["aclgrphProfStart: the config is null or destroyed"]),
    ("init-length-zero", "fresh", lambda out, cfg: ge.aclgrphProfInit(str(out), 0), ge.FAILED,
     ["aclgrphProfInit: length 0 differs from the path length"]),
    ("destroy-a-device-id-list", "started", lambda out, cfg: ge.aclgrphProfDestroyConfig([0]), ge.FAILED,
     ["aclgrphProfDestroyConfig: the config is null or already destroyed"]),
]


def _advance(sess, out: Path, cfg, state: str) -> None:
    if state in ("inited", "started"):
        assert ge.aclgrphProfInit(str(out)) == ge.SUCCESS, ge.GEGetErrorMsg()
    if state == "started":
        assert ge.aclgrphProfStart(cfg) == ge.SUCCESS, ge.GEGetErrorMsg()
        run_steps(sess, 1, 1)


def _finish(sess, out: Path, state: str) -> Path:
    """The correct sequence from ``state`` with a new config; returns the run directory."""
    cfg = ge.aclgrphProfCreateConfig([0], M.kAicorePipeUtilization, BITS)
    if state == "fresh":
        assert ge.aclgrphProfInit(str(out)) == ge.SUCCESS, ge.GEGetErrorMsg()
    if state != "started":
        assert ge.aclgrphProfStart(cfg) == ge.SUCCESS, ge.GEGetErrorMsg()
    run_steps(sess, 1, 2)
    assert ge.aclgrphProfStop(cfg) == ge.SUCCESS, ge.GEGetErrorMsg()
    assert ge.aclgrphProfFinalize() == ge.SUCCESS
    assert ge.aclgrphProfDestroyConfig(cfg) == ge.SUCCESS
    return msprof.lib.last_run_dir


@pytest.mark.parametrize("case", API_CASES, ids=[c[0] for c in API_CASES])
def test_c_api_misuse_returns_its_code_and_changes_nothing(case, api_session, tmp_path, earlier_run):
    _, state, bad, code, fragments = case
    out = tmp_path / "api"
    cfg = ge.aclgrphProfCreateConfig([0], M.kAicorePipeUtilization, BITS)
    _advance(api_session, out, cfg, state)
    before = api_snapshot()
    runs = prof_dirs(tmp_path)
    status = bad(out, cfg)
    assert status == code and int(status) == code
    msg = ge.GEGetErrorMsg()
    assert msg.startswith(f"[{status.name}] ")
    for fragment in fragments:
        assert fragment in msg, (fragment, msg)
    assert api_snapshot() == before and prof_dirs(tmp_path) == runs
    run_dir = _finish(api_session, out, state)  # the correct sequence works right after
    p = geprof_nb.load(run_dir)
    assert p.complete
    assert len(p.step_trace) == (3 if state == "started" else 2)
    assert len(p.op_summary) == len(p.step_trace) * n_kernels(api_session)
    earlier_run.assert_intact()


#: (id, deviceid_list, fragment): CreateConfig gives no config and says why
DEVICE_LIST_CASES = [
    ("bool-id", [True], "device ids [True] must be integers (not bool, str or float) in 0..0"),
    ("false-id", [False], "device ids [False] must be integers"),
    ("str-id", ["0"], "device ids ['0'] must be integers"),
    ("float-id", [0.0], "device ids [0.0] must be integers"),
    ("none-id", [None], "device ids [None] must be integers"),
    ("not-a-list", 0, "deviceid_list must be a list of device ids, got int"),
]


@pytest.mark.parametrize("case", DEVICE_LIST_CASES, ids=[c[0] for c in DEVICE_LIST_CASES])
def test_bad_device_lists_give_no_config(case, api_session):
    _, ids, fragment = case
    before = api_snapshot()
    assert ge.aclgrphProfCreateConfig(ids, M.kAicorePipeUtilization, BITS) is None
    assert ge.GEGetErrorMsg().startswith("[FAILED] aclgrphProfCreateConfig: ")
    assert fragment in ge.GEGetErrorMsg()
    assert api_snapshot() == before


def test_numpy_device_ids_and_pathlib_paths_are_accepted(api_session, tmp_path):
    cfg = ge.aclgrphProfCreateConfig(np.array([0]), M.kAicorePipeUtilization, BITS)
    assert cfg is not None and cfg.dev_ids == (0,) and type(cfg.dev_ids[0]) is int
    assert ge.aclgrphProfInit(tmp_path / "api") == ge.SUCCESS  # a pathlib.Path, as a str would be
    assert msprof.lib.run_dir.parent == (tmp_path / "api").resolve()
    assert ge.aclgrphProfCreateConfig([0], M.kAicorePipeUtilization, True) is None  # bool is not a bit mask
    assert "data_type_config must be a non-negative int" in ge.GEGetErrorMsg()


# ================================================================================== graphs
def _model_buffer(mutate: Callable[[dict], None]) -> bytes:
    good, status = ge.aclgrphBuildModel(tiny_mlp())
    assert status == ge.SUCCESS
    body = json.loads(good.data[len(MAGIC):])
    mutate(body)
    return MAGIC + json.dumps(body).encode()


def _node(body: dict, name: str) -> dict:
    return next(n for n in body["nodes"] if n["name"] == name)


def _index(body: dict, name: str) -> int:
    return next(i for i, n in enumerate(body["nodes"]) if n["name"] == name)


#: (id, how the model buffer is damaged, message fragments)
BUFFER_CASES = [
    ("cycle-forward-edge", lambda b: _node(b, "dense_0/MatMulV2")["inputs"].__setitem__(
        0, [_index(b, "dense_0/Relu"), 0]),
     ["takes an input from node id", "which is not an earlier node: the graph has a cycle or the buffer is damaged",
      "accepted: edges from nodes 0.."]),
    ("self-loop", lambda b: _node(b, "dense_0/Relu")["inputs"].__setitem__(0, [_index(b, "dense_0/Relu"), 0]),
     ["('dense_0/Relu', Relu) takes an input from itself"]),
    ("negative-node-id", lambda b: _node(b, "dense_0/Relu")["inputs"].__setitem__(0, [-1, 0]),
     ["takes an input from node id -1"]),
    ("control-edge-forward", lambda b: _node(b, "dense_0/MatMulV2")["control_inputs"].append(len(b["nodes"]) - 1),
     ["takes an input from node id", "the graph has a cycle"]),
    ("output-index-out-of-range", lambda b: _node(b, "dense_0/Relu")["inputs"].__setitem__(
        0, [_index(b, "dense_0/BiasAdd"), 3]),
     ["reads output 3 of 'dense_0/BiasAdd', which has 1 outputs"]),
]


@pytest.mark.parametrize("case", BUFFER_CASES, ids=[c[0] for c in BUFFER_CASES])
def test_damaged_model_buffer_is_a_deserialize_error(case, tmp_path, earlier_run):
    _, mutate, fragments = case
    profiled_ge(tmp_path / "prof")
    data = _model_buffer(mutate)
    model_id, ret = acl.aclmdlLoadFromMem(data)
    assert (model_id, ret) == (0, acl.ACL_ERROR_DESERIALIZE_MODEL)
    msg = ge.GEGetErrorMsg()
    assert msg.startswith("[ACL_ERROR_DESERIALIZE_MODEL] aclmdlLoadFromMem: model buffer holds an invalid graph: ")
    for fragment in fragments:
        assert fragment in msg, (fragment, msg)
    assert acl.loaded_models() == {}
    good_id, ret = acl.aclmdlLoadFromMem(ge.aclgrphBuildModel(tiny_mlp())[0])  # a good model loads right after
    assert ret == acl.ACL_SUCCESS and acl.aclmdlExecute(good_id) == acl.ACL_SUCCESS
    ge.GEFinalize()
    assert len(geprof_nb.load(tmp_path / "prof").step_trace) == 1
    earlier_run.assert_intact()


def _cycle(g: ge.Graph) -> None:
    g.node("dense_0/MatMulV2").inputs[0] = g.node("dense_0/Relu").output(0)


def _foreign_edge(g: ge.Graph) -> None:
    other = ge.Graph("other")
    g.node("dense_0/Relu").inputs[0] = other.data("stranger", (4, 16)).node.output(0)


GRAPH_EDIT_CASES = [
    ("cycle-by-editing-inputs", _cycle,
     ["graph 'mlp' has a cycle: MatMulV2 'dense_0/MatMulV2' takes an input from Relu 'dense_0/Relu'",
      "accepted: edges from earlier nodes"]),
    ("edge-from-another-graph", _foreign_edge,
     ["graph 'mlp' has an edge from another graph: Relu 'dense_0/Relu' takes an input from Data 'stranger'"]),
]


@pytest.mark.parametrize("case", GRAPH_EDIT_CASES, ids=[c[0] for c in GRAPH_EDIT_CASES])
def test_hand_edited_graph_is_refused_at_build_and_the_session_goes_on(case, tmp_path):
    _, edit, fragments = case
    profiled_ge(tmp_path / "prof")
    sess = ge.Session()
    sess.add_graph(1, tiny_mlp())
    run_steps(sess, 1, 2)  # collected before the bad graph
    bad = tiny_mlp()
    edit(bad)
    sess.add_graph(2, bad)
    status = sess.run_graph(2)
    assert status == ge_status.GE_GRAPH_INFERSHAPE_FAILED
    msg = ge.GEGetErrorMsg()
    assert msg.startswith("[GE_GRAPH_INFERSHAPE_FAILED] BuildGraph 2: ")
    for fragment in fragments:
        assert fragment in msg, (fragment, msg)
    run_steps(sess, 1, 1)  # the session still works
    ge.GEFinalize()
    p = geprof_nb.load(tmp_path / "prof")
    assert list(p.step_trace["Iteration ID"]) == [1, 2, 3] and set(p.step_trace["Model ID"]) == {1}


@pytest.mark.parametrize("op_type", [None, ["Relu"], 7], ids=["none", "list", "int"])
def test_op_type_that_is_not_a_string(op_type):
    g = ge.Graph("g")
    x = g.data("x", (4, 4))
    with pytest.raises(GraphBuildError) as err:
        g.op(op_type, x)
    assert str(err.value) == f"op type must be a string such as 'MatMulV2', got {type(op_type).__name__} {op_type!r}"
    assert len(g.nodes) == 1  # nothing was added


def test_shape_mismatch_found_at_run_time_keeps_the_steps_before(tmp_path):
    """Dynamic shapes: the mismatch shows only with the concrete inputs of one step."""
    profiled_ge(tmp_path / "prof")
    g = ge.Graph("dyn")
    x, y = g.data("x", (-1, 16)), g.data("y", (-1, 16))
    g.output([g.op("Relu", g.op("Add", [x, y], name="add_xy"), name="r")])
    sess = ge.Session()
    sess.add_graph(1, g)
    a4, a3 = np.zeros((4, 16), np.float16), np.zeros((3, 16), np.float16)
    assert sess.run_graph(1, [a4, a4]) == ge.SUCCESS
    status = sess.run_graph(1, [a4, a3])
    assert status == ge_status.GE_GRAPH_INFERSHAPE_FAILED
    assert ge.GEGetErrorMsg() == ("[GE_GRAPH_INFERSHAPE_FAILED] RunGraph: Add 'add_xy': shapes [4, 16] and [3, 16] "
                                  "cannot be broadcast (dimension 4 vs 3)")
    assert sess.run_graph(1, [a3, a3]) == ge.SUCCESS
    ge.GEFinalize()
    p = geprof_nb.load(tmp_path / "prof")
    assert list(p.step_trace["Iteration ID"]) == [1, 2]  # the refused step ran nothing
    shapes = p.op_summary[p.op_summary["Op Name"] == "add_xy"]["Input Shapes"].astype(str).tolist()
    assert shapes == ["4,16;4,16", "3,16;3,16"]


def _variables_only() -> ge.Graph:
    g = ge.Graph("vars_only")
    g.output([g.op("MatMulV2", [g.variable("w", (8, 8)), g.variable("v", (8, 8))], name="mm")])
    return g


def _unused_data() -> ge.Graph:
    g = ge.Graph("unused_data")
    g.data("unused", (4, 4))
    g.output([g.op("Relu", g.variable("w", (4, 4)), name="relu_w")])
    return g


@pytest.mark.parametrize("make, note", [
    (_variables_only,
     "model 1 (vars_only): the graph has no Data/GetNext/IteratorV2 node: no FP point, FP Start is N/A"),
    (_unused_data, "model 1 (unused_data): Data 'unused' has no consumer: no FP point"),
], ids=["no-data-node", "data-without-consumer"])
def test_graph_without_fp_point_says_so_and_the_step_trace_still_has_every_step(make, note, tmp_path):
    profiled_ge(tmp_path / "prof")
    sess = ge.Session()
    sess.add_graph(1, make())
    run_steps(sess, 1, 3)
    ge.GEFinalize()
    p = geprof_nb.load(tmp_path / "prof")
    st = p.step_trace
    assert list(st["Iteration ID"]) == [1, 2, 3]
    assert st["FP Start(us)"].isna().all() and st["FP to BP Time(us)"].isna().all()
    assert st["BP End(us)"].notna().all() and (st["Iteration Time(us)"] > 0).all()
    assert note in p.notes
    out = p.export(tmp_path / "exp", format="msprof")  # and it exports as msprof prints a missing point
    text = next((out / "mindstudio_profiler_output").glob("step_trace_*.csv")).read_text()
    assert text.splitlines()[1].split(",")[2] == "N/A"


# ============================================================================ importer files
def _cut_inside_last_value(data: bytes) -> bytes:
    """The file as a writer killed inside its last value leaves it: no final line break."""
    return data.rstrip(b"\r\n")[:-2]


def _latin1_in_first_row(data: bytes) -> bytes:
    """One latin-1 byte (é) inside the first data row's second cell."""
    line_end = data.index(b"\n") + 1
    comma = data.index(b",", line_end) + 1
    return data[:comma] + b"\xe9" + data[comma:]


FAULTS: dict[str, Callable[[bytes], bytes]] = {
    "empty": lambda d: b"",
    "latin1-byte": _latin1_in_first_row,
    "utf16": lambda d: d.decode("utf-8").encode("utf-16"),
    "wrong-schema": lambda d: b"alpha,beta,gamma\n1,2,3\n",
}
#: what each fault's message says (after the file's path)
FAULT_MESSAGES = {
    "empty": ": empty file (expected a CSV header line)",
    "latin1-byte": ": not UTF-8 text in column ",
    "utf16": ": not UTF-8 text (",
    "wrong-schema": ": missing column ",
}
#: (layout, file name, the Profile table that reads it, the column a wrong schema misses first)
IMPORTED_FILES = [
    ("msprof", f"op_statistic_{STAMP}.csv", "op_statistic", "OP Type"),
    ("msprof", f"api_statistic_{STAMP}.csv", "api_statistic", "Level"),
    ("msprof", f"task_time_{STAMP}.csv", "task_time", "kernel_name"),
    ("msprof", f"step_trace_{STAMP}.csv", "step_trace", "Iteration ID"),
    ("msprof", f"communication_statistic_{STAMP}.csv", "communication_statistic", "OP Type"),
    ("msprof", f"msprof_tx_{STAMP}.csv", "msprof_tx", "Start_time(us)"),
    ("ascend_pt", "step_trace_time.csv", "step_breakdown", "Step"),
    ("ascend_pt", "op_statistic.csv", "op_statistic", "OP Type"),
    ("ascend_pt", "api_statistic.csv", "api_statistic", "Level"),
    ("ascend_pt", "operator_memory.csv", "operator_memory", "Name"),
    ("ascend_pt", "memory_record.csv", "memory_record", "Component"),
    ("ascend_pt", "kernel_details.csv", "op_summary", "Name"),
]
FILE_CASES = [(layout, name, table, column, fault) for layout, name, table, column in IMPORTED_FILES
              for fault in FAULTS
              # covered in tests/analysis/sources/test_import_errors.py
              if not (name == "kernel_details.csv" and fault in ("empty", "wrong-schema"))
              and not (name.startswith("step_trace_") and fault == "wrong-schema")]


def _write(layout: str, root: Path):
    return write_msprof(root) if layout == "msprof" else write_ascend_pt(root)


@pytest.mark.parametrize("case", FILE_CASES, ids=[f"{c[0]}-{c[1].split('_2024')[0]}-{c[4]}" for c in FILE_CASES])
def test_damaged_file_is_an_import_error_naming_it_and_the_rest_loads(case, tmp_path):
    layout, name, table, column, fault = case
    run = _write(layout, tmp_path / "in")
    path = next(run.path.rglob(name))
    path.write_bytes(FAULTS[fault](path.read_bytes()))
    with pytest.raises(ImportFormatError) as err:
        getattr(geprof_nb.load(run.path), table)
    msg = str(err.value)
    assert isinstance(err.value, ValueError)
    assert msg.startswith(f"{path}{FAULT_MESSAGES[fault]}"), msg
    if fault == "wrong-schema":
        assert f"missing column {column!r}" in msg and "needs" in msg and "(header read: alpha, beta, gamma)" in msg
    elif fault == "latin1-byte":
        assert "in column '" in msg
    if name != "kernel_details.csv":  # (op rows need it; a damaged msprof step_trace reads as absent for them)
        # what is intact still loads
        p = geprof_nb.load(run.path)
        assert len(p.op_summary) > 0 and p.op_summary["Op Name"].notna().all()


@pytest.mark.parametrize("layout, name, table, column", IMPORTED_FILES,
                         ids=[f"{c[0]}-{c[1].split('_2024')[0]}" for c in IMPORTED_FILES])
def test_file_cut_inside_its_last_value_loads_every_row_and_says_it_may_be_cut(layout, name, table, column,
                                                                               tmp_path):
    """Its last row has every cell, so nothing shows it was cut (msprof-analyze reads such a file too): it is
    read, and the notes say that its last cell may be incomplete."""
    run = _write(layout, tmp_path / "in")
    path = next(run.path.rglob(name))
    whole = getattr(geprof_nb.load(run.path), table)
    data = path.read_bytes()
    path.write_bytes(_cut_inside_last_value(data))
    last = data.rstrip(b"\r\n").count(b"\n") + 1
    p = geprof_nb.load(run.path)
    if name.startswith("msprof_tx"):  # its last cell, N/A, is cut to N: no time, an error naming it
        with pytest.raises(ImportFormatError, match=rf"^{re.escape(str(path))}, line {last}, column 'Device End_time"
                                                    r"\(us\)': cannot parse 'N'"):
            getattr(p, table)
        return
    assert len(getattr(p, table)) == len(whole) > 0
    assert (f"{path}: its last line ({last}) has no line break after it, as a file cut off while being written "
            "ends: read as it is (if the file was cut there, that row's last cell is incomplete)") in p.notes


@pytest.mark.parametrize("layout", ["msprof", "ascend_pt"])
@pytest.mark.parametrize("fault", ["empty", "truncated-json", "latin1", "not-an-object"])
def test_damaged_device_info_is_a_note_not_a_silent_gap(layout, fault, tmp_path):
    run = _write(layout, tmp_path / "in")
    if layout == "ascend_pt":  # torch_npu keeps msprof's PROF_* (with device_<n>/info.json.<n>) inside
        (run.path / "PROF_000001_20250101000000000_ABC" / "device_0").mkdir(parents=True)
    path = next(run.path.rglob("device_0")) / "info.json.0"
    good = json.dumps({"DeviceInfo": [{"id": 0, "ai_core_num": 24, "aic_frequency": "1800"}]}).encode()
    path.write_bytes({"empty": b"", "truncated-json": good[:-5], "latin1": good.replace(b"24", b"2\xe9"),
                      "not-an-object": b"[1, 2]"}[fault])
    p = geprof_nb.load(run.path)
    assert len(p.op_summary) > 0
    if fault == "not-an-object":  # valid JSON of another shape: nothing to say, nothing read
        assert "ai_core_num" not in p.device
        return
    expected = {"empty": "empty file (expected a JSON document)", "truncated-json": "not valid JSON",
                "latin1": "not UTF-8 text"}[fault]
    notes = [n for n in p.notes if n.startswith(str(path))]
    assert len(notes) == 1 and expected in notes[0]
    assert notes[0].endswith("the device facts it holds (cores, frequencies) are unknown")
    assert "ai_core_num" not in p.device


# ========================================================================== run directories
@pytest.fixture
def chunked(tmp_path, monkeypatch):
    """A finished run whose hwts and step_trace data are in several chunks."""
    monkeypatch.setattr(msprof.lib, "chunk_records", 16)
    profiled_ge(tmp_path / "out")
    sess = ge.Session()
    sess.add_graph(1, tiny_mlp())
    for _ in range(4):
        run_steps(sess, 1, 1)
        sess.model(1).flush()  # one batch per step: whole steps per chunk
    ge.GEFinalize()
    monkeypatch.undo()
    p = geprof_nb.load(tmp_path / "out")
    assert p.complete and p.run.missing == [] and len(p.step_trace) == 4
    return p


def _hwts_chunks(p) -> list[Path]:
    return sorted((p.path / rawdata.device_dir(0)).glob("hwts.*.npy"))


def _pickled_object_array(path: Path, marker: Path) -> None:
    class Evil:
        def __reduce__(self):
            return (Path.touch, (marker,))

    np.save(path, np.array([Evil()], dtype=object), allow_pickle=True)


RUN_DIR_CASES = [
    # (id, damage (run dir path, hwts chunks, marker) -> None, expected hwts loaded as a fraction, note fragment)
    ("middle-chunk-deleted", lambda d, c, m: c[len(c) // 2].unlink(), "hwts: ", "written records are missing"),
    ("last-chunk-deleted", lambda d, c, m: c[-1].unlink(), "hwts: ", "written records are missing"),
    ("chunk-cut-in-half", lambda d, c, m: c[1].write_bytes(c[1].read_bytes()[: c[1].stat().st_size // 2]),
     "hwts: ", "damaged files skipped: device_0/data/hwts.000001.npy"),
    ("chunk-holds-pickled-objects", lambda d, c, m: _pickled_object_array(c[0], m),
     "hwts: ", "damaged files skipped: device_0/data/hwts.000000.npy"),
    ("device-directory-deleted", lambda d, c, m: shutil.rmtree(d / "device_0"), "step_trace: ",
     "written records are missing"),
]


@pytest.mark.parametrize("case", RUN_DIR_CASES, ids=[c[0] for c in RUN_DIR_CASES])
def test_run_directory_with_missing_or_damaged_chunks_loads_what_is_intact(case, chunked, tmp_path):
    _, damage, missing_kind, note = case
    chunks = _hwts_chunks(chunked)
    assert len(chunks) >= 3
    total, n_ops = len(chunked.run.load("hwts")), len(chunked.op_summary)
    intact = total - (len(np.load(chunks[len(chunks) // 2])) if "middle" in case[0] else 0)
    marker = tmp_path / "pwned"
    damage(chunked.path, chunks, marker)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = geprof_nb.load(chunked.path)
        ops = p.op_summary
        notes = p.notes
        loaded = len(p.run.load("hwts"))
    assert not marker.exists()  # nothing read from disk ran
    assert any(note in n for n in notes), notes
    assert any(n.startswith(missing_kind) and "written records are missing" in n for n in notes), notes
    damaged = "damaged files skipped" in note
    assert any("damaged chunk skipped" in str(w.message) for w in caught) == damaged
    assert loaded < total
    if "middle" in case[0]:
        assert loaded == intact
    assert ops["Op Name"].notna().all() and len(ops) < n_ops


def test_missing_hash_dictionary_says_so_and_ops_keep_their_rows(chunked):
    (chunked.path / rawdata.HASH_DICT_FILE).unlink()
    p = geprof_nb.load(chunked.path)
    assert len(p.op_summary) == len(chunked.op_summary)
    assert p.op_summary["Op Name"].astype(str).str.startswith("<unknown 0x").all()
    assert "damaged files skipped: hash_dict.jsonl (missing: names show as <unknown 0x...>)" in p.notes


def test_a_run_of_step_traces_only_needs_no_hash_dictionary(tmp_path):
    """Step trace records name no strings: a run without a dictionary (a fresh process writes none when
    nothing was hashed) is not damaged."""
    profiled_ge(tmp_path, task_trace="off")
    sess = ge.Session()
    sess.add_graph(1, tiny_mlp())
    run_steps(sess, 1, 2)
    assert ge.GEFinalize() == ge.SUCCESS
    run_dir = next(tmp_path.glob("PROF_*"))
    (run_dir / rawdata.HASH_DICT_FILE).unlink(missing_ok=True)
    p = geprof_nb.load(run_dir)
    assert len(p.step_trace) == 2 and p.op_summary.empty
    assert not any("damaged" in n or rawdata.HASH_DICT_FILE in n for n in p.notes), p.notes


def test_a_half_written_tmp_chunk_of_a_crash_is_ignored(chunked):
    (chunked.path / rawdata.device_dir(0) / "hwts.000099.tmp").write_bytes(b"\x93NUMPY half")
    p = geprof_nb.load(chunked.path)
    assert p.notes == chunked.notes and len(p.op_summary) == len(chunked.op_summary)


@pytest.mark.parametrize("field, value, accepted", [
    ("records", ["not", "a", "dict"], "an object of record counts (whole numbers >= 0, below 2**63)"),
    ("devices", {"zero": {}}, "an object of device id -> device description (ids below 2**31)"),
    ("notes", "one string", "a list of strings"),
    ("pid", "1234", "a process id (1 .. 2**31 - 1)"),
    ("models", {"1": {"name": "m", "training": "no"}}, "an object of model id -> {name, training}"),
])
def test_info_json_with_a_damaged_field_is_a_clear_error(chunked, field, value, accepted):
    path = chunked.path / rawdata.INFO_FILE
    info = json.loads(path.read_text())
    info[field] = value
    path.write_text(json.dumps(info))
    with pytest.raises(geprof_nb.analysis.RunDirError) as err:
        geprof_nb.load(chunked.path)
    assert str(err.value) == f"{path}: field {field!r} is {json.dumps(value)}; accepted: {accepted}"


@pytest.mark.parametrize("field, value, accepted", [
    ("ai_core_num", "many", "a whole number >= 1 (below 2**31)"),
    ("ai_core_num", None, "a whole number >= 1 (below 2**31)"),
    ("ai_core_num", 0, "a whole number >= 1 (below 2**31)"),
    ("ai_core_num", True, "a whole number >= 1 (below 2**31)"),
    ("aiv_num", -1, "a whole number >= 0 (below 2**31)"),
    ("aic_frequency", "x", "a number > 0 (MHz)"),
    ("aic_frequency", 0, "a number > 0 (MHz)"),
    ("chip_family", 5, "a chip family name (A2, 910A)"),
])
def test_info_json_with_a_damaged_device_field_is_a_clear_error_when_the_run_opens(
        chunked, field, value, accepted, capsys):
    """The PMU columns and the advisor compute with these fields: a bad one is refused naming the
    device and the field, not a bare int()/float() error (or a division by zero) in a table."""
    path = chunked.path / rawdata.INFO_FILE
    info = json.loads(path.read_text())
    info["devices"]["0"][field] = value
    path.write_text(json.dumps(info))
    message = f"{path}: device '0' field {field!r} is {json.dumps(value)}; accepted: {accepted}"
    with pytest.raises(geprof_nb.analysis.RunDirError) as err:
        geprof_nb.load(chunked.path)
    assert str(err.value) == message
    assert main(["analyze", str(chunked.path)]) == 2
    assert capsys.readouterr().err == f"geprof: {message}\n"


@pytest.mark.slow
def test_huge_graph_of_100k_nodes_builds_runs_and_loads(tmp_path):
    """100,000 nodes: the memory plan must not need an n x n matrix (it needed 3 x 10 GB)."""
    n = 100_000
    g = ge.Graph("huge")
    h = g.data("x", (4, 16), "float16")
    for _ in range(n - 2):
        h = g.op("Relu", h)
    g.output([h])
    assert len(g.nodes) == n
    profiled_ge(tmp_path / "out", task_trace="l0")  # task times without per-op basic info: the big part
    sess = ge.Session()
    sess.add_graph(1, g)
    run_steps(sess, 1, 2)
    plan = sess.model(1).memory_plan
    assert len(plan) == n - 1 and plan.reuse_ratio > 10_000  # a chain reuses a few slots for every tensor
    ge.GEFinalize()
    p = geprof_nb.load(tmp_path / "out")
    assert p.complete and len(p.step_trace) == 2 and len(p.op_summary) == 2 * (n - 2)
    assert "model 1 (huge): FP point 'Relu': first consumer of Data 'x'" in p.notes
    assert "model 1 (huge): forward only (no backward pass): the BP End trace goes after 'Relu_99997', the last " \
           "input producer of the NetOutput 'Node_Output', so FP to BP Time is the forward pass and Iteration " \
           "Refresh what follows it" in p.notes
    assert (p.step_trace["Iteration Time(us)"] > 0).all()
