"""AI CPU ops (DropOutGenMask, NonZero, Unique) and the AI CPU time split."""

from __future__ import annotations

import numpy as np
import pytest

from geprof_nb import ge
from geprof_nb.ge import aicpu
from geprof_nb.ge.device import PRESETS, CostModel
from geprof_nb.ge.graph import GraphBuildError
from geprof_nb.ge.ops import op_cost
from geprof_nb.prof.rawdata import AICPU_DTYPE, GeTaskType


def _mask(shape, shape_input=None, shape_dtype="int64", prob_shape=(), prob_dtype="float32", **attrs):
    g = ge.Graph()
    s = g.const("shape", (len(shape),) if shape_input is None else shape_input, shape_dtype, value=list(shape))
    p = g.const("prob", prob_shape, prob_dtype, value=0.9)
    return g.op("DropOutGenMask", [s, p], name="mask", shape=list(shape), **attrs)


# ------------------------------------------------------------------- DropOutGenMask
@pytest.mark.parametrize("shape, nbytes", [([4, 100], 64), ([128], 16), ([1], 16), ([129], 32), ([8, 16, 16], 256)])
def test_dropout_mask_is_one_bit_per_element_in_128_element_blocks(shape, nbytes):
    y = _mask(shape)
    assert (y.shape, y.dtype, y.format) == ((nbytes,), "uint8", "ND")
    assert y.node.engine == "AI_CPU"
    assert op_cost(y.node).bytes_out == nbytes


def test_dropout_mask_accepts_an_int32_shape():
    assert _mask([256], shape_dtype="int32", prob_dtype="float16").shape == (32,)


@pytest.mark.parametrize("kwargs, message", [
    ({"shape_dtype": "float32"}, "input shape must be a 1-D int32/int64 tensor, got float32"),
    ({"shape_input": (2, 1)}, "input shape must be a 1-D int32/int64 tensor"),
    ({"shape_input": (3,)}, r"input shape has 3 elements but attribute shape \[4, 100\] has 2 dims"),
    ({"prob_shape": (2,)}, "prob must be a float16/float32 scalar"),
    ({"prob_dtype": "int32"}, "prob must be a float16/float32 scalar"),
])
def test_dropout_mask_errors(kwargs, message):
    with pytest.raises(GraphBuildError, match=f"^DropOutGenMask 'mask': {message}"):
        _mask([4, 100], **kwargs)


def test_dropout_mask_needs_a_shape_attribute():
    g = ge.Graph()
    s, p = g.const("s", (1,), "int64"), g.const("p", (), "float32")
    with pytest.raises(GraphBuildError, match="DropOutGenMask 'DropOutGenMask': attribute shape is required"):
        g.op("DropOutGenMask", [s, p])
    with pytest.raises(GraphBuildError, match="non-empty list of dims >= 1"):
        g.op("DropOutGenMask", [s, p], shape=[0])
    with pytest.raises(GraphBuildError, match="expects 2 inputs"):
        g.op("DropOutGenMask", [s], shape=[4])


# ------------------------------------------------------------------------- NonZero
def test_non_zero_shapes():
    g = ge.Graph()
    x = g.data("x", (3, 4), "float16")
    y = g.op("NonZero", x)
    assert (y.shape, y.dtype) == ((12, 2), "int64")
    assert g.op("NonZero", x, max_output=5).shape == (5, 2)
    assert g.op("NonZero", g.data("v", (7,), "int32")).shape == (7, 1)
    assert y.node.engine == "AI_CPU"


@pytest.mark.parametrize("attrs, message", [
    ({"max_output": 13}, "got 13"),
    ({"max_output": 0}, "got 0"),
    ({"max_output": "5"}, "got '5'"),
])
def test_non_zero_errors(attrs, message):
    g = ge.Graph()
    expect = r"^NonZero 'nz': attribute max_output must be an int in \[1, 12\] \(elements of x\), "
    with pytest.raises(GraphBuildError, match=expect + message + "$"):
        g.op("NonZero", g.data("x", (3, 4)), name="nz", **attrs)


def test_non_zero_of_a_scalar_fails():
    g = ge.Graph()
    with pytest.raises(GraphBuildError, match="NonZero 'nz': x must have rank >= 1"):
        g.op("NonZero", g.const("c", (), "float32"), name="nz")


# -------------------------------------------------------------------------- Unique
def test_unique_outputs():
    g = ge.Graph()
    y, idx = g.op("Unique", g.data("x", (10,), "int64"))
    assert (y.shape, y.dtype, idx.shape, idx.dtype) == ((10,), "int64", (10,), "int32")
    _, idx64 = g.op("Unique", g.data("z", (6,), "float32"), out_idx="int64")
    assert idx64.dtype == "int64"
    assert y.node.engine == "AI_CPU"
    assert op_cost(y.node).bytes == 10 * 8 + 10 * 8 + 10 * 4


@pytest.mark.parametrize("shape, attrs, message", [
    ((2, 5), {}, r"x must have rank 1, got shape \[2, 5\]"),
    ((5,), {"out_idx": "float32"}, "attribute out_idx must be 'int32' or 'int64', got 'float32'"),
])
def test_unique_errors(shape, attrs, message):
    g = ge.Graph()
    with pytest.raises(GraphBuildError, match=f"^Unique 'u': {message}"):
        g.op("Unique", g.data("x", shape), name="u", **attrs)


# ----------------------------------------------------------------- cost and training
def test_aicpu_ops_run_as_aicpu_kernels():
    g = ge.Graph()
    y, _ = g.op("Unique", g.data("x", (1000,), "int32"))
    timing = CostModel(PRESETS["Ascend910B"]).kernel("Unique", "AI_CPU", op_cost(y.node), "int32", {})
    assert timing.ge_task_type == GeTaskType.AI_CPU
    assert timing.duration_ns == PRESETS["Ascend910B"].aicpu_base_ns + op_cost(y.node).bytes // 2


def test_training_passes_no_gradient_through_aicpu_ops():
    """Gradients reach NonZero / Unique / DropOutGenMask outputs (through Cast) and stop there."""
    g = ge.Graph()
    w = g.variable("w", (4, 8), "float32")
    count = g.op("ReduceSum", g.op("Cast", g.op("NonZero", w, max_output=4), dst_type="float32"))
    distinct, _ = g.op("Unique", g.op("Reshape", w, shape=[32]))
    keep = g.op("DropOutGenMask", [g.const("shape", (2,), "int64", value=[4, 8]), g.const("p", (), "float32")],
                shape=[4, 8])
    kept = g.op("ReduceMean", g.op("Cast", keep, dst_type="float32"))
    terms = [g.op("ReduceMean", w), g.op("Mul", [g.op("ReduceMean", distinct), count]), kept]
    info = ge.add_training(g, g.op("AddN", terms))
    assert info.gradients["w"].shape == (4, 8)
    backward = g.nodes[info.backward_start:]
    assert {"NonZero", "Unique", "DropOutGenMask"}.isdisjoint(n.type for n in backward)


# ------------------------------------------------------------------- AI CPU split
def test_breakdown_sums_exactly():
    rng = np.random.default_rng(1)
    nbytes = 123_457
    nominal = aicpu.AICPU_DISPATCH_NS + int(nbytes / aicpu.AICPU_MEMCPY_BANDWIDTH * 1e9)
    total = np.concatenate([rng.integers(nominal, 10 * nominal, 500), rng.integers(0, nominal, 500)])
    parts = aicpu.aicpu_breakdown(total, nbytes)
    assert set(parts) == {"compute_ns", "memcpy_ns", "task_ns", "dispatch_ns", "total_ns"} <= set(AICPU_DTYPE.names)
    assert all(v.dtype == np.int64 and v.shape == total.shape for v in parts.values())
    assert (parts["compute_ns"] + parts["memcpy_ns"] + parts["dispatch_ns"] == total).all()
    assert (parts["task_ns"] == parts["compute_ns"] + parts["memcpy_ns"]).all()
    assert (parts["total_ns"] == total).all()
    assert min(v.min() for v in parts.values()) >= 0


def test_breakdown_nominal_parts_and_jitter_in_compute():
    nbytes = 40_000  # 20 us at 2 GB/s
    parts = aicpu.aicpu_breakdown(np.array([35_000, 36_000, 80_000]), nbytes)
    assert parts["memcpy_ns"].tolist() == [20_000] * 3
    assert parts["dispatch_ns"].tolist() == [aicpu.AICPU_DISPATCH_NS] * 3
    assert parts["compute_ns"].tolist() == [10_000, 11_000, 55_000]


def test_breakdown_of_a_short_execution_scales_down():
    parts = aicpu.aicpu_breakdown(np.array([12_500]), 40_000)  # half of memcpy + dispatch
    assert parts["memcpy_ns"].tolist() == [10_000] and parts["dispatch_ns"].tolist() == [2_500]
    assert parts["compute_ns"].tolist() == [0]


def test_aicpu_records():
    rec = aicpu.aicpu_records(np.array([100, 200]), 9, np.array([1, 2]), np.array([30_000, 31_000]), 8_000)
    assert rec.dtype == AICPU_DTYPE
    assert rec["timestamp"].tolist() == [100, 200] and (rec["connection_id"] == 9).all()
    assert rec["iteration"].tolist() == [1, 2] and rec["total_ns"].tolist() == [30_000, 31_000]
    assert (rec["task_ns"] + rec["dispatch_ns"] == rec["total_ns"]).all()
    assert rec["memcpy_ns"].tolist() == [4_000, 4_000]
