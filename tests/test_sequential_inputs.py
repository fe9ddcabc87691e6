"""The inputs of the sequential loops (bz.active_learning, bz.design): refused before the first fit with a message
naming them, never truncated or ignored; ``seed=None`` draws one seed for the whole run and records it."""
from __future__ import annotations

import numpy as np
import pytest

import bayeszoo as bz
from bayeszoo import active_learning as al
from bayeszoo import design

TAU = 1.3


def logistic_problem(q, seed):
    rng = np.random.default_rng(seed)
    F = np.column_stack([rng.standard_normal(q), np.ones(q)])
    c = np.where(rng.random(q) < 1.0 / (1.0 + np.exp(-TAU * F @ np.array([1.5, -0.5]))), 1.0, -1.0)
    return F, c


def logistic_model():
    return bz.models.SLM(potential="sigmoid", tau=TAU, sigma2=1.0, B="meta")


@pytest.fixture
def no_fits(monkeypatch):
    """Every refusal below must come before the first fit."""
    def must_not_fit(*args, **kwargs):
        raise AssertionError("a fit ran although the input was bad")

    monkeypatch.setattr(al, "fit_model", must_not_fit)
    monkeypatch.setattr(design, "fit_model", must_not_fit)


@pytest.mark.parametrize("initial, message", [
    ([0.9, 1.9, 2.9], r"initial must be a non-empty sequence of pool indices, integers in \[0, 10\); "
                      r"got \[0.9, 1.9, 2.9\]"),
    (np.array([0.0, 1.0]), "initial must be a non-empty sequence of pool indices"),
    (["a"], r"got \['a'\]"),
    ([True, 2], "integers in"),
    ([], "non-empty"),
    (3, "got 3"),
    ([0, 10], r"integers in \[0, 10\)"),
    ([-1], r"integers in \[0, 10\)"),
    ([2, 0, 2], r"initial repeats the pool indices \[2\]"),
])
def test_initial_must_be_distinct_integer_pool_indices(no_fits, initial, message):
    F, c = logistic_problem(10, 0)
    with pytest.raises(ValueError, match=message):
        al.active_learning(logistic_model(), F, c, initial=initial, n_blocks=1, block=1, progress=False)


@pytest.mark.parametrize("test, message", [
    (dict(test_labels=np.ones(4)), "test_labels given without test_features"),
    (dict(test_features=np.ones((4, 2))), "test_features given without test_labels"),
    (dict(test_features=np.full((4, 2), np.nan), test_labels=np.ones(4)), "test_features contains NaN"),
    (dict(test_features=np.ones((4, 3)), test_labels=np.ones(4)), r"test_features must have 2 column\(s\)"),
    (dict(test_features=np.ones((4, 2)), test_labels=np.ones(3)), "4 test_features rows but 3 test_labels"),
    (dict(test_features=np.ones((4, 2)), test_labels=np.arange(4.0)), "test_labels must be binary"),
    (dict(test_features=np.ones((0, 2)), test_labels=np.ones(0)), r"test_features needs at least 1 row"),
])
def test_the_test_cases_are_checked_before_the_first_fit(no_fits, test, message):
    F, c = logistic_problem(10, 0)
    with pytest.raises(ValueError, match=message):
        al.active_learning(logistic_model(), F, c, initial=[0, 1], n_blocks=1, block=1, progress=False, **test)


def test_bad_seeds_and_options_are_refused_before_the_first_fit(no_fits):
    F, c = logistic_problem(10, 0)
    for seed in (-1, 2**32, 1.5, "0"):
        with pytest.raises(ValueError, match="bz.active_learning: seed must be None or an integer"):
            al.active_learning(logistic_model(), F, c, initial=[0], n_blocks=1, seed=seed, progress=False)
    with pytest.raises(ValueError, match="options must be a dict"):
        al.active_learning(logistic_model(), F, c, initial=[0], n_blocks=1, options=["exact"], progress=False)
    with pytest.raises(ValueError, match="progress must be True or False"):
        al.active_learning(logistic_model(), F, c, initial=[0], n_blocks=1, progress="yes")


def test_design_refuses_a_progress_that_is_not_a_flag(slm_problem):
    model, data = slm_problem
    with pytest.raises(ValueError, match="progress must be True or False"):
        design.sequential_design(model, data, lambda rows: rows[:, 0], 1, candidates=np.eye(12)[:4], progress=1)


def test_random_active_learning_with_a_fresh_seed_repeats_with_the_recorded_one():
    F, c = logistic_problem(60, 1)
    Ft, ct = logistic_problem(50, 2)
    kw = dict(initial=[0, 1, 2], n_blocks=2, block=4, score="random", test_features=Ft, test_labels=ct,
              progress=False)
    first = al.active_learning(logistic_model(), F, c, seed=None, **kw)
    second = al.active_learning(logistic_model(), F, c, seed=None, **kw)
    assert first.seed != second.seed and 0 <= first.seed < 2**32
    assert first.chosen != second.chosen          # 8 of 57 cases: the same picks twice has odds below 1e-11
    again = al.active_learning(logistic_model(), F, c, seed=first.seed, **kw)
    assert again.chosen == first.chosen and again.test_error == first.test_error
    assert first.fit.seed_used == first.seed and len(first.test_error) == 3


@pytest.fixture(scope="module")
def slm_problem():
    data = bz.datasets.load("slm_signal", kind="spikes", n=12, m=5, sigma2=0.01, seed=3)
    return bz.models.SLM(potential="laplace", tau=2.0, sigma2=0.01), data


@pytest.mark.parametrize("returned, shown", [
    ("abc", "got 'abc'"),
    (None, "got None"),
    ({"value": 1.0}, r"got \{'value': 1.0\}"),
    ([1.0, np.nan], r"got \[1.0, nan\]"),
])
def test_a_measure_that_returns_no_numbers_is_named(slm_problem, returned, shown):
    model, data = slm_problem
    candidates = np.eye(12)[:4]
    with pytest.raises(ValueError, match=rf"bz.design: measure must return 1 finite values for 1 filters, {shown}"):
        design.sequential_design(model, data, lambda rows: returned, 1, candidates=candidates, progress=False)


def test_design_with_a_fresh_seed_records_it(slm_problem):
    model, data = slm_problem
    true_u = data.meta["true_u"]
    result = design.sequential_design(model, data, lambda rows: rows @ true_u, 1, candidates=np.eye(12)[:4],
                                      seed=None, progress=False)
    assert 0 <= result.seed < 2**32 and result.fit.seed_used == result.seed
    again = design.sequential_design(model, data, lambda rows: rows @ true_u, 1, candidates=np.eye(12)[:4],
                                     seed=result.seed, progress=False)
    np.testing.assert_array_equal(again.fit.posterior["u"].values, result.fit.posterior["u"].values)
    with pytest.raises(ValueError, match="bz.design: seed must be None or an integer"):
        design.sequential_design(model, data, lambda rows: rows @ true_u, 1, candidates=np.eye(12)[:4], seed=-2)
