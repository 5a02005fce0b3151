"""Device time per model module (``Profile.module_statistic``), the phases stacked, with each module's share."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .colors import color_of
from .figure import empty_figure, literal, share_bar_axes

EMPTY_MODULES_MESSAGE = "no module_statistic rows (enable task_trace)"


def module_bars(module_statistic: pd.DataFrame, top: int = 15, title: str | None = None) -> Figure:
    """Draw the ``top`` modules by total device time, largest on top: one bar per module, its forward,
    backward and optimizer parts stacked (coloured by phase, as the legend says), ending with the module's
    share of all op time.  x in µs, or ms when the largest module reaches 10 ms."""
    if module_statistic.empty:
        return empty_figure(EMPTY_MODULES_MESSAGE)
    rows = module_statistic.assign(_t=pd.to_numeric(module_statistic["Total Time(us)"], errors="coerce").fillna(0.0))
    per_phase = rows.pivot_table(index="Module", columns="Phase", values="_t", aggfunc="sum", fill_value=0.0,
                                 sort=False)
    share = rows.groupby("Module", sort=False)["Share(%)"].sum()
    totals = per_phase.sum(axis=1).sort_values(ascending=False, kind="stable")
    shown = totals.head(top).index
    phases = [p for p in ("forward", "backward", "optimizer", "N/A") if p in per_phase.columns]
    in_ms = float(totals.max()) >= 10_000
    scale, unit = (1000.0, "ms") if in_ms else (1.0, "µs")

    fig = Figure(figsize=(11.0, 1.2 + 0.3 * len(shown)), layout="constrained")
    ax = fig.add_subplot()
    y = np.arange(len(shown))
    left = np.zeros(len(shown))
    for phase in phases:
        values = per_phase.loc[shown, phase].to_numpy(np.float64) / scale
        ax.barh(y, values, left=left, height=0.7, color=color_of(phase))
        left += values
    share_bar_axes(ax, left, share.loc[shown].to_numpy(np.float64), shown, f"total device time ({unit})")
    ax.legend([Patch(facecolor=color_of(p)) for p in phases], phases, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              frameon=False, fontsize=9, title="Phase", title_fontsize=9)
    heading = title or "Device time per module"
    if len(totals) > len(shown):
        heading += f": top {len(shown)} of {len(totals)} ({share.loc[shown].sum():.1f}% of the time)"
    ax.set_title(heading, loc="left")
    return literal(fig)
