"""The two real-corpus experiments as `grpojax reproduce` runs them: claims, and `not_tested` without a corpus."""

from __future__ import annotations

import json

import pytest

from _experiments import load_experiment as _load


def test_diagnose_experiment_without_a_corpus_reports_not_tested(tmp_path):
    mod = _load("diagnose_real_runs")
    rc = mod.main(["--corpus", str(tmp_path / "absent"), "--out", str(tmp_path / "out")])
    assert rc == 0
    claims = json.loads((tmp_path / "out" / "summary.json").read_text())["claims"]
    assert [c["verdict"] for c in claims] == ["not_tested", "not_tested"]


def _table(creep, persistence, exponential, sigmoid, coverage, prefix=0.25):
    row = lambda m: {"mae_scaled": m, "coverage": coverage}  # noqa: E731
    return {f"all|{prefix}|{k}": row(v) for k, v in (("creep", creep), ("persistence", persistence),
                                                     ("exponential", exponential), ("sigmoid", sigmoid))}


@pytest.mark.parametrize("creep, coverage, verdicts", [
    (0.30, 0.90, ["confirmed", "confirmed"]),   # 25% below the best baseline (0.40), coverage in the band
    (0.35, 0.90, ["confirmed", "refuted"]),     # only 12.5% below
    (0.30, 0.99, ["refuted", "confirmed"]),     # intervals too wide
])
def test_forecast_claims_follow_the_goal(tmp_path, creep, coverage, verdicts):
    mod = _load("forecast_real_runs")
    mod.write_claims(tmp_path, False, _table(creep, 0.40, 0.50, 0.60, coverage), (0.25,), 10, 3)
    claims = json.loads((tmp_path / "summary.json").read_text())["claims"]
    assert [c["verdict"] for c in claims[:2]] == verdicts
    assert "persistence" in claims[1]["measured"]
    assert [c["verdict"] for c in claims[2:]] == ["not_tested", "not_tested"]  # prefix 0.5 not run
    mod.write_claims(tmp_path, False, None, (0.25,), 0, 0)
    claims = json.loads((tmp_path / "summary.json").read_text())["claims"]
    assert {c["verdict"] for c in claims} == {"not_tested"} and "no real-run corpus" in claims[0]["measured"]

