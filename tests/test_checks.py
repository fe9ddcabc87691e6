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


# ------------------------------------------------------------------------------- the API's arguments
class _Unknown:
    """A value no constraint admits, shown the same in every message."""

    def __repr__(self):
        return "<unknown>"


def _api_calls():
    """(owner, the function, its declaration, the arguments a good call takes besides the model and data)."""
    from bayeszoo import api
    return [("bz.fit", api.fit, api.FIT_PARAMETERS, {"backend": "em"}),
            ("bz.compare", api.compare, api.COMPARE_PARAMETERS, {"backends": ["em"], "reference": None}),
            ("bz.cross_validate", api.cross_validate, api.CROSS_VALIDATE_PARAMETERS, {"backend": "em", "folds": 2})]


@pytest.mark.parametrize("owner,function,declared,good", _api_calls(), ids=lambda v: v if isinstance(v, str) else "")
def test_the_api_declares_every_argument_that_is_not_the_problem_itself(owner, function, declared, good):
    import inspect
    parameters = inspect.signature(function).parameters
    own = {name for name, p in parameters.items() if p.kind is not inspect.Parameter.VAR_KEYWORD}
    assert set(declared) == own - {"model", "data"}, owner
    for name in declared:   # every default is admitted by its own declaration
        default = parameters[name].default
        assert checks.check(owner, name, declared[name], default) == default or name == "targets"


def _api_arguments():
    return [(owner, name) for owner, _, declared, _ in _api_calls() for name in declared]


@pytest.mark.parametrize("owner,name", _api_arguments())
def test_every_api_argument_is_refused_in_the_one_message_format_before_anything_runs(owner, name, monkeypatch):
    import bayeszoo as bz
    from bayeszoo import registry
    function, good = next((f, g) for o, f, _, g in _api_calls() if o == owner)
    ran = []
    monkeypatch.setattr(registry.Backend, "call", lambda *args, **kwargs: ran.append(args))
    data = bz.datasets.load("sinc", n=12, n_test=5, seed=0)
    with pytest.raises(ValueError, match=rf"^{re.escape(owner)}: {name} must be .+; got <unknown>"):
        function(bz.models.RVM(), data, **{**good, "progress": False, name: _Unknown()})
    assert not ran


@pytest.mark.parametrize("call,message", [
    (dict(backends=["em", "em"]), "backends must be None or a non-empty list of distinct backend names; got"),
    (dict(backends=[]), "backends must be None or a non-empty list of distinct backend names; got []"),
    (dict(backends="em"), "backends must be None or a non-empty list of distinct backend names; got 'em'"),
    (dict(options={"em": 3}), "options must be None or a dict mapping backend names to dicts of options; got"),
    (dict(draws=0), "draws must be an integer >= 1 or None; got 0"),
    (dict(tune=-1), "tune must be an integer >= 0 or None; got -1"),
    (dict(reference_draws=1.5), "reference_draws must be an integer >= 1 or None; got 1.5"),
    (dict(progress=1), "progress must be True or False; got 1"),
    (dict(options={"em": {"draws": 0}}), "bz.compare: options['em']: draws must be an integer >= 1 or None; got 0"),
    (dict(options={"fast": {}}), "bz.compare: options are given for backends not in the grid: ['fast']"),
])
def test_compare_refuses_a_bad_grid_naming_the_argument(call, message, monkeypatch):
    import bayeszoo as bz
    from bayeszoo import registry
    ran = []
    monkeypatch.setattr(registry.Backend, "call", lambda *args, **kwargs: ran.append(args))
    data = bz.datasets.load("sinc", n=12, n_test=5, seed=0)
    with pytest.raises(ValueError, match=re.escape(message)):
        bz.compare(bz.models.RVM(), data, **{"backends": ["em"], "reference": None, "progress": False, **call})
    assert not ran


def test_cross_validate_refuses_more_folds_than_training_points():
    import bayeszoo as bz
    data = bz.datasets.load("sinc", n=12, n_test=5, seed=0)
    with pytest.raises(ValueError, match=r"^bz.cross_validate: folds must be at most the 12 training points .*; "
                                         r"got 13$"):
        bz.cross_validate(bz.models.RVM(), data, "em", folds=13, progress=False)
    with pytest.raises(ValueError, match=r"^bz.cross_validate: folds must be an integer >= 2; got 1$"):
        bz.cross_validate(bz.models.RVM(), data, "em", folds=1, progress=False)


def test_the_api_checks_its_arguments_by_declaration_only():
    import inspect

    from bayeszoo import api
    source = inspect.getsource(api)
    for hand_check in ("_check_positive_int", "_check_counts", "checks.number(", "checks.seed(", "checks.flag("):
        assert hand_check not in source, hand_check


# ------------------------------------------------------------------------------- the loaders' options
def _loader_options():
    import bayeszoo as bz
    return [(name, option) for name in bz.datasets.names() for option in bz.datasets.constraints(name)]


@pytest.mark.parametrize("name,option", _loader_options())
def test_every_declared_loader_option_is_refused_in_the_one_message_format(name, option):
    import bayeszoo as bz
    with pytest.raises(ValueError, match=rf"^dataset '{name}': {option} must be .+; got <unknown>$"):
        bz.datasets.load(name, **{option: _Unknown()})


@pytest.mark.parametrize("name", sorted({name for name, _ in _loader_options()}))
def test_every_loader_declares_each_number_flag_or_name_option_and_admits_its_default(name):
    import inspect

    import bayeszoo as bz
    parameters = inspect.signature(bz.datasets.loader(name)).parameters
    declared = bz.datasets.constraints(name)
    assert {key for key, p in parameters.items() if isinstance(p.default, (bool, int, float, str))} <= set(declared)
    for option, constraint in declared.items():
        checks.check(f"dataset '{name}'", option, constraint, parameters[option].default)


@pytest.mark.parametrize("name,options,message", [
    ("sinc", dict(n=0), "n must be an integer >= 1; got 0"),
    ("sinc", dict(noise_sd=-0.1), "noise_sd must be a finite number >= 0; got -0.1"),
    ("doppler2d", dict(train_fraction=0.0), "train_fraction must be a finite number > 0; got 0.0"),
    ("bid_blocks", dict(snr_db=400.0), "snr_db must be a finite number <= 300.0; got 400.0"),
    ("bid_blocks", dict(psf="box"), "psf must be one of ('gaussian', 'uniform', 'motion'); got 'box'"),
    ("cameraman", dict(crop=1), "crop must be None or an integer >= 2 or a (row, col, side) triple of integers >= 0; "
                                "got 1"),
    ("cameraman", dict(crop=(0, 1.5, 8)), "crop must be None or an integer >= 2 or a (row, col, side) triple"),
    ("sinc2d_image", dict(size=2), "size must be an integer >= 3; got 2"),
    ("neal3", dict(n_test=-1), "n_test must be an integer >= 0; got -1"),
    ("mkl_sources", dict(n=2), "n must be an integer >= 3; got 2"),
    ("mfeat_standin", dict(n_per_class=81), "n_per_class must be an integer <= 80; got 81"),
    ("slm_signal", dict(kind="noise"), "kind must be one of"),
    ("slm_image", dict(size=4, m=33), "m must be at most 2 size**2 = 32 for size 4; got 33"),
    ("slm_mri", dict(n_central=0), "n_central must be an integer >= 1; got 0"),
])
def test_the_loaders_refuse_a_range_by_their_declaration(name, options, message):
    import bayeszoo as bz
    with pytest.raises(ValueError, match=rf"^dataset '{name}': {re.escape(message)}"):
        bz.datasets.load(name, **options)


def test_a_loader_called_directly_checks_its_declaration_too():
    from bayeszoo.datasets import synthetic
    with pytest.raises(ValueError, match=r"^dataset 'sinc': n must be an integer >= 1; got 0$"):
        synthetic.sinc(n=0)


def test_the_loaders_check_their_options_by_declaration_only():
    import inspect

    import bayeszoo as bz
    for name in bz.datasets.names():
        source = inspect.getsource(bz.datasets.loader(name).__wrapped__)
        body = source[source.index("def "):]   # past the decorator, which holds the declaration
        for hand_check in ("checks.number(", "checks.positive(", "checks.non_negative(", "checks.choice(",
                           "checks.seed(", "_rows(", "_count("):
            assert hand_check not in body, (name, hand_check)
