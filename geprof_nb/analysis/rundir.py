"""Read a geprof run directory: ``info.json``, the hash dictionary and the raw
record chunks (``.npy``, loaded with ``allow_pickle=False``: nothing read from
disk can execute code).  A damaged chunk is skipped and listed in ``damaged``;
everything intact still loads.
"""

from __future__ import annotations

import json
import re
import warnings
from functools import cached_property
from pathlib import Path

import numpy as np

from ..prof import rawdata


class RunDirError(ValueError):
    """The path is not a readable run directory."""


def is_run_dir(path: Path) -> bool:
    return (path / rawdata.INFO_FILE).is_file()


_RUN_NAME = re.compile(r"PROF_(\d{6})_(\d{17})_\w+")


def newest_run(path: Path) -> Path | None:
    """The newest run directory directly under ``path``.

    Ordered by the creation time and sequence number in the ``PROF_<seq>_<time>_<tag>``
    name (wall-clock, even for virtual-clock runs), not by mtime, which any later
    write into an old run would change.
    """
    runs = [p for p in path.iterdir() if p.is_dir() and is_run_dir(p)] if path.is_dir() else []
    if not runs:
        return None

    def created(p: Path) -> tuple:
        m = _RUN_NAME.fullmatch(p.name)
        return (m.group(2), int(m.group(1))) if m else ("", 0)

    return max(runs, key=created)


class RunDir:
    """The raw content of one run directory."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        info_path = self.path / rawdata.INFO_FILE
        try:
            self.info: dict = json.loads(info_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise RunDirError(f"{self.path} is not a geprof run directory: {rawdata.INFO_FILE} is missing") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RunDirError(f"{info_path}: cannot be read as JSON ({exc})") from None
        if not isinstance(self.info, dict) or "geprof_raw_version" not in self.info:
            raise RunDirError(f"{info_path}: not a geprof run description (no 'geprof_raw_version' field)")
        self.damaged: list[str] = []

    @property
    def complete(self) -> bool:
        return self.info.get("status") == "complete"

    @property
    def options(self) -> dict:
        return self.info.get("options") or {}

    @property
    def device_ids(self) -> list[int]:
        ids = {int(k) for k in (self.info.get("devices") or {})}
        ids |= {int(p.name.split("_")[1]) for p in self.path.glob("device_*") if p.name.split("_")[1].isdigit()}
        return sorted(ids) or [0]

    def device_info(self, device_id: int = 0) -> dict:
        return (self.info.get("devices") or {}).get(str(device_id), {})

    @cached_property
    def hashes(self) -> dict[int, str]:
        """Hash id -> string (``MsprofGetHashId`` dictionary)."""
        out: dict[int, str] = {}
        path = self.path / rawdata.HASH_DICT_FILE
        if not path.exists():
            return out
        with open(path, encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                try:
                    entry = json.loads(line)
                    out[int(entry["id"])] = str(entry["s"])
                except (ValueError, KeyError, TypeError):
                    self.damaged.append(f"{path.name}:{lineno}")
        return out

    def load(self, kind: str, device_id: int = 0) -> np.ndarray:
        """All records of one kind (chunks concatenated in order; empty if none)."""
        spec = rawdata.RECORD_KINDS[kind]
        directory = self.path / spec.directory(device_id)
        parts = []
        for chunk in sorted(directory.glob(f"{kind}.*.npy")):
            try:
                arr = np.load(chunk, allow_pickle=False)
            except (OSError, ValueError, EOFError) as exc:
                self.damaged.append(str(chunk.relative_to(self.path)))
                warnings.warn(f"{chunk}: damaged chunk skipped ({exc})", stacklevel=2)
                continue
            if arr.dtype != spec.dtype:
                self.damaged.append(str(chunk.relative_to(self.path)))
                warnings.warn(f"{chunk}: unexpected record layout {arr.dtype}, skipped", stacklevel=2)
                continue
            parts.append(arr)
        if not parts:
            return np.zeros(0, spec.dtype)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def __repr__(self) -> str:
        return f"<RunDir {self.path.name} {self.info.get('status')}>"
