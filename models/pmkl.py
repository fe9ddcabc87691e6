"""Probabilistic multiple kernel learning: hierarchical multinomial probit (Damoulas thesis ch. 3-5).

    K = combination of base kernels K_1..K_S (one per source / feature space, eqs 3.1-3.5)
    y_nc = w_c^T k_n + eps_nc,  eps ~ N(0, 1),  t_n = argmax_c y_nc                     (eqs 3.8-3.10)
    w_nc ~ N(0, 1 / alpha_nc),  alpha_nc ~ Gamma(shape tau, rate nu)                    (eqs 3.13-3.14, corrected)
    convex rule: beta ~ Dirichlet(rho), rho_s fixed or ~ Gamma(shape lambda, rate mu);  binary: beta_s ~ Bernoulli(1/2);
    weighted product: beta_s ~ Gamma(pi_s, chi_s), pi_s ~ Exp(mu), chi_s ~ Exp(lambda)  (eqs 3.15-3.20)
    rbf base kernels k_s(x, x') = exp(-sum_d theta_sd (x_d - x'_d)^2), theta_sd fixed (1/D_s) or
    ~ Gamma(shape omega, rate phi)                                                          (eq. 3.21, digest §2.1)

Marginalising the auxiliary y gives P(t_n = i | W, k_n) = E_u prod_{j != i} Phi(u + (w_i - w_j)^T k_n) (eq. 3.11),
computed by Gauss-Hermite quadrature; the PyMC / NumPyro declarations use it, the Gibbs / VB / EM backends keep y.

Canonical posterior variables written by every backend: ``W`` over (``basis``, ``class``), ``log_alpha`` over
(``basis``, ``class``) and ``beta`` over ``source``; with ``kernel_params="infer"`` also ``theta`` over
``kernel_param`` (one per rbf source and column, labelled "source:column"), with ``infer_rho=True`` also ``rho``
over ``source``. Labels are the integers 0..C-1. Several sources are
described by ``sources`` (a tuple of dicts ``{"name", "columns", "kernel", "theta", "degree"}``) or, when that
is None, by ``data.meta["sources"]`` (name -> column indices) with the model's ``kernel``; without either the
whole X is one source.
"""
from __future__ import annotations

import functools
from typing import ClassVar

from dataclasses import dataclass

import numpy as np

from bayeszoo import checks, datasets
from bayeszoo.datasets import Dataset
from bayeszoo.models.base import Model, plain
from bayeszoo.models.family import Family
from bayeszoo.numerics import pmkl_kernels, probit

PRUNE_ALPHA = 1e6                        # mRVM2's pruning threshold (thesis §5.4.5); also the n_relevant rule
LOG_ALPHA_PRUNED = float(np.log(1e12))   # pruned samples of the type-II backends are stored at this value
MAX_PREDICT_DRAWS = 250                  # predictions average over at most this many evenly spaced draws
MAX_INPUT = 1e4          # largest |x| a feature-based source reads (rbf: sqrt(theta_d) |x_d|); see "Inputs" in the docs
MAX_KERNEL = 1e50        # largest |k(x, x')| of a base kernel on the inputs (poly degrees, precomputed grams)
MAX_DEGREE = 50                          # largest poly degree


@dataclass(frozen=True)
class SourceList:
    """The ``sources`` of a PMKL: a non-empty tuple of dicts, returned in JSON form (plain lists, except the gram
    matrices) so that a model rebuilt from its spec equals it. Each entry's fields are checked with the model's
    ``kernel`` (:func:`_check_source_spec`)."""

    what = "a non-empty tuple of dicts with 'columns' (and optionally name, kernel, theta, degree, gram)"

    def __call__(self, owner: str, name: str, value) -> tuple:
        if not isinstance(value, (tuple, list)) or not value or not all(isinstance(s, dict) for s in value):
            raise checks.refusal(owner, name, self.what, value)
        return tuple({k: (v if k == "gram" else plain(v)) for k, v in s.items()} for s in value)


@dataclass
class PMKL(Model):
    """Multinomial-probit multiple kernel learning (pMKL).

    Parameters
    ----------
    rule : {"convex", "mean", "binary", "product", "wproduct"}
        Kernel combination: convex sum with Dirichlet weights (3.2), fixed mean (3.1), binary selection (3.3),
        product (3.4) and weighted product (3.5; rbf base kernels only, whose powers stay p.s.d.).
    kernel : {"rbf", "poly", "linear"}
        Base kernel of each source when ``sources`` does not say: rbf exp(-sum_d theta_d (x_d - x'_d)^2) with
        theta_d = 1/D_s (the thesis's setting), poly (x.x' + 1)^degree, linear x.x'.
    sources : tuple of dict or None
        Explicit sources: ``{"name": str, "columns": [int, ...], "kernel": ..., "theta": float or list,
        "degree": int}``. Several entries may use the same columns with different kernels or parameters.
    tau, nu : Gamma(shape tau, rate nu) prior of every precision alpha_nc (3.14 read as in 3.24 / 5.8, erratum 1).
        The thesis never states its values; the default Gamma(1, 1) (w ~ Student-t(2) of scale 1) is proper,
        so every backend targets one posterior.
    rho : Dirichlet concentration of beta for the convex rule (rho 1_S; 1 is uniform, as in ch. 5).
    mu, lam : rates of the exponential priors on pi and chi (weighted product, 3.18-3.19); with ``infer_rho``
        the rate and shape of rho_s ~ Gamma(shape lam, rate mu) (3.16 and A.2; B.9 swaps them, erratum 2).
    kernel_params : {"fixed", "infer"}
        "fixed" keeps every rbf theta_sd at its given value (default 1/D_s, the thesis's experiments); "infer"
        gives each theta_sd of the rbf sources the Gamma(omega, phi) prior of eq. 3.21. Precomputed sources have
        no parameters and cannot be combined with "infer"; poly and linear sources stay fixed.
    omega, phi : shape and rate of the Gamma prior on theta_sd (3.21). The thesis gives no values; Gamma(1, 1)
        is the digest's uninformative default (mode 0, so irrelevant inputs can switch off, Fig. 3.8).
    infer_rho : convex rule only: give rho_s the Gamma(lam, mu) hyperprior (3.16) instead of fixing it at ``rho``
        (which is then only the samplers' starting value).
    """

    rule: str = "convex"
    kernel: str = "rbf"
    sources: tuple | None = None
    degree: int = 2
    tau: float = 1.0
    nu: float = 1.0
    rho: float = 1.0
    mu: float = 1.0
    lam: float = 1.0
    kernel_params: str = "fixed"
    omega: float = 1.0
    phi: float = 1.0
    infer_rho: bool = False

    family = "pmkl"
    example_data = "mkl_sources"
    compare_vars = ("W", "beta")
    reference_advice: ClassVar[str] = (
        "pMKL: under the default alpha ~ Gamma(1, 1) the weights are Student-t(2) and NUTS diverges; compare under "
        "PMKL(tau=5, nu=5) (the catalogue's pmkl-sources), or use the gibbs backend as the reference with long "
        "runs and thin=5 (docs/families/pmkl.md).")

    _parameter_constraints: ClassVar[dict] = {
        "rule": checks.OneOf(pmkl_kernels.RULES),
        "kernel": checks.OneOf(pmkl_kernels.KERNELS[:3]),   # precomputed: per source
        "sources": [None, SourceList()], "degree": checks.Interval(int, 1, MAX_DEGREE, "both"),
        **{name: checks.POSITIVE for name in ("tau", "nu", "rho", "mu", "lam", "omega", "phi")},
        "kernel_params": checks.OneOf(("fixed", "infer")), "infer_rho": checks.Flag()}

    def __post_init__(self):
        super().__post_init__()
        if self.infer_rho and self.rule != "convex":
            raise ValueError(f"PMKL infer_rho applies to the convex rule (rho is the Dirichlet parameter of beta); "
                             f"got rule={self.rule!r}")
        for i, s in enumerate(self.sources or ()):
            _check_source_spec(i, s, self.kernel)   # a source's kernel defaults to the model's

    # ---- sources and kernels ---------------------------------------------------------------------------
    def source_list(self, data: Dataset):
        """The base kernels as :class:`~bayeszoo.numerics.pmkl_kernels.Source` objects."""
        return self._sources(data.d, data.meta.get("sources"))

    def _sources(self, d: int, meta_sources=None):
        if self.sources is not None:
            specs = [dict(s) for s in self.sources]
        elif meta_sources:
            if not isinstance(meta_sources, dict) or not all(isinstance(v, (list, tuple, np.ndarray))
                                                             for v in meta_sources.values()):
                raise ValueError(f"PMKL: data.meta['sources'] must map each source name to a list of column "
                                 f"indices, got {meta_sources!r}")
            specs = [{"name": str(k), "columns": list(v)} for k, v in meta_sources.items()]
        else:
            specs = [{"name": "all", "columns": list(range(d))}]
        out = []
        for i, s in enumerate(specs):
            cols = np.asarray(s["columns"])
            if cols.ndim != 1 or cols.size == 0 or not np.issubdtype(cols.dtype, np.integer):
                raise ValueError(f"PMKL source {s.get('name', i)!r}: columns must be a non-empty list of integers")
            if cols.min() < 0 or cols.max() >= d:
                raise ValueError(f"PMKL source {s.get('name', i)!r}: columns out of range for X with {d} columns")
            theta = s.get("theta")
            if theta is not None:
                th = np.asarray(theta, dtype=float)
                if th.ndim > 1 or (th.ndim == 1 and th.size != cols.size) or np.any(~np.isfinite(th)) \
                        or np.any(th <= 0):
                    raise ValueError(f"PMKL source {s.get('name', i)!r}: theta must be positive (one value or "
                                     f"one per column)")
                theta = tuple(np.atleast_1d(th).tolist())
            out.append(pmkl_kernels.Source(name=str(s.get("name", f"s{i}")), columns=tuple(int(c) for c in cols),
                                 kernel=s.get("kernel", self.kernel), theta=theta,
                                 degree=int(s.get("degree", self.degree)), matrix=s.get("gram")))
        names = [s.name for s in out]
        if len(set(names)) != len(names):
            raise ValueError(f"PMKL source names must be unique, got {names}")
        return out

    def _fit_sources(self, fit):
        names = [str(v) for v in fit.idata.posterior["beta"].coords["source"].values]
        X = np.asarray(fit.idata.constant_data["X"].values, dtype=float)
        mask = np.asarray(fit.idata.constant_data["source_mask"].values, dtype=bool)
        meta = {n: np.nonzero(m)[0].tolist() for n, m in zip(names, mask)}
        return self._sources(X.shape[1], meta), X

    def train_kernels(self, data: Dataset, theta=None) -> np.ndarray:
        """Base kernels at the training inputs (S, N, N); ``theta`` (flat) overrides the rbf parameters. A ValueError
        names a source whose kernel overflows or reaches beyond ``MAX_KERNEL`` (a high poly degree, a huge gram)."""
        sources = self.source_list(data)
        grams = pmkl_kernels.base_grams(sources, data.X, data.X, theta)
        return check_kernel_size(sources, grams, "the training inputs")

    @property
    def infer_theta(self) -> bool:
        return self.kernel_params == "infer"

    def composite(self, Ks, beta) -> np.ndarray:
        return pmkl_kernels.combine(Ks, beta, self.rule)

    def n_classes(self, data: Dataset) -> int:
        return int(np.max(data.y)) + 1

    def default_beta(self, S: int) -> np.ndarray:
        """beta of the rules without free weights: 1/S (mean), 1 (product); prior mean otherwise."""
        if self.rule in ("product", "wproduct"):
            return np.ones(S)
        if self.rule == "binary":
            return np.full(S, 0.5)
        return np.full(S, 1.0 / S)

    # ---- data ----------------------------------------------------------------------------------------
    def validate(self, data: Dataset) -> None:
        super().validate(data)
        if data.task not in (None, "classification", "multiclass"):
            raise ValueError(f"dataset {data.name!r} is a {data.task} problem; PMKL needs class labels 0..C-1")
        y = data.y
        if np.any(y != np.round(y)) or np.any(y < 0):
            raise ValueError(f"PMKL needs integer class labels 0..C-1 in y; got values {np.unique(y)[:10].tolist()}")
        if y.max() >= data.n:             # more classes than objects: some class has no members
            raise ValueError(f"PMKL labels must be 0..C-1 with every class present in the training set; the "
                             f"{data.n} training objects cannot cover the {y.max() + 1:.0f} classes up to label "
                             f"{y.max():.0f}")
        C = int(y.max()) + 1
        counts = np.bincount(y.astype(int), minlength=C)
        if C < 2:
            raise ValueError("PMKL needs at least two classes in the training labels")
        if np.any(counts == 0):
            missing = np.nonzero(counts == 0)[0].tolist()
            raise ValueError(f"PMKL labels must be 0..C-1 with every class present in the training set; "
                             f"class(es) {missing[:10]} have no members")
        yt = data.y_test
        if yt.size and (np.any(yt != np.round(yt)) or np.any(yt < 0) or np.any(yt >= C)):
            raise ValueError(f"PMKL test labels must be integers in 0..{C - 1} (the training classes); "
                             f"got values {np.unique(yt)[:10].tolist()}")
        sources = self.source_list(data)
        for what, X in (("X", data.X), ("X_test", data.X_test)):
            check_source_inputs(sources, X, what)
        if self.infer_theta:
            pre = [s.name for s in sources if s.kernel == "precomputed"]
            if pre:
                raise ValueError(f"PMKL kernel_params='infer' needs sources given as feature matrices; the "
                                 f"precomputed gram source(s) {pre} have no kernel parameters to infer")
            if not any(s.kernel == "rbf" for s in sources):
                raise ValueError("PMKL kernel_params='infer' needs at least one rbf source (poly and linear "
                                 "kernels have no theta)")
        if self.rule == "wproduct" and any(s.kernel != "rbf" for s in sources):
            raise ValueError("PMKL rule 'wproduct' needs rbf base kernels (element-wise powers of other kernels "
                             "are not positive semi-definite, digest §2.2)")

    def var_dims(self, data: Dataset) -> dict[str, tuple[str, ...]]:
        out = {"W": ("basis", "class"), "log_alpha": ("basis", "class"), "beta": ("source",)}
        if self.infer_theta:
            out["theta"] = ("kernel_param",)
        if self.infer_rho:
            out["rho"] = ("source",)
        return out

    def coords(self, data: Dataset) -> dict[str, np.ndarray]:
        sources = self.source_list(data)
        out = {"basis": np.arange(data.n), "class": np.arange(self.n_classes(data)),
               "source": np.array([s.name for s in sources]), "obs": np.arange(data.n)}
        if self.infer_theta:
            out["kernel_param"] = np.array(pmkl_kernels.theta_labels(sources))
        return out

    def _sq_dists(self, data: Dataset):
        """Per-column squared differences (D_s, N, N) of every rbf source, for the declared kernels."""
        sources = self.source_list(data)
        return {i: np.stack([(data.X[:, c][:, None] - data.X[:, c][None, :]) ** 2 for c in sources[i].columns])
                for i, _ in pmkl_kernels.theta_layout(sources)}

    def constant_data(self, data: Dataset) -> dict:
        sources = self.source_list(data)
        mask = np.zeros((len(sources), data.d), dtype=np.int8)
        for i, s in enumerate(sources):
            mask[i, list(s.columns)] = 1
        return {"X": data.X, "source_mask": mask}

    # ---- declarations --------------------------------------------------------------------------------
    def declaration_problem(self, library: str) -> str | None:
        if self.rule == "binary":
            return ("PMKL(rule='binary') has discrete kernel weights, which the gradient-based backends cannot "
                    "sample; use gibbs or vb")
        return super().declaration_problem(library)

    def declaration_memory(self, data: Dataset) -> dict[str, int]:
        S = len(self.source_list(data))
        return {f"{S} base kernels ({data.n:,} x {data.n:,} each)": S * 8 * data.n ** 2}

    def pymc_model(self, data: Dataset):
        """pMKL in PyMC with y marginalised (reduced model, Fig. 3.2): free ``log_alpha`` and ``z`` over
        (basis, class), ``W = z exp(-log_alpha / 2)``; ``beta`` Dirichlet (convex) or Gamma with exponential
        hyperpriors on its shape / rate (weighted product); the likelihood eq. 3.11 by Gauss-Hermite quadrature
        as a ``Potential``."""
        import pymc as pm
        import pytensor.tensor as pt

        from bayeszoo.numerics.special import pm_log_gamma, pt_log_ndtr, pt_logsumexp

        self.validate(data)
        self.require_declarable("pymc")
        Ks = self.train_kernels(data)
        S = Ks.shape[0]
        onehot = np.eye(self.n_classes(data))[data.y.astype(int)]
        u, logw = probit.gh_rule()
        with pm.Model(coords=self.coords(data)) as model:
            log_alpha = pm_log_gamma("log_alpha", self.tau, self.nu, dims=("basis", "class"))
            z = pm.Normal("z", 0.0, 1.0, dims=("basis", "class"))
            W = pm.Deterministic("W", z * pt.exp(-0.5 * log_alpha), dims=("basis", "class"))
            beta = self._pm_beta(S)
            if self.infer_theta:
                # theta_sd ~ Gamma(omega, phi) (3.21); PyMC samples it on the log scale with the Jacobian
                theta = pm.Gamma("theta", alpha=float(self.omega), beta=float(self.phi), dims="kernel_param")
                sq = self._sq_dists(data)
                slices = dict(pmkl_kernels.theta_layout(self.source_list(data)))
                Ks = pt.stack([pt.exp(-pt.tensordot(theta[slices[i]], sq[i], axes=[[0], [0]])) if i in sq
                               else pt.as_tensor_variable(Ks[i]) for i in range(S)])
            if self.rule in ("mean", "convex"):
                K = pt.tensordot(beta, Ks, axes=[[0], [0]])
            elif self.rule == "product":
                K = pt.prod(Ks, axis=0) if self.infer_theta else pt.as_tensor_variable(np.prod(Ks, 0))
            elif self.infer_theta:
                K = pt.exp(pt.tensordot(beta, pt.log(pt.clip(Ks, 1e-300, np.inf)), axes=[[0], [0]]))
            else:
                K = pt.exp(pt.tensordot(beta, np.log(np.clip(Ks, 1e-300, None)), axes=[[0], [0]]))
            M = pt.dot(K, W)
            m_t = pt.sum(M * onehot, axis=1, keepdims=True)
            arg = u[None, :, None] + (m_t - M)[:, None, :]                         # (N, K, C)
            lp = pt.sum(pt_log_ndtr(arg) * (1.0 - onehot)[:, None, :], axis=2) + logw[None, :]
            pm.Potential("loglik", pt.sum(pt_logsumexp(lp, axis=1)))
        return model

    def _pm_beta(self, S):
        import pymc as pm

        if self.rule == "convex":
            if self.infer_rho:
                # rho_s ~ Gamma(shape lam, rate mu) (3.16, erratum 2)
                rho = pm.Gamma("rho", alpha=float(self.lam), beta=float(self.mu), dims="source")
                return pm.Dirichlet("beta", a=rho, dims="source")
            return pm.Dirichlet("beta", a=np.full(S, float(self.rho)), dims="source")
        if self.rule == "wproduct":
            pi = pm.Exponential("pi", lam=float(self.mu), dims="source")
            chi = pm.Exponential("chi", lam=float(self.lam), dims="source")
            return pm.Gamma("beta", alpha=pi, beta=chi, dims="source")
        return pm.Deterministic("beta", pm.math.constant(self.default_beta(S)), dims="source")

    def numpyro_model(self, data: Dataset):
        """The same joint density as :meth:`pymc_model`, as a NumPyro model function of no arguments (its data
        bound by ``functools.partial``: :class:`~bayeszoo.models.base.Model`)."""
        import jax.numpy as jnp
        import numpyro
        import numpyro.distributions as dist
        from jax.scipy.special import log_ndtr, logsumexp

        from bayeszoo.numerics.special import log_gamma_numpyro

        self.validate(data)
        self.require_declarable("numpyro")
        Ks_np = self.train_kernels(data)
        S, N = Ks_np.shape[:2]
        C = self.n_classes(data)
        onehot_np = np.eye(C)[data.y.astype(int)]
        u_np, logw_np = probit.gh_rule()
        rule, tau, nu = self.rule, float(self.tau), float(self.nu)
        rho, mu, lam = float(self.rho), float(self.mu), float(self.lam)
        beta_fixed = self.default_beta(S)
        LogGamma = log_gamma_numpyro()
        infer_theta, infer_rho = self.infer_theta, self.infer_rho
        omega, phi = float(self.omega), float(self.phi)
        sq_np = self._sq_dists(data) if infer_theta else {}
        slices = dict(pmkl_kernels.theta_layout(self.source_list(data)))
        n_theta = sum(len(v) for v in sq_np.values())

        def model(Ks, onehot, sq):
            Ks, onehot = jnp.asarray(Ks), jnp.asarray(onehot)
            u, logw = jnp.asarray(u_np), jnp.asarray(logw_np)
            log_alpha = numpyro.sample("log_alpha", LogGamma(tau, nu).expand([N, C]).to_event(2))
            z = numpyro.sample("z", dist.Normal(0.0, 1.0).expand([N, C]).to_event(2))
            W = numpyro.deterministic("W", z * jnp.exp(-0.5 * log_alpha))
            if infer_theta:
                # theta_sd ~ Gamma(omega, phi) (3.21); NUTS moves on log theta with the Jacobian (biject_to)
                theta = numpyro.sample("theta", dist.Gamma(omega, phi).expand([n_theta]).to_event(1))
                Ks = jnp.stack([jnp.exp(-jnp.tensordot(theta[slices[i]], jnp.asarray(sq[i]), axes=1))
                                if i in sq else Ks[i] for i in range(S)])
            if rule == "convex" and infer_rho:
                conc = numpyro.sample("rho", dist.Gamma(lam, mu).expand([S]).to_event(1))   # 3.16, erratum 2
                beta = numpyro.sample("beta", dist.Dirichlet(conc))
            elif rule == "convex":
                beta = numpyro.sample("beta", dist.Dirichlet(jnp.full(S, rho)))
            elif rule == "wproduct":
                pi = numpyro.sample("pi", dist.Exponential(mu).expand([S]).to_event(1))
                chi = numpyro.sample("chi", dist.Exponential(lam).expand([S]).to_event(1))
                beta = numpyro.sample("beta", dist.Gamma(pi, chi).to_event(1))
            else:
                beta = numpyro.deterministic("beta", jnp.asarray(beta_fixed))
            if rule in ("mean", "convex"):
                K = jnp.tensordot(beta, Ks, axes=1)
            elif rule == "product":
                K = jnp.prod(Ks, 0)
            else:
                K = jnp.exp(jnp.tensordot(beta, jnp.log(jnp.clip(Ks, 1e-300, None)), axes=1))
            M = K @ W
            m_t = jnp.sum(M * onehot, axis=1, keepdims=True)
            arg = u[None, :, None] + (m_t - M)[:, None, :]
            lp = jnp.sum(log_ndtr(arg) * (1.0 - onehot)[:, None, :], axis=2) + logw[None, :]
            numpyro.factor("loglik", jnp.sum(logsumexp(lp, axis=1)))

        return functools.partial(model, Ks=Ks_np, onehot=onehot_np, sq=sq_np)

    # ---- densities used by the tests and the samplers ------------------------------------------------
    def log_likelihood_at(self, W, K, y) -> float:
        """sum_n log P(t_n | W, k_n) (eq. 3.11 by quadrature) for one W (N, C) and composite K (N, N)."""
        lp = probit.log_class_probs(K @ W)
        return float(np.sum(lp[np.arange(len(y)), np.asarray(y, int)]))

    def log_prior_beta(self, beta, pi=None, chi=None, rho=None) -> float:
        """log p(beta) under the rule's prior (normalised); ``rho`` (S,) overrides the fixed Dirichlet parameter."""
        from scipy import stats

        beta = np.asarray(beta, float)
        S = beta.size
        if self.rule == "convex":
            if np.any(beta <= 0):
                return -np.inf
            conc = np.full(S, self.rho) if rho is None else np.asarray(rho, float)
            return float(stats.dirichlet(conc).logpdf(beta / beta.sum()))
        if self.rule == "binary":
            return float(S * np.log(0.5))
        if self.rule == "wproduct":
            return float(np.sum(stats.gamma(pi, scale=1.0 / chi).logpdf(beta)))
        return 0.0

    def log_prior_theta(self, theta) -> float:
        """log p(Theta) = sum_sd log Gamma(theta_sd | omega, phi) (3.21), normalised."""
        from scipy import stats

        return float(np.sum(stats.gamma(self.omega, scale=1.0 / self.phi).logpdf(np.asarray(theta, float))))

    def log_prior_rho(self, rho) -> float:
        """log p(rho) = sum_s log Gamma(rho_s | shape lam, rate mu) (3.16), normalised."""
        from scipy import stats

        return float(np.sum(stats.gamma(self.lam, scale=1.0 / self.mu).logpdf(np.asarray(rho, float))))

    # ---- prediction ----------------------------------------------------------------------------------
    @staticmethod
    def _draws(fit, name, max_draws=MAX_PREDICT_DRAWS):
        arr = np.asarray(fit.idata.posterior[name].values, dtype=float)
        arr = arr.reshape(arr.shape[0] * arr.shape[1], *arr.shape[2:])
        if arr.shape[0] > max_draws:
            arr = arr[np.linspace(0, arr.shape[0] - 1, max_draws).astype(int)]
        return arr

    def check_inputs(self, fit, X_new) -> np.ndarray:
        """``X_new`` as a finite matrix with the training inputs' columns, on the scale the sources accept
        (``MAX_INPUT``) and, for precomputed sources, holding object indices into their gram matrices."""
        X_new = super().check_inputs(fit, X_new)
        check_source_inputs(self._fit_sources(fit)[0], X_new, "X_new")
        return X_new

    def latent_draws(self, fit, X_new, max_draws: int = MAX_PREDICT_DRAWS) -> np.ndarray:
        """m = W^T k* for every (thinned) draw, with k* built from that draw's beta and, when the kernel
        parameters are inferred, that draw's theta (3.26; digest §3.3): (L, n_new, C)."""
        checks.positive("PMKL", "max_draws", max_draws, integer=True)
        return self._latent_blocks(fit, X_new, max_draws)[1](0, max_draws)

    def _latent_blocks(self, fit, X_new, max_draws: int):
        """(the number L of draws used, ``means(a, b)``: the latent means (b - a, n_new, C) of draws a to b),
        so that a caller can go through the draws in blocks; the base kernels at fixed parameters are built once."""
        self.check_fit(fit)
        X_new = self.check_inputs(fit, X_new)
        sources, X = self._fit_sources(fit)
        W, beta = self._draws(fit, "W", max_draws), self._draws(fit, "beta", max_draws)
        if "theta" not in fit.idata.posterior:
            Ks = check_kernel_size(sources, pmkl_kernels.base_grams(sources, X, X_new), "X_new")
            return W.shape[0], lambda a, b: pmkl_kernels.latent_means(Ks, W[a:b], beta[a:b], self.rule)
        theta = self._draws(fit, "theta", max_draws)

        def means(a, b):
            out = np.empty((len(W[a:b]), len(X_new), W.shape[2]))
            for i, l in enumerate(range(a, min(b, W.shape[0]))):
                Ks = check_kernel_size(sources, pmkl_kernels.base_grams(sources, X, X_new, theta[l]), "X_new")
                out[i] = pmkl_kernels.latent_means(Ks, W[l:l + 1], beta[l:l + 1], self.rule)[0]
            return out

        return W.shape[0], means

    def log_predict_all(self, fit, X_new, max_draws: int = MAX_PREDICT_DRAWS) -> np.ndarray:
        """log P(t* = i | x*) for every class (n_new, C): eq. 3.26, the quadrature of eq. 3.11 averaged over
        draws (in log space)."""
        from scipy.special import logsumexp

        lp = probit.log_class_probs(self.latent_draws(fit, X_new, max_draws))
        return logsumexp(lp, axis=0) - np.log(lp.shape[0])

    def log_likelihood(self, fit, data: Dataset) -> np.ndarray:
        """log P(t_n | W, beta, theta) of every training object at every draw: the quadrature of eq. 3.11 at the
        draw's latent means. The draws go through in blocks whose latent means and class log probabilities stay
        under ``probit.CHUNK_BYTES``, so the step holds the result (draws x objects) and a bounded working set."""
        y = data.y.astype(int)
        block = self._log_likelihood_block(data)
        L, means = self._latent_blocks(fit, data.X, fit.n_chains * fit.n_draws)
        out = np.empty((L, data.n))
        for a in range(0, L, block):
            out[a:a + block] = probit.log_class_prob(means(a, a + block), y[None, :])
        return out

    def _log_likelihood_block(self, data: Dataset) -> int:
        """Draws per block of :meth:`log_likelihood`: its latent means (draws x objects x classes) under
        ``probit.CHUNK_BYTES``."""
        return max(1, probit.CHUNK_BYTES // (8 * data.n * self.n_classes(data)))

    def log_likelihood_memory(self, data: Dataset, n_draws: int) -> dict[str, int]:
        """The result (draws x objects) and one block's working set: its latent means, the per-draw arrays of
        ``pmkl_kernels.latent_means`` and the quadrature's temporaries, each under ``probit.CHUNK_BYTES``. The base
        kernels it rebuilds take the room of the backend's own N x N matrices, which its declaration counts and
        which are past their peak by then."""
        N, C = data.n, self.n_classes(data)
        block = min(int(n_draws), self._log_likelihood_block(data))
        per_draw = 3 * N * C if self.rule in ("mean", "convex", "binary") else N * N     # latent_means' arrays
        products = min(block, max(1, probit.CHUNK_BYTES // (8 * per_draw))) * per_draw
        nodes = probit.GH_NODES * C       # the true class's probability only (probit.log_class_prob)
        quadrature = min(block * N, probit.chunk_rows(nodes)) * probit.QUADRATURE_COPIES * nodes
        return {f"pointwise log likelihood ({int(n_draws):,} draws x {N:,} objects)": 8 * int(n_draws) * N,
                f"its working set, one block of {block:,} draws": 8 * (block * N * C + products + quadrature)}

    def predict(self, fit, X_new, max_draws: int = MAX_PREDICT_DRAWS) -> np.ndarray:
        """Predictive class probabilities (n_new, C) (eq. 3.26), over at most ``max_draws`` evenly spaced draws."""
        return np.exp(self.log_predict_all(fit, X_new, max_draws))

    # ---- scoring -------------------------------------------------------------------------------------
    def n_relevant(self, fit) -> int:
        """Relevance vectors: training objects n with median_draws alpha_nc < 1e6 for some class c (the mRVM2
        pruning rule of §5.4.5, applied to every backend)."""
        self.check_fit(fit)
        la = np.median(self._draws(fit, "log_alpha", max_draws=10**9), axis=0)
        return int(np.sum(np.min(la, axis=1) < np.log(PRUNE_ALPHA)))

    def score(self, fit, data: Dataset) -> dict:
        """Metrics on the test set (training set if there is none).

        ``error_rate`` (argmax of the predictive probabilities), ``log_pred`` (mean log predictive probability
        of the true class), ``pred_lik`` (the thesis's predictive likelihood, sum_n log P(true class), §5.4),
        ``info_bits`` (mean log2 p(true) - log2 p_base(true), p_base = training class frequencies),
        ``n_relevant`` and ``beta_<source>`` (posterior mean of each combination weight).
        """
        self.check_fit(fit)
        self.validate(data)
        X, y = (data.X_test, data.y_test) if data.has_test else (data.X, data.y)
        y = y.astype(int)
        logp = self.log_predict_all(fit, X)
        C = logp.shape[1]
        if self.n_classes(data) != C:
            raise ValueError(f"this fit has {C} classes but the data's training labels have {self.n_classes(data)}")
        lp_true = logp[np.arange(len(y)), y]
        base = np.bincount(data.y.astype(int), minlength=C) / data.n
        out = {"error_rate": float(np.mean(np.argmax(logp, 1) != y)),
               "log_pred": float(np.mean(lp_true)),
               "pred_lik": float(np.sum(lp_true)),
               "info_bits": float(np.mean(lp_true - np.log(base[y])) / np.log(2.0)),
               "n_relevant": self.n_relevant(fit)}
        beta = fit.idata.posterior["beta"]
        for name, value in zip(beta.coords["source"].values, beta.mean(("chain", "draw")).values):
            out[f"beta_{name}"] = float(value)
        return out


# ---------------------------------------------------------------------------------------------- helpers
def multisource_dataset(sources: dict, y, sources_test: dict | None = None, y_test=None, name: str = "mkl",
                        meta: dict | None = None) -> Dataset:
    """A Dataset from several feature matrices (one per source): X is their concatenation and
    ``meta["sources"]`` maps each source name to its columns. Sources must have the same number of rows."""
    if not isinstance(sources, dict) or not sources:
        raise ValueError("sources must be a non-empty dict name -> feature matrix")
    mats = {k: np.atleast_2d(np.asarray(v, dtype=float)) for k, v in sources.items()}
    rows = {k: m.shape[0] for k, m in mats.items()}
    if len(set(rows.values())) != 1:
        raise ValueError(f"sources have different numbers of rows: {rows}")
    cols, start = {}, 0
    for k, m in mats.items():
        cols[k] = list(range(start, start + m.shape[1]))
        start += m.shape[1]
    X = np.hstack(list(mats.values()))
    X_test = None
    if sources_test is not None:
        if set(sources_test) != set(sources):
            raise ValueError(f"test sources {sorted(sources_test)} differ from training sources {sorted(sources)}")
        tmats = {k: np.atleast_2d(np.asarray(sources_test[k], dtype=float)) for k in mats}
        trows = {k: m.shape[0] for k, m in tmats.items()}
        if len(set(trows.values())) != 1:
            raise ValueError(f"test sources have different numbers of rows: {trows}")
        for k in mats:
            if tmats[k].shape[1] != mats[k].shape[1]:
                raise ValueError(f"test source {k!r} has {tmats[k].shape[1]} columns, training has "
                                 f"{mats[k].shape[1]}")
        X_test = np.hstack([tmats[k] for k in mats])
    meta = {"task": "multiclass", **dict(meta or {}), "sources": cols}
    return Dataset(X=X, y=y, X_test=X_test, y_test=y_test, name=name, meta=meta)


def check_kernel_matrix(K, name: str = "kernel", tol: float = 1e-8) -> np.ndarray:
    """``K`` as float if it is a finite, symmetric positive semi-definite matrix; a ValueError otherwise."""
    try:
        K = np.asarray(K, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a square matrix of numbers, got {type(K).__name__}") from None
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {K.shape}")
    if not np.all(np.isfinite(K)):
        raise ValueError(f"{name} contains NaN or inf")
    if K.size and np.max(np.abs(K)) > MAX_KERNEL:
        raise ValueError(f"{name} has entries up to {np.max(np.abs(K)):.3g}, beyond {MAX_KERNEL:.0e}; rescale it "
                         f"(a kernel of about unit scale, e.g. divided by its largest diagonal entry)")
    scale = max(1.0, float(np.max(np.abs(K))))
    if np.max(np.abs(K - K.T)) > tol * scale:
        raise ValueError(f"{name} is not symmetric (max |K - K^T| = {np.max(np.abs(K - K.T)):.3g})")
    lam = np.linalg.eigvalsh(0.5 * (K + K.T))[0]
    if lam < -tol * scale * K.shape[0]:
        raise ValueError(f"{name} is not positive semi-definite (smallest eigenvalue {lam:.3g})")
    return K


def _check_source_spec(i: int, s: dict, default_kernel: str) -> None:
    """One entry of ``PMKL(sources=...)`` in JSON form: a ValueError naming the source and the field otherwise."""
    owner = f"PMKL source {s.get('name', i)!r}"
    unknown = set(s) - {"name", "columns", "kernel", "theta", "degree", "gram"}
    if unknown or "columns" not in s:
        raise ValueError(f"{owner}: needs 'columns' and takes only name, columns, kernel, theta, degree, gram")
    if "name" in s and not isinstance(s["name"], str):
        raise ValueError(f"{owner}: name must be a string, got {s['name']!r}")
    cols = s["columns"]
    if not isinstance(cols, list) or not cols:
        raise ValueError(f"{owner}: columns must be a non-empty list of column indices, got {cols!r}")
    for c in cols:
        checks.non_negative(owner, "columns", c, integer=True)
    kernel = s.get("kernel", default_kernel)
    if not isinstance(kernel, str) or kernel not in pmkl_kernels.KERNELS:
        raise ValueError(f"{owner}: kernel must be one of {pmkl_kernels.KERNELS}, got {kernel!r}")
    if (kernel == "precomputed") != ("gram" in s):
        raise ValueError(f"{owner}: a 'gram' matrix goes with kernel 'precomputed' (and that kernel needs one)")
    theta = s.get("theta")
    if theta is not None:
        if isinstance(theta, list) and len(theta) != len(cols):
            raise ValueError(f"{owner}: theta must be one positive number or one per column ({len(cols)}), "
                             f"got {theta!r}")
        for value in (theta if isinstance(theta, list) else [theta]):
            checks.positive(owner, "theta", value)
    if "degree" in s:
        checks.number(owner, "degree", s["degree"], low=1, high=MAX_DEGREE, low_inclusive=True, integer=True)
    if "gram" in s:
        s["gram"] = check_kernel_matrix(s["gram"], f"{owner}: gram")
        if len(cols) != 1:
            raise ValueError(f"{owner}: a precomputed kernel reads one column (the object index into its gram "
                             f"matrix)")


def check_source_inputs(sources, X: np.ndarray, what: str) -> None:
    """The inputs ``X`` (rows of objects) as the sources read them: precomputed sources need object indices into
    their gram matrices; feature-based ones inputs of about unit scale: |x| <= MAX_INPUT (rbf: sqrt(theta_d) |x_d|,
    the scale its distances are taken on). Beyond that the rbf kernel's distances lose their accuracy and poly /
    linear kernels overflow; standardised inputs (the loaders' ``standardize=True``) are well inside."""
    if X.shape[0] == 0:
        return
    for s in sources:
        cols = list(s.columns)
        if s.kernel == "precomputed":
            ids = X[:, cols[0]]
            if np.any(ids != np.round(ids)) or ids.min() < 0 or ids.max() >= len(s.matrix):
                raise ValueError(f"PMKL source {s.name!r}: column {cols[0]} of {what} must hold object indices "
                                 f"0..{len(s.matrix) - 1} into its gram matrix")
            continue
        scaled = np.abs(X[:, cols])
        if s.kernel == "rbf":
            scaled = scaled * np.sqrt(s.theta_vector())
        largest = float(np.max(scaled))
        if largest > MAX_INPUT:
            col = cols[int(np.argmax(np.max(scaled, axis=0)))]
            scale = "sqrt(theta) |x|" if s.kernel == "rbf" else "|x|"
            raise ValueError(f"PMKL source {s.name!r}: {what} reaches {scale} = {largest:.3g} (column {col}), beyond "
                             f"{MAX_INPUT:.0e}: its {s.kernel} kernel is meant for inputs of about unit scale; "
                             f"standardise the columns (e.g. the loaders' standardize=True)")


def check_kernel_size(sources, Ks: np.ndarray, what: str) -> np.ndarray:
    """``Ks`` (S, n1, n2) if every base kernel is finite and at most MAX_KERNEL in absolute value; else a ValueError
    naming the source (a poly kernel of high degree on large inputs)."""
    for s, K in zip(sources, Ks):
        largest = float(np.max(np.abs(K))) if K.size else 0.0
        if not largest <= MAX_KERNEL:
            raise ValueError(f"PMKL source {s.name!r}: its {s.kernel} kernel on {what} reaches {largest:.3g}, beyond "
                             f"{MAX_KERNEL:.0e}; standardise the inputs or lower the degree")
    return Ks


FAMILY = Family(model=PMKL, about="probabilistic multiple kernel learning, multiclass",
                source="Damoulas PhD thesis ch. 3-5",
                tiny=lambda: (PMKL(rule="mean"), datasets.load("mkl_sources", n=12, n_test=12, seed=0)),
                datasets=("pmkl_data",), benchmarks=("bench_pmkl",), gallery="pmkl")
