"""Whether a device has an aic_metrics counter group is decided once (``prof.events.lacks_counter_group``):
every entry point refuses (or, for a run already open, notes) exactly what it decides, for every chip family
and every group."""

from __future__ import annotations

import json
import warnings

import pytest

from geprof_nb import cli, collect, ge
from geprof_nb.ge.device import PRESETS
from geprof_nb.ge.ge_prof import AIC_METRICS_NAMES
from geprof_nb.nb.config import ConfigError, ConfigStore
from geprof_nb.prof import msprof
from geprof_nb.prof.events import AIC_METRICS, lacks_counter_group
from geprof_nb.prof.options import ProfilingOptions, ProfilingOptionsError
from geprof_nb.prof.properties import GlobalProfilingWrapper

#: One preset of each chip family.
DEVICES = ("Ascend910A", "Ascend910B")
CASES = [(device, group) for device in DEVICES for group in AIC_METRICS]


def test_the_decision():
    assert {PRESETS[d].chip_family for d in DEVICES} == {p.chip_family for p in PRESETS.values()}
    lacking = {(d, g) for d, g in CASES if lacks_counter_group(g, PRESETS[d].chip_family)}
    assert lacking == {("Ascend910A", "L2Cache"), ("Ascend910A", "MemoryAccess")}
    assert not lacks_counter_group("", "910A") and not lacks_counter_group("Custom:0x49,0x8", "910A")


def _refused_by_the_config_store(device: str, group: str) -> bool:
    store = ConfigStore()
    try:
        store.check(store.parse_line(f"--device {device} --aic-metrics {group}")[0])
    except ConfigError:
        return True
    return False


def _refused_by_a_collection(device: str, group: str, tmp_path) -> bool:
    options = ProfilingOptions.parse({"output": str(tmp_path / "collection"), "aic_metrics": group})
    with ge.simulation_settings(device=device):
        try:
            run = collect.Collection.open(options)
        except ProfilingOptionsError:
            return True
        run.finish(None)
    return False


def _refused_by_geprof_run(device: str, group: str, tmp_path, capsys) -> bool:
    script = tmp_path / "script.py"
    script.write_text("x = 1\n")
    code = cli.main(["run", "--device", device, "--aic-metrics", group, "--output", str(tmp_path / "cli"), str(script)])
    capsys.readouterr()
    assert code in (0, 2)
    return code == 2


def _refused_by_ge_options(device: str, group: str, tmp_path) -> bool:
    status = ge.GEInitialize({"geprof.device": device, "ge.exec.profilingMode": "1",
                              "ge.exec.profilingOptions": json.dumps({"output": str(tmp_path / "ge"),
                                                                      "aic_metrics": group})})
    if status == ge.SUCCESS:
        ge.GEFinalize()
    return status == ge.PARAM_INVALID


def _refused_by_the_c_api(device: str, group: str) -> bool | None:
    metric = next((m for m, name in AIC_METRICS_NAMES.items() if name == group), None)
    if metric is None:
        return None  # a group without a ProfilingAicoreMetrics value
    assert ge.GEInitialize({"geprof.device": device}) == ge.SUCCESS
    try:
        return ge.aclgrphProfCreateConfig([0], metric, 2) is None
    finally:
        ge.GEFinalize()


def _noted_by_the_device(device: str, group: str, tmp_path) -> bool:
    """A run opened first (a %%geprof cell, the C API), then GE brings the device up inside it."""
    msprof.lib.init(tmp_path / "device", {"aic_metrics": group})
    msprof.lib.start(ProfilingOptions.parse({"aic_metrics": group}).data_type_config())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert ge.GEInitialize({"geprof.device": device}) == ge.SUCCESS
    noted = any("has no such counter group" in n for n in msprof.lib.notes)
    msprof.lib.finalize()  # first: its STOP reaches GE, which switches its layers off (after GEFinalize none would)
    ge.GEFinalize()
    assert noted == any("has no such counter group" in str(w.message) for w in caught)
    return noted


@pytest.mark.parametrize("device, group", CASES)
def test_every_entry_point_refuses_what_the_one_decision_refuses(device, group, tmp_path, capsys):
    lacks = lacks_counter_group(group, PRESETS[device].chip_family)
    answers = {
        "%geprof config / %%geprof flags": _refused_by_the_config_store(device, group),
        "a collection (%%geprof, geprof run, profile())": _refused_by_a_collection(device, group, tmp_path),
        "geprof run --device": _refused_by_geprof_run(device, group, tmp_path, capsys),
        "GE options": _refused_by_ge_options(device, group, tmp_path),
        "the device in a run already open": _noted_by_the_device(device, group, tmp_path),
    }
    c_api = _refused_by_the_c_api(device, group)
    if c_api is not None:
        answers["aclgrphProfCreateConfig"] = c_api
    assert answers == dict.fromkeys(answers, lacks)
    assert not GlobalProfilingWrapper.enable_flags  # nothing left collecting for the next test
