"""The reference catalogue: shipped files keep the rules, lookup, and every kind of reference ``compare`` takes."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import bayeszoo as bz
from bayeszoo import catalogue
from bayeszoo.catalogue import Reference
from bayeszoo.catalogue import reference as rules
from tests.helpers import ROOT

DOCS = os.path.join(ROOT, "docs", "families")
KW = dict(draws=200, chains=2, seed=0, progress=False)


@pytest.fixture(scope="module")
def sonar():
    prob = catalogue.problem("gpc-sonar")
    return prob.model(), prob.data()


# ------------------------------------------------------------------------------------------- the files
@pytest.mark.parametrize("key", catalogue.available())
def test_every_shipped_reference_keeps_the_rules(key):
    ref = catalogue.load(key)          # loading checks the rules again from what the file holds
    assert ref.trusted, ref.problems
    prov = ref.provenance
    assert prov["source"] == "catalogue" and prov["key"] == key and prov["cross_checked"]
    for part in (prov, prov["crosscheck"]):
        run, diag = part["run"], part["diagnostics"]
        assert run["kind"] == "mcmc" and run["chains"] >= 2 and run["divergences"] == 0
        assert diag["rhat_max"] < rules.RHAT_MAX
        assert min(diag["ess_bulk_min"], diag["ess_tail_min"]) >= rules.ESS_MIN
        assert diag["mcse_over_sd_max"] < rules.MCSE_MAX
    agree = prov["crosscheck"]["agreement"]
    assert agree["z_max"] < agree["z_limit"]
    for key_ in ("versions", "date", "model", "data"):
        assert prov[key_]
    # the rules recomputed from the stored per-component numbers, not from the stored verdicts
    for moments in (ref.moments, ref.crosscheck):
        for name, m in moments.items():
            assert set(m) == set(rules.STATS), name
            assert np.all(m["rhat"] < rules.RHAT_MAX) and np.all(m["ess_bulk"] >= rules.ESS_MIN)
            assert np.all(m["ess_tail"] >= rules.ESS_MIN) and np.all(m["mcse_mean"] < rules.MCSE_MAX * m["sd"])
            assert np.all(m["q05"] <= m["q50"]) and np.all(m["q50"] <= m["q95"])
    assert ref.fit.n_chains * ref.fit.n_draws <= rules.MAX_DRAWS
    prob = catalogue.problem(key)
    model, data = prob.model(), prob.data()
    assert not ref.matches(model, data)
    assert {n: ref.moments[n]["mean"].shape for n in ref.moments} == {
        n: tuple(ref.fit.posterior[n].shape[2:]) for n in model.var_dims(data)}


def test_catalogue_is_small():
    sizes = {key: os.path.getsize(catalogue.path(key)) for key in catalogue.available()}
    assert sum(sizes.values()) < 15e6, sizes
    assert all(size < 5e6 for size in sizes.values()), sizes


def test_lookup_finds_the_reference_of_every_demo_problem():
    demo = [p for p in catalogue.PROBLEMS.values() if p.demo is not None]
    assert len(demo) >= 5 and sum(p.key in catalogue.available() for p in demo) >= 4
    for prob in demo:
        model, data = prob.model(), prob.data()
        assert catalogue.find(model, data) is prob
        ref = catalogue.lookup(model, data)
        if prob.key in catalogue.available():
            assert ref.trusted and ref.name == f"catalogue: {prob.key}"
        else:       # its family page says why (test below)
            assert ref is None
    # another dataset (or other model options) is another problem
    prob = catalogue.problem("gpc-sonar")
    assert catalogue.find(prob.model(), bz.datasets.load("sinc", n=20)) is None
    assert catalogue.lookup(bz.models.GPC(likelihood="probit", kernel="se"), prob.data()) is None


def test_a_problem_without_a_reference_says_why_on_its_family_page():
    for key in set(catalogue.keys()) - set(catalogue.available()):
        prob = catalogue.problem(key)
        with open(os.path.join(DOCS, f"{prob.family}.md"), encoding="utf-8") as fh:
            assert f"`{key}`" in fh.read(), f"docs/families/{prob.family}.md does not explain {key}"
        with pytest.raises(ValueError, match="no reference"):
            catalogue.load(key)


# --------------------------------------------------------------------------------------- the rules
def test_a_short_run_is_not_trusted_and_says_why(sonar):
    model, data = sonar
    short = bz.fit(model, data, "gibbs", draws=20, tune=20, chains=2, seed=1, progress=False)
    ref = Reference.from_fit(short, ["f"])
    assert not ref.trusted and not ref.provenance["cross_checked"]
    text = " ".join(ref.problems)
    assert "bulk ESS" in text and "tail ESS" in text and "MCSE" in text
    assert "not cross-checked" in ref.describe() and "NOT TRUSTED" in ref.describe()


def test_an_approximation_or_one_chain_cannot_be_judged(sonar):
    model, data = sonar
    ep = bz.fit(model, data, "ep", **KW)
    assert "approximation" in Reference.from_fit(ep).problems[0]
    one = bz.fit(model, data, "gibbs", draws=50, tune=10, chains=1, seed=1, progress=False)
    assert any("R-hat needs two or more" in p for p in Reference.from_fit(one).problems)


def test_engines_that_disagree_are_caught(sonar):
    model, data = sonar
    ref = catalogue.load("gpc-sonar")
    shifted = {n: {**m, "mean": m["mean"] + 10 * m["mcse_mean"]} for n, m in ref.crosscheck.items()}
    problems = rules.validate(ref.moments, ref.provenance, shifted)
    assert any("engines disagree" in p for p in problems)
    assert rules.validate(ref.moments, ref.provenance, ref.crosscheck) == []
    assert any("no second engine" in p for p in rules.validate(ref.moments, ref.provenance, None))


def test_save_and_load_round_trip(tmp_path):
    ref = catalogue.load("gpc-sonar")
    path = ref.save(tmp_path / "ref.nc")
    again = Reference.load(path)
    assert again.name == ref.name and again.provenance == json.loads(json.dumps(ref.provenance))
    assert ref.provenance["stored_draws"]["thin"] > 1 and ref.provenance["stored_draws"]["draws"] == ref.fit.n_draws
    assert again.problems == ref.problems == []
    for name in ref.moments:
        for stat in rules.STATS:
            np.testing.assert_array_equal(again.moments[name][stat], ref.moments[name][stat])
            np.testing.assert_array_equal(again.crosscheck[name][stat], ref.crosscheck[name][stat])
    np.testing.assert_array_equal(again.fit.posterior["f"].values, ref.fit.posterior["f"].values)
    # a saved reference is also a saved fit
    assert bz.load_fit(path).n_draws == ref.fit.n_draws


# ------------------------------------------------------------------------------------ compare's reference
def test_compare_uses_the_catalogue_by_default(sonar):
    model, data = sonar
    cmp = bz.compare(model, data, backends=["laplace", "ep"], **KW)
    assert cmp.reference.name == "catalogue: gpc-sonar" and cmp.reference.trusted
    assert cmp.reference_cell is None and list(cmp.fits) == ["laplace", "ep"]
    table = cmp.table().set_index("backend")
    assert table["reference_trusted"].all()
    assert 0 < table.loc["ep", "mean_err"] < table.loc["laplace", "mean_err"]
    named = bz.compare(model, data, backends=["ep"], reference="catalogue:gpc-sonar", **KW)
    assert named.table()["mean_err"].iloc[0] == table.loc["ep", "mean_err"]
    assert bz.compare(model, data, backends=["ep"], reference=None, **KW).reference is None


def test_compare_takes_a_backend_a_fit_a_reference_or_a_path(sonar, tmp_path):
    model, data = sonar
    by_name = bz.compare(model, data, backends=["laplace", "ep"], reference="ep", **KW)
    assert by_name.reference.name == "ep" and not by_name.reference.trusted
    assert np.isnan(by_name.table().set_index("backend").loc["ep", "mean_err"])   # not measured against itself
    assert not by_name.table()["reference_trusted"].any()

    fit = bz.fit(model, data, "gibbs", draws=20, tune=20, chains=2, seed=1, progress=False)
    given = bz.compare(model, data, backends=["ep"], reference=fit, **KW)
    assert given.reference.name == "gibbs (given)" and not given.reference.trusted

    ref = catalogue.load("gpc-sonar")
    as_object = bz.compare(model, data, backends=["ep"], reference=ref, **KW)
    saved_ref = bz.compare(model, data, backends=["ep"], reference=ref.save(tmp_path / "ref.nc"), **KW)
    saved_fit = bz.compare(model, data, backends=["ep"], reference=fit.save(tmp_path / "fit.nc"), **KW)
    assert as_object.reference.trusted and saved_ref.reference.trusted
    assert saved_ref.table()["mean_err"].iloc[0] == as_object.table()["mean_err"].iloc[0]
    assert saved_fit.reference.name == "gibbs (fit.nc)" and not saved_fit.reference.trusted


def test_compare_refuses_a_reference_of_another_problem(sonar):
    model, data = sonar
    with pytest.raises(ValueError, match=r"made for another model \(a 'gpc' model; the reference's is 'rvm'\) and "
                                         r"other data than"):
        bz.compare(model, data, backends=["ep"], reference="catalogue:rvm-sinc", **KW)
    with pytest.raises(ValueError, match="not a catalogue problem"):
        bz.compare(model, bz.datasets.load("ripley"), backends=["ep"], reference="catalogue", **KW)
    with pytest.raises(ValueError, match="not a backend of GPC"):
        bz.compare(model, data, backends=["ep"], reference="nope", **KW)
    with pytest.raises(ValueError, match="reference_draws needs a backend"):
        bz.compare(model, data, backends=["ep"], reference="auto", reference_draws=10, **KW)


def test_saved_comparison_keeps_its_reference(sonar, tmp_path):
    model, data = sonar
    for reference, source in (("auto", {"catalogue": "gpc-sonar"}), ("ep", {"cell": "ep"})):
        out = tmp_path / str(reference)
        cmp = bz.compare(model, data, backends=["laplace", "ep"], reference=reference, out=out, **KW)
        with open(out / "comparison.json") as fh:
            assert json.load(fh)["reference_source"] == source
        loaded = bz.load_comparison(out)
        assert loaded.reference.name == cmp.reference.name
        assert loaded.reference.trusted == cmp.reference.trusted
        np.testing.assert_allclose(loaded.table()["mean_err"], cmp.table()["mean_err"], rtol=1e-12)
    fit = bz.fit(model, data, "gibbs", draws=20, tune=20, chains=2, seed=1, progress=False)
    out = tmp_path / "given"
    cmp = bz.compare(model, data, backends=["ep"], reference=fit, out=out, **KW)
    assert (out / "reference.nc").exists()
    loaded = bz.load_comparison(out)
    assert loaded.reference.name == "gibbs (given)" and loaded.reference.problems == cmp.reference.problems
    np.testing.assert_allclose(loaded.table()["mean_err"], cmp.table()["mean_err"], rtol=1e-12)
    os.remove(out / "reference.nc")          # the fits are still read; the table has no reference
    with pytest.warns(UserWarning, match="could not be read"):
        loaded = bz.load_comparison(out)
    assert loaded.reference is None and np.isnan(loaded.table()["mean_err"].iloc[0])


def test_the_command_line_uses_the_catalogue_unless_told_otherwise(tmp_path):
    from bayeszoo.cli import main

    argv = ["compare", "gpc", "--data", "sonar", "--backends", "ep", "--model-opt", "log_lengthscale=2",
            "--model-opt", "log_amplitude=1", "--draws", "100", "--chains", "1", "--quiet"]
    sources = {}
    for reference in ("auto", "none"):
        out = tmp_path / reference
        assert main([*argv, "--out", str(out), "--reference", reference]) == 0
        with open(out / "comparison.json") as fh:
            sources[reference] = json.load(fh)["reference_source"]
    assert sources == {"auto": {"catalogue": "gpc-sonar"}, "none": None}


# ------------------------------------------------------------------------------------------- rebuild
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_rebuilt_reference_agrees_with_the_shipped_one():
    from bayeszoo.studies.build_catalogue import build

    shipped = catalogue.load("gpc-sonar")
    rebuilt = build("gpc-sonar", write=False)
    assert rebuilt.trusted, rebuilt.problems
    agree = rules.agreement(shipped.moments, rebuilt.moments)
    assert agree["z_max"] < agree["z_limit"]
