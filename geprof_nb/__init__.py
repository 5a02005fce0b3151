"""geprof_nb: GE (Ascend CANN Graph Engine) profiling in Jupyter, on a simulated GE runtime.

``%load_ext geprof_nb`` registers the ``%%geprof`` magic; ``geprof_nb.load(path)``
opens a run directory as a :class:`Profile`.
"""

from .analysis import Profile, load


def compare(a: Profile, b: Profile, top: int = 10, names: tuple[str, str] | None = None):
    """How run ``b`` differs from run ``a``: step time, per op type and op, the ``top`` regressions
    and improvements, PMU ratios (see :func:`geprof_nb.analysis.compare.compare`)."""
    from .analysis.compare import compare as _compare

    return _compare(a, b, top=top, names=names)


__version__ = "0.1.0"
__all__ = ["Profile", "compare", "load", "load_ipython_extension", "unload_ipython_extension"]


def load_ipython_extension(ipython) -> None:  # noqa: ANN001 - IPython's InteractiveShell
    from .nb.extension import load_ipython_extension as _load

    _load(ipython)


def unload_ipython_extension(ipython) -> None:  # noqa: ANN001
    from .nb.extension import unload_ipython_extension as _unload

    _unload(ipython)
