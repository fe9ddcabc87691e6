"""``vb_sparse``: variational blind deconvolution with a sparse derivative prior and a constrained PSF, coarse to fine
(after Levin, Weiss, Durand & Freeman 2011 and Babacan, Molina, Do & Katsaggelos 2012).

The PSF is estimated in the derivative domain, as Levin et al. do: with y_k = Q^k g and x_k = Q^k f the horizontal
and vertical first differences (5.10-5.11), circular convolution commutes with Q^k, and on one pyramid level of M
pixels

    y_k = h * x_k + n_k,   n_k ~ N(0, s^2 I),   h >= 0, sum(h) = 1 on a k x k window (a parameter),
    x_ki | gamma_ki ~ N(0, 1 / gamma_ki),   gamma_ki ~ Gamma(a, b)     (a Student-t scale mixture; a, b -> 0 is
                                                                        the log prior of Babacan et al.)

Variational EM: q(x) q(gamma) with q(x_k) a fully factorised Gaussian N(mu_k, diag(v_k)) (Levin et al.'s "diagonal
covariance"), q(gamma) Gamma, and h (and s^2 when ``learn_noise``) point estimates at the bound's maximum. The bound

    F = sum_k E[log N(y_k | h * x_k, s^2)] + E[log p(x | gamma)] + E[log p(gamma)] + H[q(x)] + H[q(gamma)]

is raised by each step in turn, each the exact maximiser of F over its block:
* q(x_k): with A_k = H^T H / s^2 + diag(<gamma_k>), F is separable in the mean and the variances of a factorised
  Gaussian: mu_k = A_k^-1 H^T y_k / s^2 (PCG, Jacobi preconditioner) and v_ki = 1 / (A_k)_ii;
* q(gamma_ki) = Gamma(a + 1/2, b + (mu_ki^2 + v_ki) / 2);
* s^2 = sum_k <|y_k - h * x_k|^2> / (2M) when learned;
* h: argmin sum_k <|y_k - h * x_k|^2> = sum_k (|y_k - h * mu_k|^2 + sum(v_k) |h|^2) over the simplex on the
  window, a quadratic programme solved by non-negative least squares (``simplex_qp``). The covariance term
  sum(v) |h|^2 keeps the kernel from collapsing to a delta (Levin et al. 2011): with v = 0 (a MAP image) the
  no-blur solution wins.
Coarse to fine: the image is reduced by ``scale_ratio`` per level until the kernel window is 3 x 3; each level takes
``max_iter`` sweeps of these steps. The coarsest level starts from a flat PSF (``initial_psf``) and x_k = y_k; each
finer level from the coarser level's PSF (resized bilinearly, renormalised, recentred) and a Wiener restoration of
y_k with it (``SparseVB.start_deconvolved``), or x_k = y_k with ``level_start="blurred"``.
Noise: the differences of white noise of variance sigma^2 have variance 2 sigma^2; s^2 is fixed at
``noise_inflation`` times that (sigma estimated from the image unless ``noise_sd`` is given), the same at every
level, so coarse levels, where averaging has lowered the noise, see a relatively larger one. An inflated noise
keeps q(x) from fitting the noise, whose differences are correlated (lag 0: 2 sigma^2, lag 1: -sigma^2) and
otherwise leave a spike with a zero cross at the kernel's centre. No single inflation suits every image (a
larger one is robust on strongly edged images, a smaller one keeps the detail of faint ones), so with several
values (the default 8, 4 and 2) the coarse-to-fine estimate runs once per value, each result is refined at the finest
level under the smallest value (``refine``: a deconvolved start and ``max_iter`` sweeps), and the one with the
highest bound there, one model for all, is kept (``info["paths"]`` has each one's bound).
Support: the covariance term spreads specks of mass over a window larger than the kernel. The kept estimate
therefore takes ``support_rounds`` rounds of ``support_iterations`` more sweeps at the finest level, each with the
PSF step confined to the support found at the round's start: the entries at or above ``support_threshold`` times
the peak, grown by one pixel (``support_mask``; after Xu & Jia's 2010 iterative support detection). Each of these
steps is the bound's maximiser on that subset of the simplex.

The image is finally restored at full size with the estimated PSF by the non-blind HQS of
``nonblind.hqs_restore`` under the model's St image prior (a_gamma, b_gamma) with noise variance sigma^2.
Outputs: ``psf`` and ``image`` are point estimates, stored as identical draws; ``elbo`` traces F over the
iterations of the finest level, or of the refinement with several noise values (``info["levels"]`` has every
level's trace of the kept estimate), followed by the sweeps on the support (``info["support"]``).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import scipy.linalg
import scipy.ndimage
import scipy.optimize

from bayeszoo.checks import POSITIVE, POSITIVE_INT, Flag, Interval, Numbers, OneOf
from bayeszoo.inference.approximations import PointEstimate, approximation_fit
from bayeszoo.inference.iterative import Algorithm, iterate
from bayeszoo.numerics import fft as _fft
from bayeszoo.numerics.linalg import cholesky
from bayeszoo.progress import progress_bar
from bayeszoo.registry import APPROXIMATION_DEFAULTS, Option, register

from . import common as C
from .nonblind import DIFFS, hqs_restore

LEVEL_STARTS = ("blurred", "deconvolved")
PSF_STARTS = ("flat", "peaked")
OPTIONS = {
    "max_iter": Option(15, "VB sweeps (q(x), q(gamma), noise, PSF) per pyramid level", POSITIVE_INT),
    "scale_ratio": Option(math.sqrt(2.0), "ratio of image sides between successive pyramid levels (> 1, <= 4)",
                          Interval(float, 1.0, 4.0, "right")),
    "psf_side": Option(None, "odd side of the square PSF window estimated, at most the image's; None takes the "
                             "model's psf_size. The kernel is kept centred on its centre of mass, so the window must "
                             "hold it so placed", Interval(int, 1, None, "left", none=True)),
    "noise_sd": Option(None, "noise standard deviation for [0, 1] intensities; None estimates it from the image "
                             "(median absolute finest-scale diagonal detail / 0.6745)",
                       Interval(float, 0, 1e30, "right", none=True)),
    "noise_inflation": Option((8.0, 4.0, 2.0), "the PSF estimation's noise variance in the derivative domain is "
                                               "this times 2 noise_sd^2 (>= 1; larger values trade detail for "
                                               "robustness); with several values, one estimate per value, and the "
                                               "one with the highest bound at the smallest value is kept",
                              Numbers(Interval(float, 1.0, 1e6, "both"), scalar=True)),
    "learn_noise": Option(False, "learn the derivative-domain noise variance at the bound's maximum at each step "
                                 "instead of fixing it", Flag()),
    "prior_shape": Option(1e-3, "shape a of the Gamma prior of the derivative precisions during PSF estimation",
                          Interval(float, 1e-20, 1e20, "both")),
    "prior_rate": Option(1e-6, "rate b of that prior, for [0, 1] intensities (a, b -> 0: the log prior)",
                         Interval(float, 1e-20, 1e20, "both")),
    "cg_max_iter": Option(100, "largest number of conjugate-gradient iterations per solve of q(x)'s mean",
                          POSITIVE_INT),
    "cg_tol": Option(1e-6, "relative residual at which a conjugate-gradient solve stops", POSITIVE),
    "level_start": Option("deconvolved", "q(x)'s start at each level after the coarsest: 'deconvolved' (a Wiener "
                                         "restoration of y_k with the coarser level's PSF) or 'blurred' (x_k = y_k)",
                          OneOf(LEVEL_STARTS)),
    "support_threshold": Option(0.1, "the estimate's support is its entries at or above this fraction of its peak, "
                                     "grown by one pixel; after the choice of noise factor, support_rounds rounds "
                                     "of support_iterations sweeps estimate the PSF on it alone. None: no support "
                                     "step", Interval(float, 0, 1, "right", none=True)),
    "support_iterations": Option(5, "sweeps at the finest level with the PSF confined to its support, per round",
                                 POSITIVE_INT),
    "support_rounds": Option(3, "rounds of the support step, each finding the support again from the current PSF",
                             POSITIVE_INT),
    "psf_start": Option("flat", "the PSF's start at the coarsest level: 'flat' (uniform on its window) or 'peaked' (a "
                                "Gaussian of variance 1/2)", OneOf(PSF_STARTS)),
}
WIENER_ITER = 3    # EM steps of the Wiener start's scalar precision (see ``start_deconvolved``)
MIN_SIDE = 3       # the coarsest level's kernel window


# ------------------------------------------------------------------------------------------------ PSF step
def psf_normal_equations(mu: np.ndarray, g: np.ndarray, side: int):
    """(A, b) of |g - h * mu|^2 = h^T A h - 2 b^T h + |g|^2 for h on the centred ``side`` x ``side`` window
    (row-major): A_jl = R(o_j - o_l) with R the circular autocorrelation of mu, b_j = (g correlated with mu)(o_j)."""
    shape = mu.shape
    mu_hat = _fft.rfft2(mu)
    auto = _fft.irfft2(np.abs(mu_hat) ** 2, shape)
    cross = _fft.irfft2(_fft.rfft2(g) * np.conj(mu_hat), shape)
    off = np.arange(side) - side // 2
    dr = np.repeat(off, side)
    dc = np.tile(off, side)
    A = auto[(dr[:, None] - dr[None, :]) % shape[0], (dc[:, None] - dc[None, :]) % shape[1]]
    b = cross[dr % shape[0], dc % shape[1]]
    return A, b


def simplex_qp(A: np.ndarray, b: np.ndarray, *, penalty: float = 1e8, working: np.ndarray | None = None) -> np.ndarray:
    """argmin 1/2 h^T A h - b^T h subject to h >= 0, sum(h) = 1, for a positive-definite A.

    Written as the non-negative least-squares problem |L^T h - L^-1 b|^2 + w^2 (1^T h - 1)^2 (A = L L^T) and
    solved by scipy's Lawson-Hanson ``nnls``; the weight w^2 = ``penalty`` x trace(A) / n makes the sum 1 to within
    about 1 / penalty of the multiplier's scale, and the result is rescaled to sum exactly 1.

    ``working`` (boolean, optional) guesses which entries are positive: the problem is solved on those entries, and
    every entry whose gradient is negative at that solution (the penalised problem's KKT condition for a zero) joins
    them for another solve, until none does. The minimiser is the same; the solves are smaller when most of the
    window is zero."""
    n = b.size
    weight2 = penalty * np.trace(A) / n
    free = np.ones(n, bool) if working is None else np.asarray(working, bool).copy()
    tol = 1e-9 * (np.abs(b).max() + np.abs(A).max())
    while True:
        h = np.zeros(n)
        if free.any():
            h[free] = _penalised_nnls(A[np.ix_(free, free)], b[free], weight2)
        grad = A @ h - b + weight2 * (h.sum() - 1.0)
        enter = ~free & (grad < -tol)
        if not enter.any():
            break
        free |= enter
    total = h.sum()
    if not total > 0:
        raise ValueError("vb_sparse: the PSF step returned an all-zero kernel")
    return h / total


def _penalised_nnls(A: np.ndarray, b: np.ndarray, weight2: float) -> np.ndarray:
    """argmin_{h >= 0} 1/2 h^T A h - b^T h + weight2 / 2 (1^T h - 1)^2 by ``nnls`` (``simplex_qp``)."""
    n = b.size
    L = cholesky(A, what="the PSF step's quadratic form")
    target = scipy.linalg.solve_triangular(L, b, lower=True)
    w = math.sqrt(weight2)
    design = np.vstack([L.T, np.full((1, n), w)])
    return scipy.optimize.nnls(design, np.append(target, w), maxiter=50 * n)[0]


# ------------------------------------------------------------------------------------------------ one level
class SparseVB:
    """The factors of one pyramid level and their updates; each ``update_*`` maximises the bound over its block.

    Works in the derivative domain: y_k = Q^k g = h * x_k + n_k with x_k = Q^k f the latent derivative images."""

    def __init__(self, g, psf, *, a: float, b: float, noise_var: float, learn_noise: bool,
                 cg_max_iter: int = 100, cg_tol: float = 1e-6):
        self.g = np.asarray(g, dtype=float)
        self.shape = self.g.shape
        self.M = self.g.size
        self.ys = [_fft.apply_stencil(self.g, s) for s in DIFFS]
        self.a, self.b = float(a), float(b)
        self.noise_var = float(noise_var)
        self.learn_noise = learn_noise
        self.cg_max_iter, self.cg_tol = cg_max_iter, cg_tol
        self.psf = np.asarray(psf, dtype=float)
        self.support = None          # the PSF step's entries of the window (a boolean mask); None: all of them
        self.mu = [y.copy() for y in self.ys]
        self.v = [np.zeros(self.shape) for _ in self.ys]
        self.update_gamma()          # q(gamma) from the observed derivatives (v = 0)

    def start_deconvolved(self, iterations: int = WIENER_ITER):
        """Start q(x_k)'s mean from a Wiener restoration of y_k with the current PSF, and q(gamma) from it.

        Starting from x_k = y_k makes the first PSF steps explain blurred edges with a sharp kernel; a
        deconvolved start keeps the coarser level's kernel in the picture. The restoration is the posterior mean
        of y_k = h * x_k + n_k under x_k ~ N(0, I / c_k), (H^T H / s^2 + c_k I)^-1 H^T y_k / s^2, solved in the
        Fourier domain. c_k starts at M / |y_k|^2 and takes ``iterations`` steps of the Gaussian model's EM update
        c_k = M / (|mu_k|^2 + sum(v_k)); run to its fixed point the restoration is too noisy for the PSF step,
        which then spreads the kernel. q(gamma) is taken from the mean alone (v_k = 0), as for the blurred start."""
        h_otf = self.h_otf()
        beta = 1.0 / self.noise_var
        hh = np.abs(h_otf) ** 2
        weight = np.ones(hh.shape)
        weight[:, 1:(self.shape[1] + 1) // 2] = 2.0      # rfft2 stores each conjugate pair once
        self.wiener_precision = []
        for k, y in enumerate(self.ys):
            rhs = beta * np.conj(h_otf) * _fft.rfft2(y)
            c = self.M / max(float(np.sum(y * y)), 1e-300)
            for _ in range(iterations):
                denom = beta * hh + c
                var = float(np.sum(weight / denom)) / self.M
                power = float(np.sum(weight * np.abs(rhs / denom) ** 2)) / self.M   # Parseval: |mu_k|^2
                c = self.M / (power + self.M * var)
            self.mu[k] = _fft.irfft2(rhs / (beta * hh + c), self.shape)
            self.wiener_precision.append(c)
        self.v = [np.zeros(self.shape) for _ in self.ys]
        self.update_gamma()

    # ---- expectations ------------------------------------------------------------------------------------
    @property
    def shape_post(self) -> float:
        return self.a + 0.5

    def E_gamma(self):
        return [self.shape_post / r for r in self.rate]

    def h_otf(self):
        return _fft.otf(self.psf, self.shape)

    def expected_residual(self) -> float:
        """sum_k <|y_k - h * x_k|^2> = sum_k |y_k - h * mu_k|^2 + |h|^2 sum(v_k)."""
        h_otf = self.h_otf()
        total = 0.0
        for y, m, v in zip(self.ys, self.mu, self.v):
            r = y - _fft.conv(m, h_otf)
            total += float(np.sum(r * r) + np.sum(self.psf**2) * np.sum(v))
        return total

    # ---- updates -----------------------------------------------------------------------------------------
    def update_f(self):
        """q(x_k): mu_k by PCG on (H^T H / s^2 + diag(<gamma_k>)) mu_k = H^T y_k / s^2, v_k = 1 / (|h|^2 / s^2 +
        <gamma_k>), the diagonal of that matrix."""
        h_otf = self.h_otf()
        beta = 1.0 / self.noise_var
        hh = np.abs(h_otf) ** 2
        self.cg_its = 0
        for k, gk in enumerate(self.E_gamma()):
            def apply(x, gk=gk):
                return beta * _fft.irfft2(hh * _fft.rfft2(x), self.shape) + gk * x
            # Jacobi preconditioner: the precisions gamma span many decades (flat regions against edges), which a
            # circulant preconditioner (their mean) cannot follow
            diag = beta * np.sum(self.psf**2) + gk
            rhs = beta * _fft.corr(self.ys[k], h_otf)
            self.mu[k], its, _ = _fft.pcg(apply, rhs, lambda r, diag=diag: r / diag, self.mu[k],
                                          max_iter=self.cg_max_iter, tol=self.cg_tol)
            self.cg_its += its
            self.v[k] = 1.0 / diag

    def update_gamma(self):
        """q(gamma_ki) = Gamma(a + 1/2, b + <x_ki^2> / 2), <x_ki^2> = mu_ki^2 + v_ki."""
        self.rate = [self.b + 0.5 * (m * m + v) for m, v in zip(self.mu, self.v)]

    def update_noise(self):
        """s^2 = <residual> / (2M), the bound's maximum over the noise variance (kept fixed when not learned)."""
        if self.learn_noise:
            self.noise_var = self.expected_residual() / (len(self.ys) * self.M)

    def update_psf(self):
        """h: argmin sum_k |y_k - h * mu_k|^2 + sum(v_k) |h|^2 on the simplex (``simplex_qp``), zero off
        ``support`` when it is set."""
        side = self.psf.shape[0]
        A = b = 0.0
        for y, m in zip(self.ys, self.mu):
            A_k, b_k = psf_normal_equations(m, y, side)
            A, b = A + A_k, b + b_k
        A[np.diag_indices_from(A)] += float(sum(np.sum(v) for v in self.v))
        keep = np.ones(side * side, bool) if self.support is None else self.support.ravel()
        # the previous kernel's positive entries start the working set: after a level's first sweeps most are zero
        working = (self.psf > 0).ravel()[keep]
        h = np.zeros(side * side)
        h[keep] = simplex_qp(A[np.ix_(keep, keep)], b[keep], working=working)
        self.psf = h.reshape(side, side)

    def sweep(self):
        self.update_f()
        self.update_gamma()
        self.update_noise()
        self.update_psf()

    def sweeps(self, count: int, bar=None) -> list[float]:
        """``count`` sweeps, all of them (``min_iter`` is the count: the estimation's schedule has no stopping rule);
        the bound after each. ``bar``: the run's progress bar, advanced once a sweep."""
        run = iterate(Algorithm(lambda vb: Sweeps(vb, None), _sweep), self, max_iter=count, min_iter=count, tol=0.0,
                      owner="vb_sparse", change_name="relative change of the bound", bar=bar)
        return run.trace.tolist()

    # ---- the bound ---------------------------------------------------------------------------------------
    def bound(self) -> float:
        """F of the module docstring for the current factors and point estimates."""
        n = len(self.ys) * self.M
        lik = -0.5 * n * (C.LOG_2PI + math.log(self.noise_var)) - 0.5 * self.expected_residual() / self.noise_var
        prior = hyper = ent = 0.0
        for rate, m, v in zip(self.rate, self.mu, self.v):
            E_g, E_log_g = C.gamma_moments(self.shape_post, rate)
            prior += np.sum(0.5 * E_log_g - 0.5 * C.LOG_2PI - 0.5 * E_g * (m * m + v))
            hyper += C.gamma_log_prior(self.a, self.b, E_g, E_log_g)
            ent += C.gamma_entropy(self.shape_post, rate)
            ent += 0.5 * np.sum(np.log(2.0 * math.pi * math.e * v)) if np.all(v > 0) else -math.inf
        return float(lik + prior + hyper + ent)


# ------------------------------------------------------------------------------------------------ pyramid
def odd(x: float) -> int:
    """The odd integer nearest to x (at least MIN_SIDE)."""
    n = int(round(x))
    if n % 2 == 0:
        n = n + 1 if x >= n else n - 1
    return max(MIN_SIDE, n)


def pyramid(shape, side: int, ratio: float):
    """Levels from coarse to fine: (image shape, kernel side) with sides reduced by ``ratio`` per level until the
    kernel window is MIN_SIDE (or the image would be smaller than twice the kernel)."""
    levels = [(tuple(shape), side)]
    scale = 1.0
    while levels[-1][1] > MIN_SIDE:
        scale /= ratio
        k = odd(side * scale)
        small = tuple(max(2, int(round(n * scale))) for n in shape)
        if min(small) < 2 * k:
            break
        levels.append((small, k))
    return levels[::-1]


def resize(image, shape):
    """Periodic anti-aliased resampling (the images are circular)."""
    from skimage.transform import resize as _resize

    return _resize(image, shape, order=1, mode="wrap", anti_aliasing=True)


def resize_psf(psf, side: int):
    """The kernel resampled to a side x side window (bilinear), made non-negative and unit-sum."""
    from skimage.transform import resize as _resize

    h = np.maximum(_resize(psf, (side, side), order=1, mode="constant", anti_aliasing=False), 0.0)
    return h / h.sum() if h.sum() > 0 else np.full((side, side), 1.0 / side**2)


def recentre(psf: np.ndarray) -> np.ndarray:
    """The kernel shifted by whole pixels (circularly in its window) so that its centre of mass is the window's
    centre: h and f are only determined up to opposite shifts, and the pyramid and restoration expect a centred
    kernel."""
    side = psf.shape[0]
    x = np.arange(side) - side // 2
    total = psf.sum()
    dr = int(round(float(np.sum(psf.sum(axis=1) * x) / total)))
    dc = int(round(float(np.sum(psf.sum(axis=0) * x) / total)))
    return np.roll(psf, (-dr, -dc), axis=(0, 1))


def initial_psf(side: int, start: str = "flat") -> np.ndarray:
    """The coarsest level's start: flat on the window, or "peaked", a Gaussian of variance 1/2 (a slightly blurred
    delta). From the peaked start a kernel whose mass lies away from its centre (two heavy ends of a shake path)
    stays at the compact no-blur solution at every level; the flat one starts on the blurred side of it."""
    if start == "flat":
        return np.full((side, side), 1.0 / side**2)
    x = np.arange(side) - side // 2
    h = np.exp(-(x[:, None] ** 2 + x[None, :] ** 2))
    return h / h.sum()


class Sweeps(NamedTuple):
    """The driver's state of :meth:`SparseVB.sweeps`: the factors ``vb`` (updated in place by each sweep) and
    ``objective``, the bound after the last sweep (None before the first)."""

    vb: SparseVB
    objective: float | None


class SweepInfo(NamedTuple):
    """One sweep: the bound after it (``objective``) and its change relative to the bound (``change``)."""

    objective: float
    change: float


def _sweep(s: Sweeps) -> tuple[Sweeps, SweepInfo]:
    s.vb.sweep()
    bound = s.vb.bound()
    change = math.inf if s.objective is None else abs(bound - s.objective) / max(abs(bound), 1e-300)
    return Sweeps(s.vb, bound), SweepInfo(bound, change)


class Level(NamedTuple):
    """One level of the coarse-to-fine PSF estimation (:func:`estimate`).

    shape
        The image's shape at this level, [rows, cols].
    psf_side
        The PSF's side at this level.
    bound
        The bound after each sweep.
    noise_var
        The derivative domain's s^2 at the end of the level.
    """

    shape: list
    psf_side: int
    bound: list
    noise_var: float


class Path(NamedTuple):
    """The estimation under one noise inflation: the ``noise_inflation``, the finest level's ``state``, the
    ``levels`` of the coarse-to-fine run and the ``trace`` of the bound the choice between paths compares (the finest
    level's, or that of the refinement under the smallest inflation)."""

    noise_inflation: float
    state: object
    levels: list
    trace: list


def estimate(g, *, side: int, a: float, b: float, noise_var: float, learn_noise: bool, max_iter: int,
             scale_ratio: float, cg_max_iter: int, cg_tol: float, level_start: str, psf_start: str, bar=None):
    """Coarse-to-fine PSF estimation (module doc), ``max_iter`` sweeps per level; ``noise_var`` is the derivative
    domain's s^2 (the start when ``learn_noise``). Returns the finest level's state (PSF recentred) and a
    :class:`Level` for every level."""
    levels = pyramid(g.shape, side, scale_ratio)
    psf = initial_psf(levels[0][1], psf_start)
    summary = []
    state = None
    for shape, k in levels:
        g_l = g if shape == g.shape else resize(g, shape)
        psf = resize_psf(psf, k) if psf.shape[0] != k else psf
        state = SparseVB(g_l, psf, a=a, b=b, noise_var=noise_var, learn_noise=learn_noise, cg_max_iter=cg_max_iter,
                         cg_tol=cg_tol)
        if level_start == "deconvolved" and summary:
            state.start_deconvolved()
        trace = state.sweeps(max_iter, bar)
        psf = recentre(state.psf)
        summary.append(Level(shape=list(shape), psf_side=k, bound=trace, noise_var=state.noise_var))
    state.psf = psf
    return state, summary


def refine(g, psf, *, a: float, b: float, noise_var: float, learn_noise: bool, max_iter: int, cg_max_iter: int,
           cg_tol: float, bar=None):
    """The finest level run again from ``psf`` under ``noise_var``: q(x) from a Wiener restoration with it, then
    ``max_iter`` sweeps. Returns the state (PSF recentred) and its bound trace."""
    state = SparseVB(g, psf, a=a, b=b, noise_var=noise_var, learn_noise=learn_noise, cg_max_iter=cg_max_iter,
                     cg_tol=cg_tol)
    state.start_deconvolved()
    trace = state.sweeps(max_iter, bar)
    state.psf = recentre(state.psf)
    return state, trace


def support_mask(psf: np.ndarray, threshold: float) -> np.ndarray:
    """The entries at or above ``threshold`` x the peak, grown by one pixel (4-neighbours)."""
    return scipy.ndimage.binary_dilation(psf >= threshold * psf.max())


def restrict_support(state: SparseVB, threshold: float, count: int, bar=None) -> list[float]:
    """``count`` sweeps of ``state`` with the PSF step confined to ``support_mask`` of its PSF; the PSF is
    recentred after them. Returns the bound trace."""
    state.support = support_mask(state.psf, threshold)
    trace = state.sweeps(count, bar)
    state.psf = recentre(state.psf)
    return trace


def mad_noise_sd(g: np.ndarray) -> float:
    """Noise sd from the finest diagonal Haar detail of the degraded image (Donoho's MAD rule, median / 0.6745):
    the blur removes almost all of the image's content at that scale, what is left is noise."""
    d = (g[:-1:2, :-1:2] - g[1::2, :-1:2] - g[:-1:2, 1::2] + g[1::2, 1::2]) / 2.0
    return float(np.median(np.abs(d)) / 0.6745)


# ------------------------------------------------------------------------------------------------ backend
def _check(options: dict, model, data, owner: str) -> None:
    side = options["psf_side"]
    if side is None:
        return
    if side % 2 == 0:
        raise ValueError(f"{owner}: option 'psf_side' must be None or an odd positive integer; got {side!r}")
    rows, cols = model.image_shape(data)
    if side > min(rows, cols):
        raise ValueError(f"{owner}: option 'psf_side' must be at most the image's side ({rows} x {cols}); got {side}")


def _unavailable(model):
    if model.known:
        return ("vb_sparse estimates the PSF, and this model takes it as known (psf='known'): use gibbs or vb, or "
                "BID(psf='blind') to see what vb_sparse estimates")
    if model.priors[2] != "St":
        return ("vb_sparse restores under the St image prior (first differences); the model's image prior is "
                f"{model.priors[2]!r} (variant {model.variant!r})")
    return None


@register("vb_sparse", kind="approximation", family="bid", options=OPTIONS, check=_check,
          defaults={**APPROXIMATION_DEFAULTS, "draws": 1, "chains": 1}, unavailable=_unavailable,
          memory=C.memory(72),
          description="variational blind deconvolution (Levin et al. 2011, Babacan et al. 2012): sparse derivative "
                      "prior, diagonal q(x), non-negative unit-sum PSF by NNLS, coarse to fine, HQS restoration")
def run(model, data, *, draws, tune, chains, ctx, **opts):
    """Estimate the PSF coarse to fine, then restore the image with it (module doc); point estimates."""
    g = model.observed_image(data)
    shape = g.shape
    side = opts["psf_side"] or model.psf_size or min(31, min(shape) if min(shape) % 2 else min(shape) - 1)
    unit = model.intensity_unit(g)
    sigma = opts["noise_sd"] * unit if opts["noise_sd"] is not None else mad_noise_sd(g)
    if not sigma > 0:
        sigma = 1e-3 * unit           # a noiseless image: a small floor keeps the precisions finite
    timer = C.Timer()
    levels = pyramid(shape, side, opts["scale_ratio"])
    factors = opts["noise_inflation"]              # a tuple (its constraint)
    settings = dict(a=opts["prior_shape"], b=opts["prior_rate"] * unit**2, learn_noise=opts["learn_noise"],
                    max_iter=opts["max_iter"], cg_max_iter=opts["cg_max_iter"], cg_tol=opts["cg_tol"])
    support_rounds = opts["support_rounds"] if opts["support_threshold"] is not None else 0
    steps = (opts["max_iter"] * len(factors) * (len(levels) + (len(factors) > 1))
             + support_rounds * opts["support_iterations"])
    paths = []
    with progress_bar(total=steps, desc="bid vb_sparse", disable=not ctx.progress, unit="step") as bar:
        for factor in factors:
            state, summary = estimate(g, side=side, noise_var=factor * 2.0 * sigma**2,
                                      scale_ratio=opts["scale_ratio"], level_start=opts["level_start"],
                                      psf_start=opts["psf_start"], bar=bar, **settings)
            paths.append(Path(noise_inflation=float(factor), state=state, levels=summary, trace=summary[-1].bound))
        if len(paths) > 1:
            for i, path in enumerate(paths):
                refined, trace = refine(g, path.state.psf, noise_var=min(factors) * 2.0 * sigma**2, bar=bar,
                                        **settings)
                paths[i] = path._replace(state=refined, trace=trace)
        chosen = max(paths, key=lambda path: path.trace[-1])
        state, summary = chosen.state, chosen.levels
        support = {"threshold": opts["support_threshold"], "entries": [], "bound": []}
        for _ in range(support_rounds):
            support["bound"] += restrict_support(state, opts["support_threshold"], opts["support_iterations"], bar)
            support["entries"].append(int(state.support.sum()))
    t_est = timer()
    prior = model.precision_priors(g)
    image, hqs_trace = hqs_restore(g, state.psf, noise_var=sigma**2, a=prior["a_gamma"], b=prior["b_gamma"])
    t_total = timer()
    V = model.psf_view_side(shape)
    psf_view = _fft.window(_fft.embed(state.psf, shape), V)
    finest = np.array(chosen.trace + support["bound"])
    estimate_ = PointEstimate(values={"image": image, "psf": psf_view}, objective={"elbo": finest},
                              objective_name="elbo", iterations=steps, converged=None)
    info = {"bound": float(finest[-1]), "noise_sd": float(sigma), "psf_side": int(side),
            "levels": [level._asdict() for level in summary], "noise_inflation": chosen.noise_inflation,
            "paths": [{"noise_inflation": p.noise_inflation, "bound": float(p.trace[-1]),
                       "coarse_to_fine_bound": float(p.levels[-1].bound[-1])} for p in paths],
            "support": support,
            "hqs_objective": hqs_trace.tolist(), "estimation_seconds": t_est,
            "restoration_seconds": t_total - t_est, "seconds_per_iteration": t_est / steps}
    return approximation_fit(model, data, estimate_, ctx=ctx, draws=draws, chains=chains,
                             timing={"tune": t_total}, info=info)
