"""The :class:`Fit` type: one backend's answer for one model on one dataset."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import arviz as az

KINDS = ("mcmc", "approximation")
_ATTR = "bayeszoo_fit"  # JSON blob stored in idata.posterior.attrs so a saved fit is self-describing


@dataclass
class Fit:
    """Result of :func:`bayeszoo.fit`.

    Attributes
    ----------
    idata : arviz.InferenceData
        ``posterior`` (``chain`` x ``draw`` x the model's canonical variables), ``sample_stats``,
        ``observed_data``, ``constant_data`` and, for optimisation-based methods, an ``objective``
        group holding the trace of the ELBO or log evidence over iterations.
    backend : str
        Registered backend name that produced it.
    kind : {"mcmc", "approximation"}
        Draws of an approximation are i.i.d. from the approximating distribution and are not judged by R-hat.
    timing : dict
        Seconds spent in ``compile``, ``tune`` and ``sample``, and ``total``.
    model_spec : dict
        ``model.spec()``: enough to rebuild the model with :func:`bayeszoo.models.from_spec`.
    info : dict
        Backend-specific counts and flags: gradient evaluations, iterations, ``converged``, ``warnings``.
    """

    idata: az.InferenceData
    backend: str
    kind: str
    timing: dict = field(default_factory=dict)
    model_spec: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"Fit.kind must be one of {KINDS}, got {self.kind!r}")
        for key in ("compile", "tune", "sample"):
            self.timing.setdefault(key, 0.0)
        self.timing.setdefault("total", self.timing["compile"] + self.timing["tune"] + self.timing["sample"])

    @property
    def posterior(self):
        return self.idata.posterior

    @property
    def seconds(self) -> float:
        return float(self.timing["total"])

    @property
    def n_chains(self) -> int:
        return int(self.idata.posterior.sizes["chain"])

    @property
    def n_draws(self) -> int:
        return int(self.idata.posterior.sizes["draw"])

    def model(self):
        """Rebuild the model object that produced this fit."""
        from bayeszoo.models import from_spec

        return from_spec(self.model_spec)

    def save(self, path: str | os.PathLike) -> str:
        """Write the fit to one NetCDF file (``.nc``); read it back with :func:`bayeszoo.load_fit`."""
        path = os.fspath(path)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        meta = {"backend": self.backend, "kind": self.kind, "timing": self.timing,
                "model_spec": self.model_spec, "info": _jsonable(self.info)}
        self.idata.posterior.attrs[_ATTR] = json.dumps(meta)
        tmp = path + ".part"
        self.idata.to_netcdf(tmp, engine="h5netcdf")
        os.replace(tmp, path)  # atomic: an interrupted save never leaves a half-written fit behind
        return path

    def __repr__(self) -> str:
        shapes = {k: tuple(v.shape[2:]) for k, v in self.idata.posterior.data_vars.items()}
        return (f"Fit(backend={self.backend!r}, kind={self.kind!r}, chains={self.n_chains}, "
                f"draws={self.n_draws}, seconds={self.seconds:.2f}, vars={shapes})")


def load_fit(path: str | os.PathLike) -> Fit:
    """Read a fit written by :meth:`Fit.save`."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ValueError(f"no saved fit at {path!r}")
    idata = az.from_netcdf(path, engine="h5netcdf")
    idata.load()  # detach from the file so it can be overwritten later
    try:
        meta = json.loads(idata.posterior.attrs[_ATTR])
    except KeyError as exc:
        raise ValueError(f"{path!r} is an InferenceData file but not a bayeszoo fit") from exc
    return Fit(idata=idata, backend=meta["backend"], kind=meta["kind"], timing=meta["timing"],
               model_spec=meta["model_spec"], info=meta.get("info", {}))


def _jsonable(obj: Any):
    """Best-effort conversion of numpy scalars / arrays in ``info`` to JSON types."""
    import numpy as np

    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj
