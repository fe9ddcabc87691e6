"""Sparse linear models (Nickisch thesis ch. 3, 5): the double loop against coordinate descent, its cost scaling,
and the ``map`` / ``sbl`` backends against scikit-learn and SigPy.

Common settings. Images: ``bz.datasets.load("slm_image", image="camera", size=S, design="fourier", m=304)``
(grey levels in [0, 1], noise variance 0.005, 152 random frequencies of the orthonormal 2-D DFT, real and imaginary
parts as rows) and ``SLM(potential="laplace", tau=5, sigma2=0.005, B="wavelet+tv")`` (tau = 5 is the thesis's §5.5
value for the synthetic signals, used unchanged on these images). The data set holds X densely and the loader
forms at most 2e7 entries, so m = 304 is the most measurements it gives at 256 x 256; inside the algorithms every
product with X is the FFT operator (``meta["X_operator"]``), whose cost does not depend on m. The loader stops at
256 x 256: the 512 x 512 problem of ``scaling`` is built here from the loader's own pieces (``grey_image``,
``fourier_mask``, ``measured``: the arrays ``slm_image`` would make), its dense X row by row. BLAS runs on one
thread for every method (``blas_threads``): on this shared 2-core machine OpenBLAS's second thread turns the
level-1 calls of the CG loops (dot products and norms of image-sized vectors) into waits for a descheduled thread
(BENCHMARKS.md).

The dloop's outer iterations are timed by :func:`instrumented_dloop`: a timestamp at each variance estimate (one
at the start of every outer iteration, one after the last). ``fit.info`` holds no time per iteration, and
``fit.timing`` also counts the set-up and the draws, which above n = 2000 are perturb-and-solve CG solves that can
cost more than the whole double loop.

``dloop_cd``: one outer iteration of ``bz.fit(model, data, "dloop", n_outer=3, draws=1, chains=1)`` (defaults
otherwise: Lanczos k = 100, at most 30 Newton steps of at most 300 CG iterations) against one sweep of naive
coordinate descent on the same variational objective phi(gamma) (Table 3.2, written here as a baseline,
:class:`CoordinateDescent`): each coordinate step needs the marginal variance z_j = b_j^T A^-1 b_j, one CG solve
with A (the dloop's ``cg_tol`` 1e-8 and ``cg_max_iter`` 300), then minimises phi exactly along gamma_j (a rank-one
change of A) and updates the posterior mean by Sherman-Morrison, so a step costs one linear solve and little else.
It starts from the gamma the dloop fit ended at; ``cd_updates`` random coordinates are timed and the time of a
sweep over all q potentials is extrapolated from their mean. The ratio's denominator is the mean over the dloop's
outer iterations, the first (from u = 0, the most Newton steps) included. Reported: both times, the ratio
(CD sweep) / (dloop outer iteration), the CG iterations per coordinate step and the change of phi over the timed
steps (never positive). 256 x 256 (``--quick``: 64 x 64). Target: ratio >= 100.

``scaling``: seconds per outer iteration of the backend's double loop (``dloop.double_loop``, what ``bz.fit`` runs
between its set-up and its draws: a ``bz.fit`` at 512 x 512 spends minutes on its one draw) at 128, 256 and 512
pixels square (``--quick``: 32, 64, 128), with the work per outer iteration fixed: Lanczos k = 50, exactly 5
Newton steps (``inner_tol`` 1e-300) of exactly 20 CG iterations (``cg_max_iter``; the counts are recorded). An
outer iteration then makes the same number of products with X (two FFTs), W, W^T, D and D^T at every size, plus
the O(n k^2) re-orthogonalisation; the measured ratios t(2S) / t(S) are set beside the n log n prediction
4 log(4n) / log(n) (k is the same at every size, so the k of "k MVMs" cancels) and beside 4 (n alone). Median over
the 3 outer iterations of one run, best of ``repeats`` rounds with the sizes interleaved.

``map_peers``: (a) the signal ``bz.datasets.load("slm_signal", kind="spikes", n=n, m=m, design="gaussian")`` at
(n, m) = (512, 200) and (4096, 1600), ``SLM(tau=5, sigma2=0.005, B="identity")``: ``map`` (``cd``, ``fista``,
and at n = 512 ``admm``; default tolerances, through ``bz.fit``, whose wall time counts; the time inside the
backend, ``fit.timing["tune"]``, is kept beside it) against scikit-learn's ``Lasso``, which minimises
||y - X w||^2 / (2 m) + alpha ||w||_1, our objective ||X u - y||^2 / (2 sigma2) + tau ||u||_1 times sigma2 / m:
alpha = tau sigma2 / m, ``fit_intercept=False``, at tolerances 1e-6, 1e-8, 1e-10 and 1e-12. The "same objective"
is a relative difference of at most 1e-10 to the lowest found; Lasso's time is that of its loosest tolerance that
reaches it (the most favourable to Lasso). ``repeats`` rounds (default 5) with every method and tolerance
interleaved; median, min and max. (b) the camera image at 128 x 128 measured by m = 1200 Fourier rows and at
256 x 256 by 304 (the most the loader forms densely; the FFT's cost does not depend on m),
``SLM(tau=5, sigma2=0.005, B="wavelet")``: ``map`` (``fista``) against the solver of SigPy's
``sigpy.mri.app.L1WaveletRecon`` (``LinearLeastSquares``: accelerated proximal gradient on the weighted SENSE
operator, step from its power iteration) given our periodised orthonormal wavelet
(:func:`periodised_wavelet_linop`), so that both minimise the same objective (SigPy's is sigma2 times ours plus
a constant: :func:`sigpy_problem` moves the data to its layout). Time to the same objective: one untimed run of
each, SigPy's of 6000 iterations and ours to its stopping rule (at most 6000; it stops at a point whose duality gap
certifies it), gives the lowest objective either finds and the iterations each needs to come within 1e-4 and 1e-6
(relative) of it; runs of exactly that many iterations are then timed (ours through ``bz.fit``), 3 rounds
interleaved. A target SigPy's solver does not reach in 6000 iterations is given the time of 6000 (its ratio a
bound). Also timed at SigPy's default 100 iterations: both, and SigPy's own ``L1WaveletRecon`` (one coil of
sensitivity 1, our Daubechies-4 filter ``wave_name="db2"``, lambda = tau sigma2), whose zero-padded,
non-orthonormal wavelet makes its objective another one. The products of one iteration (X and X^T, W and W^T;
SigPy's operator and adjoint, its wavelet pair) are timed alone (median of 20). Target: ``map`` at least as fast
as Lasso at both sizes and as SigPy's solver at both image sizes.

``sbl_ard``: ``sbl`` against scikit-learn's ``ARDRegression`` on the signal of ``map_peers``, hyperpriors switched
off as in tests/inference/slm/test_slm_backends.py (``alpha_1 = alpha_2 = lambda_1 = lambda_2 = 0``,
``threshold_lambda`` = 1e12 = our ``prune``, ``tol=1e-12``, ``fit_intercept=False``) and ``max_iter=5000``; ``sbl`` with
``learn_noise`` (ARD always learns the noise), ``tol=1e-10``, ``max_iter=5000`` and ARD's starting point (noise variance
var(y), unit precisions), timed through ``bz.fit`` with one draw (the default 4 x 1000 i.i.d. draws are not part of the
comparison); its posterior mean is recomputed from the fit's gamma and noise variance. ARD's stopping rule
(sum |change of w| < tol) may never be met, so its time is also taken to the first of 25, 50, 100, ... iterations
whose coefficients are within 1e-4 of ours. Reported: times (``sbl`` best of ``repeats``, ARD once), their
ratios, the largest coefficient difference, both noise variances, the pruned counts. Target: coefficients within
1e-4 and ``sbl`` to its stopping rule no slower than ARD at ``max_iter``.
"""
from __future__ import annotations

import contextlib
import math
import time

import numpy as np

from _timing import best_of

TAU = 5.0                 # thesis §5.5 (synthetic signals)
SIGMA2 = 0.005            # thesis §5.5
IMAGE_M = 304             # Fourier rows: the most slm_image forms densely at 256 x 256 (m n <= 2e7)
SIZES = (128, 256, 512)
QUICK_SIZES = (32, 64, 128)
SCALING_OPTIONS = {"lanczos_k": 50, "n_inner": 5, "inner_tol": 1e-300, "cg_max_iter": 20}
FAST_OUTER = 1e-300       # outer_tol: run every outer iteration asked for
DLOOP_CG = {"cg_tol": 1e-8, "cg_max_iter": 300}   # the dloop backend's defaults, also the baseline's solves
SIGNAL = {"kind": "spikes", "n": 512, "m": 200, "design": "gaussian"}
SIGNAL_SIZES = ((512, 200), (4096, 1600))   # (n, m) of the Lasso problems: m / n about 0.39 at both sizes
LASSO_TOLS = (1e-6, 1e-8, 1e-10, 1e-12)     # Lasso's tolerances; its time is that of the loosest reaching ours
SAME_OBJECTIVE = 1e-10    # relative objective difference that counts as the same optimum on the signal
IMAGE_SIZES = ((128, 1200), (256, IMAGE_M))  # (side, Fourier rows); the loader forms X densely: 304 rows at 256
IMAGE_TARGETS = (1e-4, 1e-6)   # image: relative distances to the lowest objective found that count as reaching it
IMAGE_LONG_RUN = 6000     # most iterations of each solver's untimed run that finds the lowest objective
IMAGE_REPEATS = 3         # timed rounds on the images (a SigPy run to the target at 256 x 256 takes about a minute)

TARGET_CD = "one coordinate-descent sweep costs >= 100x one dloop outer iteration"
TARGET_MAP = ("map reaches Lasso's objective (relative difference <= 1e-10) at least as fast as Lasso at n = 512 "
              "and 4096, and the image objective (to 1e-6) at least as fast as SigPy's solver at 128 and 256")
TARGET_SBL = ("sbl coefficients within 1e-4 of ARDRegression's (5000 iterations), sbl to its stopping rule no "
              "slower than ARDRegression")


def _blas(threads):
    """BLAS limited to ``threads`` for everything timed here (None: the process default)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=threads, user_api="blas") if threads else contextlib.nullcontext()


def image_model(B: str = "wavelet+tv"):
    import bayeszoo as bz

    return bz.models.SLM(potential="laplace", tau=TAU, sigma2=SIGMA2, B=B)


def image_data(size: int, m: int = IMAGE_M, seed: int = 0):
    """``slm_image`` (camera, Fourier rows); above the loader's 256 x 256 the same arrays built here."""
    import bayeszoo as bz

    if size <= 256:
        return bz.datasets.load("slm_image", image="camera", size=size, design="fourier", m=m, sigma2=SIGMA2,
                                seed=seed)
    from bayeszoo.datasets import slm_data
    from bayeszoo.numerics import operators

    rng = np.random.default_rng(seed)        # the draws in slm_image's order: the mask, then the noise
    u = slm_data.grey_image("camera", size)
    mask = slm_data.fourier_mask((size, size), max(1, m // 2), rng)
    op = operators.fourier_sampling((size, size), mask)
    rows = np.eye(op.shape[0])
    X = np.stack([op.rmatvec(e) for e in rows])   # row i of X is X^T e_i (to_dense refuses this size)
    return slm_data.measured(u, X, SIGMA2, rng, name="slm_image_camera", u_shape=(size, size),
                             meta={"source": f"camera {size} x {size}, built by benchmarks/bench_slm.py"},
                             X_operator={"kind": "fourier", "mask": mask.tolist()})


@contextlib.contextmanager
def instrumented_dloop():
    """Timestamps of the dloop's variance estimates and the iteration count of each CG solve of its inner loop.

    The double loop makes one variance estimate at the start of every outer iteration and one after the last, so
    successive differences of ``record["stamps"]`` are the durations of the outer iterations (``fit.info`` holds no
    time per iteration and ``fit.timing`` also counts the set-up and the draws); ``record["cg"]`` lists the CG
    iterations of every Newton step."""
    from bayeszoo.inference.slm import dloop

    record = {"stamps": [], "cg": []}
    variances, cg = dloop.variances, dloop.cg

    def timed_variances(*args, **kwargs):
        record["stamps"].append(time.perf_counter())
        return variances(*args, **kwargs)

    def counted_cg(*args, **kwargs):
        count = [0]

        def tick(_):
            count[0] += 1
        out = cg(*args, callback=tick, **kwargs)
        record["cg"].append(count[0])
        return out

    dloop.variances, dloop.cg = timed_variances, counted_cg
    try:
        yield record
    finally:
        dloop.variances, dloop.cg = variances, cg


def dloop_fit_outer_seconds(model, data, **options):
    """(seconds of each outer iteration, CG iterations of each Newton step, fit) of ``bz.fit(..., "dloop")`` with
    one draw."""
    import bayeszoo as bz

    with instrumented_dloop() as record:
        fit = bz.fit(model, data, "dloop", seed=0, progress=False, draws=1, chains=1, outer_tol=FAST_OUTER,
                     **options)
    return np.diff(record["stamps"]).tolist(), record["cg"], fit


def double_loop_outer_seconds(model, data, **options):
    """(seconds of each outer iteration, CG iterations of each Newton step, result) of the backend's double loop
    alone (``dloop.double_loop``: what ``bz.fit(..., "dloop")`` runs between its set-up and its draws), without
    the dense phi trace."""
    from bayeszoo.inference.slm import dloop
    from bayeszoo.inference.slm.common import problem

    prob = problem(model, data)
    with instrumented_dloop() as record:
        res = dloop.double_loop(prob, outer_tol=FAST_OUTER, **options)
    return np.diff(record["stamps"]).tolist(), record["cg"], res


# ----------------------------------------------------------------------------------- coordinate descent
class CoordinateDescent:
    """Naive coordinate descent on the double loop's objective phi(gamma) (module docstring).

    The state is gamma and the posterior mean m = A^-1 X^T y / sigma2, A = X^T X / sigma2 + B^T diag(1/gamma) B.
    A step on coordinate j solves A x = b_j (b_j^T the j-th row of B) by CG, reads z_j = b_j^T x and
    s_j = b_j^T m, and minimises phi along pi_j = 1/gamma_j. With the cavity N(mu_c, v_c) of s_j (site j removed:
    1/v_c = 1/z_j - pi_j, mu_c = s_j v_c / z_j) phi changes, up to a constant, as

        h_j(1/pi) + pi mu_c^2 / (1 + pi v_c) + ln(1 + pi v_c)

    (the rank-one updates of min_u R and of ln|A|); then m -= x (pi - pi_j) s_j / (1 + (pi - pi_j) z_j).
    """

    def __init__(self, model, data, gamma, *, cg_tol=1e-8, cg_max_iter=300):
        from bayeszoo.numerics.potentials import Potential

        self.X, self.B = model.operator_X(data), model.operator_B(data)
        self.sigma2 = float(model.sigma2)
        self.taus = model.taus(data)
        self.potential = lambda j: Potential(model.potential, self.taus[j], model.nu)
        self.gamma = np.array(gamma, dtype=float)
        self.cg_tol, self.cg_max_iter = cg_tol, cg_max_iter
        self.cg_iterations = []
        self.mean = self.solve(self.X.H @ np.asarray(data.y, float) / self.sigma2)

    def solve(self, rhs):
        from scipy.sparse.linalg import LinearOperator, cg

        X, B, s2, gamma = self.X, self.B, self.sigma2, self.gamma
        A = LinearOperator((rhs.size, rhs.size), dtype=float,
                           matvec=lambda v: X.H @ (X @ v) / s2 + B.H @ ((B @ v) / gamma))
        count = [0]

        def tick(_):
            count[0] += 1
        x = cg(A, rhs, rtol=self.cg_tol, maxiter=self.cg_max_iter, callback=tick)[0]
        self.cg_iterations.append(count[0])
        return x

    def step(self, j: int) -> float:
        """Update gamma_j; returns the change of phi (<= 0)."""
        from scipy.optimize import minimize_scalar

        e = np.zeros(self.B.shape[0])
        e[j] = 1.0
        b = self.B.H @ e
        x = self.solve(b)                       # the one linear solve per coordinate
        z, s = float(b @ x), float(b @ self.mean)
        pi = 1.0 / self.gamma[j]
        prec_c = 1.0 / z - pi
        if prec_c <= 0:                         # CG's z too large for a proper cavity: leave gamma_j
            return 0.0
        v_c = 1.0 / prec_c
        mu_c = s * v_c / z
        pot = self.potential(j)

        def phi(log_pi):
            p = math.exp(log_pi)
            return float(pot.h(1.0 / p)) + p * mu_c**2 / (1.0 + p * v_c) + math.log1p(p * v_c)

        now = math.log(pi)
        best = minimize_scalar(phi, bounds=(now - 40.0, now + 40.0), method="bounded", options={"xatol": 1e-10})
        if best.fun >= phi(now):
            return 0.0
        new = math.exp(best.x)
        delta = new - pi
        self.mean -= x * (delta * s / (1.0 + delta * z))
        self.gamma[j] = 1.0 / new
        return best.fun - phi(now)


def run_dloop_cd(size: int = 256, m: int = IMAGE_M, n_outer: int = 3, cd_updates: int = 16, seed: int = 0,
                 blas_threads: int | None = 1) -> dict:
    """Seconds of a dloop outer iteration against an extrapolated coordinate-descent sweep (module docstring)."""
    with _blas(blas_threads):
        model = image_model()
        dloop_fit_outer_seconds(model, image_data(32), n_outer=1)     # warm-up: imports, FFT plans
        data = image_data(size, m, seed)
        t0 = time.perf_counter()
        outer, cg_counts, fit = dloop_fit_outer_seconds(model, data, n_outer=n_outer, **DLOOP_CG)
        fit_seconds = time.perf_counter() - t0
        cd = CoordinateDescent(model, data, fit.idata["potentials"]["gamma"].values, **DLOOP_CG)
        q = cd.B.shape[0]
        cd.cg_iterations.clear()
        coords = np.random.default_rng(seed).choice(q, size=cd_updates, replace=False)
        step_seconds, change = [], 0.0
        for j in coords:
            t = time.perf_counter()
            change += cd.step(int(j))
            step_seconds.append(time.perf_counter() - t)
    per_outer = float(np.mean(outer))
    sweep = float(np.mean(step_seconds)) * q
    ratio = sweep / per_outer
    return {"name": "slm_dloop_cd", "size": size, "m": m, "n": size * size, "q": q,
            "dloop": {"outer_seconds": outer, "mean_outer_seconds": per_outer, "fit_seconds": fit_seconds,
                      "fit_timing_sample": fit.timing["sample"], "iterations": fit.info["iterations"],
                      "inner_iterations": fit.info["inner_iterations"], "cg_iterations": cg_counts,
                      "lanczos_k": fit.info["lanczos_k"]},
            "cd": {"updates": cd_updates, "step_seconds": step_seconds,
                   "mean_step_seconds": float(np.mean(step_seconds)),
                   "cg_iterations": list(cd.cg_iterations), "phi_change": change, "sweep_seconds": sweep},
            "ratio": ratio, "blas_threads": blas_threads, "target": TARGET_CD, "target_met": bool(ratio >= 100)}


def rows_dloop_cd(r: dict) -> list[tuple[str, str, str]]:
    d, c = r["dloop"], r["cd"]
    side = math.isqrt(r["n"])
    return [
        (f"slm dloop s/outer iteration {side}x{side}", f"{d['mean_outer_seconds']:.2f} s",
         "outer iterations " + ", ".join(f"{s:.2f}" for s in d["outer_seconds"]) + f" s; Newton steps "
         f"{d['inner_iterations']}, CG iterations {min(d['cg_iterations'])}-{max(d['cg_iterations'])}; Lanczos k = "
         f"{d['lanczos_k']}; bz.fit {d['fit_seconds']:.1f} s with set-up and 1 draw"),
        (f"slm CD s/coordinate step {side}x{side}", f"{c['mean_step_seconds']:.3f} s",
         f"{c['updates']} random coordinates, CG iterations {min(c['cg_iterations'])}-{max(c['cg_iterations'])}, "
         f"phi change {c['phi_change']:.3g}"),
        (f"slm CD sweep (q = {r['q']}), extrapolated", f"{c['sweep_seconds']:.0f} s",
         f"{c['sweep_seconds'] / 3600:.1f} h"),
        ("slm CD sweep / dloop outer iteration", f"{r['ratio']:.0f}x", f"n = {r['n']}, m = {r['m']}"),
    ]


# ------------------------------------------------------------------------------------------------ scaling
def run_scaling(sizes=SIZES, m: int = IMAGE_M, n_outer: int = 3, repeats: int = 3,
                blas_threads: int | None = 1) -> dict:
    """Best of ``repeats`` rounds (sizes interleaved) of the median outer-iteration time at each size."""
    with _blas(blas_threads):
        model = image_model()
        double_loop_outer_seconds(model, image_data(32), n_outer=1, **SCALING_OPTIONS)    # warm-up
        datasets = {s: image_data(s, m) for s in sizes}
        per_outer = {s: math.inf for s in sizes}
        runs = {s: [] for s in sizes}
        for _ in range(repeats):
            for s in sizes:
                outer, cg_counts, _ = double_loop_outer_seconds(model, datasets[s], n_outer=n_outer,
                                                                **SCALING_OPTIONS)
                runs[s].append({"outer_seconds": outer, "cg_iterations": cg_counts})
                per_outer[s] = min(per_outer[s], float(np.median(outer)))
    ratios = {}
    for small, big in zip(sizes, sizes[1:]):
        n = small * small
        ratios[f"{big}/{small}"] = {"measured": per_outer[big] / per_outer[small],
                                    "n log n": 4 * math.log(4 * n) / math.log(n), "n": 4.0}
    cg_all = [c for rs in runs.values() for r in rs for c in r["cg_iterations"]]
    return {"name": "slm_scaling", "seconds_per_outer": {str(s): v for s, v in per_outer.items()},
            "ratios": ratios, "runs": {str(s): v for s, v in runs.items()}, "options": SCALING_OPTIONS,
            "cg_iterations_range": [min(cg_all), max(cg_all)], "m": m, "n_outer": n_outer, "repeats": repeats,
            "blas_threads": blas_threads}


def rows_scaling(r: dict) -> list[tuple[str, str, str]]:
    opts = r["options"]
    lo, hi = r["cg_iterations_range"]
    out = [(f"slm dloop s/outer iteration {s}x{s}", f"{v:.3f} s",
            f"k = {opts['lanczos_k']}, {opts['n_inner']} Newton steps x {opts['cg_max_iter']} CG iterations "
            f"(measured {lo}-{hi})") for s, v in r["seconds_per_outer"].items()]
    for key, v in r["ratios"].items():
        out.append((f"slm dloop time ratio {key}", f"{v['measured']:.2f}x",
                    f"n log n predicts {v['n log n']:.2f}x (n alone {v['n']:.0f}x)"))
    return out


# ---------------------------------------------------------------------------------------------- map peers
def _l1_objective(model, data):
    """Our MAP objective ||X u - y||^2 / (2 sigma2) + tau ||B u||_1 (Laplace), for real u."""
    X = model.operator_X(data)
    B = model.operator_B(data)
    y = np.asarray(data.y, float)
    tau = model.taus(data)

    def f(u):
        r = X @ u - y
        return float(0.5 * (r @ r) / model.sigma2 + tau @ np.abs(B @ u))
    return f


def _mirror(a):
    """a[-k] (indices modulo N) of a 2-D array."""
    return np.roll(np.flip(a, (0, 1)), 1, (0, 1))


def sigpy_problem(data):
    """The image's measurements in SigPy's layout: (k-space (1, N, N), weights (N, N), maps (1, N, N)).

    A real image's DFT is Hermitian (F u at -k is the conjugate of F u at k), so on real images the data term
    sum over measured k of |(F u)_k - y_k|^2 equals, up to a constant, sum over all k of
    w_k |(F u)_k - d_k|^2 with c_k = [k measured] + [-k measured], d_k the mean of y_k and conj(y_-k) over the
    measured ones and w_k = c_k / 2. d is Hermitian, so SigPy's iterates stay real up to rounding. SigPy's FFT is
    centred (``fftshift(fft(ifftshift(x)))``): for even N its value at (k + N/2) mod N is (-1)^(k1 + k2) times
    the plain orthonormal DFT at k."""
    N = int(math.isqrt(data.d))
    mask = np.asarray(data.meta["X_operator"]["mask"], dtype=bool)
    half = data.y.size // 2
    ksp = np.zeros((N, N), complex)
    ksp[mask] = data.y[:half] + 1j * data.y[half:]
    count = mask.astype(float) + _mirror(mask)
    d = np.divide(ksp + np.conj(_mirror(ksp)), count, out=np.zeros_like(ksp), where=count > 0)
    k = np.add.outer(np.arange(N), np.arange(N))
    sign = np.where(k % 2, -1.0, 1.0)
    return np.fft.fftshift(d * sign)[None], np.fft.fftshift(count / 2.0), np.ones((1, N, N), complex)


def _sigpy(data, lam, max_iter):
    import sigpy.mri

    ksp, weights, maps = sigpy_problem(data)

    def go():
        return sigpy.mri.app.L1WaveletRecon(ksp, maps, lam, weights=weights, wave_name="db2", max_iter=max_iter,
                                            show_pbar=False).run()
    secs, x = best_of(go, 1)
    x = np.asarray(x)
    return secs, np.real(x).ravel(), float(np.max(np.abs(np.imag(x))))


def _spread(times) -> dict:
    """median, min, max and every time of a list of wall times."""
    return {"median": float(np.median(times)), "min": float(np.min(times)), "max": float(np.max(times)),
            "all": [float(t) for t in times]}


def _lasso_fit(data, alpha, tol):
    import warnings

    from sklearn.linear_model import Lasso

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Lasso(alpha=alpha, fit_intercept=False, tol=tol, max_iter=100_000).fit(data.X, data.y)


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def _signal_peers(n, m, repeats, solvers):
    """map's solvers (default tolerances, through bz.fit) against Lasso at each tolerance of LASSO_TOLS, ``repeats``
    rounds with the methods interleaved; Lasso's time is that of its loosest tolerance whose objective is within
    SAME_OBJECTIVE of the lowest found."""
    import bayeszoo as bz

    data = bz.datasets.load("slm_signal", sigma2=SIGMA2, seed=0, **dict(SIGNAL, n=n, m=m))
    model = bz.models.SLM(potential="laplace", tau=TAU, sigma2=SIGMA2, B="identity")
    f = _l1_objective(model, data)
    alpha = TAU * SIGMA2 / m
    for solver in solvers:                                              # warm-up (Numba's cache, FFT plans)
        bz.fit(model, data, "map", solver=solver, seed=0, progress=False, max_iter=5)
    _lasso_fit(data, alpha, 1e-4)
    times = {k: [] for k in [f"map {s}" for s in solvers] + [f"Lasso tol={t:g}" for t in LASSO_TOLS]}
    inside, out = {s: [] for s in solvers}, {}
    for _ in range(repeats):
        for solver in solvers:
            secs, fit = _timed(lambda: bz.fit(model, data, "map", solver=solver, seed=0, progress=False))
            times[f"map {solver}"].append(secs)
            inside[solver].append(fit.timing["tune"])
            out[f"map {solver}"] = {"objective": f(model.posterior_mean(fit)), "iterations": fit.info["iterations"],
                                    "converged": fit.info["converged"]}
        for tol in LASSO_TOLS:
            secs, lasso = _timed(lambda: _lasso_fit(data, alpha, tol))
            times[f"Lasso tol={tol:g}"].append(secs)
            out[f"Lasso tol={tol:g}"] = {"objective": f(lasso.coef_), "iterations": int(lasso.n_iter_),
                                         "coef": lasso.coef_}
    for key, v in out.items():
        v["seconds"] = _spread(times[key])
    for solver in solvers:
        out[f"map {solver}"]["seconds_inside_fit"] = _spread(inside[solver])
    _relative(out)
    same = [t for t in LASSO_TOLS if out[f"Lasso tol={t:g}"]["relative"] <= SAME_OBJECTIVE]
    lasso = out[f"Lasso tol={same[0]:g}"] if same else None
    for v in out.values():
        v.pop("coef", None)
    best = min((v for k, v in out.items() if k.startswith("map") and v["relative"] <= SAME_OBJECTIVE),
               key=lambda v: v["seconds"]["median"], default=None)
    ratio = None if lasso is None or best is None else best["seconds"]["median"] / lasso["seconds"]["median"]
    return {"n": n, "m": m, "alpha": alpha, "methods": out, "lasso_tol": same[0] if same else None,
            "ours_over_lasso": ratio, "nonzeros": int(np.count_nonzero(_lasso_fit(data, alpha, 1e-12).coef_))}


def periodised_wavelet_linop(N):
    """Our orthonormal periodised Daubechies-4 transform as a SigPy Linop on complex N x N images (real and
    imaginary parts transformed apart, as PyWavelets does for SigPy's own wavelet)."""
    import sigpy

    from bayeszoo.numerics.operators import wavelet

    W = wavelet((N, N))

    class PeriodisedWavelet(sigpy.linop.Linop):
        def __init__(self, inverse=False):
            self.inverse = inverse
            super().__init__((N, N), (N, N))

        def _apply(self, x):
            f = W.rmatvec if self.inverse else W.matvec
            return (f(np.real(x).ravel()) + 1j * f(np.imag(x).ravel())).reshape(N, N)

        def _adjoint_linop(self):
            return PeriodisedWavelet(not self.inverse)
    return PeriodisedWavelet()


def sigpy_same_objective_app(data, lam, max_iter):
    """The solver of ``sigpy.mri.app.L1WaveletRecon`` (``LinearLeastSquares``: its accelerated proximal gradient
    on the weighted SENSE operator, step from its power iteration) with our periodised wavelet in place of SigPy's
    zero-padded one: it minimises sigma2 times our objective plus a constant."""
    import sigpy
    import sigpy.mri

    ksp, weights, maps = sigpy_problem(data)
    A = sigpy.mri.linop.Sense(maps, weights=weights)
    W = periodised_wavelet_linop(ksp.shape[-1])
    proxg = sigpy.prox.UnitaryTransform(sigpy.prox.L1Reg(W.oshape, lam), W)
    return sigpy.app.LinearLeastSquares(A, ksp * weights**0.5, proxg=proxg, max_iter=max_iter, show_pbar=False)


def _sigpy_trace(data, lam, max_iter, f):
    """Our objective after each iteration of the SigPy solver above (one untimed run)."""
    app = sigpy_same_objective_app(data, lam, max_iter)
    trace = []
    app._post_update = lambda: trace.append(f(np.real(np.asarray(app.x)).ravel()))
    app.run()
    return np.asarray(trace)


def _per_iteration_costs(data, model, repeats=20):
    """Seconds of the products one iteration makes: ours (X, X^T, W, W^T on real images) and SigPy's (the weighted
    SENSE operator and its adjoint, its zero-padded wavelet and inverse on complex images)."""
    import sigpy
    import sigpy.mri

    X, B = model.operator_X(data), model.operator_B(data)
    N = math.isqrt(data.d)
    ksp, weights, maps = sigpy_problem(data)
    A = sigpy.mri.linop.Sense(maps, weights=weights)
    Ws = sigpy.linop.Wavelet((N, N), wave_name="db2")
    u = np.asarray(data.meta["true_u"], float).ravel()
    x = u.reshape(N, N).astype(complex)
    pairs = {"ours: X and X^T (FFT)": lambda: X.rmatvec(X.matvec(u)),
             "ours: W and W^T (periodised)": lambda: B.rmatvec(B.matvec(u)),
             "SigPy: A and A^H (centred FFT, weights)": lambda: A.H(A(x)),
             "SigPy: W and W^H (zero-padded, complex)": lambda: Ws.H(Ws(x))}
    out = {}
    for name, fn in pairs.items():
        fn()
        out[name] = float(np.median([_timed(fn)[0] for _ in range(repeats)]))
    return out


def _image_peers(size, m, repeats, targets, long_run):
    """Time to reach our objective within each of ``targets`` (relative) of the lowest found by either solver in
    ``long_run`` iterations (ours to its stopping rule): the iterations each needs are read off one untimed run's
    trace, then runs of exactly that many iterations are timed, ``repeats`` rounds interleaved; a target SigPy's
    solver does not reach gets the time of ``long_run`` iterations, a lower bound (its ratio an upper one). Also
    both at SigPy's default 100 iterations, and SigPy's own L1WaveletRecon (its zero-padded wavelet: another
    objective) at 100."""
    import bayeszoo as bz

    data = image_data(size, m)
    model = image_model("wavelet")
    f = _l1_objective(model, data)
    lam = TAU * SIGMA2
    bz.fit(model, data, "map", solver="fista", max_iter=5, tol=1e-300, progress=False)   # warm-up
    _sigpy(data, lam, 5)                                                                 # (numba compiles SigPy)
    ours_long = bz.fit(model, data, "map", solver="fista", max_iter=long_run, progress=False)
    traces = {"map fista": np.asarray(ours_long.idata.objective["neg_log_joint"].values[:-1], float),
              "SigPy solver, our wavelet": _sigpy_trace(data, lam, long_run, f)}
    best = min(t.min() for t in traces.values())
    need = {}
    for name, trace in traces.items():
        for target in targets:
            hit = np.flatnonzero(trace <= best * (1.0 + target))
            need[(name, f"to {target:g}")] = int(hit[0]) + 1 if hit.size else None

    def run_ours(k):
        return _timed(lambda: bz.fit(model, data, "map", solver="fista", max_iter=k, tol=1e-300, progress=False))

    def run_theirs(k):
        return _timed(lambda: sigpy_same_objective_app(data, lam, k).run())

    def run_stock(k):
        return _sigpy(data, lam, k)[0], None
    runs = {key: (run_ours if key[0] == "map fista" else run_theirs, k) for key, k in need.items()}
    unreached = [key for key, k in need.items() if k is None and key[0] == "SigPy solver, our wavelet"]
    if unreached:
        runs[("SigPy solver, our wavelet", f"{long_run} (a target not reached)")] = (run_theirs, long_run)
    runs.update({("map fista", "100"): (run_ours, 100), ("SigPy solver, our wavelet", "100"): (run_theirs, 100),
                 ("SigPy L1WaveletRecon", "100"): (run_stock, 100)})
    times = {key: [] for key, (_, k) in runs.items() if k is not None}
    inside = {key: [] for key in times if key[0] == "map fista"}
    for _ in range(repeats):
        for key, (fn, k) in runs.items():
            if k is None:
                continue
            secs, fit = fn(k)
            times[key].append(secs)
            if key in inside:
                inside[key].append(fit.timing["tune"])
    table = {f"{name}, {which}": {"iterations": runs[(name, which)][1], "seconds": _spread(t)}
             for (name, which), t in times.items()}
    for (name, which), t in inside.items():
        table[f"{name}, {which}"]["seconds_inside_fit"] = _spread(t)
    ratios, bounds = {}, {}
    for target in targets:
        key = ("SigPy solver, our wavelet", f"to {target:g}")
        bounds[f"{target:g}"] = key in unreached
        if key in unreached:
            key = ("SigPy solver, our wavelet", f"{long_run} (a target not reached)")
        ours, theirs = times.get(("map fista", f"to {target:g}")), times.get(key)
        ratios[f"{target:g}"] = None if not (ours and theirs) else float(np.median(ours) / np.median(theirs))
    return {"size": size, "m": m, "targets": list(targets), "long_run": long_run, "lowest_objective": float(best),
            "lowest_by": min(traces, key=lambda k: traces[k].min()),
            "iterations_to_target": {f"{name}, {which}": k for (name, which), k in need.items()},
            "objective_at": {name: {str(k): float(t[k - 1]) for k in sorted({100, 1000, long_run}) if k <= t.size}
                             for name, t in traces.items()},
            "runs": table, "ours_over_sigpy": ratios, "ratio_is_upper_bound": bounds,
            "ours_to_stopping_rule": {"iterations": ours_long.info["iterations"],
                                      "converged": ours_long.info["converged"],
                                      "objective": float(ours_long.idata.objective["neg_log_joint"].values[-1])},
            "per_iteration_products": _per_iteration_costs(data, model)}


def run_map_peers(image_size: int | None = None, image_m: int | None = None, repeats: int = 5,
                  blas_threads: int | None = 1, signal_sizes=SIGNAL_SIZES, image_sizes=IMAGE_SIZES,
                  targets=IMAGE_TARGETS, long_run: int = IMAGE_LONG_RUN) -> dict:
    """The module docstring's ``map_peers``; ``image_size`` / ``image_m`` replace ``image_sizes`` by one size."""
    import warnings

    if image_size is not None:
        image_sizes = ((image_size, image_m or IMAGE_M),)
    with _blas(blas_threads), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        signal = [_signal_peers(n, m, repeats, ("cd", "fista", "admm") if n <= 512 else ("cd", "fista"))
                  for n, m in signal_sizes]
        image = [_image_peers(size, m, min(repeats, IMAGE_REPEATS), targets, long_run) for size, m in image_sizes]
    met_a = all(r["ours_over_lasso"] is not None and r["ours_over_lasso"] <= 1.0 for r in signal)
    met_b = all(v is not None and v <= 1.0 for r in image for v in r["ours_over_sigpy"].values())
    return {"name": "slm_map_peers", "signal": signal, "image": image, "repeats": repeats,
            "signal_problem": dict(SIGNAL, tau=TAU, sigma2=SIGMA2), "same_objective": SAME_OBJECTIVE,
            "blas_threads": blas_threads, "target": TARGET_MAP, "target_met": bool(met_a and met_b),
            "target_met_signal": met_a, "target_met_image": met_b}


def _relative(table: dict) -> None:
    """Adds each entry's relative objective difference to the lowest objective of the table."""
    low = min(v["objective"] for v in table.values())
    for v in table.values():
        v["relative"] = (v["objective"] - low) / abs(low)


def _ms(s: dict) -> str:
    return f"{s['median'] * 1e3:.1f} ms ({s['min'] * 1e3:.1f}-{s['max'] * 1e3:.1f})"


def _sec(s: dict) -> str:
    return f"{s['median']:.2f} s ({s['min']:.2f}-{s['max']:.2f})"


def rows_map_peers(r: dict) -> list[tuple[str, str, str]]:
    out = []
    for sig in r["signal"]:
        for name, v in sig["methods"].items():
            extra = f", converged {v['converged']}" if "converged" in v else ""
            out.append((f"slm signal n={sig['n']} {name}", _ms(v["seconds"]),
                        f"objective {v['objective']:.10g} (+{v['relative']:.1e} rel.), {v['iterations']} "
                        f"iterations{extra}"))
        ratio = sig["ours_over_lasso"]
        out.append((f"slm signal n={sig['n']} fastest map / Lasso (tol={sig['lasso_tol']}) time",
                    "n/a" if ratio is None else f"{ratio:.2f}x", f"m = {sig['m']}, {sig['nonzeros']} nonzeros"))
    for img in r["image"]:
        for name, v in img["runs"].items():
            out.append((f"slm image {img['size']}x{img['size']} {name}", _sec(v["seconds"]),
                        f"{v['iterations']} iterations"))
        for target, ratio in img["ours_over_sigpy"].items():
            bound = "< " if img["ratio_is_upper_bound"][target] else ""
            out.append((f"slm image {img['size']}x{img['size']} map fista / SigPy solver time to {target}",
                        "n/a" if ratio is None else f"{bound}{ratio:.2f}x",
                        f"lowest objective {img['lowest_objective']:.10g} ({img['lowest_by']})"))
    return out


# ------------------------------------------------------------------------------------------------ sbl / ARD
ARD_OPTIONS = {"fit_intercept": False, "tol": 1e-12, "threshold_lambda": 1e12, "alpha_1": 0, "alpha_2": 0,
               "lambda_1": 0, "lambda_2": 0}
ARD_ITER = 5000
AGREE = 1e-4              # coefficient agreement of the target and of ARD's time to agreement


def run_sbl_ard(repeats: int = 2, blas_threads: int | None = 1) -> dict:
    """``sbl`` (best of ``repeats``) against ARDRegression (once: its loop is the long one), module docstring."""
    import warnings

    import bayeszoo as bz
    from sklearn.linear_model import ARDRegression

    with _blas(blas_threads), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = bz.datasets.load("slm_signal", sigma2=SIGMA2, seed=0, **SIGNAL)
        X, y = data.X, data.y
        # ARD's starting point: noise precision 1 / (var(y) + eps), unit weight precisions (ours: alpha = 1)
        model = bz.models.SLM(sigma2=float(np.var(y) + np.finfo(float).eps), B="identity")

        def ours():
            return bz.fit(model, data, "sbl", learn_noise=True, tol=1e-10, max_iter=5000, draws=1, chains=1, seed=0,
                          progress=False)

        def theirs(max_iter):
            return ARDRegression(max_iter=max_iter, **ARD_OPTIONS).fit(X, y)
        ours()                                                            # warm-up
        t_ours, fit = best_of(ours, repeats)
        gamma = fit.idata["potentials"]["gamma"].values
        s2 = fit.info["sigma2"]
        mean = np.linalg.solve(X.T @ X / s2 + np.diag(1.0 / gamma), X.T @ y / s2)   # the fit's posterior mean
        t_ard, ard = best_of(lambda: theirs(ARD_ITER), 1)
        # ARD's time to agreement: the first of 25, 50, 100, ... iterations whose coefficients are within AGREE
        agree = None
        max_iter = 25
        while max_iter < ARD_ITER:
            secs, short = best_of(lambda: theirs(max_iter), 1)
            if np.max(np.abs(short.coef_ - mean)) <= AGREE:
                agree = {"iterations": max_iter, "seconds": secs}
                break
            max_iter *= 2
    diff = float(np.max(np.abs(mean - ard.coef_)))
    n_iter = int(getattr(ard, "n_iter_", -1))
    return {"name": "slm_sbl_ard", "sbl": {"seconds": t_ours, "iterations": fit.info["iterations"],
                                           "converged": fit.info["converged"], "sigma2": s2,
                                           "n_pruned": fit.info["n_pruned"]},
            "ard": {"seconds": t_ard, "iterations": n_iter, "max_iter": ARD_ITER, "sigma2": float(1.0 / ard.alpha_),
                    "n_pruned": int(np.sum(ard.lambda_ >= ARD_OPTIONS["threshold_lambda"])),
                    "stopping_rule_met": n_iter < ARD_ITER},
            "ard_to_agreement": agree, "time_ratio": t_ard / t_ours, "max_coef_diff": diff,
            "problem": dict(SIGNAL, sigma2=SIGMA2), "blas_threads": blas_threads, "target": TARGET_SBL,
            "target_met": bool(diff <= AGREE and t_ours <= t_ard)}


def rows_sbl_ard(r: dict) -> list[tuple[str, str, str]]:
    s, a, g = r["sbl"], r["ard"], r["ard_to_agreement"]
    rule = "met" if a["stopping_rule_met"] else "not met"
    out = [("slm sbl (bz.fit, 1 draw)", f"{s['seconds']:.2f} s",
            f"{s['iterations']} iterations, noise variance {s['sigma2']:.4g}, {s['n_pruned']} pruned"),
           ("slm sklearn ARDRegression", f"{a['seconds']:.2f} s",
            f"{a['iterations']} iterations (tol 1e-12 {rule}), noise variance {a['sigma2']:.4g}, "
            f"{a['n_pruned']} pruned"),
           ("slm ARD time / sbl time", f"{r['time_ratio']:.2f}x", f"ARD at {a['max_iter']} iterations"),
           ("slm max |coef sbl - coef ARD|", f"{r['max_coef_diff']:.2e}", "")]
    if g is None:
        out.append((f"slm ARD to coefficients within {AGREE:g} of sbl", "not reached", f"< {a['max_iter']} iterations"))
    else:
        out.append((f"slm ARD to coefficients within {AGREE:g} of sbl", f"{g['seconds']:.2f} s",
                    f"{g['iterations']} iterations; sbl / that time {s['seconds'] / g['seconds']:.2f}x"))
    return out


#: what benchmarks/run.py runs from this module: name -> what it measures, run(quick) and its table rows
BENCHMARKS = {
    "slm_dloop_cd": {"about": "SLM: one dloop outer iteration vs a naive coordinate-descent sweep on phi, 256 x 256 "
                              "(target: >= 100x)",
                     "run": lambda quick: run_dloop_cd(size=64) if quick else run_dloop_cd(), "rows": rows_dloop_cd},
    "slm_scaling": {"about": "SLM: dloop seconds per outer iteration at 128, 256, 512 pixels square against the "
                             "n log n ratio",
                    "run": lambda quick: run_scaling(sizes=QUICK_SIZES, repeats=1) if quick else run_scaling(),
                    "rows": rows_scaling},
    "slm_map_peers": {"about": "SLM: map (fista, admm) vs scikit-learn Lasso on a signal and SigPy's L1WaveletRecon "
                               "on an image",
                      "run": lambda quick: (run_map_peers(image_size=64, image_m=1024, repeats=1) if quick
                                            else run_map_peers()),
                      "rows": rows_map_peers},
    "slm_sbl_ard": {"about": "SLM: sbl vs scikit-learn ARDRegression (hyperpriors off) on the same signal",
                    "run": lambda quick: run_sbl_ard(repeats=1) if quick else run_sbl_ard(), "rows": rows_sbl_ard},
}


if __name__ == "__main__":
    import json
    import sys

    import bayeszoo  # noqa: F401  (configures JAX / PyTensor first)

    quick = "--quick" in sys.argv
    res = {"dloop_cd": run_dloop_cd(size=64) if quick else run_dloop_cd(),
           "scaling": run_scaling(sizes=QUICK_SIZES, repeats=1) if quick else run_scaling(),
           "map_peers": run_map_peers(image_size=64, image_m=1024, repeats=1) if quick else run_map_peers(),
           "sbl_ard": run_sbl_ard(repeats=1) if quick else run_sbl_ard()}
    print(json.dumps(res, indent=1, default=str))
