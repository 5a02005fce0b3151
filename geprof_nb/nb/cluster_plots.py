"""Matplotlib heatmaps of a cluster, readable from 2 to thousands of ranks.

* :func:`rank_step_heatmap`: a rank x step matrix (``ClusterProfile.rank_step``: step time,
  wait time, ...), one cell per rank and step; a slow rank is a bright row, a slow step a column.
* :func:`communication_heatmap`: the communication matrix (``ClusterProfile.communication_matrix``)
  as source rank x destination rank, coloured by bandwidth; a slow link is a dark cell among
  bright ones, links that carry nothing are blank.

A figure has a few hundred pixel rows, so beyond :data:`MAX_CELLS` ranks (or steps) per axis
consecutive ranks are binned: a rank x step cell then shows the *maximum* of its ranks (the worst
rank of a bin is what one looks for, a mean would hide it) and a matrix cell the bandwidth of
all its links together (bytes / time), so the colour scale keeps its meaning.  Axis labels say
what a row or column holds.  Like :mod:`.plots`, figures are built without pyplot.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

#: Rows (or columns) a heatmap draws one per rank or step; beyond it they are binned.
MAX_CELLS = 64
#: Up to this many ranks the matrix writes each cell's value.
ANNOTATE_MAX = 16
_EMPTY_RANK_STEP = "no per-rank step data (profile with --training-trace on and --task-trace on)"
_EMPTY_MATRIX = "no communication between ranks (profile with --hccl on; a one-rank job has no links)"


def _empty(message: str) -> Figure:
    fig = Figure(figsize=(8.0, 2.5), layout="constrained")
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, fontsize=11, color="0.4")
    return fig


def _bins(n: int, limit: int) -> int:
    """Items per bin so that ``n`` items make at most ``limit`` bins."""
    return max(1, -(-n // limit))


def _bin_labels(values: np.ndarray, per: int) -> list[str]:
    """``"r"`` for single items, ``"a-b"`` for a bin of consecutive ones."""
    out = []
    for k in range(0, len(values), per):
        chunk = values[k:k + per]
        out.append(str(chunk[0]) if len(chunk) == 1 else f"{chunk[0]}-{chunk[-1]}")
    return out


def _ticks(ax, axis: str, labels: list[str], limit: int = 32) -> None:
    """Label every k-th cell so at most ``limit`` labels share an axis."""
    step = max(1, -(-len(labels) // limit))
    positions = list(range(0, len(labels), step))
    if axis == "x":
        longest = max(len(labels[i]) for i in positions)  # "1-8" is short, "193-200" is not
        ax.set_xticks(positions, [labels[i] for i in positions], rotation=90 if longest > 3 else 0, fontsize=8)
    else:
        ax.set_yticks(positions, [labels[i] for i in positions], fontsize=8)


def _reduce_bins(values: np.ndarray, per: int, axis: int, how: str) -> np.ndarray:
    """Bins of ``per`` consecutive rows (axis 0) or columns (axis 1), max or mean, NaN-aware."""
    if per == 1:
        return values
    n = values.shape[axis]
    pad = (-n) % per
    widths = [(0, 0), (0, 0)]
    widths[axis] = (0, pad)
    padded = np.pad(values, widths, constant_values=np.nan)
    rows, cols = padded.shape
    shape = (rows // per, per, cols) if axis == 0 else (rows, cols // per, per)
    blocks = padded.reshape(shape)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN bin (ranks without data) stays blank
        return np.nanmax(blocks, axis=axis + 1) if how == "max" else np.nanmean(blocks, axis=axis + 1)


def rank_step_heatmap(matrix: pd.DataFrame, title: str = "Step time per rank", unit: str = "us",
                      value: str = "step time", max_cells: int = MAX_CELLS, cmap: str = "viridis") -> Figure:
    """Heatmap of a rank x step matrix (index ranks, columns steps, values in ``unit``).

    More than ``max_cells`` ranks are binned (a cell shows the maximum over its ranks), more than
    ``max_cells`` steps too (the mean over the steps of a bin)."""
    if matrix.empty:
        return _empty(_EMPTY_RANK_STEP)
    ranks = matrix.index.to_numpy()
    steps = matrix.columns.to_numpy()
    values = matrix.to_numpy(np.float64)
    rank_per, step_per = _bins(len(ranks), max_cells), _bins(len(steps), max_cells)
    values = _reduce_bins(_reduce_bins(values, rank_per, 0, "max"), step_per, 1, "mean")
    rows, cols = values.shape
    fig = Figure(figsize=(min(11.0, 3.0 + 0.35 * cols), min(9.0, 1.6 + 0.28 * rows)), layout="constrained")
    ax = fig.add_subplot()
    finite = values[np.isfinite(values)]
    norm = Normalize(float(finite.min()), float(finite.max())) if len(finite) else None
    image = ax.imshow(np.ma.masked_invalid(values), aspect="auto", interpolation="nearest", cmap=cmap, norm=norm)
    _ticks(ax, "y", _bin_labels(ranks, rank_per))
    _ticks(ax, "x", _bin_labels(steps, step_per))
    ax.set_ylabel("rank" if rank_per == 1 else f"ranks (bins of {rank_per}: max of the bin)")
    ax.set_xlabel("step" if step_per == 1 else f"steps (bins of {step_per}: mean of the bin)")
    ax.set_title(title, loc="left")
    bar = fig.colorbar(image, ax=ax, fraction=0.05, pad=0.02)
    bar.set_label(f"{value} ({unit})")
    return fig


def _links(matrix: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The ranks that appear and, per matrix row, the position of its src and dst among them, its
    bandwidth (GB/s) and that bandwidth over the median of its link type: sparse, so 65,536 ranks
    cost no dense matrix."""
    src = matrix["Src Rank"].to_numpy(np.int64)
    dst = matrix["Dst Rank"].to_numpy(np.int64)
    ranks = np.unique(np.concatenate([src, dst]))
    time = matrix["Transit Time(us)"].to_numpy(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        bandwidth = np.where(time > 0, matrix["Size(Byte)"].to_numpy(np.float64) / (time * 1000.0), np.nan)
        median = pd.Series(bandwidth).groupby(matrix["Link Type"].to_numpy()).transform("median").to_numpy()
        ratio = np.where(median > 0, bandwidth / median, np.nan)
    return ranks, np.searchsorted(ranks, src), np.searchsorted(ranks, dst), bandwidth, ratio


def communication_heatmap(matrix: pd.DataFrame, title: str = "Communication matrix",
                          max_cells: int = MAX_CELLS, cmap: str = "viridis") -> Figure:
    """Source rank x destination rank; blank where nothing was sent.

    Up to ``max_cells`` ranks a cell is a link coloured by its bandwidth (GB/s = bytes / ns of the
    transit sub-tasks; link types of one pair summed).  More ranks are binned, and links of
    different types (HCCS inside a server, RoCE between servers) then share cells, so a cell shows
    the slowest link between its two bins *relative to the median of that link's type*: 1 is a
    normal link, a slow link is dark whatever its type."""
    if matrix.empty:
        return _empty(_EMPTY_MATRIX)
    ranks, si, di, link_bw, link_ratio = _links(matrix)
    per = _bins(len(ranks), max_cells)
    n = -(-len(ranks) // per)
    if per == 1:  # one cell per pair: bandwidth of the pair's link types together
        size, time = np.zeros((n, n)), np.zeros((n, n))
        np.add.at(size, (si, di), matrix["Size(Byte)"].to_numpy(np.float64))
        np.add.at(time, (si, di), matrix["Transit Time(us)"].to_numpy(np.float64))
        with np.errstate(divide="ignore", invalid="ignore"):
            values = np.where(time > 0, size / (time * 1000.0), np.nan)
        label, what = "bandwidth (GB/s)", "rank"
    else:
        values = np.full((n, n), np.inf)
        ok = np.isfinite(link_ratio)
        np.minimum.at(values, (si[ok] // per, di[ok] // per), link_ratio[ok])
        values[np.isinf(values)] = np.nan
        label, what = "slowest link / median of its link type", f"ranks (bins of {per})"
    side = min(9.0, 3.0 + 0.32 * n)
    fig = Figure(figsize=(side + 1.5, side), layout="constrained")
    ax = fig.add_subplot()
    finite = values[np.isfinite(values)]
    top = float(max(finite.max(), 1.0 if per > 1 else 0.0)) if len(finite) else 1.0
    image = ax.imshow(np.ma.masked_invalid(values), interpolation="nearest", cmap=cmap, norm=Normalize(0.0, top))
    ax.set_facecolor("white")
    labels = _bin_labels(ranks, per)
    _ticks(ax, "x", labels)
    _ticks(ax, "y", labels)
    ax.set_xlabel(f"destination {what}")
    ax.set_ylabel(f"source {what}")
    if n <= ANNOTATE_MAX and len(finite):
        for i, j in zip(*np.nonzero(np.isfinite(values))):
            v = values[i, j]
            ax.text(j, i, f"{v:.0f}" if per == 1 else f"{v:.2f}", ha="center", va="center", fontsize=7,
                    color="black" if v > 0.6 * top else "white")
    ax.set_title(f"{title}: {'bandwidth per link' if per == 1 else 'slowest link per cell'}", loc="left")
    bar = fig.colorbar(image, ax=ax, fraction=0.05, pad=0.02)
    bar.set_label(label)
    return fig
