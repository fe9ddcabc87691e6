"""The PMKL thesis's cross-validation protocols (Damoulas thesis Tables 4.3-4.4 and 5.2-5.3)."""
from __future__ import annotations

import numpy as np

import bayeszoo as bz
from bayeszoo.datasets import Dataset
from bayeszoo.models import PMKL


def thesis_cv(model: PMKL, data: Dataset, backend: str = "vb", *, repeats: int = 1, folds: int = 10, seed: int = 0,
              metrics=("error_rate", "pred_lik", "n_relevant"), **kwargs) -> dict:
    """The thesis's protocols: 10-fold cross-validation (``repeats=1``, Tables 4.3-4.4) or 10 x 10-fold
    (``repeats=10``, Tables 5.2-5.3). Returns ``{metric: (mean, sd)}`` over all folds, plus ``seconds``
    (mean, sd of the fit time per fold); extra keyword arguments go to :func:`bayeszoo.cross_validate`."""
    res = bz.cross_validate(model, data, backend, folds=folds, repeats=repeats, seed=seed, **kwargs)
    return {k: (float(np.mean(res[k])), float(np.std(res[k], ddof=1)))
            for k in (*metrics, "seconds") if k in res}
