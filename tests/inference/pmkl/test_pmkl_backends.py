"""Numbers for the hand-written PMKL backends: gibbs, vb, em, map, mrvm1, mrvm2, and the harness."""
from __future__ import annotations

import numpy as np
import pytest

import bayeszoo as bz
from bayeszoo.inference.pmkl import common as MK
from bayeszoo.inference.pmkl.em import em_estimate
from bayeszoo.inference.pmkl.vb import vb_fit_state, vb_predictive
from bayeszoo.studies.pmkl_thesis_cv import thesis_cv


@pytest.fixture(scope="module")
def sources():
    return bz.datasets.load("mkl_sources", n=60, n_test=200, seed=0)


@pytest.fixture(scope="module")
def small():
    return bz.datasets.load("mkl_sources", n=24, n_test=60, seed=1)


@pytest.fixture(scope="module")
def iris():
    return bz.datasets.load("iris", test_fraction=0.3, seed=0)


@pytest.fixture(scope="module")
def model():
    return bz.models.PMKL()


@pytest.fixture(scope="module")
def gibbs_sources(model, sources):
    return bz.fit(model, sources, "gibbs", draws=1000, tune=300, chains=2, seed=0, progress=False)


@pytest.fixture(scope="module")
def vb_sources(model, sources):
    return bz.fit(model, sources, "vb", draws=1000, chains=2, seed=0, progress=False)


# ------------------------------------------------------------------------------------------------ VB
def test_vb_bound_never_decreases_under_the_y_w_updates(small):
    # B.23 conditions on A and beta: with them held fixed the Y / W updates are coordinate ascent on it
    st = vb_fit_state(bz.models.PMKL(rule="mean"), small, rng=np.random.default_rng(0), fix_alpha=1.0, tol=1e-14,
                      max_iter=40)
    b = st.bound
    assert len(b) == 40
    assert np.all(np.diff(b) >= -1e-9 * np.abs(b[1:]))
    assert b[-1] - b[0] > 1.0


def test_vb_stops_by_the_thesis_rule_and_traces_the_bound(model, vb_sources):
    info = vb_sources.info
    assert info["converged"] and info["iterations"] <= 100
    b = vb_sources.idata.objective["lower_bound"].values
    assert b.size == info["iterations"]
    assert abs(b[-1] - b[-2]) < 1e-3 * abs(b[-2])          # 0.1 % relative change


def test_vb_thesis_predictive_agrees_with_averaging_over_q(sources):
    model = bz.models.PMKL(rule="mean")      # beta fixed, so Q(W) is the only randomness
    st = vb_fit_state(model, sources, rng=np.random.default_rng(0))
    Ks_test = MK.base_grams(model.source_list(sources), sources.X, sources.X_test)
    p_thesis = vb_predictive(model, st, Ks_test)            # eq. 4.33 with nu as a standard deviation
    fit = bz.fit(model, sources, "vb", draws=250, chains=1, seed=0, progress=False)
    p_draws = model.predict(fit, sources.X_test)           # eq. 3.11 by quadrature, averaged over Q(W) draws
    np.testing.assert_allclose(p_thesis.sum(1), 1.0, atol=1e-8)
    np.testing.assert_allclose(p_draws, p_thesis, atol=0.03)   # 250 draws of Q(W)


# -------------------------------------------------------------------------------- weights posterior
def test_weight_posterior_puts_mass_on_the_informative_source(gibbs_sources, vb_sources):
    for fit in (gibbs_sources, vb_sources):
        beta = fit.idata.posterior["beta"].mean(("chain", "draw"))
        assert float(beta.sel(source="informative")) > 0.5
        assert float(beta.sel(source="noise")) < 0.2
        assert float(beta.sel(source="informative")) > 3 * float(beta.sel(source="noise"))


def test_gibbs_and_vb_agree_on_predictive_probabilities(model, sources, gibbs_sources, vb_sources):
    pg = model.predict(gibbs_sources, sources.X_test)
    pv = model.predict(vb_sources, sources.X_test)
    # VB is over-confident (eq. 4.38 and the thesis's remark); means of |difference| stay small
    assert np.mean(np.abs(pg - pv)) < 0.08
    assert np.max(np.abs(pg - pv)) < 0.35
    assert np.mean(np.argmax(pg, 1) == np.argmax(pv, 1)) > 0.9
    sg, sv = model.score(gibbs_sources, sources), model.score(vb_sources, sources)
    assert sg["error_rate"] < 0.3 and sv["error_rate"] < 0.3


def test_gibbs_draws_are_valid_and_depend_on_the_seed(model, small):
    a = bz.fit(model, small, "gibbs", draws=30, tune=10, chains=2, seed=3, progress=False)
    c = bz.fit(model, small, "gibbs", draws=30, tune=10, chains=2, seed=4, progress=False)
    assert not np.allclose(a.posterior.W.values, c.posterior.W.values)
    beta = a.posterior.beta.values
    np.testing.assert_allclose(beta.sum(-1), 1.0)
    assert np.all(beta > 0)


@pytest.mark.parametrize("rule", ["mean", "product", "binary", "wproduct"])
def test_every_combination_rule_runs_in_gibbs_and_vb(rule, small):
    m = bz.models.PMKL(rule=rule)
    for backend in ("gibbs", "vb"):
        fit = bz.fit(m, small, backend, draws=40, tune=20, chains=2, seed=0, progress=False)
        p = m.predict(fit, small.X_test)
        np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-8)
        beta = fit.posterior.beta.values
        if rule == "binary":
            assert set(np.unique(beta)) <= {0.0, 1.0} and np.all(beta.sum(-1) >= 1)
        if rule == "mean":
            np.testing.assert_allclose(beta, 1.0 / 3)
        assert m.score(fit, small)["error_rate"] < 0.6


# --------------------------------------------------------------------------------------- EM and mRVM
def test_em_is_a_fixed_point_of_its_updates(small):
    model = bz.models.PMKL()
    res = em_estimate(model, small, variant="em", max_iter=3000, tol=1e-9)
    assert res.converged
    Ks = model.train_kernels(small)
    K = model.composite(Ks, res.beta)
    onehot = np.eye(3, dtype=bool)[small.y.astype(int)]
    Ey, _ = MK.cone_moments(K @ res.W, onehot)
    np.testing.assert_allclose(Ey, res.Y, atol=1e-6)                                  # E-step (5.4-5.6)
    W, _ = MK.w_posterior(K, K @ K, res.Y, res.A)
    np.testing.assert_allclose(W, res.W, atol=1e-6)                                   # M-step (5.1)
    # beta solves the QP at the fixed point (5.10): no simplex direction lowers the objective
    Omega, f = MK.beta_qp_terms(Ks, res.W, res.Y)
    assert np.allclose(MK.simplex_qp(Omega, f, x0=res.beta), res.beta, atol=1e-6)


# iris, 105 / 45, rbf theta = 1/D
@pytest.mark.parametrize("backend, limit", [("em", 0.12), pytest.param("map", 0.15, marks=pytest.mark.slow),
                                            pytest.param("mrvm1", 0.15, marks=pytest.mark.slow), ("mrvm2", 0.25)])
def test_point_estimators_classify_iris(backend, limit, iris):
    model = bz.models.PMKL()
    fit = bz.fit(model, iris, backend, draws=50, chains=1, seed=0, progress=False)
    score = model.score(fit, iris)
    assert score["error_rate"] < limit
    if backend.startswith("mrvm"):
        check_relevance_vectors(fit, score, iris.n)


def check_relevance_vectors(fit, score, n):
    rv = fit.idata.relevance["relevance_vectors"].values
    assert 0 < len(rv) < n / 4
    assert score["n_relevant"] == len(rv)
    W = fit.posterior.W.values[0, 0]
    pruned = np.setdiff1d(np.arange(n), rv)
    assert np.all(W[pruned] == 0)
    assert np.all(fit.posterior.log_alpha.values[0, 0][pruned] > np.log(1e6))


def test_mrvm1_is_sparse_and_stops_by_criterion_2(small):
    model = bz.models.PMKL()
    fit = bz.fit(model, small, "mrvm1", draws=20, chains=1, seed=0, progress=False)
    assert fit.info["converged"] and fit.info["iterations"] >= small.n          # at least N iterations
    check_relevance_vectors(fit, model.score(fit, small), small.n)
    traces = fit.idata.objective
    assert traces["n_relevant"].values[-1] == len(fit.idata.relevance["relevance_vectors"])


def test_mrvm1_refuses_a_minimum_above_its_maximum_given_or_by_default(small):
    model = bz.models.PMKL()
    for options, message in [({"min_iter": 50, "max_iter": 40}, r"'min_iter' \(50\) must be <= 'max_iter' \(40\)"),
                             ({"min_iter": 20 * small.n + 1}, rf"'max_iter' \({20 * small.n}, its default for these data\)")]:
        with pytest.raises(ValueError, match=message):
            bz.fit(model, small, "mrvm1", progress=False, **options)
    short = bz.fit(model, small, "mrvm1", draws=2, chains=1, progress=False, max_iter=3)   # stops sooner: allowed
    assert short.info["iterations"] == 3 and not short.info["converged"]


def test_thesis_cv_protocol_returns_mean_and_sd(iris):
    out = thesis_cv(bz.models.PMKL(rule="mean"), iris, "vb", folds=3, repeats=1, draws=10, chains=1,
                    progress=False)
    mean, sd = out["error_rate"]
    assert 0 <= mean < 0.15 and sd >= 0
    assert set(out) >= {"error_rate", "pred_lik", "seconds"}


# ------------------------------------------------------------------------------------------ harness
def test_compare_table_and_picture(small, tmp_path):
    from bayeszoo.diagnostics.plots import family_picture

    model = bz.models.PMKL()
    cmp = bz.compare(model, small, backends=["gibbs", "vb", "em", "mrvm2"], reference="gibbs", draws=100,
                     tune=50, chains=2, seed=0, progress=False)
    table = cmp.table()
    assert list(table.backend) == ["gibbs", "vb", "em", "mrvm2"]
    assert (table.error == "").all()
    for col in ("ess_bulk_min", "mean_err", "error_rate", "pred_lik", "beta_informative", "n_relevant"):
        assert col in table.columns
    assert np.all(np.isfinite(table.error_rate))
    fig = family_picture(cmp)
    assert fig is not None and len(fig.axes) >= 2
    cmp.report(tmp_path / "report.html")
    assert (tmp_path / "report.html").stat().st_size > 10_000


@pytest.mark.slow
def test_gibbs_vb_and_nuts_agree_on_a_small_problem(small):
    model = bz.models.PMKL()
    fits = {b: bz.fit(model, small, b, draws=1000, tune=1000 if b != "gibbs" else 500, chains=2, seed=0,
                      progress=False) for b in ("numpyro", "gibbs", "vb")}
    p = {b: model.predict(f, small.X_test) for b, f in fits.items()}
    assert np.max(np.abs(p["gibbs"] - p["numpyro"])) < 0.08
    assert np.mean(np.abs(p["vb"] - p["numpyro"])) < 0.08      # VB is over-confident
    bn = fits["numpyro"].posterior.beta.mean(("chain", "draw")).values
    bg = fits["gibbs"].posterior.beta.mean(("chain", "draw")).values
    assert np.max(np.abs(bn - bg)) < 0.08


def test_lower_bound_matches_b23_with_explicit_covariances():
    from bayeszoo.inference.pmkl.vb import lower_bound

    rng = np.random.default_rng(5)
    N, C = 6, 3
    X = rng.normal(size=(N, 2))
    K = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1))
    Y, A = rng.normal(size=(N, C)), rng.gamma(2.0, 1.0, (N, C))
    W, Ls = MK.w_posterior(K, K @ K, Y, A)
    logZ = rng.normal(size=N)
    direct = 0.5 * N * C + logZ.sum()
    for c in range(C):
        V = np.linalg.inv(K @ K + np.diag(A[:, c]))
        direct += (0.5 * np.linalg.slogdet(V)[1] - 0.5 * np.trace(np.diag(A[:, c]) @ V)
                   - 0.5 * W[:, c] @ (A[:, c] * W[:, c]) + 0.5 * np.sum(np.log(A[:, c]))
                   - 0.5 * sum(K[:, n] @ V @ K[:, n] for n in range(N)))
    assert lower_bound(K, W, Ls, A, logZ) == pytest.approx(direct, rel=1e-9)


# ------------------------------------------------------------------------------------------ defaults
def _demo_problem():
    from bayeszoo.demo import DEMOS

    demo = DEMOS["pmkl-sources"]
    return demo["model"](), demo["data"]()


@pytest.mark.parametrize("backend", ["vb", "em", "map", "mrvm1", "mrvm2",
                                     pytest.param("gibbs", marks=pytest.mark.slow)])
def test_each_backend_runs_on_the_demo_problem_with_no_counts_or_options(backend):
    from bayeszoo import registry

    model, data = _demo_problem()
    fit = bz.fit(model, data, backend, progress=False)
    counts = registry.get(model, backend).harness_defaults(model, data)
    assert (fit.n_chains, fit.n_draws) == (counts["chains"], counts["draws"])
    assert fit.kind == "mcmc" or counts["tune"] == 0          # draws of an approximation need no warm-up
    assert np.all(np.isfinite(fit.posterior.W.values))
    p = model.predict(fit, data.X_test)
    np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-8)
