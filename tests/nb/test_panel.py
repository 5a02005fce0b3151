"""%geprof config: the options panel, its flag line both ways, defaults of later %%geprof cells."""

import html

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from geprof_nb import ge
from geprof_nb.nb.config import CONFIG_FIELDS, ConfigStore, builtin_defaults
from geprof_nb.nb.panel import ConfigPanel, graph_op_names

CELL = """
sess = ge.Session()
sess.add_graph(1, ge.models.mlp(batch_size=8, world_size=2))
for step in range(3):
    sess.run_graph(1)
"""

LINES = [
    "--aic-metrics Memory",
    "--output prof_dir --training-trace off --task-trace l0 --hccl on --aicpu on --aic-metrics MemoryUB "
    "--msproftx on --ge-api l1 --runtime-api on --task-memory on --storage-limit 500MB",
    "--fp-point dense_1/MatMulV2 --bp-point dense_0/Relu --executor v1 --clock virtual --device Ascend910A",
    "--skip-first 2 --wait 1 --warmup 1 --active 3 --repeat 2",
    "--output ./runs/a --task-trace l1 --aic-metrics Custom:0x1,0x2 --active 1",
    "",
]


def shown(widget) -> str:
    """The text of an HTML widget's value."""
    return html.unescape(widget.value)


def store_of(ip) -> ConfigStore:
    return ip.magics_manager.registry["GeprofMagics"].cell_defaults


def run(ip, line, cell=CELL):
    with capture_output() as cap:
        ip.run_cell_magic("geprof", line, cell)
    return cap


@pytest.mark.parametrize("line", LINES)
def test_line_to_panel_to_line_is_the_same_line(line):
    panel = ConfigPanel(ConfigStore())
    assert panel.apply_line("%%geprof " + line) == "panel set from the line"
    assert panel.line == line
    assert panel.paste_message.value and "panel set" in shown(panel.paste_message)


@pytest.mark.parametrize("line", LINES)
def test_pasting_through_the_text_box_sets_every_widget(line):
    panel = ConfigPanel(ConfigStore())
    panel.fields["aic_metrics"].value = "L2Cache"  # replaced by the pasted line
    panel.paste.value = line or "--aic-metrics PipeUtilization"
    assert panel.line == line
    assert panel.values() == panel.store.values  # the widgets show exactly the stored defaults


def test_panel_to_line_to_panel_gives_the_same_values():
    first = ConfigPanel(ConfigStore())
    edits = {"output": "elsewhere", "training_trace": "off", "task_trace": "l0", "fp_point": "dense_0/MatMulV2",
             "bp_point": "dense_0/Relu", "hccl": "on", "aicpu": "on", "aic_metrics": "ResourceConflictRatio",
             "msproftx": "on", "ge_api": "l0", "runtime_api": "on", "task_memory": "on", "storage_limit": "300MB",
             "checkpoint_interval": "2",
             "executor": "v1", "clock": "virtual", "device": "Ascend910A", "ranks": 8, "active": 2, "skip_first": 4,
             "wait": 1,
             "warmup": 1, "repeat": 3}
    assert set(edits) == set(CONFIG_FIELDS)
    for field, value in edits.items():
        first.fields[field].value = value
    assert first.store.values == edits  # every edit was valid and stored
    assert all(m.value == "" for m in first.messages.values())
    line = first.line
    second = ConfigPanel(ConfigStore())
    second.paste.value = line
    assert second.values() == first.values() == edits


def test_line_is_canonical_whatever_the_pasted_order():
    panel = ConfigPanel(ConfigStore())
    panel.apply_line("--active 2 --clock virtual --aic-metrics Memory --wait 1")
    assert panel.line == "--aic-metrics Memory --clock virtual --wait 1 --active 2"
    assert "%%geprof --aic-metrics Memory --clock virtual --wait 1 --active 2" in panel.line_html.value


def test_per_cell_flags_in_a_pasted_line_are_ignored_and_said_so():
    panel = ConfigPanel(ConfigStore())
    msg = panel.apply_line("--aic-metrics Memory -o run1 --no-display")
    assert "ignored" in msg and "-o" in msg and "--no-display" in msg
    assert panel.line == "--aic-metrics Memory"


@pytest.mark.parametrize("field, value, fragments", [
    ("storage_limit", "5MB", ["5MB is out of range", "accepted: '<n>MB' with 200 <= n <= 4294967295"]),
    ("storage_limit", "500", ["the unit MB is required", "accepted: '<n>MB'"]),
    ("output", "  ", ["is empty", "accepted: a directory path"]),
    ("output", "my dir", ["'my dir' has a space or a quote", "accepted: one word"]),
    ("wait", -1, ["-1 is negative", "accepted: 0, 1, 2"]),
    ("repeat", 2, ["--repeat 2 needs --active N"]),
])
def test_invalid_value_shows_a_message_at_the_field_and_changes_nothing(field, value, fragments):
    panel = ConfigPanel(ConfigStore())
    panel.fields["aic_metrics"].value = "Memory"
    before = dict(panel.store.values)
    panel.fields[field].value = value
    message = panel.messages[field].value
    assert "geprof-field-error" in message and "color:#c62828" in message
    for fragment in fragments:
        assert fragment in shown(panel.messages[field])
    assert panel.store.values == before
    assert panel.line == "--aic-metrics Memory"
    assert all(panel.messages[f].value == "" for f in CONFIG_FIELDS if f != field)


@pytest.mark.parametrize("first, then, refused, fragments", [
    (("device", "Ascend910A"), ("aic_metrics", "L2Cache"), "aic_metrics",
     ["'L2Cache' is not available on --device Ascend910A; accepted there: ArithmeticUtilization, PipeUtilization"]),
    (("aic_metrics", "MemoryAccess"), ("device", "Ascend910A"), "device",
     ["'Ascend910A' has no --aic-metrics MemoryAccess counters; accepted: Ascend910B"]),
])
def test_aic_metrics_the_device_has_no_counters_for_is_refused_at_the_field_set(first, then, refused, fragments):
    """L2Cache/MemoryAccess on a 910A would make every later %%geprof cell fail: refused as it is set."""
    panel = ConfigPanel(ConfigStore())
    panel.fields[first[0]].value = first[1]
    before = dict(panel.store.values)
    panel.fields[then[0]].value = then[1]
    message = panel.messages[refused].value
    assert "geprof-field-error" in message and "color:#c62828" in message
    for fragment in fragments:
        assert fragment in shown(panel.messages[refused])
    assert panel.store.values == before and panel.line == f"{'--' + first[0].replace('_', '-')} {first[1]}"
    assert all(panel.messages[f].value == "" for f in CONFIG_FIELDS if f != refused)


def test_config_command_refuses_an_aic_metrics_the_device_lacks_and_the_next_cell_runs(ip):
    with pytest.raises(UsageError, match="--aic-metrics: 'L2Cache' is not available on --device Ascend910A; "
                                         "accepted there: ArithmeticUtilization"):
        ip.run_line_magic("geprof", "config --device Ascend910A --aic-metrics L2Cache")
    ip.run_line_magic("geprof", "config --aic-metrics L2Cache")
    with pytest.raises(UsageError, match="--device: 'Ascend910A' has no --aic-metrics L2Cache counters; "
                                         "accepted: Ascend910B"):
        ip.run_line_magic("geprof", "config --device Ascend910A")
    assert store_of(ip).line() == "--aic-metrics L2Cache"
    run(ip, "--no-display --clock virtual")
    assert len(ip.user_ns["_geprof"].step_trace) == 3


def test_fixing_an_invalid_value_stores_it_and_clears_the_message():
    panel = ConfigPanel(ConfigStore())
    panel.fields["storage_limit"].value = "5MB"
    assert panel.messages["storage_limit"].value
    panel.fields["storage_limit"].value = "500MB"
    assert panel.messages["storage_limit"].value == "" and panel.line == "--storage-limit 500MB"
    # a schedule is stored as a whole: wait alone is kept back until active is set
    panel.fields["wait"].value = 2
    assert "needs --active" in shown(panel.messages["wait"]) and panel.store.values["wait"] == 0
    panel.fields["active"].value = 3
    assert panel.messages["wait"].value == "" and panel.line == "--storage-limit 500MB --wait 2 --active 3"


def test_invalid_pasted_line_says_why_at_the_box_and_changes_nothing():
    panel = ConfigPanel(ConfigStore())
    panel.apply_line("--aic-metrics Memory")
    panel.paste.value = "--aic-metrics Pipe"
    assert "argument --aic-metrics: 'Pipe' is not valid; accepted:" in shown(panel.paste_message)
    panel.paste.value = "--wait 3"
    assert "--wait 3 needs --active N" in shown(panel.paste_message)
    panel.paste.value = "--frobnicate 1"
    assert "unrecognized arguments: --frobnicate" in shown(panel.paste_message)
    assert panel.line == "--aic-metrics Memory"


@pytest.mark.parametrize("line, message", [("--aic-metrics Memory", "panel set from the line"),
                                           ("--aic-metrics Pipe", "'Pipe' is not valid")])
def test_reset_to_defaults_clears_the_paste_box_and_its_message(line, message):
    panel = ConfigPanel(ConfigStore())
    panel.paste.value = line
    assert message in shown(panel.paste_message)
    panel.reset_button.click()
    assert panel.store.values == builtin_defaults() and panel.line == ""
    assert panel.paste.value == "" and panel.paste_message.value == ""
    panel.paste.value = line  # the same line again is applied again
    assert message in shown(panel.paste_message)


def test_css_classes_for_the_browser():
    panel = ConfigPanel(ConfigStore())
    assert "geprof-config" in panel.widget._dom_classes
    assert "geprof-aic-metrics" in panel.fields["aic_metrics"]._dom_classes
    assert list(panel.fields["aic_metrics"].options)[:2] == ["ArithmeticUtilization", "PipeUtilization"]


def test_panel_change_applies_to_the_next_cell(ip):
    panel = ConfigPanel(store_of(ip))
    panel.fields["aic_metrics"].value = "Memory"  # what the browser does through the widget's value
    panel.fields["clock"].value = "virtual"
    panel.fields["task_memory"].value = "on"
    run(ip, "--no-display")
    prof = ip.user_ns["_geprof"]
    assert prof.options["aic_metrics"] == "Memory" and prof.options["task_memory"] == "on"
    assert prof.info["clock"] == "virtual"
    assert prof.info["magic"]["line"] == "--aic-metrics Memory --task-memory on --clock virtual"
    cols = prof.op_summary.columns
    assert any(c.startswith("aic_main_mem_read_bw") for c in cols) and "aic_mac_ratio" not in cols
    assert len(prof.operator_memory) > 0


def test_flag_on_the_cell_overrides_the_panel_for_that_cell_only(ip):
    panel = ConfigPanel(store_of(ip))
    panel.apply_line("--aic-metrics Memory --clock virtual")
    run(ip, "--aic-metrics L2Cache --no-display")
    assert ip.user_ns["_geprof"].options["aic_metrics"] == "L2Cache"
    assert ip.user_ns["_geprof"].info["magic"]["line"] == "--aic-metrics L2Cache --clock virtual"
    assert panel.line == "--aic-metrics Memory --clock virtual"  # the defaults are unchanged
    run(ip, "--no-display")
    assert ip.user_ns["_geprof"].options["aic_metrics"] == "Memory"


def test_panel_executor_and_device_reach_the_runtime(ip):
    panel = ConfigPanel(store_of(ip))
    panel.apply_line("--executor v1 --device Ascend910A --clock virtual")
    run(ip, "--no-display")
    prof = ip.user_ns["_geprof"]
    assert prof.info["magic"]["executor"] == "v1" and prof.info["magic"]["device"] == "Ascend910A"
    assert ge.session.device_runtime().preset.name == "Ascend910A"
    assert prof.device["ai_core_num"] == 32
    # the V1 executor's model-level RecordStart/RecordEnd events, no RT2 ModelExecute api records
    from geprof_nb.analysis.rundir import RunDir
    events = RunDir(prof.path).load("event")
    assert len(events[events["level"] == 15000]) == 6


def test_device_other_than_the_initialised_one_is_a_usage_error(ip):
    ge.GEInitialize({"geprof.device": "Ascend910B"})
    with pytest.raises(UsageError, match=r"GE is already initialised on Ascend910B.*GEFinalize"):
        ip.run_cell_magic("geprof", "--device Ascend910A", "pass")
    store_of(ip).update({"device": "Ascend910B"})  # the same device is fine
    run(ip, "--no-display --clock virtual", "pass")


def test_config_command_shows_the_panel_with_a_text_twin(ip):
    store_of(ip).update({"aic_metrics": "Memory", "active": 2})
    with capture_output() as cap:
        assert ip.run_line_magic("geprof", "config") is None
    data = cap.outputs[0].data
    assert "application/vnd.jupyter.widget-view+json" in data
    assert data["text/plain"] == "%%geprof defaults: --aic-metrics Memory --active 2"


def test_config_command_sets_and_resets_defaults(ip, capsys):
    ip.run_line_magic("geprof", "config --aic-metrics Memory --clock virtual")
    ip.run_line_magic("geprof", "config --active 2")  # merges with what is set
    assert "%%geprof defaults: --aic-metrics Memory --clock virtual --active 2" in capsys.readouterr().out
    panel = ConfigPanel(store_of(ip))
    ip.run_line_magic("geprof", "config --reset")
    assert store_of(ip).values == builtin_defaults()
    assert panel.values() == builtin_defaults() and panel.line == ""  # an open panel follows
    ip.run_line_magic("geprof", "config --reset --wait 1 --active 1")  # reset, then set
    assert store_of(ip).line() == "--wait 1 --active 1"


def test_config_command_errors_name_the_flag(ip):
    with pytest.raises(UsageError, match="argument --storage-limit: '5MB' is not valid; accepted:"):
        ip.run_line_magic("geprof", "config --storage-limit 5MB")
    with pytest.raises(UsageError, match="--skip-first 2 needs --active N"):
        ip.run_line_magic("geprof", "config --skip-first 2")
    assert store_of(ip).values == builtin_defaults()


def test_cell_flags_are_merged_with_the_stored_schedule_and_checked(ip):
    store_of(ip).update({"wait": 1, "active": 2})
    with pytest.raises(UsageError, match="argument --wait: -1 is negative"):
        ip.run_cell_magic("geprof", "--wait -1", "pass")
    with pytest.raises(UsageError, match="--wait: --wait 1 needs --active N"):
        ip.run_cell_magic("geprof", "--active 0", "pass")  # the stored wait=1 is left without active steps
    run(ip, "--active 0 --wait 0 --no-display --clock virtual")  # no schedule for this cell: every step
    assert len(ip.user_ns["_geprof"].step_trace) == 3


def test_fp_bp_suggestions_come_from_the_last_graph(ip):
    panel = ConfigPanel(store_of(ip))
    run(ip, "--no-display --clock virtual")  # the cell adds an MLP training graph
    graph = ge.session.last_graph()
    assert graph is not None and graph.name == "mlp"
    names = list(panel.fields["fp_point"].options)
    assert names == graph_op_names(graph) and "dense_1/MatMulV2" in names and "dense_0/Relu" in names
    assert list(panel.fields["bp_point"].options) == names
    panel.fields["fp_point"].value = "dense_1/MatMulV2"
    panel.fields["bp_point"].value = "dense_0/Relu"
    run(ip, "--no-display --clock virtual")
    opts = ip.user_ns["_geprof"].options
    assert opts["fp_point"] == "dense_1/MatMulV2" and opts["bp_point"] == "dense_0/Relu"


def test_defaults_are_per_loaded_extension(ip):
    store_of(ip).update({"aic_metrics": "Memory"})
    ip.run_line_magic("unload_ext", "geprof_nb")
    ip.run_line_magic("load_ext", "geprof_nb")
    assert store_of(ip).values == builtin_defaults()


def test_a_what_if_device_spec_round_trips_through_the_panel():
    panel = ConfigPanel(ConfigStore())
    panel.apply_line("--device Ascend910B:ai_core_num=20,hbm_bandwidth=1.2e12 --ranks 16")
    assert panel.fields["device"].value == "Ascend910B:ai_core_num=20,hbm_bandwidth=1.2e12"
    assert panel.fields["ranks"].value == 16
    assert panel.line == "--device Ascend910B:ai_core_num=20,hbm_bandwidth=1.2e12 --ranks 16"
    panel.fields["device"].value = "Ascend910A"
    assert panel.store.values["device"] == "Ascend910A"
    before = dict(panel.store.values)
    msg = panel.apply_line("--device Ascend910B:cores=3")
    assert "'cores' is not a device field; accepted: ai_core_num" in msg and panel.store.values == before
