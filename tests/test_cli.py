"""The command line: list, fit, compare, report, and clear errors for bad input."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import bayeszoo as bz  # noqa: E402
from tests.helpers import fake_backends as fb
from bayeszoo.cli import main, parse_value  # noqa: E402

SMALL = ["--draws", "60", "--tune", "0", "--chains", "2", "--seed", "5", "--quiet", "--data-opt", "n=25",
         "--data-opt", "n_test=40", "--model-opt", "width=3"]


def test_parse_value():
    assert parse_value("3") == 3 and isinstance(parse_value("3"), int)
    assert parse_value("0.5") == 0.5 and parse_value("1e-3") == 1e-3
    assert parse_value("true") is True and parse_value("False") is False and parse_value("none") is None
    assert parse_value("gauss") == "gauss"


def test_list_names_backends_and_datasets(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in bz.backends(bz.models.RVM()):
        assert f"      {name} " in out
    assert "target_accept = 0.9: target mean acceptance probability" in out   # options with their meaning
    assert "fake_ok" in out and "[rvm]" in out
    for name in bz.datasets.names():
        assert f"  {name} " in out
    assert bz.datasets.describe("sinc") in out


def test_python_m_bayeszoo_list():
    res = subprocess.run([sys.executable, "-m", "bayeszoo", "list"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "rvm" in res.stdout and "sinc" in res.stdout and "ripley" in res.stdout
    for name in ("nuts", "numpyro", "advi"):
        assert name in res.stdout


def test_fit_writes_fit_nc(tmp_path, capsys):
    out = tmp_path / "fit"
    assert main(["fit", "rvm", "--data", "sinc", "--backend", "fake_ok", "--out", str(out), *SMALL]) == 0
    line = capsys.readouterr().out.strip()
    assert "\n" not in line and line.startswith("fake_ok (mcmc) on sinc: 2 chain(s) x 60 draws")
    assert line.endswith(str(out / "fit.nc"))
    fit = bz.load_fit(out / "fit.nc")
    assert fit.backend == "fake_ok" and fit.n_chains == 2 and fit.n_draws == 60
    assert fit.model_spec["width"] == 3.0
    # same seed through the CLI and the API: same draws
    data = bz.datasets.load("sinc", n=25, n_test=40)
    direct = bz.fit(bz.models.RVM(width=3.0), data, "fake_ok", draws=60, tune=0, chains=2, seed=5, progress=False)
    np.testing.assert_array_equal(fit.posterior["w"].values, direct.posterior["w"].values)


def test_compare_writes_fits_table_and_report(tmp_path, capsys):
    out = tmp_path / "cmp"
    argv = ["compare", "rvm", "--data", "sinc", "--backends", "fake_ok,fake_vb,fake_fail", "--reference", "fake_ok",
            "--out", str(out), *SMALL]
    assert main(argv) == 1   # fake_fail failed; the rest is saved
    captured = capsys.readouterr()
    printed = captured.out
    assert captured.err == "bayeszoo: 1 of 3 backends failed: fake_fail\n"
    assert "fake_vb" in printed and fb.FAIL_MESSAGE in printed and "ess_bulk" in printed
    # the table and the error lines fit a 100-column terminal (the folder's path may not)
    assert all(len(line) <= 100 for line in printed.splitlines() if "saved fits" not in line), printed
    assert sorted(os.listdir(out / "fits")) == ["fake_ok.nc", "fake_vb.nc"]
    for name in ("table.csv", "report.html", "comparison.json"):
        assert (out / name).exists()
    table = pd.read_csv(out / "table.csv")
    assert list(table["backend"]) == ["fake_ok", "fake_vb", "fake_fail"]
    assert np.isnan(table.loc[0, "mean_err"]) and table.loc[1, "mean_err"] > 0   # fake_ok is the reference
    assert table.loc[2, "error"] == f"RuntimeError: {fb.FAIL_MESSAGE}"


def _printed_verdict(printed: str) -> list[str]:
    """The verdict's sentences as the command line printed them: after the line "verdict:", each sentence
    starting a line, wrapped to the terminal's width with an indent."""
    lines = printed.splitlines()
    block = lines[lines.index("verdict:") + 1:]
    sentences = []
    for line in block:
        if line.startswith("  ") and not line.startswith("    "):
            sentences.append(line.strip())
        elif line.startswith("    ") and sentences:
            sentences[-1] += " " + line.strip()
        else:
            break
    return sentences


def test_compare_and_report_print_the_verdict_after_the_grid(tmp_path, capsys):
    out = tmp_path / "cmp"
    # fake_ok has one divergence (and, with these few draws, a high R-hat): without a reference the verdict
    # names it as not converged and ranks nothing
    argv = ["compare", "rvm", "--data", "sinc", "--backends", "fake_ok,fake_vb", "--reference", "none",
            "--out", str(out), *SMALL]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert printed.index("ess_bulk") < printed.index("verdict:")
    assert all(len(line) <= 100 for line in printed.splitlines() if "saved fits" not in line), printed
    expected = bz.load_comparison(out).verdict_lines()
    assert _printed_verdict(printed) == expected
    assert expected[0] == "There is no reference posterior, so nothing is measured for accuracy and nothing is ranked."
    assert expected[1].startswith("Not converged: fake_ok (") and "1 divergent transition" in expected[1]
    # `bayeszoo report` rebuilds the report and prints the same verdict
    assert main(["report", str(out), "--force"]) == 0
    assert _printed_verdict(capsys.readouterr().out) == expected


def test_compare_takes_the_ranking_targets(tmp_path, capsys):
    # a trusted reference: four chains of i.i.d. draws of the fake backends' posterior, saved to a file
    model, data = bz.models.RVM(width=3.0), bz.datasets.load("sinc", n=25, n_test=40)
    draws = fb._draws(model, data, 4, 1000, seed=11, rho=0.0)
    fit = bz.results.build_fit(model, data, "iid", "mcmc", draws, timing={"sample": 1.0})
    reference = bz.catalogue.Reference.from_fit(fit, ["w", "log_beta"], name="iid")
    assert reference.trusted, reference.problems
    path = reference.save(tmp_path / "reference.nc")
    out = tmp_path / "cmp"
    argv = ["compare", "rvm", "--data", "sinc", "--backends", "fake_ok,fake_vb", "--reference", str(path),
            "--targets", "5,50", "--out", str(out), *SMALL]
    assert main(argv) == 0
    verdict = _printed_verdict(capsys.readouterr().out)
    assert verdict[0].startswith("fake_vb is the fastest to the rough target (worth 5 exact draws")
    assert "the fastest to the precise target (worth 50 exact draws" in verdict[0]
    assert verdict[-1].startswith("Diagnostics fail, so ranked after every fit whose diagnostics pass: fake_ok (")
    assert json.loads((out / "comparison.json").read_text())["targets"] == [5, 50]


def test_backend_options_reach_the_backend(tmp_path):
    log = tmp_path / "calls.log"
    out = tmp_path / "cmp"
    argv = ["compare", "rvm", "--data", "sinc", "--backends", "fake_ok", "--out", str(out),
            "--backend-opt", f"fake_ok.log={log}", *SMALL]
    assert main(argv) == 0
    assert fb.calls(str(log)) == ["fake_ok"]


@pytest.mark.parametrize("argv, message", [
    ([], "required"),
    (["fit", "rvm", "--data", "sinc", "--out", "X"], "--backend"),
    (["fit", "nope", "--data", "sinc", "--backend", "em", "--out", "X"], "unknown model family 'nope'"),
    (["fit", "rvm", "--data", "nope", "--backend", "fake_ok", "--out", "X"], "unknown dataset 'nope'"),
    (["fit", "rvm", "--data", "sinc", "--backend", "nope", "--out", "X"], "unknown backend 'nope'"),
    (["fit", "rvm", "--data", "sinc", "--backend", "fake_ok", "--out", "X", "--draws", "0"], "must be >= 1"),
    (["fit", "rvm", "--data", "sinc", "--backend", "fake_ok", "--out", "X", "--chains", "two"], "expected an integer"),
    (["fit", "rvm", "--data", "sinc", "--backend", "fake_ok", "--out", "X", "--model-opt", "width"], "key=value"),
    (["fit", "rvm", "--data", "sinc", "--backend", "fake_ok", "--out", "X", "--model-opt", "width=wide"],
     "width must be a finite number > 0 or one of"),
    (["fit", "rvm", "--data", "sinc", "--backend", "fake_ok", "--out", "X", "--model-opt", "kernel=cubic"],
     "RVM: kernel must be one of"),
    (["fit", "rvm", "--data", "sinc", "--backend", "fake_ok", "--out", "X", "--model-opt", "colour=red"],
     "rvm has no option 'colour'"),
    (["fit", "rvm", "--data", "sinc", "--backend", "fake_ok", "--out", "X", "--data-opt", "size=3"],
     "does not take option(s) ['size']"),
    (["fit", "rvm", "--data", "ripley", "--backend", "fake_ok", "--out", "X"], "classification"),
    (["compare", "rvm", "--data", "sinc", "--backends", ",", "--out", "X"], "at least one backend"),
    (["compare", "rvm", "--data", "sinc", "--backends", "fake_ok", "--out", "X", "--backend-opt", "max_iter=3"],
     "no backend here declares option 'max_iter'"),
    (["compare", "rvm", "--data", "sinc", "--backends", "fake_ok", "--out", "X", "--backend-opt", "em.max_iter=3"],
     "names backend(s) em that are not run here"),
    (["fit", "rvm", "--data", "sinc", "--backend", "fake_ok", "--out", "X", "--backend-opt", ".x=3"],
     "BACKEND.key=value"),
    (["fit", "--data", "sinc", "--backend", "fake_ok", "--out", "X"], "give a model family"),
    (["fit", "rvm", "--backend", "fake_ok", "--out", "X"], "--data is needed"),
    (["fit", "rvm", "--data", "nothere.csv", "--backend", "fake_ok", "--out", "X"], "--target"),
    (["fit", "rvm", "--data", "nothere.csv", "--target", "y", "--backend", "fake_ok", "--out", "X"], "no file"),
    (["fit", "rvm", "--data", "sinc", "--target", "y", "--backend", "fake_ok", "--out", "X"], "CSV"),
    (["fit", "--model", "nothere.py", "--backend", "fake_ok", "--out", "X"], "FILE.py:FUNCTION"),
    (["fit", "--model", "nothere.py:make", "--backend", "fake_ok", "--out", "X"], "no file"),
    (["fit", "--model", "m.py:make", "--task", "regression", "--backend", "fake_ok", "--out", "X"],
     "--task applies to a CSV file"),
    (["fit", "rvm", "--data", "sinc", "--task", "regression", "--backend", "fake_ok", "--out", "X"],
     "--task applies to a CSV file given as --data; a named dataset has its own"),
    (["fit", "rvm", "--data", "mine.csv", "--target", "y", "--task", "ordinal", "--backend", "fake_ok", "--out", "X"],
     "invalid choice: 'ordinal'"),
    (["report", "/nonexistent/dir"], "is not a folder"),
    (["compare", "rvm", "--data", "sinc", "--backends", "fake_ok", "--out", "X", "--targets", "100,10"],
     "--targets: targets must put the rough target below the precise one"),
    (["compare", "rvm", "--data", "sinc", "--backends", "fake_ok", "--out", "X", "--targets", "10"],
     "--targets: give two numbers"),
    (["compare", "rvm", "--data", "sinc", "--backends", "fake_ok", "--out", "X", "--targets", "ten,100"],
     "--targets: give two numbers"),
])
def test_bad_arguments_exit_nonzero_with_message(argv, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code not in (0, None)
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    assert not (tmp_path / "X").exists()  # nothing written for bad input


def test_report_of_a_folder_that_is_not_a_comparison(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["report", str(tmp_path)])
    assert info.value.code == 2
    assert "holds no comparison.json" in capsys.readouterr().err


def test_a_csv_table_and_one_backend_option_form_for_fit_and_compare(tmp_path, monkeypatch, capsys):
    """--data FILE.csv --target COLUMN is the user's own table; --backend-opt takes BACKEND.key=value and key=value
    in both commands (an unprefixed option goes to every backend of the grid that declares it)."""
    import numpy as np
    import pandas as pd

    import bayeszoo as bz

    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "label": (X[:, 0] > 0).astype(int)}).to_csv("mine.csv", index=False)
    for form in ("ep.max_sweeps=2", "max_sweeps=2"):
        out = f"fit-{form.split('.')[0]}"
        assert main(["fit", "gpc", "--data", "mine.csv", "--target", "label", "--backend", "ep", "--out", out,
                     "--backend-opt", form, "--quiet"]) == 0
        fit = bz.load_fit(f"{out}/fit.nc")
        assert fit.info["settings"]["max_sweeps"] == 2
        assert list(fit.idata.constant_data["feature"].values) == ["a", "b"]
    capsys.readouterr()
    assert main(["compare", "gpc", "--data", "mine.csv", "--target", "label", "--backends", "ep,laplace",
                 "--out", "grid", "--backend-opt", "max_sweeps=2", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert all(len(line) <= 100 for line in printed.splitlines()), printed
    cmp = bz.load_comparison("grid")
    assert cmp.fits["ep"].info["settings"]["max_sweeps"] == 2
    assert "max_sweeps" not in cmp.fits["laplace"].info["settings"]


# ------------------------------------------------------------------------------------------ CSV tables
def _csv(path, labels, n_features=2, seed=0):
    """A small table: features a, b (standard normal) and the column ``label`` given."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(len(labels), n_features))
    table = pd.DataFrame(X, columns=["a", "b"][:n_features])
    table["label"] = labels
    table.to_csv(path, index=False)
    return table


def _exit(argv, capsys):
    """The exit status and stderr of ``main(argv)`` when it ends the program."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    return info.value.code, capsys.readouterr().err


def test_string_labels_become_classes_shown_in_the_output_and_the_report(tmp_path, monkeypatch, capsys):
    """The README's own-table command with a yes/no label column: the labels are sorted into classes 0, 1, the
    mapping is printed, kept with the fit and the saved comparison, and shown in the report."""
    monkeypatch.chdir(tmp_path)
    labels = np.where(np.arange(30) % 3 == 0, "yes", "no")
    _csv("mine.csv", labels, n_features=1)
    assert main(["fit", "gpc", "--data", "mine.csv", "--target", "label", "--backend", "laplace", "--out", "one",
                 "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "mine.csv: 30 rows x 1 feature(s); target 'label': classification" in printed
    assert "\n  classes 0 = no, 1 = yes\n" in printed
    assert "laplace (approximation) on mine.csv" in printed
    assert bz.load_fit("one/fit.nc").info["classes"] == {"0": "no", "1": "yes"}

    assert main(["compare", "gpc", "--data", "mine.csv", "--target", "label", "--backends", "laplace",
                 "--reference", "none", "--out", "grid", "--quiet"]) == 0
    assert "\n  classes 0 = no, 1 = yes\n" in capsys.readouterr().out
    cmp = bz.load_comparison("grid")
    np.testing.assert_array_equal(cmp.data.y, (labels == "yes").astype(float))
    assert cmp.data.task == "classification"
    saved = json.loads((tmp_path / "grid" / "comparison.json").read_text())
    assert saved["data_meta"]["classes"] == {"0": "no", "1": "yes"} and saved["data_meta"]["target"] == "label"
    report = (tmp_path / "grid" / "report.html").read_text()
    assert "<th>classes</th><td>0 = no, 1 = yes</td>" in report


def test_the_task_of_a_csv_target(tmp_path, monkeypatch, capsys):
    """Three string labels are a multiclass problem (which a binary classifier refuses, naming it); a few integer
    values are classes; --task overrides the guess, and regression on strings is refused."""
    monkeypatch.chdir(tmp_path)
    _csv("three.csv", ["red", "green", "blue"] * 8)
    code, err = _exit(["fit", "gpc", "--data", "three.csv", "--target", "label", "--backend", "laplace",
                       "--out", "X"], capsys)
    assert code == 2 and "multiclass" in err and "Traceback" not in err
    code, err = _exit(["fit", "gpc", "--data", "three.csv", "--target", "label", "--backend", "laplace",
                       "--out", "X", "--task", "regression"], capsys)
    assert code == 2 and "'label'" in err and "three.csv" in err and "strings" in err and "--task" in err
    assert not os.path.exists("X")

    _csv("ints.csv", [1, 2] * 12)   # integer labels 1 / 2: classes 0 / 1
    argv = ["fit", "rvm", "--data", "ints.csv", "--target", "label", "--backend", "fake_ok", "--quiet"]
    assert main([*argv, "--out", "guessed", "--model-opt", "task=classification"]) == 0
    assert "target 'label': classification (--task to change)\n  classes 0 = 1, 1 = 2\n" in capsys.readouterr().out
    assert main([*argv, "--out", "forced", "--task", "regression"]) == 0
    printed = capsys.readouterr().out
    assert "target 'label': regression" in printed and "classes" not in printed
    table = pd.read_csv("ints.csv")
    table["label"] = table["label"] + 0.5   # not integers: a regression target unless --task says otherwise
    table.to_csv("halves.csv", index=False)
    argv = ["fit", "rvm", "--data", "halves.csv", "--target", "label", "--backend", "fake_ok", "--quiet"]
    assert main([*argv, "--out", "reg"]) == 0
    assert "regression" in capsys.readouterr().out
    assert main([*argv, "--out", "cls", "--task", "classification", "--model-opt", "task=classification"]) == 0
    assert "classes 0 = 1.5, 1 = 2.5" in capsys.readouterr().out


def test_one_class_and_empty_tables_are_refused_before_fitting(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "calls.log"
    _csv("one.csv", ["yes"] * 20)
    pd.DataFrame(columns=["a", "b", "label"]).to_csv("empty.csv", index=False)
    for command in (["fit", "rvm", "--backend", "fake_ok", "--backend-opt", f"log={log}"],
                    ["compare", "rvm", "--backends", "fake_ok", "--backend-opt", f"log={log}"]):
        code, err = _exit([*command, "--data", "one.csv", "--target", "label", "--out", "X", "--model-opt",
                           "task=classification"], capsys)
        assert code == 2 and "Traceback" not in err
        assert "'label'" in err and "one.csv" in err and "one class ('yes')" in err and "at least two" in err
        code, err = _exit([*command, "--data", "empty.csv", "--target", "label", "--out", "X"], capsys)
        assert code == 2 and "empty.csv has no rows" in err and "Traceback" not in err
    assert not log.exists() and not os.path.exists("X")   # nothing fitted, nothing written


def test_missing_labels_are_named(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _csv("gaps.csv", ["yes", "no", None, "no"] * 5)
    code, err = _exit(["fit", "gpc", "--data", "gaps.csv", "--target", "label", "--backend", "laplace",
                       "--out", "X"], capsys)
    assert code == 2 and "'label'" in err and "5 empty cell(s)" in err and "line 4" in err


# ------------------------------------------------------------------------------------------ exit status
def test_compare_exits_nonzero_when_every_cell_fails(tmp_path, capsys):
    """A grid with nothing but failures is no success either (the partly failed grid: the test above); its table and
    report are still written."""
    every = tmp_path / "every"
    assert main(["compare", "rvm", "--data", "sinc", "--backends", "fake_fail", "--reference", "none",
                 "--out", str(every), *SMALL]) == 1
    captured = capsys.readouterr()
    assert "bayeszoo: 1 of 1 backends failed: fake_fail" in captured.err and fb.FAIL_MESSAGE in captured.out
    assert pd.read_csv(every / "table.csv")["error"].tolist() == [f"RuntimeError: {fb.FAIL_MESSAGE}"]
    assert (every / "report.html").exists() and not os.listdir(every / "fits")


# ------------------------------------------------------------------------------------------ --model
def test_model_file_imports_modules_beside_it(tmp_path, monkeypatch, capsys):
    """``--model FILE.py:FUNCTION`` imports as ``python FILE.py`` would: the file's folder first on sys.path (for a
    helper module next to it), and sys.path as it was afterwards."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "zoo_helpers_for_cli.py").write_text("WIDTH = 2.5\n")
    (folder / "mymodel.py").write_text(
        "import bayeszoo as bz\n"
        "from zoo_helpers_for_cli import WIDTH\n\n\n"
        "def make():\n"
        "    return bz.models.RVM(width=WIDTH)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "zoo_helpers_for_cli", raising=False)
    before = list(sys.path)
    assert main(["fit", "--model", "project/mymodel.py:make", "--data", "sinc", "--backend", "fake_ok",
                 "--out", "run", *SMALL[:-2]]) == 0
    assert sys.path == before
    assert bz.load_fit("run/fit.nc").model_spec["width"] == 2.5
    sys.modules.pop("zoo_helpers_for_cli", None)


def test_name_names_ones_own_model_and_nothing_else(tmp_path, monkeypatch, capsys):
    """``--name`` renames the model of ``--model`` (the report's title, the data's name) and leaves its posterior,
    its fingerprint, as it is: a saved reference matches it under either name."""
    from bayeszoo.cli import build_parser, model_and_data

    (tmp_path / "normal_model.py").write_text(
        "import numpy as np\nimport pymc as pm\n\n\n"
        "def make():\n"
        "    with pm.Model() as model:\n"
        "        mu = pm.Normal('mu', 0.0, 1.0)\n"
        "        pm.Normal('y', mu, 1.0, observed=np.array([0.3, -0.1, 0.8]))\n"
        "    return model\n")
    monkeypatch.chdir(tmp_path)
    parse = build_parser().parse_args
    command = ["compare", "--model", "normal_model.py:make", "--backends", "advi", "--out", "X"]
    plain, _ = model_and_data(parse(command))
    named, data = model_and_data(parse([*command, "--name", "normal mean"]))
    assert data is None and (plain.name, named.name) == ("pymc_model", "normal mean")
    assert named.dataset().name == "normal mean" and named.fingerprint == plain.fingerprint
    code, err = _exit(["fit", "rvm", "--data", "sinc", "--name", "mine", "--backend", "fake_ok", "--out", "X"], capsys)
    assert code == 2 and "--name names your own model (--model FILE.py:FUNCTION)" in err
