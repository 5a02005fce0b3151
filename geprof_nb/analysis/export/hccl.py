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

from ..communication import DEFAULT_GROUP

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


def _transport(tasks: pd.DataFrame) -> np.ndarray:
    """Each sub-task's transport as msprof names it: RDMA, LOCAL, else its link (HCCS, PCIE, SIO)."""
    transport, link = tasks["Transport Type"], tasks["Link Type"]
    return np.where((transport == "RDMA") | (link == "ROCE"), "RDMA",
                    np.where(transport == "LOCAL", "LOCAL", link.astype(str)))


def _transit(tasks: pd.DataFrame) -> pd.DataFrame:
    """The transit sub-tasks with their bandwidth type, size (MB) and time (ms)."""
    name, transport, link = tasks["Task Name"], tasks["Transport Type"], tasks["Link Type"]
    sel = ((name.isin(["Memcpy", "Reduce_Inline"]) & (transport == "SDMA") & (link != "ON_CHIP"))
           | ((name == "RDMASend") & (transport == "RDMA")))
    t = tasks[sel]
    return pd.DataFrame({"op": t["Op Name"].to_numpy(object), "type": _transport(t),
                         "mb": t["Size(Byte)"].to_numpy(float) / 1e6, "ms": t["Duration(us)"].to_numpy(float) / 1e3})


def _bandwidth_entry(mb: np.ndarray, ms: np.ndarray, threshold: float) -> dict:
    size, time = float(mb.sum()), float(ms.sum())
    dist: dict[str, list] = {}
    for m, t in zip(mb.tolist(), ms.tolist()):
        entry = dist.setdefault(str(round(m, 6)), [0, 0.0])
        entry[0] += 1
        entry[1] = round(entry[1] + t, 6)
    return {"Transit Size(MB)": round(size, 6), "Transit Time(ms)": round(time, 6),
            "Bandwidth(GB/s)": round(size / time, 4) if time > 0 else 0.0,
            "Large Packet Ratio": round(float((mb > threshold).mean()), 4) if len(mb) else 0.0,
            "Size Distribution": dist}


def bandwidth_info(transit: pd.DataFrame) -> dict:
    """"Communication Bandwidth Info" of some transit sub-tasks."""
    out = {}
    for kind in BANDWIDTH_TYPES:
        sel = transit["type"].isin(SDMA_LINKS) if kind == "SDMA" else transit["type"] == kind
        out[kind] = _bandwidth_entry(transit["mb"].to_numpy()[sel], transit["ms"].to_numpy()[sel],
                                     LARGE_PACKET_MB[kind])
    return out


def _ratio(a: float, b: float) -> float:
    return round(a / (a + b), 4) if a + b > 0 else 0.0


def _time_info(rows: pd.DataFrame) -> dict:
    """"Communication Time Info" of one op (one row) or their total (ratios recomputed)."""
    values = {k: round(float(np.nan_to_num(rows[k].to_numpy(float)).sum()), 6) for k in TIME_INFO[1:6]}
    info = {"Start Timestamp(us)": float(rows["Start Timestamp(us)"].min()), **values}
    info["Wait Time Ratio"] = _ratio(values["Wait Time(ms)"], values["Transit Time(ms)"])
    info["Synchronization Time Ratio"] = _ratio(values["Synchronization Time(ms)"], values["Transit Time(ms)"])
    if len(rows) == 1:
        for k in ("Wait Time Ratio", "Synchronization Time Ratio"):
            info[k] = float(np.nan_to_num(rows[k].iloc[0]))
    return info


def _kind(op_type: str) -> str:
    low = op_type.lower()
    return "p2p" if "send" in low or "receive" in low else "collective"


def communication_json(ops: pd.DataFrame, tasks: pd.DataFrame, group: str = DEFAULT_GROUP) -> dict:
    """``ops``: communication_time; ``tasks``: hccl_tasks."""
    transit = _transit(tasks)
    by_op = dict(tuple(transit.groupby("op"))) if len(transit) else {}
    empty = transit.iloc[:0]
    out: dict = {}
    for it, step_ops in ops.groupby("Iteration ID", sort=True):
        step = out.setdefault(f"step{int(it)}", {"collective": {}, "p2p": {}})
        for kind in ("collective", "p2p"):
            mine = step_ops[step_ops["OP Type"].astype(str).map(_kind) == kind]
            if mine.empty:
                continue
            for r in range(len(mine)):
                name = str(mine["Op Name"].iloc[r])
                step[kind][f"{name}@{group}"] = {"Communication Time Info": _time_info(mine.iloc[r:r + 1]),
                                                 "Communication Bandwidth Info": bandwidth_info(by_op.get(name, empty))}
            names = set(mine["Op Name"].astype(str))
            step[kind][TOTAL] = {"Communication Time Info": _time_info(mine),
                                 "Communication Bandwidth Info": bandwidth_info(transit[transit["op"].isin(names)])}
    return out


def communication_matrix_json(ops: pd.DataFrame, tasks: pd.DataFrame, ranks: RankMap,
                              group: str = DEFAULT_GROUP) -> dict:
    """Per step and kind, per op: ``<src>-<dst>`` links of its sized sub-tasks, and the ``i-i`` LOCAL link."""
    sized = tasks[tasks["Size(Byte)"] > 0]
    links = pd.DataFrame({"op": sized["Op Name"].to_numpy(object), "src": ranks(sized["Src Rank"].to_numpy()),
                          "dst": ranks(sized["Dst Rank"].to_numpy()), "type": _transport(sized),
                          "mb": sized["Size(Byte)"].to_numpy(float) / 1e6,
                          "ms": sized["Duration(us)"].to_numpy(float) / 1e3})
    by_op = dict(tuple(links.groupby("op"))) if len(links) else {}
    local = f"{ranks.rank}-{ranks.rank}"
    out: dict = {}
    for it, step_ops in ops.groupby("Iteration ID", sort=True):
        step = out.setdefault(f"step{int(it)}", {"collective": {}, "p2p": {}})
        for name, op_type in zip(step_ops["Op Name"].astype(str), step_ops["OP Type"].astype(str)):
            entry = {}
            mine = by_op.get(name)
            if mine is not None:
                for (src, dst, kind), g in mine.groupby(["src", "dst", "type"], sort=True):
                    mb, ms = float(g["mb"].sum()), float(g["ms"].sum())
                    entry[f"{src}-{dst}"] = {"Transport Type": kind, "Transit Size(MB)": round(mb, 6),
                                             "Transit Time(ms)": round(ms, 6),
                                             "Bandwidth(GB/s)": round(mb / ms, 4) if ms > 0 else 0.0, "Op Name": name}
            entry.setdefault(local, {"Transport Type": "LOCAL", "Transit Size(MB)": 0.0, "Transit Time(ms)": 0.0,
                                     "Bandwidth(GB/s)": 0.0, "Op Name": name})
            step[_kind(op_type)][f"{name}@{group}"] = entry
    return out
