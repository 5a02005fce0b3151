"""Profile tables as the explorer shows them to a person: times since the run's first step, step_trace's
repeated AllReduce column pairs as a table of their own, the host API spread in us, no column that only
repeats the one device's id.

The Profile's tables keep msprof's columns and absolute timestamps (what the real tools and exports
read); these are views of them, computed where a tab is drawn.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Collection

import numpy as np
import pandas as pd

from ..analysis.sources.source import TIMESTAMP_COLUMNS
from .plots.steps import engine_gaps, step_rows

#: step_trace's AllReduce pairs, one per AllReduce of the step, all under these two names.
REDUCE_START, REDUCE_DURATION = "Reduce Start(us)", "Reduce Duration(us)"
#: What the step table has in place of the pairs: how many AllReduces ran in the step, their total time.
REDUCES, REDUCE_TOTAL = "Reduces", "Reduce Duration sum(us)"
#: The columns of the AllReduce table (one row per AllReduce of each step).
REDUCE_COLUMNS = ["Iteration ID", "Reduce", "Start(us)", "Duration(us)", "End(us)"]
#: step_trace's training-trace columns named for what they are in a forward-only (inference) run.
FORWARD_NAMES = {"FP Start(us)": "Forward Start(us)", "BP End(us)": "Forward End(us)",
                 "FP to BP Time(us)": "Forward Time(us)", "Iteration Refresh(us)": "Output Time(us)"}
#: ... and in a serving run (every step a prefill or a decode graph's), with a Phase column beside Model ID.
ENGINE_STEP_NAMES = {"FP Start(us)": "Step Start(us)", "BP End(us)": "Last Op End(us)",
                     "FP to BP Time(us)": "Device Time(us)", "Iteration Refresh(us)": "After Last Op(us)"}
PHASE = "Phase"
#: ... where step_trace's Data Aug Bound (from the same graph's previous iteration) becomes the gap from the previous
#: engine step's end, whichever graph ran it (:func:`.plots.steps.engine_gaps`).
HOST_GAP = "Host (scheduler)(us)"
DATA_AUG = "Data Aug Bound(us)"
#: api_statistic's spread: msprof's Variance (us²) as a standard deviation, in the unit of the times beside it.
VARIANCE, STD = "Variance", "Std Dev(us)"


def origin_text(origin_us: float | None) -> str:
    """How a table's relative times read: since the first step's start, and when that was."""
    if origin_us is None:
        return "times in us"
    return f"times in us since the run's first step (its start: {origin_us:,.3f} us)"


def relative_times(frame: pd.DataFrame, table: str, origin_us: float | None) -> pd.DataFrame:
    """``frame`` (rows of the Profile table ``table``) with its absolute timestamp columns
    (:data:`TIMESTAMP_COLUMNS`, by position: step_trace repeats its Reduce names) as us since
    ``origin_us``; unchanged without an origin.  Both are float us, which are exact to 0.25 us at
    today's epoch, so the difference is too."""
    names = TIMESTAMP_COLUMNS.get(table, ())
    positions = [i for i, c in enumerate(frame.columns) if c in names]
    if origin_us is None or not positions:
        return frame
    out = frame.copy()
    for i in positions:
        out.isetitem(i, pd.to_numeric(out.iloc[:, i], errors="coerce").astype(np.float64) - origin_us)
    return out


def forward_only(step_trace: pd.DataFrame, forward_models: Collection[int]) -> bool:
    """Whether every step of ``step_trace`` is of a model that runs forward only (inference)."""
    if not len(step_trace) or not len(forward_models) or "Model ID" not in step_trace.columns:
        return False
    return bool(np.isin(pd.to_numeric(step_trace["Model ID"], errors="coerce").to_numpy(np.float64),
                        np.asarray(list(forward_models), np.float64)).all())


def engine_steps(step_trace: pd.DataFrame, phases: Mapping[int, str]) -> bool:
    """Whether every step of ``step_trace`` is of a serving engine's model (``Profile.model_phases``)."""
    return bool(len(step_trace)) and bool(phases) and "Model ID" in step_trace.columns and bool(
        np.isin(pd.to_numeric(step_trace["Model ID"], errors="coerce").to_numpy(np.float64), list(phases)).all())


def step_trace_view(step_trace: pd.DataFrame, forward_models: Collection[int] = (),
                    phases: Mapping[int, str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """step_trace in one readable form: its repeated ``Reduce Start(us)`` / ``Reduce Duration(us)`` pairs
    (13 of them for BERT) become :data:`REDUCES` and :data:`REDUCE_TOTAL` per step, and the AllReduces a
    table of their own (:data:`REDUCE_COLUMNS`: one row per AllReduce of each step, numbered in the
    step from 1).  A run whose every step is of a model in ``forward_models`` (inference) has no backward
    pass: its FP/BP columns are named for what they are (:data:`FORWARD_NAMES`); a serving run's steps
    (``phases``: Model ID -> prefill / decode) get a :data:`PHASE` column, :data:`ENGINE_STEP_NAMES` and
    :data:`HOST_GAP` for the Data Aug Bound.  Times
    are those of ``step_trace`` (pass it through :func:`relative_times` first)."""
    if engine_steps(step_trace, phases or {}):
        model = pd.to_numeric(step_trace["Model ID"], errors="coerce").astype(int)
        step_trace = step_trace.set_axis([ENGINE_STEP_NAMES.get(c, c) for c in step_trace.columns], axis=1)
        step_trace.insert(list(step_trace.columns).index("Model ID") + 1, PHASE, model.map(phases).to_numpy())
        if DATA_AUG in step_trace.columns:
            fp, end = (pd.to_numeric(step_trace[c], errors="coerce").to_numpy(np.float64)
                       for c in ("Step Start(us)", "Iteration End(us)"))
            step_trace[DATA_AUG] = engine_gaps(fp, end, np.ones(len(step_trace), bool))[1]
            step_trace = step_trace.rename(columns={DATA_AUG: HOST_GAP})
    elif forward_only(step_trace, forward_models):
        step_trace = step_trace.set_axis([FORWARD_NAMES.get(c, c) for c in step_trace.columns], axis=1)
    names = list(step_trace.columns)
    pairs = [i for i, c in enumerate(names) if c in (REDUCE_START, REDUCE_DURATION)]
    if not pairs:
        return step_trace, pd.DataFrame(columns=REDUCE_COLUMNS)
    starts = step_trace.iloc[:, [i for i in pairs if names[i] == REDUCE_START]]
    durations = step_trace.iloc[:, [i for i in pairs if names[i] == REDUCE_DURATION]].to_numpy(np.float64,
                                                                                                na_value=np.nan)
    kept = [i for i in range(len(names)) if i not in set(pairs)]
    main = step_trace.iloc[:, kept].copy()
    main[REDUCES] = starts.notna().sum(axis=1).to_numpy(np.int64)
    main[REDUCE_TOTAL] = np.nansum(durations, axis=1)
    row = next((r for r in step_rows(step_trace) if r.label == "AllReduce"), None)
    if row is None:
        return main, pd.DataFrame(columns=REDUCE_COLUMNS)
    iteration = pd.Series(row.iteration)
    reduces = pd.DataFrame({"Iteration ID": row.iteration, "Reduce": iteration.groupby(iteration).cumcount() + 1,
                            "Start(us)": row.start_us, "Duration(us)": row.width_us,
                            "End(us)": row.start_us + row.width_us})
    return main, reduces[REDUCE_COLUMNS]


def api_statistic_view(api: pd.DataFrame) -> pd.DataFrame:
    """api_statistic with msprof's unitless ``Variance`` (us²: 472,027,614.843 reads as nothing) shown as the
    standard deviation in us, in its place."""
    if VARIANCE not in api.columns:
        return api
    out = api.copy()
    out.insert(list(out.columns).index(VARIANCE), STD, np.sqrt(pd.to_numeric(out[VARIANCE], errors="coerce")))
    return out.drop(columns=[VARIANCE])


def without_one_device(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` without its ``Device_id`` column when every row has the same one (a run is one device's):
    a column that repeats one id on every row is read past, and pushes what matters to the right."""
    if "Device_id" not in table.columns or not len(table) or table["Device_id"].astype(str).nunique() > 1:
        return table
    return table.drop(columns=["Device_id"])
