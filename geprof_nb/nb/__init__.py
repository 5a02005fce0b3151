"""The notebook side: the ``%%geprof`` magic, rich display and plots.

``geprof_nb.nb.compare_view(a, b)`` shows two runs (or two steps of one run) side by side
(:mod:`.comparison_view`); it is imported on first use, so ``from geprof_nb.nb import plots`` loads no widgets.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name in ("compare_view", "CompareView"):
        from . import comparison_view as module

        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
