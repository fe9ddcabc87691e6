"""The HTML report: self-contained, holds the table, the figures, the ESS sentence and failures."""
from __future__ import annotations

import base64
import os
import re
import warnings

import numpy as np
import pytest

import bayeszoo as bz  # noqa: E402
from tests.helpers import fake_backends as fb
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


def test_a_reference_without_draws_is_named_and_no_marginals_are_drawn_against_it(regression_cmp, tmp_path,
                                                                                   monkeypatch):
    """A reference published as moments only (posteriordb's mcycle_gp-accel_gp): the report says so where the
    marginals against it would be (the other figures are not what this checks, and are skipped quickly)."""
    import dataclasses

    from bayeszoo.catalogue.reference import Reference

    for name in ("family_picture", "trace_figure", "rank_figure", "marginals_figure", "accuracy_figure",
                 "ess_per_second_bars", "objective_figure"):
        monkeypatch.setattr(plots, name, lambda *args, **kwargs: 1 / 0)
    ref = regression_cmp.reference
    cmp = dataclasses.replace(regression_cmp, reference=Reference(name="moments only", moments=ref.moments,
                                                                  fit=None, provenance=ref.provenance))
    text = open(write_report(cmp, str(tmp_path / "r.html")), encoding="utf-8").read()
    assert "the reference &#x27;moments only&#x27; holds moments only" in text
    assert "marginals vs reference" not in text


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


# ------------------------------------------------------------------------- what the report says its numbers are
from types import SimpleNamespace  # noqa: E402

import pandas as pd  # noqa: E402

from bayeszoo.catalogue import Reference  # noqa: E402
from bayeszoo.comparison import Comparison  # noqa: E402
from bayeszoo.diagnostics import display, metrics, report  # noqa: E402
from bayeszoo.results import build_fit  # noqa: E402
from tests.helpers import ROOT



@pytest.fixture(scope="module")
def small():
    return bz.models.RVM(width=3.0), bz.datasets.load("sinc", n=12, n_test=20, seed=1)


def _iid(problem, seed, chains=4, draws=1000, shift=0.0):
    """I.i.d. standard normal draws of the RVM's variables (plus ``shift`` on w)."""
    model, data = problem
    M = model.n_basis(data)
    rng = np.random.default_rng(seed)
    return {"w": rng.standard_normal((chains, draws, M)) + shift, "log_alpha": rng.standard_normal((chains, draws, M)),
            "log_beta": rng.standard_normal((chains, draws))}


def _fit(problem, draws, kind="mcmc", backend="constructed"):
    model, data = problem
    return build_fit(model, data, backend, kind, draws, timing={"sample": 1.0})


def test_a_grid_member_as_the_reference_is_a_single_run_and_its_row_says_reference(small):
    """reference="nuts" with nuts in the grid: one run, checked by nothing else in the grid. The banner says so
    (not "passes the validation rules"), the run's row reads "reference" everywhere instead of a zero error, and
    nothing ranks it."""
    model, data = small
    nuts = _fit(small, _iid(small, 0), backend="nuts")
    vb = _fit(small, _iid(small, 1, shift=0.02), kind="approximation", backend="vb")
    reference = Reference.from_fit(nuts, list(model.var_dims(data)), name="nuts")
    assert reference.trusted, reference.problems          # its own rules hold
    cmp = Comparison(model=model, data=data, fits={"nuts": nuts, "vb": vb}, reference=reference,
                     order=["nuts", "vb"])
    assert cmp.reference_cell == "nuts"
    for block in (report.report_html(cmp), display.comparison_html(cmp)):
        banner = re.search(r'<div class="banner (\w+)">(.*?)</div>', block, re.S)
        assert banner.group(1) == "unchecked" and "passes the validation rules." not in banner.group(2)
        assert "single run, not cross-checked" in banner.group(2)
        assert "bz.build_reference(model, data)" in banner.group(2) and report.REFERENCE_GUIDE in banner.group(2)
        # its accuracy cells are one "reference" cell; the other row keeps its numbers
        row = re.search(r'<tr class=""><td class="txt">nuts</td>.*?</tr>', block).group(0)
        assert '<td class="na" colspan="5" title="the reference&#x27;s own run: not measured against itself' in row
        assert not re.search(r">0(\.0+)?</td>", row)
    table = cmp.table().set_index("backend")
    # the table holds no zero error for it (a zero would read as the most accurate fit) ...
    assert table.loc["nuts", metrics.ACCURACY_COLUMNS].isna().all()
    assert 0 < table.loc["vb", "mean_err"] < 0.2
    # ... and the ranking figure leaves it out
    fig = plots.accuracy_figure(cmp, reference, cmp.table())
    assert [t.get_text() for t in fig.axes[1].get_yticklabels()] == ["vb"]


def test_a_cross_checked_reference_passes_and_a_single_run_given_says_it_is_one(small):
    model, data = small
    names = list(model.var_dims(data))
    one, two = _fit(small, _iid(small, 0)), _fit(small, _iid(small, 5))
    checked = Reference.from_fit(one, names, crosscheck=two, name="two engines")
    assert checked.trusted, checked.problems
    ok = report.reference_banner(checked)
    assert 'class="banner ok"' in ok and "passes the validation rules" in ok and "single run" not in ok
    single = report.reference_banner(Reference.from_fit(one, names, name="saved run"))
    assert 'class="banner unchecked"' in single and "Single run, not cross-checked" in single


def test_banners_point_to_pages_that_exist(small):
    """The advice names a page of the documentation: the family's own for a built-in family, the reference guide
    for a model of one's own, which has no family page."""
    model, data = small
    untrusted = Reference.from_fit(_fit(small, _iid(small, 0, chains=1, draws=50)), name="short")
    assert not untrusted.trusted
    pages = {}
    for family in [*bz.models.FAMILIES, bz.models.USER_FAMILY]:
        banner = report.reference_banner(untrusted, family=family)
        named = set(re.findall(r"docs/[\w/]+\.md", banner))
        assert named and all(os.path.isfile(os.path.join(ROOT, p)) for p in named), (family, named)
        assert "family page" not in banner
        pages[family] = named
    assert pages[bz.models.USER_FAMILY] == {report.REFERENCE_GUIDE}
    assert "docs/families/rvm.md" in pages["rvm"]
    # the banner without a reference and the single-run one name existing pages too
    for banner in (report.reference_banner(None), report.reference_banner(untrusted, cell="short")):
        named = re.findall(r"docs/[\w/]+\.md", banner)
        assert named and all(os.path.isfile(os.path.join(ROOT, p)) for p in named)


def test_the_ess_column_of_an_approximation_is_its_number_of_draws_as_its_help_says(small):
    """4 x 1000 i.i.d. draws: the help says an approximation's ESS is its number of draws, and the table shows
    4000, not the smallest of ArviZ's scattered estimates (several per cent below); an MCMC fit of the same draws
    keeps ArviZ's estimate."""
    model, data = small
    draws = _iid(small, 3)
    names = list(model.var_dims(data))
    approx = metrics.sampling_diagnostics(_fit(small, draws, kind="approximation"), names)
    mcmc = metrics.sampling_diagnostics(_fit(small, draws), names)
    assert approx["ess_bulk_min"] == approx["ess_tail_min"] == approx["ess_bulk_median"] == 4000
    assert 3000 < mcmc["ess_bulk_min"] < 3950          # the same draws estimated: below their number
    help_text = report.COLUMN_GROUPS["Sampling"]["ess_bulk_min"][1]
    assert "for an approximation its number of draws" in help_text
    # a point-estimated component has no ESS at all, in either kind
    fixed = dict(draws, log_beta=np.zeros((4, 1000)))
    per = metrics._scalar_ess(_fit(small, fixed, kind="approximation"), ["log_beta"], "bulk")
    assert np.isnan(per).all()


def test_loo_of_a_point_estimate_is_left_out_with_the_reason(small):
    """Every draw the same: az.loo has no spread to weigh (every Pareto k is bad) and its numbers are not a LOO
    estimate; the table leaves the columns out and says why, the report's cells read "point estimate"."""
    import arviz as az

    model, data = small
    point = {k: np.broadcast_to(v[:1, :1], v.shape).copy() for k, v in _iid(small, 4, chains=2, draws=50).items()}
    fit = _fit(small, point, kind="approximation", backend="map")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")    # ArviZ's warnings on the Pareto k of constant weights
        loo = az.loo(fit.idata, pointwise=True, reff=1.0)
    assert np.all(~(np.asarray(loo.pareto_k) <= metrics.PARETO_K_MAX))
    cols = metrics.loo_columns(fit)
    assert all(np.isnan(cols[c]) for c in metrics.LOO_COLUMNS) and "in-sample" in cols["loo_note"]
    sampled = metrics.loo_columns(_fit(small, _iid(small, 6, chains=2, draws=200), kind="approximation"))
    assert np.isfinite(sampled["elpd_loo"]) and sampled["p_loo"] > 0 and sampled["loo_note"] == ""
    rows = [metrics.table_row(model, data, "map", fit, None),
            metrics.table_row(model, data, "vb", _fit(small, _iid(small, 6, chains=2, draws=200), "approximation"),
                              None)]
    table = pd.DataFrame(rows)
    _, scores = report.split_columns(table)
    html_table = report.table_html(table, None, scores)
    assert "loo_note" not in html_table
    cell = re.search(r'<td class="na" colspan="4" title="([^"]*)">point estimate</td>', html_table)
    assert cell and "in-sample" in cell.group(1)
    assert html_table.count("point estimate</td>") == 1          # the sampled fit keeps its numbers
    sentence = report._scores_sentence(model, table, scores)
    assert "<strong>Left out</strong> for map" in sentence


def test_the_model_is_a_table_of_its_settings(small):
    model, data = small
    text = report.meta_html(SimpleNamespace(model=model, data=data))
    assert "<caption>Model</caption>" in text and "<caption>Data</caption>" in text
    assert "<th>model</th><td>RVM (rvm family)</td>" in text
    assert "<th>width</th><td>3</td>" in text and "<th>kernel</th><td>gauss</td>" in text
    assert "<th>a</th><td>0.0001</td>" in text
    assert "family=" not in text and "&#x27;" not in text          # no raw dict, no quoted reprs
    assert "<th>training points</th><td>12 × 1</td>" in text


def test_a_model_of_ones_own_shows_its_observed_data_not_inputs():
    """A user's model has no inputs (X has zero columns): its size is its observed values, not "8 × 0"."""
    numpyro = pytest.importorskip("numpyro")
    import numpyro.distributions as dist

    y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
    sigma = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])

    def schools(sigma, y=None):
        mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
        tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
        with numpyro.plate("school", len(sigma)):
            theta = numpyro.sample("theta", dist.Normal(mu, tau))
            numpyro.sample("obs", dist.Normal(theta, sigma), obs=y)

    model = bz.models.from_numpyro(schools, sigma, y=y)
    text = report.meta_html(SimpleNamespace(model=model, data=model.dataset()))
    assert "× 0" not in text and "training points" not in text and "test points" not in text
    assert "<th>observed values</th><td>8</td>" in text
    assert "<th>model</th><td>schools, a NumPyro model of one&#x27;s own</td>" in text
    assert "theta (school: 8)" in text and "mu (scalar)" in text
    assert "<th>observed</th><td>obs (8)</td>" in text


def test_no_spine_runs_through_the_first_or_last_rows_label_of_the_ranking():
    """The ranking lists a fit whose diagnostics fail last, with "not converged" and "never the precise target"
    beside its row: every row has its full height, so the axes' frame crosses no label, as it did when no bar set
    the rows' limits. (That the legend covers no label: test_accuracy's divergence test.)"""
    table = pd.DataFrame({"backend": ["a", "b", "c", "d"], "kind": ["mcmc", "approximation", "mcmc", "mcmc"],
                          "seconds_to_target": [0.5, np.inf, 2.0, np.inf],
                          "seconds_to_precise": [1.0, np.inf, np.inf, np.inf], "ess_ref": [100.0, 3.0, 50.0, 40.0],
                          "converged": [True, None, False, False]})
    fig = plots.new_figure(5, 2.4)
    ax = fig.add_subplot()
    plots._ranking_bars(ax, table, (10, 100))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    labels = [t for t in ax.texts if "not converged" in t.get_text() or "never" in t.get_text()]
    assert labels
    box = ax.get_window_extent(renderer)
    for t in labels:
        extent = t.get_window_extent(renderer)
        assert box.y0 < extent.y0 and extent.y1 < box.y1, t.get_text()


def test_a_saved_figure_is_drawn_once(regression_cmp, monkeypatch):
    """figure_to_base64 draws a laid-out figure once: tight_layout used to leave a layout engine behind, and savefig
    then laid the figure out (drew it without rendering) before drawing it."""
    from matplotlib.figure import Figure

    fig = plots.new_figure(4, 3)
    fig.subplots(2, 2)
    fig.tight_layout()
    draws = []
    draw = Figure.draw
    monkeypatch.setattr(Figure, "draw", lambda self, renderer: draws.append(self) or draw(self, renderer))
    png = base64.b64decode(plots.figure_to_base64(fig))
    assert png.startswith(b"\x89PNG") and len(draws) == 1


def _wide(problem, seed):
    """Draws around -12000 with a spread of 300 (tick labels like -12500) and a scalar around 14.799 with a spread of
    1e-5 (its axes read with an offset, "1e-5 + 1.4799e1")."""
    draws = _iid(problem, seed)
    draws["w"] = -12000.0 + 300.0 * draws["w"]
    draws["log_beta"] = 14.799 + 1e-5 * draws["log_beta"]
    return draws


@pytest.mark.parametrize("make", ["trace", "rank", "marginals"])
def test_per_backend_figures_keep_every_label_inside_the_figure_and_apart(small, make):
    """Each panel of the per-backend figures, with its tick labels, axis labels and title, stays inside the figure
    and clear of every other panel, also with long tick labels (−12500) and an offset (1e-5 + 1.4799e1) over or
    under their axes."""
    model, data = small
    fit = _fit(small, _wide(small, 0), backend="nuts")
    reference = _fit(small, _wide(small, 1), backend="reference")
    cmp = Comparison(model=model, data=data, fits={"nuts": fit}, order=["nuts"])
    components = plots.select_components(cmp)
    fig = {"trace": lambda: plots.trace_figure(fit, components),
           "rank": lambda: plots.rank_figure(fit, components),
           "marginals": lambda: plots.marginals_figure(fit, reference, components, label="nuts")}[make]()
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    page = fig.bbox
    boxes = [ax.get_tightbbox(renderer) for ax in fig.axes if ax.get_visible()]
    assert len(boxes) == {"trace": 2, "rank": 1, "marginals": 1}[make] * len(components)
    labels = [t.get_text() for ax in fig.axes for t in ax.get_yticklabels() + ax.get_xticklabels()]
    assert any(len(label) >= 6 for label in labels) or make == "rank"
    assert any(ax.yaxis.get_offset_text().get_text() for ax in fig.axes) or make != "trace"
    for i, box in enumerate(boxes):
        assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1, (i, box, page)
        for other in boxes[i + 1:]:
            assert not box.overlaps(other), (box, other)
