"""The base of the Sources read from files: they keep the exact ns their files printed.

A DataFrame holds absolute times as float µs, which at today's epoch resolve
only 0.25 µs; exporters ask :meth:`Source.times_ns` for the exact values.  A
file-based source answers from the decimal text it parsed (or the integers
a Parquet export stored) instead of rounding the floats.
"""

from __future__ import annotations

import pandas as pd

from ..source import TIMESTAMP_COLUMNS, Source
from .csvfiles import CsvTable, Kinds, typed_frame


class FileSource(Source):
    """A Source whose tables come from files, with their timestamps' exact ns."""

    def __init__(self) -> None:
        self._times: dict[str, pd.DataFrame] = {}

    def _typed(self, name: str, table: CsvTable, kinds: Kinds, other: str = "auto",
               given: dict | None = None) -> pd.DataFrame:
        """Table ``name`` converted by :func:`.csvfiles.typed_frame`, remembering its exact times."""
        frame, times = typed_frame(table, kinds, other, given)
        self._times[name] = times
        return frame

    def times_ns(self, table: str, frame: pd.DataFrame) -> pd.DataFrame:
        """Exact ns of ``frame``'s timestamp columns as parsed (rounded floats for a frame this
        source did not produce, e.g. one filtered afterwards)."""
        wanted = TIMESTAMP_COLUMNS.get(table, ())
        positions = [i for i, c in enumerate(frame.columns) if c in wanted]
        if table == "op_summary":
            rows = self.op_rows()
            if len(rows.frame) == len(frame) and [frame.columns[i] for i in positions] == ["Task Start Time(us)"]:
                return pd.DataFrame({"Task Start Time(us)": pd.array(rows.start_ns, dtype="Int64")}, index=frame.index)
        exact = self._times.get(table)
        if exact is not None and len(exact) == len(frame):
            keep = [i for i, c in enumerate(exact.columns) if c in wanted]
            if [exact.columns[i] for i in keep] == [frame.columns[i] for i in positions]:
                return exact.iloc[:, keep].set_axis(frame.index, axis=0)
        return super().times_ns(table, frame)
