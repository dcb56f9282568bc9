"""Policy concentration: entropy collapses while the reward is still rising.

Without a KL anchor (beta = 0) GRPO keeps sharpening the policy on whatever is rewarded; the entropy
falls towards 0 long before the reward has saturated, and exploration is gone. Two conditions
(both required, :class:`~grpojax.diagnose.DiagnoseConfig`):

1. ``entropy late/initial median ratio <= entropy_ratio``;
2. over the steps after the smoothed entropy first fell below half of its initial value, the reward
   still rises: least-squares slope t-statistic ``>= reward_rise_t``.

Severity is the score of the entropy ratio (0.5 at the threshold, 1 at its square).
"""

from __future__ import annotations

import numpy as np

from grpojax.diagnose._config import DiagnoseConfig
from grpojax.diagnose._series import Run, edge_windows, moving_average, ols_slope
from grpojax.diagnose._types import ModeResult, finish_result, make_evidence

MODE = "policy_concentration"


def detect_policy_concentration(run: Run, cfg: DiagnoseConfig) -> ModeResult:
    """Policy-concentration detector (needs ``entropy`` and ``reward_mean``)."""
    missing = [c for c in ("entropy", "reward_mean") if run.count(c) < cfg.min_points]
    if missing:
        return ModeResult(MODE, "insufficient_data",
                          reason=f"needs >= {cfg.min_points} points of {' and '.join(missing)} "
                                 f"(has {', '.join(str(run.count(c)) for c in missing)})")
    s, h = run.series("entropy")
    if not np.all(np.isfinite(h)):
        keep = np.isfinite(h)
        s, h = s[keep], h[keep]
    early, late = edge_windows(h.size, cfg.edge_fraction, cfg.min_window_points)
    h0 = float(np.median(h[early]))
    h1 = float(np.median(h[late]))
    ratio = h1 / h0 if h0 > 0 else float("nan")
    ev = [make_evidence("entropy", np.r_[s[early], s[late]], "late/initial median ratio", ratio,
                        cfg.entropy_ratio, "<=", kind="ratio")]
    smooth = moving_average(h, max(1, cfg.min_window_points))
    below = np.nonzero(smooth <= 0.5 * h0)[0]
    half_step = float(s[below[0]]) if below.size else float(s[h.size // 2])
    rs, r = run.series("reward_mean")
    keep = np.isfinite(r) & (rs >= half_step)
    rs_seg, r_seg = rs[keep], r[keep]
    sl = ols_slope(rs_seg, r_seg)
    seg_label = ("after entropy halved" if below.size else "2nd half (entropy never halved)")
    ev.append(make_evidence("reward_mean", rs_seg, f"slope t-statistic {seg_label}", sl.t,
                            cfg.reward_rise_t, ">=", kind="gate"))
    if rs_seg.size >= 2:
        gain = float(np.mean(r_seg[-max(1, rs_seg.size // 5):]) - np.mean(r_seg[:max(1, rs_seg.size // 5)]))
        ev.append(make_evidence("reward_mean", rs_seg, f"gain {seg_label}", gain))
    ev.append(make_evidence("entropy", s[early], "initial median", h0))
    ev.append(make_evidence("entropy", s[late], "late median", h1))
    panel = {"entropy": (s, h), "reward_mean": (rs, r), "half_step": half_step}
    episodes = [(half_step, float(s[-1]))]
    return finish_result(MODE, ev, episodes, panel, require_all=True)
