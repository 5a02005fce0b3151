"""Collective communication tables: msprof's ``communication_statistic``, the HCCL
sub-tasks of every collective execution, and msprof-analyze's per-op time split.

The collective executions are op_summary's ``COMMUNICATION`` rows (their span is
the op's HWTS task); the sub-tasks are ``hccl_task`` records joined to them by
(connection id, iteration).

Names, as msprof prints them:

* ``OP Type`` is the HCCL op name msprof reports, e.g. ``hcom_allReduce_``,
  ``hcom_allGather_``, ``hcom_reduceScatter_``, ``hcom_broadcast_`` (these four
  appear in msprof's own communication_statistic test data).  GE op types
  ``Hcom<Name>`` map to ``hcom_<name>_`` with the first letter lower-cased; any
  other type is kept as it is.
* ``Op Name`` is msprof's collective name ``<OP Type>_<last 3 chars of the group>_<index>_<execution>``
  (``HcclCalculator.update_op_name_by_group_name``): ``index`` counts the group's
  collectives in time order over the collection, ``execution`` (from 1) the
  executions of the same op task; e.g. ``hcom_allReduce__oup_0_1`` in ``hccl_world_group``.
  The raw data does not carry the group, so it is a parameter.

Time split (msprof-analyze ``CommunicationParser.op_time_parser``): transit is
the time of ``Memcpy``/``Reduce_Inline`` over SDMA on a link other than
``ON_CHIP`` (local copies do not count) plus ``RDMASend`` over RDMA; wait is
``Notify_Wait`` time; synchronization is the wait before the first transit;
idle = elapse - transit - wait.  msprof-analyze takes unions of intervals; on
one plane the sub-tasks do not overlap, so the sums here are the same.
Bandwidths are decimal, as msprof's: GB/s = bytes / ns, MB = 1e6 bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...prof.rawdata import LinkType, RtTaskType, TransportType
from ..rundir import RunDir
from .indexing import take_records
from .summary import NA, OpRows, op_rows
from .text_columns import TextValues, text_array

COMMUNICATION_STATISTIC = ["Device_id", "OP Type", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)",
                           "Max Time(us)", "Ratio(%)"]
HCCL_TASKS = ["Op Name", "Node", "OP Type", "Iteration ID", "Task Name", "Plane ID", "Start Time(us)",
              "Duration(us)", "Size(Byte)", "Src Rank", "Dst Rank", "Transport Type", "Link Type",
              "Bandwidth(GB/s)", "Stream ID"]
#: Keys of communication.json's "Communication Time Info", after the op's identity.
COMMUNICATION_TIME = ["Op Name", "OP Type", "Iteration ID", "Start Timestamp(us)", "Elapse Time(ms)",
                      "Transit Time(ms)", "Wait Time(ms)", "Synchronization Time(ms)", "Idle Time(ms)",
                      "Wait Time Ratio", "Synchronization Time Ratio"]
#: torch_npu's communication_matrix.json flattened: one row per step, op entry (``<op>@<group>``) and
#: ``<src>-<dst>`` link, in the file's local ranks, transport names and units.
COMMUNICATION_MATRIX_LINKS = ["Iteration ID", "Op Name", "Group", "Src Rank", "Dst Rank", "Transport Type",
                              "Transit Size(MB)", "Transit Time(ms)"]
DEFAULT_GROUP = "hccl_world_group"
_TRANSPORT_NAMES = {int(t): t.name for t in TransportType}
_LINK_NAMES = {int(t): t.name for t in LinkType}


#: The HCCL op types whose msprof name is not the GE type's camel case (HCCL's ``PROF_OP_NAME_V2``).
_LOWER_CASE_NAMES = {"HcomAllToAll": "hcom_alltoall_", "HcomAllToAllV": "hcom_alltoallv_",
                     "HcomAllToAllVC": "hcom_alltoallvc_"}


def hccl_op_type(op_type: str) -> str:
    """msprof's HCCL op type for a GE collective type (``HcomAllReduce`` -> ``hcom_allReduce_``,
    ``HcomAllToAllV`` -> ``hcom_alltoallv_``)."""
    if op_type in _LOWER_CASE_NAMES:
        return _LOWER_CASE_NAMES[op_type]
    if op_type.startswith("Hcom") and len(op_type) > 4:
        return f"hcom_{op_type[4].lower()}{op_type[5:]}_"
    return op_type


def _rows(run: RunDir, device_id: int, rows: OpRows | None) -> OpRows:
    return rows if rows is not None else op_rows(run, device_id)


def _comm_ops(run: RunDir, device_id: int, rows: OpRows, group: str) -> pd.DataFrame:
    """One row per collective execution, in time order: name, node, type, iteration, connection, span (ns).

    Collectives are the HCCL tasks of the task track, so they are found at ``task_trace`` l0 too,
    where op_summary has no Task Type or OP Type; the type then comes from the node's name
    (GE names collective nodes after their type, e.g. ``gradients/HcomAllReduce_0``).
    """
    f = rows.frame
    track = run.load("task_track", device_id)
    hccl = track["connection_id"][track["task_type"] == RtTaskType.HCCL].astype(np.int64)
    sel = np.isin(rows.connection_id, hccl) | (f["Task Type"] == "COMMUNICATION").to_numpy()
    conn = rows.connection_id[sel].astype(np.int64)
    known = _selected_texts(f["OP Type"], sel)
    ge_types = collective_op_types(f[["OP Type", "Op Name"]][sel]).tolist() if (known == NA).any() else known.tolist()
    hccl_types = {t: hccl_op_type(t) for t in set(ge_types)}
    op_type = np.array([hccl_types[t] for t in ge_types], dtype=object)
    suffix = group[-3:]
    name = [f"{t}_{suffix}_{index}_{execution}"
            for index, (t, execution) in enumerate(zip(op_type.tolist(), _executions(conn).tolist()))]
    start = rows.start_ns[sel]
    return pd.DataFrame({
        "name": np.array(name, dtype=object), "node": _selected_texts(f["Op Name"], sel),
        "type": op_type, "iteration": rows.iteration[sel], "conn": conn, "start": start,
        "dur": np.rint(f["Task Duration(us)"].to_numpy()[sel] * 1000).astype(np.int64),
    })


def _selected_texts(column: pd.Series, sel: np.ndarray) -> np.ndarray:
    """``column[sel].astype(str)`` as an object array; a categorical of strings (op_summary's text columns)
    read through its codes, without building the selected Series."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        categories = column.cat.categories.to_numpy(object)
        codes = column.cat.codes.to_numpy()[sel]
        if pd.api.types.infer_dtype(categories, skipna=False) == "string" and not (codes < 0).any():
            return categories[codes] if len(categories) else np.zeros(0, object)
    return column[sel].astype(str).to_numpy(object)


def _executions(conn: np.ndarray) -> np.ndarray:
    """Which execution (from 1) of its op task each row is: rows of the same ``conn`` counted in order."""
    order = np.argsort(conn, kind="stable")
    ordered = conn[order]
    first = np.r_[True, ordered[1:] != ordered[:-1]] if len(conn) else np.zeros(0, bool)
    positions = np.arange(len(conn))
    out = np.empty(len(conn), np.int64)
    out[order] = positions - np.maximum.accumulate(np.where(first, positions, 0)) + 1
    return out


@dataclass
class CollectiveTasks:
    """hccl_task records in time order, each with its sub-task name (a categorical: each distinct name
    once) and the position of its collective execution in ``ops`` (-1 if none): what hccl_tasks and
    communication_time share."""

    ops: pd.DataFrame
    rec: np.ndarray
    task: pd.Categorical
    pos: np.ndarray


def collective_tasks(run: RunDir, device_id: int = 0, rows: OpRows | None = None,
                     group: str = DEFAULT_GROUP) -> CollectiveTasks:
    """The collective executions and the hccl_task records joined to them by (connection, iteration)."""
    ops = _comm_ops(run, device_id, _rows(run, device_id, rows), group)
    rec = run.load("hccl_task", device_id)
    rec = take_records(rec, np.argsort(rec["start"], kind="stable"))
    op_key = (ops["conn"].to_numpy() << 32) | ops["iteration"].to_numpy()
    keys, first = np.unique(op_key, return_index=True)
    rec_key = (rec["connection_id"].astype(np.int64) << 32) | rec["iteration"].astype(np.int64)
    pos = np.full(len(rec), -1, np.int64)
    if len(keys):
        at = np.minimum(np.searchsorted(keys, rec_key), len(keys) - 1)
        hit = keys[at] == rec_key
        pos[hit] = first[at[hit]]
    return CollectiveTasks(ops, rec, _task_names(run, rec), pos)


def _task_names(run: RunDir, rec: np.ndarray) -> pd.Categorical:
    """The sub-task name of every record (through the hash dictionary, once per distinct id)."""
    names = run.hashes
    ids, inverse = np.unique(rec["name"], return_inverse=True)
    text = np.array([names.get(int(h), f"<unknown 0x{int(h):016x}>") for h in ids], dtype=object)
    codes, distinct = pd.factorize(text)  # two ids may share a name
    return pd.Categorical.from_codes(codes[inverse.ravel()], categories=pd.Index(distinct, dtype=object))


def collective_op_types(comm: pd.DataFrame) -> pd.Series:
    """The op type (GE's ``HcomAllReduce``, or msprof's ``hcom_allReduce_``) of op_summary rows of
    collectives.  At ``task_trace`` l0 (torch_npu Level0) op_summary has no OP Type; it then comes
    from the name: GE names collective nodes after their type (``gradients/HcomAllReduce_0``), msprof
    and torch_npu name a collective ``<type>_<group>_<index>_<execution>`` (``hcom_allReduce__868_0_1``)."""
    known = comm["OP Type"].astype(str)
    missing = (known == NA).to_numpy()
    if not missing.any():
        return known
    names = comm["Op Name"][missing].astype(str)
    from_name = names.str.extract(r"^(hcom_[A-Za-z]+_)", expand=False).fillna(
        names.str.extract(r"(Hcom[A-Za-z]+)", expand=False)).fillna("Hcom")
    return known.where(~missing, from_name)


def communication_statistic(run: RunDir, device_id: int = 0, rows: OpRows | None = None,
                            collectives: np.ndarray | None = None) -> pd.DataFrame:
    """Per HCCL op type: count and total/min/avg/max duration (us), share of all collective time;
    largest total first (msprof ``communication_statistic``).  ``collectives``: which rows are
    collectives (default: op_summary's ``COMMUNICATION`` rows; a run knows them at l0 too)."""
    f = _rows(run, device_id, rows).frame
    comm = f[(f["Task Type"] == "COMMUNICATION").to_numpy() if collectives is None else collectives]
    if comm.empty:
        return pd.DataFrame(columns=COMMUNICATION_STATISTIC)
    types = collective_op_types(comm).map(hccl_op_type)
    stats = comm["Task Duration(us)"].groupby(types.to_numpy()).agg(["count", "sum", "min", "mean", "max"])
    out = pd.DataFrame({
        "Device_id": device_id, "OP Type": stats.index.astype(str), "Count": stats["count"].to_numpy(),
        "Total Time(us)": stats["sum"].to_numpy(), "Min Time(us)": stats["min"].to_numpy(),
        "Avg Time(us)": stats["mean"].to_numpy(), "Max Time(us)": stats["max"].to_numpy(),
        "Ratio(%)": (stats["sum"] / stats["sum"].sum() * 100).to_numpy(),
    })
    for c in COMMUNICATION_STATISTIC[3:]:
        out[c] = out[c].round(3)
    return out.sort_values("Total Time(us)", ascending=False, kind="stable").reset_index(drop=True)


def hccl_tasks(run: RunDir, device_id: int = 0, rows: OpRows | None = None, group: str = DEFAULT_GROUP,
               joined: CollectiveTasks | None = None) -> pd.DataFrame:
    """One row per HCCL sub-task in time order, with its collective (N/A if it matches no
    op_summary row) and its bandwidth (size / duration, 0 for zero-length or size-less tasks).
    ``joined``: :func:`collective_tasks` of these arguments, when the caller has it already."""
    if joined is None:
        joined = collective_tasks(run, device_id, rows, group)
    rec, pos, ops = joined.rec, joined.pos, joined.ops
    dur = rec["dur"].astype(np.int64)
    size = rec["size"].astype(np.int64)
    op_of = np.where(pos >= 0, pos, len(ops))  # N/A after the collectives' texts

    def op_col(col: str) -> TextValues:
        return text_array(np.append(ops[col].to_numpy(object), NA), op_of)

    def named(codes: np.ndarray, names: dict[int, str]) -> TextValues:
        """Each code's name, looked up once per distinct code (no records: float64, the dtype these
        columns had when they were built from a list per row)."""
        if not len(codes):
            return np.zeros(0)
        ids, of = np.unique(codes, return_inverse=True)
        return text_array([names.get(int(t), str(int(t))) for t in ids.tolist()], of.ravel())

    with np.errstate(divide="ignore", invalid="ignore"):
        bandwidth = np.where(dur > 0, size / np.maximum(dur, 1), 0.0)
    return pd.DataFrame({
        "Op Name": op_col("name"), "Node": op_col("node"), "OP Type": op_col("type"),
        "Iteration ID": rec["iteration"].astype(np.int64),
        "Task Name": text_array(joined.task.categories, joined.task.codes),
        "Plane ID": rec["plane"].astype(np.int64), "Start Time(us)": rec["start"] / 1000.0,
        "Duration(us)": dur / 1000.0, "Size(Byte)": size, "Src Rank": rec["src_rank"].astype(np.int64),
        "Dst Rank": rec["dst_rank"].astype(np.int64),
        "Transport Type": named(rec["transport"], _TRANSPORT_NAMES), "Link Type": named(rec["link"], _LINK_NAMES),
        "Bandwidth(GB/s)": bandwidth, "Stream ID": rec["stream_id"].astype(np.int64),
    })[HCCL_TASKS]


def communication_time(run: RunDir, device_id: int = 0, rows: OpRows | None = None, group: str = DEFAULT_GROUP,
                       joined: CollectiveTasks | None = None) -> pd.DataFrame:
    """Per collective execution: elapse, transit, wait, synchronization and idle time (ms) and the
    wait/synchronization ratios (msprof-analyze's definitions, see the module docstring).
    Executions without sub-tasks (hccl data off) have NaN for everything but elapse.
    ``joined``: :func:`collective_tasks` of these arguments, when the caller has it already."""
    if joined is None:
        joined = collective_tasks(run, device_id, rows, group)
    ops = joined.ops
    n = len(ops)
    keep = joined.pos >= 0
    if keep.all():  # every sub-task has its collective: no copy of the records
        rec, pos, task = joined.rec, joined.pos, joined.task
    else:
        rec, pos, task = joined.rec[keep], joined.pos[keep], joined.task[keep]
    start = rec["start"].astype(np.int64)
    dur = rec["dur"].astype(np.int64)
    link = rec["link"].astype(np.int64)
    transport = rec["transport"].astype(np.int64)
    transit = ((task.isin(["Memcpy", "Reduce_Inline"]) & (transport == TransportType.SDMA)
                & (link != LinkType.ON_CHIP)) | ((task == "RDMASend") & (transport == TransportType.RDMA)))
    wait = task == "Notify_Wait"

    def total(sel: np.ndarray, values: np.ndarray) -> np.ndarray:
        return np.rint(np.bincount(pos[sel], values[sel], minlength=n)).astype(np.int64)

    transit_ns = total(transit, dur)
    wait_ns = total(wait, dur)
    first_transit = np.full(n, np.iinfo(np.int64).max)
    np.minimum.at(first_transit, pos[transit], start[transit])
    sync_part = np.clip(np.minimum(start + dur, first_transit[pos]) - start, 0, None)
    sync_ns = total(wait, sync_part)
    has = np.bincount(pos, minlength=n) > 0
    elapse = ops["dur"].to_numpy()

    def ms(v: np.ndarray) -> np.ndarray:
        return np.where(has, v / 1e6, np.nan)

    def ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(has, np.round(np.where(a + b > 0, a / (a + b), 0.0), 4), np.nan)

    return pd.DataFrame({
        "Op Name": ops["name"].to_numpy(object), "OP Type": ops["type"].to_numpy(object),
        "Iteration ID": ops["iteration"].to_numpy(), "Start Timestamp(us)": ops["start"].to_numpy() / 1000.0,
        "Elapse Time(ms)": elapse / 1e6, "Transit Time(ms)": ms(transit_ns), "Wait Time(ms)": ms(wait_ns),
        "Synchronization Time(ms)": ms(sync_ns), "Idle Time(ms)": ms(elapse - transit_ns - wait_ns),
        "Wait Time Ratio": ratio(wait_ns, transit_ns), "Synchronization Time Ratio": ratio(sync_ns, transit_ns),
    })[COMMUNICATION_TIME]


def collective_groups(run: RunDir, device_id: int, joined: CollectiveTasks) -> np.ndarray | None:
    """The communication group (its communicator name, a key of info.json's ``parallel.parallel_group_info``)
    of every collective execution of ``joined`` (communication_time's rows), from the ``hccl_op`` records HCCL
    reports of each op task; None when the run recorded none (then every collective is in
    :data:`DEFAULT_GROUP`)."""
    rec = run.load("hccl_op", device_id)
    if not len(rec):
        return None
    names = run.hashes
    by_conn = {int(c): names.get(int(g), DEFAULT_GROUP) for c, g in zip(rec["connection_id"], rec["group"])}
    return np.array([by_conn.get(int(c), DEFAULT_GROUP) for c in joined.ops["conn"].to_numpy()], dtype=object)

