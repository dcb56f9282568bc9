"""Policy concentration: entropy collapses while the reward is still rising.

Without a KL anchor (beta = 0) GRPO keeps sharpening the policy on whatever is rewarded; the entropy
falls towards 0 long before the reward has saturated, and exploration is gone. Two conditions
(both required, :class:`~grpojax.diagnose.DiagnoseConfig`):

1. ``entropy late/initial median ratio <= entropy_ratio`` (initial: the first ``initial_points``
   points -- a fixed number, so a longer log of the same run keeps the same baseline; late: last
   ``edge_fraction``);
2. the reward rises over the run (late-window mean minus the mean of the first points, z-score
   ``>= reward_rise_t``, its standard error from the per-point noise of the whole series,
   :func:`~grpojax.diagnose._events.noise_sd`, since the first window has only a few points) and was still
   rising when the entropy had already lost half of its total drop: at that step (the entropy half-life) at
   most ``reward_done_at_entropy_half`` of the reward's rise was done (moving averages over 2 % of the
   points, 3 to 10 points). Entropy that falls only after the reward has plateaued is ordinary convergence,
   not concentration.

The entropy's level is the lowest of its late median and the medians of its earlier segments between events
(:mod:`grpojax.diagnose._events`), and after a collapse the reward gates look at the run before its onset.

Severity is the score of the entropy ratio (0.5 at the threshold, 1 at its square).
"""

from __future__ import annotations

import numpy as np

from grpojax.logs import RunLog
from grpojax.diagnose._config import DiagnoseConfig
from grpojax.diagnose._events import noise_sd
from grpojax.diagnose._stats import centred_mean, clip_window, edge_windows, initial_window
from grpojax.diagnose._types import ModeResult, finish_result, make_evidence

MODE = "policy_concentration"


def detect_policy_concentration(run: RunLog, cfg: DiagnoseConfig, *, events: dict | None = None,
                                until: float | None = None) -> ModeResult:
    """Policy-concentration detector (needs ``entropy`` and ``reward_mean``).

    ``events``: :func:`grpojax.diagnose._events.detect_events`'s result; the entropy's level is the lowest of
    its late median and the medians of its earlier segments between events (an entropy that fell to a tenth and
    recovered a little by the end is judged at its minimum). ``until``: the onset step of a collapse; the
    reward gates are judged on the run before it (a reward that fell away after the entropy did still rose
    while it did).
    """
    missing = [c for c in ("entropy", "reward_mean") if run.count(c) < cfg.min_points]
    if missing:
        return ModeResult(MODE, "insufficient_data",
                          reason=f"needs >= {cfg.min_points} points of {' and '.join(missing)} "
                                 f"(has {', '.join(str(run.count(c)) for c in missing)})")
    s, h = run.series("entropy")
    if not np.all(np.isfinite(h)):
        keep = np.isfinite(h)
        s, h = s[keep], h[keep]
    _, late = edge_windows(h.size, cfg.edge_fraction, cfg.min_window_points)
    early = initial_window(h.size, cfg)  # a fixed number of points, never a fraction of the run
    h0 = float(np.median(h[early]))
    h1 = float(np.median(h[late]))
    stat, where = "late/initial median ratio", np.r_[s[early], s[late]]
    se = (events or {}).get("entropy")
    for a, b in (se.segments[:-1] if se is not None and se.events else ()):  # the last one: the late median
        inside = (s >= a) & (s <= b)
        if inside.sum() >= cfg.min_window_points and float(np.median(h[inside])) < h1:
            h1 = float(np.median(h[inside]))
            stat, where = f"late/initial median ratio, or an earlier segment's when lower (steps {a:g}-{b:g})", \
                np.r_[s[early], s[inside]]
    ratio = h1 / h0 if h0 > 0 else float("nan")
    ev = [make_evidence("entropy", where, stat, ratio, cfg.entropy_ratio, "<=", kind="ratio")]
    # entropy half-life: first step where the smoothed entropy has lost half of its total drop
    smooth = centred_mean(h, clip_window(h.size, 0.02, 3, 10))
    level = h1 + 0.5 * (h0 - h1)
    below = np.nonzero(smooth <= level)[0]
    half_step = float(s[below[0]]) if below.size else float(s[-1])
    # reward: total rise (significant?) and the fraction of it done at the entropy half-life
    rs, r = run.series("reward_mean")
    keep = np.isfinite(r)
    if until is not None and np.count_nonzero(keep & (rs < until)) >= cfg.min_points:
        keep &= rs < until
    rs, r = rs[keep], r[keep]
    rsm = centred_mean(r, clip_window(r.size, 0.02, 3, 10))
    head = initial_window(r.size, cfg)
    _, rlate = edge_windows(r.size, cfg.edge_fraction, cfg.min_window_points)
    r_init, r_final = float(np.mean(r[head])), float(np.mean(r[rlate]))
    sigma = noise_sd(r)  # per-point noise from the whole series (the first window has only a few points)
    se = sigma * float(np.sqrt(1.0 / r[head].size + 1.0 / r[rlate].size))
    rise = r_final - r_init
    z = rise / se if se > 0 else (np.inf if rise > 0 else 0.0)
    ev.append(make_evidence("reward_mean", np.r_[rs[head], rs[rlate]], "rise z-score (late mean - initial mean)",
                            z, cfg.reward_rise_t, ">=", kind="gate"))
    r_half = float(np.interp(half_step, rs, rsm))
    done = (r_half - r_init) / rise if rise > 0 else float("nan")
    ev.append(make_evidence("reward_mean", np.array([rs[0], half_step]),
                            "fraction of the reward rise done when entropy had lost half its drop", done,
                            cfg.reward_done_at_entropy_half, "<=", kind="gate",
                            label="share of the reward rise done at the entropy half-life"))
    ev.append(make_evidence("reward_mean", rs, "reward rise (late mean - initial mean)", rise))
    ev.append(make_evidence("entropy", s[early], "initial median", h0))
    ev.append(make_evidence("entropy", s[late], "late median", h1))
    panel = {"entropy": (s, h), "reward_mean": (rs, r), "half_step": half_step}
    episodes = [(half_step, float(s[-1]))]
    return finish_result(MODE, ev, episodes, panel, require_all=True)
