"""Where profiling is switched on from (reference §2): GE options first, then the environment
(``PROFILING_MODE``/``PROFILING_OPTIONS``, or ``GE_PROFILING_MODE``/``GE_PROFILING_OPTIONS``), else off.

Driven end to end through ``GEInitialize``: what is checked is the run that comes out.
"""

from __future__ import annotations

import json

import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.prof import events, msprof
from geprof_nb.prof.options import DEFAULT_ENV_OPTIONS, ProfilingOptions
from geprof_nb.prof.properties import (
    BIT_DEVICE,
    BIT_TASK_TIME,
    BIT_TRAINING_TRACE,
    GlobalProfilingWrapper,
    ProfilingProperties,
)

ENV_NAMES = ("PROFILING_MODE", "PROFILING_OPTIONS", "GE_PROFILING_MODE", "GE_PROFILING_OPTIONS", "ASCEND_WORK_PATH")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    """No profiling variable of the outer environment leaks in."""
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def tiny_mlp() -> ge.Graph:
    return ge.models.mlp(batch_size=4, in_features=16, hidden=(16,))


def run_steps(steps: int = 2) -> int:
    """add_graph + run_graph x steps; the number of kernel tasks per step."""
    s = ge.Session()
    assert s.add_graph(1, tiny_mlp()) == ge.SUCCESS
    for _ in range(steps):
        assert s.run_graph(1) == ge.SUCCESS, ge.GEGetErrorMsg()
    return sum(1 for k in s.model(1).table.kernels if k is not None)


def ge_options(output, **fields) -> dict[str, str]:
    return {"geprof.clock": "virtual", "ge.exec.profilingMode": "1",
            "ge.exec.profilingOptions": json.dumps({"output": str(output), **fields})}


def test_ge_options_win_over_the_environment(tmp_path, clean_env):
    clean_env.setenv("PROFILING_MODE", "true")
    clean_env.setenv("PROFILING_OPTIONS", json.dumps({"output": str(tmp_path / "env"), "aic_metrics": "Memory"}))
    assert ge.GEInitialize(ge_options(tmp_path / "ge", aic_metrics="MemoryUB")) == ge.SUCCESS
    assert msprof.lib.run_dir.parent == (tmp_path / "ge").resolve()
    run_steps()
    ge.GEFinalize()
    assert not (tmp_path / "env").exists()
    p = geprof_nb.load(tmp_path / "ge")
    assert p.info["mode"] == "ge_options" and p.info["pmu_events"]["metrics"] == ["MemoryUB"]


def test_ascend_work_path_is_the_output_root_when_the_options_name_none(tmp_path, clean_env, monkeypatch):
    clean_env.setenv("ASCEND_WORK_PATH", str(tmp_path / "work"))
    monkeypatch.chdir(tmp_path)
    opts = {"geprof.clock": "virtual", "ge.exec.profilingMode": "1",
            "ge.exec.profilingOptions": json.dumps({"training_trace": "on"})}
    assert ge.GEInitialize(opts) == ge.SUCCESS
    assert msprof.lib.run_dir.parent == (tmp_path / "work").resolve()
    run_steps(2)
    ge.GEFinalize()
    assert list(geprof_nb.load(tmp_path / "work").step_trace["Iteration ID"]) == [1, 2]
    assert not list(tmp_path.glob("PROF_*"))  # nothing in the working directory


def test_an_output_field_overrides_ascend_work_path(tmp_path, clean_env):
    clean_env.setenv("ASCEND_WORK_PATH", str(tmp_path / "work"))
    assert ge.GEInitialize(ge_options(tmp_path / "out")) == ge.SUCCESS
    assert msprof.lib.run_dir.parent == (tmp_path / "out").resolve()
    ge.GEFinalize()
    assert not (tmp_path / "work").exists()


@pytest.mark.parametrize("value, output", [("", "./"), ("/data/prof", "/data/prof"), ("rel/dir", "rel/dir")])
def test_parse_takes_ascend_work_path_as_the_default_output(clean_env, value, output):
    clean_env.setenv("ASCEND_WORK_PATH", value)
    assert ProfilingOptions.parse({"training_trace": "on"}).output == output
    assert ProfilingOptions.parse({"output": "mine"}).output == "mine"
    assert ProfilingOptions.parse({"result_path": "legacy"}).output == "legacy"


@pytest.mark.parametrize("mode_name, options_name", [("PROFILING_MODE", "PROFILING_OPTIONS"),
                                                     ("GE_PROFILING_MODE", "GE_PROFILING_OPTIONS")])
def test_environment_enables_profiling_through_ge_initialize(tmp_path, clean_env, mode_name, options_name):
    clean_env.setenv(mode_name, "true")
    clean_env.setenv(options_name, json.dumps({"output": str(tmp_path), "training_trace": "on",
                                               "aic_metrics": "Memory"}))
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    assert msprof.lib.running and msprof.lib.started
    kernels = run_steps(2)
    ge.GEFinalize()  # GE started this run, GE finalises it
    assert not msprof.lib.running
    p = geprof_nb.load(tmp_path)
    assert p.complete
    assert len(p.op_summary) == 2 * kernels
    assert list(p.step_trace["Iteration ID"]) == [1, 2]
    assert p.info["pmu_events"]["metrics"] == ["Memory"]


def test_profiling_mode_names_take_priority_over_ge_profiling_mode_names(tmp_path, clean_env):
    clean_env.setenv("PROFILING_MODE", "true")
    clean_env.setenv("PROFILING_OPTIONS", json.dumps({"output": str(tmp_path / "a")}))
    clean_env.setenv("GE_PROFILING_MODE", "true")
    clean_env.setenv("GE_PROFILING_OPTIONS", json.dumps({"output": str(tmp_path / "b")}))
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    assert msprof.lib.run_dir.parent == (tmp_path / "a").resolve()


@pytest.mark.parametrize("options_value", [None, ""], ids=["unset", "empty"])
def test_environment_with_empty_options_uses_the_default_options_string(tmp_path, clean_env, options_value):
    clean_env.chdir(tmp_path)
    clean_env.setenv("PROFILING_MODE", "true")
    if options_value is not None:
        clean_env.setenv("PROFILING_OPTIONS", options_value)
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    opts = ProfilingProperties.instance().options
    assert (opts.output, opts.training_trace, opts.task_trace, opts.hccl, opts.aicpu, opts.aic_metrics,
            opts.msproftx) == ("./", "on", "on", "on", "on", "PipeUtilization", "off")
    switch = ProfilingProperties.instance().switch
    for mask in (events.PROF_TRAINING_TRACE_MASK, events.PROF_TASK_TIME_MASK, events.PROF_TASK_TIME_L1_MASK,
                 events.PROF_HCCL_TRACE_MASK, events.PROF_AICPU_TRACE_MASK, events.PROF_AICORE_METRICS_MASK):
        assert switch & mask
    assert not switch & events.PROF_MSPROFTX_MASK
    flags = GlobalProfilingWrapper.enable_flags
    assert flags & BIT_TASK_TIME and flags & BIT_DEVICE and flags & BIT_TRAINING_TRACE
    assert msprof.lib.run_dir.parent == tmp_path.resolve()  # output "./" is the working directory
    kernels = run_steps(1)
    ge.GEFinalize()
    p = geprof_nb.load(tmp_path)
    assert len(p.op_summary) == kernels and list(p.step_trace["Iteration ID"]) == [1]
    assert p.info["pmu_events"]["metrics"] == ["PipeUtilization"]
    assert p.options["hccl"] == "on" and p.options["aicpu"] == "on" and p.options["training_trace"] == "on"


def test_default_options_string_is_ges():
    assert json.loads(DEFAULT_ENV_OPTIONS) == {
        "output": "./", "training_trace": "on", "task_trace": "on", "hccl": "on", "aicpu": "on",
        "aic_metrics": "PipeUtilization", "msproftx": "off"}


@pytest.mark.parametrize("value", ["True", "TRUE", "1", "on", "yes", "false", ""])
def test_profiling_mode_other_than_true_is_off(tmp_path, clean_env, value):
    clean_env.chdir(tmp_path)
    clean_env.setenv("PROFILING_MODE", value)
    clean_env.setenv("PROFILING_OPTIONS", json.dumps({"output": str(tmp_path / "env")}))
    clean_env.setenv("GE_PROFILING_MODE", value)
    clean_env.setenv("GE_PROFILING_OPTIONS", json.dumps({"output": str(tmp_path / "env")}))
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    assert not msprof.lib.running and GlobalProfilingWrapper.enable_flags == 0
    run_steps(1)
    ge.GEFinalize()
    assert not (tmp_path / "env").exists() and not list(tmp_path.glob("PROF_*"))


def test_ge_profiling_mode_zero_falls_back_to_the_environment(tmp_path, clean_env):
    clean_env.setenv("PROFILING_MODE", "true")
    clean_env.setenv("PROFILING_OPTIONS", json.dumps({"output": str(tmp_path)}))
    assert ge.GEInitialize({"geprof.clock": "virtual", "ge.exec.profilingMode": "0",
                            "ge.exec.profilingOptions": json.dumps({"output": str(tmp_path / "ge")})}) == ge.SUCCESS
    assert msprof.lib.run_dir.parent == tmp_path.resolve()


@pytest.mark.parametrize("options", [None, "", "   "], ids=["missing", "empty", "blank"])
def test_ge_profiling_mode_on_with_empty_options_is_param_invalid(tmp_path, clean_env, options):
    clean_env.chdir(tmp_path)
    ge_opts = {"geprof.clock": "virtual", "ge.exec.profilingMode": "1"}
    if options is not None:
        ge_opts["ge.exec.profilingOptions"] = options
    assert ge.GEInitialize(ge_opts) == ge.PARAM_INVALID
    msg = ge.GEGetErrorMsg()
    assert "ge.exec.profilingOptions" in msg and "is empty" in msg
    assert not ge.session.is_initialized() and not msprof.lib.running and not list(tmp_path.glob("PROF_*"))
    # nothing was left half-initialised: a correct call works
    assert ge.GEInitialize(ge_options(tmp_path)) == ge.SUCCESS and msprof.lib.running


def test_environment_with_bad_options_is_param_invalid_naming_the_field(tmp_path, clean_env):
    clean_env.setenv("PROFILING_MODE", "true")
    clean_env.setenv("PROFILING_OPTIONS", json.dumps({"output": str(tmp_path), "task_trace": "maybe"}))
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.PARAM_INVALID
    assert "'task_trace'" in ge.GEGetErrorMsg() and "'maybe'" in ge.GEGetErrorMsg()
    assert not msprof.lib.running


def test_resolve_priority_without_ge():
    env = {"PROFILING_MODE": "true", "PROFILING_OPTIONS": '{"output": "/env"}'}
    assert ProfilingOptions.resolve({}, {}) is None
    assert ProfilingOptions.resolve({}, env).output == "/env"
    assert ProfilingOptions.resolve({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": '{"output": "/ge"}'},
                                    env).output == "/ge"
    assert ProfilingOptions.resolve({}, {"GE_PROFILING_MODE": "true"}).output == "./"
    assert ProfilingOptions.resolve({}, {"PROFILING_OPTIONS": '{"output": "/env"}'}) is None
