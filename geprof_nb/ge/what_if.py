"""A what-if change applied while the simulator runs (issue 29): ops made faster or removed, a link type's
bandwidth changed, host launch gaps capped.

The change acts on every task's *final* duration, after its jitter draw: the seeds and the draws stay
those of the unchanged run, so a task the change does not touch keeps its exact duration, and a
re-simulation can be compared task for task with the run it changes.  The knobs mean what the analysis's
prediction takes them to mean (``docs/guide/what_if.md``):

* ``op_speedup={"pattern": factor}``: an op whose type or full name matches the ``fnmatch`` pattern
  (case-sensitive) has each compute task (AI Core, AI Vector, MIX, AI CPU) take
  ``int(duration / factor + 0.5)`` ns; several matching patterns multiply their factors.
* ``remove_ops=[pattern, ...]``: the matching ops' device tasks (compute, HCCL, copies) take 0 ns; they stay
  in their stream's order, so the dependencies they carry remain (event records and waits are kept).
* ``link_bandwidth={"HCCS": f, "RoCE": f}``: the HCCL model's bandwidth of that link type times ``f``
  (:meth:`OpChange.scaled_links`; latencies unchanged).  ``PCIe`` and ``SIO`` are accepted, as the analysis
  accepts them, but change nothing: the HCCL model moves no collective's data over them.
* ``host_gap_us``: a node-by-node (dynamic-shape) launched task starts no later than that long after its
  stream's previous task, however late the host launches it (:mod:`.schedule`).

:func:`applying` makes a change the one the next model loads (or collections) use; :func:`active` is it.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from typing import Any, Iterable, Mapping

import numpy as np

from ..prof.rawdata import RtTaskType
from .graph import Graph
from .hccl import Links
from .scoped import Scoped

#: Tasks an op speedup shortens: the op's compute on the device.
COMPUTE_TYPES = (RtTaskType.KERNEL_AICORE, RtTaskType.KERNEL_AIVEC, RtTaskType.KERNEL_MIX_AIC,
                 RtTaskType.KERNEL_MIX_AIV, RtTaskType.KERNEL_AICPU)
#: Tasks a removed op loses (its event records and waits stay: they carry dependencies).
REMOVED_TYPES = COMPUTE_TYPES + (RtTaskType.HCCL, RtTaskType.MEMCPY_ASYNC)
#: The link types ``link_bandwidth`` takes, and the :class:`~.hccl.Links` bandwidth each scales (None: unused).
LINK_FIELDS = {"HCCS": "hccs_bandwidth", "RoCE": "roce_bandwidth", "PCIe": None, "SIO": None}


@dataclass(frozen=True)
class OpChange:
    """Ops made faster (``speedup``: (pattern, factor) pairs) or removed (``removed``: patterns), link types'
    bandwidths scaled (``links``: (link type, factor) pairs), host launch gaps capped (``host_gap_ns``)."""

    speedup: tuple[tuple[str, float], ...] = ()
    removed: tuple[str, ...] = ()
    links: tuple[tuple[str, float], ...] = ()
    host_gap_ns: int | None = None

    @classmethod
    def from_keywords(cls, op_speedup: Mapping[str, Any] | None = None, remove_ops: Iterable[str] | None = None,
                      link_bandwidth: Mapping[str, Any] | None = None, host_gap_us: float | None = None,
                      device: str | None = None) -> "OpChange":
        """The change the what-if keywords describe, checked (a ValueError names the field and value);
        ``device`` (re-costing on another device) is not simulated as a change: NotImplementedError."""
        if device is not None:
            raise NotImplementedError(f"device={device!r}: run the model on that device instead (%%geprof --device, "
                                      "geprof.device); a what-if change does not re-cost kernels")
        speedup: list[tuple[str, float]] = []
        if op_speedup is not None:
            if not isinstance(op_speedup, Mapping):
                raise ValueError(f"op_speedup={op_speedup!r} is not valid; accepted: a dict of op type or name "
                                 "pattern -> speedup factor, e.g. {'MatMul*': 2.0}")
            for pattern, factor in op_speedup.items():
                _pattern(pattern, "op_speedup")
                speedup.append((pattern, _factor(factor, f"op_speedup[{pattern!r}]", "2.0 halves the op's time")))
        removed: list[str] = []
        if remove_ops is not None:
            if isinstance(remove_ops, (str, bytes)) or not isinstance(remove_ops, Iterable):
                raise ValueError(f"remove_ops={remove_ops!r} is not valid; accepted: a list of op type or name "
                                 "patterns, e.g. ['Cast*']")
            for pattern in remove_ops:
                removed.append(_pattern(pattern, "remove_ops"))
        links: list[tuple[str, float]] = []
        if link_bandwidth is not None:
            if not isinstance(link_bandwidth, Mapping):
                raise ValueError(f"link_bandwidth={link_bandwidth!r} is not valid; accepted: a dict of link type "
                                 f"({', '.join(LINK_FIELDS)}) -> bandwidth factor, e.g. {{'HCCS': 0.5}}")
            for link, factor in link_bandwidth.items():
                if link not in LINK_FIELDS:
                    raise ValueError(f"link_bandwidth: unknown link type {link!r}; accepted: {', '.join(LINK_FIELDS)}")
                links.append((link, _factor(factor, f"link_bandwidth[{link!r}]", "0.5 halves the bandwidth")))
        gap = None
        if host_gap_us is not None:
            ok = isinstance(host_gap_us, (int, float)) and not isinstance(host_gap_us, bool)
            if not ok or not math.isfinite(host_gap_us) or host_gap_us < 0:
                raise ValueError(f"host_gap_us={host_gap_us!r} is not valid; accepted: a finite number >= 0 (us)")
            gap = int(round(host_gap_us * 1000))
        return cls(tuple(speedup), tuple(removed), tuple(links), gap)

    def __bool__(self) -> bool:
        return bool(self.speedup or self.removed or self.links or self.host_gap_ns is not None)

    def scaled_links(self, links: Links) -> Links:
        """``links`` with each changed link type's bandwidth times its factor."""
        scaled = {}
        for link, factor in self.links:
            name = LINK_FIELDS[link]
            if name is not None:
                scaled[name] = scaled.get(name, getattr(links, name)) * factor
        return replace(links, **scaled) if scaled else links

    def task_scale(self, table: Any, graph: Graph) -> np.ndarray | None:
        """Per task of ``table`` (a compiler TaskTable of ``graph``), the speedup its final duration is
        divided by (inf for a removed op's task: 0 ns); None if the change touches none of them."""
        if not self:
            return None
        scale = np.ones(len(table))
        nodes = {n.id: n for n in graph.nodes}
        compute = np.isin(table.rt_type, COMPUTE_TYPES)
        removable = np.isin(table.rt_type, REMOVED_TYPES)
        for node_id in np.unique(table.node[table.node >= 0]).tolist():
            node = nodes.get(node_id)
            if node is None:
                continue
            mine = table.node == node_id
            factor = 1.0
            for pattern, f in self.speedup:
                if matches(pattern, node.type, node.name):
                    factor *= f
            if factor != 1.0:
                scale[mine & compute] = factor
            if any(matches(p, node.type, node.name) for p in self.removed):
                scale[mine & removable] = np.inf
        return None if np.all(scale == 1.0) else scale


def _factor(factor: Any, field: str, example: str) -> float:
    ok = isinstance(factor, (int, float)) and not isinstance(factor, bool)
    if not ok or not math.isfinite(factor) or factor <= 0:
        raise ValueError(f"{field}={factor!r} is not valid; accepted: a finite number > 0 ({example})")
    return float(factor)


def _pattern(pattern: Any, field: str) -> str:
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"{field} pattern {pattern!r} is not valid; accepted: a non-empty fnmatch pattern of an "
                         "op type or full op name, e.g. 'MatMul*' or '*layers.3/*'")
    return pattern


def matches(pattern: str, op_type: str, op_name: str) -> bool:
    """Whether ``pattern`` (fnmatch, case-sensitive) matches the op's type or its full name."""
    return fnmatchcase(op_type, pattern) or fnmatchcase(op_name, pattern)


def scaled(dur: np.ndarray, scale: np.ndarray | None) -> np.ndarray:
    """Durations (int64 ns, [..., T]) divided by the change's per-task speedups, rounded half up."""
    if scale is None:
        return dur
    changed = scale != 1.0
    out = dur.copy()
    out[..., changed] = (dur[..., changed] / scale[changed] + 0.5).astype(np.int64)
    return out


_active: Scoped[OpChange] = Scoped(OpChange())


def active() -> OpChange:
    """The change models loaded now run under (empty: none)."""
    return _active.value


def applying(change: OpChange) -> contextlib.AbstractContextManager[OpChange]:
    """Run the block's collections with ``change`` applied (the previous change back afterwards)."""
    return _active.set(change)
