"""The lanes of one run on the timeline's clock (µs since its origin: the first step's start).

Top down: the steps (one bar per step, its window from the step bounds), the step phases of
step_trace (Data Aug Bound, GetNext, FP→BP or Iteration, Iteration Refresh; Forward and Output for a
model that runs forward only; Prefill, Decode and Host (scheduler) for a serving run), one lane per device
stream with its tasks coloured by Task Type, the collectives on an HCCL lane with the part of each
that no compute task of the run covers (exposed) as an overlay, the host API levels and GE host
events per thread, the mstx ranges and markers, and the allocated-memory curve.  Spans that overlap
within one of these (nested scopes) get sub-rows, so a row's spans never overlap.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ...analysis import Profile
from ...analysis.tables.intervals import union
from ..plots.gantt import COMMUNICATION_ROW as COMMUNICATION_LABEL
from ..plots.host import sub_rows
from ..plots.steps import ROW_COLORS as STEP_PHASE_COLORS
from ..plots.steps import step_rows
from .lod import Spans
from .registry import Codes, Details, DetailTable, Kinds

#: Kind names of the spans that are not op tasks or host scopes.
STEP_KIND = "step"
EXPOSED_KIND = "exposed communication"
MSTX_KIND = "mstx"
#: Fixed colours of those kinds (the rest are the PNG plots' colours of their names).
FIXED_COLORS = {STEP_KIND: "#9aa5b1", EXPOSED_KIND: "#8b1a1a", MSTX_KIND: "#6a3d9a", **STEP_PHASE_COLORS}
#: step_trace phases the timeline leaves out: the collectives have their own lane (with the exposed part).
LEFT_OUT_PHASES = ("AllReduce",)
#: op_summary columns a task's details show (those present, with a value), then its PMU ``*_ratio`` columns.
OP_DETAIL_COLUMNS = ["Op Name", "OP Type", "Task Type", "Stream ID", "Task ID", "Model ID", "Block Num",
                     "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes", "Output Data Types",
                     "Task Wait Time(us)"]
HOST_LEVELS = ("acl", "model", "node", "runtime")


@dataclass
class Lane:
    """One row of the timeline.  ``type``: ``spans`` (a run's tasks or scopes), ``summary`` (the merged
    spans of a collapsed group of lanes: ``members``) or ``curve`` (``curve``: times, values).
    ``parent``: the lane whose expansion shows this one (None: shown from the start)."""

    id: str
    label: str
    type: str = "spans"
    spans: Spans | None = None
    overlay: Spans | None = None
    curve: tuple[np.ndarray, np.ndarray] | None = None
    unit: str = ""
    parent: str | None = None
    rank: int | None = None
    members: list[str] = field(default_factory=list)
    note: str = ""
    ops: bool = False

    def meta(self, expandable: bool) -> dict:
        """What the browser knows of the lane before any view (JSON); ``ops``: its spans are op tasks
        (a click lists the op's instances)."""
        out = {"id": self.id, "label": self.label, "type": self.type, "parent": self.parent, "rank": self.rank,
               "expandable": expandable, "unit": self.unit, "note": self.note, "ops": self.ops}
        if self.overlay is not None:
            out["overlay"] = EXPOSED_KIND
        if self.curve is not None:
            out["max"] = float(np.nanmax(self.curve[1])) if len(self.curve[1]) else 0.0
        return out


@dataclass
class Tables:
    """The registries every lane of a timeline codes its spans in."""

    kinds: Kinds
    names: Codes
    details: Details
    #: the name codes that are op names (what the search box matches)
    op_names: set[int] = field(default_factory=set)

    @classmethod
    def new(cls) -> Tables:
        kinds = Kinds()
        kinds.fix(FIXED_COLORS)
        return cls(kinds, Codes(), Details())


def rel_us(ns: np.ndarray, origin_ns: int) -> np.ndarray:
    """µs since the origin of exact ns timestamps (subtracted as integers: float64 ns lose 256 ns at today's epoch)."""
    ns = np.asarray(ns)
    if ns.dtype.kind in "iu":
        return (ns.astype(np.int64) - np.int64(origin_ns)) / 1000.0
    return (ns.astype(np.float64) - origin_ns) / 1000.0


def rel_us_of_us(us: np.ndarray | pd.Series, origin_ns: int) -> np.ndarray:
    """µs since the origin of float µs timestamps (table columns: float64 keeps them to 0.25 µs)."""
    values = pd.to_numeric(pd.Series(us), errors="coerce").to_numpy(np.float64, na_value=np.nan)
    return values - origin_ns / 1000.0


@dataclass
class RunLanes:
    """The lanes of one run, and what the timeline needs of it besides: the global name code of each
    op_summary row (op search and instances) and the reference of its first row."""

    lanes: list[Lane]
    device_lanes: list[str]
    op_codes: np.ndarray
    op_ref0: int


def run_lanes(profile: Profile, origin_ns: int, tables: Tables, prefix: str = "", parent: str | None = None,
              rank: int | None = None) -> RunLanes:
    """Every lane of ``profile`` (module docstring), ids prefixed by ``prefix``, under ``parent``."""
    lanes: list[Lane] = []

    def add(lane_id: str, label: str, spans: Spans, **kw) -> None:
        lanes.append(Lane(prefix + lane_id, label, spans=spans, parent=parent, rank=rank, **kw))

    steps = _step_spans(profile, origin_ns, tables)
    if steps is not None:
        add("steps", "steps", steps)
    for k, spans in enumerate(_phase_rows(profile, origin_ns, tables)):
        add(f"phases/{k}", "step phases" if k == 0 else f"step phases ({k + 1})", spans)
    op_codes, op_ref0, device = _device_lanes(profile, origin_ns, tables, rank)
    device_ids = []
    for lane_id, label, spans, overlay in device:
        add(lane_id, label, spans, overlay=overlay, ops=True)
        device_ids.append(prefix + lane_id)
    for lane_id, label, spans in _host_lanes(profile, origin_ns, tables, rank):
        add(lane_id, label, spans)
    for k, spans in enumerate(_mstx_rows(profile, origin_ns, tables, rank)):
        add(f"mstx/{k}", "mstx" if k == 0 else f"mstx ({k + 1})", spans)
    memory = _memory_curve(profile, origin_ns)
    if memory is not None:
        lanes.append(Lane(prefix + "memory", "memory allocated", type="curve", curve=memory, unit="MiB",
                          parent=parent, rank=rank))
    return RunLanes(lanes, device_ids, op_codes, op_ref0)


def _step_spans(profile: Profile, origin_ns: int, tables: Tables) -> Spans | None:
    bounds = profile.source.step_bounds()
    if not len(bounds):
        return None
    steps = bounds["step"].to_numpy(np.int64)
    names = np.array([tables.names.code(f"step {s}") for s in steps.tolist()], np.int32)
    return Spans.of(rel_us(bounds["begin"].to_numpy(), origin_ns), rel_us(bounds["end"].to_numpy(), origin_ns),
                    tables.kinds.code(STEP_KIND), names)


def _phase_rows(profile: Profile, origin_ns: int, tables: Tables) -> list[Spans]:
    """step_trace's phases as rows that never overlap (GetNext may lie inside Data Aug Bound)."""
    st = profile.step_trace
    if st.empty:
        return []
    rows = step_rows(st, profile.forward_only_models, profile.model_phases)
    parts = [(r.label, r.start_us, r.width_us, r.iteration) for r in rows if r.label not in LEFT_OUT_PHASES]
    if not parts:
        return []
    start = np.concatenate([p[1] for p in parts]) - origin_ns / 1000.0
    end = start + np.concatenate([p[2] for p in parts])
    kind = np.concatenate([np.full(len(p[1]), tables.kinds.code(p[0]), np.int16) for p in parts])
    name = np.concatenate([np.full(len(p[1]), tables.names.code(p[0]), np.int32) for p in parts])
    return _split_rows(np.zeros(len(start), np.int64), start, end, kind, name, None, FLOAT_US_TOLERANCE)[0]


#: How much a span of float-µs table times (step_trace, host events, mstx) may start before the previous
#: one of its row ends: such times are exact to 0.25 µs at today's epoch, so back-to-back phases can
#: look that much overlapped.
FLOAT_US_TOLERANCE = 0.5


def _split_rows(group: np.ndarray, start: np.ndarray, end: np.ndarray, kind: np.ndarray, name: np.ndarray,
                ref: np.ndarray | None, tolerance: float = 0.0) -> list[list[Spans]]:
    """Per group (0..n-1), its spans as rows that never overlap (by more than ``tolerance`` µs): the outer
    spans in the first."""
    if not len(start):
        return []
    row = sub_rows(group, start, end, tolerance)
    out = []
    for g in range(int(group.max()) + 1):
        mine = group == g
        rows = []
        for r in range(int(row[mine].max()) + 1 if mine.any() else 0):
            pick = mine & (row == r)
            rows.append(Spans.of(start[pick], end[pick], kind[pick], name[pick], None if ref is None else ref[pick]))
        out.append(rows)
    return out


def exposed_parts(start: np.ndarray, end: np.ndarray, cover_start: np.ndarray, cover_end: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The parts of intervals ``[start, end)`` that no cover interval overlaps: (start, end, the index of
    the interval each part belongs to).  A collective's exposed communication is its time no compute task
    runs beside (torch_npu's Communication(Not Overlapped) is the union of these within a step)."""
    us, ue = union(np.asarray(cover_start, np.float64), np.asarray(cover_end, np.float64))
    gap_lo = np.r_[-np.inf, ue]  # the gaps between the cover's intervals, and before and after them
    gap_hi = np.r_[us, np.inf]
    first = np.searchsorted(gap_hi, start, "right")  # first gap that ends after the interval starts
    last = np.searchsorted(gap_lo, end, "left") - 1  # last gap that starts before it ends
    n = np.maximum(last - first + 1, 0)
    owner = np.repeat(np.arange(len(start)), n)
    gap = np.repeat(first, n) + (np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n))
    lo, hi = np.maximum(start[owner], gap_lo[gap]), np.minimum(end[owner], gap_hi[gap])
    keep = hi > lo
    return lo[keep], hi[keep], owner[keep]


def _device_lanes(profile: Profile, origin_ns: int, tables: Tables, rank: int | None
                  ) -> tuple[np.ndarray, int, list[tuple[str, str, Spans, Spans | None]]]:
    """The op tasks: one lane per stream, the collectives on the HCCL lane with their exposed parts."""
    rows = profile.source.op_rows()
    f = rows.frame
    shown = [c for c in OP_DETAIL_COLUMNS if c in f.columns] + [c for c in f.columns if str(c).endswith("_ratio")]
    ref0 = tables.details.add(DetailTable(rank, "op_summary", f, shown))
    if f.empty:
        return np.zeros(0, np.int32), ref0, []
    start = rel_us(rows.start_ns, origin_ns)
    end = start + pd.to_numeric(f["Task Duration(us)"], errors="coerce").to_numpy(np.float64, na_value=np.nan)
    kind = tables.kinds.codes(f["Task Type"] if "Task Type" in f else pd.Series("N/A", index=f.index)).astype(np.int16)
    name = tables.names.codes(f["Op Name"])
    tables.op_names.update(np.unique(name).tolist())
    ref = ref0 + np.arange(len(f), dtype=np.int64)
    comm = np.asarray(profile.source.communication_rows(), bool)
    if len(comm) != len(f):  # a source whose collective rows are not op_summary's: by Task Type
        comm = (f["Task Type"].astype(str) == "COMMUNICATION").to_numpy() if "Task Type" in f \
            else np.zeros(len(f), bool)
    stream = pd.to_numeric(f["Stream ID"], errors="coerce").to_numpy(np.float64, na_value=np.nan) \
        if "Stream ID" in f else np.full(len(f), np.nan)
    out = []
    compute = ~comm
    for sid in np.unique(stream[compute & np.isfinite(stream)]):
        pick = compute & (stream == sid)
        out.append((f"stream/{int(sid)}", f"stream {int(sid)}", Spans.of(start[pick], end[pick], kind[pick],
                                                                        name[pick], ref[pick]), None))
    loose = compute & ~np.isfinite(stream)
    if loose.any():
        out.append(("stream/na", "stream N/A", Spans.of(start[loose], end[loose], kind[loose], name[loose],
                                                        ref[loose]), None))
    if comm.any():
        lo, hi, owner = exposed_parts(start[comm], end[comm], start[compute], end[compute])
        c_name, c_ref = name[comm][owner], ref[comm][owner]
        overlay = Spans.of(lo, hi, tables.kinds.code(EXPOSED_KIND), c_name, c_ref)
        out.append(("hccl", COMMUNICATION_LABEL, Spans.of(start[comm], end[comm], kind[comm], name[comm], ref[comm]),
                    overlay))
    return name, ref0, out


def _host_lanes(profile: Profile, origin_ns: int, tables: Tables, rank: int | None) -> list[tuple[str, str, Spans]]:
    """Host API calls per thread and level (acl, model, node, runtime) and the GE host events per thread."""
    calls = profile.source.api_calls()
    events = profile.host_events
    groups: list[tuple[str, str, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]] = []
    threads = sorted(set(pd.to_numeric(calls["thread"], errors="coerce").dropna().astype(np.int64).tolist()
                         if len(calls) else []) |
                     set(pd.to_numeric(events["Thread ID"], errors="coerce").dropna().astype(np.int64).tolist()
                         if len(events) else []))
    several = len(threads) > 1
    if len(calls):
        ref0 = tables.details.add(DetailTable(rank, "api_calls", calls, ["level", "api", "item", "thread"]))
        begin, stop = rel_us(calls["begin"].to_numpy(), origin_ns), rel_us(calls["end"].to_numpy(), origin_ns)
        level = calls["level"].astype(str).to_numpy()
        thread = calls["thread"].to_numpy(np.int64)
        api = calls["api"].astype(str)
        kind = tables.kinds.codes(api).astype(np.int16)
        name = tables.names.codes(api)
        ref = ref0 + np.arange(len(calls), dtype=np.int64)
        for t in threads:
            for lv in [*HOST_LEVELS, *sorted(set(level) - set(HOST_LEVELS))]:
                pick = (thread == t) & (level == lv)
                if pick.any():
                    label = f"host {lv}" + (f" · thread {t}" if several else "")
                    groups.append((f"host/{t}/{lv}", label, begin[pick], stop[pick], kind[pick], name[pick], ref[pick],
                                   0.0))
    if len(events):
        ref0 = tables.details.add(DetailTable(rank, "host_events", events, list(events.columns)))
        begin, stop = rel_us_of_us(events["Start(us)"], origin_ns), rel_us_of_us(events["End(us)"], origin_ns)
        thread = pd.to_numeric(events["Thread ID"], errors="coerce").fillna(-1).to_numpy(np.int64)
        kind = tables.kinds.codes(events["Event"]).astype(np.int16)
        name = tables.names.codes(events["Event"])
        ref = ref0 + np.arange(len(events), dtype=np.int64)
        for t in threads:
            pick = thread == t
            if pick.any():
                label = "GE host events" + (f" · thread {t}" if several else "")
                groups.append((f"host/{t}/events", label, begin[pick], stop[pick], kind[pick], name[pick], ref[pick],
                               FLOAT_US_TOLERANCE))
    out = []
    for lane_id, label, b, e, k, n, r, tolerance in groups:
        for j, spans in enumerate(_split_rows(np.zeros(len(b), np.int64), b, e, k, n, r, tolerance)[0]):
            out.append((f"{lane_id}/{j}", label if j == 0 else f"{label} ({j + 1})", spans))
    return out


def _mstx_rows(profile: Profile, origin_ns: int, tables: Tables, rank: int | None) -> list[Spans]:
    """mstx ranges (start to end) and markers (zero-length), in rows that never overlap."""
    tx = profile.msprof_tx
    if tx.empty:
        return []
    ref0 = tables.details.add(DetailTable(rank, "msprof_tx", tx, ["message", "domain", "event_type", "tid"]))
    begin = rel_us_of_us(tx["Start_time(us)"], origin_ns)
    stop = rel_us_of_us(tx["End_time(us)"], origin_ns)
    stop = np.where(np.isfinite(stop), stop, begin)  # a marker
    name = tables.names.codes(tx["message"])
    kind = np.full(len(tx), tables.kinds.code(MSTX_KIND), np.int16)
    return _split_rows(np.zeros(len(tx), np.int64), begin, stop, kind, name,
                       ref0 + np.arange(len(tx), dtype=np.int64), FLOAT_US_TOLERANCE)[0]


def _memory_curve(profile: Profile, origin_ns: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The allocated total after every allocation and release (MiB), in time order."""
    mr = profile.memory_record
    if mr.empty or "Total Allocated(MB)" not in mr:
        return None
    t = rel_us_of_us(mr["Timestamp(us)"], origin_ns)
    v = pd.to_numeric(mr["Total Allocated(MB)"], errors="coerce").to_numpy(np.float64, na_value=np.nan)
    ok = np.isfinite(t) & np.isfinite(v)
    t, v = t[ok], v[ok]
    order = np.argsort(t, kind="stable")
    return t[order], v[order]
