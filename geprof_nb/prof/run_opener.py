"""What opened the run the msprof library is collecting into, in words: the one answer every refusal
to open a second run gives (``geprof_nb.collect.AlreadyCollecting`` for a cell, ``geprof run`` or a
``geprof_nb.profile()`` block; ``aclgrphProfInit`` for the C API).

The opener is the run's *mode*, which each opener gives ``Msprof.init`` and msprof keeps for the run
(``Msprof.mode``, also info.json's ``"mode"``): one record, kept by msprof.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .msprof import Msprof

#: What opened a run, by its mode, and how that run is ended.
OPENERS = {
    "magic": ("a %%geprof cell", "let it finish first"),
    "cli": ("geprof run", "let it finish first"),
    "profile": ("a geprof_nb.profile() block", "let it finish first"),
    "api": ("aclgrphProfInit", "finish that run first (aclgrphProfFinalize())"),
    "ge_options": ("GE's profiling options (ge.exec.profilingMode or the environment)",
                   "finish that run first (ge.GEFinalize())"),
    "cluster_rank": ("a simulated cluster (%%geprof --ranks N)", "let it finish first"),
}
#: A run opened with a mode of no opener above: the openers that end their runs themselves.
UNKNOWN_OPENER = ("GE's profiling options (ge.exec.profilingMode or the environment) or aclgrphProfInit",
                  "finish that run first (ge.GEFinalize() for GE options, aclgrphProfFinalize() for the C API)")


@dataclass(frozen=True)
class OpenRun:
    """The run a library is collecting into: where, what opened it and how it is ended, in words."""

    run_dir: Path
    opened_by: str
    finish: str


def described(run_dir: Path, mode: str | None) -> OpenRun:
    """The run collecting into ``run_dir``, opened with ``mode``, in words (what ``Msprof.init`` refusing a second
    run says: :class:`~.msprof.RunAlreadyOpen`)."""
    opened_by, finish = OPENERS.get(mode, UNKNOWN_OPENER)
    return OpenRun(run_dir, opened_by, finish)


def open_run(lib: Msprof) -> OpenRun | None:
    """The run ``lib`` is collecting into (``None``: no run is open)."""
    opened = lib.opened
    return None if opened is None else described(*opened)
