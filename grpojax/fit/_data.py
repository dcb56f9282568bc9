"""Validation and normalisation of reward curves before any fit (host-side, concrete NumPy).

Every public fit entry point calls :func:`check_curve` first, so that bad input fails with one
clear ``ValueError`` instead of deep inside JAX:

- fewer than ``MIN_POINTS`` (8) finite observations;
- NaN/inf rewards (single-curve fits; the batched least squares treats NaN as *missing*, see
  :func:`grpojax.fit.fit_laws_batched`);
- steps that are not finite and strictly increasing;
- a constant curve (zero variance: nothing to fit).

Fits run in normalised units (``t_n = (t − t₀)/span``, ``y_n = (y − centre)/scale``) so that the
same starting values and priors work for any step count and reward scale; results are mapped back.
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

import numpy as np

from grpojax._arrays import real_array
from grpojax._errors import InvalidValueError

MIN_POINTS = 8
"""Fewest finite observations a curve may have (three_phase has 4 parameters + noise)."""


class Curve(NamedTuple):
    """A validated curve in normalised units.

    Attributes:
        steps: original steps ``(T,)`` (float64).
        y: original rewards ``(T,)`` (NaN where missing).
        t: normalised time ``(steps − t0)/span`` in [0, 1], ``(T,)``.
        yn: normalised rewards ``(y − center)/scale`` (NaN where missing), ``(T,)``.
        mask: ``True`` where observed, ``(T,)``.
        t0, span, center, scale: the normalisation (floats).
    """

    steps: np.ndarray
    y: np.ndarray
    t: np.ndarray
    yn: np.ndarray
    mask: np.ndarray
    t0: float
    span: float
    center: float
    scale: float

    def to_steps(self, t_n):
        return self.t0 + np.asarray(t_n) * self.span

    def to_t(self, steps):
        return (np.asarray(steps, float) - self.t0) / self.span

    def to_reward(self, y_n):
        return self.center + np.asarray(y_n) * self.scale


def check_steps(steps, name: str = "steps") -> np.ndarray:
    """Finite, 1-d, strictly increasing steps as float64, else ``ValueError``."""
    s = real_array(steps, name, text=True)
    if s.ndim != 1:
        raise InvalidValueError(f"{name} must be a 1-d array, got shape {s.shape}")
    if not np.all(np.isfinite(s)):
        raise InvalidValueError(f"{name} must be finite, got {name}[{int(np.argmin(np.isfinite(s)))}]={s[~np.isfinite(s)][0]!r}")
    if s.size > 1 and not np.all(np.diff(s) > 0):
        i = int(np.argmin(np.diff(s) > 0))
        raise InvalidValueError(f"{name} must be strictly increasing, got {name}[{i}]={s[i]!r} >= {name}[{i + 1}]={s[i + 1]!r}")
    return s


def check_bounds(bounds) -> tuple[float, float]:
    """``bounds`` (a metric's range ``(lo, hi)``, or None) as two floats; None is ``(-inf, inf)``.

    Raises:
        ValueError: anything but two finite numbers ``lo < hi`` (one line naming the value).
    """
    if bounds is None:
        return -np.inf, np.inf
    try:
        lo, hi = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise InvalidValueError(f"bounds must be a pair (lo, hi) of numbers or None, got {bounds!r}") from None
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise InvalidValueError(f"bounds must be two finite numbers lo < hi, got {bounds!r}")
    return lo, hi


_UNIT_INTERVAL = re.compile(r"(^|[^a-z0-9])(acc|accuracy|pass@\d+|pass|passrate|success|solve|solved|correct|win)"
                            r"(_?rate)?($|[^a-z0-9])|(^|[^a-z0-9])frac(_|$)")


def metric_bounds(name: str) -> tuple[float, float] | None:
    """The range of a metric known by its name: ``(0, 1)`` for accuracies, pass rates, success, solve and
    win rates and fractions (``eval_accuracy``, ``pass@1``, ``rewards/accuracy_reward``, ``frac_zero_std``);
    None (unknown range) for anything else, rewards included (a reward's scale is the user's choice)."""
    return (0.0, 1.0) if isinstance(name, str) and _UNIT_INTERVAL.search(name.lower()) else None


def spread(y: np.ndarray) -> float:
    """The standard deviation of finite values, without underflow: computed on ``y / max|y|`` and scaled back
    (``np.std`` of values near 1e-300 squares them to zero)."""
    y = np.asarray(y, dtype=float)
    top = float(np.max(np.abs(y))) if y.size else 0.0
    if not 0.0 < top < math.inf:
        return float(np.std(y)) if y.size else 0.0
    return float(np.std(y / top)) * top


def is_flat(y: np.ndarray, scale: float | None = None) -> bool:
    """True when finite values ``y`` hold nothing to fit: their spread (``scale``, default :func:`spread`) is
    zero or below 1e-12 of their largest magnitude. Relative, so a curve logged in tiny units is a curve."""
    scale = spread(y) if scale is None else scale
    return not scale > 1e-12 * float(np.max(np.abs(y)))


def check_curve(steps, values, *, allow_missing: bool = False, min_points: int = MIN_POINTS) -> Curve:
    """Validate a reward curve and return it normalised.

    Args:
        steps: ``(T,)`` strictly increasing finite steps.
        values: ``(T,)`` rewards. NaN is an error unless ``allow_missing`` (then it marks a missing
            observation); ±inf is always an error.
        allow_missing: accept NaN as missing.
        min_points: fewest finite observations required.

    Returns:
        :class:`Curve`.

    Raises:
        ValueError: naming the problem (length mismatch, too few points, NaN/inf, non-increasing
            steps, constant curve).
    """
    s = check_steps(steps)
    y = real_array(values, "rewards", text=True)
    if y.shape != s.shape:
        raise InvalidValueError(f"values must have the same shape as steps, got {y.shape} and {s.shape}")
    if np.any(np.isinf(y)):
        i = int(np.argmax(np.isinf(y)))
        raise InvalidValueError(f"rewards must be finite, got values[{i}]={y[i]!r} at step {s[i]:g}")
    mask = np.isfinite(y)
    if not allow_missing and not np.all(mask):
        i = int(np.argmin(mask))
        raise InvalidValueError(
            f"rewards must be finite, got values[{i}]=nan at step {s[i]:g} (drop missing steps, or use "
            "a model that accepts NaN as missing)"
        )
    n = int(mask.sum())
    if n < min_points:
        raise InvalidValueError(f"a curve needs at least {min_points} finite points to fit, got {n}")
    obs = y[mask]
    scale = spread(obs)
    if is_flat(obs, scale):
        raise InvalidValueError(f"the curve is constant (every reward = {float(obs[0]):g}): there is nothing to fit")
    t0 = float(s[0])
    span = float(s[-1] - s[0])
    center = float(np.mean(obs))
    return Curve(
        steps=s,
        y=y,
        t=(s - t0) / span,
        yn=(y - center) / scale,
        mask=mask,
        t0=t0,
        span=span,
        center=center,
        scale=scale,
    )


def noise_variance(y: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Observation-noise variance estimated from second differences: ``mean((Δ²y)²)/6``.

    For ``y = f + ε`` with smooth ``f`` and white ``ε`` of variance σ², ``Var(Δ²ε) = 6σ²``, while
    ``Δ²f`` is second order in the step. Missing points are skipped; ``(..., T)`` → ``(...)``.
    Positively autocorrelated noise makes this an underestimate (the ceiling is then optimistic).
    """
    y = np.asarray(y, dtype=float)
    mask = np.isfinite(y) if mask is None else (np.asarray(mask, bool) & np.isfinite(y))
    flat_y, flat_m = y.reshape(-1, y.shape[-1]), mask.reshape(-1, y.shape[-1])
    out = np.full(flat_y.shape[0], np.nan)
    for i in range(flat_y.shape[0]):
        obs = flat_y[i, flat_m[i]]
        if obs.size >= 3:
            out[i] = np.mean(np.diff(obs, 2) ** 2) / 6.0
    return out.reshape(y.shape[:-1])
