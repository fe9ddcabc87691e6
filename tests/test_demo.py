"""``python -m bayeszoo.demo``: its arguments, and problems run in processes of their own, one failing without
costing the others their summaries."""
import os

import pytest

from bayeszoo import demo


@pytest.mark.parametrize("argv, says", [(["rvm-snic"], "not demo problems: rvm-snic"),
                                        (["--jobs", "0"], "--jobs must be a positive integer; got 0")])
def test_bad_arguments_are_refused_before_anything_runs(argv, says, capsys):
    with pytest.raises(SystemExit) as stop:
        demo.main(argv)
    assert stop.value.code == 2
    assert says in capsys.readouterr().err


@pytest.mark.parametrize("cores, jobs", [(1, 1), (3, 3), (64, demo.MAX_JOBS)])
def test_default_jobs_is_the_usable_cores_capped(monkeypatch, cores, jobs):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    assert demo.default_jobs() == jobs


def test_a_problem_that_cannot_run_is_a_summary_that_says_why(tmp_path):
    result = demo.summary("rvm-sinc", str(tmp_path), sizes={"draws": -1})
    assert result["verdict"] is None
    assert "draws" in result["failed"]
    assert result["text"].splitlines()[1].startswith("!! rvm-sinc did not run: ValueError")


@pytest.mark.slow
def test_problems_run_in_worker_processes_and_report_in_the_order_asked(tmp_path, capsys):
    """Two workers, each spawned (a new interpreter); a bad count fails both problems before any sampling, so the
    run takes only the workers' start-up."""
    keys = ["slm-spikes", "rvm-sinc"]
    done = demo.run_all(keys, str(tmp_path), sizes={"draws": -1}, jobs=2)
    assert list(done) == keys
    assert all(result["failed"] and "draws" in result["failed"] for result in done.values())
    printed = capsys.readouterr().out
    assert all(f"!! {key} did not run" in printed for key in keys)
