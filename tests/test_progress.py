"""Progress bars: every hand-written backend of the dense families shows one with its unit of work when asked
(progress=True), and none when not; the bar's postfix helper redraws at most every mininterval."""
from __future__ import annotations

import io
import itertools
import re

import numpy as np
import pytest

import bayeszoo as bz
from bayeszoo.progress import progress_bar, show


def classification(n=30, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 2))
    y = (X[:, 0] + 0.5 * rng.standard_normal(n) > 0).astype(float)
    return bz.datasets.Dataset(X=X, y=y, name="tiny", meta={"task": "classification"})


def _slm():
    return (bz.models.SLM(tau=2.0, sigma2=0.05),
            bz.datasets.load("slm_signal", kind="spikes", n=12, m=10, sigma2=0.05, seed=0))


def _pmkl():
    return bz.models.PMKL(rule="mean"), bz.datasets.load("mkl_sources", n=12, n_test=12, seed=0)


def _bid():
    return bz.models.BID(psf_size=3), bz.datasets.load("bid_blocks", size=16, n_blocks=3, seed=0)


# (what, model and data, backend, options, the unit the bar counts, its description)
CASES = [
    ("rvm", lambda: (bz.models.RVM(width=3.0), bz.datasets.load("sinc", n=20, n_test=5)), "em", {}, "iteration",
     "em (mackay)"),
    ("rvm", lambda: (bz.models.RVM(width=3.0), bz.datasets.load("sinc", n=20, n_test=5)), "fast", {}, "action", "fast"),
    ("rvm", lambda: (bz.models.RVM(task="classification"), classification()), "vb", {}, "sweep", "vb"),
    ("rvm", lambda: (bz.models.RVM(width=3.0), bz.datasets.load("sinc", n=20, n_test=5)), "gibbs",
     {"draws": 5, "tune": 5}, "sweep", "gibbs"),
    ("gpc", lambda: (bz.models.GPC(), classification()), "ep", {}, "pass", "ep (probit)"),
    ("gpc", lambda: (bz.models.GPC(likelihood="logit"), classification()), "laplace", {}, "Newton step",
     "laplace (logit)"),
    ("gpc", lambda: (bz.models.GPC(), classification()), "lr", {}, "step", "lr"),
    ("gpc", lambda: (bz.models.GPC(), classification()), "vb", {}, "EM step", "vb (probit)"),
    ("pmkl", _pmkl, "em", {}, "iteration", "em"),
    ("pmkl", _pmkl, "mrvm1", {}, "action", "mrvm1"),
    ("slm", _slm, "map", {}, "sweep", "map (cd)"),
    ("slm", _slm, "sbl", {}, "iteration", "sbl (slm)"),
    ("slm", _slm, "dloop", {}, "outer loop", "dloop (slm)"),
    ("slm", _slm, "ep", {"max_sweeps": 3}, "sweep", "ep (slm)"),
    ("imagervm", lambda: (bz.models.ImageRVM(), bz.datasets.load("sinc2d_image", size=8, seed=0)), "dft", {},
     "iteration", "dft-rvm (diagonal)"),
    ("bid", _bid, "vb", {"max_iter": 3}, "iteration", "bid vb"),
    ("bid", _bid, "vb_sparse", {"max_iter": 2}, "step", "bid vb_sparse"),
    ("bid", _bid, "gibbs", {"draws": 3, "tune": 2}, "sweep", "gibbs"),
    ("arvm", lambda: (bz.models.ARVM(n_basis=4), bz.datasets.load("sinc", n=16, n_test=5, seed=0)), "arvm",
     {"max_iter": 5}, "step", "arvm"),
]


@pytest.mark.parametrize("family,problem,backend,options,unit,desc", CASES,
                         ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_a_backend_shows_its_unit_of_work(capsys, family, problem, backend, options, unit, desc):
    model, data = problem()
    counts = {"draws": 5, "chains": 1, **options}
    bz.fit(model, data, backend, progress=True, **counts)
    err = capsys.readouterr().err
    # tqdm's rate reads "<n><unit>/s" or "<s>s/<unit>" (and "?<unit>/s" before the first unit is done)
    assert f"{desc}:" in err and (f"{unit}/s" in err or f"s/{unit}" in err), err[-400:]
    bz.fit(model, data, backend, progress=False, **counts)
    assert capsys.readouterr().err == ""


def test_a_bar_with_a_total_shows_the_time_left():
    out = io.StringIO()
    with progress_bar(total=4, desc="work", unit="sweep", file=out, mininterval=0) as bar:
        bar.update(2)
    # "2/4 [00:00<00:00, ...sweep/s]": elapsed < remaining, which tqdm shows only when it knows the total (the
    # figures themselves are the machine's speed)
    assert re.search(r"2/4 \[\d\d:\d\d<\d\d:\d\d, ", out.getvalue()) and "sweep/s" in out.getvalue()


def test_show_redraws_at_most_every_mininterval(monkeypatch):
    # a machine booted a minute ago: the monotonic clock reads less than mininterval at the first call
    clock = itertools.count(60.0)
    monkeypatch.setattr("bayeszoo.progress.time.monotonic", lambda: next(clock))
    out = io.StringIO()
    bar = progress_bar(total=10, desc="ep", unit="pass", file=out, mininterval=3600)
    show(bar, "site 64/3000")
    show(bar, "site 128/3000")      # within the hour: kept as the postfix, not drawn
    text = out.getvalue()
    assert "site 64/3000" in text and "site 128/3000" not in text
    assert bar.postfix == "site 128/3000"
    bar.close()
    quiet = io.StringIO()
    show(progress_bar(total=10, file=quiet, disable=True), "never")
    assert quiet.getvalue() == ""
