"""``fast``: Tipping-Faul fast marginal likelihood maximisation ([T ch.3], [P §II-C], digest 2.2).

Starts from one basis (the one best aligned with the targets, [T §3.2] step 2) and, at every iteration,
scores all N + 1 candidates with the sparsity / quality factors S_m, Q_m ([P 28-29]) and s_m, q_m [T 3.10]; takes
the single action (add / re-estimate / delete) with the largest increase of the objective J of :mod:`.core`. Each
basis's share of J is f_i = l(alpha_i) [T 3.5] + a log alpha_i - b alpha_i; with a = b = 0 its maximiser is
[T 3.7-3.8] alpha_i = s_i^2 / (q_i^2 - s_i), and with the model's Gamma hyperprior it is found numerically
(:func:`.core.best_alpha`).

Regression, as Tipping and Faul's SparseBayes does it: at fixed beta, Sigma, mu, S and Q follow each action by the
rank-one updates of Tipping and Faul's appendix (O(N M) each, for M bases in the model); beta is re-estimated
([T 2.27], corrected: Gamma(c, d) on beta) every ``beta_every`` actions and whenever no action is left, and Sigma,
mu, S, Q are then recomputed on the active set for the new beta (O(N M^2)), which also clears the rounding of the
updates. When the best action is a re-estimate, the MacKay update of every alpha in the model and of beta at once
(alpha_i = (gamma_i + 2a) / (mu_i^2 + 2b), [T 2.25-2.27]: ``em``'s step on the active set) is tried first and kept
only if it raises J by more than that action would: one basis at a time, hundreds of coupled alphas converge
slowly. Of the Gram Phi^T Phi only the columns of bases that enter the model are formed. BLAS runs on one thread
(the matrices are M x M).
Classification: the Laplace mode is recomputed by IRLS after every action and S, Q use B and t-hat [P 19-20]; an action
is kept only if the recomputed objective rises (see ``_classification``).
"""
from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

from bayeszoo.checks import POSITIVE, POSITIVE_INT, Flag, Interval
from bayeszoo.inference.iterative import Algorithm, iterate
from bayeszoo.models.rvm import use_width_evidence
from bayeszoo.numerics.blas_threads import one_blas_thread
from bayeszoo.registry import APPROXIMATION_DEFAULTS, Option, register

from . import core as C

OPTIONS = {
    "max_iter": Option(5000, "largest number of steps (add, re-estimate or delete one basis; re-estimate every alpha "
                             "in the model at once; re-estimate beta)", POSITIVE_INT),
    "tol": Option(1e-8, "converged when the best action would raise J by less than this times max(1, |J|)",
                  POSITIVE),
    "prune_alpha": Option(1e12, "a basis whose best alpha exceeds this is left out of the model", POSITIVE),
    "init_beta": Option(None, "starting noise precision (regression); None: 10 / var(t)",
                        Interval(float, 0, None, "neither", none=True)),
    "beta_every": Option(5, "re-estimate beta (regression) after this many actions, and whenever no action is left",
                         POSITIVE_INT),
    "joint_steps": Option(True, "regression: where the best action is a re-estimate, first try the MacKay update of "
                                "every alpha in the model and beta at once (kept if it raises J more)", Flag()),
}
#: below this change of log alpha a re-estimate is no action (and of log beta, no new beta)
SETTLED = 1e-6


def fast_fit(model, Phi, t, opts, progress=False, owner: str = "approximation") -> C.Type2Estimate:
    """The optimiser, on an explicit design ``Phi``: a :class:`~bayeszoo.inference.rvm.core.Type2Estimate` (with
    its ``actions``); ``owner`` names the backend in errors."""
    algorithm, finish = (_classification if model.is_classifier else _regression)(model, Phi, t, opts)
    run = iterate(algorithm, None, max_iter=opts["max_iter"], tol=opts["tol"], progress=progress, desc="fast",
                  unit="action", owner=owner, change_name="relative gain")
    return finish(run)


def width_log_evidence(model, Phi, t) -> float:
    """The log evidence that ``fast`` at its default options reaches on the design ``Phi``: what
    ``RVM(width="evidence")`` maximises over the width (-inf where the fit fails)."""
    opts = {name: option.default for name, option in OPTIONS.items()}
    with warnings.catch_warnings(), one_blas_thread(0):
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            res = fast_fit(model, Phi, np.asarray(t, float), opts)
        except np.linalg.LinAlgError:
            return -np.inf
    return float(res.log_evidence[-1])


use_width_evidence(width_log_evidence)


def _first_basis(Phi, t_eff, norms, prune_alpha):
    """[T §3.2] step 2: the basis best aligned with the targets and its alpha (alpha of all others: infinity)."""
    proj = (Phi.T @ t_eff) ** 2 / norms
    first = int(np.argmax(proj))
    sig2 = 0.1 * float(np.var(t_eff)) if np.var(t_eff) > 0 else 1.0
    denom = max(proj[first] - sig2, 1e-6 * proj[first])
    alpha = np.full(Phi.shape[1], np.inf)
    with np.errstate(over="ignore"):
        # targets orthogonal to every basis (e.g. all zero) start from the pruning level
        alpha[first] = min(norms[first] / denom, prune_alpha) if denom > 0 else prune_alpha
    return alpha, np.array([first])


def _best_action(model, alpha, active, S, Q, prune_alpha, ruled_out=None):
    """s, q [T 3.10] from S, Q and every basis's gain in J: adding it (at its best alpha), re-estimating it or
    deleting it. Returns ``(gain, a_star)``; -inf: no such action (also for the bases ``ruled_out``, a mask)."""
    al = alpha[active]
    # s_m, q_m: equal to S_m, Q_m for bases not in the model
    s, q = S.copy(), Q.copy()
    s[active] = al * S[active] / (al - S[active])
    q[active] = al * Q[active] / (al - S[active])
    s = np.maximum(s, 1e-300)
    q2 = q * q
    a_star, f_star = C.best_alpha(s, q2, model.a, model.b, prune_alpha)
    gain = np.where(np.isfinite(a_star), f_star, -np.inf)                          # add
    f_now = C.basis_contribution(al, s[active], q2[active], model.a, model.b)
    gain[active] = np.maximum(f_star[active], 0.0) - f_now                          # re-estimate or delete
    if active.size == 1:
        gain[active] = np.where(np.isfinite(a_star[active]), gain[active], -np.inf)
    if ruled_out is not None:
        gain[ruled_out] = -np.inf
    return gain, a_star


def _next_action(model, alpha, active, S, Q, opts, J, ruled_out=None):
    """The step's action: ``(i, gain, a_star, in_model, at_rest)`` for the basis of largest gain; ``at_rest`` when no
    action gains more than ``tol`` x |J| or the best is a re-estimate that would barely move its alpha."""
    gain, a_star = _best_action(model, alpha, active, S, Q, opts["prune_alpha"], ruled_out)
    i = int(np.argmax(gain))
    best = gain[i]
    in_model = bool(np.isfinite(alpha[i]))
    at_rest = (not np.isfinite(best) or best <= opts["tol"] * max(1.0, abs(J))
               or (in_model and np.isfinite(a_star[i]) and abs(np.log(a_star[i]) - np.log(alpha[i])) < SETTLED))
    return i, best, a_star, in_model, at_rest


class FastInfo(NamedTuple):
    """One step: J after it (None for a step that changed nothing: a classifier's rejected action or its retry of
    the bases ruled out); ``change``, the best action's gain relative to max(1, |J|) (what ``tol`` bounds);
    ``moving`` (every step that is not the last moves the estimates: the end is a ``stalled`` step, no action
    left and beta settled)."""

    objective: float | None
    change: float
    moving: bool = True
    stalled: bool = False


def _relative_gain(best, J):
    return max(float(best), 0.0) / max(1.0, abs(J))


def _describe(s, info):
    return f"{s.active.size} bases"


class RegressionState(NamedTuple):
    """The sequential fit at fixed design: ``alpha`` (inf outside the model), the ``active`` bases, ``beta``, the
    Gram columns ``Ga`` = Phi^T Phi[:, active], Sigma, mu, S, Q of the active set [P 28-29] (kept by rank-one
    updates between factorisations), ``objective`` J, the ``log_evidence`` after every step (the first at the
    start), the ``actions`` taken by kind, the steps ``since_beta``, the ``joint_wait`` before the next joint
    MacKay try and the step of that try (``next_joint``), and the ``iteration``."""

    alpha: np.ndarray
    active: np.ndarray
    beta: float
    Ga: np.ndarray
    Sigma: np.ndarray
    mu: np.ndarray
    S: np.ndarray
    Q: np.ndarray
    objective: float
    log_evidence: tuple
    actions: dict
    since_beta: int
    joint_wait: int
    next_joint: int
    iteration: int


class _RegressionProblem:
    """What a regression fit computes once from the design and the targets (basis norms, Phi^T t, t^T t, the Gram
    columns formed so far) and the three computations its steps share: the posterior of an active set, the
    evidence from J and MacKay's beta."""

    def __init__(self, model, Phi, t):
        self.model, self.Phi, self.t = model, Phi, t
        self.N = Phi.shape[0]
        norms = np.sum(Phi**2, 0)
        self.norms = np.where(norms > 0, norms, 1e-300)
        self.Pt = Phi.T @ t
        self.tt = float(t @ t)
        # columns of the Gram Phi^T Phi for the bases in the model only, each formed once when its basis first
        # enters (O(N M) each): forming all of it would cost O(N M^2), more than the whole run on large N
        self.gram_columns = {}

    def posterior(self, alpha, active, beta, Ga):
        """post, Sigma, mu, S, Q [P 28-29] and J for the active set at alpha, beta, from one factorisation."""
        al = alpha[active]
        H = beta * Ga[active]
        H[np.diag_indices(active.size)] += al
        post = C.Gaussian(H, beta * self.Pt[active])
        Sigma = post.Sigma.copy()
        S = beta * self.norms - beta * beta * np.sum((Ga @ Sigma) * Ga, 1)
        Q = beta * self.Pt - beta * (Ga @ post.mu)          # Sigma beta Phi^T t is the posterior mean
        ev = C.log_evidence(post, beta * self.tt, beta * self.Pt[active], al, self.N * np.log(beta), self.N)
        return post, Sigma, post.mu.copy(), S, Q, ev + C.log_prior_terms(al, beta, self.model)

    def evidence(self, J, alpha, active, beta):
        """The log evidence: between factorisations J is accumulated from the actions' gains, the evidence follows
        from it."""
        return J - C.log_prior_terms(alpha[active], beta, self.model)

    def mackay_beta(self, gamma, active, mu):
        """[T 2.27], corrected: Gamma(c, d) on beta."""
        r = self.t - self.Phi[:, active] @ mu
        # N - sum gamma >= 0 exactly, not always in rounding (bases that interpolate)
        return (max(self.N - float(np.sum(gamma)), 0.0) + 2 * self.model.c) / (float(r @ r) + 2 * self.model.d)


def _regression(model, Phi, t, opts):
    """The sequential regression fit (module docstring): its :class:`Algorithm` and ``finish(run)``, the result
    dict of a run."""
    p = _RegressionProblem(model, Phi, t)

    def init(_):
        alpha, active = _first_basis(Phi, t, p.norms, opts["prune_alpha"])
        var_t = float(np.var(t)) if np.var(t) > 0 else 1.0
        beta = float(opts["init_beta"] or 10.0 / var_t)
        Ga = _gram_columns(Phi, active, p.gram_columns)          # Phi^T Phi[:, active], kept in step with `active`
        _, Sigma, mu, S, Q, J = p.posterior(alpha, active, beta, Ga)
        actions = {"add": 0, "reestimate": 0, "delete": 0, "joint": 0, "beta": 0}
        return RegressionState(alpha, active, beta, Ga, Sigma, mu, S, Q, J, (p.evidence(J, alpha, active, beta),),
                               actions, 0, 1, 0, 0)

    def step(s):
        it = s.iteration + 1
        i, best, a_star, in_model, at_rest = _next_action(model, s.alpha, s.active, s.S, s.Q, opts, s.objective)
        gain = _relative_gain(best, s.objective)
        gamma = 1.0 - s.alpha[s.active] * np.diag(s.Sigma)
        actions = dict(s.actions)

        def moved(alpha, active, beta, Ga, Sigma, mu, S, Q, J, since_beta, joint_wait, next_joint):
            ev = s.log_evidence + (p.evidence(J, alpha, active, beta),)
            return (RegressionState(alpha, active, beta, Ga, Sigma, mu, S, Q, J, ev, actions, since_beta, joint_wait,
                                    next_joint, it), FastInfo(J, gain))

        if at_rest or s.since_beta >= opts["beta_every"]:
            new_beta = p.mackay_beta(gamma, s.active, s.mu)
            if at_rest and abs(np.log(new_beta) - np.log(s.beta)) < SETTLED:
                return s, FastInfo(None, gain, moving=False, stalled=True)
            _, Sigma, mu, S, Q, J = p.posterior(s.alpha, s.active, new_beta, s.Ga)
            actions["beta"] += 1
            return moved(s.alpha, s.active, new_beta, s.Ga, Sigma, mu, S, Q, J, 0, s.joint_wait, s.next_joint)
        joint_wait, next_joint = s.joint_wait, s.next_joint
        if in_model and np.isfinite(a_star[i]) and opts["joint_steps"] and it >= next_joint:
            # the joint update is kept only if it beats the single action it replaces
            alpha, beta, Sigma, mu, S, Q, J = _joint_update(p, s, gamma, opts["prune_alpha"])
            if J >= s.objective + best:
                actions["joint"] += 1
                return moved(alpha, s.active, beta, s.Ga, Sigma, mu, S, Q, J, 0, 1, it + 1)
            # a failed try costs a factorisation: wait twice as long before the next
            joint_wait *= 2
            next_joint = it + joint_wait
        kind, (alpha, active, Ga, Sigma, mu, S, Q) = _single_action(p, s, i, a_star[i], in_model)
        actions[kind] += 1
        # the action's gain is its exact change of J at fixed beta
        return moved(alpha, active, s.beta, Ga, Sigma, mu, S, Q, s.objective + best, s.since_beta + 1, joint_wait,
                     next_joint)

    def finish(run):
        s = run.state
        # the exact posterior and J for the final active set, alpha and beta (clears the rounding of the updates)
        post, _, _, _, _, J = p.posterior(s.alpha, s.active, s.beta, s.Ga)
        trace_ev = s.log_evidence + (p.evidence(J, s.alpha, s.active, s.beta),)
        return _result(s.active, s.alpha, s.beta, post, trace_ev, (*run.trace, J), run.iterations, run.converged,
                       s.actions)

    return Algorithm(init, step, describe=_describe), finish


def _joint_update(p, s, gamma, prune_alpha):
    """MacKay's update of every alpha in the model and of beta at once [T 2.25-2.27] (the step of ``em`` on the
    active set) from the state ``s``: the new alpha, beta and Sigma, mu, S, Q, J at them."""
    proposal = (gamma + 2 * p.model.a) / (s.mu * s.mu + 2 * p.model.b)
    # a non-positive or non-finite proposal keeps that basis's alpha
    usable = np.isfinite(proposal) & (proposal > 0)
    alpha = s.alpha.copy()
    alpha[s.active] = np.where(usable, np.minimum(proposal, prune_alpha), s.alpha[s.active])
    beta = p.mackay_beta(gamma, s.active, s.mu)
    _, Sigma, mu, S, Q, J = p.posterior(alpha, s.active, beta, s.Ga)
    return alpha, beta, Sigma, mu, S, Q, J


def _single_action(p, s, i, alpha_i, in_model):
    """Add basis ``i`` at ``alpha_i``, re-estimate it to ``alpha_i`` or delete it (``alpha_i`` infinite) at fixed beta,
    by the rank-one updates of Tipping and Faul's appendix (O(N M), no factorisation): the action's kind and the new
    (alpha, active, Ga, Sigma, mu, S, Q)."""
    alpha, active, Ga = s.alpha.copy(), s.active, s.Ga
    if not in_model:
        gram_i = _gram_columns(p.Phi, [i], p.gram_columns)[:, 0]
        Sigma, mu, S, Q = _added(s.Sigma, s.mu, s.S, s.Q, Ga, gram_i, active, i, alpha_i, s.beta)
        alpha[i] = alpha_i
        return "add", (alpha, np.append(active, i), np.column_stack([Ga, gram_i]), Sigma, mu, S, Q)
    j = int(np.flatnonzero(active == i)[0])
    if np.isfinite(alpha_i):
        Sigma, mu, S, Q = _reestimated(s.Sigma, s.mu, s.S, s.Q, Ga, j, alpha_i - alpha[i], s.beta)
        alpha[i] = alpha_i
        return "reestimate", (alpha, active, Ga, Sigma, mu, S, Q)
    Sigma, mu, S, Q = _deleted(s.Sigma, s.mu, s.S, s.Q, Ga, j, s.beta)
    keep = np.arange(active.size) != j
    alpha[i] = np.inf
    return "delete", (alpha, active[keep], Ga[:, keep], Sigma, mu, S, Q)


# ------------------------------------------------------------------ rank-one updates at fixed beta (Tipping-Faul)
def _added(Sigma, mu, S, Q, Ga, gram_i, active, i, alpha_i, beta):
    """Sigma, mu, S, Q after basis i enters at ``alpha_i``; ``gram_i`` = Phi^T phi_i, ``Ga`` = Phi^T Phi_active."""
    Sii = 1.0 / (alpha_i + S[i])
    mui = Sii * Q[i]
    u = beta * (Sigma @ gram_i[active])                          # beta Sigma Phi_active^T phi_i
    e = beta * (gram_i - Ga @ u)                                 # beta Phi^T (phi_i - Phi_active u)
    K = mu.size
    grown = np.empty((K + 1, K + 1))
    grown[:K, :K] = Sigma + Sii * np.outer(u, u)
    grown[:K, K] = grown[K, :K] = -Sii * u
    grown[K, K] = Sii
    return grown, np.append(mu - mui * u, mui), S - Sii * e * e, Q - mui * e


def _reestimated(Sigma, mu, S, Q, Ga, j, delta_alpha, beta):
    """Sigma, mu, S, Q after alpha of the j-th basis in the model changes by ``delta_alpha`` (not 0)."""
    Sj = Sigma[:, j].copy()
    kappa = 1.0 / (Sj[j] + 1.0 / delta_alpha)
    v = beta * (Ga @ Sj)                                         # beta Phi^T Phi_active Sigma_j
    return Sigma - kappa * np.outer(Sj, Sj), mu - kappa * mu[j] * Sj, S + kappa * v * v, Q + kappa * mu[j] * v


def _deleted(Sigma, mu, S, Q, Ga, j, beta):
    """Sigma, mu, S, Q after the j-th basis in the model leaves it (alpha_j -> infinity)."""
    Sj = Sigma[:, j].copy()
    Sjj, muj = Sj[j], mu[j]
    v = beta * (Ga @ Sj)
    keep = np.arange(mu.size) != j
    Sigma = Sigma - np.outer(Sj, Sj) / Sjj
    return Sigma[np.ix_(keep, keep)], (mu - muj * Sj / Sjj)[keep], S + v * v / Sjj, Q + muj * v / Sjj


# ------------------------------------------------------------------ classification
class ClassificationState(NamedTuple):
    """The sequential fit with a Laplace approximation: ``alpha`` (inf outside the model), the ``active`` bases,
    the Laplace ``post`` at the mode with the IRLS weights ``W`` and gradient ``g``, S and Q of every basis,
    ``objective`` J, the ``log_evidence`` after every kept action (the first at the start), the bases
    ``ruled_out`` (their predicted gain did not materialise), whether an action was kept since the last retry of
    those, the ``actions`` taken by kind and ``rejected``."""

    alpha: np.ndarray
    active: np.ndarray
    post: C.Gaussian
    W: np.ndarray
    g: np.ndarray
    S: np.ndarray
    Q: np.ndarray
    objective: float
    log_evidence: tuple
    ruled_out: np.ndarray
    kept_since_retry: bool
    actions: dict


def _classification(model, Phi, t, opts):
    """Classification: the Laplace mode, S and Q are recomputed after every action [P 18-20, 28-29].

    S and Q predict each action's gain from the Laplace approximation at the current mode, and the mode moves with
    the action: on (nearly) separable data the prediction can be wrong by whole nats (breast cancer at h = 2: one
    basis's alpha cycled between 1.5e-5 and 2.2e-3, each move "gaining" 1-2 nats and losing 3, until ``max_iter``).
    An action is therefore kept only if the recomputed objective rises; otherwise the state stays and that basis is
    ruled out. When no action is left that gains, the bases ruled out are tried again; converged when a round
    since the last retry kept no action (or none was ruled out). Retrying them only then, not after every kept
    action, keeps the cost of the wrong predictions to about one Laplace fit per such basis and round."""
    norms = np.sum(Phi**2, 0)
    norms = np.where(norms > 0, norms, 1e-300)

    def at(alpha, active, w0):
        """The Laplace fit at (alpha, active), its IRLS started from w0: (post, W, g, log evidence, J)."""
        al = alpha[active]
        post, W, g, ll, _ = C.laplace_mode(Phi[:, active], t, al, model.link, w0=w0)
        ev = C.laplace_log_evidence(post, al, ll)
        return post, W, g, ev, ev + C.log_prior_terms(al, None, model)

    def factors(post, W, g, active):
        """S and Q of every basis [P 28-29] at a Laplace fit."""
        Bt = W * (Phi[:, active] @ post.mu) + g                  # B t-hat  [P 20]
        PBP = (Phi.T * W) @ Phi[:, active]                       # Phi^T B Phi_active
        PBt = Phi.T @ Bt
        S = (Phi**2).T @ W - np.sum((PBP @ post.Sigma) * PBP, 1)           # [P 28]
        Q = PBt - PBP @ (post.Sigma @ PBt[active])                           # [P 29]
        return S, Q

    def kept(alpha, active, fit, log_evidence, ruled_out, actions, kept_since_retry=True):
        """The state after an action is kept (or at the start)."""
        post, W, g, ev, J = fit
        S, Q = factors(post, W, g, active)
        return ClassificationState(alpha, active, post, W, g, S, Q, J, log_evidence + (ev,), ruled_out,
                                   kept_since_retry, actions)

    def init(_):
        alpha, active = _first_basis(Phi, 4.0 * (t - 0.5), norms, opts["prune_alpha"])   # t-hat at w = 0, logit link
        actions = {"add": 0, "reestimate": 0, "delete": 0, "rejected": 0}
        return kept(alpha, active, at(alpha, active, None), (), np.zeros(Phi.shape[1], dtype=bool), actions,
                    kept_since_retry=False)

    def step(s):
        i, best, a_star, in_model, at_rest = _next_action(model, s.alpha, s.active, s.S, s.Q, opts, s.objective,
                                                          s.ruled_out)
        gain = _relative_gain(best, s.objective)
        if at_rest:
            if not (s.ruled_out.any() and s.kept_since_retry):
                return s, FastInfo(None, gain, moving=False, stalled=True)
            return s._replace(ruled_out=np.zeros_like(s.ruled_out), kept_since_retry=False), FastInfo(None, gain)
        tried_alpha, tried_active, w0 = s.alpha.copy(), s.active, s.post.mu
        if not in_model:
            kind = "add"
            tried_alpha[i] = a_star[i]
            tried_active, w0 = np.append(s.active, i), np.append(w0, 0.0)
        elif np.isfinite(a_star[i]):
            kind = "reestimate"
            tried_alpha[i] = a_star[i]
        else:
            kind = "delete"
            keep = s.active != i
            tried_alpha[i] = np.inf
            tried_active, w0 = s.active[keep], w0[keep]
        tried = at(tried_alpha, tried_active, w0)
        actions = dict(s.actions)
        if not tried[-1] > s.objective:
            ruled_out = s.ruled_out.copy()
            ruled_out[i] = True
            actions["rejected"] += 1
            return s._replace(ruled_out=ruled_out, actions=actions), FastInfo(None, gain)
        actions[kind] += 1
        state = kept(tried_alpha, tried_active, tried, s.log_evidence, s.ruled_out, actions)
        return state, FastInfo(state.objective, gain)

    def finish(run):
        s = run.state
        return _result(s.active, s.alpha, None, s.post, s.log_evidence, run.trace, run.iterations, run.converged,
                       s.actions)

    return Algorithm(init, step, describe=_describe), finish


def _result(active, alpha, beta, post, trace_ev, trace_obj, iterations, converged, actions) -> C.Type2Estimate:
    order = np.argsort(active)
    return C.Type2Estimate(active=active[order], alpha=alpha[active[order]], beta=beta, post=_permute(post, order),
                           log_evidence=np.array(trace_ev), objective=np.array(trace_obj), iterations=iterations,
                           converged=converged, actions=actions)


def _gram_columns(Phi, indices, cache):
    """Phi^T Phi[:, indices] (M x k), from ``cache`` where a column was formed before."""
    for i in indices:
        if i not in cache:
            cache[i] = Phi.T @ Phi[:, i]
    return np.column_stack([cache[i] for i in indices])


class _Permuted:
    def __init__(self, mu, Sigma, R):
        self.mu, self.Sigma, self._R = mu, Sigma, R

    def chol_cov(self):
        return self._R


def _permute(post, order):
    return _Permuted(post.mu[order], post.Sigma[np.ix_(order, order)], post.chol_cov()[order])


@register("fast", kind="approximation", family="rvm", options=OPTIONS, defaults=APPROXIMATION_DEFAULTS,
          memory=C.memory(3.5),
          description="Tipping-Faul fast marginal likelihood maximisation (add / re-estimate / delete)")
def run(model, data, *, draws, tune, chains, ctx, **opts):
    """Tipping-Faul sequential type-II ML / MAP; Gaussian (or Laplace) posterior of w at the estimate."""
    # one BLAS thread: the factorisations are of the active set (M x M, M << N) and the products with Phi level-2
    return C.run_type2(fast_fit, model, data, opts, ctx, draws=draws, chains=chains,
                       extra_info=lambda res: {"actions": res.actions}, one_thread=True)
