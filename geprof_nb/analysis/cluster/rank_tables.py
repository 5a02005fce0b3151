"""The small tables of one rank that the cross-rank analysis reads, built together from its Profile.

The Dask engine builds them in one task per rank on its workers: the rank's op rows are built once
for all of them (its step split and its collectives both read them), and only these small frames
come back.  The pandas engine reads the same tables from the Profiles in this process; both stack
them with :func:`stack`, so the two engines give equal frames.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import pandas as pd

from . import parallelism as H

if TYPE_CHECKING:
    from ..profile import Profile

#: What the cross-rank analysis reads of each rank, by name: (rank, its Profile) -> the rank's table.
RANK_TABLES: dict[str, Callable[[int, Profile], Any]] = {
    "step_breakdown": lambda rank, p: p.step_breakdown,
    "communication_time": lambda rank, p: p.communication_time,
    # the rank's pipeline passes, in the stage its facts give
    "passes": lambda rank, p: H.rank_passes(rank, p, H.rank_stage(rank, H.parallel_facts(p))),
    "groups": lambda rank, p: H.group_rows(H.parallel_facts(p)),
    "step_bounds": lambda rank, p: p.source.step_bounds(),
    "facts": lambda rank, p: H.parallel_facts(p),
}


def rank_tables(rank: int, profile: Profile) -> dict[str, Any]:
    """Every one of :data:`RANK_TABLES` of rank ``rank``: what one Dask task per rank builds."""
    return {name: table(rank, profile) for name, table in RANK_TABLES.items()}


def stack(frames: dict[int, pd.DataFrame], columns: list[str] | None = None) -> pd.DataFrame:
    """The ranks' frames (rank -> frame; only ``columns`` if given) one under another, a ``Rank`` column in
    front.  Stacked first and numbered after: a frame per rank with its own Rank column cost more than
    the stacking, at hundreds of ranks."""
    parts = list(frames.values())
    if not parts:
        return pd.DataFrame(columns=["Rank", *(columns or [])])
    if columns is not None:
        parts = [frame[columns] for frame in parts]
    out = pd.concat(parts, ignore_index=True)
    out.insert(0, "Rank", np.repeat(np.fromiter(frames, np.int64), [len(frame) for frame in parts]))
    return out
