"""`grpojax predict` through the CLI entry point."""

import json

import pytest

import grpojax.dynamics as dyn
from grpojax.cli import main


def test_predict_writes_json_and_figure(tmp_path, capsys):
    rc = main(["predict", "--eta", "0.01", "--mu", "0.9", "--k-ref", "4", "--curvature", "0.5", "--out", str(tmp_path)])
    assert rc == 0
    res = json.loads((tmp_path / "prediction.json").read_text())
    p = dyn.from_hyperparams(0.01, 0.9, 4, 0.5)
    assert res["C"] == pytest.approx(float(p.C))
    assert res["regime"] in dyn.REGIMES
    assert res["exact"]["critical_eta"] == pytest.approx(float(dyn.exact_critical_a(0.9, 4)) / 0.5, rel=1e-9)
    assert res["exact"]["stable"] is True
    assert (tmp_path / "trajectory.png").stat().st_size > 1000


def test_predict_invalid_value_is_one_line_error(tmp_path, capsys):
    rc = main(["predict", "--eta", "-1", "--k-ref", "4", "--curvature", "0.5", "--out", str(tmp_path)])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "eta" in err and "-1" in err


def test_predict_help_has_example(capsys):
    with pytest.raises(SystemExit):
        main(["predict", "--help"])
    assert "Example:" in capsys.readouterr().out
