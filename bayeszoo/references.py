"""The old name of :mod:`bayeszoo.reference_builder` (``bz.catalogue.build_reference`` is still its public name);
importing ``bayeszoo.references`` warns and gives that module."""
from bayeszoo import _moved, reference_builder

_moved.moved(__name__, reference_builder)
