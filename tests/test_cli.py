"""The ``geprof`` console script: ``run`` profiles a script as ``%%geprof`` profiles a cell; counts
that must be positive are refused naming the flag."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

import geprof_nb
from geprof_nb.cli import main
from geprof_nb.prof import msprof

#: A small training script: the MLP for argv[1] steps; argv[2], if given, is raised after them.
SCRIPT = textwrap.dedent("""\
    import sys
    from geprof_nb import ge

    sess = ge.Session()
    sess.add_graph(1, ge.models.mlp(batch_size=8, in_features=32, hidden=(32,), training=True))
    for step in range(int(sys.argv[1])):
        sess.run_graph(1)
    if len(sys.argv) > 2:
        raise RuntimeError(sys.argv[2])
    """)


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    return path


def run_dir_line(out: str) -> Path:
    (line,) = [s for s in out.splitlines() if s.startswith("Run directory: ")]
    return Path(line.removeprefix("Run directory: "))


def test_run_profiles_every_step_of_the_script(script, tmp_path, capsys):
    argv = list(sys.argv)
    assert main(["run", "--clock", "virtual", "--aic-metrics", "Memory", "--output", str(tmp_path / "out"),
                 str(script), "4"]) == 0
    out = capsys.readouterr().out
    p = geprof_nb.load(run_dir_line(out))
    assert p.path.parent == tmp_path / "out" and p.complete and p.info["mode"] == "cli"
    assert p.info["cli"] == {"script": str(script), "argv": ["4"], "steps": 4}
    assert list(p.step_trace["Iteration ID"]) == [1, 2, 3, 4]
    kernels = len(p.ops())
    assert kernels > 0 and len(p.op_summary) == 4 * kernels  # every op of every step
    assert list(p.op_summary["Op Name"]).count("dense_0/MatMulV2") == 4
    assert p.options["aic_metrics"] == "Memory" and p.options["training_trace"] == "on"  # the flag, over the defaults
    assert "aic_mac_ratio" not in p.op_summary and "aic_main_mem_read_bw(GB/s)" in p.op_summary  # Memory's columns
    assert "op_statistic (top 10 op types):" in out and "step_trace (us):" in out
    assert sys.argv == argv and not msprof.lib.running


def test_run_finalises_the_run_when_the_script_raises(script, tmp_path, capsys):
    code = main(["run", "--clock", "virtual", "--task-trace", "off", "--output", str(tmp_path / "out"),
                 str(script), "2", "loss went NaN"])
    assert code == 1
    out, err = capsys.readouterr()
    p = geprof_nb.load(run_dir_line(out))
    assert p.complete and len(p.step_trace) == 2 and p.op_summary.empty  # --task-trace off
    assert "the profiled script raised RuntimeError: loss went NaN" in p.notes
    assert err.startswith(f'Traceback (most recent call last):\n  File "{script}", line 9, in <module>\n')
    assert err.endswith("RuntimeError: loss went NaN\n") and "collect.py" not in err and "runpy" not in err


def test_run_exits_with_the_scripts_exit_status(tmp_path, capsys):
    script = tmp_path / "leave.py"
    script.write_text("import sys\nsys.exit(3)\n")
    assert main(["run", "--output", str(tmp_path / "out"), str(script)]) == 3
    assert geprof_nb.load(tmp_path / "out").complete


@pytest.mark.parametrize("argv, message", [
    (["demo", "--steps", "-3"], "argument --steps: -3 is not valid; accepted: a positive integer (1, 2, 3, ...)"),
    (["demo", "--steps", "0"], "argument --steps: 0 is not valid; accepted: a positive integer (1, 2, 3, ...)"),
    (["demo", "--top", "-2"], "argument --top: -2 is not valid; accepted: a positive integer (1, 2, 3, ...)"),
    (["analyze", ".", "--top", "x"], "argument --top: 'x' is not a whole number; accepted: a positive integer"),
    (["export", ".", "--format", "msprof", "--to", "x", "--rank", "-1"],
     "argument --rank: -1 is not valid; accepted: a whole number >= 0"),
    (["run", "--task-trace", "l2", "x.py"], "argument --task-trace: 'l2' is not valid; accepted: "),
    (["run", "missing.py"], "argument SCRIPT: missing.py: no such file; accepted: a Python script file"),
])
def test_bad_values_are_refused_naming_the_flag(argv, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.py").write_text("")
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert f"geprof {argv[0]}: error: {message}" in capsys.readouterr().err
    assert not (tmp_path / "geprof_output").exists()
