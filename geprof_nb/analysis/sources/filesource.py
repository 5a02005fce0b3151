"""The base of the Sources read from files: they keep the exact ns their files printed, and say
what the reading of a file passed over.

A DataFrame holds absolute times as float µs, which at today's epoch resolve
only 0.25 µs; exporters ask :meth:`Source.times_ns` for the exact values.  A
file-based source answers from the decimal text it parsed (or the integers
a Parquet export stored) instead of rounding the floats.

A CSV's rows that do not match its header are skipped (:func:`.csvfiles.read_csv`), and rows holding
cells that cannot be (a negative duration, an end before its start) dropped (:mod:`.possible`); the
notes of the Profile name them, for every file of the source, read or not yet.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .csvfiles import CsvTable, Kinds, read_csv, typed_frame
from .possible import NO_RULES, Rules, possible_rows
from .source import TIMESTAMP_COLUMNS, Source


def exact_columns(kinds: Kinds) -> tuple[str, ...]:
    """The columns ``kinds`` reads as µs timestamps or integers (ids, counts): numbers a spreadsheet's
    exponent notation makes inexact."""
    return tuple(c for c, kind in kinds.items() if kind in ("ts", "int", "Int64"))


class FileSource(Source):
    """A Source whose tables come from files, with their timestamps' exact ns."""

    def __init__(self) -> None:
        self._times: dict[str, pd.DataFrame] = {}
        self._file_notes: dict[tuple[Path, ...], list[str]] = {}

    def _read(self, files: list[Path], kinds: Kinds, rules: Rules = NO_RULES) -> CsvTable:
        """:func:`.csvfiles.read_csv` of ``files`` without the rows holding cells that cannot be
        (:func:`.possible.possible_rows`), remembering what its reading passed over and dropped."""
        table = read_csv(files)
        notes = table.notes(exact_columns(kinds))
        table, dropped = possible_rows(table, rules)
        self._file_notes[tuple(files)] = notes + dropped
        return table

    def file_notes(self, tables: dict[tuple[Path, ...], tuple[Kinds, Rules]]) -> list[str]:
        """The notes of reading each of ``tables`` (files -> kinds of their columns and the rules of their
        cells), in order of reading; a file not read yet is read for them (its rows are not kept)."""
        for files, (kinds, rules) in tables.items():
            if files not in self._file_notes:
                self._read(list(files), kinds, rules)
        return [note for notes in self._file_notes.values() for note in notes]

    def _typed(self, name: str, table: CsvTable, kinds: Kinds, other: str = "auto",
               given: dict | None = None) -> pd.DataFrame:
        """Table ``name`` converted by :func:`.csvfiles.typed_frame`, remembering its exact times."""
        frame, times = typed_frame(table, kinds, other, given)
        self._times[name] = times
        return frame

    @staticmethod
    def with_device(frame: pd.DataFrame, value: object) -> pd.DataFrame:
        """torch_npu (and older CANN op_summary) leave Device_id out of some files; put it first as msprof has it."""
        if "Device_id" not in frame.columns:
            n = len(frame)
            frame.insert(0, "Device_id", pd.array([value] * n, dtype="str") if isinstance(value, str)
                         else np.full(n, value, np.int64))
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
