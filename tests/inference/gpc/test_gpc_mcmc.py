"""Numbers for the GPC samplers: gibbs (Albert-Chib / Polya-Gamma) and ais (evidence by annealed importance sampling)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import log_expit, log_ndtr, logsumexp

import bayeszoo as bz
from bayeszoo.inference.gpc.ais import ais_log_evidence, combine_log_weights, make_schedule
from bayeszoo.inference.random_draws import normal_sign_truncated, polya_gamma, truncnorm_above
from bayeszoo.inference.gpc.gibbs import gibbs_sample
from bayeszoo.registry import RunContext
from bayeszoo.models.gpc import TWO_POINT_X, TWO_POINT_Y, two_point_exact_moments


def _ctx(seed):
    """The run context bz.fit gives the gpc ``gibbs`` backend."""
    return RunContext(family="gpc", backend="gibbs", kind="mcmc", seed=seed)


def two_point():
    return bz.datasets.Dataset(X=TWO_POINT_X, y=TWO_POINT_Y, name="two-point", meta={"task": "classification"})


def blobs(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = (X[:, 0] + 0.7 * X[:, 1] + 0.5 * rng.normal(size=n) > 0).astype(float)
    return bz.datasets.Dataset(X=X, y=y, name="blobs", meta={"task": "classification"})


# ------------------------------------------------------------------------------------------- building blocks
def pg1_moments(c):
    """Mean and variance of PG(1, c) (Polson, Scott & Windle 2013), by series near c = 0."""
    c = abs(c)
    if c < 1e-2:
        return 0.25 - c * c / 48.0, 1.0 / 24.0 - c * c / 240.0
    # variance (sinh c - c) / (4 c^3 cosh^2(c/2)), with sinh c = 2 tanh(c/2) cosh^2(c/2) so nothing overflows
    sech2 = np.exp(-c) * (2.0 / (1.0 + np.exp(-c))) ** 2   # 1 / cosh^2(c/2), without overflow
    return np.tanh(c / 2) / (2 * c), (2 * np.tanh(c / 2) - c * sech2) / (4 * c ** 3)


# 400 and 1000: where polyagamma's default method for h = 1 returns 0.16 (the reason for its other method)
@pytest.mark.parametrize("c", [0.0, 0.3, 1.7, 4.0, 12.0, 60.0, 400.0, -1000.0])
def test_polya_gamma_moments(c):
    n = 100_000
    x = polya_gamma(np.random.default_rng(int(abs(c)) + 1), 1, np.full(n, c))
    assert np.all(x > 0)
    m, v = pg1_moments(c)
    assert abs(x.mean() - m) < 4.5 * np.sqrt(v / n)
    # sample variance: its sd is sqrt((mu4 - v^2) / n); the excess kurtosis of PG(1, c) is below 6
    assert abs(x.var() / v - 1.0) < 4.5 * np.sqrt(8.0 / n)


def test_polya_gamma_at_zero_is_the_infinite_sum_of_gammas():
    # c = 0: PG(1, 0) = sum_k g_k / (2 pi^2 (k - 1/2)^2); a long truncated sum is the reference distribution
    rng = np.random.default_rng(3)
    k = np.arange(1, 2001)
    ref = rng.exponential(size=(20_000, k.size)) @ (1.0 / (2 * np.pi ** 2 * (k - 0.5) ** 2))
    x = polya_gamma(np.random.default_rng(5), 1, np.zeros(20_000))
    assert stats.ks_2samp(x, ref).pvalue > 1e-3


def test_truncated_normal_latent():
    n = 40_000
    f = np.concatenate([np.full(n, 0.7), np.full(n, -1.3)])
    ypm = np.concatenate([np.ones(n), -np.ones(n)])
    z = normal_sign_truncated(np.random.default_rng(0), f, ypm)
    pos, neg = z[:n], z[n:]
    assert np.all(pos > 0) and np.all(neg < 0)
    ref_pos = stats.truncnorm(-0.7, np.inf, loc=0.7)
    ref_neg = stats.truncnorm(-np.inf, 1.3, loc=-1.3)
    assert stats.kstest(pos, ref_pos.cdf).pvalue > 1e-3
    assert stats.kstest(neg, ref_neg.cdf).pvalue > 1e-3
    assert abs(pos.mean() - ref_pos.mean()) < 5 * ref_pos.std() / np.sqrt(n)


# ------------------------------------------------------------------------------------------- gibbs
@pytest.mark.parametrize("likelihood", ["probit", "logit"])
def test_gibbs_two_point_exact_moments(likelihood):
    model = bz.models.GPC(likelihood=likelihood, log_amplitude=1.0)
    mean, cov, _ = two_point_exact_moments(model)
    fit = bz.fit(model, two_point(), "gibbs", draws=5000, tune=200, chains=4, seed=3, progress=False)
    f = fit.idata.posterior["f"].values
    assert f.shape == (4, 5000, 2)
    flat = f.reshape(-1, 2)
    ess = np.asarray(bz_ess(fit))
    se_mean = np.sqrt(np.diag(cov) / ess)
    assert np.all(np.abs(flat.mean(0) - mean) < 4 * se_mean), (flat.mean(0), mean, se_mean)
    emp = np.cov(flat.T)
    # sd of a sample (co)variance ~ sqrt(2 / ess) * var for near-Gaussian marginals; allow for skew
    tol = 6 * np.sqrt(2.0 / ess.min()) * np.max(np.diag(cov))
    assert np.all(np.abs(emp - cov) < tol), (emp, cov)
    ll = fit.idata.sample_stats["log_lik"].values
    sig = log_ndtr if likelihood == "probit" else log_expit
    np.testing.assert_allclose(ll, sig(f * (2 * TWO_POINT_Y - 1)).sum(-1), rtol=1e-9, atol=1e-12)
    assert fit.kind == "mcmc" and fit.info["augmentation"] == ("albert-chib" if likelihood == "probit"
                                                               else "polya-gamma")


def bz_ess(fit):
    import arviz as az

    return az.ess(fit.idata, var_names=["f"], method="bulk")["f"].values


@pytest.mark.parametrize("likelihood", ["probit", "logit"])
def test_gibbs_draws_do_not_depend_on_progress(likelihood):
    model = bz.models.GPC(likelihood=likelihood)
    data = blobs(12)
    a = bz.fit(model, data, "gibbs", draws=30, tune=10, chains=2, seed=7, progress=False)
    b = bz.fit(model, data, "gibbs", draws=30, tune=10, chains=2, seed=7, progress=True)
    c = bz.fit(model, data, "gibbs", draws=30, tune=10, chains=2, seed=8, progress=False)
    fa, fb, fc = (x.idata.posterior["f"].values for x in (a, b, c))
    np.testing.assert_array_equal(fa, fb)
    assert not np.allclose(fa, fc)
    assert not np.allclose(fa[0], fa[1])       # chains differ
    assert np.all(np.isfinite(fa))


def test_gibbs_thin_keeps_every_thin_th_sweep():
    model = bz.models.GPC(likelihood="probit")
    K = model.K(TWO_POINT_X)
    ypm = model.labels_pm(TWO_POINT_Y)
    a = gibbs_sample(K, ypm, _ctx(1), probit=True, draws=12, tune=3, chains=2, thin=1)
    b = gibbs_sample(K, ypm, _ctx(1), probit=True, draws=4, tune=3, chains=2, thin=3)
    np.testing.assert_allclose(b.f, a.f[:, 2::3], rtol=1e-12)


@pytest.mark.parametrize("options", [{"thin": 0}, {"thin": 1.5}, {"init": [0.0]}, {"init": [np.nan, 0.0]},
                                     {"init": [[0.0, 0.0]]}, {"init": "zero"}])
def test_gibbs_bad_options(options):
    with pytest.raises(ValueError):
        bz.fit(bz.models.GPC(), two_point(), "gibbs", draws=5, tune=0, chains=1, progress=False, **options)


def test_gibbs_bad_labels():
    data = bz.datasets.Dataset(X=TWO_POINT_X, y=np.array([2.0, 0.0]), name="bad")
    with pytest.raises(ValueError):
        bz.fit(bz.models.GPC(), data, "gibbs", draws=5, tune=0, chains=1, progress=False)


# ------------------------------------------------------------------------------------------- ais
def one_point_log_z(model, x, y):
    k = float(model.K(np.atleast_2d(x))[0, 0])
    g, w = np.polynomial.hermite_e.hermegauss(200)
    sig = log_ndtr if model.likelihood == "probit" else log_expit
    return float(logsumexp(np.log(w / np.sqrt(2 * np.pi)) + sig((2 * y - 1) * np.sqrt(k) * g)))


@pytest.mark.parametrize("likelihood", ["probit", "logit"])
@pytest.mark.parametrize("log_amplitude", [0.0, 2.0])
def test_ais_one_point(likelihood, log_amplitude):
    # one point: its lengthscale does not matter, and "scale" has no spread to set it from
    model = bz.models.GPC(likelihood=likelihood, log_lengthscale=0.0, log_amplitude=log_amplitude)
    data = bz.datasets.Dataset(X=np.array([[0.3]]), y=np.array([1.0]), name="one")
    exact = one_point_log_z(model, [0.3], 1.0)
    # one label: Z = 1/2 by symmetry for every amplitude
    assert np.isclose(exact, np.log(0.5))
    r = ais_log_evidence(model, data, n_runs=300, n_temps=100, seed=2)
    assert abs(r.log_evidence - exact) < 3 * r.log_evidence_se + 1e-9


@pytest.mark.parametrize("likelihood", ["probit", "logit"])
@pytest.mark.parametrize("log_amplitude", [0.0, 1.5])
def test_ais_two_point(likelihood, log_amplitude):
    model = bz.models.GPC(likelihood=likelihood, log_amplitude=log_amplitude)
    _, _, exact = two_point_exact_moments(model)
    r = ais_log_evidence(model, two_point(), n_runs=400, n_temps=200, seed=4)
    assert 0 < r.log_evidence_se < 0.05
    assert abs(r.log_evidence - exact) < 3 * r.log_evidence_se, (r.log_evidence, exact)


def test_ais_two_point_same_label_away_from_half():
    # both labels 1 and a long lengthscale: log Z well above log(1/4)
    model = bz.models.GPC(likelihood="logit", log_lengthscale=1.5, log_amplitude=1.0)
    y = np.array([1.0, 1.0])
    data = bz.datasets.Dataset(X=TWO_POINT_X, y=y, name="same")
    _, _, exact = two_point_exact_moments(model, TWO_POINT_X, y)
    assert exact > np.log(0.25) + 0.3
    r = ais_log_evidence(model, data, n_runs=400, n_temps=200, seed=5)
    assert abs(r.log_evidence - exact) < 3 * r.log_evidence_se


def test_ais_backend_fit_and_seed():
    model = bz.models.GPC(likelihood="probit", log_amplitude=1.0)
    a = bz.fit(model, two_point(), "ais", draws=150, chains=2, seed=1, progress=False, n_temps=100)
    b = bz.fit(model, two_point(), "ais", draws=150, chains=2, seed=1, progress=True, n_temps=100)
    np.testing.assert_array_equal(a.idata.posterior["f"].values, b.idata.posterior["f"].values)
    assert a.idata.posterior["f"].shape == (2, 150, 2)
    assert a.idata.sample_stats["log_weight"].shape == (2, 150)
    assert a.info["log_evidence"] == b.info["log_evidence"] and a.info["log_evidence_se"] > 0
    mean, cov, exact = two_point_exact_moments(model)
    assert abs(a.info["log_evidence"] - exact) < 4 * a.info["log_evidence_se"]
    # the final-temperature states are (nearly evenly weighted) posterior draws
    f = a.idata.posterior["f"].values.reshape(-1, 2)
    assert np.all(np.abs(f.mean(0) - mean) < 5 * np.sqrt(np.diag(cov) / f.shape[0]))
    # one run per draw: the runs are chains x draws, and a count under another library's name says so
    with pytest.raises(ValueError, match=r"GPC backend 'ais': 'n_runs' is draws= of bz.fit / bz.compare"):
        bz.fit(model, two_point(), "ais", draws=10, chains=2, seed=1, progress=False, n_runs=8, n_temps=20)
    with pytest.raises(ValueError, match=r"'num_samples' is draws=.*not a backend option"):
        bz.fit(model, two_point(), "numpyro", num_samples=8)


def test_schedules():
    for s in ("power", "linear", "geometric"):
        b = make_schedule(s, 50)
        assert b.size == 51 and b[0] == 0 and b[-1] == 1 and np.all(np.diff(b) >= 0)
    np.testing.assert_array_equal(make_schedule([0, 0.5, 1.0]), [0, 0.5, 1.0])


def test_combine_log_weights():
    lw = np.log(np.array([1.0, 2.0, 3.0])) - 700.0     # far below exp's range: still exact
    lz, se, ess = combine_log_weights(lw)
    assert np.isclose(lz, np.log(2.0) - 700.0)
    assert np.isclose(se, np.std([1, 2, 3], ddof=1) / (np.sqrt(3) * 2.0))
    assert np.isclose(ess, 36 / 14)


@pytest.mark.parametrize("options", [{"n_temps": 0}, {"n_steps": -1}, {"schedule": "cosine"},
                                     {"schedule": [0.0, 0.7, 0.5, 1.0]}, {"schedule": [0.1, 1.0]},
                                     {"n_runs": 7}])
def test_ais_bad_options(options):
    with pytest.raises(ValueError):
        bz.fit(bz.models.GPC(), two_point(), "ais", draws=5, chains=2, progress=False, **options)


def test_ais_public_function_bad_input():
    with pytest.raises(ValueError):
        ais_log_evidence(bz.models.GPC(), two_point(), n_runs=0)
    bad = bz.datasets.Dataset(X=TWO_POINT_X, y=np.array([0.5, 1.0]), name="bad")
    with pytest.raises(ValueError):
        ais_log_evidence(bz.models.GPC(), bad, n_runs=4, n_temps=5)


# ------------------------------------------------------------------------------------------- agreement
@pytest.mark.slow
@pytest.mark.parametrize("likelihood", ["probit", "logit"])
def test_gibbs_agrees_with_nuts_on_60_points(likelihood):
    import arviz as az

    model = bz.models.GPC(likelihood=likelihood, log_lengthscale=0.0, log_amplitude=1.0)
    data = blobs(60, seed=1)
    g = bz.fit(model, data, "gibbs", draws=4000, tune=500, chains=4, seed=0, progress=False)
    nuts = bz.fit(model, data, "nuts", draws=1000, tune=1000, chains=4, seed=0, progress=False)
    mg = g.idata.posterior["f"].mean(("chain", "draw")).values
    mn = nuts.idata.posterior["f"].mean(("chain", "draw")).values
    se = np.sqrt(az.mcse(g.idata, var_names=["f"])["f"].values ** 2
                 + az.mcse(nuts.idata, var_names=["f"])["f"].values ** 2)
    z = (mg - mn) / se
    assert np.max(np.abs(z)) < 4.5, np.max(np.abs(z))
    assert az.rhat(g.idata)["f"].values.max() < 1.02


@pytest.mark.slow
@pytest.mark.parametrize("likelihood", ["probit", "logit"])
def test_ais_agrees_with_ep_evidence_on_60_points(likelihood):
    # EP's evidence is within a few hundredths of the truth on such problems (thesis §4.12, Kuss & Rasmussen 2005)
    model = bz.models.GPC(likelihood=likelihood, log_amplitude=1.0)
    data = blobs(60, seed=1)
    r = ais_log_evidence(model, data, n_runs=64, n_temps=2000, seed=0)
    ep = bz.fit(model, data, "ep", draws=10, chains=1, progress=False).info["log_evidence"]
    assert r.weight_ess > 10
    assert abs(r.log_evidence - ep) < 3 * r.log_evidence_se + 0.05, (r.log_evidence, ep)


def test_backends_listed():
    names = bz.backends(bz.models.GPC(likelihood="logit"))
    assert "gibbs" in names and "ais" in names


def test_ais_fit_round_trips_and_scores(tmp_path):
    model = bz.models.GPC(likelihood="logit")
    fit = bz.fit(model, two_point(), "ais", draws=8, chains=2, seed=0, progress=False, n_temps=20)
    fit.save(tmp_path / "ais")
    back = bz.load_fit(tmp_path / "ais")
    assert back.info["log_evidence"] == fit.info["log_evidence"]
    assert np.isclose(model.score(fit, two_point())["log_evidence"], fit.info["log_evidence"])


@pytest.mark.parametrize("bound", [-30.0, -2.0, 0.0, 0.3, 3.0, 9.0, 40.0, 400.0])
def test_truncated_normal_exact_in_the_far_tail(bound):
    """x ~ N(0, 1) | x > a, also where inverting the CDF in double precision fails (a > 8)."""
    n = 20_000
    x = truncnorm_above(np.random.default_rng(3), 0.0, np.full(n, bound))
    assert np.all(np.isfinite(x)) and np.all(x > bound)
    if bound < 30:
        ref = stats.truncnorm(bound, np.inf)
        assert stats.kstest(x, ref.cdf).pvalue > 1e-3
        assert abs(x.mean() - ref.mean()) < 5 * ref.std() / np.sqrt(n)
    else:  # the excess over a is Exp(a) to relative order 1/a^2 (Mills ratio), so a (x - a) ~ Exp(1)
        assert stats.kstest(bound * (x - bound), "expon").pvalue > 1e-3


def test_gibbs_chain_started_far_on_the_wrong_side_stays_finite():
    """A chain whose latent f starts at -60 on a y = +1 point (an Albert-Chib draw beyond JAX's tail)."""
    K = np.array([[4.0, 1.0], [1.0, 4.0]])
    ypm = np.array([1.0, -1.0])
    res = gibbs_sample(K, ypm, _ctx(0), probit=True, draws=200, tune=0, chains=2, init=np.array([-60.0, 60.0]))
    assert np.all(np.isfinite(res.f))


@pytest.mark.parametrize("likelihood", ["probit", "logit"])
def test_jensen_bounds_below_ais_log_evidence(likelihood):
    """Every Gaussian method's Jensen bound (4.13) lies below AIS's log Z within AIS's error; the tightest
    (KL's maximised bound) is within a few nats of it."""
    model = bz.models.GPC(likelihood=likelihood, log_lengthscale=0.3, log_amplitude=1.0)
    data = blobs(16, seed=3)
    r = ais_log_evidence(model, data, n_runs=200, n_temps=200, seed=7)
    assert r.log_evidence_se < 0.1
    bounds = {}
    for name in ("laplace", "ep", "kl", "vb", "fv", "lr"):
        fit = bz.fit(model, data, name, draws=2, chains=1, seed=0, progress=False)
        bounds[name] = fit.info["jensen_bound"]
        assert bounds[name] <= r.log_evidence + 3 * r.log_evidence_se, (name, bounds[name], r)
    assert max(bounds.values()) == pytest.approx(bounds["kl"], abs=1e-6)
    assert r.log_evidence - bounds["kl"] < 3.0
