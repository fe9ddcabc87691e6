"""Nickisch thesis §5.5, Fig. 5.2: random against designed measurements of synthetic sparse signals.

Protocol (digest §6.4): u in R^512 of one of the six signal types of Fig. 5.2 (``bz.datasets.slm_signal``), B = I,
noise variance sigma2 = 0.005, prior scale tau = 5; every method starts from the same m0 = 40 random unit-norm
measurements and adds rows up to 180:

* ``L2 (rand)``, ``L1 (rand)``, ``BCS (rand)``: the same random unit-norm rows (uniform on the sphere) added;
  L2 is the posterior mean under a unit-variance Gaussian prior (the signals have unit variance; the thesis's
  minimum-norm interpolant is its vague-prior limit), L1 the MAP of the Laplace SLM (``map``), BCS sparse Bayesian
  learning (``sbl``, ARD type-II; Ji & Carin 2007);
* ``<backend>* (opt)``: each new row the free unit-norm filter of largest information gain under the Laplace
  SLM's Gaussian approximation (``bz.design.sequential_design``; the thesis uses EP, ``design_backend`` says which
  approximation is used here), reconstructed by that approximation's posterior mean.

The score is the reconstruction error ||E[u] - u||_2 (``SLM.score``'s ``l2_error``) at each of ``checkpoints``
measurements, one row per (signal, run, method, m) in the returned DataFrame. Public API only.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

import bayeszoo as bz
from bayeszoo.datasets.slm_data import SIGNALS

#: method -> (prior, backend, options); the double loop is exact on Gaussian potentials (one outer iteration)
RANDOM_METHODS = {"L2 (rand)": ("gaussian", "dloop", {"exact_variances": True}), "L1 (rand)": ("laplace", "map", {}),
                  "BCS (rand)": ("laplace", "sbl", {})}


def _models(tau: float, sigma2: float) -> dict:
    return {"gaussian": bz.models.SLM(potential="gaussian", tau=1.0, sigma2=sigma2),
            "laplace": bz.models.SLM(potential="laplace", tau=tau, sigma2=sigma2)}


def _first(data, m: int):
    """The data set of the first ``m`` measurements."""
    return bz.datasets.Dataset(X=data.X[:m], y=data.y[:m], name=data.name, meta=data.meta)


def _error(model, data, backend, seed, options=None) -> float:
    fit = bz.fit(model, data, backend, seed=seed, progress=False, **(options or {}))
    return model.score(fit, data)["l2_error"]


def run(kinds=SIGNALS, *, n: int = 512, m0: int = 40, checkpoints=(40, 80, 120, 160, 180), runs: int = 1,
        tau: float = 5.0, sigma2: float = 0.005, design_backend: str = "ep", design_options: dict | None = None,
        refit_every: int = 1, seed: int = 0, progress: bool = True) -> pd.DataFrame:
    """The Fig. 5.2 comparison (module docstring); columns ``signal, run, method, m, l2_error``."""
    checkpoints = sorted(int(m) for m in checkpoints)
    if not checkpoints or checkpoints[0] < m0:
        raise ValueError(f"checkpoints must be measurement counts of at least m0 = {m0}, got {checkpoints}")
    models = _models(tau, sigma2)
    laplace = models["laplace"]
    m_max = checkpoints[-1]
    rows = []
    for kind in kinds:
        for r in range(runs):
            run_seed = seed + 1000 * r
            # m_max random rows: the first m0 are every method's start, the rest the random arm's additions
            data = bz.datasets.load("slm_signal", kind=kind, n=n, m=m_max, sigma2=sigma2, seed=run_seed)
            for method, (prior, backend, options) in RANDOM_METHODS.items():
                for m in checkpoints:
                    err = _error(models[prior], _first(data, m), backend, run_seed, options)
                    rows.append({"signal": kind, "run": r, "method": method, "m": m, "l2_error": err})
            true_u = np.asarray(data.meta["true_u"], dtype=float)
            noise = np.random.default_rng([run_seed, 5])
            designed = bz.design.sequential_design(
                laplace, _first(data, m0), lambda X: X @ true_u + np.sqrt(sigma2) * noise.standard_normal(len(X)),
                m_max - m0, backend=design_backend, options=design_options, refit_every=refit_every, seed=run_seed,
                progress=progress)
            for m in checkpoints:
                err = _error(laplace, _first(designed.data, m), design_backend, run_seed, design_options)
                rows.append({"signal": kind, "run": r, "method": f"{design_backend}* (opt)", "m": m, "l2_error": err})
    return pd.DataFrame(rows)


def summary(results: pd.DataFrame) -> pd.DataFrame:
    """Mean (and sd over runs) of the error per signal, method and number of measurements, wide by m."""
    agg = results.groupby(["signal", "method", "m"])["l2_error"].agg(["mean", "std"]).reset_index()
    return agg.pivot_table(index=["signal", "method"], columns="m", values="mean")
