"""Execute the notebooks in place, so they are committed with their outputs (they read as documentation
on a code host).  Each runs in a fresh kernel in an empty working directory, as tests/nb/test_notebooks.py
runs them; the test checks that the stored outputs are what a fresh execution gives.

    python notebooks/execute.py                 # every notebook
    python notebooks/execute.py 01_quickstart   # the ones whose names start so
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK_DIR = Path(__file__).resolve().parent


def execute(path: Path, workdir: Path) -> nbformat.NotebookNode:
    """``path`` run top to bottom in ``workdir``; cell metadata keeps no execution timestamps."""
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", record_timing=False,
                   resources={"metadata": {"path": str(workdir)}}).execute()
    return nb


def main(prefixes: list[str]) -> None:
    for path in sorted(NOTEBOOK_DIR.glob("*.ipynb")):
        if prefixes and not any(path.name.startswith(p) for p in prefixes):
            continue
        with tempfile.TemporaryDirectory(prefix=f"{path.stem}_") as workdir:
            nbformat.write(execute(path, Path(workdir)), path)
        print(f"executed {path.name}")


if __name__ == "__main__":
    main(sys.argv[1:])
