"""NUTS fits (tiny runs: 2 chains, a few hundred draws): recovery, flat curves, forecasts, bad input."""

from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest

from _bands import z_limit
from grpojax.dynamics import REGIMES, OscillatorParams
from grpojax.fit import ConvergenceWarning, fit_bayes, forecast_bayes, forecast_law
from grpojax.sde import sample_exact

# truth in steps: ω₀ = 0.06/step, ζ = 0.5, plateau 0.8 from 0.2, obs noise 0.02, small process noise
OMEGA, ZETA, P_STAR, P0, SIG = 0.06, 0.5, 0.8, 0.2, 0.02
TINY = dict(num_warmup=250, num_samples=250, num_chains=2)


def simulate(T=80, seed=0, irregular=False):
    rng = np.random.default_rng(seed)
    steps = np.arange(T, dtype=float) * 2.0
    if irregular:
        steps = np.cumsum(rng.choice([1.0, 2.0, 3.0], T)).astype(float)
    s_proc = 0.01
    p = OscillatorParams(1.0, 2 * ZETA * OMEGA, OMEGA**2, P_STAR, 4 * OMEGA**3 * s_proc**2)
    x = np.asarray(sample_exact(p, steps - steps[0], key=jax.random.key(seed), n_paths=1, e0=P0 - P_STAR))[0, :, 0]
    return steps, P_STAR + x + SIG * rng.standard_normal(T)


# Recovery band. Over data sets drawn from the model, a calibrated posterior puts the truth at
# z = (posterior mean - truth) / posterior sd ~ N(0, 1); the mean of draws whose bulk ESS is n_eff adds Monte Carlo
# error of sd / sqrt(n_eff), so z ~ N(0, 1 + 1/n_eff). |z| < 4 misses a true value with probability 6e-5 per
# parameter, whatever the seed (a 99% interval, the earlier check, misses once in 25 data sets for 4 parameters).
RECOVERY_Z = 4.0


def assert_recovers(f, name, truth, max_rel_sd):
    """The posterior of ``name`` lies within RECOVERY_Z posterior sds (Monte Carlo error included) of the truth,
    and it is informative: its sd is below ``max_rel_sd`` of the truth (else the band would be vacuous)."""
    draws = np.ravel(f.samples[name])
    mean, sd, n_eff = draws.mean(), draws.std(ddof=1), f.summary[name]["ess_bulk"]
    band = RECOVERY_Z * sd * np.sqrt(1.0 + 1.0 / n_eff)
    assert abs(mean - truth) < band, (name, mean, sd, n_eff, truth)
    assert sd < max_rel_sd * abs(truth), (name, sd, truth)


@pytest.fixture(scope="module")
def ss_fit(test_seed):
    steps, y = simulate(irregular=True, seed=test_seed)
    y[[5, 17, 40]] = np.nan  # missing observations
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return fit_bayes(steps, y, "state_space", key=jax.random.key(1 + test_seed), forecast_to=steps[-1] + 60,
                         **TINY)


def test_state_space_recovers_truth(ss_fit):
    f = ss_fit
    assert f.info["max_r_hat"] < 1.05  # tiny run: loose; the benchmark checks r_hat < 1.01 at 4x1000
    # informative: posterior sd / truth measured 0.010-0.024 (p*), 0.040-0.052 (p0), 0.05-0.17 (zeta) and
    # 0.025-0.08 (omega0) over seeds 0-7; the limits are about three times the largest
    for name, truth, max_rel_sd in (("p_star", P_STAR, 0.075), ("p0", P0, 0.15), ("zeta", ZETA, 0.5),
                                    ("omega0", OMEGA, 0.25)):
        assert_recovers(f, name, truth, max_rel_sd)
    assert sum(f.p_regime.values()) == pytest.approx(1.0)
    assert set(f.p_regime) == set(REGIMES)
    assert f.p_regime["underdamped"] > 0.5
    assert np.isfinite(f.step95["q50"]) and f.step95["q05"] <= f.step95["q50"] <= f.step95["q95"]
    assert f.status in ("ok", "not_converged")
    for key in ("r_hat", "ess_bulk", "q05", "q95", "hdi_5%", "hdi_95%"):
        assert key in f.summary["p_star"]


def test_band_and_forecast_shapes(ss_fit):
    b = ss_fit.band
    assert b["steps"].shape == b["mean_q50"].shape == b["obs_q95"].shape
    assert np.all(b["obs_q05"] <= b["mean_q50"]) and np.all(b["mean_q50"] <= b["obs_q95"])
    assert b["forecast_from"] is not None and b["steps"][-1] > b["forecast_from"]
    # the forecast band widens beyond the data (process noise accumulates)
    fut = b["steps"] > b["forecast_from"]
    assert np.all(np.isfinite(b["obs_q95"][fut]))


def test_flat_curve_is_no_learning():
    """Pure noise: reported as no learning, with no plateau, gain, step95 or regime invented. (The iid
    three-phase posterior of pure noise can be *narrow* in the rate, a fast 'rise' fitted to the first
    points; that is why the rule compares with a constant curve instead of trusting the posterior width.)"""
    rng = np.random.default_rng(5)
    steps = np.arange(60.0)
    y = 0.4 + 0.03 * rng.standard_normal(60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        f = fit_bayes(steps, y, "three_phase", key=jax.random.key(2), **TINY)
    assert f.status == "no_learning"
    assert f.info["delta_bic_flat"] < 10
    assert all(np.isnan(v) for v in f.plateau.values())
    assert all(np.isnan(v) for k, v in f.gain.items())
    assert np.isnan(f.step95["q50"]) and f.step95["p_defined"] == 0.0
    assert all(np.isnan(v) for v in f.p_regime.values())  # no regime is claimed for a flat curve
    assert any("no detectable learning" in w for w in f.warnings)


def test_rising_curve_is_not_flagged_flat(ss_fit):
    """The no-learning rule must not fire on a real rise (ΔBIC ≫ 10, gain interval excludes 0)."""
    assert ss_fit.status != "no_learning"
    assert ss_fit.info["delta_bic_flat"] > 10
    assert ss_fit.gain["q05"] > 0 and np.isfinite(ss_fit.plateau["q50"])


@pytest.mark.slow
def test_mechanistic_recovers_curvature(test_seed):
    eta, mu, k_ref, K = 0.05, 0.9, 2, 0.3
    from grpojax.dynamics import from_hyperparams, mean_reward

    p = from_hyperparams(eta, mu, k_ref, K)
    steps = np.arange(0.0, 150.0)
    rng = np.random.default_rng(7 + test_seed)
    y = np.asarray(mean_reward(p, steps, 0.3 - 0.5) + 0.5) + 0.01 * rng.standard_normal(150)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        f = fit_bayes(steps, y, "mechanistic", key=jax.random.key(3 + test_seed),
                      hyperparams=dict(eta=eta, mu=mu, k_ref=k_ref, lag="constant", group_size=8), **TINY)
    # posterior sd / truth measured 0.046-0.060 (K) and 0.005-0.007 (p*) at seeds 0-1; limits about three times those
    assert_recovers(f, "K", K, max_rel_sd=0.2)
    assert_recovers(f, "p_star", 0.5, max_rel_sd=0.02)


def test_forecasts_score_on_held_out_points():
    steps, y = simulate(T=80, seed=3)
    fl = forecast_law(steps, y, 0.5, "three_phase")
    assert fl.n_train + fl.n_test == 80
    assert fl.rmse < 0.1 and np.isnan(fl.coverage90)
    with pytest.raises(ValueError, match="prefix"):
        forecast_law(steps, y, 0.05, "three_phase")
    with pytest.raises(ValueError, match="fraction"):
        forecast_law(steps, y, 1.2, "three_phase")


@pytest.mark.slow
def test_forecast_bayes_coverage():
    steps, y = simulate(T=120, seed=4)
    fb = forecast_bayes(steps, y, 0.5, "state_space", key=jax.random.key(0), **TINY)
    assert 0.5 <= fb.coverage90 <= 1.0 and fb.rmse < 0.1


def test_bad_input():
    k = jax.random.key(0)
    with pytest.raises(ValueError, match="at least 8"):
        fit_bayes(np.arange(5.0), np.arange(5.0), key=k)
    with pytest.raises(ValueError, match="unknown model"):
        fit_bayes(np.arange(20.0), np.arange(20.0), "gp", key=k)
    with pytest.raises(ValueError, match="hyperparams"):
        fit_bayes(np.arange(20.0), np.arange(20.0), "mechanistic", key=k)
    with pytest.raises(ValueError, match="inf|finite"):
        fit_bayes(np.arange(20.0), np.r_[np.arange(19.0), np.inf], key=k)
    with pytest.raises(ValueError, match="mu"):
        fit_bayes(np.arange(20.0), np.arange(20.0), "mechanistic", key=k, hyperparams=dict(eta=0.1, mu=1.5, k_ref=2))


@pytest.mark.slow
def test_batched_state_space_is_independent_of_batch_size(test_seed):
    """fit_state_space_batched: per-curve keys and starts, so the batch size (and the padding of the last
    batch) changes a curve's draws only through floating-point order (NUTS amplifies it: not bit-identical),
    so the two runs agree statistically; shapes and diagnostics per curve.

    Band: the two posterior means of p* differ by their Monte Carlo errors only, sd / sqrt(ESS) each (the runs
    share keys and starts, so their errors are if anything positively correlated and the difference smaller);
    3 curves at the Bonferroni limit of 3.6 of those errors. p* is not a sampled site (the levels are drawn from
    their exact conditional given each draw of the dynamics), so its ESS is that of its own draws."""
    from numpyro.diagnostics import effective_sample_size

    from grpojax.fit import fit_state_space_batched
    from grpojax.fit._models import prior_sites

    seeds = [3 * test_seed + s for s in (0, 1, 2)]
    curves = [simulate(T=40, seed=s)[1] for s in seeds]
    steps = simulate(T=40, seed=seeds[0])[0]
    Y = np.stack(curves)
    kw = dict(key=jax.random.key(4 + test_seed), num_warmup=60, num_samples=40, num_chains=2)
    one = fit_state_space_batched(steps, Y, batch_size=1, **kw)
    two = fit_state_space_batched(steps, Y, batch_size=2, **kw)
    for name in ("p_star", "zeta", "omega0"):
        assert one.samples[name].shape == two.samples[name].shape == (3, 2, 40)
    a, b = one.samples["p_star"].reshape(3, -1), two.samples["p_star"].reshape(3, -1)
    ess_a, ess_b = ([min(float(effective_sample_size(f.samples["p_star"][i])), a.shape[-1]) for i in range(3)]
                    for f in (one, two))
    mc = np.sqrt(a.var(-1, ddof=1) / ess_a + b.var(-1, ddof=1) / ess_b)
    diff = np.abs(a.mean(-1) - b.mean(-1))
    assert np.all(diff < z_limit(3) * mc), (a.mean(-1), b.mean(-1), mc)
    # the first draw of each chain (3 curves x 2 chains), after the warm-up: the same key and start give the
    # same draw until the floating-point differences of the batch's order grow through the warm-up. Measured on
    # seeds 2-7: 26 of 36 first draws within 0.1 % of each other, 32 within 1 %, the others up to 12 % apart;
    # so at least half within 1 % (four or more beyond it: about 0.2 % at that rate). Keys or starts given
    # by batch position instead of by curve would leave first draws a posterior sd apart (5-10 %): three or more
    # of six within 1 % about 1 % of the time.
    first_a, first_b = one.samples["p_star"][:, :, 0], two.samples["p_star"][:, :, 0]
    agree = np.isclose(first_a, first_b, rtol=1e-2, atol=0.0)
    assert agree.sum() >= agree.size // 2, (first_a, first_b)
    assert one.converged.shape == (3,) and set(one.r_hat) == set(one.ess) == set(prior_sites("state_space"))
    assert all(v.shape == (3,) for v in (*one.r_hat.values(), *one.ess.values()))
    with pytest.raises(ValueError, match="batch_size"):
        fit_state_space_batched(steps, Y, batch_size=0, **kw)


def test_levels_regression_matches_dense_gaussian():
    """The levels integrated out in closed form equal the dense multivariate-normal marginal of the data."""
    from scipy.stats import multivariate_normal

    from grpojax.fit._models import LEVEL_SD, three_phase_loglik, three_phase_response

    rng = np.random.default_rng(0)
    t = np.linspace(0.0, 1.0, 25)
    y = rng.standard_normal(25)
    mask = np.ones(25, bool)
    mask[[3, 11]] = False
    om, z, sig = 7.0, 0.8, 0.4
    with jax.enable_x64(True):
        ll, beta, cov = three_phase_loglik(jax.numpy.asarray(t), jax.numpy.asarray(y), mask, om, z, sig)
        phi = np.asarray(three_phase_response(jax.numpy.asarray(t), om, z))
    X = np.stack([phi, 1.0 - phi], -1)[mask]
    S = sig**2 * np.eye(mask.sum()) + LEVEL_SD**2 * X @ X.T
    assert float(ll) == pytest.approx(multivariate_normal(np.zeros(mask.sum()), S).logpdf(y[mask]), rel=1e-9)
    # the level posterior: Gaussian conditioning on the same joint
    K = LEVEL_SD**2 * X.T @ np.linalg.inv(S)
    np.testing.assert_allclose(np.asarray(beta), K @ y[mask], rtol=1e-8)
    np.testing.assert_allclose(np.asarray(cov), LEVEL_SD**2 * np.eye(2) - K @ X * LEVEL_SD**2, rtol=1e-7, atol=1e-12)


def test_state_space_levels_match_dense_gaussian():
    """Kalman whitening + closed-form levels equal the dense marginal of y = p0 φ + p*(1 − φ) + η + v."""
    from scipy.stats import multivariate_normal

    from grpojax.fit._kalman import step_intervals
    from grpojax.fit._models import LEVEL_SD, state_space_loglik
    from grpojax.sde import exact_transition

    rng = np.random.default_rng(1)
    t = np.cumsum(rng.choice([0.02, 0.05], 20))
    t = t - t[0]
    y = rng.standard_normal(20)
    mask = np.ones(20, bool)
    mask[4] = False
    M, C, K, q, sig = 1.0, 2.0 * 0.7 * 6.0, 36.0, 0.5, 0.3
    uniq, index = step_intervals(t)
    with jax.enable_x64(True):
        ll, _, _ = state_space_loglik(jax.numpy.asarray(t), jax.numpy.asarray(y), mask, tuple(uniq), jax.numpy.asarray(index),
                                      M, C, K, q, sig)
        # dense covariance of the zero-start path: propagate the exact transitions (Van Loan reference)
        p = OscillatorParams(M, C, K, 0.0, q)
        A, Q = (np.asarray(a) for a in exact_transition(p, jax.numpy.asarray(np.diff(t, prepend=t[0]))))
    n = t.size
    P = np.zeros((n, 2, 2))
    Phi = np.zeros((n, n))  # Cov(e_i, e_j)
    cur = np.zeros((2, 2))
    for i in range(n):
        cur = A[i] @ cur @ A[i].T + Q[i]
        P[i] = cur
    for i in range(n):
        G = np.eye(2)
        for j in range(i, n):
            if j > i:
                G = A[j] @ G
            Phi[i, j] = Phi[j, i] = (G @ P[i])[0, 0]
    from grpojax.dynamics import response_from_rest

    phi = np.asarray(response_from_rest(OscillatorParams(M, C, K), t))
    X = np.stack([phi, 1.0 - phi], -1)
    S = Phi + sig**2 * np.eye(n) + LEVEL_SD**2 * X @ X.T
    m = mask
    assert float(ll) == pytest.approx(multivariate_normal(np.zeros(m.sum()), S[np.ix_(m, m)]).logpdf(y[m]), rel=1e-8)


def test_report_prints_the_oscillator_regimes_and_step95(ss_fit):
    text = str(ss_fit)
    for word in ("p* (plateau)", "M_eff", "C_eff", "K_eff", "zeta", "P(regime)", "overdamped", "underdamped",
                 "unstable", "step at 95% of gain", "divergent", "r_hat"):
        assert word in text, word
    # the printed medians are those of the draws
    assert f"{np.median(ss_fit.samples['K_eff']):.3g}"[:3] in text or np.isfinite(ss_fit.summary["K_eff"]["q50"])
    C = ss_fit.samples["C_eff"]
    np.testing.assert_allclose(C, 2 * ss_fit.samples["zeta"] * ss_fit.samples["omega0"], rtol=1e-6)
    np.testing.assert_allclose(ss_fit.samples["K_eff"], ss_fit.samples["omega0"] ** 2, rtol=1e-6)
    from grpojax.fit._bayes import headline

    h = headline(ss_fit)
    assert h["p_overdamped"] + h["p_underdamped"] + h["p_unstable"] <= 1.0 + 1e-9
    assert h["C_eff_lo"] <= h["C_eff"] <= h["C_eff_hi"]


@pytest.mark.slow
def test_simulation_based_calibration(tmp_path):
    """SBC (>= 100 prior draws -> simulate -> fit -> rank of the truth among thinned draws): chi2 uniformity at 1%
    for every parameter (the experiment's own check; it exits non-zero when a parameter fails)."""
    import importlib.util
    import json
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "experiments" / "bayes_sbc.py"
    spec = importlib.util.spec_from_file_location("bayes_sbc", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rc = mod.main(["--curves", "100", "--out", str(tmp_path)])
    res = json.loads((tmp_path / "summary.json").read_text())
    assert res["n_curves"] >= 90
    assert all(r["p_value"] > 0.01 for r in res["chi2"].values()), res["chi2"]
    assert rc == 0


@pytest.mark.parametrize("model", ["state_space", "mechanistic"])
def test_folded_process_noise_is_the_half_normal_prior(model):
    """The process-noise site is sampled as u ~ N(0, 1) with s = 0.3 |u|: the log density NUTS sees is the same at
    u and -u (the sign is not identified), and over u the implied s has the HalfNormal(0.3) law the docs state
    (compared with scipy's halfnorm by a Kolmogorov-Smirnov test on prior draws)."""
    from numpyro.infer.util import potential_energy
    from scipy.stats import halfnorm, kstest

    from grpojax.fit._kalman import step_intervals
    from grpojax.fit._models import PROC_SCALE, folded, mechanistic_model, natural, prior_sites, state_space_model

    t = np.linspace(0.0, 1.0, 30)
    uniq, index = step_intervals(t)
    y = jax.numpy.asarray(np.sin(3 * t) + 0.1 * np.random.default_rng(0).standard_normal(30))
    mask = jax.numpy.ones(30, bool)
    if model == "state_space":
        fn, args = state_space_model, (jax.numpy.asarray(t), y, mask, jax.numpy.asarray(index), tuple(uniq))
    else:
        fn, args = mechanistic_model, (jax.numpy.asarray(t * 100), y, mask, jax.numpy.asarray(index), tuple(uniq * 100),
                                       0.01, 0.9, 4.0, "constant", 1.0, 0.0)
    names = list(prior_sites(model))
    z = {k: jax.numpy.asarray(0.3) for k in names}
    u = jax.numpy.asarray([0.05, 0.7, 2.0])
    energy = jax.jit(jax.vmap(lambda v: potential_energy(fn, args, {}, {**z, "proc_z": v})))
    up, down = np.asarray(energy(u)), np.asarray(energy(-u))
    assert np.all(np.isfinite(up)) and np.ptp(up) > 1e-3  # finite, and the site does move the density
    np.testing.assert_allclose(up, down, rtol=1e-6, atol=1e-6)
    draws = prior_sites(model)["proc_z"].sample(jax.random.key(0), (4000,))
    assert float(np.min(folded({"proc_z": np.asarray(draws)})["proc_z"])) >= 0.0
    s = np.asarray(natural(model, {"proc_z": draws, "sigma_z": draws, "zeta": draws, "rate_z": draws, "a_z": draws})["s_proc"])
    assert kstest(s, halfnorm(scale=PROC_SCALE).cdf).pvalue > 1e-3
