"""Nickisch thesis §5.5, Fig. 5.4: measurement designs and reconstructions of natural images at 64 x 64.

Protocol (digest §6.4), with scikit-image's grey-level pictures (``bz.datasets.load("slm_image")``) standing in for
the thesis's 75 images, which are not available offline. Noise variance sigma2 = 0.005; every design measures
unit-norm filters; the score is the reconstruction error ||E[u] - u||_2 at each of ``checkpoints`` measurements.

Designs and reconstructions (the thesis's names):

* ``rand uni``: rows X_ij ~ N(0, 1/n), reconstructed by ``L1`` (MAP with Laplace potentials on the Daubechies-4
  wavelet coefficients, tau_W = 0.075) and ``L1+TV`` (MAP with B = [W; D], tau_W = tau_D = 0.075);
* ``heur wave``: the wavelet coefficients measured from the coarsest band to the finest
  (:meth:`~bayeszoo.numerics.operators.Wavelet.coarse_to_fine`), reconstructed by ``L2`` (the minimum-norm
  interpolant X^T y, exact because the rows are orthonormal; the thesis's L2 = L1 = BCS on these measurements),
  ``L1+TV`` and the SLM's posterior mean (``dloop``, tau_W = 0.075, tau_D = 0.5: the thesis's EP setting);
* ``opt wave``: ``m0`` heuristic measurements, then wavelet coefficients chosen in batches by their information gain
  under the double loop's Gaussian approximation (``bz.design.sequential_design``, Lanczos scores), reconstructed by
  the double loop.

Deviations from the thesis, forced by running time on two cores: the double loop (Lanczos variances) stands in for
EP (the ``ep`` backend is dense and limited to n <= 1000; n = 4096 here), the designed arm chooses ``batch``
coefficients per refit rather than one, the MAP solvers stop at a relative tolerance of 1e-6, and the free-filter
design (opt free) is not run (one smallest-eigenvector computation of A per measurement). Public API only.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

import bayeszoo as bz
from bayeszoo.numerics.operators import Wavelet, to_dense

IMAGES = ("camera", "astronaut", "coins", "text")
SIZE = 64
SIGMA2 = 0.005
TAU_W = 0.075             # the thesis's tau for L1 and L1+TV (both bands) and for EP's wavelet potentials
TAU_D_POSTERIOR = 0.5     # the thesis's EP scale on the finite differences
MAP_OPTIONS = {"max_iter": 300, "tol": 1e-6}
DLOOP_OPTIONS = {"lanczos_k": 60, "n_outer": 3}


def models(sigma2: float = SIGMA2) -> dict:
    """The three priors of the study, by reconstruction name."""
    return {"L1": bz.models.SLM(potential="laplace", tau=TAU_W, B="wavelet", sigma2=sigma2),
            "L1+TV": bz.models.SLM(potential="laplace", tau=TAU_W, tau_tv=TAU_W, B="wavelet+tv", sigma2=sigma2),
            "dloop": bz.models.SLM(potential="laplace", tau=TAU_W, tau_tv=TAU_D_POSTERIOR, B="wavelet+tv",
                                   sigma2=sigma2)}


def _measured(u: np.ndarray, X: np.ndarray, sigma2: float, rng, name: str) -> bz.datasets.Dataset:
    side = int(round(np.sqrt(u.size)))
    y = X @ u + np.sqrt(sigma2) * rng.standard_normal(len(X))
    return bz.datasets.Dataset(X=X, y=y, name=name, meta={"task": "regression", "u_shape": (side, side),
                                                           "true_u": u})


def _first(data, m: int):
    return bz.datasets.Dataset(X=data.X[:m], y=data.y[:m], name=data.name, meta=data.meta)


def _error(model, data, backend: str, seed: int) -> float:
    options = MAP_OPTIONS if backend == "map" else DLOOP_OPTIONS
    fit = bz.fit(model, data, backend, seed=seed, progress=False, draws=2, chains=1, **options)
    return model.score(fit, data)["l2_error"]


def run(images=IMAGES, *, size: int = SIZE, checkpoints=(128, 256, 512), m0: int = 64, batch: int = 64,
        sigma2: float = SIGMA2, lanczos_k: int = 100, seed: int = 0, progress: bool = True) -> pd.DataFrame:
    """The Fig. 5.4 comparison (module docstring) on ``size`` x ``size`` images; columns ``image, design, method,
    m, l2_error``."""
    checkpoints = sorted(int(m) for m in checkpoints)
    if not checkpoints or checkpoints[0] < m0 or (checkpoints[-1] - m0) % batch:
        raise ValueError(f"checkpoints must be at least m0 = {m0}, and the last reachable from m0 in batches of "
                         f"{batch}; got {checkpoints}")
    priors = models(sigma2)
    n = size * size
    W = Wavelet((size, size))
    heuristic = to_dense(W)[W.coarse_to_fine()]   # rows of W, coarse to fine
    m_max = checkpoints[-1]
    rows = []

    def record(image, design, method, m, err):
        rows.append({"image": image, "design": design, "method": method, "m": m, "l2_error": err})

    for i, image in enumerate(images):
        u = np.asarray(bz.datasets.load("slm_image", image=image, size=size, m=1, seed=seed).meta["true_u"])
        rng = np.random.default_rng([seed, i])
        uni = _measured(u, rng.standard_normal((m_max, n)) / np.sqrt(n), sigma2, rng, f"{image} rand uni")
        wave = _measured(u, heuristic[:m_max], sigma2, rng, f"{image} heur wave")
        for m in checkpoints:
            for method in ("L1", "L1+TV"):
                record(image, "rand uni", method, m, _error(priors[method], _first(uni, m), "map", seed))
            data = _first(wave, m)
            record(image, "heur wave", "L2", m, float(np.linalg.norm(data.X.T @ data.y - u)))
            record(image, "heur wave", "L1+TV", m, _error(priors["L1+TV"], data, "map", seed))
            record(image, "heur wave", "dloop", m, _error(priors["dloop"], data, "dloop", seed))
        noise = np.random.default_rng([seed, i, 1])
        designed = bz.design.sequential_design(
            priors["dloop"], _first(wave, m0), lambda X: X @ u + np.sqrt(sigma2) * noise.standard_normal(len(X)),
            (m_max - m0) // batch, candidates=heuristic[m0:], batch=batch, backend="dloop", options=DLOOP_OPTIONS,
            lanczos_k=lanczos_k, seed=seed, progress=progress)
        for m in checkpoints:
            record(image, "opt wave", "dloop", m, _error(priors["dloop"], _first(designed.data, m), "dloop", seed))
    return pd.DataFrame(rows)


def summary(results: pd.DataFrame) -> pd.DataFrame:
    """Mean error over the images per design and reconstruction, wide by the number of measurements."""
    return results.pivot_table(index=["design", "method"], columns="m", values="l2_error", aggfunc="mean")
