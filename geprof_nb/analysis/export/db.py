"""``format="db"`` and ``format="msprof_db"``: a Profile as torch_npu's and msprof's SQLite output,
the input of msprof-analyze's ``cluster -m <recipe>`` analyses (the layout: :mod:`..sources.db_schema`).

* ``db``: ``<path>/<worker>_<pid>_<17 digits>_ascend_pt/`` with ``profiler_info_<rank>.json`` and
  ``ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_<rank>.db`` + ``analysis.db``; a directory of
  several ranks' directories is a cluster, as for ``ascend_pt``.
* ``msprof_db``: ``<path>/PROF_<6>_<17>_<letters>/msprof_<14 digits>.db``,
  ``device_<id>/info.json.<id>`` (with ``rank_id``) and ``analyze/communication_analyzer.db``.

What goes where:

* ``TASK``: every device task the Profile has (:meth:`Source.device_tasks`) and every HCCL
  sub-task (``hccl_tasks``), by start; ``COMPUTE_TASK_INFO`` and ``TASK_PMU_INFO`` (the metrics of
  the core the task ran on, times in ns; the other core's are left out, which msprof-analyze
  reads as the 0 torch_npu writes) for op_summary's compute rows; ``COMMUNICATION_OP`` for its
  collectives (named as ``communication_time`` names them, each in its communicator: the run's recorded
  group, else ``hccl_world_group``) and ``COMMUNICATION_TASK_INFO`` for their sub-tasks.
* ``CANN_API``: every host API call, each with its own connection id; a device task carries the id of
  the call that launched it (its node launch, else its model's ModelExecute:
  :func:`.ascend_pt.launching_calls`), a sub-task its collective's, so msprof-analyze's joins find the
  host side of every task.
* torch_npu's framework layer, as in the ascend_pt ``trace_view.json``: ``STEP_TIME`` and a
  ``ProfilerStep#<n>`` in ``PYTORCH_API`` per step, a ``PYTORCH_API`` op per launching call linked
  through ``CONNECTION_IDS`` to its CANN call.
* ``analysis.db`` / ``communication_analyzer.db``: ``StepTraceTime`` (step_breakdown) and the
  communication analysis flattened from the same ``communication.json`` / ``communication_matrix.json``
  the ascend_pt export writes (:mod:`.hccl`), groups named by msprof-analyze's hash of the group name.
* ``META_DATA``: the schema version, ``ENV_VARIABLES`` and, for a rank of a cluster of known size,
  ``distributed_args`` and ``parallel_group_info`` (the world group, every rank in it).
* ``GEPROF_*``: what neither schema holds (:mod:`..sources.db_schema`).

Each file is built under a temporary name in one transaction and renamed into place, so a failed
export leaves no half-written database.  Rows go in as multi-row ``INSERT`` statements of the
connection's maximum number of parameters, and the biggest tables (:data:`SIDE_PROCESS_TABLES`) are written by a
second process meanwhile (:mod:`.db_rows`): a 1,000,000-task run's ~18,000,000 rows in seconds, on two cores.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ..sources import db_schema as S
from ..sources.parquet import disk_names, dtype_spec
from ..sources.source import TIMESTAMP_COLUMNS
from ..tables import columns as C
from ..tables.communication import DEFAULT_GROUP, hccl_op_type
from ..tables.summary import NA
from .ascend_pt import (
    OUTPUT_DIR,
    check_rank,
    launching_calls,
    op_groups,
    profiler_info,
    profiler_metadata,
    profiler_steps,
    write_device_info,
)
from .db_rows import Masked, SideWriter, connect_for_writing, insert_flat, is_plain
from .hccl import BANDWIDTH_TYPES, RankMap, communication_json, communication_matrix_json
from .naming import ascend_pt_dir_name, prof_dir_name, stamp14
from .timeline import Timeline
from .tracejson import write_json

#: Tables a second process writes while this one writes the rest (:mod:`.db_rows`), when they have at least
#: :data:`SIDE_MIN_ROWS` rows (below that, starting the process costs more than it saves).
SIDE_PROCESS_TABLES = frozenset({"TASK_PMU_INFO"})
SIDE_MIN_ROWS = 500_000
#: The runtime (TASK) type of an op task by its op_summary Task Type, where the Profile has no runtime type.
RUNTIME_TYPES = {"AI_CORE": "KERNEL_AICORE", "AI_VECTOR_CORE": "KERNEL_AIVEC", "MIX_AIC": "KERNEL_MIX_AIC",
                 "MIX_AIV": "KERNEL_MIX_AIV", "AI_CPU": "KERNEL_AICPU", "COMMUNICATION": "HCCL"}
#: The hardware (TASK) type of an HCCL sub-task, by its name (what real DBs show: SDMA copies, notify
#: waits, write-value records).
SUB_TASK_TYPES = {"Memcpy": "SDMA", "Reduce_Inline": "SDMA", "Notify_Wait": "Notify Wait",
                  "Notify_Record": "Write Value", "RDMASend": "RDMA_SEND"}
#: The Profile tables geprof keeps in ``GEPROF_<name>`` tables, per format: the ones the format has no table for.
SIDE_TABLES = {"db": ("step_trace", "host_events", "aicpu"),
               "msprof_db": ("step_trace", "host_events", "aicpu", "operator_memory", "memory_record")}

Columns = dict[str, object]


class Strings:
    """``STRING_IDS``: every text once, ids from 0 in the order first asked for."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}

    def id(self, text: str) -> int:
        return self._ids.setdefault(text, len(self._ids))

    def ids(self, values) -> np.ndarray:
        """The ids of ``values`` (texts, a categorical; missing ones are ``N/A``), one look-up per distinct value."""
        if isinstance(getattr(values, "dtype", None), pd.CategoricalDtype):
            cat = pd.Categorical(values)
            table = np.array([self.id(str(c)) for c in cat.categories] + [self.id(NA)], np.int64)
            codes = cat.codes.astype(np.int64)
            return table[np.where(codes < 0, len(cat.categories), codes)]
        codes, uniques = pd.factorize(np.asarray(values, dtype=object))
        table = np.array([self.id(str(u)) for u in uniques] + [self.id(NA)], np.int64)
        return table[np.where(codes < 0, len(uniques), codes)]

    def table(self) -> tuple[S.Table, Columns, int]:
        ids = self._ids
        return S.PROFILER_TABLES["STRING_IDS"], {"id": list(ids.values()), "value": list(ids)}, len(ids)


# ---------------------------------------------------------------------------- writing
def _cells(values: object, n: int) -> list:
    """A column's values as a list of Python numbers / texts / None (missing)."""
    if np.isscalar(values):
        return [values.item() if isinstance(values, np.generic) else values] * n
    if isinstance(values, list):
        return values
    if isinstance(getattr(values, "dtype", None), pd.api.extensions.ExtensionDtype):
        series = pd.Series(values)
        missing = np.asarray(series.isna())
        if series.dtype.kind in "iu":  # nullable integers: their numbers, then None where missing
            cells = series.to_numpy(np.int64, na_value=0).tolist()
        else:
            return series.to_numpy(object, na_value=None).tolist()
    else:
        arr = np.asarray(values)
        cells = arr.tolist()
        missing = np.isnan(arr) if arr.dtype.kind == "f" else None
    if missing is not None and missing.any():
        for i in np.flatnonzero(missing).tolist():
            cells[i] = None
    return cells


def insert_rows(conn: sqlite3.Connection, table: S.Table, data: Columns | list[tuple[Columns, int]], n: int) -> None:
    """Insert ``n`` rows, many per statement.  ``data``: column -> values (a column left out is NULL), or
    blocks of them (``(columns, rows)`` each, inserted in turn: a big table need not be in memory at once)."""
    blocks = data if isinstance(data, list) else [(data, n)]
    names = table.names
    k = len(names)
    for block, rows in blocks:
        flat: list = [None] * (rows * k)
        for j, name in enumerate(names):
            values = block.get(name)
            if values is not None:
                cells = _cells(values, rows)
                if len(cells) != rows:
                    raise ValueError(f"{table.name}.{name}: {len(cells)} values for {rows} rows")
                flat[j::k] = cells
        insert_flat(conn, table.name, k, flat, rows)


def _side_column(values: object) -> object:
    """A nullable integer column as :class:`.db_rows.Masked`; the rest as it is."""
    if isinstance(values, pd.arrays.IntegerArray):
        missing = np.asarray(values.isna())
        return Masked(values.to_numpy(np.int64, na_value=0), missing)
    return values


def _side_blocks(table: S.Table, data: Columns | list[tuple[Columns, int]], n: int) -> list | None:
    """The table's blocks as the side process takes them (:class:`.db_rows.SideWriter`), or None where it is
    written here: small, not one of :data:`SIDE_PROCESS_TABLES`, or a column that is not plain numbers."""
    if table.name not in SIDE_PROCESS_TABLES or n < SIDE_MIN_ROWS:
        return None
    blocks = [({k: _side_column(v) for k, v in block.items()}, rows)
              for block, rows in (data if isinstance(data, list) else [(data, n)])]
    return blocks if all(is_plain(v) for block, _ in blocks for v in block.values()) else None


def write_db(path: Path, tables: Iterable[tuple[S.Table, Columns, int]], indexes: Sequence[str] = ()) -> Path:
    """Write the tables (each created as declared, then filled) in one transaction into a new file,
    renamed to ``path`` when complete (a database already there is replaced).  A big table of
    :data:`SIDE_PROCESS_TABLES` is written by a second process meanwhile and copied in before the commit."""
    work = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    work.unlink(missing_ok=True)
    side = SideWriter(work)
    try:
        conn = connect_for_writing(work)
        try:
            conn.execute("BEGIN")
            for table, data, n in tables:
                conn.execute(table.create_sql())
                blocks = _side_blocks(table, data, n)
                try:
                    if blocks is not None:
                        side.add(table.name, table.create_sql(), table.names, blocks)
                        continue
                except OSError:  # no second process to start (no interpreter at sys.executable): written here
                    pass
                if n:
                    insert_rows(conn, table, data, n)
            side.copy_into(conn)
            for sql in indexes:
                conn.execute(sql)
            conn.execute("COMMIT")
        finally:
            conn.close()
            side.discard()
        os.replace(work, path)
    except BaseException:
        work.unlink(missing_ok=True)
        raise
    return path


#: The indexes of a real profiler DB.
INDEXES = ("CREATE INDEX TaskIndex ON TASK (startNs,globalTaskId)",
           "CREATE INDEX CommunicationTaskIndex ON COMMUNICATION_TASK_INFO (globalTaskId)")


# ---------------------------------------------------------------------------- the tables
def _ints(values, missing: int = S.UINT32_MAX) -> np.ndarray:
    """Integer values with ``missing`` where they are NA (or negative, geprof's "none")."""
    arr = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(float, na_value=np.nan)
    out = np.where(np.isnan(arr), missing, arr).astype(np.int64)
    return np.where(out < 0, missing, out)


def _whole(values: np.ndarray) -> object:
    """Byte counts and durations as integers (what the real files hold) when every present value is one (NaN:
    missing), else as they are."""
    missing = np.isnan(values)
    present = values[~missing]
    if len(present) and not np.array_equal(present, np.rint(present)):
        return values
    return pd.arrays.IntegerArray(np.where(missing, 0, values).astype(np.int64), missing)


def host_uid(hostname: str) -> str:
    """A host's id as HOST_INFO holds it (a decimal number): here from its name, so it is stable."""
    return str(int.from_bytes(hashlib.sha256(hostname.encode()).digest()[:8], "big") >> 1)


class DbTables:
    """The rows of one Profile's databases in the torch_npu (``torch_npu=True``) or msprof layout."""

    def __init__(self, profile, torch_npu: bool, rank: int | None, world_size: int | None) -> None:
        self.profile, self.source = profile, profile.source
        self.torch_npu = torch_npu
        self.rank, self.world_size = rank, world_size
        self.timeline = Timeline(profile, torch_npu=torch_npu)
        self.strings = Strings()
        self.device_id = int(profile.device_id)
        self.pid = int(profile.info.get("pid") or 0)
        self.hostname = str(profile.info.get("hostname") or socket.gethostname())
        self._link()

    # ------------------------------------------------------------ ids shared by the tables
    def _link(self) -> None:
        """Which call launched each task and the connection ids they share; the op rows' tasks; the
        collectives and their sub-tasks."""
        tasks, calls = self.timeline.tasks, self.timeline.calls
        self.tasks, self.calls = tasks, calls
        launch = launching_calls(calls, tasks) if len(calls) and len(tasks) else np.full(len(tasks), -1, np.int64)
        self.call_of_task = launch
        # a call's connection id is its row; a task no call launched gets one of its own after them
        self.task_conn = np.where(launch >= 0, launch, len(calls) + np.arange(len(tasks)))
        rows = self.source.op_rows()
        self.rows = rows
        op_tasks = np.flatnonzero(tasks["op"].to_numpy(bool)) if len(tasks) else np.zeros(0, np.int64)
        if len(op_tasks) != len(rows.frame):
            raise ValueError(f"{self.profile.name}: {len(rows.frame)} op_summary rows but {len(op_tasks)} op tasks "
                             "among the device tasks; the DB export needs each op row's device task")
        self.op_task = op_tasks
        self.is_comm = self.source.communication_rows()
        self._collectives()

    def _collectives(self) -> None:
        f = self.rows.frame
        sel = np.flatnonzero(self.is_comm)
        ct = self.profile.communication_time
        names = (ct["Op Name"].astype(str).to_numpy(object) if len(ct) == len(sel)
                 else f["Op Name"].astype(str).to_numpy(object)[sel])
        types = (ct["OP Type"].astype(str).to_numpy(object) if len(ct) == len(sel)
                 else np.array([hccl_op_type(t) for t in f["OP Type"].astype(str).to_numpy(object)[sel]], object))
        dur = np.rint(f["Task Duration(us)"].to_numpy(float)[sel] * 1000).astype(np.int64)
        start = self.rows.start_ns[sel].astype(np.int64)
        groups = op_groups(self.profile)  # per communication_time row, or the world group for all
        if isinstance(groups, str) or len(ct) != len(sel) or len(groups) != len(sel):
            groups = np.full(len(sel), groups if isinstance(groups, str) else DEFAULT_GROUP, object)
        self.comm = pd.DataFrame({
            "row": sel, "name": names, "type": types, "group": groups, "start": start, "end": start + dur,
            "conn": self.task_conn[self.op_task[sel]], "model": _ints(f["Model ID"].to_numpy()[sel]),
            "node": f["Op Name"].astype(str).to_numpy(object)[sel],
            "node_type": f["OP Type"].astype(str).to_numpy(object)[sel]})
        self.sub = self.profile.hccl_tasks
        at = pd.Index(names).get_indexer(self.sub["Op Name"].astype(str).to_numpy(object)) if len(self.sub) \
            else np.zeros(0, np.int64)
        self.sub_op = at  # each sub-task's collective (-1: none)

    # ------------------------------------------------------------ TASK and what joins it
    def _runtime_types(self) -> np.ndarray:
        """The runtime type of each device task: task_time's kernel_type where task_time is the same tasks
        (same starts), else from the task type (:data:`RUNTIME_TYPES`)."""
        tt = self.profile.task_time
        tasks = self.tasks
        if len(tt) == len(tasks) and len(tt):
            starts = self.source.times_ns("task_time", tt).iloc[:, 0].to_numpy(np.int64, na_value=-1)
            if np.array_equal(starts, tasks["start"].to_numpy(np.int64)):
                return tt["kernel_type"].astype(str).to_numpy(object)
        kinds = tasks["task_type"].astype(str).to_numpy(object)
        return np.array([RUNTIME_TYPES.get(k, k) for k in kinds.tolist()], object)

    def task_table(self) -> Columns:
        """TASK: the device tasks and the sub-tasks by start; sets the global task id of each."""
        t, f = self.tasks, self.rows.frame
        n_dev, n_sub = len(t), len(self.sub)
        context = np.full(n_dev, S.UINT32_MAX, np.int64)
        if "Context ID" in f.columns:
            context[self.op_task] = _ints(f["Context ID"].array)
        sub_conn = np.where(self.sub_op >= 0, self.comm["conn"].to_numpy(np.int64)[np.maximum(self.sub_op, 0)],
                            len(self.calls) + n_dev + np.arange(n_sub)) if n_sub else np.zeros(0, np.int64)
        sub_model = np.where(self.sub_op >= 0, self.comm["model"].to_numpy(np.int64)[np.maximum(self.sub_op, 0)],
                             S.UINT32_MAX) if n_sub else np.zeros(0, np.int64)
        sub_start = self.source.times_ns("hccl_tasks", self.sub).iloc[:, 0].to_numpy(np.int64) if n_sub \
            else np.zeros(0, np.int64)
        sub_dur = np.rint(self.sub["Duration(us)"].to_numpy(float) * 1000).astype(np.int64) if n_sub \
            else np.zeros(0, np.int64)
        sub_names = self.sub["Task Name"].astype(str).to_numpy(object) if n_sub else np.zeros(0, object)
        start = np.concatenate([t["start"].to_numpy(np.int64), sub_start])
        order = np.argsort(start, kind="stable")
        gid = np.empty(len(order), np.int64)
        gid[order] = np.arange(len(order))
        self.task_gid, self.sub_gid = gid[:n_dev], gid[n_dev:]
        self.sub_conn = sub_conn
        kind = np.concatenate([self.strings.ids(self._runtime_types()),
                               self.strings.ids([SUB_TASK_TYPES.get(s, s) for s in sub_names.tolist()])])
        dur = np.concatenate([t["dur"].to_numpy(np.int64), sub_dur])
        cols = {
            "startNs": start, "endNs": start + dur, "deviceId": self.device_id,
            "connectionId": np.concatenate([self.task_conn, sub_conn]), "globalTaskId": gid,
            "globalPid": self.pid, "taskType": kind,
            "contextId": np.concatenate([context, np.full(n_sub, S.UINT32_MAX, np.int64)]),
            "streamId": np.concatenate([_ints(t["stream_id"]), _ints(self.sub["Stream ID"]) if n_sub
                                        else np.zeros(0, np.int64)]),
            "taskId": np.concatenate([_ints(t["task_id"]), np.full(n_sub, S.UINT32_MAX, np.int64)]),
            "modelId": np.concatenate([_ints(t["model_id"]), sub_model]),
        }
        return {c: np.asarray(v)[order] if isinstance(v, np.ndarray) else v for c, v in cols.items()}

    def compute_table(self) -> tuple[Columns, int]:
        f, s = self.rows.frame, self.strings
        rows = np.flatnonzero(~self.is_comm)

        def text(col: str):
            return s.ids(f[col].array[rows]) if col in f.columns else s.id(NA)

        def number(col: str):
            return _ints(f[col].array[rows], missing=-1) if col in f.columns else None

        block, mix = number("Block Num"), number("Mix Block Num")
        cols = {
            "name": text("Op Name"), "globalTaskId": self.task_gid[self.op_task[rows]],
            "blockNum": None if block is None else pd.arrays.IntegerArray(np.maximum(block, 0), block < 0),
            "mixBlockNum": None if mix is None else pd.arrays.IntegerArray(np.maximum(mix, 0), mix < 0),
            "taskType": text("Task Type"), "opType": text("OP Type"), "inputFormats": text("Input Formats"),
            "inputDataTypes": text("Input Data Types"), "inputShapes": text("Input Shapes"),
            "outputFormats": text("Output Formats"), "outputDataTypes": text("Output Data Types"),
            "outputShapes": text("Output Shapes"), "attrInfo": s.id(NA), "opState": text("OP State"),
            "hf32Eligible": text("HF32 Eligible"),
        }
        return cols, len(rows)

    def pmu_table(self) -> tuple[list[tuple[Columns, int]], int]:
        """TASK_PMU_INFO: each compute row's present PMU values, one block per metric (times in ns)."""
        f = self.rows.frame
        rows = np.flatnonzero(~self.is_comm)
        fixed = set(C.OP_SUMMARY_BASE) | set(C.OP_SUMMARY_TENSOR_A2)
        gid = self.task_gid[self.op_task[rows]]
        blocks: list[tuple[Columns, int]] = []
        for col in (c for c in f.columns if c not in fixed):
            series = f[col]
            if isinstance(series.dtype, pd.api.extensions.ExtensionDtype):  # counts: integers
                present = ~np.asarray(series.isna())[rows]
                values = series.to_numpy(np.int64, na_value=0)[rows][present]
            else:
                raw = series.to_numpy(float)[rows]
                present = ~np.isnan(raw)
                values = raw[present] * 1000.0 if S.is_time_metric(col) else raw[present]
            blocks.append(({"globalTaskId": gid[present], "name": self.strings.id(S.pmu_name(col)),
                            "value": values}, int(present.sum())))
        return blocks, sum(n for _, n in blocks)

    def communication_op_table(self) -> tuple[Columns, int]:
        c, s = self.comm, self.strings
        return {"opName": s.ids(c["name"]), "startNs": c["start"].to_numpy(), "endNs": c["end"].to_numpy(),
                "connectionId": c["conn"].to_numpy(), "groupName": s.ids(c["group"].to_numpy(object)),
                "opId": np.arange(len(c)), "relay": 0, "retry": 0, "dataType": 65534, "algType": s.id(NA),
                "count": None, "opType": s.ids(c["type"]), "deviceId": self.device_id}, len(c)

    def collective_table(self) -> tuple[Columns, int]:
        c, s = self.comm, self.strings
        return {"opId": np.arange(len(c)), "node": s.ids(c["node"]), "nodeType": s.ids(c["node_type"])}, len(c)

    def communication_task_table(self) -> tuple[Columns, int]:
        sub, s = self.sub, self.strings
        n = len(sub)
        if not n:
            return {}, 0
        transport = {v: k for k, v in S.ENUM_HCCL_TRANSPORT_TYPE.items()}
        link = {v: k for k, v in S.ENUM_HCCL_LINK_TYPE.items()}
        of_op = np.where(self.sub_op >= 0, self.sub_op, len(self.comm))
        op_names = np.append(self.comm["name"].to_numpy(object), NA)[of_op]
        groups = np.append(self.comm["group"].to_numpy(object), DEFAULT_GROUP)[of_op]
        return {
            "name": s.ids(op_names), "globalTaskId": self.sub_gid, "taskType": s.ids(sub["Task Name"].astype(str)),
            "planeId": sub["Plane ID"].to_numpy(np.int64), "groupName": s.ids(groups),
            "notifyId": S.UINT32_MAX, "rdmaType": 65535,
            "srcRank": _ints(sub["Src Rank"]), "dstRank": _ints(sub["Dst Rank"]),
            "transportType": [transport.get(v, 65535) for v in sub["Transport Type"].astype(str).tolist()],
            "size": sub["Size(Byte)"].to_numpy(np.int64), "dataType": 65534,
            "linkType": [link.get(v, 65535) for v in sub["Link Type"].astype(str).tolist()],
            "opId": np.where(self.sub_op >= 0, self.sub_op, S.UINT32_MAX), "isMaster": 1,
            "bandwidth": sub["Bandwidth(GB/s)"].to_numpy(float) * 1e9,  # bytes/s
        }, n

    def cann_api_table(self) -> tuple[Columns, int]:
        calls, s = self.calls, self.strings
        level = {v: k for k, v in S.ENUM_API_TYPE.items()}
        return {"startNs": calls["begin"].to_numpy(np.int64), "endNs": calls["end"].to_numpy(np.int64),
                "type": [level.get(v, S.UINT32_MAX) for v in calls["level"].astype(str).tolist()],
                "globalTid": (self.pid << 32) | calls["thread"].to_numpy(np.int64),
                "connectionId": np.arange(len(calls)), "name": s.ids(calls["api"].astype(str))}, len(calls)

    def mstx_table(self) -> tuple[Columns, int]:
        tx, s = self.profile.msprof_tx, self.strings
        if tx.empty:
            return {}, 0
        times = self.source.times_ns("msprof_tx", tx)
        kinds = {v: k for k, v in S.ENUM_MSTX_EVENT_TYPE.items()}
        tid = (tx["pid"].to_numpy(np.int64) << 32) | tx["tid"].to_numpy(np.int64)
        return {"startNs": times.iloc[:, 0].to_numpy(np.int64), "endNs": times.iloc[:, 1].to_numpy(np.int64),
                "eventType": [kinds.get(v, S.UINT32_MAX) for v in tx["event_type"].astype(str).tolist()],
                "rangeId": np.arange(len(tx)), "category": tx["category"].to_numpy(np.int64),
                "message": s.ids(tx["message"].astype(str)), "globalTid": tid, "endGlobalTid": tid,
                "domainId": s.ids(tx["domain"].astype(str)), "connectionId": S.UINT32_MAX}, len(tx)

    def memcpy_table(self) -> tuple[Columns, int]:
        info = self.source.memcpy_info().drop_duplicates("connection_id")
        if info.empty:
            return {}, 0
        at = pd.Index(info["connection_id"]).get_indexer(self.tasks["connection_id"])
        rows = np.flatnonzero(at >= 0)
        ops = {v: k for k, v in S.ENUM_MEMCPY_OPERATION.items()}
        return {"globalTaskId": self.task_gid[rows], "size": info["size"].to_numpy(np.int64)[at[rows]],
                "memcpyOperation": [ops.get(v, 65535) for v in info["operation"].astype(str).to_numpy()[at[rows]]]
                }, len(rows)

    # ------------------------------------------------------------ torch_npu's framework layer
    def framework_tables(self) -> list[tuple[S.Table, Columns, int]]:
        """STEP_TIME, PYTORCH_API (the steps and the launching calls) and CONNECTION_IDS."""
        steps = profiler_steps(self.timeline)
        calls, s = self.calls, self.strings
        launched = np.flatnonzero(((calls["iteration"] >= 0) & ((calls["connection_id"] >= 0)
                                                               | (calls["api"] == "ModelExecute"))).to_numpy())
        n_steps, n_ops = len(steps), len(launched)
        node = calls["connection_id"].to_numpy(np.int64)[launched] >= 0
        names = np.where(node, calls["item"].astype(str).to_numpy(object)[launched],
                         calls["api"].astype(str).to_numpy(object)[launched])
        start = np.concatenate([steps["begin"].to_numpy(np.int64), calls["begin"].to_numpy(np.int64)[launched]])
        end = np.concatenate([steps["end"].to_numpy(np.int64), calls["end"].to_numpy(np.int64)[launched]])
        tid = np.concatenate([steps["thread"].to_numpy(np.int64), calls["thread"].to_numpy(np.int64)[launched]])
        api = {"startNs": [str(v) for v in start.tolist()], "endNs": [str(v) for v in end.tolist()],
               "globalTid": (self.pid << 32) | tid,
               "connectionId": [None] * n_steps + list(range(n_ops)),
               "name": np.concatenate([s.ids([f"ProfilerStep#{k}" for k in steps["step"].tolist()]), s.ids(names)]),
               "type": 50001}
        return [(S.PROFILER_TABLES["STEP_TIME"], {"id": steps["step"].to_numpy(np.int64),
                                                  "startNs": steps["begin"].to_numpy(np.int64),
                                                  "endNs": steps["end"].to_numpy(np.int64)}, n_steps),
                (S.PROFILER_TABLES["PYTORCH_API"], api, n_steps + n_ops),
                (S.PROFILER_TABLES["CONNECTION_IDS"], {"id": np.arange(n_ops), "connectionId": launched}, n_ops)]

    def memory_tables(self) -> list[tuple[S.Table, Columns, int]]:
        """OP_MEMORY and MEMORY_RECORD (torch_npu) from operator_memory and memory_record, in bytes and ns."""
        out = []
        om = self.profile.operator_memory
        if len(om):
            t = self.source.times_ns("operator_memory", om)

            def bytes_of(col: str, scale: float) -> object:
                return _whole(om[col].to_numpy(float) * scale)  # NaN (not released) stays missing

            out.append((S.PROFILER_TABLES["OP_MEMORY"], {
                "name": self.strings.ids(om["Name"].array), "size": bytes_of("Size(KB)", 1024.0),
                "allocationTime": t.iloc[:, 0].array, "releaseTime": t.iloc[:, 1].array,
                "activeReleaseTime": t.iloc[:, 2].array,
                "duration": _whole(np.rint(om["Duration(us)"].to_numpy(float) * 1000)),
                "activeDuration": _whole(np.rint(om["Active Duration(us)"].to_numpy(float) * 1000)),
                **{db: bytes_of(col, float(1 << 20)) for db, col in (
                    ("allocationTotalAllocated", "Allocation Total Allocated(MB)"),
                    ("allocationTotalReserved", "Allocation Total Reserved(MB)"),
                    ("allocationTotalActive", "Allocation Total Active(MB)"),
                    ("releaseTotalAllocated", "Release Total Allocated(MB)"),
                    ("releaseTotalReserved", "Release Total Reserved(MB)"),
                    ("releaseTotalActive", "Release Total Active(MB)"))},
                "streamPtr": om["Stream Ptr"].to_numpy(np.int64), "deviceId": self.device_id}, len(om)))
        mr = self.profile.memory_record
        if len(mr):
            t = self.source.times_ns("memory_record", mr)
            out.append((S.PROFILER_TABLES["MEMORY_RECORD"], {
                "component": self.strings.ids(mr["Component"].array), "timestamp": t.iloc[:, 0].array,
                **{db: _whole(mr[col].to_numpy(float) * float(1 << 20)) for db, col in (
                    ("totalAllocated", "Total Allocated(MB)"), ("totalReserved", "Total Reserved(MB)"),
                    ("totalActive", "Total Active(MB)"))},
                "streamPtr": mr["Stream Ptr"].to_numpy(np.int64), "deviceId": self.device_id}, len(mr)))
        return out

    def npu_op_mem_table(self) -> tuple[Columns, int]:
        """NPU_OP_MEM (msprof): an allocate event and, if it was released, a release event per allocation."""
        om = self.profile.operator_memory
        if om.empty:
            return {}, 0
        t = self.source.times_ns("operator_memory", om)
        alloc = t.iloc[:, 0].to_numpy(np.int64, na_value=-1)
        release = t.iloc[:, 1].to_numpy(np.int64, na_value=-1)
        freed = np.flatnonzero(release >= 0)
        n = len(om)
        size = np.rint(om["Size(KB)"].to_numpy(float) * 1024).astype(np.int64)
        mb = float(1 << 20)
        name = self.strings.ids(om["Name"].array)
        addr = np.arange(n, dtype=np.int64)  # one address per allocation: what pairs its two events
        return {
            "operatorName": np.concatenate([name, name[freed]]), "addr": np.concatenate([addr, addr[freed]]),
            "type": np.concatenate([np.full(n, self.strings.id("allocate"), np.int64),
                                    np.full(len(freed), self.strings.id("release"), np.int64)]),
            "size": np.concatenate([size, size[freed]]), "timestampNs": np.concatenate([alloc, release[freed]]),
            "globalTid": self.pid << 32,
            "totalAllocate": np.concatenate([om["Allocation Total Allocated(MB)"].to_numpy(float),
                                             om["Release Total Allocated(MB)"].to_numpy(float)[freed]]) * mb,
            "totalReserve": np.concatenate([om["Allocation Total Reserved(MB)"].to_numpy(float),
                                            om["Release Total Reserved(MB)"].to_numpy(float)[freed]]) * mb,
            "component": self.strings.id("GE"), "deviceId": self.device_id}, n + len(freed)

    # ------------------------------------------------------------ run facts
    def meta_tables(self) -> list[tuple[S.Table, Columns, int]]:
        info = self.profile.info
        major, minor, micro = S.SCHEMA_VERSION
        meta = [("SCHEMA_VERSION_MICRO", micro), ("SCHEMA_VERSION_MINOR", minor), ("SCHEMA_VERSION_MAJOR", major),
                ("SCHEMA_VERSION", ".".join(S.SCHEMA_VERSION))]
        meta += [(k, json.dumps(v)) for k, v in profiler_metadata(self.profile, self.rank, self.world_size).items()]
        device = self.profile.device
        chip = str(device.get("name") or ("Ascend910B" if device.get("chip_family", "A2") == "A2" else "Ascend910A"))
        start = int(info.get("start_ns") or (self.tasks["start"].min() if len(self.tasks) else 0))
        end = int(info.get("end_ns") or (int((self.tasks["start"] + self.tasks["dur"]).max()) if len(self.tasks)
                                         else start))
        freq = device.get("aic_frequency") or device.get("aic_frequency_mhz")
        out = [(S.PROFILER_TABLES["META_DATA"], {"name": [m[0] for m in meta], "value": [m[1] for m in meta]},
                len(meta)),
               (S.PROFILER_TABLES["HOST_INFO"], {"hostUid": host_uid(self.hostname), "hostName": self.hostname}, 1),
               (S.PROFILER_TABLES["RANK_DEVICE_MAP"],
                {"rankId": self.rank if self.torch_npu and self.rank is not None else -1,
                 "deviceId": self.device_id}, 1),
               (S.PROFILER_TABLES["SESSION_TIME_INFO"], {"startTimeNs": start, "endTimeNs": end}, 1),
               (S.PROFILER_TABLES["NPU_INFO"], {"id": self.device_id, "name": chip}, 1)]
        if freq:
            out.append((S.PROFILER_TABLES["AICORE_FREQ"], {"deviceId": self.device_id, "timestampNs": [start, end],
                                                          "freq": int(freq)}, 2))
        return out

    def enum_tables(self) -> list[tuple[S.Table, Columns, int]]:
        return [(S.ENUM_TABLES[name], {"id": list(values), "name": list(values.values())}, len(values))
                for name, values in S.ENUMS.items()]

    def side_tables(self, names: Sequence[str]) -> list[tuple[S.Table, Columns, int]]:
        """``GEPROF_<NAME>`` per Profile table in ``names`` (its columns as they are, the exact ns of its
        timestamps in ``<column>#ns``) and the ``GEPROF_TABLES`` rows that say how to read them back."""
        out, specs = [], []
        for name in names:
            frame = getattr(self.profile, name)
            columns = [str(c) for c in frame.columns]
            disk = disk_names(columns)
            data: Columns = {_quote(d): _plain(frame.iloc[:, i]) for i, d in enumerate(disk)}
            positions = [i for i, c in enumerate(columns) if c in TIMESTAMP_COLUMNS.get(name, ())]
            times = [f"{disk[i]}#ns" for i in positions] if len(frame) else []
            if times:
                exact = self.source.times_ns(name, frame)
                for k, t in enumerate(times):
                    data[_quote(t)] = exact.iloc[:, k].array
            out.append((S.Table(f"GEPROF_{name.upper()}", tuple((_quote(d), "") for d in [*disk, *times])), data,
                        len(frame)))
            specs.append((name, json.dumps({"columns": columns, "rows": len(frame), "times": times,
                                            "dtypes": [dtype_spec(frame.iloc[:, i].dtype)
                                                       for i in range(frame.shape[1])]})))
        out.append((S.PROFILER_TABLES["GEPROF_TABLES"], {"name": [n for n, _ in specs], "spec": [v for _, v in specs]},
                    len(specs)))
        return out

    # ------------------------------------------------------------ the files
    def profiler_db(self, side: Sequence[str]) -> Iterator[tuple[S.Table, Columns, int]]:
        """Every table of the profiler DB, built as it is written (each one's rows freed after)."""
        t = S.PROFILER_TABLES
        task = self.task_table()  # first: it numbers the tasks the others refer to
        yield from self.meta_tables()
        yield from self.enum_tables()
        yield t["TASK"], task, len(task["startNs"])
        del task
        for name, build in (("COMPUTE_TASK_INFO", self.compute_table), ("TASK_PMU_INFO", self.pmu_table),
                            ("COMMUNICATION_OP", self.communication_op_table),
                            ("COMMUNICATION_TASK_INFO", self.communication_task_table),
                            ("CANN_API", self.cann_api_table), ("MSTX_EVENTS", self.mstx_table),
                            ("MEMCPY_INFO", self.memcpy_table), ("GEPROF_COLLECTIVE", self.collective_table)):
            data, n = build()
            yield t[name], data, n
        if self.torch_npu:
            yield from self.framework_tables()
            yield from self.memory_tables()
        else:
            data, n = self.npu_op_mem_table()
            yield t["NPU_OP_MEM"], data, n
        yield from self.side_tables(side)
        yield self.strings.table()  # last: every table's texts are known by now

    def analysis_db(self, torch_npu: bool) -> list[tuple[S.Table, Columns, int]]:
        """StepTraceTime (torch_npu) and the CommAnalyzer tables."""
        p = self.profile
        ops, tasks = p.communication_time, p.hccl_tasks
        rank = self.rank or 0
        ranks = RankMap(rank, rank, int(self.world_size)) if self.world_size else RankMap.of(tasks, rank)
        groups = op_groups(p)
        time_rows, band_rows, matrix_rows = _analysis_rows(communication_json(ops, tasks, groups),
                                                           communication_matrix_json(ops, tasks, ranks, groups))
        out = []
        if torch_npu:
            b = p.step_breakdown
            steps = {"step": [str(int(v)) for v in b["Step"].tolist()] if "Step" in b.columns else []}
            steps.update({db: b[col].to_numpy(float) for db, col in S.STEP_TRACE_TIME_COLUMNS.items()
                          if col in b.columns})
            out.append((S.ANALYSIS_TABLES["StepTraceTime"], steps, len(b)))
        for name, rows in (("CommAnalyzerTime", time_rows), ("CommAnalyzerBandwidth", band_rows),
                           ("CommAnalyzerMatrix", matrix_rows)):
            table = S.ANALYSIS_TABLES[name] if torch_npu else S.msprof_analysis_table(name)
            out.append((table, {c: [r[c] for r in rows] for c in table.names}, len(rows)))
        return out


def _plain(column: pd.Series) -> object:
    """A column's values as SQLite takes them: a categorical's as texts, the rest as they are."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return [None if pd.isna(v) else str(v) for v in column.tolist()]
    return column.array if isinstance(column.dtype, pd.api.extensions.ExtensionDtype) else column.to_numpy()


def _quote(name: str) -> str:
    """An identifier as SQL quotes it."""
    return '"' + name.replace('"', '""') + '"'


def _analysis_rows(comm: dict, matrix: dict) -> tuple[list[dict], list[dict], list[dict]]:
    """communication.json / communication_matrix.json as the rows of CommAnalyzerTime, CommAnalyzerBandwidth
    and CommAnalyzerMatrix (torch_npu writes both from the same analysis); an op's ``group_name`` is the
    hash of the group of its ``<op>@<group>`` key, as msprof-analyze names groups."""
    times, bands, links = [], [], []
    hashes: dict[str, str] = {}

    def split(key: str) -> tuple[str, str]:
        name, _, group = key.rpartition("@")
        if group not in hashes:
            hashes[group] = S.group_hash(group)
        return name, hashes[group]

    for step, kinds in comm.items():
        for kind, ops in kinds.items():
            for key, op in ops.items():
                if key.startswith("Total"):
                    continue
                name, group = split(key)
                info = op["Communication Time Info"]
                times.append({"hccl_op_name": name, "group_name": group, "start_timestamp": info["Start Timestamp(us)"],
                              "elapse_time": info["Elapse Time(ms)"], "transit_time": info["Transit Time(ms)"],
                              "wait_time": info["Wait Time(ms)"],
                              "synchronization_time": info["Synchronization Time(ms)"],
                              "idle_time": info["Idle Time(ms)"], "step": step, "type": kind})
                for transport in BANDWIDTH_TYPES:
                    band = op["Communication Bandwidth Info"][transport]
                    if not band["Transit Size(MB)"] and transport != "SDMA":
                        continue
                    sizes = band["Size Distribution"].items() or [("0", [0, 0.0])]
                    for size, (count, duration) in sizes:
                        bands.append({"hccl_op_name": name, "group_name": group, "transport_type": transport,
                                      "transit_size": band["Transit Size(MB)"],
                                      "transit_time": band["Transit Time(ms)"], "bandwidth": band["Bandwidth(GB/s)"],
                                      "large_packet_ratio": band["Large Packet Ratio"], "package_size": float(size),
                                      "count": count, "total_duration": duration, "step": step, "type": kind})
    for step, kinds in matrix.items():
        for kind, ops in kinds.items():
            for key, entry in ops.items():
                name, group = split(key)
                for link, info in entry.items():
                    src, _, dst = link.partition("-")
                    links.append({"hccl_op_name": name, "group_name": group, "src_rank": src, "dst_rank": dst,
                                  "transport_type": info["Transport Type"], "transit_size": info["Transit Size(MB)"],
                                  "transit_time": info["Transit Time(ms)"], "bandwidth": info["Bandwidth(GB/s)"],
                                  "step": step, "type": kind, "op_name": info["Op Name"]})
    return times, bands, links


# ---------------------------------------------------------------------------- the exports
def export_db(profile, path: Path, rank: int = 0, worker: str | None = None, world_size: int | None = None) -> Path:
    """Write one rank as torch_npu's DB output; returns its ``*_ascend_pt`` directory.  ``world_size``: the run
    is rank ``rank`` of a cluster of that size (as for ``ascend_pt``; it adds ``distributed_args`` and
    ``parallel_group_info`` to META_DATA)."""
    rank = check_rank(rank)
    root = Path(path) / ascend_pt_dir_name(profile, worker, rank)
    out = root / OUTPUT_DIR
    out.mkdir(parents=True, exist_ok=True)
    info = profiler_info(profile, rank)
    info["config"]["experimental_config"]["_export_type"] = "db"
    write_json(root / f"profiler_info_{rank}.json", info)
    write_json(root / "profiler_metadata.json", profiler_metadata(profile, rank, world_size))
    write_device_info(profile, root)
    tables = DbTables(profile, torch_npu=True, rank=rank, world_size=world_size)
    write_db(out / f"ascend_pytorch_profiler_{rank}.db", tables.profiler_db(SIDE_TABLES["db"]), INDEXES)
    write_db(out / S.TORCH_NPU_ANALYSIS_DB, tables.analysis_db(torch_npu=True))
    return root


def export_msprof_db(profile, path: Path, rank: int | None = None, world_size: int | None = None) -> Path:
    """Write msprof's DB output of the run; returns its ``PROF_*`` directory.  ``rank``: the rank id its
    ``info.json`` gives msprof-analyze (without it, -1: the tool numbers the runs itself)."""
    if rank is not None:
        rank = check_rank(rank)
    prof = Path(path) / prof_dir_name(profile)
    dev = int(profile.device_id)
    (prof / f"device_{dev}").mkdir(parents=True, exist_ok=True)
    (prof / S.MSPROF_ANALYSIS_DB[0]).mkdir(exist_ok=True)
    tables = DbTables(profile, torch_npu=False, rank=rank, world_size=world_size)
    device = profile.device
    write_json(prof / f"device_{dev}" / f"info.json.{dev}", {
        "rank_id": -1 if rank is None else rank, "hostUid": host_uid(tables.hostname), "hostname": tables.hostname,
        "pid": str(profile.info.get("pid", "")),
        "DeviceInfo": [{"id": dev, "ai_core_num": device.get("ai_core_num"), "aiv_num": device.get("aiv_num"),
                        "aic_frequency": str(device.get("aic_frequency", ""))}]})
    write_db(prof / f"msprof_{stamp14(profile)}.db", tables.profiler_db(SIDE_TABLES["msprof_db"]), INDEXES)
    write_db(prof.joinpath(*S.MSPROF_ANALYSIS_DB), tables.analysis_db(torch_npu=False))
    return prof
