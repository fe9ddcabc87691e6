"""Exact targets: posteriors whose moments are known in closed form, so that a sampler's error needs no reference run.

Five targets (``docs/suites/exact.md`` gives each one's density, its exact moments and their derivation):

* ``funnel``: Neal's funnel in 10 dimensions, v ~ N(0, 3^2), x_i | v ~ N(0, e^v), i = 1..9;
* ``ill_conditioned_gaussian``: a 100-D zero-mean Gaussian whose covariance has eigenvalues log-spaced from 1e-4 to
  1 (condition number 1e4), turned by a fixed random rotation;
* ``correlated_gaussian``: a 10-D zero-mean Gaussian with unit variances and every correlation 0.99;
* ``banana``: Haario et al.'s (1999) strongly twisted Gaussian in 2-D, b = 0.1;
* ``mixture``: a well-separated two-component normal mixture in 1-D, 0.3 N(-4, 1) + 0.7 N(4, 1).

``load(name, library)`` gives the target as a bayeszoo model of one's own (PyMC or NumPyro, the same log density:
``tests/catalogue/test_exact.py`` checks both and their gradients at random points). bayeszoo fits posteriors given
observations, so each target is written as one: improper flat priors on the variables that the target does not
give a proper one (``pm.Flat``, NumPyro's ``ImproperUniform``) and observations of zero whose likelihood is the
target's density, e.g. N(0 | x, s) = N(x | 0, s). The posterior is then the target exactly, and every variable is
unconstrained, so both libraries sample the same space.

``reference(name)`` is a :class:`~bayeszoo.catalogue.reference.Reference` of the exact moments: the mean, sd and
5 / 50 / 95 % quantiles of every component, with Monte-Carlo errors 0 (the quantiles are found by root-finding
on the exact marginal CDF, by quadrature where it has no closed form), and :data:`REFERENCE_DRAWS` exact draws for
the plots, drawn with a fixed seed. Its provenance says ``source`` "exact".
"""
from __future__ import annotations

import copy
import functools
import math

import arviz as az
import numpy as np
import xarray as xr
from scipy import integrate, optimize
from scipy.special import ndtr
from scipy.stats import norm

from bayeszoo import models
from bayeszoo.checks import did_you_mean
from bayeszoo.catalogue.reference import MAX_DRAWS, QUANTILES, STATS, Reference, _versions
from bayeszoo.results import Fit

LIBRARIES = ("pymc", "numpyro")
REFERENCE_DRAWS = MAX_DRAWS      # exact draws kept for the plots
REFERENCE_CHAINS = 4             # ... as 4 "chains" of independent draws, so that per-chain plots have chains
DRAW_SEED = 20260101             # the seed of those draws
ROTATION_SEED = 1618             # the seed of the ill-conditioned Gaussian's rotation
OBSERVED = "y"                   # every target's observed variable (zeros: see the module docstring)


# ------------------------------------------------------------------------------------------------ targets
class Target:
    """One exact target: its density in PyMC and NumPyro, exact draws and exact marginal moments.

    Subclasses set ``kind``, ``description`` and ``shapes`` (variable -> shape) and implement the two
    declarations, :meth:`draw` and :meth:`_marginals` (per variable, the mean and sd of every component and the
    marginal CDF's quantile function)."""

    kind: str = ""
    description: str = ""
    notes: str = ""          # what a user of the reference should know (the suite's page says more)
    shapes: dict[str, tuple[int, ...]] = {}

    @property
    def n_observed(self) -> int:
        """How many zeros the declarations observe (one per component of ``x``)."""
        return math.prod(self.shapes["x"])

    @property
    def dimension(self) -> int:
        return int(sum(math.prod(s) for s in self.shapes.values()))

    def pymc_model(self):
        raise NotImplementedError

    def numpyro_call(self) -> tuple:
        """(model function, its positional arguments): the function is module-level, so it pickles by name."""
        raise NotImplementedError

    def draw(self, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
        """``n`` independent exact draws: variable -> array (n, *shape)."""
        raise NotImplementedError

    def _marginals(self) -> dict[str, tuple[np.ndarray, np.ndarray, callable]]:
        """variable -> (exact means, exact sds, quantile(component index, probability))."""
        raise NotImplementedError

    def moments(self) -> dict[str, dict[str, np.ndarray]]:
        """The statistics of :data:`~bayeszoo.catalogue.reference.STATS` per variable, exact: mean, sd and
        quantiles, every Monte-Carlo error 0; R-hat and ESS NaN (no run to judge)."""
        out = {}
        for name, (mean, sd, quantile) in self._marginals().items():
            shape = self.shapes[name]
            stats = {"mean": np.asarray(mean, float).reshape(shape), "sd": np.asarray(sd, float).reshape(shape)}
            for key, prob in QUANTILES.items():
                stats[key] = np.array([quantile(j, prob) for j in range(math.prod(shape))]).reshape(shape)
            for stat in STATS:
                if stat.startswith("mcse_"):
                    stats[stat] = np.zeros(shape)
                elif stat not in stats:
                    stats[stat] = np.full(shape, np.nan)
            out[name] = stats
        return out


def _solve_cdf(cdf, prob: float, scale: float) -> float:
    """The ``prob`` quantile of a continuous distribution of spread ``scale`` from its CDF (bracketed, then
    Brent's method to ~1e-12 of the scale)."""
    lo, hi = -scale, scale
    while cdf(lo) > prob:
        lo *= 2
    while cdf(hi) < prob:
        hi *= 2
    return float(optimize.brentq(lambda t: cdf(t) - prob, lo, hi, xtol=1e-13 * scale, rtol=1e-14))


def _normal_pdf(x: float, scale: float) -> float:
    # scipy.stats.norm.pdf costs ~50 us a call, too slow inside quad inside brentq
    return math.exp(-0.5 * (x / scale) ** 2) / (scale * math.sqrt(2 * math.pi))


def _normal_quantiles(mean, sd):
    mean, sd = np.ravel(mean), np.ravel(sd)
    return lambda j, prob: float(mean[j] + sd[j] * norm.ppf(prob))


def _zeros(n: int) -> np.ndarray:
    return np.zeros(n)


# ---- Neal's funnel
class Funnel(Target):
    """Neal (2003): v ~ N(0, scale^2), x_i | v ~ N(0, e^v) (variance e^v), i = 1..n."""

    kind = "funnel"
    notes = ("the sd of x_i is exact but no sample reaches it reliably: half of Var x_i = E e^v comes from v > 9 "
             "(3 sds out) and the error of its estimate from v near 18 (6 sds), so even exact draws put the "
             "sample sd of x_i low, and outside their own MCSE about 4 times in 10 at 20,000 draws; read a "
             "sampler's error on the funnel from v and the means of x")

    def __init__(self, scale: float = 3.0, n: int = 9):
        self.scale, self.n = float(scale), int(n)
        self.shapes = {"v": (), "x": (self.n,)}
        self.description = (f"Neal's funnel in {self.n + 1} dimensions: v ~ N(0, {self.scale:g}^2), "
                            f"x_i | v ~ N(0, exp(v)), i = 1..{self.n}")

    def pymc_model(self):
        import pymc as pm

        with pm.Model() as model:
            v = pm.Normal("v", 0.0, self.scale)
            x = pm.Flat("x", shape=self.n)
            pm.Normal(OBSERVED, mu=x, sigma=pm.math.exp(v / 2), observed=_zeros(self.n))
        return model

    def numpyro_call(self):
        return _funnel_numpyro, (self.scale, _zeros(self.n))

    def draw(self, rng, n):
        v = rng.normal(0.0, self.scale, n)
        return {"v": v, "x": rng.standard_normal((n, self.n)) * np.exp(v / 2)[:, None]}

    def _marginals(self):
        # x_i = e^(v/2) z: E x_i = 0, Var x_i = E e^v = exp(scale^2 / 2), the normal's moment generating function
        sd_x = math.exp(self.scale ** 2 / 4)
        x_quantile = functools.lru_cache(lambda p: _solve_cdf(self._x_cdf, p, sd_x))   # the x_i are alike
        return {"v": (0.0, self.scale, lambda j, p: self.scale * float(norm.ppf(p))),
                "x": (np.zeros(self.n), np.full(self.n, sd_x), lambda j, p: x_quantile(p))}

    def _x_cdf(self, t: float) -> float:
        """P(x_i <= t) = E_v Phi(t e^(-v/2)), integrated over v's normal density."""
        s = self.scale
        integrand = lambda v: ndtr(t * math.exp(-v / 2)) * _normal_pdf(v, s)   # noqa: E731
        return float(integrate.quad(integrand, -12 * s, 12 * s, epsabs=1e-14, epsrel=1e-12, limit=200)[0])


def _funnel_numpyro(scale, y):
    import numpyro
    import numpyro.distributions as dist
    import jax.numpy as jnp

    v = numpyro.sample("v", dist.Normal(0.0, scale))
    x = numpyro.sample("x", dist.ImproperUniform(dist.constraints.real, (), event_shape=(len(y),)))
    numpyro.sample(OBSERVED, dist.Normal(x, jnp.exp(v / 2)), obs=y)


# ---- Gaussians
class Gaussian(Target):
    """x ~ N(0, cov): the posterior of a flat prior on x given y = 0 ~ N(x, cov)."""

    kind = "Gaussian"

    def __init__(self, cov: np.ndarray, description: str):
        self.cov = np.asarray(cov, dtype=float)
        self.shapes = {"x": (self.cov.shape[0],)}
        self.description = description

    def pymc_model(self):
        import pymc as pm

        with pm.Model() as model:
            x = pm.Flat("x", shape=self.cov.shape[0])
            pm.MvNormal(OBSERVED, mu=x, cov=self.cov, observed=_zeros(self.cov.shape[0]))
        return model

    def numpyro_call(self):
        return _gaussian_numpyro, (self.cov, _zeros(self.cov.shape[0]))

    def draw(self, rng, n):
        return {"x": rng.standard_normal((n, self.cov.shape[0])) @ np.linalg.cholesky(self.cov).T}

    def _marginals(self):
        mean, sd = np.zeros(self.cov.shape[0]), np.sqrt(np.diag(self.cov))
        return {"x": (mean, sd, _normal_quantiles(mean, sd))}


def _gaussian_numpyro(cov, y):
    import numpyro
    import numpyro.distributions as dist

    x = numpyro.sample("x", dist.ImproperUniform(dist.constraints.real, (), event_shape=(len(y),)))
    numpyro.sample(OBSERVED, dist.MultivariateNormal(x, covariance_matrix=cov), obs=y)


def ill_conditioned_covariance(dim: int = 100, condition: float = 1e4, seed: int = ROTATION_SEED) -> np.ndarray:
    """Q diag(lambda) Q^T with lambda log-spaced from 1 / ``condition`` to 1 and Q a random rotation (the QR of a
    Gaussian matrix from ``seed``, signs fixed: Haar-distributed). A rotation, not a diagonal: every NUTS engine
    adapts a diagonal mass matrix, which would undo diagonal scales entirely and leave an easy target. Rounded to
    single precision (then read as double) so that every machine's LAPACK gives the same bits, and with them the
    same model fingerprint: its eigenvalues move by about 1e-7 relative, the condition number stays 1e4 to 4
    digits."""
    rng = np.random.default_rng(seed)
    q, r = np.linalg.qr(rng.standard_normal((dim, dim)))
    q *= np.sign(np.diag(r))
    cov = (q * np.geomspace(1.0 / condition, 1.0, dim)) @ q.T
    return ((cov + cov.T) / 2).astype(np.float32).astype(np.float64)


def equicorrelated_covariance(dim: int = 10, rho: float = 0.99) -> np.ndarray:
    """Unit variances, every correlation ``rho``: eigenvalues 1 + (dim - 1) rho (once) and 1 - rho."""
    return np.full((dim, dim), rho) + (1.0 - rho) * np.eye(dim)


# ---- the banana
class Banana(Target):
    """Haario, Saksman and Tamminen (1999): the density of N(0, diag(scale^2, 1)) composed with
    phi_b(x) = (x_1, x_2 + b x_1^2 - b scale^2), a map of Jacobian 1."""

    kind = "banana"

    def __init__(self, b: float = 0.1, scale: float = 10.0):
        self.b, self.scale = float(b), float(scale)
        self.shapes = {"x": (2,)}
        self.description = (f"Haario et al.'s twisted Gaussian in 2-D: x_1 ~ N(0, {self.scale:g}^2), "
                            f"x_2 + {self.b:g} (x_1^2 - {self.scale ** 2:g}) ~ N(0, 1)")

    def pymc_model(self):
        import pymc as pm
        import pytensor.tensor as pt

        with pm.Model() as model:
            x = pm.Flat("x", shape=2)
            twisted = pt.stack([x[0], x[1] + self.b * (x[0] ** 2 - self.scale ** 2)])
            pm.Normal(OBSERVED, mu=twisted, sigma=np.array([self.scale, 1.0]), observed=_zeros(2))
        return model

    def numpyro_call(self):
        return _banana_numpyro, (self.b, self.scale, _zeros(2))

    def draw(self, rng, n):
        x1 = rng.normal(0.0, self.scale, n)
        return {"x": np.stack([x1, rng.standard_normal(n) - self.b * (x1 ** 2 - self.scale ** 2)], axis=1)}

    def _marginals(self):
        # x_2 = u - b (x_1^2 - s^2): mean 0 (E x_1^2 = s^2); variance 1 + b^2 Var(x_1^2) = 1 + 2 b^2 s^4
        sd = np.array([self.scale, math.sqrt(1.0 + 2.0 * self.b ** 2 * self.scale ** 4)])

        def quantile(j, p):
            if j == 0:
                return self.scale * float(norm.ppf(p))
            return _solve_cdf(self._x2_cdf, p, sd[1])

        return {"x": (np.zeros(2), sd, quantile)}

    def _x2_cdf(self, t: float) -> float:
        """P(x_2 <= t) = E Phi(t + b (x_1^2 - s^2)) over x_1 ~ N(0, s^2), symmetric in x_1."""
        s, b = self.scale, self.b
        integrand = lambda z: ndtr(t + b * (z ** 2 - s ** 2)) * _normal_pdf(z, s)   # noqa: E731
        # where the integrand steps from 0 to 1: z^2 = s^2 - t / b
        kink = math.sqrt(max(s ** 2 - t / b, 0.0))
        points = [kink] if 0 < kink < 12 * s else None
        return float(2 * integrate.quad(integrand, 0, 12 * s, points=points, epsabs=1e-14, epsrel=1e-12,
                                        limit=200)[0])


def _banana_numpyro(b, scale, y):
    import numpyro
    import numpyro.distributions as dist
    import jax.numpy as jnp

    x = numpyro.sample("x", dist.ImproperUniform(dist.constraints.real, (), event_shape=(2,)))
    twisted = jnp.stack([x[0], x[1] + b * (x[0] ** 2 - scale ** 2)])
    numpyro.sample(OBSERVED, dist.Normal(twisted, jnp.array([scale, 1.0])), obs=y)


# ---- the mixture
class Mixture(Target):
    """sum_k w_k N(m_k, s_k^2) in 1-D: the posterior of a flat prior on x given y = 0 ~ sum_k w_k N(x - m_k, s_k)."""

    kind = "mixture"

    def __init__(self, weights=(0.3, 0.7), means=(-4.0, 4.0), sds=(1.0, 1.0)):
        self.weights, self.means, self.sds = (np.asarray(a, dtype=float) for a in (weights, means, sds))
        self.shapes = {"x": ()}
        parts = " + ".join(f"{w:g} N({m:g}, {s:g}^2)" for w, m, s in zip(self.weights, self.means, self.sds))
        self.description = f"a well-separated two-component normal mixture in 1-D: {parts}"

    def pymc_model(self):
        import pymc as pm

        with pm.Model() as model:
            x = pm.Flat("x")
            pm.NormalMixture(OBSERVED, w=self.weights, mu=x - self.means, sigma=self.sds, observed=0.0)
        return model

    def numpyro_call(self):
        return _mixture_numpyro, (self.weights, self.means, self.sds, np.float64(0.0))

    def draw(self, rng, n):
        k = rng.choice(len(self.weights), size=n, p=self.weights)
        return {"x": rng.normal(self.means[k], self.sds[k])}

    def _marginals(self):
        w, m, s = self.weights, self.means, self.sds
        mean = float(w @ m)
        sd = math.sqrt(float(w @ (s ** 2 + m ** 2)) - mean ** 2)   # E x^2 - (E x)^2, E x^2 = sum_k w_k (s_k^2 + m_k^2)
        cdf = lambda t: float(w @ ndtr((t - m) / s))   # noqa: E731
        return {"x": (mean, sd, lambda j, p: mean + _solve_cdf(lambda t: cdf(mean + t), p, sd))}


def _mixture_numpyro(weights, means, sds, y):
    import numpyro
    import numpyro.distributions as dist

    x = numpyro.sample("x", dist.ImproperUniform(dist.constraints.real, (), ()))
    numpyro.sample(OBSERVED, dist.MixtureSameFamily(dist.Categorical(probs=weights), dist.Normal(x - means, sds)),
                   obs=y)


# -------------------------------------------------------------------------------------------- the suite
@functools.lru_cache(maxsize=None)
def _targets() -> dict[str, Target]:
    return {
        "funnel": Funnel(scale=3.0, n=9),
        "ill_conditioned_gaussian": Gaussian(
            ill_conditioned_covariance(100, 1e4), "a 100-D zero-mean Gaussian, covariance Q diag(lambda) Q^T with "
            "lambda log-spaced from 1e-4 to 1 (condition number 1e4) and Q a fixed random rotation (seed 1618)"),
        "correlated_gaussian": Gaussian(
            equicorrelated_covariance(10, 0.99), "a 10-D zero-mean Gaussian, unit variances, every correlation 0.99"),
        "banana": Banana(b=0.1, scale=10.0),
        "mixture": Mixture(weights=(0.3, 0.7), means=(-4.0, 4.0), sds=(1.0, 1.0)),
    }


def names() -> list[str]:
    """The exact targets' names."""
    return list(_targets())


def target(name: str) -> Target:
    """The :class:`Target` called ``name``; a ValueError suggesting close names for an unknown one."""
    targets = _targets()
    if name not in targets:
        raise ValueError(f"{name!r} is not an exact target;{did_you_mean(name, targets)} the targets are "
                         f"{', '.join(targets)} (bayeszoo.catalogue.exact.names())")
    return targets[name]


def info(name: str) -> dict:
    """dimension (number of scalar components), kind ("funnel", "Gaussian", "banana", "mixture"), description,
    the variables' shapes, and notes (what to know when reading errors against the reference; "" if nothing)."""
    t = target(name)
    return {"dimension": t.dimension, "kind": t.kind, "description": t.description,
            "variables": {k: list(v) for k, v in t.shapes.items()}, "notes": t.notes}


def load(name: str, library: str = "pymc") -> models.UserModel:
    """Target ``name`` as a bayeszoo model of one's own, declared in ``library`` ("pymc" or "numpyro"), named
    after the target. Both declarations have the same log density and variables (``v``, ``x``)."""
    t = target(name)
    if library not in LIBRARIES:
        raise ValueError(f"library must be one of {LIBRARIES}, got {library!r}")
    if library == "pymc":
        return models.from_pymc(t.pymc_model(), name=name)
    fn, args = t.numpyro_call()
    return models.NumPyroModel(fn, args, name=name)


def draws_fit(t: Target, n: int, seed: int, chains: int = REFERENCE_CHAINS, label: str = "exact") -> Fit:
    """``n`` exact draws of ``t`` as a Fit (``chains`` rows of independent draws), dims named as the models' are
    (``<variable>_dim_<k>``)."""
    per_chain = n // chains
    values = t.draw(np.random.default_rng(seed), chains * per_chain)
    posterior = {}
    for name, shape in t.shapes.items():
        dims = ("chain", "draw", *(f"{name}_dim_{k}" for k in range(len(shape))))
        posterior[name] = xr.DataArray(np.asarray(values[name], float).reshape(chains, per_chain, *shape), dims=dims)
    # the observations and (no) inputs as the models' fits hold them, so the Fit saves and loads as theirs do
    n_obs = t.n_observed
    observed = xr.Dataset({"y": (("obs",), np.zeros(n_obs))}, coords={"obs": np.arange(n_obs)})
    constant = xr.Dataset({"X": (("obs", "feature"), np.zeros((n_obs, 0)))}, coords={"obs": np.arange(n_obs)})
    idata = az.InferenceData(posterior=xr.Dataset(posterior, coords={"chain": np.arange(chains),
                                                                     "draw": np.arange(per_chain)}),
                             observed_data=observed, constant_data=constant)
    return Fit(idata=idata, backend=label, kind="mcmc", model_spec={"suite": "exact", "target": t.description},
               info={"seed": seed, "exact_draws": True})


@functools.lru_cache(maxsize=None)
def _reference(name: str) -> Reference:
    t = target(name)
    run = {"engine": "closed form", "kind": "exact", "chains": REFERENCE_CHAINS,
           "draws": REFERENCE_DRAWS // REFERENCE_CHAINS, "divergences": 0, "seed": DRAW_SEED}
    prov = {"source": "exact", "target": name, "description": t.description, "run": run, "cross_checked": False,
            "model": None, "data": None, "versions": _versions()}
    return Reference(name=f"exact: {name}", moments=t.moments(), fit=draws_fit(t, REFERENCE_DRAWS, DRAW_SEED),
                     provenance=prov)


def reference(name: str) -> Reference:
    """The exact reference of target ``name``: exact moments (MCSE 0) and :data:`REFERENCE_DRAWS` exact draws
    for the plots (seed :data:`DRAW_SEED`). It matches both libraries' models (its provenance names no model)."""
    target(name)
    ref = _reference(name)
    # a copy: a caller that edits its moments or provenance does not change the next caller's
    return Reference(name=ref.name, moments=copy.deepcopy(ref.moments), fit=ref.fit,
                     provenance=copy.deepcopy(ref.provenance))
