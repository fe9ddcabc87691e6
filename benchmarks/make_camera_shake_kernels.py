"""Generate ``bayeszoo/datasets/data/camera_shake_kernels.npz``: camera-shake blur kernels in the style of Levin et al.
(2009), for the ``bid_shake`` benchmark (``python benchmarks/make_camera_shake_kernels.py``; seeded, so the file
is reproduced byte for byte by the same numpy).

Each kernel is the path of a camera shake: a random walk with momentum (the velocity is a damped sum of Gaussian
kicks, the position its running sum), sampled at sub-pixel steps; every sample is splatted bilinearly onto the
grid and the samples are accumulated (the time the sensor spends at each position), then the odd square window of
the requested side centred on the kernel's centre of mass (rounded to a pixel) is taken and normalised to sum 1.
The path is scaled so that its extent fills the side less one pixel, or less when a lopsided path, so centred, would
otherwise cross the window's edge: every kernel holds its whole path.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

SIDES = (9, 13, 13, 17, 19, 21, 23, 25)   # one kernel per entry
SEED = 2011
STEPS = 400           # sub-pixel samples per path
MOMENTUM = 0.95       # fraction of the velocity kept at each step
OUT = Path(__file__).resolve().parents[1] / "bayeszoo" / "datasets" / "data" / "camera_shake_kernels.npz"


def shake_path(rng) -> np.ndarray:
    """(STEPS, 2) positions of a random walk with momentum, started at rest at the origin."""
    vel = np.zeros(2)
    pos = np.zeros((STEPS, 2))
    for t in range(1, STEPS):
        vel = MOMENTUM * vel + rng.standard_normal(2)
        pos[t] = pos[t - 1] + vel
    return pos


def splat(path, side: int) -> np.ndarray:
    """The path's samples accumulated bilinearly on the grid, centred by their centre of mass in a side x side
    window (mass falling outside the window is lost: ``fit_path`` scales the path so that none does)."""
    k = np.zeros((side + 2, side + 2))
    for r, c in path:
        r0, c0 = int(np.floor(r)), int(np.floor(c))
        fr, fc = r - r0, c - c0
        k[r0, c0] += (1 - fr) * (1 - fc)
        k[r0 + 1, c0] += fr * (1 - fc)
        k[r0, c0 + 1] += (1 - fr) * fc
        k[r0 + 1, c0 + 1] += fr * fc
    x = np.arange(k.shape[0])
    cr = int(round(float(np.sum(k.sum(axis=1) * x) / k.sum())))
    cc = int(round(float(np.sum(k.sum(axis=0) * x) / k.sum())))
    big = np.pad(k, side)
    half = side // 2
    return big[cr + side - half:cr + side + half + 1, cc + side - half:cc + side + half + 1]


def fit_path(path, side: int) -> np.ndarray:
    """The path scaled so that its extent fills side - 1 pixels, and shrunk by 2 % steps while its splat, centred by
    its centre of mass, would lose samples over the window's edge (a lopsided path)."""
    path = path - path.min(axis=0)
    path *= (side - 2) / max(path.max(), 1e-12)
    while splat(path, side).sum() < len(path) * (1 - 1e-9):   # splatting gives every sample a unit weight
        path *= 0.98
    return path


def kernel(rng, side: int) -> np.ndarray:
    out = splat(fit_path(shake_path(rng), side), side)
    return out / out.sum()


def main() -> None:
    rng = np.random.default_rng(SEED)
    kernels = {f"k{i}": kernel(rng, s) for i, s in enumerate(SIDES)}
    np.savez_compressed(OUT, **kernels)
    print(OUT, {k: v.shape for k, v in kernels.items()})


if __name__ == "__main__":
    main()
