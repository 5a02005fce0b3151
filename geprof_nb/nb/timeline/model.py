"""What the timeline widget knows of a Profile or a ClusterProfile, and what it answers the browser.

:class:`TimelineData` holds every lane on one clock, µs since the origin (the first step's start,
the earliest of all ranks' for a cluster), and answers the widget's requests:

* :meth:`TimelineData.view`: the lanes asked for, in a window, at a number of columns (:mod:`.lod`),
  as a JSON header and binary buffers, at most :data:`MAX_VIEW_BYTES`;
* :meth:`TimelineData.op`: every instance of an op name across steps and ranks, its statistics and
  mean PMU ratios;
* :meth:`TimelineData.detail`: a span's row (op_summary, host call, ...) as (column, value) pairs;
* :meth:`TimelineData.search`: the op names that contain a text, and how many tasks they ran.

A cluster's ranks are grouped (:mod:`.grouping`): each group is a summary lane, expanded into one
summary lane per rank, expanded into the rank's lanes; slowest group and rank first.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from ...analysis import ClusterProfile, Profile
from .grouping import Grouping, by_server, own_time, slowest_first
from .lanes import STEP_KIND, Lane, Tables, rel_us, run_lanes
from .lod import BYTES_PER_COLUMN, Packer, Spans, curve_view, encode_curve, encode_spans, span_view

#: The most a view sends (the issue's budget): columns are reduced until a view fits.
MAX_VIEW_BYTES = 5_000_000
#: The most columns a view is computed at (a window four 4K screens wide).
MAX_COLUMNS = 16_384
#: Instances an op's side panel lists (the statistics count every one).
MAX_INSTANCES = 500
#: Op names a search lists (the count covers every hit).
MAX_SEARCH_NAMES = 200


@dataclass
class RankOps:
    """One rank's op_summary and the global name code of each of its rows."""

    rank: int | None
    profile: Profile
    codes: np.ndarray
    ref0: int


class TimelineData:
    """The lanes of a run or a cluster on one clock, and the answers to the widget's requests."""

    def __init__(self, target: Profile | ClusterProfile, group_by: Grouping = by_server) -> None:
        if not isinstance(target, (Profile, ClusterProfile)):
            raise TypeError(f"Timeline needs a Profile or a ClusterProfile (geprof_nb.load(path)), not "
                            f"{type(target).__name__}")
        self.target = target
        self.tables = Tables.new()
        self.lanes: list[Lane] = []
        self.ops: list[RankOps] = []
        profiles = dict(target.ranks) if isinstance(target, ClusterProfile) else {None: target}
        self.origin_ns = self._origin(list(profiles.values()))
        if isinstance(target, ClusterProfile):
            self.step_bounds = _cluster_step_bounds(target)
            self._cluster(target, group_by)
        else:
            self.step_bounds = target.source.step_bounds()[["step", "begin", "end"]]
            self._add_run(target, None, "", None)
        self.by_id = {lane.id: lane for lane in self.lanes}
        self._summaries: dict[str, Spans] = {}

    # ------------------------------------------------------------------ building
    @staticmethod
    def _origin(profiles: list[Profile]) -> int:
        """The first step's start over every run, else the first task's (0 for runs without either)."""
        starts = [p.first_step_ns for p in profiles if p.first_step_ns is not None]
        if not starts:
            starts = [p.first_task_ns for p in profiles if p.first_task_ns is not None]
        return min(starts) if starts else 0

    def _add_run(self, profile: Profile, rank: int | None, prefix: str, parent: str | None) -> list[str]:
        run = run_lanes(profile, self.origin_ns, self.tables, prefix, parent, rank)
        self.lanes += run.lanes
        self.ops.append(RankOps(rank, profile, run.op_codes, run.op_ref0))
        return run.device_lanes

    def _cluster(self, cluster: ClusterProfile, group_by: Grouping) -> None:
        if len(self.step_bounds):
            b = self.step_bounds
            names = np.array([self.tables.names.code(f"step {s}") for s in b["step"].tolist()], np.int32)
            self.lanes.append(Lane("steps", "steps (all ranks)", spans=Spans.of(
                rel_us(b["begin"].to_numpy(), self.origin_ns), rel_us(b["end"].to_numpy(), self.origin_ns),
                self.tables.kinds.code(STEP_KIND), names)))
        own = own_time(cluster)
        for g, (label, ranks) in enumerate(slowest_first(group_by(cluster), own)):
            group = Lane(f"g{g}", label, type="summary", note=_own_note(max((own[r] for r in ranks if r in own),
                                                                            default=None), "slowest: "))
            self.lanes.append(group)
            for r in ranks:
                rank_lane = Lane(f"r{r}", f"rank {r}", type="summary", parent=group.id, rank=r,
                                 note=_own_note(own.get(r)))
                self.lanes.append(rank_lane)
                rank_lane.members = self._add_run(cluster.ranks[r], r, f"r{r}/", rank_lane.id)
                group.members += rank_lane.members

    # -------------------------------------------------------------------- meta
    @cached_property
    def steps(self) -> list[list[float]]:
        """[step, start µs, end µs] per step (a cluster's: from its earliest start on any rank to its latest end)."""
        b = self.step_bounds
        return [[int(s), float(lo), float(hi)] for s, lo, hi in zip(
            b["step"].tolist(), rel_us(b["begin"].to_numpy(), self.origin_ns).tolist(),
            rel_us(b["end"].to_numpy(), self.origin_ns).tolist())]

    @cached_property
    def extent(self) -> tuple[float, float]:
        """(first, last) µs of everything on the timeline ((0, 1) when it is empty)."""
        lo, hi = [], []
        for lane in self.lanes:
            for spans in (lane.spans, lane.overlay):
                ext = spans.extent() if spans is not None else None
                if ext:
                    lo.append(ext[0])
                    hi.append(ext[1])
            if lane.curve is not None and len(lane.curve[0]):
                lo.append(float(lane.curve[0][0]))
                hi.append(float(lane.curve[0][-1]))
        if not lo:
            return 0.0, 1.0
        first, last = min(lo), max(hi)
        return first, last if last > first else first + 1.0

    def meta(self) -> dict:
        """What the browser gets once (JSON): lanes, kinds and colours, names, steps, the extent."""
        parents = {lane.parent for lane in self.lanes if lane.parent}
        return {"lanes": [lane.meta(lane.id in parents) for lane in self.lanes], "legend": self.legend(),
                "kinds": self.tables.kinds.table(), "names": self.tables.names.texts,
                "steps": self.steps, "extent": list(self.extent), "origin_ns": str(self.origin_ns),
                "title": getattr(self.target, "name", ""),
                "cluster": isinstance(self.target, ClusterProfile)}

    def legend(self) -> list[int]:
        """The kinds of the op tasks, the step phases and the exposed communication (the legend's entries)."""
        used: set[int] = set()
        for lane in self.lanes:
            if lane.ops or "/phases/" in f"/{lane.id}":
                used.update(np.unique(lane.spans.kind).tolist())
            if lane.overlay is not None and len(lane.overlay):
                used.update(np.unique(lane.overlay.kind).tolist())
        return sorted(used)

    # -------------------------------------------------------------------- views
    def summary_spans(self, lane: Lane) -> Spans:
        """A summary lane's spans: its members' device spans together (built once)."""
        if lane.id not in self._summaries:
            self._summaries[lane.id] = Spans.concat([self.by_id[m].spans for m in lane.members
                                                     if self.by_id[m].spans is not None])
        return self._summaries[lane.id]

    def view(self, t0: float, t1: float, columns: int, lane_ids: list[str], query: str = ""
             ) -> tuple[dict, list[bytes]]:
        """The lanes ``lane_ids`` over ``[t0, t1]`` at ``columns`` columns (fewer when the view would send more
        than :data:`MAX_VIEW_BYTES`), search hits of ``query`` marked: (header, buffers)."""
        t0, t1 = float(t0), float(t1)
        if not (np.isfinite(t0) and np.isfinite(t1) and t1 > t0):
            raise ValueError(f"a view needs finite t0 < t1 (got {t0}, {t1})")
        unknown = [i for i in lane_ids if i not in self.by_id]
        if unknown:
            known = [lane.id for lane in self.lanes[:20]]
            raise ValueError(f"unknown lane ids {unknown[:5]}; this timeline's lanes: {known}")
        columns = int(min(max(int(columns), 1), MAX_COLUMNS))
        hits = self._hit_table(query)
        while True:
            header, packer = self._encode(t0, t1, columns, lane_ids, hits)
            size = packer.nbytes + len(str(header))
            if size <= MAX_VIEW_BYTES or columns == 1:
                break
            # a worst-case bound on the next try: it always fits then
            columns = max(1, min(int(columns * 0.8 * MAX_VIEW_BYTES / size),
                                 MAX_VIEW_BYTES // (2 * max(len(lane_ids), 1) * BYTES_PER_COLUMN)))
        header["bytes"] = packer.nbytes
        return header, packer.buffers

    def _encode(self, t0: float, t1: float, columns: int, lane_ids: list[str], hits: np.ndarray | None
                ) -> tuple[dict, Packer]:
        packer = Packer()
        lanes: dict[str, dict] = {}
        for lane_id in lane_ids:
            lane = self.by_id[lane_id]
            if lane.type == "curve":
                t, v = lane.curve
                lanes[lane_id] = encode_curve(curve_view(t, v, t0, t1, columns), packer)
                continue
            spans = self.summary_spans(lane) if lane.type == "summary" else lane.spans
            entry = encode_spans(span_view(spans, t0, t1, columns, merge_all=lane.type == "summary", hits=hits),
                                 spans, packer)
            if lane.type == "summary":
                entry["members"] = len(lane.members)
            if lane.overlay is not None:
                entry["overlay"] = encode_spans(span_view(lane.overlay, t0, t1, columns), lane.overlay, packer)
            lanes[lane_id] = entry
        return {"type": "view", "t0": t0, "t1": t1, "columns": columns, "lanes": lanes}, packer

    def _hit_table(self, query: str) -> np.ndarray | None:
        """A bool per name code: an op name containing ``query`` (case-insensitive); None for no query."""
        if not query:
            return None
        q = query.casefold()
        table = np.zeros(len(self.tables.names) + 1, bool)
        for code in self.tables.op_names:
            if q in self.tables.names.texts[code].casefold():
                table[code] = True
        return table

    # ------------------------------------------------------------------ answers
    def search(self, query: str) -> dict:
        """The op names containing ``query`` (case-insensitive), most tasks first, and how many tasks ran them."""
        hits = self._hit_table(query)
        if hits is None:
            return {"type": "search", "query": query, "names": [], "ops": 0, "tasks": 0}
        counts = np.zeros(len(hits), np.int64)
        for rank in self.ops:
            counts += np.bincount(rank.codes, minlength=len(hits))[: len(hits)]
        matched = np.flatnonzero(hits & (counts > 0))
        matched = matched[np.argsort(-counts[matched], kind="stable")]
        return {"type": "search", "query": query, "ops": int(len(matched)), "tasks": int(counts[matched].sum()),
                "names": [[int(c), int(counts[c])] for c in matched[:MAX_SEARCH_NAMES]]}

    def op(self, name: str) -> dict:
        """Every instance of op ``name`` across ranks and steps: (rank, step, start µs, duration µs, stream),
        first :data:`MAX_INSTANCES` by start; count, total, mean, min, max duration; mean of each ratio column."""
        code = self.tables.names.find(str(name))
        parts = []
        ratios: dict[str, list[np.ndarray]] = {}
        for rank in self.ops:
            if code is None or not len(rank.codes):
                continue
            rows = np.flatnonzero(rank.codes == code)
            if not len(rows):
                continue
            f = rank.profile.op_summary
            op_rows = rank.profile.source.op_rows()
            part = pd.DataFrame({
                "rank": -1 if rank.rank is None else rank.rank,
                "step": np.asarray(op_rows.iteration)[rows],
                "start": (np.asarray(op_rows.start_ns, np.int64)[rows] - self.origin_ns) / 1000.0,
                "duration": pd.to_numeric(f["Task Duration(us)"].iloc[rows], errors="coerce").to_numpy(np.float64),
                "ref": rank.ref0 + rows})
            parts.append(part)
            for c in f.columns:
                if isinstance(c, str) and c.endswith("_ratio"):
                    values = pd.to_numeric(f[c].iloc[rows], errors="coerce").to_numpy(np.float64)
                    ratios.setdefault(c, []).append(values)
        if not parts:
            return {"type": "op", "name": str(name), "count": 0, "instances": [], "ratios": [], "stats": None}
        inst = pd.concat(parts, ignore_index=True).sort_values(["start", "rank"], kind="stable")
        d = inst["duration"].to_numpy()
        stats = {"count": int(len(d)), "total": float(np.nansum(d)), "mean": float(np.nanmean(d)),
                 "min": float(np.nanmin(d)), "max": float(np.nanmax(d))}
        ratio_means = []
        for c, values in ratios.items():
            v = np.concatenate(values)
            if np.isfinite(v).any():
                ratio_means.append([c, float(np.nanmean(v))])
        shown = inst.head(MAX_INSTANCES)
        return {"type": "op", "name": str(name), "count": int(len(inst)), "stats": stats, "ratios": ratio_means,
                "instances": [[int(r), int(s), float(t), float(du), int(ref)] for r, s, t, du, ref in
                              shown[["rank", "step", "start", "duration", "ref"]].itertuples(index=False)]}

    def detail(self, ref: int) -> dict:
        """The row behind a span's reference: (column, value) pairs."""
        return {"type": "detail", "ref": int(ref), "fields": self.tables.details.fields(int(ref))}


def _cluster_step_bounds(cluster: ClusterProfile) -> pd.DataFrame:
    """(step, begin ns, end ns) per step: from its earliest start on any rank to its latest end."""
    parts = [b[["step", "begin", "end"]] for b in cluster.step_bounds().values() if len(b)]
    if not parts:
        return pd.DataFrame({"step": np.zeros(0, np.int64), "begin": np.zeros(0, np.int64),
                             "end": np.zeros(0, np.int64)})
    return pd.concat(parts).groupby("step", sort=True).agg(begin=("begin", "min"), end=("end", "max")).reset_index()


def _own_note(us: float | None, what: str = "") -> str:
    """``own time 8.912 ms/step``, for a rank or group label (empty without a figure)."""
    if us is None:
        return ""
    return f"{what}own time {us / 1000:,.3f} ms/step"
