"""Relevance vector machine (Tipping 2001; Tzikas MSc thesis ch. 2-3; Tzikas, Likas, Galatsanos 2009).

    t_n = sum_i w_i phi_i(x_n) + eps_n,   eps_n ~ N(0, 1/beta)            (regression)
    P(t_n = 1) = link(sum_i w_i phi_i(x_n))                              (classification, logit or probit)
    w_i | alpha_i ~ N(0, 1/alpha_i),  alpha_i ~ Gamma(a, b),  beta ~ Gamma(c, d)   (shape, rate)

The basis is one kernel per training point plus an optional bias column [T 2.2]: Phi is N x (N + 1).
Canonical posterior variables written by every backend: ``w`` and ``log_alpha`` over ``basis`` and, for
regression, the scalar ``log_beta``.
"""
from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import ClassVar

from dataclasses import dataclass

import numpy as np

from bayeszoo import checks, datasets
from bayeszoo.datasets import Dataset
from bayeszoo.models.base import SCALE, Model, scale_spread
from bayeszoo.models.family import Family
from bayeszoo.numerics.special import log_gamma_numpyro, pm_log_gamma, pt_log_ndtr

KERNELS = ("gauss", "poly", "sigmoid", "bspline", "linear")
TASKS = ("regression", "classification")
LINKS = ("logit", "probit")
LOG_ALPHA_PRUNED = float(np.log(1e12))  # alpha above 1e12 counts as pruned ([P] step 4); stored at this value
#: largest magnitude of an input, of a regression target and of a design-matrix entry: beyond it squares and sums
#: of squares (distances, Phi^T Phi, t^T t) overflow double precision (docs/families/rvm.md, "Inputs")
MAX_MAGNITUDE = 1e100
#: smallest magnitude of nonzero regression targets (all zero is allowed): below it their squares underflow
MIN_TARGET_SCALE = 1e-100
#: a kernel matrix whose entries all lie within this fraction of its largest entry is numerically constant: its
#: columns differ by less than Phi^T Phi resolves in double precision, so every basis function is the bias
CONSTANT_KERNEL = 1e-8
#: range of the Gamma hyperparameters a, b, c, d
HYPER_MIN, HYPER_MAX = 1e-50, 1e50
#: ``width="evidence"``: the width that maximises the fast RVM's log evidence
EVIDENCE = "evidence"
WIDTH_RULES = (SCALE, EVIDENCE)
#: the evidence search runs over widths within this factor of the "scale" width, either way
EVIDENCE_SPAN = 4.0
#: its first, coarse grid: this many widths evenly spaced in log width over that range
EVIDENCE_GRID = 5
#: and it refines the best of the grid to this tolerance in log width (2 %)
EVIDENCE_XTOL = 0.02

#: ``log_evidence(model, Phi, t)``: the fast RVM's log evidence on a design Phi, which ``width="evidence"``
#: maximises. The fast backend installs it (:func:`use_width_evidence`) when the inference layer is imported, as
#: ``import bayeszoo`` does; this layer cannot import that one.
_width_evidence: Callable | None = None


def use_width_evidence(log_evidence: Callable) -> None:
    """Install the function that scores a width for ``width="evidence"`` (see ``_width_evidence``)."""
    global _width_evidence
    _width_evidence = log_evidence


def scale_width(X, kernel: str = "gauss") -> float:
    """The width that ``width="scale"`` stands for, from the training inputs X (n, d): scikit-learn SVC's
    ``gamma="scale"``, gamma = 1 / (d var(X)) with var over every entry of X (``models.base.scale_spread``), in this
    family's parametrisation.

    ``gauss`` and ``bspline``: h = sqrt(d var(X)), so exp(-|x - x'|^2 / h^2) = exp(-gamma |x - x'|^2) (the typical
    squared distance between two rows is 2 d var(X)); ``sigmoid``: width = d var(X), so tanh(<x, x'> / width +
    offset) = tanh(gamma <x, x'> + offset). (``poly`` and ``linear`` have no width: ``RVM.kernel_width`` gives 1.0,
    unused, for them.)
    """
    setting, remedy = f"RVM: width={SCALE!r} sets the kernel width", "the model can only fit a constant"
    spread = scale_spread(X, setting, remedy)
    if kernel != "sigmoid" and not 0.0 < spread < np.inf:
        # d var(X) under- or overflows (entries beyond ~1e+-154) while its square root does not
        return float(np.exp(0.5 * scale_spread(X, setting, remedy, log=True)))
    if not 0.0 < spread < np.inf:
        raise ValueError(f"{setting} to d var(X), which is {spread:g} in double precision for these inputs (largest "
                         f"|x| = {float(np.max(np.abs(X))):.3g}): rescale X to near unit scale")
    return spread if kernel == "sigmoid" else float(np.sqrt(spread))


def evidence_width(score: Callable[[float], float], center: float) -> tuple[float, dict]:
    """The width h in [center / EVIDENCE_SPAN, center * EVIDENCE_SPAN] that maximises ``score(h)`` (a log evidence;
    -inf where the width cannot be fitted): a grid of EVIDENCE_GRID widths evenly spaced in log h, then a bounded
    Brent search (``scipy.optimize.minimize_scalar``) between the best grid width's neighbours, to EVIDENCE_XTOL in
    log h. The grid guards the local search against the evidence's other maxima. Returns ``(h, searched)``, with
    ``searched`` = {"widths": [...], "log_evidence": [...]} every width tried, in the order tried; h is the best of
    them."""
    from scipy.optimize import minimize_scalar

    tried: dict[float, float] = {}

    def minus(u: float) -> float:
        if u not in tried:
            tried[u] = float(score(float(np.exp(u))))
        value = tried[u]
        return -value if np.isfinite(value) else np.inf

    half = np.log(EVIDENCE_SPAN)
    grid = np.log(center) + np.linspace(-half, half, EVIDENCE_GRID)
    values = [-minus(u) for u in grid]
    best = int(np.argmax(values))
    if not np.isfinite(values[best]):
        raise ValueError(f"RVM: width={EVIDENCE!r} found no width between {center / EVIDENCE_SPAN:.3g} and "
                         f"{center * EVIDENCE_SPAN:.3g} at which the model can be fitted to these data; give a "
                         f"number for width")
    low, high = grid[max(best - 1, 0)], grid[min(best + 1, EVIDENCE_GRID - 1)]
    minimize_scalar(minus, bounds=(low, high), method="bounded", options={"xatol": EVIDENCE_XTOL})
    u_best = max(tried, key=lambda u: tried[u] if np.isfinite(tried[u]) else -np.inf)
    return float(np.exp(u_best)), {"widths": [float(np.exp(u)) for u in tried],
                                   "log_evidence": list(tried.values())}


def kernel_matrix(X1, X2, kernel: str = "gauss", width: float = 1.0, degree: int = 2, offset: float = 1.0):
    """K(x1, x2) for the kernels of [T 1.38-1.42]; Gaussian in the [P 63] parametrisation exp(-|x-m|^2 / h^2)."""
    X1 = np.atleast_2d(np.asarray(X1, dtype=float))
    X2 = np.atleast_2d(np.asarray(X2, dtype=float))
    if kernel in ("gauss", "bspline"):
        # shifted to X2's mean first: |x1|^2 + |x2|^2 - 2 x1.x2 cancels catastrophically for inputs far from the
        # origin (e.g. times in seconds since 1970); width^2 is never formed, so tiny widths do not underflow to 0
        shift = X2.mean(0) if X2.shape[0] else 0.0
        X1, X2 = X1 - shift, X2 - shift
        sq = (np.sum(X1**2, 1)[:, None] + np.sum(X2**2, 1)[None, :] - 2.0 * X1 @ X2.T).clip(min=0.0)
        if kernel == "gauss":
            with np.errstate(over="ignore"):                   # far beyond the width: exp(-inf) = 0, as meant
                return np.exp(-(sq / width) / width)
        return _bspline3(np.sqrt(sq) / width)
    inner = X1 @ X2.T
    if kernel == "linear":
        return inner
    if kernel == "poly":
        return (inner + offset) ** degree          # inhomogeneous polynomial [T 1.41]; offset 0 gives [T 1.38]
    if kernel == "sigmoid":
        return np.tanh(inner / width + offset)      # tanh(k <x1, x2> + theta) [T 1.40] with k = 1 / width
    raise ValueError(f"unknown kernel {kernel!r}; choose one of {KERNELS}")


def _bspline3(r):
    """Cubic B-spline B_3 (the 4-fold convolution of the unit box), evaluated at distance r [T 1.42, p = 1]."""
    r = np.abs(r)
    out = np.where(r < 1.0, 2.0 / 3.0 - r**2 + r**3 / 2.0, 0.0)
    return np.where((r >= 1.0) & (r < 2.0), (2.0 - r) ** 3 / 6.0, out)


def checked_new_inputs(model, fit, X_new) -> np.ndarray:
    """X_new as a checked (n, d) matrix for a fit made with ``model`` (``check_fit``, ``check_inputs``), at most
    :data:`MAX_MAGNITUDE` in magnitude (squared distances to the bases would overflow beyond it)."""
    model.check_fit(fit)
    X_new = model.check_inputs(fit, X_new)
    top = float(np.max(np.abs(X_new))) if X_new.size else 0.0
    if top > MAX_MAGNITUDE:
        raise ValueError(f"{type(model).__name__}: X_new reaches {top:.3g} in magnitude; the limit is "
                         f"{MAX_MAGNITUDE:g}")
    return X_new


def fitted_width(model, fit, centers) -> float:
    """The kernel width a fit was made with: the number stored with it (``constant_data["kernel_width"]``), or, for a
    fit saved before widths were stored, the model's width for its training inputs ``centers``."""
    stored = fit.idata.constant_data.get("kernel_width")
    return float(stored.values) if stored is not None else model.kernel_width(centers)


#: The Gamma(a, b) prior on the weight precisions and Gamma(c, d) on the noise precision must be proper: every one
#: a number in [HYPER_MIN, HYPER_MAX] (beyond, the precisions they allow, e.g. beta up to c / d at an exact fit,
#: leave double precision). Shared by the RVM and the aRVM.
GAMMA_HYPERPRIORS = {name: checks.Interval(float, HYPER_MIN, HYPER_MAX, "both") for name in ("a", "b", "c", "d")}


def check_scales(model, data: Dataset) -> None:
    """Inputs (and regression targets) within the magnitudes the numerics handle (docs/families/rvm.md, "Inputs"):
    |X| <= MAX_MAGNITUDE; regression targets all zero or with largest magnitude in
    [MIN_TARGET_SCALE, MAX_MAGNITUDE]. Beyond these, squares and sums of squares overflow or underflow."""
    name = type(model).__name__
    for what, X in (("X", data.X), ("X_test", data.X_test)):
        top = float(np.max(np.abs(X))) if X.size else 0.0
        if top > MAX_MAGNITUDE:
            raise ValueError(f"{name}: training inputs {what} reach {top:.3g} in magnitude; {name} takes inputs up to "
                             f"{MAX_MAGNITUDE:g} (squared distances would overflow): rescale X (and the kernel width "
                             f"with it), e.g. to unit standard deviation")
    if model.is_classifier:
        return
    for what, y in (("y", data.y), ("y_test", data.y_test)):
        top = float(np.max(np.abs(y))) if y.size else 0.0
        if top > MAX_MAGNITUDE or 0.0 < top < MIN_TARGET_SCALE:
            raise ValueError(f"{name}: regression targets {what} reach {top:.3g} in magnitude; {name} takes targets "
                             f"between {MIN_TARGET_SCALE:g} and {MAX_MAGNITUDE:g} (or all zero), since the priors "
                             f"on the weights and the noise are not scale-free: standardise y (e.g. "
                             f"(y - mean) / sd) and transform predictions back")


def check_task_matches_data(model, data: Dataset) -> None:
    """A binary classifier needs 0/1 labels with both classes in training; a regressor needs a regression set
    (``task`` "regression" or not given)."""
    name = type(model).__name__
    if model.is_classifier:
        for what, y in (("y", data.y), ("y_test", data.y_test)):
            labels = np.unique(y)
            if not np.all(np.isin(labels, (0.0, 1.0))):
                raise ValueError(f"{name} classification needs binary labels 0/1 in {what}; "
                                 f"got values {labels[:10].tolist()}")
        if np.unique(data.y).size < 2:
            raise ValueError(f"{name} classification needs both classes (0 and 1) in the training labels")
        if data.task == "regression":
            raise ValueError(f"dataset {data.name!r} is a regression problem; use {name}(task='regression')")
    elif data.task in ("classification", "multiclass"):
        raise ValueError(f"dataset {data.name!r} is a {data.task} problem; use {name}(task='classification')")
    elif data.task not in (None, "regression"):
        raise ValueError(f"dataset {data.name!r} is an {data.task} problem, not regression; {name} needs inputs X "
                         f"and targets y")


@dataclass
class RVM(Model):
    """Relevance vector machine for regression or binary classification.

    Parameters
    ----------
    task : {"regression", "classification"}
    kernel : {"gauss", "poly", "sigmoid", "bspline", "linear"}
        Basis functions centred on the training inputs.
    width : float, "scale" or "evidence"
        Kernel width h of ``exp(-|x - x_n|^2 / h^2)`` ([P 63]); scale for ``bspline`` and ``sigmoid``.
        ``"scale"`` (the default) sets it at fit time from the training inputs as scikit-learn's SVC sets
        ``gamma="scale"``: h = sqrt(d var(X)) (``sigmoid``: d var(X)); see :func:`scale_width`. ``"evidence"``
        chooses it at fit time as the width that maximises the type-II marginal likelihood (the ``fast`` backend's
        log evidence) within a factor :data:`EVIDENCE_SPAN` of the ``"scale"`` width (:func:`evidence_width`; about
        ten ``fast`` fits). The number used is stored with the fit (``fit.idata.constant_data["kernel_width"]``),
        and predictions use it.
    degree, offset : polynomial kernel (<x1,x2> + offset)^degree; ``offset`` is also the sigmoid's theta.
    bias : bool
        Add a constant basis function (column 0 of Phi).
    link : {"logit", "probit"}
        Classification link. The sources use the logistic link; the Gibbs sampler needs probit (Albert-Chib).
    a, b : Gamma(shape a, rate b) hyperprior on each weight precision alpha_i.
    c, d : Gamma(shape c, rate d) hyperprior on the noise precision beta (regression).
        The sources' a = b = c = d = 0 is improper and cannot be sampled; these small positive defaults keep
        every backend on one proper model. They are kept at the sources' nearly flat ARD prior because the
        type-II (EM / fast) algorithms need a ~ 0 to prune; samplers explore the resulting funnel badly
        (divergences, low ESS, high R-hat; BENCHMARKS.md). RVM(a=1, b=1e-2) (a Student-t(2, scale 0.1) weight
        prior) and RVM(a=0.5, b=1e-3) sample far better: use one of those for sampler comparisons.
    """

    task: str = "regression"
    kernel: str = "gauss"
    width: float | str = SCALE
    degree: int = 2
    offset: float = 1.0
    bias: bool = True
    link: str = "logit"
    a: float = 1e-4
    b: float = 1e-4
    c: float = 1e-4
    d: float = 1e-4

    family = "rvm"
    example_data = "sinc"

    _parameter_constraints: ClassVar[dict] = {
        "task": checks.OneOf(TASKS), "kernel": checks.OneOf(KERNELS),
        "width": [checks.POSITIVE, checks.OneOf(WIDTH_RULES)], "degree": checks.POSITIVE_INT,
        "offset": checks.Interval(float), "bias": checks.Flag(), "link": checks.OneOf(LINKS), **GAMMA_HYPERPRIORS}

    def __post_init__(self):
        super().__post_init__()
        # width="evidence" resolved per training set (a hash of X and y): (width, searched)
        self._evidence_widths: dict[str, tuple[float, dict]] = {}

    @property
    def is_classifier(self) -> bool:
        return self.task == "classification"

    reference_advice: ClassVar[str] = (
        "RVM: under the near-improper default priors (a = b = 1e-4) the weights and their precisions form a funnel "
        "that NUTS cannot sample; compare under a proper prior such as RVM(a=5, b=0.05, c=1, d=1e-3) (the "
        "catalogue's rvm-sinc) or RVM(a=1, b=1e-2, c=1, d=1e-3), use the gibbs backend as the reference "
        "(reference='gibbs', long runs), or raise numpyro's target_accept to 0.99 (docs/families/rvm.md).")

    @property
    def compare_vars(self) -> tuple[str, ...]:
        # log_alpha of a pruned basis is +inf under type-II ML, so means / sds are compared on w (and noise).
        return ("w",) if self.is_classifier else ("w", "log_beta")

    # ---- data ----------------------------------------------------------------------------------------
    def validate(self, data: Dataset) -> None:
        super().validate(data)
        check_task_matches_data(self, data)
        check_scales(self, data)

    def kernel_width(self, X, y=None) -> float:
        """The kernel width for training inputs X (and targets y): ``width`` itself, :func:`scale_width` of X for
        "scale", or for "evidence" the width that maximises the fast RVM's log evidence on (X, y)
        (:meth:`evidence_search`)."""
        if not isinstance(self.width, str):
            return float(self.width)
        # poly and linear kernels have no width: "scale" and "evidence" stand for nothing there (1.0, unused)
        if self.kernel in ("poly", "linear"):
            return 1.0
        if self.width == SCALE:
            return scale_width(X, self.kernel)
        if y is None:
            raise ValueError(f"RVM: width={EVIDENCE!r} is chosen from the training inputs and targets together; "
                             f"pass the targets y, or use the width stored with a fit "
                             f"(fit.idata.constant_data['kernel_width'])")
        return self.evidence_search(X, y)[0]

    def evidence_search(self, X, y) -> tuple[float, dict]:
        """``width="evidence"`` on training inputs X and targets y: ``(width, searched)`` of :func:`evidence_width`
        around :func:`scale_width`, each width scored by the fast RVM's log evidence; computed once per training
        set and kept with the model."""
        X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
        key = hashlib.sha1(repr((X.shape, y.shape)).encode() + X.tobytes() + y.tobytes()).hexdigest()
        if key not in self._evidence_widths:
            if _width_evidence is None:
                raise RuntimeError(f"RVM: width={EVIDENCE!r} needs the fast backend: import bayeszoo (or "
                                   f"bayeszoo.inference) first")

            def score(width: float) -> float:
                try:
                    Phi = self._design_at(X, width)
                except ValueError:              # constant or overflowing kernel: no fit at this width
                    return -np.inf
                return _width_evidence(self, Phi, y)

            self._evidence_widths[key] = evidence_width(score, scale_width(X, self.kernel))
        return self._evidence_widths[key]

    def design(self, X_new, centers, width: float | None = None) -> np.ndarray:
        """Design matrix Phi (n_new x M): [1, K(x, x_1), ..., K(x, x_N)] with the bias column first. ``width``: the
        kernel width (None: :meth:`kernel_width` of the centres, i.e. of the training inputs)."""
        width = self.kernel_width(centers) if width is None else width
        K = kernel_matrix(X_new, centers, self.kernel, width, self.degree, self.offset)
        if self.bias:
            K = np.column_stack([np.ones(K.shape[0]), K])
        return K

    def _kernel_text(self, width: float | None = None) -> str:
        """The kernel in words; ``width``: the resolved number (None: the ``width`` option as given)."""
        if width is None:
            shown = repr(self.width) if isinstance(self.width, str) else f"{self.width:g}"
        else:
            shown = f"{width:g}" + (f" ({self.width!r})" if isinstance(self.width, str) else "")
        if self.kernel in ("gauss", "bspline"):
            return f"kernel {self.kernel!r} of width {shown}"
        if self.kernel == "poly":
            return f"kernel 'poly' of degree {self.degree} and offset {self.offset:g}"
        if self.kernel == "sigmoid":
            return f"kernel 'sigmoid' of width {shown} and offset {self.offset:g}"
        return "kernel 'linear'"

    def training_design(self, data: Dataset) -> np.ndarray:
        """Phi at the training inputs, checked before any work: finite, entries within MAX_MAGNITUDE (so that
        Phi^T Phi is finite), and a kernel matrix that is not constant (every basis function would be the bias: a
        width far larger than the distances between the inputs, or inputs that are all the same point)."""
        return self._design_at(data.X, self.kernel_width(data.X, data.y))

    def _design_at(self, X, width: float) -> np.ndarray:
        """:meth:`training_design` at training inputs X and a given kernel width."""
        n = X.shape[0]
        with np.errstate(over="ignore", invalid="ignore"):
            K = kernel_matrix(X, X, self.kernel, width, self.degree, self.offset)
        top = float(np.max(np.abs(K))) if np.all(np.isfinite(K)) else np.inf
        if top > MAX_MAGNITUDE:
            raise ValueError(f"RVM: the {self._kernel_text(width)} overflows on these inputs (kernel values up to "
                             f"{top:.3g}; the limit is {MAX_MAGNITUDE:g}): rescale X to near unit scale or choose "
                             f"another kernel")
        if np.max(K) - np.min(K) <= CONSTANT_KERNEL * top:
            if np.all(X == X[0]):
                why = f"all {n} training inputs are the same point"
            elif self.kernel in ("gauss", "bspline"):
                spread = float(np.max(np.ptp(X, axis=0)))
                why = (f"the width is far larger than the distances between the inputs (their largest range is "
                       f"{spread:.3g}); choose a width comparable to those distances")
            else:
                why = ("the inner products of the inputs do not change the kernel's value (inputs too close to zero, "
                       "a width too large or an offset too large in magnitude); rescale X or change those options")
            raise ValueError(f"RVM: the {self._kernel_text(width)} is constant on the training inputs, so every basis "
                             f"function equals the bias and the model can only fit a constant: {why}")
        if self.bias:
            K = np.column_stack([np.ones(K.shape[0]), K])
        return K

    def _checked_design(self, fit, X_new) -> np.ndarray:
        """Phi at X_new for a fit made with this model, after checking the fit and the inputs."""
        X_new = checked_new_inputs(self, fit, X_new)
        centers = np.asarray(fit.idata.constant_data["X"].values, dtype=float)
        width = fitted_width(self, fit, centers)
        with np.errstate(over="ignore", invalid="ignore"):
            Phi = self.design(X_new, centers, width)
        if not np.all(np.isfinite(Phi)) or (Phi.size and np.max(np.abs(Phi)) > MAX_MAGNITUDE):
            raise ValueError(f"RVM: the {self._kernel_text(width)} overflows at X_new (the limit is "
                             f"{MAX_MAGNITUDE:g}); X_new must be on the scale of the training inputs")
        return Phi

    def n_basis(self, data: Dataset) -> int:
        return data.n + int(self.bias)

    def var_dims(self, data: Dataset) -> dict[str, tuple[str, ...]]:
        dims = {"w": ("basis",), "log_alpha": ("basis",)}
        if not self.is_classifier:
            dims["log_beta"] = ()
        return dims

    def coords(self, data: Dataset) -> dict[str, np.ndarray]:
        return {"basis": np.arange(self.n_basis(data)), "obs": np.arange(data.n)}

    def constant_data(self, data: Dataset) -> dict:
        return {"X": data.X, "kernel_width": self.kernel_width(data.X, data.y)}

    # ---- declarations --------------------------------------------------------------------------------
    def _arrays(self, data: Dataset):
        Phi = self.training_design(data)
        return Phi, np.asarray(data.y, dtype=float)

    def declaration_memory(self, data: Dataset) -> dict[str, int]:
        return {f"design matrix Phi ({data.n:,} x {self.n_basis(data):,})": 8 * data.n * self.n_basis(data)}

    def pymc_model(self, data: Dataset):
        """The RVM in PyMC. Free variables: ``log_alpha`` (basis), ``z`` (basis), ``log_beta`` (regression).

        ``log_alpha`` and ``log_beta`` are sampled directly in log space with the Gamma density pushed through
        log (Jacobian included, all normalising constants kept); ``w = z * exp(-log_alpha / 2)`` is a
        Deterministic over ``basis``.
        """
        import pymc as pm
        import pytensor.tensor as pt

        self.validate(data)
        Phi, y = self._arrays(data)
        coords = {k: v for k, v in self.coords(data).items()}
        with pm.Model(coords=coords) as model:
            log_alpha = pm_log_gamma("log_alpha", self.a, self.b, dims="basis")
            z = pm.Normal("z", 0.0, 1.0, dims="basis")
            w = pm.Deterministic("w", z * pt.exp(-0.5 * log_alpha), dims="basis")
            f = pt.dot(Phi, w)
            if self.is_classifier:
                logit = f if self.link == "logit" else pt_log_ndtr(f) - pt_log_ndtr(-f)
                pm.Bernoulli("y", logit_p=logit, observed=y, dims="obs")
            else:
                log_beta = pm_log_gamma("log_beta", self.c, self.d)
                pm.Normal("y", mu=f, sigma=pt.exp(-0.5 * log_beta), observed=y, dims="obs")
        return model

    def numpyro_model(self, data: Dataset):
        """The same joint density as :meth:`pymc_model`, as a NumPyro model function of no arguments (its data
        bound by ``functools.partial``: :class:`~bayeszoo.models.base.Model`)."""
        import jax.numpy as jnp
        import numpyro
        import numpyro.distributions as dist
        from jax.scipy.special import log_ndtr

        self.validate(data)
        Phi_np, y_np = self._arrays(data)
        M = Phi_np.shape[1]
        a, b, c, d = (float(v) for v in (self.a, self.b, self.c, self.d))
        classifier, link = self.is_classifier, self.link
        LogGamma = log_gamma_numpyro()

        def model(Phi, y):
            Phi, y = jnp.asarray(Phi), jnp.asarray(y)
            log_alpha = numpyro.sample("log_alpha", LogGamma(a, b).expand([M]).to_event(1))
            z = numpyro.sample("z", dist.Normal(0.0, 1.0).expand([M]).to_event(1))
            w = numpyro.deterministic("w", z * jnp.exp(-0.5 * log_alpha))
            f = Phi @ w
            if classifier:
                logit = f if link == "logit" else log_ndtr(f) - log_ndtr(-f)
                numpyro.sample("y", dist.Bernoulli(logits=logit).to_event(1), obs=y)
            else:
                log_beta = numpyro.sample("log_beta", LogGamma(c, d))
                numpyro.sample("y", dist.Normal(f, jnp.exp(-0.5 * log_beta)).to_event(1), obs=y)

        return functools.partial(model, Phi=Phi_np, y=y_np)

    # ---- prediction ----------------------------------------------------------------------------------
    def _draws(self, fit, name):
        arr = np.asarray(fit.idata.posterior[name].values, dtype=float)
        return arr.reshape(arr.shape[0] * arr.shape[1], *arr.shape[2:])

    def predict_draws(self, fit, X_new) -> np.ndarray:
        """Latent f(x) = Phi(x) w for every posterior draw: (chain * draw, n_new).

        The kernel centres are the training inputs stored with the fit (``idata.constant_data["X"]``). A ValueError
        names the problem when the fit was made with another model (``check_fit``) or X_new is not a finite matrix
        with the training inputs' columns (``check_inputs``).
        """
        Phi = self._checked_design(fit, X_new)
        w = self._draws(fit, "w")
        if w.shape[1] != Phi.shape[1]:
            raise ValueError(f"fit has {w.shape[1]} weights but this model's basis has {Phi.shape[1]} functions; "
                             f"was the fit made with a different RVM (bias / kernel)?")
        # type-II fits set the pruned bases' weights to exactly 0 in every draw: skip those columns
        used = np.any(w != 0.0, axis=0)
        with np.errstate(over="ignore", invalid="ignore"):
            f = w[:, used] @ Phi[:, used].T
        if not np.all(np.isfinite(f)):
            raise ValueError("RVM: the latent function overflows at X_new (weights times kernel values beyond double "
                             "precision); X_new must be on the scale of the training inputs")
        return f

    def log_likelihood(self, fit, data: Dataset) -> np.ndarray:
        """log N(t_n | f_n, 1/beta) (regression) or log sig(+-f_n) (classification) at every draw."""
        from scipy.special import log_expit, log_ndtr

        f = self.predict_draws(fit, data.X)
        t = np.asarray(data.y, dtype=float)
        if self.is_classifier:
            signed = (2.0 * t - 1.0) * f
            return log_expit(signed) if self.link == "logit" else log_ndtr(signed)
        log_beta = self._draws(fit, "log_beta")[:, None]
        return 0.5 * (log_beta - np.log(2.0 * np.pi)) - 0.5 * np.exp(log_beta) * (t - f) ** 2

    def _prob_draws(self, f):
        from scipy.special import expit, ndtr

        return expit(f) if self.link == "logit" else ndtr(f)

    def predict(self, fit, X_new) -> np.ndarray:
        """Regression: posterior predictive mean (n,). Classification: P(y = 1), averaged over draws (n,)."""
        f = self.predict_draws(fit, X_new)
        if self.is_classifier:
            return self._prob_draws(f).mean(0)
        return f.mean(0)

    def predict_std(self, fit, X_new) -> np.ndarray:
        """Regression: predictive sd including noise, sqrt(Var_draws[f] + E_draws[1 / beta]) (n,)."""
        if self.is_classifier:
            raise ValueError("predict_std is defined for regression; use predict for class probabilities")
        f = self.predict_draws(fit, X_new)
        noise_var = np.exp(-self._draws(fit, "log_beta")).mean()
        return np.sqrt(f.var(0) + noise_var)

    # ---- scoring -------------------------------------------------------------------------------------
    def target_scale(self, data: Dataset) -> float:
        """Scale of the latent function: sd of the training targets (regression), 1 (classification)."""
        if self.is_classifier:
            return 1.0
        sd = float(np.std(data.y))
        return sd if sd > 0 else 1.0

    def relevance(self, fit, data: Dataset | None = None) -> np.ndarray:
        """Per-basis relevance r_i = rms_n |phi_i(x_n)| / sqrt(median alpha_i) / target scale (see n_relevant)."""
        self.check_fit(fit)
        centers = np.asarray(fit.idata.constant_data["X"].values, dtype=float)
        Phi = self.design(centers, centers, fitted_width(self, fit, centers))
        rms = np.sqrt(np.mean(Phi**2, axis=0))
        log_alpha = self._draws(fit, "log_alpha")
        med = np.median(log_alpha, axis=0)
        if data is None:
            y = np.asarray(fit.idata.observed_data["y"].values, dtype=float)
            scale = 1.0 if self.is_classifier else (float(np.std(y)) or 1.0)
        else:
            scale = self.target_scale(data)
        with np.errstate(over="ignore"):
            r = rms * np.exp(-0.5 * med) / scale
        return np.where(med >= LOG_ALPHA_PRUNED, 0.0, r)

    def n_relevant(self, fit, data: Dataset | None = None) -> int:
        """Number of relevant basis functions (relevance vectors, plus the bias if it counts).

        Basis i is relevant when the prior sd its precision allows, 1 / sqrt(median_draws alpha_i), times the
        rms of phi_i over the training inputs, is at least ``RELEVANCE_THRESHOLD`` (1 %) of the target scale
        (sd of the training targets in regression; 1, the unit of the link, in classification). It is the
        typical size of the contribution basis i may add to f. The rule is the same for point estimates (a
        pruned basis has log_alpha = LOG_ALPHA_PRUNED, relevance 0; a kept one has a finite alpha) and for
        samplers (where the median over draws is used, which is robust to the funnel's long tail).
        """
        return int(np.sum(self.relevance(fit, data) >= RELEVANCE_THRESHOLD))

    def score(self, fit, data: Dataset) -> dict:
        """Metrics on the test set (training set if there is none).

        regression: ``mse`` (of the predictive mean), ``log_pred`` (mean over points of
        log mean_draws N(t | f, 1 / beta)), ``n_relevant``;
        classification: ``error_rate`` (threshold 0.5 on P(y = 1)), ``log_pred`` (mean log predictive
        probability of the true label), ``info_bits`` (mean of log2 p(y*) - log2 p_base(y*), p_base = the
        training-set class frequency), ``n_relevant``.
        """
        from scipy.special import logsumexp

        self.validate(data)
        self.check_fit(fit)
        X, y = (data.X_test, data.y_test) if data.has_test else (data.X, data.y)
        f = self.predict_draws(fit, X)
        S = f.shape[0]
        out = {}
        if self.is_classifier:
            p1 = np.clip(self._prob_draws(f).mean(0), 1e-300, 1.0)
            p0 = np.clip(1.0 - self._prob_draws(f).mean(0), 1e-300, 1.0)
            p_true = np.where(y == 1, p1, p0)
            base1 = float(np.clip(np.mean(data.y), 1e-12, 1 - 1e-12))
            p_base = np.where(y == 1, base1, 1.0 - base1)
            out["error_rate"] = float(np.mean((p1 > 0.5) != (y == 1)))
            out["log_pred"] = float(np.mean(np.log(p_true)))
            out["info_bits"] = float(np.mean(np.log2(p_true) - np.log2(p_base)))
        else:
            log_beta = self._draws(fit, "log_beta").reshape(S, 1)
            out["mse"] = float(np.mean((f.mean(0) - y) ** 2))
            ll = 0.5 * (log_beta - np.log(2 * np.pi)) - 0.5 * np.exp(log_beta) * (y[None, :] - f) ** 2
            out["log_pred"] = float(np.mean(logsumexp(ll, axis=0) - np.log(S)))
        out["n_relevant"] = self.n_relevant(fit, data)
        return out


RELEVANCE_THRESHOLD = 0.01  # see RVM.n_relevant


# the tiny problem is tests/inference/test_generic.py's, so the generic backends' compiled kernels are shared through
# the caches
FAMILY = Family(model=RVM, about="relevance vector machine, regression and classification",
                source="Tipping (2001); Tzikas MSc thesis; Tzikas, Likas, Galatsanos (2009)",
                tiny=lambda: (RVM(width=3.0, a=1.0, b=1e-2, c=1.0, d=1e-3),
                              datasets.load("sinc", n=20, n_test=40, seed=2)),
                datasets=("synthetic", "real"), benchmarks=("bench_ess", "bench_fast_vs_sklearn"), gallery="rvm")
