"""The ``geprof`` console script: ``run`` profiles a script as ``%%geprof`` profiles a cell (its
``--device`` takes what-if presets as the cell's does); ``analyze`` and ``export`` take a cluster root;
counts that must be positive are refused naming the flag."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis import ClusterProfile
from geprof_nb.analysis.sources.source import OP_STATISTIC_L0_NOTE
from geprof_nb.cli import main
from geprof_nb.prof import msprof
from geprof_nb.prof.clock import clock
from helpers.cluster_testing import simulate_cluster
from helpers.geprof_testing import step_headline_by_hand

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


#: The small cluster of the analyze / export tests: rank SLOW_RANK's kernels take twice as long.
RANKS, SLOW_RANK = 4, 2


@pytest.fixture
def cluster(tmp_path: Path) -> ClusterProfile:
    graph = ge.models.mlp(batch_size=8, in_features=32, hidden=(32,), training=True, world_size=RANKS)
    return simulate_cluster(tmp_path / "sim", {"slow_ranks": {str(SLOW_RANK): 2.0}}, ranks=RANKS, steps=2,
                            graph=graph, aic_metrics="PipeUtilization")


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


def test_geprofs_own_warnings_are_one_line_each_and_a_scripts_are_shown_as_usual(tmp_path, capsys, recwarn):
    path = tmp_path / "warns.py"
    path.write_text(SCRIPT + "import warnings\nwarnings.warn('from the script')\n")
    assert main(["run", "--clock", "virtual", "--aic-metrics", "Custom:0x49,0x8", "--output", str(tmp_path / "out"),
                 str(path), "1"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert ("geprof: warning: aic_metrics 'Custom:0x49,0x8': Custom event groups are not simulated; no AI Core PMU "
            "data is collected") in err
    assert not any("geprof_nb" in line for line in err)  # no package file or source line
    # the script's own warning goes to the warnings machinery in place (here pytest's recorder) untouched
    assert [str(w.message) for w in recwarn if w.filename == str(path)] == ["from the script"]


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
    lines = out.splitlines()
    assert lines[:4] == ["", "Top 10 ops of the last iteration by Task Duration(us): no op data (task_trace off)", "",
                         "op_statistic (top 10 op types): no op data (task_trace off)"]
    notes = lines.index("Notes:")
    assert lines[notes + 1:lines.index(f"Run directory: {p.path}") - 1] == [f"  - {n}" for n in p.notes]
    assert "  - the profiled script raised RuntimeError: loss went NaN" in lines and "Empty DataFrame" not in out


def test_run_exits_with_the_scripts_exit_status(tmp_path, capsys):
    script = tmp_path / "leave.py"
    script.write_text("import sys\nsys.exit(3)\n")
    assert main(["run", "--output", str(tmp_path / "out"), str(script)]) == 3
    assert geprof_nb.load(tmp_path / "out").complete


def test_run_exits_with_1_when_not_everything_could_be_written(script, tmp_path, capsys, monkeypatch):
    """The script succeeds, but the disk is full for its hwts chunks: the tables show what was written, stderr
    says what was not, and the exit status says it too."""
    import errno

    from geprof_nb.prof import writer

    real_create = writer._create

    def create(path: str) -> int:
        if "/hwts." in path:
            raise OSError(errno.ENOSPC, "No space left on device", path)
        return real_create(path)

    monkeypatch.setattr(writer, "_create", create)
    assert main(["run", "--clock", "virtual", "--output", str(tmp_path / "out"), str(script), "2"]) == 1
    monkeypatch.undo()
    out, err = capsys.readouterr()
    said = [line for line in err.splitlines() if "not everything could be written" in line]
    assert len(said) == 1 and ": not written: " in said[0] and " hwts records; " in said[0]
    p = geprof_nb.load(tmp_path / "out")
    assert p.complete and p.op_summary.empty and len(p.step_trace) == 2 and p.dropped["hwts (not written)"] > 0
    assert "records could not be written to the run directory (disk full or not writable)" in out  # the notes


@pytest.mark.parametrize("argv, message", [
    (["demo", "--steps", "-3"], "argument --steps: -3 is not valid; accepted: a positive integer (1, 2, 3, ...)"),
    (["demo", "--steps", "0"], "argument --steps: 0 is not valid; accepted: a positive integer (1, 2, 3, ...)"),
    (["demo", "--top", "-2"], "argument --top: -2 is not valid; accepted: a positive integer (1, 2, 3, ...)"),
    (["analyze", ".", "--top", "x"], "argument --top: 'x' is not a whole number; accepted: a positive integer"),
    (["export", ".", "--format", "msprof", "--to", "x", "--rank", "-1"],
     "argument --rank: rank -1 is not valid; accepted: a whole number >= 0"),
    (["export", ".", "--format", "ascend_pt", "--to", "x", "--rank", "1.5"],
     "argument --rank: rank '1.5' is not valid; accepted: a whole number >= 0"),
    (["export", ".", "--format", "msprof", "--to", "x", "--rank", "5"],
     "argument --rank: --format msprof has no rank; accepted: --rank with --format ascend_pt or db or msprof_db\n"),
    (["export", ".", "--rank", "0", "--format", "chrome", "--to", "x"],
     "argument --rank: --format chrome has no rank; accepted: --rank with --format ascend_pt or db or msprof_db\n"),
    (["export", ".", "--format", "parquet", "--to", "x", "--rank", "1"],
     "argument --rank: --format parquet has no rank; accepted: --rank with --format ascend_pt or db or msprof_db\n"),
    (["run", "--task-trace", "l2", "x.py"], "argument --task-trace: 'l2' is not valid; accepted: "),
    (["run", "missing.py"], "argument SCRIPT: missing.py: no such file; accepted: a Python script file"),
    # a flag is named in full: argparse's prefix matching would run --form as --format
    (["export", ".", "--form", "msprof", "--to", "x"], "the following arguments are required: --format\n"),
    (["run"], "the following arguments are required: SCRIPT\n"),
    (["run", "--device", "Ascend999", "x.py"], "argument --device: unknown device 'Ascend999'; accepted: "),
    (["run", "--device", "Ascend910B:cores=20", "x.py"],
     "argument --device: device 'Ascend910B:cores=20': 'cores' is not a device field; accepted: "),
])
def test_bad_values_are_refused_naming_the_flag(argv, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.py").write_text("")
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert f"geprof {argv[0]}: error: {message}" in capsys.readouterr().err
    assert not (tmp_path / "geprof_output").exists() and not (tmp_path / "x").exists()


def test_a_prefix_of_a_flag_is_not_that_flag(tmp_path, monkeypatch, capsys):
    """argparse's prefix matching would run ``--to 3`` as ``--top 3``: a flag is named in full."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(["analyze", ".", "--to", "3"])
    assert exc.value.code == 2
    assert "geprof: error: unrecognized arguments: --to 3\n" in capsys.readouterr().err


def test_export_help_says_the_path_may_be_a_cluster_root(capsys):
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    helps = " ".join(capsys.readouterr().out.split())
    assert ("PATH a run directory, an output directory (newest run), a cluster root (CLUSTER_*) or real tool "
            "output") in helps


def test_run_takes_a_what_if_device_as_the_cell_does(script, tmp_path, capsys):
    assert main(["run", "--clock", "virtual", "--device", "Ascend910B:ai_core_num=20", "--output",
                 str(tmp_path / "out"), str(script), "1"]) == 0
    p = geprof_nb.load(run_dir_line(capsys.readouterr().out))
    device = p.info["devices"]["0"]
    assert device["name"] == "Ascend910B:ai_core_num=20" and device["ai_core_num"] == 20
    assert device["vector_core_num"] == ge.DEVICE_PRESETS["Ascend910B"].vector_core_num  # the other fields: the preset's


def test_run_refuses_aic_metrics_the_device_has_no_counters_for_before_the_run_opens(script, tmp_path, capsys):
    code = main(["run", "--device", "Ascend910A", "--aic-metrics", "L2Cache", "--output", str(tmp_path / "out"),
                 str(script), "1"])
    assert code == 2 and not (tmp_path / "out").exists()
    assert capsys.readouterr().err == (
        "geprof run: --aic-metrics L2Cache: not available on --device Ascend910A; accepted there: "
        "ArithmeticUtilization, PipeUtilization, Memory, MemoryL0, MemoryUB, ResourceConflictRatio\n")


def test_analyze_of_a_cluster_lists_its_ranks_slowest_first_then_rank_0s_tables(cluster, capsys):
    assert main(["analyze", str(cluster.path)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == f"Cluster {cluster.name}: 4 ranks ({cluster.path})"  # not the ClusterProfile's repr
    header = lines.index("Ranks, slowest (own time: Computing + Free) first (us per step, top 4 of 4):")
    assert lines[header + 1].split() == ["Rank", "Step", "Time(us)", "Own", "Time(us)", "Computing(us)",
                                         "Communication(Not", "Overlapped)(us)", "Free(us)", "Wait", "Time(us)",
                                         "Bound", "Slow"]
    rows = [line.split() for line in lines[header + 2:header + 2 + RANKS]]
    assert [int(r[0]) for r in rows] == list(cluster.slow_ranks["Rank"]) and rows[0][0] == str(SLOW_RANK)
    assert [r[-1] for r in rows] == ["True", "False", "False", "False"]
    rank0 = cluster.rank(0)
    assert lines[header + 2 + RANKS:header + 4 + RANKS] == ["", "The tables of rank 0:"]
    assert "step_trace (us):" in out and "op_statistic (top 10 op types):" in out
    notes = lines.index("Notes:")  # the cluster's own notes, then rank 0's
    assert lines[notes + 1:] == [*(f"  - {n}" for n in cluster.notes), *(f"  - rank 0: {n}" for n in rank0.notes)]


def test_analyze_json_of_a_cluster_is_one_json_document_and_nothing_else(cluster, capsys):
    assert main(["analyze", str(cluster.path), "--json", "--top", "2"]) == 0
    doc = json.loads(capsys.readouterr().out)  # the whole of stdout parses: no text tables before it
    rank0, ranks = cluster.rank(0), cluster.slow_ranks
    assert {k: doc[k] for k in ("run", "iterations", "op_tasks", "ranks", "rank", "slow_ranks")} == {
        "run": str(cluster.path), "iterations": 2, "op_tasks": len(rank0.op_summary), "ranks": [0, 1, 2, 3],
        "rank": 0, "slow_ranks": [SLOW_RANK]}
    assert [r["Rank"] for r in doc["rank_table"]] == list(ranks["Rank"].head(2))
    assert doc["notes"] == [*cluster.notes, *(f"rank 0: {n}" for n in rank0.notes)]


@pytest.mark.parametrize("fmt", ["ascend_pt", "parquet", "db", "msprof_db"])
def test_export_of_a_cluster_writes_every_rank_as_its_own(cluster, fmt, tmp_path, capsys):
    to = tmp_path / "export"
    assert main(["export", str(cluster.path), "--format", fmt, "--to", str(to)]) == 0
    assert capsys.readouterr().out.startswith(f"Wrote {to}\n")
    back = geprof_nb.load(to)
    assert isinstance(back, ClusterProfile) and list(back.ranks) == list(range(RANKS))
    for r in range(RANKS):
        assert len(back.rank(r).op_summary) == len(cluster.rank(r).op_summary) > 0
    if fmt == "ascend_pt":
        infos = {json.loads(f.read_text())["rank_id"]: f.parent.name for f in to.glob("*/profiler_info_*.json")}
        assert sorted(infos) == list(range(RANKS))
        assert all(name.startswith(f"vm-rank{r}_") and name.endswith("_ascend_pt") for r, name in infos.items())


@pytest.mark.parametrize("flags, message", [
    (["--format", "msprof"], "--format msprof: {root} is a cluster (ranks [0, 1, 2, 3]); accepted for a cluster: "
                             "ascend_pt, db, msprof_db, parquet (for msprof, export one rank's run directory)"),
    (["--format", "ascend_pt", "--rank", "1"], "--rank 1: {root} is a cluster, whose ranks are exported as their own "
                                               "ranks; accepted: --rank for one run only"),
])
def test_export_of_a_cluster_refuses_what_would_lose_its_ranks(cluster, flags, message, tmp_path, capsys):
    to = tmp_path / "export"
    assert main(["export", str(cluster.path), *flags, "--to", str(to)]) == 2
    assert capsys.readouterr().err == f"geprof export: {message.format(root=cluster.path)}\n"
    assert not to.exists()


@pytest.fixture
def one_run(run_profiled, tiny_graph) -> Path:
    return run_profiled(tiny_graph(world_size=1)[0], steps=2).profile.path


@pytest.mark.parametrize("fmt, under", [("msprof", ""), ("ascend_pt", ""), ("parquet", ""), ("chrome", "x.json"),
                                        ("db", ""), ("msprof_db", "")])
def test_export_that_cannot_write_is_one_line_naming_the_path(one_run, fmt, under, tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("keep me")
    to = blocker / under if under else blocker
    assert main(["export", str(one_run), "--format", fmt, "--to", str(to)]) == 1
    assert capsys.readouterr().err == (f"geprof export: --to {to}: cannot write the {fmt} export "
                                       f"({blocker} is a file, not a directory)\n")
    assert blocker.read_text() == "keep me"


def test_analyze_says_in_one_line_that_a_table_has_no_rows_and_prints_the_notes_that_say_why(one_run, tmp_path,
                                                                                            capsys):
    hwts = geprof_nb.load(one_run).info["records"]["hwts"]
    copy = tmp_path / "no_chunks"
    shutil.copytree(one_run, copy)
    shutil.rmtree(copy / "device_0")  # every device record is missing
    assert main(["analyze", str(copy)]) == 0
    p = geprof_nb.load(copy)
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"Run {p.name}: 0 op tasks, 0 iterations ({p.path})", "",
                     "Top 10 ops of the last iteration by Task Duration(us): no op data (see the notes below)", "",
                     "op_statistic (top 10 op types): no op data (see the notes below)", "",
                     "step_trace (us): no step data (see the notes below)", "",
                     "Findings: none (nothing crossed the advisor thresholds)", "",
                     "Notes:", *(f"  - {n}" for n in p.notes)]
    assert (f"  - hwts: {hwts} of {hwts} written records are missing (chunk files deleted, truncated or not "
            "copied)") in lines


def test_analyze_of_a_run_in_which_no_step_ran_says_so(tmp_path, capsys):
    """Profiling was on and no graph ran: the tables say that, not a flag to switch on."""
    out, mode = tmp_path / "zero", clock.mode
    try:
        assert ge.GEInitialize({"geprof.clock": "virtual", "ge.exec.profilingMode": "1",
                                "ge.exec.profilingOptions": json.dumps({"output": str(out)})}) == ge.SUCCESS
        ge.GEFinalize()
    finally:
        clock.set_mode(mode)
    run = next(out.glob("PROF_*"))
    assert main(["analyze", str(run)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:6] == ["", "Top 10 ops of the last iteration by Task Duration(us): no op data (no step ran while "
                              "profiling collected)", "", "op_statistic (top 10 op types): no op data (no step ran "
                              "while profiling collected)", ""]
    assert lines[6:9] == ["step_trace (us): no step data (no step ran while profiling collected)", "",
                          "Findings: none (no step ran while profiling collected)"]


def test_analyze_at_task_trace_l0_says_op_statistic_has_no_op_types_and_why(run_profiled, tiny_graph, capsys):
    p = run_profiled(tiny_graph(world_size=1)[0], steps=2, task_trace="l0").profile
    assert main(["analyze", str(p.path), "--top", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:3] == ["", f"{p.step_split.headline()} ({p.step_split.basis()}; step_trace's Iteration Time "
                              "below is an iteration's own span, without the gap before it)"]  # the step figure leads
    assert lines[4:6] == ["", "Top 1 ops of the last iteration by Task Duration(us):"]  # op rows, without OP Type
    assert lines[8:10] == ["", "op_statistic (top 1 op types): no op types (see the notes below)"]
    assert lines[lines.index("Notes:") + 1:] == [f"  - {n}" for n in p.notes]
    assert f"  - {OP_STATISTIC_L0_NOTE}" in lines


def test_analyze_keeps_the_tables_and_adds_the_notes_after_them(one_run, capsys):
    assert main(["analyze", str(one_run), "--top", "2"]) == 0
    p = geprof_nb.load(one_run)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"Run {p.name}: {len(p.op_summary):,} op tasks, 2 iterations ({p.path})"  # not the repr
    assert lines[1] == "" and lines[2].startswith(f"{p.step_split.headline()} (")
    split = p.step_split  # the parts of the step, in us, under the figure
    assert lines[3] == (f"  per step: Computing {split.computing_us:,.3f} us, exposed Communication "
                        f"{split.communication_us:,.3f} us, Free {split.free_us:,.3f} us")
    assert lines[4:6] == ["", "Top 2 ops of the last iteration by Task Duration(us):"]
    stat = lines.index("op_statistic (top 2 op types):")  # --top trims op_statistic too
    assert len(p.op_statistic) > 2 and lines[stat + 4] == ""
    steps = lines.index("step_trace (us):")
    assert [row.split()[0] for row in lines[steps + 2:steps + 4]] == ["1", "2"]
    findings = p.advise()
    if findings.empty:
        assert lines[steps + 4:steps + 6] == ["", "Findings: none (nothing crossed the advisor thresholds)"]
    else:
        assert lines[steps + 4:steps + 6 + min(2, len(findings))] == [
            "", f"Findings (top {min(2, len(findings))} of {len(findings)}, highest priority first):",
            *(f"  [{f.Priority}] {f.Rule}: {f.Finding}" for f in findings.head(2).itertuples())]
    notes = lines.index("Notes:")
    assert lines[notes - 1:] == ["", "Notes:", *(f"  - {n}" for n in p.notes)] and p.notes


def test_analyze_json_is_one_json_document_with_the_tables_and_findings(one_run, capsys):
    assert main(["analyze", str(one_run), "--json", "--top", "3"]) == 0
    doc = json.loads(capsys.readouterr().out)  # stdout is exactly one JSON document
    p = geprof_nb.load(one_run)
    split = p.step_split
    assert (doc["run"], doc["iterations"], doc["op_tasks"]) == (str(p.path), 2, len(p.op_summary))
    assert doc["step_split"]["headline"] == split.headline()
    assert doc["step_split"]["computing_us"] == pytest.approx(split.computing_us)
    assert doc["step_split"]["free_percent"] == pytest.approx(split.shares[2])
    top = p.ops().sort_values("Task Duration(us)", ascending=False).head(3)
    assert [r["Op Name"] for r in doc["top_ops"]] == list(top["Op Name"])
    assert [r["OP Type"] for r in doc["op_statistic"]] == list(p.op_statistic["OP Type"].head(3))
    assert [r["Iteration ID"] for r in doc["steps"]] == [1, 2]
    assert [f["Rule"] for f in doc["findings"]] == list(p.advise()["Rule"].head(3))
    assert doc["notes"] == p.notes


def test_analyze_of_an_ascend_pt_export_counts_its_iterations_and_shows_its_step_breakdown(one_run, tmp_path, capsys):
    exported = geprof_nb.load(one_run).export(tmp_path / "apt", format="ascend_pt")
    assert main(["analyze", str(exported), "--top", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    p = geprof_nb.load(exported)
    assert len(p.step_trace) == 0 and len(p.step_breakdown) == 2  # torch_npu writes no step_trace
    assert lines[0].endswith(" op tasks, 2 iterations ({p.path})".format(p=p))
    split = lines.index("step_breakdown (us):")
    assert lines[split + 1].split() == ["Step", "Computing", "Communication(Not", "Overlapped)", "Overlapped",
                                        "Communication", "Free"]
    rows = [line.split() for line in lines[split + 2:split + 4]]
    assert [r[:2] for r in rows] == [[str(step), f"{computing:.3f}"] for step, computing
                                     in zip(p.step_breakdown["Step"], p.step_breakdown["Computing"])]
    assert lines[split + 4] == "" and lines[split + 5].startswith("Findings") and not p.notes
    assert "step_trace (us)" not in lines
    main(["analyze", str(exported), "--json"])
    assert json.loads(capsys.readouterr().out)["iterations"] == 2


@pytest.mark.parametrize("command", ["demo", "run"])
def test_an_output_that_is_a_file_is_one_line_naming_the_flag_exit_2(command, script, tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("keep me")
    argv = (["demo", "--model", "mlp", "--steps", "1", "--output", str(blocker)] if command == "demo"
            else ["run", "--output", str(blocker), str(script), "1"])
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == (f"geprof {command}: --output {blocker}: cannot be used ([Errno 17] File exists: "
                                 f"'{blocker}'); accepted: a directory that can be created and written\n")
    assert blocker.read_text() == "keep me" and not msprof.lib.running


def test_demo_says_a_model_that_does_not_fit_once_and_what_to_change(tmp_path):
    # in its own process: pytest's log capture would hide a second copy printed by Python's last-resort handler
    argv = ["demo", "--model", "resnet50", "--steps", "2", "--batch-size", "4096", "--output", str(tmp_path)]
    done = subprocess.run([sys.executable, "-c", f"from geprof_nb.cli import main; raise SystemExit(main({argv!r}))"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert len(lines) == 2 and sum("of device memory" in line for line in lines) == 1
    assert lines[0].startswith("geprof demo: RunGraph failed: [FAILED] BuildGraph 1: graph 'resnet50' needs ")
    assert "of device memory" in lines[0] and "device Ascend910B has 68719476736 bytes (64.0 GiB)" in lines[0]
    assert lines[1] == ("  --model resnet50 at --batch-size 4096 does not fit Ascend910B's memory; "
                        "a smaller --batch-size needs less")


def test_demo_profiles_every_step_of_the_model_it_names(tmp_path, capsys):
    assert main(["demo", "--model", "mlp", "--steps", "2", "--batch-size", "8", "--world-size", "1",
                 "--device", "Ascend910A", "--output", str(tmp_path / "out"), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Profiling mlp training (batch 8, world size 1) for 2 steps on a simulated Ascend910A, "
                          "virtual clock ...\n")
    p = geprof_nb.load(run_dir_line(out))
    assert p.complete and p.info["clock"] == "virtual" and p.info["devices"]["0"]["name"] == "Ascend910A"
    assert p.info["cli"] == {"model": "mlp", "batch_size": 8, "world_size": 1, "steps": 2}
    assert list(p.step_trace["Iteration ID"]) == [1, 2] and len(p.op_summary) == 2 * len(p.ops())
    assert p.info["pmu_events"]["metrics"] == ["PipeUtilization"] and p.options["training_trace"] == "on"
    assert "Top 3 ops of the last iteration by Task Duration(us):" in out
    # where the time goes leads with the step figure: step 2, the one whole step period (step 1 spans only itself)
    assert out.splitlines()[1:3] == ["", f"{step_headline_by_hand(p, [2])} (mean of 1 step period, from one "
                                         "iteration's end to the next; step_trace's Iteration Time below is an "
                                         "iteration's own span, without the gap before it)"]
    assert (p.path / "step_timeline.png").is_file()
    # and where it goes: the step's parts in us and the findings (as `geprof analyze` prints them)
    split = p.step_split
    assert out.splitlines()[3] == (f"  per step: Computing {split.computing_us:,.3f} us, exposed Communication "
                                   f"{split.communication_us:,.3f} us, Free {split.free_us:,.3f} us")
    findings = p.advise()
    if findings.empty:  # a clean small model: the advisor says so (its launch gaps are below the thresholds)
        assert "Findings: none (nothing crossed the advisor thresholds)" in out.splitlines()
    else:
        assert f"Findings (top {min(3, len(findings))} of {len(findings)}, highest priority first):" in out
        assert f"  [{findings.Priority[0]}] {findings.Rule[0]}: {findings.Finding[0]}" in out
