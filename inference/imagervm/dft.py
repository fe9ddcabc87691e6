"""``dft``: the DFT-domain multikernel RVM ("DFT-RVM", Tzikas PhD §4.2; digest §4.1-4.2).

Type-II maximum likelihood (MAP with the model's Gamma hyperpriors) of the weight precisions alpha_mi and the
noise precision beta by the fixed-point updates, repeated until no log-precision moves by more than ``tol``:

1. posterior mean: solve (beta Phi^T Phi + A) mu = beta Phi^T t (4.19-4.20) by conjugate gradients, every
   product with Phi / Phi^T done in the DFT domain (4.17-4.18), Jacobi-preconditioned by the diagonal
   approximation and warm-started at the previous mu;
2. diag(Sigma) by ``approx``: ``"diagonal"`` (4.22) 1 / (beta |phi_m|^2 + alpha_i), ``"circulant"`` (4.23, digest
   reading) the diagonal of (beta Phi_m^T Phi_m + alpha_i I)^-1, or ``"exact"`` (dense Cholesky of the
   precision, small images only: the reference; the mean then comes from the same factorisation);
3. gamma_i = 1 - alpha_i Sigma_ii; alpha_i = (gamma_i + 2a) / (mu_i^2 + 2b) (4.15; a = b = 0 is the thesis's) and
   beta = (N - sum_i gamma_i + 2c) / (|t - Phi mu|^2 + 2d) (4.16, corrected: the sum runs over all MN weights).
   The approximations understate Sigma_ii, so sum gamma can exceed N and (4.16) turn negative; then the EM step
   beta = (N + 2c) / (|t - Phi mu|^2 + sum gamma / beta + 2d) is taken instead (counted in ``beta_em_steps``);
4. a weight whose alpha exceeds ``prune_alpha`` (1e12, as the RVM) is pruned: w = 0, left out of the solves.

The same initial values as the RVM's ``em`` (alpha = mean |phi|^2 / (N var t), beta = 10 / var t), so with
``approx="exact"`` the iterates are those of ``em`` on the dense design (a test). The thesis gives neither the
initial values nor the stopping rule. Traced in the ``objective`` group: ``log_evidence``, log N(t | 0,
beta^-1 I + Phi A^-1 Phi^T), and ``objective``, the log evidence plus the log hyperpriors (what the updates
maximise, ``fit.info["objective"]``), with log|beta Phi^T Phi + A| exact for ``"exact"`` and approximated by
-sum log Sigma_ii for the two approximations (the thesis traces nothing; treat those traces as indicative only).
The fit's ``w`` draws come from N(mu, Sigma) for ``"exact"`` and from N(mu, diag(Sigma_approx)) otherwise (the
approximations carry no correlations), or all sit at mu with ``w_draws="mean"``; ``log_alpha`` and ``log_beta``
are constant at the estimates.
"""
from __future__ import annotations

import math
import time
import warnings
from typing import NamedTuple

import numpy as np

from bayeszoo import registry
from bayeszoo.checks import POSITIVE, POSITIVE_INT, Interval, OneOf
from bayeszoo.inference.approximations import GaussianApproximation, PointEstimate, approximation_fit
from bayeszoo.inference.iterative import Algorithm, iterate
from bayeszoo.inference.rvm import core as rvm_core
from bayeszoo.models.rvm import LOG_ALPHA_PRUNED
from bayeszoo.numerics import allocator
from bayeszoo.numerics import fft as _fft
from bayeszoo.registry import Option, register
from bayeszoo.memory_guard import Need, dense

from .operators import ImageDesign

APPROXIMATIONS = ("diagonal", "circulant", "exact")
W_DRAWS = ("gaussian", "mean")
EXACT_MAX_WEIGHTS = 4096          # "exact" factorises the dense MN x MN posterior precision
POSITIVE_OR_NONE = Interval(float, 0, None, "neither", none=True)
OPTIONS = {
    "approx": Option("diagonal", "diag(Sigma) by 'diagonal' (4.22), 'circulant' (4.23) or 'exact' (dense Cholesky, "
                                 f"at most {EXACT_MAX_WEIGHTS} weights)", OneOf(APPROXIMATIONS)),
    "max_iter": Option(200, "largest number of fixed-point iterations", POSITIVE_INT),
    "tol": Option(1e-3, "stop when no log precision (alpha or beta) moves by more than this", POSITIVE),
    "prune_alpha": Option(1e12, "a weight whose precision alpha exceeds this is pruned (w = 0)", POSITIVE),
    "cg_tol": Option(1e-6, "relative residual at which the conjugate-gradient solve for the mean stops", POSITIVE),
    "cg_max_iter": Option(500, "largest number of conjugate-gradient iterations per solve", POSITIVE_INT),
    "init_alpha": Option(None, "initial alpha of every weight (None: mean |phi_m|^2 / (N var t))", POSITIVE_OR_NONE),
    "init_beta": Option(None, "initial noise precision beta (None: 10 / var t)", POSITIVE_OR_NONE),
    "max_draw_values": Option(5e7, "largest chains x draws x weights the fit may hold; more is refused before work",
                              POSITIVE),
    "w_draws": Option("gaussian", "draws of w: 'gaussian' from the posterior (diagonal for the approximations) or "
                                  "'mean' (every draw at the posterior mean mu)", OneOf(W_DRAWS)),
}
DEFAULT_DRAW_VALUES = 5_000_000   # chains x draws x weights of a run whose counts are not given (40 MB of float64)
MAX_DEFAULT_DRAWS = 1000
LOG_2PI = math.log(2.0 * math.pi)


def check(options: dict, model, data, owner: str) -> dict:
    """``approx="exact"`` factorises the dense MN x MN posterior precision: at most EXACT_MAX_WEIGHTS weights."""
    R, C = model.image_shape(data)
    if options["approx"] == "exact" and model.n_kernels * R * C > EXACT_MAX_WEIGHTS:
        raise ValueError(f"{owner}: approx='exact' factorises the dense {model.n_kernels * R * C} x "
                         f"{model.n_kernels * R * C} posterior precision; at most {EXACT_MAX_WEIGHTS} weights (kernels "
                         f"x pixels) are allowed, use 'diagonal' or 'circulant'")
    return options


#: arrays of the weights' size alive at an iteration's peak (real and complex FFTs of every kernel's weights, the CG
#: vectors, alpha, the diagonal of Sigma), counted on the code path
WORKING_ARRAYS = 40


def memory(model, data, options) -> Need:
    """The working memory (``bayeszoo.memory_guard``): :data:`WORKING_ARRAYS` arrays of the kernels x pixels weights;
    ``approx="exact"`` also factorises their dense posterior precision."""
    R, C = model.image_shape(data)
    weights = model.n_kernels * R * C
    parts = {f"{WORKING_ARRAYS} arrays of the {model.n_kernels} x {R} x {C} weights": dense(1, weights, WORKING_ARRAYS)}
    if options["approx"] == "exact":
        parts[f"dense posterior precision, its factor and inverse ({weights:,} x {weights:,}, 4 matrices)"] = \
            dense(weights, weights, 4)
    return Need(parts, "ask for fewer draws (draws of w hold every weight), or approx 'diagonal' or 'circulant'")


def default_counts(model, data) -> dict:
    """One chain of i.i.d. draws, as many as fit DEFAULT_DRAW_VALUES weights (at most MAX_DEFAULT_DRAWS); no warm-up."""
    R, C = model.image_shape(data)
    draws = int(min(MAX_DEFAULT_DRAWS, max(1, DEFAULT_DRAW_VALUES // (model.n_kernels * R * C))))
    return {"draws": draws, "tune": 0, "chains": 1}


class DFTResult(NamedTuple):
    """The DFT-RVM's estimates and traces on one image (R, C) with M kernels.

    mu
        The posterior mean weights (M, R, C), 0 where pruned.
    sigma_diag
        The posterior variances of the weights, diag Sigma (M, R, C; the ``approx`` of them), 0 where pruned.
    alpha
        The weights' prior precisions (M, R, C), inf where pruned.
    beta
        The noise precision.
    active
        The mask (M, R, C) of the weights kept.
    restored
        The restored image Phi mu (R, C).
    log_evidence
        The log evidence after each iteration, the first at the start.
    objective
        The trace of J (the log evidence plus the log hyperprior), as ``log_evidence``.
    iterations
        The iterations made.
    converged
        Whether the tolerance was met before ``max_iter``.
    cg_iterations
        The conjugate-gradient iterations of all the mean solves.
    beta_em_steps
        The iterations whose beta update fell back to an EM step (only with the approximations of diag Sigma).
    chol_cov
        With ``approx="exact"``: (the flat indices of the active weights, their Gaussian posterior with
        ``chol_cov()``); None otherwise.
    approx
        The approximation of diag Sigma used.
    """

    mu: np.ndarray
    sigma_diag: np.ndarray
    alpha: np.ndarray
    beta: float
    active: np.ndarray
    restored: np.ndarray
    log_evidence: np.ndarray
    objective: np.ndarray
    iterations: int
    converged: bool
    cg_iterations: int
    beta_em_steps: int
    chol_cov: tuple | None
    approx: str


def dft_rvm(model, image: np.ndarray, options: dict | None = None, progress: bool = False) -> DFTResult:
    """Run the DFT-RVM on one observed image (R, C) with ``options`` (the ``dft`` backend's, checked as ``bz.fit``
    does): the estimates and traces, a :class:`DFTResult`."""
    from bayeszoo.datasets.bid_data import image_problem

    data = image_problem(image, name="observed image")
    backend = registry.get(model, "dft")
    options = backend.resolve(dict(options or {}), model, data)
    return _dft_rvm(model, model.observed_image(data), options, progress, backend.owner)


class DFTState(NamedTuple):
    """The estimates after an iteration: ``alpha`` (M, R, C; inf on pruned weights), ``beta``, the ``active``
    weights, the posterior mean ``mu`` and variances ``sd`` (0 on pruned weights), log|H| ``logdet_H``, the
    residual ``resid`` = t - Phi mu and its squared norm ``rr``; with ``approx="exact"`` the active indices and their Gaussian
    (``chol_cov``); the conjugate-gradient iterations so far (``cg_iterations``) and the EM steps for beta
    (``beta_em_steps``); ``objective``, J, and the ``log_evidence`` after each iteration (the first at the start)."""

    alpha: np.ndarray
    beta: float
    active: np.ndarray
    mu: np.ndarray
    sd: np.ndarray
    logdet_H: float
    resid: np.ndarray
    rr: float
    chol_cov: tuple | None
    cg_iterations: int
    beta_em_steps: int
    objective: float
    log_evidence: tuple


class DFTInfo(NamedTuple):
    """One iteration: J after it and ``change``, the largest change of a log alpha or of log beta."""

    objective: float
    change: float


def dft_iterations(model, t: np.ndarray, opts: dict) -> Algorithm:
    """The DFT-RVM's type-II updates of alpha and beta (module docstring) on the observed image ``t``; ``init``
    takes None."""
    shape = t.shape
    design = ImageDesign(model.kernel_images(shape))
    M, N = design.M, design.N
    exact = opts["approx"] == "exact"
    a, b, c, d = (float(v) for v in (model.a, model.b, model.c, model.d))
    Pt = design.adjoint(t)                                        # Phi^T t
    if exact:
        Phi = model.dense_design(shape)
        G, Pt_flat = Phi.T @ Phi, Phi.T @ t.ravel()

    def posterior(alpha, beta, active, mu0):
        """mu, diag Sigma (0 on pruned weights), log|beta Phi^T Phi + A| over the active weights, the exact
        posterior (or None) and the conjugate-gradient iterations it took."""
        if exact:
            idx = np.flatnonzero(active.ravel())
            H = beta * G[np.ix_(idx, idx)]
            H[np.diag_indices(idx.size)] += alpha.ravel()[idx]
            post = rvm_core.Gaussian(H, beta * Pt_flat[idx])
            mu_new, sd = np.zeros(M * N), np.zeros(M * N)
            mu_new[idx], sd[idx] = post.mu, np.diag(post.Sigma)
            return mu_new.reshape(alpha.shape), sd.reshape(alpha.shape), post.logdet_H, (idx, post), 0
        alpha_act = np.where(active, alpha, 0.0)
        jacobi = np.where(active, 1.0 / (beta * design.norms2[:, None, None] + alpha_act), 0.0)
        flat = (M * shape[0], shape[1])                           # one vector for pcg's inner products

        def apply_H(x):
            x = x.reshape(alpha.shape)
            return (np.where(active, beta * design.normal(x), 0.0) + alpha_act * x).reshape(flat)

        x, its, _ = _fft.pcg(apply_H, np.where(active, beta * Pt, 0.0).reshape(flat),
                             lambda r: (jacobi.reshape(flat) * r), np.where(active, mu0, 0.0).reshape(flat),
                             max_iter=opts["cg_max_iter"], tol=opts["cg_tol"])
        mu_new = np.where(active, x.reshape(alpha.shape), 0.0)
        if opts["approx"] == "diagonal":
            sd = design.sigma_diagonal(alpha_act, beta)
        else:
            sd = design.sigma_circulant(np.where(active, alpha, np.min(alpha[active])), beta)
        sd = np.where(active, sd, 0.0)
        return mu_new, sd, -float(np.sum(np.log(sd[active]))), None, int(its)

    def estimates(alpha, beta, active, mu0, cg_iterations, beta_em_steps, log_evidence):
        """The state at (alpha, beta, active): the posterior, the residual, the log evidence and J."""
        mu, sd, logdet_H, chol_cov, its = posterior(alpha, beta, active, mu0)
        resid = t - design.forward(mu)
        rr = float(np.sum(resid**2))
        al = alpha[active]
        # log N(t | 0, C): log|C| = log|H| - N log beta - sum log alpha;  t^T C^-1 t = beta |t - Phi mu|^2 + mu^T A mu
        quad = beta * rr + float(np.sum(al * mu[active] ** 2))
        ev = -0.5 * (N * LOG_2PI + logdet_H - N * math.log(beta) - float(np.sum(np.log(al))) + quad)
        return DFTState(alpha, beta, active, mu, sd, logdet_H, resid, rr, chol_cov, cg_iterations + its, beta_em_steps,
                        ev + rvm_core.log_prior_terms(al, beta, model), log_evidence + (ev,))

    def init(_):
        var_t = float(np.var(t)) or 1.0
        alpha = np.full((M, *shape), float(opts["init_alpha"] or np.mean(design.norms2) / N / var_t))
        beta = float(opts["init_beta"] or 10.0 / var_t)
        return estimates(alpha, beta, np.ones(alpha.shape, dtype=bool), np.zeros(alpha.shape), 0, 0, ())

    def step(s):
        alpha, new_beta, active, beta_em_steps, change = _update_precisions(s, N, (a, b, c, d), opts["prune_alpha"])
        state = estimates(alpha, new_beta, active, s.mu, s.cg_iterations, beta_em_steps, s.log_evidence)
        return state, DFTInfo(state.objective, change)

    return Algorithm(init, step,
                     describe=lambda s, info: f"{int(s.active.sum())} active, beta {s.beta:.3g}")


def _update_precisions(s: DFTState, N: int, prior: tuple, prune_alpha: float):
    """Steps 3 and 4 of the module docstring from the state ``s``: the new alpha (inf where pruned), beta, active
    weights and EM-step count, and ``change``, the largest move of a log alpha or of log beta. ``prior`` is the
    model's Gamma hyperprior parameters (a, b, c, d)."""
    a, b, c, d = prior
    alpha, beta, active, beta_em_steps, rr = s.alpha, s.beta, s.active, s.beta_em_steps, s.rr
    with np.errstate(divide="ignore", invalid="ignore"):     # pruned weights: inf * 0, 0 / 0
        gamma = np.where(active, 1.0 - alpha * s.sd, 0.0)
        new_alpha = (gamma + 2 * a) / (s.mu**2 + 2 * b)                       # (4.15), Gamma prior as [T 2.25]
    new_alpha = np.where(np.isfinite(new_alpha) & (new_alpha > 0), new_alpha, 10 * prune_alpha)
    dof = N - float(np.sum(gamma)) + 2 * c
    if dof > 0:
        new_beta = dof / (rr + 2 * d)                                       # (4.16), corrected: sum over all MN
    else:
        # only with the approximations: Sigma_ii <= true Sigma_ii overstates gamma, and sum gamma can pass N
        # (impossible exactly: it is tr(beta Phi Sigma Phi^T) < N); the EM step for beta stays positive
        new_beta = (N + 2 * c) / (rr + float(np.sum(gamma)) / beta + 2 * d)
        beta_em_steps += 1
    change = max(float(np.max(np.abs(np.log(new_alpha[active]) - np.log(alpha[active])))),
                 abs(math.log(new_beta) - math.log(beta)))
    alpha = np.where(active, new_alpha, np.inf)
    active = active & (alpha <= prune_alpha)
    if not np.any(active):                                                 # keep the most relevant weight
        keep = np.unravel_index(np.argmin(new_alpha), alpha.shape)
        active[keep], alpha[keep] = True, new_alpha[keep]
    return alpha, new_beta, active, beta_em_steps, change


def _dft_rvm(model, image: np.ndarray, opts: dict, progress: bool, owner: str) -> DFTResult:
    from bayeszoo.datasets.bid_data import check_image, check_intensities
    from bayeszoo.models.imagervm import ZERO_IMAGE

    t = check_image(image, "observed image")
    check_intensities(t, "ImageRVM: the observed image", zero=ZERO_IMAGE)
    model.check_kernels_fit(t.shape)
    allocator.keep_temporaries_on_the_heap()     # image-sized temporaries in every CG product
    run = iterate(dft_iterations(model, t, opts), None, max_iter=opts["max_iter"], tol=opts["tol"],
                  progress=progress, desc=f"dft-rvm ({opts['approx']})", owner=owner)
    s = run.state
    return DFTResult(mu=s.mu, sigma_diag=s.sd, alpha=np.where(s.active, s.alpha, np.inf), beta=s.beta,
                     active=s.active, restored=t - s.resid, log_evidence=np.array(s.log_evidence), objective=run.trace,
                     iterations=run.iterations, converged=run.converged, cg_iterations=s.cg_iterations,
                     beta_em_steps=s.beta_em_steps, chol_cov=s.chol_cov, approx=opts["approx"])


def approximation(res: DFTResult, w_draws: str) -> GaussianApproximation | PointEstimate:
    """The posterior of the weights at the estimates: N(mu, Sigma) (exact) or N(mu, diag Sigma_approx), 0 on the
    pruned weights; a point estimate at mu with ``w_draws="mean"``; log_alpha and log_beta fixed."""
    mu, active = res.mu, res.active
    log_alpha = np.where(active, np.minimum(np.log(res.alpha), LOG_ALPHA_PRUNED), LOG_ALPHA_PRUNED)
    fixed = {"log_alpha": log_alpha, "log_beta": math.log(res.beta)}
    common = dict(log_evidence=float(res.log_evidence[-1]), objective_name="objective",
                  objective={"log_evidence": res.log_evidence, "objective": res.objective},
                  iterations=res.iterations, converged=res.converged)
    if w_draws == "mean":
        return PointEstimate({"w": mu, **fixed}, **common)
    if res.chol_cov is None:
        return GaussianApproximation("w", mu, var=res.sigma_diag, fixed=fixed, **common)
    idx, post = res.chol_cov
    factor = np.zeros((mu.size, idx.size))
    factor[idx] = post.chol_cov()
    return GaussianApproximation("w", mu, factor=factor, fixed=fixed, **common)


@register("dft", kind="approximation", family="imagervm", options=OPTIONS, check=check, defaults=default_counts,
          memory=memory,
          description="DFT-RVM: type-II ML of alpha, beta with Fourier-domain CG means and diagonal / circulant / exact "
                      "diag(Sigma)")
def run(model, data, *, draws, tune, chains, ctx, **opts):
    """DFT-domain multikernel RVM (Tzikas PhD §4.2): point estimates of alpha, beta; Gaussian draws of w."""
    R, C = model.image_shape(data)
    size = chains * draws * model.n_kernels * R * C
    if size > opts["max_draw_values"]:
        raise ValueError(f"{chains} chains x {draws} draws of {model.n_kernels} x {R} x {C} weights would store "
                         f"{size:.3g} values (max_draw_values={opts['max_draw_values']:.3g}); ask for fewer draws, "
                         f"e.g. draws=10, chains=1, for large images")
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = _dft_rvm(model, model.observed_image(data), opts, ctx.progress, ctx.owner)
    seconds = time.perf_counter() - t0
    info = {"approx": opts["approx"], "n_active": int(res.active.sum()), "cg_iterations": res.cg_iterations,
            "beta_em_steps": res.beta_em_steps, "seconds_per_iteration": seconds / max(res.iterations, 1)}
    return approximation_fit(model, data, approximation(res, opts["w_draws"]), ctx=ctx, draws=draws, chains=chains,
                             timing={"tune": seconds},
                             limit=f"{opts['max_iter']} iterations", info=info)
