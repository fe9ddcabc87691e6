"""The old name of :mod:`bayeszoo.memory_guard`; importing ``bayeszoo.resources`` warns and gives that module."""
from bayeszoo import _moved, memory_guard

_moved.moved(__name__, memory_guard)
