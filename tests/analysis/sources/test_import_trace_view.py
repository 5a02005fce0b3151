"""trace_view.json and read_json: orjson's reading gives what the stdlib reading with numbers as
written gives (exact ns, the same errors), and falls back to it where it must."""

from __future__ import annotations

import gc
import json
import math
from decimal import ROUND_FLOOR, Decimal, localcontext

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geprof_nb.analysis import files
from geprof_nb.analysis.sources import trace_view
from geprof_nb.analysis.sources.csvfiles import NumberText, read_json
from geprof_nb.analysis.sources.trace_view import read_trace_view
from geprof_nb.errors import ImportFormatError
from helpers.real_fixtures import write_ascend_pt


def stdlib_reading(path):
    """The trace as read with numbers as written (the stdlib parser), whatever orjson gives."""
    return trace_view._trace_view(path, read_json(path, exact_floats=True), exact=True)


def outcome(read, path):
    """What a reading gives, comparable: (steps, launch_of, device_id) or the error text."""
    try:
        tv = read(path)
    except ImportFormatError as exc:
        return str(exc)
    return tv.steps.values.tolist(), tv.launch_of, tv.device_id


@pytest.fixture
def readings(monkeypatch):
    """Each reading read_trace_view makes: False for orjson's (part by part or whole), True for the
    stdlib's with numbers as written."""
    calls = []
    real_read, real_parts = trace_view.read_json, trace_view._parts

    def read(path, exact_floats=False, data=None, **kwargs):
        calls.append(exact_floats)
        return real_read(path, exact_floats, data, **kwargs)

    def parts(data):
        found = real_parts(data)
        if found is not None:
            calls.append(False)
        return found

    monkeypatch.setattr(trace_view, "read_json", read)
    monkeypatch.setattr(trace_view, "_parts", parts)
    return calls


def step(ts: str, dur: str, n: int = 1) -> str:
    return f'{{"ph": "X", "name": "ProfilerStep#{n}", "pid": 1, "tid": 7, "ts": {ts}, "dur": {dur}}}'


def flow(ph: str, flow_id: str, ts: str) -> str:
    return f'{{"ph": "{ph}", "name": "torch_to_npu", "cat": "async_npu", "id": {flow_id}, "ts": {ts}}}'


def trace(tmp_path, *events: str, raw: bytes = b""):
    path = tmp_path / "trace_view.json"
    path.write_bytes(raw or ("[" + ", ".join(events) + "]").encode())
    return path


# ------------------------------------------------------------------------------ fast path
def test_string_ts_takes_the_fast_path(tmp_path, readings):
    """torch_npu's layout (string ts, float dur): one orjson reading, the stdlib one's result."""
    run = write_ascend_pt(tmp_path)
    path = run.path / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    assert isinstance(json.loads(path.read_text())[5]["dur"], float)
    tv = read_trace_view(path)
    assert readings == [False]
    assert tv.steps.values.tolist() == [list(s) for s in run.steps]
    assert tv.launch_of == {k.start_ns: k.launch_ns for k in run.kernels}
    assert outcome(read_trace_view, path) == outcome(stdlib_reading, path)


def test_epoch_ts_as_numbers_are_exact(tmp_path, readings):
    """A float64 holds an epoch µs value to 0.25 µs: such numbers send the file to the stdlib reading."""
    path = trace(tmp_path, step("1700000000123456.789", "2.5"), flow("s", '"7"', "1700000000123460.0005"),
                 flow("f", '"7"', "1700000000124000.001"))
    tv = read_trace_view(path)
    assert readings == [False, True]
    assert tv.steps.values.tolist() == [[1, 1700000000123456789, 1700000000123459289]]
    assert tv.launch_of == {1700000000124000001: 1700000000123460001}


def test_a_float_that_fixes_the_ns_is_taken(tmp_path, readings):
    path = trace(tmp_path, step('"1700000000000000.000"', "7542.185"), step("12.0006", "0.0004", n=2))
    tv = read_trace_view(path)
    assert readings == [False]
    assert tv.steps.values.tolist() == [[1, 1700000000000000000, 1700000000007542185], [2, 12001, 12001]]


def test_a_float_on_a_half_ns_goes_to_the_stdlib_reading(tmp_path, readings):
    """12.0005 µs is 12001 ns (half up); its float, 12.000499999..., would give 12000."""
    path = trace(tmp_path, step("12.0005", "1"))
    assert read_trace_view(path).steps.values.tolist() == [[1, 12001, 13001]]
    assert readings == [False, True]


def test_exponent_numbers_are_read_by_value(tmp_path, readings):
    """A JSON number in exponent notation is its value whichever parser read it; a string
    ``"1.5e3"`` is still no µs decimal."""
    path = trace(tmp_path, step('"1.0"', "1.5e3"), flow("s", "3", "2E+1"), flow("f", "3", "2.5e1"))
    assert read_trace_view(path).steps.values.tolist() == [[1, 1000, 1501000]]
    assert outcome(read_trace_view, path) == outcome(stdlib_reading, path)
    assert read_trace_view(path).launch_of == {25000: 20000}
    path = trace(tmp_path, step('"1.5e3"', "1"))
    with pytest.raises(ImportFormatError, match=r"'ts' '1.5e3' / 'dur' 1 are not µs decimals"):
        read_trace_view(path)


def test_float_flow_ids_pair_as_written(tmp_path, readings):
    """1.50 and 1.5 are one float: the ids are compared as the stdlib reading gives them (text)."""
    path = trace(tmp_path, flow("s", "1.50", '"1.0"'), flow("f", "1.5", '"2.0"'), flow("s", "2.5", '"3.0"'),
                 flow("f", "2.5", '"4.0"'))
    assert read_trace_view(path).launch_of == {4000: 3000}
    assert readings == [False, True]


def test_the_collector_is_left_as_found(tmp_path):
    path = trace(tmp_path, step('"1.0"', "1"))
    read_trace_view(path)
    assert gc.isenabled()
    gc.disable()
    try:
        read_trace_view(path)
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("args", ['"NPU 0"', "[1]", "7"])
def test_process_labels_whose_args_is_not_an_object_is_named(tmp_path, args):
    path = trace(tmp_path, step('"1.0"', '"2.0"'), f'{{"ph": "M", "name": "process_labels", "pid": 1, "args": {args}}}')
    with pytest.raises(ImportFormatError) as err:
        read_trace_view(path)
    assert str(err.value).startswith(f"{path}: event 1 (process_labels): 'args' is ")
    assert str(err.value).endswith('; expected an object such as {"labels": "NPU 0"}')


def test_process_labels_name_the_device(tmp_path):
    path = trace(tmp_path, step('"1.0"', '"2.0"'),
                 '{"ph": "M", "name": "process_labels", "pid": 1, "args": {"labels": "NPU 3"}}')
    assert read_trace_view(path).device_id == 3


# ---------------------------------------------------------------- what orjson refuses
@pytest.mark.parametrize("content, message", [
    (step('"1.0"', "NaN"), "event 0 (ProfilerStep#1): 'ts' '1.0' / 'dur' nan are not µs decimals"),
    (step("Infinity", "1"), "event 0 (ProfilerStep#1): 'ts' inf / 'dur' 1 are not µs decimals"),
    (step('"soon"', "18446744073709551616123"),
     "event 0 (ProfilerStep#1): 'ts' 'soon' / 'dur' 18446744073709551616123 are not µs decimals"),
    (step('"soon"', "2.5"), "event 0 (ProfilerStep#1): 'ts' 'soon' / 'dur' '2.5' are not µs decimals"),
    (step('"1.0"', "-1.50"), "event 0 (ProfilerStep#1): 'ts' '1.0' / 'dur' '-1.50' are not µs decimals"),
    (step("-0.0", "1"), "event 0 (ProfilerStep#1): 'ts' '-0.0' / 'dur' 1 are not µs decimals"),
    (step('"1.0"', "NaN")[:-1], "not valid JSON (Expecting ',' delimiter at line 1, column 83; truncated file?)"),
])
def test_errors_are_worded_as_before(tmp_path, content, message):
    """The texts the stdlib reading gave before orjson (numbers quoted as written)."""
    path = trace(tmp_path, content)
    with pytest.raises(ImportFormatError) as err:
        read_trace_view(path)
    assert str(err.value) == f"{path}: {message}"


@pytest.mark.parametrize("raw, message", [
    (b'[{"ph": "X", "name": "\xff"}]', "not UTF-8 text (invalid start byte at byte 22)"),
    (b"  \n", "empty file (expected a JSON document)"),
])
def test_file_errors_are_worded_as_before(tmp_path, raw, message):
    path = trace(tmp_path, raw=raw)
    with pytest.raises(ImportFormatError) as err:
        read_trace_view(path)
    assert str(err.value) == f"{path}: {message}"


@pytest.mark.parametrize("raw", [
    b"\xef\xbb\xbf" + ("[" + step('"1.0"', "2.5") + "]").encode(),
    ('[{"ph": "X", "name": "\\ud800"}, ' + step('"1.0"', "2.5") + "]").encode(),
    ('[{"ph": "X", "name": "k", "args": {"x": 18446744073709551616123}}, ' + step('"1.0"', "2.5") + "]").encode(),
])
def test_what_orjson_refuses_or_rounds_reads_as_before(tmp_path, raw):
    """A BOM, a lone surrogate, an integer past 64 bits where no number is read."""
    path = trace(tmp_path, raw=raw)
    assert outcome(read_trace_view, path) == outcome(stdlib_reading, path) == ([[1, 1000, 3500]], {}, None)


# -------------------------------------------------------------------- generated numbers
US = st.decimals(min_value=0, max_value=Decimal("4e15"), allow_nan=False, allow_infinity=False)
NUMBER = US.map(lambda d: format(d, "f")) | US.map(str) | US.map(lambda d: repr(float(d))) \
    | st.integers(0, 4 * 10**15).map(str) | st.sampled_from(["-1.5", "-0.0", "1e400", "NaN", "5e-400"])
VALUE = NUMBER | NUMBER.map(json.dumps)
FLOW_ID = st.sampled_from(['"1"', "1", "1.0", "1.00", "1e0", "2", "18446744073709551616123"])


def exact_ns(text: str) -> int | None:
    """ns of a µs number text, as Decimal arithmetic has it (None if it is negative or no number)."""
    if text.startswith("-") or not text[:1].isdigit():
        return None
    with localcontext() as ctx:
        ctx.prec = 60
        return int((Decimal(text) * 1000 + Decimal("0.5")).to_integral_value(ROUND_FLOOR))


@pytest.mark.slow
@settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(ts=VALUE, dur=VALUE, flows=st.lists(st.tuples(st.sampled_from("sf"), FLOW_ID, VALUE), max_size=4))
def test_both_readings_agree_on_generated_numbers(tmp_path_factory, ts, dur, flows):
    path = trace(tmp_path_factory.mktemp("tv"), step(ts, dur), *(flow(*f) for f in flows))
    fast = outcome(read_trace_view, path)
    assert fast == outcome(stdlib_reading, path)
    begin, length = exact_ns(ts), exact_ns(dur)
    if begin is not None and length is not None and begin + length < 2**63:
        assert fast[0] == [[1, begin, begin + length]]


# ------------------------------------------------------------------------------ read_json
def test_read_json_reads_what_orjson_refuses_as_the_stdlib(tmp_path):
    path = tmp_path / "x.json"
    path.write_bytes(b'\xef\xbb\xbf{"a": [NaN, -Infinity, "\\ud800", 1.5, 2]}')
    got = read_json(path)
    assert math.isnan(got["a"][0]) and got["a"][1:] == [-math.inf, "\ud800", 1.5, 2]
    path.write_bytes(b'{"a": 18446744073709551616123}')
    assert read_json(path) == {"a": 1.8446744073709552e22}  # orjson: a float past 64 bits
    assert read_json(path, exact_floats=True) == {"a": 18446744073709551616123}


def test_read_json_exact_floats_keeps_numbers_as_written(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('[1700000000123456.789, 1.5e3, "1.5", 2]')
    got = read_json(path, exact_floats=True)
    assert got == ["1700000000123456.789", "1.5e3", "1.5", 2]
    assert [type(v) for v in got] == [NumberText, NumberText, str, int]


# ------------------------------------------------------------------- part by part
def label(n: int) -> str:
    return f'{{"ph": "M", "name": "process_labels", "pid": 9, "args": {{"labels": "NPU {n}"}}}}'


TRICKY = [  # events a cut between two parts could fall into: strings, nesting, whitespace
    '{"ph": "X", "name": "op},{\\"ph\\": \\"s\\"}", "ts": "5.0", "dur": 1}',
    '{"ph": "X", "name": "n", "args": {"parts": [{"a": 1}, {"b": 2}], "m": {"k": {"v": "},{"}}}}',
    '{ "ph" : "C" ,\n "name" : "mem" , "args" : { "x" : 1 } }',
]


@pytest.mark.parametrize("part_bytes", [1, 40, 300, 10**9])
def test_a_list_read_part_by_part_gives_what_the_whole_reading_gives(tmp_path, monkeypatch, part_bytes):
    monkeypatch.setattr(trace_view, "PART_BYTES", part_bytes)
    events = [step('"1.0"', "2.5"), *TRICKY, flow("s", '"7"', '"3.0"'), label(5), step('"10.0"', "1", n=2),
              flow("f", '"7"', '"4.5"'), label(6), *TRICKY]
    path = trace(tmp_path, *events)
    assert outcome(read_trace_view, path) == outcome(stdlib_reading, path) == (
        [[1, 1000, 3500], [2, 10000, 11000]], {4500: 3000}, 5)
    path.write_text("[\n " + ",\n ".join(events) + "\n]\n")  # one event a line
    assert outcome(read_trace_view, path) == outcome(stdlib_reading, path)


@pytest.mark.parametrize("part_bytes", [1, 60, 10**9])
def test_errors_read_part_by_part_name_the_event_in_the_whole_file(tmp_path, monkeypatch, part_bytes):
    monkeypatch.setattr(trace_view, "PART_BYTES", part_bytes)
    good = [step('"1.0"', "2.5"), flow("s", '"7"', '"3.0"'), *TRICKY]
    bad_step = trace(tmp_path, *good, step('"soon"', "1", n=2))
    with pytest.raises(ImportFormatError, match=r"event 5 \(ProfilerStep#2\): 'ts' 'soon' / 'dur' 1 are not"):
        read_trace_view(bad_step)
    # a later event that is no object is what the whole file says, though a bad step comes first
    not_object = trace(tmp_path, step('"soon"', "1"), *good, "7")
    with pytest.raises(ImportFormatError, match=r"event 6 is a int, expected an object"):
        read_trace_view(not_object)
    truncated = trace(tmp_path, raw=("[" + ", ".join(good)).encode())
    with pytest.raises(ImportFormatError, match=r"not valid JSON .*truncated file\?"):
        read_trace_view(truncated)


def test_only_a_bare_list_is_read_part_by_part(tmp_path, readings):
    wrapped = trace(tmp_path, raw=('{"traceEvents": [' + step('"1.0"', "2.5") + "]}").encode())
    assert read_trace_view(wrapped).steps.values.tolist() == [[1, 1000, 3500]]
    assert trace_view._parts(wrapped.read_bytes()) is None and readings == [False]
    listed = trace(tmp_path, step('"1.0"', "2.5"))
    assert trace_view._parts(listed.read_bytes()) is not None


def test_a_long_list_is_parsed_in_parts_of_whole_events(tmp_path, monkeypatch):
    monkeypatch.setattr(trace_view, "PART_BYTES", 200)
    events = [flow("s" if k % 2 == 0 else "f", f'"{k // 2}"', f'"{k}.0"') for k in range(40)]
    path = trace(tmp_path, *events)
    parts = list(trace_view._parts(path.read_bytes()))
    assert len(parts) > 5 and [first for first, _ in parts] == list(np.cumsum([0] + [len(e) for _, e in parts[:-1]]))
    assert [ev for _, evs in parts for ev in evs] == json.loads(path.read_text())
    assert read_trace_view(path).launch_of == {(k + 1) * 1000: k * 1000 for k in range(0, 40, 2)}


def test_a_wrapped_trace_is_read_from_disk_once(tmp_path, monkeypatch):
    path = trace(tmp_path, raw=('{"traceEvents": [' + step('"1.0"', "2.5") + "]}").encode())
    reads = []
    real = files.open_binary
    monkeypatch.setattr(files, "open_binary", lambda p, accepted: reads.append(p) or real(p, accepted))
    assert read_trace_view(path).steps.values.tolist() == [[1, 1000, 3500]]
    assert reads == [path]
