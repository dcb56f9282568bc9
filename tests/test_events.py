"""Events: change-point segmentation of every logged series (grpojax.diagnose._events)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from grpojax.diagnose import DEFAULT_CONFIG as CFG, diagnose
from grpojax.diagnose._events import binseg_l2, detect_events, noise_sd, series_events
from grpojax.logs import RunLog


def _shifted(n, at, jump, sigma, seed, trend=0.0):
    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=float)
    y = trend * t / n + sigma * rng.standard_normal(n)
    for k, j in zip(at, jump):
        y[k:] += j
    return y


@pytest.mark.parametrize("seed", range(6))
def test_binary_segmentation_matches_ruptures(seed):
    """The NumPy binary segmentation gives ruptures' breakpoints (Binseg, l2 cost, every split tried)."""
    rpt = pytest.importorskip("ruptures")
    rng = np.random.default_rng(seed)
    n = int(rng.integers(60, 400))
    y = _shifted(n, sorted(rng.choice(np.arange(10, n - 10), 3, replace=False)), rng.normal(0, 1, 3), 0.3, seed,
                 trend=float(rng.normal(0, 2)))
    pen = float(rng.uniform(1, 6)) * noise_sd(y) ** 2 * math.log(n)
    mins = int(rng.integers(2, 5))
    want = rpt.Binseg(model="l2", min_size=mins, jump=1).fit(y).predict(pen=pen)[:-1]
    assert binseg_l2(y, pen, mins) == want
    want1 = rpt.Binseg(model="l2", min_size=mins, jump=1).fit(y).predict(n_bkps=2)[:-1]
    assert binseg_l2(y, pen, mins, n_bkps=2) == want1


def test_noise_sd_is_the_gaussian_sd_and_ignores_jumps():
    rng = np.random.default_rng(0)
    y = 0.5 * rng.standard_normal(20_000)
    y[10_000:] += 50.0  # one jump moves one difference
    assert noise_sd(y) == pytest.approx(0.5, rel=0.03)  # MAD estimator: sd ~ 1.1/sqrt(n) relative
    assert noise_sd(np.ones(10)) == 0.0


def test_noise_sd_of_a_curve_that_mostly_does_not_move():
    """Over half of the differences 0 (a reward of 16 answers that moves on one step in five): the noise sd
    is the sd of the differences without their largest 2 %, which sets aside a real jump and costs about 9 %
    of the sd here (mean ratio 0.911, sd 0.010 over 400 seeds); the normal-law fallback it replaces gave about
    0.68. NaN points are skipped, not propagated."""
    rng = np.random.default_rng(7)
    a, n = 1 / 16, 2000
    eps = np.where(rng.random(n) < 0.2, rng.choice([-a, a], n), 0.0)
    y = 0.5 + eps
    y[1200:] -= 0.3  # one real jump
    assert 0.85 <= noise_sd(y) / eps.std() <= 0.97
    y[[5, 700]] = np.nan
    assert 0.85 <= noise_sd(y) / eps.std() <= 0.97


@pytest.mark.parametrize("seed", range(5))
def test_level_shifts_are_found_where_they_are_with_their_size(seed):
    n, sigma = 300, 0.05
    y = _shifted(n, [100, 220], [0.6, -0.4], sigma, seed)
    steps = 10 * np.arange(n)
    se = series_events(steps, y, "reward_mean", CFG)
    assert [e.direction for e in se.events] == ["up", "down"]
    for e, k, j in zip(se.events, (100, 220), (0.6, -0.4)):
        assert abs(e.step - steps[k]) <= 20  # within two logged points
        assert e.last_before < e.step
        # size in noise sd: the jump over the estimated noise (the line fits add their own error)
        assert e.size == pytest.approx(j / sigma, rel=0.35)
        assert e.confidence > 0.99
    assert len(se.segments) == 3 and se.segments[0][0] == 0 and se.segments[-1][1] == steps[-1]


def test_pure_noise_and_smooth_trends_have_few_events():
    """No jump, no event: on 40 noise series and 40 smooth trends (rise, decay) the events found stay within
    what the 0.95 family-wise confidence allows (expected <= 2 of 40; 5 is past the 99.9% binomial quantile)."""
    found_noise = found_trend = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        t = np.arange(400.0)
        found_noise += len(series_events(t, rng.standard_normal(400), "kl", CFG).events)
        curve = (0.8 - 0.6 * np.exp(-t / 80)) if seed % 2 else 0.05 + 0.5 * np.exp(-t / 60)
        found_trend += len(series_events(t, curve + 0.01 * rng.standard_normal(400), "entropy", CFG).events)
    assert found_noise <= 5 and found_trend <= 5, (found_noise, found_trend)


def test_gaps_and_irregular_steps_report_logged_steps():
    """NaN gaps are skipped and uneven logging does not matter: the events are those of the finite points,
    reported at their steps."""
    rng = np.random.default_rng(3)
    n = 240
    y = _shifted(n, [150], [-1.0], 0.1, 3)
    steps = np.cumsum(rng.integers(1, 7, n))  # uneven intervals
    holed = y.copy()
    holed[rng.choice(n, 40, replace=False)] = np.nan
    holed[150] = y[150]
    a = series_events(steps, holed, "reward_mean", CFG)
    keep = np.isfinite(holed)
    b = series_events(steps[keep], y[keep], "reward_mean", CFG)
    assert a.events == b.events and len(a.events) == 1
    assert a.events[0].step == steps[150] and a.events[0].direction == "down"


def test_long_series_are_block_averaged_and_keep_their_events():
    n = 12_000
    y = _shifted(n, [7_777], [2.0], 0.3, 1)
    se = series_events(np.arange(n), y, "response_length", CFG)
    assert len(se.events) == 1
    assert abs(se.events[0].step - 7_777) <= math.ceil(n / CFG.event_max_points)
    assert se.n_points == n


def test_grad_norm_is_segmented_on_a_log_like_scale():
    """A grad norm that jumps 100x is one upward event, before and after in grad-norm units."""
    rng = np.random.default_rng(0)
    g = 0.3 * np.exp(0.2 * rng.standard_normal(200))
    g[120:] *= 100
    se = series_events(np.arange(200), g, "grad_norm", CFG)
    assert len(se.events) == 1 and se.events[0].direction == "up" and se.events[0].step == 120
    assert se.events[0].after / se.events[0].before == pytest.approx(100, rel=0.5)


def test_too_short_or_too_gappy_series_say_so_in_one_line():
    y = np.r_[np.full(5, np.nan), np.arange(8.0), np.full(30, np.nan)]
    se = series_events(np.arange(y.size), y, "kl", CFG)
    assert se.events == () and "\n" not in se.note
    assert se.note.startswith("kl: not segmented: 8 finite points") and "needs >= 12" in se.note
    assert "35 non-finite skipped" in se.note


def test_events_go_into_the_diagnosis_and_its_json():
    rng = np.random.default_rng(0)
    n = 200
    cols = {"reward_mean": _shifted(n, [120], [-0.5], 0.03, 0) + 0.6,
            "entropy": _shifted(n, [100], [-0.3], 0.01, 1) + 0.5,
            "kl": 0.01 + 0.001 * rng.standard_normal(n)}
    d = diagnose(cols, validity=False)
    assert set(d.events) == {"reward_mean", "entropy", "kl"}
    ent = d.events["entropy"].events
    assert len(ent) == 1 and ent[0].step == 100 and ent[0].direction == "down"
    back = json.loads(json.dumps(d.to_dict()))
    assert back["events"]["entropy"]["events"][0]["step"] == 100
    assert back["events"]["kl"]["events"] == []
    # the whole log: one SeriesEvents per logged series of the list
    run = RunLog.from_columns(cols)
    assert detect_events(run, CFG).keys() == d.events.keys()


def test_a_run_appended_to_another_is_one_event_at_the_junction():
    """Two runs in one log (the second restarted from a worse checkpoint): one downward event where the second
    begins, none inside either run."""
    rng = np.random.default_rng(5)
    a = 0.2 + 0.5 * (1 - np.exp(-np.arange(150) / 30)) + 0.02 * rng.standard_normal(150)
    b = 0.3 + 0.3 * (1 - np.exp(-np.arange(100) / 30)) + 0.02 * rng.standard_normal(100)
    steps = np.r_[np.arange(150), 200 + np.arange(100)]  # the second run's steps continue after a gap
    se = series_events(steps, np.r_[a, b], "reward_mean", CFG)
    assert [(e.step, e.direction) for e in se.events] == [(200.0, "down")]


def test_a_series_that_settles_to_a_float32_constant_has_no_event_in_its_rounding():
    """A noise-free metric that settles exactly (a float32 KL reaching log 2 within a few dozen steps, as the
    bandit logs it) leaves change points whose two sides differ by rounding only, in a series whose 5-95%
    spread is 0: no division by a zero noise scale, no event there, and the approach itself is still seen."""
    k = np.arange(1000.0)
    for tau in (1.5, 2.2, 3.0):  # 2.2 divided by zero before the scale had a floor at float32 resolution
        y = np.log(2.0) - (np.log(2.0) - 0.2) * np.exp(-np.maximum(k - 4.0, 0.0) / tau)
        y[:5] = [0.19, 0.12, 0.014, 0.036, 0.20]
        se = series_events(k, y.astype(np.float32).astype(float), "kl", CFG)
        assert all(e.step < 60 and np.isfinite(e.size) for e in se.events), (tau, se.events)
