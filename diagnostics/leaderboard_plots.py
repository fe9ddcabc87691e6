"""The benchmark leaderboard's figures and its self-contained HTML page (``bz.benchmark``).

Everything here reads a leaderboard through its tables (``summary()``, ``ratios()``, ``profile()``,
``failures()``, ``table()``, ``verdict()``), so that it needs nothing from the layers above.
"""
from __future__ import annotations

import html
import time

import numpy as np
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

from bayeszoo.diagnostics.plots import backend_colors, new_figure
from bayeszoo.diagnostics.report import CSS, Images, _fmt

UNSOLVED_COLOR = "#d9d9d9"
#: the factors a profile's axis may label: a log axis alone labels only powers of ten, often just tau = 1
TAU_TICKS = (1, 1.25, 1.5, 2, 3, 4, 5, 10, 20, 50, 100, 200, 500, 1e3, 1e4, 1e5, 1e6)


def tau_ticks(top: float, most: int = 8) -> list[float]:
    """The labelled factors of a profile's axis running from 1 to ``top``: at most ``most``, 1 and the largest
    one inside the axis always among them."""
    inside = [t for t in TAU_TICKS if t <= top] or [1]
    step = -(-len(inside) // most)
    return sorted(set(inside[::step]) | {inside[-1]})


def profile_figure(board):
    """The performance profile: the share of targets each backend solves within tau times the best cost."""
    if not np.isfinite(board.ratios().to_numpy(dtype=float)).any():
        return None   # nobody solved a target: there is no best to be within a factor of
    prof = board.profile()
    colors = backend_colors(board.backends)
    fig = new_figure(7.5, 4.2)
    ax = fig.add_subplot(1, 1, 1)
    for backend in board.backends:
        ax.step(prof.index, prof[backend], where="post", color=colors[backend], lw=2, label=backend)
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(tau_ticks(float(prof.index.max()))))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel(f"tau: within this factor of the best backend's {board.cost} to the target")
    ax.set_ylabel("share of targets solved")
    ax.set_title("Performance profile (higher and further left is better)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, frameon=False)
    fig.subplots_adjust(left=0.1, right=0.76, bottom=0.14, top=0.9)
    return fig


def heatmap_figure(board):
    """Target x backend: log10 of the cost relative to the best backend on the target; unsolved cells grey with
    an x, cells of backends that did not run blank."""
    ratios = board.ratios()
    values = np.log10(ratios.to_numpy(dtype=float))
    n_rows, n_cols = values.shape
    fig = new_figure(max(5.0, 1.1 * n_cols + 3.5), max(2.5, 0.32 * n_rows + 1.6))
    ax = fig.add_subplot(1, 1, 1)
    finite = np.isfinite(values)
    top = max(float(values[finite].max()) if finite.any() else 1.0, 0.5)
    shown = np.where(finite, values, np.nan)
    image = ax.imshow(shown, aspect="auto", cmap="viridis_r", vmin=0.0, vmax=top, interpolation="nearest")
    for i in range(n_rows):
        for j in range(n_cols):
            ratio = ratios.iat[i, j]
            if np.isinf(ratio):
                ax.add_patch(_cell(ax, j, i, UNSOLVED_COLOR))
                ax.text(j, i, "x", ha="center", va="center", fontsize=9, color="#555")
            elif np.isfinite(ratio):
                ax.text(j, i, f"{ratio:.2g}", ha="center", va="center", fontsize=8,
                        color="white" if values[i, j] > top / 2 else "black")
    ax.set_xticks(range(n_cols), [str(c) for c in ratios.columns], rotation=30, ha="right", fontsize=9)
    ax.set_yticks(range(n_rows), [str(r).split("/", 1)[-1] for r in ratios.index], fontsize=8)
    ax.set_title(f"{board.cost.capitalize()} to the target, relative to the best (x: never reached)", fontsize=10)
    fig.colorbar(image, ax=ax, label="log10 relative cost", fraction=0.04)
    fig.tight_layout()
    return fig


def _cell(ax, x, y, color):
    from matplotlib.patches import Rectangle

    return Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=color, edgecolor="white")


def _table_html(df, columns=None) -> str:
    columns = list(df.columns) if columns is None else [c for c in columns if c in df.columns]
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = []
    for _, row in df.iterrows():
        cells = []
        for c in columns:
            value = row[c]
            text = html.escape(_fmt(c, value)) if not isinstance(value, str) else html.escape(value)
            cells.append(f"<td class='txt'>{text}</td>" if isinstance(value, str) else f"<td>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<div class='scroll'><table class='cmp'><tr>{head}</tr>{''.join(body)}</table></div>"


SUMMARY_HELP = ("<b>solved</b>: targets where the backend's median cost over seeds is finite (it reached the target "
                "accuracy and, for MCMC, its own diagnostics passed); <b>relative_cost</b>: the geometric mean, over "
                "the targets it solved, of its cost divided by the best backend's on that target; "
                "<b>worth_draws_median</b>: the median over its tasks of what its final estimate is worth in exact "
                "draws (the bias-aware ESS).")

TASK_COLUMNS = ["target", "backend", "seed", "status", "library", "gradients_to_target", "seconds_to_target",
                "worth_draws", "mean_err", "sd_err", "rhat_max", "ess_bulk_min", "divergences", "converged",
                "seconds", "n_grad"]


def leaderboard_html(board, fragment: bool = False) -> str:
    """The leaderboard as one HTML page (``fragment``: the body only, for a notebook)."""
    images = Images()
    settings = board.settings
    said = (f"targets: {len(board.targets)} · backends: {', '.join(board.backends)} · seeds: "
            f"{', '.join(map(str, settings.get('seeds', [])))} · draws / tune / chains: "
            f"{settings.get('draws') or 'own'} / {settings.get('tune') or 'own'} / {settings.get('chains') or 'own'}")
    out = ["<h1>bayeszoo benchmark</h1>",
           f"<p class='small'>written {time.strftime('%Y-%m-%d %H:%M')} · {html.escape(said)}</p>",
           f"<p class='verdict'>{html.escape(board.verdict())}</p>",
           "<h2>Performance profile</h2>",
           images.render("performance profile", lambda: profile_figure(board))
           or "<p>No backend reached the target accuracy on any target, so there is no profile to draw.</p>",
           "<h2>Cost on each target</h2>",
           images.render("cost heatmap", lambda: heatmap_figure(board)),
           "<h2>Backends</h2>", _table_html(board.summary()), f"<p class='small'>{SUMMARY_HELP}</p>"]
    failures = board.failures()
    out.append("<h2>Failures and skipped tasks</h2>")
    if failures.empty:
        out.append("<p>None: every task ran.</p>")
    else:
        out.append(_table_html(failures))
    out.append("<h2>Every task</h2>")
    out.append(f"<details class='more'><summary>{len(board.rows)} tasks</summary>"
               f"{_table_html(board.table(), TASK_COLUMNS)}</details>")
    body = "\n".join(out)
    if fragment:
        return f"<div class='bz-leaderboard'>{body}</div>"
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>bayeszoo benchmark</title>"
            f"<style>{CSS}</style></head><body>{body}</body></html>")
