"""Fake generic backends for the benchmark tests: exact draws of an exact target (``bz.catalogue.exact``), at a
declared gradient cost, so that a benchmark's ranking has a known answer and runs without compiling anything.

``register()`` registers (as a user would, ``bz.register_backend``); the tests' ``fake_samplers`` fixture (conftest)
does, and takes them away again afterwards:

``iid_exact``    the target's exact draws, ``n_grad`` = chains x draws;
``iid_costly``   the same draws at four times the gradient cost;
``iid_biased``   exact draws shifted by one sd in every component: never reaches a target;
``iid_broken``   raises ``RuntimeError(BROKEN)``.

Every one appends ``<backend> <model name> <seed>`` to the file named by ``BZ_FAKE_LOG`` when that is set, so a
test counts the calls made in other processes.
"""
from __future__ import annotations

import os

import numpy as np

import bayeszoo as bz
from bayeszoo.catalogue import exact
from bayeszoo.results import build_fit

BROKEN = "fake sampler broke"
NAMES = ("iid_exact", "iid_costly", "iid_biased", "iid_broken")


def _log(name, model, seed):
    path = os.environ.get("BZ_FAKE_LOG")
    if path:
        with open(path, "a") as fh:
            fh.write(f"{name} {model.name} {seed}\n")


def _exact_fit(name, model, data, draws, chains, seed, cost, shift=0.0):
    _log(name, model, seed)
    target = exact.target(model.name)
    values = target.draw(np.random.default_rng(seed), chains * draws)
    moments = target.moments()
    post = {}
    for var, shape in target.shapes.items():
        v = np.asarray(values[var], float).reshape(chains, draws, *shape)
        post[var] = v + shift * np.asarray(moments[var]["sd"], float)
    return build_fit(model, data, name, "approximation", post, timing={"sample": 1e-3 * cost},
                     info={"n_grad": int(cost * chains * draws), "converged": True}, library="user")


def register():
    def iid_exact(model, data, *, draws, tune, chains, seed, progress):
        return _exact_fit("iid_exact", model, data, draws, chains, seed, cost=1)

    def iid_costly(model, data, *, draws, tune, chains, seed, progress):
        return _exact_fit("iid_costly", model, data, draws, chains, seed, cost=4)

    def iid_biased(model, data, *, draws, tune, chains, seed, progress):
        return _exact_fit("iid_biased", model, data, draws, chains, seed, cost=1, shift=1.0)

    def iid_broken(model, data, *, draws, tune, chains, seed, progress):
        _log("iid_broken", model, seed)
        raise RuntimeError(BROKEN)

    for fn in (iid_exact, iid_costly, iid_biased, iid_broken):
        bz.register_backend(fn.__name__, fn, kind="approximation", description=f"test fake {fn.__name__}",
                            defaults={"draws": 1000, "tune": 0, "chains": 2}, replace=True)

