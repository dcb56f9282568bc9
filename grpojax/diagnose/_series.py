"""Run-log access and small robust statistics shared by the detectors.

The detectors accept a :class:`grpojax.logs.RunLog` or any mapping of canonical column names to
1-d arrays (e.g. the output of ``grpojax.bandit.rollout_log``, optionally with a ``"step"`` entry).
Everything here is plain NumPy/SciPy: the curves are at most a few 10^5 points and the statistics
are order statistics and least-squares slopes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
from scipy import stats


class Run(NamedTuple):
    """A run log reduced to what the detectors need.

    Attributes:
        name: run name.
        steps: (N,) float64 steps, strictly increasing.
        columns: ``{name: (N,) float64}`` aligned with ``steps``; NaN where not logged.
    """

    name: str
    steps: np.ndarray
    columns: dict[str, np.ndarray]

    def has(self, col: str, min_points: int = 1) -> bool:
        """Whether ``col`` exists with at least ``min_points`` finite values."""
        v = self.columns.get(col)
        return v is not None and int(np.isfinite(v).sum()) >= min_points

    def series(self, col: str) -> tuple[np.ndarray, np.ndarray]:
        """``(steps, values)`` of ``col`` with NaN rows dropped (infinities are kept)."""
        v = self.columns.get(col)
        if v is None:
            return np.zeros(0), np.zeros(0)
        keep = ~np.isnan(v)
        return self.steps[keep], v[keep]

    def count(self, col: str) -> int:
        v = self.columns.get(col)
        return 0 if v is None else int((~np.isnan(v)).sum())


def as_run(run: Any, *, name: str | None = None) -> Run:
    """Convert a ``RunLog`` or a mapping of arrays into a :class:`Run`.

    Args:
        run: a ``grpojax.logs.RunLog`` (anything with ``steps`` and ``columns``) or a mapping
            ``{column: (N,) array}``; a ``"step"``/``"steps"`` entry gives the steps (else 0..N-1).
            2-d columns (e.g. per-arm vectors) are ignored.
        name: overrides the run's name.

    Raises:
        ValueError: columns of different lengths, or steps not strictly increasing.
    """
    if hasattr(run, "columns") and hasattr(run, "steps"):
        steps = np.asarray(run.steps, dtype=np.float64)
        cols_in = dict(run.columns)
        rname = name or getattr(run, "name", "run")
    elif isinstance(run, Mapping):
        cols_in = dict(run)
        steps = cols_in.pop("step", None)
        if steps is None:
            steps = cols_in.pop("steps", None)
        given = cols_in.pop("name", None)
        rname = name or (given if isinstance(given, str) else "run")
        lengths = {k: np.shape(v)[0] for k, v in cols_in.items() if np.ndim(v) >= 1}
        n = max(lengths.values()) if lengths else 0
        steps = np.arange(n, dtype=np.float64) if steps is None else np.asarray(steps, dtype=np.float64)
    else:
        raise ValueError(f"expected a RunLog or a mapping of column arrays, got {type(run).__name__}")
    steps = np.asarray(steps, dtype=np.float64).reshape(-1)
    if steps.size > 1 and not np.all(np.diff(steps) > 0):
        raise ValueError(f"run {rname!r}: steps must be strictly increasing")
    cols: dict[str, np.ndarray] = {}
    for k, v in cols_in.items():
        a = np.asarray(v)
        if a.ndim != 1 or not np.issubdtype(a.dtype, np.number):
            continue
        if a.shape[0] != steps.shape[0]:
            raise ValueError(f"run {rname!r}: column {k!r} has {a.shape[0]} values but there are "
                             f"{steps.shape[0]} steps")
        cols[str(k)] = a.astype(np.float64)
    return Run(rname, steps, cols)


# ----------------------------------------------------------------------------- statistics


def edge_windows(n: int, fraction: float, min_points: int) -> tuple[slice, slice]:
    """Index slices of the first and last ``fraction`` of ``n`` points (at least ``min_points``)."""
    w = max(min_points, int(round(fraction * n)))
    w = min(w, max(n // 2, 1))
    return slice(0, w), slice(n - w, n)


def moving_average(y: np.ndarray, window: int) -> np.ndarray:
    """Centred moving average with shrinking windows at the ends (same length as ``y``)."""
    y = np.asarray(y, dtype=np.float64)
    window = max(1, int(window))
    if window == 1 or y.size == 0:
        return y.copy()
    c = np.concatenate([[0.0], np.cumsum(y)])
    n = y.size
    half = window // 2
    lo = np.clip(np.arange(n) - half, 0, n)
    hi = np.clip(np.arange(n) - half + window, 0, n)
    return (c[hi] - c[lo]) / (hi - lo)


class Slope(NamedTuple):
    slope: float
    stderr: float
    t: float
    n: int


def ols_slope(x: np.ndarray, y: np.ndarray) -> Slope:
    """Least-squares slope of ``y`` on ``x`` with its standard error (``scipy.stats.linregress``).

    For fewer than 3 points, or constant ``x``, the slope is NaN. A perfectly linear series has
    stderr 0 and ``t = +-inf`` (0 when the slope is 0 too).
    """
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    if x.size < 3 or np.ptp(x) == 0:
        return Slope(float("nan"), float("nan"), float("nan"), int(x.size))
    r = stats.linregress(x, y)
    se = float(r.stderr)
    if se > 0:
        t = float(r.slope) / se
    else:
        t = 0.0 if r.slope == 0 else float(np.sign(r.slope) * np.inf)
    return Slope(float(r.slope), se, t, int(x.size))


def robust_scale(y: np.ndarray) -> float:
    """Spread of a curve: the 5-95 percentile range (0 for fewer than two finite points)."""
    y = np.asarray(y, float)
    y = y[np.isfinite(y)]
    if y.size < 2:
        return 0.0
    lo, hi = np.percentile(y, [5, 95])
    return float(hi - lo)


def episodes_from_mask(steps: np.ndarray, mask: np.ndarray, *, min_len: int = 1) -> list[tuple[float, float]]:
    """Contiguous runs of ``True`` in ``mask`` as ``(first_step, last_step)`` pairs."""
    mask = np.asarray(mask, bool)
    out: list[tuple[float, float]] = []
    i, n = 0, mask.size
    while i < n:
        if mask[i]:
            j = i
            while j + 1 < n and mask[j + 1]:
                j += 1
            if j - i + 1 >= min_len:
                out.append((float(steps[i]), float(steps[j])))
            i = j + 1
        else:
            i += 1
    return out


def lag1_autocorr(r: np.ndarray) -> float:
    """Lag-1 autocorrelation of a residual series (NaN for fewer than 4 points or zero variance)."""
    r = np.asarray(r, float)
    r = r[np.isfinite(r)]
    if r.size < 4:
        return float("nan")
    r = r - r.mean()
    den = float(np.dot(r, r))
    if den == 0:
        return float("nan")
    return float(np.dot(r[:-1], r[1:]) / den)
