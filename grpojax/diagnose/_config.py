"""Thresholds of the failure-mode detectors: one named, documented, overridable dataclass.

Override any field with ``dataclasses.replace(DEFAULT_CONFIG, field=value)`` or
``DiagnoseConfig(field=value)``; ``grpojax diagnose --set field=value`` does the same from the
command line.

How the defaults were chosen (``experiments/failure_benchmark.py --quick``: 60 labelled softmax-bandit
runs, 10 per failure mode and 20 healthy, every run with its own settings; its ``summary.json`` keeps
every run's statistics). For each detector the benchmark records its main statistic on every run. The
threshold sits in the gap between the runs labelled with the mode and the runs not labelled with it
whose other conditions (gates) hold, at the geometric mid-point of the gap unless a rounder value in the
gap reads better. Measured gaps (quick benchmark, 2026-11-29):

- Advantage degeneracy, ``frac_zero_std_late = 0.5`` (late mean of frac_zero_std): labelled
  0.70-0.95, others <= 0.16 (G = 8, p = 0.8 gives 0.8^8 + 0.2^8 = 0.17 exactly). 0.5 reads "half of
  the groups carry no signal". ``reward_std_collapse_ratio = 0.1`` (late median reward_std over the
  largest windowed median) is the same criterion for logs without frac_zero_std. Exactly-zero grad
  norms (``zero_grad_fraction = 0.25`` of the second half, ``zero_grad_rel_tol = 1e-6`` of the median)
  are *supporting* evidence when a variance column exists: a saturated softmax (beta = 0
  concentration) also gives exact zeros in float32, so they cannot decide the verdict on their own.
- Policy concentration, ``entropy_ratio = 0.12`` (late median / initial median entropy): labelled
  0.014-0.064, others >= 0.21 (mid-point 0.116). Gates: the reward rises (``reward_rise_t = 2``
  z-score) and at most ``reward_done_at_entropy_half = 0.9`` of the rise is done when the entropy
  has lost half of its drop.
- Dynamical instability, ``oscillation_growth = 4.5`` (largest block std of the detrended reward over
  the first block's): labelled 9.5-19, others <= 2.14 (mid-point 4.5); significance gate
  ``oscillation_alpha = 0.01`` (Bonferroni-corrected F-test) protects short real logs (50-250 points)
  whose block stds are noisy. ``grad_norm_growth = 10`` and ``is_ratio_max_late = 10`` (an order of
  magnitude) and ``p_unstable = 0.9`` are not exercised by the bandit benchmark (the bandit's
  gradient and ratios stay bounded up to the escape) and are conventional choices.
- Reward hacking, ``decoupling = 0.45`` ((train gain - eval gain) after eval saturated, over the train
  range): labelled 1.1-2.2; the only other run whose significance gates (``decoupling_z = 3``) held
  had 0.18 (mid-point 0.45). ``decoupling_min_range_sd = 5`` keeps flat, noisy train curves from
  producing large ratios (one all-easy run reached 0.63 without it).
- Windows: ``edge_fraction = 0.1`` (late windows are the last 10 % of a metric's points),
  ``oscillation_block_fraction = 0.05`` with ``oscillation_min_block = 8`` points, ``detrend_fraction =
  0.1``.
- Mean-field validity (not a failure mode, not in the confusion matrix): ``validity_r2_min = 0.8``
  (smoothed R^2 of the three-phase law; the real logs reach 0.8-0.9 after a 10-point average on the
  noisy TRL runs) and ``validity_excess_max = 2`` (residual variance over the first-difference noise
  variance: a law that misses a slow component leaves residuals well above the noise; the verl run
  gives 3.3, the TRL runs 0.9).
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class DiagnoseConfig:
    """Thresholds and window settings of every detector (see the module docstring for the why).

    Attributes:
        min_points: fewest finite points a detector's main metric needs (else insufficient_data).
        edge_fraction: size of the early/late windows as a fraction of the metric's points.
        min_window_points: fewest points in an early/late window.
        frac_zero_std_late: advantage degeneracy when the late mean of frac_zero_std is >= this.
        reward_std_collapse_ratio: ... or late median reward_std / max windowed median <= this.
        zero_grad_fraction: ... or the late fraction of (numerically) zero grad norms is >= this.
        zero_grad_rel_tol: a grad norm <= this x the median positive grad norm counts as zero.
        entropy_ratio: policy concentration needs late/initial entropy <= this ...
        reward_rise_t: ... and the reward's rise z-score >= this (also the hacking detector's gate on the
            train slope t-statistic) ...
        reward_done_at_entropy_half: ... and at most this fraction of the rise done at the entropy
            half-life.
        oscillation_growth: instability when the largest block std of the detrended reward over the
            first block's is >= this ...
        oscillation_block_fraction: ... blocks of this fraction of the points ...
        oscillation_min_block: ... and at least this many points (also the smallest detrending window) ...
        oscillation_alpha: ... and the Bonferroni-corrected one-sided F-test has p <= this.
        detrend_fraction: moving-average window (fraction of the points) used for detrending.
        grad_norm_growth: instability when late/early median grad norm >= this.
        is_ratio_max_late: instability when the late median of is_ratio_max >= this.
        p_unstable: instability when a Bayesian fit's P(C <= 0) >= this.
        hacking_end_fraction: fraction of the eval points (at least 2) averaged as "the end".
        min_eval_points: fewest eval points overall for the hacking detector.
        decoupling: reward hacking when, after eval saturated, (train gain - eval gain) / train range
            >= this ...
        decoupling_z: ... and the gap and the train gain z-scores >= this.
        decoupling_min_range_sd: the train range used to normalise is at least this many per-step
            noise standard deviations.
        validity_r2_min: mean field valid only if smoothed R^2 of the oscillator law >= this ...
        validity_excess_max: ... and residual variance / noise variance <= this.
        validity_min_signal: insufficient_data when the noise ceiling (1 - noise var / total var) is
            below this: no trend above the sampling noise to fit.
        validity_smooth: moving-average window (points) for the smoothed R^2.
    """

    min_points: int = 8
    edge_fraction: float = 0.1
    min_window_points: int = 3
    # advantage degeneracy
    frac_zero_std_late: float = 0.5
    reward_std_collapse_ratio: float = 0.1
    zero_grad_fraction: float = 0.25
    zero_grad_rel_tol: float = 1e-6
    # policy concentration
    entropy_ratio: float = 0.12
    reward_rise_t: float = 2.0
    reward_done_at_entropy_half: float = 0.9
    # dynamical instability
    oscillation_growth: float = 4.5
    oscillation_block_fraction: float = 0.05
    oscillation_min_block: int = 8
    oscillation_alpha: float = 0.01
    detrend_fraction: float = 0.1
    grad_norm_growth: float = 10.0
    is_ratio_max_late: float = 10.0
    p_unstable: float = 0.9
    # reward hacking
    hacking_end_fraction: float = 0.2
    min_eval_points: int = 4
    decoupling: float = 0.45
    decoupling_z: float = 3.0
    decoupling_min_range_sd: float = 5.0
    # mean-field validity
    validity_r2_min: float = 0.8
    validity_excess_max: float = 2.0
    validity_min_signal: float = 0.1
    validity_smooth: int = 10

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if not isinstance(v, (int, float)) or v != v or v < 0:
                raise ValueError(f"DiagnoseConfig.{f.name} must be a non-negative number, got {v!r}")
        if not 0 < self.edge_fraction <= 0.5:
            raise ValueError(f"DiagnoseConfig.edge_fraction must be in (0, 0.5], got {self.edge_fraction}")
        if not 0 < self.hacking_end_fraction < 1:
            raise ValueError("DiagnoseConfig.hacking_end_fraction must be in (0, 1), got "
                             f"{self.hacking_end_fraction}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **overrides: Any) -> "DiagnoseConfig":
        """A copy with ``overrides``; unknown names raise ``ValueError`` listing the valid ones."""
        names = {f.name for f in dataclasses.fields(self)}
        bad = sorted(set(overrides) - names)
        if bad:
            raise ValueError(f"unknown DiagnoseConfig field(s) {bad}; valid: {sorted(names)}")
        cast = {k: type(getattr(self, k))(v) for k, v in overrides.items()}
        return dataclasses.replace(self, **cast)


DEFAULT_CONFIG = DiagnoseConfig()
