"""The watch engine: update(state, run) -> (state, report) on growing synthetic runs."""

import numpy as np
import pytest
from scipy import stats

from _bands import FAMILY, count_limits
from grpojax import ConfigError

import grpojax.dynamics as dyn
from grpojax.logs import RunLog
from grpojax.monitor import MonitorConfig, init_state, update
from grpojax.monitor._engine import hyperparams_from_meta

T = 200


def _columns(seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(1, T + 1, dtype=float)
    reward = 0.8 - 0.6 * np.exp(-t / 30) + 0.03 * rng.standard_normal(T)
    eval_r = np.full(T, np.nan)
    eval_r[9::10] = 0.8 - 0.6 * np.exp(-t[9::10] / 30) - 0.002 * (t[9::10] - 100) ** 2 / 100
    return dict(step=t, reward_mean=reward, eval_reward=eval_r, frac_zero_std=np.full(T, 0.9))


META = dict(eta=0.01, mu=0.9, k_ref=4, lag="periodic", curvature=0.5, max_steps=400)


def _run(n, meta=META):
    return RunLog.from_columns({k: v[:n] for k, v in _columns().items()}, name="sim", meta=dict(meta))


CFG = MonitorConfig(every=25, method="persistence")


def test_persistence_forecast_matches_window_mean_and_cadence():
    st = init_state()
    st0 = st
    st, r = update(st, _run(5), CFG)
    assert st0 == init_state()  # pure: the old state is untouched
    assert r.forecast is None and any("8 points" in n for n in r.notes)
    st, r = update(st, _run(40), CFG)
    assert r.refreshed and r.forecast is not None
    # persistence: the mean of the prefix's last window (0.1 of the planned span 1..400)
    s, y = _columns()["step"][:40], _columns()["reward_mean"][:40]
    width = 0.1 * (400 - 1)
    assert r.forecast["mean"] == pytest.approx(np.mean(y[s > s[-1] - width]))
    assert r.forecast["lo"] < r.forecast["mean"] < r.forecast["hi"]
    assert r.forecast["end_step"] == 400
    st, r2 = update(st, _run(60), CFG)  # 20 new points < every: nothing recomputed
    assert not r2.refreshed and r2.forecast == r.forecast
    st, r3 = update(st, _run(70), CFG)
    assert r3.refreshed and r3.forecast != r.forecast


def test_bounds_clip_the_forecast_and_its_interval():
    free = update(init_state(), _run(40), CFG)[1].forecast
    cap = 0.5 * (free["mean"] + free["hi"])  # between the forecast and its upper end
    got = update(init_state(), _run(40), CFG.replace(bounds=(0.0, cap)))[1].forecast
    assert got["hi"] == cap and got["mean"] == free["mean"] and got["lo"] == free["lo"]


def test_best_checkpoint_is_argmax_of_smoothed_eval():
    _, r = update(init_state(), _run(T), CFG)
    c = _columns()
    s, y = c["step"][9::10], c["eval_reward"][9::10]
    sm = np.array([y[max(0, i - 2):i + 3].mean() for i in range(y.size)])
    assert r.best["metric"] == "eval_reward"
    assert r.best["step"] == s[np.argmax(sm)]
    assert r.best["value"] == pytest.approx(sm.max())


def test_findings_appear_once_with_first_step():
    st, r = update(init_state(), _run(60), CFG)
    assert "advantage_degeneracy" in r.new_findings
    first = {f["mode"]: f["first_step"] for f in r.findings}
    assert first["advantage_degeneracy"] == 60
    st, r = update(st, _run(120), CFG)
    assert "advantage_degeneracy" not in r.new_findings
    assert {f["mode"]: f["first_step"] for f in r.findings}["advantage_degeneracy"] == 60


def test_stability_from_meta_matches_exact_threshold():
    _, r = update(init_state(), _run(50), CFG)
    st = r.stability
    star = float(dyn.exact_critical_eta(0.9, 4, 0.5, lag="periodic"))
    assert st["margin"] == pytest.approx(1 - 0.01 / star, rel=1e-9)
    z = float(dyn.damping_ratio(dyn.from_hyperparams(0.01, 0.9, 4, 0.5, lag="periodic")))
    assert st["damping_ratio"] == pytest.approx(z, rel=1e-5)
    assert st["curvature_source"] == "log meta"
    _, r = update(init_state(), _run(50, meta={}), CFG)
    assert r.stability is None and any("learning rate" in n for n in r.notes)


def test_meta_aliases_and_adam():
    hp = hyperparams_from_meta({"learning_rate": 1e-6, "optimizer": "adamw", "num_iterations": 2,
                                "hyperparams": {"curvature": 3.0}, "max_steps": 500})
    assert hp == {"eta": 1e-6, "k_ref": 2.0, "curvature": 3.0, "end_step": 500.0, "beta1": 0.9}


def test_report_to_dict_is_json():
    import json

    _, r = update(init_state(), _run(80), CFG)
    d = json.loads(json.dumps(r.to_dict(), allow_nan=False))
    assert d["run"] == "sim" and d["n_points"] == 80 and d["forecast"]["method"] == "persistence"


@pytest.mark.parametrize("kw, match", [(dict(every=0), "every=0; expected >= 1"),
                                       (dict(method="magic"), "method='magic'; expected one of"),
                                       (dict(level=1.5), "level=1.5; expected a finite number < 1"),
                                       (dict(bounds=(1.0, 0.0)), r"bounds=\(1.0, 0.0\); expected lo < hi"),
                                       (dict(bounds=(0.0,)), "bounds"), (dict(smooth=True), "smooth=True"),
                                       (dict(evry=3), "unknown key 'evry'")])
def test_bad_config(kw, match):
    """A bad setting is refused where the config is built, in one line naming it."""
    with pytest.raises(ConfigError, match=match) as exc:
        MonitorConfig(**kw)
    assert "\n" not in str(exc.value)
    with pytest.raises(TypeError, match="RunLog"):
        update(init_state(), {"reward_mean": [1.0]}, MonitorConfig())


@pytest.mark.slow
def test_creep_forecast_plateau_time_and_fitted_curvature(test_seed):
    """Creep forecast on an oscillator-shaped curve: p* near the truth on the scale of its interval, curvature
    from the fast rate.

    Band: one noise realisation, so "the 99% interval holds the truth" misses in 1% of seeds by design; the
    test asks for 5 interval sds (half-width / 2.576), which fails with probability ~1e-4 even were the
    interval 30% too narrow. Measured over seeds 0-119: (truth - median) / interval sd had sd 0.98 and the
    interval missed 3 times (the calibration itself: test_plateau_interval_coverage)."""
    p = dyn.from_hyperparams(0.01, 0.5, 2, 2.0, lag="constant")
    rate = float(p.K_eff) / float(p.C)
    t = np.arange(1, 301, dtype=float)
    y = 0.8 - 0.6 * np.exp(-rate * t) + 0.01 * np.random.default_rng(1 + test_seed).standard_normal(t.size)
    run = RunLog.from_columns({"step": t, "reward_mean": y}, name="c",
                              meta=dict(eta=0.01, mu=0.5, staleness=2, max_steps=600))
    _, r = update(init_state(), run, MonitorConfig(every=10, diagnose=False, level=0.99))
    f = r.forecast
    sd = (f["plateau"]["hi"] - f["plateau"]["lo"]) / (2 * 2.576)
    assert abs(f["plateau"]["median"] - 0.8) < 5 * sd, f["plateau"]
    assert f["time_to_plateau"]["steps_left"] == 0.0
    assert r.stability["curvature"] == pytest.approx(2.0, rel=0.3)


@pytest.mark.slow
def test_plateau_interval_coverage(test_seed):
    """The plateau's 99% interval on 40 simulated exponential runs (plateau 0.5-0.9, gain 0.2-0.5, rate
    0.02-0.08 per step, white noise sd 0.005-0.03, 300 of 600 planned steps logged): it holds the true plateau
    at its level, and its width is the error's.

    Bands, each at half the family-wise level: the misses within the binomial band of 40 draws at 1%; the mean of
    z^2, z = (truth - median) / (the half-width on the truth's side / 2.576), below the chi-square limit of 40
    degrees of freedom (1.90: an interval 30% too narrow fails it about half of the time, one half as wide
    in 99.8%). One-sided: an interval a little too wide is only cautious. Measured on four sets of 40 runs
    (seeds 20-23): misses 1, 0, 0, 0; mean z^2 0.95, 1.25, 0.70, 0.54."""
    rng = np.random.default_rng(20 + test_seed)
    n, t = 40, np.arange(1, 301, dtype=float)
    z, misses = np.empty(n), 0
    for i in range(n):
        p_star, gain, rate, sd = (rng.uniform(0.5, 0.9), rng.uniform(0.2, 0.5), rng.uniform(0.02, 0.08),
                                  rng.uniform(0.005, 0.03))
        y = p_star - gain * np.exp(-rate * t) + sd * rng.standard_normal(t.size)
        run = RunLog.from_columns({"step": t, "reward_mean": y}, name="c", meta=dict(max_steps=600))
        _, r = update(init_state(), run, MonitorConfig(every=10, diagnose=False, level=0.99))
        pl = r.forecast["plateau"]
        half = pl["hi"] - pl["median"] if p_star > pl["median"] else pl["median"] - pl["lo"]
        z[i] = (p_star - pl["median"]) / (half / stats.norm.isf(0.005))
        misses += not pl["lo"] <= p_star <= pl["hi"]
    family = FAMILY / 2
    assert misses <= count_limits(n, 0.01, family)[1], (misses, z)
    assert np.mean(z**2) < stats.chi2.isf(family, n) / n, z


def test_a_run_that_already_collapsed_is_forecast_from_the_level_after_it():
    """The watch forecast of a run that crashed: the onset of the collapse finding on the curve so far, the
    status ``collapse`` and the level after the fall -- the same forecast as forecast_window given that
    onset from Python (and as ``fit --prefix``) -- and the base-rate P(collapse) with its interval."""
    from grpojax.diagnose import collapse_onset
    from grpojax.fit import forecast_window

    rng = np.random.default_rng(3)
    t = np.arange(1, 121, dtype=float)
    y = np.where(t < 100, 0.1 + 0.7 * (1 - np.exp(-t / 20)), 0.1) + 0.02 * rng.standard_normal(t.size)
    run = RunLog.from_columns({"step": t, "reward_mean": y}, name="crash", meta={"max_steps": 200})
    f = update(init_state(), run, MonitorConfig(every=10, method="combined", diagnose=False))[1].forecast
    onset = collapse_onset(t, y)
    assert onset is not None and 98 <= onset <= 102 and f["collapse_onset"] == onset
    assert f["status"] == "collapse" and f["mean"] < 0.3  # near 0.1, not the 0.8 before the fall
    from grpojax.fit import metric_bounds

    ref = forecast_window((t, y), prefix=min((120 - 1) / (200 - 1) * (1 + 1e-9), 0.999), end_step=200,
                          window=MonitorConfig().window, method="combined", collapse_onset=onset,
                          bounds=metric_bounds("reward_mean"))
    assert f["mean"] == pytest.approx(ref.mean) and (f["lo"], f["hi"]) == pytest.approx((ref.lo, ref.hi))
    lo, hi = f["p_collapse_interval"]
    assert 0.0 <= lo <= f["p_collapse"] <= hi <= 1.0
