"""Bayesian active learning for logistic regression (Nickisch thesis §3.7).

Logistic regression is the sparse linear model with a Gaussian prior N(0, sigma2 I) as its Gaussian part (X = I,
y = 0) and one sigmoid potential per labelled case, T_j(s_j) = sigmoid(c_j tau s_j), s_j = b_j^T u, b_j the case's
features (``bz.models.SLM(potential="sigmoid", B="meta")``). Its variational approximation (the double loop) is
Gaussian, N(m, A^-1) with A = I / sigma2 + sum_j b_j b_j^T / gamma_j, so each candidate case b has a Gaussian
marginal Q(s) = N(mu, rho), mu = b^T m, rho = b^T A^-1 b (sigma = 1 in the thesis's formulas: the potentials here
are not scaled by the prior's sigma). Two scores rank the candidates:

* classifier uncertainty CU(b) = -|Q(c = +1) - 1/2|, Q(c) = int N(s | mu, rho) T(s; c) ds (Gauss-Hermite);
* information gain IG(b) = sum_c Q(c) KL[Q'(s; c) || Q(s)], where Q' is the marginal after including the case
  with label c at its own optimal width gamma*: the minimiser of (3.14)
  phi(gamma) = h(gamma) + ln kappa - (mu + rho beta)^2 / (rho kappa), kappa = 1 + rho / gamma, beta = c tau / 2,
  and KL = (ln kappa + rho / kappa ((beta - mu / gamma)^2 / kappa - 1 / gamma)) / 2.

:func:`active_learning` starts from a labelled set, then repeats: fit the approximation, and include ``block``
cases one after another, each the best-scoring candidate; its label is revealed when it is included, and the
Gaussian is updated in closed form (the rank-one updates of (3.14): m += (beta - mu / gamma) / kappa A^-1 b,
A^-1 -= A^-1 b b^T A^-1 / (rho + gamma)) so the next choice in the block sees it. After each block the
variational algorithm runs again on all labelled cases (``bz.fit``). ``score="random"`` is the baseline.
Everything here is dense (n x n): the thesis's Lanczos variant serves n in the tens of thousands.
"""
from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla

from bayeszoo import checks
from bayeszoo.api import fit as fit_model
from bayeszoo.datasets import Dataset
from bayeszoo.experimental_design import GAUSSIAN_BACKENDS, check_options, precision, real_array
from bayeszoo.numerics.potentials import Potential
from bayeszoo.progress import progress_bar

OWNER = "bz.active_learning"
SCORES = ("infogain", "uncertainty", "random")
HERMITE_NODES = 40
STEP_DRAWS = 2            # draws of the fits between blocks: only their Gaussian approximation is used
_X, _W = np.polynomial.hermite_e.hermegauss(HERMITE_NODES)
_W = _W / _W.sum()        # probabilists' Hermite: E[f(Z)], Z ~ N(0, 1)


def predictive_probability(mu, rho, tau: float) -> np.ndarray:
    """Q(c = +1) = int N(s | mu, rho) sigmoid(tau s) ds, elementwise."""
    mu, rho = np.asarray(mu, dtype=float), np.asarray(rho, dtype=float)
    s = mu[..., None] + np.sqrt(np.maximum(rho, 0.0))[..., None] * _X
    return np.exp(-np.logaddexp(0.0, -tau * s)) @ _W


def inclusion_width(mu, rho, beta, pot: Potential, iters: int = 60) -> np.ndarray:
    """gamma* = argmin_gamma phi(gamma) of (3.14), elementwise: bisection on the sign of phi'(gamma) =
    h'(gamma) - rho / (gamma (gamma + rho)) - (mu + rho beta)^2 / (gamma + rho)^2 in ln gamma (phi is convex in
    gamma for a log-concave potential, so phi' changes sign once)."""
    mu, rho, beta = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (mu, rho, beta)))
    a2 = (mu + rho * beta) ** 2

    def slope(gamma):
        return pot.dh(gamma) - rho / (gamma * (gamma + rho)) - a2 / (gamma + rho) ** 2

    lo, hi = np.full(mu.shape, -30.0), np.full(mu.shape, 30.0)     # 60 halvings: ln gamma to 1e-16
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        up = slope(np.exp(mid)) > 0
        hi, lo = np.where(up, mid, hi), np.where(up, lo, mid)
    return np.exp(0.5 * (lo + hi))


def inclusion_kl(mu, rho, beta, gamma) -> np.ndarray:
    """KL[Q'(s) || Q(s)] of including a potential of tilt ``beta`` at width ``gamma`` (the thesis's §3.7 formula)."""
    kappa = 1.0 + rho / gamma
    return 0.5 * (np.log(kappa) + rho / kappa * ((beta - mu / gamma) ** 2 / kappa - 1.0 / gamma))


def scores(kind: str, mu, rho, tau: float, pot: Potential) -> np.ndarray:
    """The CU or IG score of candidates with marginals N(mu, rho) (module docstring); larger is better."""
    p = predictive_probability(mu, rho, tau)
    if kind == "uncertainty":
        return -np.abs(p - 0.5)
    total = np.zeros_like(p)
    for c, q in ((1.0, p), (-1.0, 1.0 - p)):
        beta = 0.5 * c * tau
        gamma = inclusion_width(mu, rho, beta, pot)
        total += q * inclusion_kl(mu, rho, beta, gamma)
    return total


@dataclass
class ActiveLearning:
    """What :func:`active_learning` did: the number of labelled cases and the test error after each fit, the
    pool indices included (in order), the final data set and fit, and the seed it ran with (``seed=None`` draws
    one: passing it back repeats the run)."""

    score: str
    sizes: list = field(default_factory=list)
    test_error: list = field(default_factory=list)
    chosen: list = field(default_factory=list)
    data: Dataset | None = None
    fit: object = None
    seed: int | None = None


def _labels(y, what: str) -> np.ndarray:
    """Binary labels (0 / 1 or -1 / +1: numbers, not strings) of a 1-d array, as -1 / +1."""
    y = real_array(OWNER, what, y)
    if y.ndim != 1:       # a (3, 4) array would otherwise label 12 cases in an order nobody chose
        raise ValueError(f"{OWNER}: {what} must be a 1-d array of labels, one per case; got shape {y.shape}")
    y = checks.finite_array(OWNER, what, y)
    values = set(np.unique(y).tolist())
    if values <= {0.0, 1.0}:
        return 2.0 * y - 1.0
    if values <= {-1.0, 1.0}:
        return y
    raise ValueError(f"{OWNER}: {what} must be binary labels (0 / 1 or -1 / +1), got values {sorted(values)[:5]}")


def _features(features, what: str, width: int | None = None) -> np.ndarray:
    """Checked (m, n) features of real numbers, m >= 1 and n >= 1 (``width`` columns when given)."""
    F = checks.finite_array(OWNER, what, real_array(OWNER, what, features), ndim=2, columns=width, min_rows=1)
    if F.shape[1] == 0:
        raise ValueError(f"{OWNER}: {what} must have at least one column (feature); got shape {F.shape}")
    return F


def _check_model(model) -> None:
    if getattr(model, "family", None) != "slm" or model.potential != "sigmoid" or model.B != "meta":
        raise ValueError(f"{OWNER}: the model must be bz.models.SLM(potential='sigmoid', B='meta'), logistic "
                         f"regression as a sparse linear model; got {model!r}")


def logistic_data(features, labels, name: str = "logistic") -> Dataset:
    """The SLM data set of logistic regression on ``features`` (q, n) with ``labels`` (0 / 1 or -1 / +1): X = I,
    y = 0 (the Gaussian prior), B = the features, ``meta["labels"]`` = +-1."""
    F = _features(features, "features")
    c = _labels(labels, "labels")
    if c.size != F.shape[0]:
        raise ValueError(f"{OWNER}: {F.shape[0]} feature rows but {c.size} labels")
    n = F.shape[1]
    return Dataset(X=np.eye(n), y=np.zeros(n), name=name, meta={"task": "regression", "B": F, "labels": c})


def _cases(features, labels, width: int | None, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Checked (m, n) features with ``width`` columns (when given) and their m labels as +-1."""
    F = _features(features, f"{what}_features", width)
    c = _labels(labels, f"{what}_labels")
    if c.size != F.shape[0]:
        raise ValueError(f"{OWNER}: {F.shape[0]} {what}_features rows but {c.size} {what}_labels")
    return F, c


def _indices(initial, size: int) -> np.ndarray:
    """The initial pool indices: integers (a float is refused, never truncated) in [0, size), none repeated."""
    values = initial.tolist() if isinstance(initial, np.ndarray) and initial.ndim == 1 else initial
    if (not isinstance(values, Sequence) or isinstance(values, (str, bytes)) or not values
            or not all(isinstance(i, numbers.Integral) and not isinstance(i, (bool, np.bool_)) for i in values)
            or not all(0 <= i < size for i in values)):
        shown = repr(initial) if len(repr(initial)) <= 80 else repr(initial)[:77] + "..."
        raise ValueError(f"{OWNER}: initial must be a non-empty sequence of pool indices, integers in [0, {size}); "
                         f"got {shown}")
    start = np.asarray(values, dtype=int)
    unique, counts = np.unique(start, return_counts=True)
    repeated = unique[counts > 1]
    if repeated.size:
        raise ValueError(f"{OWNER}: initial repeats the pool indices {repeated.tolist()}")
    return unique


def error_rate(model, data: Dataset, fit, features, labels) -> float:
    """Error rate of the approximation's predictive probabilities (threshold 1/2) on ``features`` / ``labels``."""
    A = precision(model, data, fit).dense()
    L = sla.cholesky(A, lower=True)
    F, c = _cases(features, labels, A.shape[0], "test")
    mu = F @ model.posterior_mean(fit)
    rho = np.sum(sla.solve_triangular(L, F.T, lower=True) ** 2, axis=0)
    p = predictive_probability(mu, rho, model.tau)
    return float(np.mean(np.where(p > 0.5, 1.0, -1.0) != c))


def active_learning(model, pool_features, pool_labels, *, initial, n_blocks: int, block: int = 3,
                    score: str = "uncertainty", test_features=None, test_labels=None, backend: str = "dloop",
                    options: dict | None = None, seed: int | None = 0, progress: bool = True) -> ActiveLearning:
    """Sequential inclusion of labelled cases from a pool (module docstring).

    Parameters
    ----------
    model : bz.models.SLM(potential="sigmoid", B="meta")
        Logistic regression: ``sigma2`` the prior variance, ``tau`` the sigmoid's slope.
    pool_features, pool_labels : arrays (N, n), (N,)
        The candidate cases; a case's label is used only once it is included.
    initial : sequence of int
        Pool indices labelled at the start (the thesis starts from random cases); integers, none repeated.
    n_blocks, block : int
        Blocks of ``block`` inclusions; the approximation is refitted (``backend`` with ``options``, seeded by
        ``seed``) before every block and after the last.
    score : {"uncertainty", "infogain", "random"}
    test_features, test_labels : arrays (M, n), (M,), optional
        Held-out cases (both or neither): the test error is recorded after every fit.
    seed : int or None
        Seeds the fits and the random choices (``score="random"``); None draws a fresh seed, recorded as the
        result's ``seed``.
    """
    _check_model(model)
    checks.choice(OWNER, "score", score, SCORES)
    n_blocks = checks.number(OWNER, "n_blocks", n_blocks, low=1, low_inclusive=True, integer=True)
    block = checks.number(OWNER, "block", block, low=1, low_inclusive=True, integer=True)
    checks.choice(OWNER, "backend", backend, GAUSSIAN_BACKENDS)   # the approximations the scores are built on
    F, c, start = _checked_pool(pool_features, pool_labels, initial, n_blocks, block)
    has_test = test_features is not None or test_labels is not None
    if has_test:
        test_features, test_labels = _checked_test(test_features, test_labels, F.shape[1])
    options = check_options(OWNER, options)
    checks.flag(OWNER, "progress", progress)
    seed = checks.seed(OWNER, "seed", seed)
    seed = checks.fresh_seed() if seed is None else seed   # one seed for every fit and choice, recorded
    rng = np.random.default_rng(seed)
    labelled = list(start.tolist())
    available = np.ones(F.shape[0], dtype=bool)
    available[start] = False
    result = ActiveLearning(score=score, seed=seed)

    def refit():
        data = logistic_data(F[labelled], c[labelled], name="active_learning")
        fit = fit_model(model, data, backend, draws=STEP_DRAWS, chains=1, seed=seed, progress=False, **options)
        result.sizes.append(len(labelled))
        if has_test:
            result.test_error.append(error_rate(model, data, fit, test_features, test_labels))
        return data, fit

    with progress_bar(total=n_blocks, desc=f"active learning ({score})", disable=not progress) as bar:
        for _ in range(n_blocks):
            data, fit = refit()
            chosen = _include_block(model, data, fit, F, c, available, block, score, rng)
            labelled.extend(chosen)
            result.chosen.extend(chosen)
            bar.update(1)
    result.data, result.fit = refit()
    return result


def _checked_pool(pool_features, pool_labels, initial, n_blocks: int, block: int) -> tuple[np.ndarray, ...]:
    """The pool's features and labels and the initial indices, checked to leave ``n_blocks`` blocks of ``block``
    candidates."""
    F = _features(pool_features, "pool_features")
    c = _labels(pool_labels, "pool_labels")
    if c.size != F.shape[0]:
        raise ValueError(f"{OWNER}: {F.shape[0]} pool_features rows but {c.size} pool_labels")
    start = _indices(initial, F.shape[0])
    if start.size + n_blocks * block > F.shape[0]:
        raise ValueError(f"{OWNER}: {n_blocks} blocks of {block} need {n_blocks * block} candidates beyond the "
                         f"{start.size} initial cases; the pool has {F.shape[0]}")
    return F, c, start


def _checked_test(test_features, test_labels, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The held-out cases, both given (the test error needs both) and with the pool's ``n`` features."""
    if test_features is None or test_labels is None:
        given, missing = ("test_labels", "test_features") if test_features is None else ("test_features",
                                                                                          "test_labels")
        raise ValueError(f"{OWNER}: {given} given without {missing}; the test error needs both")
    return _cases(test_features, test_labels, n, "test")


def _include_block(model, data: Dataset, fit, F: np.ndarray, c: np.ndarray, available: np.ndarray, block: int,
                   score: str, rng) -> list[int]:
    """Include ``block`` cases one after another, each the best-scoring available one (or a random one), updating
    the fitted Gaussian in closed form after each so the next choice sees it; marks them unavailable and returns
    them in order."""
    tau = float(model.tau)
    sym = Potential("sigmoid", tau)
    V = sla.cho_solve((sla.cholesky(precision(model, data, fit).dense(), lower=True), True), np.eye(F.shape[1]))
    m = model.posterior_mean(fit)
    chosen = []
    for _ in range(block):
        idx = np.flatnonzero(available)
        if score == "random":
            j = int(rng.choice(idx))
        else:
            P = F[idx]
            rho = np.einsum("ij,jk,ik->i", P, V, P)
            j = int(idx[np.argmax(scores(score, P @ m, rho, tau, sym))])
        b = F[j]
        w = V @ b
        mu, rho_j, beta = float(b @ m), float(b @ w), 0.5 * c[j] * tau
        gamma = float(inclusion_width(mu, rho_j, beta, sym))
        kappa = 1.0 + rho_j / gamma
        m = m + (beta - mu / gamma) / kappa * w
        V = V - np.outer(w, w) / (rho_j + gamma)
        available[j] = False
        chosen.append(j)
    return chosen
