"""Every notebook under notebooks/ executes headless with nbclient and shows rich output."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))


def execute(path: Path, workdir: Path) -> nbformat.NotebookNode:
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}).execute()
    return nb


def outputs_of(nb: nbformat.NotebookNode) -> list[dict]:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_without_errors(path, tmp_path):
    nb = execute(path, tmp_path)
    errors = [o for o in outputs_of(nb) if o.get("output_type") == "error"]
    assert errors == []
    mimes = {m for o in outputs_of(nb) for m in o.get("data", {})}
    assert {"text/html", "image/png"} <= mimes


def test_quickstart_profile_cell_shows_tables_and_timeline(tmp_path):
    nb = execute(NOTEBOOK_DIR / "01_quickstart.ipynb", tmp_path)
    cell = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith("%%geprof"))
    data = [o.get("data", {}) for o in cell.outputs]
    html = [d["text/html"] for d in data if "text/html" in d]
    assert len(html) == 3
    assert "op_summary: top 20 of" in html[0] and "aic_mac_ratio" in html[0]
    assert "op_statistic" in html[1] and "step_trace: 10 iterations" in html[2]
    assert sum("image/png" in d for d in data) == 1
    assert list(tmp_path.glob("geprof_output/PROF_*/info.json"))
