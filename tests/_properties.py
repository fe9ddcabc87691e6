"""Shared settings of the property-based tests: a small, fixed example budget in the default suite, a larger
random one in the slow set (``make test-slow``)."""
from __future__ import annotations

import os

from hypothesis import HealthCheck, event, settings

import bayeszoo

PACKAGE = os.path.dirname(os.path.abspath(bayeszoo.__file__)) + os.sep

_QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
          HealthCheck.function_scoped_fixture]
#: default suite: few examples, derandomised so that a CI run is reproducible
FAST = settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=_QUIET, database=None)
#: slow set: many examples, random
SLOW = settings(max_examples=80, deadline=None, suppress_health_check=_QUIET, database=None)


def fits_or_refuses(call):
    """``call()``'s result, or None when it raised a ValueError; any other exception fails the test."""
    try:
        return call()
    except ValueError:
        return None


def refused_by_bayeszoo(call):
    """``fits_or_refuses(call)``, where a ValueError must come from bayeszoo's own code (a check naming the problem),
    not from NumPy / SciPy passing through, and must not be the Fit builder's refusal of NaN draws (a backend that
    computed NaN has a bug of its own)."""
    def checked():
        try:
            return call()
        except ValueError as exc:
            tb = exc.__traceback__
            while tb.tb_next is not None:
                tb = tb.tb_next
            where = tb.tb_frame.f_code.co_filename
            assert where.startswith(PACKAGE), f"ValueError raised outside bayeszoo ({where}): {exc}"
            assert str(exc), "a ValueError without a message"
            assert "non-finite draws" not in str(exc), f"a backend computed NaN or inf: {exc}"
            event(f"refused: {str(exc)[:60]}")
            raise

    return fits_or_refuses(checked)
