"""A finding: the one record every advisor rule returns (single run, cluster, serving), in a leaf module so
the rule modules share it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Finding:
    """One finding of one rule; ``at_stake_us`` is per step."""

    rule: str
    finding: str
    evidence: str
    suggestion: str
    at_stake_us: float
