"""Sequential Bayesian experimental design for the sparse linear model (Nickisch thesis §5.3.3, Alg. 5.1; §6.3).

Under a Gaussian approximation N(m, A^-1) of the SLM posterior (EP's or the double loop's),

    A = X^T X / sigma2 + B^T diag(pi) B,

with pi the site precisions (EP: ``site_precision``; double loop: 1 / gamma), measuring y* = X* u + noise with
the filters X* (r x n, one measurement per row) changes A to A + X*^T X* / sigma2, and the information gain of
that measurement under the approximation is scored as

    IG(X*) = log |I + X* A^-1 X*^T / sigma2|   (a single filter x: log(1 + x^T A^-1 x / sigma2)),

twice the entropy in nats it removes (the entropy of N(m, A^-1) is -log|A| / 2 plus a constant).

It depends on the design only, not on the values that will be measured, so a design step scores every candidate
with one factorisation. For n up to ``DENSE_N`` A is factorised by Cholesky and the gains are exact; above it,
k Lanczos steps on A give A^-1 ~ Q T^-1 Q^T (Alg. 5.1), an approximation from below (the Krylov space sees the
directions of large A^-1 first), so every gain is an underestimate that grows with k to the exact value.

The best single unit-norm filter ("free" design, §5.3.3) maximises x^T A^-1 x: it is the eigenvector of the
smallest eigenvalue of A (SciPy's ``eigh`` / ``eigsh`` on the operator).

:func:`sequential_design` alternates: fit the posterior (``bz.fit``), score the candidates, measure the best
``batch`` of them (the caller's ``measure`` gives the values, e.g. the true signal plus noise in an experiment),
append them to the data set, and refit. With ``batch`` > 1 the top ``batch`` candidates by their individual gains
are measured together (the thesis's blocks of inclusions between refits); their joint gain is what is recorded.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla
from scipy.sparse.linalg import LinearOperator, eigsh

from bayeszoo import checks
from bayeszoo.api import fit as fit_model
from bayeszoo.datasets import Dataset
from bayeszoo.models.slm import MAX_MAGNITUDE   # largest |X| and |y| the SLM takes
from bayeszoo.numerics.lanczos import lanczos
from bayeszoo.numerics.linalg import DENSE_N, cholesky   # DENSE_N: the largest n factorised densely
from bayeszoo.numerics.operators import to_dense
from bayeszoo.progress import progress_bar

GAUSSIAN_BACKENDS = ("ep", "dloop")   # the backends whose fits carry a Gaussian approximation of the posterior
OWNER = "bz.design"
STEP_DRAWS = 2            # draws of the fits between steps: only their Gaussian approximation is used
#: arguments of ``bz.fit`` the loops set themselves: in ``options`` they would reach it twice
FIT_ARGUMENTS = ("model", "data", "backend", "draws", "chains", "seed", "progress")


@dataclass
class Precision:
    """The precision A = X^T X / sigma2 + B^T diag(pi) B of a fit's Gaussian approximation."""

    X: object                 # PyLops operators of the model and data
    B: object
    pi: np.ndarray
    sigma2: float

    @property
    def n(self) -> int:
        return int(self.X.shape[1])

    def matvec(self, v: np.ndarray) -> np.ndarray:
        return self.X.H @ (self.X @ v) / self.sigma2 + self.B.H @ (self.pi * (self.B @ v))

    def dense(self) -> np.ndarray:
        Xd, Bd = to_dense(self.X), to_dense(self.B)
        A = Xd.T @ Xd / self.sigma2 + Bd.T @ (self.pi[:, None] * Bd)
        return 0.5 * (A + A.T)


@dataclass
class Design:
    """What :func:`sequential_design` did: per step the candidates chosen (indices into ``candidates``, or None
    for free filters), the filters measured (r x n each), their information gain under the approximation before
    the step, and the measured values; ``data`` is the data set after the last step and ``fit`` its posterior
    fit; ``seed`` the seed every fit ran with (``seed=None`` draws one: passing it back repeats the run)."""

    chosen: list = field(default_factory=list)
    filters: list = field(default_factory=list)
    gains: list = field(default_factory=list)
    values: list = field(default_factory=list)
    data: Dataset | None = None
    fit: object = None
    exact: bool = True
    seed: int | None = None

    @property
    def n_steps(self) -> int:
        return len(self.gains)


# ------------------------------------------------------------------------------------------------ scoring
def _check_slm(model, data) -> None:
    if getattr(model, "family", None) != "slm":
        raise ValueError(f"{OWNER}: experimental design is for sparse linear models (bz.models.SLM), "
                         f"got {type(model).__name__}")
    model.validate(data)


def precision(model, data, fit) -> Precision:
    """The precision matrix of ``fit``'s Gaussian approximation (module docstring), as products and on demand as
    a dense matrix; a ValueError for a fit without one."""
    _check_slm(model, data)
    model.check_fit(fit)
    if fit.backend == "ep":
        pi = np.asarray(fit.idata["potentials"]["site_precision"].values, dtype=float)
    elif fit.backend == "dloop":
        pi = 1.0 / np.asarray(fit.idata["potentials"]["gamma"].values, dtype=float)
    else:
        raise ValueError(f"{OWNER}: a fit by {fit.backend!r} has no Gaussian approximation of the posterior to score "
                         f"designs with; use one of {', '.join(GAUSSIAN_BACKENDS)}")
    B = model.operator_B(data)
    if pi.shape != (B.shape[0],):
        raise ValueError(f"{OWNER}: this fit has {pi.size} site precisions but the model has {B.shape[0]} "
                         f"potentials on these data: the fit belongs to other data")
    return Precision(X=model.operator_X(data), B=B, pi=pi, sigma2=float(model.sigma2))


def real_array(owner: str, name: str, value) -> np.ndarray:
    """``value`` as a float array. Strings, complex numbers, ragged nestings and other objects are refused by name
    rather than converted: NumPy would read "1.5" as 1.5 and drop an imaginary part with only a warning."""
    try:
        raw = np.asarray(getattr(value, "to_numpy", lambda: value)())
    except (TypeError, ValueError):
        raw = None
    if raw is None or raw.dtype.kind not in "biuf":
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        raise ValueError(f"{owner}: {name} must be an array of real numbers; got {shown}")
    return raw.astype(float)


@dataclass(frozen=True)
class LoopOptions:
    """The backend options of a loop's fits: None (none) or a dict, without the arguments the loop gives ``bz.fit``
    itself (:data:`FIT_ARGUMENTS`); returned as a dict."""

    what = "a dict of the backend's options (or None)"

    def __call__(self, owner: str, name: str, value) -> dict:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise checks.refusal(owner, name, self.what, value)
        clash = [k for k in FIT_ARGUMENTS if k in value]
        if clash:
            raise ValueError(f"{owner}: {name} are the backend's own; {', '.join(clash)} cannot be among them (the "
                             f"loop sets draws, chains and progress of its fits, and seeds them with its seed "
                             f"argument)")
        return value


def check_options(owner: str, options) -> dict:
    """``options`` of a loop (:class:`LoopOptions`)."""
    return LoopOptions()(owner, "options", options)


#: what the arguments of :func:`sequential_design` may be (those about the data are checked against it after)
PARAMETERS = {"n_steps": checks.POSITIVE_INT, "batch": checks.POSITIVE_INT, "refit_every": checks.POSITIVE_INT,
              "backend": checks.OneOf(GAUSSIAN_BACKENDS), "lanczos_k": [checks.POSITIVE_INT, None],
              "options": LoopOptions(), "progress": checks.Flag(), "seed": checks.Seed()}


def _as_blocks(candidates, n: int) -> np.ndarray:
    """Candidates as (c, r, n): c candidates of r filters each; a (c, n) array is c single filters."""
    C = real_array(OWNER, "candidates", candidates)
    if C.ndim == 2:
        C = C[:, None, :]
    if C.ndim != 3 or C.shape[0] == 0 or C.shape[1] == 0:
        raise ValueError(f"{OWNER}: candidates must be a (c, n) array of filters or a (c, r, n) array of blocks of "
                         f"r filters, with c >= 1; got shape {np.shape(candidates)}")
    if C.shape[2] != n:
        raise ValueError(f"{OWNER}: candidates have {C.shape[2]} columns but u has n = {n} entries")
    if not np.all(np.isfinite(C)):
        raise ValueError(f"{OWNER}: candidates contain non-finite values")
    return C


def _gains_of(V: np.ndarray, sigma2: float) -> np.ndarray:
    """log |I + V_c^T V_c / sigma2| for V of shape (c, k, r): the gain of each candidate from a factor V with
    X* A^-1 X*^T = V^T V."""
    M = np.einsum("ckr,cks->crs", V, V) / sigma2 + np.eye(V.shape[2])
    return np.linalg.slogdet(M)[1]


def _cholesky(A: np.ndarray, what: str, remedy: str) -> np.ndarray:
    """The lower Cholesky factor of ``A``; a ValueError (not NumPy's LinAlgError) when rounding has made it
    indefinite, which a badly conditioned precision matrix does."""
    def failure(_, reason):
        state = "holds NaN or inf" if reason == "not finite" else "is not positive definite in double precision"
        return (f"{OWNER}: {what} {state}: the precision matrix of this approximation is too badly conditioned; "
                f"{remedy}")

    return cholesky(A, failure=failure)


def information_gain(model, data, fit, candidates, *, lanczos_k: int | None = None) -> np.ndarray:
    """IG of every candidate under ``fit``'s Gaussian approximation (module docstring), in nats.

    ``candidates``: (c, n) single filters or (c, r, n) blocks of r filters measured together. Exact (Cholesky)
    when ``lanczos_k`` is None and n <= ``DENSE_N``; with ``lanczos_k`` steps of Lanczos otherwise (an
    underestimate that grows with ``lanczos_k``, exact at n)."""
    prec = precision(model, data, fit)
    C = _as_blocks(candidates, prec.n)
    c, r, n = C.shape
    if lanczos_k is None:
        if n > DENSE_N:
            raise ValueError(f"{OWNER}: n = {n} is above {DENSE_N}: give lanczos_k to score by Lanczos")
        L = _cholesky(prec.dense(), "the precision matrix", "rescale X, y and sigma2")
        V = sla.solve_triangular(L, C.reshape(c * r, n).T, lower=True)          # (n, c r)
        return _gains_of(V.T.reshape(c, r, n).transpose(0, 2, 1), prec.sigma2)
    k = checks.number(OWNER, "lanczos_k", lanczos_k, low=1, low_inclusive=True, integer=True)
    Q, alpha, beta = lanczos(prec.matvec, n, k)
    T = np.diag(alpha) + np.diag(beta, 1) + np.diag(beta, -1)
    L = _cholesky(T, f"the {T.shape[0]} x {T.shape[0]} Lanczos tridiagonal matrix",
                  "score exactly (lanczos_k=None) or rescale X, y and sigma2")
    V = sla.solve_triangular(L, Q.T @ C.reshape(c * r, n).T, lower=True)         # (k, c r)
    return _gains_of(V.T.reshape(c, r, -1).transpose(0, 2, 1), prec.sigma2)


def best_filter(model, data, fit) -> np.ndarray:
    """The unit-norm filter of largest information gain: the eigenvector of the smallest eigenvalue of A (sign
    fixed so that its largest entry is positive). Dense, it is found as the top eigenvector of A^-1 from A's
    Cholesky factor: an eigensolver on A itself resolves the smallest eigenvalue only relative to the largest, so
    on a strongly graded A (one measurement column far larger than the others) it pointed elsewhere."""
    prec = precision(model, data, fit)
    if prec.n <= DENSE_N:
        L = _cholesky(prec.dense(), "the precision matrix", "rescale X, y and sigma2")
        covariance = sla.cho_solve((L, True), np.eye(prec.n))
        x = sla.eigh(0.5 * (covariance + covariance.T), subset_by_index=[prec.n - 1, prec.n - 1])[1][:, 0]
    else:
        op = LinearOperator((prec.n, prec.n), matvec=prec.matvec, dtype=float)
        x = eigsh(op, k=1, which="SA", v0=np.ones(prec.n))[1][:, 0]
    x = x / np.linalg.norm(x)
    return x if x[np.argmax(np.abs(x))] > 0 else -x


# ------------------------------------------------------------------------------------------------ the loop
def _extended(data: Dataset, rows: np.ndarray, values: np.ndarray) -> Dataset:
    """``data`` with the measurements ``rows`` / ``values`` appended. A fast-product spec of X no longer
    describes the stacked matrix, so it is dropped (the backends then use X as given)."""
    meta = {k: v for k, v in data.meta.items() if k != "X_operator"}
    return dataclasses.replace(data, X=np.vstack([data.X, rows]), y=np.concatenate([data.y, values]), meta=meta)


def _measured(returned, r: int) -> np.ndarray:
    """What ``measure`` returned for r filters, as r finite floats: shape (r,), or (r, 1), or a number when r = 1;
    a ValueError naming what it returned."""
    try:
        values = real_array(OWNER, "measure's values", returned)
    except ValueError:
        values = None
    shown = repr(returned) if len(repr(returned)) <= 80 else repr(returned)[:77] + "..."
    if (values is None or values.shape not in ((r,), (r, 1)) + (((),) if r == 1 else ())
            or not np.all(np.isfinite(values))):
        raise ValueError(f"{OWNER}: measure must return {r} finite values for {r} filters, got {shown}")
    if np.max(np.abs(values)) > MAX_MAGNITUDE:
        raise ValueError(f"{OWNER}: measure returned values beyond {MAX_MAGNITUDE:g} in magnitude, more than the SLM "
                         f"takes as measurements; rescale them: got {shown}")
    return values.reshape(r)


def sequential_design(model, data, measure, n_steps, *, candidates=None, backend: str = "ep", batch: int = 1,
                      refit_every: int = 1, options: dict | None = None, lanczos_k: int | None = None,
                      seed: int | None = 0, progress: bool = True) -> Design:
    """Greedy sequential design: ``n_steps`` times, fit, score, measure the best, append (module docstring).

    Parameters
    ----------
    model, data : the SLM and its data set (the measurements made so far).
    measure : callable
        ``measure(rows) -> values``: the measurement of each filter row (r, n) -> (r,).
    n_steps : int
        Design steps (each measures ``batch`` candidates, or one free filter).
    candidates : array (c, n) or (c, r, n), or None
        The candidate filters or blocks; None designs free unit-norm filters (:func:`best_filter`). A candidate
        is measured at most once.
    backend : {"ep", "dloop"}
        The Gaussian approximation refitted before every step, with ``options`` (the backend's options);
        ``seed`` seeds every fit (None: one fresh seed for all of them, recorded as the result's ``seed``). The
        returned ``fit`` (after the last step) has the backend's default draws.
    refit_every : int
        Refit the posterior every this many steps; in between, the approximation's site precisions are kept and
        only the measured filters enter A (A + X*^T X* / sigma2: the thesis's blocks of inclusions between
        refits, §3.7 and Alg. 6.1).
    lanczos_k : int or None
        Score by Lanczos with this many steps (see :func:`information_gain`).
    """
    _check_slm(model, data)
    if not callable(measure):
        raise ValueError(f"{OWNER}: measure must be a callable rows -> values, got {type(measure).__name__}")
    n_steps, batch, refit_every, backend, lanczos_k, options, progress, seed = checks.validate(OWNER, PARAMETERS, dict(
        n_steps=n_steps, batch=batch, refit_every=refit_every, backend=backend, lanczos_k=lanczos_k, options=options,
        progress=progress, seed=seed)).values()
    if lanczos_k is None and data.X.shape[1] > DENSE_N:
        raise ValueError(f"{OWNER}: n = {data.X.shape[1]} is above {DENSE_N}: give lanczos_k to score by Lanczos")
    C = None if candidates is None else _as_blocks(candidates, data.X.shape[1])
    if C is not None and np.max(np.abs(C)) > MAX_MAGNITUDE:
        raise ValueError(f"{OWNER}: candidates reach {np.max(np.abs(C)):.3g} in magnitude, beyond the "
                         f"{MAX_MAGNITUDE:g} the SLM takes in X; rescale them")
    if C is not None and n_steps * batch > C.shape[0]:
        raise ValueError(f"{OWNER}: {n_steps} steps of {batch} need {n_steps * batch} candidates, only "
                         f"{C.shape[0]} were given")
    if C is None and batch != 1:
        raise ValueError(f"{OWNER}: free filters are designed one per step (batch=1), got batch={batch}")
    seed = checks.fresh_seed() if seed is None else seed

    result = Design(exact=lanczos_k is None, seed=seed)
    available = np.ones(0 if C is None else C.shape[0], dtype=bool)
    current = data
    with progress_bar(total=n_steps, desc="design", disable=not progress) as bar:
        for step in range(n_steps):
            if step % refit_every == 0:
                fit = fit_model(model, current, backend, draws=STEP_DRAWS, chains=1, seed=seed, progress=False,
                                **options)
            if C is None:
                rows = best_filter(model, current, fit)[None, :]
                chosen = None
                gain = float(information_gain(model, current, fit, rows, lanczos_k=lanczos_k)[0])
            else:
                gains = np.where(available, information_gain(model, current, fit, C, lanczos_k=lanczos_k), -np.inf)
                chosen = [int(i) for i in np.argsort(-gains, kind="stable")[:batch]]
                available[chosen] = False
                rows = C[chosen].reshape(-1, C.shape[2])
                gain = float(information_gain(model, current, fit, rows[None], lanczos_k=lanczos_k)[0])
            values = _measured(measure(rows.copy()), rows.shape[0])
            current = _extended(current, rows, values)
            result.chosen.append(chosen)
            result.filters.append(rows)
            result.gains.append(gain)
            result.values.append(values)
            bar.update(1)
    result.data = current
    result.fit = fit_model(model, current, backend, seed=seed, progress=False, **options)
    return result
