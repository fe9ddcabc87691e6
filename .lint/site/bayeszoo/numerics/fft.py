"""Fourier-domain numerics of the image models: blind deconvolution (Tzikas PhD ch. 5; digest §5.8) and the
multikernel image RVM (ch. 4).

Every convolution in the model is 2-D and circular (5.1), so every convolution matrix (H, F, Phi, Q^k) is
block-circulant and diagonalised by the 2-D DFT. Arrays are images of shape (rows, cols), optionally with
leading batch axes (chains); transforms act on the last two axes. A kernel is stored as its "OTF", the real
2-D FFT (``scipy.fft.rfft2``) of the kernel embedded in an image-sized array with its centre at pixel (0, 0).

Matrix-free products: ``conv(x, otf)`` is K x and ``corr(x, otf)`` is K^T x. ``circulant_quad(a, c)`` is
a^T C a for the circulant C with eigenvalues ``c``; ``pcg`` solves a symmetric positive-definite system given
a matrix-free product and a preconditioner (the thesis's diagonal / circulant covariance approximations).
"""
from __future__ import annotations

import numpy as np
import scipy.fft as sfft

WORKERS = 1  # scipy.fft threads (one: the chains / backends of a comparison already share the cores)


try:   # pocketfft itself: scipy.fft's own transforms bit for bit, without its per-call argument handling, which
    # costs more than the transform of a small image and dominated the samplers' CG loops on crops
    from scipy.fft._pocketfft import pypocketfft as _pocketfft
except ImportError:            # pragma: no cover  (a scipy that moved it: the public functions below)
    _pocketfft = None


def _pocketfft_agrees() -> bool:
    """Whether the private call still means what it meant (its signature is scipy's internal business): the public
    transforms, bit for bit, on a small image; otherwise every call goes through scipy.fft."""
    x = np.arange(12.0).reshape(3, 4) ** 1.5
    try:
        X = _pocketfft.r2c(x, (-2, -1), True, 0, None, 1)
        back = _pocketfft.c2r(X, (-2, -1), 4, False, 2, None, 1)
    except Exception:          # pragma: no cover
        return False
    return np.array_equal(X, sfft.rfft2(x)) and np.array_equal(back, sfft.irfft2(sfft.rfft2(x), s=(3, 4)))


if _pocketfft is not None and not _pocketfft_agrees():   # pragma: no cover
    _pocketfft = None


def rfft2(x):
    if _pocketfft is not None and isinstance(x, np.ndarray) and x.dtype == np.float64 and x.ndim >= 2:
        return _pocketfft.r2c(x, (-2, -1), True, 0, None, WORKERS)
    return sfft.rfft2(x, workers=WORKERS)


def irfft2(X, shape):
    if (_pocketfft is not None and isinstance(X, np.ndarray) and X.dtype == np.complex128 and X.ndim >= 2
            and X.shape[-2] == shape[0] and X.shape[-1] == shape[1] // 2 + 1):
        return _pocketfft.c2r(X, (-2, -1), shape[1], False, 2, None, WORKERS)
    return sfft.irfft2(X, s=shape, workers=WORKERS)


def embed(kernel: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """An odd-sized kernel window placed in an image of ``shape`` with its centre at pixel (0, 0) (circularly)."""
    kernel = np.asarray(kernel, dtype=float)
    kr, kc = kernel.shape
    if kr % 2 == 0 or kc % 2 == 0:
        raise ValueError(f"kernel window must have odd sides, got {kernel.shape}")
    if kr > shape[0] or kc > shape[1]:
        raise ValueError(f"kernel window {kernel.shape} is larger than the image {shape}")
    out = np.zeros(shape)
    rows = (np.arange(kr) - kr // 2) % shape[0]
    cols = (np.arange(kc) - kc // 2) % shape[1]
    out[np.ix_(rows, cols)] = kernel
    return out


def window(image: np.ndarray, side: int) -> np.ndarray:
    """The centred ``side`` x ``side`` window (odd side) around pixel (0, 0) of a circular image (inverse of embed)."""
    shape = image.shape[-2:]
    rows = (np.arange(side) - side // 2) % shape[0]
    cols = (np.arange(side) - side // 2) % shape[1]
    return image[..., rows[:, None], cols[None, :]]


def otf(kernel: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """rfft2 of a centred kernel window embedded in an image of ``shape``."""
    return rfft2(embed(kernel, shape))


def conv(x: np.ndarray, kernel_otf: np.ndarray) -> np.ndarray:
    """Circular convolution K x (batched over leading axes)."""
    return irfft2(rfft2(x) * kernel_otf, x.shape[-2:])


def corr(x: np.ndarray, kernel_otf: np.ndarray) -> np.ndarray:
    """Circular correlation K^T x, the adjoint of :func:`conv`."""
    return irfft2(rfft2(x) * np.conj(kernel_otf), x.shape[-2:])


def circular_distance2(shape: tuple[int, int]) -> np.ndarray:
    """Squared circular distance of every pixel to pixel (0, 0)."""
    r = np.arange(shape[0])
    c = np.arange(shape[1])
    dr = np.minimum(r, shape[0] - r).astype(float)
    dc = np.minimum(c, shape[1] - c).astype(float)
    return dr[:, None] ** 2 + dc[None, :] ** 2


def gaussian_basis(shape: tuple[int, int], sigma2: float) -> np.ndarray:
    """phi = exp(-|x|^2 / (2 sigma_phi^2)) centred at (0, 0) over the whole circular image (PSF kernel, §5.2)."""
    return np.exp(-circular_distance2(shape) / (2.0 * sigma2))


# --------------------------------------------------------------------------- image-prior filters (5.10-5.11, 5.54)
def difference_kernels(shape: tuple[int, int], variant_image: str) -> list[np.ndarray]:
    """Image-sized kernels q^k with Q^k f = q^k * f.

    ``"St"``: first-order differences eps^1 = f(x, y) - f(x+1, y) (5.10), eps^2 = f(x, y) - f(x, y+1) (5.11)
    (x = row, y = column). ``"G"``: the SAR / Laplacian operator 4 f(x, y) minus its four neighbours (5.54).
    """
    R, C = shape
    if variant_image == "St":
        q1 = np.zeros(shape)
        q1[0, 0], q1[R - 1, 0] = 1.0, -1.0        # (q * f)(i) = f(i) - f(i + 1 row)
        q2 = np.zeros(shape)
        q2[0, 0], q2[0, C - 1] = 1.0, -1.0
        return [q1, q2]
    lap = np.zeros(shape)
    lap[0, 0] = 4.0
    for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1)):
        lap[dr % R, dc % C] -= 1.0
    return [lap]


# the same filters as stencils (row offset, column offset, coefficient): (Q f)(i) = sum c f(i + offset). Applied
# by shifts in O(M), a quarter of the cost of the two FFTs of the spectral product, inside every CG iteration.
STENCILS = {"St": [((0, 0, 1.0), (1, 0, -1.0)), ((0, 0, 1.0), (0, 1, -1.0))],
            "G": [((0, 0, 4.0), (1, 0, -1.0), (-1, 0, -1.0), (0, 1, -1.0), (0, -1, -1.0))]}


def _shifted(x: np.ndarray, dr: int, dc: int) -> np.ndarray:
    """x(i + (dr, dc)) circularly over the last two axes: ``np.roll(x, (-dr, -dc), axis=(-2, -1))``; a shift along
    one axis by concatenation, which costs a quarter of np.roll's generic set-up on a small image."""
    if dr and dc:
        return np.roll(x, (-dr, -dc), axis=(-2, -1))
    axis = -2 if dr else -1
    k = (dr or dc) % x.shape[axis]
    if axis == -2:
        return np.concatenate((x[..., k:, :], x[..., :k, :]), axis=-2)
    return np.concatenate((x[..., k:], x[..., :k]), axis=-1)


def apply_stencil(x: np.ndarray, stencil) -> np.ndarray:
    """Q x for a filter given as a stencil (batched over leading axes); equals conv with its difference kernel."""
    out = None
    for dr, dc, c in stencil:
        term = c * _shifted(x, dr, dc) if (dr or dc) else c * x
        out = term if out is None else out + term
    return out


def adjoint_stencil(x: np.ndarray, stencil) -> np.ndarray:
    """Q^T x (circular correlation with the filter)."""
    return apply_stencil(x, [(-dr, -dc, c) for dr, dc, c in stencil])


def circulant_quad(a_hat: np.ndarray, eig: np.ndarray, shape) -> np.ndarray:
    """a^T C a for a circulant C with rfft2-domain eigenvalues ``eig``, from ``a_hat = rfft2(a)``.

    Parseval with the half spectrum: full-spectrum sum = 2 * half-sum minus the self-conjugate columns.
    """
    return spectrum_sum(np.abs(a_hat) ** 2 * eig, shape) / (shape[0] * shape[1])


def spectrum_sum(values: np.ndarray, shape) -> np.ndarray:
    """Sum of a Hermitian-symmetric full 2-D spectrum given its rfft2 half (last axis of length C // 2 + 1)."""
    C = shape[1]
    total = 2.0 * values.sum(axis=(-2, -1)) - values[..., 0].sum(-1)
    if C % 2 == 0:
        total = total - values[..., -1].sum(-1)
    return total


# ------------------------------------------------------------------------------------------------ solver
def dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per-image inner product over the last two axes (one value per leading index)."""
    return np.einsum("...ij,...ij->...", a, b)


def pcg(apply_A, b: np.ndarray, precond, x0: np.ndarray, *, max_iter: int, tol: float):
    """Preconditioned conjugate gradients for A x = b, batched over leading axes.

    Stops when every ``|r| <= tol |b|`` or after ``max_iter`` iterations. Returns ``(x, iterations,
    relative residual per batch entry)``.
    """
    x = x0.copy()
    r = b - apply_A(x)
    z = precond(r)
    p = z.copy()
    rz = dot(r, z)
    b_norm = np.sqrt(dot(b, b))
    b_norm = np.where(b_norm > 0, b_norm, 1.0)
    rel = np.sqrt(dot(r, r)) / b_norm
    it = 0
    while it < max_iter and np.any(rel > tol):
        Ap = apply_A(p)
        pAp = dot(p, Ap)
        step = np.where(pAp > 0, rz / np.where(pAp > 0, pAp, 1.0), 0.0)
        x = x + step[..., None, None] * p
        r = r - step[..., None, None] * Ap
        z = precond(r)
        rz_new = dot(r, z)
        beta = np.where(rz > 0, rz_new / np.where(rz > 0, rz, 1.0), 0.0)
        p = z + beta[..., None, None] * p
        rz = rz_new
        rel = np.sqrt(dot(r, r)) / b_norm
        it += 1
    return x, it, rel
