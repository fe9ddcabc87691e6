"""The aRVM's catalogue problem arvm-sinc: its shipped reference is trusted and is the three-basis posterior of
sinc; the demo runs on it; the family's advice is shown when a reference breaks the rules."""
from __future__ import annotations

import html

import numpy as np
import pytest

import bayeszoo as bz
from bayeszoo import catalogue
from bayeszoo.catalogue import Reference
from bayeszoo.catalogue import reference as rules
from bayeszoo.diagnostics.report import reference_banner
from bayeszoo.reference_builder import advice, resolve_engines

KEY = "arvm-sinc"


@pytest.fixture(scope="module")
def problem():
    prob = catalogue.problem(KEY)
    return prob, prob.model(), prob.data()


def test_arvm_sinc_reference_loads_and_is_trusted(problem):
    prob, model, data = problem
    ref = catalogue.lookup(model, data)          # the pair's catalogue entry; reading checks the rules again
    assert ref is not None and ref.trusted, ref.problems if ref is not None else "no reference"
    prov = ref.provenance
    # two libraries sampling two declarations
    assert (prov["run"]["engine"], prov["crosscheck"]["run"]["engine"]) == ("numpyro", "nuts")
    for part in (prov, prov["crosscheck"]):
        assert part["run"]["divergences"] == 0 and part["diagnostics"]["rhat_max"] < rules.RHAT_MAX
        assert min(part["diagnostics"]["ess_bulk_min"], part["diagnostics"]["ess_tail_min"]) >= rules.ESS_MIN
    assert prov["crosscheck"]["agreement"]["z_max"] < prov["crosscheck"]["agreement"]["z_limit"]
    # the bases sorted by centre: sinc's left side lobe, its central peak, its right side lobe (minima at +-4.49)
    mean, sd = ({n: m[stat] for n, m in ref.moments.items()} for stat in ("mean", "sd"))
    centre = mean["centre"][:, 0]
    assert centre[0] < -3.0 and abs(centre[1]) < 0.5 and centre[2] > 3.0
    assert np.all(np.diff(ref.fit.posterior["centre"].values[..., 0], axis=-1) > 0)   # sorted in every draw
    w = mean["w"]
    assert w[1] > 0.8 and np.all(w[[0, 2]] < -0.1)                       # a peak of about 1, two dips below 0
    assert np.all(np.abs(w) > 3 * sd["w"])                               # every basis is needed
    # the posterior mean of f follows the noise-free sinc (three Gaussians are not quite its shape) and the noise
    # sd is near the generating 0.1; no training input lies in the far tail of every basis, where the sd of f would
    # rest on rare draws
    assert data.n == 57 and np.all(np.abs(data.X) <= 2 * np.pi)
    truth = np.sinc(data.X[:, 0] / np.pi)
    assert np.sqrt(np.mean((mean["f"] - truth) ** 2)) < 0.06
    assert 0.08 < np.exp(-0.5 * mean["log_beta"]) < 0.12
    assert np.all(sd["f"] > 0.01)
    # the demo measures the type-II fit and a generic sampler against it
    assert {"arvm", "numpyro"} <= set(prob.demo.backends)


def test_the_advice_names_the_settings_of_the_catalogue_problem(problem):
    _, model, _ = problem
    text = bz.models.ARVM.reference_advice
    assert KEY in text and f"n_basis={model.n_basis}" in text and f"a={model.a:g}, b={model.b:g}" in text
    assert f"width_range={tuple(model.width_range)}" in text
    assert "target_accept=0.99" in text
    assert catalogue.problem(KEY).engines[0].options["target_accept"] == 0.99


def test_reference_advice_is_shown_when_a_reference_breaks_the_rules(tmp_path):
    data = bz.datasets.load("sinc", n=20, n_test=20, seed=1)
    model = bz.models.ARVM(n_basis=3)
    fit = bz.fit(model, data, "arvm", draws=100, chains=2, seed=0, progress=False)
    untrusted = Reference.from_fit(fit, name="type-II fit")      # an approximation: its error is unknown
    assert not untrusted.trusted
    engines = resolve_engines(model, data, None, draws=100, tune=100, chains=2)
    assert advice(untrusted, engines, model, data)[-1] == model.reference_advice
    shown = html.escape(model.reference_advice)
    assert shown in reference_banner(untrusted, model.reference_advice)
    bz.compare(model, data, backends=["arvm"], reference=untrusted, draws=100, chains=2, seed=0, progress=False,
               out=tmp_path / "run")
    report = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
    assert "UNTRUSTED REFERENCE" in report and shown in report


@pytest.mark.slow
def test_the_demo_measures_its_backends_against_the_trusted_reference(tmp_path):
    from bayeszoo import demo

    cmp = demo.run(KEY, str(tmp_path))
    assert cmp.reference is not None and cmp.reference.trusted
    table = cmp.table().set_index("backend")
    assert not table["error"].any(), table["error"]
    assert bool(table.loc["numpyro", "converged"]) and table.loc["numpyro", "divergences"] == 0
    # NumPyro at the demo's sizes is within a few tenths of a reference sd; Algorithm 1's point-estimated kernel
    # and flat priors give a fit of the same quality but not the posterior
    assert table.loc["numpyro", "mean_err"] < 0.2
    assert np.all(table["mse"] < 0.02) and np.all(table["n_relevant"] == 3)
