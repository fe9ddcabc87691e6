"""Exact random draws the JAX samplers share (jittable, vmappable, float64).

``jax.random.truncated_normal`` inverts the CDF in double precision and returns the largest float for lower
bounds beyond about 8 (its tail is lost), which a Gibbs sampler does reach: a chain whose latent f starts far
on the wrong side of its label. The one-sided draw here is exact at every bound:

* bound a <= A_SWITCH: inversion on the upper tail, x = -Phi^-1(u Phi(-a)); Phi(-a) >= 1/2 there, so nothing
  underflows and u in (0, 1) keeps x finite;
* bound a > A_SWITCH: Robert's (1995) translated-exponential rejection sampler, proposal a + Exp(lam) with the
  optimal rate lam = (a + sqrt(a^2 + 4)) / 2, accepted with probability exp(-(x - lam)^2 / 2) (acceptance
  above 0.76 for every a >= 0, tending to 1 as a grows). All elements loop together until each has accepted.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtr, ndtri

A_SWITCH = 0.0
_TINY = float(np.finfo(float).tiny)


def _uniform(key, shape):
    """Uniforms in (0, 1): never exactly 0, so logs and inverse CDFs stay finite."""
    return jax.random.uniform(key, shape, dtype=jnp.float64, minval=_TINY, maxval=1.0)


def std_normal_above(key, a):
    """x ~ N(0, 1) truncated to x > a, elementwise over ``a`` (any shape, -inf allowed)."""
    a = jnp.asarray(a, dtype=jnp.float64)
    k_inv, k_rej = jax.random.split(key)
    x_inv = -ndtri(_uniform(k_inv, a.shape) * ndtr(-a))

    a_pos = jnp.maximum(a, A_SWITCH)
    lam = 0.5 * (a_pos + jnp.sqrt(a_pos * a_pos + 4.0))
    need = a > A_SWITCH

    def cond(state):
        return jnp.any(state[2])

    def body(state):
        k, x, pending = state
        k, k_e, k_u = jax.random.split(k, 3)
        prop = a_pos - jnp.log(_uniform(k_e, a.shape)) / lam
        accept = jnp.log(_uniform(k_u, a.shape)) <= -0.5 * (prop - lam) ** 2
        take = pending & accept
        return k, jnp.where(take, prop, x), pending & ~accept

    _, x_rej, _ = jax.lax.while_loop(cond, body, (k_rej, a_pos, need))
    return jnp.where(need, x_rej, x_inv)


def normal_sign_truncated(key, mean, sign):
    """z ~ N(mean, 1) truncated to sign * z > 0 (sign in {-1, +1}), elementwise: the Albert-Chib latent."""
    sign = jnp.asarray(sign, dtype=jnp.float64)
    return mean + sign * std_normal_above(key, -sign * mean)
