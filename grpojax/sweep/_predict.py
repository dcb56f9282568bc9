"""Predictions for every row of a sweep: exact mean field → oscillator → closed-form and exact regimes.

The mean-field quantities (p*, K_d, K_0, σ²) depend only on the drift knobs (G, β, p_ref, advantage, ...),
not on η, μ or K_ref, so they are computed once per distinct drift and broadcast to the rows. The exact
discrete thresholds come from :mod:`grpojax.dynamics` per distinct (K_ref, lag).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from grpojax._errors import InvalidValueError
from grpojax.bandit import BanditConfig, plateau, with_fixed_point
from grpojax.dynamics import (
    REGIMES,
    damping_ratio,
    exact_critical_eta,
    exact_oscillatory_a,
    exact_oscillatory_eta,
    from_hyperparams,
    regime,
    stationary_variance,
)

__all__ = ["DRIFT_KNOBS", "drift_configs", "predict_rows", "PREDICTED_REGIMES"]

DRIFT_KNOBS = ("group_size", "beta", "p_ref", "p_star", "k_instant", "clip_eps", "adv_eps")
PREDICTED_REGIMES = ("overdamped", "oscillatory", "unstable", "no_plateau")
"""Exact discrete prediction per row: dominant root real positive / complex / outside the unit circle;
``no_plateau`` when there is no interior fixed point with a net restoring force (β = 0, or K_0 + K_d ≤ 0).
K_d ≤ 0 with K_0 > 0 is predicted like any other row (its exact threshold is finite); where the closed-form
inertia M ≤ 0 the closed-form regime is ``no_oscillator``."""


def drift_configs(cols: dict[str, np.ndarray], idx: np.ndarray, modes: dict[str, str]):
    """Unique drift rows of ``idx``: (BanditConfig over the unique rows, inverse index into them)."""
    present = [k for k in DRIFT_KNOBS if k in cols]
    table = np.stack([np.asarray(cols[k][idx], float) for k in present], axis=1)
    uniq, inv = np.unique(table, axis=0, return_inverse=True)
    u = {k: uniq[:, j] for j, k in enumerate(present)}
    cfg = BanditConfig(1.0, 0.0, 1, u["group_size"], beta=u["beta"], p_ref=u["p_ref"], clip_eps=u["clip_eps"],
                       adv_eps=u["adv_eps"], lag=modes["lag"], advantage=modes["advantage"],
                       gradient=modes["gradient"])
    if "p_star" in u:
        kin = u["k_instant"] if "k_instant" in u else None
        cfg = with_fixed_point(cfg, u["p_star"], k_instant=kin)
    return cfg, inv.reshape(-1)


def predict_rows(cols: dict[str, np.ndarray], idx: np.ndarray, modes: dict[str, str]) -> dict[str, np.ndarray]:
    """Mean-field and oscillator predictions for rows ``idx`` (one static-mode group).

    Returns columns: beta, p_ref (after calibration), p_star, K_d, K_0, sigma2, eta (absolute),
    eta_crit_exact, eta_crit_closed, eta_osc_exact, M, C, K_eff, zeta, var_pred, regime_closed (dynamics
    names), regime_exact (:data:`PREDICTED_REGIMES`).
    """
    lag = modes["lag"]
    dcfg, inv = drift_configs(cols, idx, modes)
    theta, kd_u, k0_u, sig_u = (np.asarray(x, float) for x in plateau(dcfg))
    kd, k0, sig2 = kd_u[inv], k0_u[inv], np.maximum(sig_u[inv], 0.0)
    p_star = 1.0 / (1.0 + np.exp(-theta[inv]))
    beta = np.asarray(jnp.broadcast_to(dcfg.beta, kd_u.shape), float)[inv]
    p_ref = np.asarray(jnp.broadcast_to(dcfg.p_ref, kd_u.shape), float)[inv]
    mu = np.asarray(cols["mu"][idx], float)
    k_ref = np.asarray(cols["k_ref"][idx], float).astype(int)
    eta_crit = np.full(len(idx), np.inf)
    eta_osc = np.full(len(idx), np.inf)
    # an interior plateau with a net restoring force; K_d ≤ 0 (e.g. an importance ratio at the plateau) is
    # a valid regime when the instant stiffness K_0 holds it: its threshold is finite
    k0_fin = np.where(np.isfinite(k0), k0, 0.0)
    ok = np.isfinite(kd) & (kd + k0_fin > 0) & (p_star < 1 - 1e-9) & (p_star > 1e-9)
    ratio = np.where(ok & (kd > 0), np.maximum(k0_fin, 0.0) / np.where(ok & (kd > 0), kd, 1.0), 0.0)
    for K in np.unique(k_ref):
        neg = (k_ref == K) & ok & (kd <= 0)
        if neg.any():
            with jax.enable_x64(True):
                eta_crit[neg] = np.asarray(exact_critical_eta(mu[neg], int(K), kd[neg], lag=lag, k_instant=k0_fin[neg]))
                eta_osc[neg] = np.asarray(exact_oscillatory_eta(mu[neg], int(K), kd[neg], lag=lag, k_instant=k0_fin[neg]))
        sel = (k_ref == K) & ok & (kd > 0)
        if not sel.any():
            continue
        # distinct (μ, K_0/K_d) pairs only: the exact roots are the expensive part
        pairs, pinv = np.unique(np.stack([mu[sel], ratio[sel]], 1), axis=0, return_inverse=True)
        # pad to a power-of-two length so that repeated sweeps reuse the compiled root finders
        size = 1 << int(np.ceil(np.log2(len(pairs))))
        pairs = np.concatenate([pairs, np.repeat(pairs[-1:], size - len(pairs), axis=0)])
        # float64 locally: in float32 the roots near z = 1 (μ → 1, a → 0) are not resolved and the
        # root finder reports a spurious crossing (e.g. μ = 0.99, K_ref ≥ 8)
        with jax.enable_x64(True):
            a_star = np.asarray(exact_critical_eta(pairs[:, 0], int(K), 1.0, lag=lag, k_instant=pairs[:, 1]))
            a_osc = np.asarray(exact_oscillatory_a(pairs[:, 0], int(K), lag=lag, a0_ratio=pairs[:, 1]))
        eta_crit[sel] = a_star[pinv.reshape(-1)] / kd[sel]
        eta_osc[sel] = a_osc[pinv.reshape(-1)] / kd[sel]
    if "eta_rel" in cols or "eta_rel_osc" in cols:
        rel = "eta_rel" if "eta_rel" in cols else "eta_rel_osc"
        eta = np.asarray(cols[rel][idx], float) * (eta_crit if rel == "eta_rel" else eta_osc)
        if not np.all(np.isfinite(eta)):
            raise InvalidValueError(f"{rel} needs a finite exact boundary (an interior plateau with K_0 + K_d > 0) in every row")
    else:
        eta = np.asarray(cols["eta"][idx], float)
    tau = k_ref if lag == "constant" else (k_ref - 1) / 2.0
    kd_safe = np.where(np.isfinite(kd), kd, 0.0)
    # absurd learning rates (a deliberately diverging row) would overflow M, D: cap them for the oscillator
    # (its regime is "unstable" either way); the simulation itself uses the true η
    eta_op = np.minimum(eta, 1e20)
    # M = (1 + μ)/2 + η K_d τ²/2 ≤ 0 (K_d < 0 at a large η) is outside the second-order oscillator, not an
    # error: those rows keep their exact prediction and get regime_closed "no_oscillator", NaN ζ and variance
    mass = (1.0 + mu) / 2.0 + eta_op * kd_safe * tau**2 / 2.0
    has_mass = mass > 0
    op = from_hyperparams(np.where(has_mass, eta_op, 1e-12), mu, k_ref, kd_safe, lag=lag,
                          k_instant=np.where(np.isfinite(k0), k0, 0.0),
                          noise=np.where(np.isfinite(sig2), sig2, 0.0), p_star=p_star)
    G = np.asarray(cols["group_size"][idx], float)
    var_pred = np.where(has_mass, np.asarray(stationary_variance(op, G), float), np.nan)
    code = np.asarray(regime(op))
    closed = np.where(has_mass, np.array([REGIMES[c] for c in code]), "no_oscillator")
    eta_crit_closed = np.where(kd > 0, (1.0 - mu) / np.where(kd > 0, kd * np.maximum(tau, 1e-300), 1.0), np.inf)
    eta_crit_closed = np.where(tau > 0, eta_crit_closed, np.inf)
    exact = np.where(eta >= eta_crit, "unstable", np.where(eta >= eta_osc, "oscillatory", "overdamped"))
    exact = np.where(ok, exact, "no_plateau")
    return dict(beta=beta, p_ref=p_ref, p_star=p_star, K_d=kd, K_0=k0, sigma2=sig2, eta=eta,
                eta_crit_exact=eta_crit, eta_crit_closed=eta_crit_closed, eta_osc_exact=eta_osc,
                M=mass, C=(1.0 - mu) - eta_op * kd_safe * tau, K_eff=eta_op * (kd_safe + k0_fin),
                zeta=np.where(has_mass, np.asarray(damping_ratio(op), float), np.nan), var_pred=var_pred,
                regime_closed=closed,
                regime_exact=exact.astype(str))
