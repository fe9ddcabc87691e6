"""bayeszoo: a model zoo for Bayesian kernel and sparse models.

    import bayeszoo as bz
    data = bz.datasets.load("sinc")
    model = bz.models.RVM(width=3.0)
    fit = bz.fit(model, data, backend="gibbs", seed=0)
    cmp = bz.compare(model, data, backends=["nuts", "numpyro", "gibbs", "vb", "em"], reference="nuts")
"""
from bayeszoo import _config  # noqa: F401  (float64 JAX, PyTensor BLAS: once, before anything else)
from bayeszoo import datasets  # noqa: E402
from bayeszoo import models  # noqa: E402
from bayeszoo.api import backends, compare, cross_validate, fit  # noqa: E402
from bayeszoo.comparison import Comparison, load_comparison  # noqa: E402
from bayeszoo.results import Fit, load_fit  # noqa: E402
from bayeszoo.registry import register_backend  # noqa: E402
from bayeszoo.inference.user_samplers import log_density, register_sampler  # noqa: E402
from bayeszoo import experimental_design as design  # noqa: E402  (bz.design)
from bayeszoo import active_learning  # noqa: E402
from bayeszoo import testing  # noqa: E402
from bayeszoo import catalogue  # noqa: E402
from bayeszoo.reference_builder import build_reference  # noqa: E402
from bayeszoo.sbc import sbc  # noqa: E402
from bayeszoo.benchmark import Leaderboard, benchmark, load_leaderboard  # noqa: E402

# bz.catalogue.build_reference: the builder calls bz.fit, so it lives above the API, which itself reads the
# catalogue; it joins the rest of the catalogue's reference machinery here
catalogue.build_reference = build_reference

__version__ = "0.1.0"


def __getattr__(name):
    # bz.resources and bz.references: renamed modules (memory_guard, reference_builder), reached by their old names
    # through their warning shims
    if name in ("resources", "references"):
        import importlib
        return importlib.import_module(f"bayeszoo.{name}")
    raise AttributeError(f"module 'bayeszoo' has no attribute {name!r}")


__all__ = ["datasets", "models", "fit", "compare", "backends", "cross_validate", "design", "active_learning", "Fit", "Comparison",
           "load_fit", "load_comparison", "register_backend", "register_sampler", "log_density", "testing", "catalogue", "build_reference", "sbc",
           "benchmark", "Leaderboard", "load_leaderboard", "__version__"]
