"""AdamW's P(escape) from the gain law, against a simulation of Adam on the noisy linearised plateau.

The simulator below is written from Adam's update itself (first and second moments, the second fed by the
simulated gradient's own square), not from the model's matrices. What is checked, with its band:

- the gain law's settled preconditioner and error variance against the simulated Adam runs (5 standard
  errors of the simulated means plus 3%: the mean-field step E[1/sqrt(v̂)] ≈ 1/sqrt(E[v̂]); measured
  differences below 1%);
- the gain-law onset (P = 1/2 within the run) against the simulated Adam runs' escape fraction: below 1/2
  (4 standard errors) at 0.95 × the onset and above it at 1.3 × the onset. The escape model counts exits as
  independent, which near the threshold with β₁ = 0.9 (a narrow-band oscillation whose exits cluster)
  makes its P too high: the simulated onset is measured 1.0-1.2 × the model's on these points;
- heavy ball is unchanged: ``advise`` / ``predict`` give exactly the escape model's numbers at η.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from grpojax._errors import InvalidValueError
from grpojax.dynamics import escape_onset, escape_probability, exact_critical_eta
from grpojax.dynamics._schedule import (adam_along_schedule, adam_escape, adam_escape_along, adam_gain,
                                        adam_to_heavy_ball)

BETA2 = 0.999


def simulate_adam(lr, beta1, k_ref, kd, k0, lag, v0, w, steps, n, rng, *, v_start, burn=0):
    """Adam on the linearised plateau, gradient g = −(K_0 e + K_d e_b) + noise of variance v0, started with the
    second moment at ``v_start`` (no bias correction: a run that has been going for a while) and e at rest.
    Returns the fraction of runs with |e| > w at some step after ``burn``, the mean second moment at the end
    and the mean e² over the last quarter of the steps."""
    e, m, snap = np.zeros(n), np.zeros(n), np.zeros(n)
    past = [np.zeros(n) for _ in range(k_ref + 1)]  # e_t, e_{t−1}, …, e_{t−k_ref}
    v = np.full(n, float(v_start))
    escaped = np.zeros(n, bool)
    e2, count = 0.0, 0
    for t in range(steps):
        if lag == "periodic":
            if t % k_ref == 0:
                snap = e.copy()
            eb = snap
        else:
            eb = past[k_ref]
        g = -(k0 * e + kd * eb) + math.sqrt(v0) * rng.standard_normal(n)
        m = beta1 * m + (1 - beta1) * g
        v = BETA2 * v + (1 - BETA2) * g * g
        e = e + lr * m / np.sqrt(v)  # ascent on the objective: the gradient pulls e back to 0
        past = [e] + past[:-1]
        if t >= burn:
            escaped |= np.abs(e) > w
        if t >= steps - steps // 4:
            e2, count = e2 + float(np.mean(e * e)), count + 1
    return float(escaped.mean()), float(v.mean()), e2 / count


CASES = [  # (β₁, K_ref, K_d, K_0, lag)
    (0.9, 4, 0.12, 0.05, "periodic"),
    (0.0, 1, 0.5, 0.2, "periodic"),
    (0.9, 2, 0.3, 0.1, "constant"),
]


def _lr(f, beta1, k_ref, kd, k0, lag):
    """lr = f × critical lr in the simulator's units (v₀ = 1, no ε): η*_hb / (1 − β₁)."""
    return f * float(exact_critical_eta(beta1, k_ref, kd, lag=lag, k_instant=k0)) / (1.0 - beta1)


@pytest.mark.parametrize("case", [CASES[0], CASES[2]])
@pytest.mark.parametrize("f", [0.8, 2.0])
def test_escape_model_spread_at_the_gain_law_step_is_the_gain_laws_and_the_simulated_one(case, f, test_seed):
    beta1, k_ref, kd, k0, lag = case
    red = adam_to_heavy_ball(beta1=beta1)
    g = adam_gain(f, k_ref, kd, adam=red, lag=lag, k_instant=k0)
    star = float(exact_critical_eta(beta1, k_ref, kd, lag=lag, k_instant=k0))
    # the escape model's stationary spread at the step η_hb / r is the one the gain law solved for
    est = escape_probability(g.step_fraction * star, beta1, k_ref, kd, noise=2.0, basin=1.0, steps=1, lag=lag,
                             k_instant=k0, samples_per_step=4)
    assert float(est.stationary_variance) == pytest.approx(g.error_sd**2 * 2.0 / 4, rel=1e-8)
    # ... and Adam itself, simulated with v̂ fed by its own gradient, settles there
    n, steps = 600, 6000
    _, v_end, e2 = simulate_adam(_lr(f, beta1, k_ref, kd, k0, lag), beta1, k_ref, kd, k0, lag, 1.0, math.inf, steps, n,
                                 np.random.default_rng(test_seed), v_start=g.rms_ratio**2)
    se_v = g.rms_ratio**2 * math.sqrt(2 * (1 - BETA2) / n)  # v̂ averages ~1/(1 − β₂) squares of a normal g
    assert abs(v_end - g.rms_ratio**2) <= 5 * se_v + 0.03 * g.rms_ratio**2, (v_end, g.rms_ratio**2)
    assert abs(e2 / g.error_sd**2 - 1) <= 0.1, (e2, g.error_sd**2)  # 1,500 correlated steps × 600 runs


@pytest.mark.parametrize("case", CASES)
def test_gain_law_onset_against_simulated_adam(case, test_seed):
    beta1, k_ref, kd, k0, lag = case
    red = adam_to_heavy_ball(beta1=beta1)
    steps, n = 400, 4000
    w = 3.3 * adam_gain(2.0, k_ref, kd, adam=red, lag=lag, k_instant=k0).error_sd  # noise v₀ = 1
    e = adam_escape(1.0, k_ref, kd, adam=red, noise=1.0, basin=w, steps=steps, lag=lag, k_instant=k0)
    on = e.onset_lr_over_critical
    assert 1.0 < on < 10.0  # an Adam run past the critical lr, not at the noise-floor onset
    g_on = adam_gain(on, k_ref, kd, adam=red, lag=lag, k_instant=k0)
    p_on = adam_escape(on, k_ref, kd, adam=red, noise=1.0, basin=w, steps=steps, lag=lag, k_instant=k0, onset=False)
    assert p_on.probability == pytest.approx(0.5, abs=2e-3)
    # the noise-floor step would put the onset below the critical lr: the gain law is what moves it up
    assert float(escape_onset(beta1, k_ref, kd, noise=1.0, basin=w, steps=steps, lag=lag, k_instant=k0)) < \
        float(exact_critical_eta(beta1, k_ref, kd, lag=lag, k_instant=k0))
    rng = np.random.default_rng(test_seed)
    se = math.sqrt(0.25 / n)
    lo = simulate_adam(_lr(0.95 * on, beta1, k_ref, kd, k0, lag), beta1, k_ref, kd, k0, lag, 1.0, w, steps, n, rng,
                       v_start=adam_gain(0.95 * on, k_ref, kd, adam=red, lag=lag, k_instant=k0).rms_ratio ** 2)[0]
    hi = simulate_adam(_lr(1.3 * on, beta1, k_ref, kd, k0, lag), beta1, k_ref, kd, k0, lag, 1.0, w, steps, n, rng,
                       v_start=adam_gain(1.3 * on, k_ref, kd, adam=red, lag=lag, k_instant=k0).rms_ratio ** 2)[0]
    assert lo < 0.5 + 4 * se and hi > 0.5 - 4 * se, (lo, hi, g_on.step_fraction)


def test_escape_along_a_settled_schedule_counts_what_the_escape_model_counts():
    """Along a constant lr, once v̂ has settled, the path's exits per step are the escape model's at the gain-law
    step (two implementations of the counting: the path's moments step by step, the model's stationary period)."""
    red = adam_to_heavy_ball(beta1=0.9)
    path = adam_along_schedule(np.full(7000, 3.0), 4, 0.12, adam=red, lag="periodic", k_instant=0.05)
    w = 3.0 * adam_gain(3.0, 4, 0.12, adam=red, lag="periodic", k_instant=0.05).error_sd
    hazard = -math.log1p(-adam_escape_along(path, noise=1.0, basin=w, start=6000)) / 1000
    kw = dict(adam=red, noise=1.0, basin=w, lag="periodic", k_instant=0.05, onset=False)
    rate = (adam_escape(3.0, 4, 0.12, steps=2000, **kw).expected_exits
            - adam_escape(3.0, 4, 0.12, steps=1000, **kw).expected_exits) / 1000
    assert hazard == pytest.approx(rate, rel=0.03)  # exits are rare here: hazard ≈ expected exits per step


def test_weight_decay_onset_solves_the_level():
    wd = adam_to_heavy_ball(beta1=0.9, weight_decay=0.01)
    kw = dict(adam=wd, noise=1e-4, basin=0.3, steps=600, lag="periodic", k_instant=0.05)
    on = adam_escape(1.0, 4, 0.12, **kw).onset_lr_over_critical
    assert adam_escape(on, 4, 0.12, onset=False, **kw).probability == pytest.approx(0.5, abs=2e-3)


def test_heavy_ball_advise_escape_is_unchanged():
    from grpojax.monitor import advise

    kw = dict(noise=0.01, basin=0.2, steps=300, lag="periodic", k_instant=0.1, samples_per_step=8)
    a = advise(eta=0.08, mu=0.9, k_ref=4, group_size=8, curvature=0.5, k_instant=0.1, noise=0.01, steps=300,
               basin=0.2)
    assert a.escape_probability == float(escape_probability(0.08, 0.9, 4, 0.5, **kw).probability)
    assert a.eta_escape == float(escape_onset(0.9, 4, 0.5, level=a.escape_level, **kw))


def test_heavy_ball_predict_escape_is_unchanged():
    from grpojax.cli._predict import predict

    kw = dict(noise=0.01, basin=0.2, steps=300, lag="periodic", k_instant=0.1, samples_per_step=8)
    p = predict(0.08, 0.9, 4, 0.5, lag="periodic", k_instant=0.1, group_size=8, noise=0.01, steps=300, basin=0.2)
    assert p["escape"]["probability"] == float(escape_probability(0.08, 0.9, 4, 0.5, **kw).probability)
    assert "model" not in p["escape"]  # the gain law is AdamW's only
    assert p["escape"]["onset_eta"] == float(escape_onset(0.9, 4, 0.5, **kw))


def test_advise_adam_uses_the_gain_law():
    from grpojax.monitor import advise

    kw = dict(noise=0.01, basin=0.2, steps=1000, lag="periodic", k_instant=0.1, samples_per_step=8)
    a = advise(eta=1.3, beta1=0.9, k_ref=4, group_size=8, curvature=0.5, k_instant=0.1, noise=0.01, steps=1000,
               basin=0.2)
    f = 1.3 * 0.1 / float(exact_critical_eta(0.9, 4, 0.5, lag="periodic", k_instant=0.1))
    e = adam_escape(f, 4, 0.5, adam=adam_to_heavy_ball(beta1=0.9), level=a.escape_level, **kw)
    assert a.escape_probability == pytest.approx(e.probability, rel=1e-9)
    assert a.eta_escape == pytest.approx(1.3 / f * e.onset_lr_over_critical, rel=1e-12)
    floor = float(escape_probability(0.13, 0.9, 4, 0.5, **kw).probability)
    assert a.escape_probability < 0.5 * floor  # at 0.88 × the critical lr the noise-floor step nearly escapes


@pytest.mark.parametrize("call,match", [
    (lambda red: adam_escape(1.0, 4, 0.1, adam=red, noise=1.0, basin=1.0, steps=10, level=1.5), "level"),
    (lambda red: adam_escape(-1.0, 4, 0.1, adam=red, noise=1.0, basin=1.0, steps=10), "lr_over_critical"),
    (lambda red: adam_escape(1.0, 4, 0.1, adam=red, noise=1.0, basin=0.0, steps=10), "basin"),
    (lambda red: adam_escape_along(adam_along_schedule(np.ones(5), 4, 0.1, adam=red), noise=1.0, basin=1.0, start=5),
     "start"),
    (lambda red: adam_escape_along(adam_along_schedule(np.ones(5), 4, 0.1, adam=red), noise=-1.0, basin=1.0), "noise"),
])
def test_bad_input_is_one_line(call, match):
    with pytest.raises(InvalidValueError, match=match) as exc:
        call(adam_to_heavy_ball(beta1=0.9))
    assert "\n" not in str(exc.value)


@pytest.mark.slow
def test_bandit_adam_escape_onset_against_the_gain_law():
    """Adam in the softmax bandit (the schedule validation's constant lr after a warmup, 4 seeds): the onset
    where runs leave the plateau, against the gain law's P(escape) = 1/2 with the experiment's basin mapping.
    Band: predicted / measured in [1.0, 1.6] with the primary basin κ w₀ and in [0.75, 1.25] with w₀ (the
    experiment's quick run measured 1.31 (95% bootstrap 1.24-1.53) and 0.96); the noise-floor step's onset
    below half the measured one (measured 0.96 × critical against 2.49 ×)."""
    from _experiments import load_experiment

    sv = load_experiment("schedule_validation")
    r = sv.case("t", sv.bandit_config(256, 0.9, 4), "adam", steps=1500, warmup=75, factors=[0.5, 2.0, 3.0, 4.0],
                seeds=4, pilot_steps=4000, schedule="constant_with_warmup")
    e = r["escape_check"]
    assert 1.0 <= e["predicted_over_measured_fine"] <= 1.6, e
    assert 0.75 <= e["predicted_w0_over_measured_fine"] <= 1.25, e
    assert e["predicted_escape_onset_factor_noise_floor"] < 0.5 * e["measured_escape_onset_factor_fine"], e


def test_watch_escape_risk_uses_the_gain_law_for_adam_only():
    from grpojax.monitor._alerts import escape_risk

    stab = dict(curvature=0.5, lag="periodic")
    hp = dict(eta=1.3, beta1=0.9, k_ref=4, k_instant=0.1, gradient_noise=0.01, basin=0.2, samples_per_step=8)
    p, why = escape_risk(hp, stab, 100.0, 400.0)
    f = 1.3 * 0.1 / float(exact_critical_eta(0.9, 4, 0.5, lag="periodic", k_instant=0.1))
    kw = dict(noise=0.01, basin=0.2, steps=300, lag="periodic", k_instant=0.1, samples_per_step=8)
    assert why == "" and p == pytest.approx(adam_escape(f, 4, 0.5, adam=adam_to_heavy_ball(beta1=0.9), onset=False,
                                                        **kw).probability, rel=1e-9)
    hb = dict(hp, eta=0.13, mu=0.9)
    del hb["beta1"]
    assert escape_risk(hb, stab, 100.0, 400.0)[0] == float(escape_probability(0.13, 0.9, 4, 0.5, **kw).probability)
