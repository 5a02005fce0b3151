"""Total time per OP Type (``op_statistic``), with its share."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .colors import color_of
from .figure import empty_figure, literal, share_bar_axes

EMPTY_OP_STATISTIC_MESSAGE = "no op_statistic rows (enable task_trace)"


def op_type_bars(op_statistic: pd.DataFrame, top: int = 15, title: str | None = None) -> Figure:
    """Draw the total time per OP Type (msprof ``op_statistic``), largest on top, with its share.

    Rows are summed per (OP Type, Core Type) over devices; the label names the Core Type when an
    OP Type runs on several.  Bars are coloured by Core Type (as Task Types in the Gantt), and each
    ends with its share of all ops' time.  x in µs, or ms when the largest total reaches 10 ms
    (the axis label says which).  Only the ``top`` longest are drawn; the title says how many of
    how many, and their share.
    """
    if op_statistic.empty:
        return empty_figure(EMPTY_OP_STATISTIC_MESSAGE)
    stats = pd.DataFrame({
        "op": op_statistic["OP Type"].astype(str).to_numpy(),
        "core": (op_statistic["Core Type"].astype(str).to_numpy() if "Core Type" in op_statistic
                 else np.full(len(op_statistic), "")),
        "total": pd.to_numeric(op_statistic["Total Time(us)"], errors="coerce").to_numpy(np.float64, na_value=np.nan),
    })
    stats = stats.groupby(["op", "core"], sort=False, as_index=False)["total"].sum()
    grand = float(stats["total"].sum())
    stats = stats.sort_values("total", ascending=False, kind="stable")
    several = stats.groupby("op")["core"].transform("nunique") > 1
    stats["label"] = np.where(several, stats["op"] + " (" + stats["core"] + ")", stats["op"])
    shown = stats.head(top)
    in_ms = shown["total"].max() >= 10_000
    scale, unit = (1000.0, "ms") if in_ms else (1.0, "µs")
    values = shown["total"].to_numpy() / scale
    share = 100.0 * shown["total"].to_numpy() / grand if grand > 0 else np.zeros(len(shown))

    fig = Figure(figsize=(11.0, 1.2 + 0.3 * len(shown)), layout="constrained")
    ax = fig.add_subplot()
    y = np.arange(len(shown))
    colors = [color_of(c) for c in shown["core"]]
    ax.barh(y, values, height=0.7, color=colors)
    share_bar_axes(ax, values, share, shown["label"], f"total time ({unit})")
    cores = list(dict.fromkeys(c for c in shown["core"] if c))
    if cores:
        ax.legend([Patch(facecolor=color_of(c)) for c in cores], cores, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  frameon=False, fontsize=9, title="Core Type", title_fontsize=9)
    heading = title or "Time per OP Type"
    if len(stats) > len(shown):
        heading += f": top {len(shown)} of {len(stats)} ({share.sum():.1f}% of the time)"
    ax.set_title(heading, loc="left")
    return literal(fig)
