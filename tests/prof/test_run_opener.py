"""What opened the open run, read from the mode msprof recorded for it: the words both refusals of a
second run use (AlreadyCollecting and aclgrphProfInit)."""

from __future__ import annotations

import pytest

from geprof_nb.prof import msprof, rawdata
from geprof_nb.prof.run_opener import UNKNOWN_OPENER, OpenRun, open_run


@pytest.mark.parametrize("mode, opened_by, finish", [
    ("magic", "a %%geprof cell", "let it finish first"),
    ("cli", "geprof run", "let it finish first"),
    ("profile", "a geprof_nb.profile() block", "let it finish first"),
    ("api", "aclgrphProfInit", "finish that run first (aclgrphProfFinalize())"),
    ("ge_options", "GE's profiling options (ge.exec.profilingMode or the environment)",
     "finish that run first (ge.GEFinalize())"),
])
def test_the_opener_is_the_mode_the_run_was_opened_in(mode, opened_by, finish, tmp_path):
    lib = msprof.Msprof()
    run_dir = lib.init(tmp_path, mode=mode)
    try:
        assert open_run(lib) == OpenRun(run_dir, opened_by, finish)
    finally:
        lib.finalize()
    assert open_run(lib) is None


def test_a_run_opened_without_a_mode_is_ges_own(tmp_path):
    lib = msprof.Msprof()
    lib.init(tmp_path)
    try:
        assert open_run(lib).opened_by == "GE's profiling options (ge.exec.profilingMode or the environment)"
    finally:
        lib.finalize()


def test_the_opener_is_known_when_the_runs_info_json_is_gone(tmp_path):
    lib = msprof.Msprof()
    run_dir = lib.init(tmp_path, mode="magic")
    (run_dir / rawdata.INFO_FILE).unlink()
    try:
        assert lib.mode == "magic"
        assert open_run(lib) == OpenRun(run_dir, "a %%geprof cell", "let it finish first")
    finally:
        lib.finalize()
    assert lib.mode is None


def test_a_mode_of_no_known_opener_names_every_opener_that_ends_its_own_run(tmp_path):
    lib = msprof.Msprof()
    run_dir = lib.init(tmp_path, mode="tool_of_the_future")
    try:
        assert open_run(lib) == OpenRun(run_dir, *UNKNOWN_OPENER)
        assert UNKNOWN_OPENER[0] == ("GE's profiling options (ge.exec.profilingMode or the environment) or "
                                     "aclgrphProfInit")
    finally:
        lib.finalize()
