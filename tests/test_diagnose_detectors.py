"""Failure-mode detectors on synthetic logs with known ground truth (fast, NumPy only)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from _bands import FAMILY, count_limits

from grpojax.diagnose import ALL_MODES, DEFAULT_CONFIG, MODES, DiagnoseConfig, diagnose
from grpojax.diagnose._concentration import detect_policy_concentration
from grpojax.diagnose._degeneracy import detect_advantage_degeneracy
from grpojax.diagnose._diagnose import p_unstable_from_fit
from grpojax.diagnose._hacking import detect_reward_hacking
from grpojax.diagnose._instability import detect_dynamical_instability
from grpojax.diagnose._types import severity_level
from grpojax.diagnose._validity import check_mean_field_validity
from grpojax.fit import BayesFit
from grpojax.logs import RunLog


def as_run(columns: dict) -> RunLog:
    return RunLog.from_columns(columns, name="synthetic")


def bayes_fit(p_regime: dict) -> BayesFit:
    """A BayesFit carrying only regime probabilities (what the instability detector reads)."""
    return BayesFit(**{f: None for f in BayesFit._fields} | {"p_regime": p_regime})

N = 400


def healthy(seed: int = 0, n: int = N, noise: float = 0.03) -> dict:
    """Saturating reward with white sampling noise, eval tracking train, steady metrics."""
    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=float)
    p = 0.8 - 0.5 * np.exp(-t / 60)
    g = 16
    reward = p + noise * rng.standard_normal(n)
    eval_r = np.full(n, np.nan)
    eval_r[::25] = p[::25] - 0.05 + 0.01 * rng.standard_normal(eval_r[::25].size)
    return {
        "step": t,
        "reward_mean": reward,
        "reward_std": np.sqrt(p * (1 - p)) + 0.01 * rng.standard_normal(n),
        "frac_zero_std": p ** g + (1 - p) ** g + 0.01 * rng.random(n),
        "entropy": -(p * np.log(p) + (1 - p) * np.log(1 - p)),
        "grad_norm": 0.5 + 0.05 * rng.standard_normal(n),
        "eval_reward": eval_r,
    }


def test_healthy_run_has_no_failure_mode():
    for seed in range(3):
        d = diagnose(healthy(seed))
        assert d.detected == (), (seed, {m: d[m].reason for m in d.detected})
        assert d["mean_field_validity"].verdict == "valid", d["mean_field_validity"].reason
        for m in d.results.values():
            if m.mode in MODES:  # the health checks need columns this simulation does not log
                assert m.verdict != "insufficient_data", (m.mode, m.reason)
        assert d.findings == ("learning_plateau",) or d.findings == (), d.findings


# ----------------------------------------------------------------------------- advantage degeneracy


def test_degeneracy_from_frac_zero_std_and_zero_grads():
    run = healthy()
    rng = np.random.default_rng(1)
    run["frac_zero_std"] = np.clip(np.linspace(0.1, 0.95, N) + 0.02 * rng.standard_normal(N), 0, 1)
    g = run["grad_norm"].copy()
    g[N // 2:][rng.random(N - N // 2) < 0.5] = 0.0
    run["grad_norm"] = g
    res = detect_advantage_degeneracy(as_run(run), DEFAULT_CONFIG)
    assert res.verdict == "detected"
    late = res.evidence[0]
    assert late.metric == "frac_zero_std" and late.triggered
    assert late.value == pytest.approx(np.mean(run["frac_zero_std"][-40:]))
    assert res.severity == pytest.approx(late.value, abs=1e-12)  # fraction-type score = the fraction
    zero = [e for e in res.evidence if e.metric == "grad_norm" and e.op == ">="][0]
    assert zero.triggered and 0.4 < zero.value < 0.6
    assert res.episodes and res.level == "high"


def test_degeneracy_from_reward_std_collapse_without_frac_zero_std():
    run = healthy()
    del run["frac_zero_std"]
    run["reward_std"] = 0.4 * np.exp(-np.arange(N) / 40.0)
    res = detect_advantage_degeneracy(as_run(run), DEFAULT_CONFIG)
    assert res.verdict == "detected"
    ratio = [e for e in res.evidence if e.metric == "reward_std"][0]
    assert ratio.value < 1e-2 and ratio.triggered


def test_degeneracy_missing_columns_is_insufficient_with_reason():
    run = {"reward_mean": np.linspace(0, 1, 50), "grad_norm": np.ones(50)}
    res = detect_advantage_degeneracy(as_run(run), DEFAULT_CONFIG)
    assert res.verdict == "insufficient_data"
    assert "frac_zero_std" in res.reason and "reward_std" in res.reason


# ----------------------------------------------------------------------------- policy concentration


def test_concentration_entropy_collapse_while_reward_rises():
    run = healthy()
    t = np.arange(N, dtype=float)
    run["entropy"] = 0.35 * np.exp(-t / 30) + 0.005
    run["reward_mean"] = 0.4 + 0.5 * (1 - np.exp(-t / 150)) + 0.01 * np.random.default_rng(2).standard_normal(N)
    res = detect_policy_concentration(as_run(run), DEFAULT_CONFIG)
    assert res.verdict == "detected"
    assert all(e.triggered for e in res.evidence if e.op != "info")
    ratio = res.evidence[0].value
    assert ratio < 0.05
    # severity: log(ratio) / (2 log 0.2), clipped
    assert res.severity == pytest.approx(min(1.0, np.log(ratio) / (2 * np.log(DEFAULT_CONFIG.entropy_ratio))))


def test_entropy_loss_at_a_reward_plateau_is_not_concentration(test_seed):
    """A flat reward (white noise) under a collapsing entropy: the reward's rise z-score is standard normal
    (its noise scale comes from the whole series, not from the few first points), so concentration is
    reported only when z >= ``reward_rise_t`` by chance, in at most P(Z >= 2) = 2.3 % of the draws (fewer:
    the reward-still-rising gate must hold too). Over ``n`` draws: the false detections within the binomial
    band at that rate, the count of |z| > 3 within the binomial band at P(|Z| > 3) = 0.27 % (a heavy-tailed
    z, as from a noise scale estimated on three points, fails it) and the z-scores' spread within its
    chi-square band (a noise scale off by a third fails it), each at a third of the family-wise level."""
    n, cfg = 100, DEFAULT_CONFIG
    base = healthy()
    t = np.arange(N, dtype=float)
    base["entropy"] = 0.35 * np.exp(-t / 30) + 0.005
    rng = np.random.default_rng(3 + test_seed)
    z, fired = np.empty(n), 0
    for i in range(n):
        run = base | {"reward_mean": 0.9 + 0.01 * rng.standard_normal(N)}  # flat: converged
        res = detect_policy_concentration(as_run(run), cfg)
        assert res.evidence[0].value <= cfg.entropy_ratio  # the entropy ratio alone would fire
        z[i] = [e for e in res.evidence if e.statistic.startswith("rise z-score")][0].value
        fired += res.verdict == "detected"
    family = FAMILY / 3
    assert fired <= count_limits(n, stats.norm.sf(cfg.reward_rise_t), family)[1], fired
    assert np.sum(np.abs(z) > 3) <= count_limits(n, 2 * stats.norm.sf(3), family)[1], z
    var_lo, var_hi = stats.chi2.ppf([family / 2, 1 - family / 2], n - 1) / (n - 1)
    assert var_lo < np.var(z, ddof=1) < var_hi, np.var(z, ddof=1)


def test_entropy_falling_after_the_reward_saturated_is_not_concentration():
    run = healthy()
    t = np.arange(N, dtype=float)
    run["reward_mean"] = 0.3 + 0.6 * (1 - np.exp(-t / 15)) + 0.01 * np.random.default_rng(9).standard_normal(N)
    run["entropy"] = 0.02 + 0.33 / (1 + np.exp((t - 250) / 10))  # collapses at step ~250, reward done by ~40
    res = detect_policy_concentration(as_run(run), DEFAULT_CONFIG)
    assert res.verdict == "not_detected"
    done = [e for e in res.evidence if e.statistic.startswith("fraction of the reward rise")][0]
    assert done.value > 0.95 and not done.triggered
    assert res.evidence[0].gated and not res.evidence[0].triggered  # the entropy ratio alone would have fired


def test_threshold_override_changes_the_verdict():
    run = healthy()
    t = np.arange(N, dtype=float)
    run["entropy"] = 0.35 * np.exp(-t / 100) + 0.02  # late/initial ~ 0.08
    run["reward_mean"] = 0.4 + 0.5 * (1 - np.exp(-t / 150))
    assert diagnose(run, validity=False)["policy_concentration"].verdict == "detected"
    strict = DEFAULT_CONFIG.replace(entropy_ratio=0.05)
    assert diagnose(run, config=strict, validity=False)["policy_concentration"].verdict == "not_detected"


# ----------------------------------------------------------------------------- instability


def test_growing_oscillation_is_instability_and_stationary_noise_is_not():
    rng = np.random.default_rng(4)
    t = np.arange(N, dtype=float)
    base = healthy(4)
    grow = dict(base)
    grow["reward_mean"] = 0.8 + 0.01 * np.exp(t / 80) * np.sin(2 * np.pi * t / 25) + 0.02 * rng.standard_normal(N)
    res = detect_dynamical_instability(as_run(grow), DEFAULT_CONFIG)
    assert res.verdict == "detected" and res.episodes
    assert res.evidence[0].statistic.startswith("oscillation growth") and res.evidence[0].value > 5
    calm = detect_dynamical_instability(as_run(base), DEFAULT_CONFIG)
    assert calm.verdict == "not_detected"


def test_oscillation_false_positive_rate_under_white_noise_is_small(test_seed):
    """50 stationary white-noise runs: the F-test gate keeps false detections at most at its level alpha; band:
    the binomial band of 50 draws at alpha (<= 4; measured 3 detections in 2,000 such runs, 0.15 %)."""
    hits = 0
    for seed in range(50):
        rng = np.random.default_rng(100 + seed + 50 * test_seed)
        run = {"reward_mean": 0.5 + 0.05 * rng.standard_normal(60)}
        hits += detect_dynamical_instability(as_run(run), DEFAULT_CONFIG).verdict == "detected"
    assert hits <= count_limits(50, DEFAULT_CONFIG.oscillation_alpha)[1], hits


def test_grad_norm_growth_nonfinite_and_posterior_trigger_instability():
    run = healthy(5)
    run["grad_norm"] = 0.5 * np.exp(np.arange(N) / 60.0)
    res = detect_dynamical_instability(as_run(run), DEFAULT_CONFIG)
    assert res.verdict == "detected"
    assert any(e.metric == "grad_norm" and e.triggered for e in res.evidence)

    run = healthy(5)
    run["reward_mean"] = run["reward_mean"].copy()
    run["reward_mean"][-5:] = np.inf
    res = detect_dynamical_instability(as_run(run), DEFAULT_CONFIG)
    assert res.verdict == "detected" and "non-finite" in res.reason

    run = healthy(5)
    assert diagnose(run, fit=bayes_fit({"unstable": 0.95}), validity=False)["dynamical_instability"].detected
    assert not diagnose(run, fit=bayes_fit({"unstable": 0.2}), validity=False)["dynamical_instability"].detected
    with pytest.raises(TypeError, match="BayesFit"):
        diagnose(run, fit={"p_regime": {"unstable": 0.95}}, validity=False)


# ----------------------------------------------------------------------------- reward hacking


def test_train_eval_decoupling_is_hacking():
    run = healthy(6)
    t = np.arange(N, dtype=float)
    train = 0.2 + 0.7 * (1 - np.exp(-t / 120))
    run["reward_mean"] = train + 0.02 * np.random.default_rng(6).standard_normal(N)
    ev = np.full(N, np.nan)
    ev[::20] = np.where(t[::20] < 150, train[::20], train[150] - 0.3 * (t[::20] - 150) / 250)
    run["eval_reward"] = ev
    res = detect_reward_hacking(as_run(run), DEFAULT_CONFIG)
    assert res.verdict == "detected", res.evidence
    dec = res.evidence[0]
    assert dec.statistic.startswith("decoupling") and dec.value > 0.5
    # eval that tracks the train curve is not hacking
    assert detect_reward_hacking(as_run(healthy(6)), DEFAULT_CONFIG).verdict == "not_detected"


def test_hacking_needs_eval_points():
    run = healthy()
    ev = np.full(N, np.nan)
    ev[[100, 300]] = 0.5
    run["eval_reward"] = ev
    res = detect_reward_hacking(as_run(run), DEFAULT_CONFIG)
    assert res.verdict == "insufficient_data" and "eval_reward" in res.reason


# ----------------------------------------------------------------------------- mean-field validity


def test_validity_single_mode_valid_mixture_of_rates_violated():
    rng = np.random.default_rng(7)
    t = np.arange(300, dtype=float)
    one = {"reward_mean": 0.9 - 0.5 * np.exp(-t / 40) + 0.02 * rng.standard_normal(t.size)}
    res = check_mean_field_validity(as_run(one), DEFAULT_CONFIG)
    assert res.verdict == "valid", res.reason
    # fast mode + slow creep (a mixture of prompts), low noise: one oscillator cannot follow it
    mix = {"reward_mean": 0.95 - 0.35 * np.exp(-t / 5) - 0.15 * np.exp(-t / 400)
           + 0.003 * rng.standard_normal(t.size)}
    res = check_mean_field_validity(as_run(mix), DEFAULT_CONFIG)
    assert res.verdict == "violated", res.evidence
    flat = {"reward_mean": 0.5 + 0.05 * rng.standard_normal(100)}
    assert check_mean_field_validity(as_run(flat), DEFAULT_CONFIG).verdict == "insufficient_data"


# ----------------------------------------------------------------------------- plumbing


def test_config_validation_and_severity_levels():
    with pytest.raises(ValueError, match="entropy_ratio"):
        DiagnoseConfig(entropy_ratio=-1.0)
    with pytest.raises(ValueError, match="unknown key 'not_a_threshold'"):
        DEFAULT_CONFIG.replace(not_a_threshold=1.0)
    assert [severity_level(x) for x in (0.0, 0.2, 0.5, 0.9)] == ["none", "low", "medium", "high"]


def test_mapping_input_rejects_bad_shapes_and_steps():
    with pytest.raises(ValueError, match="column 'entropy' has 3 values"):
        diagnose({"reward_mean": np.zeros(4), "entropy": np.zeros(3), "step": np.arange(4)})
    with pytest.raises(ValueError, match="strictly increasing"):
        diagnose({"reward_mean": np.zeros(3), "step": np.array([0, 2, 1])})
    with pytest.raises(ValueError, match="integers"):
        diagnose({"reward_mean": np.zeros(3), "step": np.array([0, 0.5, 1])})
    with pytest.raises(TypeError, match="RunLog or a mapping"):
        diagnose([1.0, 2.0, 3.0])


def test_runlog_input_and_json_roundtrip(tmp_path):
    import json

    cols = {k: np.asarray(v, float) for k, v in healthy(8).items() if k != "step"}
    rl = RunLog(name="synthetic", source="mem", format="jsonl", steps=np.arange(N, dtype=np.int64),
                columns=cols, meta={})
    d = diagnose(rl, validity=False)
    assert d.run == "synthetic" and d.detected == ()
    text = json.dumps(d.to_dict())
    back = json.loads(text)
    assert set(back["results"]) == set(ALL_MODES)
    assert all("text" in e for r in back["results"].values() for e in r["evidence"])


def test_p_unstable_from_fit_and_unidentified_regime():
    assert p_unstable_from_fit(None) is None
    assert p_unstable_from_fit(bayes_fit({"unstable": 0.7, "overdamped": 0.3})) == 0.7
    assert p_unstable_from_fit(bayes_fit({"overdamped": 1.0})) is None  # a model without that regime
    # a flat curve's fit reports no regime (NaN): no evidence either way, not a NaN probability
    assert p_unstable_from_fit(bayes_fit({"unstable": float("nan"), "overdamped": float("nan")})) is None
    with pytest.raises(TypeError, match="BayesFit"):
        p_unstable_from_fit(0.3)


def test_oscillation_residual_names_its_scale_and_divides_by_it():
    """The detrended reward is divided by the logged reward_std, else (a reward in [0, 1]) by the
    sqrt(m(1-m)) bound, else left in reward units; the panel names which (the dashboard labels it)."""
    from grpojax.diagnose._instability import oscillation_residual

    rng = np.random.default_rng(0)
    n = 200
    m = 0.2 + 0.5 * (1 - np.exp(-np.arange(n) / 50))
    r = m + 0.02 * rng.normal(size=n)
    cfg = DEFAULT_CONFIG
    _, raw, _, scale = oscillation_residual(RunLog.from_columns({"reward_mean": 5.0 * r}), cfg)
    assert scale is None  # outside [0, 1]: reward units
    _, bounded, trend, scale = oscillation_residual(RunLog.from_columns({"reward_mean": r}), cfg)
    assert scale == "sqrt(m(1-m))"
    np.testing.assert_allclose(bounded * np.sqrt(trend * (1 - trend)), raw / 5.0, atol=1e-12)
    _, by_std, _, scale = oscillation_residual(
        RunLog.from_columns({"reward_mean": r, "reward_std": np.full(n, 0.25)}), cfg)
    assert scale == "reward_std"
    np.testing.assert_allclose(by_std * 0.25, raw / 5.0, atol=1e-12)
    result = detect_dynamical_instability(RunLog.from_columns({"reward_mean": r, "reward_std": np.full(n, 0.25)}), cfg)
    assert result.panel_data["reward_scale"] == "reward_std"
