"""``em``: type-II maximum likelihood / MAP of (log alpha, log beta) for the RVM (Tipping 2001; [T 2.4-2.5]).

Maximises the log-space MAP objective J of :mod:`.core` ([T 2.21], corrected) over all N + 1 bases:

* ``update="mackay"`` (default): alpha_i = (gamma_i + 2a) / (mu_i^2 + 2b)  [T 2.25-2.26], gamma_i = 1 - alpha_i
  Sigma_ii, and beta = (N - sum gamma + 2c) / (|t - Phi mu|^2 + 2d)  [T 2.27], corrected: Gamma prior on beta.
  The fixed point of the gradient; converges in tens of iterations where EM needs thousands, but is not
  guaranteed to increase J at every step.
* ``update="em"``: alpha_i = (1 + 2a) / (mu_i^2 + Sigma_ii + 2b)  [T 2.24] and the matching EM step for beta,
  beta = (N + 2c) / (|t - Phi mu|^2 + tr(Phi Sigma Phi^T) + 2d). A true EM algorithm (w is the latent
  variable), so J never decreases.

Pruning: a basis is removed when alpha_i > ``prune_alpha`` (1e12, [P] step 4) or, once the updates have
converged, when taking it out of the model increases J (its best share f_i = l_i + a log alpha_i - b alpha_i is
not positive; with the Gamma hyperprior alpha_i stays below (1 + 2a) / 2b, so the threshold alone would never
fire). Both checks only increase J. Classification (no beta): Laplace approximation at the IRLS mode,
logit or probit after ``model.link`` ([P 18-20], digest 2.5), with the Laplace log evidence traced.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from bayeszoo.checks import POSITIVE, POSITIVE_INT, Interval, OneOf
from bayeszoo.inference.iterative import Algorithm, iterate
from bayeszoo.registry import APPROXIMATION_DEFAULTS, Option, register

from . import core as C

POSITIVE_OR_NONE = Interval(float, 0, None, "neither", none=True)
OPTIONS = {
    "update": Option("mackay", "alpha / beta update: 'mackay' (gradient fixed point) or 'em' (never decreases J)",
                     OneOf(("mackay", "em"))),
    "max_iter": Option(2000, "largest number of update iterations", POSITIVE_INT),
    "tol": Option(1e-6, "converged when no log alpha_i (or log beta) changes by more than this in an iteration",
                  POSITIVE),
    "prune_alpha": Option(1e12, "a basis whose alpha exceeds this is removed from the model", POSITIVE),
    "init_alpha": Option(None, "starting alpha of every basis; None: from the targets' variance and the basis norms",
                         POSITIVE_OR_NONE),
    "init_beta": Option(None, "starting noise precision (regression); None: 10 / var(t)", POSITIVE_OR_NONE),
}
#: the defaults, for calling :func:`type2_fit` directly
DEFAULT_OPTIONS = {name: opt.default for name, opt in OPTIONS.items()}


def sigma_diagonal(post: C.Gaussian) -> np.ndarray:
    """diag(Sigma) as the row sums of squares of its square root: one triangular inverse (M^3 / 3 flops) where
    forming Sigma itself would add an M^3 product that the updates never read off the diagonal."""
    R = post.chol_cov()
    return np.einsum("ij,ij->i", R, R)


class EMState(NamedTuple):
    """The estimates after an iteration: ``alpha`` (every basis's, pruned ones included), ``beta`` (None for a
    classifier), the ``active`` bases, the Gaussian (or Laplace) posterior ``post`` of their weights with its log
    evidence ``ev`` and, for a classifier, the weights' mode ``w_mode`` (the next IRLS's start); ``objective``,
    J after the iteration; the traces of the log evidence and of J, which gain two values in an iteration that
    prunes (before and after); ``n_deleted``, the bases removed for a non-positive share of J."""

    alpha: np.ndarray
    beta: float | None
    active: np.ndarray
    post: C.Gaussian
    ev: float
    w_mode: np.ndarray | None
    objective: float
    log_evidence: tuple
    objectives: tuple
    n_deleted: int


class EMInfo(NamedTuple):
    """One iteration: J after it; ``change``, the largest change of a log alpha_i (or of log beta); ``moving``,
    True when the iteration pruned bases by their share of J or one basis is left (the updates have not settled
    for a fixed active set)."""

    objective: float
    change: float
    moving: bool


def em_iterations(model, Phi, t, opts) -> Algorithm:
    """MacKay's or the EM updates with pruning (module docstring); ``init`` takes None."""
    N, M = Phi.shape
    clf = model.is_classifier
    G = None if clf else Phi.T @ Phi
    Pt = None if clf else Phi.T @ t
    tt = float(t @ t)

    def posterior(active, alpha, beta, w_mode):
        if clf:
            post, W, g, ll, _ = C.laplace_mode(Phi[:, active], t, alpha[active], model.link, w0=w_mode)
            return post, C.laplace_log_evidence(post, alpha[active], ll)
        H = beta * G[np.ix_(active, active)]
        H[np.diag_indices(active.size)] += alpha[active]
        post = C.Gaussian(H, beta * Pt[active])
        return post, C.log_evidence(post, beta * tt, beta * Pt[active], alpha[active], N * np.log(beta), N)

    def objective(ev, alpha, active, beta):
        return ev + C.log_prior_terms(alpha[active], beta, model)

    def init(_):
        var_t = float(np.var(t)) if np.var(t) > 0 else 1.0
        beta = None if clf else float(opts["init_beta"] or 10.0 / var_t)
        alpha = np.full(M, float(opts["init_alpha"] or 1.0 / var_t * np.mean(np.sum(Phi**2, 0)) / N))
        active = np.arange(M)
        post, ev = posterior(active, alpha, beta, None)
        obj = objective(ev, alpha, active, beta)
        return EMState(alpha, beta, active, post, ev, post.mu if clf else None, obj, (ev,), (obj,), 0)

    def prune_by_share(post, alpha, active, beta, w_mode, obj):
        """Remove the bases whose share of J is not positive: the worst k, halving k until J does not decrease
        (each alone has gain -f_i > 0). None when there is none to remove."""
        order = _nonpositive_shares(post, alpha[active], model, opts["prune_alpha"])
        if order is None:
            return None
        k = order.size
        while True:
            out = np.zeros(active.size, bool)
            out[order[:k]] = True
            kept_mode = None if w_mode is None else w_mode[~out]
            post2, ev2 = posterior(active[~out], alpha, beta, kept_mode)
            obj2 = objective(ev2, alpha, active[~out], beta)
            if obj2 >= obj - 1e-9 * abs(obj) or k == 1:
                return active[~out], post2.mu if clf else None, post2, ev2, obj2
            k = max(1, k // 2)

    def step(s):
        new_al, beta, change = _updated_hyperparameters(s, model, Phi, t, opts)
        alpha = s.alpha.copy()
        alpha[s.active] = new_al
        active, w_mode = _pruned_by_threshold(alpha, s.active, s.w_mode, opts["prune_alpha"])
        post, ev = posterior(active, alpha, beta, w_mode)
        if clf:
            w_mode = post.mu
        obj = objective(ev, alpha, active, beta)
        settled = abs(obj - s.objective) < 1e-4 * max(1.0, abs(obj))
        evs, objs, n_deleted = s.log_evidence + (ev,), s.objectives + (obj,), s.n_deleted
        pruned = None
        # by share only once the updates have (nearly) settled for this active set (module docstring)
        if (change < opts["tol"] or settled) and active.size > 1:
            pruned = prune_by_share(post, alpha, active, beta, w_mode, obj)
        if pruned is not None:
            n_deleted += int(active.size - pruned[0].size)
            active, w_mode, post, ev, obj = pruned
            evs, objs = evs + (ev,), objs + (obj,)
        state = EMState(alpha, beta, active, post, ev, w_mode, obj, evs, objs, n_deleted)
        return state, EMInfo(obj, change, moving=pruned is not None or active.size <= 1)

    return Algorithm(init, step, describe=lambda s, info: f"{s.active.size} bases")


def _updated_hyperparameters(s, model, Phi, t, opts):
    """One MacKay or EM update (module docstring) from the state ``s``: the new alpha of the active bases, the new
    beta (None for a classifier) and the largest change of their logs."""
    a, b, c, d = model.a, model.b, model.c, model.d
    clf = model.is_classifier
    N = Phi.shape[0]
    mu, Sd, al, beta = s.post.mu, sigma_diagonal(s.post), s.alpha[s.active], s.beta
    gamma = 1.0 - al * Sd
    if opts["update"] == "em":
        new_al = (1.0 + 2 * a) / (mu**2 + Sd + 2 * b)                       # [T 2.24]
    else:
        new_al = (gamma + 2 * a) / (mu**2 + 2 * b)                           # [T 2.25-2.26]
        # a non-positive fixed point has no alpha: the basis is sent past the pruning threshold
        new_al = np.where(new_al > 0, new_al, opts["prune_alpha"] * 10)
    new_beta = beta
    if not clf:
        r = t - Phi[:, s.active] @ mu
        rr = float(r @ r)
        if opts["update"] == "em":
            # EM step; tr(Phi Sigma Phi^T) = sum gamma / beta
            new_beta = (N + 2 * c) / (rr + float(np.sum(gamma)) / beta + 2 * d)
        else:
            # [T 2.27], corrected: Gamma on beta; N - sum gamma >= 0 exactly, but not in rounding when the bases
            # interpolate the targets, which would make beta negative
            new_beta = (max(N - float(np.sum(gamma)), 0.0) + 2 * c) / (rr + 2 * d)
    change = float(np.max(np.abs(np.log(new_al) - np.log(al))))
    if not clf:
        change = max(change, abs(np.log(new_beta) - np.log(beta)))
    return new_al, new_beta, change


def _pruned_by_threshold(alpha, active, w_mode, prune_alpha):
    """The bases of ``active`` whose alpha is at most ``prune_alpha`` and their part of the weights' mode
    ``w_mode`` (None for regression); the one of smallest alpha stays when all are above it."""
    keep = alpha[active] <= prune_alpha
    if not np.any(keep):
        keep[np.argmin(alpha[active])] = True
    if not np.all(keep):
        active = active[keep]
        if w_mode is not None:
            w_mode = w_mode[keep]
    return active, w_mode


def _nonpositive_shares(post, al, model, prune_alpha):
    """The positions in the model of the bases whose share of J is not positive ([T 3.5] + prior: f_i < 0 and no
    better alpha makes it positive), worst first; None when there is none. One basis always stays."""
    Sd = sigma_diagonal(post)
    # s_i, q_i [T 3.10] of each basis in the model, from its own posterior variance and mean
    s = np.maximum(1.0 / Sd - al, 1e-300)
    q2 = (post.mu / Sd) ** 2
    f = C.basis_contribution(al, s, q2, model.a, model.b)
    _, fbest = C.best_alpha(s, q2, model.a, model.b, prune_alpha)
    drop = (fbest <= 0) & (f < 0)
    if np.all(drop):
        drop[np.argmax(f)] = False
    if not np.any(drop):
        return None
    return np.argsort(np.where(drop, f, np.inf))[:int(np.sum(drop))]


def type2_fit(model, Phi, t, opts, progress=False, owner: str = "approximation") -> C.Type2Estimate:
    """The optimiser, on an explicit design ``Phi``: a :class:`~bayeszoo.inference.rvm.core.Type2Estimate`;
    ``progress`` shows a bar over the iterations; ``owner`` names the backend in errors."""
    run = iterate(em_iterations(model, Phi, t, opts), None, max_iter=opts["max_iter"], tol=opts["tol"],
                  progress=progress, desc=f"em ({opts['update']})", owner=owner)
    s = run.state
    return C.Type2Estimate(active=s.active, alpha=s.alpha[s.active], beta=s.beta, post=s.post,
                           log_evidence=np.array(s.log_evidence), objective=np.array(s.objectives),
                           iterations=run.iterations, converged=run.converged, n_deleted=s.n_deleted)


@register("em", kind="approximation", family="rvm", options=OPTIONS, defaults=APPROXIMATION_DEFAULTS,
          memory=C.memory(8),
          description="type-II ML / MAP of log alpha, log beta by MacKay or EM updates; Laplace/IRLS for classification")
def run(model, data, *, draws, tune, chains, ctx, **opts):
    """Type-II ML / MAP (MacKay or EM updates), Gaussian (or Laplace) posterior of w at the estimate."""
    return C.run_type2(type2_fit, model, data, opts, ctx, draws=draws, chains=chains,
                       extra_info=lambda res: {"update": opts["update"]})
