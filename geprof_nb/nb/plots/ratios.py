"""The AI Core pipe ratios (``op_summary``'s ``*_ratio`` columns) of the longest ops, stacked."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .colors import EXTRA_COLORS, lighter
from .figure import EMPTY_OPS_MESSAGE, empty_figure, factorize, literal, short, tidy

NO_RATIOS_MESSAGE = ("op_summary has no AI Core *_ratio columns: profile with --aic-metrics PipeUtilization "
                     "(and --task-trace l1) for the pipe ratios")
#: Pipe colours of pipe_ratios; ``aiv_`` pipes of an A2 chip get a lighter shade of the same colour.
PIPE_COLORS = {
    "mac": "#4c72b0", "vec": "#55a868", "scalar": "#8172b3", "mte1": "#ccb974", "mte2": "#dd8452",
    "mte3": "#937860", "fixpipe": "#da8bc3",
}


def _ratio_columns(op_summary: pd.DataFrame) -> list[str]:
    """The AI Core ``*_ratio`` columns of op_summary (pipes, instruction mix, conflicts), in table order."""
    return [c for c in op_summary.columns if isinstance(c, str) and c.endswith("_ratio")]


def _ratio_color(column: str, k: int) -> Any:
    name = column[: -len("_ratio")]
    prefix, _, pipe = name.partition("_")
    if prefix in ("aic", "aiv") and pipe in PIPE_COLORS:
        return PIPE_COLORS[pipe] if prefix == "aic" or pipe in ("vec", "mte3") else lighter(PIPE_COLORS[pipe])
    if name in PIPE_COLORS:
        return PIPE_COLORS[name]
    return EXTRA_COLORS[k % len(EXTRA_COLORS)]


def _numbers(column: pd.Series, rows: np.ndarray) -> np.ndarray:
    """``column``'s values at positions ``rows`` as float64, NaN where there is no number (N/A)."""
    values = column.to_numpy()[rows]
    if values.dtype.kind in "fiu":
        return values.astype(np.float64)
    return pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(np.float64, na_value=np.nan)


def pipe_ratios(op_summary: pd.DataFrame, top: int = 15, title: str | None = None) -> Figure:
    """Draw the AI Core ratios of the ``top`` longest ops as stacked horizontal bars.

    Ops are grouped by ``Op Name`` and ranked by total ``Task Duration(us)`` among those with a
    ratio value; each segment is the mean of one ``*_ratio`` column over the op's executions (N/A,
    as on rows of the other core type, is skipped; a column with no value for an op adds nothing).
    The columns are whichever the chip and aic_metrics group give: ``aic_mac_ratio`` ...
    ``aiv_mte3_ratio`` on 910B, ``mac_ratio`` ... ``mte3_ratio`` on 910A (PipeUtilization), the
    instruction mix for ArithmeticUtilization, bank conflicts for ResourceConflictRatio.  Pipes
    work in parallel, so a bar can be longer than 1.  Without ratio columns (Memory, L2Cache, ...
    groups, or task_trace l0) the figure says to profile with ``--aic-metrics PipeUtilization``.
    """
    if op_summary.empty:
        return empty_figure(EMPTY_OPS_MESSAGE)
    columns = _ratio_columns(op_summary)
    if not columns:
        return empty_figure(NO_RATIOS_MESSAGE)
    # Only the rows with a ratio are read, and names stay codes until the top ops are known: a
    # long run's op_summary has millions of rows of a few hundred names.
    rows = np.flatnonzero(np.logical_or.reduce([op_summary[c].notna().to_numpy() for c in columns]))
    values = [_numbers(op_summary[c], rows) for c in columns]
    some = np.logical_or.reduce([~np.isnan(v) for v in values])  # N/A text is no value either
    if not some.all():
        rows, values = rows[some], [v[some] for v in values]
    if not len(rows):
        return empty_figure("no op has AI Core ratio values (AI CPU and communication tasks have none)")
    code, op_names = factorize(op_summary["Op Name"].iloc[rows])  # codes in the order the ops first ran
    n_ops = len(op_names)
    total = np.bincount(code, weights=np.nan_to_num(_numbers(op_summary["Task Duration(us)"], rows)), minlength=n_ops)
    ranked = np.argsort(-total, kind="stable")[:top]  # ties keep the order the ops first ran in
    with np.errstate(invalid="ignore"):  # per op the mean of each column over the values it has (0 / 0: none)
        means = pd.DataFrame({c: np.bincount(code, weights=np.nan_to_num(v), minlength=n_ops)[ranked]
                              / np.bincount(code, weights=~np.isnan(v), minlength=n_ops)[ranked]
                              for c, v in zip(columns, values)})
    names = [op_names[k] for k in ranked]
    total = total[ranked]
    columns = [c for c in columns if means[c].notna().any()]
    in_ms = total[0] >= 10_000

    fig = Figure(figsize=(11.0, 1.4 + 0.3 * len(names)), layout="constrained")
    ax = fig.add_subplot()
    y = np.arange(len(names))
    left = np.zeros(len(names))
    for k, c in enumerate(columns):
        width = means[c].fillna(0.0).to_numpy()
        ax.barh(y, width, left=left, height=0.7, color=_ratio_color(c, k), label=c[: -len("_ratio")],
                edgecolor="white", linewidth=0.4)
        left += width
    for yi, end, t in zip(y, left, total):
        ax.text(end, yi, f" {t / 1000:,.2f} ms" if in_ms else f" {t:,.1f} µs", va="center", ha="left", fontsize=8,
                color="0.35")
    ax.set_yticks(y, [short(n) for n in names], fontsize=8)
    ax.set_ylim(len(names) - 0.5, -0.5)
    ax.set_xlim(0, max(float(left.max()) * 1.15, 0.1))
    ax.set_xlabel("mean ratio of the op's cycles, stacked (pipes overlap: the sum can exceed 1)")
    ax.tick_params(axis="y", length=0)
    tidy(ax)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
              fontsize=8, title="ratio", title_fontsize=8)
    heading = title or "AI Core ratios per op"
    ax.set_title(f"{heading}: the {len(names)} longest ops of {n_ops} (text: total task time)", loc="left")
    return literal(fig)
