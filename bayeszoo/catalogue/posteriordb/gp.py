"""posteriordb's Gaussian-process programs in PyMC and NumPyro: ``gp_pois_regr``, ``gp_regr``, ``accel_gp``.

``gp_exp_quad_cov(x, alpha, rho)`` is ``alpha^2 exp(-(x_i - x_j)^2 / (2 rho^2))``. ``gp_pois_regr`` is the
non-centred latent GP ``f = cholesky(K + 1e-10 I) f_tilde`` with ``f_tilde`` the free variable and ``f`` (which
posteriordb's draws report) a deterministic; ``gp_regr`` adds ``sigma`` (not its square, as the Stan program
does) to the diagonal. ``accel_gp`` is brms's basis-function approximate GP (Hilbert space, Riutort-Mayol et
al.) for the mean and for the log sd of the motorcycle accelerations: ``X (sqrt(spd(slambda)) .* zgp)`` with
the basis ``X`` and the square roots of the eigenvalues ``slambda`` given as data.
"""
from __future__ import annotations

import numpy as np

from bayeszoo.catalogue.posteriordb.programs import Program, register

JITTER = 1e-10   # gp_pois_regr's diagonal term


def _squared_distances(x) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    return (x[:, None] - x[None, :]) ** 2


def _exp_quad_cov(xp, d2, alpha, rho):
    """Stan's ``gp_exp_quad_cov`` from the squared distances ``d2``, for the array module ``xp`` (pt or jnp)."""
    return alpha ** 2 * xp.exp(-d2 / (2 * rho ** 2))


# ---- gp_pois_regr ----------------------------------------------------------------------------------------------

def _gp_pois_regr_pymc(data):
    import pymc as pm
    import pytensor.tensor as pt

    d2, k = _squared_distances(data["x"]), np.asarray(data["k"], dtype=int)
    N = len(k)
    with pm.Model() as model:
        rho = pm.Gamma("rho", 25.0, 4.0)
        alpha = pm.HalfNormal("alpha", 2.0)
        f_tilde = pm.Normal("f_tilde", 0.0, 1.0, shape=N)
        cov = _exp_quad_cov(pt, d2, alpha, rho) + JITTER * np.eye(N)
        f = pm.Deterministic("f", pt.linalg.cholesky(cov) @ f_tilde)
        pm.Poisson("k", pt.exp(f), observed=k)
    return model


def _gp_pois_regr_numpyro(data):
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    d2, k = _squared_distances(data["x"]), np.asarray(data["k"], dtype=int)
    N = len(k)

    def model():
        rho = numpyro.sample("rho", dist.Gamma(25, 4))
        alpha = numpyro.sample("alpha", dist.HalfNormal(2))
        f_tilde = numpyro.sample("f_tilde", dist.Normal(0, 1).expand([N]).to_event(1))
        cov = _exp_quad_cov(jnp, d2, alpha, rho) + JITTER * jnp.eye(N)
        f = numpyro.deterministic("f", jnp.linalg.cholesky(cov) @ f_tilde)
        numpyro.sample("k", dist.Poisson(jnp.exp(f)).to_event(1), obs=k)

    return model


# ---- gp_regr ---------------------------------------------------------------------------------------------------

def _gp_regr_pymc(data):
    import pymc as pm
    import pytensor.tensor as pt

    d2, y = _squared_distances(data["x"]), np.asarray(data["y"], dtype=float)
    N = len(y)
    with pm.Model() as model:
        rho = pm.Gamma("rho", 25.0, 4.0)
        alpha = pm.HalfNormal("alpha", 2.0)
        sigma = pm.HalfNormal("sigma", 1.0)
        cov = _exp_quad_cov(pt, d2, alpha, rho) + sigma * np.eye(N)
        pm.MvNormal("y", mu=np.zeros(N), chol=pt.linalg.cholesky(cov), observed=y)
    return model


def _gp_regr_numpyro(data):
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    d2, y = _squared_distances(data["x"]), np.asarray(data["y"], dtype=float)
    N = len(y)

    def model():
        rho = numpyro.sample("rho", dist.Gamma(25, 4))
        alpha = numpyro.sample("alpha", dist.HalfNormal(2))
        sigma = numpyro.sample("sigma", dist.HalfNormal(1))
        cov = _exp_quad_cov(jnp, d2, alpha, rho) + sigma * jnp.eye(N)
        numpyro.sample("y", dist.MultivariateNormal(jnp.zeros(N), scale_tril=jnp.linalg.cholesky(cov)), obs=y)

    return model


# ---- accel_gp --------------------------------------------------------------------------------------------------

LSCALE_PRIOR = (1.124909, 0.0177)   # inv_gamma(alpha, beta) of both length scales


def _accel_basis(data, suffix: str):
    """The basis matrix (N, NB) and the squared square-root eigenvalues (NB,) of one approximate GP
    (``Xgp_1`` / ``slambda_1``, or the sd's ``Xgp_sigma_1`` / ``slambda_sigma_1``); one input dimension."""
    X = np.asarray(data[f"Xgp{suffix}"], dtype=float)
    slambda = np.asarray(data[f"slambda{suffix}"], dtype=float).reshape(X.shape[1], -1)
    if slambda.shape[1] != 1:
        raise ValueError(f"accel_gp is written for a one-dimensional GP; slambda{suffix} has "
                         f"{slambda.shape[1]} dimensions")
    return X, slambda[:, 0] ** 2


def _spd_sqrt(xp, lambda2, sdgp, lscale):
    """sqrt(spd_cov_exp_quad) for one dimension: the exponentiated quadratic kernel's spectral density at the
    square-root eigenvalues, ``sdgp^2 sqrt(2 pi) lscale exp(-lscale^2 lambda / 2)``, square-rooted.

    Written as ``sdgp (2 pi)^(1/4) sqrt(lscale) exp(-lscale^2 lambda / 4)``, the same function: the square root of
    a density that underflowed to 0 (the higher eigenvalues at a length scale near 1) has an infinite derivative,
    and the chain rule's inf x 0 made the log density's gradient NaN where its value is finite."""
    return sdgp * (2 * np.pi) ** 0.25 * xp.sqrt(lscale) * xp.exp(-0.25 * lscale ** 2 * lambda2)


def _accel_gp_pymc(data):
    import pymc as pm
    import pytensor.tensor as pt

    X, lambda2 = _accel_basis(data, "_1")
    Xs, lambda2s = _accel_basis(data, "_sigma_1")
    Y = np.asarray(data["Y"], dtype=float)
    # float literals throughout: PyMC stores an integer literal as int8, and its half-t squares sigma in that type
    # (36 ** 2 overflows int8, a wrong prior without an error)
    with pm.Model() as model:
        intercept = pm.StudentT("Intercept", nu=3.0, mu=-13.0, sigma=36.0)
        sdgp = pm.HalfStudentT("sdgp_1", nu=3.0, sigma=36.0)
        lscale = pm.InverseGamma("lscale_1", *LSCALE_PRIOR)
        zgp = pm.Normal("zgp_1", 0.0, 1.0, shape=X.shape[1])
        intercept_sigma = pm.StudentT("Intercept_sigma", nu=3.0, mu=0.0, sigma=10.0)
        # the prior's default start (36) puts log sigma tens of units off: a unit amplitude on the log scale
        sdgp_sigma = pm.HalfStudentT("sdgp_sigma_1", nu=3.0, sigma=36.0, initval=1.0)
        lscale_sigma = pm.InverseGamma("lscale_sigma_1", *LSCALE_PRIOR)
        zgp_sigma = pm.Normal("zgp_sigma_1", 0.0, 1.0, shape=Xs.shape[1])
        mu = intercept + pt.dot(X, _spd_sqrt(pt, lambda2, sdgp, lscale) * zgp)
        log_sigma = intercept_sigma + pt.dot(Xs, _spd_sqrt(pt, lambda2s, sdgp_sigma, lscale_sigma) * zgp_sigma)
        pm.Normal("Y", mu, pt.exp(log_sigma), observed=Y)
    return model


def _accel_gp_numpyro(data):
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    X, lambda2 = _accel_basis(data, "_1")
    Xs, lambda2s = _accel_basis(data, "_sigma_1")
    Y = np.asarray(data["Y"], dtype=float)
    half_t = dist.TruncatedDistribution(dist.StudentT(3, 0.0, 36), low=0.0)

    def model():
        intercept = numpyro.sample("Intercept", dist.StudentT(3, -13, 36))
        sdgp = numpyro.sample("sdgp_1", half_t)
        lscale = numpyro.sample("lscale_1", dist.InverseGamma(*LSCALE_PRIOR))
        zgp = numpyro.sample("zgp_1", dist.Normal(0, 1).expand([X.shape[1]]).to_event(1))
        intercept_sigma = numpyro.sample("Intercept_sigma", dist.StudentT(3, 0, 10))
        sdgp_sigma = numpyro.sample("sdgp_sigma_1", half_t)
        lscale_sigma = numpyro.sample("lscale_sigma_1", dist.InverseGamma(*LSCALE_PRIOR))
        zgp_sigma = numpyro.sample("zgp_sigma_1", dist.Normal(0, 1).expand([Xs.shape[1]]).to_event(1))
        mu = intercept + X @ (_spd_sqrt(jnp, lambda2, sdgp, lscale) * zgp)
        log_sigma = intercept_sigma + Xs @ (_spd_sqrt(jnp, lambda2s, sdgp_sigma, lscale_sigma) * zgp_sigma)
        numpyro.sample("Y", dist.Normal(mu, jnp.exp(log_sigma)).to_event(1), obs=Y)

    return model


register(Program("gp_pois_regr", "Gaussian process", _gp_pois_regr_pymc, _gp_pois_regr_numpyro))
register(Program("gp_regr", "Gaussian process", _gp_regr_pymc, _gp_regr_numpyro))
register(Program("accel_gp", "Gaussian process", _accel_gp_pymc, _accel_gp_numpyro))
