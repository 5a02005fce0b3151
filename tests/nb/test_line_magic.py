"""%geprof <command>: show, load, export, compare, advise, help; clear usage errors."""

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from geprof_nb.analysis import Profile

CELL = """
sess = ge.Session()
sess.add_graph(1, ge.models.mlp(batch_size=8, world_size=2))
for step in range(2):
    sess.run_graph(1)
"""


@pytest.fixture
def profiled(ip):
    with capture_output():
        ip.run_cell_magic("geprof", "--clock virtual --no-display -o first", CELL)
    return ip


def test_help_lists_commands_and_cell_flags(ip, capsys):
    ip.run_line_magic("geprof", "help")
    out = capsys.readouterr().out
    for command in ("show", "load", "export", "compare", "advise"):
        assert command in out
    assert "--aic-metrics" in out and "%%geprof" in out


def test_show_displays_the_report(profiled):
    with capture_output() as cap:
        profiled.run_line_magic("geprof", "show first")
    assert "op_summary: top" in cap.outputs[0].data["text/html"]


def test_load_binds_the_profile(profiled):
    path = profiled.user_ns["first"].path
    with capture_output():
        profiled.run_line_magic("geprof", f"load {path} -o again")
    again = profiled.user_ns["again"]
    assert isinstance(again, Profile) and again.path == path and profiled.user_ns["_geprof"] is again
    assert len(again.step_trace) == 2


def test_unknown_name_says_which_profiles_exist(profiled):
    with pytest.raises(UsageError, match=r"'nope' is not a geprof Profile; Profiles here: .*first"):
        profiled.run_line_magic("geprof", "show nope")


def test_bad_command_shows_usage(ip):
    with pytest.raises(UsageError, match=r"(?s)invalid choice: 'frobnicate'.*usage: %geprof"):
        ip.run_line_magic("geprof", "frobnicate")
    with pytest.raises(UsageError, match=r"argument --format: invalid choice: 'csv'"):
        ip.run_line_magic("geprof", "export _geprof --format csv")
    with pytest.raises(UsageError, match="cannot parse the command line"):
        ip.run_line_magic("geprof", 'load "unclosed')
