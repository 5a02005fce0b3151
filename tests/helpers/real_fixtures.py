"""Write real-tool output for the importer tests, from the documented formats, not from geprof code.

* :func:`write_msprof`: a ``PROF_*`` directory whose ``mindstudio_profiler_output`` holds msprof's
  summaries (reference ge_msprof_formats §3.3, §4): timestamps as ``<us>.<3 decimals>`` plus a
  TAB, ``N/A`` cells, shape cells CSV-quoted, ``Task Wait Time`` printed by ``std::to_string``,
  step_trace with repeated ``Reduce Start/Duration`` pairs, optional 1,000,000-row style slices,
  an older export beside the newest, and three headers: Atlas A2 PipeUtilization (verbatim from
  msprof's unit test), Atlas A2 Memory, and 910A (no Mix Block Num / Context ID) PipeUtilization.
* :func:`write_ascend_pt`: a torch_npu ``<worker>_<pid>_<ts>_ascend_pt`` directory (reference §5,
  msprof_analyze_inputs §2-3): kernel_details.csv with the renamed columns and literally quoted
  shapes (``\"\"\"8,16;16,32\"\"\"`` in the file), trace_view.json with string ``ts``,
  ProfilerStep spans and torch_to_npu flows, step_trace_time.csv, op_statistic.csv,
  api_statistic.csv, operator_memory.csv, memory_record.csv, communication.json,
  communication_matrix.json (torch_npu's statistics entries, local ranks), profiler_info_<rank>.json
  and profiler_metadata.json.

Every writer returns the data it wrote (exact ns, expected iterations) for the assertions.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

#: A start time whose last ns digits float64 µs cannot hold (ulp at 1.7e15 us is 0.25 us).
T0_NS = 1_717_575_960_208_020_758
STAMP = "20240605081600"
OLD_STAMP = "20240605081000"

BASE = ["Device_id", "Model ID", "Task ID", "Stream ID", "Op Name", "OP Type", "OP State", "Task Type",
        "Task Start Time(us)", "Task Duration(us)", "Task Wait Time(us)"]
TENSOR_A2 = ["Block Num", "Mix Block Num", "HF32 Eligible", "Input Shapes", "Input Data Types", "Input Formats",
             "Output Shapes", "Output Data Types", "Output Formats", "Context ID"]
TENSOR_910A = ["Block Num", "HF32 Eligible", "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes",
               "Output Data Types", "Output Formats"]
#: The Atlas A2 PipeUtilization header, verbatim from msprof's op_summary assembler test (reference §4.1).
A2_PIPE_HEADER = (
    "Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,Task Start Time(us),Task Duration(us),"
    "Task Wait Time(us),Block Num,Mix Block Num,HF32 Eligible,Input Shapes,Input Data Types,Input Formats,"
    "Output Shapes,Output Data Types,Output Formats,Context ID,aicore_time(us),aic_total_cycles,aic_mac_time(us),"
    "aic_mac_ratio,aic_scalar_time(us),aic_scalar_ratio,aic_mte1_time(us),aic_mte1_ratio,aic_mte2_time(us),"
    "aic_mte2_ratio,aic_fixpipe_time(us),aic_fixpipe_ratio,aic_icache_miss_rate,aiv_time(us),aiv_total_cycles,"
    "aiv_vec_time(us),aiv_vec_ratio,aiv_scalar_time(us),aiv_scalar_ratio,aiv_mte2_time(us),aiv_mte2_ratio,"
    "aiv_mte3_time(us),aiv_mte3_ratio,aiv_icache_miss_rate,cube_utilization(%)").split(",")
_BW = ["main_mem_read_bw(GB/s)", "main_mem_write_bw(GB/s)", "l2_read_bw(GB/s)", "l2_write_bw(GB/s)"]
A2_MEMORY_HEADER = (BASE + TENSOR_A2 + ["aicore_time(us)", "aic_total_cycles", "aic_l1_read_bw(GB/s)",
                                        "aic_l1_write_bw(GB/s)"] + [f"aic_{c}" for c in _BW]
                    + ["aiv_time(us)", "aiv_total_cycles", "aiv_ub_read_bw(GB/s)", "aiv_ub_write_bw(GB/s)"]
                    + [f"aiv_{c}" for c in _BW])
A910_PIPE_HEADER = (BASE + TENSOR_910A + ["aicore_time(us)", "total_cycles"]
                    + [f"{p}_{k}" for p in ("vec", "mac", "scalar", "mte1", "mte2", "mte3")
                       for k in ("time(us)", "ratio")] + ["icache_miss_rate", "memory_bound"])
HEADERS = {"A2-PipeUtilization": A2_PIPE_HEADER, "A2-Memory": A2_MEMORY_HEADER,
           "910A-PipeUtilization": A910_PIPE_HEADER}

#: (name, type, task type, duration ns, input shapes, input types, output shapes) of one iteration's ops.
OPS = [
    ("fc1", "MatMulV2", "AI_CORE", 151_000, "8,16;16,32", "FLOAT16;FLOAT16", "8,32"),
    ("add1", "Add", "AI_VECTOR_CORE", 3_217, "8,32;8,32", "FLOAT16;FLOAT16", "8,32"),
    ("mean", "ReduceMean", "AI_VECTOR_CORE", 2_005, "8,32;", "FLOAT16;INT32", ""),
    ("nz", "NonZero", "AI_CPU", 95_333, "8,32", "FLOAT16", "N/A"),
    ("hcom_allReduce__871_0_1", "hcom_allReduce_", "COMMUNICATION", 1_500_250, "N/A", "N/A", "N/A"),
]
STEP_NS = 3_000_000  # iteration length


def us(ns: int, tab: bool = True) -> str:
    """msprof's timestamp cell: ns/1000 with 3 decimals, and a TAB (keeps Excel from rounding it)."""
    return f"{ns // 1000}.{ns % 1000:03d}" + ("\t" if tab else "")


def dur(ns: int) -> str:
    return f"{ns / 1000:.3f}"


@dataclass
class OpRow:
    """One op_summary row as written."""

    name: str
    op_type: str
    task_type: str
    start_ns: int
    dur_ns: int
    iteration: int
    stream: int
    task: int
    in_shapes: str
    in_types: str
    out_shapes: str
    cells: dict[str, str] = field(default_factory=dict)


@dataclass
class MsprofRun:
    path: Path  # the PROF_* directory
    output: Path  # its mindstudio_profiler_output
    rows: list[OpRow]
    header: list[str]
    step_ends: list[int]  # Iteration End ns per iteration
    step_begins: list[int]


def _pmu_cell(col: str, row: OpRow, k: int) -> str:
    """A PMU cell: numbers for the core kind that ran the op, N/A for the other and for AI CPU / HCCL."""
    cube = row.task_type == "AI_CORE"
    vector = row.task_type == "AI_VECTOR_CORE"
    if col.startswith("aic_") or col == "aicore_time(us)":
        has = cube
    elif col.startswith("aiv_"):
        has = vector
    elif col == "cube_utilization(%)":
        has = cube
    else:  # 910A: one unprefixed set for both
        has = cube or vector
    if not has:
        return "N/A"
    if col.endswith("total_cycles"):
        return str(1000 + 37 * k)
    return f"{(k + 1) * 0.125 + len(col) / 1000:.3f}"


def _op_rows(n_iter: int, extra_late: bool) -> tuple[list[OpRow], list[int], list[int]]:
    rows, ends, begins = [], [], []
    task = 10
    for it in range(1, n_iter + 1):
        begin = T0_NS + (it - 1) * STEP_NS - 20_000
        t = T0_NS + (it - 1) * STEP_NS
        for name, typ, ttype, d, ins, types, outs in OPS:
            comm = ttype == "COMMUNICATION"
            rows.append(OpRow(name, typ, ttype, t, d, it, 0 if comm else 1, 0 if comm else task, ins, types, outs))
            task += 1
            t += d + 20_000 + it  # a gap, so the wait time is not 0
        begins.append(begin)
        ends.append(t + 5_000)
    if extra_late:  # an op after the last iteration end: counted in the last iteration, with a note
        rows.append(OpRow("late", "Add", "AI_VECTOR_CORE", ends[-1] + 7_001, 2_000, n_iter, 1, task, "8", "FLOAT16",
                          "8"))
    return rows, ends, begins


def _op_summary_cells(rows: list[OpRow], header: list[str], device_id: int) -> list[list[str]]:
    out = []
    prev_end = None
    for k, r in enumerate(rows):
        comm = r.task_type == "COMMUNICATION"
        wait = "0" if prev_end is None or comm else f"{max(0, r.start_ns - prev_end) / 1000:.6f}"
        if not comm:
            prev_end = r.start_ns + r.dur_ns
        na = "N/A"
        cells = {
            "Device_id": str(device_id), "Model ID": "4294967295" if comm else "1",
            "Task ID": na if comm else str(r.task), "Stream ID": na if comm else str(r.stream),
            "Op Name": r.name, "OP Type": r.op_type, "OP State": na if comm else "static", "Task Type": r.task_type,
            "Task Start Time(us)": us(r.start_ns), "Task Duration(us)": dur(r.dur_ns), "Task Wait Time(us)": wait,
            "Block Num": "0" if comm or r.task_type == "AI_CPU" else "8", "Mix Block Num": na if comm else "0",
            "HF32 Eligible": na if comm else "NO", "Input Shapes": r.in_shapes, "Input Data Types": r.in_types,
            "Input Formats": na if comm else ";".join("ND" for _ in r.in_types.split(";")),
            "Output Shapes": r.out_shapes, "Output Data Types": na if comm else "FLOAT16",
            "Output Formats": na if comm else "ND", "Context ID": na,
        }
        for col in header:
            if col not in cells:
                cells[col] = _pmu_cell(col, r, k)
        r.cells = cells
        out.append([cells[c] for c in header])
    return out


def write_csv(path: Path, header: list[str], rows: list[list[str]], *, crlf: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, lineterminator="\r\n" if crlf else "\n")
        w.writerow(header)
        w.writerows(rows)
    return path


def write_msprof(root: Path, *, header: str = "A2-PipeUtilization", n_iter: int = 3, device_id: int = 0,
                 slices: int = 1, stale_export: bool = False, extra_late: bool = False,
                 step_trace: bool = True) -> MsprofRun:
    """A ``PROF_000001_<ts>_<tag>`` directory with msprof's summaries of ``n_iter`` iterations."""
    prof = root / "PROF_000001_20240605081559123_ABCDEFGHIJKLMNOP"
    out = prof / "mindstudio_profiler_output"
    cols = HEADERS[header]
    rows, ends, begins = _op_rows(n_iter, extra_late)
    cells = _op_summary_cells(rows, cols, device_id)
    if slices == 1:
        write_csv(out / f"op_summary_{STAMP}.csv", cols, cells)
    else:
        per = -(-len(cells) // slices)
        for s in range(slices):
            write_csv(out / f"op_summary_slice_{s}_{STAMP}.csv", cols, cells[s * per:(s + 1) * per])
    if stale_export:  # an earlier export of the same kind, with other content
        write_csv(out / f"op_summary_{OLD_STAMP}.csv", cols, cells[:1])
    if step_trace:
        _write_step_trace(out, rows, ends, begins, device_id)
    _write_statistics(out, rows, device_id)
    dev = prof / f"device_{device_id}"
    dev.mkdir(parents=True, exist_ok=True)
    (dev / f"info.json.{device_id}").write_text(json.dumps({"DeviceInfo": [
        {"id": device_id, "ai_core_num": 24, "aic_frequency": "1800", "aiv_num": 48, "hwts_frequency": "50"}]}))
    return MsprofRun(prof, out, rows, cols, ends, begins)


def _write_step_trace(out: Path, rows: list[OpRow], ends: list[int], begins: list[int], device_id: int) -> None:
    """Two AllReduce groups in every iteration but the last, which has one (its second pair is N/A)."""
    header = ["Device_id", "Iteration ID", "FP Start(us)", "BP End(us)", "Iteration End(us)", "Iteration Time(us)",
              "FP to BP Time(us)", "Iteration Refresh(us)", "Data Aug Bound(us)", "Model ID",
              "Reduce Start(us)", "Reduce Duration(us)", "Reduce Start(us)", "Reduce Duration(us)"]
    lines = []
    for i, (begin, end) in enumerate(zip(begins, ends)):
        it = i + 1
        mine = [r for r in rows if r.iteration == it]
        fp, bp = mine[0].start_ns, mine[2].start_ns + mine[2].dur_ns
        comm = next(r for r in mine if r.task_type == "COMMUNICATION")
        reduce = [us(comm.start_ns), dur(comm.dur_ns)]
        reduce += [us(comm.start_ns + 100_001), dur(400_000)] if it < len(ends) else ["N/A", "N/A"]
        lines.append([str(device_id), str(it), us(fp), us(bp), us(end), dur(end - begin), dur(bp - fp),
                      dur(end - bp), "N/A" if it == 1 else dur(fp - ends[i - 1]), "1", *reduce])
    write_csv(out / f"step_trace_{STAMP}.csv", header, lines)


def _write_statistics(out: Path, rows: list[OpRow], device_id: int) -> None:
    compute = [r for r in rows if r.task_type != "COMMUNICATION"]
    groups: dict[tuple[str, str], list[int]] = {}
    for r in compute:
        groups.setdefault((r.op_type, r.task_type), []).append(r.dur_ns)
    total = sum(r.dur_ns for r in compute)
    stats = sorted(groups.items(), key=lambda kv: -sum(kv[1]))
    write_csv(out / f"op_statistic_{STAMP}.csv",
              ["Device_id", "OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)",
               "Max Time(us)", "Ratio(%)"],
              [[str(device_id), t, c, str(len(d)), dur(sum(d)), dur(min(d)), dur(sum(d) // len(d)), dur(max(d)),
                f"{sum(d) / total * 100:.3f}"] for (t, c), d in stats])
    write_csv(out / f"api_statistic_{STAMP}.csv",
              ["Device_id", "Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)", "Variance"],
              [["host", "acl", "aclmdlExecute", "300.300", "3", "100.100", "99.000", "101.200", "0.807"],
               ["host", "model", "ModelExecute", "150.000", "3", "50.000", "50.000", "50.000", "0.000"]])
    task_rows = [[str(device_id), "N/A", "EVENT_RECORD", "1", "3", "1.000", us(rows[0].start_ns - 5_000),
                  us(rows[0].start_ns - 4_000)]]
    task_rows += [[str(device_id), r.name, {"AI_CORE": "KERNEL_AICORE", "AI_CPU": "KERNEL_AICPU"}.get(
        r.task_type, "KERNEL_AIVEC"), str(r.stream), str(r.task), dur(r.dur_ns), us(r.start_ns),
        us(r.start_ns + r.dur_ns)] for r in compute]
    write_csv(out / f"task_time_{STAMP}.csv", ["Device_id", "kernel_name", "kernel_type", "stream_id", "task_id",
                                               "task_time(us)", "task_start(us)", "task_stop(us)"], task_rows)
    comm = [r.dur_ns for r in rows if r.task_type == "COMMUNICATION"]
    write_csv(out / f"communication_statistic_{STAMP}.csv",
              ["Device_id", "OP Type", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)", "Max Time(us)",
               "Ratio(%)"],
              [[str(device_id), "hcom_allReduce_", str(len(comm)), dur(sum(comm)), dur(min(comm)),
                dur(sum(comm) // len(comm)), dur(max(comm)), "100.000"]])
    write_csv(out / f"msprof_tx_{STAMP}.csv",
              ["Device_id", "pid", "tid", "category", "event_type", "payload_type", "payload_value",
               "Start_time(us)", "End_time(us)", "message_type", "message", "domain", "Device Start_time(us)",
               "Device End_time(us)"],
              [[str(device_id), "4242", "4243", "0", "start/end", "N/A", "N/A", us(T0_NS - 9_001),
                us(T0_NS + 1_000_999), "string", "epoch 1, step 1", "default", "N/A", "N/A"]])


# ------------------------------------------------------------------------- torch_npu
KERNEL_L1_HEADER = (
    "Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),"
    "Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,Input Data Types,Input Formats,"
    "Output Shapes,Output Data Types,Output Formats,Context ID,aicore_time(us),aic_total_cycles,aic_mac_time(us),"
    "aic_mac_ratio,aic_mte2_time(us),aic_mte2_ratio,aiv_time(us),aiv_total_cycles,aiv_vec_time(us),aiv_vec_ratio,"
    "aiv_mte2_time(us),aiv_mte2_ratio,aiv_mte3_time(us),aiv_mte3_ratio,cube_utilization(%)").split(",")
KERNEL_L0_HEADER = ["Step Id", "Device_id", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)",
                    "Wait Time(us)", "Block Num", "Input Shapes", "Input Data Types", "Input Formats",
                    "Output Shapes", "Output Data Types", "Output Formats"]
STEP_TRACE_TIME_HEADER = ["Device_id", "Step", "Computing", "Communication(Not Overlapped)", "Overlapped",
                          "Communication", "Free", "Stage", "Bubble",
                          "Communication(Not Overlapped and Exclude Receive)", "Preparing"]
PT_T0_NS = 1_735_689_600_000_080_123
#: (name, type, accelerator core, duration ns) of one step's kernels.
KERNELS = [("aclnnMm_MatMulCommon_MatMulV2", "MatMulV2", "AI_CORE", 1_200_007),
           ("aclnnAdd_AddAiCore_Add", "Add", "AI_VECTOR_CORE", 30_011),
           ("aclnnNonzero_NonZero", "NonZero", "AI_CPU", 95_000),
           ("hcom_allReduce__871_0_1", "hcom_allReduce_", "COMMUNICATION", 1_500_000)]
PT_STEP_NS = 5_000_000
#: The communication group of the fixture's collectives (the ``@<group>`` of their names).
PT_GROUP = "5196826027332097320"
#: One rank's ring transfer per allreduce in communication.json and communication_matrix.json.
PT_LINK_MB, PT_LINK_MS, PT_LINK_GBPS = 16.0, 1.05, 15.2381


@dataclass
class Kernel:
    name: str
    op_type: str
    core: str
    start_ns: int
    dur_ns: int
    step: int
    launch_ns: int  # the torch op that launched it (torch_to_npu flow start)


@dataclass
class AscendPtRun:
    path: Path
    rank: int
    kernels: list[Kernel]
    steps: list[tuple[int, int, int]]  # (step, begin ns, end ns) of ProfilerStep#<step>
    breakdown: list[list[float]]  # step_trace_time rows as written (without Device_id)


def write_ascend_pt(root: Path, rank: int = 0, *, level: str = "Level1", step_id: bool = True, n_steps: int = 3,
                    device_id: int | None = None, slow: float = 1.0, pid: int = 31000,
                    local_rank: int | None = None) -> AscendPtRun:
    """One rank's ``<host>_<pid>_<17-digit ts>_ascend_pt`` directory; ``local_rank`` (default: ``rank``):
    its rank in its group of two (``local_rank ^ 1`` is the other), as communication_matrix.json names it."""
    device_id = rank if device_id is None else device_id
    path = root / f"localhost.localdomain_{pid + rank}_2025010100000{rank:04d}_ascend_pt"
    out = path / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    kernels, steps = [], []
    for s in range(1, n_steps + 1):
        begin = PT_T0_NS + (s - 1) * PT_STEP_NS
        steps.append((s, begin, begin + PT_STEP_NS - 1_001))
        t = begin + 4_000_017  # the device runs behind the host: late kernels end after the next step began
        for j, (name, typ, core, d) in enumerate(KERNELS):
            d = int(d * slow)
            kernels.append(Kernel(name, typ, core, t, d, s, begin + 10_000 * (j + 1) + 3))
            t += d + 11_111
    _write_kernel_details(out, kernels, level, step_id, device_id)
    _write_trace_view(out, kernels, steps, device_id)
    breakdown = []
    for s, begin, end in steps:
        mine = [k for k in kernels if k.step == s]
        computing = sum(k.dur_ns for k in mine if k.core != "COMMUNICATION") / 1000
        comm = sum(k.dur_ns for k in mine if k.core == "COMMUNICATION") / 1000
        e2e = (end - begin) / 1000
        breakdown.append([s, computing, comm, 0.0, comm, round(e2e - computing - comm, 3), e2e, 0.0, comm,
                          (mine[0].start_ns - begin) / 1000])
    rows = [[str(v) for v in r] for r in breakdown]
    if level == "Level1":
        write_csv(out / "step_trace_time.csv", STEP_TRACE_TIME_HEADER, [[str(device_id), *r] for r in rows],
                  crlf=True)
    else:  # msprof-analyze's sample: no Device_id
        write_csv(out / "step_trace_time.csv", STEP_TRACE_TIME_HEADER[1:], rows, crlf=True)
    write_csv(out / "op_statistic.csv",
              ["OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)", "Max Time(us)",
               "Ratio(%)"],
              [["MatMulV2", "AI_CORE", str(n_steps), "3600.021", "1200.007", "1200.007", "1200.007", "90.000"],
               ["Add", "AI_VECTOR_CORE", str(n_steps), "90.033", "30.011", "30.011", "30.011", "10.000"]], crlf=True)
    write_csv(out / "api_statistic.csv",
              ["Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)", "Variance"],
              [["acl", "aclnnMm", "61.500", "3", "20.500", "20.000", "21.500", "0.500"]], crlf=True)
    a0 = PT_T0_NS + 1_000
    write_csv(out / "operator_memory.csv",
              ["Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)", "Active Release Time(us)",
               "Duration(us)", "Active Duration(us)", "Allocation Total Allocated(MB)",
               "Allocation Total Reserved(MB)", "Allocation Total Active(MB)", "Release Total Allocated(MB)",
               "Release Total Reserved(MB)", "Release Total Active(MB)", "Stream Ptr", "Device Type"],
              [["aten::mm", "512.0", us(a0), us(a0 + 2_000_001), us(a0 + 2_000_001), "2000.001", "2000.001", "0.5",
                "2.0", "0.5", "0.0", "2.0", "0.0", "187651236157616", f"NPU:{device_id}"],
               ["aten::add", "16.0", us(a0 + 5), "", "", "", "", "0.516", "2.0", "0.516", "", "", "",
                "187651236157616", f"NPU:{device_id}"]], crlf=True)
    write_csv(out / "memory_record.csv",
              ["Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)", "Total Active(MB)",
               "Stream Ptr", "Device Type"],
              [["PTA", us(a0), "0.5", "2.0", "0.5", "187651236157616", f"NPU:{device_id}"],
               ["PTA", us(a0 + 5), "0.516", "2.0", "0.516", "187651236157616", f"NPU:{device_id}"],
               ["APP", us(a0 + 5), "0.516", "4.0", "0.516", "", f"NPU:{device_id}"]], crlf=True)
    _write_communication(out, kernels)
    _write_communication_matrix(out, kernels, rank if local_rank is None else local_rank)
    info = {"config": {"common_config": {"activities": ["CPU", "NPU"]},
                       "experimental_config": {"_profiler_level": level,
                                               "_aic_metrics": "ACL_AICORE_PIPE_UTILIZATION"}},
            "start_info": {}, "end_info": {}, "torch_npu_version": "2.1.0.post10", "cann_version": "8.0.0",
            "rank_id": rank}
    (path / f"profiler_info_{rank}.json").write_text(json.dumps(info))
    (path / "profiler_metadata.json").write_text(json.dumps({
        "ENV_VARIABLES": {"ASCEND_LAUNCH_BLOCKING": "0"},
        "distributed_args": {"world_size": 2, "rank": rank, "tensor_model_parallel_size": 1}}))
    return AscendPtRun(path, rank, kernels, steps, breakdown)


def _write_kernel_details(out: Path, kernels: list[Kernel], level: str, step_id: bool, device_id: int) -> None:
    header = KERNEL_L1_HEADER if level == "Level1" else KERNEL_L0_HEADER
    if not step_id:
        header = header[1:]
    rows = []
    prev_end = None
    for k in kernels:
        comm = k.core == "COMMUNICATION"
        wait = 0 if prev_end is None else max(0, k.start_ns - prev_end)
        prev_end = k.start_ns + k.dur_ns
        cube, vec = k.core == "AI_CORE", k.core == "AI_VECTOR_CORE"
        shapes = '"8192,1024;1024,4096"' if cube else ('"8,32;8,32"' if vec else '""' if comm else '"8,32"')
        cells = {
            "Step Id": str(k.step), "Device_id": str(device_id), "Model ID": "4294967295",
            "Task ID": "N/A" if comm else str(100 + kernels.index(k)), "Stream ID": "N/A" if comm else "2",
            "Name": k.name, "Type": k.op_type, "OP State": "N/A" if comm else "dynamic", "Accelerator Core": k.core,
            "Start Time(us)": us(k.start_ns), "Duration(us)": dur(k.dur_ns), "Wait Time(us)": f"{wait / 1000:.3f}",
            "Block Dim": "0" if comm else "24", "Block Num": "0" if comm else "24", "Mix Block Dim": "0",
            "HF32 Eligible": "N/A" if comm else "NO", "Input Shapes": shapes,
            "Input Data Types": '"DT_BF16;DT_BF16"' if cube or vec else '"N/A"',
            "Input Formats": '"ND;ND"' if cube or vec else '"N/A"',
            "Output Shapes": '"8192,4096"' if cube else '"8,32"',
            "Output Data Types": '"DT_BF16"', "Output Formats": '"ND"', "Context ID": "N/A",
            "aicore_time(us)": "1150.123" if cube else "N/A", "aic_total_cycles": "2070221" if cube else "N/A",
            "aic_mac_time(us)": "900.5" if cube else "N/A", "aic_mac_ratio": "0.783" if cube else "N/A",
            "aic_mte2_time(us)": "200.25" if cube else "N/A", "aic_mte2_ratio": "0.174" if cube else "N/A",
            "aiv_time(us)": "28.5" if vec else "N/A", "aiv_total_cycles": "51300" if vec else "N/A",
            "aiv_vec_time(us)": "10.0" if vec else "N/A", "aiv_vec_ratio": "0.351" if vec else "N/A",
            "aiv_mte2_time(us)": "12.0" if vec else "N/A", "aiv_mte2_ratio": "0.421" if vec else "N/A",
            "aiv_mte3_time(us)": "6.0" if vec else "N/A", "aiv_mte3_ratio": "0.211" if vec else "N/A",
            "cube_utilization(%)": "95.851" if cube else "N/A",
        }
        rows.append([cells[c] for c in header])
    write_csv(out / "kernel_details.csv", header, rows, crlf=True)


def _write_trace_view(out: Path, kernels: list[Kernel], steps: list[tuple[int, int, int]], device_id: int) -> None:
    """A list of events: Python (host) and Ascend Hardware (device) processes, steps, ops, kernels, flows."""
    host, hw = 1000, 2000 + device_id
    events: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": host, "tid": 0, "args": {"name": "Python"}},
        {"ph": "M", "name": "process_labels", "pid": host, "tid": 0, "args": {"labels": "CPU"}},
        {"ph": "M", "name": "process_name", "pid": hw, "tid": 0, "args": {"name": "Ascend Hardware"}},
        {"ph": "M", "name": "process_labels", "pid": hw, "tid": 0, "args": {"labels": f"NPU {device_id}"}},
        {"ph": "M", "name": "thread_name", "pid": hw, "tid": 2, "args": {"name": "Stream 2"}},
    ]
    for s, begin, end in steps:
        events.append({"ph": "X", "name": f"ProfilerStep#{s}", "pid": host, "tid": 7, "ts": us(begin, tab=False),
                       "dur": (end - begin) / 1000, "cat": "cpu_op", "args": {}})
    for i, k in enumerate(kernels):
        events.append({"ph": "X", "name": f"aten::op{i}", "pid": host, "tid": 7, "ts": us(k.launch_ns, tab=False),
                       "dur": 5.0, "cat": "cpu_op", "args": {"Input Dims": [[8, 32]]}})
        events.append({"ph": "X", "name": k.name, "pid": hw, "tid": 2, "ts": us(k.start_ns, tab=False),
                       "dur": k.dur_ns / 1000, "args": {"Task Type": k.core, "Stream Id": 2, "Task Id": i}})
        events.append({"ph": "s", "name": "torch_to_npu", "cat": "async_npu", "id": str(i), "pid": host, "tid": 7,
                       "ts": us(k.launch_ns, tab=False)})
        events.append({"ph": "f", "name": "torch_to_npu", "cat": "async_npu", "id": str(i), "pid": hw, "tid": 2,
                       "ts": us(k.start_ns, tab=False), "bp": "e"})
    (out / "trace_view.json").write_text(json.dumps(events))


def _write_communication(out: Path, kernels: list[Kernel]) -> None:
    content = {}
    for k in kernels:
        if k.core != "COMMUNICATION":
            continue
        info = {"Start Timestamp(us)": k.start_ns / 1000, "Elapse Time(ms)": k.dur_ns / 1e6, "Transit Time(ms)": 1.05,
                "Wait Time(ms)": 0.18, "Synchronization Time(ms)": 0.09, "Idle Time(ms)": 0.27,
                "Wait Time Ratio": 0.1463, "Synchronization Time Ratio": 0.0789}
        bandwidth = {"HCCS": {"Transit Size(MB)": PT_LINK_MB, "Transit Time(ms)": PT_LINK_MS,
                              "Bandwidth(GB/s)": PT_LINK_GBPS, "Large Packet Ratio": 0.0,
                              "Size Distribution": {"8.0": [2, PT_LINK_MS]}}}
        op = {"Communication Time Info": info, "Communication Bandwidth Info": bandwidth}
        content[f"step{k.step}"] = {"collective": {f"{k.name}@{PT_GROUP}": op, "Total Op Info": op}, "p2p": {}}
    (out / "communication.json").write_text(json.dumps(content))


def _write_communication_matrix(out: Path, kernels: list[Kernel], local_rank: int) -> None:
    """torch_npu's statistics entries per step (msprof_analyze_inputs §3): ``allreduce-top1`` (the slowest
    allreduce) and ``allreduce-total`` (all of them; one a step here, so the same links), each with the
    ring link to the group's other rank and the rank's own ``i-i`` LOCAL link, in local ranks."""
    content = {}
    for k in kernels:
        if k.core != "COMMUNICATION":
            continue
        links = {f"{local_rank}-{local_rank ^ 1}": {"Transport Type": "HCCS", "Transit Size(MB)": PT_LINK_MB,
                                                   "Transit Time(ms)": PT_LINK_MS, "Bandwidth(GB/s)": PT_LINK_GBPS,
                                                   "Op Name": k.name},
                 f"{local_rank}-{local_rank}": {"Transport Type": "LOCAL", "Transit Size(MB)": 0,
                                                "Transit Time(ms)": 0, "Bandwidth(GB/s)": 0, "Op Name": k.name}}
        content[f"step{k.step}"] = {"collective": {f"allreduce-top1@{PT_GROUP}": links,
                                                   f"allreduce-total@{PT_GROUP}": links}, "p2p": {}}
    (out / "communication_matrix.json").write_text(json.dumps(content))


def write_cluster(root: Path, ranks: int = 2) -> list[AscendPtRun]:
    """A cluster root: one ``*_ascend_pt`` directory per rank (rank 1 is 4 % slower)."""
    return [write_ascend_pt(root, r, slow=1.0 + 0.04 * r) for r in range(ranks)]
