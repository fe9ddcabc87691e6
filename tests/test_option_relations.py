"""Options that contradict each other (``min_sweeps`` above ``max_sweeps``) are refused before the backend runs, by
a relation declared with the backend's options (``register(..., relations=...)``)."""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

import bayeszoo as bz
from bayeszoo import registry
from bayeszoo.checks import POSITIVE_INT, AtMost
from bayeszoo.registry import Option


@pytest.fixture(scope="module")
def gpc_problem():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((16, 2))
    y = (X[:, 0] + 0.3 * rng.standard_normal(16) > 0).astype(int)
    return bz.models.GPC(), bz.datasets.Dataset(X=X, y=y, name="tiny_gpc", meta={"task": "classification"})


def test_at_most_names_both_options_and_their_values():
    relation = AtMost("min_sweeps", "max_sweeps")
    relation("B", {"min_sweeps": 3, "max_sweeps": 3})      # equal is allowed
    relation("B", {"min_sweeps": None, "max_sweeps": 3})   # None: a default that depends on the data
    with pytest.raises(ValueError) as caught:
        relation("GPC backend 'ep'", {"min_sweeps": 500, "max_sweeps": 200})
    assert str(caught.value) == "GPC backend 'ep': option 'min_sweeps' (500) must be <= 'max_sweeps' (200)"
    by_size = AtMost("min_iter", "max_iter", larger_default=lambda data: 20 * data.n)
    by_size("B", {"min_iter": 500, "max_iter": None})                    # no data (registration): skipped
    by_size("B", {"min_iter": 200, "max_iter": None}, SimpleNamespace(n=10))
    with pytest.raises(ValueError, match=r"^B: option 'min_iter' \(201\) must be <= 'max_iter' \(200, its default "
                                         r"for these data\)$"):
        by_size("B", {"min_iter": 201, "max_iter": None}, SimpleNamespace(n=10))
    by_size("B", {"min_iter": 201, "max_iter": 300}, SimpleNamespace(n=10))   # a given value wins


def test_gpc_ep_refuses_min_sweeps_above_max_sweeps_before_it_runs(gpc_problem, monkeypatch):
    model, data = gpc_problem
    spec = registry.get(model, "ep")
    monkeypatch.setitem(registry._FAMILY, ("gpc", "ep"), dataclasses.replace(spec, run=_must_not_run))
    with pytest.raises(ValueError, match=r"^GPC backend 'ep': option 'min_sweeps' \(500\) must be <= 'max_sweeps' "
                                         r"\(200\)$"):
        bz.fit(model, data, "ep", min_sweeps=500, max_sweeps=200, progress=False)
    with pytest.raises(ValueError, match=r"option 'min_sweeps' \(201\) must be <= 'max_sweeps' \(200\)"):
        bz.fit(model, data, "ep", min_sweeps=201, progress=False)        # against the default cap
    with pytest.raises(ValueError, match=r"option 'min_sweeps' \(500\) must be <= 'max_sweeps'"):
        bz.compare(model, data, ["laplace", "ep"], reference=None, options={"ep": {"min_sweeps": 500}},
                   progress=False)
    # each option's own constraint comes first
    with pytest.raises(ValueError, match=r"option 'min_sweeps' must be an integer >= 1; got 0"):
        bz.fit(model, data, "ep", min_sweeps=0, max_sweeps=200, progress=False)


def test_gpc_ep_makes_at_least_min_sweeps_when_it_may(gpc_problem):
    model, data = gpc_problem
    quick = bz.fit(model, data, "ep", draws=5, chains=1, progress=False)
    assert quick.info["converged"] and quick.info["iterations"] < 20
    forced = bz.fit(model, data, "ep", draws=5, chains=1, min_sweeps=20, max_sweeps=20, progress=False)
    assert forced.info["iterations"] == 20


def test_register_refuses_relations_on_undeclared_options_or_contradicting_defaults():
    options = {"min_iter": Option(5, "fewest iterations", POSITIVE_INT),
               "max_iter": Option(3, "most iterations", POSITIVE_INT)}
    with pytest.raises(TypeError, match=r"undeclared option\(s\) \['max_sweeps'\]"):
        registry.register("relation_probe", kind="approximation", family="rvm", options=options,
                          relations=(AtMost("min_iter", "max_sweeps"),))
    with pytest.raises(TypeError, match=r"contradict a relation: .*'min_iter' \(5\) must be <= 'max_iter' \(3\)"):
        registry.register("relation_probe", kind="approximation", family="rvm", options=options,
                          relations=(AtMost("min_iter", "max_iter"),))
    assert ("rvm", "relation_probe") not in registry._FAMILY


def _must_not_run(*args, **kwargs):
    raise AssertionError("the backend ran although its options contradict each other")
