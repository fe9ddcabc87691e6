"""The SLM potentials (bayeszoo.numerics.potentials): derivatives, normalisation, scale mixtures, the variational
representation and the super-Gaussianity / log-concavity facts of Nickisch §2.4, §3.2-3.4."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats

from bayeszoo.numerics.potentials import POTENTIALS, Potential

CASES = [Potential("laplace", 1.7), Potential("student", 0.8, nu=3.0), Potential("student", 2.0, nu=7.5),
         Potential("logistic", 1.3), Potential("gaussian", 2.5), Potential("sigmoid", 1.6)]
#: sigmoid potentials with labels: the likelihood of logistic regression (not integrable)
LABELLED = [Potential("sigmoid", 1.6, labels=1.0), Potential("sigmoid", 0.7, labels=-1.0)]
S = np.array([-3.1, -1.2, -0.4, 0.3, 0.9, 2.2, 5.0])


@pytest.mark.parametrize("pot", CASES + LABELLED, ids=lambda p: f"{p.name}-{float(p.tau)}")
def test_derivatives_match_finite_differences(pot):
    h = 1e-5
    fd1 = (pot.log_t(S + h) - pot.log_t(S - h)) / (2 * h)
    fd2 = (pot.dlog_t(S + h) - pot.dlog_t(S - h)) / (2 * h)
    np.testing.assert_allclose(pot.dlog_t(S), fd1, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(pot.d2log_t(S), fd2, rtol=1e-6, atol=1e-7)
    x = S**2
    np.testing.assert_allclose(pot.dg(x), (pot.g(x + h) - pot.g(x - h)) / (2 * h), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(pot.d2g(x), (pot.dg(x + h) - pot.dg(x - h)) / (2 * h), rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("pot", CASES, ids=lambda p: f"{p.name}-{float(p.tau)}")
def test_normalised_density_integrates_to_one(pot):
    mass, _ = integrate.quad(lambda s: np.exp(pot.log_density(s)), -np.inf, np.inf, epsabs=1e-12, limit=400)
    assert mass == pytest.approx(1.0, abs=1e-8)


def test_known_densities():
    s = np.linspace(-4, 4, 9)
    np.testing.assert_allclose(Potential("laplace", 2.0).log_density(s), stats.laplace(scale=0.5).logpdf(s))
    np.testing.assert_allclose(Potential("student", 4.0, nu=5.0).log_density(s), stats.t(5.0, scale=0.5).logpdf(s))
    np.testing.assert_allclose(Potential("logistic", 1.5).log_density(s), stats.logistic(scale=1 / 3.0).logpdf(s))
    np.testing.assert_allclose(Potential("gaussian", 4.0).log_density(s), stats.norm(scale=0.5).logpdf(s))


@pytest.mark.parametrize("pot", [CASES[0], CASES[1], CASES[2]], ids=["laplace", "student3", "student7.5"])
def test_scale_mixture_reproduces_the_density(pot):
    """T(s) / int T = int N(s | 0, gamma) P(gamma) dgamma (3.1, Fig. 3.1)."""
    for s in (0.2, 1.0, 3.0):
        mix, _ = integrate.quad(lambda g: np.exp(stats.norm.logpdf(s, scale=np.sqrt(g)) + pot.mixing_log_density(g)),
                                0, np.inf, limit=400, epsabs=1e-13)
        assert mix == pytest.approx(float(np.exp(pot.log_density(s))), rel=1e-7)


def test_mixture_draws_have_the_potentials_variance():
    rng = np.random.default_rng(0)
    for pot, var in [(Potential("laplace", 2.0), 2 / 4.0), (Potential("student", 2.0, nu=6.0), 6 / (2.0 * 4.0)),
                     (Potential("logistic", 1.0), np.pi**2 / 12), (Potential("gaussian", 4.0), 0.25)]:
        draws = pot.sample(rng, 200_000)
        assert np.var(draws) == pytest.approx(var, rel=0.03), pot.name


def test_precision_conditional_is_the_mixing_posterior():
    """pi | s from sample_precision against P(gamma) N(s | 0, gamma) normalised by quadrature (mean of pi)."""
    rng = np.random.default_rng(1)
    for pot in (Potential("laplace", 1.5), Potential("student", 1.0, nu=4.0)):
        s = 0.7
        w = lambda g: np.exp(stats.norm.logpdf(s, scale=np.sqrt(g)) + pot.mixing_log_density(g))  # noqa: E731
        Z = integrate.quad(w, 0, np.inf, limit=400)[0]
        mean_pi = integrate.quad(lambda g: w(g) / g, 0, np.inf, limit=400)[0] / Z
        draws = pot.sample_precision(rng, np.full(200_000, s))
        assert draws.mean() == pytest.approx(mean_pi, rel=0.01)
        assert mean_pi == pytest.approx(-float(pot.dlog_t(s)) / s, rel=1e-6)   # E[pi | s] = -T'(s) / (s T(s))


@pytest.mark.parametrize("s", [0.05, 0.7, 3.0, -2.0])
def test_polya_gamma_precisions_of_the_logistic_potential(s):
    """The logistic's mixture has no closed mixing density; E[pi | s] = -T'(s) / (s T(s)) = 2 tau tanh(tau s) / s
    holds for every Gaussian scale mixture, and Var(omega | s) of PG(2, c) is 2 (sinh c - c) / (4 c^3 cosh^2(c/2))."""
    tau = 1.3
    draws = Potential("logistic", tau).sample_precision(np.random.default_rng(2), np.full(200_000, s))
    assert draws.mean() == pytest.approx(2 * tau * np.tanh(tau * s) / s, rel=0.01)
    c = 2 * tau * abs(s)
    var_omega = 2 * (np.sinh(c) - c) / (4 * c**3 * np.cosh(c / 2) ** 2)
    assert (draws / (4 * tau**2)).var() == pytest.approx(var_omega, rel=0.03)


@pytest.mark.parametrize("pot", CASES[:4] + CASES[5:] + LABELLED, ids=lambda p: f"{p.name}-{float(p.tau)}")
def test_height_function_gives_a_tight_lower_bound(pot):
    """ln T(s) = max_gamma beta s - s^2/(2 gamma) - h(gamma)/2 (3.4): below everywhere, equal at gamma_star(s)."""
    gammas = np.geomspace(1e-3, 1e3, 400)
    for s in S:
        assert np.all(pot.lower_bound(s, gammas) <= pot.log_t(s) + 1e-10)
        assert pot.lower_bound(s, pot.gamma_star(s)) == pytest.approx(float(pot.log_t(s)), abs=1e-9)
    # h against its definition h(gamma) = max_x -x / gamma - 2 g(x), by a fine grid in x
    x = np.concatenate([[0.0], np.geomspace(1e-8, 1e4, 200_001)])
    for gamma in (0.05, 0.3, 1.0, 4.0):
        brute = np.max(-x / gamma - 2 * pot.g(x))
        assert float(pot.h(gamma)) == pytest.approx(brute, abs=1e-6 * max(1.0, abs(brute)))


def test_sigmoid_is_the_logistic_regression_likelihood():
    """T(s) = 1 / (1 + exp(-c tau s)), whose tilt is beta = c tau / 2, and P(c = +1) + P(c = -1) = 1."""
    s = np.linspace(-30, 30, 61)
    for c in (1.0, -1.0):
        pot = Potential("sigmoid", 0.9, labels=c)
        np.testing.assert_allclose(pot.log_t(s), -np.logaddexp(0.0, -c * 0.9 * s), rtol=1e-12, atol=1e-300)
        assert float(pot.beta) == 0.45 * c
    both = np.exp(Potential("sigmoid", 0.9, labels=1.0).log_t(s)) + np.exp(Potential("sigmoid", 0.9, labels=-1.0).log_t(s))
    np.testing.assert_allclose(both, 1.0, rtol=1e-12)
    with pytest.raises(ValueError, match="not integrable"):
        Potential("sigmoid", 1.0, labels=1.0).log_normaliser()
    with pytest.raises(ValueError, match="-1 or \\+1"):
        Potential("sigmoid", 1.0, labels=np.array([1.0, 0.0]))
    with pytest.raises(ValueError, match="only the sigmoid"):
        Potential("laplace", 1.0, labels=1.0)
    two = Potential("sigmoid", np.array([1.0, 2.0, 3.0]), labels=np.array([1.0, -1.0, 1.0])).take(np.array([2, 1]))
    np.testing.assert_allclose(two.tau, [3.0, 2.0])
    np.testing.assert_allclose(two.beta, [1.5, -1.0])


@pytest.mark.parametrize("pot", CASES[:4] + CASES[5:], ids=lambda p: f"{p.name}-{float(p.tau)}")
def test_height_function_derivative_matches_finite_differences(pot):
    gammas = np.geomspace(0.02, 30.0, 25)
    gammas = gammas[np.abs(np.log(gammas * float(pot.tau))) > 0.05]     # away from the kinks at the thresholds
    h = 1e-6 * gammas
    np.testing.assert_allclose(pot.dh(gammas), (pot.h(gammas + h) - pot.h(gammas - h)) / (2 * h), rtol=2e-5,
                               atol=1e-7)


def test_table_3_1_thresholds():
    st = Potential("student", 2.0, nu=3.0)
    assert float(st.h(3.0 / (2.0 * 4.0))) == pytest.approx(0.0, abs=1e-12)    # gamma_0 = nu / (tau (nu + 1))
    assert float(st.h(0.1)) == 0.0
    lg = Potential("logistic", 2.0)
    assert float(lg.h(1 / 8.0 - 1e-9)) == 0.0 and float(lg.h(1.0)) > 0        # threshold 1 / (2 tau^2)


@pytest.mark.parametrize("name", ["laplace", "student", "logistic", "sigmoid"])
def test_strongly_super_gaussian(name):
    """g(x) = ln T(sqrt x) is non-increasing and convex for x > 0 (§2.4)."""
    pot = Potential(name, 1.3)
    x = np.geomspace(1e-4, 1e3, 300)
    assert pot.strongly_super_gaussian
    assert np.all(pot.dg(x) <= 0) and np.all(pot.d2g(x) >= 0)


def test_log_concavity_and_convexity_of_h():
    """Log-concave: every potential but Student's t; for strongly super-Gaussian T, h convex iff T log-concave
    (App. E.3)."""
    s = np.linspace(-6, 6, 241)
    for name in POTENTIALS:
        pot = Potential(name, 1.1)
        assert pot.log_concave == (name != "student")
        if pot.log_concave:
            assert np.all(pot.d2log_t(s) <= 1e-12)
        else:
            assert np.any(pot.d2log_t(s) > 0)
    gammas = np.linspace(0.05, 20, 2000)
    for name in ("laplace", "logistic", "student", "sigmoid"):
        second = np.diff(Potential(name, 1.1).h(gammas), 2)
        assert np.all(second >= -1e-9) == (name != "student"), name


def test_bad_parameters():
    with pytest.raises(ValueError, match="potential"):
        Potential("cauchy")
    with pytest.raises(ValueError, match="tau"):
        Potential("laplace", -1.0)
