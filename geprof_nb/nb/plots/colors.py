"""The colours of the plots: per Task Type, Core Type, host scope and API name, the same in every figure."""

from __future__ import annotations

import zlib

#: The colour of every Task Type / Core Type (op_summary, op_statistic, task_time names), the
#: same in every plot.  Names not listed get a colour of :data:`EXTRA_COLORS` from a hash of
#: the name, so they are stable too.
TASK_TYPE_COLORS = {
    "AI_CORE": "#4c72b0",
    "AI_VECTOR_CORE": "#55a868",
    "MIX_AIC": "#8172b3",
    "MIX_AIV": "#64b5cd",
    "AI_CPU": "#937860",
    "COMMUNICATION": "#c44e52",
    "MEMCPY_ASYNC": "#dd8452",
    "EVENT_RECORD": "#8c8c8c",
    "EVENT_WAIT": "#bcbcbc",
    "WRITE_BACK": "#da8bc3",
    "FFTS_PLUS": "#ccb974",
    "DSA": "#76b7b2",
    "DVPP": "#b07aa1",
    "FUSION": "#9c755f",
}
_ALIASES = {  # other spellings of the same kinds (task_time kernel types, real msprof output)
    "KERNEL_AICORE": "AI_CORE", "AIC": "AI_CORE", "AICORE": "AI_CORE",
    "KERNEL_AIVEC": "AI_VECTOR_CORE", "AIV": "AI_VECTOR_CORE", "AI_VEC": "AI_VECTOR_CORE",
    "KERNEL_MIX_AIC": "MIX_AIC", "KERNEL_MIX_AIV": "MIX_AIV", "KERNEL_AICPU": "AI_CPU", "AICPU": "AI_CPU",
    "HCCL": "COMMUNICATION", "HCCL_AI_CPU": "COMMUNICATION", "COMMUNICATION_TASK": "COMMUNICATION",
    "MEMCPY": "MEMCPY_ASYNC", "MEMCPY_ASYNC_V2": "MEMCPY_ASYNC",
}
#: Host scopes and API names with a fixed colour (the rest hash into :data:`EXTRA_COLORS`).
HOST_COLORS = {
    "InferShape": "#4c72b0",
    "Tiling": "#55a868",
    "AllocMemory": "#8172b3",
    "KernelLaunchPrepare": "#ccb974",
    "rtKernelLaunch": "#dd8452",
    "LaunchKernelWithHandle": "#dd8452",
    "LaunchHcomKernel": "#c44e52",
    "CopyH2D": "#937860",
    "RunGraph": "#8c8c8c",
    "ModelExecute": "#bcbcbc",
}
EXTRA_COLORS = ["#e377c2", "#17becf", "#bcbd22", "#9467bd", "#ff9896", "#98df8a", "#aec7e8", "#ffbb78",
                 "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5", "#7f7f7f", "#2ca02c", "#1f77b4"]


def color_of(name: str) -> str:
    """The colour of a Task Type, Core Type, host scope or API name, the same in every plot."""
    name = str(name)
    key = _ALIASES.get(name.upper(), name.upper())
    if key in TASK_TYPE_COLORS:
        return TASK_TYPE_COLORS[key]
    if name in HOST_COLORS:
        return HOST_COLORS[name]
    return EXTRA_COLORS[zlib.crc32(name.encode()) % len(EXTRA_COLORS)]


def lighter(color: str, amount: float = 0.45) -> tuple[float, float, float]:
    from matplotlib.colors import to_rgb

    r, g, b = to_rgb(color)
    return (r + (1 - r) * amount, g + (1 - g) * amount, b + (1 - b) * amount)
