"""Files that several finished run directories hold byte for byte, kept on disk once.

A simulated cluster's data-parallel replicas of a pipeline stage describe the same model the same way: the
static op and task descriptions, the memory plan, the context ids are equal bytes in every replica's run
directory.  Once the runs are finalised (nothing appends to their files any more), every such copy is
replaced by a hard link to the first one, so each run directory stays complete and loadable on its own
while the disk holds the content once.  Where a link cannot be made (a file system without hard links,
another device, a link count limit) the copy stays as it is.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_READ_BYTES = 1 << 20


@dataclass
class Linked:
    """What :func:`link_identical` did: copies replaced by links, the bytes they held, links that failed."""

    files: int = 0
    bytes: int = 0
    failed: int = 0


def _digest(path: Path) -> bytes:
    """A 256-bit BLAKE2b digest of a file's bytes (equal digests: equal files, short of a collision)."""
    h = hashlib.blake2b(digest_size=32)
    with open(path, "rb") as f:
        while block := f.read(_READ_BYTES):
            h.update(block)
    return h.digest()


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
    be finalised."""
    done = Linked()
    kept: dict[tuple[str, int, bytes], Path] = {}  # (name, size, digest) -> the file kept
    undigested: dict[tuple[str, int], Path | None] = {}  # (name, size) -> its one file yet, undigested
    for run in map(Path, run_dirs):
        for path in sorted(p for p in run.rglob("*") if p.is_file()):
            name, size = path.name, path.stat().st_size
            alone = undigested.setdefault((name, size), path)
            if alone is path:  # the first file of its name and size: digested once another one comes
                continue
            if alone is not None:
                kept.setdefault((name, size, _digest(alone)), alone)
                undigested[(name, size)] = None
            source = kept.setdefault((name, size, _digest(path)), path)
            if source is path or os.path.samefile(source, path):  # the first of its bytes, or linked already
                continue
            if _link(source, path):
                done.files += 1
                done.bytes += size
            else:
                done.failed += 1
    return done
