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
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from .csvfiles import ImportFormatError, NumberText, decimal_ns, gc_paused, read_json

_STEP = re.compile(r"ProfilerStep#(\d+)")
_DECIMAL = re.compile(r"(\d+)(?:\.(\d*))?")
_HALF = Fraction(1, 2)
_HALF_NS_US = Decimal("0.0005")
_INT64_NS_US = Decimal(2**63) / 1000


class _Inexact(Exception):
    """A number read here came as a float that does not fix its exact ns, or is quoted in an error
    or compared as an id: the file is to be read with numbers as written."""


def ns_of(value: object) -> int | None:
    """Exact ns of a µs value written as a decimal string or a JSON number (None if it is neither,
    or negative); digits past the ns are rounded half up.

    A finite float comes from orjson: see :func:`_float_ns`.  A number in exponent notation is
    read by its value, as orjson's float of it is, whichever parser read the file.
    """
    if type(value) is float:
        return _float_ns(value) if math.isfinite(value) else None  # NaN/Infinity (stdlib reading)
    if type(value) is int:
        return value * 1000 if value >= 0 else None
    if not isinstance(value, str):
        return None
    m = _DECIMAL.fullmatch(value.strip())
    if not m:
        return _exponent_ns(value) if type(value) is NumberText else None
    frac = (m.group(2) or "").ljust(4, "0")[:4]
    return int(m.group(1)) * 1000 + int(frac) // 10 + (int(frac[3]) >= 5)


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


def _exponent_ns(text: NumberText) -> int | None:
    """A number such as ``1.5e3`` by its value; None if negative or past int64 ns (bounds first:
    ``1e-999999`` or ``1e999999`` would make a huge Fraction)."""
    value = Decimal(text)
    if value.is_signed() or value >= _INT64_NS_US:
        return None
    return math.floor(Fraction(value) * 1000 + _HALF) if value >= _HALF_NS_US else 0


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
    starts = np.fromiter((ev["ph"] == "s" for ev in flows), bool, len(flows))
    out = []
    for side in (starts & ok, ~starts & ok):
        keep = np.flatnonzero(side).tolist()
        out.append(dict(zip([ids[k] for k in keep], [ns_list[k] for k in keep])))
    return out[0], out[1]


def _not_objects(path: Path, events: list) -> ImportFormatError:
    i, ev = next((i, ev) for i, ev in enumerate(events) if not isinstance(ev, dict))
    return ImportFormatError(f"{path}: event {i} is a {type(ev).__name__}, expected an object")


def read_trace_view(path: Path) -> TraceView:
    """Parse ``path`` (a list of events, or ``{"traceEvents": [...]}``).

    Read with orjson; if a number read here came as a float that does not fix its exact ns, or a
    flow id is a float, read again with numbers as written (the stdlib parser, far slower).  The
    collector stays paused until the events, acyclic, are dropped: its passes over them would
    cost a third of the reading.
    """
    with gc_paused():
        try:
            return _trace_view(path, read_json(path), exact=False)
        except _Inexact:
            return _trace_view(path, read_json(path, exact_floats=True), exact=True)


def _trace_view(path: Path, content: object, exact: bool) -> TraceView:
    """Most events are kernels and flows the tables take from the CSVs: the events read here are
    picked out with comprehensions over the list, one pass per kind, instead of one branchy
    Python loop over every event."""
    events = content.get("traceEvents") if isinstance(content, dict) else content
    if not isinstance(events, list):
        raise ImportFormatError(f"{path}: expected a JSON list of trace events (Chrome trace format), "
                                f"found a {type(content).__name__}")
    try:
        phases = [ev.get("ph") for ev in events]
    except AttributeError:  # only objects have .get
        raise _not_objects(path, events) from None
    steps: list[tuple[int, int, int]] = []
    for i in [i for i, ph in enumerate(phases) if ph == "X"]:
        ev = events[i]
        name = ev.get("name")
        if isinstance(name, str) and name.startswith("ProfilerStep#") and (m := _STEP.fullmatch(name)):
            ts, dur = ns_of(ev.get("ts")), ns_of(ev.get("dur"))
            if ts is None or dur is None:
                if not exact and float in (type(ev.get("ts")), type(ev.get("dur"))):
                    raise _Inexact  # the error quotes the numbers as written
                raise ImportFormatError(f"{path}: event {i} ({name}): 'ts' {ev.get('ts')!r} / 'dur' "
                                        f"{ev.get('dur')!r} are not µs decimals")
            steps.append((int(m.group(1)), ts, ts + dur))
    flows = [ev for ev, ph in zip(events, phases) if (ph == "s" or ph == "f") and ev.get("name") == "torch_to_npu"
             and str(ev.get("cat", "")).lower() == "async_npu"]
    device_id = None
    for i, ev in ((i, ev) for i, (ev, ph) in enumerate(zip(events, phases))
                  if ph == "M" and ev.get("name") == "process_labels"):
        args = ev.get("args") or {}
        if not isinstance(args, dict):
            raise ImportFormatError(f"{path}: event {i} (process_labels): 'args' is {args!r}; expected an object "
                                    'such as {"labels": "NPU 0"}')
        m = re.fullmatch(r"NPU\s*(\d+)", str(args.get("labels", "")).strip())
        if m:
            device_id = int(m.group(1))
            break
    flow_start, flow_end = _flow_times(flows, exact)
    frame = pd.DataFrame(steps, columns=["step", "begin", "end"]).astype(np.int64)
    launch_of = {end: flow_start[key] for key, end in flow_end.items() if key in flow_start}
    return TraceView(frame.sort_values("step", kind="stable").reset_index(drop=True), launch_of, device_id)
