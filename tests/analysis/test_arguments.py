"""The analysis API's argument checks: integers (numpy ones too, never a bool), ids listed short."""

from __future__ import annotations

import numpy as np
import pytest

from geprof_nb.analysis.arguments import id_span, integer, member, positive_integer


@pytest.mark.parametrize("ids, text", [
    ([5, 3, 4], "3..5"),
    ([7], "7"),
    ([1, 2], "1, 2"),
    ([0, 2, 5, 9], "0, 2, 5, 9"),
    (range(0, 100, 2), "0, 2, 4, ..., 94, 96, 98 (50 in all)"),
    (np.array([3, 3, 4, 5], np.int64), "3..5"),
])
def test_id_span_is_a_range_when_contiguous_else_the_ids_or_their_ends(ids, text):
    assert id_span(ids) == text


@pytest.mark.parametrize("value", ["3", 3.0, True, np.bool_(True), None])
def test_integer_refuses_what_is_not_an_integer_naming_the_argument(value):
    with pytest.raises(TypeError) as err:
        integer("iteration", value)
    assert str(err.value) == f"iteration {value!r} is not valid; accepted: an integer"


def test_integer_takes_numpy_integers():
    assert integer("rank", np.int64(3)) == 3 and type(integer("rank", np.int32(3))) is int


@pytest.mark.parametrize("value, error, text", [
    (0, ValueError, "top 0 is not valid; accepted: a positive integer (1, 2, 3, ...)"),
    (-1, ValueError, "top -1 is not valid; accepted: a positive integer (1, 2, 3, ...)"),
    ("5", TypeError, "top '5' is not valid; accepted: a positive integer (1, 2, 3, ...)"),
    (True, TypeError, "top True is not valid; accepted: a positive integer (1, 2, 3, ...)"),
])
def test_positive_integer(value, error, text):
    with pytest.raises(error) as err:
        positive_integer("top", value)
    assert str(err.value) == text
    assert positive_integer("top", np.int64(2)) == 2


def test_member_lists_the_ids_or_says_there_are_none():
    assert member("device_id", np.int64(1), [0, 1], "run", "devices") == 1
    with pytest.raises(ValueError) as err:
        member("iteration", 99, np.array([3, 4, 5]), "this run", "iterations")
    assert str(err.value) == "iteration 99 is not in this run; its iterations are 3..5"
    with pytest.raises(ValueError) as err:
        member("iteration", 1, [], "this run", "iterations")
    assert str(err.value) == "iteration 1 is not in this run; it has no iterations"
