"""Progress bars: a widget in notebooks, text in terminals.

Every long loop of a backend shows one :func:`progress_bar` whose ``unit`` is its unit of work ("sweep", "pass",
"iteration", "outer loop"), so the rate reads "2.10s/sweep", and whose ``total`` is the number it will make, or at
most make: tqdm then shows the time left. A loop that stops on convergence counts to its cap, so its time left is
an upper bound; its postfix shows how far it is from converging (:func:`show`)."""
from __future__ import annotations

import time

try:
    import ipywidgets  # noqa: F401  (tqdm's notebook bar is a widget)
    from tqdm.auto import tqdm
except ImportError:   # without widgets tqdm.auto warns at import and falls back to text anyway
    from tqdm import tqdm


def progress_bar(total=None, desc: str = "", disable: bool = False, unit: str = "it", **kwargs):
    """A bar over ``total`` units of work named ``unit`` (one :meth:`update` each)."""
    return tqdm(total=total, desc=desc, disable=disable, leave=False, dynamic_ncols=True, unit=unit, **kwargs)


def show(bar, text: str) -> None:
    """Put ``text`` (e.g. "change 3.1e-04 > tol 1e-08", "site 1200/3000") after ``bar`` and redraw it at most every
    ``bar.mininterval`` seconds: cheap enough to call inside a sweep whose units take seconds."""
    if bar.disable:
        return
    bar.set_postfix_str(text, refresh=False)
    now = time.monotonic()
    shown_at = getattr(bar, "_shown_at", None)   # never drawn yet: draw now (the clock's zero is arbitrary)
    if shown_at is None or now - shown_at >= bar.mininterval:
        bar._shown_at = now
        bar.refresh()
