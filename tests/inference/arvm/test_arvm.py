"""Numbers for the adaptive-kernel RVM: corrected gradients, Algorithm 1, sparsity prior, declarations."""
from __future__ import annotations

import numpy as np
import pytest

import bayeszoo as bz
from bayeszoo.inference.arvm import learn as L
from bayeszoo.models.arvm import ARVM, adaptive_design, sparsity_value
from bayeszoo.models.rvm import LOG_ALPHA_PRUNED


def _rng0():
    """The generator the arvm backend's run with seed 0 draws its candidates from (its context's root stream)."""
    return np.random.default_rng(0)


def _state(D=1, K=1, mode="log_width", floor=0.0, c=1.7, clf=False, M=3, seed=0, N=25, u0=None):
    """A random model state with M active bases (regression beta = 20, or classification at its Laplace mode)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(N, D))
    t = (X[:, 0] > 0.5).astype(float) if clf else np.sin(6 * X[:, 0]) + 0.1 * rng.normal(size=N)
    kernel = L.Kernel(X, K, mode, floor=floor)
    state = L.State(kernel, t, c, clf, None if clf else 20.0)
    u0 = (3.0 if mode == "scale" else -1.5) if u0 is None else u0
    inner = lambda Z: 0.1 + 0.8 * Z                 # noqa: E731  (centres strictly inside the inputs' box)
    state.theta = np.column_stack([inner(X[:M]), u0 + 0.3 * rng.normal(size=(M, K))])
    state.alpha = rng.gamma(2.0, 1.0, M)
    state.w_mode = np.zeros(M)
    state.refresh()
    cands = np.column_stack([inner(X[5:9]), u0 + 0.3 * rng.normal(size=(4, K))])
    return state, cands, rng


def _fd(fun, x, eps=1e-6):
    """Central differences of a scalar-per-row (or scalar) function in every coordinate of x."""
    out = np.zeros(x.shape)
    for idx in np.ndindex(x.shape):
        e = np.zeros(x.shape)
        e[idx] = eps
        out[idx] = (fun(x + e) - fun(x - e)) / (2 * eps)
    return out


GEOMETRIES = [dict(D=1, K=1), dict(D=2, K=1), dict(D=2, K=2), dict(D=2, K=2, floor=0.05),
              dict(D=2, K=2, mode="scale"), dict(D=2, K=1, clf=True, c=0.1)]


# ------------------------------------------------------------------------------------------- gradients
@pytest.mark.parametrize("geom", GEOMETRIES)
def test_candidate_gradient_is_the_corrected_eq51(geom):
    state, cands, _ = _state(**geom)
    gain, grad, _ = L.candidate_objective(state, cands)
    keep = gain > 0                              # a candidate with q^2 <= (2c+1) s has gain 0 and no gradient
    assert keep.sum() >= 2
    cands, grad = cands[keep], grad[keep]
    fd = np.stack([_fd(lambda th: L.candidate_objective(state, th[None])[0][0], cands[b]) for b in range(len(cands))])
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-7 * np.abs(fd).max())


def test_off_data_candidates_have_no_gain():
    """A basis whose largest value on the training inputs is below min_peak cannot enter (see README)."""
    state, cands, _ = _state(D=2, K=1, c=0.0)
    state.min_peak = 0.05
    far = cands.copy()
    far[:, :2] = [1.0, 0.0]                                     # a corner of the box, away from the inputs
    far[:, 2] = np.log(0.01)                                    # narrow
    assert np.all(state.kernel.peak(far) < 0.05)
    assert np.all(L.candidate_objective(state, far)[0] == 0)
    assert np.all(L.candidate_objective(state, cands)[0][state.kernel.peak(cands) >= 0.05] >= 0)


@pytest.mark.parametrize("geom, seed", [(dict(D=2, K=1), 0), (dict(D=2, K=1), 3), (dict(D=2, K=2), 2)])
def test_joint_step_stays_on_the_min_peak_set_and_raises_Ls(geom, seed):
    """Step 2 by default ends on the set that steps 1 and 4 enforce (every basis reaches min_peak at a training
    input) and never lowers L^s; the paper's unbounded step, from the same state, leaves that set (the defect that
    lets step 4 prune what step 2 moved and L^s cycle)."""
    state, _, _ = _state(seed=seed, M=4, **geom)
    state.min_peak = 0.5 * float(state.kernel.peak(state.theta).min())     # every basis starts inside the set
    start = -L.joint_objective(state, state.theta.ravel())[0]
    unbounded = L.joint_step(state, None, {**L.DEFAULT_OPTIONS, "joint_step": "unbounded"})
    assert state.kernel.peak(unbounded).min() < state.min_peak                     # the defect: it leaves the set
    theta = L.joint_step(state, None, dict(L.DEFAULT_OPTIONS))
    assert theta.shape == state.theta.shape
    assert np.all(state.kernel.peak(theta) >= state.min_peak)
    assert -L.joint_objective(state, theta.ravel())[0] > start + 1.0                # it moves, uphill (measured 26-80)


def test_joint_step_stays_put_when_every_better_point_is_off_the_set():
    """When the BFGS path leaves the min_peak set at its first iterate, the feasible step does not move (None)."""
    state, _, _ = _state(seed=0, M=4, D=2, K=1)
    state.min_peak = 0.8 * float(state.kernel.peak(state.theta).min())
    assert L.joint_step(state, None, dict(L.DEFAULT_OPTIONS)) is None
    assert state.kernel.peak(L.joint_step(state, None, {**L.DEFAULT_OPTIONS, "joint_step": "unbounded"})).min() \
        < state.min_peak


def _diabetes_fold(shuffle=2, fold=1):
    """scikit-learn's diabetes, 3-fold KFold shuffled with ``shuffle``: that fold's standardised train and test parts
    (standardised with the training part's mean and sd, as in benchmarks/bench_defaults.py)."""
    from sklearn.datasets import load_diabetes
    from sklearn.model_selection import KFold

    X, y = load_diabetes(return_X_y=True)
    train, test = list(KFold(3, shuffle=True, random_state=shuffle).split(X))[fold]
    mean, sd = X[train].mean(0), X[train].std(0)
    ym, ys = y[train].mean(), y[train].std()
    return (X[train] - mean) / sd, (y[train] - ym) / ys, (X[test] - mean) / sd, (y[test] - ym) / ys


@pytest.mark.slow
def test_diabetes_fold_converges_instead_of_cycling():
    """The fold of scikit-learn's diabetes (shuffle 2, second fold) on which the paper's Algorithm 1 cycles and scores
    R^2 -0.35 (two cancelling bases, weights +157 and -386; L^s falls in 156 of 300 iterations, by up to 113, always
    by the min_peak pruning of a basis that the joint step moved below 0.05). With every step on the min_peak set
    (the default) L^s never falls and the run converges (measured: 22 iterations, 4 bases, R^2 0.472)."""
    Xtr, ytr, Xte, yte = _diabetes_fold()
    res = L.learn(ARVM(), Xtr, ytr, dict(L.DEFAULT_OPTIONS), rng=_rng0())
    state = res.state
    centre, h = state.kernel.centre(state.theta[:, :10]), state.kernel.width(state.theta[:, 10])
    f = adaptive_design(Xte, centre, 1.0 / h[:, None]) @ state.post.mu
    r2 = 1 - np.mean((yte - f) ** 2) / np.var(yte)
    assert res.converged and np.min(np.diff(res.objective)) > -1e-6
    assert res.iterations < 100 and not res.warnings
    assert r2 > 0.3


@pytest.mark.slow
def test_the_papers_cycling_step_is_one_option_away_and_reported():
    """The same fold with ``joint_step="unbounded"`` (the paper's Algorithm 1): the run stops while L^s falls and
    rises, so it says so instead of reporting convergence."""
    Xtr, ytr, _, _ = _diabetes_fold()
    res = L.learn(ARVM(), Xtr, ytr, {**L.DEFAULT_OPTIONS, "joint_step": "unbounded"}, rng=_rng0())
    falls = int(np.sum(np.diff(res.objective) < -1e-6))
    assert falls > 0 and not res.converged
    assert any(f"L^s fell in {falls} of {len(res.objective) - 1} iterations" in w and "joint_step='feasible'" in w
               for w in res.warnings)


def test_printed_eq51_coefficient_is_wrong():
    """[P 51] prints (q^2 + c alpha); only (q^2 + 2 c alpha) matches the derivative of the paper's own l^s [P 42]."""
    state, cands, _ = _state(c=2.0)
    phi, dphi = state.kernel.eval(cands, grad=True)
    Cphi, Ct = state.cinv(phi), state.cinv(state.that)
    s, q = np.sum(phi * Cphi, 0), Ct @ phi
    alpha = s**2 / (q**2 - 5.0 * s)
    r, w = np.einsum("nb,nbp->bp", Cphi, dphi), np.einsum("n,nbp->bp", Ct, dphi)
    printed = -(1 / (alpha + s) + (q**2 + 2.0 * alpha) / (alpha + s) ** 2)[:, None] * r + (q / (alpha + s))[:, None] * w
    _, grad, _ = L.candidate_objective(state, cands)
    assert np.max(np.abs(printed - grad)) > 1e-3 * np.max(np.abs(grad))


@pytest.mark.parametrize("geom", GEOMETRIES)
def test_joint_gradient_is_the_corrected_eq62(geom):
    state, _, rng = _state(**geom)
    delta = rng.gamma(2.0, 1.0, state.theta[:, state.kernel.D:].shape) if geom.get("mode") == "scale" else None
    x = state.theta.ravel()
    _, grad = L.joint_objective(state, x, delta)
    fd = _fd(lambda th: L.joint_objective(state, th, delta)[0], x)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-7 * np.abs(fd).max())


def test_printed_eq62_sign_is_wrong():
    """[P 62] prints +2c B Phi Sigma A Sigma; the derivative of L^s [P 38] needs -2c."""
    state, _, _ = _state(c=2.0)
    x = state.theta.ravel()
    _, grad = L.joint_objective(state, x)
    Phi, dPhi = state.kernel.eval(state.theta, grad=True)
    Sigma, mu, B, A = state.post.Sigma, state.post.mu, state.B, state.alpha
    r = state.that - Phi @ mu
    D_printed = B[:, None] * (np.outer(r, mu) - Phi @ Sigma + 2 * 2.0 * Phi @ Sigma @ (A[:, None] * Sigma))
    printed = -np.einsum("nm,nmp->mp", D_printed, dPhi).ravel()
    assert np.max(np.abs(printed - grad)) > 1e-3 * np.max(np.abs(grad))


# ------------------------------------------------------------------------------------------- objective
def _objective_after_adding(state, theta_new, alpha_new):
    trial = L.State(state.kernel, state.t, state.c, state.clf, state.beta)
    trial.theta = np.vstack([state.theta, theta_new])
    trial.alpha = np.append(state.alpha, alpha_new)
    trial.w_mode = np.zeros(trial.alpha.size)
    trial.refresh()
    return trial.log_marginal() - trial.c * trial.trace_S()


@pytest.mark.parametrize("c, M", [(0.0, 3), (1.3, 0)])
def test_add_gain_is_the_exact_change_of_Ls(c, M):
    """With c = 0, or into an empty model, l^s(alpha*) [P 42, 44] is exactly the increase of L^s [P 38]."""
    state, cands, _ = _state(c=c, M=max(M, 1))
    if M == 0:
        state.theta, state.alpha = state.theta[:0], state.alpha[:0]
        state.refresh()
    gain, _, alpha = L.candidate_objective(state, cands)
    before = state.log_marginal() - c * state.trace_S()
    assert np.sum(gain > 0) >= 2
    for b in np.flatnonzero(gain > 0):
        assert _objective_after_adding(state, cands[b], alpha[b]) - before == pytest.approx(gain[b], rel=1e-8)


def test_exact_alpha_update_is_a_stationary_point_of_Ls():
    """alpha_update="exact" solves d L^s / d log alpha = 0; [P 40] (diagonal-only) does not when Sigma is full."""
    state, _, _ = _state(c=1.0, M=4, seed=3, u0=np.log(0.4))   # wide, overlapping kernels: Sigma is far from diagonal
    opts = {**L.DEFAULT_OPTIONS, "hyper_sweeps": 2000}

    def Ls(log_alpha, st):
        st2 = L.State(st.kernel, st.t, st.c, False, st.beta)
        st2.theta, st2.alpha = st.theta, np.exp(log_alpha)
        st2.refresh()
        return st2.log_marginal() - st2.c * st2.trace_S()

    for update, stationary in (("exact", True), ("paper", False)):
        st = L.State(state.kernel, state.t, state.c, False, state.beta)
        st.theta, st.alpha = state.theta.copy(), state.alpha.copy()
        st.refresh()
        L.update_hyper(st, {**opts, "alpha_update": update}, beta_free=False)
        assert st.M >= 2
        grad = _fd(lambda la: Ls(la, st), np.log(st.alpha), eps=1e-5)
        if stationary:
            assert np.max(np.abs(grad)) < 1e-5
        else:
            assert np.max(np.abs(grad)) > 1e-4


def test_sparsity_values_of_the_paper():
    assert sparsity_value("none", 128) == 0.0
    assert sparsity_value("aic", 128) == 1.0
    assert sparsity_value("bic", 128) == pytest.approx(2.426, abs=1e-3)
    assert sparsity_value("ric", 100) == pytest.approx(4.605, abs=1e-3)
    assert sparsity_value(0.3, 10) == 0.3


def test_trace_smoother_of_declarations_matches_dense_formula():
    import jax.numpy as jnp
    from bayeszoo.models.arvm import trace_smoother

    rng = np.random.default_rng(0)
    Phi = rng.normal(size=(9, 4))
    log_alpha = rng.normal(size=4) * 3
    beta = 2.5
    Sigma = np.linalg.inv(beta * Phi.T @ Phi + np.diag(np.exp(log_alpha)))
    dense = np.trace(Phi @ Sigma @ Phi.T * beta)               # trace(S), S = Phi Sigma Phi^T B [P 32]
    assert float(trace_smoother(jnp.asarray(beta * Phi.T @ Phi), jnp.asarray(log_alpha), "jax")) == \
        pytest.approx(dense, rel=1e-10)


# ------------------------------------------------------------------------------------------- learning
@pytest.fixture(scope="module")
def doppler():
    return bz.datasets.load("doppler", seed=0)


FAST = dict(n_candidates=40, joint_iter=50)


def test_learning_fit_layout_and_predict(doppler):
    model = ARVM(n_basis=30)
    fit = bz.fit(model, doppler, "arvm", draws=50, chains=2, seed=3, progress=False, **FAST)
    post = fit.posterior
    k = fit.info["n_relevant"]
    assert 1 <= k < 30 and model.score(fit, doppler)["n_relevant"] == k
    la = post.log_alpha.values[0, 0]
    assert np.all(la[:k] < LOG_ALPHA_PRUNED) and np.all(la[k:] == LOG_ALPHA_PRUNED)
    assert np.all(post.w.values[..., k:] == 0)
    np.testing.assert_allclose(model.predict(fit, doppler.X), post.f.values.mean((0, 1)), atol=1e-12)
    # the exact posterior mean of f (from the gaussian group's q_mean) against the average over the 100 draws of w
    exact = model.latent_mean(fit, doppler.X)
    f = post.f.values.reshape(-1, doppler.n)
    assert np.all(np.abs(exact - f.mean(0)) <= 5 * f.std(0) / np.sqrt(f.shape[0]) + 1e-12)
    widths = 1.0 / post.inv_width.values[0, 0, :k, 0]
    assert np.all(widths >= model.min_width_value(doppler.X))
    obj = fit.idata.objective[fit.info["objective"]].values
    assert fit.info["converged"] and obj[-1] > obj[0]
    assert fit.info["joint_step"] == "feasible"                      # the algorithm that ran is on record


def test_saved_fit_predicts_the_same(doppler, tmp_path):
    model = ARVM(n_basis=10, sparsity="ric")
    fit = bz.fit(model, doppler, "arvm", draws=20, chains=1, progress=False, **FAST)
    fit.save(tmp_path / "f.nc")
    back = bz.load_fit(tmp_path / "f.nc")
    again = bz.models.from_spec(back.model_spec)
    assert again == model
    np.testing.assert_allclose(again.predict(back, doppler.X), model.predict(fit, doppler.X), rtol=1e-12)


def test_larger_sparsity_gives_fewer_relevance_vectors(doppler):
    counts = []
    for c in (0.5, "bic", "ric", 8.0):
        fit = bz.fit(ARVM(sparsity=c), doppler, "arvm", draws=5, chains=1, progress=False, **FAST)
        counts.append(fit.info["n_relevant"])
    assert all(a >= b for a, b in zip(counts, counts[1:])) and counts[0] > counts[-1], counts


def _rvm_start(model, data, width):
    """Algorithm 1's starting model taken from an RVM fit (no bias) at ``width``: its relevance vectors and alphas."""
    rvm = bz.models.RVM(task=model.task, width=width, bias=False)
    fit = bz.fit(rvm, data, "fast", draws=2, chains=1, progress=False)
    rel = np.flatnonzero(fit.posterior.log_alpha.values[0, 0] < LOG_ALPHA_PRUNED)
    return data.X[rel], np.full(len(rel), width), np.exp(fit.posterior.log_alpha.values[0, 0][rel])


def test_search_from_empty_reaches_the_objective_of_an_rvm_start(doppler):
    """The search is not what limits the aRVM on Doppler: Algorithm 1 from the empty model reaches the same L^s
    [P 38] as Algorithm 1 started at the best RVM's solution (h = 0.04), and a higher L^s than that RVM's kernel
    with alpha, beta re-optimised for L^s."""
    model = ARVM(sparsity="bic")
    opts = dict(L.DEFAULT_OPTIONS)
    start = _rvm_start(model, doppler, 0.04)
    empty = L.learn(model, doppler.X, doppler.y, opts, rng=_rng0()).state.objective()
    warm = L.learn(model, doppler.X, doppler.y, opts, rng=_rng0(), init=start).state.objective()
    fixed = L.learn(model, doppler.X, doppler.y, {**opts, "max_iter": 1, "joint_iter": 0, "candidate_iter": 0,
                                                   "n_candidates": 1}, rng=_rng0(), init=start).state.objective()
    assert empty >= warm - 1e-3 * abs(warm)
    assert empty > fixed + 1.0


def test_doppler_arvm_against_rvm_widths(doppler):
    """[P §IV-A1]: aRVM (c = BIC) against the RVM on a grid of widths, MSE against the true signal.

    Over many noise realisations the best single width wins on average (README and the slow test below), so this
    test asserts what holds on every realisation: the aRVM beats the narrow widths the paper shows (h = 1.5 and 2
    grid spacings), stays within 10 % of the best width, and uses fewer bases."""
    # predictions average f over the draws of w: 1000 draws keep that Monte-Carlo error well below the differences
    fit = bz.fit(ARVM(sparsity="bic"), doppler, "arvm", draws=1000, chains=1, progress=False)
    arvm = ARVM(sparsity="bic").score(fit, doppler)
    rvm = {}
    for h in (1.5 / 128, 2 / 128, 0.02, 0.025, 0.03, 0.04, 0.05, 0.07):
        m = bz.models.RVM(width=h)
        rvm[h] = m.score(bz.fit(m, doppler, "fast", draws=1000, chains=1, progress=False), doppler)
    best = min(rvm.values(), key=lambda s: s["mse"])
    assert arvm["mse"] < rvm[1.5 / 128]["mse"] and arvm["mse"] < rvm[2 / 128]["mse"]
    assert arvm["mse"] < 1.1 * best["mse"]
    assert arvm["n_relevant"] < best["n_relevant"]


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="over 10 Doppler realisations the RVM at the best single width (h = 0.04) has "
                   "a lower mean MSE than the aRVM (BIC); see README, aRVM section")
def test_doppler_arvm_beats_the_best_single_width_on_average():
    """The paper's Doppler claim, as stated: over 10 noise realisations the aRVM's mean test MSE is below that of
    the RVM at the single width that is best on average (chosen with knowledge of the test error)."""
    widths = (0.03, 0.035, 0.04, 0.045, 0.05)
    arvm, rvm = [], {h: [] for h in widths}
    for seed in range(10):
        data = bz.datasets.load("doppler", seed=seed)
        st = L.learn(ARVM(sparsity="bic"), data.X, data.y, dict(L.DEFAULT_OPTIONS), rng=_rng0()).state
        arvm.append(np.mean((st.Phi @ st.post.mu - data.y_test) ** 2))
        for h in widths:
            m = bz.models.RVM(width=h)
            rvm[h].append(m.score(bz.fit(m, data, "fast", draws=400, chains=1, progress=False), data)["mse"])
    best = min(np.mean(v) for v in rvm.values())
    assert np.mean(arvm) < best


def test_classification_on_gaussian_mixture():
    """The aRVM stops at 2 bases here, with a higher error than the RVM at h = 0.8 (BENCHMARKS.md); why: see the
    next test and the README."""
    data = bz.datasets.load("gaussian_mixture", n_test_per_class=1000, seed=0)
    model = ARVM(task="classification", n_basis=15)
    fit = bz.fit(model, data, "arvm", draws=20, chains=1, progress=False, **FAST)
    score = model.score(fit, data)
    assert score["error_rate"] < 0.25 and score["log_pred"] > -0.5
    assert 1 <= score["n_relevant"] <= 15
    p = model.predict(fit, data.X_test)
    assert np.all((p >= 0) & (p <= 1))


def test_classification_objective_prefers_the_two_basis_fit():
    """On the Gaussian mixture the 2-basis model is the optimum of the paper's objective, not a search failure:
    its Laplace L^s (BIC) is higher than that of the RVM's better classifier (h = 0.8, 6 bases; its alpha
    re-optimised for L^s), and Algorithm 1 started from that RVM returns to the same L^s. Measured with the paper's
    step 2 (``joint_step="unbounded"``): -35.35 from empty (2 bases) and from the RVM (3 bases, the same L^s to
    1e-7: the optimum is a flat ridge); with the default feasible step the run from empty stops at 2 bases and
    -36.31, the one from the RVM at 2 bases and -35.35."""
    data = bz.datasets.load("gaussian_mixture", n_test_per_class=10, seed=0)
    model = ARVM(task="classification", sparsity="bic")
    start = _rvm_start(model, data, 0.8)
    assert len(start[0]) >= 4
    tol = 1e-3 * 35.35
    for joint_step in ("unbounded", "feasible"):
        opts = {**L.DEFAULT_OPTIONS, "min_alpha": 1e-2, "joint_step": joint_step}
        empty = L.learn(model, data.X, data.y, opts, rng=_rng0()).state
        warm = L.learn(model, data.X, data.y, opts, rng=_rng0(), init=start).state
        fixed = L.learn(model, data.X, data.y, {**opts, "max_iter": 1, "joint_iter": 0, "candidate_iter": 0,
                                                 "n_candidates": 1}, rng=_rng0(), init=start).state
        assert empty.M == 2 and warm.M <= 3, joint_step
        assert empty.objective() > fixed.objective() + 5.0, joint_step
        if joint_step == "unbounded":   # the paper's step finds the same optimum from either start
            assert abs(empty.objective() - warm.objective()) <= tol
        else:                           # the feasible one from empty stops short of it: never past it
            assert empty.objective() <= warm.objective() + tol


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="the aRVM's error (c = 1, BIC, RIC) is above the RVM's (h = 0.8): the paper's "
                   "objective prefers the 2-basis fit (see the test above and the README)")
def test_gaussian_mixture_arvm_error_matches_the_rvm():
    """[P §IV-A2]: the aRVM (c chosen by its test error, as the RVM's h is) classifies the 2-D Gaussian mixture
    at least as well as the RVM with the best of the paper's widths, up to Monte-Carlo error of the test set."""
    data = bz.datasets.load("gaussian_mixture", n_test_per_class=5000, seed=0)
    arvm = min(ARVM(task="classification", sparsity=c).score(
        bz.fit(ARVM(task="classification", sparsity=c), data, "arvm", draws=100, chains=1, progress=False),
        data)["error_rate"] for c in (1.0, "bic", "ric"))
    rvm = min(bz.models.RVM(task="classification", width=h).score(
        bz.fit(bz.models.RVM(task="classification", width=h), data, "fast", draws=100, chains=1, progress=False),
        data)["error_rate"] for h in (0.2, 0.4, 0.8))
    mc = np.sqrt(rvm * (1 - rvm) / data.y_test.size)
    assert arvm <= rvm + 2 * mc


def test_feature_selection_switches_off_the_irrelevant_direction():
    """PhD ch. 7: y depends on x0 only; the delta = 1/v^2 prior drives v for x1 to zero in every basis."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(80, 2))
    y = np.exp(-(X[:, 0] / 0.3) ** 2) + 0.05 * rng.normal(size=80)
    data = bz.datasets.Dataset(X, y, name="x0_only", meta={"task": "regression"})
    model = ARVM(kernel="diag", feature_selection=True, n_basis=10)
    fit = bz.fit(model, data, "arvm", draws=5, chains=1, progress=False, **FAST)
    k = fit.info["n_relevant"]
    v = fit.posterior.inv_width.values[0, 0, :k]
    w = np.abs(fit.posterior.w.values[0].mean(0)[:k])
    main = int(np.argmax(w))                   # the basis carrying the ridge
    assert v[main, 1] < 0.05 * v[main, 0], v
    assert 0.5 / 0.3 < v[main, 0] < 2 / 0.3, v  # its width along x0 is the ridge's, 0.3
    assert model.score(fit, data)["mse"] < 0.01


def test_feature_selection_phd_ch7_toy():
    """PhD §7.4.1: class 0 ~ N(0, diag(1, 10)), class 1 ~ N(0, diag(10, 1)); each class's basis switches off a
    different feature."""
    rng = np.random.default_rng(0)

    def sample(n):
        X = np.vstack([rng.normal(size=(n, 2)) * np.sqrt([1, 10]), rng.normal(size=(n, 2)) * np.sqrt([10, 1])])
        return X, np.r_[np.zeros(n), np.ones(n)]

    (X, y), (Xt, yt) = sample(100), sample(1000)
    data = bz.datasets.Dataset(X, y, Xt, yt, name="ch7", meta={"task": "classification"})
    model = ARVM(task="classification", kernel="diag", feature_selection=True, n_basis=10)
    fit = bz.fit(model, data, "arvm", draws=50, chains=1, progress=False, **FAST)
    k = fit.info["n_relevant"]
    v = fit.posterior.inv_width.values[0, 0, :k]
    w = fit.posterior.w.values[0].mean(0)[:k]
    off = v == 0
    assert np.any(off[w < 0, 1] & ~off[w < 0, 0])     # a class-0 basis ignores x2 (class 0 is spread along x2)
    assert np.any(off[w > 0, 0] & ~off[w > 0, 1])     # a class-1 basis ignores x1
    assert model.score(fit, data)["error_rate"] < 0.3


# ------------------------------------------------------------------------------------------- declarations
def test_pymc_numpyro_and_numpy_densities_agree():
    from numpyro.infer.util import log_density

    data = bz.datasets.load("doppler", n=20, seed=1)
    model = ARVM(n_basis=3, sparsity="bic")
    rng = np.random.default_rng(0)
    lo, hi, wlo, whi = model._prior_bounds(data)
    point = {"centre_unsorted": rng.uniform(lo, hi, size=(3, 1)), "log_width": rng.uniform(wlo, whi, size=(3, 1)),
             "log_alpha_unsorted": rng.normal(size=3), "z": rng.normal(size=3), "log_beta": np.array(1.5)}
    pm_model = model.pymc_model(data)
    pm_point = {}
    for rv in pm_model.free_RVs:
        value_var = pm_model.rvs_to_values[rv]
        tr = pm_model.rvs_to_transforms.get(rv)
        v = point[rv.name]
        pm_point[value_var.name] = tr.forward(v, *rv.owner.inputs).eval() if tr is not None else v
    pm_lp = pm_model.compile_logp(jacobian=False)(pm_point)
    np_lp, _ = log_density(model.numpyro_model(data), (), {}, point)
    # the same density in NumPy
    from scipy import stats
    from bayeszoo.numerics.special import log_gamma_logpdf

    v = np.exp(-point["log_width"])
    Phi = adaptive_design(data.X, point["centre_unsorted"], v)
    w = point["z"] * np.exp(-0.5 * point["log_alpha_unsorted"])
    beta = np.exp(point["log_beta"])
    Sigma = np.linalg.inv(beta * Phi.T @ Phi + np.diag(np.exp(point["log_alpha_unsorted"])))
    lp = (np.sum(stats.uniform(lo, hi - lo).logpdf(point["centre_unsorted"]))
          + np.sum(stats.uniform(wlo, whi - wlo).logpdf(point["log_width"]))
          + np.sum(log_gamma_logpdf(point["log_alpha_unsorted"], model.a, model.b))
          + np.sum(stats.norm.logpdf(point["z"]))
          + log_gamma_logpdf(point["log_beta"], model.c, model.d)
          + np.sum(stats.norm(Phi @ w, beta**-0.5).logpdf(data.y))
          - model.c_value(data.n) * np.trace(beta * Phi @ Sigma @ Phi.T))
    assert float(pm_lp) == pytest.approx(lp, rel=1e-9)
    assert float(np_lp) == pytest.approx(lp, rel=1e-9)


def _pymc_point(pm_model, point):
    """``point`` (free variables by name, constrained) as PyMC's value variables (transformed)."""
    out = {}
    for rv in pm_model.free_RVs:
        tr = pm_model.rvs_to_transforms.get(rv)
        v = point[rv.name]
        out[pm_model.rvs_to_values[rv].name] = tr.forward(v, *rv.owner.inputs).eval() if tr is not None else v
    return out


def test_declarations_report_the_bases_sorted_by_centre():
    """The bases are sampled unlabelled and reported sorted by their first centre coordinate: permuting the bases of
    a point changes neither the density nor anything reported, in both declarations."""
    from numpyro.infer.util import log_density

    rng = np.random.default_rng(3)
    X = rng.uniform(-2.0, 3.0, size=(12, 2))
    data = bz.datasets.Dataset(X, np.sin(X[:, 0]) + 0.1 * rng.normal(size=12), name="two-d",
                               meta={"task": "regression"})
    model = ARVM(n_basis=4, kernel="diag", sparsity="bic")
    lo, hi, wlo, whi = model._prior_bounds(data)
    point = {"centre_unsorted": rng.uniform(lo, hi, size=(4, 2)), "log_width": rng.uniform(wlo, whi, size=(4, 2)),
             "log_alpha_unsorted": rng.normal(size=4), "z": rng.normal(size=4), "log_beta": np.array(0.7)}
    perm = np.array([2, 0, 3, 1])
    permuted = {k: (v[perm] if k != "log_beta" else v) for k, v in point.items()}
    order = np.argsort(point["centre_unsorted"][:, 0])
    w = point["z"] * np.exp(-0.5 * point["log_alpha_unsorted"])
    expected = {"centre": point["centre_unsorted"][order], "inv_width": np.exp(-point["log_width"])[order],
                "log_alpha": point["log_alpha_unsorted"][order], "w": w[order],
                "f": adaptive_design(X, point["centre_unsorted"], np.exp(-point["log_width"])) @ w}
    assert np.all(np.diff(expected["centre"][:, 0]) > 0) and not np.all(order == np.arange(4))
    names = list(expected)
    pm_model = model.pymc_model(data)
    pm_out = pm_model.compile_fn(pm_model.replace_rvs_by_values([pm_model[n] for n in names]),
                                 inputs=pm_model.value_vars, on_unused_input="ignore")
    pm_logp = pm_model.compile_logp(jacobian=False)
    lps = []
    for at in (point, permuted):
        lp, trace = log_density(model.numpyro_model(data), (), {}, at)
        lps += [float(lp), float(pm_logp(_pymc_point(pm_model, at)))]
        pm_values = dict(zip(names, pm_out(_pymc_point(pm_model, at))))
        for name in names:
            np.testing.assert_allclose(np.asarray(trace[name]["value"]), expected[name], rtol=1e-12, err_msg=name)
            np.testing.assert_allclose(pm_values[name], expected[name], rtol=1e-12, err_msg=name)
    np.testing.assert_allclose(lps, lps[0], rtol=1e-12)     # the joint density is symmetric in the bases


def test_compare_table_and_report_for_the_family(doppler, tmp_path):
    model = ARVM(n_basis=20)
    cmp = bz.compare(model, doppler, backends=["arvm"], draws=50, chains=2, seed=0, progress=False,
                     options={"arvm": FAST}, out=tmp_path / "run")
    row = cmp.table().iloc[0]
    assert row["backend"] == "arvm" and row["kind"] == "approximation" and row["error"] == ""
    assert 0 < row["mse"] < 0.05 and 1 <= row["n_relevant"] < 20
    html = (tmp_path / "run" / "report.html").read_text()
    assert "no picture for the arvm family" not in html
    from bayeszoo.diagnostics.plots import family_picture

    fig = family_picture(cmp)
    title = fig.axes[0].get_title()
    assert "adaptive bases" in title and "Error" not in title       # a fit that cannot be drawn is named there
    assert any("adaptive bases" in t.get_text() for t in fig.axes[0].get_legend().get_texts())


@pytest.mark.slow
def test_samplers_and_type2_through_the_harness():
    """bz.compare runs the samplable declaration (ADVI here; NUTS in the slow test) next to Algorithm 1."""
    data = bz.datasets.load("doppler", n=40, seed=2)
    model = ARVM(n_basis=4)
    cmp = bz.compare(model, data, backends=["arvm", "advi"], reference="arvm", draws=200, chains=1, seed=0,
                     progress=False, options={"advi": {"max_iter": 3000}})
    table = cmp.table().set_index("backend")
    assert not table["error"].any(), table["error"]
    assert set(table.index) == {"arvm", "advi"}
    assert np.all(table["mse"] < 0.1) and np.isfinite(table.loc["advi", "mean_err"])   # arvm is the reference
    assert table.loc["arvm", "n_relevant"] <= 4


@pytest.mark.slow
def test_nuts_and_numpyro_agree_on_the_samplable_arvm():
    """The two declarations give the same posterior of f (within Monte-Carlo error) and a Doppler fit."""
    data = bz.datasets.load("doppler", n=30, seed=2)
    model = ARVM(n_basis=2)
    cmp = bz.compare(model, data, backends=["numpyro", "nuts", "arvm"], reference="numpyro", draws=300, tune=300,
                     chains=2, seed=0, progress=False)
    table = cmp.table().set_index("backend")
    assert not table["error"].any(), table["error"]
    assert table.loc["nuts", "mean_err"] < 0.5
    assert table.loc["nuts", "mse"] < 0.1 and table.loc["numpyro", "mse"] < 0.1


# ------------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("kwargs, match", [
    (dict(sparsity="aicc"), "sparsity"), (dict(sparsity=-1.0), "sparsity"), (dict(n_basis=0), "n_basis"),
    (dict(kernel="ard"), "kernel"), (dict(feature_selection=True), "feature_selection"),
    (dict(width_range=(1.0, 0.1)), "width_range"), (dict(min_width=-1.0), "min_width"), (dict(a=0.0), "a"),
    (dict(task="ranking"), "task")])
def test_bad_model_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ARVM(**kwargs)


def test_bad_data_and_options(doppler):
    mixture = bz.datasets.load("gaussian_mixture", n_test_per_class=10)
    with pytest.raises(ValueError, match="classification"):
        bz.fit(ARVM(), mixture, "arvm", progress=False)
    labels = bz.datasets.Dataset(doppler.X, np.where(doppler.y > 0, 2.0, 0.0), name="bad", meta={})
    with pytest.raises(ValueError, match="binary labels"):
        bz.fit(ARVM(task="classification"), labels, "arvm", progress=False)
    with pytest.raises(ValueError, match="n_candidates"):
        bz.fit(ARVM(), doppler, "arvm", progress=False, n_candidates=0)
    with pytest.raises(ValueError, match="min_peak"):
        bz.fit(ARVM(), doppler, "arvm", progress=False, min_peak=1.5)
    with pytest.raises(ValueError, match="alpha_update"):
        bz.fit(ARVM(), doppler, "arvm", progress=False, alpha_update="mackay")
    with pytest.raises(ValueError, match="joint_step.*'feasible'"):
        bz.fit(ARVM(), doppler, "arvm", progress=False, joint_step="bounded")
    with pytest.raises(ValueError, match="unknown backend"):
        bz.fit(ARVM(), doppler, "fast", progress=False)
    opts = dict(L.DEFAULT_OPTIONS)
    with pytest.raises(ValueError, match="init needs centres"):
        L.learn(ARVM(), doppler.X, doppler.y, opts, rng=_rng0(), init=(np.zeros((3, 2)), np.ones(3), np.ones(3)))
    with pytest.raises(ValueError, match="above the floor"):
        L.learn(ARVM(), doppler.X, doppler.y, opts, rng=_rng0(), init=(np.full(3, 0.5), np.full(3, 1e-4), np.ones(3)))
    with pytest.raises(ValueError, match="feature_selection"):
        L.learn(ARVM(kernel="diag", feature_selection=True), doppler.X, doppler.y, opts, rng=_rng0(),
                init=(np.full(3, 0.5), np.ones(3), np.ones(3)))
    with pytest.raises(ValueError):
        bz.datasets.Dataset(np.array([[0.0], [np.nan]]), np.zeros(2))


def test_known_noise_options_match_the_algorithm_called_directly():
    """``dictionary``, ``beta`` and ``noise_whitener`` through bz.fit give the state Algorithm 1 reaches when called
    with them directly (the route of the fMRI maps)."""
    rng = np.random.default_rng(0)
    X = np.column_stack([np.repeat(np.arange(6.0), 6), np.tile(np.arange(6.0), 6)])
    y = 2.0 * np.exp(-np.sum((X - 2.5) ** 2, 1) / 4.0) + 0.5 * rng.normal(size=36)
    data = bz.datasets.Dataset(X, y, name="grid", meta={"task": "regression"})
    model = ARVM(sparsity=1.0, n_basis=36, min_width=0.0)
    Wh = np.linalg.cholesky(np.eye(36) + 0.3 * np.exp(-np.sum((X[:, None] - X[None]) ** 2, 2)))
    Wh = np.linalg.inv(Wh) / 0.5
    opts = {"max_iter": 36, "patience": 1, "beta": 1.0, "dictionary": (X, np.full((36, 1), 1.5)), "noise_whitener": Wh}
    fit = bz.fit(model, data, "arvm", draws=1, chains=1, progress=False, **opts)
    st = L.learn(model, X, y, {**L.DEFAULT_OPTIONS, **opts}, rng=_rng0(), dictionary=opts["dictionary"],
                 whiten=Wh).state
    assert fit.info["n_relevant"] == st.M >= 1
    direct = adaptive_design(X, st.kernel.centre(st.kernel.split(st.theta)[0]), st.kernel.inv_width(st.theta[:, 2:]))
    np.testing.assert_allclose(model.latent_mean(fit, X), direct @ st.post.mu, rtol=1e-10, atol=1e-12)
    assert np.all(fit.posterior.log_beta.values == 0.0)


@pytest.mark.parametrize("options, match", [
    (dict(dictionary=np.zeros((3, 1))), "dictionary"), (dict(dictionary=(np.zeros((3, 1)), np.ones(2))), "dictionary"),
    (dict(dictionary=(np.zeros((3, 1)), -np.ones(3))), "dictionary"),
    (dict(dictionary=(np.zeros((3, 2)), np.ones(3))), "dictionary"),          # 2-D centres for 1-D inputs
    (dict(noise_whitener=np.ones((3, 4))), "noise_whitener"), (dict(noise_whitener=np.eye(3)), "noise_whitener"),
    (dict(beta=0.0), "beta")])
def test_bad_known_noise_options(options, match, doppler):
    with pytest.raises(ValueError, match=match):
        bz.fit(ARVM(), doppler, "arvm", progress=False, **options)


# ------------------------------------------------------------------------------------------- protocol
def test_nested_cv_protocol_selects_on_inner_folds_and_scores_outer():
    from bayeszoo.studies.arvm_nested_cv import DRAWS, nested_cv

    data = bz.datasets.load("sinc", n=60, seed=4)
    res = nested_cv(lambda h: bz.models.RVM(width=float(h)), [0.5, 4.0], data, backend="fast", folds=3,
                    inner_folds=2, seed=1, progress=False)
    assert res["error"].shape == (3,) and set(res["selected"]) <= {0.5, 4.0}
    for k, sel in enumerate(res["selected"]):                   # the selected value has the least inner error
        assert [0.5, 4.0][int(np.argmin(res["inner_error"][k]))] == sel
    assert np.all(res["error"] > 0) and np.all(res["error"] < 0.05) and np.all(res["n_relevant"] >= 1)
    # a one-value grid reduces to plain 3-fold CV on the same folds, in the original units of y
    one = nested_cv(lambda h: bz.models.RVM(width=float(h)), [2.0], data, backend="fast", folds=3, inner_folds=2,
                    seed=1, progress=False)
    rng = np.random.default_rng(1)
    for k, test_idx in enumerate(np.array_split(rng.permutation(data.n), 3)):
        train_idx = np.setdiff1d(np.arange(data.n), test_idx)
        Xm, Xs, ym, ys = data.X[train_idx].mean(0), data.X[train_idx].std(0), data.y[train_idx].mean(), \
            data.y[train_idx].std()
        split = bz.datasets.Dataset((data.X[train_idx] - Xm) / Xs, (data.y[train_idx] - ym) / ys,
                                    (data.X[test_idx] - Xm) / Xs, (data.y[test_idx] - ym) / ys, meta={})
        m = bz.models.RVM(width=2.0)
        fit = bz.fit(m, split, "fast", draws=DRAWS, chains=1, seed=1 + 100 * k, progress=False)
        assert one["error"][k] == pytest.approx(m.score(fit, split)["mse"] * ys**2, rel=1e-10)
    with pytest.raises(ValueError, match="folds"):
        nested_cv(lambda h: bz.models.RVM(width=h), [1.0], data, backend="fast", folds=1)
    with pytest.raises(ValueError, match="grid"):
        nested_cv(lambda h: bz.models.RVM(width=h), [], data, backend="fast")


@pytest.mark.slow
def test_rvm_versus_arvm_on_cpus():
    from bayeszoo.studies.arvm_nested_cv import rvm_versus_arvm

    data = bz.datasets.load("cpus")
    both = rvm_versus_arvm(data, folds=3, inner_folds=3, widths=[1.0, 3.0, 6.0], arvm_options=FAST, progress=False)
    for m in ("rvm", "arvm"):
        assert both[m]["error"].shape == (3,) and np.all(np.isfinite(both[m]["error"]))
    assert np.mean(both["arvm"]["n_relevant"]) < np.mean(both["rvm"]["n_relevant"])


# ------------------------------------------------------------------------------------------- failures named
@pytest.mark.parametrize("kwargs, name", [
    (dict(a="1"), "a"), (dict(width_range=None), "width_range"), (dict(width_range="ab"), "width_range"),
    (dict(width_range=(0.1, 0.2, 0.3)), "width_range"), (dict(width_range=(0.1, "x")), "width_range"),
    (dict(kernel="diag", feature_selection=1), "feature_selection"), (dict(n_basis=True), "n_basis"),
    (dict(sparsity=None), "sparsity"), (dict(min_width=None), "min_width")])
def test_model_options_of_a_wrong_type_name_the_option(kwargs, name):
    # a="1" and width_range=None raised TypeErrors, width_range="ab" numpy's conversion error, feature_selection=1
    # and n_basis=True were accepted
    with pytest.raises(ValueError, match=f"ARVM: {name}"):
        ARVM(**kwargs)


def test_predict_refuses_a_fit_made_with_other_options(doppler):
    fit = bz.fit(ARVM(n_basis=4), doppler, "arvm", draws=5, chains=1, progress=False, max_iter=3)
    for other in (ARVM(n_basis=4, sparsity="aic"), ARVM(n_basis=4, task="classification")):
        for method in (other.predict, other.latent_mean, other.predict_draws):
            with pytest.raises(ValueError, match="other ARVM options"):
                method(fit, doppler.X)
    with pytest.raises(ValueError, match="NaN"):
        ARVM(n_basis=4).predict(fit, np.array([[np.nan]]))
    with pytest.raises(ValueError, match="1 column"):
        ARVM(n_basis=4).latent_mean(fit, np.zeros((2, 3)))


@pytest.mark.timeout(60)
def test_cost_guard_refuses_a_problem_far_beyond_the_rest():
    # n = 20, d = 1000 ran for more than 10 minutes at 1.6 GB without progress or warning
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 1000))
    data = bz.datasets.Dataset(X, np.sin(X[:, 0]), name="wide", meta={"task": "regression"})
    with pytest.raises(ValueError, match=r"predicted to take about .* beyond max_cost = 10 s.*max_cost=100"):
        bz.fit(ARVM(), data, "arvm", progress=False)
    # d = 50 is within the limit (about a second predicted per iteration)
    cand, joint = L.predicted_seconds(ARVM(), 20, 50, L.DEFAULT_OPTIONS, 1)
    assert cand + joint < 1.0


def test_cost_guard_caps_the_bases_of_the_joint_step(doppler):
    opts = {**L.DEFAULT_OPTIONS, "n_candidates": 10, "candidate_iter": 2, "max_iter": 20}
    model = ARVM()
    two = sum(L.predicted_seconds(model, doppler.n, 1, opts, 2))
    three = sum(L.predicted_seconds(model, doppler.n, 1, opts, 3))
    fit = bz.fit(model, doppler, "arvm", draws=5, chains=1, progress=False,
                 **{k: opts[k] for k in ("n_candidates", "candidate_iter", "max_iter")}, max_cost=(two + three) / 2)
    assert fit.info["n_relevant"] <= 2
    assert any("stopped adding bases at 2" in w and "max_cost" in w for w in fit.info["warnings"])


@pytest.mark.timeout(60)
def test_candidate_bfgs_update_costs_p_squared():
    # the inverse-Hessian update was an einsum over five indices, B P^4 operations (hours for P = 1001)
    B, P = 4, 301
    rng = np.random.default_rng(0)
    A = rng.normal(size=(P, P)) / np.sqrt(P)
    H = A @ A.T + np.eye(P)
    x0 = rng.normal(size=(B, P))

    def fun(x, grad):
        Hx = x @ H
        return 0.5 * np.sum(x * Hx, 1), (Hx if grad else None)

    x, f = L.batched_bfgs(fun, x0, 30)
    assert np.all(f < 1e-3 * fun(x0, False)[0])


@pytest.mark.parametrize("scale_X, scale_y", [(2.0**-100, 1.0), (2.0**100, 1.0), (1.0, 2.0**-40), (1.0, 2.0**133),
                                             (2.0**-27, 2.0**30)])
def test_algorithm_1_is_scale_free(doppler, scale_X, scale_y):
    # targets of 1e-12 or inputs of 1e-30 learned no basis at all (absolute thresholds inside Algorithm 1); with
    # scales that are powers of two the rescaled run is the same computation, so the fits agree to rounding
    small = dict(n_candidates=20, candidate_iter=5, joint_iter=20, max_iter=30, draws=5, chains=1, progress=False)
    # targets of root mean square near 1: the ones Algorithm 1 sees after rescaling by a power of two
    base = bz.datasets.Dataset(doppler.X, 2 * doppler.y, doppler.X_test, 2 * doppler.y_test, name="base",
                               meta={"task": "regression"})
    ref = bz.fit(ARVM(), base, "arvm", **small)
    data = bz.datasets.Dataset(base.X * scale_X, base.y * scale_y, base.X_test * scale_X, base.y_test * scale_y,
                               name="scaled", meta={"task": "regression"})
    fit = bz.fit(ARVM(), data, "arvm", **small)
    assert fit.info["n_relevant"] == ref.info["n_relevant"] >= 1
    assert any("divided by" in w for w in fit.info["warnings"])
    np.testing.assert_allclose(ARVM().predict(fit, data.X_test), ARVM().predict(ref, base.X_test) * scale_y,
                               rtol=1e-9, atol=1e-12 * scale_y)
    obj = fit.idata.objective["objective"].values[-1]
    assert obj == pytest.approx(ref.idata.objective["objective"].values[-1] - base.n * np.log(scale_y), rel=1e-9)


def test_inputs_beyond_double_precision_are_refused(doppler):
    with pytest.raises(ValueError, match="training inputs X reach"):
        bz.fit(ARVM(), bz.datasets.Dataset(doppler.X * 1e300, doppler.y, name="big", meta={}), "arvm", progress=False)
    with pytest.raises(ValueError, match="regression targets y reach"):
        bz.fit(ARVM(), bz.datasets.Dataset(doppler.X, doppler.y * 1e-300, name="tiny", meta={}), "arvm",
               progress=False)
    two = np.column_stack([doppler.X[:, 0], 1e-12 * doppler.X[:, 0]])
    with pytest.raises(ValueError, match="input column 1 spans"):
        bz.fit(ARVM(), bz.datasets.Dataset(two, doppler.y, name="two", meta={}), "arvm", progress=False)


def test_noise_free_interpolation_keeps_beta_finite():
    # one point (or noise-free targets): the ML noise precision was infinite, numpy's LinAlgError followed
    one = bz.datasets.Dataset(np.array([[0.0]]), np.array([0.0125]), name="one", meta={"task": "regression"})
    fit = bz.fit(ARVM(), one, "arvm", draws=5, chains=1, progress=False, n_candidates=5, max_iter=4)
    assert np.isfinite(fit.posterior.log_beta.values).all()


@pytest.mark.slow
def test_boston_protocol_keeps_its_recorded_accuracy():
    # the quick protocol check of benchmarks/bench_arvm.py (--protocol --quick): the aRVM's nested CV on 150 Boston
    # points, with the default (feasible) joint step and the paper's (unbounded) one. Each one's MSE and relevance
    # vectors must stay within its recorded tolerances, which are set from the spread of the same figures over
    # candidate seeds (docs/families/arvm.md, "The protocol's figures and their spread"): a rounding change moves
    # them like a new seed, a loss of accuracy moves them further
    import bench_arvm as bench      # benchmarks/ is on the path (pyproject.toml)

    res = bench.run_protocol(quick=True)
    assert res["n"] == 150 and set(res["algorithms"]) == {"feasible", "unbounded"}
    for joint_step, run in res["algorithms"].items():
        record = bench.PROTOCOL_RECORD[joint_step]["quick"]
        assert len(run["fold_mse"]) == 3
        assert abs(run["mse"] - record["mse"]) <= record["mse_tol"], (joint_step, run["mse"], record)
        assert abs(run["n_relevant"] - record["n_relevant"]) <= record["n_relevant_tol"], (joint_step, run, record)
