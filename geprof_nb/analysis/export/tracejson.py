"""Trace events (exact int ns, :mod:`.timeline`) -> JSON files.

msprof and torch_npu write ``ts`` as a string of µs with 3 decimals (exact to
the ns) and ``dur`` as a number of µs.  A Chrome trace needs a numeric ``ts``;
a float of µs since 1970 only resolves 0.25 µs, so the Chrome file counts
from the run's first event (``otherData.time_base_ns`` says from when).

A layer with many events of one shape (a task per device task, a counter per
allocation) hands them over as an :class:`EventBlock`: columns instead of a
dict per event.  The writer turns a block into the pieces of an event's JSON
text (:mod:`.pieces`), each distinct name, number and timestamp formatted once,
byte for byte what ``json.dumps`` writes for the dicts (:meth:`EventBlock.dicts`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .background import BackgroundFile
from .pieces import TEXT, Coded, Groups, by_value, concat, per_row, row_bytes, texts, us_texts

MSPROF = "msprof"
CHROME = "chrome"


def us_string(ns: int) -> str:
    """Exact int ns -> msprof's ``"<us>.<3 digits>"``."""
    return f"{ns // 1000}.{ns % 1000:03d}"


def msprof_events(events: list[dict]) -> list[dict]:
    """``ts`` as msprof's µs string, ``dur`` as µs."""
    out = []
    for e in events:
        if "ts" in e:
            e = dict(e, ts=us_string(e["ts"]))
            if "dur" in e:
                e["dur"] = e["dur"] / 1000
        out.append(e)
    return out


def chrome_events(events: list[dict], base_ns: int) -> list[dict]:
    """``ts`` as µs since ``base_ns`` (a number), ``dur`` as µs."""
    out = []
    for e in events:
        if "ts" in e:
            e = dict(e, ts=(e["ts"] - base_ns) / 1000)
            if "dur" in e:
                e["dur"] = e["dur"] / 1000
        out.append(e)
    return out


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
    return path


# ----------------------------------------------------------------- event blocks
@dataclass(frozen=True)
class Column:
    """The values one key takes over a block's events.

    ``kind``: ``const`` (one JSON value for all), ``int``, ``float``, ``str`` (arrays or
    lists of n values), ``obj`` (any JSON values, formatted one by one), ``ts`` / ``dur``
    (exact int ns: msprof and Chrome write them as µs), ``dict`` (a nested object:
    ``values`` is a list of (key, Column)).
    """

    kind: str
    values: object


def const(value) -> Column:
    return Column("const", value)


def ints(values) -> Column:
    return Column("int", np.asarray(values, dtype=np.int64))


def floats(values) -> Column:
    return Column("float", np.asarray(values, dtype=float))


def strs(values) -> Column:
    """Values of str (any JSON value is written as it is): a sequence, a pandas column or a pyarrow
    text array (a dictionary array: its dictionary may repeat a text)."""
    return Column("str", values)


def obj(values) -> Column:
    return Column("obj", list(values))


def ts_ns(values) -> Column:
    return Column("ts", np.asarray(values, dtype=np.int64))


def dur_ns(values) -> Column:
    return Column("dur", np.asarray(values, dtype=np.int64))


def nested(fields: Sequence[tuple[str, Column]]) -> Column:
    return Column("dict", list(fields))


class EventBlock:
    """``n`` trace events with the same keys in the same order, column by column.

    ``fields``: (key, :class:`Column`) in the order the keys appear in each event.
    ``pairs``: a second shape; then event ``i`` of the block is two events, one of each
    shape, one after the other (a flow's ``s`` and ``f``).
    ``key`` / ``pair_key``: per event, what most of a shape's values depend on (a task's
    connection id, a flow's launching call).  Columns that hold one value per key are
    written into one text per key instead of being formatted event by event.
    """

    def __init__(self, n: int, fields: Sequence[tuple[str, Column]],
                 pairs: Sequence[tuple[str, Column]] | None = None, key=None, pair_key=None) -> None:
        self.n = int(n)
        self.shapes = [list(fields)] + ([list(pairs)] if pairs is not None else [])
        self.keys = [key] + ([pair_key] if pairs is not None else [])

    def __len__(self) -> int:
        return self.n * len(self.shapes)

    # ------------------------------------------------------------- as dicts
    def dicts(self) -> list[dict]:
        """The events as the dicts a layer would have built (ts/dur as exact int ns)."""
        per_shape = [[self._dict_values(col) for _, col in fields] for fields in self.shapes]
        out: list[dict] = []
        for i in range(self.n):
            for fields, values in zip(self.shapes, per_shape):
                out.append(self._event(fields, values, i))
        return out

    @classmethod
    def _event(cls, fields, values, i: int) -> dict:
        event = {}
        for (key, col), vals in zip(fields, values):
            event[key] = cls._event(col.values, vals, i) if col.kind == "dict" else (
                vals if col.kind == "const" else vals[i])
        return event

    @classmethod
    def _dict_values(cls, col: Column):
        if col.kind == "const":
            return col.values
        if col.kind == "dict":
            return [cls._dict_values(c) for _, c in col.values]
        if col.kind in ("int", "ts", "dur"):
            return np.asarray(col.values, dtype=np.int64).tolist()
        if col.kind == "float":
            return np.asarray(col.values, dtype=float).tolist()
        return _dict_list(col.values)

    # --------------------------------------------------------------- as JSON
    def json_pieces(self, mode: str, base_ns: int = 0) -> list[Coded | str]:
        """The pieces of each event's JSON text (``json.dumps(..., ensure_ascii=False, separators=(",", ":"))``
        of its dict after :func:`msprof_events` / :func:`chrome_events`); a pair is one text of two."""
        made: dict[tuple, Coded] = {}  # per-event texts of a column both shapes hold (a flow's id): made once
        shapes = [_parts(fields, mode, base_ns, any(k == "ts" for k, _ in fields),
                         Groups.of(key) if key is not None and self.n else None, made)
                  for fields, key in zip(self.shapes, self.keys)]
        return shapes[0] if len(shapes) == 1 else shapes[0] + [","] + shapes[1]

    def min_ts(self) -> int | None:
        """The earliest ``ts`` of the block (``None`` without one)."""
        found = [int(np.min(c.values)) for fields in self.shapes for k, c in fields
                 if k == "ts" and c.kind == "ts" and self.n]
        return min(found) if found else None


def _parts(fields, mode: str, base_ns: int, has_ts: bool, group: Groups | None, made: dict) -> list[Coded | str]:
    """One event's text as pieces: constants, columns per group of events (coded by the group) and
    columns per event (:func:`.pieces.row_bytes` joins what it can)."""
    parts: list[Coded | str] = []
    for i, (key, col) in enumerate(fields):
        parts.append(("{" if i == 0 else ",") + json.dumps(key, ensure_ascii=False) + ":")
        if col.kind == "dict":
            parts += _parts(col.values, mode, base_ns, has_ts, group, made) if col.values else ["{}"]
            continue
        parts.append(_value_part(col, mode, base_ns, has_ts, group, made))
    parts.append("}" if fields else "{}")
    return parts


def _dict_list(values) -> list:
    return values.to_pylist() if isinstance(values, pa.Array) else list(values)


def _dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _float_text(value: float) -> str:
    """``json.dumps`` of a float: its repr, or NaN / Infinity / -Infinity."""
    return repr(value) if value - value == 0 else _dumps(value)


def _str_text(value) -> str:
    """JSON text of one value of a str column (the C string encoder for str, as json.dumps uses)."""
    return encode_basestring(value) if type(value) is str else _dumps(value)


def _str_codes(values) -> tuple[np.ndarray, object]:
    """A str column's code per event (-1: missing) and its texts: a pyarrow array's rows or dictionary,
    else distinct values (pandas columns encoded their own way, a categorical by its codes)."""
    if isinstance(values, pa.DictionaryArray):
        return pc.fill_null(values.indices, -1).to_numpy().astype(np.int64), values.dictionary
    if isinstance(values, pa.Array):  # texts made in pyarrow (ids): as they are, not hashed
        return np.where(values.is_null().to_numpy(zero_copy_only=False), -1, np.arange(len(values))), values
    codes, uniques = pd.factorize(values if isinstance(values, (pd.Series, pd.Categorical)) else
                                  np.asarray(values, dtype=object))
    return codes.astype(np.int64), uniques


def _str_texts(uniques) -> pa.Array:
    """JSON text of distinct str values: of text arrays in one go when none needs escaping."""
    if isinstance(uniques, pa.Array) or isinstance(getattr(uniques, "dtype", None), pd.StringDtype):
        arrow = pa.array(uniques).cast(TEXT)
        if not pc.any(pc.match_substring_regex(arrow, r'[\x00-\x1f"\\]')).as_py():
            return concat('"', arrow, '"')
        uniques = arrow.to_pylist()
    return texts([_str_text(u) for u in list(uniques)])


def _value_part(col: Column, mode: str, base_ns: int, has_ts: bool, group: Groups | None, made: dict) -> Coded | str:
    """The piece one column's values make: constant, per group (when ``group`` holds one value per
    group), else per event."""
    kind, values = col.kind, col.values
    if kind == "const":
        return _dumps(values)
    if group is not None and kind in ("int", "float", "str", "ts", "dur"):
        if kind == "str":
            codes, uniques = _str_codes(values)
            if (codes >= 0).all() and group.holds_one(codes):
                return group.spread(Coded(codes[group.first], _str_texts(uniques)))
        else:
            arr = np.asarray(values, dtype=float if kind == "float" else np.int64)
            bits = arr.view(np.int64)
            if group.holds_one(bits):
                return group.spread(_value_texts(Column(kind, arr[group.first]), mode, base_ns, has_ts))
    if (id(col), has_ts) not in made:
        made[id(col), has_ts] = _value_texts(col, mode, base_ns, has_ts)
    return made[id(col), has_ts]


def _value_texts(col: Column, mode: str, base_ns: int, has_ts: bool) -> Coded:
    kind, values = col.kind, col.values
    if kind == "int":
        return by_value(np.asarray(values, dtype=np.int64), lambda u: list(map(str, u.tolist())))
    if kind == "float":
        v = np.ascontiguousarray(values, dtype=float)
        return by_value(v.view(np.int64), lambda u: [_float_text(x) for x in u.view(np.float64).tolist()])
    if kind == "str":
        codes, uniques = _str_codes(values)
        if (codes < 0).any():  # a missing value is no str: format those one by one
            return per_row(texts([_dumps(v) for v in _dict_list(values)]))
        return Coded(codes, _str_texts(uniques))
    if kind == "obj":
        return per_row(texts([_dumps(v) for v in values]))
    ns = np.asarray(values, dtype=np.int64)
    if kind == "ts":
        if mode == MSPROF:  # '"<us>.<3 digits>"'
            return per_row(us_texts(ns, '"', '"'))
        return by_value(ns - base_ns, lambda u: [_float_text(x / 1000) for x in u.tolist()])
    if kind == "dur":
        if not has_ts:  # msprof_events / chrome_events convert dur only in events with a ts
            return by_value(ns, lambda u: list(map(str, u.tolist())))
        return by_value(ns, lambda u: [_float_text(x / 1000) for x in u.tolist()])
    raise ValueError(f"unknown column kind {kind!r}")


def event_count(items: Iterable[dict | EventBlock]) -> int:
    return sum(len(e) if isinstance(e, EventBlock) else 1 for e in items)


def expand(items: Iterable[dict | EventBlock]) -> list[dict]:
    """Blocks turned into their dicts, in order."""
    out: list[dict] = []
    for e in items:
        if isinstance(e, EventBlock):
            out += e.dicts()
        else:
            out.append(e)
    return out


def _event_bytes(items: Iterable[dict | EventBlock], mode: str, base_ns: int) -> Iterator[bytes | pa.Buffer]:
    """The events' UTF-8 JSON text in chunks, each event preceded by a comma."""
    convert = msprof_events if mode == MSPROF else (lambda evs: chrome_events(evs, base_ns))
    singles: list[dict] = []
    for item in items:
        if isinstance(item, EventBlock):
            if singles:
                yield "".join("," + _dumps(e) for e in convert(singles)).encode("utf-8")
                singles = []
            if item.n:
                yield from row_bytes([","] + item.json_pieces(mode, base_ns), 0, item.n)
        else:
            singles.append(item)
    if singles:
        yield "".join("," + _dumps(e) for e in convert(singles)).encode("utf-8")


def write_events(path: Path, items: Sequence[dict | EventBlock], mode: str = MSPROF, base_ns: int = 0,
                 wrapper: dict | None = None) -> Path:
    """Write ``items`` as ``write_json`` writes the converted event list (msprof or Chrome form),
    streaming block by block; ``wrapper``: a dict whose ``traceEvents`` key is the list (its
    other keys after it, as ``json.dumps`` orders them)."""
    head, tail = "[", "]"
    if wrapper is not None:
        keys = list(wrapper)
        at = keys.index("traceEvents")
        before = _dumps({k: wrapper[k] for k in keys[:at]})[:-1]
        after = _dumps({k: wrapper[k] for k in keys[at + 1:]})[1:]
        head = (before + "," if at else "{") + '"traceEvents":['
        tail = "]" + ("," + after if len(keys) > at + 1 else "}")
    with BackgroundFile(path) as f:
        f.write(head.encode("utf-8"))
        first = True
        for chunk in _event_bytes(items, mode, base_ns):
            if first and len(chunk):
                chunk = memoryview(chunk)[1:]  # the first event's comma
                first = False
            f.write(chunk)
        f.write(tail.encode("utf-8"))
    return path
