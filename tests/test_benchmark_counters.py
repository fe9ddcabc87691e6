"""The work counters of the roofline benchmark (benchmarks/bench_roofline.py) count what the code runs."""
from __future__ import annotations


import numpy as np
import pytest

import bayeszoo as bz
import bench_roofline as roofline
from _kernels import FLOPS


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

    def work(k):   # CPU time in proportion to k
        calls.append(k)
        sum(range(k * 300_000))

    secs = roofline.per_iteration(work, 2, 7, repeats=2)
    assert calls == [2, 7, 2, 7] and secs > 0.0
    # a longer run that is not slower is noise, not a zero (which would pass any bound)
    with pytest.raises(RuntimeError, match="took no longer"):
        roofline.per_iteration(lambda k: sum(range((10 - k) * 300_000)), 2, 7, repeats=1)
    assert FLOPS["chol"](300) == pytest.approx(9e6)
    assert FLOPS["gemm"](2, 3, 4) == 48.0
    assert FLOPS["fft"](4, 4) == pytest.approx(2.5 * 16 * 4)


def test_fast_rvm_counter_follows_the_actions_and_the_model_size():
    from bayeszoo.inference.rvm import core, fast

    data = bz.datasets.load("sinc", n=60, seed=0)
    model = bz.models.RVM(width=3.0, a=1.0, b=1e-2, c=1.0, d=1e-3)
    originals = (fast._best_action, fast._added, fast._reestimated, fast._deleted, fast._gram_columns, core.Gaussian,
                 core.best_alpha)
    with roofline.counted_fast_rvm() as events:
        info = bz.fit(model, data, backend="fast", draws=10, chains=1, seed=0, progress=False, max_iter=150,
                      beta_every=3).info
    assert (fast._best_action, fast._added, fast._reestimated, fast._deleted, fast._gram_columns, core.Gaussian,
            core.best_alpha) == originals
    kinds = [e[0] for e in events]
    actions = info["actions"]
    assert kinds.count("score") == info["iterations"]          # every step scores the candidates once
    for action in roofline._RANK_ONE:
        assert kinds.count(action) == actions[action]
    assert actions["reestimate"] > 0                          # the run exercises every kind of step it can
    # a factorisation at the start, at the end, per new beta and per joint step tried (kept or not)
    assert kinds.count("factor") >= 2 + actions["beta"] + actions["joint"]
    # a Gram column for the first basis and for each basis added, except one that was in the model before
    columns = sum(e[1] for e in events if e[0] == "gram")
    assert 1 + actions["add"] - actions["delete"] <= columns <= 1 + actions["add"]
    # replaying the actions gives the model size every event reports
    K = 1
    for e in events:
        if e[0] in ("score", "factor", *roofline._RANK_ONE):
            assert e[1] == K
        K += {"add": 1, "delete": -1}.get(e[0], 0)
    assert events[-1] == ("factor", info["n_relevant"])
    scores = [e for e in events if e[0] == "score"]
    assert all(e[2] == model.n_basis(data) and 1 <= e[3] and 1 <= e[4] <= 100 for e in scores)


def test_fast_rvm_work_interpolates_between_sizes_and_subtracts_the_shorter_run():
    from bayeszoo.inference.rvm.core import BRACKET_GRID

    N, M, grid = 50, 40, BRACKET_GRID.size
    add_10, add_20 = roofline._fast_event_work(("add", 10), N, M), roofline._fast_event_work(("add", 20), N, M)
    assert (1, "gemv", M, 10) in add_10 and (1, "gemv", 10, 10) in add_10
    # an add at K = 15 is half the work at 10 and half at 20; the final factorisation at 20 has no new beta, the
    # shorter run's final one (at 10) is taken off; over 2 steps
    window = [("score", 10, M, 30, 4), ("add", 15), ("gram", 1), ("factor", 20)]
    work = {tuple(size): c for c, *size in roofline._fast_work(window, N, M, np.array([10, 20]), 2, minus_factor=10)}
    assert work["gemv", M, 10] == pytest.approx((0.5 - 1) / 2) and work["gemv", M, 20] == pytest.approx(0.25 + 0.5)
    assert work["chol", 20] == pytest.approx(0.5) and work["chol", 10] == pytest.approx(-0.5)
    assert work["gemv", N, M] == pytest.approx(0.5) and ("gemv", N, 20) not in work
    assert work["gemm", M, 3, grid] == pytest.approx(0.5)
    score = roofline._fast_event_work(window[0], N, M)[1][2]
    assert score == 3 * 8 * grid * M + 10 * 3 * 8 * M + 3 * 8 * 30 * (28 * 4 + 30)
    streamed = [c * size[0] for c, kernel, *size in roofline._fast_work(window, N, M, np.array([10, 20]), 2, 10)
                if kernel == "stream"]
    expected = sum(roofline._fast_event_work(e, N, M)[-1][2] for e in (window[0], window[2]))
    expected += 0.5 * (add_10[-1][2] + add_20[-1][2])
    expected += roofline._fast_event_work(("factor", 20), N, M)[-1][2]
    expected -= roofline._fast_event_work(("factor", 10), N, M)[-1][2]
    assert streamed == [pytest.approx(expected / 2)]


def test_best_alpha_reports_its_work_and_the_same_answer():
    """``counts`` receives the maxima bracketed and the Newton iterations; the answer is the one without it. Without
    a prior (a = b = 0) f_i has one maximum, at s^2 / (q^2 - s), when q^2 > s and none otherwise [T 3.7-3.8]."""
    from bayeszoo.inference.rvm import core

    s, q2 = np.array([1.0, 2.0, 1.0]), np.array([3.0, 1.0, 5.0])
    counts = {}
    alpha, f = core.best_alpha(s, q2, 0.0, 0.0, counts=counts)
    np.testing.assert_allclose(alpha, [0.5, np.inf, 0.25], rtol=1e-12)
    np.testing.assert_array_equal(core.best_alpha(s, q2, 0.0, 0.0), (alpha, f))
    assert counts["crossings"] == 2 and 1 <= counts["newton"] <= 100
    core.best_alpha(np.array([2.0]), np.array([1.0]), 0.0, 0.0, counts=counts)
    assert counts == {"crossings": 0, "newton": 0}
