"""The host's side of a node-by-node launch (a dynamic-shape graph): what each node costs the host, and
when the host does each phase of each launch.

RT2 (v2) is leaner than the V1 hybrid executor; both pay InferShape, Tiling (AI Core ops), AllocMem,
launch preparation and the kernel launch per node, every step: that is why dynamic shapes are
host-bound.  The layout (:func:`host_timeline`) is computed once per task table; a task starts on the
device once its node's launch is done.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..prof.api_types import LaunchType
from ..prof.host_profiler import ProfilingEvent, global_profiler, rt2_profiler
from ..prof.rawdata import RtTaskType
from .compiler import TaskTable


@dataclass(frozen=True)
class NodeHostCosts:
    """Modelled host work (ns) to launch one node of a dynamic-shape graph."""

    executor: str
    infer_shape: int
    tiling: int
    alloc_mem: int
    launch_prepare: int
    kernel_launch: int
    memcpy: int


NODE_HOST_COSTS = {
    "v2": NodeHostCosts("v2", infer_shape=2_500, tiling=4_000, alloc_mem=800, launch_prepare=700,
                        kernel_launch=3_000, memcpy=5_000),
    "v1": NodeHostCosts("v1", infer_shape=6_000, tiling=8_000, alloc_mem=2_000, launch_prepare=2_000,
                        kernel_launch=4_000, memcpy=6_000),
}
#: The host profiler each executor records its node-by-node work into (V1: ge::profiling's, RT2: its own).
HOST_PROFILERS = {"v1": global_profiler, "v2": rt2_profiler}
#: Tasks the host launches as kernels (the others it launches are copies).
KERNEL_TYPES = (RtTaskType.KERNEL_AICORE, RtTaskType.KERNEL_AIVEC, RtTaskType.KERNEL_MIX_AIC,
                RtTaskType.KERNEL_MIX_AIV, RtTaskType.KERNEL_AICPU, RtTaskType.HCCL)
#: The launch API of a kernel's node-level record, where it is not ``LaunchKernelWithHandle``.
LAUNCH_TYPES = {RtTaskType.KERNEL_AICPU: LaunchType.AicpuLaunchCCKernel, RtTaskType.HCCL: LaunchType.LaunchHcomKernel,
                RtTaskType.KERNEL_MIX_AIC: LaunchType.LaunchMixKernelWithHandle,
                RtTaskType.KERNEL_MIX_AIV: LaunchType.LaunchMixKernelWithHandle}
#: The host events of a kernel's launch phases, in :attr:`HostTimeline.phase_start`'s column order.
HOST_PHASES = (ProfilingEvent.kInferShape, ProfilingEvent.kTiling, ProfilingEvent.kAllocMem,
               ProfilingEvent.kKernelLaunchPrepare, ProfilingEvent.kRtKernelLaunch)


@dataclass
class HostTimeline:
    """When the host did each phase of each node launch, relative to the step's launch (ns)."""

    executor: str  # whose host work: its records go to that executor's host profiler
    tasks: np.ndarray  # kernel / copy task indices launched by the host, in order
    phase_start: np.ndarray  # [n, 5]: InferShape, Tiling, AllocMem, KernelLaunchPrepare, rtKernelLaunch
    phase_dur: np.ndarray  # [n, 5]
    earliest: np.ndarray  # per task of the table: launch finished
    total: int


def host_timeline(table: TaskTable, costs: NodeHostCosts) -> HostTimeline:
    """Lay out the host work of a node-by-node launch of ``table``."""
    rt = table.rt_type
    kernel = np.isin(rt, KERNEL_TYPES)
    copy = rt == RtTaskType.MEMCPY_ASYNC
    tiled = np.isin(rt, (RtTaskType.KERNEL_AICORE, RtTaskType.KERNEL_AIVEC, RtTaskType.KERNEL_MIX_AIC,
                         RtTaskType.KERNEL_MIX_AIV))
    launched = np.flatnonzero(kernel | copy)
    dur = np.zeros((len(launched), 5), np.int64)
    k = kernel[launched]
    dur[k, 0] = costs.infer_shape
    dur[tiled[launched], 1] = costs.tiling
    dur[k, 2] = costs.alloc_mem
    dur[k, 3] = costs.launch_prepare
    dur[k, 4] = costs.kernel_launch
    dur[~k, 4] = costs.memcpy
    flat_end = np.cumsum(dur.ravel()).reshape(dur.shape)
    phase_start = flat_end - dur
    done = np.zeros(len(rt), np.int64)
    done[launched] = flat_end[:, -1]
    earliest = np.maximum.accumulate(done)  # events and traces go when their node's launch is done
    return HostTimeline(costs.executor, launched, phase_start, dur, earliest,
                        int(flat_end[-1, -1]) if len(launched) else 0)
