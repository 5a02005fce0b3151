"""The V1 (hybrid model) executor: the host brackets each model execution with
``ProfilerCollector`` RecordStart / RecordEnd events carrying the step id.
"""

from __future__ import annotations

from ..prof.clock import clock
from ..prof.collectors import ProfilerCollector
from ..prof.properties import BIT_TASK_TIME, GlobalProfilingWrapper
from .runtime import SYNC_LATENCY_NS, LoadedModel

#: Host cost of one RunGraph through the V1 hybrid executor (virtual clock).
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
        device_end = model.run_on_device(begin)
        end = clock.wait_until(device_end + SYNC_LATENCY_NS)
        if reporting:
            self.collector.record_end(model.model_id, step_id, end)
