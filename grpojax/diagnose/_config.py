"""Thresholds of the failure-mode detectors: one named, documented, overridable dataclass.

Override any field with ``DEFAULT_CONFIG.replace(field=value)`` or ``DiagnoseConfig(field=value)``
(a validated, frozen :class:`grpojax._config.Config`: every threshold is a finite number >= 0, unknown
names are refused); ``grpojax diagnose --set field=value`` does the same from the command line.

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
- Reward collapse (instability's escape on real runs, where the run is not cut at the escape):
  ``collapse_lost_fraction = 0.8`` of the gain lost by the end after a gain of
  ``collapse_min_rise_sd = 3`` noise sd. The three collapsed runs of the corpus lose 1.0-2.0 of their
  gain; runs that plateau lose < 0.3 (noise around the plateau).
- Entropy blow-up (the other escape: too large steps push the policy off the coherent text it was
  trained on, and token entropy grows instead of falling): ``entropy_blowup_ratio = 3`` (late median
  over initial median entropy). The off-policy run with 16 epochs per rollout reaches 5.1 (0.9 -> 6.9
  nats while its reward falls to exactly zero); every other run of the corpus with an entropy column
  stays <= 2.0 (most fall, to 0.07-0.9 of their start).
- Numerical blow-up (``grpojax.diagnose._blowup``): non-finite values of grad norm, KL, loss,
  reward, entropy or importance ratios; a grad norm or loss ``10 ** blowup_orders = 10^4`` times its
  early level; a KL of ``blowup_kl = 10`` nats per token; an entropy at ``blowup_entropy_rel = 1e-6``
  of its initial level. These are orders of magnitude beyond any working run (healthy grad norms move
  within one or two orders; a per-token KL of 10 nats makes the reference's tokens e^10 times less
  likely), chosen before looking at any run and not tuned.
- Reward hacking, ``decoupling = 0.45`` ((train gain - eval gain) after eval saturated, over the train
  range): labelled 1.1-2.2; the only other run whose significance gates (``decoupling_z = 3``) held
  had 0.18 (mid-point 0.45). ``decoupling_min_range_sd = 5`` keeps flat, noisy train curves from
  producing large ratios (one all-easy run reached 0.63 without it).
- Windows. Every *early* reference is a fixed number of points, never a fraction of the whole run,
  so that a verdict does not change when the same run is logged for longer (a baseline made of the
  first 2 % of the points of a 600-step run covers the first 12 steps, and an entropy that fell
  within 8 steps is then its own baseline). ``initial_points = 3``: the initial level of a curve
  (entropy, reward, response length) is the median of its first 3 points (the fewest whose median
  ignores one outlier; the verl GPG run's entropy is 0.35, 0.30, 0.26 at steps 1-3 and 0.21 at step
  5, so a 5-point median already sits a third of the way down a drop that takes 8 steps). Early windows of noisier metrics (grad norm) have ``early_points = 20`` points or 10 %
  of the points, whichever is smaller (at least ``min_window_points``). Late windows are the last
  ``edge_fraction = 0.1`` of the points (what the run ended in: a flat tail leaves them unchanged).
  Oscillation blocks: 5 % of the points, between ``oscillation_min_block = 8`` and
  ``oscillation_max_block = 25`` points (the first block is the noise baseline); detrending window
  10 % of the points, between 16 and ``detrend_max_points = 50``.
- Training-health detectors (real corpus, ``experiments/diagnose_real_runs.py``, thresholds fixed on
  the tuning half of the source repositories). ``truncation_frac = 0.1``: 10 % of the completions
  cut at the length cap (rldoctor warns at 5 %, calls 15 % critical; the verl GPG run reaches 0.5,
  healthy runs stay at <= 0.05 with spikes of a few steps, hence an 11-point running median).
  ``length_collapse_ratio = 0.2``: the response length fell to a fifth of its initial level (the
  collapsed off-policy run goes from 277 to 5 tokens; healthy runs stay above 0.5).
  ``plateau_fraction = 0.25`` of the run (and at least ``plateau_min_points = 10`` points, or a third of a
  sparse eval series' points) with a
  gain whose 95 % upper confidence bound is below ``plateau_min_gain = 0.05`` of the curve's range.
  The gate is two-sided: a trailing stretch whose gain's 95 % upper bound is below -max(
  ``plateau_decline_sd = 1.5`` robust noise sd, ``plateau_min_gain`` x the range) falls (the mirror of
  the flat side, whose 95 % upper bound must stay below +max(0.05 x range, 1.5 noise sd)); the plateau
  starts after the last such stretch, and a flat stretch the reward fell into is never the main finding.
  ``clip_frac_high = 0.2`` (5-point running median; PPO's own diagnostic is that clip fractions
  above 0.1-0.2 mean too large steps; the collapsed e8 run sits at 0.3-0.9, healthy runs <= 0.05).
  ``kl_bound = 1.0`` nats (a policy this far from its reference is no longer anchored), or
  unbounded growth: the KL of the last third still grows at ``kl_growth_ratio = 0.5`` of the
  average rate and significantly (``kl_growth_t = 3``), from at least ``kl_min_level = 0.01``
  nats. ``grad_spike_z = 8`` robust standard deviations of log grad norm above its running median
  (the 1.4826 x MAD scale; 8 sigma has probability < 1e-14 under Gaussian noise, and rldoctor uses the
  same 8) and ``grad_spike_ratio = 5`` times that median; ``grad_spike_jump = 10``: a single step an order
  of magnitude above its neighbours' median moves the weights ten times as far as they do, and needs only
  a z past the 1 % family-wise Gaussian level over the points scanned (3.7 for 100 points; the z of 8
  decides jumps of 5-10x). ``component_share = 0.9`` of the reward
  variance from one component, or a component that never changes (``component_flat_rel = 1e-6``
  of the largest component range) over at least ``min_points`` points.
- Events (``grpojax.diagnose._events``): a BIC-type penalty ``event_penalty = 3`` noise variances x
  log(points) per change point; an event is a jump of at least ``event_min_size = 4`` noise sd (a
  Gaussian 4-sigma excursion has probability 6e-5 per point) that is significant after a Bonferroni
  correction over the points (``event_min_confidence = 0.95``) and at least ``event_min_range = 0.1`` of
  the series' range (a jump of a tenth of what the metric covers over the run; smaller ones are noise of
  a smooth, well-measured series); the lines either side of a change point use ``event_window = 20``
  points (a fixed number: a run logged for longer keeps its events). Chosen before looking at the real
  corpus, not tuned.
- Collapse (``grpojax.diagnose._collapse``): the reward loses ``collapse_drop_fraction = 0.5`` of its rise
  within ``collapse_window = 0.1`` of the run and stays down, after a rise of ``collapse_rise_sd = 2``
  noise sd: the wording of the collapse labelling rule (``benchmarks/collapse/README.md``), written before
  the detector ran. The rise is also at least ``collapse_min_rise = 0.05`` of the curve's largest magnitude
  (a rise worth losing: ``benchmarks/collapse/material_rise_rule.md``, written before it was scored). ``collapse_lookback = 0.25`` of the run before the onset is searched for precursors.
  ``collapse_from_start = True``: a non-negative curve that logged no rise before its fall (a resumed
  run, a run started at a plateau) is judged against 0 with the same thresholds
  (``benchmarks/collapse/from_start_rule.md``, written before it was scored).
  ``length_drop_ratio = 0.4``: a response length that drops in one event to 40 % of its median so far (a
  crash of 60 %) is a length pathology whatever the run's end shows.
- Advice: ``zero_std_target = 0.25``, the fraction of zero-variance groups the degeneracy advice aims
  at when it proposes a group size.
- Mean-field validity (not a failure mode, not in the confusion matrix): ``validity_r2_min = 0.8``
  (smoothed R^2 of the three-phase law; the real logs reach 0.8-0.9 after a 10-point average on the
  noisy TRL runs) and ``validity_excess_max = 2`` (residual variance over the first-difference noise
  variance: a law that misses a slow component leaves residuals well above the noise; the verl run
  gives 3.3, the TRL runs 0.9).
"""

from __future__ import annotations

from pydantic import Field, model_validator

from grpojax._config import Config, Finite, Int


class DiagnoseConfig(Config):
    """Thresholds and window settings of every detector (see the module docstring for the why).

    Attributes:
        min_points: fewest finite points a detector's main metric needs (else insufficient_data).
        edge_fraction: size of the early/late windows as a fraction of the metric's points.
        min_window_points: fewest points in an early/late window.
        initial_points: points whose median is a curve's initial level.
        early_points: most points in an early window (grad norm reference).
        frac_zero_std_late: advantage degeneracy when the late mean of frac_zero_std is >= this.
        reward_std_collapse_ratio: ... or late median reward_std / max windowed median <= this.
        zero_grad_fraction: ... or the late fraction of (numerically) zero grad norms is >= this.
        zero_grad_rel_tol: a grad norm <= this x the median positive grad norm counts as zero.
        entropy_ratio: policy concentration needs late/initial entropy <= this ...
        reward_rise_t: ... and the reward's rise z-score >= this ...
        reward_done_at_entropy_half: ... and at most this fraction of the rise done at the entropy
            half-life.
        oscillation_growth: instability when the largest block std of the detrended reward over the
            first block's is >= this ...
        oscillation_block_fraction: ... blocks of this fraction of the points ...
        oscillation_min_block: ... and at least this many points (twice this is the smallest detrending window) ...
        oscillation_max_block: ... and at most this many points ...
        oscillation_alpha: ... and the Bonferroni-corrected one-sided F-test has p <= this.
        detrend_fraction: moving-average window (fraction of the points) used for detrending ...
        detrend_max_points: ... at most this many points.
        grad_norm_growth: instability when late/early median grad norm >= this.
        is_ratio_max_late: instability when the late median of is_ratio_max >= this.
        p_unstable: instability when a Bayesian fit's P(C <= 0) >= this.
        collapse_lost_fraction: instability when the run lost >= this fraction of its reward gain by the end ...
        collapse_min_rise_sd: ... after a gain of at least this many per-step noise standard deviations.
        entropy_blowup_ratio: instability when the late/initial median entropy is >= this.
        blowup_orders: numerical blow-up when grad_norm or the loss reaches 10**this times its early level.
        blowup_kl: numerical blow-up when the KL reaches this many nats.
        blowup_entropy_rel: numerical blow-up when the entropy falls to this fraction of its initial level.
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
        truncation_frac: length pathology when the running median of response_clip_frac is >= this ...
        length_collapse_ratio: ... or the late/initial median response length is <= this.
        plateau_fraction: learning plateau when the trailing flat stretch covers >= this of the run ...
        plateau_min_points: ... and at least this many points (a sparse eval series: a third of its points, >= 4) ...
        plateau_min_gain: ... with the 95 % upper bound of its gain below this x the curve's range.
        plateau_decline_sd: a trailing stretch is falling, not flat, when the 95 % upper bound of its gain
            is below -(this many robust noise sd, or ``plateau_min_gain`` x the range, whichever is larger);
            a flat stretch reached by such a fall is never the main finding.
        clip_frac_high: clip saturation when the running median of clip_frac is >= this.
        kl_bound: KL drift when the late median KL is >= this (nats) ...
        kl_growth_ratio: ... or the last third's KL slope is >= this x the run's mean slope ...
        kl_growth_t: ... with a slope t-statistic >= this ...
        kl_min_level: ... from a late median of at least this (nats).
        grad_spike_z: gradient spike when log grad norm is >= this many robust sd above its running median ...
        grad_spike_ratio: ... and the grad norm is >= this x that median.
        grad_spike_jump: a grad norm >= this x its running median is a spike with a robust z past the
            1 % family-wise Gaussian level over the points scanned (not grad_spike_z).
        component_share: reward imbalance when one component carries >= this of the reward variance ...
        component_flat_rel: ... or a component's range is <= this x the largest component range.
        zero_std_target: fraction of zero-variance groups the degeneracy advice's group size aims at.
        event_penalty: a change point is kept while it lowers the squared error by more than this x noise^2
            x log(points) (binary segmentation; noise from the MAD of the first differences).
        event_min_points: fewest finite points of a series for segmentation (fewer: a one-line note).
        event_min_segment: fewest points between two change points.
        event_window: the lines on each side of a change point use at most this many points.
        event_min_size: an event's jump is at least this many noise sd ...
        event_min_confidence: ... with at least this confidence (Bonferroni over the points) ...
        event_max_points: longer series are averaged in blocks down to this many points.
        event_min_range: ... and at least this fraction of the series' 5-95 % range.
        collapse_drop_fraction: collapse when the reward (or eval) loses at least this fraction of its rise ...
        collapse_window: ... within this fraction of the run's points ...
        collapse_rise_sd: ... after a rise of at least this many per-step noise sd ...
        collapse_min_rise: ... and of at least this fraction of the curve's largest magnitude |y|, and stays
            down.
        collapse_lookback: a precursor is an event of another metric at most this fraction of the run
            before the collapse onset.
        collapse_from_start: for a curve that never goes below 0 and logged no rise before its fall (a
            resumed run, a run started at a plateau), also judge a fall from the level it held, measured
            from 0 (same fraction, window and noise thresholds).
        length_drop_ratio: length pathology when the response length drops in one event to at most this
            fraction of its median before the event.
    """

    min_points: Int = Field(8, ge=3)  # the statistics (regressions, medians of windows) need >= 3 points
    edge_fraction: Finite = Field(0.1, ge=0)
    min_window_points: Int = Field(3, ge=0)
    initial_points: Int = Field(3, ge=0)
    early_points: Int = Field(20, ge=0)
    # advantage degeneracy
    frac_zero_std_late: Finite = Field(0.5, ge=0)
    reward_std_collapse_ratio: Finite = Field(0.1, ge=0)
    zero_grad_fraction: Finite = Field(0.25, ge=0)
    zero_grad_rel_tol: Finite = Field(1e-6, ge=0)
    # policy concentration
    entropy_ratio: Finite = Field(0.12, ge=0)
    reward_rise_t: Finite = Field(2.0, ge=0)
    reward_done_at_entropy_half: Finite = Field(0.9, ge=0)
    # dynamical instability
    oscillation_growth: Finite = Field(4.5, ge=0)
    oscillation_block_fraction: Finite = Field(0.05, ge=0)
    oscillation_min_block: Int = Field(8, ge=0)
    oscillation_max_block: Int = Field(25, ge=0)
    oscillation_alpha: Finite = Field(0.01, ge=0)
    detrend_fraction: Finite = Field(0.1, ge=0)
    detrend_max_points: Int = Field(50, ge=0)
    grad_norm_growth: Finite = Field(10.0, ge=0)
    is_ratio_max_late: Finite = Field(10.0, ge=0)
    p_unstable: Finite = Field(0.9, ge=0)
    collapse_lost_fraction: Finite = Field(0.8, ge=0)
    collapse_min_rise_sd: Finite = Field(3.0, ge=0)
    entropy_blowup_ratio: Finite = Field(3.0, ge=0)
    # numerical blow-up (orders of magnitude, not tuned)
    blowup_orders: Finite = Field(4.0, ge=0)
    blowup_kl: Finite = Field(10.0, ge=0)
    blowup_entropy_rel: Finite = Field(1e-6, ge=0)
    # reward hacking
    hacking_end_fraction: Finite = Field(0.2, ge=0)
    min_eval_points: Int = Field(4, ge=0)
    decoupling: Finite = Field(0.45, ge=0)
    decoupling_z: Finite = Field(3.0, ge=0)
    decoupling_min_range_sd: Finite = Field(5.0, ge=0)
    # mean-field validity
    validity_r2_min: Finite = Field(0.8, ge=0)
    validity_excess_max: Finite = Field(2.0, ge=0)
    validity_min_signal: Finite = Field(0.1, ge=0)
    validity_smooth: Int = Field(10, ge=0)
    # training health
    truncation_frac: Finite = Field(0.1, ge=0)
    length_collapse_ratio: Finite = Field(0.2, ge=0)
    plateau_fraction: Finite = Field(0.25, ge=0)
    plateau_min_points: Int = Field(10, ge=3)  # a least-squares gain needs >= 3 points
    plateau_min_gain: Finite = Field(0.05, ge=0)
    plateau_decline_sd: Finite = Field(1.5, ge=0)
    clip_frac_high: Finite = Field(0.2, ge=0)
    kl_bound: Finite = Field(1.0, ge=0)
    kl_growth_ratio: Finite = Field(0.5, ge=0)
    kl_growth_t: Finite = Field(3.0, ge=0)
    kl_min_level: Finite = Field(0.01, ge=0)
    grad_spike_z: Finite = Field(8.0, ge=0)
    grad_spike_ratio: Finite = Field(5.0, gt=0)
    grad_spike_jump: Finite = Field(10.0, gt=0)
    component_share: Finite = Field(0.9, ge=0)
    component_flat_rel: Finite = Field(1e-6, ge=0)
    zero_std_target: Finite = Field(0.25, ge=0)
    # events (change-point segmentation of every series) and the collapse finding
    event_penalty: Finite = Field(3.0, gt=0)
    event_min_points: Int = Field(12, ge=4)
    event_min_segment: Int = Field(3, ge=2)
    event_window: Int = Field(20, ge=3)
    event_min_size: Finite = Field(4.0, ge=0)
    event_min_confidence: Finite = Field(0.95, ge=0, le=1)
    event_min_range: Finite = Field(0.1, ge=0)
    event_max_points: Int = Field(2000, ge=50)
    collapse_drop_fraction: Finite = Field(0.5, gt=0, le=1)
    collapse_window: Finite = Field(0.1, gt=0, le=1)
    collapse_rise_sd: Finite = Field(2.0, ge=0)
    collapse_min_rise: Finite = Field(0.05, ge=0, le=1)
    collapse_lookback: Finite = Field(0.25, gt=0, le=1)
    collapse_from_start: bool = True
    length_drop_ratio: Finite = Field(0.4, ge=0)

    @model_validator(mode="after")
    def _ranges(self):
        if not 0 < self.edge_fraction <= 0.5:
            raise ValueError(f"edge_fraction={self.edge_fraction!r}; expected a number in (0, 0.5]")
        if not 0 < self.hacking_end_fraction < 1:
            raise ValueError(f"hacking_end_fraction={self.hacking_end_fraction!r}; expected a number in (0, 1)")
        return self


DEFAULT_CONFIG = DiagnoseConfig()
