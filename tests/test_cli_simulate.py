"""``grpojax simulate`` through ``grpojax.cli.main``."""

from __future__ import annotations

import json

import pytest

from grpojax.cli import main


def test_simulate_writes_summary_and_figure(tmp_path):
    out = tmp_path / "sim"
    rc = main(["simulate", "--eta", "0.05", "--mu", "0.5", "--k-ref", "4", "--curvature", "1.2", "--group-size", "4",
               "--paths", "400", "--steps", "60", "--dt", "0.5", "--x64", "--lag", "constant", "--out", str(out)])
    assert rc == 0
    s = json.loads((out / "simulation.json").read_text())
    assert (out / "ensemble.png").stat().st_size > 10_000
    assert s["regime"] == "underdamped" and s["unstable"] is False and s["finite"] is True
    assert s["max_abs_z_mean"] < 4.5 and s["max_abs_z_var"] < 4.5  # 400 paths, ~120 correlated comparisons
    assert s["final"]["exact_mean_reward"] == pytest.approx(0.8, abs=0.05)
    assert s["stationary_variance_predicted"] == pytest.approx(0.05**2 * 0.25 / (2 * 4 * s["C"] * s["K_eff"]), rel=1e-9)


def test_simulate_unstable_is_flagged(tmp_path):
    out = tmp_path / "u"
    rc = main(["simulate", "--eta", "0.05", "--mu", "0.5", "--k-ref", "4", "--curvature", "3.0", "--group-size", "4",
               "--paths", "400", "--steps", "60", "--dt", "0.5", "--x64", "--lag", "constant", "--out", str(out)])  # same shapes: no recompile
    assert rc == 0
    s = json.loads((out / "simulation.json").read_text())
    assert s["unstable"] is True and s["regime"] == "unstable"


@pytest.mark.parametrize("argv", [["--paths", "0"], ["--dt", "-1"], ["--eta", "-0.1"], ["--p0", "nan"]])
def test_simulate_bad_input_exits_2(tmp_path, argv):
    base = ["simulate", "--eta", "0.05", "--k-ref", "4", "--curvature", "1.0", "--out", str(tmp_path / "x")]
    args = base + argv
    if "--eta" in argv:
        args = ["simulate", "--k-ref", "4", "--curvature", "1.0", "--out", str(tmp_path / "x")] + argv
    assert main(args) == 2
