"""posteriordb's time-series programs in PyMC and NumPyro: ``arK``, ``arma11``, ``garch11``.

The recursions of the Stan programs run step for step as Stan's loops in NumPyro (``jax.lax.scan``). In PyMC the
moving-average error of ARMA(1, 1) and GARCH(1, 1)'s conditional variance, each a linear recursion with one factor,
are convolutions with the powers of that factor (``-theta``, ``beta1``) instead (:func:`linear_recursion_pytensor`);
GARCH's ``beta1``, bounded by ``1 - alpha1``, is sampled as ``beta1_share`` of that interval in both libraries.
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
    import pytensor.tensor as pt

    y = np.asarray(data["y"], dtype=float)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 10.0)
        phi = pm.Normal("phi", 0.0, 2.0)
        theta = pm.Normal("theta", 0.0, 2.0)
        sigma = pm.HalfCauchy("sigma", 2.5)
        # Stan's loop: err[t] = y[t] - (mu + phi y[t - 1] + theta err[t - 1]), err[1] = y[1] - (mu + phi mu)
        first = y[0] - (mu + phi * mu)
        known = y[1:] - mu - phi * y[:-1]
        err = linear_recursion_pytensor(first, pt.concatenate([pt.atleast_1d(first), known]), -theta)
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


def linear_recursion_pytensor(first, drive, factor):
    """``x[0] = first``, ``x[i] = drive[i] + factor * x[i - 1]`` for i = 1..n-1, without a loop:
    ``x[i] = sum_{j <= i} factor^(i - j) x0[j]``, the first n terms of the convolution of the powers of ``factor``
    with ``x0`` (``drive`` with ``first`` in front). ``factor`` of either sign: its powers are integer powers.

    A ``pytensor.scan`` calls its body's few ops one at a time at every step, forward and in the gradient (3 ms a
    gradient on garch11's 200 steps, 50 times arK's); the convolution is one op, in C, whose gradient is two more.
    """
    import pytensor.tensor as pt
    from pytensor.tensor.signal import convolve1d

    n = drive.type.shape[0]
    # the zeroth power a constant: x ** 0's derivative, 0 * x ** -1, is NaN at x = 0 (arma11's starting theta)
    powers = pt.concatenate([pt.ones((1,)), factor ** np.arange(1, n, dtype=float)])
    return convolve1d(powers, pt.concatenate([pt.atleast_1d(first), drive[1:]]), mode="full")[:n]


def _garch11_pymc(data):
    import pymc as pm
    import pytensor.tensor as pt

    y, sigma1 = np.asarray(data["y"], dtype=float), float(data["sigma1"])
    with pm.Model() as model:
        mu = pm.Flat("mu")
        alpha0 = pm.HalfFlat("alpha0")
        alpha1 = pm.Uniform("alpha1", 0.0, 1.0)
        # Stan's beta1 is flat on (0, 1 - alpha1). Sampled as its share of that interval, flat on (0, 1), with the
        # Jacobian 1 - alpha1: the same unconstrained space and density as a Uniform(0, 1 - alpha1) beta1, whose
        # bound on another variable PyMC cannot turn into the chains' starting points
        beta1_share = pm.Uniform("beta1_share", 0.0, 1.0)
        beta1 = pm.Deterministic("beta1", beta1_share * (1 - alpha1))
        pm.Potential("beta1_jacobian", pt.log1p(-alpha1))
        # Stan's loop: sigma[t]^2 = alpha0 + alpha1 (y[t - 1] - mu)^2 + beta1 sigma[t - 1]^2, sigma[1] = sigma1
        drive = alpha0 + alpha1 * (y[:-1] - mu) ** 2
        later = linear_recursion_pytensor(drive[0] + beta1 * sigma1 ** 2, drive, beta1)
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
        # as in PyMC: beta1 as its share of (0, 1 - alpha1), with the Jacobian (NumPyro's MCMC reports an improper
        # uniform on this moving interval with the bound of its first point: alpha1 + beta1 reached 1.6)
        beta1_share = numpyro.sample("beta1_share", dist.Uniform(0.0, 1.0))
        beta1 = numpyro.deterministic("beta1", beta1_share * (1 - alpha1))
        numpyro.factor("beta1_jacobian", jnp.log1p(-alpha1))

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
