"""The contract every model family follows (docs/architecture.md, "The model contract")."""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import ClassVar

import numpy as np

from bayeszoo import checks
from bayeszoo.datasets import Dataset


@dataclass
class Model:
    """Base class of the family classes (:class:`RVM`, :class:`GPC`, ...).

    Subclasses are dataclasses whose fields are the model options, so ``spec()`` / ``from_spec`` round-trip
    through JSON and a model pickles to Dask workers. A subclass provides:

    * ``_parameter_constraints``: option name -> what it may be (a constraint of :mod:`bayeszoo.checks`, or an
      any-of list of them), for every field; the model checks its options against it when it is made
      (:meth:`__post_init__`), and a subclass's own ``__post_init__`` adds the checks that involve several options;
    * ``validate(data)``: raise ValueError naming the problem (labels, shapes), before any sampling;
    * ``var_dims(data)``: canonical posterior variables -> their dims, the same for every backend;
    * ``coords(data)``: coordinate values for those dims;
    * ``pymc_model(data)``: a ``pm.Model`` whose canonical variables carry those names and dims;
    * ``numpyro_model(data)``: a NumPyro model function of no arguments with the same joint density; returned as
      ``functools.partial(fn, **arrays)`` it names its data, which the backends then pass as traced arguments:
      one compilation for every data set of those shapes;
    * ``predict(fit, X_new)``: binary: P(y = 1); regression: predictive mean; multiclass: (n, C) probabilities;
    * ``score(fit, data)``: dict of the family's metrics on ``data``'s test set (training set if it has none);
    * ``compare_vars``: the variables ``mean_err`` / ``sd_err`` are computed on;
    * ``log_likelihood`` (optional): ``log_likelihood(fit, data)``: log p(y_n | draw), (chain * draw, obs), or
      None: the Fit's ``log_likelihood`` group, which ``az.loo`` / ``az.compare`` read;
    * ``reference_advice``: what to try, for this family, when a reference posterior breaks its rules (the report
      shows it under the red banner);
    * ``example_data``: the family's default data set, ``bz.datasets.load(example_data)``: every backend of the
      family runs on ``Family()`` and it (or refuses before running, naming the fix; docs/families/index.md).

    The family's pictures live in ``bayeszoo.diagnostics.<family>_plots``; its backends in
    ``bayeszoo.inference.<family>`` (see docs/architecture.md).
    """

    family = "base"
    #: option name -> its constraint (:mod:`bayeszoo.checks`); every field is declared
    _parameter_constraints: ClassVar[dict] = {}
    compare_vars: ClassVar[tuple[str, ...]] = ()
    reference_advice: ClassVar[str] = ""
    example_data: ClassVar[str | None] = None

    def __post_init__(self):
        """Every option checked against ``_parameter_constraints`` (one message format, naming the class, the
        option, what it may be and what it got) and stored as the constraint converted it (2 -> 2.0, a list of
        numbers -> a tuple), so that equal models have equal specs."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        for name, value in checks.validate(type(self).__name__, self._parameter_constraints, values).items():
            setattr(self, name, value)

    # ---- identity ------------------------------------------------------------------------------------
    def spec(self) -> dict:
        """The family and the options in JSON form (tuples and arrays as lists), so the spec a fit carries is
        the same after saving and loading, and two specs compare equal exactly when the models do."""
        return {"family": self.family, **plain(asdict(self))}

    def check_fit(self, fit) -> None:
        """A ValueError unless ``fit`` was made with this model (same family and options): predictions from a
        fit made with other options or another task would be silently wrong."""
        spec = getattr(fit, "model_spec", None)
        if not isinstance(spec, dict):
            raise ValueError(f"expected a bayeszoo Fit (from bz.fit or bz.load_fit), got {type(fit).__name__}")
        if spec == self.spec():
            return
        mine, theirs = self.spec(), dict(spec)
        if theirs.get("family") != self.family:
            raise ValueError(f"this fit was made with a {theirs.get('family')!r} model, not with {type(self).__name__}")
        differ = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
        shown = ", ".join(f"{k}={theirs.get(k)!r} (here {mine.get(k)!r})" for k in differ[:4])
        raise ValueError(f"this fit was made with other {type(self).__name__} options: {shown}; "
                         f"use fit.model() to rebuild the model it was made with")

    def check_inputs(self, fit, X_new) -> np.ndarray:
        """``X_new`` as a finite float matrix with as many columns as the fit's training inputs."""
        d = int(fit.idata.constant_data["X"].shape[1])
        X_new = checks.finite_array(type(self).__name__, "X_new", X_new)
        if X_new.ndim == 1 and d == 1:
            X_new = X_new[:, None]
        return checks.finite_array(type(self).__name__, "X_new", X_new, ndim=2, columns=d)

    # ---- data ----------------------------------------------------------------------------------------
    def validate(self, data: Dataset) -> None:
        if not isinstance(data, Dataset):
            raise ValueError(f"data must be a bayeszoo.datasets.Dataset, got {type(data).__name__}")

    def constant_data(self, data: Dataset) -> dict:
        """Arrays stored with every fit (``idata.constant_data``) so predictions need only the fit."""
        return {"X": data.X}

    # ---- to be provided by families ------------------------------------------------------------------
    def var_dims(self, data: Dataset) -> dict[str, tuple[str, ...]]:
        raise NotImplementedError

    def coords(self, data: Dataset) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def pymc_model(self, data: Dataset):
        raise NotImplementedError(f"{type(self).__name__} has no PyMC declaration")

    def numpyro_model(self, data: Dataset):
        raise NotImplementedError(f"{type(self).__name__} has no NumPyro declaration")

    def declaration_memory(self, data: Dataset) -> dict[str, int]:
        """The dense arrays :meth:`pymc_model` and :meth:`numpyro_model` build from ``data``, as {what: bytes of
        float64}: what the memory guard of the backends that run a declaration counts (``bayeszoo.memory_guard``).
        Empty for a family whose declarations hold nothing that grows faster than the data."""
        return {}

    def log_likelihood_memory(self, data: Dataset, n_draws: int) -> dict[str, int]:
        """What computing :meth:`log_likelihood` of ``n_draws`` draws holds beyond the stored draws, as {what:
        bytes}: counted by the memory guard (``bayeszoo.memory_guard``) where it is more than a few arrays of draws x
        observations. Empty by default."""
        return {}

    def declaration_problem(self, library: str) -> str | None:
        """Why this model's declaration in ``library`` (``"pymc"`` or ``"numpyro"``) cannot be sampled, or None
        when it can, judged from the model's options alone (the data may still be refused by ``validate``).
        ``bz.backends`` offers the backends that run a declaration only where this is None; a family extends it
        with its own conditions (discrete parameters, improper priors)."""
        method, name = {"pymc": ("pymc_model", "PyMC"), "numpyro": ("numpyro_model", "NumPyro")}[library]
        if getattr(type(self), method) is getattr(Model, method):
            return f"{type(self).__name__} has no {name} declaration"
        return None

    def require_declarable(self, library: str) -> None:
        """A ValueError with :meth:`declaration_problem`'s reason when the declaration cannot be sampled."""
        problem = self.declaration_problem(library)
        if problem is not None:
            raise ValueError(problem)

    def predict(self, fit, X_new):
        raise NotImplementedError

    def score(self, fit, data: Dataset) -> dict:
        raise NotImplementedError

    @classmethod
    def option_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


@dataclass
class ImageModel(Model):
    """Base of the families that model one observed image (:class:`BID`, :class:`ImageRVM`): the dataset has task
    "image", ``meta["shape"] = (rows, cols)``, y the pixel values and X their (row, col) coordinates."""

    example_data: ClassVar[str] = "cameraman"      # also named in the error for a dataset that is not an image

    @classmethod
    def image_shape(cls, data: Dataset) -> tuple[int, int]:
        shape = data.meta.get("shape")
        if data.task != "image" or shape is None or len(shape) != 2:
            raise ValueError(f"{cls.__name__} needs an image dataset (task 'image' with meta['shape']), e.g. "
                             f"bz.datasets.load({cls.example_data!r}) or bz.datasets.bid_data.image_problem(g); "
                             f"got {data!r}")
        return int(shape[0]), int(shape[1])

    def observed_image(self, data: Dataset) -> np.ndarray:
        return np.asarray(data.y, dtype=float).reshape(self.image_shape(data))

    @staticmethod
    def pixel_values(image: np.ndarray, X_new) -> np.ndarray:
        """``image`` at the pixel coordinates X_new (n, 2) = (row, col): what ``predict`` returns."""
        X_new = np.atleast_2d(np.asarray(X_new, dtype=float))
        if X_new.shape[1] != 2:
            raise ValueError(f"X_new must hold (row, col) pixel coordinates, got shape {X_new.shape}")
        idx = np.rint(X_new).astype(int)
        if np.any(idx < 0) or np.any(idx[:, 0] >= image.shape[0]) or np.any(idx[:, 1] >= image.shape[1]):
            raise ValueError(f"X_new has pixel coordinates outside the {image.shape} image")
        return image[idx[:, 0], idx[:, 1]]

    def require_proper(self, backend: str) -> None:
        """A ValueError when ``backend`` needs proper priors that these options do not give (none by default)."""

    def declaration_problem(self, library: str) -> str | None:
        try:
            self.require_proper(library)
        except ValueError as exc:       # the samplers of the declarations need the same proper priors
            return str(exc)
        return super().declaration_problem(library)

    def validate(self, data: Dataset) -> None:
        super().validate(data)
        R, C = self.image_shape(data)
        if data.n != R * C or data.d != 2:
            raise ValueError(f"{type(self).__name__} dataset {data.name!r}: X must hold the {R * C} pixel "
                             f"coordinates (rows, cols) of a {R} x {C} image, got X of shape {data.X.shape}")


#: an option value that a family resolves from the training inputs at fit time, as scikit-learn's ``gamma="scale"``
#: (the RVM's ``width``, the GPC's ``log_lengthscale``); the number used is stored with the fit's constant_data
SCALE = "scale"


def scale_spread(X, setting: str, remedy: str, log: bool = False) -> float:
    """d var(X), the variance over every entry of the training inputs X (n, d) times d: the number scikit-learn's
    ``gamma="scale"`` divides by (gamma = 1 / (d var(X))), from which each family sets its ``"scale"`` option in its
    own parametrisation. The typical squared distance between two rows is 2 d var(X). ``log=True`` gives
    log(d var(X)) instead, finite for inputs of any magnitude (d var(X) itself overflows to inf, or underflows to 0,
    for entries beyond about 1e154 or below 1e-154). When every entry of X is the same number there is no spread to
    set anything from: a ValueError says what ``setting`` sets (e.g. "RVM: width='scale' sets the kernel width") and
    ends with ``remedy``."""
    X = np.asarray(X, dtype=float)
    X = X.reshape(X.shape[0], -1) if X.ndim else X.reshape(1, 1)
    top = float(np.max(np.abs(X), initial=0.0))
    e = int(np.frexp(top)[1]) if np.isfinite(top) and top > 0 else 0
    # scaled by 2^-e into [-1, 1] first (exact), so that no square overflows or underflows
    spread = X.shape[1] * float(np.var(np.ldexp(X, -e))) if X.size else 0.0
    if not spread > 0:
        raise ValueError(f"{setting} from the spread of the training inputs, but all {X.shape[0]} training inputs "
                         f"are the same point (d var(X) = 0); {remedy}")
    if log:
        return float(np.log(spread) + 2 * e * np.log(2.0))
    with np.errstate(over="ignore", under="ignore"):
        return float(np.ldexp(spread, 2 * e))


def plain(value):
    """``value`` with tuples and arrays as lists and NumPy scalars as Python numbers (JSON form)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value
