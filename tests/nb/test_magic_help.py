"""%%geprof? and %geprof? explain every flag and every command, with examples."""

import contextlib
import io

import pytest

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
        assert FLAG_OF[field] in doc.split("Examples::")[0], field
    for flag in ("-o NAME", "--no-display"):
        assert flag in doc
    for text in ("profilingOptions fields:", "simulation (default: as GE is initialised):",
                 "step schedule (torch.profiler.schedule):", "%geprof config", "Ctrl-C", "KeyboardInterrupt",
                 "Examples::", "%%geprof --skip-first 10 --wait 1 --warmup 1 --active 3 --repeat 2",
                 "records steps 12-14 and 17-19", "%%geprof --device Ascend910A"):
        assert text in doc, text
    examples = doc.split("Examples::")[1]
    used = {FLAG_OF[f] for f in CONFIG_FIELDS if FLAG_OF[f] + " " in examples}
    assert len(used) >= 18  # nearly every flag appears in an example


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
