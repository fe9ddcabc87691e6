"""A second, independent RVM regression Gibbs sampler for the SBC and reference-builder tests, whose w-step can be
made deliberately wrong.

The sweep is the textbook one (w | alpha, beta Gaussian; alpha_i | w and beta | w Gamma), written here apart from
``inference/rvm/gibbs.py``; ``variance_factor`` multiplies the covariance of the w-step, so 1 is exact and 2 is the
bug of a conditional variance doubled. ``registered(name, variance_factor)`` registers it for the ``rvm`` family
through ``bayeszoo.registry.register`` for the length of a ``with`` block and removes it afterwards.
"""
from __future__ import annotations

import contextlib
import time
from typing import NamedTuple

import numpy as np
from scipy.linalg import cho_solve, solve_triangular

from bayeszoo import registry
from bayeszoo.checks import Interval
from bayeszoo.inference import chains as driver
from bayeszoo.registry import Option

OPTIONS = {"fix_alpha": Option(None, "hold every alpha_i at this value; None: sample them",
                               Interval(float, 0, None, "neither", none=True)),
           "fix_beta": Option(None, "hold beta at this value; None: sample it", Interval(float, 0, None, "neither",
                                                                                        none=True))}


class State(NamedTuple):
    w: np.ndarray
    alpha: np.ndarray
    beta: float


class Info(NamedTuple):
    sq_residual: float    # |t - Phi w|^2 after the sweep


def kernel(Phi, t, hyper, variance_factor: float, fix_alpha, fix_beta) -> driver.Kernel:
    a, b, c, d = hyper
    N, M = Phi.shape
    G, Pt = Phi.T @ Phi, Phi.T @ t

    def init(rng, _):
        alpha = np.full(M, fix_alpha) if fix_alpha is not None else rng.gamma(a, 1.0 / b, M)
        beta = fix_beta if fix_beta is not None else rng.gamma(c, 1.0 / d)
        return State(np.zeros(M), alpha, float(beta))

    def step(rng, state):
        alpha, beta = state.alpha, state.beta
        L = np.linalg.cholesky(beta * G + np.diag(alpha))
        mean = cho_solve((L, True), beta * Pt)
        w = mean + np.sqrt(variance_factor) * solve_triangular(L.T, rng.standard_normal(M), lower=False)
        if fix_alpha is None:
            alpha = rng.gamma(a + 0.5, 1.0 / (b + 0.5 * w * w))
        rr = float(np.sum((t - Phi @ w) ** 2))
        if fix_beta is None:
            beta = float(rng.gamma(c + 0.5 * N, 1.0 / (d + 0.5 * rr)))
        return State(w, alpha, beta), Info(rr)

    def position(state):
        return {"w": state.w, "log_alpha": np.log(state.alpha), "log_beta": np.log(state.beta)}

    return driver.Kernel(init=init, step=step, position=position)


@contextlib.contextmanager
def registered(name: str, variance_factor: float):
    """Backend ``name`` of the ``rvm`` family for the block: this sampler with the w-step's covariance times
    ``variance_factor``."""

    def run(model, data, *, draws, tune, chains: int, ctx, fix_alpha, fix_beta):
        start = time.perf_counter()
        Phi = model.training_design(data)
        sampler = kernel(Phi, np.asarray(data.y, float), (model.a, model.b, model.c, model.d), variance_factor,
                         fix_alpha, fix_beta)
        result = driver.sample(sampler, None, ctx, draws=draws, tune=tune, chains=chains)
        return driver.chains_fit(model, data, result, ctx=ctx, setup=time.perf_counter() - start)

    registry.register(name, kind="mcmc", family="rvm", options=OPTIONS, applies=lambda m: not m.is_classifier,
                      description=f"test Gibbs sampler, w-step covariance x {variance_factor}")(run)
    try:
        yield name
    finally:
        registry._FAMILY.pop(("rvm", name), None)
