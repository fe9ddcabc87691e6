"""``gibbs``: the conditionally conjugate Gibbs sampler of the BID model (digest §9.5; the MCMC analogue of §5.5).

One sweep draws, for every chain at once (arrays carry a leading chain axis):
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
Hyperparameters are the model's (fixed). Chains start at the thesis's initial point (f = g, w fitted to h_in)
with a small per-chain jitter; the same seed gives the same draws. ``fit.info["iterations"]`` counts the sweeps,
warm-up included.
"""
from __future__ import annotations

import numpy as np

from bayeszoo import checks
from bayeszoo.results import build_fit
from bayeszoo.numerics import allocator
from bayeszoo.numerics import fft as _fft
from bayeszoo.progress import progress_bar
from bayeszoo.registry import Option, register

from . import _common as C

OPTIONS = {
    "thin": Option(1, "keep every thin-th sweep after warm-up"),
    "cg_iter": Option(500, "largest number of conjugate-gradient iterations per perturb-and-solve draw"),
    "cg_tol": Option(1e-8, "relative residual at which a conjugate-gradient solve stops (the draw is exact at 0)"),
    "jitter": Option(0.01, "scale of the random perturbation of each chain's start (f in intensity units, w on "
                           "the log scale)"),
    "scale_move": Option(True, "add the exact move along the scale orbit (f, w) -> (e^s f, e^-s w) to every sweep"),
}
SLICE_WIDTH = 0.1      # initial bracket of the slice sampler in s = log scale (stepped out as needed)
SLICE_STEPS = 1000     # at most this many widths of stepping out (a factor e^100 in scale)
MAX_JITTER = 10.0      # largest start perturbation


def _check(opts: dict) -> dict:
    who = C.owner("gibbs")
    checks.positive(who, "thin", opts["thin"], integer=True)
    checks.positive(who, "cg_iter", opts["cg_iter"], integer=True)
    checks.positive(who, "cg_tol", opts["cg_tol"])
    checks.number(who, "jitter", opts["jitter"], low=0, high=MAX_JITTER)     # exp(jitter z) of the weights stays finite
    checks.flag(who, "scale_move", opts["scale_move"])
    return opts


def _defaults(model, data) -> dict:
    """Two chains (for R-hat), as many draws as fit the default draw budget for this image, as many warm-up sweeps."""
    return C.default_counts(model, data, chains=2, tune_per_draw=1)


class GibbsSampler:
    """State (f, w, alpha, beta, gamma) of several chains and the sweep that updates it."""

    def __init__(self, problem: C.Problem, w0: np.ndarray, chains: int, rng: np.random.Generator, *,
                 cg_iter: int, cg_tol: float, jitter: float):
        p = self.p = problem
        self.rng = rng
        self.cg_iter, self.cg_tol = cg_iter, cg_tol
        shape = (chains, *p.shape)
        self.f = p.g + jitter * p.unit * rng.standard_normal(shape)
        self.w = np.where(p.mask, w0 * np.exp(jitter * rng.standard_normal(shape)), 0.0)
        self.cg_counts = []

    def _gamma(self, a, b, x2, per_element, count):
        """Precision draws: per element Gamma(a + 1/2, b + x^2/2), or one per chain Gamma(a + n/2, b + sum x^2/2)."""
        chains = x2.shape[0]
        if per_element:
            return self.rng.gamma(a + 0.5, 1.0 / (b + 0.5 * x2))
        rate = b + 0.5 * x2.reshape(chains, -1).sum(1)
        return np.broadcast_to((self.rng.gamma(a + 0.5 * count, 1.0 / rate))[:, None, None], x2.shape)

    def draw_precisions(self):
        """alpha | w, beta | f, w, gamma | f from their Gamma conditionals."""
        p = self.p
        self.alpha = np.where(p.mask, self._gamma(p.a_alpha, p.b_alpha, np.where(p.mask, self.w**2, 0.0),
                                                  p.psf_prior == "St", p.P), 1.0)
        resid = p.g - _fft.irfft2(_fft.rfft2(self.f) * _fft.rfft2(self.w) * p.phi_hat, p.shape)
        self.beta = self._gamma(p.a_beta, p.b_beta, resid**2, p.noise_prior == "St", p.M)
        self.gammas = [self._gamma(p.a_gamma, p.b_gamma, _fft.apply_stencil(self.f, s) ** 2, p.image_prior == "St",
                                   p.M) for s in p.q_stencils]

    def draw_f(self):
        """f | w, beta, gamma by perturb-and-solve (circulant-preconditioned CG)."""
        p = self.p
        beta, gammas = self.beta, self.gammas
        h_hat = _fft.rfft2(self.w) * p.phi_hat
        shape = self.f.shape

        def apply_f(v):
            out = _fft.irfft2(np.conj(h_hat) * _fft.rfft2(beta * _fft.irfft2(_fft.rfft2(v) * h_hat, p.shape)), p.shape)
            for s, gk in zip(p.q_stencils, gammas):
                out += _fft.adjoint_stencil(gk * _fft.apply_stencil(v, s), s)
            return out

        rhs = _fft.corr(beta * p.g + np.sqrt(beta) * self.rng.standard_normal(shape), h_hat)
        for s, gk in zip(p.q_stencils, gammas):
            rhs += _fft.adjoint_stencil(np.sqrt(gk) * self.rng.standard_normal(shape), s)
        eig = (beta.mean((1, 2))[:, None, None] * np.abs(h_hat) ** 2
               + sum(gk.mean((1, 2))[:, None, None] * np.abs(q) ** 2 for q, gk in zip(p.q_hats, gammas)))
        self.f, its, _ = _fft.pcg(apply_f, rhs, lambda r: _fft.irfft2(_fft.rfft2(r) / eig, p.shape), self.f,
                                  max_iter=self.cg_iter, tol=self.cg_tol)
        self.cg_counts.append(its)

    def draw_w(self):
        """w | f, beta, alpha by perturb-and-solve (Jacobi-preconditioned CG on the weight support)."""
        p = self.p
        beta, alpha, mask = self.beta, self.alpha, p.mask
        u_hat = _fft.rfft2(self.f) * p.phi_hat
        u = _fft.irfft2(u_hat, p.shape)
        shape = self.w.shape

        def apply_w(v):
            out = _fft.irfft2(np.conj(u_hat) * _fft.rfft2(beta * _fft.irfft2(_fft.rfft2(v) * u_hat, p.shape)),
                              p.shape)
            return np.where(mask, out + alpha * v, 0.0)

        rhs = _fft.irfft2(np.conj(u_hat) * _fft.rfft2(beta * p.g + np.sqrt(beta) * self.rng.standard_normal(shape)),
                          p.shape) + np.sqrt(alpha) * self.rng.standard_normal(shape)
        rhs = np.where(mask, rhs, 0.0)
        diag = _fft.corr(beta, _fft.rfft2(u * u)) + alpha
        self.w, its, _ = _fft.pcg(apply_w, rhs, lambda r: np.where(mask, r / diag, 0.0), self.w,
                                  max_iter=self.cg_iter, tol=self.cg_tol)
        self.cg_counts.append(its)

    def scale_log_density(self, s: float, w2: np.ndarray, d2: list[np.ndarray]) -> float:
        """log p(e^s f, e^-s w | g) + (M - P) s up to a constant, the precisions integrated out (the likelihood is
        constant on the orbit); ``w2`` = w^2 on the support, ``d2`` = (Q^k f)^2, of one chain."""
        from bayeszoo.models.bid import marginal_logp

        p = self.p
        lp = (p.M - p.P) * s + marginal_logp(np, np.exp(-2.0 * s) * w2, p.a_alpha, p.b_alpha, p.P,
                                             p.psf_prior == "St")
        for d in d2:
            lp += marginal_logp(np, np.exp(2.0 * s) * d, p.a_gamma, p.b_gamma, p.M, p.image_prior == "St")
        return float(lp)

    def scale_move(self):
        """(f, w) -> (e^s f, e^-s w) per chain, s by a stepping-out slice sampler started at s = 0 (Neal 2003, §4)."""
        p = self.p
        for c in range(self.f.shape[0]):
            w2 = self.w[c][p.mask] ** 2
            d2 = [_fft.apply_stencil(self.f[c], st) ** 2 for st in p.q_stencils]

            def logp(s):
                return self.scale_log_density(s, w2, d2)
            level = logp(0.0) + np.log(self.rng.uniform())
            if not np.isfinite(level):
                raise ValueError(f"BID backend 'gibbs': non-finite posterior density ({level}) along the scale "
                                 f"orbit; the hyperparameters or intensities are beyond what it can evaluate")
            lo = -SLICE_WIDTH * self.rng.uniform()
            hi = lo + SLICE_WIDTH
            # stepping out by at most SLICE_STEPS widths, split at random between the two ends (Neal 2003, Fig. 3)
            left = int(SLICE_STEPS * self.rng.uniform())
            right = SLICE_STEPS - 1 - left
            while left > 0 and logp(lo) >= level:
                lo -= SLICE_WIDTH
                left -= 1
            while right > 0 and logp(hi) >= level:
                hi += SLICE_WIDTH
                right -= 1
            while True:                  # shrinks towards s = 0, which is in the slice (>=: level may round to it)
                s = self.rng.uniform(lo, hi)
                if logp(s) >= level:
                    break
                lo, hi = (s, hi) if s < 0 else (lo, s)
            self.f[c] *= np.exp(s)
            self.w[c] *= np.exp(-s)

    def sweep(self, scale_move: bool = True):
        if scale_move:
            self.scale_move()          # before the precisions: they are then drawn given the moved (f, w)
        self.draw_precisions()
        self.draw_f()
        self.draw_w()


@register("gibbs", kind="mcmc", family="bid", options=OPTIONS, check=_check, defaults=_defaults,
          description="conjugate Gibbs for BID: Gaussian blocks by perturb-and-solve with Fourier-domain PCG, "
                      "Gamma precisions in closed form")
def run(model, data, *, draws, tune, chains, seed, progress, **opts):
    """Conjugate Gibbs sampler (multi-chain, seeded)."""
    model.require_proper("gibbs")
    problem = C.make_problem(model, data)
    C.check_draw_budget("gibbs", chains, draws, problem.shape)
    allocator.keep_temporaries_on_the_heap()
    rng = np.random.default_rng(seed)
    timer = C.Timer()
    sampler = GibbsSampler(problem, model.initial_weights(problem.shape), chains, rng, cg_iter=opts["cg_iter"],
                           cg_tol=opts["cg_tol"], jitter=opts["jitter"])
    image = np.empty((chains, draws, *problem.shape))
    psf = None
    with progress_bar(total=tune + draws * opts["thin"], desc="bid gibbs", disable=not progress) as bar:
        for _ in range(tune):
            sampler.sweep(opts["scale_move"])
            bar.update()
        t_tune = timer()
        for d in range(draws):
            for _ in range(opts["thin"]):
                sampler.sweep(opts["scale_move"])
                bar.update()
            canon = model.canonical(sampler.f, sampler.w)
            if psf is None:
                psf = np.empty((chains, draws, *canon["psf"].shape[1:]))
            image[:, d], psf[:, d] = canon["image"], canon["psf"]
    total = timer()
    n_sweeps = tune + draws * opts["thin"]
    counts = np.asarray(sampler.cg_counts)
    info = {"iterations": n_sweeps, "converged": None, "seconds_per_iteration": total / n_sweeps,
            "cg_iterations_f": float(counts[0::2].mean()), "cg_iterations_w": float(counts[1::2].mean()),
            "cg_hit_limit": int(np.sum(counts >= opts["cg_iter"])), "warnings": []}
    if info["cg_hit_limit"]:
        info["warnings"].append(f"{info['cg_hit_limit']} CG solves stopped at cg_iter={opts['cg_iter']} before "
                                f"cg_tol={opts['cg_tol']}; draws are then approximate")
    timing = {"compile": 0.0, "tune": t_tune, "sample": total - t_tune}
    return build_fit(model, data, "gibbs", "mcmc", {"image": image, "psf": psf}, timing=timing, info=info)
