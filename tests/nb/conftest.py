import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from geprof_nb import ge
from geprof_nb.prof import msprof
from helpers.notebook_testing import MLP_CELL


@pytest.fixture
def ip(tmp_path, monkeypatch):
    """An IPython shell with geprof_nb loaded, working in a temporary directory."""
    monkeypatch.chdir(tmp_path)
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "geprof_nb")
    yield shell
    shell.run_line_magic("unload_ext", "geprof_nb")
    ge.GEFinalize()
    assert not msprof.lib.running, "a test left msprof collecting"


@pytest.fixture
def profiled(ip):
    """The shell after a ``%%geprof -o first`` cell of two MLP steps (virtual clock, nothing shown)."""
    with capture_output():
        ip.run_cell_magic("geprof", "--clock virtual --no-display -o first", MLP_CELL)
    return ip
