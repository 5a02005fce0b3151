"""torch_npu's ``communication.json`` and ``communication_matrix.json`` from a
Profile's collectives (``communication_time``) and their HCCL sub-tasks
(``hccl_tasks``).

* Per step ``step<N>``, per kind (``collective``; ``p2p`` for send/receive),
  each collective as ``<op name>@<group>`` with its "Communication Time Info"
  and "Communication Bandwidth Info", plus the "Total Op Info" msprof-analyze's
  compare requires (msprof_analyze_inputs pitfall 6).
* Bandwidth counts the transit sub-tasks, as ``communication_time`` does:
  Memcpy / Reduce_Inline over SDMA on a real link, RDMASend over RDMA.  Their
  link (HCCS, PCIE, SIO) or RDMA is the transport; SDMA sums HCCS, PCIE and
  SIO (msprof ``combine_sdma_info``).  MB are 1e6 bytes; a packet is large
  above 0.5 MB on RDMA and 32 MB on the others (msprof's thresholds).
* The matrix links every sized sub-task ``<src>-<dst>`` and always has the
  rank's ``i-i`` LOCAL link, by which msprof-analyze maps local ranks to
  global ones (pitfall 8).

``rank`` relabels the ranks: the profiled device becomes ``rank`` of a ring
of the same size, so one profile exported as rank 0 and rank 1 describes two
consistent members of one group.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..tables.communication import DEFAULT_GROUP

BANDWIDTH_TYPES = ("RDMA", "HCCS", "PCIE", "SDMA", "SIO")
SDMA_LINKS = ("HCCS", "PCIE", "SIO")
#: msprof ``*_MESSAGE_SIZE_THRESHOLD`` (MB); SDMA is made of the 32 MB links.
LARGE_PACKET_MB = {"RDMA": 0.5, "HCCS": 32.0, "PCIE": 32.0, "SIO": 32.0, "SDMA": 32.0}
TIME_INFO = ["Start Timestamp(us)", "Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)",
             "Synchronization Time(ms)", "Idle Time(ms)", "Wait Time Ratio", "Synchronization Time Ratio"]
TOTAL = "Total Op Info"


@dataclass(frozen=True)
class RankMap:
    """Recorded ranks -> exported ranks: the profiled device (``recorded``, the rank every
    sub-task involves) becomes ``rank``; the others keep their ring distance from it in a
    group of ``size`` (the number of ranks seen)."""

    recorded: int
    rank: int
    size: int

    @classmethod
    def of(cls, tasks: pd.DataFrame, rank: int) -> RankMap:
        src, dst = tasks["Src Rank"].astype(int).tolist(), tasks["Dst Rank"].astype(int).tolist()
        seen = set(src) | set(dst)
        common = set(seen)
        for s, d in zip(src, dst):
            common &= {s, d}
        return cls(min(common) if common else 0, rank, max(len(seen), 1))

    def __call__(self, ranks: np.ndarray) -> np.ndarray:
        return self.rank - self.rank % self.size + (np.asarray(ranks) - self.recorded + self.rank) % self.size


def _text(tasks: pd.DataFrame, column: str) -> np.ndarray:
    """A text column of hccl_tasks as an object array (Link Type as text): the selections here are
    a few comparisons on a few hundred sub-tasks a step, where each pandas string operation costs
    more than the rows."""
    values = tasks[column].astype(str) if column == "Link Type" else tasks[column]
    return values.to_numpy(object)


def _transport(transport: np.ndarray, link: np.ndarray) -> np.ndarray:
    """Each sub-task's transport as msprof names it: RDMA, LOCAL, else its link (HCCS, PCIE, SIO)
    (``transport``, ``link``: :func:`_text` of Transport Type and Link Type)."""
    return np.where((transport == "RDMA") | (link == "ROCE"), "RDMA", np.where(transport == "LOCAL", "LOCAL", link))


def _transit(tasks: pd.DataFrame) -> pd.DataFrame:
    """The transit sub-tasks with their bandwidth type, size (MB) and time (ms)."""
    name, transport, link = (_text(tasks, c) for c in ("Task Name", "Transport Type", "Link Type"))
    sel = np.flatnonzero((np.isin(name, ["Memcpy", "Reduce_Inline"]) & (transport == "SDMA") & (link != "ON_CHIP"))
                         | ((name == "RDMASend") & (transport == "RDMA")))
    return pd.DataFrame({"op": _text(tasks, "Op Name")[sel], "type": _transport(transport[sel], link[sel]),
                         "mb": tasks["Size(Byte)"].to_numpy(float)[sel] / 1e6,
                         "ms": tasks["Duration(us)"].to_numpy(float)[sel] / 1e3})


def _bandwidth_entry(mb: np.ndarray, ms: np.ndarray, sizes: list[str], threshold: float) -> dict:
    """One type's bandwidth of some transit sub-tasks (``sizes``: their MB as the distribution names them)."""
    if not len(mb):
        return {"Transit Size(MB)": 0.0, "Transit Time(ms)": 0.0, "Bandwidth(GB/s)": 0.0, "Large Packet Ratio": 0.0,
                "Size Distribution": {}}
    size, time = float(mb.sum()), float(ms.sum())
    mbs = mb.tolist()
    dist: dict[str, list] = {}
    for key, t in zip(sizes, ms.tolist()):
        entry = dist.setdefault(key, [0, 0.0])
        entry[0] += 1
        entry[1] = round(entry[1] + t, 6)
    return {"Transit Size(MB)": round(size, 6), "Transit Time(ms)": round(time, 6),
            "Bandwidth(GB/s)": round(size / time, 4) if time > 0 else 0.0,
            "Large Packet Ratio": round(sum(m > threshold for m in mbs) / len(mbs), 4), "Size Distribution": dist}


def _ratio(a: float, b: float) -> float:
    return round(a / (a + b), 4) if a + b > 0 else 0.0


def _kind(op_type: str) -> str:
    low = op_type.lower()
    return "p2p" if "send" in low or "receive" in low else "collective"


class _Groups:
    """Rows of a table grouped by a key, each group's rows in their original order: a stable sort
    once, then every group is a slice (what ``groupby`` gives, without a DataFrame per group)."""

    def __init__(self, keys: np.ndarray) -> None:
        codes, self.uniques = pd.factorize(np.asarray(keys, dtype=object))
        self.order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[self.order], np.arange(len(self.uniques) + 1))
        self.slices = {k: (int(a), int(b)) for k, a, b in zip(self.uniques.tolist(), bounds[:-1], bounds[1:])}

    def rows(self, key) -> np.ndarray:
        """Row positions of ``key``'s group (empty if none)."""
        a, b = self.slices.get(key, (0, 0))
        return self.order[a:b]


class _Transit:
    """The transit sub-tasks (type, MB, ms) grouped by op, with the rows of each bandwidth type marked."""

    def __init__(self, tasks: pd.DataFrame) -> None:
        transit = _transit(tasks)
        types = transit["type"].to_numpy()
        self.mb, self.ms = transit["mb"].to_numpy(), transit["ms"].to_numpy()
        self.sizes = np.array([str(round(m, 6)) for m in self.mb.tolist()], dtype=object)
        self.by_op = _Groups(transit["op"].to_numpy(object))
        self.of_type = {kind: np.isin(types, SDMA_LINKS) if kind == "SDMA" else types == kind
                        for kind in BANDWIDTH_TYPES}

    def bandwidth_info(self, rows: np.ndarray) -> dict:
        """"Communication Bandwidth Info" of transit ``rows``, summed in their order (SDMA of a
        single link: that link's entry again)."""
        out, done = {}, {}
        for kind in BANDWIDTH_TYPES:
            mine = rows[self.of_type[kind][rows]]
            key = (mine.tobytes(), LARGE_PACKET_MB[kind])
            if key not in done:
                done[key] = _bandwidth_entry(self.mb[mine], self.ms[mine], self.sizes[mine].tolist(),
                                             LARGE_PACKET_MB[kind])
            out[kind] = done[key]
        return out


class _TimeInfo:
    """"Communication Time Info" of the ops (rows of communication_time): of one op, or the total
    of several (ratios recomputed)."""

    def __init__(self, ops: pd.DataFrame) -> None:
        self.cols = {k: np.nan_to_num(ops[k].to_numpy(float)) for k in TIME_INFO[1:]}
        self.starts = ops["Start Timestamp(us)"].to_numpy(float)
        self.rounded = {k: [round(x, 6) for x in self.cols[k].tolist()] for k in TIME_INFO[1:6]}
        self.ratios = {k: self.cols[k].tolist() for k in TIME_INFO[6:]}

    def one(self, r: int) -> dict:
        return {"Start Timestamp(us)": float(self.starts[r]), **{k: v[r] for k, v in self.rounded.items()},
                **{k: v[r] for k, v in self.ratios.items()}}

    def total(self, rows: np.ndarray) -> dict:
        if len(rows) == 1:
            return self.one(int(rows[0]))
        values = {k: round(float(self.cols[k][rows].sum()), 6) for k in TIME_INFO[1:6]}
        starts = self.starts[rows]
        starts = starts[~np.isnan(starts)]
        info = {"Start Timestamp(us)": float(starts.min()) if len(starts) else float("nan"), **values}
        info["Wait Time Ratio"] = _ratio(values["Wait Time(ms)"], values["Transit Time(ms)"])
        info["Synchronization Time Ratio"] = _ratio(values["Synchronization Time(ms)"], values["Transit Time(ms)"])
        return info


def _group_of(ops: pd.DataFrame, group: str | np.ndarray) -> np.ndarray:
    """Each op's group: one name for all, or one per op (:meth:`..sources.source.Source.collective_groups`)."""
    if isinstance(group, str):
        return np.full(len(ops), group, dtype=object)
    return np.asarray(group, dtype=object)


def communication_json(ops: pd.DataFrame, tasks: pd.DataFrame, group: str | np.ndarray = DEFAULT_GROUP) -> dict:
    """``ops``: communication_time; ``tasks``: hccl_tasks; ``group``: the ops' communication group, one for
    all or one per op (the ``<op>@<group>`` keys).

    Every number is summed over the same sub-tasks in the same order as a groupby per op would
    (group rows as slices of one stable sort), so the file is the same as op by op, only faster.
    """
    transit = _Transit(tasks)
    times = _TimeInfo(ops)
    groups = _group_of(ops, group)
    names = ops["Op Name"].astype(str).to_numpy(object)
    kinds = np.array([_kind(t) for t in ops["OP Type"].astype(str).tolist()], dtype=object)
    steps = ops["Iteration ID"].to_numpy()
    order = np.argsort(steps, kind="stable")
    out: dict = {}
    for in_step in np.split(order, np.flatnonzero(np.diff(steps[order])) + 1):  # steps in order, their ops in order
        if not len(in_step):
            continue
        step = out.setdefault(f"step{int(steps[in_step[0]])}", {"collective": {}, "p2p": {}})
        for kind in ("collective", "p2p"):
            mine = in_step[kinds[in_step] == kind]
            if not len(mine):
                continue
            for r in mine.tolist():
                name = str(names[r])
                step[kind][f"{name}@{groups[r]}"] = {"Communication Time Info": times.one(r),
                                                 "Communication Bandwidth Info":
                                                     transit.bandwidth_info(transit.by_op.rows(name))}
            # the step's transit rows of these ops, in their order
            rows = np.sort(np.concatenate([transit.by_op.rows(n) for n in set(names[mine].tolist())]))
            step[kind][TOTAL] = {"Communication Time Info": times.total(mine),
                                 "Communication Bandwidth Info": transit.bandwidth_info(rows)}
    return out


def communication_matrix_json(ops: pd.DataFrame, tasks: pd.DataFrame, ranks: RankMap,
                              group: str | np.ndarray = DEFAULT_GROUP) -> dict:
    """Per step and kind, per op: ``<src>-<dst>`` links of its sized sub-tasks, and the ``i-i`` LOCAL link.

    Each op's links are the groups of its sized sub-tasks by (src, dst, type), summed in their
    order (as ``groupby`` does), found as slices of one stable sort instead of a groupby per op.
    """
    sized = np.flatnonzero(tasks["Size(Byte)"].to_numpy() > 0)
    src, dst = ranks(tasks["Src Rank"].to_numpy()[sized]), ranks(tasks["Dst Rank"].to_numpy()[sized])
    types = _transport(_text(tasks, "Transport Type")[sized], _text(tasks, "Link Type")[sized])
    mb, ms = tasks["Size(Byte)"].to_numpy(float)[sized] / 1e6, tasks["Duration(us)"].to_numpy(float)[sized] / 1e3
    by_op = _Groups(_text(tasks, "Op Name")[sized])
    local = f"{ranks.rank}-{ranks.rank}"
    names, op_types = ops["Op Name"].astype(str).tolist(), ops["OP Type"].astype(str).tolist()
    groups = _group_of(ops, group)
    steps = ops["Iteration ID"].to_numpy()
    out: dict = {}
    for r in np.argsort(steps, kind="stable").tolist():  # steps in order, ops in their order within a step
        step = out.setdefault(f"step{int(steps[r])}", {"collective": {}, "p2p": {}})
        name, op_type = names[r], op_types[r]
        entry = {}
        rows = by_op.rows(name)
        if len(rows):
            keys = list(zip(src[rows].tolist(), dst[rows].tolist(), types[rows].tolist()))
            links: dict[tuple, list[int]] = {}
            for k, row in zip(keys, rows.tolist()):
                links.setdefault(k, []).append(row)
            for (s, d, kind) in sorted(links):
                g = np.asarray(links[(s, d, kind)])
                link_mb, link_ms = float(mb[g].sum()), float(ms[g].sum())
                entry[f"{s}-{d}"] = {"Transport Type": kind, "Transit Size(MB)": round(link_mb, 6),
                                     "Transit Time(ms)": round(link_ms, 6),
                                     "Bandwidth(GB/s)": round(link_mb / link_ms, 4) if link_ms > 0 else 0.0,
                                     "Op Name": name}
        entry.setdefault(local, {"Transport Type": "LOCAL", "Transit Size(MB)": 0.0, "Transit Time(ms)": 0.0,
                                 "Bandwidth(GB/s)": 0.0, "Op Name": name})
        step[_kind(op_type)][f"{name}@{groups[r]}"] = entry
    return out
