"""``gibbs``: the conditionally conjugate Gibbs sampler of the BID model (digest §9.5; the MCMC analogue of §5.5).

One sweep of a chain draws
* alpha | w, beta | f, w, gamma | f from their Gamma conditionals in closed form
  (Gamma(a + 1/2, b + x_i^2/2) per element for Student-t priors; Gamma(a + n/2, b + |x|^2/2) for Gaussian ones);
* f | w, beta, gamma ~ N(A_f^-1 H^T B g, A_f^-1), A_f = H^T B H + sum_k Q^kT Gamma^k Q^k, and
  w | f, beta, alpha ~ N(A_w^-1 Phi^T F^T B g, A_w^-1), A_w = Phi^T F^T B F Phi + A (on the weight support), each by
  perturb-and-solve: the right-hand side gets H^T B^(1/2) z_1 + sum_k Q^kT Gamma^k^(1/2) z_2k (resp.
  Phi^T F^T B^(1/2) z_1 + A^(1/2) z_2), z ~ N(0, I), so the exact solution is an exact draw (Papandreou & Yuille
  2010). The systems are solved by PCG in the Fourier domain, preconditioned by the circulant projection of A_f
  and by the diagonal of A_w (the thesis's Sigma_f, Sigma_w approximations, 5.47-5.48), to ``cg_tol``.
* (option ``scale_move``, default on) an exact move along the scale-exchange orbit (f, w) -> (e^s f, e^-s w), on
  which the likelihood is constant and the Gibbs blocks crawl (f and w each conditioned on the other): s is drawn by
  slice sampling (Neal 2003) from the posterior of (f, w) with the precisions integrated out, restricted to the
  orbit, times the Jacobian e^{(M - P) s} (Liu & Sabatti 2000's group move for the additive group of s). The
  precisions are drawn afresh from their conditionals right after, so the sweep leaves the joint invariant.
With the PSF known (``BID(psf="known")``) a sweep is the precisions beta, gamma and f alone, with H the given
PSF's convolution: there are no weights, no alpha and no scale orbit (``scale_move`` has nothing to move).
Hyperparameters are the model's (fixed). A chain starts at the thesis's initial point (f = g, w fitted to h_in)
with a small random jitter. The conditionals take images with any leading batch axes (many chains at once, as the
tests use them); :func:`kernel` makes them the chain driver's kernel (``inference.chains``: seeding, warm-up,
thinning, progress, timing), whose Info, the CG iterations of each sweep's two solves, becomes ``sample_stats``.
"""
from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from bayeszoo.checks import POSITIVE, POSITIVE_INT, Flag, Interval
from bayeszoo.inference.chains import Kernel, chains_fit, sample
from bayeszoo.numerics import allocator
from bayeszoo.numerics import fft as _fft
from bayeszoo.registry import Option, register

from . import common as C

SLICE_WIDTH = 0.1      # initial bracket of the slice sampler in s = log scale (stepped out as needed)
SLICE_STEPS = 1000     # at most this many widths of stepping out (a factor e^100 in scale)
MAX_JITTER = 10.0      # largest start perturbation: exp(jitter z) of the weights stays finite

OPTIONS = {
    "thin": Option(1, "keep every thin-th sweep after warm-up", POSITIVE_INT),
    "cg_max_iter": Option(500, "largest number of conjugate-gradient iterations per perturb-and-solve draw",
                          POSITIVE_INT),
    "cg_tol": Option(1e-8, "relative residual at which a conjugate-gradient solve stops (the draw is exact at 0)",
                     POSITIVE),
    "jitter": Option(0.01, "scale of the random perturbation of each chain's start (f in intensity units, w on "
                           "the log scale)", Interval(float, 0, MAX_JITTER, "right")),
    "scale_move": Option(True, "add the exact move along the scale orbit (f, w) -> (e^s f, e^-s w) to every sweep "
                               "(blind only: with the PSF known there is no orbit)", Flag()),
}


class GibbsState(NamedTuple):
    """One chain: the image f and the PSF weights w (None with the PSF known; the precisions are drawn afresh every
    sweep), and running counts of the CG iterations of the f and w solves and of the solves that stopped at
    ``cg_max_iter``."""

    f: np.ndarray
    w: np.ndarray | None
    cg_total_f: int = 0
    cg_total_w: int = 0
    cg_at_limit: int = 0


class GibbsInfo(NamedTuple):
    """The CG iterations of one sweep's f and w solves."""

    cg_iterations_f: int
    cg_iterations_w: int


# ------------------------------------------------------------------------------------------- conditionals
def _gamma_draws(rng, a, b, x2, per_element: bool, count: int):
    """Precision draws: per element Gamma(a + 1/2, b + x^2/2), or one per image Gamma(a + n/2, b + sum x^2/2)."""
    if per_element:
        return rng.gamma(a + 0.5, 1.0 / (b + 0.5 * x2))
    rate = b + 0.5 * x2.sum(axis=(-2, -1))
    return np.broadcast_to(np.asarray(rng.gamma(a + 0.5 * count, 1.0 / rate))[..., None, None], x2.shape)


def draw_precisions(rng, p: C.Problem, f, w):
    """(alpha, beta, gammas): alpha | w, beta | f, w, gamma | f from their Gamma conditionals (alpha None with the
    PSF known)."""
    alpha = None if p.known else np.where(
        p.mask, _gamma_draws(rng, p.a_alpha, p.b_alpha, np.where(p.mask, w**2, 0.0), p.psf_prior == "St", p.P), 1.0)
    resid = p.g - _fft.irfft2(_fft.rfft2(f) * p.otf(w), p.shape)
    beta = _gamma_draws(rng, p.a_beta, p.b_beta, resid**2, p.noise_prior == "St", p.M)
    gammas = [_gamma_draws(rng, p.a_gamma, p.b_gamma, _fft.apply_stencil(f, s) ** 2, p.image_prior == "St", p.M)
              for s in p.q_stencils]
    return alpha, beta, gammas


def draw_f(rng, p: C.Problem, f, w, beta, gammas, *, cg_max_iter: int, cg_tol: float):
    """(f, CG iterations): f | w, beta, gamma by perturb-and-solve (circulant-preconditioned CG) from ``f``; the
    given PSF's with the PSF known (``w`` unused)."""
    h_hat = p.otf(w)
    h_hat_conj = np.conj(h_hat)
    shape = f.shape

    def apply_f(v):
        out = _fft.irfft2(h_hat_conj * _fft.rfft2(beta * _fft.irfft2(_fft.rfft2(v) * h_hat, p.shape)), p.shape)
        for s, gk in zip(p.q_stencils, gammas):
            out += _fft.adjoint_stencil(gk * _fft.apply_stencil(v, s), s)
        return out

    rhs = _fft.corr(beta * p.g + np.sqrt(beta) * rng.standard_normal(shape), h_hat)
    for s, gk in zip(p.q_stencils, gammas):
        rhs += _fft.adjoint_stencil(np.sqrt(gk) * rng.standard_normal(shape), s)
    eig = (beta.mean((-2, -1))[..., None, None] * np.abs(h_hat) ** 2
           + sum(gk.mean((-2, -1))[..., None, None] * np.abs(q) ** 2 for q, gk in zip(p.q_hats, gammas)))
    f, its, _ = _fft.pcg(apply_f, rhs, lambda r: _fft.irfft2(_fft.rfft2(r) / eig, p.shape), f,
                         max_iter=cg_max_iter, tol=cg_tol)
    return f, its


def draw_w(rng, p: C.Problem, f, w, beta, alpha, *, cg_max_iter: int, cg_tol: float):
    """(w, CG iterations): w | f, beta, alpha by perturb-and-solve (Jacobi-preconditioned CG on the weight support)
    from ``w``."""
    mask = p.mask
    u_hat = _fft.rfft2(f) * p.phi_hat
    u_hat_conj = np.conj(u_hat)
    u = _fft.irfft2(u_hat, p.shape)
    shape = w.shape

    def apply_w(v):
        out = _fft.irfft2(u_hat_conj * _fft.rfft2(beta * _fft.irfft2(_fft.rfft2(v) * u_hat, p.shape)), p.shape)
        return np.where(mask, out + alpha * v, 0.0)

    rhs = _fft.irfft2(u_hat_conj * _fft.rfft2(beta * p.g + np.sqrt(beta) * rng.standard_normal(shape)),
                      p.shape) + np.sqrt(alpha) * rng.standard_normal(shape)
    rhs = np.where(mask, rhs, 0.0)
    diag = _fft.corr(beta, _fft.rfft2(u * u)) + alpha
    w, its, _ = _fft.pcg(apply_w, rhs, lambda r: np.where(mask, r / diag, 0.0), w, max_iter=cg_max_iter, tol=cg_tol)
    return w, its


def scale_log_density(p: C.Problem, s: float, w2: np.ndarray, d2: list[np.ndarray]) -> float:
    """log p(e^s f, e^-s w | g) + (M - P) s up to a constant, the precisions integrated out (the likelihood is
    constant on the orbit); ``w2`` = w^2 on the support, ``d2`` = (Q^k f)^2, of one chain."""
    from bayeszoo.models.bid import marginal_logp

    lp = (p.M - p.P) * s + marginal_logp(np, np.exp(-2.0 * s) * w2, p.a_alpha, p.b_alpha, p.P, p.psf_prior == "St")
    for d in d2:
        lp += marginal_logp(np, np.exp(2.0 * s) * d, p.a_gamma, p.b_gamma, p.M, p.image_prior == "St")
    return float(lp)


def scale_move(rng, p: C.Problem, f, w, owner: str = "the scale move"):
    """(e^s f, e^-s w) for every image of the batch, s by a stepping-out slice sampler started at s = 0 (Neal 2003,
    §4); ``owner`` names the sampler in errors."""
    f, w = f.copy(), w.copy()
    for c in np.ndindex(f.shape[:-2]):
        w2 = w[c][p.mask] ** 2
        d2 = [_fft.apply_stencil(f[c], st) ** 2 for st in p.q_stencils]

        def logp(s):
            return scale_log_density(p, s, w2, d2)
        level = logp(0.0) + np.log(rng.uniform())
        if not np.isfinite(level):
            raise ValueError(f"{owner}: non-finite posterior density ({level}) along the scale "
                             f"orbit; the hyperparameters or intensities are beyond what it can evaluate")
        lo = -SLICE_WIDTH * rng.uniform()
        hi = lo + SLICE_WIDTH
        # stepping out by at most SLICE_STEPS widths, split at random between the two ends (Neal 2003, Fig. 3)
        left = int(SLICE_STEPS * rng.uniform())
        right = SLICE_STEPS - 1 - left
        while left > 0 and logp(lo) >= level:
            lo -= SLICE_WIDTH
            left -= 1
        while right > 0 and logp(hi) >= level:
            hi += SLICE_WIDTH
            right -= 1
        while True:                  # shrinks towards s = 0, which is in the slice (>=: level may round to it)
            s = rng.uniform(lo, hi)
            if logp(s) >= level:
                break
            lo, hi = (s, hi) if s < 0 else (lo, s)
        f[c] *= np.exp(s)
        w[c] *= np.exp(-s)
    return f, w


# ------------------------------------------------------------------------------------------------ kernel
def kernel(model, problem: C.Problem, *, cg_max_iter: int, cg_tol: float, jitter: float,
           with_scale_move: bool = True, owner: str = "the scale move") -> Kernel:
    """The chain driver's kernel of one BID problem: a sweep is the scale move (if on), the precisions, f, w; with
    the PSF known, the precisions and f. ``owner`` names the sampler in errors."""
    solver = dict(cg_max_iter=cg_max_iter, cg_tol=cg_tol)
    known = problem.known

    def init(rng, p: C.Problem) -> GibbsState:
        f = p.g + jitter * p.unit * rng.standard_normal(p.shape)
        if known:
            return GibbsState(f, None)
        w = np.where(p.mask, p.w0 * np.exp(jitter * rng.standard_normal(p.shape)), 0.0)
        return GibbsState(f, w)

    def step(rng, state: GibbsState):
        f, w = state.f, state.w
        if with_scale_move and not known:   # before the precisions: they are then drawn given the moved (f, w)
            f, w = scale_move(rng, problem, f, w, owner)
        alpha, beta, gammas = draw_precisions(rng, problem, f, w)
        f, its_f = draw_f(rng, problem, f, w, beta, gammas, **solver)
        its_w = 0
        if not known:
            w, its_w = draw_w(rng, problem, f, w, beta, alpha, **solver)
        at_limit = int(its_f >= cg_max_iter) + int(its_w >= cg_max_iter)
        return (GibbsState(f, w, state.cg_total_f + its_f, state.cg_total_w + its_w, state.cg_at_limit + at_limit),
                GibbsInfo(its_f, its_w))

    return Kernel(init=init, step=step, position=lambda state: model.canonical(state.f, state.w))


# ------------------------------------------------------------------------------------------------ backend
def _check(options: dict, model, data) -> None:
    model.require_proper("gibbs")


def _defaults(model, data) -> dict:
    """Two chains (for R-hat), as many draws as fit the default draw budget for this image, as many warm-up sweeps."""
    return C.default_counts(model, data, chains=2, tune_per_draw=1)


@register("gibbs", kind="mcmc", family="bid", options=OPTIONS, check=_check, defaults=_defaults,
          memory=C.memory(25),
          description="conjugate Gibbs for BID: Gaussian blocks by perturb-and-solve with Fourier-domain PCG, "
                      "Gamma precisions in closed form")
def run(model, data, *, draws, tune, chains, ctx, thin, cg_max_iter, cg_tol, jitter, scale_move):
    """Conjugate Gibbs sampler (multi-chain, seeded)."""
    t0 = time.perf_counter()
    problem = C.make_problem(model, data)
    allocator.keep_temporaries_on_the_heap()
    setup = time.perf_counter() - t0
    sampler = kernel(model, problem, cg_max_iter=cg_max_iter, cg_tol=cg_tol, jitter=jitter,
                     with_scale_move=scale_move, owner=ctx.owner)
    result = sample(sampler, problem, ctx, draws=draws, tune=tune, chains=chains, thin=thin, desc="bid gibbs")
    solves = chains * result.sweeps           # of f, and as many of w
    at_limit = sum(s.cg_at_limit for s in result.states)
    info = {"seconds_per_iteration": (result.timing["tune"] + result.timing["sample"]) / result.sweeps,
            "cg_iterations_f": sum(s.cg_total_f for s in result.states) / solves,
            "cg_iterations_w": sum(s.cg_total_w for s in result.states) / solves,
            "cg_hit_limit": at_limit, "warnings": []}
    if at_limit:
        info["warnings"].append(f"{at_limit} CG solves stopped at cg_max_iter={cg_max_iter} before "
                                f"cg_tol={cg_tol}; draws are then approximate")
    return chains_fit(model, data, result, ctx=ctx, info=info, setup=setup)
