"""posteriordb's hidden Markov models in PyMC and NumPyro: ``hmm_example``, ``hmm_drive_0``, ``hmm_drive_1``.

Two hidden states, marginalised by the forward algorithm as the Stan programs do: ``gamma[1, k]`` is the first
observation's emission log density (no initial-state distribution, as in Stan), then
``gamma[t, k] = log_sum_exp_j(gamma[t - 1, j] + log theta[j, k]) + emission(t, k)`` and the likelihood is
``log_sum_exp(gamma[N])``. The series is one observed variable whose density is that likelihood (a
``pm.CustomDist`` in PyMC, a :class:`HiddenMarkov` distribution in NumPyro); the drive models observe the pairs
(1 / speed, hoop distance) as one series ``u_v`` of shape (N, 2).

Stan's ``positive_ordered`` is PyMC's ``Ordered(positive=True)`` transform (``log(diff(x, prepend=0))``);
NumPyro unconstrains the same vectors another way (the log of an ordered vector), which changes its sampler's
geometry, not the posterior.
"""
from __future__ import annotations

import functools

import numpy as np

from bayeszoo.catalogue.posteriordb.programs import Program, register


# ---- the forward algorithm -------------------------------------------------------------------------------------

def forward_pytensor(log_emission, log_theta):
    """The forward algorithm: ``log p(y[t] | y[:t])`` for each t (their sum is Stan's ``log_sum_exp(gamma[N])``).

    ``log_emission`` (N, K) is each observation's log density in each state, ``log_theta`` (K, K) the log
    transition probabilities, ``[j, k]`` from state j to state k. The first step's density is
    ``log_sum_exp(gamma[1])`` (no initial-state distribution, as in Stan).

    Written without a loop: ``exp(gamma[t])`` is the first row of the product ``M[1] M[2] ... M[t]``, where
    ``M[1]`` repeats the first observation's emissions in every row and ``M[t][j, k] = theta[j, k] e[t, k]``, and
    all N prefix products are made in ceil(log2 N) rounds of batched K x K products (Hillis and Steele's scan:
    round r multiplies each product by the one 2^r steps before it). A ``pytensor.scan`` calls its body's ops one
    at a time at each of the N steps, forward and again in the gradient; on hmm_example's 100 steps that was ten
    times the cost per gradient. Every product is kept normalised (its entries sum to 1) with its log scale
    beside it, so nothing underflows, and each emission row is scaled by its largest entry before the
    exponential.
    """
    import pytensor.tensor as pt

    log_emission, log_theta = pt.as_tensor(log_emission), pt.as_tensor(log_theta)
    n = log_emission.type.shape[0]
    if n is None:
        raise ValueError("forward_pytensor: the series' length must be known when the graph is built (the rounds "
                         "of products are unrolled); pass the observations as a numpy array")
    scale = pt.max(log_emission, axis=1)
    emission = pt.exp(log_emission - scale[:, None])                          # (N, K), largest 1 in each row
    steps = pt.exp(log_theta)[None, :, :] * emission[1:, None, :]             # M[2..N]
    first = pt.ones_like(log_theta)[None, :, :] * emission[:1, None, :]       # M[1]
    products = pt.concatenate([first, steps])
    log_scale = scale + pt.log(products.sum(axis=(1, 2)))
    products = products / products.sum(axis=(1, 2), keepdims=True)
    shift = 1
    while shift < n:
        both = (products[:-shift, :, :, None] * products[shift:, None, :, :]).sum(axis=2)
        total = both.sum(axis=(1, 2))
        products = pt.concatenate([products[:shift], both / total[:, None, None]])
        log_scale = pt.concatenate([log_scale[:shift], log_scale[:-shift] + log_scale[shift:] + pt.log(total)])
        shift *= 2
    # log p(y[1..t]): the scale plus the log of the first row's sum; its increments are the conditionals
    joint = log_scale + pt.log(products[:, 0, :].sum(axis=1))
    return pt.concatenate([joint[:1], joint[1:] - joint[:-1]])


def forward_jax(log_emission, log_theta):
    """:func:`forward_pytensor` in JAX, in logs (XLA compiles the log-sum-exp into one loop body, and the two
    ports' agreement then checks one formulation against the other)."""
    import jax
    import jax.numpy as jnp
    from jax.scipy.special import logsumexp

    def step(filtered, log_e):
        gamma = log_e + logsumexp(filtered[:, None] + log_theta, axis=0)
        log_c = logsumexp(gamma)
        return gamma - log_c, log_c

    first = logsumexp(log_emission[0])
    _, later = jax.lax.scan(step, log_emission[0] - first, log_emission[1:])
    return jnp.concatenate([jnp.atleast_1d(first), later])


@functools.cache
def _hidden_markov_class():
    import numpyro.distributions as dist
    from numpyro.distributions import constraints

    class HiddenMarkov(dist.Distribution):
        """A series from a hidden Markov chain with the states marginalised by the forward algorithm; the
        density of observation t is its density given the earlier ones (:func:`forward_jax`).

        log_theta : (K, K) log transition probabilities, ``[j, k]`` from state j to state k.
        emission : the K emission distributions, a distribution of batch shape (K,).
        length : the series' length N (the batch shape is (N,), the event shape the emission's).
        """

        arg_constraints = {"log_theta": constraints.real}
        support = constraints.real

        def __init__(self, log_theta, emission, length: int, *, validate_args=None):
            self.log_theta, self.emission = log_theta, emission
            super().__init__(batch_shape=(int(length),), event_shape=emission.event_shape,
                             validate_args=validate_args)

        def log_prob(self, value):
            # (N, K): each observation under each state's emission
            log_emission = self.emission.log_prob(value[:, None])
            return forward_jax(log_emission, self.log_theta)

    return HiddenMarkov


def HiddenMarkov(log_theta, emission, length: int):
    """A NumPyro distribution of a hidden Markov series (the class is made on first use: NumPyro is imported
    lazily)."""
    return _hidden_markov_class()(log_theta, emission, length)


# ---- the programs ----------------------------------------------------------------------------------------------

def _two_states(data) -> int:
    K = int(data["K"])
    if K != 2:
        raise ValueError(f"posteriordb's HMM programs are written for two states (theta[1], theta[2]); the data "
                         f"have K = {K}: pass data with K = 2")
    return K


def _unbatched(param, core_ndim: int):
    """A ``pm.CustomDist`` parameter without the length-1 batch axes PyMC adds in front (the series' steps are
    its batch, but the parameters are the chain's, shared by every step)."""
    return param.reshape(param.shape[-core_ndim:]) if param.ndim > core_ndim else param


def _hmm_example_pymc(data):
    import pymc as pm
    import pytensor.tensor as pt
    from pymc.distributions.transforms import Ordered

    K, y = _two_states(data), np.asarray(data["y"], dtype=float)

    def logp(value, log_theta, mu):
        log_theta, mu = _unbatched(log_theta, 2), _unbatched(mu, 1)
        return forward_pytensor(pm.logp(pm.Normal.dist(mu, 1.0), value[:, None]), log_theta)

    with pm.Model() as model:
        theta1 = pm.Dirichlet("theta1", np.ones(K))
        theta2 = pm.Dirichlet("theta2", np.ones(K))
        mu = pm.Normal("mu", [3.0, 10.0], 1.0, transform=Ordered(positive=True))
        pm.CustomDist("y", pt.log(pt.stack([theta1, theta2])), mu, logp=logp, signature="(k,k),(k)->()",
                      observed=y)
    return model


def _hmm_example_numpyro(data):
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from numpyro.distributions import constraints

    K, y = _two_states(data), np.asarray(data["y"], dtype=float)
    support = constraints.positive_ordered_vector

    def model():
        theta1 = numpyro.sample("theta1", dist.Dirichlet(jnp.ones(K)))
        theta2 = numpyro.sample("theta2", dist.Dirichlet(jnp.ones(K)))
        mu = numpyro.sample("mu", dist.ImproperUniform(support, (), (K,)))
        numpyro.factor("mu_prior", dist.Normal(jnp.array([3.0, 10.0]), 1).log_prob(mu).sum())
        numpyro.sample("y", HiddenMarkov(jnp.log(jnp.stack([theta1, theta2])), dist.Normal(mu, 1), len(y)), obs=y)

    return model


def _drive_series(data) -> np.ndarray:
    """The pairs (u, v) = (1 / speed, hoop distance), one row per time step."""
    return np.column_stack([np.asarray(data["u"], dtype=float), np.asarray(data["v"], dtype=float)])


def _drive_pymc(data, positive: bool, emission, *scales):
    """hmm_drive_0 (``positive_ordered`` emission parameters) and hmm_drive_1 (``ordered``).
    ``emission(params, *scales)`` is the PyMC distribution of (u, v) in each state, ``params`` (K, 2) holding
    (phi[k], lambda[k]) in row k."""
    import pymc as pm
    import pytensor.tensor as pt
    from pymc.distributions.transforms import Ordered

    _two_states(data)
    alpha = np.asarray(data["alpha"], dtype=float)

    def logp(value, log_theta, params, *scales):
        log_theta, params, scales = _unbatched(log_theta, 2), _unbatched(params, 2), [_unbatched(s, 1) for s in scales]
        return forward_pytensor(pm.logp(emission(params, *scales), value[:, None, :]).sum(-1), log_theta)

    with pm.Model() as model:
        theta1 = pm.Dirichlet("theta1", alpha[0])
        theta2 = pm.Dirichlet("theta2", alpha[1])
        # a start inside the constraint (the priors' means [0, 3] are not positive ordered)
        start = {"initval": np.array([1.0, 3.0])} if positive else {}
        phi = pm.Normal("phi", [0.0, 3.0], 1.0, transform=Ordered(positive=positive), **start)
        lam = pm.Normal("lambda", [0.0, 3.0], 1.0, transform=Ordered(positive=positive), **start)
        signature = "(k,k),(k,d)" + ",(d)" * len(scales) + "->(d)"
        pm.CustomDist("u_v", pt.log(pt.stack([theta1, theta2])), pt.stack([phi, lam], axis=-1), *scales,
                      logp=logp, signature=signature, observed=_drive_series(data))
    return model


def _drive_numpyro(data, positive: bool, emission, *scales):
    """:func:`_drive_pymc` in NumPyro; ``emission(params, *scales)`` is the NumPyro distribution of (u, v) in
    each state (batch shape (K,), event shape (2,))."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from numpyro.distributions import constraints

    K, alpha = _two_states(data), np.asarray(data["alpha"], dtype=float)
    series = _drive_series(data)
    support = constraints.positive_ordered_vector if positive else constraints.ordered_vector
    prior = dist.Normal(jnp.array([0.0, 3.0]), 1)

    def model():
        theta1 = numpyro.sample("theta1", dist.Dirichlet(alpha[0]))
        theta2 = numpyro.sample("theta2", dist.Dirichlet(alpha[1]))
        phi = numpyro.sample("phi", dist.ImproperUniform(support, (), (K,)))
        lam = numpyro.sample("lambda", dist.ImproperUniform(support, (), (K,)))
        numpyro.factor("phi_lambda_prior", prior.log_prob(phi).sum() + prior.log_prob(lam).sum())
        params = jnp.stack([phi, lam], axis=-1)
        numpyro.sample("u_v", HiddenMarkov(jnp.log(jnp.stack([theta1, theta2])), emission(params, *scales),
                                           len(series)), obs=series)

    return model


def _exponential_pymc(rates):
    import pymc as pm

    return pm.Exponential.dist(lam=rates)


def _exponential_numpyro(rates):
    import numpyro.distributions as dist

    return dist.Exponential(rates).to_event(1)


def _normal_pymc(means, scales):
    import pymc as pm

    return pm.Normal.dist(means, scales)


def _normal_numpyro(means, scales):
    import numpyro.distributions as dist

    return dist.Normal(means, scales).to_event(1)


def _drive_scales(data) -> np.ndarray:
    """hmm_drive_1's emission sds of u and v (tau, rho): data."""
    return np.array([float(data["tau"]), float(data["rho"])])


def _hmm_drive_0_pymc(data):
    return _drive_pymc(data, True, _exponential_pymc)


def _hmm_drive_0_numpyro(data):
    return _drive_numpyro(data, True, _exponential_numpyro)


def _hmm_drive_1_pymc(data):
    return _drive_pymc(data, False, _normal_pymc, _drive_scales(data))


def _hmm_drive_1_numpyro(data):
    return _drive_numpyro(data, False, _normal_numpyro, _drive_scales(data))


register(Program("hmm_example", "HMM", _hmm_example_pymc, _hmm_example_numpyro))
register(Program("hmm_drive_0", "HMM", _hmm_drive_0_pymc, _hmm_drive_0_numpyro))
register(Program("hmm_drive_1", "HMM", _hmm_drive_1_pymc, _hmm_drive_1_numpyro))
