"""Real msprof output: the summaries in ``PROF_*/mindstudio_profiler_output/``.

File names are ``<kind>_<timestamp>.csv``, or ``<kind>_slice_<n>_<timestamp>.csv``
when msprof cut a summary every 1,000,000 rows (reference §4).  Exporting again
adds files with a newer timestamp; the newest complete set of each kind is read
and the others are listed in the notes.  The tables keep msprof's columns as
written (chip and aic_metrics decide them) with the dtypes of a geprof run
(:mod:`..tables`); each op_summary row's start time is kept exactly in ns.
Iterations come from step_trace the way msprof assigns tasks: a task of model
``m`` belongs to the first iteration of ``m`` that ends at or after its start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import ImportFormatError
from ...prof.json_text import excerpt
from ...prof.rawdata import RtTaskType
from ..files import what_is_there
from ..tables import api, breakdown, communication, summary, tx
from ..tables import columns as C
from ..tables.aicpu import AICPU
from .csvfiles import CsvTable, Kinds, read_json
from .filesource import FileSource
from .possible import Rules
from .trace_view import ns_of

#: What a Device_id cell must hold (the rows are split by device before anything else).
DEVICE_ID = "a device id (an integer) on every row"
OUTPUT_DIR = "mindstudio_profiler_output"
KINDS = ("op_summary", "op_statistic", "api_statistic", "task_time", "step_trace", "communication_statistic",
         "msprof_tx", "aicpu")
_FILE = re.compile(rf"({'|'.join(sorted(KINDS, key=len, reverse=True))})((?:_[0-9A-Za-z]+)*)\.csv")
_SLICE = re.compile(r"_slice_(\d+)")
#: msprof's timeline JSON: ``msprof_<stamp>.json``, sliced ``msprof_slice_<n>_<stamp>.json``.
_TIMELINE = re.compile(r"msprof_(?:slice_\d+_)?(\d+)\.json")
#: The CANN layer's event of a model execution (``item_id``: the model id).
MODEL_EXECUTE_EVENT = "Model@ModelExecute"

OP_SUMMARY_KINDS: Kinds = {
    "Device_id": "int", "Model ID": "int", "Task ID": "Int64", "Stream ID": "Int64", "Op Name": "category",
    "OP Type": "category", "OP State": "category", "Task Type": "category", "Task Start Time(us)": "ts",
    "Task Duration(us)": "float", "Task Wait Time(us)": "float", "Block Num": "Int64", "Mix Block Num": "Int64",
    "HF32 Eligible": "category", "Input Shapes": "shape", "Input Data Types": "shape", "Input Formats": "shape",
    "Output Shapes": "shape", "Output Data Types": "shape", "Output Formats": "shape", "Context ID": "Int64",
    "Model Name": "category", "Infer ID": "Int64",
}
OP_SUMMARY_REQUIRED = ["Op Name", "OP Type", "Task Type", "Task Start Time(us)", "Task Duration(us)"]
#: Names older CANN versions gave op_summary columns -> today's (reference §4.1).
OLDER_OP_SUMMARY_NAMES = {"Task Start Time": "Task Start Time(us)", "Block Dim": "Block Num",
                          "Mix Block Dim": "Mix Block Num"}
#: How op_summary's columns are read as the file names them (an older header's too).
OP_SUMMARY_FILE_KINDS: Kinds = {**OP_SUMMARY_KINDS, **{old: OP_SUMMARY_KINDS[new] for old, new in
                                                       OLDER_OP_SUMMARY_NAMES.items()}}
#: PMU columns without an ``aic_``/``aiv_`` prefix, as op_summary names them for an AI Core that runs
#: cube and vector work itself (910A, 310P; :func:`chip_family`), older CANN versions included.
_UNPREFIXED_PMU = ("total_cycles", "vec_ratio", "mac_ratio", "memory_bound")
OP_STATISTIC_KINDS: Kinds = {"Device_id": "int", "Model Name": "str", "OP Type": "str", "Core Type": "str",
                             "Count": "int"}
API_STATISTIC_KINDS: Kinds = {"Device_id": "str", "Level": "str", "API Name": "str", "Count": "int"}
TASK_TIME_KINDS: Kinds = {"Device_id": "int", "kernel_name": "category", "kernel_type": "category", "stream_id": "int",
                          "task_id": "int", "task_start(us)": "ts", "task_stop(us)": "ts"}
STEP_TRACE_KINDS: Kinds = {"Device_id": "int", "Iteration ID": "int", "Model ID": "int", "FP Start(us)": "ts",
                           "BP End(us)": "ts", "Iteration End(us)": "ts", "Reduce Start(us)": "ts"}
COMMUNICATION_STATISTIC_KINDS: Kinds = {"Device_id": "int", "OP Type": "str", "Count": "int"}
MSPROF_TX_KINDS: Kinds = {
    "Device_id": "int", "pid": "int", "tid": "int", "category": "int", "event_type": "str", "payload_type": "str",
    "payload_value": "str", "Start_time(us)": "ts", "End_time(us)": "ts", "message_type": "str", "message": "str",
    "domain": "str", "Device Start_time(us)": "ts", "Device End_time(us)": "ts", "mark_id": "Int64",
}
AICPU_KINDS: Kinds = {"Timestamp(us)": "ts", "Node": "str", "Stream ID": "Int64", "Task ID": "Int64"}
#: Columns other than these are numbers (float, NaN for N/A) unless they hold text.
_KINDS = {"op_summary": OP_SUMMARY_FILE_KINDS, "op_statistic": OP_STATISTIC_KINDS, "api_statistic": API_STATISTIC_KINDS,
          "task_time": TASK_TIME_KINDS, "step_trace": STEP_TRACE_KINDS,
          "communication_statistic": COMMUNICATION_STATISTIC_KINDS, "msprof_tx": MSPROF_TX_KINDS,
          "aicpu": AICPU_KINDS}
_REQUIRED = {
    "op_statistic": ["OP Type", "Core Type", "Count", "Total Time(us)"],
    "api_statistic": ["Level", "API Name", "Time(us)", "Count"],
    "task_time": ["kernel_name", "kernel_type", "task_time(us)", "task_start(us)"],
    "step_trace": ["Iteration ID", "Iteration End(us)", "Iteration Time(us)", "Model ID"],
    "communication_statistic": ["OP Type", "Count", "Total Time(us)"],
    "msprof_tx": ["Start_time(us)", "End_time(us)", "message"],
    "aicpu": ["Timestamp(us)", "Node"],
}


#: Cells of each summary that cannot be (:mod:`.possible`): the rows holding them are dropped, with a note.
_STATISTIC_RULES = Rules(non_negative=("Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)", "Max Time(us)"))
#: An op_summary row is a task on the time line: it has a start and a duration, which is not negative.
OP_SUMMARY_RULES = Rules(required=("Task Start Time(us)", "Task Start Time", "Task Duration(us)"),
                         non_negative=("Task Duration(us)", "Task Wait Time(us)", "Device_id"))
API_STATISTIC_RULES = Rules(non_negative=("Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)"))
_RULES = {
    "op_summary": OP_SUMMARY_RULES, "op_statistic": _STATISTIC_RULES, "api_statistic": API_STATISTIC_RULES,
    "task_time": Rules(required=("task_start(us)",), non_negative=("task_time(us)",),
                       spans=(("task_start(us)", "task_stop(us)"),)),
    "step_trace": Rules(non_negative=("Iteration Time(us)", "FP to BP Time(us)", "Reduce Duration(us)"),
                        spans=(("FP Start(us)", "BP End(us)"),)),
    "communication_statistic": _STATISTIC_RULES,
    "msprof_tx": Rules(spans=(("Start_time(us)", "End_time(us)"), ("Device Start_time(us)", "Device End_time(us)"))),
    "aicpu": Rules(non_negative=("Compute_time(us)", "Memcpy_time(us)", "Task_time(us)", "Dispatch_time(us)",
                                 "Total_time(us)")),
}
#: op_statistic's rules, for torch_npu's file of the same layout.
OP_STATISTIC_RULES = _STATISTIC_RULES


@dataclass(frozen=True)
class FileSet:
    """The file(s) holding one export of one summary kind: one file, or its slices in order."""

    kind: str
    stamp: tuple[int, ...]  # the numbers in the name after the kind (the export timestamp last)
    files: tuple[Path, ...]


def find_sets(directory: Path, kinds: tuple[str, ...] = KINDS) -> tuple[dict[str, FileSet], list[str]]:
    """The newest complete file set of each summary kind in ``directory``, and notes on what was passed over.

    Slices of one export share the name apart from ``_slice_<n>``; a set whose slices do not
    run 0, 1, 2, ... is incomplete and skipped.
    """
    groups: dict[tuple[str, str], dict[int, Path]] = {}
    notes: list[str] = []
    for path in sorted(directory.glob("*.csv")):
        m = _FILE.fullmatch(path.name)
        if not m or m.group(1) not in kinds:
            continue
        if (problem := what_is_there(path)) is not None:  # named like a summary, but no file to read
            notes.append(f"{path}: {problem}; skipped (a summary is a CSV file)")
            continue
        s = _SLICE.search(m.group(2))
        key = _SLICE.sub("", m.group(2)) if s else m.group(2)
        slot = groups.setdefault((m.group(1), key), {})
        slot[int(s.group(1)) if s else -1] = path
    found: dict[str, FileSet] = {}
    by_kind: dict[str, list[FileSet]] = {}
    for (kind, key), slot in groups.items():
        stamp = tuple(int(t) for t in re.findall(r"\d+", key))
        if -1 in slot and len(slot) > 1:  # a whole file and slices under one name: take the whole file
            slot = {-1: slot[-1]}
        order = sorted(slot)
        if order != [-1] and order != list(range(len(order))):
            missing = ", ".join(f"slice_{i}" for i in range(order[-1]) if i not in slot)
            notes.append(f"{kind}: slices {', '.join(slot[i].name for i in order)} are incomplete ({missing} "
                         "missing: msprof numbers the slices of one export from slice_0 on); skipped")
            continue
        by_kind.setdefault(kind, []).append(FileSet(kind, stamp, tuple(slot[i] for i in order)))
    for kind, sets in by_kind.items():
        sets.sort(key=lambda s: s.stamp)
        found[kind] = sets[-1]
        if len(sets) > 1:
            older = ", ".join(f.name for s in sets[:-1] for f in s.files)
            notes.append(f"{kind}: {len(sets)} exports found; read the newest ({sets[-1].files[0].name}), "
                         f"ignored {older}")
    return found, notes


def device_infos(root: Path, notes: list[str] | None = None) -> dict[str, dict]:
    """Device facts from msprof's ``device_<n>/info.json.<n>`` files of the ``PROF_*`` directory ``root``
    (or of the ``PROF_*`` directories in it, as in an ``*_ascend_pt`` directory): cores, frequency.

    The facts are optional (the tables do not need them), so a damaged file is skipped, and
    said in ``notes`` when given: nothing read from disk is dropped silently."""
    out: dict[str, dict] = {}
    paths = sorted([*root.glob("device_*/info.json.*"), *root.glob("PROF_*/device_*/info.json.*")])
    for path in paths:
        if not re.fullmatch(r"info\.json\.\d+", path.name):
            continue
        try:
            content = read_json(path)
        except ImportFormatError as exc:
            if notes is not None:
                notes.append(f"{exc}; the device facts it holds (cores, frequencies) are unknown")
            continue
        devices = content.get("DeviceInfo") if isinstance(content, dict) else None
        if not isinstance(devices, list):
            if notes is not None and devices is not None:
                notes.append(f"{path}: 'DeviceInfo' is {excerpt(devices, 40)}, not a list of devices; the device facts "
                             "it holds (cores, frequencies) are unknown")
            continue
        for dev in devices:
            if not isinstance(dev, dict):
                continue
            dev_id = dev.get("id", path.name.rsplit(".", 1)[1])
            if isinstance(dev_id, bool) or not isinstance(dev_id, (int, str)) or not str(dev_id).isascii() \
                    or not str(dev_id).isdigit() or len(str(dev_id)) > 9:
                if notes is not None:
                    notes.append(f"{path}: a DeviceInfo entry's id {excerpt(dev_id, 40)} is no device id; the device "
                                 "facts it holds (cores, frequencies) are unknown")
                continue
            facts = {}
            for key in ("ai_core_num", "aic_frequency", "aiv_num", "hwts_frequency"):
                value = _fact(dev.get(key))
                if value is not None:
                    facts[key] = value
            out.setdefault(str(int(dev_id)), {}).update(facts)
    return out


def _fact(value: object) -> int | None:
    """A device count or frequency of msprof's info.json (a number or its text), None unless it is a
    whole number the tables can take (0 .. 2**31 - 1, as the run description's checks)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value) if not isinstance(value, int) else value
    except ValueError:
        return None
    if not 0 <= number < 2**31:  # NaN and infinity too
        return None
    return int(number)


def chip_family(header: list[str]) -> str:
    """``A2`` for the Stars chips' op_summary (910B: Mix Block Num, ``aic_``/``aiv_`` PMU columns), else ``910A``."""
    return "A2" if "Mix Block Num" in header or any(c.startswith(("aic_", "aiv_")) for c in header) else "910A"


def aic_metrics_of(header: list[str]) -> str | None:
    """The aic_metrics group whose PMU columns op_summary carries (None if none matches)."""
    family = chip_family(header)
    present = set(header)
    for group in C.PMU_GROUPS:
        cols = C.pmu_columns(group, family)
        if cols and set(cols) <= present:
            return group
    return None


def iterations_from_step_trace(model_id: np.ndarray, start_ns: np.ndarray, step: pd.DataFrame,
                               ) -> tuple[np.ndarray, int]:
    """Iteration of each row by msprof's rule (first iteration of the row's model ending at or after
    its start; rows of a model without step data use the model with most iterations) and the number
    of rows that start after the last iteration end (given the last iteration)."""
    out = np.ones(len(start_ns), np.int64)
    if step.empty:
        return out, 0
    models, counts = np.unique(step["model"].to_numpy(), return_counts=True)
    main = models[np.argmax(counts)]
    row_model = np.where(np.isin(model_id, models), model_id, main)
    late = 0
    for m in models:
        mine = row_model == m
        s = step[step["model"] == m].sort_values("end", kind="stable")
        ends = s["end"].to_numpy(np.int64)
        pos = np.searchsorted(ends, start_ns[mine], side="left")
        late += int((pos >= len(ends)).sum())
        out[mine] = s["iteration"].to_numpy(np.int64)[np.minimum(pos, len(ends) - 1)]
    return out, late


def window_step_bounds(windows: pd.DataFrame, executions: dict[int, np.ndarray]) -> pd.DataFrame:
    """Step bounds from step_trace's windows (model, iteration, begin, end ns) of the model with the most
    iterations (the lowest id among equals), and ``framework_begin``: the last of that model's ModelExecute calls
    (``executions``: model id -> begin ns) that began before the step ended (-1: none known)."""
    if windows.empty:
        return pd.DataFrame(columns=["step", "begin", "end"])
    models, counts = np.unique(windows["model"], return_counts=True)
    model = models[np.argmax(counts)]
    main = windows[windows["model"] == model].sort_values("iteration", kind="stable")
    end = main["end"].to_numpy(np.int64)
    calls = np.sort(executions.get(int(model), np.zeros(0, np.int64)))
    at = np.searchsorted(calls, end, side="left") - 1  # the last call that began before the step ended
    framework = np.append(calls, -1)[np.where(at >= 0, at, len(calls))]  # -1: no call known
    return pd.DataFrame({"step": main["iteration"].to_numpy(np.int64), "begin": main["begin"].to_numpy(np.int64),
                         "end": end, "framework_begin": framework, "model": np.full(len(main), model, np.int64)})


def start_times(table: CsvTable, column: str) -> np.ndarray:
    """Exact ns of a start time column that has a value on every row (its file's :class:`.possible.Rules`
    drop the rows without one)."""
    ns, valid = table.ns(column)
    if not valid.all():
        raise table.bad_value(table.position(column), int(np.argmin(valid)),
                              "a start time in microseconds on every row")
    return ns


class MsprofSource(FileSource):
    """The summaries of a real msprof run (``PROF_*`` or its ``mindstudio_profiler_output``)."""

    def __init__(self, path: Path, device_id: int = 0, notes: list[str] | None = None) -> None:
        super().__init__()
        path = Path(path)
        self.output = path / OUTPUT_DIR if (path / OUTPUT_DIR).is_dir() else path
        self._path = path
        self.sets, found_notes = find_sets(self.output)
        self._notes = [*(notes or []), *found_notes]
        if "op_summary" not in self.sets:
            skipped = "; ".join(n.removesuffix("; skipped") for n in found_notes if n.startswith("op_summary: slices"))
            raise ImportFormatError(f"{self.output}: {skipped}; no complete op_summary to import" if skipped else
                                    f"{self.output}: no op_summary_*.csv (msprof writes it for every run with "
                                    "task_time on); nothing to import")
        self._summary = self._current_names(self._read(list(self.sets["op_summary"].files), OP_SUMMARY_FILE_KINDS,
                                                       OP_SUMMARY_RULES))
        self._summary.require(OP_SUMMARY_REQUIRED, "msprof op_summary")
        if self._summary.has("Device_id"):
            devices = self._summary.integers("Device_id", nullable=False, required=DEVICE_ID)
        else:
            devices = np.full(len(self._summary), device_id, np.int64)
            self._notes.append(f"{self._summary.files[0]}: no Device_id column (an older CANN op_summary): its rows "
                               f"are read as device {device_id}")
        present = sorted({int(d) for d in np.unique(devices)})
        if present and device_id not in present:
            if len(present) > 1:
                raise ImportFormatError(f"{self._summary.files[0]}: no rows of device {device_id}; the data has "
                                        f"devices {present}: load(path, device_id=...) one of them")
            self._notes.append(f"device {device_id} requested; the data holds device {present[0]} only")
            device_id = present[0]
        elif len(present) > 1:
            self._notes.append(f"the data holds devices {present}; this Profile shows device {device_id}")
        self.device_id = device_id
        self._mine = devices == device_id
        prof_dir = self.output.parent if self._path == self.output else self._path
        self._devices = device_infos(prof_dir, self._notes) if prof_dir.name.startswith("PROF_") else {}

    @property
    def path(self) -> Path:
        return self._path

    def _current_names(self, table: CsvTable) -> CsvTable:
        """op_summary with today's column names where an older CANN version wrote other ones, said in the notes."""
        renamed = {old: new for old, new in OLDER_OP_SUMMARY_NAMES.items() if table.has(old) and not table.has(new)}
        if not renamed:
            return table
        header = [renamed.get(c, c) for c in table.header]
        pmu = [c for c in _UNPREFIXED_PMU if c in header]
        self._notes.append(
            f"{table.files[0]}: an older CANN op_summary header: read "
            + ", ".join(f"{old!r} as {new!r}" for old, new in renamed.items())
            + (f"; its PMU columns ({', '.join(pmu)}, ...) have no aic_/aiv_ prefix: the names msprof still gives "
               "them for an AI Core that runs cube and vector work itself (910A, 310P), read as that chip family's"
               if pmu else ""))
        return table.columns(list(range(len(header))), header)

    @cached_property
    def info(self) -> dict:
        header = self._summary.header
        family = chip_family(header)
        device = {"chip_family": family, **self._devices.get(str(self.device_id), {})}
        metrics = aic_metrics_of(header)
        return {
            "format": "msprof", "path": str(self._path),
            "files": {k: [f.name for f in s.files] for k, s in sorted(self.sets.items())},
            "devices": {str(self.device_id): device},
            "options": {"aic_metrics": metrics} if metrics else {},
        }

    def notes(self) -> list[str]:
        self.op_rows()  # iteration assignment adds its notes
        files = {fs.files: (_KINDS[kind], _RULES[kind]) for kind, fs in sorted(self.sets.items())}
        return [*self._notes, *self.file_notes(files)]

    # ------------------------------------------------------------------ tables
    def _table(self, kind: str) -> CsvTable | None:
        fs = self.sets.get(kind)
        if fs is None:
            return None
        table = self._read(list(fs.files), _KINDS[kind], _RULES[kind])
        table.require(_REQUIRED[kind], f"msprof {kind}")
        return table

    def _frame(self, kind: str, empty: list[str]) -> pd.DataFrame:
        """A summary as typed columns, this device's rows only (api_statistic and msprof_tx are host data)."""
        table = self._table(kind)
        if table is None:
            return pd.DataFrame(columns=empty)
        if table.has("Device_id") and kind not in ("api_statistic", "msprof_tx"):
            devices = table.integers("Device_id", nullable=False, required=DEVICE_ID)
            table = table.select(devices == self.device_id)
        return self._typed(kind, table, _KINDS[kind])

    @cached_property
    def _rows(self) -> summary.OpRows:
        table = self._summary.select(self._mine)
        start_ns = start_times(table, "Task Start Time(us)")
        frame = self.with_device(self._typed("op_summary", table, OP_SUMMARY_KINDS,
                                             given={"Task Start Time(us)": start_ns / 1000.0}), self.device_id)
        model = frame["Model ID"].to_numpy(np.int64, na_value=-1) if "Model ID" in frame else np.zeros(len(frame),
                                                                                                   np.int64)
        iteration, late = iterations_from_step_trace(model, start_ns, self._step_windows)
        if late:
            self._notes.append(f"{late} op_summary rows start after the last step_trace iteration end; "
                               "they are counted in the last iteration")
        if self._step_windows.empty:
            self._notes.append("no step_trace: every op_summary row is in iteration 1")
        return summary.OpRows(frame, iteration, start_ns, np.full(len(frame), -1, np.int64))

    def op_rows(self) -> summary.OpRows:
        return self._rows

    @cached_property
    def _step(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(step_trace frame, exact windows: model, iteration, begin, end ns) of this device."""
        table = self._table("step_trace")
        windows = pd.DataFrame({"model": np.zeros(0, np.int64), "iteration": np.zeros(0, np.int64),
                                "begin": np.zeros(0, np.int64), "end": np.zeros(0, np.int64)})
        if table is None:
            return pd.DataFrame(columns=C.STEP_TRACE), windows
        if table.has("Device_id"):
            devices = table.integers("Device_id", nullable=False, required=DEVICE_ID)
            table = table.select(devices == self.device_id)
        frame = self._typed("step_trace", table, STEP_TRACE_KINDS)
        end, has_end = table.ns("Iteration End(us)")
        length, has_length = table.ns("Iteration Time(us)")
        keep = has_end
        windows = pd.DataFrame({
            "model": table.integers("Model ID", nullable=False, required="a model id on every row")[keep],
            "iteration": table.integers("Iteration ID", nullable=False,
                                        required="an iteration id on every row")[keep],
            "begin": np.where(has_length, end - length, end)[keep], "end": end[keep]})
        return frame, windows

    @cached_property
    def _step_windows(self) -> pd.DataFrame:
        """The step windows op rows are assigned by; a damaged step_trace reads as an absent one here
        (with a note naming it), since op_summary and the tables built on it do not need it;
        :meth:`step_trace` raises its error."""
        try:
            return self._step[1]
        except ImportFormatError as exc:
            self._notes.append(f"{exc} (read as absent: op_summary and the tables built on it do not need it)")
            return pd.DataFrame({"model": np.zeros(0, np.int64), "iteration": np.zeros(0, np.int64),
                                 "begin": np.zeros(0, np.int64), "end": np.zeros(0, np.int64)})

    def step_trace(self) -> pd.DataFrame:
        return self._step[0]

    def step_bounds(self) -> pd.DataFrame:
        """Exact (step, begin, end) ns of the model with the most iterations (begin = end - Iteration Time),
        the lowest id among equals, and that ``model``."""
        return window_step_bounds(self._step_windows, self._model_executions)

    @cached_property
    def _model_executions(self) -> dict[int, np.ndarray]:
        """Model id -> begin ns of its ModelExecute calls, from the newest timeline JSON export in the
        directory (the CANN layer's ``Model@ModelExecute`` events); {} without one.  step_breakdown's
        Preparing counts from the call that ran a step, as for a run directory."""
        exports: dict[int, list[Path]] = {}
        for path in self.output.glob("msprof_*.json"):
            m = _TIMELINE.fullmatch(path.name)
            if m:
                exports.setdefault(int(m.group(1)), []).append(path)
        calls: dict[int, list[int]] = {}
        for path in sorted(exports[max(exports)]) if exports else ():
            events = read_json(path, exact_floats=True)  # a ts as a number: its ns exactly, or None (ns_of)
            if not isinstance(events, list):
                self._notes.append(f"{path.name}: not a list of trace events; ModelExecute calls not read")
                continue
            for e in events:
                if not isinstance(e, dict) or e.get("name") != MODEL_EXECUTE_EVENT or e.get("ph") != "X":
                    continue
                begin, args = ns_of(e.get("ts")), e.get("args")
                item = args.get("item_id") if isinstance(args, dict) else None
                if begin is not None and isinstance(item, (int, str)) and str(item).isdigit():
                    calls.setdefault(int(item), []).append(begin)
        return {model: np.asarray(begins, np.int64) for model, begins in calls.items()}

    def communication_rows(self) -> np.ndarray:
        """Collectives by op_summary's Task Type or, where that is N/A (task_time level 0), by task_time's
        kernel_type: a row is a collective when task_time has an HCCL task with the same stream id, task id
        and start (exact ns), what the two tables both say of a task; a row whose Stream ID and Task ID
        are N/A (how op_summary shows a collective) by the start alone."""
        return self._collectives.copy()

    @cached_property
    def _collectives(self) -> np.ndarray:
        rows = self.op_rows()
        known = breakdown.communication_rows(rows)
        tasks = self._table("task_time")
        f = rows.frame
        if tasks is None or not (tasks.has("stream_id") and tasks.has("task_id")) or \
                not {"Stream ID", "Task ID"} <= set(f.columns):
            return known
        if tasks.has("Device_id"):
            tasks = tasks.select(tasks.integers("Device_id", nullable=False, required=DEVICE_ID) == self.device_id)
        tasks = tasks.select(np.asarray(tasks.category("kernel_type")) == RtTaskType.HCCL.name)

        def ids(values) -> np.ndarray:  # -1 for N/A
            return pd.array(values, dtype="Int64").to_numpy(np.int64, na_value=-1)

        hccl_start = start_times(tasks, "task_start(us)")
        hccl = pd.MultiIndex.from_arrays([ids(tasks.integers("stream_id", nullable=True)),
                                          ids(tasks.integers("task_id", nullable=True)), hccl_start])
        stream, task = ids(f["Stream ID"]), ids(f["Task ID"])
        start = rows.start_ns.astype(np.int64)
        ops = pd.MultiIndex.from_arrays([stream, task, start])
        by_ids = ops.isin(hccl) & (stream >= 0) & (task >= 0)
        return known | by_ids | ((stream < 0) & (task < 0) & np.isin(start, hccl_start))

    def op_statistic(self) -> pd.DataFrame:
        if "op_statistic" not in self.sets:
            return super().op_statistic()
        return self._frame("op_statistic", C.OP_STATISTIC)

    def api_statistic(self) -> pd.DataFrame:
        return self._frame("api_statistic", api.API_STATISTIC)

    def task_time(self) -> pd.DataFrame:
        return self._frame("task_time", summary.TASK_TIME)

    def communication_statistic(self) -> pd.DataFrame:
        if "communication_statistic" not in self.sets:
            return super().communication_statistic()
        return self._frame("communication_statistic", communication.COMMUNICATION_STATISTIC)

    def msprof_tx(self) -> pd.DataFrame:
        return self._frame("msprof_tx", tx.MSPROF_TX)

    def aicpu(self) -> pd.DataFrame:
        return self._frame("aicpu", AICPU)
