"""`grpojax advise` through the CLI entry point."""

import json

import numpy as np
import pytest

import grpojax.dynamics as dyn
from grpojax.cli import main
from grpojax.logs import RunLog, write_jsonl


def test_advise_prints_and_writes_json(tmp_path, capsys):
    out = tmp_path / "a.json"
    rc = main(["advise", "--eta", "0.01", "--mu", "0.9", "--k-ref", "4", "--group-size", "8", "--curvature", "0.5",
               "--pass-rate", "0.8", "--json", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    for word in ("damping ratio", "exact critical", "advised η", "advised K_ref", "zero-variance", "G for"):
        assert word in text
    a = json.loads(out.read_text())
    star = float(dyn.exact_critical_eta(0.9, 4, 0.5, lag="periodic"))
    assert a["exact_critical_eta"] == pytest.approx(star)
    assert a["group_size_needed"] == 11 and a["inputs"]["lag"] == "periodic"


def test_advise_staleness_and_adam(capsys):
    assert main(["advise", "--eta", "0.001", "--beta1", "0.9", "--staleness", "2", "--group-size", "16",
                 "--curvature", "20"]) == 0
    text = capsys.readouterr().out
    assert "constant lag, Adam" in text and "advised staleness S" in text and "Adam as heavy ball" in text


def test_advise_probe_recovers_curvature(tmp_path, capsys):
    """A probe curve shaped by the oscillator's fast rate: the fitted K_d is close to the one that made it."""
    eta, mu, k, kd = 0.01, 0.5, 2, 2.0
    p = dyn.from_hyperparams(eta, mu, k, kd, lag="constant")
    rate = float(p.K_eff) / float(p.C)
    t = np.arange(1, 201, dtype=float)
    y = 0.8 - 0.6 * np.exp(-rate * t) + 0.01 * np.random.default_rng(0).standard_normal(t.size)
    write_jsonl(tmp_path / "probe.jsonl", RunLog.from_columns({"step": t, "reward_mean": y}, name="probe"))
    out = tmp_path / "a.json"
    assert main(["advise", "--eta", str(eta), "--mu", str(mu), "--staleness", str(k), "--group-size", "8",
                 "--probe", str(tmp_path / "probe.jsonl"), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "fitted from" in text and "K_d = a/η" in text
    a = json.loads(out.read_text())
    assert a["inputs"]["curvature"] == pytest.approx(kd, rel=0.3)
    assert a["pass_rate"] == pytest.approx(0.8, abs=0.05)


@pytest.mark.parametrize("argv, word", [
    (["--eta", "-1", "--k-ref", "2", "--group-size", "8", "--curvature", "1"], "--eta"),
    (["--eta", "0.1", "--mu", "1.2", "--k-ref", "2", "--group-size", "8", "--curvature", "1"], "--mu"),
    (["--eta", "0.1", "--k-ref", "0", "--group-size", "8", "--curvature", "1"], "--k-ref"),
    (["--eta", "0.1", "--k-ref", "2", "--group-size", "1", "--curvature", "1"], "--group-size"),
    (["--eta", "0.1", "--k-ref", "2", "--group-size", "8", "--curvature", "-1"], "curvature"),
    (["--eta", "0.1", "--k-ref", "2", "--group-size", "8", "--curvature", "1", "--pass-rate", "2"], "--pass-rate"),
    (["--eta", "0.1", "--k-ref", "2", "--staleness", "2", "--group-size", "8", "--curvature", "1"], "not allowed"),
    (["--eta", "0.1", "--k-ref", "2", "--group-size", "8", "--probe", "/nonexistent.jsonl"], "nonexistent"),
    (["--eta", "0.1", "--k-ref", "2", "--group-size", "8", "--curvature", "1", "--noise-growth", "-1"],
     "--noise-growth"),
    (["--eta", "0.001", "--beta1", "0.9", "--k-ref", "2", "--group-size", "8", "--curvature", "30", "--schedule",
      "cosine", "--noise-growth", "5"], "--noise-growth 5 is not modelled for Adam"),
])
def test_advise_bad_input_one_line(argv, word, capsys):
    with pytest.raises(SystemExit) as e:
        raise SystemExit(main(["advise", *argv]))
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and word in err


def test_advise_help_has_example(capsys):
    with pytest.raises(SystemExit):
        main(["advise", "--help"])
    assert "Example:" in capsys.readouterr().out
