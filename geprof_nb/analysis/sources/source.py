"""Where a Profile's tables come from.

A :class:`Source` gives a Profile its tables.  :class:`RunDirSource` builds
them from a geprof run directory's raw records; the importers (real msprof
``mindstudio_profiler_output``, torch_npu ``*_ascend_pt``, Parquet exports)
read them from files.  Tables a source cannot provide come back empty with
their columns, and the ones that follow from op_summary are derived here.
"""

from __future__ import annotations

import abc
import os
import socket
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from ...prof import rawdata
from ...prof.api_types import LAUNCH_TYPE_NAMES
from ..rundir import RunDir
from ..tables import aicpu, api, breakdown, communication, host, memory, roofline, serving, summary, tx
from ..tables import columns as C
from ..tables.collective_groups import UNKNOWN, collective_group_names
from ..tables.indexing import scatter, take_records
from ..tables.modules import INFERENCE_PHASES

#: The absolute-time columns of the tables.  The DataFrames hold them as float us, which
#: at today's epoch (~1.7e15 us) resolve only 0.25 us; exports print them from exact
#: integer ns (:meth:`Source.times_ns`).
TIMESTAMP_COLUMNS: dict[str, tuple[str, ...]] = {
    "op_summary": ("Task Start Time(us)",),
    "step_trace": ("FP Start(us)", "BP End(us)", "Iteration End(us)", "Reduce Start(us)", "GetNext Start(us)",
                   "GetNext End(us)"),
    "task_time": ("task_start(us)", "task_stop(us)"),
    "msprof_tx": ("Start_time(us)", "End_time(us)"),
    "hccl_tasks": ("Start Time(us)",),
    "operator_memory": ("Allocation Time(us)", "Release Time(us)", "Active Release Time(us)"),
    "memory_record": ("Timestamp(us)",),
}
#: :meth:`Source.api_calls`: one host API record per row (times in ns).  ``model_id`` and
#: ``iteration`` name the step a model execution ran, ``connection_id`` and ``iteration``
#: the device task a node launch queued; -1 where a record launched nothing we can name.
API_CALLS = ["level", "api", "item", "thread", "begin", "end", "model_id", "iteration", "connection_id"]
#: :meth:`Source.device_tasks`: one executed device task per row, by start (times in ns);
#: ``op`` marks the tasks that are op_summary rows.
DEVICE_TASKS = ["start", "dur", "stream_id", "task_id", "model_id", "name", "task_type", "connection_id",
                "iteration", "op"]
#: :meth:`Source.memcpy_info`: one copy task per row, by connection id: the bytes it copies and its
#: direction as msprof's timeline names it (``operation``).
MEMCPY_INFO = ["connection_id", "size", "operation"]


#: Why op_statistic is empty at task_time level 0 (:attr:`Source.task_level`).
OP_STATISTIC_L0_NOTE = ("task_trace l0 records no op basic info (OP Type and Task Type are N/A), so "
                        "op_statistic is empty, as msprof writes none at task_time level 0; "
                        "use task_trace l1 for totals per op type")


def empty(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame(columns=columns)


def _timestamp_positions(table: str, frame: pd.DataFrame) -> list[int]:
    names = TIMESTAMP_COLUMNS.get(table, ())
    return [i for i, c in enumerate(frame.columns) if c in names]


def _times_frame(frame: pd.DataFrame, positions: list[int], exact: list[np.ndarray]) -> pd.DataFrame:
    """The columns of ``frame`` at ``positions`` (float us) as nullable int ns: ``exact[k]`` (raw ns,
    -1: unknown) where it reproduces the float (``ns / 1000.0``), else the float rounded (NaN -> <NA>)."""
    cols = {}
    for k, i in enumerate(positions):
        shown = pd.to_numeric(frame.iloc[:, i], errors="coerce").to_numpy(float)
        missing = np.isnan(shown)
        values = np.rint(np.where(missing, 0.0, shown) * 1000).astype(np.int64)
        if k < len(exact) and len(exact[k]) == len(shown):
            good = (exact[k] >= 0) & (exact[k] / 1000.0 == shown)
            values[good], missing[good] = exact[k][good], False
        cols[k] = pd.arrays.IntegerArray(values, missing)
    out = pd.DataFrame(cols, index=frame.index)
    out.columns = [frame.columns[i] for i in positions]
    return out


def _candidates(ns: np.ndarray) -> np.ndarray:
    """Raw ns sorted and unique, for :func:`_match_ns` (unique by a stable sort: quick on times in
    order, where np.unique hashes, ~50x slower on a million values)."""
    cand = np.sort(np.asarray(ns, dtype=np.int64), kind="stable")
    return cand[np.append(True, cand[1:] != cand[:-1])] if len(cand) else cand


def _match_ns(values_us: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """For each float us value the raw ns it was computed from (``ns / 1000.0 == value``), -1 if none;
    ``cand``: the possible ns (:func:`_candidates`).

    Two candidates that share a float (< 0.25 us apart) are ambiguous; the smaller wins.
    """
    if len(cand) == 0:
        return np.full(len(values_us), -1, np.int64)
    keys = cand / 1000.0
    at = np.minimum(np.searchsorted(keys, values_us), len(cand) - 1)
    return np.where(keys[at] == values_us, cand[at], -1)


def _latest_call_before(call_key: np.ndarray, call_begin: np.ndarray, run_key: np.ndarray,
                        run_start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (call, run): each run (a device execution, ``run_key`` naming what ran, started at
    ``run_start`` ns) with the call of the same key that began last at or before it; a call that
    several runs reach keeps the first of them (the later ones' own calls were not recorded).

    Matched by time, not by count, so a stretch of calls or of device records that a storage
    limit aged out shifts nothing: each step is matched with its own call (execution is
    synchronous: a call's work starts on the device before the next call of the same key).
    """
    n_calls = len(call_key)
    key = np.concatenate([np.asarray(call_key, np.int64), np.asarray(run_key, np.int64)])
    time = np.concatenate([np.asarray(call_begin, np.int64), np.asarray(run_start, np.int64)])
    is_run = np.arange(len(key)) >= n_calls
    order = np.lexsort((is_run, time, key))  # by key, then time; a call before a run at the same ns
    sorted_run = is_run[order]
    last_call = np.maximum.accumulate(np.where(sorted_run, -1, np.arange(len(order))))
    at = np.flatnonzero(sorted_run)  # runs, by key then start
    p = last_call[at]
    hit = p >= 0
    hit[hit] = key[order[p[hit]]] == key[order[at[hit]]]
    calls, runs = order[p[hit]], order[at[hit]] - n_calls
    calls, first = np.unique(calls, return_index=True)  # per call its earliest run (runs are in time order)
    return calls, runs[first]


def _execution_iterations(models: np.ndarray, begins: np.ndarray, hw: np.ndarray, track: np.ndarray,
                          n_conn: int) -> np.ndarray:
    """The iteration each ModelExecute call (model ids ``models``, begun at ``begins`` ns) ran, -1: none
    on the device: the first iteration of its model whose first task started after it began
    (``hw``: the HWTS records by start; ``track``: the task track, which names each task's model)."""
    model_of_conn = scatter(n_conn, track["connection_id"], track["model_id"], -1, np.int64)
    ran_model, ran_iteration = model_of_conn[hw["connection_id"]], hw["iteration"].astype(np.int64)
    ran = (ran_model + 1) * (int(ran_iteration.max(initial=0)) + 1) + ran_iteration  # (model >= -1, iteration)
    first = np.sort(np.unique(ran, return_index=True)[1])  # each (model, iteration)'s first task
    out = np.full(len(models), -1, np.int64)
    at, hit = _latest_call_before(models, begins, ran_model[first], hw["start"][first])
    out[at] = ran_iteration[first[hit]]
    return out



def unfinalised_note(info: dict) -> str:
    """Why a run has no final status.  Its collecting process still running on this host means it may
    still be collecting (or could not write its final info.json), not that it crashed."""
    pid = info.get("pid")
    if isinstance(pid, int) and pid > 0 and info.get("hostname") == socket.gethostname() and _alive(pid):
        return (f"the run was not finalised: its collecting process (pid {pid}) is still running, so it may "
                "still be collecting: tables hold what was flushed so far")
    return "the run was not finalised (crash or kill?): tables hold what was flushed"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by someone else
        pass
    return True

class Source(abc.ABC):
    """The tables of one device of one profiling run."""

    device_id: int = 0

    @property
    @abc.abstractmethod
    def path(self) -> Path:
        """The directory the data was read from."""

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def info(self) -> dict:
        """Run description (options, devices, status...); what the format records of it."""
        return {}

    @property
    def options(self) -> dict:
        return self.info.get("options") or {}

    @property
    def device(self) -> dict:
        return (self.info.get("devices") or {}).get(str(self.device_id), {})

    @property
    def complete(self) -> bool:
        return True

    def notes(self) -> list[str]:
        return []

    def forward_only_models(self) -> frozenset[int]:
        """The Model IDs that run forward only (inference: no backward pass), from the run description's
        ``models`` (what the simulated runtime writes into info.json, and the Parquet export keeps); empty
        where the data does not say (msprof and torch_npu output do not)."""
        models = self.info.get("models")
        if not isinstance(models, dict):
            return frozenset()
        return frozenset(int(k) for k, m in models.items()
                         if str(k).isdigit() and isinstance(m, dict) and m.get("training") is False)

    def model_phases(self) -> dict[int, str]:
        """The inference engine step (``prefill`` or ``decode``) each Model ID of a serving run runs, from the
        run description's ``models``; empty where no model says (training, other inference, imported data)."""
        models = self.info.get("models")
        if not isinstance(models, dict):
            return {}
        return {int(k): str(m["phase"]) for k, m in models.items()
                if str(k).isdigit() and isinstance(m, dict) and m.get("phase") in INFERENCE_PHASES}

    def dropped(self) -> dict[str, int]:
        return {}

    @property
    def task_level(self) -> str:
        """The task_time level the op data was collected at: ``"l0"`` (no op basic info) or ``"l1"``.

        Read from the data here: l0 when there are op rows and none but the collectives knows its
        Task Type (torch_npu's Level0 labels its collectives' Accelerator Core and nothing else).
        """
        f = self.op_rows().frame
        types = f["Task Type"].astype(str) if "Task Type" in f.columns else pd.Series([], dtype=str)
        known = (types != summary.NA) & (types != "COMMUNICATION")
        return "l0" if len(f) and not known.any() else "l1"

    # --------------------------------------------------------------- tables
    @abc.abstractmethod
    def op_rows(self) -> summary.OpRows:
        """op_summary with each row's iteration and exact start time."""

    def span_rows(self) -> summary.OpRows:
        """The op rows with at least :data:`..tables.summary.SPAN_COLUMNS`, what step_breakdown and the collective
        tables read (here op_summary's own rows)."""
        return self.op_rows()

    def communication_rows(self) -> np.ndarray:
        """Which op_summary rows are collectives (bool per row)."""
        return breakdown.communication_rows(self.span_rows())

    def op_statistic(self) -> pd.DataFrame:
        """Per OP Type and Core Type totals; empty at task level l0 (:data:`OP_STATISTIC_L0_NOTE`)."""
        if self.task_level == "l0":
            return empty(C.OP_STATISTIC)
        return summary.op_statistic(self.op_rows().frame)

    def step_trace(self) -> pd.DataFrame:
        return empty(C.STEP_TRACE)

    def step_bounds(self) -> pd.DataFrame:
        """(step, begin, end) in ns of every iteration of the main model; a source that knows when the
        framework began each step (its ModelExecute call, a ProfilerStep) adds ``framework_begin`` (-1: not
        known), from which step_breakdown's Preparing counts."""
        return breakdown.bounds_from_step_trace(self.step_trace())

    def task_time(self) -> pd.DataFrame:
        return empty(summary.TASK_TIME)

    def api_statistic(self) -> pd.DataFrame:
        return empty(api.API_STATISTIC)

    def host_events(self) -> pd.DataFrame:
        return empty(host.HOST_EVENTS)

    def msprof_tx(self) -> pd.DataFrame:
        return empty(tx.MSPROF_TX)

    def serving_requests(self) -> pd.DataFrame:
        """A serving run's requests (``ge.serve``); empty where the data has none."""
        return empty(serving.SERVING_REQUESTS)

    def serving_steps(self) -> pd.DataFrame:
        """A serving run's engine steps (``ge.serve``); empty where the data has none."""
        return empty(serving.SERVING_STEPS)

    def communication_statistic(self) -> pd.DataFrame:
        """Per collective type, over :meth:`communication_rows` (which knows them at task level l0 too)."""
        return communication.communication_statistic(None, self.device_id, self.span_rows(),
                                                     self.communication_rows())

    def hccl_tasks(self) -> pd.DataFrame:
        return empty(communication.HCCL_TASKS)

    def communication_time(self) -> pd.DataFrame:
        return empty(communication.COMMUNICATION_TIME)

    def collective_groups(self) -> np.ndarray | None:
        """The communicator name of every communication_time row's group; None when the source does not
        know them (every collective is then in the world group)."""
        return None

    def aicpu(self) -> pd.DataFrame:
        return empty(aicpu.AICPU)

    def operator_memory(self) -> pd.DataFrame:
        return empty(memory.OPERATOR_MEMORY)

    def memory_record(self) -> pd.DataFrame:
        return empty(memory.MEMORY_RECORD)

    def tensor_lifetimes(self) -> pd.DataFrame:
        """Allocations with their pool addresses (:data:`memory.TENSOR_LIFETIMES`); raw runs only."""
        return empty(memory.TENSOR_LIFETIMES)

    def memory_peak(self) -> memory.MemoryPeak | None:
        return None

    def cost_terms(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Per op_summary row, what the device cost model needs to re-cost its kernel on another device:
        (found, ``op_cost`` records of the rows found, in row order); ``None`` where the data holds none (real
        msprof and torch_npu output have no such record)."""
        return None

    def op_work(self, roofs: roofline.Roofs) -> pd.DataFrame:
        """Per op_summary row, what the roofline needs (:data:`..tables.roofline.WORK_COLUMNS`): here from the
        PMU columns the files hold (:func:`..tables.roofline.pmu_work`)."""
        return roofline.pmu_work(self.op_rows().frame, self.device, roofs)

    def step_memory(self, iteration: int) -> memory.StepMemory | None:
        """The memory tables of one step, built without the other steps; ``None`` where they cannot
        be (imported tables do not tell steps apart)."""
        return None

    def step_breakdown_table(self) -> pd.DataFrame | None:
        """The per-step split as the source recorded it (torch_npu ``step_trace_time.csv``), or
        ``None`` when it is to be computed from the op rows and step bounds."""
        return None

    # --------------------------------------------- exact times, host calls, device tasks
    def times_ns(self, table: str, frame: pd.DataFrame) -> pd.DataFrame:
        """Exact int ns of ``frame``'s :data:`TIMESTAMP_COLUMNS` (same rows, columns by position,
        so step_trace's repeated ``Reduce Start(us)`` stay apart; ``<NA>`` where the float is NaN).

        ``frame`` is the source's ``table``.  Here the floats are rounded: imported data holds
        no more than its files printed.
        """
        return _times_frame(frame, _timestamp_positions(table, frame), [])

    def api_calls(self) -> pd.DataFrame:
        """Every host API record (:data:`API_CALLS`); only raw runs have them."""
        return empty(API_CALLS)

    def device_tasks(self) -> pd.DataFrame:
        """Every executed device task (:data:`DEVICE_TASKS`); here: op_summary's rows."""
        rows = self.op_rows()
        f = rows.frame

        def ints(col: str) -> np.ndarray:
            return pd.to_numeric(f[col], errors="coerce").fillna(-1).to_numpy(np.int64)

        return pd.DataFrame({
            "start": rows.start_ns.astype(np.int64),
            "dur": np.rint(f["Task Duration(us)"].to_numpy(float) * 1000).astype(np.int64),
            "stream_id": ints("Stream ID"), "task_id": ints("Task ID"), "model_id": ints("Model ID"),
            "name": f["Op Name"].astype(str).to_numpy(object), "task_type": f["Task Type"].astype(str).to_numpy(object),
            "connection_id": rows.connection_id.astype(np.int64), "iteration": rows.iteration.astype(np.int64),
            "op": np.ones(len(f), bool),
        })[DEVICE_TASKS]

    def memcpy_info(self) -> pd.DataFrame:
        """The copy tasks' size and direction (:data:`MEMCPY_INFO`); only runs that recorded the
        runtime's MemcpyInfo have them."""
        return empty(MEMCPY_INFO)

    def collective_group_kinds(self) -> np.ndarray:
        """Per op_summary row, the kind of communication group (``tp``, ``dp``, ...) its collective ran in
        (:mod:`..tables.collective_groups`); :data:`~..tables.collective_groups.UNKNOWN` for other rows and
        where the source does not say (imported runs: their files name no group per op)."""
        return np.full(len(self.op_rows().frame), UNKNOWN, object)


class RunDirSource(Source):
    """A geprof run directory: every table, from the raw records."""

    def __init__(self, run: RunDir, device_id: int = 0) -> None:
        self.run = run
        self.device_id = device_id

    @property
    def path(self) -> Path:
        return self.run.path

    @property
    def info(self) -> dict:
        return self.run.info

    @property
    def options(self) -> dict:
        return self.run.options

    @property
    def device(self) -> dict:
        return self.run.device_info(self.device_id)

    @property
    def complete(self) -> bool:
        return self.run.complete

    def notes(self) -> list[str]:
        info = self.info
        notes = []
        if not self.complete:
            notes.append(unfinalised_note(info))
        if info.get("note"):
            notes.append(str(info["note"]))
        aged = info.get("aged_out") or {}
        if aged.get("chunks"):
            limit = self.options.get("storage_limit", "")
            recs = ", ".join(f"{n} {k}" for k, n in aged["records"].items())
            size = f"{aged['bytes'] / 1e6:.1f} MB" if aged["bytes"] >= 1e5 else f"{aged['bytes'] / 1e3:.1f} kB"
            gone = ("no task records remain (every hwts chunk aged out)"
                    if aged["records"].get("hwts") and len(self.run.load("hwts", self.device_id)) == 0
                    else "early iterations are missing")
            notes.append(f"storage_limit {limit} reached: the {aged['chunks']} oldest chunks "
                         f"({size}: {recs} records) were deleted; {gone}")
        for kind, n in (info.get("dropped") or {}).items():
            notes.append(f"{n} {kind} records were dropped (buffer full)")
        for kind, n in (info.get("write_failed") or {}).items():
            if kind == rawdata.HASH_DICT_KIND:
                notes.append(f"{n} names of the hash dictionary could not be written to the run directory (disk full "
                             "or not writable): the records that use them show <unknown 0x...>")
            elif kind == rawdata.RANKS_KIND:
                notes.append(f"{n} ranks of the simulated cluster could not be written (their run directories could "
                             "not be made: disk full or not writable): they are not in the cluster")
            else:
                notes.append(f"{n} {kind} records could not be written to the run directory (disk full or not "
                             "writable)")
        notes.extend(info.get("notes") or [])
        repeated = summary.repeated_steps(self.run, self.device_id)
        if repeated:
            (model, iteration), n = next(iter(repeated.items()))
            notes.append(f"step_trace: {len(repeated)} (Model ID, Iteration ID) pairs were recorded by more than one "
                         f"step (model {model} iteration {iteration}: {n} model starts), a model id that came back "
                         "with its iterations restarting: each pair's row and op rows fold those steps together")
        notes.extend(self.run.salvage_notes())
        self.run.hashes  # noqa: B018 - reading the dictionary lists its damaged lines
        if self.run.damaged:
            notes.append(f"damaged files skipped: {', '.join(self.run.damaged)}")
        notes.extend(self.run.missing)
        return notes

    def dropped(self) -> dict[str, int]:
        out = dict(self.info.get("dropped") or {})
        for kind, n in (self.info.get("write_failed") or {}).items():
            out[f"{kind} (not written)"] = n
        for kind, n in ((self.info.get("aged_out") or {}).get("records") or {}).items():
            out[f"{kind} (aged out)"] = n
        return out

    @cached_property
    def _rows(self) -> summary.OpRows:
        return summary.op_rows(self.run, self.device_id)

    def op_rows(self) -> summary.OpRows:
        return self._rows

    @cached_property
    def _spans(self) -> summary.OpRows:
        return summary.op_spans(self.run, self.device_id)

    def span_rows(self) -> summary.OpRows:
        """op_summary's rows when they are built, else :func:`..tables.summary.op_spans` (the same rows and
        values, without the columns nothing here reads): a cluster's step and collective tables need
        not build every rank's op_summary."""
        return self._rows if "_rows" in self.__dict__ else self._spans

    @property
    def task_level(self) -> str:
        """The run's ``task_trace`` option (``on`` is l1)."""
        level = str(self.options.get("task_trace", "on"))
        return "l1" if level == "on" else level

    def communication_rows(self) -> np.ndarray:
        """Collectives by op_summary's Task Type or, where it is N/A (task_trace l0), by the
        device's own task type (HCCL in the task track)."""
        track = self.run.load("task_track", self.device_id)
        hccl = track["connection_id"][track["task_type"] == rawdata.RtTaskType.HCCL].astype(np.int64)
        rows = self.span_rows()
        return breakdown.communication_rows(rows) | np.isin(rows.connection_id, hccl)

    def step_trace(self) -> pd.DataFrame:
        return summary.step_trace(self.run, self.device_id)

    def step_bounds(self) -> pd.DataFrame:
        """:func:`..tables.summary.step_bounds` and ``framework_begin``: when the host began the step, the begin
        of the ModelExecute call that ran it (the ascend_pt export's ``ProfilerStep#<n>``; -1 where the
        run recorded none), from which step_breakdown's Preparing counts.  A copy of one frame per
        source: step_breakdown, the overlap layer and the ProfilerSteps of an export each ask for it."""
        return self._step_bounds.copy()

    @cached_property
    def _step_bounds(self) -> pd.DataFrame:
        bounds = summary.step_bounds(self.run, self.device_id)
        if bounds.empty:
            bounds["framework_begin"] = np.zeros(0, np.int64)
            return bounds
        iterations, begins = self._execution_begins(int(bounds["model"].iloc[0]))
        at = pd.Index(iterations).get_indexer(bounds["step"].to_numpy(np.int64))
        bounds["framework_begin"] = np.where(at >= 0, np.append(begins, -1)[at], -1).astype(np.int64)
        return bounds

    def _execution_begins(self, main_model: int) -> tuple[np.ndarray, np.ndarray]:
        """(iteration, begin ns) of the first ModelExecute call of each iteration of ``main_model`` (the
        model the steps count, :func:`..tables.summary.step_bounds`)."""
        run = self.run
        calls = self._host_calls
        none = (np.zeros(0, np.int64), np.zeros(0, np.int64))
        if calls.empty:
            return none
        model_level = (calls["level"] == rawdata.ReportLevel.MODEL).to_numpy()
        types = np.unique(calls["type"].to_numpy(np.int64)[model_level]).tolist()
        execute_types = [t for t in types if api.api_name(run, int(rawdata.ReportLevel.MODEL), t) == "ModelExecute"]
        calls = calls[model_level & calls["type"].isin(execute_types).to_numpy()].sort_values("begin", kind="stable")
        if calls.empty:
            return none
        hw = run.load("hwts", self.device_id)
        hw = take_records(hw, np.argsort(hw["start"], kind="stable"))
        track = run.load("task_track", self.device_id)
        n_conn = 1 + max(int(track["connection_id"].max(initial=0)), int(hw["connection_id"].max(initial=0)))
        model = calls["item_id"].to_numpy(np.uint64).astype(np.int64)
        iteration = _execution_iterations(model, calls["begin"].to_numpy(np.int64), hw, track, n_conn)
        mine = (model == main_model) & (iteration >= 0)
        iteration, first = np.unique(iteration[mine], return_index=True)  # the first call of each iteration
        return iteration, calls["begin"].to_numpy(np.int64)[mine][first]

    def task_time(self) -> pd.DataFrame:
        return summary.task_time(self.run, self.device_id)

    @cached_property
    def _host_calls(self) -> pd.DataFrame:
        """:func:`.api.api_calls` of the run, read and paired once: api_statistic, api_calls and the
        step bounds all start from it (not changed by any of them)."""
        return api.api_calls(self.run)

    def api_statistic(self) -> pd.DataFrame:
        return api.api_statistic(self.run, self._host_calls)

    def host_events(self) -> pd.DataFrame:
        return host.host_events(self.run)

    def msprof_tx(self) -> pd.DataFrame:
        return tx.msprof_tx(self.run, self.device_id)

    def serving_requests(self) -> pd.DataFrame:
        return serving.serving_requests(self.run.load("serving_request"))

    def serving_steps(self) -> pd.DataFrame:
        rows = self.span_rows()
        start = rows.start_ns.astype(np.int64)
        end = start + np.rint(rows.frame["Task Duration(us)"].to_numpy(float) * 1000).astype(np.int64)
        return serving.serving_steps(self.run.load("serving_step"), start, end, self.communication_rows())

    @cached_property
    def _collective_tasks(self) -> communication.CollectiveTasks:
        return communication.collective_tasks(self.run, self.device_id, self.span_rows())

    def hccl_tasks(self) -> pd.DataFrame:
        return communication.hccl_tasks(self.run, joined=self._collective_tasks)

    def communication_time(self) -> pd.DataFrame:
        return communication.communication_time(self.run, joined=self._collective_tasks)

    def collective_groups(self) -> np.ndarray | None:
        return communication.collective_groups(self.run, self.device_id, self._collective_tasks)

    def aicpu(self) -> pd.DataFrame:
        return aicpu.aicpu(self.run, self.device_id)

    def operator_memory(self) -> pd.DataFrame:
        return memory.operator_memory(self.run, self.device_id)

    def memory_record(self) -> pd.DataFrame:
        return memory.memory_record(self.run, self.device_id)

    def tensor_lifetimes(self) -> pd.DataFrame:
        return memory.tensor_lifetimes(self.run, self.device_id)

    def memory_peak(self) -> memory.MemoryPeak | None:
        return memory.memory_peak(self.run, self.device_id)

    def op_work(self, roofs: roofline.Roofs) -> pd.DataFrame:
        """The cost model's own counts of each op task (``op_cost`` records); a run recorded without them (an
        older geprof) reads the PMU columns as imported data does."""
        costs = self.run.load("op_cost", self.device_id)
        if not len(costs):
            return super().op_work(roofs)
        return roofline.cost_work(self.op_rows().connection_id, costs)

    def cost_terms(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The ``op_cost`` records of the op rows (see :meth:`Source.cost_terms`); ``None`` for a run recorded
        without them (an older geprof's records, of another layout, are skipped as damaged)."""
        costs = self.run.load("op_cost", self.device_id)
        if not len(costs):
            return None
        return roofline.cost_records(self.op_rows().connection_id, costs)

    def step_memory(self, iteration: int) -> memory.StepMemory | None:
        return memory.step_memory(self.run, self.device_id, iteration)

    # --------------------------------------------- exact times, host calls, device tasks
    def times_ns(self, table: str, frame: pd.DataFrame) -> pd.DataFrame:
        """Exact int ns from the raw records (see :meth:`Source.times_ns`).

        Each value is kept only where it reproduces the table's float (``ns / 1000.0``), so a
        table built differently from the raw order falls back to rounding instead of lying.
        """
        return _times_frame(frame, _timestamp_positions(table, frame), self._raw_times(table, frame))

    def _raw_times(self, table: str, frame: pd.DataFrame) -> list[np.ndarray]:
        """int ns per timestamp column of ``table``, in the table's row order (-1: unknown)."""
        run, dev = self.run, self.device_id
        if table == "op_summary":
            return [self._rows.start_ns.astype(np.int64)]
        if table == "task_time":
            hw = run.load("hwts", dev)
            hw = hw[np.argsort(hw["start"], kind="stable")]
            start = hw["start"].astype(np.int64)
            return [start, start + hw["dur"].astype(np.int64)]
        if table == "msprof_tx":
            rec = run.load("mstx")
            rec = rec[np.argsort(rec["start"] / 1000.0, kind="stable")]
            return [rec["start"].astype(np.int64), rec["end"].astype(np.int64)]
        if table == "hccl_tasks":
            rec = run.load("hccl_task", dev)
            return [np.sort(rec["start"].astype(np.int64), kind="stable")]
        if table == "memory_record":
            return [memory.event_times(run, dev)]
        positions = _timestamp_positions(table, frame)
        if table == "operator_memory":
            stamps = _candidates(memory.event_times(run, dev))
            return [_match_ns(frame.iloc[:, i].to_numpy(float), stamps) for i in positions]
        if table == "step_trace":
            tr = run.load("step_trace", dev)
            get_next = np.unique(tr["tag_id"][tr["tag_id"] >= rawdata.GET_NEXT_START_TAG]).astype(np.int64)
            get_next_start = (get_next - rawdata.GET_NEXT_START_TAG) % 2 == 0
            tags = {"FP Start(us)": [rawdata.FP_TAG], "BP End(us)": [rawdata.BP_TAG],
                    "Iteration End(us)": [rawdata.ITER_END_TAG, rawdata.MODEL_END_TAG],
                    "GetNext Start(us)": get_next[get_next_start].tolist(),
                    "GetNext End(us)": get_next[~get_next_start].tolist()}
            out, reduce = [], 0
            for i in positions:
                name = frame.columns[i]
                if name == "Reduce Start(us)":
                    wanted, reduce = [rawdata.ALL_REDUCE_START_TAG + 2 * reduce], reduce + 1
                else:
                    wanted = tags[name]
                values = frame.iloc[:, i].to_numpy(float)
                ns = np.full(len(values), -1, np.int64)
                for tag in wanted:  # the first tag that explains a value wins, as in the table
                    todo = ns < 0
                    ns[todo] = _match_ns(values[todo], _candidates(tr["timestamp"][tr["tag_id"] == tag]))
                out.append(ns)
            return out
        return []

    def api_calls(self) -> pd.DataFrame:
        """Every MsprofApi record and paired MsprofEvent, with what each launched.

        A node-level launch record names its op (item id = op name hash); the k-th launch of an
        op queued the k-th execution of that op's tasks (HWTS order).  A model-level
        ModelExecute record (item id = model id) ran the k-th profiled iteration of its model.
        """
        run = self.run
        calls = self._host_calls
        if calls.empty:
            return empty(API_CALLS)
        calls = calls.sort_values("begin", kind="stable").reset_index(drop=True)
        level = calls["level"].to_numpy(np.int64)
        names = {(lv, t): api.api_name(run, lv, t) for lv, t in set(zip(level.tolist(), calls["type"].tolist()))}
        api_name = np.array([names[(lv, t)] for lv, t in zip(level.tolist(), calls["type"].tolist())], dtype=object)
        item_id = calls["item_id"].to_numpy(np.uint64)
        node = level == rawdata.ReportLevel.NODE
        item = np.array([run.hashes.get(int(h), str(int(h))) if n else str(int(h)) for h, n in zip(item_id, node)],
                        dtype=object)
        n = len(calls)
        model_id, iteration, connection = (np.full(n, -1, np.int64) for _ in range(3))

        hw = run.load("hwts", self.device_id)
        hw = hw[np.argsort(hw["start"], kind="stable")]
        track = run.load("task_track", self.device_id)
        basic = run.load("node_basic_info")
        n_conn = 1 + max(int(track["connection_id"].max(initial=0)), int(hw["connection_id"].max(initial=0)),
                         int(basic["connection_id"].max(initial=0)))
        # node launches -> (connection, iteration): a launch of an op <-> the first execution of its tasks after it
        launch = np.flatnonzero(node & np.isin(api_name, LAUNCH_TYPE_NAMES))
        op_of_conn = scatter(n_conn, basic["connection_id"], basic["op_name"], 0, np.uint64)
        op = op_of_conn[hw["connection_id"]]
        execs = np.flatnonzero(op != 0)
        begin = calls["begin"].to_numpy(np.int64)
        at, hit = _latest_call_before(item_id[launch].view(np.int64), begin[launch], op[execs].view(np.int64),
                                      hw["start"][execs])
        connection[launch[at]] = hw["connection_id"][execs[hit]]
        iteration[launch[at]] = hw["iteration"][execs[hit]]
        # model executions -> (model, iteration): a ModelExecute <-> its model's first iteration on the device after it
        execute = np.flatnonzero((level == rawdata.ReportLevel.MODEL) & (api_name == "ModelExecute"))
        model_id[execute] = item_id[execute].astype(np.int64)
        iteration[execute] = _execution_iterations(model_id[execute], begin[execute], hw, track, n_conn)

        return pd.DataFrame({
            "level": [rawdata.LEVEL_NAMES.get(int(lv), str(lv)) for lv in level], "api": api_name, "item": item,
            "thread": calls["thread"].to_numpy(np.int64), "begin": calls["begin"].to_numpy(np.int64),
            "end": calls["end"].to_numpy(np.int64), "model_id": model_id, "iteration": iteration,
            "connection_id": connection,
        })[API_CALLS]

    def device_tasks(self) -> pd.DataFrame:
        """Every HWTS task: kernels by their op name and GE task type, runtime tasks
        (event record/wait, memcpy) by their runtime task type."""
        run = self.run
        hw = run.load("hwts", self.device_id)
        track = run.load("task_track", self.device_id)
        basic = run.load("node_basic_info")
        hw = hw[np.argsort(hw["start"], kind="stable")]
        n_conn = 1 + max(int(track["connection_id"].max(initial=0)), int(hw["connection_id"].max(initial=0)),
                         int(basic["connection_id"].max(initial=0)))
        conn = hw["connection_id"].astype(np.int64)
        kernel = scatter(n_conn, track["connection_id"], track["kernel_name"], 0, np.uint64)
        rt = scatter(n_conn, track["connection_id"], track["task_type"], -1, np.int64)
        ge_type = scatter(n_conn, basic["connection_id"], basic["task_type"], -1, np.int64)
        rt_types, rt_of = np.unique(rt, return_inverse=True)  # each runtime task type named once
        rt_name = np.array(rawdata.rt_task_type_names(rt_types.tolist()), dtype=object)[rt_of.ravel()]
        name = np.array([run.hashes.get(int(h), f"<unknown 0x{int(h):016x}>") if h else r
                         for h, r in zip(kernel, rt_name)], dtype=object)
        task_type = np.array([rawdata.GE_TASK_TYPE_NAMES.get(int(g), r) if g >= 0 else r
                              for g, r in zip(ge_type, rt_name)], dtype=object)
        op = (kernel != 0) & ~np.isin(ge_type, [int(rawdata.GeTaskType.WRITE_BACK), int(rawdata.GeTaskType.INVALID)])

        def per_task(texts: np.ndarray) -> pd.Categorical:  # a text per connection: a category per text
            codes, categories = pd.factorize(texts)
            return pd.Categorical.from_codes(codes[conn], categories)

        return pd.DataFrame({
            "start": hw["start"].astype(np.int64), "dur": hw["dur"].astype(np.int64),
            "stream_id": scatter(n_conn, track["connection_id"], track["stream_id"], -1, np.int64)[conn],
            "task_id": scatter(n_conn, track["connection_id"], track["task_id"], -1, np.int64)[conn],
            "model_id": scatter(n_conn, track["connection_id"], track["model_id"], -1, np.int64)[conn],
            "name": per_task(name), "task_type": per_task(task_type), "connection_id": conn,
            "iteration": hw["iteration"].astype(np.int64), "op": op[conn],
        })[DEVICE_TASKS]

    def collective_group_kinds(self) -> np.ndarray:
        """From the run's ``hccl_op`` records and info.json's ``parallel.parallel_group_info``."""
        groups = (self.info.get("parallel") or {}).get("parallel_group_info") or {}
        return collective_group_names(self.run.load("hccl_op", self.device_id), self.run.hashes, groups,
                                      self.op_rows().connection_id)

    def memcpy_info(self) -> pd.DataFrame:
        """The ``memcpy_info`` records of the device (none in runs from before they were written)."""
        rec = self.run.load("memcpy_info", self.device_id)
        names = rawdata.MEMCPY_DIRECTION_NAMES
        return pd.DataFrame({
            "connection_id": rec["connection_id"].astype(np.int64), "size": rec["size"].astype(np.int64),
            "operation": np.array([names.get(int(d), "N/A") for d in rec["direction"]], dtype=object),
        })[MEMCPY_INFO]
