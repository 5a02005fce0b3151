"""Measuring for the benchmark suite: warm-up, at least five runs, medians, and
side-by-side comparisons run alternately so machine noise cancels in the ratio.

A measured function may return a *cleanup* callable (e.g. removing the run
directory it wrote); the harness calls it after the clock stopped, so deleting
files is not counted as the work measured.  Before every timed call the
garbage collector runs (untimed), so a full collection left over by one side
does not land in the other side's time.
"""

from __future__ import annotations

import gc
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

#: Runs after the warm-up; the issue asks for at least five.
RUNS = 5
#: The ``target`` of a figure reported as information, with nothing it must meet.
NO_TARGET = "none (information)"

Measured = Callable[[], object]


@dataclass
class Result:
    """One benchmark figure and whether it meets its target.

    ``detail`` holds what a reader needs to check the figure: sizes, both sides'
    medians and the ratio for comparisons, and every run's time.
    """

    name: str
    figure: float
    unit: str
    target: str
    passed: bool | None  # None: not measured (a peer package is not installed), or no target (NO_TARGET)
    detail: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        """The JSON record (a figure that was not measured is null, not NaN)."""
        out = asdict(self)
        if out["figure"] != out["figure"]:
            out["figure"] = None
        return out


def information(name: str, figure: float, unit: str, detail: dict) -> Result:
    """The record of a figure reported for what it says, with no target to meet."""
    return Result(name, figure, unit, NO_TARGET, None, detail)


def skipped(name: str, unit: str, target: str, package: str) -> Result:
    """The record of a comparison that cannot run here: the peer ``package`` is not installed."""
    return Result(name, float("nan"), unit, target, None,
                  {"skipped": f"{package} is not installed (pip install {package})"})


def isolated(bench: Callable[[bool], Result]) -> Callable[[bool], Result]:
    """Mark a benchmark to run in a Python process of its own (``run.py`` starts one for it): a peer
    that imports torch, VizTracer or HTA leaves state (thread pools, tracers, a heap of their
    objects) that slows what runs after it in that process, and what ran before leaves the heap
    state it meets (a full run read the trace_view.json / HTA ratio 0.88 after the torch and
    VizTracer comparisons, 0.48 alone).  Both sides still run alternately in that one process."""
    bench.isolated = True
    return bench


def has_target(r: Result) -> bool:
    """Whether ``r`` has a target to meet (not one reported as information)."""
    return r.target != NO_TARGET


def _verdict(r: Result) -> str:
    if not has_target(r):
        return "-"
    return "skipped" if r.passed is None else ("yes" if r.passed else "NO")


def _timed(fn: Measured) -> float:
    gc.collect()
    t = time.perf_counter()
    cleanup = fn()
    elapsed = time.perf_counter() - t
    if callable(cleanup):
        cleanup()
    return elapsed


def times(fn: Measured, runs: int = RUNS, warmup: int = 1) -> list[float]:
    """Wall times of ``runs`` calls of ``fn`` after ``warmup`` untimed ones (seconds)."""
    for _ in range(warmup):
        cleanup = fn()
        if callable(cleanup):
            cleanup()
    return [_timed(fn) for _ in range(runs)]


def median_time(fn: Measured, runs: int = RUNS, warmup: int = 1) -> float:
    """Median wall time of ``fn`` in seconds."""
    return statistics.median(times(fn, runs, warmup))


@dataclass
class Comparison:
    """Both sides of a side-by-side measurement (seconds)."""

    a: list[float]
    b: list[float]

    @property
    def a_median(self) -> float:
        return statistics.median(self.a)

    @property
    def b_median(self) -> float:
        return statistics.median(self.b)

    @property
    def ratio(self) -> float:
        """Median of the per-round ratios ``a[i] / b[i]``: each round runs ``a`` then ``b`` back to back,
        so a slow spell of the machine that spans the round cancels in its ratio (the ratio of the two
        medians does not: on a drifting machine it can land anywhere between the rounds' ratios)."""
        return statistics.median(x / y for x, y in zip(self.a, self.b))

    @property
    def difference(self) -> float:
        """Median of the per-round differences ``a[i] - b[i]`` (seconds): what ``a`` costs more, with a
        slow spell spanning a round cancelled as in :attr:`ratio`."""
        return statistics.median(x - y for x, y in zip(self.a, self.b))

    @property
    def fastest_ratio(self) -> float:
        """Fastest ``a`` over fastest ``b``: the runs least disturbed by other work on the machine.
        Reported beside the ratio; where the two differ by much, the machine was noisy."""
        return min(self.a) / min(self.b)

    def detail(self, a_name: str, b_name: str, scale: float = 1.0, unit: str = "s") -> dict:
        """Medians (times ``scale``, in ``unit``), the ratios and every run, for ``Result.detail``."""
        return {f"{a_name}_median_{unit}": self.a_median * scale, f"{b_name}_median_{unit}": self.b_median * scale,
                "ratio": self.ratio, "fastest_ratio": self.fastest_ratio,
                f"{a_name}_runs_s": self.a, f"{b_name}_runs_s": self.b}


def compare(a: Measured, b: Measured, runs: int = RUNS, warmup: int = 1) -> Comparison:
    """``a`` and ``b`` run alternately (a, b, a, b, ...) after ``warmup`` rounds of both."""
    for _ in range(warmup):
        for fn in (a, b):
            cleanup = fn()
            if callable(cleanup):
                cleanup()
    ta, tb = [], []
    for _ in range(runs):
        ta.append(_timed(a))
        tb.append(_timed(b))
    return Comparison(ta, tb)


def alternate_self_timed(sides: dict[str, Callable[[], float]], runs: int = RUNS, warmup: int = 1
                         ) -> dict[str, list[float]]:
    """Each side measures its own work and returns the seconds (for work that needs untimed set-up
    around it, such as a tracer started before and stopped after the loop); the sides run
    alternately, ``warmup`` untimed rounds first."""
    for _ in range(warmup):
        for fn in sides.values():
            fn()
    out: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(runs):
        for name, fn in sides.items():
            gc.collect()
            out[name].append(fn())
    return out


def _figure(r: Result) -> str:
    """The figure to 4 significant digits, large ones with thousands separators (7,250,000, not 7.25e+06)."""
    if r.figure == r.figure and abs(r.figure) >= 10_000:
        return f"{float(f'{r.figure:.4g}'):,.0f} {r.unit}"
    return f"{r.figure:.4g} {r.unit}"


def table(results: list[Result]) -> str:
    """A plain-text table of results."""
    rows = [("benchmark", "figure", "target", "ok")]
    for r in results:
        rows.append((r.name, _figure(r), r.target, _verdict(r)))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown(results: list[Result]) -> str:
    """The same table in Markdown (for benchmarks/README.md)."""
    lines = ["| benchmark | figure | target | met |", "|---|---|---|---|"]
    for r in results:
        verdict = {"yes": "yes", "NO": "**no**", "-": "-"}.get(_verdict(r), "skipped")
        lines.append(f"| {r.name} | {_figure(r)} | {r.target} | {verdict} |")
    return "\n".join(lines)
