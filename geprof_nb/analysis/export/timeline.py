"""The msprof timeline of a Profile as trace events (reference §4.6).

Events are dicts in Chrome trace-event form, but with ``ts`` and ``dur`` as
exact integer ns; :mod:`.tracejson` turns them into msprof's strings or a
Chrome trace's numbers.  Processes are msprof's layers, each with
``process_name`` / ``process_labels`` / ``process_sort_index`` metadata and
the pid ``(real pid << 10) | (sort index << 5) | device id`` (device id 31
for host layers):

* ``PID Name`` (6, host): mstx markers and ranges, one thread per host thread;
* ``CANN`` (7, host): API records named ``AscendCL@``/``Model@``/``Node@``/
  ``Runtime@<api>`` (a node launch as ``Node@<op name>``);
* ``Ascend Hardware`` (14): every device task on its stream's thread
  (``Stream <id>``), and the Step Trace slices on ``Step Trace(Model ID:<m>)``;
* ``Communication`` (16): the collectives on ``Group <group> Communication``,
  their HCCL sub-tasks on ``Plane <p>`` threads;
* ``NPU MEM`` (17): memory counters (task_memory runs);
* ``Overlap Analysis`` (31): Computing / Communication /
  Communication(Not Overlapped) / Free slices of every step;
* ``HostToDevice`` flows from each node launch to the task it queued (dynamic
  graphs; a static graph's tasks are launched by one model execution and get
  no per-task flow, as in msprof).
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
import pandas as pd
import pyarrow as pa

from ..tables.communication import DEFAULT_GROUP
from . import overlap
from .tracejson import Column, EventBlock, const, dur_ns, expand, floats, ints, nested, strs, ts_ns, us_string

HOST_DEVICE = 31
#: Process sort indexes of msprof's layers (``ProcessSortIndex`` in json_trace/meta_data_event.h).
LAYERS = {"PID Name": (6, "CPU"), "CANN": (7, "CPU"), "Ascend Hardware": (14, "NPU"), "Communication": (16, "NPU"),
          "NPU MEM": (17, "NPU"), "Overlap Analysis": (31, "NPU")}
#: Step Trace threads are ``70000 + model id`` (msprof ``SORT_INDEX_OFFSET``).
STEP_TRACE_TID = 70000
#: CANN event name prefixes per api_statistic level (msprof cann_assembler ``LEVEL_MAP``).
LEVEL_PREFIX = {"acl": "AscendCL", "model": "Model", "node": "Node", "communication": "Communication",
                "runtime": "Runtime"}
UINT32_MAX = 4294967295


def _str_values(values: pd.Series) -> pa.DictionaryArray:
    """``str()`` of each value (``"nan"`` where missing), made once per distinct value."""
    codes, uniques = pd.factorize(values, use_na_sentinel=False)
    return pa.DictionaryArray.from_arrays(codes, [str(u) for u in uniques])


def format_pid(pid: int, sort_index: int, device_id: int) -> int:
    return (pid << 10) | (sort_index << 5) | device_id


def meta(pid: int, tid: int, kind: str, value) -> dict:
    key = {"process_name": "name", "thread_name": "name", "process_labels": "labels"}.get(kind, "sort_index")
    return {"name": kind, "pid": pid, "tid": tid, "ph": "M", "args": {key: value}}


def process_meta(pid: int, name: str, label: str, sort_index: int) -> list[dict]:
    return [meta(pid, 0, "process_name", name), meta(pid, 0, "process_labels", label),
            meta(pid, 0, "process_sort_index", sort_index)]


def thread_meta(pid: int, tid: int, name: str) -> list[dict]:
    """A thread's name; msprof sorts threads by their tid."""
    return [meta(pid, tid, "thread_name", name), meta(pid, tid, "thread_sort_index", tid)]


def slice_event(name: str, pid: int, tid: int, ts: int, dur: int, args: dict, cat: str | None = None) -> dict:
    event = {"name": name, "pid": pid, "tid": tid, "ts": int(ts), "dur": int(dur), "ph": "X"}
    if cat:
        event["cat"] = cat
    event["args"] = args
    return event


def flow_pair(name: str, cat: str, flow_id: str, start: tuple[int, int, int], end: tuple[int, int, int]) -> list[dict]:
    """The ``s`` and ``f`` events of a flow from (pid, tid, ts) ``start`` to the slice at ``end``."""
    return [{"name": name, "pid": start[0], "tid": start[1], "ph": "s", "cat": cat, "id": flow_id, "ts": int(start[2])},
            {"name": name, "pid": end[0], "tid": end[1], "ph": "f", "cat": cat, "id": flow_id, "ts": int(end[2]),
             "bp": "e"}]


class Timeline:
    """The layers of one Profile.  ``torch_npu``: name stream ids ``Stream Id`` in task args
    too, as torch_npu's trace_view does (msprof-analyze reads that name)."""

    def __init__(self, profile, torch_npu: bool = False) -> None:
        self.profile = profile
        self.source = profile.source
        self.device_id = int(profile.device_id)
        self.real_pid = int(profile.info.get("pid") or 0)
        self.torch_npu = torch_npu

    def pid(self, layer: str) -> int:
        device = HOST_DEVICE if LAYERS[layer][1] == "CPU" else self.device_id
        return format_pid(self.real_pid, LAYERS[layer][0], device)

    def _process(self, layer: str) -> list[dict]:
        sort_index, label = LAYERS[layer]
        return process_meta(self.pid(layer), layer, label if label == "CPU" else f"{label} {self.device_id}",
                            sort_index)

    @cached_property
    def tasks(self) -> pd.DataFrame:
        return self.source.device_tasks()

    @cached_property
    def calls(self) -> pd.DataFrame:
        return self.source.api_calls()

    def events(self) -> list[dict]:
        """Every layer, metadata first within each."""
        return expand(self.items())

    def items(self) -> list[dict | EventBlock]:
        """:meth:`events` as the layers give them: the big ones as :class:`EventBlock` columns
        (what the JSON writers take without a dict per event)."""
        return (self.tx() + self.cann() + self.hardware() + self.step_trace() + self.communication()
                + self.memory() + self.overlap() + self.host_to_device())

    # ------------------------------------------------------------------ layers
    def tx(self) -> list[dict]:
        frame = self.profile.msprof_tx
        if frame.empty:
            return []
        pid = self.pid("PID Name")
        times = self.source.times_ns("msprof_tx", frame)
        start, end = times.iloc[:, 0].to_numpy(np.int64), times.iloc[:, 1].to_numpy(np.int64)
        out = self._process("PID Name")
        for tid in sorted(set(frame["tid"].astype(int))):
            out += thread_meta(pid, tid, f"Thread {tid}")
        for r, row in enumerate(frame.itertuples(index=False)):
            out.append(slice_event(str(row.message), pid, int(row.tid), start[r], end[r] - start[r], {
                "Category": str(row.category), "Payload_type": row.payload_type, "Payload_value": row.payload_value,
                "Message_type": row.message_type, "event_type": row.event_type}))
        return out

    def cann(self) -> list[dict]:
        calls = self.calls
        if calls.empty:
            return []
        pid = self.pid("CANN")
        out = self._process("CANN")
        for tid in sorted(set(calls["thread"].astype(int))):
            out += thread_meta(pid, tid, f"Thread {tid}")
        for row in calls.itertuples(index=False):
            launch = row.level == "node" and row.connection_id >= 0
            name = f"{LEVEL_PREFIX.get(row.level, 'Api')}@{row.item if launch else row.api}"
            out.append(slice_event(name, pid, int(row.thread), row.begin, row.end - row.begin, {
                "Thread Id": int(row.thread), "Mode": row.api, "level": row.level, "id": row.api,
                "item_id": row.item, "connection_id": int(row.connection_id)}))
        return out

    def hardware(self) -> list[dict | EventBlock]:
        """Every device task as a slice on its stream's thread: one :class:`EventBlock`, and a second
        for the copy tasks whose MemcpyInfo the run recorded (their args add ``size(B)``,
        ``bandwidth(GB/s)`` and ``operation``, as msprof's MEMCPY_ASYNC tasks do)."""
        tasks = self.tasks
        if tasks.empty:
            return []
        pid = self.pid("Ascend Hardware")
        out: list[dict | EventBlock] = self._process("Ascend Hardware")
        for stream in sorted(set(tasks["stream_id"].astype(int))):
            out += thread_meta(pid, stream, f"Stream {stream}")
        copies = self.source.memcpy_info().drop_duplicates("connection_id")
        info_row = pd.Index(copies["connection_id"]).get_indexer(tasks["connection_id"]) if len(copies) else None
        if info_row is None or (info_row < 0).all():
            out.append(self._task_block(tasks, pid))
            return out
        is_copy = info_row >= 0
        if not is_copy.all():
            out.append(self._task_block(tasks[~is_copy], pid))
        copy_tasks, info = tasks[is_copy], copies.iloc[info_row[is_copy]]
        size = info["size"].to_numpy(np.int64)
        dur = copy_tasks["dur"].to_numpy(np.int64)
        with np.errstate(divide="ignore", invalid="ignore"):  # bytes per ns are GB (1e9 bytes) per s
            bandwidth = np.round(np.where(dur > 0, size / np.maximum(dur, 1), 0.0), 3)
        out.append(self._task_block(copy_tasks, pid, [("size(B)", ints(size)), ("bandwidth(GB/s)", floats(bandwidth)),
                                                      ("operation", strs(info["operation"].to_numpy(object)))]))
        return out

    def _task_block(self, tasks: pd.DataFrame, pid: int,
                    extra_args: list[tuple[str, Column]] | None = None) -> EventBlock:
        """``tasks`` (rows of :attr:`tasks`) as slices with msprof's task args, then ``extra_args``."""
        stream = tasks["stream_id"].to_numpy(np.int64)
        args = [("Model Id", ints(tasks["model_id"])), ("Task Type", strs(tasks["task_type"])),
                ("Physic Stream Id", ints(stream)), ("Task Id", ints(tasks["task_id"])), ("Batch Id", const(0)),
                ("Subtask Id", const(UINT32_MAX)), ("connection_id", ints(tasks["connection_id"]))]
        args += extra_args or []
        if self.torch_npu:
            args.append(("Stream Id", ints(stream)))
        return EventBlock(len(tasks), [("name", strs(tasks["name"])), ("pid", const(pid)),
                                       ("tid", ints(stream)), ("ts", ts_ns(tasks["start"])),
                                       ("dur", dur_ns(tasks["dur"])), ("ph", const("X")), ("args", nested(args))],
                          key=tasks["connection_id"].to_numpy(np.int64))  # a task's name, ids, type: its connection's

    def step_trace(self, with_process: bool = False) -> list[dict]:
        """The Step Trace slices (in the Ascend Hardware process); ``with_process`` adds that
        process's metadata (the standalone step_trace JSON).  A step with a GetNext span gets msprof's
        ``GetNext`` slice (category ``GetNext Time``, args ``GetNext Start`` / ``GetNext End`` /
        ``GetNext Time(us)``)."""
        frame = self.profile.step_trace
        if frame.empty:
            return []
        pid = self.pid("Ascend Hardware")
        times = self.source.times_ns("step_trace", frame)
        out = self._process("Ascend Hardware") if with_process else []
        for model in sorted(set(frame["Model ID"].astype(int))):
            out += thread_meta(pid, STEP_TRACE_TID + model, f"Step Trace(Model ID:{model})")
        reduce_cols = [i for i, c in enumerate(frame.columns) if c == "Reduce Start(us)"]
        column = {i: frame.iloc[:, i].array for i in range(frame.shape[1])}  # the values iloc gives, by position
        at = {c: i for i, c in reversed(list(enumerate(frame.columns)))}  # a name's first position
        exact = [times.iloc[:, k].array for k in range(times.shape[1])]
        get_next = [exact[list(times.columns).index(c)] for c in ("GetNext Start(us)", "GetNext End(us)")
                    if c in times.columns]

        def dur_ns(r: int, col: int | str) -> int | None:
            v = column[col if isinstance(col, int) else at[col]][r]
            return None if pd.isna(v) else int(round(float(v) * 1000))

        for r in range(len(frame)):
            it, tid = int(column[at["Iteration ID"]][r]), STEP_TRACE_TID + int(column[at["Model ID"]][r])
            fp, bp, end = (exact[k][r] for k in range(3))
            if get_next and not pd.isna(get_next[0][r]) and not pd.isna(get_next[1][r]):
                begin, finish = int(get_next[0][r]), int(get_next[1][r])
                out.append(slice_event("GetNext", pid, tid, begin, finish - begin, {
                    "GetNext Start": us_string(begin), "GetNext End": us_string(finish),
                    "GetNext Time(us)": (finish - begin) / 1000}, "GetNext Time"))
            if pd.isna(end):
                continue
            text = {k: "N/A" if pd.isna(v) else us_string(int(v))
                    for k, v in (("FP Start", fp), ("BP End", bp), ("Iteration End", end))}
            iteration = dur_ns(r, "Iteration Time(us)") or 0
            out.append(slice_event(f"Iteration {it}", pid, tid, end - iteration, iteration, {
                "Iteration ID": it, **text, "Iteration Time(us)": iteration / 1000}, "Iteration Time"))
            if not pd.isna(fp) and not pd.isna(bp):
                out.append(slice_event(f"FP_BP Time {it}", pid, tid, fp, bp - fp, {
                    "Iteration ID": it, "FP Start": text["FP Start"], "BP End": text["BP End"],
                    "FP_BP Time(us)": (bp - fp) / 1000}, "FP_BP Time"))
                out.append(slice_event(f"Iteration Refresh {it}", pid, tid, bp, end - bp, {
                    "Iteration ID": it, "BP End": text["BP End"], "Iteration End": text["Iteration End"],
                    "Iteration Refresh(us)": (end - bp) / 1000}, "Iteration Refresh"))
                aug = dur_ns(r, "Data Aug Bound(us)")
                if aug is not None:  # from the previous iteration's end to this FP start
                    out.append(slice_event(f"Data_aug Bound {it}", pid, tid, fp - aug, aug, {
                        "Iteration ID": it, "Data_aug Bound(us)": aug / 1000}, "Data_aug Bound"))
            for k, i in enumerate(reduce_cols):
                start, dur = exact[3 + k][r], dur_ns(r, i + 1)
                if pd.isna(start) or dur is None:
                    continue
                out.append(slice_event(f"Reduce_{it}_{k}", pid, tid, start, dur, {
                    "Iteration ID": it, f"Reduce Start {k}": str(int(start)),
                    f"Reduce End {k}": str(int(start) + dur)}, "Reduce"))
        return out

    def _collectives(self) -> pd.DataFrame:
        """The collective executions (:meth:`Source.communication_rows`: at task_trace l0 too), named as
        communication_time names them."""
        rows = self.source.op_rows()
        f = rows.frame
        sel = self.source.communication_rows()
        names = self.profile.communication_time["Op Name"]
        return pd.DataFrame({
            "name": names.to_numpy(object) if len(names) == sel.sum() else f["Op Name"][sel].astype(str).to_numpy(),
            "start": rows.start_ns[sel].astype(np.int64),
            "dur": np.rint(f["Task Duration(us)"].to_numpy(float)[sel] * 1000).astype(np.int64),
            "model": pd.to_numeric(f["Model ID"][sel]).to_numpy(np.int64),
            "conn": rows.connection_id[sel].astype(np.int64)})

    def communication(self) -> list[dict | EventBlock]:
        ops, sub = self._collectives(), self.profile.hccl_tasks
        if ops.empty and sub.empty:
            return []
        pid = self.pid("Communication")
        planes = sorted(set(sub["Plane ID"].astype(int))) if len(sub) else []
        out = self._process("Communication") + thread_meta(pid, 0, f"Group {DEFAULT_GROUP} Communication")
        for p in planes:
            out += thread_meta(pid, p + 1, f"Plane {p}")
        if len(ops):
            out.append(EventBlock(len(ops), [
                ("name", strs(ops["name"].to_numpy(object))), ("pid", const(pid)), ("tid", const(0)),
                ("ts", ts_ns(ops["start"])), ("dur", dur_ns(ops["dur"])), ("ph", const("X")),
                ("args", nested([("connection_id", ints(ops["conn"])), ("model id", ints(ops["model"]))]))]))
        if len(sub):
            start = self.source.times_ns("hccl_tasks", sub).iloc[:, 0].to_numpy(np.int64)
            dur = np.rint(sub["Duration(us)"].to_numpy(float) * 1000).astype(np.int64)
            name = strs(_str_values(sub["Task Name"]))
            text = {c: strs(_str_values(sub[c])) for c in ("Transport Type", "Link Type")}
            out.append(EventBlock(len(sub), [
                ("name", name), ("pid", const(pid)), ("tid", ints(sub["Plane ID"].to_numpy(np.int64) + 1)),
                ("ts", ts_ns(start)), ("dur", dur_ns(dur)), ("ph", const("X")),
                ("args", nested([
                    ("stream id", ints(sub["Stream ID"])), ("task type", name),
                    ("src rank", ints(sub["Src Rank"])), ("dst rank", ints(sub["Dst Rank"])),
                    ("transport type", text["Transport Type"]), ("size(Byte)", ints(sub["Size(Byte)"])),
                    ("link type", text["Link Type"]), ("bandwidth(GB/s)", floats(sub["Bandwidth(GB/s)"]))]))]))
        return out

    def memory(self) -> list[dict | EventBlock]:
        frame = self.profile.memory_record
        if frame.empty:
            return []
        pid = self.pid("NPU MEM")
        ts = self.source.times_ns("memory_record", frame).iloc[:, 0].to_numpy(np.int64)
        out = self._process("NPU MEM")
        out.append(EventBlock(len(frame), [
            ("name", strs(_str_values(frame["Component"]))), ("pid", const(pid)), ("tid", const(0)),
            ("ts", ts_ns(ts)), ("ph", const("C")),
            ("args", nested([("Total Allocated(MB)", floats(frame["Total Allocated(MB)"])),
                             ("Total Reserved(MB)", floats(frame["Total Reserved(MB)"]))]))]))
        return out

    def overlap(self) -> list[dict | EventBlock]:
        slices = list(overlap.overlap_slices(self.source.op_rows(), self.source.step_bounds(),
                                             self.source.communication_rows()))
        if not slices:
            return []
        pid = self.pid("Overlap Analysis")
        out: list[dict | EventBlock] = self._process("Overlap Analysis")
        for tid, kind in enumerate(overlap.KINDS):
            out += thread_meta(pid, tid, kind)
        _, kinds, start, end = zip(*slices)
        names = pd.Categorical(kinds, categories=overlap.KINDS)  # a kind's thread: its place in KINDS
        start, end = np.array(start, np.int64), np.array(end, np.int64)
        out.append(EventBlock(len(slices), [
            ("name", strs(names)), ("pid", const(pid)), ("tid", ints(names.codes)),
            ("ts", ts_ns(start)), ("dur", dur_ns(end - start)), ("ph", const("X")), ("args", nested([]))]))
        return out

    def host_to_device(self) -> list[dict]:
        """A flow from each node launch to the device task it queued (same connection id and iteration)."""
        calls, t = self.calls, self.tasks
        if calls.empty or t.empty:
            return []
        launches = calls[(calls["level"] == "node") & (calls["connection_id"] >= 0)]
        if launches.empty:  # a static graph's tasks have no node launch: no per-task table to build
            return []
        task_of = {key: r for r, key in enumerate(zip(t["connection_id"].tolist(), t["iteration"].tolist()))}
        stream, start = t["stream_id"].to_numpy(np.int64), t["start"].to_numpy(np.int64)
        cann, hw = self.pid("CANN"), self.pid("Ascend Hardware")
        out = []
        for row in launches.itertuples(index=False):
            task = task_of.get((int(row.connection_id), int(row.iteration)))
            if task is not None:
                out += flow_pair(f"HostToDevice{task}", "HostToDevice", str(task),
                                 (cann, int(row.thread), int(row.begin)), (hw, int(stream[task]), int(start[task])))
        return out
