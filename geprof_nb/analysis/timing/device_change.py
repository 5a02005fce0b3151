"""Kernel task durations on another device, for ``Profile.what_if(device=...)``: each kernel re-costed by the
device cost model (:mod:`geprof_nb.cost_model`, the one the simulator times kernels with) from the cost terms the
run recorded for it (``op_cost``: FLOPs, vector ops, bytes in and out, the bytes read from stored tensors, data
type, engine, tiles).

A kernel task's recorded time is a fixed launch head and tail (the device's ``task_overhead_ns``) plus the time
its blocks ran, which varied run to run; on the new device it takes the new head and tail plus its recorded block
time times new / recorded nominal block time, so the step-to-step jitter of the run is kept.  AI CPU kernels,
collectives and copies keep their recorded times: a change that would re-time them (``aicpu_base_ns`` with AI CPU
tasks in the run; an interconnect field with collectives, ``pcie_bandwidth`` with host-to-device copies) is
refused, naming what to use instead.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ...cost_model import DevicePreset, KernelCostModel, OpCost, get_device
from ...prof import rawdata
from .dependency_graph import Tasks

#: Task types whose time the cost model re-costs from an op_cost record (task_time or op_summary spelling).
COSTED_TYPES = frozenset({"KERNEL_AICORE", "KERNEL_AIVEC", "KERNEL_MIX_AIC", "KERNEL_MIX_AIV",
                          "AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV"})
AICPU_TYPES = frozenset({"KERNEL_AICPU", "AI_CPU"})
#: Device fields a collective's time depends on (ge/device.py device_links), and a host-to-device copy's.
COLLECTIVE_FIELDS = ("hccs_bandwidth", "roce_bandwidth", "hccl_step_latency_ns")
COPY_FIELDS = ("pcie_bandwidth",)
_DTYPE_NAMES = {int(code): name for name, (code, _) in rawdata.DTYPES.items()}


def device_durations(spec: str, recorded: Mapping, tasks: Tasks,
                     cost_terms: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
    """Every task's duration (ns) with its kernels re-costed on the device ``spec`` (a preset, or a preset with
    changed fields: :func:`geprof_nb.cost_model.get_device`).  ``recorded``: the run's device (``Profile.device``);
    ``cost_terms``: the run's op_cost records per op_summary row (``Source.cost_terms``)."""
    new = get_device(spec)
    if cost_terms is None or tasks.op_row is None:
        raise ValueError(f"what_if(device={spec!r}): this run records no cost terms of its kernels (op_cost records: "
                         "FLOPs, bytes, data type, engine, tiles), so they cannot be re-costed on another device; "
                         "accepted: a run simulated by geprof (imported msprof / torch_npu data has none)")
    old = DevicePreset.from_info(dict(recorded))
    _refuse_uncosted(spec, old, new, tasks)
    out = (tasks.end - tasks.start).astype(np.int64)
    costed = np.flatnonzero(np.isin(tasks.task_type, list(COSTED_TYPES)) & (tasks.kind == "compute"))
    if not len(costed):
        return out
    found, records = cost_terms
    where = np.full(len(found), -1, np.int64)
    where[found] = np.arange(int(found.sum()))
    row = tasks.op_row[costed]
    rec = np.where(row >= 0, where[np.maximum(row, 0)], -1)
    if (rec < 0).any():
        lost = costed[rec < 0]
        raise ValueError(f"what_if(device={spec!r}): {len(lost)} kernel task(s) have no cost terms in the run, e.g. "
                         f"{tasks.name[lost[0]]!r} ({tasks.task_type[lost[0]]}); accepted: a run whose every AI Core "
                         "and AI Vector Core task has an op_cost record")
    terms = records[rec]
    bad = (terms["engine"] >= len(rawdata.COST_ENGINES)) | ~np.isin(terms["data_type"], list(_DTYPE_NAMES))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"what_if(device={spec!r}): the op_cost record of {tasks.name[costed[i]]!r} is damaged "
                         f"(engine {int(terms['engine'][i])}, data_type {int(terms['data_type'][i])}); accepted: "
                         f"engine 0..{len(rawdata.COST_ENGINES) - 1}, a data type of {', '.join(rawdata.DTYPES)}")
    frame = pd.DataFrame({"op_type": tasks.op_type[costed].astype(str), **{
        k: terms[k] for k in ("engine", "cube_flops", "vector_ops", "gm_read_bytes", "gm_write_bytes",
                              "stored_read_bytes", "tiles", "data_type")}})
    kinds, distinct = pd.factorize(pd.MultiIndex.from_frame(frame))
    scale = np.empty((len(distinct), 3))  # per distinct op: recorded head/tail, new head/tail, block time ratio
    models = KernelCostModel(old), KernelCostModel(new)
    for k, (op_type, engine, flops, vector_ops, read, write, stored, tiles, dtype) in enumerate(distinct):
        cost = OpCost(flops=int(flops), vector_ops=int(vector_ops), bytes_in=int(read), bytes_out=int(write),
                      tiles=int(tiles), stored_bytes_in=int(stored))
        was, now = (m.kernel(op_type, rawdata.COST_ENGINES[engine], cost, _DTYPE_NAMES[int(dtype)], {})
                    for m in models)
        head_was = old.task_overhead_ns if was.block_cycles else 0
        head_now = new.task_overhead_ns if now.block_cycles else 0
        scale[k] = head_was, head_now, (now.duration_ns - head_now) / (was.duration_ns - head_was)
    head_was, head_now, ratio = scale[kinds].T
    out[costed] = (head_now + (out[costed] - head_was) * ratio + 0.5).astype(np.int64)
    return out


def _refuse_uncosted(spec: str, old: DevicePreset, new: DevicePreset, tasks: Tasks) -> None:
    """ValueError if ``new`` changes a field a task the cost model does not re-cost here depends on."""
    changed = {f for f in (*COLLECTIVE_FIELDS, *COPY_FIELDS, "aicpu_base_ns") if getattr(old, f) != getattr(new, f)}
    kinds = (
        (COLLECTIVE_FIELDS, (tasks.kind == "communication") & ~np.isin(tasks.task_type, ["MEMCPY_ASYNC"]),
         "collectives", "scale their links with link_bandwidth={'HCCS': factor, ...} instead"),
        (COPY_FIELDS, np.isin(tasks.task_type, ["MEMCPY_ASYNC"]), "host-to-device copies",
         "leave pcie_bandwidth unchanged (the copies keep their recorded times)"),
        (("aicpu_base_ns",), np.isin(tasks.task_type, list(AICPU_TYPES)), "AI CPU tasks",
         "speed them up with op_speedup={'<AI CPU op type>': factor} instead"),
    )
    for names, present, what, instead in kinds:
        hit = sorted(changed & set(names))
        if hit and present.any():
            raise ValueError(f"what_if(device={spec!r}): {', '.join(hit)} would re-time the run's {what}, which "
                             f"are not re-costed on another device; {instead}")
