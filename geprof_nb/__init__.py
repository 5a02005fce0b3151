"""geprof_nb: GE (Ascend CANN Graph Engine) profiling in Jupyter, on a simulated GE runtime.

``%load_ext geprof_nb`` registers the ``%%geprof`` magic; ``with geprof_nb.profile():`` profiles a
block of plain Python the same way; ``geprof_nb.load(path)`` opens a run directory as a :class:`Profile`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from .analysis import Profile, load
from .sweep import sweep

if TYPE_CHECKING:
    from .prof.step_schedule import StepSchedule
    from .profile_block import ProfiledBlock


def compare(a: Profile, b: Profile, top: int = 10, names: tuple[str, str] | None = None,
            steps: tuple[int, int] | None = None):
    """How run ``b`` differs from run ``a``: step time, per op type and op, the ``top`` regressions
    and improvements, PMU ratios; ``steps=(i, j)``: step ``i`` of ``a`` against step ``j`` of ``b``
    (``b`` may be ``a``).  See :func:`geprof_nb.analysis.compare.compare`; in a notebook,
    ``geprof_nb.nb.compare_view(a, b)`` shows it side by side."""
    from .analysis.compare import compare as _compare

    return _compare(a, b, top=top, names=names, steps=steps)


def profile(*, schedule: StepSchedule | Mapping[str, int] | None = None, **options: Any) -> ProfiledBlock:
    """Profile a ``with`` block exactly as a ``%%geprof`` cell is profiled, for code outside the magic::

        with geprof_nb.profile(output="prof", aic_metrics="MemoryUB", task_trace="l1") as run:
            sess.run_graph(1)          # every step run in the block is collected
        run.profile                    # the loaded Profile (ClusterProfile for several ranks)
        run.run_dir, run.steps, run.error

    ``options`` are profilingOptions fields (``output``, ``training_trace``, ``task_trace``,
    ``aic_metrics``, ``hccl``, ...) over the magic's defaults (output ``geprof_output``, training and
    task trace on, PipeUtilization); a bad field or value raises ``ProfilingOptionsError`` naming it,
    before any run directory is made.  ``schedule`` (a ``StepSchedule`` or a dict of its fields:
    skip_first, wait, warmup, active, repeat) records only its steps; ``None`` records every step.
    Executor, clock and device come from GE's options, or from ``ge.simulation_settings(...)``
    around the block.  If the block raises, the run is finalised (its note says what was raised)
    and the exception propagates unchanged.  One run is collected at a time: entering while
    another collection runs (an enclosing block, a ``%%geprof`` cell, GE's own profiling options)
    raises ``geprof_nb.collect.AlreadyCollecting`` naming it.
    """
    from .profile_block import ProfiledBlock

    return ProfiledBlock(options, schedule)


__version__ = "0.1.0"
__all__ = ["Profile", "compare", "load", "load_ipython_extension", "profile", "sweep", "unload_ipython_extension"]


def load_ipython_extension(ipython) -> None:  # noqa: ANN001 - IPython's InteractiveShell
    from .nb.extension import load_ipython_extension as _load

    _load(ipython)


def unload_ipython_extension(ipython) -> None:  # noqa: ANN001
    from .nb.extension import unload_ipython_extension as _unload

    _unload(ipython)
