"""``gibbs``: the thesis's Algorithm 1 for pMKL (Damoulas §3.4.1, App. A), a NumPy kernel of the chain driver
(:mod:`bayeszoo.inference.chains`).

One sweep, per chain:
    beta            convex: Metropolis-Hastings with a Dirichlet(kappa beta + 1/2) proposal (Hastings ratio
                    included); weighted product: random walk on log beta_s, log pi_s, log chi_s (Jacobians
                    included) (A.3-A.5); binary: exact Gibbs for each beta_i (A.1.3). The likelihood term is
                    p(Y | beta, A) = prod_c N(y_c | 0, I + K A_c^-1 K) with W integrated out    (A.6 with
                    Omega^-1, erratum 8); ``beta_update="conditional"`` uses the thesis's
                    prod N(y_nc | w_c^T k_n^beta, 1) at the current W instead (A.1), which mixes far more
                    slowly because W is tied to the beta it was drawn under.
    rho             (convex rule, ``infer_rho``) random walk on log rho_s, target Dir(beta | rho) prod_s
                    Gamma(rho_s | lam, mu) with the log-scale Jacobian                           (A.2)
    Theta           (``kernel_params="infer"``) one random-walk step on log theta_s per rbf source s,
                    target p(Y | beta, Theta, A) prod_sd Gamma(theta_sd | omega, phi) with W integrated
                    out as for beta, plus the log-scale Jacobian                       (A.7, digest §3.1)
    Y               ``y_step="collapsed"`` (default): y_n | y_-n, beta, Theta, A with W integrated out, one
                    object at a time inside its cone (Holmes & Held 2006); ``"conditional"``: the thesis's
                    Y | W, one Gibbs sweep inside each cone with exact truncated-normal draws      (3.23)
    W | Y, A, beta  prod_c N(V_c K y_c, V_c), V_c^-1 = K K + A_c                                (3.22)
    A | W           alpha_nc ~ Gamma(tau + 1/2, nu + w_nc^2 / 2)                                  (3.24)
With "collapsed", beta, Theta and Y are all drawn with W integrated out and W right after them, so the sweep is
a partially collapsed Gibbs sampler that leaves the posterior invariant; with "conditional", (beta, Theta, W)
is one block and Y follows W. The collapsed Y step costs one extra N x N inverse per class and a loop over the
objects, and mixes much better (BENCHMARKS.md).

The MH proposal scales (kappa, the log-scale steps of beta, Theta and rho) live in each chain's State; ``adapt``
moves them every 20 warm-up sweeps towards an acceptance rate of 0.2-0.4, and they are frozen after warm-up.
Acceptance rates are ``sample_stats`` (``accept_beta``, ``accept_theta``, ``accept_rho``: one per
Metropolis-Hastings block, so no single ArviZ ``acceptance_rate``); ``fit.info["theta_acceptance"]`` holds theta's
per rbf source. ``fit.info["iterations"]`` counts the sweeps, warm-up included.
Chains start from beta drawn from the prior (at rho = the model's ``rho``), Theta at its fixed values (1/D_s
unless given), alpha = 1 and Y "aligned" with the labels (y_n,t_n = 1, others 0; erratum 17). The conditionals
take a leading chain axis (the kernel's State keeps one of length 1); the collapsed likelihood goes through the
Cholesky factors of K K + A_c (Woodbury and the determinant lemma), which the W draw reuses; BLAS runs on one
thread (many small factorisations). Seeding, warm-up, thinning and progress are the driver's: chain c of seed s
draws from its own generator, whatever the number of chains.

Options (``bz.backends(model, details=True)``): ``thin``, ``beta_steps`` and ``theta_steps`` (MH steps per sweep;
"few steps, even one" per the thesis), ``beta_update``, ``y_step``, ``fix_alpha``, ``fix_beta``.
"""
from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np
from scipy.linalg.lapack import dtrtrs
from scipy.special import gammaln, log_ndtr, ndtri_exp

from bayeszoo import checks
from bayeszoo.inference.chains import Kernel, chains_fit, sample
from bayeszoo.numerics.blas_threads import one_blas_thread
from bayeszoo.numerics.linalg import jittered_cholesky
from bayeszoo.registry import Option, register

from . import common as MK


# -------------------------------------------------------------------------------- full conditionals
BATCHED_SOLVE_N = 16   # up to this size one batched LAPACK call (an LU) beats a loop of triangular solves


def lower_solve(L, b, trans: bool = False):
    """L^-1 b (L^-T b if ``trans``) for a stack of lower-triangular factors L (..., N, N) and right-hand sides b
    (..., N) or (..., N, M): one batched call for small N (the loop's call overhead dominates), LAPACK's triangular
    solves otherwise (a batched LU costs N^3 per factor, a triangular solve N^2 per right-hand side)."""
    vector = b.ndim == L.ndim - 1
    if L.shape[-1] <= BATCHED_SOLVE_N:
        out = np.linalg.solve(np.swapaxes(L, -1, -2) if trans else L, b[..., None] if vector else b)
        return out[..., 0] if vector else out
    lead = L.shape[:-2]
    if b.shape[:len(lead)] != lead:
        b = np.broadcast_to(b, lead + b.shape[len(lead):])
    out = np.empty(b.shape)
    for idx in np.ndindex(*lead):
        out[idx], info = dtrtrs(L[idx], b[idx], lower=1, trans=int(trans))
        if info != 0:
            raise np.linalg.LinAlgError("a singular Cholesky factor in the PMKL sampler")
    return out


class Collapsed(NamedTuple):
    """W integrated out at one (K, Y, A) per chain. ``ll`` = log p(Y | K, A) = sum_c log N(y_c | 0, Omega_c),
    Omega_c = I + K A_c^-1 K (A.6 with Omega^-1, erratum 8); ``L`` the Cholesky factors of K K + A_c and
    ``v`` = L^-1 K y_c, from which W | Y, A (3.22) is drawn without another factorisation."""

    ll: np.ndarray      # (ch,)
    K: np.ndarray       # (ch, N, N) composite kernel
    L: np.ndarray       # (ch, C, N, N)
    v: np.ndarray       # (ch, C, N)
    KK: np.ndarray      # (ch, N, N) K K, which the next sweep's collapse at the same K reuses


def collapse(Y, K, A, KK=None) -> Collapsed:
    """:class:`Collapsed` for every chain: Y, A (ch, N, C), K (ch, N, N) symmetric; ``KK`` = K K if known.

    Omega_c^-1 = I - K (K K + A_c)^-1 K (Woodbury) and |Omega_c| = |K K + A_c| / |A_c| (determinant lemma), so one
    K K product and C Cholesky factors serve both the likelihood and the W draw."""
    ch, N, C = Y.shape
    KK = K @ K if KK is None else KK
    P = np.repeat(KK[:, None], C, axis=1)                                # (ch, C, N, N)
    idx = np.arange(N)
    P[:, :, idx, idx] += np.swapaxes(A, 1, 2)
    try:
        L = np.linalg.cholesky(P)
    except np.linalg.LinAlgError:
        L = np.stack([np.stack([jittered_cholesky(P[k, c], what=f"K K + A_{c} (the precision of W's class {c})")
                                for c in range(C)]) for k in range(ch)])
    v = lower_solve(L, np.einsum("knm,knc->kcm", K, Y))                  # L^-1 K^T y_c (K symmetric)
    quad = np.sum(Y * Y, axis=(1, 2)) - np.sum(v * v, axis=(1, 2))     # sum_c y_c^T Omega_c^-1 y_c
    logdet = 2.0 * np.sum(np.log(np.diagonal(L, axis1=2, axis2=3)), axis=(1, 2)) - np.sum(np.log(A), axis=(1, 2))
    return Collapsed(-0.5 * quad - 0.5 * logdet - 0.5 * N * C * MK.LOG_2PI, K, L, v, KK)


def pick(accept, new: Collapsed, cur: Collapsed) -> Collapsed:
    """Per chain, the proposal's :class:`Collapsed` where it was accepted, the current one elsewhere."""
    if accept.all():
        return new
    if not accept.any():
        return cur
    return Collapsed(*(np.where(accept.reshape((-1,) + (1,) * (a.ndim - 1)), a, b) for a, b in zip(new, cur)))


def w_from(rng, st: Collapsed):
    """W | Y, A, K for every chain (3.22): w_c = L_c^-T (v_c + z), z ~ N(0, I), i.e. N((KK + A_c)^-1 K y_c,
    (KK + A_c)^-1). Returns (ch, N, C)."""
    z = rng.standard_normal(st.v.shape)
    return np.swapaxes(lower_solve(st.L, st.v + z, trans=True), 1, 2)


def collapsed_y_sweep(rng, Y, st: Collapsed, onehot):
    """One sweep over the objects n of y_n | y_-n, beta, Theta, A with W integrated out (Holmes & Held 2006's
    joint update of the latents and the weights; an alternative to the thesis's Y | W of Algorithm 1).

    Given K and A the columns y_c are independent N(0, Omega_c), so y_nc | y_-n,c ~ N(y_nc - (P_c y_c)_n / P_c,nn,
    1 / P_c,nn) with P_c = Omega_c^-1 = I - B_c^T B_c, B_c = L_c^-1 K; y_n is drawn inside its cone by one inner
    Gibbs sweep (the true class's entry above the others' maximum, then the others below it), exact
    inverse-CDF draws (:func:`~bayeszoo.inference.random_draws.truncnorm_above` and ``_below`` written out, with the
    sweep's uniforms drawn at once). (P_c y_c)_m / P_c,mm is updated after every object. Returns the new Y
    (ch, N, C)."""
    ch, C, N = st.v.shape
    B = lower_solve(st.L, np.broadcast_to(st.K[:, None], st.L.shape))    # (ch, C, N, N)
    P = -np.swapaxes(B, 2, 3) @ B
    idx = np.arange(N)
    P[..., idx, idx] += 1.0
    # P_c,nn is in (0, 1]; 1 - |b_n|^2 loses its digits when alpha is tiny against K K: floor it at the rounding level
    diag = np.maximum(P[..., idx, idx], np.finfo(float).eps)                        # (ch, C, N)
    Py = np.swapaxes(Y, 1, 2) - np.einsum("kcmn,kcm->kcn", B, st.v)     # (I - B^T B) y_c, with v = B y_c
    # the loop runs over objects: every array it reads is laid out object first, (N, ch, C)
    shift = np.ascontiguousarray(np.moveaxis(Py / diag, 2, 0))           # (P_c y_c)_m / P_c,mm
    update = np.ascontiguousarray(np.transpose(P / diag[..., None], (3, 2, 0, 1)))   # [n, m]: P_c,mn / P_c,mm
    sd = np.ascontiguousarray(np.moveaxis(1.0 / np.sqrt(diag), 2, 0))
    labels = np.argmax(onehot, axis=1)
    at = (idx, slice(None), labels)
    sd_t, inv_sd_t = sd[at], 1.0 / sd[at]                                  # (N, ch): the true class's
    log_u = np.log(rng.random((2, N, ch, C)))
    log_u_t, log_u_others = log_u[0][at], log_u[1]
    Yn = np.array(np.swapaxes(Y, 0, 1), order="C")                        # (N, ch, C), a copy
    # y_n changes only when object n is visited: the largest entry of its other classes is known from the start
    top = np.max(np.where(onehot[:, None, :], -np.inf, Yn), axis=2)       # (N, ch)
    Yv = Yn
    if ch == 1:   # one chain (the sampler's kernel): the true class's numbers are scalars, far cheaper than arrays
        shift, update, sd, Yv, log_u_others = shift[:, 0], update[:, :, 0], sd[:, 0], Yn[:, 0], log_u_others[:, 0]
        sd_t, inv_sd_t, log_u_t, top = sd_t[:, 0], inv_sd_t[:, 0], log_u_t[:, 0], top[:, 0]
    for n in range(N):
        t, s = labels[n], sd[n]
        y_old = Yv[n]
        mu = y_old - shift[n]
        m_t = mu[..., t][()]
        y_t = m_t - sd_t[n] * ndtri_exp(log_ndtr((m_t - top[n]) * inv_sd_t[n]) + log_u_t[n])     # above top
        y_new = mu + s * ndtri_exp(log_ndtr((y_t[..., None] - mu) / s) + log_u_others[n])       # below y_t
        y_new[..., t] = y_t
        shift += update[n] * (y_new - y_old)
        Yv[n] = y_new
    return np.swapaxes(Yn, 0, 1).copy()


def alpha_params(W, tau, nu):
    """Shape and rate of alpha_nc | w_nc: Gamma(tau + 1/2, nu + w_nc^2 / 2) (eq. 3.24)."""
    return tau + 0.5, nu + 0.5 * W * W


def chain_combine(Ks, beta, rule):
    """Composite kernel of every chain: base kernels Ks (S, N, N) shared by the chains or (ch, S, N, N) per chain
    (when Theta is sampled), beta (ch, S) -> (ch, N, N)."""
    if Ks.ndim == 3:
        return MK.combine(Ks, beta, rule)
    if rule in ("mean", "convex", "binary"):
        return np.einsum("ks,ksnm->knm", beta, Ks)
    if rule == "product":
        return np.prod(Ks, axis=1)
    return np.exp(np.einsum("ks,ksnm->knm", beta, np.log(np.clip(Ks, 1e-300, None))))


def loglik_y(Y, KsW, beta, rule, Ks=None, W=None):
    """sum_{n,c} log N(y_nc | (K_beta w_c)_n, 1) for each chain; linear rules use the per-source K_s W."""
    if rule in ("mean", "convex", "binary"):
        M = np.einsum("ks,ksnc->knc", beta, KsW)
    else:
        M = np.einsum("knm,kmc->knc", chain_combine(Ks, beta, rule), W)
    R = Y - M
    return -0.5 * np.sum(R * R, axis=(1, 2)) - 0.5 * R[0].size * MK.LOG_2PI


def log_dirichlet(beta, rho):
    """log Dir(beta | rho) for each row of beta (ch, S); rho a number (rho 1_S) or an array like beta."""
    if np.ndim(rho) == 0:
        S = beta.shape[-1]
        return gammaln(S * rho) - S * gammaln(rho) + (rho - 1.0) * np.sum(np.log(beta), -1)
    return log_dirichlet_general(beta, np.broadcast_to(rho, beta.shape))


def log_dirichlet_general(x, a):
    """log Dir(x | a) row-wise, a of the same shape as x."""
    return gammaln(a.sum(-1)) - gammaln(a).sum(-1) + np.sum((a - 1.0) * np.log(x), -1)


def collapsed_loglik(Y, K, A):
    """log p(Y | K, A) for every chain, W integrated out (A.6 corrected); K (ch, N, N)."""
    return collapse(Y, K, A).ll


def convex_beta_mh(rng, beta, kappa, Y, rho, *, KsW=None, Ks=None, A=None, current=None):
    """One MH step for beta on the simplex with an asymmetric Dirichlet(kappa beta + 1/2) proposal (Hastings
    ratio included). Target: Dir(beta | rho) times prod N(y_nc | w_c^T k_n^beta, 1) at the current W (A.1,
    ``KsW`` given) or times p(Y | beta, A) with W integrated out (``Ks`` and ``A`` given; ``current`` the
    :class:`Collapsed` at the current beta if known). Returns beta, acceptance and the :class:`Collapsed` at
    the new beta (None for the conditional step)."""
    a_fwd = kappa[:, None] * beta + 0.5
    prop = np.stack([rng.dirichlet(a) for a in a_fwd])
    prop = np.clip(prop, 1e-300, None)
    prop /= prop.sum(-1, keepdims=True)
    a_bwd = kappa[:, None] * prop + 0.5
    new = cur = None
    if KsW is not None:
        ll_prop, ll_cur = loglik_y(Y, KsW, prop, "convex"), loglik_y(Y, KsW, beta, "convex")
    else:
        cur = current if current is not None else collapse(Y, chain_combine(Ks, beta, "convex"), A)
        new = collapse(Y, chain_combine(Ks, prop, "convex"), A)
        ll_prop, ll_cur = new.ll, cur.ll
    log_r = (ll_prop + log_dirichlet(prop, rho) - ll_cur - log_dirichlet(beta, rho)
             + log_dirichlet_general(beta, a_bwd) - log_dirichlet_general(prop, a_fwd))
    accept = np.log(rng.random(beta.shape[0])) < log_r
    return np.where(accept[:, None], prop, beta), accept, (pick(accept, new, cur) if new is not None else None)


def log_collapsed_y(Y, K, A):
    """log p(Y | beta, A) with W integrated out: sum_c log N(y_c | 0, I + K A_c^-1 K) (A.6 corrected).
    All classes in one batched Cholesky (many small LAPACK calls are slow when the cores are shared)."""
    N, C = Y.shape
    Omega = np.eye(N) + (K[None] / A.T[:, None, :]) @ K.T                  # (C, N, N)
    try:
        L = np.linalg.cholesky(Omega)
    except np.linalg.LinAlgError:
        L = np.stack([jittered_cholesky(O, what=f"I + K A_{c}^-1 K (the covariance of y_{c})")
                      for c, O in enumerate(Omega)])
    v = np.linalg.solve(L, Y.T[..., None])[..., 0]
    logdet = np.sum(np.log(np.diagonal(L, axis1=1, axis2=2)))
    return float(-0.5 * np.sum(v * v) - logdet - 0.5 * N * C * MK.LOG_2PI)


def binary_beta_gibbs(rng, beta, Y, Ks, A):
    """Exact Gibbs update of each beta_i in {0, 1} in turn, W integrated out (A.1.3). Prior: Bernoulli(1/2)
    for each kernel, conditioned on at least one kernel being selected (beta = 0 would leave no kernel, K = 0)."""
    beta = beta.copy()
    S = beta.shape[1]                     # Ks is (S, N, N), or (chains, S, N, N) when Theta is sampled
    for k in range(beta.shape[0]):
        for i in range(S):
            logp = np.empty(2)
            for val in (0, 1):
                beta[k, i] = val
                if beta[k].sum() == 0:
                    logp[val] = -np.inf
                    continue
                logp[val] = log_collapsed_y(Y[k], np.tensordot(beta[k], Ks[k] if Ks.ndim == 4 else Ks, axes=1),
                                            A[k])
            p1 = 1.0 / (1.0 + np.exp(logp[0] - logp[1]))
            beta[k, i] = float(rng.random() < p1)
    return beta


def wproduct_mh(rng, beta, pi, chi, step, Y, Ks, W, mu, lam, A=None, current=None):
    """Random-walk MH on log beta_s (A.3; at the current W, or with W integrated out when ``A`` is given, with
    ``current`` the :class:`Collapsed` at the current beta if known), then on log pi_s and log chi_s
    (A.4-A.5), all sources jointly. Returns beta, pi, chi, acceptance of beta and the :class:`Collapsed` at the
    new beta (None at the current W)."""
    def log_gamma(x, a, b):
        return np.sum(a * np.log(b) - gammaln(a) + (a - 1.0) * np.log(x) - b * x, -1)

    ch, S = beta.shape
    prop = beta * np.exp(step[:, None] * rng.standard_normal((ch, S)))
    new = cur = None
    if A is None:
        ll_prop, ll_cur = loglik_y(Y, None, prop, "wproduct", Ks, W), loglik_y(Y, None, beta, "wproduct", Ks, W)
    else:
        cur = current if current is not None else collapse(Y, chain_combine(Ks, beta, "wproduct"), A)
        new = collapse(Y, chain_combine(Ks, prop, "wproduct"), A)
        ll_prop, ll_cur = new.ll, cur.ll
    log_r = (ll_prop + log_gamma(prop, pi, chi) + np.log(prop).sum(-1)
             - ll_cur - log_gamma(beta, pi, chi) - np.log(beta).sum(-1))
    acc_b = np.log(rng.random(ch)) < log_r
    beta = np.where(acc_b[:, None], prop, beta)
    state = pick(acc_b, new, cur) if new is not None else None
    # pi and chi: exponential priors, target in log space (Jacobian log x)
    for which in ("pi", "chi"):
        cur = pi if which == "pi" else chi
        new = cur * np.exp(0.5 * rng.standard_normal((ch, S)))
        rate = mu if which == "pi" else lam
        lp_new = log_gamma(beta, new, chi) if which == "pi" else log_gamma(beta, pi, new)
        lp_cur = log_gamma(beta, pi, chi)
        log_r = lp_new - rate * new.sum(-1) + np.log(new).sum(-1) - lp_cur + rate * cur.sum(-1) - np.log(cur).sum(-1)
        acc = np.log(rng.random(ch)) < log_r
        if which == "pi":
            pi = np.where(acc[:, None], new, pi)
        else:
            chi = np.where(acc[:, None], new, chi)
    return beta, pi, chi, acc_b, state


def log_gamma_on_log_scale(x, shape, rate):
    """sum over the last axis of log Gamma(x | shape, rate) + log x: the density of log x, up to a constant."""
    return np.sum(shape * np.log(x) - rate * x, -1)


def rho_mh(rng, rho, step, beta, lam, mu):
    """One random-walk MH step on log rho (ch, S) for the convex rule: target Dir(beta | rho) prod_s
    Gamma(rho_s | shape lam, rate mu) (A.2), Jacobian of the log scale included."""
    prop = rho * np.exp(step[:, None] * rng.standard_normal(rho.shape))
    log_r = (log_dirichlet_general(beta, prop) + log_gamma_on_log_scale(prop, lam, mu)
             - log_dirichlet_general(beta, rho) - log_gamma_on_log_scale(rho, lam, mu))
    accept = np.log(rng.random(rho.shape[0])) < log_r
    return np.where(accept[:, None], prop, rho), accept


def theta_mh(rng, theta, steps, Y, Ks, beta, A, rule, blocks, omega, phi, current=None):
    """One random-walk MH step on log theta_s for every rbf source s in turn (all chains at once).

    ``theta`` (ch, P) flat; ``steps`` (ch, n_blocks); ``Ks`` (ch, S, N, N) the chains' base kernels (updated in
    place where accepted); ``blocks`` [(source index, slice into theta, its training columns X_s)]. Target
    p(Y | beta, Theta, A) prod_sd Gamma(theta_sd | omega, phi) with W integrated out (A.7, with the collapsed
    likelihood of A.6 as for beta), plus the log-scale Jacobian; ``current`` is the :class:`Collapsed` at the
    current state if known. Returns theta, Ks, acceptance (ch, n_blocks) and the :class:`Collapsed` at the new
    theta.
    """
    ch = theta.shape[0]
    theta = theta.copy()
    cur = current if current is not None else collapse(Y, chain_combine(Ks, beta, rule), A)
    accepted = np.zeros((ch, len(blocks)))
    for j, (i, sl, Xs) in enumerate(blocks):
        prop = theta[:, sl] * np.exp(steps[:, j, None] * rng.standard_normal((ch, sl.stop - sl.start)))
        K_prop = Ks.copy()
        K_prop[:, i] = MK.rbf_gram_batch(Xs, Xs, prop)
        new = collapse(Y, chain_combine(K_prop, beta, rule), A)
        log_r = (new.ll + log_gamma_on_log_scale(prop, omega, phi)
                 - cur.ll - log_gamma_on_log_scale(theta[:, sl], omega, phi))
        acc = np.log(rng.random(ch)) < log_r
        theta[:, sl] = np.where(acc[:, None], prop, theta[:, sl])
        Ks[acc, i] = K_prop[acc, i]
        cur = pick(acc, new, cur)
        accepted[:, j] = acc
    return theta, Ks, accepted, cur


def adapt_scale(scale, rate, grow_when_low: bool):
    """Multiply a proposal scale by 1.6 towards an acceptance rate in [0.2, 0.4] (shrink the step when too few
    proposals are accepted; ``grow_when_low`` for concentrations such as kappa, which act inversely)."""
    low, high = rate < 0.2, rate > 0.4
    up, down = (low, high) if grow_when_low else (high, low)
    return np.where(up, scale * 1.6, np.where(down, scale / 1.6, scale))


# ----------------------------------------------------------------------------------------- the kernel
ADAPT_WINDOW = 20    # warm-up sweeps between two adaptations of the proposal scales


class Problem(NamedTuple):
    """What every chain shares: the base kernels, the labels, the priors and the options of the sweep."""

    Ks: np.ndarray            # (S, N, N) base kernels (at the starting theta when Theta is sampled)
    onehot: np.ndarray        # (N, C) bool
    rule: str
    tau: float
    nu: float
    rho: float                # Dirichlet concentration of beta (convex), rho's starting value with infer_rho
    lam: float
    mu: float
    omega: float
    phi: float
    free_beta: bool           # the rule has free weights and fix_beta is None
    infer_theta: bool
    infer_rho: bool
    blocks: list              # [(source index, slice into theta, its training columns X_s)] of the rbf sources
    theta: np.ndarray         # starting theta (flat), empty when fixed
    default_beta: np.ndarray  # beta of the rules without free weights
    beta_steps: int
    theta_steps: int
    beta_update: str
    y_step: str
    fix_alpha: float | None
    fix_beta: tuple | None


class State(NamedTuple):
    """One chain. The arrays keep the conditionals' leading chain axis (of length 1); the MH proposal scales are
    adapted during warm-up (``adapt``) and frozen after it."""

    problem: Problem
    beta: np.ndarray          # (1, S)
    pi: np.ndarray            # (1, S) weighted product's Gamma shape of beta
    chi: np.ndarray           # (1, S) and its rate
    rho: np.ndarray           # (1, S)
    theta: np.ndarray         # (1, P)
    Ks: np.ndarray            # (S, N, N), or this chain's own (1, S, N, N) when Theta is sampled
    K: np.ndarray             # (1, N, N) composite kernel
    KK: np.ndarray            # (1, N, N) K K
    A: np.ndarray             # (1, N, C) precisions alpha
    Y: np.ndarray             # (1, N, C) auxiliary variables
    W: np.ndarray             # (1, N, C)
    kappa: np.ndarray         # (1,) concentration of the convex rule's Dirichlet proposal
    log_beta_step: np.ndarray  # (1,) log-scale step of the weighted product's beta
    theta_step: np.ndarray    # (1, n_blocks) log-scale step of each rbf source's theta
    rho_step: np.ndarray      # (1,) log-scale step of rho
    window: int               # warm-up sweeps in the current adaptation window
    window_beta: np.ndarray   # their summed acceptances
    window_theta: np.ndarray
    window_rho: np.ndarray


class Info(NamedTuple):
    """One sweep's acceptance rates (one per Metropolis-Hastings block; beta's mean over ``beta_steps``)."""

    accept_beta: float
    accept_theta: float            # mean over the rbf sources
    accept_rho: float
    accept_theta_source: np.ndarray   # (n_blocks,)


def problem(model, data, opts: dict) -> Problem:
    """The :class:`Problem` of ``model`` on ``data`` with the backend's resolved options ``opts``."""
    sources = model.source_list(data)
    infer_theta = model.infer_theta
    blocks = [(i, sl, data.X[:, list(sources[i].columns)]) for i, sl in MK.theta_layout(sources)] \
        if infer_theta else []
    Ks = model.train_kernels(data)
    C = model.n_classes(data)
    return Problem(Ks=Ks, onehot=np.eye(C, dtype=bool)[data.y.astype(int)], rule=model.rule, tau=float(model.tau),
                   nu=float(model.nu), rho=float(model.rho), lam=float(model.lam), mu=float(model.mu),
                   omega=float(model.omega), phi=float(model.phi),
                   free_beta=model.rule in ("convex", "binary", "wproduct") and opts["fix_beta"] is None,
                   infer_theta=infer_theta, infer_rho=model.infer_rho, blocks=blocks,
                   theta=MK.theta_start(sources) if infer_theta else np.empty(0),
                   default_beta=model.default_beta(Ks.shape[0]), beta_steps=opts["beta_steps"],
                   theta_steps=opts["theta_steps"], beta_update=opts["beta_update"], y_step=opts["y_step"],
                   fix_alpha=opts["fix_alpha"], fix_beta=opts["fix_beta"])


def init(rng, pb: Problem) -> State:
    """beta from the prior (at rho = the model's ``rho``), Theta at its fixed values (1/D_s unless given), alpha = 1
    (or ``fix_alpha``), Y "aligned" with the labels (y_n,t_n = 1, others 0; erratum 17), W = 0."""
    S, N = pb.Ks.shape[:2]
    C = pb.onehot.shape[1]
    rho = np.full((1, S), pb.rho)
    if pb.fix_beta is not None:
        beta = np.asarray(pb.fix_beta, float)[None]
    elif pb.rule == "convex":
        beta = rng.dirichlet(rho[0])[None]
    elif pb.rule == "binary":
        beta = (rng.random((1, S)) < 0.5).astype(float)
        beta[beta.sum(1) == 0, 0] = 1.0
    elif pb.rule == "wproduct":
        beta = rng.gamma(1.0, 1.0, (1, S))
    else:
        beta = pb.default_beta[None].copy()
    beta = np.clip(beta, 1e-12, None) if pb.rule in ("convex", "wproduct") else beta
    Ks = pb.Ks[None].copy() if pb.infer_theta else pb.Ks     # Theta moves this chain's own base kernels
    K = chain_combine(Ks, beta, pb.rule)
    n_blocks = len(pb.blocks)
    return State(problem=pb, beta=beta, pi=np.ones((1, S)), chi=np.ones((1, S)), rho=rho, theta=pb.theta[None].copy(),
                 Ks=Ks, K=K, KK=K @ K,
                 A=np.full((1, N, C), 1.0 if pb.fix_alpha is None else float(pb.fix_alpha)),
                 Y=np.where(pb.onehot, 1.0, 0.0)[None], W=np.zeros((1, N, C)), kappa=np.full(1, 100.0 * S),
                 log_beta_step=np.full(1, 0.3), theta_step=np.full((1, n_blocks), 0.3), rho_step=np.full(1, 0.5),
                 window=0, window_beta=np.zeros(1), window_theta=np.zeros((1, n_blocks)), window_rho=np.zeros(1))


def step(rng, state: State):
    """One sweep of Algorithm 1 (module docstring): beta, rho, Theta, then Y and W, then A."""
    pb = state.problem
    beta, pi, chi, rho, theta, Ks, A, Y, W = (state.beta, state.pi, state.chi, state.rho, state.theta, state.Ks,
                                              state.A, state.Y, state.W)
    rule = pb.rule
    acc = np.zeros(1)
    st = collapse(Y, state.K, A, state.KK)             # W integrated out at the current state (Y, A moved)
    if pb.free_beta:
        beta_prior = rho if pb.infer_rho else pb.rho
        marginal = pb.beta_update == "marginal"
        for _ in range(pb.beta_steps):
            if rule == "convex":
                if marginal:
                    beta, a, st = convex_beta_mh(rng, beta, state.kappa, Y, beta_prior, Ks=Ks, A=A, current=st)
                else:
                    KsW = np.einsum("snm,kmc->ksnc" if Ks.ndim == 3 else "ksnm,kmc->ksnc", Ks, W)
                    beta, a, st = convex_beta_mh(rng, beta, state.kappa, Y, beta_prior, KsW=KsW)
            elif rule == "wproduct":
                beta, pi, chi, a, st = wproduct_mh(rng, beta, pi, chi, state.log_beta_step, Y, Ks, W, pb.mu, pb.lam,
                                                   A=A if marginal else None, current=st)
            else:
                beta, a, st = binary_beta_gibbs(rng, beta, Y, Ks, A), np.ones(1), None
            acc += a / pb.beta_steps
            if st is None:                             # the step ran at the current W or was binary
                st = collapse(Y, chain_combine(Ks, beta, rule), A)
    acc_rho = np.zeros(1)
    if pb.infer_rho:
        rho, acc_rho = rho_mh(rng, rho, state.rho_step, beta, pb.lam, pb.mu)
    acc_theta = np.zeros((1, len(pb.blocks)))
    if pb.infer_theta:
        for _ in range(pb.theta_steps):
            theta, Ks, a_theta, st = theta_mh(rng, theta, state.theta_step, Y, Ks, beta, A, rule, pb.blocks,
                                              pb.omega, pb.phi, current=st)
            acc_theta += a_theta / pb.theta_steps
    K = st.K
    if pb.y_step == "collapsed":                       # (beta, Theta, Y) with W integrated out, then W | all
        Y = collapsed_y_sweep(rng, Y, st, pb.onehot)
        st = st._replace(v=lower_solve(st.L, np.einsum("knm,knc->kcm", K, Y)))
        W = w_from(rng, st)
    else:
        W = w_from(rng, st)                            # (beta, Theta, W) drawn as one block
        Y = MK.cone_gibbs_sweep(rng, Y, K @ W, pb.onehot)
    if pb.fix_alpha is None:
        shape, rate = alpha_params(W, pb.tau, pb.nu)
        A = np.clip(rng.gamma(shape, 1.0 / rate), 1e-300, None)
    state = state._replace(beta=beta, pi=pi, chi=chi, rho=rho, theta=theta, Ks=Ks, K=K, KK=st.KK, A=A, Y=Y, W=W)
    theta_rates = acc_theta[0]
    return state, Info(accept_beta=float(acc[0]), accept_rho=float(acc_rho[0]),
                       accept_theta=float(theta_rates.mean()) if theta_rates.size else 0.0,
                       accept_theta_source=theta_rates)


def adapt(state: State, info: Info) -> State:
    """After every warm-up sweep: every ``ADAPT_WINDOW`` sweeps, each proposal scale moves towards an acceptance rate
    of 0.2-0.4 over the window (:func:`adapt_scale`)."""
    window = state.window + 1
    sums = (state.window_beta + info.accept_beta, state.window_theta + info.accept_theta_source,
            state.window_rho + info.accept_rho)
    if window < ADAPT_WINDOW:
        return state._replace(window=window, window_beta=sums[0], window_theta=sums[1], window_rho=sums[2])
    rate_beta, rate_theta, rate_rho = (x / window for x in sums)
    return state._replace(kappa=adapt_scale(state.kappa, rate_beta, grow_when_low=True),
                          log_beta_step=adapt_scale(state.log_beta_step, rate_beta, grow_when_low=False),
                          theta_step=adapt_scale(state.theta_step, rate_theta, grow_when_low=False),
                          rho_step=adapt_scale(state.rho_step, rate_rho, grow_when_low=False), window=0,
                          window_beta=np.zeros_like(sums[0]), window_theta=np.zeros_like(sums[1]),
                          window_rho=np.zeros_like(sums[2]))


def position(state: State) -> dict:
    """The canonical variables: W, log alpha, beta, and theta / rho when they are sampled."""
    out = {"W": state.W[0], "log_alpha": np.log(state.A[0]), "beta": state.beta[0]}
    if state.problem.infer_theta:
        out["theta"] = state.theta[0]
    if state.problem.infer_rho:
        out["rho"] = state.rho[0]
    return out


KERNEL = Kernel(init=init, step=step, position=position, adapt=adapt)


# ------------------------------------------------------------------------------------------- backend
OPTIONS = {
    "thin": Option(1, "keep every thin-th sweep after warm-up", checks.POSITIVE_INT),
    "beta_steps": Option(1, "Metropolis-Hastings steps for beta per sweep", checks.POSITIVE_INT),
    "theta_steps": Option(1, "Metropolis-Hastings steps for each rbf source's theta per sweep", checks.POSITIVE_INT),
    "beta_update": Option("marginal", "target of the beta step: 'marginal' (W integrated out) or 'conditional' "
                                      "(at the current W, the thesis's A.1)",
                          checks.OneOf(("marginal", "conditional"))),
    "y_step": Option("collapsed", "Y update: 'collapsed' (W integrated out, object by object) or 'conditional' "
                                  "(Y | W, the thesis's 3.23)", checks.OneOf(("collapsed", "conditional"))),
    "fix_alpha": Option(None, "hold every alpha_nc at this positive value (None: sample alpha)",
                        checks.Interval(float, 0, None, "neither", none=True)),
    "fix_beta": Option(None, "hold beta at these non-negative kernel weights, one per source (None: sample beta "
                             "where the rule has free weights)",
                       checks.Numbers(checks.NON_NEGATIVE, none=True)),
}


def check(options, model, data, owner):
    """fix_beta holds one weight per source of this model on this data (known only with the data)."""
    S = len(model.source_list(data))
    fix_beta = options["fix_beta"]
    if fix_beta is not None and len(fix_beta) != S:
        raise ValueError(f"{owner}: option 'fix_beta' must be {S} non-negative weights (one per "
                         f"source); got {fix_beta!r}")
    return options


@register("gibbs", kind="mcmc", family="pmkl", options=OPTIONS, check=check, memory=MK.memory(16.5),
          description="Gibbs sampler with auxiliary variables and Metropolis sub-steps (Algorithm 1)")
def run(model, data, *, draws, tune, chains, ctx, **opts):
    """Algorithm 1: W, cone-truncated Y, A by exact conditionals (Y by default with W integrated out); beta by
    MH (convex, weighted product) or collapsed Gibbs (binary); rho and Theta, when inferred, by MH (A.2, A.7)."""
    t0 = time.perf_counter()
    pb = problem(model, data, opts)
    setup = time.perf_counter() - t0
    # many N x N factorisations: BLAS worker threads only contend at these sizes
    with one_blas_thread(pb.Ks.shape[1]):
        result = sample(KERNEL, pb, ctx, draws=draws, tune=tune, chains=chains, thin=opts["thin"], desc="gibbs")
    stats = {"accept_beta": result.stats["accept_beta"]}
    info = {}
    if model.infer_theta:
        stats["accept_theta"] = result.stats["accept_theta"]
        # per rbf source, after warm-up (the steps are frozen then)
        names = [s.name for s in model.source_list(data) if s.kernel == "rbf"]
        info["theta_acceptance"] = dict(zip(names, result.stats["accept_theta_source"].mean((0, 1)).tolist()))
    if model.infer_rho:
        stats["accept_rho"] = result.stats["accept_rho"]
    return chains_fit(model, data, result._replace(stats=stats), ctx=ctx, info=info, setup=setup)
