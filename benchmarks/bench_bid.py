"""Blind image deconvolution: VB cost scaling, and ISNR / time against non-blind and TV-blind baselines.

``scaling``: seconds per VB iteration of ``bz.models.BID()`` (StStSt) on cameraman at 128, 256 and 512 pixels
square (``bz.datasets.load("cameraman", size=n)``, uniform 7 x 7 blur, 40 dB). Every CG solve runs exactly
``cg_iter`` = 20 iterations (``cg_tol`` = 1e-30), so each VB iteration does the same number of FFTs at every
size; the measured ratios t(2n) / t(n) are set beside the M log M prediction 4 log(4M) / log(M).

``peers``: cameraman 256 x 256, the thesis's three PSFs at 40 dB (§5.4.2), ISNR_f (and ISNR_h for the blind
methods) and wall time of:
* ``vb StStSt``: ``bz.fit(BID(sigma_phi2=2 or 1 for motion), backend="vb", max_iter=100)``, the thesis's
  hyperparameters and initialisation (h_in Gaussian, variance 3), noise hyperparameters learned;
* ``vb StStSt, stopped at 10 iterations``: the same run stopped early (the thesis states no stopping rule);
* ``vb StStSt (noise prior at the true level)``: the same with b_beta = a_beta sigma^2 (an oracle noise level);
* ``richardson_lucy`` and ``unsupervised_wiener`` (scikit-image) given the TRUE PSF: non-blind upper references.
  RL runs ``num_iter`` = 10 (by trial: on cameraman 128, uniform blur, ISNR_f is -0.9, 0.8, 1.0, -4.5 dB
  after 1, 3, 10, 30 iterations, as noise is amplified) on the image padded periodically (scikit-image
  convolves with zero padding and the blur here is circular);
* ``tv_blind``: Chan & Wong (1998) blind TV deconvolution (5.55) as implemented below: alternating
  minimisation of 1/2 |h * f - g|^2 + lam_f TV_eps(f) + lam_h TV_eps(h) by projected gradient steps (h >= 0,
  sum(h) = 1, h on a 15 x 15 window), starting from the same h_in; lam_f = 2e-3, lam_h = 1 fixed by a short
  trial on cameraman 128 (lam_f in {2e-3, 1e-2} x lam_h in {1e-2, 1e-1, 1}), as the thesis tuned its
  competitors.
Target (issue): blind StStSt within 2 dB of the non-blind references.
"""
from __future__ import annotations

import math
import time

import numpy as np

TARGET = "vb StStSt ISNR_f within 2 dB of the better non-blind reference, for every PSF"
SIZES = (128, 256, 512)
RL_ITER = 10
EARLY = 10        # the thesis states no stopping rule; ISNR_f of vb peaks early and then falls (see BENCHMARKS.md)
PSF_SIGMA_PHI2 = {"gaussian": 2.0, "uniform": 2.0, "motion": 1.0}


def _vb_seconds_per_iteration(size: int, iterations: int) -> float:
    import bayeszoo as bz

    data = bz.datasets.load("cameraman", psf="uniform", snr_db=40, seed=0, size=size)
    fit = bz.fit(bz.models.BID(), data, backend="vb", draws=1, chains=1, progress=False, max_iter=iterations,
                 tol=1e-300, cg_iter=20, cg_tol=1e-30)
    return fit.info["seconds_per_iteration"]


def run_scaling(iterations: int = 10, repeats: int = 3) -> dict:
    """Best of ``repeats`` rounds (sizes interleaved, so a burst of load on a shared machine hits all sizes)."""
    _vb_seconds_per_iteration(64, 2)                   # warm caches / FFT plans
    per_iter = {n: math.inf for n in SIZES}
    for _ in range(repeats):
        for n in SIZES:
            per_iter[n] = min(per_iter[n], _vb_seconds_per_iteration(n, iterations))
    ratios = {}
    for small, big in zip(SIZES, SIZES[1:]):
        M = small * small
        ratios[f"{big}/{small}"] = {"measured": per_iter[big] / per_iter[small],
                                    "M log M": 4 * math.log(4 * M) / math.log(M), "M": 4.0}
    return {"name": "bid_scaling", "seconds_per_iteration": per_iter, "ratios": ratios,
            "iterations": iterations, "repeats": repeats}


# ----------------------------------------------------------------------------------------------- TV blind
def _tv_grad(x, eps):
    """Gradient of the smoothed isotropic TV sum sqrt(dx^2 + dy^2 + eps^2) (circular differences)."""
    dx = np.roll(x, -1, 0) - x
    dy = np.roll(x, -1, 1) - x
    norm = np.sqrt(dx**2 + dy**2 + eps**2)
    px, py = dx / norm, dy / norm
    return -(px - np.roll(px, 1, 0)) - (py - np.roll(py, 1, 1))


def tv_blind(g, h_init, lam_f=2e-3, lam_h=1.0, outer=30, inner=10, eps=1e-3, support=15):
    """Chan-Wong style alternating minimisation; returns (f, h window)."""
    from bayeszoo.inference.bid import _fft

    shape = g.shape
    mask = _fft.embed(np.ones((support, support)), shape) > 0
    h = _fft.embed(h_init, shape)
    f = g.copy()
    step_h = 1e-3
    for _ in range(outer):
        h_hat = _fft.rfft2(h)
        step_f = 1.0 / (np.max(np.abs(h_hat)) ** 2 + 8 * lam_f / eps)
        for _ in range(inner):
            resid = _fft.conv(f, h_hat) - g
            f = f - step_f * (_fft.corr(resid, h_hat) + lam_f * _tv_grad(f, eps))
        f_hat = _fft.rfft2(f)

        def objective(h):
            resid = _fft.conv(h, f_hat) - g
            dx, dy = np.roll(h, -1, 0) - h, np.roll(h, -1, 1) - h
            return 0.5 * np.sum(resid**2) + lam_h * np.sum(np.sqrt(dx**2 + dy**2 + eps**2))

        # projected gradient with a backtracking step: the global Lipschitz bound (the image's spectrum) is far
        # too pessimistic for h on its small support, and a fixed step left h where it started
        current = objective(h)
        for _ in range(inner):
            grad = _fft.corr(_fft.conv(h, f_hat) - g, f_hat) + lam_h * _tv_grad(h, eps)
            while step_h > 1e-20:
                trial = np.where(mask, h - step_h * grad, 0.0)
                trial[mask] = _project_simplex(trial[mask])
                value = objective(trial) if np.all(np.isfinite(trial)) else np.inf
                if value <= current:
                    h, current = trial, value
                    step_h = min(2.0 * step_h, 1e3)
                    break
                step_h *= 0.5
    return f, _fft.window(h, support)


def _project_simplex(v):
    """Euclidean projection onto {x >= 0, sum x = 1} (Duchi et al. 2008)."""
    if not np.all(np.isfinite(v)):
        raise ValueError("cannot project non-finite values onto the simplex")
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1.0
    k = np.nonzero(u - css / np.arange(1, v.size + 1) > 0)[0][-1]
    return np.maximum(v - css[k] / (k + 1), 0.0)


def _richardson_lucy_circular(g, psf, num_iter):
    """scikit-image's richardson_lucy convolves with zero padding; the blur here is circular, so the image is
    padded periodically by the PSF's reach, restored, and cropped back."""
    from skimage.restoration import richardson_lucy

    pad = max(psf.shape)
    out = richardson_lucy(np.pad(g, pad, mode="wrap"), psf, num_iter=num_iter, clip=False)
    return out[pad:-pad, pad:-pad]


def run_peers(max_iter: int = 100, psfs=("gaussian", "uniform", "motion")) -> dict:
    import warnings

    from skimage.restoration import unsupervised_wiener

    import bayeszoo as bz
    from bayeszoo.inference.bid import _fft
    from bayeszoo.models.bid import isnr

    out = {}
    for psf in psfs:
        data = bz.datasets.load("cameraman", psf=psf, snr_db=40, seed=0)
        f = data.meta["true_image"]
        h = data.meta["true_psf"]
        shape = f.shape
        g = data.y.reshape(shape)
        rows = {}
        for label, extra, iters in (("vb StStSt", {}, max_iter),
                                    (f"vb StStSt, stopped at {EARLY} iterations", {}, EARLY),
                                    ("vb StStSt (noise prior at the true level)",
                                     {"b_beta": 1e4 * data.meta["noise_var"]}, max_iter)):
            model = bz.models.BID(sigma_phi2=PSF_SIGMA_PHI2[psf], **extra)
            t0 = time.perf_counter()
            # ISNR of the posterior mean: 100 draws from q average out the sampling noise of single draws
            fit = bz.fit(model, data, backend="vb", draws=100, chains=1, progress=False, max_iter=iters)
            seconds = time.perf_counter() - t0
            score = model.score(fit, data)
            rows[label] = {"isnr_f": score["isnr_f"], "isnr_h": score["isnr_h"], "seconds": seconds,
                           "iterations": fit.info["iterations"]}
        h_in = bz.models.BID().initial_psf(shape)
        t0 = time.perf_counter()
        f_tv, h_tv = tv_blind(g, h_in)
        rows["tv_blind"] = {"isnr_f": isnr(f, g, f_tv), "seconds": time.perf_counter() - t0,
                            "isnr_h": isnr(_fft.embed(h, shape), _fft.embed(h_in, shape), _fft.embed(h_tv, shape))}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            f_rl = _richardson_lucy_circular(g, h, num_iter=RL_ITER)
            rows["richardson_lucy (true PSF)"] = {"isnr_f": isnr(f, g, f_rl), "seconds": time.perf_counter() - t0}
            t0 = time.perf_counter()
            f_w, _ = unsupervised_wiener(g, h, clip=False, rng=0)
            rows["unsupervised_wiener (true PSF)"] = {"isnr_f": isnr(f, g, f_w), "seconds": time.perf_counter() - t0}
        out[psf] = rows
    met = all(rows["vb StStSt"]["isnr_f"] >= max(rows["richardson_lucy (true PSF)"]["isnr_f"],
                                                   rows["unsupervised_wiener (true PSF)"]["isnr_f"]) - 2.0
              for rows in out.values())
    return {"name": "bid_peers", "results": out, "target": TARGET, "target_met": met, "max_iter": max_iter}


def rows_scaling(result: dict) -> list[tuple[str, str, str]]:
    out = [(f"bid VB s/iteration {n}x{n}", f"{s * 1e3:.1f} ms", "StStSt, 2 CG solves x 20 iterations")
           for n, s in result["seconds_per_iteration"].items()]
    for key, r in result["ratios"].items():
        out.append((f"bid VB time ratio {key}", f"{r['measured']:.2f}x",
                    f"M log M predicts {r['M log M']:.2f}x (M alone {r['M']:.0f}x)"))
    return out


def rows_peers(result: dict) -> list[tuple[str, str, str]]:
    out = []
    for psf, rows in result["results"].items():
        for label, r in rows.items():
            h = f", ISNR_h {r['isnr_h']:.2f} dB" if "isnr_h" in r else ""
            out.append((f"bid {psf} {label}", f"{r['isnr_f']:.2f} dB", f"ISNR_f{h}; {r['seconds']:.1f} s"))
    return out


if __name__ == "__main__":
    import json
    import sys

    which = sys.argv[1] if len(sys.argv) > 1 else "both"
    res = {}
    if which in ("scaling", "both"):
        res["scaling"] = run_scaling()
    if which in ("peers", "both"):
        res["peers"] = run_peers()
    print(json.dumps(res, indent=1, default=str))
