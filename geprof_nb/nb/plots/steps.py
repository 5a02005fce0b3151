"""The FP/BP step timeline (``step_trace``): where each step's time goes, phase by phase."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Collection

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .colors import TASK_TYPE_COLORS
from .figure import FIGSIZE, empty_figure, floats, id_list, literal
from .spans import column_bars, disjoint_pieces

EMPTY_STEP_TRACE_MESSAGE = "no step trace data (profile with training_trace on, and run a step while it collects)"
_MAX_ITERATION_LABELS = 20  # more labels than this overlap on an 11-inch axis
_ZOOM_MARGIN = 0.05  # share of the iteration's span added on each side when zoomed
#: Pixel columns of the step timeline: its width at 100 dpi (the axes get fewer, so a column is never
#: wider than a pixel).
STEP_COLUMNS = int(FIGSIZE[0] * 100)
#: The colour of each row of the step timeline.
ROW_COLORS = {
    "Data Aug Bound": "#f2a541",
    "Host (scheduler)": "#937860",  # a serving run's gap before an engine step: the engine's host scheduling
    "GetNext": TASK_TYPE_COLORS["AI_CPU"],  # GetNext is an AI CPU op
    "Iteration": "#4c72b0",
    "FP→BP": "#4c72b0",
    "Forward": "#4c72b0",
    "Iteration Refresh": "#55a868",
    "Output": "#55a868",
    "Prefill": "#dd8452",  # a serving run's engine steps: each model's step is one bar named for its phase
    "Decode": "#4c72b0",
    "AllReduce": TASK_TYPE_COLORS["COMMUNICATION"],
}


@dataclass
class StepRow:
    """One labelled row of bars: absolute starts and widths in µs, and the iteration of each bar."""

    label: str
    start_us: np.ndarray
    width_us: np.ndarray
    iteration: np.ndarray


def _row(label: str, start_us: np.ndarray, width_us: np.ndarray, iteration: np.ndarray) -> StepRow:
    """A row keeping only the bars whose start and width are known (msprof prints N/A otherwise)."""
    ok = np.isfinite(start_us) & np.isfinite(width_us)
    return StepRow(label, start_us[ok], width_us[ok], iteration[ok])


def step_rows(step_trace: pd.DataFrame, forward_models: Collection[int] = (),
              phases: Mapping[int, str] | None = None) -> list[StepRow]:
    """The bars of the step timeline, top row first; rows with no bar are left out.

    A step of a model in ``forward_models`` (``Profile.forward_only_models``: inference) has no backward
    pass: its FP to BP is drawn as *Forward* and its Iteration Refresh (the last op's end to the
    iteration's end) as *Output*, not as FP→BP and an update.  A step of a model in ``phases``
    (``Profile.model_phases``: a serving run's prefill and decode graphs) is one bar from its FP start to
    its iteration's end, in the row of its phase (*Prefill*, *Decode*); the gap before it is *Host (scheduler)*
    (:func:`engine_gaps`), not step_trace's Data Aug Bound."""
    it = step_trace["Iteration ID"].to_numpy()
    fp = floats(step_trace["FP Start(us)"])
    bp = floats(step_trace["BP End(us)"])
    end = floats(step_trace["Iteration End(us)"])
    # Without FP/BP points there is no FP/BP: the whole iteration is one bar instead.
    whole = np.isnan(fp) | np.isnan(bp)
    model = (pd.to_numeric(step_trace["Model ID"], errors="coerce").to_numpy(np.float64)
             if "Model ID" in step_trace.columns else np.full(len(step_trace), np.nan))
    phase_of = {name: ~whole & np.isin(model, [m for m, p in (phases or {}).items() if p == name])
                for name in sorted(set((phases or {}).values()))}
    # the steps drawn in a phase's row, or as Forward and Output: none of them trains
    engine = np.logical_or.reduce([np.zeros(len(step_trace), bool), *phase_of.values()])
    serving = np.isin(model, np.asarray(list(phases or {}), np.float64))
    forward = np.isin(model, np.asarray(list(forward_models), np.float64)) & ~engine
    iter_time = floats(step_trace["Iteration Time(us)"])
    data_aug = floats(step_trace["Data Aug Bound(us)"])
    fp_bp = floats(step_trace["FP to BP Time(us)"])
    refresh = floats(step_trace["Iteration Refresh(us)"])
    reduce_start, reduce_dur = _span_columns(step_trace, "Reduce Start(us)", {"Reduce Duration(us)": False})
    getnext_start, getnext_dur = _span_columns(step_trace, "GetNext Start(us)", _GETNEXT_SECOND)
    rows = [
        _row("Data Aug Bound", np.where(serving, np.nan, fp - data_aug), data_aug, it),
        _row("Host (scheduler)", *engine_gaps(fp, end, serving), it),
        _row("GetNext", getnext_start.ravel(), getnext_dur.ravel(), np.repeat(it, getnext_start.shape[1])),
        _row("Iteration", np.where(whole, end - iter_time, np.nan), iter_time, it),
        _row("FP→BP", np.where(whole | forward | engine, np.nan, fp), fp_bp, it),
        _row("Forward", np.where(whole | ~forward, np.nan, fp), fp_bp, it),
        _row("Iteration Refresh", np.where(whole | forward | engine, np.nan, bp), refresh, it),
        _row("Output", np.where(whole | ~forward, np.nan, bp), refresh, it),
        *(_row(name.capitalize(), np.where(mine, fp, np.nan), end - fp, it) for name, mine in phase_of.items()),
        _row("AllReduce", reduce_start.ravel(), reduce_dur.ravel(), np.repeat(it, reduce_start.shape[1])),
    ]
    return [r for r in rows if len(r.start_us)]


def engine_gaps(fp: np.ndarray, end: np.ndarray, serving: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start, width) in µs of the gap before each engine step (``serving`` rows), NaN elsewhere: from the end of
    the engine step before it, whichever graph ran it, to its FP start.  That is the serving engine's host work
    between steps (scheduling, sampling, the next graph's launch).  step_trace's Data Aug Bound is measured from
    the same model's previous iteration (msprof's definition), which on a serving run holds the other shape
    buckets' engine steps in between."""
    start, width = np.full(len(fp), np.nan), np.full(len(fp), np.nan)
    steps = np.flatnonzero(serving & np.isfinite(fp) & np.isfinite(end))
    steps = steps[np.argsort(fp[steps], kind="stable")]
    if len(steps) < 2:
        return start, width
    prev_end = np.maximum.accumulate(end[steps])[:-1]
    gap = fp[steps[1:]] - prev_end
    ok = gap >= 0
    start[steps[1:][ok]], width[steps[1:][ok]] = prev_end[ok], gap[ok]
    return start, width


#: The column after a ``GetNext Start(us)`` and whether it holds an end time (else a duration).
#: geprof's step_trace has ``GetNext Start(us)``, ``GetNext End(us)``, ``GetNext Time(us)`` when the
#: graph reads its input with GetNext; msprof's step_trace CSV has no GetNext columns (its timeline
#: JSON has them), so a table that adds them in any of these forms is drawn.
_GETNEXT_SECOND = {"GetNext Duration(us)": False, "GetNext Time(us)": False, "GetNext End(us)": True}


def _span_columns(step_trace: pd.DataFrame, start_name: str, second: dict[str, bool]) -> tuple[np.ndarray, np.ndarray]:
    """(starts, durations), one column per span of each row, from repeated (start, duration-or-end)
    column pairs.  The pairs repeat under one name (one per AllReduce), so they are read by position."""
    names = list(step_trace.columns)
    pos = [i for i, c in enumerate(names) if c == start_name and i + 1 < len(names) and names[i + 1] in second]
    start = step_trace.iloc[:, pos].to_numpy(dtype=np.float64, na_value=np.nan)
    other = step_trace.iloc[:, [i + 1 for i in pos]].to_numpy(dtype=np.float64, na_value=np.nan)
    is_end = np.array([second[names[i + 1]] for i in pos], dtype=bool)
    return start, np.where(is_end, other - start, other)


def step_timeline(step_trace: pd.DataFrame, iteration: int | None = None, title: str | None = None,
                  forward_models: Collection[int] = (), phases: Mapping[int, str] | None = None) -> Figure:
    """Draw the FP/BP step timeline (msprof ``step_trace``) to show where each training step spends its time.

    One row per phase, top down: Data Aug Bound (the gap from the previous iteration's end to this
    FP start), GetNext (``GetNext Start(us)`` columns: graphs fed by GetNext), FP→BP, Iteration Refresh
    (BP end → iteration end) and every AllReduce (the repeated ``Reduce Start(us)`` /
    ``Reduce Duration(us)`` pairs); "Iteration" replaces FP→BP and Iteration Refresh when the run has
    no FP/BP points, and "Forward" and "Output" do for the steps of ``forward_models`` (the models that
    run forward only, ``Profile.forward_only_models``: see :func:`step_rows`), "Prefill" and "Decode" for a
    serving run's engine steps (``phases``: ``Profile.model_phases``), with "Host (scheduler)" for the gaps
    between them instead of Data Aug Bound. x in ms since the
    earliest drawn start. ``iteration`` zooms to that
    step; an Iteration ID not in the table raises ValueError listing the IDs that are.

    Bars at least a pixel column wide (of the figure's 1100) are drawn as they are; narrower ones
    (every bar, on a run of thousands of steps) are merged per column, and a column they put time in
    is filled, shaded by how much of it they fill (:func:`column_bars`): every step's phase shows in
    its row at any zoom, in at most 1100 bars a row.
    """
    if step_trace.empty:
        return empty_figure(EMPTY_STEP_TRACE_MESSAGE)
    all_ids = step_trace["Iteration ID"].to_numpy()
    if iteration is not None and not (all_ids == iteration).any():
        raise ValueError(f"iteration {iteration} is not in step_trace; available Iteration IDs: {id_list(all_ids)}")
    rows = step_rows(step_trace, forward_models, phases)
    if not rows:
        return empty_figure(EMPTY_STEP_TRACE_MESSAGE)

    # Subtract the origin in µs before scaling: absolute µs timestamps (~1.7e15) leave little float precision.
    origin = min(r.start_us.min() for r in rows)
    lo_ms = [(r.start_us - origin) / 1000 for r in rows]
    width_ms = [r.width_us / 1000 for r in rows]

    # Per-iteration extent of everything drawn: where to zoom, label and mark iterations.
    ids, inverse = np.unique(np.concatenate([r.iteration for r in rows]), return_inverse=True)
    lo = np.full(len(ids), np.inf)
    hi = np.full(len(ids), -np.inf)
    np.minimum.at(lo, inverse, np.concatenate(lo_ms))
    np.maximum.at(hi, inverse, np.concatenate(lo_ms) + np.concatenate(width_ms))
    if iteration is None:
        x0, x1, margin = lo.min(), hi.max(), 0.01
    elif iteration not in ids:
        raise ValueError(f"iteration {iteration} has no step trace timestamps to draw")
    else:
        x0, x1, margin = lo[ids == iteration].min(), hi[ids == iteration].max(), _ZOOM_MARGIN
    pad = max((x1 - x0) * margin, 1e-3)
    visible = np.flatnonzero((hi >= x0 - pad) & (lo <= x1 + pad))
    # Label and mark every k-th visible iteration so labels and lines never crowd on long runs.
    marked = visible[:: max(1, int(np.ceil(len(visible) / _MAX_ITERATION_LABELS)))]

    fig = Figure(figsize=FIGSIZE, layout="constrained")
    ax = fig.add_subplot()
    view = (x0 - pad, x1 + pad)
    lo_all = np.concatenate(lo_ms)
    pieces = disjoint_pieces(np.repeat(np.arange(len(rows)), [len(x) for x in lo_ms]), lo_all,
                     lo_all + np.concatenate(width_ms), np.zeros(len(lo_all), np.int64), *view)
    for y, r in enumerate(rows):
        mine = pieces.row == y
        x, w, colors, edges = column_bars(pieces.start[mine], pieces.width[mine], ROW_COLORS[r.label], *view,
                                           STEP_COLUMNS)
        ax.broken_barh(np.column_stack((x, w)), (y - 0.35, 0.7), facecolors=colors, edgecolors="white",
                       linewidths=edges, label=r.label)
    ends = (floats(step_trace["Iteration End(us)"]) - origin) / 1000
    ends = ends[np.isin(step_trace["Iteration ID"].to_numpy(), ids[marked]) & np.isfinite(ends)]
    ax.vlines(ends, 0, 1, transform=ax.get_xaxis_transform(), colors="0.6", linewidths=0.6, linestyles=":",
              zorder=0, label="_iteration ends")
    for k in marked:
        ax.text((lo[k] + hi[k]) / 2, -0.55, str(ids[k]), ha="center", va="bottom", fontsize=8, color="0.3",
                clip_on=True)

    ax.set_xlim(x0 - pad, x1 + pad)
    ax.ticklabel_format(axis="x", useOffset=False)
    ax.set_yticks(range(len(rows)), [r.label for r in rows])
    ax.set_ylim(len(rows) - 0.5, -0.95)  # first row on top, room above it for the iteration labels
    ax.set_xlabel("time since first step (ms)")
    ax.tick_params(axis="y", length=0)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.legend([Patch(facecolor=ROW_COLORS[r.label]) for r in rows], [r.label for r in rows], loc="upper left",
              bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=9)
    heading = title or "Step timeline"
    ax.set_title(heading if iteration is None else f"{heading}: iteration {iteration}", loc="left")
    return literal(fig)
