"""Collapse: the reward climbs, then loses most of its rise within a short stretch and does not come back.

The finding (thresholds in :class:`~grpojax.diagnose.DiagnoseConfig`), on ``reward_mean`` and on
``eval_reward`` when it has at least ``min_points`` points (``reward_mean``, logged at every step, is
reported when both collapse):

1. The curve is smoothed (centred moving average over 5 % of its points, 3 to 10) and its noise is the
   robust per-point sd of :func:`grpojax.diagnose._events.noise_sd`. Along the run, ``peak`` is the
   largest smoothed value so far and ``rise = peak - start`` (``start``: the median of the first
   ``initial_points`` points, the initial level every detector uses); a
   collapse needs a rise out of the noise of what measures it: at least the height a noise excursion adds
   to the running peak of the smoothed curve (below) plus ``collapse_rise_sd`` times the noise of the start
   (a median of ``m`` points: sd ``sigma sqrt(pi / 2m)``) and of the peak (a mean of ``w``: ``sigma / sqrt(w)``),
   and at least ``collapse_rise_sd`` noise sd; and a rise worth losing: at least ``collapse_min_rise`` of
   the largest magnitude the curve reaches (on a reward that barely moves, a rise of 1 % of its level can
   clear the noise).
2. The smoothed curve falls to ``peak - collapse_drop_fraction x rise`` within ``collapse_window`` of the
   run's points from the last point where it was within 10 % of the rise of its peak, or within the
   height a noise excursion adds to a running peak (sqrt(2 ln(n/w)) sd of the smoothed curve, w its window),
   whichever is larger (a fall, not a slow decline), and
3. does not recover: at least 2 points follow, and the mean of the last ``edge_fraction`` of the points
   stays at or below ``peak - collapse_drop_fraction x rise``.

A log that begins at its highest level -- a run resumed from a checkpoint, or started at a plateau -- has
no rise to measure a fall against. When the search above finds no collapse and every logged value of the
curve is >= 0 (so 0 is a floor the reward falls towards; ``collapse_from_start``), a **fall from the held
level** is looked for instead: at a point ``k`` the held level ``L`` is the mean of the up to ``w`` points
before it (the smoothing window), the highest level so far (within 10 % of ``L`` or the running peak's
noise height), at least ``collapse_rise_sd`` noise sd above 0; the mean of the up to ``w`` points from
``k`` is below ``L`` by ``collapse_rise_sd`` times the noise of the two means; the point at ``k`` has lost a
quarter of ``L``; the moving average of the points from ``k`` on (without the points before it, which
would blur the fall) reaches ``(1 - collapse_drop_fraction) L`` within ``collapse_window`` of the run; and
the late mean stays there. The fraction lost is then of the level, measured from 0.

What it reports: the **onset** (the first logged step of the fall: the point after the last one, between
the peak and the point where half of the rise is lost, whose raw value was within a quarter of the rise
of the peak), the **size** (mean before -- from the peak to the
onset -- minus mean after, with a 90 % normal interval) and the fraction of the rise lost, the **best
step** before the onset (the maximum of the smoothed curve; the nearest saved checkpoint at or before it
when the log's meta names the checkpoints or a ``save_steps`` interval) and the **precursor chain**:
the first event (:mod:`grpojax.diagnose._events`) of every other metric in the ``collapse_lookback``
of the run before the onset, in step order, each with its lead in steps (0: at the onset). The advice
follows the first precursor.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from grpojax.diagnose._config import DEFAULT_CONFIG, DiagnoseConfig
from grpojax.diagnose._events import Event, SeriesEvents, noise_sd
from grpojax.diagnose._stats import centred_mean, clip_window, edge_windows, initial_window
from grpojax.diagnose._types import Evidence, ModeResult, finish_result, make_evidence
from grpojax.logs import RunLog

__all__ = ["MODE", "detect_collapse", "collapse_advice", "collapse_onset", "precursor_chain"]

MODE = "collapse"
_Z90 = 1.6448536269514722

# first precursor -> what to change (the remedy that acts on that signal)
_REMEDY = {
    "entropy": "the entropy moved first: raise the entropy bonus, lower the learning rate or raise the KL "
               "coefficient beta",
    "response_length": "the response length moved first: add a length penalty or a length cap",
    "response_clip_frac": "truncation at the length cap moved first: add a length penalty or a length cap",
    "kl": "the KL moved first: raise the KL coefficient beta",
    "grad_norm": "the grad norm moved first: clip gradients harder or lower the learning rate",
    "loss": "the loss moved first: clip gradients harder or lower the learning rate",
    "clip_frac": "the ratio-clip fraction moved first: lower the learning rate or the updates per rollout",
    "frac_zero_std": "the share of zero-variance groups moved first: look at the data (prompts the policy "
                     "always or never solves carry no signal)",
    "reward_std": "the within-group reward spread moved first: look at the data (groups without signal)",
}


def _checkpoints(run: RunLog, last: float) -> list[float]:
    """Saved checkpoint steps the log's meta names (``checkpoints`` or ``checkpoint_steps`` lists, or a
    ``save_steps`` interval), else []."""
    for pool in (run.meta, run.meta.get("config") or {}, run.meta.get("hyperparams") or {}):
        if not isinstance(pool, dict):
            continue
        for k in ("checkpoints", "checkpoint_steps"):
            v = pool.get(k)
            if isinstance(v, (list, tuple)) and v and all(isinstance(x, (int, float)) for x in v):
                return sorted(float(x) for x in v)
        v = pool.get("save_steps")
        if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= last:
            return [float(x) for x in np.arange(v, last + 1, v)]
    return []


def precursor_chain(events: dict[str, SeriesEvents], onset: float, lookback: float,
                    exclude: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The first event of every metric (not in ``exclude``) within ``[onset - lookback, onset]``, in step
    order: ``[{metric, step, lead, direction, size, confidence, before, after}]``."""
    out = []
    for m, se in events.items():
        if m in exclude:
            continue
        hits = [e for e in se.events if onset - lookback <= e.step <= onset]
        if hits:
            e: Event = hits[0]
            out.append({"metric": m, "step": e.step, "lead": float(onset - e.step), "direction": e.direction,
                        "size": e.size, "confidence": e.confidence, "before": e.before, "after": e.after})
    return sorted(out, key=lambda d: (d["step"], d["metric"]))


def collapse_advice(onset: float, restore: float, chain: list[dict]) -> str:
    """The advice: the checkpoint to restore, then the remedy of the first precursor."""
    head = f"Restore the checkpoint at step {restore:g} (the best before the collapse at step {onset:g})"
    if not chain:
        return head + "; no other logged metric jumped before it: lower the learning rate and watch the run."
    first = chain[0]
    remedy = _REMEDY.get(first["metric"], f"{first['metric']} moved first: look at what drives it")
    order = " -> ".join(f"{c['metric']} ({c['lead']:g} steps before)" if c["lead"] else f"{c['metric']} (at onset)"
                        for c in chain)
    return f"{head}; {remedy} (order: {order})."


def _find(s: np.ndarray, y: np.ndarray, cfg: DiagnoseConfig) -> dict[str, Any]:
    """The first collapse of one curve (``found``) or the largest short fall (for the evidence)."""
    n = y.size
    w = clip_window(n, 0.05, 3, 10)
    sm = centred_mean(y, w)
    sigma = noise_sd(y)
    # the running peak of a noisy smoothed curve sits above the level it smooths by about the largest of
    # n / w independent draws of its noise (sd sigma / sqrt(w)): the top of the rise is where the smoothed
    # curve is within that, or within 10 % of the rise, of the peak
    near_peak = math.sqrt(2.0 * math.log(max(n / w, 2.0))) * sigma / math.sqrt(w)
    start = float(np.median(y[initial_window(n, cfg)]))  # the initial level, as every detector takes it
    peak = np.maximum.accumulate(sm)
    rise = peak - start
    frac = cfg.collapse_drop_fraction
    win = max(2, math.ceil(cfg.collapse_window * n))
    _, late = edge_windows(n, cfg.edge_fraction, cfg.min_window_points)
    late_mean = float(np.mean(y[late]))
    best: dict[str, Any] = {"found": False, "lost": float("nan"), "sigma": sigma, "smooth": sm, "w": w,
                            "near_peak": near_peak, "late_mean": late_mean}
    # a rise out of the noise of what measures it: the running peak of the smoothed curve sits near_peak above
    # its level by chance, and the start (a median of m points) and the peak (a mean of w) are noisy themselves
    m0 = initial_window(n, cfg).stop
    rise_noise = sigma * math.sqrt(math.pi / (2.0 * m0) + 1.0 / w)
    material = cfg.collapse_min_rise * float(np.max(np.abs(y)))  # a rise worth losing, in the reward's units
    ok_rise = rise >= max(near_peak + cfg.collapse_rise_sd * rise_noise, cfg.collapse_rise_sd * sigma, material,
                          1e-12)
    below = ok_rise & (sm <= peak - frac * rise)
    # the first point of each stretch below the mark: later points of a stretch share its peak and the start
    # of its fall, and are further from it (O(n) candidates would make this O(n^2) on a long collapsed tail)
    cand = np.flatnonzero(below & ~np.r_[False, below[:-1]])
    idx = np.arange(n)
    new_max = sm > np.r_[-np.inf, peak[:-1]]
    pidx = np.maximum.accumulate(np.where(new_max, idx, 0))  # where the running peak was reached
    largest = -np.inf
    k0 = initial_window(n, cfg).stop
    for q in cand:
        p = int(pidx[q])
        if p < k0:  # the peak is among the initial points: the curve never rose above its start
            continue
        high = np.flatnonzero(sm[p:q] >= peak[q] - max(0.1 * rise[q], near_peak))
        f = p + int(high[-1]) if high.size else p
        lost = float((peak[q] - np.min(sm[q:q + win + 1])) / rise[q])  # the depth of the fall within the window
        fast = q - f <= win
        stays = n - 1 - q >= 2 and late_mean <= peak[q] - frac * rise[q]
        if fast and (lost > largest or stays):  # the largest fall so far, or the collapse itself
            largest = max(largest, lost)
            best.update(q=int(q), p=p, f=f, lost=lost, fast=fast, stays=stays, rise=float(rise[q]),
                        peak=float(peak[q]), start=start)
        if fast and stays:
            best.update(found=True)
            break
    if "q" not in best:
        return best
    # onset: the first raw point of the fall -- the point after the last one, from the peak to where half
    # of the rise is lost, that was within a quarter of the rise of the peak
    p, q = best["p"], best["q"]
    high = np.flatnonzero(y[p:q + 1] >= best["peak"] - 0.25 * best["rise"])
    k = min(p + (int(high[-1]) + 1 if high.size else 1), q, n - 1)
    k = max(k, 1)
    before, after = y[p:k], y[k:]
    drop = float(np.mean(before) - np.mean(after))
    var = (np.var(before) / max(before.size, 1) + np.var(after) / max(after.size, 1))
    se = float(math.sqrt(max(var, sigma ** 2 * (1 / max(before.size, 1) + 1 / max(after.size, 1)))))
    b = int(np.argmax(sm[:k])) if k > 0 else 0
    best.update(k=k, onset=float(s[k]), drop=drop, drop_lo=drop - _Z90 * se, drop_hi=drop + _Z90 * se,
                best_index=b, best_step=float(s[b]), best_value=float(sm[b]), late_mean=late_mean, window=win)
    return best


def _find_from_start(s: np.ndarray, y: np.ndarray, cfg: DiagnoseConfig, rise_pass: dict[str, Any]) -> dict[str, Any]:
    """A fall from the level held just before it, measured from the floor 0 (a curve that never goes below
    0 and logged no rise before its fall); the keys of :func:`_find`, with ``from_start`` set."""
    n = y.size
    sm, sigma, w, near_peak = rise_pass["smooth"], rise_pass["sigma"], rise_pass["w"], rise_pass["near_peak"]
    late_mean = rise_pass["late_mean"]
    frac = cfg.collapse_drop_fraction
    win = max(2, math.ceil(cfg.collapse_window * n))
    ks = np.arange(1, n - 2)  # at least 2 points follow the onset
    if ks.size == 0:
        return rise_pass
    # the level held before k and the level from k on: means of up to w points, the smoothing scale of the
    # rise-based search's peak (a mean of fewer points is lifted by the noise it is meant to rise above)
    c = np.r_[0.0, np.cumsum(y)]
    nb, na = np.minimum(ks, w), np.minimum(n - ks, w)
    held, after_mean = (c[ks] - c[ks - nb]) / nb, (c[ks + na] - c[ks]) / na
    top = np.maximum.accumulate(sm)[ks - 1]  # the highest smoothed level before k
    rise_sd = cfg.collapse_rise_sd
    ok = ((held >= top - np.maximum(0.1 * held, near_peak)) & (held >= max(rise_sd * sigma, 1e-12))
          & (y[ks] <= 0.75 * held) & (late_mean <= (1.0 - frac) * held)
          & (held - after_mean >= rise_sd * sigma * np.sqrt(1.0 / nb + 1.0 / na)))
    for i in np.flatnonzero(ok):
        k, L = int(ks[i]), float(held[i])
        after = centred_mean(y[k:k + win + w], w)[:win + 1]  # the fall, smoothed without the level before it
        reach = np.flatnonzero(after <= (1.0 - frac) * L)
        if not reach.size:
            continue
        q = int(k + reach[0])
        m = int(nb[i])
        before, rest = y[k - m:k], y[k:]
        drop = float(np.mean(before) - np.mean(rest))
        var = np.var(before) / before.size + np.var(rest) / rest.size
        se = float(math.sqrt(max(var, sigma ** 2 * (1 / before.size + 1 / rest.size))))
        b = int(np.argmax(sm[:k]))
        return dict(rise_pass, found=True, from_start=True, q=q, p=k - m, f=k - 1,
                    lost=float((L - np.min(after)) / L), fast=True, stays=True, rise=L, peak=L, start=0.0,
                    k=int(k), onset=float(s[k]), drop=drop, drop_lo=drop - _Z90 * se, drop_hi=drop + _Z90 * se,
                    best_index=b, best_step=float(s[b]), best_value=float(sm[b]), late_mean=late_mean, window=win)
    return rise_pass


def detect_collapse(run: RunLog, cfg: DiagnoseConfig, events: dict[str, SeriesEvents]) -> ModeResult:
    """Collapse detector (``reward_mean``, else ``eval_reward``); ``events`` from
    :func:`grpojax.diagnose._events.detect_events` give the precursor chain."""
    curves = [c for c in ("reward_mean", "eval_reward") if run.count(c) >= cfg.min_points]
    if not curves:
        return ModeResult(MODE, "insufficient_data",
                          reason=f"needs >= {cfg.min_points} points of reward_mean or eval_reward "
                                 f"(has {run.count('reward_mean')} and {run.count('eval_reward')})")
    found = []
    for col in curves:
        s, y = run.series(col)
        keep = np.isfinite(y)
        s, y = s[keep].astype(float), y[keep]
        if y.size < cfg.min_points:
            continue
        r = _find(s, y, cfg)
        if not r["found"] and cfg.collapse_from_start and float(np.min(y)) >= 0.0:
            r = _find_from_start(s, y, cfg, r)
        found.append((col, s, y, r))
    if not found:
        return ModeResult(MODE, "insufficient_data", reason=f"needs >= {cfg.min_points} finite reward points")
    hits = [f for f in found if f[3]["found"]]
    col, s, y, r = hits[0] if hits else max(
        found, key=lambda f: f[3]["lost"] if np.isfinite(f[3]["lost"]) else -np.inf)
    ev: list[Evidence] = []
    if "q" not in r:
        ev.append(make_evidence(col, s, "largest fraction of the rise lost within a short fall "
                                f"[no fall of {cfg.collapse_drop_fraction:g} of a rise >= {cfg.collapse_rise_sd:g} "
                                "noise sd]", float("nan"), cfg.collapse_drop_fraction, ">=", kind="fraction"))
        return finish_result(MODE, ev, [], {"column": col, col: (s, y)})
    p, q, k = r["p"], r["q"], r["k"]
    lost = r["drop"] / r["rise"] if r["rise"] > 0 else float("nan")
    # capped at 1 (all of the rise): a fall below the start is no more a collapse, and a capped fraction is
    # never far enough past its threshold to count without the gates (finish_result's FAR_PAST)
    what = ("fraction of the held level lost, measured from 0 (no rise logged before the fall; level held "
            f"from step {s[p]:g}" if r.get("from_start") else f"fraction of the rise lost (fall from the peak at step {s[p]:g}")
    ev.append(make_evidence(col, s[p:q + 1], f"{what}, half of it within {q - r['f']} points; 1 = all of it)",
                            min(float(r["lost"]), 1.0), cfg.collapse_drop_fraction, ">=", kind="fraction"))
    ev.append(make_evidence(col, s[r["f"]:q + 1], f"points of the fall (<= {cfg.collapse_window:g} of the run)",
                            float(q - r["f"]), float(r["window"]), "<=", kind="gate"))
    _, late = edge_windows(y.size, cfg.edge_fraction, cfg.min_window_points)
    ev.append(make_evidence(col, s[late], "late mean (stays at or below peak - fraction x rise: no recovery)",
                            r["late_mean"], r["peak"] - cfg.collapse_drop_fraction * r["rise"], "<=", kind="gate"))
    ev.append(make_evidence(col, s[k:k + 1], "onset step (first step at the lower level)", r["onset"]))
    ev.append(make_evidence(col, s[p:], "size: mean before - mean after", r["drop"]))
    ev.append(make_evidence(col, s[p:], "size 90% interval low", r["drop_lo"]))
    ev.append(make_evidence(col, s[p:], "size 90% interval high", r["drop_hi"]))
    ev.append(make_evidence(col, s[p:], "fraction of the held level lost (means)" if r.get("from_start")
                            else "fraction of the rise lost (means)", lost))
    ev.append(make_evidence(col, s[:k], "best step before the onset", r["best_step"]))
    res = finish_result(MODE, ev, [(r["onset"], float(s[-1]))] if r["found"] else [],
                        {"column": col, col: (s, y), "smooth": (s, r["smooth"]), "onset": r["onset"],
                         "best_step": r["best_step"]}, require_all=True)
    if not res.detected:
        return res
    span = float(s[-1] - s[0]) if s.size > 1 else 0.0
    lookback = cfg.collapse_lookback * span
    other = "eval_reward" if col == "reward_mean" else "reward_mean"
    chain = precursor_chain(events, r["onset"], lookback, exclude=(col, other))
    ckpts = [c for c in _checkpoints(run, float(run.steps[-1])) if c < r["onset"]]
    restore = min(ckpts, key=lambda c: (abs(c - r["best_step"]), -c)) if ckpts else r["best_step"]
    import dataclasses  # noqa: PLC0415

    panel = dict(res.panel_data, precursors=chain, restore_step=restore)
    info = {"onset": r["onset"], "size": r["drop"], "size_interval": (r["drop_lo"], r["drop_hi"]),
            "level": 0.9, "lost_fraction": lost, "peak_step": float(s[p]), "best_step": r["best_step"],
            "best_value": r["best_value"], "restore_step": restore,
            "restore_from": "saved checkpoint" if ckpts else "best step", "column": col, "precursors": chain,
            "measured_from": "the held level (no rise logged)" if r.get("from_start") else "the rise"}
    panel["collapse"] = info
    of = ("of the level it held (measured from 0: the log shows no rise before the fall)" if r.get("from_start")
          else "of its rise")
    reason = (f"{col} fell from {r['peak']:.3g} (step {s[p]:g}) to {float(np.mean(y[k:])):.3g}, {lost:.0%} {of}, "
              f"half of it within {q - r['f']} points: onset at step {r['onset']:g}, "
              f"size {r['drop']:.3g} [{r['drop_lo']:.3g}, {r['drop_hi']:.3g}] (90%); best step {r['best_step']:g}"
              + ("; precursors: " + ", ".join(f"{c['metric']} {c['direction']} {c['lead']:g} steps before"
                                              for c in chain) if chain else "; no precursor event"))
    return dataclasses.replace(res, reason=reason, advice=collapse_advice(r["onset"], restore, chain),
                               panel_data=panel)


def collapse_onset(steps, values, cfg: DiagnoseConfig | None = None) -> float | None:
    """The onset step of the collapse one reward curve holds, or None.

    The collapse finding of :func:`diagnose` on that curve alone (no precursor chain): what a forecast made
    after a crash needs to start from the level after it (``forecast_window(..., collapse_onset=...)``; the
    command line's ``fit --prefix`` and ``watch`` do this).

    Args:
      steps: the logged steps of the curve.
      values: its values (non-finite points are dropped).
      cfg: the thresholds (default :data:`DEFAULT_CONFIG`).

    Returns:
      The first logged step of the fall, or None when the curve holds no collapse or has fewer than
      ``cfg.min_points`` finite points.
    """
    cfg = DEFAULT_CONFIG if cfg is None else cfg
    s, y = np.asarray(steps, float), np.asarray(values, float)
    keep = np.isfinite(s) & np.isfinite(y)
    if np.count_nonzero(keep) < cfg.min_points:  # too short for the finding: it says nothing
        return None
    res = detect_collapse(RunLog.from_columns({"reward_mean": y[keep]}, steps=s[keep]), cfg, {})
    return float(res.panel_data["onset"]) if res.detected else None
