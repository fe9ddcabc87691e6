"""``bayeszoo.checks``: the shared validators, directly (the backends' own tests cover their use)."""
import re

import numpy as np
import pytest

from bayeszoo import checks


def test_number_sequence_returns_a_tuple_of_checked_floats():
    assert checks.number_sequence("X", "t", [1, 2.5]) == (1.0, 2.5)
    assert checks.number_sequence("X", "t", np.array([3.0, 4.0]), low=1) == (3.0, 4.0)
    assert checks.number_sequence("X", "t", 4, allow_scalar=True) == (4.0,)


@pytest.mark.parametrize("value,kwargs,message", [
    ((), {}, "non-empty sequence of numbers"),
    (4.0, {}, "non-empty sequence of numbers"),                   # a scalar only with allow_scalar
    (True, {"allow_scalar": True}, "non-empty sequence of numbers or a number"),
    ("12", {"allow_scalar": True}, "non-empty sequence"),
    (np.ones((2, 2)), {}, "non-empty sequence"),
    ((1.0, float("nan")), {}, "finite number"),
    ((2.0, 0.5), {"low": 1, "low_inclusive": True}, ">= 1"),
])
def test_number_sequence_refuses_bad_input_naming_the_option(value, kwargs, message):
    with pytest.raises(ValueError, match=f"X: t must be a .*{message}"):
        checks.number_sequence("X", "t", value, **kwargs)


# ------------------------------------------------------------------------------- declarative constraints
@pytest.mark.parametrize("constraint,good,expected,bad,message", [
    (checks.Interval(int, 1, None, "left"), 3, 3, 0, "an integer >= 1; got 0"),
    (checks.Interval(int, 1, None, "left"), 3, 3, 2.0, "an integer; got 2.0"),
    (checks.Interval(float, 0, 1, "neither"), 0.5, 0.5, 1.0, "a finite number < 1; got 1.0"),
    (checks.Interval(float, 0, None, "neither", none=True), None, None, -1.0, "a finite number > 0; got -1.0"),
    (checks.OneOf(("a", "b")), "b", "b", "c", "one of ('a', 'b'); got 'c'"),
    (checks.Flag(), True, True, 1, "True or False; got 1"),
    (checks.Numbers(checks.POSITIVE, length=2), [1, 2], (1.0, 2.0), [1, 2, 3], "a sequence of 2 numbers"),
    (checks.Numbers(checks.POSITIVE, scalar=True), 4, (4.0,), [1, -1], "a finite number > 0; got -1"),
    (checks.Array(ndim=2), [[1.0, 2.0]], np.array([[1.0, 2.0]]), [1.0, 2.0], "must have 2 dimension"),
    (checks.Text(none=True), "log.txt", "log.txt", 3, "a string or None; got 3"),
])
def test_constraints_return_the_value_or_name_what_it_must_be(constraint, good, expected, bad, message):
    np.testing.assert_equal(constraint("X backend 'b'", "option 'o'", good), expected)
    with pytest.raises(ValueError, match=rf"^X backend 'b': option 'o' .*{re.escape(message)}"):
        constraint("X backend 'b'", "option 'o'", bad)


@pytest.mark.parametrize("value", [["1.5", "2"], [1 + 2j, 3.0], [[1.0, 2.0], [3.0]], {"a": 1.0}, [None, 1.0]])
def test_finite_array_refuses_what_is_not_an_array_of_real_numbers(value):
    with pytest.raises(ValueError, match="X: a must be an array of real numbers"):
        checks.finite_array("X", "a", value)


def test_finite_array_takes_numbers_of_any_real_kind():
    import pandas as pd

    for value in ([1, 2.5], np.array([1, 2], dtype=np.int32), pd.Series([1, 2], dtype=object), [True, False]):
        assert checks.finite_array("X", "a", value).dtype == float


# ------------------------------------------------------------------------------- any-of lists and validate
WIDTH = [checks.POSITIVE, checks.OneOf(("scale", "evidence")), None]
WIDTH_MESSAGE = r"X: width must be a finite number > 0 or one of \('scale', 'evidence'\) or None; got "


@pytest.mark.parametrize("value,expected", [(2, 2.0), (0.5, 0.5), ("scale", "scale"), ("evidence", "evidence"),
                                            (np.str_("scale"), "scale"), (None, None)])
def test_an_any_of_list_admits_each_alternative_converted_by_it(value, expected):
    got = checks.check("X", "width", WIDTH, value)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize("value,shown", [(-1, "-1"), (0.0, "0.0"), ("auto", "'auto'"), ("Scale", "'Scale'"),
                                         (True, "True"), ([1.0], r"\[1.0\]"), (np.nan, "nan")])
def test_an_any_of_list_refuses_naming_every_alternative(value, shown):
    with pytest.raises(ValueError, match=f"^{WIDTH_MESSAGE}{shown}$"):
        checks.check("X", "width", WIDTH, value)


def test_one_of_refuses_bools_and_arrays_and_returns_the_declared_choice():
    assert checks.check("X", "degree", checks.OneOf((1, 2, 3)), 2.0) == 2
    assert type(checks.check("X", "degree", checks.OneOf((1, 2, 3)), 2.0)) is int
    for bad in (True, np.array([2]), np.array(["a"])):
        with pytest.raises(ValueError, match="X: k must be one of"):
            checks.check("X", "k", checks.OneOf((1, 2, "a")), bad)


def test_where_adds_a_condition_the_basic_constraints_do_not_spell():
    odd = checks.Where(checks.POSITIVE_INT, lambda side: side % 2 == 1, "an odd integer >= 1")
    assert checks.check("X", "side", [None, odd], 3) == 3
    for bad in (4, 0, 3.0):
        with pytest.raises(ValueError, match=rf"^X: side must be None or an odd integer >= 1; got {bad}$"):
            checks.check("X", "side", [None, odd], bad)


def test_validate_returns_the_converted_values_and_refuses_the_first_bad_one():
    declared = {"n": checks.POSITIVE_INT, "width": WIDTH, "flag": checks.Flag()}
    assert checks.validate("X", declared, {"n": 3, "width": 1, "flag": np.bool_(True)}) == \
        {"n": 3, "width": 1.0, "flag": True}
    with pytest.raises(ValueError, match="^X: flag must be True or False; got 1$"):
        checks.validate("X", declared, {"n": 3, "width": 1, "flag": 1})
    with pytest.raises(TypeError, match=r"X: parameter\(s\) \['other'\] have no declared constraint"):
        checks.validate("X", declared, {"n": 3, "other": 1})


def test_a_constraint_without_a_description_cannot_join_an_any_of_list():
    with pytest.raises(TypeError, match="must say what it admits"):
        checks.describe([checks.POSITIVE, lambda owner, name, value: value])


# ------------------------------------------------------------------------------- the declarations that use them
def _model_classes():
    from bayeszoo.models import FAMILIES
    return sorted(FAMILIES.values(), key=lambda cls: cls.__name__)


@pytest.mark.parametrize("cls", _model_classes(), ids=lambda cls: cls.__name__)
def test_every_model_option_has_a_declared_constraint_that_admits_its_default(cls):
    from dataclasses import fields
    names = [f.name for f in fields(cls)]
    assert sorted(cls._parameter_constraints) == sorted(names)
    model = cls()
    for name in names:
        checks.check(cls.__name__, name, cls._parameter_constraints[name], getattr(model, name))


@pytest.mark.parametrize("cls", _model_classes(), ids=lambda cls: cls.__name__)
def test_every_model_option_is_refused_in_the_one_message_format(cls):
    from dataclasses import fields

    class Unknown:
        def __repr__(self):
            return "<unknown>"

    for f in fields(cls):
        with pytest.raises(ValueError, match=rf"^{cls.__name__}: {f.name} must be .+; got <unknown>$"):
            cls(**{f.name: Unknown()})


def test_a_model_option_added_without_a_constraint_is_refused():
    from dataclasses import dataclass

    from bayeszoo.models import RVM

    @dataclass
    class WiderRVM(RVM):
        extra: int = 1

    with pytest.raises(TypeError, match=r"WiderRVM: parameter\(s\) \['extra'\] have no declared constraint"):
        WiderRVM()


def test_models_store_their_options_as_the_constraints_convert_them():
    from bayeszoo.models import ARVM, BID, GPC, SLM
    assert ARVM(width_range=[0.01, 1]).width_range == (0.01, 1.0)
    assert GPC(degree=3.0).degree == 3 and type(GPC(degree=3.0).degree) is int
    assert SLM(potential=np.str_("student")).spec()["potential"] == "student"
    assert BID(sigma_phi2=2) == BID(sigma_phi2=2.0)
    with pytest.raises(ValueError, match=r"^ARVM: width_range must be a pair \(low, high\) with 0 < low < high; "):
        ARVM(width_range=(1.0, 0.5))
    with pytest.raises(ValueError, match="^BID: psf_size must be None or an odd integer >= 1; got 4$"):
        BID(psf_size=4)


@pytest.mark.parametrize("name", ["crabs", "boston", "iris"])   # GPC, real-data and pMKL loaders
def test_the_loaders_share_one_declaration_of_the_split_options(name):
    import bayeszoo as bz
    from bayeszoo.datasets.shipped import SPLIT_OPTIONS
    assert {"seed", "test_fraction", "standardize"} <= set(SPLIT_OPTIONS)
    with pytest.raises(ValueError, match=rf"^dataset '{name}': test_fraction must be None or a finite number in "
                                         rf"\(0, 1\); got 1.5$"):
        bz.datasets.load(name, test_fraction=1.5)
    with pytest.raises(ValueError, match=rf"^dataset '{name}': seed must be an integer >= 0; got -1$"):
        bz.datasets.load(name, seed=-1)
    with pytest.raises(ValueError, match=rf"^dataset '{name}': standardize must be True or False; got 1$"):
        bz.datasets.load(name, standardize=1)


def test_sequential_design_declares_every_argument_that_is_not_the_problem_itself():
    import inspect

    from bayeszoo import experimental_design as design
    arguments = set(inspect.signature(design.sequential_design).parameters)
    assert set(design.PARAMETERS) == arguments - {"model", "data", "measure", "candidates"}
    with pytest.raises(ValueError, match="^bz.design: options must be a dict of the backend's options"):
        design.check_options("bz.design", [("max_iter", 3)])


def test_the_sklearn_estimators_declare_every_argument_with_the_models_constraints():
    import inspect

    from bayeszoo import sklearn as bz_sklearn
    for name in bz_sklearn.__all__:
        est = getattr(bz_sklearn, name)
        assert set(est._parameter_constraints) == set(inspect.signature(est).parameters), name
        for option in est._model_params:
            assert est._parameter_constraints[option] is est._model_class._parameter_constraints[option]
    with pytest.raises(ValueError, match=r"^RelevanceVectorRegressor: seed must be None or an integer in "
                                         r"\[0, 2\*\*32\) or a NumPy random generator; got -1$"):
        bz_sklearn.RelevanceVectorRegressor(seed=-1)._validate_params()


def test_a_backend_option_may_declare_an_any_of_list():
    from bayeszoo import registry
    from bayeszoo.models import RVM
    step = registry.Option("auto", "step size, or 'auto'", [checks.POSITIVE, checks.OneOf(("auto",))])
    backend = registry.Backend(name="probe", run=lambda *a, **k: None, kind="approximation", family="rvm",
                               options={"step": step})
    assert backend.resolve({}, RVM(), None) == {"step": "auto"}
    assert backend.resolve({"step": 2}, RVM(), None) == {"step": 2.0}
    with pytest.raises(ValueError, match=r"^RVM backend 'probe': option 'step' must be a finite number > 0 or "
                                         r"'auto'; got -2$"):
        backend.resolve({"step": -2}, RVM(), None)
