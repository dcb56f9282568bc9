"""P(window mean >= target) from a forecast's predictive distribution (``WindowForecast.prob_at_least``,
``grpojax fit --prefix F --target T``).

The probabilities are checked against Monte Carlo draws from the same distribution made by an independent
route: the calibration's own quantile function (``error_quantiles`` at uniform levels) for the calibrated
quantiles, ``split_normal_quantiles`` at uniform levels for a bare interval. Band: 4.5 binomial standard
deviations of the Monte Carlo fraction (a false failure about once in 150,000 comparisons).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from grpojax._errors import InvalidValueError
from grpojax._exceedance import prob_at_least, quantile_survival
from grpojax.cli import main
from grpojax.fit import FORECAST_TAUS, forecast_window, split_normal_quantiles
from grpojax.fit._calibration import default_calibration, error_quantiles

FIX = pathlib.Path(__file__).parent / "fixtures" / "fit"
N_MC = 200_000


def _band(p, n=N_MC):
    return 4.5 * np.sqrt(np.maximum(p * (1 - p), 1e-6) / n) + 1e-9


@pytest.mark.parametrize("horizon", [1.0, 3.0, 10.0])
def test_calibrated_quantiles_match_monte_carlo(horizon):
    cal = default_calibration()
    point, scale = 0.42, 0.07
    quantiles = point + scale * error_quantiles(cal, horizon)
    draws = point + scale * error_quantiles(cal, horizon, np.random.default_rng(1).uniform(size=N_MC))
    # targets inside the stated quantiles and far out in both tails
    targets = point + scale * np.array([-25.0, -8.0, -3.0, -1.0, -0.3, 0.0, 0.2, 0.9, 2.5, 6.0, 20.0])
    p = prob_at_least({"quantiles": {"taus": cal.taus, "values": quantiles}}, targets)
    mc = np.array([(draws >= t).mean() for t in targets])
    assert np.all(np.abs(p - mc) <= _band(mc)), (p, mc)


def test_split_normal_interval_matches_monte_carlo():
    point, lo, hi = 0.5, 0.3, 0.9  # a lopsided interval: each side its own sd
    u = np.random.default_rng(2).uniform(size=N_MC)
    draws = split_normal_quantiles(point, lo, hi, 0.8, u)
    targets = np.array([0.0, 0.25, 0.4, 0.5, 0.6, 0.9, 1.3])
    p = prob_at_least({"mean": point, "lo": lo, "hi": hi, "level": 0.8}, targets)
    mc = np.array([(draws >= t).mean() for t in targets])
    assert np.all(np.abs(p - mc) <= _band(mc)), (p, mc)
    assert p[3] == 0.5  # the point is the median


def test_window_forecast_probability_matches_its_own_quantiles():
    """A real combined forecast: its quantiles are point + scale * the calibration's error quantiles; draws of
    that distribution give the probabilities ``fc.prob_at_least`` states."""
    fc = forecast_window(FIX / "rising.jsonl", prefix=0.5)
    cal = default_calibration()
    eq = error_quantiles(cal, fc.features["horizon"])
    values = np.asarray(fc.quantiles["values"])
    scale = (values[-1] - values[0]) / (eq[-1] - eq[0])
    np.testing.assert_allclose(values, fc.mean + scale * eq, rtol=1e-9, atol=1e-12)  # the reconstruction holds
    draws = fc.mean + scale * error_quantiles(cal, fc.features["horizon"], np.random.default_rng(3).uniform(size=N_MC))
    targets = np.quantile(draws, [0.001, 0.03, 0.2, 0.5, 0.8, 0.97, 0.999])
    p = fc.prob_at_least(targets)
    mc = np.array([(draws >= t).mean() for t in targets])
    assert np.all(np.abs(p - mc) <= _band(mc)), (p, mc)
    assert isinstance(fc.prob_at_least(float(fc.mean)), float)


def _grid_is_monotone(p):
    return np.all(np.diff(p) <= 1e-12) and np.all((p >= 0) & (p <= 1))


@pytest.mark.parametrize("clip", [None, (0.0, 0.5), (0.35, 1.0)])
def test_probability_is_monotone_in_the_target(clip):
    cal = default_calibration()
    q = 0.42 + 0.07 * error_quantiles(cal, 3.0)
    if clip is not None:  # a forecast clipped to a metric's range: repeated quantiles, a point mass at the edge
        q = np.clip(q, *clip)
    t = np.linspace(-1.0, 2.0, 3001)
    p = prob_at_least({"quantiles": {"taus": cal.taus, "values": q}}, t, bounds=clip)
    assert _grid_is_monotone(p)
    assert p[0] == pytest.approx(1.0, abs=1e-3) and p[-1] == pytest.approx(0.0, abs=1e-3)
    if clip is not None:
        lo, hi = clip
        assert p[t <= lo].min() == 1.0 and p[t > hi].max() == 0.0
        # the mass clipped to the upper edge: P(Y >= hi) is the share of quantiles at it, about
        at_top = float(prob_at_least({"quantiles": {"taus": cal.taus, "values": q}}, hi))
        n_top = int(np.sum(q == hi))
        if n_top > 1:
            assert cal.taus[-n_top - 1] <= 1 - at_top + 1e-12 <= cal.taus[-n_top] + 1e-12
    p_sn = prob_at_least({"mean": 0.5, "lo": 0.45, "hi": 0.7}, t)
    assert _grid_is_monotone(p_sn)


def test_a_point_mass_forecast():
    q = np.full(FORECAST_TAUS.size, 0.3)
    p = quantile_survival(FORECAST_TAUS, q, [0.2, 0.3, 0.30001])
    np.testing.assert_array_equal(p, [1.0, 1.0, 0.0])
    p = prob_at_least({"mean": 0.3, "lo": 0.3, "hi": 0.3}, [0.2, 0.3, 0.4])
    np.testing.assert_array_equal(p, [1.0, 1.0, 0.0])


@pytest.mark.parametrize("target", [float("nan"), float("inf"), "0.5", [0.1, float("nan")], None, {"t": 1}])
def test_bad_target_is_a_one_line_error(target):
    with pytest.raises(InvalidValueError, match="target must be a finite number") as e:
        prob_at_least({"mean": 0.5, "lo": 0.4, "hi": 0.6}, target)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("forecast, bounds, match", [
    ({"mean": 0.5}, None, "carry quantiles or mean, lo and hi"),
    ({"mean": float("nan"), "lo": 0.4, "hi": 0.6}, None, "must be finite"),
    ({"mean": 0.7, "lo": 0.4, "hi": 0.6}, None, "must hold its point"),
    ({"quantiles": {"taus": FORECAST_TAUS, "values": FORECAST_TAUS[::-1]}}, None, "must not decrease"),
    ({"quantiles": {"taus": [0.1, 0.2], "values": [0.0, 1.0]}}, None, "both sides of 0.5"),
    ({"mean": 0.5, "lo": 0.4, "hi": 0.6}, (1.0, 0.0), "lo < hi"),
])
def test_bad_forecast_is_a_one_line_error(forecast, bounds, match):
    with pytest.raises(InvalidValueError, match=match) as e:
        prob_at_least(forecast, 0.5, bounds=bounds)
    assert "\n" not in str(e.value)


def test_module_imports_no_jax_and_no_scipy():
    code = ("import sys, grpojax._exceedance as m; "
            "print(m.prob_at_least({'mean': 0.5, 'lo': 0.4, 'hi': 0.6}, 0.55)); "
            "bad = [k for k in ('jax', 'scipy', 'matplotlib.pyplot') if k in sys.modules]; "
            "sys.exit(f'imported {bad}' if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


# ------------------------------------------------------------------------------------------- command line


def test_fit_cli_target_line_and_json(tmp_path, capsys):
    target = 0.5
    rc = main(["fit", str(FIX / "rising.jsonl"), "--prefix", "0.5", "--target", str(target), "--no-plot",
               "--out", str(tmp_path)])
    assert rc == 0
    said = capsys.readouterr().out
    (run,) = json.loads((tmp_path / "fit.json").read_text())["runs"].values()
    wf = run["window_forecast"]
    # the same forecast from Python (same seed, method, window and bounds defaults) gives the same probability
    fc = forecast_window(FIX / "rising.jsonl", prefix=0.5)
    assert wf["mean"] == pytest.approx(fc.mean, rel=1e-12)
    assert wf["target"] == target
    assert wf["p_at_least"] == pytest.approx(fc.prob_at_least(target), abs=1e-12)
    assert 0.0 <= wf["p_at_least"] <= 1.0
    assert wf["reached_target"] == (wf["observed_mean"] >= target)
    line = next(ln for ln in said.splitlines() if "P(mean reward_mean over steps" in ln)
    assert f">= {target:g}) = {wf['p_at_least']:.3f}" in line
    assert ("reached" in line) and (("yes" in line) == wf["reached_target"])


def test_fit_cli_target_in_json_rows(tmp_path, capsys):
    rc = main(["fit", str(FIX / "rising.jsonl"), "--prefix", "0.5", "--target", "0.9", "--no-plot",
               "--out", str(tmp_path), "--json"])
    assert rc == 0
    rows = json.loads(capsys.readouterr().out)
    rows = rows["rows"] if isinstance(rows, dict) else rows
    (win,) = [r for r in rows if str(r.get("law", "")).startswith("window:")]
    assert win["target"] == 0.9 and 0.0 <= win["p_at_least"] <= 1.0


@pytest.mark.parametrize("argv, msg", [
    (["--target", "nan", "--prefix", "0.5"], "--target"),
    (["--target", "0.5"], "--target 0.5 needs --prefix"),
    (["--target", "0.5", "--prefix", "1.5"], "--prefix"),
    (["--target", "x", "--prefix", "0.5"], "--target"),
])
def test_fit_cli_target_errors(tmp_path, capsys, argv, msg):
    rc = main(["fit", str(FIX / "rising.jsonl"), "--out", str(tmp_path), "--no-plot", *argv])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert msg in err and len(err.splitlines()) <= 2, err


# ----------------------------------------------------------------------------------- the corpus experiment


def _synthetic_records(rng, sizes, sds, prefix=0.5):
    """Records as ``forecast_real_runs.forecast_records`` makes them: the four forecasters agree on 0, the truth
    is 0 plus the group's error (sd ``sds[g]``), the prefix scale is 1."""
    recs = []
    for g, (n, sd) in enumerate(zip(sizes, sds)):
        for i in range(n):
            pts = {m: float(rng.normal(0.0, 0.05)) for m in ("creep", "persistence", "exponential", "sigmoid")}
            recs.append({"run": f"r{g}-{i}", "repo": f"g{g}", "group": f"g{g}", "metric": "reward_mean",
                         "prefix": prefix, "truth": float(rng.normal(0.0, sd)), "sd": 1.0, "horizon": 1.0,
                         "noise_ratio": 0.5, "scale": 1.0, "noise_sd": 0.2, "for_weights": True,
                         "components": pts, "raw_components": pts,
                         "intervals": {m: [v - 0.3, v + 0.3] for m, v in pts.items()}})
    return recs


def test_inflation_learned_on_training_groups_gives_pooled_coverage():
    """Large groups with large errors, small groups with small ones: the calibration, every group weighing the
    same, covers the pooled records far less than 90%; the factor learned by nested leave-one-group-out on the
    training groups brings fresh records of the same groups to about 90% (band: 4.5 sd of the estimate from 280
    training records and of the 5,600 test records' fraction). The factor errs on the wide side (0.91-0.96 over
    three seeds): each inner calibration lacks the group it is scored on."""
    from _experiments import load_experiment

    fe = load_experiment("forecast_exceedance")
    sizes, sds = [40] * 4 + [5] * 24, [4.0] * 4 + [1.0] * 24
    rng = np.random.default_rng(4)
    train = _synthetic_records(rng, sizes, sds)
    test = _synthetic_records(rng, [20 * n for n in sizes], sds)
    c = fe.inflation(train, [], (0.5,))[0.5]
    cal = fe._fit(train, (0.5,))
    plain, inflated = [], []
    for r in test:
        cf = fe._combined(r, cal)
        half = 0.5 * (cf["hi"] - cf["lo"])
        plain.append(abs(r["truth"] - cf["mean"]) <= half)
        inflated.append(abs(r["truth"] - cf["mean"]) <= c * half)
    band = 4.5 * np.sqrt(0.09 / len(train) + 0.09 / len(test))
    assert np.mean(plain) < 0.9 - band  # the design is one where the repository-weighted level misses
    assert abs(np.mean(inflated) - 0.9) < band, (c, np.mean(inflated))


def test_targets_and_brier():
    from _experiments import load_experiment

    fe = load_experiment("forecast_exceedance")
    r = {"components": {"persistence": 0.4}, "noise_sd": 0.05}
    np.testing.assert_allclose(fe.targets(r), 0.4 + np.array(fe.KS) * 0.05)
    assert fe.targets({**r, "noise_sd": 0.0}).size == 0
    assert fe.brier([1.0, 0.0, 0.5], [1, 1, 0]) == pytest.approx((0 + 1 + 0.25) / 3)


def test_fit_target_imports_no_jax_scipy_stats_or_pyplot(tmp_path):
    code = ("import json, sys\n"
            "from grpojax.cli import main\n"
            "rc = main(['fit', sys.argv[1], '--prefix', '0.5', '--target', '0.5', '--no-plot', '--out', sys.argv[2]])\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'jaxlib', 'numpyro', 'equinox')\n"
            "               or m in ('matplotlib.pyplot', 'scipy.stats'))\n"
            "print(json.dumps({'rc': rc, 'heavy': heavy}))\n")
    out = subprocess.run([sys.executable, "-c", code, str(FIX / "rising.jsonl"), str(tmp_path)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"rc": 0, "heavy": []}, got
    assert "p_at_least" in json.loads((tmp_path / "fit.json").read_text())["runs"]["rising"]["window_forecast"]


@pytest.mark.slow
def test_committed_real_forecasts_rescored_meet_the_bar():
    """The committed forecasts of 114 real series (``experiments/results/forecast_exceedance``), scored again
    leave one repository out with the current calibration and probability code: pooled 90% coverage within
    0.85-0.95 and a Brier score of P(final >= target) below persistence's and the sigmoid's, from 25% and from
    50% of the run. No log is read: the records hold the forecasters' points, intervals and features."""
    from _experiments import EXPERIMENTS, load_experiment

    path = EXPERIMENTS / "results" / "forecast_exceedance" / "forecast_exceedance.json"
    records = json.loads(path.read_text())["records"]
    fe = load_experiment("forecast_exceedance")
    frr = load_experiment("forecast_real_runs")
    got = fe.score(records, [str(p) for p in frr.TRAIN_RECORDS])
    for f in fe.PREFIXES:
        s = got["summary"][str(f)]
        assert s["n_series"] >= 100 and s["n_repos"] >= 30
        assert fe.BAND[0] <= s["coverage_pooled"] <= fe.BAND[1], (f, s["coverage_pooled"])
        assert s["brier"]["combined"] < min(s["brier"]["persistence"], s["brier"]["sigmoid"]), (f, s["brier"])
