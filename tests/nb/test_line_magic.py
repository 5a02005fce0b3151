"""%geprof <command>: show, load, export, compare, advise, help; clear usage errors."""

import pandas as pd
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
    (shown,) = [o.data for o in cap.outputs]
    assert "application/vnd.jupyter.widget-view+json" in shown and "image/png" in shown
    first = profiled.user_ns["first"]
    assert f"Showing 20 of {len(first.ops())} op tasks" in shown["text/html"]
    assert first.name in shown["text/plain"]


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


def test_export_writes_the_format_and_says_where(profiled, tmp_path, capsys):
    profiled.run_line_magic("geprof", f"export first --format msprof --to {tmp_path / 'x'}")
    out = capsys.readouterr().out
    written = sorted((tmp_path / "x").glob("PROF_*/mindstudio_profiler_output/op_summary_*.csv"))
    assert len(written) == 1 and f"msprof export written to {written[0].parents[1]}" in out
    profiled.run_line_magic("geprof", f"export first --format ascend_pt --rank 3 --to {tmp_path / 'pt'}")
    info = list((tmp_path / "pt").glob("*_ascend_pt/profiler_info_3.json"))
    assert len(info) == 1


def test_compare_takes_variables_or_paths(profiled):
    with capture_output():
        profiled.run_cell_magic("geprof", "--clock virtual --no-display -o second",
                                CELL.replace("batch_size=8", "batch_size=64"))
    first, second = profiled.user_ns["first"], profiled.user_ns["second"]
    c = profiled.run_line_magic("geprof", "compare first second")
    matmul = "dense_1/MatMulV2"

    def per_step(p):
        return p.op_summary.loc[p.op_summary["Op Name"] == matmul, "Task Duration(us)"].sum() / 2

    row = c.ops.loc[matmul]
    assert row["Time/step Diff(us)"] == pytest.approx(per_step(second) - per_step(first))
    assert per_step(second) > per_step(first) and matmul in c.regressions.index  # 8x the batch costs more
    c2 = profiled.run_line_magic("geprof", f"compare first {second.path}")  # a path is loaded
    pd.testing.assert_frame_equal(c2.ops, c.ops)


def test_advise_returns_ranked_findings(profiled):
    findings = profiled.run_line_magic("geprof", "advise first")
    assert list(findings.columns[:5]) == ["Priority", "Rule", "Finding", "Evidence", "Suggestion"]
    assert len(findings) > 0 and set(findings["Priority"]) <= {"High", "Medium", "Low"}
    with pytest.raises(UsageError, match="'nowhere' is not a geprof Profile"):
        profiled.run_line_magic("geprof", "advise nowhere")
