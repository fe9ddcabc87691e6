"""Simulation-based calibration: the ranks, their test and their picture (Talts et al. 2018; Säilynoja, Bürkner
and Vehtari 2022).

:func:`bayeszoo.sbc` draws parameters and observations from the model's prior predictive, fits each simulated
dataset and ranks every simulated true value among its fit's (thinned) posterior draws; :class:`SBCResult` holds
those ranks. Under a sampler that targets the posterior, the rank of a scalar component among L independent
draws is uniform on {0, ..., L}, so the fractional rank (r + U) / (L + 1), U ~ Uniform(0, 1) (which also breaks
ties), is uniform on (0, 1), whatever L, which may differ between simulations when the thinning follows each
fit's ESS.

The test is the picture's: the ECDF of a component's fractional ranks at K evenly spaced points must stay inside
ArviZ's simultaneous band (``ecdf_confidence_band``, "optimized": the pointwise level chosen so that a uniform
sample's whole ECDF stays inside with the stated probability). A component fails when it leaves the band at any
point. For C components each band has coverage 1 - (1 - ci_prob) / C (Bonferroni, valid however the components
depend on each other), so a correct sampler fails anywhere with probability at most 1 - ci_prob.
"""
from __future__ import annotations

import functools
import html
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

#: largest number of points the ECDF is checked at (K = the number of simulations when fewer)
MAX_EVAL_POINTS = 100
#: components drawn by :meth:`SBCResult.plot` by default (the failing ones and the largest deviations first)
MAX_PANELS = 12
#: fewer ranked draws per fit than this and the test cannot tell a sampler that barely moves from one that mixes
MIN_RANKED = 10
#: the jitter's SeedSequence is [seed, _JITTER_STREAM], apart from every fit's [seed, simulation] (below 2**32)
_JITTER_STREAM = 2**32


@dataclass
class SBCResult:
    """Simulation-based calibration of one backend on one model (made by :func:`bayeszoo.sbc`).

    Attributes
    ----------
    backend : str
        The backend that fitted every simulated dataset.
    ranks : pandas.DataFrame
        One row per simulation whose fit succeeded (index: the simulation's number), one column per scalar
        component of the canonical variables (``"w[3]"``, ``"log_beta"``): the number of kept posterior draws
        below the simulated true value (ties broken at random), 0 to ``n_ranked``.
    n_ranked : pandas.Series
        Per simulation, the number of posterior draws L the ranks were taken among (after thinning).
    ci_prob : float
        The family-wise coverage of the bands: a calibrated sampler passes with at least this probability.
    seed : int
        The seed of the run (simulations, fits and the ranks' jitter).
    model_spec, data, data_name : the model (``model.spec()``), the fingerprint and name of the dataset whose
        inputs every simulation shares.
    settings : dict
        What the run was asked for: number of simulations, draws, tune, chains, thinning, variables, options.
    errors : dict
        Simulation number -> error of a fit that failed (any failure fails the calibration: dropping failed
        simulations would bias the ranks).
    ess_min : pandas.Series or None
        Per simulation, the smallest bulk ESS over the ranked components (None for approximations).
    seconds : float
        Wall time of the whole run.
    """

    backend: str
    ranks: pd.DataFrame
    n_ranked: pd.Series
    ci_prob: float = 0.95
    seed: int = 0
    model_spec: dict = field(default_factory=dict)
    data: str | None = None
    data_name: str = ""
    settings: dict = field(default_factory=dict)
    errors: dict = field(default_factory=dict)
    ess_min: pd.Series | None = None
    seconds: float = 0.0

    def __post_init__(self):
        if not 0 < self.ci_prob < 1:
            raise ValueError(f"SBCResult: ci_prob must be a number strictly between 0 and 1; got {self.ci_prob!r}")
        self.errors = {int(k): str(v) for k, v in self.errors.items()}

    # ---- the test ----------------------------------------------------------------------------------
    @property
    def n_simulations(self) -> int:
        """Simulations run, the failed ones included."""
        return len(self.ranks) + len(self.errors)

    @property
    def components(self) -> list[str]:
        return [str(c) for c in self.ranks.columns]

    @property
    def component_prob(self) -> float:
        """Each component's band coverage: 1 - (1 - ci_prob) / C (Bonferroni over the C components)."""
        return 1.0 - (1.0 - self.ci_prob) / max(len(self.components), 1)

    def fractional_ranks(self) -> pd.DataFrame:
        """(r + U) / (L + 1) per simulation and component, U ~ Uniform(0, 1) from the run's seed: uniform on
        (0, 1) under a calibrated sampler."""
        rng = np.random.default_rng(np.random.SeedSequence([int(self.seed), _JITTER_STREAM]))
        jitter = rng.uniform(size=self.ranks.shape)
        L = self.n_ranked.reindex(self.ranks.index).to_numpy(dtype=float)[:, None]
        return pd.DataFrame((self.ranks.to_numpy(dtype=float) + jitter) / (L + 1.0), index=self.ranks.index,
                            columns=self.ranks.columns)

    @property
    def eval_points(self) -> np.ndarray:
        """The K points (k / K, k = 1..K) where the ECDFs are checked and drawn."""
        k = max(min(len(self.ranks), MAX_EVAL_POINTS), 1)
        return np.arange(1, k + 1) / k

    @functools.cached_property
    def band(self) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) counts of simulations at or below each evaluation point that a uniform sample stays
        within, simultaneously at every point, with probability :attr:`component_prob`."""
        from arviz.stats.ecdf_utils import ecdf_confidence_band

        n, z = len(self.ranks), self.eval_points
        lower, upper = ecdf_confidence_band(n, z, z, prob=self.component_prob, method="optimized")
        return np.rint(lower * n), np.rint(upper * n)   # counts: compared exactly, not as fractions

    def summary(self) -> pd.DataFrame:
        """One row per component: ``max_ecdf_difference`` (the ECDF of its fractional ranks minus the uniform CDF
        where that is largest in size: negative when too few ranks are low, as when the sampler's posterior is
        too wide), ``at`` (the fractional rank where), ``points_outside`` (evaluation points outside the band) and
        ``passed``."""
        columns = ["component", "max_ecdf_difference", "at", "points_outside", "passed"]
        if self.ranks.empty:
            return pd.DataFrame(columns=columns)
        u = np.sort(self.fractional_ranks().to_numpy(), axis=0)
        n, z = u.shape[0], self.eval_points
        lower, upper = self.band
        rows = []
        for j, name in enumerate(self.components):
            counts = np.searchsorted(u[:, j], z, side="right")
            diff = counts / n - z
            worst = int(np.argmax(np.abs(diff)))
            outside = int(np.sum((counts < lower) | (counts > upper)))
            rows.append({"component": name, "max_ecdf_difference": float(diff[worst]), "at": float(z[worst]),
                         "points_outside": outside, "passed": outside == 0})
        return pd.DataFrame(rows, columns=columns)

    @property
    def failed_components(self) -> list[str]:
        table = self.summary()
        return list(table.loc[~table["passed"].astype(bool), "component"])

    @property
    def too_few_ranked(self) -> bool:
        """Ranks among fewer than :data:`MIN_RANKED` draws cannot tell a sampler that barely moves from one that
        mixes: the test has too little to judge."""
        return bool(self.n_ranked.size) and int(self.n_ranked.min()) < MIN_RANKED

    @property
    def passed(self) -> bool:
        """Every simulation's fit ran, ranked enough draws, and every component's ECDF stayed inside its band."""
        return (not self.errors and len(self.ranks) > 0 and not self.too_few_ranked
                and not self.failed_components)

    def verdict(self) -> str:
        """One or two sentences: what ran, and whether (and where) it fails."""
        L = self.n_ranked.to_numpy(dtype=float)
        if not L.size:
            drawn = "no ranks"
        elif L.min() != L.max():
            drawn = f"ranks among {int(L.min())} to {int(L.max())} thinned posterior draws"
        else:
            drawn = f"ranks among {int(L[0])} posterior draws"
        head = (f"SBC of {self.backend}: {self.n_simulations} simulations from the prior predictive, "
                f"{len(self.components)} components, {drawn}; bands of {100 * self.component_prob:.3g} % each "
                f"({100 * self.ci_prob:.3g} % family-wise, Bonferroni)")
        if self.errors:
            first = next(iter(self.errors.items()))
            return (f"{head}. NOT CALIBRATED: {len(self.errors)} fit(s) failed (simulation {first[0]}: "
                    f"{first[1].splitlines()[0][:200]}).")
        if self.too_few_ranked:
            return (f"{head}. NOT JUDGED: some fits kept fewer than {MIN_RANKED} draws after thinning by their "
                    f"effective sample size (the fewest: {int(self.n_ranked.min())}), too few for ranks to show "
                    f"a sampler that does not mix; run more draws per fit.")
        failed = self.failed_components
        if not failed:
            return f"{head}. Passed: every component's ECDF difference stays inside its band."
        table = self.summary().set_index("component")
        shown = ", ".join(f"{c} ({table.loc[c, 'max_ecdf_difference']:+.2f} at {table.loc[c, 'at']:.2f})"
                          for c in failed[:6])
        return (f"{head}. FAILED: {len(failed)} of {len(self.components)} component(s) leave their band: "
                f"{shown}{', ...' if len(failed) > 6 else ''}.")

    # ---- the picture -------------------------------------------------------------------------------
    def plot(self, components=None, max_panels: int = MAX_PANELS):
        """ECDF difference plots with the simultaneous bands (``az.plot_ecdf``), one panel per component: the
        given ``components`` (labels), or the failing ones and then the largest deviations, at most
        ``max_panels``. Returns a :class:`matplotlib.figure.Figure`."""
        import arviz as az
        from scipy.stats import uniform

        from bayeszoo.diagnostics.plots import _panels

        if self.ranks.empty:
            raise ValueError("SBCResult.plot: no simulation's fit succeeded, so there are no ranks to draw")
        table = self.summary().set_index("component")
        if components is None:
            order = table.assign(size=table["max_ecdf_difference"].abs()).sort_values(
                ["passed", "size"], ascending=[True, False])
            components = list(order.index[:max_panels])
        unknown = [c for c in components if c not in table.index]
        if unknown:
            raise ValueError(f"SBCResult.plot: unknown component(s) {unknown}; known: {self.components}")
        u = self.fractional_ranks()
        fig, axes = _panels(len(components), 3.2, 2.2, ncols=4)
        for ax, name in zip(axes, components):
            ok = bool(table.loc[name, "passed"])
            az.plot_ecdf(u[name].to_numpy(copy=True), eval_points=self.eval_points, cdf=uniform(0, 1).cdf,
                         difference=True, confidence_bands="optimized", ci_prob=self.component_prob, ax=ax,
                         plot_kwargs={"color": "#1f77b4" if ok else "#c00000"},
                         fill_kwargs={"color": "#1f77b4" if ok else "#c00000", "alpha": 0.15})
            ax.axhline(0.0, color="#888", lw=0.6)
            ax.set_title(f"{name}{'' if ok else ' (fails)'}", fontsize=9, color="#222" if ok else "#c00000")
            ax.set_xlabel("fractional rank", fontsize=8)
            ax.tick_params(labelsize=7)
        axes[0].set_ylabel("ECDF - uniform", fontsize=8)
        fig.suptitle(f"SBC of {self.backend}: ECDF differences, {100 * self.component_prob:.3g} % simultaneous "
                     f"bands", fontsize=10)
        fig.tight_layout()
        return fig

    def html(self) -> str:
        """The verdict and the per-component table as HTML (the report's section adds the figure)."""
        table = self.summary()
        rows = "".join(
            f"<tr{'' if r.passed else ' class=failed'}><td class=txt>{html.escape(r.component)}</td>"
            f"<td>{r.max_ecdf_difference:+.3f}</td><td>{r.at:.2f}</td><td>{r.points_outside}</td>"
            f"<td>{'yes' if r.passed else 'no'}</td></tr>" for r in table.itertuples())
        return (f"<p>{html.escape(self.verdict())}</p><div class=scroll><table><tr><th class=txt>component</th>"
                f"<th>max ECDF difference</th><th>at</th><th>points outside</th><th>passed</th></tr>{rows}"
                f"</table></div>")

    # ---- files -------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """JSON values that :meth:`from_dict` reads back (a saved comparison keeps its SBC results so)."""
        return {"backend": self.backend, "ci_prob": self.ci_prob, "seed": int(self.seed),
                "model_spec": self.model_spec, "data": self.data, "data_name": self.data_name,
                "settings": self.settings, "errors": {str(k): v for k, v in self.errors.items()},
                "seconds": float(self.seconds), "components": self.components,
                "simulations": [int(i) for i in self.ranks.index],
                "ranks": self.ranks.to_numpy(dtype=int).tolist(),
                "n_ranked": [int(self.n_ranked[i]) for i in self.ranks.index],
                "ess_min": None if self.ess_min is None else
                [None if not np.isfinite(v) else float(v) for v in self.ess_min.reindex(self.ranks.index)]}

    @classmethod
    def from_dict(cls, d: dict) -> "SBCResult":
        index = pd.Index(d["simulations"], name="simulation")
        ranks = pd.DataFrame(np.asarray(d["ranks"], dtype=int).reshape(len(index), len(d["components"])),
                             index=index, columns=d["components"])
        ess = None if d.get("ess_min") is None else pd.Series(
            [np.nan if v is None else v for v in d["ess_min"]], index=index, dtype=float)
        return cls(backend=d["backend"], ranks=ranks, n_ranked=pd.Series(d["n_ranked"], index=index, dtype=int),
                   ci_prob=float(d["ci_prob"]), seed=int(d["seed"]), model_spec=d.get("model_spec") or {},
                   data=d.get("data"), data_name=d.get("data_name", ""), settings=d.get("settings") or {},
                   errors=d.get("errors") or {}, ess_min=ess, seconds=float(d.get("seconds", 0.0)))

    def __repr__(self) -> str:
        return (f"SBCResult({self.backend!r}, simulations={self.n_simulations}, components={len(self.components)}, "
                f"passed={self.passed})")
