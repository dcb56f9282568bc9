"""Training-health detectors next to the four failure modes.

Each returns a :class:`~grpojax.diagnose.ModeResult` (verdict, severity, evidence with metric, step
range, statistic and threshold) like the four modes, and a "what to change" text
(:mod:`grpojax.diagnose._advice`). Thresholds are in :class:`~grpojax.diagnose.DiagnoseConfig`.

- ``length_pathology``: completions truncated at the length cap (11-point running median of
  ``response_clip_frac`` >= ``truncation_frac``), the mean response length at the cap (when the
  log's meta gives it), or the length collapsed (late / initial median <= ``length_collapse_ratio``).
- ``learning_plateau``: the monitored reward (``eval_reward`` when it has >= 8 points, else
  ``reward_mean``) gained nothing over a trailing stretch of >= ``plateau_fraction`` of the run: the
  95 % upper confidence bound of the stretch's least-squares gain is below ``plateau_min_gain`` x the
  curve's range (or 1.5 per-step noise standard deviations, whichever is larger) and its 95 % lower
  bound is not above zero (a slow but significant rise is still learning). Two-sided: a trailing stretch
  whose gain has its 95 % upper bound below -max(``plateau_decline_sd`` robust noise sd
  (:func:`grpojax.diagnose._events.noise_sd`), ``plateau_min_gain`` x the range) is falling, and the
  plateau starts after the last falling trailing stretch of the last segment (a rise then a fall, whose
  straight line is flat, is no plateau). A flat stretch the reward fell into (a longer trailing stretch
  falls, or the reward's last event is a drop from more than that bound above the stretch's mean) is
  still reported, marked as the level the reward fell to (``panel_data["fell"]``): never the main finding.
  Reports the best step (maximum of the smoothed curve): where to stop.
- ``clip_saturation``: 5-point running median of ``clip_frac`` >= ``clip_frac_high``.
- ``kl_drift``: late median ``kl`` >= ``kl_bound``, or the KL still grows in the last third of the
  run at >= ``kl_growth_ratio`` of its whole-run rate (slope t >= ``kl_growth_t``, level >=
  ``kl_min_level``).
- ``gradient_spikes``: a grad norm >= ``grad_spike_z`` robust standard deviations (1.4826 x the 21-point running
  median absolute residual) above the 11-point running median of log grad norm and >= ``grad_spike_ratio`` times that median,
  or >= ``grad_spike_jump`` times that median (an order of magnitude) with a z past the 1 % family-wise
  Gaussian level over the points scanned (Bonferroni: 3.7 sd for 100 points, 4.3 for 1,000); a
  non-finite grad norm is a spike. Quiet steps (zero, or 10 times below the 31-point running upper
  decile: no group had reward variance) are left out of the median and the scale.
- ``reward_imbalance``: with >= 2 reward components logged, one carries >= ``component_share`` of
  their summed variance, or one never changes.

Every window is a fixed number of points or a trailing stretch, never a fraction used as a baseline.
Non-finite values are dropped and reported (information), except for the grad norm, where an infinite
norm is evidence of a spike.
"""

from __future__ import annotations

import re
from statistics import NormalDist
from typing import NamedTuple

import numpy as np

from grpojax.diagnose import _advice
from grpojax.diagnose._blowup import blowup_evidence, nonfinite_steps
from grpojax.diagnose._config import DiagnoseConfig
from grpojax.diagnose._events import noise_sd
from grpojax.diagnose._format import comparison
from grpojax.diagnose._stats import (centred_mean, clip_window, edge_windows, episodes_from_mask, initial_window,
                                     linregress, running_median, running_quantile)
from grpojax.diagnose._types import Evidence, ModeResult, finish_result, make_evidence
from grpojax.logs import RunLog

__all__ = ["detect_length_pathology", "detect_learning_plateau", "detect_clip_saturation", "detect_kl_drift",
           "detect_gradient_spikes", "detect_reward_imbalance", "reward_components"]

_RUN_MED = 5  # points of the running median that ignores single-step spikes
_TRUNC_MED = 11  # points of the running median of response_clip_frac: sustained truncation
_SCALE_WINDOW = 21  # points of the running MAD that scales the z-score
_SPIKE_WINDOW = 11  # points of the running median a grad-norm spike is compared with
_QUIET_QUANTILE = 0.9  # the working level of the grad norm: this running quantile (the upper decile)
_QUIET_WINDOW = 31  # points of that running quantile
_QUIET_FACTOR = 10.0  # a quiet grad norm is an order of magnitude below the working level (or zero)
_JUMP_ALPHA = 0.01  # family-wise false-alarm level of a grad_spike_jump under Gaussian noise of log grad norm
_EVAL_MIN = 8  # eval points needed for the plateau detector to watch eval_reward


def _insufficient(mode: str, what: str, run: RunLog, cols: tuple[str, ...]) -> ModeResult:
    has = ", ".join(f"{c}: {run.count(c)}" for c in cols)
    return ModeResult(mode, "insufficient_data", reason=f"needs {what} (has {has})")


def _finite(run: RunLog, col: str, ev: list[Evidence]) -> tuple[np.ndarray, np.ndarray]:
    """Finite points of ``col``; non-finite ones are dropped and reported as information."""
    s, v = run.series(col)
    bad = ~np.isfinite(v)
    if bad.any():
        ev.append(make_evidence(col, s[bad], "non-finite values (ignored)", float(bad.sum())))
    return s[~bad], v[~bad]


def _running_median(v: np.ndarray, k: int) -> np.ndarray:
    return running_median(v, k)  # mirrored ends: no repeated edge value


def _finish(mode: str, ev, episodes, panel, advice_fn, **kw) -> ModeResult:
    res = finish_result(mode, ev, episodes, panel, **kw)
    if res.detected:
        import dataclasses  # noqa: PLC0415

        res = dataclasses.replace(res, advice=advice_fn(res))
    return res


# ----------------------------------------------------------------------------- length


def detect_length_pathology(run: RunLog, cfg: DiagnoseConfig, *, events: dict | None = None) -> ModeResult:
    """Truncation at the length cap or a collapsed response length (by the end, or suddenly: a downward
    event of ``response_length``, from ``events``, to at most ``length_drop_ratio`` of its median before)."""
    mode = "length_pathology"
    ev: list[Evidence] = []
    episodes: list[tuple[float, float]] = []
    panel: dict = {}
    have_clip = run.count("response_clip_frac") >= cfg.min_points
    have_len = run.count("response_length") >= cfg.min_points
    clip_max = float("nan")  # set when the clip column holds values above 1
    if have_clip:
        s, c = _finite(run, "response_clip_frac", ev)
        if c.size and float(c.max()) > 1.0 + 1e-9:  # a count or a ratio logged under a fraction's name
            clip_max = float(c.max())
            ev.append(make_evidence("response_clip_frac", s, "maximum, above 1: not a fraction of completions, "
                                    "so not used", float(c.max())))
        elif c.size >= cfg.min_points:
            med = _running_median(c, _TRUNC_MED)
            k = int(np.argmax(med))
            lo, hi = max(0, k - _TRUNC_MED // 2), min(c.size, k + _TRUNC_MED // 2 + 1)
            ev.append(make_evidence("response_clip_frac", s[lo:hi], f"peak {_TRUNC_MED}-point running median",
                                    float(med[k]), cfg.truncation_frac, ">=", kind="fraction"))
            _, late = edge_windows(c.size, cfg.edge_fraction, cfg.min_window_points)
            ev.append(make_evidence("response_clip_frac", s[late], "late median", float(np.median(c[late]))))
            episodes += episodes_from_mask(s, med >= cfg.truncation_frac, min_len=2)
            panel["response_clip_frac"] = (s, c)
    if have_len:
        s, length = _finite(run, "response_length", ev)
        if length.size >= cfg.min_points:
            head = initial_window(length.size, cfg)
            _, late = edge_windows(length.size, cfg.edge_fraction, cfg.min_window_points)
            l0, l1 = float(np.median(length[head])), float(np.median(length[late]))
            ratio = l1 / l0 if l0 > 0 else float("nan")
            ev.append(make_evidence("response_length", np.r_[s[head], s[late]], "late/initial median ratio",
                                    ratio, cfg.length_collapse_ratio, "<=", kind="ratio"))
            cap = _length_cap(run)
            if cap is not None:
                ev.append(make_evidence("response_length", s[late], f"late median / length cap {cap:g}",
                                        l1 / cap, 0.95, ">=", kind="fraction"))
            if ev[-1].triggered or (ratio <= cfg.length_collapse_ratio):
                episodes.append((float(s[late][0]), float(s[-1])))
            se = (events or {}).get("response_length")
            # a sudden crash, whatever the run's end shows: a downward event to a level far below the typical
            # length so far (the median before it; a spike that returns to its baseline is not a crash)
            drops = [(e, e.after / float(np.median(length[s < e.step]))) for e in (se.events if se is not None else ())
                     if e.direction == "down" and np.count_nonzero(s < e.step) and np.median(length[s < e.step]) > 0]
            if drops:
                worst, rel = min(drops, key=lambda d: d[1])
                e = make_evidence("response_length", (worst.last_before, worst.step),
                                  f"sudden drop: level after / median length before (event at step {worst.step:g})",
                                  rel, cfg.length_drop_ratio, "<=", kind="ratio")
                ev.append(e)
                if e.triggered:
                    episodes.append((worst.last_before, worst.step))
            panel["response_length"] = (s, length)
    if not panel:
        clip = ("response_clip_frac" if np.isnan(clip_max) else
                f"response_clip_frac within [0, 1] (its maximum is {clip_max:.3g}: not a fraction)")
        return _insufficient(mode, f">= {cfg.min_points} finite points of {clip} or response_length",
                             run, ("response_clip_frac", "response_length"))
    return _finish(mode, ev, episodes, panel, lambda r: _advice.length(r, run))


def _length_cap(run: RunLog) -> float | None:
    for k in ("max_completion_length", "max_response_length", "max_new_tokens", "max_tokens"):
        v = run.meta.get(k)
        if isinstance(v, (int, float)) and v > 0:
            return float(v)
    return None


# ----------------------------------------------------------------------------- plateau


def _gain(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares gain over ``x``'s span and its standard error."""
    r = linregress(x, y)
    span = float(x[-1] - x[0])
    return float(r.slope) * span, float(r.stderr) * span


class _Trailing(NamedTuple):
    """The trailing stretches of a curve's last segment and which of them fall (see the plateau's docstring)."""

    smooth: np.ndarray
    rng: float
    sigma: float
    drop_bound: float
    min_len: int
    last_event: object
    starts: range
    gains: dict
    falling: list

    def worst(self, js) -> int | None:
        """The stretch among ``js`` with the largest confident decline (lowest 95 % upper bound of its gain)."""
        return min(js, key=lambda j: self.gains[j][0] + 1.96 * self.gains[j][1]) if js else None


def _trailing(s: np.ndarray, y: np.ndarray, col: str, cfg: DiagnoseConfig, events: dict | None,
              collapse_onset: float | None = None) -> _Trailing:
    """Every trailing stretch of the last segment of ``col`` (after its last event, and after a collapse onset)
    of at least the plateau's shortest length, its least-squares gain, and those that confidently fall (the 95 %
    upper bound of the gain below minus the decline bound; the noise is the robust one of the events, which a
    fall does not inflate)."""
    n = y.size
    smooth = centred_mean(y, clip_window(n, 0.05, 3, 10))
    rng = float(np.ptp(smooth))
    min_len = int(min(cfg.plateau_min_points, max(4, n // 3)))  # sparse eval: a third of its points
    sigma = noise_sd(y)
    drop_bound = max(cfg.plateau_min_gain * rng, cfg.plateau_decline_sd * sigma)
    sev = (events or {}).get(col)
    last_event = sev.events[-1] if sev is not None and sev.events else None
    first = 0
    if last_event is not None:  # the last segment only: a trend is not judged across an event
        first = int(np.searchsorted(s, last_event.step))
    if collapse_onset is not None:  # a collapse ends a segment too (also of a series too short to segment)
        first = max(first, int(np.searchsorted(s, collapse_onset)))
    starts = range(min(first, max(n - min_len, 0)), n - min_len + 1, max(1, n // 200))
    gains = {i: _gain(s[i:].astype(float), y[i:]) for i in starts}
    falling = [i for i, (g, g_se) in gains.items() if g + 1.96 * g_se < -drop_bound]
    return _Trailing(smooth, rng, sigma, drop_bound, min_len, last_event, starts, gains, falling)


def detect_learning_plateau(run: RunLog, cfg: DiagnoseConfig, *, events: dict | None = None,
                            collapse_onset: float | None = None) -> ModeResult:
    """Learning plateau: a trailing flat stretch, with the best step (where to stop).

    With ``events`` the stretch lies within the curve's last segment (no trend verdict across an event);
    after a collapse (``collapse_onset``) a flat tail is the collapsed level, and after a fall (a falling
    longer trailing stretch, or a drop at the reward's last event) the level the reward fell to: the reason
    says so and ``panel_data["fell"]`` marks it (the plateau is then never the run's main finding,
    :attr:`grpojax.diagnose.Diagnosis.main_finding`). A run whose reward falls at its end has no plateau.
    """
    mode = "learning_plateau"
    use_eval = run.count("eval_reward") >= _EVAL_MIN
    col = "eval_reward" if use_eval else "reward_mean"
    need = _EVAL_MIN if use_eval else 2 * cfg.plateau_min_points
    if run.count(col) < need:
        return _insufficient(mode, f">= {need} points of reward_mean or eval_reward", run,
                             ("reward_mean", "eval_reward"))
    ev: list[Evidence] = []
    s, y = _finite(run, col, ev)
    n = y.size
    if n < need:
        return _insufficient(mode, f">= {need} finite points of {col}", run, (col,))
    # two-sided: a stretch that confidently loses more than the decline bound is falling, not flat
    tr = _trailing(s, y, col, cfg, events, collapse_onset)
    smooth, sigma, drop_bound, min_len, last_event = tr.smooth, tr.sigma, tr.drop_bound, tr.min_len, tr.last_event
    starts, gains, falling = tr.starts, tr.gains, tr.falling
    noise = float(np.std(np.diff(y)) / np.sqrt(2.0))
    bound = max(cfg.plateau_min_gain * tr.rng, 1.5 * noise)
    # every trailing stretch of the last segment is looked at: one that falls anywhere in it ends the search (a
    # rise then a fall can have a flat straight line; the plateau starts after the last falling stretch)
    last_fall = max(falling, default=-1)
    best_start, best = None, (float("nan"), float("nan"))
    for i in starts:  # the longest trailing stretch whose gain is bounded and neither rises nor falls significantly
        g, g_se = gains[i]
        if i > last_fall and g + 1.96 * g_se <= bound and g - 1.96 * g_se <= 0.0:
            best_start, best = i, (g, g_se)
            break
    if best_start is None:
        i = n - min_len
        best_start, best = i, gains.get(i) or _gain(s[i:].astype(float), y[i:])
    i = best_start
    g, g_se = best
    share = (n - i) / n
    seg = s[i:]
    ev.append(make_evidence(col, seg, "gain over the trailing stretch, 95% upper bound (flat: at most "
                            f"{cfg.plateau_min_gain:g} x the curve's range or 1.5 noise sd)", g + 1.96 * g_se, bound,
                            "<=", kind="gate", label="trailing gain, 95% upper bound"))
    ev.append(make_evidence(col, seg, "gain over the trailing stretch, 95% lower bound (still rising while above 0)",
                            g - 1.96 * g_se, 0.0, "<=", kind="gate", label="trailing gain, 95% lower bound"))
    # the largest confident decline of a trailing stretch within this one (this one included): none when the
    # search found a flat stretch; a fallback stretch at the end of the run may fall
    worst_of = tr.worst
    inner = worst_of([j for j in falling if j >= i])
    ev.append(make_evidence(col, s[inner:] if inner is not None else seg,
                            "largest decline of a trailing stretch within it, 95% lower bound (falling, not flat, "
                            f"above {cfg.plateau_decline_sd:g} robust noise sd or {cfg.plateau_min_gain:g} x the "
                            "curve's range; 0: none fell)",
                            -(gains[inner][0] + 1.96 * gains[inner][1]) if inner is not None else 0.0, drop_bound,
                            "<=", kind="gate", label="trailing decline, 95% lower bound"))
    outer = worst_of([j for j in falling if j < i])
    if outer is not None:
        e = make_evidence(col, s[outer:], "largest decline of a longer trailing stretch of the last segment, 95% "
                          "lower bound (the reward fell into the stretch)", -(gains[outer][0] + 1.96 * gains[outer][1]),
                          drop_bound, ">=", kind="gate")
        ev.append(e._replace(role="supporting", score=0.0))
    # the reward fell into the flat stretch: a longer trailing stretch falls, or the last segment starts with a
    # drop from above the stretch's level (the stretch is still flat, but the fall, not a plateau, is the news)
    fell: list[tuple[float, float]] = []  # (step the fall starts from, decline)
    if outer is not None:
        fell.append((float(s[outer]), -gains[outer][0]))
    if last_event is not None and last_event.direction == "down":
        drop = last_event.before - float(np.mean(y[i:]))
        e = make_evidence(col, (last_event.last_before, float(seg[-1])),
                          f"level before the drop at step {last_event.step:g} - the stretch's mean (the reward fell "
                          "into the stretch when above the decline bound)", drop, drop_bound, ">=", kind="gate")
        ev.append(e._replace(role="supporting", triggered=bool(drop > drop_bound), score=0.0))
        if drop > drop_bound:
            fell.append((float(last_event.last_before), drop))
    e = make_evidence(col, seg, "trailing flat stretch / run (points)", share, cfg.plateau_fraction, ">=",
                      kind="fraction", label="flat stretch / run")
    if e.triggered and n - i < min_len:
        e = e.held_back()
    ev.append(e)
    k = int(np.argmax(smooth))
    ev.append(make_evidence(col, s[k:k + 1], "best step (maximum of the smoothed curve)", float(s[k])))
    ev.append(make_evidence(col, s[k:k + 1], "best smoothed value", float(smooth[k])))
    ev.append(make_evidence(col, seg, "least-squares gain over the trailing stretch", g))
    ev.append(make_evidence(col, seg, "95% CI half-width of that gain", 1.96 * g_se))
    ev.append(make_evidence(col, s, "robust noise sd (MAD of first differences)", sigma))
    panel = {col: (s, y), "smooth": (s, smooth), "best_step": float(s[k]), "plateau": (float(seg[0]), float(seg[-1])),
             "column": col}
    res = _finish(mode, ev, [(float(seg[0]), float(seg[-1]))], panel, lambda r: _advice.plateau(r, col),
                  require_all=True)
    import dataclasses  # noqa: PLC0415

    if not res.detected:
        j = worst_of(falling)
        if j is not None:  # say why: the reward falls at the end of the run
            res = dataclasses.replace(res, reason=f"{col} falls at the end of the run, not flat (a decline of "
                                                  f"{-gains[j][0]:.3g} over steps {s[j]:g}-{s[-1]:g}); " + res.reason)
        return res

    if collapse_onset is not None and seg[0] >= collapse_onset:
        # the flat tail is the collapsed level: still flat (reported), never the main finding
        res = dataclasses.replace(res, reason=f"the collapsed level after the collapse at step {collapse_onset:g}: "
                                              + res.reason,
                                  panel_data=dict(res.panel_data, fell={"step": float(collapse_onset),
                                                                        "decline": float("nan")}))
    elif fell:
        # the reward fell into the flat stretch: still flat (reported), never the main finding
        frm, drop = min(fell)
        res = dataclasses.replace(res, reason=f"the level {col} fell to (a decline of {drop:.3g} from step {frm:g}; "
                                              "a fall, not a plateau of learning): " + res.reason,
                                  panel_data=dict(res.panel_data, fell={"step": frm, "decline": drop}))
    elif use_eval and run.count("reward_mean") >= 2 * cfg.plateau_min_points:
        # the evaluation reward is flat, but the training reward may be falling away at the end of the run: the
        # same test of its own last segment; a fall there is the news, not the plateau
        st, yt = run.series("reward_mean")
        ok = np.isfinite(st) & np.isfinite(yt)
        st, yt = st[ok].astype(float), yt[ok]
        other = _trailing(st, yt, "reward_mean", cfg, events) if yt.size >= 2 * cfg.plateau_min_points else None
        if other is not None and other.falling:
            j = other.worst(other.falling)
            frm, drop = float(st[j]), -other.gains[j][0]
            res = dataclasses.replace(res, reason=f"{col} is flat, but reward_mean falls at the end of the run (a "
                                                  f"decline of {drop:.3g} over steps {frm:g}-{st[-1]:g}; a fall, not "
                                                  "a plateau of learning): " + res.reason,
                                      panel_data=dict(res.panel_data, fell={"step": frm, "decline": drop,
                                                                            "column": "reward_mean"}))
    return res


# ----------------------------------------------------------------------------- clip


def detect_clip_saturation(run: RunLog, cfg: DiagnoseConfig) -> ModeResult:
    """Clip saturation: the PPO ratio clip is hit on a large fraction of tokens."""
    mode = "clip_saturation"
    if run.count("clip_frac") < cfg.min_points:
        return _insufficient(mode, f">= {cfg.min_points} points of clip_frac", run, ("clip_frac",))
    ev: list[Evidence] = []
    s, c = _finite(run, "clip_frac", ev)
    if c.size < cfg.min_points:
        return _insufficient(mode, f">= {cfg.min_points} finite points of clip_frac", run, ("clip_frac",))
    med = _running_median(c, _RUN_MED)
    k = int(np.argmax(med))
    lo, hi = max(0, k - _RUN_MED // 2), min(c.size, k + _RUN_MED // 2 + 1)
    ev.append(make_evidence("clip_frac", s[lo:hi], f"peak {_RUN_MED}-point running median", float(med[k]),
                            cfg.clip_frac_high, ">=", kind="fraction"))
    _, late = edge_windows(c.size, cfg.edge_fraction, cfg.min_window_points)
    ev.append(make_evidence("clip_frac", s[late], "late median", float(np.median(c[late]))))
    episodes = episodes_from_mask(s, med >= cfg.clip_frac_high, min_len=2)
    return _finish(mode, ev, episodes, {"clip_frac": (s, c)}, lambda r: _advice.clip(r, run))


# ----------------------------------------------------------------------------- KL


def detect_kl_drift(run: RunLog, cfg: DiagnoseConfig) -> ModeResult:
    """KL to the reference above a bound, or still growing at the end of the run."""
    mode = "kl_drift"
    if run.count("kl") < cfg.min_points:
        return _insufficient(mode, f">= {cfg.min_points} points of kl", run, ("kl",))
    ev: list[Evidence] = []
    s, kl = _finite(run, "kl", ev)
    n = kl.size
    if n < cfg.min_points:
        return _insufficient(mode, f">= {cfg.min_points} finite points of kl", run, ("kl",))
    _, late = edge_windows(n, cfg.edge_fraction, cfg.min_window_points)
    level = float(np.median(kl[late]))
    ev.append(make_evidence("kl", s[late], "late median (nats)", level, cfg.kl_bound, ">=", kind="level"))
    med = _running_median(kl, _RUN_MED)
    x = s.astype(float)
    whole = linregress(x, med)
    third = slice(n - max(n // 3, 3), n)
    tail = linregress(x[third], med[third])
    t_tail = float(tail.slope / tail.stderr) if tail.stderr > 0 else (np.inf if tail.slope > 0 else 0.0)
    # the ratio of a growth rate exists only where there is growth to measure: a last-third slope that is
    # not significant (t < kl_growth_t) or a KL below kl_min_level leaves it undefined (not gated)
    why = []
    if t_tail < cfg.kl_growth_t:
        why.append(f"slope t {comparison(t_tail, cfg.kl_growth_t, '<')}")
    if level < cfg.kl_min_level:
        why.append(f"level {comparison(level, cfg.kl_min_level, '<')}")
    ratio = float(tail.slope / whole.slope) if whole.slope > 0 and not why else float("nan")
    stat = "last-third slope / whole-run slope (running median)" + (f" [no growth: {'; '.join(why)}]" if why else "")
    e = make_evidence("kl", s[third], stat, ratio, cfg.kl_growth_ratio, ">=", kind="ratio")
    if e.triggered:
        e = e._replace(score=float(np.clip(0.5 * ratio, 0.0, 1.0)))
    ev.append(e)
    ev.append(make_evidence("kl", s[third], "last-third slope t-statistic", t_tail))
    episodes = [(float(s[third][0]), float(s[-1]))]
    return _finish(mode, ev, episodes, {"kl": (s, kl)}, lambda r: _advice.kl(r, run))


# ----------------------------------------------------------------------------- gradient


def _unless(e, confirmed, why: str):
    """``e`` held back (not triggered, the reason appended) where the second condition does not confirm it."""
    if e.triggered and not confirmed:
        return e.held_back(why)
    return e


def detect_gradient_spikes(run: RunLog, cfg: DiagnoseConfig) -> ModeResult:
    """Gradient-norm spikes: robust z-score of log grad norm against its running median."""
    mode = "gradient_spikes"
    if run.count("grad_norm") < cfg.min_points and not nonfinite_steps(run, "grad_norm")[0]:
        return _insufficient(mode, f">= {cfg.min_points} points of grad_norm", run, ("grad_norm",))
    s_all, g_all = run.series("grad_norm")
    ev: list[Evidence] = []
    bad = ~np.isfinite(g_all)
    episodes: list[tuple[float, float]] = []
    n_bad, first_bad = nonfinite_steps(run, "grad_norm")
    if n_bad:  # a NaN / infinite (overflowed) gradient is the strongest spike there is
        at = f"first at step {first_bad:g}" if np.isfinite(first_bad) else "step not known"
        ev.append(make_evidence("grad_norm", (first_bad, first_bad) if np.isfinite(first_bad) else s_all,
                                f"non-finite grad norms ({at})", float(n_bad), 1, ">=", kind="flag"))
        episodes += [(float(a), float(a)) for a in s_all[bad]]
        if np.isfinite(first_bad):
            episodes.append((first_bad, first_bad))
    # a jump of orders of magnitude the run never comes back from (a level shift, not a spike): blow-up
    ev += [e for e in blowup_evidence(run, cfg)[0] if e.metric == "grad_norm" and "orders" in e.statistic]
    pos = np.isfinite(g_all) & (g_all > 0)
    if pos.sum() >= cfg.min_points:
        # quiet steps: _QUIET_FACTOR x or more below the working level (every group had zero reward
        # variance, so only the KL term or nothing was left: typically 2-3 orders of magnitude below). They
        # are a population of their own, not noise of the grad norm: left in, their log distance inflates
        # the robust scale and hides spikes. They can be most steps (a run whose groups are mostly
        # degenerate), so the working level is the running upper decile over 31 points, which quiet steps
        # pull down only past 9 in 10 of them and spikes pull up only past 3 in 31 (against the running
        # median, a quiet majority made every working step between quiet ones read as a spike). 10x below
        # the upper decile is > 2.5 sd below the working steps' centre for log noise up to 0.6 nats.
        lg_pos = np.log(g_all[pos])
        quiet = lg_pos - running_quantile(lg_pos, _QUIET_WINDOW, _QUIET_QUANTILE) <= -np.log(_QUIET_FACTOR)
        pos[np.flatnonzero(pos)[quiet]] = False
    s, g = s_all[pos], g_all[pos]
    if g.size < cfg.min_points:
        if n_bad:
            return _finish(mode, ev, episodes, {}, lambda r: _advice.grad(r, run, g))
        return _insufficient(mode, f">= {cfg.min_points} positive finite grad norms", run, ("grad_norm",))
    lg = np.log(g)
    base = _running_median(lg, _SPIKE_WINDOW)
    resid = lg - base
    # local robust scale: 1.4826 x the running median of |residual| over a fixed number of points (not the
    # whole run, whose length would change it)
    scale = np.maximum(1.4826 * _running_median(np.abs(resid), _SCALE_WINDOW), 0.01)
    z = resid / scale
    ratio = np.exp(resid)
    # a spike: large (ratio) and improbable under the run's own noise even with heavy tails (robust z); a
    # jump of an order of magnitude (grad_spike_jump) moves the weights that much further than its
    # neighbours do, and needs only to be improbable under Gaussian noise of the run's robust scale, at the
    # family-wise level _JUMP_ALPHA over the len(z) points scanned (Bonferroni)
    spike_z = (z >= cfg.grad_spike_z) & (ratio >= cfg.grad_spike_ratio)
    z_jump = NormalDist().inv_cdf(1.0 - _JUMP_ALPHA / max(z.size, 1))
    jump = (ratio >= cfg.grad_spike_jump) & (z >= z_jump)
    spike = spike_z | jump
    k = int(np.argmax(np.where(spike_z, z, -np.inf))) if spike_z.any() else int(np.argmax(z))
    ev.append(_unless(make_evidence("grad_norm", s[k:k + 1],
                                    f"largest robust z of log grad norm ({_SPIKE_WINDOW}-point median)",
                                    float(z[k]), cfg.grad_spike_z, ">=", kind="zscore", label="largest robust z"),
                      spike_z[k], f" [only {comparison(float(ratio[k]), cfg.grad_spike_ratio, '<')} times the "
                                  "median]"))
    ev.append(make_evidence("grad_norm", s[k:k + 1], "that grad norm / running median", float(ratio[k])))
    j = int(np.argmax(np.where(jump, ratio, -np.inf))) if jump.any() else int(np.argmax(ratio))
    ev.append(_unless(make_evidence("grad_norm", s[j:j + 1],
                                    f"largest grad norm / running median ({_SPIKE_WINDOW}-point)",
                                    float(ratio[j]), cfg.grad_spike_jump, ">=", kind="ratio",
                                    label="largest jump / running median"),
                      jump[j], f" [robust z {comparison(float(z[j]), z_jump, '<')}: within the run's noise]"))
    ev.append(make_evidence("grad_norm", s, "number of spikes", float(spike.sum())))
    episodes += [(float(a), float(a)) for a in s[spike]]
    panel = {"grad_norm": (s, g), "spike_steps": s[spike], "median": (s, np.exp(base)),
             "spike_levels": [(float(a), float(b)) for a, b in zip(g[spike], np.exp(base[spike]))]}
    return _finish(mode, ev, episodes, panel, lambda r: _advice.grad(r, run, g[~spike]))


# ----------------------------------------------------------------------------- reward components

_COMPONENT = re.compile(r"^(?:rewards/(?P<a>.+?)(?:/mean)?|reward_(?P<b>.+))$")
_NOT_COMPONENT = {"reward_mean", "reward_std", "reward_max", "reward_min"}


def reward_components(run: RunLog) -> list[str]:
    """Columns that hold one reward function's mean: ``rewards/<f>/mean``, ``rewards/<f>``,
    ``reward_<f>`` (not ``reward_mean`` / ``reward_std`` / ``*/std``)."""
    out = []
    for c in run.columns:
        if c in _NOT_COMPONENT or c.endswith("/std") or c.endswith("_std"):
            continue
        if _COMPONENT.match(c):
            out.append(c)
    return out


def detect_reward_imbalance(run: RunLog, cfg: DiagnoseConfig) -> ModeResult:
    """Reward-component imbalance: one component carries the reward's variation, or one never moves."""
    mode = "reward_imbalance"
    comps = [c for c in reward_components(run) if run.count(c) >= cfg.min_points]
    if len(comps) < 2:
        return ModeResult(mode, "insufficient_data",
                          reason=f"needs >= 2 reward components with >= {cfg.min_points} points "
                                 f"(has {len(comps)}: {', '.join(comps) or 'none'})")
    ev: list[Evidence] = []
    series = {}
    for c in comps:
        s, v = _finite(run, c, ev)
        if v.size >= cfg.min_points:
            series[c] = (s, v)
    if len(series) < 2:
        return ModeResult(mode, "insufficient_data", reason="fewer than 2 reward components with finite values")
    var = {c: float(np.var(v)) for c, (_, v) in series.items()}
    ptp = {c: float(np.ptp(v)) for c, (_, v) in series.items()}
    total = sum(var.values())
    top = max(var, key=var.get)
    steps = np.concatenate([s for s, _ in series.values()])
    share = var[top] / total if total > 0 else float("nan")
    ev.append(make_evidence(top, steps, "share of the summed component variance", share, cfg.component_share,
                            ">=", kind="fraction", label="share of the reward components' variance"))
    big = max(ptp.values())
    flat = [c for c in series if big > 0 and ptp[c] <= cfg.component_flat_rel * big]
    ev.append(make_evidence(",".join(flat) or "components", steps, "components that never change", float(len(flat)),
                            1, ">=", kind="gate")._replace(score=0.5 if flat else 0.0))
    for c in series:
        ev.append(make_evidence(c, series[c][0], "mean (variance share {:.2f})".format(var[c] / total if total else 0),
                                float(np.mean(series[c][1]))))
    panel = {"components": series, "flat": flat, "top": top}
    return _finish(mode, ev, [], panel, lambda r: _advice.components(r, top, flat, share))
