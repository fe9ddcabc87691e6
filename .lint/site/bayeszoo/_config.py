"""Process-wide numerical configuration, applied once when :mod:`bayeszoo` is imported.

* JAX runs in float64: GP, EP and RVM numerics (Cholesky of nearly singular kernel matrices,
  log-evidence differences) are not reliable in float32. This is the only place it is set.
* PyTensor is pointed at a real BLAS before it is first imported (see :mod:`bayeszoo.numerics.pytensor_blas`).
"""
from __future__ import annotations

import os
import warnings

# ArviZ 0.23 announces its 1.0 refactor on import; the message is not actionable for our users.
warnings.filterwarnings("ignore", message="ArviZ is undergoing a major refactor", category=FutureWarning)

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=1")

from bayeszoo.numerics import pytensor_blas as _blas  # noqa: E402

_blas.configure_pytensor_blas()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

# NumPyro's NUTS kernel takes tens of seconds to compile on 2 CPU cores; JAX's persistent compilation cache
# makes every later run of the same model shape (tests, grids, notebooks) skip that.
_JAX_CACHE = os.environ.get("BAYESZOO_JAX_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "bayeszoo", "jax"))
if _JAX_CACHE and _JAX_CACHE.lower() != "off":
    jax.config.update("jax_compilation_cache_dir", _JAX_CACHE)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
