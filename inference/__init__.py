"""Inference backends. Importing this package registers all of them (see :mod:`bayeszoo.registry`)."""
from __future__ import annotations

from bayeszoo.inference import pymc_engines  # noqa: F401  (it imports numpyro_engines between its samplers and ADVI)
from bayeszoo.inference import numpyro_engines  # noqa: F401
from bayeszoo.inference import blackjax_engines  # noqa: F401
from bayeszoo.inference import rvm  # noqa: F401
from bayeszoo.inference import gpc  # noqa: F401
from bayeszoo.inference import arvm  # noqa: F401
from bayeszoo.inference import pmkl  # noqa: F401
from bayeszoo.inference import bid  # noqa: F401
from bayeszoo.inference import imagervm  # noqa: F401
from bayeszoo.inference import slm  # noqa: F401
