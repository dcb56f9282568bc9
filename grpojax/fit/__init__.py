"""Reward-curve fitting: batched least squares, numpyro posteriors, Kalman likelihood, forecasts."""

from grpojax.fit._data import MIN_POINTS, Curve, check_curve, moving_average, noise_variance
from grpojax.fit._lsq import FLAT_DELTA_BIC, STATUSES, LawFit, fit_all_laws, fit_law, fit_laws_batched

__all__ = [
    "MIN_POINTS",
    "Curve",
    "check_curve",
    "moving_average",
    "noise_variance",
    "FLAT_DELTA_BIC",
    "STATUSES",
    "LawFit",
    "fit_all_laws",
    "fit_law",
    "fit_laws_batched",
]
