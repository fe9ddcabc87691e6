"""Shared settings of the property-based tests: a small, fixed example budget in the default suite, a larger
random one in the slow set (``make test-slow``)."""
from __future__ import annotations

import os

from hypothesis import HealthCheck, event, settings

import bayeszoo
import bayeszoo.diagnostics
import bayeszoo.inference
import bayeszoo.models

#: the folders of bayeszoo's code: the harness and the three packages the design card puts at the top level
PACKAGE = tuple(os.path.dirname(os.path.abspath(p.__file__)) + os.sep
                for p in (bayeszoo, bayeszoo.models, bayeszoo.inference, bayeszoo.diagnostics))

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


def refuses_clearly(call, what: str = "", *, from_bayeszoo: bool = False):
    """``call()``'s result, or None after a plain ValueError with a message. A subclass of ValueError (NumPy's
    LinAlgError from deep inside the numerics) or any other exception type fails the test, as does the Fit
    builder's refusal of a NaN objective (the backend computed it). ``from_bayeszoo`` also demands that the error
    is raised in bayeszoo's own code (:func:`refused_by_bayeszoo`). With ``what``, the outcome is recorded
    (``--hypothesis-show-statistics`` lists how often each happened)."""
    def strict():
        try:
            return call()
        except ValueError as exc:
            if type(exc) is not ValueError:
                raise AssertionError(f"unclear refusal {type(exc).__name__}: {exc}") from exc
            assert str(exc), "a refusal must say what is wrong"
            assert "non-finite objective" not in str(exc), f"a backend computed NaN or inf: {exc}"
            if what:
                event(f"{what} refused: {' '.join(str(exc).split()[:4])}")
            raise
    out = (refused_by_bayeszoo if from_bayeszoo else fits_or_refuses)(strict)
    if what and out is not None:
        event(f"{what} done")
    return out
