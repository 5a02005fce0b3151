"""Static memory plans + the task log -> torch_npu's memory tables (``operator_memory.csv``,
``memory_record.csv``) and the peak of allocated memory.

A static model's plan is reported once (``static_op_mem``): every tensor has a
fixed place in its model's pool, allocated when its producer task starts and
released when its last reader's task ends (or at the end of the step).  Each
step's events are those tasks' times in the HWTS log, so memory costs nothing
per step to collect.  There is no caching allocator in between, so torch_npu's
"Active" columns (memory still held by the caching allocator after a release)
equal the plain ones here.  With several models on a device the totals are the
device's: the sum over models of each model's latest totals (a model counts
from its first event on).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...prof import rawdata
from ..rundir import RunDir

OPERATOR_MEMORY = [
    "Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)", "Active Release Time(us)", "Duration(us)",
    "Active Duration(us)", "Allocation Total Allocated(MB)", "Allocation Total Reserved(MB)",
    "Allocation Total Active(MB)", "Release Total Allocated(MB)", "Release Total Reserved(MB)",
    "Release Total Active(MB)", "Stream Ptr", "Device Type",
]
MEMORY_RECORD = [
    "Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)", "Total Active(MB)", "Stream Ptr",
    "Device Type",
]
#: :func:`tensor_lifetimes`: one row per allocation with its place in its model's pool
#: (``Address``: byte offset from the pool start), in allocation order like ``operator_memory``.
TENSOR_LIFETIMES = [
    "Name", "Model ID", "Address", "Size(KB)", "Allocation Time(us)", "Release Time(us)", "Duration(us)", "Stream ID",
]
#: torch_npu's component name for memory the graph engine manages.
COMPONENT_GE = "GE"
MB = 1024 * 1024


@dataclass(frozen=True)
class MemoryPeak:
    """The most memory allocated on a device at once, and when."""

    allocated_bytes: int
    reserved_bytes: int  # reserved at that moment
    timestamp_ns: int
    tensor: str  # the allocation that reached the peak
    model_id: int

    @property
    def time_us(self) -> float:
        return self.timestamp_ns / 1000.0


@dataclass(frozen=True)
class StepMemory:
    """The memory tables of one step (``iteration``), or of the whole run (``iteration`` None) for
    data whose tables do not tell steps apart (imported ones)."""

    iteration: int | None
    operator_memory: pd.DataFrame
    memory_record: pd.DataFrame
    tensor_lifetimes: pd.DataFrame
    peak: MemoryPeak | None


def step_memory(run: RunDir, device_id: int, iteration: int) -> StepMemory | None:
    """Step ``iteration``'s rows of the memory tables and its own peak, without the whole run's tables;
    ``None`` when the device runs several models (the time of one model's step holds steps of the
    others with other numbers: read the whole tables)."""
    if len(np.unique(run.load("static_op_mem", device_id)["model_id"])) > 1:
        return None
    return StepMemory(iteration, operator_memory(run, device_id, iteration), memory_record(run, device_id, iteration),
                      tensor_lifetimes(run, device_id, iteration), memory_peak(run, device_id, iteration))


@dataclass(frozen=True)
class _Events:
    """A device's memory events in time order: each event's tensor (its row of the static plan),
    whether it allocates, its time and the device totals after it (columns: a record array of
    them was slow to fill and to sort)."""

    plan: np.ndarray  # STATIC_OP_MEM records
    row: np.ndarray  # int64: the event's tensor, a plan row
    alloc: np.ndarray  # bool: an allocation, else a release
    timestamp: np.ndarray  # int64 ns
    allocated: np.ndarray  # int64 bytes
    reserved: np.ndarray  # int64 bytes
    step: np.ndarray  # int64: the iteration of the event's step

    def __len__(self) -> int:
        return len(self.row)

    def of(self, field: str, events: np.ndarray) -> np.ndarray:
        """The plan's ``field`` of the tensors of ``events``."""
        return self.plan[field][self.row[events]]

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Each allocation's event and its release's (-1 if none), in allocation order: an allocation
        pairs with the next event of the same tensor (model, name and address) when that event is a
        release."""
        n = len(self.row)
        places = np.stack([self.plan["model_id"], self.plan["tensor"], self.plan["addr"]], axis=1).astype(np.uint64)
        slot = np.unique(places, axis=0, return_inverse=True)[1].reshape(-1)[self.row]  # a number per tensor
        small = np.min_scalar_type(int(slot.max(initial=0)))  # 16 bits or less: numpy's radix sort
        order = np.argsort(slot.astype(small), kind="stable")
        slot = slot[order]
        is_alloc = self.alloc[order]
        same_next = np.zeros(n, bool)
        same_next[:-1] = (slot[1:] == slot[:-1]) & ~is_alloc[1:]
        alloc_pos = order[is_alloc]
        release_pos = np.where(same_next[is_alloc], order[np.minimum(np.flatnonzero(is_alloc) + 1, n - 1)], -1)
        rows = np.argsort(alloc_pos, kind="stable")
        return alloc_pos[rows], release_pos[rows]


def _join(keys: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every pair (i, j) with ``keys[i] == wanted[j]`` (a one-to-many join), as two index arrays."""
    order = np.argsort(keys, kind="stable")
    lo = np.searchsorted(keys[order], wanted, "left")
    hi = np.searchsorted(keys[order], wanted, "right")
    counts = hi - lo
    j = np.repeat(np.arange(len(wanted)), counts)
    first = np.repeat(lo - np.cumsum(counts) + counts, counts)
    return order[np.arange(len(j)) + first], j


def _step_events(run: RunDir, device_id: int, iteration: int | None = None) -> tuple[np.ndarray, ...]:
    """Each planned tensor's alloc and free in every step whose tasks are in the task log (with
    ``iteration``: in the steps of that number only), in time order: the plan, each event's plan row,
    whether it allocates, its time, its model's allocated total after it and its step.

    Events at the same ns are ordered causally, as the device ran them: an alloc at the
    start of task ``c`` ranks ``2c``, a free at the end of task ``c`` ``2c + 1`` (so a
    kernel's released inputs come before the output the next kernel allocates in the
    same place), a free held to the step's end last.
    """
    plan = run.load("static_op_mem", device_id)
    hw = run.load("hwts", device_id)
    if iteration is not None:
        hw = hw[hw["iteration"] == iteration]
    if not len(plan) or not len(hw):
        none = np.empty(0, np.int64)
        return plan, none, np.empty(0, bool), none, none, none
    start = hw["start"].astype(np.int64)
    end = start + hw["dur"].astype(np.int64)
    iteration = hw["iteration"].astype(np.int64)
    conn = hw["connection_id"].astype(np.int64)
    # allocs: a task start per tensor it produces, in every step the task ran
    a_tensor, a_task = _join(plan["alloc_conn"].astype(np.int64), conn)
    # frees at a reader's end
    reader = plan["free_conn"] != rawdata.HELD_TO_STEP_END
    f_idx, f_task = _join(plan["free_conn"][reader].astype(np.int64), conn)
    f_tensor = np.flatnonzero(reader)[f_idx]
    # frees held to the step's end: the model's end of that step (step trace), else its last task's end
    h_alloc = np.flatnonzero(~reader[a_tensor])
    h_tensor = a_tensor[h_alloc]
    h_model = plan["model_id"][h_tensor].astype(np.int64)
    h_iter = iteration[a_task[h_alloc]]
    h_ts = _step_ends(run, device_id, hw, h_model, h_iter)
    rank_held = 2 * (int(conn.max()) + 1) + 1
    tensor = np.concatenate([a_tensor, f_tensor, h_tensor])
    ts = np.concatenate([start[a_task], end[f_task], h_ts])
    rank = np.concatenate([2 * conn[a_task], 2 * conn[f_task] + 1, np.full(len(h_tensor), rank_held)])
    it = np.concatenate([iteration[a_task], iteration[f_task], h_iter])
    alloc = np.concatenate([np.ones(len(a_tensor), bool), np.zeros(len(f_tensor) + len(h_tensor), bool)])
    model = plan["model_id"][tensor].astype(np.int64)
    order = np.lexsort((rank, ts, it, model))  # each model's steps in order, events causally within a step
    tensor, alloc, model, it, ts = tensor[order], alloc[order], model[order], it[order], ts[order]
    size = plan["size"][tensor].astype(np.int64)
    total = np.cumsum(np.where(alloc, size, -size))
    new_step = np.ones(len(order), bool)
    new_step[1:] = (model[1:] != model[:-1]) | (it[1:] != it[:-1])
    step_first = np.flatnonzero(new_step)
    before = total[step_first] - np.where(alloc[step_first], size[step_first], -size[step_first])
    total -= np.repeat(before, np.diff(np.append(step_first, len(order))))  # each step counts from zero
    by_time = np.argsort(ts, kind="stable")
    return plan, tensor[by_time], alloc[by_time], ts[by_time], total[by_time], it[by_time]


def _step_ends(run: RunDir, device_id: int, hw: np.ndarray, model: np.ndarray, iteration: np.ndarray) -> np.ndarray:
    """The end of step ``iteration`` of ``model``: the step trace's model end, else the end of the
    step's last task of that model in the task log."""
    out = np.full(len(model), -1, np.int64)
    if not len(model):
        return out
    width = int(max(iteration.max(), hw["iteration"].max())) + 1
    key = model * width + iteration
    tr = run.load("step_trace", device_id)
    tr = tr[tr["tag_id"] == rawdata.MODEL_END_TAG]
    if len(tr):
        known = tr["model_id"].astype(np.int64) * width + tr["index_id"].astype(np.int64)
        pos = np.searchsorted(np.sort(known), key)
        sorted_ts = tr["timestamp"].astype(np.int64)[np.argsort(known, kind="stable")]
        hit = (pos < len(known)) & (np.sort(known)[np.minimum(pos, len(known) - 1)] == key)
        out[hit] = sorted_ts[pos[hit]]
    missing = out < 0
    if missing.any():
        track = run.load("task_track", device_id)
        model_of_conn = np.full(int(max(hw["connection_id"].max(), track["connection_id"].max(initial=0))) + 1, -1,
                                np.int64)
        model_of_conn[track["connection_id"]] = track["model_id"]
        hw_key = model_of_conn[hw["connection_id"]] * width + hw["iteration"].astype(np.int64)
        hw_end = hw["start"].astype(np.int64) + hw["dur"].astype(np.int64)
        keys, inverse = np.unique(hw_key, return_inverse=True)
        last = np.full(len(keys), np.iinfo(np.int64).min)
        np.maximum.at(last, inverse, hw_end)
        pos = np.minimum(np.searchsorted(keys, key[missing]), len(keys) - 1)
        out[missing] = np.where(keys[pos] == key[missing], last[pos], -1)
    return out


_EVENTS: "weakref.WeakKeyDictionary[RunDir, dict[tuple[int, int | None], _Events]]" = weakref.WeakKeyDictionary()


def _events(run: RunDir, device_id: int, iteration: int | None = None) -> _Events:
    """The device's events and totals, computed once per run directory (every memory table reads
    them); with ``iteration``, events that hold that step's (:func:`_step_scope`)."""
    cached = _EVENTS.setdefault(run, {})
    key = (device_id, iteration)
    if key not in cached:
        cached[key] = _device_events(run, device_id) if iteration is None else _step_scope(run, device_id, iteration)
    return cached[key]


def _step_scope(run: RunDir, device_id: int, iteration: int) -> _Events:
    """Events that hold those of step ``iteration`` (every model's step of that number) exactly as the
    whole run's do: the step's own, built from its tasks alone, when that gives the same times, totals
    and pairs, else the whole run's (read the step's with :attr:`_Events.step`).

    A step's own events are the whole run's when the device has one model (its totals count each
    step from zero; several models' totals add up across their steps), every allocation of the step
    is released in it (the whole run could pair it with a later step's release), and no task or step
    end of another step lies in the step's time span (no other step's event comes between its own).
    """
    ev = _device_events(run, device_id, iteration)
    if len(ev) == 0:
        return ev  # the step ran no task of a plan: the whole run has no event of it either
    hw = run.load("hwts", device_id)
    other = hw["iteration"] != iteration
    start = hw["start"][other].astype(np.int64)
    end = start + hw["dur"][other].astype(np.int64)
    first, last = int(ev.timestamp[0]), int(ev.timestamp[-1])
    tr = run.load("step_trace", device_id)
    other_ends = tr["timestamp"][(tr["tag_id"] == rawdata.MODEL_END_TAG) & (tr["index_id"] != iteration)]
    alone = (len(np.unique(ev.plan["model_id"])) == 1 and (ev.pairs()[1] >= 0).all()
             and not ((start <= last) & (end >= first)).any()
             and not ((other_ends >= first) & (other_ends <= last)).any())
    return ev if alone else _events(run, device_id)


def _in_step(ev: _Events, iteration: int | None) -> np.ndarray | slice:
    """The positions of ``ev`` that belong to step ``iteration`` (all of them when None)."""
    return slice(None) if iteration is None else np.flatnonzero(ev.step == iteration)


def event_times(run: RunDir, device_id: int = 0) -> np.ndarray:
    """Exact int ns of the memory events, in ``memory_record`` order."""
    return _events(run, device_id).timestamp


def _device_events(run: RunDir, device_id: int, iteration: int | None = None) -> _Events:
    plan, row, alloc, timestamp, total, step = _step_events(run, device_id, iteration)
    allocated = np.zeros(len(row), np.int64)
    reserved = np.zeros(len(row), np.int64)
    models = plan["model_id"][row]
    pool = plan["pool_size"][row].astype(np.int64)
    for m in np.unique(models):
        mine = models == m
        latest = np.cumsum(mine) - 1  # index of the model's latest record at each position, -1 before its first
        seen = latest >= 0
        at = np.flatnonzero(mine)[latest[seen]]
        allocated[seen] += total[at]
        reserved[seen] += pool[at]
    return _Events(plan, row, alloc, timestamp, allocated, reserved, step)


def _names(run: RunDir, ids: np.ndarray) -> pd.Categorical:
    """Tensor names of hash ids, as a categorical (one name repeats every step)."""
    codes, uniques = pd.factorize(ids)
    text = [run.hashes.get(int(h), f"<unknown 0x{int(h):016x}>") for h in uniques]
    return pd.Categorical.from_codes(codes, categories=pd.Index(text, dtype=object))


def _repeated(text: str, n: int) -> pd.Categorical:
    """``n`` times ``text`` (from codes: a list of a million strs takes 0.2 s to categorise)."""
    return pd.Categorical.from_codes(np.zeros(n, np.int8), [text]) if n else pd.Categorical([])


def _device_type(device_id: int, n: int) -> pd.Categorical:
    return _repeated(f"NPU:{device_id}", n)


def _allocations(ev: _Events, iteration: int | None) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`_Events.pairs` of the allocations of step ``iteration`` (all when None)."""
    alloc_pos, release_pos = ev.pairs()
    if iteration is None:
        return alloc_pos, release_pos
    mine = ev.step[alloc_pos] == iteration
    return alloc_pos[mine], release_pos[mine]


def operator_memory(run: RunDir, device_id: int = 0, iteration: int | None = None) -> pd.DataFrame:
    """One row per allocation, with its release (NaN if never released), in allocation order.

    An allocation pairs with the next record of the same tensor (same model,
    name and address) when that record is a release.  Durations are
    differences of integer ns, so they are exact.  With ``iteration``, the rows of the
    allocations of that step only (the whole run's rows of it, built without the other steps
    where that gives the same rows: :func:`_step_scope`).
    """
    ev = _events(run, device_id, iteration)
    alloc_pos, release_pos = _allocations(ev, iteration)
    released = release_pos >= 0
    rel = np.where(released, release_pos, 0)

    a_ts = ev.timestamp[alloc_pos]
    r_ts = ev.timestamp[rel]
    release_us = np.where(released, r_ts / 1000.0, np.nan)
    duration_us = np.where(released, (r_ts - a_ts) / 1000.0, np.nan)

    def mb_at_release(values: np.ndarray) -> np.ndarray:
        return np.where(released, values[rel] / MB, np.nan)

    data = {
        "Name": _names(run, ev.of("tensor", alloc_pos)),
        "Size(KB)": ev.of("size", alloc_pos) / 1024.0,
        "Allocation Time(us)": a_ts / 1000.0,
        "Release Time(us)": release_us,
        "Active Release Time(us)": release_us,
        "Duration(us)": duration_us,
        "Active Duration(us)": duration_us,
        "Allocation Total Allocated(MB)": ev.allocated[alloc_pos] / MB,
        "Allocation Total Reserved(MB)": ev.reserved[alloc_pos] / MB,
        "Allocation Total Active(MB)": ev.allocated[alloc_pos] / MB,
        "Release Total Allocated(MB)": mb_at_release(ev.allocated),
        "Release Total Reserved(MB)": mb_at_release(ev.reserved),
        "Release Total Active(MB)": mb_at_release(ev.allocated),
        "Stream Ptr": ev.of("stream_id", alloc_pos).astype(np.int64),
        "Device Type": _device_type(device_id, len(alloc_pos)),
    }
    return pd.DataFrame(data, columns=OPERATOR_MEMORY)


def memory_record(run: RunDir, device_id: int = 0, iteration: int | None = None) -> pd.DataFrame:
    """The device totals after every allocation and release, in time order (with ``iteration``:
    after those of that step, as in the whole run's table)."""
    ev = _events(run, device_id, iteration)
    at = _in_step(ev, iteration)
    allocated = ev.allocated[at]
    n = len(allocated)
    data = {
        "Component": _repeated(COMPONENT_GE, n),
        "Timestamp(us)": ev.timestamp[at] / 1000.0,
        "Total Allocated(MB)": allocated / MB,
        "Total Reserved(MB)": ev.reserved[at] / MB,
        "Total Active(MB)": allocated / MB,
        "Stream Ptr": ev.plan["stream_id"][ev.row[at]].astype(np.int64),
        "Device Type": _device_type(device_id, n),
    }
    return pd.DataFrame(data, columns=MEMORY_RECORD)


def memory_peak(run: RunDir, device_id: int = 0, iteration: int | None = None) -> MemoryPeak | None:
    """The first moment the device's allocated memory was highest (with ``iteration``: during that
    step; ``None`` without memory records)."""
    ev = _events(run, device_id, iteration)
    at = np.arange(len(ev))[_in_step(ev, iteration)]
    if len(at) == 0:
        return None
    i = int(at[np.argmax(ev.allocated[at])])
    h = int(ev.of("tensor", i))
    return MemoryPeak(int(ev.allocated[i]), int(ev.reserved[i]), int(ev.timestamp[i]),
                      run.hashes.get(h, f"<unknown 0x{h:016x}>"), int(ev.of("model_id", i)))


def tensor_lifetimes(run: RunDir, device_id: int = 0, iteration: int | None = None) -> pd.DataFrame:
    """Every allocation with its address: ``operator_memory``'s rows (same order, names and
    times) plus ``Model ID`` and ``Address``, the tensor's byte offset in its model's pool.

    Paired as in :func:`operator_memory`: an allocation with the next record of the same
    model, tensor and address when that record is a release (NaN release otherwise).  With
    ``iteration``, the allocations of that step only, as in :func:`operator_memory`.
    """
    ev = _events(run, device_id, iteration)
    alloc_pos, release_pos = _allocations(ev, iteration)
    released = release_pos >= 0
    a_ts = ev.timestamp[alloc_pos]
    r_ts = ev.timestamp[np.where(released, release_pos, 0)]
    data = {
        "Name": _names(run, ev.of("tensor", alloc_pos)),
        "Model ID": ev.of("model_id", alloc_pos).astype(np.int64),
        "Address": ev.of("addr", alloc_pos).astype(np.int64),
        "Size(KB)": ev.of("size", alloc_pos) / 1024.0,
        "Allocation Time(us)": a_ts / 1000.0,
        "Release Time(us)": np.where(released, r_ts / 1000.0, np.nan),
        "Duration(us)": np.where(released, (r_ts - a_ts) / 1000.0, np.nan),
        "Stream ID": ev.of("stream_id", alloc_pos).astype(np.int64),
    }
    return pd.DataFrame(data, columns=TENSOR_LIFETIMES)
