"""The scoring pieces of benchmarks/collapse/score_simulated.py: the regime-to-label rule, the atlas onset, the
simulated families and the recall / false-positive arithmetic against hand counts."""

from __future__ import annotations

import math
import pathlib
import sys

import numpy as np
import pytest
from scipy.stats import beta

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks" / "collapse"))

import score_simulated as SS  # noqa: E402
import simulated_runs as S  # noqa: E402


def test_atlas_regimes_map_to_labels():
    assert S.atlas_label("diverged") == "collapse"
    assert S.atlas_label("stable") == "control"
    assert S.atlas_label("oscillating") is None and S.atlas_label("drifting") is None
    with pytest.raises(ValueError, match="unknown atlas regime 'exploded'"):
        S.atlas_label("exploded")


@pytest.mark.parametrize("regime,late,want", [("collapsed", 0.01, "collapse"), ("collapsed", 0.999, "control"),
                                              ("diverged", float("nan"), None), ("limit_cycle", 0.8, "control"),
                                              ("overdamped", 0.8, "control"), ("oscillatory", 0.3, "control")])
def test_bandit_regimes_map_to_labels(regime, late, want):
    assert S.bandit_label(regime, late) == want


def test_unknown_bandit_regime_is_refused():
    with pytest.raises(ValueError, match="unknown bandit regime 'stable'"):
        S.bandit_label("stable", 0.5)


def test_atlas_onset_is_where_the_policy_leaves_for_good():
    steps = np.arange(1, 101)
    tv = np.full(100, 0.05)
    tv[20:25] = 0.4  # an excursion that comes back: not the onset
    tv[60:] = 0.7  # leaves at index 60 (step 61) and stays out
    alive = np.ones(100)
    assert S.atlas_onset(tv, alive, steps) == 61.0
    alive[40:] = 0.0  # a non-finite update at index 40 (step 41) comes first
    assert S.atlas_onset(tv, alive, steps) == 41.0
    assert S.atlas_onset(np.full(100, 0.9), np.ones(100), steps) == 1.0  # out from the first step
    with pytest.raises(ValueError, match="one length"):
        S.atlas_onset(tv[:5], alive, steps)


def _row(label, detected, onset=None, label_onset=None, main=None, cell="a"):
    return dict(cell=cell, label=label, detected=detected, onset=onset, label_onset=label_onset, span=100.0,
                main=main)


def test_tally_counts_match_a_hand_count():
    rows = [_row("collapse", True, 50, 52),  # onset error 2 % -> within
            _row("collapse", True, 10, 30),  # 20 % -> outside
            _row("collapse", False, main="learning_plateau"),
            _row("collapse", False, main="kl_drift", cell="b"),
            _row("control", True, 5, cell="b"),
            _row("control", False), _row("control", False, cell="b"), _row("control", False, cell="b"),
            _row(None, True, 3), _row(None, False, cell="b")]
    t = SS.tally(rows, "cell")
    a, b, both = t["a"], t["b"], t["all"]
    assert (both["collapses"], both["found"], both["controls"], both["flagged"]) == (4, 2, 4, 1)
    assert both["recall"] == 0.5 and both["fpr"] == 0.25
    assert (both["onset_timed"], both["onset_within"]) == (2, 1)
    assert both["onset_err_median"] == pytest.approx(0.11)
    assert both["plateau_main_on_collapse"] == 1
    assert (both["not_scored"], both["not_scored_flagged"]) == (2, 1)
    assert (a["collapses"], a["found"], a["controls"], a["flagged"]) == (3, 2, 1, 0)
    assert (b["collapses"], b["found"], b["controls"], b["flagged"]) == (1, 0, 3, 1)
    # Clopper-Pearson from the beta quantiles (an independent formula)
    lo, hi = both["recall_ci"]
    assert lo == pytest.approx(beta.ppf(0.025, 2, 3)) and hi == pytest.approx(beta.ppf(0.975, 3, 2))
    assert b["recall_ci"][0] == 0.0 and b["recall_ci"][1] == pytest.approx(0.975)
    assert all(math.isnan(x) for x in SS.binom_ci(0, 0))


def test_a_collapse_without_a_timed_onset_counts_for_recall_not_for_the_onset():
    t = SS.tally([_row("collapse", True, 40, float("nan"))], "cell")["all"]
    assert (t["found"], t["onset_timed"], t["onset_err_median"]) == (1, 0, None)


@pytest.mark.parametrize("kind", sorted(S.SIM_KINDS))
def test_simulated_kinds_end_where_they_say(kind):
    """The last tenth of each simulated reward sits where its kind says: collapse and slow decline at the lost
    fraction of the rise, a small drop above half of it, flat and recovering runs at the plateau."""
    rng = np.random.default_rng(7)
    for seed in range(3):
        run, info = S.simulated_run(kind, rng, seed)
        n = info["n"]
        y = run.columns["reward_mean"]
        assert y.size == n and run.steps.size == n
        onset = int(round(info["onset_frac"] * n))
        level = 0.1 + 0.6 * (1 - math.exp(-(onset - 1) / (n / 8)))
        tail = y[-n // 10:]
        band = 5 * info["noise"] / math.sqrt(tail.size)  # 5 standard errors of the tail's mean
        want = level - info["lost"] * (level - 0.1) if kind != "recovers" else level
        assert abs(tail.mean() - want) < band, (kind, seed, tail.mean(), want)
        assert (info["label"] == "collapse") == (kind == "collapse")
        if kind == "collapse":
            assert info["label_onset"] == float(run.steps[onset])
            assert info["fall_points"] <= max(2, math.ceil(0.1 * n))
        if kind == "small_drop":
            assert info["lost"] < 0.5
        if kind == "slow_decline":
            assert info["fall_points"] > 0.1 * n


def test_unknown_simulated_kind_is_refused():
    with pytest.raises(ValueError, match="unknown simulated kind 'crash'"):
        S.simulated_run("crash", np.random.default_rng(0), 0)


def test_onset_parts():
    assert SS.onset_part(1.0, 399.0) == "first 5 %"
    assert SS.onset_part(60.0, 399.0) == "5-25 %"
    assert SS.onset_part(200.0, 399.0) == "after 25 %"
