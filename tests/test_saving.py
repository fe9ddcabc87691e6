"""Saved fits and comparisons: nothing lost, nothing mixed. Files that cannot be read give one ValueError naming the
file and the reason; a folder never pairs a comparison with another experiment's fits; the command line replaces
nothing without --force; and real concurrent processes writing one folder or one file neither corrupt it nor
compute a fit twice."""
from __future__ import annotations

import errno
import json
import multiprocessing
import os
import shutil
import warnings

import arviz as az
import numpy as np
import pytest
import xarray as xr

import bayeszoo as bz
from tests.helpers import fake_backends as fb
from bayeszoo.cli import main as cli_main
from bayeszoo.results import ResultExists

KW = dict(draws=40, tune=0, chains=2, seed=7, progress=False)
META = "bayeszoo_fit"   # the posterior attribute that holds a saved fit's metadata


@pytest.fixture(scope="module")
def data():
    return bz.datasets.load("sinc", n=20, n_test=30, seed=0)


@pytest.fixture(scope="module")
def fit(data):
    return bz.fit(bz.models.RVM(width=3.0), data, "fake_em", **KW)


@pytest.fixture(scope="module")
def saved_comparison(data, tmp_path_factory):
    """A folder written by bz.compare, copied by the tests that damage it."""
    out = tmp_path_factory.mktemp("saved") / "grid"
    bz.compare(bz.models.RVM(width=3.0), data, backends=["fake_vb", "fake_em"], reference="fake_vb", out=out, **KW)
    return out


def _leftovers(folder) -> list[str]:
    """Temporary files of interrupted or concurrent saves left behind."""
    return sorted(name for _, _, names in os.walk(folder) for name in names if name.endswith(".part"))


# ----------------------------------------------------------------------------- files that are not saved fits
def _with_metadata(fit, path, text):
    idata = fit.idata.copy()
    idata.posterior.attrs[META] = text
    idata.to_netcdf(str(path), engine="h5netcdf")


def _without_constant_data(fit, path):
    fit.save(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)   # ArviZ on the custom objective group
        idata = az.InferenceData(**{g: fit.idata[g] for g in fit.idata.groups() if g != "constant_data"})
    idata.to_netcdf(str(path), engine="h5netcdf")


def _truncated(fit, path):
    fit.save(path)
    path.write_bytes(path.read_bytes()[:300])


DAMAGED_FITS = {
    "missing": (lambda fit, path: None, "there is no such file"),
    "a folder": (lambda fit, path: path.mkdir(), "it is a folder"),
    "zero bytes": (lambda fit, path: path.write_bytes(b""), r"it is empty \(0 bytes\)"),
    "truncated": (_truncated, "not a complete NetCDF file"),
    "garbage": (lambda fit, path: path.write_bytes(b"not a netcdf file at all"), "not a complete NetCDF file"),
    "plain netCDF": (lambda fit, path: xr.Dataset({"a": ("x", [1.0, 2.0])}).to_netcdf(str(path), engine="h5netcdf"),
                     "a NetCDF file without a posterior group"),
    "InferenceData of another tool": (
        lambda fit, path: az.from_dict(posterior={"w": np.zeros((1, 5, 2))}).to_netcdf(str(path), engine="h5netcdf"),
        "an InferenceData file without bayeszoo's metadata"),
    "metadata not JSON": (lambda fit, path: _with_metadata(fit, path, "{backend: em"),
                          "its 'bayeszoo_fit' metadata is not valid JSON"),
    "metadata a list": (lambda fit, path: _with_metadata(fit, path, "[1, 2]"),
                        "its 'bayeszoo_fit' metadata is a JSON list, not a mapping"),
    "metadata missing keys": (lambda fit, path: _with_metadata(fit, path, json.dumps({"backend": "em"})),
                              "its 'bayeszoo_fit' metadata lacks 'kind', 'timing', 'model_spec'"),
    "metadata of a wrong type": (
        lambda fit, path: _with_metadata(fit, path, json.dumps({"backend": "em", "kind": "mcmc", "timing": [1],
                                                                "model_spec": {}})),
        "its 'bayeszoo_fit' metadata has 'timing' of type list, expected dict"),
    "metadata with an unknown kind": (
        lambda fit, path: _with_metadata(fit, path, json.dumps({"backend": "em", "kind": "exact", "timing": {},
                                                                "model_spec": {}})),
        "its metadata does not make a Fit"),
    "no constant_data": (_without_constant_data, "it has no constant_data group"),
}


def test_saved_draws_are_shuffled_and_compressed_and_read_back_exactly(fit, tmp_path):
    """Every numeric variable of every group is written with HDF5's byte shuffle and zlib at level 1, and the
    draws read back bit for bit."""
    import h5py

    path = fit.save(tmp_path / "fit.nc")
    with h5py.File(path) as fh:
        variables = [fh[group][name] for group in fh for name in fh[group]
                     if isinstance(fh[group][name], h5py.Dataset) and fh[group][name].dtype.kind in "biuf"
                     and fh[group][name].ndim >= 2]
        assert variables
        assert all(v.compression == "gzip" and v.compression_opts == 1 and v.shuffle for v in variables), \
            [(v.name, v.compression, v.compression_opts, v.shuffle) for v in variables]
    back = bz.load_fit(path)
    for name, values in fit.idata.posterior.data_vars.items():
        np.testing.assert_array_equal(back.idata.posterior[name].values, values.values)


@pytest.mark.parametrize("case", list(DAMAGED_FITS))
def test_a_file_that_is_not_a_saved_fit_is_one_value_error_naming_it(fit, tmp_path, case):
    damage, reason = DAMAGED_FITS[case]
    path = tmp_path / "fit.nc"
    damage(fit, path)
    with pytest.raises(ValueError, match=f"'{path}' cannot be read as a saved fit: {reason}"):
        bz.load_fit(path)


@pytest.mark.parametrize("bad", [3, None, ["fit.nc"], ""])
def test_load_fit_and_save_refuse_what_is_not_a_path(fit, bad):
    with pytest.raises(ValueError, match="load_fit expects a path"):
        bz.load_fit(bad)
    with pytest.raises(ValueError, match="Fit.save expects a path"):
        fit.save(bad)


def test_saving_a_fit_onto_a_folder_or_under_a_file_is_a_value_error(fit, tmp_path):
    with pytest.raises(ValueError, match=f"cannot save the fit to '{tmp_path}': it is a folder; give a file name"):
        fit.save(tmp_path)
    blocker = tmp_path / "a_file"
    blocker.write_text("kept")
    with pytest.raises(ValueError, match="is not a folder"):
        fit.save(blocker / "fit.nc")
    assert blocker.read_text() == "kept" and _leftovers(tmp_path) == []


def test_save_without_overwrite_keeps_the_earlier_file(fit, data, tmp_path):
    path = tmp_path / "fit.nc"
    other = bz.fit(bz.models.RVM(width=3.0), data, "fake_em", **{**KW, "seed": 8})
    fit.save(path)
    with pytest.raises(ResultExists, match="fit.nc' already exists; pass overwrite=True to replace it"):
        other.save(path, overwrite=False)
    np.testing.assert_array_equal(bz.load_fit(path).posterior["w"].values, fit.posterior["w"].values)
    other.save(path)                                   # the default replaces it
    np.testing.assert_array_equal(bz.load_fit(path).posterior["w"].values, other.posterior["w"].values)
    assert _leftovers(tmp_path) == []


def test_a_saved_fit_keeps_what_it_was_made_with(fit, tmp_path):
    back = bz.load_fit(fit.save(tmp_path / "fit.nc"))
    assert back.info["settings"] == fit.info["settings"] and back.info["provenance"] == fit.info["provenance"]
    np.testing.assert_array_equal(back.posterior["w"].values, fit.posterior["w"].values)


# ----------------------------------------------------------------------- folders that are not comparisons
def _edit_json(out, change):
    path = out / "comparison.json"
    meta = json.loads(path.read_text())
    change(meta)
    path.write_text(json.dumps(meta))


def _other_data(out):
    with np.load(out / "data.npz") as arrays:
        saved = dict(arrays)
    saved["y"] = saved["y"] + 1.0
    np.savez(out / "data.npz", **saved)


def _data_without(out, key):
    with np.load(out / "data.npz") as arrays:
        saved = {k: v for k, v in arrays.items() if k != key}
    np.savez(out / "data.npz", **saved)


DAMAGED_COMPARISONS = {
    "comparison.json not JSON": (lambda out: (out / "comparison.json").write_text("{not json"),
                                 "comparison.json", "it is not valid JSON"),
    "comparison.json empty": (lambda out: (out / "comparison.json").write_bytes(b""), "comparison.json",
                              "it is not valid JSON"),
    "comparison.json a list": (lambda out: (out / "comparison.json").write_text("[1, 2]"), "comparison.json",
                               "it holds a JSON list, not a mapping"),
    "comparison.json missing keys": (lambda out: _edit_json(out, lambda m: (m.pop("files"), m.pop("model_spec"))),
                                     "comparison.json", "it lacks 'model_spec', 'files'"),
    "comparison.json of a wrong type": (lambda out: _edit_json(out, lambda m: m.update(files=["fits/fake_ok.nc"])),
                                        "comparison.json", "its 'files' is a JSON list"),
    "a model spec that makes no model": (
        lambda out: _edit_json(out, lambda m: m.update(model_spec={"family": "nope"})), "comparison.json",
        "its model_spec makes no model"),
    "data.npz missing": (lambda out: os.remove(out / "data.npz"), "data.npz", "the comparison's data file is missing"),
    "data.npz empty": (lambda out: (out / "data.npz").write_bytes(b""), "data.npz", "not a readable .npz archive"),
    "data.npz truncated": (lambda out: (out / "data.npz").write_bytes((out / "data.npz").read_bytes()[:100]),
                           "data.npz", "not a readable .npz archive"),
    "data.npz lacks an array": (lambda out: _data_without(out, "y_test"), "data.npz",
                                r"it lacks the array\(s\) 'y_test'"),
    "data.npz of other data": (_other_data, "data.npz", "it does not hold the data comparison.json was saved with"),
}


@pytest.mark.parametrize("case", list(DAMAGED_COMPARISONS))
def test_a_damaged_comparison_is_one_value_error_naming_the_file(saved_comparison, tmp_path, case):
    damage, name, reason = DAMAGED_COMPARISONS[case]
    out = tmp_path / "grid"
    shutil.copytree(saved_comparison, out)
    damage(out)
    with pytest.raises(ValueError, match=f"'{out / name}' cannot be read as a saved comparison: {reason}"):
        bz.load_comparison(out)


def test_load_comparison_refuses_what_is_not_a_saved_comparison_folder(saved_comparison, tmp_path):
    with pytest.raises(ValueError, match=r"load_comparison expects a path \(str or os.PathLike\); got int 3"):
        bz.load_comparison(3)
    with pytest.raises(ValueError, match="cannot be read as a saved comparison: there is no such folder"):
        bz.load_comparison(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="cannot be read as a saved comparison: it is a file, not a folder"):
        bz.load_comparison(saved_comparison / "comparison.json")
    with pytest.raises(ValueError, match="holds no comparison.json"):
        bz.load_comparison(tmp_path)


def test_a_damaged_fit_in_a_comparison_is_a_row_naming_the_file_and_the_reason(saved_comparison, tmp_path):
    out = tmp_path / "grid"
    shutil.copytree(saved_comparison, out)
    (out / "fits" / "fake_em.nc").write_bytes(b"")
    loaded = bz.load_comparison(out)
    table = loaded.table().set_index("backend")
    assert table.loc["fake_em", "error"] == "saved fit fits/fake_em.nc could not be read: it is empty (0 bytes)"
    # the reference's cell is still read, and still the reference (its own row not measured against itself)
    assert table.loc["fake_vb", "error"] == "" and loaded.reference_cell == "fake_vb"
    assert np.isnan(table.loc["fake_vb", "mean_err"]) and table.loc["fake_vb", "ess_bulk_min"] > 0


def test_the_report_command_names_the_file_it_cannot_read(saved_comparison, tmp_path, capsys):
    out = tmp_path / "grid"
    shutil.copytree(saved_comparison, out)
    (out / "comparison.json").write_text('{"model_spec": ')
    with pytest.raises(SystemExit) as info:
        cli_main(["report", str(out), "--force"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "Traceback" not in err
    assert f"'{out / 'comparison.json'}' cannot be read as a saved comparison: it is not valid JSON" in err


# -------------------------------------------------------------------------------------- nothing mixed
def test_saving_another_experiment_over_a_folder_replaces_its_fits_with_a_warning(data, tmp_path):
    out = tmp_path / "grid"
    backends = ["fake_vb", "fake_em"]
    narrow = bz.compare(bz.models.RVM(width=3.0), data, backends=backends, **KW)
    wide = bz.compare(bz.models.RVM(width=5.0), data, backends=backends, **KW)
    narrow.save(out)
    replaced = r"fits/fake_(vb|em)\.nc held a fit made with another model; replaced"
    with pytest.warns(UserWarning, match=replaced) as caught:
        wide.save(out)
    assert sum("held a fit made with another model" in str(w.message) for w in caught) == 2   # one per fit file
    loaded = bz.load_comparison(out)
    assert loaded.errors == {} and loaded.model.width == 5.0
    for label in backends:
        assert loaded.fits[label].model_spec["width"] == 5.0
        np.testing.assert_array_equal(loaded.fits[label].posterior["w"].values, wide.fits[label].posterior["w"].values)


def test_saving_the_same_comparison_again_keeps_its_fit_files(data, tmp_path):
    out = tmp_path / "grid"
    cmp = bz.compare(bz.models.RVM(width=3.0), data, backends=["fake_vb"], **KW)
    cmp.save(out)
    before = os.stat(out / "fits" / "fake_vb.nc")
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # no "replaced" warning either
        cmp.save(out)
    after = os.stat(out / "fits" / "fake_vb.nc")
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)   # not rewritten
    assert _leftovers(out) == []


@pytest.mark.parametrize("swap, differs", [
    (dict(model=bz.models.RVM(width=5.0)), "model"),
    (dict(seed=8), "settings"),
    (dict(data=bz.datasets.load("sinc", n=20, n_test=30, seed=1)), "data"),
])
def test_a_fit_file_of_another_experiment_is_an_error_row_on_load(data, saved_comparison, tmp_path, swap, differs):
    out = tmp_path / "grid"
    shutil.copytree(saved_comparison, out)
    intruder = bz.fit(swap.get("model", bz.models.RVM(width=3.0)), swap.get("data", data), "fake_em",
                      **{**KW, "seed": swap.get("seed", KW["seed"])})
    intruder.save(out / "fits" / "fake_em.nc")
    with pytest.warns(UserWarning, match=f"holds fits of another experiment.*fits/fake_em.nc \\({differs}\\)"):
        loaded = bz.load_comparison(out)
    assert list(loaded.fits) == ["fake_vb"]
    table = loaded.table().set_index("backend")
    assert table.loc["fake_em", "error"] == (f"saved fit fits/fake_em.nc was made with another {differs} than this "
                                             f"comparison (the folder mixes two experiments)")
    assert table.loc["fake_vb", "error"] == "" and loaded.reference.name == "fake_vb"


def test_compare_without_overwrite_refuses_before_any_work(data, tmp_path):
    out, log = tmp_path / "grid", str(tmp_path / "calls.log")
    opts = {"fake_vb": {"log": log}}
    bz.compare(bz.models.RVM(width=3.0), data, backends=["fake_vb"], out=out, options=opts, **KW)
    with pytest.raises(ResultExists, match="already holds a saved comparison \\(comparison.json\\); pass overwrite"):
        bz.compare(bz.models.RVM(width=3.0), data, backends=["fake_vb"], out=out, options=opts, overwrite=False, **KW)
    os.remove(out / "comparison.json")                 # an interrupted grid: only fits
    with pytest.raises(ResultExists, match=r"holds fits this grid would replace: fake_vb.nc \(was made with another "
                                           r"model\)"):
        bz.compare(bz.models.RVM(width=9.0), data, backends=["fake_vb"], out=out, options=opts, overwrite=False, **KW)
    assert fb.calls(log) == ["fake_vb"]                 # neither refused grid ran anything
    resumed = bz.compare(bz.models.RVM(width=3.0), data, backends=["fake_vb"], out=out, options=opts,
                         overwrite=False, **KW)        # matching fits are resumed all the same
    assert fb.calls(log) == ["fake_vb"] and resumed.notes == {"fake_vb": "resumed"}
    with pytest.raises(ValueError, match="overwrite must be True or False"):
        bz.compare(bz.models.RVM(), data, backends=["fake_vb"], out=out, overwrite="no", **KW)


# ------------------------------------------------------------------------------ the command line: --force
def test_the_fit_command_replaces_fit_nc_only_with_force(tmp_path, capsys):
    out, log = tmp_path / "one", tmp_path / "calls.log"
    argv = ["fit", "rvm", "--data", "sinc", "--data-opt", "n=20", "--backend", "fake_ok", "--draws", "30", "--tune",
            "0", "--chains", "1", "--quiet", "--out", str(out), "--backend-opt", f"log={log}"]
    assert cli_main(argv + ["--seed", "1"]) == 0
    first = bz.load_fit(out / "fit.nc")
    with pytest.raises(SystemExit) as info:
        cli_main(argv + ["--seed", "2"])
    assert info.value.code == 2
    assert f"{out / 'fit.nc'} already exists; pass --force to replace it" in capsys.readouterr().err
    assert fb.calls(str(log)) == ["fake_ok"]            # refused before the fit ran
    np.testing.assert_array_equal(bz.load_fit(out / "fit.nc").posterior["w"].values, first.posterior["w"].values)
    assert cli_main(argv + ["--seed", "2", "--force"]) == 0
    assert bz.load_fit(out / "fit.nc").info["seed"] == 2 and fb.calls(str(log)) == ["fake_ok", "fake_ok"]


def test_the_report_command_rewrites_table_and_report_only_with_force(saved_comparison, tmp_path, capsys):
    out = tmp_path / "grid"
    shutil.copytree(saved_comparison, out)
    (out / "table.csv").write_text("kept\n")
    with pytest.raises(SystemExit) as info:
        cli_main(["report", str(out)])
    assert info.value.code == 2
    assert f"{out} already holds table.csv and report.html; pass --force to replace it" in capsys.readouterr().err
    assert (out / "table.csv").read_text() == "kept\n"
    assert cli_main(["report", str(out), "--force"]) == 0
    assert (out / "table.csv").read_text().startswith("backend,kind,") and _leftovers(out) == []


# --------------------------------------------------------------------------- real concurrent processes
FORK = multiprocessing.get_context("fork")   # the children start with bayeszoo and the fakes already imported


def _grid_in_a_child(out, log, data, start, summary):
    start.wait()                                       # both grids begin together
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cmp = bz.compare(bz.models.RVM(width=3.0), data, backends=["fake_vb", "fake_em"], reference=None, out=out,
                         options={"fake_vb": {"log": log}, "fake_em": {"log": log}}, **KW)
    with open(summary, "w") as fh:
        json.dump({"notes": cmp.notes, "errors": cmp.errors,
                   "w": {label: fit.posterior["w"].values.tolist() for label, fit in cmp.fits.items()},
                   "waited": any("is being written by another process" in str(w.message) for w in caught)}, fh)


@pytest.mark.filterwarnings("ignore:os.fork")
def test_two_processes_on_one_folder_compute_each_fit_once(data, tmp_path):
    out, log = tmp_path / "grid", str(tmp_path / "calls.log")
    start = FORK.Barrier(2)
    summaries = [tmp_path / f"summary{k}.json" for k in range(2)]
    children = [FORK.Process(target=_grid_in_a_child, args=(out, log, data, start, s)) for s in summaries]
    for child in children:
        child.start()
    for child in children:
        child.join(timeout=120)
    assert [child.exitcode for child in children] == [0, 0]
    first, second = sorted((json.loads(s.read_text()) for s in summaries), key=lambda s: s["waited"])
    assert sorted(fb.calls(log)) == ["fake_em", "fake_vb"]          # each fit computed once in all
    assert not first["waited"] and first["notes"] == {} and first["errors"] == {}
    assert second["waited"] and second["notes"] == {"fake_vb": "resumed", "fake_em": "resumed"}
    assert second["w"] == first["w"]
    assert sorted(os.listdir(out / "fits")) == ["fake_em.nc", "fake_vb.nc"] and _leftovers(out) == []
    loaded = bz.load_comparison(out)
    assert loaded.errors == {}
    np.testing.assert_array_equal(loaded.fits["fake_em"].posterior["w"].values, first["w"]["fake_em"])


def _save_repeatedly(fit, path, times, start):
    start.wait()
    for _ in range(times):
        fit.save(path)


@pytest.mark.filterwarnings("ignore:os.fork")
def test_concurrent_saves_to_one_file_never_leave_it_half_written(data, tmp_path):
    model = bz.models.RVM(width=3.0)
    fits = [bz.fit(model, data, "fake_vb", **{**KW, "seed": seed}) for seed in (1, 2)]
    path = tmp_path / "fit.nc"
    fits[0].save(path)
    start = FORK.Barrier(3)
    writers = [FORK.Process(target=_save_repeatedly, args=(f, path, 8, start)) for f in fits]
    for writer in writers:
        writer.start()
    start.wait()
    reads = 0
    while any(writer.is_alive() for writer in writers):   # every read meanwhile finds a whole fit of one of them
        w = bz.load_fit(path).posterior["w"].values
        assert any(np.array_equal(w, f.posterior["w"].values) for f in fits)
        reads += 1
    for writer in writers:
        writer.join(timeout=60)
    assert [writer.exitcode for writer in writers] == [0, 0] and reads > 0
    w = bz.load_fit(path).posterior["w"].values
    assert any(np.array_equal(w, f.posterior["w"].values) for f in fits)
    assert sorted(os.listdir(tmp_path)) == ["fit.nc"]


# ----------------------------------------------------------------------------- a full disk, an interrupted write
class _Disk:
    """The files opened (``os.open``) under ``folder`` whose name contains ``only``, on a disk with ``free`` bytes
    left: the ``os.write`` that would pass it writes what fits and raises ``fault`` (a full disk by default), as
    the operating system's write does; every other file of the process is written as usual."""

    def __init__(self, monkeypatch, folder, free: int, fault: BaseException | None = None, only: str = ""):
        self.folder, self.free, self.only, self.faults = os.path.realpath(folder), free, only, 0
        self.fault = fault or OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._fds: set[int] = set()
        real_open, real_write, real_close = os.open, os.write, os.close

        def open_(path, flags, mode=0o777, *, dir_fd=None):
            fd = real_open(path, flags, mode, dir_fd=dir_fd)
            full = os.path.realpath(path)
            if full.startswith(self.folder + os.sep) and self.only in os.path.basename(full):
                self._fds.add(fd)
            return fd

        def write(fd, data):
            if fd not in self._fds:
                return real_write(fd, data)
            data = memoryview(data).cast("B")
            if len(data) > self.free:
                written = real_write(fd, data[:self.free]) if self.free else 0
                self.free -= written
                self.faults += 1
                raise self.fault
            self.free -= len(data)
            return real_write(fd, data)

        def close(fd):
            self._fds.discard(fd)
            return real_close(fd)

        monkeypatch.setattr(os, "open", open_)
        monkeypatch.setattr(os, "write", write)
        monkeypatch.setattr(os, "close", close)


def test_a_fit_that_does_not_fit_on_the_disk_leaves_the_earlier_file_and_names_the_folder(fit, data, tmp_path,
                                                                                          monkeypatch):
    from bayeszoo.results import DiskFull

    path = tmp_path / "fit.nc"
    fit.save(path)
    before = path.read_bytes()
    other = bz.fit(bz.models.RVM(width=3.0), data, "fake_vb", **KW)
    with monkeypatch.context() as patch:
        disk = _Disk(patch, tmp_path, free=5000)
        with pytest.raises(DiskFull) as caught:
            other.save(path)
    full = caught.value
    assert isinstance(full, OSError) and full.errno == errno.ENOSPC and disk.faults == 1
    assert full.folder == str(tmp_path) and full.needed > 5000
    assert f"cannot write fit.nc in {str(tmp_path)!r}: the disk is full; it needs {full.needed:,} bytes and " \
           in str(full)
    assert path.read_bytes() == before and _leftovers(tmp_path) == []    # the earlier fit, whole; no debris
    other.save(path)                                                     # with room: the size it said it needs
    assert os.path.getsize(path) == full.needed
    np.testing.assert_array_equal(bz.load_fit(path).posterior["w"].values, other.posterior["w"].values)


def test_a_full_disk_while_a_grid_saves_keeps_every_fit_and_the_table(data, tmp_path, monkeypatch):
    """The earlier fits on disk still load, the returned comparison holds every fit and its table, the warning
    and the notes name the folder and the bytes needed; with room again the same comparison saves whole."""
    out, model = tmp_path / "grid", bz.models.RVM(width=3.0)
    bz.compare(model, data, backends=["fake_ok"], reference=None, out=out, **KW)
    earlier = (out / "fits" / "fake_ok.nc").read_bytes()
    with monkeypatch.context() as patch:
        disk = _Disk(patch, out, free=3000)
        with pytest.warns(UserWarning, match=f"the comparison could not be saved to {str(out)!r} "
                                             r"\(DiskFull: \[Errno 28\] cannot write fake_vb.nc in .*: the disk is "
                                             r"full; it needs [\d,]+ bytes"):
            cmp = bz.compare(model, data, backends=["fake_ok", "fake_vb", "fake_em"], reference=None, out=out, **KW)
    assert disk.faults >= 3
    table = cmp.table().set_index("backend")
    assert list(cmp.fits) == ["fake_ok", "fake_vb", "fake_em"] and list(table.index) == list(cmp.fits)
    assert (table["error"] == "").all() and (table["ess_bulk_min"] > 0).all()
    folder = str(out / "fits")
    for label in ("fake_vb", "fake_em"):
        assert f"not saved to {os.path.join(folder, label + '.nc')}: DiskFull: [Errno 28] cannot write {label}.nc " \
               f"in {folder!r}: the disk is full; it needs" in table.loc[label, "note"]
    assert (out / "fits" / "fake_ok.nc").read_bytes() == earlier and _leftovers(out) == []
    assert sorted(os.listdir(out / "fits")) == ["fake_ok.nc"]
    assert list(bz.load_comparison(out).fits) == ["fake_ok"]         # the earlier comparison, still whole
    cmp.save(out)
    again = bz.load_comparison(out)
    assert list(again.fits) == ["fake_ok", "fake_vb", "fake_em"] and again.errors == {}
    np.testing.assert_array_equal(again.fits["fake_em"].posterior["w"].values,
                                  cmp.fits["fake_em"].posterior["w"].values)


def _save_under_a_file_size_limit(fit, path, limit, outcome):
    """In a child process: save ``fit`` under a file-size limit of ``limit`` bytes; write what happened to
    ``outcome``."""
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)       # a write past the limit fails (EFBIG), as on a full disk
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    try:
        fit.save(path)
        result = "saved"
    except OSError as exc:
        result = f"refused: {exc}"
    with open(outcome, "w") as fh:
        fh.write(result)


@pytest.mark.filterwarnings("ignore:os.fork")
@pytest.mark.skipif(not hasattr(__import__("signal"), "SIGXFSZ"), reason="POSIX file-size limits")
def test_a_write_that_the_operating_system_refuses_is_an_error_not_a_crash(fit, data, tmp_path):
    """For real, not simulated: under a file-size limit (``ulimit -f``) the operating system refuses the write of
    a large fit as it would on a full disk. The process lives on (the NetCDF library used to end it with a
    segmentation fault) with an error naming the folder, and the earlier file is intact."""
    import resource

    limit, hard = 100_000, resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    if hard != resource.RLIM_INFINITY and hard < limit:
        pytest.skip("the hard file-size limit is below the test's")
    earlier = fit.save(tmp_path / "earlier.nc")
    large = bz.fit(bz.models.RVM(width=3.0), data, "fake_ok", **{**KW, "draws": 2000})
    child = FORK.Process(target=_save_under_a_file_size_limit,
                         args=(large, str(tmp_path / "large.nc"), limit, str(tmp_path / "outcome.txt")))
    child.start()
    child.join(timeout=120)
    assert child.exitcode == 0, f"the process ended with exit code {child.exitcode}"
    assert (tmp_path / "outcome.txt").read_text().startswith(
        f"refused: [Errno {errno.EFBIG}] cannot write large.nc in {str(tmp_path)!r}: the file is larger than the "
        f"file system or this process's file-size limit allows; it needs ")
    assert sorted(os.listdir(tmp_path)) == ["earlier.nc", "outcome.txt"]
    assert bz.load_fit(earlier).backend == "fake_em"


def _interrupt(*args, **kwargs):
    raise KeyboardInterrupt


@pytest.mark.parametrize("where", ["writing the report", "writing a fit"])
def test_a_grid_interrupted_while_it_writes_resumes_on_the_next_run(tmp_path, monkeypatch, capsys, where):
    """Ctrl-C while the grid writes: the command line says to run again, and the run again resumes (the
    folder is not refused as a finished comparison, and no half-written file is taken as a fit)."""
    from bayeszoo.comparison import Comparison

    out, log = tmp_path / "cli", tmp_path / "calls.log"
    args = ["compare", "rvm", "--data", "sinc", "--data-opt", "n=20", "--backends", "fake_ok,fake_vb", "--draws",
            "30", "--tune", "0", "--chains", "1", "--quiet", "--out", str(out), "--backend-opt", f"log={log}"]
    with monkeypatch.context() as patch:
        if where == "writing the report":
            patch.setattr(Comparison, "report", _interrupt)
        else:
            _Disk(patch, out, free=2000, fault=KeyboardInterrupt(), only="fake_vb")
        with pytest.raises(SystemExit) as stopped:
            cli_main(args)
    assert stopped.value.code == 130 and "interrupted" in capsys.readouterr().err
    assert not (out / "comparison.json").exists() and _leftovers(out) == []
    assert sorted(os.listdir(out / "fits")) == (["fake_ok.nc", "fake_vb.nc"] if where == "writing the report"
                                                else ["fake_ok.nc"])
    assert cli_main(args) == 0
    resumed = bz.load_comparison(out)
    assert list(resumed.fits) == ["fake_ok", "fake_vb"] and resumed.errors == {}
    assert resumed.notes == ({"fake_ok": "resumed", "fake_vb": "resumed"} if where == "writing the report"
                             else {"fake_ok": "resumed"})
    assert fb.calls(str(log)) == (["fake_ok", "fake_vb"] if where == "writing the report"
                                  else ["fake_ok", "fake_vb", "fake_vb"])
