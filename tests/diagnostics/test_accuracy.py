"""Accuracy against the reference: squared bias, the bias-aware ESS and its ranking, the running error against
time, an untrusted reference in the table and the report, and a table that fits the page."""
from __future__ import annotations

import html
import json
import math
import re
import warnings
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import bayeszoo as bz  # noqa: E402
from tests.helpers import fake_backends as fb
from bayeszoo.catalogue import Reference  # noqa: E402
from bayeszoo.comparison import Comparison  # noqa: E402
from bayeszoo.diagnostics import plots  # noqa: E402
from bayeszoo.diagnostics.metrics import (DEFAULT_TARGETS, accuracy, bias_aware_ess, noise_max,  # noqa: E402
                                          ranking_key, reference_errors, running_bias2, sampling_diagnostics,
                                          table_row, target_bias2)
from bayeszoo.diagnostics.report import meta_html, reference_banner, table_html, write_report  # noqa: E402
from bayeszoo.results import build_fit  # noqa: E402

CHAINS, DRAWS = 4, 2000


@pytest.fixture(scope="module")
def problem():
    return bz.models.RVM(width=3.0), bz.datasets.load("sinc", n=12, n_test=20, seed=1)


def _standard(rng, shape, exact=True):
    """Standard normal draws; with ``exact``, mean exactly 0 and sd exactly 1 (ddof=1) per component over chains
    and draws."""
    x = rng.standard_normal(shape)
    if not exact:
        return x
    flat = x.reshape(shape[0] * shape[1], -1)
    flat = (flat - flat.mean(0)) / flat.std(0, ddof=1)
    return flat.reshape(shape)


def _draws(problem, seed, w_shift=0.0, w_scale=1.0, beta_scale=1.0, chains=CHAINS, draws=DRAWS, exact=True):
    """Draws of the RVM's variables; with ``exact`` their moments are exactly those asked for, else they are
    i.i.d. draws with those moments (Monte-Carlo noise included)."""
    model, data = problem
    M = model.n_basis(data)
    rng = np.random.default_rng(seed)
    z = _standard(rng, (chains, draws, M + 1), exact)
    return {"w": w_scale * z[..., :M] + w_shift, "log_alpha": _standard(rng, (chains, draws, M)),
            "log_beta": beta_scale * z[..., M]}


def _fit(problem, draws, kind="mcmc", seconds=1.0, info=None, backend="constructed", timing=None):
    model, data = problem
    return build_fit(model, data, backend, kind, draws, timing=timing or {"sample": seconds}, info=info or {})


@pytest.fixture(scope="module")
def reference(problem):
    """A trusted reference: exact standard-normal moments from i.i.d. draws of four chains."""
    ref = Reference.from_fit(_fit(problem, _draws(problem, 0)), name="exact")
    assert ref.trusted, ref.problems
    return ref


NAMES = ["w", "log_beta"]


@pytest.fixture(scope="module")
def c(problem, reference):
    """The calibration of ess_ref over NAMES' components: the median worst b2 of one exact draw."""
    model, data = problem
    return noise_max(model.n_basis(data) + 1)


# --------------------------------------------------------------------------------------- squared bias
def test_squared_bias_of_a_known_shift(problem, reference, c):
    # means 0.5 reference sd off in every w, sd of log_beta 3 times the reference's
    fit = _fit(problem, _draws(problem, 1, w_shift=0.5, beta_scale=3.0))
    errs = reference_errors(fit, reference, NAMES)
    assert errs["bias2_mean_max"] == pytest.approx(0.25, rel=1e-9)
    assert errs["bias2_sd_max"] == pytest.approx(4.0, rel=1e-9)           # (3 - 1)^2 / 1
    assert errs["mean_err"] == pytest.approx(0.5, rel=1e-9) and errs["sd_err"] == pytest.approx(2.0, rel=1e-9)
    # the sd term counts twice (an sd is known twice as well as a mean): c / (2 x 4) is below one draw
    assert c < 8 and accuracy(fit, reference, NAMES, ess_bulk_min=5000.0)["ess_ref"] == 0.0
    only_mean = _fit(problem, _draws(problem, 2, w_shift=0.5))
    assert accuracy(only_mean, reference, NAMES, ess_bulk_min=5000.0)["ess_ref"] == pytest.approx(c / 0.25,
                                                                                                  rel=1e-9)


def test_a_fit_against_its_own_summary_is_exact(problem):
    fit = _fit(problem, fb._draws(*problem, chains=2, draws=300, seed=5, rho=0.5))
    errs = reference_errors(fit, Reference.from_fit(fit), NAMES)
    assert errs["mean_err"] == 0.0 and errs["sd_err"] == 0.0


def test_ess_ref_is_bounded_by_the_fits_own_ess(problem, reference, c):
    exact = _fit(problem, _draws(problem, 0))                  # the reference's own draws: zero bias
    diag = sampling_diagnostics(exact, NAMES)
    row = accuracy(exact, reference, NAMES, diag["ess_bulk_min"])
    assert row["bias2_mean_max"] < 1e-25
    assert row["ess_ref"] == diag["ess_bulk_min"]              # MCMC: never worth more than its ESS
    assert row["ess_ref_per_s"] == pytest.approx(diag["ess_bulk_min"] / 1.0)
    approx = _fit(problem, _draws(problem, 0), kind="approximation")
    # an unbiased approximation: bounded by the draws it returned, the only noise it has
    assert accuracy(approx, reference, NAMES, diag["ess_bulk_min"])["ess_ref"] == CHAINS * DRAWS
    # a small bias caps it below that: c / b2
    shifted = _fit(problem, _draws(problem, 0, w_shift=0.1), kind="approximation")
    assert accuracy(shifted, reference, NAMES, math.nan)["ess_ref"] == pytest.approx(100.0 * c, rel=1e-9)


@pytest.mark.parametrize("d", [1, 10, 100, 1000])
def test_exact_draws_are_worth_their_number_whatever_the_dimension(d):
    """The calibration c_k (module docstring of metrics): over repeated sets of n exact i.i.d. draws of a known
    d-dimensional Gaussian, the median ess_ref is n. Without it (c = 1) it would be n / c: 1.1 at d = 1, 12.8 at
    d = 1000."""
    n, repeats = 200, 400
    rng = np.random.default_rng(d)
    worth = np.empty(repeats)
    for r in range(repeats):
        x = rng.standard_normal((n, d)) * 2.0 + 3.0            # N(3, 2^2) per component
        b2_mean = np.max((x.mean(0) - 3.0) ** 2 / 4.0)
        b2_sd = np.max((x.std(0, ddof=1) - 2.0) ** 2 / 4.0)
        worth[r] = bias_aware_ess(b2_mean, b2_sd, math.inf, noise_max(d))
    # the median of 400 draws of worth / n has a standard error of about 0.1 / sqrt(400 / 4) at most
    assert abs(np.median(worth) / n - 1.0) < 0.1
    assert np.median(worth) / noise_max(d) < n / 1.1      # uncalibrated (c = 1), the maximum counts too few


def test_ess_per_gradient_only_for_samplers_that_count_gradients(problem):
    draws = _draws(problem, 3)
    with_grads = sampling_diagnostics(_fit(problem, draws, info={"n_grad": 10_000}), NAMES)
    assert with_grads["ess_per_grad"] == pytest.approx(with_grads["ess_bulk_min"] / 10_000)
    assert math.isnan(sampling_diagnostics(_fit(problem, draws), NAMES)["ess_per_grad"])
    advi = _fit(problem, draws, kind="approximation", info={"n_grad": 10_000})
    assert math.isnan(sampling_diagnostics(advi, NAMES)["ess_per_grad"])


def test_biased_fast_approximation_ranks_below_an_unbiased_sampler(problem, reference):
    model, data = problem
    # a slow sampler with independent, unbiased draws, and a fast approximation 2.5 reference sds off: further
    # than one exact draw would put its worst mean
    sampler = _fit(problem, _draws(problem, 12, draws=500, exact=False), seconds=20.0, backend="sampler")
    approx = _fit(problem, _draws(problem, 13, w_shift=2.5, draws=500), kind="approximation", seconds=0.01,
                  backend="approx")
    rows = pd.DataFrame([table_row(model, data, "sampler", sampler, reference),
                         table_row(model, data, "approx", approx, reference)]).set_index("backend")
    # by plain ESS per second the approximation wins by far; by the bias-aware ESS it is worth nothing
    assert rows.loc["approx", "ess_bulk_per_s"] > 100 * rows.loc["sampler", "ess_bulk_per_s"]
    assert rows.loc["approx", "bias2_mean_max"] == pytest.approx(6.25, rel=1e-9)
    assert rows.loc["approx", "ess_ref"] == 0.0 and rows.loc["approx", "ess_ref_per_s"] == 0.0
    assert rows.loc["sampler", "ess_ref"] >= 1
    assert rows.loc["sampler", "ess_ref_per_s"] > rows.loc["approx", "ess_ref_per_s"]
    assert rows["reference_trusted"].tolist() == [True, True]
    assert math.isinf(rows.loc["approx", "seconds_to_target"]) and rows.loc["sampler", "seconds_to_target"] <= 20.0


def test_a_mildly_biased_fast_approximation_ranks_below_a_sampler_that_reaches_the_reference(problem, reference):
    # 0.77 reference sds off, 2000 times faster: per second it outscores the sampler, but it never gets as close
    # to the posterior as the target asks, and the ranking (seconds_to_target) puts it last
    sampler = _fit(problem, _draws(problem, 14, draws=500, exact=False), seconds=20.0)
    approx = _fit(problem, _draws(problem, 15, w_shift=0.77, draws=500), kind="approximation", seconds=0.01)
    s_row = accuracy(sampler, reference, NAMES, sampling_diagnostics(sampler, NAMES)["ess_bulk_min"])
    a_row = accuracy(approx, reference, NAMES, math.nan)
    assert a_row["ess_ref"] == pytest.approx(noise_max(len(approx.posterior["w"][0, 0]) + 1) / 0.77 ** 2, rel=1e-9)
    assert a_row["ess_ref_per_s"] > s_row["ess_ref_per_s"]
    assert math.isinf(a_row["seconds_to_target"]) and 0 < s_row["seconds_to_target"] <= 20.0
    # an approximation that meets the target is timed by its total time, and then ranks by speed
    close = _fit(problem, _draws(problem, 16, w_shift=0.2, draws=500), kind="approximation", seconds=0.01)
    assert accuracy(close, reference, NAMES, math.nan)["seconds_to_target"] == pytest.approx(0.01)


def test_seconds_to_target_is_where_the_running_error_stays_below_the_target(problem, reference):
    fit = _fit(problem, _draws(problem, 23, chains=2, draws=1000, exact=False),
               timing={"compile": 1.0, "tune": 2.0, "sample": 4.0})
    row = accuracy(fit, reference, NAMES, sampling_diagnostics(fit, NAMES)["ess_bulk_min"])
    run = running_bias2(fit, reference, NAMES)
    first = run["seconds"] >= row["seconds_to_target"]
    target = target_bias2(reference, NAMES, DEFAULT_TARGETS[0])
    assert np.all(run["bias2"][first] <= target)                  # below from then on
    earlier = run["seconds"] < row["seconds_to_target"]
    assert earlier.any() and run["bias2"][earlier][-1] > target   # and not from the point before
    assert 3.0 < row["seconds_to_target"] < 7.0
    # no reference, nothing to time; a sampler biased beyond the target never reaches it
    assert math.isnan(accuracy(fit, None, NAMES, 100.0)["seconds_to_target"])
    biased = _fit(problem, _draws(problem, 24, w_shift=1.0))   # b2 1, above c / 10
    assert math.isinf(accuracy(biased, reference, NAMES, 100.0)["seconds_to_target"])


# ------------------------------------------------------------------------------------- running error
def test_running_error_ends_at_the_full_sample_value(problem, reference):
    fit = _fit(problem, _draws(problem, 22, chains=2, draws=1000, exact=False),
               timing={"compile": 1.0, "tune": 2.0, "sample": 4.0})
    run = running_bias2(fit, reference, NAMES, n_points=40)
    full = reference_errors(fit, reference, NAMES)
    assert run["bias2_mean"][-1] == pytest.approx(full["bias2_mean_max"], rel=1e-9)
    assert run["bias2_sd"][-1] == pytest.approx(full["bias2_sd_max"], rel=1e-9)
    assert run["draws"][-1] == 1000 and np.all(np.diff(run["draws"]) > 0)
    # time: compile + tune, then the sampling time in proportion to the draws kept so far
    np.testing.assert_allclose(run["seconds"], 3.0 + 4.0 * run["draws"] / 1000)
    # unbiased i.i.d. draws: the error falls as 1 / draws (up to noise) over three decades
    assert run["bias2"][-1] < run["bias2"][:3].mean() / 20
    assert np.all(run["bias2"] * 2 * run["draws"] < 100)


def test_running_error_of_a_biased_sampler_levels_off_at_its_bias(problem, reference):
    fit = _fit(problem, _draws(problem, 31, w_shift=0.5))
    run = running_bias2(fit, reference, NAMES)
    assert run["bias2_mean"][-1] == pytest.approx(0.25, rel=1e-9)
    assert np.all(run["bias2_mean"][-10:] > 0.2)


def test_accuracy_figure_leaves_out_the_reference_and_ranks_by_seconds_to_target(problem, reference):
    model, data = problem
    fits = {"exact": reference.fit,
            "sampler": _fit(problem, _draws(problem, 41, draws=500), seconds=5.0),
            "approx": _fit(problem, _draws(problem, 42, w_shift=2.5, draws=500), kind="approximation",
                           seconds=0.01)}
    cmp = Comparison(model=model, data=data, fits=fits, reference=reference, order=list(fits))
    curves = {c["label"]: c for c in plots.accuracy_curves(cmp, reference)}
    assert set(curves) == {"sampler", "approx"}
    assert curves["approx"]["bias2"].tolist() == pytest.approx([6.25])
    table = pd.DataFrame([table_row(model, data, k, f, reference) for k, f in fits.items()])
    fig = plots.accuracy_figure(cmp, reference, table)
    bars = fig.axes[1]
    assert [t.get_text() for t in bars.get_yticklabels()] == ["sampler", "approx"]
    assert any(t.get_text() == "never (worth 0 exact draws)" for t in bars.texts)


# ------------------------------------------------------------------------- an unconverged sampler
def _stuck_draws(problem, seed, draws=500):
    """Two chains that never meet: each a slow AR(1) (rho 0.999) around its own centre, +-0.8 reference sds,
    scaled so that the pooled draws have exactly the reference's means and sds. Its final estimate is perfect by
    luck; R-hat and ESS say that the chains have not mixed."""
    model, data = problem
    M = model.n_basis(data)
    rng = np.random.default_rng(seed)
    eps = rng.standard_normal((2, draws, M + 1))
    ar = np.empty_like(eps)
    ar[:, 0] = eps[:, 0]
    for t in range(1, draws):
        ar[:, t] = 0.999 * ar[:, t - 1] + np.sqrt(1 - 0.999 ** 2) * eps[:, t]
    z = np.array([-0.8, 0.8])[:, None, None] + 0.6 * ar
    z = (z - z.mean((0, 1))) / z.reshape(-1, M + 1).std(0, ddof=1)
    return {"w": z[..., :M], "log_alpha": _standard(rng, (2, draws, M)), "log_beta": z[..., M]}


def test_an_unconverged_sampler_is_measured_but_never_ranks_above_a_converged_one(problem, reference):
    model, data = problem
    stuck = _fit(problem, _stuck_draws(problem, 71), seconds=0.5, backend="stuck")
    good = _fit(problem, _draws(problem, 72, draws=500, exact=False), seconds=200.0, backend="good")
    diag = sampling_diagnostics(stuck, NAMES)
    assert diag["rhat_max"] > 1.1 and diag["ess_bulk_min"] < 50
    assert diag["converged"] is False
    assert "R-hat" in diag["convergence_problems"] and "bulk ESS" in diag["convergence_problems"]
    # its pooled moments are exact, so by accuracy alone it would rank first, in well under a second
    lucky = accuracy(stuck, reference, NAMES, diag["ess_bulk_min"])
    assert lucky["bias2_mean_max"] < 1e-20 and lucky["seconds_to_target"] <= 0.5
    rows = pd.DataFrame([table_row(model, data, "stuck", stuck, reference),
                         table_row(model, data, "good", good, reference)]).set_index("backend")
    assert rows.loc["good", "converged"] == True  # noqa: E712 (a numpy bool in the frame)
    # its time stands (the table measures, the ranking judges), and the ranking puts it after the converged one
    assert rows.loc["stuck", "seconds_to_target"] <= 0.5 < rows.loc["good", "seconds_to_target"] <= 200.0
    ranked = sorted(rows.reset_index().to_dict("records"), key=lambda r: ranking_key(r, "seconds_to_target"))
    assert [r["backend"] for r in ranked] == ["good", "stuck"]
    # approximations are not judged by R-hat: their column is empty, their time stands
    approx = _fit(problem, _draws(problem, 73, w_shift=0.1, draws=500), kind="approximation", seconds=0.01)
    a_row = table_row(model, data, "approx", approx, reference)
    assert a_row["converged"] is None and a_row["seconds_to_target"] == pytest.approx(0.01)


def test_divergences_alone_fail_the_convergence_rule(problem):
    fit = _fit(problem, _draws(problem, 74, draws=500, exact=False))
    fit.idata.add_groups(sample_stats={"diverging": np.eye(CHAINS, 500, dtype=bool)})
    diag = sampling_diagnostics(fit, NAMES)
    assert diag["divergences"] == CHAINS and diag["converged"] is False
    assert diag["convergence_problems"] == f"{CHAINS} divergent transitions"


def test_the_verdict_and_the_ranking_put_an_unconverged_sampler_last(problem, reference, tmp_path):
    model, data = problem
    fits = {"stuck": _fit(problem, _stuck_draws(problem, 81), seconds=0.5, backend="stuck"),
            "good": _fit(problem, _draws(problem, 82, draws=500, exact=False), seconds=20.0, backend="good"),
            "approx": _fit(problem, _draws(problem, 83, w_shift=2.5, draws=500), kind="approximation",
                           seconds=0.01, backend="approx")}
    cmp = Comparison(model=model, data=data, fits=fits, reference=reference, order=list(fits))
    table = cmp.table()
    assert table.set_index("backend")["converged"].tolist() == [False, True, None]
    text = cmp.verdict()
    assert text.startswith("good is the fastest to the rough target (worth 10 exact draws")
    assert "Never reaching the rough target: approx (worst mean 2.5 reference sds off)." in text
    assert "Diagnostics fail, so ranked after every fit whose diagnostics pass: stuck (R-hat" in text
    bars = plots.accuracy_figure(cmp, reference, table).axes[1]
    assert [t.get_text() for t in bars.get_yticklabels()] == ["good", "approx", "stuck"]
    assert any("not converged" in t.get_text() for t in bars.texts)
    # in the table, the flag stands beside its times
    flagged_times = re.findall(r'<td class="flag" title="its own diagnostics fail \(R-hat[^"]*">([^<]*)</td>',
                               table_html(table, cmp))
    assert len(flagged_times) == 2 and all(t.endswith(" ⚠") for t in flagged_times)
    report = open(write_report(cmp, str(tmp_path / "r.html")), encoding="utf-8").read()
    assert report.index('class="verdict"') < report.index('class="banner')
    assert html.escape(text) in report
    assert "<td class=\"flag\">False ⚠</td>" in report


# ------------------------------------------------------------------------------- untrusted reference
@pytest.fixture(scope="module")
def untrusted(problem):
    """A reference from one short, sticky chain: it breaks the rules (one chain, low ESS)."""
    model, data = problem
    ref = Reference.from_fit(_fit(problem, fb._draws(model, data, 1, 200, seed=51, rho=0.9)), name="short run")
    assert not ref.trusted
    return ref


def test_untrusted_reference_is_flagged_in_the_table(problem, untrusted):
    model, data = problem
    fit = _fit(problem, _draws(problem, 52, draws=300), kind="approximation")
    row = table_row(model, data, "vb", fit, untrusted)
    assert row["reference_trusted"] is False
    assert math.isfinite(row["mean_err"])        # the numbers stay in the table, flagged by the column
    assert table_row(model, data, "vb", fit, None)["reference_trusted"] is None
    cells = table_html(pd.DataFrame([row]))
    # the five accuracy columns of the table keep their numbers, greyed, each with the reason in its tooltip
    untrusted_cells = re.findall(r'<td class="untrusted" title="([^"]*)">([^<]*)</td>', cells)
    assert len(untrusted_cells) == 5 and all("fails its validation rules" in tip for tip, _ in untrusted_cells)
    assert f"{row['mean_err']:.3g}" in [text for _, text in untrusted_cells] and "reference_trusted" not in cells


def test_untrusted_reference_banner_in_the_report(problem, untrusted, tmp_path):
    model, data = problem
    fits = {"vb": _fit(problem, _draws(problem, 61, draws=300), kind="approximation"),
            "sampler": _fit(problem, _draws(problem, 62, draws=300))}
    cmp = Comparison(model=model, data=data, fits=fits, reference=untrusted, order=list(fits))
    text = open(write_report(cmp, str(tmp_path / "r.html")), encoding="utf-8").read()
    banner = re.search(r'<div class="banner bad">(.*?)</div>', text, re.S)
    assert banner and text.index('class="banner bad"') < text.index('<table class="meta">')   # at the top
    assert "Reference posterior: short run" in banner.group(1) and "UNTRUSTED REFERENCE" in banner.group(1)
    for problem_text in untrusted.problems:
        assert f"<li>{html.escape(problem_text)}</li>" in banner.group(1)
    assert "engine constructed (mcmc, 1 chain × 200 draws)" in banner.group(1)
    assert "R-hat max n/a" in banner.group(1) and "min bulk ESS" in banner.group(1)   # one chain: no R-hat
    assert "What to try" in banner.group(1) and "target_accept" in banner.group(1)
    table = re.search(r'<table class="cmp">(.*?)</table>', text, re.S).group(1)
    assert table.count('<td class="untrusted"') == 10
    # the accuracy figure is drawn without the ranking, and the verdict says why
    fig = plots.accuracy_figure(cmp, untrusted, cmp.table())
    assert len(fig.axes) == 1 and "nothing is ranked" in fig.axes[0].get_title()
    assert "fails its validation rules" in cmp.verdict() and "nothing is ranked" in cmp.verdict()


def test_banner_of_a_trusted_reference_and_of_none(problem, reference):
    single = reference_banner(reference)     # one run passing its rules: said to be one, not a validated reference
    assert 'class="banner unchecked"' in single and "Single run, not cross-checked" in single
    assert "min bulk ESS" in single and "passes the validation rules." not in single
    checked = Reference.from_fit(reference.fit, crosscheck=_fit(problem, _draws(problem, 1)), name="two runs")
    ok = reference_banner(checked)
    assert 'class="banner ok"' in ok and "passes the validation rules" in ok and "cross-checked by" in ok
    none = reference_banner(None)
    assert 'class="banner none"' in none and 'reference="nuts"' in none and "catalogue" in none
    assert "bz.build_reference(model, data)" in none


# ----------------------------------------------------------------------------------- readable report
def test_long_dataset_metadata_is_folded_away(problem):
    model, _ = problem
    data = bz.datasets.Dataset(np.zeros((4, 1)), np.arange(4.0), name="img",
                               meta={"noise_sd": 0.1, "true_image": np.arange(1024.0).reshape(32, 32),
                                     "feature_names": [f"feature {i}" for i in range(50)]})
    text = meta_html(SimpleNamespace(model=model, data=data))
    assert "<th>options</th><td>noise_sd=0.1</td>" in text
    assert "<details" in text and "array 32 × 32" in text and "50 items" in text
    assert "[[" not in text and "feature 49" not in text


# ---------------------------------------------------------- the ranking: two targets, flagged fits ranked last
def _diverging(fit, n=1):
    """``fit`` with ``n`` divergent transitions recorded (its draws unchanged)."""
    diverging = np.zeros((fit.n_chains, fit.n_draws), dtype=bool)
    diverging.flat[:n] = True
    fit.idata.add_groups(sample_stats={"diverging": diverging})
    return fit


def _ranked_figure(cmp):
    """The ranking panel of the accuracy figure, drawn (so that the texts and the legend have their places)."""
    fig = plots.accuracy_figure(cmp, cmp.reference, cmp.table())
    fig.canvas.draw()
    return fig, fig.axes[1]


def _covered(fig, ax) -> list[str]:
    """The texts of ``ax`` that a legend of the figure overlaps."""
    renderer = fig.canvas.get_renderer()
    legends = [lg for a in fig.axes for lg in ([a.get_legend()] if a.get_legend() else [])] + list(fig.legends)
    boxes = [lg.get_window_extent(renderer) for lg in legends]
    return [t.get_text() for t in ax.texts if t.get_text().strip()
            and any(box.overlaps(t.get_window_extent(renderer)) for box in boxes)]


def test_a_sampler_with_one_divergence_and_the_best_error_is_ranked_after_the_clean_ones(problem, reference):
    model, data = problem
    # exact moments (the best error of all) but one divergent transition; a clean sampler with Monte-Carlo noise;
    # an approximation far off
    fits = {"one_divergence": _diverging(_fit(problem, _draws(problem, 91, draws=500), seconds=2.0)),
            "clean": _fit(problem, _draws(problem, 92, draws=500, exact=False), seconds=5.0),
            "approx": _fit(problem, _draws(problem, 93, w_shift=2.5, draws=500), kind="approximation",
                           seconds=0.01)}
    cmp = Comparison(model=model, data=data, fits=fits, reference=reference, order=list(fits))
    rows = cmp.table().set_index("backend")
    assert rows.loc["one_divergence", "converged"] == False  # noqa: E712 (a numpy bool in the frame)
    assert rows.loc["one_divergence", "convergence_problems"] == "1 divergent transition"
    assert rows.loc["one_divergence", "mean_err"] < rows.loc["clean", "mean_err"] / 10
    # measured, not dropped: its times to both targets stand in the table
    for column in ("seconds_to_target", "seconds_to_precise"):
        assert 0 < rows.loc["one_divergence", column] <= 2.0 and 0 < rows.loc["clean", column] <= 5.0
    text = cmp.verdict()
    assert "No backend reaches" not in text
    assert text.startswith("clean is the fastest to the rough target (worth 10 exact draws")
    flagged = ("Diagnostics fail, so ranked after every fit whose diagnostics pass: one_divergence (1 divergent "
               "transition; ")
    assert flagged in text and "the smallest error of all" in text.split(flagged)[1]
    assert text.index("clean") < text.index(flagged)
    # the ranking figure lists it after every clean fit, with its time and its flag beside it
    fig, bars = _ranked_figure(cmp)
    assert [t.get_text() for t in bars.get_yticklabels()] == ["clean", "approx", "one_divergence"]
    flag = [t.get_text() for t in bars.texts if "not converged" in t.get_text()]
    assert len(flag) == 1 and re.search(r"\d s", flag[0]), flag
    assert _covered(fig, bars) == []


def test_a_flagged_sampler_that_alone_reaches_the_target_is_named_with_its_flag(problem, reference):
    model, data = problem
    fits = {"one_divergence": _diverging(_fit(problem, _draws(problem, 94, draws=500), seconds=2.0)),
            "approx": _fit(problem, _draws(problem, 95, w_shift=2.5, draws=500), kind="approximation",
                           seconds=0.01)}
    text = Comparison(model=model, data=data, fits=fits, reference=reference, order=list(fits)).verdict()
    assert "No backend reaches" not in text
    assert text.startswith("one_divergence (its diagnostics fail) is the fastest to the rough target")
    assert "Never reaching the rough target: approx (worst mean 2.5 reference sds off)." in text


def _laplace_and_ep(problem, reference):
    """A fast approximation that meets the rough target only, a slower one that meets the precise target, and
    an exact sampler, slower still."""
    rough, precise = (target_bias2(reference, NAMES, n) for n in DEFAULT_TARGETS)
    laplace_off = (rough * precise) ** 0.25       # b2 between the two targets
    ep_off = 0.5 * math.sqrt(precise)
    assert precise < laplace_off ** 2 < rough
    return {"laplace": _fit(problem, _draws(problem, 96, w_shift=laplace_off, draws=500), kind="approximation",
                            seconds=0.01),
            "ep": _fit(problem, _draws(problem, 97, w_shift=ep_off, draws=500), kind="approximation", seconds=0.05),
            "nuts": _fit(problem, _draws(problem, 98, draws=500), seconds=5.0)}


def test_a_rough_fast_approximation_and_a_precise_slower_one_are_both_named(problem, reference):
    model, data = problem
    fits = _laplace_and_ep(problem, reference)
    cmp = Comparison(model=model, data=data, fits=fits, reference=reference, order=list(fits))
    rows = cmp.table().set_index("backend")
    assert rows.loc["laplace", "seconds_to_target"] == pytest.approx(0.01)
    assert math.isinf(rows.loc["laplace", "seconds_to_precise"])
    assert rows.loc["ep", "seconds_to_target"] == rows.loc["ep", "seconds_to_precise"] == pytest.approx(0.05)
    assert rows.loc["nuts", "seconds_to_precise"] <= 5.0
    lines = cmp.verdict_lines()
    assert lines[0].startswith("laplace is the fastest to the rough target (worth 10 exact draws, about ")
    assert lines[1].startswith("ep is the fastest to the precise target (worth 100 exact draws, about ")
    assert lines[2].startswith("nuts is the most accurate (worst ")
    assert any(line.startswith("Reaching the rough target but not the precise one: laplace (worst mean ")
               for line in lines)
    # the "about ... sds" is the worst mean error each target allows
    rough, precise = (target_bias2(reference, NAMES, n) for n in DEFAULT_TARGETS)
    assert f"about {math.sqrt(rough):.2g} reference sds" in lines[0]
    assert f"about {math.sqrt(precise):.2g} reference sds" in lines[1]
    # both times are columns of the report's table, headed by their targets
    head = table_html(cmp.table(), cmp)
    assert ">s to 10 draws</th>" in head and ">s to 100 draws</th>" in head


@pytest.mark.parametrize("targets, message", [
    ((100, 10), "rough target below the precise"), ((10, 10), "rough target below the precise"),
    ((0.5, 10), "at least 1"), ((10,), "two numbers"), ("10,100", "two numbers"), (10, "two numbers"),
    ((10, math.inf), "finite"), ((10, math.nan), "finite"), ((True, 100), "two numbers"), (("10", 100), "two numbers"),
])
def test_targets_are_checked_before_anything_runs(problem, targets, message, tmp_path):
    model, data = problem
    log = tmp_path / "calls.log"
    with pytest.raises(ValueError, match=message) as info:
        bz.compare(model, data, backends=["fake_ok"], targets=targets, options={"fake_ok": {"log": str(log)}},
                   draws=20, tune=0, chains=2, progress=False)
    assert "e.g. targets=(10, 100)" in str(info.value)
    assert fb.calls(str(log)) == []
    with pytest.raises(ValueError, match=message):
        Comparison(model=model, data=data, fits={}, targets=targets)


def test_targets_of_ones_own_set_the_columns_the_verdict_and_the_report(problem, reference, tmp_path):
    model, data = problem
    fits = _laplace_and_ep(problem, reference)
    cmp = Comparison(model=model, data=data, fits=fits, reference=reference, order=list(fits), targets=(10, 1000))
    rows = cmp.table().set_index("backend")
    assert math.isinf(rows.loc["ep", "seconds_to_precise"])    # worth about 400 draws: not 1000
    assert rows.loc["ep", "seconds_to_target"] == pytest.approx(0.05)
    text = cmp.verdict()
    assert "the precise target (worth 1000 exact draws" in text and "ep is the fastest" not in text
    cmp.save(tmp_path / "saved")
    assert json.loads((tmp_path / "saved" / "comparison.json").read_text())["targets"] == [10, 1000]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # these constructed fits carry no data fingerprint: error rows on loading
        assert bz.load_comparison(tmp_path / "saved").targets == (10, 1000)
    report = (tmp_path / "saved" / "report.html").read_text(encoding="utf-8")
    assert ">s to 1000 draws</th>" in report and "worth 1000 exact draws" in report
    assert "worth 100 exact draws" not in report


def test_without_a_reference_the_speed_figure_marks_unconverged_samplers(problem):
    model, data = problem
    # by ESS per second the sampler with a divergence is the fastest; the chart must not rank it unmarked
    fits = {"one_divergence": _diverging(_fit(problem, _draws(problem, 99, draws=500), seconds=1.0)),
            "clean": _fit(problem, _draws(problem, 100, draws=500, exact=False), seconds=5.0)}
    cmp = Comparison(model=model, data=data, fits=fits, reference=None, order=list(fits))
    table = cmp.table().set_index("backend")
    assert table.loc["one_divergence", "ess_bulk_per_s"] > table.loc["clean", "ess_bulk_per_s"]
    fig = plots.ess_per_second_bars(cmp.table())
    fig.canvas.draw()
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["clean", "one_divergence"]
    labels = [t.get_text().strip() for t in ax.texts]
    assert labels == ["not converged: 1 divergent transition"]
    bars = [p for p in ax.patches if p.get_width() > 0]
    assert [bool(p.get_hatch()) for p in bars] == [False, True]
    assert _covered(fig, ax) == []
    # and the label stays inside the figure
    renderer = fig.canvas.get_renderer()
    assert fig.bbox.contains(*ax.texts[0].get_window_extent(renderer).p1)
    text = cmp.verdict()
    assert "nothing is ranked" in text and "Not converged: one_divergence (1 divergent transition)." in text
