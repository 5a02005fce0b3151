"""Files that several finished run directories hold byte for byte, kept on disk once.

The ranks of a simulated cluster's pipeline stage (its tensor- and data-parallel ranks) run one graph and
describe it the same way: the static op and task descriptions, the memory plan, the context ids are equal
bytes in every rank's run directory.  Once the runs are finalised (nothing appends to their files any more),
every such copy is replaced by a hard link to the first one, so each run directory stays complete and
loadable on its own while the disk holds the content once.  Where a link cannot be made (a file system
without hard links, another device, a link count limit) the copy stays as it is.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

_READ_BYTES = 1 << 20
_HEAD_BYTES = 1 << 12


@dataclass
class Linked:
    """What :func:`link_identical` did: copies replaced by links, the bytes they held, links that failed."""

    files: int = 0
    bytes: int = 0
    failed: int = 0


def _head(path: Path) -> bytes:
    """A file's first bytes: files of one name and size (every rank's task log) mostly differ there already."""
    with open(path, "rb") as f:
        return f.read(_HEAD_BYTES)


def _same_bytes(a: Path, b: Path) -> bool:
    """Whether two files of one size hold the same bytes (read side by side, block by block: a comparison
    runs at memory speed where a digest would take several times longer)."""
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while block := fa.read(_READ_BYTES):
            if block != fb.read(_READ_BYTES):
                return False
    return True


def _split(files: list[Path], key: Callable[[Path], bytes]) -> list[list[Path]]:
    """``files`` in groups of one ``key``, each in the order given; groups of one file left out."""
    groups: dict[bytes, list[Path]] = {}
    for path in files:
        groups.setdefault(key(path), []).append(path)
    return [g for g in groups.values() if len(g) > 1]


def _link(source: Path, copy: Path) -> bool:
    """Make ``copy`` a hard link to ``source`` in one rename (a reader sees one file or the other)."""
    tmp = copy.with_name(copy.name + ".link")
    try:
        os.link(source, tmp)
    except OSError:
        return False
    try:
        os.replace(tmp, copy)
    except OSError:
        tmp.unlink(missing_ok=True)
        return False
    return True


def link_identical(run_dirs: Iterable[str | os.PathLike]) -> Linked:
    """Replace every file of ``run_dirs`` whose name and bytes are those of a file met before (an earlier run
    directory's of the list, or one of the same run's) by a hard link to that file.  The run directories must
    be finalised.  Only files of one name and size are compared, by their first bytes, then whole."""
    done = Linked()
    by_size: dict[tuple[str, int], list[Path]] = {}
    for run in map(Path, run_dirs):
        for path in sorted(p for p in run.rglob("*") if p.is_file()):
            by_size.setdefault((path.name, path.stat().st_size), []).append(path)
    for candidates in by_size.values():
        for same_head in _split(candidates, _head) if len(candidates) > 1 else ():
            kept: list[Path] = []  # the first file of each content met (mostly one)
            for path in same_head:
                source = next((k for k in kept if os.path.samefile(k, path) or _same_bytes(k, path)), None)
                if source is None:
                    kept.append(path)
                elif os.path.samefile(source, path):  # linked already
                    continue
                elif _link(source, path):
                    done.files += 1
                    done.bytes += path.stat().st_size
                else:
                    done.failed += 1
    return done
