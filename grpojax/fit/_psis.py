"""Pareto-smoothed importance sampling (PSIS) of one vector of log weights, in NumPy.

The importance sampler of :mod:`grpojax.fit._creep` smooths its weights before resampling: the largest
raw weights are replaced by the expected order statistics of a generalized Pareto distribution fitted
to the upper tail (Vehtari, Simpson, Gelman, Yao and Gabry, "Pareto smoothed importance sampling", JMLR
25(72), 2024; the tail fit is Zhang and Stephens' empirical Bayes estimate, Technometrics 51, 2009).
``arviz.psislw`` computes the same weights (the tests compare the two); importing arviz brings pyplot,
xarray, pandas and scipy.stats with it, about 3 s on two cores, longer than the whole command-line forecast
that needs one smoothing per posterior, so the method is written here for one vector.
"""

from __future__ import annotations

import numpy as np

_EPS = np.finfo(float).eps


def _gpd_fit(x):
    """Shape ``k`` and scale ``σ`` of a generalized Pareto distribution fitted to sorted exceedances ``x > 0``
    (Zhang–Stephens: a posterior mean of ``θ = −k/σ`` over a quadrature grid, then a weak prior pulling
    ``k`` towards 0.5 with the weight of ten observations)."""
    n = x.size
    m = 30 + int(np.sqrt(n))
    theta = 1.0 - np.sqrt(m / (np.arange(1, m + 1) - 0.5))
    theta = theta / (3.0 * x[int(n / 4 + 0.5) - 1]) + 1.0 / x[-1]
    k = np.mean(np.log1p(-theta[:, None] * x[None, :]), axis=1)
    log_lik = n * (np.log(-theta / k) - k - 1.0)
    weight = 1.0 / np.sum(np.exp(log_lik[None, :] - log_lik[:, None]), axis=1)
    keep = weight >= 10 * _EPS
    theta, weight = theta[keep], weight[keep] / weight[keep].sum()
    theta_hat = float(np.sum(theta * weight))
    k_hat = float(np.mean(np.log1p(-theta_hat * x)))
    sigma = -k_hat / theta_hat
    return (n * k_hat + 10 * 0.5) / (n + 10), sigma


def _gpd_quantile(p, k, sigma):
    """Quantiles ``p ∈ (0, 1)`` of the generalized Pareto distribution (shape ``k``, scale ``σ``, location 0)."""
    if abs(k) < _EPS:
        return -np.log1p(-p) * sigma
    return np.expm1(-k * np.log1p(-p)) / k * sigma


def _log_normalise(x):
    """``x − log Σ exp(x)`` (the largest entry is 0 here, so the sum needs no further shift)."""
    top = np.max(x)
    return x - (np.log(np.sum(np.exp(x - top))) + top)


def psis_log_weights(log_weights, reff: float = 1.0):
    """Pareto-smoothed, normalised log weights and the tail shape ``k`` (``inf`` when the tail is too short).

    ``k < 0.7``: the smoothed weights are reliable; above, the importance sampler missed part of the target.
    Entries of ``-inf`` (proposals outside the support) keep weight 0.
    """
    x = np.array(log_weights, dtype=float).ravel()
    n = x.size
    x -= np.max(x)
    tail_size = int(np.ceil(min(n / 5.0, 3.0 * np.sqrt(n / reff))))
    cutoff = max(x[np.argsort(x)[-tail_size - 1]], np.log(np.finfo(float).tiny))
    tail = np.flatnonzero(x > cutoff)
    k = np.inf
    if tail.size > 4:
        order = tail[np.argsort(x[tail])]
        exceed = np.exp(x[order]) - np.exp(cutoff)
        k, sigma = _gpd_fit(exceed)
        if np.isfinite(k) and sigma > 0:
            probs = np.arange(0.5, tail.size) / tail.size
            x[order] = np.log(_gpd_quantile(probs, k, sigma) + np.exp(cutoff))
            x[x > 0] = 0.0  # truncated at the largest raw weight
    return _log_normalise(x), float(k)
