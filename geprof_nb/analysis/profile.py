"""``Profile``: one profiling run as pandas tables, built lazily and cached."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from . import tables
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
