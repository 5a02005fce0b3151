"""A finding: the one record every advisor rule returns (single run, cluster, serving), in a leaf module so
the rule modules share it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass

from ..timing.what_if import WhatIfChange

#: Where a finding's time at stake comes from (the findings table's ``Time at stake basis``).
WHAT_IF, ESTIMATE = "what-if", "estimate"


@dataclass
class Finding:
    """One finding of one rule; ``at_stake_us`` is per step.  ``change``: the what-if change that removes its
    cause (None where no what-if models it); once the advisor has re-timed the steps under it (:mod:`.savings`),
    ``basis`` is "what-if", ``at_stake_us`` its saving and ``exclusive_us`` its chained saving."""

    rule: str
    finding: str
    evidence: str
    suggestion: str
    at_stake_us: float
    change: WhatIfChange | None = None
    basis: str = ESTIMATE
    exclusive_us: float | None = None
