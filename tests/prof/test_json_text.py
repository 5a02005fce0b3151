"""prof/json_text.py: one rule for the JSON geprof reads, whichever of orjson and the stdlib parser reads it."""

from __future__ import annotations

import math
import sys
import threading

import pytest

from geprof_nb.prof.json_text import MAX_DEPTH, JsonTextError, excerpt, loads


def nested(levels: int, inner: str = "") -> str:
    return "[" * levels + inner + "]" * levels


def depth_of(value) -> int:
    n = 0
    while isinstance(value, list):
        value = value[0] if value else None
        n += 1
    return n


# The stdlib parser reads what orjson refuses: a NaN (or a lone surrogate) sends the text there.
@pytest.mark.parametrize("via", ["orjson", "stdlib"])
def test_both_parsers_take_exactly_max_depth_levels(via):
    inner = "NaN" if via == "stdlib" else "1"
    value = loads(nested(MAX_DEPTH, inner))
    assert depth_of(value) == MAX_DEPTH
    with pytest.raises(JsonTextError, match=f"nested .*{MAX_DEPTH + 1}|deeper than {MAX_DEPTH} levels") as exc:
        loads(nested(MAX_DEPTH + 1, inner))
    assert f"accepted: at most {MAX_DEPTH} levels" in exc.value.reason


def test_the_stdlib_parser_takes_max_depth_deep_in_a_stack():
    """The C scanner counts each level against the recursion limit: 900 frames deep (a notebook's, a
    test runner's) it would stop near 100 levels without the room the reader makes for it."""
    def deep(n: int):
        return deep(n - 1) if n else loads(nested(MAX_DEPTH, "NaN"))

    limit = sys.getrecursionlimit()
    value = deep(limit - 100)
    assert depth_of(value) == MAX_DEPTH and sys.getrecursionlimit() == limit  # restored


def test_far_deeper_text_is_an_error_not_a_recursion_error():
    for inner in ("1", "NaN"):
        with pytest.raises(JsonTextError, match=f"deeper than {MAX_DEPTH} levels"):
            loads(nested(100_000, inner))


@pytest.mark.parametrize("via", ["orjson", "stdlib"])
@pytest.mark.parametrize("text, value", [
    (str(2**64 - 1), 2**64 - 1), (str(-(2**63)), -(2**63)),  # the 64-bit range is exact
    (str(2**64), float(2**64)), (str(-(2**63) - 1), float(-(2**63) - 1)),  # past it: a float, as orjson gives
    ("1" * 300, float("1" * 300)),
])
def test_integers_are_exact_in_64_bits_and_floats_past_them_whichever_parser(via, text, value):
    got = loads(f"[{text}, NaN]" if via == "stdlib" else f"[{text}]")[0]
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("via", ["orjson", "stdlib"])
@pytest.mark.parametrize("number", ["1" * 5000, "1e400", "-1e400", "1" * 310])
def test_numbers_past_the_float_range_are_refused_not_a_value_error_or_infinity(via, number):
    """5000 digits: past Python's int-conversion limit (4300), where int() raises a plain ValueError."""
    with pytest.raises(JsonTextError, match="past the range of a float") as exc:
        loads(f"[{number}, NaN]" if via == "stdlib" else f"[{number}]")
    assert len(str(exc.value)) < 200  # the number is quoted by its ends


def test_nan_and_infinity_literals_are_read_as_before():
    value = loads('{"a": NaN, "b": Infinity}')
    assert math.isnan(value["a"]) and value["b"] == math.inf


@pytest.mark.parametrize("text, key, shown", [
    ('{"output": "a", "output": "b"}', "output", '("a" and "b")'),
    ('{"x": {"k": "c:d", "k": 2}}', "k", '("c:d" and 2)'),  # nested, a colon inside a string
    ('[{"k": [1], "k": [2]}, NaN]', "k", "([1] and [2])"),  # read by the stdlib parser
])
def test_a_key_given_twice_with_different_values_is_refused(text, key, shown):
    with pytest.raises(JsonTextError) as exc:
        loads(text)
    assert exc.value.reason == (f"key {key!r} is given twice, with different values {shown}; accepted: each key "
                                "once (or repeated with the same value)")


def test_a_key_repeated_with_its_value_and_colons_in_strings_are_read():
    assert loads('{"output": "a", "output": "a", "t": "10:00:00"}') == {"output": "a", "t": "10:00:00"}
    assert loads('{"a": 1, "a": 2}', unique_keys=False) == {"a": 2}  # timelines: the last, as orjson takes


def test_errors_say_where():
    with pytest.raises(JsonTextError, match=r"^Expecting ',' delimiter at line 2, column 9$"):
        loads('{"a": 1,\n "b": 2 "c": 3}')
    with pytest.raises(JsonTextError, match=r"^not UTF-8 text \(invalid start byte at byte 1\)$"):
        loads(b"[\xff]")


def test_parse_float_keeps_numbers_as_written():
    value = loads('[1.50, 2e3, 123456789012345678901234567890, 7]', parse_float=str)
    assert value == ["1.50", "2e3", 123456789012345678901234567890, 7]
    assert loads("[" + "9" * 5000 + ", 1e400]", parse_float=str) == ["9" * 5000, "1e400"]  # the reader judges


def test_the_recursion_limit_is_restored_by_every_thread():
    limit = sys.getrecursionlimit()
    errors = []

    def work():
        try:
            for _ in range(20):
                assert depth_of(loads(nested(MAX_DEPTH, "NaN"))) == MAX_DEPTH
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and sys.getrecursionlimit() == limit


def test_excerpt_shows_any_value_short_without_recursion():
    deep: list = []
    inner = deep
    for _ in range(100_000):
        inner.append([])
        inner = inner[0]
    assert excerpt(deep) == "[" * 60 + "..."
    assert excerpt({"a": [1, {"b": None}], "c": "x"}) == '{"a": [1, {"b": null}], "c": "x"}'
    assert excerpt(list(range(20))) == "[0, 1, 2, 3, 4, 5, 6, 7, ...]"
    assert excerpt("y" * 100, 10) == '"yyyyyyyyy...'
    assert excerpt(object()).startswith("<object object at")
