import pytest
from IPython.core.interactiveshell import InteractiveShell

from geprof_nb import ge
from geprof_nb.prof import msprof


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
