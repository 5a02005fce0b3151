"""What every figure of the package shares: its size, the axes' style, text shown as typed, names and
numbers as they are shown, the figure that says why there is no plot, and the one PNG renderer."""

from __future__ import annotations

from io import BytesIO

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.text import Text

EMPTY_OPS_MESSAGE = "no op tasks (enable task_trace)"
FIGSIZE = (11.0, 3.5)
MiB = 1024 * 1024


def tidy(ax) -> None:
    """No top/right spines: the plots are read against their own axes."""
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def share_bar_axes(ax, ends: np.ndarray, shares: np.ndarray, labels, xlabel: str) -> None:
    """The axes of a horizontal bar chart, one bar per label from the top: each bar's share of the time at its
    end, room right of the longest bar for it, the labels shortened."""
    y = np.arange(len(ends))
    for yi, v, sh in zip(y, ends, shares):
        ax.text(v, yi, f" {sh:.1f}%", va="center", ha="left", fontsize=8, color="0.25")
    ax.set_yticks(y, [short(str(label), 48) for label in labels], fontsize=9)
    ax.set_ylim(len(ends) - 0.5, -0.5)
    ax.set_xlim(0, ends.max() * 1.12 if len(ends) and ends.max() > 0 else 1)
    ax.set_xlabel(xlabel)
    ax.tick_params(axis="y", length=0)
    tidy(ax)


def format_size(nbytes: float) -> str:
    """A byte count in the binary unit (B, KiB, MiB, GiB, TiB) that shows it with 3 significant
    digits, so a 12 KiB peak does not read "0.0 MiB": ``512 B``, ``12.1 KiB``, ``1.50 MiB``."""
    value, unit = float(nbytes), "B"
    for larger in ("KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024:
            break
        value, unit = value / 1024, larger
    if unit == "B":
        return f"{value:.0f} B"
    value = float(f"{value:.3g}")
    decimals = 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2
    return f"{value:.{decimals}f} {unit}"


def literal(fig: Figure) -> Figure:
    """Show every text of ``fig`` as typed, never as mathtext: labels, legends and titles carry op,
    op type, graph and stream names, and an op named ``cost$a_b$`` would lose its dollars and grow a
    subscript.  These plots format their numbers without mathtext, so no text of theirs needs it."""
    for text in fig.findobj(Text):
        text.set_parse_math(False)
    return fig


def short(text: str, limit: int = 52) -> str:
    """A long op name cut at the front: its end (layer, op) is what tells ops of one scope apart."""
    text = str(text)
    return text if len(text) <= limit else "…" + text[len(text) - limit + 1:]


def floats(series: pd.Series) -> np.ndarray:
    """A column as float64 with NaN for N/A, whether it arrives as float, nullable Int64 or Float64."""
    return series.to_numpy(dtype=np.float64, na_value=np.nan)


def id_list(ids: np.ndarray) -> str:
    """Sorted unique ids, runs of three or more written as ``a-b`` so thousands of steps stay short."""
    values = sorted({int(i) for i in ids})
    parts: list[str] = []
    k = 0
    while k < len(values):
        j = k
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        if j - k >= 2:
            parts.append(f"{values[k]}-{values[j]}")
            k = j + 1
        else:
            parts.append(str(values[k]))
            k += 1
    return ", ".join(parts)


def empty_figure(message: str) -> Figure:
    """A figure that says why there is no plot, so notebook output never ends in a traceback for no data."""
    fig = Figure(figsize=FIGSIZE, layout="constrained")
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, fontsize=12, color="0.4")
    return literal(fig)


def factorize(values: pd.Series, missing: str = "N/A") -> tuple[np.ndarray, list[str]]:
    """Codes and names of a text column (categorical, object or string; N/A for missing)."""
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    names = [str(u) for u in uniques]
    if (codes < 0).any():
        codes = np.where(codes < 0, len(names), codes)
        names.append(missing)
    return codes.astype(np.int64), names


def figure_png(fig: Figure, dpi: int = 100) -> bytes:
    """Render a figure to PNG bytes, for static HTML fallbacks where no live matplotlib backend exists:
    the one renderer of every figure the explorers, the notebook and ``geprof run`` show.

    A figure with a layout engine (all of this module's) already fits its decorations inside itself;
    "tight" would draw it twice to find what it already knows.  Unless an axes keeps a fixed aspect
    (a heatmap's square cells, :mod:`.cluster_plots`): the layout then leaves the figure's sides
    empty, and "tight" crops them.
    """
    buf = BytesIO()
    fixed_aspect = any(ax.get_aspect() != "auto" for ax in fig.axes)
    tight = fixed_aspect or fig.get_layout_engine() is None
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight" if tight else None)
    return buf.getvalue()
