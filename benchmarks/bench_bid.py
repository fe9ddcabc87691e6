"""Blind image deconvolution: VB cost scaling, and ISNR / time against non-blind and TV-blind baselines.

``scaling``: seconds per VB iteration of ``bz.models.BID()`` (StStSt) on cameraman at 128, 256 and 512 pixels
square (``bz.datasets.load("cameraman", size=n)``, uniform 7 x 7 blur, 40 dB). Every CG solve runs exactly
``cg_max_iter`` = 20 iterations (``cg_tol`` = 1e-30), so each VB iteration does the same number of FFTs at every
size; the measured ratios t(2n) / t(n) are set beside the M log M prediction 4 log(4M) / log(M).

``peers``: cameraman 256 x 256, the thesis's three PSFs at 40 dB (§5.4.2), ISNR_f (and ISNR_h for the blind
methods) and wall time of:
* ``vb StStSt``: ``bz.fit(BID(sigma_phi2=2, or 1 for motion), backend="vb")``: the thesis's hyperparameters
  and initialisation (h_in Gaussian of variance 3), weights on the default 31 x 31 window, the noise
  hyperparameters learned, the default stopping rule (bound moving by < 1e-4 nats per pixel);
* ``vb StStSt, 100 iterations``: the same run continued to 100 iterations (what the later iterations do);
* ``vb GStSt``: the Gaussian PSF-weight prior, otherwise the same as ``vb StStSt``;
* ``vb StStSt, best bound of 2 starts``: ``anneal_temperatures=(1, 10)``: the thesis's VB and a run whose q(f)
  entropy is annealed from T = 10 to 1 over the first 10 iterations; the one with the higher final bound is kept;
* ``richardson_lucy`` and ``unsupervised_wiener`` (scikit-image) given the TRUE PSF: non-blind upper references.
  RL runs ``num_iter`` = 10 (chosen by trial on cameraman 128, uniform blur: more iterations amplify the
  noise; BENCHMARKS.md) on the image padded periodically (scikit-image convolves with zero padding and the blur
  here is circular);
* ``tv_blind``: Chan & Wong (1998) blind TV deconvolution (5.55), alternating lagged-diffusivity solves (see
  ``tv_blind``), from the same h_in, the weights set by a stated rule (MAP reading, noise sd by MAD);
* ``tv_blind, oracle lam_h``: the best ISNR_f over lam_h = 10, 100, 1000 x the rule's, chosen with the truth:
  an optimistic reference of what the TV baseline can do (the rule's weight lets h collapse to a spike).
Target: blind StStSt within 2 dB of the non-blind references.

``sparse`` (``bid_sparse``) and ``shake`` / ``shake128`` (``bid_shake``): the ``vb_sparse`` backend. ``run_sparse``:
cameraman 256 x 256 at 40 dB, the three PSFs, blind ISNR_f against the non-blind HQS (``nonblind.hqs_restore``) with
the true PSF under the same prior and noise estimate, plain and up to a shift (Levin et al.'s measure,
``models.bid.ssd_upto_shift``), and the seconds per image. ``run_shake``: the camera-shake kernels
(``camera_shake_kernels()``, all eight) on four scikit-image grey images at 256 x 256 (``shake128``: 128 x 128), the
error ratio SSD(HQS with the estimated PSF) / SSD(HQS with the true PSF), each at its best sub-pixel shift without a
15-pixel frame, for ``vb_sparse``, the thesis's ``vb``, ``tv_blind`` and no deblurring; success rates at ratios 2
and 3 and the cumulative fractions.
"""
from __future__ import annotations

import math
import time

import numpy as np

TARGET = "vb StStSt ISNR_f within 2 dB of the better non-blind reference, for every PSF"
SIZES = (128, 256, 512)
RL_ITER = 10
LONG = 100        # a fixed-length run beside the stopping rule's, to show what later iterations do
PSF_SIGMA_PHI2 = {"gaussian": 2.0, "uniform": 2.0, "motion": 1.0}
STARTS = (1.0, 10.0)   # vb's anneal_temperatures for the two-start row: the thesis's VB and q(f) annealed from T = 10
ANNEALED = "vb StStSt, best bound of 2 starts"


def _vb_seconds_per_iteration(size: int, iterations: int) -> float:
    import bayeszoo as bz

    data = bz.datasets.load("cameraman", psf="uniform", snr_db=40, seed=0, size=size)
    fit = bz.fit(bz.models.BID(), data, backend="vb", draws=1, chains=1, progress=False, max_iter=iterations,
                 tol=1e-300, cg_max_iter=20, cg_tol=1e-30)
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
def _tv_weights(x, eps):
    """Lagged-diffusivity weights 1 / sqrt(|grad x|^2 + eps^2) of the smoothed isotropic TV (circular differences)."""
    from bayeszoo.numerics import fft as _fft

    dx, dy = (_fft.apply_stencil(x, s) for s in _fft.STENCILS["St"])
    return 1.0 / np.sqrt(dx**2 + dy**2 + eps**2)


def _tv_operator(weights):
    """v -> D^T diag(weights) D v over both difference directions (the TV term's lagged-diffusivity Hessian)."""
    from bayeszoo.numerics import fft as _fft

    def apply(v):
        return sum(_fft.adjoint_stencil(weights * _fft.apply_stencil(v, s), s) for s in _fft.STENCILS["St"])
    return apply


def tv_blind(g, h_init, *, outer=15, inner=3, support=15, cg_iter=60, lam_h_factor=1.0):
    """Chan & Wong (1998) blind TV deconvolution (5.55): alternating minimisation of
    1/2 |h * f - g|^2 + lam_f TV(f) + lam_h TV(h), each half solved by lagged-diffusivity fixed-point iterations
    (``inner`` reweightings, each a PCG solve of (K^T K + lam D^T W D) x = K^T g), h on a ``support`` window and,
    as in Chan & Wong, made a PSF after each solve (projected onto h >= 0, sum h = 1).

    Regularisation weights by a stated rule, not by trial: in the MAP reading (Gaussian noise of variance s^2,
    a Laplace prior on the gradient magnitude with the maximum-likelihood scale b, the mean |grad|) the weight is
    lam = s^2 / b: lam_f = s^2 / mean|grad g| and lam_h = s^2 / mean|grad h_in| over the support, s by
    ``vb_sparse.mad_noise_sd``. The smoothing eps is 1% of each mean gradient. Returns (f, h window, settings)."""
    from bayeszoo.inference.bid.vb_sparse import mad_noise_sd
    from bayeszoo.numerics import fft as _fft

    shape = g.shape
    mask = _fft.embed(np.ones((support, support)), shape) > 0
    h = _fft.embed(h_init, shape)
    f = g.copy()
    s2 = mad_noise_sd(g) ** 2

    def mean_grad(x, where):
        dx, dy = (_fft.apply_stencil(x, st) for st in _fft.STENCILS["St"])
        return float(np.mean(np.sqrt(dx**2 + dy**2)[where]))

    grad_g, grad_h = mean_grad(g, np.ones(shape, bool)), mean_grad(h, mask)
    lam_f, lam_h = s2 / grad_g, lam_h_factor * s2 / grad_h
    eps_f, eps_h = 0.01 * grad_g, 0.01 * grad_h
    d_hat = [_fft.rfft2(q) for q in _fft.difference_kernels(shape, "St")]
    lap_hat = sum(np.abs(q) ** 2 for q in d_hat)
    for _ in range(outer):
        h_hat = _fft.rfft2(h)
        rhs = _fft.corr(g, h_hat)
        for _ in range(inner):
            wts = _tv_weights(f, eps_f)
            tv = _tv_operator(wts)
            eig = np.abs(h_hat) ** 2 + lam_f * wts.mean() * lap_hat

            def apply_f(v):
                return _fft.conv(_fft.conv(v, h_hat), np.conj(h_hat)) + lam_f * tv(v)
            f, _, _ = _fft.pcg(apply_f, rhs, lambda r: _fft.irfft2(_fft.rfft2(r) / eig, shape), f,
                               max_iter=cg_iter, tol=1e-6)
        f_hat = _fft.rfft2(f)
        rhs = np.where(mask, _fft.corr(g, f_hat), 0.0)
        for _ in range(inner):
            tv = _tv_operator(_tv_weights(h, eps_h))

            def apply_h(v):
                return np.where(mask, _fft.conv(_fft.conv(v, f_hat), np.conj(f_hat)) + lam_h * tv(v), 0.0)
            h, _, _ = _fft.pcg(apply_h, rhs, lambda r: r, h, max_iter=cg_iter, tol=1e-6)
        h = np.where(mask, h, 0.0)
        h[mask] = _project_simplex(h[mask])
    return f, _fft.window(h, support), {"lam_f": lam_f, "lam_h": lam_h, "noise_sd": math.sqrt(s2)}


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


TV_SWEEP = (10.0, 100.0, 1000.0)   # multiples of the rule's lam_h for the oracle TV row


def run_peers(max_iter: int = 200, psfs=("gaussian", "uniform", "motion")) -> dict:
    """``max_iter`` caps every vb run (the stopping rule usually ends them sooner; ``run.py --quick`` passes 30)."""
    import warnings

    from skimage.restoration import unsupervised_wiener

    import bayeszoo as bz
    from bayeszoo.numerics import fft as _fft
    from bayeszoo.models.bid import isnr

    out = {}
    for psf in psfs:
        data = bz.datasets.load("cameraman", psf=psf, snr_db=40, seed=0)
        f = data.meta["true_image"]
        h = data.meta["true_psf"]
        shape = f.shape
        g = data.y.reshape(shape)
        rows = {}
        long = min(LONG, max_iter)
        for label, variant, extra in (("vb StStSt", "StStSt", {"max_iter": max_iter}),
                                      (f"vb StStSt, {long} iterations", "StStSt", {"max_iter": long, "tol": 1e-12}),
                                      ("vb GStSt", "GStSt", {"max_iter": max_iter}),
                                      (ANNEALED, "StStSt", {"max_iter": max_iter, "anneal_temperatures": STARTS})):
            model = bz.models.BID(variant=variant, sigma_phi2=PSF_SIGMA_PHI2[psf])
            t0 = time.perf_counter()
            # ISNR of the posterior mean: 100 draws from q average out the sampling noise of single draws
            fit = bz.fit(model, data, backend="vb", draws=100, chains=1, progress=False, **extra)
            seconds = time.perf_counter() - t0
            score = model.score(fit, data)
            rows[label] = {"isnr_f": score["isnr_f"], "isnr_h": score["isnr_h"], "seconds": seconds,
                           "iterations": fit.info["iterations"], "bounds": fit.info["start_bounds"],
                           "noise_sd": math.sqrt(fit.info["b_beta"] / fit.info["a_beta"])}
        h_in = bz.models.BID().initial_psf(shape)
        h_true, h_start = _fft.embed(h, shape), _fft.embed(h_in, shape)
        t0 = time.perf_counter()
        f_tv, h_tv, settings = tv_blind(g, h_in)
        rows["tv_blind"] = {"isnr_f": isnr(f, g, f_tv), "seconds": time.perf_counter() - t0,
                            "isnr_h": isnr(h_true, h_start, _fft.embed(h_tv, shape)), **settings}
        sweep = {}
        for factor in TV_SWEEP:
            f_tv, h_tv, _ = tv_blind(g, h_in, lam_h_factor=factor)
            sweep[factor] = (isnr(f, g, f_tv), isnr(h_true, h_start, _fft.embed(h_tv, shape)))
        best = max(sweep, key=lambda k: sweep[k][0])
        rows["tv_blind, oracle lam_h"] = {"isnr_f": sweep[best][0], "isnr_h": sweep[best][1], "lam_h_factor": best,
                                          "seconds": rows["tv_blind"]["seconds"],
                                          "sweep": {str(k): v for k, v in sweep.items()}}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            f_rl = _richardson_lucy_circular(g, h, num_iter=RL_ITER)
            rows["richardson_lucy (true PSF)"] = {"isnr_f": isnr(f, g, f_rl), "seconds": time.perf_counter() - t0}
            t0 = time.perf_counter()
            f_w, _ = unsupervised_wiener(g, h, clip=False, rng=0)
            rows["unsupervised_wiener (true PSF)"] = {"isnr_f": isnr(f, g, f_w), "seconds": time.perf_counter() - t0}
        rows["true noise sd"] = math.sqrt(data.meta["noise_var"])
        out[psf] = rows
    met = all(rows["vb StStSt"]["isnr_f"] >= max(rows["richardson_lucy (true PSF)"]["isnr_f"],
                                                   rows["unsupervised_wiener (true PSF)"]["isnr_f"]) - 2.0
              for rows in out.values())
    return {"name": "bid_peers", "results": out, "target": TARGET, "target_met": met}


# ---------------------------------------------------------------------------------------------- vb_sparse
SHAKE_IMAGES = ("cameraman", "coins", "astronaut", "text")
SHAKE_KERNELS = tuple(range(8))     # all of camera_shake_kernels() (sides 9 to 25)
SHAKE_SIZE = 256


def _aligned_ssd(f_hat, f):
    """Levin et al.'s (2009) measure (``models.bid.ssd_upto_shift``): the SSD at the best shift of the restoration,
    on a quarter-pixel grid up to 5 pixels, without a 15-pixel frame."""
    from bayeszoo.models.bid import ssd_upto_shift

    return ssd_upto_shift(f_hat, f)


def _nonblind(g, psf, noise_var, model):
    """The non-blind reference: HQS under the model's St image prior (``nonblind.hqs_restore``)."""
    from bayeszoo.inference.bid.nonblind import hqs_restore

    prior = model.precision_priors(g)
    return hqs_restore(g, psf, noise_var=noise_var, a=prior["a_gamma"], b=prior["b_gamma"])[0]


def run_sparse(psfs=("gaussian", "uniform", "motion")) -> dict:
    """(a) cameraman 256 x 256 at 40 dB: blind ``vb_sparse`` against the non-blind HQS with the true PSF under the
    same prior and the same (estimated) noise level; ISNR_f plain and up to a shift (``_aligned_ssd``, on the
    frame it compares)."""
    import bayeszoo as bz
    from bayeszoo.inference.bid.vb_sparse import mad_noise_sd
    from bayeszoo.models.bid import isnr, ssd_upto_shift

    out = {}
    for psf in psfs:
        data = bz.datasets.load("cameraman", psf=psf, snr_db=40, seed=0)
        f, h = data.meta["true_image"], data.meta["true_psf"]
        g = data.y.reshape(f.shape)
        model = bz.models.BID()
        t0 = time.perf_counter()
        fit = bz.fit(model, data, backend="vb_sparse", progress=False)
        seconds = time.perf_counter() - t0
        score = model.score(fit, data)
        f_hat = model.restored(fit)[0]
        sigma = mad_noise_sd(g)
        t0 = time.perf_counter()
        f_ref = _nonblind(g, h, sigma**2, model)
        ref_seconds = time.perf_counter() - t0
        base = ssd_upto_shift(g, f, max_shift=0)          # the same frame as the aligned SSD, unshifted
        out[psf] = {"isnr_f": score["isnr_f"], "isnr_h": score["isnr_h"],
                    "isnr_f_aligned": 10 * math.log10(base / _aligned_ssd(f_hat, f)),
                    "reference_isnr_f": isnr(f, g, f_ref),
                    "reference_isnr_f_aligned": 10 * math.log10(base / _aligned_ssd(f_ref, f)), "seconds": seconds,
                    "estimation_seconds": fit.info["estimation_seconds"],
                    "restoration_seconds": fit.info["restoration_seconds"], "reference_seconds": ref_seconds,
                    "noise_sd_estimate": sigma, "true_noise_sd": math.sqrt(data.meta["noise_var"])}
        out[psf]["gap"] = out[psf]["reference_isnr_f"] - out[psf]["isnr_f"]
        out[psf]["gap_aligned"] = out[psf]["reference_isnr_f_aligned"] - out[psf]["isnr_f_aligned"]
    return {"name": "bid_sparse", "results": out, "target": "vb_sparse ISNR_f within 1.5 dB of the non-blind HQS "
            f"with the true PSF ({', '.join(psfs)} blurs)", "target_met": all(r["gap"] <= 1.5 for r in out.values())}


def _estimate_psf(method, data, side):
    """The PSF window estimated by one blind method, normalised to sum 1."""
    import bayeszoo as bz

    g = data.y.reshape(data.meta["shape"])
    if method == "vb_sparse":
        model = bz.models.BID(psf_size=side)
        fit = bz.fit(model, data, backend="vb_sparse", progress=False)
        return model.restored(fit)[1]
    if method == "vb (thesis)":
        model = bz.models.BID()
        fit = bz.fit(model, data, backend="vb", draws=10, chains=1, progress=False)
        return model.restored(fit)[1]
    if method == "no deblurring":
        return np.ones((1, 1))
    h_in = bz.models.BID().initial_psf(g.shape)
    return tv_blind(g, h_in, support=max(side, 15))[1]


def run_shake(images=SHAKE_IMAGES, kernels=SHAKE_KERNELS, size=SHAKE_SIZE, snr_db=40.0,
              methods=("vb_sparse", "vb (thesis)", "tv_blind", "no deblurring")) -> dict:
    """(b) the camera-shake kernels on scikit-image grey images: error ratio SSD(restoration with the estimated
    PSF) / SSD(restoration with the true PSF), both by the same non-blind HQS with the same noise estimate, each
    at its best shift (``_aligned_ssd``). "no deblurring" hands HQS a delta PSF (a denoised g): the ratio any
    method must beat."""
    import bayeszoo as bz
    from bayeszoo.datasets.bid_data import camera_shake_kernels, degrade, image_problem
    from bayeszoo.inference.bid.vb_sparse import mad_noise_sd

    bank = camera_shake_kernels()
    rows = []
    for name in images:
        truth = bz.datasets.load(name, psf="gaussian", size=size).meta["true_image"]
        for ki in kernels:
            h = bank[ki]
            g, var = degrade(truth, h, snr_db, seed=ki)
            data = image_problem(g, name=f"{name}-k{ki}", true_image=truth, true_psf=h)
            sigma2 = mad_noise_sd(g) ** 2
            model = bz.models.BID()
            ssd_true = _aligned_ssd(_nonblind(g, h, sigma2, model), truth)
            for method in methods:
                t0 = time.perf_counter()
                try:
                    psf = _estimate_psf(method, data, h.shape[0] + 2)
                    ratio = _aligned_ssd(_nonblind(g, psf / psf.sum(), sigma2, model), truth) / ssd_true
                    error = None
                except Exception as exc:             # a failure is a result too: recorded, ratio inf
                    ratio, error = math.inf, f"{type(exc).__name__}: {exc}"
                rows.append({"image": name, "kernel": ki, "side": h.shape[0], "method": method, "ratio": ratio,
                             "seconds": time.perf_counter() - t0, "error": error})
    summary = {}
    for method in methods:
        r = np.array([row["ratio"] for row in rows if row["method"] == method])
        summary[method] = {"n": int(r.size), "success_2": float(np.mean(r <= 2)), "success_3": float(np.mean(r <= 3)),
                           "cumulative": {str(t): float(np.mean(r <= t)) for t in (1.5, 2, 2.5, 3, 4, 5, 10)},
                           "median_ratio": float(np.median(r))}
    return {"name": "bid_shake", "rows": rows, "summary": summary, "size": size, "snr_db": snr_db,
            "images": list(images), "kernels": list(kernels)}


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
            if not isinstance(r, dict):
                continue
            h = f", ISNR_h {r['isnr_h']:.2f} dB" if "isnr_h" in r else ""
            out.append((f"bid {psf} {label}", f"{r['isnr_f']:.2f} dB", f"ISNR_f{h}; {r['seconds']:.1f} s"))
    return out


def rows_sparse(result: dict) -> list[tuple[str, str, str]]:
    return [(f"bid vb_sparse {psf}", f"{r['isnr_f']:.2f} dB",
             f"HQS with the true PSF {r['reference_isnr_f']:.2f} dB (gap {r['gap']:.2f}); aligned "
             f"{r['isnr_f_aligned']:.2f} against {r['reference_isnr_f_aligned']:.2f}; {r['seconds']:.1f} s")
            for psf, r in result["results"].items()]


def rows_shake(result: dict) -> list[tuple[str, str, str]]:
    return [(f"bid shake {method}", f"{s['success_3']:.0%} at ratio 3",
             f"{s['success_2']:.0%} at ratio 2, median ratio {s['median_ratio']:.2f}, n = {s['n']}")
            for method, s in result["summary"].items()]


#: what benchmarks/run.py runs from this module: name -> what it measures, run(quick) and its table rows
BENCHMARKS = {
    "bid_scaling": {"about": "BID VB seconds per iteration at 128, 256, 512 pixels square against the M log M ratio",
                    "run": lambda quick: run_scaling(iterations=5, repeats=1) if quick else run_scaling(),
                    "rows": rows_scaling},
    "bid_peers": {"about": "BID VB (StStSt) vs richardson_lucy / unsupervised_wiener (true PSF) and TV-blind, "
                           "cameraman",
                  "run": lambda quick: run_peers(max_iter=30, psfs=("uniform",)) if quick else run_peers(),
                  "rows": rows_peers},
    "bid_sparse": {"about": "BID vb_sparse on the thesis's three blurs (cameraman 256) against HQS with the true PSF",
                   "run": lambda quick: run_sparse(psfs=("uniform",)) if quick else run_sparse(),
                   "rows": rows_sparse},
    "bid_shake": {"about": "BID camera-shake set: error ratios of vb_sparse, the thesis's vb, TV-blind (256 x 256)",
                  "run": lambda quick: (run_shake(images=("cameraman",), kernels=(0, 2), size=128,
                                                  methods=("vb_sparse",)) if quick else run_shake()),
                  "rows": rows_shake},
}


if __name__ == "__main__":
    import json
    import sys

    which = sys.argv[1] if len(sys.argv) > 1 else "both"
    res = {}
    if which in ("scaling", "both"):
        res["scaling"] = run_scaling()
    if which in ("peers", "both"):
        res["peers"] = run_peers()
    if which == "sparse":
        res["sparse"] = run_sparse()
    if which == "shake":
        res["shake"] = run_shake()
    if which == "shake128":
        res["shake"] = run_shake(size=128)
    print(json.dumps(res, indent=1, default=str))
