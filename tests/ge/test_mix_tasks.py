"""Large-K matrix products become MIX_AIC (FFTS+) tasks on A2, with Mix Block Num and Context ID."""

import pandas as pd
import pytest

from geprof_nb import ge
from helpers.geprof_testing import run_profiled_session


def matmul_graph(k: int) -> ge.Graph:
    g = ge.Graph("mix")
    x = g.data("x", (4096, k))
    w = g.variable("w", (k, 4096), dtype="float16")
    g.output([g.op("MatMulV2", [x, w], name="mm")])
    return g


@pytest.mark.parametrize("k, device, mix", [
    (1001, "Ascend910B", True),   # K > 1000, long, 2002 bytes not 512-aligned
    (1024, "Ascend910B", False),  # aligned inner axis
    (512, "Ascend910B", False),   # small K
    (1001, "Ascend910A", False),  # not a Stars chip: no FFTS+ MIX
])
def test_mix_aic_rule(tmp_path, k, device, mix):
    run = run_profiled_session(tmp_path, matmul_graph(k), steps=1, device=device)
    row = run.profile.op_summary.set_index("Op Name").loc["mm"]
    task_type = run.profile.task_time.set_index("kernel_name").loc["mm", "kernel_type"]
    if mix:
        assert row["Task Type"] == "MIX_AIC" and task_type == "KERNEL_MIX_AIC"
        assert row["Mix Block Num"] == 2 * row["Block Num"] > 0
        assert row["Context ID"] == 0
    else:
        assert row["Task Type"] == "AI_CORE" and task_type == "KERNEL_AICORE"
        if device == "Ascend910B":
            assert row["Mix Block Num"] == 0
            assert row["Context ID"] is pd.NA
