"""posteriordb's hierarchical models in PyMC and NumPyro (see :mod:`.programs` for the rules they keep)."""
from __future__ import annotations

import numpy as np

from bayeszoo.catalogue.posteriordb.programs import Program, register


# ---- eight_schools_noncentered.stan ----------------------------------------------------------------------------
# parameters: vector[J] theta_trans; real mu; real<lower=0> tau;   theta = theta_trans * tau + mu
# model: theta_trans ~ normal(0, 1); y ~ normal(theta, sigma); mu ~ normal(0, 5); tau ~ cauchy(0, 5)
def _eight_schools_pymc(data: dict):
    import pymc as pm

    J = int(data["J"])
    with pm.Model() as model:
        theta_trans = pm.Normal("theta_trans", 0.0, 1.0, shape=J)
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)     # cauchy on <lower=0>: the half-Cauchy up to a constant
        theta = pm.Deterministic("theta", theta_trans * tau + mu)
        pm.Normal("y", theta, np.asarray(data["sigma"], float), observed=np.asarray(data["y"], float))
    return model


def _eight_schools_numpyro(data: dict):
    import numpyro
    import numpyro.distributions as dist

    J, y, sigma = int(data["J"]), np.asarray(data["y"], float), np.asarray(data["sigma"], float)

    def eight_schools_noncentered():
        theta_trans = numpyro.sample("theta_trans", dist.Normal(0.0, 1.0).expand([J]))
        mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
        tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
        theta = numpyro.deterministic("theta", theta_trans * tau + mu)
        numpyro.sample("y", dist.Normal(theta, sigma), obs=y)

    return eight_schools_noncentered


register(Program("eight_schools_noncentered", "hierarchical", _eight_schools_pymc, _eight_schools_numpyro))
