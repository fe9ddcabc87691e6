"""Super-Gaussian potentials T(s) of the sparse linear model (Nickisch thesis §2.4, §3.2-3.3, Table 3.1).

Each potential has a scale parameter ``tau`` (a number or an array that broadcasts against ``s``) and is written
unnormalised, as in Table 3.1:

=============  =====================================  ==========  ======================================
name           T(s)                                   log-concave  Gaussian scale mixture s ~ N(0, gamma)
=============  =====================================  ==========  ======================================
``laplace``    exp(-tau |s|)                          yes          gamma ~ Exponential(rate tau^2 / 2)
``student``    (1 + tau s^2 / nu)^(-(nu + 1) / 2)      no           1/gamma ~ Gamma(nu / 2, rate nu / (2 tau))
``logistic``   cosh(tau s)^-2                         yes          1/gamma = 4 tau^2 omega, omega ~ PG(2, 0)
``gaussian``   exp(-tau s^2 / 2)                      yes          gamma = 1 / tau (a point mass)
``sigmoid``    1 / (1 + exp(-c tau s)), c = +-1        yes          (symmetric part) 1/gamma = tau^2 omega,
                                                                   omega ~ PG(1, 0)
=============  =====================================  ==========  ======================================

``sigmoid`` is the label likelihood of logistic regression (§3.7, Table 3.1's "logistic" read as a likelihood):
with the label c_j of each potential (``labels``), T_j(s) = sigmoid(c_j tau s) = exp(beta_j s) sech(tau s / 2) / 2,
beta_j = c_j tau / 2, a symmetric super-Gaussian part times the exponential tilt exp(beta s) of the thesis's (3.4).
It is bounded but not integrable, so it needs a Gaussian part that normalises the posterior on its own (a
Gaussian prior). Its variational quantities (g, h, ``gamma_star``) are those of the symmetric part, which
:attr:`Potential.symmetric` is (``labels`` None).

(tau is a rate for ``laplace`` / ``logistic`` and a precision for ``student`` / ``gaussian``; Student's t tends to
the Gaussian of the same tau as nu grows.) The variational representation (3.4) used by the double-loop and the
height functions h of Table 3.1 are written with sigma = 1 (the chapter-3 scaling x = s^2 / sigma^2 is the
caller's): for the symmetric potentials

    ln T(s) = max_{gamma > 0}  -s^2 / (2 gamma) - h(gamma) / 2,      h(gamma) = max_{x >= 0} -x / gamma - 2 g(x),

with g(x) = ln T(sqrt(x)), x = s^2. The maximising gamma at s is ``gamma_star(s)`` (where g'(s^2) = -1 / (2 gamma)).
Everything here is NumPy and vectorised; :func:`log_t` also takes ``xp=jax.numpy`` or ``xp=pytensor.tensor`` so the
model's declarations share one formula.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

POTENTIALS = ("laplace", "student", "logistic", "gaussian", "sigmoid")
LOG_CONCAVE = {"laplace": True, "student": False, "logistic": True, "gaussian": True, "sigmoid": True}
#: strongly super-Gaussian (g(x) = ln T(sqrt x) convex and non-increasing, §2.4): all but the Gaussian
STRONGLY_SUPER_GAUSSIAN = {"laplace": True, "student": True, "logistic": True, "gaussian": False, "sigmoid": True}
#: potentials whose scale mixture the Gibbs sampler draws from (the precision given s in closed form)
GSM_SAMPLERS = ("laplace", "student", "gaussian", "logistic")
_LOG2 = float(np.log(2.0))


def _log_cosh(x, xp=np):
    """ln cosh(x) without overflow: |x| + ln(1 + e^(-2|x|)) - ln 2."""
    a = xp.abs(x)
    return a + xp.log1p(xp.exp(-2.0 * a)) - _LOG2


@dataclass(frozen=True, eq=False)
class Potential:
    """One family of potentials T(s; tau) (``name`` in :data:`POTENTIALS`), ``nu`` the Student's t degrees of freedom.

    ``tau`` may be an array (one scale per potential j); every method broadcasts it against its argument.
    ``labels`` (+-1, broadcasting like ``tau``) are the sigmoid potential's labels; without them a sigmoid potential
    is its symmetric part sech(tau s / 2) / 2.
    """

    name: str
    tau: float | np.ndarray = 1.0
    nu: float = 3.0
    labels: np.ndarray | None = None

    def __post_init__(self):
        if self.name not in POTENTIALS:
            raise ValueError(f"potential must be one of {POTENTIALS}, got {self.name!r}")
        tau = np.asarray(self.tau, dtype=float)
        if not np.all(np.isfinite(tau)) or np.any(tau <= 0):
            raise ValueError(f"potential {self.name!r}: tau must be finite and positive, got {self.tau!r}")
        if not (np.isfinite(self.nu) and self.nu > 0):
            raise ValueError(f"potential 'student': nu must be a positive number, got {self.nu!r}")
        if self.labels is not None:
            if self.name != "sigmoid":
                raise ValueError(f"only the sigmoid potential takes labels, not {self.name!r}")
            labels = np.asarray(self.labels, dtype=float)
            if not np.all(np.isin(labels, (-1.0, 1.0))):
                raise ValueError("potential 'sigmoid': labels must be -1 or +1")

    @property
    def beta(self):
        """The tilt beta of ln T(s) = beta s + ln T_sym(s) (0 for the symmetric potentials)."""
        if self.labels is None:
            return np.zeros_like(np.asarray(self.tau, dtype=float))
        return 0.5 * np.asarray(self.labels, dtype=float) * np.asarray(self.tau, dtype=float)

    @property
    def symmetric(self) -> "Potential":
        """The symmetric part T_sym of T = exp(beta s) T_sym (the potential itself unless it has labels)."""
        return self if self.labels is None else Potential(self.name, self.tau, self.nu)

    def take(self, index) -> "Potential":
        """The potentials ``index`` (tau and labels indexed alike; ``index`` may add axes, e.g. ``(idx, None)``)."""
        tau = np.asarray(self.tau, dtype=float)
        labels = None if self.labels is None else np.asarray(self.labels, dtype=float)
        shape = np.broadcast(tau, 0.0 if labels is None else labels).shape
        if shape == ():                                     # one scale for all: nothing to index
            return self
        return Potential(self.name, np.broadcast_to(tau, shape)[index], self.nu,
                         None if labels is None else np.broadcast_to(labels, shape)[index])

    @property
    def log_concave(self) -> bool:
        return LOG_CONCAVE[self.name]

    @property
    def strongly_super_gaussian(self) -> bool:
        return STRONGLY_SUPER_GAUSSIAN[self.name]

    # ---- ln T and its derivatives in s ----------------------------------------------------------------
    def log_t(self, s, xp=np):
        """ln T(s) (unnormalised, Table 3.1); ``xp`` = numpy, jax.numpy or pytensor.tensor."""
        tau = float(self.tau) if np.ndim(self.tau) == 0 else np.asarray(self.tau, dtype=float)
        if xp is np:
            s = np.asarray(s, dtype=float)
        if self.name == "laplace":
            return -tau * xp.abs(s)
        if self.name == "student":
            return -0.5 * (self.nu + 1.0) * xp.log1p(tau * s * s / self.nu)
        if self.name == "logistic":
            return -2.0 * _log_cosh(tau * s, xp)
        if self.name == "sigmoid":
            if self.labels is not None and xp is np:      # without the cancellation of the tilted form far out
                return -np.logaddexp(0.0, -np.asarray(self.labels, dtype=float) * tau * s)
            sym = -_log_cosh(0.5 * tau * s, xp) - _LOG2
            return sym if self.labels is None else sym + self.beta * s
        return -0.5 * tau * s * s

    def dlog_t(self, s):
        """d ln T / ds (for the Laplace potential -tau sign(s), 0 at s = 0)."""
        s, tau = np.asarray(s, dtype=float), np.asarray(self.tau, dtype=float)
        if self.name == "laplace":
            return -tau * np.sign(s)
        if self.name == "student":
            return -(self.nu + 1.0) * tau * s / (self.nu + tau * s * s)
        if self.name == "logistic":
            return -2.0 * tau * np.tanh(tau * s)
        if self.name == "sigmoid":
            return self.beta - 0.5 * tau * np.tanh(0.5 * tau * s)
        return -tau * s

    def d2log_t(self, s):
        """d^2 ln T / ds^2 (0 for the Laplace potential away from s = 0, where it is not differentiable)."""
        s, tau = np.asarray(s, dtype=float), np.asarray(self.tau, dtype=float)
        if self.name == "laplace":
            return np.zeros(np.broadcast(s, tau).shape)
        if self.name == "student":
            r = tau * s * s
            return -(self.nu + 1.0) * tau * (self.nu - r) / (self.nu + r) ** 2
        if self.name == "logistic":
            return -2.0 * tau**2 / np.cosh(np.clip(tau * s, -350.0, 350.0)) ** 2
        if self.name == "sigmoid":
            return -0.25 * tau**2 / np.cosh(np.clip(0.5 * tau * s, -350.0, 350.0)) ** 2
        return -tau * np.ones_like(s)

    def log_normaliser(self):
        """ln of the integral of T(s) over the real line (every potential but the sigmoid likelihood is proper)."""
        tau, nu = np.asarray(self.tau, dtype=float), float(self.nu)
        if self.name == "sigmoid":
            if self.labels is None:
                return np.log(np.pi / tau)      # int sech(tau s / 2) / 2 ds
            raise ValueError("the sigmoid potential with labels is a likelihood: it is not integrable")
        if self.name in ("laplace", "logistic"):
            return np.log(2.0 / tau)
        if self.name == "student":
            return 0.5 * np.log(np.pi * nu / tau) + gammaln(0.5 * nu) - gammaln(0.5 * (nu + 1.0))
        return 0.5 * np.log(2.0 * np.pi / tau)

    def log_density(self, s):
        """ln of the normalised density T(s) / int T."""
        return self.log_t(s) - self.log_normaliser()

    # ---- g(x) = ln T(sqrt x) and the height function (§3.3, Table 3.1) --------------------------------
    def _half_logistic(self) -> "Potential":
        """ln T_sym of the sigmoid potential is half the logistic potential's of scale tau / 2, minus ln 2."""
        return Potential("logistic", 0.5 * np.asarray(self.tau, dtype=float))

    def g(self, x):
        """g(x) = ln T_sym(sqrt(x)), x = s^2 >= 0 (the symmetric part)."""
        return self.symmetric.log_t(np.sqrt(np.asarray(x, dtype=float)))

    def dg(self, x):
        """g'(x), x > 0."""
        if self.name == "sigmoid":
            return 0.5 * self._half_logistic().dg(x)
        x, tau = np.asarray(x, dtype=float), np.asarray(self.tau, dtype=float)
        if self.name == "laplace":
            return -0.5 * tau / np.sqrt(x)
        if self.name == "student":
            return -0.5 * (self.nu + 1.0) * tau / (self.nu + tau * x)
        if self.name == "logistic":
            r = np.sqrt(x)
            return -tau * np.tanh(tau * r) / r
        return -0.5 * tau * np.ones_like(x)

    def d2g(self, x):
        """g''(x), x > 0 (>= 0 for the strongly super-Gaussian potentials)."""
        if self.name == "sigmoid":
            return 0.5 * self._half_logistic().d2g(x)
        x, tau = np.asarray(x, dtype=float), np.asarray(self.tau, dtype=float)
        if self.name == "laplace":
            return 0.25 * tau / x**1.5
        if self.name == "student":
            return 0.5 * (self.nu + 1.0) * tau**2 / (self.nu + tau * x) ** 2
        if self.name == "logistic":
            r = np.sqrt(x)
            a = tau * r
            return tau * (np.tanh(a) - a / np.cosh(np.clip(a, -350.0, 350.0)) ** 2) / (2.0 * r**3)
        return np.zeros_like(x)

    def h(self, gamma):
        """Height function h(gamma) of Table 3.1 (sigma = 1), so ln T(s) = max_gamma -s^2/(2 gamma) - h(gamma)/2.

        Laplace tau^2 gamma; Student's t 0 below gamma_0 = nu / (tau (nu + 1)), above it
        (nu + 1) ln(gamma tau (nu + 1) / nu) - (nu + 1) + nu / (tau gamma); logistic 0 below 1 / (2 tau^2), above it
        4 ln cosh(a) - 2 a tanh(a) with a coth(a) = 2 tau^2 gamma; Gaussian 0 for gamma <= 1 / tau, +inf above
        (a Gaussian bounds T only up to its own width); sigmoid (its symmetric part, half the logistic potential of
        scale tau / 2 less ln 2) h_logistic(gamma / 2) / 2 + 2 ln 2.
        """
        if self.name == "sigmoid":
            return 0.5 * self._half_logistic().h(0.5 * np.asarray(gamma, dtype=float)) + 2.0 * _LOG2
        gamma, tau, nu = np.asarray(gamma, dtype=float), np.asarray(self.tau, dtype=float), float(self.nu)
        if self.name == "laplace":
            return tau**2 * gamma
        if self.name == "student":
            r = np.maximum(gamma * tau * (nu + 1.0) / nu, 1.0)
            return (nu + 1.0) * (np.log(r) - 1.0) + (nu + 1.0) / r
        if self.name == "logistic":
            a = _inverse_x_coth(2.0 * tau**2 * gamma)
            return 4.0 * _log_cosh(a) - 2.0 * a * np.tanh(a)
        return np.where(gamma <= 1.0 / tau, 0.0, np.inf)

    def dh(self, gamma):
        """h'(gamma): by the envelope theorem x*(gamma) / gamma^2, with x* = s*^2 the maximiser in the definition
        of h (gamma = gamma_star(s*)); 0 below the thresholds where h vanishes."""
        if self.name == "sigmoid":
            return 0.25 * self._half_logistic().dh(0.5 * np.asarray(gamma, dtype=float))
        gamma, tau, nu = np.asarray(gamma, dtype=float), np.asarray(self.tau, dtype=float), float(self.nu)
        if self.name == "laplace":
            return np.broadcast_to(tau**2, np.broadcast(gamma, tau).shape).copy()
        if self.name == "student":
            r = np.maximum(gamma * tau * (nu + 1.0) / nu, 1.0)
            return (nu + 1.0) * (1.0 / r - 1.0 / r**2) * tau * (nu + 1.0) / nu
        if self.name == "logistic":
            return (_inverse_x_coth(2.0 * tau**2 * gamma) / tau) ** 2 / gamma**2
        return np.where(gamma <= 1.0 / tau, 0.0, np.inf)

    def gamma_star(self, s):
        """The gamma at which the bound of :meth:`lower_bound` touches ln T(s): -1 / (2 g'(s^2)) (|s| / tau for
        Laplace). At s = 0 it is the smallest such gamma (0 for Laplace). Sigmoid: that of the symmetric part."""
        if self.name == "sigmoid":
            return 2.0 * self._half_logistic().gamma_star(s)
        s = np.abs(np.asarray(s, dtype=float))
        tau, nu = np.asarray(self.tau, dtype=float), float(self.nu)
        if self.name == "laplace":
            return s / tau
        if self.name == "student":
            return (nu + tau * s * s) / (tau * (nu + 1.0))
        if self.name == "logistic":
            a = tau * s
            small = a < 1e-8
            ratio = np.where(small, 1.0, a / np.tanh(np.where(small, 1.0, a)))
            return ratio / (2.0 * tau**2)
        return np.broadcast_to(1.0 / tau, np.broadcast(s, tau).shape).copy()

    def lower_bound(self, s, gamma):
        """beta s - s^2 / (2 gamma) - h(gamma) / 2 <= ln T(s) for every gamma > 0 (3.4 with sigma = 1)."""
        s = np.asarray(s, dtype=float)
        with np.errstate(invalid="ignore"):
            return self.beta * s - 0.5 * s * s / gamma - 0.5 * self.h(gamma)

    # ---- Gaussian scale mixture (§3.2, Fig. 3.1) -------------------------------------------------------
    def mixing_log_density(self, gamma):
        """ln P(gamma) of the variance gamma in T(s) / int T = int N(s | 0, gamma) P(gamma) dgamma
        (Laplace: exponential; Student's t: inverse Gamma)."""
        gamma, tau, nu = np.asarray(gamma, dtype=float), np.asarray(self.tau, dtype=float), float(self.nu)
        if self.name == "laplace":
            return np.log(0.5 * tau**2) - 0.5 * tau**2 * gamma
        if self.name == "student":
            a, b = 0.5 * nu, 0.5 * nu / tau     # 1/gamma ~ Gamma(a, rate b), so gamma ~ InvGamma(a, scale b)
            return a * np.log(b) - gammaln(a) - (a + 1.0) * np.log(gamma) - b / gamma
        raise ValueError(f"the {self.name!r} potential has no mixing density here (GSM samplers: {GSM_SAMPLERS})")

    def sample_precision(self, rng: np.random.Generator, s):
        """Draw the precision 1/gamma_j given s_j (its full conditional under the mixture), elementwise.

        Laplace: 1/gamma | s ~ InverseGaussian(mean tau / |s|, shape tau^2) (Park & Casella 2008); Student's t:
        1/gamma | s ~ Gamma((nu + 1) / 2, rate nu / (2 tau) + s^2 / 2); Gaussian: tau; logistic: 1/gamma = 4 tau^2
        omega with omega | s ~ PolyaGamma(2, 2 tau s) (Polson, Scott & Windle 2013: cosh(tau s)^-2 =
        int exp(-omega (2 tau s)^2 / 2) PG(omega | 2, 0) d omega), drawn by the ``polyagamma`` package.
        """
        s = np.asarray(s, dtype=float)
        tau = np.broadcast_to(np.asarray(self.tau, dtype=float), s.shape)
        if self.name == "laplace":
            a = np.maximum(np.abs(s), 1e-300)       # s = 0 has probability 0; keep the mean finite
            return rng.wald(tau / a, tau**2)
        if self.name == "student":
            nu = float(self.nu)
            return rng.gamma(0.5 * (nu + 1.0), 1.0 / (0.5 * nu / tau + 0.5 * s * s))
        if self.name == "gaussian":
            return tau.copy()
        if self.name == "logistic":
            from polyagamma import random_polyagamma

            return 4.0 * tau**2 * random_polyagamma(2.0, 2.0 * tau * s, random_state=rng)
        raise ValueError(f"the Gibbs sampler draws scale mixtures of {GSM_SAMPLERS}, not of the {self.name!r} "
                         f"potential")

    def sample(self, rng: np.random.Generator, size):
        """Draws from the normalised T through its mixture: gamma ~ P(gamma), s ~ N(0, gamma)."""
        tau = np.broadcast_to(np.asarray(self.tau, dtype=float), size)
        if self.name == "laplace":
            gamma = rng.exponential(2.0 / tau**2)
        elif self.name == "student":
            gamma = 1.0 / rng.gamma(0.5 * self.nu, 2.0 * tau / self.nu)
        elif self.name == "gaussian":
            gamma = 1.0 / tau
        else:
            return rng.logistic(0.0, 0.5 / tau)     # cosh(tau s)^-2 is the logistic density of scale 1/(2 tau)
        return np.sqrt(gamma) * rng.standard_normal(size)


def _inverse_x_coth(c, iters: int = 60):
    """a >= 0 with a coth(a) = c for c > 1 (0 for c <= 1): Newton from above, where x coth x is convex."""
    c = np.asarray(c, dtype=float)
    a = np.where(c > 1.0, np.maximum(c, np.sqrt(3.0 * np.maximum(c - 1.0, 0.0))), 0.0)   # >= the root
    for _ in range(iters):
        live = np.where(a > 0, a, 1.0)          # a = 0 (c <= 1) stays put
        t = np.tanh(live)
        f = live / t - c
        df = 1.0 / t - live * (1.0 - t * t) / (t * t)
        step = np.where(a > 0, f / np.maximum(df, 1e-300), 0.0)
        a = np.maximum(a - step, 0.0)
    return np.where(c > 1.0, a, 0.0)
