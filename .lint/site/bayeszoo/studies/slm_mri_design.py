"""Nickisch thesis §6.4, Fig. 6.8-6.9: Cartesian k-space designs for MRI, optimised on one slice, used on others.

Protocol (digest §7.2), scaled to what runs on two cores: the six 64 x 64 brain slices shipped with the package
(``bz.datasets.load("slm_mri")``: axial EPI slices of nibabel's example volume; the thesis's 256 x 256 TSE scans are
not available), 64 candidate phase-encode lines, every design starting from the 8 lines around the k-space centre
(the thesis: 32 of 256). Designs of ``L`` lines in all:

* ``eq``: the remaining lines equispaced over k-space;
* ``ct``: low-pass, the lines nearest the centre;
* ``rd``: variable-density random lines without replacement, probability proportional to 1 / (1 + |k|)^2 (the
  thesis modifies Lustig's density; ``repeats`` draws);
* ``op``: Bayesian sequential design on the design slice (``bz.design.sequential_design``: every candidate line is
  a block of 2 x 64 rows, scored by its information gain under the double loop's Gaussian approximation with
  Lanczos), ``batch`` lines per refit (default one: a batch takes the lines of largest individual gain, and a
  line and its mirror -k have equal gains on a real image although the second adds almost nothing once the first
  is measured); the same lines are then used on every other slice.

Reconstructions: ``MAP`` (L1 on Daubechies-4 wavelets plus TV, the sparse MRI estimator of Lustig et al. that the
thesis uses; ADMM) and ``ZFDC`` (zero filling, F^H S^T y: for Cartesian lines the least-squares / density-compensated
estimate). Error: ||u - u_hat||_2. Noise variance ``sigma2`` and tau are fixed for all designs. The images are real,
so k-space is Hermitian symmetric and a line and its mirror measure the same numbers; the designs may choose both
(the thesis restricts Cartesian designs to one half plus a central slab). Public API only.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

import bayeszoo as bz
from bayeszoo.datasets.slm_data import central_lines, mri_slices
from bayeszoo.numerics.operators import fourier_sampling, to_dense

SIGMA2 = 1e-4
TAU = 30.0
MAP_OPTIONS = {"max_iter": 300, "tol": 1e-6}
DLOOP_OPTIONS = {"lanczos_k": 60, "n_outer": 3}
DESIGNS = ("eq", "ct", "rd", "op")


def model(sigma2: float = SIGMA2, tau: float = TAU):
    """The MRI prior: Laplace potentials on the wavelet coefficients and the finite differences."""
    return bz.models.SLM(potential="laplace", tau=tau, tau_tv=tau, B="wavelet+tv", sigma2=sigma2)


def _distance(size: int) -> np.ndarray:
    """|k| of every phase-encode line (row of the DFT grid)."""
    return np.abs(np.fft.fftfreq(size) * size)


def equispaced(size: int, start, total: int) -> np.ndarray:
    """``start`` plus the other lines at equal spacing in k-space, ``total`` lines in all."""
    rest = np.setdiff1d(np.arange(size), start)
    picks = rest[np.round(np.linspace(0, rest.size - 1, total - len(start))).astype(int)] if total > len(start) \
        else np.array([], dtype=int)
    return np.concatenate([start, picks]).astype(int)


def variable_density(size: int, start, total: int, rng: np.random.Generator) -> np.ndarray:
    """``start`` plus lines drawn without replacement with probability proportional to 1 / (1 + |k|)^2."""
    rest = np.setdiff1d(np.arange(size), start)
    p = 1.0 / (1.0 + _distance(size)[rest]) ** 2
    picks = rng.choice(rest, size=total - len(start), replace=False, p=p / p.sum())
    return np.concatenate([start, picks]).astype(int)


def line_blocks(size: int, lines) -> np.ndarray:
    """(c, 2 size, n): the rows that measuring each line adds (real and imaginary parts of its samples)."""
    blocks = []
    for line in lines:
        mask = np.zeros((size, size), dtype=bool)
        mask[line] = True
        blocks.append(to_dense(fourier_sampling((size, size), mask)))
    return np.asarray(blocks)


def optimised(slice_index: int, start, total: int, *, batch: int, sigma2: float, tau: float, lanczos_k: int,
              seed: int, progress: bool) -> np.ndarray:
    """The ``op`` design: ``start`` plus lines chosen by information gain on ``slice_index``."""
    size = mri_slices().shape[1]
    data = bz.datasets.load("slm_mri", slice_index=slice_index, lines=start, sigma2=sigma2, seed=seed)
    u = np.asarray(data.meta["true_u"])
    candidates = np.setdiff1d(np.arange(size), start)
    noise = np.random.default_rng([seed, 17])
    design = bz.design.sequential_design(
        model(sigma2, tau), data, lambda X: X @ u + np.sqrt(sigma2) * noise.standard_normal(len(X)),
        (total - len(start)) // batch, candidates=line_blocks(size, candidates), batch=batch, backend="dloop",
        options=DLOOP_OPTIONS, lanczos_k=lanczos_k, seed=seed, progress=progress)
    chosen = [int(candidates[i]) for step in design.chosen for i in step]
    return np.concatenate([np.asarray(start, dtype=int), chosen])


def run(*, design_slice: int = 0, test_slices=(2, 4), line_counts=(12, 16, 24), n_central: int = 8,
        batch: int = 1, repeats: int = 2, sigma2: float = SIGMA2, tau: float = TAU, lanczos_k: int = 100,
        seed: int = 0, progress: bool = True) -> tuple[pd.DataFrame, dict]:
    """The comparison of the module docstring: (results, designs). ``results`` has columns ``slice, role``
    ("design" or "unseen"), ``design, repeat, lines, method, l2_error``; ``designs`` maps (design, repeat) to the
    ordered line indices of the largest design (every smaller one is its prefix, except ``eq``)."""
    size = mri_slices().shape[1]
    line_counts = sorted(int(v) for v in line_counts)
    if line_counts[0] <= n_central or (line_counts[-1] - n_central) % batch or line_counts[-1] > size:
        raise ValueError(f"line_counts must lie above the {n_central} central lines, at most {size}, and the largest "
                         f"must be reachable in batches of {batch}; got {line_counts}")
    start = central_lines(size, n_central)
    total = line_counts[-1]
    designs = {("ct", 0): central_lines(size, total), ("op", 0): optimised(
        design_slice, start, total, batch=batch, sigma2=sigma2, tau=tau, lanczos_k=lanczos_k, seed=seed,
        progress=progress)}
    rng = np.random.default_rng([seed, 3])
    for r in range(repeats):
        designs[("rd", r)] = variable_density(size, start, total, rng)
    prior = model(sigma2, tau)
    rows = []
    for index in (design_slice, *test_slices):
        role = "design" if index == design_slice else "unseen"
        for count in line_counts:
            lines_of = {key: lines[:count] for key, lines in designs.items()}
            lines_of[("eq", 0)] = equispaced(size, start, count)
            for (name, r), lines in sorted(lines_of.items()):
                data = bz.datasets.load("slm_mri", slice_index=index, lines=lines, sigma2=sigma2, seed=seed + index)
                u = np.asarray(data.meta["true_u"])
                fit = bz.fit(prior, data, "map", draws=1, chains=1, seed=seed, progress=False, **MAP_OPTIONS)
                for method, err in (("MAP", prior.score(fit, data)["l2_error"]),
                                    ("ZFDC", float(np.linalg.norm(data.X.T @ data.y - u)))):
                    rows.append({"slice": index, "role": role, "design": name, "repeat": r, "lines": count,
                                 "method": method, "l2_error": err})
    return pd.DataFrame(rows), {key: np.asarray(v).tolist() for key, v in designs.items()}


def summary(results: pd.DataFrame) -> pd.DataFrame:
    """Mean error per slice role, method and design (over slices and random repeats), wide by the line count."""
    return results.pivot_table(index=["role", "method", "design"], columns="lines", values="l2_error",
                               aggfunc="mean")
