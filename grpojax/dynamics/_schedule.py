"""AdamW as preconditioned heavy ball, and the stability margin along a learning-rate schedule.

**Adam as heavy ball.** Adam's first moment m ← β₁ m + (1 − β₁) g with θ ← θ − η m̂ / (sqrt(v̂) + ε) is,
after writing m = (1 − β₁) u, the heavy-ball update u ← β₁ u + g, θ ← θ − η (1 − β₁) u / (sqrt(v̂) + ε).
Near the plateau the second moment v̂ tracks E[g²] = σ²/B + ḡ² (per-sample noise σ² over B samples per
step, mean gradient ḡ). When v̂ changes slowly compared with the oscillation (1 − β₂ small; β₂ = 0.999
averages over ~1000 steps) and the preconditioner is taken per coordinate (diagonal), the linearised update
is heavy ball with

    μ = β₁,    η_hb = η (1 − β₁) / (sqrt(v) + ε)    (the curvature K in the raw gradient's units).

Without a gradient scale the preconditioner is 1: the curvature must then already be in Adam's units
(K / sqrt(v), what a fit of a run of that optimizer measures). AdamW's decoupled weight decay
θ ← θ − η λ θ adds η λ to the instant term a₀ = η_hb K_0 of the recurrence, i.e. K_0 gains
λ (sqrt(v) + ε) / (1 − β₁); written exactly, the decay also scales the e[n−1] coefficient μ by (1 − η λ),
a relative change η λ that is neglected (η λ ≪ 1 − β₁ in every practical setting).

Where the reduction is weak: (1) v is not a constant: it contains the error's own gradient, so near and
above the threshold the preconditioner grows with the oscillation (the gain law below), and when the mean
gradient dominates the noise (ḡ² ≫ σ²/B) the update becomes sign-like, m̂/sqrt(v̂) ≈ ±1; (2) in the
first steps the bias corrections multiply the step by 1 / (1 − β₁^t) (10× at t = 1 for β₁ = 0.9, below
1.05 after 28 steps): a handful of steps too few for a frozen-coefficient margin to mean growth, so they
are counted (``bias_corrected_steps``) but left out of the margin.

**Adam's preconditioner follows the error (the gain law).** v̂ averages the whole gradient, the error's
own part included: v = σ²/B + E[(K_0 e_n + K_d e_b(n))²] at the plateau. The second term is the stationary
fluctuation of the linearised oscillator driven by the noise, and it grows without bound as η_hb reaches
η*_hb. Solved self-consistently (quasi-static: v̂ settles, 1 − β₂ small against the schedule's rate; e
Gaussian; ε ≪ sqrt(v)), with f = η / critical_lr (critical_lr: the threshold at the noise floor v₀ = σ²/B)
and r = sqrt(v / v₀):

    r² = Γ(f η*_hb / r),    Γ(η_hb) = 1 + ⟨(K_0 e + K_d e_b)²⟩ / (σ²/B)

(⟨·⟩ the stationary second moment, averaged over a refresh period, of the oscillator at step η_hb; from the
discrete Lyapunov equation of the escape model). Γ → ∞ as η_hb → η*_hb, so the root always has
η_hb = f η*_hb / r < η*_hb: **a linearised Adam run never crosses the threshold**. Below critical_lr the
preconditioner is inflated a little (r = 1.2 .. 1.5 in the softmax bandit between 0.5 and 1× critical_lr);
above it r ≈ f, i.e. sqrt(v) ≈ sqrt(v₀)·lr/critical_lr, the effective step stays just below η*_hb and the
oscillation's amplitude grows in proportion to the lr (:func:`adam_gain`). critical_lr is therefore the knee
of that gain law (where the oscillation, not the noise, starts to set the step), not a divergence. The run
leaves the plateau only once the oscillation reaches the edge of the basin where the linearisation stops
(about 2.5× critical_lr in the softmax bandit): "Adam's escape" below.

**Adam's escape** (:func:`adam_escape`, :func:`adam_escape_along`). With v̂ replaced by its expectation
r² v₀, Adam's linearised update is the heavy-ball recurrence at the step η_hb / r with noise v₀ per step,
the recurrence the escape model solves; its stationary error variance there is the one ``adam_gain``
solved for (equal to rounding). So P(escape) of Adam at lr = f × critical_lr is the escape model's at the
step f η*_hb / r(f) (the weight decay's K_0 times r, since lr λ bypasses the preconditioner), and its onset
(P = level) is f = s r with s the frozen-step onset over η*_hb and r = sqrt(Γ(s η*_hb)). Along a schedule
the exits are counted from ``adam_along_schedule``'s own moments (variance and lag-one covariance per
step, the escape model's bivariate-normal count): during a warmup the modelled step exceeds η*_hb for a
while, where a frozen-step exit rate is infinite. Weak where the escape model is (exits counted as
independent: too high near the threshold with β₁ = 0.9, where exits cluster) and where v̂ fluctuates with
the run's own excursions (left out by the mean field); ``docs/model/schedules.md`` has the measurements.

**Along a schedule** (:func:`adam_along_schedule`). When the lr moves on the scale of 1 / (1 − β₂) steps
(a cosine decay over a few thousand steps with β₂ = 0.999), v̂ does not settle. The linearised update on
(e, u, lagged errors), driven by noise of variance v₀ per step, is then propagated in its second moments
P_t exactly, with v̂ replaced by its expectation: v ← β₂ v + (1 − β₂)(v₀ + ⟨(K_0 e + K_d e_b)²⟩_t), and the
step lr(t)(1 − β₁)/sqrt(v̂_t) (with the first moment's bias correction) sets the next map. While an
oscillation grows, the effective step can exceed η*_hb for a while; v̂ then catches up. At a constant lr
this settles to the gain law.

**Schedules.** The shapes are those of ``transformers.get_scheduler`` (TRL's ``lr_scheduler_type``):
``constant``; ``constant_with_warmup``; ``linear`` (warmup, then linear decay to 0 at the last step);
``cosine`` (warmup, then half a cosine to 0). The margin along the schedule is the frozen-coefficient one,
margin(t) = 1 − η(t)/η* with the exact η* of :func:`exact_critical_eta`; its minimum sits at the peak. The
advised peak is η*·(1 − margin)/max_t shape(t). The frozen-coefficient growth Σ log ρ(η(t)) over the
steps above η* (largest over any stretch) says how far a run that crosses η* only briefly actually grows.
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np

from grpojax._checks import check_choice
from grpojax._defaults import ADVICE_MARGIN, LAG
from grpojax._errors import InvalidValueError

__all__ = ["SCHEDULES", "AdamEscape", "AdamGain", "AdamPath", "AdamReduction", "ScheduleMargin", "adam_along_schedule",
           "adam_escape", "adam_escape_along", "adam_gain", "adam_to_heavy_ball", "schedule_shape", "schedule_margin"]

from grpojax._defaults import SCHEDULES  # noqa: E402  (named once, for the command line without JAX)
"""Learning-rate schedule names (as ``transformers`` / TRL name them)."""

ADAM_PATH_MAX_LAG = 64
"""Largest constant lag for which :func:`schedule_margin` propagates Adam's preconditioner (a (d+2)² state)."""
_BIAS_TOL = 1.05  # a bias-corrected step counts as "early" while 1/(1 − β₁^t) exceeds this


def _num(name: str, value, ok, expected: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise InvalidValueError(f"{name} must be a number {expected}, got {value!r}") from None
    if not (math.isfinite(x) and ok(x)):
        raise InvalidValueError(f"{name} must be {expected}, got {value!r}")
    return x


def warmup_steps_of(steps: int, warmup_steps: int = 0, warmup_ratio: float | None = None) -> int:
    """Warmup in steps: ``warmup_steps``, or ceil(ratio × steps) when a ratio is given (as transformers does)."""
    if warmup_ratio is not None:
        if warmup_steps:
            raise InvalidValueError("give warmup_steps or warmup_ratio, not both")
        r = _num("warmup_ratio", warmup_ratio, lambda x: 0 <= x <= 1, "in [0, 1]")
        return int(math.ceil(r * steps))
    w = _num("warmup_steps", warmup_steps, lambda x: x >= 0 and x == int(x), "an integer >= 0")
    return int(w)


def schedule_shape(name: str, steps: int, *, warmup_steps: int = 0, warmup_ratio: float | None = None) -> np.ndarray:
    """The schedule's multiplier of the peak lr at optimizer steps 0 .. steps − 1 (float64, in [0, 1]).

    Args:
        name: one of :data:`SCHEDULES`.
        steps: planned optimizer steps T ≥ 1.
        warmup_steps / warmup_ratio: linear warmup from 0 over this many steps (``constant`` has none).

    Example:
        >>> schedule_shape("linear", 4, warmup_steps=2).tolist()
        [0.0, 0.5, 1.0, 0.5]
    """
    name = check_choice("schedule", name, SCHEDULES)
    steps = int(_num("steps", steps, lambda x: x >= 1 and x == int(x), "an integer >= 1 (planned optimizer steps)"))
    w = warmup_steps_of(steps, warmup_steps, warmup_ratio)
    t = np.arange(steps, dtype=np.float64)
    if name == "constant":
        return np.ones(steps)
    warm = t / max(1, w)
    if name == "constant_with_warmup":
        decay = np.ones(steps)
    else:
        prog = (t - w) / max(1, steps - w)
        decay = np.maximum(0.0, 1.0 - prog) if name == "linear" else np.maximum(0.0, 0.5 * (1.0 + np.cos(np.pi * prog)))
    return np.where(t < w, warm, decay)


class AdamReduction(NamedTuple):
    """Adam / AdamW mapped onto the heavy-ball oscillator (module notes).

    Attributes:
        step_scale: η_hb / η = (1 − β₁) / (sqrt(v) + ε) (``1 − β₁`` without a gradient scale).
        mu: the heavy-ball momentum, β₁.
        k_instant_extra: what the decoupled weight decay adds to K_0, λ (sqrt(v) + ε) / (1 − β₁)
            (curvature units; ``λ / (1 − β₁)`` without a gradient scale).
        sqrt_v: the preconditioner sqrt(v) used (None: curvature in Adam's units).
    """

    step_scale: float
    mu: float
    k_instant_extra: float
    sqrt_v: float | None


def adam_to_heavy_ball(*, beta1: float, beta2: float = 0.999, eps: float = 1e-8, weight_decay: float = 0.0,
                       grad_rms: float | None = None, noise: float | None = None, samples_per_step: int = 1,
                       mean_grad: float = 0.0) -> AdamReduction:
    """Adam / AdamW settings (and the gradient's scale) → the heavy-ball η_hb/η, μ and the extra K_0.

    Args:
        beta1, beta2, eps, weight_decay: the optimizer's settings (β₂ only checked: the reduction assumes
            v settles, 1 − β₂ small against the oscillation's rate).
        grad_rms: sqrt(E[g²]) of the gradient along the error coordinate; or ``noise`` σ² per sample with
            ``samples_per_step`` B and the ``mean_grad`` ḡ: v = σ²/B + ḡ². Neither: curvature in Adam's units.

    Example:
        >>> r = adam_to_heavy_ball(beta1=0.9, grad_rms=0.5, eps=0.0, weight_decay=0.1)
        >>> round(r.step_scale, 6), r.mu, round(r.k_instant_extra, 6)
        (0.2, 0.9, 0.5)
    """
    b1 = _num("beta1", beta1, lambda x: 0 <= x < 1, "in [0, 1) (Adam's first-moment decay)")
    _num("beta2", beta2, lambda x: 0 <= x < 1, "in [0, 1) (Adam's second-moment decay)")
    eps = _num("eps", eps, lambda x: x >= 0, ">= 0 (Adam's epsilon)")
    lam = _num("weight_decay", weight_decay, lambda x: x >= 0, ">= 0 (decoupled weight decay)")
    if grad_rms is not None and noise is not None:
        raise InvalidValueError("give grad_rms or noise (with samples_per_step, mean_grad), not both")
    if grad_rms is not None:
        sv = _num("grad_rms", grad_rms, lambda x: x > 0, "> 0 (root mean square of the gradient)")
    elif noise is not None:
        s2 = _num("noise", noise, lambda x: x >= 0, ">= 0 (per-sample gradient variance)")
        b = _num("samples_per_step", samples_per_step, lambda x: x >= 1, ">= 1")
        g = _num("mean_grad", mean_grad, lambda x: True, "finite")
        sv = math.sqrt(s2 / b + g * g)
        if not sv + eps > 0:
            raise InvalidValueError("noise = 0, mean_grad = 0 and eps = 0 leave Adam's step undefined (0/0)")
    else:
        return AdamReduction(1.0 - b1, b1, lam / (1.0 - b1), None)
    den = sv + eps
    return AdamReduction((1.0 - b1) / den, b1, lam * den / (1.0 - b1), sv)


class AdamGain(NamedTuple):
    """Adam's self-consistent preconditioner at a frozen lr (module notes, "the gain law").

    Attributes:
        lr_over_critical: f = lr / critical_lr (critical_lr at the noise-floor v₀).
        rms_ratio: r = sqrt(v / v₀), the settled preconditioner over its noise floor.
        step_fraction: the effective heavy-ball step over the threshold, η_hb / η*_hb = f / r (< 1).
        error_sd: the stationary standard deviation of the error e per unit sqrt(v₀) (in the curvature's
            units: multiply by the gradient's noise floor sqrt(v₀) for e's units).
    """

    lr_over_critical: float
    rms_ratio: float
    step_fraction: float
    error_sd: float


def _gradient_power(eta_hb, mu, k_ref, kd, k0_map, k0_grad, lag):
    """(Γ − 1, Var(e)) per unit noise variance: the stationary ⟨(K_0 e + K_d e_b)²⟩ and ⟨e²⟩ of the oscillator
    at step ``eta_hb`` (update with instant stiffness ``k0_map``, gradient with ``k0_grad``), averaged over a
    refresh period; (inf, inf) when the update is unstable."""
    from grpojax.dynamics._escape import _step_maps, _stationary_start  # noqa: PLC0415

    one = lambda x: np.array([float(x)])  # noqa: E731
    maps = _step_maps(one(eta_hb), one(mu), k_ref, one(kd), one(k0_map), lag)[:, 0]
    period, n, _ = maps.shape
    from scipy.linalg import LinAlgWarning  # noqa: PLC0415

    try:  # next to the threshold the Lyapunov equation is ill-conditioned, but Γ is then huge either way
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LinAlgWarning)
            P, radius = _stationary_start(maps[:, None], one(eta_hb**2), np.zeros(1))  # additive noise
    except np.linalg.LinAlgError:  # on the threshold to rounding: the Lyapunov equation is singular
        return math.inf, math.inf
    if not radius[0] < 1.0:
        return math.inf, math.inf
    P = P[0]
    grad = np.zeros(n)
    grad[0] += k0_grad
    grad[-1 if lag == "periodic" else k_ref] += kd  # periodic: the snapshot s; constant: e_{n−d}
    refreshed = np.array([k0_grad + kd] + [0.0] * (n - 1))  # phase 0 of a period: s := e_n before the step
    g2 = var = 0.0
    for k, A in enumerate(maps):
        c = refreshed if (lag == "periodic" and k == 0) else grad
        g2 += float(c @ P @ c)
        var += float(P[0, 0])
        P = A @ P @ A.T
        P[0, 0] += eta_hb**2
    return g2 / period, var / period


def adam_gain(lr_over_critical: float, k_ref: int, curvature: float, *, adam: AdamReduction, lag: str = LAG,
              k_instant: float = 0.0) -> AdamGain:
    """Adam's settled preconditioner and effective step at lr = f × critical_lr (module notes, "the gain law").

    Solves r² = Γ(f η*_hb / r) for r = sqrt(v / v₀) > max(1, f): the quasi-static answer for a constant lr (a
    schedule that changes slowly against 1 / (1 − β₂) steps). ``k_instant`` is the gradient's own K_0 (the
    weight decay of ``adam`` is added to the update, not to the gradient that v averages).

    Example:
        >>> red = adam_to_heavy_ball(beta1=0.9)
        >>> g = adam_gain(3.0, 4, 0.12, adam=red, lag="periodic", k_instant=0.05)
        >>> 3.0 < g.rms_ratio < 3.5 and 0.9 < g.step_fraction < 1.0
        True
    """
    from scipy.optimize import brentq  # noqa: PLC0415

    from grpojax.dynamics import _stability as dyn  # noqa: PLC0415

    f = _num("lr_over_critical", lr_over_critical, lambda x: x >= 0, ">= 0 (the lr over the critical lr)")
    kd = _num("curvature", curvature, lambda x: x > 0, "> 0 (the stale stiffness K_d)")
    k0 = _num("k_instant", k_instant, lambda x: x >= 0, ">= 0 (the instant stiffness K_0)")
    extra = float(adam.k_instant_extra)
    eta_star = float(dyn.exact_critical_eta(adam.mu, k_ref, kd, lag=lag, k_instant=k0 + extra))
    if f == 0.0:
        return AdamGain(0.0, 1.0, 0.0, 0.0)

    def power(r):  # the weight decay's a₀ = η λ = f η*_hb × extra does not scale with the preconditioner
        eta_hb = f * eta_star / r
        return _gradient_power(eta_hb, adam.mu, k_ref, kd, k0 + extra * r, k0, lag)

    def h(r):
        return r * r - min(1.0 + power(r)[0], 1e300)

    hi = 2.0 * max(1.0, f)  # h(1) = 1 − Γ < 0 (or the update is unstable there): the root is above 1
    while h(hi) <= 0.0:
        if hi > 1e12 * max(1.0, f):  # only the weight decay's own η λ is left, and it alone is unstable
            raise InvalidValueError(f"the decoupled weight decay alone destabilises the update at lr = {f:g} × "
                                    "critical lr (lr × weight_decay too large)")
        hi *= 2.0
    r = float(brentq(h, 1.0, hi, xtol=1e-12 * hi, rtol=1e-10))
    return AdamGain(f, r, f / r, math.sqrt(power(r)[1]))


class AdamPath(NamedTuple):
    """Adam's preconditioner and error along a schedule (module notes, "along a schedule"), per step (T,).

    Attributes:
        rms_ratio: sqrt(E[v̂_t] / v₀), the bias-corrected second moment over its noise floor.
        step_fraction: the effective heavy-ball step over the threshold, lr(t)(1 − β₁)/sqrt(v̂_t) / η*_hb
            (bias correction of the first moment included; above 1 while an oscillation grows).
        error_sd: the standard deviation of e after step t, per unit sqrt(v₀) (as :class:`AdamGain`).
        error_cov: Cov(e after step t, e before it), per unit v₀ (what :func:`adam_escape_along` needs to
            count exits step by step).
    """

    rms_ratio: np.ndarray
    step_fraction: np.ndarray
    error_sd: np.ndarray
    error_cov: np.ndarray


def adam_along_schedule(lr_over_critical, k_ref: int, curvature: float, *, adam: AdamReduction, beta2: float = 0.999,
                        lag: str = LAG, k_instant: float = 0.0) -> AdamPath:
    """Adam's second moment and error variance along a schedule, from rest at the plateau.

    ``lr_over_critical``: lr(t) / critical_lr at each step (critical_lr at the noise floor v₀). The
    linearised update on (e, u, lagged errors) with noise of variance v₀ per step is propagated in its
    second moments exactly, with v̂ replaced by its expectation: E[g_t²] = v₀ + ⟨(K_0 e + K_d e_b)²⟩_t feeds
    v ← β₂ v + (1 − β₂) E[g_t²], and the step lr(t)(1 − β₁)/sqrt(v̂_t)/(1 − β₁^{t+1}) sets the next map. At
    a constant lr it settles to :func:`adam_gain`.

    Example:
        >>> red = adam_to_heavy_ball(beta1=0.9)
        >>> p = adam_along_schedule(np.full(6000, 2.0), 4, 0.12, adam=red, lag="periodic", k_instant=0.05)
        >>> g = adam_gain(2.0, 4, 0.12, adam=red, lag="periodic", k_instant=0.05)
        >>> bool(abs(p.rms_ratio[-1] / g.rms_ratio - 1) < 1e-3)
        True
    """
    from grpojax.dynamics import _stability as dyn  # noqa: PLC0415

    f = np.asarray(lr_over_critical, np.float64)
    if f.ndim != 1 or f.size == 0 or not np.all(np.isfinite(f) & (f >= 0)):
        raise InvalidValueError("lr_over_critical must be a non-empty 1-d array of finite values >= 0 "
                                f"(lr / critical lr per step), got shape {f.shape}")
    kd = _num("curvature", curvature, lambda x: x > 0, "> 0 (the stale stiffness K_d)")
    k0 = _num("k_instant", k_instant, lambda x: x >= 0, ">= 0 (the instant stiffness K_0)")
    b2 = _num("beta2", beta2, lambda x: 0 <= x < 1, "in [0, 1) (Adam's second-moment decay)")
    if lag == "constant" and k_ref > _escape_max_lag():
        raise InvalidValueError(f"k_ref={k_ref} is above the limit {_escape_max_lag()} for a constant lag")
    mu, extra = float(adam.mu), float(adam.k_instant_extra)
    eta_star = float(dyn.exact_critical_eta(mu, k_ref, kd, lag=lag, k_instant=k0 + extra))
    periodic = lag == "periodic"
    n = 3 if periodic else k_ref + 2  # (e, u, s) or (e_n, u, e_{n−1}, …, e_{n−d})
    c = np.zeros(n)
    c[0] = k0
    c[2 if periodic else n - 1] += kd
    b = np.zeros(n)
    P = np.zeros((n, n))
    m2 = 0.0
    out = np.empty((4, f.size))
    for t, ft in enumerate(f):
        if periodic and t % k_ref == 0:  # refresh: s := e
            R = np.eye(n)
            R[2] = 0.0
            R[2, 0] = 1.0
            P = R @ P @ R.T
        m2 = b2 * m2 + (1.0 - b2) * (1.0 + float(c @ P @ c))
        r = math.sqrt(m2 / (1.0 - b2 ** (t + 1)))
        eta = ft * eta_star / r / (1.0 - mu ** (t + 1))  # heavy-ball step, bias-corrected first moment
        A = np.zeros((n, n))
        A[1, 1] = mu  # u' = μ u + g, g = −c·x + ξ
        A[1] -= c
        A[0] = eta * A[1]  # e' = e + η u' − lr λ e
        A[0, 0] += 1.0 - ft * eta_star * extra
        if periodic:
            A[2, 2] = 1.0
        else:
            A[2, 0] = 1.0  # e_{n−1} := e_n, and the older ones shift down
            A[3:, 2:-1] = np.eye(n - 3)
        b[0], b[1] = eta, 1.0
        lag1 = float((A @ P)[0, 0])  # Cov(e_{t+1}, e_t): the noise of step t is independent of x_t
        P = A @ P @ A.T + np.outer(b, b)
        out[:, t] = r, eta / eta_star, math.sqrt(max(P[0, 0], 0.0)), lag1
    return AdamPath(*out)


class AdamEscape(NamedTuple):
    """P(escape) of Adam at a constant lr, at the gain law's effective step (module notes, "Adam's escape").

    Attributes:
        probability: P(the error leaves |e| ≤ basin within ``steps``) of the escape model at the step
            η_hb / r (with v̂ at its gain-law value r² v₀ instead of the noise floor v₀).
        expected_exits: the escape model's expected number of exits at that step.
        rms_ratio, step_fraction: r and the effective step over η*_hb (:class:`AdamGain`).
        onset_lr_over_critical: f = lr / critical_lr at which the probability reaches ``level`` (inf where the
            escape model stays below it up to η*_hb); None when not asked for.
        level: that level (the onset's P, 1/2 by default).
    """

    probability: float
    expected_exits: float
    rms_ratio: float
    step_fraction: float
    onset_lr_over_critical: float | None
    level: float


def adam_escape(lr_over_critical: float, k_ref: int, curvature: float, *, adam: AdamReduction, noise: float,
                basin: float, steps: int, lag: str = LAG, k_instant: float = 0.0, samples_per_step: int = 1,
                level: float = 0.5, onset: bool = True, noise_growth: float = 0.0) -> AdamEscape:
    """P(escape within ``steps``) of Adam at lr = f × critical_lr, with the preconditioner of the gain law.

    The escape model (:func:`grpojax.dynamics.escape_probability`) is evaluated at the self-consistent
    effective step η_hb / r of :func:`adam_gain` (``k_instant`` plus the weight decay's K_0, which scales with
    r), not at the noise-floor step η_hb: v̂ replaced by its expectation, whose stationary error spread is
    the one ``adam_gain`` computes (module notes). ``noise``, ``basin``, ``samples_per_step`` are those of the
    escape model (σ², w, B: v₀ = σ²/B). ``onset``: also solve for the f where P reaches ``level``.
    ``noise_growth`` is passed to the escape model; r stays the additive-noise gain law's (the noise's own
    growth with the state is not fed into v̂).

    Example:
        >>> red = adam_to_heavy_ball(beta1=0.9)
        >>> e = adam_escape(0.9, 4, 0.12, adam=red, noise=1e-4, basin=0.3, steps=1000, lag="periodic",
        ...                 k_instant=0.05)
        >>> e.probability < 0.5 < e.onset_lr_over_critical
        True
    """
    from grpojax.dynamics import _stability as dyn  # noqa: PLC0415
    from grpojax.dynamics._escape import escape_onset, escape_probability  # noqa: PLC0415

    lvl = _num("level", level, lambda x: 0 < x < 1, "in (0, 1) (a probability)")
    k0 = _num("k_instant", k_instant, lambda x: x >= 0, ">= 0 (the instant stiffness K_0)")
    kw = dict(noise=noise, basin=basin, steps=steps, lag=lag, samples_per_step=samples_per_step,
              noise_growth=noise_growth)
    mu, extra = float(adam.mu), float(adam.k_instant_extra)
    g = adam_gain(lr_over_critical, k_ref, curvature, adam=adam, lag=lag, k_instant=k0)
    eta_star = float(dyn.exact_critical_eta(mu, k_ref, float(curvature), lag=lag, k_instant=k0 + extra))

    def at(gain):
        if gain.step_fraction == 0.0:
            return 0.0, 0.0
        est = escape_probability(gain.step_fraction * eta_star, mu, k_ref, curvature,
                                 k_instant=k0 + extra * gain.rms_ratio, **kw)
        return float(est.probability), float(est.expected_exits)

    p, exits = at(g)
    f_on = None
    if onset:
        if extra == 0.0:  # r² = Γ(s η*) at the step fraction s: f = s r follows from the frozen-step onset
            s_on = float(escape_onset(mu, k_ref, curvature, k_instant=k0, level=lvl, **kw)) / eta_star
            if not s_on < 1.0 - 1e-6:
                f_on = math.inf
            elif s_on == 0.0:
                f_on = 0.0
            else:
                f_on = s_on * math.sqrt(1.0 + _gradient_power(s_on * eta_star, mu, k_ref, float(curvature), k0, k0,
                                                              lag)[0])
        else:
            f_on = _adam_onset_with_decay(lambda f: at(adam_gain(f, k_ref, curvature, adam=adam, lag=lag,
                                                                 k_instant=k0))[0], lvl)
    return AdamEscape(p, exits, g.rms_ratio, g.step_fraction, f_on, lvl)


def _adam_onset_with_decay(prob, level: float) -> float:
    """The f where ``prob(f)`` (increasing) reaches ``level``: a bracket doubled upwards from f = 1, then bisection
    in log f to 1e-4 relative (inf when it stays below up to 1e6)."""
    lo, hi = 0.0, 1.0
    while prob(hi) < level:
        lo, hi = hi, 2.0 * hi
        if hi > 1e6:
            return math.inf
    lo = lo if lo > 0 else hi * 1e-3
    if prob(lo) >= level:
        return lo
    while hi / lo > 1.0 + 1e-4:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if prob(mid) < level else (lo, mid)
    return math.sqrt(lo * hi)


def adam_escape_along(path: AdamPath, *, noise: float, basin: float, samples_per_step: int = 1,
                      start: int = 0) -> float:
    """P(escape) along a schedule from Adam's own moments (:func:`adam_along_schedule`), counted from ``start``.

    The error is normal with the path's variance (per unit v₀ = σ²/B: ``noise`` / ``samples_per_step``) and
    lag-one covariance; exits of |e| ≤ ``basin`` are counted at every step t ≥ ``start`` from the bivariate
    normal of (e_t, e_{t+1}), as the escape model counts them, with P = 1 − exp(−Σ hazard) (plus the chance
    of being outside already at ``start``). This follows the transient too: the effective step can exceed
    η*_hb for a while during a warmup, where a frozen-step rate would be infinite.

    Example:
        >>> red = adam_to_heavy_ball(beta1=0.9)
        >>> p = adam_along_schedule(np.full(1000, 0.8), 4, 0.12, adam=red, lag="periodic", k_instant=0.05)
        >>> 0.0 <= adam_escape_along(p, noise=1e-4, basin=0.3) < 1.0
        True
    """
    from grpojax.dynamics._escape import _exit_probability, _outside  # noqa: PLC0415

    v0 = _num("noise", noise, lambda x: x >= 0, ">= 0 (per-sample gradient variance)")
    v0 /= _num("samples_per_step", samples_per_step, lambda x: x >= 1, ">= 1 (samples per optimizer step)")
    w = _num("basin", basin, lambda x: x > 0, "> 0 (half-width of the basin, in the units of e)")
    n = len(path.error_sd)
    t0 = int(_num("start", start, lambda x: 0 <= x < n and x == int(x), f"an integer in [0, {n}) (a step)"))
    var1 = np.asarray(path.error_sd, np.float64) ** 2 * v0  # Var(e_{t+1})
    var0 = np.concatenate([[0.0], var1[:-1]])  # Var(e_t): the path starts at rest at the plateau
    cov = np.asarray(path.error_cov, np.float64) * v0
    z = np.zeros(n - t0)
    with np.errstate(all="ignore"):
        hz = _exit_probability(z, var0[t0:], z, var1[t0:], cov[t0:], np.full(n - t0, w))[:, 1]
        first = float(_outside(0.0, var0[t0], w))
    total = -math.log1p(-min(first, 1.0)) + float(np.sum(np.where(np.isnan(hz), np.inf, hz)))
    return float(-math.expm1(-total))


class ScheduleMargin(NamedTuple):
    """The stability margin along a schedule (learning rates in the user's units).

    Attributes:
        lr: the schedule's lr at every step (T,); ``shape``: lr / peak.
        critical_lr: the exact η* in the user's units (heavy-ball η* / ``step_scale``).
        margin: 1 − lr(t)/critical_lr at every step (T,).
        min_margin, min_margin_step: its smallest value and the first step where it is reached.
        advised_peak_lr: the largest peak with margin ≥ ``required_margin`` at every step.
        required_margin: the margin the advice keeps.
        growth_efolds: the largest frozen-coefficient growth Σ log ρ(η(t)) over any stretch of steps
            (0 when the run stays below η*; ρ the exact per-step spectral radius; nan for a constant lag
            above the eigenvalue size limit). For Adam it holds v at its noise floor: an upper bound, since
            the preconditioner grows with the oscillation (``adam_gain``).
        bias_corrected_steps: Adam only: steps whose bias-correction factor 1/(1 − β₁^{t+1}) exceeds 1.05.
        mu, step_scale, k_instant: what the oscillator used (after the Adam reduction).
        escape_probability: P(escape within the schedule) when a noise and basin are given; else None. Heavy
            ball: quasi-static (the escape model's exit rate at each step's lr, summed). Adam: the gain law's,
            counted from ``adam_path``'s own moments (:func:`adam_escape_along`; None where there is no path).
        adam_path: Adam only: :func:`adam_along_schedule` over the schedule (the preconditioner over its
            noise floor, the effective step over η*_hb and the error's spread at every step); None for heavy
            ball, or a constant lag above ``ADAM_PATH_MAX_LAG``.
    """

    lr: np.ndarray
    shape: np.ndarray
    critical_lr: float
    margin: np.ndarray
    min_margin: float
    min_margin_step: int
    advised_peak_lr: float
    required_margin: float
    growth_efolds: float
    bias_corrected_steps: int
    mu: float
    step_scale: float
    k_instant: float
    escape_probability: float | None
    adam_path: AdamPath | None = None

    def summary(self) -> dict:
        """The scalars, as plain Python values (for JSON and tables)."""
        return dict(critical_lr=self.critical_lr, min_margin=self.min_margin, min_margin_step=self.min_margin_step,
                    peak_lr=float(np.max(self.lr)), advised_peak_lr=self.advised_peak_lr,
                    required_margin=self.required_margin, growth_efolds=self.growth_efolds,
                    bias_corrected_steps=self.bias_corrected_steps, mu=self.mu, step_scale=self.step_scale,
                    k_instant=self.k_instant, escape_probability=self.escape_probability,
                    **self._adam_summary())

    def _adam_summary(self) -> dict:
        p = self.adam_path
        if p is None:
            return dict(adam_rms_gain=None, adam_rms_gain_step=None, adam_max_step_fraction=None)
        i = int(np.argmax(p.rms_ratio))
        late = p.step_fraction[min(self.bias_corrected_steps, p.step_fraction.size - 1):]
        return dict(adam_rms_gain=float(p.rms_ratio[i]), adam_rms_gain_step=i,
                    adam_max_step_fraction=float(np.max(late)))


def _max_stretch(x: np.ndarray) -> float:
    """Largest sum over a contiguous stretch (Kadane); the largest element when every one is negative."""
    best = cur = -np.inf
    for v in x:
        cur = v if cur < 0 else cur + v
        best = max(best, cur)
    return float(best)


def schedule_margin(peak_lr: float, k_ref: int, curvature: float, *, schedule: str = "constant", steps: int,
                    warmup_steps: int = 0, warmup_ratio: float | None = None, mu: float | None = None,
                    lag: str = LAG, k_instant: float = 0.0, adam: AdamReduction | None = None,
                    margin: float = ADVICE_MARGIN, noise: float | None = None, basin: float | None = None,
                    samples_per_step: int = 1, beta2: float = 0.999, batch_reuse: bool = False,
                    noise_growth: float = 0.0) -> ScheduleMargin:
    """The exact stability margin at every step of a schedule, its minimum and the advised peak lr.

    Args:
        peak_lr: the schedule's peak learning rate (the optimizer's lr setting).
        k_ref, curvature, lag, k_instant: as for :func:`exact_critical_eta` (K_d > 0, K_0 ≥ 0, in the
            gradient's units; with ``adam`` and no gradient scale, in Adam's units).
        schedule, steps, warmup_steps, warmup_ratio: the schedule (:func:`schedule_shape`).
        mu: heavy-ball momentum (default 0); or ``adam``: an :class:`AdamReduction` from
            :func:`adam_to_heavy_ball` (then ``mu`` must be None).
        margin: the margin the advised peak keeps (default: the advice's).
        noise, basin, samples_per_step: per-sample gradient variance σ², the basin half-width w and B: give
            both ``noise`` and ``basin`` for P(escape) along the schedule.
        beta2: Adam's β₂, for the preconditioner along the schedule (``adam_path``).
        batch_reuse: the K_ref steps of a refresh period reuse the batch sampled at the refresh (its noise held
            over the period: :func:`grpojax.dynamics.escape_probability`); heavy ball with ``lag="periodic"``
            only (Adam's escape along a schedule has no held-noise model).
        noise_growth: growth c ≥ 0 of the step's noise variance with the error, σ²/B · (1 + c e²)
            (:func:`grpojax.dynamics.escape_probability`); heavy ball only (Adam's escape along a schedule has
            additive noise only).

    Example:
        >>> r = schedule_margin(0.01, 4, 0.5, mu=0.9, schedule="cosine", steps=100, warmup_steps=10)
        >>> r.min_margin_step, round(r.advised_peak_lr / r.critical_lr, 6)
        (10, 0.8)
    """
    from grpojax.dynamics import _stability as dyn  # noqa: PLC0415

    peak = _num("peak_lr", peak_lr, lambda x: x > 0, "> 0 (the schedule's peak learning rate)")
    req = _num("margin", margin, lambda x: 0 <= x < 1, "in [0, 1)")
    if adam is not None and mu is not None:
        raise InvalidValueError("give mu (heavy ball) or adam (an AdamReduction), not both")
    if batch_reuse is not False:
        from grpojax.dynamics._escape import _check_batch_reuse  # noqa: PLC0415

        _check_batch_reuse(batch_reuse, lag)
        if adam is not None and noise is not None and basin is not None:
            raise InvalidValueError("batch_reuse=True is not modelled for Adam's escape along a schedule; "
                                    "give batch_reuse=False with adam")
    c_growth = _num("noise_growth", noise_growth, lambda x: x >= 0, ">= 0 (growth of the noise variance per unit e²)")
    if c_growth > 0 and adam is not None and noise is not None and basin is not None:
        raise InvalidValueError(f"noise_growth={noise_growth!r} is not modelled for Adam's escape along a schedule "
                                "(additive noise only); give noise_growth=0 with adam")
    if adam is not None:
        m, scale, k0 = adam.mu, adam.step_scale, float(k_instant) + adam.k_instant_extra
    else:
        m, scale, k0 = (0.0 if mu is None else float(mu)), 1.0, float(k_instant)
    shape = schedule_shape(schedule, steps, warmup_steps=warmup_steps, warmup_ratio=warmup_ratio)
    lr = peak * shape
    eta_star_hb = float(dyn.exact_critical_eta(m, k_ref, curvature, lag=lag, k_instant=k0))
    crit = eta_star_hb / scale
    marg = 1.0 - lr / crit
    i = int(np.argmin(marg))
    advised = crit * (1.0 - req) / float(np.max(shape)) if np.max(shape) > 0 else math.inf
    a = lr * scale * float(curvature)
    a0 = lr * scale * k0
    if lag == "periodic":
        rho = np.asarray(dyn.spectral_radius_periodic(a, m, k_ref, a0=a0), np.float64)
    elif k_ref <= dyn.EXACT_RADIUS_MAX_LAG:
        rho = np.asarray(dyn.spectral_radius_constant(a, m, k_ref, a0=a0), np.float64)
    else:
        rho = None
    growth = _max_stretch(np.log(np.maximum(rho, 1e-300))) if rho is not None else math.nan
    growth = growth if not growth < 1e-12 else 0.0  # ρ = 1 + rounding at a zero lr
    bias = 0
    if adam is not None and m > 0:
        bias = int(np.sum(1.0 / (1.0 - m ** np.arange(1, steps + 1)) > _BIAS_TOL))
    gain = None
    if adam is not None and (lag == "periodic" or k_ref <= ADAM_PATH_MAX_LAG):
        gain = adam_along_schedule(lr / crit, k_ref, curvature, adam=adam, beta2=beta2, lag=lag, k_instant=k_instant)
    esc = None
    if noise is not None and basin is not None:
        if adam is None:
            esc = _escape_along(lr * scale, m, k_ref, float(curvature), k0, lag, noise, basin, samples_per_step,
                                batch_reuse, c_growth)
        elif gain is not None:  # Adam: from the path's own moments, with v̂ at its gain-law value
            esc = adam_escape_along(gain, noise=noise, basin=basin, samples_per_step=samples_per_step)
    return ScheduleMargin(lr, shape, crit, marg, float(marg[i]), i, advised, req, growth, bias, m, scale, k0, esc,
                          gain)


def _escape_max_lag() -> int:
    from grpojax.dynamics._escape import ESCAPE_MAX_LAG  # noqa: PLC0415

    return ESCAPE_MAX_LAG


def _escape_along(eta_hb, mu, k_ref, kd, k0, lag, noise, basin, samples, batch_reuse=False,
                  noise_growth=0.0) -> float | None:
    """Quasi-static P(escape within the schedule): 1 − exp(−Σ_t r(η_t)), r the escape model's exit rate per
    step at a frozen η (expected exits over a long run / its length), interpolated on a log grid of η."""
    try:
        from grpojax.dynamics._escape import escape_probability  # noqa: PLC0415
    except ImportError:  # the escape model is optional
        return None
    pos = eta_hb[eta_hb > 0]
    if pos.size == 0:
        return 0.0
    horizon = 2000
    grid = np.geomspace(pos.min(), pos.max(), 24) if pos.max() > pos.min() else pos[:1]
    try:
        est = escape_probability(grid, mu, k_ref, kd, noise=noise, basin=basin, steps=horizon, lag=lag,
                                 k_instant=k0, samples_per_step=samples, batch_reuse=batch_reuse,
                                 noise_growth=noise_growth)
    except ValueError as exc:
        if "limit" not in str(exc):
            raise
        return None
    rate = np.asarray(est.expected_exits, np.float64) / horizon
    rate = np.where(np.asarray(est.stable), rate, np.inf)
    r = np.interp(np.log(pos), np.log(grid), np.minimum(rate, 1e300)) if grid.size > 1 else np.full(pos.size, rate[0])
    return float(-np.expm1(-np.sum(r)))
