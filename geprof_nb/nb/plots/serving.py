"""A serving run's latency/throughput curve (a :func:`geprof_nb.sweep` of ``Profile.serving_summary``)."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from .colors import color_of
from .figure import empty_figure, literal

EMPTY_SWEEP_MESSAGE = "no sweep rows"


def latency_throughput(frame: pd.DataFrame, latency: str = "tpot_p50_ms", throughput: str = "output_tokens_per_s",
                       by: str | None = None, along: str | None = None, title: str | None = None) -> Figure:
    """Throughput against latency, one line per value of ``by`` (e.g. ``tp``), its points in the order of
    ``along`` (e.g. ``max_batch_size``, each point labelled with it): the curve a serving configuration
    moves along."""
    if frame.empty:
        return empty_figure(EMPTY_SWEEP_MESSAGE)
    for col in (latency, throughput, by, along):
        if col is not None and col not in frame.columns:
            have = ", ".join(map(str, frame.columns))
            raise ValueError(f"latency_throughput: no column {col!r}; the frame has {have}")
    fig = Figure(figsize=(7.5, 4.5), layout="constrained")
    ax = fig.add_subplot()
    groups = frame.groupby(by, sort=True) if by is not None else [(None, frame)]
    for key, rows in groups:
        rows = rows.sort_values(along, kind="stable") if along is not None else rows
        label = f"{by}={key[0] if isinstance(key, tuple) else key}" if by is not None else None
        ax.plot(rows[latency], rows[throughput], marker="o", color=color_of(label or "serving"), label=label)
        if along is not None:
            for x, y, v in zip(rows[latency], rows[throughput], rows[along]):
                ax.annotate(f"{along}={v}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlabel(latency)
    ax.set_ylabel(throughput)
    if by is not None:
        ax.legend(frameon=False, fontsize=9)
    ax.set_title(title or f"{throughput} against {latency}", loc="left")
    ax.grid(alpha=0.3)
    return literal(fig)
