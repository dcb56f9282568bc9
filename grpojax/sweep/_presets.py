"""Named sweep grids (presets): the grids behind ``grpojax sweep --preset NAME``.

Each preset is a two-arm bandit grid with one η axis (``size`` points) and one other axis, a default
number of GRPO steps, and the two columns a phase diagram of it puts on its axes.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from grpojax._errors import InvalidValueError
from grpojax.sweep._grid import Grid, make_grid

__all__ = ["PRESETS", "SweepPreset", "sweep_preset"]

PRESETS = {
    "stability": "η/η*_exact × K_ref (μ = 0.9, constant lag, started at p* = 0.8): limit-cycle onset vs prediction",
    "transition": "η × K_ref from p = 0.7 (μ = 0.9, constant lag): overdamped / oscillatory / unstable regions",
    "group-size": "G × η (μ = 0.9, K_ref = 4): noise level and regimes vs group size",
}
"""Preset name → one-line description of its grid."""


class SweepPreset(NamedTuple):
    """A preset grid ready to run.

    Attributes:
        name: the preset's name (a key of :data:`PRESETS`).
        grid: the rows (:func:`grpojax.sweep.make_grid`).
        num_steps: GRPO steps per configuration.
        x: the column for the x axis of a phase diagram (``eta`` or ``eta_rel``).
        y: the column for the y axis (``k_ref`` or ``group_size``).
    """

    name: str
    grid: Grid
    num_steps: int
    x: str
    y: str


def sweep_preset(name: str, size: int = 6, num_steps: int | None = None) -> SweepPreset:
    """The grid of preset ``name`` with ``size`` points along its η axis.

    Args:
        name: one of :data:`PRESETS` (``stability``, ``transition``, ``group-size``).
        size: points along the η axis (≥ 2).
        num_steps: GRPO steps per configuration; None for the preset's default (8000 for ``stability``,
            2000 otherwise).

    Returns:
        :class:`SweepPreset`.

    Raises:
        ValueError: unknown ``name``, ``size`` < 2 or ``num_steps`` < 1.
    """
    if name not in PRESETS:
        raise InvalidValueError(f"unknown sweep preset {name!r}; expected one of {sorted(PRESETS)}")
    if int(size) != size or size < 2:
        raise InvalidValueError(f"size must be an integer >= 2, got {size!r}")
    if num_steps is not None and (int(num_steps) != num_steps or num_steps < 1):
        raise InvalidValueError(f"num_steps must be an integer >= 1 or None, got {num_steps!r}")
    n = int(size)
    if name == "stability":
        grid = make_grid(eta_rel=list(np.round(np.linspace(0.8, 1.2, n), 4)), k_ref=[2, 4, 8], mu=0.9,
                         group_size=2**16, p_star=0.8, p_init=0.8)
        return SweepPreset(name, grid, num_steps or 8000, "eta_rel", "k_ref")
    if name == "transition":
        grid = make_grid(eta=list(np.geomspace(0.004, 1.0, n)), k_ref=[1, 2, 4, 8, 16], mu=0.9, group_size=4096,
                         p_star=0.8, p_init=0.7)
        return SweepPreset(name, grid, num_steps or 2000, "eta", "k_ref")
    grid = make_grid(eta=list(np.geomspace(0.01, 0.5, n)), group_size=[4, 16, 64, 256], k_ref=4, mu=0.9,
                     p_star=0.8, p_init=0.7)
    return SweepPreset(name, grid, num_steps or 2000, "eta", "group_size")
