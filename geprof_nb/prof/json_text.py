"""JSON text read one way wherever geprof takes it: profilingOptions, ``geprof.faults``, model buffers,
``info.json``, hash dictionary lines and the JSON files of the importers.

Two parsers take JSON here, orjson (fast) and the stdlib's (for what orjson refuses: ``NaN`` and
``Infinity``, lone surrogates; numbers kept as written), and their limits differ: orjson nests 1024
levels, the stdlib parser as deep as the interpreter's stack lets it, and it raises ``RecursionError``
then; orjson reads integers past 64 bits as floats, the stdlib parser as exact ints, and past Python's
int-conversion limit (4300 digits) it raises a plain ``ValueError``.  :func:`loads` gives one rule for
both, and a :class:`JsonTextError` for what breaks it, which each caller words as its own documented
error (naming the option or the file):

* nesting: at most :data:`MAX_DEPTH` levels (orjson's limit), whichever parser reads it;
* numbers: integers in [-2**63, 2**64) are exact; others are floats (rounded), as orjson reads them;
  a number past the float range (``1e400``, 400 digits) is refused, not read as infinity;
* keys: an object that gives one key twice with different values is refused (which one was meant?),
  as a repeated flag is; twice with the same value is read.  ``unique_keys=False`` skips the check for
  files of hundreds of MB whose repeated keys do not matter to the reader (trace timelines).

:func:`excerpt` shows a parsed value in an error message, whatever its depth.
"""

from __future__ import annotations

import json
import math
import sys
import threading
from collections.abc import Callable
from typing import Any

import orjson

#: The deepest nesting of arrays and objects read (orjson's own limit).
MAX_DEPTH = 1024
_INT_LOW, _INT_HIGH = -(2**63), 2**64
#: Decimal digits enough for any integer in [-2**63, 2**64): longer ones are not converted with int().
_INT_DIGITS = 20
#: Python's default limit of digits int() converts (``sys.get_int_max_str_digits``; 0: none).
_CONVERTIBLE_DIGITS = getattr(sys, "get_int_max_str_digits", lambda: 4300)() or 4300
_LIMIT_LOCK = threading.Lock()
#: Items of an array or object :func:`excerpt` shows.
_ITEMS = 8


class JsonTextError(ValueError):
    """Text that is not JSON geprof reads; ``reason`` says why (with the line and column where known);
    ``kind``: ``"syntax"`` (not JSON at all, as a file cut short), ``"encoding"`` (not UTF-8), ``"number"``
    (a number past the range of a float) or ``"limit"`` (nesting too deep, a key given twice)."""

    def __init__(self, reason: str, kind: str = "limit") -> None:
        self.reason = reason
        self.kind = kind
        super().__init__(reason)


def loads(data: str | bytes | bytearray | memoryview, *, unique_keys: bool = True,
          parse_float: Callable[[str], Any] | None = None) -> Any:
    """The value of a JSON text, by the rules of the module docstring, or a :class:`JsonTextError`.

    ``parse_float``: numbers with a fraction or an exponent are passed to it as written, and integers are
    exact ints (up to Python's int-conversion limit; longer ones to ``parse_float`` too): the stdlib parser
    reads them then, never orjson, and the caller judges their range."""
    if parse_float is None:
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            if str(exc).startswith("recursion limit") or "depth limit" in str(exc):
                raise JsonTextError(f"nested deeper than {MAX_DEPTH} levels ({exc}); accepted: at most "
                                    f"{MAX_DEPTH} levels of arrays and objects") from None
        else:
            if not unique_keys or _keys(value) == _colons(data):
                return value  # no colon is left over for a repeated key
    text = _text(data)
    with _stack_room(MAX_DEPTH):
        try:
            value = json.loads(text, parse_float=_float(parse_float), parse_int=_int(parse_float),
                               object_pairs_hook=_unique if unique_keys else None)
        except json.JSONDecodeError as exc:
            raise JsonTextError(f"{exc.msg} at line {exc.lineno}, column {exc.colno}", "syntax") from None
        except RecursionError:  # it had room for MAX_DEPTH levels
            raise JsonTextError(f"nested deeper than {MAX_DEPTH} levels; accepted: at most {MAX_DEPTH} levels of "
                                "arrays and objects") from None
    depth = _depth(value)
    if depth > MAX_DEPTH:
        raise JsonTextError(f"nested {depth} levels deep; accepted: at most {MAX_DEPTH} levels of arrays and objects")
    return value


def _text(data: str | bytes | bytearray | memoryview) -> str:
    if isinstance(data, str):
        return data
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JsonTextError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", "encoding") from None


def _colons(data: str | bytes | bytearray | memoryview) -> int:
    """Colons anywhere in the text: at least one per key of every object (more where strings hold some)."""
    return data.count(":") if isinstance(data, str) else bytes(data).count(b":")


def _children(value: Any) -> Any:
    return value.values() if isinstance(value, dict) else value


def _keys(value: Any) -> int:
    """How many keys the objects in ``value`` hold in all (without recursion: any depth is fine)."""
    keys, todo = 0, [value]
    while todo:
        v = todo.pop()
        if isinstance(v, dict):
            keys += len(v)
        if isinstance(v, (dict, list)):
            todo.extend(c for c in _children(v) if isinstance(c, (dict, list)))
    return keys


def _depth(value: Any) -> int:
    """The deepest nesting of arrays and objects in ``value`` (0 for a scalar), without recursion."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, (dict, list)):
            deepest = max(deepest, d)
            todo.extend((c, d + 1) for c in _children(v) if isinstance(c, (dict, list)))
    return deepest


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's pairs as a dict; a key given twice with different values is an error."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out and out[key] != value:
            raise JsonTextError(f"key {key!r} is given twice, with different values ({excerpt(out[key])} and "
                                f"{excerpt(value)}); accepted: each key once (or repeated with the same value)")
        out[key] = value
    return out


def _float(parse_float: Callable[[str], Any] | None) -> Callable[[str], Any]:
    """A number with a fraction or an exponent: ``parse_float`` of it as written (its reader judges its
    range), else a float, and past the float range an error (orjson refuses it; the stdlib parser would
    read infinity)."""
    if parse_float is not None:
        return parse_float

    def finite(text: str) -> float:
        value = float(text)
        if math.isinf(value):
            raise JsonTextError(f"number {_short(text)} is past the range of a float (about 1.8e308)", "number")
        return value

    return finite


def _int(parse_float: Callable[[str], Any] | None) -> Callable[[str], Any]:
    """An integer: exact in [-2**63, 2**64), else read as :func:`_float` reads a number (as orjson does); with
    ``parse_float`` (numbers as written) exact up to Python's int-conversion limit, as written past it."""
    as_float = _float(parse_float)

    def integer(text: str) -> Any:
        digits = len(text.lstrip("-"))
        if parse_float is not None and digits <= _CONVERTIBLE_DIGITS:
            return int(text)
        if digits <= _INT_DIGITS:
            value = int(text)
            if _INT_LOW <= value < _INT_HIGH:
                return value
        return as_float(text)

    return integer


def _frames() -> int:
    frame, n = sys._getframe(), 0
    while frame is not None:
        frame, n = frame.f_back, n + 1
    return n


class _stack_room:
    """Room below the recursion limit for ``levels`` nested calls: the stdlib's C scanner counts each
    level of nesting against it, so deep in a notebook's stack it would stop short of :data:`MAX_DEPTH`.
    The limit is raised for the parse only (under a lock: threads restore it in turn)."""

    def __init__(self, levels: int) -> None:
        self.levels = levels
        self.raised_from: int | None = None

    def __enter__(self) -> None:
        need = _frames() + self.levels + 64
        if need > sys.getrecursionlimit():
            _LIMIT_LOCK.acquire()
            self.raised_from = sys.getrecursionlimit()
            sys.setrecursionlimit(max(need, self.raised_from))

    def __exit__(self, *exc: object) -> None:
        if self.raised_from is not None:
            sys.setrecursionlimit(self.raised_from)
            _LIMIT_LOCK.release()


def _short(text: str, width: int = 40) -> str:
    return text if len(text) <= width else f"{text[:width // 2]}...{text[-8:]} ({len(text)} characters)"


def excerpt(value: Any, width: int = 60) -> str:
    """``value`` as JSON, cut after about ``width`` characters; any depth (no recursion), any type."""
    out: list[str] = []
    size = 0
    todo: list[Any] = [value]
    while todo and size < width:
        v = todo.pop()
        if isinstance(v, _Token):
            piece = v.text
        elif isinstance(v, dict):
            piece = "{"
            shown = list(v.items())[:_ITEMS]
            items: list[Any] = [_Token(", ...}" if len(v) > _ITEMS else "}")]
            for i, (k, c) in enumerate(reversed(shown)):
                items += [c, _Token(f"{', ' if i < len(shown) - 1 else ''}{json.dumps(str(k))}: ")]
            todo.extend(items)
        elif isinstance(v, (list, tuple)):
            piece = "["
            shown = list(v[:_ITEMS])
            items = [_Token(", ...]" if len(v) > _ITEMS else "]")]
            for i, c in enumerate(reversed(shown)):
                items += [c, _Token(", " if i < len(shown) - 1 else "")]
            todo.extend(items)
        else:
            try:
                piece = json.dumps(v)
            except (TypeError, ValueError):
                piece = repr(v)
        out.append(piece)
        size += len(piece)
    text = "".join(out)
    return text if len(text) <= width and not todo else text[:width] + "..."


class _Token:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text
