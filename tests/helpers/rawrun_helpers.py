"""Write a run directory by hand: info.json, hash dictionary and raw record chunks.

For analysis tests that need exact, known raw data rather than a simulated run.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from geprof_nb.prof import rawdata

INFO = {"geprof_raw_version": 1, "status": "complete",
        "devices": {"0": {"chip_family": "A2", "aic_frequency": 1800, "ai_core_num": 24, "aiv_num": 48}},
        "options": {}}


def write_run(path: Path, records: dict[str, np.ndarray], hashes: dict[int, str], device_id: int = 0) -> Path:
    """A complete run at ``path`` holding ``records`` (kind -> records of ``rawdata.RECORD_KINDS[kind].dtype``)."""
    path.mkdir(parents=True)
    (path / rawdata.INFO_FILE).write_text(json.dumps(INFO), encoding="utf-8")
    with open(path / rawdata.HASH_DICT_FILE, "w", encoding="utf-8") as f:
        for hid, s in hashes.items():
            f.write(json.dumps({"id": str(hid), "s": s}) + "\n")
    for kind, rec in records.items():
        spec = rawdata.RECORD_KINDS[kind]
        directory = path / spec.directory(device_id)
        directory.mkdir(parents=True, exist_ok=True)
        np.save(directory / rawdata.chunk_name(kind, 0), np.asarray(rec, spec.dtype), allow_pickle=False)
    return path


def records(kind: str, rows: list[dict]) -> np.ndarray:
    """Records of ``kind`` from dicts of field values (missing fields are 0)."""
    out = np.zeros(len(rows), rawdata.RECORD_KINDS[kind].dtype)
    for i, row in enumerate(rows):
        for k, v in row.items():
            out[i][k] = v
    return out


class Hashes:
    """Hash ids for strings, collected for ``hash_dict.jsonl``."""

    def __init__(self) -> None:
        self.table: dict[int, str] = {}
        self._ids: dict[str, int] = {}

    def __call__(self, s: str) -> int:
        if s not in self._ids:
            self._ids[s] = 1000 + len(self._ids)
            self.table[self._ids[s]] = s
        return self._ids[s]
