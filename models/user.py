"""Models of one's own: a PyMC model or a NumPyro model function, with its observed data, as a bayeszoo model.

    model = bz.models.from_pymc(pm_model)                  # a pm.Model holding its observed variables
    model = bz.models.from_numpyro(fn, *args, **kwargs)    # fn(*args, **kwargs) with its obs=... sites
    fit = bz.fit(model, backend="nuts")                    # no Dataset: the model carries its observations
    cmp = bz.compare(model, backends=["nuts", "numpyro", "advi"], reference="nuts")

What the families declare by hand is read off the model here:

* canonical posterior variables: the model's free (unobserved, random) variables in their constrained space.
  PyMC: ``model.free_RVs`` with their dims and coords (``dims=`` / ``coords=``; a variable without dims gets
  ``<name>_dim_<k>``, ArviZ's names). NumPyro: the latent sample sites with their shapes; an axis that a
  ``numpyro.plate`` spans is named after the plate, any other ``<site>_dim_<k>``, with integer coords.
  Deterministics are not canonical (the backends drop them): every backend writes the free variables only.
* the dataset it stands for (:meth:`UserModel.dataset`): no inputs (X has zero columns), y the observed values of
  every observed variable, flattened and concatenated in the model's order, named after the model.
* a fingerprint of the model's structure and data (:meth:`UserModel.spec`), the same in every process: a changed
  prior, variable, transform, observed value or data container is another problem, so a resumed grid refits, the
  catalogue does not match it, no compiled kernel is shared, and a Dask worker rebuilds the same model. A NumPyro
  model's is its traced log density (the jaxpr of NumPyro's potential energy with its literals and constants), so
  whatever the function reads (arguments, a ``functools.partial``, closures, module values) is in it; a model
  whose log density cannot be traced gets one that matches no other wrapping (a warning says so).
* the pointwise log-likelihood of every observed value at every draw (ArviZ's ``log_likelihood`` group, ``y``
  over ``obs`` as ``observed_data``, which ``az.loo`` reads): PyMC's ``pm.compute_log_likelihood`` or
  ``numpyro.infer.log_likelihood``, whatever backend made the draws. A multivariate observed variable (an
  MvNormal, a NumPyro ``to_event``) has one term per event, not per value: then ``y`` is over ``event``.

A PyMC model runs on every generic backend: PyMC's own (``nuts``, ``advi``, ``fullrank_advi``), ``nutpie``, and
through PyMC's JAX export (``pymc.sampling.jax.get_jaxified_graph``) on NumPyro NUTS and the BlackJAX engines: its
log density on the unconstrained space becomes a NumPyro model whose sites are PyMC's value variables (improper
flat sites plus one factor), and whose deterministic sites map a draw back to the free variables. A NumPyro model
runs on ``numpyro`` and the BlackJAX engines; the PyMC backends refuse it. Discrete free variables are refused by
every generic backend (all of them follow gradients), naming the variables, before anything runs.

The model is read when it is wrapped: wrap it again after changing it (``pm.set_data``, new variables, a module
value the function reads). ``bz.fit``, ``bz.compare`` and the declarations the backends read refuse a PyMC model
whose data containers or observations changed since, and a NumPyro model whose traced log density changed since.
Refused when wrapped, with what to do: a variable or dim named ``chain`` or ``draw`` (ArviZ's), a free
variable's dim named like an observed variable's with another length (or like the harness's ``obs``, every
observed value, or ``feature``), NaN in a PyMC data container or array, non-finite observed values.

A saved fit or comparison records the model's description (its ``spec()``: library, name, fingerprint, variables
with dims and coords, observed shapes), not the model itself: ``fit.model()`` and ``load_comparison`` rebuild that
description (:class:`SavedModel`), which reads fits (tables, reports, ``check_fit``) but cannot sample. Loading a
file never runs code from it, and nothing breaks when PyMC's or NumPyro's internals change between versions; to
fit again, wrap the original model again.
"""
from __future__ import annotations

import functools
import hashlib
import json
import re
import uuid
import warnings
from typing import ClassVar

import numpy as np

from bayeszoo.datasets import Dataset
from bayeszoo.models.base import Model, plain

#: the ``family`` of every model of one's own: its spec says which library declared it
USER_FAMILY = "user"
LIBRARIES = ("pymc", "numpyro")
LIBRARY_NAMES = {"pymc": "PyMC", "numpyro": "NumPyro"}
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")   # object addresses in printed graphs differ between processes


class UserModel(Model):
    """A model of one's own (:func:`from_pymc`, :func:`from_numpyro`): the contract of :class:`Model` read off the
    user's declaration. Subclasses hold the declaration; :class:`SavedModel` is the description a saved fit
    carries."""

    family = USER_FAMILY
    compare_vars: ClassVar[tuple[str, ...]] = ()
    library: str = ""

    def __init__(self, *, name: str, variables: dict, coords: dict, observed: dict, fingerprint: str):
        if not isinstance(name, str) or not name:
            raise ValueError(f"a model's name must be a non-empty string, got {name!r}")
        self.name = name
        # name -> {"dims": [...], "shape": [...]}; coords only for the dims that have coordinate values
        self._variables = {k: {"dims": [str(d) for d in v["dims"]], "shape": [int(s) for s in v["shape"]]}
                           for k, v in variables.items()}
        self._coords = {str(k): _json_values(v) for k, v in coords.items()}
        self._observed = {k: [int(s) for s in shape] for k, shape in observed.items()}
        self._fingerprint = fingerprint

    # ---- identity ------------------------------------------------------------------------------------
    def spec(self) -> dict:
        """JSON: the library, the name, the fingerprint of structure and data, the canonical variables with their
        dims and shapes, the coords of those dims that have coordinate values, and the observed variables'
        shapes. Equal specs mean the same posterior."""
        return {"family": USER_FAMILY, "library": self.library, "name": self.name, "fingerprint": self._fingerprint,
                "variables": self._variables, "coords": self._coords, "observed": self._observed}

    @property
    def fingerprint(self) -> str:
        """A digest of the model's structure and data (module docstring)."""
        return self._fingerprint

    def __eq__(self, other):
        return isinstance(other, UserModel) and self.spec() == other.spec()

    def __hash__(self):
        return hash(self._fingerprint)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(name={self.name!r}, variables={list(self._variables)}, "
                f"observed={list(self._observed)})")

    def check_fit(self, fit) -> None:
        spec = getattr(fit, "model_spec", None)
        if isinstance(spec, dict) and spec.get("family") == USER_FAMILY and spec != self.spec():
            raise ValueError(f"this fit was made with another model ({spec.get('library')} model "
                             f"{spec.get('name')!r}, fingerprint {str(spec.get('fingerprint'))[:12]}), not with "
                             f"{self!r} (fingerprint {self._fingerprint[:12]})")
        super().check_fit(fit)

    # ---- data ----------------------------------------------------------------------------------------
    def observed_values(self) -> dict[str, np.ndarray]:
        """The observed variables' values, by name (what ``y`` of :meth:`dataset` concatenates)."""
        raise NotImplementedError

    def renamed(self, name: str) -> "UserModel":
        """The same model under another name (the report's title, the data's name); the same posterior, so a
        reference made with either is accepted for both."""
        raise NotImplementedError

    def with_observations(self, values: dict, *, name: str | None = None) -> "UserModel":
        """The same model with other values of its observed variables (name -> array of the variable's shape), as
        a new bayeszoo model (what simulation-based calibration fits to simulated data)."""
        raise NotImplementedError

    def dataset(self) -> Dataset:
        """The Dataset this model stands for: no inputs (X has zero columns), y every observed value (flattened,
        in the model's order), named after the model. ``bz.fit(model)`` uses it when no data are given."""
        cached = self.__dict__.get("_dataset")
        if cached is None:
            values = [np.ravel(np.asarray(v, dtype=float)) for v in self.observed_values().values()]
            y = np.concatenate(values) if values else np.empty(0)
            shapes = ", ".join(f"{k} {tuple(v)}" for k, v in self._observed.items())
            cached = Dataset(X=np.zeros((y.size, 0)), y=y, name=self.name,
                             meta={"observed": shapes, "model": f"{self.library} model {self.name!r}"})
            self.__dict__["_dataset"] = cached
        return cached

    def validate(self, data: Dataset) -> None:
        self._check_unchanged()
        super().validate(data)
        if data.fingerprint() != self.dataset().fingerprint():
            raise ValueError(f"{self!r} carries its own observations: fit it without data (bz.fit(model, "
                             f"backend=...)) or with model.dataset(); got another dataset, {data!r}")

    def _check_unchanged(self) -> None:
        """A ValueError when the declaration no longer is what was wrapped (its fingerprint would lie); every
        use of the declaration checks."""

    def constant_data(self, data: Dataset) -> dict:
        return {"X": data.X}   # no inputs: the model's covariates are inside its declaration

    def var_dims(self, data: Dataset | None = None) -> dict[str, tuple[str, ...]]:
        return {k: tuple(v["dims"]) for k, v in self._variables.items()}

    def coords(self, data: Dataset | None = None) -> dict[str, np.ndarray]:
        """The coords of every dim of the canonical variables: the model's where it has them, else 0, 1, ..."""
        out = {}
        for v in self._variables.values():
            for dim, size in zip(v["dims"], v["shape"]):
                values = self._coords.get(dim)
                out[dim] = np.asarray(values) if values is not None and len(values) == size else np.arange(size)
        return out

    # ---- what a model of one's own does not have -----------------------------------------------------
    def predict(self, fit, X_new):
        raise ValueError(f"{self!r} has no predict (it has no inputs to predict at): draw posterior predictions "
                         f"with the library, e.g. pm.sample_posterior_predictive(fit.idata, model=pm_model) or "
                         f"numpyro.infer.Predictive(fn, posterior_samples)(key, *args)")

    def score(self, fit, data: Dataset) -> dict:
        """No family metrics: the comparison table's PSIS-LOO columns (from the fit's ``log_likelihood`` group)
        are its predictive scores."""
        return {}

    def pointwise_log_likelihood(self, posterior) -> dict[str, np.ndarray]:
        """log p(observation | draw) of every observed variable at every draw of ``posterior`` (the canonical
        variables over chain and draw): name -> (chain, draw, *batch shape), one value per likelihood term."""
        raise NotImplementedError

    def log_likelihood(self, fit, data: Dataset) -> np.ndarray:
        """The fit's ``log_likelihood`` group (``bayeszoo.results``): (chain * draw, terms), one column per
        likelihood term of every observed variable in the model's order. A univariate variable has a term per
        value (the entries of ``dataset().y``); a multivariate one (an MvNormal, a NumPyro ``to_event``) a term
        per event, its values jointly, so PSIS-LOO leaves out one event at a time."""
        terms = self.pointwise_log_likelihood(fit.idata.posterior)
        columns = []
        for name in self._observed:
            values = np.asarray(terms[name], dtype=float)
            columns.append(values.reshape(values.shape[0] * values.shape[1], -1))
        return np.concatenate(columns, axis=1)

    def log_joint(self, points: dict) -> np.ndarray:
        """log p(theta, y): the log prior plus the log-likelihood of the observations at ``points`` (free variable
        name -> values stacked over a first axis, in the constrained space; no Jacobian), one value per point.
        Two declarations of one posterior give log densities that differ by one constant: this is how a reference
        made with one is matched to the other (:meth:`bayeszoo.catalogue.Reference.matches`)."""
        raise NotImplementedError

    def centred_variables(self) -> list[str]:
        """The free variables whose prior's scale is another free variable (a centred hierarchy: the funnel NUTS
        diverges in, which writing them non-centred, ``mu + sigma * z`` with ``z ~ Normal(0, 1)``, removes); empty
        for a model with none, such as a non-centred one."""
        raise NotImplementedError

    @property
    def discrete(self) -> list[str]:
        return []

    def declaration_problem(self, library: str) -> str | None:
        if self.discrete:
            return (f"{self!r} has discrete free variable(s) {self.discrete}; the generic backends follow "
                    f"gradients (NUTS, ADVI, BlackJAX): marginalise them out or make them continuous")
        return super().declaration_problem(library)


# ---------------------------------------------------------------------------------------------------- PyMC
class PyMCModel(UserModel):
    """A ``pm.Model`` with its observed variables as a bayeszoo model (:func:`from_pymc`)."""

    library = "pymc"

    def __init__(self, pm_model, *, name: str | None = None):
        import pymc as pm

        if not isinstance(pm_model, pm.Model):
            raise ValueError(f"from_pymc expects a pymc.Model, got {type(pm_model).__name__}")
        self._pm = pm_model
        free = list(pm_model.free_RVs)
        if not free:
            raise ValueError("from_pymc: the model has no free variables, so there is no posterior to sample")
        if not pm_model.observed_RVs:
            raise ValueError("from_pymc: the model has no observed variables; bayeszoo fits posteriors given "
                             "observations: declare them with observed=...")
        shapes = pm_model.eval_rv_shapes()
        dims = pm_model.named_vars_to_dims
        coords = pm_model.coords
        variables, used = {}, {}
        for rv in free:
            shape = [int(s) for s in shapes[rv.name]]
            names = [d if d is not None else f"{rv.name}_dim_{k}"
                     for k, d in enumerate(dims.get(rv.name, (None,) * len(shape)))]
            variables[rv.name] = {"dims": names, "shape": shape}
            used.update({d: coords[d] for d in names if coords.get(d) is not None})
        discrete = {pm_model.values_to_rvs[v].name for v in pm_model.discrete_value_vars}
        self._discrete = [rv.name for rv in free if rv.name in discrete]
        observed = {rv.name: list(np.shape(self._observed_value(rv))) for rv in pm_model.observed_RVs}
        label = name or pm_model.name or "pymc_model"
        _check_reserved_names(label, "pymc", variables, observed, [v.name for v in pm_model.deterministics])
        _check_pymc_names(label, pm_model, variables, observed)
        self._check_finite(label)
        super().__init__(name=label, variables=variables, coords=used, observed=observed,
                         fingerprint=self._digest(variables, used))
        # the data as wrapped: the model is refused once pm.set_data (or anything) has changed them
        self._data_snapshot = {k: np.array(v.get_value(), copy=True) for k, v in _data_containers(pm_model).items()}
        self.dataset()

    def with_observations(self, values: dict, *, name: str | None = None) -> "PyMCModel":
        """``pm.observe`` on a copy of the model: its observed variables take ``values`` (the user's model is
        untouched)."""
        import pymc as pm

        _check_observations(self, values)
        return PyMCModel(pm.observe(self._pm, dict(values)), name=name or self.name)

    def renamed(self, name: str) -> "PyMCModel":
        return PyMCModel(self._pm, name=name)

    def _observed_value(self, rv) -> np.ndarray:
        from pytensor.compile.sharedvalue import SharedVariable
        from pytensor.graph.basic import Constant

        value = self._pm.rvs_to_values[rv]
        if isinstance(value, Constant):
            return np.asarray(value.data)
        if isinstance(value, SharedVariable):
            return np.asarray(value.get_value())
        return np.asarray(value.eval())

    def observed_values(self) -> dict[str, np.ndarray]:
        return {rv.name: self._observed_value(rv) for rv in self._pm.observed_RVs}

    def _digest(self, variables: dict, coords: dict) -> str:
        """sha1 of the printed graphs of every random variable and potential (addresses removed), and of the
        log density of every ``pm.CustomDist`` (its graph holds what the variable's graph does not: what the
        ``logp`` function computes and the numbers it closes over), every constant and data container in them, the
        observed values, the transforms, the initial values, dims and coords."""
        from pymc.distributions.custom import CustomDistRV, CustomSymbolicDistRV
        from pytensor.graph.basic import Constant
        from pytensor.graph.traversal import ancestors
        from pytensor.printing import debugprint

        pm_model = self._pm
        outputs = [*pm_model.free_RVs, *pm_model.observed_RVs, *pm_model.potentials]
        custom = [rv for rv in outputs
                  if isinstance(getattr(rv.owner, "op", None), (CustomDistRV, CustomSymbolicDistRV))]
        if custom:   # the log density of the others follows from their graphs
            outputs.append(pm_model.logp(vars=custom))
        digest = hashlib.sha1(b"pymc\n")
        digest.update(_ADDRESS.sub("", debugprint(outputs, file="str", print_type=True)).encode())
        for var in ancestors(outputs):
            if isinstance(var, Constant):
                _update(digest, var.data)
        for label, var in _data_containers(pm_model).items():
            digest.update(label.encode())
            _update(digest, var.get_value())
        for rv in pm_model.observed_RVs:
            digest.update(rv.name.encode())
            _update(digest, self._observed_value(rv))
        for rv in pm_model.free_RVs:
            transform = pm_model.rvs_to_transforms.get(rv)
            digest.update(f"{rv.name}|{type(transform).__name__ if transform is not None else None}".encode())
            initial = pm_model.rvs_to_initial_values.get(rv)
            _update(digest, initial if isinstance(initial, (np.ndarray, int, float)) else str(initial))
        digest.update(json.dumps({"variables": variables, "coords": _json_values(coords)}, sort_keys=True).encode())
        return digest.hexdigest()

    @property
    def discrete(self) -> list[str]:
        return list(self._discrete)

    def _check_unchanged(self) -> None:
        """The pm.Model is the user's and stays mutable (``pm.set_data``): a ValueError naming what changed since
        it was wrapped, as the fingerprint, the resumed fits and the compiled kernels stand for the data read
        then. Every use of the declaration (validate, :meth:`pymc_model`, :meth:`numpyro_model`) checks."""
        now = _data_containers(self._pm)
        changed = [f"data container {k!r}" for k, v in self._data_snapshot.items()
                   if k not in now or not _same_values(now[k].get_value(), v)]
        changed += [f"the values of the observed variable {k!r}" for (k, v), w in
                    zip(self.observed_values().items(), self._observed_snapshot()) if not _same_values(v, w)]
        if changed:
            raise ValueError(f"the PyMC model {self.name!r} changed since bz.models.from_pymc read it: "
                             f"{', '.join(changed)} (pm.set_data?). Wrap it again, bz.models.from_pymc(pm_model), "
                             f"to fit it with its new data")

    def _observed_snapshot(self) -> list[np.ndarray]:
        """The observed values as wrapped (the ``y`` of :meth:`dataset`, read then), per observed variable."""
        y, out, start = self.dataset().y, [], 0
        for shape in self._observed.values():
            size = int(np.prod(shape, dtype=int))
            out.append(y[start:start + size])
            start += size
        return out

    def _check_finite(self, label: str) -> None:
        """A ValueError naming the data container, observed variable or array in the graph that holds NaN (a
        covariate) or a non-finite value (an observation): the samplers would only report a NaN log density."""
        from pytensor.graph.basic import Constant
        from pytensor.graph.traversal import ancestors

        fix = "remove or impute those entries before wrapping the model"
        for name, var in _data_containers(self._pm).items():
            where = _nan_entries(var.get_value())
            if where:
                raise ValueError(f"the PyMC model {label!r}: data container {name!r} holds NaN ({where}); {fix}")
        for name, value in self.observed_values().items():
            bad = ~np.isfinite(np.asarray(value, dtype=float))
            if bad.any():
                raise ValueError(f"the PyMC model {label!r}: the observed variable {name!r} holds {int(bad.sum())} "
                                 f"non-finite value(s) (first at index {tuple(int(i) for i in np.argwhere(bad)[0])}); "
                                 f"{fix}, or pass them to observed= as NaN in a NumPy array for PyMC to impute")
        outputs = [*self._pm.free_RVs, *self._pm.observed_RVs, *self._pm.potentials]
        for var in ancestors(outputs):
            if isinstance(var, Constant) and np.ndim(var.data) > 0:
                where = _nan_entries(var.data)
                if where:
                    users = sorted(rv.name for rv in outputs if var in set(ancestors([rv])))
                    raise ValueError(f"the PyMC model {label!r}: an array of shape {np.shape(var.data)} in the "
                                     f"graph of {users} holds NaN ({where}); {fix}")

    # ---- declarations --------------------------------------------------------------------------------
    def pymc_model(self, data: Dataset | None = None):
        self._check_unchanged()
        return self._pm

    def numpyro_model(self, data: Dataset | None = None):
        """The PyMC model's log density through PyMC's JAX export, as a zero-argument NumPyro model: one improper
        flat site per value variable (the unconstrained space PyMC samples in), one factor with the log density
        (Jacobians included), and a deterministic site per free variable mapping back to the constrained space."""
        import numpyro
        import numpyro.distributions as dist

        self._check_unchanged()
        names = [rv.name for rv in self._pm.free_RVs]

        def model():
            # exported on the first trace, inside the backend's timed run (it is this model's compile step)
            logp, constrain, value_shapes = self._jax_functions()
            values = [numpyro.sample(site, dist.ImproperUniform(dist.constraints.real, (), shape))
                      for site, shape in value_shapes]
            numpyro.factor("__pymc_logp", logp(*values)[0])
            for name, value in zip(names, constrain(*values)):
                numpyro.deterministic(name, value)

        return model

    def _jax_functions(self):
        cached = self.__dict__.get("_jax")
        if cached is None:
            from pymc.sampling.jax import get_jaxified_graph

            pm_model = self._pm
            try:
                logp = get_jaxified_graph(inputs=pm_model.value_vars, outputs=[pm_model.logp()])
                constrain = get_jaxified_graph(inputs=pm_model.value_vars,
                                               outputs=pm_model.replace_rvs_by_values(pm_model.free_RVs))
            except NotImplementedError as exc:
                raise ValueError(f"the PyMC model {self.name!r} cannot be exported to JAX for the NumPyro and "
                                 f"BlackJAX backends ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); "
                                 f"the PyMC backends (nuts, nutpie, advi, fullrank_advi) run it") from None
            point = pm_model.initial_point()
            # value variables are sampled under names of their own: an untransformed one shares its RV's name
            shapes = [(f"__value_{v.name}", tuple(np.shape(point[v.name]))) for v in pm_model.value_vars]
            cached = self.__dict__["_jax"] = (logp, constrain, shapes)
        return cached

    def log_joint(self, points: dict) -> np.ndarray:
        """PyMC's log density of the model without its value transforms (so at the free variables themselves, no
        Jacobian), through PyMC's JAX export (a C compilation of the same graph takes ten times longer)."""
        import jax
        from pymc.model.transform.conditioning import remove_value_transforms
        from pymc.sampling.jax import get_jaxified_graph

        self._check_unchanged()
        cached = self.__dict__.get("_log_joint")
        if cached is None:
            plain = remove_value_transforms(self._pm)
            logp = get_jaxified_graph(inputs=plain.value_vars, outputs=[plain.logp()])
            names = [plain.values_to_rvs[v].name for v in plain.value_vars]
            batch = jax.jit(jax.vmap(lambda *values: logp(*values)[0]))   # one compilation, not one per operation
            cached = self.__dict__["_log_joint"] = (batch, names)
        batch, names = cached
        return np.asarray(batch(*[np.asarray(points[n], float) for n in names]))

    def centred_variables(self) -> list[str]:
        """The free variables of a location-scale distribution (:data:`SCALE_LAST`) whose last parameter, the
        scale, is computed from another free variable."""
        from pytensor.graph.traversal import ancestors

        free = set(self._pm.free_RVs)
        out = []
        for rv in self._pm.free_RVs:
            op = rv.owner.op
            if type(op).__name__ not in SCALE_LAST:
                continue
            scale = op.dist_params(rv.owner)[-1]
            if any(var in free for var in ancestors([scale])):
                out.append(rv.name)
        return out

    def pointwise_log_likelihood(self, posterior) -> dict[str, np.ndarray]:
        """``pm.compute_log_likelihood`` at every draw of ``posterior``."""
        import arviz as az
        import pymc as pm

        names = [rv.name for rv in self._pm.free_RVs]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)   # ArviZ on a posterior without the usual groups
            idata = az.InferenceData(posterior=posterior[names])
            out = pm.compute_log_likelihood(idata, model=self._pm, extend_inferencedata=False, progressbar=False)
        group = out.log_likelihood if hasattr(out, "log_likelihood") else out
        return {name: np.asarray(group[name].values) for name in self._observed}

    def __getstate__(self):
        import cloudpickle

        state = {k: v for k, v in self.__dict__.items() if k not in ("_jax", "_pm", "_log_joint")}
        state["_pm_pickle"] = cloudpickle.dumps(self._pm)   # plain pickle cannot take a pm.Model
        return state

    def __setstate__(self, state):
        import pickle

        state = dict(state)
        state["_pm"] = pickle.loads(state.pop("_pm_pickle"))
        self.__dict__.update(state)


#: PyMC's location-scale random variables, whose last parameter is the scale (what a centred hierarchy puts a free
#: variable in)
SCALE_LAST = ("NormalRV", "HalfNormalRV", "StudentTRV", "HalfStudentTRV", "CauchyRV", "HalfCauchyRV", "LaplaceRV",
              "LogisticRV", "LogNormalRV", "GumbelRV")


#: ArviZ's dims of every group; besides, the harness names ``obs`` (every observed value) and ``feature`` (the
#: columns of ``constant_data``'s X, none for a model of one's own)
SAMPLE_DIMS = ("chain", "draw")


def _check_reserved_names(label: str, library: str, variables: dict, observed: dict, others=()) -> None:
    """A ValueError, naming the variable and the fix, when a variable or dim of the model would collide in the
    fit's InferenceData: a name or dim ``chain`` / ``draw``, a dim ``obs`` of another length than the number of
    observed values, a dim ``feature``."""
    who = f"the {LIBRARY_NAMES[library]} model {label!r}"
    for kind, names in (("free variable", variables), ("observed variable", observed), ("variable", others)):
        for name in names:
            if name in SAMPLE_DIMS:
                raise ValueError(f"{who}: the {kind} {name!r} is named like ArviZ's {name!r} dim (every "
                                 f"InferenceData group is over chain and draw); rename it")
    n_observed = sum(int(np.prod(shape, dtype=int)) for shape in observed.values())
    for name, spec in variables.items():
        for dim, size in zip(spec["dims"], spec["shape"]):
            if dim in SAMPLE_DIMS:
                problem = f"is named like ArviZ's {dim!r} dim"
            elif dim == "obs" and size != n_observed:
                problem = (f"of length {size} is named like the observations' dim 'obs', which has "
                           f"{n_observed} (every observed value)")
            elif dim == "feature":
                problem = "is named like the inputs' dim 'feature', which has none"
            else:
                continue
            rename = "dims=..." if library == "pymc" else "the numpyro.plate's name"
            raise ValueError(f"{who}: the dim {dim!r} of the free variable {name!r} {problem}; rename it "
                             f"({rename})")


def _data_containers(pm_model) -> dict:
    """The data containers (``pm.Data``, any shared variable but a random generator) the model's graph reads, by
    name (an unnamed one by its place), in graph order."""
    from pytensor.compile.sharedvalue import SharedVariable
    from pytensor.graph.traversal import ancestors
    from pytensor.tensor.random.type import RandomType

    outputs = [*pm_model.free_RVs, *pm_model.observed_RVs, *pm_model.potentials]
    found = [v for v in ancestors(outputs) if isinstance(v, SharedVariable) and not isinstance(v.type, RandomType)]
    return {(v.name if v.name else f"<unnamed data {k}>"): v for k, v in enumerate(found)}


def _same_values(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc" and b.dtype.kind in "fc")


def _nan_entries(value) -> str:
    """'' when ``value`` has no NaN, else how many entries are NaN and the index of the first."""
    value = np.asarray(value)
    if value.dtype.kind not in "fc":
        return ""
    bad = np.isnan(value)
    if not bad.any():
        return ""
    first = tuple(int(i) for i in np.argwhere(bad)[0]) if value.ndim else ()
    return f"{int(bad.sum())} NaN value(s), the first at index {first}"


def _check_pymc_names(label: str, pm_model, variables: dict, observed: dict) -> None:
    """A ValueError when a free variable's dim shares its name with a dim of an observed variable (PyMC's
    ``observed_data`` and ``log_likelihood`` groups) but not its length: the InferenceData cannot hold both."""
    dims = pm_model.named_vars_to_dims
    lengths = {}
    for rv in pm_model.observed_RVs:
        shape = observed[rv.name]
        for k, (dim, size) in enumerate(zip(dims.get(rv.name, (None,) * len(shape)), shape)):
            lengths.setdefault(dim if dim is not None else f"{rv.name}_dim_{k}", (rv.name, size))
    for var, spec in variables.items():
        for dim, size in zip(spec["dims"], spec["shape"]):
            if dim in lengths and lengths[dim][1] != size:
                other, length = lengths[dim]
                raise ValueError(f"the PyMC model {label!r}: the free variable {var!r} has a dim {dim!r} of length "
                                 f"{size}, and the observed variable {other!r} a dim of that name of length "
                                 f"{length}; rename one of them (dims=...)")


# ------------------------------------------------------------------------------------------------- NumPyro
class NumPyroModel(UserModel):
    """A NumPyro model function with its arguments as a bayeszoo model (:func:`from_numpyro`)."""

    library = "numpyro"

    def __init__(self, fn, args: tuple = (), kwargs: dict | None = None, *, name: str | None = None):
        if not callable(fn):
            raise ValueError(f"from_numpyro expects a NumPyro model function, got {type(fn).__name__}")
        self._fn, self._args, self._kwargs = fn, tuple(args), dict(kwargs or {})
        trace = self._trace()
        variables, observed, discrete = {}, {}, []
        self._dims = {}
        for site_name, site in trace.items():
            if site["type"] != "sample" or _is_factor(site):
                continue
            shape = [int(s) for s in np.shape(site["value"])]
            self._dims[site_name] = _site_dims(site_name, site, shape)
            if site["is_observed"]:
                observed[site_name] = shape
            else:
                variables[site_name] = {"dims": self._dims[site_name], "shape": shape}
                if site["fn"].support.is_discrete:
                    discrete.append(site_name)
        label = name if name is not None else getattr(fn, "__name__", "numpyro_model")
        if not variables:
            raise ValueError(f"from_numpyro: {label!r} has no latent sample sites, so there is no posterior to "
                             f"sample")
        if not observed:
            raise ValueError(f"from_numpyro: {label!r} has no observed sites; bayeszoo fits posteriors given "
                             f"observations: pass them as obs=...")
        _check_reserved_names(label, "numpyro", variables, observed,
                              [k for k, site in trace.items() if site["type"] == "deterministic"])
        self._discrete = discrete
        self._observed_values = {k: np.asarray(trace[k]["value"]) for k in observed}
        super().__init__(name=label, variables=variables, coords={}, observed=observed,
                         fingerprint=self._digest(trace, label))

    def _trace(self):
        from numpyro import handlers
        from numpyro.infer.initialization import init_to_uniform

        # substituted as NumPyro initialises: an improper site cannot be sampled from its prior
        seeded = handlers.substitute(handlers.seed(self._fn, 0), substitute_fn=init_to_uniform)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                return handlers.trace(seeded).get_trace(*self._args, **self._kwargs)
        except Exception as exc:
            raise ValueError(f"from_numpyro: running the model function with the arguments given failed "
                             f"({type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''})") from exc

    def _digest(self, trace, label: str) -> str:
        """sha1 of what the posterior depends on: the traced log density (:func:`_log_density_jaxpr`: its
        operations, literals and constants, so every number the function reads, however it reaches it), and
        every site's name, kind, distribution, shapes, support and observed values. Not the function's code,
        name or place: the same model written or defined elsewhere is the same model."""
        digest = hashlib.sha1(b"numpyro\n")
        for site_name, site in trace.items():
            if site["type"] not in ("sample", "deterministic", "plate"):
                continue
            fn = site.get("fn")
            parts = [site_name, site["type"], str(site.get("is_observed"))]
            if site["type"] == "sample":
                parts += [type(fn).__name__, str(fn.batch_shape), str(fn.event_shape), type(fn.support).__name__]
            digest.update("|".join(parts).encode())
            if site["type"] == "sample" and site["is_observed"] and not _is_factor(site):
                _update(digest, np.asarray(site["value"]))
        try:
            closed = _log_density_jaxpr(self._fn, self._args, self._kwargs, trace, bool(self._discrete))
        except Exception as exc:
            # no sound digest: one that matches no other wrapping, so nothing is resumed or shared for it
            reason = str(exc).splitlines()[0][:200] if str(exc) else ""
            warnings.warn(f"from_numpyro: the log density of {label!r} could not be traced ({type(exc).__name__}: "
                          f"{reason}), so it has no fingerprint: a resumed grid refits it and no compiled kernel "
                          f"is shared with it", stacklevel=3)
            return f"{UNFINGERPRINTED}{uuid.uuid4().hex}"
        digest.update(_ADDRESS.sub("", str(closed.jaxpr)).encode())
        for const in closed.consts:
            _update(digest, np.asarray(const))
        return digest.hexdigest()

    def _check_unchanged(self) -> None:
        """The function is traced again: what it reads when it runs (a module-level dict, a list it closes over)
        may have changed since it was wrapped, and then its fingerprint, resumed fits and compiled kernels would
        stand for another posterior."""
        if self._fingerprint.startswith(UNFINGERPRINTED):
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            now = self._digest(self._trace(), self.name)
        if now != self._fingerprint:
            raise ValueError(f"the NumPyro model {self.name!r} changed since bz.models.from_numpyro read it: its "
                             f"log density now differs (a value it reads from its module, a closure or an "
                             f"argument changed). Wrap it again, bz.models.from_numpyro(fn, *args, **kwargs), to "
                             f"fit it as it is now")

    @property
    def discrete(self) -> list[str]:
        return list(self._discrete)

    def renamed(self, name: str) -> "NumPyroModel":
        return NumPyroModel(self._fn, self._args, self._kwargs, name=name)

    def observed_values(self) -> dict[str, np.ndarray]:
        return dict(self._observed_values)

    def declaration_problem(self, library: str) -> str | None:
        if library == "pymc":
            return (f"{self!r} is a NumPyro model; the PyMC backends (nuts, nutpie, advi, fullrank_advi) need a "
                    f"PyMC one: use numpyro or a BlackJAX engine, or declare it in PyMC and wrap it with "
                    f"bz.models.from_pymc")
        return super().declaration_problem(library)

    def with_observations(self, values: dict, *, name: str | None = None) -> "NumPyroModel":
        """The model function with its observed sites conditioned on ``values`` instead of its ``obs=``
        arguments (``numpyro.handlers.condition`` replaces an observed value), called with the same arguments."""
        _check_observations(self, values)
        observed = {k: np.asarray(v) for k, v in values.items()}
        fn = self._fn if OBSERVED_KEYWORD in self._kwargs else _conditioned(self._fn)   # conditioned once
        return NumPyroModel(fn, self._args, {**self._kwargs, OBSERVED_KEYWORD: observed}, name=name or self.name)

    def numpyro_model(self, data: Dataset | None = None):
        """The user's function with its arguments bound (the arrays among them, and the observations of
        :meth:`with_observations`, are passed traced by the backends: one compilation for every simulation)."""
        self._check_unchanged()
        return functools.partial(self._fn, *self._args, **self._kwargs)

    def log_joint(self, points: dict) -> np.ndarray:
        """NumPyro's ``log_density`` of the function at the free variables (constrained, no Jacobian)."""
        import jax
        from numpyro.infer.util import log_density

        self._check_unchanged()

        def one(values):
            return log_density(self._fn, self._args, self._kwargs, values)[0]

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return np.asarray(jax.jit(jax.vmap(one))({n: np.asarray(points[n], float) for n in self._variables}))

    def centred_variables(self) -> list[str]:
        """The latent sites of a distribution with a ``scale`` (unwrapped from ``expand`` / ``to_event``) whose
        scale changes when every other latent site does: the function is traced at its initial point and at
        another (each site moved by 0.5 in its unconstrained space)."""
        from numpyro import handlers
        from numpyro.distributions.transforms import biject_to

        first = self._trace()
        latent = {k: site for k, site in first.items() if site["type"] == "sample" and not site["is_observed"]
                  and not site["fn"].support.is_discrete}
        moved = {k: biject_to(site["fn"].support)(biject_to(site["fn"].support).inv(site["value"]) + 0.5)
                 for k, site in latent.items()}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            second = handlers.trace(handlers.substitute(handlers.seed(self._fn, 0), data=moved)).get_trace(
                *self._args, **self._kwargs)
        out = []
        for name in latent:
            before, after = _scale(first[name]["fn"]), _scale(second[name]["fn"])
            if before is not None and not np.allclose(np.asarray(before), np.asarray(after)):
                out.append(name)
        return out

    def pointwise_log_likelihood(self, posterior) -> dict[str, np.ndarray]:
        """``numpyro.infer.log_likelihood`` at every draw of ``posterior``: per observed site over its batch shape
        (the dims of a ``to_event`` are one term)."""
        from numpyro.infer import log_likelihood

        samples = {name: np.asarray(posterior[name].values) for name in self._variables}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            values = log_likelihood(self._fn, samples, *self._args, batch_ndims=2, **self._kwargs)
        return {name: np.asarray(values[name]) for name in self._observed}

    def __getstate__(self):
        import cloudpickle

        state = {k: v for k, v in self.__dict__.items() if k not in ("_fn", "_args", "_kwargs")}
        # a function defined in a notebook or inside another function does not pickle by reference
        state["_call_pickle"] = cloudpickle.dumps((self._fn, self._args, self._kwargs))
        return state

    def __setstate__(self, state):
        import pickle

        state = dict(state)
        state["_fn"], state["_args"], state["_kwargs"] = pickle.loads(state.pop("_call_pickle"))
        self.__dict__.update(state)


#: how the fingerprint of a model whose log density cannot be traced begins (the rest is random: it matches nothing)
UNFINGERPRINTED = "unfingerprinted-"
#: the keyword under which :meth:`NumPyroModel.with_observations` passes the new observed values
OBSERVED_KEYWORD = "bayeszoo_observed"


def _conditioned(fn):
    """``fn`` with the sample sites in the ``bayeszoo_observed`` keyword's dict observed at those values, whatever
    its ``obs=`` arguments say: an argument, so that a compiled sampler serves every set of values."""
    def conditioned(*args, bayeszoo_observed, **kwargs):
        from numpyro import handlers

        return handlers.condition(fn, data=bayeszoo_observed)(*args, **kwargs)

    return conditioned


def _check_observations(model: UserModel, values: dict) -> None:
    if not isinstance(values, dict) or set(values) != set(model._observed):
        raise ValueError(f"{model!r}: new observations must give every observed variable, "
                         f"{sorted(model._observed)}; got {sorted(values) if isinstance(values, dict) else values!r}")
    for key, value in values.items():
        if list(np.shape(value)) != model._observed[key]:
            raise ValueError(f"{model!r}: new observations of {key!r} must have shape "
                             f"{tuple(model._observed[key])}; got {np.shape(value)}")


def _scale(fn):
    """The ``scale`` of a NumPyro distribution, looking through ``expand`` / ``to_event`` / masks; None without."""
    while fn is not None and not hasattr(fn, "scale"):
        fn = getattr(fn, "base_dist", None)
    return None if fn is None else fn.scale


def _is_factor(site) -> bool:
    """``numpyro.factor`` is an observed site of NumPyro's Unit distribution: a density term, not data."""
    return type(site.get("fn")).__name__ == "Unit"


def _site_dims(name: str, site, shape: list[int]) -> list[str]:
    """A site's dims: an axis a plate spans (at its ``dim``, counted from the right of the batch shape) is named
    after the plate, any other ``<site>_dim_<k>``."""
    dims = [f"{name}_dim_{k}" for k in range(len(shape))]
    fn = site.get("fn")
    n_event = len(getattr(fn, "event_shape", ()))
    for frame in site.get("cond_indep_stack", ()):
        axis = len(shape) - n_event + frame.dim
        if 0 <= axis < len(shape) - n_event and shape[axis] == frame.size:
            dims[axis] = frame.name
    return dims


# ------------------------------------------------------------------------------------------ saved description
class SavedModel(UserModel):
    """The description a saved fit or comparison keeps of a model of one's own (its ``spec()``): it reads fits
    (variables, dims, coords, ``check_fit``, the comparison table and report) but holds no declaration, so
    ``bz.fit`` / ``bz.compare`` refuse it with what to do instead."""

    def __init__(self, spec: dict):
        spec = dict(spec)
        library = spec.get("library")
        if library not in LIBRARIES:
            raise ValueError(f"a user model's spec names its library, one of {LIBRARIES}; got {library!r}")
        missing = [k for k in ("name", "fingerprint", "variables") if k not in spec]
        if missing:
            raise ValueError(f"a user model's spec lacks {missing}")
        self.library = library
        try:
            super().__init__(name=spec["name"], variables=spec["variables"], coords=spec.get("coords") or {},
                             observed=spec.get("observed") or {}, fingerprint=spec["fingerprint"])
        except (TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"a user model's spec has malformed variables or coords ({exc})") from None

    @property
    def _refusal(self) -> str:
        wrap = "bz.models.from_pymc(pm_model)" if self.library == "pymc" else "bz.models.from_numpyro(fn, *args)"
        return (f"{self!r} is the description of a {self.library} model kept with a saved fit, not the model: "
                f"it cannot sample. Wrap the original model again, {wrap}, and pass that")

    def declaration_problem(self, library: str) -> str | None:
        return self._refusal

    def dataset(self) -> Dataset:
        raise ValueError(f"{self._refusal}; the data of a saved comparison are in its folder (data.npz, "
                         f"bz.load_comparison(folder).data)")

    def validate(self, data: Dataset) -> None:
        Model.validate(self, data)

    def pointwise_log_likelihood(self, posterior) -> dict[str, np.ndarray]:
        raise ValueError(self._refusal)

    def with_observations(self, values: dict, *, name: str | None = None) -> UserModel:
        raise ValueError(self._refusal)

    def renamed(self, name: str) -> UserModel:
        raise ValueError(self._refusal)

    def log_joint(self, points: dict) -> np.ndarray:
        raise ValueError(self._refusal)

    def centred_variables(self) -> list[str]:
        raise ValueError(self._refusal)


# ---------------------------------------------------------------------------------------------- constructors
def from_pymc(pm_model, *, name: str | None = None) -> PyMCModel:
    """A PyMC model, with its observed data, as a bayeszoo model.

    Parameters
    ----------
    pm_model : pymc.Model
        The model, holding its observed variables (``observed=``); its dims and coords name the posterior's.
    name : str, optional
        The name of the problem (the dataset it stands for, the report's title); by default the model's own name
        (``pm.Model(name=...)``), else "pymc_model".

    Returns
    -------
    PyMCModel
        Runs on every generic backend (``bz.backends(model)``); ``bz.fit(model, backend=...)`` needs no data.

    Raises
    ------
    ValueError
        Not a ``pm.Model``, no free or no observed variables.
    """
    return PyMCModel(pm_model, name=name)


def from_numpyro(fn, *args, **kwargs) -> NumPyroModel:
    """A NumPyro model function, called as ``fn(*args, **kwargs)`` with its observations among the arguments
    (``obs=...`` sites), as a bayeszoo model named after the function (``fn.__name__``).

    Returns
    -------
    NumPyroModel
        Runs on ``numpyro`` and the BlackJAX engines; ``bz.fit(model, backend="numpyro")`` needs no data.

    Raises
    ------
    ValueError
        Not callable, the call fails, no latent or no observed sites.
    """
    return NumPyroModel(fn, args, kwargs)


def from_user_spec(spec: dict) -> SavedModel:
    """The description of a model of one's own from its ``spec()`` (what ``from_spec`` gives for family "user")."""
    return SavedModel(spec)


# ------------------------------------------------------------------------------------------------ hashing
def _json_values(values) -> list | None:
    """Coordinate values as JSON values (numbers and strings as they are, anything else as its text)."""
    if values is None:
        return None
    out = []
    for v in plain(list(values)):
        out.append(v if isinstance(v, (str, int, float, bool)) or v is None else str(v))
    return out


def _update(digest, value) -> None:
    """Feed ``value`` into ``digest``: arrays by dtype, shape and bytes, containers item by item (dicts in key
    order), anything else by its text with addresses removed."""
    if isinstance(value, (np.ndarray, np.generic)) or type(value).__module__.startswith(("jax", "jaxlib")):
        array = np.ascontiguousarray(np.asarray(value))
        if array.dtype.kind in "biufc":
            digest.update(f"{array.dtype}{array.shape}".encode())
            digest.update(array.tobytes())
            return
        digest.update(f"{array.dtype}{array.shape}{array.tolist()!r}".encode())
    elif isinstance(value, dict):
        digest.update(b"{")
        for key in sorted(value, key=repr):
            digest.update(repr(key).encode())
            _update(digest, value[key])
        digest.update(b"}")
    elif isinstance(value, (list, tuple)):
        digest.update(f"{type(value).__name__}[".encode())
        for item in value:
            _update(digest, item)
        digest.update(b"]")
    else:
        digest.update(_ADDRESS.sub("", f"{type(value).__name__}:{value!r}").encode())


def _log_density_jaxpr(fn, args: tuple, kwargs: dict, trace, discrete: bool = False):
    """The jaxpr of the model's potential energy (NumPyro's negative log density on the unconstrained space,
    Jacobians included, what every NumPyro and BlackJAX backend samples) at the traced point, with its constants;
    with discrete latent sites, which have no unconstrained space, of the joint log density at the traced values.
    Tracing evaluates the Python function, so whatever it reads (arguments, a ``functools.partial``'s, closures,
    module dicts and lists) is in it as a literal or a constant."""
    import jax
    from numpyro.distributions.transforms import biject_to
    from numpyro.infer.util import log_density, potential_energy

    latent = {name: site for name, site in trace.items() if site["type"] == "sample" and not site["is_observed"]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        if discrete:
            values = {name: site["value"] for name, site in latent.items()}
            return jax.make_jaxpr(lambda p: log_density(fn, args, kwargs, p)[0])(values)
        params = {name: biject_to(site["fn"].support).inv(site["value"]) for name, site in latent.items()}
        return jax.make_jaxpr(lambda p: potential_energy(fn, args, kwargs, p))(params)
