"""``format="ascend_pt"``: a torch_npu profiler directory, the input of the real
msprof-analyze (advisor, compare, cluster; msprof_analyze_inputs.md §3).

``<path>/<worker>_<pid>_<17 digits>_ascend_pt/`` holds ``profiler_info_<rank>.json``
(the only place msprof-analyze reads the rank from), ``profiler_metadata.json``,
the device's ``PROF_*/device_<id>/info.json.<id>`` and ``ASCEND_PROFILER_OUTPUT/`` with ``kernel_details.csv``,
``step_trace_time.csv``, ``trace_view.json``, ``op_statistic.csv``,
``api_statistic.csv``, ``communication.json``, ``communication_matrix.json``
and, for task_memory runs, ``operator_memory.csv`` / ``memory_record.csv``.
A directory holding several ranks' directories is a cluster.

``task_trace`` l0 data is written as torch_npu's ``Level0`` (its
``profiler_info`` says ``Level0`` with ``ACL_AICORE_NONE``; ``kernel_details.csv``
has the Level0 header, reference §5; there is no ``op_statistic.csv``, as
msprof writes no op_statistic at l0); l1 as ``Level1``.

Choices where the references and the tool differ:

* At Level1 ``kernel_details.csv`` names the block dims ``Block Dim`` / ``Mix Block Dim``
  (torch_npu's older header, and what msprof-analyze's block dim check reads),
  not ``Block Num`` (current op_summary, kept by newer torch_npu).  The Level0
  header keeps ``Block Num``, as the reference gives it.
* In ``kernel_details.csv`` the other core's PMU cells of a pure AI Core task
  (``aiv_*``) and of a pure AI Vector Core task (``aicore_time(us)``, ``aic_*``,
  ``cube_utilization(%)``) are ``0``: the core ran no cycles of it, and msprof's
  own op_summary test shows such a MatMul row with ``0.0``/``0`` there.
  msprof-analyze needs a number: compare drops a kernel whose ``aiv_vec_time(us)``
  is N/A (``KernelDetailsBean.is_invalid``: no Cube count) and the advisor warns
  for every N/A it reads.  op_summary (the msprof export) keeps ``N/A``.
* ``trace_view.json`` is a top-level list; its framework layer (process
  ``Python``) has one ``ProfilerStep#<n>`` cpu_op per step (the step's
  ModelExecute call, else its device window) and the host calls that launched
  work as cpu_ops: each node launch (dynamic graphs) and each ModelExecute
  (static graphs).  Every op task gets one ``torch_to_npu`` flow (cat
  ``async_npu``) from the call that launched it, whose ``f`` end carries the
  kernel's exact pid, tid and ts, as msprof-analyze joins on them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..tables.breakdown import step_windows
from ..tables.columns import PURE_CORE_TASK_TYPES, is_other_core_column
from ..tables.communication import DEFAULT_GROUP
from .cells import column_cells, table_cells, write_csv
from .hccl import RankMap, communication_json, communication_matrix_json
from .naming import ascend_pt_dir_name, prof_dir_name
from .timeline import Timeline, process_meta, slice_event, thread_meta
from .tracejson import EventBlock, const, ints, strs, ts_ns, write_events, write_json

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
#: op_summary -> kernel_details header renames (reference §5; block dims: see the module docstring).
KERNEL_RENAMES = {"Op Name": "Name", "OP Type": "Type", "Task Type": "Accelerator Core",
                  "Task Start Time(us)": "Start Time(us)", "Task Duration(us)": "Duration(us)",
                  "Task Wait Time(us)": "Wait Time(us)", "Block Num": "Block Dim", "Mix Block Num": "Mix Block Dim"}
#: The op_summary columns of a Level0 kernel_details.csv, then those of :data:`LEVEL0_TENSOR_COLUMNS` present.
LEVEL0_COLUMNS = ["Device_id", "Op Name", "OP Type", "Task Type", "Task Start Time(us)", "Task Duration(us)",
                  "Task Wait Time(us)", "Block Num"]
LEVEL0_TENSOR_COLUMNS = ["Input Shapes", "Input Data Types", "Input Formats", "Output Shapes", "Output Data Types",
                         "Output Formats"]
SHAPE_COLUMNS = ("Input Shapes", "Output Shapes")
#: msprof statistics columns torch_npu's op_statistic.csv / api_statistic.csv do not have (reference §4.2 and
#: msprof_analyze_inputs); a real msprof run may have either (the legacy op_statistic has Model Name instead).
_NOT_IN_TORCH_NPU_STATISTICS = ["Device_id", "Model Name"]
#: aic_metrics -> torch_npu's ``AiCMetrics`` value (the ACL enum name).
ACL_AIC_METRICS = {"PipeUtilization": "ACL_AICORE_PIPE_UTILIZATION",
                   "ArithmeticUtilization": "ACL_AICORE_ARITHMETIC_UTILIZATION",
                   "Memory": "ACL_AICORE_MEMORY_BANDWIDTH", "MemoryL0": "ACL_AICORE_L0B_AND_WIDTH",
                   "MemoryUB": "ACL_AICORE_MEMORY_UB", "ResourceConflictRatio": "ACL_AICORE_RESOURCE_CONFLICT_RATIO",
                   "L2Cache": "ACL_AICORE_L2_CACHE", "MemoryAccess": "ACL_AICORE_MEMORY_ACCESS"}


def check_rank(rank: object) -> int:
    """``rank`` as the rank an ascend_pt export is written as: a whole number >= 0 (a bool is not
    one); otherwise a ValueError naming ``rank``.  ``Profile.export``, the CLI's and ``%geprof``'s
    ``--rank`` share it, so none writes ``profiler_info_-1.json`` or ``profiler_info_1.5.json``."""
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or rank < 0:
        raise ValueError(f"rank {rank!r} is not valid; accepted: a whole number >= 0")
    return int(rank)


def rank_argument(value: str) -> int:
    """The argparse ``type`` of ``--rank``: :func:`check_rank` of the number given."""
    try:
        number: object = int(value)
    except ValueError:
        number = value  # not a whole number: check_rank names it as given
    try:
        return check_rank(number)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def export_ascend_pt(profile, path: Path, rank: int = 0, worker: str | None = None,
                     world_size: int | None = None) -> Path:
    """Write the directory of one rank; returns it.  ``world_size``: the run is rank ``rank`` of a
    cluster of that size whose HCCL sub-tasks name global ranks (a simulated cluster's), kept as
    they are; without it the profiled device is relabelled ``rank`` (:class:`~.hccl.RankMap`)."""
    rank = check_rank(rank)
    root = Path(path) / ascend_pt_dir_name(profile, worker, rank)
    out = root / OUTPUT_DIR
    out.mkdir(parents=True, exist_ok=True)
    write_json(root / f"profiler_info_{rank}.json", profiler_info(profile, rank))
    # a data-parallel run's text export names no groups (msprof-analyze's step table stays without DP/PP/TP
    # indexes); a run with groups of its own writes them, as torch_npu does
    write_json(root / "profiler_metadata.json", profiler_metadata(profile, rank, None))
    write_device_info(profile, root)
    _kernel_details(profile, out / "kernel_details.csv")
    frame = profile.step_breakdown
    write_csv(out / "step_trace_time.csv", list(frame.columns), table_cells(frame))
    if len(profile.op_statistic):  # none at task_trace l0 (Level0), as msprof writes none there
        frame = profile.op_statistic.drop(columns=_NOT_IN_TORCH_NPU_STATISTICS, errors="ignore")
        write_csv(out / "op_statistic.csv", list(frame.columns), table_cells(frame))
    frame = profile.api_statistic.drop(columns=_NOT_IN_TORCH_NPU_STATISTICS, errors="ignore")
    write_csv(out / "api_statistic.csv", list(frame.columns), table_cells(frame))
    for name in ("operator_memory", "memory_record"):
        frame = getattr(profile, name)
        if len(frame):
            write_csv(out / f"{name}.csv", list(frame.columns),
                      table_cells(frame, profile.source.times_ns(name, frame), decimals=None))
    ops, tasks = profile.communication_time, profile.hccl_tasks
    groups = op_groups(profile)
    write_json(out / "communication.json", communication_json(ops, tasks, groups))
    ranks = RankMap(rank, rank, int(world_size)) if world_size else RankMap.of(tasks, rank)
    write_json(out / "communication_matrix.json", communication_matrix_json(ops, tasks, ranks, groups))
    timeline = Timeline(profile, torch_npu=True)
    write_events(out / "trace_view.json", framework_layer(timeline) + timeline.items())
    return root


#: The pg_name of the world group in ``parallel_group_info`` when the run recorded no groups (a data-parallel
#: cluster: its world group is its data-parallel group).
WORLD_GROUP_NAME = "dp"


def recorded_groups(profile) -> dict | None:
    """The run's own ``parallel_group_info`` (a simulated hybrid-parallel rank's, a torch_npu run's) when it
    has groups besides the world group; None otherwise (a data-parallel run: the world group is all)."""
    facts = profile.info.get("parallel") or profile.info.get("profiler_metadata") or {}
    groups = facts.get("parallel_group_info") if isinstance(facts, dict) else None
    if not isinstance(groups, dict):
        return None
    named = {g.get("group_name") for g in groups.values() if isinstance(g, dict)}
    return groups if named - {DEFAULT_GROUP, None} else None


def op_groups(profile) -> str | np.ndarray:
    """Each collective's group for the communication files: its own (the run's records) when the run has
    groups of its own, else the world group for all."""
    if recorded_groups(profile) is None:
        return DEFAULT_GROUP
    groups = profile.source.collective_groups()
    return DEFAULT_GROUP if groups is None else groups


def profiler_metadata(profile, rank: int | None, world_size: int | None) -> dict:
    """What torch_npu records of the job (``profiler_metadata.json``, META_DATA rows): the environment and,
    for a rank of a cluster of known size, ``distributed_args`` and ``parallel_group_info``: the run's own
    groups (and ``pp_info``) when it recorded them, else the world group of a data-parallel job (every
    rank in it)."""
    out: dict = {"ENV_VARIABLES": {}}
    groups = recorded_groups(profile)
    if groups is not None:
        facts = profile.info.get("parallel") or profile.info.get("profiler_metadata") or {}
        for key in ("distributed_args", "parallel_group_info", "pp_info"):
            if isinstance(facts.get(key), dict):
                out[key] = facts[key]
        return out
    if world_size and rank is not None:
        size = int(world_size)
        out["distributed_args"] = {"world_size": size, "rank": int(rank), "tensor_model_parallel_size": 1,
                                   "pipeline_model_parallel_size": 1, "data_parallel_size": size,
                                   "context_parallel_size": 1, "expert_model_parallel_size": 1}
        out["parallel_group_info"] = {DEFAULT_GROUP: {"group_name": WORLD_GROUP_NAME, "group_rank": int(rank),
                                                      "global_ranks": list(range(size))}}
    return out


def profiler_level(profile) -> str:
    """torch_npu's ProfilerLevel for the run's task_time level: l0 -> ``Level0``, else ``Level1``."""
    return "Level0" if profile.source.task_level == "l0" else "Level1"


def profiler_info(profile, rank: int) -> dict:
    """What torch_npu records of the profiler's configuration, for the options this run used
    (at Level0 torch_npu forces aic_metrics to ``ACL_AICORE_NONE``)."""
    opts = profile.options
    metrics = (profile.info.get("pmu_events") or {}).get("metrics") or [opts.get("aic_metrics", "PipeUtilization")]
    level = profiler_level(profile)
    aic_metrics = "ACL_AICORE_NONE" if level == "Level0" else ACL_AIC_METRICS.get(metrics[0], "ACL_AICORE_NONE")
    return {
        "config": {
            "common_config": {"activities": ["ProfilerActivity.CPU", "ProfilerActivity.NPU"], "record_shapes": True,
                              "profile_memory": opts.get("task_memory") == "on", "with_stack": False,
                              "with_flops": False, "with_modules": False},
            "experimental_config": {"_profiler_level": level, "_aic_metrics": aic_metrics,
                                    "_l2_cache": opts.get("l2") == "on", "_msprof_tx": opts.get("msproftx") == "on",
                                    "_data_simplification": True, "_export_type": "text"},
        },
        "start_info": {"start_monotonic": profile.info.get("start_ns")},
        "end_info": {"end_monotonic": profile.info.get("end_ns")},
        "rank_id": rank,
    }


def write_device_info(profile, root: Path) -> None:
    """``PROF_*/device_<id>/info.json.<id>``, where torch_npu's msprof data keeps it: the core
    counts and frequency msprof-analyze's block dim and AI Core frequency checks read
    (written when the profile knows its device)."""
    dev = profile.device_id
    device = profile.device
    if not device.get("ai_core_num"):
        return
    directory = root / prof_dir_name(profile) / f"device_{dev}"
    directory.mkdir(parents=True, exist_ok=True)
    info = {"DeviceInfo": [{"id": dev, "ai_core_num": device.get("ai_core_num"), "aiv_num": device.get("aiv_num"),
                            "aic_frequency": str(device.get("aic_frequency", ""))}],
            "pid": str(profile.info.get("pid", ""))}
    write_json(directory / f"info.json.{dev}", info)


def _kernel_details(profile, path: Path) -> Path:
    """op_summary with ``Step Id`` first and torch_npu's renamed headers: all its columns at
    Level1, :data:`LEVEL0_COLUMNS` at Level0."""
    frame = profile.op_summary
    renames = KERNEL_RENAMES
    if profiler_level(profile) == "Level0":
        frame = frame[LEVEL0_COLUMNS + [c for c in LEVEL0_TENSOR_COLUMNS if c in frame.columns]]
        renames = {k: v for k, v in KERNEL_RENAMES.items() if k != "Block Num"}
    cols = table_cells(frame, profile.source.times_ns("op_summary", frame), quote=SHAPE_COLUMNS,
                       key=profile.source.op_rows().connection_id)  # an op's name, shapes, PMU times: its task's
    cols = _other_core_zeros(frame, cols)
    steps = column_cells(profile.iteration_of_ops.astype(np.int64))
    header = ["Step Id"] + [renames.get(c, c) for c in frame.columns]
    return write_csv(path, header, [steps] + cols)


def _other_core_zeros(frame: pd.DataFrame, cols: list) -> list:
    """``cols`` (the cells of ``frame``'s columns) with the missing PMU cells of the core a pure
    AI Core / AI Vector Core task did not run on set to that column's zero (``0.000``; ``0`` for cycles)."""
    task_type = frame["Task Type"].astype(str).to_numpy() if "Task Type" in frame.columns else np.empty(0, object)
    rows_of = {kind: rows for kind in PURE_CORE_TASK_TYPES if (rows := task_type == kind).any()}
    out = list(cols)
    zeros: dict[object, str] = {}  # dtype -> its zero's cell text
    by_name = frame.columns.is_unique  # a column by its name: quicker than by position
    for k, name in enumerate(frame.columns):
        kinds = [kind for kind in rows_of if is_other_core_column(kind, name)]
        if not kinds:
            continue
        series = frame[name] if by_name else frame.iloc[:, k]  # only the other core's columns are looked at
        rows = np.logical_or.reduce([rows_of[kind] for kind in kinds])
        fill = np.flatnonzero(rows & np.asarray(pd.isna(series.array)))
        if len(fill):  # one copy of the column's codes, whichever kinds it is the other core's column of
            if series.dtype not in zeros:
                zeros[series.dtype] = column_cells(pd.Series([0], dtype=series.dtype)).tolist()[0]
            out[k] = out[k].set(fill, zeros[series.dtype])
    return out


def _main_model(profile) -> int:
    """The model the steps count: the one with most step_trace rows, else most op tasks."""
    ids = profile.step_trace["Model ID"] if len(profile.step_trace) else profile.op_summary["Model ID"]
    return int(pd.Series(ids).astype(int).mode().iloc[0]) if len(ids) else -1


def profiler_steps(timeline: Timeline) -> pd.DataFrame:
    """(step, begin, end, thread) of every ``ProfilerStep#<n>``: the main model's ModelExecute
    call of that iteration where the run recorded one, else the step's device window."""
    profile, calls = timeline.profile, timeline.calls
    windows = step_windows(profile.source.step_bounds(), profile.source.op_rows())
    execs = calls[(calls["api"] == "ModelExecute") & (calls["model_id"] == _main_model(profile))]
    execs = execs.drop_duplicates("iteration")
    default_thread = int(calls["thread"].mode().iloc[0]) if len(calls) else timeline.real_pid
    at = pd.Index(execs["iteration"]).get_indexer(windows["step"])  # -1: the step has no ModelExecute

    def pick(column: str, otherwise) -> np.ndarray:
        values = np.append(execs[column].to_numpy(np.int64), 0)  # (the 0 at -1 is never picked)
        return np.where(at >= 0, values[at], otherwise)

    return pd.DataFrame({"step": windows["step"].to_numpy(np.int64), "begin": pick("begin", windows["start"]),
                         "end": pick("end", windows["end"]), "thread": pick("thread", default_thread)})


def launching_calls(calls: pd.DataFrame, tasks: pd.DataFrame) -> np.ndarray:
    """For each row of ``tasks`` (:meth:`Source.device_tasks`) the row of ``calls`` (:meth:`Source.api_calls`)
    that launched it, -1 for none: the node launch of its (connection id, iteration) (dynamic graphs),
    else its model's ModelExecute of that iteration (static graphs).  Of two calls with the same key,
    the later wins."""
    out = np.full(len(tasks), -1, np.int64)
    launch = (calls["iteration"] >= 0).to_numpy()
    node = np.flatnonzero(launch & (calls["connection_id"] >= 0).to_numpy())
    model = np.flatnonzero(launch & (calls["api"] == "ModelExecute").to_numpy())
    for rows, call_keys, task_keys in (
            (node, ("connection_id", "iteration"), ("connection_id", "iteration")),
            (model, ("model_id", "iteration"), ("model_id", "iteration"))):
        todo = np.flatnonzero(out < 0)
        if not len(rows) or not len(todo):
            continue
        keys = pd.MultiIndex.from_arrays([calls[c].to_numpy(np.int64)[rows] for c in call_keys])
        last = ~keys.duplicated(keep="last")
        index = pd.MultiIndex.from_arrays([calls[c].to_numpy(np.int64)[rows[last]] for c in call_keys])
        at = index.get_indexer(pd.MultiIndex.from_arrays([tasks[c].to_numpy(np.int64)[todo] for c in task_keys]))
        out[todo[at >= 0]] = rows[last][at[at >= 0]]
    return out


def framework_layer(timeline: Timeline) -> list[dict | EventBlock]:
    """The ``Python`` process: ProfilerStep and launch cpu_ops, and a ``torch_to_npu`` flow into every op task."""
    pid = timeline.real_pid
    steps = profiler_steps(timeline)
    calls = timeline.calls
    launches = calls[(calls["iteration"] >= 0) & ((calls["connection_id"] >= 0) | (calls["api"] == "ModelExecute"))]
    threads = sorted(set(steps["thread"].tolist()) | set(launches["thread"].astype(int).tolist()))
    out = process_meta(pid, "Python", "CPU", 0)
    for tid in threads:
        out += thread_meta(pid, tid, f"Thread {tid}")
    for row in steps.itertuples(index=False):
        out.append(slice_event(f"ProfilerStep#{row.step}", pid, row.thread, row.begin, row.end - row.begin, {},
                               "cpu_op"))
    for row in launches.itertuples(index=False):
        node = row.connection_id >= 0
        out.append(slice_event(row.item if node else row.api, pid, int(row.thread), row.begin, row.end - row.begin,
                               {}, "cpu_op"))
    tasks = timeline.tasks
    first_id = len(tasks)  # after the HostToDevice flow ids (task rows), so no two flows share an id
    rows = np.flatnonzero(tasks["op"].to_numpy(bool))
    stream, start = (tasks[c].to_numpy(np.int64)[rows] for c in ("stream_id", "start"))
    # each op task's launching call: its node launch, else its model's execution, else its step
    call = launching_calls(calls, tasks)[rows] if len(calls) else np.full(len(rows), -1, np.int64)
    source = np.full((len(rows), 3), -1, np.int64)
    launched = call >= 0
    if launched.any():
        source[launched] = np.column_stack([np.full(int(launched.sum()), pid, np.int64),
                                            calls["thread"].to_numpy(np.int64)[call[launched]],
                                            calls["begin"].to_numpy(np.int64)[call[launched]]])
    source_row = np.where(launched, call, -1)
    step_at = pd.Index(steps["step"].to_numpy(np.int64)).get_indexer(tasks["iteration"].to_numpy(np.int64)[rows])
    by_step = ~launched & (step_at >= 0)
    if by_step.any():
        source[by_step] = np.column_stack([np.full(int(by_step.sum()), pid, np.int64),
                                           steps["thread"].to_numpy(np.int64)[step_at[by_step]],
                                           steps["begin"].to_numpy(np.int64)[step_at[by_step]]])
        source_row[by_step] = step_at[by_step] + (1 << 40)
    keep = np.flatnonzero(launched | by_step)
    if len(keep):
        ids = strs(pc.cast(pa.array(first_id + rows[keep]), pa.string()))
        out.append(EventBlock(len(keep), [
            ("name", const("torch_to_npu")), ("pid", ints(source[keep, 0])), ("tid", ints(source[keep, 1])),
            ("ph", const("s")), ("cat", const("async_npu")), ("id", ids), ("ts", ts_ns(source[keep, 2]))],
            pairs=[("name", const("torch_to_npu")), ("pid", const(timeline.pid("Ascend Hardware"))),
                   ("tid", ints(stream[keep])), ("ph", const("f")), ("cat", const("async_npu")), ("id", ids),
                   ("ts", ts_ns(start[keep])), ("bp", const("e"))],
            key=source_row[keep], pair_key=tasks["connection_id"].to_numpy(np.int64)[rows][keep]))
    return out
