"""Progress bars: a widget in notebooks, text in terminals."""
from __future__ import annotations

try:
    import ipywidgets  # noqa: F401  (tqdm's notebook bar is a widget)
    from tqdm.auto import tqdm
except ImportError:   # without widgets tqdm.auto warns at import and falls back to text anyway
    from tqdm import tqdm


def progress_bar(total=None, desc: str = "", disable: bool = False, **kwargs):
    return tqdm(total=total, desc=desc, disable=disable, leave=False, dynamic_ncols=True, **kwargs)
