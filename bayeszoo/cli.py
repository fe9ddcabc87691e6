"""Command line: ``bayeszoo list | fit | compare | report``.

    bayeszoo list
    bayeszoo fit rvm --data sinc --backend em --out runs/sinc-em --model-opt width=3
    bayeszoo compare rvm --data sinc --backends nuts,vb,em --reference nuts --out runs/sinc
    bayeszoo compare rvm --data sinc --backends vb,em,fast --out runs/sinc-dask --scheduler tcp://host:8786
    bayeszoo report runs/sinc --force

Bad input ends with a one-line message and exit status 2 (as argparse does), never a traceback; ``compare`` exits
with 1 when a backend of the grid failed (everything that finished is saved). Nothing already
written is replaced without ``--force``: ``fit`` refuses an existing ``fit.nc``, ``compare`` a folder holding a
saved comparison or fits made with other settings, ``report`` an existing ``table.csv`` or ``report.html``.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys

PROG = "bayeszoo"


class CLIError(Exception):
    """An input problem reported as ``bayeszoo: error: ...`` with exit status 2."""


# ------------------------------------------------------------------------------------------- parsing
def parse_value(text: str):
    """``"3"`` -> 3, ``"0.5"`` / ``"1e-3"`` -> float, ``"true"`` / ``"no"`` -> bool, ``"none"`` -> None, else str."""
    low = text.strip().lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    if low in ("none", "null"):
        return None
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


def parse_options(pairs, what: str) -> dict:
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise CLIError(f"{what} expects key=value, got {pair!r}")
        out[key] = parse_value(value)
    return out


def parse_backend_options(pairs) -> dict[str | None, dict]:
    """``ep.max_sweeps=5`` -> ``{"ep": {"max_sweeps": 5}}``; ``max_sweeps=5`` (no backend) -> ``{None: {...}}``:
    the one form of ``--backend-opt`` that ``fit`` and ``compare`` both read."""
    out: dict[str | None, dict] = {}
    for key, value in parse_options(pairs, "--backend-opt").items():
        backend, dot, name = key.rpartition(".")
        if dot and (not backend or not name):
            raise CLIError(f"--backend-opt expects key=value or BACKEND.key=value (e.g. em.max_iter=500), got {key!r}")
        out.setdefault(backend or None, {})[name] = value
    return out


def options_for(parsed: dict, backends: list[str], model) -> dict[str, dict]:
    """Each backend's options from :func:`parse_backend_options`: a prefixed option goes to its backend (which must
    be run), an unprefixed one to every backend that declares it (at least one must)."""
    from bayeszoo import registry

    stray = sorted(set(parsed) - {None} - set(backends))
    if stray:
        raise CLIError(f"--backend-opt names backend(s) {', '.join(stray)} that are not run here "
                       f"(running: {', '.join(backends)})")
    out = {name: dict(parsed.get(name, {})) for name in backends}
    for key, value in parsed.get(None, {}).items():
        takers = [name for name in backends if key in registry.get(model, name).options]
        if not takers:
            raise CLIError(f"--backend-opt {key}: no backend here declares option {key!r} "
                           f"({', '.join(backends)}; see `bayeszoo list`)")
        for name in takers:
            out[name].setdefault(key, value)
    return {name: opts for name, opts in out.items() if opts}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Bayesian kernel model zoo: fit, compare, report.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="{list,fit,compare,report}")
    sub.required = True
    sub.add_parser("list", help="model families, their backends, and the datasets")
    _add_fit(sub)
    _add_compare(sub)
    _add_benchmark(sub)
    p_rep = sub.add_parser("report", help="rebuild table.csv and report.html from a saved comparison")
    p_rep.add_argument("dir", metavar="DIR", help="folder written by `bayeszoo compare`")
    _add_force(p_rep)
    return parser


def _add_force(p: argparse.ArgumentParser) -> None:
    """``--force``, for the commands that write into an output folder."""
    p.add_argument("--force", action="store_true", help="replace results already in the output folder")


def _add_problem(p: argparse.ArgumentParser) -> None:
    """The options ``fit`` and ``compare`` share: the model and data, the output folder, the counts and seed."""
    p.add_argument("family", nargs="?", help="model family, e.g. rvm (or --model for your own model)")
    p.add_argument("--model", default=None, metavar="FILE.py:FUNCTION",
                   help="your own model: a function in FILE.py returning a PyMC model with its observed data")
    p.add_argument("--name", default=None, metavar="NAME",
                   help="the name of your own model (--model): the report's title and the data's name; a "
                        "saved reference matches the model whatever its name")
    p.add_argument("--data", default=None, metavar="NAME|FILE.csv",
                   help="dataset name (see `bayeszoo list`) or a CSV file (with --target)")
    p.add_argument("--target", default=None, metavar="COLUMN",
                   help="the CSV column to predict; every other column is a feature")
    p.add_argument("--task", default=None, choices=CSV_TASKS,
                   help="what the CSV's --target column is; default: classes when it holds names (strings), "
                        f"booleans or at most {MAX_GUESSED_CLASSES} integer values, otherwise regression")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    p.add_argument("--draws", type=_positive_int, default=None, help="default: the backend's own")
    p.add_argument("--tune", type=_nonneg_int, default=None, help="default: the backend's own")
    p.add_argument("--chains", type=_positive_int, default=None, help="default: the backend's own")
    p.add_argument("--seed", type=_nonneg_int, default=0)
    p.add_argument("--model-opt", action="append", default=[], metavar="KEY=VALUE",
                   help="model option, e.g. width=3 or task=classification (repeatable)")
    p.add_argument("--data-opt", action="append", default=[], metavar="KEY=VALUE",
                   help="dataset option, e.g. n=50 or seed=1 (repeatable)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    _add_force(p)


def _add_fit(sub) -> None:
    """``bayeszoo fit``: one backend, saved as ``fit.nc``."""
    p_fit = sub.add_parser("fit", help="fit one backend and save fit.nc")
    _add_problem(p_fit)
    p_fit.add_argument("--backend", required=True, metavar="B", help="backend name, e.g. em or nuts")
    p_fit.add_argument("--backend-opt", action="append", default=[], metavar="[BACKEND.]KEY=VALUE",
                       help="backend option, e.g. max_iter=500 or em.max_iter=500 (repeatable)")


def _add_compare(sub) -> None:
    """``bayeszoo compare``: a grid of backends, saved with its table and report."""
    p_cmp = sub.add_parser("compare", help="run a grid of backends; save fits, table.csv and report.html")
    _add_problem(p_cmp)
    p_cmp.add_argument("--backends", required=True, metavar="A,B,C", help="comma-separated backend names")
    p_cmp.add_argument("--reference", default="auto", metavar="REF",
                       help="what the errors are measured against: a backend (in the grid, or run on its own), "
                            "'catalogue' or 'catalogue:KEY', the path of a saved fit or reference, or 'none'; "
                            "default 'auto': the catalogue's reference when the problem has one")
    p_cmp.add_argument("--reference-draws", type=_positive_int, default=None, metavar="N",
                       help="run the reference on its own for N draws (e.g. a long NUTS run)")
    p_cmp.add_argument("--backend-opt", action="append", default=[], metavar="[BACKEND.]KEY=VALUE",
                       help="backend option: em.max_iter=500 for one backend, max_iter=500 for every backend "
                            "that has it (repeatable)")
    p_cmp.add_argument("--targets", type=_targets, default=None, metavar="ROUGH,PRECISE",
                       help="the ranking's targets, in exact posterior draws an estimate is worth; default 10,100 "
                            "(about 0.3 and 0.1 reference sds off, over one component)")
    p_cmp.add_argument("--scheduler", default=None, metavar="ADDRESS",
                       help="Dask scheduler (tcp://host:8786) or 'local' for a LocalCluster on this machine")


def _add_benchmark(sub) -> None:
    """``bayeszoo benchmark``: samplers on a suite of reference posteriors (resumable)."""
    p_bench = sub.add_parser("benchmark", help="run samplers on a suite of reference posteriors; save the "
                                               "leaderboard (resumable)")
    p_bench.add_argument("--suite", default="posteriordb-quick", metavar="NAME",
                         help="posteriordb, posteriordb-quick, exact or thesis (default: posteriordb-quick)")
    p_bench.add_argument("--targets", default=None, metavar="A,B",
                         help="only these targets of the suite (their names, comma-separated)")
    p_bench.add_argument("--backends", required=True, metavar="A,B,FILE.py:FUNCTION",
                         help="backend names; FILE.py:FUNCTION registers the sampler FUNCTION(logdensity_fn) -> "
                              "(init, step) of that file under the name FUNCTION (set FUNCTION.gradients_per_step "
                              "in the file to rank it by gradients)")
    p_bench.add_argument("--seeds", type=_positive_int, default=1, help="seeds 0, 1, ... per task (default 1)")
    p_bench.add_argument("--draws", type=_positive_int, default=None, help="default: each backend's own")
    p_bench.add_argument("--tune", type=_nonneg_int, default=None, help="default: each backend's own")
    p_bench.add_argument("--chains", type=_positive_int, default=None, help="default: each backend's own")
    p_bench.add_argument("--target", type=float, default=None, metavar="N",
                         help="the accuracy costs are measured to: worth N exact draws (default 100)")
    p_bench.add_argument("--out", required=True, metavar="DIR", help="output folder (resumes what is there)")
    p_bench.add_argument("--scheduler", default=None, metavar="ADDRESS",
                         help="run the tasks on a Dask cluster (tcp://host:8786), or 'local' for a local one")
    p_bench.add_argument("--jobs", type=_positive_int, default=1, metavar="N",
                         help="tasks at a time, in N worker processes on this machine, each with cores / N threads "
                              "(default 1: one after another in this process); not with --scheduler")
    p_bench.add_argument("--quiet", action="store_true", help="no progress bar")


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("bayeszoo")
    except Exception:
        return "unknown"


def _positive_int(text):
    return _int_at_least(text, 1)


def _nonneg_int(text):
    return _int_at_least(text, 0)


def _int_at_least(text, minimum):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
    return value


def _targets(text):
    """``--targets ROUGH,PRECISE`` as ``bz.compare``'s ``targets``, checked by the library's own rule."""
    from bayeszoo.diagnostics.metrics import DEFAULT_TARGETS, checked_targets

    advice = f"e.g. --targets {DEFAULT_TARGETS[0]},{DEFAULT_TARGETS[1]} (the default)"
    try:
        pair = tuple(float(part) for part in text.split(","))
    except ValueError:
        pair = ()
    if len(pair) != 2:
        raise argparse.ArgumentTypeError(f"give two numbers of exact draws, ROUGH,PRECISE, got {text!r}: {advice}")
    try:
        return checked_targets(pair)
    except ValueError as exc:   # the library's message, with the command line's advice
        raise argparse.ArgumentTypeError(f"{str(exc).split('; got')[0]}; got {text!r}: {advice}") from None


# ------------------------------------------------------------------------------------------ commands
def model_and_data(args):
    if (args.family is None) == (args.model is None):
        raise CLIError("give a model family (e.g. rvm) or --model FILE.py:FUNCTION" +
                       (", not both" if args.model is not None else ""))
    if args.model is not None:
        if args.model_opt:
            raise CLIError("--model-opt sets a family's options; a --model function makes its own model")
        if args.data is None and (args.target or args.task):
            raise CLIError(f"--{'target' if args.target else 'task'} applies to a CSV file given as --data")
        return _user_model(args.model, args.name), (_data(args) if args.data is not None else None)
    if args.name is not None:
        raise CLIError("--name names your own model (--model FILE.py:FUNCTION); a family's model is named by its "
                       "family and options")
    if args.data is None:
        raise CLIError("--data is needed with a model family (a dataset name or a CSV file)")
    return _family_model(args), _data(args)


def _import_file(file: str, flag: str):
    """The module of ``file``, imported as ``python FILE.py`` would see it: its folder first on the path while it
    runs, so that modules beside it import."""
    import importlib.util

    if not file.endswith(".py"):
        raise CLIError(f"{flag} expects FILE.py:FUNCTION, got {file!r}")
    if not os.path.isfile(file):
        raise CLIError(f"{flag}: no file {file!r}")
    spec = importlib.util.spec_from_file_location(f"bayeszoo_user_{abs(hash(os.path.abspath(file)))}", file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # as an import does (dataclasses and pickling look the module up there)
    with _file_folder_first(file):
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            del sys.modules[spec.name]
            raise CLIError(f"{flag}: importing {file} failed: {type(exc).__name__}: {exc}") from None
    return module


@contextlib.contextmanager
def _file_folder_first(file: str):
    """The file's folder first on ``sys.path`` (also for what its functions import when called); the path as it
    was afterwards."""
    saved_path = list(sys.path)
    sys.path.insert(0, os.path.dirname(os.path.abspath(file)))
    try:
        yield
    finally:
        sys.path[:] = saved_path


def _user_model(where: str, name: str | None = None):
    """The model of ``FILE.py:FUNCTION``: the function's PyMC model (or bayeszoo model), with its data, named
    ``name`` when given."""
    import bayeszoo as bz

    file, colon, function = where.rpartition(":")
    if not colon or not file.endswith(".py") or not function.isidentifier():
        raise CLIError(f"--model expects FILE.py:FUNCTION, got {where!r}")
    module = _import_file(file, "--model")
    if not callable(getattr(module, function, None)):
        raise CLIError(f"--model: {file} has no function {function!r}")
    with _file_folder_first(file):
        made = getattr(module, function)()
    if name is not None and not name.strip():
        raise CLIError("--name must not be empty")
    if isinstance(made, bz.models.Model):
        if name is None:
            return made
        if not callable(getattr(made, "renamed", None)):
            raise CLIError(f"--name names a model of one's own; {function}() returned a {type(made).__name__}, "
                           f"named by its family and options: leave --name out")
        return made.renamed(name)
    try:
        import pymc as pm
    except ImportError:   # pragma: no cover - pymc is a dependency
        pm = None
    if pm is None or not isinstance(made, pm.Model):
        raise CLIError(f"--model: {function}() must return a PyMC model (pm.Model) or a bayeszoo model; got "
                       f"{type(made).__name__}")
    return bz.models.from_pymc(made, name=name)


def _data(args):
    """The named dataset, or the CSV file's table with ``--target`` as y."""
    import bayeszoo as bz

    data_opts = parse_options(args.data_opt, "--data-opt")
    if args.data.lower().endswith(".csv"):
        return _csv_data(args.data, args.target, data_opts, args.task)
    for flag in ("target", "task"):
        if getattr(args, flag) is not None:
            raise CLIError(f"--{flag} applies to a CSV file given as --data; a named dataset has its own")
    try:
        return bz.datasets.load(args.data, **data_opts)
    except TypeError as exc:
        raise CLIError(f"bad --data-opt for {args.data}: {exc}") from None


#: ``--task`` for a CSV file: "classification" is classes (binary or multiclass by their number), "multiclass" says
#: so even for two
CSV_TASKS = ("regression", "classification", "multiclass")
#: a numeric --target column is taken as classes when it holds at most this many integer values (and at least two
#: rows per value)
MAX_GUESSED_CLASSES = 10


def _csv_data(file: str, target: str | None, options: dict, task: str | None = None):
    """The table in ``file`` as a Dataset: ``target`` is y (class labels become 0 .. K-1, see ``_csv_task``), the
    other columns X. An empty table, a target with empty cells and a single class are refused here, naming the
    column and the fix."""
    import pandas as pd

    import bayeszoo as bz

    if target is None:
        raise CLIError(f"--data {file}: say which column to predict with --target COLUMN")
    if options:
        raise CLIError("--data-opt applies to the named datasets, not to a CSV file")
    if not os.path.isfile(file):
        raise CLIError(f"--data: no file {file!r}")
    try:
        table = pd.read_csv(file)
    except Exception as exc:
        raise CLIError(f"--data: cannot read {file} as CSV: {exc}") from None
    if target not in table.columns:
        raise CLIError(f"--target {target!r} is not a column of {file} (columns: {', '.join(map(str, table.columns))})")
    if table.empty:
        raise CLIError(f"--data {file} has no rows, only the header ({', '.join(map(str, table.columns))}); add rows "
                       f"of data below it")
    if table.shape[1] < 2:
        raise CLIError(f"--data {file} has no column but --target {target!r}; the other columns are the features")
    y = table[target]
    empty = y.index[y.isna()]
    if len(empty):
        raise CLIError(f"--target {target!r} of {file} has {len(empty)} empty cell(s) (the first on line "
                       f"{empty[0] + 2} of the file); drop those rows or fill them in")
    task = _csv_task(y, task, f"--target {target!r} of {file}")
    if task != "regression":
        y = y.astype("category")   # the Dataset numbers the classes (sorted) and records their names
        if y.nunique() < 2:
            numbers = pd.api.types.is_numeric_dtype(table[target]) and not pd.api.types.is_bool_dtype(table[target])
            raise CLIError(f"--target {target!r} of {file} holds one class ({str(y.iloc[0])!r}) only; classification "
                           f"needs rows of at least two classes" + (" (or --task regression)" if numbers else ""))
    meta = {"task": task, "target": target}
    return bz.datasets.Dataset(table.drop(columns=[target]), y, name=os.path.basename(file), meta=meta)


def _csv_task(y, task: str | None, what: str) -> str:
    """The task of a CSV target column: ``task`` when given (a regression target must hold numbers), otherwise
    classes for names, booleans and a few integer values, regression for other numbers; "classification" is two
    classes, "multiclass" more."""
    import pandas as pd

    numeric = pd.api.types.is_numeric_dtype(y) and not pd.api.types.is_bool_dtype(y)
    if task == "regression":
        if not numeric:
            raise CLIError(f"{what} holds {'booleans' if pd.api.types.is_bool_dtype(y) else 'strings'} (e.g. "
                           f"{str(y.iloc[0])!r}), not numbers; drop --task regression to take them as classes")
        return task
    if task is None:
        k = y.nunique()
        few_integers = k <= min(MAX_GUESSED_CLASSES, len(y) // 2) and bool((y == y.round()).all())
        if numeric and not few_integers:
            return "regression"
    return "multiclass" if task == "multiclass" or y.nunique() > 2 else "classification"


def _family_model(args):
    from bayeszoo.models import FAMILIES, from_spec

    if args.family not in FAMILIES:
        raise CLIError(f"unknown model family {args.family!r}; available: {', '.join(sorted(FAMILIES))}")
    model_opts = parse_options(args.model_opt, "--model-opt")
    fields = {f.name: f for f in dataclasses.fields(FAMILIES[args.family])}
    for key, value in model_opts.items():
        field = fields.get(key)
        if field is None:
            raise CLIError(f"{args.family} has no option {key!r}; options: {', '.join(fields)}")
        default = field.default
        if isinstance(default, (int, float)) and not isinstance(default, bool):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise CLIError(f"--model-opt {key} must be a number, got {value!r}")
            if isinstance(default, float):
                model_opts[key] = float(value)
        elif isinstance(default, bool) and not isinstance(value, bool):
            raise CLIError(f"--model-opt {key} must be true or false, got {value!r}")
        elif isinstance(default, str) and not isinstance(value, (str, int, float)):
            # a number stays a number: some string defaults also take one (RVM width="scale", ARVM sparsity="bic")
            model_opts[key] = str(value)
    try:
        return from_spec({"family": args.family, **model_opts})
    except (TypeError, ValueError) as exc:
        raise CLIError(f"bad --model-opt for {args.family}: {exc}") from None


def cmd_list(args, out=None) -> int:
    out = out or sys.stdout
    import bayeszoo as bz
    from bayeszoo import registry
    from bayeszoo.models import FAMILIES

    backends = registry.all_backends()

    def show(b, where):
        desc = f"  {b.description}" if b.description else ""
        print(f"      {b.name:<14} {b.kind:<13} [{where}]{desc}", file=out)
        for name, opt in b.options.items():
            print(f"          {name} = {opt.default!r}: {opt.meaning}", file=out)

    print("Generic backends (every family with a PyMC / NumPyro declaration):", file=out)
    for b in backends:
        if b.family is None:
            show(b, "generic")
    print("Model families and their own backends:", file=out)
    for fam, cls in sorted(FAMILIES.items()):
        doc = (cls.__doc__ or "").strip().split("\n")[0]
        print(f"  {fam:<8} {cls.__name__}: {doc}", file=out)
        for b in backends:
            if b.family == fam:
                show(b, fam)
    from bayeszoo import catalogue

    print("Catalogue problems (a trusted reference is what errors are measured against; docs/families/*.md):",
          file=out)
    have = set(catalogue.available())
    for key in catalogue.keys():
        prob = catalogue.problem(key)
        status = "reference" if key in have else "no reference"
        print(f"  {key:<28} {prob.family:<8} {status:<13} {'demo' if prob.demo else ''}", file=out)
    print("Datasets:", file=out)
    for name in bz.datasets.names():
        try:
            desc = bz.datasets.describe(name)
        except Exception:
            desc = ""
        print(f"  {name:<18} {desc}", file=out)
    return 0


def cmd_fit(args, out=None) -> int:
    out = out or sys.stdout
    import bayeszoo as bz
    from bayeszoo.diagnostics.metrics import sampling_diagnostics
    from bayeszoo.results import ResultExists

    path = os.path.join(args.out, "fit.nc")
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise CLIError(f"--out {args.out!r} is a file, not a folder")
    if os.path.exists(path) and not args.force:   # refused before the fit runs
        raise ResultExists(path, "already exists")
    model, data = model_and_data(args)
    options = options_for(parse_backend_options(args.backend_opt), [args.backend], model).get(args.backend, {})
    _print_csv_reading(args, data, out)
    result = bz.fit(model, data, backend=args.backend, draws=args.draws, tune=args.tune, chains=args.chains,
                    seed=args.seed, progress=not args.quiet, **options)
    if data is not None and data.meta.get("classes"):   # which label each number stands for, kept with the fit
        result.info["classes"] = {str(code): name for code, name in data.meta["classes"].items()}
    result.save(path, overwrite=args.force)   # also refuses a fit.nc that another run wrote meanwhile
    parts = [f"{args.backend} ({result.kind}) on {data.name if data is not None else args.model}: {result.n_chains} chain(s) x {result.n_draws} draws "
             f"in {result.seconds:.2f}s"]
    try:
        diag = sampling_diagnostics(result, list(model.var_dims(data)))
        parts.append(f"min bulk ESS {diag['ess_bulk_min']:.0f} ({diag['ess_bulk_per_s']:.3g}/s)")
        if result.kind == "mcmc" and diag["rhat_max"] == diag["rhat_max"]:
            parts.append(f"R-hat max {diag['rhat_max']:.3f}")
    except Exception:
        pass
    try:
        score = model.score(result, data)
        parts.append(", ".join(f"{k} {v:.4g}" for k, v in score.items() if isinstance(v, (int, float))))
    except Exception:
        pass
    print("; ".join(p for p in parts if p) + f" -> {path}", file=out)
    return 0


def _print_csv_reading(args, data, out) -> None:
    """How a CSV file was read: its size, the target's task and, for classes, which label became which number."""
    if data is None or not args.data.lower().endswith(".csv"):
        return
    from bayeszoo.datasets import classes_text

    print(f"{data.name}: {data.n} rows x {data.d} feature(s); target {args.target!r}: {data.task} (--task to change)",
          file=out)
    if data.task != "regression":
        classes = f"  classes {classes_text(data.meta)}"
        print(classes if len(classes) <= TERMINAL_WIDTH else classes[:TERMINAL_WIDTH - 1] + "…", file=out)


def _executor(address, timeout: str = "20s"):
    """(executor, closer) for ``--scheduler``: a Dask client's executor, or (None, no-op)."""
    if address is None:
        return None, lambda: None
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise CLIError("--scheduler needs dask.distributed: pip install 'bayeszoo[dask]'") from None
    if address == "local":
        cluster = LocalCluster(threads_per_worker=1, processes=True)
        client = Client(cluster)

        def close():
            client.close()
            cluster.close()
    else:
        try:
            client = Client(address, timeout=timeout)
        except (OSError, TimeoutError, ValueError) as exc:
            raise CLIError(f"cannot reach the Dask scheduler at {address!r}: {exc}") from None
        close = client.close
    return client.get_executor(), close


def cmd_compare(args, out=None) -> int:
    out = out or sys.stdout
    import bayeszoo as bz

    model, data = model_and_data(args)
    names = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not names:
        raise CLIError("--backends needs at least one backend name (comma-separated)")
    options = options_for(parse_backend_options(args.backend_opt), names, model)
    _print_csv_reading(args, data, out)
    executor, close = _executor(args.scheduler)
    try:
        reference = None if args.reference == "none" else args.reference
        cmp = bz.compare(model, data, backends=names, reference=reference, draws=args.draws, tune=args.tune,
                         chains=args.chains, seed=args.seed, progress=not args.quiet, executor=executor,
                         out=args.out, options=options, reference_draws=args.reference_draws,
                         overwrite=args.force, **({"targets": args.targets} if args.targets else {}))
    finally:
        close()
    table = cmp.table()
    _print_table(table, out)
    _print_verdict(cmp, out)
    print(f"saved fits, table.csv and report.html in {args.out}", file=out)
    failed = [backend for backend, error in zip(table["backend"], table["error"]) if error]
    if failed:   # what finished is saved; a script still learns that the grid is not whole
        print(f"{PROG}: {len(failed)} of {len(table)} backends failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def cmd_report(args, out=None) -> int:
    out = out or sys.stdout
    from bayeszoo.comparison import COMPARISON_FILE, folder_lock, load_comparison
    from bayeszoo.results import ResultExists, write_atomically

    if not os.path.isdir(args.dir):
        raise CLIError(f"{args.dir!r} is not a folder")
    if not os.path.isfile(os.path.join(args.dir, COMPARISON_FILE)):
        load_comparison(args.dir)   # its own message: the folder holds no saved comparison
    with folder_lock(args.dir):   # not while a grid is still writing there
        cmp = load_comparison(args.dir)
        written = [name for name in ("table.csv", "report.html") if os.path.exists(os.path.join(args.dir, name))]
        if written and not args.force:
            raise ResultExists(args.dir, f"already holds {' and '.join(written)}")
        table = cmp.table()
        csv = write_atomically(os.path.join(args.dir, "table.csv"), table.to_csv(index=False))
        path = cmp.report(os.path.join(args.dir, "report.html"))
    _print_table(table, out)
    _print_verdict(cmp, out)
    print(f"wrote {csv} and {path}", file=out)
    return 0


#: the columns the terminal shows (table.csv and the report have them all), in this order, when present, under
#: shorter headers
TERMINAL_COLUMNS = {"backend": "backend", "kind": "kind", "seconds": "seconds", "ess_bulk_min": "ess_bulk",
                    "rhat_max": "rhat", "divergences": "div", "mean_err": "mean_err", "sd_err": "sd_err",
                    "seconds_to_target": "s_rough", "seconds_to_precise": "s_precise", "elpd_loo": "elpd_loo"}
TERMINAL_WIDTH = 100


def _print_table(table, out):
    """The comparison's main columns in a 100-column terminal; a failed backend's error on a line of its own."""
    import pandas as pd

    shown = table[[c for c in TERMINAL_COLUMNS if c in table.columns]].rename(columns=TERMINAL_COLUMNS)
    if "kind" in shown:
        shown["kind"] = shown["kind"].replace({"approximation": "approx"})
    with pd.option_context("display.width", TERMINAL_WIDTH, "display.max_columns", None,
                           "display.float_format", "{:.4g}".format):
        print(shown.to_string(index=False, na_rep="-"), file=out)
    for _, row in table.iterrows():
        if isinstance(row.get("error"), str) and row["error"]:
            print(f"  {row['backend']} failed: {row['error'].splitlines()[0]}"[:TERMINAL_WIDTH], file=out)
    print("(ess_bulk: min bulk ESS; div: divergences; s_rough, s_precise: seconds to the rough and the precise\n"
          " target; every column: table.csv and the report)", file=out)


def _print_verdict(cmp, out):
    """The comparison's verdict under the table, one sentence a line, wrapped to the terminal's width."""
    import re
    import textwrap

    print("verdict:", file=out)
    for sentence in cmp.verdict_lines():
        glued = re.sub(r"(\d) (s\b)", "\\1\u00a0\\2", sentence)   # "0.32 s" stays on one line
        print(textwrap.fill(glued, TERMINAL_WIDTH, initial_indent="  ", subsequent_indent="    ",
                            break_on_hyphens=False).replace("\u00a0", " "), file=out)


def _sampler_file(where: str) -> str:
    """Register the sampler of ``FILE.py:FUNCTION`` (``FUNCTION(logdensity_fn, **options) -> (init, step)``) under
    the name FUNCTION, with the function's ``gradients_per_step`` attribute if it has one (``mala.gradients_per_step
    = 1`` in the file: ``register_sampler``'s argument); its module travels by value to the worker processes of
    ``--jobs`` and to Dask workers, which cannot import it (``bz.benchmark`` pickles the session's backends with
    cloudpickle), so they need not have the file."""
    import bayeszoo as bz

    file, _, function = where.rpartition(":")
    module = _import_file(file, "--backends")
    algorithm = getattr(module, function, None)
    if not callable(algorithm):
        raise CLIError(f"--backends: {file} has no function {function!r}")
    import cloudpickle

    cloudpickle.register_pickle_by_value(module)
    try:
        bz.register_sampler(function, algorithm, replace=True,
                            gradients_per_step=getattr(algorithm, "gradients_per_step", None))
    except ValueError as exc:
        raise CLIError(f"--backends {where}: {exc}") from None
    return function


def cmd_benchmark(args, out=None) -> int:
    out = out or sys.stdout
    import bayeszoo as bz
    from bayeszoo.benchmark import TARGET_DRAWS

    backends = []
    for item in (b.strip() for b in args.backends.split(",")):
        if item:
            backends.append(_sampler_file(item) if ".py:" in item else item)
    if not backends:
        raise CLIError("--backends needs at least one backend name (comma-separated)")
    suite = args.suite
    if args.targets:
        base = "posteriordb" if suite == "posteriordb-quick" else suite
        suite = [f"{base}/{name.strip()}" for name in args.targets.split(",") if name.strip()]
    if args.jobs > 1 and args.scheduler is not None:
        raise CLIError(f"give --jobs {args.jobs} (worker processes here) or --scheduler {args.scheduler} (a Dask "
                       f"cluster), not both")
    executor, close = _executor(args.scheduler, timeout="5s")
    try:
        board = bz.benchmark(suite, backends, seeds=args.seeds, draws=args.draws, tune=args.tune,
                             chains=args.chains, target=TARGET_DRAWS if args.target is None else args.target,
                             out=args.out, executor=executor, jobs=args.jobs, progress=not args.quiet)
    finally:
        close()
    import pandas as pd

    with pd.option_context("display.width", TERMINAL_WIDTH, "display.max_columns", None,
                           "display.float_format", "{:.3g}".format):
        print(board.summary().to_string(index=False), file=out)
    print(board.verdict(), file=out)
    failures = board.failures()
    for _, row in failures[failures["status"] == "failed"].iterrows():
        print(f"  {row['backend']} failed on {row['target']} seed {row['seed']}: "
              f"{str(row['message']).splitlines()[0]}"[:TERMINAL_WIDTH], file=out)
    for backend, skipped in failures[failures["status"] == "skipped"].groupby("backend", sort=False):
        # one line a backend: a family's backend skips every posteriordb target for the same reason
        print(f"  {backend} skipped on {skipped['target'].nunique()} target(s), e.g. "
              f"{skipped['message'].iloc[0]}"[:TERMINAL_WIDTH], file=out)
    print(f"report: {os.path.join(args.out, 'report.html')}", file=out)
    failed = failures[failures["status"] == "failed"]
    if len(failed):
        print(f"{PROG}: {len(failed)} of {len(board.rows)} tasks failed", file=sys.stderr)
        return 1
    return 0


COMMANDS = {"list": cmd_list, "fit": cmd_fit, "compare": cmd_compare, "report": cmd_report,
            "benchmark": cmd_benchmark}


def main(argv=None) -> int:
    """Entry point of the ``bayeszoo`` console script and ``python -m bayeszoo``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from bayeszoo.results import ResultExists

    try:
        return COMMANDS[args.command](args)
    except CLIError as exc:
        parser.exit(2, f"{PROG}: error: {exc}\n")
    except ResultExists as exc:   # the library's own advice names overwrite=True; here it is --force
        parser.exit(2, f"{PROG}: error: {exc.path} {exc.what}; pass --force to replace it\n")
    except ValueError as exc:  # the library's input checks name the problem
        parser.exit(2, f"{PROG}: error: {exc}\n")
    except OSError as exc:
        parser.exit(1, f"{PROG}: error: {exc}\n")
    except KeyboardInterrupt:
        parser.exit(130, f"{PROG}: interrupted; fits saved so far are in place (run again to resume)\n")


if __name__ == "__main__":
    sys.exit(main())
