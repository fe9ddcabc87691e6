"""``vb``: the variational Bayesian blind deconvolution of Tzikas PhD ch. 5 (§5.3; digest §5.5-5.9).

Mean field q(w) q(f) q(alpha) q(beta) q(gamma). q(w) and q(f) are Gaussian; their means are computed exactly by
preconditioned conjugate gradients in the Fourier domain (5.52-5.53), their covariances approximated as
diagonal (Sigma_w, 5.47) and circulant (Sigma_f, 5.48-5.50), and the Gamma factors are closed form
(5.29-5.34, with the errata of digest §9.4). The noise hyperparameters (a_beta, b_beta) are learned when
``learn_noise_prior`` (the thesis's protocol), together with q(beta) in one step at the bound's joint maximum
(``update_noise_prior``; 5.43-5.44 hold there; for Gaussian noise that maximum is beta's ML point); the others
stay fixed, as in the thesis.

Two points where this implementation is exact where the thesis approximates (documented in the README):
* The CG operator of the image mean uses <H^T B H> = H_m^T B H_m + Phi^T diag(rho) Phi with
  rho = corr(beta, s_w) (cheap by FFT), the exact expectation under a diagonal q(w); the thesis's
  beta_bar sum(s_w) Phi^T Phi (5.49) is its circulant part and is what the preconditioner uses.
* The variances are the optimum *within* the approximating families: 1/diag of the precision for the diagonal
  q(w) (5.47) and the circulant projection of the precision for q(f) (5.48, per-filter gamma means). Both
  coincide with the thesis's formulas.
Every update is therefore the exact coordinate-ascent step of the bound over its factor (within its family),
and the bound (§5.6, evaluated exactly for these factors) never decreases when the CG solves converge.

Initialisation (§5.4.4): h_in = Gaussian PSF of variance ``init_psf_var`` with w fitted to it, <alpha_i> = 1e-16,
<beta> = 1e3, <gamma> = 1e2 (for [0, 1] intensities: divided by the squared intensity unit, ``BID.intensity_unit``),
f = g. Stopping: the bound moves by less than ``tol`` nats per pixel. Draws are i.i.d. from q (circulant q(f)
sampled by FFT).

With the PSF known (``BID(psf="known")``) the factors are q(f) q(beta) q(gamma) with H the given PSF's
convolution: q(w) is a point at the given PSF, so its variance terms vanish, and the bound has no w or alpha terms.

Starts (an addition to the thesis, README "Local optima"): ``anneal_temperatures`` lists one run per initial
temperature T0; a run with T0 > 1 anneals the entropy of q(f) (deterministic annealing: the bound with H[q(f)]
weighted by T_t = T0^(1 - t / anneal_iter) over the first ``anneal_iter`` iterations, which inflates Sigma_f by
T_t), then continues as plain VB; T0 = 1 is the thesis's VB. The run with the highest final bound is kept.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.optimize import brentq
from scipy.special import digamma

from bayeszoo import registry
from bayeszoo.checks import POSITIVE, POSITIVE_INT, Flag, Interval, Numbers
from bayeszoo.inference.iterative import Algorithm, iterate
from bayeszoo.numerics import allocator
from bayeszoo.numerics import fft as _fft
from bayeszoo.registry import Option, register
from bayeszoo.results import build_fit

from . import common as C

INIT_RANGE = (1e-30, 1e30)   # initial precisions accepted (the thesis's: 1e-16, 1e3, 1e2)
MAX_STARTS = 32        # anneal_temperatures: one VB run each; their final bounds are listed in info
OPTIONS = {
    "max_iter": Option(200, "largest number of VB iterations of each start", POSITIVE_INT),
    "tol": Option(1e-4, "stop when the bound moves by less than this many nats per pixel", POSITIVE),
    "cg_max_iter": Option(20, "largest number of conjugate-gradient iterations per solve of q(f)'s or q(w)'s mean",
                          POSITIVE_INT),
    "cg_tol": Option(1e-8, "relative residual at which a conjugate-gradient solve stops early", POSITIVE),
    "learn_noise_prior": Option(True, "learn the noise hyperparameters (a_beta, b_beta) with q(beta) at the bound's "
                                      "maximum; False keeps the model's", Flag()),
    "init_alpha": Option(1e-16, "initial <alpha_i>, the PSF-weight precisions", Interval(float, *INIT_RANGE, "both")),
    "init_beta": Option(1e3, "initial <beta>, the noise precision, for [0, 1] intensities",
                        Interval(float, *INIT_RANGE, "both")),
    "init_gamma": Option(1e2, "initial <gamma>, the image-difference precisions, for [0, 1] intensities",
                         Interval(float, *INIT_RANGE, "both")),
    "anneal_temperatures": Option((1.0,), "one start per initial temperature T0 >= 1 of q(f)'s entropy (1: the "
                                          "thesis's VB); the start with the highest final bound is kept",
                                  Numbers(Interval(float, 1, None, "left"))),
    "anneal_iter": Option(10, "iterations over which an annealed start's temperature falls to 1 (below max_iter)",
                          POSITIVE_INT),
}
WIDE_SUPPORT = 0.1     # warn when the PSF-weight window covers more of the image than this (README, "Noise level")
NOISE_SHAPE_RANGE = (1e-3, 1e6)   # a_beta search range: heavy tails to Gaussian (larger a loses digits in the bound)


class VBState:
    """The variational factors and their updates; each ``update_*`` sets one factor to its optimum."""

    def __init__(self, problem: C.Problem, w0: np.ndarray, *, init_alpha=1e-16, init_beta=1e3, init_gamma=1e2,
                 cg_max_iter=20, cg_tol=1e-8):
        p = self.p = problem
        self.cg_max_iter, self.cg_tol = cg_max_iter, cg_tol
        self.a_beta, self.b_beta = p.a_beta, p.b_beta          # learned when learn_noise_prior
        shape = p.shape
        self.mw = np.where(p.mask, w0, 0.0)
        self.sw = np.zeros(shape)
        self.mf = p.g.copy()
        self.cf = np.zeros_like(p.phi_hat, dtype=float)       # eigenvalues of the circulant Sigma_f
        # the thesis's initial precisions are for [0, 1] intensities: in the data's unit they scale by unit^-2
        init_beta, init_gamma = init_beta / p.unit**2, init_gamma / p.unit**2
        per = {"St": True, "G": False}
        self.alpha_per, self.beta_per, self.gamma_per = per[p.psf_prior], per[p.noise_prior], per[p.image_prior]
        # Gamma factors as (shape, rate); initial rates give the thesis's initial means
        self.alpha = self._gamma_init(p.a_alpha + (0.5 if self.alpha_per else 0.5 * p.P), init_alpha,
                                      shape if self.alpha_per else ())
        self.beta = self._gamma_init(p.a_beta + (0.5 if self.beta_per else 0.5 * p.M), init_beta,
                                     shape if self.beta_per else ())
        self.gamma = [self._gamma_init(p.a_gamma + (0.5 if self.gamma_per else 0.5 * p.M), init_gamma,
                                       shape if self.gamma_per else ()) for _ in p.q_hats]
        self.cg_counts = []
        self.entropy_weight = 1.0    # T of the annealed bound E[log p] + T H[q(f)] + H[rest]; 1 is the bound itself

    @staticmethod
    def _gamma_init(shape_param, mean, size):
        return [shape_param, np.full(size, shape_param / mean) if size != () else shape_param / mean]

    # ---- expectations ------------------------------------------------------------------------------------
    @staticmethod
    def E(factor):
        return C.gamma_moments(factor[0], factor[1])

    def E_beta_image(self):
        """<beta_i> as an image (broadcast for a single Gaussian-noise precision)."""
        return np.broadcast_to(self.E(self.beta)[0], self.p.shape)

    def h_hat(self):
        return self.p.otf(self.mw)

    def quad(self, kernel_hat):
        """k^T Sigma_f k for a kernel given by its rfft2 (constant over pixels since Sigma_f is circulant)."""
        return float(_fft.circulant_quad(kernel_hat, self.cf, self.p.shape))

    def second_moment_noise(self):
        """<n_i^2> = (g - h_m * f_m)_i^2 + h_m^T S_f h_m + (s_w * u^2)_i + sum(s_w) phi^T S_f phi, u = phi * f_m."""
        p = self.p
        h_hat = self.h_hat()
        r = p.g - _fft.irfft2(_fft.rfft2(self.mf) * h_hat, p.shape)
        u = _fft.conv(self.mf, p.phi_hat)
        return (r * r + self.quad(h_hat) + _fft.conv(u * u, _fft.rfft2(self.sw))
                + self.sw.sum() * self.quad(p.phi_hat))

    def second_moment_diffs(self):
        """<(Q^k f)_i^2> = (Q^k f_m)_i^2 + q_k^T S_f q_k, one image per filter."""
        return [_fft.apply_stencil(self.mf, s) ** 2 + self.quad(q) for q, s in zip(self.p.q_hats, self.p.q_stencils)]

    # ---- updates -----------------------------------------------------------------------------------------
    def f_operator(self):
        """v -> <H^T B H> v + Q^T <Gamma> Q v, with <H^T B H> = H_m^T B H_m + Phi^T diag(rho) Phi (see module doc)."""
        p = self.p
        B = self.E_beta_image()
        h_hat = self.h_hat()
        rho = _fft.corr(B, _fft.rfft2(self.sw))
        gammas = [np.broadcast_to(self.E(gk)[0], p.shape) for gk in self.gamma]

        def apply(v):              # 6 FFTs: the image-prior terms are shifts (_fft.STENCILS)
            v_hat = _fft.rfft2(v)
            out_hat = np.conj(h_hat) * _fft.rfft2(B * _fft.irfft2(v_hat * h_hat, p.shape))
            out_hat += np.conj(p.phi_hat) * _fft.rfft2(rho * _fft.irfft2(v_hat * p.phi_hat, p.shape))
            out = _fft.irfft2(out_hat, p.shape)
            for s, gk in zip(p.q_stencils, gammas):
                out += _fft.adjoint_stencil(gk * _fft.apply_stencil(v, s), s)
            return out

        # circulant projection of that operator: its eigenvalues (5.48-5.49 with per-filter gamma means)
        eig = (B.mean() * np.abs(h_hat) ** 2 + rho.mean() * np.abs(p.phi_hat) ** 2
               + sum(gk.mean() * np.abs(q) ** 2 for q, gk in zip(p.q_hats, gammas)))
        rhs = _fft.corr(B * p.g, h_hat)
        return apply, eig, rhs

    def update_f(self):
        """q(f): mean by PCG on (5.52) preconditioned by the circulant Sigma_f (5.48); Sigma_f circulant."""
        apply, eig, rhs = self.f_operator()
        self.mf, its, _ = _fft.pcg(apply, rhs, lambda r: _fft.irfft2(_fft.rfft2(r) / eig, self.p.shape),
                                   self.mf, max_iter=self.cg_max_iter, tol=self.cg_tol)
        # the maximiser of the annealed bound over circulant Gaussians: same mean, covariance T times the optimum
        self.cf = self.entropy_weight / eig
        self.cg_counts.append(its)

    def update_gamma(self):
        """q(gamma^k): Gamma(a + 1/2, b + <(Q^k f)_i^2>/2) per pixel (5.33-5.34, Q^kT on the right); G: one gamma."""
        for gk, m2 in zip(self.gamma, self.second_moment_diffs()):
            gk[1] = self.p.b_gamma + 0.5 * (m2 if self.gamma_per else m2.sum())

    def w_operator(self):
        """v -> Phi^T <F^T B F> Phi v + <A> v on the weight support, <F^T B F> = F_m^T B F_m + sum(beta) S_f (5.50)."""
        p = self.p
        B = self.E_beta_image()
        u_hat = _fft.rfft2(self.mf) * p.phi_hat                    # F_m Phi = convolution by u = phi * f_m
        u = _fft.irfft2(u_hat, p.shape)
        spectral = B.sum() * np.abs(p.phi_hat) ** 2 * self.cf       # sum(beta) Phi^T S_f Phi
        A = np.broadcast_to(self.E(self.alpha)[0], p.shape)
        mask = p.mask

        def apply(v):
            v_hat = _fft.rfft2(v)
            out_hat = np.conj(u_hat) * _fft.rfft2(B * _fft.irfft2(v_hat * u_hat, p.shape)) + spectral * v_hat
            return np.where(mask, _fft.irfft2(out_hat, p.shape) + A * v, 0.0)

        diag = _fft.corr(B, _fft.rfft2(u * u)) + B.sum() * self.quad(p.phi_hat) + A
        rhs = np.where(mask, _fft.irfft2(np.conj(u_hat) * _fft.rfft2(B * p.g), p.shape), 0.0)
        return apply, diag, rhs

    def update_w(self):
        """q(w): mean by PCG on (5.53) preconditioned by the diagonal Sigma_w (5.47); Sigma_w diagonal."""
        apply, diag, rhs = self.w_operator()
        inv = np.where(self.p.mask, 1.0 / diag, 0.0)
        self.sw = inv
        self.mw, its, _ = _fft.pcg(apply, rhs, lambda r: inv * r, self.mw, max_iter=self.cg_max_iter, tol=self.cg_tol)
        self.cg_counts.append(its)

    def update_alpha(self):
        """q(alpha): Gamma(a + 1/2, b + <w_i^2>/2) (5.29-5.30); G: Gamma(a + P/2, b + sum <w_i^2>/2)."""
        w2 = np.where(self.p.mask, self.mw**2 + self.sw, 0.0)
        # off the support there is no weight: give those pixels the prior rate plus 1 so <alpha> stays finite
        self.alpha[1] = (np.where(self.p.mask, self.p.b_alpha + 0.5 * w2, 1.0) if self.alpha_per
                         else self.p.b_alpha + 0.5 * w2.sum())

    def update_beta(self):
        """q(beta): Gamma(a + 1/2, b + <n_i^2>/2) per pixel (5.31 corrected to a + 1/2, 5.32); G: a + M/2."""
        n2 = self.second_moment_noise()
        self.beta[0] = self.a_beta + (0.5 if self.beta_per else 0.5 * self.p.M)
        self.beta[1] = self.b_beta + 0.5 * (n2 if self.beta_per else n2.sum())

    def update_noise_prior(self, n2=None):
        """(a_beta, b_beta) and q(beta) jointly at the bound's maximum over all three (5.43-5.44 hold there).

        Alternating (5.43-5.44) with (5.31-5.32) is EM on (a, b): with the thesis's a = 1e4 each round moves b by
        a relative 1 / (2a), so <beta> barely leaves its prior mean 1e3 (for [0, 1] intensities). With the
        optimal q(beta) substituted the bound in (a, b) is the Student-t log likelihood of the expected residuals
        s_g = <|n_g|^2> of the G groups of n pixels sharing a precision (G = M, n = 1 for St noise; G = 1, n = M
        for G noise): sum_g [a log b - ln G(a) + ln G(a + n/2) - (a + n/2) log(b + s_g/2)]. Its maximum is found
        directly: b given a by a monotone root, then a by its own stationarity equation; b scales as unit^2 and a
        is unit-free. For G noise the maximum is at the largest a (q(beta) -> a point at M / s, its ML value).
        """
        if n2 is None:
            n2 = self.second_moment_noise()
        half = 0.5 * (np.ravel(n2) if self.beta_per else np.array([np.sum(n2)]))
        G = half.size
        n = 1 if self.beta_per else self.p.M

        def best_log_b(a):       # d/db = 0: G a = (a + n/2) sum_g b / (b + s_g/2), decreasing in b: one root
            def stationarity(log_b):
                b = np.exp(log_b)
                return G * a - (a + 0.5 * n) * np.sum(b / (b + half))
            lo = np.log(max(half.min(), 1e-300)) - np.log(n) - 40.0
            hi = np.log(max(half.max(), 1e-300)) + np.log(2.0 * a + n) + 40.0
            return brentq(stationarity, lo, hi, xtol=1e-14)

        def slope(log_a):        # d/da of the profile (envelope over b)
            a = np.exp(log_a)
            b = np.exp(best_log_b(a))
            return G * (np.log(b) - digamma(a) + digamma(a + 0.5 * n)) - np.sum(np.log(b + half))

        lo, hi = np.log(NOISE_SHAPE_RANGE[0]), np.log(NOISE_SHAPE_RANGE[1])
        if slope(lo) <= 0:
            log_a = lo
        elif slope(hi) >= 0:     # residuals as light-tailed as a Gaussian: the largest shape allowed
            log_a = hi
        else:
            log_a = brentq(slope, lo, hi, xtol=1e-14)
        a = float(np.exp(log_a))
        self.a_beta, self.b_beta = a, float(np.exp(best_log_b(a)))
        self.beta[0] = self.a_beta + 0.5 * n
        self.beta[1] = self.b_beta + (half.reshape(np.shape(n2)) if self.beta_per else float(half[0]))

    # ---- the bound ---------------------------------------------------------------------------------------
    def bound(self) -> float:
        """The variational lower bound F of §5.6 for the current factors (improper image-prior normaliser 5.16)."""
        p = self.p
        E_b, E_log_b = self.E(self.beta)
        n2 = self.second_moment_noise()
        if self.beta_per:
            lik = np.sum(0.5 * E_log_b - 0.5 * C.LOG_2PI - 0.5 * E_b * n2)
        else:
            lik = 0.5 * p.M * (E_log_b - C.LOG_2PI) - 0.5 * E_b * n2.sum()
        # no weights with the PSF known: q(w) is a point at the given PSF, alpha is not in the model
        weights = 0.0 if p.known else self.weight_terms()
        prior_f = hyper_g = ent_g = 0.0
        for gk, m2 in zip(self.gamma, self.second_moment_diffs()):
            E_g, E_log_g = self.E(gk)
            if self.gamma_per:
                prior_f += np.sum(0.5 * E_log_g - 0.5 * C.LOG_2PI - 0.5 * E_g * m2)
            else:
                prior_f += 0.5 * p.M * (E_log_g - C.LOG_2PI) - 0.5 * E_g * m2.sum()
            hyper_g += C.gamma_log_prior(p.a_gamma, p.b_gamma, E_g, E_log_g)
            ent_g += C.gamma_entropy(gk[0], gk[1])
        hyper_b = C.gamma_log_prior(self.a_beta, self.b_beta, E_b, E_log_b)
        ent_b = C.gamma_entropy(self.beta[0], self.beta[1])
        ent_f = 0.5 * p.M * (1.0 + C.LOG_2PI) + 0.5 * _fft.spectrum_sum(np.log(self.cf), p.shape)
        return float(lik + weights + prior_f + hyper_b + hyper_g + ent_b + ent_g + ent_f)

    def weight_terms(self) -> float:
        """The bound's terms in w and alpha: <log p(w | alpha)> + <log p(alpha)> + H[q(alpha)] + H[q(w)]."""
        p = self.p
        mask = p.mask
        E_a, E_log_a = self.E(self.alpha)
        w2 = self.mw**2 + self.sw
        if self.alpha_per:
            prior_w = np.sum(np.where(mask, 0.5 * E_log_a - 0.5 * C.LOG_2PI - 0.5 * E_a * w2, 0.0))
            hyper_a = C.gamma_log_prior(p.a_alpha, p.b_alpha, E_a[mask], E_log_a[mask])
            ent_a = C.gamma_entropy(self.alpha[0], self.alpha[1][mask])
        else:
            prior_w = 0.5 * p.P * (E_log_a - C.LOG_2PI) - 0.5 * E_a * w2[mask].sum()
            hyper_a = C.gamma_log_prior(p.a_alpha, p.b_alpha, E_a, E_log_a)
            ent_a = C.gamma_entropy(self.alpha[0], self.alpha[1])
        ent_w = 0.5 * np.sum(np.log(2.0 * np.pi * np.e * self.sw[mask]))
        return float(prior_w + hyper_a + ent_a + ent_w)

    def sweep(self, learn_noise_prior: bool):
        """One VB iteration (§5.3.4): q(f), q(gamma), q(w), q(alpha), q(beta), then the noise hyperparameters (no q(w),
        q(alpha) with the PSF known)."""
        self.update_f()
        self.update_gamma()
        if not self.p.known:
            self.update_w()
            self.update_alpha()
        if learn_noise_prior:
            # one joint step: EM on (a, b) alone moves <beta> by 1 / (2 a_beta) per round, so it barely leaves the prior
            self.update_noise_prior()
        else:
            self.update_beta()

    # ---- draws -------------------------------------------------------------------------------------------
    def draws(self, rng, n: int):
        """n i.i.d. draws of (f, w) from q: circulant q(f) by FFT, diagonal q(w)."""
        shape = self.p.shape
        zf = rng.standard_normal((n, *shape))
        f = self.mf + _fft.irfft2(_fft.rfft2(zf) * np.sqrt(self.cf), shape)
        w = self.mw + np.sqrt(self.sw) * rng.standard_normal((n, *shape))
        return f, w


def _check(options: dict, model, data, owner: str) -> None:
    temps = options["anneal_temperatures"]
    if len(temps) > MAX_STARTS:
        raise ValueError(f"{owner}: option 'anneal_temperatures' must list at most {MAX_STARTS} temperatures (one "
                         f"VB run each); got {len(temps)}")
    if any(t > 1 for t in temps) and options["anneal_iter"] >= options["max_iter"]:
        raise ValueError(f"{owner}: option 'anneal_iter' ({options['anneal_iter']}) must be below max_iter "
                         f"({options['max_iter']}) so that annealed runs end at the bound itself")


def _defaults(model, data) -> dict:
    """One chain of i.i.d. draws from q, as many as fit the default draw budget for this image; no warm-up."""
    return {**C.default_counts(model, data, chains=1, tune_per_draw=0), **registry.APPROXIMATION_DEFAULTS}


class VBSummary(NamedTuple):
    """How the VB run went: that of the start kept (the highest final bound) and the others' final bounds.

    bound
        The kept run's bound after every sweep.
    iterations
        The kept run's sweeps.
    converged
        Whether the kept run met the tolerance before ``max_iter``.
    seconds
        The wall time of all the runs.
    a_beta, b_beta
        The kept run's Gamma factor q(beta) of the noise precision: shape and rate.
    cg_iterations
        The kept run's conjugate-gradient iterations, all solves.
    temperature
        The kept run's initial temperature T0 of q(f)'s entropy.
    start_bounds
        (T0, final bound) of every run, in the order of ``anneal_temperatures``.
    all_iterations
        The sweeps of all the runs.
    """

    bound: np.ndarray
    iterations: int
    converged: bool
    seconds: float
    a_beta: float
    b_beta: float
    cg_iterations: int
    temperature: float
    start_bounds: list
    all_iterations: int


def vb_fit(model, data, progress: bool = False, **options) -> tuple[VBState, VBSummary]:
    """Run the VB iterations with ``options`` (the ``vb`` backend's, checked as ``bz.fit`` does); returns the final
    state and a :class:`VBSummary` (bound trace, iterations, timings)."""
    backend = registry.get(model, "vb")
    return _vb_fit(model, data, backend.resolve(options, model, data), progress, backend.owner)


def _vb_fit(model, data, opts: dict, progress: bool, owner: str) -> tuple[VBState, VBSummary]:
    problem = C.make_problem(model, data)
    allocator.keep_temporaries_on_the_heap()
    temps = [float(t) for t in opts["anneal_temperatures"]]
    timer = C.Timer()
    runs = []
    for t0 in temps:
        desc = "bid vb" if len(temps) == 1 else f"bid vb (start T={t0:g})"
        runs.append(iterate(vb_iterations(problem, opts, t0), None, max_iter=opts["max_iter"], tol=opts["tol"],
                            progress=progress, desc=desc, owner=owner, change_name="change per pixel"))
    seconds = timer()
    # every run ends at the plain bound (T = 1): keep the highest (module doc; an addition to the thesis)
    best = max(range(len(runs)), key=lambda i: runs[i].trace[-1])
    run = runs[best]
    state = run.state.factors
    return state, VBSummary(bound=run.trace, iterations=run.iterations, converged=run.converged, seconds=seconds,
                            a_beta=state.a_beta, b_beta=state.b_beta, cg_iterations=int(np.sum(state.cg_counts)),
                            temperature=temps[best], start_bounds=[(t, r.trace[-1]) for t, r in zip(temps, runs)],
                            all_iterations=sum(r.iterations for r in runs))


class VBRun(NamedTuple):
    """The driver's state: the variational ``factors`` (updated in place by each sweep), the ``iteration`` and
    ``objective``, the bound after it (None before the first)."""

    factors: VBState
    iteration: int
    objective: float | None


class VBInfo(NamedTuple):
    """One sweep: the bound after it, ``change``, its move per pixel, and ``moving``, True while q(f)'s entropy is
    still annealed (the trace is then the plain bound of a tempered step, not monotone: no stop)."""

    objective: float
    change: float
    moving: bool


def vb_iterations(problem, opts, t0: float) -> Algorithm:
    """VB from the thesis's initialisation, q(f)'s entropy annealed from t0 down to 1 over anneal_iter sweeps."""
    anneal = opts["anneal_iter"] if t0 > 1 else 0

    def init(_):
        factors = VBState(problem, problem.w0, init_alpha=opts["init_alpha"], init_beta=opts["init_beta"],
                          init_gamma=opts["init_gamma"], cg_max_iter=opts["cg_max_iter"], cg_tol=opts["cg_tol"])
        return VBRun(factors, 0, None)

    def step(s):
        it, factors = s.iteration + 1, s.factors
        factors.entropy_weight = t0 ** max(0.0, 1.0 - (it - 1) / anneal) if anneal else 1.0
        factors.sweep(opts["learn_noise_prior"])
        bound = factors.bound()
        # the bound sums over the M pixels: stop when it moves by less than tol nats per pixel (the thesis states
        # no rule). After its fast phase the bound keeps creeping up slowly as the PSF narrows and grows negative
        # lobes, and ISNR falls meanwhile (BENCHMARKS.md); the default tol ends the run at the end of that phase
        change = np.inf if s.objective is None else abs(bound - s.objective) / problem.M
        return VBRun(factors, it, bound), VBInfo(bound, change, moving=it <= anneal + 1)

    return Algorithm(init, step, result=lambda s: s.factors)


@register("vb", kind="approximation", family="bid", options=OPTIONS, check=_check, defaults=_defaults,
          memory=C.memory(31),
          description="variational Bayesian BID (Tzikas PhD ch. 5): FFT / PCG means, diagonal / circulant "
                      "covariances, Gamma factors in closed form, noise hyperparameters by root finding")
def run(model, data, *, draws, tune, chains, ctx, **opts):
    """VB of Tzikas PhD §5.3 on the full image; bound traced; i.i.d. draws from q.

    The canonical ``image`` and ``psf`` are non-linear in (f, w) (normalised by sum(h)), so q is no Gaussian over
    them: the Fit is built here from draws of q(f) q(w) (chain c from its own stream, ``ctx.chain_rngs``)."""
    shape = model.image_shape(data)
    timer = C.Timer()
    state, res = _vb_fit(model, data, opts, ctx.progress, ctx.owner)
    t_opt = timer()
    out = {name: [] for name in model.var_dims(data)}
    for rng in ctx.chain_rngs(chains):
        f, w = state.draws(rng, draws)
        for name, values in model.canonical(f, w).items():
            out[name].append(values)
    out = {k: np.stack(v) for k, v in out.items()}
    warn = [] if res.converged else [f"vb stopped at max_iter={res.iterations} before the bound converged"]
    covered = 0.0 if model.known else float(np.mean(model.support_mask(shape)))   # the share of free weights
    if covered > WIDE_SUPPORT and opts["learn_noise_prior"]:
        # each free weight counts as a fitted parameter: the learned noise variance is inflated by ~1 / (1 - P/M)
        warn.append(f"the PSF weights cover {covered:.0%} of the image: the learned noise level is biased up by about "
                    f"1 / (1 - {covered:.2f}) (with psf_size=None it is not identified at all); set psf_size to a "
                    f"window wider than the blur but small against the image")
    info = {"iterations": res.iterations, "converged": res.converged, "warnings": warn, "objective": "elbo",
            "bound": float(res.bound[-1]), "a_beta": res.a_beta, "b_beta": res.b_beta,
            "cg_iterations": res.cg_iterations, "anneal_temperature": res.temperature,
            "start_bounds": res.start_bounds,
            "seconds_per_iteration": res.seconds / max(res.all_iterations, 1)}
    timing = {"compile": 0.0, "tune": t_opt, "sample": timer() - t_opt}
    return build_fit(model, data, ctx.backend, "approximation", out, timing=timing, objective={"elbo": res.bound},
                     info=info, ctx=ctx)
