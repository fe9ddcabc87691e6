"""The comparison grid: failures isolated, Dask executor, resume from saved fits, rebuild from disk."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest


import bayeszoo as bz  # noqa: E402
from tests.helpers import fake_backends as fb
from bayeszoo.cli import main as cli_main  # noqa: E402

KW = dict(draws=120, tune=0, chains=2, seed=7, progress=False)
NUMERIC = ["seconds", "ess_bulk_min", "ess_bulk_median", "ess_tail_min", "ess_bulk_per_s", "rhat_max",
           "divergences", "mean_err", "sd_err"]


@pytest.fixture(scope="module")
def problem():
    return bz.models.RVM(width=3.0), bz.datasets.load("sinc", n=30, n_test=50)


def _assert_same_draws(a, b):
    assert set(a.posterior.data_vars) == set(b.posterior.data_vars)
    for name in a.posterior.data_vars:
        np.testing.assert_array_equal(a.posterior[name].values, b.posterior[name].values)


def test_failing_backend_gives_error_row_and_others_run(problem):
    model, data = problem
    cmp = bz.compare(model, data, backends=["fake_ok", "fake_fail", "fake_vb"], reference="fake_ok", **KW)
    assert list(cmp.fits) == ["fake_ok", "fake_vb"]
    table = cmp.table().set_index("backend")
    assert list(table.index) == ["fake_ok", "fake_fail", "fake_vb"]
    assert table.loc["fake_fail", "error"] == f"RuntimeError: {fb.FAIL_MESSAGE}"
    assert table.loc[["fake_fail"], NUMERIC].isna().all(axis=None)
    for ok in ("fake_ok", "fake_vb"):
        assert table.loc[ok, "error"] == ""
        assert table.loc[ok, "ess_bulk_min"] > 10
    # the reference's own run is not measured against itself (NaN, not a zero error)
    assert np.isnan(table.loc["fake_ok", "mean_err"]) and table.loc["fake_ok", "divergences"] == 1
    assert table.loc["fake_vb", "mean_err"] > 0
    assert np.isnan(table.loc["fake_vb", "rhat_max"])  # approximation: no R-hat


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = distributed.Client(cluster)
    # the workers are fresh processes (with this one's sys.path): register the fake backends there
    client.run(exec, "import tests.helpers.fake_backends")
    yield client
    client.close()
    cluster.close()


def test_dask_grid_gives_the_same_fits_as_the_local_run(problem, dask_client, tmp_path):
    model, data = problem
    backends = ["fake_ok", "fake_vb", "fake_fail"]
    local = bz.compare(model, data, backends=backends, reference="fake_ok", **KW)
    log = str(tmp_path / "calls.log")
    options = {b: {"log": log} for b in backends}
    remote = bz.compare(model, data, backends=backends, reference="fake_ok", executor=dask_client.get_executor(),
                        options=options, **KW)
    assert list(remote.fits) == list(local.fits) == ["fake_ok", "fake_vb"]
    for label in local.fits:
        _assert_same_draws(local.fits[label], remote.fits[label])
    assert remote.errors["fake_fail"].startswith(f"RuntimeError: {fb.FAIL_MESSAGE}")
    assert sorted(fb.calls(log)) == sorted(backends)  # each ran exactly once, on a worker
    # it really ran on the workers (other processes), not here
    pids = dask_client.run(os.getpid)
    assert os.getpid() not in pids.values()
    t_local, t_remote = local.table(), remote.table()
    cols = ["ess_bulk_min", "ess_tail_min", "rhat_max", "mean_err", "sd_err", "mse"]
    pd.testing.assert_frame_equal(t_local[cols], t_remote[cols])


def test_resume_loads_saved_fits_and_completes_the_table(problem, tmp_path):
    model, data = problem
    out, log, marker = tmp_path / "run", str(tmp_path / "calls.log"), str(tmp_path / "flaky.marker")
    backends = ["fake_ok", "fake_vb", "fake_flaky"]
    options = {"fake_ok": {"log": log}, "fake_vb": {"log": log}, "fake_flaky": {"log": log, "marker": marker}}

    first = bz.compare(model, data, backends=backends, reference="fake_ok", out=out, options=options, **KW)
    assert fb.calls(log) == ["fake_ok", "fake_vb", "fake_flaky"]
    assert "interrupted (first attempt)" in first.errors["fake_flaky"]
    assert sorted(os.listdir(out / "fits")) == ["fake_ok.nc", "fake_vb.nc"]

    second = bz.compare(model, data, backends=backends, reference="fake_ok", out=out, options=options, **KW)
    assert fb.calls(log) == ["fake_ok", "fake_vb", "fake_flaky", "fake_flaky"]  # only the missing cell ran
    assert second.errors == {}
    for label in ("fake_ok", "fake_vb"):
        assert second.fits[label].timing == first.fits[label].timing
        _assert_same_draws(second.fits[label], first.fits[label])
    table = second.table()
    assert list(table["backend"]) == backends and (table["error"] == "").all()
    measured = table[table["backend"] != "fake_ok"]      # the reference's own row is not measured against itself
    assert measured[NUMERIC].drop(columns=["rhat_max", "divergences"]).notna().all(axis=None)
    # same seed, same draws: the resumed cell equals fake_ok's answer
    _assert_same_draws(second.fits["fake_flaky"], second.fits["fake_ok"])

    # a deleted fit file is recomputed, the others loaded
    os.remove(out / "fits" / "fake_vb.nc")
    third = bz.compare(model, data, backends=backends, reference="fake_ok", out=out, options=options, **KW)
    assert fb.calls(log)[4:] == ["fake_vb"]
    _assert_same_draws(third.fits["fake_vb"], first.fits["fake_vb"])
    assert third.fits["fake_ok"].timing == first.fits["fake_ok"].timing


def test_saved_comparison_rebuilds_the_same_table(problem, tmp_path, capsys):
    model, data = problem
    out = tmp_path / "run"
    cmp = bz.compare(model, data, backends=["fake_ok", "fake_fail", "fake_vb"], reference="fake_ok", out=out, **KW)
    expected = cmp.table()
    for name in ("table.csv", "report.html", "comparison.json", "data.npz"):
        assert (out / name).exists()

    loaded = bz.load_comparison(out)
    assert loaded.reference.name == "fake_ok" and loaded.reference.fit is loaded.fits["fake_ok"]
    assert loaded.reference_cell == "fake_ok"
    pd.testing.assert_frame_equal(loaded.table(), expected)

    os.remove(out / "table.csv")
    os.remove(out / "report.html")
    assert cli_main(["report", str(out)]) == 0
    assert "fake_fail" in capsys.readouterr().out
    rebuilt = pd.read_csv(out / "table.csv", keep_default_na=False, na_values=[""])
    on_disk = pd.read_csv(out / "fits" / ".." / "table.csv")
    assert list(rebuilt["backend"]) == ["fake_ok", "fake_fail", "fake_vb"]
    np.testing.assert_allclose(rebuilt[NUMERIC].to_numpy(float), expected[NUMERIC].to_numpy(float), rtol=1e-12)
    assert on_disk.loc[1, "error"] == f"RuntimeError: {fb.FAIL_MESSAGE}"
    assert (out / "report.html").stat().st_size > 10_000


def test_resume_reruns_a_fit_saved_with_other_settings(problem, tmp_path):
    model, data = problem
    log = str(tmp_path / "calls.log")
    out = tmp_path / "grid"
    opts = {"fake_ok": {"log": log}}
    first = bz.compare(model, data, backends=["fake_ok"], out=out, options=opts, **KW)
    again = bz.compare(model, data, backends=["fake_ok"], out=out, options=opts, **KW)
    assert len(fb.calls(log)) == 1                     # same settings: loaded, not recomputed
    _assert_same_draws(first.fits["fake_ok"], again.fits["fake_ok"])
    reseeded = bz.compare(model, data, backends=["fake_ok"], out=out, options=opts, **{**KW, "seed": 8})
    assert len(fb.calls(log)) == 2                     # a new seed is a new cell: run again
    assert reseeded.fits["fake_ok"].info["settings"]["seed"] == 8
    assert not np.array_equal(reseeded.fits["fake_ok"].posterior["w"].values,
                              first.fits["fake_ok"].posterior["w"].values)


def test_reference_can_be_a_separate_long_run_or_a_given_fit(problem):
    model, data = problem
    cmp = bz.compare(model, data, backends=["fake_vb"], reference="fake_ok", reference_draws=400, **KW)
    assert cmp.reference.name == "fake_ok (reference)" and cmp.reference_cell == "fake_ok (reference)"
    assert cmp.reference.fit.n_draws == 400 and cmp.fits["fake_vb"].n_draws == KW["draws"]
    table = cmp.table().set_index("backend")
    assert list(table.index) == ["fake_vb", "fake_ok (reference)"]
    assert np.isnan(table.loc["fake_ok (reference)", "mean_err"])     # not measured against itself
    # any Fit can serve as the reference, e.g. draws from an exact posterior
    given = bz.compare(model, data, backends=["fake_vb"], reference=cmp.reference.fit, **KW)
    assert given.table().set_index("backend").loc["fake_vb", "mean_err"] == pytest.approx(
        table.loc["fake_vb", "mean_err"])
    with pytest.raises(ValueError, match="reference must be 'auto', 'catalogue', 'catalogue:<key>', a backend name, a Fit"):
        bz.compare(model, data, backends=["fake_vb"], reference=3.0, **KW)
