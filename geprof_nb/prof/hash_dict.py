"""The hash dictionary: strings travel as 64-bit ids (``MsprofGetHashId``), and each run's
``hash_dict.jsonl`` says what they stand for.

The ids a process learned are kept for the process (every run's dictionary holds them all, so a name
profiled before costs one lookup); :class:`HashFile` appends the lines of one run's file as the
writer thread gets to them.  When a simulated cluster's runs are finalised, the first lines their
dictionaries have in common move to a file of their own (:func:`share_lines`), the same bytes in every
run, kept on disk once.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Callable

from . import rawdata
from .writer import RunLocation


def hash_id(text: str) -> int:
    """The stable 64-bit id of a string (what ``MsprofGetHashId`` returns)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


_cached_hash_id = functools.lru_cache(maxsize=1 << 16)(hash_id)


@functools.lru_cache(maxsize=1 << 16)
def _hash_line(text: str) -> bytes:
    """The hash dictionary's line of a string; the ranks of a simulated cluster write the same ones."""
    return (json.dumps({"id": str(hash_id(text)), "s": text}) + "\n").encode("utf-8")


class HashDictionary:
    """Every string a library was asked the id of, and its dictionary line, in the order they were learned."""

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self.ids: dict[str, int] = {}
        self.lines: list[bytes] = []

    def get_hash_id(self, text: str) -> int:
        h = self.ids.get(text)
        if h is None:
            h = _cached_hash_id(text)
            with self._lock:
                if text not in self.ids:  # its line first: an id another thread reads has its line
                    self.lines.append(_hash_line(text))
                    self.ids[text] = h
        return h

    def get_hash_ids(self, texts: list[str]) -> list[int]:
        """The ids of many strings at once, 0 for an empty string (the name of a task of no op).

        Strings new to the process are learned in the order given; the known ones
        (every name of a graph profiled before) cost one dictionary lookup each.
        """
        ids = list(map(self.ids.get, texts))
        if None not in ids:
            return ids
        known = _known_texts(texts)
        if known is not None and self.ids.keys().isdisjoint(known[0]):  # a dictionary new to all of them (a
            with self._lock:  # simulated cluster's rank learning a model's names): learned in one go, in order
                if self.ids.keys().isdisjoint(known[0]):
                    self.ids.update(zip(*known[:2]))
                    self.lines.extend(known[2])
                    return list(known[3])
        return [(self.get_hash_id(text) if text else 0) if h is None else h for text, h in zip(texts, ids)]


class HashFile:
    """One run's ``hash_dict.jsonl``: the dictionary's lines, the first ``saved`` of them written.

    ``write_failed(what, exc)`` notes a failed write (the lines are written again before the next
    chunk); ``is_open()`` says whether the run still takes writes.
    """

    def __init__(self, dictionary: HashDictionary, lock: threading.RLock,
                 write_failed: Callable[[str, OSError], None], is_open: Callable[[], bool]) -> None:
        self.dictionary = dictionary
        self._lock = lock
        self._write_failed = write_failed
        self._is_open = is_open
        self.saved = 0  # by the writer thread
        self.submitted = 0  # lines the writer was asked to write
        self.line_open = False  # a failed write left a partial line

    @property
    def behind(self) -> bool:
        """Lines are not on disk yet (one a failed write left behind, too)."""
        return self.saved != len(self.dictionary.lines)

    @property
    def unwritten(self) -> int:
        """Lines not on disk because the last write of the file failed (0 if it succeeded: a run whose
        records name no string writes no dictionary, and misses none)."""
        return len(self.dictionary.lines) - self.saved if self.line_open else 0

    @property
    def unsubmitted(self) -> bool:
        """Lines were learned that the writer was not asked to write."""
        return self.submitted != len(self.dictionary.lines)

    def submitted_all(self) -> None:
        """The writer is being asked for every line known now (caller holds the lock)."""
        self.submitted = len(self.dictionary.lines)

    def create(self, location: RunLocation) -> None:
        """Make the run's file, empty, as the run opens: a run killed before it learned a name (its first ACL
        calls name models by id) leaves a dictionary of no line, not a missing one, which the reader says
        loses the names of its records."""
        try:
            with open(os.path.join(location.path, rawdata.HASH_DICT_FILE), "ab"):
                pass
        except OSError as exc:  # the lines are written with the first chunk
            self._write_failed(rawdata.HASH_DICT_FILE, exc)

    def write(self, location: RunLocation) -> None:
        """Append the lines not yet in the run's file (writer thread)."""
        with self._lock:
            known = len(self.dictionary.lines)
            if self.saved == known or not self._is_open():
                return
            lines = b"".join(self.dictionary.lines[self.saved:known])
            if self.line_open:  # end the line a failed write cut off, so only that line is damaged
                lines = b"\n" + lines
        try:
            with open(os.path.join(location.path, rawdata.HASH_DICT_FILE), "ab") as f:
                f.write(lines)
        except OSError as exc:  # written again before the next chunk
            with self._lock:
                self.line_open = True
            self._write_failed(rawdata.HASH_DICT_FILE, exc)
            return
        with self._lock:
            self.saved = known
            self.line_open = False


#: id(texts) -> (a copy of texts, their distinct non-empty strings in order, their ids, their lines, the id of
#: each text) of the last lists :func:`_known_texts` was asked about: a cluster's ranks learn the same lists.
_KNOWN_TEXTS: dict[int, tuple] = {}
_KNOWN_LISTS = 8


def _known_texts(texts: list[str]) -> tuple | None:
    """The distinct non-empty strings of ``texts`` in order, their ids and lines, and each text's id, if
    ``texts`` was asked about before (the same list, equal to the copy kept then); None the first time
    (that call learns them one by one)."""
    entry = _KNOWN_TEXTS.get(id(texts))
    if entry is not None and entry[0] == texts:
        return entry[1:]
    distinct = [t for t in dict.fromkeys(texts) if t]
    hashes = [_cached_hash_id(t) for t in distinct]
    by_text = dict(zip(distinct, hashes))
    if len(_KNOWN_TEXTS) >= _KNOWN_LISTS:
        del _KNOWN_TEXTS[next(iter(_KNOWN_TEXTS))]
    _KNOWN_TEXTS[id(texts)] = (texts[:], tuple(distinct), tuple(hashes), tuple(_hash_line(t) for t in distinct),
                               tuple(by_text[t] if t else 0 for t in texts))
    return None


def _replace(path: Path, data: bytes) -> None:
    """Write ``path`` whole in one rename (a reader sees the old file or the new one)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def share_lines(run_dirs: Sequence[str | os.PathLike]) -> int:
    """Move the first lines the finalised runs' dictionaries share into each one's ``HASH_DICT_SHARED_FILE``
    (equal bytes in every run, so :func:`.shared_files.link_identical` keeps them once); returns the lines
    moved per run.

    Runs whose dictionaries begin with the same line (a cluster stage's ranks learn their graph's names in one
    order) share the lines up to the first that differs (a rank's own communication groups).  The shared file
    is written before a dictionary loses its lines: a failure between leaves a line in both, the same name.
    """
    groups: dict[bytes, list[tuple[Path, list[bytes]]]] = {}
    for run in map(Path, run_dirs):
        path = run / rawdata.HASH_DICT_FILE
        if (run / rawdata.HASH_DICT_SHARED_FILE).exists() or not path.is_file():
            continue
        lines = path.read_bytes().splitlines(keepends=True)
        if lines and lines[-1].endswith(b"\n"):  # a whole dictionary (a torn last line stays where it is)
            groups.setdefault(lines[0], []).append((run, lines))
    moved = 0
    for group in groups.values():
        if len(group) < 2:
            continue
        shortest = min(len(lines) for _, lines in group)
        common = next((i for i in range(shortest) if len({lines[i] for _, lines in group}) > 1), shortest)
        shared = b"".join(group[0][1][:common])
        for run, lines in group:
            try:
                _replace(run / rawdata.HASH_DICT_SHARED_FILE, shared)
                _replace(run / rawdata.HASH_DICT_FILE, b"".join(lines[common:]))
            except OSError:  # this run keeps its whole dictionary (and maybe a copy of the shared lines)
                continue
        moved = max(moved, common)
    return moved
