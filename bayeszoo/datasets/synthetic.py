"""Seeded generators for the synthetic problems of the sources (exact where the sources are exact)."""
from __future__ import annotations

import numpy as np

from bayeszoo import checks
from bayeszoo.datasets import Dataset, register

#: largest number of points a generator makes (training plus test): beyond it the arrays alone need gigabytes
MAX_POINTS = 10_000_000
#: largest noise level, extent or Doppler delta: beyond it the generated values overflow double precision
MAX_SCALE = 1e100


def _count(minimum: int = 1) -> checks.Interval:
    """An integer number of points in [minimum, MAX_POINTS]."""
    return checks.Interval(int, minimum, MAX_POINTS, "both")


#: a noise level, extent or Doppler delta: a number in [0, MAX_SCALE] (> 0 where ``positive``)
SCALE = checks.Interval(float, 0, MAX_SCALE, "both")
POSITIVE_SCALE = checks.Interval(float, 0, MAX_SCALE, "right")
#: a side of a square grid, whose points MAX_POINTS bounds
GRID = checks.Interval(int, 1, int(np.sqrt(MAX_POINTS)), "both")


@register("sinc", {"n": _count(), "n_test": _count(0), "noise_sd": SCALE})
def sinc(n: int = 100, n_test: int = 1000, noise_sd: float = 0.1, seed: int = 0) -> Dataset:
    """Noisy sinc, Tipping (2001): t = sin(x)/x + N(0, noise_sd^2), x uniform on [-10, 10]; test on a noise-free grid."""
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(-10.0, 10.0, n))
    y = np.sinc(x / np.pi) + noise_sd * rng.standard_normal(n)
    x_test = np.linspace(-10.0, 10.0, n_test)
    return Dataset(x[:, None], y, x_test[:, None], np.sinc(x_test / np.pi), name="sinc", meta={
        "task": "regression", "source": "generated: Tipping (2001), JMLR 1:211-244, section 5.1",
        "licence": "generated data", "noise_sd": noise_sd, "seed": seed,
        "preprocessing": "test targets are the noise-free function",
        "citation": "M. E. Tipping, Sparse Bayesian learning and the relevance vector machine, JMLR 2001"})


def doppler_function(x, delta: float = 0.01):
    """g(x) = sqrt(x(1-x)) sin(2 pi (1+delta) / (x+delta)) [P 66]."""
    x = np.asarray(x, dtype=float)
    return np.sqrt(x * (1 - x)) * np.sin(2 * np.pi * (1 + delta) / (x + delta))


@register("doppler", {"n": _count(), "noise_var": SCALE, "delta": POSITIVE_SCALE})
def doppler(n: int = 128, noise_var: float = 0.1, delta: float = 0.01, seed: int = 0) -> Dataset:
    """1-D Doppler [P 66]: n equispaced points x_n = (n - 1/2)/N in (0,1), white noise of variance 0.1; test = noise-free g."""
    rng = np.random.default_rng(seed)
    x = (np.arange(1, n + 1) - 0.5) / n  # grid unstated in the source; equispaced as sRVM requires
    g = doppler_function(x, delta)
    y = g + np.sqrt(noise_var) * rng.standard_normal(n)
    return Dataset(x[:, None], y, x[:, None], g, name="doppler", meta={
        "task": "regression", "source": "generated: Tzikas, Likas, Galatsanos (2009), eq. 66",
        "licence": "generated data", "noise_var": noise_var, "delta": delta, "seed": seed,
        "preprocessing": "test set = the training inputs with the noise-free signal (MSE against the true g)"})


@register("doppler2d", {"grid": GRID, "train_fraction": checks.Interval(float, 0, 1, "right"), "noise_var": SCALE,
                        "delta": POSITIVE_SCALE})
def doppler2d(grid: int = 128, train_fraction: float = 0.5, noise_var: float = 0.1, delta: float = 0.01,
              seed: int = 0) -> Dataset:
    """2-D Doppler g(x1) g(x2) (Tzikas PhD eq. 6.35) on a grid, a random fraction for training; test = whole noise-free grid."""
    if round(train_fraction * grid * grid) < 1:
        raise ValueError(f"dataset 'doppler2d': train_fraction = {train_fraction:g} of a {grid} x {grid} grid leaves "
                         f"no training point; give a larger train_fraction or grid")
    rng = np.random.default_rng(seed)
    u = (np.arange(1, grid + 1) - 0.5) / grid
    x1, x2 = np.meshgrid(u, u, indexing="ij")
    X = np.column_stack([x1.ravel(), x2.ravel()])
    g = doppler_function(X[:, 0], delta) * doppler_function(X[:, 1], delta)
    idx = np.sort(rng.choice(X.shape[0], size=int(round(train_fraction * X.shape[0])), replace=False))
    y = g[idx] + np.sqrt(noise_var) * rng.standard_normal(idx.size)
    return Dataset(X[idx], y, X, g, name="doppler2d", meta={
        "task": "regression", "source": "generated: Tzikas PhD thesis (2010), eq. 6.35", "licence": "generated data",
        "grid": grid, "train_fraction": train_fraction, "noise_var": noise_var, "seed": seed,
        "preprocessing": "test set = the whole grid with the noise-free surface"})


@register("sinc2d", {"grid": GRID, "extent": POSITIVE_SCALE, "noise_var": SCALE})
def sinc2d(grid: int = 30, extent: float = 10.0, noise_var: float = 0.1, seed: int = 0) -> Dataset:
    """2-D sinc image sin(r)/r on a grid over [-extent, extent]^2 plus N(0, 0.1) noise (Tzikas PhD eq. 4.24)."""
    rng = np.random.default_rng(seed)
    u = np.linspace(-extent, extent, grid)
    x1, x2 = np.meshgrid(u, u, indexing="ij")
    X = np.column_stack([x1.ravel(), x2.ravel()])
    g = np.sinc(np.hypot(X[:, 0], X[:, 1]) / np.pi)  # radial reading of ||x+y||; r = 0 gives 1
    y = g + np.sqrt(noise_var) * rng.standard_normal(g.size)
    return Dataset(X, y, X, g, name="sinc2d", meta={
        "task": "regression", "source": "generated: Tzikas PhD thesis (2010), eq. 4.24", "licence": "generated data",
        "grid": grid, "extent": extent, "noise_var": noise_var, "seed": seed,
        "preprocessing": "grid extent is not given in the source; [-10, 10]^2 chosen"})


@register("gaussian_mixture", {"n_per_class": _count(), "n_test_per_class": _count(0)})
def gaussian_mixture(n_per_class: int = 50, n_test_per_class: int = 5000, seed: int = 0) -> Dataset:
    """Two-class 2-D Gaussian mixtures [P 67-68]: 50 + 50 training points, 5000 + 5000 test points; labels 0 / 1."""
    rng = np.random.default_rng(seed)
    mu1, mu2 = np.array([0.5, 0.5]), np.array([-0.5, -0.5])
    var_large, var_small = 0.5, 0.05

    def draw(m, first, second):
        wide = rng.random(m) < 0.25  # 0.25 on the large-variance component, 0.75 on the small one
        centre = np.where(wide[:, None], first, second)
        sd = np.where(wide, np.sqrt(var_large), np.sqrt(var_small))[:, None]
        return centre + sd * rng.standard_normal((m, 2))

    def sample(m):
        X = np.vstack([draw(m, mu1, mu2), draw(m, mu2, mu1)])
        y = np.r_[np.zeros(m), np.ones(m)]
        return X, y

    X, y = sample(n_per_class)
    Xt, yt = sample(n_test_per_class)
    return Dataset(X, y, Xt, yt, name="gaussian_mixture", meta={
        "task": "classification", "source": "generated: Tzikas, Likas, Galatsanos (2009), eqs. 67-68",
        "licence": "generated data", "seed": seed, "bayes_error": 0.1186,
        "preprocessing": "class 0 = C1, class 1 = C2; balanced test set (unstated in the source)"})
