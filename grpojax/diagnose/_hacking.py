"""Reward hacking: train reward and eval reward decouple.

A reward that pays for a gameable proxy keeps rising in training while the held-out evaluation (which
measures the real target) stalls or falls. On the late part of the run (the last
``hacking_late_fraction`` of its steps) the detector compares least-squares slopes of the train reward
``reward_mean`` and of ``eval_reward`` (:class:`~grpojax.diagnose.DiagnoseConfig`):

- ``decoupling = (train gain - eval gain) / train range >= decoupling``, gains = slope x segment
  length, train range = max - min of the train curve smoothed over 5 % of its points;
- ``z = (slope_train - slope_eval) / sqrt(se_train^2 + se_eval^2) >= decoupling_z`` (the gap is not
  sampling noise: eval points are few);
- gate: the train reward still rises in that segment (slope t-statistic ``>= reward_rise_t``).

Also reported (information): the steps at which smoothed train and eval curves reach 90 % of their
rise ("different saturation rates") and the Spearman correlation of eval with train at eval steps.
Both columns must be in the same units (the same reward function), as TRL/verl log them.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from grpojax.diagnose._config import DiagnoseConfig
from grpojax.diagnose._series import Run, moving_average, ols_slope
from grpojax.diagnose._types import ModeResult, finish_result, make_evidence

MODE = "reward_hacking"


def _saturation_step(s: np.ndarray, y: np.ndarray, frac: float = 0.9) -> float:
    if y.size < 3:
        return float("nan")
    y0, y1 = y[0], np.max(y)
    if y1 <= y0:
        return float(s[0])
    return float(s[np.nonzero(y >= y0 + frac * (y1 - y0))[0][0]])


def detect_reward_hacking(run: Run, cfg: DiagnoseConfig) -> ModeResult:
    """Reward-hacking (train-eval decoupling) detector (needs ``reward_mean`` and ``eval_reward``)."""
    n_tr, n_ev = run.count("reward_mean"), run.count("eval_reward")
    if n_tr < cfg.min_points or n_ev < cfg.min_eval_points:
        return ModeResult(MODE, "insufficient_data",
                          reason=f"needs >= {cfg.min_points} train reward_mean points and >= "
                                 f"{cfg.min_eval_points} eval_reward points (has {n_tr} and {n_ev})")
    st, rt = run.series("reward_mean")
    se, re = run.series("eval_reward")
    ok_t, ok_e = np.isfinite(rt), np.isfinite(re)
    st, rt, se, re = st[ok_t], rt[ok_t], se[ok_e], re[ok_e]
    lo, hi = min(st[0], se[0]), max(st[-1], se[-1])
    start = lo + (1 - cfg.hacking_late_fraction) * (hi - lo)
    in_t = st >= start
    in_e = se >= start
    if in_e.sum() < 3:  # extend back to the last three eval points
        in_e = np.zeros_like(in_e)
        in_e[-3:] = True
        start = min(start, float(se[in_e][0]))
        in_t = st >= start
    if in_t.sum() < 3:
        return ModeResult(MODE, "insufficient_data",
                          reason=f"fewer than 3 train points after step {start:g}")
    seg_lo, seg_hi = float(start), float(max(st[in_t][-1], se[in_e][-1]))
    length = seg_hi - seg_lo
    sl_t = ols_slope(st[in_t], rt[in_t])
    sl_e = ols_slope(se[in_e], re[in_e])
    smooth_t = moving_average(rt, max(1, rt.size // 20))
    scale = max(float(np.ptp(smooth_t)), 1e-12)
    d_tr, d_ev = sl_t.slope * length, sl_e.slope * length
    decoupling = (d_tr - d_ev) / scale
    se_diff = np.hypot(sl_t.stderr, sl_e.stderr)
    if se_diff > 0:
        z = (sl_t.slope - sl_e.slope) / se_diff
    else:
        z = float(np.sign(sl_t.slope - sl_e.slope) * np.inf) if sl_t.slope != sl_e.slope else 0.0
    seg = np.array([seg_lo, seg_hi])
    ev = [
        make_evidence("reward_mean,eval_reward", seg, "decoupling (train gain - eval gain) / train range",
                      decoupling, cfg.decoupling, ">=", kind="ratio"),
        make_evidence("reward_mean,eval_reward", seg, "slope difference z-score", z, cfg.decoupling_z,
                      ">=", kind="gate"),
        make_evidence("reward_mean", seg, "train slope t-statistic", sl_t.t, cfg.reward_rise_t, ">=",
                      kind="gate"),
        make_evidence("reward_mean", seg, "train gain", d_tr),
        make_evidence("eval_reward", seg, "eval gain", d_ev),
        make_evidence("reward_mean", st, "train range (smoothed max - min)", scale),
    ]
    # different saturation rates and co-movement (information only)
    ev.append(make_evidence("reward_mean", st, "step reaching 90% of rise (smoothed)",
                            _saturation_step(st, smooth_t)))
    smooth_e = moving_average(re, 3) if re.size >= 6 else re
    ev.append(make_evidence("eval_reward", se, "step reaching 90% of rise (smoothed)",
                            _saturation_step(se, smooth_e)))
    if re.size >= 4:
        at_eval = np.interp(se, st, smooth_t)
        rho = stats.spearmanr(at_eval, re).statistic if np.ptp(re) > 0 and np.ptp(at_eval) > 0 else np.nan
        ev.append(make_evidence("reward_mean,eval_reward", se, "Spearman rho (eval vs train at eval steps)",
                                float(rho)))
    panel = {"reward_mean": (st, rt), "reward_smooth": (st, smooth_t), "eval_reward": (se, re),
             "segment": (seg_lo, seg_hi),
             "train_line": (seg, rt[in_t].mean() + sl_t.slope * (seg - st[in_t].mean())),
             "eval_line": (seg, re[in_e].mean() + sl_e.slope * (seg - se[in_e].mean()))}
    return finish_result(MODE, ev, [(seg_lo, seg_hi)], panel, require_all=True)
