"""``bayeszoo.checks``: the shared validators, directly (the backends' own tests cover their use)."""
import re

import numpy as np
import pytest

from bayeszoo import checks


def test_number_sequence_returns_a_tuple_of_checked_floats():
    assert checks.number_sequence("X", "t", [1, 2.5]) == (1.0, 2.5)
    assert checks.number_sequence("X", "t", np.array([3.0, 4.0]), low=1) == (3.0, 4.0)
    assert checks.number_sequence("X", "t", 4, allow_scalar=True) == (4.0,)


@pytest.mark.parametrize("value,kwargs,message", [
    ((), {}, "non-empty sequence of numbers"),
    (4.0, {}, "non-empty sequence of numbers"),                   # a scalar only with allow_scalar
    (True, {"allow_scalar": True}, "non-empty sequence of numbers or a number"),
    ("12", {"allow_scalar": True}, "non-empty sequence"),
    (np.ones((2, 2)), {}, "non-empty sequence"),
    ((1.0, float("nan")), {}, "finite number"),
    ((2.0, 0.5), {"low": 1, "low_inclusive": True}, ">= 1"),
])
def test_number_sequence_refuses_bad_input_naming_the_option(value, kwargs, message):
    with pytest.raises(ValueError, match=f"X: t must be a .*{message}"):
        checks.number_sequence("X", "t", value, **kwargs)


# ------------------------------------------------------------------------------- declarative constraints
@pytest.mark.parametrize("constraint,good,expected,bad,message", [
    (checks.Interval(int, 1, None, "left"), 3, 3, 0, "an integer >= 1; got 0"),
    (checks.Interval(int, 1, None, "left"), 3, 3, 2.0, "an integer; got 2.0"),
    (checks.Interval(float, 0, 1, "neither"), 0.5, 0.5, 1.0, "a finite number < 1; got 1.0"),
    (checks.Interval(float, 0, None, "neither", none=True), None, None, -1.0, "a finite number > 0; got -1.0"),
    (checks.OneOf(("a", "b")), "b", "b", "c", "one of ('a', 'b'); got 'c'"),
    (checks.Flag(), True, True, 1, "True or False; got 1"),
    (checks.Numbers(checks.POSITIVE, length=2), [1, 2], (1.0, 2.0), [1, 2, 3], "a sequence of 2 numbers"),
    (checks.Numbers(checks.POSITIVE, scalar=True), 4, (4.0,), [1, -1], "a finite number > 0; got -1"),
    (checks.Array(ndim=2), [[1.0, 2.0]], np.array([[1.0, 2.0]]), [1.0, 2.0], "must have 2 dimension"),
    (checks.Text(none=True), "log.txt", "log.txt", 3, "a string or None; got 3"),
])
def test_constraints_return_the_value_or_name_what_it_must_be(constraint, good, expected, bad, message):
    np.testing.assert_equal(constraint("X backend 'b'", "option 'o'", good), expected)
    with pytest.raises(ValueError, match=rf"^X backend 'b': option 'o' .*{re.escape(message)}"):
        constraint("X backend 'b'", "option 'o'", bad)


@pytest.mark.parametrize("value", [["1.5", "2"], [1 + 2j, 3.0], [[1.0, 2.0], [3.0]], {"a": 1.0}, [None, 1.0]])
def test_finite_array_refuses_what_is_not_an_array_of_real_numbers(value):
    with pytest.raises(ValueError, match="X: a must be an array of real numbers"):
        checks.finite_array("X", "a", value)


def test_finite_array_takes_numbers_of_any_real_kind():
    import pandas as pd

    for value in ([1, 2.5], np.array([1, 2], dtype=np.int32), pd.Series([1, 2], dtype=object), [True, False]):
        assert checks.finite_array("X", "a", value).dtype == float
