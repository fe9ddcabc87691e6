"""Rich display in notebooks: the HTML of a Fit, a Comparison and a Dataset, and Comparison.plot."""
from __future__ import annotations

import base64
import dataclasses
import re
import warnings
from html.parser import HTMLParser

import arviz as az
import numpy as np
import pytest
from matplotlib.figure import Figure

import bayeszoo as bz  # noqa: E402
from tests.helpers import fake_backends as fb
from bayeszoo.diagnostics.display import FIGURES, scoped_css  # noqa: E402
from bayeszoo.diagnostics.report import CSS  # noqa: E402
from bayeszoo.results import HTML_ROWS_PER_VARIABLE, Fit  # noqa: E402

BACKENDS = ["fake_ok", "fake_vb", "fake_em", "fake_fail"]
_VOID = {"br", "hr", "img", "input", "meta", "link", "wbr", "col", "source", "area", "base", "embed", "param",
         "track"}


class _Checker(HTMLParser):
    """Tags must nest and close; records the tags seen and the text outside <style>."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.problems, self.tags, self.text, self.in_style = [], [], [], [], False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in _VOID:
            self.stack.append(tag)
        self.in_style = self.in_style or tag == "style"

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()
        if tag == "style":
            self.in_style = False

    def handle_data(self, data):
        if not self.in_style:
            self.text.append(data)


def parse(fragment: str) -> _Checker:
    checker = _Checker()
    checker.feed(fragment)
    checker.close()
    assert not checker.problems and not checker.stack, (checker.problems, checker.stack)
    return checker


def assert_self_contained(fragment: str):
    assert "<script" not in fragment.lower() and "<link" not in fragment.lower()
    assert not re.search(r"(src|href)\s*=\s*[\"']?\s*(https?:)?//", fragment, re.I)
    assert "@import" not in fragment and "url(" not in fragment


@pytest.fixture(scope="module")
def cmp(fake_comparison):
    return fake_comparison


@pytest.fixture(scope="module")
def data(fake_comparison):
    return fake_comparison.data


@pytest.fixture(scope="module")
def cmp_html(cmp):
    return cmp._repr_html_()


def summary(fit, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # constant components: R-hat and ESS are NaN
        return az.summary(fit.idata, round_to="none", **kwargs)


# ------------------------------------------------------------------------------------------------ Fit
def test_fit_html_shows_run_and_summary(cmp):
    fit = cmp.fits["fake_ok"]
    text = fit._repr_html_()
    checker = parse(text)
    assert checker.tags[0] == ("div", {"class": "bz-fit"})
    assert_self_contained(text)
    assert "<code>fake_ok</code> · mcmc" in text
    attrs = fit.idata.posterior.attrs
    assert f"{attrs['inference_library']} {attrs['inference_library_version']}" in text
    assert "2 chains × 200 draws" in text
    for key in ("compile", "tune", "sample", "total"):
        assert f"{key} {fit.timing[key]:.2f} s" in text
    assert "seed = 3" in text
    # the summary's numbers, formatted as shown: 4 significant digits, ESS as an integer, R-hat to 3 decimals
    full = summary(fit)
    for label in ("log_beta", "w[0]", "w[9]"):
        row = full.loc[label]
        cells = re.search(rf'<th class="txt">{re.escape(label)}</th>(.*?)</tr>', text).group(1)
        assert cells.startswith(f"<td>{row['mean']:.4g}</td><td>{row['sd']:.4g}</td>")
        assert f"<td>{row['ess_bulk']:.0f}</td><td>{row['ess_tail']:.0f}</td>" in cells
        assert f"{row['r_hat']:.3f}" in cells
    # R-hat above 1.01 is flagged, as in the report (log_alpha is constant: no R-hat)
    shown = ["log_beta"] + [f"{v}[{i}]" for v in ("w", "log_alpha") for i in range(HTML_ROWS_PER_VARIABLE)]
    flagged = [label for label in shown if full.loc[label, "r_hat"] > 1.01]
    assert flagged and text.count('<td class="flag">') == len(flagged)
    for label in flagged:
        assert re.search(rf'<th class="txt">{re.escape(label)}</th>.*?<td class="flag">[0-9.]+ ⚠</td></tr>', text)


def test_fit_html_truncates_large_variables(cmp):
    fit = cmp.fits["fake_vb"]
    m = fit.posterior["w"].shape[-1]
    text = fit._repr_html_()
    assert m > HTML_ROWS_PER_VARIABLE
    rows = re.findall(r'<th class="txt">(w\[\d+\])</th>', text)
    assert rows == [f"w[{i}]" for i in range(HTML_ROWS_PER_VARIABLE)]
    assert (f"w: first {HTML_ROWS_PER_VARIABLE} of {m} components shown "
            f"({m - HTML_ROWS_PER_VARIABLE} left out)") in text
    assert "log_beta: first" not in text     # a scalar is shown whole
    # an approximation's R-hat is not applicable; its other info keys are shown
    assert text.count(">n/a</td>") == 2 * HTML_ROWS_PER_VARIABLE + 1
    assert "iterations = 40" in text and "converged = True" in text


def test_fit_html_of_an_image_stays_small():
    rng = np.random.default_rng(0)
    idata = az.from_dict(posterior={"x": rng.normal(size=(2, 30, 64, 48)), "psf": rng.normal(size=(2, 30, 3, 4))})
    fit = Fit(idata=idata, backend="<img-sampler>", kind="mcmc", timing={"sample": 1.5},
              info={"warnings": ["R-hat > 1.01 for <x>", "2 divergences & more"], "divergences": 2,
                    "converged": False})
    text = fit._repr_html_()
    parse(text)
    # the first rows in C order, from the corner of the image only
    assert re.findall(r'<th class="txt">(x\[[^<]*)</th>', text) == [f"x[0, {j}]" for j in range(10)]
    assert "x: first 10 of 3072 components shown (3062 left out)" in text
    # psf (3 x 4): the last dimension is shorter than 10 rows, so the first rows span three of its rows
    assert re.findall(r'<th class="txt">(psf\[[^<]*)</th>', text) == [f"psf[{i}, {j}]" for i in range(3)
                                                                         for j in range(4)][:10]
    assert "psf: first 10 of 12 components shown (2 left out)" in text
    mean = float(idata.posterior["x"].values[:, :, 0, 3].mean())
    assert f'<th class="txt">x[0, 3]</th><td>{mean:.4g}</td>' in text
    assert len(text) < 12_000
    # user strings are escaped: the backend name and the warnings
    assert "<code>&lt;img-sampler&gt;</code>" in text and "<img-sampler>" not in text
    assert '<ul class="warn"><li>R-hat &gt; 1.01 for &lt;x&gt;</li><li>2 divergences &amp; more</li></ul>' in text
    assert "converged = False" in text and "divergences = 2" in text
    assert "total 1.50 s" in text
    # a long list of warnings is cut, and says by how much
    noisy = dataclasses.replace(fit, info={**fit.info, "warnings": [f"warning {i}" for i in range(13)]})
    items = re.findall(r"<li>([^<]*)</li>", noisy._repr_html_())
    assert items == [f"warning {i}" for i in range(10)] + ["… and 3 more"]


def test_fit_repr_is_one_line(cmp):
    line = repr(cmp.fits["fake_ok"])
    assert "\n" not in line
    assert line.startswith("Fit(backend='fake_ok', kind='mcmc', chains=2, draws=200")


# ----------------------------------------------------------------------------------------- Comparison
def test_comparison_html_has_banner_table_and_figure(cmp, cmp_html):
    text = cmp_html
    checker = parse(text)
    assert checker.tags[0] == ("div", {"class": "bz-comparison"})
    assert_self_contained(text)
    # the report's banner: which reference, and that it fails its rules (two chains of 200 draws)
    assert "<strong>Reference posterior: fake_ok</strong>" in text
    assert cmp.reference.trusted is False and '<div class="banner bad">' in text
    assert "UNTRUSTED REFERENCE" in text
    # every backend has its row, in both tables; the failure is in its row
    for name in BACKENDS:
        assert text.count(f'<td class="txt">{name}</td>') == 2
    assert re.search(r'<tr class="failed">.*?fake_fail.*?' + fb.FAIL_MESSAGE, text, re.S)
    assert '<td class="flag">1 ⚠</td>' in text     # fake_ok's divergence
    table = cmp.table().set_index("backend")
    assert f">{table.loc['fake_vb', 'seconds']:.2f}</td>" in text
    assert f">{table.loc['fake_em', 'mse']:.3g}</td>" in text
    # one figure, a decodable PNG
    images = [attrs for tag, attrs in checker.tags if tag == "img"]
    assert len(images) == 1 and images[0]["alt"] == "accuracy against wall time"
    data = re.fullmatch(r"data:image/png;base64,([A-Za-z0-9+/=]+)", images[0]["src"]).group(1)
    png = base64.b64decode(data, validate=True)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = np.frombuffer(png[16:24], dtype=">u4")
    assert 400 < width < 1200 and 200 < height < 800


def test_comparison_css_is_scoped(cmp_html):
    style = re.search(r"<style>(.*?)</style>", cmp_html, re.S).group(1)
    selectors = [s.strip() for rule in re.findall(r"([^{}]+)\{", style) for s in rule.split(",")]
    assert selectors and all(s.startswith("div.bz-comparison") for s in selectors)
    # every rule of the report is there, under the scope
    assert scoped_css(CSS).count("{") == CSS.count("{")
    assert "div.bz-comparison td.flag{background:#ffd9d9" in style
    assert "div.bz-comparison{font-family" in style    # the report's body rule styles the block itself


def test_comparison_without_reference_shows_ess_per_second(data):
    cmp = bz.compare(bz.models.RVM(width=3.0), data, backends=["fake_ok", "fake_vb"], reference=None, draws=100,
                     tune=0, chains=2, seed=1, progress=False)
    text = cmp._repr_html_()
    parse(text)
    assert "<strong>No reference posterior.</strong>" in text
    assert re.findall(r'<img alt="([^"]*)"', text) == ["ESS per second"]
    with pytest.raises(ValueError, match="needs a reference"):
        cmp.plot("accuracy")
    with pytest.raises(ValueError, match="no reference"):
        cmp.plot("marginals")


def test_a_reference_without_draws_has_no_marginals_and_says_why(cmp):
    """A reference published as moments only (posteriordb's mcycle_gp-accel_gp): the figures that need the moments
    alone draw, the marginals over its draws are refused with the reason."""
    from bayeszoo.catalogue.reference import Reference

    ref = cmp.reference
    moments_only = dataclasses.replace(cmp, reference=Reference(name="moments only", moments=ref.moments, fit=None,
                                                                provenance=ref.provenance))
    with pytest.raises(ValueError, match="holds moments only"):
        moments_only.plot("marginals")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert isinstance(moments_only.plot("accuracy"), Figure)


# ---------------------------------------------------------------------------------- Comparison.plot
@pytest.mark.parametrize("kind", list(FIGURES))
def test_plot_returns_each_figure(cmp, kind):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fig = cmp.plot(kind)
    assert isinstance(fig, Figure)
    assert fig.axes and any(ax.has_data() for ax in fig.axes)
    # a notebook shows it as an image even before pyplot has set up the notebook's backend
    png = fig._repr_png_()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = np.frombuffer(png[16:24], dtype=">u4")
    assert (width, height) == fig.canvas.get_width_height()


def test_plot_picks_and_checks_the_backend(cmp):
    # the default is the first fit the figure applies to: the rank plot's is the one MCMC fit, the marginals'
    # the first fit that is not the reference
    assert cmp.plot("marginals").axes[0].get_legend().get_texts()[-1].get_text() == "fake_vb"
    em = cmp.plot("marginals", backend="fake_em")
    assert [t.get_text() for t in em.axes[0].get_legend().get_texts()] == ["reference", "fake_em"]
    assert len(cmp.plot("trace", backend="fake_vb").axes) == 2 * 5   # log_beta and the 4 largest weights
    with pytest.raises(ValueError, match=r"does not apply to 'fake_vb'.*\['fake_ok'\]"):
        cmp.plot("rank", backend="fake_vb")
    with pytest.raises(ValueError, match=r"no fit 'fake_fail'.*'fake_ok', 'fake_vb', 'fake_em'"):
        cmp.plot("trace", backend="fake_fail")
    with pytest.raises(ValueError, match="backend= applies to trace, rank, marginals only"):
        cmp.plot("family", backend="fake_ok")


def test_plot_refuses_an_unknown_name(cmp):
    with pytest.raises(ValueError) as info:
        cmp.plot("histogram")
    message = str(info.value)
    assert "unknown figure 'histogram'" in message
    for name in ("accuracy", "ess_per_second", "family", "objective", "trace", "rank", "marginals"):
        assert name in message


# ---------------------------------------------------------------------------------------------- Dataset
def test_dataset_html_shapes_classes_and_provenance():
    data = bz.datasets.load("ripley")
    text = data._repr_html_()
    parse(text)
    assert_self_contained(text)
    assert "<code>ripley</code> · task: classification" in text
    for name, shape in (("X", "(250, 2)"), ("y", "(250,)"), ("X_test", "(1000, 2)"), ("y_test", "(1000,)")):
        assert f'<th><code>{name}</code></th><td class="num">{shape}</td>' in text
    # Ripley's synthetic data: 125 / 125 training and 500 / 500 test rows per class
    for label in (0, 1):
        assert (f'<tr><td class="num">{label}</td><td>class {label}</td><td class="num">125</td>'
                f'<td class="num">500</td></tr>') in text
    assert f"<th>licence</th><td>{data.meta['licence']}</td>" in text
    assert "<th>source</th><td>B. D. Ripley, Pattern Recognition and Neural Networks (1996)" in text
    assert "<th>split</th><td>canonical: 250 training / 1000 test rows as published</td>" in text


def test_dataset_html_of_own_data_escapes_and_counts():
    rng = np.random.default_rng(0)
    y = np.array([0, 1, 1, 2, 2, 2, 0, 2], dtype=float)
    data = bz.datasets.Dataset(X=rng.normal(size=(8, 3)), y=y, X_test=rng.normal(size=(3, 3)),
                               y_test=np.array([2.0, 2.0, 1.0]), name="<b>mine</b>",
                               meta={"task": "multiclass", "classes": {"0": "a<b", "1": "b", "2": "c"},
                                     "source": "lab notebook & co", "weights": np.ones((20, 30))})
    text = data._repr_html_()
    parse(text)
    assert "<code>&lt;b&gt;mine&lt;/b&gt;</code>" in text and "<b>mine" not in text
    counts = re.findall(r'<tr><td class="num">(\d)</td><td>([^<]*)</td><td class="num">(\d+)</td>'
                        r'<td class="num">(\d+)</td></tr>', text)
    assert counts == [("0", "a&lt;b", "2", "0"), ("1", "b", "2", "1"), ("2", "c", "4", "2")]
    assert "<th>source</th><td>lab notebook &amp; co</td>" in text
    assert "array 20 × 30 (float64)" in text      # an array in meta is described, not printed
    assert "[[1." not in text


def test_dataset_html_of_regression_has_no_class_table(data):
    text = data._repr_html_()
    parse(text)
    assert 'class="classes"' not in text
    assert '<th><code>X_test</code></th><td class="num">(100, 1)</td>' in text
    assert f"<th>citation</th><td>{data.meta['citation']}</td>" in text
