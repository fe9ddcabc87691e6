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
from bayeszoo.catalogue.posteriordb.build import DB, Repo, draws_to_arrays, reference_or_summary
from bayeszoo.catalogue.posteriordb.check import compare, log_density_pair
from bayeszoo.catalogue.reference import Reference, agreement_limit
from tests.helpers import ROOT

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
        assert not pdb.info(name)["reference_missing"], name
        ref = pdb.reference(name)
        assert ref.trusted, (name, ref.problems)
        assert ref.provenance["source"] == "posteriordb" and ref.provenance["run"]["chains"] == 10
        assert ref.provenance["run"]["draws"] == 1000
        assert set(ref.moments) == set(pdb.info(name)["reference_variables"])
        if ref.fit is None:   # published without its draws: moments from posteriordb's summary statistics
            assert not pdb.info(name)["reference_draws"] and "mean_value" in ref.provenance["moments_from"][0]
            assert all(np.isnan(m["q50"]).all() and (m["mcse_sd"] > 0).all() for m in ref.moments.values())
            continue
        assert pdb.info(name)["reference_draws"]
        assert ref.fit.n_chains * ref.fit.n_draws <= 1000
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


def test_the_reference_published_without_draws_is_posteriordbs_summary_statistics():
    """mcycle_gp-accel_gp's draws file is not in the clone the data were built from: its reference holds
    posteriordb's published means (mean_value/mcycle_gp-accel_gp.json), on the variables' shapes, moments only."""
    ref = pdb.reference("mcycle_gp-accel_gp")
    assert ref.trusted and ref.fit is None and "moments only" in ref.describe()
    assert ref.moments["zgp_1"]["mean"].shape == (40,) and ref.moments["zgp_sigma_1"]["sd"].shape == (20,)
    np.testing.assert_allclose(ref.moments["Intercept"]["mean"], -10.5611108251771, rtol=1e-12)
    np.testing.assert_allclose(ref.moments["zgp_1"]["mean"][:2], [-0.0333361006137775, -0.292617787641776],
                               rtol=1e-12)


def _git_repo(path, files: dict) -> Repo:
    """A git repository at ``path`` holding ``files`` (path -> bytes) in one commit."""
    for name, content in files.items():
        os.makedirs(os.path.dirname(path / name), exist_ok=True)
        (path / name).write_bytes(content)
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "posteriordb"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    return Repo(str(path))


def test_without_its_draws_file_a_reference_is_made_of_posteriordbs_summary_statistics(tmp_path):
    """With the draws file, the reference is the draws'; without it (a partial clone), posteriordb's mean and mean
    square of the same draws and its draws' info file (R-hat, ESS) make the moments: sd = sqrt(E[x^2] - mean^2),
    MCSE of the mean sd / sqrt(bulk ESS), of the sd the normal-theory sd / sqrt(2 ESS), close to the delta-method
    MCSE of the sd that the draws give."""
    rng = np.random.default_rng(3)
    draws = {"mu": 1.0 + 2.0 * rng.standard_normal((10, 1000)),
             "theta": rng.standard_normal((10, 1000, 2)) * [0.5, 3.0] - [4.0, 0.0]}
    columns = {"mu": draws["mu"], "theta[1]": draws["theta"][..., 0], "theta[2]": draws["theta"][..., 1]}
    names = list(columns)
    chains = [{c: columns[c][k].tolist() for c in names} for k in range(10)]
    ess = {c: (float(az.ess(columns[c], method="bulk")), float(az.ess(columns[c], method="tail"))) for c in names}
    base = f"{DB}/reference_posteriors"
    info = {"name": "toy-toy", "inference": {"method": "stan_sampling", "method_arguments": {"chains": 10, "seed": 1}},
            "diagnostics": {"diagnostic_information": {"names": names}, "ndraws": 10000, "nchains": 10,
                            "effective_sample_size_bulk": [ess[c][0] for c in names],
                            "effective_sample_size_tail": [ess[c][1] for c in names],
                            "r_hat": [float(az.rhat(columns[c])) for c in names],
                            "divergent_transitions": [0] * 10}}
    summary = f"{base}/summary_statistics"
    files = {f"{base}/draws/info/toy-toy.info.json": json.dumps(info).encode(),
             f"{summary}/mean_value/mean_value/toy-toy.json": json.dumps(
                 {"names": names, "mean_value": [float(columns[c].mean()) for c in names]}).encode(),
             f"{summary}/mean_squared_value/mean_squared_value/toy-toy.json": json.dumps(
                 {"names": names, "mean_squared_value": [float((columns[c] ** 2).mean()) for c in names]}).encode()}
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr("toy-toy.json", json.dumps(chains))
    with_draws = {**files, f"{base}/draws/draws/toy-toy.json.zip": zipped.getvalue()}

    from_draws, missing = reference_or_summary(_git_repo(tmp_path / "full", with_draws), "toy-toy", {"N": 3})
    assert missing is None and from_draws.fit is not None and from_draws.fit.n_chains == 10
    ref, missing = reference_or_summary(_git_repo(tmp_path / "partial", files), "toy-toy", {"N": 3})
    assert "toy-toy.json.zip" in missing and ref.fit is None and ref.trusted, ref.problems
    assert ref.provenance["run"]["chains"] == 10 and ref.provenance["run"]["draws"] == 1000
    assert ref.provenance["moments_from"][0] == f"{summary}/mean_value/mean_value/toy-toy.json"
    for var in draws:
        m, d = ref.moments[var], from_draws.moments[var]
        assert m["mean"].shape == d["mean"].shape
        np.testing.assert_allclose(m["mean"], d["mean"], rtol=1e-10)
        np.testing.assert_allclose(m["sd"], d["sd"], rtol=1e-3)    # E[x^2] - mean^2 divides by n, not n - 1
        np.testing.assert_allclose(m["mcse_mean"], d["sd"] / np.sqrt(d["ess_bulk"]), rtol=1e-3)
        np.testing.assert_allclose(m["mcse_sd"], d["mcse_sd"], rtol=0.15)   # normal draws: the two estimates meet
        assert np.isnan(m["q05"]).all() and np.isfinite(d["q05"]).all()
    again = Reference.load(ref.save(tmp_path / "ref.nc"))    # a reference without draws saves and loads as one
    assert again.fit is None and again.trusted and again.provenance == {**ref.provenance, "stored_draws": None}
    for var, m in ref.moments.items():
        for stat, values in m.items():
            np.testing.assert_array_equal(again.moments[var][stat], values)


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


@pytest.mark.skipif(not os.path.isdir(POSTERIORDB_CLONE), reason="needs a clone of posteriordb (POSTERIORDB_CLONE)")
@pytest.mark.parametrize("posterior", ["eight_schools-eight_schools_noncentered", "arK-arK"])
def test_posteriordbs_summary_statistics_make_the_moments_of_its_draws(posterior):
    """Where the draws are there too, the moments made of posteriordb's summary statistics are those of the draws
    (mean and sd). The normal-theory MCSE of the sd is the draws' delta-method one for near-normal components
    (arK) and smaller for heavy-tailed ones (eight schools: 0.6 to 0.8 of it for theta, half of it for tau)."""
    summary, ref = reference_or_summary_from_clone(posterior), pdb.reference(posterior)
    for var, m in ref.moments.items():
        np.testing.assert_allclose(summary.moments[var]["mean"], m["mean"], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(summary.moments[var]["sd"], m["sd"], rtol=1e-3)
        ratio = summary.moments[var]["mcse_sd"] / m["mcse_sd"]
        assert np.all((ratio > 0.4) & (ratio < 1.2)), (var, ratio)
        if posterior == "arK-arK":
            np.testing.assert_allclose(ratio, 1.0, rtol=0.2)


def reference_or_summary_from_clone(posterior: str) -> Reference:
    from bayeszoo.catalogue.posteriordb.build import reference_from_summaries

    return reference_from_summaries(Repo(POSTERIORDB_CLONE), posterior)


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


@pytest.mark.slow   # PyTensor compiles the 66-dimensional gradient, JAX runs NumPyro's op by op: about 30 s
def test_accel_gp_gradients_are_finite_where_the_spectral_density_underflows():
    """At the unconstrained origin (both length scales 1) the higher eigenvalues' spectral densities underflow to
    0; the square root of an underflowed density has an infinite derivative, and the gradient was NaN there (its
    value finite), so mean-field VI, which starts at the origin, failed at its first step. Both ports."""
    import jax
    from numpyro.infer.util import potential_energy

    posterior = "mcycle_gp-accel_gp"
    data = pdb.data(posterior)
    pm_model = REGISTERED["accel_gp"].pymc(data)
    origin = {v.name: np.zeros(pm_model.initial_point()[v.name].shape) for v in pm_model.value_vars}
    assert np.isfinite(pm_model.compile_dlogp()(origin)).all()
    numpyro_model = REGISTERED["accel_gp"].numpyro(data)
    zeros = {k.removesuffix("_log__").removesuffix("_interval__"): v for k, v in origin.items()}
    grads = jax.grad(lambda p: potential_energy(numpyro_model, (), {}, p))(zeros)
    assert all(np.isfinite(g).all() for g in grads.values()), grads


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

    page = os.path.join(ROOT, "docs", "suites",
                        "posteriordb.md")
    with open(page) as fh:
        text = fh.read()
    table = text.split(suite.TABLE_START, 1)[1].split(suite.TABLE_END, 1)[0].strip()
    assert table == suite.page_table()
    assert len(table.splitlines()) == 2 + len(pdb.names())


@pytest.mark.parametrize("n, k", [(1, 2), (37, 2), (100, 3)])
def test_the_pymc_forward_algorithm_is_the_numpyro_scan_step_by_step(n, k):
    """The loop-free forward algorithm of the PyMC ports gives each step's conditional log density as the JAX
    scan does, on series of any length (not a power of two, a single step) and with emissions far below exp's
    range (a row at -800: without the scaling every product would underflow to 0)."""
    from bayeszoo.catalogue.posteriordb.hmm import forward_jax, forward_pytensor

    rng = np.random.default_rng(n + k)
    log_emission = rng.normal(-2.0, 3.0, (n, k))
    log_emission[n // 2] -= 800.0
    log_theta = np.log(rng.dirichlet(np.ones(k), size=k))
    ours = forward_pytensor(log_emission, log_theta).eval()
    theirs = np.asarray(forward_jax(log_emission, log_theta))
    assert ours.shape == (n,) and np.isfinite(ours).all()
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("model, posterior", [("hmm_example", "hmm_example-hmm_example"),
                                              ("arma11", "arma-arma11"), ("garch11", "garch-garch11")])
def test_the_pymc_recursions_have_no_scan(model, posterior):
    """PyMC's hmm_example ran its forward algorithm as a pytensor.scan, whose body's ops are called one at a time
    at each of the 100 steps and again in the gradient: PyMC NUTS took ten times longer per gradient there than on
    the loop-free product of the transition matrices it runs now. The linear recursions of arma11 and garch11 are
    convolutions for the same reason."""
    from pytensor.graph.traversal import applys_between
    from pytensor.scan.op import Scan

    pm_model = REGISTERED[model].pymc(pdb.data(posterior))
    ops = {type(node.op) for node in applys_between(pm_model.value_vars, [pm_model.logp()])}
    assert Scan not in ops and ops, ops


@pytest.mark.parametrize("factor", [0.9, -0.7, -1.6, 2.0, 0.0])
def test_the_loop_free_linear_recursion_is_the_loop(factor):
    """x[i] = drive[i] + factor x[i - 1] as a convolution with the powers of factor, for a factor of either sign and
    beyond 1 in size (arma11's -theta at a random point of the log-density check), and its gradient, also at 0
    (arma11's theta at PyMC's starting point, where x ** 0's derivative was NaN)."""
    import pytensor
    import pytensor.tensor as pt
    from bayeszoo.catalogue.posteriordb.timeseries import linear_recursion_pytensor

    rng = np.random.default_rng(7)
    first, drive = 0.3, rng.normal(size=60)
    f = pt.dscalar("factor")
    x = linear_recursion_pytensor(pt.as_tensor(first), pt.as_tensor(drive), f)
    value, grad = pytensor.function([f], [x, pytensor.grad(x.sum(), f)])(factor)
    loop, dloop = [first], [0.0]   # the recursion and its derivative in factor, step by step
    for d in drive[1:]:
        loop.append(d + factor * loop[-1])
        dloop.append(loop[-2] + factor * dloop[-1])
    np.testing.assert_allclose(value, loop, rtol=1e-12)
    np.testing.assert_allclose(grad, sum(dloop), rtol=1e-10)


def test_pymc_nuts_samples_garch11_near_posteriordbs_reference():
    """PyMC NUTS could not start on garch11 ("Initial value of beta1 depends on other random variables": beta1's
    bound 1 - alpha1 made pm.sample's starting points symbolic); beta1 is now sampled as its share of (0, 1 - alpha1).
    A short run lands on the reference, beta1 included (made from the share)."""
    import bayeszoo as bz

    posterior = "garch-garch11"
    fit = bz.fit(pdb.load(posterior, library="pymc"), backend="nuts", draws=150, tune=150, chains=2, seed=1,
                 progress=False)
    post = fit.posterior
    draws = {name: post[name].values for name in ("mu", "alpha0", "alpha1")}
    draws["beta1"] = post["beta1_share"].values * (1 - post["alpha1"].values)
    assert ((draws["beta1"] > 0) & (draws["alpha1"] + draws["beta1"] < 1)).all()
    moments = pdb.reference(posterior).moments
    for name, values in draws.items():
        z = abs(values.mean() - moments[name]["mean"]) / moments[name]["sd"]
        assert z < 1.0, (name, z)
