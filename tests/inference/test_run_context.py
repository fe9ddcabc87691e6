"""The run context (bayeszoo.registry.RunContext): the harness tells a backend who it is and how to seed.

No backend under inference/ writes its own owner label or derives its own seeds; the context's seed helpers are one
scheme for NumPy and JAX (streams and chains differ, the same seed repeats); a backend that takes the context gets
the call's, and a user's backend written before the context (``seed``, ``progress``) still runs.
"""
from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import bayeszoo as bz
from bayeszoo import registry
from bayeszoo.registry import RunContext
from bayeszoo.checks import POSITIVE
from bayeszoo.results import build_fit

INFERENCE = Path(registry.__file__).resolve().parent.parent / "inference"
#: seed derivations a backend must leave to the context
SEEDING = {"SeedSequence", "default_rng", "PRNGKey", "RandomState", "PCG64", "Generator"}
#: fixed generators that are not a run's randomness: (module, function) -> why
FIXED = {("slm/map.py", "_lipschitz"): "a fixed start vector of a power iteration (the same bound for every seed)",
         ("user_samplers.py", "log_density"): "the key of a trace that reads the declaration's shapes"}


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _findings(path: Path, root: Path = INFERENCE) -> list[str]:
    tree = ast.parse(path.read_text())
    where = str(path.relative_to(root))
    found = []

    def visit(node, function):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if isinstance(child, ast.Call):
                name = _called_name(child)
                if name == "owner":
                    found.append(f"{where}:{child.lineno} writes its owner label (owner(...)): use ctx.owner")
                if name in SEEDING and (where, function) not in FIXED:
                    found.append(f"{where}:{child.lineno} derives its own seed ({name}(...)): use the run context's "
                                 f"numpy_rng / chain_rngs / jax_key / chain_keys / chain_seeds")
            visit(child, inner)

    visit(tree, None)
    for node in tree.body:   # module constants naming the backend
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in ("OWNER", "WHO"):
                    found.append(f"{where}:{node.lineno} keeps a constant {target.id}: use ctx.owner")
    return found


def test_no_backend_writes_its_owner_label_or_derives_its_own_seeds():
    modules = sorted(INFERENCE.rglob("*.py"))
    assert len(modules) > 30   # the backends are there to be read
    findings = [f for path in modules for f in _findings(path)]
    assert findings == []


def test_the_scan_finds_what_it_forbids(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import numpy as np\nfrom bayeszoo.registry import owner\nOWNER = owner('rvm', 'x')\n"
                   "def run(seed):\n    return np.random.default_rng(np.random.SeedSequence([seed, 7]))\n"
                   "def legacy(seed):\n    return np.random.RandomState(seed)\n")
    found = _findings(bad, tmp_path)
    assert len(found) == 5 and sum("owner label" in f for f in found) == 1 and sum("OWNER" in f for f in found) == 1
    assert sum("own seed" in f for f in found) == 3


# ---------------------------------------------------------------------------------------------- seeding
def _ctx(seed, family="rvm", backend="gibbs"):
    return RunContext(family=family, backend=backend, kind="mcmc", seed=seed)


def _numbers(rng, n=4):
    return rng.standard_normal(n)


def test_numpy_streams_and_chains_differ_and_repeat():
    ctx = _ctx(11)
    a, b = ctx.chain_rngs(3), _ctx(11).chain_rngs(3)
    draws = [_numbers(r) for r in a]
    assert all(np.array_equal(x, _numbers(r)) for x, r in zip(draws, b))            # the same seed repeats
    assert not np.allclose(draws[0], draws[1]) and not np.allclose(draws[1], draws[2])   # chains differ
    assert not np.allclose(_numbers(ctx.numpy_rng()), _numbers(ctx.numpy_rng(0, 1)))     # streams differ
    assert not np.allclose(_numbers(ctx.numpy_rng(0)), _numbers(ctx.numpy_rng(0, 1)))
    assert not np.allclose(_numbers(_ctx(12).chain_rngs(1)[0]), draws[0])              # another seed, others
    # chain 0 does not depend on how many chains run; the documented scheme, rebuilt by hand
    assert np.array_equal(_numbers(_ctx(11).chain_rngs(1)[0]), draws[0])
    assert np.array_equal(_numbers(np.random.default_rng(np.random.SeedSequence([11, 2]))), draws[2])
    assert np.array_equal(_numbers(np.random.default_rng(11)), _numbers(ctx.numpy_rng()))


def test_chain_seeds_are_integers_per_chain_that_repeat():
    seeds = _ctx(3).chain_seeds(4)
    assert seeds == _ctx(3).chain_seeds(4) and seeds[:2] == _ctx(3).chain_seeds(2)
    assert len(set(seeds)) == 4 and all(isinstance(s, int) and 0 <= s < 2**30 for s in seeds)
    assert seeds != _ctx(4).chain_seeds(4)


def test_jax_streams_and_chains_differ_and_repeat():
    import jax

    ctx = _ctx(5)
    keys = np.asarray(ctx.chain_keys(3))
    assert keys.shape[0] == 3 and np.array_equal(keys, np.asarray(_ctx(5).chain_keys(3)))
    assert len({tuple(k) for k in keys}) == 3
    assert np.array_equal(np.asarray(_ctx(5).chain_keys(1))[0], keys[0])
    assert np.array_equal(keys[2], np.asarray(jax.random.fold_in(jax.random.PRNGKey(5), 2)))   # the scheme
    assert np.array_equal(np.asarray(ctx.jax_key()), np.asarray(jax.random.PRNGKey(5)))
    assert np.array_equal(np.asarray(ctx.jax_key(2)), keys[2])
    streams = {tuple(np.asarray(ctx.jax_key(*s))) for s in [(), (0,), (1,), (0, 1), (1, 0)]}
    assert len(streams) == 5
    assert not np.array_equal(np.asarray(_ctx(6).jax_key()), np.asarray(ctx.jax_key()))


def test_the_owner_label_is_the_one_of_the_messages():
    assert _ctx(0).owner == "RVM backend 'gibbs'"
    assert _ctx(0, family=None, backend="nuts").owner == "backend 'nuts'"


# ----------------------------------------------------------------------------------------------- backends
@pytest.fixture
def tiny():
    return bz.models.RVM(width=3.0), bz.datasets.load("sinc", n=12, n_test=5, seed=0)


def _prior_draws(model, data, chains, draws, rng_of_chain):
    M = model.n_basis(data)
    per_chain = [rng_of_chain(c).standard_normal((draws, 2 * M + 1)) for c in range(chains)]
    x = np.stack(per_chain)
    return {"w": x[..., :M], "log_alpha": x[..., M:2 * M], "log_beta": x[..., -1]}


def test_a_backend_that_takes_the_context_gets_the_calls(restore_registry, tiny):
    model, data = tiny
    seen = []

    def run(model, data, *, draws, tune, chains, ctx, scale):
        seen.append(ctx)
        rngs = ctx.chain_rngs(chains)
        post = _prior_draws(model, data, chains, draws, lambda c: rngs[c])
        return build_fit(model, data, ctx.backend, ctx.kind, {k: scale * v for k, v in post.items()},
                         timing={"sample": 0.0}, ctx=ctx)

    bz.register_backend("ctx_draws", run, kind="approximation", family="rvm",
                        options={"scale": registry.Option(1.0, "scale of the draws", POSITIVE)})
    fit = bz.fit(model, data, "ctx_draws", draws=6, chains=2, seed=9, progress=False, scale=2.0)
    ctx, = seen
    assert (ctx.family, ctx.backend, ctx.kind, ctx.seed, ctx.progress) == ("rvm", "ctx_draws", "approximation", 9,
                                                                           False)
    assert ctx.owner == "RVM backend 'ctx_draws'" and ctx.settings["scale"] == 2.0
    assert fit.info["seed"] == 9 and fit.info["settings"]["scale"] == 2.0
    assert fit.info["provenance"]["data"] == data.fingerprint()
    # the draws are the context's: chain c from SeedSequence([9, c])
    M = model.n_basis(data)
    first = 2.0 * np.random.default_rng(np.random.SeedSequence([9, 1])).standard_normal((6, 2 * M + 1))
    assert np.allclose(fit.idata.posterior["w"].values[1], first[:, :M])


def test_a_backend_written_before_the_context_still_runs(restore_registry, tiny):
    model, data = tiny
    seen = []

    def run(model, data, *, draws, tune, chains, seed, progress):
        seen.append((seed, progress))
        post = _prior_draws(model, data, chains, draws, lambda c: np.random.default_rng([seed, c]))
        return build_fit(model, data, "old_draws", "approximation", post, timing={"sample": 0.0})

    backend = bz.register_backend("old_draws", run, kind="approximation", family="rvm")
    assert backend.takes_context is False
    fit = bz.fit(model, data, "old_draws", draws=5, chains=2, seed=4, progress=False)
    again = bz.fit(model, data, "old_draws", draws=5, chains=2, seed=4, progress=False)
    assert seen == [(4, False), (4, False)]
    assert np.array_equal(fit.idata.posterior["w"].values, again.idata.posterior["w"].values)
    # bz.fit records the call in the Fit the backend built without it
    assert fit.seed_used == 4 and fit.info["settings"]["draws"] == 5
    assert fit.info["provenance"]["data"] == data.fingerprint()
