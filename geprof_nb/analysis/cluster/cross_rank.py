"""Cross-rank tables of a cluster, from the per-rank tables stacked with a ``Rank`` column.

One module for both engines (:mod:`.profile` with pandas, :mod:`.dask_engine` with Dask):
every function here takes the stacked tables and returns a pandas DataFrame with fixed
columns, dtypes and row order, so the two engines give equal frames.  The functions whose
input can be large (the HCCL sub-tasks: ~50 per collective execution per rank) are split
in two: a *reduction* (``link_totals``; ``rank_step_wait_totals``, of the collectives' table)
written with the part of the DataFrame API that pandas and ``dask.dataframe`` share (filter,
assign, groupby-sum / count), which Dask can run on its workers, and a *finish* on the small
reduced frame.

Definitions (times in us unless a column says ms):

* ``cluster_step_trace_time``: msprof-analyze's ``cluster_step_trace_time.csv``: every
  rank's ``step_trace_time.csv`` rows with ``Type`` = ``rank`` and ``Index`` = the rank, rank by
  rank (msprof-analyze ``StepTraceTimeAnalysis``; the ``stage`` rows it adds for pipeline
  stages need p2p groups, which a data-parallel run has none of).
* ``rank_step_wait``: per rank and step, the collectives' elapse / transit / wait /
  synchronization time summed (communication.json's split, :mod:`..tables.communication`).
* ``slow_ranks``: per rank, the mean per step of step time, Computing, Communication(Not
  Overlapped), Free and collective wait, over the rank's whole step periods (``Steps`` of them;
  :func:`whole_step_periods`: a first step spans only itself, so a stall before every step would
  count one step short) less the cluster's outlier steps (a step far longer than the median one on
  any rank, :mod:`..tables.step_split`: a one-off stall is not a per-step mean), as Profile.advise counts
  steps.  With synchronised collectives every rank's step
  takes as long as the slowest one's, and the others spend the difference waiting inside
  collectives, so step time alone does not find the slow rank.  ``Own Time`` does: step time
  minus the communication no compute hides, i.e. Computing + Free, what the step would take if
  communication were free.  It grows with whatever makes a rank slow (its kernels, host gaps, a
  stalled data loader), and not with waiting for others or with a slow link (both are
  communication).  Ranked by Own Time, with the ratio and deviation to the median rank, a
  z-score, which part explains the deviation (``Bound``: Computing or Free), and how often the
  rank arrived last at a collective (msprof-analyze's slow_rank recipe votes the same way).
* ``communication_matrix``: per (Src Rank, Dst Rank, Link Type, Transport Type), the transit
  sub-tasks (msprof-analyze's definition, as in :mod:`..tables.communication`: Memcpy / Reduce_Inline
  over SDMA on a real link, RDMASend over RDMA; each recorded once, by the sending rank)
  summed: count, bytes, time, bandwidth (decimal GB/s = bytes / ns, as msprof).  torch_npu runs
  record no sub-tasks but each rank's ``communication_matrix.json``: its links are summed the same
  way (:func:`recorded_link_totals`; ``Tasks`` then counts collective executions, not sub-tasks).
* ``slow_links``: matrix rows whose bandwidth is below ``1 - threshold`` of the median of their
  link type (HCCS inside a node, ROCE between nodes differ by design).
* ``communication_time``: every rank's ``communication_time`` (one row per collective
  execution), ``Rank`` first.
* ``stragglers``: per collective execution (Op Name and Iteration ID, the same on every rank
  of the group), the rank that arrived last (arrival = the collective's start on that rank,
  ranks share one clock) and by how much: ``Late By`` is its arrival minus the median
  arrival, ``Spread`` last minus first arrival, ``Wait Caused`` what all ranks together waited
  for it (sum of last arrival minus each arrival).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..tables.breakdown import STEP_TRACE_TIME, step_periods
from ..tables.communication import COMMUNICATION_TIME

#: msprof-analyze ``cluster_step_trace_time.csv`` (without the DP/PP/TP Index it adds when
#: profiler_metadata.json carries distributed_args).
CLUSTER_STEP_TRACE_TIME = ["Step", "Type", "Index", *STEP_TRACE_TIME[2:]]
STEP_PARTS = ["Computing", "Communication(Not Overlapped)", "Free"]
RANK_STEP_WAIT = ["Rank", "Step", "Collectives", "Elapse Time(us)", "Transit Time(us)", "Wait Time(us)",
                  "Synchronization Time(us)"]
SLOW_RANKS = ["Rank", "Steps", "Step Time(us)", "Computing(us)", "Communication(Not Overlapped)(us)", "Free(us)",
              "Wait Time(us)", "Own Time(us)", "Median Own Time(us)", "Deviation(us)", "Own Time Ratio",
              "Computing Ratio", "Z-Score", "Bound", "Last Arrivals", "Slow"]
COMMUNICATION_MATRIX = ["Src Rank", "Dst Rank", "Link Type", "Transport Type", "Tasks", "Size(Byte)",
                        "Transit Time(us)", "Bandwidth(GB/s)"]
SLOW_LINKS = [*COMMUNICATION_MATRIX, "Median Bandwidth(GB/s)", "Bandwidth Ratio", "Time Lost(us)"]
CLUSTER_COMMUNICATION_TIME = ["Rank", *COMMUNICATION_TIME]
STRAGGLERS = ["Op Name", "OP Type", "Iteration ID", "Ranks", "First Rank", "First Arrival(us)", "Last Rank",
              "Last Arrival(us)", "Median Arrival(us)", "Late By(us)", "Spread(us)", "Wait Caused(us)"]

#: A rank is slow when its own time (Computing + Free) exceeds the median rank's by this share: msprof-analyze's
#: slow rank and slow link checks use a 5% gap (their ``RATIO_THRESHOLD``).
SLOW_RANK_THRESHOLD = 0.05
#: A link is slow when its bandwidth is below the median of its link type by this share: link
#: bandwidths of one type vary by a few percent with message sizes, a fifth is a fault.
SLOW_LINK_THRESHOLD = 0.20
#: Columns of the per-rank tables the cross-rank analysis reads (all the Dask engine loads).
HCCL_COLUMNS = ["Task Name", "Src Rank", "Dst Rank", "Transport Type", "Link Type", "Size(Byte)", "Duration(us)"]
#: Text columns: pandas' default string dtype (``str`` in pandas 3, object holding str before).
STR = pd.Series(["x"]).dtype
_MS = ["Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)", "Synchronization Time(ms)"]


def _typed(frame: pd.DataFrame, columns: list[str], dtypes: dict[str, Any]) -> pd.DataFrame:
    """``frame`` with exactly ``columns``, the given dtypes (text as pandas' ``str``, whatever an
    engine read it as) and a fresh index: both engines' results compare equal."""
    out = frame.reindex(columns=columns).reset_index(drop=True)
    for c in columns:
        want = dtypes.get(c, np.float64)
        if want is str:
            out[c] = out[c].astype(STR)
        elif out[c].dtype != want:
            out[c] = out[c].astype(want)
    return out


def _group_sum(frame, keys: list[str]):
    """``frame.groupby(keys).sum()`` for pandas and Dask frames.  A reduced table is small (one row
    per rank and step, or per link), so Dask combines the partitions' sums into one partition
    (``split_out=1``) rather than shuffling them between workers."""
    grouped = frame.groupby(keys)
    return grouped.sum(split_out=1) if hasattr(frame, "npartitions") else grouped.sum()


def _empty(columns: list[str], dtypes: dict[str, Any]) -> pd.DataFrame:
    return _typed(pd.DataFrame(columns=columns), columns, dtypes)


# ------------------------------------------------------------------ step tables
_CSTT_TYPES = {"Step": np.int64, "Type": str, "Index": np.int64}


def cluster_step_trace_time(step_breakdown: pd.DataFrame) -> pd.DataFrame:
    """msprof-analyze's ``cluster_step_trace_time.csv`` from the stacked step_breakdown
    (``Rank`` + torch_npu ``step_trace_time.csv`` columns): rank by rank, step by step."""
    if step_breakdown.empty:
        return _empty(CLUSTER_STEP_TRACE_TIME, _CSTT_TYPES)
    sb = step_breakdown.sort_values(["Rank", "Step"], kind="stable")
    out = pd.DataFrame({"Step": sb["Step"].to_numpy(), "Type": "rank", "Index": sb["Rank"].to_numpy()})
    for c in CLUSTER_STEP_TRACE_TIME[3:]:
        out[c] = sb[c].to_numpy(np.float64) if c in sb.columns else 0.0
    return _typed(out, CLUSTER_STEP_TRACE_TIME, _CSTT_TYPES)


def rank_step_wait_totals(communication_time):
    """Reduction (pandas or Dask): per (Rank, Iteration ID) the count and sums of the collectives'
    ms columns.  Executions without sub-task data (NaN) count as zero wait and transit."""
    ct = communication_time[["Rank", "Iteration ID", *_MS]].fillna(0.0)
    ct = ct.assign(Collectives=1)
    return _group_sum(ct, ["Rank", "Iteration ID"])


def rank_step_wait(totals: pd.DataFrame) -> pd.DataFrame:
    """Finish of :func:`rank_step_wait_totals`: one row per rank and step, times in us."""
    types = {"Rank": np.int64, "Step": np.int64, "Collectives": np.int64}
    if totals.empty:
        return _empty(RANK_STEP_WAIT, types)
    t = totals.reset_index().sort_values(["Rank", "Iteration ID"], kind="stable")
    out = pd.DataFrame({"Rank": t["Rank"].to_numpy(), "Step": t["Iteration ID"].to_numpy(),
                        "Collectives": t["Collectives"].to_numpy()})
    for ms in _MS:
        out[ms.replace("(ms)", "(us)")] = t[ms].to_numpy(np.float64) * 1000.0
    return _typed(out, RANK_STEP_WAIT, types)


def rank_step(cstt: pd.DataFrame, wait: pd.DataFrame, metric: str) -> pd.DataFrame:
    """A rank x step matrix (index Rank, columns Step) of a cluster_step_trace_time column
    (``Stage`` is the step time) or of a rank_step_wait column (``Wait Time(us)``, ...)."""
    if metric in wait.columns and metric not in ("Rank", "Step"):
        frame, rank = wait, "Rank"
    elif metric in cstt.columns and metric not in ("Step", "Type", "Index"):
        frame, rank = cstt[cstt["Type"] == "rank"], "Index"
    else:
        choices = [c for c in (*CLUSTER_STEP_TRACE_TIME[3:], *RANK_STEP_WAIT[2:])]
        raise KeyError(f"no rank x step metric {metric!r}; accepted: {', '.join(choices)}")
    out = frame.pivot_table(index=rank, columns="Step", values=metric, aggfunc="sum")
    out.index.name, out.columns.name = "Rank", "Step"
    return out.astype(np.float64)


def whole_step_periods(cstt: pd.DataFrame, bounds: dict[int, pd.DataFrame]) -> pd.DataFrame:
    """The ``rank`` rows of cluster_step_trace_time whose window is a whole step period, rank by rank
    (:func:`..tables.breakdown.step_periods` of the rank's rows and step ``bounds``; a rank without bounds
    drops its first row, as a Profile without them does)."""
    rows = cstt[cstt["Type"] == "rank"]
    none = pd.DataFrame(columns=["step", "begin", "end"])
    parts = [step_periods(g, bounds.get(int(r), none)) for r, g in rows.groupby("Index", sort=False)]
    return pd.concat(parts) if parts else rows


def slow_ranks(periods: pd.DataFrame, wait: pd.DataFrame, stragglers_: pd.DataFrame,
               threshold: float = SLOW_RANK_THRESHOLD, stages: dict[int, int] | None = None) -> pd.DataFrame:
    """Ranks by own time (Computing + Free per step), slowest first (see the module docstring):
    means over ``periods`` (the :func:`whole_step_periods` of cluster_step_trace_time, without the outlier
    steps), the collective wait over the same ranks' steps.  ``stages`` (rank -> pipeline stage): each rank is
    compared with the median rank of its own stage (stages run different layers, and a stage's pipeline
    bubble is Free time every rank of it has)."""
    types = {"Rank": np.int64, "Steps": np.int64, "Bound": str, "Last Arrivals": np.int64, "Slow": bool}
    rows = periods[periods["Type"] == "rank"]
    if rows.empty:
        return _empty(SLOW_RANKS, types)
    per = rows.groupby("Index").agg(Steps=("Step", "count"), Stage=("Stage", "mean"),
                                    **{p: (p, "mean") for p in STEP_PARTS})
    counted = pd.MultiIndex.from_arrays([rows["Index"], rows["Step"]])
    mine = wait[pd.MultiIndex.from_arrays([wait["Rank"], wait["Step"]]).isin(counted)] if len(wait) else wait
    waits = mine.groupby("Rank")["Wait Time(us)"].sum() if len(mine) else pd.Series(dtype=np.float64)
    wait_per_step = (waits.reindex(per.index).fillna(0.0) / per["Steps"]).to_numpy()
    own = per["Stage"].to_numpy() - per["Communication(Not Overlapped)"].to_numpy()
    stage = np.array([(stages or {}).get(int(r), 0) for r in per.index], np.int64)

    def medians(values: np.ndarray) -> np.ndarray:
        """Each rank's median of ``values`` over the ranks of its stage (all ranks without stages)."""
        return pd.Series(values).groupby(stage).transform("median").to_numpy(float)

    median = medians(own)
    std = float(own.std())

    def ratio(values: np.ndarray) -> np.ndarray:
        mid = medians(values)
        return np.where(mid > 0, values / np.where(mid > 0, mid, 1.0), 1.0)

    # the part of the own time furthest above the median rank's explains the rank's deviation
    own_parts = ["Computing", "Free"]
    excess = np.stack([per[p].to_numpy() - medians(per[p].to_numpy()) for p in own_parts], axis=1)
    bound = np.array(own_parts, dtype=object)[np.argmax(excess, axis=1)]
    last = (stragglers_[stragglers_["Spread(us)"] > 0]["Last Rank"].value_counts()
            if len(stragglers_) else pd.Series(dtype=np.int64))
    out = pd.DataFrame({
        "Rank": per.index.to_numpy(), "Steps": per["Steps"].to_numpy(), "Step Time(us)": per["Stage"].to_numpy(),
        "Computing(us)": per["Computing"].to_numpy(),
        "Communication(Not Overlapped)(us)": per["Communication(Not Overlapped)"].to_numpy(),
        "Free(us)": per["Free"].to_numpy(), "Wait Time(us)": wait_per_step, "Own Time(us)": own,
        "Median Own Time(us)": median, "Deviation(us)": own - median, "Own Time Ratio": ratio(own),
        "Computing Ratio": ratio(per["Computing"].to_numpy()),
        "Z-Score": (own - own.mean()) / std if std > 0 else np.zeros(len(own)),
        "Bound": bound, "Last Arrivals": last.reindex(per.index).fillna(0).to_numpy(np.int64),
    })
    out["Bound"] = out["Bound"].where(out["Deviation(us)"] > 0, "-")
    out["Slow"] = out["Own Time Ratio"] > 1 + threshold
    out = out.sort_values(["Own Time(us)", "Rank"], ascending=[False, True], kind="stable")
    return _typed(out, SLOW_RANKS, types)


# ----------------------------------------------------------- communication tables
def link_totals(hccl_tasks):
    """Reduction (pandas or Dask): the transit sub-tasks between two ranks, per (Src Rank,
    Dst Rank, Link Type, Transport Type): count, bytes and time."""
    t = hccl_tasks[HCCL_COLUMNS]
    name, transport = t["Task Name"], t["Transport Type"]
    sdma = (name.isin(["Memcpy", "Reduce_Inline"]) & (transport == "SDMA") & (t["Link Type"] != "ON_CHIP"))
    transit = sdma | ((name == "RDMASend") & (transport == "RDMA"))
    t = t[transit & (t["Size(Byte)"] > 0) & (t["Src Rank"] != t["Dst Rank"])]
    t = t.assign(Tasks=1)[["Src Rank", "Dst Rank", "Link Type", "Transport Type", "Tasks", "Size(Byte)",
                           "Duration(us)"]]
    return _group_sum(t, ["Src Rank", "Dst Rank", "Link Type", "Transport Type"])


#: msprof-analyze (``BaseAnalysis.check_add_op``) leaves out entries that are statistics of others
#: (torch_npu's ``<type>-top1``, ``-middle``, ``-bottom1``) and sums the rest, ``<type>-total`` included.
_STATISTIC_ENTRY = "top|middle|bottom"
_LINK_KEYS = ["Src Rank", "Dst Rank", "Link Type", "Transport Type"]


def recorded_link_totals(links: pd.DataFrame) -> pd.DataFrame:
    """:func:`link_totals` of the ranks' ``communication_matrix.json`` (stacked, ``Rank`` first;
    :data:`..tables.communication.COMMUNICATION_MATRIX_LINKS`), as msprof-analyze's cluster sums them: a
    group's local rank ``i`` is the rank whose file has the ``i-i`` link (links it cannot map are left
    out), the entries that are statistics of others are left out, and every sized link between two
    ranks counts, one task per entry (the file has no sub-task count).  The file names a link by its
    link type (HCCS, PCIE, SIO: SDMA transfers) or ``RDMA`` (over ROCE), as msprof does."""
    if links.empty:
        return pd.DataFrame(columns=["Tasks", "Size(Byte)", "Duration(us)"],
                            index=pd.MultiIndex.from_arrays([[]] * 4, names=_LINK_KEYS))
    own = links[links["Src Rank"] == links["Dst Rank"]].drop_duplicates(["Group", "Src Rank"])
    to_global = own.set_index(["Group", "Src Rank"])["Rank"]
    name = links["Op Name"].astype(str)
    counted = ~name.str.contains(_STATISTIC_ENTRY) | name.str.contains("total")
    t = links[counted & (links["Src Rank"] != links["Dst Rank"]) & (links["Transit Size(MB)"] > 0)
              & (links["Transport Type"].astype(str) != "LOCAL")]
    src = to_global.reindex(pd.MultiIndex.from_arrays([t["Group"], t["Src Rank"]])).to_numpy()
    dst = to_global.reindex(pd.MultiIndex.from_arrays([t["Group"], t["Dst Rank"]])).to_numpy()
    mapped = ~(pd.isna(src) | pd.isna(dst))
    t, src, dst = t[mapped], src[mapped], dst[mapped]
    kind = t["Transport Type"].astype(str).to_numpy(object)
    rdma = kind == "RDMA"
    out = pd.DataFrame({
        "Src Rank": src.astype(np.int64), "Dst Rank": dst.astype(np.int64),
        "Link Type": np.where(rdma, "ROCE", kind).astype(object),
        "Transport Type": np.where(rdma, "RDMA", "SDMA").astype(object),
        "Tasks": np.ones(len(t), np.int64),
        "Size(Byte)": np.rint(t["Transit Size(MB)"].to_numpy(np.float64) * 1e6).astype(np.int64),
        "Duration(us)": t["Transit Time(ms)"].to_numpy(np.float64) * 1000.0})
    return out.groupby(_LINK_KEYS).sum()


def with_recorded_links(totals: pd.DataFrame, recorded: pd.DataFrame) -> pd.DataFrame:
    """:func:`link_totals` of the sub-tasks plus :func:`recorded_link_totals` (ranks have one or the other)."""
    if recorded.empty:
        return totals
    if totals.empty:
        return recorded
    return pd.concat([totals, recorded]).groupby(level=_LINK_KEYS).sum()


_MATRIX_TYPES = {"Src Rank": np.int64, "Dst Rank": np.int64, "Link Type": str, "Transport Type": str,
                 "Tasks": np.int64, "Size(Byte)": np.int64}


def communication_matrix(totals: pd.DataFrame) -> pd.DataFrame:
    """Finish of :func:`link_totals`: one row per link, by source then destination rank."""
    if totals.empty:
        return _empty(COMMUNICATION_MATRIX, _MATRIX_TYPES)
    t = totals.reset_index()
    for c in ("Link Type", "Transport Type"):
        t[c] = t[c].astype(str)
    t = t.sort_values(["Src Rank", "Dst Rank", "Link Type", "Transport Type"], kind="stable")
    us = t["Duration(us)"].to_numpy(np.float64)
    size = t["Size(Byte)"].to_numpy(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        bandwidth = np.where(us > 0, size / (us * 1000.0), 0.0)
    out = t.rename(columns={"Duration(us)": "Transit Time(us)"}).assign(**{"Bandwidth(GB/s)": bandwidth})
    return _typed(out, COMMUNICATION_MATRIX, _MATRIX_TYPES)


def slow_links(matrix: pd.DataFrame, threshold: float = SLOW_LINK_THRESHOLD) -> pd.DataFrame:
    """Links below ``1 - threshold`` of their link type's median bandwidth, slowest first.
    ``Time Lost`` is the link's transit time beyond what the median bandwidth needs."""
    if matrix.empty:
        return _empty(SLOW_LINKS, _MATRIX_TYPES)
    median = matrix.groupby("Link Type")["Bandwidth(GB/s)"].transform("median").to_numpy(np.float64)
    bw = matrix["Bandwidth(GB/s)"].to_numpy(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(median > 0, bw / median, 1.0)
        needed = np.where(median > 0, matrix["Size(Byte)"].to_numpy(np.float64) / (median * 1000.0), 0.0)
    out = matrix.assign(**{"Median Bandwidth(GB/s)": median, "Bandwidth Ratio": ratio,
                           "Time Lost(us)": matrix["Transit Time(us)"].to_numpy(np.float64) - needed})
    out = out[out["Bandwidth Ratio"] < 1 - threshold]
    out = out.sort_values(["Bandwidth Ratio", "Src Rank", "Dst Rank"], kind="stable")
    return _typed(out, SLOW_LINKS, _MATRIX_TYPES)


_CT_TYPES = {"Rank": np.int64, "Op Name": str, "OP Type": str, "Iteration ID": np.int64}


def cluster_communication_time(communication_time: pd.DataFrame) -> pd.DataFrame:
    """Every rank's collectives (``Rank`` first), rank by rank, each rank's in time order."""
    if communication_time.empty:
        return _empty(CLUSTER_COMMUNICATION_TIME, _CT_TYPES)
    ct = communication_time.sort_values(["Rank", "Start Timestamp(us)"], kind="stable")
    return _typed(ct, CLUSTER_COMMUNICATION_TIME, _CT_TYPES)


def stragglers(communication_time: pd.DataFrame) -> pd.DataFrame:
    """Per collective execution seen on at least two ranks: the last arrival and by how much
    (see the module docstring), in time order."""
    types = {"Op Name": str, "OP Type": str, "Iteration ID": np.int64, "Ranks": np.int64,
             "First Rank": np.int64, "Last Rank": np.int64}
    ct = communication_time[["Rank", "Op Name", "OP Type", "Iteration ID", "Start Timestamp(us)"]]
    if ct.empty:
        return _empty(STRAGGLERS, types)
    ct = ct.astype({"Op Name": str, "OP Type": str}).sort_values(["Op Name", "Iteration ID", "Rank"],
                                                                      kind="stable")
    start = "Start Timestamp(us)"
    g = ct.groupby(["Op Name", "Iteration ID"], sort=False)
    # differences before sums: arrivals are ~1.8e15 us, a sum of 1,000 of them loses whole us
    behind = g[start].transform("max") - ct[start]
    first = ct.loc[g[start].idxmin()].set_index(["Op Name", "Iteration ID"])
    last = ct.loc[g[start].idxmax()].set_index(["Op Name", "Iteration ID"])
    agg = g.agg(Ranks=("Rank", "count"), Median=(start, "median"))
    caused = behind.groupby([ct["Op Name"], ct["Iteration ID"]], sort=False).sum()
    out = pd.DataFrame({
        "OP Type": last["OP Type"], "Ranks": agg["Ranks"], "First Rank": first["Rank"],
        "First Arrival(us)": first[start], "Last Rank": last["Rank"], "Last Arrival(us)": last[start],
        "Median Arrival(us)": agg["Median"],
    })
    out["Late By(us)"] = out["Last Arrival(us)"] - out["Median Arrival(us)"]
    out["Spread(us)"] = out["Last Arrival(us)"] - out["First Arrival(us)"]
    out["Wait Caused(us)"] = caused
    out = out[out["Ranks"] >= 2].reset_index()
    out = out.sort_values(["First Arrival(us)", "Iteration ID", "Op Name"], kind="stable")
    return _typed(out, STRAGGLERS, types)
