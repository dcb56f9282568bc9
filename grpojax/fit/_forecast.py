"""Forecasting: fit on the first fraction of a curve, predict the rest, score the prediction.

The prefix is every observation with ``step ≤ t₀ + f·(t_end − t₀)`` (a fraction of the *step range*,
so irregular logging does not shift the cut). Point laws predict with their fitted curve; a law that
finds no detectable learning in the prefix predicts the prefix mean (no invented rise). Bayesian
models predict the posterior median and a 90% predictive interval (the state-space and mechanistic
models by a Kalman forecast from the filtered state at the end of the prefix), and the score includes
the interval's empirical coverage on the held-out points.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from grpojax._curve_laws import PARAMS as LAW_PARAMS
from grpojax._errors import InvalidValueError
from grpojax.fit._data import MIN_POINTS, check_curve
from grpojax.fit._lsq import fit_law


class Forecast(NamedTuple):
    """A forecast from a prefix, scored on the rest.

    Attributes:
        method: law name or ``"bayes:<model>"``.
        fraction: prefix fraction ``f`` of the step range.
        n_train, n_test: observations in the prefix / the held-out rest.
        steps: held-out steps ``(n_test,)``; ``y``: held-out rewards.
        pred: point prediction; ``lo``/``hi``: 90% predictive interval (NaN for point laws).
        rmse, mae: errors of ``pred``; ``coverage90``: fraction of held-out points inside [lo, hi].
        status: the prefix fit's status (one of :data:`grpojax.fit.STATUSES`; with ``decreasing``
            or ``law_cannot_describe`` the prediction is still the fitted curve, whose parameters
            are not to be reported).
    """

    method: str
    fraction: float
    n_train: int
    n_test: int
    steps: np.ndarray
    y: np.ndarray
    pred: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    rmse: float
    mae: float
    coverage90: float
    status: str


def split_prefix(steps, values, fraction: float):
    """Split a validated curve into (prefix, rest) at ``t₀ + f·span``; ``ValueError`` if either is too small."""
    if not 0.0 < float(fraction) < 1.0:
        raise InvalidValueError(f"fraction must be in (0, 1), got {fraction!r}")
    c = check_curve(steps, values, allow_missing=True)
    cut = c.t0 + fraction * c.span
    train = c.steps <= cut
    n_train = int((train & c.mask).sum())
    n_test = int((~train & c.mask).sum())
    if n_train < MIN_POINTS:
        raise InvalidValueError(f"the prefix f={fraction:g} has {n_train} observations; at least {MIN_POINTS} are needed")
    if n_test < 1:
        raise InvalidValueError(f"nothing left to forecast after the prefix f={fraction:g}")
    return (c.steps[train], c.y[train]), (c.steps[~train & c.mask], c.y[~train & c.mask])


def _score(method, fraction, n_train, s_test, y_test, pred, lo, hi, status):
    err = pred - y_test
    inside = (y_test >= lo) & (y_test <= hi)
    cov = float(np.mean(inside)) if np.all(np.isfinite(lo)) else float("nan")
    return Forecast(method, float(fraction), n_train, int(y_test.size), s_test, y_test, pred, lo, hi,
                    float(np.sqrt(np.mean(err**2))), float(np.mean(np.abs(err))), cov, status)


def forecast_law(steps, values, fraction: float, law: str = "three_phase") -> Forecast:
    """Fit ``law`` by least squares on the prefix and predict the rest (see the module docstring)."""
    (s_tr, y_tr), (s_te, y_te) = split_prefix(steps, values, fraction)
    keep = np.isfinite(y_tr)
    fit = fit_law(s_tr[keep], y_tr[keep], law)
    if fit.status == "no_learning":
        pred = np.full(s_te.shape, float(np.mean(y_tr[keep])))
    else:
        pred = fit.predict(s_te)
    nan = np.full(s_te.shape, np.nan)
    return _score(law, fraction, int(keep.sum()), s_te, y_te, pred, nan, nan, fit.status)


def forecast_bayes(steps, values, fraction: float, model: str = "state_space", *, key, **kwargs) -> Forecast:
    """Sample ``model`` on the prefix with :func:`grpojax.fit.fit_bayes` and predict the rest.

    ``kwargs`` go to :func:`fit_bayes` (``num_samples``, ``num_chains``, ``hyperparams``, ...).
    """
    (s_tr, y_tr), (s_te, y_te) = split_prefix(steps, values, fraction)
    from grpojax.fit._bayes import fit_bayes  # noqa: PLC0415  (JAX and numpyro: only for a posterior)

    fit = fit_bayes(s_tr, y_tr, model, key=key, band_steps=s_te, **kwargs)
    b = fit.band
    return _score(f"bayes:{model}", fraction, int(np.isfinite(y_tr).sum()), s_te, y_te, b["mean_q50"], b["obs_q05"], b["obs_q95"], fit.status)


def forecast_all_laws(steps, values, fraction: float) -> dict[str, Forecast]:
    """:func:`forecast_law` for every law."""
    return {law: forecast_law(steps, values, fraction, law) for law in LAW_PARAMS}
