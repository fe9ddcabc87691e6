"""A radon-style hierarchical model (Gelman and Hill's varying intercepts) on synthetic data, declared in PyMC and
in NumPyro: log radon = a[county] + b * floor + noise, with counties of very different sizes (1 to 30 houses), so
that the small counties' intercepts lean on the hierarchy. ``centred=False`` (the default) writes
a = mu_a + sigma_a * z with z ~ Normal(0, 1); ``centred=True`` draws a ~ Normal(mu_a, sigma_a) directly."""
from __future__ import annotations

import numpy as np

N_COUNTIES = 12


def radon_data(seed: int = 0, n_counties: int = N_COUNTIES):
    """(county index, floor, log radon) of houses in ``n_counties`` counties of 1 to 30 houses."""
    rng = np.random.default_rng(seed)
    sizes = np.concatenate([[1, 2, 30], rng.integers(1, 31, n_counties - 3)])
    county = np.repeat(np.arange(n_counties), sizes)
    floor = rng.integers(0, 2, county.size).astype(float)
    intercepts = 1.4 + 0.35 * rng.standard_normal(n_counties)
    y = intercepts[county] - 0.6 * floor + 0.7 * rng.standard_normal(county.size)
    return county, floor, y


def pymc_radon(county, floor, y, *, mu_sd: float = 5.0, centred: bool = False):
    import pymc as pm

    with pm.Model(coords={"county": [f"county {k}" for k in range(int(county.max()) + 1)]}) as model:
        mu_a = pm.Normal("mu_a", 0.0, mu_sd)
        sigma_a = pm.HalfNormal("sigma_a", 1.0)
        if centred:
            a = pm.Normal("a", mu_a, sigma_a, dims="county")
        else:
            z = pm.Normal("z", 0.0, 1.0, dims="county")
            a = pm.Deterministic("a", mu_a + sigma_a * z, dims="county")
        b = pm.Normal("b", 0.0, 1.0)
        sigma_y = pm.HalfNormal("sigma_y", 1.0)
        pm.Normal("log_radon", a[county] + b * floor, sigma_y, observed=y)
    return model


def numpyro_radon(county, floor, y, mu_sd: float = 5.0, centred: bool = False):
    import numpyro
    import numpyro.distributions as dist

    mu_a = numpyro.sample("mu_a", dist.Normal(0.0, mu_sd))
    sigma_a = numpyro.sample("sigma_a", dist.HalfNormal(1.0))
    with numpyro.plate("county", int(county.max()) + 1):
        if centred:
            a = numpyro.sample("a", dist.Normal(mu_a, sigma_a))
        else:
            a = mu_a + sigma_a * numpyro.sample("z", dist.Normal(0.0, 1.0))
    b = numpyro.sample("b", dist.Normal(0.0, 1.0))
    sigma_y = numpyro.sample("sigma_y", dist.HalfNormal(1.0))
    with numpyro.plate("house", len(y)):
        numpyro.sample("log_radon", dist.Normal(a[county] + b * floor, sigma_y), obs=y)
