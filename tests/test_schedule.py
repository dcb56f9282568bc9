"""Learning-rate schedules, the Adam reduction and the margin along a schedule (grpojax.dynamics._schedule)."""

from __future__ import annotations

import math

import numpy as np
import optax
import pytest

import grpojax.dynamics as dyn
from _experiments import load_experiment
from grpojax._errors import InvalidValueError
from grpojax.dynamics._schedule import (adam_along_schedule, adam_gain, adam_to_heavy_ball, schedule_margin,
                                        schedule_shape)


def _optax_shape(name, steps, w):
    if name == "cosine":
        f = optax.warmup_cosine_decay_schedule(0.0, 1.0, w, steps, 0.0)
    elif name == "linear":
        f = optax.join_schedules([optax.linear_schedule(0.0, 1.0, w), optax.linear_schedule(1.0, 0.0, steps - w)], [w])
    elif name == "constant_with_warmup":
        f = optax.join_schedules([optax.linear_schedule(0.0, 1.0, w), optax.constant_schedule(1.0)], [w])
    else:
        f = optax.constant_schedule(1.0)
    return np.array([float(f(t)) for t in range(steps)])


@pytest.mark.parametrize("name", ["constant", "constant_with_warmup", "linear", "cosine"])
def test_shapes_match_optax(name):
    steps, w = 60, 9
    np.testing.assert_allclose(schedule_shape(name, steps, warmup_steps=w), _optax_shape(name, steps, w), atol=1e-6)


def test_warmup_ratio_rounds_up_and_bad_input_is_one_line():
    a = schedule_shape("cosine", 101, warmup_ratio=0.1)  # ceil(10.1) = 11 warmup steps
    np.testing.assert_allclose(a, schedule_shape("cosine", 101, warmup_steps=11))
    with pytest.raises(InvalidValueError, match="schedule"):
        schedule_shape("cosine_with_restarts", 10)
    with pytest.raises(InvalidValueError, match="warmup_ratio"):
        schedule_shape("cosine", 10, warmup_ratio=1.5)
    with pytest.raises(InvalidValueError, match="beta1"):
        adam_to_heavy_ball(beta1=1.0)


def test_adam_reduction_by_hand():
    # v = σ²/B + ḡ² = 0.32/8 + 0.2² = 0.08 -> sqrt 0.28284..., step (1 − β₁)/(sqrt v + ε), K_0 += λ (sqrt v + ε)/(1 − β₁)
    r = adam_to_heavy_ball(beta1=0.8, eps=1e-3, weight_decay=0.05, noise=0.32, samples_per_step=8, mean_grad=0.2)
    sv = math.sqrt(0.08)
    assert r.mu == 0.8 and math.isclose(r.sqrt_v, sv)
    assert math.isclose(r.step_scale, 0.2 / (sv + 1e-3))
    assert math.isclose(r.k_instant_extra, 0.05 * (sv + 1e-3) / 0.2)
    # the decay term enters the recurrence as a0 = η_hb K_0extra = η λ, for every η
    assert math.isclose(0.01 * r.step_scale * r.k_instant_extra, 0.01 * 0.05)
    plain = adam_to_heavy_ball(beta1=0.9)
    assert plain.sqrt_v is None and math.isclose(plain.step_scale, 0.1)


@pytest.mark.parametrize("name,w", [("cosine", 10), ("linear", 0), ("constant_with_warmup", 25)])
def test_margin_along_schedule_against_exact_eta(name, w):
    mu, k_ref, kd, k0, steps, peak = 0.9, 4, 0.5, 0.1, 200, 0.02
    r = schedule_margin(peak, k_ref, kd, mu=mu, k_instant=k0, schedule=name, steps=steps, warmup_steps=w)
    eta_star = float(dyn.exact_critical_eta(mu, k_ref, kd, k_instant=k0))
    shape = _optax_shape(name, steps, w)
    np.testing.assert_allclose(r.margin, 1 - peak * shape / eta_star, atol=1e-6)
    assert r.min_margin_step == int(np.argmax(shape > 1 - 1e-9))
    # the advised peak keeps the margin at the schedule's maximum: the margin there is exactly the advice's
    adv = schedule_margin(r.advised_peak_lr, k_ref, kd, mu=mu, k_instant=k0, schedule=name, steps=steps, warmup_steps=w)
    assert math.isclose(adv.min_margin, r.required_margin, abs_tol=1e-9)
    # and the margin at each step agrees in sign with the exact spectral radius at that step's η
    rho = np.asarray(dyn.spectral_radius_periodic(adv.lr * kd, mu, k_ref, a0=adv.lr * k0))
    assert np.all(rho < 1 + 1e-12)


def test_adam_margin_uses_the_reduction():
    red = adam_to_heavy_ball(beta1=0.9, grad_rms=0.05, eps=1e-8, weight_decay=0.1)
    r = schedule_margin(1e-3, 2, 0.3, adam=red, schedule="cosine", steps=100, warmup_steps=5)
    eta_hb_star = float(dyn.exact_critical_eta(0.9, 2, 0.3, k_instant=red.k_instant_extra))
    assert math.isclose(r.critical_lr, eta_hb_star * (0.05 + 1e-8) / 0.1, rel_tol=1e-9)
    # 1/(1 − 0.9^t) > 1.05 for t = 1 .. 28
    assert r.bias_corrected_steps == 28
    with pytest.raises(InvalidValueError, match="not both"):
        schedule_margin(1e-3, 2, 0.3, adam=red, mu=0.9, steps=10)


@pytest.mark.parametrize("f", [0.3, 1.0, 2.5, 8.0])
def test_adam_gain_on_policy_closed_form(f):
    # μ = β₁ = 0, K_ref = 1 (refresh every step): e' = (1 − a) e + η ξ with a = η K, K = K_0 + K_d, so
    # Var(e) = η²σ²/(a(2 − a)), Γ = 1 + K² Var(e)/σ² = 2/(2 − a), η* K = 2; with a = 2f/r the gain law
    # r² = Γ becomes r² − f r − 1 = 0
    kd, k0 = 0.3, 0.2
    g = adam_gain(f, 1, kd, adam=adam_to_heavy_ball(beta1=0.0), lag="periodic", k_instant=k0)
    r = (f + math.sqrt(f * f + 4)) / 2
    assert math.isclose(g.rms_ratio, r, rel_tol=1e-6) and math.isclose(g.step_fraction, f / r, rel_tol=1e-6)
    a = 2 * f / r
    eta = a / (kd + k0)
    assert math.isclose(g.error_sd, eta / math.sqrt(a * (2 - a)), rel_tol=1e-6)


def test_adam_gain_never_crosses_the_threshold_and_reaches_the_schedule_summary():
    red = adam_to_heavy_ball(beta1=0.9)
    gains = [adam_gain(f, 4, 0.3, adam=red, lag="periodic", k_instant=0.1) for f in (0.5, 1.0, 2.0, 10.0)]
    assert all(g.rms_ratio > max(1.0, g.lr_over_critical) and g.step_fraction < 1 for g in gains)
    assert all(a.step_fraction < b.step_fraction for a, b in zip(gains, gains[1:]))
    assert 1 - gains[-1].step_fraction < 0.05  # far above, the effective step sits just below η*_hb
    r = schedule_margin(2.0, 4, 0.3, adam=red, lag="periodic", k_instant=0.1, schedule="cosine", steps=50, beta2=0.99)
    path = adam_along_schedule(r.lr / r.critical_lr, 4, 0.3, adam=red, beta2=0.99, lag="periodic", k_instant=0.1)
    assert math.isclose(r.summary()["adam_rms_gain"], float(np.max(path.rms_ratio)), rel_tol=1e-12)
    # with decoupled weight decay (its η λ does not enter v) the operating point is still a stable update
    wd = adam_to_heavy_ball(beta1=0.9, weight_decay=0.05)
    eta_star = float(dyn.exact_critical_eta(0.9, 4, 0.3, lag="periodic", k_instant=0.1 + wd.k_instant_extra))
    for f in (1.0, 4.0):
        g = adam_gain(f, 4, 0.3, adam=wd, lag="periodic", k_instant=0.1)
        eta_hb = f * eta_star / g.rms_ratio
        a0 = eta_hb * 0.1 + f * eta_star * wd.k_instant_extra
        assert float(dyn.spectral_radius_periodic(eta_hb * 0.3, 0.9, 4, a0=a0)) < 1
    heavy = schedule_margin(2.0, 4, 0.3, mu=0.9, steps=50).summary()
    assert heavy["adam_rms_gain"] is None and heavy["adam_max_step_fraction"] is None
    with pytest.raises(InvalidValueError, match="lr_over_critical"):
        adam_gain(-1.0, 4, 0.3, adam=red)


@pytest.mark.parametrize("lag,k_ref", [("periodic", 4), ("constant", 3)])
def test_adam_path_settles_to_the_gain_law_and_matches_a_monte_carlo_of_the_linear_update(lag, k_ref):
    # (1) at a constant lr the propagated moments settle to the self-consistent root
    red = adam_to_heavy_ball(beta1=0.9)
    kd, k0 = 0.12, 0.05
    path = adam_along_schedule(np.full(6000, 1.5), k_ref, kd, adam=red, lag=lag, k_instant=k0)
    g = adam_gain(1.5, k_ref, kd, adam=red, lag=lag, k_instant=k0)
    assert abs(path.rms_ratio[-1] / g.rms_ratio - 1) < 1e-3 and abs(path.error_sd[-1] / g.error_sd - 1) < 1e-2
    # (2) along a cosine, against the linearised Adam update simulated directly (Gaussian noise of unit
    # variance, v̂ its own EMA per run): sqrt(mean v̂) within 5% at every 50th step (4000 runs; v̂ averages
    # ~100 steps, so its Monte Carlo error is far below that)
    steps, b2 = 400, 0.99
    f = 1.8 * schedule_shape("cosine", steps, warmup_steps=20)
    path = adam_along_schedule(f, k_ref, kd, adam=red, beta2=b2, lag=lag, k_instant=k0)
    eta_star = float(dyn.exact_critical_eta(0.9, k_ref, kd, lag=lag, k_instant=k0))
    rng = np.random.default_rng(0)
    n = 4000
    e = np.zeros(n)
    hist = np.zeros((k_ref + 1, n))  # e_{t}, e_{t−1}, … (constant lag) ; the snapshot in hist[0] (periodic)
    u = np.zeros(n)
    m2 = np.zeros(n)
    snap = np.zeros(n)
    got = []
    for t in range(steps):
        if lag == "periodic":
            if t % k_ref == 0:
                snap = e.copy()
            g = -k0 * e - kd * snap + rng.standard_normal(n)
        else:
            g = -k0 * e - kd * hist[k_ref - 1] + rng.standard_normal(n)
        m2 = b2 * m2 + (1 - b2) * g * g
        vh = m2 / (1 - b2 ** (t + 1))
        u = 0.9 * u + 0.1 * g
        hist = np.roll(hist, 1, axis=0)
        hist[0] = e
        e = e + f[t] * eta_star / 0.1 * u / (1 - 0.9 ** (t + 1)) / np.sqrt(vh)  # lr = f · critical lr (v₀ = 1)
        got.append(math.sqrt(float(np.mean(vh))))
    idx = np.arange(0, steps, 50)
    np.testing.assert_allclose(np.asarray(got)[idx], path.rms_ratio[idx], rtol=0.05)


def test_growth_is_zero_below_and_positive_above_the_threshold():
    kw = dict(mu=0.9, schedule="cosine", steps=400, warmup_steps=20)
    below = schedule_margin(0.9 * float(dyn.exact_critical_eta(0.9, 4, 0.5)), 4, 0.5, **kw)
    above = schedule_margin(1.3 * float(dyn.exact_critical_eta(0.9, 4, 0.5)), 4, 0.5, **kw)
    assert below.growth_efolds < 1e-9 and below.min_margin > 0
    assert above.growth_efolds > 0 and above.min_margin < 0


def test_escape_along_schedule_against_the_frozen_model():
    # a constant schedule sums the escape model's own exit rate: its expected exits within 10% of the
    # frozen-η model's (the frozen run starts at rest, the quasi-static sum at the stationary rate);
    # a linear decay from the same peak escapes less
    kw = dict(mu=0.0, noise=1.0, basin=2.5, samples_per_step=4)
    peak = 0.8 * float(dyn.exact_critical_eta(0.0, 1, 1.0))
    frozen = dyn.escape_probability(peak, 0.0, 1, 1.0, noise=1.0, basin=2.5, steps=500, samples_per_step=4)
    const = schedule_margin(peak, 1, 1.0, schedule="constant", steps=500, **kw)
    lin = schedule_margin(peak, 1, 1.0, schedule="linear", steps=500, **kw)
    exits = -math.log1p(-const.escape_probability)
    assert abs(exits / float(frozen.expected_exits) - 1) < 0.1
    assert 0 < lin.escape_probability < const.escape_probability


def test_escape_along_schedule_with_noise_that_grows_with_the_error():
    # a constant schedule with noise growth c sums the growth model's own exit rate (within 10% of the frozen
    # model's expected exits, as above); c = 0 is the additive model exactly; growth raises P(escape)
    kw = dict(mu=0.9, noise=0.2, basin=2.5, samples_per_step=4)
    peak = 0.3 * float(dyn.exact_critical_eta(0.9, 1, 1.0))
    frozen = dyn.escape_probability(peak, 0.9, 1, 1.0, noise=0.2, basin=2.5, steps=500, samples_per_step=4,
                                    noise_growth=0.5)
    grown = schedule_margin(peak, 1, 1.0, schedule="constant", steps=500, noise_growth=0.5, **kw)
    additive = schedule_margin(peak, 1, 1.0, schedule="constant", steps=500, **kw)
    assert schedule_margin(peak, 1, 1.0, schedule="constant", steps=500, noise_growth=0.0,
                           **kw).escape_probability == additive.escape_probability
    assert abs(-math.log1p(-grown.escape_probability) / float(frozen.expected_exits) - 1) < 0.1
    assert grown.escape_probability > additive.escape_probability
    with pytest.raises(InvalidValueError, match="noise_growth must be >= 0"):
        schedule_margin(peak, 1, 1.0, schedule="constant", steps=500, noise_growth=-1.0, **kw)
    with pytest.raises(InvalidValueError, match="noise_growth=0.5 is not modelled for Adam"):
        schedule_margin(1e-3, 1, 1.0, schedule="cosine", steps=500, adam=adam_to_heavy_ball(beta1=0.9),
                        noise=1.0, basin=2.5, noise_growth=0.5)


def _bandit_onset(mu, k_ref, factors, seeds, steps, warmup):
    sv = load_experiment("schedule_validation")
    return sv.case("t", sv.bandit_config(256, mu, k_ref), "momentum", steps=steps, warmup=warmup, factors=factors,
                seeds=seeds, pilot_steps=100)


@pytest.mark.slow
def test_bandit_onset_with_a_cosine_schedule_heavy_ball_no_momentum():
    # the grid spacing is 10% of the predicted onset, so a measured onset within ±15% is one grid point
    r = _bandit_onset(0.0, 2, [0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3], 4, 800, 40)
    assert 0.85 <= r["measured_over_predicted"] <= 1.15, r


@pytest.mark.slow
def test_bandit_onset_with_a_cosine_schedule_heavy_ball_momentum():
    r = _bandit_onset(0.9, 4, [0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4], 8, 1500, 75)
    assert 0.85 <= r["measured_over_predicted"] <= 1.15, r


@pytest.mark.slow
@pytest.mark.parametrize("schedule", ["constant_with_warmup", "cosine"])
def test_bandit_adam_preconditioner_follows_the_gain_law(schedule):
    # Adam in the bandit from 0.7 to 2 × the predicted critical peak lr: no run leaves the plateau (Adam does
    # not diverge past the threshold), sqrt(v̂) over its noise floor (median over the second half) is within
    # ±15% of adam_along_schedule's at every peak, and the critical lr fitted from it within ±15% of the
    # predicted one (the band of the heavy-ball onset tests)
    sv = load_experiment("schedule_validation")
    r = sv.case("t", sv.bandit_config(256, 0.9, 4), "adam", steps=1200, warmup=60, factors=[0.7, 1.3, 2.0], seeds=4,
                pilot_steps=2000, schedule=schedule)
    assert r["unstable_fraction"] == [0.0, 0.0, 0.0], r
    np.testing.assert_allclose(r["measured_rms_gain"], r["predicted_rms_gain"], rtol=0.15)
    assert 0.85 <= r["measured_over_predicted"] <= 1.15, r


def test_watch_margin_at_the_logged_lr():
    # a run logged along a cosine schedule: the margin is read at its last logged lr against η*_exact
    from grpojax.logs import RunLog
    from grpojax.monitor._engine import _logged_lr_margin

    lr = 0.01 * schedule_shape("cosine", 50, warmup_steps=5)
    lr[-3:] = np.nan  # not logged at the last steps
    run = RunLog.from_columns({"lr": lr, "reward_mean": np.linspace(0.2, 0.8, 50)})
    star = float(dyn.exact_critical_eta(0.9, 4, 0.5))
    got = _logged_lr_margin(run, {"exact_critical_eta": star})
    assert got["logged_lr_step"] == 46 and math.isclose(got["logged_lr"], lr[46])
    assert math.isclose(got["margin_at_logged_lr"], 1 - lr[46] / star)
    assert _logged_lr_margin(run, {"exact_critical_eta": math.inf}) == {}


def test_predict_prints_the_adam_rows_without_claiming_a_divergence(tmp_path, capsys):
    import json

    from grpojax.cli import main

    argv = ["predict", "--eta", "0.2", "--k-ref", "4", "--curvature", "0.5", "--optimizer", "adamw", "--beta1", "0.9",
            "--grad-rms", "0.05", "--schedule", "cosine", "--warmup", "50", "--steps", "500", "--out", str(tmp_path)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    block = json.loads((tmp_path / "prediction.json").read_text())["schedule"]
    red = adam_to_heavy_ball(beta1=0.9, grad_rms=0.05)
    r = schedule_margin(0.2, 4, 0.5, adam=red, schedule="cosine", steps=500, warmup_steps=50)
    assert block["peak_lr"] > block["critical_lr"]  # past the threshold at the noise floor
    assert math.isclose(block["adam_rms_gain"], r.summary()["adam_rms_gain"], rel_tol=1e-9)
    assert f"sqrt(v) up to {block['adam_rms_gain']:.3g}× its noise floor" in text
    assert "no divergence" in text and "growth above the threshold" not in text
    assert "exact critical lr" not in text and f"critical lr {block['critical_lr']:.4g}" in text
