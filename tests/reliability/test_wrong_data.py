"""Data that is wrong but well-formed (issue 25): impossible cells (a negative duration, an end before its start,
a task without a duration) drop their row with a note and are never summed: every table is what it is with
the row deleted from the file; a chunk of another run is named and not loaded; a CSV that begins with blank
lines holds its data; names with CR or LF survive the export -> import round trip; a JSON object that gives
one key twice with different values is refused.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis.rundir import RunDir
from geprof_nb.errors import ImportFormatError, RunDirError
from geprof_nb.prof import rawdata
from geprof_nb.prof.options import ProfilingOptions, ProfilingOptionsError
from helpers.geprof_testing import run_profiled_session
from helpers.real_data import PYTORCH_TEXT
from helpers.real_fixtures import STAMP, write_msprof
from helpers.reliability_helpers import tiny_mlp

REAL = PYTORCH_TEXT / "level2" / "rank0_ascend_pt"
OUT = "ASCEND_PROFILER_OUTPUT"
MS = "mindstudio_profiler_output"


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")


def csv_line(cells: list[str]) -> str:
    """A CSV record as RFC 4180 writes it: a cell holding a comma, a quote, CR or LF quoted (csv.writer leaves CR
    bare with a LF line end)."""
    return ",".join('"' + c.replace('"', '""') + '"' if any(ch in c for ch in ',"\r\n') else c for c in cells)


def set_cell(path: Path, line: int, column: str, value: str) -> None:
    """Set one cell of a CSV whose records are one line each (1-based line; line 1 is the header)."""
    lines = lines_of(path)
    header = next(csv.reader([lines[0]]))
    cells = next(csv.reader([lines[line - 1]]))
    cells[header.index(column)] = value
    lines[line - 1] = csv_line(cells)
    path.write_text("\n".join(lines), encoding="utf-8")


def delete_line(path: Path, line: int) -> None:
    lines = lines_of(path)
    del lines[line - 1]
    path.write_text("\n".join(lines), encoding="utf-8")


def frames_equal(a: pd.DataFrame, b: pd.DataFrame, what: str) -> None:
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True), check_exact=True, obj=what)


def dropped_note(path: Path, line: int, column: str, what: str, value: str) -> str:
    return (f"{path}, line {line}: 1 row dropped, whose column {column!r} is {what} (the first: {value!r}); such a "
            "row is not read, so no table counts or sums it")


NEGATIVE = "negative or out of range (infinite, or past 9.2e15: 2**63 ns in µs)"
REQUIRED = "N/A or empty, where every row has a value"


@pytest.fixture(scope="module")
def msprof_template(tmp_path_factory):
    return write_msprof(tmp_path_factory.mktemp("msprof")).path


def real_copy(tmp_path: Path, name: str, without: tuple[str, ...] = ()) -> Path:
    dest = tmp_path / name / REAL.name
    shutil.copytree(REAL, dest, ignore=lambda d, names: [n for n in names if n in without])
    return dest


# ==================================================================== impossible cells: as if absent
#: (file, line, column, value, what the note says, tables that must be as with the row deleted)
REAL_CASES = [
    ("kernel_details.csv", 3, "Duration(us)", "-5.0", NEGATIVE, ("op_summary", "step_breakdown", "op_statistic")),
    ("kernel_details.csv", 40, "Duration(us)", "N/A", REQUIRED, ("op_summary", "step_breakdown")),
    ("kernel_details.csv", 41, "Duration(us)", "", REQUIRED, ("op_summary", "step_breakdown")),
    ("kernel_details.csv", 7, "Start Time(us)", "N/A", REQUIRED, ("op_summary", "step_breakdown")),
    ("kernel_details.csv", 8, "Duration(us)", "1e300", NEGATIVE, ("op_summary", "step_breakdown")),
    ("kernel_details.csv", 9, "Wait Time(us)", "-0.001", NEGATIVE, ("op_summary",)),
    ("kernel_details.csv", 10, "Step Id", "-1", NEGATIVE, ("op_summary", "step_breakdown")),
    ("op_statistic.csv", 2, "Count", "-3", NEGATIVE, ("op_statistic",)),
    ("api_statistic.csv", 5, "Time(us)", "-1.5", NEGATIVE, ("api_statistic",)),
    ("operator_memory.csv", 4, "Release Time(us)", "1736412474728120.879\t", "before its 'Allocation Time(us)'",
     ("operator_memory",)),
    ("operator_memory.csv", 2, "Size(KB)", "-4", NEGATIVE, ("operator_memory",)),
    ("memory_record.csv", 3, "Total Reserved(MB)", "-1", NEGATIVE, ("memory_record",)),
    ("step_trace_time.csv", 2, "Computing", "-8868.24", NEGATIVE, ("step_breakdown",)),
]


@pytest.mark.parametrize("name, line, column, value, what, tables", REAL_CASES)
def test_an_impossible_cell_of_a_real_torch_npu_file_drops_its_row_as_if_absent(tmp_path, name, line, column,
                                                                                 value, what, tables):
    """The real MindStudio Insight level2 run with one cell made impossible, and the same run with that row
    deleted: every table the file feeds is the same (the step split is computed from the kernels where
    step_trace_time.csv is left out), and only the first says so, naming the file, line and column."""
    without = () if name == "step_trace_time.csv" else ("step_trace_time.csv",)
    damaged, deleted = real_copy(tmp_path, "damaged", without), real_copy(tmp_path, "deleted", without)
    set_cell(damaged / OUT / name, line, column, value)
    delete_line(deleted / OUT / name, line)
    a, b = geprof_nb.load(damaged), geprof_nb.load(deleted)
    for table in tables:
        frames_equal(getattr(a, table), getattr(b, table), table)
    assert dropped_note(damaged / OUT / name, line, column, what, value.strip()) in a.notes
    assert not [n for n in b.notes if "dropped" in n]


def test_a_negative_kernel_duration_is_not_summed_into_the_step_split(tmp_path):
    """The issue's case: the kernel's time was summed into Computing; dropped, the split is the other kernels'."""
    run = real_copy(tmp_path, "run", ("step_trace_time.csv",))
    before = geprof_nb.load(run).step_breakdown
    set_cell(run / OUT / "kernel_details.csv", 3, "Duration(us)", "-100000.0")
    after = geprof_nb.load(run).step_breakdown
    assert (after["Computing"] <= before["Computing"]).all() and (after["Computing"] >= 0).all()


#: (summary kind, line, column, value, what the note says, tables)
MSPROF_CASES = [
    ("op_summary", 3, "Task Duration(us)", "-0.5", NEGATIVE, ("op_summary", "step_breakdown", "op_statistic")),
    ("op_summary", 4, "Task Duration(us)", "N/A", REQUIRED, ("op_summary", "step_breakdown")),
    ("op_summary", 5, "Device_id", "-1", NEGATIVE, ("op_summary",)),
    ("task_time", 3, "task_stop(us)", "1.000", "before its 'task_start(us)'", ("task_time",)),
    ("task_time", 4, "task_time(us)", "-2", NEGATIVE, ("task_time",)),
    ("step_trace", 2, "Iteration Time(us)", "-100", NEGATIVE, ("step_trace",)),
    ("op_statistic", 2, "Count", "-1", NEGATIVE, ("op_statistic",)),
    ("api_statistic", 2, "Time(us)", "-7", NEGATIVE, ("api_statistic",)),
]


@pytest.mark.parametrize("kind, line, column, value, what, tables", MSPROF_CASES)
def test_an_impossible_cell_of_an_msprof_summary_drops_its_row_as_if_absent(msprof_template, tmp_path, kind, line,
                                                                             column, value, what, tables):
    damaged, deleted = (shutil.copytree(msprof_template, tmp_path / n / msprof_template.name) for n in ("a", "b"))
    name = f"{MS}/{kind}_{STAMP}.csv"
    set_cell(damaged / name, line, column, value)
    delete_line(deleted / name, line)
    a, b = geprof_nb.load(damaged), geprof_nb.load(deleted)
    for table in tables:
        frames_equal(getattr(a, table), getattr(b, table), table)
    assert dropped_note(damaged / name, line, column, what, value) in a.notes


def test_a_collective_with_a_negative_time_is_dropped_from_communication_time(tmp_path):
    damaged, deleted = real_copy(tmp_path, "a"), real_copy(tmp_path, "b")
    for run, change in ((damaged, "negative"), (deleted, "delete")):
        path = run / OUT / "communication.json"
        content = json.loads(path.read_text())
        ops = content["step50"]["collective"]
        key = list(ops)[1]
        if change == "negative":
            ops[key]["Communication Time Info"]["Elapse Time(ms)"] = -86.47
        else:
            del ops[key]
        path.write_text(json.dumps(content))
    a, b = geprof_nb.load(damaged), geprof_nb.load(deleted)
    frames_equal(a.communication_time, b.communication_time, "communication_time")
    path = damaged / OUT / "communication.json"
    assert (f"{path}: 1 collectives dropped, whose times cannot be negative: step50/{key} ('Elapse Time(ms)' "
            "-86.47); such a collective is not read, so no table counts or sums it") in a.notes


def test_a_link_with_a_negative_transit_time_is_dropped_from_the_matrix(tmp_path):
    run = real_copy(tmp_path, "a")
    path = run / OUT / "communication_matrix.json"
    content = json.loads(path.read_text())
    step = next(iter(content))
    op = next(iter(content[step]["collective"]))
    link = next(iter(content[step]["collective"][op]))
    content[step]["collective"][op][link]["Transit Time(ms)"] = -1.0
    path.write_text(json.dumps(content))
    source = geprof_nb.load(run).source
    before = len(geprof_nb.load(REAL).source.communication_matrix())
    assert len(source.communication_matrix()) == before - 1
    assert any(n.startswith(f"{path}: 1 links dropped, whose transit size or time is negative: {step}/{op} {link} (")
               for n in source.notes())


# ========================================================================== a chunk of another run
@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Two finished runs of the same layout: 2 steps (58 op rows) and 5 steps."""
    root = tmp_path_factory.mktemp("two")
    small = run_profiled_session(root / "small", tiny_mlp(), 2).profile
    big = run_profiled_session(root / "big", tiny_mlp(), 5).profile
    return small, big


HWTS = "device_0/data/hwts.000000.npy"


def test_a_chunk_of_another_run_added_is_named_and_not_loaded(two_runs, tmp_path):
    small, big = two_runs
    run = shutil.copytree(small.path, tmp_path / small.path.name)
    shutil.copy(big.path / HWTS, run / "device_0/data/hwts.000007.npy")
    p = geprof_nb.load(run)
    frames_equal(p.op_summary, small.op_summary, "op_summary")
    assert ("damaged files skipped: device_0/data/hwts.000007.npy (not a chunk this run wrote: its info.json lists "
            "1 hwts chunk, hwts.000000.npy: not loaded)") in p.notes


def test_a_chunk_of_another_run_in_place_of_one_is_named_and_its_records_missing(two_runs, tmp_path):
    """The issue's case: 140 op rows where info.json counts 58; now none, and the notes say which chunk and what."""
    small, big = two_runs
    run = shutil.copytree(small.path, tmp_path / small.path.name)
    shutil.copy(big.path / HWTS, run / HWTS)
    written = json.loads((run / rawdata.INFO_FILE).read_text())["records"]["hwts"]
    theirs = len(RunDir(big.path).load("hwts"))
    p = geprof_nb.load(run)
    assert len(p.op_summary) == 0
    assert (f"damaged files skipped: {HWTS} (holds {theirs} records where this run wrote {written}: another run's "
            "chunk: not loaded)") in p.notes
    assert f"hwts: {written} of {written} written records are missing (chunk files deleted, truncated or not copied)" \
        in p.notes


def test_a_run_written_before_chunks_were_listed_names_the_chunk_holding_the_extra_records(two_runs, tmp_path):
    small, big = two_runs
    run = shutil.copytree(small.path, tmp_path / small.path.name)
    info = json.loads((run / rawdata.INFO_FILE).read_text())
    del info["chunks"]
    (run / rawdata.INFO_FILE).write_text(json.dumps(info))
    shutil.copy(big.path / HWTS, run / "device_0/data/hwts.000003.npy")
    extra = len(RunDir(big.path).load("hwts"))
    p = geprof_nb.load(run)
    frames_equal(p.op_summary, small.op_summary, "op_summary")
    assert (f"damaged files skipped: device_0/data/hwts.000003.npy (its {extra} records are those the chunks hold past "
            f"the {info['records']['hwts']} info.json says the run wrote: another run's chunk: not loaded)") in p.notes


def test_a_run_not_finalised_keeps_the_chunks_closed_after_its_last_info_json(two_runs, tmp_path):
    """A killed run's info.json lags its chunks: one closed after it is the run's own, not another's."""
    small, _ = two_runs
    run = shutil.copytree(small.path, tmp_path / small.path.name)
    info = json.loads((run / rawdata.INFO_FILE).read_text())
    info["status"] = "running"
    info["pid"] = 1  # not this process: the run is not still collecting
    (run / rawdata.INFO_FILE).write_text(json.dumps(info))
    shutil.copy(run / HWTS, run / "device_0/data/hwts.000001.npy")  # closed after the last info.json
    p = geprof_nb.load(run)
    assert len(p.source.run.load("hwts")) == 2 * info["records"]["hwts"]
    assert not [n for n in p.notes if "not a chunk this run wrote" in n]


# ======================================================================== blank lines before the header
@pytest.mark.parametrize("before", ["\n", "\r\n\r\n", "\n   \n\t\n"], ids=["LF", "CRLF", "spaces"])
def test_a_csv_beginning_with_blank_lines_holds_its_data(tmp_path, before):
    """It was "empty file": the header is the first line that is not blank, as msprof-analyze reads it."""
    run = real_copy(tmp_path, "run")
    path = run / OUT / "kernel_details.csv"
    path.write_bytes(before.encode() + path.read_bytes())
    frames_equal(geprof_nb.load(run).op_summary, geprof_nb.load(REAL).op_summary, "op_summary")


def test_line_numbers_count_the_blank_lines(tmp_path):
    run = real_copy(tmp_path, "run")
    path = run / OUT / "kernel_details.csv"
    set_cell(path, 5, "Block Dim", "8.5")
    lines = lines_of(path)
    path.write_text("\n\n" + "\n".join(lines[:3] + [""] + lines[3:]), encoding="utf-8")  # line 5 is now line 8
    with pytest.raises(ImportFormatError) as err:
        geprof_nb.load(run).op_summary  # noqa: B018
    assert str(err.value).startswith(f"{path}, line 8, column 'Block Num': cannot parse '8.5'")  # its msprof name


def test_a_file_of_blank_lines_is_empty(tmp_path):
    run = real_copy(tmp_path, "run")
    (run / OUT / "kernel_details.csv").write_text("\n \n\r\n")
    with pytest.raises(ImportFormatError, match="kernel_details.csv: empty file \\(expected a CSV header line\\)$"):
        geprof_nb.load(run)


# ====================================================================== CR and LF in names: round trip
NAMES = ["mm\nline", "relu\rcr", 'q"uote,comma\r\nboth', "\r", "tail\n"]


@pytest.fixture(scope="module")
def odd_names(tmp_path_factory):
    g = ge.Graph("odd")
    x = g.data("x", (4, 16), "float16")
    y = g.op("MatMulV2", [x, g.variable("w", (16, 16), "float16")], name=NAMES[0])
    for name in NAMES[1:]:
        y = g.op("Relu", [y], name=name)
    g.output([y])
    return run_profiled_session(tmp_path_factory.mktemp("odd"), g, 2).profile


@pytest.mark.parametrize("fmt", ["msprof", "ascend_pt"])
def test_names_with_cr_and_lf_survive_the_export_import_round_trip(odd_names, tmp_path, fmt):
    """It read them as rows cut short, and called the file truncated: a bare CR was written unquoted."""
    q = geprof_nb.load(odd_names.export(tmp_path, format=fmt))
    assert list(q.op_summary["Op Name"].astype(str)) == list(odd_names.op_summary["Op Name"].astype(str))
    assert set(NAMES) <= set(q.op_summary["Op Name"].astype(str))
    assert not [n for n in q.notes if "skipped" in n or "truncated" in n]


def test_quoted_line_breaks_across_pyarrows_blocks_are_read(tmp_path):
    """A file of several MB is read in blocks: a line break inside a quoted cell at a block's end made the
    quick reading fail; the reading that takes line breaks in cells gives every row."""
    run = real_copy(tmp_path, "run")
    path = run / OUT / "kernel_details.csv"
    lines = lines_of(path)
    header, rows = lines[0], [r for r in lines[1:] if r]
    out = [header]
    for k in range(120):
        for r in rows:
            cells = next(csv.reader([r]))
            cells[4] = f"{cells[4]}\n#{k}" if k % 3 else f"{cells[4]}\r{k}"
            out.append(csv_line(cells))
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    assert path.stat().st_size > 3 << 20
    names = geprof_nb.load(run).op_summary["Op Name"].astype(str)
    assert len(names) == 120 * len(rows)
    assert names.iloc[len(rows)].endswith("\n#1") and names.iloc[0].endswith("\r0")


# =============================================================================== a key given twice
def test_profiling_options_with_a_key_given_twice_are_refused_as_a_repeated_flag_is(earlier_run):
    text = '{"output": "./a", "training_trace": "on", "output": "./b"}'
    status = ge.GEInitialize({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": text})
    message = ge.GEGetErrorMsg()
    ge.GEFinalize()
    assert status == ge.PARAM_INVALID
    assert message == ("[PARAM_INVALID] E10001: profiling option 'ge.exec.profilingOptions': is not valid JSON (key "
                       "'output' is given twice, with different values (\"./a\" and \"./b\"); accepted: each key once "
                       "(or repeated with the same value)); accepted: a JSON object such as {\"output\": \"./prof\", "
                       "\"training_trace\": \"on\"}")
    earlier_run.assert_intact()
    assert ProfilingOptions.parse('{"output": "./a", "output": "./a"}').output == "./a"
    with pytest.raises(ProfilingOptionsError, match="key 'hccl' is given twice"):
        ProfilingOptions.resolve({}, {"GE_PROFILING_MODE": "true", "GE_PROFILING_OPTIONS": '{"hccl": "on", '
                                                                                           '"hccl": "off"}'})


def test_cluster_faults_with_a_key_given_twice_are_refused():
    status = ge.GEInitialize({"ge.exec.rankSize": "2", "geprof.faults": '{"slow_ranks": {"1": 1.5, "1": 2.0}}'})
    message = ge.GEGetErrorMsg()
    ge.GEFinalize()
    assert status == ge.PARAM_INVALID and "geprof.faults: not valid JSON (key '1' is given twice" in message


def test_info_json_with_a_key_given_twice_is_a_run_dir_error(two_runs, tmp_path):
    run = shutil.copytree(two_runs[0].path, tmp_path / "run")
    info = run / rawdata.INFO_FILE
    info.write_text(info.read_text()[:-2] + ', "status": "running"}')
    with pytest.raises(RunDirError) as err:
        geprof_nb.load(run)
    assert str(err.value) == (f"{info}: cannot be read as JSON (key 'status' is given twice, with different values "
                              "(\"complete\" and \"running\"); accepted: each key once (or repeated with the same "
                              "value))")


def test_a_communication_json_with_an_op_given_twice_is_refused(tmp_path):
    run = real_copy(tmp_path, "run")
    path = run / OUT / "communication.json"
    text = path.read_text()
    key = next(iter(json.loads(text)["step50"]["collective"]))
    at = text.index(f'"{key}"')
    path.write_text(text[:at] + f'"{key}": {{"Communication Time Info": {{}}}}, ' + text[at:])
    with pytest.raises(ImportFormatError, match=f"^{path}: not valid JSON \\(key '{key}' is given twice"):
        geprof_nb.load(run).communication_time  # noqa: B018


def test_a_profiler_info_with_a_key_given_twice_is_a_note(tmp_path):
    run = real_copy(tmp_path, "run")
    path = run / "profiler_info_0.json"
    path.write_text(path.read_text().rstrip()[:-1] + ', "rank_id": 6}')  # it holds "rank_id": 0
    p = geprof_nb.load(run)
    assert any(n.startswith(f"{path}: not valid JSON (key 'rank_id' is given twice") for n in p.notes), p.notes


def test_a_trace_event_with_a_key_given_twice_is_read_with_its_last_value(tmp_path):
    """Timelines of millions of events are not checked for repeated keys (parsed by orjson, which keeps the
    last): documented in data_and_security.md."""
    run = real_copy(tmp_path, "run")
    path = run / OUT / "trace_view.json"
    events = json.loads(path.read_text())
    step = next(e for e in events if str(e.get("name", "")).startswith("ProfilerStep#"))
    text = json.dumps(events)
    original = json.dumps(step)
    path.write_text(text.replace(original, original[:-1] + ', "dur": 1.5}', 1))
    steps = geprof_nb.load(run).source.step_bounds()
    assert int(steps["end"].iloc[0] - steps["begin"].iloc[0]) >= 1500
