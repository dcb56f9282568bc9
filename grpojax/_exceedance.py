"""The probability that a forecast quantity reaches a target, from the forecast's predictive distribution.

NumPy and the standard library only: the command line's forecast path reads it without importing the fits.

A window forecast (:class:`grpojax.fit.WindowForecast`) states its predictive distribution in one of two forms:

- **quantiles** (the combined forecast, ``quantiles={"taus", "values"}``): the distribution function runs
  linearly between the stated quantiles; beyond the outermost ones it follows the normal tail through the
  median and the outermost quantile (the rule by which the calibrated quantiles themselves are extended past
  their last level), so a probability is never exactly 0 or 1 from the quantiles alone. Repeated quantiles
  (a forecast clipped to the metric's range) are a point mass: ``P(Y ≥ q)`` at the repeated value counts it;
- **an interval** (the other methods: ``mean``, ``lo``, ``hi`` at ``level``): the split normal centred at the
  point whose central ``level`` interval is ``[lo, hi]``, each side's sd from its own half-width (the
  distribution :func:`grpojax.fit.split_normal_quantiles` gives quantiles of).

``bounds=(lo, hi)`` (the metric's range) makes the answer exact at the edges: 1 for a target at or below
``lo``, 0 for a target above ``hi``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from statistics import NormalDist

import numpy as np

from grpojax._errors import InvalidValueError

_N = NormalDist()
_DEFAULT_LEVEL = 0.9  # the level of a forecaster's own interval when the forecast does not say


def _ndtr(x: np.ndarray) -> np.ndarray:
    """The standard normal distribution function, elementwise (±inf map to 1 and 0)."""
    x = np.asarray(x, float)
    return np.vectorize(lambda v: 0.5 * math.erfc(-v / math.sqrt(2.0)), otypes=[float])(x) if x.size else x


def _targets(target) -> np.ndarray:
    try:
        t = np.asarray(target, float) if not isinstance(target, (str, bytes)) else None
    except (TypeError, ValueError):
        t = None
    if t is None or not np.all(np.isfinite(t)):
        raise InvalidValueError(f"target must be a finite number (or an array of them), got {target!r}")
    return t


def quantile_survival(taus, values, target) -> np.ndarray:
    """``P(Y ≥ target)`` for the distribution with quantiles ``values`` at levels ``taus`` (see the module
    docstring: linear between the quantiles, normal tails beyond, repeated values a point mass).

    Args:
        taus: increasing quantile levels in (0, 1), at least two, containing levels on both sides of 0.5.
        values: the quantiles at ``taus`` (non-decreasing; finite).
        target: a number or an array of numbers (finite).

    Returns:
        An array shaped like ``target`` (a 0-d array for a number).
    """
    tau = np.asarray(taus, float)
    q = np.asarray(values, float)
    if tau.ndim != 1 or q.shape != tau.shape or tau.size < 2:
        raise InvalidValueError(f"taus and values must be 1-d arrays of one length (at least 2), got shapes "
                                f"{tau.shape} and {q.shape}")
    if not (np.all(np.isfinite(q)) and np.all(np.isfinite(tau))):
        raise InvalidValueError("the forecast's quantiles must be finite; got a NaN or infinite quantile")
    if np.any((tau <= 0) | (tau >= 1)) or np.any(np.diff(tau) <= 0) or not tau[0] < 0.5 < tau[-1]:
        raise InvalidValueError(f"taus must increase inside (0, 1) and reach both sides of 0.5, got {tau}")
    if np.any(np.diff(q) < -1e-12 * max(1.0, float(np.max(np.abs(q))))):
        raise InvalidValueError("the forecast's quantiles must not decrease with their level")
    q = np.maximum.accumulate(q)
    t = _targets(target)
    med = float(np.interp(0.5, tau, q))
    u, first = np.unique(q, return_index=True)
    last = np.r_[first[1:] - 1, q.size - 1]
    bottom_atom, top_atom = last[0] > first[0], last[-1] > first[-1]
    F_lo, F_hi = tau[first].copy(), tau[last].copy()  # F just below / at each distinct value
    if bottom_atom:  # quantiles clipped to a lower bound: nothing lies below it
        F_lo[0] = 0.0
    if top_atom:  # clipped to an upper bound: nothing lies above it
        F_hi[-1] = 1.0
    flat = np.atleast_1d(t).ravel()
    F_left = np.empty(flat.shape)  # F(t-) = P(Y < t)
    for n, x in enumerate(flat):
        if x < u[0]:
            F_left[n] = 0.0 if bottom_atom or not u[0] < med else float(
                _ndtr(_N.inv_cdf(tau[0]) * (x - med) / (u[0] - med)))
        elif x > u[-1]:
            F_left[n] = 1.0 if top_atom or not u[-1] > med else float(
                _ndtr(_N.inv_cdf(tau[-1]) * (x - med) / (u[-1] - med)))
        else:
            j = int(np.searchsorted(u, x, side="left"))
            if u[j] == x:  # at a stated quantile: what lies strictly below it
                F_left[n] = F_lo[j]
            else:  # between u[j-1] and u[j]: linear from F(u[j-1]) to F(u[j]-)
                a = (x - u[j - 1]) / (u[j] - u[j - 1])
                F_left[n] = F_hi[j - 1] + a * (F_lo[j] - F_hi[j - 1])
    out = np.clip(1.0 - F_left, 0.0, 1.0).reshape(np.shape(t))
    return out


def split_normal_survival(point, lo, hi, level, target) -> np.ndarray:
    """``P(Y ≥ target)`` for the split normal centred at ``point`` (its median) whose central ``level``
    interval is ``[lo, hi]``; a side of zero width is a point mass at ``point``."""
    vals = [float(v) for v in (point, lo, hi)]
    if not all(math.isfinite(v) for v in vals):
        raise InvalidValueError(f"the forecast's point and interval must be finite, got point={point!r}, "
                                f"lo={lo!r}, hi={hi!r}")
    p, a, b = vals
    if not a <= p <= b:
        raise InvalidValueError(f"the forecast's interval must hold its point, got {a:g} <= {p:g} <= {b:g} false")
    if not 0.0 < float(level) < 1.0:
        raise InvalidValueError(f"level must be in (0, 1), got {level!r}")
    z = _N.inv_cdf(0.5 + float(level) / 2.0)
    t = _targets(target)
    sd = np.where(t >= p, (b - p) / z, (p - a) / z)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(sd > 0, (t - p) / np.where(sd > 0, sd, 1.0), np.where(t > p, np.inf, -np.inf))
    return 1.0 - _ndtr(s)


def _get(forecast, name, default=None):
    if isinstance(forecast, Mapping):
        return forecast.get(name, default)
    return getattr(forecast, name, default)


def prob_at_least(forecast, target, *, bounds=None):
    """The probability that the forecast quantity (a window forecast's window mean) is at least ``target``.

    Args:
        forecast: a :class:`grpojax.fit.WindowForecast`, or a mapping with its fields: ``quantiles``
            (``{"taus", "values"}``) when present and not None, else ``mean``, ``lo``, ``hi`` and ``level``
            (default 0.9, the level of a forecaster's own interval in ``WindowForecast.components``).
        target: a finite number or array of numbers.
        bounds: ``(lo, hi)`` the quantity can take, or None. A target at or below ``lo`` is reached with
            probability 1, one above ``hi`` with probability 0.

    Returns:
        A float for a number, an array shaped like ``target`` for an array.

    Raises:
        InvalidValueError: a target that is not a finite number, bad bounds, or a forecast without a
            finite predictive distribution.
    """
    t = _targets(target)
    quant = _get(forecast, "quantiles")
    if quant is not None:
        out = quantile_survival(quant["taus"], quant["values"], t)
    else:
        point, lo, hi = (_get(forecast, k) for k in ("mean", "lo", "hi"))
        if point is None or lo is None or hi is None:
            raise InvalidValueError(f"forecast must be a WindowForecast or carry quantiles or mean, lo and hi; "
                                    f"got {type(forecast).__name__}")
        out = split_normal_survival(point, lo, hi, _get(forecast, "level", _DEFAULT_LEVEL), t)
    if bounds is not None:
        try:
            b_lo, b_hi = (float(v) for v in bounds)
        except (TypeError, ValueError):
            raise InvalidValueError(f"bounds must be a (lo, hi) pair of numbers, got {bounds!r}") from None
        if not b_lo < b_hi:
            raise InvalidValueError(f"bounds must have lo < hi, got {bounds!r}")
        out = np.where(t <= b_lo, 1.0, np.where(t > b_hi, 0.0, out))
    out = np.asarray(out, float)
    return float(out) if out.ndim == 0 else out
