"""The old name of :mod:`bayeszoo.experimental_design` (``bz.design`` is still its public name); importing
``bayeszoo.design`` warns and gives that module."""
from bayeszoo import _moved, experimental_design

_moved.moved(__name__, experimental_design)
