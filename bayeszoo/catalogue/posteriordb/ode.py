"""posteriordb's ODE programs in PyMC and NumPyro: ``lotka_volterra``, ``one_comp_mm_elim_abs``.

Stan solves them with adaptive solvers (``integrate_ode_rk45`` with relative tolerance 1e-5, ``integrate_ode_bdf``
with 1e-6). Here both libraries take the same classical fourth-order Runge-Kutta steps on a fixed grid that holds
the measurement times (a ``pytensor.scan`` in PyMC, a ``jax.lax.scan`` in NumPyro, one right-hand side and one step
written for both): the two log densities are then one function, and their gradients are the exact derivatives
of the discrete solution, which NUTS needs. The error of the solution, measured against a solver at tolerance
1e-10 at posteriordb's reference draws, moves the log density by at most 4e-6 for the lynx and hares at a step of
1/20 year; for the one-compartment model it is largest at the smallest K_m of the draws (1e-3, where the
elimination saturates within the first step and the scheme loses its order there): 0.02 at a step of 1/20 day,
0.008 at 1/50, hence the 1/100 taken here.
"""
from __future__ import annotations

import numpy as np

from bayeszoo.catalogue.posteriordb.programs import Program, register

LOTKA_VOLTERRA_STEP = 1 / 20      # years
ONE_COMP_STEP = 1 / 100           # days


def _rk4_step(xp, rhs, t, z, h, params):
    """One classical Runge-Kutta step of ``dz/dt = rhs(xp, t, z, params)`` (``xp``: ``pytensor.tensor`` or
    ``jax.numpy``)."""
    k1 = rhs(xp, t, z, params)
    k2 = rhs(xp, t + h / 2, z + h / 2 * k1, params)
    k3 = rhs(xp, t + h / 2, z + h / 2 * k2, params)
    k4 = rhs(xp, t + h, z + h * k3, params)
    return z + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


def _grid(times, t0: float, step: float) -> tuple[np.ndarray, np.ndarray]:
    """The start of every step from ``t0`` to the last time, and the step after which each time is reached."""
    times = np.asarray(times, dtype=float)
    n = np.rint((times - t0) / step).astype(int)
    if np.any(n < 1) or not np.allclose(t0 + n * step, times, rtol=0, atol=1e-9):
        raise ValueError(f"the measurement times must lie after t0 = {t0} on a grid of step {step}; got {times}. "
                         f"Pick a step that divides the gaps between them")
    return t0 + step * np.arange(n.max()), n - 1


def _solve_pytensor(rhs, z0, t0: float, times, step: float, params):
    """The states at ``times`` (rows), by :func:`_rk4_step` from ``z0`` at ``t0``."""
    import pytensor
    import pytensor.tensor as pt

    starts, at = _grid(times, t0, step)
    states = pytensor.scan(lambda t, z, *params: _rk4_step(pt, rhs, t, z, step, params), sequences=[starts],
                           outputs_info=[z0], non_sequences=list(params), return_updates=False)
    return states[at]


def _solve_jax(rhs, z0, t0: float, times, step: float, params):
    """:func:`_solve_pytensor` in JAX."""
    import jax
    import jax.numpy as jnp

    starts, at = _grid(times, t0, step)

    def scan_step(z, t):
        z = _rk4_step(jnp, rhs, t, z, step, params)
        return z, z

    _, states = jax.lax.scan(scan_step, z0, starts)
    return states[at]


# ---- lotka_volterra --------------------------------------------------------------------------------------------

def _lotka_volterra_rhs(xp, t, z, params):
    (theta,) = params
    u, v = z[0], z[1]   # prey, predator
    alpha, beta, gamma, delta = theta[0], theta[1], theta[2], theta[3]
    return xp.stack([(alpha - beta * v) * u, (-gamma + delta * u) * v])


#: theta[{1, 3}] ~ normal(1, 0.5), theta[{2, 4}] ~ normal(0.05, 0.05), on theta > 0
THETA_LOC, THETA_SCALE = np.array([1.0, 0.05, 1.0, 0.05]), np.array([0.5, 0.05, 0.5, 0.05])


def _lotka_volterra_pymc(data):
    import pymc as pm
    import pytensor.tensor as pt

    ts, y_init, y = (np.asarray(data[k], dtype=float) for k in ("ts", "y_init", "y"))
    with pm.Model() as model:
        theta = pm.TruncatedNormal("theta", THETA_LOC, THETA_SCALE, lower=0.0)
        z_init = pm.LogNormal("z_init", np.log(10.0), 1.0, shape=2)
        sigma = pm.LogNormal("sigma", -1.0, 1.0, shape=2)
        z = _solve_pytensor(_lotka_volterra_rhs, z_init, 0.0, ts, LOTKA_VOLTERRA_STEP, [theta])
        pm.LogNormal("y_init", pt.log(z_init), sigma, observed=y_init)
        pm.LogNormal("y", pt.log(z), sigma, observed=y)
    return model


def _lotka_volterra_numpyro(data):
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    ts, y_init, y = (np.asarray(data[k], dtype=float) for k in ("ts", "y_init", "y"))

    def model():
        theta = numpyro.sample("theta", dist.TruncatedNormal(THETA_LOC, THETA_SCALE, low=0.0).to_event(1))
        z_init = numpyro.sample("z_init", dist.LogNormal(np.log(10.0), 1.0).expand([2]).to_event(1))
        sigma = numpyro.sample("sigma", dist.LogNormal(-1.0, 1.0).expand([2]).to_event(1))
        z = _solve_jax(_lotka_volterra_rhs, z_init, 0.0, ts, LOTKA_VOLTERRA_STEP, [theta])
        numpyro.sample("y_init", dist.LogNormal(jnp.log(z_init), sigma).to_event(1), obs=y_init)
        numpyro.sample("y", dist.LogNormal(jnp.log(z), sigma).to_event(2), obs=y)

    return model


# ---- one_comp_mm_elim_abs --------------------------------------------------------------------------------------

def _one_comp_rhs(xp, t, c, params):
    """First-order absorption of the dose D into the volume V, Michaelis-Menten elimination. Stan's program
    doses only for t > 0; the solution is the same with the dose's limit at t = 0, which the first Runge-Kutta
    stage evaluates (the jump would cost the fixed-step scheme its order on the first step)."""
    k_a, K_m, V_m, D, V = params
    dose = xp.exp(-k_a * t) * D * k_a / V
    return dose - (V_m / V) * c / (K_m + c)


def _one_comp_data(data):
    return (float(data["t0"]), float(data["D"]), float(data["V"]), np.asarray(data["times"], dtype=float),
            np.asarray(data["C_hat"], dtype=float))


def _one_comp_pymc(data):
    import pymc as pm
    import pytensor.tensor as pt

    t0, D, V, times, C_hat = _one_comp_data(data)
    with pm.Model() as model:
        k_a = pm.HalfCauchy("k_a", 1.0)
        K_m = pm.HalfCauchy("K_m", 1.0)
        V_m = pm.HalfCauchy("V_m", 1.0)
        sigma = pm.HalfCauchy("sigma", 1.0)
        C = _solve_pytensor(_one_comp_rhs, pt.as_tensor(np.float64(0.0)), t0, times, ONE_COMP_STEP,
                            [k_a, K_m, V_m, pt.as_tensor(D), pt.as_tensor(V)])
        pm.LogNormal("C_hat", pt.log(C), sigma, observed=C_hat)
    return model


def _one_comp_numpyro(data):
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    t0, D, V, times, C_hat = _one_comp_data(data)

    def model():
        k_a = numpyro.sample("k_a", dist.HalfCauchy(1.0))
        K_m = numpyro.sample("K_m", dist.HalfCauchy(1.0))
        V_m = numpyro.sample("V_m", dist.HalfCauchy(1.0))
        sigma = numpyro.sample("sigma", dist.HalfCauchy(1.0))
        C = _solve_jax(_one_comp_rhs, jnp.asarray(0.0), t0, times, ONE_COMP_STEP, [k_a, K_m, V_m, D, V])
        numpyro.sample("C_hat", dist.LogNormal(jnp.log(C), sigma).to_event(1), obs=C_hat)

    return model


register(Program("lotka_volterra", "ODE", _lotka_volterra_pymc, _lotka_volterra_numpyro))
register(Program("one_comp_mm_elim_abs", "ODE", _one_comp_pymc, _one_comp_numpyro))
