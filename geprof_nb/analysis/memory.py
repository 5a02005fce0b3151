"""``task_memory`` records -> torch_npu's memory tables (``operator_memory.csv``,
``memory_record.csv``) and the peak of allocated memory.

The records come from static models: every tensor has a fixed place in its
model's pool, allocated when its producer task starts and released when its
last reader ends.  There is no caching allocator in between, so torch_npu's
"Active" columns (memory still held by the caching allocator after a release)
equal the plain ones here.  With several models on a device the totals are the
device's: the sum over models of each model's latest totals (a model counts
from its first record on).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..prof import rawdata
from .rundir import RunDir

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
class _Events:
    """A device's memory records in time order, with the device totals after each."""

    rec: np.ndarray
    allocated: np.ndarray  # int64 bytes
    reserved: np.ndarray  # int64 bytes


def _events(run: RunDir, device_id: int) -> _Events:
    rec = run.load("task_memory", device_id)
    rec = rec[np.argsort(rec["timestamp"], kind="stable")]
    allocated = np.zeros(len(rec), np.int64)
    reserved = np.zeros(len(rec), np.int64)
    models = rec["model_id"]
    for m in np.unique(models):
        mine = models == m
        latest = np.cumsum(mine) - 1  # index of the model's latest record at each position, -1 before its first
        seen = latest >= 0
        at = np.flatnonzero(mine)[latest[seen]]
        allocated[seen] += rec["total_allocated"][at].astype(np.int64)
        reserved[seen] += rec["total_reserved"][at].astype(np.int64)
    return _Events(rec, allocated, reserved)


def _names(run: RunDir, ids: np.ndarray) -> pd.Categorical:
    """Tensor names of hash ids, as a categorical (one name repeats every step)."""
    codes, uniques = pd.factorize(ids)
    text = [run.hashes.get(int(h), f"<unknown 0x{int(h):016x}>") for h in uniques]
    return pd.Categorical.from_codes(codes, categories=pd.Index(text, dtype=object))


def _device_type(device_id: int, n: int) -> pd.Categorical:
    return pd.Categorical([f"NPU:{device_id}"] * n)


def operator_memory(run: RunDir, device_id: int = 0) -> pd.DataFrame:
    """One row per allocation, with its release (NaN if never released), in allocation order.

    An allocation pairs with the next record of the same tensor (same model,
    name and address) when that record is a release.  Durations are
    differences of integer ns, so they are exact.
    """
    ev = _events(run, device_id)
    rec = ev.rec
    n = len(rec)
    order = np.lexsort((np.arange(n), rec["addr"], rec["tensor"], rec["model_id"]))
    g = rec[order]
    is_alloc = g["event"] == rawdata.MEMORY_ALLOC
    same_next = np.zeros(n, bool)
    if n > 1:
        same_next[:-1] = ((g["model_id"][1:] == g["model_id"][:-1]) & (g["tensor"][1:] == g["tensor"][:-1])
                          & (g["addr"][1:] == g["addr"][:-1]) & ~is_alloc[1:])
    alloc_pos = order[is_alloc]
    release_pos = np.where(same_next[is_alloc], order[np.minimum(np.flatnonzero(is_alloc) + 1, n - 1)], -1)
    rows = np.argsort(alloc_pos, kind="stable")
    alloc_pos, release_pos = alloc_pos[rows], release_pos[rows]
    released = release_pos >= 0
    rel = np.where(released, release_pos, 0)

    a_ts = rec["timestamp"][alloc_pos].astype(np.int64)
    r_ts = rec["timestamp"][rel].astype(np.int64)
    release_us = np.where(released, r_ts / 1000.0, np.nan)
    duration_us = np.where(released, (r_ts - a_ts) / 1000.0, np.nan)

    def mb_at_release(values: np.ndarray) -> np.ndarray:
        return np.where(released, values[rel] / MB, np.nan)

    data = {
        "Name": _names(run, rec["tensor"][alloc_pos]),
        "Size(KB)": rec["size"][alloc_pos] / 1024.0,
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
        "Stream Ptr": rec["stream_id"][alloc_pos].astype(np.int64),
        "Device Type": _device_type(device_id, len(alloc_pos)),
    }
    return pd.DataFrame(data, columns=OPERATOR_MEMORY)


def memory_record(run: RunDir, device_id: int = 0) -> pd.DataFrame:
    """The device totals after every allocation and release, in time order."""
    ev = _events(run, device_id)
    n = len(ev.rec)
    data = {
        "Component": pd.Categorical([COMPONENT_GE] * n),
        "Timestamp(us)": ev.rec["timestamp"].astype(np.int64) / 1000.0,
        "Total Allocated(MB)": ev.allocated / MB,
        "Total Reserved(MB)": ev.reserved / MB,
        "Total Active(MB)": ev.allocated / MB,
        "Stream Ptr": ev.rec["stream_id"].astype(np.int64),
        "Device Type": _device_type(device_id, n),
    }
    return pd.DataFrame(data, columns=MEMORY_RECORD)


def memory_peak(run: RunDir, device_id: int = 0) -> MemoryPeak | None:
    """The first moment the device's allocated memory was highest (``None`` without memory records)."""
    ev = _events(run, device_id)
    if len(ev.rec) == 0:
        return None
    i = int(np.argmax(ev.allocated))
    h = int(ev.rec["tensor"][i])
    return MemoryPeak(int(ev.allocated[i]), int(ev.reserved[i]), int(ev.rec["timestamp"][i]),
                      run.hashes.get(h, f"<unknown 0x{h:016x}>"), int(ev.rec["model_id"][i]))


def tensor_lifetimes(run: RunDir, device_id: int = 0) -> pd.DataFrame:
    """Every allocation with its address: ``operator_memory``'s rows (same order, names and
    times) plus ``Model ID`` and ``Address``, the tensor's byte offset in its model's pool.

    Paired as in :func:`operator_memory`: an allocation with the next record of the same
    model, tensor and address when that record is a release (NaN release otherwise).
    """
    rec = _events(run, device_id).rec
    n = len(rec)
    order = np.lexsort((np.arange(n), rec["addr"], rec["tensor"], rec["model_id"]))
    g = rec[order]
    is_alloc = g["event"] == rawdata.MEMORY_ALLOC
    nxt = np.minimum(np.arange(n) + 1, max(n - 1, 0))
    pairs = (is_alloc & (np.arange(n) + 1 < n) & (g["model_id"][nxt] == g["model_id"])
             & (g["tensor"][nxt] == g["tensor"]) & (g["addr"][nxt] == g["addr"])
             & (g["event"][nxt] != rawdata.MEMORY_ALLOC))
    alloc_pos = order[is_alloc]
    release_pos = np.where(pairs[is_alloc], order[nxt[is_alloc]], -1)
    rows = np.argsort(alloc_pos, kind="stable")
    alloc_pos, release_pos = alloc_pos[rows], release_pos[rows]
    released = release_pos >= 0
    a_ts = rec["timestamp"][alloc_pos].astype(np.int64)
    r_ts = rec["timestamp"][np.where(released, release_pos, 0)].astype(np.int64)
    data = {
        "Name": _names(run, rec["tensor"][alloc_pos]),
        "Model ID": rec["model_id"][alloc_pos].astype(np.int64),
        "Address": rec["addr"][alloc_pos].astype(np.int64),
        "Size(KB)": rec["size"][alloc_pos] / 1024.0,
        "Allocation Time(us)": a_ts / 1000.0,
        "Release Time(us)": np.where(released, r_ts / 1000.0, np.nan),
        "Duration(us)": np.where(released, (r_ts - a_ts) / 1000.0, np.nan),
        "Stream ID": rec["stream_id"][alloc_pos].astype(np.int64),
    }
    return pd.DataFrame(data, columns=TENSOR_LIFETIMES)
