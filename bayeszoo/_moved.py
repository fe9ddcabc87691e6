"""Old module names kept after a rename: each is a thin module whose only code is a call of :func:`moved`."""
from __future__ import annotations

import sys
import warnings
from types import ModuleType


def moved(old: str, new: ModuleType, *, how: str = "import it from there") -> None:
    """Warn (FutureWarning, once: a module runs once per process) that module ``old`` is now ``new``, and make
    ``old`` another name of ``new`` in ``sys.modules``, so that every name read through it, and every name
    patched through it, is the new module's own."""
    # stacklevel 3: past this function and the old module, to the line that imported it (warnings skips the
    # import machinery's frames)
    warnings.warn(f"{old} is now {new.__name__}; {how}", FutureWarning, stacklevel=3)
    sys.modules[old] = new
