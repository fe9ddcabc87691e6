"""A :class:`~bayeszoo.Comparison` in a notebook: its HTML block and its figures one at a time.

The block is made of the report's own pieces (``bayeszoo.diagnostics.report``: the reference banner, the flagged
table, the embedded speed figure) under the report's CSS, scoped to the block so that it leaves the styles of a
notebook or of a documentation page alone. No scripts and no external resources: the figure is an inline PNG.
"""
from __future__ import annotations

import html
import io
import re
import types

from bayeszoo.diagnostics import plots
from bayeszoo.diagnostics.report import (CSS, Images, comparison_banner, first_line, glossary_html, note,
                                        split_columns, table_html, verdict_html)

SCOPE = "div.bz-comparison"

#: The figures :func:`figure` draws, by name, with what each shows.
FIGURES = {
    "accuracy": "accuracy against wall time, and the ranking by the times to the rough and precise targets "
                "(needs a reference)",
    "ess_per_second": "bulk ESS per second of the MCMC fits",
    "family": "the family's own picture (fitted curve, boundaries, images, weights)",
    "objective": "the ELBO / log-evidence traces of the fits that optimise one",
    "trace": "one backend's trace plot of the chosen components",
    "rank": "one MCMC backend's rank plot of the chosen components (two or more chains)",
    "marginals": "one backend's marginals of the chosen components over the reference's",
}
_PER_BACKEND = ("trace", "rank", "marginals")

# The report's page-wide rules would restyle a whole notebook, so each of them is limited to the block. The block
# is a light card without the page's margins; its tables and cells set their own colours because JupyterLab gives
# tables the theme's text colour and odd rows the theme's background, unreadable on the card under a dark theme.
_OVERRIDES = (f"{SCOPE}{{margin:.3em 0;max-width:100%;padding:.4em .8em;background:#fff;border:1px solid #ddd;"
              f"border-radius:4px;font-size:13px}}\n{SCOPE} p{{margin:.3em 0}}\n"
              f"{SCOPE} table,{SCOPE} code{{color:#222}}\n{SCOPE} td{{background:#fff}}")


def scoped_css(css: str, scope: str = SCOPE) -> str:
    """``css`` with every selector limited to the elements inside ``scope``; ``body`` becomes ``scope`` itself.
    Plain rules only (no ``@media`` blocks), as in the report's stylesheet."""
    rules = []
    for selectors, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css):
        scoped = [scope if s.strip() == "body" else f"{scope} {s.strip()}" for s in selectors.split(",")]
        rules.append(f"{','.join(scoped)}{{{body.strip()}}}")
    return "\n".join(rules)


def comparison_html(comparison) -> str:
    """The HTML block of a comparison: the reference banner, the flagged tables (sampling and accuracy, then the
    family's scores) and the speed figure, accuracy against wall time (the samplers' ESS per second when there is
    no reference), as the report shows them."""
    esc = html.escape
    reference = comparison.reference
    labels = comparison.order or list(comparison.fits) + list(comparison.errors)
    out = [f'<div class="bz-comparison"><style>{scoped_css(CSS)}\n{_OVERRIDES}</style>',
           f"<p><strong>Comparison</strong> {esc(type(comparison.model).__name__)} on "
           f"<code>{esc(str(comparison.data.name))}</code> · backends: {esc(', '.join(labels))}</p>",
           verdict_html(comparison),
           comparison_banner(comparison)]
    try:
        table = comparison.table()
        sampling, scores = split_columns(table)
        out.append(table_html(table, comparison, sampling))
        out.append(glossary_html(comparison.targets))
        if scores:
            out.append(table_html(table, comparison, scores))
    except Exception as exc:
        table = None
        out.append(note(f"table could not be computed ({type(exc).__name__}: {first_line(exc)})"))
    images = Images()
    if reference is not None:
        out.append(images.render("accuracy against wall time",
                                 lambda: plots.accuracy_figure(comparison, reference, table))
                   or note("no fit other than the reference's own could be measured against it"))
    elif table is not None:
        out.append(images.render("ESS per second", lambda: plots.ess_per_second_bars(table))
                   or note("no MCMC fit has a finite ESS per second"))
    out.append("</div>")
    return "".join(out)


def figure(comparison, kind: str, backend: str | None = None, components=None):
    """One of the report's figures as a :class:`matplotlib.figure.Figure`.

    Parameters
    ----------
    comparison : Comparison
    kind : str
        A name of :data:`FIGURES`.
    backend : str, optional
        The fit drawn by ``"trace"``, ``"rank"`` and ``"marginals"``: a label of ``comparison.fits``. By default the
        first fit (in the grid's order) the figure applies to: any fit for a trace, an MCMC fit with two or more
        chains for a rank plot, a fit other than the reference's for marginals.
    components : list of (variable, {dim: coordinate}), optional
        The components those three figures show; by default the report's (``plots.select_components``).

    Raises
    ------
    ValueError
        For an unknown ``kind`` or ``backend``, and when the figure has nothing to draw (no reference for
        ``"accuracy"``, no MCMC fit for ``"ess_per_second"``, ...), saying why.
    """
    if kind not in FIGURES:
        raise ValueError(f"unknown figure {kind!r}; the figures are {', '.join(FIGURES)}")
    if backend is not None and kind not in _PER_BACKEND:
        raise ValueError(f"figure {kind!r} shows every backend; backend= applies to {', '.join(_PER_BACKEND)} only")
    if kind in _PER_BACKEND:
        fig = _backend_figure(comparison, kind, backend, components)
    elif kind == "accuracy":
        reference = comparison.reference
        if reference is None:
            raise ValueError("figure 'accuracy' needs a reference posterior, and this comparison has none")
        fig = plots.accuracy_figure(comparison, reference, comparison.table())
    elif kind == "ess_per_second":
        fig = plots.ess_per_second_bars(comparison.table())
    elif kind == "family":
        if comparison.model.family == "user":   # a model of one's own has no family and no inputs to draw over
            raise ValueError("figure 'family' draws a built-in family's own picture (fitted curve, boundaries, "
                             "images); a model of one's own has none: see 'marginals', 'trace' or 'rank', or draw "
                             "posterior predictions with its library (pm.sample_posterior_predictive)")
        fig = plots.family_picture(comparison)
    else:
        fig = plots.objective_figure(comparison)
    if fig is None:
        raise ValueError(f"figure {kind!r} has nothing to draw for this comparison ({FIGURES[kind]})")
    # The figures are built without pyplot, and IPython shows a Figure as an image only once pyplot has set up
    # the notebook's backend; this gives the figure its own PNG so that it shows as the cell's result either way.
    fig._repr_png_ = types.MethodType(_png, fig)
    return fig


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=plots.DPI)
    return buffer.getvalue()


def _backend_figure(comparison, kind: str, backend: str | None, components):
    labels = [label for label in (comparison.order or list(comparison.fits)) if label in comparison.fits]
    reference_fit = plots.reference_fit(comparison)
    if kind == "rank":
        fits = [lbl for lbl in labels if comparison.fits[lbl].kind == "mcmc" and comparison.fits[lbl].n_chains >= 2]
    elif kind == "marginals":
        if comparison.reference is None:
            raise ValueError("figure 'marginals' draws a fit over the reference's draws, and this comparison has "
                             "no reference")
        if reference_fit is None:
            raise ValueError(f"figure 'marginals' draws a fit over the reference's draws, and the reference "
                             f"{comparison.reference.name!r} holds moments only (it was published without its "
                             f"draws): see figure 'accuracy', which needs the moments alone, or compare against a "
                             f"reference with draws")
        fits = [lbl for lbl in labels if comparison.fits[lbl] is not reference_fit]
    else:
        fits = labels
    if backend is None:
        if not fits:
            raise ValueError(f"figure {kind!r}: no fit of this comparison applies ({FIGURES[kind]})")
        backend = fits[0]
    elif backend not in comparison.fits:
        raise ValueError(f"figure {kind!r}: no fit {backend!r} in this comparison; the fits are {labels}")
    elif backend not in fits:
        raise ValueError(f"figure {kind!r} does not apply to {backend!r} ({FIGURES[kind]}); it applies to {fits}")
    fit = comparison.fits[backend]
    components = plots.select_components(comparison) if components is None else list(components)
    if kind == "trace":
        return plots.trace_figure(fit, components)
    if kind == "rank":
        return plots.rank_figure(fit, components)
    colors = plots.backend_colors(labels)
    return plots.marginals_figure(fit, reference_fit, components, color=colors.get(backend, "#1f77b4"),
                                  label=backend)
