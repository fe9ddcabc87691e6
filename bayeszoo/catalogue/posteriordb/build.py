"""Copy posteriordb's data and reference draws into the package (run by hand, never at import).

    python -m bayeszoo.catalogue.posteriordb.build [PATH_TO_POSTERIORDB_GIT] [--only NAME ...]

reads a clone of posteriordb's public repository (BSD-3-Clause; a bare clone does: files are read with
``git show``) and writes into ``bayeszoo/catalogue/posteriordb/data/``:

* ``<data name>.json.gz``: posteriordb's data JSON, gzipped, one file per data set (posteriors share them);
* ``<posterior>.reference.nc``: posteriordb's reference draws (10 chains of 1000 thinned draws from long Stan
  runs) as a :class:`~bayeszoo.catalogue.reference.Reference`: moments with their MCSE, at most 1000 draws;
* ``stan/<model>.stan``: the Stan program each posterior was written from;
* ``index.json``: per posterior its model, data, keywords, dimensions, the reference run's settings and checks,
  and the data set's description, sources and references;
* ``PROVENANCE.md``: the commit, the licence and each data set's sources.
"""
from __future__ import annotations

import argparse
import datetime
import gzip
import io
import json
import os
import re
import subprocess
import zipfile

import arviz as az
import numpy as np
import xarray as xr

from bayeszoo.catalogue.posteriordb import _listed
from bayeszoo.catalogue.reference import Reference, run_diagnostics
from bayeszoo.results import Fit

HERE = os.path.dirname(os.path.abspath(__file__))
DATA_DIR = os.path.join(HERE, "data")
DB = "posterior_database"
_INDEX = re.compile(r"^(?P<name>[^\[]+)(?:\[(?P<index>[\d,\s]+)\])?$")


class Repo:
    def __init__(self, path: str):
        self.path = path
        self.commit = self.git("rev-parse", "HEAD").decode().strip()

    def git(self, *args) -> bytes:
        return subprocess.run(["git", "-C", self.path, *args], check=True, capture_output=True).stdout

    def read(self, path: str) -> bytes:
        return self.git("show", f"{self.commit}:{path}")

    def json(self, path: str):
        return json.loads(self.read(path))

    def zipped_json(self, path: str):
        with zipfile.ZipFile(io.BytesIO(self.read(path))) as archive:
            (member,) = archive.namelist()
            return json.loads(archive.read(member))

    def ls(self, folder: str) -> list[str]:
        return self.git("ls-tree", "--name-only", f"{self.commit}:{folder}").decode().split()


def reference_posteriors(repo: Repo) -> list[str]:
    return sorted(n.removesuffix(".json.zip") for n in repo.ls(f"{DB}/reference_posteriors/draws/draws"))


def draws_to_arrays(chains: list[dict]) -> dict[str, np.ndarray]:
    """posteriordb's draws (a list of chains, each {"theta[1]": [...], ...}) as {"theta": (chain, draw, *shape)}."""
    columns: dict[str, list[tuple[tuple[int, ...], str]]] = {}
    for column in chains[0]:
        match = _INDEX.match(column)
        if match is None:
            raise ValueError(f"unexpected parameter name {column!r} in posteriordb's draws")
        index = tuple(int(i) - 1 for i in match["index"].split(",")) if match["index"] else ()
        columns.setdefault(match["name"], []).append((index, column))
    n_chain, n_draw = len(chains), len(chains[0][next(iter(chains[0]))])
    out = {}
    for name, entries in columns.items():
        shape = tuple(max(idx[k] for idx, _ in entries) + 1 for k in range(len(entries[0][0])))
        if len(entries) != int(np.prod(shape)):
            raise ValueError(f"{name}: {len(entries)} columns do not fill the shape {shape}")
        values = np.empty((n_chain, n_draw, *shape))
        for index, column in entries:
            for c, chain in enumerate(chains):
                values[(c, slice(None), *index)] = chain[column]
        out[name] = values
    return out


def reference_of(repo: Repo, posterior: str, data: dict) -> Reference:
    chains = repo.zipped_json(f"{DB}/reference_posteriors/draws/draws/{posterior}.json.zip")
    run = repo.json(f"{DB}/reference_posteriors/draws/info/{posterior}.info.json")
    arrays = draws_to_arrays(chains)
    # a saved fit has a constant_data group: the data's sizes here (the values are in the data file)
    sizes = {key: np.asarray(value) if np.isscalar(value) else np.asarray(np.size(value))
             for key, value in data.items()}
    idata = az.InferenceData(posterior=az.from_dict(posterior=arrays).posterior, constant_data=xr.Dataset(sizes))
    diagnostics = run.get("diagnostics", {})
    divergences = int(np.sum(diagnostics.get("divergent_transitions") or [0]))
    fit = Fit(idata=idata, backend="stan", kind="mcmc",
              info={"divergences": divergences, "seed": run["inference"]["method_arguments"].get("seed"),
                    "settings": run["inference"]})
    provenance = {"source": "posteriordb", "model": None, "data": None, "posteriordb_commit": repo.commit,
                  "posterior": posterior, "checks_made": run.get("checks_made"),
                  "versions": run.get("versions", {}).get("rstan_version"), "added_by": run.get("added_by"),
                  "added_date": run.get("added_date"),
                  "date": datetime.datetime.now(datetime.timezone.utc).isoformat()}
    return Reference.from_fit(fit, list(arrays), name=f"posteriordb: {posterior}",
                              labels=("stan (posteriordb)",), provenance=provenance)


SUMMARY = f"{DB}/reference_posteriors/summary_statistics"


def reference_from_summaries(repo: Repo, posterior: str) -> Reference:
    """The reference of a posterior whose draws file is not in the clone, from what posteriordb publishes besides
    the draws: its mean and mean square of every component (summary statistics of the same 10 x 1000 draws) and
    the run's per-component R-hat and bulk / tail ESS (the draws' info file). No draws, so no quantiles."""
    means = repo.json(f"{SUMMARY}/mean_value/mean_value/{posterior}.json")
    squares = repo.json(f"{SUMMARY}/mean_squared_value/mean_squared_value/{posterior}.json")
    run = repo.json(f"{DB}/reference_posteriors/draws/info/{posterior}.info.json")
    diagnostics = run["diagnostics"]
    columns = diagnostics["diagnostic_information"]["names"]
    if set(means["names"]) != set(columns) or set(squares["names"]) != set(columns):
        raise ValueError(f"{posterior}: posteriordb's summary statistics and draws info name other components")
    # each file lists the components in its own order: taken by name, in the info file's
    mean = np.asarray([dict(zip(means["names"], means["mean_value"]))[c] for c in columns], float)
    square = np.asarray([dict(zip(squares["names"], squares["mean_squared_value"]))[c] for c in columns], float)
    sd = np.sqrt(square - mean ** 2)
    ess_bulk = np.asarray(diagnostics["effective_sample_size_bulk"], float)
    ess_tail = np.asarray(diagnostics["effective_sample_size_tail"], float)
    nan = np.full_like(mean, np.nan)
    flat = {"mean": mean, "sd": sd, "mcse_mean": sd / np.sqrt(ess_bulk),
            # normal-theory MCSE of the sd (the others' delta method with var((x-mu)^2) = 2 sd^4), ESS min(bulk, tail)
            "mcse_sd": sd / np.sqrt(2 * np.minimum(ess_bulk, ess_tail)),
            "rhat": np.asarray(diagnostics["r_hat"], float), "ess_bulk": ess_bulk, "ess_tail": ess_tail,
            **{key: nan for key in ("q05", "q50", "q95", "mcse_q05", "mcse_q50", "mcse_q95")}}
    # each column's position, laid out by draws_to_arrays as the draws would be: the variables' shapes, Stan's order
    arrays = draws_to_arrays([{column: [float(position)] for position, column in enumerate(columns)}])
    moments = {name: {stat: values[np.asarray(index[0, 0], int)] for stat, values in flat.items()}
               for name, index in arrays.items()}
    method = run["inference"]["method_arguments"]
    divergences = int(np.sum(diagnostics.get("divergent_transitions") or [0]))
    record = {"engine": "stan (posteriordb)", "kind": "mcmc", "chains": int(method["chains"]),
              "draws": int(diagnostics["ndraws"]) // int(diagnostics["nchains"]), "divergences": divergences,
              "seed": method.get("seed"), "settings": run["inference"], "seconds": None}
    provenance = {"source": "posteriordb", "model": None, "data": None, "posteriordb_commit": repo.commit,
                  "posterior": posterior, "run": record, "diagnostics": run_diagnostics(moments),
                  "cross_checked": False, "checks_made": run.get("checks_made"),
                  "versions": run.get("versions", {}).get("rstan_version"), "added_by": run.get("added_by"),
                  "added_date": run.get("added_date"),
                  "moments_from": [f"{SUMMARY}/mean_value/mean_value/{posterior}.json",
                                   f"{SUMMARY}/mean_squared_value/mean_squared_value/{posterior}.json",
                                   f"{DB}/reference_posteriors/draws/info/{posterior}.info.json"],
                  "moments_note": "posteriordb's draws file was not in the clone read: mean and sd from its mean and "
                                  "mean-square summary statistics, MCSE of the mean sd / sqrt(bulk ESS), of the sd "
                                  "sd / sqrt(2 min(bulk, tail ESS)) (normal theory); R-hat and ESS from the draws' "
                                  "info file; no quantiles, no draws",
                  "date": datetime.datetime.now(datetime.timezone.utc).isoformat()}
    return Reference(name=f"posteriordb: {posterior}", moments=moments, fit=None, provenance=provenance)


def reference_or_summary(repo: Repo, posterior: str, data: dict) -> tuple[Reference | None, str | None]:
    """(the reference, None) from posteriordb's draws; where the clone lacks the draws file (a partial clone may
    lack the largest), (the reference of its summary statistics, moments only, why); without those either,
    (None, why)."""
    try:
        return reference_of(repo, posterior, data), None
    except subprocess.CalledProcessError as exc:
        missing = exc.stderr.decode().strip()
    try:
        return reference_from_summaries(repo, posterior), missing
    except subprocess.CalledProcessError:
        return None, missing


def build(repo: Repo, only: list[str] | None = None) -> dict:
    os.makedirs(os.path.join(DATA_DIR, "stan"), exist_ok=True)
    index_path = os.path.join(DATA_DIR, "index.json")
    index = json.load(open(index_path)) if os.path.exists(index_path) else {}
    for posterior in only or reference_posteriors(repo):
        meta = repo.json(f"{DB}/posteriors/{posterior}.json")
        model, data_name = meta["model_name"], meta["data_name"]
        data_info = repo.json(f"{DB}/data/info/{data_name}.info.json")
        data = repo.zipped_json(f"{DB}/data/data/{data_name}.json.zip")
        with gzip.open(os.path.join(DATA_DIR, f"{data_name}.json.gz"), "wt", compresslevel=9) as fh:
            json.dump(data, fh)
        stan = repo.read(f"{DB}/models/stan/{model}.stan")
        with open(os.path.join(DATA_DIR, "stan", f"{model}.stan"), "wb") as fh:
            fh.write(stan)
        ref, missing = reference_or_summary(repo, posterior, data)
        if ref is not None:
            ref.save(os.path.join(DATA_DIR, f"{posterior}.reference.nc"))
            dims = {name: list(np.shape(m["mean"])) for name, m in ref.moments.items()}
        else:   # posteriordb's own count of each variable's components
            dims = {name: [] if size == 1 else [size] for name, size in meta.get("dimensions", {}).items()}
        index[posterior] = {
            "model": model, "data": data_name, "keywords": meta.get("keywords", []),
            "dimensions": meta.get("dimensions", {}), "reference_variables": dims,
            "reference_run": repo.json(f"{DB}/reference_posteriors/draws/info/{posterior}.info.json")["inference"],
            "reference_problems": ref.problems if ref is not None else None,
            "reference_draws": ref is not None and ref.fit is not None,
            "reference_missing": None if ref is not None else f"the draws were not in the clone read ({missing})",
            "data_info": {k: data_info.get(k) for k in ("title", "description", "urls", "references", "keywords",
                                                        "added_by", "added_date")},
            "added_by": meta.get("added_by"), "added_date": meta.get("added_date")}
        verdict = ("NO REFERENCE: " + index[posterior]["reference_missing"] if ref is None
                   else "; ".join(ref.problems) or "passes the rules")
        print(f"{posterior}: {sum(int(np.prod(d)) for d in dims.values())} reference components; {verdict}",
              flush=True)
    index = dict(sorted(index.items()))
    with open(index_path, "w") as fh:
        json.dump({"posteriordb_commit": repo.commit, **{k: v for k, v in index.items() if k != "posteriordb_commit"}},
                  fh, indent=1)
    write_provenance(repo, {k: v for k, v in index.items() if k != "posteriordb_commit"})
    return index


def write_provenance(repo: Repo, index: dict) -> None:
    date = repo.git("log", "-1", "--format=%cs", repo.commit).decode().strip()
    summarised = [p for p, entry in index.items() if not entry.get("reference_draws", True)
                  and not entry.get("reference_missing")]
    lines = ["# posteriordb in bayeszoo: provenance", "",
             f"Every file in this folder is copied or derived from posteriordb "
             f"(<https://github.com/stan-dev/posteriordb>), commit `{repo.commit}` ({date}), by "
             "`python -m bayeszoo.catalogue.posteriordb.build`.", "",
             "* `<data>.json.gz`: `posterior_database/data/data/<data>.json.zip`, the same JSON, gzipped;",
             "* `stan/<model>.stan`: `posterior_database/models/stan/<model>.stan`, unchanged;",
             "* `<posterior>.reference.nc`: the moments (mean, sd, quantiles, their MCSE, R-hat, ESS) of "
             "`posterior_database/reference_posteriors/draws/draws/<posterior>.json.zip` (10 chains x 1000 draws "
             "kept from 10,000 each), and at most 1000 of those draws, thinned, in single precision;",
             *([f"* for {', '.join(f'`{p}`' for p in summarised)}, whose draws file was not in the clone read, "
                "`<posterior>.reference.nc` holds moments only: mean and sd from "
                "`posterior_database/reference_posteriors/summary_statistics/{mean_value,mean_squared_value}/...`, "
                "R-hat, bulk and tail ESS from `posterior_database/reference_posteriors/draws/info/<posterior>"
                ".info.json`, the MCSEs from those (no quantiles, no draws);"] if summarised else []),
             "* `index.json`: the posteriors' and data sets' info files, abridged.", "",
             "## Licence", "",
             "posteriordb is distributed under the BSD 3-Clause License:", "", "```",
             repo.read("LICENCE.md").decode().strip(), "```", "",
             "The data sets come from the sources listed below (posteriordb's data info files); see each source "
             "for its terms.", "", "## Data sets", ""]
    seen = {}
    for posterior, entry in index.items():
        seen.setdefault(entry["data"], (entry["data_info"], []))[1].append(posterior)
    for data_name, (info, posteriors) in sorted(seen.items()):
        lines.append(f"### {data_name}")
        lines.append("")
        lines.append(f"{info.get('title') or ''}".strip() or "(no title)")
        lines.append("")
        if info.get("description"):
            lines.append(" ".join(str(info["description"]).split()))
            lines.append("")
        urls, references = _listed(info.get("urls")), _listed(info.get("references"))
        if urls:
            lines.append("Sources: " + ", ".join(f"<{u}>" if str(u).startswith("http") else str(u) for u in urls))
        if references:
            lines.append("References (posteriordb's bibliography keys): " + ", ".join(references))
        lines.append(f"Posteriors: {', '.join(posteriors)}")
        lines.append("")
    with open(os.path.join(DATA_DIR, "PROVENANCE.md"), "w") as fh:
        fh.write("\n".join(lines))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("repo", help="a clone of posteriordb (bare is fine): git clone --bare https://github.com/stan-dev/posteriordb")
    parser.add_argument("--only", nargs="*", help="these posteriors only")
    args = parser.parse_args(argv)
    build(Repo(args.repo), args.only)


if __name__ == "__main__":
    main()
