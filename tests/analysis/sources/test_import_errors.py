"""Unknown and damaged layouts: every error is an ImportFormatError naming the file (and column)."""

from __future__ import annotations

import csv
import io
import json

import pytest

import geprof_nb
from geprof_nb.analysis.export.parquet import export_parquet
from geprof_nb.errors import ImportFormatError, RunDirError
from helpers.real_fixtures import STAMP, write_ascend_pt, write_msprof


def op_summary_file(run):
    return run.output / f"op_summary_{STAMP}.csv"


def replace_cell(path, line: int, column: str, value: str) -> None:
    """Set one cell (1-based file line; line 1 is the header) of a CSV written by the fixtures."""
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split(",")
    cells = next(csv.reader([lines[line - 1]]))
    cells[header.index(column)] = value
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow(cells)
    lines[line - 1] = buf.getvalue()
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_error_type():
    assert issubclass(ImportFormatError, ValueError) and issubclass(ImportFormatError, RunDirError)


def test_unknown_layout(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "sub").mkdir()
    with pytest.raises(ImportFormatError, match="holds no geprof run directory .* mindstudio_profiler_output"):
        geprof_nb.load(tmp_path)
    with pytest.raises(ImportFormatError, match="notes.txt: not a directory"):
        geprof_nb.load(tmp_path / "notes.txt")


def test_mindstudio_output_without_op_summary(tmp_path):
    run = write_msprof(tmp_path)
    op_summary_file(run).unlink()
    with pytest.raises(ImportFormatError, match="no op_summary_"):
        geprof_nb.load(run.path)


@pytest.mark.parametrize("kept", [(1,), (0, 2)])
def test_only_incomplete_op_summary_slices_say_which_slice_is_missing(tmp_path, kept):
    """Not 'no op_summary_*.csv': the slices are there, and the error names the gap that made them unusable."""
    run = write_msprof(tmp_path, slices=3)
    for k in {0, 1, 2} - set(kept):
        (run.output / f"op_summary_slice_{k}_{STAMP}.csv").unlink()
    names = ", ".join(f"op_summary_slice_{k}_{STAMP}.csv" for k in kept)
    missing = ", ".join(f"slice_{k}" for k in range(max(kept)) if k not in kept)
    with pytest.raises(ImportFormatError) as err:
        geprof_nb.load(run.path)
    assert str(err.value) == (f"{run.output}: op_summary: slices {names} are incomplete ({missing} missing: msprof "
                              "numbers the slices of one export from slice_0 on); no complete op_summary to import")


def test_empty_file(tmp_path):
    run = write_msprof(tmp_path)
    op_summary_file(run).write_bytes(b"")
    with pytest.raises(ImportFormatError, match=rf"op_summary_{STAMP}\.csv: empty file"):
        geprof_nb.load(run.path)


def test_a_row_cut_off_at_the_end_is_skipped_and_called_truncated(tmp_path):
    run = write_msprof(tmp_path)
    path = op_summary_file(run)
    lines = path.read_text().splitlines()
    last = len(lines)
    path.write_text("\n".join(lines[:-1] + [",".join(lines[-1].split(",")[:20])]))  # no line break after it
    p = geprof_nb.load(run.path)
    assert len(p.op_summary) == len(run.rows) - 1
    assert p.op_summary["Op Name"].tolist() == [r.name for r in run.rows[:-1]]
    assert (f"{path}: 1 rows skipped, whose cells do not match the header's 46 columns: line {last} (20 fields). A "
            "row cut short or hand-edited cannot say which cell is missing, so none of it is read; every other row "
            "is. The last of them ends the file with too few cells: the file is truncated there (cut off while being "
            "written?).") in p.notes


def test_row_with_too_many_fields_is_skipped_not_read_shifted(tmp_path):
    run = write_msprof(tmp_path)
    path = op_summary_file(run)
    lines = path.read_text().splitlines()
    lines[2] += ",extra"
    path.write_text("\n".join(lines) + "\n")
    p = geprof_nb.load(run.path)
    assert p.op_summary["Op Name"].tolist() == [r.name for k, r in enumerate(run.rows) if k != 1]
    assert [n for n in p.notes if "rows skipped" in n] == [
        f"{path}: 1 rows skipped, whose cells do not match the header's 46 columns: line 3 (47 fields). A row cut "
        "short or hand-edited cannot say which cell is missing, so none of it is read; every other row is."]


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")  # pyarrow never decodes the row
def test_a_short_row_that_is_not_utf8_either_is_named_as_not_utf8(tmp_path):
    run = write_msprof(tmp_path)
    path = op_summary_file(run)
    lines = path.read_bytes().split(b"\n")
    lines[2] = b"0,\xe9"  # line 3: two cells, the second a latin-1 byte
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(ImportFormatError, match=rf"^{path}: not UTF-8 text \(invalid continuation byte at byte "
                                                rf"{len(lines[0]) + len(lines[1]) + 4}\)$"):
        geprof_nb.load(run.path)


def test_missing_column_is_named(tmp_path):
    run = write_msprof(tmp_path)
    path = op_summary_file(run)
    path.write_text(path.read_text().replace("Task Start Time(us)", "Start", 1))
    with pytest.raises(ImportFormatError) as err:
        geprof_nb.load(run.path)
    msg = str(err.value)
    assert str(path) in msg and "missing column 'Task Start Time(us)'" in msg and "msprof op_summary needs" in msg


def test_unparseable_number_names_file_line_and_column(tmp_path):
    run = write_msprof(tmp_path)
    path = op_summary_file(run)
    replace_cell(path, 3, "Task Duration(us)", "fast")
    p = geprof_nb.load(run.path)
    with pytest.raises(ImportFormatError) as err:
        p.op_summary  # noqa: B018 - tables load lazily
    assert str(err.value) == (f"{path}, line 3, column 'Task Duration(us)': cannot parse 'fast'; "
                              "expected a number (or N/A)")


def test_timestamp_in_exponent_notation_is_read_by_value_and_said(tmp_path):
    """A file saved by a spreadsheet: the cell holds what the spreadsheet kept (15 digits here)."""
    run = write_msprof(tmp_path)
    path = op_summary_file(run)
    replace_cell(path, 5, "Task Start Time(us)", "1.71757596020802E+15")
    p = geprof_nb.load(run.path)
    assert p.source.op_rows().start_ns[3] == 1_717_575_960_208_020_000
    assert p.source.op_rows().start_ns[2] == run.rows[2].start_ns
    assert (f"{path}: column 'Task Start Time(us)' has 1 numbers in exponent notation (line 5: 1.71757596020802E+15), "
            "as a spreadsheet saves them: read by their value, they are only as exact as the digits written (times "
            "or ids closer than that cannot be told apart)") in p.notes


def dropped_note(path, lines: str, n: int, column: str, what: str, first: str) -> str:
    return (f"{path}, {lines}: {n} row{'s' if n > 1 else ''} dropped, whose column {column!r} is {what} (the first: "
            f"{first!r}); such a row is not read, so no table counts or sums it")


NA_WHERE_REQUIRED = "N/A or empty, where every row has a value"


def test_a_task_without_a_start_is_dropped_with_a_note(tmp_path):
    run = write_msprof(tmp_path)
    path = op_summary_file(run)
    replace_cell(path, 2, "Task Start Time(us)", "N/A")
    p = geprof_nb.load(run.path)
    assert len(p.op_summary) == len(run.rows) - 1
    assert list(p.source.op_rows().start_ns) == [r.start_ns for r in run.rows[1:]]
    assert dropped_note(path, "line 2", 1, "Task Start Time(us)", NA_WHERE_REQUIRED, "N/A") in p.notes


def test_a_task_without_a_duration_is_dropped_with_a_note_not_summed(tmp_path):
    """Every step split is start + duration: an N/A duration has no place on the time line, so its row
    is dropped (as a negative one is, test_wrong_data), named in the notes, and the rest is read."""
    run = write_msprof(tmp_path)
    path = op_summary_file(run)
    replace_cell(path, 3, "Task Duration(us)", "N/A")
    p = geprof_nb.load(run.path)
    kept = [r for i, r in enumerate(run.rows) if i != 1]
    assert p.op_summary["Task Duration(us)"].sum() == pytest.approx(sum(r.dur_ns for r in kept) / 1000)
    assert dropped_note(path, "line 3", 1, "Task Duration(us)", NA_WHERE_REQUIRED, "N/A") in p.notes
    assert len(p.step_breakdown)


def test_a_kernel_without_a_duration_is_dropped_with_a_note(tmp_path):
    run = write_ascend_pt(tmp_path, step_id=False)
    path = run.path / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    replace_cell(path, 2, "Duration(us)", "N/A")
    p = geprof_nb.load(run.path)
    assert list(p.op_summary["Op Name"]) == [k.name for k in run.kernels[1:]]
    assert dropped_note(path, "line 2", 1, "Duration(us)", NA_WHERE_REQUIRED, "N/A") in p.notes


def test_bad_integer(tmp_path):
    run = write_msprof(tmp_path)
    replace_cell(op_summary_file(run), 4, "Block Num", "8.5")
    with pytest.raises(ImportFormatError, match=r"line 4, column 'Block Num': cannot parse '8.5'; expected an integer"):
        geprof_nb.load(run.path).op_summary  # noqa: B018


def test_line_numbers_count_the_rows_of_other_devices(tmp_path):
    run = write_msprof(tmp_path)
    path = op_summary_file(run)
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0]] + [line.replace("0,", "1,", 1) for line in lines[1:4]] + lines[1:]) + "\n")
    replace_cell(path, 7, "Task Duration(us)", "slow")  # the 3rd row of device 0
    with pytest.raises(ImportFormatError, match="line 7, column 'Task Duration\\(us\\)': cannot parse 'slow'"):
        geprof_nb.load(run.path).op_summary  # noqa: B018


def test_wrong_encoding(tmp_path):
    run = write_msprof(tmp_path)
    path = op_summary_file(run)
    path.write_bytes(path.read_bytes().replace(b"fc1", "f\u00e9".encode("latin-1"), 1))
    with pytest.raises(ImportFormatError, match=r"op_summary_.*\.csv: not UTF-8 text in column 'Op Name'"):
        geprof_nb.load(run.path)
    path.write_bytes("Device_id,\u540d\u79f0\n".encode("gbk"))
    with pytest.raises(ImportFormatError, match=r"op_summary_.*\.csv: not UTF-8 text"):
        geprof_nb.load(run.path)


def test_wrong_schema_in_another_summary(tmp_path):
    run = write_msprof(tmp_path)
    path = run.output / f"step_trace_{STAMP}.csv"
    path.write_text("Device_id,Iteration,End\n0,1,2\n")
    p = geprof_nb.load(run.path)
    with pytest.raises(ImportFormatError, match=r"step_trace_.*\.csv: missing column 'Iteration ID'; a msprof "
                                                r"step_trace needs"):
        p.step_trace  # noqa: B018


def _drop_iteration_id(text: str) -> str:
    rows = [line.split(",") for line in text.splitlines()]
    i = rows[0].index("Iteration ID")
    return "".join(",".join(r[:i] + r[i + 1:]) + "\n" for r in rows)


def _text_in_iteration_id(text: str) -> str:
    rows = [line.split(",") for line in text.splitlines()]
    rows[1][rows[0].index("Iteration ID")] = "x"
    return "".join(",".join(r) + "\n" for r in rows)


@pytest.mark.parametrize("damage, problem", [
    (_drop_iteration_id, ": missing column 'Iteration ID'; a msprof step_trace needs"),
    (_text_in_iteration_id, ", line 2, column 'Iteration ID': cannot parse 'x'"),
])
def test_damaged_step_trace_is_read_as_absent_by_the_tables_that_do_not_need_it(tmp_path, damage, problem):
    """op rows, step_breakdown, communication_statistic and advise() load as without the file,
    with a note naming it and what is wrong; step_trace itself is the error naming file and column."""
    absent = write_msprof(tmp_path / "absent")
    (absent.output / f"step_trace_{STAMP}.csv").unlink()
    without = geprof_nb.load(absent.path)
    run = write_msprof(tmp_path / "damaged")
    path = run.output / f"step_trace_{STAMP}.csv"
    path.write_text(damage(path.read_text()))
    p = geprof_nb.load(run.path)
    with pytest.raises(ImportFormatError) as err:
        p.step_trace  # noqa: B018
    assert str(err.value).startswith(f"{path}{problem}")
    notes = [n for n in p.notes if n.startswith(str(path))]
    assert notes == [f"{err.value} (read as absent: op_summary and the tables built on it do not need it)"]
    assert p.op_summary.equals(without.op_summary) and len(p.op_summary) > 0
    assert p.step_breakdown.equals(without.step_breakdown)
    assert p.communication_statistic.equals(without.communication_statistic)
    assert p.advise().equals(without.advise())
    assert "no step_trace: every op_summary row is in iteration 1" in p.notes


def test_slices_with_different_headers(tmp_path):
    run = write_msprof(tmp_path, slices=2)
    second = run.output / f"op_summary_slice_1_{STAMP}.csv"
    second.write_text(second.read_text().replace("Op Name", "Name", 1))
    with pytest.raises(ImportFormatError, match=r"op_summary_slice_1_.*\.csv: header differs from the first slice"):
        geprof_nb.load(run.path)


def test_several_devices_need_a_choice(tmp_path):
    run = write_msprof(tmp_path)
    path = op_summary_file(run)
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0]] + [line.replace("0,", "1,", 1) for line in lines[1:3]]
                              + [line.replace("0,", "2,", 1) for line in lines[3:]]) + "\n")
    with pytest.raises(ImportFormatError, match=r"no rows of device 0; the data has devices \[1, 2\]"):
        geprof_nb.load(run.path)


# ----------------------------------------------------------------------------- torch_npu
def test_kernel_details_missing_or_incomplete(tmp_path):
    run = write_ascend_pt(tmp_path)
    path = run.path / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    path.write_text(path.read_text().replace(",Name,", ",Kernel,", 1))
    with pytest.raises(ImportFormatError) as err:
        geprof_nb.load(run.path)
    assert str(path) in str(err.value) and "missing column 'Name'" in str(err.value)
    path.unlink()
    with pytest.raises(ImportFormatError, match="kernel_details.csv: missing; a torch_npu ASCEND_PROFILER_OUTPUT"):
        geprof_nb.load(run.path)


@pytest.mark.parametrize("content, message", [
    ("42", "expected a JSON list of trace events"),
    ('[{"ph": "X", "name": "ProfilerStep#1", "ts": "soon", "dur": 1}]', r"event 0 \(ProfilerStep#1\): 'ts' 'soon'"),
    ('[{"ph": "X", "name": "ProfilerStep#1", "ts": "1.0"', "not valid JSON .* truncated file"),
    ("[1, 2]", "event 0 is a int, expected an object"),
])
def test_damaged_trace_view(tmp_path, content, message):
    run = write_ascend_pt(tmp_path, step_id=False)
    (run.path / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").write_text(content)
    with pytest.raises(ImportFormatError, match=rf"trace_view.json: {message}"):
        geprof_nb.load(run.path).op_summary  # noqa: B018


def test_damaged_communication_json(tmp_path):
    run = write_ascend_pt(tmp_path)
    path = run.path / "ASCEND_PROFILER_OUTPUT" / "communication.json"
    path.write_text(json.dumps({"first": {}}))
    with pytest.raises(ImportFormatError, match="communication.json: key 'first': expected step<N>"):
        geprof_nb.load(run.path).communication_time  # noqa: B018
    path.write_text(json.dumps({"step1": {"collective": {"hcom_x__1_0_1@g": {"Communication Time Info": {
        "Start Timestamp(us)": "soon"}}}}}))
    with pytest.raises(ImportFormatError, match="field 'Start Timestamp\\(us\\)' is 'soon'; expected a number"):
        geprof_nb.load(run.path).communication_time  # noqa: B018


def test_damaged_metadata_is_a_note(tmp_path):
    run = write_ascend_pt(tmp_path)
    (run.path / "profiler_metadata.json").write_text("{")
    p = geprof_nb.load(run.path)
    assert p.info["profiler_metadata"] == {}
    assert any("profiler_metadata.json: not valid JSON" in n for n in p.notes)


# ------------------------------------------------------------------------------- Parquet
@pytest.fixture
def export(tmp_path):
    run = write_msprof(tmp_path / "src")
    return export_parquet(geprof_nb.load(run.path), tmp_path / "pq")


def test_parquet_manifest_damaged(export):
    manifest = export / "manifest.json"
    content = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**content, "version": 99}))
    with pytest.raises(ImportFormatError, match="manifest.json: format version 99"):
        geprof_nb.load(export)
    for field, value, accepted in (("notes", [1], "a list of strings"), ("device_id", 2**40, "a device id"),
                                   ("memory_peak", {"tensor": 5}, "an object of allocated_bytes")):
        manifest.write_text(json.dumps({**content, field: value}))  # a damaged field loses only what it held
        p = geprof_nb.load(export)
        assert len(p.op_summary) == 15
        assert any(n.startswith(f"{manifest}: field {field!r} is ") and f"accepted: {accepted}" in n
                   and n.endswith("read as absent (what it held is unknown)") for n in p.notes), p.notes


def test_parquet_dtype_names_are_not_evaluated(export):
    manifest = export / "manifest.json"
    content = json.loads(manifest.read_text())
    content["tables"]["op_summary"]["dtypes"][0] = "__import__('os').getcwd()"
    manifest.write_text(json.dumps(content))
    with pytest.raises(ImportFormatError, match=r"table op_summary\): unknown dtype"):
        geprof_nb.load(export).op_summary  # noqa: B018


def test_parquet_file_missing_or_corrupt(export):
    (export / "task_time.parquet").write_bytes(b"PAR1 not really")
    p = geprof_nb.load(export)
    with pytest.raises(ImportFormatError, match=r"task_time.parquet: cannot be read as Parquet"):
        p.task_time  # noqa: B018
    (export / "op_rows.parquet").unlink()
    with pytest.raises(ImportFormatError, match="op_rows.parquet: missing; the manifest lists it for table op_rows"):
        geprof_nb.load(export).op_summary  # noqa: B018



def test_a_quote_that_opens_the_file_is_named(tmp_path):
    """A quote before the first column name (a real api_statistic.csv, its first byte changed) runs to the next
    quote, cells and lines alike: pyarrow skipped rows the csv module did not (an IndexError naming nothing)."""
    import shutil

    from helpers.real_data import PYTORCH_TEXT

    run = shutil.copytree(PYTORCH_TEXT / "level1" / "rank0_ascend_pt", tmp_path / "rank0_ascend_pt")
    path = run / "ASCEND_PROFILER_OUTPUT" / "api_statistic.csv"
    path.write_bytes(b'"' + path.read_bytes()[1:])
    with pytest.raises(ImportFormatError, match=rf"^{path}: its rows cannot be told apart .*a quote left open\?$"):
        geprof_nb.load(run).api_statistic
