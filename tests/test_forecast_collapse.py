"""P(collapse before the window's end) in the window forecast, the mixture with the collapse branch, and a prefix
that already holds a collapse (``grpojax.fit._collapse_hazard``, ``forecast_window(collapse_hazard=,
collapse_mixture=)``, ``grpojax fit --prefix F --collapse-hazard H --collapse-mixture``)."""

from __future__ import annotations

import json
import math
import pathlib

import numpy as np
import pytest
from scipy import stats

from grpojax._errors import InvalidValueError
from grpojax.cli import main
from grpojax.diagnose import collapse_onset
from grpojax.fit import forecast_window
from grpojax.fit._collapse_hazard import (DEFAULT_HAZARD, MIXTURE_TAUS, PHI_RANGE, CollapseHazard, as_hazard,
                                          hazard_from_onsets, mixture_quantiles)

FIX = pathlib.Path(__file__).parent / "fixtures" / "fit"


def _rising(n=120, seed=0):
    rng = np.random.default_rng(seed)
    s = np.arange(1.0, n + 1)
    return s, 0.1 + 0.6 * (1 - np.exp(-s / 25.0)) + 0.02 * rng.standard_normal(n)


# ----------------------------------------------------------------------------------------------- the hazard


def test_hazard_counts_and_probability_match_a_monte_carlo_of_its_posterior():
    hz = hazard_from_onsets([None, 0.4, None, 0.9, None, None])
    assert hz.events == 2 and hz.exposure == pytest.approx(4 + 0.4 + 0.9)
    rng = np.random.default_rng(1)
    lam = rng.gamma(hz.events + 0.5, 1.0 / hz.exposure, 400_000)  # the Jeffreys posterior, drawn independently
    for h in (0.1, 0.5, 0.75):
        draws = -np.expm1(-lam * h)
        se = draws.std() / math.sqrt(draws.size)
        assert abs(hz.p_collapse(h) - draws.mean()) < 5 * se
        lo, hi = hz.interval(h)
        assert abs(np.mean(draws <= lo) - 0.05) < 0.003 and abs(np.mean(draws <= hi) - 0.95) < 0.003


@pytest.mark.parametrize("hazard", [None, 0.0, 0.3, 50.0, DEFAULT_HAZARD, CollapseHazard(0, 10.0)])
def test_p_collapse_is_a_probability_and_grows_with_the_horizon(hazard):
    hz = as_hazard(hazard)
    ps = [hz.p_collapse(h) for h in (0.0, 0.1, 0.5, 0.9)]
    assert all(0.0 <= p <= 1.0 for p in ps)
    assert ps[0] == 0.0 and np.all(np.diff(ps) >= 0)
    lo, hi = hz.interval(0.5)
    assert 0.0 <= lo <= ps[2] <= hi <= 1.0


def test_p_collapse_of_a_forecast_is_the_hazard_over_its_horizon():
    s, y = _rising()
    fc = forecast_window((s, y), prefix=0.25, method="persistence", collapse_hazard=0.4)
    h = (fc.window[1] - fc.prefix_end) / (fc.window[1] - s[0])
    assert fc.p_collapse == pytest.approx(1 - math.exp(-0.4 * h), rel=1e-12)
    assert fc.p_collapse_interval == (fc.p_collapse, fc.p_collapse)
    assert "P(collapse by step 120) = " in str(fc)
    default = forecast_window((s, y), prefix=0.25, method="persistence")
    assert 0.0 < default.p_collapse < 1.0 and default.p_collapse == pytest.approx(DEFAULT_HAZARD.p_collapse(h))


@pytest.mark.parametrize("method", ["persistence", "combined"])
def test_zero_hazard_gives_the_forecast_without_the_collapse_branch(method):
    s, y = _rising()
    plain = forecast_window((s, y), prefix=0.5, method=method, collapse_mixture=False)
    zero = forecast_window((s, y), prefix=0.5, method=method, collapse_hazard=0.0, collapse_mixture=True)
    assert zero.p_collapse == 0.0 and not zero.collapse_mixture and zero.smooth is None
    assert (zero.mean, zero.lo, zero.hi, zero.status) == (plain.mean, plain.lo, plain.hi, plain.status)
    if plain.quantiles is not None:
        np.testing.assert_array_equal(zero.quantiles["values"], plain.quantiles["values"])
    t = np.linspace(plain.lo, plain.hi, 7)
    np.testing.assert_array_equal(zero.prob_at_least(t), plain.prob_at_least(t))
    # and the mixture, when on, changes the forecast only by the branch: the smooth forecast is kept
    mixed = forecast_window((s, y), prefix=0.5, method=method, collapse_hazard=2.0, collapse_mixture=True)
    assert mixed.collapse_mixture and mixed.smooth == {"mean": plain.mean, "lo": plain.lo, "hi": plain.hi}
    assert mixed.lo < plain.lo  # the branch lies below: the interval reaches further down


# ------------------------------------------------------------------------------------------------ the mixture


def _mixture_draws(rng, n, point, lo, hi, level, p, start):
    """The mixture drawn directly: a split normal, then with probability p the loss of U[0.5, 1] of the rise."""
    z = rng.standard_normal(n)
    zq = stats.norm.ppf(0.5 + level / 2)
    y = point + z * np.where(z > 0, (hi - point) / zq, (point - lo) / zq)
    phi = rng.uniform(*PHI_RANGE, n)
    hit = rng.random(n) < p
    return np.where(hit, y - phi * np.maximum(y - start, 0.0), y)


def test_mixture_quantiles_and_prob_at_least_match_a_monte_carlo():
    s, y = _rising()
    fc = forecast_window((s, y), prefix=0.3, method="persistence", collapse_hazard=1.5, collapse_mixture=True)
    sm = fc.smooth
    pre = y[s <= fc.prefix_end]
    start = float(np.mean(pre[:max(3, math.ceil(0.05 * pre.size))]))
    n = 400_000
    d = _mixture_draws(np.random.default_rng(7), n, sm["mean"], sm["lo"], sm["hi"], fc.level, fc.p_collapse, start)
    assert fc.p_collapse > 0.3  # a mixture worth testing: the branch carries weight
    # the stated quantiles: the Monte Carlo's distribution function there is the quantile's level (within its
    # binomial error, plus the quadrature's resolution of 1/2000 of the smooth forecast's levels)
    for tau in (0.02, 0.05, 0.2, 0.5, 0.8, 0.95):
        q = float(np.interp(tau, MIXTURE_TAUS, fc.quantiles["values"]))
        assert abs(np.mean(d <= q) - tau) < 4 * math.sqrt(tau * (1 - tau) / n) + 1e-3, tau
    assert abs(np.mean(d <= fc.lo) - 0.05) < 4 * math.sqrt(0.05 * 0.95 / n) + 1e-3
    assert abs(np.mean(d <= fc.hi) - 0.95) < 4 * math.sqrt(0.05 * 0.95 / n) + 1e-3
    # P(Y >= t): linear between quantiles 0.005 apart adds at most that gap
    targets = np.quantile(d, [0.03, 0.1, 0.3, 0.5, 0.7, 0.9, 0.97])
    got = fc.prob_at_least(targets)
    want = np.array([np.mean(d >= t) for t in targets])
    band = 4 * np.sqrt(want * (1 - want) / n) + 0.005
    assert np.all(np.abs(got - want) < band), (got, want)


def test_mixture_of_the_calibrated_quantiles_keeps_a_point_mass_at_a_bound():
    taus = np.array([0.05, 0.25, 0.5, 0.75, 0.95])
    smooth = {"quantiles": {"taus": taus, "values": np.array([0.9, 0.95, 1.0, 1.0, 1.0])}}
    q = mixture_quantiles(smooth, 0.2, 0.2, bounds=(0.0, 1.0))
    assert np.all(np.diff(q) >= 0) and q.max() <= 1.0
    # the branch puts about 0.2 of the mass between the start and 0.6 (1 - U[0.5, 1] of a rise of 0.7-0.8)
    share = float(np.interp(0.6, q, MIXTURE_TAUS))
    assert 0.15 < share < 0.25


# -------------------------------------------------------------------------------- a prefix holding a collapse


def _collapsed(n=200, seed=3):
    """Rises from 0.1 to 0.8, falls back to 0.1 within 4 steps at step 108, stays: from 60% of the run (step
    120) the prefix ends 12 steps after the crash, and its last tenth of the run straddles the fall."""
    rng = np.random.default_rng(seed)
    s = np.arange(1.0, n + 1)
    y = np.where(s < 108, 0.1 + 0.7 * (1 - np.exp(-s / 15.0)), 0.1) + 0.02 * rng.standard_normal(n)
    y[(s >= 108) & (s < 112)] = np.linspace(0.6, 0.15, 4)
    return s, y


def _prefix(s, y, prefix):
    pre = s <= s[0] + prefix * (s[-1] - s[0])
    return s[pre], y[pre]


@pytest.mark.parametrize("method", ["combined", "creep"])
def test_a_prefix_holding_a_collapse_is_forecast_from_the_level_after_it(method):
    s, y = _collapsed()
    onset = collapse_onset(*_prefix(s, y, 0.6))  # the collapse finding of grpojax diagnose on the prefix
    assert onset is not None and 105 <= onset <= 112
    fc = forecast_window((s, y), prefix=0.6, method=method, collapse_onset=onset)
    assert fc.status == "collapse" and fc.collapse_onset == onset
    after = float(np.mean(y[(s >= 112) & (s <= fc.prefix_end)]))
    before = float(np.mean(y[(s > 80) & (s < 106)]))
    # the point is the level the reward fell to (from the onset on: the fall's own points lift it a little),
    # not the one it fell from
    assert abs(fc.mean - after) < 0.15 * (before - after), (fc.mean, after, before)
    assert fc.lo <= after <= fc.hi
    assert f"holds a collapse at step {fc.collapse_onset:g}" in str(fc)
    if method == "combined":  # the laws fitted across the fall abstain
        assert all("across the collapse" in fc.components[m]["status"] for m in ("exponential", "sigmoid")
                   if not fc.components[m]["status"].startswith("failed"))


def test_a_prefix_without_a_collapse_says_none():
    s, y = _rising()
    assert collapse_onset(*_prefix(s, y, 0.5)) is None
    fc = forecast_window((s, y), prefix=0.5, method="combined")
    assert fc.collapse_onset is None and fc.status != "collapse"


def test_the_command_line_finds_the_collapse_in_the_prefix_as_python_does(tmp_path, capsys):
    s, y = _collapsed()
    log = tmp_path / "collapsed.jsonl"
    log.write_text("".join(json.dumps({"step": int(a), "reward_mean": float(b)}) + "\n" for a, b in zip(s, y)))
    rc = main(["fit", str(log), "--prefix", "0.6", "--no-plot", "--out", str(tmp_path / "out")])
    assert rc == 0
    said = capsys.readouterr().out
    (run,) = json.loads((tmp_path / "out" / "fit.json").read_text())["runs"].values()
    wf = run["window_forecast"]
    onset = collapse_onset(*_prefix(s, y, 0.6))
    fc = forecast_window(log, prefix=0.6, collapse_onset=onset)
    assert wf["collapse_onset"] == onset and wf["status"] == "collapse" == fc.status
    for k in ("mean", "lo", "hi", "p_collapse"):
        assert wf[k] == pytest.approx(getattr(fc, k), rel=1e-12)
    assert f"holds a collapse at step {onset:g}" in said


# ------------------------------------------------------------------------------------- command line and errors


def test_cli_and_python_give_the_same_numbers(tmp_path, capsys):
    log = FIX / "rising.jsonl"
    rc = main(["fit", str(log), "--prefix", "0.5", "--target", "0.6", "--collapse-hazard", "0.5",
               "--collapse-mixture", "--no-plot", "--out", str(tmp_path)])
    assert rc == 0
    said = capsys.readouterr().out
    (run,) = json.loads((tmp_path / "fit.json").read_text())["runs"].values()
    wf = run["window_forecast"]
    fc = forecast_window(log, prefix=0.5, collapse_hazard=0.5, collapse_mixture=True)
    assert wf["p_collapse"] == pytest.approx(fc.p_collapse, rel=1e-12) and wf["collapse_mixture"] is True
    for k in ("mean", "lo", "hi"):
        assert wf[k] == pytest.approx(getattr(fc, k), rel=1e-12)
        assert wf["smooth"][k] == pytest.approx(fc.smooth[k], rel=1e-12)
    assert wf["p_at_least"] == pytest.approx(fc.prob_at_least(0.6), abs=1e-12)
    line = next(ln for ln in said.splitlines() if "P(collapse between steps" in ln)
    assert f"= {fc.p_collapse:.3f}" in line and "mixed into the forecast" in line
    # the default: the shipped hazard, no mixture
    rc = main(["fit", str(log), "--prefix", "0.5", "--no-plot", "--out", str(tmp_path / "d")])
    (run,) = json.loads((tmp_path / "d" / "fit.json").read_text())["runs"].values()
    base = forecast_window(log, prefix=0.5)
    assert run["window_forecast"]["p_collapse"] == pytest.approx(base.p_collapse, rel=1e-12)
    assert run["window_forecast"]["collapse_mixture"] is False and run["window_forecast"]["smooth"] is None
    lo, hi = run["window_forecast"]["p_collapse_interval"]
    assert (lo, hi) == pytest.approx(base.p_collapse_interval, rel=1e-12) and lo < base.p_collapse < hi


@pytest.mark.parametrize("kwargs, msg", [
    ({"collapse_hazard": -0.1}, "collapse_hazard must be a finite rate >= 0"),
    ({"collapse_hazard": float("nan")}, "collapse_hazard must be a finite rate >= 0"),
    ({"collapse_hazard": "high"}, "collapse_hazard must be None, a CollapseHazard or a rate"),
    ({"collapse_mixture": "yes"}, "collapse_mixture must be True, False or None"),
    ({"collapse_onset": 45.0}, "collapse_onset must be a step of the prefix, in [1, 30]"),
    ({"collapse_onset": float("nan")}, "collapse_onset must be a step of the prefix"),
    ({"collapse_onset": "late"}, "collapse_onset must be a step of the prefix or None"),
    ({"collapse_onset": 30.0}, "leaves fewer than 2 prefix points"),
])
def test_bad_collapse_arguments_say_what_was_expected(kwargs, msg):
    s, y = _rising(60)
    with pytest.raises(InvalidValueError) as e:
        forecast_window((s, y), prefix=0.5, method="persistence", **kwargs)
    assert msg in str(e.value) and "\n" not in str(e.value)


def test_a_target_that_is_not_a_number_is_refused_with_the_mixture():
    s, y = _rising(60)
    fc = forecast_window((s, y), prefix=0.5, method="persistence", collapse_hazard=1.0, collapse_mixture=True)
    with pytest.raises(InvalidValueError, match="target must be a finite number"):
        fc.prob_at_least(float("nan"))


def test_bad_onsets_are_refused():
    with pytest.raises(InvalidValueError, match=r"in \[0, 1\], got 1.5"):
        hazard_from_onsets([None, 1.5])
    with pytest.raises(InvalidValueError, match="at least one labelled series"):
        hazard_from_onsets([])


@pytest.mark.parametrize("argv, msg", [
    (["--prefix", "0.5", "--collapse-hazard", "-1"], "--collapse-hazard"),
    (["--prefix", "0.5", "--collapse-hazard", "nan"], "--collapse-hazard"),
    (["--collapse-mixture"], "--collapse-mixture needs --prefix"),
    (["--collapse-hazard", "0.2"], "--collapse-hazard needs --prefix"),
])
def test_cli_bad_collapse_flags(tmp_path, capsys, argv, msg):
    rc = main(["fit", str(FIX / "rising.jsonl"), "--out", str(tmp_path), "--no-plot", *argv])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert msg in err and len(err.splitlines()) <= 2, err


def test_the_shipped_hazard_is_the_one_the_experiment_learned():
    """The hazard that ships is the one learned from every labelled series by experiments/forecast_collapse.py
    (its committed result): a rerun on a grown corpus must update both."""
    res = pathlib.Path(__file__).resolve().parents[1] / "experiments" / "results" / "forecast_collapse" / \
        "forecast_collapse.json"
    if not res.is_file():
        pytest.skip("the committed result of experiments/forecast_collapse.py is absent")
    labels = json.loads(res.read_text())["labels"]
    assert DEFAULT_HAZARD.events == labels["events"]
    assert DEFAULT_HAZARD.exposure == pytest.approx(labels["exposure"], abs=0.005)
    assert f"{labels['events']} collapses in {labels['series']} labelled" in DEFAULT_HAZARD.source
