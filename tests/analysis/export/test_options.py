"""Profile.export's dispatcher: an option the format does not take is refused naming it, the formats
that take it and the options the format takes, before anything is written."""

from __future__ import annotations

import pytest

from geprof_nb.analysis.export import FORMATS, writer, writer_options
from helpers.geprof_testing import build_tiny_graph, run_profiled_session


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    return run_profiled_session(tmp_path_factory.mktemp("tiny") / "run", build_tiny_graph(world_size=2)[0], 2).profile


def test_each_formats_options_are_its_writers_keyword_parameters():
    assert {f: writer_options(writer(f)) for f in FORMATS} == {
        "msprof": ("slice_rows", "timeline"), "ascend_pt": ("rank", "worker", "world_size"), "chrome": (),
        "parquet": ("compression", "overwrite"), "db": ("rank", "worker", "world_size"),
        "msprof_db": ("rank", "world_size")}


@pytest.mark.parametrize("fmt, options, text", [
    ("msprof", {"rank": 1},
     "export option rank is accepted only with format='ascend_pt' or 'db' or 'msprof_db'; "
     "format='msprof' takes slice_rows, timeline"),
    ("chrome", {"rank": 1},
     "export option rank is accepted only with format='ascend_pt' or 'db' or 'msprof_db'; format='chrome' takes no options"),
    ("parquet", {"rank": 1},
     "export option rank is accepted only with format='ascend_pt' or 'db' or 'msprof_db'; "
     "format='parquet' takes compression, overwrite"),
    ("chrome", {"timeline": False},
     "export option timeline is accepted only with format='msprof'; format='chrome' takes no options"),
    ("ascend_pt", {"overwrite": True},
     "export option overwrite is accepted only with format='parquet'; format='ascend_pt' takes rank, worker, world_size"),
    ("msprof", {"colour": "red"}, "unknown export option colour; format='msprof' takes slice_rows, timeline"),
])
def test_an_option_the_format_does_not_take_is_refused_naming_it(profile, tmp_path, fmt, options, text):
    with pytest.raises(ValueError) as err:
        profile.export(tmp_path / "out", format=fmt, **options)
    assert str(err.value) == text
    assert not (tmp_path / "out").exists()


def test_the_formats_own_options_still_apply(profile, tmp_path):
    written = profile.export(tmp_path / "out", format="msprof", timeline=False)
    assert not list((written / "mindstudio_profiler_output").glob("msprof_*.json"))
    assert list((written / "mindstudio_profiler_output").glob("op_summary_*.csv"))
    assert (profile.export(tmp_path / "apt", format="ascend_pt", rank=3) / "profiler_info_3.json").is_file()
