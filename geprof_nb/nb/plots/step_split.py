"""The step chart (``step_breakdown``): a stacked bar per step, Computing / exposed Communication / Free,
so where every step's time goes shows at a glance (HTA's temporal breakdown), beside the step figure."""

from __future__ import annotations

from typing import Collection

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .colors import TASK_TYPE_COLORS
from .figure import empty_figure, floats, literal, tidy

EMPTY_BREAKDOWN_MESSAGE = "no step_breakdown rows (the step split needs op data: profile with task_trace on)"
#: The parts of a step, bottom up: step_breakdown's column and what the chart calls it.
PARTS = (("Computing", "Computing"), ("Communication(Not Overlapped)", "exposed Communication"), ("Free", "Free"))
PART_COLORS = {"Computing": TASK_TYPE_COLORS["AI_CORE"], "exposed Communication": TASK_TYPE_COLORS["COMMUNICATION"],
               "Free": "#c9c9c9"}
#: Up to this many steps each is its own bar, with a gap; beyond it the bars touch, each part one filled
#: outline over every step (a run of 100,000 steps draws as fast as one of 10).
MAX_SEPARATE_BARS = 200
#: Beyond this many steps, consecutive steps are merged into this many columns (a column's parts are their mean,
#: and a line marks its longest step): more outline points than pixels only slow the drawing down.
MAX_COLUMNS = 1100
#: Step numbers under the bars up to this many steps (more would overlap); beyond, the axis picks its ticks.
MAX_STEP_LABELS = 30
FIGSIZE = (11.0, 2.4)


def step_split_bars(step_breakdown: pd.DataFrame, step_us: float | None = None, left_out: Collection[int] = (),
                    title: str | None = None, labels: list[str] | None = None) -> Figure:
    """Draw one stacked bar per step of ``step_breakdown``: its Computing, Communication(Not Overlapped)
    (labelled exposed Communication) and Free, bottom up, so a bar is as tall as its step period.

    ``step_us`` (``Profile.step_split.length_us``, the step figure) is drawn as a dashed line across;
    the steps in ``left_out`` (the figure's outliers, a first step that spans only itself) are hatched,
    with a legend entry saying they are not in the figure.  y in µs, or ms from a 10 ms step on.  More than
    :data:`MAX_COLUMNS` steps are merged into that many columns of consecutive steps: a column shows their
    mean parts, and a line the longest of them, so an outlier step still shows.  ``labels`` name the bars
    instead of their step numbers (the compare view's two runs).
    """
    if step_breakdown.empty or not all(c in step_breakdown.columns for c, _ in PARTS):
        return empty_figure(EMPTY_BREAKDOWN_MESSAGE)
    steps = pd.to_numeric(step_breakdown["Step"], errors="coerce").to_numpy(np.float64)
    parts = np.column_stack([np.nan_to_num(floats(step_breakdown[c]), nan=0.0) for c, _ in PARTS])
    total = parts.sum(axis=1)
    scale, unit = (1000.0, "ms") if max(total.max(), step_us or 0.0) >= 10_000 else (1.0, "µs")
    parts, total = parts / scale, total / scale
    x = np.arange(len(steps), dtype=np.float64)
    out = np.isin(steps, np.asarray(list(left_out), np.float64))
    longest = None
    if len(steps) > MAX_COLUMNS:  # merge consecutive steps per column: their mean parts, their longest step
        first = np.unique(np.linspace(0, len(steps), MAX_COLUMNS, endpoint=False).astype(np.int64))
        count = np.diff(np.r_[first, len(steps)])
        parts = np.add.reduceat(parts, first, axis=0) / count[:, None]
        longest, total = np.maximum.reduceat(total, first), np.add.reduceat(total, first) / count
        x = (first + (count - 1) / 2.0).astype(np.float64)

    fig = Figure(figsize=FIGSIZE, layout="constrained")
    ax = fig.add_subplot()
    bottom = np.zeros(len(x))
    separate = len(x) <= MAX_SEPARATE_BARS
    for k, (_, label) in enumerate(PARTS):
        if separate:
            ax.bar(x, parts[:, k], bottom=bottom, width=0.8, color=PART_COLORS[label], linewidth=0, label=label)
            if out.any():
                ax.bar(x[out], parts[out, k], bottom=bottom[out], width=0.8, fill=False, hatch="///",
                       edgecolor="white", linewidth=0, label="_left out")
        else:
            edges = np.r_[x - 0.5, x[-1] + 0.5] if longest is None else np.r_[first - 0.5, len(steps) - 0.5]
            ax.stairs(bottom + parts[:, k], edges, baseline=bottom, fill=True, color=PART_COLORS[label],
                      label=label)
        bottom = bottom + parts[:, k]
    handles = [Patch(facecolor=PART_COLORS[label], label=label) for _, label in PARTS]
    if longest is not None:
        ax.stairs(longest, np.r_[first - 0.5, len(steps) - 0.5], color="0.35", linewidth=0.6, baseline=None)
        handles.append(ax.patches[-1])
        handles[-1].set_label(f"longest step of a column ({len(steps) / len(first):,.1f} steps each)")
    if step_us is not None and np.isfinite(step_us):
        ax.axhline(step_us / scale, color="0.2", linestyle="--", linewidth=0.9)
        handles.append(ax.lines[-1])
        handles[-1].set_label(f"step figure {step_us / scale:,.3f} {unit}")
    if separate and out.any():
        handles.append(Patch(facecolor="0.6", hatch="///", edgecolor="white", label="not in the step figure"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=9)
    ax.set_xlim(-0.6, len(steps) - 0.4)
    top = max((longest if longest is not None else total).max(), (step_us or 0.0) / scale)
    ax.set_ylim(0, top * 1.08 or 1.0)
    if labels is not None:
        ax.set_xticks(np.arange(len(steps)), labels, fontsize=9)
    elif len(steps) <= MAX_STEP_LABELS:
        ax.set_xticks(np.arange(len(steps)), [f"{s:g}" for s in steps], fontsize=8)
    else:  # ticks at positions, labelled with the step there
        ticks = ax.get_xticks()
        ticks = ticks[(ticks >= 0) & (ticks < len(steps))].astype(int)
        ax.set_xticks(ticks, [f"{steps[t]:g}" for t in ticks], fontsize=8)
    ax.yaxis.set_major_formatter(lambda v, _: f"{v:,.0f}")
    ax.set_xlabel("" if labels is not None else "step")
    ax.set_ylabel(unit)
    tidy(ax)
    ax.set_title(title or f"Where each step's time goes ({len(steps):,} steps)", loc="left")
    return literal(fig)
