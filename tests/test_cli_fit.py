"""`grpojax fit` through grpojax.cli.main on small fixtures."""

from __future__ import annotations

import json
import pathlib

import pytest

from grpojax.cli import main

FIX = pathlib.Path(__file__).parent / "fixtures" / "fit"


def test_fit_cli_laws_and_forecast(tmp_path, capsys):
    rc = main(["fit", str(FIX / "rising.jsonl"), "--prefix", "0.7", "--smooth", "5", "--out", str(tmp_path)])
    assert rc == 0
    said = capsys.readouterr().out
    rep = json.loads((tmp_path / "fit.json").read_text())
    (run,) = rep["runs"].values()
    assert set(run["laws"]) == {"exponential", "three_phase", "sigmoid"}
    tp = run["laws"]["three_phase"]
    assert tp["status"] == "ok" and tp["r2"] > 0.9
    assert tp["params"]["zeta"] == pytest.approx(0.6, rel=0.3)
    assert run["laws"]["three_phase"]["r2"] > run["laws"]["exponential"]["r2"]
    assert set(run["forecasts"]) == {"exponential", "three_phase", "sigmoid"}
    # past the overshoot (f = 0.7) the three-phase forecast is good; from f <= 0.5 (before the
    # inflection) every law's plateau is unidentified -- see experiments/fit_real_runs.py
    assert run["forecasts"]["three_phase"]["rmse"] < 0.05
    assert (tmp_path / run["figure"]).stat().st_size > 10_000
    # every --prefix forecast carries an interval, set beside what the run reached
    wf = run["window_forecast"]
    assert wf["method"] == "combined" and wf["level"] == 0.9  # the calibrated average is the default
    assert set(wf["components"]) == {"creep", "persistence", "exponential", "sigmoid"}
    assert sum(wf["weights"].values()) == pytest.approx(1.0)
    # the forecast says which forecasters it is the median of, and which abstained and why
    voted = [m for m, w in wf["weights"].items() if w > 0]
    line = next(ln for ln in said.splitlines() if ": median of " in ln)
    assert all(f"{m} " in line.split("; abstained")[0] for m in voted)
    for m in set(wf["components"]) - set(voted):
        assert f"{m} ({wf['components'][m]['status']})" in line.split("; abstained: ")[1]
    assert wf["lo"] <= wf["mean"] <= wf["hi"] and wf["hi"] - wf["lo"] > 0
    assert wf["window"][0] > wf["prefix_end"] and isinstance(wf["observed_mean"], float)
    assert wf["covered"] == (wf["lo"] <= wf["observed_mean"] <= wf["hi"])
    assert {"p_star", "fast_rate", "noise_sd"} <= set(wf["params"]) and "M" not in wf["params"]


def test_fit_cli_forecast_compiles_no_xla_program(tmp_path):
    """`fit --prefix` (laws, their prefix forecasts, the combined window forecast) runs in NumPy: not one XLA
    program is compiled, so a first call does not wait for compilations and a second has none to repeat."""
    import jax

    compiled = []

    def listen(event, duration, **kw):
        if event == "/jax/core/compile/backend_compile_duration":
            compiled.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        assert main(["fit", str(FIX / "rising.jsonl"), "--prefix", "0.3", "--no-plot", "--out", str(tmp_path)]) == 0
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert compiled == []
    assert json.loads((tmp_path / "fit.json").read_text())["runs"]


def test_fit_cli_flat_curve_reports_no_learning(tmp_path):
    assert main(["fit", str(FIX / "flat.jsonl"), "--law", "exponential", "--no-plot", "--out", str(tmp_path)]) == 0
    (run,) = json.loads((tmp_path / "fit.json").read_text())["runs"].values()
    ex = run["laws"]["exponential"]
    assert ex["status"] == "no_learning"
    assert ex["params"]["T"] is None  # no invented rate (NaN is null in the JSON)


@pytest.mark.parametrize(
    "argv, msg",
    [
        (["--prefix", "1.5"], "--prefix"),
        (["--bayes", "mechanistic"], "--eta"),
        (["--metric", "nope"], "no 'nope' column"),
        (["--prefix", "0.7", "--window", "0.5", "--forecast-method", "persistence"], "--window"),
        (["--bounds", "1", "0"], "--bounds"),
    ],
)
def test_fit_cli_user_errors(tmp_path, capsys, argv, msg):
    rc = main(["fit", str(FIX / "rising.jsonl"), "--out", str(tmp_path), "--no-plot", *argv])
    assert rc == 2
    assert msg in capsys.readouterr().err


def test_fit_cli_missing_file(tmp_path, capsys):
    assert main(["fit", str(tmp_path / "nope.json"), "--out", str(tmp_path)]) == 2


@pytest.mark.slow
def test_fit_cli_bayes(tmp_path, capsys):
    rc = main(["fit", str(FIX / "rising.jsonl"), "--law", "three_phase", "--bayes", "--prefix", "0.5",
               "--chains", "2", "--draws", "200", "--warmup", "200", "--out", str(tmp_path)])
    assert rc == 0
    # each posterior says what it samples before it starts and how long it took
    err = capsys.readouterr().err
    assert "state_space posterior: NUTS on 60 points, 2 chains x (200 warmup + 200 draws)" in err
    assert "of the first 0.5: NUTS on 30 points" in err and err.count("sampled in") == 2
    (run,) = json.loads((tmp_path / "fit.json").read_text())["runs"].values()
    assert run["bayes"]["model"] == "state_space"
    assert "bayes:state_space" in run["forecasts"]


def test_fit_cli_a_run_too_short_to_fit_is_refused_naming_the_log(tmp_path, capsys):
    from grpojax.cli import main

    log = tmp_path / "short.jsonl"
    log.write_text("".join(f'{{"step": {s}, "reward_mean": {0.1 * s}}}\n' for s in range(1, 7)))
    assert main(["fit", str(log), "--no-plot", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(log) in err and "at least 8 finite points" in err and "got 6" in err


def test_fit_cli_a_prefix_too_short_for_the_window_forecast_is_its_error(tmp_path, capsys):
    """12 steps, prefix 0.3: steps 1-4 (<= 1 + 0.3 * 11) are the prefix. The window forecast's check comes first,
    before the laws' forecasts, which refuse the same prefix in their own words."""
    log = tmp_path / "short.jsonl"
    log.write_text("".join(f'{{"step": {s}, "reward_mean": {0.1 + 0.03 * s + 0.01 * (s % 3)}}}\n' for s in range(1, 13)))
    assert main(["fit", str(log), "--prefix", "0.3", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "the prefix 0.3 holds 4 finite points; at least 8 are needed" in err


def test_fit_cli_a_constant_curve_names_its_value_as_a_number(tmp_path, capsys):
    """The constant-curve error shows the reward as the number it is, not a NumPy repr."""
    log = tmp_path / "const.jsonl"
    log.write_text("".join(json.dumps({"step": t, "reward_mean": 0.5}) + "\n" for t in range(1, 201)))
    assert main(["fit", str(log), "--prefix", "0.3", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "every reward = 0.5)" in err and "np." not in err, err


def test_fit_cli_tables_are_never_cut_on_a_narrow_terminal(tmp_path, capsys, monkeypatch):
    """On a 60-column terminal the laws and forecast tables are printed wider (the terminal wraps them), with
    every value whole: no ellipsis, and the forecast's numbers as fit.json has them."""
    from grpojax.cli import _common

    monkeypatch.setattr(_common.console, "width", 60)
    log = pathlib.Path(__file__).parent / "fixtures" / "quickstart" / "trainer_state.json"
    assert main(["fit", str(log), "--prefix", "0.3", "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "…" not in out and "three_phase" in out and "exponential" in out
    (entry,) = json.loads((tmp_path / "o" / "fit.json").read_text())["runs"].values()
    wf = entry["window_forecast"]
    assert f"{wf['mean']:.4g}" in out and f"[{wf['lo']:.4g}, {wf['hi']:.4g}]" in out
    assert _common.console.width == 60  # the terminal's width is restored


@pytest.mark.slow
def test_fit_bayes_state_space_on_the_quickstart_converges_with_the_defaults(tmp_path, capsys):
    """The documented quickstart command, with the shipped NUTS settings and seed: no divergent transition,
    every r̂ below 1.01, and the model's quantities printed (p*, ζ, M_eff, C_eff, K_eff, P(regime))."""
    quick = pathlib.Path(__file__).parent / "fixtures" / "quickstart" / "trainer_state.json"
    assert main(["fit", str(quick), "--bayes", "state_space", "--no-plot", "--out", str(tmp_path)]) == 0
    said = capsys.readouterr().out
    bayes = json.loads((tmp_path / "fit.json").read_text())["runs"]["quickstart"]["bayes"]
    assert bayes["divergences"] == 0
    # M_eff is fixed at 1 by a reward curve (a constant has no r̂)
    r_hat = {k: v["r_hat"] for k, v in bayes["summary"].items() if v.get("r_hat") is not None and v["r_hat"] == v["r_hat"]}
    assert r_hat and max(r_hat.values()) < 1.01, r_hat
    for line in ("p* (plateau)", "zeta", "M_eff", "C_eff", "K_eff", "P(regime)"):
        assert line in said, line
