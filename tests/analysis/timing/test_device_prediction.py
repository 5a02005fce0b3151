"""What-if on another device (issue 29): the analysis re-costs every kernel of the recorded run with the device cost
model (geprof_nb/cost_model.py) from the run's op_cost records, then re-times the dependency graph; the simulator
runs the model again with ``geprof.device`` set (same seeds).  Over random device changes (core count, clock,
HBM bandwidth, the 910A preset) on ResNet-50, BERT and an LLM preset the predicted step times equal the
re-simulated ones within 1 %; each kernel task's predicted time equals its re-simulated time within rounding."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis.timing.dependency_graph import run_tasks
from geprof_nb.analysis.timing.device_change import COSTED_TYPES, device_durations
from helpers.geprof_testing import build_tiny_graph, run_profiled_session

MODELS = {
    "resnet50": lambda: ge.models.resnet50(batch_size=2, image_size=64, training=True, world_size=1),
    "bert": lambda: ge.models.bert(),
    "tiny-llama": lambda: ge.models.llm("tiny-llama", seq_len=256),
}
CHANGES = 4  # per model
DATA = Path(__file__).resolve().parents[2] / "data"


def _random_device(rng: np.random.Generator) -> str:
    """A preset, with up to three of its core count, clock and HBM bandwidth changed."""
    preset = str(rng.choice(["Ascend910B", "Ascend910A"]))
    fields = {"ai_core_num": lambda: int(rng.integers(4, 41)),
              "aic_frequency_mhz": lambda: int(rng.integers(800, 2601)),
              "hbm_bandwidth": lambda: f"{rng.uniform(0.4, 4.0):.2f}e12"}
    chosen = rng.choice(list(fields), size=int(rng.integers(0 if preset == "Ascend910A" else 1, 4)), replace=False)
    return preset + (":" + ",".join(f"{k}={fields[k]()}" for k in chosen) if len(chosen) else "")


@pytest.fixture(scope="module")
def resnet(tmp_path_factory):
    return run_profiled_session(tmp_path_factory.mktemp("resnet"), MODELS["resnet50"](), steps=2).profile


@pytest.mark.slow
@pytest.mark.parametrize("model", list(MODELS))
def test_device_predictions_equal_the_resimulated_steps_within_one_percent(tmp_path, model):
    base = run_profiled_session(tmp_path / "base", MODELS[model](), steps=3).profile
    rng = np.random.default_rng([29, list(MODELS).index(model)])
    worst = 0.0
    for k in range(CHANGES):
        device = _random_device(rng)
        predicted = base.what_if(device=device).predicted
        again = run_profiled_session(tmp_path / f"change{k}", MODELS[model](), steps=3, device=device).profile
        assert again.device["name"] == device
        simulated = again.critical_path_summary["step_ns"].to_numpy()
        assert len(simulated) == len(predicted) == 3, device
        error = np.abs(predicted["predicted_ns"].to_numpy() / simulated - 1)
        assert error.max() <= 0.01, (device, predicted["predicted_ns"].tolist(), simulated.tolist())
        worst = max(worst, float(error.max()))
    assert worst <= 0.01


def test_every_kernel_task_takes_its_resimulated_time(resnet, tmp_path):
    """Per task, not only per step: the re-costed kernels of the 910A what-if against the 910A run, task by task
    (the same tasks in the same order: the same seeds draw the same jitter), within 2 ns of rounding."""
    device = "Ascend910A:ai_core_num=20,hbm_bandwidth=2.0e12"
    tasks = run_tasks(resnet)
    predicted = device_durations(device, resnet.device, tasks, resnet.source.cost_terms())
    again = run_profiled_session(tmp_path / "910a", MODELS["resnet50"](), steps=2, device=device).profile
    other = run_tasks(again)
    kernel = np.isin(tasks.task_type, list(COSTED_TYPES))
    assert kernel.sum() > 1000 and np.array_equal(tasks.name, other.name)
    simulated = other.end - other.start
    assert np.abs(predicted[kernel] - simulated[kernel]).max() <= 2
    assert (predicted[~kernel] == (tasks.end - tasks.start)[~kernel]).all()  # copies and events as recorded
    assert (simulated[kernel] > (tasks.end - tasks.start)[kernel]).mean() > 0.5  # 910A at 1 GHz: slower


def test_the_recorded_device_predicts_the_recorded_steps(resnet):
    """The same device: every kernel re-costed to its own time, every step as recorded to the ns."""
    predicted = resnet.what_if(device="Ascend910B").predicted
    assert (predicted["predicted_ns"] == predicted["now_ns"]).all() and (predicted["delta_ns"] == 0).all()


def test_a_device_change_combines_with_an_op_speedup(resnet):
    """The speedup divides the re-costed time: a MatMul twice as fast on 910A saves time against 910A alone."""
    alone = resnet.what_if(device="Ascend910A").predicted["predicted_ns"]
    both = resnet.what_if(device="Ascend910A", op_speedup={"Conv2D*": 2.0}).predicted["predicted_ns"]
    assert (both < alone).all() and (alone > resnet.what_if().predicted["now_ns"]).all()


@pytest.mark.parametrize(("device", "message"), [
    ("Ascend310", "unknown device 'Ascend310'; accepted: Ascend910B, Ascend910A, or a preset with changes"),
    ("Ascend910B:cores=20", "device 'Ascend910B:cores=20': 'cores' is not a device field; accepted: "),
    ("Ascend910B:ai_core_num=2.5", "ai_core_num='2.5' is not a number; accepted: a positive integer"),
    ("Ascend910B:pcie_bandwidth=50e9", "pcie_bandwidth would re-time the run's host-to-device copies"),
])
def test_bad_devices_are_refused_with_the_parsers_message(resnet, device, message):
    with pytest.raises(ValueError) as err:
        resnet.what_if(device=device)
    assert message in str(err.value)


def test_interconnect_fields_are_refused_on_a_run_with_collectives(tmp_path):
    run = run_profiled_session(tmp_path, build_tiny_graph(2)[0], steps=2, hccl="on").profile
    with pytest.raises(ValueError, match=r"hccs_bandwidth would re-time the run's collectives, which are not "
                                         r"re-costed on another device; scale their links with link_bandwidth="):
        run.what_if(device="Ascend910B:hccs_bandwidth=180e9")
    # a compute-only change leaves the AllReduce as recorded and re-costs the MatMuls
    predicted = run.what_if(device="Ascend910B:aic_frequency_mhz=900").predicted
    assert (predicted["predicted_ns"] > predicted["now_ns"]).all()


def test_aicpu_base_time_is_refused_on_a_run_with_aicpu_tasks(tmp_path):
    g = ge.Graph("unique")
    y, _ = g.op("Unique", g.data("x", (4096,), "int32"))
    g.output([g.op("Cast", y, dst_type="float16")])
    run = run_profiled_session(tmp_path, g, steps=2).profile
    assert "KERNEL_AICPU" in set(run.task_time["kernel_type"])
    with pytest.raises(ValueError, match="aicpu_base_ns would re-time the run's AI CPU tasks"):
        run.what_if(device="Ascend910B:aicpu_base_ns=5000")


def test_an_imported_run_has_no_cost_terms():
    """A real torch_npu run (msinsight's test data, DB and text): its files hold no cost model terms."""
    for run in (DATA / "msinsight_pytorch_db/level2/rank0_ascend_pt", DATA / "msinsight_pytorch_text/level1"):
        imported = geprof_nb.load(next(run.glob("rank0*")) if run.name == "level1" else run)
        with pytest.raises(ValueError, match=r"this run records no cost terms of its kernels \(op_cost records"):
            imported.what_if(device="Ascend910B")


def test_a_damaged_cost_record_is_refused_naming_the_op(resnet, monkeypatch):
    found, records = resnet.source.cost_terms()
    records = records.copy()
    records["engine"][:] = 7
    monkeypatch.setattr(resnet.source, "cost_terms", lambda: (found, records))
    with pytest.raises(ValueError, match=r"the op_cost record of '.+' is damaged \(engine 7, data_type [01]\); accepted: "
                                         r"engine 0\.\.1, a data type of float16, float32"):
        resnet.what_if(device="Ascend910A")


def test_verify_re_simulates_on_the_new_device(tmp_path):
    """``WhatIf.verify()`` replays the run on the what-if's device (``Profile.replay(device=...)``)."""
    run = run_profiled_session(tmp_path, MODELS["resnet50"](), steps=2).profile
    checked = run.what_if(device="Ascend910A:ai_core_num=16").verify()
    assert len(checked) == 2 and (checked["simulated_ns"] > run.what_if().predicted["now_ns"]).all()
    assert np.abs(checked["error"]).max() < 0.01
