"""What the engines on a model's declarations share (:mod:`~bayeszoo.inference.pymc_engines`,
:mod:`~bayeszoo.inference.numpyro_engines`, :mod:`~bayeszoo.inference.blackjax_engines`): their working memory, the
NumPyro declaration with its data as traced arguments, the NUTS options, and the convergence info of their runs.
"""
from __future__ import annotations

import functools
import warnings

import numpy as np

from bayeszoo.checks import POSITIVE_INT, Interval
from bayeszoo.memory_guard import Need, dense, values_per_draw
from bayeszoo.registry import Option

#: copies of a declaration's dense arrays alive at a fit's peak (peak RSS growth of RVM fits at n = 1500 and 2500 and
#: a GPC fit at n = 2000, 2026-11-26): PyMC 3.2 to 4.9 (the model's arrays, their temporaries, PyTensor's
#: constants); JAX 6.6 above a fixed few hundred MB (XLA embeds the arrays in the program and copies them as it
#: compiles)
PYMC_COPIES, JAX_COPIES = 5, 7


# ------------------------------------------------------------------------------------------------ memory
def declaration_memory(copies: float, *, full_rank: bool = False):
    """The ``memory`` of a backend that runs a family's declaration (``bayeszoo.memory_guard``): ``copies`` of each
    dense array the declaration builds (``model.declaration_memory``); ``full_rank`` adds a dense covariance over
    the draw's values with its gradient and the optimiser's two moments."""
    def need(model, data, options) -> Need:
        parts = {f"{what}, {copies:g} copies": int(copies * size)
                 for what, size in model.declaration_memory(data).items()}
        if full_rank:
            P = values_per_draw(model, data)
            parts[f"full-rank covariance factor ({P:,} x {P:,}), its gradient and 2 optimiser moments"] = dense(P, P, 4)
        return Need(parts, "use one of the family's own backends, which hold no declaration (bz.backends(model)), "
                           "or fit a subset of the data")
    return need


# -------------------------------------------------------------------------------- the NumPyro declaration
def numpyro_declaration(model, data):
    """``(fn, arrays)``: the model's NumPyro function and the data it takes as keyword arguments.

    A declaration returned as ``functools.partial(fn, *args, **kwargs)`` names its data: the arrays among the
    arguments (and dicts of arrays) come back in ``arrays``, to be passed to ``fn`` as traced arguments, so that
    one compilation serves every data set of the same shapes (CV folds, the simulations of ``bz.sbc``); arrays in
    a closure are constants of the compiled program, compiled again for every data set. The other arguments
    stay bound. A function that cannot take its data traced (NumPy called on an argument, a shape read from its
    values) keeps it bound too, as does any other callable."""
    fn = model.numpyro_model(data)
    if not isinstance(fn, functools.partial):
        return fn, {}
    positional = {f"arg{i}": a for i, a in enumerate(fn.args) if _is_data(a)}
    arrays = {**positional, **{k: v for k, v in fn.keywords.items() if _is_data(v)}}
    if not arrays:
        return fn, {}
    static = {k: v for k, v in fn.keywords.items() if k not in arrays}

    def traced(**given):
        args = [given.pop(f"arg{i}") if f"arg{i}" in positional else a for i, a in enumerate(fn.args)]
        return fn.func(*args, **static, **given)

    if not _traces(traced, arrays):
        return fn, {}
    return traced, arrays


def _is_data(value) -> bool:
    if isinstance(value, dict):
        return bool(value) and all(_is_data(v) for v in value.values())
    return isinstance(value, np.ndarray) and value.dtype.kind in "biuf"


def _traces(fn, arrays: dict) -> bool:
    """Whether ``fn(**arrays)`` runs with its arrays traced by JAX (abstract evaluation: no computation)."""
    import jax
    from numpyro import handlers
    from numpyro.infer.initialization import init_to_uniform

    def run(given):   # substituted as NumPyro initialises: an improper site cannot be sampled from its prior
        seeded = handlers.substitute(handlers.seed(fn, 0), substitute_fn=init_to_uniform)
        return {k: site["value"] for k, site in handlers.trace(seeded).get_trace(**given).items()
                if site["type"] == "sample"}

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            jax.eval_shape(run, arrays)
    except Exception:   # NumPy on a tracer, a traced value used as a shape: the bound arrays will do
        return False
    return True


# ------------------------------------------------------------------------------------------ NUTS options
def target_accept(default: float) -> Option:
    """The ``target_accept`` option of a NUTS engine, at its library's own default."""
    return Option(default, "target mean acceptance probability of the step-size adaptation, in (0, 1)",
                  Interval(float, 0, 1, "neither"))


MAX_TREE_DEPTH = Option(10, "largest tree depth of a NUTS trajectory (2^depth leapfrog steps)", POSITIVE_INT)


# ------------------------------------------------------------------------------------- what a run reports
def convergence_info(diverging: np.ndarray) -> dict:
    n_div = int(np.sum(diverging))
    warn = [f"{n_div} divergent transitions after warm-up"] if n_div else []
    return {"divergences": n_div, "warnings": warn}


def stochastic_vi_info(losses: np.ndarray, *, n_grad: int, learning_rate: float) -> dict:
    """The info of a stochastic-gradient VI run (ADVI, BlackJAX mean-field VI): it has converged when the mean loss
    of the last tenth of the steps is within 1 % of the tenth before it."""
    n_iter = losses.size
    tenth = max(1, n_iter // 10)
    tail = losses[-tenth:]
    head = losses[-2 * tenth:-tenth] if n_iter >= 20 else tail
    rel_change = abs(np.mean(tail) - np.mean(head)) / max(abs(np.mean(tail)), 1e-12)
    converged = bool(rel_change < 1e-2)
    return {"n_grad": int(n_grad), "iterations": n_iter, "converged": converged, "objective": "elbo",
            "final_loss": float(np.mean(tail)), "learning_rate": learning_rate,
            "warnings": [] if converged else [f"mean loss still changing by {rel_change:.2%} over the last 10%"]}
