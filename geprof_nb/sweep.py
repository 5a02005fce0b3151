"""``geprof_nb.sweep``: a function over a parameter grid, its results as one DataFrame (a latency/throughput
curve of a serving configuration, one point per batch size, TP degree or request rate)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any, Callable

import pandas as pd


def sweep(fn: Callable[..., Any], **grid: Any) -> pd.DataFrame:
    """Call ``fn(**point)`` for every point of the product of ``grid``'s value lists (a value that is not a
    list or tuple is one value), in order; one row per point: the point's parameters, then what ``fn``
    returned (a mapping or Series: its keys as columns; anything else: a ``result`` column)."""
    if not callable(fn):
        raise TypeError(f"sweep: fn must be callable, got {type(fn).__name__}")
    if not grid:
        raise ValueError("sweep: give the grid as keyword lists, e.g. sweep(fn, max_batch_size=[8, 32, 64])")
    names = list(grid)
    values = [list(v) if isinstance(v, (list, tuple)) else [v] for v in grid.values()]
    for name, vs in zip(names, values):
        if not vs:
            raise ValueError(f"sweep: {name} has no values")
    rows = []
    for point in itertools.product(*values):
        params = dict(zip(names, point))
        got = fn(**params)
        if isinstance(got, pd.Series):
            got = got.to_dict()
        result = dict(got) if isinstance(got, Mapping) else {"result": got}
        clash = sorted(set(result) & set(params))
        if clash:
            raise ValueError(f"sweep: fn returned {clash[0]!r}, a name of the grid; rename one of them")
        rows.append({**params, **result})
    return pd.DataFrame(rows)
