"""The user-facing entry points in float32 (what users run) agree with the float64 suite within stated tolerances.

The suite enables x64 globally; each test here computes a float64 reference, then repeats the call inside
``jax.enable_x64(False)`` (a scoped switch: inputs, intermediates and outputs are float32) and compares.
Deterministic quantities are compared to float32 round-off (relative tolerances of 1e-5 to 1e-4);
stochastic ones, whose random draws differ between the precisions, against their exact moments.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grpojax.bandit import BanditConfig, mean_field_trajectory, rollout_log
from grpojax.dynamics import (
    OscillatorParams,
    critical_k_ref,
    exact_critical_a,
    from_hyperparams,
    oscillatory_k_ref,
    regime,
    trajectory,
)
from grpojax.fit import ConvergenceWarning, fit_bayes, fit_law
from grpojax.sde import exact_moments, simulate


def f32():
    return jax.enable_x64(False)


def test_float32_context_really_is_float32():
    with f32():
        assert jnp.asarray(0.1).dtype == jnp.float32
        assert from_hyperparams(0.1, 0.5, 2, 0.3).M.dtype == jnp.float32
    assert jnp.asarray(0.1).dtype == jnp.float64


def test_dynamics_from_hyperparams_and_thresholds_float32():
    eta = np.geomspace(1e-3, 0.5, 9)
    args = (0.6, 4.0, 0.3)
    ref = from_hyperparams(eta, *args, noise=0.01)
    ref_codes = regime(ref)
    ref_kc = critical_k_ref(eta, 0.6, 0.3, k_instant=0.05)
    ref_ko = oscillatory_k_ref(eta, 0.6, 0.3, k_instant=0.05)
    ref_traj = trajectory(ref, np.linspace(0.0, 50.0, 11)[:, None])
    ref_a = exact_critical_a(0.6, 4)
    with f32():
        p = from_hyperparams(eta.astype(np.float32), *args, noise=0.01)
        codes = regime(p)
        kc = critical_k_ref(eta.astype(np.float32), 0.6, 0.3, k_instant=0.05)
        ko = oscillatory_k_ref(eta.astype(np.float32), 0.6, 0.3, k_instant=0.05)
        traj = trajectory(p, np.linspace(0.0, 50.0, 11, dtype=np.float32)[:, None])
        a = exact_critical_a(0.6, 4)
    assert p.M.dtype == p.C.dtype == p.D.dtype == kc.dtype == traj.dtype == jnp.float32
    for got, want in ((p.M, ref.M), (p.C, ref.C), (p.K_eff, ref.K_eff), (p.D, ref.D), (kc, ref_kc), (ko, ref_ko)):
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want), rtol=1e-5, atol=1e-7)
    assert codes.tolist() == ref_codes.tolist()  # no ζ on this grid lies within float32 round-off of 1
    np.testing.assert_allclose(np.asarray(traj, np.float64), np.asarray(ref_traj), rtol=1e-4, atol=1e-5)
    # the exact discrete thresholds compute in float64 whatever the caller's mode
    assert a.dtype == np.float64 and a == ref_a


def test_bandit_rollout_float32():
    cfg64 = BanditConfig(0.5, 0.0, 1, 16, beta=0.1)
    mf64 = np.asarray(mean_field_trajectory(cfg64, 300))
    log64 = rollout_log(cfg64, 300, key=jax.random.key(3))
    with f32():
        cfg = BanditConfig(0.5, 0.0, 1, 16, beta=0.1)
        mf = mean_field_trajectory(cfg, 300)
        log = rollout_log(cfg, 300, key=jax.random.key(3))
    assert cfg.eta.dtype == mf.dtype == log["p"].dtype == log["reward_mean"].dtype == jnp.float32
    assert all(bool(jnp.all(jnp.isfinite(v))) for v in log.values())
    # deterministic mean-field map: float32 round-off only
    np.testing.assert_allclose(np.asarray(mf, np.float64), mf64, rtol=0, atol=2e-5)
    # stochastic run: both precisions settle at the same plateau (the mean field's) within the noise
    plateau = mf64[-1]
    for lg in (log, log64):
        late = np.asarray(lg["p"][150:], np.float64)
        assert abs(late.mean() - plateau) < 0.03, (late.mean(), plateau)


def _three_phase_curve(dtype):
    rng = np.random.default_rng(0)
    t = np.arange(0.0, 200.0, 2.0)
    w, z = 0.05, 0.6
    wd = w * np.sqrt(1 - z * z)
    phi = np.exp(-z * w * t) * (np.cos(wd * t) + z * w / wd * np.sin(wd * t))
    y = 0.8 - 0.6 * phi + 0.01 * rng.standard_normal(t.size)
    return t.astype(dtype), y.astype(dtype)


def test_fit_law_float32():
    t, y = _three_phase_curve(np.float64)
    ref = fit_law(t, y, "three_phase")
    with f32():
        t32, y32 = _three_phase_curve(np.float32)
        got = fit_law(t32, y32, "three_phase")
    assert got.status == ref.status == "ok"
    # the least-squares optimum is the same to float32 precision of the (normalised) problem
    for name, tol in (("r0", 2e-3), ("r_inf", 2e-3), ("omega0", 1e-2), ("zeta", 1e-2)):
        assert float(got.params[name]) == pytest.approx(float(ref.params[name]), rel=tol, abs=1e-4), name
    assert float(got.r2) == pytest.approx(float(ref.r2), abs=1e-4)


def test_fit_bayes_short_chain_float32():
    t, y = _three_phase_curve(np.float64)
    kw = dict(key=jax.random.key(0), num_warmup=150, num_samples=150, num_chains=1, band_points=20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ref = fit_bayes(t, y, "three_phase", **kw)
        with f32():
            t32, y32 = _three_phase_curve(np.float32)
            got = fit_bayes(t32, y32, "three_phase", **kw)
    assert np.asarray(got.samples["p_star"]).dtype == np.float32
    # different chains (float32 arithmetic): posterior medians agree within a fraction of the posterior sd
    for name in ("p_star", "p0"):
        s64, s32 = ref.summary[name], got.summary[name]
        assert abs(s32["q50"] - s64["q50"]) < 0.5 * s64["sd"] + 1e-3, (name, s32, s64)
    assert abs(got.plateau["q50"] - 0.8) < 0.02


def test_sde_ensemble_float32():
    p = OscillatorParams(1.0, 0.5, 1.0, 0.0, 0.2)
    ts = np.linspace(0.5, 5.0, 10)
    mean, cov = exact_moments(p, ts)
    n = 4000
    for mode in (f32, None):
        if mode is None:
            ens = simulate(p, ts, key=jax.random.key(0), n_paths=n, dt=0.05, solver="sra1")
        else:
            with mode():
                ens = simulate(OscillatorParams(1.0, 0.5, 1.0, 0.0, 0.2), ts.astype(np.float32),
                               key=jax.random.key(0), n_paths=n, dt=0.05, solver="sra1")
                assert ens.ys.dtype == jnp.float32
        assert bool(ens.ok) and bool(ens.finite)
        e = np.asarray(ens.e, np.float64)
        sd = np.sqrt(np.asarray(cov)[:, 0, 0])
        # mean within 4 standard errors (plus the O(dt²) bias of SRA1); variance within 10%
        np.testing.assert_array_less(np.abs(e.mean(0) - np.asarray(mean)[:, 0]), 4 * sd / np.sqrt(n) + 1e-3)
        np.testing.assert_allclose(e.var(0, ddof=1), sd**2, rtol=0.1)
