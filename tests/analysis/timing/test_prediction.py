"""What-if predictions against re-simulation (issue 29): the analysis re-times the recorded dependency graph,
the simulator runs the model again under the same change (``ge.what_if.applying``, same seeds); over random
op speedups and removals, by op type and by op name, on ResNet-50, BERT and an LLM preset, the predicted step
times equal the re-simulated ones within 1 %."""

from __future__ import annotations

import numpy as np
import pytest

from geprof_nb import ge
from geprof_nb.ge import what_if
from helpers.geprof_testing import run_profiled_session

MODELS = {
    "resnet50": lambda: ge.models.resnet50(batch_size=2, image_size=64, training=True, world_size=1),
    "bert": lambda: ge.models.bert(),
    "tiny-llama": lambda: ge.models.llm("tiny-llama", seq_len=256),
}
KERNELS = ("AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV", "AI_CPU")
CHANGES = 8  # per model


def _random_change(rng: np.random.Generator, types: list[str], names: list[str]) -> dict:
    """Up to three op types sped up, sometimes an op name pattern sped up or removed."""
    kw: dict = {"op_speedup": {str(t): float(np.round(rng.uniform(1.1, 5.0), 2))
                               for t in rng.choice(types, size=min(3, len(types)), replace=False)}}
    if rng.random() < 0.5:
        name = str(rng.choice(names))
        kw["op_speedup"][name[: max(1, len(name) // 2)] + "*"] = float(np.round(rng.uniform(1.1, 3.0), 2))
    if rng.random() < 0.4:
        kw["remove_ops"] = [str(rng.choice(names))]
    return kw


@pytest.mark.slow
@pytest.mark.parametrize("model", list(MODELS))
def test_predictions_equal_the_resimulated_steps_within_one_percent(tmp_path, model):
    base = run_profiled_session(tmp_path / "base", MODELS[model](), steps=3).profile
    ops = base.op_summary[base.op_summary["Task Type"].astype(str).isin(KERNELS)]
    types = sorted(set(ops["OP Type"].astype(str)))
    names = sorted(set(ops["Op Name"].astype(str)))
    rng = np.random.default_rng(29)
    worst = 0.0
    for k in range(CHANGES):
        change = _random_change(rng, types, names)
        predicted = base.what_if(**change).predicted
        with what_if.applying(what_if.OpChange.from_keywords(**change)):
            again = run_profiled_session(tmp_path / f"change{k}", MODELS[model](), steps=3).profile
        simulated = again.critical_path_summary["step_ns"].to_numpy()
        assert len(simulated) == len(predicted) == 3, change
        assert (predicted["predicted_ns"].to_numpy() <= predicted["now_ns"].to_numpy()).all(), change
        error = np.abs(predicted["predicted_ns"].to_numpy() / simulated - 1)
        assert error.max() <= 0.01, (change, predicted["predicted_ns"].tolist(), simulated.tolist())
        worst = max(worst, float(error.max()))
    assert worst <= 0.01
