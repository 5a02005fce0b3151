"""Measuring for the benchmark suite: warm-up, at least five runs, medians, and
side-by-side comparisons run alternately so machine noise cancels in the ratio."""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Callable


@dataclass
class Result:
    """One benchmark figure and whether it meets its target."""

    name: str
    figure: float
    unit: str
    target: str
    passed: bool
    detail: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def median_time(fn: Callable[[], object], runs: int = 5, warmup: int = 1) -> float:
    """Median wall time of ``fn`` in seconds."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def compare(a: Callable[[], object], b: Callable[[], object], runs: int = 5, warmup: int = 1) -> tuple[float, float, float]:
    """Medians of ``a`` and ``b`` run alternately (a, b, a, b, ...) and the ratio a/b."""
    for _ in range(warmup):
        a()
        b()
    ta, tb = [], []
    for _ in range(runs):
        t = time.perf_counter()
        a()
        ta.append(time.perf_counter() - t)
        t = time.perf_counter()
        b()
        tb.append(time.perf_counter() - t)
    ma, mb = statistics.median(ta), statistics.median(tb)
    return ma, mb, ma / mb


def table(results: list[Result]) -> str:
    """A plain-text table of results."""
    rows = [("benchmark", "figure", "target", "ok")]
    for r in results:
        rows.append((r.name, f"{r.figure:.4g} {r.unit}", r.target, "yes" if r.passed else "NO"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
