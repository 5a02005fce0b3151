"""The V2 (gert / RT2) executor.

A static model is sunk to the device and launched by one model execute; the
host reports one ``ModelExecute`` api record per step through
``CannProfilerV2``.  A dynamic-shape model runs node by node: RT2 reports each
node's launch (``kExecuteStart``/``kExecuteEnd``) as a node-level api record.
With GE's host profiler on, RT2's GlobalProfiler records every execution
(``kModelStart``/``kModelEnd``, dumped as ``[Model] [Execute]``).
"""

from __future__ import annotations

from ..prof.clock import clock
from ..prof.host_profiler import MODEL_ELEMENT, MODEL_EXECUTE, rt2_profiler
from ..prof.properties import BIT_GE_HOST, BIT_TASK_TIME, GlobalProfilingWrapper
from .host_launch import NODE_HOST_COSTS
from .runtime import SYNC_LATENCY_NS, LoadedModel, report_runtime_api

#: Host cost of one RunGraph through RT2 (modelled).
HOST_RUN_NS = 35_000


class ExecutorV2:
    """Runs one step of a loaded model and reports it the V2 way."""

    name = "v2"

    def execute(self, model: LoadedModel) -> None:
        clock.spend(HOST_RUN_NS)
        begin = clock.now_ns()
        if model.dynamic:
            device_end = model.run_on_device(begin, NODE_HOST_COSTS[self.name], node_api=True)
        else:
            device_end = model.run_on_device(begin)
        launched = clock.now_ns()
        end = clock.wait_until(device_end + SYNC_LATENCY_NS)
        report_runtime_api(model, begin, launched, end)
        flags = GlobalProfilingWrapper.enable_flags
        if flags & BIT_TASK_TIME:
            model.runtime.cann_profiler.report_model_execute(model.model_id, begin, end)
        if flags & BIT_GE_HOST:
            rt2_profiler.record_scope(MODEL_ELEMENT, MODEL_EXECUTE, begin, end)
