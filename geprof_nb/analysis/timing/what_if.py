"""What a step would take under a change: the dependency graph re-timed (the model is not re-run).

Knob semantics (shared with the simulator's replay, docs/guide/what_if.md): ``op_speedup`` divides every kernel task
of a matching op (fnmatch on op type or full op name; factors of several patterns multiply) by its factor, in
integer ns rounded half up; ``remove_ops`` makes them 0 ns (a collective: on every rank); ``link_bandwidth``
multiplies a link type's bandwidth (a collective's time on that link is divided by the factor, in proportion to its
HCCL sub-tasks' time on it: an estimate, the latency part is not told apart); ``host_gap_us`` caps every gap in which
the device waits for the host.  Task times then follow the graph: a task starts after its stream's previous task
plus the recorded device gap, a host-launched task no earlier than the host launched it, a wait ends its tail after
the record it waited for.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from fnmatch import translate

import numpy as np
import pandas as pd

from ...cost_model import get_device
from .critical_path import path_segments
from .cross_rank import couple
from .dependency_graph import KERNEL_TYPES, KINDS, StepGraph, Tasks

#: The link types a collective's HCCL sub-tasks name (``hccl_tasks`` Link Type), as what_if spells them.
LINK_TYPES = {"HCCS": "HCCS", "RoCE": "ROCE", "PCIe": "PCIE", "SIO": "SIO"}
EXPLAIN_COLUMNS = ["iteration", "op_name", "kind", "now_ns", "predicted_ns", "delta_ns", "moved"]
PREDICTED_COLUMNS = ["iteration", "now_ns", "predicted_ns", "delta_ns", *(f"{k}_ns" for k in KINDS)]


@dataclass(frozen=True)
class WhatIfChange:
    """A validated what-if change: the keywords of :meth:`Profile.what_if`, as immutable values."""

    op_speedup: tuple[tuple[str, float], ...] | None = None
    remove_ops: tuple[str, ...] | None = None
    link_bandwidth: tuple[tuple[str, float], ...] | None = None
    device: str | None = None
    host_gap_us: float | None = None

    def keywords(self) -> dict:
        """The change as :meth:`Profile.what_if` / ``Profile.replay`` keywords (None ones left out)."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            out[f.name] = dict(value) if f.name in ("op_speedup", "link_bandwidth") else (
                list(value) if f.name == "remove_ops" else value)
        return out


def _factor(what: str, key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what} {key!r}: factor {value!r} must be a finite number > 0")
    return float(value)


def validate(op_speedup: Mapping[str, float] | None = None, remove_ops: Iterable[str] | None = None,
             link_bandwidth: Mapping[str, float] | None = None, device: str | None = None,
             host_gap_us: float | None = None) -> WhatIfChange:
    """The change, each value checked (a ValueError or TypeError names the keyword, the key and what is accepted)."""
    speed = None
    if op_speedup is not None:
        if not isinstance(op_speedup, Mapping):
            raise TypeError(f"op_speedup must be a dict of pattern -> factor, got {type(op_speedup).__name__}")
        speed = tuple((_pattern("op_speedup", k), _factor("op_speedup pattern", k, v)) for k, v in op_speedup.items())
    removed = None
    if remove_ops is not None:
        if isinstance(remove_ops, str) or not isinstance(remove_ops, Iterable):
            raise TypeError(f"remove_ops must be a list of patterns, got {type(remove_ops).__name__}")
        removed = tuple(_pattern("remove_ops", k) for k in remove_ops)
    links = None
    if link_bandwidth is not None:
        if not isinstance(link_bandwidth, Mapping):
            raise TypeError("link_bandwidth must be a dict of link type -> factor, got "
                            f"{type(link_bandwidth).__name__}")
        for k in link_bandwidth:
            if k not in LINK_TYPES:
                raise ValueError(f"link_bandwidth: unknown link type {k!r}; accepted: {', '.join(LINK_TYPES)}")
        links = tuple((k, _factor("link_bandwidth", k, v)) for k, v in link_bandwidth.items())
    if device is not None and (not isinstance(device, str) or not device.strip()):
        raise ValueError(f"device {device!r}: expected a device spec such as 'Ascend910B' or "
                         "'Ascend910B:ai_core_num=20'")
    if device is not None:
        get_device(device)  # the simulator's parser: its ValueError names the preset or the field
    if host_gap_us is not None and (isinstance(host_gap_us, bool) or not isinstance(host_gap_us, (int, float))
                                    or not math.isfinite(host_gap_us) or host_gap_us < 0):
        raise ValueError(f"host_gap_us {host_gap_us!r} must be a finite number >= 0")
    return WhatIfChange(speed, removed, links, device, None if host_gap_us is None else float(host_gap_us))


def _pattern(what: str, key: object) -> str:
    if not isinstance(key, str) or not key:
        raise ValueError(f"{what}: pattern {key!r} must be a non-empty string (fnmatch, matched against op type "
                         "or op name)")
    return key


def matches(pattern: str, tasks: Tasks) -> np.ndarray:
    """Which tasks' op matches ``pattern`` by type or full name (case-sensitive fnmatch), computed per distinct
    name and type."""
    name_of, names = tasks.names
    type_of, types = tasks.types
    match = re.compile(translate(pattern)).match  # fnmatchcase, compiled once
    by_name = np.array([match(n) is not None for n in names], bool)
    by_type = np.array([match(t) is not None and t != "N/A" for t in types], bool)
    return by_name[name_of] | by_type[type_of]


def new_durations(change: WhatIfChange, tasks: Tasks, link_share: Mapping[str, Mapping[str, float]],
                  device_ns: np.ndarray | None = None) -> np.ndarray:
    """Every task's duration under ``change`` (ns).  ``link_share``: per collective op name, the share of its HCCL
    sub-tasks' time on each link type; ``device_ns``: for a device change, every task's duration on the new device
    (:func:`.device_change.device_durations`), which the other knobs then apply to."""
    if change.device is not None and device_ns is None:
        raise ValueError(f"what_if(device={change.device!r}) needs the tasks' durations on that device "
                         "(device_change.device_durations)")
    duration = tasks.end - tasks.start if change.device is None else device_ns
    out = duration.astype(np.int64).copy()
    kernel = np.isin(tasks.task_type, list(KERNEL_TYPES)) & (tasks.kind == "compute")
    if change.op_speedup:
        factor = np.ones(len(tasks))
        for pattern, f in change.op_speedup:
            hit = matches(pattern, tasks)
            if not hit.any():
                raise ValueError(f"op_speedup pattern {pattern!r} matches no op in this run")
            factor[hit] *= f
        sped = kernel & (factor != 1)
        out[sped] = (duration[sped] / factor[sped] + 0.5).astype(np.int64)
    if change.remove_ops:
        for pattern in change.remove_ops:
            hit = matches(pattern, tasks)
            if not hit.any():
                raise ValueError(f"remove_ops pattern {pattern!r} matches no op in this run")
            out[hit & (kernel | (tasks.kind == "communication"))] = 0
    if change.link_bandwidth:
        comm = np.flatnonzero(tasks.kind == "communication")
        for i in comm:
            shares = link_share.get(str(tasks.name[i]), {})
            scale = 1.0 + sum(shares.get(LINK_TYPES[k], 0.0) * (1.0 / f - 1.0) for k, f in change.link_bandwidth)
            out[i] = int(out[i] * scale + 0.5)
    return out


def retime(graph: StepGraph, duration: np.ndarray, host_gap_ns: int | None,
           meet: Mapping[int, tuple[int, int]] | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """(start, finish, step end) of ``graph``'s tasks with ``duration`` (ns, per step task), following its edges.
    ``meet``: per step task that meets another rank's (a send and its receive, :mod:`.cross_rank`), when the other
    end starts and the transfer: the task ends that long after both have started."""
    meet = meet or {}
    n = len(graph)
    start = np.empty(n, np.int64)
    finish = np.empty(n, np.int64)
    pred, gap, host, record, tail = (graph.pred.tolist(), graph.gap.tolist(), graph.host.tolist(),
                                     graph.record.tolist(), graph.tail.tolist())
    recorded, dur = graph.start.tolist(), duration.tolist()
    begin = graph.begin
    s_out, f_out = [0] * n, [0] * n
    for i in graph.order.tolist():
        p = pred[i]
        free = f_out[p] if p >= 0 else begin
        if host[i]:
            release = recorded[i] if host_gap_ns is None else min(recorded[i], free + host_gap_ns)
            base = max(free, release)
        else:
            base = free + gap[i]
        m = record[i]
        s_out[i] = base
        if i in meet:
            other, transfer = meet[i]
            f_out[i] = max(base, other) + transfer
        else:
            f_out[i] = max(base, f_out[m]) + tail[i] if m >= 0 else base + dur[i]
    start[:] = s_out
    finish[:] = f_out
    last = int(graph.finish.max()) if n else begin
    end = (int(finish.max()) if n else begin) + (graph.end - last)
    return start, finish, end


class WhatIf:
    """A change's predicted effect on every step (:attr:`predicted`), what it moved on the critical path
    (:meth:`explain`), and for a simulated run the re-simulation to check it against (:meth:`verify`)."""

    def __init__(self, profile, change: WhatIfChange, tasks: Tasks, graphs: list[StepGraph],
                 link_share: Mapping[str, Mapping[str, float]], device_ns: np.ndarray | None = None) -> None:
        self.profile = profile
        self.change = change
        self.tasks = tasks
        self.graphs = graphs
        #: Every task's duration under the change (ns).
        self.duration = new_durations(change, tasks, link_share, device_ns)
        self.repredict({})
        if tasks.imported:
            self.predicted.attrs["assumptions"] = tasks.assumptions

    def repredict(self, meets: Mapping[int, Mapping[int, tuple[int, int]]]) -> None:
        """Re-time every step with ``meets`` (per iteration, :func:`retime`'s ``meet``): :attr:`predicted`, the new
        paths and :attr:`starts` (per iteration, each step task's predicted start)."""
        tasks, duration = self.tasks, self.duration
        host_gap = None if self.change.host_gap_us is None else int(round(self.change.host_gap_us * 1000))
        kind = tasks.kind
        rows, self._paths, self.starts = [], {}, {}
        for g in self.graphs:
            start, finish, end = retime(g, duration[g.index], host_gap, meets.get(g.iteration))
            segs = path_segments(g, tasks, start, finish, end, kind[g.index])
            self._paths[g.iteration] = (g, segs)
            self.starts[g.iteration] = start
            split = {k: 0 for k in KINDS}
            for s, e, k, _ in segs:
                split[k] += e - s
            rows.append([g.iteration, g.end - g.begin, end - g.begin, end - g.end, *(split[k] for k in KINDS)])
        self.predicted = pd.DataFrame(rows, columns=PREDICTED_COLUMNS).astype(np.int64)

    def explain(self) -> pd.DataFrame:
        """Per step and op (or gap kind): its time on the critical path now and predicted, and the difference;
        ``moved``: onto / off the path / changed.  Largest change first."""
        rows = []
        name = self.tasks.name
        kind = self.tasks.kind
        for it, (g, new) in self._paths.items():
            old = path_segments(g, self.tasks, g.start, g.finish, g.end, kind[g.index])
            def per_op(segs):
                out: dict[tuple[str, str], int] = {}
                for s, e, k, i in segs:
                    key = (str(name[g.index[i]]) if i >= 0 and k != "idle" else f"<{k}>", k)
                    out[key] = out.get(key, 0) + e - s
                return out
            a, b = per_op(old), per_op(new)
            for key in set(a) | set(b):
                now, then = a.get(key, 0), b.get(key, 0)
                if now != then:
                    moved = "onto the path" if not now else "off the path" if not then else "changed"
                    rows.append([it, key[0], key[1], now, then, then - now, moved])
        out = pd.DataFrame(rows, columns=EXPLAIN_COLUMNS)
        return out.sort_values(["iteration", "delta_ns"], key=lambda c: c.abs() if c.name == "delta_ns" else c,
                               ascending=[True, False], kind="stable").reset_index(drop=True)

    def verify(self) -> pd.DataFrame:
        """Re-simulate the run under the change (``profile.replay``) and compare step by step, the k-th step of
        the replay with this run's k-th: iteration (this run's), predicted_ns, simulated_ns, error (relative)."""
        replay = getattr(self.profile, "replay", None)
        if replay is None:
            raise RuntimeError(f"verify() needs a run simulated in this process; this Profile was loaded from "
                               f"{self.profile.path}")
        again = replay(**self.change.keywords())
        simulated = simulated_steps(again)
        if len(simulated) != len(self.predicted):
            raise RuntimeError(f"verify(): the re-simulated run has {len(simulated)} steps, this run "
                               f"{len(self.predicted)}; the steps cannot be paired")
        # paired in order: a model that ran steps before the run numbers them on, a replay from its first
        out = self.predicted[["iteration", "predicted_ns"]].reset_index(drop=True)
        out["simulated_ns"] = simulated.sort_values("iteration")["simulated_ns"].to_numpy(np.int64)
        out["error"] = (out["predicted_ns"] - out["simulated_ns"]) / out["simulated_ns"]
        return out


class ClusterWhatIf(WhatIf):
    """A change on every rank of a cluster: each step's prediction is its slowest rank's (``rank``)."""

    def __init__(self, cluster, per_rank: Mapping[int, WhatIf]) -> None:  # noqa: D107 - no parent state re-timed
        self.profile = cluster
        self.per_rank = dict(per_rank)
        #: Rounds the ranks were re-timed for their sends to meet their receives (:mod:`.cross_rank`).
        self.rounds = couple(self.per_rank, {r: cluster.ranks[r].hccl_tasks for r in self.per_rank})
        self.change = next(iter(self.per_rank.values())).change
        frames = [w.predicted.assign(rank=np.int64(r)) for r, w in self.per_rank.items()]
        every = pd.concat(frames, ignore_index=True)
        pick = every.sort_values(["iteration", "predicted_ns", "rank"], ascending=[True, False, True])
        self.predicted = pick.drop_duplicates("iteration").reset_index(drop=True)[[*PREDICTED_COLUMNS, "rank"]]
        now = every.groupby("iteration")["now_ns"].max()
        self.predicted["now_ns"] = now.loc[self.predicted["iteration"]].to_numpy()
        self.predicted["delta_ns"] = self.predicted["predicted_ns"] - self.predicted["now_ns"]

    def explain(self) -> pd.DataFrame:
        """:meth:`WhatIf.explain` of each step's predicted slowest rank, with its ``rank``."""
        parts = []
        for it, rank in zip(self.predicted["iteration"], self.predicted["rank"]):
            e = self.per_rank[int(rank)].explain()
            parts.append(e[e["iteration"] == it].assign(rank=np.int64(rank)))
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=[*EXPLAIN_COLUMNS, "rank"])


def simulated_steps(profile) -> pd.DataFrame:
    """iteration, simulated_ns (step end - begin) of a Profile, or of a ClusterProfile (its slowest rank per step)."""
    ranks = getattr(profile, "ranks", None)
    profiles = list(ranks.values()) if isinstance(ranks, Mapping) else [profile]
    frames = []
    for p in profiles:
        b = p.source.step_bounds()
        frames.append(pd.DataFrame({"iteration": b["step"].to_numpy(np.int64),
                                    "simulated_ns": (b["end"] - b["begin"]).to_numpy(np.int64)}))
    return pd.concat(frames).groupby("iteration", as_index=False)["simulated_ns"].max()


def link_shares(hccl_tasks: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per collective (its node name, else its op name), the share of its HCCL sub-tasks' time that moves data
    (Size > 0) over each link type: the part a bandwidth change scales (notify waits and latency do not)."""
    if not len(hccl_tasks):
        return {}
    key = "Node" if "Node" in hccl_tasks and hccl_tasks["Node"].notna().all() else "Op Name"
    frame = hccl_tasks.assign(_key=hccl_tasks[key].astype(str), _link=hccl_tasks["Link Type"].astype(str),
                              _moved=np.where(pd.to_numeric(hccl_tasks["Size(Byte)"], errors="coerce").fillna(0) > 0,
                                              hccl_tasks["Duration(us)"], 0.0))
    total = frame.groupby("_key")["Duration(us)"].sum()
    moved = frame.groupby(["_key", "_link"])["_moved"].sum()
    return {op: {link: float(v / total[op]) if total[op] else 0.0 for (_, link), v in moved[[op]].items()}
            for op in total.index}
