"""Make PyTensor link a real BLAS instead of its slow NumPy C-API fallback.

PyTensor's C backend calls the Fortran BLAS (``dgemm_``, ``dgemv_``, ``dger_``, ``ddot_``, ...). With a pip
install it looks for a system ``libblas`` / ``libopenblas`` / MKL, usually finds none, warns ("PyTensor could
not link to a BLAS installation") and runs every matrix product through Python-level NumPy calls.

Every pip install of bayeszoo already holds an LP64 OpenBLAS with the full Fortran interface:

1. the ``scipy-openblas32`` wheel, if installed (``scipy_openblas32.get_lib_dir()`` / ``get_library()``);
2. otherwise the copy that SciPy's own wheels vendor (``scipy.libs/`` on Linux, ``scipy/.dylibs/`` on macOS),
   which is then shared with SciPy in-process.

(NumPy's bundled OpenBLAS is ILP64, i.e. 64-bit integer arguments: PyTensor's ``int *`` calls cannot use it.)

Both export their symbols with a ``scipy_`` prefix (``scipy_dgemm_``), so besides ``-L<dir> -l<lib>`` the
flags carry one ``-D<name>=scipy_<name>`` macro per BLAS routine: PyTensor passes the non-``-l``/``-L`` part of
``blas__ldflags`` to the compiler of every BLAS-using Op, so its own declarations and calls are renamed at
preprocessing time and link against the prefixed symbols. The ``-L`` directory also becomes the rpath of the
compiled modules (PyTensor adds ``-Wl,-rpath``), so they load without ``LD_LIBRARY_PATH``.

The flags are handed to PyTensor through ``PYTENSOR_FLAGS`` before it is first imported (it reads them once,
on import), or, when PyTensor was imported first (``import pymc`` before ``import bayeszoo``), set on its
``config`` directly (the BLAS Ops read ``blas__ldflags`` when they are compiled). Nothing is changed when the
user set ``blas__ldflags`` themselves (``PYTENSOR_FLAGS`` or a ``.pytensorrc``), in a conda environment (where
PyTensor finds the environment's BLAS on its own), or when ``BAYESZOO_PYTENSOR_BLAS=0``. When no usable OpenBLAS
is found,
a warning is logged and PyTensor keeps its default behaviour; importing bayeszoo never fails because of this.
"""
from __future__ import annotations

import configparser
import ctypes
import importlib.util
import logging
import os
import sys
from pathlib import Path

_logger = logging.getLogger("bayeszoo.blas")

#: Environment switch: set to 0 / false / off to leave PyTensor's BLAS detection alone.
ENV_SWITCH = "BAYESZOO_PYTENSOR_BLAS"

# Fortran BLAS level 1-3 routine names (without the trailing underscore).
_LEVEL1 = ["rotg", "rotmg", "rot", "rotm", "swap", "scal", "copy", "axpy", "dot", "dotu", "dotc", "nrm2",
           "asum"]
_LEVEL2 = ["gemv", "gbmv", "hemv", "hbmv", "hpmv", "symv", "sbmv", "spmv", "trmv", "tbmv", "tpmv", "trsv",
           "tbsv", "tpsv", "ger", "geru", "gerc", "her", "hpr", "her2", "hpr2", "syr", "spr", "syr2", "spr2"]
_LEVEL3 = ["gemm", "symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm", "trsm"]
_EXTRA = ["sdsdot", "dsdot", "scnrm2", "dznrm2", "scasum", "dzasum", "csscal", "zdscal", "csrot", "zdrot",
          "isamax", "idamax", "icamax", "izamax", "xerbla"]
_BLAS_NAMES = sorted({p + r for p in "sdcz" for r in _LEVEL1 + _LEVEL2 + _LEVEL3} | set(_EXTRA))

_configured: str | None = None
_done = False


def configure_pytensor_blas() -> str | None:
    """Point PyTensor at a pip-installed OpenBLAS; return a description of what was configured, or None.

    Idempotent; call it before ``pytensor`` is first imported. Never raises.
    """
    global _configured, _done
    if _done:
        return _configured
    _done = True
    try:
        _configured = _configure()
    except Exception as exc:  # never break `import bayeszoo` over a performance setting
        _logger.warning("bayeszoo could not configure a BLAS for PyTensor (%s: %s); PyTensor keeps its "
                        "default, which may be its slow NumPy C-API fallback.", type(exc).__name__, exc)
        _configured = None
    return _configured


def _configure() -> str | None:
    if os.environ.get(ENV_SWITCH, "").strip().lower() in ("0", "false", "no", "off"):
        _logger.debug("%s is off: PyTensor BLAS left alone", ENV_SWITCH)
        return None
    if _user_set_ldflags():
        _logger.debug("blas__ldflags set by the user: PyTensor BLAS left alone")
        return None
    if os.path.isdir(os.path.join(sys.prefix, "conda-meta")):
        _logger.debug("conda environment: PyTensor detects the environment's BLAS itself")
        return None
    if sys.platform == "win32":
        _logger.warning("bayeszoo does not configure PyTensor's BLAS on Windows; PyTensor keeps its default "
                        "(set PYTENSOR_FLAGS=blas__ldflags=... or use mode='NUMBA').")
        return None

    found = find_openblas()
    if found is None:
        _logger.warning("no LP64 OpenBLAS found (neither the scipy-openblas32 wheel nor SciPy's bundled copy); "
                        "PyTensor will fall back to slow NumPy C-API matrix products. "
                        "`pip install scipy-openblas32` fixes this.")
        return None
    flags, description = found
    if "pytensor" in sys.modules:
        # imported first (``import pymc`` before ``import bayeszoo``): its config has read the environment, but
        # blas__ldflags is read again whenever a BLAS Op is compiled, so setting it now still takes effect
        sys.modules["pytensor"].config.blas__ldflags = flags
    else:
        current = os.environ.get("PYTENSOR_FLAGS", "").strip().strip(",")
        os.environ["PYTENSOR_FLAGS"] = f"{current},blas__ldflags={flags}" if current else f"blas__ldflags={flags}"
    _logger.debug("PyTensor BLAS: %s; blas__ldflags=%s", description, flags)
    return description


def _user_set_ldflags() -> bool:
    """True when blas__ldflags is given in PYTENSOR_FLAGS or in a .pytensorrc file (even if empty)."""
    for item in os.environ.get("PYTENSOR_FLAGS", "").split(","):
        key = item.split("=", 1)[0].strip()
        if key in ("blas__ldflags", "blas.ldflags"):
            return True
    rc = os.environ.get("PYTENSORRC", "~/.pytensorrc").split(os.pathsep)
    parser = configparser.RawConfigParser()
    try:
        parser.read([os.path.expanduser(p) for p in rc])
    except configparser.Error:
        return False
    return parser.has_option("blas", "ldflags")


# ------------------------------------------------------------------------------------------- discovery
def find_openblas() -> tuple[str, str] | None:
    """(blas__ldflags, description) for the first usable LP64 OpenBLAS, or None."""
    for source, path in _candidates():
        try:
            result = _flags_for(path)
        except OSError as exc:
            _logger.debug("cannot use %s (%s): %s", path, source, exc)
            continue
        if result is not None:
            flags, config = result
            return flags, f"{config} from {source} ({path})"
    return None


def _candidates():
    spec = importlib.util.find_spec("scipy_openblas32")
    if spec is not None and spec.submodule_search_locations:
        lib_dir = Path(next(iter(spec.submodule_search_locations))) / "lib"
        for lib in sorted(lib_dir.glob("libscipy_openblas*")):
            if lib.suffix in (".so", ".dylib"):
                yield "scipy-openblas32", lib
    spec = importlib.util.find_spec("scipy")
    if spec is not None and spec.submodule_search_locations:
        pkg = Path(next(iter(spec.submodule_search_locations)))
        for lib_dir in (pkg.parent / "scipy.libs", pkg / ".dylibs"):  # auditwheel / delocate layouts
            if lib_dir.is_dir():
                for lib in sorted(lib_dir.glob("lib*openblas*")):  # libscipy_openblas-<hash>; older: libopenblas*
                    if lib.suffix in (".so", ".dylib") and "64_" not in lib.name:
                        yield "SciPy's bundled OpenBLAS", lib


def _flags_for(path: Path) -> tuple[str, str] | None:
    """Link flags and a configuration string for one library file; None if it is not LP64 Fortran BLAS."""
    if any(ch.isspace() or ch in ",'\"" for ch in str(path)):
        # PYTENSOR_FLAGS is comma-separated and PyTensor shlex-splits ldflags; keep to paths that survive both.
        _logger.debug("skipping %s: its path has spaces, commas or quotes", path)
        return None
    lib = ctypes.CDLL(str(path))
    prefix = next((p for p in ("scipy_", "") if hasattr(lib, f"{p}dgemm_")), None)
    if prefix is None or hasattr(lib, f"{prefix}dgemm_64_"):
        return None  # no Fortran dgemm_, or an ILP64 build
    name = path.name
    if not name.startswith("lib") or path.suffix not in (".so", ".dylib"):
        return None
    link_name = name[3:-len(path.suffix)]
    flags = [f"-L{path.parent}", f"-l{link_name}"]
    if prefix:
        flags += [f"-D{n}_={prefix}{n}_" for n in _BLAS_NAMES if hasattr(lib, f"{prefix}{n}_")]
    config = "OpenBLAS"
    getter = getattr(lib, f"{prefix}openblas_get_config", None)
    if getter is not None:
        getter.restype = ctypes.c_char_p
        config = getter().decode(errors="replace").strip()
    return " ".join(flags), config
