"""posteriordb's time-series programs in PyMC and NumPyro: ``arK``, ``arma11``, ``garch11``.

The recursions of the Stan programs (the moving-average error of ARMA(1, 1), the conditional variance of
GARCH(1, 1)) run as a ``pytensor.scan`` in PyMC and a ``jax.lax.scan`` in NumPyro, step for step as Stan's loops.
Stan's ``err ~ normal(0, sigma)`` of ``arma11`` is the density of ``y`` given its one-step prediction
``nu = y - err`` (the map from ``y`` to ``err`` is triangular with a unit diagonal), so ``y`` is the observed
variable in both libraries.
"""
from __future__ import annotations

import numpy as np

from bayeszoo.catalogue.posteriordb.programs import Program, register


def _lags(y: np.ndarray, K: int) -> np.ndarray:
    """Row ``i`` holds ``y[K + i - k]`` for ``k = 1..K``: the regressors of ``y[K + i]`` in arK's loop."""
    return np.column_stack([y[K - k:len(y) - k] for k in range(1, K + 1)])


def _ark_pymc(data):
    import pymc as pm

    K, y = int(data["K"]), np.asarray(data["y"], dtype=float)
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0.0, 10.0)
        beta = pm.Normal("beta", 0.0, 10.0, shape=K)
        sigma = pm.HalfCauchy("sigma", 2.5)
        pm.Normal("y", alpha + pm.math.dot(_lags(y, K), beta), sigma, observed=y[K:])
    return model


def _ark_numpyro(data):
    import numpyro
    import numpyro.distributions as dist

    K, y = int(data["K"]), np.asarray(data["y"], dtype=float)
    lags = _lags(y, K)

    def model():
        alpha = numpyro.sample("alpha", dist.Normal(0, 10))
        beta = numpyro.sample("beta", dist.Normal(0, 10).expand([K]).to_event(1))
        sigma = numpyro.sample("sigma", dist.HalfCauchy(2.5))
        numpyro.sample("y", dist.Normal(alpha + lags @ beta, sigma).to_event(1), obs=y[K:])

    return model


def _arma11_pymc(data):
    import pymc as pm
    import pytensor
    import pytensor.tensor as pt

    y = np.asarray(data["y"], dtype=float)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 10.0)
        phi = pm.Normal("phi", 0.0, 2.0)
        theta = pm.Normal("theta", 0.0, 2.0)
        sigma = pm.HalfCauchy("sigma", 2.5)
        first = y[0] - (mu + phi * mu)   # err[1], with err[0] = 0
        later = pytensor.scan(lambda known, err, theta: known - theta * err,
                              sequences=[y[1:] - mu - phi * y[:-1]], outputs_info=[first], non_sequences=[theta],
                              return_updates=False)
        err = pt.concatenate([pt.atleast_1d(first), later])
        pm.Normal("y", y - err, sigma, observed=y)
    return model


def _arma11_numpyro(data):
    import jax
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    y = np.asarray(data["y"], dtype=float)

    def model():
        mu = numpyro.sample("mu", dist.Normal(0, 10))
        phi = numpyro.sample("phi", dist.Normal(0, 2))
        theta = numpyro.sample("theta", dist.Normal(0, 2))
        sigma = numpyro.sample("sigma", dist.HalfCauchy(2.5))
        first = y[0] - (mu + phi * mu)

        def step(err, known):
            err = known - theta * err
            return err, err

        _, later = jax.lax.scan(step, first, y[1:] - mu - phi * y[:-1])
        err = jnp.concatenate([jnp.atleast_1d(first), later])
        numpyro.sample("y", dist.Normal(y - err, sigma).to_event(1), obs=y)

    return model


def _garch11_pymc(data):
    import pymc as pm
    import pytensor
    import pytensor.tensor as pt

    y, sigma1 = np.asarray(data["y"], dtype=float), float(data["sigma1"])
    with pm.Model() as model:
        mu = pm.Flat("mu")
        alpha0 = pm.HalfFlat("alpha0")
        alpha1 = pm.Uniform("alpha1", 0.0, 1.0)
        # Stan's beta1 is flat on (0, 1 - alpha1): the uniform's 1 / (1 - alpha1) is taken back out
        beta1 = pm.Uniform("beta1", 0.0, 1 - alpha1)
        pm.Potential("beta1_flat", pt.log1p(-alpha1))
        later = pytensor.scan(lambda shock, var, alpha0, alpha1, beta1: alpha0 + alpha1 * shock + beta1 * var,
                              sequences=[(y[:-1] - mu) ** 2], outputs_info=[pt.as_tensor(np.float64(sigma1 ** 2))],
                              non_sequences=[alpha0, alpha1, beta1], return_updates=False)
        sigma = pt.concatenate([[sigma1], pt.sqrt(later)])
        pm.Normal("y", mu, sigma, observed=y)
    return model


def _garch11_numpyro(data):
    import jax
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from numpyro.distributions import constraints

    y, sigma1 = np.asarray(data["y"], dtype=float), float(data["sigma1"])

    def model():
        mu = numpyro.sample("mu", dist.ImproperUniform(constraints.real, (), ()))
        alpha0 = numpyro.sample("alpha0", dist.ImproperUniform(constraints.positive, (), ()))
        alpha1 = numpyro.sample("alpha1", dist.Uniform(0, 1))
        # as in PyMC: the uniform with its 1 / (1 - alpha1) taken back out (NumPyro's MCMC reports an improper
        # uniform on this moving interval with the bound of its first point: alpha1 + beta1 reached 1.6)
        beta1 = numpyro.sample("beta1", dist.Uniform(0.0, 1 - alpha1))
        numpyro.factor("beta1_flat", jnp.log1p(-alpha1))

        def step(var, shock):
            var = alpha0 + alpha1 * shock + beta1 * var
            return var, var

        _, later = jax.lax.scan(step, jnp.asarray(sigma1 ** 2), (y[:-1] - mu) ** 2)
        sigma = jnp.concatenate([jnp.array([sigma1]), jnp.sqrt(later)])
        numpyro.sample("y", dist.Normal(mu, sigma).to_event(1), obs=y)

    return model


register(Program("arK", "time series", _ark_pymc, _ark_numpyro))
register(Program("arma11", "time series", _arma11_pymc, _arma11_numpyro))
register(Program("garch11", "time series", _garch11_pymc, _garch11_numpyro))
