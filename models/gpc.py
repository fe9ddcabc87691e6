"""Binary Gaussian-process classification (Nickisch thesis ch. 4; Rasmussen & Williams ch. 3).

    f ~ GP(0, k_theta),  P(y_n = 1 | f_n) = sig(f_n),  sig = Phi (probit, "cumulative Gaussian") or logistic (logit)

Hyperparameters theta are on the log scale as in the thesis (e.g. log lengthscale, log amplitude sigma_f) and
are held fixed during inference of f; type-II maximum likelihood and grid studies choose them.
Canonical posterior variable written by every backend: ``f`` over ``obs`` (the latent values at the training
inputs). Labels are 0/1 in the Dataset (+1/-1 in the thesis's formulas: y_pm = 2 y - 1).

Shared helpers for the hand-written backends (import them from here):

``GPC.at(X)``                           the model with ``log_lengthscale="scale"`` resolved for training inputs X;
``GPC.fitted(fit)``                     the same with the number stored with a fit;
``GPC.hyperparameters(d)``              the log-hyperparameter vector (order: ``gp_kernels`` docstring);
``GPC.K(X1, X2=None, d=None)``          covariance; jitter on the diagonal when ``X2`` is None;
``GPC.kernel_matrix(X1, X2=None)``      covariance without jitter; ``GPC.kernel_diag(X)``, ``GPC.kernel_grad(X)``;
``GPC.cholesky(X, K=None)``             chol(K + jitter I), or a ValueError naming the options to change;
``GPC.check_prior_variance(X, what)``   a ValueError where k(x, x) + jitter exceeds ``VARIANCE_LIMIT``;
``GPC.labels_pm(y)``                    0/1 (or +-1) labels as +-1 floats;
``predictive_probability(mu, var, likelihood)``      P(y* = 1) = int sig(f) N(f | mu, var) df   (4.8 / 4.23);
``log_predictive_probability(mu, var, likelihood, y_pm=1)``   its logarithm for label y_pm, stable in the tails;
``log_sig(t, likelihood)``              log sig(t), stable for extreme t;
``gp_conditional(model, X, X_new)``     (A, var): mean K*^T K^-1 f = f @ A, variance k** - K*^T K^-1 K*  (4.7);
``two_point_exact_moments(model)``      exact mean, covariance and log Z of the Fig. 4.3 two-point toy.

``K``, ``kernel_matrix``, ``kernel_grad`` and ``cholesky`` take the training inputs first and resolve a "scale"
lengthscale from them; ``hyperparameters``, ``kernel_diag`` and ``check_prior_variance`` need a resolved model
(``at`` / ``fitted``).
"""
from __future__ import annotations

from typing import ClassVar

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

from bayeszoo import checks
from bayeszoo.datasets import Dataset
from bayeszoo.numerics import gp_kernels
from bayeszoo.numerics.linalg import cholesky
from bayeszoo.models.base import SCALE, Model, scale_spread
from bayeszoo.models.family import Family

LIKELIHOODS = ("probit", "logit")
KERNELS = gp_kernels.KERNELS
#: the kernels with a lengthscale, which ``log_lengthscale`` sets (when ``hyp`` is None)
LENGTHSCALE_KERNELS = ("se", "se_ard", "matern32", "matern52", "nn")
HYP_LIMIT = 20.0       # |log hyperparameter| above this is rejected (exp(20) ~ 5e8)
LOG_HYPERPARAMETER = checks.Interval(float, -HYP_LIMIT, HYP_LIMIT, "both")
#: Largest prior variance k(x, x) + jitter at any input the model sees (training, test and prediction inputs).
#: Beyond it the posterior covariances K - K C K lose every digit to cancellation in double precision (their
#: entries are O(1) where the likelihood is informative, the round-off is ~1e-16 k(x, x)); for the stationary
#: kernels it bounds the amplitude (log sf <= 11.5), for ``linear`` and ``poly`` the scale of the inputs.
VARIANCE_LIMIT = 1e10
GH_NODES = 96          # Gauss-Hermite nodes of the logit predictive integral
GAUSSIAN_GROUP = "gaussian"   # idata group of a Gaussian approximation Q over f: q_mean, q_var, q_cov


@dataclass
class GPC(Model):
    """Binary GP classifier with fixed (log) hyperparameters.

    Parameters
    ----------
    likelihood : {"probit", "logit"}
        Cumulative Gaussian (4.2) or cumulative logistic (4.1).
    kernel : {"se", "se_ard", "matern32", "matern52", "linear", "poly", "nn"}
        Covariance function; hyperparameter order in :mod:`bayeszoo.numerics.gp_kernels`.
    hyp : tuple of float or None
        All log-hyperparameters of the kernel, in the kernel's order (e.g. ``(log_ell, log_sf)`` for ``se``,
        ``d`` lengthscales then ``log_sf`` for ``se_ard``). Overrides the two convenience fields below.
    log_lengthscale : float or "scale"
        ``"scale"`` (the default) sets the lengthscale at fit time from the training inputs as scikit-learn's SVC
        sets ``gamma="scale"``: ell^2 = d var(X) / 2 (``nn``: d var(X)); see :func:`scale_log_lengthscale`. The
        number used is stored with the fit (``fit.idata.constant_data["log_lengthscale"]``), and predictions use it.
    log_amplitude : float
        With ``log_lengthscale``, the convenient spelling used when ``hyp`` is None: ``se``/``matern*``/``nn`` ->
        (log_lengthscale, log_amplitude); ``se_ard`` -> log_lengthscale for every dimension, then log_amplitude;
        ``linear`` -> (-log_amplitude,) (covLINone's k = (x.z + 1) / t^2, so sf = 1 / t);
        ``poly`` -> (0.0, log_amplitude), i.e. offset c = 1.
    jitter : float
        Added to the diagonal of K before the Cholesky factorisation (numerical only), in [0, ``VARIANCE_LIMIT``].
    degree : int
        Degree of the ``poly`` kernel (1, 2 or 3).

    Inputs: 0/1 labels; any finite input scale for the stationary kernels and ``nn``; the prior variance
    k(x, x) + jitter at most ``VARIANCE_LIMIT`` at every input (docs/families/gpc.md, "Inputs").
    """

    likelihood: str = "probit"
    kernel: str = "se"
    hyp: tuple | None = None
    log_lengthscale: float | str = SCALE
    log_amplitude: float = 0.0
    jitter: float = 1e-8
    degree: int = 2

    family = "gpc"
    example_data = "sonar"
    compare_vars = ("f",)
    reference_advice: ClassVar[str] = (
        "GPC: the exact gibbs backend (Albert-Chib for probit, Polya-Gamma for logit) needs no tuning and is the "
        "catalogue's first engine; with NUTS, raise target_accept to 0.95 and run 4 x 2000 draws; a long "
        "lengthscale makes f strongly correlated, so thin (docs/families/gpc.md).")

    _parameter_constraints: ClassVar[dict] = {
        "likelihood": checks.OneOf(LIKELIHOODS), "kernel": checks.OneOf(KERNELS),
        "hyp": [None, checks.Numbers(LOG_HYPERPARAMETER)],
        "log_lengthscale": [LOG_HYPERPARAMETER, checks.OneOf((SCALE,))], "log_amplitude": LOG_HYPERPARAMETER,
        "jitter": checks.Interval(float, 0.0, VARIANCE_LIMIT, "both"), "degree": checks.OneOf(gp_kernels.POLY_DEGREES)}

    # ---- hyperparameters and covariance ----------------------------------------------------------------
    @property
    def uses_lengthscale(self) -> bool:
        """Whether ``log_lengthscale`` enters the kernel (``hyp`` not given, a kernel with a lengthscale)."""
        return self.hyp is None and self.kernel in LENGTHSCALE_KERNELS

    @property
    def resolved(self) -> bool:
        """Whether every hyperparameter is a number (no "scale" left to set from training inputs)."""
        return not (self.uses_lengthscale and self.log_lengthscale == SCALE)

    def at(self, X) -> GPC:
        """This model for training inputs X: a copy with ``log_lengthscale="scale"`` replaced by the number it stands
        for there (:func:`scale_log_lengthscale`; a ValueError when that number is out of range); the model itself
        when nothing is left to resolve."""
        if self.resolved:
            return self
        return dataclasses.replace(self, log_lengthscale=scale_log_lengthscale(X, self.kernel))

    def fitted(self, fit) -> GPC:
        """This model as ``fit`` was made with it: "scale" replaced by the number stored with the fit
        (``constant_data["log_lengthscale"]``; for a fit saved before it was stored, resolved from the training
        inputs stored with it)."""
        if self.resolved:
            return self
        stored = fit.idata.constant_data.get("log_lengthscale")
        if stored is None:
            return self.at(np.asarray(fit.idata.constant_data["X"].values, dtype=float))
        return dataclasses.replace(self, log_lengthscale=float(stored.values))

    def hyperparameters(self, d: int) -> np.ndarray:
        """The kernel's log-hyperparameters for input dimension ``d`` (order: :mod:`gp_kernels`); with
        ``log_lengthscale="scale"``, those of ``model.at(X)`` for the training inputs X."""
        if not self.resolved:
            raise ValueError(f"GPC: log_lengthscale={SCALE!r} is set from the training inputs: the hyperparameters "
                             f"are those of model.at(X) for training inputs X (model.fitted(fit) for a fit)")
        m = gp_kernels.n_hyp(self.kernel, d)
        if self.hyp is not None:
            hyp = np.asarray(self.hyp, dtype=float)
            if hyp.shape != (m,):
                raise ValueError(f"GPC kernel {self.kernel!r} with d={d} needs {m} log-hyperparameters "
                                 f"{gp_kernels.hyp_names(self.kernel, d)}, got hyp of length {hyp.size}")
            return hyp.copy()
        la = float(self.log_amplitude)
        if self.kernel == "linear":
            return np.array([-la])
        if self.kernel == "poly":
            return np.array([0.0, la])
        ll = float(self.log_lengthscale)
        if self.kernel == "se_ard":
            return np.array([ll] * int(d) + [la])
        return np.array([ll, la])

    def hyp_names(self, d: int) -> list[str]:
        return gp_kernels.hyp_names(self.kernel, d)

    def kernel_matrix(self, X1, X2=None) -> np.ndarray:
        """k(X1, X2) without jitter (X2 = X1 when None); X1: the training inputs (which set a "scale" lengthscale)."""
        X1 = np.atleast_2d(np.asarray(X1, dtype=float))
        hyp = self.at(X1).hyperparameters(X1.shape[1])
        return gp_kernels.kernel_matrix(self.kernel, X1, X2, hyp, self.degree)

    def K(self, X1, X2=None, d: int | None = None) -> np.ndarray:
        """Covariance matrix; ``X2=None`` gives k(X1, X1) + jitter I (the prior covariance of f)."""
        X1 = np.atleast_2d(np.asarray(X1, dtype=float))
        if d is not None and d != X1.shape[1]:
            raise ValueError(f"X1 has {X1.shape[1]} columns but d={d}")
        K = self.kernel_matrix(X1, X2)
        if X2 is None:
            K = K + self.jitter * np.eye(K.shape[0])
        return K

    def kernel_diag(self, X) -> np.ndarray:
        """Prior variances k(x, x) (no jitter) for every row of X (any inputs: needs a resolved model)."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        return gp_kernels.kernel_diag(self.kernel, X, self.hyperparameters(X.shape[1]), self.degree)

    def kernel_grad(self, X) -> list[np.ndarray]:
        """dK/dhyp_j at the training inputs, one (n, n) array per log-hyperparameter."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        return gp_kernels.kernel_grad(self.kernel, X, self.at(X).hyperparameters(X.shape[1]), self.degree)

    def cholesky(self, X, K=None) -> np.ndarray:
        """Lower Cholesky factor L of K(X) + jitter I (so f = L z, z ~ N(0, I) is the prior); ``K``: that matrix,
        when already computed. A ValueError says which option to change when the matrix is numerically singular
        (its round-off, ~1e-16 times the prior variance, exceeds the jitter), e.g. for duplicated inputs."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        K = self.K(X) if K is None else np.asarray(K, dtype=float)
        return cholesky(K, failure=lambda K, _: self.at(X)._singular_kernel_message(X, K))

    def _singular_kernel_message(self, X, K) -> str:
        d = X.shape[1]
        hyp = _named_hyp(self, d)
        largest = float(np.max(np.diag(K), initial=0.0))
        enough = None                       # the smallest jitter 10^k (up to the variance limit) that is enough
        for jitter in 10.0 ** np.arange(-12, 11):
            if jitter > self.jitter:
                try:
                    np.linalg.cholesky(K + (jitter - self.jitter) * np.eye(K.shape[0]))
                except np.linalg.LinAlgError:
                    continue
                enough = jitter
                break
        remedy = "increase jitter" + ("" if enough is None else f" (jitter={enough:g} suffices here)")
        return (f"GPC: K + {self.jitter:g} I is not positive definite in floating point for kernel "
                f"{self.kernel!r} with {hyp} (largest prior variance {largest:.3g}; duplicated inputs, or inputs "
                f"close together relative to the lengthscale, make K singular); {remedy}, or "
                f"{_SINGULAR_ADVICE[self.kernel]}")

    def check_prior_variance(self, X, what: str = "X") -> None:
        """A ValueError unless the prior variance k(x, x) + jitter stays within :data:`VARIANCE_LIMIT` at every row
        of ``X`` (inputs whose scale, or an amplitude whose size, the numerics cannot represent)."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        if X.shape[0] == 0:
            return
        variance = float(np.max(self.kernel_diag(X))) + self.jitter
        if np.isfinite(variance) and variance <= VARIANCE_LIMIT * (1.0 + 1e-12):
            return
        d = X.shape[1]
        hyp = _named_hyp(self, d)
        raise ValueError(
            f"GPC: the prior variance k(x, x) + jitter of kernel {self.kernel!r} with {hyp} reaches {variance:.3g} "
            f"at {what} (largest |x| = {float(np.max(np.abs(X))):.3g}), above the {VARIANCE_LIMIT:g} the numerics "
            f"can represent; {_VARIANCE_ADVICE[self.kernel]}")

    @staticmethod
    def labels_pm(y) -> np.ndarray:
        """Labels as +-1 floats: 0/1 -> -1/+1 (y_pm = 2 y - 1); +-1 labels are returned unchanged."""
        y = np.asarray(y, dtype=float)
        vals = np.unique(y)
        if np.all(np.isin(vals, (0.0, 1.0))):
            return 2.0 * y - 1.0
        if np.all(np.isin(vals, (-1.0, 1.0))):
            return y.copy()
        raise ValueError(f"GPC labels must be 0/1 (or -1/+1); got values {vals[:10].tolist()}")

    # ---- data ----------------------------------------------------------------------------------------
    def validate(self, data: Dataset) -> None:
        super().validate(data)
        if data.task not in (None, "classification"):
            raise ValueError(f"dataset {data.name!r} is a {data.task} problem; GPC needs binary labels 0/1")
        for what, y in (("y", data.y), ("y_test", data.y_test)):
            labels = np.unique(y)
            if not np.all(np.isin(labels, (0.0, 1.0))):
                hint = (" (labels -1/+1: pass (y + 1) / 2)" if np.all(np.isin(labels, (-1.0, 1.0))) else "")
                raise ValueError(f"GPC needs binary labels 0/1 in {what}; got values {labels[:10].tolist()}{hint}")
        model = self.at(data.X)       # refuses a "scale" lengthscale these inputs cannot set
        hyp = model.hyperparameters(data.d)
        _check_hyp(hyp, f"hyperparameters {self.hyp_names(data.d)} =")
        model.check_prior_variance(data.X, "the training inputs X")
        model.check_prior_variance(data.X_test, "the test inputs X_test")

    def var_dims(self, data: Dataset) -> dict[str, tuple[str, ...]]:
        return {"f": ("obs",)}

    def coords(self, data: Dataset) -> dict[str, np.ndarray]:
        return {"obs": np.arange(data.n)}

    def constant_data(self, data: Dataset) -> dict:
        if self.resolved:
            return {"X": data.X}
        # the lengthscale "scale" stood for: predictions use it (fitted), and it shows what was fitted
        return {"X": data.X, "log_lengthscale": self.at(data.X).log_lengthscale}

    # ---- declarations --------------------------------------------------------------------------------
    def declaration_memory(self, data: Dataset) -> dict[str, int]:
        return {f"kernel matrix K and its Cholesky factor L ({data.n:,} x {data.n:,}, 2)": 2 * 8 * data.n ** 2}

    def pymc_model(self, data: Dataset):
        """GPC in PyMC, whitened: ``z`` ~ N(0, I) over ``obs``, ``f = L z`` (Deterministic over ``obs``),
        L = chol(K + jitter I) computed once in NumPy; y ~ Bernoulli(sig(f))."""
        import pymc as pm
        import pytensor.tensor as pt

        from bayeszoo.numerics.special import pt_log_ndtr

        self.validate(data)
        L = self.cholesky(data.X)
        y = np.asarray(data.y, dtype=float)
        with pm.Model(coords=self.coords(data)) as model:
            z = pm.Normal("z", 0.0, 1.0, dims="obs")
            f = pm.Deterministic("f", pt.dot(L, z), dims="obs")
            logit = f if self.likelihood == "logit" else pt_log_ndtr(f) - pt_log_ndtr(-f)
            pm.Bernoulli("y", logit_p=logit, observed=y, dims="obs")
        return model

    def numpyro_model(self, data: Dataset):
        """The same joint density as :meth:`pymc_model`, as a NumPyro model function of no arguments (its data
        bound by ``functools.partial``: :class:`~bayeszoo.models.base.Model`)."""
        import jax.numpy as jnp
        import numpyro
        import numpyro.distributions as dist
        from jax.scipy.special import log_ndtr

        self.validate(data)
        L_np = self.cholesky(data.X)
        y_np = np.asarray(data.y, dtype=float)
        n, probit = data.n, self.likelihood == "probit"

        def model(L, y):
            L, y = jnp.asarray(L), jnp.asarray(y)
            z = numpyro.sample("z", dist.Normal(0.0, 1.0).expand([n]).to_event(1))
            f = numpyro.deterministic("f", L @ z)
            logit = log_ndtr(f) - log_ndtr(-f) if probit else f
            numpyro.sample("y", dist.Bernoulli(logits=logit).to_event(1), obs=y)

        return functools.partial(model, L=L_np, y=y_np)

    def log_joint(self, f, data: Dataset) -> np.ndarray:
        """log N(f | 0, K + jitter I) + sum_n log sig(y_pm,n f_n) for f of shape (..., n) (NumPy reference)."""
        L = self.cholesky(data.X)
        f = np.asarray(f, dtype=float)
        from scipy.linalg import solve_triangular

        z = solve_triangular(L, np.moveaxis(f, -1, 0), lower=True)
        z = np.moveaxis(z, 0, -1)
        n = data.n
        prior = -0.5 * np.sum(z**2, -1) - np.sum(np.log(np.diag(L))) - 0.5 * n * np.log(2 * np.pi)
        return prior + np.sum(log_sig(self.labels_pm(data.y) * f, self.likelihood), -1)

    # ---- prediction ----------------------------------------------------------------------------------
    def _f_draws(self, fit) -> np.ndarray:
        arr = np.asarray(fit.idata.posterior["f"].values, dtype=float)
        return arr.reshape(arr.shape[0] * arr.shape[1], arr.shape[2])

    def log_likelihood(self, fit, data: Dataset) -> np.ndarray:
        """log sig(y_n f_n) at every draw of the latent f at the training inputs."""
        return log_sig(self.labels_pm(data.y) * self._f_draws(fit), self.likelihood)

    def _check_fit(self, fit) -> int:
        """A ValueError unless ``fit`` is a Fit made with this model; the number of its training input columns."""
        if not (hasattr(fit, "model_spec") and hasattr(fit, "idata")):
            raise ValueError(f"GPC: fit must be a bayeszoo Fit (from bz.fit), got {type(fit).__name__}")
        self.check_fit(fit)
        return int(fit.idata.constant_data["X"].shape[1])

    def _checked(self, fit, X_new) -> np.ndarray:
        """``X_new`` checked against ``fit`` (made with this model, finite, as many columns as the training inputs,
        a prior variance the numerics can represent)."""
        self._check_fit(fit)
        X_new = self.check_inputs(fit, X_new)
        self.fitted(fit).check_prior_variance(X_new, "X_new")
        return X_new

    def predict_latent(self, fit, X_new):
        """GP conditional (4.7) at X_new: means (S, m) and variances (S, m) or (m,).

        Sampled fits: one row per draw f_s, mean f_s^T A, variance k** - k*^T K^-1 k* (the same for every draw).
        Gaussian approximations Q = N(m, V) (their idata group ``gaussian``: ``q_mean`` and, up to the dense-size
        limit, ``q_cov``): one exact row, mean m^T A and variance k** - k*^T K^-1 k* + diag(A^T V A), with
        A = K^-1 K*; without ``q_cov``, Q's draws as for a sampled fit. A ValueError for a fit made with another
        model (other options) and for inputs that are not finite or have the wrong number of columns.
        """
        X_new = self._checked(fit, X_new)
        X = np.asarray(fit.idata.constant_data["X"].values, dtype=float)
        A, var = gp_conditional(self.fitted(fit), X, X_new)
        if GAUSSIAN_GROUP in fit.idata.groups() and "q_cov" in fit.idata[GAUSSIAN_GROUP]:
            q = fit.idata[GAUSSIAN_GROUP]
            m, V = np.asarray(q["q_mean"].values, float), np.asarray(q["q_cov"].values, float)
            return (m @ A)[None, :], (var + np.sum(A * (V @ A), axis=0))[None, :]
        f = self._f_draws(fit)
        if f.shape[1] != X.shape[0]:
            raise ValueError(f"fit has {f.shape[1]} latent values but stores {X.shape[0]} training inputs")
        return f @ A, var

    def predict(self, fit, X_new) -> np.ndarray:
        """P(y* = 1 | x*), averaged over posterior draws of f: mean_s int sig(f*) N(f* | mu_s, s2) df* (4.7-4.8)."""
        mu, var = self.predict_latent(fit, X_new)
        return predictive_probability(mu, np.atleast_2d(var), self.likelihood).mean(0)

    def log_predict(self, fit, X_new, y_new) -> np.ndarray:
        """log P(y* | x*) of the given 0/1 labels, averaged over draws in log space (logsumexp), per point."""
        from scipy.special import logsumexp

        mu, var = self.predict_latent(fit, X_new)
        ypm = self.labels_pm(checks.finite_array("GPC", "y_new", y_new, ndim=1))
        if ypm.shape[0] != mu.shape[1]:
            raise ValueError(f"GPC: y_new has {ypm.shape[0]} labels for {mu.shape[1]} rows of X_new")
        lp = log_predictive_probability(mu, np.atleast_2d(var), self.likelihood, ypm[None, :])
        return logsumexp(lp, axis=0) - np.log(lp.shape[0])

    # ---- scoring -------------------------------------------------------------------------------------
    def score(self, fit, data: Dataset) -> dict:
        """Metrics on the test set (training set if there is none).

        ``error_rate`` / ``n_errors`` (threshold 1/2 on P(y=1)); ``log_pred`` (mean log predictive probability
        of the true label, nats); ``info_bits``: the thesis's information score
        I = B + 1/(2 n*) sum_i [(1 + y_i) log2 p_i + (1 - y_i) log2(1 - p_i)] with the baseline entropy
        B = -sum_y (n*_y / n*) log2(n_y / n) (test class frequencies against training base rate), which equals
        mean_i [log2 p(y_i) - log2 p_base(y_i)]: 0 for a predictor that outputs the training base rate, 1 bit for
        a perfect one on balanced labels; ``log_evidence`` / ``jensen_bound`` from ``fit.info`` (NaN if absent).
        """
        d = self._check_fit(fit)
        self.validate(data)
        if data.d != d:
            raise ValueError(f"GPC: dataset {data.name!r} has {data.d} input column(s), the fit was made on {d}")
        X, y = (data.X_test, data.y_test) if data.has_test else (data.X, data.y)
        p1 = self.predict(fit, X)
        log_p = self.log_predict(fit, X, y)
        out = classification_scores(p1, log_p, y, data.y)
        info = getattr(fit, "info", None) or {}
        for key in ("log_evidence", "jensen_bound"):
            value = info.get(key, np.nan)
            try:
                out[key] = float(value)
            except (TypeError, ValueError):
                out[key] = float("nan")
        return out


def classification_scores(p1, log_p_true, y, y_train) -> dict:
    """error_rate, n_errors, log_pred (nats) and info_bits (thesis §4.12) from P(y=1) and log p(true label)."""
    p1 = np.asarray(p1, dtype=float)
    y = np.asarray(y, dtype=float)
    log_p_true = np.asarray(log_p_true, dtype=float)
    errors = int(np.sum((p1 > 0.5) != (y == 1)))
    base1 = float(np.mean(np.asarray(y_train, dtype=float) == 1))
    base1 = min(max(base1, 1e-300), 1.0 - 1e-16)
    log_base = np.where(y == 1, np.log(base1), np.log1p(-base1))
    return {
        "error_rate": errors / y.size,
        "n_errors": errors,
        "log_pred": float(np.mean(log_p_true)),
        "info_bits": float(np.mean(log_p_true - log_base) / np.log(2.0)),
    }


_SINGULAR_ADVICE = {
    "se": "shorten the lengthscale (log_ell) or lower the amplitude (log_sf)",
    "se_ard": "shorten the lengthscales (log_ell_j) or lower the amplitude (log_sf)",
    "matern32": "shorten the lengthscale (log_ell) or lower the amplitude (log_sf)",
    "matern52": "shorten the lengthscale (log_ell) or lower the amplitude (log_sf)",
    "nn": "lower the amplitude (log_sf)",
    "linear": "raise log_t (a smaller prior variance) or standardise the inputs",
    "poly": "lower the amplitude (log_sf) or the offset (log_c), or standardise the inputs",
}
_VARIANCE_ADVICE = {
    "se": "lower the amplitude (log_sf, log_amplitude) or the jitter",
    "se_ard": "lower the amplitude (log_sf, log_amplitude) or the jitter",
    "matern32": "lower the amplitude (log_sf, log_amplitude) or the jitter",
    "matern52": "lower the amplitude (log_sf, log_amplitude) or the jitter",
    "nn": "lower the amplitude (log_sf, log_amplitude) or the jitter",
    "linear": "standardise the inputs (e.g. the datasets' standardize=True) or raise log_t (lower log_amplitude)",
    "poly": "standardise the inputs (e.g. the datasets' standardize=True) or lower log_sf / log_c",
}


def scale_log_lengthscale(X, kernel: str = "se") -> float:
    """The log lengthscale that ``log_lengthscale="scale"`` stands for, from the training inputs X (n, d):
    scikit-learn SVC's ``gamma="scale"``, gamma = 1 / (d var(X)) with var over every entry of X
    (``models.base.scale_spread``), in this family's parametrisation.

    ``se``, ``se_ard``, ``matern32``, ``matern52``: ell^2 = d var(X) / 2, so the SE kernel exp(-|x - x'|^2 / (2 ell^2))
    is exp(-gamma |x - x'|^2), SVC's rbf kernel (the typical squared distance between two rows, 2 d var(X), is 4
    ell^2); the Matern kernels take the same ell. ``nn``: ell^2 = d var(X), so its x.z / ell^2 is gamma x.z (as the
    RVM's ``sigmoid``). A ValueError when all rows are the same point (e.g. a single training point), or when the
    log lengthscale falls outside the [-20, 20] allowed for every log-hyperparameter (inputs far from unit scale).
    """
    setting, remedy = f"GPC: log_lengthscale={SCALE!r} sets the lengthscale", "give log_lengthscale a number"
    spread = scale_spread(X, setting, remedy)
    if 0.0 < spread < np.inf:
        log_ell = 0.5 * float(np.log(spread if kernel == "nn" else spread / 2.0))
    else:       # d var(X) under- or overflows: from its logarithm
        log_ell = 0.5 * (scale_spread(X, setting, remedy, log=True) - (0.0 if kernel == "nn" else np.log(2.0)))
    if abs(log_ell) > HYP_LIMIT:
        top = float(np.max(np.abs(np.asarray(X, dtype=float))))
        raise ValueError(f"{setting} from the training inputs (largest |x| = {top:.3g}) to log_ell = {log_ell:.4g}, "
                         f"outside [-{HYP_LIMIT:g}, {HYP_LIMIT:g}]: standardise the inputs (e.g. the datasets' "
                         f"standardize=True, or StandardScaler) or give log_lengthscale a number")
    return log_ell


def _named_hyp(model: GPC, d: int) -> str:
    """``log_ell=0.5, log_sf=1`` (-0 shown as 0)."""
    return ", ".join(f"{name}={value + 0.0:g}" for name, value in zip(model.hyp_names(d), model.hyperparameters(d)))


def _check_hyp(hyp: np.ndarray, what: str) -> None:
    hyp = np.asarray(hyp, dtype=float)
    if not np.all(np.isfinite(hyp)):
        raise ValueError(f"GPC {what} {hyp.tolist()} contains non-finite values")
    if np.any(np.abs(hyp) > HYP_LIMIT):
        raise ValueError(f"GPC {what} {hyp.tolist()} is out of range: log-hyperparameters must lie in "
                         f"[-{HYP_LIMIT:g}, {HYP_LIMIT:g}]")


# ---- likelihood and predictive integrals ------------------------------------------------------------------
def log_sig(t, likelihood: str) -> np.ndarray:
    """log sig(t): log Phi(t) (probit) or -log(1 + e^-t) (logit), stable for extreme t."""
    from scipy.special import log_ndtr, log_expit

    t = np.asarray(t, dtype=float)
    if likelihood == "probit":
        return log_ndtr(t)
    if likelihood == "logit":
        return log_expit(t)
    raise ValueError(f"likelihood must be one of {LIKELIHOODS}, got {likelihood!r}")


@functools.lru_cache(maxsize=4)
def _gh(n: int = GH_NODES):
    """Gauss-Hermite nodes and log weights for N(0, 1) (cached: computed once per node count)."""
    x, w = np.polynomial.hermite_e.hermegauss(n)   # weight exp(-x^2 / 2)
    return x, np.log(w) - 0.5 * np.log(2.0 * np.pi)


def log_predictive_probability(mu, var, likelihood: str, y_pm=1.0) -> np.ndarray:
    """log int sig(y_pm f) N(f | mu, var) df (broadcast over mu, var, y_pm).

    probit: log Phi(y_pm mu / sqrt(1 + var)) exactly; logit: Gauss-Hermite quadrature (``GH_NODES`` nodes) in
    log space. ``var`` is clipped at 0.
    """
    from scipy.special import log_ndtr, logsumexp

    mu, var, y_pm = np.broadcast_arrays(np.asarray(mu, float), np.clip(np.asarray(var, float), 0.0, None),
                                        np.asarray(y_pm, float))
    if likelihood == "probit":
        return log_ndtr(y_pm * mu / np.sqrt(1.0 + var))
    if likelihood != "logit":
        raise ValueError(f"likelihood must be one of {LIKELIHOODS}, got {likelihood!r}")
    x, logw = _gh()
    f = mu[..., None] + np.sqrt(var)[..., None] * x
    return logsumexp(log_sig(y_pm[..., None] * f, "logit") + logw, axis=-1)


def predictive_probability(mu, var, likelihood: str) -> np.ndarray:
    """P(y* = 1) = int sig(f) N(f | mu, var) df (4.8 / 4.23): Phi(mu / sqrt(1 + var)) for probit,
    Gauss-Hermite quadrature for logit. Broadcasts over ``mu`` and ``var``."""
    return np.exp(log_predictive_probability(mu, var, likelihood, 1.0))


def gp_conditional(model: GPC, X, X_new):
    """GP conditional (4.7) of f* given f at the training inputs X.

    Returns ``(A, var)`` with A = K^-1 K* (n, m), so the conditional mean for latent draws f (S, n) is
    ``f @ A``, and var = k** - diag(K*^T K^-1 K*) (m,), clipped at 0. K includes the model's jitter.
    """
    from scipy.linalg import cho_solve

    X = np.atleast_2d(np.asarray(X, dtype=float))
    X_new = np.atleast_2d(np.asarray(X_new, dtype=float))
    if X_new.shape[1] != X.shape[1]:
        raise ValueError(f"X_new has {X_new.shape[1]} columns but the training inputs have {X.shape[1]}")
    model = model.at(X)
    L = model.cholesky(X)
    Ks = model.kernel_matrix(X, X_new)
    A = cho_solve((L, True), Ks)
    var = model.kernel_diag(X_new) - np.sum(Ks * A, axis=0)
    return A, np.clip(var, 0.0, None)


# ---- exact answer of the two-point toy (Fig. 4.3) ------------------------------------------------------
TWO_POINT_X = np.array([[np.sqrt(2.0)], [-np.sqrt(2.0)]])
TWO_POINT_Y = np.array([1.0, 0.0])


def two_point_exact_moments(model: GPC, X=None, y=None, panels: int = 120, order: int = 10, half_width: float = 9.0):
    """Exact posterior mean (2,), covariance (2, 2) of f and log evidence log Z for a two-point problem.

    Default data: the Fig. 4.3 toy x = (sqrt 2, -sqrt 2), y = (1, 0) (thesis: y = (+1, -1)). The integrals
    int g(f) N(f | 0, K) prod_i sig(y_i f_i) df are computed in the prior's whitened coordinates f = L z by a
    tensor-product composite Gauss-Legendre rule on [-half_width, half_width]^2 (``panels`` panels of ``order``
    nodes per axis; the Gaussian mass outside is < 1e-18). With the defaults the moments are accurate to
    ~1e-10 as long as the likelihood's transition width in z, ~ 1 / max|L|, spans a few nodes (sf up to ~e^3).
    """
    from scipy.special import logsumexp

    X = TWO_POINT_X if X is None else np.atleast_2d(np.asarray(X, dtype=float))
    y = TWO_POINT_Y if y is None else np.asarray(y, dtype=float)
    if X.shape[0] != 2 or y.shape != (2,):
        raise ValueError("two_point_exact_moments needs exactly two points")
    ypm = GPC.labels_pm(y)
    L = model.cholesky(X)
    g, gw = np.polynomial.legendre.leggauss(order)
    edges = np.linspace(-half_width, half_width, panels + 1)
    h = np.diff(edges)[0]
    z = (edges[:-1, None] + 0.5 * h * (g[None, :] + 1.0)).ravel()
    logw = (np.log(0.5 * h * gw)[None, :] + np.zeros((panels, 1))).ravel() - 0.5 * z**2 - 0.5 * np.log(2 * np.pi)
    z1, z2 = z[:, None], z[None, :]
    f1 = L[0, 0] * z1 + 0.0 * z2
    f2 = L[1, 0] * z1 + L[1, 1] * z2
    logp = (logw[:, None] + logw[None, :] + log_sig(ypm[0] * f1, model.likelihood)
            + log_sig(ypm[1] * f2, model.likelihood))
    log_Z = float(logsumexp(logp))
    w = np.exp(logp - log_Z)
    m = np.array([np.sum(w * f1), np.sum(w * f2)])
    d1, d2 = f1 - m[0], f2 - m[1]
    c12 = np.sum(w * d1 * d2)
    cov = np.array([[np.sum(w * d1**2), c12], [c12, np.sum(w * d2**2)]])
    return m, cov, log_Z


def _tiny():
    """16 points in 2-D, labelled by the sign of the first input plus noise."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((16, 2))
    y = (X[:, 0] + 0.3 * rng.standard_normal(16) > 0).astype(int)
    return GPC(), Dataset(X=X, y=y, name="tiny_gpc", meta={"task": "classification"})


FAMILY = Family(model=GPC, about="Gaussian process classification",
                source="Nickisch PhD thesis ch. 4",
                tiny=_tiny,
                datasets=("gpc_data",), benchmarks=("bench_gpc",), gallery="gpc")
