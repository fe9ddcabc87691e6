"""Hand-written backend of the adaptive-kernel RVM family: ``arvm`` (Algorithm 1; importing registers it)."""
from bayeszoo.inference.arvm import learn  # noqa: F401
