"""ge/tensor.py: tensor descriptions and the checks of shapes, dtypes and formats that graphs, ops and ACL share."""

from __future__ import annotations

import numpy as np
import pytest

from geprof_nb.ge.tensor import (
    UNKNOWN_DIM,
    GraphBuildError,
    TensorDesc,
    canonical_dtype,
    canonical_format,
    checked_shape,
    tensor_mismatch,
)


def test_tensor_desc_sizes():
    d = TensorDesc((2, 3, 4), "float16")
    assert (d.numel, d.itemsize, d.nbytes, d.rank) == (24, 2, 48, 3)
    assert TensorDesc((5,), "int64").nbytes == 40
    assert str(d) == "float16[2,3,4]:ND"


def test_a_dynamic_desc_has_a_negative_element_count():
    d = TensorDesc((UNKNOWN_DIM, 8), "float32")
    assert d.is_dynamic and d.numel == -8
    assert not TensorDesc((1, 8)).is_dynamic


@pytest.mark.parametrize("given, name", [("fp16", "float16"), ("HALF", "float16"), ("float", "float32"),
                                         ("bf16", "bfloat16"), ("int8", "int8")])
def test_dtype_aliases_become_canonical_names(given, name):
    assert canonical_dtype(given) == name


def test_unknown_dtype_and_format_name_the_field_and_list_the_accepted():
    with pytest.raises(GraphBuildError, match=r"^input 0: unknown dtype 'complex64'; accepted: float16, float32, "):
        canonical_dtype("complex64", "input 0")
    assert canonical_format("nchw") == "NCHW"
    with pytest.raises(GraphBuildError, match=r"^format: unknown format 'XYZ'; accepted: .*NC1HWC0"):
        canonical_format("XYZ")


def test_checked_shape():
    assert checked_shape(4, "x") == (4,)
    assert checked_shape([np.int64(2), 3], "x") == (2, 3)
    assert checked_shape([-1, 3], "x", allow_unknown=True) == (UNKNOWN_DIM, 3)
    with pytest.raises(GraphBuildError, match=r"^x: shape \[-1, 3\] is not valid; accepted: dimensions >= 1$"):
        checked_shape([-1, 3], "x")
    with pytest.raises(GraphBuildError, match=r"^x: shape must be a sequence of ints, got '23'"):
        checked_shape("23", "x")


def test_tensor_mismatch_says_why_an_array_does_not_fit():
    want = TensorDesc((UNKNOWN_DIM, 4), "float16")
    assert tensor_mismatch(np.zeros((7, 4), np.float16), want) == ""
    assert tensor_mismatch(np.zeros((7, 5), np.float16), want) == "has shape [7, 5], expected [-1, 4] (-1: any size)"
    assert tensor_mismatch(np.zeros((7, 4), np.float32), want) == "has dtype float32, expected float16"
    assert tensor_mismatch(np.zeros((7, 4), np.complex64), want) == ""  # a dtype GE does not know is not checked
