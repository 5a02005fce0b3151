"""The simulator's device: the cost model of :mod:`geprof_nb.cost_model` (presets, specs, kernel timing) plus
what needs the simulator's interconnect (the collectives' ring times, :mod:`.hccl`) and its profiling options
(which aic_metrics groups a chip's PMU has)."""

from __future__ import annotations

from ..cost_model import (
    COUNTERS,
    DEFAULT_DEVICE,
    DEVICE_ACCEPTED,
    L2_SPEEDUP,
    PRESETS,
    DevicePreset,
    KernelCostModel,
    KernelTiming,
    get_device,
)
from ..prof import events
from ..prof.options import ProfilingOptionsError
from ..prof.rawdata import GeTaskType, RtTaskType
from . import hccl, what_if
from .ops import OpCost

__all__ = ["COUNTERS", "DEFAULT_DEVICE", "DEVICE_ACCEPTED", "L2_SPEEDUP", "PRESETS", "CostModel", "DevicePreset",
           "KernelTiming", "check_aic_metrics", "device_links", "get_device"]


def device_links(device: DevicePreset) -> hccl.Links:
    """The interconnect of ``device`` as the collective cost model sees it (under the active what-if change's
    ``link_bandwidth``, :mod:`.what_if`)."""
    links = hccl.Links(hccs_bandwidth=device.hccs_bandwidth, hccs_latency_ns=device.hccl_step_latency_ns,
                       roce_bandwidth=device.roce_bandwidth, local_bandwidth=device.hbm_bandwidth)
    return what_if.active().scaled_links(links)


def check_aic_metrics(device: DevicePreset, aic_metrics: str) -> None:
    """``ProfilingOptionsError`` if ``device``'s AI Core counters have no ``aic_metrics`` group
    (:func:`~geprof_nb.prof.events.lacks_counter_group` decides)."""
    if events.lacks_counter_group(aic_metrics, device.chip_family):
        raise ProfilingOptionsError("aic_metrics", f"{aic_metrics!r} is not available on {device.name}",
                                    ", ".join(events.aic_metrics_on(device.chip_family)))


class CostModel(KernelCostModel):
    """Times every device task of an op on one device: kernels, collectives, host-to-device copies."""

    def collective(self, op_type: str, cost: OpCost, rank_size: int) -> KernelTiming:
        """A collective on the HCCL stream: its ring duration over this device's links (see :mod:`.hccl`)."""
        peer = 1 if op_type in hccl.P2P_OPS and rank_size > 1 else 0  # a send's or receive's other end
        dur = hccl.collective_duration_ns(op_type, cost.comm_bytes, rank_size, device_links(self.device),
                                          root_rank=peer)
        return KernelTiming(GeTaskType.HCCL, RtTaskType.HCCL, 0, dur)

    def memcpy_h2d_ns(self, nbytes: int) -> int:
        return 2_000 + int(nbytes / self.device.pcie_bandwidth * 1e9)

    def kernel(self, op_type: str, engine: str, cost: OpCost, dtype: str, attrs: dict) -> KernelTiming:
        """Time one execution of an op on this device."""
        if engine == "HCCL":
            return self.collective(op_type, cost, int(attrs.get("rank_size", 1)))
        return super().kernel(op_type, engine, cost, dtype, attrs)
