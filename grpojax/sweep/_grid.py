"""Parameter grids for bandit sweeps: Cartesian products of knobs, split by static modes.

A grid is a table with one row per configuration. Numeric knobs become array leaves of one batched
:class:`grpojax.bandit.BanditConfig`; the string modes (``lag``, ``advantage``, ``gradient``) are static,
so rows are grouped by mode and every group runs as one compiled, vmapped call.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from grpojax._errors import InvalidValueError
from grpojax.bandit import ADVANTAGES, GRADIENTS, LAGS, BanditConfig

__all__ = ["Grid", "make_grid", "NUMERIC_KNOBS", "MODE_KNOBS"]

NUMERIC_KNOBS = ("eta", "eta_rel", "eta_rel_osc", "mu", "k_ref", "group_size", "beta", "p_ref", "p_init", "p_star", "k_instant",
                 "clip_eps", "adv_eps", "replica")
"""Sweepable numeric knobs. ``eta_rel`` sets η = eta_rel · η*_exact (the exact discrete threshold of that
row), ``eta_rel_osc`` sets η = eta_rel_osc · η_osc (the exact overdamped → oscillatory boundary); ``p_star`` calibrates the KL anchor so that the plateau is p* (``k_instant`` optionally fixes K_0);
``replica`` is a label only (independent Monte Carlo copies of otherwise equal rows)."""

MODE_KNOBS = {"lag": LAGS, "advantage": ADVANTAGES, "gradient": GRADIENTS}

_DEFAULTS: dict[str, Any] = dict(mu=0.0, k_ref=1, group_size=8, beta=0.0, p_ref=0.5, p_init=0.5, clip_eps=0.2,
                                 adv_eps=0.0, lag="constant", advantage="grpo", gradient="stale")


@dataclass
class Grid:
    """Rows of a sweep (``columns[name][i]`` is knob ``name`` of row i); see :func:`make_grid`."""

    columns: dict[str, np.ndarray]
    axes: dict[str, list] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(next(iter(self.columns.values())))

    def groups(self) -> Iterator[tuple[dict[str, str], np.ndarray]]:
        """(static modes, row indices) for each combination of the mode knobs present in the grid."""
        modes = {m: self.columns[m] for m in MODE_KNOBS}
        keys = list(zip(*(modes[m] for m in MODE_KNOBS)))
        for combo in sorted(set(keys)):
            idx = np.array([i for i, k in enumerate(keys) if k == combo], dtype=np.int64)
            yield {m: str(v) for m, v in zip(MODE_KNOBS, combo)}, idx


def make_grid(**axes: Any) -> Grid:
    """Cartesian product of knob values.

    Args:
        **axes: knob name → value or list of values. Numeric knobs: :data:`NUMERIC_KNOBS`; modes: ``lag``,
            ``advantage``, ``gradient`` (strings or lists of them). Exactly one of ``eta`` / ``eta_rel`` is
            required. A knob given as a dict ``{"zip": {...}}`` is not supported; use several grids.

    Returns:
        :class:`Grid` with one row per combination (the last axis varies fastest).

    Raises:
        ValueError: on an unknown knob, an unknown mode value, an empty axis or invalid values (the
            message names the knob and the value, as :class:`BanditConfig` does).

    Example:
        >>> g = make_grid(eta=[0.1, 0.2], k_ref=[1, 2, 4], mu=0.9)
        >>> len(g), sorted(g.columns)[:3]
        (6, ['adv_eps', 'advantage', 'beta'])
    """
    unknown = sorted(set(axes) - set(NUMERIC_KNOBS) - set(MODE_KNOBS))
    if unknown:
        raise InvalidValueError(f"unknown sweep knob(s) {unknown}; expected some of {NUMERIC_KNOBS + tuple(MODE_KNOBS)}")
    if sum(k in axes for k in ("eta", "eta_rel", "eta_rel_osc")) != 1:
        raise InvalidValueError("give exactly one of eta (absolute), eta_rel (multiple of the exact stability "
                         "threshold) or eta_rel_osc (multiple of the exact oscillatory boundary)")
    lists: dict[str, list] = {}
    for name, val in axes.items():
        vals = list(np.atleast_1d(np.asarray(val, dtype=object))) if not isinstance(val, str) else [val]
        if not vals:
            raise InvalidValueError(f"sweep axis {name} is empty")
        if name in MODE_KNOBS:
            for v in vals:
                if v not in MODE_KNOBS[name]:
                    raise InvalidValueError(f"{name} must be one of {MODE_KNOBS[name]}, got {name}={v!r}")
        lists[name] = vals
    names = list(lists)
    rows = list(itertools.product(*(lists[n] for n in names)))
    cols: dict[str, np.ndarray] = {}
    for j, n in enumerate(names):
        col = [r[j] for r in rows]
        cols[n] = np.asarray(col, dtype=object if n in MODE_KNOBS else float)
    for n, d in _DEFAULTS.items():
        if n not in cols:
            cols[n] = np.full(len(rows), d, dtype=object if n in MODE_KNOBS else float)
    for n in MODE_KNOBS:
        cols[n] = cols[n].astype(str)
    # validate the numeric knobs through the config's own checks (clear messages)
    probe_eta = cols["eta"] if "eta" in cols else np.ones(len(rows))
    BanditConfig(probe_eta, cols["mu"], cols["k_ref"], cols["group_size"], beta=cols["beta"], p_ref=cols["p_ref"],
                 p_init=cols["p_init"], clip_eps=cols["clip_eps"], adv_eps=cols["adv_eps"])
    if "p_star" in cols and not np.all((cols["p_star"] > 0) & (cols["p_star"] < 1)):
        raise InvalidValueError(f"p_star must be in (0, 1), got p_star={cols['p_star'][~((cols['p_star'] > 0) & (cols['p_star'] < 1))][0]!r}")
    for rel in ("eta_rel", "eta_rel_osc"):
        if rel in cols and not np.all(cols[rel] > 0):
            raise InvalidValueError(f"{rel} must be > 0, got {rel}={cols[rel][cols[rel] <= 0][0]!r}")
    return Grid(cols, {n: lists[n] for n in names})
