"""Centred moving average with an explicit edge policy (used by the fits and the detectors)."""

from __future__ import annotations

import numpy as np

from grpojax._errors import DataError

__all__ = ["moving_average", "EDGE_POLICIES"]

#: Values ``moving_average(..., edge=...)`` accepts.
EDGE_POLICIES: tuple[str, ...] = ("shrink", "nan")


def moving_average(y, window: int, *, edge: str) -> np.ndarray:
    """Centred moving average over ``window`` points along the last axis (same shape as ``y``).

    Output ``i`` averages ``y[i - (window - 1) // 2 : i + window // 2 + 1]``: symmetric for an odd
    window, one point more ahead than behind for an even one.

    Args:
        y: ``(..., T)`` values.
        window: positive number of points.
        edge: what happens near the ends, where the window runs past the data:

            * ``"shrink"``: average over the points of the window that exist (the first output
              averages ``y[0 : window // 2 + 1]``); never NaN unless ``y`` has NaN;
            * ``"nan"``: NaN wherever the window is incomplete (all NaN when ``T < window``).

            Either way a NaN inside a window makes that output NaN.

    Returns:
        float64 array of ``y``'s shape (a copy; ``window == 1`` returns ``y`` itself as float64).

    Raises:
        ValueError: ``window < 1`` or an unknown ``edge``.
    """
    if edge not in EDGE_POLICIES:
        raise DataError(f"edge must be one of {', '.join(EDGE_POLICIES)}, got {edge!r}")
    window = int(window)
    if window < 1:
        raise DataError(f"smoothing window must be a positive integer, got {window}")
    y = np.array(y, dtype=np.float64)
    if window == 1 or y.shape[-1] == 0:
        return y
    T = y.shape[-1]
    c = np.cumsum(np.concatenate([np.zeros(y.shape[:-1] + (1,)), y], axis=-1), axis=-1)
    i = np.arange(T)
    lo = i - (window - 1) // 2
    hi = lo + window
    if edge == "shrink":
        lo_c, hi_c = np.clip(lo, 0, T), np.clip(hi, 0, T)
        return (c[..., hi_c] - c[..., lo_c]) / (hi_c - lo_c)
    ok = (lo >= 0) & (hi <= T)
    out = np.full(y.shape, np.nan)
    out[..., ok] = (c[..., hi[ok]] - c[..., lo[ok]]) / window
    return out
