"""ProfilingOptions: parsing, validation messages, sources (GE options > env > off)."""

from __future__ import annotations

import json
import warnings

import pytest

from geprof_nb import ge
from geprof_nb.ge.runtime import L2_NOTE
from geprof_nb.ge.session import is_initialized
from geprof_nb.prof import events
from geprof_nb.prof.msprof import lib
from geprof_nb.prof.options import DEFAULT_ENV_OPTIONS, ProfilingOptions, ProfilingOptionsError
from helpers.geprof_testing import build_tiny_graph, run_profiled_session

ALL_METRICS = ("ArithmeticUtilization", "PipeUtilization", "Memory", "MemoryL0", "MemoryUB",
               "ResourceConflictRatio", "L2Cache", "MemoryAccess")


def test_defaults_are_ges(monkeypatch):
    monkeypatch.delenv("ASCEND_WORK_PATH", raising=False)
    o = ProfilingOptions()
    assert (o.output, o.training_trace, o.task_trace, o.aic_metrics, o.fp_point, o.bp_point) == (
        "./", "off", "on", "PipeUtilization", "", "")
    assert o.task_level == "l1" and not o.training_trace_on and o.storage_limit_mb is None
    assert ProfilingOptions.parse("{}") == o


def test_parse_valid_options():
    o = ProfilingOptions.parse(json.dumps({
        "output": "/tmp/p", "training_trace": "on", "task_trace": "l0", "fp_point": "a/b", "bp_point": "c",
        "aic_metrics": "Memory", "storage_limit": "500MB", "hccl": "on", "aicpu": "off", "msproftx": "on",
        "sys_hardware_mem_freq": 50, "host_sys": "cpu, mem", "llc_profiling": "read"}))
    assert o.output == "/tmp/p" and o.training_trace_on and o.task_level == "l0"
    assert (o.fp_point, o.bp_point, o.aic_metrics) == ("a/b", "c", "Memory")
    assert o.storage_limit_mb == 500 and o.sys_hardware_mem_freq == "50" and o.host_sys == "cpu,mem"
    assert ProfilingOptions.parse({"output": "x"}).output == "x"  # a dict works too
    assert ProfilingOptions.parse(b'{"output": "y"}').output == "y"


def test_legacy_and_alias_fields():
    assert ProfilingOptions.parse('{"result_path": "/r"}').output == "/r"
    assert ProfilingOptions.parse('{"task_time": "l0"}').task_trace == "l0"
    assert ProfilingOptions.parse('{"task_time": "l1", "task_trace": "l1"}').task_trace == "l1"
    with pytest.raises(ProfilingOptionsError, match="task_time") as exc:
        ProfilingOptions.parse('{"task_time": "l0", "task_trace": "on"}')
    assert exc.value.field == "task_time"


@pytest.mark.parametrize("text", ['{"result_path": "a", "output": "b"}', '{"output": "b", "result_path": "a"}'])
def test_result_path_and_output_with_different_values_conflict_in_either_order(text):
    with pytest.raises(ProfilingOptionsError) as exc:
        ProfilingOptions.parse(text)
    assert str(exc.value) == ("profiling option 'result_path': 'a' conflicts with output 'b'; accepted: one of "
                              "them, or both with the same value")
    assert exc.value.field == "result_path"
    assert ProfilingOptions.parse('{"output": "a", "result_path": "a"}').output == "a"


def _error(text):
    with pytest.raises(ProfilingOptionsError) as exc:
        ProfilingOptions.parse(text)
    return exc.value


BAD = [
    # (id, options text, field, substrings the message must contain)
    ("malformed-json", '{"output": "./p", ', "ge.exec.profilingOptions", ["not valid JSON", "a JSON object"]),
    ("json-array", '["output", "./p"]', "ge.exec.profilingOptions", ["must be a JSON object, got a JSON array"]),
    ("json-string", '"on"', "ge.exec.profilingOptions", ["must be a JSON object, got a JSON string"]),
    ("empty", "   ", "ge.exec.profilingOptions", ["is empty"]),
    ("unknown-aic-metrics", '{"aic_metrics": "PipeUtilisation"}', "aic_metrics",
     ["'PipeUtilisation' is not valid", *ALL_METRICS, "Custom:"]),
    ("training-trace-bool", '{"training_trace": true}', "training_trace",
     ["must be a string, got JSON boolean true", "'on'", "'off'"]),
    ("training-trace-value", '{"training_trace": "yes"}', "training_trace", ["'yes' is not valid", "'on', 'off', ''"]),
    ("task-trace-value", '{"task_trace": "l2"}', "task_trace", ["'l2' is not valid", "'on', 'off', 'l0', 'l1'"]),
    ("task-trace-number", '{"task_trace": 1}', "task_trace", ["must be a string, got JSON number 1"]),
    ("storage-no-unit", '{"storage_limit": "200"}', "storage_limit", ["the unit MB is required", "'<n>MB'",
                                                                     "200 <= n <= 4294967295"]),
    ("storage-wrong-unit", '{"storage_limit": "200GB"}', "storage_limit", ["the unit MB is required"]),
    ("storage-too-small", '{"storage_limit": "199MB"}', "storage_limit", ["199MB is out of range", "200 <= n"]),
    ("storage-too-large", '{"storage_limit": "4294967296MB"}', "storage_limit", ["out of range"]),
    ("checkpoint-too-short", '{"checkpoint_interval": "0.05"}', "checkpoint_interval",
     ["'0.05' is out of range", "seconds, 0.1 to 3600"]),
    ("checkpoint-too-long", '{"checkpoint_interval": 3601}', "checkpoint_interval", ["3601 is out of range"]),
    ("checkpoint-nan", '{"checkpoint_interval": "nan"}', "checkpoint_interval", ["'nan' is not a number of seconds"]),
    ("checkpoint-unit", '{"checkpoint_interval": "2s"}', "checkpoint_interval", ["'2s' is not a number of seconds"]),
    ("checkpoint-exponent", '{"checkpoint_interval": "1e3"}', "checkpoint_interval", ["not a number of seconds"]),
    ("checkpoint-bool", '{"checkpoint_interval": true}', "checkpoint_interval",
     ["must be a number of seconds, got JSON boolean true"]),
    ("checkpoint-negative", '{"checkpoint_interval": -1}', "checkpoint_interval", ["-1 is out of range"]),
    ("hccl-value", '{"hccl": "true"}', "hccl", ["'true' is not valid", "'on', 'off'"]),
    ("output-empty", '{"output": " "}', "output", ["is empty"]),
    ("freq-range", '{"sys_hardware_mem_freq": 101}', "sys_hardware_mem_freq", ["101 is out of range", "1..100"]),
    ("freq-bool", '{"dvpp_freq": true}', "dvpp_freq", ["must be an integer, got JSON boolean true", "1..100"]),
    ("freq-float", '{"sys_hardware_mem_freq": 1.5}', "sys_hardware_mem_freq",
     ["must be an integer, got JSON number 1.5"]),
    ("host-sys", '{"host_sys": "cpu,gpu"}', "host_sys", ["'cpu,gpu' is not valid", "cpu,mem,disk,network,osrt"]),
    ("custom-too-many", '{"aic_metrics": "Custom:0x1,0x2,0x3,0x4,0x5,0x6,0x7,0x8,0x9"}', "aic_metrics",
     ["names 9 events"]),
    ("custom-range", '{"aic_metrics": "Custom:0x6F"}', "aic_metrics", ["out of range", "0x6E"]),
    ("custom-hex", '{"aic_metrics": "Custom:zz"}', "aic_metrics", ["'zz' is not a hex number"]),
    ("fp-point-type", '{"fp_point": 3}', "fp_point", ["must be a string"]),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_options_name_field_and_accepted_values(case):
    _, text, field, parts = case
    err = _error(text)
    assert err.field == field
    msg = str(err)
    assert msg.startswith(f"profiling option {field!r}: ")
    for part in parts:
        assert part in msg, (part, msg)


def test_custom_metrics_are_normalised():
    assert ProfilingOptions.parse('{"aic_metrics": "Custom:0x49, 0X8"}').aic_metrics == "Custom:0x49,0x8"


@pytest.mark.parametrize("value", ["200MB", "4294967295MB", " 1024 MB "])
def test_storage_limit_accepted(value):
    o = ProfilingOptions.parse(json.dumps({"storage_limit": value}))
    assert o.storage_limit_mb == int(value.strip()[:-2])


@pytest.mark.parametrize("value, canonical", [("1", "1"), (" 0.5 ", "0.5"), (2, "2"), (0.1, "0.1"), ("3600", "3600"),
                                              (".25", "0.25"), ("", "")])
def test_checkpoint_interval_accepted(value, canonical):
    assert ProfilingOptions.parse(json.dumps({"checkpoint_interval": value})).checkpoint_interval == canonical


def test_unknown_field_warns_not_errors():
    with pytest.warns(UserWarning, match=r"profiling option 'colour' is not known to GE and is ignored"):
        o = ProfilingOptions.parse('{"output": "./x", "colour": "red"}')
    assert o.output == "./x"


@pytest.mark.parametrize("case", [c for c in BAD if c[0] in (
    "malformed-json", "json-array", "unknown-aic-metrics", "training-trace-bool", "task-trace-value",
    "storage-no-unit", "storage-too-small")], ids=lambda c: c[0])
def test_ge_initialize_rejects_bad_options(case):
    _, text, field, parts = case
    ret = ge.GEInitialize({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": text})
    assert ret == ge.PARAM_INVALID
    msg = ge.GEGetErrorMsg()
    assert field in msg and parts[0] in msg
    assert "PARAM_INVALID" in msg
    assert not is_initialized() and not lib.running


def test_ge_initialize_unknown_field_warns_and_profiles(tmp_path):
    opts = json.dumps({"output": str(tmp_path), "shiny": "on"})
    with pytest.warns(UserWarning, match="'shiny' is not known"):
        ret = ge.GEInitialize({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": opts})
    assert ret == ge.SUCCESS and lib.running
    ge.GEFinalize()
    assert not lib.running


@pytest.mark.parametrize("l2", ["on", "off"])
def test_l2_on_is_noted_as_not_simulated(tmp_path, l2):
    p = run_profiled_session(tmp_path, build_tiny_graph()[0], 2, l2=l2).profile
    assert [n for n in p.notes if "L2 cache" in n] == ([L2_NOTE] if l2 == "on" else [])
    assert "not simulated" in L2_NOTE and "aic_metrics L2Cache" in L2_NOTE


# ------------------------------------------------------------------------ sources
OPTS_A = '{"output": "/from/ge", "aic_metrics": "Memory"}'
OPTS_ENV = '{"output": "/from/env", "training_trace": "on"}'


@pytest.mark.parametrize("mode_var,opts_var", [("PROFILING_MODE", "PROFILING_OPTIONS"),
                                               ("GE_PROFILING_MODE", "GE_PROFILING_OPTIONS")])
def test_environment_fallback(mode_var, opts_var):
    o = ProfilingOptions.resolve({}, environ={mode_var: "true", opts_var: OPTS_ENV})
    assert o.output == "/from/env" and o.training_trace_on
    # empty options in the environment -> GE's default string
    o = ProfilingOptions.resolve({}, environ={mode_var: "true", opts_var: ""})
    assert o == ProfilingOptions.parse(DEFAULT_ENV_OPTIONS)
    assert (o.output, o.training_trace, o.task_trace, o.hccl, o.aicpu, o.aic_metrics, o.msproftx) == (
        "./", "on", "on", "on", "on", "PipeUtilization", "off")
    assert ProfilingOptions.resolve({}, environ={mode_var: "true"}) == o
    # mode must be the string "true"
    assert ProfilingOptions.resolve({}, environ={mode_var: "1", opts_var: OPTS_ENV}) is None
    assert ProfilingOptions.resolve({}, environ={mode_var: "True", opts_var: OPTS_ENV}) is None


@pytest.mark.parametrize("mode_var,opts_var", [("PROFILING_MODE", "PROFILING_OPTIONS"),
                                               ("GE_PROFILING_MODE", "GE_PROFILING_OPTIONS")])
@pytest.mark.parametrize("text,message", [("{bad json", "is not valid JSON"), ("[1]", "must be a JSON object, got a "
                                                                               "JSON array")])
def test_a_bad_environment_variable_is_named_not_the_ge_option(mode_var, opts_var, text, message):
    """The user set no GE option: the error names the variable that holds the bad JSON."""
    with pytest.raises(ProfilingOptionsError) as exc:
        ProfilingOptions.resolve({}, environ={mode_var: "true", opts_var: text})
    assert exc.value.field == opts_var
    assert str(exc.value).startswith(f"profiling option {opts_var!r}: {message}")


def test_ge_options_win_over_environment():
    env = {"PROFILING_MODE": "true", "PROFILING_OPTIONS": OPTS_ENV,
           "GE_PROFILING_MODE": "true", "GE_PROFILING_OPTIONS": OPTS_ENV}
    o = ProfilingOptions.resolve({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": OPTS_A}, environ=env)
    assert (o.output, o.aic_metrics, o.training_trace) == ("/from/ge", "Memory", "off")
    # mode "0" does not enable profiling, so the environment still can
    o = ProfilingOptions.resolve({"ge.exec.profilingMode": "0", "ge.exec.profilingOptions": OPTS_A}, environ=env)
    assert o.output == "/from/env"


def test_real_ge_env_names_come_first():
    env = {"PROFILING_MODE": "true", "PROFILING_OPTIONS": '{"output": "/real"}',
           "GE_PROFILING_MODE": "true", "GE_PROFILING_OPTIONS": '{"output": "/doc"}'}
    assert ProfilingOptions.resolve({}, environ=env).output == "/real"


def test_profiling_off_without_any_source():
    assert ProfilingOptions.resolve({}, environ={}) is None
    assert ProfilingOptions.resolve({"ge.exec.profilingOptions": OPTS_A}, environ={}) is None
    assert ProfilingOptions.resolve(None, environ={}) is None


def test_bad_profiling_mode_and_empty_options():
    with pytest.raises(ProfilingOptionsError, match=r"'ge.exec.profilingMode': '2' is not valid") as exc:
        ProfilingOptions.resolve({"ge.exec.profilingMode": "2"}, environ={})
    assert exc.value.accepted == "'1' (on) or '0' (off)"
    with pytest.raises(ProfilingOptionsError, match="is empty"):
        ProfilingOptions.resolve({"ge.exec.profilingMode": "1"}, environ={})




def test_fp_bp_point_ge_options_override_json():
    o = ProfilingOptions.resolve({
        "ge.exec.profilingMode": "1",
        "ge.exec.profilingOptions": '{"fp_point": "a", "bp_point": "b", "training_trace": "on"}',
        "ge.exec.profilingFpPointOptions": "fp_op", "ge.exec.profilingBpPointOptions": "bp_op"}, environ={})
    assert (o.fp_point, o.bp_point, o.training_trace) == ("fp_op", "bp_op", "on")


@pytest.mark.parametrize("key", ["ge.exec.profilingFpPointOptions", "ge.exec.profilingBpPointOptions"])
def test_a_bad_fp_bp_point_ge_option_is_named_as_the_user_set_it(key):
    with pytest.raises(ProfilingOptionsError) as exc:
        ProfilingOptions.resolve({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": '{"output": "p"}',
                                  key: 5}, environ={})
    assert str(exc.value) == f"profiling option {key!r}: must be a string, got JSON number 5; accepted: an op name or ''"
    assert exc.value.field == key


def test_ge_initialize_reads_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("PROFILING_MODE", "true")
    monkeypatch.setenv("PROFILING_OPTIONS", json.dumps({"output": str(tmp_path), "training_trace": "on"}))
    monkeypatch.delenv("GE_PROFILING_MODE", raising=False)
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    assert lib.running and lib.run_dir.parent == tmp_path.resolve()
    assert lib.options["training_trace"] == "on"


# ---------------------------------------------------------------- derived values
def test_data_type_config_bits():
    default = ProfilingOptions()
    assert default.data_type_config() == (events.PROF_ACL_API_MASK | events.PROF_TASK_TIME_MASK
                                          | events.PROF_TASK_TIME_L1_MASK | events.PROF_AICORE_METRICS_MASK)
    full = ProfilingOptions.parse('{"training_trace": "on", "hccl": "on", "aicpu": "on", "l2": "on", '
                                  '"msproftx": "on", "runtime_api": "on", "ge_api": "l1"}')
    bits = full.data_type_config()
    for mask in (events.PROF_TRAINING_TRACE_MASK, events.PROF_HCCL_TRACE_MASK, events.PROF_AICPU_TRACE_MASK,
                 events.PROF_L2CACHE_MASK, events.PROF_MSPROFTX_MASK, events.PROF_RUNTIME_API_MASK,
                 events.PROF_GE_API_L0_MASK, events.PROF_GE_API_L1_MASK):
        assert bits & mask
    l0 = ProfilingOptions.parse('{"task_trace": "l0"}').data_type_config()
    assert l0 & events.PROF_TASK_TIME_MASK and not l0 & (events.PROF_TASK_TIME_L1_MASK | events.PROF_AICORE_METRICS_MASK)
    off = ProfilingOptions.parse('{"task_trace": "off"}').data_type_config()
    assert off == 0


def test_to_dict_round_trip():
    o = ProfilingOptions.parse('{"output": "/o", "training_trace": "on", "aic_metrics": "PipeUtilization"}')
    assert o.to_dict() == {"output": "/o", "training_trace": "on"}
    assert ProfilingOptions.parse(o.to_json()) == o


def test_replace():
    o = ProfilingOptions.parse('{"output": "/o", "training_trace": "on"}')
    assert o.replace(fp_point="x").fp_point == "x"
    with pytest.raises(ProfilingOptionsError, match="task_trace"):
        o.replace(task_trace="l3")


def test_ge_initialize_with_fp_point_option(tmp_path):
    ret = ge.GEInitialize({"ge.exec.profilingMode": "1",
                           "ge.exec.profilingOptions": json.dumps({"output": str(tmp_path), "training_trace": "on"}),
                           "ge.exec.profilingFpPointOptions": "fc1"})
    assert ret == ge.SUCCESS, ge.GEGetErrorMsg()
    assert lib.options["fp_point"] == "fc1"


def test_valid_options_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ProfilingOptions.parse(DEFAULT_ENV_OPTIONS)
