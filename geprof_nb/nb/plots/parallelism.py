"""Figures of a hybrid-parallel job, from the ClusterProfile's parallel tables.

* :func:`pipeline_chart` (``cluster.pipeline``): one lane per pipeline stage, each forward and backward pass
  of one step a bar labelled with its micro-batch (forward light, backward dark, a model chunk a hue), so the
  bubbles are the gaps: the warm-up before a stage's first pass, the cool-down after its last.  A stage's
  lane is its first rank's (the stage's ranks run in lockstep); x in ms from the step's first pass.
* :func:`expert_heatmap` (``cluster.expert_load``): layer x expert, coloured by the tokens each expert
  computed per step, each cell's share of its layer written in it up to 16 experts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .figure import empty_figure, tidy

NO_PIPELINE_MESSAGE = "no pipeline passes (the ranks recorded no forward_step / backward_step mstx ranges)"
NO_EXPERTS_MESSAGE = "no expert load (not a MoE model, or the ranks recorded no tokens per expert)"
#: Forward and backward colours of model chunk 0, 1, ...: light and dark of one hue.
_CHUNK_COLORS = [("#9ecae1", "#3182bd"), ("#fdae6b", "#e6550d"), ("#a1d99b", "#31a354"), ("#bcbddc", "#756bb1")]
#: Up to this many experts a heatmap cell writes its token share.
ANNOTATE_MAX = 16


def pipeline_chart(passes: pd.DataFrame, step: int | None = None, title: str | None = None) -> Figure:
    """The passes of ``step`` (default: the last one) per stage, as bars on one clock."""
    if passes.empty:
        return empty_figure(NO_PIPELINE_MESSAGE)
    step = int(passes["Step"].max()) if step is None else int(step)
    one = passes[passes["Step"] == step]
    if one.empty:
        return empty_figure(f"no pipeline passes in step {step}")
    first = one.groupby("Stage")["Rank"].min()
    one = one[one["Rank"].to_numpy() == first.reindex(one["Stage"]).to_numpy()]
    origin = float(one["Start(us)"].min())
    end = float(one["End(us)"].max())
    stages = sorted(int(s) for s in one["Stage"].unique())
    fig = Figure(figsize=(11.0, 1.2 + 0.55 * len(stages)), layout="constrained")
    ax = fig.add_subplot()
    labels = len(one) <= 256
    for stage, chunk, micro, direction, start, width in zip(
            one["Stage"], one["Model Chunk"], one["Micro Batch"], one["Direction"], one["Start(us)"],
            one["Duration(us)"]):
        y = stages.index(int(stage))
        light, dark = _CHUNK_COLORS[int(chunk) % len(_CHUNK_COLORS)]
        forward = direction == "forward"
        x0 = (float(start) - origin) / 1000
        ax.broken_barh([(x0, float(width) / 1000)], (y - 0.4, 0.8), facecolors=light if forward else dark,
                       edgecolor="white", linewidth=0.5)
        if labels:
            ax.text(x0 + float(width) / 2000, y, str(int(micro)), ha="center", va="center", fontsize=7,
                    color="black" if forward else "white")
    ax.set_yticks(range(len(stages)), [f"stage {s} (rank {int(first[s])})" for s in stages])
    ax.invert_yaxis()
    ax.set_xlim(0, (end - origin) / 1000)
    ax.set_xlabel(f"time in step {step} (ms from its first pass); bars: forward (light) and backward (dark) "
                  "passes, labelled with the micro-batch; gaps: the bubbles")
    ax.set_title(title or f"Pipeline schedule, step {step}", loc="left")
    tidy(ax)
    return fig


def expert_heatmap(load: pd.DataFrame, title: str = "Tokens per expert and layer (per step)") -> Figure:
    """Layer x expert, coloured by tokens (``cluster.expert_load``)."""
    if load.empty:
        return empty_figure(NO_EXPERTS_MESSAGE)
    grid = load.pivot_table(index="Layer", columns="Expert", values="Tokens", aggfunc="sum")
    values = grid.to_numpy(np.float64)
    rows, cols = values.shape
    fig = Figure(figsize=(min(11.0, 3.0 + 0.45 * cols), min(9.0, 1.6 + 0.35 * rows)), layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow(np.ma.masked_invalid(values), aspect="auto", interpolation="nearest", cmap="viridis")
    ax.set_xticks(range(cols), [str(e) for e in grid.columns])
    ax.set_yticks(range(rows), [str(layer) for layer in grid.index])
    ax.set_xlabel("expert")
    ax.set_ylabel("layer")
    ax.set_title(title, loc="left")
    if cols <= ANNOTATE_MAX:
        shares = values / np.nansum(values, axis=1, keepdims=True)
        top = np.nanmax(values) if np.isfinite(values).any() else 0
        for (i, j), v in np.ndenumerate(values):
            if np.isfinite(v):
                ax.text(j, i, f"{shares[i, j]:.0%}", ha="center", va="center", fontsize=8,
                        color="black" if v > 0.6 * top else "white")
    bar = fig.colorbar(image, ax=ax, fraction=0.05, pad=0.02)
    bar.set_label("tokens per step")
    return fig
