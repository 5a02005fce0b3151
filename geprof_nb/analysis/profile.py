"""``Profile``: one profiling run as pandas tables, built lazily and cached."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from . import aicpu, api, communication, host, memory, tables, tx
from .rundir import RunDir, RunDirError, is_run_dir, newest_run


class Profile:
    """The tables of one run directory (msprof column names; see :mod:`.tables` for dtypes)."""

    def __init__(self, run: RunDir, device_id: int = 0) -> None:
        self.run = run
        self.device_id = device_id

    # ----------------------------------------------------------------- identity
    @property
    def path(self) -> Path:
        return self.run.path

    @property
    def name(self) -> str:
        return self.run.path.name

    @property
    def info(self) -> dict:
        return self.run.info

    @property
    def options(self) -> dict:
        """The profilingOptions in force (non-default fields and ``output``)."""
        return self.run.options

    @property
    def device(self) -> dict:
        return self.run.device_info(self.device_id)

    @property
    def complete(self) -> bool:
        """False if the run was not finalised (crash, kill): tables hold what was flushed."""
        return self.run.complete

    # ------------------------------------------------------------------- tables
    @cached_property
    def _op_rows(self) -> tables.OpRows:
        return tables.op_rows(self.run, self.device_id)

    @property
    def op_summary(self) -> pd.DataFrame:
        """One row per executed op task, sorted by start time (msprof ``op_summary``)."""
        return self._op_rows.frame

    @cached_property
    def op_statistic(self) -> pd.DataFrame:
        """Per OP Type and Core Type totals, largest first (msprof ``op_statistic``)."""
        return tables.op_statistic(self.op_summary)

    @cached_property
    def step_trace(self) -> pd.DataFrame:
        """One row per iteration from the ProfilerTrace timestamps (msprof ``step_trace``)."""
        return tables.step_trace(self.run, self.device_id)

    @cached_property
    def task_time(self) -> pd.DataFrame:
        """Every executed device task, kernels and runtime tasks (msprof ``task_time``)."""
        return tables.task_time(self.run, self.device_id)

    @cached_property
    def api_statistic(self) -> pd.DataFrame:
        """Host API calls per level and name (msprof ``api_statistic``)."""
        return api.api_statistic(self.run)

    @cached_property
    def host_events(self) -> pd.DataFrame:
        """GE host profiler spans: InferShape, Tiling, AllocMemory, rtKernelLaunch, ... per node."""
        return host.host_events(self.run)

    @cached_property
    def msprof_tx(self) -> pd.DataFrame:
        """User markers and ranges (``ge.mstx``; msprof ``msprof_tx``)."""
        return tx.msprof_tx(self.run, self.device_id)

    @cached_property
    def communication_statistic(self) -> pd.DataFrame:
        """Per collective type: count and times (msprof ``communication_statistic``)."""
        return communication.communication_statistic(self.run, self.device_id, self._op_rows)

    @cached_property
    def hccl_tasks(self) -> pd.DataFrame:
        """Every HCCL sub-task (Notify_Wait, Memcpy, Reduce_Inline, ...) with size and bandwidth."""
        return communication.hccl_tasks(self.run, self.device_id, self._op_rows)

    @cached_property
    def communication_time(self) -> pd.DataFrame:
        """Per collective execution: elapse, transit, wait, synchronization, idle (msprof-analyze)."""
        return communication.communication_time(self.run, self.device_id, self._op_rows)

    @cached_property
    def aicpu(self) -> pd.DataFrame:
        """AI CPU kernel details (msprof ``aicpu``)."""
        return aicpu.aicpu(self.run, self.device_id)

    @cached_property
    def operator_memory(self) -> pd.DataFrame:
        """One row per tensor allocation of the static memory plan (torch_npu ``operator_memory.csv``)."""
        return memory.operator_memory(self.run, self.device_id)

    @cached_property
    def memory_record(self) -> pd.DataFrame:
        """Pool totals after every allocation and release (torch_npu ``memory_record.csv``)."""
        return memory.memory_record(self.run, self.device_id)

    @property
    def memory_peak(self) -> "memory.MemoryPeak | None":
        """The highest allocated total, when, and the tensor whose allocation reached it."""
        return memory.memory_peak(self.run, self.device_id)

    @property
    def dropped(self) -> dict[str, int]:
        """Records lost to full buffers or storage_limit aging, by kind (empty if none)."""
        out = dict(self.info.get("dropped") or {})
        for kind, n in ((self.info.get("aged_out") or {}).get("records") or {}).items():
            out[f"{kind} (aged out)"] = n
        return out

    @property
    def notes(self) -> list[str]:
        """What a reader should know about this run: incomplete, aged-out or dropped data, FP/BP points."""
        notes = []
        if not self.complete:
            notes.append("the run was not finalised (crash or kill?): tables hold what was flushed")
        if self.info.get("note"):
            notes.append(str(self.info["note"]))
        aged = self.info.get("aged_out") or {}
        if aged.get("chunks"):
            limit = self.options.get("storage_limit", "")
            recs = ", ".join(f"{n} {k}" for k, n in aged["records"].items())
            size = f"{aged['bytes'] / 1e6:.1f} MB" if aged["bytes"] >= 1e5 else f"{aged['bytes'] / 1e3:.1f} kB"
            notes.append(f"storage_limit {limit} reached: the {aged['chunks']} oldest chunks "
                         f"({size}: {recs} records) were deleted; early iterations are missing")
        for kind, n in (self.info.get("dropped") or {}).items():
            notes.append(f"{n} {kind} records were dropped (buffer full)")
        notes.extend(self.info.get("notes") or [])
        if self.run.damaged:
            notes.append(f"damaged files skipped: {', '.join(self.run.damaged)}")
        return notes

    @property
    def iteration_of_ops(self) -> pd.Series:
        """The Iteration ID of every op_summary row (aligned with its index)."""
        return pd.Series(self._op_rows.iteration, index=self.op_summary.index, name="Iteration ID")

    def ops(self, iteration: int | None = None) -> pd.DataFrame:
        """op_summary rows of one iteration (the last complete one if ``None``)."""
        its = self._op_rows.iteration
        if len(its) == 0:
            return self.op_summary
        if iteration is None:
            iteration = int(its.max())
        return self.op_summary[its == iteration]

    @property
    def iterations(self) -> np.ndarray:
        """Iteration IDs that have op data."""
        return np.unique(self._op_rows.iteration)

    def __repr__(self) -> str:
        state = "" if self.complete else " (incomplete)"
        return f"<geprof Profile {self.name}{state}: {len(self.op_summary)} op tasks, {len(self.step_trace)} iterations>"


def load(path: str | Path, device_id: int = 0) -> Profile:
    """Open a run directory, or the newest run inside an output directory."""
    p = Path(path).expanduser().resolve()
    if not p.exists():
        raise FileNotFoundError(f"{p} does not exist")
    if is_run_dir(p):
        return Profile(RunDir(p), device_id)
    newest = newest_run(p)
    if newest is None:
        raise RunDirError(f"{p} holds no geprof run directory (a PROF_* directory with info.json)")
    return Profile(RunDir(newest), device_id)
