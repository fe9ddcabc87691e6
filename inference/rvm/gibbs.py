"""``gibbs``: conjugate Gibbs sampler for the RVM (digest §1.7 "Gibbs conditionals").

Regression, one sweep:
    w | alpha, beta, t  ~ N(mu, Sigma), Sigma = (beta Phi^T Phi + A)^-1, mu = beta Sigma Phi^T t   [T 2.13-2.14]
    alpha_i | w_i       ~ Gamma(a + 1/2, b + w_i^2 / 2)
    beta | w, t         ~ Gamma(c + N/2, d + |t - Phi w|^2 / 2)          (Gamma on beta, not sigma^2 [T 2.7])
Probit classification (``RVM(task="classification", link="probit")``), Albert-Chib augmentation:
    z_n | w ~ N(phi_n^T w, 1) truncated to z_n > 0 if t_n = 1 and z_n < 0 if t_n = 0;
    w | z, alpha ~ N((Phi^T Phi + A)^-1 Phi^T z, (Phi^T Phi + A)^-1); alpha as above.
The logit link has no conjugate augmentation here, so the backend applies to regression and probit only.

A NumPy :class:`~bayeszoo.inference.chains.Kernel` run by :func:`bayeszoo.inference.chains.sample` (seeding,
warm-up, thinning, progress and the non-finite check are the driver's). NumPy, not JAX: a sweep is a few LAPACK
calls either way, and JAX's compilation (seconds, on every cold start) cost more than the whole run. The w draw
uses Phi^T Phi and Phi^T t computed once, so a regression sweep costs one M x M Cholesky (after unit-diagonal
scaling), O(M^2), and O(N M) for the residual |t - Phi w|^2 of the beta draw (formed directly: its expansion
cancels for targets far from zero). When M > 2N the w draw switches to the Bhattacharya, Chakraborty &
Mallick (2016) sampler (one N x N Cholesky). Chains start from dispersed (alpha, beta) around data-based values,
drawn from the chain's generator.

Options: ``thin`` (keep every thin-th sweep), ``fix_alpha`` / ``fix_beta`` (hold alpha (scalar or length-M)
and / or beta fixed at the given values: then w | t is exactly Gaussian, which the tests use), ``init``
(dict with any of ``w``, ``alpha``, ``beta`` to start every chain from).
"""
from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np
from scipy.linalg import cho_solve, qr, solve_triangular
from scipy.special import log_ndtr

from bayeszoo.checks import POSITIVE, POSITIVE_INT, Interval, Numbers
from bayeszoo.inference import chains as chain_driver
from bayeszoo.inference.random_draws import normal_sign_truncated
from bayeszoo.numerics.blas_threads import one_blas_thread
from bayeszoo.registry import Option, register

from .core import memory as rvm_memory


class StartingPoint:
    """The ``init`` option: None or a dict with any of ``w`` (a number or one per basis), ``alpha`` (positive, a
    number or one per basis) and ``beta`` (positive); the lengths are checked against the basis with the data."""

    entries = {"w": Numbers(Interval(float), scalar=True), "alpha": Numbers(POSITIVE, scalar=True), "beta": POSITIVE}

    def __call__(self, who: str, name: str, value):
        if value is None:
            return None
        if not isinstance(value, dict) or set(value) - set(self.entries):
            shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
            raise ValueError(f"{who}: {name} must be None or a dict with keys among 'w', 'alpha', 'beta'; got {shown}")
        return {key: self.entries[key](who, f"{name} entry {key!r}", v) for key, v in value.items()}


OPTIONS = {
    "thin": Option(1, "keep every thin-th sweep", POSITIVE_INT),
    "fix_alpha": Option(None, "hold alpha fixed at this value (a number, or one per basis); None: sample it",
                        Numbers(POSITIVE, scalar=True, none=True)),
    "fix_beta": Option(None, "hold the noise precision beta fixed at this value (regression); None: sample it",
                       Interval(float, 0, None, "neither", none=True)),
    "init": Option(None, "starting point of every chain: a dict with any of 'w', 'alpha', 'beta'; None: dispersed",
                   StartingPoint()),
}


def _applies(model):
    return (not model.is_classifier) or model.link == "probit"


def check(options: dict, model, data, owner: str) -> dict:
    """The per-basis options must have 1 or M entries (M is known only with the data); beta is regression's."""
    M = model.n_basis(data)
    init = options["init"] or {}
    for name, value in (("option 'fix_alpha'", options["fix_alpha"]), ("option 'init' entry 'w'", init.get("w")),
                        ("option 'init' entry 'alpha'", init.get("alpha"))):
        if value is not None and len(value) not in (1, M):
            raise ValueError(f"{owner}: {name} must be a number or {M} numbers (one per basis); "
                             f"got {len(value)}")
    if model.is_classifier:
        for name, given in (("option 'fix_beta'", options["fix_beta"] is not None),
                            ("option 'init' entry 'beta'", "beta" in init)):
            if given:
                raise ValueError(f"{owner}: {name} applies to regression only (classification has "
                                 f"no beta)")
    return options


# ------------------------------------------------------------------------------------------------ kernel
def _chol_sample(rng, Phi, G, alpha, scale, target, Pt):
    """A draw from N(H^-1 rhs, H^-1), H = scale G + diag(alpha) (G = Phi^T Phi), rhs = scale Pt (Pt = Phi^T target).

    Via the Cholesky factor of D^-1 H D^-1 (unit diagonal, D = diag(H)^1/2). Where that fails (H singular to working
    precision: nearly collinear columns of Phi and alphas below rounding against scale G, as under the near-flat
    default prior), from the QR factors of the (N + M) x M matrix A = [sqrt(scale) Phi; diag(sqrt(alpha))]:
    H = A^T A = R^T R without forming A^T A, whose rounding is what made H indefinite."""
    H = scale * G + np.diag(alpha)
    dvec = np.sqrt(np.diag(H))
    try:
        L = np.linalg.cholesky(H / dvec[:, None] / dvec[None, :])
    except np.linalg.LinAlgError:
        return _qr_sample(rng, Phi, alpha, scale, target)
    y = solve_triangular(L, scale * Pt / dvec, lower=True, check_finite=False)
    # mean = D^-1 L^-T L^-1 D^-1 rhs, noise = D^-1 L^-T z: one back-substitution for both
    return solve_triangular(L, y + rng.standard_normal(H.shape[0]), lower=True, trans=1, check_finite=False) / dvec


def _qr_sample(rng, Phi, alpha, scale, target):
    """The draw of :func:`_chol_sample` from A = QR: mean R^-1 Q^T b (least squares, b = [sqrt(scale) target; 0]),
    noise R^-1 z."""
    root = np.sqrt(scale)
    A = np.vstack([root * Phi, np.diag(np.sqrt(alpha))])
    Q, R = qr(A, mode="economic", check_finite=False)
    qb = Q[: Phi.shape[0]].T @ (root * target)
    return solve_triangular(R, qb + rng.standard_normal(R.shape[0]), lower=False, check_finite=False)


def _bhattacharya(rng, Phi_s, alpha, target):
    """Draw from N(Sigma Phi_s^T target, Sigma), Sigma = (Phi_s^T Phi_s + diag(alpha))^-1, in O(N^2 M)."""
    N, M = Phi_s.shape
    dinv = 1.0 / alpha
    u = rng.standard_normal(M) * np.sqrt(dinv)
    v = Phi_s @ u + rng.standard_normal(N)
    K = (Phi_s * dinv[None, :]) @ Phi_s.T + np.eye(N)
    return u + dinv * (Phi_s.T @ cho_solve((np.linalg.cholesky(K), True), target - v, check_finite=False))


class Problem(NamedTuple):
    """The arrays one sweep reads, the start's scales and the user's starting / fixed values."""

    Phi: np.ndarray
    t: np.ndarray
    G: np.ndarray         # Phi^T Phi
    Pt: np.ndarray        # Phi^T t
    hyper: tuple          # a, b, c, d
    probit: bool
    woodbury: bool        # M > 2N: the w draw by Bhattacharya et al.
    alpha_scale: float
    beta_scale: float
    init: dict
    fix_alpha: np.ndarray | None
    fix_beta: float | None


class State(NamedTuple):
    w: np.ndarray
    alpha: np.ndarray
    beta: float
    problem: Problem


class Info(NamedTuple):
    """What a sweep reports (sample_stats): the unnormalised log posterior of (w, log alpha, log beta) after it."""

    lp: float


def _init(rng, p: Problem) -> State:
    M = p.Phi.shape[1]
    alpha = p.alpha_scale * np.exp(rng.standard_normal(M))
    beta = p.beta_scale * np.exp(0.5 * rng.standard_normal())
    w = np.zeros(M)
    if "alpha" in p.init:
        alpha = np.broadcast_to(np.asarray(p.init["alpha"], float), (M,)).copy()
    if "beta" in p.init:
        beta = float(p.init["beta"])
    if "w" in p.init:
        w = np.broadcast_to(np.asarray(p.init["w"], float), (M,)).copy()
    if p.fix_alpha is not None:
        alpha = np.broadcast_to(p.fix_alpha, (M,)).copy()
    if p.fix_beta is not None:
        beta = float(p.fix_beta)
    return State(w, alpha, beta, p)


def _step(rng, state: State) -> tuple[State, Info]:
    w, alpha, beta, p = state
    N, M = p.Phi.shape
    a, b, c, d = p.hyper
    if p.probit:
        zlat = normal_sign_truncated(rng, p.Phi @ w, 2.0 * p.t - 1.0)
        w = _bhattacharya(rng, p.Phi, alpha, zlat) if p.woodbury else \
            _chol_sample(rng, p.Phi, p.G, alpha, 1.0, zlat, p.Phi.T @ zlat)
    elif p.woodbury:
        sb = np.sqrt(beta)
        w = _bhattacharya(rng, sb * p.Phi, alpha, sb * p.t)
    else:
        w = _chol_sample(rng, p.Phi, p.G, alpha, beta, p.t, p.Pt)
    if p.fix_alpha is None:
        alpha = rng.standard_gamma(a + 0.5, M) / (b + 0.5 * w * w)
    f = p.Phi @ w
    r = p.t - f      # formed directly: t.t - 2 w.Phi^T t + w.G w cancels for targets far from zero
    rr = float(r @ r)
    if not p.probit and p.fix_beta is None:
        beta = rng.standard_gamma(c + 0.5 * N) / (d + 0.5 * rr)
    # log p(t | w, beta) + log N(w | 0, A^-1) + the Gamma densities of log alpha and log beta (constants dropped)
    with np.errstate(divide="ignore"):
        lp = float(np.sum(0.5 * np.log(alpha) - 0.5 * alpha * w * w + a * np.log(alpha) - b * alpha))
    if p.probit:
        lp += float(np.sum(log_ndtr((2.0 * p.t - 1.0) * f)))
    else:
        lp += 0.5 * N * np.log(beta) - 0.5 * beta * rr + c * np.log(beta) - d * beta
    return State(w, alpha, beta, p), Info(lp=lp)


def _position(state: State) -> dict:
    with np.errstate(divide="ignore"):
        out = {"w": state.w, "log_alpha": np.log(state.alpha)}
        if not state.problem.probit:
            out["log_beta"] = np.log(state.beta)
    return out


KERNEL = chain_driver.Kernel(init=_init, step=_step, position=_position)


def sample(Phi, t, hyper, ctx, *, draws, tune, chains, probit=False, thin=1, fix_alpha=None, fix_beta=None,
           init=None, diagnosis: str | None = None) -> chain_driver.Chains:
    """The chains on an explicit design ``Phi`` with hyperparameters ``hyper = (a, b, c, d)``, seeded by the run
    context ``ctx``."""
    Phi = np.ascontiguousarray(Phi, float)
    t = np.asarray(t, float)
    N, M = Phi.shape
    G = Phi.T @ Phi
    var_t = float(np.var(t)) if (not probit and np.var(t) > 0) else 1.0
    problem = Problem(Phi, t, G, Phi.T @ t, tuple(float(h) for h in hyper), bool(probit), M > 2 * N,
                      float(np.mean(np.diag(G))) / N / var_t, 10.0 / var_t, dict(init or {}),
                      None if fix_alpha is None else np.asarray(fix_alpha, float),
                      None if fix_beta is None else float(fix_beta))
    with one_blas_thread(min(N, M)):
        return chain_driver.sample(KERNEL, problem, ctx, draws=draws, tune=tune, chains=chains, thin=thin, desc="gibbs",
                                   **({"diagnosis": diagnosis} if diagnosis else {}))


def gibbs_sample(Phi, t, hyper, ctx, **kwargs) -> dict:
    """:func:`sample`'s draws as arrays (chains, draws, ...) by variable, with ``timing`` and ``sweeps``."""
    res = sample(Phi, t, hyper, ctx, **kwargs)
    return {**res.posterior, "timing": res.timing, "sweeps": res.sweeps}


def _singular_precision(model) -> str:
    """Why a chain of this model leaves double precision, and what to do."""
    return (f"the conditional precision of w, {'Phi^T Phi' if model.is_classifier else 'beta Phi^T Phi'} + "
            f"diag(alpha), became singular to working precision. This happens when the weight prior is nearly flat "
            f"(here a = {model.a:g}, b = {model.b:g}; some alpha_i then fall below rounding) while kernel columns are "
            f"nearly collinear (here the {model._kernel_text()}). Use a proper weight prior such as RVM(a=1, b=1e-2) "
            f"for sampling, or a kernel that varies more between the inputs")


@register("gibbs", kind="mcmc", family="rvm", applies=_applies, options=OPTIONS, check=check,
          memory=rvm_memory(4.5),
          description="conjugate Gibbs sampler; Albert-Chib for probit classification")
def run(model, data, *, draws, tune, chains, ctx, **opts):
    """Conjugate Gibbs: w | alpha, beta Gaussian; alpha_i, beta Gamma; probit via Albert-Chib."""
    t0 = time.perf_counter()
    Phi = model.training_design(data)
    setup = time.perf_counter() - t0
    res = sample(Phi, data.y, (model.a, model.b, model.c, model.d), ctx, draws=draws, tune=tune, chains=chains,
                 probit=model.is_classifier, thin=opts["thin"], fix_alpha=opts["fix_alpha"],
                 fix_beta=opts["fix_beta"], init=opts["init"],
                 diagnosis=_singular_precision(model))
    info = {"thin": opts["thin"], "w_sampler": "bhattacharya" if Phi.shape[1] > 2 * Phi.shape[0] else "cholesky",
            "fixed": [k for k in ("fix_alpha", "fix_beta") if opts[k] is not None]}
    return chain_driver.chains_fit(model, data, res, ctx=ctx, info=info, setup=setup)
