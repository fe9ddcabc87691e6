"""posteriordb in the zoo: data and references shipped, and each Stan program's PyMC and NumPyro models agree."""
from __future__ import annotations

import io
import json
import os
import subprocess
import zipfile

import arviz as az
import numpy as np
import pytest

from bayeszoo.catalogue import posteriordb as pdb
from bayeszoo.catalogue.posteriordb import programs
from bayeszoo.catalogue.posteriordb._build import DB, draws_to_arrays
from bayeszoo.catalogue.posteriordb.check import compare, log_density_pair
from bayeszoo.catalogue.reference import agreement_limit

#: a clone of posteriordb (bare is fine), to check the shipped references against its draws; skipped without one
POSTERIORDB_CLONE = os.environ.get("POSTERIORDB_CLONE", "")
#: a hierarchical, a regression and a time-series program stay in the default suite (each compiles its own
#: log density in both libraries); the others run with the slow tests
FAST = {"eight_schools_noncentered", "blr", "arK"}
REGISTERED = programs.load_all()


def _first_posterior(model: str) -> str:
    return next(p for p in pdb.names() if pdb.info(p)["model"] == model)


def test_the_suite_is_posteriordbs_46_posteriors_with_reference_draws():
    names = pdb.names()
    assert len(names) == 46
    assert "eight_schools-eight_schools_noncentered" in names
    assert {pdb.info(n)["data"] for n in names if n.startswith("nes")} == {f"nes{y}" for y in range(1972, 2001, 4)}


def test_an_unknown_name_is_refused_with_the_close_names():
    with pytest.raises(ValueError, match="eight_schools-eight_schools_noncentered"):
        pdb.data("eight_schools-eight_schools_noncenterd")
    with pytest.raises(ValueError, match="names()"):
        pdb.reference("no such posterior")
    with pytest.raises(ValueError, match="library must be one of"):
        pdb.load("eight_schools-eight_schools_noncentered", library="stan")


def test_every_posterior_has_a_program_or_a_listed_exception():
    """Each Stan model is planned in a module or is an exception with its reason; every model planned in a
    module that exists is registered by it."""
    models = {pdb.info(p)["model"] for p in pdb.names()}
    unplanned = models - set(programs.MODULE_OF) - set(programs.EXCEPTIONS)
    assert not unplanned
    assert all(isinstance(r, str) and len(r) > 20 for r in programs.EXCEPTIONS.values())
    here = os.path.dirname(programs.__file__)
    written = {m for m, module in programs.MODULE_OF.items() if os.path.exists(os.path.join(here, f"{module}.py"))}
    missing = sorted(m for m in written - set(programs.EXCEPTIONS) if m not in REGISTERED)
    assert not missing, f"planned in a module that exists but not registered: {missing}"
    assert set(REGISTERED) <= models   # nothing registered that is not a posteriordb model of the suite


def test_data_are_posteriordbs_json_with_arrays_and_fresh_on_each_call():
    data = pdb.data("eight_schools-eight_schools_noncentered")
    assert data["J"] == 8 and data["y"].shape == (8,) and data["sigma"].dtype.kind in "if"
    data["y"][0] = 1e6
    assert pdb.data("eight_schools-eight_schools_noncentered")["y"][0] == 28


def test_loaded_models_are_named_after_the_posterior_with_stans_parameters():
    name = "eight_schools-eight_schools_noncentered"
    for library in pdb.LIBRARIES:
        model = pdb.load(name, library=library)
        assert model.name == name
        assert sorted(model.spec()["variables"]) == ["mu", "tau", "theta_trans"]


def test_the_draws_of_a_stan_array_become_one_variable_in_stans_index_order():
    chains = [{"a": [1.0, 2.0], "x[1,1]": [0.0, 0.0], "x[2,1]": [1.0, 1.0], "x[1,2]": [2.0, 2.0],
               "x[2,2]": [3.0, 3.0], "x[1,3]": [4.0, 4.0], "x[2,3]": [5.0, 5.0]}] * 3
    arrays = draws_to_arrays(chains)
    assert arrays["a"].shape == (3, 2) and arrays["x"].shape == (3, 2, 2, 3)
    np.testing.assert_array_equal(arrays["x"][0, 0], [[0, 2, 4], [1, 3, 5]])


def _posteriordb_draws(posterior: str) -> dict:
    blob = subprocess.run(["git", "-C", POSTERIORDB_CLONE, "show",
                           f"HEAD:{DB}/reference_posteriors/draws/draws/{posterior}.json.zip"],
                          capture_output=True, check=True).stdout
    with zipfile.ZipFile(io.BytesIO(blob)) as archive:
        return draws_to_arrays(json.loads(archive.read(archive.namelist()[0])))


def _reference_checks(names: list[str]) -> np.ndarray:
    """Check each posterior's shipped reference; return, per component, |mean of the kept draws - the moments'
    mean| in the kept draws' MCSE (the moments come from 10 x 1000 draws, the kept ones are a thinned subset)."""
    checks = []
    for name in names:
        if pdb.info(name)["reference_missing"]:
            with pytest.raises(ValueError, match="complete clone of posteriordb"):
                pdb.reference(name)
            continue
        ref = pdb.reference(name)
        assert ref.trusted, (name, ref.problems)
        assert ref.provenance["source"] == "posteriordb" and ref.provenance["run"]["chains"] == 10
        assert ref.provenance["run"]["draws"] == 1000
        assert ref.fit.n_chains * ref.fit.n_draws <= 1000
        assert set(ref.moments) == set(pdb.info(name)["reference_variables"])
        kept = ref.fit.posterior.astype("float64")
        mcse = az.mcse(kept, method="mean")
        for var, m in ref.moments.items():
            z = np.abs(kept[var].mean(("chain", "draw")).values - m["mean"]) / mcse[var].values
            checks.append(np.ravel(z))
    return np.concatenate(checks)


def test_shipped_references_hold_posteriordbs_draws_and_pass_the_rules():
    z = _reference_checks(["eight_schools-eight_schools_noncentered", "diamonds-diamonds", "sblri-blr",
                           "bball_drive_event_0-hmm_drive_0", "mcycle_gp-accel_gp"])
    assert z.max() < agreement_limit(z.size)   # Bonferroni over every component checked


@pytest.mark.slow
def test_every_shipped_reference_holds_posteriordbs_draws_and_passes_the_rules():
    z = _reference_checks(pdb.names())
    assert z.max() < agreement_limit(z.size)


@pytest.mark.skipif(not os.path.isdir(POSTERIORDB_CLONE), reason="needs a clone of posteriordb (POSTERIORDB_CLONE)")
@pytest.mark.parametrize("posterior", ["eight_schools-eight_schools_noncentered", "diamonds-diamonds"])
def test_reference_moments_are_the_means_of_posteriordbs_draws(posterior):
    draws, ref = _posteriordb_draws(posterior), pdb.reference(posterior)
    for var, values in draws.items():
        np.testing.assert_allclose(ref.moments[var]["mean"], values.mean(axis=(0, 1)), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(ref.moments[var]["sd"], values.std(axis=(0, 1), ddof=1), rtol=1e-12)


@pytest.mark.parametrize("model", [pytest.param(m, marks=() if m in FAST else pytest.mark.slow)
                                   for m in sorted(REGISTERED)])
def test_pymc_and_numpyro_log_densities_agree(model):
    """On PyMC's unconstrained space (Jacobians included), at random points: log densities equal up to one
    constant and gradients equal, both to 1e-8 relative."""
    posterior = _first_posterior(model)
    prog, data = REGISTERED[model], pdb.data(posterior)
    pair = log_density_pair(prog.pymc(data), prog.numpyro(data))
    result = compare(pair, n_points=3, seed=sum(map(ord, model)))
    assert result["finite"], result
    assert result["logp_rel_error"] < 1e-8, result
    assert result["grad_rel_error"] < 1e-8, result


def test_a_wrong_prior_is_caught_by_the_log_density_check():
    """The check fails when one library's prior differs from the other's (tau ~ cauchy(0, 5) against (0, 4))."""
    import numpyro
    import numpyro.distributions as dist

    posterior = "eight_schools-eight_schools_noncentered"
    data = pdb.data(posterior)
    right = REGISTERED["eight_schools_noncentered"].numpyro(data)

    def wrong():
        theta_trans = numpyro.sample("theta_trans", dist.Normal(0.0, 1.0).expand([8]))
        mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
        tau = numpyro.sample("tau", dist.HalfCauchy(4.0))
        numpyro.sample("y", dist.Normal(theta_trans * tau + mu, data["sigma"]), obs=data["y"])

    pm_model = REGISTERED["eight_schools_noncentered"].pymc(data)
    assert compare(log_density_pair(pm_model, right))["logp_rel_error"] < 1e-8
    assert compare(log_density_pair(pm_model, wrong))["logp_rel_error"] > 1e-6


def test_the_suite_page_lists_every_posterior_as_the_shipped_results_say():
    """docs/suites/posteriordb.md carries the table that the shipped cross-checks make (rewritten by
    benchmarks/posteriordb_crosscheck.py), one row per posterior."""
    from bayeszoo.catalogue.posteriordb import suite

    page = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "suites",
                        "posteriordb.md")
    with open(page) as fh:
        text = fh.read()
    table = text.split(suite.TABLE_START, 1)[1].split(suite.TABLE_END, 1)[0].strip()
    assert table == suite.page_table()
    assert len(table.splitlines()) == 2 + len(pdb.names())
