"""%%geprof? and %geprof? explain every flag and every command, with examples."""

import contextlib
import io
import re

import pytest
from IPython.core.error import UsageError

from geprof_nb.nb.config import CONFIG_FIELDS, FLAG_OF


def help_of(ip, text):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ip.run_cell(text)
    return out.getvalue()


def test_cell_magic_help_has_usage_every_flag_and_examples(ip):
    doc = ip.find_cell_magic("geprof").__doc__
    shown = help_of(ip, "%%geprof?")
    assert "%%geprof [--output DIR]" in doc and "%%geprof [--output DIR]" in shown
    for field in CONFIG_FIELDS:
        assert FLAG_OF[field] in doc.split("Examples:")[0], field
    for flag in ("-o NAME", "--no-display"):
        assert flag in doc
    for text in ("profilingOptions fields:", "simulation (default: as GE is initialised):",
                 "step schedule (torch.profiler.schedule):", "%geprof config", "Ctrl-C", "KeyboardInterrupt",
                 "Examples:", "%%geprof --skip-first 10 --wait 1 --warmup 1 --active 3 --repeat 2",
                 "records steps 12-14 and 17-19", "%%geprof --device Ascend910A"):
        assert text in doc, text
    examples = doc.split("Examples:")[1]
    used = {FLAG_OF[f] for f in CONFIG_FIELDS if FLAG_OF[f] + " " in examples}
    assert len(used) >= 18  # nearly every flag appears in an example


def test_custom_aic_metrics_and_their_range_are_in_the_help_and_the_readme(ip):
    """The --aic-metrics error accepts Custom:0x..; the help says so, with the event id range (and so does
    docs/reference/flags.md, made from the help: tests/test_docs.py)."""
    help_text = " ".join(ip.find_cell_magic("geprof").__doc__.split())  # argparse wraps the help
    assert "or Custom:0x49,0x8,... (up to 8 PMU event ids in [0x1, 0x6E])" in help_text
    with pytest.raises(UsageError, match=r"'Custom:0x6F' is not valid; accepted: 'Custom:' and 1 to 8 hex event ids "
                                         r"in \[0x1, 0x6E\]"):
        ip.run_cell_magic("geprof", "--aic-metrics Custom:0x6F", "pass")


def test_fp_bp_point_example_gives_a_positive_fp_to_bp_time_on_the_mlp(ip):
    """The help's own-FP/BP example names ops of ge.models.mlp with the BP point after the FP point."""
    doc = ip.find_cell_magic("geprof").__doc__
    example = next(line for line in doc.split("Examples:")[1].splitlines() if "--bp-point" in line)
    flags = example.split("%%geprof", 1)[1].split("#", 1)[0].strip()
    cell = "sess = ge.Session()\nsess.add_graph(1, ge.models.mlp(batch_size=8, training=True))\n" \
           "for s in range(3):\n    sess.run_graph(1)\n"
    with contextlib.redirect_stdout(io.StringIO()):
        ip.run_cell_magic("geprof", flags + " --clock virtual --no-display", cell)
    profile = ip.user_ns["_geprof"]
    fp, bp = flags.split("--fp-point ")[1].split()[0], flags.split("--bp-point ")[1].split()[0]
    assert profile.options["fp_point"] == fp and profile.options["bp_point"] == bp
    assert len(profile.step_trace) == 3 and (profile.step_trace["FP to BP Time(us)"] > 0).all()
    assert not any("runs before FP point" in n for n in profile.notes)


@pytest.mark.parametrize("command", ["config", "show", "load", "export", "compare", "advise", "help"])
def test_line_magic_help_lists_every_command_with_an_example(ip, command):
    doc = ip.find_line_magic("geprof").__doc__
    assert f"%geprof {command}" in doc
    assert f"%geprof {command}" in help_of(ip, "%geprof?")


def test_help_command_lists_config_too(ip, capsys):
    ip.run_line_magic("geprof", "help")
    out = capsys.readouterr().out
    assert "config" in out and "defaults of later %%geprof cells" in out
    assert "--skip-first" in out and "--device" in out


@pytest.mark.parametrize("line", ["config -h", "show -h", "-h"])
def test_dash_h_prints_help_instead_of_exiting(ip, capsys, line):
    assert ip.run_line_magic("geprof", line) is None
    assert "usage: %geprof" in capsys.readouterr().out


def test_help_shows_the_defaults_in_force_after_config_or_the_panel_changed_them(ip):
    """After ``%geprof config --aic-metrics Memory`` (what the panel's dropdown does), %%geprof? and
    %geprof help say Memory is the default, and say PipeUtilization again after ``--reset``."""
    def flag_help(text, flag):
        words = " ".join(text.split())  # argparse wraps the help
        return words.split(f" {flag} ", 1)[1].split(" --", 1)[0]

    assert flag_help(help_of(ip, "%%geprof?"), "--aic-metrics").endswith("(default: PipeUtilization)")
    ip.run_line_magic("geprof", "config --aic-metrics Memory --active 3")
    for shown in (help_of(ip, "%%geprof?"), help_of(ip, "%geprof help")):
        assert flag_help(shown, "--aic-metrics").endswith(
            "(default: Memory, set by %geprof config instead of PipeUtilization)")
        assert flag_help(shown, "--active N").endswith("(default: 3, set by %geprof config instead of 0)")
        assert flag_help(shown, "--hccl").endswith("(default: off)")  # not changed: as it was
    store = ip.magics_manager.registry["GeprofMagics"].cell_defaults
    store.update({"aic_metrics": "MemoryUB"})  # the panel stores its widgets' values so
    assert flag_help(help_of(ip, "%%geprof?"), "--aic-metrics").endswith(
        "(default: MemoryUB, set by %geprof config instead of PipeUtilization)")
    ip.run_line_magic("geprof", "config --reset")
    assert flag_help(help_of(ip, "%%geprof?"), "--aic-metrics").endswith("(default: PipeUtilization)")


def test_every_flag_help_ends_with_its_default(ip):
    """What lets the help say the defaults in force: each field's flag help ends "(default: ...)"."""
    actions = {a.dest: a for a in ip.find_cell_magic("geprof").__func__.parser._actions}
    for field in CONFIG_FIELDS:
        assert re.search(r"\(default: [^()]*\)$", actions[field].help), (field, actions[field].help)


def test_help_is_plain_text_without_rest_markup(ip):
    """A notebook shows %%geprof? and %geprof? as they are: no ``::`` blocks, ``literal`` quotes or
    ``<on|off>`` brackets (IPython's reST help formatter)."""
    for shown in (help_of(ip, "%%geprof?"), help_of(ip, "%geprof?"), help_of(ip, "%geprof help")):
        assert "::" not in shown and "``" not in shown and "<on|off>" not in shown
    shown = help_of(ip, "%%geprof?")
    assert "usage: %%geprof [--output DIR] [--training-trace on|off]" in shown
    assert "\nProfile the cell on the simulated GE runtime" in shown and "\nEvery profilingOptions field" in shown
