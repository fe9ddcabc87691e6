"""What the test files share: the helper modules on the path, the fake backends, and the small problems several
files use (one definition each, session-scoped so that a problem is built, and its kernels compiled, once)."""
from __future__ import annotations

import os
import sys

import pytest

# the helper modules beside the tests (_fake_backends, _properties, _browser, _declarations), importable by name
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bayeszoo as bz  # noqa: E402
from bayeszoo import registry  # noqa: E402

FAKE_BACKENDS = ["fake_ok", "fake_vb", "fake_em", "fake_fail"]


@pytest.fixture(scope="session")
def fakes():
    """tests/_fake_backends.py, imported: the fake RVM backends are registered."""
    import _fake_backends

    return _fake_backends


@pytest.fixture(scope="session")
def sinc():
    """20 sinc points (40 held out): the RVM problem of the generic-backend tests and of the contract, so the
    generic samplers' compiled kernels are shared through the caches."""
    return bz.datasets.load("sinc", n=20, n_test=40, seed=2)


@pytest.fixture(scope="session")
def fake_comparison(fakes):
    """An RVM comparison of the four fake backends (one fails) against fake_ok, on 40 sinc points with 100 held
    out: the report and the notebook display are checked on it."""
    data = bz.datasets.load("sinc", n=40, n_test=100)
    return bz.compare(bz.models.RVM(width=3.0), data, backends=FAKE_BACKENDS, reference="fake_ok", draws=200,
                      tune=0, chains=2, seed=3, progress=False)


@pytest.fixture
def restore_registry():
    """Whatever a test registers (bz.register_backend, registry.register) is gone afterwards."""
    generic, family = dict(registry._GENERIC), dict(registry._FAMILY)
    yield
    registry._GENERIC.clear()
    registry._GENERIC.update(generic)
    registry._FAMILY.clear()
    registry._FAMILY.update(family)
