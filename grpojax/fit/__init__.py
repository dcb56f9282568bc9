"""Reward-curve fitting: batched least squares, numpyro posteriors, Kalman likelihood, forecasts."""

from grpojax.fit._data import MIN_POINTS, Curve, check_bounds, check_curve, metric_bounds, noise_variance
from grpojax.fit._lsq import FLAT_DELTA_BIC, STATUSES, LawFit, fit_all_laws, fit_law, fit_laws_batched

__all__ = [
    "MIN_POINTS",
    "Curve",
    "check_bounds",
    "check_curve",
    "metric_bounds",
    "noise_variance",
    "FLAT_DELTA_BIC",
    "STATUSES",
    "LawFit",
    "fit_all_laws",
    "fit_law",
    "fit_laws_batched",
]
from grpojax.fit._kalman import (  # noqa: E402
    KalmanResult,
    kalman_filter,
    kalman_forecast,
    kalman_loglik,
    oscillator_loglik,
    oscillator_transitions,
    step_intervals,
)
from grpojax.fit._models import MODELS  # noqa: E402
from grpojax.fit._bayes import BayesFit, ConvergenceWarning, fit_bayes, to_summary_dict  # noqa: E402

__all__ += [
    "KalmanResult",
    "kalman_filter",
    "kalman_forecast",
    "kalman_loglik",
    "oscillator_loglik",
    "oscillator_transitions",
    "step_intervals",
    "MODELS",
    "BayesFit",
    "ConvergenceWarning",
    "fit_bayes",
    "to_summary_dict",
]
from grpojax.fit._forecast import Forecast, forecast_all_laws, forecast_bayes, forecast_law, split_prefix  # noqa: E402

__all__ += ["Forecast", "forecast_all_laws", "forecast_bayes", "forecast_law", "split_prefix"]
from grpojax.fit._batched_nuts import BatchedPosterior, fit_state_space_batched  # noqa: E402

__all__ += ["BatchedPosterior", "fit_state_space_batched"]
from grpojax.fit._creep import (  # noqa: E402
    MIN_CREEP_POINTS,
    VARIANTS as CREEP_VARIANTS,
    CreepPosterior,
    creep_curve,
    fit_creep,
    fit_creep_batched,
    logistic_curve,
)
from grpojax.fit._window_forecast import (  # noqa: E402
    METHODS as WINDOW_METHODS,
    WINDOW_STATUSES,
    WindowForecast,
    forecast_window,
    forecast_windows,
)

__all__ += ["MIN_CREEP_POINTS", "CREEP_VARIANTS", "CreepPosterior", "creep_curve", "fit_creep", "fit_creep_batched",
            "logistic_curve", "WINDOW_METHODS",
            "WINDOW_STATUSES", "WindowForecast", "forecast_window", "forecast_windows"]
from grpojax.fit._scores import TAUS as FORECAST_TAUS, crps_quantiles, split_normal_quantiles, winkler_score  # noqa: E402
from grpojax.fit._calibration import (  # noqa: E402
    COMBINED_METHODS,
    ForecastCalibration,
    calibrated_forecast,
    calibration_from_dict,
    default_calibration,
    fit_calibration,
)
from grpojax.fit._window_forecast import forecast_features  # noqa: E402

__all__ += ["FORECAST_TAUS", "crps_quantiles", "split_normal_quantiles", "winkler_score", "COMBINED_METHODS", "ForecastCalibration",
            "calibrated_forecast", "calibration_from_dict", "default_calibration", "fit_calibration",
            "forecast_features"]
from grpojax.fit._pooled import POOLED_LAWS, PooledPosterior, fit_pooled, forecast_pooled, run_covariates  # noqa: E402

__all__ += ["POOLED_LAWS", "PooledPosterior", "fit_pooled", "forecast_pooled", "run_covariates"]
