"""``bayeszoo.checks``: the shared validators, directly (the backends' own tests cover their use)."""
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
