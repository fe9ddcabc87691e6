"""Shared settings of the property-based tests: a small, fixed example budget in the default suite, a larger
random one in the slow set (``make test-slow``)."""
from __future__ import annotations

from hypothesis import HealthCheck, settings

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
