"""Property-based tests (hypothesis): generated input never raises anything but the documented errors.

* options parser (``ProfilingOptions.parse``): any text, bytes or JSON object -> options that
  round-trip through ``to_json``, or a ``ProfilingOptionsError`` naming a field and what it accepts;
* flag parser (``ConfigStore.parse_line`` / ``set_line``): any token sequence -> fields or a
  ``UsageError``; every valid set of values -> a flag line that gives the same values back;
* the options panel: valid values -> line -> a second panel gives the same values; anything
  typed into a text field -> stored (if valid) or a message, never an exception;
* every importer: msprof and torch_npu CSVs (cells and bytes mutated), trace_view.json and
  communication.json with generated events, Parquet manifests, and geprof run directories
  (info.json, hash dictionary, chunks) -> tables or an ``ImportFormatError``/``RunDirError``.

Each test counts its examples; the last test checks that they add up to at least 10,000.
Examples per test are set so the whole file runs in well under a minute on two cores.
"""

from __future__ import annotations

import json
import string
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from IPython.core.error import UsageError

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis.sources.csvfiles import read_csv
from geprof_nb.analysis.sources.parquet import ParquetSource
from geprof_nb.analysis.sources.trace_view import read_trace_view
from geprof_nb.errors import ImportFormatError, RunDirError
from geprof_nb.ge.device import PRESETS, check_aic_metrics
from geprof_nb.nb import config as nb_config
from geprof_nb.nb.config import CONFIG_FIELDS, ConfigError, ConfigStore, builtin_defaults, flag_line
from geprof_nb.nb.panel import ConfigPanel
from geprof_nb.nb.report import Report
from geprof_nb.prof import rawdata
from geprof_nb.prof.events import AIC_METRICS
from geprof_nb.prof.options import FREQ_FIELDS, ProfilingOptions, ProfilingOptionsError
from helpers.real_fixtures import STAMP, write_ascend_pt, write_msprof
from helpers.reliability_helpers import profiled_ge, run_steps, tiny_mlp

EXAMPLES: Counter = Counter()
FAST = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck))

# hundreds of generated cases per test
pytestmark = pytest.mark.slow


def examples(n: int):
    return settings(max_examples=n, **FAST)


# ================================================================================ options
KNOWN = [f.name for f in __import__("dataclasses").fields(ProfilingOptions)] + ["task_time", "result_path"]
ENUM_VALUES = ["on", "off", "l0", "l1", "", "ON", "true", "read", "write", "cpu,mem", "cpu, disk", "200MB", "199MB",
               " 500 MB ", "5GB", "Custom:0x1", "Custom:0x6f", "Custom:", "PipeUtilization", "Memory", "12", "0",
               "-3", "1_0", "\u0663", "\x00", "\ud800", "a/b"]
json_scalars = st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats(allow_nan=True) \
    | st.text(max_size=20) | st.sampled_from(ENUM_VALUES)
json_values = json_scalars | st.lists(json_scalars, max_size=3) | st.dictionaries(st.text(max_size=5), json_scalars,
                                                                                 max_size=3)
option_dicts = st.dictionaries(st.sampled_from(KNOWN) | st.text(max_size=12), json_values, max_size=6)


def _check_options(data) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # unknown fields warn
        try:
            opts = ProfilingOptions.parse(data)
        except ProfilingOptionsError as exc:
            assert exc.field in KNOWN or exc.field == "ge.exec.profilingOptions" or exc.field in FREQ_FIELDS
            assert str(exc).startswith(f"profiling option {exc.field!r}: ") and exc.accepted
            return
    again = ProfilingOptions.parse(opts.to_json())  # what is accepted is canonical and round-trips
    assert again == opts
    assert isinstance(opts.data_type_config(), int)


@examples(1500)
@given(option_dicts)
def test_options_parser_on_generated_objects(data):
    EXAMPLES["options objects"] += 1
    _check_options(data)
    _check_options(json.dumps(data))


@examples(3400)
@given(st.text(max_size=80) | st.binary(max_size=80) | st.builds(lambda d: json.dumps(d)[:-1], option_dicts))
def test_options_parser_on_generated_text(data):
    EXAMPLES["options text"] += 1
    _check_options(data)


# ============================================================================== flag parser
WORD = st.text(string.ascii_letters + string.digits + "_./", min_size=1, max_size=12).filter(
    lambda w: not w.startswith("-"))
SCHEDULE = ("skip_first", "wait", "warmup", "active", "repeat")


ON_OFF = st.sampled_from(["on", "off"])
#: A valid value of each flag-line field (the fields the installed code knows get one; others keep their default).
FIELD_VALUES = {
    "output": WORD, "training_trace": ON_OFF, "task_trace": st.sampled_from(["on", "off", "l0", "l1"]),
    "fp_point": st.just("") | WORD, "bp_point": st.just("") | WORD, "hccl": ON_OFF, "aicpu": ON_OFF,
    "msproftx": ON_OFF, "runtime_api": ON_OFF, "task_memory": ON_OFF,
    "aic_metrics": st.sampled_from(list(AIC_METRICS)) | st.lists(
        st.integers(1, 0x6E), min_size=1, max_size=8).map(lambda r: "Custom:" + ",".join(f"0x{x:x}" for x in r)),
    "ge_api": st.sampled_from(["off", "l0", "l1"]),
    "storage_limit": st.just("") | st.integers(200, 4294967295).map(lambda n: f"{n}MB"),
    "executor": st.sampled_from(["", "v1", "v2"]), "clock": st.sampled_from(["", "real", "virtual"]),
    "device": st.sampled_from(["", *PRESETS]),
}
SCHEDULES = st.integers(0, 4).flatmap(lambda active: st.fixed_dictionaries(
    {f: st.just(active) if f == "active" else (st.integers(0, 4) if active else st.just(0)) for f in SCHEDULE}))


def _values(fields: dict, schedule: dict) -> dict:
    values = builtin_defaults()
    values.update({k: v for k, v in fields.items() if k in values})
    values.update(schedule)
    return values


def _device_has_counters(values: dict) -> bool:
    """The aic_metrics group exists on the chosen device (L2Cache / MemoryAccess need an A2-class chip)."""
    if not values["device"]:
        return True
    try:
        check_aic_metrics(PRESETS[values["device"]], values["aic_metrics"])
    except ProfilingOptionsError:
        return False
    return True


valid_values = st.builds(_values, st.fixed_dictionaries(FIELD_VALUES), SCHEDULES).filter(_device_has_counters)


@examples(700)
@given(valid_values)
def test_flag_line_round_trip(values):
    EXAMPLES["flag line round trip"] += 1
    line = flag_line(values)
    store = ConfigStore()
    assert store.set_line("%%geprof " + line) == []
    assert store.values == values
    assert store.line() == line


FLAGS = sorted({nb_config.FLAG_OF[f] for f in CONFIG_FIELDS} | {"-o", "--no-display", "--colour", "--aic", "-"})
TOKENS = st.sampled_from(FLAGS) | st.sampled_from(ENUM_VALUES[:20]) | WORD | st.text(max_size=8) \
    | st.integers(-3, 5).map(str)


@examples(1800)
@given(st.lists(TOKENS, max_size=8))
def test_flag_parser_on_generated_lines(tokens):
    EXAMPLES["flag lines"] += 1
    line = " ".join(tokens)
    store = ConfigStore()
    before = dict(store.values)
    try:
        store.set_line(line)
    except (UsageError, ConfigError) as exc:
        assert str(exc)
        assert store.values == before  # a refused line changes nothing
        return
    for field, value in store.values.items():  # what was stored is valid
        assert nb_config.validate_config_field(field, value) == value


# ============================================================================== options panel
@pytest.fixture(scope="module")
def panels():
    return ConfigPanel(ConfigStore()), ConfigPanel(ConfigStore())


@examples(300)
@given(values=valid_values)
def test_panel_round_trip(panels, values):
    EXAMPLES["panel round trip"] += 1
    first, second = panels
    first.store.reset()
    for field in CONFIG_FIELDS:  # through the widgets, as a person would
        if field == "aic_metrics" and values[field].startswith("Custom:"):  # not in the dropdown: typed as a line
            first.store.update({field: values[field]})
        else:
            first.fields[field].value = values[field]
    assert first.store.values == values and all(m.value == "" for m in first.messages.values())
    line = first.line
    second.store.reset()
    second.paste.value = ""
    second.paste.value = line or "--aic-metrics PipeUtilization"
    assert second.values() == values and second.line == line


TEXT_FIELDS = ["output", "fp_point", "bp_point", "storage_limit"]


@examples(600)
@given(field=st.sampled_from(TEXT_FIELDS), value=st.text(max_size=30) | st.sampled_from(ENUM_VALUES))
def test_panel_text_fields_take_anything(panels, field, value):
    EXAMPLES["panel typing"] += 1
    panel, _ = panels
    panel.store.reset()
    panel.fields[field].value = "300MB" if field == "storage_limit" else "placeholder"  # so that value is a change
    before = panel.store.values[field]
    panel.fields[field].value = value
    stored = panel.store.values[field]
    assert nb_config.validate_config_field(field, stored) == stored
    try:
        canonical = nb_config.validate_config_field(field, value)
    except ConfigError:  # refused: said next to the field, and the stored value is the one before
        assert "geprof-field-error" in panel.messages[field].value and "accepted" in panel.messages[field].value
        assert stored == before
    else:
        assert stored == canonical and panel.messages[field].value == ""


# ================================================================================ importers
READ_ERRORS = (ImportFormatError, RunDirError)
CELL_TEXT = st.text(max_size=12) | st.sampled_from(["N/A", "", '"', '""', "1.5", "-1", "1e999", "nan", "\t",
                                                    "1717575960208020.758\t", "8,16;16", "\ud800".encode(
                                                        "utf-8", "surrogatepass").decode("utf-8", "replace")])


@pytest.fixture(scope="module")
def msprof_dir(tmp_path_factory):
    return write_msprof(tmp_path_factory.mktemp("fz_msprof")).path


@pytest.fixture(scope="module")
def ascend_dir(tmp_path_factory):
    return write_ascend_pt(tmp_path_factory.mktemp("fz_pt")).path


def _mutated(path: Path, data: bytes, load) -> None:
    """Write ``data`` over ``path`` for one ``load()``, then put the original back."""
    original = path.read_bytes()
    path.write_bytes(data)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            load()
    except READ_ERRORS as exc:
        assert str(path.name) in str(exc) or path.parent.name in str(exc) or "device" in str(exc), str(exc)
    finally:
        path.write_bytes(original)


def _replace_cell(data: bytes, row: int, col: int, text: str) -> bytes:
    lines = data.decode("utf-8").split("\n")
    row = 1 + row % max(1, len(lines) - 2)
    cells = lines[row].rstrip("\r").split(",")
    cells[col % len(cells)] = text
    lines[row] = ",".join(cells)
    return "\n".join(lines).encode("utf-8", "surrogatepass")


MSPROF_FILES = ["op_summary", "op_statistic", "api_statistic", "task_time", "step_trace", "communication_statistic",
                "msprof_tx"]
TABLE_OF = {"op_summary": "op_summary", "step_trace": "step_trace", "kernel_details": "op_summary",
            "step_trace_time": "step_breakdown", "operator_memory": "operator_memory",
            "memory_record": "memory_record", "communication": "communication_time", "trace_view": "op_summary"}


@examples(200)
@given(kind=st.sampled_from(MSPROF_FILES), row=st.integers(0, 50), col=st.integers(0, 60), text=CELL_TEXT)
def test_msprof_importer_on_mutated_cells(msprof_dir, kind, row, col, text):
    EXAMPLES["msprof cells"] += 1
    path = msprof_dir / "mindstudio_profiler_output" / f"{kind}_{STAMP}.csv"
    data = _replace_cell(path.read_bytes(), row, col, text)
    _mutated(path, data, lambda: getattr(geprof_nb.load(msprof_dir), TABLE_OF.get(kind, kind)))


PT_FILES = ["kernel_details.csv", "step_trace_time.csv", "op_statistic.csv", "api_statistic.csv",
            "operator_memory.csv", "memory_record.csv"]


@examples(200)
@given(name=st.sampled_from(PT_FILES), row=st.integers(0, 50), col=st.integers(0, 60), text=CELL_TEXT)
def test_ascend_pt_importer_on_mutated_cells(ascend_dir, name, row, col, text):
    EXAMPLES["ascend_pt cells"] += 1
    path = ascend_dir / "ASCEND_PROFILER_OUTPUT" / name
    stem = name.removesuffix(".csv")
    _mutated(path, _replace_cell(path.read_bytes(), row, col, text),
             lambda: getattr(geprof_nb.load(ascend_dir), TABLE_OF.get(stem, stem)))


@examples(500)
@given(name=st.sampled_from([f"{k}_{STAMP}.csv" for k in MSPROF_FILES]), cut=st.floats(0, 1),
       insert=st.binary(max_size=6), at=st.floats(0, 1))
def test_csv_reader_on_mutated_bytes(msprof_dir, name, cut, insert, at):
    """The shared CSV reader of both importers, on truncated files and inserted bytes."""
    EXAMPLES["csv bytes"] += 1
    path = msprof_dir / "mindstudio_profiler_output" / name
    data = path.read_bytes()
    data = data[: int(len(data) * cut)] if cut < 0.5 else data
    k = int(len(data) * at)
    data = data[:k] + insert + data[k:]

    def read():
        table = read_csv([path])
        for pos in range(len(table.header)):
            table.category(pos)
            try:
                table.numbers(pos)
            except ImportFormatError:
                pass

    _mutated(path, data, read)


TRACE_EVENT = st.fixed_dictionaries({}, optional={
    "ph": st.sampled_from(["X", "M", "s", "f", "i", "C"]) | st.text(max_size=2) | st.integers(),
    "name": st.sampled_from(["ProfilerStep#1", "ProfilerStep#x", "process_name", "thread_name", "torch_to_npu",
                             "aten::mm"]) | json_scalars,
    "pid": json_scalars, "tid": json_scalars, "ts": st.sampled_from(["1735689600000080.123", "1e3", "soon"])
    | json_scalars, "dur": json_scalars, "id": json_scalars, "cat": json_scalars, "bp": json_scalars,
    "args": json_values})


@examples(500)
@given(events=st.lists(TRACE_EVENT, max_size=8) | json_values)
def test_trace_view_reader_on_generated_events(tmp_path_factory, events):
    EXAMPLES["trace_view"] += 1
    path = tmp_path_factory.getbasetemp() / "trace_view_fuzz" / "trace_view.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(events))
    try:
        read_trace_view(path)
    except ImportFormatError as exc:
        assert str(path) in str(exc)


COMM_OP = st.fixed_dictionaries({}, optional={
    "Communication Time Info": st.dictionaries(st.sampled_from(
        ["Start Timestamp(us)", "Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)", "Synchronization Time(ms)",
         "Idle Time(ms)", "Wait Time Ratio"]), json_scalars, max_size=7) | json_values,
    "Communication Bandwidth Info": json_values})


@examples(250)
@given(content=st.dictionaries(st.sampled_from(["step1", "step2", "stepx", "total"]) | st.text(max_size=6),
                               st.dictionaries(st.sampled_from(["collective", "p2p"]),
                                               st.dictionaries(st.text(max_size=20), COMM_OP, max_size=3)
                                               | json_values, max_size=2) | json_values, max_size=3))
def test_communication_json_on_generated_content(ascend_dir, content):
    EXAMPLES["communication.json"] += 1
    path = ascend_dir / "ASCEND_PROFILER_OUTPUT" / "communication.json"
    _mutated(path, json.dumps(content).encode(), lambda: geprof_nb.load(ascend_dir).communication_time)


@pytest.fixture(scope="module")
def parquet_dir(msprof_dir, tmp_path_factory):
    return geprof_nb.load(msprof_dir).export(tmp_path_factory.mktemp("fz_pq"), format="parquet")


MANIFEST_KEYS = ["format", "version", "tables", "run", "info", "options", "notes", "dropped", "complete",
                 "device_id", "device"]


@examples(120)
@given(key=st.sampled_from(MANIFEST_KEYS), value=json_values, table=st.sampled_from(["op_summary", "step_trace"]),
       field=st.sampled_from(["columns", "dtypes", "rows", "file"]), inner=json_values)
def test_parquet_reader_on_generated_manifests(parquet_dir, key, value, table, field, inner):
    EXAMPLES["parquet manifest"] += 1
    path = parquet_dir / "manifest.json"
    manifest = json.loads(path.read_text())
    if key == "tables" and isinstance(manifest["tables"].get(table), dict):
        manifest["tables"][table][field] = inner
    else:
        manifest[key] = value

    def read():
        p = ParquetSource(parquet_dir)
        p.table(table)
        p.notes()
        p.dropped()
        assert isinstance(p.name, str)

    try:
        data = json.dumps(manifest).encode()
    except ValueError:
        return
    _mutated(path, data, read)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("fz_run")
    profiled_ge(out)
    sess = ge.Session()
    sess.add_graph(1, tiny_mlp())
    run_steps(sess, 1, 2)
    ge.GEFinalize()
    return geprof_nb.load(out).path


INFO_KEYS = ["status", "options", "devices", "records", "aged_out", "dropped", "write_failed", "notes", "note",
             "pmu_events", "type_info", "start_ns", "end_ns", "pid", "hostname", "geprof_raw_version", "magic", "models"]


@examples(150)
@given(key=st.sampled_from(INFO_KEYS), value=json_values, hash_line=st.text(max_size=40),
       chunk=st.sampled_from(["hwts", "step_trace", "task_track", "node_basic_info", "tensor_info"]),
       flip=st.integers(0, 10_000), byte=st.integers(0, 255))
def test_run_directory_reader_on_damaged_content(run_dir, key, value, hash_line, chunk, flip, byte):
    EXAMPLES["run directory"] += 1
    info_path = run_dir / rawdata.INFO_FILE
    info = json.loads(info_path.read_text())
    info[key] = value
    hashes = run_dir / rawdata.HASH_DICT_FILE
    spec = rawdata.RECORD_KINDS[chunk]
    chunk_path = next((run_dir / spec.directory(0)).glob(f"{chunk}.*.npy"))
    saved = {p: p.read_bytes() for p in (info_path, hashes, chunk_path)}
    try:
        info_path.write_text(json.dumps(info))
        hashes.write_bytes(saved[hashes] + hash_line.encode("utf-8", "surrogatepass") + b"\n")
        data = bytearray(saved[chunk_path])
        data[flip % len(data)] = byte
        chunk_path.write_bytes(bytes(data))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                p = geprof_nb.load(run_dir)
                p.op_summary, p.step_trace, p.notes, p.dropped, p.complete  # noqa: B018
                repr(p)
                Report(p).headline  # noqa: B018 - what the explorer says first
            except READ_ERRORS as exc:
                assert rawdata.INFO_FILE in str(exc) or str(run_dir) in str(exc)
    finally:
        for p, b in saved.items():
            p.write_bytes(b)


@examples(300)
@given(tensors=st.lists(st.tuples(st.integers(1, 64), st.integers(0, 300), st.integers(0, 12) | st.integers(0, 400),
                                  st.integers(0, 1)), max_size=120))
def test_windowed_memory_placement_equals_the_matrix(tensors):
    """The memory planner of huge graphs places every tensor where the n x n matrix version does."""
    from geprof_nb.ge import memory

    EXAMPLES["memory placement"] += 1
    size, alloc, life, stream = (np.array([t[i] for t in tensors], np.int64) for i in range(4))
    size = size * 512
    assert (memory._place(size, alloc, alloc + life, stream)
            == memory._place_windowed(size, alloc, alloc + life, stream)).all()


def test_generated_cases_add_up_to_ten_thousand():
    """Runs last (file order): the property tests above generated at least 10,000 cases."""
    expected = {"options objects", "options text", "flag line round trip", "flag lines", "panel round trip",
                "panel typing", "msprof cells", "ascend_pt cells", "csv bytes", "trace_view", "communication.json",
                "parquet manifest", "run directory", "memory placement"}
    if set(EXAMPLES) != expected:
        pytest.skip(f"only some property tests ran: {sorted(EXAMPLES)}")
    print("generated cases:", dict(EXAMPLES), "total", sum(EXAMPLES.values()))
    assert sum(EXAMPLES.values()) >= 10_000
