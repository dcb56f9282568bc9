"""The watch engine: a pure update ``update(state, run) -> (state, report)`` over a run that keeps growing.

Each call looks at the whole run read so far (a :class:`grpojax.logs.RunLog`) and the state of the
previous call, and returns the new state and a :class:`WatchReport`:

- **forecast** (refreshed once ``config.every`` new points of the metric have arrived): the mean of the
  metric over the last window of the planned run, with its predictive interval, from
  :func:`grpojax.fit.forecast_window` (the planned last step is ``config.end_step``, else the run's
  ``max_steps``/``steps``/``total_steps`` meta, else twice the last step); with the ``combined`` (default) and ``creep`` methods also
  the asymptotic plateau p* with its interval and the **time to plateau** (steps until the median
  forecast curve is within 5% of the gain from p*);
- **stability** (when the log's meta holds the learning rate and K_ref): damping ratio ζ and the exact
  margin 1 − η/η*_exact of the oscillator; the curvature comes from the meta (``curvature``), else from
  the fitted fast rate (:func:`grpojax.monitor.curvature_from_rate`);
- **findings** of the detectors (:func:`grpojax.diagnose.diagnose`) as they appear, each with the step it
  was first seen at; a finding that stops holding at a later refresh stays in the list marked past
  (``active`` False) with the steps it held over, and comes back active if it holds again. The active
  findings of a refresh are exactly those of ``diagnose`` on the run read so far (the same code);
- **best checkpoint so far**: the step of the largest smoothed eval reward (or of the metric when the
  run logs fewer than 3 eval points);
- **collapse-risk alerts** (:mod:`grpojax.monitor._alerts`): at each update with new points, the precursor jumps of the
  events in the recent stretch while the reward has not yet fallen (from the detectors' events: only the
  points logged so far) and the model's margin and escape probability; an alert is raised, with its level
  (info, warning, critical), when the level goes up.

Nothing here touches a terminal or a file: ``grpojax watch`` and the training hooks draw and write.
"""

from __future__ import annotations

import math
import time
from typing import Any, NamedTuple

import numpy as np

from pydantic import Field, field_validator

from grpojax._config import Bool, Config, Finite, Int
from grpojax._defaults import FORECAST_LEVEL, FORECAST_METHOD, FORECAST_WINDOW, LAG
from grpojax._errors import InvalidValueError
from grpojax.logs import RunLog, moving_average
from grpojax.monitor._alerts import (PRECURSOR_DIRECTIONS, AlertConfig, AlertTracker, collapse_risk, escape_risk,
                                     precursor_events)

__all__ = ["MonitorConfig", "WatchState", "WatchReport", "init_state", "update", "hyperparams_from_meta",
           "active_findings"]

_META_KEYS = {
    "eta": ("eta", "lr", "learning_rate"),
    "mu": ("mu", "momentum"),
    "beta1": ("beta1", "adam_beta1"),
    "k_ref": ("k_ref", "num_iterations", "ppo_epochs", "epochs_per_rollout"),
    "staleness": ("staleness",),
    "curvature": ("curvature",),
    "k_instant": ("k_instant",),
    "group_size": ("group_size", "num_generations"),
    "end_step": ("max_steps", "steps", "total_steps", "total_training_steps"),
    "gradient_noise": ("gradient_noise",),
    "basin": ("basin",),
    "samples_per_step": ("samples_per_step",),
}


class MonitorConfig(Config):
    """Settings of the watch engine (a frozen, validated config: ``config.replace(every=20)`` for a copy).

    Attributes:
        metric: column forecast (default ``reward_mean``).
        every: refresh the forecast and the detectors after this many new points of ``metric`` (≥ 1).
        method: forecasting method of :func:`grpojax.fit.forecast_window` (default ``combined``: the
            median of the creep posterior and three baselines, those that vouch for their fit, with a
            calibrated interval).
        level: interval level.
        end_step: planned last step (None: from the meta, else twice the last step).
        window: fraction of the planned run the forecast window covers.
        smooth: moving-average window (points) for the best checkpoint.
        diagnose: run the detectors.
        forecast: compute the forecast and the stability margin (both import JAX and fit a model:
            seconds). ``False`` keeps the update to NumPy (detectors and best checkpoint, well under a
            second) and leaves ``method`` unchecked: ``grpojax watch`` reports from such an update at once
            and adds the forecast from a second engine (``forecast=True, diagnose=False``) when it is ready.
        bounds: ``(lo, hi)`` the metric can take (e.g. ``(0, 1)`` for an accuracy), or None: the
            forecast and its interval are clipped to it (see :func:`grpojax.fit.forecast_window`); None
            takes the range of a metric known by name (:func:`grpojax.fit.metric_bounds`: accuracies,
            pass rates) and leaves any other metric unbounded.
        alerts: raise collapse-risk alerts (from the detectors' events when ``diagnose``, from the
            stability margin when ``forecast``).
        alert: the alert's thresholds (:class:`grpojax.monitor.AlertConfig`).
    """

    metric: str = "reward_mean"
    every: Int = Field(10, ge=1)
    forecast: Bool = True  # before ``method``: its check reads it
    method: str = FORECAST_METHOD
    level: Finite = Field(FORECAST_LEVEL, gt=0, lt=1)
    end_step: Finite | None = Field(None, gt=0)
    window: Finite = Field(FORECAST_WINDOW, gt=0, lt=1)
    smooth: Int = Field(5, ge=1)
    diagnose: Bool = True
    bounds: tuple[Finite, Finite] | None = None
    alerts: Bool = True
    alert: AlertConfig = Field(default_factory=AlertConfig)

    @field_validator("method")
    @classmethod
    def _method(cls, v, info):
        if not info.data.get("forecast", True):
            return v  # no forecast: the method is not used (and grpojax.fit, with JAX, is not imported)
        from grpojax.fit import WINDOW_METHODS  # noqa: PLC0415  (the engine imports fitting lazily)

        if v not in WINDOW_METHODS:
            raise ValueError(f"expected one of {', '.join(WINDOW_METHODS)}")
        return v

    @field_validator("bounds")
    @classmethod
    def _bounds(cls, v):
        if v is not None and not v[0] < v[1]:
            raise ValueError("expected lo < hi")
        return v


class WatchState(NamedTuple):
    """What the engine carries from one update to the next (start with :func:`init_state`)."""

    updates: int
    n_points: int
    n_at_refresh: int
    forecast: dict | None
    stability: dict | None
    findings: tuple
    best: dict | None
    cost_s: float
    alerts: AlertTracker = AlertTracker()


class WatchReport(NamedTuple):
    """One update's view of the run (``to_dict`` for JSON).

    Attributes:
        run: run name; ``step``: last logged step; ``n_points``: finite points of the metric.
        refreshed: whether the forecast and detectors were recomputed in this update.
        forecast: ``{mean, lo, hi, level, method, status, window, prefix_end, end_step, plateau,
            time_to_plateau, fast_rate, at_step, n_points}`` or None (``plateau`` ``{median, lo, hi}`` with
            ``combined`` and ``creep``; ``at_step`` and ``n_points``: the last step and the number of points
            it was computed from, earlier than the report's own when it was not refreshed).
        stability: ``{damping_ratio, regime, margin, exact_critical_eta, spectral_radius, curvature,
            curvature_source, in_range}`` or None when the meta lacks the hyperparameters.
        findings: every finding so far, ``{mode, first_step, severity, level, reason, advice, active,
            last_step, until_step}``: ``active`` False marks a finding that held from ``first_step`` to
            ``last_step`` (the last refresh it held at) and no longer held at ``until_step``.
        new_findings: modes first detected in this update.
        best: ``{step, value, metric, smoothed_over}`` or None.
        notes: why something is missing, one line each.
        cost_s: seconds this update took.
        alerts: every collapse-risk alert raised so far, ``{kind, level, step, reason, precursors, reward,
            margin, escape}`` (:func:`grpojax.monitor.collapse_risk`).
        new_alerts: the alerts raised in this update (the level went up).
    """

    run: str
    step: float
    n_points: int
    refreshed: bool
    forecast: dict | None
    stability: dict | None
    findings: tuple
    new_findings: tuple
    best: dict | None
    notes: tuple
    cost_s: float
    alerts: tuple = ()
    new_alerts: tuple = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        from grpojax._io import to_jsonable  # noqa: PLC0415

        d = self._asdict()
        d["findings"] = [dict(f) for f in self.findings]
        d["new_findings"] = list(self.new_findings)
        d["notes"] = list(self.notes)
        d["alerts"] = [dict(a) for a in self.alerts]
        d["new_alerts"] = [dict(a) for a in self.new_alerts]
        return to_jsonable(d)


_MIN_DETECT_POINTS = 8  # points of the metric before the detectors run


def init_state() -> WatchState:
    """The state before the first update."""
    return WatchState(0, 0, 0, None, None, (), None, 0.0)


def _num(v):
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def hyperparams_from_meta(meta: dict) -> dict:
    """The hyperparameters a run log's meta holds: ``{eta, mu, beta1, k_ref, staleness, lag, curvature,
    k_instant, group_size, end_step}`` (missing ones absent); a nested ``hyperparams`` dict counts too."""
    pools = [meta, meta.get("hyperparams") or {}, meta.get("config") or {}]
    out: dict[str, Any] = {}
    for name, keys in _META_KEYS.items():
        for pool in pools:
            hit = next((_num(pool[k]) for k in keys if isinstance(pool, dict) and k in pool
                        and _num(pool[k]) is not None), None)
            if hit is not None:
                out[name] = hit
                break
    lag = next((p.get("lag") for p in pools if isinstance(p, dict) and p.get("lag") in ("constant", "periodic")), None)
    if lag is not None:
        out["lag"] = lag
    if str(meta.get("optimizer", "")).lower().startswith("adam") and "beta1" not in out:
        out.pop("mu", None)
        out["beta1"] = 0.9
    return out


def _end_step(first, last, hp, config):
    """The planned last step: the config's, the meta's, else twice the span so far (past the plan: +25%)."""
    end = config.end_step if config.end_step is not None else hp.get("end_step")
    if end is None:
        return float(first + 2.0 * (last - first))
    return float(end) if end > last else float(last + 0.25 * (last - first))


def _forecast(run, s, y, hp, config):
    from grpojax.fit import MIN_CREEP_POINTS, forecast_window, metric_bounds  # noqa: PLC0415

    if s.size < MIN_CREEP_POINTS:
        return None, f"forecast waits for {MIN_CREEP_POINTS} points of {config.metric} (has {s.size})"
    first, last = float(s[0]), float(s[-1])
    if last <= first:
        return None, "forecast needs more than one step"
    end = _end_step(first, last, hp, config)
    prefix = min((last - first) / (end - first) * (1 + 1e-9), 0.999)
    window = min(config.window, 1.0 - prefix)
    from grpojax.diagnose import collapse_onset  # noqa: PLC0415

    # a collapse the run already holds: the forecast starts from the level after it (as fit --prefix does)
    f = forecast_window((s, y), prefix=prefix, window=window, level=config.level, method=config.method,
                        end_step=end, bounds=config.bounds if config.bounds is not None else metric_bounds(config.metric),
                        collapse_onset=collapse_onset)
    out = dict(mean=f.mean, lo=f.lo, hi=f.hi, level=f.level, method=f.method, status=f.status,
               window=list(f.window), prefix_end=f.prefix_end, end_step=end, plateau=None, time_to_plateau=None,
               fast_rate=None, at_step=last, n_points=int(s.size), collapse_onset=f.collapse_onset,
               p_collapse=f.p_collapse, p_collapse_interval=list(f.p_collapse_interval))
    if f.params:
        ps = f.params["p_star"]
        out["plateau"] = dict(median=ps[0], lo=ps[1], hi=ps[2])
        if np.isfinite(f.params["fast_rate"][0]):  # NaN: every draw is the logistic slow start
            out["fast_rate"] = dict(median=f.params["fast_rate"][0], lo=f.params["fast_rate"][1],
                                    hi=f.params["fast_rate"][2])
        y0 = f.params["y0"][0]
        if f.band is not None and f.status in ("ok", "weak_posterior"):
            bs, med = np.asarray(f.band["steps"]), np.asarray(f.band["median"])
            tol = 0.05 * abs(ps[0] - y0)
            near = np.nonzero(np.abs(med - ps[0]) <= tol)[0]
            if near.size:
                at = float(bs[near[0]])
                out["time_to_plateau"] = dict(step=at, steps_left=max(0.0, at - last))
            else:
                out["time_to_plateau"] = dict(step=None, steps_left=None, beyond=end)
    return out, None


def _stability(hp, forecast):
    from grpojax.monitor._advisor import curvature_from_rate, in_advised_range  # noqa: PLC0415

    if "eta" not in hp or ("k_ref" not in hp and "staleness" not in hp):
        return None, "stability margin needs the learning rate and K_ref (or staleness) in the log's meta"
    from grpojax.dynamics import spectral_radius_constant, spectral_radius_periodic  # noqa: PLC0415
    from grpojax.monitor._advisor import _exact, damping_ratio_np  # noqa: PLC0415

    adam = "beta1" in hp
    mu = hp.get("beta1", hp.get("mu", 0.0))
    eta_hb = hp["eta"] * ((1.0 - mu) if adam else 1.0)
    k = int(hp.get("k_ref", hp.get("staleness")))
    lag = hp.get("lag", LAG if "k_ref" in hp else "constant")
    k0 = hp.get("k_instant", 0.0)
    if not (0 <= mu < 1 and k >= 1 and eta_hb > 0):
        return None, "the hyperparameters in the log's meta are out of range"
    if "curvature" in hp and hp["curvature"] > 0:
        kd, src = hp["curvature"], "log meta"
    elif forecast is not None and forecast.get("fast_rate"):
        try:
            kd = curvature_from_rate(forecast["fast_rate"]["median"], eta_hb, mu, k, lag=lag, k_instant=k0)
        except ValueError as exc:
            return None, f"no curvature: {exc}"
        src = "fitted fast rate K_eff/C inverted with the hyperparameters"
    else:
        return None, "stability margin needs a curvature (meta 'curvature' or a creep forecast)"
    star = _exact(mu, k, kd, lag, k0)
    radius_fn = spectral_radius_constant if lag == "constant" else spectral_radius_periodic
    rho = float(radius_fn(eta_hb * kd, mu, k, a0=eta_hb * k0))
    z = float(damping_ratio_np(eta_hb, mu, k, kd, lag=lag, k_instant=k0))
    regime = "unstable" if rho >= 1 else ("overdamped" if z >= 1 else "underdamped")
    return dict(damping_ratio=z, regime=regime, margin=1.0 - eta_hb / star if math.isfinite(star) else 1.0,
                exact_critical_eta=star / ((1.0 - mu) if adam else 1.0), spectral_radius=rho, curvature=kd,
                curvature_source=src, lag=lag,
                in_range=bool(in_advised_range(eta_hb, mu, k, kd, lag=lag, k_instant=k0, eta_crit_exact=star))), None


def _logged_lr_margin(run: RunLog, stability: dict) -> dict:
    """The margin 1 − lr/η*_exact at the learning rate the log last recorded (a schedule's lr of the moment,
    where the meta's η is its peak): ``{logged_lr, logged_lr_step, margin_at_logged_lr}``, or {} without one."""
    s, lr = run.series("lr")
    keep = np.isfinite(lr)
    star = stability.get("exact_critical_eta")
    if not keep.any() or star is None or not math.isfinite(star) or not star > 0:
        return {}
    return dict(logged_lr=float(lr[keep][-1]), logged_lr_step=float(s[keep][-1]),
                margin_at_logged_lr=1.0 - float(lr[keep][-1]) / star)


def _best(run: RunLog, config):
    col = "eval_reward" if run.count("eval_reward") >= 3 else config.metric
    if not run.count(col):
        return None
    s, y = run.series(col)
    keep = np.isfinite(y)
    s, y = s[keep], y[keep]
    w = max(1, min(int(config.smooth), y.size))
    sm = moving_average(y, w, edge="shrink")
    i = int(np.argmax(sm))
    return dict(step=float(s[i]), value=float(sm[i]), raw=float(y[i]), metric=col, smoothed_over=w)


def _fold_findings(findings: tuple, d, last: float) -> tuple[tuple, list]:
    """The findings after a refresh whose diagnosis is ``d`` at step ``last``: ``(findings, new modes)``."""
    now = set(d.findings)
    out, seen, new = [], set(), []
    for f in findings:
        f = dict(f)
        seen.add(f["mode"])
        if f["mode"] in now:
            r = d[f["mode"]]
            f.update(severity=float(r.severity), level=r.level, reason=r.reason, advice=r.advice, active=True,
                     last_step=last, until_step=None)
        elif f.get("active", True):
            f.update(active=False, until_step=last)
        out.append(f)
    for mode in d.findings:
        if mode not in seen:
            r = d[mode]
            out.append(dict(mode=mode, first_step=last, severity=float(r.severity), level=r.level, reason=r.reason,
                            advice=r.advice, active=True, last_step=last, until_step=None))
            new.append(mode)
    return tuple(out), new


def active_findings(report: "WatchReport") -> tuple[str, ...]:
    """The modes of the findings that hold at the report's last refresh."""
    return tuple(f["mode"] for f in report.findings if f.get("active", True))


def update(state: WatchState, run: RunLog, config: MonitorConfig | None = None, *,
           force: bool = False) -> tuple[WatchState, WatchReport]:
    """Fold the run read so far into the state; return the new state and this update's report.

    Pure: ``state`` and ``run`` are not modified. The forecast, stability and detectors are recomputed
    when ``config.every`` new points of the metric arrived since the last refresh (and on the first
    update with enough points); otherwise the previous ones are reported again. With
    ``config.forecast=False`` the update computes neither the forecast nor the stability margin
    (NumPy only, no JAX import).

    Args:
        state: from :func:`init_state` or the previous update.
        run: the whole run as logged so far.
        config: :class:`MonitorConfig` (default settings when None).
        force: refresh now, however few points arrived (the last update of a watch that ends: its findings
            are then those of ``diagnose`` on the whole log).

    Returns:
        ``(new_state, report)``.

    Raises:
        TypeError: ``run`` is not a :class:`grpojax.logs.RunLog`.
        ValueError: a bad ``config`` (``every`` < 1, unknown method, level outside (0, 1), bad ``bounds``).
    """
    t0 = time.perf_counter()
    config = MonitorConfig() if config is None else config
    if not isinstance(run, RunLog):
        raise TypeError(f"run must be a grpojax.logs.RunLog, got {type(run).__name__}")
    if int(config.every) < 1:
        raise InvalidValueError(f"every must be an integer >= 1, got {config.every!r}")
    if not 0.0 < float(config.level) < 1.0:
        raise InvalidValueError(f"level must be in (0, 1), got {config.level!r}")
    min_points = _MIN_DETECT_POINTS
    if config.forecast:
        from grpojax.fit import MIN_CREEP_POINTS, WINDOW_METHODS, check_bounds  # noqa: PLC0415

        if config.method not in WINDOW_METHODS:
            raise InvalidValueError(f"method must be one of {', '.join(WINDOW_METHODS)}, got {config.method!r}")
        check_bounds(config.bounds)
        min_points = MIN_CREEP_POINTS
    notes: list[str] = []
    if run.count(config.metric):
        s, y = run.series(config.metric)
        keep = np.isfinite(y) & np.isfinite(s)
        s, y = np.asarray(s[keep], float), np.asarray(y[keep], float)
    else:
        s, y = np.zeros(0), np.zeros(0)
        notes.append(f"the log has no {config.metric} column yet")
    n = int(s.size)
    last = float(run.steps[-1]) if run.steps.size else float("nan")
    hp = hyperparams_from_meta(run.meta)
    # a log without reward_mean (an eval-only table) is refreshed on its eval points: the detectors read them
    n_sched = n if n or config.metric != "reward_mean" else run.count("eval_reward")
    due = n_sched > 0 and (force or state.n_at_refresh == 0 or n_sched - state.n_at_refresh >= int(config.every))
    forecast, stability, findings, n_ref = state.forecast, state.stability, state.findings, state.n_at_refresh
    new = []
    tracker, raised = state.alerts, None
    diagnosis = None  # this update's diagnosis, when the detectors run (its events are the precursors')
    if due:
        if config.forecast:
            try:
                forecast, why = _forecast(run, s, y, hp, config)
            except ValueError as exc:
                forecast, why = None, f"forecast failed: {exc}"
            if why:
                notes.append(why)
            stability, why = _stability(hp, forecast)
            if stability is not None and run.count("lr"):
                stability = {**stability, **_logged_lr_margin(run, stability)}
            if why:
                notes.append(why)
        if config.diagnose and n_sched >= _MIN_DETECT_POINTS:
            from grpojax.diagnose import diagnose  # noqa: PLC0415

            diagnosis = diagnose(run, validity=False)
            findings, new = _fold_findings(findings, diagnosis, last)
        if n_sched >= min_points:  # a refresh with enough points counts; fewer: retry at the next update
            n_ref = n_sched
    elif forecast is None and n and config.forecast:
        notes.append(f"forecast waits for {int(config.every) - (n - n_ref)} more points of {config.metric}")
    # alerts: at every update with new points (not only at refreshes: a collapse can come within a refresh
    # interval), from the precursors' events when the detectors run and from the stability margin when the
    # forecast does
    if config.alerts and n > state.n_points and ((config.diagnose and n >= _MIN_DETECT_POINTS)
                                                  or stability is not None):
        esc = None
        if stability is not None:
            end = forecast.get("end_step") if forecast else None
            esc, _why = escape_risk(hp, stability, last, end)
        if diagnosis is not None:  # the series the diagnosis segmented, with the same thresholds: not again
            events = {m: diagnosis.events[m] for m in PRECURSOR_DIRECTIONS if m in diagnosis.events}
        else:
            events = precursor_events(run) if config.diagnose else {}
        risk = collapse_risk(run, events, stability=stability, escape=esc, config=config.alert,
                             column=config.metric if run.count(config.metric) else None)
        tracker, raised = tracker.fold(risk, n, int(config.alert.cool))
    best = _best(run, config)
    cost = time.perf_counter() - t0
    new_state = WatchState(state.updates + 1, n, n_ref, forecast, stability, findings, best, state.cost_s + cost,
                           tracker)
    report = WatchReport(run.name, last, n, bool(due), forecast, stability, findings, tuple(new), best, tuple(notes),
                         cost, tracker.alerts, (raised,) if raised else ())
    return new_state, report
