"""Every input gets a documented error, never a raw one (issue 25): JSON nested past the parsers' limit,
numbers past Python's int-conversion limit or past 64 bits, option values of the right type outside their
domain, and whatever can be where a data file should be.  Each case names the option or the file and what
is accepted; the CLI prints that line (no traceback); one damaged auxiliary file (a hash dictionary line, a
Parquet manifest, profiler_info.json) loses only what it held.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.errors import ImportFormatError, RunDirError
from geprof_nb.ge import acl
from geprof_nb.prof import rawdata
from geprof_nb.prof.options import ProfilingOptions, ProfilingOptionsError
from helpers.real_fixtures import STAMP, write_ascend_pt, write_msprof
from helpers.reliability_helpers import ODDITIES, in_time, make_earlier_run, put_oddity, read_everything, tiny_mlp

DEPTH = 1025  # one past what both parsers take
DEEP = "[" * DEPTH + "]" * DEPTH
#: Deep text orjson refuses for its NaN before its depth: the stdlib parser reads it (it raised RecursionError).
DEEP_NAN = "[NaN, " + "[" * DEPTH + "]" * DEPTH + "]"
NESTED = "nested deeper than 1024 levels"
HUGE = "1" * 5000  # past int()'s 4300 digits: int() raised a plain ValueError


def short(value) -> str:
    """A test id for any value (str() of an int past 4300 digits raises)."""
    text = f"<int {value.bit_length()} bits>" if isinstance(value, int) and value.bit_length() > 200 else str(value)
    return text if len(text) <= 30 else f"{text[:20]}..({len(text)})"


# ------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def templates(tmp_path_factory):
    """One of each kind of run, made once: copied into each test's tmp_path (:func:`copy`)."""
    root = tmp_path_factory.mktemp("templates")
    run = make_earlier_run(root / "geprof").run_dir
    profile = geprof_nb.load(run)
    ms = write_msprof(root / "msprof").path
    pt = write_ascend_pt(root / "pt").path
    return {"geprof": run, "msprof": ms, "ascend_pt": pt,
            "parquet": profile.export(root / "pq", format="parquet"),
            "db": profile.export(root / "db", format="db")}


def copy(templates, kind: str, tmp_path: Path) -> Path:
    src = templates[kind]
    dst = tmp_path / kind / src.name
    shutil.copytree(src, dst, symlinks=True)
    return dst


def geprof_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "geprof_nb.cli", *args], capture_output=True, text=True, timeout=120)


def assert_one_line_error(done: subprocess.CompletedProcess, *words: str) -> None:
    """What the CLI prints for a documented error: exit 2, one ``geprof:`` line naming it, no traceback."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.startswith("geprof: "), done.stderr
    for w in words:
        assert w in done.stderr, (w, done.stderr)


def ge_init(options: dict) -> tuple[ge.Status, str]:
    status, message = ge.GEInitialize(options), ge.GEGetErrorMsg()
    ge.GEFinalize()
    return status, message


def profiling(options_text: str) -> dict:
    return {"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": options_text}


# ===================================================================== JSON nested too deep
@pytest.mark.parametrize("text", [DEEP, DEEP_NAN, "[" * 100_000], ids=["orjson", "stdlib", "100000"])
def test_deep_profiling_options_are_a_param_invalid_naming_the_option(text, earlier_run):
    for options in (profiling('{"output": ' + text + "}"), profiling(text)):
        status, message = ge_init(options)
        assert status == ge.PARAM_INVALID
        assert message.startswith("[PARAM_INVALID] E10001: profiling option 'ge.exec.profilingOptions': is not valid "
                                  "JSON (") and (NESTED in message or "Expecting" in message), message
    earlier_run.assert_intact()


def test_deep_profiling_options_in_the_environment_name_the_variable():
    with pytest.raises(ProfilingOptionsError) as err:
        ProfilingOptions.resolve({}, {"PROFILING_MODE": "true", "PROFILING_OPTIONS": DEEP_NAN})
    assert err.value.field == "PROFILING_OPTIONS" and NESTED in str(err.value)


@pytest.mark.parametrize("text", [DEEP, '{"slow_ranks": ' + DEEP_NAN + "}"])
def test_deep_cluster_faults_are_a_param_invalid(text):
    status, message = ge_init({"ge.exec.rankSize": "2", "geprof.faults": text})
    assert status == ge.PARAM_INVALID
    assert f"geprof.faults: not valid JSON ({NESTED}" in message


def test_a_deep_model_buffer_is_a_deserialize_error():
    ge.GEInitialize({})
    try:
        model_id, ret = acl.aclmdlLoadFromMem(b"GEPROF-OM 1\n" + DEEP_NAN.encode())
        assert (model_id, ret) == (0, acl.ACL_ERROR_DESERIALIZE_MODEL)
        assert f"damaged model buffer: not valid JSON ({NESTED}" in ge.GEGetErrorMsg()
    finally:
        ge.GEFinalize()


@pytest.mark.parametrize("text", [DEEP, DEEP_NAN])
def test_a_deep_info_json_is_a_run_dir_error_and_a_cli_line(templates, tmp_path, text):
    run = copy(templates, "geprof", tmp_path)
    info = run / rawdata.INFO_FILE
    info.write_text(info.read_text()[:-2] + f', "extra": {text}}}')
    with pytest.raises(RunDirError) as err:
        geprof_nb.load(run)
    assert str(err.value).startswith(f"{info}: cannot be read as JSON ({NESTED}")
    assert_one_line_error(geprof_cli("analyze", str(run)), str(info), NESTED)


@pytest.mark.parametrize("text", [DEEP, DEEP_NAN, '{"id": "7", "s": ' + DEEP + "}"])
def test_a_deep_hash_dictionary_line_loses_only_that_line(templates, tmp_path, text):
    run = copy(templates, "geprof", tmp_path)
    before = geprof_nb.load(run)
    names = list(before.op_summary["Op Name"])
    hashes = run / rawdata.HASH_DICT_FILE
    lines = hashes.read_text().splitlines()
    hashes.write_text("\n".join([*lines, text, lines[0]]) + "\n")  # a good line after it still counts
    p = geprof_nb.load(run)
    assert list(p.op_summary["Op Name"]) == names
    assert f"damaged files skipped: {rawdata.HASH_DICT_FILE}:{len(lines) + 1}" in p.notes


#: (layout, file, what a deep one does: "error" when the table it feeds is read, "note" when it is auxiliary)
DEEP_FILES = [
    ("ascend_pt", "ASCEND_PROFILER_OUTPUT/trace_view.json", "error"),
    ("ascend_pt", "ASCEND_PROFILER_OUTPUT/communication.json", "error"),
    ("ascend_pt", "profiler_info_0.json", "note"),
    ("ascend_pt", "profiler_metadata.json", "note"),
    ("msprof", "device_0/info.json.0", "note"),
]


@pytest.mark.parametrize("text", [DEEP, DEEP_NAN], ids=["orjson", "stdlib"])
@pytest.mark.parametrize("layout, name, effect", DEEP_FILES)
def test_deep_json_files_of_the_importers_name_the_file(templates, tmp_path, layout, name, effect, text):
    run = copy(templates, layout, tmp_path)
    path = run / name
    path.write_text(text)
    if effect == "error":
        with pytest.raises(ImportFormatError) as err:
            read_everything(geprof_nb.load(run))
        assert str(err.value).startswith(f"{path}: not valid JSON ({NESTED}")
    else:
        notes = read_everything(geprof_nb.load(run))
        assert any(n.startswith(f"{path}: not valid JSON ({NESTED}") for n in notes), notes


def test_a_deep_communication_matrix_names_the_file(templates, tmp_path):
    run = copy(templates, "ascend_pt", tmp_path)
    path = run / "ASCEND_PROFILER_OUTPUT" / "communication_matrix.json"
    path.write_text(DEEP_NAN)
    with pytest.raises(ImportFormatError, match=f"^{path}: not valid JSON \\({NESTED}"):
        geprof_nb.load(run).source.communication_matrix()


@pytest.mark.parametrize("text", [DEEP, DEEP_NAN])
def test_a_deep_parquet_manifest_loses_only_what_it_held(templates, tmp_path, text):
    export = copy(templates, "parquet", tmp_path)
    original = geprof_nb.load(templates["parquet"])
    (export / "manifest.json").write_text(text)
    p = geprof_nb.load(export)
    assert len(p.op_summary) == len(original.op_summary) and len(p.step_trace) == len(original.step_trace)
    assert any(n.startswith(f"{export / 'manifest.json'}: not valid JSON ({NESTED}") for n in p.notes)


# ============================================================ numbers past int() and 64 bits
@pytest.mark.parametrize("options, field, said", [
    ('{"dvpp_freq": ' + HUGE + "}", "ge.exec.profilingOptions", "past the range of a float"),
    ('{"dvpp_freq": "' + HUGE + '"}', "dvpp_freq", "(5000 characters) is out of range; accepted: 1..100"),
    ('{"storage_limit": "' + HUGE + 'MB"}', "storage_limit", "characters) is out of range"),
    ('{"checkpoint_interval": 1e400}', "ge.exec.profilingOptions", "past the range of a float"),
    ('{"sys_io_sampling_freq": 18446744073709551616}', "sys_io_sampling_freq", "must be an integer, got JSON number"),
])
def test_huge_numbers_in_profiling_options_are_a_param_invalid(options, field, said):
    status, message = ge_init(profiling(options))
    assert status == ge.PARAM_INVALID
    assert f"profiling option {field!r}: " in message and said in message, message
    assert len(message) < 400  # the number is quoted by its ends


@pytest.mark.parametrize("option, value, said", [
    ("geprof.seed", HUGE, "(5002 characters) is not valid"),
    ("geprof.seed", 10**5000, "<an integer of 16610 bits> is not valid"),
    ("geprof.seed", str(2**64), "'18446744073709551616' is not valid"),
    ("ge.exec.rankSize", HUGE, "(5002 characters) is out of range; accepted: an integer in [1, 65536]"),
    ("ge.exec.rankSize", 10**5000, "is out of range"),
], ids=short)
def test_huge_numbers_in_ge_options_are_a_param_invalid(option, value, said):
    status, message = ge_init({option: value})
    assert status == ge.PARAM_INVALID and said in message and option in message, message


def test_a_huge_rank_in_cluster_faults_names_the_field():
    status, message = ge_init({"ge.exec.rankSize": "2", "geprof.faults": '{"slow_ranks": {"' + HUGE + '": 1.5}}'})
    assert status == ge.PARAM_INVALID
    assert "geprof.faults.slow_ranks: rank '11111111111111111111111...1111111' (5002 characters) is not an integer" \
        in message


@pytest.mark.parametrize("field, value", [
    ("start_ns", 2**70), ("end_ns", 2**63), ("pid", 2**31), ("pid", 2**70), ("records", {"hwts": 2**63}),
    ("dropped", {"hwts": -3}), ("switch_history", [{"start_ns": 2**70}]), ("aged_out", {"chunks": 2**64}),
    ("chunks", {"hwts": {"hwts.000000.npy": -1}}), ("devices", {"9" * 30: {}}),
])
def test_info_json_numbers_past_what_the_tables_hold_are_a_run_dir_error(templates, tmp_path, field, value):
    """Read into int64 arrays (start_ns, switch windows: an OverflowError in a table) and C ints (os.kill of a
    pid past 2**31): refused when the run opens, naming the field and its range."""
    run = copy(templates, "geprof", tmp_path)
    info = run / rawdata.INFO_FILE
    content = json.loads(info.read_text())
    content[field] = value
    info.write_text(json.dumps(content))
    with pytest.raises(RunDirError) as err:
        geprof_nb.load(run)
    assert str(err.value).startswith(f"{info}: field {field!r} is ") and "2**" in str(err.value)


def test_info_json_with_an_integer_of_5000_digits_is_a_run_dir_error(templates, tmp_path):
    run = copy(templates, "geprof", tmp_path)
    info = run / rawdata.INFO_FILE
    info.write_text(info.read_text()[:-2] + f', "pid": {HUGE}}}')
    with pytest.raises(RunDirError, match=r"cannot be read as JSON \(number 1111.*past the range of a float"):
        geprof_nb.load(run)


@pytest.mark.parametrize("line", ['{"id": "%d", "s": "x"}' % 2**64, '{"id": %s, "s": "x"}' % HUGE,
                                  '{"id": "-1", "s": "x"}', '{"id": "7", "s": ' + DEEP + "}",
                                  '{"id": "7", "s": "a", "s": "b"}'])
def test_a_hash_dictionary_line_with_an_impossible_id_is_that_line_only(templates, tmp_path, line):
    run = copy(templates, "geprof", tmp_path)
    hashes = run / rawdata.HASH_DICT_FILE
    n = len(hashes.read_text().splitlines())
    with open(hashes, "a") as f:
        f.write(line + "\n")
    p = geprof_nb.load(run)
    assert len(p.op_summary) == len(geprof_nb.load(templates["geprof"]).op_summary)
    assert f"damaged files skipped: {rawdata.HASH_DICT_FILE}:{n + 1}" in p.notes


def _step(ts: str, dur: str = '"1.0"', name: str = "ProfilerStep#1") -> str:
    return json.dumps([{"ph": "X", "name": name, "pid": 1, "tid": 1, "ts": 0, "dur": 0}]).replace(
        '"ts": 0', f'"ts": {ts}').replace('"dur": 0', f'"dur": {dur}')


@pytest.mark.parametrize("trace, said", [
    (_step(f'"{2**70}"'), "'ts' '1180591620717411303424' / 'dur' '1.0' are not µs decimals"),
    (_step(str(2**70)), "'ts' 1180591620717411303424 / 'dur' '1.0' are not µs decimals"),
    (_step(HUGE), "(5002 characters) / 'dur' '1.0' are not µs decimals"),
    (_step('"1.0"', name=f"ProfilerStep#{2**70}"), "the step number or its end (ts + dur) is past 2**63 - 1"),
    (_step('"9223372036854775.000"', '"1.0"'), "the step number or its end (ts + dur) is past 2**63 - 1"),
])
def test_trace_timestamps_past_int64_name_the_event(templates, tmp_path, trace, said):
    run = copy(templates, "ascend_pt", tmp_path)
    path = run / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    path.write_text(trace)
    with pytest.raises(ImportFormatError) as err:
        geprof_nb.load(run).source.step_bounds()
    assert str(err.value).startswith(f"{path}: event 0 (") and said in str(err.value), str(err.value)


def test_a_trace_flow_id_that_is_a_list_is_passed_over(templates, tmp_path):
    """An id must be a name or a number: a flow with a list for one pairs with nothing (it raised TypeError)."""
    run = copy(templates, "ascend_pt", tmp_path)
    path = run / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    events = json.loads(path.read_text())
    flows = [e for e in events if e.get("name") == "torch_to_npu"]
    flows[0]["id"] = [flows[0]["id"]]
    path.write_text(json.dumps(events))
    launch_of = geprof_nb.load(run).source._trace.launch_of
    assert len(launch_of) == len(flows) // 2 - 1


@pytest.mark.parametrize("column, value, expected", [
    ("Task Start Time(us)", "1" * 30 + ".5", "below 9223372036854775.808 (2**63 ns)"),
    ("Task Start Time(us)", "9223372036854775.808", "below 9223372036854775.808 (2**63 ns)"),
    ("Task Start Time(us)", HUGE, "below 9223372036854775.808 (2**63 ns)"),
    ("Task ID", "1" * 20, "an integer (or N/A) in the 64-bit range"),
    ("Task ID", HUGE, "an integer (or N/A) in the 64-bit range"),
    ("Stream ID", "9.9E+99", "an integer (or N/A) in the 64-bit range"),
])
def test_csv_numbers_past_int64_name_file_line_and_column(templates, tmp_path, column, value, expected):
    run = copy(templates, "msprof", tmp_path)
    path = run / "mindstudio_profiler_output" / f"op_summary_{STAMP}.csv"
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    import csv
    cells = next(csv.reader([lines[2]]))
    cells[header.index(column)] = value
    lines[2] = ",".join(f'"{c}"' if "," in c else c for c in cells)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ImportFormatError) as err:
        read_everything(geprof_nb.load(run))
    message = str(err.value)
    assert message.startswith(f"{path}, line 3, column {column!r}: cannot parse ") and expected in message
    assert len(message) < 300 + len(str(path))  # a long cell is quoted by its ends


# ============================================================= option values outside their domain
@pytest.mark.parametrize("options, said", [
    ({"geprof.seed": "-1"}, "geprof.seed='-1' is not valid"),  # numpy's generator raised inside GEInitialize
    ({"geprof.seed": -1}, "geprof.seed=-1 is not valid"),
    ({"geprof.seed": 1.5}, "geprof.seed=1.5 is not valid"),
    ({"geprof.seed": True}, "geprof.seed=True is not valid"),
    ({"geprof.seed": "1_0"}, "geprof.seed='1_0' is not valid"),
    ({"geprof.seed": "\u0663"}, "geprof.seed='\u0663' is not valid"),
    ({"ge.exec.rankSize": "2.5"}, "ge.exec.rankSize: '2.5' is not an integer"),
    ({"ge.exec.rankSize": "nan"}, "ge.exec.rankSize: 'nan' is not a number"),
    ({"ge.exec.rankSize": "2", "geprof.ranksPerNode": "7.5"}, "geprof.ranksPerNode: '7.5' is not an integer"),
    ({"ge.exec.rankSize": "2", "geprof.faults": '{"loader_stall": {"every": 2.5, "us": 10}}'},
     "geprof.faults.loader_stall.every: 2.5 is not an integer"),
    ({"ge.exec.rankSize": "2", "geprof.faults": '{"loader_stall": {"every": 2, "us": 10, "ranks": 5}}'},
     "geprof.faults.loader_stall.ranks: 5 is not a list"),
    ({"ge.exec.rankSize": "2", "geprof.faults": '{"slow_ranks": {"1.7": 1.5}}'},
     "geprof.faults.slow_ranks: rank '1.7' is not an integer"),
    ({"ge.exec.rankSize": "2", "geprof.faults": '{"slow_links": 7}'}, "geprof.faults.slow_links: 7 is not a list"),
    ({"geprof.device": "Ascend910B:ai_core_num=1e30"}, "ai_core_num='1e30' is out of range; accepted: a whole "
                                                       "number from 1 to 32000"),
    ({"geprof.device": "Ascend910B:hbm_bandwidth=inf"}, "hbm_bandwidth='inf' is not a number"),
    ({"geprof.device": "Ascend910B:hbm_bandwidth=1e-300"}, "hbm_bandwidth='1e-300' is out of range"),
    (profiling('{"checkpoint_interval": "-1"}'), "profiling option 'checkpoint_interval': '-1' is not a number"),
])
def test_option_values_of_the_right_type_outside_their_domain_are_a_param_invalid(options, said):
    status, message = ge_init(options)
    assert status == ge.PARAM_INVALID and said in message, message


def test_the_device_what_if_extremes_it_takes_run_and_load(tmp_path):
    """The ends of every what-if field's range: a run whose durations are whole, non-negative int64 ns."""
    from geprof_nb.cost_model import WHAT_IF_RANGE as RANGE

    for key in ("ai_core_num", "aic_frequency_mhz", "hbm_bandwidth", "hccl_step_latency_ns", "task_overhead_ns"):
        for value in RANGE[key]:
            out = tmp_path / f"{key}-{value:g}"
            options = {**profiling(json.dumps({"output": str(out), "training_trace": "on"})),
                       "geprof.clock": "virtual", "geprof.device": f"Ascend910B:{key}={value:.17g}"}
            assert ge.GEInitialize(options) == ge.SUCCESS, ge.GEGetErrorMsg()
            sess = ge.Session()
            sess.add_graph(1, tiny_mlp())
            assert [sess.run_graph(1) for _ in range(2)] == [ge.SUCCESS, ge.SUCCESS]
            ge.GEFinalize()
            durations = geprof_nb.load(out).op_summary["Task Duration(us)"]
            assert len(durations) and (durations >= 0).all(), (key, value)


# ============================================================ what is where a data file should be
#: (layout, file, what its oddity does: "error" naming it, "note" naming it and the run loads)
FILES = [
    ("geprof", rawdata.INFO_FILE, "error"),
    ("geprof", rawdata.HASH_DICT_FILE, "note"),
    ("geprof", "device_0/data/hwts.000000.npy", "note"),
    ("ascend_pt", "ASCEND_PROFILER_OUTPUT/kernel_details.csv", "error"),
    ("ascend_pt", "ASCEND_PROFILER_OUTPUT/trace_view.json", "error"),
    ("ascend_pt", "ASCEND_PROFILER_OUTPUT/communication.json", "error"),
    ("ascend_pt", "ASCEND_PROFILER_OUTPUT/operator_memory.csv", "error"),
    ("ascend_pt", "ASCEND_PROFILER_OUTPUT/step_trace_time.csv", "error"),
    ("ascend_pt", "profiler_info_0.json", "note"),
    ("msprof", f"mindstudio_profiler_output/step_trace_{STAMP}.csv", "error"),
    ("msprof", "device_0/info.json.0", "note"),
    ("parquet", "manifest.json", "note"),
    ("parquet", "op_summary.parquet", "error"),
    ("db", "ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db", "error"),
]


@pytest.mark.parametrize("kind", list(ODDITIES))
@pytest.mark.parametrize("layout, name, effect", FILES)
def test_what_is_where_a_data_file_should_be_is_named(templates, tmp_path, layout, name, effect, kind):
    run = copy(templates, layout, tmp_path)
    path = run / name
    put_oddity(path, kind)
    words = ODDITIES[kind]
    if kind in ("directory", "link loop", "link to nothing", "FIFO") and name.endswith(f"step_trace_{STAMP}.csv"):
        effect = "skipped"  # named like a summary, no file: passed over with a note (msprof's find_sets)
    if effect == "error":
        with pytest.raises((ImportFormatError, RunDirError)) as err:
            in_time(lambda: read_everything(geprof_nb.load(run)))
        assert str(err.value).startswith(f"{path}: {words}"), str(err.value)
        assert "accepted: " in str(err.value)
    else:
        notes = in_time(lambda: read_everything(geprof_nb.load(run)))
        said = [n for n in notes if path.name in n and words in n]
        assert said, notes
        if effect == "skipped":
            assert said == [f"{path}: {words}{said[0].split(words, 1)[1].split(';')[0]}; skipped (a summary is a "
                            "CSV file)"]


def test_an_unreadable_hash_dictionary_loses_only_the_names(templates, tmp_path):
    run = copy(templates, "geprof", tmp_path)
    rows = len(geprof_nb.load(run).op_summary)
    put_oddity(run / rawdata.HASH_DICT_FILE, "unreadable")
    p = geprof_nb.load(run)
    assert len(p.op_summary) == rows and p.op_summary["Op Name"].astype(str).str.startswith("<unknown 0x").all()


@pytest.mark.parametrize("kind", list(ODDITIES))
def test_a_model_file_that_is_no_file_is_an_invalid_file_status(tmp_path, kind):
    path = tmp_path / "model.om"
    path.write_bytes(b"x")
    put_oddity(path, kind)
    ge.GEInitialize({})
    try:
        (model_id, ret), message = in_time(lambda: (acl.aclmdlLoadFromFile(str(path)), ge.GEGetErrorMsg()))
        assert (model_id, ret) == (0, acl.ACL_ERROR_INVALID_FILE)
        assert message.startswith(f"[ACL_ERROR_INVALID_FILE] aclmdlLoadFromFile: cannot read {str(path)!r}: "), message
    finally:
        ge.GEFinalize()


@pytest.mark.parametrize("path, said", [
    ("loop", "a symbolic link loop"), ("dangling", "a symbolic link to "), ("a\0b", "a path with a NUL byte"),
    ("x" * 5000, "not a usable path (File name too long)"),
])
def test_a_path_that_cannot_be_one_is_a_run_dir_error_and_a_cli_line(tmp_path, monkeypatch, path, said):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "dangling").symlink_to("gone")
    with pytest.raises(RunDirError) as err:
        geprof_nb.load(path)
    assert said in str(err.value) and "accepted: the path of a run directory" in str(err.value)
    if "\0" not in path:  # (no argv holds a NUL)
        done = subprocess.run([sys.executable, "-m", "geprof_nb.cli", "analyze", path], capture_output=True,
                              text=True, cwd=tmp_path, timeout=120)
        assert_one_line_error(done, said)


def test_a_directory_that_cannot_be_listed_is_a_run_dir_error(tmp_path, monkeypatch):
    def refuse(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "iterdir", refuse)
    with pytest.raises(RunDirError, match=f"^{tmp_path}: cannot be listed \\(not readable \\(permission denied\\)\\)"):
        geprof_nb.load(tmp_path)


@pytest.mark.parametrize("kind", ["link loop", "unreadable", "directory"])
def test_the_cli_prints_a_data_file_oddity_as_one_line(templates, tmp_path, kind):
    run = copy(templates, "ascend_pt", tmp_path)
    path = run / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    put_oddity(path, kind)
    assert_one_line_error(geprof_cli("analyze", str(run)), str(path), ODDITIES[kind])
