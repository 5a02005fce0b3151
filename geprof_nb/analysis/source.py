"""Where a Profile's tables come from.

A :class:`Source` gives a Profile its tables.  :class:`RunDirSource` builds
them from a geprof run directory's raw records; the importers (real msprof
``mindstudio_profiler_output``, torch_npu ``*_ascend_pt``, Parquet exports)
read them from files.  Tables a source cannot provide come back empty with
their columns, and the ones that follow from op_summary are derived here.
"""

from __future__ import annotations

import abc
from functools import cached_property
from pathlib import Path

import pandas as pd

from . import aicpu, api, breakdown, communication, host, memory, tables, tx
from . import columns as C
from .rundir import RunDir


def empty(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame(columns=columns)


class Source(abc.ABC):
    """The tables of one device of one profiling run."""

    device_id: int = 0

    @property
    @abc.abstractmethod
    def path(self) -> Path:
        """The directory the data was read from."""

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def info(self) -> dict:
        """Run description (options, devices, status...); what the format records of it."""
        return {}

    @property
    def options(self) -> dict:
        return self.info.get("options") or {}

    @property
    def device(self) -> dict:
        return (self.info.get("devices") or {}).get(str(self.device_id), {})

    @property
    def complete(self) -> bool:
        return True

    def notes(self) -> list[str]:
        return []

    def dropped(self) -> dict[str, int]:
        return {}

    # --------------------------------------------------------------- tables
    @abc.abstractmethod
    def op_rows(self) -> tables.OpRows:
        """op_summary with each row's iteration and exact start time."""

    def op_statistic(self) -> pd.DataFrame:
        return tables.op_statistic(self.op_rows().frame)

    def step_trace(self) -> pd.DataFrame:
        return empty(C.STEP_TRACE)

    def step_bounds(self) -> pd.DataFrame:
        """(step, begin, end) in ns of every iteration of the main model."""
        return breakdown.bounds_from_step_trace(self.step_trace())

    def task_time(self) -> pd.DataFrame:
        return empty(tables.TASK_TIME)

    def api_statistic(self) -> pd.DataFrame:
        return empty(api.API_STATISTIC)

    def host_events(self) -> pd.DataFrame:
        return empty(host.HOST_EVENTS)

    def msprof_tx(self) -> pd.DataFrame:
        return empty(tx.MSPROF_TX)

    def communication_statistic(self) -> pd.DataFrame:
        return communication.communication_statistic(None, self.device_id, self.op_rows())

    def hccl_tasks(self) -> pd.DataFrame:
        return empty(communication.HCCL_TASKS)

    def communication_time(self) -> pd.DataFrame:
        return empty(communication.COMMUNICATION_TIME)

    def aicpu(self) -> pd.DataFrame:
        return empty(aicpu.AICPU)

    def operator_memory(self) -> pd.DataFrame:
        return empty(memory.OPERATOR_MEMORY)

    def memory_record(self) -> pd.DataFrame:
        return empty(memory.MEMORY_RECORD)

    def memory_peak(self) -> memory.MemoryPeak | None:
        return None


class RunDirSource(Source):
    """A geprof run directory: every table, from the raw records."""

    def __init__(self, run: RunDir, device_id: int = 0) -> None:
        self.run = run
        self.device_id = device_id

    @property
    def path(self) -> Path:
        return self.run.path

    @property
    def info(self) -> dict:
        return self.run.info

    @property
    def options(self) -> dict:
        return self.run.options

    @property
    def device(self) -> dict:
        return self.run.device_info(self.device_id)

    @property
    def complete(self) -> bool:
        return self.run.complete

    def notes(self) -> list[str]:
        info = self.info
        notes = []
        if not self.complete:
            notes.append("the run was not finalised (crash or kill?): tables hold what was flushed")
        if info.get("note"):
            notes.append(str(info["note"]))
        aged = info.get("aged_out") or {}
        if aged.get("chunks"):
            limit = self.options.get("storage_limit", "")
            recs = ", ".join(f"{n} {k}" for k, n in aged["records"].items())
            size = f"{aged['bytes'] / 1e6:.1f} MB" if aged["bytes"] >= 1e5 else f"{aged['bytes'] / 1e3:.1f} kB"
            notes.append(f"storage_limit {limit} reached: the {aged['chunks']} oldest chunks "
                         f"({size}: {recs} records) were deleted; early iterations are missing")
        for kind, n in (info.get("dropped") or {}).items():
            notes.append(f"{n} {kind} records were dropped (buffer full)")
        notes.extend(info.get("notes") or [])
        if self.run.damaged:
            notes.append(f"damaged files skipped: {', '.join(self.run.damaged)}")
        return notes

    def dropped(self) -> dict[str, int]:
        out = dict(self.info.get("dropped") or {})
        for kind, n in ((self.info.get("aged_out") or {}).get("records") or {}).items():
            out[f"{kind} (aged out)"] = n
        return out

    @cached_property
    def _rows(self) -> tables.OpRows:
        return tables.op_rows(self.run, self.device_id)

    def op_rows(self) -> tables.OpRows:
        return self._rows

    def step_trace(self) -> pd.DataFrame:
        return tables.step_trace(self.run, self.device_id)

    def step_bounds(self) -> pd.DataFrame:
        return tables.step_bounds(self.run, self.device_id)

    def task_time(self) -> pd.DataFrame:
        return tables.task_time(self.run, self.device_id)

    def api_statistic(self) -> pd.DataFrame:
        return api.api_statistic(self.run)

    def host_events(self) -> pd.DataFrame:
        return host.host_events(self.run)

    def msprof_tx(self) -> pd.DataFrame:
        return tx.msprof_tx(self.run, self.device_id)

    def hccl_tasks(self) -> pd.DataFrame:
        return communication.hccl_tasks(self.run, self.device_id, self.op_rows())

    def communication_time(self) -> pd.DataFrame:
        return communication.communication_time(self.run, self.device_id, self.op_rows())

    def aicpu(self) -> pd.DataFrame:
        return aicpu.aicpu(self.run, self.device_id)

    def operator_memory(self) -> pd.DataFrame:
        return memory.operator_memory(self.run, self.device_id)

    def memory_record(self) -> pd.DataFrame:
        return memory.memory_record(self.run, self.device_id)

    def memory_peak(self) -> memory.MemoryPeak | None:
        return memory.memory_peak(self.run, self.device_id)
