"""The real msprof-analyze executable (the ``interop`` extra) and a runner that checks its log.

The tool exits 0 even when it fails, so :func:`analyze` also fails on any ``[ERROR]`` line.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path


def _executable() -> str | None:
    beside = Path(sys.executable).with_name("msprof-analyze")
    return shutil.which("msprof-analyze") or (str(beside) if beside.exists() else None)


MSPROF_ANALYZE = _executable()


def analyze(cwd: Path, *args: str, allow: tuple[str, ...] = ()) -> str:
    """Run msprof-analyze in ``cwd`` (the advisor leaves a tuning file in its working directory);
    returns stdout + stderr after checking that no line reports an error (but those matching a
    regular expression of ``allow``: known, explained gaps of the input)."""
    done = subprocess.run([MSPROF_ANALYZE, *args], capture_output=True, text=True, timeout=600, cwd=cwd)
    output = done.stdout + done.stderr
    errors = [line for line in output.splitlines() if ("[ERROR]" in line or " ERROR " in line)
              and not any(re.search(pattern, line) for pattern in allow)]
    assert not errors, "\n".join(errors)
    assert done.returncode == 0, output
    return output
