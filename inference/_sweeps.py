"""The sweep driver shared by the JAX Gibbs samplers (RVM, GPC).

A sampler compiles one function ``step(state, starts, counts) -> (state, outputs)`` that runs ``len(counts)``
slots, slot j running ``counts[j]`` sweeps numbered from ``starts[j]`` (random keys are derived from the sweep
number, so draws do not depend on how the run is cut into calls). Tuning and sampling share that one compiled
function whatever ``tune`` and ``thin`` are; the calls between slots drive the progress bar.
"""
from __future__ import annotations

import time

import jax
import numpy as np

from bayeszoo.progress import progress_bar

MAX_TUNE_SWEEPS_PER_SLOT = 50


def slot_starts(first: int, counts) -> np.ndarray:
    """Sweep number at which each slot starts."""
    counts = np.asarray(counts, np.int64)
    return first + np.concatenate([[0], np.cumsum(counts)[:-1]])


def run_sweeps(step, state, *, tune: int, draws: int, thin: int, chunk: int, desc: str, progress: bool):
    """Run ``tune`` discarded sweeps, then ``draws`` kept draws (every ``thin``-th sweep) in calls of ``chunk`` slots.

    Returns ``(state, outputs, t_tune, t_sample, n_sweeps)``: ``outputs`` is a tuple with one array per output
    of ``step``, concatenated along the draw axis (axis 1, after chains) and cut to ``draws``.
    """

    def call(state, first, counts):
        counts = np.asarray(counts, np.int64)
        return step(state, slot_starts(first, counts), counts)

    t0 = time.perf_counter()
    pieces = []
    with progress_bar(total=tune + draws * thin, desc=desc, disable=not progress) as bar:
        n_tune_calls = -(-tune // (chunk * MAX_TUNE_SWEEPS_PER_SLOT)) if tune else 0
        done = 0
        for k in range(n_tune_calls):
            n = (tune * (k + 1)) // n_tune_calls - done
            counts = np.full(chunk, n // chunk) + (np.arange(chunk) < n % chunk)
            state, _ = call(state, done, counts)
            done += n
            bar.update(n)
        jax.block_until_ready(state)
        t_tune = time.perf_counter() - t0
        got = 0
        while got < draws:
            state, out = call(state, tune + got * thin, np.full(chunk, thin))
            pieces.append(tuple(np.asarray(o) for o in out))
            bar.update(min(chunk, draws - got) * thin)
            got += chunk
    t_sample = time.perf_counter() - t0 - t_tune
    outputs = tuple(np.concatenate([p[i] for p in pieces], axis=1)[:, :draws] for i in range(len(pieces[0])))
    return state, outputs, t_tune, t_sample, tune + len(pieces) * chunk * thin
