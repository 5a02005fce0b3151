"""%geprof <command>: show, load, export, compare, advise, help; clear usage errors."""

import re

import pandas as pd
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from geprof_nb.analysis import ClusterProfile, Profile
from helpers.notebook_testing import MLP_CELL as CELL


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


@pytest.mark.parametrize("name, problem", [("1bad", ""), ("a-b", ""), ("class", " (a keyword)")])
def test_load_and_the_cell_refuse_the_same_bind_names(profiled, name, problem):
    path = profiled.user_ns["first"].path
    message = f"-o NAME must be a Python identifier, got {name!r}{problem}"
    with pytest.raises(UsageError) as err:
        profiled.run_line_magic("geprof", f"load {path} -o {name}")
    assert str(err.value) == message and name not in profiled.user_ns
    with pytest.raises(UsageError) as err:
        profiled.run_cell_magic("geprof", f"--no-display -o {name}", "raise AssertionError('the cell must not run')")
    assert str(err.value) == message and name not in profiled.user_ns


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
    # a flag is named in full: argparse's prefix matching would run --form as --format
    with pytest.raises(UsageError, match=r"unrecognized arguments: --form msprof --t out"):
        ip.run_line_magic("geprof", "export _geprof --form msprof --t out")


def test_export_writes_the_format_and_says_where(profiled, tmp_path, capsys):
    profiled.run_line_magic("geprof", f"export first --format msprof --to {tmp_path / 'x'}")
    out = capsys.readouterr().out
    written = sorted((tmp_path / "x").glob("PROF_*/mindstudio_profiler_output/op_summary_*.csv"))
    assert len(written) == 1 and f"msprof export written to {written[0].parents[1]}" in out
    profiled.run_line_magic("geprof", f"export first --format ascend_pt --rank 3 --to {tmp_path / 'pt'}")
    info = list((tmp_path / "pt").glob("*_ascend_pt/profiler_info_3.json"))
    assert len(info) == 1


@pytest.mark.parametrize("rank, shown", [("-1", "-1"), ("1.5", "'1.5'"), ("x", "'x'")])
def test_export_rank_that_is_not_a_whole_number_from_0_is_refused_naming_rank(profiled, rank, shown, tmp_path):
    with pytest.raises(UsageError) as err:
        profiled.run_line_magic("geprof", f"export first --format ascend_pt --rank {rank} --to {tmp_path / 'pt'}")
    assert str(err.value).startswith(f"argument --rank: rank {shown} is not valid; accepted: a whole number >= 0\n")
    assert not (tmp_path / "pt").exists()


@pytest.mark.parametrize("fmt, under", [("msprof", ""), ("parquet", ""), ("chrome", "x.json")])
def test_export_that_cannot_write_is_a_usage_error_naming_the_path(profiled, fmt, under, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("keep me")
    to = blocker / under if under else blocker
    with pytest.raises(UsageError) as err:
        profiled.run_line_magic("geprof", f"export first --format {fmt} --to {to}")
    assert str(err.value) == f"--to {to}: cannot write the {fmt} export ({blocker} is a file, not a directory)"
    assert blocker.read_text() == "keep me"


def test_compare_takes_variables_or_paths(profiled):
    with capture_output():
        profiled.run_cell_magic("geprof", "--clock virtual --no-display -o second",
                                CELL.replace("batch_size=8", "batch_size=64"))
    first, second = profiled.user_ns["first"], profiled.user_ns["second"]
    view = profiled.run_line_magic("geprof", "compare first second")  # the compare view, its tables in .comparison
    c = view.comparison
    assert (c.a_name, c.b_name) == ("first", "second") and "geprof-compare" in view.widget._dom_classes
    matmul = "dense_1/MatMulV2"

    def per_step(p):
        return p.op_summary.loc[p.op_summary["Op Name"] == matmul, "Task Duration(us)"].sum() / 2

    row = c.ops.loc[matmul]
    assert row["Time/step Diff(us)"] == pytest.approx(per_step(second) - per_step(first))
    assert per_step(second) > per_step(first) and matmul in c.regressions.index  # 8x the batch costs more
    c2 = profiled.run_line_magic("geprof", f"compare first {second.path}").comparison  # a path is loaded
    pd.testing.assert_frame_equal(c2.ops, c.ops)
    steps = profiled.run_line_magic("geprof", "compare first --steps 1 2").comparison  # two steps of one run
    assert steps.steps == (1, 2) and (steps.a_name, steps.b_name) == ("first step 1", "first step 2")
    assert steps.step.loc["Op tasks", "A"] == len(first.ops(1))
    with pytest.raises(UsageError, match=r"^%geprof compare first: give the run to compare it with"):
        profiled.run_line_magic("geprof", "compare first")
    with pytest.raises(UsageError, match=r"^%geprof compare: steps\[1\] 9 is not in b \("):
        profiled.run_line_magic("geprof", "compare first --steps 1 9")


def test_advise_returns_ranked_findings(profiled):
    findings = profiled.run_line_magic("geprof", "advise first")
    assert list(findings.columns[:5]) == ["Priority", "Rule", "Finding", "Evidence", "Suggestion"]
    assert len(findings) > 0 and set(findings["Priority"]) <= {"High", "Medium", "Low"}
    with pytest.raises(UsageError, match="'nowhere' is not a geprof Profile"):
        profiled.run_line_magic("geprof", "advise nowhere")


@pytest.fixture
def clustered(ip):
    """A ``%%geprof --ranks 2`` cell, bound to ``clus`` (and ``_geprof``)."""
    with capture_output():
        ip.run_cell_magic("geprof", "--ranks 2 --hccl on --clock virtual --no-display -o clus", CELL)
    return ip


def test_show_advise_export_take_a_cluster_profile(clustered, tmp_path, capsys):
    clus = clustered.user_ns["clus"]
    assert isinstance(clus, ClusterProfile) and clustered.user_ns["_geprof"] is clus
    with capture_output() as cap:
        clustered.run_line_magic("geprof", "show")
    (shown,) = [o.data for o in cap.outputs]
    assert shown["text/plain"].startswith(f"geprof {clus.name} | 2 ranks")
    findings = clustered.run_line_magic("geprof", "advise clus")
    pd.testing.assert_frame_equal(findings, clus.advise())
    clustered.run_line_magic("geprof", f"export clus --to {tmp_path / 'pt'}")  # a cluster's default: ascend_pt
    assert f"ascend_pt export written to {tmp_path / 'pt'}" in capsys.readouterr().out
    infos = sorted(p.name for p in (tmp_path / "pt").glob("*_ascend_pt/profiler_info_*.json"))
    assert infos == ["profiler_info_0.json", "profiler_info_1.json"]
    clustered.run_line_magic("geprof", f"export {clus.path} --format parquet --to {tmp_path / 'pq'}")
    assert sorted(p.name for p in (tmp_path / "pq").iterdir()) == ["rank_0", "rank_1"]


def test_what_a_cluster_profile_cannot_do_is_named(clustered, tmp_path):
    with pytest.raises(UsageError, match=r"^--format chrome: 'clus' is a ClusterProfile; accepted for a cluster: "
                                         r"ascend_pt, db, msprof_db, parquet \(for chrome, export one rank, e\.g\. clus\.rank\(0\)"):
        clustered.run_line_magic("geprof", f"export clus --format chrome --to {tmp_path / 'c'}")
    with pytest.raises(UsageError, match=r"^--rank 1: 'clus' is a ClusterProfile, whose ranks are exported as"):
        clustered.run_line_magic("geprof", f"export clus --format ascend_pt --rank 1 --to {tmp_path / 'c'}")
    assert not (tmp_path / "c").exists()
    with pytest.raises(UsageError, match=r"^'clus' is a ClusterProfile \(ranks \[0, 1\]\): %geprof compare takes one "
                                         r"run; bind one rank first, e\.g\. r0 = clus\.rank\(0\)$"):
        clustered.run_line_magic("geprof", "compare clus clus")


def test_load_and_compare_name_a_missing_or_unreadable_path(profiled, tmp_path):
    with pytest.raises(UsageError, match=rf"^{re.escape(str(tmp_path / 'missing'))}: the path does not exist; accepted: a run "
                                         r"directory \(PROF_\*\)"):
        profiled.run_line_magic("geprof", f"load {tmp_path / 'missing'}")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match=rf"^{re.escape(str(tmp_path / 'empty'))} holds no geprof run directory .* expected a "
                                         r"PROF_\* directory"):
        profiled.run_line_magic("geprof", f"load {tmp_path / 'empty'}")
    with pytest.raises(UsageError, match=rf"^{re.escape(str(tmp_path / 'missing'))}: the path does not exist"):
        profiled.run_line_magic("geprof", f"compare _geprof {tmp_path / 'missing'}")
    with pytest.raises(UsageError, match=r"^'nope' is not a geprof Profile; Profiles here: .*first"):
        profiled.run_line_magic("geprof", "compare first nope")
