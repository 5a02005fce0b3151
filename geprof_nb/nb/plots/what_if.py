"""The what-if chart (``Profile.what_if``): each step's critical path today beside the predicted one, stacked by
kind (compute, communication, host, wait, idle), so what a change would save, and from which part, shows at once."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .colors import TASK_TYPE_COLORS
from .figure import empty_figure, literal, tidy

EMPTY_WHAT_IF_MESSAGE = ("no steps to compare (the what-if needs steps with device tasks: task_trace and "
                         "training_trace on)")
#: The critical path's kinds, bottom up, and their colours.
KIND_COLORS = {"compute": TASK_TYPE_COLORS["AI_CORE"], "communication": TASK_TYPE_COLORS["COMMUNICATION"],
               "host": TASK_TYPE_COLORS["MEMCPY_ASYNC"], "wait": TASK_TYPE_COLORS["EVENT_WAIT"], "idle": "#e3e3e3"}
#: Up to this many steps each gets its pair of bars; more are drawn as one pair: the mean step.
MAX_STEPS = 20
FIGSIZE = (11.0, 2.8)


def what_if_bars(now: pd.DataFrame, predicted: pd.DataFrame, title: str | None = None) -> Figure:
    """Draw, per step, two stacked bars: the critical path's split today (``now``: ``Profile.critical_path_summary``)
    and under the change (``predicted``: ``WhatIf.predicted``), each as tall as its step; the predicted bar is
    labelled with its change in %.  Steps are matched by ``iteration``; more than :data:`MAX_STEPS` steps are
    drawn as their mean.  y in µs, or ms from a 10 ms step on."""
    columns = [f"{k}_ns" for k in KIND_COLORS]
    if now.empty or predicted.empty or not all(c in now and c in predicted for c in ["iteration", *columns]):
        return empty_figure(EMPTY_WHAT_IF_MESSAGE)
    both = now[["iteration", *columns]].merge(predicted[["iteration", *columns]], on="iteration",
                                              suffixes=("_now", "_new"))
    if both.empty:
        return empty_figure(EMPTY_WHAT_IF_MESSAGE)
    parts_now = both[[f"{c}_now" for c in columns]].to_numpy(np.float64) / 1000.0
    parts_new = both[[f"{c}_new" for c in columns]].to_numpy(np.float64) / 1000.0
    labels = [f"{int(i)}" for i in both["iteration"]]
    if len(both) > MAX_STEPS:
        parts_now, parts_new = parts_now.mean(axis=0, keepdims=True), parts_new.mean(axis=0, keepdims=True)
        labels = [f"mean of {len(both):,} steps"]
    longest = max(parts_now.sum(axis=1).max(), parts_new.sum(axis=1).max())
    scale, unit = (1000.0, "ms") if longest >= 10_000 else (1.0, "µs")
    parts_now, parts_new = parts_now / scale, parts_new / scale

    fig = Figure(figsize=FIGSIZE, layout="constrained")
    ax = fig.add_subplot()
    x = np.arange(len(labels), dtype=np.float64) * 2.6
    for offset, parts, hatch in ((0.0, parts_now, None), (1.0, parts_new, "//")):
        bottom = np.zeros(len(labels))
        for k, kind in enumerate(KIND_COLORS):
            ax.bar(x + offset, parts[:, k], bottom=bottom, width=0.9, color=KIND_COLORS[kind], hatch=hatch,
                   edgecolor="white", linewidth=0)
            bottom = bottom + parts[:, k]
    total_now, total_new = parts_now.sum(axis=1), parts_new.sum(axis=1)
    for xi, a, b in zip(x, total_now, total_new):
        change = (b / a - 1) * 100 if a else 0.0
        ax.text(xi + 1.0, b, f"{change:+.1f}%", ha="center", va="bottom", fontsize=8, color="0.25")
    ticks = np.column_stack([x, x + 1.0]).ravel()
    ax.set_xticks(ticks, [t for label in labels for t in (f"{label}\nnow", "predicted")], fontsize=8)
    handles = [Patch(facecolor=KIND_COLORS[k], label=k) for k in KIND_COLORS]
    handles.append(Patch(facecolor="0.7", hatch="//", edgecolor="white", label="predicted"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=9)
    ax.set_ylim(0, max(total_now.max(), total_new.max()) * 1.12 or 1.0)
    ax.yaxis.set_major_formatter(lambda v, _: f"{v:,g}")
    ax.set_xlabel("step")
    ax.set_ylabel(unit)
    tidy(ax)
    ax.set_title(title or "Critical path per step: now and predicted", loc="left")
    return literal(fig)
