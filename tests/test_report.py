"""The HTML report: self-contained, holds the table, the figures, the ESS sentence and failures."""
from __future__ import annotations

import base64
import os
import re

import numpy as np
import pytest


import bayeszoo as bz  # noqa: E402
import _fake_backends as fb  # noqa: E402
from bayeszoo.diagnostics import plots, rvm_plots  # noqa: E402
from bayeszoo.diagnostics.metrics import ESS_METHOD  # noqa: E402
from bayeszoo.diagnostics.report import write_report  # noqa: E402


@pytest.fixture(scope="module")
def regression_cmp(fake_comparison):
    return fake_comparison


@pytest.fixture(scope="module")
def regression_html(regression_cmp, tmp_path_factory):
    path = write_report(regression_cmp, str(tmp_path_factory.mktemp("rep") / "report.html"))
    with open(path, encoding="utf-8") as fh:
        return path, fh.read()


def test_report_holds_table_and_flags(regression_cmp, regression_html):
    path, text = regression_html
    assert os.path.exists(path)
    for name in ("fake_ok", "fake_vb", "fake_em", "fake_fail"):
        assert f"<td class=\"txt\">{name}</td>" in text
    header = re.search(r"<thead>(.*?)</thead>", text, re.S).group(1)
    # grouped columns, each header a short name with its plain-words meaning as a tooltip, and a glossary
    assert re.findall(r'<th class="group" colspan="(\d+)">([^<]*)</th>', header) == [
        ("2", ""), ("6", "Sampling"), ("5", "Accuracy against the reference")]
    for short in ("backend", "kind", "seconds", "bulk ESS", "ESS / s", "R-hat", "divergent", "converged",
                  "mean error", "sd error", "worth N draws", "s to 10 draws", "s to 100 draws"):
        assert re.search(rf'<th class="[a-z]*" title="[^"]+">{re.escape(short)}</th>', header), short
    assert "reference_trusted" not in header    # the banner says it once
    assert '<details class="glossary"><summary>What the columns mean</summary>' in text
    # the family's scores are a second table, headed by backend and kind, so neither needs a horizontal scroll
    headers = [h.replace("<wbr>", "").replace("&shy;", "") for h in re.findall(r"<thead>(.*?)</thead>", text, re.S)]
    assert len(headers) == 2 and ">mse</th>" in headers[1] and ">mse</th>" not in headers[0]
    assert ">backend</th>" in headers[1] and ">kind</th>" in headers[1] and "worth N draws" not in headers[1]
    # fake_ok has exactly one divergence (flagged); approximations show neither R-hat nor ESS per second
    assert '<td class="flag">1 ⚠</td>' in text
    assert text.count('<td class="na" title="an approximation') == 4
    # the failing backend's error text is in its table row and in the traceback section
    assert re.search(r"<tr class=\"failed\">.*?fake_fail.*?" + fb.FAIL_MESSAGE, text, re.S)
    assert "raise RuntimeError(FAIL_MESSAGE)" in text
    # numbers are formatted, not raw float reprs
    seconds = regression_cmp.table().set_index("backend").loc["fake_ok", "seconds"]
    assert f">{seconds:.2f}</td>" in text


def test_report_is_self_contained(regression_html):
    path, text = regression_html
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', text)
    # accuracy figure, family picture, objective traces; traces of the 3 fits, the rank plot of the one MCMC fit,
    # marginals of the 2 fits that are not the reference
    assert len(images) == 9
    for data in images:
        assert base64.b64decode(data)[:8] == b"\x89PNG\r\n\x1a\n"
    assert not re.search(r"(src|href)\s*=\s*[\"']?\s*(https?:)?//", text, re.I)
    assert "<script" not in text.lower() and "<link" not in text.lower()
    assert os.path.getsize(path) < 5_000_000


def test_report_states_ess_method_and_reference(regression_html):
    _, text = regression_html
    assert f"ESS estimator: {ESS_METHOD}" in text
    assert "<strong>Reference posterior: fake_ok</strong>" in text
    assert "Accuracy is measured against the reference <code>fake_ok</code>" in text
    assert "source</th><td>generated: Tipping (2001)" in text
    assert "licence</th><td>generated data" in text


def test_failing_plot_becomes_a_note(regression_cmp, tmp_path, monkeypatch):
    def boom(comparison):
        raise RuntimeError("picture broke")

    monkeypatch.setattr(plots, "family_picture", boom)
    monkeypatch.setattr(plots, "trace_figure", lambda fit, comps: 1 / 0)
    path = write_report(regression_cmp, str(tmp_path / "r.html"))
    text = open(path, encoding="utf-8").read()
    assert "family picture: could not be drawn (RuntimeError: picture broke)" in text
    assert text.count("trace plot: could not be drawn (ZeroDivisionError") == 3  # one per successful fit


def test_selected_components_are_the_largest_weights(regression_cmp):
    comps = plots.select_components(regression_cmp)
    assert comps[0] == ("log_beta", {})
    w = regression_cmp.reference.fit.posterior["w"].values
    top = set(np.argsort(-np.abs(w.reshape(-1, w.shape[-1]).mean(0)))[:4].tolist())
    assert {sel["basis"] for name, sel in comps[1:]} == top


def test_relevance_vectors_of_type2_fit(regression_cmp):
    model, fit = regression_cmp.model, regression_cmp.fits["fake_em"]
    assert rvm_plots.is_type2(fit) and not rvm_plots.is_type2(regression_cmp.fits["fake_ok"])
    # basis 0 is the bias; basis j >= 1 is training point j - 1
    np.testing.assert_array_equal(rvm_plots.relevance_vectors(model, fit), [2, 6, 11])


def test_fallback_prediction_matches_phi_w(regression_cmp):
    model, fit = regression_cmp.model, regression_cmp.fits["fake_vb"]
    X = np.linspace(-5, 5, 7)[:, None]
    w = fit.posterior["w"].values.reshape(-1, model.n_basis(regression_cmp.data))
    expected = model.design(X, regression_cmp.data.X) @ w.mean(0)
    np.testing.assert_allclose(rvm_plots.rvm_predict(model, fit, X), expected, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("dataset, task", [("ripley", "classification"), ("sinc2d", "regression")])
def test_other_family_pictures(dataset, task, tmp_path):
    opts = {"grid": 8} if dataset == "sinc2d" else {}
    data = bz.datasets.load(dataset, **opts)
    if dataset == "ripley":
        data = data.subset(np.arange(0, data.n, 5))
    model = bz.models.RVM(task=task, width=0.5 if task == "classification" else 3.0)
    cmp = bz.compare(model, data, backends=["fake_ok", "fake_em"], reference="fake_ok", draws=50, tune=0,
                     chains=2, seed=0, progress=False)
    fig = plots.family_picture(cmp)
    ax = fig.axes[0]
    if task == "classification":
        assert "decision boundaries" in ax.get_title()
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "fake_em: 3 relevance vectors" in labels
    else:   # a forest plot of the largest weights, one row per basis, every backend on it
        M = model.n_basis(data)
        assert ax.get_title() == f"{data.name}: the 20 of {M} weights with the largest |mean| in the reference"
        assert len(ax.get_yticklabels()) == 20 and [t.get_text() for t in ax.get_legend().get_texts()] == \
            ["fake_ok", "fake_em"]
    text = open(write_report(cmp, str(tmp_path / "r.html")), encoding="utf-8").read()
    assert "family picture: could not" not in text


def test_gpc_marginals_picture_against_the_reference(tmp_path):
    from bayeszoo.diagnostics.plots import family_picture

    data = bz.datasets.load("crabs")
    model = bz.models.GPC(likelihood="probit", kernel="se", log_lengthscale=1.0, log_amplitude=1.0)
    cmp = bz.compare(model, data, backends=["laplace", "ep"], reference="ep", draws=200, chains=2, seed=0,
                     progress=False)
    fig = family_picture(cmp)
    axes = fig.get_axes()
    assert [ax.get_title() for ax in axes] == ["posterior mean of f_i", "posterior sd of f_i",
                                               "P(y* = 1) at the test inputs"]
    # one scatter per non-reference backend in each panel: the Laplace points, one per training / test input
    offsets = [c.get_offsets() for c in axes[0].collections]
    assert len(offsets) == 1 and offsets[0].shape == (data.n, 2)
    assert len(axes[2].collections[0].get_offsets()) == data.X_test.shape[0]
    path = cmp.report(tmp_path / "gpc.html")
    assert "The model&#x27;s picture" in open(path).read() or "The model's picture" in open(path).read()


def test_a_comparison_without_reference_says_why_and_how_to_get_one(tmp_path):
    """The user's own data and reference="auto": no catalogue entry, so no reference. The report says so plainly
    (verdict, banner, the family picture's note) instead of blaming the family."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    data = bz.datasets.Dataset(X, (X[:, 0] > 0).astype(float), name="mine", meta={"task": "classification"})
    cmp = bz.compare(bz.models.GPC(), data, backends=["laplace", "ep"], draws=50, chains=2, progress=False)
    assert cmp.reference is None
    assert cmp.verdict() == ("There is no reference posterior, so nothing is measured for accuracy and nothing is "
                             "ranked.")
    text = open(write_report(cmp, str(tmp_path / "r.html")), encoding="utf-8").read()
    assert 'class="banner none"' in text and 'reference="nuts"' in text
    assert "picture compares every fit with the reference posterior, and this comparison has none" in text
    assert "no picture for the gpc family" not in text
