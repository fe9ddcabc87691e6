"""bz.benchmark: the ranking on exact targets with fake samplers of known cost (exact draws, the same draws at four
times the gradients, biased draws, a broken one), resuming, a folder of another benchmark, bad input, the report
and the command line. The Dask cluster of separate processes is in test_benchmark_cluster.py."""
from __future__ import annotations

import importlib
import json
import math
import os
import sys
import types
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import pytest

import bayeszoo as bz
from bayeszoo.benchmark import largest_first, load_leaderboard, task_path
from bayeszoo.catalogue import costs
from bayeszoo.diagnostics.leaderboard_plots import tau_ticks
from bayeszoo import cli
from tests.helpers.fresh_workers import FreshWorkers, fresh_pool

TARGETS = ["exact/correlated_gaussian", "exact/banana"]
#: the module (``bayeszoo.benchmark`` is the function bz.benchmark), whose process pool a test replaces
BENCHMARK_MODULE = importlib.import_module("bayeszoo.benchmark")


@pytest.fixture(scope="module")
def fakes(fake_samplers):
    return fake_samplers


@pytest.fixture
def calls(tmp_path, monkeypatch):
    """The calls the fake samplers make, as lines '<backend> <target> <seed>'."""
    log = tmp_path / "calls.log"
    monkeypatch.setenv("BZ_FAKE_LOG", str(log))
    return lambda: log.read_text().splitlines() if log.exists() else []


@pytest.fixture(scope="module")
def board(fakes, tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    return bz.benchmark(TARGETS, ["iid_exact", "iid_costly", "iid_biased", "iid_broken", "em"], seeds=2,
                           draws=1000, chains=2, out=out, progress=False), out


def test_the_cheaper_exact_sampler_wins_by_its_gradient_ratio(board):
    lb, _ = board
    assert lb.cost == "gradients"
    ratios = lb.ratios()
    assert ratios["iid_exact"].tolist() == [1.0, 1.0]
    np.testing.assert_allclose(ratios["iid_costly"], 4.0)
    assert np.isinf(ratios["iid_biased"]).all()
    summary = lb.summary().set_index("backend")
    assert summary.loc["iid_exact", "solved"] == 2 and summary.loc["iid_exact", "relative_cost"] == 1.0
    assert summary.loc["iid_costly", "relative_cost"] == pytest.approx(4.0)
    assert summary.loc["iid_biased", "solved"] == 0
    assert lb.summary()["backend"].tolist()[:2] == ["iid_exact", "iid_costly"]
    # worth-N-draws at the end: the exact draws about all their 2000, the draws one sd off a handful (as one draw is)
    assert summary.loc["iid_exact", "worth_draws_median"] > 500
    assert summary.loc["iid_biased", "worth_draws_median"] < 10


def test_gradients_to_target_of_an_approximation_are_all_it_used(board):
    lb, _ = board
    rows = lb.table().set_index(["target", "backend", "seed"])
    for target in TARGETS:
        assert rows.loc[(target, "iid_exact", 0), "gradients_to_target"] == 2000
        assert rows.loc[(target, "iid_costly", 1), "gradients_to_target"] == 8000
        assert math.isinf(rows.loc[(target, "iid_biased", 0), "gradients_to_target"])


def test_failures_and_backends_that_do_not_apply_are_rows_not_crashes(board, fakes):
    lb, _ = board
    failed = lb.failures()
    broken = failed[failed["backend"] == "iid_broken"]
    assert len(broken) == 4 and set(broken["status"]) == {"failed"}
    assert all(fakes.BROKEN in m for m in broken["message"])
    skipped = failed[failed["backend"] == "em"]
    assert set(skipped["status"]) == {"skipped"} and all("does not apply" in m for m in skipped["message"])
    summary = lb.summary().set_index("backend")
    assert summary.loc["iid_broken", "failed"] == 4 and summary.loc["em", "skipped"] == 4
    assert lb.costs()["em"].isna().all() and np.isinf(lb.costs()["iid_broken"]).all()


def test_the_performance_profile_steps_at_the_ratios(board):
    lb, _ = board
    prof = lb.profile([1.0, 3.9, 4.0, 100.0])
    assert prof["iid_exact"].tolist() == [1.0, 1.0, 1.0, 1.0]
    assert prof["iid_costly"].tolist() == [0.0, 0.0, 1.0, 1.0]
    assert prof["iid_biased"].tolist() == [0.0] * 4
    default = lb.profile()
    assert default.index[0] == 1.0 and default.index[-1] >= 4.0
    assert default["iid_costly"].iloc[-1] == 1.0


def test_the_profile_axis_labels_the_factors_between_1_and_the_largest(board):
    """The costly sampler is 4 times the best: the axis labels 1, 1.25, ..., 4 (a bare log axis labelled only 1)."""
    ax = board[0].plot("profile").axes[0]
    ax.figure.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert labels[0] == "1" and {"2", "3", "4"} <= set(labels) and len(labels) <= 8
    assert tau_ticks(1.1) == [1] and tau_ticks(4.2) == [1, 1.25, 1.5, 2, 3, 4]
    assert len(tau_ticks(1e6)) <= 9 and tau_ticks(1e6)[0] == 1 and tau_ticks(1e6)[-1] == 1e6


def test_the_verdict_names_the_winner_and_the_failures(board):
    text = board[0].verdict()
    assert text.startswith("On 2 targets with 2 seeds each, cost counted in gradient evaluations")
    assert "iid_exact solves the most (2 of 2) at 1x" in text
    assert "iid_costly solves 2 at 4x" in text
    assert "iid_biased reaches the target on none" in text
    assert "Failed tasks: iid_broken (4)" in text


def test_the_report_is_one_page_with_its_figures(board):
    lb, out = board
    page = (out / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and lb.verdict().split(":")[0] in page
    assert page.count("data:image/png;base64,") == 2
    assert "fake sampler broke" in page and "does not apply" in page
    assert "<div class='bz-leaderboard'>" in lb._repr_html_()
    for kind in ("profile", "heatmap"):
        assert lb.plot(kind).axes
    with pytest.raises(ValueError, match="kind must be one of 'profile', 'heatmap'"):
        lb.plot("bars")
    assert {"tasks.csv", "leaderboard.csv", "benchmark.json"} <= set(os.listdir(out))


def test_a_benchmark_resumes_without_running_again_what_is_done(fakes, tmp_path, calls):
    kw = dict(seeds=[3], draws=200, chains=2, out=tmp_path / "b", progress=False)
    first = bz.benchmark(TARGETS[:1], ["iid_exact"], **kw)
    assert calls() == ["iid_exact correlated_gaussian 3"]
    # one more backend: only its tasks run; the finished one is read back
    second = bz.benchmark(TARGETS[:1], ["iid_exact", "iid_costly"], **kw)
    assert calls() == ["iid_exact correlated_gaussian 3", "iid_costly correlated_gaussian 3"]
    pd.testing.assert_frame_equal(second.table().iloc[:1], first.table(), check_dtype=False)
    assert load_leaderboard(tmp_path / "b").table().shape == second.table().shape
    # a task file lost: that task alone runs again
    os.remove(task_path(str(tmp_path / "b"), TARGETS[0], "iid_exact", 3))
    bz.benchmark(TARGETS[:1], ["iid_exact", "iid_costly"], **kw)
    assert calls()[2:] == ["iid_exact correlated_gaussian 3"]


class _RunsEachTaskTwice(ThreadPoolExecutor):
    """An executor that runs every task a second time after it finished, as Dask does with a task whose result was
    lost with the worker that held it."""

    def submit(self, fn, /, *args, **kwargs):
        fn(*args, **kwargs)
        return super().submit(fn, *args, **kwargs)


def test_a_benchmark_task_does_not_compute_the_pointwise_log_likelihood(fakes, restore_registry):
    """A task scores a fit's draws against the reference and keeps no fit: the log likelihood for LOO (a compiled
    function and a pass over every draw for a PyMC model) would be work nobody reads."""
    seen = []

    def probe(model, data, *, draws, tune, chains, seed, progress):
        seen.append(bz.results.stores_log_likelihood())
        return fakes._exact_fit("probe", model, data, draws, chains, seed, cost=1)

    bz.register_backend("probe", probe, kind="approximation", defaults={"draws": 100, "tune": 0, "chains": 2})
    assert bz.benchmark(TARGETS[:1], ["probe"], progress=False).table()["status"].eq("ok").all()
    assert seen == [False] and bz.results.stores_log_likelihood()


def test_a_task_run_again_on_a_cluster_reads_its_file_back(fakes, tmp_path, calls):
    kw = dict(seeds=[3, 4], draws=200, chains=2, out=tmp_path / "b", progress=False)
    with _RunsEachTaskTwice(1) as executor:
        board = bz.benchmark(TARGETS[:1], ["iid_exact"], executor=executor, **kw)
    assert sorted(calls()) == ["iid_exact correlated_gaussian 3", "iid_exact correlated_gaussian 4"]
    assert board.table()["status"].eq("ok").all()


@pytest.fixture
def recorded_costs(tmp_path, monkeypatch):
    """Earlier runs' costs (a task-costs file of our own): banana's fits took longer than the correlated
    Gaussian's, iid_costly's longer than iid_exact's."""
    path = tmp_path / "task_costs.csv"
    path.write_text("target,backend,seconds,gradients_to_target,run\n"
                    "exact/correlated_gaussian,iid_exact,1.0,100,a\n"
                    "exact/correlated_gaussian,iid_costly,4.0,400,a\n"
                    "exact/banana,iid_exact,2.0,,b\n"
                    "exact/banana,iid_costly,8.0,inf,b\n")
    monkeypatch.setattr(costs, "TASK_COSTS_FILE", str(path))
    costs.recorded_costs.cache_clear()
    yield
    costs.recorded_costs.cache_clear()


def test_expected_seconds_are_the_recorded_ones_else_the_target_s_else_the_backend_s(recorded_costs):
    assert costs.expected_seconds("exact/banana", "iid_costly") == 8.0
    assert costs.expected_seconds("exact/banana", "mine") == 5.0   # the target's median: its size sets the cost
    assert costs.expected_seconds("exact/funnel", "iid_costly") == 6.0   # the backend's median
    assert costs.expected_seconds("exact/funnel", "mine") == 3.0   # the median of all
    assert np.isnan(costs.recorded_costs()["exact/banana", "iid_exact"]["gradients_to_target"])


def test_the_shipped_costs_read():
    shipped = costs.recorded_costs()
    assert shipped["posteriordb/arK-arK", "numpyro"]["seconds"] > 0
    assert shipped["posteriordb/arK-arK", "numpyro"]["gradients_to_target"] > 0


def test_largest_first_orders_tasks_and_groups_by_their_expected_seconds(recorded_costs):
    tasks = [(t, b, 0) for t in TARGETS for b in ("iid_exact", "iid_costly")]
    assert largest_first(tasks) == [("exact/banana", "iid_costly", 0), ("exact/correlated_gaussian", "iid_costly", 0),
                                    ("exact/banana", "iid_exact", 0), ("exact/correlated_gaussian", "iid_exact", 0)]
    # a group counts all its seeds: three short fits (3 x 2 s) outlast one long one (4 s); ties keep their order
    groups = [[("exact/correlated_gaussian", "iid_costly", 0)], [("exact/banana", "iid_exact", s) for s in range(3)],
              [("exact/funnel", "mine", 0)], [("exact/funnel", "yours", 0)]]
    assert largest_first(groups) == [groups[1], groups[0], groups[2], groups[3]]


@pytest.mark.parametrize("how", ["here", "jobs", "executor"])
def test_workers_start_the_longest_tasks_first(fakes, tmp_path, calls, monkeypatch, recorded_costs, how):
    """Worker processes and an executor get the tasks expected to take longest first, so that no long task starts
    last and runs alone; run here, one after another, they keep the suite's order."""
    monkeypatch.setattr(BENCHMARK_MODULE, "process_pool", fresh_pool)
    kw = dict(draws=200, chains=2, progress=False)
    backends = ["iid_exact", "iid_costly"]
    if how == "here":
        bz.benchmark(TARGETS, backends, **kw)
        expected = ["iid_exact correlated_gaussian 0", "iid_costly correlated_gaussian 0",
                    "iid_exact banana 0", "iid_costly banana 0"]
    else:
        with ThreadPoolExecutor(1) as one_at_a_time:
            bz.benchmark(TARGETS, backends, **kw, **(dict(jobs=2) if how == "jobs" else dict(executor=one_at_a_time)))
        expected = ["iid_costly banana 0", "iid_costly correlated_gaussian 0",
                    "iid_exact banana 0", "iid_exact correlated_gaussian 0"]
    assert calls() == expected


def test_a_folder_of_another_benchmark_is_refused(fakes, tmp_path):
    bz.benchmark(TARGETS[:1], ["iid_exact"], draws=100, chains=2, out=tmp_path, progress=False)
    with pytest.raises(ValueError, match=r"holds another benchmark \(draws: 100 there, 200 here\)"):
        bz.benchmark(TARGETS[:1], ["iid_exact"], draws=200, chains=2, out=tmp_path, progress=False)
    json.loads((tmp_path / "benchmark.json").read_text())   # left as it was


@pytest.mark.parametrize("kwargs, message", [
    (dict(suite="posteriordb-quik"), r"unknown suite 'posteriordb-quik'; did you mean 'posteriordb-quick'"),
    (dict(suite=["exact/banan"]), r"'exact/banan' is not a target of the 'exact' suite; did you mean 'exact/banana'"),
    (dict(backends=["iid_exakt"]), r"unknown backend 'iid_exakt' \(did you mean 'iid_exact'.*\?\); known: .*iid_exact"),
    (dict(seeds=0), r"seeds"),
    (dict(target=0), r"target"),
    (dict(options={"nuts": {"target_accept": 0.9}}), r"options given for 'nuts', which is not among the backends"),
    (dict(executor="tcp://127.0.0.1:1"), r"executor must be a concurrent.futures.Executor"),
    (dict(cost="dollars"), r"cost must be one of 'gradients', 'seconds'"),
    (dict(jobs=0), r"jobs"),
    (dict(jobs=2, executor=ThreadPoolExecutor(1)),
     r"give jobs \(worker processes on this machine\) or an executor, not both"),
])
def test_bad_input_is_refused_before_any_task(fakes, calls, kwargs, message):
    args = dict(suite=TARGETS[:1], backends=["iid_exact"], progress=False)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        bz.benchmark(args.pop("suite"), args.pop("backends"), **args)
    assert calls() == []


def _iid_anywhere(model, data, *, draws, tune, chains, seed, progress):
    """The exact fake sampler as a module-level function, which a worker process unpickles by its name."""
    from tests.helpers import fake_samplers

    return fake_samplers._exact_fit("iid_anywhere", model, data, draws, chains, seed, cost=1)


def _broken_anywhere(model, data, *, draws, tune, chains, seed, progress):
    raise RuntimeError("broken anywhere")


@pytest.mark.slow   # two worker processes each import bayeszoo, JAX and PyMC
def test_two_worker_processes_give_the_leaderboard_of_one_process(fakes, tmp_path, calls, restore_registry):
    """jobs=2 runs the tasks in two spawned worker processes, each (target, backend)'s seeds in one of them; every
    task runs once and the table is the one of a run in this process, up to the timings."""
    for fn in (_iid_anywhere, _broken_anywhere):
        bz.register_backend(fn.__name__[1:], fn, kind="approximation", description="test fake",
                            defaults={"draws": 1000, "tune": 0, "chains": 2}, replace=True)
    kw = dict(seeds=2, draws=300, chains=2, progress=False)
    backends = ["iid_anywhere", "broken_anywhere"]
    here = bz.benchmark(TARGETS, backends, out=tmp_path / "here", **kw).table()
    in_this_process = sorted(calls())
    assert len(in_this_process) == 2 * 2
    board = bz.benchmark(TARGETS, backends, out=tmp_path / "workers", jobs=2, **kw)
    assert sorted(calls()[len(in_this_process):]) == in_this_process
    timings = ["seconds", "seconds_to_target", "traceback"]
    pd.testing.assert_frame_equal(board.table().drop(columns=timings, errors="ignore"),
                                  here.drop(columns=timings, errors="ignore"), check_dtype=False)
    assert (board.table()["status"] == "failed").sum() == 2 * 2   # broken_anywhere on both targets, both seeds
    # the worker processes wrote the task files: the folder reads back as the same leaderboard
    pd.testing.assert_frame_equal(load_leaderboard(tmp_path / "workers").table().drop(columns=timings, errors="ignore"),
                                  board.table().drop(columns=timings, errors="ignore"), check_dtype=False)


_NOTEBOOK_CELL = '''
from tests.helpers import fake_samplers

COST = 2


def nb_exact(model, data, *, draws, tune, chains, seed, progress):
    """Exact draws at twice the gradient cost, defined in a notebook."""
    return fake_samplers._exact_fit("nb_exact", model, data, draws, chains, seed, cost=COST)
'''


def _defined_in_main(monkeypatch, source: str, name: str):
    """``name`` of ``source`` run as a notebook cell or a script runs it: in ``__main__``, where this process (and
    pickle, looking it up by name) finds it and a worker process does not."""
    namespace = {"__name__": "__main__"}
    exec(compile(source, "<notebook cell>", "exec"), namespace)
    monkeypatch.setattr(sys.modules["__main__"], name, namespace[name], raising=False)
    return namespace[name]


def test_a_backend_defined_in_a_notebook_runs_in_worker_processes_as_here(fakes, tmp_path, calls, monkeypatch,
                                                                          restore_registry):
    """A backend of a notebook (or a script's ``__main__``) and one registered by a function (a closure) reach the
    worker processes, which cannot import either: the leaderboard is the one of a run in this process."""
    nb_exact = _defined_in_main(monkeypatch, _NOTEBOOK_CELL, "nb_exact")
    bz.register_backend("nb_exact", nb_exact, kind="approximation", defaults={"draws": 1000, "tune": 0, "chains": 2})
    monkeypatch.setattr(BENCHMARK_MODULE, "process_pool", fresh_pool)
    kw = dict(seeds=2, draws=300, chains=2, progress=False)
    backends = ["nb_exact", "iid_exact"]
    here = bz.benchmark(TARGETS, backends, **kw).table()
    in_this_process = sorted(calls())
    board = bz.benchmark(TARGETS, backends, jobs=2, **kw)
    assert sorted(calls()[len(in_this_process):]) == in_this_process
    assert board.table()["status"].eq("ok").all(), board.failures()["message"].tolist()
    timings = ["seconds", "seconds_to_target"]
    pd.testing.assert_frame_equal(board.table().drop(columns=timings), here.drop(columns=timings), check_dtype=False)
    assert board.table().set_index("backend").loc["nb_exact", "n_grad"].eq(2 * 2 * 300).all()   # the cell's COST


def test_a_backend_defined_again_in_the_session_replaces_the_one_a_worker_was_sent_before(fakes, monkeypatch,
                                                                                        restore_registry):
    """A Dask worker outlives a benchmark: a backend defined again in the session (a notebook cell edited and run
    again, a sampler file changed) is the one the next benchmark runs there, not the one sent the time before."""
    workers = FreshWorkers()
    per_draw = []
    for cost in (2, 5, 5):
        cell = _NOTEBOOK_CELL.replace("COST = 2", f"COST = {cost}")
        bz.register_backend("nb_exact", _defined_in_main(monkeypatch, cell, "nb_exact"), kind="approximation",
                            replace=True)
        board = bz.benchmark(TARGETS[:1], ["nb_exact"], draws=300, chains=2, executor=workers, progress=False)
        per_draw.append(board.table()["n_grad"].iloc[0] / (2 * 300))
    assert per_draw == [2, 5, 5]


_PICKY_FILE = '''
WHY = "the file's own check"


def picky(logdensity_fn, step_size=0.1):
    raise ValueError(f"picky refuses to build: {WHY}")


picky.gradients_per_step = 1
'''


def test_a_sampler_file_on_the_command_line_reaches_worker_processes(tmp_path, capsys, monkeypatch,
                                                                     restore_registry):
    """``--backends mine.py:picky --jobs 2``: the file's function, with its module's globals, runs in a worker
    process that cannot import the file (it fails there with the file's own message, as it does here)."""
    (tmp_path / "mine.py").write_text(_PICKY_FILE)
    monkeypatch.setattr(BENCHMARK_MODULE, "process_pool", fresh_pool)
    code = cli.main(["benchmark", "--suite", "exact", "--targets", "correlated_gaussian", "--backends",
                     f"{tmp_path / 'mine.py'}:picky", "--draws", "20", "--tune", "0", "--chains", "1", "--jobs", "2",
                     "--out", str(tmp_path / "bench"), "--quiet"])
    printed = capsys.readouterr()
    assert code == 1, printed.err
    (row,) = load_leaderboard(tmp_path / "bench").table().itertuples()
    assert row.backend == "picky" and row.status == "failed"
    assert row.message == "ValueError: picky refuses to build: the file's own check"


_SESSION_MODULE = '''
from tests.helpers import fake_samplers


def sessional(model, data, *, draws, tune, chains, seed, progress):
    return fake_samplers._exact_fit("sessional", model, data, draws, chains, seed, cost=1)
'''


@pytest.mark.parametrize("how", ["jobs", "executor"])
def test_a_backend_the_workers_cannot_load_is_refused_before_any_task(fakes, calls, monkeypatch, restore_registry,
                                                                      how):
    """A backend of a module made in the session (loaded from a file under a name nothing else imports) pickles by
    reference here, and a worker cannot import it: refused before any task, naming the backend and the remedy."""
    module = types.ModuleType("made_in_session")
    exec(compile(_SESSION_MODULE, "session.py", "exec"), module.__dict__)
    monkeypatch.setitem(sys.modules, "made_in_session", module)
    bz.register_backend("sessional", module.sessional, kind="approximation",
                        defaults={"draws": 1000, "tune": 0, "chains": 2})
    missing = ("made_in_session",)
    if how == "jobs":
        monkeypatch.setattr(BENCHMARK_MODULE, "process_pool", lambda jobs: fresh_pool(jobs, missing))
        kw, remedy = dict(jobs=2), "or run with jobs=1"
    else:
        kw, remedy = dict(executor=FreshWorkers(missing)), "or run here, without executor"
    with pytest.raises(ValueError, match=r"the backend sessional cannot be loaded in the (worker processes|executor's "
                                         r"workers) \(ModuleNotFoundError: No module named 'made_in_session'\): "
                                         r"make the module it needs importable there .*" + remedy):
        bz.benchmark(TARGETS[:1], ["sessional"], draws=100, progress=False, **kw)
    assert calls() == []


def test_a_backend_that_cannot_be_pickled_is_refused_before_any_task(fakes, tmp_path, calls, restore_registry):
    """A backend holding an open file cannot be sent to a worker at all: refused, naming it and the remedy."""
    log = open(tmp_path / "log.txt", "w")

    def logging_exact(model, data, *, draws, tune, chains, seed, progress):
        log.write(f"{seed}\n")
        return fakes._exact_fit("logging_exact", model, data, draws, chains, seed, cost=1)

    bz.register_backend("logging_exact", logging_exact, kind="approximation")
    try:
        with pytest.raises(ValueError, match=r"the backend logging_exact cannot be sent to the worker processes "
                                             r"\(\w+Error: .*file.*\): make what it holds .* or run with jobs=1"):
            bz.benchmark(TARGETS[:1], ["logging_exact"], jobs=2, progress=False)
    finally:
        log.close()
    assert calls() == []


def test_the_command_line_prints_the_verdict_and_the_report(fakes, tmp_path, capsys):
    code = cli.main(["benchmark", "--suite", "exact", "--targets", "correlated_gaussian,banana", "--backends",
                     "iid_exact,iid_costly", "--seeds", "1", "--draws", "300", "--chains", "2", "--out",
                     str(tmp_path), "--quiet"])
    printed = capsys.readouterr().out
    assert code == 0
    assert "iid_exact solves the most (2 of 2)" in printed
    assert f"report: {tmp_path / 'report.html'}" in printed


def test_the_command_line_exits_1_when_a_task_failed(fakes, tmp_path, capsys):
    code = cli.main(["benchmark", "--suite", "exact", "--targets", "banana", "--backends", "iid_exact,iid_broken",
                     "--out", str(tmp_path), "--quiet"])
    assert code == 1
    assert "1 of 2 tasks failed" in capsys.readouterr().err


def test_a_scheduler_that_does_not_answer_is_an_error_within_seconds(tmp_path):
    pytest.importorskip("distributed")
    with pytest.raises(SystemExit) as exc:
        cli.main(["benchmark", "--suite", "exact", "--backends", "nuts", "--out", str(tmp_path),
                  "--scheduler", "tcp://127.0.0.1:9"])
    assert exc.value.code == 2


def test_a_target_nobody_solves_counts_as_run_and_unsolved(fakes):
    lb = bz.benchmark(TARGETS[:1], ["iid_biased", "iid_broken", "em"], draws=200, chains=2, progress=False)
    assert np.isinf(lb.ratios()[["iid_biased", "iid_broken"]]).all(axis=None) and lb.ratios()["em"].isna().all()
    summary = lb.summary().set_index("backend")
    assert summary["ran_on"].to_dict() == {"iid_biased": 1, "iid_broken": 1, "em": 0}
    assert "no backend reached the target accuracy on any target" in lb.verdict()
    assert "worth 100 exact draws" in lb.verdict() and "The closest, iid_biased, ends worth" in lb.verdict()
    assert lb.plot("heatmap").axes
    with pytest.raises(ValueError, match="no backend reached the target accuracy on any target, so the profile"):
        lb.plot("profile")



@pytest.mark.parametrize("backends, status", [(["em"], "skipped"), (["iid_broken"], "failed")])
def test_a_benchmark_in_which_no_task_ran_has_a_summary_a_verdict_and_a_report(fakes, tmp_path, capsys, backends,
                                                                               status):
    """Every task skipped (a family's backend on a posteriordb or exact target) or failed: the rows carry no
    measurement, and the summary, the verdict, the report and the command line still say what happened."""
    board = bz.benchmark(TARGETS[:1], backends, draws=200, chains=2, out=tmp_path / "api", progress=False)
    summary = board.summary().set_index("backend")
    assert summary.loc[backends[0], ["solved", "ran_on", status]].tolist() == [0, int(status == "failed"), 1]
    assert np.isnan(summary.loc[backends[0], "worth_draws_median"])
    assert board.failures()["status"].tolist() == [status]
    if status == "skipped":
        assert "em does not apply to any of the targets (skipped: failures() says why)" in board.verdict()
    assert (tmp_path / "api" / "report.html").exists()
    assert load_leaderboard(tmp_path / "api").summary().equals(board.summary())
    code = cli.main(["benchmark", "--suite", "exact", "--targets", "correlated_gaussian", "--backends",
                     ",".join(backends), "--draws", "200", "--chains", "2", "--out", str(tmp_path / "cli"), "--quiet"])
    printed = capsys.readouterr()
    assert code == int(status == "failed") and "no backend reached the target accuracy" in printed.out
    if status == "skipped":
        assert "em does not apply to exact/correlated_gaussian" in printed.out

def test_an_mcmc_fit_counts_its_warm_up_and_the_sampling_up_to_the_target():
    from types import SimpleNamespace

    from bayeszoo.benchmark import gradients_to_target

    fit = SimpleNamespace(kind="mcmc", n_draws=100, timing={"compile": 1.0, "tune": 2.0, "sample": 4.0},
                          info={"n_grad": 1000, "n_grad_tune": 200})
    assert gradients_to_target(fit, 5.0) == 600.0          # half the sampling stage: 200 + 800 / 2
    assert gradients_to_target(fit, 7.0) == 1000.0
    assert math.isinf(gradients_to_target(fit, math.inf))
    fit.info = {"n_grad": None}
    assert math.isnan(gradients_to_target(fit, 5.0))


_MALA_FILE = '''
import blackjax


def mala(logdensity_fn, step_size=0.05):
    """MALA (BlackJAX): one gradient a step."""
    return blackjax.mala(logdensity_fn, step_size)


mala.gradients_per_step = {cost}
'''


@pytest.mark.slow      # compiles the sampler for the target: about 30 s
def test_a_sampler_file_declares_its_gradient_cost_on_the_command_line(tmp_path, capsys, restore_registry):
    """``--backends mine.py:mala`` takes ``mala.gradients_per_step`` from the file: its tasks count every step's
    gradient, warm-up included; a cost that is not a number > 0 is bad input, refused before any task."""
    (tmp_path / "mine.py").write_text(_MALA_FILE.format(cost=1))
    out = tmp_path / "bench"
    code = cli.main(["benchmark", "--suite", "exact", "--targets", "correlated_gaussian", "--backends",
                     f"{tmp_path / 'mine.py'}:mala", "--draws", "150", "--tune", "50", "--chains", "2",
                     "--out", str(out), "--quiet"])
    assert code == 0, capsys.readouterr().err
    (row,) = load_leaderboard(out).table().itertuples()
    assert row.backend == "mala" and row.n_grad == 2 * (150 + 50)

    (tmp_path / "bad.py").write_text(_MALA_FILE.format(cost="'one'"))
    with pytest.raises(SystemExit) as exc:
        cli.main(["benchmark", "--suite", "exact", "--backends", f"{tmp_path / 'bad.py'}:mala", "--out",
                  str(tmp_path / "never"), "--quiet"])
    assert exc.value.code == 2
    assert "gradients_per_step must be a number > 0" in capsys.readouterr().err
    assert not (tmp_path / "never").exists()


@pytest.mark.slow      # two worker processes import bayeszoo and JAX and compile the sampler: two minutes
def test_a_sampler_file_in_two_worker_processes_gives_the_leaderboard_of_one_process(tmp_path, capsys,
                                                                                    restore_registry):
    """``--backends mine.py:mala --jobs 2``: spawned workers, which cannot import the file, run its sampler; the
    tasks are those of ``--jobs 1`` up to the timings, gradients counted as the file declares."""
    (tmp_path / "mine.py").write_text(_MALA_FILE.format(cost=1))
    args = ["benchmark", "--suite", "exact", "--targets", "correlated_gaussian,banana", "--backends",
            f"{tmp_path / 'mine.py'}:mala", "--seeds", "2", "--draws", "150", "--tune", "50", "--chains", "2",
            "--quiet"]
    assert cli.main([*args, "--out", str(tmp_path / "here")]) == 0, capsys.readouterr().err
    assert cli.main([*args, "--jobs", "2", "--out", str(tmp_path / "workers")]) == 0, capsys.readouterr().err
    # the timings differ; the problems are the diagnostics' numbers as text, compared as numbers
    apart = ["seconds", "seconds_to_target", "problems"]
    here, workers = (load_leaderboard(tmp_path / name).table().drop(columns=apart) for name in ("here", "workers"))
    assert workers["status"].eq("ok").all() and workers["n_grad"].eq(2 * (150 + 50)).all()
    pd.testing.assert_frame_equal(workers, here)

