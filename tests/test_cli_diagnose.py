"""``grpojax diagnose`` through grpojax.cli.main: table, diagnosis.json, dashboard, one-line errors."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from grpojax.cli import main


def _write_jsonl(path, n=120, seed=0, frac_zero=None):
    rng = np.random.default_rng(seed)
    t = np.arange(1, n + 1, dtype=float)
    p = 0.8 - 0.5 * np.exp(-t / 25)
    cols = {
        "reward_mean": p + 0.03 * rng.standard_normal(n),
        "reward_std": np.sqrt(p * (1 - p)),
        "frac_zero_std": np.full(n, 0.05) if frac_zero is None else frac_zero,
        "entropy": 0.6 - 0.1 * (1 - np.exp(-t / 40)),
        "grad_norm": 0.4 + 0.02 * rng.standard_normal(n),
    }
    # grpojax's own JSONL: one {"step": N, <canonical name>: value} object per line
    rows = [{"step": int(s), **{k: float(v[i]) for k, v in cols.items()}} for i, s in enumerate(t)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_diagnose_writes_json_and_dashboard(tmp_path, capsys):
    log = _write_jsonl(tmp_path / "run.jsonl", frac_zero=np.linspace(0.1, 0.9, 120))
    out = tmp_path / "diag"
    assert main(["diagnose", str(log), "--out", str(out), "--no-validity"]) == 0
    text = capsys.readouterr().out
    for mode in ("reward hacking", "advantage", "policy", "dynamical", "verdict"):
        assert mode in text
    rep = json.loads((out / "diagnosis.json").read_text())
    [run] = rep["runs"]
    res = run["results"]
    assert res["advantage_degeneracy"]["verdict"] == "detected"
    assert res["reward_hacking"]["verdict"] == "insufficient_data"
    assert "eval_reward" in res["reward_hacking"]["reason"]
    assert res["policy_concentration"]["verdict"] == "not_detected"
    assert run["dashboard"] == "dashboard.svg" and "dashboard_png" not in run
    svg = ET.parse(out / "dashboard.svg").getroot()  # well-formed XML
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    assert not (out / "dashboard.png").exists()  # the PNG only with --plot png / all


def test_threshold_override_from_the_command_line(tmp_path):
    log = _write_jsonl(tmp_path / "run.jsonl", frac_zero=np.full(120, 0.6))
    out = tmp_path / "d"
    assert main(["diagnose", str(log), "--out", str(out), "--no-plot", "--no-validity"]) == 0
    assert json.loads((out / "diagnosis.json").read_text())["runs"][0]["results"]["advantage_degeneracy"][
        "verdict"] == "detected"
    assert main(["diagnose", str(log), "--out", str(out), "--no-plot", "--no-validity",
                 "--set", "frac_zero_std_late=0.7"]) == 0
    rep = json.loads((out / "diagnosis.json").read_text())
    assert rep["config"]["frac_zero_std_late"] == 0.7
    assert rep["runs"][0]["results"]["advantage_degeneracy"]["verdict"] == "not_detected"


@pytest.mark.parametrize("setup, needle", [
    (lambda p: p.write_text(""), "empty"),
    (lambda p: p.write_text('{"log_history": [{"step": 1, "reward": 0.'), ""),
    (None, "no such file"),
])
def test_errors_are_one_line(tmp_path, capsys, setup, needle):
    path = tmp_path / "bad.json"
    if setup is not None:
        setup(path)
    rc = main(["diagnose", str(path), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    # one message (rich may wrap it at the console width: compare with whitespace normalised)
    flat = " ".join(err.split())
    assert flat.startswith("grpojax diagnose: error:") and flat.count("error:") == 1
    assert "Traceback" not in err and needle in flat.lower()
    assert "bad.json" in flat  # the message names the file


def test_bad_set_option_is_one_line(tmp_path, capsys):
    log = _write_jsonl(tmp_path / "run.jsonl")
    assert main(["diagnose", str(log), "--out", str(tmp_path / "o"), "--set", "nonsense=1"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "unknown key 'nonsense'" in err and err.count("error:") == 1


def test_real_log_end_to_end(real_logs, tmp_path):
    out = tmp_path / "m"
    assert main(["diagnose", str(real_logs / "trl-g4-minesweeper-trainer_state.json"), "--out", str(out)]) == 0
    rep = json.loads((out / "diagnosis.json").read_text())
    res = rep["runs"][0]["results"]
    assert res["advantage_degeneracy"]["verdict"] == "detected"
    assert res["mean_field_validity"]["verdict"] in ("valid", "violated", "insufficient_data")
    assert ET.parse(out / "dashboard.svg").getroot().findall(".//{http://www.w3.org/2000/svg}polyline")


@pytest.mark.slow
def test_bayes_fit_feeds_the_instability_detector(tmp_path):
    log = _write_jsonl(tmp_path / "run.jsonl")
    out = tmp_path / "b"
    assert main(["diagnose", str(log), "--out", str(out), "--no-plot", "--no-validity", "--bayes", "three_phase",
                 "--bayes-samples", "150"]) == 0
    res = json.loads((out / "diagnosis.json").read_text())["runs"][0]["results"]["dynamical_instability"]
    post = [e for e in res["evidence"] if e["statistic"] == "posterior P(C <= 0)"]
    assert post and 0.0 <= post[0]["value"] <= 0.2  # a saturating curve: C > 0 with high probability
    assert res["verdict"] == "not_detected"


def test_report_fits_an_80_column_terminal(tmp_path, monkeypatch):
    """One line per check, evidence and what to change indented below; nothing wider than 80 columns."""
    import io

    from rich.console import Console

    import grpojax.cli._diagnose as cli_diag

    n = 120
    frac = np.linspace(0.1, 0.9, n)
    log = _write_jsonl(tmp_path / "run.jsonl", n=n, frac_zero=frac)
    buf = io.StringIO()
    monkeypatch.setattr(cli_diag, "console", Console(file=buf, width=60, force_terminal=False, color_system=None))
    assert main(["diagnose", str(log), "--out", str(tmp_path / "d"), "--no-validity", "--no-plot"]) == 0
    # the closing "wrote PATH" line holds a file path (not wrapped); every report line fits 80 columns
    lines = [x for x in buf.getvalue().splitlines() if not x.startswith("wrote ")]
    assert lines and max(len(x) for x in lines) <= 80, max(lines, key=len)
    heads = [x for x in lines if x.startswith("advantage degeneracy")]
    assert len(heads) == 1 and "detected" in heads[0] and "frac_zero" in heads[0]
    i = lines.index(heads[0])
    below = []
    for x in lines[i + 1:]:
        if not x.startswith("    "):
            break
        below.append(x)
    assert any("change:" in x for x in below) and any("late mean" in x for x in below)
    # a full-width report still stays within 80 columns
    buf2 = io.StringIO()
    monkeypatch.setattr(cli_diag, "console", Console(file=buf2, width=200, color_system=None))
    assert main(["diagnose", str(log), "--out", str(tmp_path / "e"), "--no-validity", "--no-plot"]) == 0
    assert max(len(x) for x in buf2.getvalue().splitlines() if not x.startswith("wrote ")) <= 80


def test_forecast_band_is_drawn_and_reported(tmp_path, capsys):
    """--forecast PREFIX: the window forecast's interval goes into diagnosis.json (and the dashboard)."""
    log = _write_jsonl(tmp_path / "run.jsonl")
    out = tmp_path / "diag"
    assert main(["diagnose", str(log), "--out", str(out), "--no-validity", "--forecast", "0.5"]) == 0
    assert "forecast of the final-window mean reward" in capsys.readouterr().out
    [run] = json.loads((out / "diagnosis.json").read_text())["runs"]
    fc = run["forecast"]
    assert fc["prefix"] == 0.5 and fc["level"] == 0.9 and fc["lo"] <= fc["mean"] <= fc["hi"]
    # the simulated curve settles at 0.8 - 0.5 e^{-t/25} ~ 0.8 long before step 60: the interval holds it
    assert fc["lo"] <= 0.8 <= fc["hi"]
    svg = (out / "dashboard.svg").read_text()
    assert 'class="band"' in svg and 'data-series="forecast"' in svg  # the band and its median are drawn
    assert main(["diagnose", str(log), "--out", str(out), "--forecast", "1.5"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--forecast" in err
    assert main(["diagnose", str(log), "--out", str(out), "--forecast", "0.5", "--bounds", "1", "nan"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "argument --bounds: must be a finite number, got nan" in err
