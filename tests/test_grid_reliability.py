"""A grid never reuses a stale fit, never loses work, and never reports NaN draws as a result."""
from __future__ import annotations

import os

import numpy as np
import pytest


import bayeszoo as bz  # noqa: E402
from tests.helpers import fake_backends as fb
from bayeszoo.comparison import Comparison  # noqa: E402
from bayeszoo.results import Fit  # noqa: E402

KW = dict(draws=60, tune=0, chains=2, seed=7, progress=False)


@pytest.fixture(scope="module")
def data():
    return bz.datasets.load("sinc", n=20, n_test=30, seed=0)


def _notes(cmp):
    return cmp.table().set_index("backend")["note"].to_dict()


def test_resume_refits_when_the_model_or_the_data_changed(data, tmp_path):
    out, log = tmp_path / "grid", str(tmp_path / "calls.log")
    opts = {"fake_ok": {"log": log}}
    bz.compare(bz.models.RVM(width=3.0), data, backends=["fake_ok"], out=out, options=opts, **KW)

    wider = bz.compare(bz.models.RVM(width=5.0), data, backends=["fake_ok"], out=out, options=opts, **KW)
    assert len(fb.calls(log)) == 2                                  # not the width-3 draws again
    assert wider.fits["fake_ok"].model_spec["width"] == 5.0
    assert _notes(wider)["fake_ok"] == "refitted: the saved fit was made with another model"

    other = bz.datasets.load("sinc", n=20, n_test=30, seed=1)       # same name and size, other values
    moved = bz.compare(bz.models.RVM(width=5.0), other, backends=["fake_ok"], out=out, options=opts, **KW)
    assert len(fb.calls(log)) == 3 and _notes(moved)["fake_ok"] == "refitted: the saved fit was made with another data"

    same = bz.compare(bz.models.RVM(width=5.0), other, backends=["fake_ok"], out=out, options=opts, **KW)
    assert len(fb.calls(log)) == 3 and _notes(same)["fake_ok"] == "resumed"
    np.testing.assert_array_equal(same.fits["fake_ok"].posterior["w"].values,
                                  moved.fits["fake_ok"].posterior["w"].values)


def test_the_cli_refits_when_a_model_option_changed_and_force_is_given(data, tmp_path, capsys):
    from bayeszoo.cli import main

    out = tmp_path / "cli"
    args = ["compare", "rvm", "--data", "sinc", "--data-opt", "n=20", "--backends", "fake_ok", "--draws", "30",
            "--tune", "0", "--chains", "1", "--quiet", "--out", str(out)]
    assert main(args + ["--model-opt", "width=3"]) == 0
    with pytest.raises(SystemExit) as info:          # the finished width-3 grid is not replaced silently
        main(args + ["--model-opt", "width=9"])
    assert info.value.code == 2
    assert "already holds a saved comparison (comparison.json); pass --force" in capsys.readouterr().err
    assert bz.load_fit(out / "fits" / "fake_ok.nc").model_spec["width"] == 3.0
    assert main(args + ["--model-opt", "width=9", "--force"]) == 0
    assert bz.load_fit(out / "fits" / "fake_ok.nc").model_spec["width"] == 9.0


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_an_unreadable_fit_is_moved_aside_and_refitted(data, tmp_path, damage):
    out, log = tmp_path / "grid", str(tmp_path / "calls.log")
    opts = {"fake_ok": {"log": log}, "fake_vb": {"log": log}}
    model = bz.models.RVM(width=3.0)
    first = bz.compare(model, data, backends=["fake_ok", "fake_vb"], out=out, options=opts, **KW)
    path = out / "fits" / "fake_vb.nc"
    content = b"not a netcdf file" if damage == "garbage" else path.read_bytes()[:200]
    path.write_bytes(content)

    again = bz.compare(model, data, backends=["fake_ok", "fake_vb"], out=out, options=opts, **KW)
    assert fb.calls(log) == ["fake_ok", "fake_vb", "fake_vb"]     # only the damaged cell ran again
    note = _notes(again)["fake_vb"]
    assert note.startswith("refitted: the saved fit could not be read and was moved to") and "fake_vb.nc" in note
    assert (out / "fits" / "fake_vb.nc.unreadable").read_bytes() == content   # kept, not deleted
    np.testing.assert_array_equal(again.fits["fake_vb"].posterior["w"].values,
                                  first.fits["fake_vb"].posterior["w"].values)
    assert bz.load_fit(path).backend == "fake_vb"


def test_an_unwritable_output_folder_fails_before_any_work(data, tmp_path):
    log = str(tmp_path / "calls.log")
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(ValueError, match="cannot write fits to"):
        bz.compare(bz.models.RVM(), data, backends=["fake_ok"], out=blocker / "run", options={"fake_ok": {"log": log}},
                   **KW)
    assert fb.calls(log) == []


def test_fits_are_returned_when_saving_fails(data, tmp_path, monkeypatch):
    def refuse(self, *args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(Fit, "save", refuse)
    monkeypatch.setattr(Comparison, "save", refuse)
    with pytest.warns(UserWarning, match="could not be saved"):
        cmp = bz.compare(bz.models.RVM(), data, backends=["fake_ok", "fake_vb"], out=tmp_path / "run", **KW)
    assert list(cmp.fits) == ["fake_ok", "fake_vb"] and cmp.errors == {}
    assert _notes(cmp)["fake_vb"].startswith("not saved to") and "disk full" in _notes(cmp)["fake_vb"]


def test_nan_draws_are_an_error_that_names_the_backend_and_the_variable(data):
    model = bz.models.RVM(width=3.0)
    with pytest.raises(ValueError, match="backend 'fake_nan' returned non-finite draws of w"):
        bz.fit(model, data, "fake_nan", **KW)
    cmp = bz.compare(model, data, backends=["fake_ok", "fake_nan"], **KW)
    table = cmp.table().set_index("backend")
    assert table.loc["fake_nan", "error"].startswith("ValueError: backend 'fake_nan' returned non-finite draws of w")
    assert np.isnan(table.loc["fake_nan", "ess_bulk_min"]) and table.loc["fake_ok", "error"] == ""


def test_a_non_finite_final_objective_is_refused_and_earlier_ones_are_allowed(data):
    from bayeszoo.results import build_fit

    model = bz.models.RVM(width=3.0)
    post = fb._draws(model, data, 1, 5, 0, rho=0.0)
    fit = build_fit(model, data, "x", "approximation", post, timing={}, objective={"elbo": [-np.inf, -3.0, -2.5]})
    assert float(fit.idata.objective["elbo"][-1]) == -2.5
    with pytest.raises(ValueError, match="backend 'x' ended with a non-finite objective elbo"):
        build_fit(model, data, "x", "approximation", post, timing={}, objective={"elbo": [-3.0, np.nan]})


def test_a_missing_saved_fit_is_reported_not_dropped(data, tmp_path):
    out = tmp_path / "grid"
    bz.compare(bz.models.RVM(), data, backends=["fake_ok", "fake_vb"], reference="fake_ok", out=out, **KW)
    os.remove(out / "fits" / "fake_ok.nc")
    loaded = bz.load_comparison(out)
    table = loaded.table().set_index("backend")
    assert list(table.index) == ["fake_ok", "fake_vb"]
    assert "fits/fake_ok.nc could not be read" in table.loc["fake_ok", "error"]
    assert loaded.reference is None


def test_compare_checks_counts_like_fit(data):
    for bad in ({"draws": 0}, {"chains": -1}, {"seed": -1}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            bz.compare(bz.models.RVM(), data, backends=["fake_ok"], **{**KW, **bad})


def test_predict_refuses_an_object_that_is_not_a_fit():
    with pytest.raises(ValueError, match="expected a bayeszoo Fit.*got str"):
        bz.models.RVM().predict("fits/em.nc", np.zeros((2, 1)))


def test_an_indefinite_gaussian_approximation_is_a_value_error():
    from bayeszoo.inference.approximations import GaussianApproximation

    cov = np.array([[1.0, 0.0], [0.0, -1e6]])           # no jitter up to 1e-3 makes this positive definite
    q = GaussianApproximation("w", np.zeros(2), cov=cov)
    with pytest.raises(ValueError, match="toy: the covariance of its Gaussian approximation is not positive definite"):
        q.draws(np.random.default_rng(0), 3, "toy")


def test_the_rvm_picture_does_not_hide_a_fit_made_with_another_model(data):
    from bayeszoo.diagnostics.rvm_plots import rvm_predict

    fit = bz.fit(bz.models.RVM(width=3.0), data, backend="em", **KW)
    assert rvm_predict(bz.models.RVM(width=3.0), fit, data.X_test).shape == (data.X_test.shape[0],)
    with pytest.raises(ValueError, match="other RVM options"):
        rvm_predict(bz.models.RVM(width=1.0), fit, data.X_test)
