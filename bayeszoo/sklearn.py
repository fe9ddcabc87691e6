"""scikit-learn estimators over the model families: ``fit`` / ``predict`` / ``predict_proba`` / ``score`` on arrays
or DataFrames, so the models run inside ``Pipeline``, ``GridSearchCV`` and ``cross_val_score``.

    from bayeszoo.sklearn import RelevanceVectorRegressor
    reg = RelevanceVectorRegressor(width=3.0).fit(X, y)      # bz.fit(RVM(width=3.0), data, "fast", seed=0)
    reg.predict(X_new)                                       # reg.model_.predict(reg.fit_, X_new)

Each estimator builds its model (``model_``) from its constructor arguments and calls :func:`bayeszoo.fit` once
with ``backend``, ``seed`` and ``backend_options``; the resulting :class:`~bayeszoo.Fit` is kept as ``fit_``, and
predictions are exactly the model's ``predict`` on that fit. The arguments are stored unchanged and checked in
``fit``, where bad data, options or backend names raise a ``ValueError`` before any inference runs.

``score`` is scikit-learn's (R^2 for regressors, accuracy for classifiers); the family's own metrics are
``est.model_.score(est.fit_, data)``.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

from bayeszoo import checks, models
from bayeszoo.api import fit as bz_fit
from bayeszoo.checks import SEED_LIMIT
from bayeszoo.datasets import Dataset

__all__ = ["RelevanceVectorRegressor", "RelevanceVectorClassifier", "BayesGPClassifier", "PMKLClassifier",
           "AdaptiveRelevanceVectorRegressor"]

#: keywords that the estimator passes to bz.fit itself: refused in ``backend_options``
_OWN_KEYWORDS = ("seed", "progress")
#: what the arguments every estimator has may be (the backend's name and options are checked further by bz.fit)
_OWN_CONSTRAINTS = {
    "backend": checks.Text(),
    "seed": [checks.Seed(), checks.Instance((np.random.RandomState, np.random.Generator), "a NumPy random generator")],
    "backend_options": [None, checks.Instance((Mapping,), "a dict of the backend's options")]}


class _BayesZooEstimator(BaseEstimator):
    """What every estimator here shares: building the model from the constructor arguments, one ``bz.fit`` call,
    and input checks. A subclass names its model class, the model fields its constructor takes, the fields it
    fixes (e.g. the task) and the dataset task."""

    _model_class: type = models.Model
    _model_params: tuple[str, ...] = ()
    _fixed: dict = {}
    _task: str = "regression"
    #: argument name -> its constraint (:mod:`bayeszoo.checks`): the model's declaration of the options the
    #: constructor takes, and the estimator's own arguments
    _parameter_constraints: dict = dict(_OWN_CONSTRAINTS)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        declared = cls._model_class._parameter_constraints
        cls._parameter_constraints = {**{name: declared[name] for name in cls._model_params}, **_OWN_CONSTRAINTS}

    def _validate_params(self) -> None:
        """Every constructor argument checked against ``_parameter_constraints`` (scikit-learn's name for this
        step), a ValueError naming the estimator and the argument; the model then checks what involves several."""
        checks.validate(type(self).__name__, self._parameter_constraints, self.get_params(deep=False))

    def _make_model(self):
        """The family model of these arguments; the model checks them and raises a ValueError naming a bad one."""
        return self._model_class(**self._fixed, **{name: getattr(self, name) for name in self._model_params})

    def _options(self) -> dict:
        options = self.backend_options
        if options is None:
            return {}
        if not all(isinstance(key, str) for key in options):
            raise ValueError(f"{type(self).__name__}: backend_options must be keyed by option names, got "
                             f"{sorted(map(repr, options))}")
        own = sorted(set(options) & set(_OWN_KEYWORDS))
        if own:
            raise ValueError(f"{type(self).__name__}: {own} are set by the estimator's own arguments, not in "
                             f"backend_options")
        return dict(options)

    def _seed(self):
        """The ``seed`` for ``bz.fit``: a generator (scikit-learn's ``random_state`` convention) gives the next
        integer it draws; an integer or None goes to ``bz.fit`` as it is (None: fresh entropy there)."""
        if isinstance(self.seed, np.random.RandomState):
            return int(self.seed.randint(SEED_LIMIT, dtype=np.int64))
        if isinstance(self.seed, np.random.Generator):
            return int(self.seed.integers(SEED_LIMIT))
        return self.seed

    def _run(self, X: np.ndarray, y: np.ndarray) -> None:
        """Fit the model to (X, y) (y already encoded as the family expects) and keep the model and the Fit.

        The model, the dataset, the backend name and its options are all checked before the backend runs
        (``bz.fit``'s contract)."""
        self._validate_params()
        model = self._make_model()
        options = self._options()
        data = Dataset(X=X, y=y, name=type(self).__name__, meta={"task": self._task})
        self.fit_ = bz_fit(model, data, self.backend, seed=self._seed(), progress=False, **options)
        self.model_ = model

    def _check_X(self, X) -> np.ndarray:
        check_is_fitted(self)
        return validate_data(self, X, dtype=np.float64, order="C", reset=False)


# -------------------------------------------------------------------------------------------- regressors
class _Regressor(RegressorMixin, _BayesZooEstimator):
    def fit(self, X, y):
        """Fit the model to inputs ``X`` (n_samples, n_features) and real targets ``y`` (n_samples,).

        Returns
        -------
        self
        """
        X, y = validate_data(self, X, y, dtype=np.float64, order="C", y_numeric=True, ensure_min_samples=2)
        self._run(X, np.asarray(y, dtype=np.float64))
        return self

    def predict(self, X):
        """Posterior predictive mean at ``X`` (n_samples,): ``model_.predict(fit_, X)``."""
        X = self._check_X(X)
        return self.model_.predict(self.fit_, X)


class RelevanceVectorRegressor(_Regressor):
    """Relevance vector machine regression (:class:`bayeszoo.models.RVM`, ``task="regression"``).

    One kernel basis function per training point plus a bias; the weights' precisions prune most of them, and
    the ones left are the relevance vectors.

    Parameters
    ----------
    kernel : {"gauss", "poly", "sigmoid", "bspline", "linear"}, default="gauss"
        Basis functions; ``"gauss"`` is ``exp(-|x - x_n|^2 / width^2)``.
    width : float, "scale" or "evidence", default="scale"
        Kernel width, in the units of the (scaled) inputs. ``"scale"`` sets it at ``fit`` from the training inputs
        as ``SVC(gamma="scale")`` does: width = sqrt(n_features * X.var()), so that the ``"gauss"`` kernel is SVC's
        rbf kernel (``"sigmoid"``: n_features * X.var()). ``"evidence"`` chooses it at ``fit`` as the width of
        largest type-II marginal likelihood (the ``"fast"`` fit's log evidence) within a factor 4 of the
        ``"scale"`` width, at the cost of about ten ``"fast"`` fits. The number used is
        ``fit_.idata.constant_data["kernel_width"]``.
    degree : int, default=2
        Degree of the ``"poly"`` kernel.
    offset : float, default=1.0
        Offset of the ``"poly"`` and ``"sigmoid"`` kernels.
    bias : bool, default=True
        Include a constant basis function.
    a, b : float, default=1e-4
        Gamma(shape a, rate b) prior of each weight precision.
    c, d : float, default=1e-4
        Gamma(shape c, rate d) prior of the noise precision.
    backend : str, default="fast"
        Inference backend (``bz.backends(bz.models.RVM())`` lists them); ``"fast"`` is Tipping and Faul's
        sequential type-II maximum likelihood.
    seed : int, None, numpy.random.RandomState or numpy.random.Generator, default=0
        Seed of the backend: an integer in [0, 2**32) gives the same fit every time; as scikit-learn's
        ``random_state``, None draws a fresh seed at every ``fit``, and a RandomState or Generator the next one it
        gives. The seed used is ``fit_.seed_used``.
    backend_options : dict or None, default=None
        Options of the backend (e.g. ``{"max_iter": 500}``), and ``draws`` / ``tune`` / ``chains``.

    Attributes
    ----------
    model_ : bayeszoo.models.RVM
        The model that was fitted.
    fit_ : bayeszoo.Fit
        The fit: posterior draws, timing and diagnostics.
    n_features_in_ : int
        Number of input columns seen in ``fit``.
    feature_names_in_ : ndarray of str
        Column names, when ``X`` was a DataFrame with string column names.

    Notes
    -----
    The priors are not scale-free: standardise the inputs (e.g. in a ``Pipeline`` with ``StandardScaler``; the
    default ``width="scale"`` then follows the number of features) or choose ``width`` on their scale; very large or
    tiny targets are refused with a ``ValueError``.
    """

    _model_class = models.RVM
    _model_params = ("kernel", "width", "degree", "offset", "bias", "a", "b", "c", "d")
    _fixed = {"task": "regression"}

    def __init__(self, kernel="gauss", width="scale", degree=2, offset=1.0, bias=True, a=1e-4, b=1e-4, c=1e-4,
                 d=1e-4, backend="fast", seed=0, backend_options=None):
        self.kernel = kernel
        self.width = width
        self.degree = degree
        self.offset = offset
        self.bias = bias
        self.a = a
        self.b = b
        self.c = c
        self.d = d
        self.backend = backend
        self.seed = seed
        self.backend_options = backend_options

    def predict(self, X, return_std=False):
        """Posterior predictive mean at ``X`` (n_samples,): ``model_.predict(fit_, X)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the predictive standard deviation, noise included (``model_.predict_std``).

        Returns
        -------
        mean : ndarray of shape (n_samples,)
        std : ndarray of shape (n_samples,), only when ``return_std`` is True
        """
        X = self._check_X(X)
        mean = self.model_.predict(self.fit_, X)
        if return_std:
            return mean, self.model_.predict_std(self.fit_, X)
        return mean

    @property
    def relevance_vectors_(self) -> np.ndarray:
        """Indices of the training points whose basis functions are relevant (``model_.relevance``)."""
        check_is_fitted(self)
        relevant = self.model_.relevance(self.fit_) >= models.rvm.RELEVANCE_THRESHOLD
        if self.model_.bias:
            relevant = relevant[1:]
        return np.flatnonzero(relevant)


class AdaptiveRelevanceVectorRegressor(_Regressor):
    """Adaptive-kernel relevance vector machine regression (:class:`bayeszoo.models.ARVM`).

    Every basis function learns its own centre and width(s) together with the weights' precisions
    (Algorithm 1 of Tzikas, Likas and Galatsanos, 2009), so there is no kernel width to tune.

    Parameters
    ----------
    kernel : {"iso", "diag"}, default="iso"
        One width per basis function, or one per basis function and input direction.
    sparsity : float or {"none", "aic", "bic", "ric"}, default="bic"
        Weight c of the sparsity prior exp(-c trace(S)).
    n_basis : int, default=40
        Largest number of basis functions.
    feature_selection : bool, default=False
        Switch input directions off per basis function (``kernel="diag"`` only).
    width_range : (float, float), default=(0.005, 1.0)
        Range of candidate widths, as fractions of each input's span.
    min_width : "spacing" or float, default="spacing"
        Smallest width; ``"spacing"`` is the median nearest-neighbour distance of the training inputs.
    a, b, c, d : float
        Gamma priors of the weight and noise precisions, used by the sampling backends only.
    backend : str, default="arvm"
        Inference backend; ``"arvm"`` is Algorithm 1.
    seed : int, None, numpy.random.RandomState or numpy.random.Generator, default=0
        Seed of the backend (candidate bases are drawn at random): an integer in [0, 2**32) gives the same fit
        every time; as scikit-learn's ``random_state``, None draws a fresh seed at every ``fit``, and a RandomState
        or Generator the next one it gives. The seed used is ``fit_.seed_used``.
    backend_options : dict or None, default=None
        Options of the backend (e.g. ``{"n_candidates": 50}``), and ``draws`` / ``tune`` / ``chains``.

    Attributes
    ----------
    model_ : bayeszoo.models.ARVM
    fit_ : bayeszoo.Fit
    n_features_in_ : int
    feature_names_in_ : ndarray of str
    """

    _model_class = models.ARVM
    _model_params = ("kernel", "sparsity", "n_basis", "feature_selection", "width_range", "min_width",
                     "a", "b", "c", "d")
    _fixed = {"task": "regression"}

    def __init__(self, kernel="iso", sparsity="bic", n_basis=40, feature_selection=False, width_range=(0.005, 1.0),
                 min_width="spacing", a=1.0, b=1e-2, c=1.0, d=1e-3, backend="arvm", seed=0, backend_options=None):
        self.kernel = kernel
        self.sparsity = sparsity
        self.n_basis = n_basis
        self.feature_selection = feature_selection
        self.width_range = width_range
        self.min_width = min_width
        self.a = a
        self.b = b
        self.c = c
        self.d = d
        self.backend = backend
        self.seed = seed
        self.backend_options = backend_options


# ------------------------------------------------------------------------------------------- classifiers
class _Classifier(ClassifierMixin, _BayesZooEstimator):
    _task = "classification"
    _binary_only = True
    _multiclass_advice = ""

    def fit(self, X, y):
        """Fit the model to inputs ``X`` (n_samples, n_features) and class labels ``y`` (any labels; they are kept
        in ``classes_`` and encoded as 0 .. n_classes - 1 for the model).

        Returns
        -------
        self
        """
        X, y = validate_data(self, X, y, dtype=np.float64, order="C", ensure_min_samples=2)
        check_classification_targets(y)
        if self._binary_only:
            kind = type_of_target(y, input_name="y", raise_unknown=True)
            if kind != "binary":
                raise ValueError(f"Only binary classification is supported. The type of the target is {kind}. "
                                 f"{self._multiclass_advice}")
        classes, encoded = np.unique(y, return_inverse=True)
        if classes.size < 2:
            raise ValueError(f"{type(self).__name__} needs samples of at least 2 classes in the data, but the "
                             f"data contains only one class: {classes[0]!r}")
        self._run(X, encoded.astype(np.float64))
        self.classes_ = classes
        return self

    def predict_proba(self, X):
        """Posterior predictive class probabilities at ``X``, shape (n_samples, n_classes), columns in the order
        of ``classes_``."""
        X = self._check_X(X)
        p = self.model_.predict(self.fit_, X)
        if p.ndim == 1:                                    # binary families give P(y = classes_[1])
            return np.column_stack([1.0 - p, p])
        return p

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X):
        """The most probable class at ``X`` (n_samples,), from ``classes_``."""
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = not self._binary_only
        return tags


class RelevanceVectorClassifier(_Classifier):
    """Relevance vector machine binary classification (:class:`bayeszoo.models.RVM`, ``task="classification"``).

    Binary only: the RVM's likelihood is a Bernoulli on one latent function. For several classes use
    :class:`PMKLClassifier` (the multinomial-probit relevance vector machine), or wrap this estimator in
    ``sklearn.multiclass.OneVsRestClassifier``, which fits one binary RVM per class.

    Parameters
    ----------
    kernel : {"gauss", "poly", "sigmoid", "bspline", "linear"}, default="gauss"
        Basis functions; ``"gauss"`` is ``exp(-|x - x_n|^2 / width^2)``.
    width : float, "scale" or "evidence", default="scale"
        Kernel width, in the units of the (scaled) inputs. ``"scale"`` sets it at ``fit`` from the training inputs
        as ``SVC(gamma="scale")`` does: width = sqrt(n_features * X.var()), so that the ``"gauss"`` kernel is SVC's
        rbf kernel (``"sigmoid"``: n_features * X.var()). ``"evidence"`` chooses it at ``fit`` as the width of
        largest type-II marginal likelihood (the ``"fast"`` fit's log evidence) within a factor 4 of the
        ``"scale"`` width, at the cost of about ten ``"fast"`` fits. The number used is
        ``fit_.idata.constant_data["kernel_width"]``.
    degree : int, default=2
        Degree of the ``"poly"`` kernel.
    offset : float, default=1.0
        Offset of the ``"poly"`` and ``"sigmoid"`` kernels.
    bias : bool, default=True
        Include a constant basis function.
    link : {"logit", "probit"}, default="logit"
        Link from the latent function to P(y = classes_[1]).
    a, b : float, default=1e-4
        Gamma(shape a, rate b) prior of each weight precision.
    backend : str, default="fast"
        Inference backend; ``"fast"`` is Tipping and Faul's sequential type-II maximum likelihood with a Laplace
        approximation of the weights.
    seed : int, None, numpy.random.RandomState or numpy.random.Generator, default=0
        Seed of the backend: an integer in [0, 2**32) gives the same fit every time; as scikit-learn's
        ``random_state``, None draws a fresh seed at every ``fit``, and a RandomState or Generator the next one it
        gives. The seed used is ``fit_.seed_used``.
    backend_options : dict or None, default=None
        Options of the backend, and ``draws`` / ``tune`` / ``chains``.

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
        The class labels; ``predict_proba``'s columns follow this order.
    model_ : bayeszoo.models.RVM
    fit_ : bayeszoo.Fit
    n_features_in_ : int
    feature_names_in_ : ndarray of str
    """

    _model_class = models.RVM
    _model_params = ("kernel", "width", "degree", "offset", "bias", "link", "a", "b")
    _fixed = {"task": "classification"}
    _multiclass_advice = ("RelevanceVectorClassifier models two classes; for more use PMKLClassifier, or "
                          "sklearn.multiclass.OneVsRestClassifier(RelevanceVectorClassifier(...)).")

    def __init__(self, kernel="gauss", width="scale", degree=2, offset=1.0, bias=True, link="logit", a=1e-4, b=1e-4,
                 backend="fast", seed=0, backend_options=None):
        self.kernel = kernel
        self.width = width
        self.degree = degree
        self.offset = offset
        self.bias = bias
        self.link = link
        self.a = a
        self.b = b
        self.backend = backend
        self.seed = seed
        self.backend_options = backend_options


class BayesGPClassifier(_Classifier):
    """Gaussian-process binary classification with fixed hyperparameters (:class:`bayeszoo.models.GPC`).

    Named apart from ``sklearn.gaussian_process.GaussianProcessClassifier`` (Laplace's method with
    hyperparameters learnt by maximising the evidence): here the hyperparameters are arguments, so a
    ``GridSearchCV`` chooses them, and ``backend`` chooses the approximation (EP by default).

    Binary only; for several classes wrap it in ``sklearn.multiclass.OneVsRestClassifier``.

    Parameters
    ----------
    kernel : {"se", "se_ard", "matern32", "matern52", "linear", "poly", "nn"}, default="se"
        Covariance function.
    likelihood : {"probit", "logit"}, default="probit"
        Link from the latent function to P(y = classes_[1]).
    log_lengthscale : float or "scale", default="scale"
        Natural log of the lengthscale (every input direction for ``"se_ard"``). ``"scale"`` sets it at ``fit``
        from the training inputs as ``SVC(gamma="scale")`` does: lengthscale^2 = n_features * X.var() / 2, so that
        the ``"se"`` kernel is SVC's rbf kernel (``"nn"``: n_features * X.var()); the number used is
        ``fit_.idata.constant_data["log_lengthscale"]``.
    log_amplitude : float, default=0.0
        Natural log of the prior standard deviation of the latent function (1 by default, as in scikit-learn's
        ``GaussianProcessClassifier()``).
    hyp : tuple of float or None, default=None
        All log-hyperparameters in the kernel's order; overrides the two arguments above.
    jitter : float, default=1e-8
        Added to the diagonal of the covariance before its Cholesky factorisation.
    degree : int, default=2
        Degree of the ``"poly"`` kernel.
    backend : str, default="ep"
        Inference backend; ``"ep"`` is expectation propagation, ``"laplace"`` Laplace's method.
    seed : int, None, numpy.random.RandomState or numpy.random.Generator, default=0
        Seed of the backend: an integer in [0, 2**32) gives the same fit every time; as scikit-learn's
        ``random_state``, None draws a fresh seed at every ``fit``, and a RandomState or Generator the next one it
        gives. The seed used is ``fit_.seed_used``.
    backend_options : dict or None, default=None
        Options of the backend, and ``draws`` / ``tune`` / ``chains``.

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
    model_ : bayeszoo.models.GPC
    fit_ : bayeszoo.Fit
    n_features_in_ : int
    feature_names_in_ : ndarray of str
    """

    _model_class = models.GPC
    _model_params = ("likelihood", "kernel", "hyp", "log_lengthscale", "log_amplitude", "jitter", "degree")
    _multiclass_advice = ("BayesGPClassifier models two classes; for more use "
                          "sklearn.multiclass.OneVsRestClassifier(BayesGPClassifier(...)) or PMKLClassifier.")

    def __init__(self, kernel="se", likelihood="probit", log_lengthscale="scale", log_amplitude=0.0, hyp=None,
                 jitter=1e-8, degree=2, backend="ep", seed=0, backend_options=None):
        self.kernel = kernel
        self.likelihood = likelihood
        self.log_lengthscale = log_lengthscale
        self.log_amplitude = log_amplitude
        self.hyp = hyp
        self.jitter = jitter
        self.degree = degree
        self.backend = backend
        self.seed = seed
        self.backend_options = backend_options


class PMKLClassifier(_Classifier):
    """Multiclass probabilistic multiple kernel learning (:class:`bayeszoo.models.PMKL`): a multinomial-probit
    relevance vector machine on a combination of base kernels, one per source of features.

    Parameters
    ----------
    rule : {"convex", "mean", "binary", "product", "wproduct"}, default="convex"
        How the base kernels are combined.
    kernel : {"rbf", "poly", "linear"}, default="rbf"
        Base kernel of every source that does not name its own.
    sources : tuple of dict or None, default=None
        Sources as column groups of ``X``: ``({"name": "shape", "columns": [0, 1]}, {"name": "colour",
        "columns": [2, 3, 4], "kernel": "linear"}, ...)``, each optionally with ``theta`` and ``degree``. None:
        all columns are one source.
    degree : int, default=2
        Degree of the ``"poly"`` kernel.
    tau, nu : float, default=1.0
        Gamma(shape tau, rate nu) prior of every weight precision.
    rho : float, default=1.0
        Dirichlet concentration of the kernel weights (convex rule).
    mu, lam : float, default=1.0
        Rates of the hyperpriors of the weighted-product rule (and of rho with ``infer_rho``).
    kernel_params : {"fixed", "infer"}, default="fixed"
        Keep the rbf parameters theta at 1 / (number of columns), or infer them.
    omega, phi : float, default=1.0
        Gamma(omega, phi) prior of theta when it is inferred.
    infer_rho : bool, default=False
        Give rho a Gamma hyperprior (convex rule).
    backend : str, default="vb"
        Inference backend; ``"vb"`` is the variational VBpMKL.
    seed : int, None, numpy.random.RandomState or numpy.random.Generator, default=0
        Seed of the backend: an integer in [0, 2**32) gives the same fit every time; as scikit-learn's
        ``random_state``, None draws a fresh seed at every ``fit``, and a RandomState or Generator the next one it
        gives. The seed used is ``fit_.seed_used``.
    backend_options : dict or None, default=None
        Options of the backend, and ``draws`` / ``tune`` / ``chains``.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    model_ : bayeszoo.models.PMKL
    fit_ : bayeszoo.Fit
    n_features_in_ : int
    feature_names_in_ : ndarray of str
    """

    _model_class = models.PMKL
    _model_params = ("rule", "kernel", "sources", "degree", "tau", "nu", "rho", "mu", "lam", "kernel_params",
                     "omega", "phi", "infer_rho")
    _task = "multiclass"
    _binary_only = False

    def __init__(self, rule="convex", kernel="rbf", sources=None, degree=2, tau=1.0, nu=1.0, rho=1.0, mu=1.0,
                 lam=1.0, kernel_params="fixed", omega=1.0, phi=1.0, infer_rho=False, backend="vb", seed=0,
                 backend_options=None):
        self.rule = rule
        self.kernel = kernel
        self.sources = sources
        self.degree = degree
        self.tau = tau
        self.nu = nu
        self.rho = rho
        self.mu = mu
        self.lam = lam
        self.kernel_params = kernel_params
        self.omega = omega
        self.phi = phi
        self.infer_rho = infer_rho
        self.backend = backend
        self.seed = seed
        self.backend_options = backend_options
