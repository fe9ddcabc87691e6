"""A Dataset owns read-only copies of its arrays, takes real numbers only, and checks every constructor argument;
model specs and executors are checked the same way (a ValueError naming the problem, before any work)."""
from __future__ import annotations

import copy
import dataclasses
import pickle

import numpy as np
import pandas as pd
import pytest
import scipy.sparse

import bayeszoo as bz
from bayeszoo.datasets import Dataset


def _arrays(n=6, d=2, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)), rng.standard_normal(n), rng.standard_normal((3, d)), rng.standard_normal(3)


def test_the_dataset_keeps_its_own_copies():
    X, y, Xt, yt = _arrays()
    B = np.eye(2)
    data = Dataset(X, y, Xt, yt, name="mine", meta={"task": "regression", "B": B})
    before = (data.X.copy(), data.y.copy(), data.X_test.copy(), data.y_test.copy(), data.fingerprint())
    for array in (X, y, Xt, yt, B):
        array[0] = np.nan                  # the caller's arrays stay the caller's
    np.testing.assert_array_equal(data.X, before[0])
    np.testing.assert_array_equal(data.y, before[1])
    np.testing.assert_array_equal(data.X_test, before[2])
    np.testing.assert_array_equal(data.y_test, before[3])
    np.testing.assert_array_equal(data.meta["B"], np.eye(2))
    assert data.fingerprint() == before[4]


def test_writing_into_a_dataset_raises_also_after_a_copy_or_a_pickle():
    X, y, Xt, yt = _arrays()
    data = Dataset(X, y, Xt, yt, meta={"B": np.eye(2)})
    for other in (data, pickle.loads(pickle.dumps(data)), copy.deepcopy(data)):
        for array in (other.X, other.y, other.X_test, other.y_test, other.meta["B"], other.X[:, 0]):
            with pytest.raises(ValueError, match="read-only"):
                array[0] = 1.0
        assert other.fingerprint() == data.fingerprint()
    # a new dataset from a read-only one (a subset, a replacement) is built the same way
    part = data.subset([0, 1, 2], [3, 4])
    np.testing.assert_array_equal(part.X_test, X[[3, 4]])
    longer = dataclasses.replace(data, X=np.vstack([data.X, data.X[:1]]), y=np.append(data.y, 0.0))
    assert longer.n == 7 and not longer.X.flags.writeable


@pytest.mark.parametrize("X, message", [
    (np.ones((4, 2)) + 1j, r"X holds complex numbers \(dtype complex128\); .*real and imaginary parts"),
    (np.ma.masked_array(np.ones((4, 2)), mask=[[0, 1]] * 4), "X is a masked array"),
    (np.array(["2024-01-0%d" % i for i in range(1, 5)], dtype="datetime64[D]"), r"X holds dates or times"),
    (np.arange(4).astype("timedelta64[s]"), "X holds time differences"),
    (np.array([1.0, None, 2.0, 3.0], dtype=object), r"X holds Python objects \(dtype object\)"),
    ([["a"], ["b"], ["c"], ["d"]], r"X holds strings .*numeric"),
    (scipy.sparse.csr_matrix(np.ones((4, 2))), r"X is a sparse matrix; pass a dense array \(its .toarray\(\)\)"),
    ([[1.0, 2.0], [3.0]], "X must be a rectangular numeric array"),
    (pd.DataFrame({"a": [1.0, 2, 3, 4], "when": pd.date_range("2024-01-01", periods=4)}),
     r"columns that are not real numbers or booleans: 'when' \(datetime64"),
    (pd.DataFrame({"a": pd.Categorical(["x", "y", "x", "y"])}), r"'a' \(category\)"),
    (pd.DataFrame({"a": pd.array([1, None, 2, 3], dtype="Int64")}), r"X contains NaN \(1 entries\)"),
])
def test_arrays_that_are_not_real_numbers_are_refused_naming_what_to_do(X, message):
    with pytest.raises(ValueError, match=message) as caught:
        Dataset(X=X, y=np.arange(4.0), name="mine")
    assert str(caught.value).startswith("dataset 'mine': X")


def test_a_complex_target_or_test_array_is_refused_too():
    X, y, Xt, yt = _arrays()
    with pytest.raises(ValueError, match="dataset 'data': y holds complex numbers"):
        Dataset(X, y + 0j)
    with pytest.raises(ValueError, match="dataset 'data': X_test is a masked array"):
        Dataset(X, y, np.ma.masked_array(Xt), yt)


def test_pandas_inputs_keep_their_column_names_and_booleans_count_as_numbers():
    frame = pd.DataFrame({"load": [1.0, 2.0, 3.0, 4.0], "weekend": [True, False, False, True],
                          "n": pd.array([1, 2, 3, 4], dtype="Int64")})
    data = Dataset(frame, pd.Series([0.5, 1.0, 1.5, 2.0]), name="frame")
    assert data.meta["feature_names"] == ["load", "weekend", "n"]
    np.testing.assert_array_equal(data.X[:, 1], [1.0, 0.0, 0.0, 1.0])
    assert data.X.dtype == np.float64 and not data.X.flags.writeable
    frame.iloc[0, 0] = -99.0
    assert data.X[0, 0] == 1.0


def test_class_names_become_the_classes_0_to_k_minus_1():
    """String labels (a pandas column, a list) and categoricals are numbered in sorted order, training and test
    labels together; the names are kept in meta["classes"] and the task follows from their number."""
    X = np.arange(8.0).reshape(4, 2)
    data = Dataset(pd.DataFrame(X, columns=["a", "b"]), pd.Series(["yes", "no", "no", "yes"]), name="answers")
    np.testing.assert_array_equal(data.y, [1.0, 0.0, 0.0, 1.0])
    assert data.meta["classes"] == {0: "no", 1: "yes"} and data.task == "classification"
    assert bz.datasets.classes_text(data.meta) == "0 = no, 1 = yes"

    three = Dataset(X, ["b", "a", "b", "a"], X[:2], ["c", "a"], name="three")
    np.testing.assert_array_equal(three.y, [1.0, 0.0, 1.0, 0.0])
    np.testing.assert_array_equal(three.y_test, [2.0, 0.0])
    assert three.meta["classes"] == {0: "a", 1: "b", 2: "c"} and three.task == "multiclass"
    assert Dataset(X, pd.Categorical([2.5, 1.0, 1.0, 2.5])).meta["classes"] == {0: "1", 1: "2.5"}
    # numbers and booleans stay what they are
    assert "classes" not in Dataset(X, [0, 1, 1, 0]).meta and "classes" not in Dataset(X, [True, False] * 2).meta


@pytest.mark.parametrize("kwargs, message", [
    (dict(y=["yes", None, "no", "no"]), r"y has 1 missing label\(s\) \(the first at row 1\); drop those rows or fill"),
    (dict(y=["yes", "no"] * 2, meta={"task": "regression"}), r"class names \(no, yes\) but meta\['task'\] is "
                                                              r"'regression'; give numbers"),
    (dict(y=[0.0, 1.0] * 2, X_test=np.ones((1, 2)), y_test=["no"]), "y_test holds class names but y holds numbers"),
    (dict(y=["yes", "no"] * 2, meta={"classes": {0: "yes", 1: "no"}}), r"sort into \{0: 'no', 1: 'yes'\}"),
])
def test_class_names_that_cannot_be_numbered_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Dataset(np.ones((4, 2)), **kwargs)


def test_a_table_without_rows_is_called_empty():
    """A header-only table (columns of no type) is empty, not a table of strings."""
    with pytest.raises(ValueError, match="dataset 'data' is empty: X has no rows"):
        Dataset(pd.DataFrame(columns=["a", "b"]), pd.Series([], dtype=object))


@pytest.mark.parametrize("kwargs, message", [
    (dict(name=None), "name must be a non-empty string, got None"),
    (dict(name=""), "name must be a non-empty string"),
    (dict(name=3), "name must be a non-empty string, got 3"),
    (dict(meta=[("task", "regression")]), "meta must be a dict"),
    (dict(meta={1: "a"}), r"meta must be keyed by strings, got the key\(s\) \[1\]"),
    (dict(meta={"task": ["regression"]}), r"meta\['task'\] must be one of"),
    (dict(meta={"task": "clustering"}), r"meta\['task'\] must be one of"),
    (dict(y_test=[1.0, 2.0]), "y_test given without X_test"),
    (dict(X_test=np.ones((2, 2))), "X_test given without y_test"),
])
def test_every_constructor_argument_is_checked(kwargs, message):
    X, y, _, _ = _arrays()
    with pytest.raises(ValueError, match=message):
        Dataset(X=X, y=y, **kwargs)


def test_meta_none_is_an_empty_meta():
    X, y, _, _ = _arrays()
    data = Dataset(X, y, meta=None)
    assert data.meta == {} and data.task is None


@pytest.mark.parametrize("spec", [{}, {"width": 3.0}, "rvm", None, {"family": ["rvm"]}, {"family": "nope"}])
def test_from_spec_refuses_what_is_not_a_model_spec(spec):
    with pytest.raises(ValueError, match="model spec|unknown model family"):
        bz.models.from_spec(spec)
    assert bz.models.from_spec(bz.models.RVM(width=2.0).spec()) == bz.models.RVM(width=2.0)


@pytest.mark.parametrize("executor", [object(), "local", 2])
def test_compare_refuses_what_is_not_an_executor(executor):
    data = bz.datasets.load("sinc", n=12, n_test=5, seed=0)
    with pytest.raises(ValueError, match=r"executor must be a concurrent.futures.Executor \(e.g. "
                                         r"ProcessPoolExecutor\) or a Dask distributed.Client"):
        bz.compare(bz.models.RVM(), data, ["em"], reference=None, executor=executor, progress=False)


def test_compare_takes_a_dask_client_through_its_executor():
    distributed = pytest.importorskip("distributed")
    data = bz.datasets.load("sinc", n=12, n_test=5, seed=0)
    kw = dict(backends=["em", "fast"], reference=None, draws=20, chains=1, seed=3, progress=False)
    local = bz.compare(bz.models.RVM(width=3.0), data, **kw)
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None) as client:
        remote = bz.compare(bz.models.RVM(width=3.0), data, executor=client, **kw)
    assert list(remote.fits) == ["em", "fast"] and not remote.errors
    for label, fit in local.fits.items():
        np.testing.assert_array_equal(remote.fits[label].posterior["w"].values, fit.posterior["w"].values)


def test_the_fingerprint_is_hashed_once_and_follows_the_task():
    """Every fit records the fingerprint, so it is kept after the first call (the arrays are read-only); meta's
    task, which can still be changed, is checked each time."""
    X, y, Xt, yt = _arrays()
    data = Dataset(X, y, Xt, yt, name="mine", meta={"task": "regression"})
    first = data.fingerprint()
    assert data.fingerprint() == first == Dataset(X, y, Xt, yt, name="mine", meta={"task": "regression"}).fingerprint()
    data.meta["task"] = "classification"
    changed = data.fingerprint()
    assert changed != first
    assert changed == Dataset(X, y, Xt, yt, name="mine", meta={"task": "classification"}).fingerprint()
    assert Dataset(X + 1e-12, y, Xt, yt, name="mine", meta={"task": "classification"}).fingerprint() != changed
