"""bz.catalogue.build_reference: a trusted reference for any model from two engines, or a ValueError that says
which rules broke, by how much, and what to try; saved references in bz.compare."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import time

import numpy as np
import pytest
from tests.helpers.scaled_gibbs import kernel as scaled_kernel
from tests.helpers.scaled_gibbs import registered

import bayeszoo as bz
from bayeszoo import catalogue, registry
from bayeszoo.catalogue import Engine, Reference
from bayeszoo.catalogue import reference as rules
from bayeszoo.catalogue.reference import UntrustedReference
from bayeszoo.checks import Interval
from bayeszoo.diagnostics.report import reference_banner
from bayeszoo.inference import chains as driver
from bayeszoo.reference_builder import advice, default_engines

QUIET = dict(progress=False)


@pytest.fixture(scope="module")
def problem():
    """Five points, the RVM under a proper prior: both Gibbs samplers mix at once on it."""
    X = np.linspace(-1.0, 1.0, 5)[:, None]
    data = bz.datasets.Dataset(X=X, y=np.array([0.1, -0.4, 0.3, 0.8, 0.2]), name="five", meta={"task": "regression"})
    return bz.models.RVM(width=0.7, a=3.0, b=2.0, c=4.0, d=2.0), data


@pytest.fixture(scope="module")
def built(problem, tmp_path_factory):
    """The reference of two independent Gibbs samplers (the package's and the tests' own), and its file."""
    model, data = problem
    with registered("gibbs_own", 1.0):
        ref = bz.catalogue.build_reference(model, data, ("gibbs", "gibbs_own"), draws=1000, tune=200, seed=3, **QUIET)
    return ref, ref.save(tmp_path_factory.mktemp("ref") / "five.nc")


def test_two_engines_that_agree_make_a_trusted_reference(built, problem):
    ref, path = built
    model, data = problem
    assert ref.trusted and ref.problems == []
    prov = ref.provenance
    assert prov["source"] == "engines" and prov["cross_checked"] and prov["data_name"] == "five"
    assert (prov["run"]["engine"], prov["crosscheck"]["run"]["engine"]) == ("gibbs", "gibbs_own")
    assert (prov["run"]["seed"], prov["crosscheck"]["run"]["seed"]) == (3, 4)          # seed, then seed + 1
    for part in (prov, prov["crosscheck"]):
        assert part["run"]["chains"] == 4 and part["run"]["draws"] == 1000
        assert part["diagnostics"]["rhat_max"] < rules.RHAT_MAX
        assert min(part["diagnostics"]["ess_bulk_min"], part["diagnostics"]["ess_tail_min"]) >= rules.ESS_MIN
    agree = prov["crosscheck"]["agreement"]
    assert agree["z_max"] < agree["z_limit"] and agree["n_tests"] == 2 * (2 * model.n_basis(data) + 1)
    # the two summaries are of one posterior: every mean within 5 combined MCSEs of the other's
    for name, m in ref.moments.items():
        c = ref.crosscheck[name]
        assert np.all(np.abs(m["mean"] - c["mean"]) < 5 * np.hypot(m["mcse_mean"], c["mcse_mean"])), name
    assert "gibbs_own" not in bz.backends(model)          # the test engine is gone again


def test_a_saved_reference_is_read_back_and_used_by_compare(built, problem):
    ref, path = built
    model, data = problem
    again = Reference.load(path)
    assert again.trusted and again.provenance["source"] == "engines"
    stored = again.provenance["stored_draws"]
    assert again.provenance == json.loads(json.dumps({**ref.provenance, "stored_draws": stored}))
    for name in ref.moments:
        np.testing.assert_array_equal(again.crosscheck[name]["mean"], ref.crosscheck[name]["mean"])
    cmp = bz.compare(model, data, backends=["vb"], reference=path, draws=200, chains=2, **QUIET)
    assert cmp.reference.trusted and cmp.reference.name == "gibbs + gibbs_own"
    row = cmp.table().iloc[0]
    assert bool(row["reference_trusted"]) and 0 < row["mean_err"] < 0.3      # vb: within a third of an sd
    # the two-engine rule is kept on reading: a file whose second engine was dropped is not trusted
    assert any("no second engine" in p for p in rules.validate(again.moments, again.provenance, None))


def test_compare_refuses_a_reference_of_another_problem_before_anything_runs(built, problem, fakes, tmp_path):
    ref, path = built
    model, data = problem
    log = tmp_path / "calls.log"
    other = bz.datasets.Dataset(X=data.X, y=data.y + 0.1, name="five", meta={"task": "regression"})
    with pytest.raises(ValueError, match=r"made for other data \(other values of X or y"):
        bz.compare(model, other, backends=["fake_ok"], reference=path, options={"fake_ok": {"log": str(log)}},
                   **QUIET)
    with pytest.raises(ValueError, match=r"made for another model \(d=1.0 here, 2.0 in the reference\)"):
        bz.compare(bz.models.RVM(width=0.7, a=3.0, b=2.0, c=4.0, d=1.0), data, backends=["fake_ok"],
                   reference=ref, options={"fake_ok": {"log": str(log)}}, **QUIET)
    with pytest.raises(ValueError, match="does not exist"):
        bz.compare(model, data, backends=["fake_ok"], reference=tmp_path / "missing.nc", **QUIET)
    assert not log.exists()


def test_a_saved_reference_is_matched_by_the_data_not_their_name(built, problem):
    ref, path = built
    model, data = problem
    saved = Reference.load(path)
    renamed = bz.datasets.Dataset(X=data.X, y=data.y, name="the same five points", meta={"task": "regression"})
    assert renamed.fingerprint() != data.fingerprint() and saved.matches(model, renamed) == []
    moved = bz.datasets.Dataset(X=data.X, y=data.y + 0.1, name="five", meta={"task": "regression"})
    assert saved.matches(model, moved) == ["data (other values of X or y, or another task, than those of 'five')"]
    assert saved.matches(bz.models.RVM(width=0.7, a=3.0, b=2.0, c=4.0, d=1.0), data) == [
        "model (d=1.0 here, 2.0 in the reference)"]


def test_broken_rules_are_listed_with_their_numbers_and_what_to_try(problem, fakes):
    model, data = problem
    with pytest.raises(UntrustedReference) as caught:
        bz.catalogue.build_reference(model, data, ("gibbs", ("fake_ok", {})), draws=60, tune=20, chains=2, **QUIET)
    ref, text = caught.value.reference, str(caught.value)
    assert isinstance(caught.value, ValueError) and not ref.trusted
    for problem_ in ref.problems:
        assert f"\n  - {problem_}" in text
    diag = ref.provenance["diagnostics"]
    assert diag["ess_bulk_min"] < rules.ESS_MIN and f"bulk ESS {diag['ess_bulk_min']:.3g}" in text
    M = ref.moments["log_alpha"]["mean"].size                           # all point-estimated by fake_ok
    assert f"second engine fake_ok: {M} component(s) never move" in text
    # what to try: the draws that bring ESS to 400 and MCSE below 0.05 sd, a quarter to spare, in hundreds
    growth = 1.25 * max(rules.ESS_MIN / min(diag["ess_bulk_min"], diag["ess_tail_min"]),
                        (diag["mcse_over_sd_max"] / rules.MCSE_MAX) ** 2)
    assert f"more draws for gibbs: its smallest bulk / tail ESS is {diag['ess_bulk_min']:.0f}" in text
    assert f"about draws={int(np.ceil(60 * growth / 100) * 100)} should do" in text
    assert "fake_ok barely moves" in text                                 # its AR(1) draws: far too few
    assert "the engines disagree (mean of log_beta" in text and "mend the runs' own problems first" in text
    assert "bz.sbc" not in text                                           # not while the runs fail their checks
    assert text.endswith(model.reference_advice)


@pytest.mark.parametrize("noise", [0.0, 1e-17, 4e-16])
def test_a_constant_component_never_moves_whatever_the_rounding_of_its_sd(noise):
    """The sd of a constant column is 0 on one CPU and a few 1e-17 of its mean on another: the rule must not care."""
    moving = {"mean": np.array([1.0, 0.0]), "sd": np.array([0.5, 2.0]), "mcse_mean": np.array([0.01, 0.04]),
              "rhat": np.array([1.0, 1.0]), "ess_bulk": np.array([900.0, 900.0]), "ess_tail": np.array([900.0, 900.0])}
    frozen = {"mean": np.array([-2.3]), "sd": np.array([noise * 2.3]), "mcse_mean": np.array([noise]),
              "rhat": np.array([np.nan]), "ess_bulk": np.array([np.nan]), "ess_tail": np.array([np.nan])}
    run = {"engine": "e", "kind": "mcmc", "chains": 2}
    assert rules.check_run({"w": moving, "log_alpha": frozen}, run) == [
        "e: 1 component(s) never move (a stuck sampler or a point estimate)"]
    assert rules.check_run({"w": moving}, run) == []
    assert list(rules.moving(np.array([1e6, 0.0, 3.0]), np.array([1e-3, 1e-300, 3e-16]))) == [True, True, False]


def test_engines_that_disagree_point_to_sbc(problem):
    model, data = problem
    with registered("gibbs_wide", 2.0), pytest.raises(UntrustedReference) as caught:
        bz.catalogue.build_reference(model, data, ("gibbs", "gibbs_wide"), draws=1000, tune=200, **QUIET)
    ref = caught.value.reference
    assert [p for p in ref.problems if "engines disagree" in p] == ref.problems     # each run passes its own checks
    agree = ref.provenance["crosscheck"]["agreement"]
    assert agree["z_max"] > 3 * agree["z_limit"] and agree["where"].startswith("sd of ")
    assert agree["b"] > 1.2 * agree["a"]                        # the doubled variance: a wider sd
    assert "bz.sbc(model, backend, data)" in str(caught.value)


def test_divergences_suggest_a_higher_target_acceptance(built, problem):
    ref, _ = built
    model, data = problem
    engines = (Engine("numpyro", 500, 500, 4, {"target_accept": 0.9}), Engine("nuts", 500, 500, 4))
    prov = json.loads(json.dumps(ref.provenance))
    prov["run"]["divergences"] = 7
    prov["crosscheck"]["run"]["divergences"] = 2
    diverged = Reference(name="x", moments=ref.moments, provenance=prov, crosscheck=ref.crosscheck)
    tips = advice(diverged, engines, model, data)
    assert any(t.startswith("numpyro diverged 7 times: a higher target acceptance, ('numpyro', "
                            "{'target_accept': 0.95})") for t in tips), tips
    assert any(t.startswith("nuts diverged 2 times: a higher target acceptance, ('nuts', {'target_accept': 0.95})")
               for t in tips), tips      # PyMC's nuts declares 0.9 as its default


def test_engines_are_checked_before_anything_runs(problem, monkeypatch):
    model, data = problem
    spec = registry.get(model, "gibbs")
    monkeypatch.setitem(registry._FAMILY, ("rvm", "gibbs"), dataclasses.replace(spec, run=_must_not_run))
    build = bz.catalogue.build_reference
    with pytest.raises(ValueError, match="'vb' is an approximation"):
        build(model, data, ("gibbs", "vb"), **QUIET)
    with pytest.raises(ValueError, match="both 'gibbs'"):
        build(model, data, ("gibbs", ("gibbs", {"thin": 2})), **QUIET)
    with pytest.raises(ValueError, match="engines must be two backends"):
        build(model, data, ("gibbs",), **QUIET)
    with pytest.raises(ValueError, match="engines must be two backends"):
        build(model, data, "gibbs", **QUIET)
    with pytest.raises(ValueError, match="option 'target_accept' must be"):
        build(model, data, ("gibbs", ("numpyro", {"target_accept": 1.5})), **QUIET)
    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        build(model, data, ("gibbs", "nope"), **QUIET)
    with pytest.raises(ValueError, match="R-hat needs two or more"):
        build(model, data, ("gibbs", "numpyro"), chains=1, **QUIET)
    with pytest.raises(ValueError, match="draws must be an integer >= 1"):
        build(model, data, ("gibbs", "numpyro"), draws=0, **QUIET)
    with pytest.raises(ValueError, match="seed must be None or an integer"):
        build(model, data, ("gibbs", "numpyro"), seed=-1, **QUIET)


def _must_not_run(*args, **kwargs):
    raise AssertionError("a backend ran although the engines were refused")


def test_the_default_engines_are_nuts_in_pymc_and_in_numpyro(problem, monkeypatch):
    model, _ = problem
    assert default_engines(model) == ("nuts", "numpyro")
    # without a PyMC declaration: NUTS in NumPyro, then BlackJAX's NUTS on the same declaration
    numpyro_only = bz.models.RVM(width=0.7, a=3.0, b=2.0, c=4.0, d=2.0)
    monkeypatch.setattr(numpyro_only, "declaration_problem", lambda library: "no PyMC" if library == "pymc" else None)
    assert default_engines(numpyro_only) == ("numpyro", "blackjax_nuts")
    with pytest.raises(ValueError, match=r"ImageRVM has 0 MCMC backend\(s\) \(none\) of the two a reference needs"):
        default_engines(bz.models.ImageRVM())     # the thesis's improper priors: only its type-II backend runs


def test_the_catalogue_builder_calls_the_same_function(built, monkeypatch):
    from bayeszoo.studies import build_catalogue as study

    calls = []

    def recorded(model, data, engines, **kwargs):
        calls.append((model, data, engines, kwargs))
        return built[0]

    monkeypatch.setattr(study, "build_reference", recorded)
    prob = catalogue.problem("rvm-sinc")
    assert study.build("rvm-sinc", write=False) is built[0]
    (model, data, engines, kwargs), = calls
    assert engines == prob.engines and kwargs["seed"] == 1 and kwargs["name"] == "catalogue: rvm-sinc"
    assert kwargs["provenance"]["source"] == "catalogue" and kwargs["provenance"]["key"] == "rvm-sinc"
    assert model.spec() == prob.model().spec() and data.fingerprint() == prob.fingerprint()


@contextlib.contextmanager
def diverging_below(name: str, threshold: float, divergences: int = 5):
    """Backend ``name`` of the ``rvm`` family for the block: the tests' exact Gibbs sampler, declared with NUTS's
    ``target_accept`` option (default 0.8) and reporting ``divergences`` divergent transitions when run below
    ``threshold``: an engine whose divergences a higher target acceptance removes, without NUTS's run time."""
    calls = []

    def run(model, data, *, draws, tune, chains, ctx, target_accept):
        calls.append((target_accept, ctx.seed))
        start = time.perf_counter()
        sampler = scaled_kernel(model.training_design(data), np.asarray(data.y, float),
                                (model.a, model.b, model.c, model.d), 1.0, None, None)
        result = driver.sample(sampler, None, ctx, draws=draws, tune=tune, chains=chains)
        return driver.chains_fit(model, data, result, ctx=ctx, setup=time.perf_counter() - start,
                                 info={"divergences": divergences if target_accept < threshold else 0})

    option = registry.Option(0.8, "target acceptance", Interval(float, 0, 1, "neither"))
    registry.register(name, kind="mcmc", family="rvm", options={"target_accept": option},
                      applies=lambda m: not m.is_classifier, description="test Gibbs sampler with divergences")(run)
    try:
        yield calls
    finally:
        registry._FAMILY.pop(("rvm", name), None)


def test_an_engine_that_diverged_runs_again_at_0_99_and_both_runs_are_recorded(problem, tmp_path):
    model, data = problem
    with diverging_below("gibbs_div", 0.99) as calls:
        ref = bz.catalogue.build_reference(model, data, ("gibbs", "gibbs_div"), draws=1000, tune=200, seed=3,
                                           **QUIET)
    assert calls == [(0.95, 4), (0.99, 4)]                 # at 0.95 unless told, then once more at 0.99
    assert ref.trusted and ref.provenance["crosscheck"]["run"]["divergences"] == 0
    assert ref.provenance["attempts"] == [
        {"engine": "gibbs", "target_accept": None, "seed": 3, "divergences": 0},
        {"engine": "gibbs_div", "target_accept": 0.95, "seed": 4, "divergences": 5},
        {"engine": "gibbs_div", "target_accept": 0.99, "seed": 4, "divergences": 0}]
    assert ref.provenance["crosscheck"]["run"]["settings"]["target_accept"] == 0.99
    said = "gibbs_div ran again at target_accept 0.99 after 5 divergences at 0.95, with 0"
    again = Reference.load(ref.save(tmp_path / "ref.nc"))
    assert said in ref.describe() and said in again.describe() and said in reference_banner(again)
    with diverging_below("gibbs_div", 0.95) as calls:   # clean at 0.95: one run (trusted or not)
        try:
            once = bz.catalogue.build_reference(model, data, ("gibbs", "gibbs_div"), draws=200, tune=50, chains=2,
                                                seed=3, **QUIET)
        except UntrustedReference as caught:
            once = caught.reference
    assert calls == [(0.95, 4)] and "ran again" not in once.describe()


def test_an_engine_still_diverging_at_0_99_is_refused_with_both_runs_recorded(problem):
    model, data = problem
    with diverging_below("gibbs_div", 1.0, divergences=2) as calls, pytest.raises(UntrustedReference) as caught:
        bz.catalogue.build_reference(model, data, ("gibbs", ("gibbs_div", {"target_accept": 0.9})), draws=1000,
                                     tune=200, seed=3, **QUIET)
    assert calls == [(0.9, 4), (0.99, 4)]                  # a target acceptance given is kept, then 0.99
    ref, text = caught.value.reference, str(caught.value)
    assert ref.problems == ["second engine gibbs_div: 2 divergent transitions (wanted none)"]
    assert [a["target_accept"] for a in ref.provenance["attempts"]] == [None, 0.9, 0.99]
    # no higher target acceptance to suggest: the family's remedy, not one it already ran
    assert "gibbs_div diverged 2 times at target_accept 0.99: a reparameterisation" in text
    assert "'target_accept': 0.99}" not in text


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_nuts_in_pymc_and_in_numpyro_make_a_reference(problem, tmp_path):
    """The default pair, at the target acceptance the advice gives when PyMC's NUTS diverges here at its 0.9."""
    model, data = problem
    engines = tuple((name, {"target_accept": 0.99}) for name in default_engines(model))
    ref = bz.catalogue.build_reference(model, data, engines, draws=1000, tune=1000, seed=0, **QUIET)
    assert ref.trusted, ref.problems
    assert (ref.provenance["run"]["engine"], ref.provenance["crosscheck"]["run"]["engine"]) == ("nuts", "numpyro")
    cmp = bz.compare(model, data, backends=["gibbs"], reference=ref.save(tmp_path / "ref.nc"), draws=2000, **QUIET)
    assert cmp.table()["reference_trusted"].all() and cmp.table()["mean_err"].iloc[0] < 0.2
