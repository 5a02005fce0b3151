"""torch_npu output: a ``<worker>_<pid>_<timestamp>_ascend_pt`` directory.

``ASCEND_PROFILER_OUTPUT/kernel_details.csv`` is op_summary with eight
columns renamed and a ``Step Id`` in front (reference §5); the renames are
undone so the tables are msprof's.  ``step_trace_time.csv`` is torch_npu's own
step split (:meth:`AscendPtSource.step_breakdown_table`), ``communication.json``
the per-collective time split, ``communication_matrix.json`` the bytes and time per
link (there are no HCCL sub-tasks), ``trace_view.json`` gives the framework steps.
The rank is in the name of ``profiler_info_<rank>.json`` (msprof_analyze_inputs §2).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import ImportFormatError
from ...prof.json_text import excerpt
from ..files import present
from ..tables import api, breakdown, communication, memory, summary
from ..tables.columns import PURE_CORE_TASK_TYPES, is_other_core_column
from .csvfiles import CSV_FILE, CsvTable, Kinds, read_json
from .filesource import FileSource
from .msprof import (
    API_STATISTIC_KINDS,
    API_STATISTIC_RULES,
    DEVICE_ID,
    OP_STATISTIC_KINDS,
    OP_STATISTIC_RULES,
    OP_SUMMARY_KINDS,
    aic_metrics_of,
    chip_family,
    device_infos,
    start_times,
)
from .possible import Rules
from .trace_view import TRACE_FILE, TraceView, read_trace_view

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
#: kernel_details.csv name -> op_summary name (torch_npu renames the other way).
RENAMES = {"Name": "Op Name", "Type": "OP Type", "Accelerator Core": "Task Type",
           "Start Time(us)": "Task Start Time(us)", "Duration(us)": "Task Duration(us)",
           "Wait Time(us)": "Task Wait Time(us)", "Block Dim": "Block Num", "Mix Block Dim": "Mix Block Num"}
KERNEL_REQUIRED = ["Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)"]
STEP_COLUMNS = ("Step Id", "Step ID")
#: torch_npu's experimental_config._aic_metrics value -> the aic_metrics group.
AIC_METRICS = {"ACL_AICORE_PIPE_UTILIZATION": "PipeUtilization", "ACL_AICORE_ARITHMETIC_UTILIZATION":
               "ArithmeticUtilization", "ACL_AICORE_MEMORY_BANDWIDTH": "Memory", "ACL_AICORE_L0B_AND_WIDTH": "MemoryL0",
               "ACL_AICORE_MEMORY_UB": "MemoryUB", "ACL_AICORE_RESOURCE_CONFLICT_RATIO": "ResourceConflictRatio",
               "ACL_AICORE_L2_CACHE": "L2Cache", "ACL_AICORE_MEMORY_ACCESS": "MemoryAccess"}
OPERATOR_MEMORY_KINDS: Kinds = {"Name": "category", "Allocation Time(us)": "ts", "Release Time(us)": "ts",
                                "Active Release Time(us)": "ts", "Stream Ptr": "int", "Device Type": "category"}
MEMORY_RECORD_KINDS: Kinds = {"Component": "category", "Timestamp(us)": "ts", "Stream Ptr": "int",
                              "Device Type": "category"}
STEP_TRACE_TIME_KINDS: Kinds = {"Device_id": "int", "Step": "int"}
#: How kernel_details' own column names are read (before the renames): its start time is a timestamp.
KERNEL_KINDS: Kinds = {"Start Time(us)": "ts"}
#: A kernel is a task on the time line: it has a start and a duration, which is not negative (:mod:`.possible`).
KERNEL_RULES = Rules(required=("Start Time(us)", "Duration(us)"),
                     non_negative=("Duration(us)", "Wait Time(us)", "Step Id", "Step ID", "Device_id"))
_MEMORY_SIZES = ("Allocation Total Allocated(MB)", "Allocation Total Reserved(MB)", "Allocation Total Active(MB)",
                 "Release Total Allocated(MB)", "Release Total Reserved(MB)", "Release Total Active(MB)")
#: Cells of each CSV file that cannot be: the rows holding them are dropped, with a note.
CSV_RULES: dict[str, Rules] = {
    "kernel_details.csv": KERNEL_RULES,
    "step_trace_time.csv": Rules(non_negative=("Computing", "Communication(Not Overlapped)", "Overlapped",
                                               "Communication", "Free", "Stage", "Bubble",
                                               "Communication(Not Overlapped and Exclude Receive)", "Preparing")),
    "op_statistic.csv": OP_STATISTIC_RULES, "api_statistic.csv": API_STATISTIC_RULES,
    "operator_memory.csv": Rules(non_negative=("Size(KB)", "Duration(us)", "Active Duration(us)", *_MEMORY_SIZES),
                                 spans=(("Allocation Time(us)", "Release Time(us)"),
                                        ("Allocation Time(us)", "Active Release Time(us)"))),
    "memory_record.csv": Rules(non_negative=("Total Allocated(MB)", "Total Reserved(MB)", "Total Active(MB)")),
}
#: The CSV files of ASCEND_PROFILER_OUTPUT read here, with the kinds of their columns.
CSV_KINDS: dict[str, Kinds] = {"kernel_details.csv": KERNEL_KINDS, "step_trace_time.csv": STEP_TRACE_TIME_KINDS,
                               "op_statistic.csv": OP_STATISTIC_KINDS, "api_statistic.csv": API_STATISTIC_KINDS,
                               "operator_memory.csv": OPERATOR_MEMORY_KINDS, "memory_record.csv": MEMORY_RECORD_KINDS}
#: The memory files and the columns each needs.
MEMORY_FILES = {"memory_record.csv": ["Component", "Timestamp(us)", "Total Allocated(MB)"],
                "operator_memory.csv": ["Name", "Size(KB)", "Allocation Time(us)"]}
#: How torch_npu labels a collective's Accelerator Core, read as msprof's Task Type (reference §4.1).
COLLECTIVE_CORE = {"HCCL": "COMMUNICATION"}
#: How far (µs) a collective's start in communication.json may lie from its kernel's: the file prints it
#: as a float (0.25 µs apart at today's epoch) and rounded to 0.1 µs.
START_SLACK_US = 1.0
_RANK_FILE = re.compile(r"profiler_info_(\d+)\.json")
_NPU_DEVICE = re.compile(r"NPU:(\d+)")


def rank_of(directory: Path) -> int | None:
    """The rank in the name of the directory's ``profiler_info_<rank>.json`` (None without one)."""
    for path in directory.glob("profiler_info_*.json"):
        if m := _RANK_FILE.fullmatch(path.name):
            return int(m.group(1))
    return None


def is_ascend_pt(directory: Path) -> bool:
    """A torch_npu run directory, known by its content (its name need not end in ``_ascend_pt``)."""
    return (directory / OUTPUT_DIR).is_dir()


def run_timestamp(directory: Path) -> str:
    """The timestamp field of ``<worker>_<pid>_<timestamp>_ascend_pt`` (msprof-analyze's ``split('_')[-3]``);
    "" for a directory not named so."""
    parts = directory.name.split("_")
    return parts[-3] if len(parts) >= 4 and parts[-1] == "pt" and parts[-2] == "ascend" else ""


class AscendPtSource(FileSource):
    """The tables of one torch_npu ``*_ascend_pt`` directory."""

    def __init__(self, path: Path, device_id: int = 0, notes: list[str] | None = None) -> None:
        super().__init__()
        path = Path(path)
        if path.name == OUTPUT_DIR:
            path = path.parent
        self._path = path
        self.output = path / OUTPUT_DIR
        kernel_path = self.output / "kernel_details.csv"
        if not present(kernel_path, CSV_FILE):
            raise ImportFormatError(f"{kernel_path}: missing; a torch_npu {OUTPUT_DIR} directory needs "
                                    "kernel_details.csv (was the profile parsed? torch_npu writes it at the end)")
        self._notes = list(notes or [])
        self.rank = rank_of(path)
        self._kernels = self._read([kernel_path], KERNEL_KINDS, KERNEL_RULES)
        self._kernels.require(KERNEL_REQUIRED, "torch_npu kernel_details")
        if self._kernels.has("Device_id"):
            ids = np.unique(self._kernels.integers("Device_id", nullable=False, required=DEVICE_ID))
            self.device_id = int(ids[0]) if len(ids) else device_id
        else:
            trace = self._trace
            known = trace.device_id if trace is not None and trace.device_id is not None else self._memory_device()
            self.device_id = device_id if known is None else known
        self._profiler_info = self._json(f"profiler_info_{self.rank}.json" if self.rank is not None
                                         else "profiler_info.json")
        self._metadata = self._json("profiler_metadata.json")

    @property
    def path(self) -> Path:
        return self._path

    def _note(self, text: str) -> None:
        """Add a note once (a table read again says it again)."""
        if text not in self._notes:
            self._notes.append(text)

    def _memory_device(self) -> int | None:
        """The device the memory files name in every row (``Device Type`` ``NPU:<n>``), None if they do not:
        torch_npu's kernel_details has no Device_id, and its trace labels the device processes ``NPU``."""
        for name, required in MEMORY_FILES.items():
            table = self._csv(name, required)
            if table is None or not table.has("Device Type"):
                continue
            devices = {m.group(1) for d in np.unique(np.asarray(table.category("Device Type"), dtype=str))
                       if (m := _NPU_DEVICE.fullmatch(d))}
            if len(devices) == 1:
                return int(devices.pop())
        return None

    def _json(self, name: str) -> dict:
        """A metadata file's content ({} when absent; a damaged one is noted, not fatal)."""
        path = self._path / name
        try:
            if not present(path, "a JSON file"):
                return {}
            content = read_json(path)
        except ImportFormatError as exc:
            self._notes.append(f"{exc} (ignored)")
            return {}
        return content if isinstance(content, dict) else {}

    @cached_property
    def info(self) -> dict:
        config = _text_fields(_object(_object(self._profiler_info.get("config")).get("experimental_config")))
        metrics = AIC_METRICS.get(config.get("_aic_metrics", "")) or aic_metrics_of(self._header)
        facts = device_infos(self._path, self._notes).get(str(self.device_id), {})
        device = {"chip_family": chip_family(self._header), **facts}
        return {
            "format": "ascend_pt", "path": str(self._path), "rank": self.rank,
            "profiler_level": config.get("_profiler_level"),
            "profiler_info": self._profiler_info, "profiler_metadata": self._metadata,
            "devices": {str(self.device_id): device},
            "options": {"aic_metrics": metrics} if metrics and config.get("_profiler_level") != "Level0" else {},
        }

    def notes(self) -> list[str]:
        self.op_rows()  # step assignment adds its notes
        self.info  # noqa: B018 - and reading the device facts notes a damaged info.json.<n>
        self._collectives  # noqa: B018 - and so do collectives that match no kernel
        files = {(self.output / name,): (kinds, CSV_RULES[name]) for name, kinds in CSV_KINDS.items()
                 if present(self.output / name, CSV_FILE)}
        return [*self._notes, *self.file_notes(files)]

    @cached_property
    def _trace(self) -> TraceView | None:
        path = self.output / "trace_view.json"
        return read_trace_view(path) if present(path, TRACE_FILE) else None

    @property
    def _header(self) -> list[str]:
        """kernel_details' header with op_summary's names (Step Id dropped)."""
        return [RENAMES.get(c, c) for c in self._kernels.header if c not in STEP_COLUMNS]

    def _csv(self, name: str, required: list[str]) -> CsvTable | None:
        path = self.output / name
        if not present(path, CSV_FILE):
            return None
        table = self._read([path], CSV_KINDS[name], CSV_RULES[name])
        table.require(required, f"torch_npu {name}")
        return table

    # ------------------------------------------------------------------ tables
    @cached_property
    def _rows(self) -> summary.OpRows:
        k = self._kernels
        step_col = next((c for c in STEP_COLUMNS if k.has(c)), None)
        keep = [i for i, c in enumerate(k.header) if c not in STEP_COLUMNS]
        renamed = k.columns(keep, [RENAMES.get(k.header[i], k.header[i]) for i in keep])
        start_ns = start_times(k, "Start Time(us)")
        given = {"Task Start Time(us)": start_ns / 1000.0,
                 "Task Type": renamed.category("Task Type", labels=COLLECTIVE_CORE)}
        labelled = np.isin(np.asarray(renamed.category("Task Type")), list(COLLECTIVE_CORE))
        if labelled.any():
            self._notes.append(f"{int(labelled.sum())} kernels are collectives labelled Accelerator Core "
                               f"{'/'.join(COLLECTIVE_CORE)} (torch_npu's label): shown as Task Type COMMUNICATION, "
                               "msprof's label, and counted as communication")
        frame = other_core_missing(
            self.with_device(self._typed("op_summary", renamed, OP_SUMMARY_KINDS, given=given), self.device_id))
        if step_col is not None:
            steps = k.integers(step_col, nullable=True)
            iteration = steps.to_numpy(np.int64, na_value=0)
            if (outside := int(steps.isna().sum())):
                self._notes.append(f"{outside} kernels have no {step_col} (outside every step): iteration 0")
        elif self._trace is not None and not self._trace.steps.empty:
            iteration = self._trace.step_of(start_ns)
            self._notes.append("kernel_details has no Step Id: steps from trace_view.json's ProfilerStep spans")
        else:
            iteration = np.ones(len(frame), np.int64)
            self._notes.append("no Step Id and no ProfilerStep in trace_view.json: every kernel is in iteration 1")
        return summary.OpRows(frame, iteration, start_ns, np.full(len(frame), -1, np.int64))

    def op_rows(self) -> summary.OpRows:
        return self._rows

    def communication_rows(self) -> np.ndarray:
        """Collectives: kernels whose Task Type is COMMUNICATION (Accelerator Core ``HCCL`` in the file) and
        the kernels of communication.json's collectives (:func:`collective_kernels`), which find them
        where Accelerator Core is N/A (Level0)."""
        return self._collectives.copy()

    @cached_property
    def _collectives(self) -> np.ndarray:
        rows = self.op_rows()
        known = breakdown.communication_rows(rows)
        try:
            ct = self.communication_time()
        except ImportFormatError as exc:  # communication_time says it; the step split need not fail on it
            self._notes.append(f"{exc}: collectives are known by kernel_details' Accelerator Core only")
            return known
        if ct.empty:
            return known
        matched, unmatched = collective_kernels(rows, ct)
        if unmatched and self.task_level == "l0":
            self._notes.append(f"{unmatched} of the {len(ct)} collectives in communication.json match no "
                               "kernel_details row by name and time (or by start and duration); kernel_details has "
                               "no Accelerator Core (Level0), so their kernels, if any, count as computing, not "
                               "communication")
        return known | matched

    def step_bounds(self) -> pd.DataFrame:
        """Exact ns per step: from its ``ProfilerStep#<n>`` start (trace_view.json) to its end on the
        device, the later of the host span's end and the end of the step's last kernel (the device
        runs behind the host; msprof's Iteration End is a device time too); ``framework_begin``: the
        ProfilerStep start, from which step_breakdown's Preparing counts, as torch_npu's does."""
        if self._trace is None or self._trace.steps.empty:
            return pd.DataFrame(columns=["step", "begin", "end"])
        return profiler_step_bounds(self._trace.steps, self.op_rows())

    def step_breakdown_table(self) -> pd.DataFrame | None:
        """torch_npu's own ``step_trace_time.csv`` (None without it: then computed from the kernels)."""
        table = self._csv("step_trace_time.csv", ["Step", "Computing", "Communication(Not Overlapped)", "Free"])
        if table is None:
            return None
        frame = self.with_device(self._typed("step_breakdown", table, STEP_TRACE_TIME_KINDS, "float"), self.device_id)
        return frame[[c for c in breakdown.STEP_TRACE_TIME if c in frame.columns]
                     + [c for c in frame.columns if c not in breakdown.STEP_TRACE_TIME]]

    def op_statistic(self) -> pd.DataFrame:
        table = self._csv("op_statistic.csv", ["OP Type", "Core Type", "Count", "Total Time(us)"])
        if table is None:
            return super().op_statistic()
        return self.with_device(self._typed("op_statistic", table, OP_STATISTIC_KINDS), self.device_id)

    def api_statistic(self) -> pd.DataFrame:
        table = self._csv("api_statistic.csv", ["Level", "API Name", "Time(us)", "Count"])
        if table is None:
            return pd.DataFrame(columns=api.API_STATISTIC)
        return self.with_device(self._typed("api_statistic", table, API_STATISTIC_KINDS), "host")

    def operator_memory(self) -> pd.DataFrame:
        table = self._csv("operator_memory.csv", MEMORY_FILES["operator_memory.csv"])
        if table is None:
            return pd.DataFrame(columns=memory.OPERATOR_MEMORY)
        return self._typed("operator_memory", table, OPERATOR_MEMORY_KINDS, "float")

    def memory_record(self) -> pd.DataFrame:
        table = self._csv("memory_record.csv", MEMORY_FILES["memory_record.csv"])
        if table is None:
            return pd.DataFrame(columns=memory.MEMORY_RECORD)
        return self._typed("memory_record", table, MEMORY_RECORD_KINDS, "float")

    def communication_time(self) -> pd.DataFrame:
        """communication.json's "Communication Time Info" per collective and step, by start time (a collective
        with a negative time dropped, with a note)."""
        path = self.output / "communication.json"
        if not present(path, "a JSON file"):
            return pd.DataFrame(columns=communication.COMMUNICATION_TIME)
        rows, dropped = [], []
        for step, step_key, key, op in _ops_by_step(path):
            if key.startswith("Total"):
                continue
            t = op.get("Communication Time Info") if isinstance(op, dict) else None
            if not isinstance(t, dict):
                raise ImportFormatError(f"{path}: {step_key}/{key}: missing 'Communication Time Info'")
            name = key.rsplit("@", 1)[0]
            values = [_number(path, key, t, c) for c in communication.COMMUNICATION_TIME[3:]]
            negative = next((c for c, v in zip(communication.COMMUNICATION_TIME[3:], values) if v < 0), None)
            if negative is not None:  # a time or ratio below 0 cannot be: the collective is not read
                dropped.append(f"{step_key}/{key} ({negative!r} {t[negative]!r})")
                continue
            rows.append([name, name.rsplit("_", 3)[0], step] + values)
        if dropped:
            self._note(f"{path}: {len(dropped)} collectives dropped, whose times cannot be negative: "
                       f"{', '.join(dropped[:10])}{' ...' if len(dropped) > 10 else ''}; such a collective is not "
                       "read, so no table counts or sums it")
        frame = pd.DataFrame(rows, columns=communication.COMMUNICATION_TIME)
        frame["Iteration ID"] = frame["Iteration ID"].astype(np.int64)
        for c in communication.COMMUNICATION_TIME[3:]:
            frame[c] = frame[c].astype(np.float64)
        return frame.sort_values("Start Timestamp(us)", kind="stable").reset_index(drop=True)

    def communication_matrix(self) -> pd.DataFrame:
        """communication_matrix.json as it is (:data:`.communication.COMMUNICATION_MATRIX_LINKS`): its local
        ranks, transport names and units.  A cluster maps the ranks and sums the links
        (:func:`..cluster.cross_rank.recorded_link_totals`): one rank's file names its group's other ranks
        by local rank only."""
        path = self.output / "communication_matrix.json"
        if not present(path, "a JSON file"):
            return pd.DataFrame(columns=communication.COMMUNICATION_MATRIX_LINKS)
        rows, dropped = [], []
        for step, step_key, key, links in _ops_by_step(path):
            if not isinstance(links, dict):
                raise ImportFormatError(f"{path}: {step_key}/{key}: expected an object of links "
                                        "(\"<src rank>-<dst rank>\": {...})")
            name, group = key.rsplit("@", 1) if "@" in key else (key, "")
            for link, info in links.items():
                if not (re.fullmatch(r"\d{1,9}-\d{1,9}", link, re.ASCII) and isinstance(info, dict)):
                    raise ImportFormatError(f"{path}: {step_key}/{key}: link {_key(link)}: expected "
                                            "\"<src rank>-<dst rank>\" (ranks below 10**9) holding an object")
                src, _, dst = link.partition("-")
                transport = info.get("Transport Type", "")
                size, time = (_number(path, f"{key} {link}", info, c, "link")
                              for c in ("Transit Size(MB)", "Transit Time(ms)"))
                if size < 0 or time < 0:  # cannot be: the link is not read
                    dropped.append(f"{step_key}/{key} {link} ({size:g} MB, {time:g} ms)")
                    continue
                rows.append([step, name, group, int(src), int(dst), transport if isinstance(transport, str) else "",
                             size, time])
        if dropped:
            self._note(f"{path}: {len(dropped)} links dropped, whose transit size or time is negative: "
                       f"{', '.join(dropped[:10])}{' ...' if len(dropped) > 10 else ''}; such a link is not read, "
                       "so no table counts or sums it")
        frame = pd.DataFrame(rows, columns=communication.COMMUNICATION_MATRIX_LINKS)
        for c in ("Iteration ID", "Src Rank", "Dst Rank"):
            frame[c] = frame[c].astype(np.int64)
        for c in ("Transit Size(MB)", "Transit Time(ms)"):
            frame[c] = frame[c].astype(np.float64)
        return frame


def profiler_step_bounds(steps: pd.DataFrame, rows: summary.OpRows) -> pd.DataFrame:
    """Step bounds from the ``ProfilerStep#<n>`` spans ``steps`` (step, begin, end ns): each step ends at the later
    of its span's end and its last op's end (the device runs behind the host); ``framework_begin`` is the
    span's start, from which step_breakdown's Preparing counts, as torch_npu's does."""
    ends = rows.start_ns + np.rint(rows.frame["Task Duration(us)"].to_numpy() * 1000).astype(np.int64)
    last = pd.Series(ends).groupby(rows.iteration).max()
    steps = steps.copy()
    device_end = last.reindex(steps["step"].to_numpy(), fill_value=-1).to_numpy(np.int64)  # stays integer
    steps["end"] = np.maximum(steps["end"].to_numpy(np.int64), device_end)
    steps["framework_begin"] = steps["begin"]
    return steps


def collective_kernels(rows: summary.OpRows, ct: pd.DataFrame) -> tuple[np.ndarray, int]:
    """Which kernels are communication.json's collectives (``ct``: :meth:`AscendPtSource.communication_time`),
    and how many collectives match none.

    A collective is the kernel of its name (its key before ``@``) during which it starts, within
    :data:`START_SLACK_US`; of several, the one that starts nearest.  A kernel named otherwise (a
    geprof export names its kernels after the graph nodes) is it when both start and duration lie within
    :data:`START_SLACK_US` of the collective's.  The elapse time is not compared exactly: the file prints
    it with sub-ns digits (``79.08952021875`` ms for a kernel of 79089.520 µs).
    """
    f = rows.frame
    start = rows.start_ns / 1000.0
    dur = f["Task Duration(us)"].to_numpy(float)
    names = f["Op Name"].astype(str).to_numpy(object)
    by_name = pd.Series(np.arange(len(names))).groupby(names, sort=False).indices if len(names) else {}
    by_start = np.argsort(start, kind="stable")
    sorted_start = start[by_start]
    matched = np.zeros(len(names), bool)
    unmatched = 0
    for name, begin, elapse_ms in zip(ct["Op Name"].astype(str), ct["Start Timestamp(us)"].to_numpy(float),
                                      ct["Elapse Time(ms)"].to_numpy(float)):
        mine = by_name.get(name, np.zeros(0, np.int64))
        mine = mine[(start[mine] - START_SLACK_US <= begin) & (begin <= start[mine] + dur[mine] + START_SLACK_US)]
        if not len(mine):
            near = by_start[np.searchsorted(sorted_start, begin - START_SLACK_US, side="left"):
                            np.searchsorted(sorted_start, begin + START_SLACK_US, side="right")]
            mine = near[np.abs(dur[near] - elapse_ms * 1000) <= START_SLACK_US]
        if len(mine):
            matched[mine[np.argmin(np.abs(start[mine] - begin))]] = True
        else:
            unmatched += 1
    return matched, unmatched


def _ops_by_step(path: Path) -> Iterator[tuple[int, str, str, object]]:
    """``(step, step key, op key, op)`` of a communication.json / communication_matrix.json: an object of
    ``step<N>`` holding collective/p2p objects of ops, its layout checked as it is read."""
    content = read_json(path)
    if not isinstance(content, dict):
        raise ImportFormatError(f"{path}: expected an object of steps ({{\"step1\": {{\"collective\": ...}}}})")
    for step_key, kinds in content.items():
        m = re.fullmatch(r"step(\d{1,18})", step_key, re.ASCII)  # a step number an int64 holds
        if not m or not isinstance(kinds, dict):
            raise ImportFormatError(f"{path}: key {_key(step_key)}: expected step<N> (N below 10**18) holding "
                                    "collective/p2p ops")
        for kind, ops in kinds.items():
            if not isinstance(ops, dict | None):
                raise ImportFormatError(f"{path}: {step_key}/{kind}: expected an object of ops, got "
                                        f"{type(ops).__name__}")
            for key, op in (ops or {}).items():
                yield int(m.group(1)), step_key, key, op


def other_core_missing(frame: pd.DataFrame) -> pd.DataFrame:
    """kernel_details' ``0`` in the PMU cells of the core a pure AI Core / AI Vector Core task did not
    run on, as op_summary has them: missing (a mean over ``aiv_vec_ratio`` must not count cube tasks)."""
    if "Task Type" not in frame.columns:
        return frame
    task_type = frame["Task Type"].astype(str).to_numpy()
    for kind in PURE_CORE_TASK_TYPES:
        rows = task_type == kind
        for column in [c for c in frame.columns if is_other_core_column(kind, c)] if rows.any() else ():
            zero = (frame[column] == 0).to_numpy(dtype=bool, na_value=False)
            frame.loc[rows & zero, column] = np.nan
    return frame


def _object(value: object) -> dict:
    """``value`` if it is a JSON object, else ``{}`` (a metadata file is read from disk: any field may be damaged)."""
    return value if isinstance(value, dict) else {}


def _text_fields(value: dict) -> dict[str, str]:
    """The fields of an object that hold text (a damaged one of another type is as if absent)."""
    return {k: v for k, v in value.items() if isinstance(v, str)}


def _number(path: Path, key: str, info: dict, field: str, what: str = "'Communication Time Info'") -> float:
    """A number field of ``what`` (NaN when absent)."""
    value = info.get(field)
    if value is None:
        return np.nan
    number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            pass
    if number is None or np.isinf(number):
        shown = repr(value) if isinstance(value, (str, int, float)) and len(repr(value)) <= 60 else excerpt(value, 40)
        raise ImportFormatError(f"{path}: {key}: {what} field {field!r} is {shown}; expected a number (finite)")
    return number


def _key(key: str) -> str:
    """A JSON key as an error or a note quotes it: its repr, short."""
    return repr(key) if len(key) <= 60 else f"{key[:40]!r}...({len(key)} characters)"
