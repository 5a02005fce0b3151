"""Matplotlib figures for notebook output, built with the object-oriented API only.

Figures are created with :class:`matplotlib.figure.Figure` directly, so drawing never touches
pyplot's global state or backend: the same code works in a kernel, under nbconvert and in tests.

The figures, each from a Profile table (x in ms, sizes in MiB, every axis labelled):

* :func:`step_timeline` (``step_trace``): FP→BP, Iteration Refresh, AllReduce, GetNext and Data Aug
  Bound per iteration.
* :func:`step_split_bars` (``step_breakdown``): a stacked bar per step, Computing / exposed
  Communication / Free, with the step figure.
* :func:`task_gantt` (``op_summary``): one row per stream, tasks coloured by Task Type.
* :func:`op_type_bars` (``op_statistic``): total time per OP Type, with its share.
* :func:`module_bars` (``Profile.module_statistic``): device time per module, its phases stacked.
* :func:`pipe_ratios` (``op_summary``): mean AI Core ``*_ratio`` columns of the longest ops, stacked.
* :func:`memory_lifetimes` (``tensor_lifetimes``, ``memory_record``, ``memory_peak``): tensors as
  address × time rectangles over the allocated-memory curve, of the last iteration by default.
* :func:`host_scopes` (``host_events``, ``Source.api_calls()``): host scopes on their own timeline.
* :func:`roofline` (``Profile.roofline``): ops as intensity x achieved TFLOP/s, log-log, sized by time, under
  the cube and vector roofs and the HBM slope.
* :func:`pipeline_chart` (``ClusterProfile.pipeline``): a lane per pipeline stage, its passes as bars, the
  bubbles as gaps; :func:`expert_heatmap` (``ClusterProfile.expert_load``): tokens per layer and expert.
* :func:`latency_throughput` (a :func:`geprof_nb.sweep` of ``Profile.serving_summary``): throughput against
  latency, one line per configuration; :func:`serving_steps_chart` (``Profile.serving_steps``): a serving run's
  batch, KV-cache blocks in use and step time per engine step.
* :func:`what_if_bars` (``Profile.critical_path_summary``, ``WhatIf.predicted``): each step's critical path now
  and under a what-if change, stacked by kind.

Timelines with many spans (Gantt, host scopes) draw one compound path per colour and merge
spans narrower than a pixel column, the kinds of a column stacked by their time (:mod:`.spans`),
so a million tasks render in under a second; the step timeline merges its sub-pixel bars per column
too, shaded by the time they fill. Colours are per name (:func:`color_of`): a Task Type has the same
colour in every plot.  :func:`figure_png` renders any of them to PNG.

One module per figure (:mod:`.steps`, :mod:`.step_split`, :mod:`.gantt`, :mod:`.op_types`, :mod:`.ratios`,
:mod:`.memory` with the view of :mod:`.memory_view`, :mod:`.host`, :mod:`.modules`, :mod:`.roofline`,
:mod:`.parallelism`, :mod:`.what_if`) on what
they share (:mod:`.figure`, :mod:`.colors`, :mod:`.spans`); ``from geprof_nb.nb import plots;
plots.<function>`` is the API.
"""

from .colors import HOST_COLORS, TASK_TYPE_COLORS, color_of
from .figure import EMPTY_OPS_MESSAGE, MiB, figure_png, format_size
from .gantt import STACKED_TASKS_NOTE, task_gantt
from .host import NO_HOST_EVENTS_MESSAGE, STACKED_SCOPES_NOTE, host_scopes
from .memory import NO_MEMORY_MESSAGE, memory_lifetimes
from .memory_view import ALL_ITERATIONS
from .modules import EMPTY_MODULES_MESSAGE, module_bars
from .op_types import EMPTY_OP_STATISTIC_MESSAGE, op_type_bars
from .parallelism import NO_EXPERTS_MESSAGE, NO_PIPELINE_MESSAGE, expert_heatmap, pipeline_chart
from .ratios import NO_RATIOS_MESSAGE, PIPE_COLORS, pipe_ratios
from .roofline import NO_BYTES_MESSAGE, NO_ROOFLINE_MESSAGE, roofline
from .serving import EMPTY_SWEEP_MESSAGE, NO_SERVING_STEPS_MESSAGE, latency_throughput, serving_steps_chart
from .step_split import EMPTY_BREAKDOWN_MESSAGE, step_split_bars
from .steps import EMPTY_STEP_TRACE_MESSAGE, step_timeline
from .what_if import EMPTY_WHAT_IF_MESSAGE, what_if_bars

__all__ = ["ALL_ITERATIONS", "EMPTY_BREAKDOWN_MESSAGE", "EMPTY_MODULES_MESSAGE", "EMPTY_OPS_MESSAGE",
           "EMPTY_OP_STATISTIC_MESSAGE", "EMPTY_STEP_TRACE_MESSAGE", "EMPTY_SWEEP_MESSAGE", "EMPTY_WHAT_IF_MESSAGE",
           "HOST_COLORS", "MiB",
           "NO_BYTES_MESSAGE", "NO_EXPERTS_MESSAGE", "NO_HOST_EVENTS_MESSAGE", "NO_MEMORY_MESSAGE",
           "NO_PIPELINE_MESSAGE", "NO_RATIOS_MESSAGE", "NO_ROOFLINE_MESSAGE", "NO_SERVING_STEPS_MESSAGE",
           "PIPE_COLORS", "STACKED_SCOPES_NOTE", "STACKED_TASKS_NOTE", "TASK_TYPE_COLORS", "color_of",
           "expert_heatmap", "figure_png", "format_size", "host_scopes", "latency_throughput", "memory_lifetimes",
           "module_bars", "op_type_bars", "pipe_ratios", "pipeline_chart", "roofline", "serving_steps_chart",
           "step_split_bars", "step_timeline", "task_gantt", "what_if_bars"]
