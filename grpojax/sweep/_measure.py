"""Summary statistics of recorded bandit trajectories and the measured regime.

From a trace p_j = p(t_j), t_j = (j + 1)·stride, j = 0..W−1, with the late window the last L = late_frac·W
points:

- ``late_mean``, ``late_std``, ``late_amp`` (half the peak-to-peak range over the late window);
- ``growth_rate``: ln(std(last L)/std(previous L)) / (L·stride), per step (> 0: growing oscillation);
- ``frequency``: dominant frequency (cycles/step) of the detrended last 2L points (rFFT peak, DC excluded);
- ``overshoot``: largest excursion past the late mean on the side opposite to the start, relative to |p_0 − late_mean|;
- ``escaped``: late mean within ``collapse_tol`` of 0 or 1; ``finite``: no NaN/inf anywhere.

Measured regimes (first rule that applies):

1. ``diverged``: not finite (NaN/inf) or overflowing (|θ| or |v| > ``overflow`` = 1e30);
2. ``collapsed``: escaped to p → 0 or 1 while the predicted plateau is interior;
3. ``limit_cycle``: late std above ``amp_tol`` and above 3× the predicted stationary noise std, and not
   decaying (growth_rate·L·stride > −0.1): the fixed point is unstable and the motion bounded;
4. ``oscillatory``: the transient overshoots the plateau by more than ``osc_tol``·|p_0 − p*| and 3 late stds
   (or, started at the plateau, the late spectrum peaks away from zero frequency);
5. ``overdamped``: otherwise.
"""

from __future__ import annotations

import numpy as np

from grpojax._errors import InvalidValueError

__all__ = ["MEASURED_REGIMES", "measure"]

MEASURED_REGIMES = ("overdamped", "oscillatory", "limit_cycle", "collapsed", "diverged")


def measure(traces: np.ndarray, theta: np.ndarray, velocity: np.ndarray, *, p_init: np.ndarray, stride: int,
            p_star: np.ndarray | None = None, var_pred: np.ndarray | None = None, late_frac: float = 0.25,
            amp_tol: float = 0.01, osc_tol: float = 0.01, collapse_tol: float = 1e-3,
            overflow: float = 1e30) -> dict[str, np.ndarray]:
    """Statistics and measured regime per row (see module docstring). Inputs are NumPy arrays.

    Args:
        traces: ``(N, W)`` recorded p.
        theta, velocity: ``(N,)`` final logit and velocity (finiteness check).
        p_init: ``(N,)`` initial p.
        stride: steps between records.
        p_star: predicted plateau (for the collapse rule); var_pred: predicted stationary Var(p).
        late_frac, amp_tol, osc_tol, collapse_tol: thresholds.
        overflow: |θ| or |v| beyond this counts as diverged (numerical overflow of the logit).
    """
    tr = np.asarray(traces, float)
    N, W = tr.shape
    if not 0 < late_frac <= 0.5:
        raise InvalidValueError(f"late_frac must be in (0, 0.5], got late_frac={late_frac}")
    L = max(2, int(round(late_frac * W)))
    with np.errstate(invalid="ignore"):
        finite = (np.isfinite(tr).all(1) & np.isfinite(theta) & np.isfinite(velocity)
                  & (np.abs(theta) < overflow) & (np.abs(velocity) < overflow))
    safe = np.where(np.isfinite(tr), tr, 0.5)
    late = safe[:, -L:]
    prev = safe[:, -2 * L:-L] if W >= 2 * L else safe[:, :L]
    late_mean = late.mean(1)
    late_std = late.std(1)
    prev_std = prev.std(1)
    late_amp = 0.5 * (late.max(1) - late.min(1))
    tiny = 1e-300
    growth = np.log((late_std + tiny) / (prev_std + tiny)) / (L * stride)
    seg = safe[:, -min(W, 2 * L):]
    seg = seg - seg.mean(1, keepdims=True)
    power = np.abs(np.fft.rfft(seg, axis=1)) ** 2
    if power.shape[1] > 1:
        peak = 1 + np.argmax(power[:, 1:], axis=1)
        freq = peak / (seg.shape[1] * stride)
        med = np.median(power[:, 1:], axis=1) + tiny
        peak_ratio = power[np.arange(N), peak] / med
    else:
        peak = np.zeros(N, int)
        freq = np.zeros(N)
        peak_ratio = np.ones(N)
    e0 = np.asarray(p_init, float) - late_mean
    excursion = np.max(-np.sign(e0)[:, None] * (safe - late_mean[:, None]), axis=1)
    overshoot = excursion / np.maximum(np.abs(e0), tiny)
    escaped = np.minimum(late_mean, 1.0 - late_mean) < collapse_tol
    interior = np.ones(N, bool) if p_star is None else np.minimum(p_star, 1 - p_star) > 10 * collapse_tol
    if var_pred is None:
        noise_sd = np.full(N, np.nan)
    else:
        noise_sd = np.sqrt(np.where(np.isfinite(var_pred) & (var_pred >= 0), var_pred, np.nan))
    lc_thresh = np.where(np.isfinite(noise_sd), np.maximum(amp_tol, 3 * noise_sd), amp_tol)
    limit_cycle = (late_std > lc_thresh) & (growth * L * stride > -0.1)
    moved = np.abs(e0) > 3 * late_std
    osc_transient = moved & (excursion > np.maximum(osc_tol * np.abs(e0), 3 * late_std))
    osc_spectral = (~moved) & (peak >= 2) & (peak_ratio > 10)
    regime = np.where(osc_transient | osc_spectral, "oscillatory", "overdamped")
    regime = np.where(limit_cycle, "limit_cycle", regime)
    regime = np.where(escaped & interior, "collapsed", regime)
    regime = np.where(~finite, "diverged", regime)
    return dict(late_mean=np.where(finite, late_mean, np.nan), late_std=np.where(finite, late_std, np.nan),
                late_amp=np.where(finite, late_amp, np.nan), growth_rate=np.where(finite, growth, np.nan),
                frequency=np.where(finite, freq, np.nan), overshoot=np.where(finite, overshoot, np.nan),
                escaped=escaped & finite, finite=finite, regime=regime.astype(str))
