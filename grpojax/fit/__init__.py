"""Reward-curve fitting: batched least squares, numpyro posteriors, forecasts and their calibration.

- :func:`fit_law`, :func:`fit_all_laws`, :func:`fit_laws_batched` -> :class:`LawFit`: least-squares fits of
  the exponential, three-phase and sigmoid laws (R², AIC/BIC, a status saying whether the law describes the
  curve).
- :func:`fit_bayes` -> :class:`BayesFit`: a numpyro posterior (models ``three_phase``, ``state_space``,
  ``mechanistic``): plateau, damping ratio, P(overdamped / underdamped / unstable);
  :class:`ConvergenceWarning` when the chains did not converge.
- :func:`forecast_law`, :func:`forecast_all_laws`, :func:`forecast_bayes` -> :class:`Forecast`: the rest of a
  run predicted from its first part.
- :func:`forecast_window`, :func:`forecast_windows` -> :class:`WindowForecast`: the mean reward over the last
  part of a planned run with its predictive interval; :func:`fit_calibration` learns, from past forecasts,
  how to combine the methods and how wide the intervals must be.
"""

import typing as _typing

from grpojax._lazy import lazy_names as _lazy_names

# Each name is imported from its module when it is first used: the forecasts and the least-squares fits run
# in NumPy, and only the posteriors (fit_bayes, the pooled fit, the Kalman filter) import JAX and numpyro.
__getattr__, __dir__ = _lazy_names(__name__, {
    "BayesFit": "grpojax.fit._bayes",
    "ConvergenceWarning": "grpojax.fit._bayes",
    "fit_bayes": "grpojax.fit._bayes",
    "to_summary_dict": "grpojax.fit._bayes",
    "fit_state_space_batched": "grpojax.fit._batched_nuts",
    "COMBINED_METHODS": "grpojax.fit._calibration",
    "ForecastCalibration": "grpojax.fit._calibration",
    "calibrated_forecast": "grpojax.fit._calibration",
    "fit_calibration": "grpojax.fit._calibration",
    "MIN_CREEP_POINTS": "grpojax.fit._creep",
    "check_bounds": "grpojax.fit._data",
    "metric_bounds": "grpojax.fit._data",
    "Forecast": "grpojax.fit._forecast",
    "forecast_all_laws": "grpojax.fit._forecast",
    "forecast_bayes": "grpojax.fit._forecast",
    "forecast_law": "grpojax.fit._forecast",
    "split_prefix": "grpojax.fit._forecast",
    "kalman_filter": "grpojax.fit._kalman",
    "step_intervals": "grpojax.fit._kalman",
    "FLAT_DELTA_BIC": "grpojax.fit._lsq",
    "LawFit": "grpojax.fit._lsq",
    "STATUSES": "grpojax.fit._lsq",
    "fit_all_laws": "grpojax.fit._lsq",
    "fit_law": "grpojax.fit._lsq",
    "fit_laws_batched": "grpojax.fit._lsq",
    "MODELS": "grpojax.fit._models",
    "fit_pooled": "grpojax.fit._pooled",
    "forecast_pooled": "grpojax.fit._pooled",
    "run_covariates": "grpojax.fit._pooled",
    "FORECAST_TAUS": "grpojax.fit._scores:TAUS",
    "crps_quantiles": "grpojax.fit._scores",
    "split_normal_quantiles": "grpojax.fit._scores",
    "winkler_score": "grpojax.fit._scores",
    "WINDOW_METHODS": "grpojax.fit._window_forecast:METHODS",
    "WindowForecast": "grpojax.fit._window_forecast",
    "forecast_window": "grpojax.fit._window_forecast",
    "forecast_windows": "grpojax.fit._window_forecast",
})

if _typing.TYPE_CHECKING:  # the same names, for readers, type checkers and the API reference
    from grpojax.fit._bayes import BayesFit, ConvergenceWarning, fit_bayes
    from grpojax.fit._calibration import fit_calibration
    from grpojax.fit._forecast import Forecast, forecast_all_laws, forecast_bayes, forecast_law
    from grpojax.fit._lsq import LawFit, fit_all_laws, fit_law, fit_laws_batched
    from grpojax.fit._window_forecast import WindowForecast, forecast_window, forecast_windows

    # Importable for the packages after this one, the command line and the experiments, but not part
    # of the public API (not in __all__, not in the API reference).
    from grpojax.fit._batched_nuts import fit_state_space_batched
    from grpojax.fit._bayes import to_summary_dict
    from grpojax.fit._calibration import COMBINED_METHODS, ForecastCalibration, calibrated_forecast
    from grpojax.fit._creep import MIN_CREEP_POINTS
    from grpojax.fit._data import check_bounds, metric_bounds
    from grpojax.fit._forecast import split_prefix
    from grpojax.fit._kalman import kalman_filter, step_intervals
    from grpojax.fit._lsq import FLAT_DELTA_BIC, STATUSES
    from grpojax.fit._models import MODELS
    from grpojax.fit._pooled import fit_pooled, forecast_pooled, run_covariates
    from grpojax.fit._scores import TAUS as FORECAST_TAUS, crps_quantiles, split_normal_quantiles, winkler_score
    from grpojax.fit._window_forecast import METHODS as WINDOW_METHODS

__all__ = [
    "BayesFit",
    "ConvergenceWarning",
    "Forecast",
    "LawFit",
    "WindowForecast",
    "fit_all_laws",
    "fit_bayes",
    "fit_calibration",
    "fit_law",
    "fit_laws_batched",
    "forecast_all_laws",
    "forecast_bayes",
    "forecast_law",
    "forecast_window",
    "forecast_windows",
]
