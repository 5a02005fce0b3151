"""A run's ``info.json``: what the library records about a run (status, devices, PMU events, switch
windows, record counts, notes), as it holds it and as it is on disk.

The file is replaced atomically (a temporary file, then a rename).  A failed write keeps the last
complete info.json and is noted; only the first write, when the run opens, raises: profiling must
never stop the job it profiles because its own files cannot be written.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

import orjson

from . import rawdata

#: info.json is indented for people reading it; keys that are not strings are written as strings.
INFO_JSON_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS
#: What a ``write_failed`` count counts, if not records.
UNITS = {rawdata.HASH_DICT_KIND: "names", rawdata.RANKS_KIND: "(their run directories)"}
#: Keys only the library writes (:meth:`RunInfo.set` refuses them).
LIBRARY_KEYS = ("status", "run", "options", "records", "switch_history", "geprof_raw_version")


def remove(path: str | os.PathLike) -> None:
    """Delete a file, if it is there."""
    with contextlib.suppress(OSError):  # a file already gone included
        os.unlink(path)


class RunInfo:
    """One run's metadata (``content``, info.json's dict) and whether the file on disk is up to date.

    Every method but :meth:`replace` expects the caller to hold the library's lock (``lock``), under
    which info.json is dumped.
    """

    def __init__(self, content: dict, lock: threading.RLock) -> None:
        self.content = content
        self._lock = lock
        #: One info.json write at a time: the writer thread's and a direct :meth:`write` share the temporary file.
        self._replacing = threading.Lock()
        #: Metadata set since info.json was last written: written before the next chunk and at finalize
        #: (a step's metadata arrives in a dozen calls; each write is an open, a dump and a rename).
        self.dirty = False
        #: False once a write of info.json failed, until one succeeds: the file is older than ``content``.
        self.on_disk = True
        self._written = b""  # what the last write that succeeded wrote
        #: Why the first write into the run directory failed and where (``None``: none failed).
        self.first_failure: tuple[str, str] | None = None

    # ---------------------------------------------------------------- metadata
    def set(self, key: str, value) -> None:
        if key in LIBRARY_KEYS:
            raise ValueError(f"info.json key {key!r} is the library's own")
        self.content[key] = value
        self.dirty = True

    def set_device(self, device_id: int, info: dict) -> None:
        self.content["devices"][str(device_id)] = info
        self.dirty = True

    def set_pmu_events(self, core: str, events: list[str]) -> None:
        self.content["pmu_events"][core] = list(events)
        self.dirty = True

    def add_note(self, text: str) -> None:
        """Something a reader of this run should know (kept once, in order)."""
        if text not in self.content.setdefault("notes", []):
            self.content["notes"].append(text)

    def describe_model(self, model_id: int, name: str, training: bool, phase: str | None = None) -> None:
        """What a loaded model is (a geprof extension: msprof does not record it): its graph's name, whether it
        trains or runs forward only (inference), and an inference engine's step (``phase``: prefill, decode),
        so its steps' phases can be named."""
        model = {"name": str(name), "training": bool(training)}
        if phase is not None:
            model["phase"] = str(phase)
        self.content.setdefault("models", {})[str(int(model_id))] = model
        self.dirty = True

    def count_dropped(self, kind: str, count: int) -> None:
        dropped = self.content.setdefault("dropped", {})
        dropped[kind] = dropped.get(kind, 0) + int(count)

    def register_type(self, level: int, type_id: int, name: str) -> None:
        self.content.setdefault("type_info", {}).setdefault(str(int(level)), {})[str(int(type_id))] = name
        self.dirty = True

    @property
    def notes(self) -> list[str]:
        return list(self.content.get("notes", []))

    def snapshot(self) -> dict:
        """A copy of the metadata as plain JSON values."""
        return orjson.loads(orjson.dumps(self.content, default=str, option=orjson.OPT_NON_STR_KEYS))

    def dumps(self) -> bytes:
        return orjson.dumps(self.content, default=str, option=INFO_JSON_OPTIONS)

    # ------------------------------------------------------------------ writing
    def write(self, run_dir: Path, strict: bool = False) -> None:
        """Replace ``run_dir``'s info.json now, in this thread (``strict``: raise if it cannot be written)."""
        self.dirty = False
        self.replace(run_dir, self.dumps(), strict)

    def is_on_disk(self, data: bytes) -> bool:
        """The run directory's info.json is ``data`` (the last write of it succeeded and wrote that)."""
        return self.on_disk and data == self._written

    def replace(self, run_dir: Path, data: bytes, strict: bool = False) -> None:
        """Write ``data`` (the metadata dumped) as ``run_dir``'s info.json, through a temporary file."""
        tmp = run_dir / (rawdata.INFO_FILE + ".tmp")
        try:
            with self._replacing:
                tmp.write_bytes(data)
                os.replace(tmp, run_dir / rawdata.INFO_FILE)
                self.on_disk = True
                self._written = data
        except OSError as exc:
            if strict:
                raise
            remove(tmp)
            with self._lock:
                self.dirty = True  # tried again with the next chunk
                self.on_disk = False
            self.write_failed(rawdata.INFO_FILE, exc)

    def problem(self, run_dir: Path) -> str:
        """What could not be written into ``run_dir``, in words for stderr and for the status of the call that
        finishes the run ("" if everything was written)."""
        failed = self.content.get("write_failed") or {}
        if not failed and self.on_disk:
            return ""
        reason, first = self.first_failure or ("unknown reason", "?")
        said = [f"{n} {kind} {UNITS.get(kind, 'records')}" for kind, n in failed.items()]
        text = f"geprof: not everything could be written into the run directory {run_dir} ({reason}, first at {first})"
        if said:
            text += ": not written: " + ", ".join(said)
        if self.on_disk:
            return text + "; what was written loads, and the run's notes say what is missing"
        return (text + f"; its {rawdata.INFO_FILE} is an older one (status 'running', without these counts): loading "
                "the run directory shows what was written, as an unfinished run")

    def write_failed(self, what: str, exc: OSError, kind: str | None = None, records: int = 0) -> None:
        """A write into the run directory failed: count the records it held in ``write_failed`` (never
        silent) and note why; collection goes on."""
        with self._lock:
            if kind is not None:
                failed = self.content.setdefault("write_failed", {})
                failed[kind] = failed.get(kind, 0) + int(records)
            reason = exc.strerror or str(exc)
            if self.first_failure is None:
                self.first_failure = (reason, what)
            said = f"writing into the run directory failed ({reason}, first at "
            notes = self.content.setdefault("notes", [])
            if not any(n.startswith(said) for n in notes):  # once per reason
                notes.append(f"{said}{what}); collection went on")
