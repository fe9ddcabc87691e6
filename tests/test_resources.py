"""The memory guard (bayeszoo/memory_guard.py): its byte arithmetic on small shapes, the limit it reads from the
machine, and the refusal by bz.fit before anything is allocated, with a limit given rather than a large problem."""
from __future__ import annotations

import dataclasses
import gc
import importlib
import os
import tracemalloc

import numpy as np
import pytest

import bayeszoo as bz
from bayeszoo import memory_guard as resources, registry
from bayeszoo.memory_guard import DRAW_COPIES, LIMIT_VARIABLE, Limit, Need


def classification(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 2))
    y = (X[:, 0] + 0.5 * rng.standard_normal(n) > 0).astype(float)
    return bz.datasets.Dataset(X=X, y=y, name=f"clf{n}", meta={"task": "classification"})


def never_runs(get):
    """``registry.get`` whose backends fail the test if they run: a refusal must come before any work."""
    def run(*args, **kwargs):
        raise AssertionError("the backend ran")

    return lambda model, name: dataclasses.replace(get(model, name), run=run)


def need_of(model, data, backend, draws, chains, **options) -> Need:
    spec = registry.get(model, backend)
    return resources.fit_need(spec, model, data, draws=draws, chains=chains,
                              options=spec.resolve(options, model, data))


# ------------------------------------------------------------------------------------------------ arithmetic
def test_dense_counts_float64_matrices():
    assert resources.dense(3) == 72
    assert resources.dense(3, 5) == 120
    assert resources.dense(4, 4, 2.5) == 320


def test_values_per_draw_sums_the_canonical_variables(sinc):
    # RVM regression on 20 points: w and log_alpha over 21 bases, and the scalar log_beta
    assert resources.values_per_draw(bz.models.RVM(width=3.0), sinc) == 21 + 21 + 1
    # PMKL on 12 points of 3 classes and 3 sources: W and log_alpha (12 x 3), beta (3)
    mkl = bz.datasets.load("mkl_sources", n=12, n_test=12, seed=0)
    assert resources.values_per_draw(bz.models.PMKL(rule="mean"), mkl) == 36 + 36 + 3


def test_rvm_em_estimate_is_the_design_eight_square_matrices_and_the_draws(sinc):
    need = need_of(bz.models.RVM(width=3.0), sinc, "em", draws=10, chains=2)
    N, M, values = 20, 21, 43
    assert sorted(need.parts.values()) == sorted([8 * N * M, 8 * 8 * M * M, 2 * 10 * values * 8 * DRAW_COPIES])
    assert need.total == 3360 + 28224 + 13760
    assert "ARVM" in need.advice


def test_gpc_estimates_hold_the_quadrature_and_the_kept_covariance():
    data = classification(12)
    ep = need_of(bz.models.GPC(likelihood="logit"), data, "ep", draws=5, chains=1)
    n, nodes = 12, 730
    assert ep.total == 8 * n * n * (7 + 3) + 8 * n * nodes * 6 + 5 * n * 8 * DRAW_COPIES
    # a sampler keeps no Gaussian and evaluates no bound: only its own matrices and the draws
    gibbs = need_of(bz.models.GPC(), data, "gibbs", draws=5, chains=1)
    assert gibbs.total == 8 * n * n * 5.5 + 5 * n * 8 * DRAW_COPIES


def test_pmkl_estimate_counts_one_kernel_per_source_and_one_factor_per_class():
    data = bz.datasets.load("mkl_sources", n=12, n_test=12, seed=0)
    need = need_of(bz.models.PMKL(rule="mean"), data, "em", draws=1, chains=1)
    N, S, C = 12, 3, 3
    # and the pointwise log likelihood: its result, one draw's latent means, the 3 N x C arrays that make them and
    # the quadrature's 3 arrays of N x 20 nodes x C (the true class's probability only)
    pointwise = 8 * (N + N * C + 3 * N * C + 3 * N * 20 * C)
    assert need.total == 8 * N * N * (S + C + 9.5) + 75 * 8 * DRAW_COPIES + pointwise


def test_slm_estimates_follow_the_solver():
    data = bz.datasets.load("slm_signal", kind="spikes", n=12, m=10, sigma2=0.05, seed=0)
    model = bz.models.SLM(tau=2.0, sigma2=0.05)
    n, m = 12, 10
    draws = 3 * n * 8 * DRAW_COPIES
    # the dense u-step: X^T X, the precision and its factor (3 n x n), dense B (q = n rows) and X
    assert need_of(model, data, "gibbs", draws=3, chains=1).total == 8 * (3 * n * n + n * n + m * n) + draws
    # conjugate gradients on the operators hold vectors only
    assert need_of(model, data, "gibbs", draws=3, chains=1, solver="cg").total == draws


def test_imagervm_exact_adds_the_dense_precision():
    data = bz.datasets.load("sinc2d_image", size=8, seed=0)
    model = bz.models.ImageRVM()
    weights = model.n_kernels * 64
    values = resources.values_per_draw(model, data)
    diagonal = need_of(model, data, "dft", draws=2, chains=1)
    exact = need_of(model, data, "dft", draws=2, chains=1, approx="exact")
    assert diagonal.total == 8 * 40 * weights + 2 * values * 8 * DRAW_COPIES
    assert exact.total - diagonal.total == 8 * 4 * weights * weights


def test_every_backend_of_the_families_declares_its_memory():
    undeclared = [b.owner for b in registry.all_backends()
                  if b.family in bz.models.FAMILIES and b.run.__module__.startswith("bayeszoo.")
                  and b.memory is None]
    assert undeclared == []


# ------------------------------------------------------------------------------------------------ the limit
@pytest.mark.parametrize("text,expected", [("8GiB", 8 * 2**30), ("500 MB", 500 * 10**6), ("2e9", 2 * 10**9),
                                           ("1.5kib", 1536), ("4096", 4096)])
def test_sizes_parse(text, expected):
    assert resources.parse_size(text) == expected


@pytest.mark.parametrize("text", ["lots", "-1GB", "0", "8 GiBs", ""])
def test_a_bad_size_is_refused(text):
    with pytest.raises(ValueError, match=LIMIT_VARIABLE):
        resources.parse_size(text)


def test_the_variable_sets_the_limit(monkeypatch):
    monkeypatch.setenv(LIMIT_VARIABLE, "3GiB")
    assert resources.memory_limit() == Limit(3 * 2**30, LIMIT_VARIABLE)


def test_without_the_variable_the_limit_is_at_most_the_physical_memory(monkeypatch):
    monkeypatch.delenv(LIMIT_VARIABLE, raising=False)
    limit = resources.memory_limit()
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert 0 < limit.bytes <= total


def test_an_address_space_limit_leaves_only_its_room(monkeypatch):
    import resource

    monkeypatch.delenv(LIMIT_VARIABLE, raising=False)
    used = resources._key_values("/proc/self/status").get("VmSize")
    if used is None:
        pytest.skip("no /proc/self/status on this system")
    cap = used * 1024 + 2**30
    real = resource.getrlimit
    monkeypatch.setattr(resource, "getrlimit",
                        lambda which: (cap, resource.RLIM_INFINITY) if which == resource.RLIMIT_AS else real(which))
    limit = resources.memory_limit()
    assert "ulimit -v" in limit.source
    assert 0.9 * 2**30 < limit.bytes <= 2**30     # the process grows a little between the two readings


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_a_cgroup_limit_leaves_its_room_plus_the_reclaimable_cache(tmp_path, version):
    own = "/jobs/one"
    membership = tmp_path / "cgroup"
    if version == "v2":
        membership.write_text(f"0::{own}\n")
        group = tmp_path / "fs" / own.strip("/")
        files = {"memory.max": "1000000", "memory.current": "400000",
                 "memory.stat": "anon 300000\ninactive_file 50000\n"}
    else:
        membership.write_text(f"4:memory:{own}\n1:cpu:/\n")
        group = tmp_path / "fs" / "memory" / own.strip("/")
        files = {"memory.limit_in_bytes": "1000000", "memory.usage_in_bytes": "400000",
                 "memory.stat": "cache 80000\ntotal_inactive_file 50000\n"}
    group.mkdir(parents=True)
    for name, text in files.items():
        (group / name).write_text(text)
    limit = resources._cgroup(root=str(tmp_path / "fs"), membership=str(membership))
    assert limit.bytes == 1000000 - 400000 + 50000 and "cgroup" in limit.source
    (group / ("memory.max" if version == "v2" else "memory.limit_in_bytes")).write_text(
        "max" if version == "v2" else str(2**63 - 4096))
    assert resources._cgroup(root=str(tmp_path / "fs"), membership=str(membership)) is None


# ------------------------------------------------------------------------------------------------ refusals
def test_check_passes_what_fits_and_names_everything_when_not():
    need = Need({"kernel K (3,000 x 3,000)": 72_000_000, "stored draws": 8_000_000}, "fit a subset")
    resources.check("GPC backend 'ep'", need, limit=Limit(80_000_000, "test"))
    with pytest.raises(ValueError) as refused:
        resources.check("GPC backend 'ep'", need, limit=Limit(79_999_999, "the test's limit"))
    text = str(refused.value)
    assert text.startswith("GPC backend 'ep': this fit would need about 76.3 MiB")
    assert "kernel K (3,000 x 3,000): 68.7 MiB; stored draws: 7.63 MiB" in text
    assert "76.3 MiB this process may take (the test's limit)" in text and "fit a subset" in text


def test_the_draws_that_would_fit_are_counted_exactly():
    # 4 chains of 100 values per draw, held twice: 6,400 bytes per draw; 1 MB of matrices
    need = Need({"matrices": 1_000_000, "stored draws": 4 * 1000 * 100 * 8 * DRAW_COPIES})
    with pytest.raises(ValueError, match=r"ask for fewer draws or chains \(at most 156 draws of 4 chains fit; thin=k keeps one sweep in k"):
        resources.check("x", need, limit=Limit(2_000_000, "test"), draws=1000, chains=4, values=100, thin=True)
    # 1,000 chains of 10 draws: not one draw of every chain fits in the 1 MB left, 62 chains of 16 kB do
    many = Need({"matrices": 1_000_000, "stored draws": 1000 * 10 * 100 * 8 * DRAW_COPIES})
    with pytest.raises(ValueError, match=r"ask for fewer chains \(at most 62 chains of 10 draws fit\)"):
        resources.check("x", many, limit=Limit(2_000_000, "test"), draws=10, chains=1000, values=100)


@pytest.mark.parametrize("backend,counts", [("gibbs", {"draws": 10**12}), ("em", {"chains": 10**9}),
                                            ("numpyro", {"draws": 10**12}), ("nuts", {"draws": 10**10})])
def test_bz_fit_refuses_draws_no_machine_holds_at_once(sinc, backend, counts, monkeypatch):
    monkeypatch.setattr("bayeszoo.api.registry.get", never_runs(registry.get))
    with pytest.raises(ValueError, match=r"this fit would need about [0-9.,]+ [PT]iB of memory \(stored draws"):
        bz.fit(bz.models.RVM(width=3.0), sinc, backend, progress=False, **counts)


def test_bz_fit_refuses_under_a_given_limit_before_the_backend_runs(sinc, monkeypatch):
    from bayeszoo.inference.rvm import core

    def never(*args, **kwargs):
        raise AssertionError("the backend ran")

    monkeypatch.setattr(core, "run_type2", never)
    monkeypatch.setenv(LIMIT_VARIABLE, "100kB")
    with pytest.raises(ValueError, match=rf"RVM backend 'em'.*more than the 97.7 kiB.*\({LIMIT_VARIABLE}\)"):
        bz.fit(bz.models.RVM(width=3.0), sinc, "em", draws=1000, chains=4, progress=False)


@pytest.mark.parametrize("backend,message", [
    ("ep", r"GPC backend 'ep': this fit would need about 1\d\d GiB.*7 matrices of 50,000 x 50,000.*random subset"),
    # a generic backend holds the declaration's K and L in the library's copies
    ("numpyro", r"backend 'numpyro': this fit would need about 2\d\d GiB.*kernel matrix K and its Cholesky factor L "
                r"\(50,000 x 50,000, 2\), 7 copies.*family's own backends")])
def test_a_gpc_on_50000_points_is_refused_without_allocating_its_kernel(monkeypatch, backend, message):
    # 50,000 points: one n x n matrix is 18.6 GiB; the limit is set so that the refusal does not depend on the machine
    monkeypatch.setenv(LIMIT_VARIABLE, "64GiB")
    data = classification(50_000)
    monkeypatch.setattr("bayeszoo.api.registry.get", never_runs(registry.get))
    tracemalloc.start()
    with pytest.raises(ValueError, match=message):
        bz.fit(bz.models.GPC(), data, backend, progress=False)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 50 * 2**20


def test_the_generic_backends_count_the_declarations_dense_arrays(sinc):
    """A generic backend holds copies of the arrays the family's declaration builds (the RVM's n x (n + 1) design,
    the GPC's K and L, the PMKL's kernels); full-rank ADVI also a dense covariance over the draw's values."""
    from bayeszoo.inference.engines_common import JAX_COPIES, PYMC_COPIES

    model = bz.models.RVM(width=3.0)
    n, values = sinc.n, resources.values_per_draw(model, sinc)
    assert model.declaration_memory(sinc) == {f"design matrix Phi ({n} x {n + 1})": 8 * n * (n + 1)}
    stored = resources.draws_bytes(values, 10, 2)
    for backend, copies in (("nuts", PYMC_COPIES), ("advi", PYMC_COPIES), ("numpyro", JAX_COPIES),
                            ("blackjax_nuts", JAX_COPIES), ("blackjax_pathfinder", JAX_COPIES)):
        assert need_of(model, sinc, backend, draws=10, chains=2).total == copies * 8 * n * (n + 1) + stored, backend
    full = need_of(model, sinc, "fullrank_advi", draws=10, chains=2)
    assert full.total == PYMC_COPIES * 8 * n * (n + 1) + 4 * 8 * values ** 2 + stored
    data = classification(30)
    assert bz.models.GPC().declaration_memory(data) == {"kernel matrix K and its Cholesky factor L (30 x 30, 2)": 14400}
    pmkl_data = bz.datasets.load("mkl_sources", n=20, n_test=5, seed=0)
    pmkl = bz.models.PMKL()
    assert sum(pmkl.declaration_memory(pmkl_data).values()) == len(pmkl.source_list(pmkl_data)) * 8 * 20 ** 2
    assert bz.models.SLM().declaration_memory(bz.datasets.load("slm_signal", n=8, m=6, seed=0)) == {}


def test_bayes_gp_classifier_is_refused_the_same_way(monkeypatch):
    from bayeszoo.sklearn import BayesGPClassifier

    monkeypatch.setenv(LIMIT_VARIABLE, "1MB")
    data = classification(400)
    with pytest.raises(ValueError, match="GPC backend 'laplace': this fit would need"):
        BayesGPClassifier(backend="laplace").fit(data.X, data.y)


def test_a_refused_cell_of_a_grid_is_an_error_row(sinc, monkeypatch):
    monkeypatch.setenv(LIMIT_VARIABLE, "2MB")
    cmp = bz.compare(bz.models.RVM(width=3.0), sinc, backends=["em", "fast"], reference=None, chains=1,
                     options={"em": {"draws": 10**6}}, progress=False)
    assert "fast" in cmp.fits and "this fit would need" in cmp.errors["em"]


# ------------------------------------------------------------------------------------------------ against reality
MEASURED = [("rvm", "em", {"max_iter": 3}), ("rvm", "gibbs", {"tune": 2}), ("gpc", "laplace", {"max_iter": 2}),
            ("gpc", "ep", {"max_sweeps": 1, "min_sweeps": 1}), ("pmkl", "mrvm1", {"max_iter": 5}),
            ("slm", "gibbs", {"tune": 2}), ("bid", "gibbs", {"tune": 1}), ("bid", "vb", {"max_iter": 2}),
            ("bid", "vb_sparse", {"max_iter": 1}), ("arvm", "arvm", {"max_iter": 3})]


def _measured_problem(family):
    if family == "rvm":
        return bz.models.RVM(width=3.0), bz.datasets.load("sinc", n=500, n_test=10, seed=0)
    if family == "gpc":
        return bz.models.GPC(), classification(500)
    if family == "pmkl":
        return bz.models.PMKL(rule="mean"), bz.datasets.load("mkl_sources", n=300, n_test=10, seed=0)
    if family == "arvm":    # the candidate search's N x candidates arrays dominate
        return bz.models.ARVM(), bz.datasets.load("sinc", n=400, n_test=10, seed=0)
    if family == "bid":     # image-sized arrays throughout: their count, not the size, is what is checked
        return bz.models.BID(psf_size=7), bz.datasets.load("cameraman", psf="uniform", snr_db=30, seed=0,
                                                           crop=(0, 0, 96))
    return (bz.models.SLM(tau=2.0, sigma2=0.05, B="tv"),
            bz.datasets.load("slm_signal", kind="spikes", n=500, m=100, sigma2=0.05, seed=0))


@pytest.mark.parametrize("family,backend,options", MEASURED, ids=[f"{f}-{b}" for f, b, _ in MEASURED])
def test_the_estimate_tracks_the_measured_peak(family, backend, options):
    """The declared counts are the matrices alive at the peak: the estimate is within 0.9 and 1.8 times the peak that
    tracemalloc (which sees NumPy's allocations) measures on a mid-sized problem, where the n^2 matrices dominate.
    The estimate errs high at these sizes (the quadrature and the kept covariance are counted whole)."""
    model, data = _measured_problem(family)
    counts = {"draws": 1, "chains": 1, "tune": options.pop("tune", 0)}
    bz.fit(model, data, backend, progress=False, **counts, **options)     # imports and caches of a first run
    need = need_of(model, data, backend, draws=1, chains=1, **options)
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        bz.fit(model, data, backend, progress=False, **counts, **options)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert 0.9 <= need.total / peak <= 1.8, (need.parts, peak)


# ------------------------------------------------------------------------------------------------ loops of fits
def test_sbc_of_an_rvm_on_30000_points_is_refused_before_it_simulates(monkeypatch):
    """The prior predictive builds the 30,000 x 30,001 design (6.7 GiB) in NumPy and again inside JAX: refused at
    once, naming the size and what to do, with a limit given so that the refusal does not depend on the machine."""
    sbc_module = importlib.import_module("bayeszoo.sbc")

    def never(*args, **kwargs):
        raise AssertionError("the simulations were drawn")

    monkeypatch.setattr(sbc_module, "prior_predictive", never)
    monkeypatch.setenv(LIMIT_VARIABLE, "32GiB")
    data = bz.datasets.load("sinc", n=30_000, n_test=10, seed=0)
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"sbc \(RVM backend 'gibbs'\): the simulations and fits would need "
                                             r"about 8\d.\d GiB of memory \(the prior predictive's design matrix Phi "
                                             r"\(30,000 x 30,001\), 7 copies: 46.9 GiB.*more than the 32 GiB.*random "
                                             r"subset"):
            bz.sbc(bz.models.RVM(width=3.0), "gibbs", data, n_simulations=20, draws=100, chains=1, progress=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 * 2**20


def test_sbc_counts_its_fits_and_simulations_within_the_limit(sinc, monkeypatch):
    """A small problem passes the guard; with the limit below one fit's stored draws it is refused before any
    simulation, as bz.fit would refuse that fit, and the refusal says how many draws fit."""
    sbc_module = importlib.import_module("bayeszoo.sbc")

    model = bz.models.RVM(width=3.0)
    spec = registry.get(model, "gibbs")
    need = sbc_module.memory_need(model, sinc, spec, spec.resolve({}, model, sinc), n_simulations=30, draws=10**6,
                                  chains=1, here=True)
    values = resources.values_per_draw(model, sinc)
    stored = resources.draws_bytes(values, 10**6, 1)
    assert stored in need.parts.values()
    simulated = 8 * 30 * (values + sinc.n) * 2
    assert need.total == sum(need_of(model, sinc, "gibbs", draws=10**6, chains=1).parts.values()) + simulated + \
        8 * 7 * sinc.n * (sinc.n + 1)
    # on an executor the fits are the workers' (bz.fit guards each there): only the simulations are held here
    away = sbc_module.memory_need(model, sinc, spec, spec.resolve({}, model, sinc), n_simulations=30, draws=10**6,
                                  chains=1, here=False)
    assert away.total == simulated + 8 * 7 * sinc.n * (sinc.n + 1)
    monkeypatch.setattr(sbc_module, "prior_predictive", lambda *a, **k: (_ for _ in ()).throw(AssertionError("ran")))
    monkeypatch.setenv(LIMIT_VARIABLE, "100MB")
    with pytest.raises(ValueError, match=r"sbc \(RVM backend 'gibbs'\).*at most [0-9,]+ draws of 1 chains fit"):
        bz.sbc(model, "gibbs", sinc, n_simulations=30, draws=10**6, chains=1, progress=False)


def test_cross_validate_holds_one_fold_fit_at_a_time(sinc, monkeypatch):
    """Each fold's bz.fit is guarded for one fit: the previous fold's Fit (its draws) must be gone when the next
    one starts, or the loop holds two fits' draws where the guard counted one."""
    import weakref

    from bayeszoo import api

    fit, alive = api.fit, []

    def tracked(*args, **kwargs):
        gc.collect()
        alive.append(sum(ref() is not None for ref in refs))
        result = fit(*args, **kwargs)
        refs.append(weakref.ref(result))
        return result

    refs = []
    monkeypatch.setattr(api, "fit", tracked)
    scores = bz.cross_validate(bz.models.RVM(width=3.0), sinc, "em", folds=4, draws=50, chains=1, progress=False)
    assert len(scores["seed"]) == 4 and alive == [0, 0, 0, 0]
    # and a fold that does not fit is refused before its backend runs, as bz.fit refuses it
    monkeypatch.setenv(LIMIT_VARIABLE, "100kB")
    with pytest.raises(ValueError, match=r"RVM backend 'em': this fit would need"):
        bz.cross_validate(bz.models.RVM(width=3.0), sinc, "em", folds=4, draws=10**4, chains=1, progress=False)
    assert len(refs) == 4
