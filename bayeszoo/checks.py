"""Validation of user input: one vocabulary for model options, dataset-loader options, backend options and the
API's arguments. Every check returns the value (converted where that is safe) or raises a ``ValueError`` that
names whose option it is, the option, what it must be and what it got, before any work starts:
``"<owner>: <name> must be <what>; got <value>"``.

Parameters are declared with constraint objects (:class:`Interval`, :class:`OneOf`, :class:`Flag`, ...), after
scikit-learn's ``_parameter_constraints``; a list of constraints means "any one of these" (``None`` in it admits
None), and :func:`validate` checks a mapping of parameters against such a declaration::

    from bayeszoo import checks
    CONSTRAINTS = {"width": [checks.POSITIVE, checks.OneOf(("scale",))], "kernel": checks.OneOf(KERNELS)}
    values = checks.validate("RVM", CONSTRAINTS, {"width": 2, "kernel": "gauss"})   # {"width": 2.0, ...}

The functions (``checks.positive("RVM", "width", width)``, ``checks.choice(...)``) check one value in place.
"""
from __future__ import annotations

import difflib
import numbers
from dataclasses import dataclass
from typing import Callable

import numpy as np


def did_you_mean(name, known, prefix: str = "") -> str:
    """" did you mean 'a' or 'b'?" naming the entries of ``known`` close to ``name`` (each after ``prefix``), or ""
    when none is: the hint of an unknown name's message."""
    close = difflib.get_close_matches(str(name), list(known), n=3, cutoff=0.5)
    return f" did you mean {' or '.join(repr(prefix + c) for c in close)}?" if close else ""


def refusal(owner: str, name: str, what: str, value) -> ValueError:
    """The one message format of a refused value, ``"<owner>: <name> must be <what>; got <value>"`` (a long value
    shortened): the error a constraint of one's own raises."""
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return ValueError(f"{owner}: {name} must be {what}; got {shown}")


def number(owner: str, name: str, value, *, low: float | None = None, high: float | None = None,
           low_inclusive: bool = False, high_inclusive: bool = True, integer: bool = False,
           allow_none: bool = False):
    """A finite real (or integer) number within (low, high]; bool and strings are refused."""
    if value is None and allow_none:
        return None
    kind = "an integer" if integer else "a finite number"
    ok_type = isinstance(value, numbers.Integral) if integer else isinstance(value, numbers.Real)
    if isinstance(value, (bool, np.bool_)) or not ok_type or not np.isfinite(float(value)):
        raise refusal(owner, name, kind + (" or None" if allow_none else ""), value)
    if low is not None and (value < low or (value == low and not low_inclusive)):
        raise refusal(owner, name, f"{kind} {'>=' if low_inclusive else '>'} {low}", value)
    if high is not None and (value > high or (value == high and not high_inclusive)):
        raise refusal(owner, name, f"{kind} {'<=' if high_inclusive else '<'} {high}", value)
    return int(value) if integer else float(value)


def number_sequence(owner: str, name: str, value, *, allow_scalar: bool = False,
                    **bounds) -> tuple[float, ...]:
    """A non-empty sequence (list, tuple or 1-d array) of numbers, each checked by ``number`` with ``bounds``; with
    ``allow_scalar`` one number is accepted as a sequence of one. Returned as a tuple of floats."""
    if allow_scalar and isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)):
        value = (value,)
    if isinstance(value, np.ndarray) and value.ndim == 1:
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or len(value) == 0:
        raise refusal(owner, name, "a non-empty sequence of numbers" + (" or a number" if allow_scalar else ""), value)
    return tuple(number(owner, name, v, **bounds) for v in value)


def positive(owner: str, name: str, value, *, integer: bool = False, allow_none: bool = False):
    """A finite number > 0 (an integer >= 1 with ``integer``)."""
    return number(owner, name, value, low=0, integer=integer, allow_none=allow_none)


def non_negative(owner: str, name: str, value, *, integer: bool = False, allow_none: bool = False):
    return number(owner, name, value, low=0, low_inclusive=True, integer=integer, allow_none=allow_none)


def probability(owner: str, name: str, value):
    """A number strictly between 0 and 1."""
    return number(owner, name, value, low=0, high=1, high_inclusive=False)


def choice(owner: str, name: str, value, choices):
    """One of ``choices`` (compared by equality), returned as the declared choice (``np.str_("a")`` -> ``"a"``,
    ``2.0`` -> ``2``). Arrays, unhashable values and bools (unless a choice is a bool: ``True == 1``) are refused."""
    choices = tuple(choices)
    is_bool = isinstance(value, (bool, np.bool_))
    try:
        refused = isinstance(value, np.ndarray) or (is_bool and not any(isinstance(c, bool) for c in choices))
        at = -1 if refused else choices.index(value)
    except (TypeError, ValueError):   # not among them, or an array compared element-wise
        at = -1
    if at < 0:
        raise refusal(owner, name, f"one of {choices}", value)
    return choices[at]


def flag(owner: str, name: str, value) -> bool:
    """True or False (not 0 / 1 or strings)."""
    if not isinstance(value, (bool, np.bool_)):
        raise refusal(owner, name, "True or False", value)
    return bool(value)


#: seeds are integers in [0, SEED_LIMIT): what NumPy's legacy seeding, scikit-learn's random_state, PyMC and a
#: 32-bit JAX key all take, so a seed that passes here is accepted by every backend's library
SEED_LIMIT = 2**32


def seed(owner: str, name: str, value):
    """None (the caller then draws fresh entropy: :func:`fresh_seed`) or an integer in [0, 2**32); bools, floats
    and strings are refused."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or not 0 <= value < SEED_LIMIT:
        raise refusal(owner, name, "None or an integer in [0, 2**32)", value)
    return int(value)


def fresh_seed() -> int:
    """A seed from the operating system's entropy (NumPy's ``SeedSequence``), in [0, 2**32): what ``seed=None``
    stands for, drawn once so that it can be recorded and the run repeated."""
    return int(np.random.SeedSequence().entropy % SEED_LIMIT)


def finite_array(owner: str, name: str, value, *, ndim: int | None = None, columns: int | None = None,
                 min_rows: int = 0) -> np.ndarray:
    """A float array with no NaN or inf; ``ndim`` and the number of ``columns`` (last axis) when given.
    pandas objects are accepted (their values are used)."""
    try:
        raw = np.asarray(getattr(value, "to_numpy", lambda: value)())
        # text ("1.5") would convert, and complex numbers lose their imaginary part: neither is an array of numbers
        if raw.dtype.kind not in "biuf" and not (raw.dtype.kind == "O" and _all_real_numbers(raw)):
            raise TypeError
        array = raw.astype(float)
    except (TypeError, ValueError):
        raise refusal(owner, name, "an array of real numbers", value) from None
    if ndim is not None and array.ndim != ndim:
        raise ValueError(f"{owner}: {name} must have {ndim} dimension(s); got shape {array.shape}")
    if columns is not None and (array.ndim < 1 or array.shape[-1] != columns):
        raise ValueError(f"{owner}: {name} must have {columns} column(s); got shape {array.shape}")
    if array.ndim and array.shape[0] < min_rows:
        raise ValueError(f"{owner}: {name} needs at least {min_rows} row(s); got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{owner}: {name} contains NaN or inf ({int(np.sum(~np.isfinite(array)))} values)")
    return array


def _all_real_numbers(array: np.ndarray) -> bool:
    """An object array (a list mixing ints and floats, a pandas column of objects) holding real numbers only."""
    return all(isinstance(v, (int, float, np.bool_, np.integer, np.floating)) for v in array.ravel())


# ------------------------------------------------------------------------------- declarative constraints
# What a parameter may be, declared with it rather than checked by hand, after scikit-learn's
# ``_parameter_constraints``: model options (``Model._parameter_constraints``), backend options (``registry.Option``),
# loader and API arguments. Each constraint is called as ``constraint(owner, name, value)`` and returns the value
# (converted where that is safe) or raises the ValueError of the functions above; ``what`` says what it admits,
# which an any-of list's message joins with "or".
def _bounds(kind: str, low, high, closed: str) -> str:
    left, right = closed in ("left", "both"), closed in ("right", "both")
    if low is not None and high is not None:
        return f"{kind} in {'[' if left else '('}{low:g}, {high:g}{']' if right else ')'}"
    if low is not None:
        return f"{kind} {'>=' if left else '>'} {low:g}"
    if high is not None:
        return f"{kind} {'<=' if right else '<'} {high:g}"
    return kind


def _or_none(what: str, none: bool) -> str:
    return what + " or None" if none else what


@dataclass(frozen=True)
class Interval:
    """A number of ``kind`` (``int`` or ``float``) in the interval from ``low`` to ``high`` (None: unbounded),
    ``closed`` "left", "right", "both" or "neither"; ``none`` also admits None."""

    kind: type
    low: float | None = None
    high: float | None = None
    closed: str = "left"
    none: bool = False

    @property
    def what(self) -> str:
        kind = "an integer" if self.kind is int else "a finite number"
        return _or_none(_bounds(kind, self.low, self.high, self.closed), self.none)

    def __call__(self, owner: str, name: str, value):
        return number(owner, name, value, low=self.low, high=self.high, integer=self.kind is int,
                      low_inclusive=self.closed in ("left", "both"), high_inclusive=self.closed in ("right", "both"),
                      allow_none=self.none)


@dataclass(frozen=True)
class OneOf:
    """One of ``choices`` (returned as the declared choice: :func:`choice`); ``none`` also admits None."""

    choices: tuple
    none: bool = False

    @property
    def what(self) -> str:
        choices = tuple(self.choices)
        return _or_none(repr(choices[0]) if len(choices) == 1 else f"one of {choices}", self.none)

    def __call__(self, owner: str, name: str, value):
        if value is None and self.none:
            return None
        return choice(owner, name, value, self.choices)


@dataclass(frozen=True)
class Flag:
    """True or False."""

    what = "True or False"

    def __call__(self, owner: str, name: str, value) -> bool:
        return flag(owner, name, value)


@dataclass(frozen=True)
class Seed:
    """None (fresh entropy) or an integer in [0, 2**32): :func:`seed`."""

    what = "None or an integer in [0, 2**32)"

    def __call__(self, owner: str, name: str, value):
        return seed(owner, name, value)


@dataclass(frozen=True)
class Numbers:
    """A non-empty sequence of numbers, each in ``element`` (an :class:`Interval`), of ``length`` when given;
    ``scalar`` also admits one number (a sequence of one), ``none`` None. Returned as a tuple."""

    element: Interval = Interval(float)
    length: int | None = None
    scalar: bool = False
    none: bool = False

    @property
    def what(self) -> str:
        count = f"a sequence of {self.length}" if self.length is not None else "a non-empty sequence of"
        each = "numbers" if self.element.low is None and self.element.high is None else \
            f"numbers, each {_bounds('', self.element.low, self.element.high, self.element.closed).strip()}"
        return _or_none(f"{count} {each}" + (" or a number" if self.scalar else ""), self.none)

    def __call__(self, owner: str, name: str, value):
        if value is None and self.none:
            return None
        e = self.element
        values = number_sequence(owner, name, value, allow_scalar=self.scalar, low=e.low, high=e.high,
                                 integer=e.kind is int, low_inclusive=e.closed in ("left", "both"),
                                 high_inclusive=e.closed in ("right", "both"))
        if self.length is not None and len(values) != self.length:
            raise refusal(owner, name, f"a sequence of {self.length} numbers", value)
        return values


@dataclass(frozen=True)
class Array:
    """A finite float array with ``ndim`` dimensions when given; ``none`` also admits None. Shapes that depend on
    the data are checked by the backend's ``check(options, model, data)``."""

    ndim: int | None = None
    none: bool = False

    @property
    def what(self) -> str:
        return _or_none("an array of real numbers" + (f" with {self.ndim} dimension(s)" if self.ndim else ""),
                        self.none)

    def __call__(self, owner: str, name: str, value):
        if value is None and self.none:
            return None
        return finite_array(owner, name, value, ndim=self.ndim)


@dataclass(frozen=True)
class Text:
    """A string (a file name, a label); ``none`` also admits None."""

    none: bool = False

    @property
    def what(self) -> str:
        return _or_none("a string", self.none)

    def __call__(self, owner: str, name: str, value):
        if (value is None and self.none) or isinstance(value, str):
            return value
        raise refusal(owner, name, self.what, value)


@dataclass(frozen=True)
class Instance:
    """An instance of one of ``types`` (e.g. ``(dict,)``), described as ``what``; returned as it is."""

    types: tuple
    what: str

    def __call__(self, owner: str, name: str, value):
        if isinstance(value, self.types):
            return value
        raise refusal(owner, name, self.what, value)


@dataclass(frozen=True)
class Where:
    """``base`` (a constraint), and then ``test(value)`` true of the value it returns: a condition the basic
    constraints do not spell (an odd side, a pair in increasing order); ``what`` describes both."""

    base: Callable
    test: Callable
    what: str

    def __call__(self, owner: str, name: str, value):
        try:
            checked = self.base(owner, name, value)
        except ValueError:
            raise refusal(owner, name, self.what, value) from None
        if not self.test(checked):
            raise refusal(owner, name, self.what, value)
        return checked


def describe(constraint) -> str:
    """What ``constraint`` (one, None, or an any-of list) admits, as a message says it."""
    if constraint is None:
        return "None"
    if isinstance(constraint, list):
        return " or ".join(describe(c) for c in constraint)
    what = getattr(constraint, "what", None)
    if not isinstance(what, str):
        raise TypeError(f"a constraint in an any-of list must say what it admits (a 'what' attribute); "
                        f"{constraint!r} does not")
    return what


def check(owner: str, name: str, constraint, value):
    """``value`` checked against ``constraint``: one constraint object, None (the value None), or a list of them
    meaning any one of these (the first that admits the value converts it). A value no alternative admits is
    refused with one message naming them all: ``"<owner>: <name> must be <a or b or c>; got <value>"``."""
    if constraint is None:
        if value is None:
            return None
        raise refusal(owner, name, "None", value)
    if not isinstance(constraint, list):
        return constraint(owner, name, value)
    for alternative in constraint:
        if alternative is None:
            if value is None:
                return None
            continue
        try:
            return alternative(owner, name, value)
        except ValueError:
            continue
    raise refusal(owner, name, describe(constraint), value)


def validate(owner: str, constraints: dict, values: dict) -> dict:
    """Every parameter of ``values`` checked against its declared constraint (:func:`check`): the converted
    values, in the order of ``values``. A parameter without a declaration is a ``TypeError`` (a programming
    error: every user option declares what it may be)."""
    undeclared = [name for name in values if name not in constraints]
    if undeclared:
        raise TypeError(f"{owner}: parameter(s) {undeclared} have no declared constraint")
    return {name: check(owner, name, constraints[name], value) for name, value in values.items()}


@dataclass(frozen=True)
class AtMost:
    """A relation between two options of one backend: ``smaller`` <= ``larger``. Skipped while either is None (a
    default that depends on the data), except that ``larger_default(data)`` stands in for a ``larger`` left None
    when the data are known (e.g. ``lambda data: 20 * data.n``). Called as ``relation(owner, options, data)`` once
    every option has passed its own constraint."""

    smaller: str
    larger: str
    larger_default: Callable | None = None

    @property
    def names(self) -> tuple[str, str]:
        return self.smaller, self.larger

    def __call__(self, owner: str, options: dict, data=None) -> None:
        low, high = options[self.smaller], options[self.larger]
        by_default = high is None and self.larger_default is not None and data is not None
        if by_default:
            high = self.larger_default(data)
        if low is not None and high is not None and low > high:
            raise ValueError(f"{owner}: option {self.smaller!r} ({low!r}) must be <= {self.larger!r} ({high!r}"
                             f"{', its default for these data' if by_default else ''})")


#: the constraints most options have
POSITIVE_INT = Interval(int, 1, None, "left")
NON_NEGATIVE_INT = Interval(int, 0, None, "left")
POSITIVE = Interval(float, 0, None, "neither")
NON_NEGATIVE = Interval(float, 0, None, "left")
PROBABILITY = Interval(float, 0, 1, "neither")
