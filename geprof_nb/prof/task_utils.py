"""``ProfilingTaskUtils``: find the training-trace points of a graph and say which
PROFILER_TRACE tasks (LogIDs) go before and after which node.

Follows GE's ``task_generator.cc`` / ``profiling_task_utils.cc``:

* FP point: ``fp_point`` if set, else the lowest-id consumer of the first
  ``Data`` / ``GetNext`` / ``IteratorV2`` node.  The FP-start trace goes *before* it.
* BP point: ``bp_point`` if set, else the last ``HcomAllReduce`` (else the
  ``NetOutput``), from which GE takes the *input producer with the highest id*
  (``FindLastBpFromBpNode``), i.e. the op that computes the last gradient.  The
  BP-end trace goes *after* it.  A graph that does not train has no backward
  pass: its note says the trace marks the forward pass's end.
* Iteration end: after ``NetOutput``.  Every AllReduce k gets LogIDs
  ``10000 + 2k`` before and ``10001 + 2k`` after; every GetNext k ``20000 + 2k`` /
  ``20001 + 2k``.

A named point that matches no op warns and falls back to auto-detection.
Works on any graph object with ``nodes`` (each with ``id``, ``name``, ``type``,
``inputs[i].node``) and ``consumers(node)``; it does not import the runtime.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Sequence

from . import events

DATA_TYPES = ("Data", "GetNext", "IteratorV2")
ALL_REDUCE_TYPES = ("HcomAllReduce", "HvdCallbackAllReduce")
GET_NEXT_TYPES = ("GetNext", "IteratorV2")


@dataclass
class ProfilingPoint:
    """Where the trace tasks go: node ids of the points, and notes for the user."""

    fp: int | None = None
    bp: int | None = None
    end: list[int] = field(default_factory=list)
    all_reduce: list[int] = field(default_factory=list)
    get_next: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def logids_before(self, node_id: int) -> list[int]:
        ids = []
        if node_id == self.fp:
            ids.append(events.FP_START_LOGID)
        if node_id in self.all_reduce:
            ids.append(events.all_reduce_logids(self.all_reduce.index(node_id))[0])
        if node_id in self.get_next:
            ids.append(events.GETNEXT_START_LOGID + 2 * self.get_next.index(node_id))
        return ids

    def logids_after(self, node_id: int) -> list[int]:
        ids = []
        if node_id == self.bp:
            ids.append(events.BP_END_LOGID)
        if node_id in self.all_reduce:
            ids.append(events.all_reduce_logids(self.all_reduce.index(node_id))[1])
        if node_id in self.get_next:
            ids.append(events.GETNEXT_END_LOGID + 2 * self.get_next.index(node_id))
        if node_id in self.end:
            ids.append(events.ITER_END_LOGID)
        return ids

    @property
    def key(self) -> tuple:
        return (self.fp, self.bp, tuple(self.end), tuple(self.all_reduce), tuple(self.get_next))


class ProfilingTaskUtils:
    """Static helpers to locate profiling points in a graph."""

    @staticmethod
    def find_node(graph: Any, name: str) -> Any | None:
        for node in graph.nodes:
            if node.name == name:
                return node
        return None

    @staticmethod
    def _named_point(graph: Any, option: str, name: str) -> tuple[Any | None, str]:
        """The node the ``fp_point``/``bp_point`` option names, or a note that it names none."""
        if not name:
            return None, ""
        node = ProfilingTaskUtils.find_node(graph, name)
        if node is not None:
            return node, f"{option[:2].upper()} point {node.name!r} ({option} option)"
        return None, f"{option} {name!r} names no op of graph {graph.name!r}; using auto-detection. "

    @staticmethod
    def find_fp_point(graph: Any, fp_point: str = "") -> tuple[Any | None, str]:
        """The FP-point node and a note (why it was chosen, or why there is none)."""
        node, note = ProfilingTaskUtils._named_point(graph, "fp_point", fp_point)
        if node is not None:
            return node, note
        for node in graph.nodes:
            if node.type in DATA_TYPES:
                consumers = [c for c, _ in graph.consumers(node)]
                if not consumers:
                    return None, note + f"{node.type} {node.name!r} has no consumer: no FP point"
                fp = min(consumers, key=lambda c: c.id)
                return fp, note + f"FP point {fp.name!r}: first consumer of {node.type} {node.name!r}"
        return None, note + "the graph has no Data/GetNext/IteratorV2 node: no FP point, FP Start is N/A"

    @staticmethod
    def find_all_reduce_nodes(graph: Any) -> list[Any]:
        return [n for n in graph.nodes if n.type in ALL_REDUCE_TYPES]

    @staticmethod
    def find_get_next_nodes(graph: Any) -> list[Any]:
        return [n for n in graph.nodes if n.type in GET_NEXT_TYPES]

    @staticmethod
    def find_iteration_end_points(graph: Any) -> list[Any]:
        return [n for n in graph.nodes if n.type == "NetOutput"]

    @staticmethod
    def find_bp_point(graph: Any, bp_point: str = "") -> tuple[Any | None, str]:
        """The BP-point node and a note."""
        node, note = ProfilingTaskUtils._named_point(graph, "bp_point", bp_point)
        if node is not None:
            return node, note
        all_reduce = ProfilingTaskUtils.find_all_reduce_nodes(graph)
        ends = ProfilingTaskUtils.find_iteration_end_points(graph)
        anchor = all_reduce[-1] if all_reduce else (ends[0] if ends else None)
        if anchor is None:
            return None, note + "the graph has no AllReduce and no NetOutput: no BP point, BP End is N/A"
        producers = [t.node for t in anchor.inputs]
        if not producers:
            return None, note + f"{anchor.type} {anchor.name!r} has no input: no BP point"
        bp = max(producers, key=lambda p: p.id)
        if not all_reduce and not getattr(graph, "is_training", False):  # inference: there is no backward pass
            return bp, note + (f"forward only (no backward pass): the BP End trace goes after {bp.name!r}, the last "
                               f"input producer of the NetOutput {anchor.name!r}, so FP to BP Time is the forward "
                               "pass and Iteration Refresh what follows it")
        why = "last AllReduce" if all_reduce else "NetOutput (no AllReduce in the graph)"
        note += f"BP point {bp.name!r}: last input producer of the {why} {anchor.name!r}"
        if not all_reduce and getattr(graph, "is_training", False):
            note += ("; with no AllReduce this is the loss, so FP to BP covers the forward pass only: "
                     "set bp_point to your last gradient op to include the backward pass")
        return bp, note

    @staticmethod
    def profiling_points(graph: Any, fp_point: str = "", bp_point: str = "") -> ProfilingPoint:
        """All trace points of ``graph`` (GE ``FindProfilingTaskIndex``)."""
        points = ProfilingPoint()
        fp, fp_note = ProfilingTaskUtils.find_fp_point(graph, fp_point)
        bp, bp_note = ProfilingTaskUtils.find_bp_point(graph, bp_point)
        for requested, note in ((fp_point, fp_note), (bp_point, bp_note)):
            if requested and "names no op" in note:
                warnings.warn(note.split(". ")[0], stacklevel=3)
        points.fp = fp.id if fp is not None else None
        points.bp = bp.id if bp is not None else None
        points.end = [n.id for n in ProfilingTaskUtils.find_iteration_end_points(graph)]
        points.all_reduce = [n.id for n in ProfilingTaskUtils.find_all_reduce_nodes(graph)]
        points.get_next = [n.id for n in ProfilingTaskUtils.find_get_next_nodes(graph)]
        points.notes = [fp_note, bp_note]
        return points

    @staticmethod
    def trace_order_notes(graph: Any, points: ProfilingPoint, logids: Sequence[int]) -> list[str]:
        """A note when the BP-end trace task comes before the FP-start one in the launch-ordered
        tasks (``logids``: each task's LogID, -1 off PROFILER_TRACE), so FP to BP Time is negative."""
        order = list(logids)
        if points.fp is None or points.bp is None or events.FP_START_LOGID not in order \
                or events.BP_END_LOGID not in order:
            return []
        fp_at, bp_at = order.index(events.FP_START_LOGID), order.index(events.BP_END_LOGID)
        if bp_at > fp_at:
            return []
        names = {n.id: n.name for n in graph.nodes if n.id in (points.fp, points.bp)}
        return [f"BP point {names[points.bp]!r} runs before FP point {names[points.fp]!r} in the task order: "
                "FP to BP Time is negative; set bp_point to an op after the FP point (the last gradient op) "
                "or fp_point to an earlier op"]
