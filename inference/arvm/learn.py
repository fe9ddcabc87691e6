"""``arvm``: Algorithm 1 of Tzikas, Likas, Galatsanos (2009), "Sparse Infinite Linear Model Learning" [P §III-B].

Starting from an empty model, every iteration

1. draws ``n_candidates`` inactive basis functions (centre at a training point chosen with probability
   proportional to the squared residual [P 60], width log-uniform in ``model.width_range``; the source gives
   no range), optimises each one's kernel parameters for at most ``candidate_iter`` BFGS iterations on its
   add gain l^s(alpha*(theta), theta) [P 42, 44, 50] with the gradient [P 51] (errata: coefficient
   q^2 + 2c alpha, and R, W taken with C^-1; for an inactive candidate r = R and w = W), and adds the best one
   if its gain is positive;
2. optimises the centres and widths of all active bases jointly by BFGS (at most ``joint_iter`` iterations)
   on L^s [P 38] with the chain-rule gradient D [P 61-62] (errata: the sparsity term is -2c B Phi Sigma A Sigma);
   by default (``joint_step="feasible"``) the step follows the BFGS path only while every basis reaches
   ``min_peak`` and ends at its last such point (where L^s has risen), so that steps 1-4 all ascend L^s on one
   set; ``"unbounded"`` is the paper's step, which can move a basis off the data for step 4 to prune, and then
   L^s can cycle;
3. re-estimates alpha and beta: ``alpha_update="exact"`` (default) solves the exact stationarity condition of
   L^s in log alpha_i (digest 2.3: the derivative has c alpha_i (Sigma Phi^T B Phi Sigma)_ii, not the
   diagonal-only term of [P 39]), ``"paper"`` uses [P 40]; beta by the exact log-derivative of L^s [P 41,
   corrected] (regression; classification uses B and t-hat of the Laplace approximation [P 19-20]);
4. removes bases whose alpha exceeds ``prune_alpha`` (1e12) or whose stationarity condition has no finite root;
5. stops when L^s has grown by less than ``tol`` (1e-6) in ``patience`` (10) successive iterations; the run counts as
   converged only if L^s did not fall in them, and every fall of L^s is reported in a warning.

The paper's settings are the defaults (100 candidates x 10 BFGS iterations, 100 joint iterations). Widths are
optimised on the log scale (the kernel is symmetric in +-h; digest pitfall 6), above the floor
``model.min_width`` (h = floor + exp(u)); centres are kept in the bounding box of the training inputs, and a
basis must reach ``min_peak`` (0.05) at one training input at least (choices of this implementation, explained
in the README). With ``feature_selection``
(PhD ch. 7, Algorithm 2) the per-direction inverse widths v are optimised directly, with the penalty
-1/2 sum delta v^2 [PhD 7.12-7.13] and delta = 1/v^2 [PhD 7.14] after each iteration; a direction whose delta
exceeds ``delta_max`` is switched off (v = 0, a fixed point of the updates).

The candidate search runs as one batched BFGS over all candidates (NumPy; each candidate's problem is
independent, so this is the same as running them one by one); its line search evaluates values only, on the
candidates still searching. Gradients contract the kernel derivatives with their weights directly
(``Kernel.contract``) instead of forming the N x B x P derivative array, and the whole run uses one BLAS thread
below 1000 points (timings in BENCHMARKS.md).

Options for known-noise problems (the fMRI maps): ``beta`` holds the noise precision fixed, ``noise_whitener``
W fits W t with bases W phi (known coloured noise), and ``dictionary`` replaces the random candidates by a fixed
set of kernels scored in closed form (the incremental RVM with the sparsity prior [P 42-44]).
"""
from __future__ import annotations

import dataclasses
import time
import warnings
from typing import NamedTuple

import numpy as np
from scipy import optimize

from bayeszoo import checks
from bayeszoo.checks import NON_NEGATIVE_INT, POSITIVE, POSITIVE_INT, Array, Interval, OneOf
from bayeszoo.inference.approximations import GaussianApproximation, approximation_fit
from bayeszoo.inference.iterative import Algorithm, iterate
from bayeszoo.inference.rvm import core as C
from bayeszoo.models.rvm import LOG_ALPHA_PRUNED
from bayeszoo.numerics.blas_threads import one_blas_thread
from bayeszoo.registry import Option, register
from bayeszoo.memory_guard import Need, dense


class KernelDictionary:
    """The ``dictionary`` option: None or a pair (centres (J, D) or (J,), widths (J,) or (J, K)) of finite numbers,
    widths > 0, for the same J >= 1; returned as two 2-D float arrays (the columns are checked with the data)."""

    def __call__(self, who: str, name: str, value):
        if value is None:
            return None
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
            raise ValueError(f"{who}: {name} must be a pair (centres (J, D), widths (J,) or (J, K)); got {shown}")
        centres, widths = (checks.finite_array(who, name, part) for part in value)
        centres = centres[:, None] if centres.ndim == 1 else centres
        widths = widths[:, None] if widths.ndim == 1 else widths
        if centres.ndim != 2 or widths.ndim != 2 or centres.shape[0] != widths.shape[0] or centres.shape[0] == 0:
            raise ValueError(f"{who}: {name} needs centres (J, D) and widths (J,) or (J, K) for the same J >= 1; "
                             f"got {centres.shape} and {widths.shape}")
        if not np.all(widths > 0):
            raise ValueError(f"{who}: {name} needs positive widths")
        return centres, widths


POSITIVE_OR_NONE = Interval(float, 0, None, "neither", none=True)
OPTIONS = {
    "n_candidates": Option(100, "random candidate bases drawn per iteration (step 1)", POSITIVE_INT),
    "candidate_iter": Option(10, "BFGS iterations on each candidate's centre and width(s) (0: none)",
                             NON_NEGATIVE_INT),
    "joint_iter": Option(100, "BFGS iterations on all active centres and widths jointly (step 2; 0: none)",
                         NON_NEGATIVE_INT),
    "max_iter": Option(300, "largest number of iterations of Algorithm 1", POSITIVE_INT),
    "tol": Option(1e-6, "an iteration in which L^s grows by less than this counts as no progress", POSITIVE),
    "patience": Option(10, "stop after this many successive iterations without progress (step 5)", POSITIVE_INT),
    "prune_alpha": Option(1e12, "a basis whose alpha exceeds this is removed (step 4)", POSITIVE),
    "alpha_update": Option("exact", "'exact' (stationary point of L^s) or 'paper' (the update printed as [P 40])",
                           OneOf(("exact", "paper"))),
    "hyper_sweeps": Option(20, "largest number of alpha / beta fixed-point sweeps per iteration (step 3)",
                           POSITIVE_INT),
    "beta": Option(None, "known noise precision, held fixed (regression); None: estimated", POSITIVE_OR_NONE),
    "init_beta": Option(None, "starting noise precision when it is estimated; None: 10 / var(t)", POSITIVE_OR_NONE),
    "delta_max": Option(1e6, "feature selection: a direction whose delta = 1 / v^2 exceeds this is switched off",
                        POSITIVE),
    "min_alpha": Option(None, "classification: lower bound on every alpha; None: 1e-2", POSITIVE_OR_NONE),
    "min_peak": Option(0.05, "a basis must reach this value at one training input at least, in [0, 1)",
                       Interval(float, 0, 1, "left")),
    "joint_step": Option("feasible", "'feasible': step 2 follows its BFGS path only while every basis reaches min_peak "
                                     "(steps 1-4 then ascend L^s on one set); 'unbounded': the paper's step 2, which "
                                     "may move bases below min_peak for step 4 to prune, so that L^s can cycle",
                         OneOf(("feasible", "unbounded"))),
    "dictionary": Option(None, "fixed candidate kernels (centres (J, D), widths (J,) or (J, K)), not optimised; "
                               "None: random candidates", KernelDictionary()),
    "max_cost": Option(10.0, "largest predicted seconds of one iteration (candidate search + joint step): a problem "
                             "beyond it is refused before any work, and a basis that would take the joint step "
                             "beyond it is not added (with a warning)", POSITIVE),
    "noise_whitener": Option(None, "N x N matrix W that makes the noise of W t white (known coloured noise): "
                                   "W t is fitted with bases W phi; None: white noise", Array(ndim=2, none=True)),
}
#: the defaults, for calling :func:`learn` directly
DEFAULT_OPTIONS = {name: opt.default for name, opt in OPTIONS.items()}


def check(options: dict, model, data, owner: str) -> dict:
    """What the options must be for this model and data: the dictionary's columns, a whitener with one row and
    column per training point (regression only), and an iteration within ``max_cost`` (:func:`check_cost`)."""
    if options["dictionary"] is not None:
        centres, widths = options["dictionary"]
        K = model.width_dims(data.d)
        if centres.shape[1] != data.d or widths.shape[1] != K:
            raise ValueError(f"{owner}: option 'dictionary' needs centres (J, {data.d}) and widths (J, {K}) for this "
                             f"model and data; got {centres.shape} and {widths.shape}")
    W = options["noise_whitener"]
    if W is not None:
        if model.is_classifier:
            raise ValueError(f"{owner}: option 'noise_whitener' applies to regression only")
        if W.shape != (data.n, data.n):
            raise ValueError(f"{owner}: option 'noise_whitener' must be {data.n} x {data.n} (one row and column per "
                             f"training point); got {W.shape}")
    check_cost(model, data.n, data.d, options, options["dictionary"], W, owner=owner)
    return options


# ---------------------------------------------------------------------------------------------- kernel
class Kernel:
    """phi(x; m, u) = exp(-sum_j v_j^2 (x_j - m_j)^2) and its derivatives in theta = (m, u) ([P 63-65]).

    ``mode="log_width"``: h = floor + exp(u) (K = 1 width per basis, or K = D), v = 1 / h; with floor = 0
    this is u = log h.
    ``mode="scale"``:     u = v itself (K = D), so a direction can be switched off (v = 0) [PhD 7.9]; |v| is capped
    at 1 / floor (the same lower bound on the width), with zero derivative beyond the cap.
    ``whiten`` (optional N x N matrix W): the model sees W phi, for known coloured noise (t -> W t).
    """

    def __init__(self, X, K: int, mode: str = "log_width", whiten=None, floor: float = 0.0, box: bool = True):
        self.X = np.asarray(X, float)
        self.N, self.D = self.X.shape
        self.K, self.mode, self.whiten, self.floor = K, mode, whiten, float(floor)
        self.P = self.D + K
        # centres stay in the bounding box of the training inputs (the samplable model's prior support): a
        # centre outside it lets a basis fit one point with the far tail of the Gaussian and a huge weight,
        # which then explodes at test inputs nearer the centre (seen on computer hardware)
        self.lo, self.hi = (self.X.min(0), self.X.max(0)) if box else (-np.inf, np.inf)

    def centre(self, m):
        return np.clip(m, self.lo, self.hi)

    def width(self, u):
        # u is clipped to +-30 only to keep exp finite: kernels that narrow or wide are spikes / constants
        return self.floor + np.exp(np.clip(u, -30.0, 30.0))

    def to_u(self, h):
        return np.log(np.maximum(h - self.floor, 1e-300)) if self.mode == "log_width" else 1.0 / h

    def inv_width(self, u):
        if self.mode == "log_width":
            return 1.0 / self.width(u)
        return np.minimum(np.abs(u), 1.0 / self.floor) if self.floor > 0 else np.abs(u)

    def split(self, theta):
        theta = theta.reshape(-1, self.P)
        return theta[:, :self.D], theta[:, self.D:]

    def parts(self, theta):
        """(m_free, u, v, diff, sq, phi) for parameter rows theta (B, P): phi (N, B) before whitening."""
        m_free, u = self.split(theta)
        v = self.inv_width(u)
        diff = self.X[:, None, :] - self.centre(m_free)[None]
        sq = diff**2 * (v**2)[None]
        return m_free, u, v, diff, sq, np.exp(-np.sum(sq, axis=2))

    def eval(self, theta, grad: bool = False):
        """phi (N, B) for parameter rows theta (B, P); with ``grad`` also d phi / d theta (N, B, P) (the learning
        code uses :meth:`contract` instead)."""
        m_free, u, v, diff, sq, phi = self.parts(theta)
        if not grad:
            return self._w(phi)
        inside = ((m_free >= self.lo) & (m_free <= self.hi))[None]                # zero beyond the box
        d_m = 2.0 * diff * (v**2)[None] * phi[..., None] * inside                 # [P 64]
        if self.mode == "log_width":                                               # [P 65] times dh/du = h - floor
            rate = (1.0 - self.floor * v)[None]                                    # (h - floor) / h
            d_u = 2.0 * (np.sum(sq, 2, keepdims=True) if self.K == 1 else sq) * rate * phi[..., None]
        else:
            live = (np.abs(u) < 1.0 / max(self.floor, 1e-300))[None]
            d_u = -2.0 * np.sign(u)[None] * v[None] * diff**2 * phi[..., None] * live
        dphi = np.concatenate([d_m, d_u], axis=2)
        return self._w(phi), self._w(dphi)

    def contract(self, parts, A, whitened: bool = True):
        """sum_n A[k, n, b] d phi_w(x_n; theta_b) / d theta_b for stacked weights A (k, N, B): (k, B, P).

        phi_w is the (whitened) basis the model sees; d phi itself (N x B x P) is never formed, so a gradient
        costs O(k N B D) [P 64-65]."""
        m_free, u, v, diff, sq, phi = parts
        if whitened and self.whiten is not None:
            A = np.einsum("nm,knb->kmb", self.whiten, A)          # sum_n A_n (W dphi)_n = sum_m (W^T A)_m dphi_m
        Ap = A * phi[None]
        inside = (m_free >= self.lo) & (m_free <= self.hi)           # zero beyond the box
        d_m = 2.0 * np.einsum("knb,nbd->kbd", Ap, diff) * (v**2 * inside)[None]                       # [P 64]
        if self.mode == "log_width":                                 # [P 65] times dh/du = h - floor
            rate = 1.0 - self.floor * v                              # (h - floor) / h
            d_u = 2.0 * np.einsum("knb,nbj->kbj", Ap, sq.sum(2, keepdims=True) if self.K == 1 else sq) * rate[None]
        else:
            live = np.abs(u) < 1.0 / max(self.floor, 1e-300)
            d_u = -2.0 * np.einsum("knb,nbd->kbd", Ap, diff**2) * (np.sign(u) * v * live)[None]
        return np.concatenate([d_m, d_u], axis=2)

    def peak(self, theta):
        """max_n phi(x_n; theta) per row (before whitening)."""
        return self.parts(theta)[5].max(axis=0)

    def _w(self, a):
        if self.whiten is None:
            return a
        return np.tensordot(self.whiten, a, axes=(1, 0))


# ---------------------------------------------------------------------------------------------- state
class State:
    """The current model: active kernel parameters, alpha, noise B and targets t-hat, and N(mu, Sigma)."""

    def __init__(self, kernel: Kernel, t, c: float, classifier: bool, beta: float | None):
        self.kernel, self.c, self.clf = kernel, c, classifier
        self.min_peak = 0.0
        self.t = kernel._w(np.asarray(t, float)) if not classifier else np.asarray(t, float)
        self.theta = np.zeros((0, kernel.P))
        self.alpha = np.zeros(0)
        self.beta = beta
        # largest noise precision: 1e12 / mean(t^2), a noise sd of 1e-6 of the targets' scale. With flat priors the
        # ML beta is infinite when the bases interpolate the targets (few points, noise-free targets)
        scale2 = float(np.mean(self.t**2)) if self.t.size else 0.0
        self.beta_max = 1e12 / (scale2 if scale2 > 0 else 1.0)
        self.w_mode = np.zeros(0)
        self.refresh()

    @property
    def M(self) -> int:
        return self.alpha.size

    def refresh(self, Phi=None):
        """Recompute Phi, the noise precisions B, t-hat and the Gaussian N(mu, Sigma) of w."""
        self.Phi = self.kernel.eval(self.theta) if Phi is None else Phi
        if self.clf:
            if self.M:
                post, W, g, ll, _ = C.laplace_mode(self.Phi, self.t, self.alpha, "logit", w0=self.w_mode)
                self.w_mode = post.mu
                f = self.Phi @ post.mu
            else:
                f = np.zeros(self.kernel.N)
                ll, g, W = C.link_terms(f, self.t, "logit")
                post = None
            self.B = np.maximum(W, 1e-8)                 # [P 19], clipped so B^-1 stays finite (pitfall 8)
            self.that = f + g / self.B                  # [P 20]
            self.loglik = ll
        else:
            self.B = np.full(self.kernel.N, self.beta)
            self.that = self.t
        self.post = self._gaussian(self.Phi, self.alpha) if self.M else None
        self._cinv_that = None

    def _gaussian(self, Phi, alpha):
        BPhi = Phi * self.B[:, None]
        H = Phi.T @ BPhi
        H[np.diag_indices(alpha.size)] += alpha
        return C.Gaussian(H, BPhi.T @ self.that)

    def cinv(self, V):
        """C^-1 V with C = B^-1 + Phi A^-1 Phi^T, by Woodbury on the active set [P 28-29]."""
        BV = V * self.B.reshape(-1, *([1] * (V.ndim - 1)))
        if not self.M:
            return BV
        BPhi = self.Phi * self.B[:, None]
        return BV - BPhi @ self.post.solve(self.Phi.T @ BV)

    @property
    def cinv_that(self):
        """C^-1 t-hat (the same for every candidate until the model changes)."""
        if self._cinv_that is None:
            self._cinv_that = self.cinv(self.that)
        return self._cinv_that

    def log_marginal(self) -> float:
        """Gaussian log N(t-hat | 0, C) (regression: the evidence; classification: its Laplace surrogate)."""
        N = self.kernel.N
        tBt = float(self.that @ (self.B * self.that))
        logdet_B = float(np.sum(np.log(self.B)))
        if not self.M:
            return -0.5 * (N * C.LOG_2PI - logdet_B + tBt)
        PtBt = (self.Phi * self.B[:, None]).T @ self.that
        return C.log_evidence(self.post, tBt, PtBt, self.alpha, logdet_B, N)

    def trace_S(self) -> float:
        """trace(Phi Sigma Phi^T B) = M - sum_i alpha_i Sigma_ii [P 37]."""
        return float(self.M - np.sum(self.alpha * np.diag(self.post.Sigma))) if self.M else 0.0

    def objective(self) -> float:
        """L^s = log evidence - c trace(S) [P 38] (classification: Laplace log evidence)."""
        if self.clf:
            if self.M:
                ev = C.laplace_log_evidence(self.post, self.alpha, self.loglik)
            else:
                ev = self.loglik
        else:
            ev = self.log_marginal()
        return ev - self.c * self.trace_S()

    def residual(self):
        if self.clf:
            from scipy.special import expit

            return self.t - expit(self.Phi @ self.w_mode if self.M else 0.0)
        return self.t - (self.Phi @ self.post.mu if self.M else 0.0)


# -------------------------------------------------------------------------------- step 1: candidates
def add_gain(s, q, c):
    """Profile gain l^s(alpha*) of adding a basis with factors s, q, at alpha* = s^2 / (q^2 - (2c+1) s) [P 44].

    Returns ``(gain, alpha*, d gain / d s, d gain / d q)``; zero (and alpha* = inf) where q^2 <= (2c+1) s.
    l^s(alpha) = 1/2 [log alpha - log(alpha + s) + q^2 / (alpha + s)] - c s / (alpha + s)  [P 42]
    """
    s = np.maximum(s, 1e-150)                               # a kernel that vanishes on the data has s ~ 0
    q2 = q * q
    d = q2 - (2 * c + 1) * s
    ok = (d > 1e-12 * q2) & (s > 1e-150)
    d = np.where(ok, d, 1.0)
    e = q2 - 2 * c * s                                       # > d > 0 where ok
    e = np.where(ok, e, 1.0)
    s = np.where(ok, s, 1.0)
    apls = s * e / d                                         # alpha* + s
    alpha = np.where(ok, s * s / d, np.inf)
    gain = np.where(ok, 0.5 * (np.log(s / e) + q2 / apls) - c * s / apls, 0.0)
    # [P 51] with the corrected coefficient (q^2 + 2c alpha): d l / d s = -(1/(a+s) + (q^2 + 2 c a)/(a+s)^2) / 2
    a_fin = np.where(ok, s * s / d, 0.0)
    dl_ds = np.where(ok, -0.5 * (1.0 / apls + (q2 + 2 * c * a_fin) / apls**2), 0.0)
    dl_dq = np.where(ok, q / apls, 0.0)
    return gain, alpha, dl_ds, dl_dq


def candidate_objective(state: State, theta, grad: bool = True):
    """Add gain of each candidate row of theta (B, P) and its gradient (B, P) (None without ``grad``).

    s = phi^T C^-1 phi, q = phi^T C^-1 t-hat (the candidate is inactive, so s = S, q = Q [P 22-25]);
    d s / d theta = 2 R, d q / d theta = W with R = phi^T C^-1 d phi, W = t-hat^T C^-1 d phi  [P 52-59, corrected].
    """
    kernel = state.kernel
    parts = kernel.parts(theta)
    phi = kernel._w(parts[5])
    Cphi = state.cinv(phi)
    Ct = state.cinv_that
    s = np.sum(phi * Cphi, 0)
    q = Ct @ phi
    gain, alpha, dl_ds, dl_dq = add_gain(s, q, state.c)
    # a basis must reach min_peak at some training input: one supported only by its far tail fits outliers with
    # huge weights that explode between the data (seen on computer hardware)
    on_data = parts[5].max(axis=0) >= state.min_peak
    gain, dl_ds, dl_dq = np.where(on_data, gain, 0.0), np.where(on_data, dl_ds, 0.0), np.where(on_data, dl_dq, 0.0)
    if not grad:
        return gain, None, alpha
    # = [P 51]: -(1/(a+s) + (q^2+2ca)/(a+s)^2) r + q/(a+s) w, with r = R = phi^T C^-1 dphi, w = W = t^T C^-1 dphi
    weights = 2.0 * dl_ds[None, :] * Cphi + dl_dq[None, :] * Ct[:, None]
    grad = kernel.contract(parts, weights[None])[0]
    return gain, grad, alpha


def batched_bfgs(fun, x0, maxiter: int):
    """Minimise independent problems, one per row of x0, by BFGS with Armijo backtracking, all rows at once.

    ``fun(x, grad) -> (f (B,), g (B, P) or None)``; the line search evaluates values only, and only on the rows
    still searching, so a row that converged (or accepted its step) costs nothing more. Returns ``(x, f)``.
    """
    x = np.array(x0, float)
    f, g = fun(x, True)
    Bn, P = x.shape
    eye = np.eye(P)
    Hinv = np.tile(eye, (Bn, 1, 1)) / np.maximum(np.linalg.norm(g, axis=1), 1e-8)[:, None, None]
    first = np.ones(Bn, bool)
    for _ in range(maxiter):
        live = np.flatnonzero(np.linalg.norm(g, axis=1) > 1e-10)
        if not live.size:
            break
        p = -np.einsum("bij,bj->bi", Hinv[live], g[live])
        slope = np.sum(g[live] * p, 1)
        reset = slope >= 0
        if reset.any():
            p[reset] = -g[live][reset]
            Hinv[live[reset]] = eye
            slope = np.sum(g[live] * p, 1)
        step = np.ones(live.size)
        ok = np.zeros(live.size, bool)
        fn = np.empty(live.size)
        todo = np.arange(live.size)
        for _ls in range(30):
            rows = live[todo]
            fv, _ = fun(x[rows] + step[todo, None] * p[todo], False)
            good = np.isfinite(fv) & (fv <= f[rows] + 1e-4 * step[todo] * slope[todo])
            ok[todo[good]], fn[todo[good]] = True, fv[good]
            todo = todo[~good]
            if not todo.size:
                break
            step[todo] *= 0.5
        if not ok.any():
            break
        acc = live[ok]
        xn = x[acc] + step[ok, None] * p[ok]
        _, gn = fun(xn, True)
        sv, yv = xn - x[acc], gn - g[acc]
        sy = np.sum(sv * yv, 1)
        upd = sy > 1e-12
        scale = first[acc] & upd                             # Nocedal & Wright (6.20): scale before the first update
        Hinv[acc[scale]] = eye * (sy[scale] / np.maximum(np.sum(yv[scale] ** 2, 1), 1e-300))[:, None, None]
        first[acc[scale]] = False
        # H <- V H V^T + rho s s^T with V = I - rho s y^T, expanded so that it costs O(P^2) per problem:
        # H - rho (s (y^T H) + (H y) s^T) + rho^2 (y^T H y) s s^T + rho s s^T
        rows = acc[upd]
        if rows.size:
            H, s_, y_, r_ = Hinv[rows], sv[upd], yv[upd], 1.0 / sy[upd]
            Hy, yH = np.einsum("bij,bj->bi", H, y_), np.einsum("bj,bjk->bk", y_, H)
            coef = r_ * r_ * np.sum(y_ * Hy, 1) + r_
            Hinv[rows] = (H - r_[:, None, None] * (s_[:, :, None] * yH[:, None, :] + Hy[:, :, None] * s_[:, None, :])
                          + coef[:, None, None] * (s_[:, :, None] * s_[:, None, :]))
        x[acc], f[acc], g[acc] = xn, fn[ok], gn
    return x, f


def draw_candidates(state: State, model, X, rng, n: int):
    """Centres at training points with p(m = x_n) ∝ eps_n^2 [P 60]; widths log-uniform in the model's range."""
    eps2 = state.residual() ** 2
    if state.kernel.whiten is not None or not np.any(eps2 > 0):
        eps2 = np.ones(X.shape[0])
    idx = rng.choice(X.shape[0], size=n, p=eps2 / eps2.sum())
    lo, hi = model.width_bounds(X)
    h = np.exp(rng.uniform(lo, hi, size=(n, lo.size)))
    u = state.kernel.to_u(np.maximum(h, 1.01 * state.kernel.floor))
    if state.kernel.mode == "scale":
        # feature selection: each direction starts switched off (v = 0, a fixed point) with probability 1/2, so
        # candidates that ignore a feature are proposed rather than hoped for from BFGS
        u = np.where(rng.random(u.shape) < 0.5, 0.0, u)
    return np.column_stack([X[idx], u])


# -------------------------------------------------------------------------------- step 2: joint update
def joint_objective(state: State, theta_flat, delta=None):
    """-L^s over all active kernel parameters (alpha, B, t-hat fixed) and its gradient by [P 61-62]."""
    theta = theta_flat.reshape(-1, state.kernel.P)
    parts = state.kernel.parts(theta)
    Phi = state.kernel._w(parts[5])
    try:
        post = state._gaussian(Phi, state.alpha)
    except np.linalg.LinAlgError:
        return np.inf, np.zeros_like(theta_flat)
    alpha, B, c = state.alpha, state.B, state.c
    BPhi = Phi * B[:, None]
    tBt = float(state.that @ (B * state.that))
    ev = C.log_evidence(post, tBt, BPhi.T @ state.that, alpha, float(np.sum(np.log(B))), state.kernel.N)
    Sigma, mu = post.Sigma, post.mu
    Ls = ev - c * (alpha.size - float(np.sum(alpha * np.diag(Sigma))))
    r = state.that - Phi @ mu
    PhiSigma = Phi @ Sigma
    # [P 62], corrected sign of the sparsity term: D = B[(t - Phi mu) mu^T - Phi Sigma] - 2c B Phi Sigma A Sigma
    Dm = B[:, None] * (np.outer(r, mu) - PhiSigma - 2.0 * c * PhiSigma @ (alpha[:, None] * Sigma))
    grad = state.kernel.contract(parts, Dm[None])[0]
    if delta is not None:                                    # [PhD 7.12-7.13]: -1/2 v^T Delta v
        u = theta[:, state.kernel.D:]
        Ls -= 0.5 * float(np.sum(delta * u**2))
        grad[:, state.kernel.D:] -= delta * u
    return -Ls, -grad.ravel()


def joint_step(state: State, delta, opts, report=None):
    """Step 2: BFGS on all active centres and widths; the new kernel parameters (M, P), or None to stay put.

    ``joint_step="unbounded"`` (the paper) takes BFGS's end point whenever it does not lower L^s, even if it moved
    a basis below ``min_peak``, which step 4 then prunes: on some data the two steps undo each other and L^s cycles
    (docs/families/arvm.md, "Steps over one feasible set"). ``"feasible"`` keeps step 2 on the set that steps 1
    and 4 enforce: the step follows the BFGS path while every basis reaches ``min_peak`` and ends at the last of
    those iterates at which L^s is at least its starting value (BFGS's line search makes L^s rise along the path);
    if the first iterate already leaves the set, it stays put."""
    kernel = state.kernel
    fun = lambda th: joint_objective(state, th, delta)          # noqa: E731
    start = state.theta.ravel()
    f0 = fun(start)[0]
    path = []                                                   # (x, -L^s) after every BFGS iteration

    def record(intermediate_result):
        path.append((intermediate_result.x.copy(), float(intermediate_result.fun)))
        if report is not None:
            report(f"M={state.M} step 2: joint BFGS {len(path)}/{opts['joint_iter']}")

    res = optimize.minimize(fun, start, jac=True, method="BFGS", callback=record,
                            options={"maxiter": opts["joint_iter"], "gtol": 1e-6})
    if opts["joint_step"] == "unbounded":
        return res.x.reshape(-1, kernel.P) if np.isfinite(res.fun) and res.fun <= f0 else None
    best = None
    for x, f in path + [(res.x, float(res.fun))]:
        theta = x.reshape(-1, kernel.P)
        if not np.all(kernel.peak(theta) >= state.min_peak):
            break                                               # the path left the set: the step ends before
        if np.isfinite(f) and f <= f0:
            best = theta
    return best


# -------------------------------------------------------------------------------- step 3: alpha, beta
def update_hyper(state: State, opts, beta_free: bool):
    """Fixed-point sweeps of alpha (and beta) on L^s; prunes bases without a finite optimum (step 4)."""
    c = state.c
    for _ in range(opts["hyper_sweeps"]):
        if not state.M:
            break
        Sigma, mu = state.post.Sigma, state.post.mu
        dS = np.diag(Sigma)
        gamma = 1.0 - state.alpha * dS
        if opts["alpha_update"] == "paper":
            denom = mu**2 - 2 * c * gamma * dS                               # [P 40]
        else:
            G = state.Phi.T @ (state.Phi * state.B[:, None])
            SGS = np.einsum("ij,jk,ki->i", Sigma, G, Sigma)
            # exact d L^s / d log alpha_i = 1/2 (gamma_i - alpha_i mu_i^2) + c alpha_i (Sigma G Sigma)_ii  (digest 2.3)
            denom = mu**2 - 2 * c * SGS
        new_alpha = np.where(denom > 0, gamma / np.where(denom > 0, denom, 1.0), np.inf)
        new_alpha = np.where(new_alpha > 0, new_alpha, np.inf)
        if state.clf:
            new_alpha = np.maximum(new_alpha, opts["min_alpha"])
        if beta_free:
            r = state.that - state.Phi @ mu
            PtP = state.Phi.T @ state.Phi
            tr = float(np.sum(state.alpha * np.einsum("ij,jk,ki->i", Sigma, PtP, Sigma)))
            # exact d L^s / d log beta = 1/2 [N - beta |r|^2 - sum gamma] - c beta tr(A Sigma Phi^T Phi Sigma)  ([P 41] corrected)
            with np.errstate(divide="ignore"):
                beta = float(max(state.kernel.N - gamma.sum(), 1e-6) / (r @ r + 2 * c * tr))
            state.beta = min(beta, state.beta_max)
        keep = np.isfinite(new_alpha) & (new_alpha <= opts["prune_alpha"])          # step 4 [P §III-B]
        keep &= state.kernel.peak(state.theta) >= state.min_peak                     # off-data bases (see min_peak)
        change = np.max(np.abs(np.log(new_alpha[keep]) - np.log(state.alpha[keep]))) if keep.any() else 0.0
        state.alpha = new_alpha[keep]
        state.theta = state.theta[keep]
        state.w_mode = state.w_mode[keep] if state.clf else state.w_mode
        state.refresh(state.Phi[:, keep])
        if keep.all() and change < 1e-6:
            break


# ---------------------------------------------------------------------------------------------- cost
#: seconds per unit of work on one core, measured on the batched candidate BFGS (memory-bound updates of the B dense
#: P x P inverse Hessians), on kernel evaluations (per point and parameter) and on dense BLAS (scipy's BFGS update
#: of the joint step is two n x n products, 4 n^3 flops, at about 2e10 flop/s)
_S_HESSIAN, _S_EVAL, _S_WHITEN, _S_FLOP = 6e-9, 3e-8, 1e-9, 5e-11


def predicted_seconds(model, N: int, D: int, opts, M: int, dictionary=None, whiten=None) -> tuple[float, float]:
    """Predicted seconds of one iteration of Algorithm 1 on N points with D inputs: ``(candidate search, joint step
    over M bases)``. Each basis has P = D + K kernel parameters; the candidate search runs ``candidate_iter`` BFGS
    iterations on ``n_candidates`` problems of P parameters (dense inverse Hessians: B P^2 per iteration), the joint
    step at most ``joint_iter`` BFGS iterations on M P parameters (dense: 4 (M P)^3 flops per iteration). An
    order-of-magnitude estimate for one core; it grows as P^2 and (M P)^3, which is what the guard is for."""
    P = D + model.width_dims(D)
    per_eval = _S_EVAL * N * P + (_S_WHITEN * N * N if whiten is not None else 0.0)
    if dictionary is not None:
        return len(dictionary[0]) * per_eval, 0.0
    B, it = opts["n_candidates"], opts["candidate_iter"]
    candidates = B * ((it + 1) * per_eval + it * _S_HESSIAN * P * P)
    joint = 0.0 if not opts["joint_iter"] or M < 1 else opts["joint_iter"] * (4 * _S_FLOP * (M * P) ** 3 + M * per_eval)
    return candidates, joint


def check_cost(model, N: int, D: int, opts, dictionary=None, whiten=None, owner: str = "Algorithm 1") -> float:
    """The predicted seconds of one iteration with one basis, or a ValueError (naming ``owner``) when they exceed
    ``max_cost``."""
    limit = opts.get("max_cost", DEFAULT_OPTIONS["max_cost"])
    candidates, joint = predicted_seconds(model, N, D, opts, min(1, model.n_basis), dictionary, whiten)
    if candidates + joint > limit:
        P = D + model.width_dims(D)
        raise ValueError(
            f"{owner}: one iteration of Algorithm 1 is predicted to take about {candidates + joint:.3g} s on this "
            f"problem (N = {N} points, d = {D} inputs, so {P} kernel parameters per basis; candidate search "
            f"{candidates:.3g} s, joint step {joint:.3g} s), beyond max_cost = {limit:g} s; the cost grows as the "
            f"square (candidates) and cube (joint step) of the parameters per basis. Raise the limit with "
            f"bz.fit(..., max_cost={10 ** np.ceil(np.log10(candidates + joint)):g}) if you mean it, or make the "
            f"problem smaller: fewer inputs (e.g. select or project features), n_candidates, candidate_iter or "
            f"joint_iter")
    return candidates + joint


# ---------------------------------------------------------------------------------------------- driver
def learn(model, X, t, opts, *, rng: np.random.Generator, progress=False, dictionary=None, whiten=None, init=None,
          owner: str = "Algorithm 1") -> Learned:
    """Algorithm 1 on inputs X (N, D) and targets t: a :class:`Learned`, the final State and traces. ``rng`` draws
    the candidates (the backend's: the root stream of its run context); ``owner`` names the backend in errors.

    Runs on one BLAS thread below 1000 points: the work is many small matrix products, for which waking a second
    BLAS thread costs more than it saves (see ``inference/gpc/common.py``).

    ``init``: optional starting model ``(centres (M, D), widths (M, K), alpha (M,))`` instead of the empty one
    (e.g. an RVM's relevance vectors at its width, to check whether the search from empty reaches as high an L^s).

    ``dictionary``: optional fixed candidates ``(centres (J, D), widths (J, K))`` (e.g. one kernel per pixel); they are then
    scored in closed form and kernels are not optimised, which is the incremental RVM with the sparsity prior
    [P 42-44] (used for the fMRI RVM maps).
    """
    with one_blas_thread(np.shape(X)[0]):
        return _learn(model, X, t, opts, rng=rng, progress=progress, dictionary=dictionary, whiten=whiten,
                      init=init, owner=owner)


class Learned(NamedTuple):
    """What Algorithm 1 (:func:`learn`) returns.

    state
        The learned model: kernels (``theta``, ``kernel``), precisions ``alpha``, ``beta`` and the posterior
        ``post``, a :class:`State`; ``state.M`` bases.
    objective
        L^s after every iteration, the first at the start.
    n_basis_trace
        The number of bases after every iteration, the first at the start.
    iterations
        The iterations made.
    converged
        Whether L^s stopped rising (by less than ``tol`` for ``patience`` iterations) before ``max_iter``.
    c
        The sparsity constant c of L^s for these N points.
    active_dict
        With a fixed dictionary: its entries in the model, in the order of the bases.
    warnings
        What the run found worth telling: a basis cap set by ``max_cost``, iterations that lowered L^s.
    """

    state: State
    objective: np.ndarray
    n_basis_trace: np.ndarray
    iterations: int
    converged: bool
    c: float
    active_dict: np.ndarray
    warnings: list


class LearnState(NamedTuple):
    """Algorithm 1's state after an iteration: the fitted kernels and posterior (``current``, a :class:`State`,
    updated in place),
    the feature-selection precisions ``delta`` (None without feature selection), the dictionary entries in the
    model (``active_dict``), the iterations in a row that raised L^s by less than ``tol`` (``small``), the warning
    of a basis cap set by ``max_cost`` (None until one), the generator of the candidates, the number of bases and
    L^s after every iteration (``n_basis``, ``objectives``; the first at the start), ``iteration`` and
    ``objective``, L^s."""

    current: State
    delta: np.ndarray | None
    active_dict: np.ndarray
    small: int
    cost_warning: str | None
    rng: np.random.Generator
    n_basis: tuple
    objectives: tuple
    iteration: int
    objective: float


class LearnInfo(NamedTuple):
    """One iteration: L^s after it; ``change``, its rise; ``moving``, True unless L^s stayed put over the last
    ``patience`` iterations; ``stalled``, True when it rose by less than ``tol`` in ``patience`` iterations in a
    row (the end: converged if L^s stayed put, a cycle of steps that undo each other if it fell)."""

    objective: float
    change: float
    moving: bool = True
    stalled: bool = False


def learn_iterations(model, X, t, opts, *, dictionary, whiten, init) -> Algorithm:
    """Algorithm 1 (module docstring) on inputs X (N, D) and targets t; ``init`` of the Algorithm takes the
    candidates' generator, ``init`` here an optional starting model (:func:`learn`)."""
    N, D = X.shape
    max_cost = opts.get("max_cost", DEFAULT_OPTIONS["max_cost"])
    clf = model.is_classifier
    c = model.c_value(N)
    mode = "scale" if model.feature_selection else "log_width"
    kernel = Kernel(X, model.width_dims(D), mode, whiten, floor=model.min_width_value(X))
    beta_free = not clf and opts["beta"] is None
    if opts["min_alpha"] is None:
        opts = {**opts, "min_alpha": 1e-2}
    if dictionary is not None:
        dictionary = np.column_stack([np.asarray(dictionary[0], float), kernel.to_u(np.asarray(dictionary[1], float))])

    def start(rng):
        beta = None if clf else float(opts["beta"] or opts["init_beta"] or 10.0 / max(float(np.var(t)), 1e-12))
        state = State(kernel, t, c, clf, beta)
        state.min_peak = float(opts["min_peak"])
        if init is not None:
            centres, widths, alpha0 = _check_init(init, kernel, model, dictionary)
            state.theta = np.column_stack([centres, kernel.to_u(widths)])
            state.alpha = alpha0.copy()
            state.w_mode = np.zeros(state.M)
            state.refresh()
            update_hyper(state, opts, beta_free)
        L = state.objective()
        return LearnState(state, np.zeros((0, kernel.K)) if model.feature_selection else None, np.zeros(0, int), 0,
                          None, rng, (state.M,), (L,), 0, L)

    def step(s, report):
        state, delta, active_dict = s.current, s.delta, s.active_dict
        # step 1: the best of a fresh set of candidates, unless one more basis would take an iteration past max_cost
        room, cost_warning = _room_for_a_basis(state, model, N, D, opts, max_cost, dictionary, whiten,
                                               s.cost_warning, report)
        if room:
            delta, active_dict = _add_best_candidate(state, model, X, s.rng, opts, dictionary, delta, active_dict,
                                                     report)
        # step 2: all active kernels jointly
        if state.M and dictionary is None and opts["joint_iter"]:
            theta = joint_step(state, delta, opts, report)
            if theta is not None:
                state.theta = theta
                state.refresh()
        # steps 3 and 4: alpha, beta, pruning
        n_before = state.M
        kept_before = state.theta.copy()
        update_hyper(state, opts, beta_free)
        if state.M < n_before:
            # the per-basis companions of theta lose the same rows
            keep = _kept_rows(kept_before, state.theta)
            if delta is not None:
                delta = delta[keep]
            if dictionary is not None:
                active_dict = active_dict[keep]
        if delta is not None and state.M:
            delta = _switch_off_directions(state, D, opts["delta_max"])
        # step 5: L^s must grow by tol in one of `patience` successive iterations
        L = state.objective()
        small = s.small + 1 if L - s.objective < opts["tol"] else 0
        objectives = s.objectives + (L,)
        new = LearnState(state, delta, active_dict, small, cost_warning, s.rng, s.n_basis + (state.M,), objectives,
                         s.iteration + 1, L)
        if small >= opts["patience"]:
            # no progress; converged only if L^s stayed put: falling, the steps undo each other (a cycle)
            cycle = not np.all(np.diff(objectives[-opts["patience"] - 1:]) > -opts["tol"])
            return new, LearnInfo(L, L - s.objective, moving=cycle, stalled=True)
        return new, LearnInfo(L, L - s.objective)

    return Algorithm(start, step, reports=True,
                     describe=lambda s, info: f"M={s.current.M} L={s.objective:.4g}")


def _room_for_a_basis(state: State, model, N: int, D: int, opts, max_cost: float, dictionary, whiten, cost_warning,
                      report) -> tuple[bool, str | None]:
    """Whether step 1 may add a basis, and the cost warning (set, and reported, the first time it may not).

    One more basis is refused when it would make an iteration cost more than ``max_cost``: the guard against the
    (M P)^3 growth of the dense BFGS joint step (so a dictionary, or no joint step, is never capped)."""
    room = state.M < model.n_basis
    if room and dictionary is None and opts["joint_iter"]:
        cand_s, joint_s = predicted_seconds(model, N, D, opts, state.M + 1, None, whiten)
        if cand_s + joint_s > max_cost:
            room = False
            if cost_warning is None:
                cost_warning = (f"arvm stopped adding bases at {state.M}: one more would make an iteration "
                                f"take about {cand_s + joint_s:.3g} s, beyond max_cost = {max_cost:g} s "
                                f"(raise max_cost to let the model grow)")
                report(f"M={state.M} (capped by max_cost)")
    return room, cost_warning


def _add_best_candidate(state: State, model, X, rng, opts, dictionary, delta, active_dict, report):
    """Step 1: score a fresh set of random candidates (each optimised by BFGS) or the dictionary's unused kernels,
    and add the best one to ``state`` if its gain is positive. Returns ``(delta, active_dict)`` grown to match."""
    if dictionary is None:
        report(f"M={state.M} step 1: {opts['n_candidates']} candidates")
        cands = draw_candidates(state, model, X, rng, opts["n_candidates"])
        if opts["candidate_iter"]:
            cands, _ = batched_bfgs(lambda th, grad: _neg(candidate_objective(state, th, grad)), cands,
                                    opts["candidate_iter"])
        gain, _, alpha_new = candidate_objective(state, cands)
    else:
        cands = dictionary
        gain, _, alpha_new = candidate_objective(state, cands, grad=False)
        gain[active_dict] = 0.0                  # a dictionary kernel enters the model once
    best = int(np.argmax(gain))
    if gain[best] > 0 and np.isfinite(alpha_new[best]):
        state.theta = np.vstack([state.theta, cands[best]])
        state.alpha = np.append(state.alpha, alpha_new[best])
        state.w_mode = np.append(state.w_mode, 0.0) if state.clf else state.w_mode
        if delta is not None:
            delta = np.vstack([delta, np.zeros(state.kernel.K)])
        if dictionary is not None:
            active_dict = np.append(active_dict, best)
        state.refresh()
    return delta, active_dict


def _switch_off_directions(state: State, D: int, delta_max: float) -> np.ndarray:
    """PhD Algorithm 2, step 4: delta = 1 / v^2 [PhD 7.14] from the active bases' inverse widths v; a direction
    whose delta exceeds ``delta_max`` is switched off (v = 0 in ``state``). Returns the new delta."""
    u = state.theta[:, D:]
    with np.errstate(divide="ignore"):
        delta = np.where(u != 0, 1.0 / u**2, np.inf)
    off = delta > delta_max
    if off.any():
        state.theta[:, D:] = np.where(off, 0.0, u)
        state.refresh()
    return np.where(off, 0.0, delta)        # v = 0 is a fixed point: no penalty needed


def _learn(model, X, t, opts, *, rng, progress, dictionary, whiten, init, owner):
    X = np.asarray(X, float)
    N, D = X.shape
    check_cost(model, N, D, opts, dictionary, whiten, owner=owner)
    algorithm = learn_iterations(model, X, t, opts, dictionary=dictionary, whiten=whiten, init=init)
    run = iterate(algorithm, rng, max_iter=opts["max_iter"], tol=opts["tol"], progress=progress, desc="arvm",
                  unit="step", owner=owner, change_name="rise of L^s")
    s = run.state
    trace = np.array(s.objectives)
    warnings = [s.cost_warning] if s.cost_warning is not None else []
    falls = np.diff(trace) < -opts["tol"]
    if falls.any():
        # with the feasible step 2 only a pruning, a switched-off direction or a new Laplace mode can lower L^s
        cause = ("the joint step can move bases below min_peak for the pruning to remove, so the bases kept may be "
                 "those of the last cycle (joint_step='feasible' keeps every step on one set)"
                 if opts["joint_step"] == "unbounded" else
                 "a pruning, a switched-off direction or (classification) the new Laplace mode lowered it")
        warnings.append(f"L^s fell in {int(falls.sum())} of {len(falls)} iterations (by up to "
                        f"{float(-np.min(np.diff(trace))):.3g}): {cause} (docs/families/arvm.md, 'Steps over one "
                        f"feasible set')")
    return Learned(state=s.current, objective=trace, n_basis_trace=np.array(s.n_basis), iterations=run.iterations,
                   converged=run.converged, c=model.c_value(N), active_dict=s.active_dict, warnings=warnings)


def _check_init(init, kernel: Kernel, model, dictionary):
    """``init = (centres (M, D), widths (M,) or (M, K), alpha (M,))`` as arrays, or a ValueError naming the problem."""
    if dictionary is not None or model.feature_selection:
        raise ValueError("init (a starting model) is not available with a dictionary or with feature_selection")
    try:
        centres, widths, alpha = (np.asarray(a, float) for a in init)
    except (TypeError, ValueError):
        raise ValueError("init must be (centres, widths, alpha) of numbers") from None
    M = alpha.size
    centres = centres.reshape(M, -1) if centres.size == M * kernel.D else centres
    widths = widths.reshape(M, -1) if widths.size in (M, M * kernel.K) else widths
    bad_widths = widths.ndim != 2 or widths.shape[0] != M or widths.shape[1] not in (1, kernel.K)
    if centres.shape != (M, kernel.D) or bad_widths:
        raise ValueError(f"init needs centres ({M}, {kernel.D}), widths ({M},) or ({M}, {kernel.K}) for {M} alphas; "
                         f"got {centres.shape} and {widths.shape}")
    if not (np.all(np.isfinite(centres)) and np.all(widths > kernel.floor) and np.all(alpha > 0)
            and np.all(np.isfinite(widths)) and np.all(np.isfinite(alpha))):
        raise ValueError(f"init needs finite centres, widths above the floor {kernel.floor:.3g} and alpha > 0")
    return centres, np.broadcast_to(widths, (M, kernel.K)), alpha


def _neg(res):
    gain, grad, _ = res
    return -gain, None if grad is None else -grad


def _kept_rows(before, after):
    """Indices of the rows of ``before`` that survived into ``after`` (pruning keeps the order)."""
    keep, j = [], 0
    for i in range(before.shape[0]):
        if j < after.shape[0] and np.array_equal(before[i], after[j]):
            keep.append(i)
            j += 1
    return np.array(keep, int)


# ---------------------------------------------------------------------------------------------- output
def approximation(model, data, res: Learned, *, x_scale=1.0, y_scale=1.0):
    """``(q, Phi)``: the Gaussian posterior of w at the learned kernel and that kernel's design at the training
    inputs. w ~ N(mu, Sigma) on the kept bases (slots 0..M-1, ordered by centre; mu is the mode for
    classification), w = 0 on the unused slots (zero rows of the covariance factor), whose log_alpha is
    LOG_ALPHA_PRUNED; centres, widths, log_alpha, log_beta fixed. q's ``fixed`` ``f`` is Phi mu, which the Fit
    replaces by f = Phi w per draw.

    ``x_scale``, ``y_scale``: Algorithm 1 ran on X / x_scale and y / y_scale (see :func:`rescaling`); centres,
    widths, weights, precisions and the objective are reported in the original units."""
    state = res.state
    M, D, K = model.n_basis, data.d, model.width_dims(data.d)
    k = state.M
    order = np.lexsort(state.theta[:, :D].T[::-1]) if k else np.zeros(0, int)
    mean, factor = np.zeros(M), np.zeros((M, k))
    centre = np.zeros((M, D))
    inv_width = np.zeros((M, K))
    log_alpha = np.full(M, LOG_ALPHA_PRUNED)
    if k:
        post = state.post
        mean[:k] = (state.w_mode if state.clf else post.mu)[order] * y_scale
        factor[:k] = post.chol_cov()[order] * y_scale
        m, u = state.kernel.split(state.theta[order])
        centre[:k] = state.kernel.centre(m) * x_scale
        inv_width[:k] = state.kernel.inv_width(u) / x_scale
        log_alpha[:k] = np.minimum(np.log(state.alpha[order]) - 2 * np.log(y_scale), LOG_ALPHA_PRUNED - 1e-6)
    Phi = model_design(data.X, centre, inv_width)
    fixed = {"log_alpha": log_alpha, "centre": centre, "inv_width": inv_width, "f": Phi @ mean}
    if not model.is_classifier:
        fixed["log_beta"] = float(np.log(state.beta) - 2 * np.log(y_scale))
    # L^s of the original targets: the Gaussian log evidence of t = y_scale t' is that of t' minus N log y_scale
    objective = np.asarray(res.objective, float) - data.n * np.log(y_scale)
    q = GaussianApproximation("w", mean, factor=factor, fixed=fixed,
                              objective={"objective": objective, "n_basis": res.n_basis_trace},
                              objective_name="objective", iterations=res.iterations, converged=res.converged)
    return q, Phi


#: Algorithm 1 runs on rescaled inputs (targets) when the largest input span (the targets' root mean square) is
#: outside [1 / RESCALE, RESCALE]: its thresholds are absolute (log-widths within +-30, s > 1e-150, ...), while the
#: model with its flat priors is scale-free
RESCALE = 2.0**10


def rescaling(model, data) -> tuple[float, float]:
    """``(x_scale, y_scale)``: powers of two (so that dividing by them is exact) that bring the largest span of the
    inputs and the root mean square of the regression targets near 1 when they are far from it; else 1."""
    def power_of_two(size):
        if not size > 0 or 1.0 / RESCALE <= size <= RESCALE:
            return 1.0
        return float(2.0 ** np.round(np.log2(size)))

    x_scale = power_of_two(float(np.max(np.ptp(data.X, axis=0))))
    y_scale = 1.0 if model.is_classifier else power_of_two(float(np.sqrt(np.mean(data.y**2))))
    return x_scale, y_scale


def model_design(X, centre, inv_width):
    from bayeszoo.models.arvm import adaptive_design

    return adaptive_design(X, centre, inv_width)


#: arrays of N x n_candidates values alive during the batched candidate search (each candidate's basis at every
#: training input, its derivatives and line-search trials): the peak grows as N x candidates, 7.3 to 8.3 arrays
#: measured with tracemalloc at N = 150 to 600 (2026-11-26)
CANDIDATE_ARRAYS = 8


def memory(model, data, options) -> Need:
    """The working memory (``bayeszoo.memory_guard``): the candidate search's arrays, a fixed dictionary's kernels at
    the training inputs, and the noise whitener with its whitened bases."""
    N = data.n
    dictionary = options["dictionary"]
    B = options["n_candidates"] if dictionary is None else len(dictionary[0])
    parts = {f"{CANDIDATE_ARRAYS} arrays of {N:,} training inputs x {B:,} candidates": dense(N, B, CANDIDATE_ARRAYS)}
    if options["noise_whitener"] is not None:
        parts[f"noise whitener W ({N:,} x {N:,})"] = dense(N, N)
    return Need(parts, "draw fewer candidates per iteration (n_candidates) or fit a subset of the data")


@register("arvm", kind="approximation", family="arvm", options=OPTIONS, check=check, defaults={"tune": 0},
          memory=memory,
          description="Algorithm 1 (Tzikas et al. 2009): incremental adaptive-kernel type-II learning")
def run(model, data, *, draws, tune, chains, ctx, **opts):
    """Type-II learning of centres, widths, alpha and beta; Gaussian posterior of w at the learned kernel."""
    t0 = time.perf_counter()
    x_scale, y_scale = rescaling(model, data)
    run_model, dictionary = model, opts["dictionary"]
    if x_scale != 1.0:
        if model.min_width != "spacing":
            run_model = dataclasses.replace(model, min_width=model.min_width / x_scale)
        if dictionary is not None:
            dictionary = (dictionary[0] / x_scale, dictionary[1] / x_scale)
    if y_scale != 1.0:
        opts = {**opts, **{k: opts[k] / y_scale**2 for k in ("beta", "init_beta") if opts[k] is not None}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = learn(run_model, data.X / x_scale, data.y / y_scale, opts, rng=ctx.numpy_rng(), progress=ctx.progress,
                    dictionary=dictionary, whiten=opts["noise_whitener"], owner=ctx.owner)
    q, Phi = approximation(model, data, res, x_scale=x_scale, y_scale=y_scale)
    notes = [] if x_scale == y_scale == 1.0 else [
        f"Algorithm 1 ran on inputs divided by {x_scale:g} and targets divided by {y_scale:g} (their scale is far from "
        f"1; powers of two, so exact); the fit is in the original units"]
    info = {"n_relevant": int(res.state.M), "sparsity_c": float(res.c), "joint_step": opts["joint_step"],
            "rescaled": {"x": float(x_scale), "y": float(y_scale)}, "warnings": notes + res.warnings}
    q = q._replace(others=lambda rng, w: {"f": w @ Phi.T})   # f = Phi w, draw by draw
    return approximation_fit(model, data, q, ctx=ctx, draws=draws, chains=chains,
                             timing={"tune": time.perf_counter() - t0},
                             limit=f"{opts['max_iter']} iterations", info=info)
