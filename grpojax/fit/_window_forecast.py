"""Forecast the mean reward over the last part of a run from a prefix, always with an interval.

The question a user asks mid-run is "where will this run end up?": the mean reward over the last
``window`` fraction of the planned steps (default the last 10%). :func:`forecast_window` answers it
from the observations up to ``prefix`` of the step range with a point forecast and a predictive
interval of that *window mean*: parameter uncertainty plus the noise of a mean of ``n`` correlated
points (AR(1) residuals), never a bare number.

Methods (``method=``):

- ``"combined"`` (default): the four forecasters below, the median of the point forecasts of those
  that vouch for their fit (status ``"ok"``; persistence always), and a calibrated interval: the
  quantiles of past forecast errors on real runs of many repositories, in units of the prefix's sd or
  of the forecasters' disagreement where that is larger (:mod:`grpojax.fit._calibration`). The raw
  forecasts and their statuses are kept in ``components``; the
  status, ``params``, ``band`` and ``p_variant`` are the creep model's.
- ``"creep"``: the fast-rise-plus-creep model of :mod:`grpojax.fit._creep`, averaged with
  its special case a single exponential and with a logistic slow start by their marginal
  likelihoods (``p_variant``), posterior predictive of the window mean. It reports only quantities a
  curve identifies (plateau ``p*``, start level, fast rate ``λ_f = K_eff/C``, the creep's rate
  distribution, noise); the oscillator's ``M``, ``C``, ``K_eff`` separately need the hyperparameters.
- ``"persistence"``: the mean of the last ``window`` of the prefix; interval from the prefix's own
  noise (the spread and lag-1 autocorrelation of those points), no trend.
- ``"exponential"``, ``"sigmoid"``: least-squares laws (the sigmoid is ScaleRL's
  ``R₀ + (A − R₀)/(1 + (t_mid/t)^B)`` in steps); interval by a moving-block residual bootstrap
  (refits of the law on the fitted curve plus resampled residual blocks) plus the noise of the
  window mean.

Status (``WindowForecast.status``, one of :data:`WINDOW_STATUSES`); which values occur depends on the method:

- ``"creep"`` and ``"combined"``: ``"ok"``; ``"collapse"`` when the prefix rises, then falls after a peak, both beyond
  what its noise explains: the monotone model cannot forecast a collapse, so the point forecast is the
  current level and the interval reaches from below the prefix's lowest level up to the peak (the run
  may fall further or recover); ``"misfit"`` when the end of the prefix departs upwards from the fit;
  ``"weak_posterior"`` when the importance sampler's effective sample size is small (the interval may
  be too narrow).
  A collapse the prefix already holds, given as ``collapse_onset`` (the onset the collapse finding of
  :mod:`grpojax.diagnose` reports on the prefix; ``grpojax fit --prefix`` finds it so), sets ``"collapse"``
  too: the forecast starts from the level the reward fell to -- persistence over the points from the
  onset on (the combined method's median is then that, the laws fitted across the fall abstain; the creep
  method's point is the same level) -- not from the level before the fall.
- ``"persistence"``: always ``"ok"``.
- ``"exponential"``, ``"sigmoid"``: the status of the least-squares fit of the prefix
  (:data:`grpojax.fit.STATUSES` less ``"insufficient_data"``, which a single curve raises as a
  ``ValueError`` instead): ``"ok"``, ``"not_converged"``, ``"no_learning"`` (the forecast is the
  prefix mean, the interval the bootstrap of a constant), ``"decreasing"`` or
  ``"law_cannot_describe"`` (the forecast extrapolates the flagged fit: treat it with suspicion).

Every forecast also states ``p_collapse``, the probability that the reward collapses between the end of the
prefix and the end of the window, from a hazard per unit of run fraction learned from labelled real runs
(:mod:`grpojax.fit._collapse_hazard`: the model, its data and its limits). With ``collapse_mixture=True``
the predictive distribution becomes ``(1 - p_collapse)·forecast + p_collapse·collapse branch`` (the level
after losing half to all of the rise); the interval, the point (the mixture's median) and
``prob_at_least`` then use the mixture, and ``smooth`` keeps the forecast without it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
from scipy import special  # ndtri = the normal quantile (scipy.stats: ~0.5 s more to import)

from grpojax._defaults import FORECAST_LEVEL, FORECAST_METHOD, FORECAST_WINDOW, SEED
from grpojax._errors import InvalidValueError
from grpojax.fit._calibration import calibrated_forecast, forecast_scale, votes
from grpojax.fit._collapse_hazard import MIXTURE_TAUS, as_hazard, mixture_quantiles, start_level
from grpojax.fit._creep import MIN_CREEP_POINTS, _key_seed, fit_creep_batched
from grpojax.fit._creep import VARIANTS as CREEP_VARIANTS
from grpojax.fit._data import check_bounds, metric_bounds
from grpojax.fit._lsq import STATUSES as _LAW_STATUSES
from grpojax.logs import RunLog, read_log

METHODS = ("combined", "creep", "persistence", "exponential", "sigmoid")
"""Forecasting methods of :func:`forecast_window` (``"combined"``, the default, averages the other four and
calibrates its interval: :mod:`grpojax.fit._calibration`)."""

_CREEP_STATUSES = ("ok", "collapse", "misfit", "weak_posterior")
"""Values of :attr:`WindowForecast.status` for ``method="creep"`` (``"persistence"``: always ``"ok"``)."""

WINDOW_STATUSES = _CREEP_STATUSES + tuple(s for s in _LAW_STATUSES if s not in _CREEP_STATUSES + ("insufficient_data",))
"""Every value of :attr:`WindowForecast.status`: the creep method's (``"ok"``, ``"collapse"``, ``"misfit"``,
``"weak_posterior"``), then the least-squares statuses a single law fit can return (``"not_converged"``,
``"no_learning"``, ``"decreasing"``, ``"law_cannot_describe"``; methods ``"exponential"`` and
``"sigmoid"``). See the module docstring for their meaning."""

COLLAPSE_MIXTURE = False
"""Whether :func:`forecast_window` mixes the collapse branch into the forecast unless told (``collapse_mixture=``).
Off: on the real corpora, leave one repository out, the mixture left the 90% interval's coverage where it was
(0.93 from 25% of the run, 0.91 from 50%) and made the Brier score of ``prob_at_least`` slightly worse at
both prefixes (docs/model/forecasting.md, "Collapses")."""

_COMPONENT_LEVEL = 0.9  # the level of the components' own intervals (the calibration's scale is read from them)
_Z_FLAG = 3.0
_MIN_ESS = 20.0
_BOOT = 100
_BLOCK = 5


class WindowForecast(NamedTuple):
    """Forecast of the mean reward over the final window of a run.

    Attributes:
        mean: point forecast of the window mean (the predictive median).
        lo, hi: central ``level`` predictive interval of the window mean.
        level: interval level.
        method: one of :data:`METHODS`.
        status: one of :data:`WINDOW_STATUSES` (see the module docstring).
        prefix_end: last step used for the fit.
        n_prefix: observations used.
        window: ``(first, last)`` step of the target window.
        n_window: observations the window mean averages over (logged, or implied by the prefix's cadence).
        params: identifiable summaries ``{name: (median, lo, hi)}`` at ``level`` (creep only; empty
            otherwise). Rewards in raw units, rates per step: ``p_star`` (plateau), ``y0`` (start
            level), ``fast_rate`` (``K_eff/C`` of the fast prompts) and ``fast_weight`` (creep and
            exponential draws), ``creep_k`` and ``creep_theta`` (per-prompt rates ~ Gamma(k, θ); creep
            draws), ``logistic_rate`` and ``logistic_midpoint`` (a step; logistic draws), ``noise_sd``
            (marginal sd of one logged value), ``noise_ar1``. A variant's parameters are NaN when the
            posterior gives that variant no draw. ``M``, ``C`` and ``K_eff`` are not identifiable from a
            curve; ``M`` follows from the hyperparameters (``η``, ``μ``, ``K_ref``) when they are known.
        band: ``{"steps", "lo", "median", "hi"}`` of the mean curve from the prefix start to the
            window end (creep only; None otherwise).
        ess: importance-sampling effective sample size (creep; NaN otherwise).
        p_variant: ``{"creep", "exponential", "logistic"}``: posterior probabilities of the creep
            model, its special case a single exponential and the logistic slow start (creep and combined
            methods; empty otherwise). The creep forecast averages the three in these proportions.
        components: combined method: ``{method: {"mean", "lo", "hi", "status"}}`` of the four forecasters it
            averages (their own, uncalibrated 90% intervals; ``creep``'s is the raw posterior interval).
        weights: combined method: ``{method: weight}`` of the point forecast.
        features: combined method: ``{"horizon", "noise_ratio", "noise_sd", "scale"}`` the calibration used.
        quantiles: combined method: ``{"taus", "values"}``, the calibrated predictive quantiles of the
            window mean (clipped to ``bounds``); None otherwise. With the collapse mixture: the mixture's
            quantiles (every method).
        p_collapse: P(the reward collapses between the end of the prefix and the end of the window), the
            hazard model's posterior predictive (:mod:`grpojax.fit._collapse_hazard`).
        p_collapse_interval: its 90% interval ``(lo, hi)`` from the hazard's posterior (a point for a given
            rate).
        collapse_onset: the onset step of a collapse the prefix already holds, as given to
            :func:`forecast_window` (then ``status`` is ``"collapse"`` for the creep and combined methods, and
            they forecast from the level after it), or None.
        collapse_mixture: whether ``mean``, ``lo``, ``hi`` and ``quantiles`` are those of the mixture with the
            collapse branch.
        smooth: with the collapse mixture: ``{"mean", "lo", "hi"}`` of the forecast without it; None otherwise.
    """

    mean: float
    lo: float
    hi: float
    level: float
    method: str
    status: str
    prefix_end: float
    n_prefix: int
    window: tuple
    n_window: int
    params: dict
    band: dict | None
    ess: float
    p_variant: dict = {}
    components: dict = {}
    weights: dict = {}
    features: dict = {}
    quantiles: dict | None = None
    p_collapse: float = float("nan")
    p_collapse_interval: tuple = (float("nan"), float("nan"))
    collapse_onset: float | None = None
    collapse_mixture: bool = False
    smooth: dict | None = None

    def __str__(self) -> str:
        """One line: the forecast, its interval, the window and how it was made (``print(forecast)``), then
        P(collapse before the window's end) and a collapse the prefix holds."""
        out = (f"forecast of the mean over steps {self.window[0]:g}-{self.window[1]:g} from steps up to "
               f"{self.prefix_end:g}: {self.mean:.4g} [{self.lo:.4g}, {self.hi:.4g}] ({self.level:.0%}, "
               f"{self.method}, {self.status}{', with the collapse branch' if self.collapse_mixture else ''})")
        if math.isfinite(self.p_collapse):
            lo, hi = self.p_collapse_interval
            out += (f"; P(collapse by step {self.window[1]:g}) = {self.p_collapse:.3f}"
                    + (f" [{lo:.3f}, {hi:.3f}]" if hi > lo else ""))
        if self.collapse_onset is not None:
            out += f"; the prefix holds a collapse at step {self.collapse_onset:g}" + (
                ": forecast from the level after it" if self.method in ("creep", "combined") else "")
        return out

    def prob_at_least(self, target, *, bounds=None):
        """P(window mean ≥ ``target``) under this forecast's predictive distribution: its calibrated
        ``quantiles`` (combined method; linear between them, normal tails beyond) or the split normal through
        ``mean``, ``lo`` and ``hi`` (the other methods). ``bounds=(lo, hi)``: the metric's range (a target at
        or below ``lo`` is reached surely, one above ``hi`` never). A float for a number, an array for an
        array; a target that is not finite raises ``InvalidValueError``."""
        from grpojax._exceedance import prob_at_least  # noqa: PLC0415  (NumPy only)

        return prob_at_least(self, target, bounds=bounds)


def _mean_var_factor(n, rho):
    """``Var(mean of n AR(1) points)/marginal variance`` (vectorised over ``rho``)."""
    n = int(max(n, 1))
    k = np.arange(1, n)
    rho = np.asarray(rho, float)[..., None]
    return (n + 2.0 * np.sum((n - k) * rho ** k, -1)) / n**2


def _lag1(x):
    x = np.asarray(x, float) - np.mean(x)
    if x.size < 3 or not np.any(x):
        return 0.0
    return float(np.clip(np.sum(x[1:] * x[:-1]) / np.sum(x * x), 0.0, 0.95))


def _ar1_noise(y):
    """Marginal sd and lag-1 autocorrelation of AR(1) noise around a smooth trend, from first differences.

    For AR(1) noise with correlation ρ, differences have variance 2σ²(1 − ρ) and lag-1 autocorrelation
    −(1 − ρ)/2; a slowly varying trend barely changes either.
    """
    d = np.diff(np.asarray(y, float))
    if d.size < 3 or not np.any(d - d.mean()):
        return float(np.std(y)), 0.0
    dc = d - d.mean()
    r_d = float(np.sum(dc[1:] * dc[:-1]) / np.sum(dc * dc))
    rho = float(np.clip(1.0 + 2.0 * r_d, 0.0, 0.95))
    return float(np.sqrt(np.var(d) / (2.0 * (1.0 - rho)))), rho


def _series(run_or_curve, metric):
    if isinstance(run_or_curve, (str, os.PathLike)):  # a log file or folder, as the command line takes it
        run_or_curve = read_log(run_or_curve)
    if isinstance(run_or_curve, Mapping):  # columns, as grpojax.diagnose.diagnose takes them
        run_or_curve = RunLog.from_columns(run_or_curve)
    if hasattr(run_or_curve, "series"):
        if metric not in getattr(run_or_curve, "columns", {metric: None}):
            have = ", ".join(sorted(run_or_curve.columns)) or "none"
            raise InvalidValueError(f"metric {metric!r} is not a column of the run (columns: {have})")
        s, y = run_or_curve.series(metric)
    else:
        try:
            s, y = run_or_curve
        except (TypeError, ValueError):
            raise InvalidValueError(f"run_or_curve must be a RunLog or a (steps, values) pair, got {type(run_or_curve).__name__}")
    s = np.asarray(s, float)
    y = np.asarray(y, float)
    if s.ndim != 1 or s.shape != y.shape:
        raise InvalidValueError(f"steps and values must be 1-d arrays of one shape, got {s.shape} and {y.shape}")
    keep = np.isfinite(y) & np.isfinite(s)
    return s[keep], y[keep]


def _split(s, y, prefix, window, end_step):
    """Prefix arrays, target window (first, last), the window's logged values (maybe empty), and n_window."""
    if not 0.0 < float(prefix) < 1.0:
        raise InvalidValueError(f"prefix must be in (0, 1), got {prefix!r}")
    if not 0.0 < float(window) < 1.0 - float(prefix) + 1e-12:
        raise InvalidValueError(f"window must be in (0, 1 - prefix], got {window!r} with prefix={prefix!r}")
    if s.size and np.any(np.diff(s) <= 0):
        raise InvalidValueError("steps must be strictly increasing")
    if s.size < 2:
        raise InvalidValueError(f"a curve needs at least {MIN_CREEP_POINTS} finite points, got {s.size}")
    t0 = float(s[0])
    end = float(s[-1]) if end_step is None else float(end_step)
    if not end > t0:
        raise InvalidValueError(f"end_step must be after the first step {t0:g}, got {end_step!r}")
    span = end - t0
    cut = t0 + prefix * span
    w0 = end - window * span
    pre = s <= cut
    n_pre = int(pre.sum())
    if n_pre < MIN_CREEP_POINTS:
        raise InvalidValueError(f"the prefix {prefix:g} holds {n_pre} finite points; at least {MIN_CREEP_POINTS} are needed")
    in_w = (s > w0) & (s <= end)
    if in_w.any():
        n_w = int(in_w.sum())
    else:
        cadence = float(np.median(np.diff(s[pre])))
        n_w = max(1, int(round((end - w0) / cadence)))
    return s[pre], y[pre], (w0, end), y[in_w], n_w


def _window_steps(prefix_steps, w, n_w):
    return np.linspace(w[0] + (w[1] - w[0]) / n_w, w[1], n_w)


def _q(x, level):
    a = (1.0 - level) / 2.0
    return float(np.quantile(x, 0.5)), float(np.quantile(x, a)), float(np.quantile(x, 1.0 - a))


def _persistence(sp, yp, w, n_w, level, window_width, since=None):
    """The mean of the prefix's last ``window_width`` of steps (at least 3 points) with the noise of that mean
    and of the window mean; ``since``: only the points from that step on (a collapse's onset)."""
    if since is not None:
        keep = sp >= since
        sp, yp = sp[keep], yp[keep]
    last = yp[sp > sp[-1] - window_width]
    if last.size < 3:
        last = yp[-3:]
    if last.size < 2:
        raise InvalidValueError(f"persistence needs at least 2 points, got {last.size}")
    m = float(np.mean(last))
    sd = float(np.std(last, ddof=1))
    rho = _lag1(last)
    se = sd * np.sqrt(_mean_var_factor(last.size, rho) + _mean_var_factor(n_w, rho))
    z = special.ndtri(0.5 + level / 2.0)
    return m, m - z * se, m + z * se


def _predict(fit, steps):
    return np.asarray(fit.predict(np.asarray(steps, float)), float)  # NumPy: no compilation per length


def _law(sp, yp, w, n_w, level, law, key):
    from grpojax.fit._lsq import fit_law, fit_laws_batched  # noqa: PLC0415

    ws = _window_steps(sp, w, n_w)
    fit = fit_law(sp, yp, law)
    if fit.status == "no_learning":
        yhat = np.full(sp.shape, float(np.mean(yp)))
        point = float(np.mean(yp))
    else:
        yhat = _predict(fit, sp)
        point = float(np.mean(_predict(fit, ws)))
    resid = yp - yhat
    rho = _lag1(resid)
    rng = np.random.default_rng(key if key is not None else 0)
    n = sp.size
    nb = int(np.ceil(n / _BLOCK))
    starts = rng.integers(0, max(n - _BLOCK, 0) + 1, size=(_BOOT, nb))
    idx = (starts[..., None] + np.arange(_BLOCK)).reshape(_BOOT, -1)[:, :n]
    Y = yhat[None, :] + resid[idx]
    bf = fit_laws_batched(sp, Y, law)
    preds = _predict(bf, ws).mean(-1)
    flat = np.asarray(bf.status) == "no_learning"
    preds = np.where(flat | ~np.isfinite(preds), Y.mean(-1), preds)
    noise = np.std(resid, ddof=1) * np.sqrt(_mean_var_factor(n_w, rho))
    draws = preds[:, None] + noise * rng.standard_normal((_BOOT, 20))
    _, lo, hi = _q(draws.ravel(), level)
    return point, lo, hi, str(fit.status)


def _summaries(post, i, level):
    """Identifiable summaries at ``level``; a variant's own parameters come from its draws only (NaN when
    the posterior gives it no draw)."""
    s = post.samples
    sc, c, span, t0 = post.scale[i], post.center[i], post.span[i], post.t0[i]
    nz = post.noise(i)
    v = s["variant"][i]
    creep, logistic = v == CREEP_VARIANTS.index("creep"), v == CREEP_VARIANTS.index("logistic")
    rising = ~logistic  # the creep model and its exponential special case
    raw = {
        "p_star": c + sc * s["p_star"][i],
        "y0": c + sc * s["y0"][i],
        "fast_rate": np.exp(s["log_rate"][i][rising]) / span,
        "fast_weight": s["w"][i][rising],
        "creep_k": np.exp(s["log_k"][i][creep]),
        "creep_theta": np.exp(s["log_theta"][i][creep]) / span,
        "logistic_rate": np.exp(s["log_rate"][i][logistic]) / span,
        "logistic_midpoint": t0 + span * np.exp(s["log_theta"][i][logistic]),
        "noise_sd": nz["sd"],
        "noise_ar1": nz["rho"],
    }
    return {k: _q(x, level) if x.size else (float("nan"),) * 3 for k, x in raw.items()}


def _creep_from_posterior(post, i, sp, yp, w, n_w, level, key, onset=None):
    ws = _window_steps(sp, w, n_w)
    curves = post.curve(i, ws)  # (draws, n_w)
    nz = post.noise(i)
    var_f = _mean_var_factor(n_w, nz["rho"])
    rng = np.random.default_rng(_key_seed(key))  # a JAX key (the pooled posterior), an int or a seed sequence
    pred = curves.mean(-1) + nz["sd"] * np.sqrt(var_f) * rng.standard_normal(curves.shape[0])
    point, lo, hi = _q(pred, level)
    band_steps = np.linspace(sp[0], w[1], 120)
    bc = post.curve(i, band_steps)
    a = (1.0 - level) / 2.0
    band = {"steps": band_steps, "lo": np.quantile(bc, a, 0), "median": np.quantile(bc, 0.5, 0),
            "hi": np.quantile(bc, 1.0 - a, 0)}
    # does the end of the prefix depart from the fit?
    fit_med = np.median(post.curve(i, sp), 0)
    tail = sp >= sp[0] + 0.75 * (sp[-1] - sp[0])
    r = yp[tail] - fit_med[tail]
    sd = float(np.median(nz["sd"]))
    se = sd * np.sqrt(_mean_var_factor(int(tail.sum()), float(np.median(nz["rho"]))))
    z = float(np.mean(r) / se) if se > 0 else 0.0
    status = "ok"
    # collapse: the prefix falls after a peak and the (monotone) fit does not follow it down
    n_last = max(3, int(round(0.1 * yp.size)))
    k = max(3, int(round(0.05 * yp.size)))
    smooth = np.convolve(yp, np.ones(k) / k, mode="valid")
    last = float(np.mean(yp[-n_last:]))
    # standard errors of means of correlated points, from the data's own AR(1) noise (not the monotone
    # fit's, which a collapse inflates)
    sd_n, rho = _ar1_noise(yp)
    se_last = sd_n * np.sqrt(_mean_var_factor(n_last, rho))
    se_drop = np.hypot(se_last, sd_n * np.sqrt(_mean_var_factor(k, rho)))
    drop = float(smooth.max() - last)
    top = int(np.argmax(smooth))
    peaked = top < smooth.size - n_last
    rise = float(smooth[top] - np.mean(yp[:n_last]))  # a collapse falls after a rise, not from the start
    fit_above = float(np.mean(fit_med[-n_last:])) - last
    if onset is not None:  # a collapse the prefix holds (given): the level is the one after its onset
        status = "collapse"
        last = _persistence(sp, yp, w, n_w, level, w[1] - w[0], since=onset)[0]
    elif (peaked and drop > max(0.3 * float(np.ptp(smooth)), 4.0 * se_drop) and rise > 4.0 * se_drop
            and fit_above > 2.0 * se_last):
        status = "collapse"
    elif z > _Z_FLAG:
        status = "misfit"
    if status == "ok" and post.ess[i] < _MIN_ESS:
        status = "weak_posterior"
    if status == "collapse":
        level_now = last
        rng_y = float(np.max(yp) - np.min(yp))
        point = level_now
        lo = min(lo, float(np.min(yp)) - rng_y)
        # a run that fell may fall further or recover: the interval reaches the peak it fell from
        hi = max(level_now + 3.0 * se_last, level_now + 2.0 * se, float(smooth.max()) + 2.0 * se_last)
    return point, lo, hi, status, band


def forecast_windows(curves, *, prefix: float, window: float = FORECAST_WINDOW, level: float = FORECAST_LEVEL,
                     method: str = FORECAST_METHOD, metric: str = "reward_mean", end_steps=None, key=None,
                     bounds=None, show_progress: bool = False,
                     calibration=None, collapse_hazard=None, collapse_mixture: bool | None = None,
                     collapse_onsets=None) -> list[WindowForecast]:
    """:func:`forecast_window` for many curves at once (the creep posteriors are fitted in one batch).

    Args:
        curves: sequence of runs or ``(steps, values)`` pairs.
        end_steps: None, or one planned last step per curve (None entries: the last logged step).
        collapse_onsets: None, one ``collapse_onset`` per curve (None entries: none), or a function
            ``f(prefix_steps, prefix_values) -> onset or None`` applied to each curve's prefix as this function
            splits it (e.g. :func:`grpojax.diagnose.collapse_onset`).
        Other arguments: as :func:`forecast_window`.

    Returns:
        One :class:`WindowForecast` per curve, in order.
    """
    if method not in METHODS:
        raise InvalidValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if not 0.0 < float(level) < 1.0:
        raise InvalidValueError(f"level must be in (0, 1), got {level!r}")
    if bounds is None:  # the command line's default too: accuracies and rates are clipped to [0, 1]
        bounds = metric_bounds(metric)
    lo_b, hi_b = check_bounds(bounds)
    hazard = as_hazard(collapse_hazard)
    mix = COLLAPSE_MIXTURE if collapse_mixture is None else collapse_mixture
    if not isinstance(mix, (bool, np.bool_)):
        raise InvalidValueError(f"collapse_mixture must be True, False or None (the default), got {collapse_mixture!r}")
    curves = list(curves)
    end_steps = [None] * len(curves) if end_steps is None else list(end_steps)
    if len(end_steps) != len(curves):
        raise InvalidValueError(f"end_steps must have one entry per curve ({len(curves)}), got {len(end_steps)}")
    find_onset = collapse_onsets if callable(collapse_onsets) else None
    onsets = [None] * len(curves) if collapse_onsets is None or find_onset else list(collapse_onsets)
    if len(onsets) != len(curves):
        raise InvalidValueError(f"collapse_onsets must have one entry per curve ({len(curves)}), got {len(onsets)}")
    seeds = _key_seed(SEED if key is None else key).spawn(len(curves) + 1)  # NumPy streams: nothing to compile
    parts = []
    for c, e in zip(curves, end_steps):
        s, y = _series(c, metric)
        parts.append(_split(s, y, prefix, window, e))
    keys = seeds[:len(parts)]
    out = []
    if method in ("creep", "combined"):
        post = fit_creep_batched([(p[0], p[1]) for p in parts], key=seeds[-1], show_progress=show_progress)
    for i, (sp, yp, w, _, n_w) in enumerate(parts):
        params, band, ess, p_variant = {}, None, float("nan"), {}
        extra = {}
        onset = _check_onset(find_onset(sp, yp) if find_onset else onsets[i], sp)
        if method == "creep":
            point, lo, hi, status, band = _creep_from_posterior(post, i, sp, yp, w, n_w, level, keys[i], onset)
            params, ess = _summaries(post, i, level), float(post.ess[i])
            p_variant = dict(zip(CREEP_VARIANTS, map(float, post.p_variant[i])))
        elif method == "combined":
            point, lo, hi, status, band, extra = _combined(post, i, sp, yp, w, n_w, level, keys[i], calibration,
                                                           (lo_b, hi_b) if bounds is not None else None, onset)
            params, ess = _summaries(post, i, level), float(post.ess[i])
            p_variant = dict(zip(CREEP_VARIANTS, map(float, post.p_variant[i])))
        elif method == "persistence":
            point, lo, hi = _persistence(sp, yp, w, n_w, level, w[1] - w[0])
            status = "ok"
        else:
            point, lo, hi, status = _law(sp, yp, w, n_w, level, method, keys[i])
        if bounds is not None:  # the metric cannot leave its range: neither can its forecast
            point, lo, hi = (float(np.clip(v, lo_b, hi_b)) for v in (point, lo, hi))
            if band is not None:
                band = {k: (v if k == "steps" else np.clip(v, lo_b, hi_b)) for k, v in band.items()}
        horizon = float(w[1] - sp[-1]) / float(w[1] - sp[0])  # run fractions from the prefix's end to the window's
        p_c = hazard.p_collapse(horizon)
        extra.update(p_collapse=p_c, p_collapse_interval=hazard.interval(horizon), collapse_onset=onset)
        if mix and p_c > 0.0:
            point, lo, hi, extra = _mixed(point, lo, hi, level, extra, p_c, start_level(yp),
                                          (lo_b, hi_b) if bounds is not None else None)
        out.append(WindowForecast(float(point), float(lo), float(hi), float(level), method, status, float(sp[-1]),
                                  int(sp.size), (float(w[0]), float(w[1])), int(n_w), params, band, ess,
                                  p_variant, **extra))
    return out


def _check_onset(onset, sp):
    """A collapse onset inside the prefix with at least 2 points from it on, as a float; None stays None."""
    if onset is None:
        return None
    try:
        v = float(onset)
    except (TypeError, ValueError):
        raise InvalidValueError(f"collapse_onset must be a step of the prefix or None, got {onset!r}") from None
    if not (math.isfinite(v) and sp[0] <= v <= sp[-1]):
        raise InvalidValueError(f"collapse_onset must be a step of the prefix, in [{sp[0]:g}, {sp[-1]:g}], got {onset!r}")
    if np.count_nonzero(sp >= v) < 2:
        raise InvalidValueError(f"collapse_onset {v:g} leaves fewer than 2 prefix points from it on (the level after "
                                "a collapse needs 2)")
    return v


def _mixed(point, lo, hi, level, extra, p, start, bounds):
    """The forecast mixed with the collapse branch (:func:`grpojax.fit._collapse_hazard.mixture_quantiles`):
    its median, central ``level`` interval and quantiles; the forecast without it in ``smooth``."""
    smooth = {"mean": float(point), "lo": float(lo), "hi": float(hi), "level": float(level),
              "quantiles": extra.get("quantiles")}
    q = mixture_quantiles(smooth, p, start, MIXTURE_TAUS, bounds)
    a = (1.0 - level) / 2.0
    m, lo_m, hi_m = (float(np.interp(x, MIXTURE_TAUS, q)) for x in (0.5, a, 1.0 - a))
    extra = dict(extra, quantiles={"taus": MIXTURE_TAUS.copy(), "values": q}, collapse_mixture=True,
                 smooth={k: smooth[k] for k in ("mean", "lo", "hi")})
    return m, lo_m, hi_m, extra


def forecast_features(sp, yp, w, creep_lo, creep_hi, level: float = _COMPONENT_LEVEL) -> dict:
    """What the calibration conditions on: the horizon ``(window end − prefix end)/(prefix span)``, the
    prefix's AR(1) noise sd and its ratio to the prefix's sd, the creep predictive sd (from its central
    ``level`` interval) and the error scale (:func:`grpojax.fit._calibration.forecast_scale` of the prefix's
    sd and noise sd)."""
    span = float(sp[-1] - sp[0])
    horizon = float(w[1] - sp[-1]) / span if span > 0 else float("inf")
    noise_sd, _ = _ar1_noise(yp)
    sd = float(np.std(yp))
    ratio = float(min(noise_sd / sd, 2.0)) if sd > 0 else 1.0
    post_sd = max(float(creep_hi) - float(creep_lo), 0.0) / (2.0 * special.ndtri(0.5 + level / 2.0))
    return {"horizon": horizon, "noise_ratio": ratio, "noise_sd": float(noise_sd), "prefix_sd": sd, "post_sd": post_sd,
            "scale": float(forecast_scale(sd, noise_sd))}


def _combined(post, i, sp, yp, w, n_w, level, key, calibration, bounds, onset=None):
    """The four forecasters (their own 90% intervals), the median of those that vouch for their fit and the
    calibrated interval; ``onset``: a collapse the prefix holds (persistence from it on, the laws abstain)."""
    k1, k2, k3 = key.spawn(3)
    c_pt, c_lo, c_hi, status, band = _creep_from_posterior(post, i, sp, yp, w, n_w, _COMPONENT_LEVEL, k1, onset)
    comps = {"creep": {"mean": c_pt, "lo": c_lo, "hi": c_hi, "status": status}}
    pe = _persistence(sp, yp, w, n_w, _COMPONENT_LEVEL, w[1] - w[0], since=onset)
    comps["persistence"] = {"mean": pe[0], "lo": pe[1], "hi": pe[2], "status": "ok"}
    for law, k in (("exponential", k2), ("sigmoid", k3)):
        try:
            pt, lo, hi, st = _law(sp, yp, w, n_w, _COMPONENT_LEVEL, law, k)
        except ValueError as exc:  # a law that cannot be fitted to this prefix drops out of the average
            pt, lo, hi, st = float("nan"), float("nan"), float("nan"), f"failed: {exc}"
        if onset is not None and not st.startswith("failed"):  # fitted across the fall: it does not vote
            st = f"fitted across the collapse at step {onset:g}"
        comps[law] = {"mean": float(pt), "lo": float(lo), "hi": float(hi), "status": st}
    feats = forecast_features(sp, yp, w, c_lo, c_hi)
    cf = calibrated_forecast(votes(comps), horizon=feats["horizon"],
                             noise_ratio=feats["noise_ratio"], scale=feats["scale"], level=level, bounds=bounds,
                             cal=calibration)
    extra = {"components": comps, "weights": cf["weights"], "features": feats,
             "quantiles": {"taus": np.asarray(cf["taus"]), "values": np.asarray(cf["quantiles"])}}
    return cf["mean"], cf["lo"], cf["hi"], status, band, extra


def forecast_window(run_or_curve, *, prefix: float, window: float = FORECAST_WINDOW, level: float = FORECAST_LEVEL,
                    method: str = FORECAST_METHOD, metric: str = "reward_mean", end_step: float | None = None, key=None,
                    bounds=None,
                    calibration=None, collapse_hazard=None, collapse_mixture: bool | None = None,
                    collapse_onset=None) -> WindowForecast:
    """Forecast the mean reward over the final ``window`` of a run from its first ``prefix``.

    The run spans ``[first step, end_step]`` (``end_step`` defaults to the last logged step: pass the
    planned number of steps to forecast a run still in progress). The prefix is every observation
    with ``step ≤ first + prefix·span``; the target is the mean over ``(end − window·span, end]``
    (the logged points there, or as many as the prefix's logging cadence implies).

    Args:
        run_or_curve: a log file or folder (read by :func:`grpojax.logs.read_log`), a
            :class:`grpojax.logs.RunLog` (its ``metric`` column is used), a mapping of columns
            (read by :meth:`grpojax.logs.RunLog.from_columns`, as :func:`grpojax.diagnose.diagnose` does) or
            ``(steps, values)``.
        prefix: fraction of the step range used for the fit, in (0, 1).
        window: fraction of the step range the target mean covers, in (0, 1 − prefix].
        level: predictive interval level.
        method: one of :data:`METHODS` (default ``"combined"``: the calibrated average of the other four).
        metric: run column to forecast (``"reward_mean"``, ``"eval_reward"``, ...).
        end_step: planned last step (None: the last logged step).
        key: an integer seed, a NumPy ``SeedSequence`` or a JAX key (None: seed 0). An integer seed is the
            command line's ``--seed``: ``grpojax fit LOG --prefix F --seed S`` draws the same numbers.
        bounds: ``(lo, hi)`` the metric can take (e.g. ``(0, 1)`` for an accuracy), or None: the range of a
            metric known by name (:func:`grpojax.fit.metric_bounds`; ``(0, 1)`` for accuracies and rates,
            none for rewards), as on the command line. The forecast, its interval and the band are clipped
            to it: a quantile of a bounded quantity's predictive distribution lies inside its range.
        calibration: ``"combined"`` only: a :class:`grpojax.fit.ForecastCalibration` (None: the one
            shipped with grpojax, :func:`grpojax.fit.default_calibration`).
        collapse_hazard: the collapse hazard behind ``p_collapse``: None (the one learned from labelled real
            runs, :data:`grpojax.fit._collapse_hazard.DEFAULT_HAZARD`), a
            :class:`grpojax.fit._collapse_hazard.CollapseHazard`, or a rate per unit of run fraction (a
            number ``>= 0``; 0: ``p_collapse`` is 0 and the forecast is the one without the collapse branch).
        collapse_mixture: mix the collapse branch into the predictive distribution (None: :data:`COLLAPSE_MIXTURE`).
        collapse_onset: the step at which a collapse the prefix already holds began, or None; or a function
            ``f(prefix_steps, prefix_values) -> onset or None`` applied to the prefix as this function splits
            it. ``"combined"`` and ``"creep"`` then forecast from the level after it (status ``"collapse"``);
            the other methods only report it. This package does not look for one (the detectors build on it):
            ``grpojax fit --prefix`` and ``grpojax watch`` pass :func:`grpojax.diagnose.collapse_onset`, the
            collapse finding on the prefix; pass it too from Python for the same forecast.

    Returns:
        :class:`WindowForecast`; ``str()`` of it is one line of text.

    Raises:
        ValueError: bad ``prefix``/``window``/``level``/``method``/``bounds``, a ``metric`` the run does not
            have, too few prefix points, bad steps.
    """
    return forecast_windows([run_or_curve], prefix=prefix, window=window, level=level, method=method, metric=metric,
                            end_steps=[end_step], key=key, bounds=bounds, calibration=calibration,
                            collapse_hazard=collapse_hazard, collapse_mixture=collapse_mixture,
                            collapse_onsets=collapse_onset if callable(collapse_onset) else [collapse_onset])[0]
