"""P(the reward collapses before the planned end) and the forecast that allows for it.

A **collapse** is the project's: the reward climbs, then loses more than half of its rise within a short
stretch of the run and does not come back (the collapse finding of :mod:`grpojax.diagnose`; the labelling
rule of the collapse benchmark). A curve fitted to a prefix cannot see one coming, so the window forecast
states the chance of one separately and, on request, mixes it into its predictive distribution.

The model (written down before it was scored):

1. **Hazard.** Collapses arrive at a constant rate ``λ`` per unit of *run fraction* (the run's step span
   from its first step to its planned end is 1), the same for every run: a Poisson process, stopped at
   the first collapse. From labelled series -- ``k`` collapses, each series exposed from its start to its
   collapse onset or, without one, to its end (``E`` run fractions in all) -- ``λ`` has the Jeffreys
   posterior ``Gamma(k + 1/2, E)``.
2. **P(collapse before the end).** From the end of the prefix to the end of the forecast window, ``h`` run
   fractions: the posterior predictive ``p = 1 - (E / (E + h))^(k + 1/2)`` (the mean over the posterior of
   ``1 - exp(-λ h)``), and a 90% interval ``1 - exp(-λ h)`` at the posterior's 5% and 95% quantiles of ``λ``.
   Nothing in the prefix raises or lowers ``p``: on the labelled corpora there are too few collapses to
   learn from what precedes them (the collapse-risk alert of :mod:`grpojax.monitor` warned in time for
   none of the three collapses of the public collapse corpus), so the model is a base rate.
3. **The collapse branch.** A run that collapses ends at ``Y_c = Y - φ (Y - a)⁺``: ``Y`` the smooth
   forecast of the window mean, ``a`` the run's start level (the mean of its first ``max(3, ⌈5%⌉)``
   prefix points), ``φ`` the fraction of the rise it loses, uniform on ``[0.5, 1]`` (a collapse loses
   at least half of its rise by definition; the labelled collapses are too few to learn more). A forecast
   at or below the start level has no rise to lose.
4. **The mixture.** The predictive distribution of the window mean is ``(1 - p)·smooth + p·collapse
   branch``; its quantiles (on a fine grid of levels) replace the forecast's, so the interval and
   :meth:`~grpojax.fit.WindowForecast.prob_at_least` use it. The mixture is computed by quadrature: the
   smooth forecast's quantiles at ``N`` evenly spaced levels and ``φ`` at ``M`` evenly spaced values.

A prefix that **already holds a collapse** is forecast from the level it fell to, not from the level
before: ``forecast_window(collapse_onset=)``, the onset the collapse finding of :mod:`grpojax.diagnose`
reports on the prefix (``grpojax.diagnose.collapse_onset``, which ``grpojax fit --prefix`` and ``grpojax
watch`` call; this package, below the detectors, does not look for it).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import special

from grpojax._errors import InvalidValueError

PHI_RANGE = (0.5, 1.0)
"""The fraction of the rise a collapse loses: uniform on this range."""

MIXTURE_TAUS = np.round(np.arange(0.005, 0.9951, 0.005), 6)
"""Levels of the quantiles a forecast mixed with the collapse branch states (199, 0.005 apart)."""

_N_U = 2000  # levels of the smooth forecast in the quadrature
_N_PHI = 50  # values of the lost fraction


class CollapseHazard(NamedTuple):
    """A collapse hazard per unit of run fraction: ``events`` collapses over ``exposure`` run fractions of
    labelled series (Jeffreys posterior ``Gamma(events + 1/2, exposure)``), or a fixed ``rate`` (``events``
    and ``exposure`` None)."""

    events: int | None
    exposure: float | None
    rate: float | None = None
    source: str = ""

    def p_collapse(self, horizon: float) -> float:
        """P(a collapse within ``horizon`` run fractions): the posterior predictive (fixed rate: ``1 - e^(-rate·h)``)."""
        h = max(float(horizon), 0.0)
        if self.rate is not None:
            return float(-math.expm1(-self.rate * h))
        return float(1.0 - (self.exposure / (self.exposure + h)) ** (self.events + 0.5))

    def interval(self, horizon: float, level: float = 0.9) -> tuple[float, float]:
        """Central ``level`` interval of ``1 - e^(-λ h)`` over the posterior of ``λ`` (a fixed rate: a point)."""
        h = max(float(horizon), 0.0)
        if self.rate is not None:
            p = self.p_collapse(h)
            return p, p
        a = (1.0 - float(level)) / 2.0
        lam = special.gammaincinv(self.events + 0.5, np.array([a, 1.0 - a])) / self.exposure
        lo, hi = -np.expm1(-lam * h)
        return float(lo), float(hi)

    def mean_rate(self) -> float:
        """The rate per unit of run fraction (posterior mean, or the fixed rate)."""
        return float(self.rate) if self.rate is not None else (self.events + 0.5) / self.exposure


def hazard_from_onsets(onsets, *, source: str = "") -> CollapseHazard:
    """The hazard learned from labelled series: one entry per series, its collapse onset as a fraction of
    its span (in ``[0, 1]``) or None for a series that did not collapse."""
    k, e = 0, 0.0
    for u in onsets:
        if u is None:
            e += 1.0
            continue
        u = float(u)
        if not 0.0 <= u <= 1.0:
            raise InvalidValueError(f"a collapse onset must be a fraction of the run in [0, 1], got {u!r}")
        k += 1
        e += u
    if not e > 0:
        raise InvalidValueError("the hazard needs at least one labelled series with a positive exposure")
    return CollapseHazard(k, e, None, source)


def as_hazard(hazard) -> CollapseHazard:
    """``hazard``: None (the shipped :data:`DEFAULT_HAZARD`), a :class:`CollapseHazard`, or a rate per unit of
    run fraction (a number ``>= 0``; 0 turns the collapse branch off)."""
    if hazard is None:
        return DEFAULT_HAZARD
    if isinstance(hazard, CollapseHazard):
        return hazard
    try:
        r = float(hazard)
    except (TypeError, ValueError):
        raise InvalidValueError(f"collapse_hazard must be None, a CollapseHazard or a rate >= 0, got {hazard!r}") from None
    if not (math.isfinite(r) and r >= 0.0):
        raise InvalidValueError(f"collapse_hazard must be a finite rate >= 0 per unit of run fraction, got {hazard!r}")
    return CollapseHazard(None, None, r, "given")


# Learned by experiments/forecast_collapse.py from every labelled series of the real corpora it reads (the
# label rule of the collapse benchmark on each whole train or eval reward series of >= 40 points): 19 collapses
# in 233 series over 225.4 run fractions of exposure.
DEFAULT_HAZARD = CollapseHazard(19, 225.44, None, "19 collapses in 233 labelled real reward series (225.4 run "
                                                  "fractions at risk)")
"""The hazard :func:`grpojax.fit.forecast_window` uses unless told otherwise."""


def start_level(y) -> float:
    """The run's start level: the mean of its first ``max(3, ⌈5%⌉)`` points."""
    y = np.asarray(y, float)
    return float(np.mean(y[:max(3, math.ceil(0.05 * y.size))]))


def smooth_quantile_function(forecast, u) -> np.ndarray:
    """Quantiles at levels ``u`` of a forecast's predictive distribution as
    :func:`grpojax._exceedance.prob_at_least` reads it: its ``quantiles`` (linear between them, the normal tail
    through the median and the outermost one beyond), or the split normal through ``mean``, ``lo``, ``hi``."""
    from grpojax.fit._scores import split_normal_quantiles  # noqa: PLC0415

    u = np.asarray(u, float)
    q = forecast.quantiles if not isinstance(forecast, dict) else forecast.get("quantiles")
    if q is None:
        get = (lambda k: forecast[k]) if isinstance(forecast, dict) else (lambda k: getattr(forecast, k))
        return split_normal_quantiles(get("mean"), get("lo"), get("hi"), get("level"), u)
    tau = np.asarray(q["taus"], float)
    v = np.maximum.accumulate(np.asarray(q["values"], float))
    med = float(np.interp(0.5, tau, v))
    out = np.interp(u, tau, v)
    z = special.ndtri(u)
    low, high = u < tau[0], u > tau[-1]
    out[low] = med + (v[0] - med) * z[low] / special.ndtri(tau[0])
    out[high] = med + (v[-1] - med) * z[high] / special.ndtri(tau[-1])
    return out


def mixture_quantiles(forecast, p: float, start: float, taus=MIXTURE_TAUS, bounds=None) -> np.ndarray:
    """Quantiles at ``taus`` of ``(1 - p)·smooth + p·collapse branch`` (module docstring, points 3 and 4):
    ``forecast`` gives the smooth distribution (:func:`smooth_quantile_function`), ``start`` the start level
    ``a``; ``bounds``: the metric's range (the smooth quantiles are clipped to it first)."""
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise InvalidValueError(f"p must be a probability in [0, 1], got {p!r}")
    u = (np.arange(_N_U) + 0.5) / _N_U
    ys = smooth_quantile_function(forecast, u)
    if bounds is not None:
        ys = np.clip(ys, bounds[0], bounds[1])
    phi = PHI_RANGE[0] + (PHI_RANGE[1] - PHI_RANGE[0]) * (np.arange(_N_PHI) + 0.5) / _N_PHI
    yc = ys[:, None] - phi[None, :] * np.maximum(ys[:, None] - float(start), 0.0)
    pts = np.r_[ys, yc.ravel()]
    w = np.r_[np.full(ys.size, (1.0 - p) / ys.size), np.full(yc.size, p / yc.size)]
    order = np.argsort(pts, kind="stable")
    pts, cw = pts[order], np.cumsum(w[order])
    idx = np.searchsorted(cw, np.asarray(taus, float) * cw[-1], side="left")
    return pts[np.minimum(idx, pts.size - 1)]
