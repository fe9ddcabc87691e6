"""``fast``: Tipping-Faul fast marginal likelihood maximisation ([T ch.3], [P §II-C], digest 2.2).

Starts from one basis (the one best aligned with the targets, [T §3.2] step 2) and, at every iteration,
scores all N + 1 candidates with the sparsity / quality factors S_m, Q_m ([P 28-29], Woodbury form on the
active set: O(N M^2) per iteration, never O(N^3)) and s_m, q_m [T 3.10]; takes the single action
(add / re-estimate / delete) with the largest increase of the objective J of :mod:`.core`. Each basis's
share of J is f_i = l(alpha_i) [T 3.5] + a log alpha_i - b alpha_i; with a = b = 0 its maximiser is
[T 3.7-3.8] alpha_i = s_i^2 / (q_i^2 - s_i), and with the model's Gamma hyperprior it is found numerically
(:func:`.core.best_alpha`). Regression: beta is re-estimated after every action with [T 2.27]
(corrected: Gamma(c, d) on beta) and Sigma, mu, S, Q are recomputed on the active set for the new beta (Sigma
depends on beta, so the rank-one updates of [T ch. 3], valid at fixed beta, do not apply); of the Gram Phi^T Phi
only the columns of bases that enter the model are formed. BLAS runs on one thread (the matrices are M x M).
Classification: the Laplace mode is recomputed by IRLS after every action and S, Q use B and t-hat [P 19-20].
"""
from __future__ import annotations

import numpy as np

from bayeszoo.checks import POSITIVE, POSITIVE_INT, Interval
from bayeszoo.progress import progress_bar, show
from bayeszoo.registry import APPROXIMATION_DEFAULTS, Option, register

from . import core as C

OPTIONS = {
    "max_iter": Option(5000, "largest number of actions (add, re-estimate or delete one basis)", POSITIVE_INT),
    "tol": Option(1e-8, "converged when the best action would raise J by less than this times max(1, |J|)",
                  POSITIVE),
    "prune_alpha": Option(1e12, "a basis whose best alpha exceeds this is left out of the model", POSITIVE),
    "init_beta": Option(None, "starting noise precision (regression); None: 10 / var(t)",
                        Interval(float, 0, None, "neither", none=True)),
}


def fast_fit(model, Phi, t, opts, progress=False):
    N, M = Phi.shape
    a, b, c, d = model.a, model.b, model.c, model.d
    clf = model.is_classifier
    norms = np.sum(Phi**2, 0)
    norms = np.where(norms > 0, norms, 1e-300)
    alpha = np.full(M, np.inf)
    if clf:
        t_eff = 4.0 * (t - 0.5)                                  # t-hat at w = 0 for the logit link
        beta = None
        Pt = None
    else:
        t_eff = t
        var_t = float(np.var(t)) if np.var(t) > 0 else 1.0
        beta = float(opts["init_beta"] or 10.0 / var_t)
        Pt = Phi.T @ t
        gdiag = np.sum(Phi**2, 0)
        # columns of the Gram Phi^T Phi for the bases in the model only, each formed once when its basis first enters
        # (O(N M) each): forming all of it would cost O(N M^2), more than the whole run on large N
        gram_columns = {}
    proj = (Phi.T @ t_eff) ** 2 / norms
    first = int(np.argmax(proj))
    sig2 = 0.1 * float(np.var(t_eff)) if np.var(t_eff) > 0 else 1.0
    denom = max(proj[first] - sig2, 1e-6 * proj[first])
    with np.errstate(over="ignore"):
        # [T §3.2] step 2; targets orthogonal to every basis (e.g. all zero) start from the pruning level
        alpha[first] = min(norms[first] / denom, opts["prune_alpha"]) if denom > 0 else opts["prune_alpha"]
    active = np.array([first])
    if not clf:
        Ga = _gram_columns(Phi, active, gram_columns)          # Phi^T Phi[:, active], kept in step with `active`
    tt = float(t @ t)
    w_mode = None
    trace_ev, trace_obj, actions = [], [], {"add": 0, "reestimate": 0, "delete": 0}
    converged = False
    it = 0
    with progress_bar(total=opts["max_iter"], desc="fast", disable=not progress, unit="action") as bar:
        for it in range(1, opts["max_iter"] + 1):
            al = alpha[active]
            if clf:
                post, W, g, ll, _ = C.laplace_mode(Phi[:, active], t, al, model.link, w0=w_mode)
                w_mode = post.mu
                ev = C.laplace_log_evidence(post, al, ll)
                Bt = W * (Phi[:, active] @ post.mu) + g              # B t-hat  [P 20]
                PBP = (Phi.T * W) @ Phi[:, active]                   # Phi^T B Phi_active
                PBt = Phi.T @ Bt
                S = (Phi**2).T @ W - np.sum((PBP @ post.Sigma) * PBP, 1)           # [P 28]
                Q = PBt - PBP @ (post.Sigma @ PBt[active])                           # [P 29]
            else:
                H = beta * Ga[active]
                H[np.diag_indices(active.size)] += al
                post = C.Gaussian(H, beta * Pt[active])
                ev = C.log_evidence(post, beta * tt, beta * Pt[active], al, N * np.log(beta), N)
                S = beta * gdiag - beta * beta * np.sum((Ga @ post.Sigma) * Ga, 1)      # [P 28]
                Q = beta * Pt - beta * (Ga @ post.mu)       # [P 29]: Sigma beta Phi^T t is the posterior mean
            trace_ev.append(ev)
            trace_obj.append(ev + C.log_prior_terms(al, beta, model))
            # s_m, q_m [T 3.10]: equal to S_m, Q_m for bases not in the model
            s, q = S.copy(), Q.copy()
            s[active] = al * S[active] / (al - S[active])
            q[active] = al * Q[active] / (al - S[active])
            s = np.maximum(s, 1e-300)
            q2 = q * q
            a_star, f_star = C.best_alpha(s, q2, a, b, opts["prune_alpha"])
            gain = np.where(np.isfinite(a_star), f_star, -np.inf)                  # add
            f_now = C.basis_contribution(al, s[active], q2[active], a, b)
            gain[active] = np.maximum(f_star[active], 0.0) - f_now                  # re-estimate or delete
            if active.size == 1:
                gain[active] = np.where(np.isfinite(a_star[active]), gain[active], -np.inf)
            i = int(np.argmax(gain))
            best = gain[i]
            in_model = np.isfinite(alpha[i])
            new_beta = beta
            if not clf:
                gamma = 1.0 - al * np.diag(post.Sigma)
                r = t - Phi[:, active] @ post.mu
                # [T 2.27], corrected; N - sum gamma >= 0 exactly, not always in rounding (bases that interpolate)
                new_beta = (max(N - float(np.sum(gamma)), 0.0) + 2 * c) / (float(r @ r) + 2 * d)
            beta_change = 0.0 if clf else abs(np.log(new_beta) - np.log(beta))
            bar.update()
            show(bar, f"gain {max(best, 0.0):.2g} (tol {opts['tol']:g} x |J|), {active.size} bases")
            small_step = (not np.isfinite(best) or best <= opts["tol"] * max(1.0, abs(trace_obj[-1]))
                          or (in_model and np.isfinite(a_star[i])
                              and abs(np.log(a_star[i]) - np.log(alpha[i])) < 1e-6))
            if small_step and beta_change < 1e-6:
                converged = True
                break
            if np.isfinite(best) and best > 0:
                if not in_model:
                    alpha[i] = a_star[i]
                    active = np.append(active, i)
                    if clf:
                        w_mode = np.append(w_mode, 0.0)
                    else:
                        Ga = np.column_stack([Ga, _gram_columns(Phi, [i], gram_columns)])
                    actions["add"] += 1
                elif np.isfinite(a_star[i]):
                    alpha[i] = a_star[i]
                    actions["reestimate"] += 1
                else:
                    keep = active != i
                    alpha[i] = np.inf
                    active = active[keep]
                    if clf:
                        w_mode = w_mode[keep]
                    else:
                        Ga = Ga[:, keep]
                    actions["delete"] += 1
            beta = new_beta
    # posterior for the final active set, alpha and beta
    al = alpha[active]
    if clf:
        post_final, W, g, ll, _ = C.laplace_mode(Phi[:, active], t, al, model.link, w0=w_mode)
    else:
        H = beta * Ga[active]
        H[np.diag_indices(active.size)] += al
        post_final = C.Gaussian(H, beta * Pt[active])
        if not converged:
            ev = C.log_evidence(post_final, beta * tt, beta * Pt[active], al, N * np.log(beta), N)
            trace_ev.append(ev)
            trace_obj.append(ev + C.log_prior_terms(al, beta, model))
    order = np.argsort(active)
    active = active[order]
    post_final = _permute(post_final, order)
    return dict(active=active, alpha=alpha[active], beta=beta, post=post_final,
                log_evidence=np.array(trace_ev), objective=np.array(trace_obj), iterations=it,
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
def run(model, data, *, draws, tune, chains, seed, progress, **opts):
    """Tipping-Faul sequential type-II ML / MAP; Gaussian (or Laplace) posterior of w at the estimate."""
    # one BLAS thread: the factorisations are of the active set (M x M, M << N) and the products with Phi level-2
    return C.run_type2("fast", fast_fit, model, data, opts, draws=draws, chains=chains, seed=seed, progress=progress,
                       extra_info=lambda res: {"actions": res["actions"]}, one_thread=True)
