"""Command line: ``bayeszoo list | fit | compare | report``.

    bayeszoo list
    bayeszoo fit rvm --data sinc --backend em --out runs/sinc-em --model-opt width=3
    bayeszoo compare rvm --data sinc --backends nuts,vb,em --reference nuts --out runs/sinc
    bayeszoo compare rvm --data sinc --backends nuts,gibbs --out runs/sinc --scheduler tcp://host:8786
    bayeszoo report runs/sinc

Bad input ends with a one-line message and exit status 2 (as argparse does), never a traceback.
"""
from __future__ import annotations

import argparse
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


def parse_backend_options(pairs) -> dict[str, dict]:
    """``em.max_iter=500`` -> ``{"em": {"max_iter": 500}}``."""
    out: dict[str, dict] = {}
    for key, value in parse_options(pairs, "--backend-opt").items():
        backend, dot, name = key.partition(".")
        if not dot or not backend or not name:
            raise CLIError(f"--backend-opt expects BACKEND.key=value (e.g. em.max_iter=500), got {key!r}")
        out.setdefault(backend, {})[name] = value
    return out


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Bayesian kernel model zoo: fit, compare, report.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="{list,fit,compare,report}")
    sub.required = True

    sub.add_parser("list", help="model families, their backends, and the datasets")

    def common(p):
        p.add_argument("family", help="model family, e.g. rvm")
        p.add_argument("--data", required=True, metavar="NAME", help="dataset name (see `bayeszoo list`)")
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

    p_fit = sub.add_parser("fit", help="fit one backend and save fit.nc")
    common(p_fit)
    p_fit.add_argument("--backend", required=True, metavar="B", help="backend name, e.g. em or nuts")
    p_fit.add_argument("--backend-opt", action="append", default=[], metavar="KEY=VALUE",
                       help="backend option, e.g. max_iter=500 (repeatable)")

    p_cmp = sub.add_parser("compare", help="run a grid of backends; save fits, table.csv and report.html")
    common(p_cmp)
    p_cmp.add_argument("--backends", required=True, metavar="A,B,C", help="comma-separated backend names")
    p_cmp.add_argument("--reference", default="auto", metavar="REF",
                       help="what the errors are measured against: a backend (in the grid, or run on its own), "
                            "'catalogue' or 'catalogue:KEY', the path of a saved fit or reference, or 'none'; "
                            "default 'auto': the catalogue's reference when the problem has one")
    p_cmp.add_argument("--reference-draws", type=_positive_int, default=None, metavar="N",
                       help="run the reference on its own for N draws (e.g. a long NUTS run)")
    p_cmp.add_argument("--backend-opt", action="append", default=[], metavar="BACKEND.KEY=VALUE",
                       help="per-backend option, e.g. em.max_iter=500 (repeatable)")
    p_cmp.add_argument("--scheduler", default=None, metavar="ADDRESS",
                       help="Dask scheduler (tcp://host:8786) or 'local' for a LocalCluster on this machine")

    p_rep = sub.add_parser("report", help="rebuild table.csv and report.html from a saved comparison")
    p_rep.add_argument("dir", metavar="DIR", help="folder written by `bayeszoo compare`")
    return parser


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


# ------------------------------------------------------------------------------------------ commands
def _model_and_data(args):
    import bayeszoo as bz
    from bayeszoo.models import FAMILIES, from_spec

    if args.family not in FAMILIES:
        raise CLIError(f"unknown model family {args.family!r}; available: {', '.join(sorted(FAMILIES))}")
    model_opts = parse_options(args.model_opt, "--model-opt")
    data_opts = parse_options(args.data_opt, "--data-opt")
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
        elif isinstance(default, str) and not isinstance(value, str):
            model_opts[key] = str(value)
    try:
        model = from_spec({"family": args.family, **model_opts})
    except (TypeError, ValueError) as exc:
        raise CLIError(f"bad --model-opt for {args.family}: {exc}") from None
    try:
        data = bz.datasets.load(args.data, **data_opts)
    except TypeError as exc:
        raise CLIError(f"bad --data-opt for {args.data}: {exc}") from None
    return model, data


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

    model, data = _model_and_data(args)
    options = parse_options(args.backend_opt, "--backend-opt")
    result = bz.fit(model, data, backend=args.backend, draws=args.draws, tune=args.tune, chains=args.chains,
                    seed=args.seed, progress=not args.quiet, **options)
    os.makedirs(args.out, exist_ok=True)
    path = result.save(os.path.join(args.out, "fit.nc"))
    parts = [f"{args.backend} ({result.kind}) on {data.name}: {result.n_chains} chain(s) x {result.n_draws} draws "
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


def _executor(address):
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
            client = Client(address, timeout="20s")
        except (OSError, TimeoutError, ValueError) as exc:
            raise CLIError(f"cannot reach the Dask scheduler at {address!r}: {exc}") from None
        close = client.close
    return client.get_executor(), close


def cmd_compare(args, out=None) -> int:
    out = out or sys.stdout
    import bayeszoo as bz

    model, data = _model_and_data(args)
    names = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not names:
        raise CLIError("--backends needs at least one backend name (comma-separated)")
    options = parse_backend_options(args.backend_opt)
    executor, close = _executor(args.scheduler)
    try:
        reference = None if args.reference == "none" else args.reference
        cmp = bz.compare(model, data, backends=names, reference=reference, draws=args.draws, tune=args.tune,
                         chains=args.chains, seed=args.seed, progress=not args.quiet, executor=executor,
                         out=args.out, options=options, reference_draws=args.reference_draws)
    finally:
        close()
    _print_table(cmp.table(), out)
    print(f"saved fits, table.csv and report.html in {args.out}", file=out)
    return 0


def cmd_report(args, out=None) -> int:
    out = out or sys.stdout
    from bayeszoo.comparison import load_comparison

    if not os.path.isdir(args.dir):
        raise CLIError(f"{args.dir!r} is not a folder")
    cmp = load_comparison(args.dir)
    table = cmp.table()
    table.to_csv(os.path.join(args.dir, "table.csv"), index=False)
    path = cmp.report(os.path.join(args.dir, "report.html"))
    _print_table(table, out)
    print(f"wrote {os.path.join(args.dir, 'table.csv')} and {path}", file=out)
    return 0


def _print_table(table, out):
    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_columns", None, "display.float_format", "{:.4g}".format):
        shown = table.copy()
        shown["error"] = shown["error"].astype(str).str.slice(0, 60)
        print(shown.to_string(index=False), file=out)


COMMANDS = {"list": cmd_list, "fit": cmd_fit, "compare": cmd_compare, "report": cmd_report}


def main(argv=None) -> int:
    """Entry point of the ``bayeszoo`` console script and ``python -m bayeszoo``."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except CLIError as exc:
        parser.exit(2, f"{PROG}: error: {exc}\n")
    except ValueError as exc:  # the library's input checks name the problem
        parser.exit(2, f"{PROG}: error: {exc}\n")
    except OSError as exc:
        parser.exit(1, f"{PROG}: error: {exc}\n")
    except KeyboardInterrupt:
        parser.exit(130, f"{PROG}: interrupted; fits saved so far are in place (run again to resume)\n")


if __name__ == "__main__":
    sys.exit(main())
