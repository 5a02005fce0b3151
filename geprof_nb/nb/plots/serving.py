"""A serving run's figures: its engine steps over time (``Profile.serving_steps``), and the latency/throughput
curve of a :func:`geprof_nb.sweep` of ``Profile.serving_summary``."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .colors import color_of
from .figure import empty_figure, literal, tidy

EMPTY_SWEEP_MESSAGE = "no sweep rows"
NO_SERVING_STEPS_MESSAGE = "no serving steps (a run of ge.serve has them)"
#: The step phases of ``serving_steps``, in the order the chart's legend lists them.
PHASES = ("prefill", "mixed", "decode")


def serving_steps_chart(steps: pd.DataFrame, title: str | None = None) -> Figure:
    """Three panels over the run (x: ms since the first step's start): the step's batch (its decode sequences
    and its prefill sequences stacked), the KV-cache blocks in use after it (against the cache's size), and
    its time, coloured by phase: where the batch grows, the cache fills and the steps slow down."""
    if steps.empty:
        return empty_figure(NO_SERVING_STEPS_MESSAGE)
    x0 = float(steps["start_us"].min())
    start = (steps["start_us"].to_numpy(float) - x0) / 1e3
    width = steps["step_ms"].to_numpy(float)
    fig = Figure(figsize=(9.0, 6.0), layout="constrained")
    batch, kv, time = fig.subplots(3, 1, sharex=True)
    decode, prefill = steps["decode_seqs"].to_numpy(float), steps["prefill_seqs"].to_numpy(float)
    batch.bar(start, decode, width, align="edge", color=color_of("decode"), label="decode sequences")
    batch.bar(start, prefill, width, bottom=decode, align="edge", color=color_of("prefill"), label="prefill sequences")
    batch.set_ylabel("batch (sequences)")
    batch.legend(frameon=False, fontsize=8, loc="upper right")
    used = steps["kv_blocks_used"].to_numpy(float)
    blocks = float((steps["kv_blocks_used"] + steps["kv_blocks_free"]).iloc[0])
    kv.step(start + width, used, where="pre", color=color_of("kv cache"))
    kv.fill_between(start + width, used, step="pre", alpha=0.3, color=color_of("kv cache"))
    kv.set_ylabel("KV blocks in use")
    kv.set_title(f"of {blocks:,.0f} blocks", loc="right", fontsize=8)
    phase = steps["phase"].astype(str).to_numpy()
    for name in PHASES:
        mine = phase == name
        if mine.any():
            time.bar(start[mine], width[mine], width[mine], align="edge", color=color_of(name), label=name)
    time.set_ylabel("step time (ms)")
    time.set_xlabel("ms since the first step")
    time.legend(frameon=False, fontsize=8, loc="upper right")
    for ax in (batch, kv, time):
        tidy(ax)
    preempted = steps["preempted"].to_numpy(float) > 0
    if preempted.any():
        kv.plot(start[preempted] + width[preempted], used[preempted], "v", color="#c44e52", label="preemption")
        kv.legend(frameon=False, fontsize=8, loc="upper right")
    batch.set_title(title or f"{len(steps):,} engine steps: batch, KV cache, step time", loc="left")
    batch.set_ylim(0, max(1.0, float(np.max(decode + prefill))) * 1.15)
    return literal(fig)


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
