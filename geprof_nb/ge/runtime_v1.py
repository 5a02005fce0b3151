"""The V1 (hybrid model) executor: the host brackets each model execution with
``ProfilerCollector`` RecordStart / RecordEnd events carrying the step id.  A
dynamic-shape model runs node by node with V1's heavier host work per node
(recorded in GE's host profiler when it is on).
"""

from __future__ import annotations

from ..prof.clock import clock
from ..prof.collectors import ProfilerCollector
from ..prof.properties import BIT_TASK_TIME, GlobalProfilingWrapper
from .host_launch import NODE_HOST_COSTS
from .runtime import SYNC_LATENCY_NS, LoadedModel, report_runtime_api

#: Host cost of one RunGraph through the V1 hybrid executor (modelled).
HOST_RUN_NS = 55_000


class ExecutorV1:
    """Runs one step of a loaded model and reports it the V1 way."""

    name = "v1"

    def __init__(self) -> None:
        self.collector = ProfilerCollector()

    def execute(self, model: LoadedModel) -> None:
        clock.spend(HOST_RUN_NS)
        begin = clock.now_ns()
        step_id = model.iterations + 1
        reporting = GlobalProfilingWrapper.enable_flags & BIT_TASK_TIME
        if reporting:
            self.collector.record_start(model.model_id, step_id, begin)
        if model.dynamic:
            device_end = model.run_on_device(begin, NODE_HOST_COSTS[self.name])
        else:
            device_end = model.run_on_device(begin)
        launched = clock.now_ns()
        end = clock.wait_until(device_end + SYNC_LATENCY_NS)
        report_runtime_api(model, begin, launched, end)
        if reporting:
            self.collector.record_end(model.model_id, step_id, end)
