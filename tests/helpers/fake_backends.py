"""Fake RVM backends for the grid, report and CLI tests (importable by Dask workers).

Importing this module registers, for the ``rvm`` family:

``fake_ok``     mcmc: AR(1) draws around a ridge solution, seeded (same seed, same draws);
``fake_vb``     approximation: i.i.d. draws plus an ``elbo`` objective trace;
``fake_em``     approximation: point-estimated log_alpha, the bases in ``RELEVANT`` kept, the others pruned;
``fake_fail``   always raises ``RuntimeError("fake backend exploded")``;
``fake_flaky``  raises the first time it sees a given ``marker`` file path, then behaves like ``fake_ok``.
``fake_nan``    returns one NaN among its draws.

Every backend takes an optional ``log`` option: a file that gets one line ``<backend> <seed>`` per call,
so tests can count calls made in other processes.
"""
from __future__ import annotations

import os
import time

import numpy as np

from bayeszoo import registry
from bayeszoo.checks import NON_NEGATIVE, Text
from bayeszoo.results import build_fit

FAIL_MESSAGE = "fake backend exploded"


def _log(log, name, seed):
    if log:
        with open(log, "a") as fh:
            fh.write(f"{name} {seed}\n")


def _ridge(model, data):
    Phi = model.design(data.X, data.X)
    M = Phi.shape[1]
    target = data.y if not model.is_classifier else 4.0 * (data.y - 0.5)
    return np.linalg.solve(Phi.T @ Phi + 1e-2 * np.eye(M), Phi.T @ target)


def _draws(model, data, chains, draws, seed, rho):
    rng = np.random.default_rng(seed)
    w0 = _ridge(model, data)
    M = w0.size
    eps = rng.standard_normal((chains, draws, M + 1))
    z = np.empty_like(eps)
    z[:, 0] = eps[:, 0]
    for t in range(1, draws):
        z[:, t] = rho * z[:, t - 1] + np.sqrt(1 - rho**2) * eps[:, t]
    out = {"w": w0 + 0.05 * z[..., :M], "log_alpha": np.broadcast_to(-2 * np.log(np.abs(w0) + 1e-3),
                                                                    (chains, draws, M)).copy()}
    if not model.is_classifier:
        out["log_beta"] = np.log(100.0) + 0.1 * z[..., M]
    return out


_LOG = {"log": registry.Option(None, "file to which each call appends its backend name and seed", Text(none=True))}


@registry.register("fake_ok", kind="mcmc", family="rvm", description="fake AR(1) sampler for tests",
                   options={**_LOG, "sleep": registry.Option(0.0, "seconds to wait before returning", NON_NEGATIVE)})
def fake_ok(model, data, *, draws, tune, chains, seed, progress, log=None, sleep=0.0, name="fake_ok"):
    _log(log, name, seed)
    start = time.perf_counter()
    if sleep:
        time.sleep(sleep)
    post = _draws(model, data, chains, draws, seed, rho=0.5)
    stats = {"diverging": np.zeros((chains, draws), dtype=bool)}
    stats["diverging"][0, 0] = True  # one divergence, so the report has something to flag
    return build_fit(model, data, name, "mcmc", post, sample_stats=stats,
                    timing={"sample": time.perf_counter() - start + 0.01}, info={"calls": 1, "seed": seed})


@registry.register("fake_vb", kind="approximation", family="rvm", description="fake variational fit for tests",
                   options=_LOG)
def fake_vb(model, data, *, draws, tune, chains, seed, progress, log=None):
    _log(log, "fake_vb", seed)
    post = _draws(model, data, chains, draws, seed + 1, rho=0.0)
    elbo = -100.0 - 50.0 * np.exp(-0.3 * np.arange(40))
    return build_fit(model, data, "fake_vb", "approximation", post, objective={"elbo": elbo},
                    timing={"sample": 0.005}, info={"iterations": 40, "converged": True})


RELEVANT = (0, 3, 7, 12)  # bases kept by fake_em (0 is the bias column when the model has one)


@registry.register("fake_em", kind="approximation", family="rvm", description="fake type-II fit for tests",
                   options=_LOG)
def fake_em(model, data, *, draws, tune, chains, seed, progress, log=None):
    from bayeszoo.models.rvm import LOG_ALPHA_PRUNED

    _log(log, "fake_em", seed)
    post = _draws(model, data, chains, draws, seed + 2, rho=0.0)
    M = post["w"].shape[-1]
    log_alpha = np.full(M, LOG_ALPHA_PRUNED)
    log_alpha[list(RELEVANT)] = 0.0
    post["log_alpha"] = np.broadcast_to(log_alpha, (chains, draws, M)).copy()
    post["w"][..., log_alpha >= LOG_ALPHA_PRUNED] = 0.0
    return build_fit(model, data, "fake_em", "approximation", post, objective={"log_evidence": -np.geomspace(90, 30, 25)},
                    timing={"sample": 0.002}, info={"iterations": 25, "converged": True})


@registry.register("fake_fail", kind="mcmc", family="rvm", description="a backend that always fails",
                   options=_LOG)
def fake_fail(model, data, *, draws, tune, chains, seed, progress, log=None):
    _log(log, "fake_fail", seed)
    raise RuntimeError(FAIL_MESSAGE)


@registry.register("fake_flaky", kind="mcmc", family="rvm", description="fails on its first call",
                   options={**_LOG, "marker": registry.Option(None, "file path: the first call that finds it missing creates it and fails",
                                                      Text(none=True))})
def fake_flaky(model, data, *, draws, tune, chains, seed, progress, log=None, marker=None):
    if marker is not None and not os.path.exists(marker):
        _log(log, "fake_flaky", seed)
        open(marker, "w").close()
        raise RuntimeError("interrupted (first attempt)")
    return fake_ok(model, data, draws=draws, tune=tune, chains=chains, seed=seed, progress=progress, log=log,
                   name="fake_flaky")


@registry.register("fake_nan", kind="mcmc", family="rvm", description="returns a NaN among its draws",
                   options=_LOG)
def fake_nan(model, data, *, draws, tune, chains, seed, progress, log=None):
    _log(log, "fake_nan", seed)
    post = _draws(model, data, chains, draws, seed, rho=0.5)
    post["w"][0, 3, 1] = np.nan
    return build_fit(model, data, "fake_nan", "mcmc", post, timing={"sample": 0.01})


def calls(log) -> list[str]:
    """Backend names in the call log, one per call."""
    if not os.path.exists(log):
        return []
    with open(log) as fh:
        return [line.split()[0] for line in fh if line.strip()]
