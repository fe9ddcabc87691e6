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

``map_peers``: (a) the signal ``bz.datasets.load("slm_signal", kind="spikes", n=512, m=200, design="gaussian")``,
``SLM(tau=5, sigma2=0.005, B="identity")``: ``map`` (``fista`` and ``admm``, default tolerances) against
scikit-learn's ``Lasso``, which minimises ||y - X w||^2 / (2 m) + alpha ||w||_1, our objective
||X u - y||^2 / (2 sigma2) + tau ||u||_1 times sigma2 / m: alpha = tau sigma2 / m, ``fit_intercept=False``,
``tol=1e-12``; best of ``repeats`` wall times, ours through ``bz.fit``. (b) the camera image at 128 x 128
(``--quick``: 64 x 64) measured by m = 1200 (1024) Fourier rows, ``SLM(tau=5, sigma2=0.005, B="wavelet")``:
``map`` (``fista``, ``admm``) against SigPy's ``sigpy.mri.app.L1WaveletRecon`` (one coil of sensitivity 1, its
default accelerated proximal gradient), each at the same iteration budgets (100, SigPy's default, and 1000), one
run each. SigPy works on complex images with a centred FFT and a zero-padded (not periodised) wavelet transform of
pywt's greatest depth; it is given our Daubechies-4 filter (``wave_name="db2"``), lambda = tau sigma2, and the data
in its layout (:func:`sigpy_problem`: on real images its data term equals ours up to a constant and its iterates
stay real). Its wavelet term still differs from ours, so every solution is scored on OUR objective and on SigPy's
(:func:`sigpy_objective`). Reported: wall time, objectives, relative difference to the lowest of our objective
found; time ratios. Target: on the signal, ``map`` reaches Lasso's objective (relative difference <= 1e-6) at least
as fast as Lasso.

``sbl_ard``: ``sbl`` against scikit-learn's ``ARDRegression`` on the signal of ``map_peers``, hyperpriors switched
off as in tests/test_slm_backends.py (``alpha_1 = alpha_2 = lambda_1 = lambda_2 = 0``, ``threshold_lambda`` =
1e12 = our ``prune``, ``tol=1e-12``, ``fit_intercept=False``) and ``max_iter=5000``; ``sbl`` with ``learn_noise``
(ARD always learns the noise), ``tol=1e-10``, ``max_iter=5000`` and ARD's starting point (noise variance var(y),
unit precisions), timed through ``bz.fit`` with one draw (the default 4 x 1000 i.i.d. draws are not part of the
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
BUDGETS = (100, 1000)     # map / SigPy iteration budgets on the image (100: SigPy's default)

TARGET_CD = "one coordinate-descent sweep costs >= 100x one dloop outer iteration"
TARGET_MAP = "map reaches Lasso's objective (relative difference <= 1e-6) at least as fast as Lasso on the signal"
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
    from bayeszoo.inference.slm._common import problem

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


def _map(model, data, solver, repeats, **options):
    import bayeszoo as bz

    secs, fit = best_of(lambda: bz.fit(model, data, "map", solver=solver, seed=0, progress=False, **options), repeats)
    return secs, model.posterior_mean(fit), fit


def _lasso(data, alpha, repeats):
    import warnings

    from sklearn.linear_model import Lasso

    def go():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return Lasso(alpha=alpha, fit_intercept=False, tol=1e-12, max_iter=100_000).fit(data.X, data.y)
    return best_of(go, repeats)


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


def sigpy_objective(data, lam):
    """SigPy's objective for a real image u: 1/2 sum_k w_k |F u - d|_k^2 + lam ||Psi u||_1, its zero-padded
    Daubechies-4 transform Psi (our data term up to a constant, another wavelet term)."""
    import sigpy

    ksp, weights, _ = sigpy_problem(data)
    N = ksp.shape[-1]
    psi = sigpy.linop.Wavelet((N, N), wave_name="db2")

    def f(u):
        x = np.asarray(u, dtype=complex).reshape(N, N)
        r = sigpy.fft(x, center=True) - ksp[0]
        return float(0.5 * np.sum(weights * np.abs(r) ** 2) + lam * np.sum(np.abs(psi(x))))
    return f


def _sigpy(data, lam, max_iter):
    import sigpy.mri

    ksp, weights, maps = sigpy_problem(data)

    def go():
        return sigpy.mri.app.L1WaveletRecon(ksp, maps, lam, weights=weights, wave_name="db2", max_iter=max_iter,
                                            show_pbar=False).run()
    secs, x = best_of(go, 1)
    x = np.asarray(x)
    return secs, np.real(x).ravel(), float(np.max(np.abs(np.imag(x))))


def run_map_peers(image_size: int = 128, image_m: int = 1200, budgets=BUDGETS, repeats: int = 3,
                  blas_threads: int | None = 1) -> dict:
    import warnings

    import bayeszoo as bz

    with _blas(blas_threads), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # (a) the signal: map against Lasso, each to its own stopping rule
        data = bz.datasets.load("slm_signal", sigma2=SIGMA2, seed=0, **SIGNAL)
        model = bz.models.SLM(potential="laplace", tau=TAU, sigma2=SIGMA2, B="identity")
        f = _l1_objective(model, data)
        _map(model, data, "fista", 1)                                     # warm-up
        signal = {}
        for solver in ("fista", "admm"):
            secs, u, fit = _map(model, data, solver, repeats)
            signal[f"map {solver}"] = {"seconds": secs, "objective": f(u), "iterations": fit.info["iterations"],
                                       "converged": fit.info["converged"]}
        alpha = TAU * SIGMA2 / data.n
        secs, lasso = _lasso(data, alpha, repeats)
        signal["sklearn Lasso"] = {"seconds": secs, "objective": f(lasso.coef_), "iterations": int(lasso.n_iter_),
                                   "alpha": alpha}
        _relative(signal)
        # (b) the image: map against SigPy's L1-wavelet reconstruction at equal iteration budgets
        idata = image_data(image_size, image_m)
        imodel = image_model("wavelet")
        fi = _l1_objective(imodel, idata)
        fs = sigpy_objective(idata, TAU * SIGMA2)
        _sigpy(idata, TAU * SIGMA2, 5)                                    # warm-up (numba compiles SigPy's kernels)
        image = {}
        for it in budgets:
            for solver in ("fista", "admm"):
                secs, u, fit = _map(imodel, idata, solver, 1, max_iter=it, tol=1e-300)
                image[f"map {solver}, {it} it."] = {"seconds": secs, "objective": fi(u), "iterations": it,
                                                     "sigpy_objective": fs(u)}
            secs, u, imag = _sigpy(idata, TAU * SIGMA2, it)
            image[f"SigPy L1WaveletRecon, {it} it."] = {"seconds": secs, "objective": fi(u), "iterations": it,
                                                          "sigpy_objective": fs(u), "max_abs_imag": imag}
        _relative(image)
    best_map = min((v for k, v in signal.items() if k.startswith("map")), key=lambda v: v["seconds"])
    ok = [v for k, v in signal.items() if k.startswith("map") and v["relative"] <= 1e-6]
    met = bool(ok) and min(v["seconds"] for v in ok) <= signal["sklearn Lasso"]["seconds"]
    return {"name": "slm_map_peers", "signal": signal, "image": image,
            "lasso_time_over_map": signal["sklearn Lasso"]["seconds"] / best_map["seconds"],
            "signal_problem": dict(SIGNAL, tau=TAU, sigma2=SIGMA2),
            "image_problem": {"size": image_size, "m": image_m, "tau": TAU, "sigma2": SIGMA2, "B": "wavelet"},
            "blas_threads": blas_threads, "target": TARGET_MAP, "target_met": met}


def _relative(table: dict) -> None:
    """Adds each entry's relative objective difference to the lowest objective of the table."""
    low = min(v["objective"] for v in table.values())
    for v in table.values():
        v["relative"] = (v["objective"] - low) / abs(low)


def rows_map_peers(r: dict) -> list[tuple[str, str, str]]:
    out = []
    p = r["signal_problem"]
    for name, v in r["signal"].items():
        extra = f", converged {v['converged']}" if "converged" in v else ""
        out.append((f"slm signal {name}", f"{v['seconds'] * 1e3:.1f} ms",
                    f"objective {v['objective']:.8g} (+{v['relative']:.1e} rel.), {v['iterations']} iterations{extra}"))
    out.append(("slm signal Lasso time / fastest map time", f"{r['lasso_time_over_map']:.2f}x",
                f"{p['kind']} n = {p['n']}, m = {p['m']}, tau = {p['tau']:g}"))
    q = r["image_problem"]
    for name, v in r["image"].items():
        out.append((f"slm image {name}", f"{v['seconds']:.2f} s",
                    f"objective {v['objective']:.8g} (+{v['relative']:.1e} rel.); SigPy's objective "
                    f"{v['sigpy_objective']:.6g}"))
    for it in sorted({v["iterations"] for v in r["image"].values()}):
        sig = r["image"][f"SigPy L1WaveletRecon, {it} it."]["seconds"]
        fista = r["image"][f"map fista, {it} it."]["seconds"]
        out.append((f"slm image map fista / SigPy time, {it} it.", f"{fista / sig:.2f}x",
                    f"camera {q['size']}x{q['size']}, m = {q['m']}"))
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
