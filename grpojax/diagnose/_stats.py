"""Small robust statistics shared by the detectors.

NumPy only on the diagnose path (no SciPy and no JAX: importing ``scipy.special`` or ``scipy.ndimage`` costs
about 0.15 s of CPU, half of what a whole command-line report may take, for statistics of a few thousand
points; the F distribution's tail comes from ``mpmath``; the tests check each function against SciPy):
order statistics, least-squares slopes, running medians and the F distribution's tail. Smoothing is :func:`grpojax.logs.moving_average`
with ``edge="shrink"`` (the detectors need a value at every point, also near the ends).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from grpojax.logs import moving_average

__all__ = ["dot", "linregress", "running_median", "running_quantile", "f_sf", "rankdata", "edge_windows", "early_window", "initial_window", "clip_window", "centred_mean", "Slope", "ols_slope", "robust_scale", "episodes_from_mask", "lag1_autocorr"]


# ----------------------------------------------------------------------------- statistics


class LinRegress(NamedTuple):
    slope: float
    intercept: float
    stderr: float


def dot(a: np.ndarray, b: np.ndarray) -> float:
    """Inner product of two 1-d float arrays, in one thread (``np.einsum``, not BLAS: a BLAS dot of a long
    vector, ``a @ b``, starts its worker threads and waits for them, which costs milliseconds a call
    instead of microseconds on a busy machine)."""
    return float(np.einsum("i,i->", a, b))


def linregress(x: np.ndarray, y: np.ndarray) -> LinRegress:
    """Least-squares line of ``y`` on ``x`` with the slope's standard error (``scipy.stats.linregress``'s
    slope, intercept and stderr, in NumPy). Needs >= 3 points and a non-constant ``x``."""
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    n = x.size
    xm, ym = x.mean(), y.mean()
    dx, dy = x - xm, y - ym
    sxx = dot(dx, dx)
    slope = dot(dx, dy) / sxx
    resid = dy - slope * dx
    se = float(np.sqrt(max(dot(resid, resid), 0.0) / (n - 2) / sxx)) if n > 2 else float("nan")
    return LinRegress(slope, float(ym - slope * xm), se)


def running_median(v: np.ndarray, k: int) -> np.ndarray:
    """Running median over ``min(k, len(v))`` points with mirrored ends (``d c b | a b c d | c b a``, no
    repeated edge value): the numbers of ``scipy.ndimage.median_filter(v, size, mode="mirror")`` (for an even
    size its window reaches one point further back and it takes the rank ``size // 2``), in NumPy."""
    v = np.asarray(v, float)
    n = v.size
    k = max(1, min(int(k), n))
    if k == 1 or n <= 1:
        return v.copy()
    lo, hi = k // 2, k - 1 - k // 2
    pad = np.pad(v, (lo, hi), mode="reflect") if max(lo, hi) < n else _mirror_pad(v, lo, hi)
    win = np.lib.stride_tricks.sliding_window_view(pad, k)
    out = np.empty(n)
    rows = max(1, _MEDIAN_CHUNK // k)  # windows sorted a block at a time: memory bounded on a long series
    for a in range(0, n, rows):
        out[a:a + rows] = np.partition(win[a:a + rows], lo, axis=1)[:, lo]
    return out


_MEDIAN_CHUNK = 1 << 20  # values partitioned at once by running_median (8 MB)


def running_quantile(v: np.ndarray, k: int, q: float) -> np.ndarray:
    """Running ``q``-quantile (linear interpolation, ``np.quantile``'s default) over ``min(k, len(v))``
    points with the same mirrored ends and window as :func:`running_median` (``q = 0.5`` with an odd ``k``
    gives its numbers)."""
    v = np.asarray(v, float)
    n = v.size
    k = max(1, min(int(k), n))
    if k == 1 or n <= 1:
        return v.copy()
    lo, hi = k // 2, k - 1 - k // 2
    pad = np.pad(v, (lo, hi), mode="reflect") if max(lo, hi) < n else _mirror_pad(v, lo, hi)
    return np.quantile(np.lib.stride_tricks.sliding_window_view(pad, k), q, axis=1)


def _mirror_pad(v: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Mirror padding wider than the array (repeated reflection)."""
    n = v.size
    period = np.r_[np.arange(n), np.arange(n - 2, 0, -1)]
    idx = np.arange(-lo, n + hi) % period.size
    return v[period[idx]]


def f_sf(x: float, d1: float, d2: float) -> float:
    """Survival function P(F > x) of the F(d1, d2) distribution (``scipy.special.fdtrc``'s numbers): the
    regularised incomplete beta function ``I_z(d2/2, d1/2)`` at ``z = d2 / (d2 + d1 x)``, from ``mpmath``
    (a pure-Python import of about 0.02 s; ``scipy.special`` costs about 0.15 s of CPU, half of a
    command-line report)."""
    if np.isnan(x):
        return 1.0  # no statistic: no evidence
    x = max(float(x), 0.0)
    if np.isinf(x):
        return 0.0
    import mpmath  # noqa: PLC0415  (only when a detector needs it)

    return float(mpmath.betainc(d2 / 2.0, d1 / 2.0, 0.0, d2 / (d2 + d1 * x), regularized=True))


def rankdata(a: np.ndarray) -> np.ndarray:
    """Ranks 1..n with ties given their average rank (``scipy.stats.rankdata``'s default). Not imported from
    scipy.stats: importing it costs 0.4-0.5 s (measured under load), a sixth of the diagnose budget, for
    the Spearman correlation that runs with eval points report."""
    a = np.asarray(a, float)
    order = np.argsort(a, kind="stable")
    ranks = np.empty(a.size, float)
    ranks[order] = np.arange(1, a.size + 1)
    _, inv, counts = np.unique(a, return_inverse=True, return_counts=True)
    return np.bincount(inv, weights=ranks)[inv] / counts[inv]


def edge_windows(n: int, fraction: float, min_points: int) -> tuple[slice, slice]:
    """Index slices of the first and last ``fraction`` of ``n`` points (at least ``min_points``)."""
    w = max(min_points, int(round(fraction * n)))
    w = min(w, max(n // 2, 1))
    return slice(0, w), slice(n - w, n)


def clip_window(n: int, fraction: float, lo: int, hi: int) -> int:
    """``round(fraction * n)`` points, clipped to ``[lo, hi]`` and to at most ``n``."""
    return int(max(1, min(n, max(lo, min(hi, int(round(fraction * n)))))))


def early_window(n: int, cfg) -> slice:
    """The early reference window: the first ``min(early_points, edge_fraction * n)`` points, at least
    ``min_window_points`` -- a fixed number of points once the run is long enough, never a growing
    fraction of it."""
    return slice(0, min(clip_window(n, cfg.edge_fraction, cfg.min_window_points, cfg.early_points), max(n // 2, 1)))


def initial_window(n: int, cfg) -> slice:
    """The first ``initial_points`` points (at most half of the run): a curve's initial level."""
    return slice(0, max(1, min(cfg.initial_points, max(n // 2, 1))))


def centred_mean(y: np.ndarray, window: int) -> np.ndarray:
    """Centred moving average over ``max(1, window)`` points, shrinking at the ends (same length)."""
    return moving_average(y, max(1, int(window)), edge="shrink")


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
    r = linregress(x, y)
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
