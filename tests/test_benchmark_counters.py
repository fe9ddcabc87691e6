"""The work counters of the roofline benchmark (benchmarks/bench_roofline.py) count what the code runs."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))

import bench_roofline as roofline  # noqa: E402
from _kernels import FLOPS  # noqa: E402


def test_fft_counter_counts_each_transform_and_batch():
    from bayeszoo.numerics import fft as _fft

    x = np.random.default_rng(0).standard_normal((3, 8, 6))
    otf = _fft.otf(np.ones((3, 3)) / 9.0, (8, 6))
    with roofline.counted_ffts() as counts:
        _fft.conv(x[0], otf)                 # one forward and one inverse transform
        _fft.irfft2(_fft.rfft2(x), (8, 6))   # a batch of three of each
    assert counts == {("fft", 8, 6): 4, ("ifft", 8, 6): 4}
    # the module's own functions are back once the block ends
    with roofline.counted_ffts() as later:
        pass
    _fft.rfft2(x[0])
    assert later == {}


def test_operator_counter_counts_products_and_adjoint_products():
    import pylops

    counts = {}
    A = np.arange(12.0).reshape(3, 4)
    X = roofline._Counted(pylops.MatrixMult(A), "X", counts)
    v = np.ones(4)
    np.testing.assert_allclose(X.H @ (X @ v), A.T @ (A @ v))
    X @ v
    assert counts == {"X": 2, "X^T": 1}
    assert X.shape == (3, 4)


def test_per_iteration_difference_and_flop_counts():
    calls = []
    secs = roofline.per_iteration(lambda k: calls.append(k), 2, 7, repeats=2)
    assert calls == [2, 7, 2, 7] and secs >= 0.0
    assert FLOPS["chol"](300) == pytest.approx(9e6)
    assert FLOPS["gemm"](2, 3, 4) == 48.0
    assert FLOPS["fft"](4, 4) == pytest.approx(2.5 * 16 * 4)
