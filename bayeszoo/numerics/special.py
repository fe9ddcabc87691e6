"""Densities and special functions shared by the PyMC and NumPyro declarations of several families.

``log_gamma_logpdf`` / ``pm_log_gamma`` / ``log_gamma_numpyro``: a Gamma(shape, rate) variable declared on the log
scale (u = log x, Jacobian included), the form every hyperparameter of the RVM, PMKL and image RVM takes.
``pt_log_ndtr``: log Phi for PyTensor, stable in both tails (probit likelihoods of GPC, RVM and PMKL).
``pt_logsumexp``: log-sum-exp for PyTensor whose gradient is stable too.
"""
from __future__ import annotations

import functools

import numpy as np


def log_gamma_logpdf(u, shape, rate):
    """log density of u = log(x), x ~ Gamma(shape, rate): shape*log(rate) - lgamma(shape) + shape*u - rate*e^u."""
    from scipy.special import gammaln

    return shape * np.log(rate) - gammaln(shape) + shape * u - rate * np.exp(u)


def pm_log_gamma(name, shape, rate, dims=None):
    import pymc as pm
    import pytensor.tensor as pt
    from scipy.special import gammaln

    const = float(shape * np.log(rate) - gammaln(shape))

    def logp(u, shape, rate):
        return const + shape * u - rate * pt.exp(u)

    def random(shape_, rate_, size):
        # log Gamma(a) = log Gamma(a + 1) + log(U) / a: stable when the shape a is tiny
        return (pt.log(pm.Gamma.dist(alpha=shape_ + 1.0, beta=rate_, size=size))
                + pt.log(pm.Uniform.dist(0.0, 1.0, size=size)) / shape_)

    def support_point(rv, size, shape_, rate_):
        return pt.full_like(rv, np.log(shape / rate))  # log of the prior mean

    return pm.CustomDist(name, float(shape), float(rate), logp=logp, dist=random, support_point=support_point,
                         dims=dims)


def pt_log_ndtr(x):
    """log Phi(x) for PyTensor, stable in both tails (erfcx below -1, log1p of the upper tail above)."""
    import pytensor.tensor as pt

    s = np.sqrt(0.5)
    # each branch sees only its own range: switch differentiates both, and an overflowing unused branch
    # (erfcx(-x) for large x) would turn the gradient into NaN
    x_lo, x_hi = pt.minimum(x, -1.0), pt.maximum(x, -1.0)
    lower = pt.log(0.5 * pt.erfcx(-x_lo * s)) - 0.5 * x_lo**2
    upper = pt.log1p(-0.5 * pt.erfc(x_hi * s))
    return pt.switch(pt.lt(x, -1.0), lower, upper)


def pt_logsumexp(x, axis=None, keepdims=False):
    """log(sum(exp(x))) for PyTensor with the maximum taken out explicitly. ``pt.logsumexp`` leaves that to a
    rewrite of the forward graph, so its gradient, exp(x) / sum(exp(x)), is 0 / 0 = NaN wherever every term
    underflows (a data point whose likelihood is below 1e-308 under a wide ADVI draw, say)."""
    import pytensor.tensor as pt
    from pytensor.gradient import zero_grad

    # the shift's own derivative cancels exactly, so it is held constant
    shift = zero_grad(pt.max(x, axis=axis, keepdims=True))
    shift = pt.switch(pt.isinf(shift), 0.0, shift)
    out = pt.log(pt.sum(pt.exp(x - shift), axis=axis, keepdims=True)) + shift
    return out if keepdims else (pt.squeeze(out, axis=axis) if axis is not None else out.squeeze())


@functools.lru_cache(maxsize=None)
def log_gamma_numpyro():
    """The NumPyro LogGamma distribution class (built on first use so importing models does not import JAX)."""
    import jax
    import jax.numpy as jnp
    import numpyro.distributions as dist
    from jax.scipy.special import gammaln
    from numpyro.distributions import constraints
    from numpyro.distributions.util import promote_shapes

    class LogGamma(dist.Distribution):
        """u = log(x) with x ~ Gamma(concentration, rate): the Gamma pushed through log (Jacobian included)."""

        arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
        support = constraints.real
        reparametrized_params = []

        def __init__(self, concentration, rate, *, validate_args=None):
            self.concentration, self.rate = promote_shapes(concentration, rate)
            batch_shape = jax.lax.broadcast_shapes(jnp.shape(concentration), jnp.shape(rate))
            super().__init__(batch_shape=batch_shape, validate_args=validate_args)

        def sample(self, key, sample_shape=()):
            k1, k2 = jax.random.split(key)
            shape = sample_shape + self.batch_shape
            g = jax.random.gamma(k1, self.concentration + 1.0, shape) / self.rate
            u = jax.random.uniform(k2, shape, minval=jnp.finfo(float).tiny)
            return jnp.log(g) + jnp.log(u) / self.concentration

        def log_prob(self, value):
            a, b = self.concentration, self.rate
            return a * jnp.log(b) - gammaln(a) + a * value - b * jnp.exp(value)

    return LogGamma
