"""The roofline (``Profile.roofline``): ops as points of arithmetic intensity x achieved FLOP/s, log-log, sized
by their time, under the cube and vector roofs and the HBM slope."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from .colors import color_of
from .figure import empty_figure, floats, literal, short, tidy

NO_ROOFLINE_MESSAGE = ("no op has FLOPs or bytes: a simulated run records them; real runs need aic_metrics "
                       "ArithmeticUtilization (FLOPs) and Memory (bytes)")
NO_BYTES_MESSAGE = ("no op has bytes, so none has an arithmetic intensity: profile a real run with aic_metrics "
                    "Memory (the roofline table still gives the FLOPs and the efficiency against the compute roof)")
#: The ``gid`` of the roof lines (for tests and readers of the figure).
CUBE_ROOF, VECTOR_ROOF = "roof-cube", "roof-vector"


def _table(data: Any) -> pd.DataFrame:
    """``data``'s roofline: a Profile's (``.roofline``) or the table itself."""
    return data if isinstance(data, pd.DataFrame) else data.roofline


def roofline(data: Any, color_by: str = "Task Type", label_top: int = 5, title: str | None = None) -> Figure:
    """Draw the roofline of a Profile (or of its ``roofline`` table): each op a point at its arithmetic
    intensity (FLOP per HBM byte) and achieved TFLOP/s, its area proportional to its time, coloured by
    ``color_by`` (``Task Type`` or ``OP Type``); the cube and vector roofs ``min(peak, intensity x HBM
    bandwidth)`` drawn over the intensities shown, the ``label_top`` longest ops named.  Ops without bytes
    (imported runs without the Memory group) have no intensity and are left out, said in the title."""
    table = _table(data)
    if table.empty:
        return empty_figure(NO_ROOFLINE_MESSAGE)
    if color_by not in ("Task Type", "OP Type"):
        raise ValueError(f"color_by {color_by!r} is not a column to colour by; accepted: 'Task Type', 'OP Type'")
    roofs = table.attrs["roofs"]
    x = floats(table["Arithmetic Intensity(FLOP/B)"])
    y = floats(table["Achieved TFLOP/s"])
    shown = np.isfinite(x) & (x > 0) & np.isfinite(y) & (y > 0)
    if not shown.any():
        return empty_figure(NO_BYTES_MESSAGE)
    rows = table[shown]
    x, y = x[shown], y[shown]
    dur = floats(rows["Duration(us)"])
    cube, vector, bw = roofs.cube_flops / 1e12, roofs.vector_flops / 1e12, roofs.hbm_bandwidth / 1e12
    lo = min(float(x.min()), vector / bw) / 4
    hi = max(float(x.max()), cube / bw) * 4
    grid = np.logspace(np.log10(lo), np.log10(hi), 256)

    fig = Figure(figsize=(11.0, 5.5), layout="constrained")
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.plot(grid, np.minimum(cube, grid * bw), color="0.2", linewidth=1.6, gid=CUBE_ROOF,
            label=f"cube roof {cube:,.1f} TFLOP/s")
    ax.plot(grid, np.minimum(vector, grid * bw), color="0.45", linewidth=1.3, linestyle="--", gid=VECTOR_ROOF,
            label=f"vector roof {vector:,.2f} TFLOP/s")
    ax.text(grid[8], grid[8] * bw * 1.25, f"HBM {roofs.hbm_bandwidth / 1e9:,.0f} GB/s", rotation=0, fontsize=8,
            color="0.35", va="bottom")
    sizes = 20 + 600 * dur / max(float(dur.max()), 1e-9)
    groups = rows[color_by].astype(str).to_numpy()
    order = pd.Series(dur).groupby(groups).sum().sort_values(ascending=False).index
    for name in order[:12]:
        mask = groups == name
        ax.scatter(x[mask], y[mask], s=sizes[mask], color=color_of(name), alpha=0.7, edgecolors="white",
                   linewidths=0.5, label=str(name))
    rest = ~np.isin(groups, order[:12])
    if rest.any():
        ax.scatter(x[rest], y[rest], s=sizes[rest], color="0.6", alpha=0.6, label=f"{len(order) - 12} more")
    name_col = "Op Name" if "Op Name" in rows.columns else "OP Type"
    for k in np.argsort(-dur, kind="stable")[:label_top]:
        ax.annotate(short(rows[name_col].iloc[k], 32), (x[k], y[k]), fontsize=7, color="0.25",
                    xytext=(4, 4), textcoords="offset points")
    ax.set_xlim(lo, hi)
    ax.set_ylim(max(min(float(y.min()), vector) / 4, cube * 1e-7), cube * 2)
    for axis in (ax.xaxis, ax.yaxis):  # plain numbers: the figure's texts are literal, no mathtext powers
        axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.set_xlabel("arithmetic intensity (FLOP per HBM byte)")
    ax.set_ylabel("achieved TFLOP/s")
    tidy(ax)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8, title=color_by,
              title_fontsize=8)
    left_out = len(table) - int(shown.sum())
    heading = title or f"Roofline of {roofs.chip}"
    more = f"; {left_out} without bytes not drawn" if left_out else ""
    ax.set_title(f"{heading}: {int(shown.sum())} ops, area by time{more}", loc="left")
    return literal(fig)
