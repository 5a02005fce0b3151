"""The interactive timeline: ``Timeline(profile_or_cluster)`` in a notebook cell.

Lanes of steps, step phases, device streams, communication (its exposed part marked), host API and
scopes, mstx ranges and the memory curve, on one time axis (since the first step's start); for a
cluster every rank on one clock, grouped by server, slowest first.  The kernel sends only what the
visible window needs at its zoom (:mod:`.lod`), so a million tasks stay fluid.  Modules:
:mod:`.widget` (the anywidget and its static fallback), :mod:`.model` (requests and answers),
:mod:`.lanes` (one run's lanes), :mod:`.grouping` (a cluster's groups and order), :mod:`.lod`
(level of detail and the binary encoding), :mod:`.registry` (names, kinds, detail rows);
``timeline.js`` / ``timeline.css`` are the browser side.
"""

from .grouping import by_parallel_group, by_pipeline_stage, by_server
from .widget import Timeline

__all__ = ["Timeline", "by_parallel_group", "by_pipeline_stage", "by_server"]
