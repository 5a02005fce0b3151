"""The V2 (gert / RT2) executor of a static model: the whole task list is sunk to
the device and launched by one model execute; the host reports one
``ModelExecute`` api record per step through ``CannProfilerV2``.
"""

from __future__ import annotations

from ..prof.clock import clock
from ..prof.properties import BIT_TASK_TIME, GlobalProfilingWrapper
from .runtime import SYNC_LATENCY_NS, LoadedModel

#: Host cost of one RunGraph through RT2 (virtual clock).
HOST_RUN_NS = 35_000


class ExecutorV2:
    """Runs one step of a loaded model and reports it the V2 way."""

    name = "v2"

    def execute(self, model: LoadedModel) -> None:
        clock.spend(HOST_RUN_NS)
        begin = clock.now_ns()
        device_end = model.run_on_device(begin)
        end = clock.wait_until(device_end + SYNC_LATENCY_NS)
        if GlobalProfilingWrapper.enable_flags & BIT_TASK_TIME:
            model.runtime.cann_profiler.report_model_execute(model.model_id, begin, end)
