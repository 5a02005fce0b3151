"""What is where a data file should be, and reading it: a directory, a symbolic link loop or a link to
nothing, a FIFO or a device, a file the operating system cannot read (EIO, EACCES) are
:class:`~geprof_nb.errors.ImportFormatError` naming the file, what is there and what is accepted;
never a raw ``OSError``, and never a read that waits forever on a FIFO.

Every reader of run directories and imported files opens its files here (``tests/reliability``
puts each of these where each kind of file should be).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from ..errors import ImportFormatError, RunDirError

#: What an OSError's errno says is there, in words.
_ERRNO_WORDS = {
    errno.EISDIR: "a directory, not a file",
    errno.ELOOP: "a symbolic link loop",
    errno.EACCES: "not readable (permission denied)",
    errno.EPERM: "not readable (operation not permitted)",
    errno.EIO: "not readable (input/output error: the disk or the file system cannot deliver it)",
    errno.ENAMETOOLONG: "a name longer than the file system takes",
}


def what_is_there(path: Path) -> str | None:
    """Why ``path`` is not a regular file one can read, in words; None if it is one, or if nothing is there."""
    try:
        st = path.stat()  # follows links
    except NotADirectoryError:  # a parent is a file: nothing can be there
        return None
    except FileNotFoundError:
        if path.is_symlink():
            try:
                target = os.readlink(path)
            except OSError:
                target = "?"
            return f"a symbolic link to {target!r}, which does not exist"
        return None
    except OSError as exc:
        return _ERRNO_WORDS.get(exc.errno, exc.strerror or str(exc))
    except ValueError:  # a NUL byte in the name
        return "a name with a NUL byte"
    if stat.S_ISREG(st.st_mode):
        return None
    if stat.S_ISDIR(st.st_mode):
        return "a directory, not a file"
    if stat.S_ISFIFO(st.st_mode):
        return "a FIFO (named pipe), not a file"
    return "a device or socket, not a file"


def oddity(path: Path, problem: str, accepted: str) -> ImportFormatError:
    """The error for ``problem`` (what :func:`what_is_there` said, or why the read failed) at ``path``."""
    return ImportFormatError(f"{path}: {problem}; accepted: {accepted}")


def present(path: Path, accepted: str) -> bool:
    """Whether a data file is at ``path``: False if nothing is (not even a link), True for a regular file; an
    ImportFormatError for anything else there (``accepted``: what the reader takes, "a CSV file")."""
    problem = what_is_there(path)
    if problem is not None:
        raise oddity(path, problem, accepted)
    return path.is_file()


def _words(exc: OSError) -> str:
    return _ERRNO_WORDS.get(exc.errno, exc.strerror or str(exc)) if exc.errno is not None else str(exc)


@contextmanager
def reading(path: Path, accepted: str) -> Iterator[None]:
    """Turn an ``OSError`` while reading ``path`` (one that :func:`present` could not foresee, EIO in the middle
    of a file) into an ImportFormatError naming it."""
    try:
        yield
    except OSError as exc:
        raise oddity(path, _words(exc), accepted) from None


def open_binary(path: Path, accepted: str) -> BinaryIO:
    """``path`` open for reading bytes, checked to be a regular file once open (a FIFO is opened without
    waiting for a writer, and refused); an ImportFormatError for anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        raise oddity(path, what_is_there(path) or _words(exc), accepted) from None
    except ValueError:
        raise oddity(path, "a name with a NUL byte", accepted) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise oddity(path, what_is_there(path) or "not a regular file", accepted)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: Path, accepted: str) -> bytes:
    """The bytes of a data file (:func:`open_binary`, :func:`reading`)."""
    with open_binary(path, accepted) as f, reading(path, accepted):
        return f.read()


def listing(directory: Path) -> list[Path]:
    """The entries of a directory to open runs from, sorted; a RunDirError naming it if it cannot be listed."""
    try:
        return sorted(directory.iterdir())
    except OSError as exc:
        raise RunDirError(f"{directory}: cannot be listed ({_words(exc)}); accepted: a readable directory") from None
