"""Detectors that hold on runs nobody tuned them on: degenerate-group estimate from the mean reward,
numerical blow-ups, far-past statistics that no gate hides, advice that points the right way, and no
oscillation finding on steadily rising curves. All NumPy, small shapes."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from grpojax.diagnose import DEFAULT_CONFIG, diagnose, zero_std_fraction
from grpojax.diagnose._types import Evidence, finish_result, make_evidence
from grpojax.logs import RunLog


def _run(cols: dict, **meta) -> RunLog:
    r = RunLog.from_columns(cols, name="run")
    return dataclasses.replace(r, meta={**r.meta, **meta})


# ----------------------------------------------------------------------------- degenerate groups from the mean


def test_degenerate_fraction_estimate_against_simulated_binary_groups(test_seed):
    """Simulated 0/1 rewards in groups of G: homogeneous prompts match p^G + (1-p)^G within 4 binomial
    standard errors; prompts with Beta-spread pass rates have a true fraction >= the estimate (Jensen:
    a lower bound) minus 4 standard errors. The 0.01 beside the binomial errors covers the estimate's own
    error (through the mean pass rate) and the skew of a rare count; on 1,000 seeds the largest deviation used
    55 % of the homogeneous band and none came near the heterogeneous one."""
    rng = np.random.default_rng(0 + test_seed)
    n_groups = 4000
    for g, p in ((5, 0.98), (8, 0.5), (8, 0.1), (16, 0.9)):
        rewards = rng.random((n_groups, g)) < p
        same = np.mean(rewards.all(1) | ~rewards.any(1))
        est = zero_std_fraction(float(rewards.mean()), g)
        se = np.sqrt(max(est * (1 - est), 1e-4) / n_groups)
        assert abs(same - est) <= 4 * se + 0.01, (g, p, same, est)
        # heterogeneous prompts with the same mean pass rate
        a = 0.5
        pi = rng.beta(a * p / (1 - p) if p < 1 else 50, a, n_groups)
        rewards = rng.random((n_groups, g)) < pi[:, None]
        same = np.mean(rewards.all(1) | ~rewards.any(1))
        est = zero_std_fraction(float(rewards.mean()), g)
        assert same >= est - 4 * np.sqrt(0.25 / n_groups), (g, p, same, est)


def test_degeneracy_detected_from_mean_reward_and_group_size_with_the_assumption_stated():
    rng = np.random.default_rng(1)
    r = np.clip(0.98 + 0.01 * rng.standard_normal(120), 0, 1)
    res = diagnose(_run({"reward_mean": r}, group_size=5), validity=False)["advantage_degeneracy"]
    assert res.verdict == "detected"
    e = res.evidence[0]
    assert "0/1 reward" in e.statistic and "lower bound" in e.statistic
    assert e.value == pytest.approx(zero_std_fraction(float(np.mean(r[-12:])), 5), rel=1e-9)
    # G unknown, or a reward outside [0, 1]: no estimate, and the reason says why
    res = diagnose(_run({"reward_mean": r}), validity=False)["advantage_degeneracy"]
    assert res.verdict == "insufficient_data" and "G unknown" in res.reason
    res = diagnose(_run({"reward_mean": 3 * r}, group_size=5), validity=False)["advantage_degeneracy"]
    assert res.verdict == "insufficient_data" and "outside [0, 1]" in res.reason
    # a mid pass rate with G = 8: 0.5^8 * 2 < 0.01, not degenerate
    mid = np.clip(0.5 + 0.02 * rng.standard_normal(120), 0, 1)
    assert diagnose(_run({"reward_mean": mid}, group_size=8), validity=False)["advantage_degeneracy"].verdict \
        == "not_detected"


# ----------------------------------------------------------------------------- numerical blow-up


def _healthy(n=200, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=float)
    return {"reward_mean": 0.2 + 0.5 * (1 - np.exp(-t / 50)) + 0.02 * rng.standard_normal(n),
            "grad_norm": 0.3 * np.exp(0.1 * rng.standard_normal(n)),
            "entropy": 0.6 * np.exp(-t / 400), "kl": 0.001 * t / n}


@pytest.mark.parametrize("bad", ["nan", "1e15"])
def test_nan_or_huge_gradient_is_reported_at_its_first_step(bad):
    cols = _healthy()
    g = cols["grad_norm"].copy()
    if bad == "nan":
        g[150:] = np.nan
        run = _run({**cols, "grad_norm": g}, nan_counts={"grad_norm": 50})
    else:
        g[150:] = 1e15
        run = _run({**cols, "grad_norm": g})
    d = diagnose(run, validity=False)
    inst = d["dynamical_instability"]
    assert inst.verdict == "detected" and "blow-up" in inst.reason
    assert any("150" in e.statistic for e in inst.evidence if e.triggered), inst.reason
    assert min(a for a, _ in inst.episodes) == 150
    spikes = d["gradient_spikes"]
    assert spikes.verdict == "detected"


def test_nan_that_was_not_logged_is_not_a_blow_up_and_a_recovered_jump_is_a_spike_not_a_blow_up():
    cols = _healthy()
    g = cols["grad_norm"].copy()
    g[::2] = np.nan  # logged every other step, no NaN counted by the reader
    assert diagnose(_run({**cols, "grad_norm": g}), validity=False)["dynamical_instability"].verdict == "not_detected"
    g = cols["grad_norm"].copy()
    g[100] = 1e4 * g[100]  # one step, then back: a spike
    d = diagnose(_run({**cols, "grad_norm": g}), validity=False)
    assert d["dynamical_instability"].verdict == "not_detected"
    assert d["gradient_spikes"].verdict == "detected"


def test_absurd_kl_loss_and_entropy_are_blow_ups():
    cols = _healthy()
    kl = cols["kl"].copy()
    kl[180:] = 40.0
    assert "KL" in diagnose(_run({**cols, "kl": kl}), validity=False)["dynamical_instability"].reason
    loss = np.full(200, 0.01)
    loss[170:] = 1e8
    res = diagnose(_run({**cols, "loss": loss}), validity=False)["dynamical_instability"]
    assert res.verdict == "detected" and "loss" in res.reason
    h = cols["entropy"].copy()
    h[160:] = 1e-20
    res = diagnose(_run({**cols, "entropy": h}), validity=False)["dynamical_instability"]
    assert res.verdict == "detected" and "entropy" in res.reason and "160" in res.reason


# ----------------------------------------------------------------------------- gates


def test_no_gate_hides_a_statistic_ten_times_past_its_threshold_and_gated_lines_are_marked():
    main = make_evidence("entropy", np.arange(3), "late/initial median ratio", 0.01, 0.12, "<=")
    gate = make_evidence("reward_mean", np.arange(3), "rise z-score", 0.5, 2.0, ">=", kind="gate")
    res = finish_result("policy_concentration", [main, gate], [], {}, require_all=True)
    assert res.verdict == "detected"  # 0.01 <= 0.012: ten times past 0.12
    near = main._replace(value=0.05, triggered=True)
    res = finish_result("policy_concentration", [near, gate], [], {}, require_all=True)
    assert res.verdict == "not_detected" and res.evidence[0].gated
    assert res.evidence[0].short().endswith("[gated]") and "gated" in res.evidence[0].describe()
    assert "gated" in res.reason
    # a statistic held back by its own gate (triggered=False) but 10x past counts
    held = make_evidence("grad_norm", np.arange(3), "largest robust z", 90.0, 8.0, ">=", kind="zscore")
    held = held._replace(triggered=False, score=0.0)
    assert finish_result("gradient_spikes", [held], [], {}).verdict == "detected"
    # gates themselves are never "far past"
    assert isinstance(gate, Evidence) and not gate.triggered


def test_every_printed_line_marks_a_gated_statistic():
    from grpojax.cli._diagnose import report_lines

    rng = np.random.default_rng(3)
    t = np.arange(400, dtype=float)
    cols = {"reward_mean": 0.8 * (1 - np.exp(-t / 10)) + 0.01 * rng.standard_normal(400),
            "entropy": 0.02 + 0.33 / (1 + np.exp((t - 250) / 10))}
    d = diagnose(_run(cols), validity=False)
    res = d["policy_concentration"]
    assert res.verdict == "not_detected" and any(e.gated for e in res.evidence)
    lines = [x for x, _ in report_lines(d)]
    i = next(k for k, x in enumerate(lines) if x.startswith("policy concentration"))
    row = lines[i] + "".join(x for x in lines[i + 1:i + 3] if x.startswith(" " * 48))  # the wrapped statistic
    assert "gated" in row


# ----------------------------------------------------------------------------- advice direction


def test_never_solved_prompts_get_easier_prompts_not_always_solved_filtering_and_no_absurd_group_size():
    rng = np.random.default_rng(4)
    cols = {"reward_mean": np.clip(0.01 + 0.005 * rng.standard_normal(150), 0, 1),
            "frac_zero_std": np.clip(0.97 + 0.01 * rng.standard_normal(150), 0, 1)}
    res = diagnose(_run(cols, group_size=8), validity=False)["advantage_degeneracy"]
    assert res.verdict == "detected"
    assert "never solved" in res.advice and ("easier" in res.advice or "curriculum" in res.advice)
    assert "always-solved" not in res.advice
    assert all(int(x) < 222 for x in re.findall(r"G >= (\d+)", res.advice))
    cols["reward_mean"] = 1 - cols["reward_mean"]
    res = diagnose(_run(cols, group_size=8), validity=False)["advantage_degeneracy"]
    assert "always-solved" in res.advice and "never" not in res.advice


def test_clip_level_advice_is_below_every_flagged_spike():
    rng = np.random.default_rng(5)
    g = 0.2 * np.exp(np.linspace(0, np.log(50), 300)) * np.exp(0.05 * rng.standard_normal(300))
    g[40] *= 20  # an early spike, far below the late grad norms
    res = diagnose(_run({"reward_mean": 0.5 + 0.01 * rng.standard_normal(300), "grad_norm": g}),
                   validity=False)["gradient_spikes"]
    assert res.verdict == "detected"
    cap = float(re.search(r"~([0-9.e+-]+)", res.advice).group(1))
    spikes = [v for v, _ in res.panel_data["spike_levels"]]
    assert np.mean(g > cap) <= 0.05  # the level named clips at most 5% of the logged steps
    # the spike is far below the late grad norms: any level below it would clip more than 5% of the steps,
    # so the advice says that no constant clip catches it instead of proposing one that clips most steps
    assert spikes and np.mean(g > min(spikes)) > 0.05
    assert cap > max(spikes) and "catch none" in res.advice


# ----------------------------------------------------------------------------- oscillation on monotone curves


def test_steadily_rising_curves_are_not_oscillations():
    """Monotone rises (sigmoid, exponential, linear) with binomial noise and no reward_std column: the old
    statistic fired on ~half of the sigmoid runs (noise bounded near 0 in the first block); the
    bounded-noise normalisation leaves <= 2 of 36."""
    from grpojax.diagnose._instability import detect_dynamical_instability

    rng = np.random.default_rng(6)
    hits = 0
    for n in (100, 200):
        for batch in (32, 512):
            for shape in ("sig", "exp", "lin"):
                for _ in range(3):
                    t = np.arange(n) / n
                    m = {"sig": 0.02 + 0.7 / (1 + np.exp(-(t - 0.3) / 0.05)),
                         "exp": 0.02 + 0.7 * (1 - np.exp(-t / 0.25)), "lin": 0.05 + 0.7 * t}[shape]
                    y = rng.binomial(batch, m) / batch
                    hits += detect_dynamical_instability(_run({"reward_mean": y}), DEFAULT_CONFIG).detected
    assert hits <= 2
