"""Fixtures of the reliability suite (bad input, faults, concurrency, security).

The root ``tests/conftest.py`` already finalises GE and msprof after every test.
Here: the importer fixtures of ``tests/analysis`` on the path, an IPython shell
with the extension loaded (``ip``), and a finished run made before each bad
input (``earlier_run``), so every case can check that data collected before the
error is still on disk and loadable.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

from geprof_nb import ge
from geprof_nb.prof import msprof

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))  # real_fixtures

from helpers.reliability_helpers import EarlierRun, make_earlier_run  # noqa: E402


@pytest.fixture(scope="session")
def _earlier_run_template(tmp_path_factory) -> EarlierRun:
    return make_earlier_run(tmp_path_factory.mktemp("earlier"))


@pytest.fixture
def earlier_run(_earlier_run_template: EarlierRun, tmp_path: Path) -> EarlierRun:
    """A complete run in ``tmp_path/out`` (copied from one made once per session)."""
    return _earlier_run_template.copy_to(tmp_path / "out")


@pytest.fixture
def ip(tmp_path, monkeypatch):
    """An IPython shell with geprof_nb loaded, working in a temporary directory."""
    monkeypatch.chdir(tmp_path)
    shell = InteractiveShell.instance()  # one per process: other suites' cells ran in it too
    shell.user_ns.pop("_geprof", None)
    shell.run_line_magic("load_ext", "geprof_nb")
    yield shell
    shell.run_line_magic("unload_ext", "geprof_nb")
    ge.GEFinalize()
    assert not msprof.lib.running, "a test left msprof collecting"
