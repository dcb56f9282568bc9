"""Hyperparameter advice from the oscillator: :func:`advise` and the vectorised rule :func:`in_advised_range`.

The advised region is where the damping ratio ζ = C / (2 sqrt(M K_eff)) of the closed-form oscillator
lies in ``zeta_band`` (default [0.7, 1.5]: fast, without a large overshoot) *and* the learning rate keeps
a relative ``margin`` to the exact discrete stability threshold η*_exact (η ≤ (1 − margin) η*_exact).
ζ falls monotonically in η (and in K_ref) while the damping C is positive, so each band edge is one
root, found by bisection on the closed form.

Adam is mapped onto heavy-ball momentum: its first moment m ← β₁ m + (1 − β₁) g is heavy-ball with
μ = β₁ and step η (1 − β₁). Its second moment rescales the gradient, so the curvature must be the one
measured in Adam's units (what ``--probe`` fits from a run of that optimizer).

Asynchronous pipelines (every update ``S`` steps stale) use the ``constant`` lag with d = S; a
synchronous loop with ``K_ref`` updates per rollout uses the ``periodic`` refresh.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from grpojax import _defaults
from grpojax._defaults import LAG
from grpojax._errors import InvalidValueError

__all__ = ["Advice", "ZETA_BAND", "advise", "curvature_from_rate", "damping_ratio_np", "in_advised_range"]

ZETA_BAND = _defaults.ZETA_BAND
"""Default band of the damping ratio the advice aims for."""

_MAX_K = 256  # largest K_ref / staleness the range search looks at


class Advice(NamedTuple):
    """What :func:`advise` found for one configuration (all learning rates in the user's units).

    Attributes:
        inputs: the configuration as given (``eta``, ``mu`` or ``beta1``, ``k_ref`` or ``staleness``,
            ``lag``, ``group_size``, ``curvature``, ``k_instant``, ``noise``, ``pass_rate``, ...).
        optimizer: ``"momentum"`` (heavy ball) or ``"adam"``.
        eta_hb, mu: the heavy-ball step and momentum the oscillator uses (``eta_hb = eta (1 − β₁)`` for Adam).
        M, C, K_eff: the oscillator's inertia, damping and stiffness.
        damping_ratio: ζ; ``regime``: the closed form's regime name.
        exact_critical_eta: η*_exact in the user's units (``inf`` when no instability is found).
        spectral_radius: exact spectral radius per step of the discrete update (< 1: stable).
        margin: 1 − η/η*_exact (> 0: stable; the advice asks for ≥ ``required_margin``).
        required_margin: the margin the advised ranges keep.
        zeta_band: the band of ζ the ranges aim for.
        eta_range: ``(lo, hi)`` learning rates with ζ in the band and the margin kept (None when empty).
        k_range: ``(lo, hi)`` integers K_ref (or staleness S) at this η with the same properties (None when empty).
        in_range: whether the configuration itself is inside the advised region.
        noise_std: ``{G: stationary std of the reward}`` for a few group sizes (the given one included);
            ``inf`` when unstable.
        pass_rate: the pass rate p used for the group size (None when unknown).
        zero_std_fraction: p^G + (1 − p)^G at the given G (None without p).
        zero_std_target: the bound on that fraction.
        group_size_needed: the smallest G with p^G + (1 − p)^G ≤ the bound (None without p or when none ≤ 1024).
        curvature_source: how the curvature was obtained (given, or the probe fit and its inversion).
        notes: further remarks, one line each.
        escape_probability: P(the reward leaves the plateau's basin within ``steps``) at this η (the escape
            model, ``docs/model/escape.md``); None when no planned length was given.
        escape_steps, escape_basin, samples_per_step: the planned length T, the basin half-width w (reward
            units) and the samples B per step the escape probability used (None without ``steps``).
        escape_level: the bound on P(escape) the advised η range keeps (when ``steps`` is given).
        eta_escape: the largest η (user's units) with P(escape within T) ≤ ``escape_level`` (η*_exact when
            P stays below it up to η*); None without ``steps``.
        escape_sweep: the measured bound from a sweep of runs (:class:`grpojax.monitor.SweepBound`), when one was
            given; its certified η caps the advised range as well.
    """

    inputs: dict
    optimizer: str
    eta_hb: float
    mu: float
    M: float
    C: float
    K_eff: float
    damping_ratio: float
    regime: str
    exact_critical_eta: float
    spectral_radius: float
    margin: float
    required_margin: float
    zeta_band: tuple
    eta_range: tuple | None
    k_range: tuple | None
    in_range: bool
    noise_std: dict
    pass_rate: float | None
    zero_std_fraction: float | None
    zero_std_target: float
    group_size_needed: int | None
    curvature_source: str
    notes: tuple
    escape_probability: float | None = None
    escape_steps: int | None = None
    escape_basin: float | None = None
    samples_per_step: int | None = None
    escape_level: float = _defaults.ESCAPE_LEVEL
    eta_escape: float | None = None
    escape_sweep: object | None = None

    def to_dict(self) -> dict:
        """JSON-ready dict (``noise_std`` keys as strings)."""
        d = self._asdict()
        d["noise_std"] = {str(k): v for k, v in self.noise_std.items()}
        d["escape_sweep"] = None if self.escape_sweep is None else self.escape_sweep.to_dict()
        d["notes"] = list(self.notes)
        return d


def _tau(k_ref, lag):
    k_ref = np.asarray(k_ref, float)
    return k_ref if lag == "constant" else (k_ref - 1.0) / 2.0


def damping_ratio_np(eta, mu, k_ref, curvature, *, lag=LAG, k_instant=0.0):
    """ζ of the closed-form oscillator in NumPy float64 (vectorised; ``-inf``·… never: C ≤ 0 gives ζ ≤ 0).

    Same formula as :func:`grpojax.dynamics.damping_ratio` of :func:`grpojax.dynamics.from_hyperparams`,
    without JAX, for the bisections and the vectorised rule.
    """
    eta, mu, kd, k0 = (np.asarray(x, float) for x in (eta, mu, curvature, k_instant))
    tau = _tau(k_ref, lag)
    a = eta * kd
    M = (1.0 + mu) / 2.0 + a * tau**2 / 2.0
    C = (1.0 - mu) - a * tau
    K = eta * (k0 + kd)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(M * K > 0, C / (2.0 * np.sqrt(np.maximum(M * K, 1e-300))), np.sign(C) * np.inf)


def _eta_for_zeta(zeta, mu, k_ref, curvature, lag, k_instant, eta_max):
    """The η in (0, eta_max] with ζ(η) = zeta (ζ decreases in η); 0 / eta_max when outside."""
    lo, hi = np.full(np.shape(zeta), 1e-12), np.full(np.shape(zeta), float(eta_max))
    for _ in range(200):
        mid = np.sqrt(lo * hi)
        z = damping_ratio_np(mid, mu, k_ref, curvature, lag=lag, k_instant=k_instant)
        above = z > zeta
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    return 0.5 * (lo + hi)


def _exact(mu, k_ref, curvature, lag, k_instant):
    """η*_exact of the heavy-ball update (float)."""
    from grpojax.dynamics import exact_critical_eta  # noqa: PLC0415

    return float(exact_critical_eta(mu, int(k_ref), curvature, lag=lag, k_instant=k_instant))


def in_advised_range(eta, mu, k_ref, curvature, *, lag: str = LAG, k_instant=0.0,
                     eta_crit_exact=None, zeta_band: tuple = ZETA_BAND, margin: float = _defaults.ADVICE_MARGIN) -> np.ndarray:
    """Vectorised verdict of :func:`advise`: ζ within ``zeta_band`` and η ≤ (1 − margin) η*_exact.

    Args:
        eta, mu, k_ref, curvature, k_instant: heavy-ball hyperparameters and stiffness (broadcast).
        lag: ``"constant"`` or ``"periodic"``.
        eta_crit_exact: η*_exact per row when already known (e.g. a sweep's ``eta_crit_exact``); computed
            per distinct (μ, K_ref) otherwise.
        zeta_band, margin: the advised region.

    Returns:
        Boolean array of the broadcast shape.
    """
    eta, mu, k_ref, curvature, k_instant = np.broadcast_arrays(*(np.asarray(x, float) for x in
                                                                 (eta, mu, k_ref, curvature, k_instant)))
    if eta_crit_exact is None:
        from grpojax.dynamics import exact_critical_eta  # noqa: PLC0415

        eta_crit_exact = np.full(eta.shape, np.inf)
        ratio = np.where(curvature > 0, k_instant / np.where(curvature > 0, curvature, 1.0), 0.0)
        for K in np.unique(k_ref):
            sel = k_ref == K
            a = np.asarray(exact_critical_eta(mu[sel], int(K), 1.0, lag=lag, k_instant=ratio[sel]), float)
            eta_crit_exact[sel] = a / curvature[sel]
    z = damping_ratio_np(eta, mu, k_ref, curvature, lag=lag, k_instant=k_instant)
    ok_margin = eta <= (1.0 - margin) * np.asarray(eta_crit_exact, float)
    return (z >= zeta_band[0]) & (z <= zeta_band[1]) & ok_margin & (curvature > 0)


def curvature_from_rate(rate: float, eta_hb: float, mu: float, k_ref: int, *, lag: str = LAG,
                        k_instant: float = 0.0) -> float:
    """Invert the fast rate λ = K_eff / C of a fitted reward curve into the stale curvature K_d.

    With a = η K_d, K_eff = η K_0 + a and C = (1 − μ) − a τ, λ = K_eff / C gives
    a = (λ (1 − μ) − η K_0) / (1 + λ τ), so K_d = a / η. The rate is what an overdamped curve identifies
    (its approach to the plateau goes as exp(−λ t)); the hyperparameters supply C's dependence on K_d.

    Raises:
        ValueError: a rate that is not a finite positive number, or an inversion that gives K_d ≤ 0.
    """
    if not (math.isfinite(rate) and rate > 0):
        raise InvalidValueError(f"the fitted rate must be a finite number > 0, got {rate!r}")
    tau = float(_tau(k_ref, lag))
    a = (rate * (1.0 - mu) - eta_hb * k_instant) / (1.0 + rate * tau)
    if a <= 0:
        raise InvalidValueError(f"the fitted rate {rate:.3g}/step implies a curvature <= 0 with these hyperparameters")
    return a / eta_hb


def _k_range(eta_hb, mu, curvature, lag, k_instant, band, margin):
    """Integer K_ref (constant: d ≥ 1; periodic: ≥ 1) with ζ in band and the exact margin kept."""
    ks = np.arange(1, _MAX_K + 1)
    z = damping_ratio_np(eta_hb, mu, ks, curvature, lag=lag, k_instant=k_instant)
    cand = ks[(z >= band[0]) & (z <= band[1])]
    if cand.size == 0:
        return None
    lo, hi = int(cand.min()), int(cand.max())
    # the margin shrinks as K_ref grows: walk down from the top candidate (few exact evaluations)
    while hi >= lo and eta_hb > (1.0 - margin) * _exact(mu, hi, curvature, lag, k_instant):
        hi = hi - 1 if hi - lo < 8 else lo + (hi - lo) // 2
    return (lo, hi) if hi >= lo else None


def advise(*, eta: float, group_size: int, mu: float | None = None, beta1: float | None = None,
           k_ref: int | None = None, staleness: int | None = None, lag: str | None = None,
           curvature: float | None = None, k_instant: float = 0.0, noise: float | None = None,
           pass_rate: float | None = None, zero_std_target: float = _defaults.ZERO_STD_TARGET,
           zeta_band: tuple = ZETA_BAND, margin: float = _defaults.ADVICE_MARGIN, curvature_source: str | None = None,
           steps: int | None = None, basin: float | None = None, escape_level: float = _defaults.ESCAPE_LEVEL,
           prompts_per_step: int = 1, noise_growth: float = 0.0, batch_reuse: bool = False,
           escape_sweep: tuple | None = None, sweep_confidence: float = 0.95) -> Advice:
    """Damping ratio, exact stability margin and advised ranges of η, K_ref (or S) and G.

    Args:
        eta: learning rate (Adam's when ``beta1`` is given).
        group_size: completions per prompt G ≥ 2.
        mu: heavy-ball momentum in [0, 1); or ``beta1``: Adam's β₁ in [0, 1) (exactly one of them; neither
            means μ = 0).
        k_ref: updates per rollout (synchronous; ``lag`` default ``"periodic"``); or ``staleness``: steps of
            delay of an asynchronous pipeline (``lag`` ``"constant"``). Exactly one.
        lag: override the lag model (``"constant"`` or ``"periodic"``).
        curvature: stale curvature K_d > 0 (in the optimizer's units).
        k_instant: instant stiffness K_0 ≥ 0 (e.g. a KL anchor).
        noise: per-sample gradient noise variance σ² (default p(1 − p) at ``pass_rate``, else 0.25).
        pass_rate: forecast pass rate p in [0, 1] for the zero-variance-group fraction.
        zero_std_target: bound on p^G + (1 − p)^G, in (0, 1).
        zeta_band: ``(lo, hi)`` band of ζ, 0 < lo < hi.
        margin: relative distance kept from η*_exact, in [0, 1).
        curvature_source: how ``curvature`` was obtained (for the report; default "given").
        steps: planned length T of the run in optimizer steps; when given, the advice also computes
            P(escape within T) (``grpojax.dynamics.escape_probability``: the gradient noise σ²/B with
            B = ``group_size`` × ``prompts_per_step`` samples per step, the basin |p − p*| ≤ ``basin``) and
            caps the advised η range where that probability reaches ``escape_level``. None (the default here)
            leaves the escape out; ``grpojax advise`` plans ``PLANNED_STEPS`` (1000) unless ``--steps`` says.
        basin: half-width w of the plateau's basin in reward units (default: the distance from the pass
            rate p to the nearer end of [0, 1], min(p, 1 − p); 0.2 without a pass rate).
        escape_level: the bound on P(escape within T) the advised range keeps, in (0, 1) (default 0.05).
        prompts_per_step: prompts whose groups one optimizer step averages (default 1).
        noise_growth: growth c ≥ 0 of the step's noise variance with the reward error e, σ²/B · (1 + c e²)
            (``grpojax.dynamics.escape_probability``; default 0: the noise as measured at the plateau).
        batch_reuse: the K_ref updates of a refresh take their gradients on the one batch sampled at it
            (TRL's ``num_iterations``, verl's ``ppo_epochs``): the sampling noise is drawn once per period and
            held (``grpojax.dynamics.escape_probability``; periodic lag, heavy ball only). Default False: a
            fresh draw every step.
        escape_sweep: ``(eta, escaped)``: a measured sweep, runs as long as the planned one at several learning
            rates (user's units), each marked escaped or not (:func:`grpojax.monitor.escape_sweep_bound`). The
            largest rate it certifies, P(escape) ≤ ``escape_level`` at ``sweep_confidence``, caps the advised η
            range beside the escape model; where it certifies none, no η is advised. None (default): no sweep.
        sweep_confidence: the confidence of the sweep's bound, in (0, 1) (default 0.95).

    Returns:
        :class:`Advice`.

    Raises:
        ValueError: a value out of range, both or neither of ``k_ref``/``staleness``, both ``mu`` and ``beta1``.
    """
    from grpojax.diagnose import group_size_for, zero_std_fraction  # noqa: PLC0415
    from grpojax.dynamics import (damping_ratio, from_hyperparams, regime, regime_name,  # noqa: PLC0415
                                  spectral_radius_constant, spectral_radius_periodic, stationary_variance)

    def finite(name, v):
        if v is None or isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise InvalidValueError(f"{name} must be a finite number, got {v!r}")
        return float(v)

    eta = finite("eta", eta)
    if eta <= 0:
        raise InvalidValueError(f"eta must be > 0 (the learning rate), got {eta!r}")
    if mu is not None and beta1 is not None:
        raise InvalidValueError("give mu (heavy-ball momentum) or beta1 (Adam), not both")
    opt = "adam" if beta1 is not None else "momentum"
    m = finite("beta1" if beta1 is not None else "mu", beta1 if beta1 is not None else (0.0 if mu is None else mu))
    if not 0.0 <= m < 1.0:
        raise InvalidValueError(f"{'beta1' if beta1 is not None else 'mu'} must be in [0, 1), got {m!r}")
    if (k_ref is None) == (staleness is None):
        raise InvalidValueError("give exactly one of k_ref (updates per rollout) or staleness (asynchronous delay)")
    kname = "k_ref" if k_ref is not None else "staleness"
    k = k_ref if k_ref is not None else staleness
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise InvalidValueError(f"{kname} must be an integer >= 1, got {k!r}")
    k = int(k)
    lag = lag if lag is not None else (LAG if kname == "k_ref" else "constant")
    if lag not in ("constant", "periodic"):
        raise InvalidValueError(f"lag must be 'constant' or 'periodic', got {lag!r}")
    if isinstance(group_size, bool) or not isinstance(group_size, (int, np.integer)) or group_size < 2:
        raise InvalidValueError(f"group_size must be an integer >= 2, got {group_size!r}")
    curvature = finite("curvature", curvature)
    if curvature <= 0:
        raise InvalidValueError(f"curvature must be > 0 (the stiffness measured at a stable plateau), got {curvature!r}")
    k_instant = finite("k_instant", k_instant)
    if k_instant < 0:
        raise InvalidValueError(f"k_instant must be >= 0, got {k_instant!r}")
    if pass_rate is not None:
        pass_rate = finite("pass_rate", pass_rate)
        if not 0.0 <= pass_rate <= 1.0:
            raise InvalidValueError(f"pass_rate must be in [0, 1], got {pass_rate!r}")
    if not 0.0 < finite("zero_std_target", zero_std_target) < 1.0:
        raise InvalidValueError(f"zero_std_target must be in (0, 1), got {zero_std_target!r}")
    band = tuple(float(b) for b in zeta_band)
    if len(band) != 2 or not 0 < band[0] < band[1]:
        raise InvalidValueError(f"zeta_band must be (lo, hi) with 0 < lo < hi, got {zeta_band!r}")
    if not 0.0 <= finite("margin", margin) < 1.0:
        raise InvalidValueError(f"margin must be in [0, 1), got {margin!r}")
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1):
        raise InvalidValueError(f"steps must be an integer >= 1 (the planned run length), got {steps!r}")
    if not 0.0 < finite("escape_level", escape_level) < 1.0:
        raise InvalidValueError(f"escape_level must be in (0, 1) (a probability), got {escape_level!r}")
    if isinstance(prompts_per_step, bool) or not isinstance(prompts_per_step, (int, np.integer)) or prompts_per_step < 1:
        raise InvalidValueError(f"prompts_per_step must be an integer >= 1, got {prompts_per_step!r}")
    if not finite("noise_growth", noise_growth) >= 0:
        raise InvalidValueError(f"noise_growth must be >= 0 (growth of the noise variance per unit e²), "
                                f"got {noise_growth!r}")
    if basin is not None and not finite("basin", basin) > 0:
        raise InvalidValueError(f"basin must be > 0 (a half-width in reward units), got {basin!r}")
    notes = []
    if noise is None:
        noise = pass_rate * (1.0 - pass_rate) if pass_rate is not None else 0.25
        notes.append(f"gradient noise σ² = {noise:.3g} ({'p(1 − p) at the pass rate' if pass_rate is not None else 'default'})")
    noise = finite("noise", noise)
    if noise < 0:
        raise InvalidValueError(f"noise must be >= 0 (a variance), got {noise!r}")
    scale = (1.0 - m) if opt == "adam" else 1.0  # user's η -> heavy-ball step
    eta_hb = eta * scale
    if opt == "adam":
        notes.append(f"Adam as heavy ball: μ = β₁ = {m:g}, step η(1 − β₁) = {eta_hb:.3g}; the curvature must be "
                     "measured in Adam's units; past η* Adam's second moment grows with the oscillation, so expect "
                     "an oscillation that grows with η rather than a divergence")
    p = from_hyperparams(eta_hb, m, k, curvature, lag=lag, k_instant=k_instant, noise=noise)
    zeta = float(damping_ratio(p))
    reg = regime_name(regime(p))
    eta_star_hb = _exact(m, k, curvature, lag, k_instant)
    radius_fn = spectral_radius_constant if lag == "constant" else spectral_radius_periodic
    rho = float(radius_fn(eta_hb * curvature, m, k, a0=eta_hb * k_instant))
    from grpojax.dynamics import stability_margin  # noqa: PLC0415  (every window: agrees with ρ)

    marg = float(stability_margin(eta_hb, m, k, curvature, lag=lag, k_instant=k_instant)["margin"]) \
        if (lag == "periodic" or k <= 4096) else (1.0 - eta_hb / eta_star_hb if math.isfinite(eta_star_hb) else 1.0)
    # η range: ζ(η) decreases from +inf; edges where ζ = hi and ζ = lo, capped by the exact margin
    cap = (1.0 - margin) * eta_star_hb if math.isfinite(eta_star_hb) else 1e6
    esc = None
    if steps is not None:
        esc = _escape(eta_hb, m, k, curvature, lag, k_instant, noise, int(group_size) * int(prompts_per_step),
                      basin, pass_rate, int(steps), float(escape_level), eta_star_hb, float(noise_growth),
                      adam=opt == "adam", batch_reuse=batch_reuse)
        cap = min(cap, esc["eta_hb"])
        notes.append(f"escape{' (Adam: gain law, v̂ grown with the oscillation)' if opt == 'adam' else ''}: "
                     f"P(leaving |p − p*| ≤ {esc['basin']:.3g} within {int(steps)} steps) = "
                     f"{esc['probability']:.3g} at this η; ≤ {escape_level:g} up to η = {esc['eta_hb'] / scale:.3g} "
                     f"(noise σ²/B with B = {int(group_size) * int(prompts_per_step)} samples per step)")
    sweep = None
    if escape_sweep is not None:
        from grpojax.monitor._escape_sweep import escape_sweep_bound  # noqa: PLC0415

        if not (isinstance(escape_sweep, (tuple, list)) and len(escape_sweep) == 2):
            raise InvalidValueError(f"escape_sweep must be a pair (eta, escaped) of per-run sequences, got "
                                    f"{type(escape_sweep).__name__}")
        sweep = escape_sweep_bound(*escape_sweep, level=escape_level, confidence=sweep_confidence)
        cap = min(cap, 0.0 if sweep.eta is None else sweep.eta * scale)
        notes.append(f"measured sweep: {sweep.describe()}")
    elif esc is not None:
        notes.append("the escape cap is the model's: on the networks it was checked on, runs left the plateau above "
                     "the level at the model's cap in most configurations (momentum and few samples per step "
                     "worst); a measured sweep (escape_sweep, advise --escape-sweep) bounds P(escape) from runs")
    c_zero = (1.0 - m) / (curvature * float(_tau(k, lag))) if float(_tau(k, lag)) > 0 else 1e6
    top = min(c_zero, 1e6)
    e_lo = float(_eta_for_zeta(band[1], m, k, curvature, lag, k_instant, top))
    e_hi = min(float(_eta_for_zeta(band[0], m, k, curvature, lag, k_instant, top)), cap)
    eta_range = (e_lo / scale, e_hi / scale) if e_hi > e_lo else None
    k_range = _k_range(eta_hb, m, curvature, lag, k_instant, band, margin)
    inside = bool(in_advised_range(eta_hb, m, k, curvature, lag=lag, k_instant=k_instant,
                                   eta_crit_exact=eta_star_hb, zeta_band=band, margin=margin))
    if esc is not None:
        inside = inside and esc["probability"] <= escape_level
    if sweep is not None:
        inside = inside and sweep.eta is not None and eta <= sweep.eta
    gs = sorted({2, 4, 8, 16, 32, 64, 128, 256, int(group_size)})
    noise_std = {g: float(np.sqrt(float(stationary_variance(p, g)))) for g in gs}
    zfrac = zero_std_fraction(pass_rate, int(group_size)) if pass_rate is not None else None
    g_need = group_size_for(pass_rate, zero_std_target) if pass_rate is not None else None
    inputs = dict(eta=eta, **({"beta1": m} if opt == "adam" else {"mu": m}), **{kname: k}, lag=lag,
                  group_size=int(group_size), curvature=curvature, k_instant=k_instant, noise=noise,
                  pass_rate=pass_rate)
    return Advice(inputs, opt, eta_hb, m, float(p.M), float(p.C), float(p.K_eff), zeta, str(reg),
                  eta_star_hb / scale, rho, marg, float(margin), band, eta_range, k_range, inside, noise_std,
                  pass_rate, zfrac, float(zero_std_target), g_need, curvature_source or "given", tuple(notes),
                  *((esc["probability"], int(steps), esc["basin"], esc["samples"], float(escape_level),
                     esc["eta_hb"] / scale) if esc is not None else (None, None, None, None, float(escape_level),
                                                                     None)), sweep)


def _escape(eta_hb, mu, k, curvature, lag, k_instant, noise, samples, basin, pass_rate, steps, level, eta_star_hb,
            noise_growth=0.0, adam=False, batch_reuse=False):
    """P(escape within ``steps``) at ``eta_hb`` and the largest heavy-ball η with P ≤ ``level`` (≤ η* for heavy
    ball; Adam: at the gain law's step η_hb / r, ``grpojax.dynamics.adam_escape``, any η)."""
    from grpojax.dynamics import escape_onset, escape_probability  # noqa: PLC0415

    if basin is None:
        basin = min(pass_rate, 1.0 - pass_rate) if pass_rate is not None else 0.2
        if basin <= 0:
            raise InvalidValueError(f"the default basin min(p, 1 − p) is 0 at pass_rate={pass_rate!r}; give basin")
    kw = dict(noise=noise, basin=basin, steps=steps, lag=lag, k_instant=k_instant, samples_per_step=samples,
              noise_growth=noise_growth)
    if batch_reuse is not False:
        if adam:
            raise InvalidValueError("batch_reuse=True is modelled for heavy-ball momentum only (Adam's escape has no "
                                    "held-noise model); give batch_reuse=False with beta1")
        kw["batch_reuse"] = batch_reuse
    if adam and math.isfinite(eta_star_hb) and eta_star_hb > 0:
        from grpojax.dynamics import adam_escape, adam_to_heavy_ball  # noqa: PLC0415

        e = adam_escape(eta_hb / eta_star_hb, k, curvature, adam=adam_to_heavy_ball(beta1=mu), level=level, **kw)
        return dict(probability=e.probability, eta_hb=e.onset_lr_over_critical * eta_star_hb, basin=float(basin),
                    samples=int(samples))
    p = float(escape_probability(eta_hb, mu, k, curvature, **kw).probability)
    if math.isfinite(eta_star_hb) and eta_star_hb > 0:
        top = float(escape_onset(mu, k, curvature, level=level, **kw))
    else:
        top = math.inf
    return dict(probability=p, eta_hb=top, basin=float(basin), samples=int(samples))
