"""Linear operators of the sparse linear model (Nickisch thesis §5.2, §6.1): PyLops ``LinearOperator`` objects.

Every operator is real (float64) and acts on the unknown ``u`` flattened row-major from its ``shape`` (``(n,)`` for
a signal, ``(rows, cols)`` for an image); ``op @ x`` / ``op.matvec`` and ``op.H @ y`` / ``op.rmatvec`` apply it and
its transpose, ``to_dense(op)`` gives the matrix for small sizes.

* :func:`identity`                 I_n;
* :func:`finite_differences`       forward differences without wrap-around: n - 1 rows for a signal; for an image
                                   the horizontal then the vertical differences, 2 (n - sqrt n) rows for a square
                                   image (the D of (5.2), entries in {-1, 0, +1});
* :func:`wavelet`                  the orthonormal Daubechies-4 transform (PyWavelets ``db2``, the 4-tap filter
                                   [1+sqrt3, 3+sqrt3, 3-sqrt3, 1-sqrt3] / sqrt 32 of §5.4) with periodic extension
                                   (``mode='periodization'``), so W^T W = W W^T = I;
* :func:`fourier_sampling`         rows of the orthonormal 2-D (or 1-D) DFT on a boolean mask, the real parts
                                   stacked over the imaginary parts, so the operator and its data are real;
* :func:`matrix`                   a dense (or scipy sparse) matrix;
* :func:`stack`                    the vertical stack [A_1; A_2; ...].

:func:`from_spec` builds an operator from a JSON-able spec (a name or a dict), which is how a model or a dataset
names an operator without holding it: ``"identity"``, ``"tv"``, ``"wavelet"``, ``"wavelet+tv"``,
``{"kind": "wavelet", "level": 3}``, ``{"kind": "fourier", "mask": [[...]]}``.
"""
from __future__ import annotations

import warnings

import numpy as np
import pylops
import pywt
from scipy import sparse

WAVELET = "db2"          # PyWavelets' name for the 4-tap Daubechies filter (the thesis's "Daubechies 4")
WAVELET_MODE = "periodization"
NAMES = ("identity", "tv", "wavelet", "wavelet+tv")
DENSE_LIMIT = 20_000_000   # entries of the largest matrix to_dense builds


def _shape(shape) -> tuple[int, ...]:
    shape = tuple(int(v) for v in np.atleast_1d(shape))
    if len(shape) not in (1, 2) or min(shape) < 1:
        raise ValueError(f"operator shape must be (n,) or (rows, cols) with positive sizes, got {shape}")
    return shape


def identity(shape) -> pylops.LinearOperator:
    return pylops.Identity(int(np.prod(_shape(shape))), dtype="float64")


def matrix(A) -> pylops.LinearOperator:
    """A dense array or scipy sparse matrix as an operator."""
    if not sparse.issparse(A):
        A = np.asarray(A, dtype=float)
        if A.ndim != 2:
            raise ValueError(f"an operator matrix must be 2-D, got shape {A.shape}")
    return pylops.MatrixMult(A, dtype="float64")


def difference_matrix(shape) -> sparse.csr_matrix:
    """The sparse forward-difference matrix: (s[i+1] - s[i]) for a signal; horizontal (along columns) then
    vertical (along rows) differences for an image."""
    shape = _shape(shape)

    def d1(k):
        return sparse.diags([-np.ones(k - 1), np.ones(k - 1)], [0, 1], shape=(k - 1, k))

    if len(shape) == 1:
        return d1(shape[0]).tocsr()
    R, C = shape
    horizontal = sparse.kron(sparse.eye(R), d1(C))
    vertical = sparse.kron(d1(R), sparse.eye(C))
    return sparse.vstack([horizontal, vertical]).tocsr()


def finite_differences(shape) -> pylops.LinearOperator:
    """Forward differences (total variation's D): see :func:`difference_matrix`."""
    shape = _shape(shape)
    if int(np.prod(shape)) < 2:
        raise ValueError(f"finite differences need at least two entries, got shape {shape}")
    return matrix(difference_matrix(shape))


def default_level(shape) -> int:
    """Wavelet depth: the most levels that divide every side evenly and leave a coarsest band of at least 4 per side
    (the thesis uses 6 levels at 256 x 256)."""
    level = 0
    while all(k % 2 ** (level + 1) == 0 and k // 2 ** (level + 1) >= 4 for k in shape):
        level += 1
    return level


class Wavelet(pylops.LinearOperator):
    """Orthonormal periodised Daubechies wavelet analysis W (square, n x n): coefficients in PyWavelets' order
    (``coeffs_to_array`` layout for images), coarsest band first; the transpose is the synthesis."""

    def __init__(self, shape, level: int | None = None, wavelet: str = WAVELET):
        shape = _shape(shape)
        level = default_level(shape) if level is None else int(level)
        if level < 1 or any(k % 2**level for k in shape):
            raise ValueError(f"the wavelet transform with {level} level(s) needs every side of {shape} to be a "
                             f"multiple of 2^{level}; choose another size or level")
        self.image_shape, self.level, self.wavelet = shape, level, wavelet
        n = int(np.prod(shape))
        if len(shape) == 2:   # the coefficient layout, fixed by the shape
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                zeros = pywt.wavedec2(np.zeros(shape), wavelet, WAVELET_MODE, level)
            _, self._slices = pywt.coeffs_to_array(zeros)
        super().__init__(dtype=np.dtype("float64"), shape=(n, n), name="W")

    def coarse_to_fine(self) -> np.ndarray:
        """Indices of the coefficients from the coarsest to the finest band: the approximation, then per level
        (coarse first) the horizontal, vertical and diagonal details, each band row-major. The wavelet heuristic
        design of Nickisch §5.4 measures the coefficients in this order."""
        n = self.shape[0]
        if len(self.image_shape) == 1:
            return np.arange(n)    # PyWavelets' wavedec order is already coarse to fine
        index = np.arange(n).reshape(self.image_shape)
        approx, *levels = self._slices
        # PyWavelets' keys name the filter per axis: 'da' (detail along rows) is the horizontal band cH
        bands = [index[approx]] + [index[level[key]] for level in levels for key in ("da", "ad", "dd")]
        return np.concatenate([band.ravel() for band in bands])

    def _matvec(self, x):
        with warnings.catch_warnings():     # pywt warns of "boundary effects" that periodization does not have
            warnings.simplefilter("ignore", UserWarning)
            return self._analysis(x)

    def _rmatvec(self, c):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return self._synthesis(c)

    def _analysis(self, x):
        x = np.asarray(x, dtype=float).reshape(self.image_shape)
        if len(self.image_shape) == 1:
            return np.concatenate(pywt.wavedec(x, self.wavelet, WAVELET_MODE, self.level))
        arr, _ = pywt.coeffs_to_array(pywt.wavedec2(x, self.wavelet, WAVELET_MODE, self.level))
        return arr.ravel()

    def _synthesis(self, c):
        c = np.asarray(c, dtype=float)
        if len(self.image_shape) == 1:
            n = self.image_shape[0]
            sizes = [n // 2**self.level] + [n // 2**k for k in range(self.level, 0, -1)]
            coeffs = np.split(c, np.cumsum(sizes)[:-1])
            return pywt.waverec(coeffs, self.wavelet, WAVELET_MODE)
        coeffs = pywt.array_to_coeffs(c.reshape(self.image_shape), self._slices, output_format="wavedec2")
        return pywt.waverec2(coeffs, self.wavelet, WAVELET_MODE).ravel()


def wavelet(shape, level: int | None = None) -> Wavelet:
    """The orthonormal Daubechies-4 transform of a signal or image (``level`` None: :func:`default_level`)."""
    return Wavelet(shape, level)


class FourierSampling(pylops.LinearOperator):
    """x -> [Re (F x)[mask]; Im (F x)[mask]] with F the orthonormal DFT of the signal / image (``norm='ortho'``).

    The rows are real, so data and operator stay real. For real x the DFT is Hermitian-symmetric: a mask holding
    both k and -k measures the same numbers twice, and the imaginary rows at self-conjugate frequencies (0, Nyquist)
    are zero; a design that wants independent rows keeps one of each pair.
    """

    def __init__(self, shape, mask):
        shape = _shape(shape)
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != shape:
            raise ValueError(f"the Fourier sampling mask must have the signal's shape {shape}, got {mask.shape}")
        self.image_shape, self.mask = shape, mask
        k = int(mask.sum())
        super().__init__(dtype=np.dtype("float64"), shape=(2 * k, int(np.prod(shape))), name="F")

    def _fft(self, x):
        return np.fft.fftn(x, norm="ortho")

    def _matvec(self, x):
        z = self._fft(np.asarray(x, dtype=float).reshape(self.image_shape))[self.mask]
        return np.concatenate([z.real, z.imag])

    def _rmatvec(self, y):
        # <Re z, a> + <Im z, b> = Re <a + i b, F x> = <Re F^H (a + i b), x> for real x
        y = np.asarray(y, dtype=float)
        k = y.size // 2
        full = np.zeros(self.image_shape, dtype=complex)
        full[self.mask] = y[:k] + 1j * y[k:]
        return np.fft.ifftn(full, norm="ortho").real.ravel()


def fourier_sampling(shape, mask) -> FourierSampling:
    return FourierSampling(shape, mask)


def stack(*ops) -> pylops.LinearOperator:
    """[A_1; A_2; ...]: the operators must have the same number of columns."""
    cols = {op.shape[1] for op in ops}
    if len(cols) != 1:
        raise ValueError(f"stacked operators need the same number of columns, got {sorted(cols)}")
    return ops[0] if len(ops) == 1 else pylops.VStack(list(ops), dtype="float64")


def to_dense(op) -> np.ndarray:
    """The matrix of ``op`` (for small sizes: a ValueError above :data:`DENSE_LIMIT` entries)."""
    if op.shape[0] * op.shape[1] > DENSE_LIMIT:
        raise ValueError(f"operator of shape {op.shape} is too large to form densely")
    if isinstance(op, pylops.MatrixMult):
        A = op.A
        return np.asarray(A.toarray() if sparse.issparse(A) else A, dtype=float)
    return np.asarray(op.todense(), dtype=float)


def from_spec(spec, shape) -> pylops.LinearOperator:
    """The operator a JSON-able spec names, on unknowns of ``shape``.

    ``"identity"``, ``"tv"`` (finite differences), ``"wavelet"``, ``"wavelet+tv"`` (W stacked over D), a list of
    specs (their stack), or a dict ``{"kind": ..., ...}``: ``{"kind": "wavelet", "level": L}``,
    ``{"kind": "fourier", "mask": boolean array or nested list}``, ``{"kind": "matrix", "matrix": nested list}``.
    """
    shape = _shape(shape)
    if isinstance(spec, str):
        if spec == "identity":
            return identity(shape)
        if spec == "tv":
            return finite_differences(shape)
        if spec == "wavelet":
            return wavelet(shape)
        if spec == "wavelet+tv":
            return stack(wavelet(shape), finite_differences(shape))
        raise ValueError(f"unknown operator {spec!r}; named operators: {NAMES}")
    if isinstance(spec, (list, tuple)):
        return stack(*(from_spec(s, shape) for s in spec))
    if isinstance(spec, dict):
        kind = spec.get("kind")
        if kind == "wavelet":
            return wavelet(shape, spec.get("level"))
        if kind == "fourier":
            return fourier_sampling(shape, spec["mask"])
        if kind == "matrix":
            return matrix(np.asarray(spec["matrix"], dtype=float))
        if kind in NAMES:
            return from_spec(kind, shape)
        raise ValueError(f"unknown operator kind {kind!r}; kinds: wavelet, fourier, matrix, {', '.join(NAMES)}")
    raise ValueError(f"an operator spec is a name, a list of specs or a dict with 'kind', got {type(spec).__name__}")
