"""fMRI activation detection with sparse kernel models (Tzikas MSc thesis ch. 4-5; Tzikas PhD §6.6).

A two-state study: ``n_baseline`` volumes X^b = B + noise and ``n_activated`` volumes X^a = B + A + noise
[PhD 6.44-6.45] on a 2-D slice. Detection maps:

* :func:`t_map`: the voxel-wise t-test baseline [PhD 6.50]. The thesis prints t = A / (sigma / sqrt(N)) with
  N - 1 degrees of freedom; the standard two-sample form is implemented, t = A / (s_p sqrt(1/N^a + 1/N^b))
  with N^a + N^b - 2 degrees of freedom and the pooled within-state variance s_p^2.
* :func:`rvm_map`: the RVM regression of the difference image [T 5.4] (one Gaussian kernel per pixel, width
  ``width``), with the noise level known (pooled over the slice; [T] assumes C_n known) and the sparsity
  prior exp(-c trace(S)) [P 32]; known coloured noise is whitened.
* :func:`arvm_map`: the aRVM^d (one centre and one width per direction per basis, elliptical kernels) on the
  same targets, learned by Algorithm 1.

Both kernel maps are fitted through the public API, ``bz.fit(model, data, "arvm", ...)`` on the pixel coordinates
and the difference image, with the noise precision known (option ``beta``), coloured noise whitened (option
``noise_whitener``) and, for the RVM map, the per-pixel kernels given as a fixed ``dictionary``; s-hat is the
posterior mean of f (``ARVM.latent_mean``). Both are turned into z-maps z = s-hat / sd(A-hat) [T 5.12].

The sparsity parameter is calibrated to a false-alarm rate [PhD 6.52-6.60]: into an empty model a basis enters iff
T = (phi^T t)^2 / (sigma^2 phi^T phi) > 2c + 1, and under no activation T ~ chi^2_1, so
c = (chi^2_1 quantile(1 - P_FA) - 1) / 2 (:func:`calibrated_c`: 1.42 for P_FA = 0.05, 2.82 for 0.01).

The phantom (:func:`phantom`) is a stand-in: the sources add Gaussian activations [PhD 6.61] to real
resting-state volumes, which are not available here, and do not state the activation sizes or amplitudes.
Stated parameters: a 30 x 30 slice, 10 + 10 volumes, a constant baseline of 100, noise sd 1 per voxel, white or
coloured (95 % of the variance from white noise smoothed by a Gaussian filter of sd ``smoothing`` pixels,
periodic boundary, 5 % white); activations V exp(-(x - x0)^2 / sx^2 - (y - y0)^2 / sy^2).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

__all__ = ["Phantom", "phantom", "random_activations", "activation_image", "difference_map", "t_map",
           "calibrated_c", "addition_statistic", "false_alarm_rate", "rvm_map", "arvm_map", "roc_curve", "partial_auc",
           "noise_covariance"]


@dataclass(frozen=True)
class Phantom:
    """One simulated study: volumes (n, H, W), the true activation A (H, W), and how it was made."""

    baseline: np.ndarray
    activated: np.ndarray
    activation: np.ndarray
    noise_sd: float
    smoothing: float
    meta: dict = field(default_factory=dict)

    @property
    def shape(self):
        return self.activation.shape

    def truth(self, fraction: float = 0.1) -> np.ndarray:
        """Voxels counted as active: A > ``fraction`` x the largest activation (all False if A = 0)."""
        peak = float(self.activation.max())
        return self.activation > fraction * peak if peak > 0 else np.zeros(self.shape, bool)


def activation_image(shape, activations) -> np.ndarray:
    """Sum of V exp(-(x - x0)^2 / sx^2 - (y - y0)^2 / sy^2) [PhD 6.61] over rows (x0, y0, V, sx, sy)."""
    H, W = shape
    yy, xx = np.meshgrid(np.arange(H, dtype=float), np.arange(W, dtype=float), indexing="ij")
    A = np.zeros(shape)
    for x0, y0, V, sx, sy in np.atleast_2d(np.asarray(activations, float)) if len(activations) else []:
        A += V * np.exp(-((xx - x0) / sx) ** 2 - ((yy - y0) / sy) ** 2)
    return A


def random_activations(k: int, shape=(30, 30), *, rng, size=(1.0, 3.0), strength=2.0, min_distance=8.0):
    """``k`` activations at distant locations: widths uniform in ``size`` (per direction), amplitudes
    ``strength`` / mean width (small-strong and large-weak, as in the PhD's ROC study)."""
    H, W = shape
    rows, tries = [], 0
    while len(rows) < k:
        tries += 1
        if tries > 10000:
            raise ValueError(f"cannot place {k} activations {min_distance} pixels apart on a {H} x {W} slice")
        x0, y0 = rng.uniform(3, W - 4), rng.uniform(3, H - 4)
        if all(np.hypot(x0 - r[0], y0 - r[1]) >= min_distance for r in rows):
            sx, sy = rng.uniform(*size, size=2)
            rows.append((x0, y0, strength / (0.5 * (sx + sy)), sx, sy))
    return np.array(rows)


def _smoother(shape, smoothing: float):
    """The linear map white noise -> coloured noise (periodic Gaussian filter, unit marginal variance)."""
    from scipy.ndimage import gaussian_filter

    def apply(z):
        out = gaussian_filter(z, sigma=(0, smoothing, smoothing), mode="wrap")
        return out

    impulse = np.zeros((1, *shape))
    impulse[0, shape[0] // 2, shape[1] // 2] = 1.0
    norm = float(np.sqrt(np.sum(apply(impulse) ** 2)))
    return lambda z: apply(z) / norm


NUGGET = 0.05  # white share of the coloured noise's variance


def noise_covariance(shape, noise_sd: float, smoothing: float) -> np.ndarray:
    """Covariance (P x P, P = H W) of one volume's noise: sd^2 I (white) or sd^2 ((1 - nugget) G G^T + nugget I)
    (coloured: smoothed white noise plus a 5 % white share, which keeps the covariance well conditioned)."""
    P = shape[0] * shape[1]
    if smoothing <= 0:
        return noise_sd**2 * np.eye(P)
    R = _correlation(tuple(int(v) for v in shape), float(smoothing))
    return noise_sd**2 * ((1.0 - NUGGET) * R + NUGGET * np.eye(P))


@functools.lru_cache(maxsize=8)
def _correlation(shape, smoothing):
    P = shape[0] * shape[1]
    G = _smoother(shape, smoothing)(np.eye(P).reshape(P, *shape)).reshape(P, P)
    out = G.T @ G
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=8)
def _whitening_matrix(shape, smoothing):
    from scipy.linalg import solve_triangular

    L = np.linalg.cholesky(noise_covariance(shape, 1.0, smoothing))
    out = solve_triangular(L, np.eye(L.shape[0]), lower=True)
    out.setflags(write=False)
    return out


def phantom(shape=(30, 30), activations=None, *, n_baseline: int = 10, n_activated: int = 10,
            noise_sd: float = 1.0, noise: str = "white", smoothing: float = 1.5, baseline: float = 100.0,
            seed: int = 0) -> Phantom:
    """A simulated two-state study. ``activations``: rows (x0, y0, V, sx, sy); None for one elliptical
    activation in the middle (V = 1.5, sx = 2.5, sy = 1.5); an empty list for none (H0)."""
    H, W = (int(v) for v in shape)
    if H < 4 or W < 4:
        raise ValueError(f"phantom shape must be at least 4 x 4, got {shape}")
    for name, v in (("n_baseline", n_baseline), ("n_activated", n_activated)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 2:
            raise ValueError(f"{name} must be an integer >= 2, got {v!r}")
    if noise not in ("white", "coloured"):
        raise ValueError(f"noise must be 'white' or 'coloured', got {noise!r}")
    if not (np.isfinite(noise_sd) and noise_sd > 0):
        raise ValueError(f"noise_sd must be > 0, got {noise_sd!r}")
    if noise == "coloured" and not smoothing > 0:
        raise ValueError(f"coloured noise needs smoothing > 0, got {smoothing!r}")
    if activations is None:
        activations = [(W / 2 - 0.5, H / 2 - 0.5, 1.5, 2.5, 1.5)]
    rng = np.random.default_rng(seed)
    A = activation_image((H, W), activations)

    def draw(n):
        z = rng.standard_normal((n, H, W))
        if noise == "white":
            return noise_sd * z
        smooth = _smoother((H, W), smoothing)(rng.standard_normal((n, H, W)))
        return noise_sd * (np.sqrt(1.0 - NUGGET) * smooth + np.sqrt(NUGGET) * z)

    Xb = baseline + draw(n_baseline)
    Xa = baseline + A + draw(n_activated)
    return Phantom(Xb, Xa, A, float(noise_sd), float(smoothing) if noise == "coloured" else 0.0,
                   meta={"activations": np.asarray(activations, float).tolist(), "seed": seed, "noise": noise})


# ------------------------------------------------------------------------------------------- statistics
def difference_map(ph: Phantom):
    """A-hat = mean activated - mean baseline [PhD 6.47-6.48] and its noise sd, from the pooled within-state
    variance over the whole slice (the thesis's known noise level; n_voxels x (N - 2) degrees of freedom)."""
    na, nb = ph.activated.shape[0], ph.baseline.shape[0]
    A_hat = ph.activated.mean(0) - ph.baseline.mean(0)
    resid = np.concatenate([ph.activated - ph.activated.mean(0), ph.baseline - ph.baseline.mean(0)])
    var = float(np.sum(resid**2) / (resid.shape[1] * resid.shape[2] * (na + nb - 2)))
    return A_hat, np.sqrt(var * (1.0 / na + 1.0 / nb))


def t_map(ph: Phantom) -> np.ndarray:
    """Voxel-wise two-sample t statistic (the t-test / SPM baseline, [PhD 6.50] in its standard form)."""
    res = stats.ttest_ind(ph.activated, ph.baseline, axis=0, equal_var=True)
    return np.asarray(res.statistic)


def calibrated_c(p_fa: float) -> float:
    """c with P(chi^2_1 > 2c + 1) = P_FA [PhD 6.60]: 1.42 for 0.05, 2.82 for 0.01."""
    if not 0 < p_fa < 1:
        raise ValueError(f"p_fa must be in (0, 1), got {p_fa!r}")
    return 0.5 * (stats.chi2.isf(p_fa, 1) - 1.0)


def _pixels(shape):
    H, W = shape
    yy, xx = np.meshgrid(np.arange(H, dtype=float), np.arange(W, dtype=float), indexing="ij")
    return np.column_stack([xx.ravel(), yy.ravel()])


def _whitener(ph: Phantom, sd: float):
    """(W, beta) such that W A-hat has white noise of precision beta: (L^-1 / sd, 1) for coloured noise, where
    L L^T is the phantom's noise correlation; (None, 1 / sd^2) for white noise."""
    if ph.smoothing <= 0:
        return None, 1.0 / sd**2
    return _whitening_matrix(tuple(ph.shape), ph.smoothing) / sd, 1.0


def addition_statistic(ph: Phantom, width: float) -> np.ndarray:
    """T_i = (phi_i^T t)^2 / (sigma^2 phi_i^T phi_i) for the kernel on every pixel, into an empty model
    [PhD 6.52-6.55] (whitened for coloured noise); chi^2_1 under no activation."""
    A_hat, sd = difference_map(ph)
    Phi = _pixel_design(tuple(ph.shape), float(width))
    Wh, beta = _whitener(ph, sd)
    t = A_hat.ravel()
    if Wh is not None:
        Phi, t = Wh @ Phi, Wh @ t
    return beta * (Phi.T @ t) ** 2 / np.sum(Phi**2, 0)


@functools.lru_cache(maxsize=8)
def _pixel_design(shape, width):
    X = _pixels(shape)
    out = np.exp(-np.sum((X[:, None, :] - X[None, :, :]) ** 2, axis=2) / width**2)
    out.setflags(write=False)
    return out


def false_alarm_rate(c: float, *, width: float = 2.0, shape=(12, 12), n_studies: int = 1000, noise: str = "white",
                     voxel: int | None = None, seed: int = 0):
    """Empirical P(T > 2c + 1) at one voxel's kernel over ``n_studies`` activation-free phantoms, and its
    binomial standard error: the false-alarm rate of the sparsity prior [PhD 6.52-6.60]."""
    voxel = shape[0] * shape[1] // 2 + shape[1] // 2 if voxel is None else voxel
    hits = sum(addition_statistic(phantom(shape, [], noise=noise, seed=seed + s), width)[voxel] > 2 * c + 1
               for s in range(n_studies))
    rate = hits / n_studies
    return rate, float(np.sqrt(rate * (1 - rate) / n_studies))


def _kernel_map(ph: Phantom, model, opts: dict, seed: int = 0):
    """Fit ``model`` to the difference image with the ``arvm`` backend (noise level known, coloured noise
    whitened); returns the z-map s-hat / sd(A-hat) [T 5.12] and the number of bases in the model."""
    import bayeszoo as bz

    A_hat, sd = difference_map(ph)
    X = _pixels(ph.shape)
    Wh, beta = _whitener(ph, sd)
    data = bz.datasets.Dataset(X, A_hat.ravel(), name="fmri_difference", meta={"task": "regression"})
    # one draw: the map is the exact posterior mean of f, not an average over draws
    fit = bz.fit(model, data, "arvm", draws=1, chains=1, seed=seed, progress=False, beta=beta, noise_whitener=Wh,
                 **opts)
    s_hat = model.latent_mean(fit, X)
    return s_hat.reshape(ph.shape) / sd, int(fit.info["n_relevant"])


def rvm_map(ph: Phantom, width: float = 2.0, c: float | str = 1.42, seed: int = 0):
    """z-map of the RVM activation estimate [T 5.4, 5.12]: one Gaussian kernel exp(-|x - x_i|^2 / h^2) per
    pixel, known noise, sparsity c. Returns ``(z, n_relevant)``."""
    from bayeszoo.models.arvm import ARVM

    X = _pixels(ph.shape)
    model = ARVM(sparsity=c, n_basis=X.shape[0], min_width=0.0)
    # the kernels are the fixed dictionary, one per pixel, added one at a time in closed form
    return _kernel_map(ph, model, {"max_iter": X.shape[0], "patience": 1,
                                   "dictionary": (X, np.full((X.shape[0], 1), float(width)))}, seed=seed)


def arvm_map(ph: Phantom, c: float | str = 1.42, n_basis: int = 20, seed: int = 0, **options):
    """z-map of the aRVM^d activation estimate (elliptical kernels learned by Algorithm 1). Returns
    ``(z, n_relevant)``."""
    from bayeszoo.models.arvm import ARVM

    model = ARVM(kernel="diag", sparsity=c, n_basis=n_basis, width_range=(0.03, 0.3), min_width=0.5)
    # a shorter search than the paper's defaults (100 candidates, 100 joint iterations, 10 quiet iterations of
    # 1e-6), which are slow on a 900-voxel slice
    opts = {"n_candidates": 50, "joint_iter": 30, "patience": 3, "tol": 1e-3, "max_iter": 60, **options}
    return _kernel_map(ph, model, opts, seed=seed)


# ------------------------------------------------------------------------------------------- ROC
def roc_curve(scores, truth):
    """Voxel-wise ROC from statistic maps and truth masks (lists of equal-shaped arrays, pooled):
    returns (false-positive fraction, true-positive fraction), thresholds descending."""
    s = np.concatenate([np.ravel(a) for a in scores])
    y = np.concatenate([np.ravel(b) for b in truth]).astype(bool)
    if y.all() or not y.any():
        raise ValueError("ROC needs both active and inactive voxels")
    order = np.argsort(-s, kind="mergesort")
    s, y = s[order], y[order]
    tp, fp = np.cumsum(y), np.cumsum(~y)
    last = np.r_[np.flatnonzero(np.diff(s)), s.size - 1]       # one point per distinct threshold
    return np.r_[0.0, fp[last] / (~y).sum()], np.r_[0.0, tp[last] / y.sum()]


def partial_auc(fpf, tpf, max_fpf: float = 0.1) -> float:
    """Area under the ROC for false-positive fractions in [0, max_fpf] (the sources' measure; best = max_fpf)."""
    grid = np.linspace(0.0, max_fpf, 1001)
    return float(np.trapezoid(np.interp(grid, fpf, tpf), grid))
