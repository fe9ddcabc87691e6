"""Process-wide numerical configuration, applied once when :mod:`bayeszoo` is imported.

* JAX runs in float64: GP, EP and RVM numerics (Cholesky of nearly singular kernel matrices,
  log-evidence differences) are not reliable in float32. This is the only place it is set.
* PyTensor is pointed at a real BLAS before it is first imported (see :mod:`bayeszoo._blas`).
"""
from __future__ import annotations

import os
import warnings

# ArviZ 0.23 announces its 1.0 refactor on import; the message is not actionable for our users.
warnings.filterwarnings("ignore", message="ArviZ is undergoing a major refactor", category=FutureWarning)

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=1")

from bayeszoo import _blas  # noqa: E402

_blas.configure_pytensor_blas()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
