"""Adaptive-kernel relevance vector machine, aRVM (Tzikas, Likas, Galatsanos 2009; Tzikas PhD ch. 6-7).

Conceptually a member of the RVM family: the same sparse Bayesian linear model, but every basis
function carries its own centre m_i and width(s), learned together with the weights' precisions:

    y(x) = sum_i w_i phi(x; m_i, v_i),  phi(x; m, v) = exp(-sum_j v_j^2 (x_j - m_j)^2)          [P 63], [PhD 6.37, 7.9]
    w_i | alpha_i ~ N(0, 1/alpha_i),  t_n = y(x_n) + N(0, 1/beta)  (regression) or Bernoulli(logistic(y)),

with v = 1/h the inverse width: one number per basis (``kernel="iso"``, the aRVM) or one per input direction
(``kernel="diag"``, the aRVM^d). Sparsity comes from the prior on the effective number of parameters
p(alpha | beta) ∝ exp(-c trace(S)), S = Phi Sigma Phi^T B  [P 32, 37], with c = 0 (none), 1 (AIC),
log(N)/2 (BIC), log(N) (RIC) [P 33] or any value >= 0.

It is its own registry family, ``"arvm"``, so that its hand-written backend (``"arvm"``, the paper's
Algorithm 1) and the generic ones (``nuts``, ``numpyro``, ``advi`` ...) are looked up without predicates.

Two models share this class (the sources have only the first; the second exists so samplers can be compared
with it, and both are documented in the README):

* **Type-II (``backend="arvm"``)**: Algorithm 1 grows the model from empty, point-estimates centres, widths,
  alpha and beta by maximising L^s = log p(t | alpha, beta, theta) - c trace(S) [P 38] with flat priors on
  alpha, beta, theta (as in the paper; a, b, c, d are not used), and returns the Gaussian posterior of the
  weights at the learned kernel. At most ``n_basis`` basis functions are used.
* **Samplable (``pymc_model`` / ``numpyro_model``)**: exactly ``n_basis`` basis functions with
  centres ~ Uniform(bounding box of the training inputs), log-widths ~ Uniform(log of ``width_range`` times
  each input's span), log alpha_i and log beta with Gamma(a, b) / Gamma(c, d) densities (as in the RVM
  declaration), and the same sparsity prior exp(-c trace(S)) as a potential. For classification B in S is
  diag(p_n (1 - p_n)) at the current latent function (the Laplace weights [P 19] evaluated at f).

Canonical posterior variables: ``w``, ``log_alpha`` over ``basis``; ``centre`` over (``basis``, ``feature``);
``inv_width`` (= 1/h >= 0; 0 switches the direction off) over (``basis``, ``width_dim``); ``log_beta``
(regression); ``f``, the latent function at the training inputs, over ``obs``. Bases are exchangeable
(label switching), so errors against a reference are computed on ``f`` (and ``log_beta``) only.

The samplable declarations sample the bases unlabelled (sites ``centre_unsorted``, ``log_alpha_unsorted``, ``z``,
``log_width``) and report ``centre``, ``inv_width``, ``log_alpha`` and ``w`` permuted by increasing first centre
coordinate, draw by draw. The joint density is symmetric in the bases, so this changes neither the density nor
the posterior of ``f``, ``log_beta`` or any other quantity that does not depend on the labels; the per-basis
variables are those of the sorted labelling (basis 0 the leftmost), the same as under an ordering constraint, so
chains that visit the same configuration under different labels agree. An ordering constraint in the sampled
space instead (Dirichlet gaps between the centres) traps chains: a basis cannot pass another to reach a feature
on the far side (docs/families/arvm.md, "Reference posterior and the demo problem").
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from bayeszoo import checks, datasets
from bayeszoo.datasets import Dataset
from bayeszoo.models.base import Model
from bayeszoo.models.family import Family
from bayeszoo.models.rvm import (GAMMA_HYPERPRIORS, LOG_ALPHA_PRUNED, RELEVANCE_THRESHOLD, RVM, TASKS, check_scales,
                                 check_task_matches_data, checked_new_inputs)
from bayeszoo.numerics.special import log_gamma_numpyro, pm_log_gamma

ARVM_KERNELS = ("iso", "diag")
#: the smallest span of a varying input column, relative to the widest one (see check_input_spans)
MIN_RELATIVE_SPAN = 1e-10
SPARSITY_NAMES = ("none", "aic", "bic", "ric")
SPARSITY = [checks.NON_NEGATIVE, checks.OneOf(SPARSITY_NAMES)]


def sparsity_value(sparsity, n: int) -> float:
    """c of [P 33]: "none" 0, "aic" 1, "bic" log(N)/2, "ric" log(N) (natural log); a number is used as is."""
    sparsity = checks.check("ARVM", "sparsity", SPARSITY, sparsity)
    if isinstance(sparsity, str):
        return {"none": 0.0, "aic": 1.0, "bic": 0.5 * np.log(n), "ric": float(np.log(n))}[sparsity]
    return sparsity


def check_input_spans(data: Dataset) -> None:
    """Every varying input column must span at least MIN_RELATIVE_SPAN of the widest one (docs/families/arvm.md,
    "Inputs"): Algorithm 1 runs on inputs rescaled by one number, and its log-widths stay within +-30 of that scale."""
    span = np.ptp(data.X, axis=0) if data.n else np.zeros(data.d)
    top = float(np.max(span)) if span.size else 0.0
    for j in np.flatnonzero((span > 0) & (span < MIN_RELATIVE_SPAN * top)):
        raise ValueError(f"ARVM: input column {int(j)} spans {span[j]:.3g} but column {int(np.argmax(span))} spans "
                         f"{top:.3g}; the aRVM takes inputs whose varying columns span at least {MIN_RELATIVE_SPAN:g} "
                         f"of the widest one: rescale X (e.g. each column to unit standard deviation)")


def adaptive_design(X, centres, inv_widths) -> np.ndarray:
    """Phi (n, M): phi(x_n; m_i, v_i) = exp(-sum_j v_ij^2 (x_nj - m_ij)^2); v of shape (M, 1) or (M, D)."""
    X = np.atleast_2d(np.asarray(X, dtype=float))
    centres = np.asarray(centres, dtype=float).reshape(-1, X.shape[1])
    v = np.asarray(inv_widths, dtype=float).reshape(centres.shape[0], -1)
    diff = X[:, None, :] - centres[None, :, :]
    return np.exp(-np.sum((diff * v[None]) ** 2, axis=2))


@dataclass
class ARVM(Model):
    """Adaptive-kernel RVM (aRVM / aRVM^d) for regression or binary classification (logistic link).

    Parameters
    ----------
    task : {"regression", "classification"}
    kernel : {"iso", "diag"}
        One width per basis function (aRVM, [P 63]) or one per input direction (aRVM^d, [PhD 6.37]).
    sparsity : float or {"none", "aic", "bic", "ric"}
        c of the prior exp(-c trace(S)) [P 32-33]; the paper's default is BIC, c = log(N)/2.
    n_basis : int
        Basis-function slots: the samplable declaration uses all of them; Algorithm 1 uses at most this many.
    feature_selection : bool
        Local feature selection (PhD ch. 7): Normal(0, 1/delta) priors on the per-basis, per-direction inverse
        widths with delta = 1/v^2 updates [PhD 7.10-7.14] in Algorithm 1 (``kernel="diag"`` only).
    width_range : (float, float)
        Widths h as fractions of each input's span: the range random candidates are drawn from (log-uniform,
        Algorithm 1; the source gives no range) and the support of the samplable model's log-width prior.
    min_width : "spacing" or float >= 0
        Lower bound on every width h in Algorithm 1: "spacing" is the median distance from a training input to
        its nearest neighbour (a narrower kernel sees one observation and can only interpolate its noise); 0
        is the unconstrained problem as printed in the source.
    a, b, c, d : Gamma(shape, rate) priors on alpha_i and beta used by the PyMC / NumPyro declarations only.
    """

    task: str = "regression"
    kernel: str = "iso"
    sparsity: object = "bic"
    n_basis: int = 40
    feature_selection: bool = False
    width_range: tuple = (0.005, 1.0)
    min_width: object = "spacing"
    a: float = 1.0
    b: float = 1e-2
    c: float = 1.0
    d: float = 1e-3

    family = "arvm"
    example_data = "sinc"
    link = "logit"
    reference_advice: ClassVar[str] = (
        "ARVM: the samplable declaration has genuine local modes besides the exchangeable labels (reported sorted by "
        "centre): a basis that fits a weak feature or none, two bases sharing one bump. Chains that settle in "
        "different modes (R-hat well above 1.01, per-chain means of f or log_beta that differ) are not mended by "
        "longer runs: use no more bases than the data clearly support (one per feature of the function; the arvm "
        "backend's n_relevant under sparsity='ric' is a guide), the light-tailed precisions a=5, b=0.05 and "
        "target_accept=0.99. Inputs far from every basis put f in a basis's far tail, whose sd rests on rare draws "
        "(the engines then disagree on it, or every fit's sd_err is near 1): keep the inputs within reach of the "
        "bases, and bound the widths (width_range) so that a basis cannot spread over an edge without data. The "
        "catalogue's arvm-sinc does all of this: n_basis=3, width_range=(0.005, 0.25), on sinc within |x| <= 2 pi "
        "(docs/families/arvm.md, 'Reference posterior and the demo problem').")

    _parameter_constraints: ClassVar[dict] = {
        "task": checks.OneOf(TASKS), "kernel": checks.OneOf(ARVM_KERNELS), "sparsity": SPARSITY,
        "n_basis": checks.POSITIVE_INT, "feature_selection": checks.Flag(),
        "width_range": checks.Where(checks.Numbers(checks.POSITIVE, length=2), lambda pair: pair[0] < pair[1],
                                    "a pair (low, high) with 0 < low < high"),
        "min_width": [checks.NON_NEGATIVE, checks.OneOf(("spacing",))], **GAMMA_HYPERPRIORS}

    def __post_init__(self):
        super().__post_init__()
        if self.feature_selection and self.kernel != "diag":
            raise ValueError("ARVM: feature_selection needs kernel='diag' (one inverse width per direction)")

    @property
    def is_classifier(self) -> bool:
        return self.task == "classification"

    @property
    def compare_vars(self) -> tuple[str, ...]:
        return ("f",) if self.is_classifier else ("f", "log_beta")

    def c_value(self, n: int) -> float:
        return sparsity_value(self.sparsity, n)

    # ---- data ----------------------------------------------------------------------------------------
    def validate(self, data: Dataset) -> None:
        super().validate(data)
        check_task_matches_data(self, data)
        check_scales(self, data)
        check_input_spans(data)

    def width_dims(self, d: int) -> int:
        return 1 if self.kernel == "iso" else d

    def input_box(self, X):
        """(lower, upper, span) of the training inputs per direction; span 1 where an input is constant."""
        lo, hi = X.min(0), X.max(0)
        span = np.where(hi > lo, hi - lo, 1.0)
        return lo, hi, span

    def width_bounds(self, X):
        """(log h_min, log h_max) per width direction (shape (K,)); iso uses the mean span."""
        _, _, span = self.input_box(X)
        if self.kernel == "iso":
            span = np.array([float(np.mean(span))])
        return np.log(self.width_range[0] * span), np.log(self.width_range[1] * span)

    def min_width_value(self, X) -> float:
        """The floor on h used by Algorithm 1 (see ``min_width``)."""
        if self.min_width != "spacing":
            return float(self.min_width)
        from scipy.spatial import cKDTree

        X = np.asarray(X, float)
        if X.shape[0] < 2:
            return 0.0
        dist, _ = cKDTree(X).query(X, k=2)
        nn = dist[:, 1]
        nn = nn[nn > 0]
        return float(np.median(nn)) if nn.size else 0.0

    def var_dims(self, data: Dataset) -> dict[str, tuple[str, ...]]:
        dims = {"w": ("basis",), "log_alpha": ("basis",), "centre": ("basis", "feature"),
                "inv_width": ("basis", "width_dim"), "f": ("obs",)}
        if not self.is_classifier:
            dims["log_beta"] = ()
        return dims

    def coords(self, data: Dataset) -> dict[str, np.ndarray]:
        return {"basis": np.arange(self.n_basis), "feature": np.arange(data.d),
                "width_dim": np.arange(self.width_dims(data.d)), "obs": np.arange(data.n)}

    def constant_data(self, data: Dataset) -> dict:
        return {"X": data.X}

    # ---- declarations --------------------------------------------------------------------------------
    def _prior_bounds(self, data):
        lo, hi, _ = self.input_box(data.X)
        wlo, whi = self.width_bounds(data.X)
        return lo, hi, wlo, whi

    def pymc_model(self, data: Dataset):
        """The samplable aRVM in PyMC: ``n_basis`` bases with uniform centres and log-widths, the RVM's
        log-Gamma precisions, non-centred weights, and the potential -c trace(S) [P 32]. The bases are sampled
        unlabelled (``centre_unsorted``, ...) and reported sorted by centre (module docstring)."""
        import pymc as pm
        import pytensor.tensor as pt

        self.validate(data)
        X, y = np.asarray(data.X, float), np.asarray(data.y, float)
        lo, hi, wlo, whi = self._prior_bounds(data)
        M, D, K = self.n_basis, data.d, self.width_dims(data.d)
        c_sparse = self.c_value(data.n)
        with pm.Model(coords=self.coords(data)) as model:
            centre = pm.Uniform("centre_unsorted", lower=np.broadcast_to(lo, (M, D)),
                                upper=np.broadcast_to(hi, (M, D)), dims=("basis", "feature"))
            log_width = pm.Uniform("log_width", lower=np.broadcast_to(wlo, (M, K)),
                                   upper=np.broadcast_to(whi, (M, K)), dims=("basis", "width_dim"))
            inv_width = pt.exp(-log_width)
            log_alpha = pm_log_gamma("log_alpha_unsorted", self.a, self.b, dims="basis")
            z = pm.Normal("z", 0.0, 1.0, dims="basis")
            w = z * pt.exp(-0.5 * log_alpha)
            order = pt.argsort(centre[:, 0])
            for name, value in (("centre", centre), ("inv_width", inv_width), ("log_alpha", log_alpha), ("w", w)):
                pm.Deterministic(name, value[order], dims=self.var_dims(data)[name])
            diff = (X[:, None, :] - centre[None, :, :]) * inv_width[None, :, :]
            Phi = pt.exp(-pt.sum(diff**2, axis=2))
            f = pm.Deterministic("f", pt.dot(Phi, w), dims="obs")
            if self.is_classifier:
                pm.Bernoulli("y", logit_p=f, observed=y, dims="obs")
                p = pm.math.sigmoid(f)
                G = pt.dot(Phi.T * (p * (1 - p))[None, :], Phi)
            else:
                log_beta = pm_log_gamma("log_beta", self.c, self.d)
                pm.Normal("y", mu=f, sigma=pt.exp(-0.5 * log_beta), observed=y, dims="obs")
                G = pt.exp(log_beta) * pt.dot(Phi.T, Phi)
            if c_sparse > 0:
                pm.Potential("sparsity", -c_sparse * trace_smoother(G, log_alpha, "pytensor"))
        return model

    def numpyro_model(self, data: Dataset):
        """The same joint density as :meth:`pymc_model`, as a NumPyro model function of no arguments (its data
        bound by ``functools.partial``: :class:`~bayeszoo.models.base.Model`; bases reported sorted
        by centre, module docstring)."""
        import jax.numpy as jnp
        import numpyro
        import numpyro.distributions as dist

        self.validate(data)
        X_np, y_np = np.asarray(data.X, float), np.asarray(data.y, float)
        lo, hi, wlo, whi = self._prior_bounds(data)
        M, D, K = self.n_basis, data.d, self.width_dims(data.d)
        c_sparse = self.c_value(data.n)
        a, b, c, d = (float(v) for v in (self.a, self.b, self.c, self.d))
        classifier = self.is_classifier
        LogGamma = log_gamma_numpyro()

        def model(X, y, bounds):    # the prior's bounds come from the data too
            X, y = jnp.asarray(X), jnp.asarray(y)
            lo, hi, wlo, whi = (jnp.asarray(bounds[k]) for k in ("lo", "hi", "wlo", "whi"))
            centre = numpyro.sample("centre_unsorted", dist.Uniform(jnp.broadcast_to(lo, (M, D)),
                                                                    jnp.broadcast_to(hi, (M, D))).to_event(2))
            log_width = numpyro.sample("log_width", dist.Uniform(jnp.broadcast_to(wlo, (M, K)),
                                                                 jnp.broadcast_to(whi, (M, K))).to_event(2))
            inv_width = jnp.exp(-log_width)
            log_alpha = numpyro.sample("log_alpha_unsorted", LogGamma(a, b).expand([M]).to_event(1))
            z = numpyro.sample("z", dist.Normal(0.0, 1.0).expand([M]).to_event(1))
            w = z * jnp.exp(-0.5 * log_alpha)
            order = jnp.argsort(centre[:, 0])
            for name, value in (("centre", centre), ("inv_width", inv_width), ("log_alpha", log_alpha), ("w", w)):
                numpyro.deterministic(name, value[order])
            diff = (X[:, None, :] - centre[None, :, :]) * inv_width[None, :, :]
            Phi = jnp.exp(-jnp.sum(diff**2, axis=2))
            f = numpyro.deterministic("f", Phi @ w)
            if classifier:
                numpyro.sample("y", dist.Bernoulli(logits=f).to_event(1), obs=y)
                p = 1.0 / (1.0 + jnp.exp(-f))
                G = (Phi.T * (p * (1 - p))[None, :]) @ Phi
            else:
                log_beta = numpyro.sample("log_beta", LogGamma(c, d))
                numpyro.sample("y", dist.Normal(f, jnp.exp(-0.5 * log_beta)).to_event(1), obs=y)
                G = jnp.exp(log_beta) * Phi.T @ Phi
            if c_sparse > 0:
                numpyro.factor("sparsity", -c_sparse * trace_smoother(G, log_alpha, "jax"))

        bounds = {"lo": lo, "hi": hi, "wlo": wlo, "whi": whi}
        return functools.partial(model, X=X_np, y=y_np, bounds={k: np.asarray(v, float) for k, v in bounds.items()})

    # ---- prediction ----------------------------------------------------------------------------------
    def _draws(self, fit, name):
        arr = np.asarray(fit.idata.posterior[name].values, dtype=float)
        return arr.reshape(arr.shape[0] * arr.shape[1], *arr.shape[2:])

    def _prob_draws(self, f):
        from scipy.special import expit

        return expit(f)

    def log_likelihood(self, fit, data: Dataset) -> np.ndarray:
        """log N(y_n | f_n, 1/beta) (regression) or log sigmoid(+-f_n) (classification) at every draw of the latent
        f at the training inputs."""
        from scipy.special import log_expit

        f = self._draws(fit, "f")
        y = np.asarray(data.y, dtype=float)
        if self.is_classifier:
            return log_expit((2.0 * y - 1.0) * f)
        log_beta = self._draws(fit, "log_beta")[:, None]
        return 0.5 * (log_beta - np.log(2.0 * np.pi)) - 0.5 * np.exp(log_beta) * (y - f) ** 2

    def basis_draws(self, fit):
        """(w, centre, inv_width) draws: (S, M), (S, M, D), (S, M, K)."""
        return self._draws(fit, "w"), self._draws(fit, "centre"), self._draws(fit, "inv_width")

    def _checked_inputs(self, fit, X_new) -> np.ndarray:
        """X_new as a checked (n, d) matrix for a fit made with this model (``check_fit``, ``check_inputs``)."""
        return checked_new_inputs(self, fit, X_new)

    def predict_draws(self, fit, X_new) -> np.ndarray:
        """Latent f(x) for every posterior draw: (chain * draw, n_new).

        A type-II fit has one kernel (the same centres and widths in every draw): Phi is built once. A ValueError
        names the problem when the fit was made with another model or X_new does not match its training inputs.
        """
        X_new = self._checked_inputs(fit, X_new)
        w, m, v = self.basis_draws(fit)
        if np.all(m == m[:1]) and np.all(v == v[:1]):
            return w @ adaptive_design(X_new, m[0], v[0]).T
        out = np.empty((w.shape[0], X_new.shape[0]))
        for s in range(w.shape[0]):
            out[s] = adaptive_design(X_new, m[s], v[s]) @ w[s]
        return out

    def predict(self, fit, X_new) -> np.ndarray:
        """Regression: posterior predictive mean (n,). Classification: P(y = 1), averaged over draws (n,)."""
        f = self.predict_draws(fit, X_new)
        return self._prob_draws(f).mean(0) if self.is_classifier else f.mean(0)

    def latent_mean(self, fit, X_new) -> np.ndarray:
        """Posterior mean of the latent f at X_new (n,).

        A type-II fit that keeps the Gaussian's mean of w (the ``gaussian`` group's ``q_mean``, written by the
        ``arvm`` backend) gives it exactly, Phi(X_new) mu at the learned kernel; otherwise it is the average over
        draws.
        """
        X_new = self._checked_inputs(fit, X_new)
        if "gaussian" not in fit.idata.groups() or not self.is_point_estimate(fit):
            return self.predict_draws(fit, X_new).mean(0)
        _, m, v = self.basis_draws(fit)
        return adaptive_design(X_new, m[0], v[0]) @ np.asarray(fit.idata["gaussian"]["q_mean"].values, dtype=float)

    # ---- scoring -------------------------------------------------------------------------------------
    def target_scale(self, data: Dataset) -> float:
        return RVM.target_scale(self, data)

    def is_point_estimate(self, fit) -> bool:
        la = self._draws(fit, "log_alpha")
        return bool(np.all(la == la[:1]))

    def n_relevant(self, fit, data: Dataset | None = None) -> int:
        """Relevance vectors (basis functions in use).

        Type-II fits: the bases Algorithm 1 kept (log_alpha below the pruning level). Sampled fits: basis i
        counts when the median over draws of rms_n |w_i phi_i(x_n)| is at least ``RELEVANCE_THRESHOLD`` (1 %) of
        the target scale (the RVM rule, on the basis's actual contribution since its kernel moves per draw).
        """
        self.check_fit(fit)
        la = self._draws(fit, "log_alpha")
        if self.is_point_estimate(fit):
            return int(np.sum(la[0] < LOG_ALPHA_PRUNED - 1e-9))
        X = np.asarray(fit.idata.constant_data["X"].values, dtype=float)
        w, m, v = self.basis_draws(fit)
        idx = np.linspace(0, w.shape[0] - 1, min(w.shape[0], 400)).astype(int)
        contrib = np.empty((idx.size, w.shape[1]))
        for k, s in enumerate(idx):
            Phi = adaptive_design(X, m[s], v[s])
            contrib[k] = np.sqrt(np.mean(Phi**2, axis=0)) * np.abs(w[s])
        scale = self.target_scale(data) if data is not None else \
            (1.0 if self.is_classifier else float(np.std(fit.idata.observed_data["y"].values)) or 1.0)
        return int(np.sum(np.median(contrib, axis=0) / scale >= RELEVANCE_THRESHOLD))

    def score(self, fit, data: Dataset) -> dict:
        """The RVM family's metrics (``mse`` / ``error_rate``, ``log_pred``, ``info_bits``, ``n_relevant``)."""
        return RVM.score(self, fit, data)


def trace_smoother(G, log_alpha, lib: str):
    """trace(S) = M - tr((I + D G D)^-1), D = diag(alpha^-1/2), G = Phi^T B Phi  ([P 37]: M - sum alpha_i Sigma_ii).

    The scaled matrix has eigenvalues >= 1, so the inverse is well conditioned for any alpha.
    """
    if lib == "pytensor":
        import pytensor.tensor as pt

        s = pt.exp(-0.5 * log_alpha)
        K = G * s[:, None] * s[None, :]
        M = K.shape[0]
        return M - pt.nlinalg.trace(pt.nlinalg.matrix_inverse(pt.eye(M) + K))
    import jax.numpy as jnp

    s = jnp.exp(-0.5 * log_alpha)
    K = G * s[:, None] * s[None, :]
    M = K.shape[0]
    return M - jnp.trace(jnp.linalg.inv(jnp.eye(M) + K))


FAMILY = Family(model=ARVM, about="adaptive-kernel RVM: one width per basis function",
                source="Tzikas, Likas, Galatsanos (2009); Tzikas PhD thesis ch. 6-7",
                tiny=lambda: (ARVM(n_basis=4), datasets.load("sinc", n=16, n_test=20, seed=0)),
                datasets=("synthetic", "real"), benchmarks=("bench_arvm",), gallery="arvm")
