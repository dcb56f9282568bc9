"""The exact-first-passage escape cap check: its search for eta05, its committed advised rates, and its counts
recomputed from its committed runs."""

from __future__ import annotations

import json
import math

import pytest

from _experiments import load_experiment

exp = load_experiment("escape_advise_exact")
OUT = exp.RESULTS / exp.NAME


def _logistic(root, width=0.05):
    """An increasing P(eta / eta*) that reaches 0.05 at ``root``."""
    shift = math.log(0.05 / 0.95)
    return lambda rel: 1.0 / (1.0 + math.exp(-(math.log(rel / root) / width + shift)))


@pytest.mark.parametrize("root,start", [(0.05, 0.07), (0.05, 0.02), (0.3, 0.301), (0.6, 0.59)])
def test_eta05_search_brackets_the_root(root, start):
    p = _logistic(root)
    rel, evals = exp.exact_eta05(p, start, 0.8, 0.05)
    assert p(rel) < 0.05  # the advised rate is one the model puts below the level
    assert root / exp.STEP ** (2.0 ** -exp.ROUNDS) <= rel <= root * (1 + 1e-12)  # and within the bracket's width
    assert all(v == p(k) for k, v in evals.items())


def test_eta05_search_reports_the_margin_and_a_floor():
    rel, evals = exp.exact_eta05(_logistic(0.95), 0.9, 0.8, 0.05)
    assert rel is None and max(evals) == 0.8  # P(0.8 eta*) below the level: the margin binds
    rel, _ = exp.exact_eta05(_logistic(1e-4), 0.05, 0.8, 0.05)
    assert rel == 0.0  # above the level down to the floor


def test_committed_predictions_are_the_caps_of_the_exact_eta05():
    pred = json.loads((OUT / "predictions.json").read_text())
    growth = {exp.eaf._cell(o): o for o in json.loads(exp.eaf.GROWTH_PREDICTIONS.read_text())["onsets"]}
    assert len(pred["cells"]) == len(growth) == 24
    cap = 1 - pred["margin"]
    for c in pred["cells"]:
        o = growth[exp.eaf._cell(c)]
        assert c["eta05_gaussian_rel"] == o["onset05_rel"] and c["eta_exact"] == o["eta_exact"]
        want = cap if c["eta05_rel"] is None else min(c["eta05_rel"], cap)
        assert c["advised_rel"] == pytest.approx(want) and c["eta"] == pytest.approx(want * o["eta_exact"])
        assert c["p_exact_at_advised"] < pred["level"]  # the simulated P where the cap is set
    earlier = {0, 1, 2, 3, *range(10, 18), *range(100, 170), *range(300, 316), *range(400, 440)}
    assert set(pred["seeds"]).isdisjoint(earlier) and len(pred["seeds"]) == 40


def test_committed_counts_are_those_of_the_committed_runs():
    if not (OUT / "runs.json").is_file():
        pytest.skip("the runs of this check have not been committed")
    pred = json.loads((OUT / "predictions.json").read_text())
    rows = json.loads((OUT / "runs.json").read_text())
    summary = json.loads((OUT / "summary.json").read_text())["scores"]
    sc = exp.eaf.score(pred, rows)
    assert (sc["over"], sc["lower_over"], sc["n_cells"]) == (summary["over"], summary["lower_over"], summary["n_cells"])
    assert sc["pooled"] == pytest.approx(summary["pooled"])
    assert len(rows) == 40 * 24
