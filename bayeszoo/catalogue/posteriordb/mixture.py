"""posteriordb's mixture program in PyMC and NumPyro: ``low_dim_gauss_mix``.

Stan's ``log_mix(theta, normal_lpdf(y | mu[1], sigma[1]), normal_lpdf(y | mu[2], sigma[2]))`` is the density of
a two-component normal mixture with weights (theta, 1 - theta): ``pm.NormalMixture`` and NumPyro's
``MixtureSameFamily``, the component marginalised as in Stan. ``mu`` is ordered with a normal(0, 2) prior on each
component (PyMC's ordered transform on the normal; in NumPyro an improper ordered vector plus the prior).
"""
from __future__ import annotations

import numpy as np

from bayeszoo.catalogue.posteriordb.programs import Program, register


def _low_dim_gauss_mix_pymc(data):
    import pymc as pm
    import pytensor.tensor as pt
    from pymc.distributions.transforms import ordered

    y = np.asarray(data["y"], dtype=float)
    with pm.Model() as model:
        # a start inside the constraint (the prior's mean [0, 0] is not strictly ordered)
        mu = pm.Normal("mu", 0.0, 2.0, shape=2, transform=ordered, initval=np.array([-1.0, 1.0]))
        sigma = pm.HalfNormal("sigma", 2.0, shape=2)
        theta = pm.Beta("theta", 5.0, 5.0)
        pm.NormalMixture("y", w=pt.stack([theta, 1 - theta]), mu=mu, sigma=sigma, observed=y)
    return model


def _low_dim_gauss_mix_numpyro(data):
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from numpyro.distributions import constraints

    y = np.asarray(data["y"], dtype=float)

    def model():
        mu = numpyro.sample("mu", dist.ImproperUniform(constraints.ordered_vector, (), (2,)))
        numpyro.factor("mu_prior", dist.Normal(0, 2).log_prob(mu).sum())
        sigma = numpyro.sample("sigma", dist.HalfNormal(2).expand([2]).to_event(1))
        theta = numpyro.sample("theta", dist.Beta(5, 5))
        mixing = dist.Categorical(probs=jnp.stack([theta, 1 - theta]))
        numpyro.sample("y", dist.MixtureSameFamily(mixing, dist.Normal(mu, sigma)).expand([len(y)]).to_event(1),
                       obs=y)

    return model


register(Program("low_dim_gauss_mix", "mixture", _low_dim_gauss_mix_pymc, _low_dim_gauss_mix_numpyro))
