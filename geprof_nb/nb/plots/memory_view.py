"""The memory view: which tensors, memory records and peak :func:`~.memory.memory_lifetimes` draws,
for an iteration, a range of them or the whole run, from the tables given or a Profile's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .figure import floats, id_list


def _step_window(step_trace: pd.DataFrame | None, iteration: int) -> tuple[float, float]:
    """(begin, end) µs of an iteration: its end minus its Iteration Time, and its end, each widened by one float64
    step of the end (0.25 µs at ~1.77e15 µs), by which the subtraction can round past the step's first event."""
    if step_trace is None or step_trace.empty:
        raise ValueError(f"iteration {iteration}: pass step_trace= to find the iteration's time window")
    ids = step_trace["Iteration ID"].to_numpy()
    hit = ids == iteration
    if not hit.any():
        raise ValueError(f"iteration {iteration} is not in step_trace; available Iteration IDs: {id_list(ids)}")
    end = floats(step_trace["Iteration End(us)"])[hit]
    begin = end - floats(step_trace["Iteration Time(us)"])[hit]
    if not (np.isfinite(begin).any() and np.isfinite(end).any()):
        raise ValueError(f"iteration {iteration} has no step trace timestamps")
    slack = float(np.spacing(np.nanmax(np.abs(end))))
    return float(np.nanmin(begin)) - slack, float(np.nanmax(end)) + slack


#: ``memory_lifetimes(..., iteration=ALL_ITERATIONS)`` draws the whole run.
ALL_ITERATIONS = "all"


def iterations_named(iteration: int | tuple[int, int]) -> str:
    """``iteration 3`` or ``iterations 3-7``."""
    if isinstance(iteration, tuple):
        return f"iterations {iteration[0]}-{iteration[1]}"
    return f"iteration {iteration}"


def _iterations_window(step_trace: pd.DataFrame | None, iteration: int | tuple[int, int]) -> tuple[float, float]:
    """(begin, end) µs of an iteration, or of the iterations ``first..last`` of a pair."""
    if not isinstance(iteration, tuple):
        return _step_window(step_trace, iteration)
    first, last = iteration
    if first > last:
        raise ValueError(f"iteration=({first}, {last}): a range is (first, last) with first <= last")
    return _step_window(step_trace, first)[0], _step_window(step_trace, last)[1]


@dataclass
class Tensors:
    """Rows of ``tensor_lifetimes`` with their Allocation and Release Time(us) as floats (NaN: never
    released), converted once and selected together."""

    frame: pd.DataFrame
    alloc_us: np.ndarray
    release_us: np.ndarray

    def largest(self, top: int | None) -> Tensors:
        """The ``top`` largest by Size(KB), in table order; all of them when ``top`` is None or not fewer."""
        if top is None or len(self.frame) <= top:
            return self
        keep = np.sort(np.argsort(-floats(self.frame["Size(KB)"]), kind="stable")[:top])
        return Tensors(self.frame.iloc[keep], self.alloc_us[keep], self.release_us[keep])


@dataclass
class MemoryView:
    """What :func:`memory_lifetimes` draws: the tensors that live in its time window ``[w0, w1]`` (µs),
    the memory records in it and the peak to mark, for an iteration, a ``(first, last)`` pair of them or
    :data:`ALL_ITERATIONS` (the whole run, from its first record to its last)."""

    iteration: int | tuple[int, int] | str
    w0: float
    w1: float
    tensors: Tensors  # every tensor live in the window, before ``top`` (they name the peak's allocation)
    memory_record: pd.DataFrame
    record_us: np.ndarray  # memory_record's Timestamp(us), every row
    in_window: np.ndarray  # the positions of the rows in the window, in time order
    peak: Any

    @property
    def whole(self) -> bool:
        """True for the whole run, False for an iteration or a range of them."""
        return isinstance(self.iteration, str)

    @property
    def span_ms(self) -> float:
        """The window's length (ms), at least 1 µs so that a single instant still has an x axis."""
        return max((self.w1 - self.w0) / 1000.0, 1e-3)

    def ms(self, t_us: Any) -> Any:
        """x of times in µs: ms since the start of the window."""
        return (t_us - self.w0) / 1000.0


def _checked_iteration(iteration: Any) -> int | tuple[int, int] | str | None:
    """``iteration`` as :func:`memory_lifetimes` takes it (a list is a ``(first, last)`` pair), checked
    before any table is read."""
    if isinstance(iteration, list):
        iteration = tuple(iteration)
    if isinstance(iteration, str) and iteration != ALL_ITERATIONS:
        raise ValueError(f"iteration={iteration!r}: use an Iteration ID, a (first, last) pair, "
                         f"{ALL_ITERATIONS!r} (the whole run) or None (the last iteration)")
    return iteration


def _last_iteration(step_trace: pd.DataFrame | None) -> int | str:
    """The default view: the last iteration of ``step_trace``, as the explorer and ``Profile.ops()``
    show, or the whole run without one."""
    has_steps = step_trace is not None and len(step_trace)
    return int(step_trace["Iteration ID"].iloc[-1]) if has_steps else ALL_ITERATIONS


def _profile_memory(profile: Any, iteration: int | tuple[int, int] | str) -> tuple[Any, Any, Any]:
    """A Profile's tensor_lifetimes, memory_record and peak for ``iteration``: the whole run's tables for
    the whole run or a range, one iteration's own records (``Profile.step_memory``) for one iteration,
    so that drawing a long run's last step does not build its whole-run tables."""
    if isinstance(iteration, (str, tuple)):
        return profile.tensor_lifetimes, profile.memory_record, profile.memory_peak
    mem = profile.step_memory(int(iteration))
    return mem.tensor_lifetimes, mem.memory_record, mem.peak


def select_memory_view(tensor_lifetimes: Any, memory_record: pd.DataFrame | None, peak: Any,
                 step_trace: pd.DataFrame | None, iteration: Any) -> MemoryView | None:
    """The tables and time window :func:`memory_lifetimes` is asked for (its arguments, a Profile's
    tables where not given), or None when neither table has a row."""
    iteration = _checked_iteration(iteration)
    profile = None
    if not isinstance(tensor_lifetimes, pd.DataFrame) and hasattr(tensor_lifetimes, "step_memory"):
        profile = tensor_lifetimes
        step_trace = profile.step_trace if step_trace is None else step_trace
    if iteration is None:
        iteration = _last_iteration(step_trace)
    window = None if isinstance(iteration, str) else _iterations_window(step_trace, iteration)
    if profile is not None:
        tensor_lifetimes, profile_record, profile_peak = _profile_memory(profile, iteration)
        memory_record = profile_record if memory_record is None else memory_record
        peak = profile_peak if peak is None else peak
    tl = tensor_lifetimes if tensor_lifetimes is not None else pd.DataFrame()
    mr = memory_record if memory_record is not None else pd.DataFrame()
    if tl.empty and mr.empty:
        return None
    record_us = floats(mr["Timestamp(us)"]) if len(mr) else np.zeros(0)
    alloc = floats(tl["Allocation Time(us)"]) if len(tl) else np.zeros(0)
    release = floats(tl["Release Time(us)"]) if len(tl) else np.zeros(0)
    if window is None:  # the whole run: from its first event to its last
        window = float(np.nanmin(np.r_[alloc, record_us])), float(np.nanmax(np.r_[alloc, release, record_us]))
    w0, w1 = window
    live = (alloc <= w1) & (np.isnan(release) | (release >= w0))
    in_window = np.flatnonzero((record_us >= w0) & (record_us <= w1))
    if not (np.diff(record_us[in_window]) >= 0).all():
        in_window = in_window[np.argsort(record_us[in_window], kind="stable")]
    return MemoryView(iteration, w0, w1, Tensors(tl[live], alloc[live], release[live]), mr, record_us,
                       in_window, peak)
