"""Events: abrupt level shifts in every logged series, found by change-point segmentation.

A trend says where a run is going; an event says when something broke. Each logged series (reward, eval
reward, entropy, KL, grad norm, response length, clip fractions, zero-std fraction, loss) is segmented
offline, and every change that is a jump -- not a step of a gradual trend -- is an :class:`Event` with its
step, its size in units of the series' noise, its direction and a confidence.

How (thresholds in :class:`~grpojax.diagnose.DiagnoseConfig`):

1. The finite points of the series, on their index (a gap, an uneven logging interval or a run appended to
   another do not matter: the events report the logged steps). A series longer than ``event_max_points``
   is averaged in blocks down to that many points. A grad norm or a loss (positive, heavy-tailed, moving
   by orders of magnitude) is segmented on ``asinh(x / median)``, which is ``log x`` for large values and
   stays finite at 0.
2. Noise ``sigma``: 1.4826 x the median absolute deviation of the first differences, over sqrt(2) (a
   jump or a trend moves few differences, so they do not inflate it); for the penalty, that of the
   quietest block of ``2 x event_window`` points; for an event, that of the points around it (a series
   whose noise changes along the run -- a collapsed run's tail -- is judged by its noise there).
3. Binary segmentation with the least-squares (piecewise-constant) cost, stopping when the best split
   gains less than the penalty ``event_penalty * sigma^2 * log n`` (a BIC-type penalty in noise units),
   segments of at least ``event_min_segment`` points. Binary segmentation with this cost splits a steady
   trend into a staircase too; step 4 removes those steps.
4. Each change point (consecutive ones in the same direction within 3 % of the points, at least twice the
   shortest segment, are one transition) is tested as a jump: a straight line is fitted to each side (up
   to ``event_window`` points, across other change points: a staircase of a trend is one line), both are
   evaluated at the middle of the transition, and the jump is the right one minus the left one. A step of
   a trend lies on one line and has no jump; a kink has almost none. Its size is the jump over the noise
   (the larger of the noise around it and the two fits' residual standard deviation, so a slowly
   wandering series is not read as jumping); its confidence is one minus the two-sided Gaussian p-value
   of jump / standard error, Bonferroni-corrected for the ``n`` places a change could have been found. An event has ``|size| >= event_min_size``, confidence ``>= event_min_confidence``, a jump of
   at least ``event_min_range`` of the series' 5-95 % range, and the medians of the 3 points on each side
   moved at least half as far, the same way (a curved rise bending into a plateau overshoots two straight
   lines, the data do not). ``before`` and ``after`` are those two medians.

The segmentation is plain NumPy (the same breakpoints as ``ruptures.Binseg(model="l2", jump=1)``, which the
tests check); importing ``ruptures`` would bring SciPy's statistics into every diagnosis (a second).
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any, NamedTuple

import numpy as np

from grpojax.diagnose._config import DiagnoseConfig
from grpojax.diagnose._stats import dot
from grpojax.logs import RunLog

__all__ = ["Event", "SeriesEvents", "EVENT_METRICS", "binseg_l2", "detect_events", "series_events", "noise_sd"]

EVENT_METRICS = ("reward_mean", "eval_reward", "entropy", "kl", "grad_norm", "response_length", "clip_frac",
                 "response_clip_frac", "frac_zero_std", "reward_std")
"""Canonical columns segmented for events (plus the loss column, whatever its name)."""
_LOG_LIKE = ("grad_norm",)  # segmented on asinh(x / median): multiplicative jumps


class Event(NamedTuple):
    """One abrupt level shift of a logged series.

    Attributes:
        metric: the column.
        step: first logged step at the new level (for a shift over several points, the best single
            least-squares split across them).
        last_before: last logged step before the shift began.
        size: the jump in units of the series' noise (signed: negative for a drop).
        direction: ``"up"`` or ``"down"``.
        confidence: one minus the Bonferroni-corrected p-value of the jump (in [0, 1]).
        before: the level just before (median of the 3 points before), in the series' units.
        after: the level just after (median of the 3 points after).
    """

    metric: str
    step: float
    last_before: float
    size: float
    direction: str
    confidence: float
    before: float
    after: float

    def describe(self) -> str:
        """One line: ``metric down at step 140: 0.31 -> 0.02 (12 noise sd, confidence 1.00)``."""
        return (f"{self.metric} {self.direction} at step {self.step:g}: {_g(self.before)} -> {_g(self.after)} "
                f"({abs(self.size):.3g} noise sd, confidence {self.confidence:.2f})")

    def to_dict(self) -> dict[str, Any]:
        d = self._asdict()
        return {k: (float(v) if isinstance(v, (float, np.floating)) else v) for k, v in d.items()}


class SeriesEvents(NamedTuple):
    """The events of one series, or why it was not segmented.

    Attributes:
        metric: the column.
        events: the events, in step order.
        noise: the noise standard deviation (in the segmented units: ``asinh`` units for a grad norm or loss).
        n_points: finite points segmented (before any block averaging).
        segments: ``(first_step, last_step)`` of the segments between the events.
        note: why the series was not segmented (empty when it was).
    """

    metric: str
    events: tuple[Event, ...]
    noise: float
    n_points: int
    segments: tuple[tuple[float, float], ...]
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "events": [e.to_dict() for e in self.events], "noise": float(self.noise),
                "n_points": int(self.n_points), "segments": [list(map(float, s)) for s in self.segments],
                "note": self.note}


def _g(x: float) -> str:
    return f"{x:.3g}" if np.isfinite(x) else str(x)


JUMP_SHARE = 0.02
"""Where over half of a curve's first differences are equal, the largest ``ceil(JUMP_SHARE m)`` of its ``m``
differences are taken for jumps (a real event), not noise, by :func:`noise_sd`."""


def _sparse_sd(d: np.ndarray) -> float:
    """The sd of the differences ``d`` (1-D) of a curve that mostly does not move, its largest jumps set aside."""
    dev = np.abs(d - np.median(d))
    keep = np.sort(dev)[: d.size - math.ceil(JUMP_SHARE * d.size)]
    if keep.size < 2:
        keep = dev
    return float(np.sqrt(np.mean(keep ** 2)))


def noise_sd(y: np.ndarray) -> float:
    """Robust per-point noise sd of a curve from its first differences ``d`` (non-finite ones dropped):
    1.4826 x their MAD / sqrt(2). When over half of them are equal the MAD is 0 (a curve that mostly does not
    move, such as a reward averaged over a few answers); then the root mean square of ``|d - median d|``
    without the largest ``ceil(0.02 m)`` of them (:data:`JUMP_SHARE`), over sqrt(2). 0 for a constant curve."""
    d = np.diff(np.asarray(y, float))
    d = d[np.isfinite(d)]
    if d.size == 0:
        return 0.0
    mad = float(np.median(np.abs(d - np.median(d))))
    if mad > 0:
        return 1.4826 * mad / math.sqrt(2.0)
    return _sparse_sd(d) / math.sqrt(2.0)


def _block_noise_sd(z: np.ndarray, blk: int) -> list[float]:
    """:func:`noise_sd` of each block of ``blk`` consecutive points (the whole series when shorter), all
    blocks at once."""
    m = z.size // blk
    if m == 0:
        return [noise_sd(z)]
    d = np.diff(z[: m * blk].reshape(m, blk), axis=1)
    med = np.median(d, axis=1, keepdims=True)
    mad = np.median(np.abs(d - med), axis=1)
    return [1.4826 * float(a) / math.sqrt(2.0) if a > 0 else _sparse_sd(row) / math.sqrt(2.0)
            for a, row in zip(mad, d)]


def binseg_l2(z: np.ndarray, pen: float, min_size: int = 2, n_bkps: int | None = None) -> list[int]:
    """Binary segmentation of ``z`` with the least-squares cost: the sorted breakpoints (each the first index
    of a new segment), not including ``len(z)``.

    At each round every segment's best split (the largest drop of the summed squared deviations from the
    segment means) is computed and the best of them is kept while its gain exceeds ``pen``; segments have at
    least ``min_size`` points. This is ``ruptures.Binseg(model="l2", min_size=min_size, jump=1)`` with
    ``predict(pen=pen)``, vectorised over the candidate splits; with ``n_bkps`` it stops after that many
    (``predict(n_bkps=...)``, ``pen`` ignored).
    """
    z = np.asarray(z, float)
    n = z.size
    c1 = np.r_[0.0, np.cumsum(z)]
    c2 = np.r_[0.0, np.cumsum(z * z)]

    def cost(a, b):
        m = b - a
        return (c2[b] - c2[a]) - (c1[b] - c1[a]) ** 2 / m

    def best(a: int, b: int) -> tuple[int | None, float]:
        ks = np.arange(a + min_size, b - min_size + 1)
        if ks.size == 0:
            return None, 0.0
        gain = cost(a, b) - cost(a, ks) - cost(ks, b)
        i = int(np.flatnonzero(gain == gain.max())[-1])  # ties: the later split, as ruptures' max((gain, bkp))
        return int(ks[i]), float(gain[i])

    # the segments in order, each with its best split; a split replaces one segment by its two halves, whose
    # best splits are the only new ones (the first of equal gains wins, as max() over the segments in order)
    bkps = [n]
    first = best(0, n)
    splits, gains = [first[0]], [first[1]]
    while True:
        j = gains.index(max(gains))
        k, gain = splits[j], gains[j]
        if k is None or (n_bkps is None and not gain > pen) or (n_bkps is not None and len(bkps) > n_bkps):
            break
        a = bkps[j - 1] if j else 0
        (k1, g1), (k2, g2) = best(a, k), best(k, bkps[j])
        bkps.insert(j, k)
        splits[j:j + 1], gains[j:j + 1] = [k1, k2], [g1, g2]
    return bkps[:-1]


def _line_at(x: np.ndarray, y: np.ndarray, at: float) -> tuple[float, float, float]:
    """Least-squares line through ``(x, y)`` evaluated at ``at``: ``(value, variance factor, residual ss)``
    (the value's variance is ``factor * noise^2``); a constant for fewer than 3 points."""
    m = x.size
    if m < 3 or np.ptp(x) == 0:
        return float(np.mean(y)), 1.0 / m, float(np.sum((y - np.mean(y)) ** 2))
    xm = float(x.mean())
    dx = x - xm
    sxx = dot(dx, dx)
    b = dot(dx, y - y.mean()) / sxx
    a = float(y.mean())
    resid = y - (a + b * dx)
    return a + b * (at - xm), 1.0 / m + (at - xm) ** 2 / sxx, dot(resid, resid)


def _transform(metric: str, y: np.ndarray):
    """``(z, back)``: the segmented values and the map back to the series' units."""
    pos = y[y > 0]
    if (metric in _LOG_LIKE or metric.endswith("loss")) and pos.size and np.all(y >= 0):
        scale = float(np.median(pos))
        return np.arcsinh(y / scale), (lambda v: float(np.sinh(v) * scale))
    return y, float


def series_events(steps, values, metric: str, cfg: DiagnoseConfig) -> SeriesEvents:
    """The events of one series (``steps``, ``values`` of equal length; NaNs and infinities are skipped)."""
    s = np.asarray(steps, float)
    y = np.asarray(values, float)
    keep = np.isfinite(y) & np.isfinite(s)
    s, y = s[keep], y[keep]
    n_all = int(y.size)
    if n_all < cfg.event_min_points:
        why = (f"{metric}: not segmented: {n_all} finite points (needs >= {cfg.event_min_points}"
               + (f"; {int(np.size(values)) - n_all} non-finite skipped)" if np.size(values) > n_all else ")"))
        return SeriesEvents(metric, (), float("nan"), n_all, (), why)
    z, back = _transform(metric, y)
    if n_all > cfg.event_max_points:  # block means: the first step of each block stands for it
        b = math.ceil(n_all / cfg.event_max_points)
        m = n_all // b * b
        z = np.r_[z[:m].reshape(-1, b).mean(axis=1), z[m:].mean()] if m < n_all else z.reshape(-1, b).mean(axis=1)
        s_first = s[::b]
        s_last = np.r_[s[b - 1::b], s[-1]][: z.size]
    else:
        s_first = s_last = s
    n = int(z.size)
    sigma = noise_sd(z)
    if not sigma > 0:
        return SeriesEvents(metric, (), 0.0, n_all, ((float(s[0]), float(s[-1])),), "")
    # the penalty takes the quietest stretch's noise (blocks of 2 x event_window points): a series whose
    # noise grows late (a collapsed run's tail) still offers the change points of its quiet part; each one
    # is then judged against the noise around it
    blk = max(10, 2 * int(cfg.event_window))
    local = _block_noise_sd(z, blk)
    quiet = min([v for v in local if v > 0], default=sigma)
    pen = cfg.event_penalty * quiet ** 2 * math.log(n)
    mins = max(2, int(cfg.event_min_segment))
    bkps = binseg_l2(z, pen, mins)
    lo, hi = np.percentile(z, [5, 95])
    spread = float(hi - lo)
    # below a few float32 ulps a difference is the log's rounding (most logs are float32), not a change: a
    # series that settles exactly leaves change points whose sides differ by rounding alone (and a spread of 0)
    rounding = 8.0 * float(np.finfo(np.float32).eps) * max(1.0, float(np.max(np.abs(z))))
    # consecutive change points a few points apart and in the same direction are one transition
    means = [float(np.mean(z[a:b])) for a, b in zip([0] + bkps, bkps + [n])]
    short = max(2 * mins, math.ceil(0.03 * n))
    groups: list[list[int]] = []
    for j, k in enumerate(bkps):
        sign = np.sign(means[j + 1] - means[j])
        if groups and k - groups[-1][0] <= short and np.sign(means[j] - means[j - 1]) == sign:
            groups[-1].append(k)
        else:
            groups.append([k])
    win = int(cfg.event_window)
    z_crit = NormalDist()
    events: list[Event] = []
    starts = [0]
    for g in groups:
        k1, k2 = g[0], g[-1]
        la, lb = max(0, k1 - win), k1
        ra, rb = k2, min(n, k2 + win)
        xl, xr = np.arange(la, lb, dtype=float), np.arange(ra, rb, dtype=float)
        mid = 0.5 * (k1 - 1.0 + k2)  # both lines at the middle of the transition: a trend has no jump there
        left, fl, ssl = _line_at(xl, z[la:lb], mid)
        right, fr, ssr = _line_at(xr, z[ra:rb], mid)
        dof = max(1, (lb - la) + (rb - ra) - 4)
        if abs(right - left) < max(cfg.event_min_range * spread, rounding):  # too small for an event whatever its
            continue  # noise (most steps of a trend's staircase): no need for the noise around it
        near = np.r_[z[la:lb], z[ra:rb]]
        scale = max(noise_sd(near) if near.size > 2 else sigma, math.sqrt((ssl + ssr) / dof), rounding)
        jump = right - left
        size = jump / scale
        zstat = abs(jump) / (scale * math.sqrt(fl + fr))
        p = 2.0 * (1.0 - z_crit.cdf(zstat)) if zstat < 37 else 0.0
        conf = max(0.0, 1.0 - n * p)
        if (abs(size) < cfg.event_min_size or conf < cfg.event_min_confidence
                or abs(jump) < cfg.event_min_range * spread):
            continue
        # the jump is in the data, not only in two extrapolated lines (a curved rise that bends into a
        # plateau overshoots them): the medians of the 3 points on each side moved at least half as far
        before, after = float(np.median(z[max(0, k1 - 3):k1])), float(np.median(z[k2:k2 + 3]))
        if (after - before) * np.sign(jump) < 0.5 * abs(jump):
            continue
        at = k2
        if k2 > k1:  # a transition of several change points: its step is the best single split across it
            lo_, hi_ = max(0, k1 - mins), min(n, k2 + mins)
            at = lo_ + binseg_l2(z[lo_:hi_], 0.0, 1, n_bkps=1)[0]
            at = min(max(at, k1), k2)
        events.append(Event(metric, float(s_first[at]), float(s_last[k1 - 1]), float(size),
                            "up" if jump > 0 else "down", float(conf), back(before), back(after)))
        starts.append(at)
    segments = tuple((float(s_first[a]), float(s_last[b - 1])) for a, b in zip(starts, starts[1:] + [n]))
    return SeriesEvents(metric, tuple(events), float(sigma), n_all, segments, "")


def _loss_column(run: RunLog) -> str | None:
    from grpojax.diagnose._blowup import loss_column  # noqa: PLC0415

    return loss_column(run)


def detect_events(run: RunLog, cfg: DiagnoseConfig) -> dict[str, SeriesEvents]:
    """``{metric: SeriesEvents}`` for every logged series of :data:`EVENT_METRICS` and the loss column."""
    cols = [c for c in EVENT_METRICS if c in run.columns and run.count(c)]
    loss = _loss_column(run)
    if loss and run.count(loss):
        cols.append(loss)
    out = {}
    for c in cols:
        s, v = run.series(c)
        out[c] = series_events(s, v, c, cfg)
    return out
