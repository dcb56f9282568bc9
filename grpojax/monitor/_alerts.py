"""Collapse-risk alerts: an early warning, while the run trains, that the reward may be about to collapse.

A collapse (:mod:`grpojax.diagnose._collapse`) is usually preceded by a jump in another logged signal:
the entropy or the response length falls (or explodes), the KL or the grad norm jumps up, the share of
zero-variance groups jumps up. :func:`collapse_risk` reads the events (:mod:`grpojax.diagnose._events`)
of the run *as logged so far* -- nothing after the current step is used -- and raises a ``collapse-risk``
alert when such a jump lies in the recent stretch of the run while the reward has risen and has not yet
fallen. The model adds its own reasons when the log's meta allows them: the exact stability margin of the
oscillator (:func:`grpojax.monitor.update`'s ``stability``), and the escape probability of the noisy update
(:func:`grpojax.dynamics.escape_probability`) when the meta holds the gradient noise and the basin width.

Levels (thresholds in :class:`AlertConfig`, set on the development runs only; ``benchmarks/RESULTS.md``
gives the scores):

- ``info``: the stability margin is small but positive, or the escape probability over the rest of the
  planned run is at least ``escape_info``;
- ``warning``: one precursor jump in the recent stretch (in its harmful direction), or a margin at or below
  0 (the mean update is unstable), or an escape probability of at least ``escape_warning``; a jump of a
  metric of ``info_only`` (the KL, which rises through every healthy run) with no other precursor beside it
  is ``info`` until the reward has started to fall;
- ``critical``: ``critical_precursors`` or more distinct precursor metrics jumped in the recent stretch, or
  one did and the reward has already started to fall (lost ``falling_fraction`` of its rise).

:class:`AlertTracker` turns the level of each update into the alerts a watch streams: an alert is raised
when the level goes above the highest of the current episode (none -> info -> warning -> critical); a level
that holds, falls or flickers raises nothing, and once no risk has been seen for ``cool`` points a later one
is raised again.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from pydantic import Field, field_validator

from grpojax._config import Config, Finite, Int

__all__ = ["ALERT_KIND", "ALERT_LEVELS", "PRECURSOR_DIRECTIONS", "AlertConfig", "AlertTracker", "collapse_risk",
           "escape_risk", "is_precursor", "precursor_events"]

ALERT_KIND = "collapse-risk"
ALERT_LEVELS = ("info", "warning", "critical")
"""Alert levels, from the mildest."""

PRECURSOR_DIRECTIONS = {
    "entropy": ("down",),
    "response_length": ("down",),
    "kl": ("up",),
    "grad_norm": ("up",),
    "frac_zero_std": ("up",),
    "response_clip_frac": ("up",),
    "clip_frac": ("up",),
}
"""The metrics read as precursors and the directions of a jump that count (a collapse's usual chain). A rise
of the entropy or of the response length is left out: on the development runs it came with runs that did
not collapse (a run without a baseline) as often as with one that did."""


def precursor_events(run, cfg=None) -> dict:
    """``{metric: SeriesEvents}`` of the precursor metrics of :data:`PRECURSOR_DIRECTIONS` the run logs
    (:func:`grpojax.diagnose._events.series_events`, with the diagnosis's thresholds)."""
    from grpojax.diagnose import DEFAULT_CONFIG  # noqa: PLC0415
    from grpojax.diagnose import series_events  # noqa: PLC0415

    cfg = DEFAULT_CONFIG if cfg is None else cfg
    out = {}
    for m in PRECURSOR_DIRECTIONS:
        if run.count(m):
            s, v = run.series(m)
            out[m] = series_events(s, v, m, cfg)
    return out


class AlertConfig(Config):
    """Thresholds of the collapse-risk alert.

    Attributes:
        recent: a precursor jump counts while it lies within this fraction of the run's points so far
            before the last point ...
        recent_points: ... and at least this many points.
        min_progress: no alert before this many points of the reward (the warm-up's transients).
        min_event_size: a precursor jump is at least this many noise sd (the events' own threshold is a floor).
        rise_sd: the reward has risen by at least this many per-step noise sd above its start ...
        fallen_fraction: ... and has not yet lost this fraction of its rise (trailing mean of the last
            ``trail`` points against the peak of the smoothed reward): a collapse already under way is
            the collapse finding, not a warning.
        falling_fraction: a precursor with the reward already down by this fraction of its rise is critical.
        trail: points of the trailing mean of the reward.
        cool: an alert episode ends after this many points without risk (then a new risk is alerted again).
        critical_precursors: distinct precursor metrics in the recent stretch that make the alert critical.
        info_only: precursor metrics whose jump alone is info, not a warning, while the reward has not yet
            lost ``falling_fraction`` of its rise (they still count towards ``critical_precursors``). The
            KL to the reference grows through healthy runs: on 71 healthy public runs 85 of 109 warnings came
            from a KL jump alone (``benchmarks/collapse/kl_alone_rule.md``).
        margin_info: a stability margin 1 - eta/eta*_exact in (0, margin_info] is info; <= 0 is a warning.
        escape_info: P(escape before the planned end) at or above this is info ...
        escape_warning: ... at or above this a warning.
    """

    recent: Finite = Field(0.1, gt=0, le=1)
    recent_points: Int = Field(5, ge=1)
    min_progress: Int = Field(12, ge=4)
    min_event_size: Finite = Field(5.0, ge=0)
    rise_sd: Finite = Field(2.0, ge=0)
    fallen_fraction: Finite = Field(0.5, gt=0, le=1)
    falling_fraction: Finite = Field(0.25, gt=0, le=1)
    trail: Int = Field(3, ge=1)
    cool: Int = Field(20, ge=1)
    critical_precursors: Int = Field(2, ge=1)
    info_only: tuple[str, ...] = ("kl",)
    margin_info: Finite = Field(0.1, ge=0)
    escape_info: Finite = Field(0.1, ge=0, le=1)
    escape_warning: Finite = Field(0.5, ge=0, le=1)

    @field_validator("info_only")
    @classmethod
    def _known_precursors(cls, v):
        unknown = [m for m in v if m not in PRECURSOR_DIRECTIONS]
        if unknown:
            raise ValueError(f"expected precursor metrics among {', '.join(PRECURSOR_DIRECTIONS)}; "
                             f"unknown: {', '.join(map(str, unknown))}")
        return v


def is_precursor(metric: str, event, cfg: AlertConfig) -> bool:
    """Whether an event of ``metric`` counts as a precursor: a metric of :data:`PRECURSOR_DIRECTIONS`, in one of
    its directions, at least ``cfg.min_event_size`` noise sd."""
    return event.direction in PRECURSOR_DIRECTIONS.get(metric, ()) and abs(event.size) >= cfg.min_event_size


def _rank(level: str | None) -> int:
    return 0 if level is None else ALERT_LEVELS.index(level) + 1


def _reward_state(run, col: str, cfg: AlertConfig) -> dict | None:
    """Start, peak, rise, noise and how much of the rise the trailing mean has lost, from the points so far."""
    from grpojax.diagnose import noise_sd  # noqa: PLC0415
    from grpojax.logs import moving_average  # noqa: PLC0415

    if not run.count(col):
        return None
    s, y = run.series(col)
    keep = np.isfinite(y) & np.isfinite(s)
    s, y = np.asarray(s[keep], float), np.asarray(y[keep], float)
    n = y.size
    if n < cfg.min_progress:
        return None
    w = max(3, min(10, math.ceil(0.05 * n)))
    sm = moving_average(y, w, edge="shrink")
    start = float(np.median(y[:max(1, min(10, n // 2))]))
    peak = float(np.max(sm))
    rise = peak - start
    sigma = noise_sd(y)
    now = float(np.mean(y[-cfg.trail:]))
    lost = (peak - now) / rise if rise > 0 else float("nan")
    return dict(column=col, steps=s, n=n, start=start, peak=peak, rise=rise, sigma=sigma, now=now, lost=lost,
                risen=bool(rise > 0 and rise >= cfg.rise_sd * sigma))


def escape_risk(hp: dict, stability: dict | None, last: float, end: float | None) -> tuple[float | None, str]:
    """P(escape before the planned end) of the noisy linearised update, or ``(None, why not)``.

    Needs the stability's curvature and, in the log's meta, ``gradient_noise`` (per-sample gradient variance
    along the error coordinate) and ``basin`` (half-width of the plateau's basin); ``samples_per_step`` is
    optional (default 1).
    """
    if stability is None:
        return None, "escape probability needs the stability margin"
    if "gradient_noise" not in hp or "basin" not in hp:
        return None, "escape probability needs gradient_noise and basin in the log's meta"
    try:
        from grpojax.dynamics import escape_probability  # noqa: PLC0415
    except ImportError:  # an install without the escape model: the margin alone
        return None, "escape probability is not available in this install"
    if end is None or not end > last:
        return None, "escape probability needs a planned end past the last step"
    adam = "beta1" in hp
    mu = hp.get("beta1", hp.get("mu", 0.0))
    eta = hp["eta"] * ((1.0 - mu) if adam else 1.0)
    if adam and stability["curvature"] > 0:  # the gain law: at the step Adam's grown v̂ leaves
        return _adam_escape_risk(hp, stability, eta, mu, max(1, int(end - last)))
    try:
        est = escape_probability(eta, mu, int(hp.get("k_ref", hp.get("staleness", 1))), stability["curvature"],
                                 noise=hp["gradient_noise"], basin=hp["basin"], steps=max(1, int(end - last)),
                                 lag=stability.get("lag", "periodic"), k_instant=hp.get("k_instant", 0.0),
                                 samples_per_step=hp.get("samples_per_step", 1))
    except (ValueError, TypeError) as exc:
        return None, f"escape probability failed: {exc}"
    return float(np.asarray(est.probability)), ""


def _adam_escape_risk(hp: dict, stability: dict, eta_hb: float, beta1: float, steps: int) -> tuple[float | None, str]:
    """Adam's P(escape) at the gain law's effective step (``grpojax.dynamics.adam_escape``)."""
    from grpojax.dynamics import adam_escape, adam_to_heavy_ball, exact_critical_eta  # noqa: PLC0415

    k, lag = int(hp.get("k_ref", hp.get("staleness", 1))), stability.get("lag", "periodic")
    kd, k0 = stability["curvature"], hp.get("k_instant", 0.0)
    try:
        star = float(exact_critical_eta(beta1, k, kd, lag=lag, k_instant=k0))
        est = adam_escape(eta_hb / star, k, kd, adam=adam_to_heavy_ball(beta1=beta1), noise=hp["gradient_noise"],
                          basin=hp["basin"], steps=steps, lag=lag, k_instant=k0,
                          samples_per_step=hp.get("samples_per_step", 1), onset=False)
    except (ValueError, TypeError, ZeroDivisionError) as exc:
        return None, f"escape probability failed: {exc}"
    return est.probability, ""


def collapse_risk(run, events: dict, *, stability: dict | None = None, escape: float | None = None,
                  config: AlertConfig | None = None, column: str | None = None) -> dict | None:
    """The collapse risk of a run logged so far, or None.

    Args:
        run: the :class:`grpojax.logs.RunLog` as logged so far (the risk uses nothing else: it is causal).
        events: ``{metric: SeriesEvents}`` of that run (:func:`grpojax.diagnose._events.detect_events`,
            or a :class:`grpojax.diagnose.Diagnosis`'s ``events``).
        stability: the watch engine's stability dict (``margin``), or None.
        escape: P(escape before the planned end) (:func:`escape_risk`), or None.
        config: :class:`AlertConfig`.
        column: the reward column (default ``reward_mean``, else ``eval_reward``).

    Returns:
        ``{kind, level, step, reason, precursors: [{metric, step, direction, size, confidence, before, after}],
        reward: {column, start, peak, now, lost}, margin, escape}`` or None when there is no risk.
    """
    cfg = AlertConfig() if config is None else config
    col = column or ("reward_mean" if run.count("reward_mean") else "eval_reward")
    last = float(run.steps[-1]) if run.steps.size else float("nan")
    rw = _reward_state(run, col, cfg)
    reasons: list[str] = []
    level = None
    precursors: list[dict[str, Any]] = []
    if rw is not None and rw["risen"] and not rw["lost"] >= cfg.fallen_fraction:
        s = rw["steps"]
        k = max(int(cfg.recent_points), math.ceil(cfg.recent * rw["n"]))
        since = float(s[max(0, rw["n"] - k)])
        warm = float(s[min(rw["n"] - 1, cfg.min_progress - 1)])
        for m in PRECURSOR_DIRECTIONS:
            se = events.get(m)
            if se is None:
                continue
            hits = [e for e in se.events if e.step >= since and e.step > warm and is_precursor(m, e, cfg)]
            if hits:
                e = hits[-1]
                precursors.append(dict(metric=m, step=float(e.step), direction=e.direction, size=float(e.size),
                                       confidence=float(e.confidence), before=float(e.before), after=float(e.after)))
        precursors.sort(key=lambda d: (d["step"], d["metric"]))
        if precursors:
            falling = rw["lost"] >= cfg.falling_fraction
            specific = any(p["metric"] not in cfg.info_only for p in precursors)
            if len(precursors) >= cfg.critical_precursors or (falling and specific):
                level = "critical"
            else:
                level = "warning" if (falling or specific) else "info"
            chain = ", ".join(f"{p['metric']} {p['direction']} at step {p['step']:g} "
                              f"({abs(p['size']):.3g} noise sd)" for p in precursors)
            reasons.append(f"{chain} while {col} is still at {rw['now']:.3g} (peak {rw['peak']:.3g}, "
                           f"{max(rw['lost'], 0.0):.0%} of its rise lost)")
    margin = None if stability is None else stability.get("margin")
    if margin is not None and np.isfinite(margin):
        if margin <= 0:
            level = level if _rank(level) >= _rank("warning") else "warning"
            reasons.append(f"the mean update is unstable: margin 1 - eta/eta*_exact = {margin:.3g} <= 0")
        elif margin <= cfg.margin_info:
            level = level or "info"
            reasons.append(f"small stability margin 1 - eta/eta*_exact = {margin:.3g}")
    if escape is not None and np.isfinite(escape) and escape >= cfg.escape_info:
        lv = "warning" if escape >= cfg.escape_warning else "info"
        level = level if _rank(level) >= _rank(lv) else lv
        reasons.append(f"P(escape from the plateau before the planned end) = {escape:.2f}")
    if level is None:
        return None
    reward = None if rw is None else {k: rw[k] for k in ("column", "start", "peak", "now", "lost")}
    return dict(kind=ALERT_KIND, level=level, step=last, reason="; ".join(reasons), precursors=precursors,
                reward=reward, margin=margin, escape=escape)


class AlertTracker(NamedTuple):
    """The level of the current risk episode and every alert raised so far (immutable: :meth:`fold` returns
    a new tracker).

    An episode begins with the first risk and ends once no risk has been seen for ``cool`` points; within it
    an alert is raised only when the level goes above the episode's highest so far (a risk that flickers
    from one update to the next is one alert).
    """

    level: str | None = None
    alerts: tuple = ()
    last_risk_n: int = 0

    def fold(self, risk: dict | None, n: int, cool: int) -> tuple["AlertTracker", dict | None]:
        """``(tracker, alert raised now or None)`` after an update at ``n`` points."""
        if risk is None:
            level = self.level if self.level is not None and n - self.last_risk_n < cool else None
            return self._replace(level=level), None
        raised = risk if _rank(risk["level"]) > _rank(self.level) else None
        level = risk["level"] if raised else self.level
        return AlertTracker(level, self.alerts + ((raised,) if raised else ()), n), raised
