"""Datasets: shipped real data load offline with the documented shapes and numbers; synthetic generators follow
their formulas; options are validated."""
from __future__ import annotations

import hashlib
import socket
from pathlib import Path

import numpy as np
import pytest

import bayeszoo as bz
from bayeszoo.datasets import Dataset, synthetic

DATA = Path(bz.datasets.__file__).resolve().parent / "data"

REAL = ["boston", "cpus", "concrete", "ripley", "banana", "pima", "titanic", "breast_cancer", "image", "spambase"]
REGRESSION = ["boston", "cpus", "concrete"]
CLASSIFICATION = [n for n in REAL if n not in REGRESSION]

# name: (n_train, n_test, d, number of label-1 rows in train / test, or None for regression)
SHAPES = {
    "boston": (506, 0, 13, None),
    "cpus": (209, 0, 6, None),
    "concrete": (1030, 0, 8, None),
    "ripley": (250, 1000, 2, (125, 500)),
    "banana": (5300, 0, 2, (2376, 0)),
    "pima": (200, 332, 7, (68, 109)),
    "titanic": (2201, 0, 3, (711, 0)),
    "breast_cancer": (277, 0, 9, (81, 0)),
    "image": (2310, 0, 18, (1320, 0)),
    "spambase": (3218, 1379, 57, (1271, 541)),
}

# sha256 of the shipped files, as listed in DATASETS.md (guards against accidental edits)
CHECKSUMS = {
    "gpc_biopsy.csv": "131e30ba1cad5f98ef9181e5d459bf4020648729d9ba533652bba24cd0a4f62c",
    "gpc_crabs.csv": "c112a5e147591d8e04f32dbf3f3e2be2eb74860119c6f6b5e33191ef84ee16aa",
    "gpc_ionosphere.csv": "1f980b2d1eac0233f8586844abd4e6c299b884f52f7f3bbc15b7bfc6af361736",
    "gpc_sonar.csv": "d8e2a4acbec4420527f321d25b033eed4c5bb15e854eba01e35b83d47b5eb0f8",
    "banana.csv": "8685454508e07cfacb9d08993460d9ee1b56db76bd4af564ed55cf68b6b9d58c",
    "boston.csv": "b9f88f3463a208dadd78546f0fb9ddacfa4897b4c92dd1b8269734f000fe377c",
    "breast_cancer.csv": "687a2f9d069f080e14604455e5094f8d5b87351bfd62f649df69abc3fa827dfb",
    "concrete.csv": "c2690f237285ede14fa54fe05dbe6a83ce510f65de6a8c5f8cafd6cefd9f38e2",
    "cpus.csv": "6498cf9e3504d532ac7386b0fa6eacfcddbb0b38124af92fc57fda77550d6e67",
    "pima_mass_te.csv": "5df53a692ed8a9052afd618401027691a565073b9044e72903796967329e5f8e",
    "pima_mass_tr.csv": "dd253952a163c8395a872f139e45dc282bb71e3047fed1c9d174b6870813702b",
    "pima_uci.csv": "a7e39344f480112b03ecb5cec5ff3f4702beeef9c71240c49e118cc442964a1e",
    "ripley_synth_te.csv": "2af38fb634a1183e4a32de8210cfde52ebd8eeaf9d3c82f802b953fe703071f1",
    "ripley_synth_tr.csv": "bf8221a95c81dbe5b7c3158979f0785ea77d9c6280c003de91092445caa601e1",
    "spambase.csv.gz": "3837c6cf3956da50c609833561752426c04ecaccf41f4a61d85b6be405057ff5",
    "segment.csv.gz": "3c282531677e4655aaf6f2df509047aced84e5db3818b0316c2b247ab5baf724",
    "titanic.csv": "566c0ba4051503abe82723f3d6ec7d5f077eda20b86f4725587857bb5e660d3d",
    "mri_epi_slices.npz": "76bd4adebdf9c09b10688c0c6e1be02e57c3049a5c4b39fa545189a46c72edf1",
    "camera_shake_kernels.npz": "5d26f97443a3566282402d3df85d981933f1e0d0ca8f33e11a1879ceccd7cf9d",
}


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a network connection fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("a dataset loader tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


# ---------------------------------------------------------------------------------------------- shipped files
def test_shipped_files_are_intact_and_small():
    assert sorted(p.name for p in DATA.iterdir() if not p.name.startswith(".")) == sorted(CHECKSUMS)
    for name, digest in CHECKSUMS.items():
        assert hashlib.sha256((DATA / name).read_bytes()).hexdigest() == digest, name
    sizes = {p.name: p.stat().st_size for p in DATA.iterdir()}
    assert sum(sizes.values()) < 2_000_000
    assert all(s <= 100_000 or n.endswith(".gz") for n, s in sizes.items()), sizes


def test_all_real_names_registered():
    assert set(REAL) <= set(bz.datasets.names())
    for name in REAL:
        assert bz.datasets.describe(name)


# ---------------------------------------------------------------------------------------------- shapes, labels
@pytest.mark.parametrize("name", REAL)
def test_loads_offline_with_documented_shape(name, no_network):
    d = bz.datasets.load(name)
    n, n_test, dim, counts = SHAPES[name]
    assert isinstance(d, Dataset) and d.name == name
    assert d.X.shape == (n, dim) and d.y.shape == (n,)
    assert d.X_test.shape == (n_test, dim) and d.y_test.shape == (n_test,)
    assert d.X.dtype == np.float64
    assert np.isfinite(d.X).all() and np.isfinite(d.X_test).all()
    if counts is None:
        assert d.task == "regression"
    else:
        assert d.task == "classification"
        assert set(np.unique(d.y)) == {0.0, 1.0}
        if n_test:
            assert set(np.unique(d.y_test)) == {0.0, 1.0}
        assert (int(d.y.sum()), int(d.y_test.sum())) == counts


@pytest.mark.parametrize("name", REAL)
def test_meta_has_provenance(name):
    meta = bz.datasets.load(name).meta
    for key in ("task", "source", "licence", "citation", "preprocessing"):
        assert isinstance(meta.get(key), str) and meta[key].strip(), (name, key)
    assert "0.2.10" in meta["source"] or "0.2.5" in meta["source"]  # the package version the file came from
    assert "training" in meta["preprocessing"]
    assert len(meta["feature_names"]) == SHAPES[name][2]
    for f in meta["files"]:
        assert (DATA / f).exists()


def test_known_summary_numbers():
    boston = bz.datasets.load("boston", standardize=False)
    assert boston.y.mean() == pytest.approx(22.532806, abs=1e-6)
    assert np.median(boston.y) == 21.2 and boston.y.max() == 50.0 and (boston.y == 50).sum() == 16
    assert boston.X[:, boston.meta["feature_names"].index("rm")].mean() == pytest.approx(6.284634, abs=1e-6)
    assert boston.X[0, 0] == pytest.approx(0.00632)

    cpus = bz.datasets.load("cpus", standardize=False)
    assert cpus.y.mean() == pytest.approx(105.617225, abs=1e-6)
    assert (cpus.y.min(), cpus.y.max()) == (6.0, 1150.0)
    assert "PRP" in cpus.meta["target"] and "estperf" in cpus.meta["preprocessing"]

    concrete = bz.datasets.load("concrete", standardize=False)
    assert concrete.y.mean() == pytest.approx(35.817961, abs=1e-6)
    assert concrete.y.std(ddof=1) == pytest.approx(16.705742, abs=1e-6)

    ripley = bz.datasets.load("ripley", standardize=False)
    assert ripley.X_test.shape[0] == 1000
    assert ripley.X.mean(axis=0) == pytest.approx([-0.072758, 0.504362], abs=1e-6)


def test_pima_uci_variant():
    d = bz.datasets.load("pima", variant="uci")
    assert d.X.shape == (768, 8) and not d.has_test
    assert int(d.y.sum()) == 268 and set(np.unique(d.y)) == {0.0, 1.0}
    assert d.meta["variant"] == "uci"
    with pytest.raises(ValueError, match="variant"):
        bz.datasets.load("pima", variant="kaggle")


def test_titanic_reproduces_ida_codes():
    # z-scoring the ordinal codes on all rows (with the n - 1 sd the IDA file used) gives its 3-digit values
    d = bz.datasets.load("titanic")
    ida = d.X * np.sqrt((d.n - 1) / d.n)
    levels = [[float(f"{v:.3g}") for v in np.unique(ida[:, j])] for j in range(3)]
    assert levels == [[-1.87, -0.923, 0.0214, 0.965], [-0.228, 4.38], [-1.92, 0.521]]
    raw = bz.datasets.load("titanic", standardize=False)
    crew = raw.X[:, 0] == 3
    assert crew.sum() == 885 and raw.y[crew].sum() == 212
    first_class_women = (raw.X[:, 0] == 0) & (raw.X[:, 2] == 0)
    assert first_class_women.sum() == 145 and raw.y[first_class_women].sum() == 141


def test_breast_cancer_encoding():
    d = bz.datasets.load("breast_cancer", standardize=False)
    assert d.X.min(axis=0).tolist() == [0, 0, 0, 0, 0, 1, 0, 0, 0]
    assert d.X.max(axis=0).tolist() == [5, 2, 10, 6, 1, 3, 1, 4, 1]
    assert np.all(d.X == np.round(d.X))


def test_image_binarisation_and_option():
    d = bz.datasets.load("image", standardize=False)
    assert "region_pixel_count" not in d.meta["feature_names"]
    assert d.meta["positive_classes"] == ["brickface", "cement", "window", "path"]
    sky = bz.datasets.load("image", positive=("sky",), standardize=False)
    assert int(sky.y.sum()) == 330
    # sky: the brightest segments, near the top of the picture
    intensity = sky.X[:, sky.meta["feature_names"].index("intensity_mean")]
    row = sky.X[:, sky.meta["feature_names"].index("region_centroid_row")]
    assert intensity[sky.y == 1].mean() > 100 > intensity[sky.y == 0].mean()
    assert row[sky.y == 1].mean() < row[sky.y == 0].mean()
    assert int(bz.datasets.load("image", positive="grass").y.sum()) == 330
    with pytest.raises(ValueError, match="positive"):
        bz.datasets.load("image", positive=("clouds",))
    with pytest.raises(ValueError, match="positive"):
        bz.datasets.load("image", positive=())


# ---------------------------------------------------------------------------------------------- options
@pytest.mark.parametrize("name", REAL)
def test_standardisation_uses_training_statistics(name):
    d = bz.datasets.load(name, test_fraction=0.3, seed=1)
    np.testing.assert_allclose(d.X.mean(axis=0), 0.0, atol=1e-10)
    np.testing.assert_allclose(d.X.std(axis=0), 1.0, atol=1e-10)
    raw = bz.datasets.load(name, test_fraction=0.3, seed=1, standardize=False)
    mean, sd = raw.X.mean(axis=0), raw.X.std(axis=0)
    np.testing.assert_allclose(d.X_test, (raw.X_test - mean) / sd, atol=1e-12)
    np.testing.assert_allclose(d.meta["feature_mean"], mean)
    np.testing.assert_allclose(d.meta["feature_sd"], sd)
    np.testing.assert_array_equal(d.y, raw.y)  # targets / labels untouched
    np.testing.assert_array_equal(d.y_test, raw.y_test)


def test_canonical_split_test_set_not_used_for_scaling():
    d = bz.datasets.load("ripley")
    raw = bz.datasets.load("ripley", standardize=False)
    np.testing.assert_allclose(d.X.mean(axis=0), 0.0, atol=1e-12)
    assert np.abs(d.X_test.mean(axis=0)).max() > 1e-3  # test rows are not re-centred on themselves
    np.testing.assert_allclose(d.X_test, (raw.X_test - raw.X.mean(0)) / raw.X.std(0))


def test_regression_targets_keep_units():
    np.testing.assert_array_equal(bz.datasets.load("boston").y, bz.datasets.load("boston", standardize=False).y)


@pytest.mark.parametrize("name", ["concrete", "ripley", "titanic"])
def test_seeded_split_reproduces(name):
    a = bz.datasets.load(name, seed=3, test_fraction=0.25)
    b = bz.datasets.load(name, seed=3, test_fraction=0.25)
    c = bz.datasets.load(name, seed=4, test_fraction=0.25)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    assert not np.array_equal(a.X_test, c.X_test)
    total = sum(SHAPES[name][:2])
    assert a.X_test.shape[0] == round(0.25 * total) and a.n + a.X_test.shape[0] == total
    assert "random" in a.meta["split"] and a.meta["seed"] == 3


def test_random_split_partitions_the_rows():
    whole = bz.datasets.load("cpus", standardize=False)
    part = bz.datasets.load("cpus", standardize=False, test_fraction=0.2, seed=0)
    rows = lambda X, y: sorted(map(tuple, np.column_stack([X, y]).tolist()))
    assert rows(np.vstack([part.X, part.X_test]), np.r_[part.y, part.y_test]) == rows(whole.X, whole.y)


def test_canonical_split_by_default_only_where_published():
    assert bz.datasets.load("pima").meta["split"].startswith("canonical")
    assert bz.datasets.load("ripley").meta["split"].startswith("canonical")
    assert bz.datasets.load("banana").meta["split"].startswith("none")


def test_unknown_dataset_raises():
    with pytest.raises(ValueError, match="unknown dataset 'nope'"):
        bz.datasets.load("nope")


@pytest.mark.parametrize("bad", [0, 0.0, 1, 1.0, -0.2, 1.5, float("nan"), "0.3", True])
def test_bad_test_fraction_raises(bad):
    with pytest.raises(ValueError, match="test_fraction"):
        bz.datasets.load("concrete", test_fraction=bad)


def test_bad_options_raise():
    with pytest.raises(ValueError, match="seed"):
        bz.datasets.load("boston", seed=1.5)
    with pytest.raises(ValueError, match="standardize"):
        bz.datasets.load("boston", standardize="yes")
    with pytest.raises(ValueError, match="does not take"):
        bz.datasets.load("boston", n=10)


# ---------------------------------------------------------------------------------------------- synthetic
def test_sinc():
    d = bz.datasets.load("sinc", n=50, n_test=200, noise_sd=0.1, seed=0)
    assert d.X.shape == (50, 1) and d.X_test.shape == (200, 1)
    assert np.all(np.abs(d.X) <= 10) and np.all(np.diff(d.X[:, 0]) >= 0)
    x = d.X_test[:, 0]
    np.testing.assert_allclose(x, np.linspace(-10, 10, 200))
    nz = x != 0
    np.testing.assert_allclose(d.y_test[nz], np.sin(x[nz]) / x[nz], atol=1e-12)
    resid = d.y - np.sinc(d.X[:, 0] / np.pi)
    assert 0.05 < resid.std() < 0.2
    np.testing.assert_array_equal(d.y, bz.datasets.load("sinc", n=50, n_test=200, seed=0).y)
    assert not np.array_equal(d.y, bz.datasets.load("sinc", n=50, n_test=200, seed=1).y)
    assert np.array_equal(bz.datasets.load("sinc", noise_sd=0.0).y,
                          np.sinc(bz.datasets.load("sinc", noise_sd=0.0).X[:, 0] / np.pi))
    with pytest.raises(ValueError, match="n must be"):
        bz.datasets.load("sinc", n=0)


def test_doppler():
    d = bz.datasets.load("doppler", seed=0)
    assert d.X.shape == (128, 1) and d.X_test.shape == (128, 1)
    x = d.X[:, 0]
    np.testing.assert_allclose(x, (np.arange(1, 129) - 0.5) / 128)
    delta = 0.01
    g = np.sqrt(x * (1 - x)) * np.sin(2 * np.pi * (1 + delta) / (x + delta))
    np.testing.assert_allclose(d.y_test, g, atol=1e-12)
    np.testing.assert_allclose(synthetic.doppler_function(x), g)
    assert abs((d.y - g).var() - 0.1) < 0.04  # noise variance 0.1
    np.testing.assert_array_equal(d.y, bz.datasets.load("doppler", seed=0).y)
    assert not np.array_equal(d.y, bz.datasets.load("doppler", seed=1).y)


def test_doppler2d():
    d = bz.datasets.load("doppler2d", grid=16, train_fraction=0.5, seed=0)
    assert d.X_test.shape == (256, 2) and d.X.shape == (128, 2)
    g = synthetic.doppler_function(d.X_test[:, 0]) * synthetic.doppler_function(d.X_test[:, 1])
    np.testing.assert_allclose(d.y_test, g, atol=1e-12)
    assert len({tuple(r) for r in d.X.tolist()}) == 128  # training points are distinct grid points
    again = bz.datasets.load("doppler2d", grid=16, train_fraction=0.5, seed=0)
    np.testing.assert_array_equal(d.X, again.X)
    np.testing.assert_array_equal(d.y, again.y)
    with pytest.raises(ValueError, match="train_fraction"):
        bz.datasets.load("doppler2d", train_fraction=0.0)


def test_sinc2d():
    d = bz.datasets.load("sinc2d", grid=30, seed=0)
    assert d.X.shape == (900, 2) and d.X_test.shape == (900, 2)
    assert d.X.min() == -10 and d.X.max() == 10
    r = np.hypot(d.X_test[:, 0], d.X_test[:, 1])
    np.testing.assert_allclose(d.y_test, np.sin(r) / r, atol=1e-12)
    assert abs((d.y - d.y_test).var() - 0.1) < 0.02
    np.testing.assert_array_equal(d.y, bz.datasets.load("sinc2d", seed=0).y)


def test_gaussian_mixture():
    d = bz.datasets.load("gaussian_mixture", seed=0)
    assert d.X.shape == (100, 2) and d.X_test.shape == (10_000, 2)
    assert d.y.sum() == 50 and d.y_test.sum() == 5000 and set(np.unique(d.y)) == {0.0, 1.0}
    np.testing.assert_array_equal(d.X, bz.datasets.load("gaussian_mixture", seed=0).X)
    # class C1 (label 0): 0.25 N(mu1, 0.5 I) + 0.75 N(mu2, 0.05 I); C2 mirrored, so E[x | C1] = -0.25 (1, 1)
    Xt, yt = d.X_test, d.y_test
    np.testing.assert_allclose(Xt[yt == 0].mean(axis=0), [-0.25, -0.25], atol=0.03)
    np.testing.assert_allclose(Xt[yt == 1].mean(axis=0), [0.25, 0.25], atol=0.03)
    # per-coordinate variance: 0.25*0.5 + 0.75*0.05 + mixing term 0.25*0.75*1^2 = 0.35
    np.testing.assert_allclose(Xt[yt == 0].var(axis=0), 0.35, atol=0.03)
    # Bayes rule error close to the documented 11.86 %
    from scipy.stats import multivariate_normal as mvn
    mu1, mu2 = np.array([0.5, 0.5]), np.array([-0.5, -0.5])
    p1 = 0.25 * mvn(mu1, 0.5 * np.eye(2)).pdf(Xt) + 0.75 * mvn(mu2, 0.05 * np.eye(2)).pdf(Xt)
    p2 = 0.25 * mvn(mu2, 0.5 * np.eye(2)).pdf(Xt) + 0.75 * mvn(mu1, 0.05 * np.eye(2)).pdf(Xt)
    err = np.mean((p2 > p1).astype(float) != yt)
    assert abs(err - d.meta["bayes_error"]) < 0.015
