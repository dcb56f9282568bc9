"""Advantage degeneracy: the within-group reward variance collapses.

When every answer in a group gets the same reward, the group-normalised advantage is 0/0 (GRPO sets it
to 0) and the group contributes no gradient. Symptoms in a log: ``frac_zero_std`` (fraction of groups
with zero reward std) high, ``reward_std`` -> 0, grad norm exactly 0 on steps where no group had any
signal. Detected when ``frac_zero_std`` or ``reward_std`` passes its threshold in the late window
(:class:`~grpojax.diagnose.DiagnoseConfig`). The fraction of exactly-zero grad norms is reported with
them as supporting evidence; it decides the verdict only when neither variance column is logged,
because a zero gradient alone is ambiguous (a saturated softmax, a masked loss).

When neither ``frac_zero_std`` nor ``reward_std`` is logged, the fraction is estimated from the mean
reward and the group size G (``meta["group_size"]``, taken from the run's arguments or config): for a
pass/fail reward a prompt with pass rate p gives a group of G identical rewards with probability
p^G + (1 - p)^G. The estimate uses the late mean reward as p. Prompts differ in pass rate, and
p -> p^G + (1 - p)^G is convex, so by Jensen's inequality the mean over prompts (and over the steps of
the late window) of p_i^G + (1 - p_i)^G is at least the value at the mean pass rate: the estimate is a
*lower bound* of the true fraction (the upper bound is 1: prompts that are either always or never
solved give any mean). A detection from the estimate therefore holds for any spread of pass rates; a
miss does not rule degeneracy out. It assumes a 0/1 reward per completion (checked only as far as the
log allows: every mean reward in [0, 1]); with partial credit identical groups are rarer and the
formula does not apply.
"""

from __future__ import annotations

import numpy as np

from grpojax.logs import RunLog
from grpojax.diagnose._advice import zero_std_fraction
from grpojax.diagnose._config import DiagnoseConfig
from grpojax.diagnose._format import comparison
from grpojax.diagnose._stats import centred_mean, clip_window, edge_windows, episodes_from_mask
from grpojax.diagnose._types import Evidence, ModeResult, finish_result, make_evidence

MODE = "advantage_degeneracy"


def group_size(run: RunLog) -> int | None:
    """The run's group size G from its meta (``group_size``), or None when unknown."""
    v = run.meta.get("group_size")
    if isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) and v >= 2 and v == int(v):
        return int(v)
    return None


def _binary_range(run: RunLog, cfg: DiagnoseConfig) -> bool:
    """Enough mean-reward points, all in [0, 1] (what a 0/1 reward's means look like)."""
    if run.count("reward_mean") < cfg.min_points:
        return False
    _, r = run.series("reward_mean")
    r = r[np.isfinite(r)]
    return bool(r.size >= cfg.min_points and r.min() >= 0.0 and r.max() <= 1.0)


def _why_no_estimate(run: RunLog, cfg: DiagnoseConfig, g: int | None) -> str:
    """Why the zero-variance fraction cannot be estimated from the mean reward, in the data's own terms."""
    if g is None:
        return "G unknown"
    _, r = run.series("reward_mean")
    r = r[np.isfinite(r)]
    if r.size < cfg.min_points:
        return f"{r.size} finite mean-reward points < {cfg.min_points}"
    if r.min() < 0:
        return f"mean reward outside [0, 1]: its smallest is {comparison(float(r.min()), 0.0, '<')}"
    return f"mean reward outside [0, 1]: its largest is {comparison(float(r.max()), 1.0, '>')}"


def _zero_grad_mask(g: np.ndarray, cfg: DiagnoseConfig) -> np.ndarray:
    pos = g[np.isfinite(g) & (g > 0)]
    ref = float(np.median(pos)) if pos.size else 0.0
    return np.isfinite(g) & (g <= cfg.zero_grad_rel_tol * ref)


def detect_advantage_degeneracy(run: RunLog, cfg: DiagnoseConfig) -> ModeResult:
    """Advantage-degeneracy detector.

    Args:
        run: the run (needs ``frac_zero_std`` or ``reward_std``; ``grad_norm`` is used when present).
        cfg: thresholds.

    Returns:
        ModeResult with evidence ``frac_zero_std late mean`` (>= ``frac_zero_std_late``),
        ``reward_std late/max ratio`` (<= ``reward_std_collapse_ratio``) and ``grad_norm late zero
        fraction`` (>= ``zero_grad_fraction``).
    """
    ev: list[Evidence] = []
    episodes: list[tuple[float, float]] = []
    panel: dict = {}
    have_fzs = run.count("frac_zero_std") >= cfg.min_points
    have_std = run.count("reward_std") >= cfg.min_points
    g = group_size(run)
    have_est = not (have_fzs or have_std) and g is not None and _binary_range(run, cfg)
    if not (have_fzs or have_std or have_est):
        why = _why_no_estimate(run, cfg, g) if run.count("reward_mean") else ""
        return ModeResult(MODE, "insufficient_data",
                          reason=f"needs >= {cfg.min_points} points of frac_zero_std or reward_std "
                                 f"(has {run.count('frac_zero_std')} and {run.count('reward_std')}), or a 0/1 "
                                 f"mean reward and the group size G" + (f" ({why})" if why else ""))
    if have_est:
        s, r = run.series("reward_mean")
        ok = np.isfinite(r)
        s, r = s[ok], r[ok]
        _, late = edge_windows(r.size, cfg.edge_fraction, cfg.min_window_points)
        p = float(np.mean(r[late]))
        est = zero_std_fraction(p, g)
        ev.append(make_evidence(
            "reward_mean", s[late],
            f"estimated zero-variance group fraction p^G + (1-p)^G at late mean reward p = {p:.3g}, G = {g} "
            "(assumes a 0/1 reward; a lower bound when pass rates differ across prompts)",
            est, cfg.frac_zero_std_late, ">=", kind="fraction",
            label=f"estimated zero-variance group fraction (p = {p:.3g}, G = {g})"))
        f_all = np.array([zero_std_fraction(float(x), g) for x in centred_mean(r, max(1, cfg.min_window_points))])
        episodes += episodes_from_mask(s, f_all >= cfg.frac_zero_std_late, min_len=2)
        panel["estimated_frac_zero_std"] = (s, f_all)
    if have_fzs:
        s, v = run.series("frac_zero_std")
        _, late = edge_windows(v.size, cfg.edge_fraction, cfg.min_window_points)
        ev.append(make_evidence("frac_zero_std", s[late], "late mean", float(np.mean(v[late])),
                                cfg.frac_zero_std_late, ">=", kind="fraction"))
        ev.append(make_evidence("frac_zero_std", s, "fraction of steps >= threshold",
                                float(np.mean(v >= cfg.frac_zero_std_late))))
        smooth = centred_mean(v, max(1, cfg.min_window_points))
        episodes += episodes_from_mask(s, smooth >= cfg.frac_zero_std_late, min_len=2)
        panel["frac_zero_std"] = (s, v)
    if have_std:
        s, v = run.series("reward_std")
        v = np.abs(v)
        w = clip_window(v.size, cfg.edge_fraction, cfg.min_window_points, cfg.early_points)
        _, late = edge_windows(v.size, cfg.edge_fraction, cfg.min_window_points)
        # largest windowed median over the run (the variance the run started with or reached)
        # (every window at once: one median call per step costs seconds on a long log)
        med = (np.median(np.lib.stride_tricks.sliding_window_view(v, w), axis=1) if 0 < w <= v.size
               else np.array([np.median(v[:w])]))
        ref = float(np.max(med)) if med.size else 0.0
        late_med = float(np.median(v[late]))
        ratio = 0.0 if ref == 0.0 else late_med / ref
        ev.append(make_evidence("reward_std", s[late], "late median / max windowed median", ratio,
                                cfg.reward_std_collapse_ratio, "<=", kind="ratio"))
        panel["reward_std"] = (s, v)
    if run.count("grad_norm") >= cfg.min_points:
        s, g = run.series("grad_norm")
        zero = _zero_grad_mask(g, cfg)
        _, late = edge_windows(g.size, cfg.edge_fraction, cfg.min_window_points)
        # the whole second half: zero-gradient steps are intermittent in real logs
        half = slice(g.size // 2, g.size)
        frac = float(np.mean(zero[half]))
        e = make_evidence("grad_norm", s[half], "fraction of zero grad norms (2nd half)", frac,
                          cfg.zero_grad_fraction, ">=", kind="fraction")
        if have_fzs or have_std or have_est:
            # zero gradients alone are ambiguous (a saturated softmax, masked losses): with a variance
            # column logged they support the verdict but do not make it
            e = e._replace(role="supporting")
        ev.append(e)
        ev.append(make_evidence("grad_norm", s, "number of zero grad norms", float(zero.sum())))
        episodes += episodes_from_mask(s, zero, min_len=1) if frac >= cfg.zero_grad_fraction else []
        panel["grad_norm"] = (s, g)
        panel["zero_grad_steps"] = s[zero]
    return finish_result(MODE, ev, episodes, panel)

