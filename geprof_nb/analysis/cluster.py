"""``ClusterProfile``: the ranks of one distributed run, one :class:`~.profile.Profile` each.

Made by :func:`geprof_nb.load` from a directory of ``*_ascend_pt`` runs (rank from
``profiler_info_<rank>.json``) or of ``rank<N>`` run directories.  The per-step
table across ranks is what msprof-analyze's ``cluster_step_trace_time.csv``
compares: the slow rank shows as a larger Computing or Free.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from .profile import Profile


class ClusterProfile:
    """Several ranks of one run."""

    def __init__(self, path: Path, ranks: dict[int, Profile], notes: list[str] | None = None) -> None:
        self.path = Path(path)
        self.ranks = dict(sorted(ranks.items()))
        self.notes = list(notes or [])

    @property
    def name(self) -> str:
        return self.path.name

    def rank(self, i: int) -> Profile:
        """The Profile of rank ``i``."""
        try:
            return self.ranks[i]
        except KeyError:
            raise KeyError(f"no rank {i} in {self.name}; ranks: {list(self.ranks)}") from None

    @cached_property
    def step_breakdown(self) -> pd.DataFrame:
        """Every rank's step_breakdown, with a ``Rank`` column in front."""
        parts = []
        for r, p in self.ranks.items():
            part = p.step_breakdown.copy()
            part.insert(0, "Rank", np.full(len(part), r, np.int64))
            parts.append(part)
        return pd.concat(parts, ignore_index=True)

    def __repr__(self) -> str:
        return f"<geprof ClusterProfile {self.name}: ranks {list(self.ranks)}>"
