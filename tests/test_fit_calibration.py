"""Proper scores, the combination weights and the calibrated intervals of the window forecast (NumPy, fast),
and the shipped calibration on simulated runs the creep model does not contain (slow)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from _bands import z_limit
from grpojax.fit import (
    COMBINED_METHODS,
    FORECAST_TAUS,
    calibrated_forecast,
    crps_quantiles,
    fit_calibration,
    metric_bounds,
    split_normal_quantiles,
    winkler_score,
)
from grpojax.fit._calibration import calibration_from_dict, default_calibration


def test_wider_interval_with_the_same_coverage_scores_worse():
    rng = np.random.default_rng(0)
    y = rng.normal(size=500)
    lo, hi = np.full(500, -10.0), np.full(500, 10.0)  # covers everything
    wide_lo, wide_hi = lo - 1.0, hi + 1.0               # covers the same outcomes, wider
    assert np.mean((lo <= y) & (y <= hi)) == np.mean((wide_lo <= y) & (y <= wide_hi)) == 1.0
    assert np.mean(winkler_score(wide_lo, wide_hi, y)) > np.mean(winkler_score(lo, hi, y))
    # the same at realistic widths: two intervals that miss exactly the same outcomes
    lo2, hi2 = np.full(500, -1.6), np.full(500, 1.6)
    covered = (lo2 <= y) & (y <= hi2)
    lo3, hi3 = np.where(covered, -1.7, -1.6), np.where(covered, 1.7, 1.6)
    assert np.array_equal(covered, (lo3 <= y) & (y <= hi3))
    assert np.mean(winkler_score(lo3, hi3, y)) > np.mean(winkler_score(lo2, hi2, y))


def test_winkler_closed_form_and_bad_input():
    # width 2, miss by 0.5 below at alpha 0.1: 2 + 20 * 0.5
    assert winkler_score(1.0, 3.0, 0.5, 0.1) == pytest.approx(12.0)
    assert winkler_score(1.0, 3.0, 3.25, 0.2) == pytest.approx(2.0 + 10.0 * 0.25)
    assert winkler_score(1.0, 3.0, 2.0) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="alpha"):
        winkler_score(0.0, 1.0, 0.5, alpha=1.5)
    with pytest.raises(ValueError, match="lo <= hi"):
        winkler_score(1.0, 0.0, 0.5)


def test_quantile_crps_matches_the_normal_closed_form_and_is_proper():
    sd, mu = 0.7, 0.2
    q = mu + sd * stats.norm.ppf(FORECAST_TAUS)
    for y in (-1.0, 0.2, 0.9, 2.5):
        z = (y - mu) / sd
        exact = sd * (z * (2 * stats.norm.cdf(z) - 1) + 2 * stats.norm.pdf(z) - 1 / math.sqrt(math.pi))
        assert crps_quantiles(q, y) == pytest.approx(exact, rel=0.08, abs=0.01)
    # propriety: outcomes from N(mu, sd) score best under the true sd, worse under a too narrow or too wide one
    y = np.random.default_rng(1).normal(mu, sd, 4000)
    score = {f: float(np.mean(crps_quantiles(mu + f * sd * stats.norm.ppf(FORECAST_TAUS), y))) for f in (0.5, 1.0, 2.0)}
    assert score[1.0] < score[0.5] and score[1.0] < score[2.0]
    # a point forecast (all quantiles equal) scores its absolute error
    assert crps_quantiles(np.full(FORECAST_TAUS.size, 1.0), 1.75) == pytest.approx(0.75)


def test_split_normal_quantiles_reproduce_the_interval():
    q = split_normal_quantiles(1.0, 0.5, 2.0, 0.9, np.array([0.05, 0.5, 0.95]))
    assert q == pytest.approx([0.5, 1.0, 2.0])


def test_weighted_median_combination_is_robust_and_reduces_to_the_median():
    from grpojax.fit._calibration import combine_forecasts

    rng = np.random.default_rng(5)
    P = rng.normal(size=(200, 4))
    # equal weights: the ordinary median; weights are per forecaster (broadcast over rows)
    assert np.allclose(combine_forecasts(P, np.full(4, 0.25)), np.median(P, axis=1))
    # more than half the weight on one forecaster: that forecaster, whatever the others say
    assert np.allclose(combine_forecasts(P, [0.1, 0.6, 0.2, 0.1]), P[:, 1])
    # a zero weight plays no part: the median of the other three
    assert np.allclose(combine_forecasts(P, [1 / 3, 1 / 3, 1 / 3, 0.0]), np.median(P[:, :3], axis=1))
    # one forecaster extrapolating wildly moves the median at most to its neighbour; the mean follows it
    wild = P.copy()
    wild[:, 3] = 1e6
    med = combine_forecasts(wild, np.full(4, 0.25))
    assert np.all(med <= np.max(P[:, :3], axis=1)) and np.all(combine_forecasts(wild, np.full(4, 0.25), "mean") > 1e5)
    # many weight vectors at once (the fitting grid): one row per weight vector
    W = np.array([[1, 0, 0, 0], [0, 0, 0, 1.0]])
    assert np.allclose(combine_forecasts(P[None], W[:, None, :]), P[:, [0, 3]].T)
    with pytest.raises(ValueError, match="combine rule"):
        combine_forecasts(P, np.full(4, 0.25), "mode")


def test_error_scale_is_the_prefix_sd_at_least_half_its_noise():
    from grpojax.fit._calibration import forecast_scale

    assert forecast_scale(0.3, 0.2) == pytest.approx(0.3)
    assert forecast_scale(0.05, 0.2) == pytest.approx(0.1)  # a prefix that is all noise: half the noise sd
    assert np.allclose(forecast_scale([0.3, 0.0], [0.2, 0.4]), [0.3, 0.2])


def _records(rng, n_groups=12, per=10, prefixes=(0.25, 0.5, 0.75)):
    """Synthetic past forecasts: the truth, four forecasters of known accuracy (creep best, sigmoid worst), and a
    scale that is the true sd of the best combination's error (times a horizon factor)."""
    recs = []
    sds = {"creep": 0.1, "persistence": 0.3, "exponential": 0.2, "sigmoid": 0.5}
    for g in range(n_groups):
        for _ in range(per):
            for f in prefixes:
                h = (1 - f) / f
                grow = 1.0 + 0.5 * h  # errors grow with the horizon
                truth = rng.normal()
                comps = {m: truth + grow * s * rng.normal() for m, s in sds.items()}
                recs.append({"horizon": h, "noise_ratio": rng.uniform(), "scale": 0.1, "truth": truth, "sd": 1.0,
                             "group": f"repo{g}", "components": comps})
    return recs


def test_fitted_calibration_learns_the_best_forecaster_and_covers_new_runs(test_seed):
    rng = np.random.default_rng(2 + test_seed)
    # learned weights (a finite prior) in units of the prefix scale alone
    cal = fit_calibration(_records(rng, per=30), horizons=[1 / 3, 1.0, 3.0], noise_edges=None,  # two noise bins
                          shrink=3.0, scale_rule="prefix")
    assert cal.weights.shape == (3, 2, 4)
    assert np.allclose(cal.weights.sum(-1), 1.0)
    creep = COMBINED_METHODS.index("creep")
    assert np.all(cal.weights[..., creep] == cal.weights.max(-1))  # the most accurate forecaster weighs most
    # the learned interval widens with the horizon, as the errors do
    width = cal.quantiles[:, -2] - cal.quantiles[:, 1]
    assert width[0] < width[1] < width[2]
    # coverage of the 90% interval on new runs from the same process (2400 forecasts): 0.86-0.94 with the plain
    # quantiles; with the finite-sample levels of 12 groups the interval is taken at the 97.5% level: 0.95-0.995.
    # Bands: over 12 seeds the two coverages measured 0.899 ± 0.009 and 0.973 ± 0.005 (the spread comes from the
    # training draws as much as from the 2400 test forecasts); each band is mean ± 4 sd or more
    new = _records(np.random.default_rng(3 + test_seed), n_groups=80)

    def coverage(c):
        return np.mean([(lambda f: f["lo"] <= r["truth"] <= f["hi"])(calibrated_forecast(
            r["components"], horizon=r["horizon"], noise_ratio=r["noise_ratio"], scale=r["scale"], cal=c)) for r in new])

    plain = fit_calibration(_records(np.random.default_rng(2 + test_seed), per=30), horizons=[1 / 3, 1.0, 3.0],
                            noise_edges=None,
                            shrink=3.0, scale_rule="prefix", finite_sample=False)
    assert 0.86 <= coverage(plain) <= 0.94
    assert 0.95 <= coverage(cal) <= 0.995
    # and the combination is about as good as the best single forecaster in absolute error: the ratio measured
    # 1.025 ± 0.018 over 12 seeds (1.000 to 1.058: the earlier 1.05 failed 1 of the 12); 1.10 is 4 sd above,
    # and well below the 1.28 of an equal-weight median that learned nothing
    comb = [abs(calibrated_forecast(r["components"], horizon=r["horizon"], noise_ratio=r["noise_ratio"], scale=r["scale"],
                                    cal=cal)["mean"] - r["truth"]) for r in new]
    best = [abs(r["components"]["creep"] - r["truth"]) for r in new]
    assert np.mean(comb) <= 1.10 * np.mean(best)


def test_calibration_round_trip_bounds_and_extrapolation():
    cal = fit_calibration(_records(np.random.default_rng(4), n_groups=6, per=5), horizons=[1 / 3, 1.0, 3.0])
    back = calibration_from_dict(json.loads(json.dumps(cal.to_dict())))
    assert np.allclose(back.quantiles, cal.quantiles, atol=1e-4) and back.methods == cal.methods
    assert back.combine == cal.combine == "median"
    with pytest.raises(ValueError, match="combine"):
        calibration_from_dict({**cal.to_dict(), "combine": "mode"})
    bad = cal.to_dict()
    bad["quantiles"] = bad["quantiles"][:2]
    with pytest.raises(ValueError, match="shapes"):
        calibration_from_dict(bad)
    comps = {"creep": 0.97, "persistence": 0.99, "exponential": 0.98, "sigmoid": 0.96}
    c = calibrated_forecast(comps, horizon=1.0, noise_ratio=0.3, scale=0.2, cal=cal, bounds=(0.0, 1.0))
    assert 0.0 <= c["lo"] <= c["mean"] <= c["hi"] <= 1.0 and np.all(c["quantiles"] <= 1.0)
    # beyond the longest horizon the interval never narrows; a wider level gives a wider interval
    w = [(lambda c: c["hi"] - c["lo"])(calibrated_forecast(comps, horizon=h, noise_ratio=0.3, scale=0.2, cal=cal))
         for h in (3.0, 6.0, 12.0)]
    assert w[0] <= w[1] <= w[2]
    c80 = calibrated_forecast(comps, horizon=1.0, noise_ratio=0.3, scale=0.2, cal=cal, level=0.8)
    c99 = calibrated_forecast(comps, horizon=1.0, noise_ratio=0.3, scale=0.2, cal=cal, level=0.99)
    c90 = calibrated_forecast(comps, horizon=1.0, noise_ratio=0.3, scale=0.2, cal=cal)
    assert c80["hi"] - c80["lo"] < c90["hi"] - c90["lo"] < c99["hi"] - c99["lo"]
    # a failed forecaster drops out; none left is one clear error
    c = calibrated_forecast({**comps, "sigmoid": float("nan")}, horizon=1.0, noise_ratio=0.3, scale=0.2, cal=cal)
    assert c["weights"]["sigmoid"] == 0.0 and sum(c["weights"].values()) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="no finite forecast"):
        calibrated_forecast({m: float("nan") for m in comps}, horizon=1.0, noise_ratio=0.3, scale=0.2, cal=cal)


def test_shipped_calibration_is_small_sane_and_says_how_it_was_made():
    cal = default_calibration()
    assert cal.methods == COMBINED_METHODS and cal.horizons.size >= 3
    assert np.allclose(cal.weights.sum(-1), 1.0, atol=1e-3) and np.all(cal.weights >= 0)
    assert np.all(np.diff(cal.quantiles, axis=-1) >= 0)
    assert np.all(cal.quantiles[:, 0] < 0) and np.all(cal.quantiles[:, -1] > 0)
    src = json.dumps(cal.source)
    assert "experiments/forecast_real_runs.py" in src and "--write-calibration" in src
    assert "/work" not in src and "shared" not in src  # no machine paths in what ships


def _family_records(n_per_family: int, seed: int, prefixes=(0.25, 0.5, 0.75)):
    """Past forecasts on simulated runs of the three families the creep model does not contain (late collapse,
    second rise, step change of the schedule; the experiment's simulator), by two cheap NumPy forecasters:
    persistence (the prefix's last 10%) and a straight line through the prefix's second half, extrapolated to
    the target window. Scale: the prefix's first-difference noise sd. Groups of 5 runs (exchangeable)."""
    from _experiments import load_experiment

    exp = load_experiment("forecast_real_runs")
    recs, j = [], 0
    for fam in exp.FAMILIES:
        for s, y in exp.simulate_family(fam, n_per_family, seed):
            span = s[-1] - s[0]
            win = s > s[-1] - 0.1 * span
            for f in prefixes:
                pre = s <= s[0] + f * span
                sp, yp = s[pre], y[pre]
                last = sp > sp[-1] - 0.1 * span
                half = sp >= sp[0] + 0.5 * (sp[-1] - sp[0])
                slope, icpt = np.polyfit(sp[half], yp[half], 1)
                trend = icpt + slope * float(np.mean(s[win]))
                recs.append({"horizon": (1 - f) / f, "noise_ratio": 0.5, "truth": float(np.mean(y[win])),
                             "sd": float(np.std(y)), "scale": float(np.std(np.diff(yp)) / np.sqrt(2.0)),
                             "group": f"{fam}-{j // 5}", "family": fam,
                             "components": {"persistence": float(np.mean(yp[last])), "trend": float(trend)}})
            j += 1
    return recs


def test_split_conformal_calibration_covers_simulated_families_the_model_does_not_contain(test_seed):
    """Calibrated on 450 draws of a late collapse, a second rise and a step change of the schedule (150 each), the
    90% intervals of 1350 forecasts on fresh draws (another seed, prefixes 0.25/0.5/0.75) cover 84-97% of the
    realised window means (split-conformal quantiles of the scaled |error|: about 90% in expectation), where the
    forecasters' own noise intervals cover far less.

    Band: over 20 seed pairs (calibration 11 + 2k, test 12 + 2k) the coverage measured 0.906 ± 0.017 (0.869 to
    0.933), the spread coming from both the calibration draws and the test draws; 0.84-0.97 is mean ± 4 sd (the
    earlier 0.85-0.95 was 2.6 sd above). Per family it measured 0.82 at the lowest; the floor 0.7."""
    cal = fit_calibration(_family_records(150, seed=11 + 2 * test_seed), horizons=[1 / 3, 1.0, 3.0],
                          methods=("persistence", "trend"))
    test = _family_records(150, seed=12 + 2 * test_seed)
    hits, raw_hits, width = [], [], []
    for r in test:
        c = calibrated_forecast(r["components"], horizon=r["horizon"], noise_ratio=0.5, scale=r["scale"], cal=cal)
        hits.append(c["lo"] <= r["truth"] <= c["hi"])
        width.append((c["hi"] - c["lo"]) / r["sd"])
        p = r["components"]["persistence"]
        raw_hits.append(abs(r["truth"] - p) <= 1.645 * r["scale"])
    assert 0.84 <= np.mean(hits) <= 0.97, np.mean(hits)
    assert np.mean(raw_hits) < 0.6, np.mean(raw_hits)  # the noise alone knows nothing of the collapse (0.31-0.36)
    # per family it is a marginal promise only, but none of them is abandoned
    fam = np.array([r["family"] for r in test])
    for f in set(fam):
        assert np.mean(np.array(hits)[fam == f]) >= 0.7, f
    # the interval is finite and its width adapts: longer horizons get wider intervals
    h = np.array([r["horizon"] for r in test])
    assert np.all(np.isfinite(width)) and np.median(np.array(width)[h > 2]) > np.median(np.array(width)[h < 0.5])


def test_metric_bounds_by_name():
    for name in ("eval_accuracy", "pass@1", "pass_rate", "rewards/accuracy_reward", "success_rate", "frac_zero_std"):
        assert metric_bounds(name) == (0.0, 1.0), name
    for name in ("reward_mean", "eval_reward", "kl", "bypass_loss", "fraction"):
        assert metric_bounds(name) is None, name


@pytest.mark.slow
@pytest.mark.xfail(strict=False, reason="measured: the shipped calibration, learned from real runs only, covers 84% / "
                   "36% / 58% of these simulated families at prefixes 0.25 / 0.5 / 0.75 (experiments/results/"
                   "forecast_real_runs.md): it promises coverage for runs like the corpus's; calibrated on draws of "
                   "the families themselves it covers them (test_split_conformal_calibration_covers_...)")
def test_shipped_calibration_covers_simulated_families_the_model_does_not_contain():
    """Fresh runs (a seed the calibration never saw) of a late collapse, a second rise and a step change of the
    schedule, 30 of each, forecast from 25% and 50% of the run: the calibrated 90% intervals cover 85-95% of the
    realised window means (180 forecasts: binomial sd 0.022)."""
    import jax

    from _experiments import load_experiment
    from grpojax.fit import forecast_windows

    exp = load_experiment("forecast_real_runs")
    items = exp.simulated_items(30, seed=exp.SIM_SEED + 1000)
    curves = [(s, y) for (_, _, _, s, y) in items]
    hits = []
    for f in (0.25, 0.5):
        fcs = forecast_windows(curves, prefix=f, method="combined", key=jax.random.PRNGKey(5))
        for (s, y), fc in zip(curves, fcs):
            truth = float(np.mean(y[s > fc.window[0]]))
            hits.append(fc.lo <= truth <= fc.hi)
    assert 0.85 <= np.mean(hits) <= 0.95, np.mean(hits)


def test_a_forecaster_that_does_not_vouch_for_its_fit_abstains():
    from grpojax.fit._calibration import votes

    comps = {"creep": {"mean": 0.62, "status": "ok"}, "persistence": {"mean": 0.50, "status": "ok"},
             "exponential": {"mean": 0.41, "status": "no_learning"},  # the prefix mean, a placeholder
             "sigmoid": {"mean": 0.41, "status": "no_learning"}}
    v = votes(comps)
    assert v["creep"] == 0.62 and v["persistence"] == 0.50
    assert math.isnan(v["exponential"]) and math.isnan(v["sigmoid"])
    cal = fit_calibration(_records(np.random.default_rng(5), n_groups=6, per=5), horizons=[1 / 3, 1.0, 3.0])
    c = calibrated_forecast(v, horizon=1.0, noise_ratio=0.3, scale=0.05, cal=cal)
    assert c["mean"] == pytest.approx(0.56)  # the median of the two votes; counting the placeholders gave 0.455
    assert c["weights"]["exponential"] == c["weights"]["sigmoid"] == 0.0
    # persistence votes whatever its status; a flagged creep abstains; nobody vouching: every finite point votes
    flagged = {**comps, "creep": {"mean": 0.9, "status": "collapse"}, "persistence": {"mean": 0.5, "status": "x"}}
    assert math.isnan(votes(flagged)["creep"]) and votes(flagged)["persistence"] == 0.5
    nobody = {m: {"mean": 0.3, "status": "no_learning"} for m in ("creep", "exponential")}
    assert votes(nobody) == {"creep": 0.3, "exponential": 0.3}
    assert math.isnan(votes({"creep": {"mean": float("nan"), "status": "ok"},
                             "persistence": {"mean": 0.4, "status": "ok"}})["creep"])


def test_default_weights_are_exactly_equal_and_the_combination_is_the_plain_median():
    cal = fit_calibration(_records(np.random.default_rng(6), n_groups=6, per=5), horizons=[1 / 3, 1.0, 3.0])
    assert np.all(cal.weights == 0.25)  # exact: a near-tie would make the median pick one forecaster
    rng = np.random.default_rng(7)
    for _ in range(50):
        pts = dict(zip(COMBINED_METHODS, rng.normal(size=4)))
        c = calibrated_forecast(pts, horizon=rng.uniform(0.2, 4.0), noise_ratio=0.3, scale=0.1, cal=cal)
        assert c["mean"] == pytest.approx(float(np.median(list(pts.values()))), abs=1e-12)
    with pytest.raises(ValueError, match="shrink"):
        fit_calibration(_records(rng, n_groups=2, per=2), horizons=[1.0], shrink=-1.0)


def test_error_scale_is_the_larger_of_the_prefix_scale_and_the_spread_of_the_votes():
    from grpojax.fit._calibration import error_scale

    assert error_scale(0.1, [0.2, 0.5, np.nan, 0.3]) == pytest.approx(0.3)
    assert error_scale(0.4, [0.2, 0.5, np.nan, 0.3]) == pytest.approx(0.4)
    assert error_scale(0.4, [0.2, 0.5], "prefix") == pytest.approx(0.4)
    assert error_scale(np.nan, [0.2, 0.5]) == pytest.approx(0.3)  # an unknown scale gives way to the spread
    assert np.allclose(error_scale([0.1, 0.1], [[0.0, 1.0], [0.0, 0.05]]), [1.0, 0.1])
    with pytest.raises(ValueError, match="scale rule"):
        error_scale(0.1, [0.0], "widest")


def _disagreement_records(rng, n_groups=12, per=20):
    """Past forecasts whose error sd is the forecasters' disagreement: half the runs easy (forecasters agree
    within 0.05), half hard (they disagree by about 1); the prefix scale is 0.01 for all."""
    recs = []
    for g in range(n_groups):
        for i in range(per):
            d = 0.05 if i % 2 else 1.0
            truth = rng.normal()
            centre = truth + d * rng.normal()
            comps = dict(zip(COMBINED_METHODS, centre + d * np.array([-0.5, -0.1, 0.1, 0.5])))
            recs.append({"horizon": 1.0, "noise_ratio": 0.5, "scale": 0.01, "truth": truth, "sd": 1.0,
                         "group": f"repo{g}", "components": comps, "hard": d > 0.5})
    return recs


def test_intervals_in_units_of_the_disagreement_cover_easy_and_hard_runs_and_score_better(test_seed):
    """The prefix scale gives one width for all: far too wide for the easy half, too narrow for the hard half;
    in units of the forecasters' disagreement both halves are covered at the level, with a better score.

    Band: a half's coverage varies with its 400 test forecasts (binomial sd 0.015) and with the 960 training
    records the calibration's quantiles come from (0.0097): sd 0.018 (measured 0.018 over 200 seeds), two
    coverages at the Bonferroni limit of 3.5 sds. The prefix scale's hard-half coverage (0.80 on average, sd
    0.028 over those seeds) is asked to stay below its level and below the spread rule's on the same records."""
    train = _disagreement_records(np.random.default_rng(8 + 2 * test_seed), n_groups=48)
    new = _disagreement_records(np.random.default_rng(9 + 2 * test_seed), 40)
    res = {}
    for rule in ("prefix", "prefix_or_spread"):
        cal = fit_calibration(train, horizons=[1.0], scale_rule=rule, finite_sample=False)  # the units, not the level
        cf = [calibrated_forecast(r["components"], horizon=1.0, noise_ratio=0.5, scale=0.01, cal=cal) for r in new]
        hit = np.array([c["lo"] <= r["truth"] <= c["hi"] for c, r in zip(cf, new)])
        hard = np.array([r["hard"] for r in new])
        wk = np.mean([winkler_score(c["lo"], c["hi"], r["truth"]) for c, r in zip(cf, new)])
        res[rule] = (hit[hard].mean(), hit[~hard].mean(), wk)
    p_hard, p_easy, p_wk = res["prefix"]
    s_hard, s_easy, s_wk = res["prefix_or_spread"]
    n_half = len(new) // 2
    band = z_limit(2) * np.sqrt(0.9 * 0.1 / n_half + 0.9 * 0.1 / len(train))
    assert p_hard < min(0.9, s_hard) and p_easy > 0.99, res
    assert abs(s_hard - 0.9) < band and abs(s_easy - 0.9) < band, (res, band)
    assert s_wk < 0.8 * p_wk


def test_fit_calibration_takes_a_forecasts_own_components_and_lets_only_the_vouching_ones_vote():
    from grpojax.fit._calibration import votes

    rng = np.random.default_rng(10)
    recs = _records(rng, n_groups=5, per=4)
    statuses = ["ok", "no_learning", "law_cannot_describe", "ok"]
    full = [{**r, "components": {m: {"mean": v, "status": statuses[i % 4] if m == "sigmoid" else "ok", "lo": v - 1,
                                     "hi": v + 1} for m, v in r["components"].items()}} for i, r in enumerate(recs)]
    a = fit_calibration(full, horizons=[1 / 3, 1.0, 3.0])
    b = fit_calibration([{**r, "components": votes(f["components"])} for r, f in zip(recs, full)], horizons=[1 / 3, 1.0, 3.0])
    c = fit_calibration(recs, horizons=[1 / 3, 1.0, 3.0])  # everybody votes
    assert np.array_equal(a.quantiles, b.quantiles) and not np.array_equal(a.quantiles, c.quantiles)


def test_signed_quantiles_follow_a_skewed_error_and_symmetric_ones_do_not(test_seed):
    """Errors ~ Exponential(1) − 0.5 (in units of the scale), 40 groups: the signed quantiles sit at that law's
    5% / 95% points raised by the finite-sample correction, the symmetric ones at ±(the |error| quantile); each
    covers about 90% of fresh errors.

    Bands: a sample quantile at level q of n draws has sd sqrt(q (1 - q) / n) / pdf(its value): 0.13 for the
    upper one here (the density is 0.026 there), 0.004 for the lower one; the upper is asked within 4 of those
    sds (the earlier 0.2, 1.5 sd, failed 6 seeds of 60), the lower within 0.05. Coverage of fresh errors
    measured 0.945 ± 0.008 (signed) and 0.923 ± 0.009 (symmetric) over 60 seeds; 0.88-0.98 is 4 sd or more."""
    rng = np.random.default_rng(8 + test_seed)
    n = 2000
    recs = [{"horizon": 1.0, "noise_ratio": 0.3, "scale": 1.0, "sd": 1.0, "group": f"g{i % 40}",
             "truth": float(rng.exponential() - 0.5), "components": {"persistence": 0.0}} for i in range(n)]
    kw = {"horizons": [1.0], "methods": ("persistence",)}
    signed, sym = fit_calibration(recs, symmetric=False, **kw), fit_calibration(recs, **kw)
    lev = 0.95 * 41 / 40
    lo, hi = (calibrated_forecast({"persistence": 0.0}, horizon=1.0, noise_ratio=0.3, scale=1.0, cal=c)
              for c in (signed, sym))
    q_sd = math.sqrt(lev * (1 - lev) / n) / stats.expon.pdf(stats.expon.ppf(lev))
    assert lo["hi"] == pytest.approx(stats.expon.ppf(lev) - 0.5, abs=4 * q_sd)
    assert lo["lo"] == pytest.approx(stats.expon.ppf(1 - lev) - 0.5, abs=0.05)
    assert hi["lo"] == pytest.approx(-hi["hi"]) and hi["hi"] < lo["hi"]  # symmetric: ±, the long tail shared
    fresh = rng.exponential(size=n) - 0.5
    for c in (lo, hi):
        assert 0.88 <= np.mean((c["lo"] <= fresh) & (fresh <= c["hi"])) <= 0.98
    assert (lo["hi"] - lo["lo"]) < (hi["hi"] - hi["lo"])  # leaning with the skew: narrower


def test_the_finite_sample_correction_counts_groups_not_records():
    from grpojax.fit._calibration import conformal_level

    assert conformal_level(0.9, 32) == pytest.approx(0.9 * 33 / 32)
    assert conformal_level([0.5, 0.99], 9).tolist() == pytest.approx([0.5 * 10 / 9, 1.0])
    with pytest.raises(ValueError, match="n_groups=0"):
        conformal_level(0.9, 0)
    # 10 groups of 50 records: the 90% interval is taken at the 99% level of the pooled |errors| (0.9·11/10),
    # whatever the number of records per group
    rng = np.random.default_rng(9)
    z = rng.normal(size=500)
    recs = [{"horizon": 1.0, "noise_ratio": 0.3, "scale": 1.0, "sd": 1.0, "group": f"g{i % 10}", "truth": float(v),
             "components": {"persistence": 0.0}} for i, v in enumerate(z)]
    cal = fit_calibration(recs, horizons=[1.0], methods=("persistence",))
    c = calibrated_forecast({"persistence": 0.0}, horizon=1.0, noise_ratio=0.3, scale=1.0, cal=cal)
    from grpojax.fit._calibration import weighted_quantile

    assert c["hi"] == pytest.approx(weighted_quantile(np.abs(z), 0.99, np.ones(500)), rel=1e-6)
