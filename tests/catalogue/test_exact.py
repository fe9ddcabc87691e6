"""The exact targets: their two declarations have the target's log density, exact draws meet the exact references
under the catalogue's agreement rule and wrong draws do not, and the reference machinery takes MCSE 0."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import multivariate_normal, norm

import bayeszoo as bz
from bayeszoo.catalogue import exact
from bayeszoo.catalogue import reference as rules
from bayeszoo.catalogue.reference import Reference
from bayeszoo.diagnostics import metrics

N_DRAWS = 20_000      # exact draws per check: 4 chains x 5000
QUANTILE_STATS = tuple(rules.QUANTILES)


def _exact_moments(**variables) -> dict:
    """Exact moments of independent normals: name -> (means, sds)."""
    out = {}
    for name, (mean, sd) in variables.items():
        mean, sd = np.asarray(mean, float), np.asarray(sd, float)
        out[name] = {"mean": mean, "sd": sd, **{s: np.zeros_like(mean) for s in rules.STATS if s.startswith("mcse_")}}
        for key, prob in rules.QUANTILES.items():
            out[name][key] = mean + sd * norm.ppf(prob)
        for stat in ("rhat", "ess_bulk", "ess_tail"):
            out[name][stat] = np.full_like(mean, np.nan)
    return out


EXACT_RUN = {"engine": "closed form", "kind": "exact"}


# ------------------------------------------------------------------------------ the reference machinery
def test_exact_moments_make_a_trusted_reference():
    ref = Reference(name="two normals", moments=_exact_moments(a=([0.0, 1.0], [1.0, 2.0])),
                    provenance={"source": "exact", "run": EXACT_RUN})
    assert ref.trusted, ref.problems          # MCSE 0 is exact, not frozen; no R-hat or ESS to judge
    assert "exact moments" in ref.describe() and "NOT TRUSTED" not in ref.describe()
    assert metrics.reference_noise_floor(ref, ["a"]) == 0.0


@pytest.mark.parametrize("stat, value, words", [("mcse_mean", 0.01, "Monte-Carlo error other than 0"),
                                                ("sd", 0.0, "sd 0"), ("mean", np.nan, "not finite")])
def test_broken_exact_moments_are_refused(stat, value, words):
    moments = _exact_moments(a=([0.0, 1.0], [1.0, 2.0]))
    moments["a"][stat][1] = value
    ref = Reference(name="broken", moments=moments, provenance={"source": "exact", "run": EXACT_RUN})
    assert not ref.trusted and len(ref.problems) == 1 and words in ref.problems[0], ref.problems


def test_agreement_with_exact_moments():
    a = _exact_moments(x=([0.0, 1.0, 2.0], [1.0, 1.0, 3.0]))
    same = rules.agreement(a, _exact_moments(x=([0.0, 1.0, 2.0], [1.0, 1.0, 3.0])))
    assert same["z_max"] == 0.0 and same["n_tests"] == 6       # equal exact values are tested, and agree
    other = rules.agreement(a, _exact_moments(x=([0.0, 1.0, 2.5], [1.0, 1.0, 3.0])))
    assert other["z_max"] == math.inf and other["where"] == "mean of x[2]" and other["n_tests"] == 6
    # a run against exact moments: z is the run's own error in its own MCSEs
    run = _exact_moments(x=([0.1, 1.0, 2.0], [1.0, 1.0, 3.0]))
    run["x"]["mcse_mean"][:] = 0.05
    run["x"]["mcse_sd"][:] = 0.05
    assert rules.agreement(run, a)["z_max"] == pytest.approx(2.0)


def test_an_exact_reference_keeps_its_zero_mcse_in_a_file(tmp_path):
    ref = exact.reference("mixture")
    back = Reference.load(ref.save(tmp_path / "mixture.nc"))
    assert back.trusted, back.problems
    assert back.provenance["source"] == "exact" and back.provenance["run"]["kind"] == "exact"
    for stat in ("mean", "sd", "q05", "q95", "mcse_mean", "mcse_sd"):
        np.testing.assert_allclose(back.moments["x"][stat], ref.moments["x"][stat], rtol=1e-15)
    assert back.fit.n_chains * back.fit.n_draws == exact.REFERENCE_DRAWS


# ------------------------------------------------------------------------------------------ the suite
def test_names_info_and_the_targets_shapes():
    assert exact.names() == ["funnel", "ill_conditioned_gaussian", "correlated_gaussian", "banana", "mixture"]
    assert {n: exact.info(n)["dimension"] for n in exact.names()} == {
        "funnel": 10, "ill_conditioned_gaussian": 100, "correlated_gaussian": 10, "banana": 2, "mixture": 1}
    assert exact.info("funnel")["kind"] == "funnel" and "Neal" in exact.info("funnel")["description"]
    cov = exact.target("ill_conditioned_gaussian").cov
    eigenvalues = np.linalg.eigvalsh(cov)
    assert eigenvalues.max() / eigenvalues.min() == pytest.approx(1e4, rel=1e-3)
    sds = np.sqrt(np.diag(cov))
    assert sds.max() / sds.min() < 3        # rotated: a diagonal mass matrix cannot undo it
    corr = exact.target("correlated_gaussian").cov
    np.testing.assert_allclose(corr[~np.eye(10, dtype=bool)], 0.99)
    with pytest.raises(ValueError, match="'funnel'"):
        exact.info("funel")
    with pytest.raises(ValueError, match="library must be one of"):
        exact.load("mixture", library="stan")


def test_exact_moments_in_closed_form():
    ref = {n: exact.reference(n).moments for n in exact.names()}
    assert ref["funnel"]["x"]["sd"] == pytest.approx(np.full(9, math.exp(9 / 4)), rel=1e-15)
    assert ref["funnel"]["v"]["sd"] == 3.0
    assert ref["banana"]["x"]["sd"] == pytest.approx([10.0, math.sqrt(201.0)], rel=1e-15)
    assert ref["mixture"]["x"]["mean"] == pytest.approx(1.6) and ref["mixture"]["x"]["sd"] == pytest.approx(3.8)
    for moments in ref.values():
        for m in moments.values():
            assert np.all(m["q05"] < m["q50"]) and np.all(m["q50"] < m["q95"])
            assert all(np.all(m[s] == 0) for s in rules.STATS if s.startswith("mcse_"))


def test_both_libraries_declare_the_same_variables():
    pymc_model, numpyro_model = exact.load("funnel", "pymc"), exact.load("funnel", "numpyro")
    assert pymc_model.name == numpyro_model.name == "funnel"
    assert pymc_model.var_dims() == numpyro_model.var_dims() == {"v": (), "x": ("x_dim_0",)}
    ref = exact.reference("funnel")
    assert not ref.matches(pymc_model, None) and not ref.matches(numpyro_model, None)
    assert {k: v.dims[2:] for k, v in ref.fit.posterior.items()} == pymc_model.var_dims()


def _scipy_log_density(t, values: dict) -> float:
    """The target's log density written from its definition with scipy, independently of both declarations."""
    if isinstance(t, exact.Funnel):
        return norm.logpdf(values["v"], 0, t.scale) + norm.logpdf(values["x"], 0, np.exp(values["v"] / 2)).sum()
    x = values["x"]
    if isinstance(t, exact.Gaussian):
        return multivariate_normal.logpdf(x, cov=t.cov)
    if isinstance(t, exact.Banana):
        return norm.logpdf(x[0], 0, t.scale) + norm.logpdf(x[1] + t.b * (x[0] ** 2 - t.scale ** 2))
    return logsumexp(np.log(t.weights) + norm.logpdf(x, t.means, t.sds))


@pytest.mark.parametrize("name", exact.names())
def test_pymc_and_numpyro_log_densities_agree(name):
    """At random points (exact draws spread 3x wider, so the tails are visited): the PyMC and NumPyro log
    densities on the unconstrained space and their gradients agree to 1e-8 relative up to one constant, and both
    are the target's (scipy) up to a constant."""
    import jax
    import jax.numpy as jnp
    from numpyro.infer.util import potential_energy
    from pymc.sampling.jax import get_jaxified_logp

    t = exact.target(name)
    pm_model = t.pymc_model()
    value_names = [v.name for v in pm_model.value_vars]
    assert value_names == list(t.shapes)            # no transforms: every variable lives on the real line
    logp = get_jaxified_logp(pm_model)
    fn, args = t.numpyro_call()
    draws = t.draw(np.random.default_rng(7), 12)
    points = {k: jnp.asarray(3.0 * v) for k, v in draws.items()}
    pymc_fn = jax.jit(jax.vmap(jax.value_and_grad(lambda p: logp([p[n] for n in value_names]))))
    numpyro_fn = jax.jit(jax.vmap(jax.value_and_grad(lambda p: -potential_energy(fn, args, {}, p))))
    (lp_a, grad_a), (lp_b, grad_b) = pymc_fn(points), numpyro_fn(points)
    lp_a, lp_b = np.asarray(lp_a), np.asarray(lp_b)
    lp_c = np.array([_scipy_log_density(t, {k: np.asarray(v[i]) for k, v in points.items()}) for i in range(12)])
    assert np.all(np.isfinite(lp_a)) and np.ptp(lp_a) > 1.0          # the points are not all alike
    for other in (lp_b, lp_c):
        gap = (lp_a - lp_a[0]) - (other - other[0])
        assert np.max(np.abs(gap)) <= 1e-8 * np.max(np.abs(lp_a)), (name, gap)
    for key in value_names:
        a, b = np.asarray(grad_a[key]), np.asarray(grad_b[key])
        assert np.max(np.abs(a - b)) <= 1e-8 * np.max(np.abs(a)), (name, key)


# ------------------------------------------------------------------------------- exact draws vs references
def _draw_moments(t, seed: int) -> dict:
    fit = exact.draws_fit(t, N_DRAWS, seed)
    return rules.summarize(fit.posterior, list(t.shapes))


def _quantile_z(mine: dict, ref: dict) -> float:
    """The largest |quantile - exact| / its MCSE over every component and the three quantiles."""
    return max(float(np.max(np.abs(mine[v][q] - ref[v][q]) / mine[v][f"mcse_{q}"]))
               for v in ref for q in QUANTILE_STATS)


@pytest.mark.parametrize("name", exact.names())
def test_exact_draws_meet_the_reference(name):
    ref = exact.reference(name)
    mine = _draw_moments(exact.target(name), seed=11)
    judged = 2 * exact.info(name)["dimension"]
    if name == "funnel":
        # the sd of x_i is left out: half of Var x_i = E e^v comes from v > 9 (3 sds out) and its MCSE from v near
        # 18 (6 sds), so at any feasible size the sample sd is skewed low and its own MCSE far too small; exact
        # draws fail the rule on it about 4 times in 10 (docs/suites/exact.md, "The funnel's sd of x")
        mine["x"]["sd"] = np.full(9, np.nan)
        judged -= 9
    agree = rules.agreement(mine, ref.moments)
    assert agree["n_tests"] == judged
    assert agree["z_max"] < agree["z_limit"], agree
    # the quantiles found by quadrature and root-finding, in the draws' own quantile MCSEs, same limit
    n_quantiles = len(QUANTILE_STATS) * exact.info(name)["dimension"]
    assert _quantile_z(mine, ref.moments) < rules.agreement_limit(n_quantiles)


WRONG = {
    "funnel": exact.Funnel(scale=2.5),                            # v's scale 2.5, not 3
    "ill_conditioned_gaussian": exact.Gaussian(exact.ill_conditioned_covariance(seed=7), "another rotation"),
    "correlated_gaussian": exact.Gaussian(1.1 ** 2 * exact.equicorrelated_covariance(), "10% too wide"),
    "banana": exact.Banana(b=0.08),                               # less twisted
    "mixture": exact.Mixture(weights=(0.5, 0.5)),                 # the weights a sampler stuck per chain finds
}


@pytest.mark.parametrize("name", exact.names())
def test_draws_from_a_wrong_distribution_are_detected(name):
    agree = rules.agreement(_draw_moments(WRONG[name], seed=11), exact.reference(name).moments)
    assert agree["z_max"] > agree["z_limit"], agree


# ----------------------------------------------------------------------------------------- a sampler
def test_nuts_on_the_correlated_gaussian_is_measured_against_the_exact_reference():
    model = exact.load("correlated_gaussian", "pymc")
    ref = exact.reference("correlated_gaussian")
    fit = bz.fit(model, backend="nuts", draws=300, tune=300, chains=2, seed=3, progress=False)
    names = list(model.var_dims())
    ess = metrics.sampling_diagnostics(fit, names)["ess_bulk_min"]
    row = metrics.accuracy(fit, ref, names, ess)
    assert row["reference_trusted"] is True
    assert np.isfinite(row["mean_err"]) and np.isfinite(row["sd_err"])
    assert 0 < row["ess_ref"] <= ess
    # 600 draws of unit-sd components, 10 of them: the worst mean is well within one sd of 0
    assert row["mean_err"] < 0.5
