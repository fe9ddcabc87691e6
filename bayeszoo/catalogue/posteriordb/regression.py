"""posteriordb's regressions in PyMC and NumPyro (see :mod:`.programs` for the rules they keep).

Most of them are one shape, a normal linear model ``y ~ normal(X beta, sigma)`` whose Stan programs differ in
the response, the predictors made in ``transformed data`` and the priors; each program below gives its own
``design`` (what its ``transformed data`` block computes) and its own priors, and :func:`_linear` writes the
shared likelihood. A Stan ``beta[1] + beta[2] * x2 + ...`` is ``X @ beta`` with a first column of ones.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from bayeszoo.catalogue.posteriordb.programs import Program, register

FLAT = ("flat",)   # Stan's default: no sampling statement, an improper uniform prior on the constrained space


def _vec(data: dict, key: str) -> np.ndarray:
    return np.asarray(data[key], dtype=float)


def _sd(x: np.ndarray) -> float:
    return float(np.std(x, ddof=1))   # Stan's sd() divides by N - 1


def _columns(data: dict, *predictors) -> np.ndarray:
    """The design matrix: a column of ones (Stan's ``beta[1]``), then the predictors in the Stan program's order."""
    return np.column_stack([np.ones(int(data["N"])), *(np.asarray(p, dtype=float) for p in predictors)])


# ---- the priors, in both libraries -----------------------------------------------------------------------------
def _pymc_prior(name: str, prior: tuple, shape=None, positive: bool = False):
    import pymc as pm

    kind, *args = prior
    kw = {"shape": shape} if shape is not None else {}
    if kind == "flat":
        return pm.HalfFlat(name, **kw) if positive else pm.Flat(name, **kw)
    if kind == "normal":   # on a <lower=0> parameter: the half-normal (Stan's truncation is a constant)
        mu, s = args
        return pm.HalfNormal(name, s, **kw) if positive else pm.Normal(name, mu, s, **kw)
    if kind == "cauchy":
        mu, s = args
        return pm.HalfCauchy(name, s, **kw) if positive else pm.Cauchy(name, mu, s, **kw)
    if kind == "student_t":
        nu, mu, s = args
        return pm.HalfStudentT(name, nu=nu, sigma=s, **kw) if positive else pm.StudentT(name, nu, mu, s, **kw)
    raise ValueError(f"unknown prior {prior}")


def _numpyro_prior(name: str, prior: tuple, shape=None, positive: bool = False):
    import numpyro
    import numpyro.distributions as dist
    from numpyro.distributions import constraints

    kind, *args = prior
    event = tuple(shape) if shape is not None else ()
    if kind == "flat":
        support = constraints.positive if positive else constraints.real
        return numpyro.sample(name, dist.ImproperUniform(support, (), event))
    if positive and args[-2] != 0:
        raise ValueError(f"{name}: a half distribution needs location 0, got {prior}")
    if kind == "normal":
        d = dist.HalfNormal(args[1]) if positive else dist.Normal(*args)
    elif kind == "cauchy":
        d = dist.HalfCauchy(args[1]) if positive else dist.Cauchy(*args)
    elif kind == "student_t":
        nu, mu, s = args
        d = (dist.TruncatedDistribution(dist.StudentT(nu, 0.0, s), low=0.0) if positive
             else dist.StudentT(nu, mu, s))
    else:
        raise ValueError(f"unknown prior {prior}")
    return numpyro.sample(name, d.expand(event).to_event(len(event)) if event else d)


# ---- y ~ normal(X beta, sigma) ---------------------------------------------------------------------------------
def _linear_pymc(design, beta_prior, sigma_prior, data):
    import pymc as pm

    y, X = design(data)
    with pm.Model() as model:
        beta = _pymc_prior("beta", beta_prior, shape=X.shape[1])
        sigma = _pymc_prior("sigma", sigma_prior, positive=True)
        pm.Normal("y", pm.math.dot(X, beta), sigma, observed=y)
    return model


def _linear_numpyro(design, beta_prior, sigma_prior, data):
    import numpyro
    import numpyro.distributions as dist

    y, X = design(data)

    def model():
        beta = _numpyro_prior("beta", beta_prior, shape=(X.shape[1],))
        sigma = _numpyro_prior("sigma", sigma_prior, positive=True)
        numpyro.sample("y", dist.Normal(X @ beta, sigma), obs=y)

    return model


def _linear(name: str, design, beta_prior=FLAT, sigma_prior=FLAT) -> Program:
    return register(Program(name, "regression", partial(_linear_pymc, design, beta_prior, sigma_prior),
                            partial(_linear_numpyro, design, beta_prior, sigma_prior)))


# ---- earnings: flat priors on beta and sigma -------------------------------------------------------------------
def _earnings(response, *predictors):
    def design(d):
        return response(d), _columns(d, *(p(d) for p in predictors))
    return design


_earn = partial(_vec, key="earn")
_height = partial(_vec, key="height")
_male = partial(_vec, key="male")


def _log_earn(d):
    return np.log(_earn(d))


def _z_height(d):
    h = _height(d)
    return (h - h.mean()) / _sd(h)


_linear("earn_height", _earnings(_earn, _height))
_linear("log10earn_height", _earnings(lambda d: np.log10(_earn(d)), _height))
_linear("logearn_height", _earnings(_log_earn, _height))
_linear("logearn_height_male", _earnings(_log_earn, _height, _male))
_linear("logearn_interaction", _earnings(_log_earn, _height, _male, lambda d: _height(d) * _male(d)))
_linear("logearn_interaction_z", _earnings(_log_earn, _z_height, _male, lambda d: _z_height(d) * _male(d)))
_linear("logearn_logheight_male", _earnings(_log_earn, lambda d: np.log(_height(d)), _male))


# ---- kidiq: sigma ~ cauchy(0, 2.5); kidiq_with_mom_work: flat --------------------------------------------------
def _kid(*predictors):
    def design(d):
        return _vec(d, "kid_score"), _columns(d, *(p(d) for p in predictors))
    return design


_hs = partial(_vec, key="mom_hs")
_iq = partial(_vec, key="mom_iq")
HALF_CAUCHY_2_5 = ("cauchy", 0.0, 2.5)

_linear("kidscore_momhs", _kid(_hs), sigma_prior=HALF_CAUCHY_2_5)
_linear("kidscore_momiq", _kid(_iq), sigma_prior=HALF_CAUCHY_2_5)
_linear("kidscore_momhsiq", _kid(_hs, _iq), sigma_prior=HALF_CAUCHY_2_5)
_linear("kidscore_interaction", _kid(_hs, _iq, lambda d: _hs(d) * _iq(d)), sigma_prior=HALF_CAUCHY_2_5)


def _centred(x):
    return x - x.mean()


def _z2(x):
    return (x - x.mean()) / (2 * _sd(x))


_linear("kidscore_interaction_c", _kid(lambda d: _centred(_hs(d)), lambda d: _centred(_iq(d)),
                                       lambda d: _centred(_hs(d)) * _centred(_iq(d))))
_linear("kidscore_interaction_c2", _kid(lambda d: _hs(d) - 0.5, lambda d: _iq(d) - 100,
                                        lambda d: (_hs(d) - 0.5) * (_iq(d) - 100)))
_linear("kidscore_interaction_z", _kid(lambda d: _z2(_hs(d)), lambda d: _z2(_iq(d)),
                                       lambda d: _z2(_hs(d)) * _z2(_iq(d))))
_linear("kidscore_mom_work", _kid(*(partial(lambda d, k: (np.asarray(d["mom_work"]) == k).astype(float), k=k)
                                    for k in (2, 3, 4))))


# ---- mesquite: flat priors ---------------------------------------------------------------------------------------
def _mesquite(response, *predictors):
    def design(d):
        v = {k: _vec(d, k) for k in ("weight", "diam1", "diam2", "canopy_height", "total_height", "density", "group")
             if k in d}
        return response(v), _columns(d, *(p(v) for p in predictors))
    return design


def _log_volume(v):
    return np.log(v["diam1"] * v["diam2"] * v["canopy_height"])


def _log_area(v):
    return np.log(v["diam1"] * v["diam2"])


def _log_shape(v):
    return np.log(v["diam1"] / v["diam2"])


def _log_weight(v):
    return np.log(v["weight"])


def _raw(key, log=False):
    return (lambda v: np.log(v[key])) if log else (lambda v: v[key])


_linear("mesquite", _mesquite(_raw("weight"), *(_raw(k) for k in ("diam1", "diam2", "canopy_height",
                                                                  "total_height", "density", "group"))))
_linear("logmesquite", _mesquite(_log_weight, *(_raw(k, log=True) for k in ("diam1", "diam2", "canopy_height",
                                                                           "total_height", "density")),
                                 _raw("group")))
_linear("logmesquite_logva", _mesquite(_log_weight, _log_volume, _log_area, _raw("group")))
_linear("logmesquite_logvas", _mesquite(_log_weight, _log_volume, _log_area, _log_shape,
                                        _raw("total_height", log=True), _raw("density", log=True), _raw("group")))
_linear("logmesquite_logvash", _mesquite(_log_weight, _log_volume, _log_area, _log_shape,
                                         _raw("total_height", log=True), _raw("group")))
_linear("logmesquite_logvolume", _mesquite(_log_weight, _log_volume))


# ---- nes (eight election years, one program): flat priors -------------------------------------------------------
def _nes_design(d):
    age = np.asarray(d["age_discrete"])
    return _vec(d, "partyid7"), _columns(
        d, _vec(d, "real_ideo"), _vec(d, "race_adj"), *((age == k).astype(float) for k in (2, 3, 4)),
        _vec(d, "educ1"), _vec(d, "gender"), _vec(d, "income"))


_linear("nes", _nes_design)


# ---- blr (sblrc, sblri): beta ~ normal(0, 10), sigma ~ normal(0, 10) on <lower=0> -------------------------------
_linear("blr", lambda d: (_vec(d, "y"), np.asarray(d["X"], dtype=float).reshape(int(d["N"]), int(d["D"]))),
        beta_prior=("normal", 0.0, 10.0), sigma_prior=("normal", 0.0, 10.0))


# ---- kilpisjarvi.stan: alpha ~ normal(pmualpha, psalpha); beta ~ normal(pmubeta, psbeta); sigma flat ---------------
def _kilpisjarvi_pymc(data):
    import pymc as pm

    with pm.Model() as model:
        alpha = pm.Normal("alpha", float(data["pmualpha"]), float(data["psalpha"]))
        beta = pm.Normal("beta", float(data["pmubeta"]), float(data["psbeta"]))
        sigma = pm.HalfFlat("sigma")
        pm.Normal("y", alpha + beta * _vec(data, "x"), sigma, observed=_vec(data, "y"))
    return model


def _kilpisjarvi_numpyro(data):
    import numpyro
    import numpyro.distributions as dist
    from numpyro.distributions import constraints

    x, y = _vec(data, "x"), _vec(data, "y")

    def kilpisjarvi():
        alpha = numpyro.sample("alpha", dist.Normal(float(data["pmualpha"]), float(data["psalpha"])))
        beta = numpyro.sample("beta", dist.Normal(float(data["pmubeta"]), float(data["psbeta"])))
        sigma = numpyro.sample("sigma", dist.ImproperUniform(constraints.positive, (), ()))
        numpyro.sample("y", dist.Normal(alpha + beta * x, sigma), obs=y)

    return kilpisjarvi


register(Program("kilpisjarvi", "regression", _kilpisjarvi_pymc, _kilpisjarvi_numpyro))


# ---- diamonds.stan (brms): centred predictors, b ~ normal(0, 1), Intercept ~ student_t(3, 8, 10),
#      sigma ~ student_t(3, 0, 10) on <lower=0>; b_Intercept = Intercept - dot(means_X, b) ---------------------------
def _diamonds_design(data):
    X = np.asarray(data["X"], dtype=float).reshape(int(data["N"]), int(data["K"]))
    means = X[:, 1:].mean(axis=0)
    return _vec(data, "Y"), X[:, 1:] - means, means


def _diamonds_pymc(data):
    import pymc as pm

    y, Xc, means = _diamonds_design(data)
    with pm.Model() as model:
        b = pm.Normal("b", 0.0, 1.0, shape=Xc.shape[1])
        intercept = pm.StudentT("Intercept", nu=3, mu=8, sigma=10)
        sigma = pm.HalfStudentT("sigma", nu=3, sigma=10)
        pm.Normal("Y", intercept + pm.math.dot(Xc, b), sigma, observed=y)
        pm.Deterministic("b_Intercept", intercept - pm.math.dot(means, b))
    return model


def _diamonds_numpyro(data):
    import numpyro
    import numpyro.distributions as dist

    y, Xc, means = _diamonds_design(data)

    def diamonds():
        b = numpyro.sample("b", dist.Normal(0.0, 1.0).expand([Xc.shape[1]]).to_event(1))
        intercept = numpyro.sample("Intercept", dist.StudentT(3.0, 8.0, 10.0))
        sigma = numpyro.sample("sigma", dist.TruncatedDistribution(dist.StudentT(3.0, 0.0, 10.0), low=0.0))
        numpyro.sample("Y", dist.Normal(intercept + Xc @ b, sigma), obs=y)
        numpyro.deterministic("b_Intercept", intercept - means @ b)

    return diamonds


register(Program("diamonds", "regression", _diamonds_pymc, _diamonds_numpyro))
