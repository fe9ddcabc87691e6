"""Exact random draws the NumPy samplers share, each from a ``numpy.random.Generator``.

Truncated normals invert the CDF in log space (``scipy.special.ndtri_exp``), which stays exact in the far tail
that a Gibbs sampler does reach (a chain whose latent starts far on the wrong side of its label): the plain inverse
CDF in double precision returns the largest float for bounds beyond about 8.

Polya-Gamma PG(h, c) draws come from the ``polyagamma`` package. Its default method for h = 1 (Devroye's) returns
0.16 instead of about 1 / (4 |c|) for |c| above about 150 (polyagamma 2.0; the tests check the moments there), so
h = 1 uses the package's alternating-series method, exact at every c.
"""
from __future__ import annotations

import numpy as np
from scipy.special import log_ndtr, ndtri_exp


def truncnorm_above(rng: np.random.Generator, mean, lower):
    """Draws from N(mean, 1) truncated to (lower, inf), elementwise."""
    a = np.asarray(lower, float) - mean
    u = rng.random(np.shape(a))
    # x = -Phi^-1(u Phi(-a)): the upper tail of the standard normal, stable for any a
    return mean - ndtri_exp(log_ndtr(-a) + np.log(u))


def truncnorm_below(rng: np.random.Generator, mean, upper):
    """Draws from N(mean, 1) truncated to (-inf, upper), elementwise."""
    b = np.asarray(upper, float) - mean
    u = rng.random(np.shape(b))
    return mean + ndtri_exp(log_ndtr(b) + np.log(u))


def normal_sign_truncated(rng: np.random.Generator, mean, sign):
    """z ~ N(mean, 1) truncated to sign * z > 0 (sign in {-1, +1}), elementwise: the Albert-Chib latent."""
    mean = np.asarray(mean, float)
    sign = np.asarray(sign, float)
    return mean + sign * (truncnorm_above(rng, 0.0, -sign * mean))


def polya_gamma(rng: np.random.Generator, h: float, c):
    """PG(h, c) draws, elementwise over ``c`` (module docstring for the method)."""
    from polyagamma import random_polyagamma

    method = "alternate" if h == 1 else None
    return random_polyagamma(h, np.asarray(c, float), method=method, random_state=rng)
