"""Progress bars: tqdm's auto flavour (a widget in notebooks, text in terminals)."""
from __future__ import annotations

from tqdm.auto import tqdm


def progress_bar(total=None, desc: str = "", disable: bool = False, **kwargs):
    return tqdm(total=total, desc=desc, disable=disable, leave=False, dynamic_ncols=True, **kwargs)
