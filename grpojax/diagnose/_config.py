"""Thresholds of the failure-mode detectors: one named, documented, overridable dataclass.

Override any field with ``dataclasses.replace(DEFAULT_CONFIG, field=value)`` or
``DiagnoseConfig(field=value)``; ``grpojax diagnose --set field=value`` does the same from the
command line.

How the defaults were chosen (``experiments/failure_benchmark.py``, labelled bandit runs, see its
``summary.json`` for the per-run statistics): for each statistic the benchmark records its value on
every labelled run; a threshold is placed between the largest value over the runs *not* labelled
with that mode and the smallest over the runs labelled with it, on the log scale for ratios. The
margins quoted below are those measured distributions (quick benchmark, 5 seeds x varied settings
per label).

- ``edge_fraction = 0.1``: "early" and "late" windows are the first and last 10 % of a metric's
  points (at least ``min_window_points``). Long enough to average the per-step sampling noise of a
  G = 4..16 group, short enough that the late window sits after the transient of every healthy run.
- Advantage degeneracy. ``frac_zero_std_late >= 0.5``: at least half the groups give 0/0 advantages
  (no gradient signal) late in training. All-easy / all-hard bandit runs sit at 0.9-1.0; healthy
  controls (p* = 0.5..0.8, G >= 8) at <= 0.2 (for G = 8 and p = 0.8 the exact value is
  0.8^8 + 0.2^8 = 0.17). ``reward_std_collapse_ratio <= 0.1``: late median reward_std / largest
  windowed median. ``zero_grad_fraction >= 0.25``: fraction of late steps whose grad norm is below
  ``zero_grad_rel_tol`` times the run's median positive grad norm (or exactly 0).
- Policy concentration. ``entropy_ratio <= 0.2``: late median entropy / initial median entropy. A
  beta = 0 bandit driven to a single arm ends at < 0.05; healthy runs with a KL anchor keep
  entropy at its fixed-point value (ratio > 0.4). ``reward_rise_t >= 2``: the reward must still
  rise (least-squares slope t-statistic) over the part of the run after entropy fell below half its
  initial value; otherwise entropy loss at a reward plateau is ordinary convergence.
- Dynamical instability. ``oscillation_growth >= 2.5``: std of the detrended reward in the late
  window / in the early window (detrended with a centred moving average over
  ``detrend_fraction`` of the run). Healthy and other failure runs: <= 1.6; lag past the exact
  threshold: >= 4 (the limit cycle grows out of the noise floor). ``grad_norm_growth >= 10`` and
  ``is_ratio_max_late >= 10``: gradient norm or importance ratio growing by an order of magnitude
  is divergence, not noise. ``p_unstable >= 0.9``: posterior probability of C <= 0 from a
  Bayesian fit when one is given.
- Reward hacking. On the late ``hacking_late_fraction`` of the run, ``decoupling >= 0.2``: train
  reward gain minus eval reward gain, in units of the train reward's 5-95 % range, and the
  difference of the two slopes must be significant (``decoupling_z >= 3``). A proxy arm paid in
  training drives decoupling to 0.5-1.5 (eval falls while train rises); healthy controls stay
  within +-0.1.
- Mean-field validity. ``validity_r2_min = 0.8`` (R^2 of the three-phase oscillator law on the
  reward curve after a moving average of ``validity_smooth`` points) and
  ``validity_rho_max = 0.5`` (lag-1 autocorrelation of the raw residuals: above it more than half of
  the residual variance is systematic misfit rather than sampling noise).
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
    oscillation_growth: float = 3.0
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
    decoupling: float = 0.2
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
