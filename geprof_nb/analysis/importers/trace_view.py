"""What the importers take from a Chrome-trace timeline (torch_npu ``trace_view.json``).

The file is a JSON list of events (reference §4.6, msprof_analyze_inputs §3);
``ts`` is a µs decimal, often a string, parsed exactly into ns.  Read here:
the framework steps (``ProfilerStep#<n>`` spans), the ``torch_to_npu`` flows
(their end ``ts`` equals the kernel's start, their start is the launching
op), and the device id from a ``process_labels`` ``NPU <n>`` entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from .csvfiles import ImportFormatError, decimal_ns, read_json

_STEP = re.compile(r"ProfilerStep#(\d+)")
_DECIMAL = re.compile(r"(\d+)(?:\.(\d*))?")


def ns_of(value: object) -> int | None:
    """Exact ns of a µs value written as a decimal string or JSON number (None if it is not one)."""
    if isinstance(value, bool):
        return None
    m = _DECIMAL.fullmatch(str(value).strip())
    if not m:
        return None
    frac = (m.group(2) or "").ljust(4, "0")[:4]
    return int(m.group(1)) * 1000 + int(frac) // 10 + (int(frac[3]) >= 5)


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


def _flow_times(flows: list[dict]) -> tuple[dict[object, int], dict[object, int]]:
    """Flow id -> ns of the starts and of the ends of ``torch_to_npu`` flow events (the last one of an
    id wins; a ``ts`` that is no µs decimal is skipped).  The timestamps are parsed together, as
    :func:`ns_of` would one by one."""
    if not flows:
        return {}, {}
    texts = pa.chunked_array([pa.array([v if type(v) is str else ("" if isinstance(v, bool) else str(v))
                                        for v in (ev.get("ts") for ev in flows)], pa.string())])
    ns, ok, _ = decimal_ns(texts)
    ns_list = ns.tolist()
    starts = np.fromiter((ev["ph"] == "s" for ev in flows), bool, len(flows))
    out = []
    for side in (starts & ok, ~starts & ok):
        keep = np.flatnonzero(side).tolist()
        out.append(dict(zip([flows[k].get("id") for k in keep], [ns_list[k] for k in keep])))
    return out[0], out[1]


def _not_objects(path: Path, events: list) -> ImportFormatError:
    i, ev = next((i, ev) for i, ev in enumerate(events) if not isinstance(ev, dict))
    return ImportFormatError(f"{path}: event {i} is a {type(ev).__name__}, expected an object")


def read_trace_view(path: Path) -> TraceView:
    """Parse ``path`` (a list of events, or ``{"traceEvents": [...]}``).

    Most events are kernels and flows the tables take from the CSVs: the events read here are
    picked out with comprehensions over the list, one pass per kind, instead of one branchy
    Python loop over every event.
    """
    content = read_json(path, exact_floats=True)
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
                raise ImportFormatError(f"{path}: event {i} ({name}): 'ts' {ev.get('ts')!r} / 'dur' "
                                        f"{ev.get('dur')!r} are not µs decimals")
            steps.append((int(m.group(1)), ts, ts + dur))
    flows = [ev for ev, ph in zip(events, phases) if (ph == "s" or ph == "f") and ev.get("name") == "torch_to_npu"
             and str(ev.get("cat", "")).lower() == "async_npu"]
    device_id = None
    for ev in (ev for ev, ph in zip(events, phases) if ph == "M" and ev.get("name") == "process_labels"):
        m = re.fullmatch(r"NPU\s*(\d+)", str((ev.get("args") or {}).get("labels", "")).strip())
        if m:
            device_id = int(m.group(1))
            break
    flow_start, flow_end = _flow_times(flows)
    frame = pd.DataFrame(steps, columns=["step", "begin", "end"]).astype(np.int64)
    launch_of = {end: flow_start[key] for key, end in flow_end.items() if key in flow_start}
    return TraceView(frame.sort_values("step", kind="stable").reset_index(drop=True), launch_of, device_id)
