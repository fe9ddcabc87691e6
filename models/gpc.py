"""Binary Gaussian-process classification (Nickisch thesis ch. 4; Rasmussen & Williams ch. 3).

    f ~ GP(0, k_theta),  P(y_n = 1 | f_n) = sig(f_n),  sig = Phi (probit, "cumulative Gaussian") or logistic (logit)

Hyperparameters theta are on the log scale as in the thesis (e.g. log lengthscale, log amplitude sigma_f) and
are held fixed during inference of f; type-II maximum likelihood and grid studies choose them.
Canonical posterior variable written by every backend: ``f`` over ``obs`` (the latent values at the training
inputs). Labels are 0/1 in the Dataset (+1/-1 in the thesis's formulas: y_pm = 2 y - 1).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bayeszoo.datasets import Dataset
from bayeszoo.models.base import Model

LIKELIHOODS = ("probit", "logit")


@dataclass
class GPC(Model):
    """Skeleton being filled in: see the module docstring."""

    likelihood: str = "probit"
    kernel: str = "se"
    log_lengthscale: float = 0.0
    log_amplitude: float = 0.0
    jitter: float = 1e-8

    family = "gpc"
    compare_vars = ("f",)

    def __post_init__(self):
        if self.likelihood not in LIKELIHOODS:
            raise ValueError(f"GPC likelihood must be one of {LIKELIHOODS}, got {self.likelihood!r}")

    def var_dims(self, data: Dataset) -> dict[str, tuple[str, ...]]:
        return {"f": ("obs",)}

    def coords(self, data: Dataset) -> dict[str, np.ndarray]:
        return {"obs": np.arange(data.n)}
