"""The whole-displacement escape cap check: its advised rates come from the committed growth predictions, and its
counts of cells over the level are those of the runs (a cell of known rates)."""

from __future__ import annotations

import json

import pytest

from _experiments import load_experiment

exp = load_experiment("escape_advise_full")


def test_the_advised_rate_is_the_growth_models_eta05_capped_by_the_margin(tmp_path):
    pred = exp.predict(tmp_path, log=lambda *a: None)
    growth = {exp._cell(o): o for o in json.loads(exp.GROWTH_PREDICTIONS.read_text())["onsets"]}
    assert len(pred["cells"]) == len(growth) == 24
    for c in pred["cells"]:
        o = growth[exp._cell(c)]
        assert c["advised_rel"] == pytest.approx(min(o["onset05_rel"], 1 - pred["margin"]))
        assert c["eta"] == pytest.approx(c["advised_rel"] * o["eta_exact"])
        assert c["binding"] == ("escape" if o["onset05_rel"] <= 1 - pred["margin"] else "margin")
    assert set(pred["seeds"]).isdisjoint({0, 1, 2, 3, *range(10, 18), *range(100, 170), *range(300, 316)})


def test_cells_over_the_level_are_counted_from_the_runs(tmp_path):
    pred = exp.predict(tmp_path, log=lambda *a: None)
    names = [exp._name(exp._cell(c)) for c in pred["cells"]]
    # cell 0: 2 of 40 unstable (0.05: not over); cell 1: 3 of 40 (over, lower bound below 0.05); cell 2: 20 of 40
    # (over, lower bound over); the rest none
    unstable = {names[0]: 2, names[1]: 3, names[2]: 20}
    rows = [dict(cell=n, seed=s, measured="drifting" if s - 400 < unstable.get(n, 0) else "stable",
                 unstable=s - 400 < unstable.get(n, 0)) for n in names for s in pred["seeds"]]
    sc = exp.score(pred, rows)
    assert [c["over"] for c in sc["cells"][:3]] == [False, True, True]
    assert [c["lower_over"] for c in sc["cells"][:3]] == [False, False, True]
    assert sc["over"] == 2 and sc["lower_over"] == 1
    assert sc["pooled"] == pytest.approx(25 / (40 * len(names)))
