"""Numbers for the hand-written RVM backends: em, fast, vb, gibbs."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import bayeszoo as bz
from bayeszoo.inference.rvm import core as C
from bayeszoo.inference.rvm import fast as FAST
from bayeszoo.inference.rvm.gibbs import gibbs_sample
from bayeszoo.registry import RunContext
from bayeszoo.models.rvm import LOG_ALPHA_PRUNED


@pytest.fixture(scope="module")
def sinc40():
    return bz.datasets.load("sinc", n=40)


@pytest.fixture(scope="module")
def model():
    return bz.models.RVM(width=3.0)


def _ctx(seed):
    """The run context bz.fit gives the rvm ``gibbs`` backend."""
    return RunContext(family="rvm", backend="gibbs", kind="mcmc", seed=seed)


def dense_log_evidence(Phi, t, alpha, beta):
    Cm = np.eye(len(t)) / beta + (Phi / alpha) @ Phi.T
    return stats.multivariate_normal(np.zeros(len(t)), Cm).logpdf(t)


def final_objective(fit):
    """The last value of the trace the backend optimises (``fit.info["objective"]`` names it)."""
    return float(fit.idata.objective[fit.info["objective"]].values[-1])


def tiny_classification(n=30, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = (X[:, 0] + 0.5 * X[:, 1] + 0.2 * rng.normal(size=n) > 0).astype(float)
    return bz.datasets.Dataset(X=X, y=y, name="tiny2d", meta={"task": "classification"})


# ------------------------------------------------------------------------------------------- evidence
def test_log_evidence_matches_dense_computation():
    rng = np.random.default_rng(1)
    N, M = 7, 4
    Phi = rng.normal(size=(N, M))
    t = rng.normal(size=N)
    alpha = rng.gamma(2.0, 1.0, M)
    beta = 3.7
    post = C.Gaussian(beta * Phi.T @ Phi + np.diag(alpha), beta * Phi.T @ t)
    ours = C.log_evidence(post, beta * t @ t, beta * Phi.T @ t, alpha, N * np.log(beta), N)
    assert ours == pytest.approx(dense_log_evidence(Phi, t, alpha, beta), rel=1e-12, abs=1e-11)


def test_em_traced_evidence_is_the_dense_evidence_at_its_estimate(model):
    data = bz.datasets.load("sinc", n=12, seed=3)
    fit = bz.fit(model, data, "em", draws=10, chains=1, progress=False)
    la = fit.posterior.log_alpha.values[0, 0]
    active = la < LOG_ALPHA_PRUNED
    beta = float(np.exp(fit.posterior.log_beta.values[0, 0]))
    Phi = model.design(data.X, data.X)[:, active]
    dense = dense_log_evidence(Phi, data.y, np.exp(la[active]), beta)
    assert fit.info["log_evidence"] == pytest.approx(dense, rel=1e-9)
    assert float(fit.idata.objective["log_evidence"].values[-1]) == pytest.approx(dense, rel=1e-9)


# ------------------------------------------------------------------------------------------- em / fast
def test_em_objective_is_monotone(model, sinc40):
    fit = bz.fit(model, sinc40, "em", draws=10, chains=1, progress=False, update="em", max_iter=300)
    obj = fit.idata.objective["objective"].values
    assert obj.size > 50
    assert np.all(np.diff(obj) >= -1e-8 * np.abs(obj[1:]))
    assert obj[-1] > obj[0] + 1.0


def test_em_updates_agree_and_prune(model, sinc40):
    fits = {u: bz.fit(model, sinc40, "em", draws=10, chains=1, progress=False, update=u, max_iter=5000)
            for u in ("mackay", "em")}
    assert all(f.info["converged"] for f in fits.values())
    assert all(f.info["objective"] == "objective" for f in fits.values())
    # deletions are irreversible, so the two update rules may stop at different local maxima of J
    assert final_objective(fits["mackay"]) == pytest.approx(final_objective(fits["em"]), rel=0.02)
    f = fits["mackay"]
    w = f.posterior.w.values
    la = f.posterior.log_alpha.values
    pruned = la[0, 0] >= LOG_ALPHA_PRUNED
    assert 2 <= f.info["n_relevant"] <= 12 and pruned.sum() == model.n_basis(sinc40) - f.info["n_relevant"]
    assert np.all(w[:, :, pruned] == 0.0)
    # noise sd recovered (true 0.1)
    assert np.exp(-0.5 * f.posterior.log_beta.values[0, 0]) == pytest.approx(0.1, rel=0.3)


def test_fast_matches_em_with_no_more_bases(model, sinc40):
    em = bz.fit(model, sinc40, "em", draws=10, chains=1, progress=False)
    fast = bz.fit(model, sinc40, "fast", draws=10, chains=1, progress=False)
    assert fast.info["converged"]
    # the same objective J (log evidence + log-space hyperpriors); fast reaches an equal or higher maximum
    assert final_objective(fast) >= final_objective(em) - 1e-6
    assert final_objective(fast) - final_objective(em) < 0.02 * abs(final_objective(em))
    assert abs(fast.info["log_evidence"] - em.info["log_evidence"]) < 0.02 * abs(em.info["log_evidence"])
    assert fast.info["n_relevant"] <= em.info["n_relevant"]
    # predictions at the estimates agree closely (the Gaussians' means: an average of 10 draws has an error of 0.04)
    Xt = sinc40.X_test[::50]
    Pt = model.design(Xt, sinc40.X)
    pe = Pt @ em.idata.gaussian.q_mean.values
    pf = Pt @ fast.idata.gaussian.q_mean.values
    assert np.max(np.abs(pe - pf)) < 0.05


def test_fast_final_evidence_is_dense_evidence(model, sinc40):
    fit = bz.fit(model, sinc40, "fast", draws=5, chains=1, progress=False)
    la = fit.posterior.log_alpha.values[0, 0]
    active = la < LOG_ALPHA_PRUNED
    Phi = model.design(sinc40.X, sinc40.X)[:, active]
    beta = float(np.exp(fit.posterior.log_beta.values[0, 0]))
    assert fit.info["log_evidence"] == pytest.approx(dense_log_evidence(Phi, sinc40.y, np.exp(la[active]), beta),
                                                     rel=1e-9)


def _dense_factors(Phi, t, active, alpha, beta):
    """Sigma, mu on the active set and S_m, Q_m [P 28-29] of every basis, from C = beta^-1 I + Phi A^-1 Phi^T."""
    P = Phi[:, active]
    Sigma = np.linalg.inv(beta * P.T @ P + np.diag(alpha))
    C_inv = np.linalg.inv(np.eye(len(t)) / beta + (P / alpha) @ P.T)
    return Sigma, beta * Sigma @ P.T @ t, np.einsum("nm,nk,km->m", Phi, C_inv, Phi), Phi.T @ C_inv @ t


def test_fast_rank_one_updates_match_a_fresh_factorisation():
    rng = np.random.default_rng(5)
    N, M, beta = 30, 12, 2.5
    Phi, t = rng.normal(size=(N, M)), rng.normal(size=N)
    active, alpha = np.array([1, 4, 7, 9]), rng.gamma(2.0, 1.0, 4)
    Ga = Phi.T @ Phi[:, active]
    state = _dense_factors(Phi, t, active, alpha, beta)

    def same(got, want):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)

    # basis 3 enters at alpha 0.7
    grown = FAST._added(*state, Ga, Phi.T @ Phi[:, 3], active, 3, 0.7, beta)
    same(grown, _dense_factors(Phi, t, np.append(active, 3), np.append(alpha, 0.7), beta))
    # the second basis in the model (basis 4) moves from alpha[1] to 3.0
    moved = alpha.copy()
    moved[1] = 3.0
    same(FAST._reestimated(*state, Ga, 1, 3.0 - alpha[1], beta), _dense_factors(Phi, t, active, moved, beta))
    # the third (basis 7) leaves
    same(FAST._deleted(*state, Ga, 2, beta), _dense_factors(Phi, t, active[[0, 1, 3]], alpha[[0, 1, 3]], beta))


def friedman1(n, seed=0):
    from sklearn.datasets import make_friedman1

    X, y = make_friedman1(n_samples=n, noise=1.0, random_state=seed)
    return bz.datasets.Dataset(X=(X - X.mean(0)) / X.std(0), y=y, name="friedman1")


@pytest.mark.parametrize("problem", ["sinc100", "friedman300"])
def test_fast_stops_at_a_tipping_faul_fixed_point(problem):
    """At convergence no action raises J: every basis in the model has theta = q^2 - s > 0 and alpha at the maximum
    of its share of J, every basis left out has no finite maximum of positive share (theta <= 0, or too small to pay
    for the prior), and beta is its own re-estimate. s, q are computed here from the dense N x N covariance C."""
    if problem == "sinc100":
        model, data = bz.models.RVM(width=3.0), bz.datasets.load("sinc", n=100, seed=1)
    else:   # about 90 of 301 bases stay in the model: the case that coordinate-wise re-estimation converges slowly on
        model, data = bz.models.RVM(width=float(np.sqrt(10))), friedman1(300)
    fit = bz.fit(model, data, "fast", draws=5, chains=1, progress=False)
    assert fit.info["converged"]
    la = fit.posterior.log_alpha.values[0, 0]
    active = np.flatnonzero(la < LOG_ALPHA_PRUNED)
    alpha, beta = np.exp(la[active]), float(np.exp(fit.posterior.log_beta.values[0, 0]))
    Phi, t = model.design(data.X, data.X), data.y
    Sigma, mu, S, Q = _dense_factors(Phi, t, active, alpha, beta)
    s, q = S.copy(), Q.copy()                        # [T 3.10]: s, q of a basis in the model leave it out of C
    s[active] = alpha * S[active] / (alpha - S[active])
    q[active] = alpha * Q[active] / (alpha - S[active])
    theta = q * q - s
    best, _ = C.best_alpha(s, q * q, model.a, model.b)
    out = np.setdiff1d(np.arange(Phi.shape[1]), active)
    assert np.all(theta[active] > 0)
    np.testing.assert_allclose(alpha, best[active], rtol=0.03)
    assert np.all(np.isinf(best[out]))
    assert np.max(theta[out] / s[out]) < 0.03
    gamma = 1.0 - alpha * np.diag(Sigma)
    r = t - Phi[:, active] @ mu
    assert (len(t) - gamma.sum() + 2 * model.c) / (r @ r + 2 * model.d) == pytest.approx(beta, rel=1e-5)
    # every step (action, joint re-estimate of the alphas, new beta) raised the objective here
    obj = fit.idata.objective["objective"].values
    assert np.all(np.diff(obj) >= -1e-9 * np.abs(obj[1:]))


def test_fast_joint_steps_reach_the_same_kind_of_answer_in_fewer_steps():
    model, data = bz.models.RVM(width=float(np.sqrt(10))), friedman1(300)
    fits = {joint: bz.fit(model, data, "fast", draws=5, chains=1, progress=False, joint_steps=joint)
            for joint in (True, False)}
    assert all(f.info["converged"] for f in fits.values())
    assert fits[False].info["actions"]["joint"] == 0
    # one basis at a time, ~90 coupled alphas take hundreds of re-estimates; MacKay's joint update replaces them
    assert fits[True].info["iterations"] < 0.5 * fits[False].info["iterations"]
    objective = {joint: final_objective(f) for joint, f in fits.items()}
    assert abs(objective[True] - objective[False]) < 0.01 * abs(objective[False])


@pytest.mark.parametrize("link", ["logit", "probit"])
@pytest.mark.parametrize("backend", ["em", "fast", "vb"])
def test_classification_backends_fit(backend, link):
    data = tiny_classification()
    model = bz.models.RVM(task="classification", link=link, width=2.0)
    fit = bz.fit(model, data, backend, draws=50, chains=2, progress=False)
    assert fit.info["converged"]
    assert "log_beta" not in fit.posterior
    Phi = model.design(data.X, data.X)
    f = Phi @ fit.posterior.w.values.reshape(-1, Phi.shape[1]).mean(0)
    assert np.mean((f > 0) != (data.y > 0.5)) < 0.2


# ------------------------------------------------------------------------------------------- vb
@pytest.mark.parametrize("task,link", [("regression", "logit"), ("classification", "logit"),
                                       ("classification", "probit")])
def test_vb_elbo_never_decreases(task, link, sinc40):
    data = sinc40 if task == "regression" else tiny_classification()
    model = bz.models.RVM(task=task, link=link, width=3.0 if task == "regression" else 2.0)
    fit = bz.fit(model, data, "vb", draws=10, chains=1, progress=False, max_iter=400)
    elbo = fit.idata.objective["elbo"].values
    assert elbo.size > 10
    assert np.all(np.diff(elbo) >= -1e-9 * np.abs(elbo[1:]))


def test_vb_is_exact_for_one_conjugate_block():
    # q(w) with alpha, beta moments fixed is the exact Gaussian; check m, S against the closed form
    rng = np.random.default_rng(0)
    N, M = 9, 3
    Phi = rng.normal(size=(N, M))
    t = Phi @ np.array([1.0, -0.5, 0.0]) + 0.1 * rng.normal(size=N)
    model = bz.models.RVM(a=2.0, b=1.0, c=2.0, d=1.0)
    from bayeszoo.inference.rvm.vb import vb_fit

    res = vb_fit(model, Phi, t, {"max_iter": 3000, "tol": 1e-13})
    Eb = res.c_t / res.d_t
    Ea = res.a_t / res.b_t
    S = np.linalg.inv(Eb * Phi.T @ Phi + np.diag(Ea))
    np.testing.assert_allclose(res.m, Eb * S @ Phi.T @ t, rtol=1e-6)
    np.testing.assert_allclose(res.R @ res.R.T, S, rtol=1e-6, atol=1e-12)


# ------------------------------------------------------------------------------------------- gibbs
def test_gibbs_with_fixed_hyperparameters_is_the_exact_gaussian(model):
    data = bz.datasets.load("sinc", n=6, seed=2)
    Phi = model.design(data.X, data.X)
    alpha = np.linspace(0.5, 4.0, Phi.shape[1])
    beta = 20.0
    fit = bz.fit(model, data, "gibbs", draws=5000, tune=10, chains=4, seed=3, progress=False,
                 fix_alpha=alpha, fix_beta=beta)
    H = beta * Phi.T @ Phi + np.diag(alpha)
    Sigma = np.linalg.inv(H)
    mu = Sigma @ (beta * Phi.T @ data.y)
    w = fit.posterior.w.values.reshape(-1, Phi.shape[1])   # i.i.d. given fixed alpha, beta
    n = w.shape[0]
    z = (w.mean(0) - mu) / np.sqrt(np.diag(Sigma) / n)
    assert np.max(np.abs(z)) < 4.5
    # covariance: entrywise error against the Wishart standard error sqrt((S_ij^2 + S_ii S_jj) / n)
    emp = np.cov(w.T)
    se = np.sqrt((Sigma**2 + np.outer(np.diag(Sigma), np.diag(Sigma))) / n)
    assert np.max(np.abs(emp - Sigma) / se) < 5.0
    assert np.all(fit.posterior.log_beta.values == np.log(beta))


def _sbc(reps, draws, thin, seed):
    rng = np.random.default_rng(seed)
    N, M = 8, 3
    X = np.linspace(-1, 1, N)
    Phi = np.column_stack([np.ones(N), X, np.exp(-X**2 / 0.5)])       # fixed basis
    a, b, c, d = 3.0, 2.0, 4.0, 2.0
    ranks = []
    for r in range(reps):
        alpha = rng.gamma(a, 1.0 / b, M)
        beta = rng.gamma(c, 1.0 / d)
        w = rng.normal(size=M) / np.sqrt(alpha)
        t = Phi @ w + rng.normal(size=N) / np.sqrt(beta)
        out = gibbs_sample(Phi, t, (a, b, c, d), _ctx(r), draws=draws, tune=100, chains=1, thin=thin)
        ranks.append(np.concatenate([np.sum(out["w"][0] < w, 0), [np.sum(out["log_beta"][0] < np.log(beta))]]))
    return np.array(ranks)  # (reps, M + 1), values in 0..draws


def _uniform_pvalues(ranks, draws, bins):
    edges = np.linspace(0, draws + 1, bins + 1)
    pv = []
    for j in range(ranks.shape[1]):
        counts = np.histogram(ranks[:, j], bins=edges)[0]
        pv.append(stats.chisquare(counts).pvalue)
    return np.array(pv)


def test_gibbs_draws_where_the_precision_is_singular_to_working_precision():
    # sinc's "scale" width (about 6 on [-10, 10]) makes nearly collinear columns; with alphas far below rounding
    # against beta Phi^T Phi, beta Phi^T Phi + diag(alpha) is indefinite in double precision, and the Cholesky
    # draw left double precision (the default sinc grid's Gibbs cell). The QR draw samples the same Gaussian.
    data = bz.datasets.load("sinc")
    Phi = bz.models.RVM().training_design(data)
    alpha, beta = 1e-12, 100.0
    out = gibbs_sample(Phi, data.y, (1e-4, 1e-4, 1e-4, 1e-4), _ctx(0), draws=400, tune=5, chains=2,
                       fix_alpha=alpha, fix_beta=beta)
    f = out["w"].reshape(-1, Phi.shape[1]) @ Phi.T
    assert np.all(np.isfinite(f))
    # the exact posterior of f = Phi w: w | t ~ N(mu, H^-1), mu the least-squares solution of the stacked system
    A = np.vstack([np.sqrt(beta) * Phi, np.sqrt(alpha) * np.eye(Phi.shape[1])])
    mu = np.linalg.lstsq(A, np.concatenate([np.sqrt(beta) * data.y, np.zeros(Phi.shape[1])]), rcond=None)[0]
    _, R = np.linalg.qr(A)
    sd_f = np.sqrt(np.sum(np.linalg.solve(R.T, Phi.T) ** 2, axis=0))        # sd of f_n: |R^-T phi_n|
    z = (f.mean(0) - Phi @ mu) / (sd_f / np.sqrt(f.shape[0]))
    assert np.max(np.abs(z)) < 5.0
    np.testing.assert_allclose(f.std(0), sd_f, rtol=0.25)


def test_the_default_sinc_grid_runs():
    """A newcomer's first grid: the default RVM on the default sinc data with em, vb and gibbs."""
    cmp = bz.compare(bz.models.RVM(), bz.datasets.load("sinc"), backends=["em", "vb", "gibbs"], reference=None,
                     draws=200, tune=200, chains=4, progress=False)
    assert cmp.errors == {}
    assert set(cmp.fits) == {"em", "vb", "gibbs"}
    assert all(np.all(np.isfinite(fit.idata.posterior["w"].values)) for fit in cmp.fits.values())


def test_fast_classification_keeps_only_actions_that_raise_the_objective():
    # breast cancer at a width of 2 (standardised, 30 features): the Laplace-predicted gain of re-estimating one
    # basis's alpha was positive both ways, and the fit cycled between two alphas until max_iter
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    keep = np.random.default_rng(0).choice(y.size, 150, replace=False)
    X = (X[keep] - X[keep].mean(0)) / X[keep].std(0)
    data = bz.datasets.Dataset(X=X, y=y[keep].astype(float), name="bc150", meta={"task": "classification"})
    fit = bz.fit(bz.models.RVM(task="classification", width=2.0), data, "fast", max_iter=400, draws=10, chains=1,
                 progress=False)
    assert fit.info["converged"]
    objective = fit.idata.objective["objective"].values
    assert np.all(np.diff(objective) > 0)


def test_gibbs_sbc_quick():
    draws = 49
    ranks = _sbc(reps=120, draws=draws, thin=4, seed=11)
    pv = _uniform_pvalues(ranks, draws, bins=5)
    # 4 tests: Bonferroni at 0.001 overall
    assert np.min(pv) > 0.001 / 4, pv


@pytest.mark.slow
def test_gibbs_sbc_full():
    draws = 99
    ranks = _sbc(reps=600, draws=draws, thin=5, seed=12)
    pv = _uniform_pvalues(ranks, draws, bins=10)
    assert np.min(pv) > 0.001 / 4, pv
    # and by Kolmogorov-Smirnov on the normalised ranks
    for j in range(ranks.shape[1]):
        u = (ranks[:, j] + np.random.default_rng(j).uniform(size=len(ranks))) / (draws + 1)
        assert stats.kstest(u, "uniform").pvalue > 0.001 / 4


def test_gibbs_probit_classification_runs_and_separates():
    data = tiny_classification()
    model = bz.models.RVM(task="classification", link="probit", width=2.0)
    fit = bz.fit(model, data, "gibbs", draws=300, tune=200, chains=2, seed=0, progress=False)
    assert fit.kind == "mcmc" and "log_beta" not in fit.posterior
    Phi = model.design(data.X, data.X)
    f = Phi @ fit.posterior.w.values.reshape(-1, Phi.shape[1]).mean(0)
    assert np.mean((f > 0) != (data.y > 0.5)) < 0.2


# ------------------------------------------------------------------------------------------- seeds / options
@pytest.mark.parametrize("backend", ["gibbs", "vb"])
def test_other_seed_and_other_chain_give_other_draws(backend, model, sinc40):
    kw = dict(draws=50, tune=20, chains=2, progress=False)
    f1 = bz.fit(model, sinc40, backend, seed=5, **kw)
    f3 = bz.fit(model, sinc40, backend, seed=6, **kw)
    assert not np.array_equal(f1.posterior.w.values, f3.posterior.w.values)
    assert not np.array_equal(f1.posterior.w.values[0], f1.posterior.w.values[1])   # chains differ


@pytest.mark.parametrize("backend,options,name", [
    ("em", {"update": "newton"}, "update"), ("em", {"max_iter": 0}, "max_iter"), ("em", {"tol": -1.0}, "tol"),
    ("em", {"init_beta": 0.0}, "init_beta"), ("fast", {"max_iter": 1.5}, "max_iter"),
    ("fast", {"prune_alpha": -1.0}, "prune_alpha"), ("vb", {"tol": 0.0}, "tol"), ("gibbs", {"thin": 0}, "thin"),
    ("gibbs", {"fix_alpha": -1.0}, "fix_alpha"), ("gibbs", {"fix_beta": 0.0}, "fix_beta"),
    ("gibbs", {"init": {"tau": 1.0}}, "init"),
])
def test_bad_options_raise_before_the_backend_runs(backend, options, name, model, sinc40):
    from bayeszoo import registry

    with pytest.raises(ValueError, match=name):
        registry.get(model, backend).resolve(options, model, sinc40)
    with pytest.raises(ValueError, match=name):
        bz.fit(model, sinc40, backend, draws=5, tune=5, chains=1, progress=False, **options)


@pytest.mark.parametrize("options", [{"fix_alpha": [1.0, 2.0]}, {"fix_beta": 1.0}])
def test_gibbs_options_that_depend_on_the_model(options, model, sinc40):
    data = sinc40 if "fix_alpha" in options else tiny_classification()
    m = model if "fix_alpha" in options else bz.models.RVM(task="classification", link="probit", width=2.0)
    with pytest.raises(ValueError, match=next(iter(options))):
        bz.fit(m, data, "gibbs", draws=5, tune=5, chains=1, progress=False, **options)


def test_gibbs_does_not_apply_to_logit_classification():
    model = bz.models.RVM(task="classification", link="logit")
    assert "gibbs" not in bz.backends(model)
    with pytest.raises(ValueError):
        bz.fit(model, tiny_classification(), "gibbs", draws=5, tune=5, chains=1, progress=False)


# ------------------------------------------------------------------------------------------- cross-backend
def _predictive(fit, model, data, Xt):
    Pt = model.design(Xt, data.X)
    f = np.einsum("cdm,nm->cdn", fit.posterior.w.values, Pt)
    return f


def test_gibbs_and_vb_agree_on_sinc(model, sinc40):
    Xt = sinc40.X_test[::40]
    g = _predictive(bz.fit(model, sinc40, "gibbs", draws=1000, tune=500, chains=4, seed=1, progress=False),
                    model, sinc40, Xt)
    v = _predictive(bz.fit(model, sinc40, "vb", draws=1000, chains=1, seed=1, progress=False), model, sinc40, Xt)
    # VB is an approximation: its predictive mean is within 0.05 (half the noise sd) of the Gibbs mean
    diff = np.abs(g.mean((0, 1)) - v.mean((0, 1)))
    assert np.max(diff) < 0.05, diff


@pytest.mark.slow
def test_gibbs_vb_nuts_agree_on_sinc(model, sinc40):
    import arviz as az

    Xt = sinc40.X_test[::40]
    g = _predictive(bz.fit(model, sinc40, "gibbs", draws=4000, tune=1000, chains=4, seed=1, progress=False),
                    model, sinc40, Xt)
    others = {}
    for name in ("nuts", "numpyro"):
        if name not in bz.backends(model):
            continue
        try:
            others[name] = _predictive(bz.fit(model, sinc40, name, draws=1000, tune=1000, chains=4, seed=1,
                                              progress=False), model, sinc40, Xt)
        except NotImplementedError:
            continue
    if not others:
        pytest.skip("no generic NUTS backend available yet")

    def mean_se(f):
        ess = az.ess(az.convert_to_dataset({"f": f}))["f"].values
        return f.mean((0, 1)), f.std((0, 1)) / np.sqrt(ess)

    mg, sg = mean_se(g)
    for name, f in others.items():
        mo, so = mean_se(f)
        z = (mg - mo) / np.sqrt(sg**2 + so**2)
        assert np.max(np.abs(z)) < 5.0, (name, z)
    v = _predictive(bz.fit(model, sinc40, "vb", draws=2000, chains=1, seed=1, progress=False), model, sinc40, Xt)
    assert np.max(np.abs(v.mean((0, 1)) - mg)) < 0.05


# ------------------------------------------------------------------------------------------- failures named
def test_gibbs_samples_a_wide_width_under_the_flat_prior():
    # width 30 on inputs in [-10, 10] with the nearly flat default prior: the precision's Cholesky failed and the
    # chains left double precision (first every draw NaN, then a ValueError naming the prior); the QR draw samples
    # it: the weights wander far along the nearly flat directions, and the function they make stays finite and
    # explains part of the targets (a kernel this wide cannot follow sinc closely)
    data = bz.datasets.load("sinc", n=100, n_test=10)
    model = bz.models.RVM(width=30.0)
    fit = bz.fit(model, data, "gibbs", draws=50, tune=50, chains=2, progress=False)
    assert np.all(np.isfinite(fit.posterior.w.values))
    f = model.predict_draws(fit, data.X)
    assert np.all(np.isfinite(f)) and np.mean((f.mean(0) - data.y) ** 2) < np.var(data.y)


@pytest.mark.parametrize("init, match", [({"beta": None}, "init' entry 'beta'"), ({"w": [1.0, 2.0]}, "init' entry 'w'"),
                                         ({"alpha": -1.0}, "init' entry 'alpha'"), ({"w": "x"}, "init' entry 'w'"),
                                         ({"alpha": [[1.0]]}, "init' entry 'alpha'")])
def test_gibbs_init_is_checked(init, match, model, sinc40):
    # init={"beta": None} raised a TypeError, a wrong-length w numpy's broadcasting error, alpha < 0 NaN draws
    with pytest.raises(ValueError, match=match):
        bz.fit(model, sinc40, "gibbs", draws=5, tune=5, chains=1, progress=False, init=init)


@pytest.mark.parametrize("backend, options, name", [
    ("em", {"max_iter": "10"}, "max_iter"), ("em", {"update": ["em"]}, "update"), ("fast", {"tol": True}, "tol"),
    ("vb", {"max_iter": 2.0}, "max_iter"), ("gibbs", {"fix_beta": "1"}, "fix_beta"),
    ("gibbs", {"fix_alpha": {"a": 1}}, "fix_alpha")])
def test_bad_option_types_name_the_backend_and_option(backend, options, name, model, sinc40):
    with pytest.raises(ValueError, match=f"backend '{backend}': option '{name}'"):
        bz.fit(model, sinc40, backend, draws=5, tune=5, chains=1, progress=False, **options)


def test_em_keeps_the_noise_precision_positive_when_the_bases_interpolate():
    # found by tests/models/test_properties_rvm.py: with a nearly exact fit (noise-like targets, d = 1e-17) sum(gamma)
    # exceeded N in rounding, MacKay's beta update went negative and numpy's LinAlgError followed
    X = np.random.default_rng(0).normal(size=(29, 1))
    y = 1e-5 * np.array([
        6.02793975, -0.103737191, 10.147939, 5.58980034, -8.84558233, 9.70453615, -2.23629797, 5.81265791, -10.5417536,
        -4.99198801, -9.92334649, 4.16990588, 5.75392121, -2.28842387, -5.40942693, -10.671075, -8.96881663,
        -4.63130574, 10.1189015, 3.76299039, -0.0131427314, -3.55136895, -10.291671, 9.60399773, 6.66856543,
        5.35509071, -10.7088204, -10.3115493, -7.56754134])
    data = bz.datasets.Dataset(X, y, name="noise", meta={"task": "regression"})
    model = bz.models.RVM(width=0.82, a=1.0, d=1e-17)
    fit = bz.fit(model, data, "em", draws=5, chains=1, progress=False)
    assert np.isfinite(fit.posterior.log_beta.values).all() and np.isfinite(model.predict(fit, X)).all()


def test_vb_and_gibbs_residuals_for_targets_far_from_zero():
    # found by tests/models/test_properties_rvm.py: vb expanded |t - Phi m|^2 as t.t - 2 m.Phi^T t + m.G m, which
    # cancelled to a negative number for targets near 1e5 (numpy's LinAlgError followed); gibbs clipped the same
    # expansion at 0
    X = np.random.default_rng(0).normal(size=(28, 1))
    y = 1e5 + np.array([
        0.57246785, -0.03824536, 1.03050758, 0.52824681, -0.89197867, 0.95327568, -0.14860979, 0.63814359, -1.05548848,
        -0.5108261, -0.99608868, 0.38573343, 0.60403824, -0.25302113, -0.55170149, -1.0678004, -0.90390332,
        -0.48224827, 0.99945524, 0.4427344, -0.02931491, -0.2827627, -1.0315266, 0.94234322, 0.71857488, 0.50461016,
        -1.07136799, -1.03125772])
    data = bz.datasets.Dataset(X, y, name="offset", meta={"task": "regression"})
    model = bz.models.RVM(width=0.83)
    for backend in ("vb", "gibbs"):
        fit = bz.fit(model, data, backend, draws=200, tune=200, chains=1, progress=False)
        assert np.all(np.isfinite(model.predict(fit, X))) and np.isfinite(model.score(fit, data)["log_pred"])


def test_laplace_mode_keeps_w_finite_on_separable_data_with_tiny_alphas():
    # found by tests/models/test_properties_rvm.py: with b = 1e23 the alphas are tiny, IRLS took a Newton step that
    # did not raise the objective (its line search gave up), w overflowed, the probit weights became NaN: LinAlgError
    rng = np.random.default_rng(3)
    X = rng.normal(size=(15, 1))
    y = (X[:, 0] + rng.normal(size=15) > 0).astype(float)
    y[:2] = [0, 1]
    data = bz.datasets.Dataset(X, y, name="separable", meta={"task": "classification"})
    model = bz.models.RVM(task="classification", link="probit", b=1e23, width=0.9)
    fit = bz.fit(model, data, "em", draws=5, chains=1, progress=False)
    assert np.all(np.isfinite(model.predict(fit, X)))
