"""Non-blind restoration under the sparse-derivative prior of ``vb_sparse``, by half-quadratic splitting (HQS).

Given the PSF h and the noise variance s^2, the MAP image under a Student-t prior on the horizontal and vertical
first differences (the Gaussian scale mixture of ``BID``'s St image prior with its precisions integrated out)
minimises

    E(f) = |g - h * f|^2 / (2 s^2) + sum_k sum_i c log(b + (Q^k f)_i^2 / 2),      c = a + 1/2,

a non-convex objective when the differences exceed sqrt(2b). HQS (Geman & Yang 1995; Krishnan & Fergus 2009)
introduces z^k ~ Q^k f with the coupling (mu / 2) |z^k - Q^k f|^2 and alternates
* the z step: per pixel the scalar minimum of c log(b + z^2 / 2) + (mu / 2) (z - y)^2, whose stationary points
  are the real roots of z^3 - y z^2 + (2b + 2c / mu) z - 2 b y = 0 (the best of them is kept);
* the f step: (H^T H / s^2 + mu sum_k Q^kT Q^k) f = H^T g / s^2 + mu sum_k Q^kT z^k, diagonal in the Fourier
  domain (circular convolutions), so solved exactly by two FFTs;
while mu grows geometrically; as mu -> infinity the iterates approach a stationary point of E.

Used by ``vb_sparse`` for its final restoration and by ``benchmarks/bench_bid.py`` as the non-blind reference
given the true PSF.
"""
from __future__ import annotations

import numpy as np

from bayeszoo.numerics import fft as _fft

DIFFS = _fft.STENCILS["St"]   # horizontal and vertical first differences (5.10-5.11)


def student_penalty(s, a: float, b: float):
    """c log(b + s^2 / 2), c = a + 1/2: minus the log Student-t density of a difference, up to a constant."""
    return (a + 0.5) * np.log(b + 0.5 * s * s)


def objective(f, g, psf_otf, noise_var: float, a: float, b: float) -> float:
    """E(f) of the module docstring (the restoration's negative log posterior up to a constant)."""
    r = g - _fft.conv(f, psf_otf)
    return float(0.5 * np.sum(r * r) / noise_var
                 + sum(np.sum(student_penalty(_fft.apply_stencil(f, s), a, b)) for s in DIFFS))


def cubic_real_roots(p2, p1, p0):
    """The real roots of z^3 + p2 z^2 + p1 z + p0 = 0 (element-wise), as an (..., 3) array: three roots where the
    discriminant allows, else the single real root repeated. Cardano / trigonometric form, each root polished by
    two Newton steps."""
    shift = p2 / 3.0
    p = p1 - p2 * shift
    q = 2.0 * shift**3 - shift * p1 + p0
    disc = (0.5 * q) ** 2 + (p / 3.0) ** 3
    sq = np.sqrt(np.maximum(disc, 0.0))
    one = np.cbrt(-0.5 * q + sq) + np.cbrt(-0.5 * q - sq)
    m = np.sqrt(np.maximum(-p / 3.0, 0.0))
    safe = np.where(m > 0, m, 1.0)
    arg = np.clip(-0.5 * q / safe**3, -1.0, 1.0)
    theta = np.arccos(arg) / 3.0
    three = np.stack([2.0 * m * np.cos(theta - 2.0 * np.pi * k / 3.0) for k in range(3)], axis=-1)
    t = np.where((disc > 0)[..., None], one[..., None], three)
    z = t - shift[..., None]
    for _ in range(2):
        f = ((z + p2[..., None]) * z + p1[..., None]) * z + p0[..., None]
        df = (3.0 * z + 2.0 * p2[..., None]) * z + p1[..., None]
        z = z - np.where(df != 0, f / np.where(df != 0, df, 1.0), 0.0)
    return z


def shrink(y, mu: float, a: float, b: float):
    """argmin_z c log(b + z^2 / 2) + (mu / 2) (z - y)^2 for every element of y (the HQS z step).

    The minimiser is a real root of z^3 - y z^2 + (2b + 2c/mu) z - 2 b y = 0 (``cubic_real_roots``); the root with
    the lowest value is kept."""
    c = a + 0.5
    y = np.asarray(y, dtype=float)
    roots = cubic_real_roots(-y, np.full_like(y, 2.0 * b + 2.0 * c / mu), -2.0 * b * y)
    value = c * np.log(b + 0.5 * roots**2) + 0.5 * mu * (roots - y[..., None]) ** 2
    return np.take_along_axis(roots, np.argmin(value, axis=-1)[..., None], axis=-1)[..., 0]


def hqs_restore(g, psf, *, noise_var: float, a: float, b: float, mu_start: float | None = None,
                mu_end: float | None = None, mu_factor: float = 2.0, inner: int = 2, f0=None):
    """MAP restoration of ``g`` given the PSF window ``psf`` under the Student-t derivative prior (module doc).

    Parameters
    ----------
    g : degraded image (rows, cols), circular blur.
    psf : the PSF as an odd-sided centred window (it is used as given: normalise it beforehand).
    noise_var : the noise variance s^2 (in the image's intensity unit squared).
    a, b : the Gamma(a, b) hyperparameters of the difference precisions (b in the image's unit squared).
    mu_start, mu_end : the coupling's first and last values; by default 1e-2 and 1e4 times the penalty's largest
        curvature c / b, beyond which the split and the original objectives agree to within the f step's tolerance.
    mu_factor : growth of mu per stage; ``inner`` alternations per stage.
    f0 : the starting image (default g).

    Returns
    -------
    (f, trace): the restored image and E(f) after every stage.
    """
    g = np.asarray(g, dtype=float)
    shape = g.shape
    c = a + 0.5
    mu = c / b * 1e-2 if mu_start is None else float(mu_start)
    mu_end = c / b * 1e4 if mu_end is None else float(mu_end)
    h_otf = _fft.otf(psf, shape)
    q_otf = [_fft.rfft2(q) for q in _fft.difference_kernels(shape, "St")]
    qq = sum(np.abs(q) ** 2 for q in q_otf)
    hth = np.abs(h_otf) ** 2 / noise_var
    htg = np.conj(h_otf) * _fft.rfft2(g) / noise_var
    f = g.copy() if f0 is None else np.asarray(f0, dtype=float).copy()
    trace = []
    while True:
        for _ in range(inner):
            z = [shrink(_fft.apply_stencil(f, s), mu, a, b) for s in DIFFS]
            rhs = htg + mu * sum(np.conj(q) * _fft.rfft2(zk) for q, zk in zip(q_otf, z))
            f = _fft.irfft2(rhs / (hth + mu * qq + 1e-300), shape)
        trace.append(objective(f, g, h_otf, noise_var, a, b))
        if mu >= mu_end:
            break
        mu = min(mu * mu_factor, mu_end)
    return f, np.array(trace)
