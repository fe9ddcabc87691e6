"""Model families. ``bz.models.RVM`` ... ; ``from_spec(model.spec())`` rebuilds a model. A model of one's own:
``from_pymc(pm_model)`` / ``from_numpyro(fn, *args, **kwargs)`` (``models/user.py``)."""
from __future__ import annotations

from collections.abc import Iterator, Mapping

from bayeszoo.models.base import Model
from bayeszoo.models.family import Family, families
from bayeszoo.models.user import USER_FAMILY, NumPyroModel, PyMCModel, SavedModel, UserModel, from_numpyro, from_pymc


class _Families(Mapping):
    """family key -> its model class, read from the declarations (:func:`families`) whenever it is asked."""

    def __getitem__(self, key: str) -> type[Model]:
        return families()[key].model

    def __iter__(self) -> Iterator[str]:
        return iter(families())

    def __len__(self) -> int:
        return len(families())

    def __repr__(self) -> str:
        return repr(dict(self))


FAMILIES: Mapping[str, type[Model]] = _Families()

# every family's class is bz.models.<Class> (RVM, GPC, ...), as its module declares it
globals().update({family.model.__name__: family.model for family in families().values()})

__all__ = ["Model", *(family.model.__name__ for family in families().values()), "FAMILIES", "Family", "families",
           "from_spec", "get_family", "from_pymc", "from_numpyro", "UserModel", "PyMCModel", "NumPyroModel",
           "SavedModel"]


def get_family(name: str) -> type[Model]:
    if not isinstance(name, str) or name not in FAMILIES:
        raise ValueError(f"unknown model family {name!r}; available: {', '.join(sorted(FAMILIES))}")
    return FAMILIES[name]


def from_spec(spec: dict) -> Model:
    """Rebuild a model from ``model.spec()`` (as stored in every saved fit). The spec of a model of one's own
    (family ``"user"``) gives its description, a :class:`SavedModel`, which reads fits but cannot sample
    (``models/user.py``)."""
    if isinstance(spec, dict) and spec.get("family") == USER_FAMILY:
        return SavedModel(spec)
    if not isinstance(spec, dict) or "family" not in spec:
        raise ValueError(f"a model spec is a dict with the model's 'family' ({', '.join(sorted(FAMILIES))}) and its "
                         f"options, as model.spec() gives it; got {spec!r}")
    spec = dict(spec)
    cls = get_family(spec.pop("family"))
    unknown = set(spec) - set(cls.option_names())
    if unknown:
        raise ValueError(f"{cls.__name__} has no option(s) {sorted(unknown)}")
    return cls(**spec)
