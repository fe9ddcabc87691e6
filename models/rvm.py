"""Relevance vector machine (Tipping 2001; Tzikas MSc thesis ch. 2-3; Tzikas, Likas, Galatsanos 2009).

    t_n = sum_i w_i phi_i(x_n) + eps_n,   eps_n ~ N(0, 1/beta)            (regression)
    P(t_n = 1) = link(sum_i w_i phi_i(x_n))                              (classification, logit or probit)
    w_i | alpha_i ~ N(0, 1/alpha_i),  alpha_i ~ Gamma(a, b),  beta ~ Gamma(c, d)   (shape, rate)

The basis is one kernel per training point plus an optional bias column [T 2.2]: Phi is N x (N + 1).
Canonical posterior variables written by every backend: ``w`` and ``log_alpha`` over ``basis`` and, for
regression, the scalar ``log_beta``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bayeszoo.datasets import Dataset
from bayeszoo.models.base import Model

KERNELS = ("gauss", "poly", "sigmoid", "bspline", "linear")
TASKS = ("regression", "classification")
LINKS = ("logit", "probit")
LOG_ALPHA_PRUNED = float(np.log(1e12))  # alpha above 1e12 counts as pruned ([P] step 4); stored at this value


def kernel_matrix(X1, X2, kernel: str = "gauss", width: float = 1.0, degree: int = 2, offset: float = 1.0):
    """K(x1, x2) for the kernels of [T 1.38-1.42]; Gaussian in the [P 63] parametrisation exp(-|x-m|^2 / h^2)."""
    X1 = np.atleast_2d(np.asarray(X1, dtype=float))
    X2 = np.atleast_2d(np.asarray(X2, dtype=float))
    if kernel in ("gauss", "bspline"):
        sq = (np.sum(X1**2, 1)[:, None] + np.sum(X2**2, 1)[None, :] - 2.0 * X1 @ X2.T).clip(min=0.0)
        if kernel == "gauss":
            return np.exp(-sq / width**2)
        return _bspline3(np.sqrt(sq) / width)
    inner = X1 @ X2.T
    if kernel == "linear":
        return inner
    if kernel == "poly":
        return (inner + offset) ** degree          # inhomogeneous polynomial [T 1.41]; offset 0 gives [T 1.38]
    if kernel == "sigmoid":
        return np.tanh(inner / width + offset)      # tanh(k <x1, x2> + theta) [T 1.40] with k = 1 / width
    raise ValueError(f"unknown kernel {kernel!r}; choose one of {KERNELS}")


def _bspline3(r):
    """Cubic B-spline B_3 (the 4-fold convolution of the unit box), evaluated at distance r [T 1.42, p = 1]."""
    r = np.abs(r)
    out = np.where(r < 1.0, 2.0 / 3.0 - r**2 + r**3 / 2.0, 0.0)
    return np.where((r >= 1.0) & (r < 2.0), (2.0 - r) ** 3 / 6.0, out)


@dataclass
class RVM(Model):
    """Relevance vector machine for regression or binary classification.

    Parameters
    ----------
    task : {"regression", "classification"}
    kernel : {"gauss", "poly", "sigmoid", "bspline", "linear"}
        Basis functions centred on the training inputs.
    width : float
        Kernel width h of exp(-|x - x_n|^2 / h^2) ([P 63]); scale for ``bspline`` and ``sigmoid``.
    degree, offset : polynomial kernel (<x1,x2> + offset)^degree; ``offset`` is also the sigmoid's theta.
    bias : bool
        Add a constant basis function (column 0 of Phi).
    link : {"logit", "probit"}
        Classification link. The sources use the logistic link; the Gibbs sampler needs probit (Albert-Chib).
    a, b : Gamma(shape a, rate b) hyperprior on each weight precision alpha_i.
    c, d : Gamma(shape c, rate d) hyperprior on the noise precision beta (regression).
        The sources' a = b = c = d = 0 is improper and cannot be sampled; these small positive defaults keep
        every backend on one proper model.
    """

    task: str = "regression"
    kernel: str = "gauss"
    width: float = 1.0
    degree: int = 2
    offset: float = 1.0
    bias: bool = True
    link: str = "logit"
    a: float = 1e-4
    b: float = 1e-4
    c: float = 1e-4
    d: float = 1e-4

    family = "rvm"

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"RVM task must be one of {TASKS}, got {self.task!r}")
        if self.kernel not in KERNELS:
            raise ValueError(f"RVM kernel must be one of {KERNELS}, got {self.kernel!r}")
        if self.link not in LINKS:
            raise ValueError(f"RVM link must be one of {LINKS}, got {self.link!r}")
        if not (np.isfinite(self.width) and self.width > 0):
            raise ValueError(f"RVM width must be a positive number, got {self.width!r}")
        for name in ("a", "b", "c", "d"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"RVM hyperparameter {name} must be > 0 (a proper Gamma prior), got {value!r}")

    @property
    def is_classifier(self) -> bool:
        return self.task == "classification"

    @property
    def compare_vars(self) -> tuple[str, ...]:
        # log_alpha of a pruned basis is +inf under type-II ML, so means / sds are compared on w (and noise).
        return ("w",) if self.is_classifier else ("w", "log_beta")

    # ---- data ----------------------------------------------------------------------------------------
    def validate(self, data: Dataset) -> None:
        super().validate(data)
        if self.is_classifier:
            for what, y in (("y", data.y), ("y_test", data.y_test)):
                labels = np.unique(y)
                if not np.all(np.isin(labels, (0.0, 1.0))):
                    raise ValueError(f"RVM classification needs binary labels 0/1 in {what}; "
                                     f"got values {labels[:10].tolist()}")
            if np.unique(data.y).size < 2:
                raise ValueError("RVM classification needs both classes (0 and 1) in the training labels")
        elif data.task in ("classification", "multiclass"):
            raise ValueError(f"dataset {data.name!r} is a {data.task} problem; use RVM(task='classification')")
        if self.is_classifier and data.task == "regression":
            raise ValueError(f"dataset {data.name!r} is a regression problem; use RVM(task='regression')")

    def design(self, X_new, centers) -> np.ndarray:
        """Design matrix Phi (n_new x M): [1, K(x, x_1), ..., K(x, x_N)] with the bias column first."""
        K = kernel_matrix(X_new, centers, self.kernel, self.width, self.degree, self.offset)
        if self.bias:
            K = np.column_stack([np.ones(K.shape[0]), K])
        return K

    def n_basis(self, data: Dataset) -> int:
        return data.n + int(self.bias)

    def var_dims(self, data: Dataset) -> dict[str, tuple[str, ...]]:
        dims = {"w": ("basis",), "log_alpha": ("basis",)}
        if not self.is_classifier:
            dims["log_beta"] = ()
        return dims

    def coords(self, data: Dataset) -> dict[str, np.ndarray]:
        return {"basis": np.arange(self.n_basis(data)), "obs": np.arange(data.n)}

    def constant_data(self, data: Dataset) -> dict:
        return {"X": data.X}
