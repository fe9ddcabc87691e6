"""Sparse linear models (Nickisch thesis ch. 3, 5, 6): a Gaussian likelihood and super-Gaussian potentials.

    P(u | y) ∝ N(y | X u, sigma2 I) prod_j T_j(s_j),   s = B u,   u in R^n, X in R^(m x n), B in R^(q x n)

with T_j from :mod:`bayeszoo.numerics.potentials` (Laplace, Student's t, logistic, Gaussian; Table 3.1) and B a
named operator of :mod:`bayeszoo.numerics.operators`. Canonical posterior variable written by every backend: ``u``
over ``coef``.

The data set carries the measurements: ``X`` (m x n) is the measurement (design) matrix, one row per measurement,
one column per entry of u, ``y`` (m,) the measurements; ``X_test`` / ``y_test`` are held-out measurements. ``meta``
may hold

``u_shape``      the shape of u ((rows, cols) for an image; ``(n,)`` when absent), which ``tv`` and ``wavelet`` need;
``true_u``       the signal that was measured, so ``score`` reports the reconstruction error;
``X_operator``   a JSON-able operator spec (:func:`bayeszoo.numerics.operators.from_spec`) equal to ``X``, which the
                 backends use for fast products (e.g. Fourier sampling) instead of the dense matrix;
``B``            the matrix B (q x n) when the model's ``B`` option is ``"meta"``;
``labels``       the labels c_j = +-1 of the potentials (q,) when ``potential="sigmoid"``: Bayesian logistic
                 regression (§3.7) is the SLM with X = I, y = 0 (the Gaussian prior N(0, sigma2 I)), the feature
                 vectors as the rows of B and T_j(s_j) = sigmoid(c_j tau s_j).

Shared helpers for the backends (use these rather than re-deriving them):

``SLM.signal_shape(data)``            shape of u;
``SLM.operator_X(data)``, ``SLM.operator_B(data)``   PyLops operators (from ``X_operator`` / the option ``B``);
``SLM.dense_X(data)``, ``SLM.dense_B(data)``         their matrices (small problems);
``SLM.taus(data)``                    tau per potential (q,): ``tau``, and ``tau_tv`` on the finite-difference rows;
``SLM.potentials(data)``              the :class:`~bayeszoo.numerics.potentials.Potential` with that tau vector;
``SLM.log_joint(u, data)``            ln N(y | X u, sigma2 I) + sum_j ln T_j(s_j), unnormalised, for u (..., n);
``SLM.gaussian_posterior(data)``      exact mean and covariance when ``potential="gaussian"``.
"""
from __future__ import annotations

import functools
from typing import ClassVar

from dataclasses import dataclass
from operator import index as operator_index

import numpy as np

from bayeszoo import checks, datasets
from bayeszoo.datasets import Dataset
from bayeszoo.models.base import Model
from bayeszoo.models.family import Family
from bayeszoo.numerics import operators
from bayeszoo.numerics.potentials import POTENTIALS, Potential

B_CHOICES = operators.NAMES + ("meta",)
#: largest n of the PyMC / NumPyro declarations (dense X and B in the graph): the samplers are for small problems
DECLARATION_LIMIT = 1024
#: largest n for which validate checks the rank of [X; B] densely (above it only named operators are accepted)
RANK_CHECK_LIMIT = 3000
MAX_MAGNITUDE = 1e100   # largest |X| and |y|: their squares and sums of squares must stay finite


@dataclass
class SLM(Model):
    """Sparse linear model: y = X u + noise (variance ``sigma2``), potentials T_j on s = B u.

    Parameters
    ----------
    potential : {"laplace", "student", "logistic", "gaussian", "sigmoid"}
        T(s) = ``exp(-tau |s|)``, (1 + tau s^2 / nu)^(-(nu+1)/2), cosh(tau s)^-2 or exp(-tau s^2 / 2) (Table 3.1);
        ``sigmoid``: the likelihood 1 / (1 + exp(-c_j tau s)) of a label c_j = +-1 (``data.meta["labels"]``),
        whose posterior the Gaussian part must normalise alone (X of full column rank).
    tau : float
        Scale of the potentials (rate for Laplace / logistic, precision for Student's t / Gaussian).
    tau_tv : float or None
        Scale of the finite-difference (TV) potentials when ``B`` contains ``tv`` (None: ``tau``); the thesis's
        L1+TV uses tau_W = tau_D = 0.075, its EP tau_W = 0.075, tau_D = 0.5 (§5.5).
    nu : float
        Degrees of freedom of Student's t.
    sigma2 : float
        Noise variance (known, as in the thesis's experiments: 0.005 in §5.5).
    B : {"identity", "tv", "wavelet", "wavelet+tv", "meta"}
        The operator s = B u (``wavelet+tv``: the orthonormal Daubechies-4 W stacked over the finite differences D,
        the B = [W; D] of (5.2)); ``meta``: the matrix ``data.meta["B"]``.
    wavelet_level : int or None
        Depth of the wavelet transform (None: :func:`bayeszoo.numerics.operators.default_level`).

    Inputs (docs/families/slm.md, "Inputs"): a regression data set whose columns are the entries of u, finite, and a
    posterior that can be normalised: [X; B] must have full column rank (``tv`` alone leaves the mean of u to the
    measurements).
    """

    potential: str = "laplace"
    tau: float = 1.0
    tau_tv: float | None = None
    nu: float = 3.0
    sigma2: float = 1.0
    B: str = "identity"
    wavelet_level: int | None = None

    family = "slm"
    _parameter_constraints: ClassVar[dict] = {
        "potential": checks.OneOf(POTENTIALS), "tau": checks.POSITIVE, "tau_tv": [checks.POSITIVE, None],
        "nu": checks.POSITIVE, "sigma2": checks.POSITIVE, "B": checks.OneOf(B_CHOICES),
        "wavelet_level": [checks.POSITIVE_INT, None]}
    example_data = "slm_signal"
    compare_vars = ("u",)
    reference_advice: ClassVar[str] = (
        "SLM: the scale-mixture gibbs backend is exact for Laplace, Student's t and logistic potentials and "
        "mixes well at small n; with NUTS, raise target_accept to 0.95; a sharp potential (large tau) or a "
        "tiny sigma2 makes the posterior hard for both (docs/families/slm.md).")

    # ---- the operators ---------------------------------------------------------------------------------
    @staticmethod
    def signal_shape(data: Dataset) -> tuple[int, ...]:
        """Shape of u: ``meta["u_shape"]``, or (n,) with n the number of columns of X."""
        shape = data.meta.get("u_shape")
        if shape is None:
            return (data.d,)
        try:        # a nested list or a string is a wrong shape, not a TypeError from int()
            shape = tuple(operator_index(v) for v in np.atleast_1d(shape).tolist())
        except TypeError:
            raise ValueError(f"SLM dataset {data.name!r}: meta['u_shape'] must be a tuple of one or two positive "
                             f"integers, got {shape!r}") from None
        if len(shape) not in (1, 2) or min(shape) < 1 or int(np.prod(shape)) != data.d:
            raise ValueError(f"SLM dataset {data.name!r}: meta['u_shape'] = {shape} does not hold the {data.d} "
                             f"columns of X (one per entry of u)")
        return shape

    def _b_spec(self):
        if self.B == "wavelet" and self.wavelet_level is not None:
            return {"kind": "wavelet", "level": self.wavelet_level}
        if self.B == "wavelet+tv" and self.wavelet_level is not None:
            return [{"kind": "wavelet", "level": self.wavelet_level}, "tv"]
        return self.B

    def operator_B(self, data: Dataset):
        """s = B u as a PyLops operator (q x n)."""
        shape = self.signal_shape(data)
        if self.B != "meta":
            return operators.from_spec(self._b_spec(), shape)
        if "B" not in data.meta:
            raise ValueError(f"SLM(B='meta') needs the matrix B in data.meta['B'], which dataset {data.name!r} lacks")
        Bm = checks.finite_array("SLM", "data.meta['B']", data.meta["B"], ndim=2, columns=data.d, min_rows=1)
        return operators.matrix(Bm)

    def operator_X(self, data: Dataset):
        """The measurement operator: ``meta["X_operator"]`` when given (checked against X), else the matrix X."""
        spec = data.meta.get("X_operator")
        if spec is None:
            return operators.matrix(data.X)
        op = operators.from_spec(spec, self.signal_shape(data))
        if op.shape != data.X.shape:
            raise ValueError(f"SLM dataset {data.name!r}: meta['X_operator'] has shape {op.shape}, X has {data.X.shape}")
        probe = np.random.default_rng(0).standard_normal(data.d)
        if not np.allclose(op @ probe, data.X @ probe, rtol=1e-8, atol=1e-10 * np.linalg.norm(data.X)):
            raise ValueError(f"SLM dataset {data.name!r}: meta['X_operator'] does not equal the matrix X")
        return op

    def dense_X(self, data: Dataset) -> np.ndarray:
        return np.asarray(data.X, dtype=float)

    def dense_B(self, data: Dataset) -> np.ndarray:
        return operators.to_dense(self.operator_B(data))

    def taus(self, data: Dataset) -> np.ndarray:
        """tau per potential (q,): ``tau_tv`` (when set) on the finite-difference rows, ``tau`` elsewhere."""
        q = self.operator_B(data).shape[0]
        tau = np.full(q, self.tau)
        if self.tau_tv is not None and self.B in ("tv", "wavelet+tv"):
            n_tv = operators.difference_matrix(self.signal_shape(data)).shape[0]
            tau[q - n_tv:] = self.tau_tv       # the differences are the last rows of [W; D]
        return tau

    def labels(self, data: Dataset) -> np.ndarray | None:
        """The labels c_j = +-1 of the sigmoid potentials (``meta["labels"]``, q values); None for the others."""
        if self.potential != "sigmoid":
            return None
        q = self.operator_B(data).shape[0]
        if "labels" not in data.meta:
            raise ValueError(f"SLM(potential='sigmoid') needs the labels c_j = +-1 of its {q} potentials in "
                             f"data.meta['labels'], which dataset {data.name!r} lacks")
        c = checks.finite_array("SLM", "data.meta['labels']", data.meta["labels"]).ravel()
        if c.size != q or not np.all(np.isin(c, (-1.0, 1.0))):
            raise ValueError(f"SLM: data.meta['labels'] must hold one label -1 or +1 per row of B ({q}), got "
                             f"{c.size} values" + ("" if c.size != q else f" including {sorted(set(c.tolist()) - {-1.0, 1.0})}"))
        return c

    def potentials(self, data: Dataset) -> Potential:
        """The potentials T_j(s_j), vectorised over j (tau from :meth:`taus`, labels from :meth:`labels`)."""
        return Potential(self.potential, self.taus(data), self.nu, self.labels(data))

    # ---- data ------------------------------------------------------------------------------------------
    def validate(self, data: Dataset) -> None:
        super().validate(data)
        if data.task not in (None, "regression"):
            raise ValueError(f"SLM needs measurements: a regression data set (X = measurement matrix, y = "
                             f"measurements), e.g. bz.datasets.load('slm_signal'); dataset {data.name!r} is a "
                             f"{data.task!r} problem")
        for what, A in (("X", data.X), ("y", data.y), ("X_test", data.X_test), ("y_test", data.y_test)):
            top = float(np.max(np.abs(A))) if A.size else 0.0
            if top > MAX_MAGNITUDE:
                raise ValueError(f"SLM: {what} reaches {top:.3g} in magnitude (limit {MAX_MAGNITUDE:g}); rescale it")
        shape = self.signal_shape(data)
        if self.B in ("tv", "wavelet+tv") and int(np.prod(shape)) < 2:
            raise ValueError("SLM: finite differences (B='tv') need at least two unknowns")
        B = self.operator_B(data)                      # wavelet sizes, meta['B'] shape and finiteness
        self.operator_X(data)
        self._check_normalisable(data, B)

    def _check_normalisable(self, data: Dataset, B) -> None:
        """Every potential but the sigmoid likelihood is integrable, so the posterior is proper exactly when no
        direction of u escapes both the measurements and the potentials: [X; B] of full column rank. Sigmoid
        potentials are bounded, not integrable: X alone must have full column rank."""
        if self.potential == "sigmoid":
            self.labels(data)
            rank = np.linalg.matrix_rank(np.asarray(data.X, dtype=float)) if data.d <= RANK_CHECK_LIMIT else None
            if rank is None or rank < data.d:
                raise ValueError(f"SLM(potential='sigmoid'): sigmoid potentials are not integrable, so the Gaussian "
                                 f"part must normalise the posterior alone, but X has rank "
                                 f"{'unchecked (n > %d)' % RANK_CHECK_LIMIT if rank is None else rank} < n = "
                                 f"{data.d}; for logistic regression use X = I and y = 0 (the prior N(0, sigma2 I))")
            return
        if self.B in ("identity", "wavelet", "wavelet+tv"):
            return                                    # B itself has full column rank (W is orthonormal)
        X = np.asarray(data.X, dtype=float)
        if self.B == "tv":                            # the differences miss the constant image only
            ones = np.ones(data.d) / np.sqrt(data.d)
            if np.linalg.norm(X @ ones) <= 1e-10 * max(np.linalg.norm(X), 1e-300):
                raise ValueError("SLM: the posterior is not normalisable: finite differences (B='tv') leave the mean "
                                 "of u free and the measurements X do not see it (X @ 1 = 0); add a measurement of "
                                 "the mean or use B='wavelet+tv'")
            return
        if data.d > RANK_CHECK_LIMIT:
            raise ValueError(f"SLM(B='meta') checks that [X; B] has full column rank densely, up to n = "
                             f"{RANK_CHECK_LIMIT}; this problem has n = {data.d}: use a named operator")
        M = np.vstack([X, self.dense_B(data)])
        rank = np.linalg.matrix_rank(M)
        if rank < data.d:
            raise ValueError(f"SLM: the posterior is not normalisable: [X; B] has rank {rank} < n = {data.d}, so "
                             f"{data.d - rank} direction(s) of u are seen by neither the measurements nor the "
                             f"potentials; add measurements or rows to B")

    def var_dims(self, data: Dataset) -> dict[str, tuple[str, ...]]:
        return {"u": ("coef",)}

    def coords(self, data: Dataset) -> dict[str, np.ndarray]:
        return {"coef": np.arange(data.d), "obs": np.arange(data.n)}

    def constant_data(self, data: Dataset) -> dict:
        return {"X": data.X}

    # ---- densities -------------------------------------------------------------------------------------
    def log_joint(self, u, data: Dataset) -> np.ndarray:
        """ln N(y | X u, sigma2 I) + sum_j ln T_j((B u)_j) without constants, for u of shape (..., n)."""
        u = np.asarray(u, dtype=float)
        flat = u.reshape(-1, data.d)
        B = self.operator_B(data)
        X = self.operator_X(data)
        pot = self.potentials(data)
        out = np.array([-0.5 * np.sum((X @ v - data.y) ** 2) / self.sigma2 + np.sum(pot.log_t(B @ v)) for v in flat])
        return out.reshape(u.shape[:-1])

    def gaussian_posterior(self, data: Dataset):
        """Exact posterior N(m, V) for ``potential="gaussian"``: V^-1 = X^T X / sigma2 + B^T diag(tau) B,
        m = V X^T y / sigma2 (2.8)."""
        if self.potential != "gaussian":
            raise ValueError("the posterior is Gaussian only for potential='gaussian'")
        X, B = self.dense_X(data), self.dense_B(data)
        P = X.T @ X / self.sigma2 + B.T @ (self.taus(data)[:, None] * B)
        V = np.linalg.inv(P)
        V = 0.5 * (V + V.T)
        return V @ (X.T @ data.y) / self.sigma2, V

    def _declaration_arrays(self, data: Dataset):
        self.validate(data)
        if data.d > DECLARATION_LIMIT:
            raise ValueError(f"SLM declarations hold X and B densely and are for small problems (n <= "
                             f"{DECLARATION_LIMIT}); this one has n = {data.d}: use the map, sbl or gibbs backends")
        return self.dense_X(data), self.dense_B(data), np.asarray(data.y, dtype=float), self.potentials(data)

    def pymc_model(self, data: Dataset):
        """The SLM in PyMC: ``u`` flat over ``coef`` with the potentials sum_j ln T_j((B u)_j) added as a Potential,
        y ~ N(X u, sigma2)."""
        import pymc as pm
        import pytensor.tensor as pt

        X, B, y, pot = self._declaration_arrays(data)
        with pm.Model(coords=self.coords(data)) as model:
            u = pm.Flat("u", dims="coef")
            pm.Potential("potentials", pt.sum(pot.log_t(pt.dot(B, u), xp=pt)))
            pm.Normal("y", mu=pt.dot(X, u), sigma=float(np.sqrt(self.sigma2)), observed=y, dims="obs")
        return model

    def numpyro_model(self, data: Dataset):
        """The same joint density as :meth:`pymc_model`, as a NumPyro model function of no arguments (its data
        bound by ``functools.partial``: :class:`~bayeszoo.models.base.Model`)."""
        import jax.numpy as jnp
        import numpyro
        import numpyro.distributions as dist

        X_np, B_np, y_np, pot = self._declaration_arrays(data)
        n, sigma = data.d, float(np.sqrt(self.sigma2))

        def model(X, B, y):
            X, B, y = jnp.asarray(X), jnp.asarray(B), jnp.asarray(y)
            # a flat density on u: N(0, I) cancelled by a factor, so tools that trace the model by sampling it
            # (which ImproperUniform refuses) work too
            base = dist.Normal(0.0, 1.0).expand([n]).to_event(1)
            u = numpyro.sample("u", base)
            numpyro.factor("flat", -base.log_prob(u))
            numpyro.factor("potentials", jnp.sum(pot.log_t(B @ u, xp=jnp)))
            numpyro.sample("y", dist.Normal(X @ u, sigma).to_event(1), obs=y)

        return functools.partial(model, X=X_np, B=B_np, y=y_np)

    # ---- prediction and scores ---------------------------------------------------------------------------
    def posterior_mean(self, fit) -> np.ndarray:
        """E[u] (n,): the exact mean of a Gaussian approximation (``q_mean`` of the fit's ``gaussian`` group:
        ``ep``, ``dloop``, ``sbl``), else the average of the fit's draws."""
        self.check_fit(fit)
        if fit.kind == "approximation" and "gaussian" in fit.idata.groups():
            return np.asarray(fit.idata["gaussian"]["q_mean"].values, dtype=float)
        u = np.asarray(fit.idata.posterior["u"].values, dtype=float)
        return u.reshape(-1, u.shape[-1]).mean(0)

    def log_likelihood(self, fit, data: Dataset) -> np.ndarray | None:
        """log N(y_i | (X u)_i, sigma2) of every measurement at every draw (None without measurements: the
        sigmoid potentials' labels then carry the likelihood, inside the prior-times-likelihood product)."""
        if data.y.size == 0:
            return None
        u = np.asarray(fit.idata.posterior["u"].values, dtype=float).reshape(-1, data.d)
        Xu = np.asarray(self.operator_X(data) @ u.T).T
        return -0.5 * np.log(2.0 * np.pi * self.sigma2) - 0.5 * (np.asarray(data.y, float) - Xu) ** 2 / self.sigma2

    def predict(self, fit, X_new) -> np.ndarray:
        """Posterior mean of the measurements X_new u (X_new: rows of measurement filters, n columns)."""
        self.check_fit(fit)
        X_new = self.check_inputs(fit, X_new)
        return X_new @ self.posterior_mean(fit)

    def score(self, fit, data: Dataset) -> dict:
        """``mse`` of the predicted measurements on the test set (training set if none); with ``meta["true_u"]``
        also ``l2_error`` = ||E[u] - u|| (the thesis's reconstruction error, §5.5) and, unless u = 0, ``rel_error`` =
        ||E[u] - u|| / ||u||."""
        self.validate(data)
        self.check_fit(fit)
        if int(fit.idata.constant_data["X"].shape[1]) != data.d:
            raise ValueError(f"SLM: dataset {data.name!r} has n = {data.d} unknowns, the fit was made with "
                             f"{int(fit.idata.constant_data['X'].shape[1])}")
        X, y = (data.X_test, data.y_test) if data.has_test else (data.X, data.y)
        mean = self.posterior_mean(fit)
        out = {"mse": float(np.mean((X @ mean - y) ** 2))}
        if "true_u" in data.meta:
            true_u = checks.finite_array("SLM", "meta['true_u']", data.meta["true_u"]).ravel()
            if true_u.size != data.d:
                raise ValueError(f"SLM: meta['true_u'] has {true_u.size} entries for n = {data.d}")
            top = float(np.max(np.abs(true_u)))
            if top > MAX_MAGNITUDE:
                raise ValueError(f"SLM: meta['true_u'] reaches {top:.3g} in magnitude (limit {MAX_MAGNITUDE:g}); "
                                 f"rescale it")
            err = _norm(mean - true_u)
            out["l2_error"] = err
            if top > 0:         # relative to a zero signal the error is undefined
                with np.errstate(over="ignore"):
                    out["rel_error"] = float(np.float64(err) / _norm(true_u))
        return out


def _norm(v) -> float:
    """||v||_2 without overflow or underflow of the squares (np.linalg.norm squares the entries)."""
    top = float(np.max(np.abs(v))) if np.size(v) else 0.0
    return top * float(np.linalg.norm(v / top)) if top > 0 else 0.0


FAMILY = Family(model=SLM, about="sparse linear models: Laplace, Student's t and other potentials",
                source="Nickisch PhD thesis ch. 3, 5, 6",
                tiny=lambda: (SLM(tau=2.0, sigma2=0.05),
                              datasets.load("slm_signal", kind="spikes", n=12, m=10, sigma2=0.05, seed=0)),
                datasets=("slm_data",), benchmarks=("bench_slm",), gallery="slm")
