"""The dynamic profiling C API (``ge/ge_prof.h``): aclgrphProfInit / CreateConfig / Start / Stop /
Finalize / DestroyConfig.

Every out-of-order or repeated call must return its documented code (reference §1.4), say why in
``GEGetErrorMsg()`` and leave the state exactly as it was, so that the correct sequence works right
after.  Start/Stop in the middle of a training loop collect exactly the steps between them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis.tables import columns as C
from geprof_nb.ge import ge_prof
from geprof_nb.prof import events, msprof
from geprof_nb.prof.options import ProfilingOptions
from geprof_nb.prof.properties import ProfilingProperties

D = ge.ProfDataTypeConfig
M = ge.ProfilingAicoreMetrics
#: What the tests collect: op data with basic info (L1, which brings L0) and the step trace.
BITS = D.kProfTaskTime | D.kProfTrainingTrace
FAILED = 0xFFFFFFFF


def tiny_mlp() -> ge.Graph:
    return ge.models.mlp(batch_size=4, in_features=16, hidden=(16,))


@pytest.fixture
def sess() -> ge.Session:
    """GE on the virtual clock with one small training graph (id 1) added; api mode closed at the end."""
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    s = ge.Session()
    assert s.add_graph(1, tiny_mlp()) == ge.SUCCESS
    yield s
    if ge_prof.api_mode_active():
        ge.aclgrphProfFinalize()


def run(sess: ge.Session, steps: int) -> None:
    for _ in range(steps):
        assert sess.run_graph(1) == ge.SUCCESS, ge.GEGetErrorMsg()


def n_kernels(sess: ge.Session) -> int:
    return sum(1 for k in sess.model(1).table.kernels if k is not None)


def snapshot() -> tuple:
    """Everything an API call could change: the API state and msprof's."""
    s = ge_prof._state
    lib = msprof.lib
    return (s.inited, s.path, s.started, s.started_switch, lib.running, lib.started, lib.run_dir, lib.switch,
            ProfilingProperties.instance().switch)


# ------------------------------------------------------------------------------- reference values


def test_prof_data_type_config_values_are_the_reference_ones():
    assert {m.name: int(m) for m in D} == {
        "kProfTaskTime": 0x0002, "kProfAiCoreMetrics": 0x0004, "kProfAicpu": 0x0008, "kProfL2cache": 0x0010,
        "kProfHccl": 0x0020, "kProfTrainingTrace": 0x0040, "kProfFwkScheduleL0": 0x0200,
        "kProfTaskTimeL0": 0x0800, "kProfFwkScheduleL1": 0x01000000,
    }


def test_profiling_aicore_metrics_values_are_the_reference_ones():
    assert {m.name: int(m) for m in M} == {
        "kAicoreArithmeticUtilization": 0, "kAicorePipeUtilization": 1, "kAicoreMemory": 2, "kAicoreMemoryL0": 3,
        "kAicoreResourceConflictRatio": 4, "kAicoreMemoryUB": 5, "kAicoreL2Cache": 6,
        "kAicorePipelineExecuteUtilization": 7,
    }


def test_failed_is_all_ones_and_invalid_profiling_config_is_100010():
    assert int(ge.FAILED) == FAILED == 4294967295
    assert int(ge_prof.ACL_ERROR_INVALID_PROFILING_CONFIG) == 100010


# ------------------------------------------------------------------------------ the correct sequence


def test_full_sequence_collects_data(sess, tmp_path):
    out = tmp_path / "prof"
    assert ge.aclgrphProfInit(str(out), len(str(out))) == ge.SUCCESS
    cfg = ge.aclgrphProfCreateConfig([0], 1, M.kAicorePipeUtilization, None, BITS)
    assert cfg is not None
    assert ge.aclgrphProfStart(cfg) == ge.SUCCESS
    run(sess, 3)
    assert ge.aclgrphProfStop(cfg) == ge.SUCCESS
    assert ge.aclgrphProfFinalize() == ge.SUCCESS
    assert ge.aclgrphProfDestroyConfig(cfg) == ge.SUCCESS
    assert ge.GEGetErrorMsg() == ""
    p = geprof_nb.load(out)
    assert p.complete and p.info["mode"] == "api"
    assert list(p.iterations) == [1, 2, 3]
    assert len(p.op_summary) == 3 * n_kernels(sess)
    assert p.op_summary["OP Type"].ne("N/A").all()  # L1: basic info
    assert list(p.step_trace["Iteration ID"]) == [1, 2, 3]
    # msprof ORs PROF_OP_DETAIL into the switch it passes on (reference §1.4)
    switch = p.info["switch_history"][0]["switch"]
    assert switch & events.PROF_OP_DETAIL_MASK and switch & BITS == BITS


def test_init_length_is_the_paths_utf8_byte_count(sess, tmp_path):
    """strlen(profiler_path): a non-ASCII path is passed with its byte length, as a C caller would."""
    out = str(tmp_path / "prof_éè")
    assert len(out.encode("utf-8")) == len(out) + 2
    assert ge.aclgrphProfInit(out, len(out.encode("utf-8"))) == ge.SUCCESS, ge.GEGetErrorMsg()
    assert ge.aclgrphProfFinalize() == ge.SUCCESS


def test_finalize_before_destroy_config_also_works_and_each_cycle_gets_a_new_run(sess, tmp_path):
    out = tmp_path / "prof"
    dirs = []
    for _ in range(2):
        assert ge.aclgrphProfInit(str(out)) == ge.SUCCESS
        cfg = ge.aclgrphProfCreateConfig([0], M.kAicorePipeUtilization, BITS)
        assert ge.aclgrphProfStart(cfg) == ge.SUCCESS
        run(sess, 1)
        assert ge.aclgrphProfStop(cfg) == ge.SUCCESS
        assert ge.aclgrphProfDestroyConfig(cfg) == ge.SUCCESS
        assert ge.aclgrphProfFinalize() == ge.SUCCESS
        dirs.append(msprof.lib.last_run_dir)
    assert dirs[0] != dirs[1] and all(d.parent == out.resolve() for d in dirs)
    assert sorted(p.name for p in out.iterdir()) == sorted(d.name for d in dirs)


def test_both_call_forms_make_the_same_config(sess):
    c_form = ge.aclgrphProfCreateConfig([0], 1, M.kAicoreMemory, None, D.kProfTaskTimeL0 | D.kProfHccl)
    short = ge.aclgrphProfCreateConfig([0], M.kAicoreMemory, D.kProfTaskTimeL0 | D.kProfHccl)
    kw = ge.aclgrphProfCreateConfig([0], device_nums=1, aicore_metrics=M.kAicoreMemory,
                                    data_type_config=D.kProfTaskTimeL0 | D.kProfHccl)
    for cfg in (c_form, short, kw):
        assert cfg is not None
        assert (cfg.dev_ids, cfg.aicore_metrics, cfg.data_type_config) == (
            (0,), M.kAicoreMemory, D.kProfTaskTimeL0 | D.kProfHccl)


def test_wrong_number_of_arguments_gives_no_config(sess):
    assert ge.aclgrphProfCreateConfig([0], 1, M.kAicoreMemory, None) is None
    assert "expected 3 or 5 arguments" in ge.GEGetErrorMsg()


def test_task_time_l1_switches_on_l0_as_msprof_does(sess):
    """msprof's aclgrphProfCreateConfig: "collect task time L1, also configure task time L0"."""
    cfg = ge.aclgrphProfCreateConfig([0], M.kAicorePipeUtilization, D.kProfTaskTime)
    assert cfg.data_type_config == D.kProfTaskTime | D.kProfTaskTimeL0
    l0 = ge.aclgrphProfCreateConfig([0], M.kAicorePipeUtilization, D.kProfTaskTimeL0)
    assert l0.data_type_config == D.kProfTaskTimeL0


def test_task_time_alone_collects_ops_with_basic_info(sess, tmp_path):
    """kProfTaskTime = "op launch + op execution time + op basic info": no other bit is needed."""
    assert ge.aclgrphProfInit(str(tmp_path)) == ge.SUCCESS
    cfg = ge.aclgrphProfCreateConfig([0], M.kAicorePipeUtilization, D.kProfTaskTime)
    assert ge.aclgrphProfStart(cfg) == ge.SUCCESS
    run(sess, 2)
    assert ge.aclgrphProfStop(cfg) == ge.SUCCESS
    assert ge.aclgrphProfFinalize() == ge.SUCCESS
    p = geprof_nb.load(tmp_path)
    assert len(p.op_summary) == 2 * n_kernels(sess)
    assert p.op_summary["OP Type"].ne("N/A").all()
    assert "aic_mac_ratio" in p.op_summary.columns  # PipeUtilization columns come with L1


# --------------------------------------------------------------------- CreateConfig validation


@pytest.mark.parametrize("args, fragment", [
    (([],) + (M.kAicorePipeUtilization, BITS), "deviceid_list is empty"),
    ((None, M.kAicorePipeUtilization, BITS), "deviceid_list is empty"),
    (([0], 2, M.kAicorePipeUtilization, None, BITS), "device_nums 2 differs from the list length 1"),
    (([0], 0, M.kAicorePipeUtilization, None, BITS), "device_nums 0 differs"),
    (([1], M.kAicorePipeUtilization, BITS), "must be in 0..0"),
    (([-1], M.kAicorePipeUtilization, BITS), "must be in 0..0"),
    (([0, 1], M.kAicorePipeUtilization, BITS), "2 devices requested but only 1 present"),
    ((list(range(65)), M.kAicorePipeUtilization, BITS), "exceed the maximum of 64"),
    (([0], 1, M.kAicorePipeUtilization, object(), BITS), "aicore_events is reserved"),
    (([0], 1, M.kAicorePipeUtilization, 0, BITS), "aicore_events is reserved"),
    (([0], 8, BITS), "aicore_metrics 8 is not a ProfilingAicoreMetrics value"),
    (([0], -1, BITS), "aicore_metrics -1 is not"),
    (([0], None, BITS), "aicore_metrics None is not"),
    (([0], "PipeUtilization", BITS), "aicore_metrics 'PipeUtilization' is not"),
    (([0], M.kAicorePipelineExecuteUtilization, BITS), "kAicorePipelineExecuteUtilization is only available"),
    (([0], M.kAicorePipeUtilization, -1), "data_type_config must be a non-negative int"),
    (([0], M.kAicorePipeUtilization, None), "data_type_config must be a non-negative int"),
], ids=["empty", "null-list", "device-nums-mismatch", "device-nums-zero", "id-out-of-range", "negative-id",
        "more-devices-than-present", "more-than-64", "aicore-events-object", "aicore-events-zero",
        "metrics-8", "metrics-negative", "metrics-none", "metrics-name", "pipeline-execute", "bits-negative",
        "bits-none"])
def test_create_config_rejects_bad_arguments_with_none(sess, args, fragment):
    assert ge.aclgrphProfCreateConfig(*args) is None
    msg = ge.GEGetErrorMsg()
    assert msg.startswith("[FAILED] aclgrphProfCreateConfig: ") and fragment in msg, msg


def test_create_config_rejects_duplicate_device_ids(sess, monkeypatch):
    monkeypatch.setattr(ge.session.device_runtime(), "device_count", 2)
    assert ge.aclgrphProfCreateConfig([1, 1], M.kAicorePipeUtilization, BITS) is None
    assert "device ids [1, 1] contain duplicates" in ge.GEGetErrorMsg()
    ok = ge.aclgrphProfCreateConfig([0, 1], 2, M.kAicorePipeUtilization, None, BITS)
    assert ok is not None and ok.dev_ids == (0, 1) and ge.GEGetErrorMsg() == ""


def test_create_config_names_a_duplicate_before_the_device_count(sess):
    """On a one-device machine [0, 0] asks for device 0 twice: the duplicate is the reason, not a count."""
    assert ge.session.device_runtime().device_count == 1
    assert ge.aclgrphProfCreateConfig([0, 0], M.kAicorePipeUtilization, BITS) is None
    msg = ge.GEGetErrorMsg()
    assert "device ids [0, 0] contain duplicates" in msg and "present" not in msg, msg


# ------------------------------------------------------------------- out-of-order / repeated calls


@dataclass
class Flow:
    """Drives the correct sequence state by state: fresh -> inited -> started -> stopped -> finalized."""

    sess: ge.Session
    out: Path
    cfg: ge.aclgrphProfConfig
    state: str = "fresh"
    runs: list[Path] = field(default_factory=list)

    def step(self) -> None:
        if self.state in ("fresh", "finalized"):
            assert ge.aclgrphProfInit(str(self.out)) == ge.SUCCESS, ge.GEGetErrorMsg()
            self.state = "inited"
        elif self.state == "inited":
            assert ge.aclgrphProfStart(self.cfg) == ge.SUCCESS, ge.GEGetErrorMsg()
            self.state = "started"
        elif self.state == "started":
            run(self.sess, 2)
            assert ge.aclgrphProfStop(self.cfg) == ge.SUCCESS, ge.GEGetErrorMsg()
            self.state = "stopped"
        else:
            assert ge.aclgrphProfFinalize() == ge.SUCCESS, ge.GEGetErrorMsg()
            self.runs.append(msprof.lib.last_run_dir)
            self.state = "finalized"

    def advance(self, to: str) -> None:
        while self.state != to:
            self.step()

    def finish(self) -> None:
        """Complete the sequence (a finalized flow starts a whole new cycle)."""
        self.step()
        self.advance("finalized")


def _destroyed_config() -> ge.aclgrphProfConfig:
    cfg = ge.aclgrphProfCreateConfig([0], M.kAicorePipeUtilization, BITS)
    assert ge.aclgrphProfDestroyConfig(cfg) == ge.SUCCESS
    return cfg


def _destroy_twice() -> int:
    cfg = _destroyed_config()
    return ge.aclgrphProfDestroyConfig(cfg)


def _file(tmp: Path) -> str:
    f = tmp / "a_file"
    f.write_text("not a directory")
    return str(f)


OTHER_BITS = BITS | D.kProfHccl
Bad = Callable[[Flow, Path], int]
OUT_OF_ORDER: list[tuple[str, str, Bad, int, str]] = [
    ("start-before-init", "fresh", lambda f, t: ge.aclgrphProfStart(f.cfg), FAILED,
     "aclgrphProfStart: Acl profiling api mode is not inited"),
    ("stop-before-init", "fresh", lambda f, t: ge.aclgrphProfStop(f.cfg), FAILED,
     "aclgrphProfStop: profiling is not started"),
    ("finalize-before-init", "fresh", lambda f, t: ge.aclgrphProfFinalize(), FAILED,
     "aclgrphProfFinalize: Acl profiling api mode is not inited"),
    ("init-twice", "inited", lambda f, t: ge.aclgrphProfInit(str(t / "second")), FAILED,
     "aclgrphProfInit: Acl profiling is already inited"),
    ("init-twice-same-path", "started", lambda f, t: ge.aclgrphProfInit(str(f.out)), FAILED,
     "already inited"),
    ("stop-before-start", "inited", lambda f, t: ge.aclgrphProfStop(f.cfg), FAILED,
     "aclgrphProfStop: profiling is not started"),
    ("start-twice", "started", lambda f, t: ge.aclgrphProfStart(f.cfg), FAILED,
     "aclgrphProfStart: profiling is already started"),
    ("start-twice-other-config", "started",
     lambda f, t: ge.aclgrphProfStart(ge.aclgrphProfCreateConfig([0], M.kAicoreMemory, OTHER_BITS)), FAILED,
     "already started"),
    ("stop-other-data-types", "started",
     lambda f, t: ge.aclgrphProfStop(ge.aclgrphProfCreateConfig([0], M.kAicorePipeUtilization, OTHER_BITS)),
     100010, f"DataTypeConfig stop: {OTHER_BITS | 0x800:x} different from start: {BITS | 0x800:x}"),
    ("stop-null", "started", lambda f, t: ge.aclgrphProfStop(None), FAILED, "aclgrphProfStop: the config is null"),
    ("start-null", "inited", lambda f, t: ge.aclgrphProfStart(None), FAILED,
     "aclgrphProfStart: the config is null"),
    ("start-destroyed-config", "inited", lambda f, t: ge.aclgrphProfStart(_destroyed_config()), FAILED,
     "aclgrphProfStart: the config is null or destroyed"),
    ("stop-destroyed-config", "started", lambda f, t: ge.aclgrphProfStop(_destroyed_config()), FAILED,
     "aclgrphProfStop: the config is null or destroyed"),
    ("unsupported-bit", "inited",
     lambda f, t: ge.aclgrphProfStart(ge.aclgrphProfCreateConfig([0], 1, BITS | 0x2000)), FAILED,
     f"dataTypeConfig:0x{BITS | 0x2800:x}, supported switch is:0x{ge_prof.SUPPORTED_SWITCH:x}"),
    ("unsupported-high-bit", "inited",
     lambda f, t: ge.aclgrphProfStart(ge.aclgrphProfCreateConfig([0], 1, 1 << 40)), FAILED,
     "dataTypeConfig:0x10000000000, supported switch is"),
    ("stop-twice", "stopped", lambda f, t: ge.aclgrphProfStop(f.cfg), FAILED, "profiling is not started"),
    ("start-after-finalize", "finalized", lambda f, t: ge.aclgrphProfStart(f.cfg), FAILED,
     "Acl profiling api mode is not inited"),
    ("stop-after-finalize", "finalized", lambda f, t: ge.aclgrphProfStop(f.cfg), FAILED, "profiling is not started"),
    ("finalize-twice", "finalized", lambda f, t: ge.aclgrphProfFinalize(), FAILED,
     "Acl profiling api mode is not inited"),
    ("destroy-null", "started", lambda f, t: ge.aclgrphProfDestroyConfig(None), FAILED,
     "aclgrphProfDestroyConfig: the config is null or already destroyed"),
    ("destroy-twice", "inited", lambda f, t: _destroy_twice(), FAILED, "already destroyed"),
    ("init-length-mismatch", "fresh", lambda f, t: ge.aclgrphProfInit(str(f.out), len(str(f.out)) + 1), FAILED,
     "differs from the path length"),
    ("init-empty-path", "fresh", lambda f, t: ge.aclgrphProfInit(""), FAILED, "profiler_path is empty"),
    ("init-null-path", "fresh", lambda f, t: ge.aclgrphProfInit(None), FAILED, "profiler_path is empty"),
    ("init-path-too-long", "fresh", lambda f, t: ge.aclgrphProfInit("p" * 4097), FAILED, "longer than 4096"),
    ("init-path-too-long-in-bytes", "fresh", lambda f, t: ge.aclgrphProfInit("é" * 2049), FAILED,
     "longer than 4096 bytes"),
    ("init-length-counts-characters", "fresh", lambda f, t: ge.aclgrphProfInit(str(t / "é"), len(str(t / "é"))),
     FAILED, "(strlen: UTF-8 bytes, not characters)"),
    ("init-path-is-a-file", "fresh", lambda f, t: ge.aclgrphProfInit(_file(t)), FAILED, "cannot use"),
]


@pytest.mark.parametrize("state, bad, code, fragment", [s[1:] for s in OUT_OF_ORDER],
                         ids=[s[0] for s in OUT_OF_ORDER])
def test_out_of_order_call_fails_and_changes_nothing(sess, tmp_path, state, bad, code, fragment):
    cfg = ge.aclgrphProfCreateConfig([0], M.kAicorePipeUtilization, BITS)
    flow = Flow(sess, tmp_path / "prof", cfg)
    flow.advance(state)
    before = snapshot()
    runs_before = sorted(tmp_path.rglob("PROF_*"))

    status = bad(flow, tmp_path)

    assert status == code
    name = "FAILED" if code == FAILED else "ACL_ERROR_INVALID_PROFILING_CONFIG"
    assert status.name == name and ge.GEGetErrorMsg().startswith(f"[{name}] ")
    assert fragment in ge.GEGetErrorMsg(), ge.GEGetErrorMsg()
    assert snapshot() == before
    assert sorted(tmp_path.rglob("PROF_*")) == runs_before  # no run directory opened (or closed)
    assert not (tmp_path / "second").exists()

    # the correct sequence works right after, and collects the steps of its own window only
    flow.finish()
    p = geprof_nb.load(flow.runs[-1])
    assert p.complete
    assert len(p.iterations) == 2
    assert len(p.op_summary) == 2 * n_kernels(sess)
    assert len(flow.runs) == (2 if state == "finalized" else 1)


def test_init_before_ge_initialize_fails(tmp_path):
    out = tmp_path / "prof"
    assert ge.aclgrphProfInit(str(out)) == ge.FAILED
    assert "GE is not initialised" in ge.GEGetErrorMsg() and "GEInitialize" in ge.GEGetErrorMsg()
    assert not out.exists() and not ge_prof.api_mode_active() and not msprof.lib.running
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    assert ge.aclgrphProfInit(str(out)) == ge.SUCCESS
    assert ge.aclgrphProfFinalize() == ge.SUCCESS


def test_init_while_ge_options_profiling_runs_fails(tmp_path):
    opts = {"output": str(tmp_path / "ge"), "training_trace": "on"}
    assert ge.GEInitialize({"geprof.clock": "virtual", "ge.exec.profilingMode": "1",
                            "ge.exec.profilingOptions": json.dumps(opts)}) == ge.SUCCESS
    before = snapshot()
    assert ge.aclgrphProfInit(str(tmp_path / "api")) == ge.FAILED
    assert ge.GEGetErrorMsg() == (
        f"[FAILED] aclgrphProfInit: another profiling mode is collecting into {msprof.lib.run_dir} (opened by GE's "
        "profiling options (ge.exec.profilingMode or the environment)); the api mode cannot start; finish that run "
        "first (ge.GEFinalize()) (ACL_ERROR_PROF_ALREADY_RUN 100042)")
    assert snapshot() == before and not (tmp_path / "api").exists()
    ge.GEFinalize()
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    assert ge.aclgrphProfInit(str(tmp_path / "api")) == ge.SUCCESS
    assert ge.aclgrphProfFinalize() == ge.SUCCESS
    assert len(list((tmp_path / "api").glob("PROF_*"))) == 1


def test_init_while_magic_style_collection_runs_fails(sess, tmp_path):
    opts = ProfilingOptions.parse({"output": str(tmp_path / "magic")})
    msprof.lib.init(opts.output, opts.to_dict(), mode="magic")
    msprof.lib.start(opts.data_type_config())
    try:
        before = snapshot()
        assert ge.aclgrphProfInit(str(tmp_path / "api")) == ge.FAILED
        assert ge.GEGetErrorMsg() == (
            f"[FAILED] aclgrphProfInit: another profiling mode is collecting into {msprof.lib.run_dir} (opened by a "
            "%%geprof cell); the api mode cannot start; let it finish first (ACL_ERROR_PROF_ALREADY_RUN 100042)")
        assert snapshot() == before and not ge_prof.api_mode_active()
    finally:
        msprof.lib.finalize()
    assert geprof_nb.load(tmp_path / "magic").info["mode"] == "magic"
    assert ge.aclgrphProfInit(str(tmp_path / "api")) == ge.SUCCESS
    assert ge.aclgrphProfFinalize() == ge.SUCCESS


def test_init_inside_a_profile_block_fails_naming_the_block(sess, tmp_path):
    with geprof_nb.profile(output=str(tmp_path / "block")) as block:
        run(sess, 1)
        open_dir = msprof.lib.run_dir
        assert ge.aclgrphProfInit(str(tmp_path / "api")) == ge.FAILED
        assert ge.GEGetErrorMsg() == (
            f"[FAILED] aclgrphProfInit: another profiling mode is collecting into {open_dir} (opened by a "
            "geprof_nb.profile() block); the api mode cannot start; let it finish first "
            "(ACL_ERROR_PROF_ALREADY_RUN 100042)")
        assert not ge_prof.api_mode_active() and not (tmp_path / "api").exists()
        run(sess, 1)
    assert block.profile.path == open_dir and len(block.profile.step_trace) == 2


# ------------------------------------------------------------------------------- Start in mid-run


def _window_checks(p, windows: list[dict]) -> None:
    """Every device task and host api record lies inside one Start..Stop window."""
    hw = p.run.load("hwts")
    start, end = hw["start"].astype(np.int64), hw["start"].astype(np.int64) + hw["dur"].astype(np.int64)
    inside = np.zeros(len(hw), bool)
    for w in windows:
        inside |= (start >= w["start_ns"]) & (end <= w["stop_ns"])
    assert inside.all()
    api = p.run.load("api")
    api_inside = np.zeros(len(api), bool)
    for w in windows:
        api_inside |= (api["begin"] >= w["start_ns"]) & (api["end"] <= w["stop_ns"])
    assert api_inside.all()


def test_start_mid_run_collects_exactly_the_steps_between_start_and_stop(sess, tmp_path):
    run(sess, 3)  # before Init: not profiled
    assert ge.aclgrphProfInit(str(tmp_path)) == ge.SUCCESS
    cfg = ge.aclgrphProfCreateConfig([0], M.kAicorePipeUtilization, BITS)
    run(sess, 2)  # Init but no Start: not collected
    assert ge.aclgrphProfStart(cfg) == ge.SUCCESS
    run(sess, 2)  # iterations 6 and 7
    assert ge.aclgrphProfStop(cfg) == ge.SUCCESS
    run(sess, 2)  # after Stop: not collected
    assert ge.aclgrphProfFinalize() == ge.SUCCESS
    assert sess.model(1).iterations == 9

    p = geprof_nb.load(tmp_path)
    model_id = sess.model(1).model_id
    assert list(p.iterations) == [6, 7]  # the model's own count goes on
    assert list(p.step_trace["Iteration ID"]) == [6, 7]
    assert set(p.step_trace["Model ID"]) == {model_id} and set(p.op_summary["Model ID"]) == {model_id}
    per_iteration = p.op_summary.groupby(p.iteration_of_ops.to_numpy()).size()
    assert per_iteration.to_dict() == {6: n_kernels(sess), 7: n_kernels(sess)}
    windows = p.info["switch_history"]
    assert len(windows) == 1
    _window_checks(p, windows)
    # the api records are those of the two runs in the window
    names = p.api_statistic.set_index("API Name")["Count"].to_dict()
    assert names["RunGraph"] == 2 and names["ModelExecute"] == 2


def test_two_start_stop_cycles_collect_both_windows(sess, tmp_path):
    assert ge.aclgrphProfInit(str(tmp_path)) == ge.SUCCESS
    cfg = ge.aclgrphProfCreateConfig([0], M.kAicorePipeUtilization, BITS)
    run(sess, 1)  # 1
    assert ge.aclgrphProfStart(cfg) == ge.SUCCESS
    run(sess, 2)  # 2, 3
    assert ge.aclgrphProfStop(cfg) == ge.SUCCESS
    run(sess, 3)  # 4, 5, 6
    assert ge.aclgrphProfStart(cfg) == ge.SUCCESS
    run(sess, 1)  # 7
    assert ge.aclgrphProfStop(cfg) == ge.SUCCESS
    assert ge.aclgrphProfFinalize() == ge.SUCCESS

    p = geprof_nb.load(tmp_path)
    assert list(p.iterations) == [2, 3, 7]
    assert list(p.step_trace["Iteration ID"]) == [2, 3, 7]
    windows = p.info["switch_history"]
    assert len(windows) == 2 and windows[0]["stop_ns"] < windows[1]["start_ns"]
    _window_checks(p, windows)
    assert len(p.op_summary) == 3 * n_kernels(sess)


def test_l2_cache_bit_is_accepted_and_the_run_says_it_is_not_simulated(sess, tmp_path):
    """kProfL2cache samples nothing here: one note per run, however many Start commands it had."""
    assert ge.aclgrphProfInit(str(tmp_path)) == ge.SUCCESS
    cfg = ge.aclgrphProfCreateConfig([0], M.kAicorePipeUtilization, BITS | D.kProfL2cache)
    for _ in range(2):
        assert ge.aclgrphProfStart(cfg) == ge.SUCCESS
        run(sess, 1)
        assert ge.aclgrphProfStop(cfg) == ge.SUCCESS
    assert ge.aclgrphProfFinalize() == ge.SUCCESS
    notes = geprof_nb.load(tmp_path).notes
    assert [n for n in notes if n.startswith("l2 ")] == [
        "l2 (L2 cache sampling, kProfL2cache) is not simulated: nothing is recorded for it (an ascend_pt export has "
        "no l2_cache.csv); for L2 hit/miss counts per op use aic_metrics L2Cache on an A2-class chip (Ascend910B)"]


def test_finalize_while_started_stops_and_closes_the_run(sess, tmp_path):
    assert ge.aclgrphProfInit(str(tmp_path)) == ge.SUCCESS
    cfg = ge.aclgrphProfCreateConfig([0], M.kAicorePipeUtilization, BITS)
    assert ge.aclgrphProfStart(cfg) == ge.SUCCESS
    run(sess, 1)
    assert ge.aclgrphProfFinalize() == ge.SUCCESS
    assert not msprof.lib.running and not msprof.lib.started and not ge_prof.api_mode_active()
    assert ProfilingProperties.instance().switch == 0
    run(sess, 1)  # not collected, nothing breaks
    p = geprof_nb.load(tmp_path)
    assert p.complete and list(p.iterations) == [1]


# ---------------------------------------------------------------- what the config asks for arrives


def _collect(sess: ge.Session, out: Path, metrics: int, bits: int, steps: int = 1):
    assert ge.aclgrphProfInit(str(out)) == ge.SUCCESS
    cfg = ge.aclgrphProfCreateConfig([0], metrics, bits)
    assert cfg is not None, ge.GEGetErrorMsg()
    assert ge.aclgrphProfStart(cfg) == ge.SUCCESS, ge.GEGetErrorMsg()
    run(sess, steps)
    assert ge.aclgrphProfStop(cfg) == ge.SUCCESS
    assert ge.aclgrphProfFinalize() == ge.SUCCESS
    return geprof_nb.load(out)


@pytest.mark.parametrize("metrics", [m for m in M if m != M.kAicorePipelineExecuteUtilization],
                         ids=lambda m: m.name)
def test_config_aic_metrics_reach_the_op_summary_columns(sess, tmp_path, metrics):
    name = ge_prof.AIC_METRICS_NAMES[metrics]
    p = _collect(sess, tmp_path, metrics, BITS)
    assert p.info["pmu_events"]["metrics"] == [name]
    assert p.options["aic_metrics"] == name
    family = p.device["chip_family"]
    assert list(p.op_summary.columns) == C.op_summary_columns(family, "l1", name)
    assert len(C.pmu_columns(name, family)) > 0


def test_task_time_l0_only_has_no_basic_info(sess, tmp_path):
    p = _collect(sess, tmp_path, M.kAicorePipeUtilization, D.kProfTaskTimeL0, steps=2)
    assert len(p.op_summary) == 2 * n_kernels(sess)
    assert set(p.op_summary["OP Type"]) == {"N/A"} and set(p.op_summary["Task Type"]) == {"N/A"}
    assert set(p.op_summary["Input Shapes"]) == {"N/A"}
    assert p.options["task_trace"] == "l0" and p.info["pmu_events"] == {}
    assert list(p.op_summary.columns) == C.op_summary_columns(p.device["chip_family"], "l0", "")


def test_without_task_time_no_op_data_is_collected(sess, tmp_path):
    p = _collect(sess, tmp_path, M.kAicorePipeUtilization, D.kProfTrainingTrace, steps=2)
    assert p.op_summary.empty
    assert list(p.step_trace["Iteration ID"]) == [1, 2]  # the training trace alone still works


def test_second_window_with_other_aic_metrics_does_not_mislabel_the_first(sess, tmp_path):
    assert ge.aclgrphProfInit(str(tmp_path)) == ge.SUCCESS
    pipe = ge.aclgrphProfCreateConfig([0], M.kAicorePipeUtilization, D.kProfTaskTime)
    memory = ge.aclgrphProfCreateConfig([0], M.kAicoreMemory, D.kProfTaskTime)
    assert ge.aclgrphProfStart(pipe) == ge.SUCCESS
    run(sess, 1)
    assert ge.aclgrphProfStop(pipe) == ge.SUCCESS
    status, msg = ge.aclgrphProfStart(memory), ge.GEGetErrorMsg()
    if status == ge.SUCCESS:
        run(sess, 1)
        assert ge.aclgrphProfStop(memory) == ge.SUCCESS
    assert ge.aclgrphProfFinalize() == ge.SUCCESS
    p = geprof_nb.load(tmp_path)
    if status != ge.SUCCESS:  # refusing to switch metrics inside one run would be fine too
        assert status == ge.FAILED and "metrics" in msg
        return
    first = p.ops(1)
    aic = first[first["Task Type"] == "AI_CORE"]
    # the first window collected PipeUtilization counters: no Memory bandwidth can be derived from them
    assert aic["aic_main_mem_read_bw(GB/s)"].isna().all()


def _dynamic_session() -> ge.Session:
    s = ge.Session()
    assert s.add_graph(2, ge.models.mlp(batch_size=4, in_features=16, hidden=(16,), dynamic=True)) == ge.SUCCESS
    return s


@pytest.mark.parametrize("bits, host_events, node_apis", [
    (D.kProfTaskTime, False, {"LaunchKernelWithHandle"}),
    (D.kProfTaskTime | D.kProfFwkScheduleL0, False, {"LaunchKernelWithHandle", "InferShape", "Tiling"}),
    (D.kProfTaskTime | D.kProfFwkScheduleL1, True, {"LaunchKernelWithHandle", "InferShape", "Tiling"}),
    (D.kProfFwkScheduleL1, True, {"InferShape", "Tiling"}),  # launches need task time; scheduling does not
], ids=["task-time", "fwk-l0", "fwk-l1", "fwk-l1-only"])
def test_framework_schedule_bits_reach_the_host_layers(sess, tmp_path, bits, host_events, node_apis):
    dyn = _dynamic_session()
    assert ge.aclgrphProfInit(str(tmp_path)) == ge.SUCCESS
    cfg = ge.aclgrphProfCreateConfig([0], M.kAicorePipeUtilization, bits)
    assert ge.aclgrphProfStart(cfg) == ge.SUCCESS
    assert dyn.run_graph(2) == ge.SUCCESS
    assert ge.aclgrphProfStop(cfg) == ge.SUCCESS and ge.aclgrphProfFinalize() == ge.SUCCESS
    p = geprof_nb.load(tmp_path)
    assert (not p.host_events.empty) == host_events
    stat = p.api_statistic
    assert set(stat.loc[stat["Level"] == "node", "API Name"]) == node_apis
    expected_ge_api = "l1" if bits & D.kProfFwkScheduleL1 else ("l0" if bits & D.kProfFwkScheduleL0 else "off")
    assert p.options["ge_api"] == expected_ge_api


def test_destroy_config_clears_the_last_error_like_the_other_prof_calls():
    cfg = ge.aclgrphProfCreateConfig([0], 1, M.kAicorePipeUtilization, None, BITS)
    assert ge.aclgrphProfStop(cfg) == ge.FAILED  # not started: an error to clear
    assert "aclgrphProfStop" in ge.GEGetErrorMsg()
    assert ge.aclgrphProfDestroyConfig(cfg) == ge.SUCCESS
    assert ge.GEGetErrorMsg() == ""
