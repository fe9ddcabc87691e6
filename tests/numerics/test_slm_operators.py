"""The SLM operators (bayeszoo.numerics.operators): adjointness, dense equivalence, orthonormality of the wavelet."""
from __future__ import annotations

import numpy as np
import pytest

from bayeszoo.numerics import operators as ops

RNG = np.random.default_rng(0)
MASK = RNG.random((8, 8)) < 0.3


def _cases():
    return [("identity", ops.identity((10,))), ("tv-1d", ops.finite_differences((10,))),
            ("tv-2d", ops.finite_differences((6, 8))), ("wavelet-1d", ops.wavelet((32,))),
            ("wavelet-2d", ops.wavelet((16, 8))), ("fourier-2d", ops.fourier_sampling((8, 8), MASK)),
            ("fourier-1d", ops.fourier_sampling((16,), np.arange(16) % 3 == 0)),
            ("matrix", ops.matrix(RNG.standard_normal((5, 7)))),
            ("wavelet+tv", ops.from_spec("wavelet+tv", (8, 8))),
            ("stack", ops.stack(ops.fourier_sampling((8, 8), MASK), ops.wavelet((8, 8), level=2)))]


@pytest.mark.parametrize("name,op", _cases(), ids=[c[0] for c in _cases()])
def test_adjoint_and_dense_equivalence(name, op):
    rng = np.random.default_rng(1)
    A = ops.to_dense(op)
    assert A.shape == op.shape
    for _ in range(3):
        x, y = rng.standard_normal(op.shape[1]), rng.standard_normal(op.shape[0])
        assert y @ (op @ x) == pytest.approx(x @ (op.H @ y), rel=1e-12, abs=1e-12)
        np.testing.assert_allclose(op @ x, A @ x, atol=1e-12)
        np.testing.assert_allclose(op.H @ y, A.T @ y, atol=1e-12)


@pytest.mark.parametrize("shape,level", [((16,), None), ((64,), 3), ((8, 8), None), ((16, 32), 2), ((32, 32), 3)])
def test_wavelet_is_orthonormal(shape, level):
    W = ops.to_dense(ops.wavelet(shape, level))
    n = W.shape[0]
    np.testing.assert_allclose(W.T @ W, np.eye(n), atol=1e-12)
    np.testing.assert_allclose(W @ W.T, np.eye(n), atol=1e-12)


def test_wavelet_is_daubechies_4():
    """One level on a length-8 signal: the coarse coefficients are the 4-tap filter of §5.4 (circularly)."""
    s3 = np.sqrt(3.0)
    h = np.array([1 + s3, 3 + s3, 3 - s3, 1 - s3]) / np.sqrt(32.0)
    W = ops.to_dense(ops.wavelet((8,), level=1))
    rows = {tuple(np.round(np.sort(np.abs(r[np.abs(r) > 1e-12])), 12)) for r in W[:4]}
    assert rows == {tuple(np.round(np.sort(np.abs(h)), 12))}


def test_coarse_to_fine_orders_the_bands_as_the_wavelet_heuristic_measures_them():
    import pywt

    x = np.random.default_rng(0).standard_normal(256)
    W = ops.wavelet((16, 16), level=2)
    order = W.coarse_to_fine()
    assert sorted(order) == list(range(256))
    cA, (cH2, cV2, cD2), (cH1, cV1, cD1) = pywt.wavedec2(x.reshape(16, 16), "db2", "periodization", 2)
    expected = np.concatenate([band.ravel() for band in (cA, cH2, cV2, cD2, cH1, cV1, cD1)])
    np.testing.assert_allclose((W @ x)[order], expected, atol=1e-12)
    np.testing.assert_array_equal(ops.wavelet(64, level=3).coarse_to_fine(), np.arange(64))


def test_finite_differences_have_the_thesis_rows():
    D = ops.difference_matrix((5, 5)).toarray()
    assert D.shape == (2 * (25 - 5), 25)
    assert set(np.unique(D)) <= {-1.0, 0.0, 1.0}
    np.testing.assert_allclose(D @ np.ones(25), 0.0)
    img = np.arange(25.0).reshape(5, 5)
    np.testing.assert_allclose(D[:20] @ img.ravel(), np.diff(img, axis=1).ravel())
    np.testing.assert_allclose(D[20:] @ img.ravel(), np.diff(img, axis=0).ravel())


def test_fourier_rows_are_the_orthonormal_dft():
    n = 8
    mask = np.zeros((n, n), bool)
    mask[0, 0] = mask[1, 2] = mask[3, 5] = True
    F = ops.to_dense(ops.fourier_sampling((n, n), mask))
    dft = np.kron(np.fft.fft(np.eye(n), norm="ortho"), np.fft.fft(np.eye(n), norm="ortho"))[mask.ravel()]
    np.testing.assert_allclose(F, np.vstack([dft.real, dft.imag]), atol=1e-12)


def test_bad_specs():
    with pytest.raises(ValueError, match="multiple of"):
        ops.wavelet((12,), level=3)
    with pytest.raises(ValueError, match="unknown operator"):
        ops.from_spec("curvelet", (8,))
    with pytest.raises(ValueError, match="mask"):
        ops.fourier_sampling((8, 8), np.ones((4, 4), bool))
    with pytest.raises(ValueError, match="same number of columns"):
        ops.stack(ops.identity((4,)), ops.identity((5,)))
