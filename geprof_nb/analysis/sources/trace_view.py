"""What the importers take from a Chrome-trace timeline (torch_npu ``trace_view.json``).

The file is a JSON list of events (reference §4.6, msprof_analyze_inputs §3);
``ts`` is a µs decimal, often a string, parsed exactly into ns.  Read here:
the framework steps (``ProfilerStep#<n>`` spans), the ``torch_to_npu`` flows
(their end ``ts`` equals the kernel's start, their start is the launching
op), and the device id from a ``process_labels`` ``NPU <n>`` entry.

The file is parsed with orjson, which gives JSON numbers as floats: a float
is taken only where it fixes the exact ns (a step's ``dur`` of some ms does;
an epoch µs ``ts`` written as a number does not), else the file is read again
by the stdlib parser with numbers as written, so the result does not depend
on the parser.

A list of events is parsed ~1 MB of whole events at a time (:func:`_parts`):
the events of one part are dropped before the next is parsed, so the same
memory serves every part.  Parsed at once, a 100 MB trace is ~900 MB of
objects made and freed in fresh pages (half the reading's time); in parts the
page faults fall ~8x and the reading takes about half as long.  Whatever a
part-wise reading cannot take as it is (a cut that fell inside a string, a
file that is not valid JSON, any error to word) is read whole.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa

from ...errors import ImportFormatError
from ...prof.json_text import JsonTextError, excerpt
from ..files import read_bytes
from .csvfiles import NumberText, decimal_ns, exponent_ns, gc_paused, read_json

_STEP = re.compile(r"ProfilerStep#(\d+)")
#: Between two events of a list: where a part may end.
_EVENT_GAP = re.compile(rb"\}\s*,\s*\{")
PART_BYTES = 1 << 20
_DECIMAL = re.compile(r"(\d+)(?:\.(\d*))?")
_HALF = Fraction(1, 2)
_INT64 = 2**63
#: Digits of a whole number of µs that can be below 2**63 ns.
_US_DIGITS = 16


class _Inexact(Exception):
    """A number read here came as a float that does not fix its exact ns, or is quoted in an error
    or compared as an id: the file is to be read with numbers as written."""


def ns_of(value: object) -> int | None:
    """Exact ns of a µs value written as a decimal string or a JSON number (None if it is neither,
    negative, or past int64 ns: the tables hold ns as int64); digits past the ns are rounded half up.

    A finite float comes from orjson: see :func:`_float_ns`.  A number in exponent notation is
    read by its value, as orjson's float of it is, whichever parser read the file.
    """
    if type(value) is float:
        ns = _float_ns(value) if math.isfinite(value) else None  # NaN/Infinity (stdlib reading)
    elif type(value) is int:
        ns = value * 1000 if value >= 0 else None
    elif not isinstance(value, str):
        return None
    elif (m := _DECIMAL.fullmatch(value.strip())) is None:
        return exponent_ns(value) if type(value) is NumberText else None
    elif len(m.group(1)) > _US_DIGITS:  # past int64 ns: not converted (int() refuses past 4300 digits)
        return None
    else:
        frac = (m.group(2) or "").ljust(4, "0")[:4]
        ns = int(m.group(1)) * 1000 + int(frac) // 10 + (int(frac[3]) >= 5)
    return ns if ns is not None and ns < _INT64 else None


def _float_ns(value: float) -> int:
    """The ns of a float if every decimal within an ulp of it (whatever the file wrote) gives the
    same: a step's ``dur`` of some ms does, an epoch µs ``ts`` does not.  Else, and if negative,
    :class:`_Inexact` (the reading with numbers as written decides, and words the error)."""
    if math.copysign(1.0, value) < 0:
        raise _Inexact
    exact, ulp = Fraction(value), Fraction(math.ulp(value))
    ns, low, high = (math.floor(v * 1000 + _HALF) for v in (exact, exact - ulp, exact + ulp))
    if not low == ns == high:
        raise _Inexact
    return ns


@dataclass
class TraceView:
    """The parts of a trace the tables need."""

    steps: pd.DataFrame  # step, begin, end (ns) of every ProfilerStep#<n>
    launch_of: dict[int, int] = field(default_factory=dict)  # kernel start ns -> launching op ns
    device_id: int | None = None

    def step_of(self, start_ns: np.ndarray) -> np.ndarray:
        """Step of kernels starting at ``start_ns``: the last step begun by the time the kernel was
        launched (by its flow, else by its own start); 0 before the first step."""
        if self.steps.empty:
            return np.zeros(len(start_ns), np.int64)
        launched = np.fromiter((self.launch_of.get(int(t), int(t)) for t in start_ns), np.int64, len(start_ns))
        s = self.steps.sort_values("begin", kind="stable")
        pos = np.searchsorted(s["begin"].to_numpy(np.int64), launched, side="right") - 1
        return np.where(pos >= 0, s["step"].to_numpy(np.int64)[np.maximum(pos, 0)], 0)


def _flow_times(flows: list[dict], exact: bool) -> tuple[dict[object, int], dict[object, int]]:
    """Flow id -> ns of the starts and of the ends of ``torch_to_npu`` flow events (the last one of an
    id wins; a ``ts`` that is no µs value is skipped).  The decimal texts are parsed together, as
    :func:`ns_of` would one by one; other values one by one.  Unless the numbers are as written
    (``exact``), a float id raises :class:`_Inexact`."""
    if not flows:
        return {}, {}
    ts = [ev.get("ts") for ev in flows]
    ns, ok, _ = decimal_ns(pa.chunked_array([pa.array([v if isinstance(v, str) else "" for v in ts], pa.string())]))
    ns_list = ns.tolist()
    for k in np.flatnonzero(~ok).tolist():
        if type(ts[k]) is not str:  # a number (a NumberText in exponent notation), null, ...
            ns_list[k] = ns_of(ts[k])
            ok[k] = ns_list[k] is not None
    ids = [ev.get("id") for ev in flows]
    if not exact and float in set(map(type, ids)):
        raise _Inexact  # distinct decimals may give one float: pair the ids as written
    ok &= np.fromiter((isinstance(i, (str, int, float)) for i in ids), bool, len(ids))  # an id, not a list
    starts = np.fromiter((ev["ph"] == "s" for ev in flows), bool, len(flows))
    out = []
    for side in (starts & ok, ~starts & ok):
        keep = np.flatnonzero(side).tolist()
        out.append(dict(zip([ids[k] for k in keep], [ns_list[k] for k in keep])))
    return out[0], out[1]


#: What trace_view.json must be.
TRACE_FILE = "a JSON list of trace events (Chrome trace format)"


def _quoted(value: object) -> str:
    """A value of an event as an error quotes it: its repr, short."""
    text = repr(value) if value is None or isinstance(value, (str, int, float)) else excerpt(value, 40)
    return text if len(text) <= 60 else f"{text[:40]}...{text[-8:]} ({len(text)} characters)"


def _not_objects(path: Path, events: list, first: int = 0) -> ImportFormatError:
    i, ev = next((i, ev) for i, ev in enumerate(events) if not isinstance(ev, dict))
    return ImportFormatError(f"{path}: event {first + i} is a {type(ev).__name__}, expected an object")


def read_trace_view(path: Path) -> TraceView:
    """Parse ``path`` (a list of events, or ``{"traceEvents": [...]}``).

    Read with orjson, a list of events part by part (:func:`_parts`); if a number read here came
    as a float that does not fix its exact ns, or a flow id is a float, read again with numbers as
    written (the stdlib parser, far slower).  The collector stays paused until the events, acyclic,
    are dropped: its passes over them would cost a third of the reading.
    """
    with gc_paused():
        try:
            data = read_bytes(path, TRACE_FILE)
            parts = _parts(data)
            if parts is not None:
                try:
                    return _read_events(path, parts, exact=False)
                except (orjson.JSONDecodeError, ImportFormatError):
                    pass  # read whole: the whole file decides what it is and words the error
            try:
                content = read_json(path, data=data, unique_keys=False)
            except ImportFormatError as exc:
                if isinstance(exc.__cause__, JsonTextError) and exc.__cause__.kind == "number":
                    raise _Inexact from None  # a number past a float's range: read as written, judged where used
                raise
            return _trace_view(path, content, exact=False)
        except _Inexact:
            return _trace_view(path, read_json(path, exact_floats=True, unique_keys=False), exact=True)


def _parts(data: bytes) -> Iterator[tuple[int, list]] | None:
    """The events of a file that is a bare JSON list (``[{...}, {...}]``), as (index of the first,
    events) of ~:data:`PART_BYTES` each, parsed one after the other; None for any other file.

    A part ends between two events (``}``, a comma, ``{``): a part cut inside a string, or inside
    a nested list, is not valid JSON and raises ``JSONDecodeError``; if every part parses, the
    file is the list of their events."""
    start = len(data) - len(data.lstrip())
    end = len(data.rstrip())
    if data[start:start + 1] != b"[" or data[end - 1:end] != b"]":
        return None

    def parse() -> Iterator[tuple[int, list]]:
        first, pos = 0, start + 1
        while True:
            gap = _EVENT_GAP.search(data, pos + PART_BYTES, end)
            stop = gap.start() + 1 if gap else end - 1
            events = orjson.loads(b"[" + data[pos:stop] + b"]")
            yield first, events
            if gap is None:
                return
            first, pos = first + len(events), gap.end() - 1

    return parse()


def _trace_view(path: Path, content: object, exact: bool) -> TraceView:
    """:func:`_read_events` of a file's parsed content (a list of events, or ``{"traceEvents": [...]}``)."""
    events = content.get("traceEvents") if isinstance(content, dict) else content
    if not isinstance(events, list):
        raise ImportFormatError(f"{path}: expected a JSON list of trace events (Chrome trace format), "
                                f"found a {type(content).__name__}")
    return _read_events(path, [(0, events)], exact)


def _read_events(path: Path, parts, exact: bool) -> TraceView:
    """Most events are kernels and flows the tables take from the CSVs: the events read here are
    picked out with comprehensions over each part, one pass per kind, instead of one branchy
    Python loop over every event.  ``parts``: (index of its first event, events) in file order."""
    steps: list[tuple[int, int, int]] = []
    flows: list[dict] = []
    device_id = None
    for first, events in parts:
        try:
            phases = [ev.get("ph") for ev in events]
        except AttributeError:  # only objects have .get
            raise _not_objects(path, events, first) from None
        for i in [i for i, ph in enumerate(phases) if ph == "X"]:
            ev = events[i]
            name = ev.get("name")
            if isinstance(name, str) and name.startswith("ProfilerStep#") and (m := _STEP.fullmatch(name)):
                ts, dur = ns_of(ev.get("ts")), ns_of(ev.get("dur"))
                if ts is None or dur is None:
                    if not exact and float in (type(ev.get("ts")), type(ev.get("dur"))):
                        raise _Inexact  # the error quotes the numbers as written
                    raise ImportFormatError(f"{path}: event {first + i} ({name}): 'ts' {_quoted(ev.get('ts'))} / "
                                            f"'dur' {_quoted(ev.get('dur'))} are not µs decimals")
                if len(m.group(1)) > 18 or ts + dur >= _INT64:
                    raise ImportFormatError(f"{path}: event {first + i} ({_quoted(name)}): the step number or its end "
                                            "(ts + dur) is past 2**63 - 1; accepted: a step number and ns below 2**63")
                steps.append((int(m.group(1)), ts, ts + dur))
        flows += [ev for ev, ph in zip(events, phases) if (ph == "s" or ph == "f") and ev.get("name") == "torch_to_npu"
                  and str(ev.get("cat", "")).lower() == "async_npu"]
        if device_id is None:
            device_id = _device_of(path, events, phases, first)
    flow_start, flow_end = _flow_times(flows, exact)
    frame = pd.DataFrame(steps, columns=["step", "begin", "end"]).astype(np.int64)
    launch_of = {end: flow_start[key] for key, end in flow_end.items() if key in flow_start}
    return TraceView(frame.sort_values("step", kind="stable").reset_index(drop=True), launch_of, device_id)


def _device_of(path: Path, events: list, phases: list, first: int) -> int | None:
    """The device of the first ``process_labels`` ``NPU <n>`` event among ``events`` (None if none)."""
    for i, ev in ((i, ev) for i, (ev, ph) in enumerate(zip(events, phases))
                  if ph == "M" and ev.get("name") == "process_labels"):
        args = ev.get("args") or {}
        if not isinstance(args, dict):
            raise ImportFormatError(f"{path}: event {first + i} (process_labels): 'args' is {_quoted(args)}; expected "
                                    'an object such as {"labels": "NPU 0"}')
        labels = args.get("labels")
        m = re.fullmatch(r"NPU\s*(\d{1,9})", labels.strip()) if isinstance(labels, str) else None
        if m:
            return int(m.group(1))
    return None
