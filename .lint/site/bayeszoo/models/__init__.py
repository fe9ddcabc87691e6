"""Model families. ``bz.models.RVM`` ... ; ``from_spec(model.spec())`` rebuilds a model."""
from __future__ import annotations

from bayeszoo.models.base import Model
from bayeszoo.models.gpc import GPC
from bayeszoo.models.rvm import RVM
from bayeszoo.models.arvm import ARVM
from bayeszoo.models.pmkl import PMKL
from bayeszoo.models.bid import BID
from bayeszoo.models.imagervm import ImageRVM
from bayeszoo.models.slm import SLM

FAMILIES: dict[str, type[Model]] = {"rvm": RVM, "gpc": GPC, "arvm": ARVM, "pmkl": PMKL, "bid": BID,
                                 "imagervm": ImageRVM, "slm": SLM}

__all__ = ["Model", "RVM", "GPC", "ARVM", "PMKL", "BID", "ImageRVM", "SLM", "FAMILIES", "from_spec", "get_family"]


def get_family(name: str) -> type[Model]:
    if name not in FAMILIES:
        raise ValueError(f"unknown model family {name!r}; available: {', '.join(sorted(FAMILIES))}")
    return FAMILIES[name]


def from_spec(spec: dict) -> Model:
    """Rebuild a model from ``model.spec()`` (as stored in every saved fit)."""
    spec = dict(spec)
    cls = get_family(spec.pop("family"))
    unknown = set(spec) - set(cls.option_names())
    if unknown:
        raise ValueError(f"{cls.__name__} has no option(s) {sorted(unknown)}")
    return cls(**spec)
